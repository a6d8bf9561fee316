/* gpp_exec_pass: a stage's forward and backward of one micro-batch, run
 * eagerly: ops in ascending id order forward and in reverse backward,
 * activations freed after their last reader, gradients after their op's
 * backward, stashes after the backward; gradients from several consumers
 * meet in the producer slot's buffer because every backward kernel
 * accumulates (+=). The split backward (zero-bubble B and W) runs the same
 * ops' input parts in reverse, then their parameter parts; the micro-batch
 * holds its forward's tensors and W's output gradients from B to W.
 * gpp_exec.c's entry points and gpp_exec_graph.c's recordings run these. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec_impl.h"
#include "kernels/gpp_ops.h"
#include "model/gpp_optable.h"

void gpp_exec_mb_arrays(const gpp_exec_t *self, exec_mb_t *x)
{
    x->act = gpp_xcalloc((size_t)self->n_slots, sizeof *x->act);
    x->grad = gpp_xcalloc((size_t)self->n_slots, sizeof *x->grad);
    x->filled = gpp_xcalloc((size_t)self->n_slots, sizeof *x->filled);
    x->got_grad = gpp_xcalloc((size_t)self->n_slots, sizeof *x->got_grad);
    x->stash = gpp_xcalloc((size_t)self->n_local + 1, sizeof *x->stash);
    x->stash_bytes = gpp_xcalloc((size_t)self->n_local + 1, sizeof *x->stash_bytes);
    x->wpend = gpp_xcalloc((size_t)self->n_local + 1, sizeof *x->wpend);
    x->wstash = gpp_xcalloc((size_t)self->n_local + 1, sizeof *x->wstash);
    x->wstash_bytes = gpp_xcalloc((size_t)self->n_local + 1, sizeof *x->wstash_bytes);
}

void gpp_exec_mb_arrays_free(exec_mb_t *x)
{
    free(x->act);
    free(x->grad);
    free(x->filled);
    free(x->got_grad);
    free(x->stash);
    free(x->stash_bytes);
    free(x->wpend);
    free(x->wstash);
    free(x->wstash_bytes);
    x->wpend = NULL;
    x->wstash = NULL;
    x->wstash_bytes = NULL;
    x->act = x->grad = NULL;
    x->filled = NULL;
    x->got_grad = NULL;
    x->stash = NULL;
    x->stash_bytes = NULL;
}

void gpp_exec_mb_copy(const gpp_exec_t *self, exec_mb_t *dst, const exec_mb_t *src)
{
    size_t ns = (size_t)self->n_slots, nl = (size_t)self->n_local;
    dst->state = src->state;
    dst->loss_pending = src->loss_pending;
    memcpy(dst->act, src->act, ns * sizeof *dst->act);
    memcpy(dst->grad, src->grad, ns * sizeof *dst->grad);
    memcpy(dst->filled, src->filled, ns * sizeof *dst->filled);
    memcpy(dst->got_grad, src->got_grad, ns * sizeof *dst->got_grad);
    memcpy(dst->stash, src->stash, nl * sizeof *dst->stash);
    memcpy(dst->stash_bytes, src->stash_bytes, nl * sizeof *dst->stash_bytes);
    memcpy(dst->wpend, src->wpend, nl * sizeof *dst->wpend);
    memcpy(dst->wstash, src->wstash, nl * sizeof *dst->wstash);
    memcpy(dst->wstash_bytes, src->wstash_bytes, nl * sizeof *dst->wstash_bytes);
}

void gpp_exec_wstash_release(gpp_exec_t *self, exec_mb_t *mb)
{
    for (int i = 0; i < self->n_local; i++) {
        gpp_exec_block_release(self, &mb->wstash[i], mb->wstash_bytes[i]);
        mb->wpend[i] = 0;
    }
}

/* Zeroed gradient buffer of slot k, taken on first use. */
gpp_tensor_t *gpp_exec_grad_in(gpp_exec_t *self, exec_mb_t *mb, int k, gpp_err_t *err)
{
    gpp_tensor_t *t = &mb->grad[k];
    if (!t->data) {
        if (gpp_exec_tensor_take(self, mb, GPP_BUF_GRAD, &self->slots[k], t, err) < 0)
            return NULL;
        if (t->dtype == GPP_DTYPE_I32) /* a gradient is fp32, or bf16 as its activation */
            t->dtype = GPP_DTYPE_F32;
        if (gpp_stream_zero(self->s, t->data, gpp_tensor_bytes(t), err) < 0)
            return NULL;
    }
    return t;
}

static gpp_tensor_t *s_grad(gpp_exec_t *self, exec_mb_t *mb, int k, gpp_err_t *err)
{
    return gpp_exec_grad_in(self, mb, k, err);
}

/* The kernel arguments of op eo common to forward and backward: its
 * inputs, parameter values and gradients (w, dw: [GPP_OP_MAX_PARAMS]). */
static void s_args(gpp_exec_t *self, exec_mb_t *mb, int i, const gpp_tensor_t **x, gpp_tensor_t *w,
                   gpp_tensor_t *dw, gpp_op_args_t *a)
{
    const exec_op_t *eo = &self->ops[i];
    const exec_param_t *P = &self->params[eo->first_param];
    for (int k = 0; k < eo->op->n_inputs; k++)
        x[k] = &mb->act[eo->in[k]];
    for (int k = 0; k < eo->n_params; k++) {
        w[k] = P[k].value;
        dw[k] = P[k].grad;
        if (P[k].sparse >= 0)
            a->dsparse = self->sgrad[P[k].sparse];
    }
    a->op = eo->op;
    a->x = x;
    a->w = w;
    a->dw = dw;
    a->stash = mb->stash[i];
    a->seed = self->cfg.seed; /* dropout's mask: (seed, sample, op, element) */
    a->sample_lo = mb->sample_lo;
    a->train = !self->eval;
}

/* Linear i and the activation it feeds in one call: the linear's output
 * (z), unless the activation is a ReLU (z never materialised), and the
 * activation's (the memory plan places both at the linear's step). */
static int s_forward_fused(gpp_exec_t *self, exec_mb_t *mb, int i, gpp_err_t *err)
{
    const exec_op_t *eo = &self->ops[i], *ea = &self->ops[eo->fuse_to];
    const gpp_op_t *op = eo->op, *act = ea->op;
    gpp_tensor_t *z = NULL;
    if (act->type == GPP_OP_GELU) {
        z = &mb->act[eo->out];
        if (gpp_exec_tensor_take(self, mb, GPP_BUF_ACT, &self->slots[eo->out], z, err) < 0)
            return -1;
    }
    gpp_tensor_t *y = &mb->act[ea->out];
    if (gpp_exec_tensor_take(self, mb, GPP_BUF_ACT, &self->slots[ea->out], y, err) < 0)
        return -1;
    const exec_param_t *P = &self->params[eo->first_param];
    return gpp_linear_act_fwd(self->s, &mb->act[eo->in[0]], &P[0].value,
                              op->bias ? &P[1].value : NULL, act->type, (gpp_gelu_form_t)act->form,
                              z, y, err);
}

static int s_forward_op(gpp_exec_t *self, exec_mb_t *mb, int i, gpp_err_t *err)
{
    exec_op_t *eo = &self->ops[i];
    const gpp_op_t *op = eo->op;
    int64_t n = mb->n;
    gpp_tensor_t *y = &mb->act[eo->out];
    if (eo->fused) /* its linear's call computed it */
        return 0;
    if (eo->fuse_to >= 0)
        return s_forward_fused(self, mb, i, err);
    /* a loss has no output tensor: its value goes to loss_dev */
    if (eo->loss < 0 && gpp_exec_tensor_take(self, mb, GPP_BUF_ACT, &self->slots[eo->out], y, err) < 0)
        return -1;
    if (op->type == GPP_OP_INPUT) /* the data source, not a kernel */
        return gpp_exec_load(self, mb, op->id, y, err);
    if (eo->kernel_stash_bytes) {
        mb->stash_bytes[i] = (size_t)(n * eo->kernel_stash_bytes);
        if (!(mb->stash[i] =
                  gpp_exec_block_take(self, mb, GPP_BUF_STASH, op->id, mb->stash_bytes[i], err)))
            return -1;
    }
    const gpp_tensor_t *x[op->n_inputs];
    gpp_tensor_t *dx[op->n_inputs];
    gpp_tensor_t w[GPP_OP_MAX_PARAMS], dw[GPP_OP_MAX_PARAMS];
    gpp_op_args_t a = {.y = eo->loss < 0 ? y : NULL};
    s_args(self, mb, i, x, w, dw, &a);
    if (eo->loss < 0)
        return gpp_op_kernels[op->type].fwd(self->s, &a, err);
    /* a loss: labels from the data source; its input's gradient now */
    gpp_dtype_t dt;
    int64_t r, c;
    gpp_data_shape_label(self->g, op->id, &dt, &r, &c);
    gpp_tensor_t lab = gpp_tensor(NULL, dt, n, r, c);
    if (!(lab.data = gpp_exec_block_take(self, mb, GPP_BUF_LABEL, op->id, gpp_tensor_bytes(&lab),
                                         err)))
        return -1;
    int rc = gpp_exec_load(self, mb, op->id, &lab, err);
    dx[0] = NULL;
    if (rc == 0 && self->slots[eo->in[0]].needs_grad && !(dx[0] = s_grad(self, mb, eo->in[0], err)))
        rc = -1;
    a.dx = dx;
    a.target = &lab;
    a.loss = mb->loss_dev + eo->loss;
    a.grad_scale = (float)((double)n / (double)self->cfg.batch);
    if (rc == 0)
        rc = gpp_op_kernels[op->type].fwd(self->s, &a, err);
    if (rc == 0 && !self->capture_on) /* a graph's loss is copied after its launch */
        rc = gpp_stream_copy(self->s, mb->loss_host + eo->loss, a.loss, 4, GPP_COPY_D2H, err);
    gpp_exec_block_release(self, &lab.data, gpp_tensor_bytes(&lab));
    return rc;
}

/* ---- the per-op timing hook ----
 * Timed events on the executor's stream: one before the first op and one
 * after each op, so an op's time is the device time from the end of the op
 * before it to its own end (its kernels, plus any wait for the host to
 * launch them, as in training); nothing synchronises between ops. The host
 * clock would time the launch on an asynchronous device. */
static int s_timing_events(gpp_exec_t *self, gpp_err_t *err)
{
    if (self->tev)
        return 0;
    gpp_event_t **ev = gpp_xcalloc((size_t)self->n_local + 1, sizeof *ev);
    for (int i = 0; i <= self->n_local; i++)
        if (!(ev[i] = gpp_event_new_timed(self->be, err))) {
            while (i-- > 0)
                gpp_event_destroy(&ev[i]);
            free(ev);
            return gpp_err_prefix(err, "executor: timing events");
        }
    self->tev = ev;
    return 0;
}

/* Adds the time between events a and b (recorded on the stream) to *acc. */
static int s_timing_add(gpp_exec_t *self, int a, int b, double *acc, gpp_err_t *err)
{
    double ms = 0;
    if (gpp_event_elapsed_ms(self->tev[a], self->tev[b], &ms, err) < 0)
        return gpp_err_prefix(err, "executor: op timing");
    *acc += ms;
    return 0;
}

int gpp_exec_forward_run(gpp_exec_t *self, int m, gpp_err_t *err)
{
    exec_mb_t *mb = &self->mb[m];
    for (int i = 0; i < self->n_inputs; i++) {
        int p = self->inputs[i], k = self->slot_of[p];
        /* data produced elsewhere: regenerate rather than receive */
        if (mb->filled[k] == 0 && mb->n > 0 && self->g->ops[p].type == GPP_OP_INPUT &&
            gpp_exec_load(self, mb, p, &mb->act[k], err) < 0)
            return -1;
    }
    /* An empty shard (a data-parallel replica with no samples of this
     * micro-batch) runs nothing; its outputs and gradients are empty. */
    int timed = self->timing && mb->n > 0 && self->n_local > 0;
    if (timed &&
        (s_timing_events(self, err) < 0 || gpp_event_record(self->tev[0], self->s, err) < 0))
        goto fail;
    for (int i = 0; i < self->n_local && mb->n > 0; i++) {
        if (s_forward_op(self, mb, i, err) < 0) {
            gpp_err_prefix(err, "forward of op %d '%s'", self->ops[i].op->id,
                           self->ops[i].op->name);
            goto fail;
        }
        if (timed && gpp_event_record(self->tev[i + 1], self->s, err) < 0)
            goto fail;
        /* inputs no backward reads and nobody sends die with their last
           reader (stream-ordered: later work on the stream may write there) */
        for (int k = 0; k < self->ops[i].op->n_inputs; k++) {
            int in = self->ops[i].in[k];
            if (!self->slots[in].keep && self->slots[in].last_use == i)
                gpp_exec_tensor_release(self, &mb->act[in]);
        }
    }
    /* Keep only what the backward reads or the caller may send. */
    for (int k = 0; k < self->n_slots; k++) {
        if (!self->slots[k].keep)
            gpp_exec_tensor_release(self, &mb->act[k]);
        else if (mb->n == 0 && self->slots[k].local)
            mb->act[k] =
                gpp_tensor(NULL, self->slots[k].dtype, 0, self->slots[k].rows, self->slots[k].cols);
    }
    for (int i = 0; timed && i < self->n_local; i++) {
        if (s_timing_add(self, i, i + 1, &self->ops[i].fwd_ms, err) < 0)
            goto fail;
        self->ops[i].calls++;
    }
    mb->loss_pending = self->n_loss > 0 && mb->n > 0;
    mb->state = MB_FORWARD;
    gpp_exec_ahead_flush(self);
    return 0;
fail:
    return -1;
}

/* Input gradient pointer for input k of op eo: NULL when no gradient flows. */
static int s_dx(gpp_exec_t *self, exec_mb_t *mb, const exec_op_t *eo, int k, gpp_tensor_t **dx,
                gpp_err_t *err)
{
    *dx = NULL;
    if (!self->slots[eo->in[k]].needs_grad)
        return 0;
    *dx = s_grad(self, mb, eo->in[k], err);
    return *dx ? 0 : -1;
}

/* 1 when op i's backward has a W part (parameters, gpp_op_bwd's rule) that
 * runs for mb: a gradient reached its output. */
static int s_has_w(const gpp_exec_t *self, const exec_mb_t *mb, int i)
{
    const exec_op_t *eo = &self->ops[i];
    return eo->op->params > 0 && gpp_optable[eo->op->type].role == GPP_ROLE_LAYER &&
           gpp_op_kernels[eo->op->type].bwd && mb->grad[eo->out].data;
}

/* Part `part` of op i's backward. B (IN) of an op with a W part first takes
 * its W stash; W writes no input gradient. */
static int s_backward_op(gpp_exec_t *self, exec_mb_t *mb, int i, gpp_bwd_part_t part,
                         gpp_err_t *err)
{
    exec_op_t *eo = &self->ops[i];
    const gpp_op_t *op = eo->op;
    const gpp_tensor_t *dy = &mb->grad[eo->out];
    if (gpp_optable[op->type].role != GPP_ROLE_LAYER || !dy->data)
        return 0; /* data; losses ran with the forward; no gradient reached this op */
    const gpp_tensor_t *x[op->n_inputs];
    gpp_tensor_t *dx[op->n_inputs];
    gpp_tensor_t w[GPP_OP_MAX_PARAMS], dw[GPP_OP_MAX_PARAMS];
    gpp_op_args_t a = {.part = part};
    s_args(self, mb, i, x, w, dw, &a);
    for (int k = 0; k < op->n_inputs; k++)
        if (part == GPP_BWD_W)
            dx[k] = NULL;
        else if (s_dx(self, mb, eo, k, &dx[k], err) < 0)
            return -1;
    if (eo->bwd_reads_out) /* a fused ReLU: y > 0 exactly where its input was */
        x[0] = &mb->act[eo->out];
    if (part == GPP_BWD_IN && s_has_w(self, mb, i)) {
        int64_t wb = gpp_op_wstash_bytes(self->g, op) * mb->n;
        if (wb > 0 && !mb->wstash[i]) {
            mb->wstash_bytes[i] = (size_t)wb;
            if (!(mb->wstash[i] = gpp_exec_block_take(self, mb, GPP_BUF_WSTASH, op->id,
                                                      mb->wstash_bytes[i], err)))
                return -1;
        }
        mb->wpend[i] = 1;
    }
    a.dx = dx;
    a.dy = dy;
    a.wstash = mb->wstash[i];
    return gpp_op_bwd(self->s, &a, err);
}

/* The end of a backward (the whole one, or W): every boundary input that
 * takes a gradient has one (zero if nothing reached it: the caller sends
 * it); everything else the slot holds is freed. */
static int s_backward_end(gpp_exec_t *self, exec_mb_t *mb, gpp_err_t *err)
{
    for (int k = 0; k < self->n_slots; k++) {
        const exec_slot_t *sl = &self->slots[k];
        if (!sl->local && sl->needs_grad) {
            if (!s_grad(self, mb, k, err))
                return -1;
        } else {
            gpp_exec_tensor_release(self, &mb->grad[k]);
        }
        gpp_exec_tensor_release(self, &mb->act[k]);
    }
    for (int i = 0; i < self->n_local; i++)
        gpp_exec_block_release(self, &mb->stash[i], mb->stash_bytes[i]);
    gpp_exec_wstash_release(self, mb);
    mb->state = MB_BACKWARD;
    return 0;
}

/* The end of a B: the boundary input gradients as at the end of a whole
 * backward. Until W the micro-batch keeps what it held between F and B
 * (activations, kernel stashes: what W reads among them, and the rest as
 * the memory model walks it, gpp_zb_stage_mem) and, for each op whose W is
 * pending, its output gradient and W stash; other gradients are freed. */
static int s_backward_in_end(gpp_exec_t *self, exec_mb_t *mb, gpp_err_t *err)
{
    char *wdy = gpp_xcalloc((size_t)self->n_slots + 1, 1); /* a pending W reads its gradient */
    for (int i = 0; i < self->n_local; i++)
        if (mb->wpend[i])
            wdy[self->ops[i].out] = 1;
    int rc = 0;
    for (int k = 0; k < self->n_slots && rc == 0; k++) {
        const exec_slot_t *sl = &self->slots[k];
        if (!sl->local && sl->needs_grad) {
            if (!s_grad(self, mb, k, err))
                rc = -1;
        } else if (!wdy[k]) {
            gpp_exec_tensor_release(self, &mb->grad[k]);
        }
    }
    free(wdy);
    if (rc == 0)
        mb->state = MB_BWD_IN;
    return rc;
}

int gpp_exec_backward_part_run(gpp_exec_t *self, int m, gpp_bwd_part_t part, gpp_err_t *err)
{
    exec_mb_t *mb = &self->mb[m];
    /* timing: op i runs from event i + 1 to event i (the ops go backwards);
       B and W both add to the op's backward time */
    int timed = self->timing && mb->n > 0 && self->n_local > 0;
    if (timed && (s_timing_events(self, err) < 0 ||
                  gpp_event_record(self->tev[self->n_local], self->s, err) < 0))
        return -1;
    for (int i = self->n_local - 1; i >= 0 && mb->n > 0; i--) {
        if ((part != GPP_BWD_W || mb->wpend[i]) && s_backward_op(self, mb, i, part, err) < 0) {
            gpp_err_prefix(err, "%s of op %d '%s'",
                           part == GPP_BWD_ALL  ? "backward"
                           : part == GPP_BWD_IN ? "B pass (input gradients)"
                                                : "W pass (parameter gradients)",
                           self->ops[i].op->id, self->ops[i].op->name);
            return -1;
        }
        if (timed && gpp_event_record(self->tev[i], self->s, err) < 0)
            return -1;
        /* its output's gradient has been read: every consumer came first
           (a pending W reads it again) */
        if (part == GPP_BWD_ALL || (part == GPP_BWD_IN && !mb->wpend[i]))
            gpp_exec_tensor_release(self, &mb->grad[self->ops[i].out]);
    }
    for (int i = 0; timed && i < self->n_local; i++)
        if (s_timing_add(self, i + 1, i, &self->ops[i].bwd_ms, err) < 0)
            return -1;
    if (part == GPP_BWD_IN)
        return s_backward_in_end(self, mb, err);
    return s_backward_end(self, mb, err);
}

int gpp_exec_backward_run(gpp_exec_t *self, int m, gpp_err_t *err)
{
    return gpp_exec_backward_part_run(self, m, GPP_BWD_ALL, err);
}
