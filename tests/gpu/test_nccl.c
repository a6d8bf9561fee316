/* test_nccl (label gpu): the NCCL comm backend on a 1-rank communicator,
 * the rendezvous served in-process by a thread: every edge warmed up,
 * all-reduce on the world and on a group (device memory, exact bits),
 * all-gather-v and barrier (host buffers), grouped send/recv to self of
 * several sizes in one ncclGroupStart/End, ordered after a compute stream;
 * and a send/recv to self held behind compute work that never finishes,
 * blocked in gpp_comm_wait, returning with
 * "aborted: <reason>" when another thread calls gpp_comm_abort (the comm's
 * own timeout is far longer and says something else). Without CUDA in the
 * build or without a usable GPU it prints why and exits 77 (ctest:
 * Skipped). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/comm/gpp_comm.h"
#include "agent/comm/gpp_comm_nccl.h"
#include "coordinator/gpp_rdv.h"
#include "tests/gpp_test.h"

#ifdef GPP_HAVE_CUDA
#include <cuda_runtime_api.h>

static gpp_rdv_service_t *s_svc;
static atomic_int s_stop;

static void *s_serve(void *arg)
{
    (void)arg;
    while (!atomic_load(&s_stop))
        gpp_rdv_service_poll(s_svc, 10);
    return NULL;
}

static gpp_comm_t *s_open(const char *prefix, void *compute, int timeout_ms)
{
    gpp_err_t err = {{0}};
    gpp_comm_opts_t o = {.rdv = gpp_rdv_client_new(gpp_rdv_service_endpoint(s_svc),
                                                   gpp_rdv_service_token(s_svc), 0, &err),
                         .prefix = prefix,
                         .world_size = 1,
                         .rank = 0,
                         .timeout_ms = timeout_ms,
                         .device = 0,
                         .compute_stream = compute};
    gpp_comm_t *c = o.rdv ? gpp_comm_new("nccl", &o, &err) : NULL;
    GPP_EXPECT_MSG(c, "%s", err.msg);
    return c;
}

#define CU(call) GPP_EXPECT_MSG((call) == cudaSuccess, "%s", #call)

static void t_collectives(void)
{
    gpp_comm_t *c = s_open("t/coll", NULL, 60000);
    if (!c)
        return;
    gpp_err_t err = {{0}};
    GPP_EXPECT(strcmp(gpp_comm_backend(c), "nccl") == 0 && gpp_comm_is_device(c));
    const int self = 0;
    GPP_EXPECT_MSG(gpp_comm_nccl_warmup(c, &self, 1, &err) == 0, "%s", err.msg);
    enum { N = 100003 };
    float *h = malloc(N * sizeof *h), *back = malloc(N * sizeof *back), *d = NULL;
    for (int i = 0; i < N; i++)
        h[i] = (float)(i % 977) * 0.37f - 11.0f;
    CU(cudaMalloc((void **)&d, N * sizeof *d));
    CU(cudaMemcpy(d, h, N * sizeof *d, cudaMemcpyHostToDevice));
    /* one rank: the sum is the input, bit for bit */
    GPP_EXPECT_MSG(gpp_comm_allreduce_sum_f32(c, NULL, d, N, &err) == 0, "%s", err.msg);
    const int ranks[] = {0};
    gpp_comm_group_t *g = gpp_comm_group_new(c, ranks, 1, &err);
    GPP_EXPECT_MSG(g && gpp_comm_group_size(g) == 1 && gpp_comm_group_rank(g) == 0, "%s", err.msg);
    if (g)
        GPP_EXPECT_MSG(gpp_comm_allreduce_sum_f32(c, g, d, N, &err) == 0, "%s", err.msg);
    /* the same rank set again is refused (its unique id was used) */
    GPP_EXPECT(gpp_comm_group_new(c, ranks, 1, &err) == NULL && strstr(err.msg, "exists"));
    CU(cudaMemcpy(back, d, N * sizeof *d, cudaMemcpyDeviceToHost));
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += memcmp(&h[i], &back[i], sizeof *h) != 0;
    printf("  all-reduce of %d floats: %d wrong\n", N, wrong);
    GPP_EXPECT(wrong == 0);
    /* host-buffer collectives */
    char msg[37];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (char)('a' + i % 26);
    void *out = NULL;
    size_t each[1] = {0};
    GPP_EXPECT_MSG(gpp_comm_allgatherv(c, g, msg, sizeof msg, &out, each, &err) == 0, "%s",
                   err.msg);
    GPP_EXPECT(out && each[0] == sizeof msg && memcmp(out, msg, sizeof msg) == 0);
    free(out);
    GPP_EXPECT_MSG(gpp_comm_barrier(c, NULL, &err) == 0, "%s", err.msg);
    gpp_comm_group_destroy(&g);
    cudaFree(d);
    free(h);
    free(back);
    gpp_comm_destroy(&c);
}

/* sends and receives to self in one group, after work on a compute stream */
static void t_p2p_self(void)
{
    cudaStream_t compute;
    CU(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    gpp_comm_t *c = s_open("t/p2p", compute, 60000);
    if (!c)
        return;
    gpp_err_t err = {{0}};
    const size_t sizes[] = {1, 4096, (size_t)1 << 20, 0};
    enum { K = sizeof sizes / sizeof sizes[0] };
    unsigned char *src[K], *dst[K], *hs[K];
    gpp_comm_req_t *rs[K], *rr[K];
    for (int k = 0; k < K; k++) {
        size_t n = sizes[k] ? sizes[k] : 1;
        hs[k] = malloc(n);
        for (size_t i = 0; i < n; i++)
            hs[k][i] = (unsigned char)(i * 131 + (size_t)k * 7);
        CU(cudaMalloc((void **)&src[k], n));
        CU(cudaMalloc((void **)&dst[k], n));
        CU(cudaMemsetAsync(dst[k], 0, n, compute));
        /* produced on the compute stream: the send must wait for it */
        CU(cudaMemcpyAsync(src[k], hs[k], n, cudaMemcpyHostToDevice, compute));
    }
    for (int k = 0; k < K; k++) {
        GPP_EXPECT_MSG(gpp_comm_isend(c, src[k], sizes[k], 0, (uint32_t)k, &rs[k], &err) == 0, "%s",
                       err.msg);
        GPP_EXPECT_MSG(gpp_comm_irecv(c, dst[k], sizes[k], 0, (uint32_t)k, &rr[k], &err) == 0, "%s",
                       err.msg);
    }
    GPP_EXPECT_MSG(gpp_comm_flush(c, &err) == 0, "%s", err.msg);
    for (int k = 0; k < K; k++) {
        GPP_EXPECT_MSG(rs[k] && gpp_comm_wait(c, &rs[k], &err) == 0, "%s", err.msg);
        GPP_EXPECT_MSG(rr[k] && gpp_comm_wait(c, &rr[k], &err) == 0, "%s", err.msg);
    }
    CU(cudaStreamSynchronize(compute));
    for (int k = 0; k < K; k++) {
        unsigned char *got = malloc(sizes[k] ? sizes[k] : 1);
        CU(cudaMemcpy(got, dst[k], sizes[k] ? sizes[k] : 1, cudaMemcpyDeviceToHost));
        size_t wrong = 0;
        for (size_t i = 0; i < sizes[k]; i++)
            wrong += got[i] != hs[k][i];
        printf("  send/recv to self, %zu bytes: %zu wrong\n", sizes[k], wrong);
        GPP_EXPECT(wrong == 0);
        free(got);
        cudaFree(src[k]);
        cudaFree(dst[k]);
        free(hs[k]);
    }
    gpp_comm_destroy(&c);
    cudaStreamDestroy(compute);
}

/* A gate that a host function on the compute stream waits at: the
 * stream (and every NCCL call ordered after it) stays blocked until the
 * gate opens. Host functions may not call CUDA; they may block. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
    gpp_comm_t *comm;
} s_gate_t;

static void CUDART_CB s_gate_wait(void *arg)
{
    s_gate_t *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}

static void s_gate_open(s_gate_t *g)
{
    pthread_mutex_lock(&g->mu);
    g->open = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* 200 ms after the start, abort the comm; open the gate 200 ms later, so
 * that ncclCommAbort never waits on the blocked stream for long. */
static void *s_abort_later(void *arg)
{
    s_gate_t *g = arg;
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    gpp_comm_abort(g->comm, "test abort");
    nanosleep(&ts, NULL);
    s_gate_open(g);
    return NULL;
}

/* A send/recv to self that cannot start, because it is ordered after
 * compute work that does not finish (a host function waiting at a gate):
 * gpp_comm_wait blocks until another thread aborts the comm, then fails
 * with the abort's reason. (A receive with no matching send is not a way to
 * block a 1-rank communicator: NCCL refuses it at ncclGroupEnd.) */
static void t_abort_blocked_recv(void)
{
    cudaStream_t compute = NULL;
    CU(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    gpp_comm_t *c = s_open("t/abort", compute, 120000);
    if (!c)
        return;
    gpp_err_t err = {{0}};
    void *d = NULL, *src = NULL;
    CU(cudaMalloc(&d, 4096));
    CU(cudaMalloc(&src, 4096));
    CU(cudaMemset(src, 7, 4096));
    s_gate_t g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .comm = c};
    CU(cudaLaunchHostFunc(compute, s_gate_wait, &g));
    gpp_comm_req_t *rs = NULL, *r = NULL;
    GPP_EXPECT_MSG(gpp_comm_isend(c, src, 4096, 0, 1, &rs, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(gpp_comm_irecv(c, d, 4096, 0, 1, &r, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(gpp_comm_flush(c, &err) == 0, "%s", err.msg);
    pthread_t th;
    pthread_create(&th, NULL, s_abort_later, &g);
    int rc = r ? gpp_comm_wait(c, &r, &err) : -1;
    printf("  blocked receive: %s\n", err.msg);
    GPP_EXPECT_MSG(rc == -1 && strstr(err.msg, "aborted: test abort"), "%s", err.msg);
    pthread_join(th, NULL);
    /* dead afterwards: every later call fails at once */
    GPP_EXPECT(gpp_comm_allreduce_sum_f32(c, NULL, (float *)d, 1, &err) == -1 &&
               strstr(err.msg, "aborted"));
    if (rs)
        gpp_comm_wait(c, &rs, &err);
    gpp_comm_destroy(&c);
    /* the device is still usable: no sticky error was left behind */
    CU(cudaStreamSynchronize(compute));
    CU(cudaGetLastError());
    cudaStreamDestroy(compute);
    cudaFree(d);
    cudaFree(src);
}

static const gpp_test_case_t cases[] = {
    {"collectives", t_collectives},
    {"p2p_self", t_p2p_self},
    {"abort_blocked_recv", t_abort_blocked_recv},
    {NULL, NULL},
};

int main(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIPPED: no usable GPU (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    gpp_err_t err = {{0}};
    s_svc = gpp_rdv_service_new("tcp://127.0.0.1:*", 1, &err);
    if (!s_svc) {
        fprintf(stderr, "rendezvous service: %s\n", err.msg);
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, s_serve, NULL);
    int rc = gpp_test_run(cases);
    atomic_store(&s_stop, 1);
    pthread_join(th, NULL);
    gpp_rdv_service_destroy(&s_svc);
    return rc;
}
#else
int main(void)
{
    printf("SKIPPED: this gpp was built without CUDA\n");
    return 77;
}
#endif
