/* gpp_data_gen: the synthetic source behind gpp_data_new (see gpp_data.h
 * for what the values are and gpp_data_gen.h for the threads): the fixed
 * teacher, and generation chunked over a gpp_data_pool. */
#include "agent/data/gpp_data_gen.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/data/gpp_hash.h"

/* Purpose tags of the random streams (gpp_hash_key's second field; gpp_data
 * has TAG_SHUF = 0x534855). */
enum { TAG_INPUT = 0x494e50, TAG_EMB = 0x454d42, TAG_PROJ = 0x50524f };

/* Samples [lo, lo + n) of one INPUT op, host memory. */
typedef struct {
    int64_t lo, n;
    void *buf;
    size_t cap_bytes;
} data_block_t;

/* Blocks up to this size are kept for the teacher. */
#define CACHE_MAX_BYTES ((size_t)64 << 20)

/* A phase of parallel generation over samples [lo, lo + n): for each of
 * ops[0..n_ops), chunks K pieces of it: INPUT ops' elements, or loss ops'
 * samples (the teacher reading the INPUT blocks src[op id]). Every value
 * depends only on its own index, so any chunking gives the same bits. */
typedef struct {
    const gpp_data_gen_t *self;
    int64_t lo, n;
    int n_ops, K;
    const int *ops;   /* [n_ops] op ids */
    void *const *out; /* [graph ops] by op id: where op's samples go */
    void *const *src; /* [graph ops] by op id: the teacher's INPUT blocks */
} phase_t;

/* The teacher of one loss op: the inputs it reads and its projection. */
typedef struct {
    int n_in;
    int *in;       /* ancestor INPUT op ids, ascending */
    int64_t dim_z; /* features per row */
    int64_t C;     /* outputs per row (MSE cols, CE classes) */
    float *P;      /* [dim_z, C] */
} teacher_t;

struct gpp_data_gen_s {
    const gpp_graph_t *g;
    uint64_t seed;
    teacher_t *teach; /* [n_ops], set for loss ops */
    /* the last block generated per INPUT op, so that the teacher reuses the
     * inputs the same process just generated */
    data_block_t *cache; /* [n_ops] */
    int threads;           /* the caller + threads - 1 pool workers */
    gpp_data_pool_t *pool; /* created on first use */
};

/* Marks the INPUT ops `op` depends on. */
static void s_ancestors(const gpp_graph_t *g, int op, char *seen)
{
    if (seen[op])
        return;
    seen[op] = 1;
    for (int i = 0; i < g->ops[op].n_inputs; i++)
        s_ancestors(g, g->ops[op].inputs[i], seen);
}

static int64_t s_features(const gpp_op_t *in)
{
    return in->input_kind == GPP_INPUT_INDICES ? GPP_DATA_TEACHER_DIM : in->cols;
}

gpp_data_gen_t *gpp_data_gen_new(const gpp_graph_t *g, uint64_t seed)
{
    assert(g && g->finalized);
    gpp_data_gen_t *self = gpp_xcalloc(1, sizeof *self);
    self->g = g;
    self->seed = seed;
    self->teach = gpp_xcalloc((size_t)g->n_ops, sizeof *self->teach);
    self->cache = gpp_xcalloc((size_t)g->n_ops, sizeof *self->cache);
    gpp_data_gen_set_threads(self, gpp_data_pool_default_threads());
    char *seen = gpp_xcalloc((size_t)g->n_ops, 1);
    for (int o = 0; o < g->n_ops; o++) {
        const gpp_op_t *L = &g->ops[o];
        if (!gpp_data_shape_is_loss(L))
            continue;
        teacher_t *t = &self->teach[o];
        memset(seen, 0, (size_t)g->n_ops);
        s_ancestors(g, o, seen);
        t->in = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
        for (int i = 0; i < g->n_ops; i++)
            if (seen[i] && g->ops[i].type == GPP_OP_INPUT) {
                t->in[t->n_in++] = i;
                t->dim_z += s_features(&g->ops[i]);
            }
        const gpp_op_t *x = &g->ops[L->inputs[0]];
        t->C = x->cols; /* CE: classes = cols of the logits */
        t->P = gpp_xcalloc((size_t)(t->dim_z * t->C), sizeof(float));
        uint64_t key = gpp_hash_key(seed, TAG_PROJ, (uint64_t)o);
        for (int64_t k = 0; k < t->dim_z * t->C; k++)
            t->P[k] = gpp_hash_normal(key, (uint64_t)k);
    }
    free(seen);
    return self;
}

void gpp_data_gen_destroy(gpp_data_gen_t **self_p)
{
    assert(self_p);
    gpp_data_gen_t *self = *self_p;
    if (!self)
        return;
    gpp_data_pool_destroy(&self->pool);
    for (int o = 0; o < self->g->n_ops; o++) {
        free(self->teach[o].in);
        free(self->teach[o].P);
        free(self->cache[o].buf);
    }
    free(self->teach);
    free(self->cache);
    free(self);
    *self_p = NULL;
}

/* ---- synthetic ---- */

/* Elements [e0, e0 + len) of INPUT op's stream (element e of sample s is
 * stream element s x rows x cols + e) into out. */
static void s_gen_elems(const gpp_data_gen_t *self, const gpp_op_t *op, int64_t e0, int64_t len,
                        void *out)
{
    uint64_t key = gpp_hash_key(self->seed, TAG_INPUT, (uint64_t)op->id);
    if (op->input_kind == GPP_INPUT_INDICES) {
        int32_t *o = out;
        for (int64_t e = 0; e < len; e++)
            o[e] = (int32_t)gpp_hash_below(key, (uint64_t)(e0 + e), op->table_rows);
    } else {
        float *o = out;
        for (int64_t e = 0; e < len; e++)
            o[e] = gpp_hash_normal(key, (uint64_t)(e0 + e));
    }
}

static void s_teach_sample(const gpp_data_gen_t *self, const gpp_op_t *L, const void *const *xs,
                           void *out, float *z, float *u);


static void s_phase_chunk(void *arg, int c, int n_chunks)
{
    (void)n_chunks;
    const phase_t *p = arg;
    const gpp_data_gen_t *self = p->self;
    const gpp_graph_t *g = self->g;
    const gpp_op_t *op = &g->ops[p->ops[c / p->K]];
    int64_t k = c % p->K;
    if (op->type == GPP_OP_INPUT) {
        int64_t per = op->rows * op->cols, total = p->n * per;
        int64_t b = total * k / p->K, e = total * (k + 1) / p->K;
        s_gen_elems(self, op, p->lo * per + b, e - b, (char *)p->out[op->id] + (size_t)b * 4);
        return;
    }
    const teacher_t *t = &self->teach[op->id];
    gpp_dtype_t dt;
    int64_t rows, cols;
    gpp_data_shape_label(g, op->id, &dt, &rows, &cols);
    int64_t s0 = p->n * k / p->K, s1 = p->n * (k + 1) / p->K;
    if (s0 == s1)
        return;
    const void **xs = gpp_xcalloc((size_t)t->n_in + 1, sizeof *xs);
    float *z = gpp_xcalloc((size_t)(rows * t->dim_z + 1), sizeof(float));
    float *u = gpp_xcalloc((size_t)t->C, sizeof(float));
    for (int64_t s = s0; s < s1; s++) {
        for (int i = 0; i < t->n_in; i++) {
            const gpp_op_t *in = &g->ops[t->in[i]];
            xs[i] = (const char *)p->src[in->id] + (size_t)(s * in->rows * in->cols) * 4;
        }
        s_teach_sample(self, op, xs, (char *)p->out[op->id] + (size_t)(s * rows * cols) * 4, z,
                       u);
    }
    free(xs);
    free(z);
    free(u);
}

/* Least work (elements generated, or teacher products) worth a chunk of its
 * own: one round trip through the pool (queue, wake a worker, wait) took
 * ~15 us on the 2-core development machine (bench_data's small DLRM ran
 * slower on 2 threads than on 1 when every call was split), and the
 * generation runs at a few ns per element, so a chunk below ~32k elements
 * costs about what it saves. */
#define MIN_CHUNK_WORK ((int64_t)1 << 15)

/* Chunks per op of a phase over n samples of ops[0..n_ops): 4 per thread,
 * so that threads finishing early (or the caller joining late) take over
 * the rest, but none below MIN_CHUNK_WORK for the largest op; 1 with one
 * thread. */
static int s_chunks_per_op(const gpp_data_gen_t *self, const int *ops, int n_ops, int64_t n)
{
    if (self->threads <= 1)
        return 1;
    int64_t work = 0;
    for (int i = 0; i < n_ops; i++) {
        const gpp_op_t *op = &self->g->ops[ops[i]];
        const teacher_t *t = &self->teach[op->id];
        int64_t w = op->type == GPP_OP_INPUT
                        ? n * op->rows * op->cols
                        : n * self->g->ops[op->inputs[0]].rows * t->dim_z * (t->C + 1);
        work = w > work ? w : work;
    }
    int64_t k = work / MIN_CHUNK_WORK;
    return k < 1 ? 1 : k > 4 * self->threads ? 4 * self->threads : (int)k;
}

/* The pool, created on first use: threads - 1 workers (the caller is the
 * T-th). */
static gpp_data_pool_t *s_pool(gpp_data_gen_t *self)
{
    if (!self->pool)
        self->pool = gpp_data_pool_new(self->threads - 1);
    return self->pool;
}

/* Runs phase p on the calling thread and the pool (synchronously). */
static void s_phase_run(gpp_data_gen_t *self, phase_t *p)
{
    if (p->n_ops * p->K == 1 || (self->threads <= 1 && !self->pool)) {
        for (int c = 0; c < p->n_ops * p->K; c++)
            s_phase_chunk(p, c, p->n_ops * p->K);
        return;
    }
    gpp_data_job_t j = {.fn = s_phase_chunk, .arg = p, .n_chunks = p->n_ops * p->K};
    gpp_data_pool_run(s_pool(self), &j);
}

/* INPUT op's samples [lo, lo + n) into out, in parallel. */
static void s_gen_input(gpp_data_gen_t *self, const gpp_op_t *op, int64_t lo, int64_t n, void *out)
{
    void **by_op = gpp_xcalloc((size_t)self->g->n_ops, sizeof *by_op);
    by_op[op->id] = out;
    phase_t p = {.self = self, .lo = lo, .n = n, .n_ops = 1,
                 .K = s_chunks_per_op(self, &op->id, 1, n), .ops = &op->id, .out = by_op,
                 .src = by_op};
    s_phase_run(self, &p);
    free(by_op);
}

/* Keeps a copy of a generated block for the teacher. */
static void s_cache_put(gpp_data_gen_t *self, const gpp_op_t *op, int64_t lo, int64_t n, const void *x)
{
    size_t bytes = (size_t)(n * op->rows * op->cols) * 4;
    data_block_t *c = &self->cache[op->id];
    if (bytes > CACHE_MAX_BYTES)
        return;
    if (bytes > c->cap_bytes) {
        free(c->buf);
        c->buf = gpp_xcalloc(1, bytes);
        c->cap_bytes = bytes;
    }
    memcpy(c->buf, x, bytes);
    c->lo = lo, c->n = n;
}

/* Samples [lo, lo + n) of INPUT op: from the cache, else generated (and
 * cached, or into *scratch when too large; the caller frees it). */
static const void *s_block(gpp_data_gen_t *self, const gpp_op_t *op, int64_t lo, int64_t n,
                           void **scratch)
{
    const data_block_t *c = &self->cache[op->id];
    if (c->buf && c->n > 0 && lo >= c->lo && lo + n <= c->lo + c->n)
        return (const char *)c->buf + (size_t)((lo - c->lo) * op->rows * op->cols) * 4;
    void *x = gpp_xcalloc((size_t)(n * op->rows * op->cols) + 1, 4);
    s_gen_input(self, op, lo, n, x);
    s_cache_put(self, op, lo, n, x);
    if (self->cache[op->id].buf && self->cache[op->id].lo == lo && self->cache[op->id].n == n) {
        free(x);
        return self->cache[op->id].buf;
    }
    *scratch = x;
    return x;
}

/* Labels of one sample from the teacher; xs[i]: the sample's values of
 * teacher input i; z [rows, dim_z] and u [C] scratch. */
static void s_teach_sample(const gpp_data_gen_t *self, const gpp_op_t *L, const void *const *xs,
                           void *out, float *z, float *u)
{
    const gpp_graph_t *g = self->g;
    const teacher_t *t = &self->teach[L->id];
    int64_t rows = g->ops[L->inputs[0]].rows;
    float inv = 1.0f / sqrtf((float)t->dim_z);
    int64_t off = 0;
    for (int i = 0; i < t->n_in; i++) {
        const gpp_op_t *in = &g->ops[t->in[i]];
        const float *x = xs[i];
        int64_t f = s_features(in);
        for (int64_t r = 0; r < rows; r++) {
            float *zr = z + r * t->dim_z + off;
            if (in->input_kind == GPP_INPUT_INDICES) {
                const int32_t *idx = xs[i];
                uint64_t key = gpp_hash_key(self->seed, TAG_EMB, (uint64_t)in->id);
                float sc = 1.0f / sqrtf((float)in->cols);
                for (int64_t k = 0; k < f; k++)
                    zr[k] = 0;
                for (int64_t b = 0; b < in->cols; b++)
                    for (int64_t k = 0; k < f; k++)
                        zr[k] += sc * gpp_hash_normal(key, (uint64_t)(idx[b] * f + k));
            } else if (in->rows == rows) {
                memcpy(zr, x + r * f, (size_t)f * sizeof(float));
            } else {
                for (int64_t k = 0; k < f; k++) {
                    float s = 0;
                    for (int64_t rr = 0; rr < in->rows; rr++)
                        s += x[rr * f + k];
                    zr[k] = s / (float)in->rows;
                }
            }
        }
        off += f;
    }
    for (int64_t r = 0; r < rows; r++) {
        /* u = z_r P inv, 8 outputs at a time in registers: each u[c] still
         * sums its dim_z products in order d = 0, 1, ... (the same bits as
         * one u[c] += z_d inv P[d][c] after another), but without a store
         * per product, and the fixed-width inner loop vectorizes */
        const float *zr = z + r * t->dim_z;
        for (int64_t c0 = 0; c0 < t->C; c0 += 8) {
            float acc[8] = {0};
            const float *p = t->P + c0;
            if (t->C - c0 >= 8) {
                for (int64_t d = 0; d < t->dim_z; d++, p += t->C) {
                    float zd = zr[d] * inv;
                    for (int j = 0; j < 8; j++)
                        acc[j] += zd * p[j];
                }
            } else {
                for (int64_t d = 0; d < t->dim_z; d++, p += t->C) {
                    float zd = zr[d] * inv;
                    for (int64_t j = 0; j < t->C - c0; j++)
                        acc[j] += zd * p[j];
                }
            }
            memcpy(u + c0, acc, (size_t)(t->C - c0 < 8 ? t->C - c0 : 8) * sizeof(float));
        }
        if (L->type == GPP_OP_LOSS_CE) {
            int64_t best = 0;
            for (int64_t c = 1; c < t->C; c++)
                if (u[c] > u[best])
                    best = c;
            ((int32_t *)out)[r] = (int32_t)best;
        } else if (L->type == GPP_OP_LOSS_BCE) { /* 0 / 1: the teacher's sign */
            for (int64_t c = 0; c < t->C; c++)
                ((float *)out)[r * t->C + c] = u[c] > 0.0f ? 1.0f : 0.0f;
        } else {
            memcpy((float *)out + r * t->C, u, (size_t)t->C * sizeof(float));
        }
    }
}

static void s_gen_labels(gpp_data_gen_t *self, const gpp_op_t *L, int64_t lo, int64_t n,
                         void *out)
{
    const gpp_graph_t *g = self->g;
    const teacher_t *t = &self->teach[L->id];
    void **by_op = gpp_xcalloc((size_t)g->n_ops, sizeof *by_op);
    void **scratch = gpp_xcalloc((size_t)t->n_in + 1, sizeof *scratch);
    for (int i = 0; i < t->n_in; i++)
        by_op[t->in[i]] = (void *)s_block(self, &g->ops[t->in[i]], lo, n, &scratch[i]);
    by_op[L->id] = out;
    phase_t p = {.self = self, .lo = lo, .n = n, .n_ops = 1,
                 .K = s_chunks_per_op(self, &L->id, 1, n), .ops = &L->id, .out = by_op,
                 .src = by_op};
    s_phase_run(self, &p);
    for (int i = 0; i < t->n_in; i++)
        free(scratch[i]);
    free(scratch);
    free(by_op);
}

int gpp_data_gen_set_threads(gpp_data_gen_t *self, int threads)
{
    assert(self);
    if (threads < 1 || threads > GPP_DATA_MAX_THREADS)
        return -1;
    gpp_data_pool_destroy(&self->pool);
    self->threads = threads;
    return 0;
}

int gpp_data_gen_threads(const gpp_data_gen_t *self)
{
    assert(self);
    return self->threads;
}

void gpp_data_gen_input(gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out)
{
    assert(self && self->g->ops[op].type == GPP_OP_INPUT);
    s_gen_input(self, &self->g->ops[op], lo, n, out);
    s_cache_put(self, &self->g->ops[op], lo, n, out);
}

void gpp_data_gen_label(gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out)
{
    assert(self && gpp_data_shape_is_loss(&self->g->ops[op]));
    s_gen_labels(self, &self->g->ops[op], lo, n, out);
}

void gpp_data_gen_fill(const gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out)
{
    assert(self && n >= 0);
    const gpp_graph_t *g = self->g;
    const gpp_op_t *o = &g->ops[op];
    if (o->type == GPP_OP_INPUT) {
        int64_t per = o->rows * o->cols;
        s_gen_elems(self, o, lo * per, n * per, out);
        return;
    }
    /* labels: the teacher's inputs of these samples, generated here */
    const teacher_t *t = &self->teach[op];
    void **by_op = gpp_xcalloc((size_t)g->n_ops, sizeof *by_op);
    for (int i = 0; i < t->n_in; i++) {
        const gpp_op_t *in = &g->ops[t->in[i]];
        int64_t per = in->rows * in->cols;
        by_op[in->id] = gpp_xcalloc((size_t)(n * per) + 1, 4);
        s_gen_elems(self, in, lo * per, n * per, by_op[in->id]);
    }
    by_op[op] = out;
    phase_t p = {.self = self, .lo = lo, .n = n, .n_ops = 1, .K = 1, .ops = &o->id, .out = by_op,
                 .src = by_op};
    s_phase_chunk(&p, 0, 1);
    for (int i = 0; i < t->n_in; i++)
        free(by_op[t->in[i]]);
    free(by_op);
}
