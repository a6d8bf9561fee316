/* gpp_ops: argument and shape checks shared by every backend, then dispatch
 * through the stream's backend table; at the end, the kernel entry points
 * per op type (gpp_op_kernels). */
#include "kernels/gpp_ops.h"

#include <assert.h>

#include "kernels/gpp_backend_impl.h"

static const gpp_backend_vt_t *s_vt(gpp_stream_t *s)
{
    assert(s && s->be && s->be->vt);
    return s->be->vt;
}

/* A usable fp32 / int32 tensor. */
static inline int s_f32(const gpp_tensor_t *t)
{
    return t && t->dtype == GPP_DTYPE_F32 && (t->data || gpp_tensor_numel(t) == 0);
}
static inline int s_i32(const gpp_tensor_t *t)
{
    return t && t->dtype == GPP_DTYPE_I32 && (t->data || gpp_tensor_numel(t) == 0);
}
static inline int s_same_shape(const gpp_tensor_t *a, const gpp_tensor_t *b)
{
    return a->n == b->n && a->rows == b->rows && a->cols == b->cols;
}
/* A [1, 1, cols] vector. */
static inline int s_vec(const gpp_tensor_t *t, int64_t cols)
{
    return s_f32(t) && t->n == 1 && t->rows == 1 && t->cols == cols;
}
/* A [1, rows, cols] matrix. */
static inline int s_mat(const gpp_tensor_t *t, int64_t rows, int64_t cols)
{
    return s_f32(t) && t->n == 1 && t->rows == rows && t->cols == cols;
}
/* An activation (input, output or their gradient) of an op of type `type`:
 * fp32, or bf16 where the stream's backend takes it there
 * (gpp_backend_act_bf16). */
static inline int s_act(gpp_stream_t *s, gpp_op_type_t type, const gpp_tensor_t *t)
{
    return t && (t->data || gpp_tensor_numel(t) == 0) &&
           (t->dtype == GPP_DTYPE_F32 ||
            (t->dtype == GPP_DTYPE_BF16 && gpp_backend_act_bf16(s->be, type)));
}
/* An optional activation gradient: NULL or an activation shaped like `like`. */
static inline int s_opt_act(gpp_stream_t *s, gpp_op_type_t type, const gpp_tensor_t *g,
                            const gpp_tensor_t *like)
{
    return !g || (s_act(s, type, g) && s_same_shape(g, like));
}
/* An optional gradient: NULL or the shape of `like`. */
static inline int s_opt_like(const gpp_tensor_t *g, const gpp_tensor_t *like)
{
    return !g || (s_f32(g) && s_same_shape(g, like));
}

int gpp_linear_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                   const gpp_tensor_t *b, gpp_tensor_t *y, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_LINEAR, x) && s_f32(w) && s_act(s, GPP_OP_LINEAR, y));
    assert(w->n == 1 && w->cols == x->cols);
    assert(!b || s_vec(b, w->rows));
    assert(y->n == x->n && y->rows == x->rows && y->cols == w->rows);
    return s_vt(s)->linear_fwd(s, x, w, b, y, err);
}

int gpp_linear_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                   const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_tensor_t *dw, gpp_tensor_t *db,
                   gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_LINEAR, x) && s_f32(w) && s_act(s, GPP_OP_LINEAR, dy));
    assert(w->n == 1 && w->cols == x->cols);
    assert(dy->n == x->n && dy->rows == x->rows && dy->cols == w->rows);
    assert(s_opt_act(s, GPP_OP_LINEAR, dx, x) && s_opt_like(dw, w) && (!db || s_vec(db, w->rows)));
    return s_vt(s)->linear_bwd(s, x, w, dy, dx, dw, db, err);
}

int gpp_linear_act_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *w,
                       const gpp_tensor_t *b, gpp_op_type_t act, gpp_gelu_form_t form,
                       gpp_tensor_t *z, gpp_tensor_t *y, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_LINEAR, x) && s_f32(w) && s_act(s, act, y));
    assert(w->n == 1 && w->cols == x->cols);
    assert(!b || s_vec(b, w->rows));
    assert(y->n == x->n && y->rows == x->rows && y->cols == w->rows);
    assert((act == GPP_OP_RELU && !z) ||
           (act == GPP_OP_GELU && s_act(s, GPP_OP_LINEAR, z) && s_same_shape(z, y)));
    assert(form == GPP_GELU_TANH || form == GPP_GELU_ERF);
    return s_vt(s)->linear_act_fwd(s, x, w, b, (int)act, (int)form, z, y, err);
}

int gpp_relu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_RELU, x) && s_act(s, GPP_OP_RELU, y) && s_same_shape(x, y));
    return s_vt(s)->relu_fwd(s, x, y, err);
}

int gpp_relu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                 gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_RELU, x) && s_act(s, GPP_OP_RELU, dy) && s_same_shape(x, dy) &&
           s_opt_act(s, GPP_OP_RELU, dx, x));
    if (!dx)
        return 0;
    return s_vt(s)->relu_bwd(s, x, dy, dx, err);
}

int gpp_gelu_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_gelu_form_t form, gpp_tensor_t *y,
                 gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_GELU, x) && s_act(s, GPP_OP_GELU, y) && s_same_shape(x, y));
    assert(form == GPP_GELU_TANH || form == GPP_GELU_ERF);
    return s_vt(s)->gelu_fwd(s, x, (int)form, y, err);
}

int gpp_gelu_bwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_gelu_form_t form,
                 const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_GELU, x) && s_act(s, GPP_OP_GELU, dy) && s_same_shape(x, dy) &&
           s_opt_act(s, GPP_OP_GELU, dx, x));
    assert(form == GPP_GELU_TANH || form == GPP_GELU_ERF);
    if (!dx)
        return 0;
    return s_vt(s)->gelu_bwd(s, x, (int)form, dy, dx, err);
}

int gpp_layernorm_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                      const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_LAYERNORM, x) && s_act(s, GPP_OP_LAYERNORM, y) && s_same_shape(x, y) &&
           x->cols > 0);
    assert(s_vec(gain, x->cols) && s_vec(bias, x->cols));
    assert(stash || x->n * x->rows == 0);
    return s_vt(s)->layernorm_fwd(s, x, gain, bias, y, stash, err);
}

int gpp_layernorm_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                      const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                      gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_LAYERNORM, x) && s_act(s, GPP_OP_LAYERNORM, dy) && s_same_shape(x, dy) &&
           x->cols > 0);
    assert(s_vec(gain, x->cols) && s_opt_act(s, GPP_OP_LAYERNORM, dx, x));
    assert((!dgain || s_vec(dgain, x->cols)) && (!dbias || s_vec(dbias, x->cols)));
    assert(stash || x->n * x->rows == 0);
    return s_vt(s)->layernorm_bwd(s, x, gain, stash, dy, dx, dgain, dbias, err);
}

static inline int s_attention_params_ok(const gpp_attention_params_t *p, int64_t h)
{
    return s_mat(&p->w_qkv, 3 * h, h) && s_vec(&p->b_qkv, 3 * h) && s_mat(&p->w_o, h, h) &&
           s_vec(&p->b_o, h);
}

int gpp_attention_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                      int heads, int causal, gpp_tensor_t *y, void *stash, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_ATTENTION, x) && s_act(s, GPP_OP_ATTENTION, y) && s_same_shape(x, y) &&
           p);
    assert(heads > 0 && x->cols % heads == 0 && s_attention_params_ok(p, x->cols));
    assert(stash || x->n * x->rows == 0);
    return s_vt(s)->attention_fwd(s, x, p, heads, causal, y, stash, err);
}

int gpp_attention_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                      int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                      gpp_tensor_t *dx, gpp_attention_params_t *dp, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_ATTENTION, x) && s_act(s, GPP_OP_ATTENTION, dy) && s_same_shape(x, dy) &&
           s_opt_act(s, GPP_OP_ATTENTION, dx, x) && p);
    assert(heads > 0 && x->cols % heads == 0 && s_attention_params_ok(p, x->cols));
    if (dp) {
        /* each gradient may be absent (data NULL) or shaped like its parameter */
        assert(!dp->w_qkv.data || s_same_shape(&dp->w_qkv, &p->w_qkv));
        assert(!dp->b_qkv.data || s_same_shape(&dp->b_qkv, &p->b_qkv));
        assert(!dp->w_o.data || s_same_shape(&dp->w_o, &p->w_o));
        assert(!dp->b_o.data || s_same_shape(&dp->b_o, &p->b_o));
    }
    assert(stash || x->n * x->rows == 0);
    return s_vt(s)->attention_bwd(s, x, p, heads, causal, stash, dy, dx, dp, err);
}

int gpp_attention_bwd_in(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                         int heads, int causal, const void *stash, const gpp_tensor_t *dy,
                         gpp_tensor_t *dx, void *dqkv, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_ATTENTION, x) && s_act(s, GPP_OP_ATTENTION, dy) && s_same_shape(x, dy) &&
           s_opt_act(s, GPP_OP_ATTENTION, dx, x) && p);
    assert(heads > 0 && x->cols % heads == 0 && s_attention_params_ok(p, x->cols));
    assert((stash && dqkv) || x->n * x->rows == 0);
    if (!s_vt(s)->attention_bwd_in)
        return gpp_backend_bwd_split(s->be, err) ? 0 : -1;
    return s_vt(s)->attention_bwd_in(s, x, p, heads, causal, stash, dy, dx, dqkv, err);
}

int gpp_attention_bwd_w(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_attention_params_t *p,
                        int heads, const void *stash, const gpp_tensor_t *dy, const void *dqkv,
                        gpp_attention_params_t *dp, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_ATTENTION, x) && s_act(s, GPP_OP_ATTENTION, dy) && s_same_shape(x, dy) &&
           p);
    assert(heads > 0 && x->cols % heads == 0 && s_attention_params_ok(p, x->cols));
    assert(!dp || !dp->w_qkv.data || s_same_shape(&dp->w_qkv, &p->w_qkv));
    assert(!dp || !dp->w_o.data || s_same_shape(&dp->w_o, &p->w_o));
    assert((stash && dqkv) || x->n * x->rows == 0);
    (void)p; /* its shapes: the checks above */
    if (!s_vt(s)->attention_bwd_w)
        return gpp_backend_bwd_split(s->be, err) ? 0 : -1;
    return s_vt(s)->attention_bwd_w(s, x, heads, stash, dy, dqkv, dp, err);
}

int gpp_embedding_bag_fwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *table,
                          gpp_tensor_t *y, gpp_err_t *err)
{
    assert(s_i32(idx) && s_f32(table) && s_act(s, GPP_OP_EMBEDDING_BAG, y) && table->n == 1);
    assert(y->n == idx->n && y->rows == idx->rows && y->cols == table->cols);
    return s_vt(s)->embedding_bag_fwd(s, idx, table, y, err);
}

int gpp_embedding_bag_bwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *dy,
                          gpp_sparse_grad_t *dtable, gpp_err_t *err)
{
    assert(s_i32(idx) && s_act(s, GPP_OP_EMBEDDING_BAG, dy));
    assert(dy->n == idx->n && dy->rows == idx->rows);
    if (!dtable)
        return 0;
    assert(dtable->dim == dy->cols && dtable->be == s->be);
    return s_vt(s)->embedding_bag_bwd(s, idx, dy, dtable, err);
}

int gpp_concat_fwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *const *xs, gpp_tensor_t *y,
                   gpp_err_t *err)
{
    assert(n_in >= 1 && xs && s_act(s, GPP_OP_CONCAT, y));
    int64_t cols = 0;
    for (int i = 0; i < n_in; i++) {
        assert(s_act(s, GPP_OP_CONCAT, xs[i]) && xs[i]->n == y->n && xs[i]->rows == y->rows);
        cols += xs[i]->cols;
    }
    assert(cols == y->cols);
    (void)cols;
    return s_vt(s)->concat_fwd(s, n_in, xs, y, err);
}

int gpp_concat_bwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *dy, gpp_tensor_t *const *dxs,
                   gpp_err_t *err)
{
    assert(n_in >= 1 && dxs && s_act(s, GPP_OP_CONCAT, dy));
    int64_t cols = 0;
    int null_runs = 0;
    for (int i = 0; i < n_in; i++) {
        if (!dxs[i]) { /* skipped, no width: NULL entries must be adjacent */
            null_runs += i == 0 || dxs[i - 1];
            continue;
        }
        assert(dxs[i]->n == dy->n && dxs[i]->rows == dy->rows);
        assert(dxs[i]->dtype == GPP_DTYPE_F32 || s_act(s, GPP_OP_CONCAT, dxs[i]));
        cols += dxs[i]->cols;
    }
    assert(null_runs <= 1 && (null_runs ? cols <= dy->cols : cols == dy->cols));
    (void)cols, (void)null_runs;
    return s_vt(s)->concat_bwd(s, n_in, dy, dxs, err);
}

int gpp_slice_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int64_t start, gpp_tensor_t *y,
                  gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_SLICE, x) && s_act(s, GPP_OP_SLICE, y) && x->n == y->n &&
           x->rows == y->rows);
    assert(start >= 0 && start + y->cols <= x->cols);
    return s_vt(s)->slice_fwd(s, x, start, y, err);
}

int gpp_slice_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, int64_t start, gpp_tensor_t *dx,
                  gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_SLICE, dy));
    if (!dx || !dx->data)
        return 0;
    assert(s_act(s, GPP_OP_SLICE, dx) && dx->n == dy->n && dx->rows == dy->rows);
    assert(start >= 0 && start + dy->cols <= dx->cols);
    return s_vt(s)->slice_bwd(s, dy, start, dx, err);
}

int gpp_add_fwd(gpp_stream_t *s, const gpp_tensor_t *a, const gpp_tensor_t *b, gpp_tensor_t *y,
                gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_ADD, a) && s_act(s, GPP_OP_ADD, b) && s_act(s, GPP_OP_ADD, y) &&
           s_same_shape(a, b) && s_same_shape(a, y));
    return s_vt(s)->add(s, a, b, y, err);
}

int gpp_reshape_fwd(gpp_stream_t *s, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_RESHAPE, x) && s_act(s, GPP_OP_RESHAPE, y) && x->n == y->n &&
           gpp_tensor_numel(x) == gpp_tensor_numel(y));
    if (x->dtype != y->dtype) /* bf16 on one side (gpp_backend_act_bf16) */
        return s_vt(s)->convert(s, x, y, err);
    return gpp_stream_copy(s, y->data, x->data, gpp_tensor_bytes(y), GPP_COPY_D2D, err);
}

int gpp_reshape_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, gpp_tensor_t *dx, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_RESHAPE, dy));
    if (!dx || !dx->data)
        return 0;
    assert(dx->n == dy->n);
    return gpp_axpy(s, 1.0f, dy, dx, err);
}

int gpp_add_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, gpp_tensor_t *da, gpp_tensor_t *db,
                gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_ADD, dy) && s_opt_act(s, GPP_OP_ADD, da, dy) &&
           s_opt_act(s, GPP_OP_ADD, db, dy));
    if (da && gpp_axpy(s, 1.0f, dy, da, err) < 0)
        return -1;
    if (db && gpp_axpy(s, 1.0f, dy, db, err) < 0)
        return -1;
    return 0;
}

int gpp_loss_mse(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *target, float *loss,
                 float grad_scale, gpp_tensor_t *dx, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_LOSS_MSE, x) && s_f32(target) && s_same_shape(x, target) &&
           s_opt_act(s, GPP_OP_LOSS_MSE, dx, x));
    assert(loss && gpp_tensor_numel(x) > 0);
    return s_vt(s)->loss_mse(s, x, target, loss, grad_scale, dx, err);
}

int gpp_loss_ce(gpp_stream_t *s, const gpp_tensor_t *logits, const gpp_tensor_t *labels,
                float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err)
{
    assert(s_act(s, GPP_OP_LOSS_CE, logits) && s_i32(labels) &&
           s_opt_act(s, GPP_OP_LOSS_CE, dx, logits));
    assert(labels->n == logits->n && labels->rows == logits->rows && labels->cols == 1);
    assert(loss && logits->n * logits->rows > 0 && logits->cols > 0);
    return s_vt(s)->loss_ce(s, logits, labels, loss, grad_scale, dx, err);
}

int gpp_axpy(gpp_stream_t *s, float alpha, const gpp_tensor_t *x, gpp_tensor_t *y, gpp_err_t *err)
{
    /* an add's gradient accumulation: bf16 where add takes it */
    assert(s_act(s, GPP_OP_ADD, x) && s_act(s, GPP_OP_ADD, y) &&
           gpp_tensor_numel(x) == gpp_tensor_numel(y));
    return s_vt(s)->axpy(s, alpha, x, y, err);
}

/* ---- kernel entry points per op type ---- */

static int s_linear_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_linear_fwd(s, a->x[0], &a->w[0], a->op->bias ? &a->w[1] : NULL, a->y, err);
}

/* The input gradient k and parameter gradient k a backward of part a->part
 * computes: NULL where the part leaves it out. */
static gpp_tensor_t *s_bdx(const gpp_op_args_t *a, int k)
{
    return a->part == GPP_BWD_W || !a->dx ? NULL : a->dx[k];
}

static gpp_tensor_t *s_bdw(const gpp_op_args_t *a, int k)
{
    return a->part == GPP_BWD_IN || !a->dw ? NULL : &a->dw[k];
}

static int s_linear_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_linear_bwd(s, a->x[0], &a->w[0], a->dy, s_bdx(a, 0), s_bdw(a, 0),
                          a->op->bias ? s_bdw(a, 1) : NULL, err);
}

static int s_relu_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_relu_fwd(s, a->x[0], a->y, err);
}

static int s_relu_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_relu_bwd(s, a->x[0], a->dy, a->dx[0], err);
}

static int s_gelu_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_gelu_fwd(s, a->x[0], (gpp_gelu_form_t)a->op->form, a->y, err);
}

static int s_gelu_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_gelu_bwd(s, a->x[0], (gpp_gelu_form_t)a->op->form, a->dy, a->dx[0], err);
}

static int s_layernorm_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_layernorm_fwd(s, a->x[0], &a->w[0], &a->w[1], a->y, a->stash, err);
}

static int s_layernorm_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_layernorm_bwd(s, a->x[0], &a->w[0], a->stash, a->dy, s_bdx(a, 0), s_bdw(a, 0),
                             s_bdw(a, 1), err);
}

static int s_attention_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    gpp_attention_params_t p = {a->w[0], a->w[1], a->w[2], a->w[3]};
    return gpp_attention_fwd(s, a->x[0], &p, a->op->heads, a->op->causal, a->y, a->stash, err);
}

static int s_attention_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    gpp_attention_params_t p = {a->w[0], a->w[1], a->w[2], a->w[3]};
    gpp_attention_params_t dp = {a->dw[0], a->dw[1], a->dw[2], a->dw[3]};
    if (a->part == GPP_BWD_IN)
        return gpp_attention_bwd_in(s, a->x[0], &p, a->op->heads, a->op->causal, a->stash, a->dy,
                                    a->dx[0], a->wstash, err);
    if (a->part == GPP_BWD_W)
        return gpp_attention_bwd_w(s, a->x[0], &p, a->op->heads, a->stash, a->dy, a->wstash, &dp,
                                   err);
    return gpp_attention_bwd(s, a->x[0], &p, a->op->heads, a->op->causal, a->stash, a->dy, a->dx[0],
                             &dp, err);
}

static int s_embedding_bag_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_embedding_bag_fwd(s, a->x[0], &a->w[0], a->y, err);
}

/* An op of the backend's ext table (gpp_backend_op_supported refused the
 * stage at setup where it lacks one: this is the last guard). */
static int s_ext(gpp_stream_t *s, const gpp_op_args_t *a, int bwd, gpp_err_t *err)
{
    const gpp_op_kernel_t *e = s_vt(s)->ext;
    gpp_op_kernel_fn f = e ? (bwd ? e[a->op->type].bwd : e[a->op->type].fwd) : NULL;
    if (!f)
        return gpp_err_set(err,
                           "op '%s' (%s): the %s backend has no kernel for it; use backend = "
                           "\"cpu\" (gpp-train --backend cpu)",
                           a->op->name, gpp_op_type_name(a->op->type), s->be->name);
    return f(s, a, err);
}

static int s_ext_part(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err);

/* The table's gradient is all there is (indices take none): a W part. */
static int s_embedding_bag_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    if (a->op->update == GPP_TABLE_DENSE) /* a dense gradient: the ext kernel */
        return s_ext_part(s, a, err);
    if (a->part == GPP_BWD_IN)
        return 0;
    return gpp_embedding_bag_bwd(s, a->x[0], a->dy, a->dsparse, err);
}

/* Shape checks of the ext ops: inputs and output as the op table derives. */
static void s_ext_check(gpp_stream_t *s, const gpp_op_args_t *a, int bwd)
{
    const gpp_op_t *op = a->op;
    const gpp_tensor_t *out = bwd ? a->dy : a->y;
    assert(gpp_optable[op->type].role == GPP_ROLE_LOSS ||
           (s_f32(out) && out->rows == op->rows && out->cols == op->cols));
    for (int k = 0; k < op->n_inputs; k++)
        assert(a->x[k] && (!a->dx || !a->dx[k] || s_same_shape(a->dx[k], a->x[k])));
    (void)s, (void)out;
}

static int s_ext_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    s_ext_check(s, a, 0);
    return s_ext(s, a, 0, err);
}

/* A part of an ext op's backward: cross-attention's kernel splits itself
 * (its W stash); the others' kernels skip absent gradients, so the part is
 * the whole backward with the other part's gradients left out. */
static int s_ext_part(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    if (a->part == GPP_BWD_ALL || a->op->type == GPP_OP_CROSS_ATTENTION)
        return s_ext(s, a, 1, err);
    gpp_op_args_t b = *a;
    if (a->part == GPP_BWD_IN) {
        b.dw = NULL;
        b.dsparse = NULL;
    } else {
        b.dx = NULL;
    }
    return s_ext(s, &b, 1, err);
}

static int s_ext_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    s_ext_check(s, a, 1);
    return s_ext_part(s, a, err);
}

int gpp_backend_op_supported(gpp_backend_t *be, const gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_kernel_t *e = be->vt->ext;
    int need = op->type >= GPP_OP_EMBEDDING ||
               (op->type == GPP_OP_EMBEDDING_BAG && op->update == GPP_TABLE_DENSE);
    if (op->type == GPP_OP_OPAQUE || !need)
        return 1;
    if (e && e[op->type].fwd && (e[op->type].bwd || op->type == GPP_OP_LOSS_BCE))
        return 1;
    if (e && op->type == GPP_OP_EMBEDDING_BAG && e[op->type].bwd)
        return 1;
    gpp_err_set(err,
                "op '%s' (%s%s): the %s backend has no kernel for it (gpp has it on the CPU "
                "only); use backend = \"cpu\" (gpp-train --backend cpu)",
                op->name, gpp_op_type_name(op->type),
                op->type == GPP_OP_EMBEDDING_BAG ? ", update \"dense\"" : "", be->name);
    return 0;
}

int gpp_backend_bwd_split(gpp_backend_t *be, gpp_err_t *err)
{
    if (be->vt->attention_bwd_in && be->vt->attention_bwd_w)
        return 1;
    gpp_err_set(err,
                "the %s backend has no split backward (B and W passes of the zero-bubble "
                "schedules zb-h1, zb-h2); use schedule = \"1f1b\" or \"auto\", or backend = "
                "\"cpu\"",
                be->name);
    return 0;
}

int gpp_op_bwd(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    gpp_op_kernel_fn f = gpp_op_kernels[a->op->type].bwd;
    if (!f)
        return 0;
    if (a->part == GPP_BWD_ALL || a->op->params > 0)
        return f(s, a, err);
    if (a->part == GPP_BWD_W) /* no parameters: nothing to do */
        return 0;
    gpp_op_args_t b = *a;
    b.part = GPP_BWD_ALL;
    return f(s, &b, err);
}

int gpp_dropout_keep(uint64_t seed, int64_t sample, int op, int64_t e, double p)
{
    /* splitmix64 of the four coordinates; 24 bits as a uniform in [0, 1) */
    uint64_t z = seed ^ 0x9e3779b97f4a7c15ull;
    uint64_t v[3] = {(uint64_t)sample, (uint64_t)op, (uint64_t)e};
    for (int k = 0; k < 3; k++) {
        z += v[k] * 0xbf58476d1ce4e5b9ull + 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
    }
    double u = (double)(z >> 40) / (double)(1u << 24);
    return u >= p;
}

static int s_concat_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_concat_fwd(s, a->op->n_inputs, a->x, a->y, err);
}

static int s_concat_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    /* An input without gradient is skipped through a tensor whose data is
     * NULL: the kernel still needs its width. */
    int n = a->op->n_inputs;
    gpp_tensor_t *dxs[n], skip[n];
    for (int k = 0; k < n; k++) {
        dxs[k] = a->dx[k];
        if (!dxs[k]) {
            skip[k] = gpp_tensor(NULL, GPP_DTYPE_F32, a->x[k]->n, a->x[k]->rows, a->x[k]->cols);
            dxs[k] = &skip[k];
        }
    }
    return gpp_concat_bwd(s, n, a->dy, dxs, err);
}

static int s_slice_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_slice_fwd(s, a->x[0], a->op->start, a->y, err);
}

static int s_slice_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_slice_bwd(s, a->dy, a->op->start, a->dx[0], err);
}

static int s_reshape_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_reshape_fwd(s, a->x[0], a->y, err);
}

static int s_reshape_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_reshape_bwd(s, a->dy, a->dx[0], err);
}

static int s_add_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_add_fwd(s, a->x[0], a->x[1], a->y, err);
}

static int s_add_b(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_add_bwd(s, a->dy, a->dx[0], a->dx[1], err);
}

static int s_loss_mse_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_loss_mse(s, a->x[0], a->target, a->loss, a->grad_scale, a->dx[0], err);
}

static int s_loss_ce_f(gpp_stream_t *s, const gpp_op_args_t *a, gpp_err_t *err)
{
    return gpp_loss_ce(s, a->x[0], a->target, a->loss, a->grad_scale, a->dx[0], err);
}

const gpp_op_kernel_t gpp_op_kernels[] = {
    [GPP_OP_INPUT] = {NULL, NULL}, /* the executor loads data */
    [GPP_OP_LINEAR] = {s_linear_f, s_linear_b},
    [GPP_OP_RELU] = {s_relu_f, s_relu_b},
    [GPP_OP_GELU] = {s_gelu_f, s_gelu_b},
    [GPP_OP_LAYERNORM] = {s_layernorm_f, s_layernorm_b},
    [GPP_OP_ATTENTION] = {s_attention_f, s_attention_b},
    [GPP_OP_EMBEDDING_BAG] = {s_embedding_bag_f, s_embedding_bag_b},
    [GPP_OP_CONCAT] = {s_concat_f, s_concat_b},
    [GPP_OP_ADD] = {s_add_f, s_add_b},
    [GPP_OP_LOSS_MSE] = {s_loss_mse_f, NULL}, /* the forward computes dx */
    [GPP_OP_LOSS_CE] = {s_loss_ce_f, NULL},
    [GPP_OP_SLICE] = {s_slice_f, s_slice_b},
    [GPP_OP_RESHAPE] = {s_reshape_f, s_reshape_b},
    [GPP_OP_OPAQUE] = {NULL, NULL}, /* costs only */
    [GPP_OP_EMBEDDING] = {s_ext_f, s_ext_b},
    [GPP_OP_PARAM_ADD] = {s_ext_f, s_ext_b},
    [GPP_OP_REDUCE] = {s_ext_f, s_ext_b},
    [GPP_OP_SIGMOID] = {s_ext_f, s_ext_b},
    [GPP_OP_TANH] = {s_ext_f, s_ext_b},
    [GPP_OP_DROPOUT] = {s_ext_f, s_ext_b},
    [GPP_OP_MATMUL] = {s_ext_f, s_ext_b},
    [GPP_OP_TRANSPOSE] = {s_ext_f, s_ext_b},
    [GPP_OP_STACK] = {s_ext_f, s_ext_b},
    [GPP_OP_TRIU] = {s_ext_f, s_ext_b},
    [GPP_OP_PATCH_EMBED] = {s_ext_f, s_ext_b},
    [GPP_OP_CROSS_ATTENTION] = {s_ext_f, s_ext_b},
    [GPP_OP_LOSS_BCE] = {s_ext_f, NULL}, /* the forward computes dx */
};
_Static_assert(sizeof gpp_op_kernels / sizeof gpp_op_kernels[0] == GPP_OP__COUNT,
               "gpp_op_kernels: one entry per gpp_op_type_t");
