/* gpp_exec_graph: the executor's CUDA graphs (docs/gpu.md "CUDA graphs").
 *
 * A launch costs the host about as much as one of these models' small
 * products takes on the device, so a stage whose kernels are launched one
 * by one leaves the GPU waiting on the host. A recording (gpp_stream_capture
 * _begin/_end) replays the same kernels on the same pointers with one
 * launch.
 *
 * With cfg.graphs, each forward and each backward of each micro-batch slot
 * is one recording: the pipeline's FWD and BWD actions ([job] cuda_graphs),
 * gpp_exec_run's (gpp-train --cuda-graphs: a slot per micro-batch of the
 * mini-batch). An iteration (the calls up to gpp_exec_step) makes the same
 * executor calls in the same order every time (the plan's schedule,
 * gpp-train's micro-batches), and the recordings rely on that. Every
 * address a pass uses is fixed by the stage's memory plan (gpp_exec_mem.c):
 * a slot's tensors sit in the lane it took, the transients in the shared
 * scratch, the workspace and the feeds at their own offsets; so a
 * recording stays valid as long as its slot takes the same lane with the
 * same samples.
 * - PG_WARM: the first iteration runs eagerly (the kernels' first calls
 *   set up what a capture may not).
 * - PG_CAPTURE: one iteration records each pass and launches the recording.
 *   The data a pass loads (an INPUT's samples, a loss's labels) goes first
 *   into the plan's feed buffer of the op, outside the recording, which
 *   copies it from there. Kept: the slot's lane and samples, and the host
 *   state after each pass (its tensors, stashes).
 * - PG_REPLAY: a pass loads its feeds, launches its recording and takes the
 *   host state recorded after it. Since the calls come in the recorded order
 *   on one stream, each buffer holds at each point what it held there while
 *   recording.
 * Embedding tables' sparse gradients are accumulated on the device alone; a
 * backward's recording also keeps their blocks and the host's bound of
 * their count, which each replay advances as the recording did.
 * Anything the recording did not make (another size or lane, a slot it did
 * not record, a moved sparse gradient) leaves for good: the stage runs
 * eagerly from there on the same memory, with the same results. A capture
 * the backend refuses undoes the pass's host state (nothing ran) and the
 * pass runs eagerly. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec_impl.h"
#include "model/gpp_optable.h"

/* ---- feeds: what a recorded pass loads ---- */

/* The shape of what op loads for n samples (an INPUT op's data, a loss's
 * labels); 0 when it loads nothing. */
static int s_load_shape(const gpp_exec_t *self, int op, int64_t n, gpp_tensor_t *t)
{
    const gpp_op_t *o = &self->g->ops[op];
    if (o->type == GPP_OP_INPUT) {
        const exec_slot_t *sl = &self->slots[self->slot_of[op]];
        *t = gpp_tensor(NULL, sl->dtype, n, sl->rows, sl->cols);
        return 1;
    }
    if (gpp_optable[o->type].role != GPP_ROLE_LOSS)
        return 0;
    gpp_dtype_t dt;
    int64_t r, c;
    gpp_data_shape_label(self->g, op, &dt, &r, &c);
    *t = gpp_tensor(NULL, dt, n, r, c);
    return 1;
}

/* Loads op's samples of mb into its feed buffer in the memory plan: a
 * recording reads it there. 1: loaded, 0: the plan has no feed that holds
 * them, -1: error. */
static int s_feed_op(gpp_exec_t *self, exec_mb_t *mb, int op, gpp_err_t *err)
{
    gpp_tensor_t t;
    if (!s_load_shape(self, op, mb->n, &t))
        return 1;
    int64_t cap = 0, at = gpp_memplan_data_at(self->plan, op, -1, &cap);
    if (at < 0 || cap < (int64_t)gpp_tensor_bytes(&t))
        return 0;
    t.data = (char *)self->arena + at;
    return gpp_exec_load(self, mb, op, &t, err) < 0 ? -1 : 1;
}

/* Loads the data the micro-batch's forward reads into the feed buffers, in
 * the order the eager forward loads it: the data inputs it regenerates,
 * then its INPUT ops and losses. Same return as s_feed_op. */
static int s_feed(gpp_exec_t *self, exec_mb_t *mb, gpp_err_t *err)
{
    for (int i = 0; i < self->n_inputs; i++) {
        int p = self->inputs[i], k = self->slot_of[p];
        if (mb->filled[k] == 0 && mb->n > 0 && self->g->ops[p].type == GPP_OP_INPUT) {
            int rc = s_feed_op(self, mb, p, err);
            if (rc <= 0)
                return rc;
        }
    }
    for (int i = 0; i < self->n_local; i++) {
        int rc = s_feed_op(self, mb, self->ops[i].op->id, err);
        if (rc <= 0)
            return rc;
    }
    return 1;
}

/* ---- passes ---- */

static int s_pg_on(const gpp_exec_t *self)
{
    return self->pg == PG_WARM || self->pg == PG_CAPTURE || self->pg == PG_REPLAY;
}

static void s_pass_clear(exec_pass_t *P)
{
    gpp_replay_destroy(&P->fwd);
    gpp_replay_destroy(&P->bwd);
    P->n = -1;
    P->has_fwd = P->has_bwd = 0;
    P->live_fwd = P->live_bwd = 0;
}

/* Slot m's record, made (empty) on first use. */
static exec_pass_t *s_pass(gpp_exec_t *self, int m)
{
    if (m >= self->n_pass) {
        int n = m + 1;
        self->pass = gpp_xrealloc(self->pass, (size_t)n * sizeof *self->pass);
        for (int i = self->n_pass; i < n; i++) {
            exec_pass_t *P = &self->pass[i];
            memset(P, 0, sizeof *P);
            P->n = -1;
            P->lane = -1;
            P->regen = gpp_xcalloc((size_t)self->n_slots, 1);
            P->sbound = gpp_xcalloc((size_t)(2 * self->n_sparse + 1), sizeof *P->sbound);
            P->sblk = gpp_xcalloc((size_t)(2 * self->n_sparse + 1), sizeof *P->sblk);
            gpp_exec_mb_arrays(self, &P->after_fwd);
            gpp_exec_mb_arrays(self, &P->after_bwd);
        }
        self->n_pass = n;
    }
    return &self->pass[m];
}

static void s_passes_free(gpp_exec_t *self)
{
    for (int i = 0; i < self->n_pass; i++) {
        exec_pass_t *P = &self->pass[i];
        s_pass_clear(P);
        free(P->regen);
        free(P->sbound);
        free(P->sblk);
        gpp_exec_mb_arrays_free(&P->after_fwd);
        gpp_exec_mb_arrays_free(&P->after_bwd);
    }
    free(self->pass);
    self->pass = NULL;
    self->n_pass = 0;
}

static void s_off(gpp_exec_t *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_off(gpp_exec_t *self, const char *fmt, ...)
{
    char why[GPP_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    gpp_exec_pg_leave(self, why);
}

void gpp_exec_pg_leave(gpp_exec_t *self, const char *why)
{
    if (!s_pg_on(self))
        return;
    gpp_stream_sync(self->s, NULL); /* recordings may still be running */
    s_passes_free(self);
    self->pg = PG_OFF;
    if (why) {
        snprintf(self->graphs_why, sizeof self->graphs_why, "%s", why);
        self->graphs_off = self->graphs_why;
    }
}

void gpp_exec_pg_begin(gpp_exec_t *self, int m, int64_t n)
{
    if (self->timing || self->eval) /* evaluation never starts a warm-up */
        return;
    if (self->pg == PG_IDLE) { /* the first pass-by-pass micro-batch: warm up */
        self->pg = PG_WARM;
        return;
    }
    int lane = self->mb[m].lane;
    if (self->pg == PG_CAPTURE) {
        exec_pass_t *P = s_pass(self, m);
        s_pass_clear(P);
        P->n = n;
        P->lane = lane;
        return;
    }
    if (self->pg != PG_REPLAY)
        return;
    exec_pass_t *P = m < self->n_pass ? &self->pass[m] : NULL;
    if (!P || P->n != n || P->lane != lane || !P->has_fwd || !P->has_bwd)
        s_off(self,
              "micro-batch slot %d of %lld samples in lane %d was not recorded (recorded: %lld "
              "samples in lane %d)",
              m, (long long)n, lane, (long long)(P ? P->n : -1), P ? P->lane : -1);
}

/* The loss values on their way to the host and the next micro-batch's data
 * on its way to the device, after a forward's launch (inside the recording
 * both waited). */
static int s_after_launch(gpp_exec_t *self, exec_mb_t *mb, gpp_err_t *err)
{
    if (self->n_loss && gpp_stream_copy(self->s, mb->loss_host, mb->loss_dev,
                                        (size_t)self->n_loss * 4, GPP_COPY_D2H, err) < 0)
        return -1;
    gpp_exec_ahead_flush(self);
    return 0;
}

/* ---- embedding gradients: host state a backward changes ----
 * A backward accumulates into the sparse gradients on the device alone,
 * and raises each one's host bound (gpp_sparse_grad_bound) by its pairs. A
 * recording keeps the gradient's blocks: it may only be made where the
 * blocks have room, and replayed while they have not moved and the bound
 * is where it was. */

/* 1 when the backward of mb fits every sparse gradient's blocks */
static int s_sparse_fits(gpp_exec_t *self, const exec_mb_t *mb, int *which)
{
    for (int i = 0; i < self->n_local; i++) {
        const exec_op_t *eo = &self->ops[i];
        const exec_param_t *P = &self->params[eo->first_param];
        for (int k = 0; k < eo->n_params; k++) {
            if (P[k].sparse < 0)
                continue;
            int64_t pairs = gpp_tensor_numel(&mb->act[eo->in[0]]);
            if (pairs > gpp_sparse_grad_room(self->sgrad[P[k].sparse])) {
                *which = P[k].sparse;
                return 0;
            }
        }
    }
    return 1;
}

/* Keeps the sparse gradients' bounds and blocks (after: 0 before the pass,
 * 1 after it) */
static void s_sparse_note(gpp_exec_t *self, exec_pass_t *P, int after)
{
    for (int i = 0; i < self->n_sparse; i++) {
        P->sbound[2 * i + after] = gpp_sparse_grad_bound(self->sgrad[i]);
        if (after) {
            P->sblk[2 * i] = gpp_sparse_grad_rows(self->sgrad[i]);
            P->sblk[2 * i + 1] = gpp_sparse_grad_values(self->sgrad[i]);
        }
    }
}

/* -1 when the sparse gradients are as the recording of P's backward found
 * them, else the one that is not */
static int s_sparse_moved(const gpp_exec_t *self, const exec_pass_t *P)
{
    for (int i = 0; i < self->n_sparse; i++) {
        const gpp_sparse_grad_t *g = self->sgrad[i];
        if (gpp_sparse_grad_bound(g) != P->sbound[2 * i] ||
            (const void *)gpp_sparse_grad_rows(g) != P->sblk[2 * i] ||
            (const void *)gpp_sparse_grad_values(g) != P->sblk[2 * i + 1])
            return i;
    }
    return -1;
}

/* Records slot m's pass into *r (nothing runs): 1, or 0 when the backend
 * refused a call (the host state is as it was before, graphs_why says
 * why), or -1 on an error outside the recording. */
static int s_capture(gpp_exec_t *self, int m, int fwd, gpp_replay_t **r)
{
    exec_mb_t *mb = &self->mb[m], undo = {0};
    gpp_exec_mb_arrays(self, &undo);
    gpp_exec_mb_copy(self, &undo, mb);
    int64_t live = self->live_bytes, peak = self->peak_bytes;
    gpp_err_t cerr = {{0}}, ignored = {{0}};
    self->capture_on = 1;
    int rc = gpp_stream_capture_begin(self->s, &cerr);
    if (rc == 0) {
        rc = fwd ? gpp_exec_forward_run(self, m, &cerr) : gpp_exec_backward_run(self, m, &cerr);
        if (gpp_stream_capture_end(self->s, r, rc == 0 ? &cerr : &ignored) < 0)
            rc = -1;
    }
    self->capture_on = 0;
    if (rc < 0) { /* nothing ran: the host state as it was */
        gpp_exec_mb_copy(self, mb, &undo);
        self->live_bytes = live;
        self->peak_bytes = peak;
        snprintf(self->graphs_why, sizeof self->graphs_why,
                 "the %s of micro-batch slot %d could not be recorded: %s",
                 fwd ? "forward" : "backward", m, cerr.msg);
    }
    gpp_exec_mb_arrays_free(&undo);
    return rc < 0 ? 0 : 1;
}

/* PG_CAPTURE: records the pass and launches the recording (a pass of no
 * samples runs as it is: nothing to record), then keeps the host state. */
static int s_pass_record(gpp_exec_t *self, int m, int fwd, gpp_err_t *err)
{
    exec_mb_t *mb = &self->mb[m];
    exec_pass_t *P = s_pass(self, m);
    if (P->n != mb->n) /* begun before this iteration: not recorded whole */
        return 0;
    int64_t live0 = self->live_bytes;
    gpp_replay_t *r = NULL;
    if (mb->n > 0) {
        if (fwd) {
            for (int i = 0; i < self->n_inputs; i++) {
                int p = self->inputs[i], k = self->slot_of[p];
                P->regen[k] = mb->filled[k] == 0 && self->g->ops[p].type == GPP_OP_INPUT;
            }
            int rc = s_feed(self, mb, err);
            if (rc < 0)
                return -1;
            if (rc == 0) {
                s_off(self, "micro-batch slot %d: the memory plan has no feed for its data", m);
                return 0;
            }
        }
        int sg = -1;
        if (!fwd && !s_sparse_fits(self, mb, &sg)) {
            s_off(self, "embedding gradient %d: the backward of micro-batch slot %d would grow it",
                  sg, m);
            return 0;
        }
        if (!fwd)
            s_sparse_note(self, P, 0);
        if (!s_capture(self, m, fwd, &r)) {
            for (int i = 0; !fwd && i < self->n_sparse; i++) /* nothing ran */
                gpp_sparse_grad_set_bound(self->sgrad[i], P->sbound[2 * i]);
            s_off(self, "%s", self->graphs_why); /* the pass runs eagerly */
            return 0;
        }
        if (!fwd)
            s_sparse_note(self, P, 1);
        if (gpp_replay_launch(r, self->s, err) < 0) {
            gpp_replay_destroy(&r);
            return -1;
        }
        self->captures++;
        if (fwd && s_after_launch(self, mb, err) < 0) {
            gpp_replay_destroy(&r);
            return -1;
        }
    } else if ((fwd ? gpp_exec_forward_run(self, m, err) : gpp_exec_backward_run(self, m, err)) <
               0) {
        return -1;
    }
    gpp_exec_mb_copy(self, fwd ? &P->after_fwd : &P->after_bwd, mb);
    if (fwd) {
        P->fwd = r;
        P->live_fwd = self->live_bytes - live0;
        P->has_fwd = 1;
    } else {
        P->bwd = r;
        P->live_bwd = self->live_bytes - live0;
        P->has_bwd = 1;
    }
    return 1;
}

/* PG_REPLAY: the pass's recording on the slot's recorded blocks. */
static int s_pass_replay(gpp_exec_t *self, int m, int fwd, gpp_err_t *err)
{
    exec_mb_t *mb = &self->mb[m];
    exec_pass_t *P = &self->pass[m]; /* begin checked it */
    if (fwd && mb->n > 0) {
        for (int i = 0; i < self->n_inputs; i++) {
            int p = self->inputs[i], k = self->slot_of[p];
            int regen = mb->filled[k] == 0 && self->g->ops[p].type == GPP_OP_INPUT;
            if (regen != P->regen[k]) {
                s_off(self, "micro-batch slot %d: input op %d was %s when recorded", m, p,
                      P->regen[k] ? "regenerated" : "received");
                return 0;
            }
        }
        int rc = s_feed(self, mb, err);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            s_off(self, "micro-batch slot %d: the memory plan has no feed for its data", m);
            return 0;
        }
    }
    gpp_replay_t *r = fwd ? P->fwd : P->bwd;
    int sg = r && !fwd ? s_sparse_moved(self, P) : -1;
    if (sg >= 0) {
        s_off(self, "embedding gradient %d grew or moved after recording", sg);
        return 0;
    }
    if (r) {
        if (gpp_replay_launch(r, self->s, err) < 0)
            return -1;
        self->replays++;
        for (int i = 0; !fwd && i < self->n_sparse; i++)
            gpp_sparse_grad_set_bound(self->sgrad[i], P->sbound[2 * i + 1]);
    }
    gpp_exec_mb_copy(self, mb, fwd ? &P->after_fwd : &P->after_bwd);
    self->live_bytes += fwd ? P->live_fwd : P->live_bwd;
    if (self->live_bytes > self->peak_bytes)
        self->peak_bytes = self->live_bytes;
    return fwd && r && s_after_launch(self, mb, err) < 0 ? -1 : 1;
}

int gpp_exec_pg_pass(gpp_exec_t *self, int m, int fwd, gpp_err_t *err)
{
    if (self->pg == PG_CAPTURE)
        return s_pass_record(self, m, fwd, err);
    if (self->pg == PG_REPLAY)
        return s_pass_replay(self, m, fwd, err);
    return 0;
}

void gpp_exec_pg_step(gpp_exec_t *self)
{
    if (self->pg == PG_WARM) {
        self->pg = PG_CAPTURE;
    } else if (self->pg == PG_CAPTURE) {
        for (int m = 0; m < self->n_pass; m++) {
            const exec_pass_t *P = &self->pass[m];
            if (P->n >= 0 && !(P->has_fwd && P->has_bwd)) {
                s_off(self, "micro-batch slot %d's passes were not recorded in one iteration", m);
                return;
            }
        }
        self->pg = PG_REPLAY;
    }
}

void gpp_exec_graphs_free(gpp_exec_t *self)
{
    s_passes_free(self);
}

void gpp_exec_graph_stats(const gpp_exec_t *self, int64_t *captures, int64_t *replays)
{
    assert(self && captures && replays);
    *captures = self->captures;
    *replays = self->replays;
}

const char *gpp_exec_graphs_off(const gpp_exec_t *self)
{
    assert(self);
    return self->graphs_off;
}
