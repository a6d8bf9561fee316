/* gpp_backend: backend-independent half of backends, streams, events and
 * tensors; the device work goes through the backend's table. */
#include "kernels/gpp_backend.h"

#include <assert.h>
#include <string.h>
#include <stdlib.h>

#include "kernels/gpp_backend_impl.h"
#include "model/gpp_optable.h"

gpp_backend_t *gpp_backend_new(const gpp_backend_cfg_t *cfg, gpp_err_t *err)
{
    assert(cfg);
    const gpp_backend_vt_t *vt = NULL;
    switch (cfg->kind) {
    case GPP_DEVICE_CPU:
        vt = &gpp_cpu_backend_vt;
        break;
    case GPP_DEVICE_CUDA:
#ifdef GPP_HAVE_CUDA
        vt = &gpp_cuda_backend_vt;
        break;
#else
        gpp_err_set(err,
                    "backend cuda:%d: this gpp was built without CUDA (CMake found no nvcc, or "
                    "-DGPP_CUDA=OFF); rebuild on a machine with the CUDA toolkit, or use the cpu "
                    "backend",
                    cfg->device);
        return NULL;
#endif
    default:
        gpp_err_set(err, "backend: unknown device kind %d", (int)cfg->kind);
        return NULL;
    }
    gpp_backend_t *self = gpp_xcalloc(1, sizeof *self);
    self->vt = vt;
    self->cfg = *cfg;
    if (vt->init(self, err) < 0) {
        free(self);
        return NULL;
    }
    return self;
}

void gpp_backend_destroy(gpp_backend_t **self_p)
{
    assert(self_p);
    gpp_backend_t *self = *self_p;
    if (!self)
        return;
    self->vt->fini(self);
    free(self);
    *self_p = NULL;
}

void gpp_backend_account(gpp_backend_t *be, int64_t bytes)
{
    be->mem_live_bytes += bytes;
    be->mem_allocs += bytes > 0 ? 1 : -1;
    assert(be->mem_live_bytes >= 0 && be->mem_allocs >= 0);
    if (be->mem_live_bytes > be->mem_peak_bytes)
        be->mem_peak_bytes = be->mem_live_bytes;
}

void gpp_backend_account_own(gpp_backend_t *be, int64_t bytes)
{
    gpp_backend_account(be, bytes);
    be->mem_own_bytes += bytes;
    assert(be->mem_own_bytes >= 0 && be->mem_own_bytes <= be->mem_live_bytes);
}

void gpp_backend_mem(const gpp_backend_t *self, gpp_backend_mem_t *out)
{
    assert(self && out);
    out->live_bytes = self->mem_live_bytes;
    out->peak_bytes = self->mem_peak_bytes;
    out->allocs = self->mem_allocs;
    out->own_bytes = self->mem_own_bytes;
}

void gpp_backend_mem_reset_peak(gpp_backend_t *self)
{
    assert(self);
    self->mem_peak_bytes = self->mem_live_bytes;
}

gpp_device_kind_t gpp_backend_kind(const gpp_backend_t *self)
{
    assert(self);
    return self->cfg.kind;
}

const char *gpp_dtype_name(gpp_dtype_t t)
{
    switch (t) {
    case GPP_DTYPE_I32:
        return "i32";
    case GPP_DTYPE_BF16:
        return "bf16";
    default:
        return "f32";
    }
}

void gpp_dtype_from_f32(gpp_dtype_t t, const float *src, int64_t n, void *dst)
{
    assert(t != GPP_DTYPE_I32 && (n == 0 || (src && dst)));
    if (t != GPP_DTYPE_BF16) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &src[i], sizeof u);
        if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it one (quiet) */
            d[i] = (uint16_t)((u >> 16) | 0x40u);
        else
            d[i] = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

const char *gpp_backend_name(const gpp_backend_t *self)
{
    assert(self);
    return self->name;
}

gpp_alloc_rule_t gpp_backend_alloc_rule(const gpp_backend_t *self)
{
    assert(self);
    return self->cfg.kind == GPP_DEVICE_CUDA ? GPP_ALLOC_CLASSES : GPP_ALLOC_ALIGN64;
}

const char *gpp_backend_device_name(const gpp_backend_t *self)
{
    assert(self);
    return self->device_name[0] ? self->device_name : self->name;
}

gpp_precision_t gpp_backend_precision(const gpp_backend_t *self)
{
    assert(self);
    return self->cfg.kind == GPP_DEVICE_CPU ? GPP_PRECISION_FP32 : self->cfg.precision;
}

int gpp_backend_bf16_tensors(const gpp_backend_t *self)
{
    assert(self);
    return self->cfg.kind == GPP_DEVICE_CUDA && self->cfg.precision == GPP_PRECISION_BF16 &&
           self->cfg.bf16_tensors;
}

void *gpp_backend_alloc(gpp_backend_t *self, size_t bytes, gpp_err_t *err)
{
    assert(self);
    return self->vt->alloc(self, bytes, err);
}

int gpp_backend_host_pin(gpp_backend_t *self, void *p, size_t bytes, gpp_err_t *err)
{
    assert(self);
    return self->vt->host_pin && bytes ? self->vt->host_pin(self, p, bytes, err) : 0;
}

void gpp_backend_host_unpin(gpp_backend_t *self, void *p)
{
    assert(self);
    if (self->vt->host_unpin)
        self->vt->host_unpin(self, p);
}

size_t gpp_backend_attention_stash_bytes(gpp_backend_t *self, int64_t n, int64_t seq,
                                         int64_t hidden, int heads)
{
    assert(self && heads > 0);
    size_t full = gpp_attention_stash_bytes(n, seq, hidden, heads);
    if (!self->vt->attention_stash_bytes)
        return full;
    size_t b = self->vt->attention_stash_bytes(self, n, seq, hidden, heads);
    assert(b <= full);
    return b;
}

int64_t gpp_backend_op_kernel_stash(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op)
{
    assert(self && g && op);
    if (op->type == GPP_OP_ATTENTION)
        return (int64_t)gpp_backend_attention_stash_bytes(self, 1, op->rows, op->cols, op->heads);
    return gpp_op_kernel_stash_bytes(g, op);
}

gpp_work_t gpp_backend_op_workspace(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op)
{
    assert(self && g && op);
    gpp_work_t w =
        self->vt->op_workspace ? self->vt->op_workspace(self, g, op) : gpp_op_workspace(g, op);
    assert(w.fixed >= 0 && w.per_sample >= 0);
    return w;
}

int gpp_backend_act_bf16(gpp_backend_t *self, gpp_op_type_t type)
{
    assert(self && type >= 0 && type < GPP_OP__COUNT);
    return self->vt->act_bf16 ? self->vt->act_bf16(self, type) : 0;
}

gpp_dtype_t gpp_backend_op_out_dtype(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op)
{
    assert(self && g && op);
    int bf16 =
        op->type != GPP_OP_INPUT && gpp_backend_act_bf16(self, op->type) && op->n_outputs > 0;
    for (int k = 0; bf16 && k < op->n_outputs; k++)
        bf16 = gpp_backend_act_bf16(self, g->ops[op->outputs[k]].type);
    return bf16 ? GPP_DTYPE_BF16 : GPP_DTYPE_F32;
}

int64_t gpp_backend_op_out_bytes(gpp_backend_t *self, const gpp_graph_t *g, const gpp_op_t *op)
{
    /* the graph's out_bytes are fp32's (4 bytes an element) */
    return gpp_backend_op_out_dtype(self, g, op) == GPP_DTYPE_BF16 ? op->out_bytes / 2
                                                                   : op->out_bytes;
}

void gpp_backend_free(gpp_backend_t *self, void **ptr_p)
{
    assert(self && ptr_p);
    if (*ptr_p)
        self->vt->free(self, *ptr_p);
    *ptr_p = NULL;
}

int gpp_backend_cache_stats(gpp_backend_t *self, gpp_backend_cache_t *out)
{
    assert(self && out);
    *out = (gpp_backend_cache_t){0};
    if (!self->vt->cache_stats)
        return 0;
    self->vt->cache_stats(self, out);
    return 1;
}

gpp_stream_t *gpp_stream_new(gpp_backend_t *be, gpp_err_t *err)
{
    assert(be);
    gpp_stream_t *self = gpp_xcalloc(1, sizeof *self);
    self->be = be;
    if (be->vt->stream_init(self, err) < 0) {
        free(self);
        return NULL;
    }
    return self;
}

void gpp_stream_destroy(gpp_stream_t **self_p)
{
    assert(self_p);
    gpp_stream_t *self = *self_p;
    if (!self)
        return;
    const gpp_backend_vt_t *vt = self->be->vt;
    /* Errors of work still in flight have no one left to report to. */
    vt->stream_sync(self, NULL);
    if (self->ws && !self->ws_lent)
        vt->free(self->be, self->ws);
    vt->stream_fini(self);
    free(self);
    *self_p = NULL;
}

struct gpp_replay_s {
    gpp_backend_t *be;
    void *impl;
};

int gpp_backend_can_capture(const gpp_backend_t *be)
{
    assert(be);
    return be->vt->capture_begin != NULL;
}

int gpp_stream_capture_begin(gpp_stream_t *self, gpp_err_t *err)
{
    assert(self);
    if (!self->be->vt->capture_begin)
        return gpp_err_set(err, "backend %s cannot capture a stream (CUDA graphs need cuda)",
                           self->be->name);
    return self->be->vt->capture_begin(self, err);
}

int gpp_stream_capture_end(gpp_stream_t *self, gpp_replay_t **out, gpp_err_t *err)
{
    assert(self && out && self->be->vt->capture_end);
    *out = NULL;
    void *impl = self->be->vt->capture_end(self, err);
    if (!impl)
        return -1;
    *out = gpp_xcalloc(1, sizeof **out);
    (*out)->be = self->be;
    (*out)->impl = impl;
    return 0;
}

int gpp_replay_launch(gpp_replay_t *r, gpp_stream_t *s, gpp_err_t *err)
{
    assert(r && s && s->be == r->be);
    return r->be->vt->replay_launch(r->impl, s, err);
}

void gpp_replay_destroy(gpp_replay_t **r_p)
{
    assert(r_p);
    gpp_replay_t *r = *r_p;
    if (!r)
        return;
    r->be->vt->replay_destroy(r->impl);
    free(r);
    *r_p = NULL;
}

void *gpp_stream_native(const gpp_stream_t *self)
{
    assert(self);
    return self->be->vt->stream_native ? self->be->vt->stream_native(self) : NULL;
}

gpp_backend_t *gpp_stream_backend(const gpp_stream_t *self)
{
    assert(self);
    return self->be;
}

int gpp_stream_sync(gpp_stream_t *self, gpp_err_t *err)
{
    assert(self);
    return self->be->vt->stream_sync(self, err);
}

void *gpp_stream_workspace(gpp_stream_t *self, size_t bytes, gpp_err_t *err)
{
    assert(self);
    if (bytes <= self->ws_bytes && self->ws)
        return self->ws;
    if (self->ws_lent) {
        gpp_err_set(err,
                    "stream workspace: a kernel asks %zu bytes, the %zu lent to the stream "
                    "(the stage's memory plan) are less; the backend's op workspace "
                    "(gpp_backend_op_workspace) understates it",
                    bytes, self->ws_bytes);
        return NULL;
    }
    /* Grow by at least half so that a sequence of slightly larger requests
     * does not reallocate every time. */
    size_t want =
        bytes > self->ws_bytes + self->ws_bytes / 2 ? bytes : self->ws_bytes + self->ws_bytes / 2;
    void *p = self->be->vt->alloc(self->be, want, err);
    if (!p)
        return NULL;
    if (self->ws)
        self->be->vt->stream_free(self, self->ws);
    self->ws = p;
    self->ws_bytes = want;
    return p;
}

void gpp_stream_lend_workspace(gpp_stream_t *self, void *p, size_t bytes)
{
    assert(self && (p || !bytes));
    if (self->ws && !self->ws_lent) /* stream-ordered: enqueued work keeps it */
        self->be->vt->stream_free(self, self->ws);
    self->ws = p;
    self->ws_bytes = p ? bytes : 0;
    self->ws_lent = p != NULL;
}

void *gpp_stream_workspace_now(const gpp_stream_t *self)
{
    assert(self);
    return self->ws;
}

int gpp_stream_copy(gpp_stream_t *self, void *dst, const void *src, size_t bytes,
                    gpp_copy_kind_t kind, gpp_err_t *err)
{
    assert(self && (bytes == 0 || (dst && src)));
    if (bytes == 0)
        return 0;
    return self->be->vt->copy(self, dst, src, bytes, kind, err);
}

int gpp_stream_zero(gpp_stream_t *self, void *dst, size_t bytes, gpp_err_t *err)
{
    assert(self && (bytes == 0 || dst));
    if (bytes == 0)
        return 0;
    return self->be->vt->zero(self, dst, bytes, err);
}

static gpp_event_t *s_event_new(gpp_backend_t *be, int timed, gpp_err_t *err)
{
    assert(be);
    gpp_event_t *self = gpp_xcalloc(1, sizeof *self);
    self->be = be;
    self->timed = timed;
    if (be->vt->event_init(self, err) < 0) {
        free(self);
        return NULL;
    }
    return self;
}

gpp_event_t *gpp_event_new(gpp_backend_t *be, gpp_err_t *err)
{
    return s_event_new(be, 0, err);
}

gpp_event_t *gpp_event_new_timed(gpp_backend_t *be, gpp_err_t *err)
{
    return s_event_new(be, 1, err);
}

void gpp_event_destroy(gpp_event_t **self_p)
{
    assert(self_p);
    gpp_event_t *self = *self_p;
    if (!self)
        return;
    self->be->vt->event_fini(self);
    free(self);
    *self_p = NULL;
}

int gpp_event_record(gpp_event_t *self, gpp_stream_t *stream, gpp_err_t *err)
{
    assert(self && stream && stream->be == self->be);
    return self->be->vt->event_record(self, stream, err);
}

int gpp_event_wait(gpp_event_t *self, gpp_stream_t *stream, gpp_err_t *err)
{
    assert(self && stream && stream->be == self->be);
    return self->be->vt->event_wait(self, stream, err);
}

int gpp_event_sync(gpp_event_t *self, gpp_err_t *err)
{
    assert(self);
    return self->be->vt->event_sync(self, err);
}

int gpp_event_query(gpp_event_t *self, gpp_err_t *err)
{
    assert(self);
    return self->be->vt->event_query(self, err);
}

int gpp_event_elapsed_ms(gpp_event_t *start, gpp_event_t *end, double *ms, gpp_err_t *err)
{
    assert(start && end && ms && start->be == end->be);
    assert(start->timed && end->timed); /* gpp_event_new_timed */
    return start->be->vt->event_elapsed(start, end, ms, err);
}

int gpp_tensor_alloc(gpp_backend_t *be, gpp_dtype_t dtype, int64_t n, int64_t rows, int64_t cols,
                     gpp_tensor_t *t, gpp_err_t *err)
{
    assert(be && t && n >= 0 && rows >= 0 && cols >= 0);
    *t = gpp_tensor(NULL, dtype, n, rows, cols);
    t->data = be->vt->alloc(be, gpp_tensor_bytes(t), err);
    return t->data ? 0 : -1;
}

void gpp_tensor_free(gpp_backend_t *be, gpp_tensor_t *t)
{
    assert(be && t);
    gpp_backend_free(be, &t->data);
}
