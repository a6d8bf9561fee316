/* gpp_cuda_backend: the CUDA backend's device, memory, streams and events,
 * and its table of operations (the kernels' entries are in gpp_cuda_ops.c).
 *
 * Opening: cfg.device must be a visible, usable GPU; otherwise
 * gpp_backend_new fails naming the device count and CUDA's own message
 * (never a silent CPU run). Memory comes from the caching allocator, so the
 * steady state never calls cudaMalloc/cudaFree. Copies and memsets are
 * enqueued on the stream (cudaMemcpyAsync: a pageable host buffer makes the
 * copy synchronous with respect to the host, which the contract allows). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gpp_cuda.h"

int gpp_cuda_fail(gpp_err_t *err, const char *file, int line, const char *call, cudaError_t e)
{
    const char *base = strrchr(file, '/');
    return gpp_err_set(err, "%s:%d: %s: %s (%s)", base ? base + 1 : file, line, call,
                       cudaGetErrorString(e), cudaGetErrorName(e));
}

int gpp_cuda_lt_fail(gpp_err_t *err, const char *file, int line, const char *call,
                     cublasStatus_t st)
{
    const char *base = strrchr(file, '/');
    return gpp_err_set(err, "%s:%d: %s: cuBLAS status %d (%s)", base ? base + 1 : file, line, call,
                       (int)st, gpp_cuda_lt.cublasLtGetStatusString(st));
}

/* ---- raw allocator under the cache ---- */

static void *s_raw_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        return NULL;
    }
    return p;
}

static void s_raw_free(void *ctx, void *p)
{
    (void)ctx;
    (void)cudaFree(p);
}

/* The start-up line's account of attention: the mode and the core that
 * head sizes up to 64 and up to 128 run (gpp_cuda_attention_core). */
static void s_attn_line(const gpp_cuda_t *c, char *buf, size_t len)
{
    static const char *mode[] = {"auto", "fused", "unfused", "unfused-fp32"};
    static const char *core[] = {"unfused", "fused fp32", "fused on tensor cores",
                                 "unfused in bf16"};
    snprintf(buf, len, "GPP_CUDA_ATTENTION=%s: head size <= 64 %s, <= 128 %s, larger %s",
             mode[c->attn], core[gpp_cuda_attention_core(c, 64)],
             core[gpp_cuda_attention_core(c, 128)], core[gpp_cuda_attention_core(c, 129)]);
}

/* The index in words (NULL-terminated, the first the default) of the
 * environment variable `name`'s value; unset or empty: 0. -1 and a message
 * naming the variable and the choices on any other value. */
static int s_env_choice(const char *name, const char *const *words, gpp_err_t *err)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char choices[128] = "";
    for (int i = 0; words[i]; i++) {
        if (strcmp(v, words[i]) == 0)
            return i;
        snprintf(choices + strlen(choices), sizeof choices - strlen(choices), "%s%s%s",
                 i ? ", " : "", words[i], i ? "" : " (the default)");
    }
    return gpp_err_set(err, "%s=%s: expected %s", name, v, choices);
}

/* The ops whose kernels take bf16 activations (gpp_backend_act_bf16):
 * every one; the embedding bag's table and its sparse gradient's values
 * stay fp32 (parameters), its output and the gradient it reads may be
 * bf16. */
static int s_act_bf16(gpp_backend_t *be, gpp_op_type_t t)
{
    if (!gpp_cuda_be(be)->bf16_tensors)
        return 0;
    switch (t) {
    case GPP_OP_LINEAR:
    case GPP_OP_RELU:
    case GPP_OP_GELU:
    case GPP_OP_LAYERNORM:
    case GPP_OP_ATTENTION:
    case GPP_OP_ADD:
    case GPP_OP_CONCAT:
    case GPP_OP_SLICE:
    case GPP_OP_RESHAPE:
    case GPP_OP_LOSS_MSE:
    case GPP_OP_LOSS_CE:
    case GPP_OP_EMBEDDING_BAG:
        return 1;
    default:
        return 0;
    }
}

/* ---- lifetime ---- */

static int s_init(gpp_backend_t *be, gpp_err_t *err)
{
    int dev = be->cfg.device, count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return gpp_err_set(err,
                           "backend cuda:%d: no usable GPU: cudaGetDeviceCount: %s (%s); run on a "
                           "machine with an NVIDIA GPU and driver, or use the cpu backend",
                           dev, cudaGetErrorString(e), cudaGetErrorName(e));
    if (dev < 0 || dev >= count) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        return gpp_err_set(err,
                           "backend cuda:%d: %d CUDA device(s) visible (CUDA_VISIBLE_DEVICES=%s); "
                           "choose a device in [0, %d)",
                           dev, count, vis ? vis : "(unset)", count);
    }
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaFree(NULL)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&prop, dev)) != cudaSuccess)
        return gpp_err_set(err, "backend cuda:%d: cannot open the device: %s (%s)", dev,
                           cudaGetErrorString(e), cudaGetErrorName(e));
    if (gpp_cuda_lt_load(err) < 0)
        return gpp_err_prefix(err, "backend cuda:%d", dev);
    static const char *attn_words[] = {"auto", "fused", "unfused", "unfused-fp32",
                                       NULL}; /* gpp_cuda_attn_t */
    static const char *gemm_words[] = {"fast", "packed", NULL};
    int attn_mode, packed;
    if ((attn_mode = s_env_choice("GPP_CUDA_ATTENTION", attn_words, err)) < 0 ||
        (packed = s_env_choice("GPP_CUDA_BF16_GEMM", gemm_words, err)) < 0)
        return gpp_err_prefix(err, "backend cuda:%d", dev);
    gpp_cuda_t *c = gpp_xcalloc(1, sizeof *c);
    c->attn = (gpp_cuda_attn_t)attn_mode;
    c->bf16_packed = packed;
    c->device = dev;
    snprintf(c->dev_name, sizeof c->dev_name, "%s", prop.name);
    c->sm_count = prop.multiProcessorCount;
    c->cc_major = prop.major;
    c->total_mem_bytes = prop.totalGlobalMem;
    c->precision = be->cfg.precision;
    c->bf16_tensors = c->precision == GPP_PRECISION_BF16 && be->cfg.bf16_tensors;
    cublasStatus_t st = gpp_cuda_lt.cublasLtCreate(&c->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        free(c);
        return gpp_cuda_lt_fail(err, __FILE__, __LINE__, "cublasLtCreate", st);
    }
    c->cache = gpp_cuda_cache_new(s_raw_alloc, s_raw_free, NULL);
    c->plans = gpp_cuda_plans_new();
    be->impl = c;
    snprintf(be->name, sizeof be->name, "cuda:%d", dev);
    snprintf(be->device_name, sizeof be->device_name, "%s", prop.name);
    char attn_line[160];
    s_attn_line(c, attn_line, sizeof attn_line);
    gpp_info("backend cuda:%d: %s (sm_%d%d), %d SMs, %.1f GiB, %s matrix products%s%s; attention: "
             "%s",
             dev, c->dev_name, prop.major, prop.minor, c->sm_count,
             (double)c->total_mem_bytes / (1 << 30), gpp_precision_name(c->precision),
             c->bf16_packed && c->precision == GPP_PRECISION_BF16 ? " (operands packed to bf16)"
                                                                  : "",
             c->bf16_tensors ? ", bf16 tensors between ops" : "", attn_line);
    return 0;
}

static void s_fini(gpp_backend_t *be)
{
    gpp_cuda_t *c = gpp_cuda_be(be);
    (void)cudaSetDevice(c->device);
    (void)cudaDeviceSynchronize();
    gpp_cuda_wpack_destroy(be);
    gpp_cuda_plans_destroy(&c->plans);
    gpp_cuda_cache_destroy(&c->cache);
    gpp_cuda_lt.cublasLtDestroy(c->lt);
    free(c);
    be->impl = NULL;
}

/* Every block the backend takes from or gives back to its cache goes through
 * these two, which keep gpp_backend_mem at the blocks' class sizes (what the
 * device really holds for them); own: one of the backend's own buffers
 * (gpp_backend_mem_t.own_bytes). */
static void *s_cache_get(gpp_backend_t *be, size_t bytes, int own)
{
    void *p = gpp_cuda_cache_alloc(gpp_cuda_be(be)->cache, bytes);
    if (p) {
        size_t cb;
        gpp_alloc_class(bytes, &cb);
        (own ? gpp_backend_account_own : gpp_backend_account)(be, (int64_t)cb);
    }
    return p;
}

/* Returns the block's class size (0 for NULL). */
static size_t s_cache_put(gpp_backend_t *be, void *p, int own)
{
    if (!p)
        return 0;
    size_t bytes = gpp_cuda_cache_free(gpp_cuda_be(be)->cache, p);
    (own ? gpp_backend_account_own : gpp_backend_account)(be, -(int64_t)bytes);
    return bytes;
}

/* The one out-of-memory message: what was asked for, what gpp holds and
 * what the device has left (another process on the GPU shows there). */
static void s_oom(gpp_backend_t *be, const char *what, size_t bytes, gpp_err_t *err)
{
    gpp_cuda_t *c = gpp_cuda_be(be);
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    gpp_cuda_cache_stats_t cs;
    gpp_cuda_cache_stats(c->cache, &cs);
    gpp_err_set(err,
                "backend %s (%s): out of device memory allocating %zu bytes for %s (%zu MiB in "
                "use by gpp, %zu of %zu MiB free on the device); reduce the micro-batch size or "
                "the stage's ops, or give the agent a GPU of its own",
                be->name, c->dev_name, bytes, what, cs.in_use_bytes >> 20, free_b >> 20,
                total_b >> 20);
}

static void *s_alloc(gpp_backend_t *be, size_t bytes, gpp_err_t *err)
{
    void *p = s_cache_get(be, bytes, 0);
    if (!p)
        s_oom(be, "a tensor", bytes, err);
    return p;
}

static void s_free(gpp_backend_t *be, void *p)
{
    size_t bytes = s_cache_put(be, p, 0);
    if (bytes) /* a kept bf16 rounding of something in it goes too */
        gpp_cuda_wpack_forget(be, p, bytes, 1);
}

void *gpp_cuda_own_alloc(gpp_backend_t *be, size_t bytes)
{
    return s_cache_get(be, bytes, 1);
}

void gpp_cuda_own_free(gpp_backend_t *be, void *p)
{
    s_cache_put(be, p, 1);
}

static void s_cache_stats(gpp_backend_t *be, gpp_backend_cache_t *out)
{
    gpp_cuda_cache_stats_t cs;
    gpp_cuda_cache_stats(gpp_cuda_be(be)->cache, &cs);
    out->reserved_bytes = cs.reserved_bytes;
    out->device_allocs = cs.raw_allocs;
    out->device_frees = cs.raw_frees;
}

/* ---- streams ---- */

static void s_stream_fini(gpp_stream_t *s)
{
    gpp_cuda_stream_t *cs = gpp_cuda_st(s);
    if (!cs)
        return;
    if (cs->st)
        (void)cudaStreamSynchronize(cs->st);
    s_cache_put(s->be, cs->lt_ws, 1);
    s_cache_put(s->be, cs->pack, 1);
    s_cache_put(s->be, cs->side, 1);
    for (int i = 0; i < cs->n_pack_old; i++)
        s_cache_put(s->be, cs->pack_old[i], 1);
    if (cs->fault)
        (void)cudaFreeHost(cs->fault);
    if (cs->st)
        (void)cudaStreamDestroy(cs->st);
    free(cs);
    s->impl = NULL;
}

static int s_stream_init(gpp_stream_t *s, gpp_err_t *err)
{
    gpp_cuda_t *c = gpp_cuda_be(s->be);
    gpp_cuda_stream_t *cs = gpp_xcalloc(1, sizeof *cs);
    s->impl = cs;
    void *fault = NULL;
    GPP_CUDA_TRY_GOTO(cudaSetDevice(c->device), err, fail);
    GPP_CUDA_TRY_GOTO(cudaStreamCreateWithFlags(&cs->st, cudaStreamNonBlocking), err, fail);
    /* mapped: kernels write it through the same (unified) address */
    GPP_CUDA_TRY_GOTO(cudaHostAlloc(&fault, sizeof *cs->fault, cudaHostAllocMapped), err, fail);
    cs->fault = fault;
    memset(cs->fault, 0, sizeof *cs->fault);
    return 0;
fail:
    s_stream_fini(s);
    return gpp_err_prefix(err, "backend %s: new stream", s->be->name);
}

int gpp_cuda_stream_sync(gpp_stream_t *s, gpp_err_t *err)
{
    gpp_cuda_stream_t *cs = gpp_cuda_st(s);
    GPP_CUDA_TRY(cudaStreamSynchronize(cs->st), err);
    gpp_cuda_fault_t f = *cs->fault;
    if (f.code == GPP_CUDA_FAULT_NONE)
        return 0;
    memset(cs->fault, 0, sizeof *cs->fault);
    if (f.code == GPP_CUDA_FAULT_EMB_INDEX)
        return gpp_err_set(err,
                           "embedding bag: bag %lld, position %lld: index %d outside the table's "
                           "[0, %lld) rows; check the data source's index range",
                           f.a, f.b, f.value, f.c);
    if (f.code == GPP_CUDA_FAULT_SPARSE_ROW)
        return gpp_err_set(err,
                           "sparse gradient: row id %d at pair %lld outside the table's [0, %lld) "
                           "rows (skipped); a peer's gradient from another model build?",
                           f.value, f.a, f.c);
    return gpp_err_set(err,
                       "cross-entropy: row %lld: label %d outside [0, %lld) classes; check the "
                       "data source's labels",
                       f.a, f.value, f.b);
}

static int s_stream_sync(gpp_stream_t *s, gpp_err_t *err)
{
    return gpp_cuda_stream_sync(s, err);
}

/* Work enqueued before may still use p: wait for it, then cache the block. */
static void s_stream_free(gpp_stream_t *s, void *p)
{
    (void)cudaStreamSynchronize(gpp_cuda_stream(s));
    s_cache_put(s->be, p, 0);
}

void *gpp_cuda_side_buffer(gpp_stream_t *s, size_t bytes, gpp_err_t *err)
{
    gpp_cuda_stream_t *cs = gpp_cuda_st(s);
    if (bytes <= cs->side_bytes)
        return cs->side;
    size_t want = bytes > 2 * cs->side_bytes ? bytes : 2 * cs->side_bytes;
    cudaError_t e = cudaStreamSynchronize(cs->st);
    if (e != cudaSuccess) {
        gpp_cuda_fail(err, __FILE__, __LINE__, "cudaStreamSynchronize", e);
        return NULL;
    }
    void *p = s_cache_get(s->be, want, 1);
    if (!p) {
        s_oom(s->be, "sparse gradient scratch", want, err);
        return NULL;
    }
    s_cache_put(s->be, cs->side, 1);
    cs->side = p;
    cs->side_bytes = want;
    return p;
}

void *gpp_cuda_lt_workspace(gpp_stream_t *s, gpp_err_t *err)
{
    gpp_cuda_stream_t *cs = gpp_cuda_st(s);
    if (!cs->lt_ws && !(cs->lt_ws = s_cache_get(s->be, GPP_CUDA_LT_WS_BYTES, 1)))
        s_oom(s->be, "the stream's cuBLASLt workspace", GPP_CUDA_LT_WS_BYTES, err);
    return cs->lt_ws;
}

void *gpp_cuda_pack_buffer(gpp_stream_t *s, size_t bytes, gpp_err_t *err)
{
    gpp_cuda_stream_t *cs = gpp_cuda_st(s);
    if (bytes <= cs->pack_bytes)
        return cs->pack;
    size_t want = bytes > 2 * cs->pack_bytes ? bytes : 2 * cs->pack_bytes;
    if (cs->n_pack_old == GPP_CUDA_PACK_OLD) {
        gpp_err_set(err, "packed bf16 operands: %d buffer growths on one stream", cs->n_pack_old);
        return NULL;
    }
    void *p = s_cache_get(s->be, want, 1);
    if (!p) {
        s_oom(s->be, "packed bf16 operands", want, err);
        return NULL;
    }
    if (cs->pack)
        cs->pack_old[cs->n_pack_old++] = cs->pack;
    cs->pack = p;
    cs->pack_bytes = want;
    return p;
}

static int s_copy(gpp_stream_t *s, void *dst, const void *src, size_t bytes, gpp_copy_kind_t kind,
                  gpp_err_t *err)
{
    enum cudaMemcpyKind k = kind == GPP_COPY_H2D   ? cudaMemcpyHostToDevice
                            : kind == GPP_COPY_D2H ? cudaMemcpyDeviceToHost
                                                   : cudaMemcpyDeviceToDevice;
    GPP_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, k, gpp_cuda_stream(s)), err);
    if (kind != GPP_COPY_D2H)
        gpp_cuda_wpack_forget(s->be, dst, bytes, 0);
    return 0;
}

static int s_zero(gpp_stream_t *s, void *dst, size_t bytes, gpp_err_t *err)
{
    GPP_CUDA_TRY(cudaMemsetAsync(dst, 0, bytes, gpp_cuda_stream(s)), err);
    gpp_cuda_wpack_forget(s->be, dst, bytes, 0);
    return 0;
}

/* ---- events (timing disabled unless asked for: cheaper record and wait) ---- */

static int s_event_init(gpp_event_t *e, gpp_err_t *err)
{
    cudaEvent_t ev;
    GPP_CUDA_TRY(
        cudaEventCreateWithFlags(&ev, e->timed ? cudaEventDefault : cudaEventDisableTiming), err);
    e->impl = ev;
    return 0;
}

static void s_event_fini(gpp_event_t *e)
{
    (void)cudaEventDestroy((cudaEvent_t)e->impl);
}

static int s_event_record(gpp_event_t *e, gpp_stream_t *s, gpp_err_t *err)
{
    GPP_CUDA_TRY(cudaEventRecord((cudaEvent_t)e->impl, gpp_cuda_stream(s)), err);
    return 0;
}

static int s_event_wait(gpp_event_t *e, gpp_stream_t *s, gpp_err_t *err)
{
    GPP_CUDA_TRY(cudaStreamWaitEvent(gpp_cuda_stream(s), (cudaEvent_t)e->impl, 0), err);
    return 0;
}

static int s_event_sync(gpp_event_t *e, gpp_err_t *err)
{
    GPP_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)e->impl), err);
    return 0;
}

static int s_event_query(gpp_event_t *e, gpp_err_t *err)
{
    cudaError_t r = cudaEventQuery((cudaEvent_t)e->impl);
    if (r == cudaSuccess)
        return 1;
    if (r == cudaErrorNotReady)
        return 0;
    return gpp_cuda_fail(err, __FILE__, __LINE__, "cudaEventQuery", r);
}

static int s_event_elapsed(gpp_event_t *a, gpp_event_t *b, double *ms, gpp_err_t *err)
{
    float f = 0;
    GPP_CUDA_TRY(cudaEventSynchronize((cudaEvent_t)b->impl), err);
    cudaError_t r = cudaEventElapsedTime(&f, (cudaEvent_t)a->impl, (cudaEvent_t)b->impl);
    if (r != cudaSuccess) {
        /* an event never recorded: not sticky, clear it */
        (void)cudaGetLastError();
        return gpp_cuda_fail(err, __FILE__, __LINE__,
                             "cudaEventElapsedTime (record both events on one stream first)", r);
    }
    *ms = (double)f;
    return 0;
}

static void *s_stream_native(const gpp_stream_t *s)
{
    return gpp_cuda_stream((gpp_stream_t *)s);
}

/* ---- capture: CUDA graphs ----
 * Thread-local mode: a potentially unsafe call (a synchronisation, a
 * cudaMalloc) made by this thread during the capture fails and
 * invalidates it, so a step that is not capture-safe is refused rather
 * than recorded wrong; other threads (data prefetch, the comm) are not
 * affected. */
static int s_capture_begin(gpp_stream_t *s, gpp_err_t *err)
{
    GPP_CUDA_TRY(cudaStreamBeginCapture(gpp_cuda_stream(s), cudaStreamCaptureModeThreadLocal), err);
    return 0;
}

static void *s_capture_end(gpp_stream_t *s, gpp_err_t *err)
{
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(gpp_cuda_stream(s), &g);
    if (e != cudaSuccess || !g) {
        (void)cudaGetLastError(); /* an invalidated capture is not sticky */
        if (g)
            (void)cudaGraphDestroy(g);
        gpp_cuda_fail(err, __FILE__, __LINE__, "cudaStreamEndCapture",
                      e != cudaSuccess ? e : cudaErrorStreamCaptureInvalidated);
        return NULL;
    }
    cudaGraphExec_t x = NULL;
    e = cudaGraphInstantiate(&x, g, 0);
    (void)cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        gpp_cuda_fail(err, __FILE__, __LINE__, "cudaGraphInstantiate", e);
        return NULL;
    }
    return x;
}

static int s_replay_launch(void *replay, gpp_stream_t *s, gpp_err_t *err)
{
    GPP_CUDA_TRY(cudaGraphLaunch((cudaGraphExec_t)replay, gpp_cuda_stream(s)), err);
    return 0;
}

static void s_replay_destroy(void *replay)
{
    (void)cudaGraphExecDestroy((cudaGraphExec_t)replay);
}

static int s_host_pin(gpp_backend_t *be, void *p, size_t bytes, gpp_err_t *err)
{
    (void)be;
    cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e == cudaSuccess)
        return 1;
    (void)cudaGetLastError(); /* not sticky: clear it for the next call */
    gpp_cuda_fail(err, __FILE__, __LINE__, "cudaHostRegister", e);
    return 0;
}

static void s_host_unpin(gpp_backend_t *be, void *p)
{
    (void)be;
    if (cudaHostUnregister(p) != cudaSuccess)
        (void)cudaGetLastError(); /* freed anyway; nothing uses it any more */
}

const gpp_backend_vt_t gpp_cuda_backend_vt = {
    .init = s_init,
    .fini = s_fini,
    .alloc = s_alloc,
    .free = s_free,
    .cache_stats = s_cache_stats,
    .host_pin = s_host_pin,
    .host_unpin = s_host_unpin,
    .attention_stash_bytes = gpp_cuda_attention_stash_bytes,
    .op_workspace = gpp_cuda_op_workspace,
    .act_bf16 = s_act_bf16,
    .stream_init = s_stream_init,
    .stream_fini = s_stream_fini,
    .stream_sync = s_stream_sync,
    .stream_native = s_stream_native,
    .stream_free = s_stream_free,
    .copy = s_copy,
    .zero = s_zero,
    .capture_begin = s_capture_begin,
    .capture_end = s_capture_end,
    .replay_launch = s_replay_launch,
    .replay_destroy = s_replay_destroy,
    .event_init = s_event_init,
    .event_fini = s_event_fini,
    .event_record = s_event_record,
    .event_wait = s_event_wait,
    .event_sync = s_event_sync,
    .event_query = s_event_query,
    .event_elapsed = s_event_elapsed,
    .linear_fwd = gpp_cuda_linear_fwd,
    .linear_bwd = gpp_cuda_linear_bwd,
    .linear_act_fwd = gpp_cuda_linear_act_fwd,
    .relu_fwd = gpp_cuda_relu_fwd,
    .relu_bwd = gpp_cuda_relu_bwd,
    .gelu_fwd = gpp_cuda_gelu_fwd,
    .gelu_bwd = gpp_cuda_gelu_bwd,
    .layernorm_fwd = gpp_cuda_layernorm_fwd,
    .layernorm_bwd = gpp_cuda_layernorm_bwd,
    .attention_fwd = gpp_cuda_attention_fwd,
    .attention_bwd = gpp_cuda_attention_bwd,
    .embedding_bag_fwd = gpp_cuda_embedding_bag_fwd,
    .embedding_bag_bwd = gpp_cuda_embedding_bag_bwd,
    .concat_fwd = gpp_cuda_concat_fwd,
    .concat_bwd = gpp_cuda_concat_bwd,
    .slice_fwd = gpp_cuda_slice_fwd,
    .slice_bwd = gpp_cuda_slice_bwd,
    .loss_mse = gpp_cuda_loss_mse,
    .loss_ce = gpp_cuda_loss_ce,
    .add = gpp_cuda_add,
    .axpy = gpp_cuda_axpy,
    .convert = gpp_cuda_convert,
    .sparse_init = gpp_cuda_sparse_init,
    .sparse_add = gpp_cuda_sparse_add,
    .sparse_clear = gpp_cuda_sparse_clear,
    .sparse_count = gpp_cuda_sparse_count,
    .sparse_fini = gpp_cuda_sparse_fini,
    .optim_step = gpp_cuda_optim_step,
    .optim_step_sparse = gpp_cuda_optim_step_sparse,
};
