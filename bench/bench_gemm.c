/* bench_gemm: the linear kernel against a plain cblas_sgemm of the same
 * product, forward and backward.
 *
 *   bench_gemm [--threads N] [--reps R] [--quick] [--shape M,IN,OUT]...
 *
 * For each shape (m rows, in -> out features) it runs R rounds after a
 * warm-up round; the variants take turns within a round:
 *   sgemm        cblas_sgemm(x [m,in], W^T) -> y, beta 0 (the reference)
 *   linear       gpp_linear_fwd without bias
 *   linear+b     gpp_linear_fwd with bias
 *   sgemm bwd    the two reference sgemms of the backward (dx += dy W,
 *                dW += dy^T x)
 *   linear bwd   gpp_linear_bwd with dx, dW
 *   linear+b bwd gpp_linear_bwd with dx, dW, db (one more pass over dy)
 * and prints the best wall time, GFLOP/s at that time, and the ratio of the
 * reference's time to the variant's (the median over rounds of the ratio
 * within each round; the kernel's target is >= 0.95), then the same best
 * time and ratio for the process's CPU time. Default shapes: (4096, 1024 -> 4096) = a
 * micro-batch of 4 x 1024 tokens through a transformer MLP, (256, 4096 -> 4096), (64, 29120 ->
 * 4096) (the CANDLE-Uno-like wide input layer). --quick uses shapes 4x smaller;
 * --shape (repeatable) replaces the defaults. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gpp_time.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"

typedef struct {
    int64_t m, in, out;
} shape_t;

static void s_fill(float *p, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
    }
}

typedef struct {
    const shape_t *sh;
    float *x, *w, *b, *y, *dy, *dx, *dw, *db;
    gpp_stream_t *st;
} ctx_t;

enum { V_SGEMM, V_LINEAR, V_LINEAR_BIAS, V_SGEMM_BWD, V_LINEAR_BWD, V_LINEAR_BWD_BIAS, V__COUNT };
static const char *s_names[V__COUNT] = {"sgemm",     "linear",     "linear+b",
                                        "sgemm bwd", "linear bwd", "linear+b bwd"};

/* CPU time of the whole process (all its threads), milliseconds. */
static double s_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int s_run(ctx_t *c, int v)
{
    const shape_t *s = c->sh;
    int m = (int)s->m, in = (int)s->in, out = (int)s->out;
    gpp_tensor_t x = gpp_tensor(c->x, GPP_DTYPE_F32, 1, s->m, s->in);
    gpp_tensor_t w = gpp_tensor(c->w, GPP_DTYPE_F32, 1, s->out, s->in);
    gpp_tensor_t b = gpp_tensor(c->b, GPP_DTYPE_F32, 1, 1, s->out);
    gpp_tensor_t y = gpp_tensor(c->y, GPP_DTYPE_F32, 1, s->m, s->out);
    gpp_tensor_t dy = gpp_tensor(c->dy, GPP_DTYPE_F32, 1, s->m, s->out);
    gpp_tensor_t dx = gpp_tensor(c->dx, GPP_DTYPE_F32, 1, s->m, s->in);
    gpp_tensor_t dw = gpp_tensor(c->dw, GPP_DTYPE_F32, 1, s->out, s->in);
    gpp_tensor_t db = gpp_tensor(c->db, GPP_DTYPE_F32, 1, 1, s->out);
    gpp_err_t err;
    int rc = 0;
    switch (v) {
    case V_SGEMM:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, out, in, 1.0f, c->x, in, c->w, in,
                    0.0f, c->y, out);
        break;
    case V_LINEAR:
        rc = gpp_linear_fwd(c->st, &x, &w, NULL, &y, &err);
        break;
    case V_LINEAR_BIAS:
        rc = gpp_linear_fwd(c->st, &x, &w, &b, &y, &err);
        break;
    case V_SGEMM_BWD:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, in, out, 1.0f, c->dy, out, c->w,
                    in, 1.0f, c->dx, in);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, m, 1.0f, c->dy, out, c->x, in,
                    1.0f, c->dw, in);
        break;
    case V_LINEAR_BWD:
        rc = gpp_linear_bwd(c->st, &x, &w, &dy, &dx, &dw, NULL, &err);
        break;
    case V_LINEAR_BWD_BIAS:
        rc = gpp_linear_bwd(c->st, &x, &w, &dy, &dx, &dw, &db, &err);
        break;
    }
    if (rc == 0)
        rc = gpp_stream_sync(c->st, &err);
    if (rc < 0)
        fprintf(stderr, "bench_gemm: %s\n", err.msg);
    return rc;
}

int main(int argc, char **argv)
{
    int threads = 0, reps = 5, quick = 0, n_shapes = 3;
    shape_t shapes[16] = {{4096, 1024, 4096}, {256, 4096, 4096}, {64, 29120, 4096}};
    int custom = 0;
    for (int i = 1; i < argc; i++) {
        long long m, in, out;
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--shape") && i + 1 < argc && custom < 16 &&
                 sscanf(argv[++i], "%lld,%lld,%lld", &m, &in, &out) == 3 && m > 0 && in > 0 &&
                 out > 0) {
            shapes[custom++] = (shape_t){m, in, out};
            n_shapes = custom;
        } else {
            fprintf(stderr, "usage: bench_gemm [--threads N] [--reps R] [--quick] "
                            "[--shape M,IN,OUT]...\n");
            return 2;
        }
    }
    if (reps < 1)
        reps = 1;
    gpp_err_t err;
    gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CPU, .cpu_threads = threads};
    gpp_backend_t *be = gpp_backend_new(&cfg, &err);
    gpp_stream_t *st = be ? gpp_stream_new(be, &err) : NULL;
    if (!st) {
        fprintf(stderr, "bench_gemm: %s\n", err.msg);
        return 1;
    }
    int div = quick ? 4 : 1;
    printf("bench_gemm: OpenBLAS %s, core %s, %d threads, best of %d\n", openblas_get_config(),
           openblas_get_corename(), openblas_get_num_threads(), reps);
    printf("%-22s %-12s %9s %8s %7s %9s %7s\n", "shape (m, in -> out)", "variant", "wall ms",
           "GFLOP/s", "ratio", "cpu ms", "ratio");
    int rc = 0;
    for (int k = 0; k < n_shapes && rc == 0; k++) {
        shape_t sh = shapes[k];
        sh.m /= div, sh.in /= div, sh.out /= div;
        ctx_t c = {.sh = &sh, .st = st};
        size_t nx = (size_t)(sh.m * sh.in), nw = (size_t)(sh.out * sh.in);
        size_t ny = (size_t)(sh.m * sh.out);
        float **bufs[] = {&c.x, &c.w, &c.b, &c.y, &c.dy, &c.dx, &c.dw, &c.db};
        size_t sizes[] = {nx, nw, (size_t)sh.out, ny, ny, nx, nw, (size_t)sh.out};
        for (int i = 0; i < 8 && rc == 0; i++) {
            *bufs[i] = gpp_backend_alloc(be, sizes[i] * sizeof(float), &err);
            if (!*bufs[i]) {
                fprintf(stderr, "bench_gemm: %s\n", err.msg);
                rc = 1;
                break;
            }
            s_fill(*bufs[i], (int64_t)sizes[i], 17u + (unsigned)i);
        }
        /* Variants take turns within each round, so that drift in machine
         * speed (other load, frequency) hits all of them alike; round 0
         * warms up. A ratio to the reference is the median over rounds of
         * the ratio within a round, which cancels most of that drift; it is
         * given for wall time and for the process's CPU time (which does
         * not count time other processes hold the cores; with --threads 1
         * it is the steadiest figure on a shared machine). */
        double *t = calloc((size_t)reps * V__COUNT * 2, sizeof(double));
        for (int r = 0; r <= reps && rc == 0; r++) {
            for (int v = 0; v < V__COUNT && rc == 0; v++) {
                double t0 = gpp_now_ms(), c0 = s_cpu_ms();
                rc = s_run(&c, v);
                if (r > 0) {
                    t[((r - 1) * V__COUNT + v) * 2] = gpp_now_ms() - t0;
                    t[((r - 1) * V__COUNT + v) * 2 + 1] = s_cpu_ms() - c0;
                }
            }
        }
        for (int v = 0; v < V__COUNT && rc == 0; v++) {
            int ref = v >= V_SGEMM_BWD ? V_SGEMM_BWD : V_SGEMM;
            double best[2] = {1e30, 1e30}, med[2];
            for (int k = 0; k < 2; k++) {
                double ratio[reps];
                for (int r = 0; r < reps; r++) {
                    double tv = t[(r * V__COUNT + v) * 2 + k];
                    best[k] = tv < best[k] ? tv : best[k];
                    ratio[r] = t[(r * V__COUNT + ref) * 2 + k] / tv;
                }
                qsort(ratio, (size_t)reps, sizeof ratio[0], s_cmp_double);
                med[k] = reps % 2 ? ratio[reps / 2] : 0.5 * (ratio[reps / 2 - 1] + ratio[reps / 2]);
            }
            double flops = 2.0 * (double)sh.m * (double)sh.in * (double)sh.out;
            if (v >= V_SGEMM_BWD)
                flops *= 2;
            char label[64];
            snprintf(label, sizeof label, "(%lld, %lld -> %lld)", (long long)sh.m, (long long)sh.in,
                     (long long)sh.out);
            printf("%-22s %-12s %9.2f %8.1f %7.3f %9.2f %7.3f\n", label, s_names[v], best[0],
                   flops / best[0] / 1e6, med[0], best[1], med[1]);
        }
        free(t);
        fflush(stdout);
        for (int i = 0; i < 8; i++)
            gpp_backend_free(be, (void **)bufs[i]);
    }
    gpp_stream_destroy(&st);
    gpp_backend_destroy(&be);
    return rc;
}
