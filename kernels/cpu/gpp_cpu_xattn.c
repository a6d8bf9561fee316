/* gpp_cpu_xattn: the CPU kernels of cross_attention (queries from one
 * input, keys = values from another, nn.MultiheadAttention's packed
 * in-projection) and patch_embed (nn.Conv2d with kernel = stride and no
 * padding, as a linear over the gathered patches).
 *
 * cross_attention stash (floats): q [n sq, E] | kv [n sk, 2E] |
 * probabilities [n, heads, sq, sk] | ctx [n sq, E]. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/gpp_cpu.h"
#include "model/gpp_optable.h"

/* Row-wise softmax in place (the sums in double, in order). */
static void s_softmax(int64_t rows, int64_t cols, float *a)
{
    for (int64_t r = 0; r < rows; r++) {
        float *ar = a + r * cols, mx = ar[0];
        for (int64_t j = 1; j < cols; j++)
            mx = ar[j] > mx ? ar[j] : mx;
        double sum = 0.0;
        for (int64_t j = 0; j < cols; j++) {
            ar[j] = gpp_cpu_expf(ar[j] - mx);
            sum += ar[j];
        }
        float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < cols; j++)
            ar[j] *= inv;
    }
}

static void s_softmax_bwd(int64_t rows, int64_t cols, const float *p, float *dp)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *pr = p + r * cols;
        float *dr = dp + r * cols;
        double d = 0.0;
        for (int64_t j = 0; j < cols; j++)
            d += (double)dr[j] * pr[j];
        for (int64_t j = 0; j < cols; j++)
            dr[j] = pr[j] * (dr[j] - (float)d);
    }
}

/* Dropout on head h's probabilities [sq, sk] of sample i (p > 0, training):
 * to[e] = from[e] / (1 - p) where kept, else 0; `scale` multiplies too. */
static void s_drop(const gpp_op_args_t *a, int64_t i, int64_t h, int64_t sq, int64_t sk,
                   const float *from, float *to)
{
    double p = a->op->p;
    float sc = (float)(1.0 / (1.0 - p));
    for (int64_t e = 0; e < sq * sk; e++)
        to[e] = gpp_dropout_keep(a->seed, a->sample_lo + i, a->op->id, h * sq * sk + e, p)
                    ? from[e] * sc
                    : 0.0f;
}

int gpp_cpu_cross_attention_fwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    const gpp_tensor_t *xq = a->x[0], *xk = a->x[1];
    const gpp_tensor_t *w = &a->w[0], *b = &a->w[1], *wo = &a->w[2], *bo = &a->w[3];
    int heads = a->op->heads;
    int64_t n = xq->n, sq = xq->rows, sk = xk->rows, E = xq->cols, dh = E / heads;
    float *q = a->stash, *kv = q + n * sq * E, *prob = kv + n * sk * 2 * E;
    float *ctx = prob + n * heads * sq * sk;
    float scale = 1.0f / sqrtf((float)dh);
    int drop = a->train && a->op->p > 0;
    float *pd = drop ? gpp_stream_workspace(s, (size_t)(sq * sk) * sizeof(float), err) : NULL;
    if (drop && !pd)
        return gpp_err_prefix(err, "cross-attention workspace");
    gpp_cpu_linear_fwd_raw(n * sq, E, E, (const float *)xq->data, w->data, b->data, q);
    gpp_cpu_linear_fwd_raw(n * sk, E, 2 * E, (const float *)xk->data,
                           (const float *)w->data + E * E, (const float *)b->data + E, kv);
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < heads; h++) {
            const float *qh = q + i * sq * E + h * dh;
            const float *kh = kv + i * sk * 2 * E + h * dh, *vh = kh + E;
            float *ph = prob + (i * heads + h) * sq * sk;
            gpp_cpu_sgemm(0, 1, sq, sk, dh, scale, qh, E, kh, 2 * E, 0.0f, ph, sk);
            s_softmax(sq, sk, ph);
            if (drop)
                s_drop(a, i, h, sq, sk, ph, pd);
            gpp_cpu_sgemm(0, 0, sq, dh, sk, 1.0f, drop ? pd : ph, sk, vh, 2 * E, 0.0f,
                          ctx + i * sq * E + h * dh, E);
        }
    gpp_cpu_linear_fwd_raw(n * sq, E, E, ctx, wo->data, bo->data, a->y->data);
    return 0;
}

/* B: dctx = dy W_o (workspace), per (sample, head) the gradients of q and
 * kv into dq [mq, E] and dkv [mk, 2E] (overwritten), then dxq, dxk += from
 * them. dprob: one [sq, sk] block of workspace. */
static void s_cross_bwd_in(const gpp_op_args_t *a, float *dctx, float *dprob, float *dq, float *dkv)
{
    const gpp_tensor_t *xq = a->x[0], *xk = a->x[1];
    const gpp_tensor_t *w = &a->w[0], *wo = &a->w[2];
    int heads = a->op->heads;
    int64_t n = xq->n, sq = xq->rows, sk = xk->rows, E = xq->cols, dh = E / heads;
    int64_t mq = n * sq, mk = n * sk;
    const float *q = a->stash, *kv = q + mq * E, *prob = kv + mk * 2 * E;
    float scale = 1.0f / sqrtf((float)dh);
    float *dxq = a->dx && a->dx[0] ? a->dx[0]->data : NULL;
    float *dxk = a->dx && a->dx[1] ? a->dx[1]->data : NULL;
    gpp_cpu_sgemm(0, 0, mq, E, E, 1.0f, a->dy->data, E, wo->data, E, 0.0f, dctx, E);
    for (int64_t i = 0; i < n; i++)
        for (int64_t h = 0; h < heads; h++) {
            const float *qh = q + i * sq * E + h * dh;
            const float *kh = kv + i * sk * 2 * E + h * dh, *vh = kh + E;
            float *dqh = dq + i * sq * E + h * dh;
            float *dkh = dkv + i * sk * 2 * E + h * dh, *dvh = dkh + E;
            const float *ph = prob + (i * heads + h) * sq * sk;
            const float *dc = dctx + i * sq * E + h * dh;
            int drop = a->train && a->op->p > 0;
            if (drop) /* the dropped probabilities the forward multiplied V by */
                s_drop(a, i, h, sq, sk, ph, dprob);
            gpp_cpu_sgemm(1, 0, sk, dh, sq, 1.0f, drop ? dprob : ph, sk, dc, E, 0.0f, dvh, 2 * E);
            gpp_cpu_sgemm(0, 1, sq, sk, dh, 1.0f, dc, E, vh, 2 * E, 0.0f, dprob, sk);
            if (drop) { /* through the mask: the kept entries scaled, the others 0 */
                double p = a->op->p;
                float sc = (float)(1.0 / (1.0 - p));
                for (int64_t e = 0; e < sq * sk; e++)
                    dprob[e] =
                        gpp_dropout_keep(a->seed, a->sample_lo + i, a->op->id, h * sq * sk + e, p)
                            ? dprob[e] * sc
                            : 0.0f;
            }
            s_softmax_bwd(sq, sk, ph, dprob);
            gpp_cpu_sgemm(0, 0, sq, dh, sk, scale, dprob, sk, kh, 2 * E, 0.0f, dqh, E);
            gpp_cpu_sgemm(1, 0, sk, dh, sq, scale, dprob, sk, qh, E, 0.0f, dkh, 2 * E);
        }
    gpp_cpu_linear_bwd_raw(mq, E, E, NULL, w->data, dq, dxq, NULL, NULL, NULL);
    gpp_cpu_linear_bwd_raw(mk, E, 2 * E, NULL, (const float *)w->data + E * E, dkv, dxk, NULL, NULL,
                           NULL);
}

/* W: the output projection's gradients from the stashed ctx and dy, the
 * in-projection's from the inputs and dq, dkv. ones: max(mq, mk) floats. */
static void s_cross_bwd_w(const gpp_op_args_t *a, const float *dq, const float *dkv,
                          const float *ones)
{
    const gpp_tensor_t *xq = a->x[0], *xk = a->x[1];
    int heads = a->op->heads;
    int64_t n = xq->n, sq = xq->rows, sk = xk->rows, E = xq->cols;
    int64_t mq = n * sq, mk = n * sk;
    const float *ctx = (const float *)a->stash + mq * E + mk * 2 * E + n * heads * sq * sk;
    float *dw = a->dw ? a->dw[0].data : NULL, *db = a->dw ? a->dw[1].data : NULL;
    float *dwo = a->dw ? a->dw[2].data : NULL, *dbo = a->dw ? a->dw[3].data : NULL;
    gpp_cpu_linear_bwd_raw(mq, E, E, ctx, NULL, a->dy->data, NULL, dwo, dbo, ones);
    gpp_cpu_linear_bwd_raw(mq, E, E, (const float *)xq->data, NULL, dq, NULL, dw, db, ones);
    gpp_cpu_linear_bwd_raw(mk, E, 2 * E, (const float *)xk->data, NULL, dkv, NULL,
                           dw ? dw + E * E : NULL, db ? db + E : NULL, ones);
}

/* The whole backward is B then W with dq, dkv in the workspace; a part
 * (a->part) runs one of them with dq, dkv in the op's W stash (a->wstash:
 * dq [mq, E] | dkv [mk, 2E], gpp_op_wstash_bytes). */
int gpp_cpu_cross_attention_bwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    const gpp_tensor_t *xq = a->x[0], *xk = a->x[1];
    int64_t n = xq->n, sq = xq->rows, sk = xk->rows, E = xq->cols;
    int64_t mq = n * sq, mk = n * sk, mo = mq > mk ? mq : mk;
    int64_t head = 2 * mq * E + 2 * mk * E + sq * sk;
    assert((size_t)(head + mo) * sizeof(float) ==
           gpp_cross_attention_workspace_bytes(n, sq, sk, E));
    float *dctx = gpp_cpu_workspace_ones(s, head, mo, err);
    if (!dctx)
        return gpp_err_prefix(err, "cross-attention backward workspace");
    const float *ones = dctx + head;
    float *dq = dctx + mq * E, *dkv = dq + mq * E, *dprob = dkv + mk * 2 * E;
    if (a->part != GPP_BWD_ALL) { /* the W stash holds dq, dkv between the passes */
        assert(a->wstash || mq + mk == 0);
        dq = a->wstash;
        dkv = dq + mq * E;
    }
    if (a->part != GPP_BWD_W)
        s_cross_bwd_in(a, dctx, dprob, dq, dkv);
    if (a->part != GPP_BWD_IN)
        s_cross_bwd_w(a, dq, dkv, ones);
    return 0;
}

/* ---- patch_embed ---- */

/* x [C, H, W] of one sample <-> patches [P, C p p] (dir 0: gather, 1: add
 * back), P row-major over (H / p, W / p), features (c, ky, kx). */
static void s_patches(const gpp_op_t *op, int64_t c, int64_t wdt, float *img, float *pat, int dir)
{
    int64_t p = op->patch, h = op->height, gw = wdt / p, in = c * p * p;
    for (int64_t py = 0; py < h / p; py++)
        for (int64_t px = 0; px < gw; px++) {
            float *row = pat + (py * gw + px) * in;
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t ky = 0; ky < p; ky++) {
                    float *src = img + ch * h * wdt + (py * p + ky) * wdt + px * p;
                    float *dst = row + ch * p * p + ky * p;
                    for (int64_t kx = 0; kx < p; kx++) {
                        if (dir)
                            src[kx] += dst[kx];
                        else
                            dst[kx] = src[kx];
                    }
                }
        }
}

int gpp_cpu_patch_embed_fwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    const gpp_tensor_t *x = a->x[0];
    const gpp_op_t *op = a->op;
    int64_t c = x->rows, wdt = x->cols / op->height, P = op->rows, in = c * op->patch * op->patch;
    float *pat = gpp_stream_workspace(s, (size_t)(x->n * P * in) * sizeof(float), err);
    if (!pat)
        return gpp_err_prefix(err, "patch_embed workspace");
    for (int64_t i = 0; i < x->n; i++)
        s_patches(op, c, wdt, (float *)x->data + i * x->rows * x->cols, pat + i * P * in, 0);
    gpp_cpu_linear_fwd_raw(x->n * P, in, op->out_features, pat, a->w[0].data, a->w[1].data,
                           a->y->data);
    return 0;
}

int gpp_cpu_patch_embed_bwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    const gpp_tensor_t *x = a->x[0];
    const gpp_op_t *op = a->op;
    int64_t c = x->rows, wdt = x->cols / op->height, P = op->rows, in = c * op->patch * op->patch;
    int64_t m = x->n * P;
    float *pat = gpp_cpu_workspace_ones(s, 2 * m * in, m, err);
    if (!pat)
        return gpp_err_prefix(err, "patch_embed backward workspace");
    float *dpat = pat + m * in, *dx = a->dx && a->dx[0] ? a->dx[0]->data : NULL;
    for (int64_t i = 0; i < x->n; i++)
        s_patches(op, c, wdt, (float *)x->data + i * x->rows * x->cols, pat + i * P * in, 0);
    if (dx)
        memset(dpat, 0, (size_t)(m * in) * sizeof(float));
    gpp_cpu_linear_bwd_raw(m, in, op->out_features, pat, a->w[0].data, a->dy->data,
                           dx ? dpat : NULL, a->dw ? a->dw[0].data : NULL,
                           a->dw ? a->dw[1].data : NULL, dpat + m * in);
    for (int64_t i = 0; dx && i < x->n; i++)
        s_patches(op, c, wdt, dx + i * x->rows * x->cols, dpat + i * P * in, 1);
    return 0;
}
