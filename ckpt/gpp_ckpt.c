/* gpp_ckpt: checkpoint save/load (format in gpp_ckpt.h). The executor lends
 * its state through gpp_exec_params_foreach; every byte goes through
 * gpp_codec and zlib's crc32. */
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
#define SPEC_MAX_LEN 4096
#define NAME_MAX_LEN 1024
#define ENTRY_MIN_BYTES 24 /* u32 name_len, u32 role, i64 rows, i64 cols */
#define MAX_DIM ((int64_t)1 << 31)

static const char *s_optim_name(uint32_t k)
{
    return k == GPP_OPTIM_SGD ? "sgd" : k == GPP_OPTIM_ADAMW ? "adamw" : "unknown";
}

/* ---- save ---- */

typedef struct {
    gpp_atomic_file_t *f;
    gpp_stream_t *s;
    uint32_t crc;         /* of every byte written */
    unsigned char *bytes; /* CHUNK_BYTES */
} writer_t;

/* Writes what the codec holds, folds it into the CRC and empties it. */
static int s_flush(writer_t *w, gpp_codec_t *c, gpp_err_t *err)
{
    assert(!c->overrun);
    w->crc = (uint32_t)crc32_z(w->crc, c->buf, c->pos);
    int rc = gpp_atomic_file_write(w->f, c->buf, c->pos, err);
    c->pos = 0;
    return rc;
}

static int s_count(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    (void)err;
    *(uint32_t *)arg += (uint32_t)p->n_bufs;
    return 0;
}

/* Every buffer of one parameter: header, then the device floats through the
 * byte buffer in chunks. */
/* For the ckpt_kill hook at a save after the first: waits (10 s at most)
 * until the newest set before this file's has its MANIFEST.json, so the
 * crash comes after the coordinator committed it. The reports that let it
 * commit travel on after this process has saved (through the agent's main
 * thread and ZeroMQ's I/O thread), and a process killed a few milliseconds
 * later on a loaded machine could take them along: what the hook tests is
 * a save cut short, not a report lost in flight. */
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

static int s_save_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    writer_t *w = arg;
    int64_t numel = p->rows * p->cols, chunk = (int64_t)(CHUNK_BYTES / 4);
    gpp_codec_t c = gpp_codec_writer(w->bytes, CHUNK_BYTES);
    for (int role = 0; role < p->n_bufs; role++) {
        gpp_codec_put_str(&c, p->name);
        gpp_codec_put_u32(&c, (uint32_t)role);
        gpp_codec_put_i64(&c, p->rows);
        gpp_codec_put_i64(&c, p->cols);
        if (s_flush(w, &c, err) < 0)
            return -1;
        for (int64_t off = 0; off < numel; off += chunk) {
            size_t n = (size_t)(numel - off < chunk ? numel - off : chunk);
            if (gpp_stream_copy(w->s, w->bytes, p->buf[role] + off, n * 4, GPP_COPY_D2H, err) < 0 ||
                gpp_stream_sync(w->s, err) < 0)
                return -1;
            gpp_codec_put_array32(&c, w->bytes, n); /* in place */
            if (s_flush(w, &c, err) < 0)
                return -1;
        }
    }
    return 0;
}

int gpp_ckpt_save(gpp_exec_t *ex, const char *path, gpp_err_t *err)
{
    assert(ex && path);
    const char *spec = gpp_exec_graph(ex)->spec;
    writer_t w = {.s = gpp_exec_stream(ex), .bytes = gpp_xcalloc(1, CHUNK_BYTES)};
    uint32_t n_tensors = 0;
    int rc = -1;
    gpp_exec_params_foreach(ex, s_count, &n_tensors, NULL);
    if (gpp_stream_sync(w.s, err) < 0 || !(w.f = gpp_atomic_file_open(path, err)))
        goto done;
    gpp_codec_t c = gpp_codec_writer(w.bytes, CHUNK_BYTES);
    gpp_codec_put_bytes(&c, GPP_CKPT_MAGIC "", 8);
    gpp_codec_put_u32(&c, GPP_CKPT_VERSION);
    gpp_codec_put_u32(&c, (uint32_t)gpp_exec_optim(ex)->kind);
    gpp_codec_put_u64(&c, (uint64_t)gpp_exec_step_count(ex));
    gpp_codec_put_str(&c, spec);
    gpp_codec_put_u32(&c, n_tensors);
    if (s_flush(&w, &c, err) < 0)
        goto done;
    /* the ckpt_kill hook: a crash with the header in the temp file */
    static int saves; /* this process's, for the hook */
    if (gpp_fault(GPP_FAULT_CKPT_KILL) && gpp_fault_arg(GPP_FAULT_CKPT_KILL) == saves++) {
        if (saves > 1)
            s_wait_committed(path);
        gpp_warn("fault injection: ckpt_kill: killing pid %d while saving %s", (int)getpid(), path);
        raise(SIGKILL);
    }
    if (gpp_exec_params_foreach(ex, s_save_param, &w, err) < 0)
        goto done;
    gpp_codec_put_u32(&c, w.crc);
    if (s_flush(&w, &c, err) < 0)
        goto done;
    rc = gpp_atomic_file_commit(&w.f, err);
done:
    if (rc < 0)
        gpp_err_prefix(err, "saving checkpoint %s (any previous file there is untouched)", path);
    gpp_atomic_file_destroy(&w.f);
    free(w.bytes);
    return rc;
}

/* ---- load ---- */

typedef struct {
    char *name;
    uint32_t role;
    int64_t rows, cols;
    int64_t offset; /* of the data */
} entry_t;

/* The byte buffer the readers of one load share: as large as the largest
 * read so far (at most CHUNK_BYTES), so loading a small file does not
 * allocate and zero 4 MiB. */
typedef struct {
    unsigned char *p;
    size_t cap;
} chunk_buf_t;

typedef struct {
    FILE *f;
    const char *path;
    int64_t size, pos;  /* body: [0, size - 4), then the CRC */
    uint32_t crc;       /* of the body bytes read so far */
    chunk_buf_t *cb;    /* shared by the readers of one load */
    unsigned char *buf; /* cb->p after the last s_buf */
    int index_only;     /* s_scan seeks over the data (no value or CRC check) */
    int verified;       /* s_verify passed: values finite, CRC right */
    /* the header and the table of tensors */
    uint32_t kind;
    uint64_t steps;
    char spec[SPEC_MAX_LEN + 1];
    entry_t *ents;
    uint32_t n_ents;
    gpp_stream_t *s;
} reader_t;

/* r->buf with room for n (<= CHUNK_BYTES) bytes. */
static unsigned char *s_buf(reader_t *r, size_t n)
{
    assert(n <= CHUNK_BYTES);
    chunk_buf_t *b = r->cb;
    if (!b->p || n > b->cap) { /* never NULL: crc32_z(crc, NULL, 0) restarts the CRC */
        size_t cap = b->cap * 2 > n ? b->cap * 2 : n;
        cap = cap > 4096 ? cap : 4096;
        b->cap = cap < CHUNK_BYTES ? cap : CHUNK_BYTES;
        free(b->p);
        b->p = gpp_xcalloc(1, b->cap);
    }
    return r->buf = b->p;
}

/* The next n (<= CHUNK_BYTES) bytes of the body into r->buf, folded into
 * the CRC; *c decodes them. */
static int s_next(reader_t *r, size_t n, gpp_codec_t *c, gpp_err_t *err)
{
    assert(n <= CHUNK_BYTES);
    if ((int64_t)n > r->size - 4 - r->pos)
        return gpp_err_set(err, "checkpoint %s: truncated or corrupt at byte %lld", r->path,
                           (long long)r->pos);
    s_buf(r, n);
    if (fread(r->buf, 1, n, r->f) != n)
        return gpp_err_set(err, "checkpoint %s: read failed: %s", r->path, strerror(errno));
    r->crc = (uint32_t)crc32_z(r->crc, r->buf, n);
    r->pos += (int64_t)n;
    *c = gpp_codec_reader(r->buf, n);
    return 0;
}

/* One tensor's data: read, checked finite (index_only: skipped over). */
static int s_scan_data(reader_t *r, const entry_t *e, gpp_err_t *err)
{
    int64_t numel = e->rows * e->cols, chunk = (int64_t)(CHUNK_BYTES / 4);
    if (r->index_only) {
        r->pos += numel * 4;
        if (fseeko(r->f, (off_t)r->pos, SEEK_SET) != 0)
            return gpp_err_set(err, "checkpoint %s: cannot seek: %s", r->path, strerror(errno));
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
                                   r->path, e->name, e->role ? " (optimizer state)" : "",
                                   isnan(v[i]) ? "NaN" : "Inf", (long long)(off + (int64_t)i));
    }
    return 0;
}

/* Pass 1, one sequential read of the body after magic and version: the
 * header, the table of tensors and every value, each number checked. */
static int s_scan(reader_t *r, gpp_err_t *err)
{
    gpp_codec_t c;
    uint32_t spec_len;
    if (s_next(r, 16, &c, err) < 0)
        return -1;
    gpp_codec_get_u32(&c, &r->kind);
    gpp_codec_get_u64(&c, &r->steps);
    gpp_codec_get_u32(&c, &spec_len);
    if (spec_len > SPEC_MAX_LEN)
        return gpp_err_set(err, "checkpoint %s: corrupt header (spec length %u)", r->path,
                           spec_len);
    if (r->steps > GPP_CKPT_MAX_STEPS)
        return gpp_err_set(err, "checkpoint %s: corrupt header (%llu optimizer steps)", r->path,
                           (unsigned long long)r->steps);
    if (s_next(r, spec_len, &c, err) < 0)
        return -1;
    gpp_codec_get_bytes(&c, r->spec, spec_len);
    r->spec[spec_len] = 0;
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
        r->n_ents = i + 1;
        if (s_next(r, nl, &c, err) < 0)
            return -1;
        gpp_codec_get_bytes(&c, e->name, nl);
        if (s_next(r, 20, &c, err) < 0)
            return -1;
        gpp_codec_get_u32(&c, &e->role);
        gpp_codec_get_i64(&c, &e->rows);
        gpp_codec_get_i64(&c, &e->cols);
        e->offset = r->pos;
        if (e->role >= GPP_EXEC_MAX_BUFS)
            return gpp_err_set(err, "checkpoint %s: corrupt tensor '%s' (role %u)", r->path,
                               e->name, e->role);
        if (e->rows < 0 || e->rows > MAX_DIM || e->cols < 0 || e->cols > MAX_DIM ||
            e->rows * e->cols > (r->size - 4 - r->pos) / 4)
            return gpp_err_set(err,
                               "checkpoint %s: tensor '%s' [%lld, %lld] runs past the end of "
                               "the file",
                               r->path, e->name, (long long)e->rows, (long long)e->cols);
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
static int s_check_crc(reader_t *r, gpp_err_t *err)
{
    if (fseeko(r->f, (off_t)r->pos, SEEK_SET) != 0)
        return gpp_err_set(err, "checkpoint %s: cannot seek: %s", r->path, strerror(errno));
    gpp_codec_t c;
    while (r->pos < r->size - 4) {
        int64_t left = r->size - 4 - r->pos;
        if (s_next(r, left < (int64_t)CHUNK_BYTES ? (size_t)left : CHUNK_BYTES, &c, err) < 0)
            return -1;
    }
    uint32_t stored;
    if (fread(s_buf(r, 4), 1, 4, r->f) != 4)
        return gpp_err_set(err, "checkpoint %s: read failed: %s", r->path, strerror(errno));
    c = gpp_codec_reader(r->buf, 4);
    gpp_codec_get_u32(&c, &stored);
    if (r->crc != stored)
        return gpp_err_set(err,
                           "checkpoint %s: checksum mismatch (file corrupted or truncated); "
                           "use an older checkpoint",
                           r->path);
    return 0;
}

static void s_reader_release(reader_t *r)
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
static int s_read(reader_t *r, int index_only, gpp_err_t *err)
{
    s_reader_release(r);
    r->index_only = index_only;
    r->pos = 0;
    r->crc = 0;
    if (!(r->f = fopen(r->path, "rb")))
        return gpp_err_set(err, "checkpoint %s: cannot open: %s", r->path, strerror(errno));
    if (fseeko(r->f, 0, SEEK_END) != 0 || (r->size = ftello(r->f)) < 0 ||
        fseeko(r->f, 0, SEEK_SET) != 0)
        return gpp_err_set(err, "checkpoint %s: cannot seek: %s", r->path, strerror(errno));
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

/* Every check a file gets: s_read of the whole file (once). */
static int s_verify(reader_t *r, gpp_err_t *err)
{
    return r->verified ? 0 : s_read(r, 0, err);
}

/* The files of one load: a tensor comes from the first that holds it. */
typedef struct {
    reader_t *rs;
    int n;
    char missing[NAME_MAX_LEN + 1]; /* a tensor no file holds ("": none) */
    uint32_t missing_role;
} loader_t;

static const entry_t *s_find(const loader_t *l, const char *name, uint32_t role, reader_t **from)
{
    for (int k = 0; k < l->n; k++)
        for (uint32_t i = 0; i < l->rs[k].n_ents; i++)
            if (l->rs[k].ents[i].role == role && strcmp(l->rs[k].ents[i].name, name) == 0) {
                if (from)
                    *from = &l->rs[k];
                return &l->rs[k].ents[i];
            }
    return NULL;
}

/* Names the files of a load in a message: "checkpoint F" or "checkpoint
 * files F1, ... (n)". */
static void s_files(const loader_t *l, char *out, size_t len)
{
    if (l->n == 1) {
        snprintf(out, len, "checkpoint %s", l->rs[0].path);
        return;
    }
    snprintf(out, len, "none of the %d checkpoint files %s .. %s", l->n, l->rs[0].path,
             l->rs[l->n - 1].path);
}

/* Marks the files that hold the parameter's buffers needed (verified
 * whole); notes the first buffer that no file holds. */
static int s_need_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    loader_t *l = arg;
    for (uint32_t role = 0; role < (uint32_t)p->n_bufs; role++) {
        reader_t *from = NULL;
        if (s_find(l, p->name, role, &from)) {
            if (s_verify(from, err) < 0)
                return -1;
        } else if (!l->missing[0]) {
            snprintf(l->missing, sizeof l->missing, "%s", p->name);
            l->missing_role = role;
        }
    }
    return 0;
}

/* The file's tensor in the executor's shape. */
static int s_check_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    const loader_t *l = arg;
    for (uint32_t role = 0; role < (uint32_t)p->n_bufs; role++) {
        reader_t *r = NULL;
        const entry_t *e = s_find(l, p->name, role, &r);
        if (e->rows != p->rows || e->cols != p->cols)
            return gpp_err_set(err,
                               "checkpoint %s: tensor '%s' is [%lld, %lld], the model needs "
                               "[%lld, %lld]; it was written for another model",
                               r->path, p->name, (long long)e->rows, (long long)e->cols,
                               (long long)p->rows, (long long)p->cols);
    }
    return 0;
}

/* Pass 3: file -> device, through the byte buffer in chunks. */
static int s_load_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    const loader_t *l = arg;
    int64_t chunk = (int64_t)(CHUNK_BYTES / 4);
    for (uint32_t role = 0; role < (uint32_t)p->n_bufs; role++) {
        reader_t *r = NULL;
        const entry_t *e = s_find(l, p->name, role, &r);
        int64_t numel = e->rows * e->cols;
        if (fseeko(r->f, (off_t)e->offset, SEEK_SET) != 0)
            return gpp_err_set(err, "checkpoint %s: cannot seek: %s", r->path, strerror(errno));
        for (int64_t off = 0; off < numel; off += chunk) {
            size_t n = (size_t)(numel - off < chunk ? numel - off : chunk);
            if (fread(s_buf(r, n * 4), 1, n * 4, r->f) != n * 4)
                return gpp_err_set(err, "checkpoint %s: read failed: %s", r->path, strerror(errno));
            gpp_codec_t c = gpp_codec_reader(r->buf, n * 4);
            gpp_codec_get_array32(&c, r->buf, n); /* in place */
            if (gpp_stream_copy(r->s, p->buf[role] + off, r->buf, n * 4, GPP_COPY_H2D, err) < 0 ||
                gpp_stream_sync(r->s, err) < 0)
                return -1;
        }
    }
    return 0;
}

/* A verified file against the executor and the first verified file: model,
 * optimizer and step count. */
static int s_check_header(const reader_t *r, const reader_t *first, const char *spec,
                          gpp_optim_kind_t kind, gpp_err_t *err)
{
    if (strcmp(r->spec, spec) != 0)
        return gpp_err_set(err,
                           "checkpoint %s is for model '%s', this run trains '%s'; pass the "
                           "checkpoint's --model or drop --load",
                           r->path, r->spec, spec);
    if (r->kind != (uint32_t)kind)
        return gpp_err_set(err,
                           "checkpoint %s holds %s optimizer state, this run uses %s; pass "
                           "--optimizer %s",
                           r->path, s_optim_name(r->kind), s_optim_name(kind),
                           s_optim_name(r->kind));
    if (r->steps != first->steps)
        return gpp_err_set(err,
                           "checkpoint %s holds the state after %llu optimizer steps, %s after "
                           "%llu: the files are of different iterations; load the files of one "
                           "checkpoint set",
                           r->path, (unsigned long long)r->steps, first->path,
                           (unsigned long long)first->steps);
    return 0;
}

int gpp_ckpt_load_files(gpp_exec_t *ex, const char *const *paths, int n_paths, gpp_err_t *err)
{
    assert(ex && paths && n_paths > 0);
    const char *spec = gpp_exec_graph(ex)->spec;
    gpp_optim_kind_t kind = gpp_exec_optim(ex)->kind;
    loader_t l = {.rs = gpp_xcalloc((size_t)n_paths, sizeof *l.rs), .n = n_paths};
    chunk_buf_t cb = {0};
    int rc = -1;
    for (int k = 0; k < n_paths; k++)
        l.rs[k] = (reader_t){.path = paths[k], .s = gpp_exec_stream(ex), .cb = &cb};
    /* 1. one file is read whole at once; of several, the tables of tensors
     * first (a damaged one is then read whole, for the message that
     * explains it), then whole only the files the stage needs */
    for (int k = 0; k < n_paths; k++) {
        gpp_err_t why = {{0}};
        if (n_paths == 1 ? s_verify(&l.rs[k], err) < 0 : s_read(&l.rs[k], 1, &why) < 0) {
            if (n_paths > 1 && s_verify(&l.rs[k], err) == 0 && err)
                *err = why;
            goto done;
        }
    }
    if (gpp_exec_params_foreach(ex, s_need_param, &l, err) < 0)
        goto done;
    /* 2. the files read against the executor and each other (all of them
     * when a tensor is missing: damage or another model explains that) */
    for (int k = 0; l.missing[0] && k < n_paths; k++)
        if (s_verify(&l.rs[k], err) < 0)
            goto done;
    const reader_t *first = NULL; /* the step count: of the first file read whole */
    for (int k = 0; k < n_paths && !first; k++)
        first = l.rs[k].verified ? &l.rs[k] : NULL;
    if (!first) { /* a stage without parameters */
        if (s_verify(&l.rs[0], err) < 0)
            goto done;
        first = &l.rs[0];
    }
    for (int k = 0; k < n_paths; k++)
        if (l.rs[k].verified && s_check_header(&l.rs[k], first, spec, kind, err) < 0)
            goto done;
    if (l.missing[0]) {
        char files[8400];
        s_files(&l, files, sizeof files);
        gpp_err_set(err, "%s %s tensor '%s'%s; %s written for another model or stage", files,
                    n_paths == 1 ? "has no" : "holds", l.missing,
                    l.missing_role ? " (optimizer state)" : "",
                    n_paths == 1 ? "it was" : "they were");
        goto done;
    }
    if (gpp_exec_params_foreach(ex, s_check_param, &l, err) < 0)
        goto done;
    /* 3. everything checked: load */
    if (gpp_stream_sync(gpp_exec_stream(ex), err) < 0 ||
        gpp_exec_params_foreach(ex, s_load_param, &l, err) < 0)
        goto done;
    gpp_exec_set_step_count(ex, (int64_t)first->steps);
    rc = 0;
done:
    for (int k = 0; k < n_paths; k++)
        s_reader_release(&l.rs[k]);
    free(l.rs);
    free(cb.p);
    return rc;
}

int gpp_ckpt_load(gpp_exec_t *ex, const char *path, gpp_err_t *err)
{
    assert(ex && path);
    return gpp_ckpt_load_files(ex, &path, 1, err);
}

/* ---- the weights digest ---- */

typedef struct {
    const gpp_graph_t *g;
    gpp_stream_t *s;
    gpp_sha256_t *sha; /* [n_ops] */
    int *has;
    unsigned char *bytes; /* CHUNK_BYTES */
} digester_t;

/* The op a parameter belongs to: its name is "<op name>.<param>" and
 * parameter names hold no '.'. */
static int s_op_of(const gpp_graph_t *g, const char *name)
{
    const char *dot = strrchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    for (int i = 0; i < g->n_ops; i++)
        if (strlen(g->ops[i].name) == len && strncmp(g->ops[i].name, name, len) == 0)
            return i;
    return -1;
}

static int s_digest_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    digester_t *d = arg;
    int op = s_op_of(d->g, p->name);
    assert(op >= 0);
    if (!d->has[op])
        gpp_sha256_init(&d->sha[op]);
    d->has[op] = 1;
    int64_t numel = p->rows * p->cols, chunk = (int64_t)(CHUNK_BYTES / 4);
    for (int64_t off = 0; off < numel; off += chunk) {
        size_t n = (size_t)(numel - off < chunk ? numel - off : chunk);
        if (gpp_stream_copy(d->s, d->bytes, p->buf[0] + off, n * 4, GPP_COPY_D2H, err) < 0 ||
            gpp_stream_sync(d->s, err) < 0)
            return -1;
        gpp_codec_t c = gpp_codec_writer(d->bytes, n * 4);
        gpp_codec_put_array32(&c, d->bytes, n); /* little-endian, in place */
        gpp_sha256_update(&d->sha[op], d->bytes, n * 4);
    }
    return 0;
}

int gpp_ckpt_op_digests(gpp_exec_t *ex, unsigned char (*digests)[GPP_SHA256_BYTES], int *has,
                        gpp_err_t *err)
{
    assert(ex && digests && has);
    const gpp_graph_t *g = gpp_exec_graph(ex);
    digester_t d = {.g = g,
                    .s = gpp_exec_stream(ex),
                    .sha = gpp_xcalloc((size_t)g->n_ops, sizeof *d.sha),
                    .has = gpp_xcalloc((size_t)g->n_ops, sizeof *d.has),
                    .bytes = gpp_xcalloc(1, CHUNK_BYTES)};
    int rc =
        gpp_stream_sync(d.s, err) < 0 ? -1 : gpp_exec_params_foreach(ex, s_digest_param, &d, err);
    for (int op = 0; rc == 0 && op < g->n_ops; op++)
        if (d.has[op]) {
            gpp_sha256_final(&d.sha[op], digests[op]);
            has[op] = 1;
        }
    free(d.sha);
    free(d.has);
    free(d.bytes);
    return rc;
}
