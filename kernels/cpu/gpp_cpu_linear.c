/* gpp_cpu_linear: y = x W^T (+ b) and its backward as OpenBLAS sgemm calls.
 *
 * The n*rows rows of x form one [m, in] matrix, so a linear is exactly one
 * sgemm forward (the bias is written into y first and the product added
 * with beta = 1, saving a second pass over y) and two sgemms backward, plus
 * an sgemv with a vector of ones for the bias gradient. */
#include <assert.h>
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "kernels/cpu/gpp_cpu.h"

void gpp_cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc)
{
    /* OpenBLAS's LP64 interface takes int dimensions. */
    assert(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX);
    assert(lda <= INT_MAX && ldb <= INT_MAX && ldc <= INT_MAX);
    if (m == 0 || n == 0)
        return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
                (int)ldb, beta, c, (int)ldc);
}

GPP_CPU_CLONES
void gpp_cpu_acc(int64_t n, const float *x, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] += x[i];
}

void gpp_cpu_linear_fwd_raw(int64_t m, int64_t in, int64_t out, const float *x, const float *w,
                            const float *b, float *y)
{
    if (b)
        for (int64_t i = 0; i < m; i++)
            memcpy(y + i * out, b, (size_t)out * sizeof(float));
    gpp_cpu_sgemm(0, 1, m, out, in, 1.0f, x, in, w, in, b ? 1.0f : 0.0f, y, out);
}

void gpp_cpu_linear_bwd_raw(int64_t m, int64_t in, int64_t out, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db, const float *ones)
{
    if (dx) /* [m, in] += [m, out] (out, in) */
        gpp_cpu_sgemm(0, 0, m, in, out, 1.0f, dy, out, w, in, 1.0f, dx, in);
    if (dw) /* (out, in) += [m, out]^T [m, in] */
        gpp_cpu_sgemm(1, 0, out, in, m, 1.0f, dy, out, x, in, 1.0f, dw, in);
    if (db && m > 0) { /* [out] += [m, out]^T ones */
        assert(ones && m <= INT_MAX && out <= INT_MAX);
        cblas_sgemv(CblasRowMajor, CblasTrans, (int)m, (int)out, 1.0f, dy, (int)out, ones, 1, 1.0f,
                    db, 1);
    }
}

float *gpp_cpu_workspace_ones(gpp_stream_t *s, int64_t head_floats, int64_t m, gpp_err_t *err)
{
    float *ws = gpp_stream_workspace(s, (size_t)(head_floats + m) * sizeof(float), err);
    if (!ws)
        return NULL;
    for (int64_t i = 0; i < m; i++)
        ws[head_floats + i] = 1.0f;
    return ws;
}

int gpp_cpu_linear_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                       const gpp_tensor_t *b, gpp_tensor_t *y, gpp_err_t *err)
{
    (void)s, (void)err;
    gpp_cpu_linear_fwd_raw(x->n * x->rows, x->cols, w->rows, x->data, w->data, b ? b->data : NULL,
                           y->data);
    return 0;
}

/* ReLU over y in place: the fused linear's output, still in cache */
GPP_CPU_CLONES
static void s_relu_inplace(int64_t n, float *y)
{
    for (int64_t i = 0; i < n; i++)
        y[i] = gpp_math_relu(y[i]);
}

/* The product goes straight into y for ReLU (z is never materialised), into
 * z for GELU; then the same element function as gpp_cpu_relu_fwd /
 * gpp_cpu_gelu_fwd, so the results are theirs bit for bit. */
int gpp_cpu_linear_act_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                           const gpp_tensor_t *b, int act, int form, gpp_tensor_t *z,
                           gpp_tensor_t *y, gpp_err_t *err)
{
    gpp_tensor_t *pre = act == GPP_OP_RELU ? y : z;
    gpp_cpu_linear_fwd_raw(x->n * x->rows, x->cols, w->rows, x->data, w->data, b ? b->data : NULL,
                           pre->data);
    if (act == GPP_OP_RELU) {
        s_relu_inplace(gpp_tensor_numel(y), y->data);
        return 0;
    }
    return gpp_cpu_gelu_fwd(s, z, form, y, err);
}

int gpp_cpu_linear_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                       const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_tensor_t *dw, gpp_tensor_t *db,
                       gpp_err_t *err)
{
    int64_t m = x->n * x->rows;
    const float *ones = NULL;
    if (db && !(ones = gpp_cpu_workspace_ones(s, 0, m, err)))
        return gpp_err_prefix(err, "linear backward");
    gpp_cpu_linear_bwd_raw(m, x->cols, w->rows, x->data, w->data, dy->data, dx ? dx->data : NULL,
                           dw ? dw->data : NULL, db ? db->data : NULL, ones);
    return 0;
}
