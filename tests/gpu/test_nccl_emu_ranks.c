/* test_nccl_emu_ranks (label emu): the emulated NCCL
 * (tests/emu/gpp_nccl_emu.cc) between two processes, through nccl.h's
 * own functions: 8 MiB sent each way in one group (neither send waits for
 * the other rank's receive), an all-reduce whose bits are the same on both
 * ranks and equal to the rank-order sum, an all-gather; two ranks on one
 * device refused as NCCL refuses them (ncclInvalidUsage); a peer that exits
 * fails the receive waiting for it and ncclCommGetAsyncError reports
 * ncclRemoteError; ncclCommAbort from another thread ends a receive blocked
 * inside a queued task, leaving its buffer untouched. Rank 1 is a forked
 * child; it reports through its exit status. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/gpp_test.h"

/* Initialises rank `rank` of 2 on `device` (non-blocking, polled, as
 * gpp_comm_nccl.c does); the final state of the communicator. */
static ncclResult_t s_init(ncclComm_t *c, ncclUniqueId id, int rank, int device)
{
    cudaSetDevice(device);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(c, 2, id, rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress)
        return r;
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) {
        if (ncclCommGetAsyncError(*c, &st) != ncclSuccess)
            return ncclInternalError;
        usleep(1000);
    }
    return st;
}

enum { BIG = 8 << 20, NF = 1000 };

static float s_val(int rank, int i)
{
    return (float)((i * 7919 + rank * 104729) % 1000) * 1.0e-3f + (rank ? 1.0e4f : 0.0f);
}

/* Both ranks: one group sending BIG bytes each way, then an all-reduce and
 * an all-gather; *sum gets the all-reduce's result. 0 when the bytes
 * received are the peer's. */
static int s_exchange(ncclComm_t c, int rank, float *sum)
{
    cudaStream_t st;
    unsigned char *h = malloc(BIG), *d_out, *d_in;
    float *d_f, hf[NF];
    char *d_g, hg[2 * 37];
    int bad = 0;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    cudaMalloc((void **)&d_out, BIG);
    cudaMalloc((void **)&d_in, BIG);
    cudaMalloc((void **)&d_f, sizeof hf);
    cudaMalloc((void **)&d_g, sizeof hg);
    for (size_t i = 0; i < BIG; i++)
        h[i] = (unsigned char)(i * 31 + (size_t)rank * 17);
    cudaMemcpy(d_out, h, BIG, cudaMemcpyHostToDevice);
    for (int i = 0; i < NF; i++)
        hf[i] = s_val(rank, i);
    cudaMemcpy(d_f, hf, sizeof hf, cudaMemcpyHostToDevice);
    memset(hg, 'a' + rank, 37);
    cudaMemcpy(d_g + 37 * rank, hg, 37, cudaMemcpyHostToDevice);
    ncclGroupStart();
    ncclSend(d_out, BIG, ncclUint8, 1 - rank, c, st);
    ncclRecv(d_in, BIG, ncclUint8, 1 - rank, c, st);
    ncclResult_t r = ncclGroupEnd();
    r = r == ncclSuccess ? ncclAllReduce(d_f, d_f, NF, ncclFloat32, ncclSum, c, st) : r;
    r = r == ncclSuccess ? ncclAllGather(d_g + 37 * rank, d_g, 37, ncclUint8, c, st) : r;
    cudaStreamSynchronize(st);
    ncclResult_t a = ncclSuccess;
    ncclCommGetAsyncError(c, &a);
    if (r != ncclSuccess || a != ncclSuccess) {
        fprintf(stderr, "rank %d: %s / %s: %s\n", rank, ncclGetErrorString(r),
                ncclGetErrorString(a), ncclGetLastError(c));
        bad = 1;
    }
    cudaMemcpy(h, d_in, BIG, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < BIG && !bad; i++)
        bad = h[i] != (unsigned char)(i * 31 + (size_t)(1 - rank) * 17);
    cudaMemcpy(sum, d_f, sizeof hf, cudaMemcpyDeviceToHost);
    cudaMemcpy(hg, d_g, sizeof hg, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 2 * 37 && !bad; i++)
        bad = hg[i] != 'a' + i / 37;
    cudaFree(d_out);
    cudaFree(d_in);
    cudaFree(d_f);
    cudaFree(d_g);
    cudaStreamDestroy(st);
    free(h);
    return bad;
}

static void t_exchange(void)
{
    ncclUniqueId id;
    GPP_EXPECT(ncclGetUniqueId(&id) == ncclSuccess);
    int fds[2];
    GPP_EXPECT(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) { /* rank 1 on device 1: sends its all-reduce result back */
        ncclComm_t c = NULL;
        float sum[NF];
        int rc = s_init(&c, id, 1, 1) != ncclSuccess || s_exchange(c, 1, sum) != 0;
        if (write(fds[1], sum, sizeof sum) != (ssize_t)sizeof sum)
            rc = 1;
        ncclCommFinalize(c);
        ncclCommDestroy(c);
        _exit(rc ? 3 : 0);
    }
    ncclComm_t c = NULL;
    ncclResult_t r = s_init(&c, id, 0, 0);
    GPP_EXPECT_MSG(r == ncclSuccess, "%s: %s", ncclGetErrorString(r), ncclGetLastError(c));
    static float mine[NF], theirs[NF];
    GPP_EXPECT(r == ncclSuccess && s_exchange(c, 0, mine) == 0);
    size_t got = 0;
    while (got < sizeof theirs) {
        ssize_t k = read(fds[0], (char *)theirs + got, sizeof theirs - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    GPP_EXPECT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 status %d", st);
    int wrong = 0;
    for (int i = 0; i < NF; i++) {
        float want = s_val(0, i) + s_val(1, i);
        wrong += memcmp(&mine[i], &want, sizeof want) != 0 || memcmp(&mine[i], &theirs[i], 4) != 0;
    }
    printf("  8 MiB each way in one group, all-reduce of %d floats: %d differ\n", NF, wrong);
    GPP_EXPECT(got == sizeof theirs && wrong == 0);
    ncclCommFinalize(c);
    ncclCommDestroy(c);
    close(fds[0]);
    close(fds[1]);
}

/* two ranks on device 0: both refused */
static void t_same_device(void)
{
    ncclUniqueId id;
    GPP_EXPECT(ncclGetUniqueId(&id) == ncclSuccess);
    pid_t pid = fork();
    if (pid == 0) {
        ncclComm_t c = NULL;
        ncclResult_t r = s_init(&c, id, 1, 0);
        if (c)
            ncclCommAbort(c);
        _exit(r == ncclInvalidUsage ? 0 : 3);
    }
    ncclComm_t c = NULL;
    ncclResult_t r = s_init(&c, id, 0, 0);
    printf("  two ranks on device 0: %s: %s\n", ncclGetErrorString(r), ncclGetLastError(c));
    GPP_EXPECT(r == ncclInvalidUsage && strstr(ncclGetLastError(c), "both use CUDA device 0"));
    if (c)
        ncclCommAbort(c);
    int st = 0;
    waitpid(pid, &st, 0);
    GPP_EXPECT_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 status %d", st);
}

typedef struct {
    ncclComm_t c;
} s_abort_arg_t;

static void *s_abort_later(void *p)
{
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ncclCommAbort(((s_abort_arg_t *)p)->c);
    return NULL;
}

/* A receive from rank 1 that never sends, forced by cudaStreamSynchronize:
 * blocked inside the queued task until ncclCommAbort from another thread
 * (abort = 1) or until rank 1 exits (abort = 0). */
static void t_blocked_recv(int abort)
{
    ncclUniqueId id;
    GPP_EXPECT(ncclGetUniqueId(&id) == ncclSuccess);
    int fds[2];
    GPP_EXPECT(pipe(fds) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        ncclComm_t c = NULL;
        int rc = s_init(&c, id, 1, 1) != ncclSuccess;
        char b; /* stays until rank 0 is done (abort) or has initialised (exit) */
        rc |= read(fds[0], &b, 1) != 1;
        _exit(rc ? 3 : 0); /* no finalize: the connection just ends */
    }
    ncclComm_t c = NULL;
    ncclResult_t r = s_init(&c, id, 0, 0);
    GPP_EXPECT(r == ncclSuccess);
    if (!abort) /* rank 1 may go now */
        GPP_EXPECT(write(fds[1], "x", 1) == 1);
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    unsigned char *d, h[64];
    cudaMalloc((void **)&d, sizeof h);
    cudaMemset(d, 0x5a, sizeof h);
    GPP_EXPECT(ncclRecv(d, sizeof h, ncclUint8, 1, c, st) == ncclSuccess);
    pthread_t th;
    s_abort_arg_t arg = {c};
    if (abort)
        pthread_create(&th, NULL, s_abort_later, &arg);
    cudaError_t e = cudaStreamSynchronize(st);
    cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    int untouched = 1;
    for (size_t i = 0; i < sizeof h; i++)
        untouched &= h[i] == 0x5a;
    if (abort) {
        pthread_join(th, NULL);
        printf("  receive blocked in a task, aborted from another thread: %s\n",
               ncclGetLastError(NULL));
        GPP_EXPECT(strstr(ncclGetLastError(NULL), "aborted while it waited"));
        GPP_EXPECT(write(fds[1], "x", 1) == 1);
    } else {
        ncclResult_t a = ncclSuccess;
        GPP_EXPECT(ncclCommGetAsyncError(c, &a) == ncclSuccess);
        printf("  receive from a rank that exited: %s: %s\n", ncclGetErrorString(a),
               ncclGetLastError(c));
        GPP_EXPECT(a == ncclRemoteError);
        ncclCommAbort(c);
    }
    GPP_EXPECT(e == cudaSuccess && untouched);
    int status = 0;
    waitpid(pid, &status, 0);
    GPP_EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank 1 status %d", status);
    cudaFree(d);
    cudaStreamDestroy(st);
    close(fds[0]);
    close(fds[1]);
}

static void t_abort_blocked(void)
{
    t_blocked_recv(1);
}
static void t_peer_exits(void)
{
    t_blocked_recv(0);
}

static const gpp_test_case_t cases[] = {
    {"exchange", t_exchange},
    {"same_device", t_same_device},
    {"abort_blocked", t_abort_blocked},
    {"peer_exits", t_peer_exits},
    {NULL, NULL},
};

int main(void)
{
    setenv("GPP_EMU_DEVICES", "2", 1); /* read by the emulated runtime at each call */
    return gpp_test_run(cases);
}
