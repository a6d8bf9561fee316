/* gpp_backend_impl: what a backend implements. Private to kernels/.
 *
 * A backend is a table of operations (gpp_backend_vt_t) plus per-object
 * state behind `impl` pointers. The public calls (gpp_backend.c, gpp_ops.c,
 * gpp_sparse.c, gpp_optim.c) check arguments and shapes once for every
 * backend, then call through the table; an entry sees valid arguments and
 * only does the work. The CUDA backend is kernels/cuda/ with one
 * gpp_backend_vt_t named in gpp_backend_new. */
#ifndef GPP_BACKEND_IMPL_H
#define GPP_BACKEND_IMPL_H

#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_optim.h"
#include "kernels/gpp_sparse.h"

struct gpp_backend_s {
    const struct gpp_backend_vt_s *vt;
    gpp_backend_cfg_t cfg;
    char name[32];
    char device_name[96]; /* the device's own name (gpp_backend_device_name); init fills it */
    void *impl;           /* backend-specific, owned by the backend */
    /* device memory held, as the backend allocated it (its rounding
       included); backends update them through gpp_backend_account */
    int64_t mem_live_bytes, mem_peak_bytes, mem_allocs;
    int64_t mem_own_bytes; /* of live: the backend's own buffers (gpp_backend_mem_t) */
};

/* For backend implementations: `bytes` (> 0 allocated, < 0 freed) of device
 * memory changed hands; keeps live and high-water figures. _own: a buffer
 * the backend takes for itself (a library workspace), counted in live too. */
void gpp_backend_account(gpp_backend_t *be, int64_t bytes);
void gpp_backend_account_own(gpp_backend_t *be, int64_t bytes);

struct gpp_stream_s {
    gpp_backend_t *be;
    void *impl;
    void *ws; /* workspace, device memory owned by the stream unless lent */
    size_t ws_bytes;
    int ws_lent; /* gpp_stream_lend_workspace: the caller's memory, never freed here */
};

struct gpp_event_s {
    gpp_backend_t *be;
    int timed; /* gpp_event_new_timed: set before event_init */
    void *impl;
};

/* Row-sparse gradient (gpp_sparse.h); all arrays are device memory. */
struct gpp_sparse_grad_s {
    gpp_backend_t *be;
    int64_t table_rows, dim;
    int64_t cap;   /* rows the value block holds */
    int64_t count; /* touched rows as the host knows them, <= cap: exact on synchronous
                      backends; on the CUDA backend, whose exact count is a device counter
                      (sparse_count), an upper bound (the pairs since the last clear, at
                      most the table's rows) */
    int32_t *slot; /* [table_rows + 1]: slot of the row in rows/values, or -1; the last
                      word is the device counter of asynchronous backends */
    int32_t *rows; /* [cap]: row id of each slot, first-touch order */
    float *values; /* [cap, dim] */
    void *host;    /* backend's host-side state or NULL; released by sparse_fini, else
                      with free() */
};

struct gpp_optim_state_s {
    gpp_backend_t *be;
    gpp_optim_kind_t kind;
    int64_t numel;
    int nbufs;
    float *buf[2];
};

typedef struct gpp_backend_vt_s {
    /* lifetime: init fills be->impl and be->name from be->cfg */
    int (*init)(gpp_backend_t *be, gpp_err_t *err);
    void (*fini)(gpp_backend_t *be);

    /* memory (synchronous); cache_stats may be NULL (no caching allocator) */
    void *(*alloc)(gpp_backend_t *be, size_t bytes, gpp_err_t *err);
    void (*free)(gpp_backend_t *be, void *p);
    void (*cache_stats)(gpp_backend_t *be, gpp_backend_cache_t *out);
    /* page-locking of host memory; NULL: the backend has no such thing */
    int (*host_pin)(gpp_backend_t *be, void *p, size_t bytes, gpp_err_t *err);
    void (*host_unpin)(gpp_backend_t *be, void *p);
    /* the stash attention_fwd fills for these shapes; NULL: the op table's
     * gpp_attention_stash_bytes (gpp_backend_attention_stash_bytes) */
    size_t (*attention_stash_bytes)(gpp_backend_t *be, int64_t n, int64_t seq, int64_t hidden,
                                    int heads);
    /* the stream workspace op's kernels ask; NULL: the op table's
     * gpp_op_workspace (gpp_backend_op_workspace) */
    gpp_work_t (*op_workspace)(gpp_backend_t *be, const gpp_graph_t *g, const gpp_op_t *op);
    /* whether op's kernels take bf16 activations (gpp_backend_act_bf16);
     * NULL: none do */
    int (*act_bf16)(gpp_backend_t *be, gpp_op_type_t type);

    /* streams; stream_free releases memory after the work enqueued so far */
    int (*stream_init)(gpp_stream_t *s, gpp_err_t *err);
    void (*stream_fini)(gpp_stream_t *s);
    int (*stream_sync)(gpp_stream_t *s, gpp_err_t *err);
    void *(*stream_native)(const gpp_stream_t *s); /* NULL: none */
    void (*stream_free)(gpp_stream_t *s, void *p);
    int (*copy)(gpp_stream_t *s, void *dst, const void *src, size_t bytes, gpp_copy_kind_t kind,
                gpp_err_t *err);
    int (*zero)(gpp_stream_t *s, void *dst, size_t bytes, gpp_err_t *err);

    /* stream capture (gpp_backend.h); all NULL: the backend cannot capture.
     * capture_end always ends the capture; returns the backend's replay
     * handle or NULL + message. */
    int (*capture_begin)(gpp_stream_t *s, gpp_err_t *err);
    void *(*capture_end)(gpp_stream_t *s, gpp_err_t *err);
    int (*replay_launch)(void *replay, gpp_stream_t *s, gpp_err_t *err);
    void (*replay_destroy)(void *replay);

    /* events */
    int (*event_init)(gpp_event_t *e, gpp_err_t *err);
    void (*event_fini)(gpp_event_t *e);
    int (*event_record)(gpp_event_t *e, gpp_stream_t *s, gpp_err_t *err);
    int (*event_wait)(gpp_event_t *e, gpp_stream_t *s, gpp_err_t *err);
    int (*event_sync)(gpp_event_t *e, gpp_err_t *err);
    int (*event_query)(gpp_event_t *e, gpp_err_t *err);
    /* both timed, same backend; blocks until b is complete */
    int (*event_elapsed)(gpp_event_t *a, gpp_event_t *b, double *ms, gpp_err_t *err);

    /* the kernels of the op types only this backend has, indexed by
     * gpp_op_type_t (gpp_ops.h "PyTorch modules"); NULL or a NULL entry:
     * none (an embedding_bag's entry: its dense-update backward) */
    const gpp_op_kernel_t *ext;

    /* kernels: the gpp_ops.h contracts, arguments already checked */
    int (*linear_fwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                      const gpp_tensor_t *b, gpp_tensor_t *y, gpp_err_t *err);
    int (*linear_bwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                      const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_tensor_t *dw, gpp_tensor_t *db,
                      gpp_err_t *err);
    /* act: GPP_OP_RELU (z NULL) or GPP_OP_GELU (z given); form: gpp_gelu_form_t */
    int (*linear_act_fwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                          const gpp_tensor_t *b, int act, int form, gpp_tensor_t *z,
                          gpp_tensor_t *y, gpp_err_t *err);
    int (*relu_fwd)(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);
    int (*relu_bwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy,
                    gpp_tensor_t *dx, gpp_err_t *err);
    int (*gelu_fwd)(gpp_stream_t *s, const gpp_tensor_t *x, int form, gpp_tensor_t *y,
                    gpp_err_t *err);
    int (*gelu_bwd)(gpp_stream_t *s, const gpp_tensor_t *x, int form, const gpp_tensor_t *dy,
                    gpp_tensor_t *dx, gpp_err_t *err);
    int (*layernorm_fwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                         const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err);
    int (*layernorm_bwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                         const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                         gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err);
    int (*attention_fwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                         int heads, int causal, gpp_tensor_t *y, void *stash, gpp_err_t *err);
    int (*attention_bwd)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                         int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                         gpp_tensor_t *dx, gpp_attention_params_t *dp, gpp_err_t *err);
    /* the split backward (gpp_ops.h gpp_attention_bwd_in / _w); both NULL
     * on a backend without the split (gpp_backend_bwd_split refuses
     * zero-bubble schedules there) */
    int (*attention_bwd_in)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                            int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                            gpp_tensor_t *dx, void *dqkv, gpp_err_t *err);
    int (*attention_bwd_w)(gpp_stream_t *s, const gpp_tensor_t *x, int heads, const void *stash,
                           const gpp_tensor_t *dy, const void *dqkv, gpp_attention_params_t *dp,
                           gpp_err_t *err);
    int (*embedding_bag_fwd)(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *table,
                             gpp_tensor_t *y, gpp_err_t *err);
    int (*embedding_bag_bwd)(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *dy,
                             gpp_sparse_grad_t *dtable, gpp_err_t *err);
    int (*concat_fwd)(gpp_stream_t *s, int n_in, const gpp_tensor_t *const *xs, gpp_tensor_t *y,
                      gpp_err_t *err);
    int (*concat_bwd)(gpp_stream_t *s, int n_in, const gpp_tensor_t *dy, gpp_tensor_t *const *dxs,
                      gpp_err_t *err);
    /* y = x's columns [start, start + y cols); dx's columns there += dy */
    int (*slice_fwd)(gpp_stream_t *s, const gpp_tensor_t *x, int64_t start, gpp_tensor_t *y,
                     gpp_err_t *err);
    int (*slice_bwd)(gpp_stream_t *s, const gpp_tensor_t *dy, int64_t start, gpp_tensor_t *dx,
                     gpp_err_t *err);
    int (*loss_mse)(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *target, float *loss,
                    float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);
    int (*loss_ce)(gpp_stream_t *s, const gpp_tensor_t *logits, const gpp_tensor_t *labels,
                   float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);
    /* y = a + b, and y += alpha x, over tensors of the same element count
     * (fp32, or bf16 where the backend takes it, gpp_backend_act_bf16) */
    int (*add)(gpp_stream_t *s, const gpp_tensor_t *a, const gpp_tensor_t *b, gpp_tensor_t *y,
               gpp_err_t *err);
    int (*axpy)(gpp_stream_t *s, float alpha, const gpp_tensor_t *x, gpp_tensor_t *y,
                gpp_err_t *err);
    /* y = x element for element between element types (the same count);
     * NULL: the backend keeps one type (reshape between bf16 and fp32) */
    int (*convert)(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);

    /* sparse gradients: fill the slot map with -1; accumulate pairs (growing
     * the value block as needed); clear the touched rows */
    int (*sparse_init)(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err);
    int (*sparse_add)(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t count, const int32_t *rows,
                      const float *values, int64_t value_stride, gpp_err_t *err);
    int (*sparse_clear)(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err);
    /* optional: the touched rows as of the last synchronisation (NULL: g->count);
     * releasing g->host (NULL: free()) */
    int64_t (*sparse_count)(const gpp_sparse_grad_t *g);
    void (*sparse_fini)(gpp_sparse_grad_t *g);

    /* optimizer steps over numel elements / a sparse table */
    int (*optim_step)(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                      int64_t step, float *param, const float *grad, gpp_err_t *err);
    int (*optim_step_sparse)(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                             int64_t step, float *table, const gpp_sparse_grad_t *grad,
                             gpp_err_t *err);
} gpp_backend_vt_t;

/* For backends' sparse_add: grows g's rows and values to hold `need` rows
 * (at least doubling, capped at the table's rows), copying the rows held so
 * far on stream s (D2D) and handing the old blocks back with stream_free, so
 * an asynchronous backend never frees memory a queued kernel still reads
 * (kernels/gpp_sparse.c). */
int gpp_sparse_grad_reserve(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t need, gpp_err_t *err);

/* The CPU backend (kernels/cpu/gpp_cpu_backend.c). */
extern const gpp_backend_vt_t gpp_cpu_backend_vt;
#ifdef GPP_HAVE_CUDA
/* The CUDA backend (kernels/cuda/gpp_cuda_backend.c); built when CMake found
 * nvcc (GPP_CUDA). */
extern const gpp_backend_vt_t gpp_cuda_backend_vt;
#endif

#endif
