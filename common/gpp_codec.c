/* gpp_codec: bounded little-endian put/get (see gpp_codec.h). */
#include "common/gpp_codec.h"

#include <assert.h>
#include <endian.h>
#include <string.h>

gpp_codec_t gpp_codec_writer(void *buf, size_t len)
{
    assert(buf || !len);
    return (gpp_codec_t){.buf = buf, .len = len};
}

gpp_codec_t gpp_codec_reader(const void *buf, size_t len)
{
    assert(buf || !len);
    return (gpp_codec_t){.buf = (unsigned char *)buf, .len = len};
}

/* The next n bytes, or NULL (and overrun) when they are not all there. */
static unsigned char *s_take(gpp_codec_t *c, size_t n)
{
    assert(c);
    if (c->overrun || n > c->len - c->pos) {
        c->overrun = 1;
        return NULL;
    }
    unsigned char *p = c->buf + c->pos;
    c->pos += n;
    return p;
}

int gpp_codec_put_u32(gpp_codec_t *c, uint32_t v)
{
    unsigned char *p = s_take(c, 4);
    if (!p)
        return -1;
    v = htole32(v);
    memcpy(p, &v, 4);
    return 0;
}

int gpp_codec_put_u64(gpp_codec_t *c, uint64_t v)
{
    unsigned char *p = s_take(c, 8);
    if (!p)
        return -1;
    v = htole64(v);
    memcpy(p, &v, 8);
    return 0;
}

int gpp_codec_put_i64(gpp_codec_t *c, int64_t v)
{
    return gpp_codec_put_u64(c, (uint64_t)v);
}

int gpp_codec_put_bytes(gpp_codec_t *c, const void *p, size_t n)
{
    unsigned char *q = s_take(c, n);
    if (!q)
        return -1;
    if (n)
        memcpy(q, p, n);
    return 0;
}

int gpp_codec_put_str(gpp_codec_t *c, const char *s)
{
    size_t n = strlen(s);
    if (n > UINT32_MAX || (!c->overrun && 4 + n > c->len - c->pos)) {
        c->overrun = 1;
        return -1;
    }
    gpp_codec_put_u32(c, (uint32_t)n);
    return gpp_codec_put_bytes(c, s, n);
}

/* Copies n 4-byte values between host order and little-endian (the same
 * swap both ways); dst == src works. */
static void s_swap32s(void *dst, const void *src, size_t n)
{
#if __BYTE_ORDER == __LITTLE_ENDIAN
    if (dst != src && n)
        memmove(dst, src, n * 4);
#else
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        memcpy(&x, (const unsigned char *)src + 4 * i, 4);
        x = htole32(x);
        memcpy((unsigned char *)dst + 4 * i, &x, 4);
    }
#endif
}

int gpp_codec_put_array32(gpp_codec_t *c, const void *v, size_t n)
{
    if (n > (c->len - c->pos) / 4) {
        c->overrun = 1;
        return -1;
    }
    unsigned char *p = s_take(c, n * 4);
    if (!p)
        return -1;
    s_swap32s(p, v, n);
    return 0;
}

int gpp_codec_get_u32(gpp_codec_t *c, uint32_t *v)
{
    const unsigned char *p = s_take(c, 4);
    uint32_t x = 0;
    if (p)
        memcpy(&x, p, 4);
    *v = le32toh(x);
    return p ? 0 : -1;
}

int gpp_codec_get_u64(gpp_codec_t *c, uint64_t *v)
{
    const unsigned char *p = s_take(c, 8);
    uint64_t x = 0;
    if (p)
        memcpy(&x, p, 8);
    *v = le64toh(x);
    return p ? 0 : -1;
}

int gpp_codec_get_i64(gpp_codec_t *c, int64_t *v)
{
    uint64_t u;
    int rc = gpp_codec_get_u64(c, &u);
    /* u - 2^64 for u >= 2^63, without an implementation-defined cast */
    *v = u <= INT64_MAX ? (int64_t)u : -(int64_t)(UINT64_MAX - u) - 1;
    return rc;
}

int gpp_codec_get_bytes(gpp_codec_t *c, void *p, size_t n)
{
    const unsigned char *q = s_take(c, n);
    if (!q) {
        if (n)
            memset(p, 0, n);
        return -1;
    }
    if (n)
        memcpy(p, q, n);
    return 0;
}

int gpp_codec_get_str(gpp_codec_t *c, char *s, size_t cap)
{
    assert(s && cap > 0);
    s[0] = 0;
    uint32_t n;
    if (gpp_codec_get_u32(c, &n) < 0)
        return -1;
    if (n >= cap) {
        c->overrun = 1;
        return -1;
    }
    if (gpp_codec_get_bytes(c, s, n) < 0)
        return -1;
    s[n] = 0;
    return 0;
}

int gpp_codec_get_array32(gpp_codec_t *c, void *v, size_t n)
{
    if (n > (c->len - c->pos) / 4) {
        c->overrun = 1;
        return -1;
    }
    const unsigned char *p = s_take(c, n * 4);
    if (!p)
        return -1;
    s_swap32s(v, p, n);
    return 0;
}
