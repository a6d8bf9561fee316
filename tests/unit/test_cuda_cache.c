/* test_cuda_cache: the host-side parts of the CUDA backend, run on every
 * machine: the caching allocator (kernels/cuda/gpp_cuda_cache.c) over a
 * counting malloc stand-in for cudaMalloc, and the
 * math the CPU and CUDA kernels share (kernels/gpp_math.h) against its
 * formulas in double. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef GPP_HAVE_CUDA
#include "kernels/cuda/gpp_cuda.h" /* gpp_cuda_lt_load */
#endif
#include "common/gpp_alloc_rule.h"
#include "kernels/cuda/gpp_cuda_cache.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_math.h"
#include "tests/gpp_test.h"

/* ---- a raw allocator that counts, with an optional byte limit ---- */
typedef struct {
    size_t live_bytes, limit_bytes;
    int allocs, frees;
} raw_t;

typedef struct {
    size_t bytes;
    max_align_t pad;
} raw_hdr_t;

static void *s_raw_alloc(void *ctx, size_t bytes)
{
    raw_t *r = ctx;
    if (r->limit_bytes && r->live_bytes + bytes > r->limit_bytes)
        return NULL;
    raw_hdr_t *h = malloc(sizeof *h + bytes);
    h->bytes = bytes;
    r->live_bytes += bytes;
    r->allocs++;
    return h + 1;
}

static void s_raw_free(void *ctx, void *p)
{
    raw_t *r = ctx;
    raw_hdr_t *h = (raw_hdr_t *)p - 1;
    r->live_bytes -= h->bytes;
    r->frees++;
    free(h);
}

static void t_size_classes(void)
{
    size_t cb, prev_cb = 0;
    int prev = -1;
    GPP_EXPECT(gpp_alloc_class(0, &cb) == 0 && cb == 512);
    GPP_EXPECT(gpp_alloc_class(512, &cb) == 0 && cb == 512);
    GPP_EXPECT(gpp_alloc_class(513, &cb) == 1 && cb == 528);
    GPP_EXPECT(gpp_alloc_class(1024, &cb) == 32 && cb == 1024);
    GPP_EXPECT(gpp_alloc_class(1025, &cb) == 33 && cb == 1056);
    GPP_EXPECT(gpp_alloc_class((size_t)5 << 20, &cb) >= 0 && cb == (size_t)5 << 20);
    GPP_EXPECT(gpp_alloc_class(((size_t)5 << 20) + 1, &cb) >= 0 &&
               cb == ((size_t)5 << 20) + ((size_t)1 << 17));
    GPP_EXPECT(gpp_alloc_class((size_t)3 << 30, &cb) >= 0 && cb == (size_t)3 << 30);
    /* every size fits its class, wastes < 1/32, classes are monotone */
    double worst = 0;
    for (size_t b = 1; b < (1u << 22); b = b * 9 / 8 + 1) {
        int c = gpp_alloc_class(b, &cb);
        GPP_EXPECT(cb >= b && c >= prev && (c > prev ? cb > prev_cb : cb == prev_cb));
        if (b > 512)
            worst = fmax(worst, (double)(cb - b) / (double)cb);
        prev = c;
        prev_cb = cb;
    }
    printf("  worst waste above 512 B: %.1f %% of the block\n", 100 * worst);
    GPP_EXPECT(worst < 1.0 / 32);
    /* the memory model's rule (common/gpp_alloc_rule.h) is the cache's:
       same blocks, each class's size its inverse, and the planner's linear
       bound plus one floor per block never below a block */
    for (size_t b = 0; b < ((size_t)1 << 34); b = b * 5 / 4 + 1) {
        int c = gpp_alloc_class(b, &cb);
        GPP_EXPECT(gpp_alloc_bytes(GPP_ALLOC_CLASSES, (int64_t)b) == (int64_t)cb &&
                   gpp_alloc_class_bytes(c) == cb);
        for (int r = 0; r < 2; r++) {
            int64_t got = gpp_alloc_bytes((gpp_alloc_rule_t)r, (int64_t)b);
            GPP_EXPECT(got >= (int64_t)b &&
                       got <= gpp_alloc_bound((gpp_alloc_rule_t)r, (int64_t)b) +
                                  gpp_alloc_floor((gpp_alloc_rule_t)r));
        }
        GPP_EXPECT(gpp_alloc_bytes(GPP_ALLOC_ALIGN64, (int64_t)b) % 64 == 0);
    }
}

static void t_reuse_and_peak(void)
{
    raw_t r = {0};
    gpp_cuda_cache_t *c = gpp_cuda_cache_new(s_raw_alloc, s_raw_free, &r);
    gpp_cuda_cache_stats_t st;
    /* a "micro-batch": the same set of sizes allocated and freed 5 times */
    size_t sizes[] = {0, 100, 4096, 5000, 5000, 1 << 20, 777777};
    enum { N = sizeof sizes / sizeof sizes[0] };
    void *p[N];
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < N; i++) {
            p[i] = gpp_cuda_cache_alloc(c, sizes[i]);
            GPP_EXPECT(p[i] != NULL);
            memset(p[i], 0xab, sizes[i]); /* the whole request is usable */
            for (int j = 0; j < i; j++)
                GPP_EXPECT(p[j] != p[i]);
        }
        for (int i = N - 1; i >= 0; i--)
            gpp_cuda_cache_free(c, p[i]);
        if (round == 0)
            GPP_EXPECT(r.allocs == N);
    }
    gpp_cuda_cache_stats(c, &st);
    GPP_EXPECT(r.allocs == N && r.frees == 0); /* steady state: no raw calls */
    GPP_EXPECT(st.hits == 4 * N && st.raw_allocs == (uint64_t)N);
    GPP_EXPECT(st.in_use_bytes == 0 && st.reserved_bytes == r.live_bytes);
    size_t want_peak = 0, cb;
    for (int i = 0; i < N; i++) {
        gpp_alloc_class(sizes[i], &cb);
        want_peak += cb;
    }
    GPP_EXPECT(st.peak_bytes == want_peak);
    gpp_cuda_cache_free(c, NULL);
    gpp_cuda_cache_trim(c);
    GPP_EXPECT(r.live_bytes == 0 && r.frees == N);
    gpp_cuda_cache_stats(c, &st);
    GPP_EXPECT(st.reserved_bytes == 0 && st.raw_frees == (uint64_t)N);
    /* many live blocks: the pointer map grows */
    void *many[3000];
    for (int i = 0; i < 3000; i++)
        many[i] = gpp_cuda_cache_alloc(c, (size_t)(i % 17) * 100);
    for (int i = 0; i < 3000; i++)
        gpp_cuda_cache_free(c, many[i]);
    gpp_cuda_cache_destroy(&c);
    GPP_EXPECT(c == NULL && r.live_bytes == 0);
}

/* Out of device memory: the cached blocks are released and the request
 * retried once; still too big is NULL. */
static void t_out_of_memory(void)
{
    raw_t r = {.limit_bytes = 3 << 20};
    gpp_cuda_cache_t *c = gpp_cuda_cache_new(s_raw_alloc, s_raw_free, &r);
    void *a = gpp_cuda_cache_alloc(c, 2 << 20);
    GPP_EXPECT(a != NULL);
    GPP_EXPECT(gpp_cuda_cache_free(c, a) == 2 << 20);   /* cached: 2 MiB still held */
    void *b = gpp_cuda_cache_alloc(c, (size_t)5 << 19); /* 2.5 MiB: other class */
    GPP_EXPECT(b != NULL && r.frees == 1);
    GPP_EXPECT(gpp_cuda_cache_alloc(c, 4 << 20) == NULL);
    GPP_EXPECT(gpp_cuda_cache_free(c, b) == (size_t)5 << 19); /* its class: 2.5 MiB */
    GPP_EXPECT(gpp_cuda_cache_free(c, NULL) == 0);
    gpp_cuda_cache_destroy(&c);
    GPP_EXPECT(r.live_bytes == 0);
}

/* gpp_math.h against its formulas in double (the CPU backend's optimizer
 * and activation kernels are these functions; test_kernels and test_optim
 * check them through the ops). */
static void t_shared_math(void)
{
    double max_sgd = 0, max_adam = 0;
    for (int i = 0; i < 1000; i++) {
        float g = (float)sin(i * 0.37), p0 = (float)cos(i * 0.11), v0 = (float)sin(i * 0.05);
        float p = p0, v = v0;
        gpp_math_sgd(0.1f, 0.01f, 0.9f, g, &p, &v);
        double gd = (double)g + 0.01 * p0, vd = 0.9 * v0 + gd, pd = p0 - 0.1 * vd;
        max_sgd = fmax(max_sgd, fabs(p - pd) + fabs(v - vd));
        float pa = p0, m = v0 * 0.1f, s = fabsf(v0) * 0.01f;
        gpp_math_adamw_t k = gpp_math_adamw_consts(1e-3f, 0.1f, 0.9f, 0.999f, 1e-8f, 1 + i % 7);
        gpp_math_adamw(&k, g, &pa, &m, &s);
        double t = 1 + i % 7, pq = p0 * (1 - 1e-3 * 0.1);
        double md = 0.9 * (v0 * 0.1) + 0.1 * g, sd = 0.999 * (fabs(v0) * 0.01) + 0.001 * g * g;
        pq -= 1e-3 * (md / (1 - pow(0.9, t))) / (sqrt(sd / (1 - pow(0.999, t))) + 1e-8);
        max_adam = fmax(max_adam, fabs(pa - pq));
    }
    printf("  gpp_math_sgd max abs diff %.3g, gpp_math_adamw %.3g (tol 1e-6)\n", max_sgd, max_adam);
    GPP_EXPECT(max_sgd <= 1e-6 && max_adam <= 1e-6);
    GPP_EXPECT(gpp_math_relu(-2.0f) == 0.0f && gpp_math_relu(3.0f) == 3.0f);
    GPP_EXPECT(gpp_math_relu_grad(-1.0f, 5.0f) == 0.0f && gpp_math_relu_grad(1.0f, 5.0f) == 5.0f);
    /* GELU derivatives (both forms) against central differences */
    double max_d = 0, max_e = 0;
    for (double x = -6; x <= 6; x += 0.01) {
        float a = (float)(x + 1e-2), b = (float)(x - 1e-2);
        double num = (gpp_math_gelu(a) - gpp_math_gelu(b)) / 2e-2;
        max_d = fmax(max_d, fabs(gpp_math_gelu_deriv((float)x) - num));
        num = (gpp_math_gelu_erf(a) - gpp_math_gelu_erf(b)) / 2e-2;
        max_e = fmax(max_e, fabs(gpp_math_gelu_erf_deriv((float)x) - num));
    }
    printf("  gpp_math_gelu_deriv vs central difference: max abs diff %.3g, erf form %.3g "
           "(tol 1e-3)\n",
           max_d, max_e);
    GPP_EXPECT(max_d <= 1e-3 && max_e <= 1e-3);
}

/* backend "cuda": a GPU backend where one is usable, else a clear error
 * naming the reason; never a CPU backend. */
static void t_cuda_backend_open(void)
{
    gpp_err_t err = {{0}};
    gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CUDA, .device = 0};
    gpp_backend_t *be = gpp_backend_new(&cfg, &err);
    if (be) {
        printf("  opened %s\n", gpp_backend_name(be));
        GPP_EXPECT(gpp_backend_kind(be) == GPP_DEVICE_CUDA);
        gpp_backend_destroy(&be);
    } else {
        printf("  no GPU here: %s\n", err.msg);
        GPP_EXPECT(strstr(err.msg, "built without CUDA") || strstr(err.msg, "no usable GPU") ||
                   strstr(err.msg, "CUDA device(s) visible") || strstr(err.msg, "cannot open"));
    }
    cfg.device = 4096; /* no machine has that many */
    GPP_EXPECT(gpp_backend_new(&cfg, &err) == NULL && strstr(err.msg, "cuda:4096"));
}

/* The CUDA build loads cuBLASLt at run time: the library and every entry
 * point the backend calls resolve (no GPU needed). */
static void t_cublaslt_load(void)
{
#ifdef GPP_HAVE_CUDA
    gpp_err_t err = {{0}};
    int rc = gpp_cuda_lt_load(&err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc == 0) {
        const char *ok = gpp_cuda_lt.cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS);
        printf("  cuBLASLt loaded: status 0 is \"%s\"\n", ok);
        GPP_EXPECT(ok && *ok);
    }
#else
    printf("  built without CUDA: nothing to load\n");
#endif
}

static const gpp_test_case_t cases[] = {
    {"size_classes", t_size_classes},
    {"reuse_and_peak", t_reuse_and_peak},
    {"out_of_memory", t_out_of_memory},
    {"shared_math", t_shared_math},
    {"cuda_backend_open", t_cuda_backend_open},
    {"cublaslt_load", t_cublaslt_load},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
