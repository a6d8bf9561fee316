/* gpp_cpu_ext: the CPU kernels of the op types that come from PyTorch
 * modules (gpp_ops.h "PyTorch modules"): embedding (one row per id, a bag's
 * sum or mean; lazy or dense table gradient), param_add, reduce over the
 * rows, sigmoid, tanh, dropout, matmul of two activations, transpose,
 * stack, triu and the binary cross-entropy loss; cross_attention and
 * patch_embed are in gpp_cpu_xattn.c. Every loop runs in a fixed order, so
 * results are reproducible. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/gpp_cpu.h"

#define F(t) ((float *)(t)->data)
#define CF(t) ((const float *)(t)->data)

/* a->dx[k] when that gradient is wanted, else NULL */
static float *s_dx(const gpp_op_args_t *a, int k)
{
    return a->dx && a->dx[k] && a->dx[k]->data ? a->dx[k]->data : NULL;
}

/* ---- embedding ---- */

static int s_ids_check(const gpp_op_args_t *a, const gpp_tensor_t *idx, int64_t rows,
                       gpp_err_t *err)
{
    const int32_t *ix = idx->data;
    int64_t per = idx->rows * idx->cols;
    for (int64_t i = 0; i < idx->n * per; i++)
        if (ix[i] < 0 || ix[i] >= rows)
            return gpp_err_set(err,
                               "op '%s' (%s): sample %lld of the micro-batch (data row %lld), "
                               "position %lld: id %d outside the table's [0, %lld) rows; fix "
                               "the data or give the table more rows",
                               a->op->name, gpp_op_type_name(a->op->type), (long long)(i / per),
                               (long long)(a->sample_lo + i / per), (long long)(i % per), ix[i],
                               (long long)rows);
    return 0;
}

static int s_embedding_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s;
    const gpp_tensor_t *idx = a->x[0], *tab = &a->w[0];
    int64_t n = idx->n, ids = idx->cols, dim = tab->cols;
    if (s_ids_check(a, idx, tab->rows, err) < 0)
        return -1;
    const int32_t *ix = idx->data;
    float *y = F(a->y);
    if (a->op->mode == GPP_EMBED_SEQ) {
        for (int64_t i = 0; i < n * ids; i++)
            memcpy(y + i * dim, CF(tab) + (int64_t)ix[i] * dim, (size_t)dim * sizeof(float));
        return 0;
    }
    float sc = a->op->mode == GPP_EMBED_MEAN ? 1.0f / (float)ids : 1.0f;
    for (int64_t i = 0; i < n; i++) {
        float *yr = y + i * dim;
        memset(yr, 0, (size_t)dim * sizeof(float));
        for (int64_t k = 0; k < ids; k++)
            gpp_cpu_acc(dim, CF(tab) + (int64_t)ix[i * ids + k] * dim, yr);
        if (sc != 1.0f)
            for (int64_t d = 0; d < dim; d++)
                yr[d] *= sc;
    }
    return 0;
}

/* The table gradient: row-sparse (lazy) or dense (dw[0]); dy row `r` goes
 * to every id of bag b (seq: one id per row), times `sc`. */
static int s_embedding_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    const gpp_tensor_t *idx = a->x[0];
    const gpp_op_t *op = a->op;
    int seq = op->type == GPP_OP_EMBEDDING && op->mode == GPP_EMBED_SEQ;
    int64_t dim = a->dy->cols, bags = seq ? idx->n * idx->cols : idx->n * idx->rows;
    int64_t bag = seq ? 1 : idx->cols;
    float sc =
        op->type == GPP_OP_EMBEDDING && op->mode == GPP_EMBED_MEAN ? 1.0f / (float)bag : 1.0f;
    const int32_t *ix = idx->data;
    const float *dy = CF(a->dy);
    if (op->update == GPP_TABLE_DENSE) {
        float *dw = a->dw ? F(&a->dw[0]) : NULL;
        if (!dw)
            return 0;
        for (int64_t b = 0; b < bags; b++)
            for (int64_t k = 0; k < bag; k++) {
                float *row = dw + (int64_t)ix[b * bag + k] * dim;
                const float *g = dy + b * dim;
                for (int64_t d = 0; d < dim; d++)
                    row[d] += sc * g[d];
            }
        return 0;
    }
    if (!a->dsparse)
        return 0;
    float *tmp = NULL;
    if (sc != 1.0f && !(tmp = gpp_stream_workspace(s, (size_t)dim * sizeof(float), err)))
        return gpp_err_prefix(err, "embedding backward workspace");
    for (int64_t b = 0; b < bags; b++) {
        const float *g = dy + b * dim;
        if (tmp) {
            for (int64_t d = 0; d < dim; d++)
                tmp[d] = sc * g[d];
            g = tmp;
        }
        if (gpp_cpu_sparse_add(s, a->dsparse, bag, ix + b * bag, g, 0, err) < 0)
            return gpp_err_prefix(err, "op '%s' backward, bag %lld", op->name, (long long)b);
    }
    return 0;
}

/* ---- param_add: y = x + P ---- */

static int s_param_add_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t per = a->y->rows * a->y->cols;
    const float *x = CF(a->x[0]), *p = CF(&a->w[0]);
    float *y = F(a->y);
    for (int64_t i = 0; i < a->y->n; i++)
        for (int64_t e = 0; e < per; e++)
            y[i * per + e] = x[i * per + e] + p[e];
    return 0;
}

static int s_param_add_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t per = a->dy->rows * a->dy->cols;
    float *dx = s_dx(a, 0), *dp = a->dw ? F(&a->dw[0]) : NULL;
    if (dx)
        gpp_cpu_acc(a->dy->n * per, CF(a->dy), dx);
    for (int64_t i = 0; dp && i < a->dy->n; i++)
        gpp_cpu_acc(per, CF(a->dy) + i * per, dp);
    return 0;
}

/* ---- reduce over the rows ---- */

static int s_reduce_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    const gpp_tensor_t *x = a->x[0];
    int64_t n = x->n, r = x->rows, c = x->cols;
    int32_t *arg = a->stash;
    float *y = F(a->y);
    for (int64_t i = 0; i < n; i++) {
        const float *xi = CF(x) + i * r * c;
        float *yi = y + i * c;
        if (a->op->mode == GPP_REDUCE_MAX) {
            for (int64_t j = 0; j < c; j++) {
                int32_t best = 0;
                for (int64_t k = 1; k < r; k++)
                    if (xi[k * c + j] > xi[best * c + j])
                        best = (int32_t)k;
                yi[j] = xi[best * c + j];
                arg[i * c + j] = best;
            }
            continue;
        }
        memcpy(yi, xi, (size_t)c * sizeof(float));
        for (int64_t k = 1; k < r; k++)
            gpp_cpu_acc(c, xi + k * c, yi);
        if (a->op->mode == GPP_REDUCE_MEAN)
            for (int64_t j = 0; j < c; j++)
                yi[j] /= (float)r;
    }
    return 0;
}

static int s_reduce_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    float *dx = s_dx(a, 0);
    if (!dx)
        return 0;
    int64_t n = a->dy->n, r = a->x[0]->rows, c = a->dy->cols;
    const int32_t *arg = a->stash;
    for (int64_t i = 0; i < n; i++) {
        const float *g = CF(a->dy) + i * c;
        float *di = dx + i * r * c;
        if (a->op->mode == GPP_REDUCE_MAX) {
            for (int64_t j = 0; j < c; j++)
                di[(int64_t)arg[i * c + j] * c + j] += g[j];
            continue;
        }
        float sc = a->op->mode == GPP_REDUCE_MEAN ? 1.0f / (float)r : 1.0f;
        for (int64_t k = 0; k < r; k++)
            for (int64_t j = 0; j < c; j++)
                di[k * c + j] += sc * g[j];
    }
    return 0;
}

/* ---- sigmoid, tanh ---- */

static float s_sigmoid(float x)
{
    return x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
}

static int s_act_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t m = gpp_tensor_numel(a->y);
    const float *x = CF(a->x[0]);
    float *y = F(a->y);
    for (int64_t e = 0; e < m; e++)
        y[e] = a->op->type == GPP_OP_SIGMOID ? s_sigmoid(x[e]) : tanhf(x[e]);
    return 0;
}

static int s_act_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    float *dx = s_dx(a, 0);
    int64_t m = gpp_tensor_numel(a->dy);
    const float *x = CF(a->x[0]), *dy = CF(a->dy);
    for (int64_t e = 0; dx && e < m; e++) {
        if (a->op->type == GPP_OP_SIGMOID) {
            float y = s_sigmoid(x[e]);
            dx[e] += dy[e] * y * (1.0f - y);
        } else {
            float y = tanhf(x[e]);
            dx[e] += dy[e] * (1.0f - y * y);
        }
    }
    return 0;
}

/* ---- dropout ---- */

static int s_dropout(const gpp_op_args_t *a, const float *in, float *out, int acc)
{
    const gpp_tensor_t *t = acc ? a->dy : a->y;
    int64_t per = t->rows * t->cols;
    double p = a->op->p;
    float sc = (float)(1.0 / (1.0 - p));
    for (int64_t i = 0; i < t->n; i++)
        for (int64_t e = 0; e < per; e++) {
            int64_t at = i * per + e;
            float v = !a->train || p == 0                                            ? in[at]
                      : gpp_dropout_keep(a->seed, a->sample_lo + i, a->op->id, e, p) ? in[at] * sc
                                                                                     : 0.0f;
            out[at] = acc ? out[at] + v : v;
        }
    return 0;
}

static int s_dropout_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    return s_dropout(a, CF(a->x[0]), F(a->y), 0);
}

static int s_dropout_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    float *dx = s_dx(a, 0);
    return dx ? s_dropout(a, CF(a->dy), dx, 1) : 0;
}

/* ---- matmul of two activations: y_i = a_i b_i ---- */

static int s_matmul_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    const gpp_tensor_t *A = a->x[0], *B = a->x[1];
    int64_t r = A->rows, k = A->cols, c = B->cols;
    for (int64_t i = 0; i < A->n; i++)
        gpp_cpu_sgemm(0, 0, r, c, k, 1.0f, CF(A) + i * r * k, k, CF(B) + i * k * c, c, 0.0f,
                      F(a->y) + i * r * c, c);
    return 0;
}

static int s_matmul_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    const gpp_tensor_t *A = a->x[0], *B = a->x[1];
    int64_t r = A->rows, k = A->cols, c = B->cols;
    float *da = s_dx(a, 0), *db = s_dx(a, 1);
    for (int64_t i = 0; i < A->n; i++) {
        const float *g = CF(a->dy) + i * r * c;
        if (da) /* dA += dY B^T */
            gpp_cpu_sgemm(0, 1, r, k, c, 1.0f, g, c, CF(B) + i * k * c, c, 1.0f, da + i * r * k, k);
        if (db) /* dB += A^T dY */
            gpp_cpu_sgemm(1, 0, k, c, r, 1.0f, CF(A) + i * r * k, k, g, c, 1.0f, db + i * k * c, c);
    }
    return 0;
}

/* ---- transpose ---- */

static int s_transpose_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    const gpp_tensor_t *x = a->x[0];
    int64_t r = x->rows, c = x->cols;
    for (int64_t i = 0; i < x->n; i++)
        for (int64_t j = 0; j < r; j++)
            for (int64_t k = 0; k < c; k++)
                F(a->y)[i * r * c + k * r + j] = CF(x)[i * r * c + j * c + k];
    return 0;
}

static int s_transpose_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    float *dx = s_dx(a, 0);
    int64_t r = a->x[0]->rows, c = a->x[0]->cols;
    for (int64_t i = 0; dx && i < a->dy->n; i++)
        for (int64_t j = 0; j < r; j++)
            for (int64_t k = 0; k < c; k++)
                dx[i * r * c + j * c + k] += CF(a->dy)[i * r * c + k * r + j];
    return 0;
}

/* ---- stack: the inputs' rows one after another ---- */

static int s_stack_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t per = a->y->rows * a->y->cols;
    for (int64_t i = 0; i < a->y->n; i++) {
        float *y = F(a->y) + i * per;
        for (int k = 0; k < a->op->n_inputs; k++) {
            int64_t m = a->x[k]->rows * a->x[k]->cols;
            memcpy(y, CF(a->x[k]) + i * m, (size_t)m * sizeof(float));
            y += m;
        }
    }
    return 0;
}

static int s_stack_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t per = a->dy->rows * a->dy->cols;
    for (int64_t i = 0; i < a->dy->n; i++) {
        const float *g = CF(a->dy) + i * per;
        for (int k = 0; k < a->op->n_inputs; k++) {
            int64_t m = a->x[k]->rows * a->x[k]->cols;
            float *dx = s_dx(a, k);
            if (dx)
                gpp_cpu_acc(m, g, dx + i * m);
            g += m;
        }
    }
    return 0;
}

/* ---- triu: the upper triangle, row by row ---- */

static int s_triu(const gpp_op_args_t *a, const float *x, float *y, int bwd)
{
    int64_t k = a->x[0]->rows, cols = a->op->cols;
    int off = a->op->offset;
    for (int64_t i = 0; i < a->x[0]->n; i++) {
        int64_t at = 0;
        for (int64_t r = 0; r < k; r++)
            for (int64_t c = r + off; c < k; c++, at++) {
                if (bwd)
                    y[i * k * k + r * k + c] += x[i * cols + at];
                else
                    y[i * cols + at] = x[i * k * k + r * k + c];
            }
    }
    return 0;
}

static int s_triu_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    return s_triu(a, CF(a->x[0]), F(a->y), 0);
}

static int s_triu_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s, (void)err;
    float *dx = s_dx(a, 0);
    return dx ? s_triu(a, CF(a->dy), dx, 1) : 0;
}

/* ---- binary cross-entropy on logits ---- */

static int s_loss_bce_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    (void)s;
    const gpp_tensor_t *x = a->x[0], *t = a->target;
    int64_t m = gpp_tensor_numel(x);
    const float *xp = CF(x), *tp = CF(t);
    float *dx = s_dx(a, 0);
    for (int64_t e = 0; e < m; e++)
        if (!(tp[e] >= 0.0f && tp[e] <= 1.0f))
            return gpp_err_set(err,
                               "op '%s' (loss_bce): sample %lld of the micro-batch (data row "
                               "%lld): label %g outside [0, 1]; binary cross-entropy takes "
                               "labels 0 or 1 (probabilities)",
                               a->op->name, (long long)(e / (m / x->n)),
                               (long long)(a->sample_lo + e / (m / x->n)), (double)tp[e]);
    double sum = 0.0;
    float g = a->grad_scale / (float)m;
    for (int64_t e = 0; e < m; e++) {
        float v = xp[e];
        /* max(x, 0) - x t + log(1 + exp(-|x|)): torch's stable form */
        sum += (double)(v > 0 ? v : 0) - (double)v * tp[e] + log1p(exp(-fabs((double)v)));
        if (dx)
            dx[e] += g * (s_sigmoid(v) - tp[e]);
    }
    *a->loss = (float)(sum / (double)m);
    return 0;
}

const gpp_op_kernel_t gpp_cpu_ext_kernels[GPP_OP__COUNT] = {
    [GPP_OP_EMBEDDING_BAG] = {NULL, s_embedding_b}, /* update "dense" */
    [GPP_OP_EMBEDDING] = {s_embedding_f, s_embedding_b},
    [GPP_OP_PARAM_ADD] = {s_param_add_f, s_param_add_b},
    [GPP_OP_REDUCE] = {s_reduce_f, s_reduce_b},
    [GPP_OP_SIGMOID] = {s_act_f, s_act_b},
    [GPP_OP_TANH] = {s_act_f, s_act_b},
    [GPP_OP_DROPOUT] = {s_dropout_f, s_dropout_b},
    [GPP_OP_MATMUL] = {s_matmul_f, s_matmul_b},
    [GPP_OP_TRANSPOSE] = {s_transpose_f, s_transpose_b},
    [GPP_OP_STACK] = {s_stack_f, s_stack_b},
    [GPP_OP_TRIU] = {s_triu_f, s_triu_b},
    [GPP_OP_PATCH_EMBED] = {gpp_cpu_patch_embed_fwd, gpp_cpu_patch_embed_bwd},
    [GPP_OP_CROSS_ATTENTION] = {gpp_cpu_cross_attention_fwd, gpp_cpu_cross_attention_bwd},
    [GPP_OP_LOSS_BCE] = {s_loss_bce_f, NULL},
};
