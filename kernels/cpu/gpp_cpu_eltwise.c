/* gpp_cpu_eltwise: element-wise kernels (ReLU, GELU, add, axpy, scale). */
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"

int gpp_cpu_relu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    (void)s, (void)err;
    const float *xp = x->data;
    float *yp = y->data;
    for (int64_t i = 0, n = gpp_tensor_numel(x); i < n; i++)
        yp[i] = xp[i] > 0.0f ? xp[i] : 0.0f;
    return 0;
}

int gpp_cpu_relu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy,
                     gpp_tensor_t *dx, gpp_err_t *err)
{
    (void)s, (void)err;
    const float *xp = x->data, *dyp = dy->data;
    float *dxp = dx->data;
    for (int64_t i = 0, n = gpp_tensor_numel(x); i < n; i++)
        dxp[i] += xp[i] > 0.0f ? dyp[i] : 0.0f;
    return 0;
}

/* GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = c (x + a x^3). */
#define GPP_GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
#define GPP_GELU_A 0.044715f

/* tanh through one expf: 1 - 2 / (exp(2u) + 1), several times faster than
 * tanhf and within 2e-7 (absolute) of tanh. u is clamped to +-15, where tanh is 1 in
 * fp32, so that expf never overflows (its overflow path is slow). */
static inline float s_tanh(float u)
{
    u = u > 15.0f ? 15.0f : u < -15.0f ? -15.0f : u;
    return 1.0f - 2.0f / (expf(2.0f * u) + 1.0f);
}

int gpp_cpu_gelu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    (void)s, (void)err;
    const float *xp = x->data;
    float *yp = y->data;
    for (int64_t i = 0, n = gpp_tensor_numel(x); i < n; i++) {
        float v = xp[i];
        float u = GPP_GELU_C * (v + GPP_GELU_A * v * v * v);
        yp[i] = 0.5f * v * (1.0f + s_tanh(u));
    }
    return 0;
}

int gpp_cpu_gelu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy,
                     gpp_tensor_t *dx, gpp_err_t *err)
{
    (void)s, (void)err;
    const float *xp = x->data, *dyp = dy->data;
    float *dxp = dx->data;
    for (int64_t i = 0, n = gpp_tensor_numel(x); i < n; i++) {
        float v = xp[i];
        float t = s_tanh(GPP_GELU_C * (v + GPP_GELU_A * v * v * v));
        /* d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) c (1 + 3 a x^2) */
        float d = 0.5f * (1.0f + t) +
                  0.5f * v * (1.0f - t * t) * GPP_GELU_C * (1.0f + 3.0f * GPP_GELU_A * v * v);
        dxp[i] += dyp[i] * d;
    }
    return 0;
}

int gpp_cpu_add(gpp_stream_t *s, int64_t n, const float *a, const float *b, float *y,
                gpp_err_t *err)
{
    (void)s, (void)err;
    for (int64_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
    return 0;
}

int gpp_cpu_axpy(gpp_stream_t *s, int64_t n, float alpha, const float *x, float *y, gpp_err_t *err)
{
    (void)s, (void)err;
    if (alpha == 1.0f) {
        gpp_cpu_acc(n, x, y);
        return 0;
    }
    for (int64_t i = 0; i < n; i++)
        y[i] += alpha * x[i];
    return 0;
}

int gpp_cpu_scale(gpp_stream_t *s, int64_t n, float alpha, float *x, gpp_err_t *err)
{
    (void)s, (void)err;
    for (int64_t i = 0; i < n; i++)
        x[i] *= alpha;
    return 0;
}
