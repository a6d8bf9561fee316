/* bench_gelu: the CPU backend's GELU kernels, both forms (gpp_gelu_form_t),
 * forward and backward, on one thread.
 *
 *   bench_gelu [--elems N] [--reps R]
 *
 * N elements (default 8 x 64 x 2048 = 1 Mi: a micro-batch of 8 sequences of
 * 64 tokens through a 512-wide transformer's 4x feed-forward) with values
 * uniform in [-4, 4]; the four variants (tanh fwd, erf fwd, tanh bwd, erf
 * bwd) take turns within each of R rounds after a warm-up round. Prints the
 * best wall time per variant and ns per element, and the erf form's time
 * over the tanh form's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_time.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"

int main(int argc, char **argv)
{
    int64_t n = 8 * 64 * 2048;
    int reps = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--elems") && i + 1 < argc)
            n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_gelu [--elems N] [--reps R]\n");
            return 2;
        }
    }
    if (n < 1 || reps < 1) {
        fprintf(stderr, "bench_gelu: --elems and --reps must be >= 1\n");
        return 2;
    }
    gpp_err_t err;
    gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CPU, .cpu_threads = 1};
    gpp_backend_t *be = gpp_backend_new(&cfg, &err);
    gpp_stream_t *st = be ? gpp_stream_new(be, &err) : NULL;
    if (!st) {
        fprintf(stderr, "bench_gelu: %s\n", err.msg);
        return 1;
    }
    float *buf[4] = {NULL}; /* x, y, dy, dx */
    int rc = 0;
    for (int k = 0; k < 4 && rc == 0; k++)
        if (!(buf[k] = gpp_backend_alloc(be, (size_t)n * sizeof(float), &err))) {
            fprintf(stderr, "bench_gelu: %s\n", err.msg);
            rc = 1;
        }
    static const char *const names[] = {"tanh fwd", "erf fwd", "tanh bwd", "erf bwd"};
    double best[4] = {1e300, 1e300, 1e300, 1e300};
    if (rc == 0) {
        unsigned seed = 17u;
        for (int64_t i = 0; i < n; i++) {
            seed = seed * 1664525u + 1013904223u;
            buf[0][i] = 8.0f * ((float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f);
            buf[2][i] = 1.0f, buf[3][i] = 0.0f;
        }
        gpp_tensor_t x = gpp_tensor(buf[0], GPP_DTYPE_F32, 1, 1, n);
        gpp_tensor_t y = gpp_tensor(buf[1], GPP_DTYPE_F32, 1, 1, n);
        gpp_tensor_t dy = gpp_tensor(buf[2], GPP_DTYPE_F32, 1, 1, n);
        gpp_tensor_t dx = gpp_tensor(buf[3], GPP_DTYPE_F32, 1, 1, n);
        for (int r = 0; r <= reps && rc == 0; r++) /* round 0: warm-up */
            for (int v = 0; v < 4 && rc == 0; v++) {
                gpp_gelu_form_t form = v & 1 ? GPP_GELU_ERF : GPP_GELU_TANH;
                double t0 = gpp_now_ms();
                rc = v < 2 ? gpp_gelu_fwd(st, &x, form, &y, &err)
                           : gpp_gelu_bwd(st, &x, form, &dy, &dx, &err);
                if (rc == 0)
                    rc = gpp_stream_sync(st, &err);
                double ms = gpp_now_ms() - t0;
                if (r > 0 && ms < best[v])
                    best[v] = ms;
            }
        if (rc)
            fprintf(stderr, "bench_gelu: %s\n", err.msg);
    }
    if (rc == 0) {
        printf("bench_gelu: %lld elements, 1 thread, best of %d\n", (long long)n, reps);
        printf("%-9s %9s %8s\n", "variant", "wall ms", "ns/elem");
        for (int v = 0; v < 4; v++)
            printf("%-9s %9.3f %8.2f\n", names[v], best[v], best[v] * 1e6 / (double)n);
        printf("erf / tanh: forward %.2fx, backward %.2fx\n", best[1] / best[0], best[3] / best[2]);
    }
    for (int k = 0; k < 4; k++)
        gpp_backend_free(be, (void **)&buf[k]);
    gpp_stream_destroy(&st);
    gpp_backend_destroy(&be);
    return rc;
}
