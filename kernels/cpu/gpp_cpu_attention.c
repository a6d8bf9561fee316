/* gpp_cpu_attention: multi-head self-attention, optionally causal.
 *
 * Every matrix product is an sgemm on strided views, with no copies: head h
 * of Q is the [seq, dh] block at column h*dh of the [seq, 3 hidden] qkv
 * matrix (row stride 3 hidden), K and V are at +hidden and +2 hidden, and
 * each head's context is written straight into its column block of ctx
 * (row stride hidden). One loop over (sample, head) issues the per-head
 * products.
 *
 * Stash layout (floats): qkv [n*seq, 3 hidden] | probabilities
 * [n, heads, seq, seq] | ctx [n*seq, hidden]. */
#include <assert.h>
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"
#include "model/gpp_optable.h"

#define L GPP_CPU_LANES

/* Row-wise softmax of a [rows, cols] block in place. The row sum runs in
 * double over GPP_CPU_LANES partial sums in a fixed order and exp is
 * gpp_cpu_expf, so that every loop vectorises. causal: row r is the
 * softmax of its first r + 1 entries and zero after them (the scores there
 * taken as -inf). */
GPP_CPU_CLONES
static void s_softmax_rows(int64_t rows, int64_t stride, float *a, int causal)
{
    for (int64_t r = 0; r < rows; r++) {
        float *ar = a + r * stride;
        int64_t cols = causal && r + 1 < stride ? r + 1 : stride, body = cols - cols % L;
        for (int64_t j = cols; j < stride; j++)
            ar[j] = 0.0f;
        float ml[L], mx = ar[0]; /* max: exact in any order */
        for (int k = 0; k < L; k++)
            ml[k] = ar[0];
        for (int64_t j = 0; j < body; j += L)
            for (int k = 0; k < L; k++)
                ml[k] = ar[j + k] > ml[k] ? ar[j + k] : ml[k];
        for (int64_t j = body; j < cols; j++)
            mx = ar[j] > mx ? ar[j] : mx;
        for (int k = 0; k < L; k++)
            mx = ml[k] > mx ? ml[k] : mx;
        for (int64_t j = 0; j < cols; j++)
            ar[j] = gpp_cpu_expf(ar[j] - mx);
        double acc[L] = {0};
        for (int64_t j = 0; j < body; j += L)
            for (int k = 0; k < L; k++)
                acc[k] += ar[j + k];
        for (int64_t j = body; j < cols; j++)
            acc[j - body] += ar[j];
        float inv = (float)(1.0 / gpp_cpu_lanes_total(acc));
        for (int64_t j = 0; j < cols; j++)
            ar[j] *= inv;
    }
}

/* Softmax backward in place: dp := p * (dp - sum_j dp_j p_j), per row. */
GPP_CPU_CLONES
static void s_softmax_bwd_rows(int64_t rows, int64_t cols, const float *p, float *dp)
{
    int64_t body = cols - cols % L;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict pr = p + r * cols;
        float *restrict dr = dp + r * cols;
        double acc[L] = {0};
        for (int64_t j = 0; j < body; j += L)
            for (int k = 0; k < L; k++)
                acc[k] += (double)dr[j + k] * pr[j + k];
        for (int64_t j = body; j < cols; j++)
            acc[j - body] += (double)dr[j] * pr[j];
        float d = (float)gpp_cpu_lanes_total(acc);
        for (int64_t j = 0; j < cols; j++)
            dr[j] = pr[j] * (dr[j] - d);
    }
}

int gpp_cpu_attention_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                          int heads, int causal, gpp_tensor_t *y, void *stash, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t n = x->n, seq = x->rows, hid = x->cols, dh = hid / heads, m = n * seq;
    float *qkv = stash;
    float *prob = qkv + m * 3 * hid;
    float *ctx = prob + n * heads * seq * seq;
    float scale = 1.0f / sqrtf((float)dh);

    gpp_cpu_linear_fwd_raw(m, hid, 3 * hid, x->data, p->w_qkv.data, p->b_qkv.data, qkv);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t h = 0; h < heads; h++) {
            const float *q = qkv + i * seq * 3 * hid + h * dh;
            const float *k = q + hid, *v = q + 2 * hid;
            float *ph = prob + (i * heads + h) * seq * seq;
            gpp_cpu_sgemm(0, 1, seq, seq, dh, scale, q, 3 * hid, k, 3 * hid, 0.0f, ph, seq);
            s_softmax_rows(seq, seq, ph, causal);
            gpp_cpu_sgemm(0, 0, seq, dh, seq, 1.0f, ph, seq, v, 3 * hid, 0.0f,
                          ctx + i * seq * hid + h * dh, hid);
        }
    }
    gpp_cpu_linear_fwd_raw(m, hid, hid, ctx, p->w_o.data, p->b_o.data, y->data);
    return 0;
}

/* B: dctx = dy W_o (workspace), per (sample, head) the gradient of qkv into
 * dqkv [m, 3 hid] (overwritten), then dx += dqkv W_qkv. dprob: one [seq,
 * seq] block of workspace. */
static void s_attention_bwd_in(const gpp_tensor_t *x, const gpp_attention_params_t *p, int heads,
                               const float *stash, const float *dyp, float *dctx, float *dprob,
                               float *dqkv, float *dx)
{
    int64_t n = x->n, seq = x->rows, hid = x->cols, dh = hid / heads, m = n * seq;
    const float *qkv = stash;
    const float *prob = qkv + m * 3 * hid;
    float scale = 1.0f / sqrtf((float)dh);

    gpp_cpu_sgemm(0, 0, m, hid, hid, 1.0f, dyp, hid, p->w_o.data, hid, 0.0f, dctx, hid);
    for (int64_t i = 0; i < n; i++) {
        for (int64_t h = 0; h < heads; h++) {
            int64_t off = i * seq * 3 * hid + h * dh;
            const float *q = qkv + off, *k = q + hid, *v = q + 2 * hid;
            float *dq = dqkv + off, *dk = dq + hid, *dv = dq + 2 * hid;
            const float *ph = prob + (i * heads + h) * seq * seq;
            const float *dc = dctx + i * seq * hid + h * dh;
            /* dV = P^T dctx_h; dP = dctx_h V^T */
            gpp_cpu_sgemm(1, 0, seq, dh, seq, 1.0f, ph, seq, dc, hid, 0.0f, dv, 3 * hid);
            gpp_cpu_sgemm(0, 1, seq, seq, dh, 1.0f, dc, hid, v, 3 * hid, 0.0f, dprob, seq);
            s_softmax_bwd_rows(seq, seq, ph, dprob);
            /* scores = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q */
            gpp_cpu_sgemm(0, 0, seq, dh, seq, scale, dprob, seq, k, 3 * hid, 0.0f, dq, 3 * hid);
            gpp_cpu_sgemm(1, 0, seq, dh, seq, scale, dprob, seq, q, 3 * hid, 0.0f, dk, 3 * hid);
        }
    }
    if (dx)
        gpp_cpu_linear_bwd_raw(m, hid, 3 * hid, x->data, p->w_qkv.data, dqkv, dx, NULL, NULL, NULL);
}

/* W: dW_o, db_o += from the stashed ctx and dy; dW_qkv, db_qkv += from x and
 * dqkv. ones: m floats equal to 1. */
static void s_attention_bwd_w(const gpp_tensor_t *x, int heads, const float *stash,
                              const float *dyp, const float *dqkv, const gpp_attention_params_t *dp,
                              const float *ones)
{
    int64_t n = x->n, seq = x->rows, hid = x->cols, m = n * seq;
    const float *ctx = stash + m * 3 * hid + n * heads * seq * seq;
    if (!dp)
        return;
    gpp_cpu_linear_bwd_raw(m, hid, hid, ctx, NULL, dyp, NULL, dp->w_o.data, dp->b_o.data, ones);
    gpp_cpu_linear_bwd_raw(m, hid, 3 * hid, x->data, NULL, dqkv, NULL, dp->w_qkv.data,
                           dp->b_qkv.data, ones);
}

/* The fused backward is B then W, with dqkv in the workspace: the same calls
 * on the same values as the split passes (gpp_cpu_attention_bwd_in, _w). */
int gpp_cpu_attention_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                          int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                          gpp_tensor_t *dx, gpp_attention_params_t *dp, gpp_err_t *err)
{
    (void)causal; /* the stashed probabilities are zero where masked: dS is too */
    int64_t n = x->n, seq = x->rows, hid = x->cols, m = n * seq;
    /* workspace: dctx [m, hid] | dqkv [m, 3 hid] | dprob [seq, seq] | ones [m] */
    int64_t ws_floats = m * hid + m * 3 * hid + seq * seq;
    assert((size_t)(ws_floats + m) * sizeof(float) == gpp_attention_workspace_bytes(n, seq, hid));
    float *dctx = gpp_cpu_workspace_ones(s, ws_floats, m, err);
    if (!dctx)
        return gpp_err_prefix(err, "attention backward workspace");
    float *dqkv = dctx + m * hid;
    s_attention_bwd_in(x, p, heads, stash, dy->data, dctx, dqkv + m * 3 * hid, dqkv,
                       dx ? dx->data : NULL);
    s_attention_bwd_w(x, heads, stash, dy->data, dqkv, dp, dctx + ws_floats);
    return 0;
}

int gpp_cpu_attention_bwd_in(gpp_stream_t *s, const gpp_tensor_t *x,
                             const gpp_attention_params_t *p, int heads, int causal,
                             const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                             void *dqkv, gpp_err_t *err)
{
    (void)causal;
    int64_t n = x->n, seq = x->rows, hid = x->cols, m = n * seq;
    int64_t ws_floats = m * hid + m * 3 * hid + seq * seq; /* the fused layout; dqkv unused */
    float *dctx = gpp_cpu_workspace_ones(s, ws_floats, m, err);
    if (!dctx)
        return gpp_err_prefix(err, "attention backward workspace");
    s_attention_bwd_in(x, p, heads, stash, dy->data, dctx, dctx + m * 4 * hid, dqkv,
                       dx ? dx->data : NULL);
    return 0;
}

int gpp_cpu_attention_bwd_w(gpp_stream_t *s, const gpp_tensor_t *x, int heads, const void *stash,
                            const gpp_tensor_t *dy, const void *dqkv, gpp_attention_params_t *dp,
                            gpp_err_t *err)
{
    int64_t m = x->n * x->rows;
    float *ones = gpp_cpu_workspace_ones(s, 0, m, err);
    if (!ones)
        return gpp_err_prefix(err, "attention backward workspace");
    s_attention_bwd_w(x, heads, stash, dy->data, dqkv, dp, ones);
    return 0;
}
