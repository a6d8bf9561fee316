/* test_comm: the Gloo comm backend with N=4 forked ranks on loopback, the
 * rendezvous served by the parent: the coordinator's table (gpp_rdv) on a
 * ROUTER bound to a port from the kernel, reached by each rank's
 * rendezvous client. Point-to-point tensors (counting wrong elements),
 * all-reduce and variable-size all-gather (a member with 0 bytes each
 * round) over groups of 2 and 4 and the world, tags that do not mix,
 * test(), barrier, and abort unblocking a pending receive and a pending
 * all-gather. The table itself (limits, parked gets, timeouts, tokens,
 * members, close) and the client (set/get, timeout, refusal, abort).
 * Deterministic; each scenario is its own job (a fresh table and token). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/comm/gpp_comm.h"
#include "agent/comm/gpp_rdv_client.h"
#include "common/gpp_time.h"
#include "coordinator/gpp_rdv.h"
#include "tests/gpp_test.h"

#define N_RANKS 4
#define SCENARIO_TIMEOUT_MS 20000

static gpp_rdv_service_t *s_svc;            /* the parent's rendezvous */
static char s_token[GPP_RDV_TOKEN_LEN + 1]; /* this scenario's, read by the children */
static int s_pipe[2];                       /* rank 0 -> others: "you may leave" */

static gpp_rdv_client_t *s_client(int rank, const char *token)
{
    gpp_err_t err = {{0}};
    gpp_rdv_client_t *c = gpp_rdv_client_new(gpp_rdv_service_endpoint(s_svc), token, rank, &err);
    GPP_EXPECT_MSG(c, "rank %d: %s", rank, err.msg);
    return c;
}

static gpp_comm_t *s_join(int rank, const char *scenario)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "test_comm/%s", scenario);
    gpp_comm_opts_t o = {.rdv = s_client(rank, s_token),
                         .prefix = prefix,
                         .world_size = N_RANKS,
                         .rank = rank,
                         .host = "127.0.0.1",
                         .timeout_ms = 15000};
    gpp_err_t err = {{0}};
    gpp_comm_t *c = o.rdv ? gpp_comm_gloo_new(&o, &err) : NULL;
    GPP_EXPECT_MSG(c, "rank %d: %s", rank, err.msg);
    GPP_EXPECT(o.rdv == NULL); /* the comm took the client */
    return c;
}

static float s_val(int src, int dst, size_t i)
{
    return (float)(src * 1000 + dst * 100) + (float)(i % 977) * 0.25f;
}

/* ---- scenarios, run in each child ---- */

static void sc_p2p(int rank)
{
    gpp_comm_t *c = s_join(rank, "p2p");
    if (!c)
        return;
    GPP_EXPECT(gpp_comm_rank(c) == rank && gpp_comm_size(c) == N_RANKS);
    GPP_EXPECT(strcmp(gpp_comm_backend(c), "gloo") == 0);
    const size_t sizes[] = {1, 1000, (size_t)1 << 22}; /* up to 16 MiB */
    int right = (rank + 1) % N_RANKS, left = (rank + N_RANKS - 1) % N_RANKS;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        float *out = malloc(n * sizeof *out), *in = calloc(n, sizeof *in);
        for (size_t i = 0; i < n; i++)
            out[i] = s_val(rank, right, i);
        gpp_err_t err = {{0}};
        gpp_comm_req_t *rr = NULL, *sr = NULL;
        /* Receive posted first, send second, test() until done, then wait. */
        GPP_EXPECT_MSG(gpp_comm_irecv(c, in, n * sizeof *in, left, 7, &rr, &err) == 0, "%s",
                       err.msg);
        GPP_EXPECT_MSG(gpp_comm_isend(c, out, n * sizeof *out, right, 7, &sr, &err) == 0, "%s",
                       err.msg);
        int done = 0;
        double t0 = gpp_now_ms();
        while (rr && !done && gpp_now_ms() - t0 < 10000)
            GPP_EXPECT_MSG(gpp_comm_test(c, rr, &done, &err) == 0, "%s", err.msg);
        GPP_EXPECT(done);
        GPP_EXPECT_MSG(gpp_comm_wait(c, &rr, &err) == 0, "%s", err.msg);
        GPP_EXPECT_MSG(gpp_comm_wait(c, &sr, &err) == 0, "%s", err.msg);
        GPP_EXPECT(rr == NULL && sr == NULL);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            wrong += in[i] != s_val(left, rank, i);
        GPP_EXPECT_MSG(wrong == 0, "rank %d: %zu of %zu elements wrong", rank, wrong, n);
        free(out);
        free(in);
    }
    /* Bad peers are rejected before any transport call. */
    gpp_err_t err = {{0}};
    float x = 0;
    GPP_EXPECT(gpp_comm_send(c, &x, sizeof x, rank, 1, &err) == -1 && strstr(err.msg, "peer"));
    GPP_EXPECT(gpp_comm_send(c, &x, sizeof x, N_RANKS, 1, &err) == -1);
    /* Zero-byte messages complete on both sides. */
    GPP_EXPECT(gpp_comm_send(c, NULL, 0, right, 9, &err) == 0);
    GPP_EXPECT(gpp_comm_recv(c, NULL, 0, left, 9, &err) == 0);
    GPP_EXPECT_MSG(gpp_comm_barrier(c, NULL, &err) == 0, "%s", err.msg);
    gpp_comm_destroy(&c);
    GPP_EXPECT(c == NULL);
}

static void s_check_allreduce(gpp_comm_t *c, gpp_comm_group_t *g, const int *members, int n_members,
                              size_t count, const char *what)
{
    int rank = gpp_comm_rank(c);
    float *buf = malloc((count ? count : 1) * sizeof *buf);
    for (size_t i = 0; i < count; i++)
        buf[i] = (float)(rank + 1) + (float)(i % 1024) * 0.5f;
    gpp_err_t err = {{0}};
    int rc = gpp_comm_allreduce_sum_f32(c, g, buf, count, &err);
    GPP_EXPECT_MSG(rc == 0, "%s: %s", what, err.msg);
    size_t wrong = 0;
    float rsum = 0;
    for (int m = 0; m < n_members; m++)
        rsum += (float)(members[m] + 1);
    for (size_t i = 0; i < count; i++)
        wrong += buf[i] != rsum + (float)n_members * (float)(i % 1024) * 0.5f;
    GPP_EXPECT_MSG(wrong == 0, "rank %d %s count %zu: %zu wrong", rank, what, count, wrong);
    free(buf);
}

static void sc_allreduce(int rank)
{
    gpp_comm_t *c = s_join(rank, "allreduce");
    if (!c)
        return;
    const size_t counts[] = {1, 3, 1001, (size_t)1 << 20};
    int pair[2] = {rank & ~1, (rank & ~1) + 1}; /* {0,1} and {2,3} */
    int all[4] = {0, 1, 2, 3};
    gpp_err_t err = {{0}};
    gpp_comm_group_t *g2 = gpp_comm_group_new(c, pair, 2, &err);
    GPP_EXPECT_MSG(g2, "%s", err.msg);
    gpp_comm_group_t *g4 = gpp_comm_group_new(c, all, 4, &err);
    GPP_EXPECT_MSG(g4, "%s", err.msg);
    if (g2 && g4) {
        GPP_EXPECT(gpp_comm_group_size(g2) == 2 && gpp_comm_group_rank(g2) == (rank & 1));
        GPP_EXPECT(gpp_comm_group_size(g4) == 4 && gpp_comm_group_rank(g4) == rank);
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            s_check_allreduce(c, g2, pair, 2, counts[k], "group of 2");
            s_check_allreduce(c, g4, all, 4, counts[k], "group of 4");
            s_check_allreduce(c, NULL, all, 4, counts[k], "world");
        }
        GPP_EXPECT_MSG(gpp_comm_barrier(c, g2, &err) == 0, "%s", err.msg);
    }
    /* Membership is checked. */
    int others[2] = {(rank + 1) % 4, (rank + 2) % 4};
    if (others[0] > others[1]) {
        int t = others[0];
        others[0] = others[1], others[1] = t;
    }
    GPP_EXPECT(gpp_comm_group_new(c, others, 2, &err) == NULL && strstr(err.msg, "not a member"));
    gpp_comm_group_destroy(&g2);
    gpp_comm_group_destroy(&g4);
    GPP_EXPECT(g2 == NULL && g4 == NULL);
    GPP_EXPECT_MSG(gpp_comm_barrier(c, NULL, &err) == 0, "%s", err.msg);
    gpp_comm_destroy(&c);
}

static void *s_abort_later(void *arg);

/* Member m of a group contributes s_agv_bytes(m, round) bytes, byte j
 * being (m * 37 + round * 11 + j) & 0xff: sizes differ by member and one
 * member gives 0 bytes each round (member `round % n`). */
static size_t s_agv_bytes(int m, int round, int n)
{
    if (m == round % n)
        return 0;
    static const size_t sizes[] = {1, 7, 4096, (size_t)3 << 20};
    return sizes[(m + round) % 4] + (size_t)m;
}
static unsigned char s_agv_byte(int m, int round, size_t j)
{
    return (unsigned char)((size_t)(m * 37 + round * 11) + j);
}

static void s_check_allgatherv(gpp_comm_t *c, gpp_comm_group_t *g, int n, int round,
                               const char *what)
{
    int me = g ? gpp_comm_group_rank(g) : gpp_comm_rank(c);
    size_t mine_n = s_agv_bytes(me, round, n);
    unsigned char *mine = malloc(mine_n ? mine_n : 1);
    for (size_t j = 0; j < mine_n; j++)
        mine[j] = s_agv_byte(me, round, j);
    size_t each[N_RANKS] = {0};
    void *out = NULL;
    gpp_err_t err = {{0}};
    int rc = gpp_comm_allgatherv(c, g, mine_n ? mine : NULL, mine_n, &out, each, &err);
    GPP_EXPECT_MSG(rc == 0 && out, "%s round %d: %s", what, round, err.msg);
    if (rc == 0 && out) {
        size_t wrong = 0, off = 0, bad_sizes = 0;
        const unsigned char *p = out;
        for (int m = 0; m < n; m++) {
            bad_sizes += each[m] != s_agv_bytes(m, round, n);
            for (size_t j = 0; j < each[m] && !bad_sizes; j++)
                wrong += p[off + j] != s_agv_byte(m, round, j);
            off += each[m];
        }
        GPP_EXPECT_MSG(bad_sizes == 0 && wrong == 0,
                       "rank %d %s round %d: %zu sizes, %zu of %zu bytes wrong", gpp_comm_rank(c),
                       what, round, bad_sizes, wrong, off);
    }
    free(out);
    free(mine);
}

static void sc_allgatherv(int rank)
{
    gpp_comm_t *c = s_join(rank, "allgatherv");
    if (!c)
        return;
    int pair[2] = {rank & ~1, (rank & ~1) + 1};
    int all[4] = {0, 1, 2, 3};
    gpp_err_t err = {{0}};
    gpp_comm_group_t *g2 = gpp_comm_group_new(c, pair, 2, &err);
    GPP_EXPECT_MSG(g2, "%s", err.msg);
    gpp_comm_group_t *g4 = gpp_comm_group_new(c, all, 4, &err);
    GPP_EXPECT_MSG(g4, "%s", err.msg);
    if (g2 && g4)
        for (int round = 0; round < 4; round++) {
            s_check_allgatherv(c, g2, 2, round, "group of 2");
            s_check_allgatherv(c, g4, 4, round, "group of 4");
            s_check_allgatherv(c, NULL, 4, round, "world");
            /* interleaved with the other collective on the same group */
            s_check_allreduce(c, g4, all, 4, 1001, "all-reduce between all-gathers");
        }
    /* Everyone gives nothing: an empty result, still a buffer to free. */
    size_t each[N_RANKS] = {1, 1, 1, 1};
    void *out = NULL;
    GPP_EXPECT_MSG(gpp_comm_allgatherv(c, g4, NULL, 0, &out, each, &err) == 0 && out, "%s",
                   err.msg);
    GPP_EXPECT(each[0] == 0 && each[1] == 0 && each[2] == 0 && each[3] == 0);
    free(out);
    gpp_comm_group_destroy(&g2);
    gpp_comm_group_destroy(&g4);
    GPP_EXPECT_MSG(gpp_comm_barrier(c, NULL, &err) == 0, "%s", err.msg);
    gpp_comm_destroy(&c);
}

/* An all-gather whose peers never come is unblocked by abort(), in the size
 * phase; later ones fail at once. */
static void sc_allgatherv_abort(int rank)
{
    gpp_comm_t *c = s_join(rank, "allgatherv_abort");
    if (!c)
        return;
    gpp_err_t err = {{0}};
    if (rank != 0) {
        char byte;
        GPP_EXPECT(read(s_pipe[0], &byte, 1) == 1);
        gpp_comm_destroy(&c);
        return;
    }
    char mine[100] = {0};
    pthread_t t;
    pthread_create(&t, NULL, s_abort_later, c);
    void *out = (void *)&err;
    size_t each[N_RANKS];
    double t0 = gpp_now_ms();
    int rc = gpp_comm_allgatherv(c, NULL, mine, sizeof mine, &out, each, &err);
    double waited = gpp_now_ms() - t0;
    pthread_join(t, NULL);
    GPP_EXPECT(rc == -1 && out == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "aborted: test abort"), "%s", err.msg);
    GPP_EXPECT_MSG(waited >= 150 && waited < 5000, "allgatherv returned after %.0f ms", waited);
    printf("  rank 0: pending allgatherv unblocked by abort after %.0f ms: %s\n", waited, err.msg);
    GPP_EXPECT(gpp_comm_allgatherv(c, NULL, mine, sizeof mine, &out, each, &err) == -1 &&
               out == NULL && strstr(err.msg, "aborted"));
    for (int i = 1; i < N_RANKS; i++)
        GPP_EXPECT(write(s_pipe[1], "x", 1) == 1);
    gpp_comm_destroy(&c);
}

static void sc_tags(int rank)
{
    gpp_comm_t *c = s_join(rank, "tags");
    if (!c)
        return;
    enum { N = 4096 };
    static float a[N], b[N], ra[N], rb[N];
    gpp_err_t err = {{0}};
    if (rank == 0 || rank == 1) {
        int peer = 1 - rank;
        for (int i = 0; i < N; i++)
            a[i] = (float)(rank * 10 + 1), b[i] = (float)(rank * 10 + 2);
        gpp_comm_req_t *s1, *s2, *r2, *r1;
        /* Sends in tag order 1, 2; receives posted in order 2, 1. */
        GPP_EXPECT(gpp_comm_irecv(c, rb, sizeof rb, peer, 2, &r2, &err) == 0);
        GPP_EXPECT(gpp_comm_isend(c, a, sizeof a, peer, 1, &s1, &err) == 0);
        GPP_EXPECT(gpp_comm_isend(c, b, sizeof b, peer, 2, &s2, &err) == 0);
        GPP_EXPECT(gpp_comm_irecv(c, ra, sizeof ra, peer, 1, &r1, &err) == 0);
        GPP_EXPECT_MSG(gpp_comm_wait(c, &r2, &err) == 0, "%s", err.msg);
        GPP_EXPECT_MSG(gpp_comm_wait(c, &r1, &err) == 0, "%s", err.msg);
        GPP_EXPECT(gpp_comm_wait(c, &s1, &err) == 0 && gpp_comm_wait(c, &s2, &err) == 0);
        int wrong = 0;
        for (int i = 0; i < N; i++)
            wrong += ra[i] != (float)(peer * 10 + 1) || rb[i] != (float)(peer * 10 + 2);
        GPP_EXPECT_MSG(wrong == 0, "rank %d: %d elements of the wrong tag", rank, wrong);
    } else {
        /* Ranks 2 and 3: same tag from two different peers does not mix. */
        int peer = rank == 2 ? 3 : 2;
        float mine = (float)rank, got = 0;
        gpp_comm_req_t *r, *s;
        GPP_EXPECT(gpp_comm_irecv(c, &got, sizeof got, peer, 1, &r, &err) == 0);
        GPP_EXPECT(gpp_comm_isend(c, &mine, sizeof mine, peer, 1, &s, &err) == 0);
        GPP_EXPECT(gpp_comm_wait(c, &r, &err) == 0 && gpp_comm_wait(c, &s, &err) == 0);
        GPP_EXPECT(got == (float)peer);
    }
    GPP_EXPECT_MSG(gpp_comm_barrier(c, NULL, &err) == 0, "%s", err.msg);
    gpp_comm_destroy(&c);
}

static void *s_abort_later(void *arg)
{
    nanosleep(&(struct timespec){0, 200 * 1000000L}, NULL);
    gpp_comm_abort(arg, "test abort");
    return NULL;
}

static void sc_abort(int rank)
{
    gpp_comm_t *c = s_join(rank, "abort");
    if (!c)
        return;
    gpp_err_t err = {{0}};
    if (rank != 0) {
        /* Stay connected (never send) until rank 0 has checked. */
        char byte;
        GPP_EXPECT(read(s_pipe[0], &byte, 1) == 1);
        gpp_comm_destroy(&c);
        return;
    }
    float buf[16];
    gpp_comm_req_t *r;
    GPP_EXPECT(gpp_comm_irecv(c, buf, sizeof buf, 1, 3, &r, &err) == 0);
    pthread_t t;
    pthread_create(&t, NULL, s_abort_later, c);
    double t0 = gpp_now_ms();
    int rc = gpp_comm_wait(c, &r, &err);
    double waited = gpp_now_ms() - t0;
    pthread_join(t, NULL);
    GPP_EXPECT(rc == -1 && r == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "aborted: test abort"), "%s", err.msg);
    GPP_EXPECT_MSG(waited >= 150 && waited < 5000, "wait returned after %.0f ms", waited);
    printf("  rank 0: pending recv unblocked by abort after %.0f ms: %s\n", waited, err.msg);
    /* Everything after the abort fails at once, including a second abort's
     * reason not replacing the first. */
    gpp_comm_abort(c, "second");
    GPP_EXPECT(gpp_comm_irecv(c, buf, sizeof buf, 2, 3, &r, &err) == -1 &&
               strstr(err.msg, "test abort"));
    GPP_EXPECT(gpp_comm_allreduce_sum_f32(c, NULL, buf, 16, &err) == -1 &&
               strstr(err.msg, "aborted"));
    for (int i = 1; i < N_RANKS; i++)
        GPP_EXPECT(write(s_pipe[1], "x", 1) == 1);
    gpp_comm_destroy(&c);
}

/* A rank dies without a word: its peers get errors, not crashes or hangs,
 * and a group that does not contain it keeps working. */
static void sc_peer_dies(int rank)
{
    gpp_comm_t *c = s_join(rank, "peer_dies");
    if (!c)
        return;
    gpp_err_t err = {{0}};
    /* Everyone is connected before rank 3 leaves: a barrier, then the
     * others tell rank 3 through the pipe that theirs returned too. */
    GPP_EXPECT_MSG(gpp_comm_barrier(c, NULL, &err) == 0, "%s", err.msg);
    if (rank == 3) {
        char byte;
        for (int i = 0; i < 3; i++)
            GPP_EXPECT(read(s_pipe[0], &byte, 1) == 1);
        _exit(gpp_test_failures_);
    }
    GPP_EXPECT(write(s_pipe[1], "x", 1) == 1);
    float buf[256] = {0};
    double t0 = gpp_now_ms();
    int rc = gpp_comm_recv(c, buf, sizeof buf, 3, 1, &err);
    GPP_EXPECT_MSG(rc == -1 && strstr(err.msg, "rank 3"), "recv from the dead rank: %s", err.msg);
    GPP_EXPECT(gpp_now_ms() - t0 < 14000); /* an error from the transport, not the timeout */
    if (rank == 0)
        printf("  rank 0: recv from a dead rank: %s\n", err.msg);
    int pair[2] = {0, 1};
    if (rank < 2) {
        gpp_comm_group_t *g = gpp_comm_group_new(c, pair, 2, &err);
        GPP_EXPECT_MSG(g, "%s", err.msg);
        if (g)
            s_check_allreduce(c, g, pair, 2, 1000, "group of 2 beside a dead rank");
        gpp_comm_group_destroy(&g);
    }
    gpp_comm_destroy(&c);
}

/* ---- parent side ---- */

static void s_run(const char *name, void (*scenario)(int rank))
{
    if (pipe(s_pipe) < 0) {
        GPP_EXPECT(!"pipe");
        return;
    }
    gpp_err_t err = {{0}};
    gpp_rdv_t *table = gpp_rdv_service_table(s_svc);
    GPP_EXPECT_MSG(gpp_rdv_open(table, N_RANKS, &err) == 0, "%s", err.msg);
    snprintf(s_token, sizeof s_token, "%s", gpp_rdv_token(table));
    pid_t pids[N_RANKS];
    for (int r = 0; r < N_RANKS; r++) {
        fflush(stdout);
        pids[r] = fork();
        if (pids[r] == 0) {
            scenario(r);
            fflush(stdout);
            _exit(gpp_test_failures_ > 100 ? 100 : gpp_test_failures_);
        }
        GPP_EXPECT(pids[r] > 0);
    }
    double t0 = gpp_now_ms();
    int left = N_RANKS;
    int status[N_RANKS];
    int done[N_RANKS] = {0};
    while (left > 0 && gpp_now_ms() - t0 < SCENARIO_TIMEOUT_MS) {
        for (int r = 0; r < N_RANKS; r++) {
            if (done[r] || pids[r] <= 0)
                continue;
            if (waitpid(pids[r], &status[r], WNOHANG) == pids[r])
                done[r] = 1, left--;
        }
        gpp_rdv_service_poll(s_svc, 5); /* serve the rendezvous meanwhile */
    }
    for (int r = 0; r < N_RANKS; r++) {
        if (!done[r] && pids[r] > 0) {
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &status[r], 0);
            GPP_EXPECT_MSG(0, "%s: rank %d still running after %d ms, killed", name, r,
                           SCENARIO_TIMEOUT_MS);
            continue;
        }
        GPP_EXPECT_MSG(WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 0,
                       "%s: rank %d exited with status 0x%x", name, r, status[r]);
    }
    close(s_pipe[0]);
    close(s_pipe[1]);
    printf("  %s: %.0f ms, %d rendezvous keys\n", name, gpp_now_ms() - t0, gpp_rdv_n_keys(table));
    gpp_rdv_close(table, "scenario over");
}

static void t_p2p(void)
{
    s_run("p2p", sc_p2p);
}
static void t_allreduce(void)
{
    s_run("allreduce", sc_allreduce);
}
static void t_allgatherv(void)
{
    s_run("allgatherv", sc_allgatherv);
}
static void t_allgatherv_abort(void)
{
    s_run("allgatherv_abort", sc_allgatherv_abort);
}
static void t_tags(void)
{
    s_run("tags", sc_tags);
}
static void t_abort(void)
{
    s_run("abort", sc_abort);
}
static void t_peer_dies(void)
{
    s_run("peer_dies", sc_peer_dies);
}

/* ---- the rendezvous table, in process ---- */

typedef struct {
    int n;
    Gpp__RdvStatus status[16];
    uint64_t request_seq[16];
    char text[16][256];
    size_t n_entries[16];
    char value0[16][64];
} s_replies_t;

static int s_capture(void *arg, const void *id, size_t id_len, gpp_msg_t *m)
{
    s_replies_t *r = arg;
    (void)id, (void)id_len;
    gpp_err_t err = {{0}};
    uint8_t *buf = NULL;
    size_t len = 0;
    GPP_EXPECT_MSG(gpp_msg_encode(m, &buf, &len, &err) == 0, "%s", err.msg); /* valid reply */
    free(buf);
    if (r->n < 16 && m->body_case == GPP__ENVELOPE__BODY_RDV_REPLY) {
        const Gpp__RdvReply *rp = m->rdv_reply;
        r->status[r->n] = rp->status;
        r->request_seq[r->n] = rp->request_seq;
        snprintf(r->text[r->n], sizeof r->text[0], "%s", rp->text ? rp->text : "");
        r->n_entries[r->n] = rp->n_entries;
        if (rp->n_entries)
            snprintf(r->value0[r->n], sizeof r->value0[0], "%.*s", (int)rp->entries[0]->value.len,
                     (const char *)rp->entries[0]->value.data);
        r->n++;
    }
    return 0;
}

static int s_member_odd_out(void *arg, int rank)
{
    (void)arg;
    return rank != 3;
}

static void s_set(gpp_rdv_t *t, int rank, uint64_t seq, const char *token, const char *key,
                  const char *value, size_t len)
{
    Gpp__RdvSet b = GPP__RDV_SET__INIT;
    b.token = (char *)token;
    b.key = (char *)key;
    b.value.data = (uint8_t *)value;
    b.value.len = len;
    gpp_msg_t m;
    gpp_msg_wrap(&m, seq, rank, GPP__ENVELOPE__BODY_RDV_SET, &b);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_msg_validate(&m, &err) == 0, "%s", err.msg);
    gpp_rdv_handle(t, "id", 2, &m, 0);
}

static void s_get(gpp_rdv_t *t, int rank, uint64_t seq, const char *token, const char **keys,
                  size_t n, int timeout_ms, double now)
{
    Gpp__RdvGet b = GPP__RDV_GET__INIT;
    b.token = (char *)token;
    b.keys = (char **)keys;
    b.n_keys = n;
    b.timeout_ms = timeout_ms;
    gpp_msg_t m;
    gpp_msg_wrap(&m, seq, rank, GPP__ENVELOPE__BODY_RDV_GET, &b);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_msg_validate(&m, &err) == 0, "%s", err.msg);
    gpp_rdv_handle(t, "id", 2, &m, now);
}

static void t_rdv_table(void)
{
    s_replies_t r = {0};
    gpp_rdv_limits_t lim = {
        .max_keys = 3, .max_value_bytes = 8, .max_total_bytes = 24, .max_parked = 1};
    gpp_rdv_t *t = gpp_rdv_new(&lim, s_capture, s_member_odd_out, &r);
    gpp_err_t err = {{0}};
    const char *zero = "00000000000000000000000000000000";
    /* closed: refused */
    s_set(t, 0, 1, zero, "a", "1", 1);
    GPP_EXPECT(r.n == 1 && r.status[0] == GPP__RDV_STATUS__RDV_REFUSED &&
               strstr(r.text[0], "open"));
    GPP_EXPECT(gpp_rdv_open(t, 4, &err) == 0 && strlen(gpp_rdv_token(t)) == GPP_RDV_TOKEN_LEN);
    char tok[GPP_RDV_TOKEN_LEN + 1];
    snprintf(tok, sizeof tok, "%s", gpp_rdv_token(t));
    r.n = 0;
    s_set(t, 0, 2, zero, "a", "1", 1); /* wrong token */
    s_set(t, 4, 2, tok, "a", "1", 1);  /* rank outside the world */
    s_set(t, 3, 2, tok, "a", "1", 1);  /* not a member */
    GPP_EXPECT(r.n == 3 && strstr(r.text[0], "token") && strstr(r.text[1], "not an agent") &&
               strstr(r.text[2], "not an agent"));
    GPP_EXPECT(gpp_rdv_n_keys(t) == 0);
    /* a get parks until its key is set; then set and get are answered */
    r.n = 0;
    const char *k_ab[] = {"a", "b"};
    s_get(t, 1, 7, tok, k_ab, 2, 1000, 0);
    GPP_EXPECT(r.n == 0 && gpp_rdv_n_parked(t) == 1);
    s_get(t, 2, 8, tok, k_ab, 2, 1000, 0); /* one parked get at most */
    GPP_EXPECT(r.n == 1 && r.status[0] == GPP__RDV_STATUS__RDV_REFUSED &&
               strstr(r.text[0], "max_parked"));
    s_set(t, 0, 3, tok, "a", "va", 2);
    GPP_EXPECT(r.n == 2 && r.status[1] == GPP__RDV_STATUS__RDV_OK && r.request_seq[1] == 3);
    s_set(t, 0, 4, tok, "b", "vb", 2);
    GPP_EXPECT(r.n == 4 && r.status[3] == GPP__RDV_STATUS__RDV_OK && r.request_seq[3] == 7 &&
               r.n_entries[3] == 2 && !strcmp(r.value0[3], "va"));
    GPP_EXPECT(gpp_rdv_n_parked(t) == 0 && gpp_rdv_n_keys(t) == 2 && gpp_rdv_n_bytes(t) == 6);
    /* overwrite; a present key answers at once */
    r.n = 0;
    s_set(t, 0, 5, tok, "a", "new", 3);
    const char *k_a[] = {"a"};
    s_get(t, 1, 9, tok, k_a, 1, 0, 0);
    GPP_EXPECT(r.n == 2 && r.n_entries[1] == 1 && !strcmp(r.value0[1], "new"));
    /* limits, each named */
    r.n = 0;
    s_set(t, 0, 6, tok, "c", "123456789", 9); /* value bytes */
    s_set(t, 0, 7, tok, "c", "12345678", 8);  /* 7 + 9 bytes: fits */
    s_set(t, 0, 8, tok, "d", "12345678", 8);  /* keys */
    s_set(t, 0, 9, tok, "c", "12345678+", 9); /* value bytes again */
    GPP_EXPECT(r.n == 4 && strstr(r.text[0], "max_value_bytes") &&
               r.status[1] == GPP__RDV_STATUS__RDV_OK && strstr(r.text[2], "max_keys"));
    gpp_rdv_limits_t lim2 = {.max_total_bytes = 10};
    gpp_rdv_t *t2 = gpp_rdv_new(&lim2, s_capture, NULL, &r);
    GPP_EXPECT(gpp_rdv_open(t2, 1, &err) == 0);
    r.n = 0;
    s_set(t2, 0, 1, gpp_rdv_token(t2), "k", "12345678", 8);
    s_set(t2, 0, 2, gpp_rdv_token(t2), "l", "12", 2);
    GPP_EXPECT(r.n == 2 && r.status[0] == GPP__RDV_STATUS__RDV_OK &&
               strstr(r.text[1], "max_total_bytes"));
    gpp_rdv_destroy(&t2);
    /* timeouts name the missing keys */
    r.n = 0;
    const char *k_x[] = {"a", "x/1"};
    s_get(t, 1, 10, tok, k_x, 2, 100, 1000.0);
    gpp_rdv_tick(t, 1050.0);
    GPP_EXPECT(r.n == 0);
    gpp_rdv_tick(t, 1100.0);
    GPP_EXPECT(r.n == 1 && r.status[0] == GPP__RDV_STATUS__RDV_TIMEOUT &&
               strstr(r.text[0], "x/1") && !strstr(r.text[0], "a,"));
    /* close answers parked gets and forgets everything; a new job, a new token */
    r.n = 0;
    s_get(t, 1, 11, tok, k_x, 2, 1000, 0);
    gpp_rdv_close(t, "job over");
    GPP_EXPECT(r.n == 1 && r.status[0] == GPP__RDV_STATUS__RDV_REFUSED &&
               strstr(r.text[0], "job over"));
    GPP_EXPECT(gpp_rdv_n_keys(t) == 0 && gpp_rdv_n_parked(t) == 0 && !gpp_rdv_token(t)[0]);
    GPP_EXPECT(gpp_rdv_open(t, 4, &err) == 0 && strcmp(tok, gpp_rdv_token(t)) != 0);
    gpp_rdv_destroy(&t);
    GPP_EXPECT(t == NULL);
    char ep[128];
    gpp_rdv_endpoint("tcp://*:5555", 5555, 1, ep, sizeof ep);
    GPP_EXPECT(!strcmp(ep, "tcp://127.0.0.1:5555"));
    gpp_rdv_endpoint("tcp://10.1.2.3:0", 4242, 0, ep, sizeof ep);
    GPP_EXPECT(!strcmp(ep, "tcp://10.1.2.3:4242"));
}

/* ---- the rendezvous client against the parent's table ---- */

static void *s_rdv_abort_later(void *arg)
{
    nanosleep(&(struct timespec){0, 200 * 1000000L}, NULL);
    gpp_rdv_client_abort(arg, "test abort");
    return NULL;
}

static void sc_rdv_client(int rank)
{
    gpp_rdv_client_t *c = s_client(rank, s_token);
    if (!c)
        return;
    gpp_err_t err = {{0}};
    char key[32];
    snprintf(key, sizeof key, "client/%d", rank);
    GPP_EXPECT_MSG(gpp_rdv_client_set(c, key, &rank, sizeof rank, 5000, &err) == 0, "%s", err.msg);
    /* everyone's key: parked until the last rank has set its own */
    const char *keys[N_RANKS] = {"client/0", "client/1", "client/2", "client/3"};
    void *vals[N_RANKS];
    size_t lens[N_RANKS];
    GPP_EXPECT_MSG(gpp_rdv_client_get(c, keys, N_RANKS, 5000, vals, lens, &err) == 0, "%s",
                   err.msg);
    for (int i = 0; i < N_RANKS; i++) {
        GPP_EXPECT(vals[i] && lens[i] == sizeof(int) && *(int *)vals[i] == i);
        free(vals[i]);
    }
    /* a key nobody sets: the coordinator's timeout names it */
    const char *missing = "client/missing";
    double t0 = gpp_now_ms();
    GPP_EXPECT(gpp_rdv_client_get(c, &missing, 1, 200, vals, lens, &err) == -1 &&
               strstr(err.msg, "timed out") && strstr(err.msg, "client/missing") && !vals[0]);
    GPP_EXPECT(gpp_now_ms() - t0 >= 150);
    if (rank == 0) {
        /* a wrong token is refused */
        gpp_rdv_client_t *bad = s_client(rank, "0123456789abcdef0123456789abcdef");
        GPP_EXPECT(bad && gpp_rdv_client_set(bad, "x", "1", 1, 5000, &err) == -1 &&
                   strstr(err.msg, "token"));
        gpp_rdv_client_destroy(&bad);
        GPP_EXPECT(gpp_rdv_client_new("tcp://127.0.0.1:1", "short", 0, &err) == NULL);
    }
    /* abort from another thread unblocks a get */
    pthread_t th;
    pthread_create(&th, NULL, s_rdv_abort_later, c);
    t0 = gpp_now_ms();
    GPP_EXPECT(gpp_rdv_client_get(c, &missing, 1, 10000, NULL, NULL, &err) == -1 &&
               strstr(err.msg, "aborted: test abort"));
    GPP_EXPECT(gpp_now_ms() - t0 < 2000);
    pthread_join(th, NULL);
    GPP_EXPECT(gpp_rdv_client_set(c, key, "1", 1, 1000, &err) == -1 && strstr(err.msg, "aborted"));
    gpp_rdv_client_destroy(&c);
    GPP_EXPECT(c == NULL);
}

static void t_rdv_client(void)
{
    s_run("rdv_client", sc_rdv_client);
}

static const gpp_test_case_t cases[] = {
    {"rdv_table", t_rdv_table},
    {"rdv_client", t_rdv_client},
    {"p2p_tensors", t_p2p},
    {"allreduce_groups_2_4_world", t_allreduce},
    {"allgatherv_sizes_groups_2_4_world", t_allgatherv},
    {"allgatherv_abort", t_allgatherv_abort},
    {"tags_do_not_mix", t_tags},
    {"abort_unblocks_recv", t_abort},
    {"peer_dies", t_peer_dies},
    {NULL, NULL},
};

int main(void)
{
    gpp_err_t err = {{0}};
    s_svc = gpp_rdv_service_new("tcp://127.0.0.1:*", N_RANKS, &err); /* a port from the kernel */
    if (!s_svc) {
        fprintf(stderr, "test_comm: %s\n", err.msg);
        return 1;
    }
    int rc = gpp_test_run(cases);
    GPP_EXPECT(gpp_rdv_service_dropped(s_svc) == 0);
    gpp_rdv_service_destroy(&s_svc);
    return rc ? rc : gpp_test_failures_ != 0;
}
