/* gpp_math: element-wise math shared by the CPU and the CUDA kernels.
 *
 * Every function here is the one definition of its formula: the CPU
 * backend (kernels/cpu/) calls it inside its vectorised loops and the CUDA
 * backend (kernels/cuda/) inside its kernels, so the two cannot drift, and
 * tests/unit/test_kernels.c checks the math on the host. Plain C that nvcc
 * also compiles (GPP_HD marks the functions __host__ __device__ there); no
 * includes but <math.h> / <stdint.h>, so CUDA sources need none of the C
 * headers.
 *
 * Results on the two devices agree to rounding, not bit for bit: nvcc
 * contracts a*b+c into FMA, the C build does not (-ffp-contract=off). */
#ifndef GPP_MATH_H
#define GPP_MATH_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GPP_HD __host__ __device__
#else
#define GPP_HD
#endif

/* exp(z) for z in [-87, 88] (z is clamped to that range: exp(-87) =
 * 1.6e-38 stands in for anything smaller, exp(88) = 1.7e38 for anything
 * larger), branch-free so that loops calling it vectorise. Cody-Waite range
 * reduction z = n ln2 + r, |r| <= ln2/2, and Cephes expf's degree-7
 * polynomial for exp(r); 2^n is built in the exponent bits. Max relative
 * error against exp in double: 8.3e-8 (under 1 ulp) over [-87, 88] in steps
 * of 1e-5; tests/unit/test_kernels.c checks 1.2e-7 on a coarser grid. */
static GPP_HD inline float gpp_math_expf(float z)
{
    z = z > 88.0f ? 88.0f : z;
    z = z < -87.0f ? -87.0f : z;
    /* n = round(z / ln2) via the 1.5 * 2^23 trick (exact, no rint call) */
    float n = (z * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = z - n * 0.693359375f; /* ln2 in two parts: exact product */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n, n in [-126, 127]: the biased exponent n + 127 in bits 23..30 */
    union {
        int32_t i;
        float f;
    } two_n;
    two_n.i = ((int32_t)n + 127) << 23;
    return p * two_n.f;
}

/* ---- ReLU ---- */
static GPP_HD inline float gpp_math_relu(float x)
{
    return x > 0.0f ? x : 0.0f;
}
/* d relu / dx times dy */
static GPP_HD inline float gpp_math_relu_grad(float x, float dy)
{
    return x > 0.0f ? dy : 0.0f;
}

/* ---- GELU (gpp_gelu_form_t), tanh approximation: 0.5 x (1 + tanh(u)),
 * u = c (x + a x^3) ----
 * Computed as x sg with sg = sigmoid(2u) = 1 / (1 + e), e = exp(-2u), since
 * 0.5 (1 + tanh(u)) = sigmoid(2u): one branch-free gpp_math_expf and one
 * division per element. The derivative's sg (1 - sg) is e sg^2, which does
 * not cancel where sg is near 1. Max abs error against the formula in
 * double, relative to max(1, |x|): 1.4e-7 forward, 1.8e-7 backward
 * (tests/unit/test_kernels.c checks 5e-7). Below x = -10, e saturates at
 * exp(88) and both results are tiny instead of 0. */
#define GPP_GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
#define GPP_GELU_A 0.044715f

/* e = exp(-2u) for the GELU of v */
static GPP_HD inline float gpp_math_gelu_exp(float v)
{
    return gpp_math_expf(-2.0f * (GPP_GELU_C * (v + GPP_GELU_A * v * v * v)));
}
static GPP_HD inline float gpp_math_gelu(float x)
{
    return x / (1.0f + gpp_math_gelu_exp(x));
}
/* d gelu / dx at x: sg + x sg (1 - sg) 2 c (1 + 3 a x^2) */
static GPP_HD inline float gpp_math_gelu_deriv(float x)
{
    float e = gpp_math_gelu_exp(x);
    float sg = 1.0f / (1.0f + e);
    return sg + x * (e * sg * sg) * (2.0f * GPP_GELU_C) * (1.0f + 3.0f * GPP_GELU_A * x * x);
}

/* ---- GELU, exact: 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x) ----
 * Phi(x) = 0.5 erfc(-x / sqrt 2) is built from erfc(a), a = |x| / sqrt 2 >= 0,
 * as 1 - erfc(a) / 2 (x >= 0) or erfc(a) / 2 (x < 0): erfc of a non-negative
 * argument keeps its relative precision where 1 + erf would cancel (x << 0).
 * erfc(a) is Numerical Recipes' erfcc (Press et al., Numerical Recipes in
 * C, 2nd ed., 6.2: t = 1 / (1 + a/2), erfc(a) = t exp(-a^2 + P(t)), P of
 * degree 9, fractional error below 1.2e-7 for every a >= 0), with the
 * branch-free gpp_math_expf, so that the loops vectorise (libm's erfcf was
 * 35x slower than the tanh form on the CPU, bench/bench_gelu). The
 * derivative is Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
 * Where exp clamps (|x| > 13.2) the tail terms are below 1e-36 instead of 0.
 * Max abs error against the formula in double, relative to max(1, |x|):
 * 1.1e-7 forward, 2.1e-7 backward (tests/unit/test_kernels.c checks 5e-7). */
#define GPP_GELU_RSQRT2 0.70710678118654752f  /* 1 / sqrt(2) */
#define GPP_GELU_RSQRT2PI 0.3989422804014327f /* 1 / sqrt(2 pi) */

/* erfc(a) for a >= 0 (Numerical Recipes' erfcc coefficients) */
static GPP_HD inline float gpp_math_erfc_pos(float a)
{
    float t = 1.0f / (1.0f + 0.5f * a);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    return t * gpp_math_expf(p - a * a);
}
/* Phi(x), the standard normal CDF */
static GPP_HD inline float gpp_math_normal_cdf(float x)
{
    float e = gpp_math_erfc_pos(fabsf(x) * GPP_GELU_RSQRT2);
    return x >= 0.0f ? 1.0f - 0.5f * e : 0.5f * e;
}
static GPP_HD inline float gpp_math_gelu_erf(float x)
{
    return x * gpp_math_normal_cdf(x);
}
/* d gelu_erf / dx at x */
static GPP_HD inline float gpp_math_gelu_erf_deriv(float x)
{
    return gpp_math_normal_cdf(x) + x * GPP_GELU_RSQRT2PI * gpp_math_expf(-0.5f * x * x);
}

/* ---- optimizers (update rules in kernels/gpp_optim.h) ---- */

/* One SGD element: g the gradient (0 for an untouched sparse row); v is
 * only read and written with momentum. */
static GPP_HD inline void gpp_math_sgd(float lr, float wd, float mu, float g, float *p, float *v)
{
    float gi = g + wd * *p;
    if (mu != 0.0f) {
        *v = mu * *v + gi;
        gi = *v;
    }
    *p -= lr * gi;
}

/* The per-step constants of AdamW: decay = 1 - lr wd, step = lr / bc1,
 * inv_sqrt_bc2 = 1 / sqrt(bc2) with bc1 = 1 - beta1^t, bc2 = 1 - beta2^t
 * (computed once per step on the host, in double, by
 * gpp_math_adamw_consts). */
typedef struct {
    float decay, b1, b2, step, inv_sqrt_bc2, eps;
} gpp_math_adamw_t;

static inline gpp_math_adamw_t gpp_math_adamw_consts(float lr, float wd, float beta1, float beta2,
                                                     float eps, int64_t t)
{
    gpp_math_adamw_t k;
    float bc1 = (float)(1.0 - pow((double)beta1, (double)t));
    float bc2 = (float)(1.0 - pow((double)beta2, (double)t));
    k.decay = 1.0f - lr * wd;
    k.b1 = beta1;
    k.b2 = beta2;
    k.step = lr / bc1;
    k.inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
    k.eps = eps;
    return k;
}

/* One AdamW element. */
static GPP_HD inline void gpp_math_adamw(const gpp_math_adamw_t *k, float g, float *p, float *m,
                                         float *v)
{
    *p *= k->decay;
    *m = k->b1 * *m + (1.0f - k->b1) * g;
    *v = k->b2 * *v + (1.0f - k->b2) * g * g;
    *p -= k->step * *m / (sqrtf(*v) * k->inv_sqrt_bc2 + k->eps);
}

#endif
