/* gpp_optable: the op table (see gpp_optable.h). One block per op type:
 * its shape, parameter and cost functions, then its row in gpp_optable[]. */
#include "model/gpp_optable.h"
#include "model/gpp_optable_ext.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM_MAX ((int64_t)1 << 40) /* largest size an attribute may give */

static int s_err(gpp_err_t *err, const gpp_op_t *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "op 3 'fc' (linear): " + message */
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

/* The output keeps the shape of the first input. */
static int s_shape_same(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    (void)err;
    op->rows = s_in(g, op, 0)->rows;
    op->cols = s_in(g, op, 0)->cols;
    return 0;
}

/* ---- input ---- */

static const char *const s_input_kinds[] = {"dense", "indices", NULL};

static int s_input_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    (void)g;
    if (op->input_kind == GPP_INPUT_INDICES && op->table_rows < 1)
        return s_err(err, op, "an indices input needs table_rows >= 1 (the index range)");
    if (op->input_kind == GPP_INPUT_INDICES && op->rows != 1)
        return s_err(err, op, "an indices input holds one bag per sample: rows must be 1, got %lld",
                     (long long)op->rows);
    return 0;
}

static void s_input_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    c->io_bytes = op->rows * op->cols * 4; /* generated or read once */
}

/* ---- linear ---- */

static int s_linear_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    (void)err;
    op->rows = s_in(g, op, 0)->rows;
    op->cols = op->out_features;
    return 0;
}

static int s_linear_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p)
{
    int64_t in = s_in(g, op, 0)->cols, out = op->out_features;
    float xavier = (float)sqrt(6.0 / ((double)in + (double)out));
    p[0] = (gpp_param_t){"weight", out, in, 0, GPP_INIT_UNIFORM, xavier, NULL, 0, {0}};
    if (!op->bias)
        return 1;
    p[1] = (gpp_param_t){"bias", 1, out, 0, GPP_INIT_ZERO, 0, NULL, 1, {out}};
    return 2;
}

static void s_linear_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    int64_t r = s_in(g, op, 0)->rows, ci = s_in(g, op, 0)->cols, co = op->out_features;
    c->fwd_flops = 2.0 * (double)(r * ci * co);
    c->bwd_flops = 4.0 * (double)(r * ci * co); /* dX and dW */
    c->bwd_w_flops = 2.0 * (double)(r * ci * co);
    c->io_bytes = 3 * (r * ci + r * co) * 4;
}

/* ---- relu, gelu ---- */

static void s_relu_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    c->fwd_flops = c->bwd_flops = (double)(op->rows * op->cols);
    c->io_bytes = 5 * op->rows * op->cols * 4;
}

static const char *const s_gelu_forms[] = {"tanh", "erf", NULL};

/* Either form: the same count. Both are memory-bound element-wise kernels
 * (docs/planner.md), so the bytes, not the formula's FLOPs, set the time. */
static void s_gelu_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    c->fwd_flops = 8.0 * (double)(op->rows * op->cols);
    c->bwd_flops = 12.0 * (double)(op->rows * op->cols);
    c->io_bytes = 5 * op->rows * op->cols * 4;
}

/* ---- layernorm ---- */

size_t gpp_layernorm_stash_bytes(int64_t n, int64_t rows)
{
    assert(n >= 0 && rows >= 0);
    return (size_t)(n * rows) * 2 * sizeof(float);
}

static int s_layernorm_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p)
{
    (void)g;
    p[0] = (gpp_param_t){"gain", 1, op->cols, 0, GPP_INIT_ONE, 0, "weight", 1, {op->cols}};
    p[1] = (gpp_param_t){"bias", 1, op->cols, 0, GPP_INIT_ZERO, 0, NULL, 1, {op->cols}};
    return 2;
}

static void s_layernorm_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    c->fwd_flops = 8.0 * (double)(op->rows * op->cols);
    c->bwd_flops = 12.0 * (double)(op->rows * op->cols);
    c->bwd_w_flops = 3.0 * (double)(op->rows * op->cols); /* dgain += dy xhat, dbias += dy */
    c->io_bytes = 5 * op->rows * op->cols * 4;
    c->kernel_stash_bytes = (int64_t)gpp_layernorm_stash_bytes(1, op->rows);
}

/* ---- attention ---- */

size_t gpp_attention_stash_bytes(int64_t n, int64_t seq, int64_t hidden, int heads)
{
    assert(n >= 0 && seq >= 0 && hidden >= 0 && heads > 0);
    int64_t floats = n * seq * 3 * hidden + n * heads * seq * seq + n * seq * hidden;
    return (size_t)floats * sizeof(float);
}

static int s_attention_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    int64_t c = s_in(g, op, 0)->cols;
    if (c % op->heads != 0)
        return s_err(err, op, "heads=%d must divide the hidden size %lld", op->heads, (long long)c);
    return s_shape_same(g, op, err);
}

static int s_attention_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p)
{
    (void)g;
    int64_t h = op->cols;
    /* each of Q, K, V is a (hidden, hidden) map: fan_out = hidden for w_qkv too */
    float xavier = (float)sqrt(6.0 / ((double)h + (double)h));
    p[0] = (gpp_param_t){"w_qkv", 3 * h, h, 0, GPP_INIT_UNIFORM, xavier, "in_proj_weight", 0, {0}};
    p[1] = (gpp_param_t){"b_qkv", 1, 3 * h, 0, GPP_INIT_ZERO, 0, "in_proj_bias", 1, {3 * h}};
    p[2] = (gpp_param_t){"w_o", h, h, 0, GPP_INIT_UNIFORM, xavier, "out_proj.weight", 0, {0}};
    p[3] = (gpp_param_t){"b_o", 1, h, 0, GPP_INIT_ZERO, 0, "out_proj.bias", 1, {h}};
    return 4;
}

static void s_attention_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    /* causal: the same work (the masked scores are computed, then zeroed by the softmax) */
    double s = (double)op->rows, h = (double)op->cols, H = op->heads;
    c->fwd_flops = 8.0 * s * h * h + 4.0 * s * s * h;
    c->bwd_flops = 2.0 * c->fwd_flops;
    c->bwd_w_flops = 8.0 * s * h * h; /* the q/k/v and output projections' weights */
    c->io_bytes = (int64_t)(3.0 * (10.0 * s * h + 4.0 * H * s * s) * 4.0);
    c->kernel_stash_bytes = (int64_t)gpp_attention_stash_bytes(1, op->rows, op->cols, op->heads);
}

/* ---- embedding_bag ---- */

static int s_embedding_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *in = s_in(g, op, 0);
    if (!(in->type == GPP_OP_INPUT && in->input_kind == GPP_INPUT_INDICES))
        return s_err(err, op, "input '%s' must be an indices input (input_kind \"indices\")",
                     in->name);
    if (in->table_rows > op->table_rows)
        return s_err(err, op, "indices from '%s' range over %lld rows but the table has %lld",
                     in->name, (long long)in->table_rows, (long long)op->table_rows);
    op->rows = 1;
    op->cols = op->dim;
    return 0;
}

static int s_embedding_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p)
{
    /* N(0, 1/bag): the bag sum has unit variance */
    float sd = 1.0f / sqrtf((float)s_in(g, op, 0)->cols);
    p[0] = (gpp_param_t){.name = "table",
                         .rows = op->table_rows,
                         .cols = op->dim,
                         .sparse = op->update == GPP_TABLE_LAZY,
                         .init = GPP_INIT_NORMAL,
                         .scale = sd,
                         .torch = "weight"};
    return 1;
}

static void s_embedding_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    int64_t bag = s_in(g, op, 0)->cols;
    c->fwd_flops = c->bwd_flops = (double)(bag * op->dim);
    c->bwd_w_flops = c->bwd_flops; /* indices take no gradient: all of it is the table's */
    /* gather the bag's rows fwd; read-modify-write them bwd */
    c->io_bytes = 3 * bag * op->dim * 4 + 2 * op->dim * 4;
}

/* ---- concat ---- */

static int s_concat_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *in0 = s_in(g, op, 0);
    int64_t c = 0;
    for (int k = 0; k < op->n_inputs; k++) {
        const gpp_op_t *x = s_in(g, op, k);
        if (x->rows != in0->rows)
            return s_err(err, op,
                         "input '%s' has %lld rows, input '%s' has %lld; concat joins "
                         "features of equal rows",
                         x->name, (long long)x->rows, in0->name, (long long)in0->rows);
        c += x->cols;
    }
    op->rows = in0->rows;
    op->cols = c;
    return 0;
}

static void s_concat_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    c->io_bytes = 4 * op->rows * op->cols * 4;
}

/* ---- add ---- */

static int s_add_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *a = s_in(g, op, 0), *b = s_in(g, op, 1);
    if (b->rows != a->rows || b->cols != a->cols)
        return s_err(err, op, "shapes differ: '%s' %lldx%lld, '%s' %lldx%lld", a->name,
                     (long long)a->rows, (long long)a->cols, b->name, (long long)b->rows,
                     (long long)b->cols);
    return s_shape_same(g, op, err);
}

static void s_add_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    c->fwd_flops = (double)(op->rows * op->cols);
    c->io_bytes = 6 * op->rows * op->cols * 4;
}

/* ---- slice ---- */

static int s_slice_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *x = s_in(g, op, 0);
    if (op->start + op->width > x->cols)
        return s_err(err, op, "columns [%lld, %lld) exceed the %lld of input '%s'",
                     (long long)op->start, (long long)(op->start + op->width), (long long)x->cols,
                     x->name);
    op->rows = x->rows;
    op->cols = op->width;
    return 0;
}

static void s_slice_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    /* fwd: read + write the block; bwd: read dy, read-modify-write dx's block */
    c->io_bytes = 5 * op->rows * op->cols * 4;
}

/* ---- reshape ---- */

static int s_reshape_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *x = s_in(g, op, 0);
    if (op->rows > INT64_MAX / op->cols || op->rows * op->cols != x->rows * x->cols)
        return s_err(err, op,
                     "%lldx%lld is not the %lld elements per sample of input '%s' (%lldx%lld)",
                     (long long)op->rows, (long long)op->cols, (long long)(x->rows * x->cols),
                     x->name, (long long)x->rows, (long long)x->cols);
    return 0;
}

static void s_reshape_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    (void)g;
    /* fwd: a copy (read + write); bwd: read dy, read-modify-write dx (an axpy) */
    c->io_bytes = 5 * op->rows * op->cols * 4;
}

/* ---- losses: out 1x1 ---- */

static int s_loss_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    int64_t c = s_in(g, op, 0)->cols;
    if (op->type == GPP_OP_LOSS_CE) {
        if (c < 2)
            return s_err(err, op, "needs >= 2 classes, input has %lld", (long long)c);
        op->classes = c;
    }
    op->rows = 1;
    op->cols = 1;
    return 0;
}

static void s_loss_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c)
{
    int64_t r = s_in(g, op, 0)->rows, n = s_in(g, op, 0)->cols;
    c->fwd_flops = 5.0 * (double)(r * n);
    c->bwd_flops = 2.0 * (double)(r * n);
    c->io_bytes = 3 * r * n * 4;
}

/* ---- the table ---- */

/* One row per type reads better than the formatter's layout. */
/* clang-format off */
#define I64(field, req, def, lo, hi) \
    {#field, GPP_ATTR_I64, offsetof(gpp_op_t, field), req, def, lo, hi, NULL}
#define INT(field, req, def, lo, hi, labels) \
    {#field, GPP_ATTR_INT, offsetof(gpp_op_t, field), req, def, lo, hi, labels}
#define NUM(field) {#field, GPP_ATTR_NUM, offsetof(gpp_op_t, field), 0, 0, 0, 0, NULL}

/* GEMMs per pass (fwd_gemms, bwd_gemms), from the kernels (kernels/cpu, kernels/cuda): linear
   1 and 2 (dx, dW; the bias gradient, a matrix-vector sum, is not counted as a kernel), attention
   4 and 8, opaque 1 and 2 (an op given only by its FLOPs is taken as a matrix product, as every
   kernel was before the split). The others are element-wise, row-wise (layer norm, softmax in
   losses) or gathers (embedding bag: a gather-sum forward, a row-sparse scatter backward on both
   backends): no GEMM. */
const gpp_op_info_t gpp_optable[] = {
    [GPP_OP_INPUT] = {.name = "input", .role = GPP_ROLE_SOURCE, .min_inputs = 0, .max_inputs = 0,
        .n_attrs = 4, .attrs = {I64(rows, 0, 1, 1, DIM_MAX), I64(cols, 1, 0, 1, DIM_MAX),
                                INT(input_kind, 0, GPP_INPUT_DENSE, 0, 1, s_input_kinds),
                                I64(table_rows, 0, 0, 0, DIM_MAX)},
        .fwd_kernels = 0, .shape = s_input_shape, .cost = s_input_cost},
    [GPP_OP_LINEAR] = {.name = "linear", .role = GPP_ROLE_LAYER, .min_inputs = 1, .max_inputs = 1,
        .n_attrs = 2, .attrs = {I64(out_features, 1, 0, 1, DIM_MAX), INT(bias, 0, 1, 0, 1, NULL)},
        .bwd_reads_inputs = 1, .fwd_kernels = 1, .fwd_gemms = 1, .bwd_gemms = 2,
        .shape = s_linear_shape, .params = s_linear_params, .cost = s_linear_cost},
    [GPP_OP_RELU] = {.name = "relu", .role = GPP_ROLE_LAYER, .min_inputs = 1, .max_inputs = 1,
        .bwd_reads_inputs = 1, .fwd_kernels = 1, .shape = s_shape_same, .cost = s_relu_cost},
    [GPP_OP_GELU] = {.name = "gelu", .role = GPP_ROLE_LAYER, .min_inputs = 1, .max_inputs = 1,
        .n_attrs = 1, .attrs = {INT(form, 0, GPP_GELU_TANH, 0, 1, s_gelu_forms)},
        .bwd_reads_inputs = 1, .fwd_kernels = 1, .shape = s_shape_same, .cost = s_gelu_cost},
    [GPP_OP_LAYERNORM] = {.name = "layernorm", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .bwd_reads_inputs = 1, .fwd_kernels = 1,
        .shape = s_shape_same, .params = s_layernorm_params, .cost = s_layernorm_cost},
    /* 5 kernels: QKV GEMM, scores GEMM, softmax, context GEMM, output GEMM; backward 10: the
       8 GEMMs of the input and weight gradients, softmax backward, bias sums */
    [GPP_OP_ATTENTION] = {.name = "attention", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 2,
        .attrs = {INT(heads, 1, 0, 1, INT_MAX, NULL), INT(causal, 0, 0, 0, 1, NULL)},
        .bwd_reads_inputs = 1, .fwd_kernels = 5, .fwd_gemms = 4, .bwd_gemms = 8,
        .shape = s_attention_shape, .params = s_attention_params, .cost = s_attention_cost},
    [GPP_OP_EMBEDDING_BAG] = {.name = "embedding_bag", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 3,
        .attrs = {I64(table_rows, 1, 0, 1, DIM_MAX), I64(dim, 1, 0, 1, DIM_MAX),
                  INT(update, 0, GPP_TABLE_LAZY, 0, 1, gpp_table_updates)},
        .takes_indices = 1, .bwd_reads_inputs = 1, .fwd_kernels = 1,
        .shape = s_embedding_shape, .params = s_embedding_params, .cost = s_embedding_cost},
    [GPP_OP_CONCAT] = {.name = "concat", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = INT_MAX, .fwd_kernels = 1, .shape = s_concat_shape, .cost = s_concat_cost},
    [GPP_OP_ADD] = {.name = "add", .role = GPP_ROLE_LAYER, .min_inputs = 2, .max_inputs = 2,
        .fwd_kernels = 1, .shape = s_add_shape, .cost = s_add_cost},
    /* losses: 2 kernels, per-row loss and reduction */
    [GPP_OP_LOSS_MSE] = {.name = "loss_mse", .role = GPP_ROLE_LOSS, .min_inputs = 1,
        .max_inputs = 1, .fwd_kernels = 2, .shape = s_loss_shape, .cost = s_loss_cost},
    [GPP_OP_LOSS_CE] = {.name = "loss_ce", .role = GPP_ROLE_LOSS, .min_inputs = 1,
        .max_inputs = 1, .fwd_kernels = 2, .shape = s_loss_shape, .cost = s_loss_cost},
    /* no input activation kept: the backward adds dy into dx's block */
    [GPP_OP_SLICE] = {.name = "slice", .role = GPP_ROLE_LAYER, .min_inputs = 1, .max_inputs = 1,
        .n_attrs = 2, .attrs = {I64(start, 0, 0, 0, DIM_MAX - 1), I64(width, 1, 0, 1, DIM_MAX)},
        .fwd_kernels = 1, .shape = s_slice_shape, .cost = s_slice_cost},
    /* no input activation kept: the backward adds dy into dx, element for element */
    [GPP_OP_RESHAPE] = {.name = "reshape", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 2,
        .attrs = {I64(rows, 0, 1, 1, DIM_MAX), I64(cols, 1, 0, 1, DIM_MAX)},
        .fwd_kernels = 1, .shape = s_reshape_shape, .cost = s_reshape_cost},
    [GPP_OP_OPAQUE] = {.name = "opaque", .role = GPP_ROLE_OPAQUE, .min_inputs = 0,
        .max_inputs = INT_MAX, .n_attrs = 5,
        .attrs = {I64(params, 0, 0, 0, INT64_MAX), I64(out_bytes, 0, 0, 0, INT64_MAX),
                  I64(stash_bytes, 0, 0, 0, INT64_MAX), NUM(fwd_flops), NUM(bwd_flops)},
        .takes_indices = 1, .fwd_kernels = 1, .fwd_gemms = 1, .bwd_gemms = 2},
    [GPP_OP_EMBEDDING] = {.name = "embedding", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 4,
        .attrs = {I64(table_rows, 1, 0, 1, DIM_MAX), I64(dim, 1, 0, 1, DIM_MAX),
                  INT(mode, 0, GPP_EMBED_SEQ, 0, 2, gpp_embed_modes),
                  INT(update, 0, GPP_TABLE_LAZY, 0, 1, gpp_table_updates)},
        .takes_indices = 1, .bwd_reads_inputs = 1, .fwd_kernels = 1,
        .shape = gpp_ext_embedding_shape, .params = gpp_ext_embedding_params,
        .cost = gpp_ext_embedding_cost},
    /* no input kept: dx += dy, dP += the batch's sum of dy */
    [GPP_OP_PARAM_ADD] = {.name = "param_add", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 1, .attrs = {INT(lead, 0, 0, 0, 1, NULL)},
        .fwd_kernels = 1, .shape = s_shape_same, .params = gpp_ext_param_add_params,
        .cost = gpp_ext_param_add_cost},
    /* max keeps each column's argmax (kernel stash); mean and sum need nothing */
    [GPP_OP_REDUCE] = {.name = "reduce", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 1,
        .attrs = {INT(mode, 0, GPP_REDUCE_MEAN, 0, 2, gpp_reduce_modes)},
        .fwd_kernels = 1, .shape = gpp_ext_reduce_shape, .cost = gpp_ext_reduce_cost},
    [GPP_OP_SIGMOID] = {.name = "sigmoid", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .bwd_reads_inputs = 1, .fwd_kernels = 1, .shape = s_shape_same,
        .cost = gpp_ext_act_cost},
    [GPP_OP_TANH] = {.name = "tanh", .role = GPP_ROLE_LAYER, .min_inputs = 1, .max_inputs = 1,
        .bwd_reads_inputs = 1, .fwd_kernels = 1, .shape = s_shape_same, .cost = gpp_ext_act_cost},
    /* the mask is recomputed in the backward: nothing kept */
    [GPP_OP_DROPOUT] = {.name = "dropout", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 1, .attrs = {NUM(p)},
        .fwd_kernels = 1, .shape = gpp_ext_dropout_shape, .cost = gpp_ext_dropout_cost},
    [GPP_OP_MATMUL] = {.name = "matmul", .role = GPP_ROLE_LAYER, .min_inputs = 2,
        .max_inputs = 2, .bwd_reads_inputs = 1, .fwd_kernels = 1, .fwd_gemms = 1,
        .bwd_gemms = 2, .shape = gpp_ext_matmul_shape, .cost = gpp_ext_matmul_cost},
    [GPP_OP_TRANSPOSE] = {.name = "transpose", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .fwd_kernels = 1, .shape = gpp_ext_transpose_shape,
        .cost = gpp_ext_copy_cost},
    [GPP_OP_STACK] = {.name = "stack", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = INT_MAX, .fwd_kernels = 1, .shape = gpp_ext_stack_shape,
        .cost = gpp_ext_copy_cost},
    [GPP_OP_TRIU] = {.name = "triu", .role = GPP_ROLE_LAYER, .min_inputs = 1, .max_inputs = 1,
        .n_attrs = 1, .attrs = {INT(offset, 0, 1, 0, 1, NULL)},
        .fwd_kernels = 1, .shape = gpp_ext_triu_shape, .cost = gpp_ext_copy_cost},
    /* patches gathered into the workspace, one GEMM; backward 2 GEMMs and the scatter */
    [GPP_OP_PATCH_EMBED] = {.name = "patch_embed", .role = GPP_ROLE_LAYER, .min_inputs = 1,
        .max_inputs = 1, .n_attrs = 3,
        .attrs = {I64(height, 1, 0, 1, DIM_MAX), I64(patch, 1, 0, 1, DIM_MAX),
                  I64(out_features, 1, 0, 1, DIM_MAX)},
        .bwd_reads_inputs = 1, .fwd_kernels = 2, .fwd_gemms = 1, .bwd_gemms = 2,
        .shape = gpp_ext_patch_shape, .params = gpp_ext_patch_params,
        .cost = gpp_ext_patch_cost},
    /* Q GEMM, KV GEMM, scores, softmax, context, output: 6; backward twice that */
    [GPP_OP_CROSS_ATTENTION] = {.name = "cross_attention", .role = GPP_ROLE_LAYER,
        .min_inputs = 2, .max_inputs = 2, .n_attrs = 2,
        .attrs = {INT(heads, 1, 0, 1, INT_MAX, NULL), NUM(p)},
        .bwd_reads_inputs = 1, .fwd_kernels = 6, .fwd_gemms = 5, .bwd_gemms = 10,
        .shape = gpp_ext_cross_shape, .params = s_attention_params, .cost = gpp_ext_cross_cost},
    [GPP_OP_LOSS_BCE] = {.name = "loss_bce", .role = GPP_ROLE_LOSS, .min_inputs = 1,
        .max_inputs = 1, .fwd_kernels = 2, .shape = s_loss_shape, .cost = s_loss_cost},
};
/* clang-format on */
_Static_assert(GPP_GRAPH_PARAM_SLOTS == GPP_OP_MAX_PARAMS, "init_weights slots");
_Static_assert(sizeof gpp_optable / sizeof gpp_optable[0] == GPP_OP__COUNT,
               "gpp_optable: one row per gpp_op_type_t");

const char *gpp_op_type_name(gpp_op_type_t t)
{
    return (t >= 0 && t < GPP_OP__COUNT && gpp_optable[t].name) ? gpp_optable[t].name : "?";
}

int gpp_op_type_parse(const char *name)
{
    for (int t = 0; t < GPP_OP__COUNT; t++)
        if (strcmp(name, gpp_optable[t].name) == 0)
            return t;
    return -1;
}

const gpp_attr_t *gpp_op_attr_find(gpp_op_type_t t, const char *name)
{
    assert(t >= 0 && t < GPP_OP__COUNT);
    for (int i = 0; i < gpp_optable[t].n_attrs; i++)
        if (strcmp(gpp_optable[t].attrs[i].name, name) == 0)
            return &gpp_optable[t].attrs[i];
    return NULL;
}

double gpp_op_attr_get(const gpp_op_t *op, const gpp_attr_t *a)
{
    const char *f = (const char *)op + a->offset;
    switch (a->type) {
    case GPP_ATTR_I64:
        return (double)*(const int64_t *)(const void *)f;
    case GPP_ATTR_INT:
        return (double)*(const int *)(const void *)f;
    default:
        return *(const double *)(const void *)f;
    }
}

void gpp_op_attr_set(gpp_op_t *op, const gpp_attr_t *a, double v)
{
    char *f = (char *)op + a->offset;
    switch (a->type) {
    case GPP_ATTR_I64:
        *(int64_t *)(void *)f = (int64_t)v;
        break;
    case GPP_ATTR_INT:
        *(int *)(void *)f = (int)v;
        break;
    default:
        *(double *)(void *)f = v;
        break;
    }
}

int gpp_op_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t out[GPP_OP_MAX_PARAMS])
{
    const gpp_op_info_t *T = &gpp_optable[op->type];
    return T->params ? T->params(g, op, out) : 0;
}

int64_t gpp_op_kernel_stash_bytes(const gpp_graph_t *g, const gpp_op_t *op)
{
    const gpp_op_info_t *T = &gpp_optable[op->type];
    gpp_op_cost_t c = {0};
    if (T->cost)
        T->cost(g, op, &c);
    return c.kernel_stash_bytes;
}

int64_t gpp_op_wstash_bytes(const gpp_graph_t *g, const gpp_op_t *op)
{
    if (op->type == GPP_OP_ATTENTION)
        return op->rows * 3 * op->cols * 4;
    if (op->type == GPP_OP_CROSS_ATTENTION)
        return (op->rows * op->cols + g->ops[op->inputs[1]].rows * 2 * op->cols) * 4;
    return 0;
}

int gpp_op_fused_act(const gpp_graph_t *g, const char *in_stage, int op)
{
    const gpp_op_t *o = &g->ops[op];
    if (o->type != GPP_OP_LINEAR || o->n_outputs != 1 || (in_stage && !in_stage[op]))
        return -1;
    int j = o->outputs[0];
    const gpp_op_t *a = &g->ops[j];
    if ((a->type != GPP_OP_RELU && a->type != GPP_OP_GELU) || a->n_inputs != 1 ||
        (in_stage && !in_stage[j]))
        return -1;
    return j;
}

int gpp_op_fused_from(const gpp_graph_t *g, const char *in_stage, int op)
{
    const gpp_op_t *a = &g->ops[op];
    if ((a->type != GPP_OP_RELU && a->type != GPP_OP_GELU) || a->n_inputs != 1)
        return -1;
    int p = a->inputs[0];
    return gpp_op_fused_act(g, in_stage, p) == op ? p : -1;
}

/* A linear whose output is a fused ReLU's input: never materialised. */
static int s_fused_ghost(const gpp_graph_t *g, const char *in_stage, int op)
{
    int j = gpp_op_fused_act(g, in_stage, op);
    return j >= 0 && g->ops[j].type == GPP_OP_RELU;
}

int gpp_op_output_kept(const gpp_graph_t *g, const gpp_op_t *op)
{
    if (s_fused_ghost(g, NULL, op->id))
        return 0;
    if (op->type == GPP_OP_RELU && gpp_op_fused_from(g, NULL, op->id) >= 0)
        return 1;
    for (int k = 0; k < op->n_outputs; k++)
        if (gpp_optable[g->ops[op->outputs[k]].type].bwd_reads_inputs)
            return 1;
    return 0;
}

int64_t gpp_op_stash_bytes(const gpp_graph_t *g, const gpp_op_t *op)
{
    const gpp_op_info_t *T = &gpp_optable[op->type];
    if (T->role == GPP_ROLE_OPAQUE)
        return op->stash_bytes; /* given by the profile */
    int64_t b = gpp_op_kernel_stash_bytes(g, op);
    if (T->role != GPP_ROLE_LOSS && gpp_op_output_kept(g, op))
        b += op->out_bytes;
    if (T->role == GPP_ROLE_LOSS && gpp_op_has_grad(s_in(g, op, 0)->type))
        b += s_in(g, op, 0)->out_bytes;
    return b;
}

/* ---- stage memory (see gpp_optable.h) ---- */

int64_t gpp_op_label_bytes(const gpp_graph_t *g, const gpp_op_t *op)
{
    const gpp_op_t *x = op->n_inputs ? s_in(g, op, 0) : NULL;
    if (op->type == GPP_OP_LOSS_MSE || op->type == GPP_OP_LOSS_BCE)
        return x->rows * x->cols * 4;
    if (op->type == GPP_OP_LOSS_CE)
        return x->rows * 4;
    return 0;
}

size_t gpp_attention_workspace_bytes(int64_t n, int64_t seq, int64_t hidden)
{
    /* dctx [m, hidden] | dqkv [m, 3 hidden] | dprob [seq, seq] | ones [m], m = n seq */
    int64_t m = n * seq;
    return (size_t)(m * hidden + m * 3 * hidden + seq * seq + m) * sizeof(float);
}

gpp_work_t gpp_op_workspace(const gpp_graph_t *g, const gpp_op_t *op)
{
    (void)g;
    gpp_work_t w = {0, 0};
    if (op->type == GPP_OP_LINEAR && op->bias)
        w.per_sample = op->rows * 4;
    if (op->type == GPP_OP_ATTENTION) {
        w.fixed = (int64_t)gpp_attention_workspace_bytes(0, op->rows, op->cols);
        w.per_sample = (int64_t)gpp_attention_workspace_bytes(1, op->rows, op->cols) - w.fixed;
    }
    if (op->type == GPP_OP_CROSS_ATTENTION) {
        int64_t sk = g->ops[op->inputs[1]].rows;
        w.fixed = (int64_t)gpp_cross_attention_workspace_bytes(0, op->rows, sk, op->cols);
        w.per_sample =
            (int64_t)gpp_cross_attention_workspace_bytes(1, op->rows, sk, op->cols) - w.fixed;
    }
    if (op->type == GPP_OP_PATCH_EMBED)
        w.per_sample = gpp_patch_embed_workspace_bytes(g, op, 1);
    if (op->type == GPP_OP_EMBEDDING && op->mode == GPP_EMBED_MEAN)
        w.per_sample = op->cols * 4; /* the bag's gradient divided by its size */
    return w;
}

int64_t gpp_op_workspace_bytes(const gpp_graph_t *g, const gpp_op_t *op, int64_t n)
{
    gpp_work_t w = gpp_op_workspace(g, op);
    return w.fixed + n * w.per_sample;
}

int64_t gpp_op_sparse_cap_rows(const gpp_graph_t *g, const gpp_op_t *op, int64_t batch)
{
    if (!op->sparse_params || (op->type != GPP_OP_EMBEDDING_BAG && op->type != GPP_OP_EMBEDDING))
        return 0;
    int64_t touched = batch * s_in(g, op, 0)->cols;
    return touched < op->table_rows ? touched : op->table_rows;
}

int64_t gpp_patch_embed_workspace_bytes(const gpp_graph_t *g, const gpp_op_t *op, int64_t n)
{
    /* patches [m, C p p] | their gradient | the bias sum's ones [m], m = n P */
    int64_t c = g->ops[op->inputs[0]].rows;
    return n * op->rows * (2 * c * op->patch * op->patch + 1) * 4;
}

int gpp_op_param_torch(const gpp_graph_t *g, const gpp_op_t *op, int k, char *name, size_t cap,
                       int64_t dims[4])
{
    gpp_param_t p[GPP_OP_MAX_PARAMS];
    int n = gpp_op_params(g, op, p);
    assert(k >= 0 && k < n);
    (void)n;
    const char *t = p[k].torch ? p[k].torch : p[k].name;
    snprintf(name, cap, "%s%s%s", op->name, *t ? "." : "", t);
    if (!p[k].tdims) {
        dims[0] = p[k].rows;
        dims[1] = p[k].cols;
        return 2;
    }
    for (int d = 0; d < p[k].tdims; d++)
        dims[d] = p[k].tshape[d];
    return p[k].tdims;
}

int64_t gpp_op_param_copy_bytes(const gpp_graph_t *g, const gpp_op_t *op, gpp_alloc_rule_t rule)
{
    if (op->type != GPP_OP_LINEAR && op->type != GPP_OP_ATTENTION)
        return 0;
    gpp_param_t spec[GPP_OP_MAX_PARAMS];
    int n = gpp_op_params(g, op, spec);
    int64_t b = 0;
    for (int k = 0; k < n; k++)
        b += gpp_alloc_bytes(rule, spec[k].rows * spec[k].cols * 2);
    return b;
}

int64_t gpp_op_state_bytes(const gpp_graph_t *g, const gpp_op_t *op, int optim_bufs, int64_t batch)
{
    assert(optim_bufs >= 0);
    if (!op->sparse_params)
        return op->params * 4 * (2 + optim_bufs);
    /* an embedding table: value + optimizer state, gradient row-sparse */
    int64_t cap = gpp_op_sparse_cap_rows(g, op, batch);
    /* the slot map: a word per row and a counter (kernels/gpp_sparse.h) */
    return op->params * 4 * (1 + optim_bufs) + (op->table_rows + 1) * 4 + cap * (1 + op->dim) * 4;
}

int gpp_op_has_grad(gpp_op_type_t t)
{
    gpp_op_role_t r = gpp_optable[t].role;
    return r == GPP_ROLE_LAYER || r == GPP_ROLE_OPAQUE;
}

/* Attribute ranges, for graphs from any source (zoo, file, code). */
static int s_check_attrs(const gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_info_t *T = &gpp_optable[op->type];
    for (int i = 0; i < T->n_attrs; i++) {
        const gpp_attr_t *a = &T->attrs[i];
        double v = gpp_op_attr_get(op, a);
        if (a->type == GPP_ATTR_NUM) {
            if (!(v >= (double)a->min) || !isfinite(v))
                return s_err(err, op, "%s must be a finite number >= %lld (got %g)", a->name,
                             (long long)a->min, v);
            continue;
        }
        if (v >= (double)a->min && v <= (double)a->max)
            continue;
        if (a->max == INT_MAX || a->max == DIM_MAX || a->max == INT64_MAX)
            return s_err(err, op, "%s must be >= %lld (got %.0f)", a->name, (long long)a->min, v);
        return s_err(err, op, "%s must be in [%lld, %lld] (got %.0f)", a->name, (long long)a->min,
                     (long long)a->max, v);
    }
    return 0;
}

int gpp_op_derive(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    assert(op->type >= 0 && op->type < GPP_OP__COUNT);
    const gpp_op_info_t *T = &gpp_optable[op->type];
    if (op->n_inputs < T->min_inputs || op->n_inputs > T->max_inputs) {
        if (T->min_inputs == T->max_inputs)
            return s_err(err, op, "expected %d input(s), got %d", T->min_inputs, op->n_inputs);
        return s_err(err, op, "expected at least %d input(s), got %d", T->min_inputs, op->n_inputs);
    }
    for (int k = 0; k < op->n_inputs && !T->takes_indices; k++) {
        const gpp_op_t *x = s_in(g, op, k);
        if (x->type == GPP_OP_INPUT && x->input_kind == GPP_INPUT_INDICES)
            return s_err(err, op,
                         "input '%s' holds embedding indices; only embedding and embedding_bag "
                         "can consume it",
                         x->name);
    }
    if (s_check_attrs(op, err) || (T->shape && T->shape(g, op, err)))
        return -1;
    if (T->role != GPP_ROLE_OPAQUE) { /* an opaque op's figures come with it */
        gpp_param_t p[GPP_OP_MAX_PARAMS];
        int np = gpp_op_params(g, op, p);
        op->params = 0;
        op->sparse_params = 0;
        for (int i = 0; i < np; i++) {
            op->params += p[i].rows * p[i].cols;
            op->sparse_params |= p[i].sparse;
        }
        gpp_op_cost_t c = {0};
        T->cost(g, op, &c);
        op->fwd_flops = c.fwd_flops;
        op->bwd_flops = c.bwd_flops;
        op->bwd_w_flops = c.bwd_w_flops;
        op->io_bytes = c.io_bytes;
        op->out_bytes = op->rows * op->cols * 4; /* fp32, or int32 indices */
        /* stash_bytes needs the consumers: gpp_graph_finalize sets it */
    } else { /* costed as a matrix product (FLOPs 1 and 2): dX and dW halve the backward */
        op->bwd_w_flops = op->params > 0 ? op->bwd_flops / 2 : 0;
    }
    /* read W fwd, read W + write dW bwd; an embedding's touched rows count in io_bytes */
    op->weight_io_bytes = op->sparse_params ? 0 : 3 * op->params * 4;
    return 0;
}
