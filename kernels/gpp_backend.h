/* gpp_backend: devices, memory, streams, events and tensors for the kernels.
 *
 * One interface for every device kind: the CPU backend (OpenBLAS + C) and
 * the CUDA backend (cuBLASLt + own kernels, kernels/cuda/, docs/gpu.md)
 * behind the same calls (the backend is an object with a private table of
 * operations, see gpp_backend_impl.h). Callers never branch on the device
 * kind; memory of a device backend is never touched from the host except
 * through gpp_stream_copy.
 *
 * Memory. gpp_backend_alloc returns device memory of the backend (on CPU:
 * 64-byte aligned host memory). Pointers from different backends never mix.
 * Host memory is ordinary malloc'ed memory; copies say their direction.
 *
 * Streams and the asynchronous contract. Every kernel, copy and memset is
 * *enqueued* on a stream and may run after the call returns (CUDA); calls
 * enqueued on one stream run in order. The caller must keep every buffer an
 * enqueued call reads or writes alive and unchanged (host buffers of copies
 * included) until a synchronisation point shows the call complete:
 * gpp_stream_sync, gpp_event_sync, or gpp_event_query returning 1 for an
 * event recorded after the call. Work on two streams is ordered only through
 * gpp_event_record + gpp_event_wait. The CPU backend runs every call to
 * completion before returning, so its events are complete once recorded;
 * code written against the contract above is correct on both.
 *
 * Errors. Run-time failures (out of device memory, a failed launch, bad
 * data such as an out-of-range index) return -1 (or NULL) and fill the
 * gpp_err_t. On an asynchronous backend an execution error may surface at
 * the next synchronisation point instead of at the failing call. Shape and
 * argument mistakes are programmer errors and assert.
 *
 * Threads. A backend and its streams are used from one thread at a time.
 * The CPU backend runs OpenBLAS with a fixed thread count (see
 * gpp_backend_cfg_t.cpu_threads; OpenBLAS's setting is process-wide), which
 * makes results bit-identical from run to run on the same machine.
 *
 * Ownership: gpp_backend_new / gpp_stream_new / gpp_event_new return objects
 * the caller owns. Streams and events must be destroyed before their backend.
 * Memory from gpp_backend_alloc is owned by the caller and freed with
 * gpp_backend_free on the same backend. */
#ifndef GPP_BACKEND_H
#define GPP_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_alloc_rule.h"
#include "common/gpp_device_kind.h"
#include "common/gpp_err.h"
#include "common/gpp_precision.h"
#include "model/gpp_optable.h" /* gpp_work_t */

/* Element types of tensors. BF16: bfloat16 (2 bytes), written by rounding
 * to nearest even; at precision bf16 the CUDA backend keeps activations and
 * their gradients in it where every kernel that touches them takes it
 * (gpp_backend_act_bf16; docs/gpu.md "bf16 tensors"). */
typedef enum { GPP_DTYPE_F32 = 0, GPP_DTYPE_I32 = 1, GPP_DTYPE_BF16 = 2 } gpp_dtype_t;
static inline size_t gpp_dtype_bytes(gpp_dtype_t t)
{
    return t == GPP_DTYPE_BF16 ? 2 : 4;
}
/* "f32", "i32", "bf16" */
const char *gpp_dtype_name(gpp_dtype_t t);
/* n floats of host memory src as the elements of a tensor of type t at
 * dst (host memory, gpp_dtype_bytes(t) x n bytes): copied for f32, rounded
 * to nearest even for bf16 (a NaN stays a NaN); not for i32. For callers
 * that fill a device tensor from the host (through a copy). */
void gpp_dtype_from_f32(gpp_dtype_t t, const float *src, int64_t n, void *dst);

typedef enum {
    GPP_COPY_H2D = 0, /* host -> device */
    GPP_COPY_D2H,     /* device -> host */
    GPP_COPY_D2D      /* device -> device (same backend) */
} gpp_copy_kind_t;

typedef struct {
    gpp_device_kind_t kind;
    int device;                /* CUDA device ordinal; 0 for CPU */
    int cpu_threads;           /* CPU: OpenBLAS threads; 0 keeps OpenBLAS's default
                                  (OPENBLAS_NUM_THREADS or the core count) */
    gpp_precision_t precision; /* CUDA matrix products; fp32 by default */
    int bf16_tensors;          /* CUDA at precision bf16: activations and their
                                  gradients kept in bf16 between ops (1); 0 fp32,
                                  the default (not yet run on a GPU) */
} gpp_backend_cfg_t;

/* The caching allocator of a device backend (CUDA): what it holds from the
 * device and how often it called the driver. In-use and peak bytes are
 * gpp_backend_mem's, the same for every backend. */
typedef struct {
    size_t reserved_bytes;                /* held from the device (in use + cached) */
    uint64_t device_allocs, device_frees; /* cudaMalloc / cudaFree calls */
} gpp_backend_cache_t;

typedef struct gpp_backend_s gpp_backend_t;
typedef struct gpp_stream_s gpp_stream_t;
typedef struct gpp_event_s gpp_event_t;

/* ---- backend ---- */

/* Caller owns the result; NULL with a message when the kind is not built
 * or the device cannot be opened. */
gpp_backend_t *gpp_backend_new(const gpp_backend_cfg_t *cfg, gpp_err_t *err);
void gpp_backend_destroy(gpp_backend_t **self_p);
gpp_device_kind_t gpp_backend_kind(const gpp_backend_t *self);
const char *gpp_backend_name(const gpp_backend_t *self); /* "cpu", "cuda:0" */
/* The device's own name: the GPU's (cudaDeviceProp.name, e.g. "NVIDIA H100
 * 80GB HBM3") on CUDA, "cpu" on the CPU backend. Profiles record it. */
const char *gpp_backend_device_name(const gpp_backend_t *self);
/* The matrix-product precision the backend computes with: the configured
 * one on CUDA, fp32 on the CPU backend (whatever was set). */
gpp_precision_t gpp_backend_precision(const gpp_backend_t *self);
/* 1 when the backend keeps bf16 activations: CUDA at precision bf16 with
 * gpp_backend_cfg_t.bf16_tensors; 0 elsewhere. */
int gpp_backend_bf16_tensors(const gpp_backend_t *self);

/* Device memory, 64-byte aligned, contents undefined. Caller owns the
 * result. bytes == 0 returns a valid unique pointer. NULL + message when the
 * device is out of memory. Synchronous (not stream-ordered). */
void *gpp_backend_alloc(gpp_backend_t *self, size_t bytes, gpp_err_t *err);
/* Frees memory from gpp_backend_alloc; accepts NULL and NULLs *ptr_p. The
 * caller must have synchronised every stream that uses the memory. */
void gpp_backend_free(gpp_backend_t *self, void **ptr_p);
/* Page-locks `bytes` of host memory at p so that copies between it and the
 * device run at full bandwidth (CUDA: cudaHostRegister). 1 when locked, 0
 * when not: always on the CPU backend, and when the device refuses
 * (RLIMIT_MEMLOCK in a container), with the reason in err; pageable memory
 * still works, only slower. Undo with gpp_backend_host_unpin before p is
 * freed. */
int gpp_backend_host_pin(gpp_backend_t *self, void *p, size_t bytes, gpp_err_t *err);
/* Undoes a gpp_backend_host_pin that returned 1. */
void gpp_backend_host_unpin(gpp_backend_t *self, void *p);
/* The bytes of stash gpp_attention_fwd fills on this backend for n samples
 * of seq x hidden with `heads` heads: gpp_attention_stash_bytes (the op
 * table's, what the planner charges) or less (CUDA's fused core keeps a
 * log-sum-exp per row instead of the seq x seq probabilities). A larger
 * stash works too. */
size_t gpp_backend_attention_stash_bytes(gpp_backend_t *self, int64_t n, int64_t seq,
                                         int64_t hidden, int heads);
/* The stream workspace (gpp_stream_workspace) the kernels of op ask on
 * this backend for n samples, the larger of its forward's and its
 * backward's request: fixed + n x per_sample bytes (gpp_work_t), an upper
 * bound of every request of the micro-batch. The CPU backend's is the op
 * table's (gpp_op_workspace). The CUDA backend's attention cores ask their
 * own layouts, its cross-entropy a loss per row, its sparse embedding
 * gradient the accumulation plan; its biased linear asks none (the bias
 * sums run in the stream's cuBLASLt workspace, the backend's own). The
 * executor reserves the largest of its ops' before a micro-batch runs, and
 * the memory model charges the same (gpp_stage_dev_t.work). */
gpp_work_t gpp_backend_op_workspace(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op);
/* The bytes per sample op's forward kernel keeps for its backward on this
 * backend: attention's as gpp_backend_attention_stash_bytes says, every
 * other op's the op table's (gpp_op_kernel_stash_bytes). What the executor
 * keeps, the profiler records and an agent reports (ProfileResult). */
int64_t gpp_backend_op_kernel_stash(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op);
/* 1 when op's kernels on this backend take each of its activations (its
 * inputs and output, and their gradients) in bf16 as well as in fp32, in
 * any mix, computing in fp32: the CUDA backend at precision bf16 for
 * linear (with its fused activation), ReLU, GELU, layer norm, attention
 * and add, with gpp_backend_cfg_t.bf16_tensors; 0 for every op elsewhere.
 * The executor keeps a tensor in bf16 where every op that writes or reads
 * it says 1 (agent/exec/gpp_exec.h, "bf16 tensors"). Parameters, their
 * gradients, optimizer state and losses stay fp32. */
int gpp_backend_act_bf16(gpp_backend_t *self, gpp_op_type_t type);
/* The element type of op's output (and its gradient) on this backend:
 * bf16 where op and every consumer, in any stage, take bf16
 * (gpp_backend_act_bf16), else fp32 (data inputs included: an index
 * input's int32 is the graph's). The stage that makes the tensor, the
 * stages that receive it and the transfers between them all use it (one
 * backend a job): the one rule of the executor's bf16 tensors. */
gpp_dtype_t gpp_backend_op_out_dtype(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op);
/* The bytes per sample that output takes: op->out_bytes, halved in bf16.
 * What a profile records as "out_bytes" and the memory model walks with. */
int64_t gpp_backend_op_out_bytes(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op);
/* How the backend's allocator rounds a request (common/gpp_alloc_rule.h):
 * GPP_ALLOC_CLASSES on CUDA (the caching allocator's size classes),
 * GPP_ALLOC_ALIGN64 on the CPU. gpp_backend_mem counts rounded bytes; the
 * memory model rounds by the same rule. */
gpp_alloc_rule_t gpp_backend_alloc_rule(const gpp_backend_t *self);
/* Fills *out and returns 1 for a backend with a caching allocator (CUDA);
 * 0 with *out zeroed for one without (CPU: malloc). */
int gpp_backend_cache_stats(gpp_backend_t *self, gpp_backend_cache_t *out);

/* Device memory the backend holds: every allocation of this backend
 * (gpp_backend_alloc, stream workspaces, sparse gradients, optimizer
 * state), in bytes as the device allocator rounds them (CPU: multiples of
 * 64). live now; peak the high-water mark since creation or the last
 * gpp_backend_mem_reset_peak; allocs the allocations live now. */
typedef struct {
    int64_t live_bytes, peak_bytes, allocs;
    /* of live_bytes, the backend's own buffers, which no caller asked for
     * and the stage's memory plan does not hold (CUDA: the
     * cuBLASLt workspace of each stream that ran a product, the packed bf16
     * operands; CPU: none). They only grow while a stream lives, so
     * peak_bytes - own_bytes is the callers' high-water mark. */
    int64_t own_bytes;
} gpp_backend_mem_t;
void gpp_backend_mem(const gpp_backend_t *self, gpp_backend_mem_t *out);
/* Restarts the high-water mark at what is live now. */
void gpp_backend_mem_reset_peak(gpp_backend_t *self);

/* ---- streams: in-order queues of work on one backend ---- */

/* Caller owns the result. */
gpp_stream_t *gpp_stream_new(gpp_backend_t *be, gpp_err_t *err);
/* The backend's own handle of the stream: CUDA's cudaStream_t (for a
 * library that enqueues on it, e.g. NCCL), NULL on the CPU backend. */
void *gpp_stream_native(const gpp_stream_t *self);
/* Synchronises the stream, frees its workspace; accepts NULL. */
void gpp_stream_destroy(gpp_stream_t **self_p);
gpp_backend_t *gpp_stream_backend(const gpp_stream_t *self);
/* Blocks until everything enqueued on the stream has completed; returns -1
 * with the first execution error since the last synchronisation. */
int gpp_stream_sync(gpp_stream_t *self, gpp_err_t *err);

/* Per-stream scratch memory for kernels and callers: returns device memory
 * of at least `bytes` owned by the stream. It stays valid until the next
 * gpp_stream_workspace call on the same stream (which may reallocate; a
 * reallocation is stream-ordered, so work already enqueued keeps its old
 * buffer) or gpp_stream_destroy. Kernels call this internally, so a caller
 * must not hold a workspace pointer across a kernel call on the same stream.
 * NULL + message when out of memory. */
void *gpp_stream_workspace(gpp_stream_t *self, size_t bytes, gpp_err_t *err);
/* Lends the stream `bytes` of device memory at p as its workspace (the
 * executor's memory plan holds it), freeing one the stream owned: the
 * stream never frees or grows it, and a larger request is an error. NULL:
 * none lent, the stream allocates its own again. */
void gpp_stream_lend_workspace(gpp_stream_t *self, void *p, size_t bytes);
/* The stream's workspace as it stands (NULL: none yet), without asking for
 * any: a CUDA graph records this pointer, and may only be replayed while it
 * stays. */
void *gpp_stream_workspace_now(const gpp_stream_t *self);

/* Enqueued copy of `bytes` between host and device memory, or within the
 * device. Host buffers must stay alive and unchanged until the copy is
 * known complete (see the contract above). */
int gpp_stream_copy(gpp_stream_t *self, void *dst, const void *src, size_t bytes,
                    gpp_copy_kind_t kind, gpp_err_t *err);
/* Enqueued zero fill of device memory. */
int gpp_stream_zero(gpp_stream_t *self, void *dst, size_t bytes, gpp_err_t *err);

/* ---- stream capture: record a stream's work once, replay it ----
 * CUDA graphs (docs/gpu.md "CUDA graphs"): between capture_begin and
 * capture_end nothing enqueued on the stream runs; it is recorded, and
 * gpp_replay_launch enqueues the whole recording again with one call, on
 * the same device pointers and argument values as captured. Inside a
 * capture, nothing may synchronise the stream or allocate device memory
 * (the backend's allocator would have to); a call that does fails, and
 * capture_end then fails too. Backends that cannot capture (the CPU
 * backend: it has no launch cost to save) report 0 from
 * gpp_backend_can_capture and an error from capture_begin. */
typedef struct gpp_replay_s gpp_replay_t;
int gpp_backend_can_capture(const gpp_backend_t *be);
int gpp_stream_capture_begin(gpp_stream_t *self, gpp_err_t *err);
/* Ends the capture, always; *out is the replayable recording (caller owns
 * it), or NULL and -1 with the reason (a failed call inside the capture,
 * or instantiation). */
int gpp_stream_capture_end(gpp_stream_t *self, gpp_replay_t **out, gpp_err_t *err);
int gpp_replay_launch(gpp_replay_t *r, gpp_stream_t *s, gpp_err_t *err);
/* Accepts NULL; work already enqueued from it completes. */
void gpp_replay_destroy(gpp_replay_t **r_p);

/* ---- events: points in a stream's queue ---- */

/* Caller owns the result. A new event counts as complete. */
gpp_event_t *gpp_event_new(gpp_backend_t *be, gpp_err_t *err);
/* An event that also records when its stream reached it, for
 * gpp_event_elapsed_ms (CUDA: a cudaEvent with timing, a little dearer to
 * record than gpp_event_new's; CPU: the host clock when recorded, which is
 * when the stream reached it, every call running to completion). */
gpp_event_t *gpp_event_new_timed(gpp_backend_t *be, gpp_err_t *err);
void gpp_event_destroy(gpp_event_t **self_p);
/* Marks the current end of `stream`'s queue. */
int gpp_event_record(gpp_event_t *self, gpp_stream_t *stream, gpp_err_t *err);
/* Work enqueued on `stream` after this call waits for the event (does not
 * block the host). */
int gpp_event_wait(gpp_event_t *self, gpp_stream_t *stream, gpp_err_t *err);
/* Blocks the host until the event is complete. */
int gpp_event_sync(gpp_event_t *self, gpp_err_t *err);
/* 1 complete, 0 pending, -1 error (message in err). Never blocks. */
int gpp_event_query(gpp_event_t *self, gpp_err_t *err);
/* Device time from `start` to `end` in *ms: two timed events of one backend
 * recorded on one stream (start first). Blocks until `end` is complete.
 * -1 with a message when either was never recorded. CUDA's resolution is
 * about 0.5 us; the time includes gaps where the device waited for work
 * (a stream the host feeds slowly shows the host's pace). */
int gpp_event_elapsed_ms(gpp_event_t *start, gpp_event_t *end, double *ms, gpp_err_t *err);

/* ---- tensors ----
 * A view: `data` is device memory of some backend, not owned by the tensor
 * unless it came from gpp_tensor_alloc. Shape [n, rows, cols], row-major,
 * contiguous: element (i, r, c) is at ((i * rows) + r) * cols + c.
 * Weights use n = 1 (a linear W (out, in) is [1, out, in]; a bias is
 * [1, 1, out]). */
typedef struct {
    void *data;
    gpp_dtype_t dtype;
    int64_t n, rows, cols;
} gpp_tensor_t;

static inline gpp_tensor_t gpp_tensor(void *data, gpp_dtype_t dtype, int64_t n, int64_t rows,
                                      int64_t cols)
{
    gpp_tensor_t t = {data, dtype, n, rows, cols};
    return t;
}
static inline int64_t gpp_tensor_numel(const gpp_tensor_t *t)
{
    return t->n * t->rows * t->cols;
}
static inline size_t gpp_tensor_bytes(const gpp_tensor_t *t)
{
    return (size_t)gpp_tensor_numel(t) * gpp_dtype_bytes(t->dtype);
}
static inline float *gpp_tensor_f32(const gpp_tensor_t *t)
{
    return (float *)t->data;
}
static inline int32_t *gpp_tensor_i32(const gpp_tensor_t *t)
{
    return (int32_t *)t->data;
}

/* Allocates device memory for a [n, rows, cols] tensor of `dtype` on `be`
 * into *t (contents undefined). The caller owns t->data; free with
 * gpp_tensor_free on the same backend. */
int gpp_tensor_alloc(gpp_backend_t *be, gpp_dtype_t dtype, int64_t n, int64_t rows, int64_t cols,
                     gpp_tensor_t *t, gpp_err_t *err);
/* Frees t->data (NULL allowed) and NULLs it. */
void gpp_tensor_free(gpp_backend_t *be, gpp_tensor_t *t);

/* ---- CPU: OpenBLAS kernel choice ----
 * For main() of programs that run CPU kernels, before anything else: when
 * OpenBLAS misdetected the CPU and OPENBLAS_CORETYPE is unset, re-executes
 * the program with it set (OpenBLAS reads it only when it loads). Returns
 * when nothing needs doing or the exec failed. */
void gpp_cpu_blas_reexec(char **argv);

#endif
