/* gpp_optable_ext: the op table's functions for the op types of PyTorch
 * modules (embedding, param_add, reduce, sigmoid, tanh, dropout, matmul,
 * transpose, stack, triu, patch_embed, cross_attention, loss_bce); their
 * rows are in gpp_optable.c. docs/graph-format.md specifies them. */
#include "model/gpp_optable_ext.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

static int s_err(gpp_err_t *err, const gpp_op_t *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_err(gpp_err_t *err, const gpp_op_t *op, const char *fmt, ...)
{
    char msg[GPP_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gpp_err_set(err, "op %d '%s' (%s): %s", op->id, op->name, gpp_op_type_name(op->type),
                       msg);
}

static const gpp_op_t *s_in(const gpp_graph_t *g, const gpp_op_t *op, int k)
{
    return &g->ops[op->inputs[k]];
}

/* element-wise ops: fwd reads x, writes y; bwd reads x (or a mask) and dy,
 * read-modify-writes dx */
static void s_elt_cost(const gpp_op_t *op, double fwd, double bwd, gpp_op_cost_t *c)
{
    double e = (double)(op->rows * op->cols);
    c->fwd_flops = fwd * e;
    c->bwd_flops = bwd * e;
    c->io_bytes = 5 * op->rows * op->cols * 4;
}

/* ---- embedding ---- */

const char *const gpp_embed_modes[] = {"seq", "sum", "mean", NULL};
const char *const gpp_table_updates[] = {"lazy", "dense", NULL};

int gpp_ext_embedding_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *in = s_in(g, op, 0);
    if (!(in->type == GPP_OP_INPUT && in->input_kind == GPP_INPUT_INDICES))
        return s_err(err, op, "input '%s' must be an indices input (input_kind \"indices\")",
                     in->name);
    if (in->table_rows > op->table_rows)
        return s_err(err, op, "indices from '%s' range over %lld rows but the table has %lld",
                     in->name, (long long)in->table_rows, (long long)op->table_rows);
    op->rows = op->mode == GPP_EMBED_SEQ ? in->cols : 1;
    op->cols = op->dim;
    return 0;
}

int gpp_ext_embedding_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p)
{
    (void)g;
    /* N(0, 1): nn.Embedding's and nn.EmbeddingBag's own initialisation */
    p[0] = (gpp_param_t){"weight",
                         op->table_rows,
                         op->dim,
                         op->update == GPP_TABLE_LAZY,
                         GPP_INIT_NORMAL,
                         1.0f,
                         NULL,
                         0,
                         {0}};
    return 1;
}

void gpp_ext_embedding_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    int64_t ids = s_in(g, op, 0)->cols;
    c->fwd_flops = c->bwd_flops = (double)(ids * op->dim);
    c->bwd_w_flops = c->bwd_flops; /* ids take no gradient: all of it is the table's */
    /* gather the rows fwd; read-modify-write them bwd; the output and its gradient */
    c->io_bytes = 3 * ids * op->dim * 4 + 2 * op->rows * op->dim * 4;
}

/* ---- param_add ---- */

int gpp_ext_param_add_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p)
{
    (void)g;
    p[0] = (gpp_param_t){"value", op->rows, op->cols, 0, GPP_INIT_ZERO, 0, "", 0, {0}};
    if (op->lead)
        p[0].tdims = 3, p[0].tshape[0] = 1, p[0].tshape[1] = op->rows, p[0].tshape[2] = op->cols;
    return 1;
}

void gpp_ext_param_add_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    s_elt_cost(op, 1, 1, c);
    c->bwd_w_flops = c->bwd_flops / 2; /* dx += dy and dP += dy: an add per element each */
}

/* ---- reduce over the rows ---- */

const char *const gpp_reduce_modes[] = {"mean", "max", "sum", NULL};

int gpp_ext_reduce_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    (void)err;
    op->rows = 1;
    op->cols = s_in(g, op, 0)->cols;
    return 0;
}

void gpp_ext_reduce_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    int64_t e = s_in(g, op, 0)->rows * op->cols;
    c->fwd_flops = c->bwd_flops = (double)e;
    c->io_bytes = 3 * e * 4 + 2 * op->cols * 4;
    /* max: the row of each column's maximum, for the backward */
    c->kernel_stash_bytes = op->mode == GPP_REDUCE_MAX ? op->cols * 4 : 0;
}

/* ---- sigmoid, tanh, dropout ---- */

void gpp_ext_act_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    s_elt_cost(op, 4, 6, c);
}

int gpp_ext_dropout_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    if (!(op->p >= 0 && op->p < 1))
        return s_err(err, op, "p must be in [0, 1) (got %g)", op->p);
    op->rows = s_in(g, op, 0)->rows;
    op->cols = s_in(g, op, 0)->cols;
    return 0;
}

void gpp_ext_dropout_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    /* a hash per element for the mask, both ways */
    s_elt_cost(op, 8, 8, c);
}

/* ---- matmul, transpose, stack, triu ---- */

int gpp_ext_matmul_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *a = s_in(g, op, 0), *b = s_in(g, op, 1);
    if (a->cols != b->rows)
        return s_err(err, op,
                     "'%s' is %lldx%lld and '%s' %lldx%lld per sample: a matrix product needs "
                     "the first's columns to equal the second's rows",
                     a->name, (long long)a->rows, (long long)a->cols, b->name, (long long)b->rows,
                     (long long)b->cols);
    op->rows = a->rows;
    op->cols = b->cols;
    return 0;
}

void gpp_ext_matmul_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    int64_t r = op->rows, k = s_in(g, op, 0)->cols, n = op->cols;
    c->fwd_flops = 2.0 * (double)(r * k * n);
    c->bwd_flops = 4.0 * (double)(r * k * n);
    c->io_bytes = 3 * (r * k + k * n + r * n) * 4;
}

int gpp_ext_transpose_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    (void)err;
    op->rows = s_in(g, op, 0)->cols;
    op->cols = s_in(g, op, 0)->rows;
    return 0;
}

void gpp_ext_copy_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    /* fwd: read + write; bwd: read dy, read-modify-write dx */
    c->io_bytes = 5 * op->rows * op->cols * 4;
}

int gpp_ext_stack_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *in0 = s_in(g, op, 0);
    int64_t r = 0;
    for (int k = 0; k < op->n_inputs; k++) {
        const gpp_op_t *x = s_in(g, op, k);
        if (x->cols != in0->cols)
            return s_err(err, op,
                         "input '%s' has %lld cols, input '%s' has %lld; stack joins rows of "
                         "equal width",
                         x->name, (long long)x->cols, in0->name, (long long)in0->cols);
        r += x->rows;
    }
    op->rows = r;
    op->cols = in0->cols;
    return 0;
}

int gpp_ext_triu_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *x = s_in(g, op, 0);
    if (x->rows != x->cols)
        return s_err(err, op, "input '%s' is %lldx%lld per sample; triu takes a square matrix",
                     x->name, (long long)x->rows, (long long)x->cols);
    int64_t k = x->rows;
    if (op->offset && k < 2)
        return s_err(err, op, "a 1x1 matrix has no entries above its diagonal");
    op->rows = 1;
    op->cols = op->offset ? k * (k - 1) / 2 : k * (k + 1) / 2;
    return 0;
}

/* ---- patch_embed ---- */

int gpp_ext_patch_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *x = s_in(g, op, 0);
    int64_t h = op->height, p = op->patch;
    if (x->cols % h || h % p || (x->cols / h) % p)
        return s_err(err, op,
                     "input '%s' holds %lld channels of %lld pixels: height %lld must divide "
                     "them, and patch %lld the height and the width",
                     x->name, (long long)x->rows, (long long)x->cols, (long long)h, (long long)p);
    op->rows = (h / p) * (x->cols / h / p);
    op->cols = op->out_features;
    return 0;
}

int gpp_ext_patch_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p)
{
    int64_t c = s_in(g, op, 0)->rows, in = c * op->patch * op->patch, out = op->out_features;
    /* nn.Conv2d's default: kaiming_uniform(a=sqrt 5) = U(+-1/sqrt(fan_in)) */
    float bound = (float)(1.0 / sqrt((double)in));
    p[0] = (gpp_param_t){
        "weight", out, in, 0, GPP_INIT_UNIFORM, bound, NULL, 4, {out, c, op->patch, op->patch}};
    p[1] = (gpp_param_t){"bias", 1, out, 0, GPP_INIT_UNIFORM, bound, NULL, 1, {out}};
    return 2;
}

void gpp_ext_patch_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    const gpp_op_t *x = s_in(g, op, 0);
    int64_t r = op->rows, in = x->rows * op->patch * op->patch, co = op->out_features;
    c->fwd_flops = 2.0 * (double)(r * in * co);
    c->bwd_flops = 4.0 * (double)(r * in * co);
    c->bwd_w_flops = 2.0 * (double)(r * in * co); /* dW of the product over the patches */
    /* the patches gathered (fwd and bwd), the product's reads and writes */
    c->io_bytes = 3 * (r * in + r * co) * 4 + 4 * r * in * 4;
}

/* ---- cross_attention ---- */

size_t gpp_cross_attention_stash_bytes(int64_t n, int64_t sq, int64_t sk, int64_t hidden, int heads)
{
    /* q [sq, E], kv [sk, 2E], probabilities [heads, sq, sk], ctx [sq, E] */
    int64_t floats = n * (sq * hidden + sk * 2 * hidden + heads * sq * sk + sq * hidden);
    return (size_t)floats * sizeof(float);
}

size_t gpp_cross_attention_workspace_bytes(int64_t n, int64_t sq, int64_t sk, int64_t hidden)
{
    /* dctx [sq, E], dq [sq, E], dkv [sk, 2E], one [sq, sk] block, the bias
       sums' ones (as many as the longer of the two) */
    int64_t ones = sq > sk ? sq : sk;
    return (size_t)(n * (2 * sq * hidden + 2 * sk * hidden + ones) + sq * sk) * sizeof(float);
}

int gpp_ext_cross_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *q = s_in(g, op, 0), *kv = s_in(g, op, 1);
    if (q->cols != kv->cols)
        return s_err(err, op,
                     "queries '%s' have %lld features, keys '%s' %lld: gpp's cross-attention "
                     "takes kdim = vdim = embed_dim",
                     q->name, (long long)q->cols, kv->name, (long long)kv->cols);
    if (!(op->p >= 0 && op->p < 1))
        return s_err(err, op,
                     "p (dropout on the attention probabilities) must be in [0, 1) "
                     "(got %g)",
                     op->p);
    if (q->cols % op->heads)
        return s_err(err, op, "heads=%d must divide the hidden size %lld", op->heads,
                     (long long)q->cols);
    op->rows = q->rows;
    op->cols = q->cols;
    return 0;
}

void gpp_ext_cross_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    double sq = (double)op->rows, sk = (double)s_in(g, op, 1)->rows, h = (double)op->cols;
    double H = op->heads;
    c->fwd_flops = 4.0 * sq * h * h + 4.0 * sk * h * h + 4.0 * sq * sk * h;
    c->bwd_flops = 2.0 * c->fwd_flops;
    c->bwd_w_flops = 4.0 * sq * h * h + 4.0 * sk * h * h; /* the projections' weights */
    c->io_bytes = (int64_t)(3.0 * (6.0 * sq * h + 4.0 * sk * h + 4.0 * H * sq * sk) * 4.0);
    c->kernel_stash_bytes = (int64_t)gpp_cross_attention_stash_bytes(
        1, op->rows, s_in(g, op, 1)->rows, op->cols, op->heads);
}
