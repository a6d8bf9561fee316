/* gpp_ckpt: the stage checkpoint file (format in gpp_ckpt.h). Every number
 * goes through gpp_codec, the CRC is zlib's crc32. */
#include "ckpt/gpp_ckpt.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/gpp_atomic_file.h"
#include "common/gpp_codec.h"
#include "common/gpp_fault.h"

#define CHUNK_BYTES ((size_t)4 << 20)
#define NAME_MAX_LEN 1024
#define ENTRY_MIN_BYTES 24 /* u32 name_len, u32 role, i64 rows, i64 cols */
#define MAX_DIM ((int64_t)1 << 31)

/* ---- writing ---- */

struct gpp_ckpt_writer_s {
    gpp_atomic_file_t *f;
    uint32_t crc;         /* of every byte written */
    unsigned char *bytes; /* CHUNK_BYTES */
};

/* Writes what the codec holds, folds it into the CRC and empties it. */
static int s_flush(gpp_ckpt_writer_t *w, gpp_codec_t *c, gpp_err_t *err)
{
    assert(!c->overrun);
    w->crc = (uint32_t)crc32_z(w->crc, c->buf, c->pos);
    int rc = gpp_atomic_file_write(w->f, c->buf, c->pos, err);
    c->pos = 0;
    return rc;
}

/* For the ckpt_kill hook at a save after the first: waits (10 s at most)
 * until the newest set before this file's has its MANIFEST.json, so the
 * crash comes after the coordinator committed it. The reports that let it
 * commit travel on after this process has saved (through the agent's main
 * thread and ZeroMQ's I/O thread), and a process killed a few milliseconds
 * later on a loaded machine could take them along. */
static void s_wait_committed(const char *path)
{
    char dir[4096], prev[300] = "";
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = 0; /* the set's directory */
    char *set = strrchr(dir, '/');
    if (!set)
        return;
    *set++ = 0; /* dir: the checkpoint directory; set: this set's name (zero-padded) */
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, "set-", 4) == 0 && strcmp(e->d_name, set) < 0 &&
            strcmp(e->d_name, prev) > 0)
            snprintf(prev, sizeof prev, "%s", e->d_name);
    if (d)
        closedir(d);
    if (!prev[0])
        return;
    char man[4096 + 320];
    snprintf(man, sizeof man, "%s/%s/MANIFEST.json", dir, prev);
    for (int tries = 0; tries < 1000 && access(man, F_OK) != 0; tries++)
        usleep(10 * 1000);
}

gpp_ckpt_writer_t *gpp_ckpt_writer_new(const char *path, const gpp_ckpt_header_t *h,
                                       uint32_t n_tensors, gpp_err_t *err)
{
    assert(path && h);
    gpp_ckpt_writer_t *w = gpp_xcalloc(1, sizeof *w);
    w->bytes = gpp_xcalloc(1, CHUNK_BYTES);
    if (!(w->f = gpp_atomic_file_open(path, err))) {
        gpp_ckpt_writer_destroy(&w);
        return NULL;
    }
    gpp_codec_t c = gpp_codec_writer(w->bytes, CHUNK_BYTES);
    gpp_codec_put_bytes(&c, GPP_CKPT_MAGIC "", 8);
    gpp_codec_put_u32(&c, GPP_CKPT_VERSION);
    gpp_codec_put_u32(&c, h->optimizer);
    gpp_codec_put_u64(&c, h->steps);
    gpp_codec_put_str(&c, h->spec);
    gpp_codec_put_u32(&c, n_tensors);
    if (s_flush(w, &c, err) < 0) {
        gpp_ckpt_writer_destroy(&w);
        return NULL;
    }
    /* the ckpt_kill hook: a crash with the header in the temp file */
    static int saves; /* this process's, for the hook */
    if (gpp_fault(GPP_FAULT_CKPT_KILL) && gpp_fault_arg(GPP_FAULT_CKPT_KILL) == saves++) {
        if (saves > 1)
            s_wait_committed(path);
        gpp_warn("fault injection: ckpt_kill: killing pid %d while saving %s", (int)getpid(), path);
        raise(SIGKILL);
    }
    return w;
}

int gpp_ckpt_writer_tensor(gpp_ckpt_writer_t *self, const char *name, uint32_t role, int64_t rows,
                           int64_t cols, gpp_err_t *err)
{
    assert(self && name && role < GPP_CKPT_MAX_ROLES);
    gpp_codec_t c = gpp_codec_writer(self->bytes, CHUNK_BYTES);
    gpp_codec_put_str(&c, name);
    gpp_codec_put_u32(&c, role);
    gpp_codec_put_i64(&c, rows);
    gpp_codec_put_i64(&c, cols);
    return s_flush(self, &c, err);
}

int gpp_ckpt_writer_data(gpp_ckpt_writer_t *self, const float *v, size_t n, gpp_err_t *err)
{
    assert(self && (v || n == 0));
    const size_t chunk = CHUNK_BYTES / 4;
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        gpp_codec_t c = gpp_codec_writer(self->bytes, CHUNK_BYTES);
        gpp_codec_put_array32(&c, v + off, k);
        if (s_flush(self, &c, err) < 0)
            return -1;
    }
    return 0;
}

int gpp_ckpt_writer_commit(gpp_ckpt_writer_t **self_p, gpp_err_t *err)
{
    assert(self_p && *self_p);
    gpp_ckpt_writer_t *w = *self_p;
    gpp_codec_t c = gpp_codec_writer(w->bytes, CHUNK_BYTES);
    gpp_codec_put_u32(&c, w->crc);
    int rc = s_flush(w, &c, err) < 0 ? -1 : gpp_atomic_file_commit(&w->f, err);
    gpp_ckpt_writer_destroy(self_p);
    return rc;
}

void gpp_ckpt_writer_destroy(gpp_ckpt_writer_t **self_p)
{
    assert(self_p);
    gpp_ckpt_writer_t *w = *self_p;
    if (!w)
        return;
    gpp_atomic_file_destroy(&w->f);
    free(w->bytes);
    free(w);
    *self_p = NULL;
}

/* ---- reading ---- */

typedef struct {
    gpp_ckpt_entry_t pub; /* pub.name: name */
    char *name;
    int64_t offset; /* of the data */
} entry_t;

struct gpp_ckpt_reader_s {
    FILE *f;
    const char *path;
    int64_t size, pos;  /* body: [0, size - 4), then the CRC */
    uint32_t crc;       /* of the body bytes read so far */
    unsigned char *buf; /* grows to the largest read (at most CHUNK_BYTES); freed after a
                           pass, so that many readers hold one buffer at a time */
    size_t cap;
    int index_only; /* s_scan seeks over the data (no value or CRC check) */
    int verified;   /* the whole file passed: values finite, CRC right */
    gpp_ckpt_header_t h;
    entry_t *ents;
    uint32_t n_ents;
};

/* self->buf with room for n (<= CHUNK_BYTES) bytes. */
static unsigned char *s_buf(gpp_ckpt_reader_t *r, size_t n)
{
    assert(n <= CHUNK_BYTES);
    if (!r->buf || n > r->cap) { /* never NULL: crc32_z(crc, NULL, 0) restarts the CRC */
        size_t cap = r->cap * 2 > n ? r->cap * 2 : n;
        cap = cap > 4096 ? cap : 4096;
        r->cap = cap < CHUNK_BYTES ? cap : CHUNK_BYTES;
        free(r->buf);
        r->buf = gpp_xcalloc(1, r->cap);
    }
    return r->buf;
}

static void s_buf_free(gpp_ckpt_reader_t *r)
{
    free(r->buf);
    r->buf = NULL;
    r->cap = 0;
}

/* The next n (<= CHUNK_BYTES) bytes of the body into r->buf, folded into
 * the CRC; *c decodes them. */
static int s_next(gpp_ckpt_reader_t *r, size_t n, gpp_codec_t *c, gpp_err_t *err)
{
    assert(n <= CHUNK_BYTES);
    if ((int64_t)n > r->size - 4 - r->pos)
        return gpp_err_set(err, "checkpoint %s: truncated or corrupt at byte %lld", r->path,
                           (long long)r->pos);
    s_buf(r, n);
    GPP_SYS_TRY(fread(r->buf, 1, n, r->f) == n, err, "checkpoint %s: read failed", r->path);
    r->crc = (uint32_t)crc32_z(r->crc, r->buf, n);
    r->pos += (int64_t)n;
    *c = gpp_codec_reader(r->buf, n);
    return 0;
}

/* One tensor's data: read, checked finite (index_only: skipped over). */
static int s_scan_data(gpp_ckpt_reader_t *r, const entry_t *e, gpp_err_t *err)
{
    int64_t numel = e->pub.rows * e->pub.cols, chunk = (int64_t)(CHUNK_BYTES / 4);
    if (r->index_only) {
        r->pos += numel * 4;
        GPP_SYS_TRY(fseeko(r->f, (off_t)r->pos, SEEK_SET) == 0, err, "checkpoint %s: cannot seek",
                    r->path);
        return 0;
    }
    for (int64_t off = 0; off < numel; off += chunk) {
        size_t n = (size_t)(numel - off < chunk ? numel - off : chunk);
        gpp_codec_t c;
        if (s_next(r, n * 4, &c, err) < 0)
            return -1;
        float *v = (float *)(void *)r->buf;
        gpp_codec_get_array32(&c, v, n); /* in place */
        for (size_t i = 0; i < n; i++)
            if (!isfinite(v[i]))
                return gpp_err_set(err,
                                   "checkpoint %s: tensor '%s'%s holds %s at element %lld; the "
                                   "run that wrote it diverged: use an earlier checkpoint",
                                   r->path, e->name, e->pub.role ? " (optimizer state)" : "",
                                   isnan(v[i]) ? "NaN" : "Inf", (long long)(off + (int64_t)i));
    }
    return 0;
}

/* One sequential read of the body after magic and version: the header, the
 * table of tensors and every value, each number checked. */
static int s_scan(gpp_ckpt_reader_t *r, gpp_err_t *err)
{
    gpp_codec_t c;
    uint32_t spec_len;
    if (s_next(r, 16, &c, err) < 0)
        return -1;
    gpp_codec_get_u32(&c, &r->h.optimizer);
    gpp_codec_get_u64(&c, &r->h.steps);
    gpp_codec_get_u32(&c, &spec_len);
    if (spec_len > GPP_CKPT_SPEC_MAX)
        return gpp_err_set(err, "checkpoint %s: corrupt header (spec length %u)", r->path,
                           spec_len);
    if (r->h.steps > GPP_CKPT_MAX_STEPS)
        return gpp_err_set(err, "checkpoint %s: corrupt header (%llu optimizer steps)", r->path,
                           (unsigned long long)r->h.steps);
    if (s_next(r, spec_len, &c, err) < 0)
        return -1;
    gpp_codec_get_bytes(&c, r->h.spec, spec_len);
    r->h.spec[spec_len] = 0;
    uint32_t n;
    if (s_next(r, 4, &c, err) < 0)
        return -1;
    gpp_codec_get_u32(&c, &n);
    if ((int64_t)n > r->size / ENTRY_MIN_BYTES)
        return gpp_err_set(err, "checkpoint %s: corrupt header (%u tensors)", r->path, n);
    r->ents = gpp_xcalloc((size_t)n + 1, sizeof *r->ents);
    for (uint32_t i = 0; i < n; i++) {
        entry_t *e = &r->ents[i];
        uint32_t nl;
        if (s_next(r, 4, &c, err) < 0)
            return -1;
        gpp_codec_get_u32(&c, &nl);
        if (nl > NAME_MAX_LEN)
            return gpp_err_set(err, "checkpoint %s: corrupt tensor %u (name length %u)", r->path, i,
                               nl);
        e->name = gpp_xcalloc(1, nl + 1);
        e->pub.name = e->name;
        r->n_ents = i + 1;
        if (s_next(r, nl, &c, err) < 0)
            return -1;
        gpp_codec_get_bytes(&c, e->name, nl);
        if (s_next(r, 20, &c, err) < 0)
            return -1;
        gpp_codec_get_u32(&c, &e->pub.role);
        gpp_codec_get_i64(&c, &e->pub.rows);
        gpp_codec_get_i64(&c, &e->pub.cols);
        e->offset = r->pos;
        if (e->pub.role >= GPP_CKPT_MAX_ROLES)
            return gpp_err_set(err, "checkpoint %s: corrupt tensor '%s' (role %u)", r->path,
                               e->name, e->pub.role);
        int64_t rows = e->pub.rows, cols = e->pub.cols;
        if (rows < 0 || rows > MAX_DIM || cols < 0 || cols > MAX_DIM ||
            rows * cols > (r->size - 4 - r->pos) / 4)
            return gpp_err_set(err,
                               "checkpoint %s: tensor '%s' [%lld, %lld] runs past the end of "
                               "the file",
                               r->path, e->name, (long long)rows, (long long)cols);
        if (s_scan_data(r, e, err) < 0)
            return -1;
    }
    if (r->pos != r->size - 4)
        return gpp_err_set(err, "checkpoint %s: %lld unexpected bytes after the last tensor",
                           r->path, (long long)(r->size - 4 - r->pos));
    return 0;
}

/* Folds the rest of the body into the CRC and compares it with the stored
 * one. */
static int s_check_crc(gpp_ckpt_reader_t *r, gpp_err_t *err)
{
    GPP_SYS_TRY(fseeko(r->f, (off_t)r->pos, SEEK_SET) == 0, err, "checkpoint %s: cannot seek",
                r->path);
    gpp_codec_t c;
    while (r->pos < r->size - 4) {
        int64_t left = r->size - 4 - r->pos;
        if (s_next(r, left < (int64_t)CHUNK_BYTES ? (size_t)left : CHUNK_BYTES, &c, err) < 0)
            return -1;
    }
    uint32_t stored;
    GPP_SYS_TRY(fread(s_buf(r, 4), 1, 4, r->f) == 4, err, "checkpoint %s: read failed", r->path);
    c = gpp_codec_reader(r->buf, 4);
    gpp_codec_get_u32(&c, &stored);
    if (r->crc != stored)
        return gpp_err_set(err,
                           "checkpoint %s: checksum mismatch (file corrupted or truncated); "
                           "use an older checkpoint",
                           r->path);
    return 0;
}

static void s_release(gpp_ckpt_reader_t *r)
{
    if (r->f)
        fclose(r->f);
    r->f = NULL;
    for (uint32_t i = 0; i < r->n_ents; i++)
        free(r->ents[i].name);
    free(r->ents);
    r->ents = NULL;
    r->n_ents = 0;
}

/* Reads the file from its start: magic, version, then s_scan (the whole
 * body, or with index_only its header and table of tensors only). */
static int s_read(gpp_ckpt_reader_t *r, int index_only, gpp_err_t *err)
{
    s_release(r);
    r->index_only = index_only;
    r->pos = 0;
    r->crc = 0;
    GPP_SYS_TRY((r->f = fopen(r->path, "rb")) != NULL, err, "checkpoint %s: cannot open", r->path);
    GPP_SYS_TRY(fseeko(r->f, 0, SEEK_END) == 0 && (r->size = ftello(r->f)) >= 0 &&
                    fseeko(r->f, 0, SEEK_SET) == 0,
                err, "checkpoint %s: cannot seek", r->path);
    gpp_codec_t c;
    char magic[8];
    uint32_t version;
    if (r->size < 12 || s_next(r, 8, &c, err) < 0 ||
        (gpp_codec_get_bytes(&c, magic, 8), memcmp(magic, GPP_CKPT_MAGIC, 8) != 0))
        return gpp_err_set(err, "checkpoint %s: not a gpp checkpoint (bad magic)", r->path);
    if (s_next(r, 4, &c, err) < 0)
        return -1;
    gpp_codec_get_u32(&c, &version);
    if (version != GPP_CKPT_VERSION)
        return gpp_err_set(err, "checkpoint %s: format version %u, this gpp reads version %d",
                           r->path, version, GPP_CKPT_VERSION);
    if (index_only) { /* the table is all a later step needs of the file */
        int rc = s_scan(r, err);
        fclose(r->f);
        r->f = NULL;
        return rc;
    }
    /* one pass over the body: a malformed body is reported as the checksum
     * mismatch that explains it, when there is one */
    gpp_err_t scan_err = {{0}};
    int scanned = s_scan(r, &scan_err);
    if (s_check_crc(r, err) < 0)
        return -1;
    if (scanned < 0) {
        if (err)
            *err = scan_err;
        return -1;
    }
    r->verified = 1;
    return 0;
}

gpp_ckpt_reader_t *gpp_ckpt_reader_new(const char *path)
{
    assert(path);
    gpp_ckpt_reader_t *r = gpp_xcalloc(1, sizeof *r);
    r->path = path;
    return r;
}

void gpp_ckpt_reader_destroy(gpp_ckpt_reader_t **self_p)
{
    assert(self_p);
    gpp_ckpt_reader_t *r = *self_p;
    if (!r)
        return;
    s_release(r);
    s_buf_free(r);
    free(r);
    *self_p = NULL;
}

const char *gpp_ckpt_reader_path(const gpp_ckpt_reader_t *self)
{
    assert(self);
    return self->path;
}

int gpp_ckpt_reader_index(gpp_ckpt_reader_t *self, gpp_err_t *err)
{
    assert(self);
    int rc = s_read(self, 1, err);
    s_buf_free(self);
    return rc;
}

int gpp_ckpt_reader_verify(gpp_ckpt_reader_t *self, gpp_err_t *err)
{
    assert(self);
    if (self->verified)
        return 0;
    int rc = s_read(self, 0, err);
    s_buf_free(self);
    return rc;
}

int gpp_ckpt_reader_verified(const gpp_ckpt_reader_t *self)
{
    assert(self);
    return self->verified;
}

const gpp_ckpt_header_t *gpp_ckpt_reader_header(const gpp_ckpt_reader_t *self)
{
    assert(self);
    return &self->h;
}

int gpp_ckpt_reader_count(const gpp_ckpt_reader_t *self)
{
    assert(self);
    return (int)self->n_ents;
}

const gpp_ckpt_entry_t *gpp_ckpt_reader_entry(const gpp_ckpt_reader_t *self, int i)
{
    assert(self && i >= 0 && (uint32_t)i < self->n_ents);
    return &self->ents[i].pub;
}

int gpp_ckpt_reader_find(const gpp_ckpt_reader_t *self, const char *name, uint32_t role)
{
    assert(self && name);
    for (uint32_t i = 0; i < self->n_ents; i++)
        if (self->ents[i].pub.role == role && strcmp(self->ents[i].name, name) == 0)
            return (int)i;
    return -1;
}

int gpp_ckpt_reader_data(gpp_ckpt_reader_t *self, int i, int64_t off, size_t n, float *out,
                         gpp_err_t *err)
{
    assert(self && self->verified && self->f && i >= 0 && (uint32_t)i < self->n_ents);
    const entry_t *e = &self->ents[i];
    assert(off >= 0 && off + (int64_t)n <= e->pub.rows * e->pub.cols);
    GPP_SYS_TRY(fseeko(self->f, (off_t)(e->offset + off * 4), SEEK_SET) == 0, err,
                "checkpoint %s: cannot seek", self->path);
    GPP_SYS_TRY(fread(out, 1, n * 4, self->f) == n * 4, err, "checkpoint %s: read failed",
                self->path);
    gpp_codec_t c = gpp_codec_reader(out, n * 4);
    gpp_codec_get_array32(&c, out, n); /* in place */
    return 0;
}
