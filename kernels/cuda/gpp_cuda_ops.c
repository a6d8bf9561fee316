/* gpp_cuda_ops: the CUDA backend's kernel entries (the gpp_ops.h,
 * gpp_sparse.h and gpp_optim.h contracts; arguments already checked).
 * Matrix products go through cuBLASLt (gpp_cuda_blas.c), the rest through
 * the kernels of gpp_cuda_*.cu.
 *
 * Attention keeps Q, K, V head-major in the stash ([3][n][heads][seq][dh],
 * the same number of floats as the natural qkv the op table sizes the stash
 * for), so that each product over all samples and heads is one strided
 * batched GEMM; the probabilities and ctx ([n*seq, hidden]) are laid out as
 * on the CPU.
 *
 * Sparse gradients are accumulated on the device alone (gpp_cuda_rows.cu:
 * a stable radix sort of the pairs by row id, the fresh rows numbered in
 * first-touch order, each row's pairs summed in pair order: the CPU
 * backend's slots and sums, deterministic). The count of touched rows is a
 * device counter (the slot map's last word) with a mapped host copy that
 * is current after a synchronisation (gpp_sparse_grad_count); the host
 * keeps an upper bound (gpp_sparse_grad_t.count, the pairs since the last
 * clear) to size the value block and the optimizer's launches. No host
 * round trip, so a CUDA graph can record an embedding backward. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gpp_cuda.h"

static float *s_f(const gpp_tensor_t *t)
{
    return t ? (float *)t->data : NULL;
}

/* An activation as the kernels take it: fp32 or bf16 (gpp_cuk_t). */
static gpp_cuk_t s_k(const gpp_tensor_t *t)
{
    gpp_cuk_t k = {t ? t->data : NULL, t && t->dtype == GPP_DTYPE_BF16};
    return k;
}

/* ---- linear ---- */

/* y [m, out] = x [m, in] W^T (+ b); x and y fp32 or bf16. The bias in
 * cuBLASLt's epilogue, or, where the library has no algorithm with it for
 * the product's types and shape, added by a kernel after the product. */
static int s_linear_fwd(gpp_stream_t *s, int64_t m, int64_t in, int64_t out, gpp_cuk_t x,
                        const float *w, const float *b, gpp_cuk_t y, gpp_err_t *err)
{
    gpp_cuda_gemm_t g = {.trans_b = 1,
                         .m = m,
                         .n = out,
                         .k = in,
                         .alpha = 1.0f,
                         .a = x.p,
                         .a_bf16 = x.bf16,
                         .lda = in,
                         .b = w,
                         .b_param = 1,
                         .ldb = in,
                         .c = y.p,
                         .c_bf16 = y.bf16,
                         .ldc = out,
                         .bias = b};
    int rc = gpp_cuda_gemm(s, &g, err);
    if (rc != GPP_CUDA_NO_ALGO || !b)
        return rc < 0 ? -1 : 0;
    g.bias = NULL;
    if (gpp_cuda_gemm(s, &g, err) < 0)
        return -1;
    GPP_CUDA_TRY(gpp_cuk_bias_rows(gpp_cuda_stream(s), m, out, b, y), err);
    return 0;
}

/* dx += dy W; dw += dy^T x; db += column sums of dy (absent: skipped); x,
 * dy and dx fp32 or bf16 */
static int s_linear_bwd(gpp_stream_t *s, int64_t m, int64_t in, int64_t out, gpp_cuk_t x,
                        const float *w, gpp_cuk_t dy, gpp_cuk_t dx, float *dw, float *db,
                        gpp_err_t *err)
{
    if (dx.p) {
        gpp_cuda_gemm_t g = {.m = m,
                             .n = in,
                             .k = out,
                             .alpha = 1.0f,
                             .beta = 1.0f,
                             .a = dy.p,
                             .a_bf16 = dy.bf16,
                             .lda = out,
                             .b = w,
                             .b_param = 1,
                             .ldb = in,
                             .c = dx.p,
                             .c_bf16 = dx.bf16,
                             .ldc = in};
        if (gpp_cuda_gemm(s, &g, err) < 0)
            return -1;
    }
    if (dw && m > 0) {
        gpp_cuda_gemm_t g = {.trans_a = 1,
                             .m = out,
                             .n = in,
                             .k = m,
                             .alpha = 1.0f,
                             .beta = 1.0f,
                             .a = dy.p,
                             .a_bf16 = dy.bf16,
                             .lda = out,
                             .b = x.p,
                             .b_bf16 = x.bf16,
                             .ldb = in,
                             .c = dw,
                             .ldc = in};
        if (gpp_cuda_gemm(s, &g, err) < 0)
            return -1;
    }
    if (db && m > 0) {
        float *part = gpp_cuda_lt_workspace(s, err); /* stream-ordered scratch */
        if (!part)
            return -1;
        GPP_CUDA_TRY(gpp_cuk_colsum_acc(gpp_cuda_stream(s), m, out, dy, out, db, part,
                                        (int64_t)(GPP_CUDA_LT_WS_BYTES / sizeof(float))),
                     err);
    }
    return 0;
}

int gpp_cuda_linear_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                        const gpp_tensor_t *b, gpp_tensor_t *y, gpp_err_t *err)
{
    if (s_linear_fwd(s, x->n * x->rows, x->cols, w->rows, s_k(x), s_f(w), s_f(b), s_k(y), err) < 0)
        return gpp_err_prefix(err, "linear forward");
    return 0;
}

/* The activation in cuBLASLt's epilogue: ReLU always (RELU_BIAS: y only,
 * z is not materialised); GELU when cuBLASLt's form is ours (tanh), z's
 * row length is a multiple of 8 (GELU_AUX_BIAS writes z as the aux matrix,
 * whose leading dimension must be) and z has y's element type (cuBLASLt
 * types the aux after D); otherwise, or when cuBLASLt has no algorithm
 * with the epilogue, the product with its bias and the activation kernel,
 * as two unfused ops would (ReLU in place in y). */
static int s_linear_act_unfused(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                                const gpp_tensor_t *b, int act, int form, gpp_tensor_t *z,
                                gpp_tensor_t *y, gpp_err_t *err)
{
    gpp_tensor_t *pre = act == GPP_OP_RELU ? y : z;
    if (s_linear_fwd(s, x->n * x->rows, x->cols, w->rows, s_k(x), s_f(w), s_f(b), s_k(pre), err) <
        0)
        return gpp_err_prefix(err,
                              act == GPP_OP_RELU ? "linear+relu forward" : "linear+gelu forward");
    if (act == GPP_OP_RELU) {
        GPP_CUDA_TRY(gpp_cuk_relu_fwd(gpp_cuda_stream(s), gpp_tensor_numel(y), s_k(y), s_k(y)),
                     err);
        return 0;
    }
    return gpp_cuda_gelu_fwd(s, z, form, y, err);
}

int gpp_cuda_linear_act_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                            const gpp_tensor_t *b, int act, int form, gpp_tensor_t *z,
                            gpp_tensor_t *y, gpp_err_t *err)
{
    int64_t m = x->n * x->rows, in = x->cols, out = w->rows;
    int epi_gelu =
        act == GPP_OP_GELU && form == GPP_GELU_TANH && out % 8 == 0 && z->dtype == y->dtype;
    if (act == GPP_OP_GELU && !epi_gelu)
        return s_linear_act_unfused(s, x, w, b, act, form, z, y, err);
    gpp_cuda_gemm_t g = {.trans_b = 1,
                         .m = m,
                         .n = out,
                         .k = in,
                         .alpha = 1.0f,
                         .a = x->data,
                         .a_bf16 = s_k(x).bf16,
                         .lda = in,
                         .b = s_f(w),
                         .b_param = 1,
                         .ldb = in,
                         .c = y->data,
                         .c_bf16 = s_k(y).bf16,
                         .ldc = out,
                         .bias = s_f(b),
                         .epi = epi_gelu ? GPP_CUDA_EPI_GELU_AUX : GPP_CUDA_EPI_RELU,
                         .aux = epi_gelu ? z->data : NULL,
                         .aux_ld = epi_gelu ? out : 0};
    int rc = gpp_cuda_gemm(s, &g, err);
    if (rc == GPP_CUDA_NO_ALGO)
        return s_linear_act_unfused(s, x, w, b, act, form, z, y, err);
    if (rc < 0)
        return gpp_err_prefix(err,
                              act == GPP_OP_RELU ? "linear+relu forward" : "linear+gelu forward");
    return 0;
}

int gpp_cuda_linear_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                        const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_tensor_t *dw,
                        gpp_tensor_t *db, gpp_err_t *err)
{
    if (s_linear_bwd(s, x->n * x->rows, x->cols, w->rows, s_k(x), s_f(w), s_k(dy), s_k(dx), s_f(dw),
                     s_f(db), err) < 0)
        return gpp_err_prefix(err, "linear backward");
    return 0;
}

/* ---- element-wise ---- */

int gpp_cuda_relu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    GPP_CUDA_TRY(gpp_cuk_relu_fwd(gpp_cuda_stream(s), gpp_tensor_numel(x), s_k(x), s_k(y)), err);
    return 0;
}

int gpp_cuda_relu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy,
                      gpp_tensor_t *dx, gpp_err_t *err)
{
    GPP_CUDA_TRY(
        gpp_cuk_relu_bwd(gpp_cuda_stream(s), gpp_tensor_numel(x), s_k(x), s_k(dy), s_k(dx)), err);
    return 0;
}

int gpp_cuda_gelu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, gpp_tensor_t *y,
                      gpp_err_t *err)
{
    GPP_CUDA_TRY(gpp_cuk_gelu_fwd(gpp_cuda_stream(s), gpp_tensor_numel(x), form == GPP_GELU_ERF,
                                  s_k(x), s_k(y)),
                 err);
    return 0;
}

int gpp_cuda_gelu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, int form, const gpp_tensor_t *dy,
                      gpp_tensor_t *dx, gpp_err_t *err)
{
    GPP_CUDA_TRY(gpp_cuk_gelu_bwd(gpp_cuda_stream(s), gpp_tensor_numel(x), form == GPP_GELU_ERF,
                                  s_k(x), s_k(dy), s_k(dx)),
                 err);
    return 0;
}

int gpp_cuda_add(gpp_stream_t *s, const gpp_tensor_t *a, const gpp_tensor_t *b, gpp_tensor_t *y,
                 gpp_err_t *err)
{
    GPP_CUDA_TRY(gpp_cuk_add(gpp_cuda_stream(s), gpp_tensor_numel(y), s_k(a), s_k(b), s_k(y)), err);
    return 0;
}

int gpp_cuda_axpy(gpp_stream_t *s, float alpha, const gpp_tensor_t *x, gpp_tensor_t *y,
                  gpp_err_t *err)
{
    GPP_CUDA_TRY(gpp_cuk_axpy(gpp_cuda_stream(s), gpp_tensor_numel(y), alpha, s_k(x), s_k(y)), err);
    return 0;
}

/* ---- layer norm ---- */

int gpp_cuda_layernorm_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                           const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err)
{
    GPP_CUDA_TRY(gpp_cuk_layernorm_fwd(gpp_cuda_stream(s), x->n * x->rows, x->cols, s_k(x),
                                       s_f(gain), s_f(bias), s_k(y), stash, GPP_LAYERNORM_EPS),
                 err);
    return 0;
}

int gpp_cuda_layernorm_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                           const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                           gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err)
{
    cudaStream_t st = gpp_cuda_stream(s);
    int64_t rows = x->n * x->rows, c = x->cols;
    if (dgain || dbias) {
        /* the partial sums live in the stream's cuBLASLt workspace: stream
         * order keeps them apart from the products that use it */
        float *part = gpp_cuda_lt_workspace(s, err);
        if (!part)
            return -1;
        GPP_CUDA_TRY(gpp_cuk_layernorm_bwd_params(st, rows, c, s_k(x), stash, s_k(dy), s_f(dgain),
                                                  s_f(dbias), part,
                                                  (int64_t)(GPP_CUDA_LT_WS_BYTES / sizeof(float))),
                     err);
    }
    if (dx)
        GPP_CUDA_TRY(
            gpp_cuk_layernorm_bwd_dx(st, rows, c, s_k(x), s_f(gain), stash, s_k(dy), s_k(dx)), err);
    return 0;
}

/* ---- attention ---- */

typedef struct {
    int64_t n, seq, hid, heads, dh, m, batch; /* batch = n * heads products */
    float scale;
} s_att_t;

static s_att_t s_att(const gpp_tensor_t *x, int heads)
{
    s_att_t a = {.n = x->n, .seq = x->rows, .hid = x->cols, .heads = heads};
    a.dh = a.hid / heads;
    a.m = a.n * a.seq;
    a.batch = a.n * heads;
    a.scale = 1.0f / sqrtf((float)a.dh);
    return a;
}

/* One batched product over all (sample, head) blocks: C_b = alpha op(A_b)
 * op(B_b), each of A, B, C either [seq, dh] (ld dh) or [seq, seq] (ld seq);
 * A and B fp32, or bf16 when bf16 (C fp32 either way). */
static int s_att_gemm(gpp_stream_t *s, const s_att_t *a, int ta, int tb, int64_t m, int64_t n,
                      int64_t k, float alpha, const void *A, int a_sq, const void *B, int b_sq,
                      float *C, int c_sq, int bf16, gpp_err_t *err)
{
    int64_t sq = a->seq * a->seq, sd = a->seq * a->dh;
    gpp_cuda_gemm_t g = {.a_bf16 = bf16,
                         .b_bf16 = bf16,
                         .trans_a = ta,
                         .trans_b = tb,
                         .m = m,
                         .n = n,
                         .k = k,
                         .alpha = alpha,
                         .a = A,
                         .lda = a_sq ? a->seq : a->dh,
                         .b = B,
                         .ldb = b_sq ? a->seq : a->dh,
                         .c = C,
                         .ldc = c_sq ? a->seq : a->dh,
                         .batch = a->batch,
                         .sa = a_sq ? sq : sd,
                         .sb = b_sq ? sq : sd,
                         .sc = c_sq ? sq : sd};
    return gpp_cuda_gemm(s, &g, err);
}

/* auto runs the unfused core: measured on an H100 (2026-11-25,
 * bench_cuda_ops "attention cores", hidden 1024, 16 heads, seq 128 and 256,
 * micro-batch 8 and 32), cuBLASLt's batched products with the softmax
 * kernel beat both fused cores everywhere but one forward (bf16 n 8 seq 128:
 * 0.102 against 0.109 ms), by up to 1.7x in the bf16 backward, and training
 * MMT hidden 1024 in bf16 ran 1.25x faster with it. The fused cores keep
 * less (no seq x seq probabilities): GPP_CUDA_ATTENTION=fused chooses them
 * where memory matters more than speed. */
gpp_cuda_core_t gpp_cuda_attention_core(const gpp_cuda_t *c, int64_t dh)
{
    if (!gpp_cuk_flash_supports(dh) || c->attn != GPP_CUDA_ATTN_FUSED)
        return c->precision == GPP_PRECISION_BF16 && c->attn != GPP_CUDA_ATTN_UNFUSED_FP32
                   ? GPP_CUDA_CORE_UNFUSED_BF16
                   : GPP_CUDA_CORE_UNFUSED;
    int tc =
        c->precision == GPP_PRECISION_BF16 && c->cc_major >= 8 && gpp_cuk_flash_tc_supports(dh);
    return tc ? GPP_CUDA_CORE_TC : GPP_CUDA_CORE_FP32;
}

/* The core this stream's attention runs: forward, backward and the stash
 * size decide alike, so the stash holds what the backward expects. */
static gpp_cuda_core_t s_att_core(gpp_stream_t *s, const s_att_t *a)
{
    return gpp_cuda_attention_core(gpp_cuda_be(s->be), a->dh);
}

/* The unfused core's stash, in bytes from its start: head-major qkv
 * [3][n][heads][seq][dh] at 0 | probabilities [n heads, seq, seq] at .prob
 * (both of .elem bytes an element: 4, or 2 in the bf16 core, whose parts
 * are 256-byte aligned) | natural ctx [n seq, hidden] in fp32 at .ctx (the
 * output projection's input; the op's x and y may be bf16, its internal
 * qkv and ctx stay fp32) | .total.
 * In fp32 it is the op table's layout (gpp_attention_stash_bytes). */
typedef struct {
    size_t elem, prob, ctx, total;
} s_unf_stash_t;

static size_t s_pad(size_t bytes, size_t align)
{
    return (bytes + align - 1) / align * align;
}

static s_unf_stash_t s_unf_stash(int64_t n, int64_t seq, int64_t hidden, int64_t heads, int bf16)
{
    s_unf_stash_t l;
    int64_t mh = n * seq * hidden;
    size_t al = bf16 ? 256 : 1;
    l.elem = bf16 ? 2 : sizeof(float);
    l.prob = s_pad((size_t)(3 * mh) * l.elem, al);
    l.ctx = l.prob + s_pad((size_t)(n * heads * seq * seq) * l.elem, al);
    l.total = l.ctx + (size_t)mh * sizeof(float);
    return l;
}

/* The unfused backward's workspace, per sample (s_att_unfused_bwd): the
 * fp32 part, dctx [seq, hid] | dq, dk, dv [3 seq hid] | dqkv [seq, 3 hid] |
 * dP [heads, seq, seq], padded to 256 bytes | head-major dctx of .elem
 * bytes an element, padded | in bf16 dS [heads, seq, seq] (in fp32 the
 * softmax backward writes dS over dP). n samples take n times each part,
 * so the request is n times one sample's (gpp_cuda_op_workspace). */
typedef struct {
    size_t f32, hm, ds;
} s_unf_work_t;

static s_unf_work_t s_unf_work(int64_t seq, int64_t hid, int64_t heads, int bf16)
{
    s_unf_work_t w;
    w.f32 = s_pad((size_t)(7 * seq * hid + heads * seq * seq) * sizeof(float), 256);
    w.hm = s_pad((size_t)(seq * hid) * (bf16 ? 2 : sizeof(float)), 256);
    w.ds = bf16 ? (size_t)(heads * seq * seq) * 2 : 0;
    return w;
}

/* Every kernel's request, per sample and fixed (gpp_backend_op_workspace):
 * the forward and the backward of each attention core below, the
 * cross-entropy's loss per row, the sparse gradient's accumulation scratch
 * (gpp_cuk_sparse_scratch_ints(count) <= 7 count + 256 ints for count = n x
 * bag pairs). Linear and layer norm put their partial sums in the cuBLASLt
 * workspace, which is the backend's own. */
gpp_work_t gpp_cuda_op_workspace(gpp_backend_t *be, const gpp_graph_t *g, const gpp_op_t *op)
{
    gpp_work_t w = {0, 0};
    if (op->type == GPP_OP_ATTENTION) {
        int64_t seq = op->rows, hid = op->cols, heads = op->heads;
        gpp_cuda_core_t core = gpp_cuda_attention_core(gpp_cuda_be(be), hid / heads);
        int bf16 = core == GPP_CUDA_CORE_UNFUSED_BF16;
        if (core == GPP_CUDA_CORE_UNFUSED || bf16) {
            /* forward: natural qkv | head-major ctx | in bf16 the scores */
            int64_t fwd = (4 * seq * hid + (bf16 ? heads * seq * seq : 0)) * 4;
            s_unf_work_t b = s_unf_work(seq, hid, heads, bf16);
            int64_t bwd = (int64_t)(b.f32 + b.hm + b.ds);
            w.per_sample = fwd > bwd ? fwd : bwd;
        } else { /* fused: only the backward, dctx | dqkv | dsum [heads, seq] */
            w.per_sample = (4 * seq * hid + heads * seq) * 4;
        }
    } else if (op->type == GPP_OP_LOSS_CE) {
        w.per_sample = g->ops[op->inputs[0]].rows * 4;
    } else if (op->type == GPP_OP_EMBEDDING_BAG && op->sparse_params) {
        /* pairs per sample: every index of the sample's bags */
        const gpp_op_t *in = &g->ops[op->inputs[0]];
        w.fixed = 256 * 4;
        w.per_sample = 7 * in->rows * in->cols * 4;
    }
    return w;
}

size_t gpp_cuda_attention_stash_bytes(gpp_backend_t *be, int64_t n, int64_t seq, int64_t hidden,
                                      int heads)
{
    gpp_cuda_core_t core = gpp_cuda_attention_core(gpp_cuda_be(be), hidden / heads);
    if (core == GPP_CUDA_CORE_UNFUSED || core == GPP_CUDA_CORE_UNFUSED_BF16)
        return s_unf_stash(n, seq, hidden, heads, core == GPP_CUDA_CORE_UNFUSED_BF16).total;
    /* qkv [n seq, 3 hidden] | lse [n heads, seq] | ctx [n seq, hidden] */
    return (size_t)(n * seq * (4 * hidden + heads)) * sizeof(float);
}

/* Fused cores: no permutes and no probabilities. Stash (parts sized in
 * floats): natural qkv [n seq, 3 hidden] | the row log-sum-exps [n heads,
 * seq] | natural ctx [n seq, hidden] (gpp_cuda_attention_stash_bytes).
 * Over the op's bf16 tensors (x bf16: io16 in the two functions below)
 * either core keeps qkv, ctx and, in the backward, dctx and dqkv in bf16,
 * as FlashAttention does: its kernels read and write bf16 (the tensor-core
 * one's products round their operands to bf16 anyway; the fp32 one, head
 * sizes 65-128, computes in fp32 from them), and the projections read no
 * fp32 operand they would have to round per product. */

/* q, k, v of a natural qkv of elements of e bytes: columns 0, hid, 2 hid */
static const void *s_qkv_part(gpp_cuk_t qkv, const s_att_t *a, int part)
{
    return (const char *)qkv.p + (size_t)(part * a->hid) * (qkv.bf16 ? 2 : sizeof(float));
}

static int s_att_fused_fwd(gpp_stream_t *s, const s_att_t *a, const gpp_tensor_t *x,
                           const gpp_attention_params_t *p, int causal, gpp_tensor_t *y,
                           float *stash, gpp_err_t *err)
{
    const int io16 = x->dtype == GPP_DTYPE_BF16;
    float *lse = stash + a->m * 3 * a->hid;
    gpp_cuk_t qkv = {stash, io16}, ctx = {lse + a->batch * a->seq, io16};
    if (s_linear_fwd(s, a->m, a->hid, 3 * a->hid, s_k(x), s_f(&p->w_qkv), s_f(&p->b_qkv), qkv,
                     err) < 0)
        return -1;
    GPP_CUDA_TRY(gpp_cuk_flash_fwd(gpp_cuda_stream(s), a->n, a->heads, a->seq, a->dh, 3 * a->hid,
                                   a->hid, a->scale, causal, s_att_core(s, a) == GPP_CUDA_CORE_TC,
                                   io16, s_qkv_part(qkv, a, 0), s_qkv_part(qkv, a, 1),
                                   s_qkv_part(qkv, a, 2), ctx.p, lse),
                 err);
    return s_linear_fwd(s, a->m, a->hid, a->hid, ctx, s_f(&p->w_o), s_f(&p->b_o), s_k(y), err);
}

/* The unfused core: the heads permuted to head-major, one batched product
 * over all samples x heads for QK^T, a row softmax, one for PV, permuted
 * back. bf16 (precision bf16, GPP_CUDA_CORE_UNFUSED_BF16): the products'
 * operands are written in bf16 by the kernels that make them (the permute:
 * Q, K, V; the softmax: P), so cuBLASLt runs native bf16 x bf16 -> fp32
 * products (no conversion inside the library, half the bytes) and the
 * stash is about half; scores and sums stay fp32, each operand rounded
 * once. With the op's tensors in bf16 (gpp_backend_act_bf16) the natural
 * qkv (x bf16, bf16 core: the projection writes it in bf16) and ctx (x
 * bf16, either unfused core: the permute back writes it in bf16; the
 * backward finds it by x's type too) take bf16, so the projections read no
 * fp32 operand they would have to pack. Stash:
 * s_unf_stash_t (ctx's part sized for fp32 either way). Workspace (fp32
 * sizes): natural qkv [m, 3 hid] | head-major ctx [m, hid] | in bf16 the
 * scores [batch, seq, seq] (in fp32 the softmax runs in place in the
 * stash). */
static int s_att_unfused_fwd(gpp_stream_t *s, const s_att_t *a, const gpp_tensor_t *x,
                             const gpp_attention_params_t *p, int causal, gpp_tensor_t *y,
                             void *stash, int bf16, gpp_err_t *err)
{
    cudaStream_t st = gpp_cuda_stream(s);
    s_unf_stash_t l = s_unf_stash(a->n, a->seq, a->hid, a->heads, bf16);
    int64_t mh = a->m * a->hid, bss = a->batch * a->seq * a->seq;
    char *qkv_hm = stash, *prob = qkv_hm + l.prob;
    gpp_cuk_t ctx = {qkv_hm + l.ctx, x->dtype == GPP_DTYPE_BF16};
    const char *q = qkv_hm, *k = q + mh * l.elem, *v = k + mh * l.elem;
    float *ws = gpp_stream_workspace(s, (size_t)(4 * mh + (bf16 ? bss : 0)) * sizeof(float), err);
    if (!ws)
        return gpp_err_prefix(err, "workspace");
    gpp_cuk_t qkv = {ws, bf16 && x->dtype == GPP_DTYPE_BF16};
    float *ctx_hm = ws + 3 * mh, *scores = bf16 ? ctx_hm + mh : (float *)prob;
    if (s_linear_fwd(s, a->m, a->hid, 3 * a->hid, s_k(x), s_f(&p->w_qkv), s_f(&p->b_qkv), qkv,
                     err) < 0)
        return -1;
    gpp_cuk_t hm = {qkv_hm, bf16};
    GPP_CUDA_TRY(gpp_cuk_heads_permute(st, a->n, a->seq, a->heads, a->dh, 3, qkv, hm, 1), err);
    /* scores = scale Q K^T, softmax, ctx = P V */
    if (s_att_gemm(s, a, 0, 1, a->seq, a->seq, a->dh, a->scale, q, 0, k, 0, scores, 1, bf16, err) <
        0)
        return -1;
    GPP_CUDA_TRY(bf16
                     ? gpp_cuk_softmax_fwd_bf16(st, a->batch * a->seq, a->seq, scores, prob, causal)
                     : gpp_cuk_softmax_fwd(st, a->batch * a->seq, a->seq, scores, causal),
                 err);
    if (s_att_gemm(s, a, 0, 0, a->seq, a->dh, a->seq, 1.0f, prob, 1, v, 0, ctx_hm, 0, bf16, err) <
        0)
        return -1;
    GPP_CUDA_TRY(
        gpp_cuk_heads_permute(st, a->n, a->seq, a->heads, a->dh, 1, gpp_cuk_f32(ctx_hm), ctx, 0),
        err);
    return s_linear_fwd(s, a->m, a->hid, a->hid, ctx, s_f(&p->w_o), s_f(&p->b_o), s_k(y), err);
}

int gpp_cuda_attention_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                           int heads, int causal, gpp_tensor_t *y, void *stash, gpp_err_t *err)
{
    s_att_t a = s_att(x, heads);
    gpp_cuda_core_t core = s_att_core(s, &a);
    int rc = core == GPP_CUDA_CORE_UNFUSED || core == GPP_CUDA_CORE_UNFUSED_BF16
                 ? s_att_unfused_fwd(s, &a, x, p, causal, y, stash,
                                     core == GPP_CUDA_CORE_UNFUSED_BF16, err)
                 : s_att_fused_fwd(s, &a, x, p, causal, y, stash, err);
    return rc < 0 ? gpp_err_prefix(err, "attention forward") : 0;
}

/* dctx = dy W_o (overwritten; fp32 or bf16) and W_o's gradients (+=): the
 * start of both backwards. */
static int s_att_out_bwd(gpp_stream_t *s, const s_att_t *a, const gpp_attention_params_t *p,
                         gpp_cuk_t ctx, const gpp_tensor_t *dy, gpp_cuk_t dctx,
                         gpp_attention_params_t *dp, gpp_err_t *err)
{
    gpp_cuda_gemm_t g = {.m = a->m,
                         .n = a->hid,
                         .k = a->hid,
                         .alpha = 1.0f,
                         .a = dy->data,
                         .a_bf16 = s_k(dy).bf16,
                         .lda = a->hid,
                         .b = s_f(&p->w_o),
                         .ldb = a->hid,
                         .c = dctx.p,
                         .c_bf16 = dctx.bf16,
                         .ldc = a->hid};
    if (gpp_cuda_gemm(s, &g, err) < 0)
        return -1;
    return s_linear_bwd(s, a->m, a->hid, a->hid, ctx, s_f(&p->w_o), s_k(dy), gpp_cuk_f32(NULL),
                        dp ? s_f(&dp->w_o) : NULL, dp ? s_f(&dp->b_o) : NULL, err);
}

static int s_att_fused_bwd(gpp_stream_t *s, const s_att_t *a, const gpp_tensor_t *x,
                           const gpp_attention_params_t *p, int causal, const float *stash,
                           const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_attention_params_t *dp,
                           gpp_err_t *err)
{
    const int io16 = x->dtype == GPP_DTYPE_BF16;
    const float *lse = stash + a->m * 3 * a->hid;
    gpp_cuk_t qkv = {(void *)stash, io16}, ctx = {(void *)(lse + a->batch * a->seq), io16};
    /* workspace (parts sized in floats): dctx [m, hid] | dqkv [m, 3 hid] |
       dsum [batch, seq] */
    int64_t mh = a->m * a->hid;
    float *ws = gpp_stream_workspace(s, (size_t)(4 * mh + a->batch * a->seq) * sizeof(float), err);
    if (!ws)
        return gpp_err_prefix(err, "workspace");
    gpp_cuk_t dctx = {ws, io16}, dqkv = {ws + mh, io16};
    float *dsum = ws + 4 * mh;
    if (s_att_out_bwd(s, a, p, ctx, dy, dctx, dp, err) < 0)
        return -1;
    GPP_CUDA_TRY(gpp_cuk_flash_bwd(gpp_cuda_stream(s), a->n, a->heads, a->seq, a->dh, 3 * a->hid,
                                   a->hid, a->scale, causal, s_att_core(s, a) == GPP_CUDA_CORE_TC,
                                   io16, s_qkv_part(qkv, a, 0), s_qkv_part(qkv, a, 1),
                                   s_qkv_part(qkv, a, 2), ctx.p, dctx.p, lse, dsum, dqkv.p,
                                   (void *)s_qkv_part(dqkv, a, 1), (void *)s_qkv_part(dqkv, a, 2)),
                 err);
    return s_linear_bwd(s, a->m, a->hid, 3 * a->hid, s_k(x), s_f(&p->w_qkv), dqkv, s_k(dx),
                        dp ? s_f(&dp->w_qkv) : NULL, dp ? s_f(&dp->b_qkv) : NULL, err);
}

/* The unfused core's backward (s_att_unfused_fwd): dctx = dy W_o, permuted
 * to head-major; dV = P^T dctx; dP = dctx V^T; the softmax backward dS;
 * dQ = scale dS K; dK = scale dS^T Q; permuted back. Causal: the stashed
 * probabilities are zero where masked, so dS is too. bf16: head-major dctx
 * and dS are written in bf16 (the products' operands), the products give
 * fp32. Workspace: dctx [m, hid] | dq, dk, dv head-major [3 m hid] | dqkv
 * [m, 3 hid] | dP [batch, seq, seq] in fp32, then head-major dctx [m, hid]
 * and, in bf16, dS [batch, seq, seq] of .elem bytes an element (in fp32 the
 * softmax backward writes dS over dP); s_unf_work_t. The stashed ctx has
 * x's element type (as the forward wrote it); dqkv takes x's too in the
 * bf16 core (the projection's backward then reads bf16 alone). */
static int s_att_unfused_bwd(gpp_stream_t *s, const s_att_t *a, const gpp_tensor_t *x,
                             const gpp_attention_params_t *p, const void *stash,
                             const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_attention_params_t *dp,
                             int bf16, gpp_err_t *err)
{
    cudaStream_t st = gpp_cuda_stream(s);
    s_unf_stash_t l = s_unf_stash(a->n, a->seq, a->hid, a->heads, bf16);
    int64_t mh = a->m * a->hid;
    const char *q = stash, *prob = q + l.prob;
    const char *k = q + mh * l.elem, *v = k + mh * l.elem;
    gpp_cuk_t ctx = {(void *)(q + l.ctx), x->dtype == GPP_DTYPE_BF16};
    s_unf_work_t lw = s_unf_work(a->seq, a->hid, a->heads, bf16);
    size_t f32_bytes = (size_t)a->n * lw.f32, hm_bytes = (size_t)a->n * lw.hm;
    float *dctx = gpp_stream_workspace(s, f32_bytes + hm_bytes + (size_t)a->n * lw.ds, err);
    if (!dctx)
        return gpp_err_prefix(err, "workspace");
    float *dq = dctx + mh, *dk = dq + mh, *dv = dk + mh, *dprob = dv + 4 * mh;
    gpp_cuk_t dqkv = {dv + mh, bf16 && x->dtype == GPP_DTYPE_BF16};
    char *dctx_hm = (char *)dctx + f32_bytes;
    void *ds = bf16 ? (void *)(dctx_hm + hm_bytes) : (void *)dprob;
    if (s_att_out_bwd(s, a, p, ctx, dy, gpp_cuk_f32(dctx), dp, err) < 0)
        return -1;
    gpp_cuk_t hm = {dctx_hm, bf16};
    GPP_CUDA_TRY(
        gpp_cuk_heads_permute(st, a->n, a->seq, a->heads, a->dh, 1, gpp_cuk_f32(dctx), hm, 1), err);
    if (s_att_gemm(s, a, 1, 0, a->seq, a->dh, a->seq, 1.0f, prob, 1, dctx_hm, 0, dv, 0, bf16, err) <
            0 ||
        s_att_gemm(s, a, 0, 1, a->seq, a->seq, a->dh, 1.0f, dctx_hm, 0, v, 0, dprob, 1, bf16, err) <
            0)
        return -1;
    GPP_CUDA_TRY(
        bf16 ? gpp_cuk_softmax_bwd_bf16(st, a->batch * a->seq, a->seq, prob, dprob, ds)
             : gpp_cuk_softmax_bwd(st, a->batch * a->seq, a->seq, (const float *)prob, dprob),
        err);
    if (s_att_gemm(s, a, 0, 0, a->seq, a->dh, a->seq, a->scale, ds, 1, k, 0, dq, 0, bf16, err) <
            0 ||
        s_att_gemm(s, a, 1, 0, a->seq, a->dh, a->seq, a->scale, ds, 1, q, 0, dk, 0, bf16, err) < 0)
        return -1;
    GPP_CUDA_TRY(
        gpp_cuk_heads_permute(st, a->n, a->seq, a->heads, a->dh, 3, gpp_cuk_f32(dq), dqkv, 0), err);
    return s_linear_bwd(s, a->m, a->hid, 3 * a->hid, s_k(x), s_f(&p->w_qkv), dqkv, s_k(dx),
                        dp ? s_f(&dp->w_qkv) : NULL, dp ? s_f(&dp->b_qkv) : NULL, err);
}

int gpp_cuda_attention_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                           int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                           gpp_tensor_t *dx, gpp_attention_params_t *dp, gpp_err_t *err)
{
    s_att_t a = s_att(x, heads);
    gpp_cuda_core_t core = s_att_core(s, &a);
    int rc = core == GPP_CUDA_CORE_UNFUSED || core == GPP_CUDA_CORE_UNFUSED_BF16
                 ? s_att_unfused_bwd(s, &a, x, p, stash, dy, dx, dp,
                                     core == GPP_CUDA_CORE_UNFUSED_BF16, err)
                 : s_att_fused_bwd(s, &a, x, p, causal, stash, dy, dx, dp, err);
    return rc < 0 ? gpp_err_prefix(err, "attention backward") : 0;
}

/* ---- embedding bag and sparse gradients ---- */

int gpp_cuda_embedding_bag_fwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *table,
                               gpp_tensor_t *y, gpp_err_t *err)
{
    GPP_CUDA_TRY(gpp_cuk_embedding_fwd(gpp_cuda_stream(s), idx->n * idx->rows, idx->cols,
                                       table->cols, table->rows, idx->data, s_f(table), s_k(y),
                                       gpp_cuda_st(s)->fault),
                 err);
    return 0;
}

static int32_t *s_dcount(const gpp_sparse_grad_t *g)
{
    return g->slot + g->table_rows; /* the slot map's last word */
}

int gpp_cuda_sparse_init(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err)
{
    cudaStream_t st = gpp_cuda_stream(s);
    if (!g->host) { /* the count's host copy, written by the kernels */
        void *h = NULL;
        GPP_CUDA_TRY(cudaHostAlloc(&h, sizeof(int32_t), cudaHostAllocMapped), err);
        g->host = h;
    }
    *(int32_t *)g->host = 0;
    GPP_CUDA_TRY(cudaMemsetAsync(g->slot, 0xff, (size_t)g->table_rows * sizeof(int32_t), st), err);
    GPP_CUDA_TRY(cudaMemsetAsync(s_dcount(g), 0, sizeof(int32_t), st), err);
    g->count = 0;
    return 0;
}

int64_t gpp_cuda_sparse_count(const gpp_sparse_grad_t *g)
{
    return *(const volatile int32_t *)g->host;
}

void gpp_cuda_sparse_fini(gpp_sparse_grad_t *g)
{
    if (g->host)
        (void)cudaFreeHost(g->host);
    g->host = NULL;
}

/* Accumulates `count` pairs: row ids ids_dev (device) and value row of
 * pair p at values + (p / div) * stride. Scratch: the stream workspace in
 * a backward (an op's, charged by the memory model, held by a pass's
 * recording), the side buffer for a peer's pairs (side: the sparse sync,
 * outside the passes, whose sizes follow the data). */
static int s_sparse_accum(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t count,
                          const int32_t *ids_dev, gpp_cuk_t values, int64_t div, int64_t stride,
                          int side, gpp_err_t *err)
{
    if (count == 0)
        return 0;
    if (count > INT32_MAX / 8)
        return gpp_err_set(err, "sparse gradient: %lld pairs in one accumulation; at most %d",
                           (long long)count, INT32_MAX / 8);
    int64_t need = g->count + count < g->table_rows ? g->count + count : g->table_rows;
    if (need > g->cap) {
        enum cudaStreamCaptureStatus cap_st = cudaStreamCaptureStatusNone;
        GPP_CUDA_TRY(cudaStreamIsCapturing(gpp_cuda_stream(s), &cap_st), err);
        if (cap_st != cudaStreamCaptureStatusNone) /* a recording cannot allocate */
            return gpp_err_set(err,
                               "sparse gradient: %lld rows would grow to %lld inside a CUDA "
                               "graph recording (gpp_sparse_grad_room says how many pairs fit)",
                               (long long)g->cap, (long long)need);
        if (gpp_sparse_grad_reserve(s, g, need, err) < 0)
            return -1;
    }
    size_t scratch_bytes = (size_t)gpp_cuk_sparse_scratch_ints(count) * sizeof(int32_t);
    int32_t *scratch = side ? gpp_cuda_side_buffer(s, scratch_bytes, err)
                            : gpp_stream_workspace(s, scratch_bytes, err);
    if (!scratch)
        return -1;
    GPP_CUDA_TRY(gpp_cuk_sparse_accum(gpp_cuda_stream(s), count, g->dim, g->table_rows, ids_dev,
                                      values, div, stride, scratch, g->values, g->slot, g->rows,
                                      s_dcount(g), g->host, gpp_cuda_st(s)->fault),
                 err);
    g->count = need;
    return 0;
}

int gpp_cuda_sparse_add(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t count, const int32_t *rows,
                        const float *values, int64_t value_stride, gpp_err_t *err)
{
    return s_sparse_accum(s, g, count, rows, gpp_cuk_f32(values), 1, value_stride, 1, err);
}

int gpp_cuda_embedding_bag_bwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *dy,
                               gpp_sparse_grad_t *dtable, gpp_err_t *err)
{
    /* every index of bag b receives dy row b: pair p's value row is p / bag */
    if (s_sparse_accum(s, dtable, gpp_tensor_numel(idx), idx->data, s_k(dy), idx->cols, dy->cols, 0,
                       err) < 0)
        return gpp_err_prefix(err, "embedding bag backward");
    return 0;
}

int gpp_cuda_sparse_clear(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err)
{
    if (g->count > 0) /* the host's bound: 0 means the device holds none either */
        GPP_CUDA_TRY(gpp_cuk_sparse_clear(gpp_cuda_stream(s), g->count, s_dcount(g), g->host,
                                          g->rows, g->slot),
                     err);
    g->count = 0;
    return 0;
}

/* ---- concat ---- */

/* A column block of rows rows: dst's columns [0, c) (row stride ldd) =
 * src's (row stride lds); one element type: a 2D copy of bytes; two: the
 * converting kernel. */
static int s_block_copy(gpp_stream_t *s, int64_t rows, int64_t c, gpp_cuk_t src, int64_t lds,
                        gpp_cuk_t dst, int64_t ldd, gpp_err_t *err)
{
    if (c <= 0 || rows <= 0)
        return 0;
    if (src.bf16 != dst.bf16) {
        GPP_CUDA_TRY(gpp_cuk_block_copy(gpp_cuda_stream(s), rows, c, src, lds, dst, ldd), err);
        return 0;
    }
    size_t e = src.bf16 ? 2 : sizeof(float);
    GPP_CUDA_TRY(cudaMemcpy2DAsync(dst.p, (size_t)ldd * e, src.p, (size_t)lds * e, (size_t)c * e,
                                   (size_t)rows, cudaMemcpyDeviceToDevice, gpp_cuda_stream(s)),
                 err);
    return 0;
}

int gpp_cuda_concat_fwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *const *xs, gpp_tensor_t *y,
                        gpp_err_t *err)
{
    int64_t rows = y->n * y->rows, cy = y->cols, off = 0;
    for (int i = 0; i < n_in; i++) {
        int64_t c = xs[i]->cols;
        if (s_block_copy(s, rows, c, s_k(xs[i]), c, gpp_cuk_at(s_k(y), off), cy, err) < 0)
            return -1;
        off += c;
    }
    return 0;
}

int gpp_cuda_concat_bwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *dy, gpp_tensor_t *const *dxs,
                        gpp_err_t *err)
{
    int64_t rows = dy->n * dy->rows, cy = dy->cols;
    /* NULL entries are adjacent (gpp_ops.h): the first spans what the others leave */
    int64_t null_cols = cy, off = 0;
    for (int i = 0; i < n_in; i++)
        null_cols -= dxs[i] ? dxs[i]->cols : 0;
    for (int i = 0; i < n_in; i++) {
        if (!dxs[i]) {
            off += null_cols;
            null_cols = 0;
            continue;
        }
        int64_t c = dxs[i]->cols;
        if (dxs[i]->data && c > 0 && rows > 0)
            GPP_CUDA_TRY(gpp_cuk_block_acc(gpp_cuda_stream(s), rows, c, gpp_cuk_at(s_k(dy), off),
                                           cy, s_k(dxs[i]), c),
                         err);
        off += c;
    }
    return 0;
}

/* ---- slice ---- */

int gpp_cuda_slice_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int64_t start, gpp_tensor_t *y,
                       gpp_err_t *err)
{
    return s_block_copy(s, y->n * y->rows, y->cols, gpp_cuk_at(s_k(x), start), x->cols, s_k(y),
                        y->cols, err);
}

int gpp_cuda_slice_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, int64_t start, gpp_tensor_t *dx,
                       gpp_err_t *err)
{
    int64_t rows = dy->n * dy->rows, c = dy->cols;
    if (c > 0 && rows > 0)
        GPP_CUDA_TRY(gpp_cuk_block_acc(gpp_cuda_stream(s), rows, c, s_k(dy), c,
                                       gpp_cuk_at(s_k(dx), start), dx->cols),
                     err);
    return 0;
}

/* y = x, as n rows of numel / n (reshape's forward between element types) */
int gpp_cuda_convert(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    int64_t per = x->n > 0 ? gpp_tensor_numel(x) / x->n : 0;
    return s_block_copy(s, x->n, per, s_k(x), per, s_k(y), per, err);
}

/* ---- losses ---- */

int gpp_cuda_loss_mse(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *target,
                      float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err)
{
    int64_t n = gpp_tensor_numel(x);
    GPP_CUDA_TRY(gpp_cuk_mse(gpp_cuda_stream(s), n, s_k(x), s_f(target), s_k(dx),
                             2.0f * grad_scale / (float)n, loss),
                 err);
    return 0;
}

int gpp_cuda_loss_ce(gpp_stream_t *s, const gpp_tensor_t *logits, const gpp_tensor_t *labels,
                     float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err)
{
    int64_t rows = logits->n * logits->rows;
    float *row_loss = gpp_stream_workspace(s, (size_t)rows * sizeof(float), err);
    if (!row_loss)
        return gpp_err_prefix(err, "cross-entropy workspace");
    cudaStream_t st = gpp_cuda_stream(s);
    GPP_CUDA_TRY(gpp_cuk_ce_rows(st, rows, logits->cols, s_k(logits), labels->data, s_k(dx),
                                 grad_scale / (float)rows, row_loss, gpp_cuda_st(s)->fault),
                 err);
    GPP_CUDA_TRY(gpp_cuk_mean(st, rows, row_loss, loss), err);
    return 0;
}

/* ---- optimizers ---- */

static gpp_math_adamw_t s_adamw(const gpp_optim_hp_t *hp, int64_t step)
{
    return gpp_math_adamw_consts(hp->lr, hp->weight_decay, hp->beta1, hp->beta2, hp->eps, step);
}

int gpp_cuda_optim_step(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                        int64_t step, float *param, const float *grad, gpp_err_t *err)
{
    cudaStream_t cs = gpp_cuda_stream(s);
    gpp_cuda_wpack_forget(s->be, param, (size_t)st->numel * sizeof(float), 0);
    if (hp->kind == GPP_OPTIM_SGD)
        GPP_CUDA_TRY(gpp_cuk_sgd(cs, st->numel, hp->lr, hp->weight_decay, hp->momentum, param,
                                 st->buf[0], grad),
                     err);
    else
        GPP_CUDA_TRY(
            gpp_cuk_adamw(cs, st->numel, s_adamw(hp, step), param, st->buf[0], st->buf[1], grad),
            err);
    return 0;
}

int gpp_cuda_optim_step_sparse(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                               int64_t step, float *table, const gpp_sparse_grad_t *grad,
                               gpp_err_t *err)
{
    cudaStream_t cs = gpp_cuda_stream(s);
    int64_t dim = grad->dim;
    if (hp->kind == GPP_OPTIM_SGD && (hp->momentum != 0.0f || hp->weight_decay != 0.0f)) {
        GPP_CUDA_TRY(gpp_cuk_sgd_table(cs, grad->table_rows, dim, hp->lr, hp->weight_decay,
                                       hp->momentum, table, st->buf[0], grad->slot, grad->values),
                     err);
        return 0;
    }
    if (grad->count == 0)
        return 0;
    if (hp->kind == GPP_OPTIM_SGD)
        GPP_CUDA_TRY(gpp_cuk_sgd_rows(cs, grad->count, s_dcount(grad), dim, hp->lr,
                                      hp->weight_decay, hp->momentum, table, st->buf[0], grad->rows,
                                      grad->values),
                     err);
    else
        GPP_CUDA_TRY(gpp_cuk_adamw_rows(cs, grad->count, s_dcount(grad), dim, s_adamw(hp, step),
                                        table, st->buf[0], st->buf[1], grad->rows, grad->values),
                     err);
    return 0;
}
