/* gpp_codec: bounded little-endian encoding into, and decoding from, a
 * memory buffer. The one codec of gpp's binary files (checkpoints, dataset
 * files): every integer and float on disk is little-endian, whatever the
 * host.
 *
 * Every put and get checks the bound: one that does not fit moves nothing,
 * returns -1 and sets the sticky `overrun` flag, and every later call then
 * fails too, so a run of calls can be checked once at the end. A failed get
 * of a number, bytes or a string leaves it zero (empty).
 *
 *   unsigned char b[28];
 *   gpp_codec_t c = gpp_codec_writer(b, sizeof b);
 *   gpp_codec_put_u32(&c, 1); gpp_codec_put_i64(&c, rows); ...
 *   if (c.overrun) ...            c.pos bytes are encoded
 *
 * The codec only moves bytes: what a number means and which values are
 * valid (counts, sizes, shapes) is for the format's reader to check. */
#ifndef GPP_CODEC_H
#define GPP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    unsigned char *buf; /* borrowed; a reader never writes to it */
    size_t len;         /* bytes in buf */
    size_t pos;         /* next byte to put or get */
    int overrun;        /* set by the first put or get that did not fit */
} gpp_codec_t;

/* A codec over buf[0, len): puts write there, gets read from there. */
gpp_codec_t gpp_codec_writer(void *buf, size_t len);
gpp_codec_t gpp_codec_reader(const void *buf, size_t len);

int gpp_codec_put_u32(gpp_codec_t *c, uint32_t v);
int gpp_codec_put_u64(gpp_codec_t *c, uint64_t v);
int gpp_codec_put_i64(gpp_codec_t *c, int64_t v);
/* n raw bytes. */
int gpp_codec_put_bytes(gpp_codec_t *c, const void *p, size_t n);
/* u32 length, then the characters (no NUL). */
int gpp_codec_put_str(gpp_codec_t *c, const char *s);
/* n 4-byte values (f32 or i32) in host order; v may be the very bytes they
 * are encoded into (in place: c->buf + c->pos). */
int gpp_codec_put_array32(gpp_codec_t *c, const void *v, size_t n);

int gpp_codec_get_u32(gpp_codec_t *c, uint32_t *v);
int gpp_codec_get_u64(gpp_codec_t *c, uint64_t *v);
/* Two's complement: any 64 bits are a valid i64 (check the range). */
int gpp_codec_get_i64(gpp_codec_t *c, int64_t *v);
int gpp_codec_get_bytes(gpp_codec_t *c, void *p, size_t n);
/* A string put by gpp_codec_put_str into s[cap], NUL-terminated; -1 (an
 * overrun) when it has cap characters or more. */
int gpp_codec_get_str(gpp_codec_t *c, char *s, size_t cap);
/* n 4-byte values (f32 or i32) to host order; v may be the very bytes they
 * are decoded from (in place). */
int gpp_codec_get_array32(gpp_codec_t *c, void *v, size_t n);

#ifdef __cplusplus
}
#endif

#endif
