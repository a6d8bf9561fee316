/* gpp_cpu: the CPU backend's kernels (C + OpenBLAS). Private to kernels/.
 *
 * Every function here is a gpp_backend_vt_t entry (arguments already checked
 * by gpp_ops.c / gpp_sparse.c / gpp_optim.c) or a helper shared between CPU
 * kernel families. All run synchronously on the calling thread; the matrix
 * products run on OpenBLAS's threads. */
#ifndef GPP_CPU_H
#define GPP_CPU_H

#include "kernels/gpp_backend_impl.h"
#include "kernels/gpp_math.h"

/* ---- helpers shared by kernel families ---- */

/* GPP_CPU_CLONES on a function with a hot element-wise loop compiles it for
 * AVX-512, AVX2 and the baseline ISA and picks one at load time (GCC/clang
 * function multiversioning), so the binary stays portable without
 * -march=native. The clones give bit-identical results: the build does not
 * contract a*b+c into FMA (ISO C mode: -ffp-contract=off) and no loop here
 * is reassociated by the compiler; reductions that must vectorise spell out
 * their lanes (GPP_CPU_LANES) in a fixed order. */
#ifndef GPP_CPU_CLONES /* -DGPP_CPU_CLONES= builds the baseline ISA only */
#if defined(__x86_64__) && defined(__GNUC__)
#define GPP_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GPP_CPU_CLONES
#endif
#endif
#define GPP_CPU_LANES 16

/* The total of GPP_CPU_LANES partial sums, lane 0 first. */
static inline double gpp_cpu_lanes_total(const double *acc)
{
    double t = 0.0;
    for (int k = 0; k < GPP_CPU_LANES; k++)
        t += acc[k];
    return t;
}

/* exp: gpp_math_expf (kernels/gpp_math.h), shared with the CUDA kernels. */
#define gpp_cpu_expf gpp_math_expf

/* Row-major sgemm: C (m x n, ldc) = alpha op(A) op(B) + beta C, with op(X) = X
 * or X^T per trans_a / trans_b; lda, ldb the row strides as stored. */
void gpp_cpu_sgemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc);
/* y [m, out] = x [m, in] W^T (+ b), W (out, in), b NULL or [out]. */
void gpp_cpu_linear_fwd_raw(int64_t m, int64_t in, int64_t out, const float *x, const float *w,
                            const float *b, float *y);
/* dx [m, in] += dy W; dw (out, in) += dy^T x; db [out] += column sums of dy,
 * computed as dy^T ones with `ones` m floats equal to 1 (an sgemv, which
 * OpenBLAS threads). NULL skips a gradient. */
void gpp_cpu_linear_bwd_raw(int64_t m, int64_t in, int64_t out, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db, const float *ones);
/* The stream's workspace with room for head_floats floats the caller uses
 * followed by m floats set to 1 (the `ones` of gpp_cpu_linear_bwd_raw, at
 * result + head_floats). NULL + message when out of memory. */
float *gpp_cpu_workspace_ones(gpp_stream_t *s, int64_t head_floats, int64_t m, gpp_err_t *err);
/* y[i] += x[i] over n elements. */
void gpp_cpu_acc(int64_t n, const float *x, float *y);

/* ---- vtable entries ---- */
int gpp_cpu_linear_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                       const gpp_tensor_t *b, gpp_tensor_t *y, gpp_err_t *err);
int gpp_cpu_linear_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                       const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_tensor_t *dw, gpp_tensor_t *db,
                       gpp_err_t *err);

int gpp_cpu_linear_act_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                           const gpp_tensor_t *b, int act, int form, gpp_tensor_t *z,
                           gpp_tensor_t *y, gpp_err_t *err);

int gpp_cpu_relu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);
int gpp_cpu_relu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy,
                     gpp_tensor_t *dx, gpp_err_t *err);
int gpp_cpu_gelu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, gpp_tensor_t *y,
                     gpp_err_t *err);
int gpp_cpu_gelu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, const gpp_tensor_t *dy,
                     gpp_tensor_t *dx, gpp_err_t *err);
int gpp_cpu_add(gpp_stream_t *s, const gpp_tensor_t *a, const gpp_tensor_t *b, gpp_tensor_t *y,
                gpp_err_t *err);
int gpp_cpu_axpy(gpp_stream_t *s, float alpha, const gpp_tensor_t *x, gpp_tensor_t *y,
                 gpp_err_t *err);

int gpp_cpu_layernorm_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                          const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err);
int gpp_cpu_layernorm_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                          const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                          gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err);

int gpp_cpu_attention_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                          int heads, int causal, gpp_tensor_t *y, void *stash, gpp_err_t *err);
int gpp_cpu_attention_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                          int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                          gpp_tensor_t *dx, gpp_attention_params_t *dp, gpp_err_t *err);
int gpp_cpu_attention_bwd_in(gpp_stream_t *s, const gpp_tensor_t *x,
                             const gpp_attention_params_t *p, int heads, int causal,
                             const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                             void *dqkv, gpp_err_t *err);
int gpp_cpu_attention_bwd_w(gpp_stream_t *s, const gpp_tensor_t *x, int heads, const void *stash,
                            const gpp_tensor_t *dy, const void *dqkv, gpp_attention_params_t *dp,
                            gpp_err_t *err);

int gpp_cpu_embedding_bag_fwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *table,
                              gpp_tensor_t *y, gpp_err_t *err);
int gpp_cpu_embedding_bag_bwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *dy,
                              gpp_sparse_grad_t *dtable, gpp_err_t *err);
int gpp_cpu_sparse_init(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err);
int gpp_cpu_sparse_add(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t count, const int32_t *rows,
                       const float *values, int64_t value_stride, gpp_err_t *err);
int gpp_cpu_sparse_clear(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err);

int gpp_cpu_concat_fwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *const *xs, gpp_tensor_t *y,
                       gpp_err_t *err);
int gpp_cpu_concat_bwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *dy, gpp_tensor_t *const *dxs,
                       gpp_err_t *err);

int gpp_cpu_slice_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int64_t start, gpp_tensor_t *y,
                      gpp_err_t *err);
int gpp_cpu_slice_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, int64_t start, gpp_tensor_t *dx,
                      gpp_err_t *err);

int gpp_cpu_loss_mse(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *target,
                     float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);
int gpp_cpu_loss_ce(gpp_stream_t *s, const gpp_tensor_t *logits, const gpp_tensor_t *labels,
                    float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);

/* the kernels of the PyTorch modules' op types (gpp_cpu_ext.c, gpp_cpu_xattn.c) */
extern const gpp_op_kernel_t gpp_cpu_ext_kernels[GPP_OP__COUNT];
int gpp_cpu_cross_attention_fwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err);
int gpp_cpu_cross_attention_bwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err);
int gpp_cpu_patch_embed_fwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err);
int gpp_cpu_patch_embed_bwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err);

int gpp_cpu_optim_step(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                       int64_t step, float *param, const float *grad, gpp_err_t *err);
int gpp_cpu_optim_step_sparse(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                              int64_t step, float *table, const gpp_sparse_grad_t *grad,
                              gpp_err_t *err);

#endif
