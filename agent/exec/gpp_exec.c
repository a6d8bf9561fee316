/* gpp_exec: the stage executor's construction and entry points (see
 * gpp_exec.h for the contract). Each pass runs eagerly (gpp_exec_pass.c)
 * or as a CUDA graph (gpp_exec_graph.c); memory is the stage's memory plan
 * (gpp_exec_mem.c), data gpp_exec_load.c's.
 *
 * Tensors of a stage live in "slots": one per op of the stage (its output)
 * and one per external producer (a boundary input). A micro-batch holds, per
 * slot, the activation and the activation gradient, plus per op the kernel
 * stash. */
#include "agent/exec/gpp_exec.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec_impl.h"
#include "agent/data/gpp_hash.h"
#include "common/gpp_time.h"
#include "kernels/gpp_ops.h"
#include "model/gpp_optable.h"

#define TAG_PARAM 0x504152

/* ---- construction ---- */

static int s_add_slot(gpp_exec_t *self, const gpp_op_t *prod, int local)
{
    int k = self->n_slots++;
    exec_slot_t *sl = &self->slots[k];
    sl->producer = prod->id;
    sl->local = local;
    sl->needs_grad = gpp_op_has_grad(prod->type);
    sl->dtype = prod->type == GPP_OP_INPUT && prod->input_kind == GPP_INPUT_INDICES ? GPP_DTYPE_I32
                                                                                    : GPP_DTYPE_F32;
    sl->rows = prod->rows;
    sl->cols = prod->cols;
    sl->last_use = -1;
    self->slot_of[prod->id] = k;
    return k;
}

/* Adds one parameter [1, rows, cols] to the op; dense ones get a range of
 * the flat buffers (bound after all are counted). */
static exec_param_t *s_add_param(gpp_exec_t *self, exec_op_t *eo, const gpp_param_t *spec)
{
    exec_param_t *p = &self->params[self->n_params++];
    eo->n_params++;
    snprintf(p->name, sizeof p->name, "%s.%s", eo->op->name, spec->name);
    p->op = eo->op->id;
    p->slot = eo->n_params - 1;
    p->value = gpp_tensor(NULL, GPP_DTYPE_F32, 1, spec->rows, spec->cols);
    p->grad = p->value;
    p->sparse = spec->sparse ? self->n_sparse++ : -1;
    p->offset = spec->sparse ? -1 : self->dense_numel;
    if (!spec->sparse)
        self->dense_numel += spec->rows * spec->cols;
    return p;
}

/* Deterministic initial values of elements [first, first + numel) of
 * parameter slot `k` of its op, initialised as `spec` says, into host h. */
static void s_init_param(const gpp_exec_t *self, const exec_param_t *p, const gpp_param_t *spec,
                         int k, int64_t first, int64_t numel, float *h)
{
    const float *given = gpp_graph_init_weight(self->g, p->op, k); /* an ONNX initializer */
    if (given) {
        memcpy(h, given + first, (size_t)numel * sizeof *h);
        return;
    }
    uint64_t key = gpp_hash_key(self->cfg.seed, TAG_PARAM + (uint64_t)k, (uint64_t)p->op);
    for (int64_t i = 0; i < numel; i++) {
        uint64_t e = (uint64_t)(first + i);
        switch (spec->init) {
        case GPP_INIT_ZERO:
            h[i] = 0.0f;
            break;
        case GPP_INIT_ONE:
            h[i] = 1.0f;
            break;
        case GPP_INIT_UNIFORM:
            h[i] = spec->scale * (2.0f * gpp_hash_uniform(key, e) - 1.0f);
            break;
        case GPP_INIT_NORMAL:
            h[i] = spec->scale * gpp_hash_normal(key, e);
            break;
        }
    }
}

static int s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The stage's memory plan as this backend runs it (its kernel stashes,
 * workspaces, bf16 tensors, allocation rule; the load-ahead and graph
 * feeds when on) and its arena. */
static int s_plan(gpp_exec_t *self, gpp_err_t *err)
{
    const gpp_graph_t *g = self->g;
    const gpp_exec_cfg_t *c = &self->cfg;
    int64_t *ks = gpp_xcalloc((size_t)g->n_ops, sizeof(int64_t));
    int64_t *ob = gpp_xcalloc((size_t)g->n_ops, sizeof(int64_t));
    gpp_work_t *work = gpp_xcalloc((size_t)g->n_ops, sizeof *work);
    for (int i = 0; i < g->n_ops; i++)
        ks[i] = ob[i] = work[i].fixed = -1;
    for (int i = 0; i < self->n_local; i++) { /* the backend's */
        ks[self->ops[i].op->id] = self->ops[i].kernel_stash_bytes;
        work[self->ops[i].op->id] = self->ops[i].work;
    }
    for (int k = 0; k < self->n_slots; k++) { /* the bf16 tensors, received ones too */
        const exec_slot_t *sl = &self->slots[k];
        if (sl->dtype == GPP_DTYPE_BF16)
            ob[sl->producer] = sl->rows * sl->cols * 2;
    }
    gpp_stage_dev_t dev = {.kernel_stash = ks,
                           .work = work,
                           .out_bytes = ob,
                           .alloc_rule = gpp_backend_alloc_rule(self->be),
                           .load_ahead = self->ahead != NULL,
                           .graphs = self->pg == PG_IDLE};
    self->plan_n = c->micro > 0 ? c->micro : c->batch;
    int inflight = c->inflight > 0 ? c->inflight : 1;
    gpp_memplan_cfg_t pc = {
        .optim_bufs =
            c->optim.kind == GPP_OPTIM_ADAMW ? GPP_OPTIM_BUFS_ADAMW : GPP_OPTIM_BUFS_SGD,
        .batch = c->batch,
        .n = self->plan_n,
        .inflight = inflight,
        .slots = c->slots > 0 ? c->slots : (int)(c->batch < INT32_MAX ? c->batch : INT32_MAX),
        .no_fuse = c->no_fuse,
        .split = c->split != 0,
        .dev = &dev};
    int rc = gpp_exec_mem_new(self, &pc, err);
    free(work);
    free(ob);
    free(ks);
    return rc;
}

gpp_exec_t *gpp_exec_new(const gpp_graph_t *g, int n_ops, const int *ops, gpp_backend_t *be,
                         gpp_data_t *data, const gpp_exec_cfg_t *cfg, gpp_err_t *err)
{
    assert(g && g->finalized && be && cfg && (n_ops == 0 || ops));
    if (n_ops < 1)
        return gpp_err_set(err, "executor: a stage needs at least one op"), NULL;
    if (cfg->batch < 1)
        return gpp_err_set(err, "executor: mini-batch size must be >= 1 (got %lld)",
                           (long long)cfg->batch),
               NULL;
    if (cfg->micro < 0 || cfg->inflight < 0 || cfg->slots < 0)
        return gpp_err_set(err,
                           "executor: micro-batch samples, micro-batches in flight and slots "
                           "must be >= 0 (0: the default; got %lld, %d, %d)",
                           (long long)cfg->micro, cfg->inflight, cfg->slots),
               NULL;
    int *ids = gpp_xcalloc((size_t)n_ops, sizeof(int));
    memcpy(ids, ops, (size_t)n_ops * sizeof(int));
    qsort(ids, (size_t)n_ops, sizeof(int), s_cmp_int);
    for (int i = 0; i < n_ops; i++) {
        if (ids[i] < 0 || ids[i] >= g->n_ops) {
            gpp_err_set(err, "executor: op id %d is not in model %s (it has ops 0..%d)", ids[i],
                        g->spec, g->n_ops - 1);
            free(ids);
            return NULL;
        }
        if (i && ids[i] == ids[i - 1]) {
            gpp_err_set(err, "executor: op %d '%s' listed twice in the stage", ids[i],
                        g->ops[ids[i]].name);
            free(ids);
            return NULL;
        }
        if (!gpp_backend_op_supported(be, &g->ops[ids[i]], err)) {
            gpp_err_prefix(err, "executor");
            free(ids);
            return NULL;
        }
        if (gpp_optable[g->ops[ids[i]].type].role == GPP_ROLE_OPAQUE) {
            gpp_err_set(err,
                        "executor: op %d '%s' is opaque (from a profile: costs only); "
                        "train a zoo model or a graph JSON with executable ops",
                        ids[i], g->ops[ids[i]].name);
            free(ids);
            return NULL;
        }
    }
    gpp_exec_t *self = gpp_xcalloc(1, sizeof *self);
    self->g = g;
    self->be = be;
    self->data = data;
    self->cfg = *cfg;
    self->n_local = n_ops;
    self->ops = gpp_xcalloc((size_t)n_ops, sizeof *self->ops);
    self->slot_of = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    for (int i = 0; i < g->n_ops; i++)
        self->slot_of[i] = -1;
    self->slots = gpp_xcalloc((size_t)g->n_ops, sizeof *self->slots);
    self->inputs = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    self->outputs = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    char *in_stage = gpp_xcalloc((size_t)g->n_ops, 1);
    for (int i = 0; i < n_ops; i++)
        in_stage[ids[i]] = 1;
    int64_t max_params = GPP_OP_MAX_PARAMS * (int64_t)n_ops;
    self->params = gpp_xcalloc((size_t)max_params, sizeof *self->params);
    int need_data = 0;

    /* slots: external producers first seen as inputs, then outputs */
    for (int i = 0; i < n_ops; i++) {
        exec_op_t *eo = &self->ops[i];
        eo->op = &g->ops[ids[i]];
        const gpp_op_info_t *T = &gpp_optable[eo->op->type];
        eo->loss = T->role == GPP_ROLE_LOSS ? self->n_loss++ : -1;
        /* the backend's (CUDA's attention cores keep their own layouts) */
        eo->kernel_stash_bytes = gpp_backend_op_kernel_stash(be, g, eo->op);
        eo->work = gpp_backend_op_workspace(be, g, eo->op);
        eo->in = gpp_xcalloc((size_t)eo->op->n_inputs + 1, sizeof(int));
        for (int k = 0; k < eo->op->n_inputs; k++) {
            int p = eo->op->inputs[k];
            if (self->slot_of[p] < 0) {
                assert(!in_stage[p]); /* topological: local producers come first */
                s_add_slot(self, &g->ops[p], 0);
                self->inputs[self->n_inputs++] = p;
                need_data |= g->ops[p].type == GPP_OP_INPUT;
            }
            eo->in[k] = self->slot_of[p];
            self->slots[eo->in[k]].last_use = i;
            if (T->bwd_reads_inputs)
                self->slots[eo->in[k]].keep = 1;
        }
        eo->out = s_add_slot(self, eo->op, 1);
        for (int k = 0; k < eo->op->n_outputs; k++)
            if (!in_stage[eo->op->outputs[k]])
                self->slots[eo->out].boundary_out = 1;
        if (self->slots[eo->out].boundary_out) {
            self->slots[eo->out].keep = 1;
            self->outputs[self->n_outputs++] = eo->op->id;
        }
        need_data |= eo->op->type == GPP_OP_INPUT || eo->loss >= 0;

        /* parameters, as the op table lists them */
        gpp_param_t spec[GPP_OP_MAX_PARAMS];
        int np = gpp_op_params(g, eo->op, spec);
        eo->first_param = self->n_params;
        for (int k = 0; k < np; k++)
            s_add_param(self, eo, &spec[k]);
    }
    /* linear + activation fusion (gpp_op_fused_act; the memory plan lays
       out the same buffers) */
    for (int i = 0; i < n_ops; i++) {
        exec_op_t *eo = &self->ops[i];
        eo->fuse_to = -1;
        int j = cfg->no_fuse ? -1 : gpp_op_fused_act(g, in_stage, eo->op->id);
        if (j < 0)
            continue;
        int *at = bsearch(&j, ids, (size_t)n_ops, sizeof(int), s_cmp_int);
        assert(at);
        exec_op_t *ea = &self->ops[at - ids];
        eo->fuse_to = (int)(at - ids);
        ea->fused = 1;
        if (ea->op->type == GPP_OP_RELU) {
            ea->bwd_reads_out = 1;
            self->slots[eo->out].keep = 0; /* never materialised */
            self->slots[ea->out].keep = 1;
        }
    }
    /* bf16 tensors (gpp_backend_act_bf16): an activation whose producer
       and every reader, in this stage or another, take bf16 on this backend
       is kept in bf16, its gradient too; the stage at the other end of an
       edge decides alike (one backend a job), so what crosses stages is
       bf16 there as well (the pipeline sizes its transfers by it) */
    for (int k = 0; k < self->n_slots; k++) {
        exec_slot_t *sl = &self->slots[k];
        const gpp_op_t *p = &g->ops[sl->producer];
        if (sl->dtype == GPP_DTYPE_F32)
            sl->dtype = gpp_backend_op_out_dtype(be, g, p);
    }
    free(in_stage);
    free(ids);
    if (need_data && !data) {
        gpp_err_set(err, "executor: the stage reads inputs or labels but no data source was "
                         "given");
        goto fail;
    }
    if (!(self->s = gpp_stream_new(be, err)))
        goto fail;
    /* load-ahead: on by default where the data crosses to a device */
    int ahead = cfg->load_ahead ? cfg->load_ahead > 0 : gpp_backend_kind(be) != GPP_DEVICE_CPU;
    if (ahead && data) {
        if (!(self->cs = gpp_stream_new(be, err)))
            goto fail;
        self->ahead = gpp_xcalloc((size_t)self->n_local + 1, sizeof *self->ahead);
        gpp_data_track_init(&self->tr, g->n_ops);
    }
    if (!cfg->graphs)
        self->graphs_off = "not asked for";
    else if (!gpp_backend_can_capture(be))
        self->graphs_off = "the backend cannot capture (CUDA graphs need cuda)";
    else if (cfg->split)
        self->graphs_off = "the stage runs a split backward (zero-bubble B and W passes)";
    self->pg = self->graphs_off ? PG_OFF : PG_IDLE;
    if (s_plan(self, err) < 0)
        goto fail;

    /* parameter storage and deterministic init */
    self->pflat = gpp_backend_alloc(be, (size_t)self->dense_numel * 4, err);
    self->gflat = gpp_backend_alloc(be, (size_t)self->dense_numel * 4, err);
    if (!self->pflat || !self->gflat)
        goto fail;
    if (gpp_stream_zero(self->s, self->gflat, (size_t)self->dense_numel * 4, err) < 0)
        goto fail;
    self->sgrad = gpp_xcalloc((size_t)self->n_sparse + 1, sizeof *self->sgrad);
    self->sstate = gpp_xcalloc((size_t)self->n_sparse + 1, sizeof *self->sstate);
    self->sparse_param = gpp_xcalloc((size_t)self->n_sparse + 1, sizeof(int));
    for (int i = 0; i < self->n_local; i++) {
        exec_op_t *eo = &self->ops[i];
        gpp_param_t spec[GPP_OP_MAX_PARAMS];
        gpp_op_params(g, eo->op, spec);
        for (int k = 0; k < eo->n_params; k++) {
            exec_param_t *p = &self->params[eo->first_param + k];
            int64_t numel = gpp_tensor_numel(&p->value);
            if (p->sparse >= 0) {
                p->value.data = gpp_backend_alloc(be, (size_t)numel * 4, err);
                if (!p->value.data)
                    goto fail;
                p->grad.data = NULL;
                self->sparse_param[p->sparse] = eo->first_param + k;
                /* room for every row a mini-batch touches: it never grows */
                int64_t cap = gpp_op_sparse_cap_rows(g, eo->op, cfg->batch);
                if (!(self->sgrad[p->sparse] =
                          gpp_sparse_grad_new(self->s, p->value.rows, p->value.cols, cap, err)) ||
                    !(self->sstate[p->sparse] =
                          gpp_optim_state_new(self->s, cfg->optim.kind, numel, err)))
                    goto fail;
            } else {
                p->value.data = self->pflat + p->offset;
                p->grad.data = self->gflat + p->offset;
            }
            /* In chunks: a million-row table needs no second copy on the host. */
            const int64_t chunk = (int64_t)1 << 20;
            float *h = gpp_exec_host(self, (size_t)(numel < chunk ? numel : chunk) * 4);
            for (int64_t first = 0; first < numel; first += chunk) {
                int64_t m = numel - first < chunk ? numel - first : chunk;
                s_init_param(self, p, &spec[k], k, first, m, h);
                if (gpp_stream_copy(self->s, gpp_tensor_f32(&p->value) + first, h, (size_t)m * 4,
                                    GPP_COPY_H2D, err) < 0 ||
                    gpp_stream_sync(self->s, err) < 0)
                    goto fail;
            }
        }
    }
    if (self->dense_numel > 0 && !(self->dense_state = gpp_optim_state_new(self->s, cfg->optim.kind,
                                                                           self->dense_numel, err)))
        goto fail;
    if (gpp_stream_sync(self->s, err) < 0)
        goto fail;
    return self;
fail:
    gpp_err_prefix(err, "executor for model %s", g->spec);
    gpp_exec_destroy(&self);
    return NULL;
}

void gpp_exec_destroy(gpp_exec_t **self_p)
{
    assert(self_p);
    gpp_exec_t *self = *self_p;
    if (!self)
        return;
    if (self->s)
        gpp_stream_sync(self->s, NULL);
    gpp_exec_pg_leave(self, NULL);
    for (int m = 0; m < self->n_mb; m++) {
        gpp_exec_release(self, m);
        exec_mb_t *mb = &self->mb[m];
        free(mb->loss_host);
        gpp_exec_mb_arrays_free(mb);
    }
    free(self->mb);
    for (int i = 0; i < self->n_params; i++)
        if (self->params[i].sparse >= 0) /* tables own their memory; dense ones are views */
            gpp_backend_free(self->be, &self->params[i].value.data);
    for (int i = 0; i < self->n_sparse; i++) {
        if (self->sgrad)
            gpp_sparse_grad_destroy(&self->sgrad[i]);
        if (self->sstate)
            gpp_optim_state_destroy(&self->sstate[i]);
    }
    free(self->sgrad);
    free(self->sstate);
    free(self->sparse_param);
    gpp_optim_state_destroy(&self->dense_state);
    gpp_backend_free(self->be, (void **)&self->pflat);
    gpp_backend_free(self->be, (void **)&self->gflat);
    gpp_exec_graphs_free(self);
    gpp_exec_mem_free(self);
    for (int i = 0; self->tev && i <= self->n_local; i++)
        gpp_event_destroy(&self->tev[i]);
    free(self->tev);
    gpp_exec_load_free(self);
    gpp_stream_destroy(&self->s);
    for (int i = 0; i < self->n_local; i++)
        free(self->ops[i].in);
    free(self->ops);
    free(self->slot_of);
    free(self->slots);
    free(self->inputs);
    free(self->outputs);
    free(self->params);
    free(self);
    *self_p = NULL;
}

gpp_stream_t *gpp_exec_stream(gpp_exec_t *self)
{
    assert(self);
    return self->s;
}

const gpp_graph_t *gpp_exec_graph(const gpp_exec_t *self)
{
    assert(self);
    return self->g;
}

int gpp_exec_n_inputs(const gpp_exec_t *self)
{
    return self->n_inputs;
}

int gpp_exec_input_op(const gpp_exec_t *self, int i)
{
    assert(i >= 0 && i < self->n_inputs);
    return self->inputs[i];
}

int gpp_exec_n_outputs(const gpp_exec_t *self)
{
    return self->n_outputs;
}

int gpp_exec_output_op(const gpp_exec_t *self, int i)
{
    assert(i >= 0 && i < self->n_outputs);
    return self->outputs[i];
}

int gpp_exec_has_loss(const gpp_exec_t *self)
{
    return self->n_loss > 0;
}

/* ---- micro-batches ---- */

/* Slot mb, made on first use; NULL + message past the plan's slots. */
static exec_mb_t *s_mb(gpp_exec_t *self, int mb, gpp_err_t *err)
{
    assert(mb >= 0);
    gpp_memplan_sum_t ps;
    gpp_memplan_summary(self->plan, &ps);
    if (mb >= ps.slots)
        return gpp_err_set(err,
                           "executor: micro-batch slot %d: the stage's memory plan has %d "
                           "slots (gpp_exec_cfg_t.slots)",
                           mb, ps.slots),
               NULL;
    if (mb >= self->n_mb) {
        int n = mb + 1;
        self->mb = gpp_xrealloc(self->mb, (size_t)n * sizeof *self->mb);
        memset(self->mb + self->n_mb, 0, (size_t)(n - self->n_mb) * sizeof *self->mb);
        for (int m = self->n_mb; m < n; m++) {
            exec_mb_t *x = &self->mb[m];
            gpp_exec_mb_arrays(self, x);
            x->lane = -1;
            x->loss_host = gpp_xcalloc((size_t)self->n_loss + 1, sizeof(float));
            int64_t at = gpp_memplan_loss_at(self->plan, m);
            x->loss_dev = at < 0 ? NULL : (float *)((char *)self->arena + at);
        }
        self->n_mb = n;
    }
    return &self->mb[mb];
}

static exec_slot_t *s_boundary_slot(gpp_exec_t *self, int op, int want_local)
{
    assert(op >= 0 && op < self->g->n_ops && self->slot_of[op] >= 0);
    exec_slot_t *sl = &self->slots[self->slot_of[op]];
    (void)want_local; /* only read by the assert */
    assert(want_local ? sl->boundary_out : !sl->local);
    return sl;
}

/* Folds a slot's loss values (device -> host copy done) into loss_acc. */
static int s_fold_loss(gpp_exec_t *self, exec_mb_t *mb, gpp_err_t *err)
{
    if (!mb->loss_pending)
        return 0;
    if (gpp_stream_sync(self->s, err) < 0)
        return -1;
    double w = (double)mb->n / (double)self->cfg.batch;
    for (int k = 0; k < self->n_loss; k++)
        self->loss_acc += w * mb->loss_host[k];
    mb->loss_pending = 0;
    return 0;
}

void gpp_exec_release(gpp_exec_t *self, int m)
{
    assert(self && m >= 0);
    if (m >= self->n_mb)
        return;
    exec_mb_t *mb = &self->mb[m];
    for (int k = 0; k < self->n_slots; k++) {
        gpp_exec_tensor_release(self, &mb->act[k]);
        gpp_exec_tensor_release(self, &mb->grad[k]);
        mb->filled[k] = 0;
        mb->got_grad[k] = 0;
    }
    for (int i = 0; i < self->n_local; i++)
        gpp_exec_block_release(self, &mb->stash[i], mb->stash_bytes[i]);
    gpp_exec_wstash_release(self, mb);
    gpp_exec_lane_give(self, mb);
    mb->state = MB_FREE;
}

int gpp_exec_begin(gpp_exec_t *self, int m, int64_t sample_lo, int64_t n, gpp_err_t *err)
{
    assert(self && m >= 0 && n >= 0 && sample_lo >= 0);
    exec_mb_t *mb = s_mb(self, m, err);
    if (!mb)
        return -1;
    if (mb->state == MB_OPEN || mb->state == MB_FORWARD || mb->state == MB_BWD_IN)
        return gpp_err_set(err, "executor: micro-batch slot %d is still in flight (begun, %s)", m,
                           mb->state == MB_BWD_IN ? "its W pass pending" : "no backward yet");
    if (n > self->plan_n)
        return gpp_err_set(err,
                           "executor: micro-batch slot %d of %lld samples: the stage's memory "
                           "plan holds %lld (gpp_exec_cfg_t.micro)",
                           m, (long long)n, (long long)self->plan_n);
    /* the slot's loss values are about to be overwritten */
    if (s_fold_loss(self, mb, err) < 0)
        return -1;
    gpp_exec_release(self, m);
    if (gpp_exec_lane_take(self, mb, m, err) < 0)
        return -1;
    mb->sample_lo = sample_lo;
    mb->n = n;
    mb->state = MB_OPEN;
    gpp_exec_pg_begin(self, m, n);
    /* Buffers for the boundary inputs the caller fills. */
    for (int i = 0; i < self->n_inputs; i++) {
        int k = self->slot_of[self->inputs[i]];
        if (gpp_exec_tensor_take(self, mb, GPP_BUF_ACT, &self->slots[k], &mb->act[k], err) < 0) {
            gpp_exec_release(self, m);
            return -1;
        }
    }
    return 0;
}

gpp_tensor_t *gpp_exec_input(gpp_exec_t *self, int m, int producer)
{
    assert(self && m >= 0 && m < self->n_mb && self->mb[m].state == MB_OPEN);
    s_boundary_slot(self, producer, 0);
    int k = self->slot_of[producer];
    self->mb[m].filled[k] = self->mb[m].n;
    return &self->mb[m].act[k];
}

int gpp_exec_set_input(gpp_exec_t *self, int m, int producer, const gpp_tensor_t *src, int64_t lo,
                       gpp_err_t *err)
{
    assert(self && src && m >= 0);
    const exec_slot_t *sl = s_boundary_slot(self, producer, 0);
    if (m >= self->n_mb || self->mb[m].state != MB_OPEN)
        return gpp_err_set(err, "executor: set_input for micro-batch %d that is not begun", m);
    exec_mb_t *mb = &self->mb[m];
    int k = self->slot_of[producer];
    const gpp_op_t *p = &self->g->ops[producer];
    if (src->dtype != sl->dtype || src->rows != sl->rows || src->cols != sl->cols || lo < 0 ||
        lo + src->n > mb->n)
        return gpp_err_set(err,
                           "executor: input from op %d '%s' for micro-batch %d: got %s "
                           "[%lld, %lld, %lld] at sample %lld, expected %s [.., %lld, %lld] "
                           "within %lld samples",
                           producer, p->name, m, gpp_dtype_name(src->dtype), (long long)src->n,
                           (long long)src->rows, (long long)src->cols, (long long)lo,
                           gpp_dtype_name(sl->dtype), (long long)sl->rows, (long long)sl->cols,
                           (long long)mb->n);
    char *dst =
        (char *)mb->act[k].data + (size_t)(lo * sl->rows * sl->cols) * gpp_dtype_bytes(sl->dtype);
    if (gpp_stream_copy(self->s, dst, src->data, gpp_tensor_bytes(src), GPP_COPY_D2D, err) < 0)
        return -1;
    mb->filled[k] += src->n;
    return 0;
}

int gpp_exec_forward(gpp_exec_t *self, int m, gpp_err_t *err)
{
    assert(self && m >= 0);
    if (m >= self->n_mb || self->mb[m].state != MB_OPEN)
        return gpp_err_set(err,
                           "executor: forward of micro-batch %d that is not begun (or "
                           "already forwarded)",
                           m);
    exec_mb_t *mb = &self->mb[m];
    for (int i = 0; i < self->n_inputs; i++) {
        int p = self->inputs[i], k = self->slot_of[p];
        if (mb->filled[k] == mb->n || (mb->filled[k] == 0 && self->g->ops[p].type == GPP_OP_INPUT))
            continue; /* set, or data the forward regenerates */
        /* the caller may still set it: the micro-batch stays open */
        return gpp_err_set(err,
                           "executor: micro-batch %d: input from op %d '%s' has %lld of "
                           "%lld samples set",
                           m, p, self->g->ops[p].name, (long long)mb->filled[k], (long long)mb->n);
    }
    /* recorded and launched, or replayed, as a CUDA graph (gpp_exec_graph.c) */
    int pg = gpp_exec_pg_pass(self, m, 1, err);
    if (pg == 0)
        pg = gpp_exec_forward_run(self, m, err) < 0 ? -1 : 1;
    if (pg < 0)
        gpp_exec_release(self, m);
    return pg < 0 ? -1 : 0;
}

const gpp_tensor_t *gpp_exec_output(gpp_exec_t *self, int m, int op)
{
    assert(self && m >= 0 && m < self->n_mb && self->mb[m].state == MB_FORWARD);
    s_boundary_slot(self, op, 1);
    return &self->mb[m].act[self->slot_of[op]];
}

int gpp_exec_add_output_grad(gpp_exec_t *self, int m, int op, const gpp_tensor_t *dy, int64_t lo,
                             gpp_err_t *err)
{
    assert(self && dy && m >= 0);
    const exec_slot_t *sl = s_boundary_slot(self, op, 1);
    if (m >= self->n_mb || self->mb[m].state != MB_FORWARD)
        return gpp_err_set(err,
                           "executor: output gradient for micro-batch %d outside its "
                           "forward..backward",
                           m);
    exec_mb_t *mb = &self->mb[m];
    int k = self->slot_of[op];
    if (!sl->needs_grad)
        return 0; /* an INPUT op sent to another stage: data has no gradient */
    gpp_dtype_t gdt = sl->dtype == GPP_DTYPE_BF16 ? GPP_DTYPE_BF16 : GPP_DTYPE_F32;
    if (dy->dtype != gdt || dy->rows != sl->rows || dy->cols != sl->cols || lo < 0 ||
        lo + dy->n > mb->n)
        return gpp_err_set(err,
                           "executor: gradient for op %d '%s' micro-batch %d: got %s [%lld, "
                           "%lld, %lld] at sample %lld, expected %s [.., %lld, %lld] within "
                           "%lld samples",
                           op, self->g->ops[op].name, m, gpp_dtype_name(dy->dtype),
                           (long long)dy->n, (long long)dy->rows, (long long)dy->cols,
                           (long long)lo, gpp_dtype_name(gdt), (long long)sl->rows,
                           (long long)sl->cols, (long long)mb->n);
    if (dy->n == 0) {
        mb->got_grad[k] = 1; /* an empty shard */
        return 0;
    }
    gpp_tensor_t *g = gpp_exec_grad_in(self, mb, k, err);
    if (!g)
        return -1;
    gpp_tensor_t part =
        gpp_tensor((char *)g->data + (size_t)(lo * sl->rows * sl->cols) * gpp_dtype_bytes(gdt), gdt,
                   dy->n, sl->rows, sl->cols);
    if (gpp_axpy(self->s, 1.0f, dy, &part, err) < 0)
        return -1;
    mb->got_grad[k] = 1;
    return 0;
}

/* A backward (or B) of slot m may run: forwarded, every boundary output's
 * gradient received. */
static int s_backward_ready(gpp_exec_t *self, int m, const char *what, gpp_err_t *err)
{
    if (m >= self->n_mb || self->mb[m].state != MB_FORWARD)
        return gpp_err_set(
            err, "executor: %s of micro-batch %d %s", what, m,
            m < self->n_mb && self->mb[m].state == MB_BWD_IN ? "after its B pass (run its W pass)"
            : m < self->n_mb && self->mb[m].state == MB_BACKWARD ? "that already ran its backward"
                                                                 : "without its forward");
    exec_mb_t *mb = &self->mb[m];
    for (int i = 0; i < self->n_outputs; i++) {
        int op = self->outputs[i], k = self->slot_of[op];
        /* an empty shard's outputs have no samples, and no gradient comes
           for them (a plan's lowering sends none) */
        if (self->slots[k].needs_grad && !mb->got_grad[k] && mb->n > 0)
            return gpp_err_set(err,
                               "executor: %s of micro-batch %d: no gradient received "
                               "for output op %d '%s' (consumed by another stage)",
                               what, m, op, self->g->ops[op].name);
    }
    return 0;
}

/* After a whole backward or W: with no input gradient to send, nothing of
 * the micro-batch is left, nor its lane. */
static void s_lane_if_empty(gpp_exec_t *self, exec_mb_t *mb)
{
    int held = 0;
    for (int k = 0; k < self->n_slots && !held; k++)
        held = mb->act[k].data || mb->grad[k].data;
    if (!held)
        gpp_exec_lane_give(self, mb);
}

int gpp_exec_backward(gpp_exec_t *self, int m, gpp_err_t *err)
{
    assert(self && m >= 0);
    if (s_backward_ready(self, m, "backward", err) < 0)
        return -1;
    int pg = gpp_exec_pg_pass(self, m, 0, err);
    if (pg == 0)
        pg = gpp_exec_backward_run(self, m, err) < 0 ? -1 : 1;
    if (pg < 0)
        return -1;
    s_lane_if_empty(self, &self->mb[m]);
    return 0;
}

int gpp_exec_backward_part(gpp_exec_t *self, int m, gpp_bwd_part_t part, gpp_err_t *err)
{
    assert(self && m >= 0);
    if (part == GPP_BWD_ALL)
        return gpp_exec_backward(self, m, err);
    if (part == GPP_BWD_W) {
        if (m >= self->n_mb || self->mb[m].state != MB_BWD_IN)
            return gpp_err_set(err, "executor: W pass of micro-batch %d without its B pass%s", m,
                               m < self->n_mb && self->mb[m].state == MB_BACKWARD
                                   ? " (its W pass already ran)"
                                   : "");
        if (gpp_exec_backward_part_run(self, m, GPP_BWD_W, err) < 0)
            return -1;
        s_lane_if_empty(self, &self->mb[m]);
        return 0;
    }
    if (!gpp_backend_bwd_split(self->be, err))
        return gpp_err_prefix(err, "executor: B pass of micro-batch %d", m);
    if (!self->cfg.split)
        return gpp_err_set(err,
                           "executor: B pass of micro-batch %d, but the stage's memory plan is "
                           "for the whole backward (create the executor with "
                           "gpp_exec_cfg_t.split = 1 to run B and W passes)",
                           m);
    if (s_backward_ready(self, m, "B pass", err) < 0)
        return -1;
    /* a pass recorded as a CUDA graph is a whole backward */
    gpp_exec_pg_leave(self, "a split backward (zero-bubble B and W passes) ran");
    return gpp_exec_backward_part_run(self, m, GPP_BWD_IN, err);
}

int gpp_exec_run(gpp_exec_t *self, int m, int64_t lo, int64_t n, gpp_err_t *err)
{
    assert(self && m >= 0 && n >= 0 && lo >= 0);
    if (gpp_exec_begin(self, m, lo, n, err) < 0 || gpp_exec_forward(self, m, err) < 0)
        return -1;
    return gpp_exec_backward(self, m, err);
}

int gpp_exec_evaluate(gpp_exec_t *self, int64_t lo, int64_t n, int64_t micro, double *loss,
                      gpp_err_t *err)
{
    assert(self && loss && lo >= 0 && n > 0 && micro > 0);
    if (!self->n_loss)
        return gpp_err_set(err, "evaluate: the stage has no loss op");
    if (self->pg != PG_IDLE && self->pg != PG_OFF)
        return gpp_err_set(err, "evaluate: the passes are recorded as CUDA graphs, which run "
                                "in training mode; evaluate without --cuda-graphs");
    for (int m = 0; m < self->n_mb; m++)
        if (self->mb[m].state == MB_OPEN || self->mb[m].state == MB_FORWARD ||
            self->mb[m].state == MB_BWD_IN || self->mb[m].loss_pending)
            return gpp_err_set(err,
                               "evaluate: micro-batch %d of an iteration is still in "
                               "flight; evaluate after the optimizer step",
                               m);
    if (self->loss_acc != 0)
        return gpp_err_set(err, "evaluate: an iteration's loss is not stepped yet; evaluate "
                                "after the optimizer step");
    /* the lanes of the stepped iteration's micro-batches; chunks the plan holds */
    for (int m = 0; m < self->n_mb; m++)
        gpp_exec_release(self, m);
    if (micro > self->plan_n)
        micro = self->plan_n;
    self->eval = 1;
    int rc = 0;
    for (int64_t done = 0; done < n && rc == 0; done += micro) {
        int64_t k = n - done < micro ? n - done : micro;
        rc = gpp_exec_begin(self, 0, lo + done, k, err) < 0 || gpp_exec_forward(self, 0, err) < 0
                 ? -1
                 : s_fold_loss(self, &self->mb[0], err);
        gpp_exec_release(self, 0);
    }
    /* loss_acc weighs a micro-batch by n / batch; the mean over these n */
    *loss = self->loss_acc * (double)self->cfg.batch / (double)n;
    self->loss_acc = 0;
    self->eval = 0;
    return rc;
}

const gpp_tensor_t *gpp_exec_input_grad(gpp_exec_t *self, int m, int producer)
{
    assert(self && m >= 0 && m < self->n_mb &&
           (self->mb[m].state == MB_BACKWARD || self->mb[m].state == MB_BWD_IN));
    const exec_slot_t *sl = s_boundary_slot(self, producer, 0);
    if (!sl->needs_grad)
        return NULL;
    return &self->mb[m].grad[self->slot_of[producer]];
}

/* ---- iteration ---- */

float *gpp_exec_grads(gpp_exec_t *self, int64_t *numel)
{
    assert(self && numel);
    *numel = self->dense_numel;
    return self->gflat;
}

int gpp_exec_n_sparse(const gpp_exec_t *self)
{
    return self->n_sparse;
}

gpp_sparse_grad_t *gpp_exec_sparse_grad(gpp_exec_t *self, int i)
{
    assert(self && i >= 0 && i < self->n_sparse);
    return self->sgrad[i];
}

int gpp_exec_loss(gpp_exec_t *self, double *loss, gpp_err_t *err)
{
    assert(self && loss);
    for (int m = 0; m < self->n_mb; m++)
        if (s_fold_loss(self, &self->mb[m], err) < 0)
            return -1;
    *loss = self->loss_acc;
    return 0;
}

int gpp_exec_step(gpp_exec_t *self, gpp_err_t *err)
{
    assert(self);
    for (int m = 0; m < self->n_mb; m++) {
        int st = self->mb[m].state;
        if (st == MB_OPEN || st == MB_FORWARD)
            return gpp_err_set(err,
                               "executor: optimizer step with micro-batch %d still in "
                               "flight",
                               m);
        if (st == MB_BWD_IN)
            return gpp_err_set(err,
                               "executor: optimizer step with micro-batch %d's W pass "
                               "pending (a W pass never crosses an optimizer step)",
                               m);
        if (s_fold_loss(self, &self->mb[m], err) < 0)
            return -1;
    }
    int64_t t = self->steps + 1;
    if (self->dense_numel > 0) {
        gpp_tensor_t p = gpp_tensor(self->pflat, GPP_DTYPE_F32, 1, 1, self->dense_numel);
        gpp_tensor_t g = gpp_tensor(self->gflat, GPP_DTYPE_F32, 1, 1, self->dense_numel);
        if (gpp_optim_step(self->s, self->dense_state, &self->cfg.optim, t, &p, &g, err) < 0 ||
            gpp_stream_zero(self->s, self->gflat, (size_t)self->dense_numel * 4, err) < 0)
            return -1;
    }
    for (int i = 0; i < self->n_sparse; i++) {
        exec_param_t *p = &self->params[self->sparse_param[i]];
        if (gpp_optim_step_sparse(self->s, self->sstate[i], &self->cfg.optim, t, &p->value,
                                  self->sgrad[i], err) < 0 ||
            gpp_sparse_grad_clear(self->s, self->sgrad[i], err) < 0)
            return -1;
    }
    self->steps = t;
    self->loss_acc = 0;
    if (gpp_stream_sync(self->s, err) < 0)
        return -1;
    gpp_exec_pg_step(self); /* per-pass graphs: the iteration's end */
    return 0;
}

int64_t gpp_exec_step_count(const gpp_exec_t *self)
{
    return self->steps;
}

void gpp_exec_set_step_count(gpp_exec_t *self, int64_t steps)
{
    assert(self && steps >= 0);
    self->steps = steps;
}

const gpp_optim_hp_t *gpp_exec_optim(const gpp_exec_t *self)
{
    return &self->cfg.optim;
}

/* ---- parameters ---- */

int gpp_exec_n_params(const gpp_exec_t *self)
{
    return self->n_params;
}

const char *gpp_exec_param_name(const gpp_exec_t *self, int i)
{
    assert(i >= 0 && i < self->n_params);
    return self->params[i].name;
}

gpp_tensor_t *gpp_exec_param(gpp_exec_t *self, int i)
{
    assert(i >= 0 && i < self->n_params);
    return &self->params[i].value;
}

gpp_tensor_t *gpp_exec_param_grad(gpp_exec_t *self, int i)
{
    assert(i >= 0 && i < self->n_params);
    return self->params[i].sparse >= 0 ? NULL : &self->params[i].grad;
}

int gpp_exec_params_foreach(gpp_exec_t *self, gpp_exec_param_fn fn, void *arg, gpp_err_t *err)
{
    assert(self && fn);
    for (int i = 0; i < self->n_params; i++) {
        exec_param_t *q = &self->params[i];
        gpp_optim_state_t *st = q->sparse >= 0 ? self->sstate[q->sparse] : self->dense_state;
        int64_t at = q->sparse >= 0 ? 0 : q->offset;
        gpp_exec_param_t p = {.name = q->name,
                              .op = q->op,
                              .slot = q->slot,
                              .rows = q->value.rows,
                              .cols = q->value.cols,
                              .n_bufs = 1 + gpp_optim_state_nbufs(st),
                              .buf = {gpp_tensor_f32(&q->value)}};
        assert(p.n_bufs <= GPP_EXEC_MAX_BUFS);
        for (int k = 1; k < p.n_bufs; k++)
            p.buf[k] = gpp_optim_state_buf(st, k - 1) + at;
        if (fn(arg, &p, err) < 0)
            return -1;
    }
    return 0;
}

/* ---- measurement ---- */

int64_t gpp_exec_stash_bytes(const gpp_exec_t *self)
{
    return self->live_bytes;
}

int64_t gpp_exec_peak_stash_bytes(const gpp_exec_t *self)
{
    return self->peak_bytes;
}

int64_t gpp_exec_op_stash_bytes(const gpp_exec_t *self, int m, int op)
{
    assert(self && m >= 0 && m < self->n_mb && self->mb[m].state == MB_FORWARD);
    assert(op >= 0 && op < self->g->n_ops && self->slot_of[op] >= 0 &&
           self->slots[self->slot_of[op]].local);
    const exec_mb_t *mb = &self->mb[m];
    int i = 0;
    while (self->ops[i].op->id != op)
        i++;
    const exec_op_t *eo = &self->ops[i];
    int64_t b = mb->stash[i] ? (int64_t)mb->stash_bytes[i] : 0;
    if (eo->loss < 0 && gpp_op_output_kept(self->g, eo->op) && mb->act[eo->out].data)
        b += (int64_t)gpp_tensor_bytes(&mb->act[eo->out]);
    if (eo->loss >= 0 && mb->grad[eo->in[0]].data)
        b += (int64_t)gpp_tensor_bytes(&mb->grad[eo->in[0]]);
    return b;
}

int64_t gpp_exec_kernel_stash_bytes(const gpp_exec_t *self, int op)
{
    assert(self);
    for (int i = 0; i < self->n_local; i++)
        if (self->ops[i].op->id == op)
            return self->ops[i].kernel_stash_bytes;
    return -1;
}

gpp_work_t gpp_exec_op_workspace(const gpp_exec_t *self, int op)
{
    assert(self);
    for (int i = 0; i < self->n_local; i++)
        if (self->ops[i].op->id == op)
            return self->ops[i].work;
    return (gpp_work_t){-1, -1};
}

const gpp_memplan_t *gpp_exec_plan(const gpp_exec_t *self)
{
    assert(self);
    return self->plan;
}

void gpp_exec_act_dtypes(const gpp_exec_t *self, int *bf16, int *all)
{
    assert(self && bf16 && all);
    *bf16 = *all = 0;
    for (int k = 0; k < self->n_slots; k++) {
        if (!self->slots[k].local ||
            gpp_optable[self->g->ops[self->slots[k].producer].type].role == GPP_ROLE_LOSS)
            continue; /* received, or a loss's value */
        ++*all;
        *bf16 += self->slots[k].dtype == GPP_DTYPE_BF16;
    }
}

int gpp_exec_mb_slots(const gpp_exec_t *self)
{
    return self->n_mb;
}

void gpp_exec_set_timing(gpp_exec_t *self, int on)
{
    if (on) /* timed ops need their own events: passes run eagerly from now on */
        gpp_exec_pg_leave(self, "the per-op timing hook is on");
    self->timing = on;
}

void gpp_exec_op_time(const gpp_exec_t *self, int op, double *fwd_ms, double *bwd_ms,
                      int64_t *calls)
{
    assert(op >= 0 && op < self->g->n_ops && self->slot_of[op] >= 0 &&
           self->slots[self->slot_of[op]].local);
    for (int i = 0; i < self->n_local; i++)
        if (self->ops[i].op->id == op) {
            *fwd_ms = self->ops[i].fwd_ms;
            *bwd_ms = self->ops[i].bwd_ms;
            *calls = self->ops[i].calls;
        }
}

void gpp_exec_reset_times(gpp_exec_t *self)
{
    for (int i = 0; i < self->n_local; i++) {
        self->ops[i].fwd_ms = self->ops[i].bwd_ms = 0;
        self->ops[i].calls = 0;
    }
}
