/* bench_onnx_import: the time gpp_model_load takes on an ONNX model (read,
 * protobuf decode, mapping, weight copies, finalize), the best and median of
 * N runs. usage: bench_onnx_import SPEC [N]   (BENCHMARKS.md, "ONNX import") */
#include <stdio.h>
#include <stdlib.h>

#include "common/gpp_time.h"
#include "model/gpp_model.h"

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_onnx_import SPEC [N]\n");
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 20;
    if (n < 1 || n > 100000) {
        fprintf(stderr, "bench_onnx_import: N in 1..100000\n");
        return 2;
    }
    double *ms = calloc((size_t)n, sizeof *ms);
    gpp_graph_t *g = NULL;
    for (int i = 0; i < n; i++) {
        gpp_err_t err = {{0}};
        gpp_graph_destroy(&g);
        double t0 = gpp_now_ms();
        g = gpp_model_load(argv[1], &err);
        ms[i] = gpp_now_ms() - t0;
        if (!g) {
            fprintf(stderr, "bench_onnx_import: %s\n", err.msg);
            free(ms);
            return 2;
        }
    }
    qsort(ms, (size_t)n, sizeof *ms, s_cmp);
    printf("%s: %d ops, %lld parameters; import best %.3f ms, median %.3f ms (%d runs)\n", argv[1],
           g->n_ops, (long long)gpp_graph_params(g), ms[0], ms[n / 2], n);
    gpp_graph_destroy(&g);
    free(ms);
    return 0;
}
