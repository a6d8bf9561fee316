/* gpp_cpu_eltwise: element-wise kernels (ReLU, GELU, add, axpy, scale). */
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"

GPP_CPU_CLONES
int gpp_cpu_relu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    (void)s, (void)err;
    const float *restrict xp = x->data;
    float *restrict yp = y->data;
    for (int64_t i = 0, n = gpp_tensor_numel(x); i < n; i++)
        yp[i] = gpp_math_relu(xp[i]);
    return 0;
}

GPP_CPU_CLONES
int gpp_cpu_relu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy,
                     gpp_tensor_t *dx, gpp_err_t *err)
{
    (void)s, (void)err;
    const float *xp = x->data, *dyp = dy->data;
    float *dxp = dx->data;
    for (int64_t i = 0, n = gpp_tensor_numel(x); i < n; i++)
        dxp[i] += gpp_math_relu_grad(xp[i], dyp[i]);
    return 0;
}

/* GELU: the tanh approximation, gpp_math_gelu / gpp_math_gelu_deriv, or the
 * exact erf form, gpp_math_gelu_erf / gpp_math_gelu_erf_deriv
 * (kernels/gpp_math.h, shared with the CUDA kernels); one branch-free,
 * vectorised loop per form. */

GPP_CPU_CLONES
int gpp_cpu_gelu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, gpp_tensor_t *y,
                     gpp_err_t *err)
{
    (void)s, (void)err;
    const float *restrict xp = x->data;
    float *restrict yp = y->data;
    int64_t n = gpp_tensor_numel(x);
    if (form == GPP_GELU_ERF)
        for (int64_t i = 0; i < n; i++)
            yp[i] = gpp_math_gelu_erf(xp[i]);
    else
        for (int64_t i = 0; i < n; i++)
            yp[i] = gpp_math_gelu(xp[i]);
    return 0;
}

GPP_CPU_CLONES
int gpp_cpu_gelu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, const gpp_tensor_t *dy,
                     gpp_tensor_t *dx, gpp_err_t *err)
{
    (void)s, (void)err;
    const float *xp = x->data, *dyp = dy->data;
    float *dxp = dx->data;
    int64_t n = gpp_tensor_numel(x);
    if (form == GPP_GELU_ERF)
        for (int64_t i = 0; i < n; i++)
            dxp[i] += dyp[i] * gpp_math_gelu_erf_deriv(xp[i]);
    else
        for (int64_t i = 0; i < n; i++)
            dxp[i] += dyp[i] * gpp_math_gelu_deriv(xp[i]);
    return 0;
}

GPP_CPU_CLONES
int gpp_cpu_add(gpp_stream_t *s, const gpp_tensor_t *ta, const gpp_tensor_t *tb, gpp_tensor_t *ty,
                gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t n = gpp_tensor_numel(ty);
    const float *a = gpp_tensor_f32(ta), *b = gpp_tensor_f32(tb);
    float *y = gpp_tensor_f32(ty);
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
    return 0;
}

GPP_CPU_CLONES
int gpp_cpu_axpy(gpp_stream_t *s, float alpha, const gpp_tensor_t *tx, gpp_tensor_t *ty,
                 gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t n = gpp_tensor_numel(ty);
    const float *x = gpp_tensor_f32(tx);
    float *y = gpp_tensor_f32(ty);
    if (alpha == 1.0f) {
        gpp_cpu_acc(n, x, y);
        return 0;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
    return 0;
}
