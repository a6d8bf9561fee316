/* test_cuda_ops: every op of the CUDA backend, forward and backward, and the
 * optimizer steps, against the CPU backend on the same inputs.
 *
 * Each case builds its tensors twice (CPU and CUDA, same values), runs the
 * same call on both, copies the CUDA result back and prints the max abs
 * and relative difference. Tolerance, fp32 (the CUDA backend at its
 * default precision):  |cuda - cpu| <= ATOL + RTOL |cpu|  with ATOL = RTOL
 * = 1e-4. Both sides compute in fp32 with different summation orders
 * (cuBLASLt's tiles vs OpenBLAS's, warp butterflies vs 16 lanes) and nvcc
 * contracts a*b+c into FMA: at these sizes (sums of <= 256 terms of
 * magnitude <= 1) the differences are ~1e-6, two orders under the bound.
 * Gradient buffers start at 0.5 on both sides, so the accumulate (+=)
 * contract is checked too. Also: one product with precision tf32 against
 * its rounding bound (t_linear_tf32), the caching allocator's reuse, a bad
 * embedding index reported at the next synchronisation.
 *
 * Without a usable GPU (or in a build without CUDA) the test prints why and
 * exits 77, which ctest reports as skipped (SKIP_RETURN_CODE). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_optim.h"
#include "kernels/gpp_sparse.h"
#include "tests/gpp_test.h"
#ifdef GPP_HAVE_CUDA
#include "kernels/cuda/gpp_cuda.h" /* the pack kernel's launcher and the stream */
#endif

#define ATOL 1e-4
#define RTOL 1e-4
#define GRAD_INIT 0.5f
#define SKIP 77

static gpp_backend_t *s_cbe, *s_gbe;
/* the tolerance of s_close: ATOL, RTOL except where a case says; plus
 * s_stol times the largest |cpu| of the tensor (0 except at bf16) */
static double s_atol = ATOL, s_rtol = RTOL, s_stol;
static gpp_stream_t *s_cs, *s_gs;

/* ---- a tensor on both backends ---- */
typedef struct {
    gpp_tensor_t c, g;
} pt_t;

#define PT_MAX 64
static pt_t s_pts[PT_MAX];
static int s_npt;

static uint64_t s_rng = 0x2545f4914f6cdd1dull;
static float s_uniform(void) /* [-1, 1) */
{
    s_rng = s_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(s_rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* A tensor with host values h (NULL: zeros) on both backends. */
static pt_t *s_pt(gpp_dtype_t dt, int64_t n, int64_t rows, int64_t cols, const void *h)
{
    gpp_err_t err;
    if (s_npt == PT_MAX)
        abort();
    pt_t *p = &s_pts[s_npt++];
    if (gpp_tensor_alloc(s_cbe, dt, n, rows, cols, &p->c, &err) < 0 ||
        gpp_tensor_alloc(s_gbe, dt, n, rows, cols, &p->g, &err) < 0) {
        fprintf(stderr, "test_cuda_ops: %s\n", err.msg);
        abort();
    }
    size_t bytes = gpp_tensor_bytes(&p->c);
    if (h) {
        memcpy(p->c.data, h, bytes);
        GPP_EXPECT(gpp_stream_copy(s_gs, p->g.data, h, bytes, GPP_COPY_H2D, &err) == 0);
    } else {
        memset(p->c.data, 0, bytes);
        GPP_EXPECT(gpp_stream_zero(s_gs, p->g.data, bytes, &err) == 0);
    }
    GPP_EXPECT(gpp_stream_sync(s_gs, &err) == 0);
    return p;
}

/* int32 values in [0, max) */
static pt_t *s_ints(int64_t n, int64_t rows, int64_t cols, int32_t max)
{
    int64_t k = n * rows * cols;
    int32_t *h = malloc((size_t)(k ? k : 1) * sizeof(int32_t));
    for (int64_t i = 0; i < k; i++)
        h[i] = (int32_t)((s_uniform() + 1.0f) * 0.5f * (float)max) % max;
    pt_t *p = s_pt(GPP_DTYPE_I32, n, rows, cols, h);
    free(h);
    return p;
}

/* bf16 bits of x rounded to nearest even (NaN: any NaN) */
static uint16_t s_bf16_rn(float x);

/* Activation tensors (inputs, outputs and their gradients of the ops that
 * take bf16, gpp_backend_act_bf16): in fp32 like the others, except in the
 * bf16-tensor runs (t_bf16_tensors), where the CUDA side is bf16 (s_act16
 * 1: every one; 2: every other one, so mixes of element types run too) and
 * both sides hold the same bf16-rounded values. */
static int s_act16, s_act16_count;

static pt_t *s_act_values(int64_t n, int64_t rows, int64_t cols, float *h)
{
    int64_t k = n * rows * cols;
    int bf16 = s_act16 == 1 || (s_act16 == 2 && s_act16_count++ % 2 == 0);
    if (!bf16)
        return s_pt(GPP_DTYPE_F32, n, rows, cols, h);
    gpp_err_t err;
    if (s_npt == PT_MAX)
        abort();
    pt_t *p = &s_pts[s_npt++];
    uint16_t *b = malloc((size_t)(k ? k : 1) * sizeof(uint16_t));
    for (int64_t i = 0; i < k; i++) {
        float v = h ? h[i] : 0.0f;
        b[i] = s_bf16_rn(v);
        uint32_t u = (uint32_t)b[i] << 16;
        memcpy(&v, &u, 4);
        if (h)
            h[i] = v; /* the CPU side: the same value */
    }
    if (gpp_tensor_alloc(s_cbe, GPP_DTYPE_F32, n, rows, cols, &p->c, &err) < 0 ||
        gpp_tensor_alloc(s_gbe, GPP_DTYPE_BF16, n, rows, cols, &p->g, &err) < 0) {
        fprintf(stderr, "test_cuda_ops: %s\n", err.msg);
        abort();
    }
    if (h)
        memcpy(p->c.data, h, (size_t)k * sizeof(float));
    else
        memset(p->c.data, 0, (size_t)k * sizeof(float));
    GPP_EXPECT(gpp_stream_copy(s_gs, p->g.data, b, (size_t)k * 2, GPP_COPY_H2D, &err) == 0 &&
               gpp_stream_sync(s_gs, &err) == 0);
    free(b);
    return p;
}
/* n x rows x cols host values, scale x uniform [-1, 1) (rand) or all v,
 * as an fp32 tensor (act 0) or an activation (act 1, s_act_values) */
static pt_t *s_made(int act, int64_t n, int64_t rows, int64_t cols, int rand, float v)
{
    int64_t k = n * rows * cols;
    float *h = malloc((size_t)(k ? k : 1) * sizeof(float));
    for (int64_t i = 0; i < k; i++)
        h[i] = rand ? v * s_uniform() : v;
    pt_t *p = act ? s_act_values(n, rows, cols, h) : s_pt(GPP_DTYPE_F32, n, rows, cols, h);
    free(h);
    return p;
}
static pt_t *s_rand(int64_t n, int64_t rows, int64_t cols, float scale)
{
    return s_made(0, n, rows, cols, 1, scale);
}
static pt_t *s_fill(int64_t n, int64_t rows, int64_t cols, float v)
{
    return s_made(0, n, rows, cols, 0, v);
}
static pt_t *s_arand(int64_t n, int64_t rows, int64_t cols, float scale)
{
    return s_made(1, n, rows, cols, 1, scale);
}
static pt_t *s_afill(int64_t n, int64_t rows, int64_t cols, float v)
{
    return s_made(1, n, rows, cols, 0, v);
}
static pt_t *s_azero(int64_t n, int64_t rows, int64_t cols)
{
    return s_act_values(n, rows, cols, NULL);
}

static void s_free_all(void)
{
    gpp_err_t err;
    GPP_EXPECT(gpp_stream_sync(s_gs, &err) == 0);
    for (int i = 0; i < s_npt; i++) {
        gpp_tensor_free(s_cbe, &s_pts[i].c);
        gpp_tensor_free(s_gbe, &s_pts[i].g);
    }
    s_npt = 0;
}

/* Compares n floats of CPU memory c with CUDA memory g (fp32, or bf16
 * where g_bf16); prints the max differences. */
static void s_close_typed(const char *what, const float *c, const void *g, int g_bf16, int64_t n)
{
    gpp_err_t err;
    float *h = malloc((size_t)(n ? n : 1) * sizeof(float));
    size_t eb = g_bf16 ? 2 : sizeof(float);
    GPP_EXPECT(gpp_stream_copy(s_gs, h, g, (size_t)n * eb, GPP_COPY_D2H, &err) == 0);
    int rc = gpp_stream_sync(s_gs, &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    for (int64_t i = n - 1; g_bf16 && i >= 0; i--) { /* widen in place, from the end */
        uint16_t b;
        memcpy(&b, (char *)h + 2 * i, 2);
        uint32_t u = (uint32_t)b << 16;
        memcpy(&h[i], &u, 4);
    }
    double max_abs = 0, max_rel = 0, scale = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        scale = fmax(scale, fabs((double)c[i]));
    double atol = s_atol + s_stol * scale;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)h[i] - (double)c[i]);
        max_abs = fmax(max_abs, d);
        max_rel = fmax(max_rel, d / fmax(fabs((double)c[i]), 1e-30));
        bad += !(d <= atol + s_rtol * fabs((double)c[i]));
    }
    printf("  %-34s %8lld elems%s: max abs diff %.3g, max rel diff %.3g, %lld over tol\n", what,
           (long long)n, g_bf16 ? " (bf16)" : "", max_abs, max_rel, (long long)bad);
    GPP_EXPECT_MSG(bad == 0, "%s: %lld elements differ beyond %g + %g |cpu|", what, (long long)bad,
                   atol, s_rtol);
    free(h);
}

static void s_close_raw(const char *what, const float *c, const float *g, int64_t n)
{
    s_close_typed(what, c, g, 0, n);
}

static void s_close(const char *what, const pt_t *p)
{
    s_close_typed(what, p->c.data, p->g.data, p->g.dtype == GPP_DTYPE_BF16,
                  gpp_tensor_numel(&p->c));
}

/* Runs `call` on the CPU (D = 0) and on CUDA (D = 1): T(p) is the tensor of
 * the side, S its stream. */
static int D;
#define T(p) (D ? &(p)->g : &(p)->c)
#define S (D ? s_gs : s_cs)
#define BOTH(call)                                                                                 \
    do {                                                                                           \
        gpp_err_t e_;                                                                              \
        gpp_err_t *err = &e_;                                                                      \
        for (D = 0; D < 2; D++) {                                                                  \
            int rc_ = (call);                                                                      \
            GPP_EXPECT_MSG(rc_ == 0, "%s on %s: %s", #call, D ? "cuda" : "cpu", e_.msg);           \
        }                                                                                          \
        (void)err;                                                                                 \
    } while (0)

/* ---- cases ---- */

static void t_linear(void)
{
    for (int bias = 0; bias < 2; bias++) {
        pt_t *x = s_arand(3, 5, 24, 1), *w = s_rand(1, 40, 24, 0.5f), *b = s_rand(1, 1, 40, 1);
        pt_t *y = s_azero(3, 5, 40), *dy = s_arand(3, 5, 40, 1);
        pt_t *dx = s_afill(3, 5, 24, GRAD_INIT), *dw = s_fill(1, 40, 24, GRAD_INIT);
        pt_t *db = s_fill(1, 1, 40, GRAD_INIT);
        BOTH(gpp_linear_fwd(S, T(x), T(w), bias ? T(b) : NULL, T(y), err));
        BOTH(gpp_linear_bwd(S, T(x), T(w), T(dy), T(dx), T(dw), bias ? T(db) : NULL, err));
        s_close(bias ? "linear+bias fwd y" : "linear fwd y", y);
        s_close("linear bwd dx", dx);
        s_close("linear bwd dw", dw);
        if (bias)
            s_close("linear bwd db", db);
        s_free_all();
    }
}

/* Linear + activation in one call (cuBLASLt's RELU_BIAS / GELU_AUX_BIAS
 * epilogues, docs/executor.md "Fusion") against the CPU backend, which
 * computes the product then the activation: ReLU and GELU, with and without
 * bias; out = 40 takes the epilogue for GELU (a multiple of 8), out = 36
 * the fallback (product, then the GELU kernel), as does the erf form. For
 * GELU the pre-activation z is compared too. */
static void t_linear_act(void)
{
    static const struct {
        gpp_op_type_t act;
        gpp_gelu_form_t form;
        int64_t out;
        const char *name;
    } c[] = {{GPP_OP_RELU, GPP_GELU_TANH, 40, "linear+relu"},
             {GPP_OP_RELU, GPP_GELU_TANH, 36, "linear+relu (36)"},
             {GPP_OP_GELU, GPP_GELU_TANH, 40, "linear+gelu tanh (epilogue)"},
             {GPP_OP_GELU, GPP_GELU_TANH, 36, "linear+gelu tanh (36: kernel)"},
             {GPP_OP_GELU, GPP_GELU_ERF, 40, "linear+gelu erf (kernel)"}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        for (int bias = 0; bias < 2; bias++) {
            int64_t out = c[i].out;
            pt_t *x = s_arand(3, 5, 24, 1), *w = s_rand(1, out, 24, 0.5f),
                 *b = s_rand(1, 1, out, 1);
            pt_t *y = s_azero(3, 5, out);
            pt_t *z = c[i].act == GPP_OP_GELU ? s_azero(3, 5, out) : NULL;
            BOTH(gpp_linear_act_fwd(S, T(x), T(w), bias ? T(b) : NULL, c[i].act, c[i].form,
                                    z ? T(z) : NULL, T(y), err));
            char what[64];
            snprintf(what, sizeof what, "%s%s y", c[i].name, bias ? "+bias" : "");
            s_close(what, y);
            if (z) {
                snprintf(what, sizeof what, "%s%s z", c[i].name, bias ? "+bias" : "");
                s_close(what, z);
            }
            s_free_all();
        }
}

/* precision = tf32 or bf16: the product of inputs rounded to TF32 (10
 * explicit mantissa bits) or bfloat16 (7), relative error <= 2^-10 or 2^-7
 * each when truncated, so <= 2^-9 or 2^-6 for a product, accumulated in fp32
 * (<= k 2^-23 relative to the sum of magnitudes). Per element:
 * |low - cpu| <= (2^-e + k 2^-23) sum_k |x w|, e = 9 (tf32) or 6 (bf16). */
static void s_linear_low(gpp_precision_t prec, int e, const char *bf16_gemm)
{
    gpp_err_t err;
    enum { M = 64, IN = 256, OUT = 96 };
    gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CUDA, .precision = prec};
    if (bf16_gemm)
        setenv("GPP_CUDA_BF16_GEMM", bf16_gemm, 1);
    gpp_backend_t *tf = gpp_backend_new(&cfg, &err);
    unsetenv("GPP_CUDA_BF16_GEMM");
    gpp_stream_t *ts = tf ? gpp_stream_new(tf, &err) : NULL;
    GPP_EXPECT_MSG(ts != NULL, "%s", err.msg);
    if (!ts) {
        gpp_backend_destroy(&tf);
        return;
    }
    static float x[M * IN], w[OUT * IN], y[M * OUT], yt[M * OUT];
    for (int i = 0; i < M * IN; i++)
        x[i] = s_uniform();
    for (int i = 0; i < OUT * IN; i++)
        w[i] = s_uniform();
    gpp_tensor_t hx = gpp_tensor(x, GPP_DTYPE_F32, 1, M, IN);
    gpp_tensor_t hw = gpp_tensor(w, GPP_DTYPE_F32, 1, OUT, IN);
    gpp_tensor_t hy = gpp_tensor(y, GPP_DTYPE_F32, 1, M, OUT);
    GPP_EXPECT(gpp_linear_fwd(s_cs, &hx, &hw, NULL, &hy, &err) == 0); /* cpu: host memory */
    gpp_tensor_t dx, dw, dy;
    GPP_EXPECT(gpp_tensor_alloc(tf, GPP_DTYPE_F32, 1, M, IN, &dx, &err) == 0 &&
               gpp_tensor_alloc(tf, GPP_DTYPE_F32, 1, OUT, IN, &dw, &err) == 0 &&
               gpp_tensor_alloc(tf, GPP_DTYPE_F32, 1, M, OUT, &dy, &err) == 0);
    GPP_EXPECT(gpp_stream_copy(ts, dx.data, x, sizeof x, GPP_COPY_H2D, &err) == 0 &&
               gpp_stream_copy(ts, dw.data, w, sizeof w, GPP_COPY_H2D, &err) == 0 &&
               gpp_linear_fwd(ts, &dx, &dw, NULL, &dy, &err) == 0 &&
               gpp_stream_copy(ts, yt, dy.data, sizeof yt, GPP_COPY_D2H, &err) == 0 &&
               gpp_stream_sync(ts, &err) == 0);
    double worst = 0, max_abs = 0;
    for (int r = 0; r < M; r++)
        for (int o = 0; o < OUT; o++) {
            double mag = 0;
            for (int k = 0; k < IN; k++)
                mag += fabs((double)x[r * IN + k] * w[o * IN + k]);
            double tol = (ldexp(1, -e) + IN * ldexp(1, -23)) * mag,
                   d = fabs(yt[r * OUT + o] - y[r * OUT + o]);
            worst = fmax(worst, d / tol);
            max_abs = fmax(max_abs, d);
        }
    printf("  linear %s%s fwd y           max abs diff %.3g, max diff / bound %.3g (bound "
           "(2^-%d + k 2^-23) sum|x w|)\n",
           gpp_precision_name(prec), bf16_gemm ? " packed" : "", max_abs, worst, e);
    GPP_EXPECT(worst <= 1.0);
    gpp_tensor_free(tf, &dx);
    gpp_tensor_free(tf, &dw);
    gpp_tensor_free(tf, &dy);
    gpp_stream_destroy(&ts);
    gpp_backend_destroy(&tf);
}

/* A CUDA backend opened with var=value is refused, naming both. */
static void s_expect_env_refused(const char *var, const char *value)
{
    gpp_err_t err;
    char want[96];
    gpp_backend_cfg_t gc = {.kind = GPP_DEVICE_CUDA, .device = 0};
    setenv(var, value, 1);
    gpp_backend_t *bad = gpp_backend_new(&gc, &err);
    unsetenv(var);
    snprintf(want, sizeof want, "%s=%s", var, value);
    GPP_EXPECT(bad == NULL && strstr(err.msg, want) != NULL);
    gpp_backend_destroy(&bad);
}

static void t_linear_tf32(void)
{
    s_linear_low(GPP_PRECISION_TF32, 9, NULL);
}

static void t_linear_bf16(void)
{
    s_linear_low(GPP_PRECISION_BF16, 6, NULL);
}

/* GPP_CUDA_BF16_GEMM=packed: both operands rounded to bf16 (2^-9 each)
 * by the pack kernel, a bf16 product: within the same bound; an unknown
 * value is refused naming the variable */
#ifdef GPP_HAVE_CUDA
/* bf16 bits of x rounded to nearest even (NaN: any NaN) */
static uint16_t s_bf16_rn(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fffu;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#endif

/* The pack kernel of GPP_CUDA_BF16_GEMM=packed (gpp_cuk_pack_bf16) against
 * round to nearest even on the host, bit for bit: its 16-byte path (rows
 * 16-byte aligned, columns a multiple of 8) and its scalar one, batched
 * with a batch stride, over ties (even down, odd up), signed zeros,
 * infinities, NaN, subnormals and ordinary values; and nothing written
 * past the packed rows. */
static void t_pack_bf16(void)
{
#ifdef GPP_HAVE_CUDA
    static const struct {
        int64_t batch, rows, cols, ld, stride, off;
        const char *what;
    } cs[] = {
        {1, 37, 64, 64, 0, 0, "16-byte path"},
        {3, 5, 24, 28, 5 * 28 + 4, 0, "16-byte path, batched, row stride 28"},
        {1, 3, 2056, 2056, 0, 0, "16-byte path, 257 vectors a row, 2 blocks"},
        {2, 7, 13, 13, 7 * 13, 0, "scalar: 13 columns"},
        {1, 9, 16, 19, 0, 0, "scalar: row stride 19"},
        {1, 2, 700, 701, 0, 0, "scalar: 2 long rows over 3 blocks each"},
        {1, 4, 32, 32, 0, 1, "scalar: source not 16-byte aligned"},
    };
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                       0x7fc00001u, 0x3f808000u, 0x3f818000u, 0xbf808000u,
                                       0x00000001u, 0x00408000u, 0x7f7fffffu, 0x3f80ffffu};
    gpp_err_t err;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        const int64_t B = cs[k].batch, R = cs[k].rows, C = cs[k].cols;
        const size_t nsrc = (size_t)(cs[k].off + (B - 1) * cs[k].stride + (R - 1) * cs[k].ld + C);
        const size_t ndst = (size_t)(B * R * C), guard = 16;
        float *h = malloc(nsrc * sizeof(float));
        uint16_t *got = malloc((ndst + guard) * sizeof(uint16_t));
        for (size_t i = 0; i < nsrc; i++) {
            if (i % 7 == 0)
                memcpy(&h[i], &special[i / 7 % (sizeof special / sizeof special[0])], 4);
            else
                h[i] = 100.0f * s_uniform();
        }
        void *src = gpp_backend_alloc(s_gbe, nsrc * sizeof(float), &err);
        void *dst = gpp_backend_alloc(s_gbe, (ndst + guard) * sizeof(uint16_t), &err);
        GPP_EXPECT(src && dst);
        if (!src || !dst)
            return;
        memset(got, 0xab, (ndst + guard) * sizeof(uint16_t));
        GPP_EXPECT(gpp_stream_copy(s_gs, src, h, nsrc * sizeof(float), GPP_COPY_H2D, &err) == 0 &&
                   gpp_stream_copy(s_gs, dst, got, (ndst + guard) * sizeof(uint16_t), GPP_COPY_H2D,
                                   &err) == 0);
        GPP_EXPECT(gpp_cuk_pack_bf16(gpp_cuda_stream(s_gs), B, R, C, (const float *)src + cs[k].off,
                                     cs[k].ld, cs[k].stride, dst) == cudaSuccess);
        GPP_EXPECT(gpp_stream_copy(s_gs, got, dst, (ndst + guard) * sizeof(uint16_t), GPP_COPY_D2H,
                                   &err) == 0 &&
                   gpp_stream_sync(s_gs, &err) == 0);
        size_t bad = 0, guard_bad = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t r = 0; r < R; r++)
                for (int64_t c = 0; c < C; c++) {
                    float x = h[cs[k].off + b * cs[k].stride + r * cs[k].ld + c];
                    uint16_t want = s_bf16_rn(x), g = got[(b * R + r) * C + c];
                    int nan = (want & 0x7fffu) > 0x7f80u;
                    bad += nan ? (g & 0x7fffu) <= 0x7f80u : g != want;
                }
        for (size_t i = 0; i < guard; i++)
            guard_bad += got[ndst + i] != 0xababu;
        printf("  pack bf16 %-40s %6zu elements: %zu wrong, %zu written past\n", cs[k].what, ndst,
               bad, guard_bad);
        GPP_EXPECT_MSG(bad == 0 && guard_bad == 0, "pack bf16 %s", cs[k].what);
        gpp_backend_free(s_gbe, &src);
        gpp_backend_free(s_gbe, &dst);
        free(h);
        free(got);
    }
#else
    printf("  (no CUDA in this build)\n");
#endif
}

static void t_linear_bf16_packed(void)
{
    s_linear_low(GPP_PRECISION_BF16, 6, "packed");
    s_expect_env_refused("GPP_CUDA_BF16_GEMM", "bf16");
}

/* Packed bf16 keeps each weight's rounding until the weight changes
 * (gpp_cuda_blas.c): after a copy into the weight, an optimizer step on it
 * and a zeroing, the product must be what a fresh packed backend computes
 * from the weight's new values, bit for bit; unchanged, the same bits. */
static gpp_backend_t *s_packed_backend(gpp_stream_t **st)
{
    gpp_err_t err;
    gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CUDA, .precision = GPP_PRECISION_BF16};
    setenv("GPP_CUDA_BF16_GEMM", "packed", 1);
    gpp_backend_t *be = gpp_backend_new(&cfg, &err);
    unsetenv("GPP_CUDA_BF16_GEMM");
    *st = be ? gpp_stream_new(be, &err) : NULL;
    GPP_EXPECT_MSG(*st != NULL, "%s", err.msg);
    return be;
}

/* y (host) = x W^T on a fresh packed backend from host x and w */
static void s_packed_fresh(int64_t m, int64_t in, int64_t out, const float *x, const float *w,
                           float *y)
{
    gpp_err_t err;
    gpp_stream_t *st;
    gpp_backend_t *be = s_packed_backend(&st);
    gpp_tensor_t dx, dw, dy;
    GPP_EXPECT(gpp_tensor_alloc(be, GPP_DTYPE_F32, 1, m, in, &dx, &err) == 0 &&
               gpp_tensor_alloc(be, GPP_DTYPE_F32, 1, out, in, &dw, &err) == 0 &&
               gpp_tensor_alloc(be, GPP_DTYPE_F32, 1, m, out, &dy, &err) == 0);
    GPP_EXPECT(gpp_stream_copy(st, dx.data, x, (size_t)(m * in) * 4, GPP_COPY_H2D, &err) == 0 &&
               gpp_stream_copy(st, dw.data, w, (size_t)(out * in) * 4, GPP_COPY_H2D, &err) == 0 &&
               gpp_linear_fwd(st, &dx, &dw, NULL, &dy, &err) == 0 &&
               gpp_stream_copy(st, y, dy.data, (size_t)(m * out) * 4, GPP_COPY_D2H, &err) == 0 &&
               gpp_stream_sync(st, &err) == 0);
    gpp_tensor_free(be, &dx);
    gpp_tensor_free(be, &dw);
    gpp_tensor_free(be, &dy);
    gpp_stream_destroy(&st);
    gpp_backend_destroy(&be);
}

static void t_bf16_weights_kept(void)
{
    gpp_err_t err;
    enum { M = 32, IN = 64, OUT = 48 };
    static float x[M * IN], w[OUT * IN], g[OUT * IN], y[M * OUT], want[M * OUT];
    for (int i = 0; i < M * IN; i++)
        x[i] = s_uniform();
    for (int i = 0; i < OUT * IN; i++)
        w[i] = s_uniform(), g[i] = s_uniform();
    gpp_stream_t *st;
    gpp_backend_t *be = s_packed_backend(&st);
    if (!st) {
        gpp_backend_destroy(&be);
        return;
    }
    gpp_tensor_t dx, dw, dy, dg;
    GPP_EXPECT(gpp_tensor_alloc(be, GPP_DTYPE_F32, 1, M, IN, &dx, &err) == 0 &&
               gpp_tensor_alloc(be, GPP_DTYPE_F32, 1, OUT, IN, &dw, &err) == 0 &&
               gpp_tensor_alloc(be, GPP_DTYPE_F32, 1, OUT, IN, &dg, &err) == 0 &&
               gpp_tensor_alloc(be, GPP_DTYPE_F32, 1, M, OUT, &dy, &err) == 0);
    GPP_EXPECT(gpp_stream_copy(st, dx.data, x, sizeof x, GPP_COPY_H2D, &err) == 0 &&
               gpp_stream_copy(st, dw.data, w, sizeof w, GPP_COPY_H2D, &err) == 0 &&
               gpp_stream_copy(st, dg.data, g, sizeof g, GPP_COPY_H2D, &err) == 0);
    gpp_optim_hp_t hp = {.kind = GPP_OPTIM_SGD, .lr = 0.25f};
    gpp_optim_state_t *os = gpp_optim_state_new(st, hp.kind, OUT * IN, &err);
    GPP_EXPECT(os != NULL);
    static const char *steps[] = {"first product", "same weight again", "weight copied over",
                                  "optimizer step on the weight", "weight zeroed"};
    for (int k = 0; k < 5 && os; k++) {
        if (k == 2) {
            for (int i = 0; i < OUT * IN; i++)
                w[i] = s_uniform();
            GPP_EXPECT(gpp_stream_copy(st, dw.data, w, sizeof w, GPP_COPY_H2D, &err) == 0);
        } else if (k == 3) {
            GPP_EXPECT(gpp_optim_step(st, os, &hp, 1, &dw, &dg, &err) == 0);
        } else if (k == 4) {
            GPP_EXPECT(gpp_stream_zero(st, dw.data, sizeof w, &err) == 0);
        }
        GPP_EXPECT(gpp_stream_copy(st, w, dw.data, sizeof w, GPP_COPY_D2H, &err) == 0 &&
                   gpp_linear_fwd(st, &dx, &dw, NULL, &dy, &err) == 0 &&
                   gpp_stream_copy(st, y, dy.data, sizeof y, GPP_COPY_D2H, &err) == 0 &&
                   gpp_stream_sync(st, &err) == 0);
        s_packed_fresh(M, IN, OUT, x, w, want);
        int same = memcmp(y, want, sizeof y) == 0;
        printf("  bf16 packed, weight kept: %-30s %s\n", steps[k],
               same ? "bit for bit a fresh rounding's" : "DIFFERS");
        GPP_EXPECT_MSG(same, "%s: a stale bf16 weight", steps[k]);
    }
    gpp_optim_state_destroy(&os);
    gpp_tensor_free(be, &dx);
    gpp_tensor_free(be, &dw);
    gpp_tensor_free(be, &dg);
    gpp_tensor_free(be, &dy);
    gpp_stream_destroy(&st);
    gpp_backend_destroy(&be);
}

static void t_activations(void)
{
    /* act 0 relu, 1 gelu (tanh form), 2 gelu (erf form) */
    /* 924 elements: 4 a thread and step; 165: 41 steps of 4 and one scalar */
    static const char *const names[] = {"relu", "gelu tanh", "gelu erf"};
    for (int act = 0; act < 6; act++) {
        int64_t n = act < 3 ? 4 : 3, r = act < 3 ? 7 : 5, c = act < 3 ? 33 : 11;
        pt_t *x = s_arand(n, r, c, 4), *y = s_azero(n, r, c);
        pt_t *dy = s_arand(n, r, c, 1), *dx = s_afill(n, r, c, GRAD_INIT);
        gpp_gelu_form_t form = act % 3 == 2 ? GPP_GELU_ERF : GPP_GELU_TANH;
        if (act % 3) {
            BOTH(gpp_gelu_fwd(S, T(x), form, T(y), err));
            BOTH(gpp_gelu_bwd(S, T(x), form, T(dy), T(dx), err));
        } else {
            BOTH(gpp_relu_fwd(S, T(x), T(y), err));
            BOTH(gpp_relu_bwd(S, T(x), T(dy), T(dx), err));
        }
        char what[64];
        snprintf(what, sizeof what, "%s fwd y", names[act % 3]);
        s_close(what, y);
        snprintf(what, sizeof what, "%s bwd dx", names[act % 3]);
        s_close(what, dx);
        s_free_all();
    }
}

/* n x rows rows of c columns; 18 rows: one chunk of the gain / bias
 * reduction, 3 x 110: six chunks, the last one short (gpp_cuda_rows.cu) */
static void s_layernorm(int64_t n, int64_t rows, int64_t c)
{
    char what[64];
    pt_t *x = s_arand(n, rows, c, 2), *g = s_rand(1, 1, c, 1), *b = s_rand(1, 1, c, 1);
    pt_t *y = s_azero(n, rows, c), *dy = s_arand(n, rows, c, 1);
    pt_t *st = s_pt(GPP_DTYPE_F32, 1, 1, 2 * n * rows, NULL);
    pt_t *dx = s_afill(n, rows, c, GRAD_INIT), *dg = s_fill(1, 1, c, GRAD_INIT);
    pt_t *db = s_fill(1, 1, c, GRAD_INIT);
    BOTH(gpp_layernorm_fwd(S, T(x), T(g), T(b), T(y), T(st)->data, err));
    BOTH(gpp_layernorm_bwd(S, T(x), T(g), T(st)->data, T(dy), T(dx), T(dg), T(db), err));
    const char *part[] = {"fwd y", "bwd dx", "bwd dgain", "bwd dbias"};
    pt_t *out[] = {y, dx, dg, db};
    for (int i = 0; i < 4; i++) {
        snprintf(what, sizeof what, "layernorm %lld rows %s", (long long)(n * rows), part[i]);
        s_close(what, out[i]);
    }
    s_free_all();
}
static void t_layernorm(void)
{
    s_layernorm(3, 6, 80);
    s_layernorm(3, 110, 40);
}

/* causal: the masked softmax on both backends (scores j > i dropped).
 * Shapes: head size 8 (the fused core's tier 16, padded) and 64 (tier 64,
 * two threads a row, seq 70 over two row blocks and two key tiles). */
static void s_attention(int64_t n, int64_t seq, int64_t hid, int heads, int causal)
{
    char what[96];
    pt_t *x = s_arand(n, seq, hid, 1), *y = s_azero(n, seq, hid);
    pt_t *wq = s_rand(1, 3 * hid, hid, 0.3f), *bq = s_rand(1, 1, 3 * hid, 0.1f);
    pt_t *wo = s_rand(1, hid, hid, 0.3f), *bo = s_rand(1, 1, hid, 0.1f);
    pt_t *dy = s_arand(n, seq, hid, 1), *dx = s_afill(n, seq, hid, GRAD_INIT);
    pt_t *dwq = s_fill(1, 3 * hid, hid, GRAD_INIT), *dbq = s_fill(1, 1, 3 * hid, GRAD_INIT);
    pt_t *dwo = s_fill(1, hid, hid, GRAD_INIT), *dbo = s_fill(1, 1, hid, GRAD_INIT);
    size_t stash_floats = gpp_attention_stash_bytes(n, seq, hid, heads) / sizeof(float);
    pt_t *st = s_pt(GPP_DTYPE_F32, 1, 1, (int64_t)stash_floats, NULL);
    /* the GPU side gets exactly the stash its backend asks for (fused core:
     * no probabilities), then guard values that must survive */
    enum { GUARD = 64 };
    size_t gbytes = gpp_backend_attention_stash_bytes(s_gbe, n, seq, hid, heads);
    GPP_EXPECT(gbytes <= stash_floats * sizeof(float) && gbytes % sizeof(float) == 0);
    float guard[GUARD], back[GUARD];
    for (int i = 0; i < GUARD; i++)
        guard[i] = 12345.0f;
    gpp_err_t gerr;
    char *gst = gpp_backend_alloc(s_gbe, gbytes + sizeof guard, &gerr);
    GPP_EXPECT(gst &&
               gpp_stream_copy(s_gs, gst + gbytes, guard, sizeof guard, GPP_COPY_H2D, &gerr) == 0);
    void *stash[2] = {st->c.data, gst};
    gpp_attention_params_t p[2], dp[2];
    for (D = 0; D < 2; D++) {
        p[D] = (gpp_attention_params_t){*T(wq), *T(bq), *T(wo), *T(bo)};
        dp[D] = (gpp_attention_params_t){*T(dwq), *T(dbq), *T(dwo), *T(dbo)};
    }
    BOTH(gpp_attention_fwd(S, T(x), &p[D], heads, causal, T(y), stash[D], err));
    BOTH(gpp_attention_bwd(S, T(x), &p[D], heads, causal, stash[D], T(dy), T(dx), &dp[D], err));
    GPP_EXPECT(gpp_stream_copy(s_gs, back, gst + gbytes, sizeof back, GPP_COPY_D2H, &gerr) == 0 &&
               gpp_stream_sync(s_gs, &gerr) == 0);
    GPP_EXPECT_MSG(memcmp(back, guard, sizeof guard) == 0,
                   "attention wrote past its %zu-byte stash (of %zu on the cpu)", gbytes,
                   stash_floats * sizeof(float));
    printf("  attention dh %lld stash: %zu bytes on %s, %zu on the cpu\n", (long long)(hid / heads),
           gbytes, gpp_backend_name(s_gbe), stash_floats * sizeof(float));
    gpp_backend_free(s_gbe, (void **)&gst);
    static const char *names[] = {"fwd y",      "bwd dx",   "bwd dW_qkv",
                                  "bwd db_qkv", "bwd dW_o", "bwd db_o"};
    const pt_t *outs[] = {y, dx, dwq, dbq, dwo, dbo};
    for (int i = 0; i < 6; i++) {
        snprintf(what, sizeof what, "%sattention dh %lld %s", causal ? "causal " : "",
                 (long long)(hid / heads), names[i]);
        s_close(what, outs[i]);
    }
    s_free_all();
}

static void s_attention_all(void)
{
    for (int causal = 0; causal < 2; causal++) {
        s_attention(2, 12, 32, 4, causal);
        s_attention(2, 70, 128, 2, causal);
        s_attention(2, 9, 30, 5, causal); /* dh 6: no 4-column steps (the permutes' scalar path) */
        s_attention(1, 20, 192, 2, causal); /* dh 96: the fp32 fused core even in bf16 */
    }
}

/* the backend's default core (auto: the unfused one), then the fused fp32
 * core (GPP_CUDA_ATTENTION=fused, gpp_cuda_flash.cuh) */
static void s_attention_on(gpp_precision_t prec, const char *env);
static void t_attention(void)
{
    s_attention_all();
    s_attention_on(GPP_PRECISION_FP32, "fused");
}

/* Runs s_attention_all on a second CUDA backend opened with precision prec
 * and, when env is set, GPP_CUDA_ATTENTION=env. */
static void s_attention_on(gpp_precision_t prec, const char *env)
{
    gpp_err_t err;
    gpp_backend_t *keep_be = s_gbe;
    gpp_stream_t *keep_s = s_gs;
    gpp_backend_cfg_t gc = {.kind = GPP_DEVICE_CUDA, .device = 0, .precision = prec};
    if (env)
        setenv("GPP_CUDA_ATTENTION", env, 1);
    s_gbe = gpp_backend_new(&gc, &err);
    unsetenv("GPP_CUDA_ATTENTION");
    GPP_EXPECT(s_gbe != NULL);
    if (s_gbe && (s_gs = gpp_stream_new(s_gbe, &err)))
        s_attention_all();
    else
        fprintf(stderr, "  %s\n", err.msg);
    gpp_stream_destroy(&s_gs);
    gpp_backend_destroy(&s_gbe);
    s_gbe = keep_be;
    s_gs = keep_s;
}

/* the batched products + softmax core (GPP_CUDA_ATTENTION=unfused); an
 * unknown value is refused at creation, naming the variable */
static void t_attention_unfused(void)
{
    s_attention_on(GPP_PRECISION_FP32, "unfused");
    s_expect_env_refused("GPP_CUDA_ATTENTION", "flash");
}

/* precision bf16: the projections in bf16 compute and (fused) the core on
 * tensor cores (sm_80+) with bf16 q, k, v, dO, P, dS. Bound 5e-2 + 5e-2
 * |cpu| (about 13 units of bf16's 2^-8 at these magnitudes) + 1 % of the
 * tensor's largest |cpu|: a weight or bias gradient sums up to n seq = 70
 * rows of products whose operands are rounded to bf16, so an element that
 * cancels to near 0 keeps an error of order 2^-8 of the sum of the terms'
 * magnitudes (the host emulation, with cuBLASLt's bf16 rounding, measured
 * up to 0.14 on gradients of largest magnitude 42: 0.33 %, the unfused core
 * as the fused one). It still catches a wrong tile or mask (errors of the
 * tensor's own magnitude); the kernels' arithmetic is checked to fp32 by
 * test_flash_emu (the same kernels with fp32 elements). */
static void t_attention_bf16(void)
{
    s_atol = s_rtol = 5e-2;
    s_stol = 1e-2;
    s_attention_on(GPP_PRECISION_BF16, "fused");
    s_attention_on(GPP_PRECISION_BF16, NULL); /* auto: unfused over bf16 operands and stash */
    s_attention_on(GPP_PRECISION_BF16, "unfused-fp32"); /* unfused over fp32 operands */
    setenv("GPP_CUDA_BF16_GEMM", "packed", 1);          /* the projections' operands packed too */
    s_attention_on(GPP_PRECISION_BF16, "fused");
    unsetenv("GPP_CUDA_BF16_GEMM");
    s_atol = ATOL;
    s_rtol = RTOL;
    s_stol = 0;
}

/* count, row order and values of two sparse gradients */
static void s_sparse_close(const char *what, gpp_sparse_grad_t *c, gpp_sparse_grad_t *g)
{
    gpp_err_t err;
    GPP_EXPECT(gpp_stream_sync(s_gs, &err) == 0); /* the device count reaches the host */
    int64_t n = gpp_sparse_grad_count(c), dim = gpp_sparse_grad_dim(c);
    GPP_EXPECT_MSG(gpp_sparse_grad_count(g) == n, "%s: %lld touched rows on cuda, %lld on cpu",
                   what, (long long)gpp_sparse_grad_count(g), (long long)n);
    if (gpp_sparse_grad_count(g) != n)
        return;
    int32_t *rows = malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    GPP_EXPECT(gpp_stream_copy(s_gs, rows, gpp_sparse_grad_rows(g), (size_t)n * 4, GPP_COPY_D2H,
                               &err) == 0 &&
               gpp_stream_sync(s_gs, &err) == 0);
    GPP_EXPECT(memcmp(rows, gpp_sparse_grad_rows(c), (size_t)n * 4) == 0);
    free(rows);
    s_close_raw(what, gpp_sparse_grad_values(c), gpp_sparse_grad_values(g), n * dim);
}

static void t_embedding(void)
{
    gpp_err_t err;
    const int64_t rows = 500, dim = 24;
    pt_t *tab = s_rand(1, rows, dim, 1), *idx = s_ints(4, 3, 5, 60); /* repeats within bags */
    pt_t *y = s_azero(4, 3, dim), *dy = s_arand(4, 3, dim, 1);
    gpp_sparse_grad_t *sg[2];
    for (D = 0; D < 2; D++)
        sg[D] = gpp_sparse_grad_new(S, rows, dim, 4, &err); /* small cap: it must grow */
    GPP_EXPECT(sg[0] && sg[1]);
    BOTH(gpp_embedding_bag_fwd(S, T(idx), T(tab), T(y), err));
    s_close("embedding bag fwd y", y);
    /* two micro-batches accumulate into the same rows */
    BOTH(gpp_embedding_bag_bwd(S, T(idx), T(dy), sg[D], err));
    BOTH(gpp_embedding_bag_bwd(S, T(idx), T(dy), sg[D], err));
    s_sparse_close("embedding bag bwd (sparse) values", sg[0], sg[1]);
    /* a peer's pairs (gpp_sparse_grad_add) on top, then clear */
    pt_t *ids = s_ints(1, 1, 30, (int32_t)rows), *vals = s_rand(1, 30, dim, 1);
    BOTH(gpp_sparse_grad_add(S, sg[D], 30, T(ids)->data, T(vals)->data, err));
    s_sparse_close("sparse_grad_add values", sg[0], sg[1]);
    BOTH(gpp_sparse_grad_clear(S, sg[D], err));
    GPP_EXPECT(gpp_stream_sync(s_gs, &err) == 0 && gpp_sparse_grad_count(sg[1]) == 0);
    BOTH(gpp_embedding_bag_bwd(S, T(idx), T(dy), sg[D], err));
    s_sparse_close("after clear, bwd again", sg[0], sg[1]);

    /* a bad index: the CUDA error surfaces at the next synchronisation */
    int32_t bad = (int32_t)rows + 7;
    GPP_EXPECT(gpp_stream_copy(s_gs, idx->g.data, &bad, 4, GPP_COPY_H2D, &err) == 0);
    GPP_EXPECT(gpp_stream_sync(s_gs, &err) == 0);
    int rc = gpp_embedding_bag_fwd(s_gs, &idx->g, &tab->g, &y->g, &err);
    if (rc == 0)
        rc = gpp_stream_sync(s_gs, &err);
    GPP_EXPECT(rc < 0 && strstr(err.msg, "index 507"));
    printf("  bad index reported: %s\n", rc < 0 ? err.msg : "(nothing)");
    GPP_EXPECT(gpp_stream_sync(s_gs, &err) == 0); /* reported once */
    for (D = 0; D < 2; D++)
        gpp_sparse_grad_destroy(&sg[D]);
    s_free_all();
}

/* The device accumulation at sizes that use all of it: a table past 2^16
 * rows (three radix passes), thousands of pairs (many tiles), hot rows
 * repeated hundreds of times and rows seen once, on top of rows already
 * held: the CPU backend's slots, row order and sums bit for bit. Then a
 * peer's pairs with a row id outside the table: reported at the next
 * synchronisation, the gradient's other rows still summed. */
static void t_sparse_accum(void)
{
    gpp_err_t err;
    const int64_t rows = 70001, dim = 20;
    gpp_sparse_grad_t *sg[2];
    for (D = 0; D < 2; D++)
        sg[D] = gpp_sparse_grad_new(S, rows, dim, 0, &err);
    GPP_EXPECT(sg[0] && sg[1]);
    for (int round = 0; round < 3; round++) {
        const int64_t bags = 300 + 211 * round, bag = 7; /* 2100.. pairs */
        int32_t *h = malloc((size_t)(bags * bag) * sizeof(int32_t));
        for (int64_t k = 0; k < bags * bag; k++) {
            float u = (s_uniform() + 1.0f) * 0.5f;
            /* a third of the pairs on 8 hot rows, the rest anywhere */
            h[k] = k % 3 == 0 ? (int32_t)(u * 8) % 8 * 8191 : (int32_t)(u * (float)rows) % rows;
        }
        pt_t *idx = s_pt(GPP_DTYPE_I32, bags, 1, bag, h), *dy = s_rand(bags, 1, dim, 1);
        free(h);
        BOTH(gpp_embedding_bag_bwd(S, T(idx), T(dy), sg[D], err));
        char what[64];
        snprintf(what, sizeof what, "sparse accumulation round %d", round);
        s_sparse_close(what, sg[0], sg[1]);
        /* bit for bit: the same sums in the same order */
        int64_t n = gpp_sparse_grad_count(sg[0]);
        float *v = malloc((size_t)(n * dim + 1) * sizeof(float));
        GPP_EXPECT(gpp_stream_copy(s_gs, v, gpp_sparse_grad_values(sg[1]),
                                   (size_t)(n * dim) * sizeof(float), GPP_COPY_D2H, &err) == 0 &&
                   gpp_stream_sync(s_gs, &err) == 0);
        GPP_EXPECT_MSG(memcmp(v, gpp_sparse_grad_values(sg[0]), (size_t)(n * dim) * 4) == 0,
                       "%s: values not bit for bit the CPU's", what);
        printf("  %s: %lld rows held, bit for bit the cpu's\n", what, (long long)n);
        free(v);
        s_free_all();
    }
    /* a bad row id from a peer */
    int32_t ids_h[5] = {3, 70001, 5, 3, -2};
    pt_t *ids = s_pt(GPP_DTYPE_I32, 1, 1, 5, ids_h), *vals = s_rand(1, 5, dim, 1);
    int64_t before = gpp_sparse_grad_count(sg[1]);
    int rc = gpp_sparse_grad_add(s_gs, sg[1], 5, ids->g.data, vals->g.data, &err);
    if (rc == 0)
        rc = gpp_stream_sync(s_gs, &err);
    GPP_EXPECT(rc < 0 && strstr(err.msg, "row id") && strstr(err.msg, "70001"));
    printf("  bad row id reported: %s\n", rc < 0 ? err.msg : "(nothing)");
    GPP_EXPECT(gpp_stream_sync(s_gs, &err) == 0); /* reported once */
    GPP_EXPECT(gpp_sparse_grad_count(sg[1]) >= before);
    for (D = 0; D < 2; D++)
        gpp_sparse_grad_destroy(&sg[D]);
    s_free_all();
}

/* add and axpy over 30 elements: 7 steps of 4 and 2 scalar ones */
static void s_add_axpy(void)
{
    pt_t *a = s_arand(2, 3, 5, 1), *da = s_arand(2, 3, 5, 1);
    pt_t *p = s_arand(2, 3, 5, 1), *q = s_azero(2, 3, 5);
    pt_t *dp = s_afill(2, 3, 5, GRAD_INIT), *dq = s_afill(2, 3, 5, GRAD_INIT);
    BOTH(gpp_add_fwd(S, T(a), T(p), T(q), err));
    BOTH(gpp_add_bwd(S, T(da), T(dp), T(dq), err));
    BOTH(gpp_axpy(S, -0.75f, T(p), T(q), err));
    s_close("add fwd + axpy", q);
    s_close("add bwd da", dp);
    s_close("add bwd db", dq);
    s_free_all();
}

static void t_concat_add_axpy(void)
{
    pt_t *a = s_arand(2, 3, 5, 1), *b = s_arand(2, 3, 7, 1), *c = s_arand(2, 3, 4, 1);
    pt_t *y = s_azero(2, 3, 16), *dy = s_arand(2, 3, 16, 1);
    pt_t *da = s_afill(2, 3, 5, GRAD_INIT), *dc = s_afill(2, 3, 4, GRAD_INIT);
    const gpp_tensor_t *xs[2][3];
    gpp_tensor_t *dxs[2][3];
    for (D = 0; D < 2; D++) {
        xs[D][0] = T(a), xs[D][1] = T(b), xs[D][2] = T(c);
        dxs[D][0] = T(da), dxs[D][1] = NULL, dxs[D][2] = T(dc); /* b needs no gradient */
    }
    BOTH(gpp_concat_fwd(S, 3, xs[D], T(y), err));
    BOTH(gpp_concat_bwd(S, 3, T(dy), dxs[D], err));
    s_close("concat fwd y", y);
    s_close("concat bwd (split) d0", da);
    s_close("concat bwd (split) d2", dc);
    s_free_all();
    s_add_axpy();
}

/* two overlapping slices of x [2, 3, 9]: the backward accumulates */
static void t_slice(void)
{
    pt_t *x = s_arand(2, 3, 9, 1), *a = s_azero(2, 3, 4);
    pt_t *b = s_azero(2, 3, 6), *dx = s_afill(2, 3, 9, GRAD_INIT);
    pt_t *da = s_arand(2, 3, 4, 1), *db = s_arand(2, 3, 6, 1);
    BOTH(gpp_slice_fwd(S, T(x), 5, T(a), err));
    BOTH(gpp_slice_fwd(S, T(x), 1, T(b), err));
    BOTH(gpp_slice_bwd(S, T(da), 5, T(dx), err));
    BOTH(gpp_slice_bwd(S, T(db), 1, T(dx), err));
    s_close("slice fwd [5, 9)", a);
    s_close("slice fwd [1, 7)", b);
    s_close("slice bwd, overlapping", dx);
    s_free_all();
}

/* x [2, 3, 8] as [2, 4, 6] and back: a copy; the backward accumulates */
static void t_reshape(void)
{
    pt_t *x = s_arand(2, 3, 8, 1), *y = s_azero(2, 4, 6);
    pt_t *dy = s_arand(2, 4, 6, 1), *dx = s_afill(2, 3, 8, GRAD_INIT);
    BOTH(gpp_reshape_fwd(S, T(x), T(y), err));
    BOTH(gpp_reshape_bwd(S, T(dy), T(dx), err));
    s_close("reshape fwd", y);
    s_close("reshape bwd", dx);
    s_free_all();
}

static void t_losses(void)
{
    pt_t *x = s_arand(3, 4, 9, 2), *t = s_rand(3, 4, 9, 2), *dx = s_afill(3, 4, 9, GRAD_INIT);
    pt_t *loss = s_pt(GPP_DTYPE_F32, 1, 1, 1, NULL);
    BOTH(gpp_loss_mse(S, T(x), T(t), T(loss)->data, 0.25f, T(dx), err));
    s_close("mse loss", loss);
    s_close("mse dx", dx);
    pt_t *lab = s_ints(3, 4, 1, 9), *dz = s_afill(3, 4, 9, GRAD_INIT);
    BOTH(gpp_loss_ce(S, T(x), T(lab), T(loss)->data, 0.5f, T(dz), err));
    s_close("cross-entropy loss", loss);
    s_close("cross-entropy dx", dz);
    s_free_all();
}

static void t_optimizers(void)
{
    gpp_err_t err;
    const int64_t n = 3000;
    gpp_optim_hp_t hps[3] = {
        {.kind = GPP_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f},
        {.kind = GPP_OPTIM_SGD, .lr = 0.05f},
        {.kind = GPP_OPTIM_ADAMW,
         .lr = 1e-3f,
         .weight_decay = 0.1f,
         .beta1 = 0.9f,
         .beta2 = 0.999f,
         .eps = 1e-8f}};
    const char *names[3] = {"sgd momentum+wd", "sgd plain", "adamw"};
    for (int h = 0; h < 3; h++) {
        const gpp_optim_hp_t *hp = &hps[h];
        /* dense: three steps */
        pt_t *p = s_rand(1, 1, n, 1), *g = s_rand(1, 1, n, 1);
        gpp_optim_state_t *st[2];
        for (D = 0; D < 2; D++)
            st[D] = gpp_optim_state_new(S, hp->kind, n, &err);
        for (int64_t step = 1; step <= 3; step++)
            BOTH(gpp_optim_step(S, st[D], hp, step, T(p), T(g), err));
        char what[64];
        snprintf(what, sizeof what, "%s dense param", names[h]);
        s_close(what, p);
        snprintf(what, sizeof what, "%s dense state 0", names[h]);
        s_close_raw(what, gpp_optim_state_buf(st[0], 0), gpp_optim_state_buf(st[1], 0), n);
        for (D = 0; D < 2; D++)
            gpp_optim_state_destroy(&st[D]);
        /* sparse: a (200, w) table, 2 steps with different touched rows; w
         * 260 for adamw: rows wider than a block's 256 threads (the row
         * kernels' column loop) */
        const int64_t w = h == 2 ? 260 : 16;
        pt_t *tab = s_rand(1, 200, w, 1), *idx = s_ints(2, 3, 4, 200), *dy = s_rand(2, 3, w, 1);
        gpp_sparse_grad_t *sg[2];
        for (D = 0; D < 2; D++) {
            st[D] = gpp_optim_state_new(S, hp->kind, 200 * w, &err);
            sg[D] = gpp_sparse_grad_new(S, 200, w, 0, &err);
        }
        for (int64_t step = 1; step <= 2; step++) {
            BOTH(gpp_embedding_bag_bwd(S, T(idx), T(dy), sg[D], err));
            BOTH(gpp_optim_step_sparse(S, st[D], hp, step, T(tab), sg[D], err));
            BOTH(gpp_sparse_grad_clear(S, sg[D], err));
            idx = s_ints(2, 3, 4, 200);
        }
        snprintf(what, sizeof what, "%s sparse table", names[h]);
        s_close(what, tab);
        for (D = 0; D < 2; D++) {
            gpp_optim_state_destroy(&st[D]);
            gpp_sparse_grad_destroy(&sg[D]);
        }
        s_free_all();
    }
}

/* The caching allocator: once a size has been freed, allocating it again
 * calls no cudaMalloc. */
static void t_allocator_reuse(void)
{
    gpp_err_t err;
    gpp_backend_cache_t m0, m1;
    gpp_backend_mem_t mem;
    GPP_EXPECT(gpp_backend_cache_stats(s_gbe, &m0) == 1);
    void *p[8];
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 8; i++)
            GPP_EXPECT((p[i] = gpp_backend_alloc(s_gbe, (size_t)(1000 + 777 * i), &err)) != NULL);
        for (int i = 0; i < 8; i++)
            gpp_backend_free(s_gbe, &p[i]);
        if (round == 0)
            GPP_EXPECT(gpp_backend_cache_stats(s_gbe, &m0) == 1);
    }
    GPP_EXPECT(gpp_backend_cache_stats(s_gbe, &m1) == 1);
    gpp_backend_mem(s_gbe, &mem);
    printf("  allocator: %llu cudaMalloc calls before rounds 2-3, %llu after; peak %zu bytes\n",
           (unsigned long long)m0.device_allocs, (unsigned long long)m1.device_allocs,
           (size_t)mem.peak_bytes);
    GPP_EXPECT(m1.device_allocs == m0.device_allocs && mem.peak_bytes >= mem.live_bytes);
    GPP_EXPECT(m1.reserved_bytes >= (size_t)mem.live_bytes);
}

static void t_linear(void);
static void t_linear_act(void);
static void t_activations(void);
static void t_layernorm(void);
static void t_concat_add_axpy(void);
static void t_slice(void);
static void t_reshape(void);
static void t_losses(void);
static void t_embedding(void);

/* bf16 tensors (gpp_backend_act_bf16): on a backend at precision bf16, the
 * ops that take bf16 activations run the cases above with their inputs,
 * outputs and gradients in bf16 (every one, then every other one: each op
 * with mixed element types), against the CPU on the same bf16-rounded
 * values. Tolerance of the products as t_attention_bf16's: their fp32
 * operands (weights) are rounded to bf16 and every bf16 result too (2^-8
 * relative each), so an element that cancels keeps an error of order 2^-8
 * of its terms' magnitudes; a wrong element type, index or accumulation is
 * of the tensor's own magnitude. The element-wise ops, layer norm, the
 * copies, the losses and the embedding bag are held to their roundings
 * (s_bf16_bodies). Also: fp32, and bf16 without bf16_tensors (the
 * default), say no op takes bf16; data and opaque ops take none. */
static void s_bf16_bodies(void)
{
    s_atol = s_rtol = 5e-2;
    s_stol = 1e-2;
    t_linear();
    t_linear_act();
    s_attention_all();
    /* element-wise and layer norm over the same bf16 inputs: each bf16
     * result is the fp32 one rounded to nearest (bf16's unit roundoff
     * 2^-8), an accumulated gradient or add + axpy rounded twice, the
     * second time relative to the intermediate (at most the tensor's
     * largest) */
    s_atol = 0;
    s_rtol = 1.0 / 128;
    s_stol = 1.0 / 256;
    t_activations();
    t_layernorm();
    t_concat_add_axpy(); /* copies exact, the gradients accumulated as above */
    t_slice();
    t_reshape();
    t_losses();    /* the loss in fp32 from the same bf16 inputs, dx rounded */
    t_embedding(); /* y rounded once; the sparse sums of the same bf16 dy bit for bit */
}
static void t_bf16_tensors(void)
{
    gpp_err_t err;
    gpp_backend_t *keep_be = s_gbe;
    gpp_stream_t *keep_s = s_gs;
    gpp_backend_cfg_t gc = {.kind = GPP_DEVICE_CUDA, .device = 0, .precision = GPP_PRECISION_BF16};
    GPP_EXPECT(!gpp_backend_act_bf16(keep_be, GPP_OP_LINEAR)); /* fp32 */
    gpp_backend_t *off = gpp_backend_new(&gc, &err); /* bf16_tensors off: the default */
    GPP_EXPECT(off && !gpp_backend_act_bf16(off, GPP_OP_LINEAR));
    gpp_backend_destroy(&off);
    gc.bf16_tensors = 1;
    s_gbe = gpp_backend_new(&gc, &err);
    GPP_EXPECT_MSG(s_gbe != NULL, "%s", err.msg);
    if (s_gbe && (s_gs = gpp_stream_new(s_gbe, &err))) {
        static const gpp_op_type_t yes[] = {
            GPP_OP_LINEAR,    GPP_OP_RELU,      GPP_OP_GELU,    GPP_OP_ADD,
            GPP_OP_LAYERNORM, GPP_OP_ATTENTION, GPP_OP_CONCAT,  GPP_OP_SLICE,
            GPP_OP_RESHAPE,   GPP_OP_LOSS_MSE,  GPP_OP_LOSS_CE, GPP_OP_EMBEDDING_BAG};
        static const gpp_op_type_t no[] = {GPP_OP_INPUT, GPP_OP_OPAQUE};
        for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
            GPP_EXPECT(gpp_backend_act_bf16(s_gbe, yes[i]));
        for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
            GPP_EXPECT(!gpp_backend_act_bf16(s_gbe, no[i]));
        for (s_act16 = 1; s_act16 <= 2; s_act16++) {
            printf("  -- %s activations in bf16\n", s_act16 == 1 ? "all" : "every other");
            s_act16_count = 0;
            s_bf16_bodies();
        }
        /* the fused cores (GPP_CUDA_ATTENTION=fused: on tensor cores at head
           sizes <= 64, the fp32 core beyond; either one's kernels then read
           and write bf16 qkv, ctx, dctx and dqkv) over bf16 tensors, every
           one and every other one */
        gpp_stream_destroy(&s_gs);
        gpp_backend_destroy(&s_gbe);
        setenv("GPP_CUDA_ATTENTION", "fused", 1);
        s_gbe = gpp_backend_new(&gc, &err);
        unsetenv("GPP_CUDA_ATTENTION");
        GPP_EXPECT_MSG(s_gbe && (s_gs = gpp_stream_new(s_gbe, &err)), "%s", err.msg);
        s_atol = s_rtol = 5e-2;
        s_stol = 1e-2;
        for (s_act16 = 1; s_gs && s_act16 <= 2; s_act16++) {
            printf("  -- fused attention, %s activations in bf16\n",
                   s_act16 == 1 ? "all" : "every other");
            s_act16_count = 0;
            s_attention_all();
        }
        /* where cuBLASLt has no algorithm with the bias epilogue for a
           product's types (the emulation refuses them all on request;
           a device answers for itself), the product then a bias kernel */
        setenv("GPP_EMU_LT_NO_BIAS_EPILOGUE", "1", 1);
        gpp_stream_destroy(&s_gs);
        gpp_backend_destroy(&s_gbe);
        s_gbe = gpp_backend_new(&gc, &err);
        GPP_EXPECT_MSG(s_gbe && (s_gs = gpp_stream_new(s_gbe, &err)), "%s", err.msg);
        if (s_gs) { /* (the heuristic runs at each product's first call) */
            printf("  -- bias without cuBLASLt's epilogue, activations in bf16\n");
            s_act16 = 1;
            s_atol = s_rtol = 5e-2;
            s_stol = 1e-2;
            t_linear();
            t_linear_act();
        }
        unsetenv("GPP_EMU_LT_NO_BIAS_EPILOGUE");
        s_act16 = 0;
        s_atol = ATOL;
        s_rtol = RTOL;
        s_stol = 0;
    }
    gpp_stream_destroy(&s_gs);
    gpp_backend_destroy(&s_gbe);
    s_gbe = keep_be;
    s_gs = keep_s;
}

static const gpp_test_case_t cases[] = {
    {"linear", t_linear},
    {"linear_act", t_linear_act},
    {"linear_tf32", t_linear_tf32},
    {"linear_bf16", t_linear_bf16},
    {"pack_bf16", t_pack_bf16},
    {"linear_bf16_packed", t_linear_bf16_packed},
    {"bf16_weights_kept", t_bf16_weights_kept},
    {"activations", t_activations},
    {"layernorm", t_layernorm},
    {"attention", t_attention},
    {"attention_unfused", t_attention_unfused},
    {"attention_bf16", t_attention_bf16},
    {"bf16_tensors", t_bf16_tensors},
    {"embedding_sparse", t_embedding},
    {"sparse_accum", t_sparse_accum},
    {"concat_add_axpy", t_concat_add_axpy},
    {"slice", t_slice},
    {"reshape", t_reshape},
    {"losses", t_losses},
    {"optimizers", t_optimizers},
    {"allocator_reuse", t_allocator_reuse},
    {NULL, NULL},
};

int main(void)
{
    gpp_err_t err;
    gpp_backend_cfg_t gc = {.kind = GPP_DEVICE_CUDA, .device = 0};
    if (!(s_gbe = gpp_backend_new(&gc, &err))) {
        printf("test_cuda_ops: SKIPPED: %s\n", err.msg);
        return SKIP;
    }
    gpp_backend_cfg_t cc = {.kind = GPP_DEVICE_CPU, .cpu_threads = 1};
    if (!(s_cbe = gpp_backend_new(&cc, &err)) || !(s_cs = gpp_stream_new(s_cbe, &err)) ||
        !(s_gs = gpp_stream_new(s_gbe, &err))) {
        fprintf(stderr, "test_cuda_ops: %s\n", err.msg);
        return 1;
    }
    printf("test_cuda_ops: %s vs cpu, fp32, tolerance %g + %g |cpu|\n", gpp_backend_name(s_gbe),
           ATOL, RTOL);
    int rc = gpp_test_run(cases);
    gpp_stream_destroy(&s_gs);
    gpp_stream_destroy(&s_cs);
    gpp_backend_destroy(&s_gbe);
    gpp_backend_destroy(&s_cbe);
    return rc;
}
