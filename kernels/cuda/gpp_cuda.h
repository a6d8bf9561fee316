/* gpp_cuda: the CUDA backend's private state and helpers (C side; the
 * kernels are in gpp_cuda_*.cu behind gpp_cuda_kern.h). Private to
 * kernels/cuda/.
 *
 * The backend owns one device (cfg.device), a caching allocator
 * (gpp_cuda_cache.h) and a cuBLASLt handle with a cache of matmul plans.
 * A stream owns a cudaStream_t, a cuBLASLt workspace, a fault word in
 * mapped host memory that kernels use to report bad data, a packed bf16
 * operand buffer and a side buffer for sparse work outside the passes. The
 * backend and its streams must be used from the thread that created them
 * (the device is selected there). */
#ifndef GPP_CUDA_H
#define GPP_CUDA_H

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/gpp_cuda_cache.h"
#include "kernels/cuda/gpp_cuda_check.h"
#include "kernels/cuda/gpp_cuda_kern.h"
#include "kernels/gpp_backend_impl.h"

/* cuBLASLt's check macro (CUDA's: gpp_cuda_check.h): a failed call becomes
 * a gpp_err naming file:line, the call and cuBLAS's status string. */
int gpp_cuda_lt_fail(gpp_err_t *err, const char *file, int line, const char *call,
                     cublasStatus_t st);
#define GPP_LT_TRY(call, err)                                                                      \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return gpp_cuda_lt_fail((err), __FILE__, __LINE__, #call, s_);                         \
    } while (0)

typedef struct gpp_cuda_plans_s gpp_cuda_plans_t; /* gpp_cuda_blas.c */

/* Which attention core runs (docs/gpu.md "Fused attention";
 * gpp_cuda_attention_core). AUTO and UNFUSED: the batched products +
 * softmax, at precision bf16 over bf16 operands (GPP_CUDA_CORE_UNFUSED_BF16),
 * else over fp32 ones. FUSED: a fused core wherever the head size has one
 * (<= 128; on the tensor cores at bf16 for head sizes <= 64 on sm_80+).
 * UNFUSED_FP32: the products over fp32 operands at every precision (the
 * bf16 core's comparison). */
typedef enum {
    GPP_CUDA_ATTN_AUTO,
    GPP_CUDA_ATTN_FUSED,
    GPP_CUDA_ATTN_UNFUSED,
    GPP_CUDA_ATTN_UNFUSED_FP32
} gpp_cuda_attn_t;

/* cuBLASLt is loaded with dlopen when the first CUDA backend opens, not
 * linked: libcublasLt.so is 540 MB, and linking it made every gpp program
 * (agents, coordinator, tests) take 1.3-2 s and 210 MB to start on the
 * development machine, CUDA backend used or not (measured with
 * /usr/bin/time on a one-line program linking it: 1.26 s, 211 MB, against
 * 0.04 s, 1.6 MB linking only cudart). Calls go through gpp_cuda_lt. */
#define GPP_CUDA_LT_FNS(X)                                                                         \
    X(cublasLtCreate)                                                                              \
    X(cublasLtDestroy)                                                                             \
    X(cublasLtGetStatusString)                                                                     \
    X(cublasLtMatmul)                                                                              \
    X(cublasLtMatmulAlgoGetHeuristic)                                                              \
    X(cublasLtMatmulDescCreate)                                                                    \
    X(cublasLtMatmulDescDestroy)                                                                   \
    X(cublasLtMatmulDescSetAttribute)                                                              \
    X(cublasLtMatmulPreferenceCreate)                                                              \
    X(cublasLtMatmulPreferenceDestroy)                                                             \
    X(cublasLtMatmulPreferenceSetAttribute)                                                        \
    X(cublasLtMatrixLayoutCreate)                                                                  \
    X(cublasLtMatrixLayoutDestroy)                                                                 \
    X(cublasLtMatrixLayoutSetAttribute)
typedef struct {
#define GPP_CUDA_LT_FIELD(f) __typeof__(&f) f;
    GPP_CUDA_LT_FNS(GPP_CUDA_LT_FIELD)
#undef GPP_CUDA_LT_FIELD
} gpp_cuda_lt_t;
extern gpp_cuda_lt_t gpp_cuda_lt;
/* A build that brings its own cuBLASLt (the host emulation,
 * tests/emu/) defines this to fill the table, and then nothing is
 * dlopen'ed. Weak: undefined, so NULL, in every other build. */
void gpp_cuda_lt_builtin(gpp_cuda_lt_t *lt) __attribute__((weak));
/* Loads libcublasLt.so.<major of the headers> once; -1 + message when it
 * cannot be loaded. */
int gpp_cuda_lt_load(gpp_err_t *err);

typedef struct {
    int device;
    char dev_name[256];
    int sm_count;
    int cc_major; /* compute capability, major: 8 for A100, 9 for H100 */
    size_t total_mem_bytes;
    gpp_cuda_cache_t *cache;
    cublasLtHandle_t lt;
    gpp_precision_t precision; /* cuBLASLt compute type: 32F, 32F_FAST_TF32, 32F_FAST_16BF */
    gpp_cuda_plans_t *plans;
    /* attention core (gpp_cuda_ops.c, s_att_fused): environment
     * GPP_CUDA_ATTENTION=auto|fused|unfused at backend creation */
    gpp_cuda_attn_t attn;
    /* precision bf16, the products' operands (gpp_cuda_blas.c): 0 fp32
     * operands converted inside cuBLASLt (CUBLAS_COMPUTE_32F_FAST_16BF), 1
     * packed to bf16 by a kernel first, then a bf16 x bf16 -> fp32 product;
     * environment GPP_CUDA_BF16_GEMM=fast|packed, default fast */
    int bf16_packed;
    /* precision bf16: activations and their gradients in bf16 where every
     * kernel that touches them takes it (gpp_backend_act_bf16);
     * gpp_backend_cfg_t.bf16_tensors, off by default */
    int bf16_tensors;
    /* with bf16_packed: each parameter operand (gpp_cuda_gemm_t.b_param)
     * rounded to bf16 once per value it takes (gpp_cuda_blas.c) */
    struct gpp_cuda_wpack_s *wpack;
    int n_wpack;
} gpp_cuda_t;

#define GPP_CUDA_PACK_OLD 40 /* doubling from 512 B: more than any device holds */
typedef struct {
    cudaStream_t st;
    void *lt_ws;             /* cuBLASLt workspace (GPP_CUDA_LT_WS_BYTES), taken at the
                                stream's first product (gpp_cuda_lt_workspace): a copy
                                stream never holds one */
    gpp_cuda_fault_t *fault; /* mapped pinned host memory */
    void *pack;              /* device buffer of packed bf16 operands (bf16_packed) */
    size_t pack_bytes;
    /* the buffers pack replaced: a captured CUDA graph may still pack into
     * one, so they live as long as the stream (each at most half the next:
     * all of them together are smaller than pack) */
    void *pack_old[GPP_CUDA_PACK_OLD];
    int n_pack_old;
    void *side; /* scratch of work outside a stage's passes (gpp_cuda_side_buffer) */
    size_t side_bytes;
} gpp_cuda_stream_t;

/* cuBLASLt workspace per stream: 32 MiB, what NVIDIA's cuBLAS documentation
 * recommends for Hopper (cublasLtMatmul, "workspace"); smaller on older
 * architectures works too. */
#define GPP_CUDA_LT_WS_BYTES ((size_t)32 << 20)

static inline gpp_cuda_t *gpp_cuda_be(gpp_backend_t *be)
{
    return (gpp_cuda_t *)be->impl;
}
static inline gpp_cuda_stream_t *gpp_cuda_st(gpp_stream_t *s)
{
    return (gpp_cuda_stream_t *)s->impl;
}
static inline cudaStream_t gpp_cuda_stream(gpp_stream_t *s)
{
    return gpp_cuda_st(s)->st;
}

/* A device buffer of the stream of at least `bytes` (256-byte aligned) for
 * packed bf16 operands. A bigger request moves to a new buffer and keeps the
 * old one until the stream is destroyed (work already enqueued, or a
 * captured graph, may still use it). */
void *gpp_cuda_pack_buffer(gpp_stream_t *s, size_t bytes, gpp_err_t *err);
/* Scratch of at least `bytes` for work outside a stage's passes (the
 * sparse sync's adds into a gradient, gpp_sparse_grad_add), kept apart
 * from the stream workspace that the passes' recordings hold and the
 * memory model charges. One of the backend's own buffers; growing
 * synchronises the stream first (queued work may use the old one). */
void *gpp_cuda_side_buffer(gpp_stream_t *s, size_t bytes, gpp_err_t *err);
/* The stream's cuBLASLt workspace, taken at its first product (one of the
 * backend's own buffers); NULL + message when the device has no room. */
void *gpp_cuda_lt_workspace(gpp_stream_t *s, gpp_err_t *err);
/* Synchronises the stream and reports a kernel's recorded data error. */
int gpp_cuda_stream_sync(gpp_stream_t *s, gpp_err_t *err);

/* ---- cuBLASLt (gpp_cuda_blas.c) ----
 * Row-major C (m x n, ldc) = act(alpha op(A) op(B) + beta C (+ bias[j] per
 * column j when bias is not NULL)), batch products strided by sa, sb, sc
 * elements. op(X) = X^T when trans_x. act (the epilogue): none, ReLU, or
 * tanh-form GELU writing its input (the pre-activation) to aux as well
 * (row-major m x n with leading dimension aux_ld, a multiple of 8 >= n:
 * cuBLASLt's EPILOGUE_AUX_LD rule; aux of C's element type); epilogues are
 * for single products.
 * Element types: a, b and c are each fp32, or bf16 where x_bf16 says so
 * (the caller stores them so: the executor's bf16 tensors, the attention
 * cores' operands). A product with any bf16 operand or result, or any
 * product at precision bf16 with GPP_CUDA_BF16_GEMM=packed, runs bf16 x
 * bf16 with fp32 accumulation (CUBLAS_COMPUTE_32F): the fp32 operands are
 * rounded to bf16 first (a parameter's rounding kept, b_param), and with a
 * bf16 C the bias is its kept bf16 rounding (cuBLASLt's bias type follows
 * D's, as mixed-precision frameworks give it). The bias is a parameter. */
typedef enum { GPP_CUDA_EPI_NONE = 0, GPP_CUDA_EPI_RELU, GPP_CUDA_EPI_GELU_AUX } gpp_cuda_epi_t;
typedef struct {
    int trans_a, trans_b;
    int64_t m, n, k;
    float alpha, beta;
    const void *a, *b; /* float *, or gpp bf16 (2 bytes) where a_bf16 / b_bf16 */
    int a_bf16, b_bf16;
    int b_param; /* b is a parameter: it changes only through an optimizer step or a
                    copy into it (packed bf16 keeps its rounding until then) */
    int64_t lda, ldb;
    void *c; /* float *, or bf16 where c_bf16 */
    int c_bf16;
    int64_t ldc;
    int64_t batch, sa, sb, sc; /* batch 0 or 1: one product */
    const float *bias;
    gpp_cuda_epi_t epi;
    void *aux; /* GPP_CUDA_EPI_GELU_AUX: C's element type */
    int64_t aux_ld;
} gpp_cuda_gemm_t;
/* 0, -1 + message, or GPP_CUDA_NO_ALGO + message when cuBLASLt has no
 * algorithm for the product (with that epilogue): a caller can then run
 * the epilogue's work as a kernel. */
#define GPP_CUDA_NO_ALGO (-2)
int gpp_cuda_gemm(gpp_stream_t *s, const gpp_cuda_gemm_t *g, gpp_err_t *err);
/* The packed bf16 roundings of parameters whose source overlaps [p, p +
 * bytes) are stale: an optimizer step, a copy or a zeroing wrote there
 * (release: the source is freed, the rounding's buffer goes back too). */
void gpp_cuda_wpack_forget(gpp_backend_t *be, const void *p, size_t bytes, int release);
void gpp_cuda_wpack_destroy(gpp_backend_t *be);
/* The backend's own buffers (gpp_backend_mem_t.own_bytes) */
void *gpp_cuda_own_alloc(gpp_backend_t *be, size_t bytes);
void gpp_cuda_own_free(gpp_backend_t *be, void *p);
gpp_cuda_plans_t *gpp_cuda_plans_new(void);
void gpp_cuda_plans_destroy(gpp_cuda_plans_t **self_p);

/* ---- vtable entries (gpp_cuda_ops.c) ---- */
int gpp_cuda_linear_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                        const gpp_tensor_t *b, gpp_tensor_t *y, gpp_err_t *err);
int gpp_cuda_linear_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                        const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_tensor_t *dw,
                        gpp_tensor_t *db, gpp_err_t *err);
int gpp_cuda_relu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);
int gpp_cuda_relu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy,
                      gpp_tensor_t *dx, gpp_err_t *err);
int gpp_cuda_linear_act_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                            const gpp_tensor_t *b, int act, int form, gpp_tensor_t *z,
                            gpp_tensor_t *y, gpp_err_t *err);
int gpp_cuda_gelu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, gpp_tensor_t *y,
                      gpp_err_t *err);
int gpp_cuda_gelu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, const gpp_tensor_t *dy,
                      gpp_tensor_t *dx, gpp_err_t *err);
int gpp_cuda_layernorm_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                           const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err);
int gpp_cuda_layernorm_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                           const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                           gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err);
/* The attention core a head size runs on this backend (gpp_cuda_attn_t's
 * rule): the one place the forward, the backward, the stash size and the
 * start-up line ask. */
typedef enum {
    GPP_CUDA_CORE_UNFUSED,      /* batched products + softmax over an fp32 stash */
    GPP_CUDA_CORE_FP32,         /* fused, fp32 on the CUDA cores */
    GPP_CUDA_CORE_TC,           /* fused, bf16 on the tensor cores */
    GPP_CUDA_CORE_UNFUSED_BF16, /* batched bf16 products + softmax over a bf16 stash */
} gpp_cuda_core_t;
gpp_cuda_core_t gpp_cuda_attention_core(const gpp_cuda_t *c, int64_t dh);
size_t gpp_cuda_attention_stash_bytes(gpp_backend_t *be, int64_t n, int64_t seq, int64_t hidden,
                                      int heads);
gpp_work_t gpp_cuda_op_workspace(gpp_backend_t *be, const gpp_graph_t *g, const gpp_op_t *op);
int gpp_cuda_attention_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                           int heads, int causal, gpp_tensor_t *y, void *stash, gpp_err_t *err);
int gpp_cuda_attention_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                           int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                           gpp_tensor_t *dx, gpp_attention_params_t *dp, gpp_err_t *err);
int gpp_cuda_embedding_bag_fwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *table,
                               gpp_tensor_t *y, gpp_err_t *err);
int gpp_cuda_embedding_bag_bwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *dy,
                               gpp_sparse_grad_t *dtable, gpp_err_t *err);
int gpp_cuda_concat_fwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *const *xs, gpp_tensor_t *y,
                        gpp_err_t *err);
int gpp_cuda_concat_bwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *dy, gpp_tensor_t *const *dxs,
                        gpp_err_t *err);
int gpp_cuda_slice_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int64_t start, gpp_tensor_t *y,
                       gpp_err_t *err);
int gpp_cuda_slice_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, int64_t start, gpp_tensor_t *dx,
                       gpp_err_t *err);
int gpp_cuda_loss_mse(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *target,
                      float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);
int gpp_cuda_loss_ce(gpp_stream_t *s, const gpp_tensor_t *logits, const gpp_tensor_t *labels,
                     float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);
int gpp_cuda_add(gpp_stream_t *s, const gpp_tensor_t *a, const gpp_tensor_t *b, gpp_tensor_t *y,
                 gpp_err_t *err);
int gpp_cuda_axpy(gpp_stream_t *s, float alpha, const gpp_tensor_t *x, gpp_tensor_t *y,
                  gpp_err_t *err);
int gpp_cuda_convert(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);
int gpp_cuda_sparse_init(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err);
int gpp_cuda_sparse_add(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t count, const int32_t *rows,
                        const float *values, int64_t value_stride, gpp_err_t *err);
int gpp_cuda_sparse_clear(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err);
int64_t gpp_cuda_sparse_count(const gpp_sparse_grad_t *g);
void gpp_cuda_sparse_fini(gpp_sparse_grad_t *g);
int gpp_cuda_optim_step(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                        int64_t step, float *param, const float *grad, gpp_err_t *err);
int gpp_cuda_optim_step_sparse(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                               int64_t step, float *table, const gpp_sparse_grad_t *grad,
                               gpp_err_t *err);

#endif
