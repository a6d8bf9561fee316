/* bench_data: host-side throughput of the data source, samples/s of data
 * only (no training): every INPUT op's inputs and every loss op's labels of
 * one micro-batch per call, as gpp-train asks for them.
 *
 *   bench_data [--max-threads N] [--seconds S] [MODEL BATCH]...
 *
 * For each model (default: the four of bench_train_gpu.sh, below) it times the
 * synthetic source on T = 1..N threads (default N: online CPUs; prefetch
 * off: this is the generation rate, not the overlap), then the same
 * samples read back from a dataset file (gpp-train --write-dataset) in the
 * page cache. Each setting runs consecutive micro-batches for S seconds
 * (default 1) after one untimed micro-batch; a T > 1 row also checks its
 * bytes against T = 1 (they must be identical).
 *
 * A second table shows the overlap: on N threads, 8 + 20 micro-batches (the
 * first 8 untimed: the prefetch starts with the third, and its buffers
 * take their memory in the fills that follow), each
 * followed by a stand-in for the device's step (the host sleeps, its cores
 * free, as while a GPU computes) of 1.5 x the time one micro-batch takes to
 * generate on N threads (synthetic) or to read on one (dataset file); it
 * reports the data time the step still waits for (the time inside the data
 * calls) per micro-batch, without and with prefetch (the read-ahead for the
 * file). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/data/gpp_data.h"
#include "agent/data/gpp_data_pool.h"
#include "common/gpp_time.h"
#include "model/gpp_graph.h"

/* The models and batches of bench/bench_train_gpu.sh (issue 10's figures). */
static const char *const DEFAULTS[] = {
    "mmt:branches=2,layers=2,hidden=128,heads=4,seq=32,ffn=512,classes=16",
    "32",
    "mmt:branches=2,layers=4,hidden=1024,heads=16,seq=256,ffn=4096,classes=16",
    "8",
    "dlrm:dense_branches=7,sparse_branches=7,dense_in=4096,hidden=4096,dense_layers=4,"
    "rows=100000,dim=64,bag=100,top_layers=2",
    "256",
    "candle_uno:branches=7,layers=4,hidden=4096,in=4096,doses=1,top_layers=2",
    "256",
};

static int s_is_loss(const gpp_op_t *op)
{
    return op->type == GPP_OP_LOSS_MSE || op->type == GPP_OP_LOSS_CE;
}

/* Bytes of one sample's inputs and labels. */
static size_t s_sample_bytes(const gpp_graph_t *g)
{
    size_t b = 0;
    for (int o = 0; o < g->n_ops; o++)
        b += (size_t)gpp_data_shape_bytes(g, o);
    return b;
}

/* One micro-batch [lo, lo + n): every input, then every label, into buf. */
static int s_batch(const gpp_graph_t *g, gpp_data_t *d, int64_t lo, int64_t n, char *buf)
{
    gpp_err_t err = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int o = 0; o < g->n_ops; o++) {
            const gpp_op_t *op = &g->ops[o];
            if (pass == 0 ? op->type != GPP_OP_INPUT : !s_is_loss(op))
                continue;
            gpp_dtype_t dt;
            int64_t r = op->rows, c = op->cols;
            if (pass)
                gpp_data_shape_label(g, o, &dt, &r, &c);
            /* as the executor asks: a prefetched micro-batch is not copied */
            if (!gpp_data_ref(d, o, lo, n, buf, &err)) {
                fprintf(stderr, "bench_data: %s\n", err.msg);
                return -1;
            }
            buf += (size_t)(n * r * c) * 4;
        }
    return 0;
}

/* samples/s of consecutive micro-batches for `seconds`; the first one's
 * bytes go to first. */
static double s_rate(const gpp_graph_t *g, gpp_data_t *d, int64_t batch, double seconds, char *buf,
                     char *first)
{
    if (s_batch(g, d, 0, batch, first) < 0)
        return -1;
    int64_t lo = batch, done = 0;
    double t0 = gpp_now_ms(), t = t0;
    while (t - t0 < seconds * 1e3) {
        if (s_batch(g, d, lo, batch, buf) < 0)
            return -1;
        lo += batch, done += batch;
        t = gpp_now_ms();
    }
    return (double)done / ((t - t0) / 1e3);
}

/* Exposed data time per micro-batch (ms) with the device stand-in. */
static double s_exposed_ms(const gpp_graph_t *g, gpp_data_t *d, int64_t batch, double step_ms,
                           char *buf)
{
    /* the prefetch starts at the third micro-batch, and its two slots take
     * their memory (first-touch page faults) in the fills that follow:
     * on a VM where a fault costs ~0.5 GB/s the waits last up to the
     * seventh micro-batch */
    const int warm = 8, n = 20;
    double exposed = 0;
    for (int k = 0; k < warm + n; k++) {
        double t0 = gpp_now_ms();
        if (s_batch(g, d, (int64_t)k * batch, batch, buf) < 0)
            return -1;
        exposed += k < warm ? 0 : gpp_now_ms() - t0;
        struct timespec ts = {(time_t)(step_ms / 1e3), (long)(fmod(step_ms, 1e3) * 1e6)};
        nanosleep(&ts, NULL);
    }
    return exposed / n;
}

/* One row of the overlap table: the synthetic source (path NULL) or the
 * dataset file at path, with the device stand-in of step_ms. */
static void s_overlap(const gpp_graph_t *g, const char *path, int64_t batch, int threads,
                      double step_ms, char *buf, char *row, const char *name)
{
    double e[2] = {-1, -1};
    long long hits = 0;
    for (int pf = 0; pf < 2; pf++) {
        gpp_err_t err = {0};
        gpp_data_t *d = path ? gpp_data_open(g, path, 0, 0, &err) : gpp_data_new(g, 1);
        if (!d)
            break;
        gpp_data_set_threads(d, threads, pf);
        e[pf] = s_exposed_ms(g, d, batch, step_ms, buf);
        hits = pf ? (long long)gpp_data_prefetched(d) : hits;
        gpp_data_destroy(&d);
    }
    snprintf(row, 400, "| %s | %lld | %s | %d | %.2f | %.2f | %.2f | %lld |", name,
             (long long)batch, path ? "dataset file" : "synthetic", threads, step_ms, e[0], e[1],
             hits);
}

int main(int argc, char **argv)
{
    int max_t = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double seconds = 1;
    const char *const *list = DEFAULTS;
    int n_list = (int)(sizeof DEFAULTS / sizeof *DEFAULTS);
    int a = 1;
    for (; a + 1 < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
        if (strcmp(argv[a], "--max-threads") == 0)
            max_t = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--seconds") == 0)
            seconds = atof(argv[a + 1]);
        else
            break;
    }
    if (a < argc && ((argc - a) % 2 != 0 || strncmp(argv[a], "--", 2) == 0)) {
        fprintf(stderr, "usage: bench_data [--max-threads N] [--seconds S] [MODEL BATCH]...\n");
        return 2;
    }
    if (a < argc)
        list = (const char *const *)argv + a, n_list = argc - a;
    if (max_t < 1 || max_t > GPP_DATA_MAX_THREADS || seconds <= 0) {
        fprintf(stderr, "bench_data: --max-threads in [1, %d], --seconds > 0\n",
                GPP_DATA_MAX_THREADS);
        return 2;
    }
    printf("# %ld online CPUs; default data threads %d\n", sysconf(_SC_NPROCESSORS_ONLN),
           gpp_data_pool_default_threads());
    printf("| model | batch | source | threads | samples/s | MB/s | vs T=1 |\n");
    printf("|---|---|---|---|---|---|---|\n");
    int rc = 0;
    char overlap[32][400];
    int n_overlap = 0;
    for (int m = 0; m + 1 < n_list; m += 2) {
        gpp_err_t err = {0};
        gpp_graph_t *g = gpp_zoo_build(list[m], &err);
        int64_t batch = atoll(list[m + 1]);
        if (!g || batch < 1) {
            fprintf(stderr, "bench_data: %s %s: %s\n", list[m], list[m + 1],
                    g ? "batch must be >= 1" : err.msg);
            gpp_graph_destroy(&g);
            return 2;
        }
        size_t per = s_sample_bytes(g), bytes = per * (size_t)batch;
        char *buf = malloc(bytes), *ref = malloc(bytes), *got = malloc(bytes);
        double r1 = 0, rN = 0;
        for (int t = 1; t <= max_t; t++) {
            gpp_data_t *d = gpp_data_new(g, 1);
            gpp_data_set_threads(d, t, 0);
            double r = s_rate(g, d, batch, seconds, buf, t == 1 ? ref : got);
            gpp_data_destroy(&d);
            if (r < 0 || (t > 1 && memcmp(ref, got, bytes) != 0)) {
                fprintf(stderr, "bench_data: %s: T=%d %s\n", list[m], t,
                        r < 0 ? "failed" : "differs from T=1");
                rc = 1;
                break;
            }
            r1 = t == 1 ? r : r1;
            rN = r;
            printf("| %s | %lld | synthetic | %d | %.0f | %.0f | %.2fx |\n", list[m],
                   (long long)batch, t, r, r * (double)per / 1e6, r / r1);
            fflush(stdout);
        }
        if (rN > 0 && n_overlap < 32)
            s_overlap(g, NULL, batch, max_t, 1.5 * 1e3 * (double)batch / rN, buf,
                      overlap[n_overlap++], list[m]);
        /* the same samples from a dataset file (8 micro-batches, wrapping) */
        char path[] = "/tmp/bench_data_XXXXXX";
        int fd = mkstemp(path);
        gpp_data_t *syn = gpp_data_new(g, 1), *f = NULL;
        if (fd >= 0 && gpp_data_write_file(syn, path, 8 * batch, &err) == 0 &&
            (f = gpp_data_open(g, path, 0, 0, &err))) {
            double r = s_rate(g, f, batch, seconds, buf, got);
            printf("| %s | %lld | dataset file | 1 | %.0f | %.0f | %.2fx |\n", list[m],
                   (long long)batch, r, r * (double)per / 1e6, r / r1);
            if (r > 0 && n_overlap < 32)
                s_overlap(g, path, batch, max_t, 1.5 * 1e3 * (double)batch / r, buf,
                          overlap[n_overlap++], list[m]);
            if (memcmp(ref, got, bytes) != 0) {
                fprintf(stderr, "bench_data: %s: the file's samples differ\n", list[m]);
                rc = 1;
            }
        } else {
            fprintf(stderr, "bench_data: dataset file: %s\n", fd < 0 ? "mkstemp failed" : err.msg);
            rc = 1;
        }
        if (fd >= 0) {
            close(fd);
            unlink(path);
        }
        gpp_data_destroy(&f);
        gpp_data_destroy(&syn);
        free(buf);
        free(ref);
        free(got);
        gpp_graph_destroy(&g);
    }
    printf("\n| model | batch | source | threads | device step ms | data ms waited, no prefetch | "
           "data ms waited, prefetch | calls served by the prefetch |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n_overlap; i++)
        printf("%s\n", overlap[i]);
    return rc;
}
