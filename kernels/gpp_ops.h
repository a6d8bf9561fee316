/* gpp_ops: forward and backward of every executable graph op (gpp_graph.h).
 *
 * Every function enqueues its work on a stream (gpp_backend.h: asynchronous
 * contract; the CPU backend runs it before returning) and works on the
 * stream's backend memory. Shapes follow the graph IR: activations are
 * [n, rows, cols] fp32 row-major (n = micro-batch samples), weights [1, out, in],
 * biases and gains [1, 1, cols]. A shape mismatch is a programmer error
 * (assert). Run-time errors (bad data, failed launch, no memory for the
 * workspace) return -1 with a message; 0 on success.
 *
 * Output contract.
 *  - Forward outputs (y) are overwritten (=). Outputs never alias inputs.
 *  - Backward ACCUMULATES (+=) into every gradient buffer it is given: input
 *    gradients (dx) so that a tensor feeding several consumers sums the
 *    gradients of all of them, and parameter gradients (dw, db, ...) so that
 *    they sum over the micro-batches of an iteration. The caller zeroes
 *    gradient buffers (gpp_stream_zero) at the start of an iteration / before
 *    the first consumer's backward. Any gradient pointer may be NULL: that
 *    gradient is not computed (a frozen weight, an input that is data).
 *  - Backward needs the forward's inputs (x) unchanged, and for the ops with
 *    a stash, the stash the forward filled. Stash buffers are device memory
 *    of gpp_X_stash_bytes(...) bytes (the op table's kernel stash,
 *    model/gpp_optable.h) that the caller owns and keeps from the forward
 *    until the backward of the same micro-batch.
 *
 * Scratch memory comes from the stream's workspace (gpp_stream_workspace),
 * so workspace pointers a caller holds are invalid after any call here.
 *
 * Determinism: for a fixed backend configuration (CPU: fixed OpenBLAS thread
 * count) every op is bit-reproducible; reductions have a fixed order. */
#ifndef GPP_OPS_H
#define GPP_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_sparse.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h" /* gpp_layernorm_stash_bytes, gpp_attention_stash_bytes */

/* ---- linear: y = x W^T (+ b) ----
 * x [n, rows, in], w [1, out, in], b [1, 1, out] or NULL, y [n, rows, out].
 * The n*rows rows of x form one matrix product (one sgemm on CPU). */
int gpp_linear_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                   const gpp_tensor_t *b, gpp_tensor_t *y, gpp_err_t *err);
/* dx += dy W, dw += dy^T x, db += sum over rows of dy. */
int gpp_linear_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                   const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_tensor_t *dw, gpp_tensor_t *db,
                   gpp_err_t *err);

/* ---- linear + activation in one call (executor fusion, docs/executor.md
 * "Fusion") ----
 * y = act(x W^T (+ b)), act GPP_OP_RELU or GPP_OP_GELU (of `form`), shapes
 * as gpp_linear_fwd. z, the pre-activation x W^T + b, is written too when
 * given: GELU needs it (its backward reads it); ReLU takes z = NULL, its
 * backward can read y instead (y > 0 exactly where z > 0). The results are
 * those of gpp_linear_fwd then gpp_relu_fwd / gpp_gelu_fwd (the CPU backend:
 * bit for bit); a device backend puts the activation in the product's
 * epilogue where its library has one (CUDA: cuBLASLt RELU_BIAS,
 * GELU_AUX_BIAS for the tanh form), saving a launch and a pass over z. */
int gpp_linear_act_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                       const gpp_tensor_t *b, gpp_op_type_t act, gpp_gelu_form_t form,
                       gpp_tensor_t *z, gpp_tensor_t *y, gpp_err_t *err);

/* ---- element-wise activations; x, y, dy, dx all the same shape ----
 * Backward takes the forward input x. GELU's form (gpp_gelu_form_t):
 *   GPP_GELU_TANH  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 *   GPP_GELU_ERF   0.5 x (1 + erf(x / sqrt 2))  (exact; torch's nn.GELU()) */
int gpp_relu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);
int gpp_relu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                 gpp_err_t *err);
int gpp_gelu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_gelu_form_t form, gpp_tensor_t *y,
                 gpp_err_t *err);
int gpp_gelu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_gelu_form_t form,
                 const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_err_t *err);

/* ---- layer norm over the last dim (cols), eps 1e-5 ----
 * y = (x - mean) / sqrt(var + eps) * gain + bias, var the biased variance.
 * x, y [n, rows, cols]; gain, bias [1, 1, cols]. Stash: mean and 1/std per
 * row (2 floats per row). */
#define GPP_LAYERNORM_EPS 1e-5f
int gpp_layernorm_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                      const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err);
int gpp_layernorm_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                      const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                      gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err);

/* ---- multi-head self-attention, optionally causal ----
 * x, y [n, seq, hidden]; heads divides hidden, dh = hidden / heads.
 *   qkv = x W_qkv^T + b_qkv           (hidden -> 3 hidden: Q | K | V)
 *   ctx_h = softmax(Q_h K_h^T / sqrt(dh)) V_h   per sample and head h,
 *           Q_h = columns [h dh, (h+1) dh) of Q, likewise K_h, V_h
 *   causal = 1: score (i, j) with j > i is -inf before the softmax (query
 *           row i attends keys j <= i); the stashed probabilities hold the
 *           zeros, so backward gives those scores zero gradient unchanged.
 *   y = ctx W_o^T + b_o
 * Stash: qkv [n, seq, 3 hidden], softmax probabilities [n, heads, seq, seq]
 * and ctx [n, seq, hidden]. Backward uses the stream workspace for
 * dctx, dqkv and one [seq, seq] block. */
typedef struct {
    gpp_tensor_t w_qkv; /* [1, 3 hidden, hidden] */
    gpp_tensor_t b_qkv; /* [1, 1, 3 hidden] */
    gpp_tensor_t w_o;   /* [1, hidden, hidden] */
    gpp_tensor_t b_o;   /* [1, 1, hidden] */
} gpp_attention_params_t;
int gpp_attention_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                      int heads, int causal, gpp_tensor_t *y, void *stash, gpp_err_t *err);
/* dx += ..., and every non-NULL data pointer of *dp += its parameter's
 * gradient (dp itself may be NULL: no parameter gradients). */
int gpp_attention_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                      int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                      gpp_tensor_t *dx, gpp_attention_params_t *dp, gpp_err_t *err);
/* The same backward in two passes (zero-bubble schedules): _in does dx +=
 * ... and writes the gradient of qkv, [n, seq, 3 hidden] floats, into dqkv
 * (the op's W stash, gpp_op_wstash_bytes; overwritten); _w does *dp += ...
 * from x, the stash's ctx, dy and dqkv. _in then _w give gpp_attention_bwd's
 * gradients bit for bit. A backend without them: gpp_backend_bwd_split. */
int gpp_attention_bwd_in(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                         int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                         gpp_tensor_t *dx, void *dqkv, gpp_err_t *err);
int gpp_attention_bwd_w(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                        int heads, const void *stash, const gpp_tensor_t *dy, const void *dqkv,
                        gpp_attention_params_t *dp, gpp_err_t *err);

/* ---- embedding bag, sum ----
 * idx i32 [n, rows, bag], table [1, table_rows, dim], y [n, rows, dim]:
 * y[i, r] = sum_k table[idx[i, r, k]]. An index outside [0, table_rows) is
 * a run-time error (-1 naming the sample and index; y is then undefined).
 * Backward accumulates dy[i, r] into row idx[i, r, k] of the sparse
 * gradient (gpp_sparse.h): only touched rows cost time or memory. */
int gpp_embedding_bag_fwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *table,
                          gpp_tensor_t *y, gpp_err_t *err);
int gpp_embedding_bag_bwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *dy,
                          gpp_sparse_grad_t *dtable, gpp_err_t *err);

/* ---- concat along features (cols) of n_in inputs ----
 * xs[i] [n, rows, c_i], y [n, rows, sum c_i] in input order. The backward is
 * the split: dxs[i] += the matching column block of dy. An input that needs
 * no gradient is skipped by a dxs[i] whose data is NULL (it still gives its
 * block's width) or by a NULL dxs[i]. NULL entries carry no width, so they
 * must be adjacent (e.g. a single one): their blocks together span the
 * columns of dy the other entries leave. */
int gpp_concat_fwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *const *xs, gpp_tensor_t *y,
                   gpp_err_t *err);
int gpp_concat_bwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *dy, gpp_tensor_t *const *dxs,
                   gpp_err_t *err);

/* ---- slice: columns [start, start + y cols) of x ----
 * x [n, rows, cx], y [n, rows, c], start + c <= cx. The backward adds dy
 * into dx's column block (the rest of dx is left as it is). */
int gpp_slice_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int64_t start, gpp_tensor_t *y,
                  gpp_err_t *err);
int gpp_slice_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, int64_t start, gpp_tensor_t *dx,
                  gpp_err_t *err);

/* ---- reshape: y = x's elements in order, another [rows, cols] per sample
 * (same n and numel): a copy; dx += dy element for element ---- */
int gpp_reshape_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);
int gpp_reshape_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_err_t *err);

/* ---- residual add: y = a + b, all the same shape; da += dy, db += dy ---- */
int gpp_add_fwd(gpp_stream_t *s, const gpp_tensor_t *a, const gpp_tensor_t *b, gpp_tensor_t *y,
                gpp_err_t *err);
int gpp_add_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, gpp_tensor_t *da, gpp_tensor_t *db,
                gpp_err_t *err);

/* ---- losses: forward and backward in one call ----
 * loss: device pointer to one float, overwritten with the loss.
 * dx (may be NULL) += grad_scale * d loss / d x; grad_scale is the upstream
 * gradient of the loss (1, or e.g. 1 / micro-batches per iteration).
 * MSE: loss = mean over all elements of (x - target)^2; target like x.
 * CE: logits [n, rows, classes], labels i32 [n, rows, 1] in [0, classes);
 *     loss = mean over the n*rows rows of -log softmax(logits row)[label].
 *     A label out of range is a run-time error. */
int gpp_loss_mse(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *target, float *loss,
                 float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);
int gpp_loss_ce(gpp_stream_t *s, const gpp_tensor_t *logits, const gpp_tensor_t *labels,
                float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err);

/* ---- helpers for the executor and the gradient sync ----
 * y += alpha x (same numel; shapes may differ). */
int gpp_axpy(gpp_stream_t *s, float alpha, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err);

/* ---- which part of a backward a call runs (docs/planner.md "Zero-bubble
 * schedules") ----
 * ALL: the whole backward; IN (a B pass): the input gradients only; W (a W
 * pass): the parameter gradients only. IN then W computes ALL's gradients
 * bit for bit: the same calls on the same values (each gradient is
 * computed by its own calls; attention's and cross-attention's parameter
 * gradients read the q/k/v gradient IN wrote into the op's W stash). */
typedef enum { GPP_BWD_ALL = 0, GPP_BWD_IN, GPP_BWD_W } gpp_bwd_part_t;

/* ---- the kernel entry points of every op type, for the executor ----
 * gpp_op_kernels[type] (indexed like the op table, model/gpp_optable.h)
 * calls the op's kernels above on one micro-batch described by a
 * gpp_op_args_t; the executor dispatches through it with no per-type code.
 * A source op (INPUT: the executor loads data) and an opaque op have no
 * entries; a loss has a forward only (it computes its input's gradient). */
typedef struct {
    const gpp_op_t *op;           /* attributes (bias, heads) */
    const gpp_tensor_t *const *x; /* [op->n_inputs] input activations; in the backward, an
                                     input the backward does not read has data NULL but
                                     its shape */
    gpp_tensor_t *const *dx;      /* [op->n_inputs] input gradients (+=); NULL: none */
    gpp_tensor_t *y;              /* forward: output (=) */
    const gpp_tensor_t *dy;       /* backward: output gradient */
    const gpp_tensor_t *w;        /* parameter values, in the op table's order */
    gpp_tensor_t *dw;             /* their dense gradients (+=), same order */
    gpp_sparse_grad_t *dsparse;   /* the gradient of the op's sparse parameter */
    void *stash;                  /* the op's kernel stash (forward fills, backward reads) */
    const gpp_tensor_t *target;   /* loss: the labels or target */
    float *loss;                  /* loss: device float, overwritten */
    float grad_scale;             /* loss: upstream gradient */
    /* dropout: its mask is a function of (seed, sample_lo + sample, op id,
       element); train 0 (evaluation) passes the input through */
    uint64_t seed;
    int64_t sample_lo;
    int train;
    /* backward: the part to run (gpp_op_bwd); the op's W stash of
       gpp_op_wstash_bytes x n bytes where it has one (IN fills, W reads) */
    gpp_bwd_part_t part;
    void *wstash;
} gpp_op_args_t;

typedef int (*gpp_op_kernel_fn)(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err);
typedef struct {
    gpp_op_kernel_fn fwd, bwd;
} gpp_op_kernel_t;

extern const gpp_op_kernel_t gpp_op_kernels[GPP_OP__COUNT];

/* The backward of a->op, part a->part, through gpp_op_kernels: an op
 * without parameters runs its whole backward as IN and nothing as W; an op
 * without a backward entry (source, loss, opaque) nothing. */
int gpp_op_bwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err);

/* 1 when be's kernels have the split backward (GPP_BWD_IN / GPP_BWD_W) of
 * every op type, so its agents can run zero-bubble schedules; else 0 with
 * a message naming the backend and the ways out (the CPU backend has it,
 * the CUDA backend not). */
int gpp_backend_bwd_split(gpp_backend_t *be, gpp_err_t *err);

/* ---- the op types of PyTorch modules (docs/graph-format.md) ----
 * Their kernels exist on the CPU backend only (a backend's `ext` table,
 * gpp_backend_impl.h); gpp_op_kernels dispatches to it after the shape
 * checks. An embedding table with update "dense" takes its gradient dense
 * through the same table. 1 when be has every kernel op needs, else 0 with
 * a message naming the op and the way out (backend = "cpu"). */
int gpp_backend_op_supported(gpp_backend_t *be, const gpp_op_t *op, gpp_err_t *err);

/* Dropout's keep decision for element e of sample `sample` of op `op`
 * (seeded): 1 keep (scaled by 1 / (1 - p)), 0 drop. The same function on
 * every backend and in tests. */
int gpp_dropout_keep(uint64_t seed, int64_t sample, int op, int64_t e, double p);

#endif
