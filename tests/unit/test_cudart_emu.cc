/* test_cudart_emu: the emulated CUDA runtime (tests/emu/
 * gpp_cudart_emu.cc) keeps the device's rules that the emulated GPU tests
 * rely on: queued work runs only when forced, so a missing wait shows as
 * stale data; copies from pageable memory read the source at the call, from
 * page-locked memory when they run; capture records instead of running,
 * refuses the calls the device refuses and replays what it recorded; memory
 * is tracked and bounded. Prints "N passed, M failed". */
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/emu/gpp_emu_rt.h"

static int s_pass, s_fail;
#define EXPECT(c)                                                                                  \
    do {                                                                                           \
        if (c)                                                                                     \
            s_pass++;                                                                              \
        else {                                                                                     \
            s_fail++;                                                                              \
            std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #c);                   \
        }                                                                                          \
    } while (0)

static void t_lazy_and_staging(void)
{
    cudaStream_t st;
    EXPECT(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
    int *dev, *pinned, pageable = 7, out = 0;
    EXPECT(cudaMalloc((void **)&dev, 2 * sizeof(int)) == cudaSuccess);
    EXPECT(dev[0] == -1); /* fresh device memory reads as 0xff bytes */
    EXPECT(cudaMallocHost((void **)&pinned, sizeof(int)) == cudaSuccess);
    *pinned = 1;
    EXPECT(cudaMemcpyAsync(dev, pinned, sizeof(int), cudaMemcpyHostToDevice, st) == cudaSuccess);
    EXPECT(cudaMemcpyAsync(dev + 1, &pageable, sizeof(int), cudaMemcpyHostToDevice, st) ==
           cudaSuccess);
    EXPECT(dev[0] == -1 && dev[1] == -1); /* queued, not run */
    *pinned = 2;                          /* the copy from page-locked memory has not read it yet */
    pageable = 8;                         /* the pageable source was staged at the call */
    /* to pageable memory: the call returns once the copy ran (and what was before it) */
    EXPECT(cudaMemcpyAsync(&out, dev, sizeof(int), cudaMemcpyDeviceToHost, st) == cudaSuccess);
    EXPECT(out == 2);
    EXPECT(cudaStreamSynchronize(st) == cudaSuccess);
    EXPECT(dev[1] == 7);
    /* directions must match the memory; ranges must stay inside it */
    EXPECT(cudaMemcpyAsync(&out, &pageable, 4, cudaMemcpyHostToDevice, st) ==
           cudaErrorInvalidValue);
    EXPECT(cudaMemcpyAsync(dev, pinned, 3 * sizeof(int), cudaMemcpyDeviceToDevice, st) ==
           cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaErrorInvalidValue);
    EXPECT(cudaGetLastError() == cudaSuccess);
    EXPECT(cudaFreeHost(pinned) == cudaSuccess);
    EXPECT(cudaFree(dev) == cudaSuccess);
    EXPECT(cudaFree(dev) == cudaErrorInvalidValue);
    EXPECT(cudaStreamDestroy(st) == cudaSuccess);
}

static void t_streams_and_events(void)
{
    cudaStream_t a, b;
    cudaEvent_t ev, t0, t1;
    EXPECT(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) == cudaSuccess);
    EXPECT(cudaEventCreateWithFlags(&t0, cudaEventDefault) == cudaSuccess);
    EXPECT(cudaEventCreateWithFlags(&t1, cudaEventDefault) == cudaSuccess);
    int *x, *y;
    EXPECT(cudaMalloc((void **)&x, 64) == cudaSuccess &&
           cudaMalloc((void **)&y, 64) == cudaSuccess);
    /* without a wait, b's copy may run before a's memset: here it does */
    EXPECT(cudaMemsetAsync(x, 0, 64, a) == cudaSuccess);
    EXPECT(cudaMemcpyAsync(y, x, 64, cudaMemcpyDeviceToDevice, b) == cudaSuccess);
    EXPECT(cudaStreamSynchronize(b) == cudaSuccess);
    EXPECT(y[0] == -1);
    EXPECT(cudaStreamSynchronize(a) == cudaSuccess && x[0] == 0);
    /* with the wait, b's copy runs after what a queued before the record */
    EXPECT(cudaEventRecord(t0, a) == cudaSuccess);
    EXPECT(cudaMemsetAsync(x, 1, 64, a) == cudaSuccess);
    EXPECT(cudaEventRecord(ev, a) == cudaSuccess);
    EXPECT(cudaEventRecord(t1, a) == cudaSuccess);
    EXPECT(cudaStreamWaitEvent(b, ev, 0) == cudaSuccess);
    EXPECT(cudaMemcpyAsync(y, x, 64, cudaMemcpyDeviceToDevice, b) == cudaSuccess);
    EXPECT(x[0] == 0);
    EXPECT(cudaStreamSynchronize(b) == cudaSuccess);
    EXPECT(y[0] == 0x01010101);
    float ms = -1;
    EXPECT(cudaEventElapsedTime(&ms, t0, t1) == cudaErrorNotReady); /* t1's record not run yet */
    EXPECT(cudaEventSynchronize(t1) == cudaSuccess);
    EXPECT(cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess && ms >= 0);
    EXPECT(cudaEventElapsedTime(&ms, t0, ev) == cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    /* queued host work runs in order when forced */
    static int order[3], n;
    n = 0;
    for (int i = 0; i < 3; i++)
        EXPECT(gpp_emu::enqueue(a, "test", [i] { order[n++] = i; }) == cudaSuccess);
    EXPECT(n == 0);
    EXPECT(cudaEventQuery(t1) == cudaSuccess && n == 0); /* t1 is before them */
    EXPECT(cudaDeviceSynchronize() == cudaSuccess && n == 3 && order[2] == 2);
    EXPECT(gpp_emu::enqueue((cudaStream_t)&n, "bad", [] {}) == cudaErrorInvalidResourceHandle);
    (void)cudaGetLastError();
    EXPECT(cudaFree(x) == cudaSuccess && cudaFree(y) == cudaSuccess);
    EXPECT(cudaEventDestroy(ev) == cudaSuccess && cudaEventDestroy(t0) == cudaSuccess &&
           cudaEventDestroy(t1) == cudaSuccess);
    EXPECT(cudaStreamDestroy(a) == cudaSuccess && cudaStreamDestroy(b) == cudaSuccess);
}

static void t_capture(void)
{
    cudaStream_t st, side;
    EXPECT(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess);
    EXPECT(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) == cudaSuccess);
    static int runs;
    runs = 0;
    int *d;
    EXPECT(cudaMalloc((void **)&d, 16) == cudaSuccess);
    EXPECT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    EXPECT(gpp_emu::enqueue(st, "test", [] { runs++; }) == cudaSuccess);
    EXPECT(cudaMemsetAsync(d, 0, 16, st) == cudaSuccess);
    EXPECT(cudaStreamSynchronize(st) == cudaErrorStreamCaptureUnsupported);
    cudaGraph_t g;
    EXPECT(cudaStreamEndCapture(st, &g) == cudaErrorStreamCaptureInvalidated && !g);
    EXPECT(runs == 0);
    (void)cudaGetLastError();

    EXPECT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    EXPECT(gpp_emu::enqueue(st, "test", [] { runs++; }) == cudaSuccess);
    EXPECT(cudaStreamEndCapture(st, &g) == cudaSuccess && g);
    cudaGraphExec_t x;
    EXPECT(cudaGraphInstantiate(&x, g, 0) == cudaSuccess);
    EXPECT(cudaGraphDestroy(g) == cudaSuccess);
    EXPECT(cudaGraphLaunch(x, st) == cudaSuccess && cudaGraphLaunch(x, st) == cudaSuccess);
    EXPECT(runs == 0);
    EXPECT(cudaStreamSynchronize(st) == cudaSuccess && runs == 2);
    EXPECT(cudaGraphExecDestroy(x) == cudaSuccess);

    /* unsafe calls while capturing: refused, capture invalid */
    void *p;
    int host = 0;
    EXPECT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    EXPECT(cudaMalloc(&p, 16) == cudaErrorStreamCaptureUnsupported);
    EXPECT(cudaStreamEndCapture(st, &g) == cudaErrorStreamCaptureInvalidated);
    EXPECT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    EXPECT(cudaMemcpyAsync(d, &host, 4, cudaMemcpyHostToDevice, st) ==
           cudaErrorStreamCaptureUnsupported);
    EXPECT(cudaStreamEndCapture(st, &g) == cudaErrorStreamCaptureInvalidated);

    /* fork and join through events; a side stream left unjoined fails the capture */
    cudaEvent_t fork, join;
    EXPECT(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) == cudaSuccess);
    EXPECT(cudaEventCreateWithFlags(&join, cudaEventDisableTiming) == cudaSuccess);
    EXPECT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    EXPECT(cudaEventRecord(fork, st) == cudaSuccess && cudaStreamWaitEvent(side, fork, 0) == 0);
    EXPECT(gpp_emu::enqueue(side, "test", [] { runs += 10; }) == cudaSuccess);
    EXPECT(cudaEventRecord(join, side) == cudaSuccess && cudaStreamWaitEvent(st, join, 0) == 0);
    EXPECT(cudaStreamEndCapture(st, &g) == cudaSuccess);
    EXPECT(cudaGraphInstantiate(&x, g, 0) == cudaSuccess && cudaGraphLaunch(x, st) == 0);
    EXPECT(cudaStreamSynchronize(st) == cudaSuccess && runs == 12);
    EXPECT(cudaGraphExecDestroy(x) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);
    EXPECT(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
    EXPECT(cudaEventRecord(fork, st) == cudaSuccess && cudaStreamWaitEvent(side, fork, 0) == 0);
    EXPECT(cudaStreamEndCapture(st, &g) == cudaErrorStreamCaptureUnjoined);
    EXPECT(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal) ==
           cudaErrorStreamCaptureUnsupported);
    (void)cudaGetLastError();
    EXPECT(cudaEventDestroy(fork) == cudaSuccess && cudaEventDestroy(join) == cudaSuccess);
    EXPECT(cudaFree(d) == cudaSuccess);
    EXPECT(cudaStreamDestroy(st) == cudaSuccess && cudaStreamDestroy(side) == cudaSuccess);
}

static void t_memory(void)
{
    size_t free0, total;
    EXPECT(cudaMemGetInfo(&free0, &total) == cudaSuccess && total == ((size_t)64 << 20));
    void *a = nullptr, *b = nullptr;
    EXPECT(cudaMalloc(&a, (size_t)48 << 20) == cudaSuccess);
    EXPECT(cudaMalloc(&b, (size_t)32 << 20) == cudaErrorMemoryAllocation && !b);
    EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation);
    size_t free1;
    EXPECT(cudaMemGetInfo(&free1, &total) == cudaSuccess && free0 - free1 == ((size_t)48 << 20));
    EXPECT(gpp_emu::mem_lookup((char *)a + 16, 32) == gpp_emu::MEM_DEVICE);
    EXPECT(gpp_emu::mem_lookup((char *)a + ((size_t)48 << 20) - 8, 16) == gpp_emu::MEM_OVERRUN);
    int local[4];
    EXPECT(gpp_emu::mem_lookup(local, sizeof local) == gpp_emu::MEM_PAGEABLE);
    EXPECT(cudaHostRegister(local, sizeof local, cudaHostRegisterDefault) == cudaSuccess);
    EXPECT(gpp_emu::mem_lookup(local + 1, 8) == gpp_emu::MEM_PINNED);
    EXPECT(cudaHostRegister(local + 1, 4, cudaHostRegisterDefault) ==
           cudaErrorHostMemoryAlreadyRegistered);
    EXPECT(cudaHostUnregister(local) == cudaSuccess);
    EXPECT(cudaHostUnregister(local) == cudaErrorHostMemoryNotRegistered);
    (void)cudaGetLastError();
    EXPECT(cudaFree(a) == cudaSuccess);
    int n = -1;
    EXPECT(cudaGetDeviceCount(&n) == cudaSuccess && n == 1);
    EXPECT(cudaSetDevice(1) == cudaErrorInvalidDevice);
    struct cudaDeviceProp p;
    EXPECT(cudaGetDeviceProperties(&p, 0) == cudaSuccess && p.major == 9 &&
           p.totalGlobalMem == total);
    (void)cudaGetLastError();
}

int main(void)
{
    setenv("GPP_EMU_MEM_MB", "64", 1);
    t_lazy_and_staging();
    t_streams_and_events();
    t_capture();
    t_memory();
    std::printf("%d passed, %d failed\n", s_pass, s_fail);
    return s_fail != 0;
}
