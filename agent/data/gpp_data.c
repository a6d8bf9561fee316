/* gpp_data: the data source interface over synthetic data (gpp_data_gen),
 * dataset files and .npy arrays, with one read-ahead for all three
 * (gpp_data_ahead); gpp_data.h has the contract and the file format. */
#include "agent/data/gpp_data.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/gpp_atomic_file.h"
#include "common/gpp_codec.h"
#include "agent/data/gpp_data_ahead.h"
#include "agent/data/gpp_data_gen.h"
#include "agent/data/gpp_hash.h"
#include "agent/data/gpp_npy.h"

/* Purpose tag of the shuffle's random stream (gpp_hash_key's second field;
 * gpp_data_gen.c has the synthetic data's). */
enum { TAG_SHUF = 0x534855 };

#define HDR_FIXED 32
#define HDR_ENTRY 104

typedef struct {
    char name[GPP_NAME_LEN];
    uint32_t role, dtype;
    int64_t rows, cols, range;
    uint32_t crc;
    int64_t offset; /* of the data in the file */
} data_array_t;

struct gpp_data_s {
    const gpp_graph_t *g;
    uint64_t seed;
    /* file source */
    int fd;
    char *path;
    int64_t n_samples;
    int n_arrays;
    data_array_t *arr;
    int *arr_of_op; /* [n_ops] -> array index or -1 */
    /* .npy source: one array per INPUT and loss op (NULL for other ops), the
     * expected layout of each, and the record order of the current epoch */
    gpp_npy_t **npy;    /* [n_ops] */
    data_array_t *want; /* [n_ops] */
    int shuffle;
    /* the record orders of the two latest epochs asked for (the read-ahead
     * may be an epoch ahead of the caller), under perm_mu: the reads run on
     * the read-ahead's threads too */
    pthread_mutex_t perm_mu;
    int64_t *perm[2];        /* [n_samples] record of position p in epoch perm_epoch[i] */
    int64_t perm_epoch[2];   /* -1: none built yet */
    int perm_next;           /* the one to rebuild next */
    gpp_data_gen_t *gen;     /* synthetic source */
    gpp_data_ahead_t *ahead; /* the read-ahead (prefetch on) */
    int threads;
    gpp_backend_t *be;   /* page-locks the prefetch buffers (NULL: not) */
    int64_t hits_before; /* served by read-aheads since replaced */
};

/* The fields every kind of source starts with. */
static gpp_data_t *s_new(const gpp_graph_t *g, uint64_t seed)
{
    gpp_data_t *self = gpp_xcalloc(1, sizeof *self);
    self->g = g;
    self->seed = seed;
    self->fd = -1;
    self->perm_epoch[0] = self->perm_epoch[1] = -1;
    pthread_mutex_init(&self->perm_mu, NULL);
    self->threads = gpp_data_pool_default_threads();
    return self;
}

gpp_data_t *gpp_data_new(const gpp_graph_t *g, uint64_t seed)
{
    assert(g && g->finalized);
    gpp_data_t *self = s_new(g, seed);
    self->gen = gpp_data_gen_new(g, seed);
    return self;
}

void gpp_data_destroy(gpp_data_t **self_p)
{
    assert(self_p);
    gpp_data_t *self = *self_p;
    if (!self)
        return;
    gpp_data_ahead_destroy(&self->ahead); /* waits for its reads, which may generate */
    gpp_data_gen_destroy(&self->gen);
    if (self->fd >= 0)
        close(self->fd);
    free(self->path);
    free(self->arr);
    free(self->arr_of_op);
    if (self->npy)
        for (int o = 0; o < self->g->n_ops; o++)
            gpp_npy_destroy(&self->npy[o]);
    free(self->npy);
    free(self->want);
    free(self->perm[0]);
    free(self->perm[1]);
    pthread_mutex_destroy(&self->perm_mu);
    free(self);
    *self_p = NULL;
}

int64_t gpp_data_samples(const gpp_data_t *self)
{
    assert(self);
    return self->n_samples > 0 ? self->n_samples : -1;
}

/* ---- file source ---- */

/* Largest rows or cols per sample of an array a header may claim. */
#define MAX_DIM ((int64_t)1 << 31)

static int s_pread_all(int fd, void *buf, size_t len, int64_t off)
{
    char *p = buf;
    while (len) {
        ssize_t r = pread(fd, p, len, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
        off += r;
    }
    return 0;
}

/* The arrays a dataset for g must hold, in file order: INPUT ops, then loss
 * ops, both ascending by id. */
static int s_expected(const gpp_graph_t *g, data_array_t *arr)
{
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int o = 0; o < g->n_ops; o++) {
            const gpp_op_t *op = &g->ops[o];
            data_array_t a = {0};
            if (pass == 0 && op->type == GPP_OP_INPUT) {
                a.role = 0;
                a.dtype = op->input_kind == GPP_INPUT_INDICES ? GPP_DTYPE_I32 : GPP_DTYPE_F32;
                a.rows = op->rows, a.cols = op->cols;
                a.range = op->input_kind == GPP_INPUT_INDICES ? op->table_rows : 0;
            } else if (pass == 1 && gpp_data_shape_is_loss(op)) {
                gpp_dtype_t dt;
                a.role = 1;
                gpp_data_shape_label(g, o, &dt, &a.rows, &a.cols);
                a.dtype = dt;
                a.range = dt == GPP_DTYPE_I32 ? g->ops[op->inputs[0]].cols : 0;
            } else {
                continue;
            }
            snprintf(a.name, sizeof a.name, "%s", op->name);
            if (arr)
                arr[n] = a;
            n++;
        }
    return n;
}

static int s_find_op(const gpp_graph_t *g, const char *name)
{
    for (int o = 0; o < g->n_ops; o++)
        if (strcmp(g->ops[o].name, name) == 0)
            return o;
    return -1;
}

static gpp_data_t *s_open_npy(const gpp_graph_t *g, const char *spec, int shuffle, uint64_t seed,
                              gpp_err_t *err);

int gpp_data_is_npy(const char *path)
{
    struct stat st;
    return strchr(path, '=') != NULL || (stat(path, &st) == 0 && S_ISDIR(st.st_mode));
}

gpp_data_t *gpp_data_open(const gpp_graph_t *g, const char *path, int shuffle, uint64_t seed,
                          gpp_err_t *err)
{
    assert(g && g->finalized && path);
    if (gpp_data_is_npy(path))
        return s_open_npy(g, path, shuffle, seed, err);
    gpp_data_t *self = s_new(g, seed);
    self->path = gpp_xstrdup(path);
    unsigned char *hdr = NULL, *buf = NULL;
    data_array_t *want = NULL;
    self->fd = open(path, O_RDONLY | O_CLOEXEC);
    GPP_SYS_TRY_GOTO(self->fd >= 0, err, fail, "dataset %s: cannot open", path);
    struct stat st;
    GPP_SYS_TRY_GOTO(fstat(self->fd, &st) == 0, err, fail, "dataset %s: cannot stat", path);
    int64_t fsize = st.st_size;
    unsigned char fixed[HDR_FIXED] = {0};
    if (fsize < 8 || s_pread_all(self->fd, fixed, 8, 0) < 0 ||
        memcmp(fixed, GPP_DATA_MAGIC, 8) != 0) {
        gpp_err_set(err,
                    "dataset %s: not a gpp dataset file (bad magic); write one with "
                    "gpp-train --write-dataset FILE --samples N",
                    path);
        goto fail;
    }
    if (fsize < HDR_FIXED || s_pread_all(self->fd, fixed, HDR_FIXED, 0) < 0) {
        gpp_err_set(err, "dataset %s: truncated: %lld bytes, shorter than the header", path,
                    (long long)fsize);
        goto fail;
    }
    gpp_codec_t c = gpp_codec_reader(fixed + 8, HDR_FIXED - 8);
    uint32_t version, n_arrays;
    uint64_t n_samples, hbytes;
    gpp_codec_get_u32(&c, &version);
    gpp_codec_get_u32(&c, &n_arrays);
    gpp_codec_get_u64(&c, &n_samples);
    gpp_codec_get_u64(&c, &hbytes);
    assert(!c.overrun);
    if (version != GPP_DATA_VERSION) {
        gpp_err_set(err,
                    "dataset %s: format version %u, this gpp reads version %d; rewrite it "
                    "with this gpp-train --write-dataset",
                    path, version, GPP_DATA_VERSION);
        goto fail;
    }
    if (n_arrays > 100000 || hbytes != HDR_FIXED + (uint64_t)HDR_ENTRY * n_arrays + 4 ||
        n_samples < 1 || n_samples > INT64_MAX) {
        gpp_err_set(err,
                    "dataset %s: corrupt header (arrays %u, samples %llu, header %llu "
                    "bytes)",
                    path, n_arrays, (unsigned long long)n_samples, (unsigned long long)hbytes);
        goto fail;
    }
    self->n_samples = (int64_t)n_samples;
    if ((int64_t)hbytes > fsize) {
        gpp_err_set(err, "dataset %s: truncated: header needs %llu bytes, file has %lld", path,
                    (unsigned long long)hbytes, (long long)fsize);
        goto fail;
    }
    hdr = gpp_xcalloc(1, hbytes);
    GPP_SYS_TRY_GOTO(s_pread_all(self->fd, hdr, hbytes, 0) == 0, err, fail,
                     "dataset %s: read failed", path);
    uint32_t hcrc;
    c = gpp_codec_reader(hdr + hbytes - 4, 4);
    gpp_codec_get_u32(&c, &hcrc);
    if ((uint32_t)crc32_z(0, hdr, hbytes - 4) != hcrc) {
        gpp_err_set(err, "dataset %s: header checksum mismatch (corrupted file)", path);
        goto fail;
    }
    self->n_arrays = (int)n_arrays;
    self->arr = gpp_xcalloc(n_arrays + 1, sizeof *self->arr);
    int64_t off = (int64_t)hbytes;
    c = gpp_codec_reader(hdr + HDR_FIXED, hbytes - HDR_FIXED - 4);
    for (uint32_t i = 0; i < n_arrays; i++) {
        data_array_t *a = &self->arr[i];
        uint32_t reserved;
        int64_t bytes;
        gpp_codec_get_bytes(&c, a->name, GPP_NAME_LEN);
        a->name[GPP_NAME_LEN - 1] = 0;
        gpp_codec_get_u32(&c, &a->role);
        gpp_codec_get_u32(&c, &a->dtype);
        gpp_codec_get_i64(&c, &a->rows);
        gpp_codec_get_i64(&c, &a->cols);
        gpp_codec_get_i64(&c, &a->range);
        gpp_codec_get_u32(&c, &a->crc);
        gpp_codec_get_u32(&c, &reserved);
        assert(!c.overrun);
        a->offset = off;
        /* off += n_samples x rows x cols x 4, every step checked: a crafted
         * header must not overflow into a plausible size */
        if (a->rows < 1 || a->rows > MAX_DIM || a->cols < 1 || a->cols > MAX_DIM ||
            __builtin_mul_overflow(a->rows * a->cols, (int64_t)4, &bytes) ||
            __builtin_mul_overflow(bytes, self->n_samples, &bytes) ||
            __builtin_add_overflow(off, bytes, &off)) {
            gpp_err_set(err,
                        "dataset %s: corrupt header: array %u '%s' claims %lld x [%lld, "
                        "%lld] values, an impossible size",
                        path, i, a->name, (long long)self->n_samples, (long long)a->rows,
                        (long long)a->cols);
            goto fail;
        }
    }
    if (off != fsize) {
        gpp_err_set(err, "dataset %s: %s: expected %lld bytes, file has %lld", path,
                    off > fsize ? "truncated" : "trailing bytes", (long long)off, (long long)fsize);
        goto fail;
    }
    /* The arrays must be exactly the model's inputs and labels. */
    int n_want = s_expected(g, NULL);
    want = gpp_xcalloc((size_t)n_want + 1, sizeof *want);
    s_expected(g, want);
    self->arr_of_op = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    for (int o = 0; o < g->n_ops; o++)
        self->arr_of_op[o] = -1;
    for (int i = 0; i < self->n_arrays; i++) {
        const data_array_t *a = &self->arr[i];
        int o = s_find_op(g, a->name);
        const data_array_t *w = NULL;
        for (int k = 0; k < n_want; k++)
            if (strcmp(want[k].name, a->name) == 0)
                w = &want[k];
        if (o < 0 || !w || w->role != a->role) {
            gpp_err_set(err,
                        "dataset %s: array '%s' is not an %s of model %s; the file was "
                        "written for another model",
                        path, a->name, a->role ? "loss op" : "input op", g->spec);
            goto fail;
        }
        if (w->dtype != a->dtype || w->rows != a->rows || w->cols != a->cols ||
            w->range != a->range) {
            gpp_err_set(err,
                        "dataset %s: array '%s' has %s [%lld, %lld] range %lld, model %s "
                        "needs %s [%lld, %lld] range %lld; the file was written for another "
                        "model",
                        path, a->name, a->dtype ? "i32" : "f32", (long long)a->rows,
                        (long long)a->cols, (long long)a->range, g->spec, w->dtype ? "i32" : "f32",
                        (long long)w->rows, (long long)w->cols, (long long)w->range);
            goto fail;
        }
        self->arr_of_op[o] = i;
    }
    for (int k = 0; k < n_want; k++)
        if (self->arr_of_op[s_find_op(g, want[k].name)] < 0) {
            gpp_err_set(err, "dataset %s: no array for %s '%s' of model %s", path,
                        want[k].role ? "loss op" : "input op", want[k].name, g->spec);
            goto fail;
        }
    /* Data checksums: one sequential read. */
    size_t chunk = 1 << 20;
    buf = gpp_xcalloc(1, chunk);
    for (int i = 0; i < self->n_arrays; i++) {
        const data_array_t *a = &self->arr[i];
        int64_t len = self->n_samples * a->rows * a->cols * 4, done = 0;
        uint32_t crc = 0;
        while (done < len) {
            size_t part = (size_t)(len - done < (int64_t)chunk ? len - done : (int64_t)chunk);
            GPP_SYS_TRY_GOTO(s_pread_all(self->fd, buf, part, a->offset + done) == 0, err, fail,
                             "dataset %s: read failed", path);
            crc = (uint32_t)crc32_z(crc, buf, part);
            done += (int64_t)part;
        }
        if (crc != a->crc) {
            gpp_err_set(err, "dataset %s: array '%s': data checksum mismatch (corrupted file)",
                        path, a->name);
            goto fail;
        }
    }
    free(buf);
    free(hdr);
    free(want);
    return self;
fail:
    free(buf);
    free(hdr);
    free(want);
    gpp_data_destroy(&self);
    return NULL;
}

/* Reads samples [lo, lo+n) (wrapping) of array `a` into out and checks the
 * range of i32 values. */
static int s_read(gpp_data_t *self, const data_array_t *a, int64_t lo, int64_t n, void *out,
                  gpp_err_t *err)
{
    int64_t per = a->rows * a->cols * 4;
    for (int64_t s = 0; s < n;) {
        int64_t rec = (lo + s) % self->n_samples;
        int64_t run = self->n_samples - rec < n - s ? self->n_samples - rec : n - s;
        GPP_SYS_TRY(s_pread_all(self->fd, (char *)out + s * per, (size_t)(run * per),
                                a->offset + rec * per) == 0,
                    err, "dataset %s: read of '%s' failed", self->path, a->name);
        s += run;
    }
    gpp_codec_t c = gpp_codec_reader(out, (size_t)(n * per));
    gpp_codec_get_array32(&c, out, (size_t)(n * a->rows * a->cols)); /* in place */
    if (a->dtype == GPP_DTYPE_I32) {
        const int32_t *v = out;
        for (int64_t i = 0; i < n * a->rows * a->cols; i++)
            if (v[i] < 0 || v[i] >= a->range)
                return gpp_err_set(err, "dataset %s: '%s' sample %lld: value %d outside [0, %lld)",
                                   self->path, a->name,
                                   (long long)((lo + i / (a->rows * a->cols)) % self->n_samples),
                                   v[i], (long long)a->range);
    }
    return 0;
}

/* ---- .npy source ---- */

/* "(N, a, b)" */
static void s_shape_str(const gpp_npy_t *a, char *buf, size_t cap)
{
    size_t u = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < gpp_npy_ndim(a) && u < cap; d++)
        u += (size_t)snprintf(buf + u, cap - u, "%s%lld", d ? ", " : "",
                              (long long)gpp_npy_shape(a)[d]);
    if (u < cap)
        snprintf(buf + u, cap - u, "%s)", gpp_npy_ndim(a) == 1 ? "," : "");
}

/* Checks array `a` against what op `w` needs: dtype and per-record shape
 * ((rows, cols); (cols,) when rows is 1; nothing when rows x cols is 1). */
static int s_check_npy(const gpp_graph_t *g, const gpp_npy_t *a, const data_array_t *w,
                       gpp_err_t *err)
{
    const char *what = w->role ? "labels of loss op" : "input op";
    gpp_npy_dtype_t t = gpp_npy_dtype(a);
    int ok_type = w->dtype == GPP_DTYPE_F32 ? t == GPP_NPY_F4 : t != GPP_NPY_F4;
    if (!ok_type)
        return gpp_err_set(err,
                           "%s: field 'descr' is '%s'; the %s '%s' of model %s needs %s: save "
                           "x.astype('%s')",
                           gpp_npy_path(a), gpp_npy_dtype_name(t), what, w->name, g->spec,
                           w->dtype == GPP_DTYPE_F32 ? "'<f4'" : "'<i4' or '<i8'",
                           w->dtype == GPP_DTYPE_F32 ? "<f4" : "<i8");
    int nd = gpp_npy_ndim(a);
    const int64_t *sh = gpp_npy_shape(a);
    int ok = (nd == 3 && sh[1] == w->rows && sh[2] == w->cols) ||
             (nd == 2 && w->rows == 1 && sh[1] == w->cols) ||
             (nd == 1 && w->rows == 1 && w->cols == 1);
    if (!ok) {
        char got[96];
        s_shape_str(a, got, sizeof got);
        return gpp_err_set(err,
                           "%s: field 'shape' is %s; the %s '%s' of model %s needs (N, %lld, "
                           "%lld)%s (N samples); reshape the array",
                           gpp_npy_path(a), got, what, w->name, g->spec, (long long)w->rows,
                           (long long)w->cols, w->rows == 1 ? " or (N, cols)" : "");
    }
    return 0;
}

/* spec: a directory holding <op name>.npy per input and loss op, or a list
 * "op=FILE.npy,op=FILE.npy" naming every one. */
static gpp_data_t *s_open_npy(const gpp_graph_t *g, const char *spec, int shuffle, uint64_t seed,
                              gpp_err_t *err)
{
    gpp_data_t *self = s_new(g, seed);
    self->shuffle = shuffle;
    self->path = gpp_xstrdup(spec);
    self->npy = gpp_xcalloc((size_t)g->n_ops, sizeof *self->npy);
    self->want = gpp_xcalloc((size_t)g->n_ops, sizeof *self->want);
    int n_want = s_expected(g, NULL);
    data_array_t *want = gpp_xcalloc((size_t)n_want + 1, sizeof *want);
    s_expected(g, want);
    char **files = gpp_xcalloc((size_t)g->n_ops, sizeof *files);
    char *list = NULL;
    const gpp_npy_t *first = NULL;
    if (strchr(spec, '=')) {
        list = gpp_xstrdup(spec);
        char *save = NULL;
        for (char *kv = strtok_r(list, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            int o = -1;
            if (eq) {
                *eq = 0;
                o = s_find_op(g, kv);
            }
            int k = -1;
            for (int i = 0; o >= 0 && i < n_want; i++)
                if (strcmp(want[i].name, kv) == 0)
                    k = i;
            if (!eq || !eq[1] || k < 0) {
                gpp_err_set(err,
                            "dataset '%s': '%s' must be OP=FILE.npy with OP an input or loss "
                            "op of model %s (e.g. %s=%s.npy)",
                            spec, kv, g->spec, want[0].name, want[0].name);
                goto fail;
            }
            if (files[o]) {
                gpp_err_set(err, "dataset '%s': op '%s' is named twice", spec, kv);
                goto fail;
            }
            files[o] = gpp_xstrdup(eq + 1);
        }
    }
    for (int k = 0; k < n_want; k++) {
        const data_array_t *w = &want[k];
        int o = s_find_op(g, w->name);
        self->want[o] = *w;
        if (!list) {
            size_t len = strlen(spec) + strlen(w->name) + 8;
            files[o] = gpp_xcalloc(1, len);
            snprintf(files[o], len, "%s/%s.npy", spec, w->name);
        } else if (!files[o]) {
            gpp_err_set(err, "dataset '%s': no array for the %s '%s' of model %s; add %s=FILE.npy",
                        spec, w->role ? "labels of loss op" : "input op", w->name, g->spec,
                        w->name);
            goto fail;
        }
    }
    for (int k = 0; k < n_want; k++) {
        const data_array_t *w = &want[k];
        int o = s_find_op(g, w->name);
        gpp_err_t e2;
        if (!(self->npy[o] = gpp_npy_open(files[o], &e2))) {
            if (!list && access(files[o], F_OK) != 0)
                gpp_err_set(err, "dataset %s: no %s.npy for the %s '%s' of model %s (%s)", spec,
                            w->name, w->role ? "labels of loss op" : "input op", w->name, g->spec,
                            e2.msg);
            else
                gpp_err_set(err, "dataset %s", e2.msg);
            goto fail;
        }
        if (s_check_npy(g, self->npy[o], w, err) < 0)
            goto fail;
        int64_t n = gpp_npy_shape(self->npy[o])[0];
        if (n < 1) {
            gpp_err_set(err, "%s: field 'shape' holds 0 samples; a dataset needs at least one",
                        files[o]);
            goto fail;
        }
        if (!first) {
            first = self->npy[o];
            self->n_samples = n;
        } else if (n != self->n_samples) {
            gpp_err_set(err,
                        "%s: field 'shape' holds %lld samples, %s holds %lld; every array of "
                        "a dataset holds the same samples in the same order",
                        files[o], (long long)n, gpp_npy_path(first), (long long)self->n_samples);
            goto fail;
        }
    }
    if (shuffle && self->n_samples > UINT32_MAX) { /* gpp_hash_below draws below 2^32 */
        gpp_err_set(err,
                    "dataset %s: %lld samples; shuffling handles up to 2^32 - 1: pass "
                    "--no-shuffle or split the data",
                    spec, (long long)self->n_samples);
        goto fail;
    }
    if (shuffle)
        for (int i = 0; i < 2; i++)
            self->perm[i] = gpp_xcalloc((size_t)self->n_samples, sizeof *self->perm[i]);
    for (int o = 0; o < g->n_ops; o++)
        free(files[o]);
    free(files);
    free(list);
    free(want);
    return self;
fail:
    for (int o = 0; o < g->n_ops; o++)
        free(files[o]);
    free(files);
    free(list);
    free(want);
    gpp_data_destroy(&self);
    return NULL;
}

/* The record order of `epoch` (perm_mu held). */
static const int64_t *s_perm(gpp_data_t *self, int64_t epoch)
{
    int64_t n = self->n_samples;
    int k = self->perm_epoch[0] == epoch ? 0 : self->perm_epoch[1] == epoch ? 1 : -1;
    if (k < 0) {
        /* Fisher-Yates from (seed, epoch): every replica builds the same order */
        k = self->perm_next;
        self->perm_next = 1 - k;
        int64_t *perm = self->perm[k];
        uint64_t key = gpp_hash_key(self->seed, TAG_SHUF, (uint64_t)epoch);
        for (int64_t i = 0; i < n; i++)
            perm[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = gpp_hash_below(key, (uint64_t)i, i + 1);
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        self->perm_epoch[k] = epoch;
    }
    return self->perm[k];
}

/* Records of samples [lo, lo + n) into rec: one lock for the run. */
static void s_records(gpp_data_t *self, int64_t lo, int64_t n, int64_t *rec)
{
    int64_t N = self->n_samples;
    if (!self->shuffle) {
        for (int64_t s = 0; s < n; s++)
            rec[s] = (lo + s) % N;
        return;
    }
    pthread_mutex_lock(&self->perm_mu);
    for (int64_t s = 0; s < n;) { /* epoch by epoch */
        int64_t epoch = (lo + s) / N, pos = (lo + s) % N;
        const int64_t *perm = s_perm(self, epoch);
        for (; s < n && pos < N; s++, pos++)
            rec[s] = perm[pos];
    }
    pthread_mutex_unlock(&self->perm_mu);
}

int64_t gpp_data_record(gpp_data_t *self, int64_t sample)
{
    assert(self && self->npy && sample >= 0);
    int64_t rec = 0; /* s_records writes it (gcc -O3 cannot prove so) */
    s_records(self, sample, 1, &rec);
    return rec;
}

/* An index or class out of range: the array, record (row), element and value. */
static int s_range_err(const gpp_npy_t *a, const data_array_t *w, int64_t rec, int64_t e, int64_t v,
                       gpp_err_t *err)
{
    return gpp_err_set(err,
                       "%s: record %lld element %lld: value %lld outside [0, %lld) (the %s of "
                       "'%s'); fix the data or the model's range",
                       gpp_npy_path(a), (long long)rec, (long long)e, (long long)v,
                       (long long)w->range, w->role ? "classes" : "table rows", w->name);
}

/* Samples [lo, lo + n) of op's array: record gpp_data_record(sample) each,
 * i64 narrowed to i32, index and class ranges checked. */
static int s_read_npy(gpp_data_t *self, int op, int64_t lo, int64_t n, void *out, gpp_err_t *err)
{
    const gpp_npy_t *a = self->npy[op];
    const data_array_t *w = &self->want[op];
    int64_t per = gpp_npy_record_elems(a);
    int64_t recs[256]; /* looked up a run at a time, under one lock */
    for (int64_t s = 0; s < n; s++) {
        if (s % 256 == 0)
            s_records(self, lo + s, n - s < 256 ? n - s : 256, recs);
        int64_t rec = recs[s % 256];
        const void *src = gpp_npy_record(a, rec);
        char *dst = (char *)out + (size_t)(s * per) * 4;
        if (gpp_npy_dtype(a) != GPP_NPY_I8) {
            memcpy(dst, src, (size_t)per * 4);
        } else {
            const char *p = src;
            for (int64_t e = 0; e < per; e++) {
                int64_t v;
                memcpy(&v, p + e * 8, 8);
                if (w->dtype == GPP_DTYPE_I32 && (v < 0 || v >= w->range))
                    return s_range_err(a, w, rec, e, v, err);
                int32_t v32 = (int32_t)v;
                memcpy(dst + e * 4, &v32, 4);
            }
        }
        if (w->dtype != GPP_DTYPE_I32)
            continue;
        for (int64_t e = 0; e < per; e++) {
            int32_t v;
            memcpy(&v, dst + e * 4, 4);
            if (v < 0 || v >= w->range)
                return s_range_err(a, w, rec, e, v, err);
        }
    }
    return 0;
}

/* Stored data (file or .npy) of op, safe on several threads at once
 * (pread; mapped arrays; the record order under its lock). */
static int s_read_stored(gpp_data_t *self, int op, int64_t lo, int64_t n, void *out, gpp_err_t *err)
{
    if (self->npy)
        return s_read_npy(self, op, lo, n, out, err);
    return s_read(self, &self->arr[self->arr_of_op[op]], lo, n, out, err);
}

/* A synthetic call the read-ahead does not hold: on the generator's
 * threads, its inputs kept for the labels (gpp_data_gen_input/label). */
static int s_gen_now(void *src, int op, int64_t lo, int64_t n, void *out, gpp_err_t *err)
{
    (void)err;
    gpp_data_t *self = src;
    if (self->g->ops[op].type == GPP_OP_INPUT)
        gpp_data_gen_input(self->gen, op, lo, n, out);
    else
        gpp_data_gen_label(self->gen, op, lo, n, out);
    return 0;
}

/* The read-ahead's fill function: any source, on its threads. */
static int s_fill_ahead(void *src, int op, int64_t lo, int64_t n, void *out, gpp_err_t *err)
{
    gpp_data_t *self = src;
    if (self->gen) {
        gpp_data_gen_fill(self->gen, op, lo, n, out);
        return 0;
    }
    return s_read_stored(self, op, lo, n, out, err);
}

const void *gpp_data_ref(gpp_data_t *self, int op, int64_t sample_lo, int64_t n, void *out,
                         gpp_err_t *err)
{
    assert(self && op >= 0 && op < self->g->n_ops && sample_lo >= 0 && n >= 0);
    const gpp_op_t *o = &self->g->ops[op];
    assert(o->type == GPP_OP_INPUT || gpp_data_shape_is_loss(o));
    if (self->ahead && n > 0)
        return gpp_data_ahead_get(self->ahead, op, sample_lo, n, out, err);
    if (!self->gen)
        return s_read_stored(self, op, sample_lo, n, out, err) < 0 ? NULL : out;
    if (o->type == GPP_OP_INPUT)
        gpp_data_gen_input(self->gen, op, sample_lo, n, out);
    else
        gpp_data_gen_label(self->gen, op, sample_lo, n, out);
    return out;
}

/* gpp_data_ref into out. */
static int s_fill(gpp_data_t *self, int op, int64_t lo, int64_t n, void *out, gpp_err_t *err)
{
    const void *v = gpp_data_ref(self, op, lo, n, out, err);
    if (!v)
        return -1;
    if (v != out) {
        gpp_dtype_t dt;
        int64_t r = self->g->ops[op].rows, c = self->g->ops[op].cols;
        if (gpp_data_shape_is_loss(&self->g->ops[op]))
            gpp_data_shape_label(self->g, op, &dt, &r, &c);
        memcpy(out, v, (size_t)(n * r * c) * 4);
    }
    return 0;
}

int gpp_data_input(gpp_data_t *self, int op, int64_t sample_lo, int64_t n, void *out,
                   gpp_err_t *err)
{
    assert(self && op >= 0 && op < self->g->n_ops && self->g->ops[op].type == GPP_OP_INPUT);
    return s_fill(self, op, sample_lo, n, out, err);
}

int gpp_data_label(gpp_data_t *self, int op, int64_t sample_lo, int64_t n, void *out,
                   gpp_err_t *err)
{
    assert(self && op >= 0 && op < self->g->n_ops && gpp_data_shape_is_loss(&self->g->ops[op]));
    return s_fill(self, op, sample_lo, n, out, err);
}

/* The read-ahead, made anew (threads, backend). */
static void s_ahead_build(gpp_data_t *self, int on)
{
    int64_t hits = self->ahead ? gpp_data_ahead_hits(self->ahead) : 0;
    gpp_data_ahead_destroy(&self->ahead);
    self->hits_before += hits;
    if (!on)
        return;
    const gpp_graph_t *g = self->g;
    int64_t *per = gpp_xcalloc((size_t)g->n_ops, sizeof *per);
    for (int o = 0; o < g->n_ops; o++)
        per[o] = gpp_data_shape_bytes(g, o);
    self->ahead = gpp_data_ahead_new(g->n_ops, per, s_fill_ahead, self->gen ? s_gen_now : NULL,
                                     self, self->threads, self->be);
    free(per);
}

int gpp_data_set_threads(gpp_data_t *self, int threads, int prefetch)
{
    assert(self);
    if (threads < 1 || threads > GPP_DATA_MAX_THREADS)
        return -1;
    s_ahead_build(self, 0); /* no read of the old one under way while threads change */
    if (self->gen)
        gpp_data_gen_set_threads(self->gen, threads);
    self->threads = threads;
    s_ahead_build(self, prefetch);
    return 0;
}

void gpp_data_set_backend(gpp_data_t *self, gpp_backend_t *be)
{
    assert(self);
    int on = self->ahead != NULL;
    s_ahead_build(self, 0); /* its buffers unlocked through the old backend */
    self->be = be;
    s_ahead_build(self, on);
}

int64_t gpp_data_prefetched(const gpp_data_t *self)
{
    assert(self);
    return self->hits_before + (self->ahead ? gpp_data_ahead_hits(self->ahead) : 0);
}

int gpp_data_threads(const gpp_data_t *self)
{
    assert(self);
    return self->threads;
}

int gpp_data_write_file(gpp_data_t *src, const char *path, int64_t n_samples, gpp_err_t *err)
{
    assert(src && path);
    if (n_samples < 1)
        return gpp_err_set(err, "dataset %s: --samples must be >= 1", path);
    const gpp_graph_t *g = src->g;
    int n = s_expected(g, NULL);
    data_array_t *arr = gpp_xcalloc((size_t)n + 1, sizeof *arr);
    s_expected(g, arr);
    size_t hbytes = HDR_FIXED + (size_t)HDR_ENTRY * (size_t)n + 4;
    unsigned char *hdr = gpp_xcalloc(1, hbytes);
    void *buf = NULL;
    gpp_atomic_file_t *f = NULL;
    int rc = -1;
    /* Per-array CRCs first (the header precedes the data): generate twice
     * rather than hold the data in memory; generation is cheap. */
    int64_t block = 256;
    int64_t maxper = 1;
    for (int i = 0; i < n; i++)
        if (arr[i].rows * arr[i].cols > maxper)
            maxper = arr[i].rows * arr[i].cols;
    buf = gpp_xcalloc((size_t)(block * maxper), 4);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            gpp_codec_t c = gpp_codec_writer(hdr, hbytes);
            gpp_codec_put_bytes(&c, GPP_DATA_MAGIC "", 8);
            gpp_codec_put_u32(&c, GPP_DATA_VERSION);
            gpp_codec_put_u32(&c, (uint32_t)n);
            gpp_codec_put_u64(&c, (uint64_t)n_samples);
            gpp_codec_put_u64(&c, hbytes);
            for (int i = 0; i < n; i++) {
                gpp_codec_put_bytes(&c, arr[i].name, GPP_NAME_LEN);
                gpp_codec_put_u32(&c, arr[i].role);
                gpp_codec_put_u32(&c, arr[i].dtype);
                gpp_codec_put_i64(&c, arr[i].rows);
                gpp_codec_put_i64(&c, arr[i].cols);
                gpp_codec_put_i64(&c, arr[i].range);
                gpp_codec_put_u32(&c, arr[i].crc);
                gpp_codec_put_u32(&c, 0); /* reserved */
            }
            gpp_codec_put_u32(&c, (uint32_t)crc32_z(0, hdr, hbytes - 4));
            assert(!c.overrun && c.pos == hbytes);
            if (!(f = gpp_atomic_file_open(path, err)) ||
                gpp_atomic_file_write(f, hdr, hbytes, err) < 0)
                goto done;
        }
        for (int i = 0; i < n; i++) {
            int op = s_find_op(g, arr[i].name);
            uint32_t crc = 0;
            for (int64_t lo = 0; lo < n_samples; lo += block) {
                int64_t m = n_samples - lo < block ? n_samples - lo : block;
                int r = arr[i].role == 0 ? gpp_data_input(src, op, lo, m, buf, err)
                                         : gpp_data_label(src, op, lo, m, buf, err);
                if (r < 0)
                    goto done;
                size_t len = (size_t)(m * arr[i].rows * arr[i].cols * 4);
                gpp_codec_t c = gpp_codec_writer(buf, len);
                gpp_codec_put_array32(&c, buf, len / 4); /* in place */
                if (pass == 0)
                    crc = (uint32_t)crc32_z(crc, buf, len);
                else if (gpp_atomic_file_write(f, buf, len, err) < 0)
                    goto done;
            }
            if (pass == 0)
                arr[i].crc = crc;
        }
    }
    rc = gpp_atomic_file_commit(&f, err);
done:
    if (rc < 0)
        gpp_err_prefix(err, "writing dataset %s", path);
    gpp_atomic_file_destroy(&f);
    free(buf);
    free(hdr);
    free(arr);
    return rc;
}
