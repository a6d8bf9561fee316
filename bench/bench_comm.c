/* bench_comm: the Gloo TCP transport of gpp_comm on loopback, the figures
 * behind the planner's "cpu" intra-node link (s_loopback in
 * planner/gpp_cost.c).
 *
 *   bench_comm [--ranks N] [--reps R]
 *
 * Forks N ranks (2 or 4; default 2) that join one gpp_comm_gloo world on
 * 127.0.0.1 through a rendezvous table (coordinator/gpp_rdv) served by the
 * parent, as the agents of one host do, then:
 *  (a) point-to-point ping-pong between ranks 0 and 1 (any others idle) at
 *      4 B .. 64 MiB: rank 0 posts its receive, sends (gpp_comm_send) and
 *      waits for the echo; one-way time = round trip / 2, the median of R
 *      repetitions (default 15) after 2 untimed ones;
 *  (b) gpp_comm_allreduce_sum_f32 over the world at 4 KiB .. 64 MiB, each
 *      repetition right after a barrier; rank 0's time, median of R after 2
 *      untimed ones. The result is checked (wrong elements are counted).
 *      Beside it, for 2 ranks, "2 exch": twice the median time of ranks 0
 *      and 1 sending each other bytes/2 at once (irecv, send, wait), the
 *      bare transfers of the ring's two steps, without the reduction.
 * The affine model t = alpha + bytes / bw is fitted to the one-way times
 * two ways:
 *   "rel":  least squares over all sizes of the relative error
 *           (alpha + bytes/bw - t) / t, so that 4 B and 64 MiB weigh alike
 *           (plain least squares is decided by the largest sizes alone);
 *   "ends": alpha = the 4 B one-way time; 1/bw = the least-squares slope
 *           of time against bytes over the sizes >= 1 MiB.
 * Each all-reduce is compared with the planner's ring formula
 * (gpp_allreduce_ms: 2(d-1)/d bytes/bw + 2(d-1) alpha) under the "rel"
 * constants and under the "cpu" preset's intra link as compiled in.
 * Times are wall clock (CLOCK_MONOTONIC); the machine's load moves them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/comm/gpp_comm.h"
#include "agent/comm/gpp_rdv_client.h"
#include "coordinator/gpp_rdv.h"
#include "common/gpp_time.h"
#include "planner/gpp_cost.h"

#define MAX_BYTES ((size_t)64 << 20)
#define WARMUP 2
#define MAX_REPS 1000
#define N_P2P 13 /* 4 B * 4^k, k = 0..12: 4 B .. 64 MiB */
#define N_AR 8   /* 4 KiB * 4^k, k = 0..7: 4 KiB .. 64 MiB */

static size_t s_p2p_bytes(int k)
{
    return (size_t)4 << (2 * k);
}
static size_t s_ar_bytes(int k)
{
    return (size_t)4096 << (2 * k);
}

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, min and max of n values (ms); sorts v. */
typedef struct {
    double med, min, max;
} s_stat_t;

static s_stat_t s_stats(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return (s_stat_t){n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v[0], v[n - 1]};
}

/* One ping-pong of `bytes` between ranks 0 and 1; *rtt_ms is rank 0's
 * round trip (0 on rank 1). */
static int s_pingpong(gpp_comm_t *c, char *out, char *in, size_t bytes, uint32_t tag,
                      double *rtt_ms, gpp_err_t *err)
{
    *rtt_ms = 0;
    if (gpp_comm_rank(c) == 1)
        return gpp_comm_recv(c, in, bytes, 0, tag, err) || gpp_comm_send(c, in, bytes, 0, tag, err)
                   ? -1
                   : 0;
    gpp_comm_req_t *r = NULL;
    double t0 = gpp_now_ms();
    if (gpp_comm_irecv(c, in, bytes, 1, tag, &r, err) < 0)
        return -1;
    if (gpp_comm_send(c, out, bytes, 1, tag, err) < 0)
        return -1; /* r is freed with the comm */
    if (gpp_comm_wait(c, &r, err) < 0)
        return -1;
    *rtt_ms = gpp_now_ms() - t0;
    return 0;
}

/* Fit "rel": minimises sum_i ((alpha + b_i beta) / t_i - 1)^2, beta = 1/bw. */
static void s_fit_rel(const double *b, const double *t, int n, double *alpha, double *beta)
{
    double suu = 0, suv = 0, svv = 0, su = 0, sv = 0;
    for (int i = 0; i < n; i++) {
        double u = 1.0 / t[i], v = b[i] / t[i];
        suu += u * u, suv += u * v, svv += v * v, su += u, sv += v;
    }
    double det = suu * svv - suv * suv;
    *alpha = (su * svv - sv * suv) / det;
    *beta = (suu * sv - suv * su) / det;
}

/* Least-squares slope of t against b. */
static double s_slope(const double *b, const double *t, int n)
{
    double mb = 0, mt = 0, sbb = 0, sbt = 0;
    for (int i = 0; i < n; i++)
        mb += b[i] / n, mt += t[i] / n;
    for (int i = 0; i < n; i++)
        sbb += (b[i] - mb) * (b[i] - mb), sbt += (b[i] - mb) * (t[i] - mt);
    return sbt / sbb;
}

static void s_print_bytes(size_t b)
{
    if (b >= ((size_t)1 << 20))
        printf("%6zu MiB", b >> 20);
    else if (b >= 1024)
        printf("%6zu KiB", b >> 10);
    else
        printf("%6zu B  ", b);
}

/* Rank 0 prints everything from its statistics. */
static void s_report(int n_ranks, int reps, const s_stat_t *p2p, const s_stat_t *exch,
                     const s_stat_t *ar, size_t wrong)
{
    double b[N_P2P], t[N_P2P], big_b[N_P2P], big_t[N_P2P];
    int n_big = 0;
    for (int k = 0; k < N_P2P; k++) {
        b[k] = (double)s_p2p_bytes(k), t[k] = p2p[k].med;
        if (s_p2p_bytes(k) >= ((size_t)1 << 20))
            big_b[n_big] = b[k], big_t[n_big] = t[k], n_big++;
    }
    double a_rel, beta_rel; /* ms, ms per byte */
    s_fit_rel(b, t, N_P2P, &a_rel, &beta_rel);
    double a_ends = t[0], beta_ends = s_slope(big_b, big_t, n_big);
    gpp_link_t rel = {a_rel, 1e3 / beta_rel};
    gpp_cluster_t cl;
    gpp_err_t err = {{0}};
    if (gpp_cluster_init(&cl, "cpu", n_ranks, n_ranks, &err) < 0) {
        fprintf(stderr, "bench_comm: %s\n", err.msg);
        return;
    }

    printf("\np2p ping-pong, ranks 0 <-> 1: one-way = round trip / 2, median (min..max) of %d\n",
           reps);
    printf("%-10s %12s %21s %8s %11s\n", "bytes", "one-way us", "(min..max)", "GB/s", "fit rel us");
    for (int k = 0; k < N_P2P; k++) {
        s_print_bytes(s_p2p_bytes(k));
        printf(" %12.1f (%8.1f..%9.1f) %8.3f %11.1f\n", t[k] * 1e3, p2p[k].min * 1e3,
               p2p[k].max * 1e3, b[k] / (t[k] * 1e-3) / 1e9, gpp_link_ms(&rel, b[k]) * 1e3);
    }
    printf("fit rel  (least squares of the relative error, all %d sizes): "
           "alpha %.1f us, bw %.3f GB/s\n",
           N_P2P, a_rel * 1e3, 1e3 / beta_rel / 1e9);
    printf("fit ends (alpha = 4 B one-way; slope over the %d sizes >= 1 MiB): "
           "alpha %.1f us, bw %.3f GB/s\n",
           n_big, a_ends * 1e3, 1e3 / beta_ends / 1e9);
    printf("preset cpu intra (planner/gpp_cost.c s_loopback): alpha %.1f us, bw %.3f GB/s\n",
           cl.intra.alpha_ms * 1e3, cl.intra.bw_bytes_per_s / 1e9);

    printf("\nall-reduce (gpp_comm_allreduce_sum_f32) over %d ranks, after a barrier, "
           "median (min..max) of %d; %zu wrong elements\n",
           n_ranks, reps, wrong);
    printf("exch: ranks 0 and 1 send each other bytes/2 at once (the transfer of one ring step "
           "for 2 ranks), median of %d\n",
           reps);
    printf("%-10s %11s %19s %9s %9s %6s %12s %6s\n", "bytes", "measured ms", "(min..max)",
           "2 exch ms", "ring(rel)", "ratio", "ring(preset)", "ratio");
    for (int k = 0; k < N_AR; k++) {
        double bytes = (double)s_ar_bytes(k);
        double f_rel = gpp_allreduce_ms(&rel, n_ranks, bytes);
        double f_pre = gpp_allreduce_ms(&cl.intra, n_ranks, bytes);
        s_print_bytes(s_ar_bytes(k));
        printf(" %11.3f (%7.3f..%8.3f)", ar[k].med, ar[k].min, ar[k].max);
        if (n_ranks == 2)
            printf(" %9.3f", 2 * exch[k].med);
        else
            printf(" %9s", "-"); /* a pair's exchange is not a step of a larger ring */
        printf(" %9.3f %6.2f %12.3f %6.2f\n", f_rel, ar[k].med / f_rel, f_pre, ar[k].med / f_pre);
    }
}

/* One rank's whole run. Returns the process exit status. */
static int s_rank(const char *endpoint, const char *token, int n_ranks, int rank, int reps)
{
    gpp_err_t err = {{0}};
    gpp_comm_opts_t o = {.rdv = gpp_rdv_client_new(endpoint, token, rank, &err),
                         .prefix = "bench_comm",
                         .world_size = n_ranks,
                         .rank = rank,
                         .host = "127.0.0.1",
                         .timeout_ms = 120000};
    char *out = malloc(MAX_BYTES), *in = malloc(MAX_BYTES);
    float *ar = malloc(MAX_BYTES);
    s_stat_t p2p[N_P2P] = {{0}}, exch[N_AR] = {{0}}, ars[N_AR] = {{0}};
    double t[MAX_REPS];
    size_t wrong = 0;
    gpp_comm_t *c = NULL;
    if (!out || !in || !ar) {
        gpp_err_set(&err, "out of memory for 3 x %zu MiB buffers", MAX_BYTES >> 20);
        goto fail;
    }
    memset(out, rank + 1, MAX_BYTES); /* fault the pages in before timing */
    memset(in, 0, MAX_BYTES);
    memset(ar, 0, MAX_BYTES);
    c = o.rdv ? gpp_comm_gloo_new(&o, &err) : NULL;
    if (!c)
        goto fail;

    if (rank < 2) {
        for (int k = 0; k < N_P2P; k++) {
            for (int i = 0; i < WARMUP + reps; i++) {
                double rtt;
                if (s_pingpong(c, out, in, s_p2p_bytes(k), (uint32_t)k, &rtt, &err) < 0)
                    goto fail;
                if (i >= WARMUP)
                    t[i - WARMUP] = rtt / 2;
            }
            p2p[k] = s_stats(t, reps);
        }
        for (int k = 0; k < N_AR; k++)
            for (int i = 0; i < WARMUP + reps; i++) {
                size_t half = s_ar_bytes(k) / 2;
                gpp_comm_req_t *r = NULL;
                double t0 = gpp_now_ms();
                if (gpp_comm_irecv(c, in, half, 1 - rank, 100 + (uint32_t)k, &r, &err) < 0 ||
                    gpp_comm_send(c, out, half, 1 - rank, 100 + (uint32_t)k, &err) < 0 ||
                    gpp_comm_wait(c, &r, &err) < 0)
                    goto fail; /* a pending r is freed with the comm */
                if (i >= WARMUP)
                    t[i - WARMUP] = gpp_now_ms() - t0;
                if (i == WARMUP + reps - 1)
                    exch[k] = s_stats(t, reps);
            }
    }

    for (int k = 0; k < N_AR; k++) {
        size_t count = s_ar_bytes(k) / sizeof(float);
        for (int i = 0; i < WARMUP + reps; i++) {
            for (size_t j = 0; j < count; j++)
                ar[j] = (float)(rank + 1);
            if (gpp_comm_barrier(c, NULL, &err) < 0)
                goto fail;
            double t0 = gpp_now_ms();
            if (gpp_comm_allreduce_sum_f32(c, NULL, ar, count, &err) < 0)
                goto fail;
            if (i >= WARMUP)
                t[i - WARMUP] = gpp_now_ms() - t0;
        }
        const float want = (float)(n_ranks * (n_ranks + 1) / 2);
        for (size_t j = 0; j < count; j++)
            wrong += ar[j] != want;
        ars[k] = s_stats(t, reps);
    }
    if (rank == 0)
        s_report(n_ranks, reps, p2p, exch, ars, wrong);
    if (gpp_comm_barrier(c, NULL, &err) < 0)
        goto fail;
    gpp_comm_destroy(&c);
    free(out), free(in), free(ar);
    fflush(stdout);
    if (wrong)
        fprintf(stderr, "bench_comm: rank %d: %zu all-reduce elements wrong\n", rank, wrong);
    return wrong ? 1 : 0;
fail:
    fprintf(stderr, "bench_comm: rank %d: %s\n", rank, err.msg);
    gpp_comm_destroy(&c);
    free(out), free(in), free(ar);
    return 1;
}

int main(int argc, char **argv)
{
    int n_ranks = 2, reps = 15;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            n_ranks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_comm [--ranks 2|4] [--reps R]\n");
            return 2;
        }
    }
    if (n_ranks < 2 || n_ranks > 16 || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "bench_comm: --ranks must be 2..16 and --reps 1..%d\n", MAX_REPS);
        return 2;
    }
    gpp_err_t err = {{0}};
    /* the rendezvous: the coordinator's table on a port from the kernel */
    gpp_rdv_service_t *svc = gpp_rdv_service_new("tcp://127.0.0.1:*", n_ranks, &err);
    if (!svc) {
        fprintf(stderr, "bench_comm: %s\n", err.msg);
        return 1;
    }
    double load[3] = {0};
    if (getloadavg(load, 3) < 0)
        load[0] = load[1] = load[2] = -1;
    printf("bench_comm: %d ranks, gloo tcp on 127.0.0.1, %ld cores, load average %.2f %.2f %.2f\n",
           n_ranks, sysconf(_SC_NPROCESSORS_ONLN), load[0], load[1], load[2]);
    fflush(stdout);
    pid_t pids[16];
    int failed = 0;
    for (int r = 0; r < n_ranks; r++) {
        pids[r] = fork();
        if (pids[r] == 0)
            _exit(s_rank(gpp_rdv_service_endpoint(svc), gpp_rdv_service_token(svc), n_ranks, r,
                         reps));
        if (pids[r] < 0) {
            perror("bench_comm: fork");
            failed++;
        }
    }
    /* serve the rendezvous until every rank has exited */
    for (int left = n_ranks; left > 0;) {
        gpp_rdv_service_poll(svc, 20);
        for (int r = 0; r < n_ranks; r++) {
            int status = 0;
            if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r])
                continue;
            pids[r] = 0;
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "bench_comm: rank %d failed (status 0x%x)\n", r, status);
                failed++;
            }
        }
        for (int r = 0; r < n_ranks; r++)
            if (pids[r] < 0) /* fork failed: counted already */
                pids[r] = 0, left--;
    }
    gpp_rdv_service_destroy(&svc);
    return failed ? 1 : 0;
}
