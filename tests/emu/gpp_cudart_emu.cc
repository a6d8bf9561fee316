/* gpp_cudart_emu: the CUDA runtime functions the CUDA backend calls,
 * emulated on the host (why and what: gpp_emu_rt.h, docs/gpu.md "The host
 * emulation"). Linked instead of libcudart into the emulated builds of the
 * GPU tests; never into a product binary.
 *
 * Memory: cudaMalloc is an aligned host allocation filled with 0xff bytes
 * (NaN as fp32, -1 as int32: a read of memory nothing wrote shows in the
 * results), limited to GPP_EMU_MEM_MB (default 8192) so that the backend's
 * out-of-memory path can run. Every allocation and registered host range is
 * tracked, so copies and products can check their pointers.
 *
 * Streams: each holds a queue of work that runs only when forced (see
 * gpp_emu_rt.h): cudaStreamSynchronize, cudaEventSynchronize/Query on an
 * event behind it, a wait of another stream on such an event when that
 * stream's work runs, a copy to pageable host memory (synchronous on the
 * device too), cudaFree/cudaFreeHost/cudaDeviceSynchronize (which
 * synchronise the device). The legacy default stream runs its work at once,
 * after the work of the blocking streams (the backend's streams are
 * non-blocking and never wait for it, as on the device).
 *
 * Copies follow the driver's documented synchronisation ("API
 * synchronization behavior", CUDA driver API): from pageable host memory the
 * source is read at the call (the driver stages it), from page-locked
 * memory when the copy runs; to pageable host memory the call returns once
 * the copy has run.
 *
 * Capture (cudaStreamBeginCapture): work queued on the capturing stream, and
 * on streams that join it by waiting on an event recorded in it, goes into
 * the graph; cudaGraphLaunch queues the graph's work in capture order. A
 * call the runtime refuses while the calling thread captures (the modes
 * global and thread-local: cudaMalloc, cudaFree, synchronisations, copies
 * from pageable memory, queries of captured events) returns
 * cudaErrorStreamCaptureUnsupported and invalidates the capture, so that
 * cudaStreamEndCapture then fails with cudaErrorStreamCaptureInvalidated,
 * as on the device.
 *
 * All calls hold one process-wide lock; queued work runs under it, one
 * task at a time (the kernel emulator is not reentrant). */
#include <cuda_runtime_api.h>

#include <pthread.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "tests/emu/gpp_emu_rt.h"

struct CUgraph_st;

namespace
{

struct task {
    enum kind_t { WORK, RECORD, WAIT } kind = WORK;
    std::function<void()> fn;
    const char *what = "";
    CUevent_st *ev = nullptr;       /* RECORD: the event; */
    CUstream_st *wait_st = nullptr; /* WAIT: the stream and position to reach */
    uint64_t wait_pos = 0;
};

} /* namespace */

struct CUstream_st {
    unsigned flags = 0;
    std::deque<task> q;
    uint64_t queued = 0, done = 0; /* tasks queued and run so far */
    CUgraph_st *cap = nullptr;     /* the graph this stream captures into */
    bool cap_origin = false;       /* the stream that began the capture */
    pthread_t cap_thread{};
    cudaStreamCaptureMode cap_mode = cudaStreamCaptureModeGlobal;
};

struct CUevent_st {
    unsigned flags = 0;
    CUstream_st *st = nullptr; /* stream of the last record; null: never recorded */
    uint64_t pos = 0;          /* complete once st->done >= pos */
    bool captured = false;     /* last recorded inside a capture */
    CUgraph_st *cap = nullptr;
    std::chrono::steady_clock::time_point t; /* when its record ran */
};

struct CUgraph_st {
    std::vector<task> tasks; /* WORK only, in capture order */
    bool invalid = false;
    std::set<CUstream_st *> joined; /* streams that joined and have not been joined back */
};

struct CUgraphExec_st {
    std::vector<task> tasks;
};

namespace
{

struct mem_rec {
    size_t bytes;
    gpp_emu::mem_kind kind;
    bool registered; /* cudaHostRegister: not ours to free */
};

std::recursive_mutex g_lock;
std::map<uintptr_t, mem_rec> g_mem;
std::set<CUstream_st *> g_streams;
std::set<CUevent_st *> g_events;
CUstream_st g_legacy;
size_t g_dev_bytes = 0; /* device memory allocated */
cudaError_t g_last = cudaSuccess;
int g_device = 0;

typedef std::lock_guard<std::recursive_mutex> guard;

long s_env_long(const char *name, long dflt, long lo, long hi)
{
    const char *v = std::getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = std::strtol(v, &end, 10);
    if (*end || x < lo || x > hi) {
        std::fprintf(stderr, "gpp_cudart_emu: %s=%s: expected an integer in %ld..%ld\n", name, v,
                     lo, hi);
        std::exit(2);
    }
    return x;
}
int s_devices()
{
    return (int)s_env_long("GPP_EMU_DEVICES", 1, 0, 16);
}
size_t s_mem_total()
{
    return (size_t)s_env_long("GPP_EMU_MEM_MB", 8192, 1, 1 << 20) << 20;
}

cudaError_t s_err(cudaError_t e)
{
    if (e != cudaSuccess)
        g_last = e;
    return e;
}

CUstream_st *s_stream(cudaStream_t st)
{
    if (st == nullptr || st == cudaStreamLegacy || st == cudaStreamPerThread)
        return &g_legacy;
    return g_streams.count(st) ? st : nullptr;
}

/* the capture the calling thread runs in a mode that refuses unsafe calls */
CUgraph_st *s_thread_capture()
{
    pthread_t me = pthread_self();
    for (CUstream_st *s : g_streams)
        if (s->cap && s->cap_origin && s->cap_mode != cudaStreamCaptureModeRelaxed &&
            (s->cap_mode == cudaStreamCaptureModeGlobal || pthread_equal(s->cap_thread, me)))
            return s->cap;
    return nullptr;
}
/* An unsafe call while capturing: refused, and the capture is invalid. The
 * device says nothing until cudaStreamEndCapture; the emulation names the
 * call on stderr, which is what one needs to find it. */
bool s_refused_in_capture(const char *call)
{
    CUgraph_st *g = s_thread_capture();
    if (!g)
        return false;
    if (!g->invalid)
        std::fprintf(stderr,
                     "gpp_cudart_emu: %s while this thread captures a stream: refused "
                     "(cudaErrorStreamCaptureUnsupported), the capture is invalidated\n",
                     call);
    g->invalid = true;
    g_last = cudaErrorStreamCaptureUnsupported;
    return true;
}

void s_drain(CUstream_st *s, uint64_t upto);

void s_run(CUstream_st *s, task &t)
{
    switch (t.kind) {
    case task::WORK:
        t.fn();
        break;
    case task::RECORD:
        t.ev->t = std::chrono::steady_clock::now();
        break;
    case task::WAIT:
        s_drain(t.wait_st, t.wait_pos);
        break;
    }
    (void)s;
}

/* Runs s's queued work until `upto` tasks of it have run. */
void s_drain(CUstream_st *s, uint64_t upto)
{
    while (s->done < upto && !s->q.empty()) {
        task t = std::move(s->q.front());
        s->q.pop_front();
        s_run(s, t);
        s->done++;
    }
}
void s_drain_all()
{
    for (CUstream_st *s : g_streams)
        s_drain(s, s->queued);
}
void s_drain_blocking()
{
    for (CUstream_st *s : g_streams)
        if (!(s->flags & cudaStreamNonBlocking))
            s_drain(s, s->queued);
}

cudaError_t s_queue(CUstream_st *s, task t)
{
    if (s->cap) {
        if (t.kind == task::WORK)
            s->cap->tasks.push_back(std::move(t));
        return cudaSuccess;
    }
    if (s == &g_legacy) {
        /* the legacy stream waits for the blocking streams, and runs now */
        s_drain_blocking();
        s_run(s, t);
        s->queued++;
        s->done++;
        return cudaSuccess;
    }
    s->q.push_back(std::move(t));
    s->queued++;
    return cudaSuccess;
}

const mem_rec *s_lookup(const void *p, uintptr_t *base)
{
    uintptr_t a = (uintptr_t)p;
    auto it = g_mem.upper_bound(a);
    if (it == g_mem.begin())
        return nullptr;
    --it;
    if (a >= it->first + it->second.bytes && !(it->second.bytes == 0 && a == it->first))
        return nullptr;
    *base = it->first;
    return &it->second;
}

} /* namespace */

namespace gpp_emu
{

cudaError_t enqueue(cudaStream_t st, const char *what, std::function<void()> fn)
{
    guard l(g_lock);
    CUstream_st *s = s_stream(st);
    if (!s)
        return s_err(cudaErrorInvalidResourceHandle);
    task t;
    t.fn = std::move(fn);
    t.what = what;
    return s_err(s_queue(s, std::move(t)));
}

mem_kind mem_lookup(const void *p, size_t bytes)
{
    guard l(g_lock);
    uintptr_t base;
    const mem_rec *r = s_lookup(p, &base);
    if (!r)
        return MEM_PAGEABLE;
    if ((uintptr_t)p + bytes > base + r->bytes)
        return MEM_OVERRUN;
    return r->kind;
}

void set_last_error(cudaError_t e)
{
    guard l(g_lock);
    s_err(e);
}

} /* namespace gpp_emu */

/* ---- errors ---- */

#define S_ERRORS(X)                                                                                \
    X(cudaSuccess, "no error")                                                                     \
    X(cudaErrorInvalidValue, "invalid argument")                                                   \
    X(cudaErrorMemoryAllocation, "out of memory")                                                  \
    X(cudaErrorInvalidConfiguration, "invalid configuration argument")                             \
    X(cudaErrorInvalidDevice, "invalid device ordinal")                                            \
    X(cudaErrorInvalidResourceHandle, "invalid resource handle")                                   \
    X(cudaErrorNotReady, "device not ready")                                                       \
    X(cudaErrorNoDevice, "no CUDA-capable device is detected")                                     \
    X(cudaErrorHostMemoryAlreadyRegistered,                                                        \
      "part or all of the requested memory range is already mapped")                               \
    X(cudaErrorHostMemoryNotRegistered,                                                            \
      "pointer does not correspond to a registered memory region")                                 \
    X(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                        \
    X(cudaErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")       \
    X(cudaErrorStreamCaptureInvalidated,                                                           \
      "operation failed due to a previous error during capture")                                   \
    X(cudaErrorStreamCaptureUnmatched, "capture was not initiated in this stream")                 \
    X(cudaErrorStreamCaptureUnjoined, "capturing stream has unjoined work")                        \
    X(cudaErrorIllegalState, "the operation is not permitted in the current state")

extern "C" const char *CUDARTAPI cudaGetErrorName(cudaError_t e)
{
#define S_NAME(c, s)                                                                               \
    if (e == c)                                                                                    \
        return #c;
    S_ERRORS(S_NAME)
#undef S_NAME
    return "cudaErrorUnknown";
}

extern "C" const char *CUDARTAPI cudaGetErrorString(cudaError_t e)
{
#define S_STRING(c, s)                                                                             \
    if (e == c)                                                                                    \
        return s;
    S_ERRORS(S_STRING)
#undef S_STRING
    return "unknown error";
}

extern "C" cudaError_t CUDARTAPI cudaGetLastError(void)
{
    guard l(g_lock);
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}

extern "C" cudaError_t CUDARTAPI cudaPeekAtLastError(void)
{
    guard l(g_lock);
    return g_last;
}

/* ---- device ---- */

extern "C" cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    if (!count)
        return s_err(cudaErrorInvalidValue);
    *count = s_devices();
    return *count ? cudaSuccess : s_err(cudaErrorNoDevice);
}

extern "C" cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    guard l(g_lock);
    if (device < 0 || device >= s_devices())
        return s_err(cudaErrorInvalidDevice);
    g_device = device;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    guard l(g_lock);
    if (!device)
        return s_err(cudaErrorInvalidValue);
    *device = g_device;
    return cudaSuccess;
}

/* An sm_90 device (GPP_EMU_CC=80 for sm_80, 75 for a device without the
 * bf16 tensor-core attention) with 4 multiprocessors. */
extern "C" cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return s_err(cudaErrorInvalidValue);
    if (device < 0 || device >= s_devices())
        return s_err(cudaErrorInvalidDevice);
    long cc = s_env_long("GPP_EMU_CC", 90, 50, 120);
    std::memset(prop, 0, sizeof *prop);
    std::snprintf(prop->name, sizeof prop->name, "gpp host emulator");
    prop->major = (int)(cc / 10);
    prop->minor = (int)(cc % 10);
    prop->totalGlobalMem = s_mem_total();
    prop->multiProcessorCount = 4;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->sharedMemPerBlock = 48 << 10;
    prop->unifiedAddressing = 1;
    prop->canMapHostMemory = 1;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_b, size_t *total_b)
{
    guard l(g_lock);
    if (!free_b || !total_b)
        return s_err(cudaErrorInvalidValue);
    *total_b = s_mem_total();
    *free_b = *total_b - g_dev_bytes;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    guard l(g_lock);
    if (s_refused_in_capture(__func__))
        return cudaErrorStreamCaptureUnsupported;
    s_drain_all();
    return cudaSuccess;
}

/* ---- memory ---- */

static cudaError_t s_alloc(void **p, size_t bytes, gpp_emu::mem_kind kind, const char *call)
{
    if (!p)
        return s_err(cudaErrorInvalidValue);
    *p = nullptr;
    if (s_refused_in_capture(call))
        return cudaErrorStreamCaptureUnsupported;
    if (bytes == 0)
        return cudaSuccess;
    if (kind == gpp_emu::MEM_DEVICE && bytes > s_mem_total() - g_dev_bytes)
        return s_err(cudaErrorMemoryAllocation);
    void *m = nullptr;
    if (posix_memalign(&m, 256, bytes) != 0)
        return s_err(cudaErrorMemoryAllocation);
    std::memset(m, 0xff, bytes);
    g_mem[(uintptr_t)m] = mem_rec{bytes, kind, false};
    if (kind == gpp_emu::MEM_DEVICE)
        g_dev_bytes += bytes;
    *p = m;
    return cudaSuccess;
}

static cudaError_t s_free(void *p, gpp_emu::mem_kind kind, const char *call)
{
    if (s_refused_in_capture(call))
        return cudaErrorStreamCaptureUnsupported;
    if (!p)
        return cudaSuccess;
    auto it = g_mem.find((uintptr_t)p);
    if (it == g_mem.end() || it->second.kind != kind || it->second.registered)
        return s_err(cudaErrorInvalidValue);
    s_drain_all(); /* cudaFree and cudaFreeHost synchronise the device */
    if (kind == gpp_emu::MEM_DEVICE)
        g_dev_bytes -= it->second.bytes;
    g_mem.erase(it);
    std::free(p);
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaMalloc(void **p, size_t bytes)
{
    guard l(g_lock);
    return s_alloc(p, bytes, gpp_emu::MEM_DEVICE, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaFree(void *p)
{
    guard l(g_lock);
    return s_free(p, gpp_emu::MEM_DEVICE, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaMallocHost(void **p, size_t bytes)
{
    guard l(g_lock);
    return s_alloc(p, bytes, gpp_emu::MEM_PINNED, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    guard l(g_lock);
    if (flags &
        ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return s_err(cudaErrorInvalidValue);
    return s_alloc(p, bytes, gpp_emu::MEM_PINNED, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaFreeHost(void *p)
{
    guard l(g_lock);
    return s_free(p, gpp_emu::MEM_PINNED, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaHostRegister(void *p, size_t bytes, unsigned int flags)
{
    guard l(g_lock);
    (void)flags;
    if (!p || bytes == 0)
        return s_err(cudaErrorInvalidValue);
    if (s_refused_in_capture(__func__))
        return cudaErrorStreamCaptureUnsupported;
    uintptr_t a = (uintptr_t)p;
    auto it = g_mem.lower_bound(a);
    if (it != g_mem.end() && it->first < a + bytes)
        return s_err(cudaErrorHostMemoryAlreadyRegistered);
    if (it != g_mem.begin() && std::prev(it)->first + std::prev(it)->second.bytes > a)
        return s_err(cudaErrorHostMemoryAlreadyRegistered);
    g_mem[a] = mem_rec{bytes, gpp_emu::MEM_PINNED, true};
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaHostUnregister(void *p)
{
    guard l(g_lock);
    if (s_refused_in_capture(__func__))
        return cudaErrorStreamCaptureUnsupported;
    auto it = g_mem.find((uintptr_t)p);
    if (it == g_mem.end() || !it->second.registered)
        return s_err(cudaErrorHostMemoryNotRegistered);
    s_drain_all(); /* queued copies may still read it */
    g_mem.erase(it);
    return cudaSuccess;
}

/* ---- copies ---- */

/* Whether [p, p + bytes) may be read or written by the device: device
 * memory or page-locked host memory (mapped: UVA), fully inside one. */
static bool s_device_side(const void *p, size_t bytes, bool device_only)
{
    gpp_emu::mem_kind k = gpp_emu::mem_lookup(p, bytes);
    return k == gpp_emu::MEM_DEVICE || (!device_only && k == gpp_emu::MEM_PINNED);
}

/* Queues a copy of `rows` rows of `width` bytes (pitches dpitch, spitch) on
 * stream st, with the host-side synchronisation of the driver. */
static cudaError_t s_copy(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                          size_t rows, cudaMemcpyKind kind, cudaStream_t st, bool sync,
                          const char *call)
{
    CUstream_st *s = s_stream(st);
    if (!s)
        return s_err(cudaErrorInvalidResourceHandle);
    if (width == 0 || rows == 0)
        return cudaSuccess;
    if (!dst || !src || dpitch < width || spitch < width)
        return s_err(cudaErrorInvalidValue);
    size_t dspan = dpitch * (rows - 1) + width, sspan = spitch * (rows - 1) + width;
    gpp_emu::mem_kind dk = gpp_emu::mem_lookup(dst, dspan), sk = gpp_emu::mem_lookup(src, sspan);
    if (dk == gpp_emu::MEM_OVERRUN || sk == gpp_emu::MEM_OVERRUN)
        return s_err(cudaErrorInvalidValue);
    if (kind == cudaMemcpyDefault)
        kind = dk == gpp_emu::MEM_DEVICE
                   ? (sk == gpp_emu::MEM_DEVICE ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
               : sk == gpp_emu::MEM_DEVICE ? cudaMemcpyDeviceToHost
                                           : cudaMemcpyHostToHost;
    bool d_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool s_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyHostToHost && kind != cudaMemcpyHostToDevice &&
        kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice)
        return s_err(cudaErrorInvalidMemcpyDirection);
    /* the direction must match the memory (undefined on the device) */
    if ((d_dev && !s_device_side(dst, dspan, false)) ||
        (s_dev && !s_device_side(src, sspan, false)))
        return s_err(cudaErrorInvalidValue);
    bool src_pageable = sk == gpp_emu::MEM_PAGEABLE, dst_pageable = dk == gpp_emu::MEM_PAGEABLE;
    if ((sync || src_pageable || dst_pageable) && s_refused_in_capture(call))
        return cudaErrorStreamCaptureUnsupported;
    std::vector<char> staged;
    if (src_pageable && !s_dev) { /* the driver stages pageable sources at the call */
        staged.resize(sspan);
        std::memcpy(staged.data(), src, sspan);
    }
    char *d = (char *)dst;
    const char *sp = staged.empty() ? (const char *)src : nullptr;
    task t;
    t.what = "memcpy";
    t.fn = [d, dpitch, sp, spitch, width, rows, staged = std::move(staged)] {
        const char *from = sp ? sp : staged.data();
        for (size_t r = 0; r < rows; r++)
            std::memmove(d + r * dpitch, from + r * spitch, width);
    };
    cudaError_t e = s_queue(s, std::move(t));
    if (e == cudaSuccess && (sync || (dst_pageable && !s->cap)))
        s_drain(s, s->queued);
    return e;
}

extern "C" cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t n,
                                            cudaMemcpyKind kind)
{
    guard l(g_lock);
    return s_copy(dst, n, src, n, n, 1, kind, nullptr, true, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                                 cudaMemcpyKind kind, cudaStream_t st)
{
    guard l(g_lock);
    return s_copy(dst, n, src, n, n, 1, kind, st, false, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                                   size_t spitch, size_t width, size_t height,
                                                   cudaMemcpyKind kind, cudaStream_t st)
{
    guard l(g_lock);
    return s_copy(dst, dpitch, src, spitch, width, height, kind, st, false, __func__);
}

static cudaError_t s_memset(void *dst, int value, size_t n, cudaStream_t st, bool sync,
                            const char *call)
{
    CUstream_st *s = s_stream(st);
    if (!s)
        return s_err(cudaErrorInvalidResourceHandle);
    if (n == 0)
        return cudaSuccess;
    if (!dst || !s_device_side(dst, n, false))
        return s_err(cudaErrorInvalidValue);
    if (sync && s_refused_in_capture(call))
        return cudaErrorStreamCaptureUnsupported;
    task t;
    t.what = "memset";
    t.fn = [dst, value, n] { std::memset(dst, value, n); };
    cudaError_t e = s_queue(s, std::move(t));
    if (e == cudaSuccess && sync)
        s_drain(s, s->queued);
    return e;
}

extern "C" cudaError_t CUDARTAPI cudaMemset(void *dst, int value, size_t n)
{
    guard l(g_lock);
    return s_memset(dst, value, n, nullptr, true, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t st)
{
    guard l(g_lock);
    return s_memset(dst, value, n, st, false, __func__);
}

/* ---- streams ---- */

extern "C" cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *st, unsigned int flags)
{
    guard l(g_lock);
    if (!st || (flags & ~(unsigned)cudaStreamNonBlocking))
        return s_err(cudaErrorInvalidValue);
    CUstream_st *s = new CUstream_st;
    s->flags = flags;
    g_streams.insert(s);
    *st = s;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *st)
{
    return cudaStreamCreateWithFlags(st, cudaStreamDefault);
}

extern "C" cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t st)
{
    guard l(g_lock);
    CUstream_st *s = s_stream(st);
    if (!s || s == &g_legacy)
        return s_err(cudaErrorInvalidResourceHandle);
    if (s->cap)
        return s_err(cudaErrorStreamCaptureUnsupported);
    s_drain(s, s->queued); /* queued work still runs, as on the device */
    for (CUevent_st *e : g_events)
        if (e->st == s) /* its events stay complete */
            e->st = nullptr;
    g_streams.erase(s);
    delete s;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t st)
{
    guard l(g_lock);
    CUstream_st *s = s_stream(st);
    if (!s)
        return s_err(cudaErrorInvalidResourceHandle);
    if (s->cap || s_refused_in_capture(__func__)) {
        if (s->cap)
            s->cap->invalid = true;
        return s_err(cudaErrorStreamCaptureUnsupported);
    }
    if (s == &g_legacy)
        s_drain_blocking();
    s_drain(s, s->queued);
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t st)
{
    return cudaStreamSynchronize(st); /* forced: every query finds the work done */
}

extern "C" cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t st, cudaHostFn_t fn, void *data)
{
    if (!fn)
        return s_err(cudaErrorInvalidValue);
    return gpp_emu::enqueue(st, "host function", [fn, data] { fn(data); });
}

/* ---- events ---- */

static CUevent_st *s_event(cudaEvent_t e)
{
    return g_events.count(e) ? e : nullptr;
}

extern "C" cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
    guard l(g_lock);
    if (!ev || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming |
                                    cudaEventInterprocess)))
        return s_err(cudaErrorInvalidValue);
    CUevent_st *e = new CUevent_st;
    e->flags = flags;
    g_events.insert(e);
    *ev = e;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *ev)
{
    return cudaEventCreateWithFlags(ev, cudaEventDefault);
}

extern "C" cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t ev)
{
    guard l(g_lock);
    CUevent_st *e = s_event(ev);
    if (!e)
        return s_err(cudaErrorInvalidResourceHandle);
    g_events.erase(e); /* a queued record of it must not touch it any more */
    for (CUstream_st *s : g_streams)
        for (task &t : s->q)
            if (t.kind == task::RECORD && t.ev == e)
                t.kind = task::WAIT, t.wait_st = s, t.wait_pos = 0;
    delete e;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t ev, cudaStream_t st)
{
    guard l(g_lock);
    CUevent_st *e = s_event(ev);
    CUstream_st *s = s_stream(st);
    if (!e || !s)
        return s_err(cudaErrorInvalidResourceHandle);
    if (s->cap) { /* a point in the graph: other streams may join from it */
        e->captured = true;
        e->cap = s->cap;
        e->st = s;
        e->pos = s->cap->tasks.size();
        return cudaSuccess;
    }
    task t;
    t.kind = task::RECORD;
    t.ev = e;
    t.what = "event record";
    s_queue(s, std::move(t));
    e->captured = false;
    e->cap = nullptr;
    e->st = s;
    e->pos = s->queued;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t st, cudaEvent_t ev,
                                                     unsigned int flags)
{
    guard l(g_lock);
    CUevent_st *e = s_event(ev);
    CUstream_st *s = s_stream(st);
    if (!e || !s)
        return s_err(cudaErrorInvalidResourceHandle);
    if (flags != 0)
        return s_err(cudaErrorInvalidValue);
    if (!e->st)
        return cudaSuccess; /* never recorded (or its stream is gone): nothing to wait for */
    if (e->captured) {
        if (!e->cap || (s->cap && s->cap != e->cap))
            return s_err(cudaErrorStreamCaptureIsolation);
        if (!s->cap) { /* s joins the capture */
            s->cap = e->cap;
            s->cap_origin = false;
            e->cap->joined.insert(s);
        } else if (s->cap_origin && e->st != s) {
            e->cap->joined.erase(e->st); /* joined back into the origin stream */
        }
        return cudaSuccess; /* capture order already orders the graph's work */
    }
    if (s->cap) /* waiting on work outside the graph: it must have run by replay */
        return s_err(cudaErrorStreamCaptureIsolation);
    task t;
    t.kind = task::WAIT;
    t.wait_st = e->st;
    t.wait_pos = e->pos;
    t.what = "event wait";
    return s_queue(s, std::move(t));
}

/* whether e's last record has run, forcing it to: see the file comment */
static cudaError_t s_event_force(CUevent_st *e, const char *call)
{
    if (e->captured || s_refused_in_capture(call)) {
        if (e->cap)
            e->cap->invalid = true;
        return s_err(cudaErrorStreamCaptureUnsupported);
    }
    if (e->st)
        s_drain(e->st, e->pos);
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t ev)
{
    guard l(g_lock);
    CUevent_st *e = s_event(ev);
    if (!e)
        return s_err(cudaErrorInvalidResourceHandle);
    return s_event_force(e, __func__);
}

extern "C" cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t ev)
{
    return cudaEventSynchronize(ev);
}

extern "C" cudaError_t CUDARTAPI cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    guard l(g_lock);
    CUevent_st *ea = s_event(a), *eb = s_event(b);
    if (!ms || !ea || !eb)
        return s_err(!ms ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
    if ((ea->flags | eb->flags) & cudaEventDisableTiming)
        return s_err(cudaErrorInvalidResourceHandle);
    if (!ea->st || !eb->st || ea->st->done < ea->pos || eb->st->done < eb->pos)
        return s_err(cudaErrorNotReady);
    *ms = std::chrono::duration<float, std::milli>(eb->t - ea->t).count();
    return cudaSuccess;
}

/* ---- graphs ---- */

extern "C" cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t st,
                                                        enum cudaStreamCaptureMode mode)
{
    guard l(g_lock);
    CUstream_st *s = s_stream(st);
    if (!s)
        return s_err(cudaErrorInvalidResourceHandle);
    if (s == &g_legacy)
        return s_err(cudaErrorStreamCaptureUnsupported);
    if (s->cap)
        return s_err(cudaErrorIllegalState);
    s->cap = new CUgraph_st;
    s->cap_origin = true;
    s->cap_thread = pthread_self();
    s->cap_mode = mode;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *graph)
{
    guard l(g_lock);
    CUstream_st *s = s_stream(st);
    if (!s || !graph)
        return s_err(!graph ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
    if (!s->cap || !s->cap_origin)
        return s_err(cudaErrorIllegalState);
    if (s->cap_mode != cudaStreamCaptureModeRelaxed &&
        !pthread_equal(s->cap_thread, pthread_self()))
        return s_err(cudaErrorStreamCaptureWrongThread);
    CUgraph_st *g = s->cap;
    bool unjoined = !g->joined.empty();
    for (CUstream_st *o : g_streams)
        if (o->cap == g)
            o->cap = nullptr, o->cap_origin = false;
    *graph = nullptr;
    if (g->invalid || unjoined) {
        cudaError_t e =
            g->invalid ? cudaErrorStreamCaptureInvalidated : cudaErrorStreamCaptureUnjoined;
        delete g;
        return s_err(e);
    }
    *graph = g;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t st,
                                                       enum cudaStreamCaptureStatus *status)
{
    guard l(g_lock);
    CUstream_st *s = s_stream(st);
    if (!s || !status)
        return s_err(!status ? cudaErrorInvalidValue : cudaErrorInvalidResourceHandle);
    *status = !s->cap           ? cudaStreamCaptureStatusNone
              : s->cap->invalid ? cudaStreamCaptureStatusInvalidated
                                : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t g)
{
    if (!g)
        return s_err(cudaErrorInvalidValue);
    delete g;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
                                                      unsigned long long flags)
{
    if (!x || !g || flags != 0)
        return s_err(cudaErrorInvalidValue);
    CUgraphExec_st *e = new CUgraphExec_st;
    e->tasks = g->tasks;
    *x = e;
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t st)
{
    guard l(g_lock);
    CUstream_st *s = s_stream(st);
    if (!x)
        return s_err(cudaErrorInvalidValue);
    if (!s)
        return s_err(cudaErrorInvalidResourceHandle);
    for (const task &t : x->tasks)
        s_queue(s, t);
    return cudaSuccess;
}

extern "C" cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t x)
{
    if (!x)
        return s_err(cudaErrorInvalidValue);
    delete x; /* a queued launch holds its own copy of the work */
    return cudaSuccess;
}
