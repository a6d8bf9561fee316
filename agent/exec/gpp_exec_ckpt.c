/* gpp_exec_ckpt: the executor's state in checkpoint files (see
 * gpp_exec_ckpt.h). The executor lends its state through
 * gpp_exec_params_foreach; the file is ckpt/gpp_ckpt's. */
#include "agent/exec/gpp_exec_ckpt.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/gpp_ckpt.h"
#include "common/gpp_codec.h"

_Static_assert(GPP_EXEC_MAX_BUFS <= GPP_CKPT_MAX_ROLES,
               "every buffer of a parameter has a role in the checkpoint format");

#define CHUNK_FLOATS ((int64_t)1 << 20) /* 4 MiB of host memory per copy */

static const char *s_optim_name(uint32_t k)
{
    return k == GPP_OPTIM_SGD ? "sgd" : k == GPP_OPTIM_ADAMW ? "adamw" : "unknown";
}

/* ---- save ---- */

typedef struct {
    gpp_ckpt_writer_t *w;
    gpp_stream_t *s;
    float *host; /* CHUNK_FLOATS */
} saver_t;

static int s_count(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    (void)err;
    *(uint32_t *)arg += (uint32_t)p->n_bufs;
    return 0;
}

/* Every buffer of one parameter: its entry, then the device floats through
 * host memory in chunks. */
static int s_save_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    saver_t *sv = arg;
    int64_t numel = p->rows * p->cols;
    for (int role = 0; role < p->n_bufs; role++) {
        if (gpp_ckpt_writer_tensor(sv->w, p->name, (uint32_t)role, p->rows, p->cols, err) < 0)
            return -1;
        for (int64_t off = 0; off < numel; off += CHUNK_FLOATS) {
            size_t n = (size_t)(numel - off < CHUNK_FLOATS ? numel - off : CHUNK_FLOATS);
            if (gpp_stream_copy(sv->s, sv->host, p->buf[role] + off, n * 4, GPP_COPY_D2H, err) <
                    0 ||
                gpp_stream_sync(sv->s, err) < 0 ||
                gpp_ckpt_writer_data(sv->w, sv->host, n, err) < 0)
                return -1;
        }
    }
    return 0;
}

int gpp_exec_ckpt_save(gpp_exec_t *ex, const char *path, gpp_err_t *err)
{
    assert(ex && path);
    saver_t sv = {.s = gpp_exec_stream(ex),
                  .host = gpp_xcalloc((size_t)CHUNK_FLOATS, sizeof(float))};
    gpp_ckpt_header_t *h = gpp_xcalloc(1, sizeof *h);
    h->optimizer = (uint32_t)gpp_exec_optim(ex)->kind;
    h->steps = (uint64_t)gpp_exec_step_count(ex);
    snprintf(h->spec, sizeof h->spec, "%s", gpp_exec_graph(ex)->spec);
    uint32_t n_tensors = 0;
    gpp_exec_params_foreach(ex, s_count, &n_tensors, NULL);
    int rc = -1;
    if (gpp_stream_sync(sv.s, err) < 0 || !(sv.w = gpp_ckpt_writer_new(path, h, n_tensors, err)) ||
        gpp_exec_params_foreach(ex, s_save_param, &sv, err) < 0)
        goto done;
    rc = gpp_ckpt_writer_commit(&sv.w, err);
done:
    if (rc < 0)
        gpp_err_prefix(err, "saving checkpoint %s (any previous file there is untouched)", path);
    gpp_ckpt_writer_destroy(&sv.w);
    free(h);
    free(sv.host);
    return rc;
}

/* ---- load ---- */

/* The files of one load: a tensor comes from the first that holds it. */
typedef struct {
    gpp_ckpt_reader_t **rs;
    int n;
    char missing[1025]; /* a tensor no file holds ("": none) */
    uint32_t missing_role;
    gpp_stream_t *s;
    float *host; /* CHUNK_FLOATS */
} loader_t;

/* The file holding (name, role) and its entry index, or NULL. */
static gpp_ckpt_reader_t *s_find(const loader_t *l, const char *name, uint32_t role, int *i)
{
    *i = -1;
    for (int k = 0; k < l->n; k++)
        if ((*i = gpp_ckpt_reader_find(l->rs[k], name, role)) >= 0)
            return l->rs[k];
    return NULL;
}

/* Names the files of a load in a message. */
static void s_files(const loader_t *l, char *out, size_t len)
{
    if (l->n == 1) {
        snprintf(out, len, "checkpoint %s", gpp_ckpt_reader_path(l->rs[0]));
        return;
    }
    snprintf(out, len, "none of the %d checkpoint files %s .. %s", l->n,
             gpp_ckpt_reader_path(l->rs[0]), gpp_ckpt_reader_path(l->rs[l->n - 1]));
}

/* Verifies the files that hold the parameter's buffers whole; notes the
 * first buffer that no file holds. */
static int s_need_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    loader_t *l = arg;
    for (uint32_t role = 0; role < (uint32_t)p->n_bufs; role++) {
        int i;
        gpp_ckpt_reader_t *from = s_find(l, p->name, role, &i);
        if (from) {
            if (gpp_ckpt_reader_verify(from, err) < 0)
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
        int i;
        const gpp_ckpt_reader_t *r = s_find(l, p->name, role, &i);
        const gpp_ckpt_entry_t *e = gpp_ckpt_reader_entry(r, i);
        if (e->rows != p->rows || e->cols != p->cols)
            return gpp_err_set(err,
                               "checkpoint %s: tensor '%s' is [%lld, %lld], the model needs "
                               "[%lld, %lld]; it was written for another model",
                               gpp_ckpt_reader_path(r), p->name, (long long)e->rows,
                               (long long)e->cols, (long long)p->rows, (long long)p->cols);
    }
    return 0;
}

/* Last pass: file -> device, through host memory in chunks. */
static int s_load_param(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    const loader_t *l = arg;
    int64_t numel = p->rows * p->cols;
    for (uint32_t role = 0; role < (uint32_t)p->n_bufs; role++) {
        int i;
        gpp_ckpt_reader_t *r = s_find(l, p->name, role, &i);
        for (int64_t off = 0; off < numel; off += CHUNK_FLOATS) {
            size_t n = (size_t)(numel - off < CHUNK_FLOATS ? numel - off : CHUNK_FLOATS);
            if (gpp_ckpt_reader_data(r, i, off, n, l->host, err) < 0 ||
                gpp_stream_copy(l->s, p->buf[role] + off, l->host, n * 4, GPP_COPY_H2D, err) < 0 ||
                gpp_stream_sync(l->s, err) < 0)
                return -1;
        }
    }
    return 0;
}

/* A verified file against the executor and the first verified file: model,
 * optimizer and step count. */
static int s_check_header(const gpp_ckpt_reader_t *r, const gpp_ckpt_reader_t *first,
                          const char *spec, gpp_optim_kind_t kind, gpp_err_t *err)
{
    const gpp_ckpt_header_t *h = gpp_ckpt_reader_header(r), *h0 = gpp_ckpt_reader_header(first);
    const char *path = gpp_ckpt_reader_path(r);
    if (strcmp(h->spec, spec) != 0)
        return gpp_err_set(err,
                           "checkpoint %s is for model '%s', this run trains '%s'; pass the "
                           "checkpoint's --model or drop --load",
                           path, h->spec, spec);
    if (h->optimizer != (uint32_t)kind)
        return gpp_err_set(err,
                           "checkpoint %s holds %s optimizer state, this run uses %s; pass "
                           "--optimizer %s",
                           path, s_optim_name(h->optimizer), s_optim_name(kind),
                           s_optim_name(h->optimizer));
    if (h->steps != h0->steps)
        return gpp_err_set(err,
                           "checkpoint %s holds the state after %llu optimizer steps, %s after "
                           "%llu: the files are of different iterations; load the files of one "
                           "checkpoint set",
                           path, (unsigned long long)h->steps, gpp_ckpt_reader_path(first),
                           (unsigned long long)h0->steps);
    return 0;
}

int gpp_exec_ckpt_load_files(gpp_exec_t *ex, const char *const *paths, int n_paths, gpp_err_t *err)
{
    assert(ex && paths && n_paths > 0);
    const char *spec = gpp_exec_graph(ex)->spec;
    gpp_optim_kind_t kind = gpp_exec_optim(ex)->kind;
    loader_t l = {.rs = gpp_xcalloc((size_t)n_paths, sizeof *l.rs),
                  .n = n_paths,
                  .s = gpp_exec_stream(ex),
                  .host = gpp_xcalloc((size_t)CHUNK_FLOATS, sizeof(float))};
    int rc = -1;
    for (int k = 0; k < n_paths; k++)
        l.rs[k] = gpp_ckpt_reader_new(paths[k]);
    /* 1. one file is read whole at once; of several, the tables of tensors
     * first (a damaged one is then read whole, for the message that
     * explains it), then whole only the files the stage needs */
    for (int k = 0; k < n_paths; k++) {
        gpp_err_t why = {{0}};
        if (n_paths == 1 ? gpp_ckpt_reader_verify(l.rs[k], err) < 0
                         : gpp_ckpt_reader_index(l.rs[k], &why) < 0) {
            if (n_paths > 1 && gpp_ckpt_reader_verify(l.rs[k], err) == 0 && err)
                *err = why;
            goto done;
        }
    }
    if (gpp_exec_params_foreach(ex, s_need_param, &l, err) < 0)
        goto done;
    /* 2. the files read against the executor and each other (all of them
     * when a tensor is missing: damage or another model explains that) */
    for (int k = 0; l.missing[0] && k < n_paths; k++)
        if (gpp_ckpt_reader_verify(l.rs[k], err) < 0)
            goto done;
    const gpp_ckpt_reader_t *first = NULL; /* the step count: of the first file read whole */
    for (int k = 0; k < n_paths && !first; k++)
        first = gpp_ckpt_reader_verified(l.rs[k]) ? l.rs[k] : NULL;
    if (!first) { /* a stage without parameters */
        if (gpp_ckpt_reader_verify(l.rs[0], err) < 0)
            goto done;
        first = l.rs[0];
    }
    for (int k = 0; k < n_paths; k++)
        if (gpp_ckpt_reader_verified(l.rs[k]) &&
            s_check_header(l.rs[k], first, spec, kind, err) < 0)
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
    if (gpp_stream_sync(l.s, err) < 0 || gpp_exec_params_foreach(ex, s_load_param, &l, err) < 0)
        goto done;
    gpp_exec_set_step_count(ex, (int64_t)gpp_ckpt_reader_header(first)->steps);
    rc = 0;
done:
    for (int k = 0; k < n_paths; k++)
        gpp_ckpt_reader_destroy(&l.rs[k]);
    free(l.rs);
    free(l.host);
    return rc;
}

int gpp_exec_ckpt_load(gpp_exec_t *ex, const char *path, gpp_err_t *err)
{
    assert(ex && path);
    return gpp_exec_ckpt_load_files(ex, &path, 1, err);
}

/* ---- the weights digest ---- */

typedef struct {
    const gpp_graph_t *g;
    gpp_stream_t *s;
    gpp_sha256_t *sha; /* [n_ops] */
    int *has;
    float *host; /* CHUNK_FLOATS */
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
    int64_t numel = p->rows * p->cols;
    for (int64_t off = 0; off < numel; off += CHUNK_FLOATS) {
        size_t n = (size_t)(numel - off < CHUNK_FLOATS ? numel - off : CHUNK_FLOATS);
        if (gpp_stream_copy(d->s, d->host, p->buf[0] + off, n * 4, GPP_COPY_D2H, err) < 0 ||
            gpp_stream_sync(d->s, err) < 0)
            return -1;
        gpp_codec_t c = gpp_codec_writer(d->host, n * 4);
        gpp_codec_put_array32(&c, d->host, n); /* little-endian, in place */
        gpp_sha256_update(&d->sha[op], d->host, n * 4);
    }
    return 0;
}

int gpp_exec_ckpt_op_digests(gpp_exec_t *ex, unsigned char (*digests)[GPP_SHA256_BYTES], int *has,
                             gpp_err_t *err)
{
    assert(ex && digests && has);
    const gpp_graph_t *g = gpp_exec_graph(ex);
    digester_t d = {.g = g,
                    .s = gpp_exec_stream(ex),
                    .sha = gpp_xcalloc((size_t)g->n_ops, sizeof *d.sha),
                    .has = gpp_xcalloc((size_t)g->n_ops, sizeof *d.has),
                    .host = gpp_xcalloc((size_t)CHUNK_FLOATS, sizeof(float))};
    int rc =
        gpp_stream_sync(d.s, err) < 0 ? -1 : gpp_exec_params_foreach(ex, s_digest_param, &d, err);
    for (int op = 0; rc == 0 && op < g->n_ops; op++)
        if (d.has[op]) {
            gpp_sha256_final(&d.sha[op], digests[op]);
            has[op] = 1;
        }
    free(d.sha);
    free(d.has);
    free(d.host);
    return rc;
}
