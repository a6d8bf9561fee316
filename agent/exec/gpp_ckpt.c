/* gpp_ckpt: checkpoint save/load (format in gpp_ckpt.h). */
#include "agent/exec/gpp_ckpt.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_atomic_file.h"
#include "agent/exec/gpp_hash.h"

#define CHUNK_BYTES ((size_t)4 << 20)

static const char *s_optim_name(uint32_t k)
{
    return k == GPP_OPTIM_SGD ? "sgd" : k == GPP_OPTIM_ADAMW ? "adamw" : "unknown";
}

/* ---- save ---- */

typedef struct {
    gpp_atomic_file_t *f;
    uint32_t crc;
} writer_t;

static int s_w(writer_t *w, const void *p, size_t len, gpp_err_t *err)
{
    w->crc = gpp_crc32(w->crc, p, len);
    return gpp_atomic_file_write(w->f, p, len, err);
}

static int s_w32(writer_t *w, uint32_t v, gpp_err_t *err)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    return s_w(w, b, 4, err);
}

static int s_w64(writer_t *w, uint64_t v, gpp_err_t *err)
{
    if (s_w32(w, (uint32_t)v, err) < 0)
        return -1;
    return s_w32(w, (uint32_t)(v >> 32), err);
}

/* Device floats -> file through a host buffer. */
static int s_w_device(writer_t *w, gpp_stream_t *s, const float *dev, int64_t numel, void *host,
                      gpp_err_t *err)
{
    size_t total = (size_t)numel * 4;
    for (size_t off = 0; off < total; off += CHUNK_BYTES) {
        size_t part = total - off < CHUNK_BYTES ? total - off : CHUNK_BYTES;
        if (gpp_stream_copy(s, host, (const char *)dev + off, part, GPP_COPY_D2H, err) < 0 ||
            gpp_stream_sync(s, err) < 0 || s_w(w, host, part, err) < 0)
            return -1;
    }
    return 0;
}

int gpp_ckpt_save(gpp_exec_t *ex, const char *path, gpp_err_t *err)
{
    assert(ex && path);
    const gpp_graph_t *g = gpp_exec_graph(ex);
    gpp_stream_t *s = gpp_exec_stream(ex);
    int nb = gpp_exec_optim_nbufs(ex), np = gpp_exec_n_params(ex);
    writer_t w = {0};
    void *host = gpp_xcalloc(1, CHUNK_BYTES);
    int rc = -1;
    if (gpp_stream_sync(s, err) < 0 || !(w.f = gpp_atomic_file_open(path, err)))
        goto done;
    if (s_w(&w, GPP_CKPT_MAGIC "", 8, err) < 0 || s_w32(&w, GPP_CKPT_VERSION, err) < 0 ||
        s_w32(&w, (uint32_t)gpp_exec_optim(ex)->kind, err) < 0 ||
        s_w64(&w, (uint64_t)gpp_exec_step_count(ex), err) < 0 ||
        s_w32(&w, (uint32_t)strlen(g->spec), err) < 0 ||
        s_w(&w, g->spec, strlen(g->spec), err) < 0 || s_w32(&w, (uint32_t)(np * (1 + nb)), err) < 0)
        goto done;
    for (int i = 0; i < np; i++) {
        const char *name = gpp_exec_param_name(ex, i);
        gpp_tensor_t *t = gpp_exec_param(ex, i);
        for (int role = 0; role <= nb; role++) {
            const float *src =
                role == 0 ? gpp_tensor_f32(t) : gpp_exec_param_state(ex, i, role - 1);
            if (s_w32(&w, (uint32_t)strlen(name), err) < 0 ||
                s_w(&w, name, strlen(name), err) < 0 || s_w32(&w, (uint32_t)role, err) < 0 ||
                s_w64(&w, (uint64_t)t->rows, err) < 0 || s_w64(&w, (uint64_t)t->cols, err) < 0 ||
                s_w_device(&w, s, src, t->rows * t->cols, host, err) < 0)
                goto done;
        }
    }
    uint32_t crc = w.crc;
    if (s_w32(&w, crc, err) < 0)
        goto done;
    rc = gpp_atomic_file_commit(&w.f, err);
done:
    if (rc < 0)
        gpp_err_prefix(err, "saving checkpoint %s (any previous file there is untouched)", path);
    gpp_atomic_file_destroy(&w.f);
    free(host);
    return rc;
}

/* ---- load ---- */

typedef struct {
    char *name;
    uint32_t role;
    int64_t rows, cols;
    long offset; /* of the data */
} entry_t;

typedef struct {
    FILE *f;
    const char *path;
    long size, pos;
} reader_t;

static int s_r(reader_t *r, void *p, size_t len, gpp_err_t *err)
{
    if ((long)len > r->size - 4 - r->pos || fread(p, 1, len, r->f) != len)
        return gpp_err_set(err, "checkpoint %s: truncated or corrupt at byte %ld", r->path, r->pos);
    r->pos += (long)len;
    return 0;
}

static int s_r32(reader_t *r, uint32_t *v, gpp_err_t *err)
{
    unsigned char b[4];
    if (s_r(r, b, 4, err) < 0)
        return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int s_r64(reader_t *r, uint64_t *v, gpp_err_t *err)
{
    uint32_t lo, hi;
    if (s_r32(r, &lo, err) < 0 || s_r32(r, &hi, err) < 0)
        return -1;
    *v = (uint64_t)lo | (uint64_t)hi << 32;
    return 0;
}

static const entry_t *s_find(const entry_t *e, uint32_t n, const char *name, uint32_t role)
{
    for (uint32_t i = 0; i < n; i++)
        if (e[i].role == role && strcmp(e[i].name, name) == 0)
            return &e[i];
    return NULL;
}

int gpp_ckpt_load(gpp_exec_t *ex, const char *path, gpp_err_t *err)
{
    assert(ex && path);
    const gpp_graph_t *g = gpp_exec_graph(ex);
    gpp_stream_t *s = gpp_exec_stream(ex);
    reader_t r = {.path = path};
    entry_t *ents = NULL;
    uint32_t n_ents = 0;
    char *spec = NULL;
    void *host = gpp_xcalloc(1, CHUNK_BYTES);
    int rc = -1;
    if (!(r.f = fopen(path, "rb"))) {
        gpp_err_set(err, "checkpoint %s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    if (fseek(r.f, 0, SEEK_END) != 0 || (r.size = ftell(r.f)) < 0 || fseek(r.f, 0, SEEK_SET) != 0) {
        gpp_err_set(err, "checkpoint %s: cannot seek: %s", path, strerror(errno));
        goto done;
    }
    /* 1. whole-file checks before anything is interpreted */
    char magic[8] = {0};
    if (r.size < 12 || fread(magic, 1, 8, r.f) != 8 || memcmp(magic, GPP_CKPT_MAGIC, 8) != 0) {
        gpp_err_set(err, "checkpoint %s: not a gpp checkpoint (bad magic)", path);
        goto done;
    }
    r.pos = 8;
    uint32_t version;
    if (s_r32(&r, &version, err) < 0)
        goto done;
    if (version != GPP_CKPT_VERSION) {
        gpp_err_set(err, "checkpoint %s: format version %u, this gpp reads version %d", path,
                    version, GPP_CKPT_VERSION);
        goto done;
    }
    uint32_t crc = 0, stored;
    rewind(r.f);
    for (long off = 0; off < r.size - 4;) {
        size_t part =
            (size_t)(r.size - 4 - off) < CHUNK_BYTES ? (size_t)(r.size - 4 - off) : CHUNK_BYTES;
        if (fread(host, 1, part, r.f) != part) {
            gpp_err_set(err, "checkpoint %s: read failed: %s", path, strerror(errno));
            goto done;
        }
        crc = gpp_crc32(crc, host, part);
        off += (long)part;
    }
    unsigned char b[4];
    if (fread(b, 1, 4, r.f) != 4) {
        gpp_err_set(err, "checkpoint %s: read failed", path);
        goto done;
    }
    stored = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    if (crc != stored) {
        gpp_err_set(err,
                    "checkpoint %s: checksum mismatch (file corrupted or truncated); use an "
                    "older checkpoint",
                    path);
        goto done;
    }
    /* 2. the table of tensors */
    if (fseek(r.f, 12, SEEK_SET) != 0) {
        gpp_err_set(err, "checkpoint %s: cannot seek", path);
        goto done;
    }
    r.pos = 12;
    uint32_t kind, spec_len;
    uint64_t steps;
    if (s_r32(&r, &kind, err) < 0 || s_r64(&r, &steps, err) < 0 || s_r32(&r, &spec_len, err) < 0)
        goto done;
    if (spec_len > 4096) {
        gpp_err_set(err, "checkpoint %s: corrupt header (spec length %u)", path, spec_len);
        goto done;
    }
    spec = gpp_xcalloc(1, spec_len + 1);
    if (s_r(&r, spec, spec_len, err) < 0 || s_r32(&r, &n_ents, err) < 0)
        goto done;
    if (strcmp(spec, g->spec) != 0) {
        gpp_err_set(err,
                    "checkpoint %s is for model '%s', this run trains '%s'; pass the "
                    "checkpoint's --model or drop --load",
                    path, spec, g->spec);
        goto done;
    }
    if (kind != (uint32_t)gpp_exec_optim(ex)->kind) {
        gpp_err_set(err,
                    "checkpoint %s holds %s optimizer state, this run uses %s; pass "
                    "--optimizer %s",
                    path, s_optim_name(kind), s_optim_name(gpp_exec_optim(ex)->kind),
                    s_optim_name(kind));
        goto done;
    }
    if ((long)n_ents > r.size / 24) {
        gpp_err_set(err, "checkpoint %s: corrupt header (%u tensors)", path, n_ents);
        goto done;
    }
    ents = gpp_xcalloc(n_ents + 1, sizeof *ents);
    for (uint32_t i = 0; i < n_ents; i++) {
        uint32_t nl;
        uint64_t rows, cols;
        if (s_r32(&r, &nl, err) < 0)
            goto done;
        if (nl > 1024) {
            gpp_err_set(err, "checkpoint %s: corrupt tensor %u (name length %u)", path, i, nl);
            goto done;
        }
        ents[i].name = gpp_xcalloc(1, nl + 1);
        if (s_r(&r, ents[i].name, nl, err) < 0 || s_r32(&r, &ents[i].role, err) < 0 ||
            s_r64(&r, &rows, err) < 0 || s_r64(&r, &cols, err) < 0)
            goto done;
        ents[i].rows = (int64_t)rows, ents[i].cols = (int64_t)cols;
        ents[i].offset = r.pos;
        if (rows > (1ULL << 40) || cols > (1ULL << 40) ||
            (double)rows * (double)cols * 4 > (double)(r.size - 4 - r.pos)) {
            gpp_err_set(err,
                        "checkpoint %s: tensor '%s' [%llu, %llu] runs past the end of the "
                        "file",
                        path, ents[i].name, (unsigned long long)rows, (unsigned long long)cols);
            goto done;
        }
        r.pos += (long)(rows * cols * 4);
        if (fseek(r.f, r.pos, SEEK_SET) != 0) {
            gpp_err_set(err, "checkpoint %s: cannot seek", path);
            goto done;
        }
    }
    if (r.pos != r.size - 4) {
        gpp_err_set(err, "checkpoint %s: %ld unexpected bytes after the last tensor", path,
                    r.size - 4 - r.pos);
        goto done;
    }
    int nb = gpp_exec_optim_nbufs(ex), np = gpp_exec_n_params(ex);
    for (int i = 0; i < np; i++) {
        const char *name = gpp_exec_param_name(ex, i);
        const gpp_tensor_t *t = gpp_exec_param(ex, i);
        for (uint32_t role = 0; role <= (uint32_t)nb; role++) {
            const entry_t *e = s_find(ents, n_ents, name, role);
            if (!e) {
                gpp_err_set(err,
                            "checkpoint %s has no tensor '%s'%s; it was written for another "
                            "model or stage",
                            path, name, role ? " (optimizer state)" : "");
                goto done;
            }
            if (e->rows != t->rows || e->cols != t->cols) {
                gpp_err_set(err,
                            "checkpoint %s: tensor '%s' is [%lld, %lld], the model needs "
                            "[%lld, %lld]; it was written for another model",
                            path, name, (long long)e->rows, (long long)e->cols, (long long)t->rows,
                            (long long)t->cols);
                goto done;
            }
        }
    }
    /* 3. everything checked: load */
    if (gpp_stream_sync(s, err) < 0)
        goto done;
    for (int i = 0; i < np; i++) {
        const char *name = gpp_exec_param_name(ex, i);
        gpp_tensor_t *t = gpp_exec_param(ex, i);
        for (uint32_t role = 0; role <= (uint32_t)nb; role++) {
            const entry_t *e = s_find(ents, n_ents, name, role);
            char *dst = (char *)(role == 0 ? gpp_tensor_f32(t)
                                           : gpp_exec_param_state(ex, i, (int)role - 1));
            size_t total = (size_t)(e->rows * e->cols) * 4;
            if (fseek(r.f, e->offset, SEEK_SET) != 0) {
                gpp_err_set(err, "checkpoint %s: cannot seek", path);
                goto done;
            }
            for (size_t off = 0; off < total; off += CHUNK_BYTES) {
                size_t part = total - off < CHUNK_BYTES ? total - off : CHUNK_BYTES;
                if (fread(host, 1, part, r.f) != part) {
                    gpp_err_set(err, "checkpoint %s: read failed: %s", path, strerror(errno));
                    goto done;
                }
                if (gpp_stream_copy(s, dst + off, host, part, GPP_COPY_H2D, err) < 0 ||
                    gpp_stream_sync(s, err) < 0)
                    goto done;
            }
        }
    }
    gpp_exec_set_step_count(ex, (int64_t)steps);
    rc = 0;
done:
    if (r.f)
        fclose(r.f);
    for (uint32_t i = 0; ents && i < n_ents; i++)
        free(ents[i].name);
    free(ents);
    free(spec);
    free(host);
    return rc;
}
