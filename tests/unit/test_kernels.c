/* test_kernels: CPU backend and every op's forward and backward.
 *
 * Forward: a small case per op computed by hand (values in the comments).
 * Backward: central finite differences of the scalar L = sum(y * r), r a
 * fixed random weighting, so dL/dy = r is fed as dy. The forward runs in
 * fp32; L is summed in double; step h = 1e-2 (inputs are kept away from
 * ReLU's kink by more than h). Tolerance per element:
 *     |analytic - numeric| <= 5e-4 + 5e-3 |numeric|
 * which covers fp32 rounding of L / (2h) (~1e-4 here) and the O(h^2)
 * truncation error; the max abs / rel differences are printed per op and
 * tensor. Every gradient buffer starts at 0.5, and 0.5 is subtracted before
 * the comparison, so the checks also verify the accumulate (+=) contract.
 * Determinism: fwd + bwd twice on larger shapes with 2 OpenBLAS threads,
 * outputs and gradients compared with memcmp.
 *
 * Device memory of the CPU backend is host memory, so the test reads and
 * writes tensors directly. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gpp_cpu.h" /* gpp_cpu_expf */
#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_sparse.h"
#include "tests/gpp_test.h"

#define GC_H 1e-2
#define GC_ATOL 5e-4
#define GC_RTOL 5e-3
#define GRAD_INIT 0.5f

static gpp_backend_t *s_be;
static gpp_stream_t *s_st;

/* ---- tensors: an arena freed after each case ---- */

#define ARENA_MAX 128
static void *s_arena[ARENA_MAX];
static int s_arena_n;

static gpp_tensor_t s_new(gpp_dtype_t dt, int64_t n, int64_t rows, int64_t cols)
{
    gpp_tensor_t t;
    gpp_err_t err;
    int rc = gpp_tensor_alloc(s_be, dt, n, rows, cols, &t, &err);
    GPP_EXPECT(rc == 0);
    if (rc < 0)
        abort();
    if (s_arena_n == ARENA_MAX)
        abort();
    s_arena[s_arena_n++] = t.data;
    memset(t.data, 0, gpp_tensor_bytes(&t));
    return t;
}

static void s_arena_free(void)
{
    while (s_arena_n > 0)
        gpp_backend_free(s_be, &s_arena[--s_arena_n]);
}

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;
/* uniform in [-1, 1) */
static float s_uniform(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (float)((double)(s_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static gpp_tensor_t s_rand(int64_t n, int64_t rows, int64_t cols, float scale)
{
    gpp_tensor_t t = s_new(GPP_DTYPE_F32, n, rows, cols);
    float *p = t.data;
    for (int64_t i = 0; i < gpp_tensor_numel(&t); i++)
        p[i] = scale * s_uniform();
    return t;
}

/* a gradient buffer shaped like t, filled with GRAD_INIT */
static gpp_tensor_t s_grad(const gpp_tensor_t *t)
{
    gpp_tensor_t g = s_new(GPP_DTYPE_F32, t->n, t->rows, t->cols);
    for (int64_t i = 0; i < gpp_tensor_numel(&g); i++)
        ((float *)g.data)[i] = GRAD_INIT;
    return g;
}

static gpp_tensor_t s_from(int64_t n, int64_t rows, int64_t cols, const float *v)
{
    gpp_tensor_t t = s_new(GPP_DTYPE_F32, n, rows, cols);
    memcpy(t.data, v, gpp_tensor_bytes(&t));
    return t;
}

static void s_expect_vals(const char *what, const gpp_tensor_t *t, const float *want, double tol)
{
    const float *p = t->data;
    double maxd = 0;
    for (int64_t i = 0; i < gpp_tensor_numel(t); i++) {
        double d = fabs((double)p[i] - want[i]);
        maxd = d > maxd ? d : maxd;
        GPP_EXPECT_MSG(d <= tol, "%s[%lld] = %.7g, want %.7g", what, (long long)i, p[i], want[i]);
    }
    printf("  %-28s forward vs hand values: max abs diff %.3g (tol %.0e)\n", what, maxd, tol);
}

/* ---- finite-difference gradient check ---- */

typedef struct {
    const char *name;
    float *x; /* values perturbed */
    int64_t n;
    const float *g; /* analytic gradient, GRAD_INIT + dL/dx */
} gc_var_t;

typedef void (*gc_fwd_t)(void *ctx);

static double s_objective(gc_fwd_t fwd, void *ctx, const gpp_tensor_t *y, const float *r)
{
    fwd(ctx);
    double l = 0;
    const float *yp = y->data;
    for (int64_t i = 0; i < gpp_tensor_numel(y); i++)
        l += (double)yp[i] * r[i];
    return l;
}

static void s_gradcheck(const char *op, gc_fwd_t fwd, void *ctx, const gpp_tensor_t *y,
                        const float *r, const gc_var_t *vars, int nvars)
{
    for (int v = 0; v < nvars; v++) {
        double max_abs = 0, max_rel = 0;
        int bad = 0;
        for (int64_t i = 0; i < vars[v].n; i++) {
            float keep = vars[v].x[i];
            vars[v].x[i] = keep + (float)GC_H;
            double lp = s_objective(fwd, ctx, y, r);
            vars[v].x[i] = keep - (float)GC_H;
            double lm = s_objective(fwd, ctx, y, r);
            vars[v].x[i] = keep;
            double num = (lp - lm) / (2 * GC_H);
            double ana = (double)vars[v].g[i] - GRAD_INIT;
            double d = fabs(ana - num);
            double rel = d / (fabs(num) > 1e-6 ? fabs(num) : 1e-6);
            max_abs = d > max_abs ? d : max_abs;
            if (fabs(num) > 1e-3)
                max_rel = rel > max_rel ? rel : max_rel;
            if (d > GC_ATOL + GC_RTOL * fabs(num) && bad++ < 3)
                fprintf(stderr, "  %s d%s[%lld]: analytic %.6g numeric %.6g\n", op, vars[v].name,
                        (long long)i, ana, num);
        }
        fwd(ctx); /* restore y for the next variable's objective */
        printf("  %-12s d%-8s vs finite differences: max abs diff %.3g, max rel diff %.3g "
               "(tol %.0e + %.0e |ref|)\n",
               op, vars[v].name, max_abs, max_rel, GC_ATOL, GC_RTOL);
        GPP_EXPECT_MSG(bad == 0, "%s d%s: %d elements beyond tolerance", op, vars[v].name, bad);
    }
}

/* dy = r: the weights of the objective */
static gpp_tensor_t s_weights_like(const gpp_tensor_t *y)
{
    return s_rand(y->n, y->rows, y->cols, 1.0f);
}

#define VAR(nm, t, gt)                                                                             \
    {                                                                                              \
        nm, (float *)(t).data, gpp_tensor_numel(&(t)), (const float *)(gt).data                    \
    }

/* ---- backend ---- */

static void t_backend_memory_events(void)
{
    gpp_err_t err;
    /* cuda: opens a GPU where there is one; elsewhere a message, never a CPU backend */
    gpp_backend_cfg_t cuda = {.kind = GPP_DEVICE_CUDA};
    gpp_backend_t *gpu = gpp_backend_new(&cuda, &err);
    GPP_EXPECT(gpu ? gpp_backend_kind(gpu) == GPP_DEVICE_CUDA
                   : strstr(err.msg, "backend cuda:0: ") != NULL);
    gpp_backend_destroy(&gpu);
    GPP_EXPECT(strcmp(gpp_backend_name(s_be), "cpu") == 0);
    GPP_EXPECT(gpp_backend_kind(s_be) == GPP_DEVICE_CPU);
    GPP_EXPECT(gpp_stream_backend(s_st) == s_be);

    float host[5] = {1, 2, 3, 4, 5}, back[5] = {0};
    void *dev = gpp_backend_alloc(s_be, sizeof host, &err);
    GPP_EXPECT(dev && ((uintptr_t)dev % 64) == 0);
    GPP_EXPECT(gpp_stream_copy(s_st, dev, host, sizeof host, GPP_COPY_H2D, &err) == 0);
    gpp_event_t *ev = gpp_event_new(s_be, &err);
    GPP_EXPECT(ev && gpp_event_query(ev, &err) == 1);
    GPP_EXPECT(gpp_event_record(ev, s_st, &err) == 0);
    GPP_EXPECT(gpp_event_wait(ev, s_st, &err) == 0);
    GPP_EXPECT(gpp_stream_copy(s_st, back, dev, sizeof back, GPP_COPY_D2H, &err) == 0);
    GPP_EXPECT(gpp_event_sync(ev, &err) == 0 && gpp_event_query(ev, &err) == 1);
    GPP_EXPECT(gpp_stream_sync(s_st, &err) == 0);
    GPP_EXPECT(memcmp(host, back, sizeof host) == 0);
    GPP_EXPECT(gpp_stream_zero(s_st, dev, sizeof host, &err) == 0);
    GPP_EXPECT(((float *)dev)[4] == 0.0f);
    gpp_event_destroy(&ev);
    GPP_EXPECT(ev == NULL);

    /* timed events: the host clock at record on the CPU backend (every call
       has completed by then), so elapsed is >= 0 and adds up over a chain */
    GPP_EXPECT(strcmp(gpp_backend_device_name(s_be), "cpu") == 0);
    GPP_EXPECT(gpp_backend_precision(s_be) == GPP_PRECISION_FP32);
    gpp_event_t *t0 = gpp_event_new_timed(s_be, &err), *t1 = gpp_event_new_timed(s_be, &err);
    gpp_event_t *t2 = gpp_event_new_timed(s_be, &err);
    GPP_EXPECT(t0 && t1 && t2 && gpp_event_query(t0, &err) == 1);
    double ms01 = -1, ms12 = -1, ms02 = -1;
    err.msg[0] = 0;
    GPP_EXPECT(gpp_event_elapsed_ms(t0, t1, &ms01, &err) == -1 &&
               strstr(err.msg, "never recorded"));
    GPP_EXPECT(ms01 == -1); /* untouched on error */
    GPP_EXPECT(gpp_event_record(t0, s_st, &err) == 0);
    GPP_EXPECT(gpp_stream_copy(s_st, dev, host, sizeof host, GPP_COPY_H2D, &err) == 0);
    GPP_EXPECT(gpp_event_record(t1, s_st, &err) == 0);
    GPP_EXPECT(gpp_stream_zero(s_st, dev, sizeof host, &err) == 0);
    GPP_EXPECT(gpp_event_record(t2, s_st, &err) == 0);
    GPP_EXPECT(gpp_event_elapsed_ms(t0, t1, &ms01, &err) == 0 && ms01 >= 0);
    GPP_EXPECT(gpp_event_elapsed_ms(t1, t2, &ms12, &err) == 0 && ms12 >= 0);
    GPP_EXPECT(gpp_event_elapsed_ms(t0, t2, &ms02, &err) == 0);
    GPP_EXPECT_NEAR(ms02, ms01 + ms12, 1e-9);
    /* a timed event still orders streams like any event */
    GPP_EXPECT(gpp_event_wait(t2, s_st, &err) == 0 && gpp_event_sync(t2, &err) == 0);
    gpp_event_destroy(&t0);
    gpp_event_destroy(&t1);
    gpp_event_destroy(&t2);
    gpp_backend_free(s_be, &dev);
    GPP_EXPECT(dev == NULL);
    gpp_backend_free(s_be, &dev); /* NULL is fine */

    /* workspace: grows, keeps its pointer for smaller requests */
    float *w1 = gpp_stream_workspace(s_st, 100, &err);
    float *w2 = gpp_stream_workspace(s_st, 50, &err);
    GPP_EXPECT(w1 && w1 == w2);
    float *w3 = gpp_stream_workspace(s_st, 1 << 20, &err);
    GPP_EXPECT(w3 != NULL);
    w3[(1 << 18) - 1] = 1.0f; /* the whole size is usable */

    gpp_tensor_t t = s_new(GPP_DTYPE_I32, 2, 3, 4);
    GPP_EXPECT(gpp_tensor_numel(&t) == 24 && gpp_tensor_bytes(&t) == 96);
    s_arena_free();
}

/* ---- linear ---- */

static void t_linear_forward(void)
{
    gpp_err_t err;
    /* x (2x3) = [[1,2,3],[4,5,6]], W (2,3) = [[1,0,-1],[.5,.5,.5]], b = [.1,-.2]:
     * y = [[1-3+.1, 3-.2], [4-6+.1, 7.5-.2]] = [[-1.9, 2.8], [-1.9, 7.3]] */
    gpp_tensor_t x = s_from(1, 2, 3, (const float[]){1, 2, 3, 4, 5, 6});
    gpp_tensor_t w = s_from(1, 2, 3, (const float[]){1, 0, -1, .5f, .5f, .5f});
    gpp_tensor_t b = s_from(1, 1, 2, (const float[]){.1f, -.2f});
    gpp_tensor_t y = s_new(GPP_DTYPE_F32, 1, 2, 2);
    GPP_EXPECT(gpp_linear_fwd(s_st, &x, &w, &b, &y, &err) == 0);
    s_expect_vals("linear+bias 2x3", &y, (const float[]){-1.9f, 2.8f, -1.9f, 7.3f}, 1e-6);
    GPP_EXPECT(gpp_linear_fwd(s_st, &x, &w, NULL, &y, &err) == 0);
    s_expect_vals("linear 2x3", &y, (const float[]){-2, 3, -2, 7.5f}, 1e-6);
    s_arena_free();
}

typedef struct {
    gpp_tensor_t x, w, b, y;
    int bias;
} linear_ctx_t;

static void s_linear_fwd(void *c)
{
    linear_ctx_t *k = c;
    gpp_err_t err;
    GPP_EXPECT(gpp_linear_fwd(s_st, &k->x, &k->w, k->bias ? &k->b : NULL, &k->y, &err) == 0);
}

static void s_linear_gradcheck(int bias)
{
    gpp_err_t err;
    linear_ctx_t k = {.bias = bias};
    k.x = s_rand(2, 3, 4, 1.0f);
    k.w = s_rand(1, 5, 4, 0.5f);
    k.b = s_rand(1, 1, 5, 0.5f);
    k.y = s_new(GPP_DTYPE_F32, 2, 3, 5);
    s_linear_fwd(&k);
    gpp_tensor_t dy = s_weights_like(&k.y);
    gpp_tensor_t dx = s_grad(&k.x), dw = s_grad(&k.w), db = s_grad(&k.b);
    GPP_EXPECT(gpp_linear_bwd(s_st, &k.x, &k.w, &dy, &dx, &dw, bias ? &db : NULL, &err) == 0);
    gc_var_t vars[] = {VAR("x", k.x, dx), VAR("w", k.w, dw), VAR("b", k.b, db)};
    s_gradcheck(bias ? "linear+bias" : "linear", s_linear_fwd, &k, &k.y, dy.data, vars,
                bias ? 3 : 2);
    if (!bias) /* untouched: db stays at its initial value */
        GPP_EXPECT(((float *)db.data)[0] == GRAD_INIT);
    s_arena_free();
}

static void t_linear_backward(void)
{
    s_linear_gradcheck(1);
    s_linear_gradcheck(0);
}

/* ---- activations ---- */

static void t_activation_forward(void)
{
    gpp_err_t err;
    gpp_tensor_t x = s_from(1, 1, 4, (const float[]){-1, 0, 1, 2});
    gpp_tensor_t y = s_new(GPP_DTYPE_F32, 1, 1, 4);
    GPP_EXPECT(gpp_relu_fwd(s_st, &x, &y, &err) == 0);
    s_expect_vals("relu [-1,0,1,2]", &y, (const float[]){0, 0, 1, 2}, 0);
    /* gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */
    GPP_EXPECT(gpp_gelu_fwd(s_st, &x, GPP_GELU_TANH, &y, &err) == 0);
    s_expect_vals("gelu tanh [-1,0,1,2]", &y,
                  (const float[]){-0.1588080f, 0, 0.8411920f, 1.9545977f}, 1e-6);
    /* gelu(x) = x Phi(x): Phi(1) = 0.8413447461, Phi(2) = 0.9772498681 */
    GPP_EXPECT(gpp_gelu_fwd(s_st, &x, GPP_GELU_ERF, &y, &err) == 0);
    s_expect_vals("gelu erf [-1,0,1,2]", &y,
                  (const float[]){-0.1586553f, 0, 0.8413447f, 1.9544997f}, 1e-6);
    s_arena_free();
}

/* gpp_linear_act_fwd: the linear then the activation, bit for bit (ReLU
 * straight into y; GELU through z, which it writes too). */
static void t_linear_act_forward(void)
{
    gpp_err_t err;
    for (int bias = 0; bias < 2; bias++)
        for (int a = 0; a < 3; a++) {
            gpp_op_type_t act = a ? GPP_OP_GELU : GPP_OP_RELU;
            gpp_gelu_form_t form = a == 2 ? GPP_GELU_ERF : GPP_GELU_TANH;
            gpp_tensor_t x = s_rand(3, 4, 9, 1.0f), w = s_rand(1, 6, 9, 0.7f);
            gpp_tensor_t b = s_rand(1, 1, 6, 0.5f);
            gpp_tensor_t z = s_new(GPP_DTYPE_F32, 3, 4, 6), y = s_new(GPP_DTYPE_F32, 3, 4, 6);
            gpp_tensor_t fz = s_new(GPP_DTYPE_F32, 3, 4, 6), fy = s_new(GPP_DTYPE_F32, 3, 4, 6);
            const gpp_tensor_t *bp = bias ? &b : NULL;
            GPP_EXPECT(gpp_linear_fwd(s_st, &x, &w, bp, &z, &err) == 0);
            GPP_EXPECT((act == GPP_OP_RELU ? gpp_relu_fwd(s_st, &z, &y, &err)
                                           : gpp_gelu_fwd(s_st, &z, form, &y, &err)) == 0);
            GPP_EXPECT(gpp_linear_act_fwd(s_st, &x, &w, bp, act, form,
                                          act == GPP_OP_GELU ? &fz : NULL, &fy, &err) == 0);
            size_t bytes = gpp_tensor_bytes(&y);
            GPP_EXPECT_MSG(memcmp(y.data, fy.data, bytes) == 0, "act %d bias %d: y differs", a,
                           bias);
            if (act == GPP_OP_GELU)
                GPP_EXPECT_MSG(memcmp(z.data, fz.data, bytes) == 0, "act %d bias %d: z differs", a,
                               bias);
            s_arena_free();
        }
}

/* The branch-free exp behind GELU and softmax: relative error against exp
 * in double over its whole range, saturation outside it. */
static void t_expf_accuracy(void)
{
    double max_rel = 0;
    for (double z = -87.0; z <= 88.0; z += 1e-3) {
        float zf = (float)z;
        double want = exp((double)zf), rel = fabs(gpp_cpu_expf(zf) - want) / want;
        max_rel = rel > max_rel ? rel : max_rel;
    }
    printf("  %-28s vs exp in double on [-87, 88]: max rel diff %.3g (tol 1.2e-7)\n",
           "gpp_cpu_expf", max_rel);
    GPP_EXPECT(max_rel <= 1.2e-7);
    GPP_EXPECT(gpp_cpu_expf(-1e4f) == gpp_cpu_expf(-87.0f) && gpp_cpu_expf(-87.0f) > 0.0f);
    GPP_EXPECT(gpp_cpu_expf(1e4f) == gpp_cpu_expf(88.0f) && isfinite(gpp_cpu_expf(88.0f)));
    GPP_EXPECT(gpp_cpu_expf(0.0f) == 1.0f);
}

/* The GELU of form `form` and its derivative at v, in double. */
static void s_gelu_ref(gpp_gelu_form_t form, double v, double *y, double *d)
{
    if (form == GPP_GELU_ERF) { /* x Phi(x), Phi(x) + x phi(x) */
        double cdf = 0.5 * erfc(-v / sqrt(2.0)), pdf = exp(-0.5 * v * v) / sqrt(2.0 * M_PI);
        *y = v * cdf;
        *d = cdf + v * pdf;
        return;
    }
    double c = sqrt(2.0 / M_PI), a = 0.044715, t = tanh(c * (v + a * v * v * v));
    *y = 0.5 * v * (1.0 + t);
    *d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * c * (1.0 + 3.0 * a * v * v);
}

/* GELU forward and backward of both forms on a dense grid against their
 * formulas in double: abs error relative to max(1, |x|). */
static void t_gelu_accuracy(void)
{
    gpp_err_t err;
    const int64_t n = 24001; /* x = -12 .. 12 step 1e-3 */
    gpp_tensor_t x = s_new(GPP_DTYPE_F32, 1, 1, n), y = s_new(GPP_DTYPE_F32, 1, 1, n);
    gpp_tensor_t dy = s_new(GPP_DTYPE_F32, 1, 1, n), dx = s_new(GPP_DTYPE_F32, 1, 1, n);
    float *xp = x.data, *yp = y.data, *dyp = dy.data, *dxp = dx.data;
    for (int form = GPP_GELU_TANH; form <= GPP_GELU_ERF; form++) {
        for (int64_t i = 0; i < n; i++) {
            xp[i] = (float)(-12.0 + 1e-3 * (double)i);
            dyp[i] = 1.0f;
            dxp[i] = 0.0f;
        }
        GPP_EXPECT(gpp_gelu_fwd(s_st, &x, (gpp_gelu_form_t)form, &y, &err) == 0);
        GPP_EXPECT(gpp_gelu_bwd(s_st, &x, (gpp_gelu_form_t)form, &dy, &dx, &err) == 0);
        double max_y = 0, max_d = 0, want_y, want_d;
        for (int64_t i = 0; i < n; i++) {
            double v = xp[i], scale = fmax(1.0, fabs(v));
            s_gelu_ref((gpp_gelu_form_t)form, v, &want_y, &want_d);
            max_y = fmax(max_y, fabs(yp[i] - want_y) / scale);
            max_d = fmax(max_d, fabs(dxp[i] - want_d) / scale);
        }
        printf("  %-28s vs its formula in double on [-12, 12]: max abs diff / max(1,|x|) "
               "forward %.3g, backward %.3g (tol 5e-7)\n",
               form == GPP_GELU_ERF ? "gelu erf" : "gelu tanh", max_y, max_d);
        GPP_EXPECT(max_y <= 5e-7 && max_d <= 5e-7);
    }
    s_arena_free();
}

typedef struct {
    gpp_tensor_t x, y;
    int act; /* 0 relu, 1 gelu tanh, 2 gelu erf */
} act_ctx_t;

static gpp_gelu_form_t s_act_form(const act_ctx_t *k)
{
    return k->act == 2 ? GPP_GELU_ERF : GPP_GELU_TANH;
}

static void s_act_fwd(void *c)
{
    act_ctx_t *k = c;
    gpp_err_t err;
    int rc = k->act ? gpp_gelu_fwd(s_st, &k->x, s_act_form(k), &k->y, &err)
                    : gpp_relu_fwd(s_st, &k->x, &k->y, &err);
    GPP_EXPECT(rc == 0);
}

/* Backward of ReLU and both GELU forms against central differences of
 * their forwards. */
static void t_activation_backward(void)
{
    static const char *const names[] = {"relu", "gelu tanh", "gelu erf"};
    gpp_err_t err;
    for (int act = 0; act < 3; act++) {
        act_ctx_t k = {.act = act};
        k.x = s_rand(2, 3, 4, 2.0f);
        float *xp = k.x.data;
        for (int i = 0; i < 24; i++) /* keep away from ReLU's kink */
            if (fabsf(xp[i]) < 0.05f)
                xp[i] = 0.1f;
        k.y = s_new(GPP_DTYPE_F32, 2, 3, 4);
        s_act_fwd(&k);
        gpp_tensor_t dy = s_weights_like(&k.y), dx = s_grad(&k.x);
        int rc = act ? gpp_gelu_bwd(s_st, &k.x, s_act_form(&k), &dy, &dx, &err)
                     : gpp_relu_bwd(s_st, &k.x, &dy, &dx, &err);
        GPP_EXPECT(rc == 0);
        gc_var_t vars[] = {VAR("x", k.x, dx)};
        s_gradcheck(names[act], s_act_fwd, &k, &k.y, dy.data, vars, 1);
    }
    s_arena_free();
}

/* ---- layer norm ---- */

static void t_layernorm_forward(void)
{
    gpp_err_t err;
    /* [1,2,3]: mean 2, var 2/3, 1/std = 1/sqrt(2/3 + 1e-5) = 1.2247357;
     * gain 1, bias 0 -> [-1.2247357, 0, 1.2247357]; gain 2, bias 1 ->
     * [-1.4494714, 1, 3.4494714] */
    gpp_tensor_t x = s_from(1, 1, 3, (const float[]){1, 2, 3});
    gpp_tensor_t g = s_from(1, 1, 3, (const float[]){1, 1, 1});
    gpp_tensor_t b = s_new(GPP_DTYPE_F32, 1, 1, 3);
    gpp_tensor_t y = s_new(GPP_DTYPE_F32, 1, 1, 3);
    float stash[2];
    GPP_EXPECT(gpp_layernorm_stash_bytes(1, 1) == sizeof stash);
    GPP_EXPECT(gpp_layernorm_fwd(s_st, &x, &g, &b, &y, stash, &err) == 0);
    s_expect_vals("layernorm [1,2,3]", &y, (const float[]){-1.2247357f, 0, 1.2247357f}, 1e-6);
    GPP_EXPECT_NEAR(stash[0], 2.0, 1e-7);
    GPP_EXPECT_NEAR(stash[1], 1.2247357, 1e-6);
    gpp_tensor_t g2 = s_from(1, 1, 3, (const float[]){2, 2, 2});
    gpp_tensor_t b2 = s_from(1, 1, 3, (const float[]){1, 1, 1});
    GPP_EXPECT(gpp_layernorm_fwd(s_st, &x, &g2, &b2, &y, stash, &err) == 0);
    s_expect_vals("layernorm gain 2 bias 1", &y, (const float[]){-1.4494714f, 1, 3.4494714f}, 2e-6);
    s_arena_free();
}

typedef struct {
    gpp_tensor_t x, g, b, y;
    float *stash;
} ln_ctx_t;

static void s_ln_fwd(void *c)
{
    ln_ctx_t *k = c;
    gpp_err_t err;
    GPP_EXPECT(gpp_layernorm_fwd(s_st, &k->x, &k->g, &k->b, &k->y, k->stash, &err) == 0);
}

static void t_layernorm_backward(void)
{
    gpp_err_t err;
    ln_ctx_t k;
    /* 21 cols: one block of 16 lanes of the row sums plus a tail */
    k.x = s_rand(2, 3, 21, 1.0f);
    k.g = s_rand(1, 1, 21, 1.0f);
    k.b = s_rand(1, 1, 21, 1.0f);
    k.y = s_new(GPP_DTYPE_F32, 2, 3, 21);
    gpp_tensor_t st = s_new(GPP_DTYPE_F32, 1, 1, (int64_t)gpp_layernorm_stash_bytes(2, 3) / 4);
    k.stash = st.data;
    s_ln_fwd(&k);
    gpp_tensor_t dy = s_weights_like(&k.y);
    gpp_tensor_t dx = s_grad(&k.x), dg = s_grad(&k.g), db = s_grad(&k.b);
    GPP_EXPECT(gpp_layernorm_bwd(s_st, &k.x, &k.g, k.stash, &dy, &dx, &dg, &db, &err) == 0);
    gc_var_t vars[] = {VAR("x", k.x, dx), VAR("gain", k.g, dg), VAR("bias", k.b, db)};
    s_gradcheck("layernorm", s_ln_fwd, &k, &k.y, dy.data, vars, 3);
    s_arena_free();
}

/* ---- attention ---- */

static void t_attention_forward(void)
{
    gpp_err_t err;
    /* 1 head, seq 2, hidden 2, Q = K = V = x (W_qkv = [I; I; I]), W_o = I,
     * biases 0, x = [[1,0],[0,1]]: scores = x x^T / sqrt(2) = diag(0.7071),
     * softmax row 0 = [e^.7071, 1] / (e^.7071 + 1) = [0.6697615, 0.3302385],
     * y = P V = [[0.6697615, 0.3302385], [0.3302385, 0.6697615]] */
    gpp_attention_params_t p;
    p.w_qkv = s_from(1, 6, 2, (const float[]){1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1});
    p.b_qkv = s_new(GPP_DTYPE_F32, 1, 1, 6);
    p.w_o = s_from(1, 2, 2, (const float[]){1, 0, 0, 1});
    p.b_o = s_new(GPP_DTYPE_F32, 1, 1, 2);
    gpp_tensor_t x = s_from(1, 2, 2, (const float[]){1, 0, 0, 1});
    gpp_tensor_t y = s_new(GPP_DTYPE_F32, 1, 2, 2);
    gpp_tensor_t st =
        s_new(GPP_DTYPE_F32, 1, 1, (int64_t)gpp_attention_stash_bytes(1, 2, 2, 1) / 4);
    GPP_EXPECT(gpp_attention_fwd(s_st, &x, &p, 1, 0, &y, st.data, &err) == 0);
    s_expect_vals("attention 1 head seq 2", &y,
                  (const float[]){0.6697615f, 0.3302385f, 0.3302385f, 0.6697615f}, 1e-6);
    s_arena_free();
}

typedef struct {
    gpp_tensor_t x, y;
    gpp_attention_params_t p;
    int heads, causal;
    void *stash;
} attn_ctx_t;

static void s_attn_fwd(void *c)
{
    attn_ctx_t *k = c;
    gpp_err_t err;
    GPP_EXPECT(gpp_attention_fwd(s_st, &k->x, &k->p, k->heads, k->causal, &k->y, k->stash, &err) ==
               0);
}

static void s_attn_make(attn_ctx_t *k, int64_t n, int64_t seq, int64_t hid, int heads)
{
    k->heads = heads;
    k->causal = 0;
    k->x = s_rand(n, seq, hid, 1.0f);
    k->p.w_qkv = s_rand(1, 3 * hid, hid, 0.5f);
    k->p.b_qkv = s_rand(1, 1, 3 * hid, 0.2f);
    k->p.w_o = s_rand(1, hid, hid, 0.5f);
    k->p.b_o = s_rand(1, 1, hid, 0.2f);
    k->y = s_new(GPP_DTYPE_F32, n, seq, hid);
    gpp_tensor_t st =
        s_new(GPP_DTYPE_F32, 1, 1, (int64_t)gpp_attention_stash_bytes(n, seq, hid, heads) / 4);
    k->stash = st.data;
}

static void t_attention_backward(void)
{
    for (int causal = 0; causal < 2; causal++) {
        gpp_err_t err;
        attn_ctx_t k;
        /* seq 18: softmax rows of one block of 16 lanes plus a tail */
        s_attn_make(&k, 2, 18, 4, 2);
        k.causal = causal;
        s_attn_fwd(&k);
        gpp_tensor_t dy = s_weights_like(&k.y), dx = s_grad(&k.x);
        gpp_attention_params_t dp = {s_grad(&k.p.w_qkv), s_grad(&k.p.b_qkv), s_grad(&k.p.w_o),
                                     s_grad(&k.p.b_o)};
        GPP_EXPECT(gpp_attention_bwd(s_st, &k.x, &k.p, k.heads, causal, k.stash, &dy, &dx, &dp,
                                     &err) == 0);
        gc_var_t vars[] = {VAR("x", k.x, dx), VAR("w_qkv", k.p.w_qkv, dp.w_qkv),
                           VAR("b_qkv", k.p.b_qkv, dp.b_qkv), VAR("w_o", k.p.w_o, dp.w_o),
                           VAR("b_o", k.p.b_o, dp.b_o)};
        s_gradcheck(causal ? "attention causal" : "attention", s_attn_fwd, &k, &k.y, dy.data, vars,
                    5);
        s_arena_free();
    }
}

/* The CPU backend fills the op table's stash (what the planner charges and
 * the executor allocates through gpp_backend_attention_stash_bytes). */
static void t_attention_stash_bytes(void)
{
    static const int64_t shapes[][4] = {{1, 16, 32, 4}, {3, 37, 64, 2}, {8, 256, 1024, 16}};
    for (int i = 0; i < 3; i++) {
        const int64_t *sh = shapes[i];
        GPP_EXPECT(gpp_backend_attention_stash_bytes(s_be, sh[0], sh[1], sh[2], (int)sh[3]) ==
                   gpp_attention_stash_bytes(sh[0], sh[1], sh[2], (int)sh[3]));
    }
}

/* Causal attention against a straightforward double-precision reference:
 * per sample and head, scores s_ij = q_i . k_j / sqrt(dh) for j <= i only,
 * softmax over those, ctx_i = sum_j p_ij v_j, y = ctx W_o^T + b_o. seq 21:
 * rows of 1..21 kept keys cross the 16-lane blocks and their tails. */
static void t_attention_causal(void)
{
    attn_ctx_t k;
    int64_t n = 2, seq = 21, hid = 6, H = 3, dh = hid / H;
    s_attn_make(&k, n, seq, hid, (int)H);
    k.causal = 1;
    s_attn_fwd(&k);
    const float *x = k.x.data, *wq = k.p.w_qkv.data, *bq = k.p.b_qkv.data, *wo = k.p.w_o.data,
                *bo = k.p.b_o.data, *y = k.y.data;
    double *qkv = calloc((size_t)(seq * 3 * hid), sizeof *qkv);
    double *ctx = calloc((size_t)(seq * hid), sizeof *ctx), *p = calloc((size_t)seq, sizeof *p);
    double worst = 0.0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t r = 0; r < seq; r++)
            for (int64_t o = 0; o < 3 * hid; o++) {
                double a = bq[o];
                for (int64_t c = 0; c < hid; c++)
                    a += (double)x[(i * seq + r) * hid + c] * wq[o * hid + c];
                qkv[r * 3 * hid + o] = a;
            }
        for (int64_t h = 0; h < H; h++)
            for (int64_t r = 0; r < seq; r++) {
                double mx = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j <= r; j++) {
                    double s = 0.0;
                    for (int64_t d = 0; d < dh; d++)
                        s += qkv[r * 3 * hid + h * dh + d] * qkv[j * 3 * hid + hid + h * dh + d];
                    p[j] = s / sqrt((double)dh);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int64_t j = 0; j <= r; j++)
                    sum += p[j] = exp(p[j] - mx);
                for (int64_t d = 0; d < dh; d++) {
                    double a = 0.0;
                    for (int64_t j = 0; j <= r; j++)
                        a += p[j] / sum * qkv[j * 3 * hid + 2 * hid + h * dh + d];
                    ctx[r * hid + h * dh + d] = a;
                }
            }
        for (int64_t r = 0; r < seq; r++)
            for (int64_t o = 0; o < hid; o++) {
                double a = bo[o];
                for (int64_t c = 0; c < hid; c++)
                    a += ctx[r * hid + c] * wo[o * hid + c];
                double e = fabs(a - y[(i * seq + r) * hid + o]);
                worst = e > worst ? e : worst;
            }
    }
    printf("  attention causal vs double reference: max |diff| %.3g (tolerance 1e-5)\n", worst);
    GPP_EXPECT(worst < 1e-5);
    /* the stashed probabilities: zero above the diagonal */
    const float *prob = (const float *)k.stash + n * seq * 3 * hid;
    int above = 0;
    for (int64_t b = 0; b < n * H; b++)
        for (int64_t r = 0; r < seq; r++)
            for (int64_t j = r + 1; j < seq; j++)
                above += prob[(b * seq + r) * seq + j] != 0.0f;
    GPP_EXPECT(above == 0);
    free(qkv), free(ctx), free(p);
    s_arena_free();
}

/* ---- embedding bag ---- */

static void t_embedding_forward(void)
{
    gpp_err_t err;
    /* table row r = [r, 10 r]; bags {1,3}, {2,2}, {0,2} ->
     * [4, 40], [4, 40], [2, 20] */
    gpp_tensor_t tab = s_from(1, 4, 2, (const float[]){0, 0, 1, 10, 2, 20, 3, 30});
    gpp_tensor_t idx = s_new(GPP_DTYPE_I32, 3, 1, 2);
    memcpy(idx.data, (const int32_t[]){1, 3, 2, 2, 0, 2}, 24);
    gpp_tensor_t y = s_new(GPP_DTYPE_F32, 3, 1, 2);
    GPP_EXPECT(gpp_embedding_bag_fwd(s_st, &idx, &tab, &y, &err) == 0);
    s_expect_vals("embedding bag sum", &y, (const float[]){4, 40, 4, 40, 2, 20}, 0);
    ((int32_t *)idx.data)[3] = 4; /* out of range: a run-time error */
    GPP_EXPECT(gpp_embedding_bag_fwd(s_st, &idx, &tab, &y, &err) == -1);
    GPP_EXPECT(strstr(err.msg, "index 4 outside") != NULL);
    printf("  embedding bad index -> %s\n", err.msg);
    s_arena_free();
}

typedef struct {
    gpp_tensor_t idx, tab, y;
} emb_ctx_t;

static void s_emb_fwd(void *c)
{
    emb_ctx_t *k = c;
    gpp_err_t err;
    GPP_EXPECT(gpp_embedding_bag_fwd(s_st, &k->idx, &k->tab, &k->y, &err) == 0);
}

static void t_embedding_backward_sparse(void)
{
    gpp_err_t err;
    emb_ctx_t k;
    k.tab = s_rand(1, 6, 3, 1.0f);
    k.idx = s_new(GPP_DTYPE_I32, 2, 2, 3); /* 4 bags of 3, with repeats */
    memcpy(k.idx.data, (const int32_t[]){5, 1, 5, 0, 2, 1, 1, 1, 1, 3, 0, 5}, 48);
    k.y = s_new(GPP_DTYPE_F32, 2, 2, 3);
    s_emb_fwd(&k);
    gpp_tensor_t dy = s_weights_like(&k.y);
    gpp_sparse_grad_t *g = gpp_sparse_grad_new(s_st, 6, 3, 2, &err); /* cap 2: must grow */
    GPP_EXPECT(g != NULL);
    GPP_EXPECT(gpp_embedding_bag_bwd(s_st, &k.idx, &dy, g, &err) == 0);
    /* touched rows in first-touch order: 5 1 0 2 3; row 4 untouched */
    GPP_EXPECT(gpp_sparse_grad_count(g) == 5);
    const int32_t want_rows[] = {5, 1, 0, 2, 3};
    GPP_EXPECT(memcmp(gpp_sparse_grad_rows(g), want_rows, sizeof want_rows) == 0);
    /* scatter to dense (+ GRAD_INIT) for the finite-difference check */
    gpp_tensor_t dtab = s_grad(&k.tab);
    for (int64_t i = 0; i < gpp_sparse_grad_count(g); i++)
        for (int j = 0; j < 3; j++)
            ((float *)dtab.data)[gpp_sparse_grad_rows(g)[i] * 3 + j] +=
                gpp_sparse_grad_values(g)[i * 3 + j];
    gc_var_t vars[] = {VAR("table", k.tab, dtab)};
    s_gradcheck("embedding", s_emb_fwd, &k, &k.y, dy.data, vars, 1);

    /* a second micro-batch sums into the same slots; add() of peer pairs too */
    float before = gpp_sparse_grad_values(g)[0];
    GPP_EXPECT(gpp_embedding_bag_bwd(s_st, &k.idx, &dy, g, &err) == 0);
    GPP_EXPECT(gpp_sparse_grad_count(g) == 5);
    GPP_EXPECT_NEAR(gpp_sparse_grad_values(g)[0], 2 * before, 1e-6);
    const int32_t peer_rows[] = {4, 5};
    const float peer_vals[] = {1, 2, 3, 10, 20, 30};
    GPP_EXPECT(gpp_sparse_grad_add(s_st, g, 2, peer_rows, peer_vals, &err) == 0);
    GPP_EXPECT(gpp_sparse_grad_count(g) == 6 && gpp_sparse_grad_rows(g)[5] == 4);
    GPP_EXPECT(gpp_sparse_grad_values(g)[5 * 3 + 2] == 3.0f);
    GPP_EXPECT_NEAR(gpp_sparse_grad_values(g)[0], 2 * before + 10, 1e-5);
    const int32_t bad_rows[] = {1, 6};
    GPP_EXPECT(gpp_sparse_grad_add(s_st, g, 2, bad_rows, peer_vals, &err) == -1);
    GPP_EXPECT(gpp_sparse_grad_count(g) == 6); /* untouched on error */
    GPP_EXPECT(gpp_sparse_grad_clear(s_st, g, &err) == 0 && gpp_sparse_grad_count(g) == 0);
    GPP_EXPECT(gpp_sparse_grad_add(s_st, g, 1, peer_rows + 1, peer_vals, &err) == 0);
    GPP_EXPECT(gpp_sparse_grad_count(g) == 1 && gpp_sparse_grad_rows(g)[0] == 5);
    GPP_EXPECT(gpp_sparse_grad_values(g)[1] == 2.0f); /* fresh slot, not stale sums */
    gpp_sparse_grad_destroy(&g);
    GPP_EXPECT(g == NULL);
    s_arena_free();
}

static void t_embedding_million_rows(void)
{
    /* a 1M-row gradient: memory is the row map plus touched rows only, and
     * clearing costs O(touched) */
    gpp_err_t err;
    gpp_sparse_grad_t *g = gpp_sparse_grad_new(s_st, 1000000, 64, 0, &err);
    GPP_EXPECT(g != NULL);
    gpp_tensor_t idx = s_new(GPP_DTYPE_I32, 256, 1, 8);
    for (int i = 0; i < 256 * 8; i++)
        ((int32_t *)idx.data)[i] = (int32_t)((i * 7919u) % 1000000u);
    gpp_tensor_t dy = s_rand(256, 1, 64, 1.0f);
    for (int rep = 0; rep < 3; rep++) {
        GPP_EXPECT(gpp_embedding_bag_bwd(s_st, &idx, &dy, g, &err) == 0);
        GPP_EXPECT(gpp_sparse_grad_count(g) == 2048);
        GPP_EXPECT(gpp_sparse_grad_clear(s_st, g, &err) == 0);
    }
    gpp_sparse_grad_destroy(&g);
    s_arena_free();
}

/* ---- concat, add ---- */

static void t_concat_add_forward(void)
{
    gpp_err_t err;
    /* rows [1,2] | [3] | [4,5,6] -> [1,2,3,4,5,6]; two rows */
    gpp_tensor_t a = s_from(2, 1, 2, (const float[]){1, 2, 10, 20});
    gpp_tensor_t b = s_from(2, 1, 1, (const float[]){3, 30});
    gpp_tensor_t c = s_from(2, 1, 3, (const float[]){4, 5, 6, 40, 50, 60});
    gpp_tensor_t y = s_new(GPP_DTYPE_F32, 2, 1, 6);
    const gpp_tensor_t *xs[] = {&a, &b, &c};
    GPP_EXPECT(gpp_concat_fwd(s_st, 3, xs, &y, &err) == 0);
    s_expect_vals("concat 3 inputs", &y, (const float[]){1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60},
                  0);
    gpp_tensor_t z = s_new(GPP_DTYPE_F32, 2, 1, 2);
    GPP_EXPECT(gpp_add_fwd(s_st, &a, &a, &z, &err) == 0);
    s_expect_vals("residual add", &z, (const float[]){2, 4, 20, 40}, 0);
    /* skip an input's gradient with a data-less tensor */
    gpp_tensor_t da = s_grad(&a), dc = s_grad(&c), db_skip = b;
    db_skip.data = NULL;
    gpp_tensor_t *dxs[] = {&da, &db_skip, &dc};
    GPP_EXPECT(gpp_concat_bwd(s_st, 3, &y, dxs, &err) == 0);
    s_expect_vals("concat bwd block 0", &da, (const float[]){1.5f, 2.5f, 10.5f, 20.5f}, 0);
    s_expect_vals("concat bwd block 2", &dc, (const float[]){4.5f, 5.5f, 6.5f, 40.5f, 50.5f, 60.5f},
                  0);
    /* the same skip with a NULL entry, alone and as a run of two */
    gpp_tensor_t *dxs_null[] = {&da, NULL, &dc};
    GPP_EXPECT(gpp_concat_bwd(s_st, 3, &y, dxs_null, &err) == 0);
    s_expect_vals("concat bwd NULL, block 0", &da, (const float[]){2.5f, 4.5f, 20.5f, 40.5f}, 0);
    s_expect_vals("concat bwd NULL, block 2", &dc,
                  (const float[]){8.5f, 10.5f, 12.5f, 80.5f, 100.5f, 120.5f}, 0);
    gpp_tensor_t *dxs_run[] = {NULL, NULL, &dc};
    GPP_EXPECT(gpp_concat_bwd(s_st, 3, &y, dxs_run, &err) == 0);
    s_expect_vals("concat bwd NULL run, block 2", &dc,
                  (const float[]){12.5f, 15.5f, 18.5f, 120.5f, 150.5f, 180.5f}, 0);
    s_arena_free();
}

typedef struct {
    gpp_tensor_t a, b, c, y, z;
} cat_ctx_t;

/* y = concat(a, b, c); z = y + y', y' = concat(c, b, a) exercises add too */
static void s_cat_fwd(void *p)
{
    cat_ctx_t *k = p;
    gpp_err_t err;
    const gpp_tensor_t *xs[] = {&k->a, &k->b, &k->c};
    GPP_EXPECT(gpp_concat_fwd(s_st, 3, xs, &k->y, &err) == 0);
    GPP_EXPECT(gpp_add_fwd(s_st, &k->y, &k->y, &k->z, &err) == 0);
}

static void t_concat_add_backward(void)
{
    gpp_err_t err;
    cat_ctx_t k;
    k.a = s_rand(2, 3, 2, 1.0f);
    k.b = s_rand(2, 3, 3, 1.0f);
    k.c = s_rand(2, 3, 1, 1.0f);
    k.y = s_new(GPP_DTYPE_F32, 2, 3, 6);
    k.z = s_new(GPP_DTYPE_F32, 2, 3, 6);
    s_cat_fwd(&k);
    gpp_tensor_t dz = s_weights_like(&k.z);
    gpp_tensor_t dy = s_new(GPP_DTYPE_F32, 2, 3, 6);
    /* z = y + y: both operands' gradients land in dy (+=) */
    GPP_EXPECT(gpp_add_bwd(s_st, &dz, &dy, &dy, &err) == 0);
    gpp_tensor_t da = s_grad(&k.a), db = s_grad(&k.b), dc = s_grad(&k.c);
    gpp_tensor_t *dxs[] = {&da, &db, &dc};
    GPP_EXPECT(gpp_concat_bwd(s_st, 3, &dy, dxs, &err) == 0);
    gc_var_t vars[] = {VAR("a", k.a, da), VAR("b", k.b, db), VAR("c", k.c, dc)};
    s_gradcheck("concat+add", s_cat_fwd, &k, &k.z, dz.data, vars, 3);
    s_arena_free();
}

/* ---- slice ---- */

static void t_slice_forward(void)
{
    gpp_err_t err;
    /* columns [1, 3) of two rows [1 2 3 4], [5 6 7 8] */
    gpp_tensor_t x = s_from(2, 1, 4, (const float[]){1, 2, 3, 4, 5, 6, 7, 8});
    gpp_tensor_t y = s_new(GPP_DTYPE_F32, 2, 1, 2);
    GPP_EXPECT(gpp_slice_fwd(s_st, &x, 1, &y, &err) == 0);
    s_expect_vals("slice [1, 3)", &y, (const float[]){2, 3, 6, 7}, 0);
    /* the backward adds into the block only: 0.5 elsewhere */
    gpp_tensor_t dx = s_grad(&x);
    GPP_EXPECT(gpp_slice_bwd(s_st, &y, 1, &dx, &err) == 0);
    s_expect_vals("slice bwd [1, 3)", &dx,
                  (const float[]){0.5f, 2.5f, 3.5f, 0.5f, 0.5f, 6.5f, 7.5f, 0.5f}, 0);
    /* a data-less gradient is skipped */
    gpp_tensor_t skip = x;
    skip.data = NULL;
    GPP_EXPECT(gpp_slice_bwd(s_st, &y, 1, &skip, &err) == 0);
    s_arena_free();
}

typedef struct {
    gpp_tensor_t x, a, b, z;
} slice_ctx_t;

/* z = concat(x[:, 1:3], x[:, 0:3]): overlapping slices, column 4 unused */
static void s_slice_fwd(void *p)
{
    slice_ctx_t *k = p;
    gpp_err_t err;
    GPP_EXPECT(gpp_slice_fwd(s_st, &k->x, 1, &k->a, &err) == 0);
    GPP_EXPECT(gpp_slice_fwd(s_st, &k->x, 0, &k->b, &err) == 0);
    const gpp_tensor_t *xs[] = {&k->a, &k->b};
    GPP_EXPECT(gpp_concat_fwd(s_st, 2, xs, &k->z, &err) == 0);
}

static void t_slice_backward(void)
{
    gpp_err_t err;
    slice_ctx_t k;
    k.x = s_rand(2, 3, 5, 1.0f);
    k.a = s_new(GPP_DTYPE_F32, 2, 3, 2);
    k.b = s_new(GPP_DTYPE_F32, 2, 3, 3);
    k.z = s_new(GPP_DTYPE_F32, 2, 3, 5);
    s_slice_fwd(&k);
    gpp_tensor_t dz = s_weights_like(&k.z);
    gpp_tensor_t da = s_new(GPP_DTYPE_F32, 2, 3, 2), db = s_new(GPP_DTYPE_F32, 2, 3, 3);
    memset(da.data, 0, gpp_tensor_bytes(&da));
    memset(db.data, 0, gpp_tensor_bytes(&db));
    gpp_tensor_t *dxs[] = {&da, &db};
    GPP_EXPECT(gpp_concat_bwd(s_st, 2, &dz, dxs, &err) == 0);
    gpp_tensor_t dx = s_grad(&k.x);
    GPP_EXPECT(gpp_slice_bwd(s_st, &da, 1, &dx, &err) == 0);
    GPP_EXPECT(gpp_slice_bwd(s_st, &db, 0, &dx, &err) == 0);
    gc_var_t vars[] = {VAR("x", k.x, dx)};
    s_gradcheck("slice", s_slice_fwd, &k, &k.z, dz.data, vars, 1);
    s_arena_free();
}

/* ---- reshape ---- */

/* [2, 2, 3] -> [2, 1, 6]: the same elements in order; the backward adds dy
 * into dx element for element (GRAD_INIT 0.5 already there) */
static void t_reshape(void)
{
    gpp_err_t err;
    const float v[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    gpp_tensor_t x = s_from(2, 2, 3, v), y = s_new(GPP_DTYPE_F32, 2, 1, 6);
    GPP_EXPECT(gpp_reshape_fwd(s_st, &x, &y, &err) == 0);
    s_expect_vals("reshape [2, 3] -> [1, 6]", &y, v, 0);
    gpp_tensor_t dx = s_grad(&x);
    GPP_EXPECT(gpp_reshape_bwd(s_st, &y, &dx, &err) == 0);
    float want[12];
    for (int k = 0; k < 12; k++)
        want[k] = v[k] + 0.5f;
    s_expect_vals("reshape bwd", &dx, want, 0);
    gpp_tensor_t skip = x; /* a data-less gradient is skipped */
    skip.data = NULL;
    GPP_EXPECT(gpp_reshape_bwd(s_st, &y, &skip, &err) == 0);
    GPP_EXPECT(gpp_reshape_bwd(s_st, &y, NULL, &err) == 0);
    s_arena_free();
}

/* ---- losses ---- */

static void t_loss_forward(void)
{
    gpp_err_t err;
    float loss = 0;
    /* MSE of x = [1, 2] against 0: (1 + 4) / 2 = 2.5; grad 2 (x - t) / 2 = [1, 2] */
    gpp_tensor_t x = s_from(1, 1, 2, (const float[]){1, 2});
    gpp_tensor_t t = s_new(GPP_DTYPE_F32, 1, 1, 2);
    gpp_tensor_t dx = s_new(GPP_DTYPE_F32, 1, 1, 2);
    GPP_EXPECT(gpp_loss_mse(s_st, &x, &t, &loss, 1.0f, &dx, &err) == 0);
    GPP_EXPECT_NEAR(loss, 2.5, 1e-7);
    float mse = loss;
    s_expect_vals("mse grad", &dx, (const float[]){1, 2}, 1e-7);
    /* CE: logits [1,2,3] label 2: log(e + e^2 + e^3) - 3 = 0.4076060;
     *     logits [0,0,0] label 0: log 3 = 1.0986123; mean 0.7531091 */
    gpp_tensor_t z = s_from(2, 1, 3, (const float[]){1, 2, 3, 0, 0, 0});
    gpp_tensor_t lab = s_new(GPP_DTYPE_I32, 2, 1, 1);
    memcpy(lab.data, (const int32_t[]){2, 0}, 8);
    GPP_EXPECT(gpp_loss_ce(s_st, &z, &lab, &loss, 1.0f, NULL, &err) == 0);
    GPP_EXPECT_NEAR(loss, 0.7531091, 1e-6);
    printf("  %-28s forward vs hand values: mse %.7g (want 2.5), ce %.7g (want 0.7531091)\n",
           "losses", mse, loss);
    ((int32_t *)lab.data)[1] = 3;
    GPP_EXPECT(gpp_loss_ce(s_st, &z, &lab, &loss, 1.0f, NULL, &err) == -1);
    GPP_EXPECT(strstr(err.msg, "label 3 outside") != NULL);
    s_arena_free();
}

typedef struct {
    gpp_tensor_t x, t, lab, y;
    int ce;
} loss_ctx_t;

static void s_loss_fwd(void *c)
{
    loss_ctx_t *k = c;
    gpp_err_t err;
    int rc = k->ce ? gpp_loss_ce(s_st, &k->x, &k->lab, k->y.data, 1.0f, NULL, &err)
                   : gpp_loss_mse(s_st, &k->x, &k->t, k->y.data, 1.0f, NULL, &err);
    GPP_EXPECT(rc == 0);
}

static void t_loss_backward(void)
{
    gpp_err_t err;
    for (int ce = 0; ce <= 1; ce++) {
        loss_ctx_t k = {.ce = ce};
        k.x = s_rand(2, 2, 5, 2.0f);
        k.t = s_rand(2, 2, 5, 1.0f);
        k.lab = s_new(GPP_DTYPE_I32, 2, 2, 1);
        memcpy(k.lab.data, (const int32_t[]){4, 0, 2, 2}, 16);
        k.y = s_new(GPP_DTYPE_F32, 1, 1, 1);
        s_loss_fwd(&k);
        /* dL/dloss = r is the grad_scale */
        gpp_tensor_t r = s_weights_like(&k.y);
        float scale = *(float *)r.data;
        gpp_tensor_t dx = s_grad(&k.x);
        int rc = ce ? gpp_loss_ce(s_st, &k.x, &k.lab, k.y.data, scale, &dx, &err)
                    : gpp_loss_mse(s_st, &k.x, &k.t, k.y.data, scale, &dx, &err);
        GPP_EXPECT(rc == 0);
        gc_var_t vars[] = {VAR("x", k.x, dx)};
        s_gradcheck(ce ? "loss_ce" : "loss_mse", s_loss_fwd, &k, &k.y, r.data, vars, 1);
    }
    s_arena_free();
}

/* ---- determinism ---- */

static int s_same(const gpp_tensor_t *a, const gpp_tensor_t *b)
{
    return memcmp(a->data, b->data, gpp_tensor_bytes(a)) == 0;
}

static void t_determinism(void)
{
    gpp_err_t err;
    /* linear (multi-threaded sgemm, sgemv), attention, layernorm, gelu, CE: twice */
    gpp_tensor_t x = s_rand(8, 64, 256, 1.0f), w = s_rand(1, 512, 256, 0.1f);
    gpp_tensor_t b = s_rand(1, 1, 512, 0.1f);
    attn_ctx_t k;
    s_attn_make(&k, 2, 64, 128, 4);
    gpp_tensor_t gain = s_rand(1, 1, 512, 1.0f), bias = s_rand(1, 1, 512, 1.0f);
    gpp_tensor_t lnst = s_new(GPP_DTYPE_F32, 1, 1, 2 * 8 * 64);
    gpp_tensor_t lab = s_new(GPP_DTYPE_I32, 8, 64, 1);
    for (int i = 0; i < 8 * 64; i++)
        ((int32_t *)lab.data)[i] = i % 512;
    gpp_tensor_t out[2][9];
    float loss[2];
    for (int run = 0; run < 2; run++) {
        gpp_tensor_t *o = out[run];
        o[0] = s_new(GPP_DTYPE_F32, 8, 64, 512);  /* linear y */
        o[1] = s_new(GPP_DTYPE_F32, 8, 64, 512);  /* layernorm -> gelu */
        o[2] = s_new(GPP_DTYPE_F32, 8, 64, 512);  /* d logits */
        o[3] = s_new(GPP_DTYPE_F32, 8, 64, 256);  /* dx */
        o[4] = s_new(GPP_DTYPE_F32, 1, 512, 256); /* dw */
        o[5] = s_new(GPP_DTYPE_F32, 2, 64, 128);  /* attention y */
        o[6] = s_new(GPP_DTYPE_F32, 2, 64, 128);  /* attention dx */
        o[7] = s_new(GPP_DTYPE_F32, 1, 384, 128); /* attention dw_qkv */
        o[8] = s_new(GPP_DTYPE_F32, 1, 1, 512);   /* db */
        gpp_tensor_t ln = s_new(GPP_DTYPE_F32, 8, 64, 512);
        GPP_EXPECT(gpp_linear_fwd(s_st, &x, &w, &b, &o[0], &err) == 0);
        GPP_EXPECT(gpp_layernorm_fwd(s_st, &o[0], &gain, &bias, &ln, lnst.data, &err) == 0);
        GPP_EXPECT(gpp_gelu_fwd(s_st, &ln, GPP_GELU_ERF, &o[1], &err) == 0);
        GPP_EXPECT(gpp_loss_ce(s_st, &o[1], &lab, &loss[run], 1.0f, &o[2], &err) == 0);
        GPP_EXPECT(gpp_linear_bwd(s_st, &x, &w, &o[2], &o[3], &o[4], &o[8], &err) == 0);
        k.y = o[5];
        s_attn_fwd(&k);
        gpp_attention_params_t dp = {o[7], {0}, {0}, {0}};
        GPP_EXPECT(
            gpp_attention_bwd(s_st, &k.x, &k.p, k.heads, 0, k.stash, &o[5], &o[6], &dp, &err) == 0);
    }
    int same = memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0;
    for (int i = 0; i < 9; i++)
        same &= s_same(&out[0][i], &out[1][i]);
    printf("  determinism: 9 outputs/gradients and the loss bit-identical over 2 runs: %s\n",
           same ? "yes" : "NO");
    GPP_EXPECT(same);
    s_arena_free();
}

/* A replica's shard of a micro-batch can be empty: every op accepts n = 0
 * and leaves parameter gradients as they were. */
static void t_empty_micro_batch(void)
{
    gpp_err_t err;
    gpp_tensor_t x = s_new(GPP_DTYPE_F32, 0, 4, 8), y = s_new(GPP_DTYPE_F32, 0, 4, 6);
    gpp_tensor_t w = s_rand(1, 6, 8, 1.0f), b = s_rand(1, 1, 6, 1.0f);
    gpp_tensor_t dw = s_grad(&w), db = s_grad(&b), dx = s_grad(&x);
    GPP_EXPECT(gpp_linear_fwd(s_st, &x, &w, &b, &y, &err) == 0);
    GPP_EXPECT(gpp_linear_bwd(s_st, &x, &w, &y, &dx, &dw, &db, &err) == 0);
    GPP_EXPECT(((float *)dw.data)[47] == GRAD_INIT && ((float *)db.data)[5] == GRAD_INIT);
    attn_ctx_t k;
    s_attn_make(&k, 0, 4, 8, 2);
    gpp_attention_params_t dp = {s_grad(&k.p.w_qkv), s_grad(&k.p.b_qkv), s_grad(&k.p.w_o),
                                 s_grad(&k.p.b_o)};
    s_attn_fwd(&k);
    GPP_EXPECT(gpp_attention_bwd(s_st, &k.x, &k.p, 2, 0, k.stash, &k.y, &dx, &dp, &err) == 0);
    GPP_EXPECT(((float *)dp.b_qkv.data)[0] == GRAD_INIT);
    gpp_tensor_t g = s_rand(1, 1, 8, 1.0f), z = s_new(GPP_DTYPE_F32, 0, 4, 8);
    GPP_EXPECT(gpp_layernorm_fwd(s_st, &x, &g, &g, &z, NULL, &err) == 0);
    GPP_EXPECT(gpp_gelu_fwd(s_st, &x, GPP_GELU_TANH, &z, &err) == 0);
    s_arena_free();
}

static const gpp_test_case_t cases[] = {
    {"backend_memory_events", t_backend_memory_events},
    {"attention_stash_bytes", t_attention_stash_bytes},
    {"linear_forward", t_linear_forward},
    {"linear_backward", t_linear_backward},
    {"activation_forward", t_activation_forward},
    {"linear_act_forward", t_linear_act_forward},
    {"activation_backward", t_activation_backward},
    {"expf_accuracy", t_expf_accuracy},
    {"gelu_accuracy", t_gelu_accuracy},
    {"layernorm_forward", t_layernorm_forward},
    {"layernorm_backward", t_layernorm_backward},
    {"attention_forward", t_attention_forward},
    {"attention_backward", t_attention_backward},
    {"attention_causal", t_attention_causal},
    {"embedding_forward", t_embedding_forward},
    {"embedding_backward_sparse", t_embedding_backward_sparse},
    {"embedding_million_rows", t_embedding_million_rows},
    {"concat_add_forward", t_concat_add_forward},
    {"concat_add_backward", t_concat_add_backward},
    {"slice_forward", t_slice_forward},
    {"slice_backward", t_slice_backward},
    {"reshape", t_reshape},
    {"loss_forward", t_loss_forward},
    {"loss_backward", t_loss_backward},
    {"empty_micro_batch", t_empty_micro_batch},
    {"determinism", t_determinism},
    {NULL, NULL},
};

int main(void)
{
    gpp_err_t err;
    /* a fixed OpenBLAS thread count makes results reproducible */
    gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CPU, .cpu_threads = 2};
    s_be = gpp_backend_new(&cfg, &err);
    s_st = s_be ? gpp_stream_new(s_be, &err) : NULL;
    if (!s_st) {
        fprintf(stderr, "test_kernels: %s\n", err.msg);
        return 1;
    }
    int rc = gpp_test_run(cases);
    gpp_stream_destroy(&s_st);
    gpp_backend_destroy(&s_be);
    return rc;
}
