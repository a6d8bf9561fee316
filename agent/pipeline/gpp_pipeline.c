/* gpp_pipeline: the schedule interpreter. See gpp_pipeline.h. */
#include "agent/pipeline/gpp_pipeline.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "agent/comm/gpp_comm.h"
#include "agent/comm/gpp_comm_nccl.h"
#include "agent/comm/gpp_staging.h"
#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt_set.h"
#include "agent/data/gpp_data.h"
#include "agent/exec/gpp_safetensors.h"
#include "agent/exec/gpp_exec.h"
#include "common/gpp_fs.h"
#include "common/gpp_time.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_model.h"

/* One action of the list, resolved against the stage. */
typedef struct {
    gpp_act_type_t type;
    int mb;
    int peer; /* SEND/RECV: peer comm rank */
    int tensor;
    int64_t lo, hi;    /* SEND/RECV: samples of the iteration */
    int64_t off;       /* SEND/RECV: lo - first sample of this replica's micro-batch mb */
    int64_t row_elems; /* elements per sample of the tensor */
    gpp_dtype_t dtype;
    size_t bytes;
    uint32_t tag;
    void *buf;           /* SEND/RECV: transfer buffer of `bytes` (gpp_staging), owned */
    gpp_comm_req_t *req; /* in flight */
} s_act_t;

struct gpp_pipeline_s {
    gpp_pipeline_cfg_t cfg; /* borrowed arrays and strings */
    gpp_pipeline_callbacks_t cb;

    /* shared with the thread calling gpp_pipeline_abort */
    atomic_int abort;
    pthread_mutex_t mu; /* guards comm against abort from another thread */
    gpp_comm_t *comm;

    /* the thread running gpp_pipeline_run */
    gpp_graph_t *g;
    gpp_backend_t *be;
    gpp_data_t *data;
    gpp_exec_t *ex;
    gpp_comm_group_t *dp;
    gpp_staging_t *st;                  /* the transfers' buffers and copies (with a comm) */
    s_act_t *acts;                      /* [cfg.n_actions] */
    double *act_ms;                     /* [cfg.n_actions] */
    int64_t *act_start_us, *act_end_us; /* [cfg.n_actions], gpp_now_us */
    char phase[64];                     /* what run is doing, for messages */
    int bad_input;                      /* run failed on the model or data the job names */
    int failed_peer;                    /* comm rank of the first failed send/recv, -1 none */
    int *order; /* [n_order] the transfers' order: cfg.comm_order, or the list's */
    int n_order;
    int graphs_said; /* CUDA graphs reported: 1 recorded, 2 off */
};

/* First sample of this replica's share of micro-batch mb, and its size. */
static void s_my_range(const gpp_pipeline_cfg_t *c, int mb, int64_t *lo, int64_t *n)
{
    int64_t b = c->micro_batch, d = c->replicas, r = c->replica;
    int64_t a = mb * b + (r * b) / d, z = mb * b + ((r + 1) * b) / d;
    *lo = a;
    *n = z - a;
}

static int s_is_p2p(gpp_act_type_t t)
{
    return t >= GPP_ACT_SEND_ACT && t <= GPP_ACT_RECV_GRAD;
}

/* An action the interpreter runs in the list's order: a pass of a
 * micro-batch (F, a whole backward, a zero-bubble B or W) or the step. */
static int s_is_pass(gpp_act_type_t t)
{
    return gpp_act_is_pass(t) || t == GPP_ACT_STEP;
}

static int s_is_split(gpp_act_type_t t)
{
    return t == GPP_ACT_BWD_IN || t == GPP_ACT_BWD_W;
}

gpp_pipeline_t *gpp_pipeline_new(const gpp_pipeline_cfg_t *cfg, const gpp_pipeline_callbacks_t *cb,
                                 gpp_err_t *err)
{
    assert(cfg && cfg->model);
    const gpp_pipeline_cfg_t *c = cfg;
    if (c->replicas <= 0 || c->replica < 0 || c->replica >= c->replicas || c->micro_batch <= 0 ||
        c->batch <= 0 || c->batch % c->micro_batch || c->world_size <= 0 || c->rank < 0 ||
        c->rank >= c->world_size || c->iterations < c->start_iteration || c->start_iteration < 0 ||
        c->n_ops <= 0 || c->n_actions < 0 || c->threads <= 0) {
        gpp_err_set(err,
                    "pipeline: bad configuration (replica %d of %d, micro-batch %d, batch %d, "
                    "rank %d of %d, iterations [%d, %d), %d ops, %d actions, %d threads)",
                    c->replica, c->replicas, c->micro_batch, c->batch, c->rank, c->world_size,
                    c->start_iteration, c->iterations, c->n_ops, c->n_actions, c->threads);
        return NULL;
    }
    const int n_mb = c->batch / c->micro_batch;
    for (int i = 0; i < c->n_actions; i++) {
        const gpp_action_t *x = &c->actions[i];
        if ((int)x->type < 0 || x->type >= GPP_ACT__COUNT) {
            gpp_err_set(err, "pipeline: action %d: unknown type %d", i, (int)x->type);
            return NULL;
        }
        if ((gpp_act_is_pass(x->type) || s_is_p2p(x->type)) && (x->mb < 0 || x->mb >= n_mb)) {
            gpp_err_set(err, "pipeline: action %d (%s): micro-batch %d outside [0, %d)", i,
                        gpp_act_type_name(x->type), x->mb, n_mb);
            return NULL;
        }
        if (s_is_p2p(x->type) && (c->peer_ranks[i] < 0 || c->peer_ranks[i] >= c->world_size ||
                                  c->peer_ranks[i] == c->rank)) {
            gpp_err_set(err, "pipeline: action %d (%s): peer rank %d is not another rank of %d", i,
                        gpp_act_type_name(x->type), c->peer_ranks[i], c->world_size);
            return NULL;
        }
    }
    if (c->n_comm_order) {
        int n_comm = 0, bad = -1;
        char *seen = gpp_xcalloc((size_t)c->n_actions + 1, 1);
        for (int i = 0; i < c->n_actions; i++)
            n_comm += s_is_p2p(c->actions[i].type) || c->actions[i].type == GPP_ACT_ALLREDUCE;
        for (int i = 0; i < c->n_comm_order && bad < 0; i++) {
            int j = c->comm_order[i];
            if (j < 0 || j >= c->n_actions || seen[j] ||
                !(s_is_p2p(c->actions[j].type) || c->actions[j].type == GPP_ACT_ALLREDUCE))
                bad = i;
            else
                seen[j] = 1;
        }
        free(seen);
        if (bad >= 0 || n_comm != c->n_comm_order) {
            gpp_err_set(err,
                        "pipeline: comm_order is not every SEND, RECV and ALLREDUCE of the %d "
                        "actions once (%d entries for %d; entry %d)",
                        c->n_actions, c->n_comm_order, n_comm, bad);
            return NULL;
        }
    }
    gpp_pipeline_t *self = gpp_xcalloc(1, sizeof *self);
    self->order = gpp_xcalloc((size_t)c->n_actions + 1, sizeof *self->order);
    if (c->n_comm_order) {
        memcpy(self->order, c->comm_order, (size_t)c->n_comm_order * sizeof *self->order);
        self->n_order = c->n_comm_order;
    } else {
        for (int i = 0; i < c->n_actions; i++)
            if (s_is_p2p(c->actions[i].type) || c->actions[i].type == GPP_ACT_ALLREDUCE)
                self->order[self->n_order++] = i;
    }
    self->failed_peer = -1;
    self->cfg = *cfg;
    if (cb)
        self->cb = *cb;
    pthread_mutex_init(&self->mu, NULL);
    snprintf(self->phase, sizeof self->phase, "starting");
    return self;
}

/* Resolves the action list against the built stage: sample offsets, sizes,
 * dtypes and tags of the transfers. */
static int s_resolve(gpp_pipeline_t *self, gpp_err_t *err)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    const gpp_graph_t *g = self->g;
    const size_t n = c->n_actions ? (size_t)c->n_actions : 1;
    self->acts = gpp_xcalloc(n, sizeof *self->acts);
    self->act_ms = gpp_xcalloc(n, sizeof *self->act_ms);
    self->act_start_us = gpp_xcalloc(n, sizeof *self->act_start_us);
    self->act_end_us = gpp_xcalloc(n, sizeof *self->act_end_us);
    for (int i = 0; i < c->n_actions; i++) {
        const gpp_action_t *x = &c->actions[i];
        s_act_t *a = &self->acts[i];
        a->type = x->type;
        a->mb = x->mb;
        a->tensor = x->tensor;
        a->lo = x->lo;
        a->hi = x->hi;
        a->peer = -1;
        if (!s_is_p2p(a->type))
            continue;
        a->peer = c->peer_ranks[i];
        int dep = a->tensor == GPP_DEP_TENSOR; /* chain dependency: zero bytes */
        if (!dep && (a->tensor < 0 || a->tensor >= g->n_ops))
            return gpp_err_set(err, "action %d: tensor %d is not an op of %s", i, a->tensor,
                               g->name);
        int64_t mylo, myn;
        s_my_range(c, a->mb, &mylo, &myn);
        if (a->lo < mylo || a->hi > mylo + myn || a->lo > a->hi)
            return gpp_err_set(err,
                               "action %d: samples [%lld, %lld) outside this replica's "
                               "[%lld, %lld) of micro-batch %d",
                               i, (long long)a->lo, (long long)a->hi, (long long)mylo,
                               (long long)(mylo + myn), a->mb);
        a->off = a->lo - mylo;
        const gpp_op_t *op = dep ? NULL : &g->ops[a->tensor];
        a->row_elems = dep ? 0 : op->rows * op->cols;
        a->dtype = !dep && op->type == GPP_OP_INPUT && op->input_kind == GPP_INPUT_INDICES
                       ? GPP_DTYPE_I32
                       : GPP_DTYPE_F32;
        if (a->type == GPP_ACT_SEND_GRAD || a->type == GPP_ACT_RECV_GRAD)
            a->dtype = GPP_DTYPE_F32;
        /* a bf16 tensor and its gradient travel in bf16: both ends keep it
           so (the executor's rule, gpp_backend_op_out_dtype: one backend a
           job) */
        if (!dep && gpp_backend_op_out_dtype(self->be, g, op) == GPP_DTYPE_BF16)
            a->dtype = GPP_DTYPE_BF16;
        a->bytes = (size_t)((a->hi - a->lo) * a->row_elems) * gpp_dtype_bytes(a->dtype);
        /* tensor slot n_ops stands for the dependency */
        uint64_t slot = dep ? (uint64_t)g->n_ops : (uint64_t)a->tensor;
        uint64_t tag = ((uint64_t)a->lo * (uint64_t)(g->n_ops + 1) + slot) * 2 +
                       (a->type >= GPP_ACT_SEND_GRAD);
        if (tag > UINT32_MAX)
            return gpp_err_set(err,
                               "action %d: message tag overflows 32 bits (batch x ops too "
                               "large)",
                               i);
        a->tag = (uint32_t)tag;
    }
    return 0;
}

/* Restores the stage's weights, optimizer state and step count from the
 * complete set of start_iteration (ckpt/gpp_ckpt_set.h), whatever
 * plan wrote it: each op's tensors from the stage file that holds them. */
static int s_checkpoint_load(gpp_pipeline_t *self, gpp_err_t *err)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    char **files = NULL;
    int n = gpp_ckpt_set_files(c->checkpoint_dir, c->start_iteration, &files, err);
    int rc = n < 0 ? -1 : gpp_exec_ckpt_load_files(self->ex, (const char *const *)files, n, err);
    gpp_ckpt_set_files_free(&files);
    return rc;
}

/* Saves the stage into the set of `iterations` done, atomically (replica 0
 * only: replicas hold the same bits); the coordinator commits the set once
 * every stage reported the iteration. */
static int s_checkpoint_save(gpp_pipeline_t *self, int iterations, gpp_err_t *err)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    char path[4200];
    gpp_ckpt_set_dir(path, sizeof path, c->checkpoint_dir, iterations);
    if (gpp_mkdirs(path, 0700, err) < 0)
        return -1;
    gpp_ckpt_set_stage_path(path, sizeof path, c->checkpoint_dir, iterations, c->stage);
    return gpp_exec_ckpt_save(self->ex, path, err);
}

/* Joins the world communicator: the rendezvous blocks until every rank of
 * the world has joined, or the timeout. */
static gpp_comm_t *s_comm_open(const gpp_pipeline_cfg_t *c, gpp_stream_t *compute, gpp_err_t *err)
{
    const char *backend = c->comm_backend && c->comm_backend[0] ? c->comm_backend : "gloo";
    gpp_rdv_client_t *rdv = gpp_rdv_client_new(c->rdv_endpoint, c->rdv_token, c->rank, err);
    if (!rdv)
        return NULL;
    gpp_comm_opts_t co = {.rdv = rdv, /* the comm takes it over */
                          .prefix = c->prefix,
                          .world_size = c->world_size,
                          .rank = c->rank,
                          .host = c->host,
                          .timeout_ms = c->comm_timeout_ms,
                          .device = c->device,
                          .compute_stream = gpp_stream_native(compute)};
    return gpp_comm_new(backend, &co, err);
}

static int s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Every transfer's buffer (gpp_staging decides where it lives) and, for
 * the receives, room in the staging buffer. */
static int s_buffers(gpp_pipeline_t *self, gpp_err_t *err)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    self->st = gpp_staging_new(self->be, gpp_exec_stream(self->ex), self->comm);
    size_t most = 0;
    for (int i = 0; i < c->n_actions; i++) {
        s_act_t *a = &self->acts[i];
        if (!s_is_p2p(a->type))
            continue;
        if (!(a->buf = gpp_staging_buf_new(self->st, a->bytes, err)))
            return gpp_err_prefix(err, "device buffer of action %d", i);
        if ((a->type == GPP_ACT_RECV_ACT || a->type == GPP_ACT_RECV_GRAD) &&
            a->tensor != GPP_DEP_TENSOR && a->bytes > most)
            most = a->bytes;
    }
    return gpp_staging_reserve(self->st, most, err);
}

/* A device comm (NCCL): every edge connected before the first iteration
 * (NCCL connects lazily). */
static int s_device_comm(gpp_pipeline_t *self, gpp_err_t *err)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    if (c->n_comm_order == 0) {
        for (int i = 0; i < c->n_actions; i++)
            if (s_is_p2p(self->acts[i].type) || self->acts[i].type == GPP_ACT_ALLREDUCE)
                return gpp_err_set(err,
                                   "comm %s runs transfers only in the blocking-stream "
                                   "order, and the assignment has no comm_order",
                                   gpp_comm_backend(self->comm));
    }
    int *peers = gpp_xcalloc((size_t)c->n_actions + 1, sizeof(int)), n_peers = 0;
    for (int i = 0; i < c->n_actions; i++) {
        s_act_t *a = &self->acts[i];
        if (!s_is_p2p(a->type))
            continue;
        int seen = 0;
        for (int k = 0; k < n_peers; k++)
            seen |= peers[k] == a->peer;
        if (!seen)
            peers[n_peers++] = a->peer;
    }
    /* ascending: every pair lists each other in one relative order */
    qsort(peers, (size_t)n_peers, sizeof *peers, s_cmp_int);
    int rc = n_peers ? gpp_comm_nccl_warmup(self->comm, peers, n_peers, err) : 0;
    free(peers);
    return rc < 0 ? gpp_err_prefix(err, "connecting the stage's edges") : 0;
}

static int s_setup(gpp_pipeline_t *self, gpp_err_t *err)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    snprintf(self->phase, sizeof self->phase, "building stage %d", c->stage);
    self->g = gpp_model_load(c->model, err);
    if (!self->g) {
        self->bad_input = 1;
        return -1;
    }
    for (int i = 0; i < c->n_ops; i++)
        if (c->ops[i] < 0 || c->ops[i] >= self->g->n_ops)
            return gpp_err_set(err, "ops[%d] = %d: %s has %d ops", i, c->ops[i], self->g->name,
                               self->g->n_ops);
    gpp_backend_cfg_t bc = {.kind = c->device_kind,
                            .device = c->device_kind == GPP_DEVICE_CUDA ? c->device : 0,
                            .cpu_threads = c->threads,
                            .precision = c->precision,
                            .bf16_tensors = c->bf16_tensors};
    self->be = gpp_backend_new(&bc, err);
    if (!self->be)
        return -1;
    self->data = c->data && c->data[0] ? gpp_data_open(self->g, c->data, 1, c->seed, err)
                                       : gpp_data_new(self->g, c->seed);
    if (!self->data) {
        self->bad_input = 1;
        return -1;
    }
    /* the next micro-batch's data (synthetic, or read from the dataset) in
     * the background only when a device runs the kernels: on the CPU
     * backend it would take their cores */
    gpp_data_set_threads(self->data, gpp_data_threads(self->data),
                         gpp_backend_kind(self->be) != GPP_DEVICE_CPU);
    gpp_data_set_backend(self->data, self->be);
    /* the executor's memory plan: this replica's largest share of a
       micro-batch, its most micro-batches held at once, a slot each */
    int n_mb = c->batch / c->micro_batch;
    int64_t most = 1;
    for (int m = 0; m < n_mb; m++) {
        int64_t lo, n;
        s_my_range(c, m, &lo, &n);
        most = n > most ? n : most;
    }
    int split = 0; /* zero-bubble B and W passes: the plan holds a lane until W */
    for (int i = 0; i < c->n_actions; i++)
        split |= s_is_split(c->actions[i].type);
    gpp_exec_cfg_t ec = {.seed = c->seed,
                         .optim = c->optim,
                         .batch = c->batch,
                         .graphs = c->graphs,
                         .micro = most,
                         .inflight = gpp_actions_inflight(c->actions, c->n_actions),
                         .slots = n_mb,
                         .split = split};
    self->ex = gpp_exec_new(self->g, c->n_ops, c->ops, self->be, self->data, &ec, err);
    if (!self->ex)
        return -1;
    for (int i = 0; i < c->n_actions; i++) /* zero-bubble B and W: the kernels' split */
        if (s_is_split(c->actions[i].type) && !gpp_backend_bwd_split(self->be, err)) {
            self->bad_input = 1;
            return gpp_err_prefix(err, "action %d (%s)", i, gpp_act_type_name(c->actions[i].type));
        }
    int act_bf16 = 0, act_all = 0;
    gpp_exec_act_dtypes(self->ex, &act_bf16, &act_all);
    if (act_bf16 && c->replica == 0) /* at precision bf16 on cuda (docs/gpu.md "bf16 tensors") */
        gpp_info("stage %d: bf16 tensors: %d of %d activations", c->stage, act_bf16, act_all);
    if (c->start_iteration > 0 && s_checkpoint_load(self, err) < 0)
        return -1;
    if (s_resolve(self, err) < 0)
        return -1;
    if (c->world_size == 1) /* one rank: nothing to send, receive or reduce */
        return 0;

    snprintf(self->phase, sizeof self->phase, "joining the communicator (rank %d of %d)", c->rank,
             c->world_size);
    gpp_comm_t *comm = s_comm_open(c, gpp_exec_stream(self->ex), err);
    if (!comm)
        return -1;
    pthread_mutex_lock(&self->mu);
    self->comm = comm;
    int aborted = atomic_load(&self->abort);
    pthread_mutex_unlock(&self->mu);
    if (aborted)
        return gpp_err_set(err, "aborted");
    if (c->replicas > 1) {
        /* dp_ranks are ascending: consecutive devices of one stage */
        self->dp = gpp_comm_group_new(self->comm, c->dp_ranks, c->replicas, err);
        if (!self->dp)
            return -1;
    }
    if (s_buffers(self, err) < 0 ||
        (gpp_comm_is_device(self->comm) && s_device_comm(self, err) < 0))
        return -1;
    if (gpp_comm_is_device(self->comm)) /* a Gloo job says nothing, as before */
        gpp_info("stage %d replica %d: transfers in the blocking-stream order (comm_order, %d "
                 "entries) on %s",
                 c->stage, c->replica, c->n_comm_order, gpp_comm_backend(self->comm));
    return 0;
}

/* ---- one iteration ---- */

/* Says once when the stage's passes were recorded as CUDA graphs, and why
 * they are off (from the start, or left later: a warning then). */
static void s_graphs_note(gpp_pipeline_t *self, int it)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    if (!c->graphs || c->device_kind != GPP_DEVICE_CUDA || self->graphs_said == 2)
        return;
    int64_t cap = 0, rep = 0;
    gpp_exec_graph_stats(self->ex, &cap, &rep);
    const char *off = gpp_exec_graphs_off(self->ex);
    if (off && self->graphs_said == 1)
        gpp_warn("stage %d replica %d: CUDA graphs left after iteration %d (%lld replays): %s; "
                 "the stage runs its kernels one by one",
                 c->stage, c->replica, it, (long long)rep, off);
    else if (off)
        gpp_info("stage %d replica %d: CUDA graphs off: %s", c->stage, c->replica, off);
    else if (cap > 0 && !self->graphs_said)
        gpp_info("stage %d replica %d: CUDA graphs: %lld passes recorded in iteration %d, "
                 "replayed from the next",
                 c->stage, c->replica, (long long)cap, it);
    self->graphs_said = off ? 2 : cap > 0 ? 1 : 0;
}

static int s_sync(gpp_pipeline_t *self, gpp_err_t *err)
{
    return gpp_stream_sync(gpp_exec_stream(self->ex), err);
}

/* Sums one embedding table's sparse gradient over the stage's replicas:
 * each replica's touched rows travel as one all-gathered block (int32 row
 * ids [count], then fp32 values [count, dim]; count follows from the size),
 * and every replica rebuilds the sum by adding the blocks in replica order
 * to an empty gradient. Same blocks, same order: the same rows and bits on
 * every replica and in every run. The gradient's arrays are device memory:
 * read with the backend's copy (a memmove on the CPU backend) and, when
 * staging, the gathered blocks go back to the device before the adds. */
static int s_sync_sparse(gpp_pipeline_t *self, gpp_sparse_grad_t *sg, gpp_err_t *err)
{
    gpp_stream_t *st = gpp_exec_stream(self->ex);
    const int n = gpp_comm_group_size(self->dp);
    const int64_t dim = gpp_sparse_grad_dim(sg), count = gpp_sparse_grad_count(sg);
    const size_t row_bytes = sizeof(int32_t) + (size_t)dim * sizeof(float);
    const size_t ids_bytes = (size_t)count * sizeof(int32_t);
    char *mine = gpp_xcalloc(count ? (size_t)count * row_bytes : 1, 1);
    if (count &&
        (gpp_stream_copy(st, mine, gpp_sparse_grad_rows(sg), ids_bytes, GPP_COPY_D2H, err) < 0 ||
         gpp_stream_copy(st, mine + ids_bytes, gpp_sparse_grad_values(sg),
                         (size_t)count * row_bytes - ids_bytes, GPP_COPY_D2H, err) < 0 ||
         s_sync(self, err) < 0)) {
        free(mine);
        return -1;
    }
    size_t *bytes_each = gpp_xcalloc((size_t)n, sizeof *bytes_each);
    char *all = NULL;
    int rc = gpp_comm_allgatherv(self->comm, self->dp, mine, (size_t)count * row_bytes,
                                 (void **)&all, bytes_each, err);
    if (rc == 0)
        rc = gpp_sparse_grad_clear(st, sg, err);
    size_t total = 0;
    for (int r = 0; rc == 0 && r < n; r++)
        total += bytes_each[r];
    const char *blocks = all; /* where the adds read: `all`, or its device copy */
    void *dev = NULL;
    if (rc == 0 && !(blocks = gpp_staging_from_host(self->st, all, total, &dev, err)))
        rc = -1;
    size_t off = 0;
    for (int r = 0; rc == 0 && r < n; r++) {
        if (bytes_each[r] % row_bytes) {
            rc = gpp_err_set(err,
                             "sparse gradient sync: replica %d sent %zu bytes, not whole rows "
                             "of %zu bytes (a replica with another model build?)",
                             r, bytes_each[r], row_bytes);
            break;
        }
        /* blocks sit at multiples of 4 bytes in a malloc'd buffer: aligned */
        const int64_t k = (int64_t)(bytes_each[r] / row_bytes);
        const int32_t *ids = (const int32_t *)(const void *)(blocks + off);
        const float *vals =
            (const float *)(const void *)(blocks + off + (size_t)k * sizeof(int32_t));
        rc = gpp_sparse_grad_add(st, sg, k, ids, vals, err);
        off += bytes_each[r];
    }
    if (rc == 0)
        rc = s_sync(self, err); /* the adds have read `all` */
    else if (dev) {
        gpp_err_t ignored = {{0}}; /* the first error is in err already */
        s_sync(self, &ignored);    /* no copy or add reads dev any more */
    }
    gpp_backend_free(self->be, &dev);
    free(all);
    free(bytes_each);
    free(mine);
    return rc;
}

/* Sums the dense gradients over the stage's replicas with one all-reduce,
 * and each embedding table's sparse gradient by exchanging touched rows
 * only (s_sync_sparse): a million-row table costs what its batch touched,
 * not the table. */
static int s_allreduce(gpp_pipeline_t *self, gpp_err_t *err)
{
    if (!self->dp)
        return 0;
    if (s_sync(self, err) < 0)
        return -1;
    int64_t numel = 0;
    float *gr = gpp_exec_grads(self->ex, &numel);
    if (gpp_staging_allreduce_sum_f32(self->st, self->comm, self->dp, gr, (size_t)numel, err) < 0)
        return -1;
    for (int i = 0; i < gpp_exec_n_sparse(self->ex); i++)
        if (s_sync_sparse(self, gpp_exec_sparse_grad(self->ex, i), err) < 0)
            return gpp_err_prefix(err, "sparse gradient %d", i);
    return 0;
}

/* rc of a send/recv call on action a's peer: 1 when it failed (the first
 * failure's peer is kept for gpp_pipeline_failed_peer), else 0. An abort
 * (the coordinator stopped the job) is nobody's connection failing. Gloo
 * fails a request on the pair (TCP connection) of its peer; NCCL reports
 * a communicator-wide error that does not say which rank broke it, so no
 * peer is named there. */
static int s_p2p_failed(gpp_pipeline_t *self, const s_act_t *a, int rc)
{
    if (rc >= 0)
        return 0;
    if (self->failed_peer < 0 && !atomic_load(&self->abort) &&
        strcmp(gpp_comm_backend(self->comm), "gloo") == 0)
        self->failed_peer = a->peer;
    return 1;
}

/* RECV action i: waits for it, then hands the samples to the executor
 * (through the device buffer when staging). *wait_ms: the wait. */
static int s_recv_done(gpp_pipeline_t *self, int i, double *wait_ms, gpp_err_t *err)
{
    s_act_t *a = &self->acts[i];
    double t0 = gpp_now_ms();
    if (s_p2p_failed(self, a, gpp_comm_wait(self->comm, &a->req, err)))
        return -1;
    *wait_ms = gpp_now_ms() - t0;
    if (a->tensor == GPP_DEP_TENSOR) /* only the wait: no data */
        return 0;
    const void *got = gpp_staging_get(self->st, a->buf, a->bytes, err);
    if (!got)
        return -1;
    gpp_tensor_t src = gpp_tensor((void *)got, a->dtype, a->hi - a->lo,
                                  self->g->ops[a->tensor].rows, self->g->ops[a->tensor].cols);
    return a->type == GPP_ACT_RECV_ACT
               ? gpp_exec_set_input(self->ex, a->mb, a->tensor, &src, a->off, err)
               : gpp_exec_add_output_grad(self->ex, a->mb, a->tensor, &src, a->off, err);
}

/* SEND action i: the tensor's samples to the host buffer, then the send. */
static int s_send(gpp_pipeline_t *self, int i, gpp_err_t *err)
{
    s_act_t *a = &self->acts[i];
    if (a->tensor == GPP_DEP_TENSOR) /* the predecessor/successor may go on */
        return s_p2p_failed(self, a,
                            gpp_comm_isend(self->comm, a->buf, 0, a->peer, a->tag, &a->req, err))
                   ? -1
                   : 0;
    const gpp_tensor_t *t = a->type == GPP_ACT_SEND_ACT
                                ? gpp_exec_output(self->ex, a->mb, a->tensor)
                                : gpp_exec_input_grad(self->ex, a->mb, a->tensor);
    if (!t)
        return gpp_err_set(err, "action %d: no %s of op %d for micro-batch %d", i,
                           a->type == GPP_ACT_SEND_ACT ? "output" : "input gradient", a->tensor,
                           a->mb);
    const char *src =
        (const char *)t->data + (size_t)(a->off * a->row_elems) * gpp_dtype_bytes(a->dtype);
    if (gpp_staging_put(self->st, a->buf, src, a->bytes, err) < 0 ||
        s_p2p_failed(self, a,
                     gpp_comm_isend(self->comm, a->buf, a->bytes, a->peer, a->tag, &a->req, err)))
        return -1;
    return 0;
}

/* The first FWD or RECV_ACT of a micro-batch begins it in the executor
 * (its samples, the buffers the receives fill). */
static int s_begin(gpp_pipeline_t *self, int i, char *begun, int64_t base, int64_t *samples,
                   gpp_err_t *err)
{
    s_act_t *a = &self->acts[i];
    if ((a->type != GPP_ACT_FWD && a->type != GPP_ACT_RECV_ACT) || begun[a->mb])
        return 0;
    int64_t mylo, myn;
    s_my_range(&self->cfg, a->mb, &mylo, &myn);
    if (gpp_exec_begin(self->ex, a->mb, base + mylo, myn, err) < 0)
        return -1;
    begun[a->mb] = 1;
    *samples += myn;
    return 0;
}

/* Pass action i (FWD, BWD, BWD_IN, BWD_W, STEP); FWD begins its
 * micro-batch when no receive did. */
static int s_pass(gpp_pipeline_t *self, int i, char *begun, int64_t base, double *loss_out,
                  int *has_loss, int64_t *samples, gpp_err_t *err)
{
    s_act_t *a = &self->acts[i];
    if (s_begin(self, i, begun, base, samples, err) < 0)
        return -1;
    switch (a->type) {
    case GPP_ACT_FWD:
        return gpp_exec_forward(self->ex, a->mb, err) < 0 || s_sync(self, err) < 0 ? -1 : 0;
    case GPP_ACT_BWD:
        return gpp_exec_backward(self->ex, a->mb, err) < 0 || s_sync(self, err) < 0 ? -1 : 0;
    case GPP_ACT_BWD_IN: /* the input gradients, sendable now; W later */
        return gpp_exec_backward_part(self->ex, a->mb, GPP_BWD_IN, err) < 0 || s_sync(self, err) < 0
                   ? -1
                   : 0;
    case GPP_ACT_BWD_W:
        return gpp_exec_backward_part(self->ex, a->mb, GPP_BWD_W, err) < 0 || s_sync(self, err) < 0
                   ? -1
                   : 0;
    case GPP_ACT_STEP:
        if (gpp_exec_has_loss(self->ex)) {
            if (gpp_exec_loss(self->ex, loss_out, err) < 0)
                return -1;
            *has_loss = 1;
        }
        return gpp_exec_step(self->ex, err);
    default:
        assert(0 && "not a pass");
        return -1;
    }
}

static void s_stamp(gpp_pipeline_t *self, int i, int64_t t0_us)
{
    int64_t t1_us = gpp_now_us(); /* two stores per action: the trace is free */
    self->act_start_us[i] = t0_us;
    self->act_end_us[i] = t1_us;
    self->act_ms[i] = (double)(t1_us - t0_us) / 1e3;
}

/* Every send of the iteration completes within it. */
static int s_wait_sends(gpp_pipeline_t *self, double *bubble, gpp_err_t *err)
{
    double t_send = gpp_now_ms();
    for (int i = 0; i < self->cfg.n_actions; i++) {
        s_act_t *a = &self->acts[i];
        if (a->req && (a->type == GPP_ACT_SEND_ACT || a->type == GPP_ACT_SEND_GRAD) &&
            s_p2p_failed(self, a, gpp_comm_wait(self->comm, &a->req, err)))
            return -1;
    }
    *bubble += gpp_now_ms() - t_send;
    return 0;
}

/* One iteration. The passes run in the list's order; the transfers and the
 * all-reduce in the transfers' order (cfg.comm_order: the order in which
 * blocking communication streams run them without deadlock, NCCL with one
 * communicator and one stream per agent, docs/gpu.md; without one, the
 * list's). Before and after each pass, the cursor issues the next entries
 * of that order: a receive at once (posted), a send or the all-reduce once
 * the pass before it in the list has run. A comm that does not block a
 * stream (Gloo) has every receive posted when the iteration starts, so a
 * peer's send never waits for this rank to reach it. A pass waits for the
 * receives listed before it. A micro-batch is released once its backward
 * has run (a split one's W) and its gradients are sent. */
typedef struct {
    int cur;        /* next entry of comm_order */
    int last_pass;  /* list index of the last pass run, -1 */
    int *prev_pass; /* [n_actions]: list index of the pass before each action, -1 */
} s_cursor_t;

/* Posts RECV action a. */
static int s_post(gpp_pipeline_t *self, s_act_t *a, gpp_err_t *err)
{
    return s_p2p_failed(self, a,
                        gpp_comm_irecv(self->comm, a->buf, a->bytes, a->peer, a->tag, &a->req, err))
               ? -1
               : 0;
}

static int s_issue(gpp_pipeline_t *self, s_cursor_t *k, int *grads_left, gpp_err_t *err)
{
    while (k->cur < self->n_order) {
        int j = self->order[k->cur];
        s_act_t *a = &self->acts[j];
        int64_t t0_us = gpp_now_us();
        if ((a->type == GPP_ACT_SEND_ACT || a->type == GPP_ACT_SEND_GRAD ||
             a->type == GPP_ACT_ALLREDUCE) &&
            k->prev_pass[j] > k->last_pass)
            return 0; /* its data is not computed yet */
        switch (a->type) {
        case GPP_ACT_RECV_ACT:
        case GPP_ACT_RECV_GRAD:
            if (!a->req && s_post(self, a, err) < 0)
                return -1;
            break;
        case GPP_ACT_SEND_ACT:
        case GPP_ACT_SEND_GRAD:
            if (s_send(self, j, err) < 0)
                return -1;
            if (a->type == GPP_ACT_SEND_GRAD)
                grads_left[a->mb]--;
            s_stamp(self, j, t0_us);
            break;
        case GPP_ACT_ALLREDUCE:
            if (s_allreduce(self, err) < 0)
                return -1;
            s_stamp(self, j, t0_us);
            break;
        default:
            return gpp_err_set(err, "transfer order [%d]: action %d is a %s", k->cur, j,
                               gpp_act_type_name(a->type));
        }
        /* launched now, in this order (NCCL defers to the flush) */
        if (s_is_p2p(a->type) && s_p2p_failed(self, a, gpp_comm_flush(self->comm, err)))
            return -1;
        k->cur++;
    }
    return 0;
}

static int s_iteration(gpp_pipeline_t *self, int it, double *loss_out, int *has_loss,
                       int64_t *samples, double *iter_ms, double *bubble_ms, gpp_err_t *err)
{
    const gpp_pipeline_cfg_t *c = &self->cfg;
    int64_t base = (int64_t)it * c->batch;
    int n_mb = c->batch / c->micro_batch;
    char *begun = gpp_xcalloc((size_t)n_mb, 1), *bwd_done = gpp_xcalloc((size_t)n_mb, 1);
    int *grads_left = gpp_xcalloc((size_t)n_mb, sizeof(int));
    s_cursor_t k = {.last_pass = -1,
                    .prev_pass = gpp_xcalloc((size_t)c->n_actions + 1, sizeof(int))};
    int rc = -1;
    double t_iter = gpp_now_ms(), bubble = 0;
    *samples = 0;
    for (int i = 0, last = -1; i < c->n_actions; i++) {
        gpp_act_type_t t = self->acts[i].type;
        k.prev_pass[i] = last;
        if (s_is_pass(t))
            last = i;
        if (t == GPP_ACT_SEND_GRAD)
            grads_left[self->acts[i].mb]++;
    }
    for (int i = 0; self->comm && !gpp_comm_is_device(self->comm) && i < c->n_actions; i++) {
        s_act_t *a = &self->acts[i];
        if ((a->type == GPP_ACT_RECV_ACT || a->type == GPP_ACT_RECV_GRAD) &&
            s_post(self, a, err) < 0)
            goto out;
    }
    for (int i = 0; i < c->n_actions; i++) {
        s_act_t *a = &self->acts[i];
        if (!s_is_pass(a->type))
            continue; /* the cursor's */
        if (atomic_load(&self->abort)) {
            gpp_err_set(err, "aborted");
            goto out;
        }
        if (s_issue(self, &k, grads_left, err) < 0)
            goto out;
        /* the receives this pass needs, in the list's order */
        for (int j = k.prev_pass[i] + 1; j < i; j++) {
            gpp_act_type_t t = self->acts[j].type;
            if (t != GPP_ACT_RECV_ACT && t != GPP_ACT_RECV_GRAD)
                continue;
            if (!self->acts[j].req) {
                gpp_err_set(err,
                            "action %d: the receive a pass needs is not posted (the transfer "
                            "order stops at entry %d)",
                            j, k.cur);
                goto out;
            }
            int64_t t0_us = gpp_now_us();
            double w = 0;
            if (s_begin(self, j, begun, base, samples, err) < 0 ||
                s_recv_done(self, j, &w, err) < 0)
                goto out;
            bubble += w;
            s_stamp(self, j, t0_us);
        }
        int64_t t0_us = gpp_now_us();
        if (s_pass(self, i, begun, base, loss_out, has_loss, samples, err) < 0)
            goto out;
        s_stamp(self, i, t0_us);
        k.last_pass = i;
        if (a->type == GPP_ACT_BWD || a->type == GPP_ACT_BWD_W) /* a B's W is still to run */
            bwd_done[a->mb] = 1;
        if (s_issue(self, &k, grads_left, err) < 0)
            goto out;
        for (int m = 0; m < n_mb; m++)
            if (bwd_done[m] == 1 && grads_left[m] == 0) {
                gpp_exec_release(self->ex, m);
                bwd_done[m] = 2;
            }
    }
    if (k.cur != self->n_order) {
        gpp_err_set(err, "transfer order: %d of %d transfers issued by the end of the iteration",
                    k.cur, self->n_order);
        goto out;
    }
    for (int m = 0; m < n_mb; m++)
        if (bwd_done[m] == 1)
            gpp_exec_release(self->ex, m);
    if (s_wait_sends(self, &bubble, err) < 0)
        goto out;
    rc = 0;
out:
    *iter_ms = gpp_now_ms() - t_iter;
    *bubble_ms = bubble < *iter_ms ? bubble : *iter_ms;
    free(begun);
    free(bwd_done);
    free(grads_left);
    free(k.prev_pass);
    return rc;
}

int gpp_pipeline_run(gpp_pipeline_t *self, gpp_err_t *err)
{
    assert(self);
    const gpp_pipeline_cfg_t *c = &self->cfg;
    if (s_setup(self, err) < 0)
        goto fail;
    if (self->cb.on_ready)
        self->cb.on_ready(self->cb.arg);
    snprintf(self->phase, sizeof self->phase, "waiting for the start barrier");
    if (atomic_load(&self->abort) || (self->cb.barrier && self->cb.barrier(self->cb.arg, 0) < 0)) {
        gpp_err_set(err, "stopped before training");
        goto fail;
    }
    int save = c->checkpoint_dir && c->checkpoint_dir[0] && c->replica == 0;
    if (save && gpp_mkdirs(c->checkpoint_dir, 0700, err) < 0)
        goto fail;
    for (int it = c->start_iteration; it < c->iterations; it++) {
        snprintf(self->phase, sizeof self->phase, "training iteration %d", it);
        gpp_pipeline_metrics_t m = {.iteration = it,
                                    .n_actions = c->n_actions,
                                    .action_ms = self->act_ms,
                                    .action_start_us = self->act_start_us,
                                    .action_end_us = self->act_end_us};
        if (s_iteration(self, it, &m.loss, &m.has_loss, &m.samples, &m.iteration_ms, &m.bubble_ms,
                        err) < 0)
            goto fail;
        s_graphs_note(self, it);
        int last = it + 1 == c->iterations;
        if (save &&
            (last || (c->checkpoint_interval > 0 && (it + 1) % c->checkpoint_interval == 0))) {
            snprintf(self->phase, sizeof self->phase, "saving the checkpoint of iteration %d", it);
            if (s_checkpoint_save(self, it + 1, err) < 0)
                goto fail;
        }
        if (save && last) { /* the trained weights, for PyTorch (gpp_safetensors.h) */
            char path[4200];
            snprintf(path, sizeof path, "%s/stage%d.safetensors", c->checkpoint_dir, c->stage);
            snprintf(self->phase, sizeof self->phase, "saving the weights to %s", path);
            if (gpp_safetensors_save(self->ex, path, err) < 0)
                goto fail;
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        m.mem_high_water_bytes = (int64_t)ru.ru_maxrss * 1024;
        gpp_backend_mem_t bm;
        gpp_backend_mem(self->be, &bm);
        m.device_mem_peak_bytes = bm.peak_bytes;
        /* outside the plan's model: the backend's buffers and the receives' staging */
        m.device_mem_backend_bytes =
            bm.own_bytes + (int64_t)(self->st ? gpp_staging_device_bytes(self->st) : 0);
        int n_ops = self->g->n_ops, *ops = NULL, *has = NULL;
        unsigned char(*d)[GPP_SHA256_BYTES] = NULL;
        if (last && c->replica == 0) {
            snprintf(self->phase, sizeof self->phase, "digesting the weights");
            d = gpp_xcalloc((size_t)n_ops, sizeof *d);
            has = gpp_xcalloc((size_t)n_ops, sizeof *has);
            ops = gpp_xcalloc((size_t)n_ops, sizeof *ops);
            if (gpp_exec_ckpt_op_digests(self->ex, d, has, err) < 0) {
                free(d), free(has), free(ops);
                goto fail;
            }
            for (int op = 0; op < n_ops; op++)
                if (has[op]) { /* packed: digests[i] of op ops[i] */
                    memmove(d[m.n_digests], d[op], GPP_SHA256_BYTES);
                    ops[m.n_digests++] = op;
                }
            m.digest_ops = ops;
            m.digests = (const unsigned char(*)[32])d;
        }
        if (self->cb.on_metrics)
            self->cb.on_metrics(self->cb.arg, &m);
        free(d), free(has), free(ops);
    }
    snprintf(self->phase, sizeof self->phase, "trained");
    return 0;
fail:
    if (atomic_load(&self->abort))
        gpp_err_set(err, "aborted");
    return gpp_err_prefix(err, "%s", self->phase);
}

void gpp_pipeline_abort(gpp_pipeline_t *self, const char *reason)
{
    assert(self);
    atomic_store(&self->abort, 1);
    pthread_mutex_lock(&self->mu);
    if (self->comm)
        gpp_comm_abort(self->comm, reason ? reason : "the job was stopped");
    pthread_mutex_unlock(&self->mu);
}

void gpp_pipeline_destroy(gpp_pipeline_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_pipeline_t *self = *self_p;
    *self_p = NULL;
    for (int i = 0; self->st && i < self->cfg.n_actions; i++)
        gpp_staging_buf_free(self->st, &self->acts[i].buf); /* requests go with the comm */
    gpp_staging_destroy(&self->st);
    free(self->acts);
    free(self->order);
    free(self->act_ms);
    free(self->act_start_us);
    free(self->act_end_us);
    gpp_comm_group_destroy(&self->dp);
    pthread_mutex_lock(&self->mu);
    gpp_comm_destroy(&self->comm);
    pthread_mutex_unlock(&self->mu);
    gpp_exec_destroy(&self->ex);
    gpp_data_destroy(&self->data);
    gpp_backend_destroy(&self->be);
    gpp_graph_destroy(&self->g);
    pthread_mutex_destroy(&self->mu);
    free(self);
}

int gpp_pipeline_bad_input(const gpp_pipeline_t *self)
{
    return self->bad_input;
}

int gpp_pipeline_failed_peer(const gpp_pipeline_t *self)
{
    return self->failed_peer;
}
