/* gpp_runner: see gpp_runner.h. */
#include "agent/control/gpp_runner.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <unistd.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "agent/comm/gpp_comm.h"
#include "model/gpp_model.h"
#include "common/gpp_sigfd.h"
#include "agent/exec/gpp_ckpt.h"
#include "agent/exec/gpp_data.h"
#include "agent/exec/gpp_exec.h"
#include "agent/exec/gpp_profile.h"
#include "common/gpp_time.h"
#include "kernels/gpp_backend.h"
#include "planner/gpp_plan.h"

#define S_JOIN_GRACE_MS 5000 /* a worker stuck in a rendezvous is left behind after this */

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
    void *buf;           /* SEND/RECV: host buffer of `bytes`, owned */
    gpp_comm_req_t *req; /* in flight */
} s_act_t;

struct gpp_runner_s {
    /* shared between the threads */
    pthread_t th;
    int th_started;
    atomic_int abort;
    atomic_int done;    /* the worker has ended */
    pthread_mutex_t mu; /* guards comm against abort from the main thread */
    gpp_comm_t *comm;

    /* main thread */
    zloop_t *loop;
    gpp_control_t *ctl;
    zsock_t *pipe; /* main end */
    gpp_runner_cfg_t cfg;
    int ok;

    /* worker thread */
    zsock_t *wpipe; /* worker end */
    gpp_msg_t *msg; /* the Assignment envelope, owned */
    const Gpp__Assignment *as;
    char host[256];
    gpp_graph_t *g;
    gpp_backend_t *be;
    gpp_data_t *data;
    gpp_exec_t *ex;
    gpp_comm_group_t *dp;
    int n_acts;
    s_act_t *acts;
    double *act_ms;
    char phase[64]; /* what the worker is doing, for messages */
};

/* ---- worker -> main ---- */

static void s_post(gpp_runner_t *self, gpp_msg_t *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    gpp_err_t err = {{0}};
    if (gpp_msg_encode(m, &buf, &len, &err) < 0) {
        gpp_error("runner: %s", err.msg);
        return;
    }
    zmsg_t *zm = zmsg_new();
    zmsg_addstr(zm, "fwd");
    zmsg_addmem(zm, buf, len);
    free(buf);
    zmsg_send(&zm, self->wpipe);
}

static void s_post_error(gpp_runner_t *self, int code, const char *text)
{
    Gpp__Error e = GPP__ERROR__INIT;
    e.code = code;
    char buf[GPP_MSG_STR_MAX];
    snprintf(buf, sizeof buf, "%s", text);
    e.text = buf;
    gpp_msg_t m;
    gpp_msg_init(&m, 1, 0);
    m.body_case = GPP__ENVELOPE__BODY_ERROR;
    m.error = &e;
    s_post(self, &m);
}

/* Waits for a word from the main thread: the barrier id for "release", -1
 * for "stop". */
static int s_wait_word(gpp_runner_t *self)
{
    zmsg_t *zm = zmsg_recv(self->wpipe);
    if (!zm)
        return -1;
    char *w = zmsg_popstr(zm);
    int v = -1;
    if (w && strcmp(w, "release") == 0) {
        char *id = zmsg_popstr(zm);
        v = id ? atoi(id) : -1;
        free(id);
    }
    free(w);
    zmsg_destroy(&zm);
    return v;
}

/* ---- set-up ---- */

static int s_peer_rank(const Gpp__Assignment *as, int peer_stage, int peer_replica, int tensor,
                       int downstream_tensor_owner_is_us, gpp_err_t *err)
{
    for (size_t i = 0; i < as->n_edges; i++) {
        const Gpp__Edge *e = as->edges[i];
        if (e->peer_stage != peer_stage)
            continue;
        int has = 0;
        for (size_t j = 0; j < e->n_tensors; j++)
            has |= e->tensors[j] == tensor;
        if (!has || (int)e->downstream != downstream_tensor_owner_is_us)
            continue;
        for (size_t j = 0; j < e->n_replicas; j++)
            if (e->replicas[j]->replica == peer_replica)
                return e->replicas[j]->rank;
        return gpp_err_set(err, "stage %d has no replica %d in the assignment's edges", peer_stage,
                           peer_replica);
    }
    return gpp_err_set(err, "tensor %d is on no %s edge to stage %d", tensor,
                       downstream_tensor_owner_is_us ? "outgoing" : "incoming", peer_stage);
}

/* First sample of this replica's share of micro-batch mb, and its size. */
static void s_my_range(const Gpp__Assignment *as, int mb, int64_t *lo, int64_t *n)
{
    int64_t b = as->micro_batch, d = as->replicas, r = as->replica;
    int64_t a = mb * b + (r * b) / d, z = mb * b + ((r + 1) * b) / d;
    *lo = a;
    *n = z - a;
}

static int s_resolve(gpp_runner_t *self, gpp_err_t *err)
{
    const Gpp__Assignment *as = self->as;
    const gpp_graph_t *g = self->g;
    self->n_acts = (int)as->n_actions;
    self->acts = gpp_xcalloc(self->n_acts ? (size_t)self->n_acts : 1, sizeof *self->acts);
    self->act_ms = gpp_xcalloc(self->n_acts ? (size_t)self->n_acts : 1, sizeof *self->act_ms);
    for (int i = 0; i < self->n_acts; i++) {
        const Gpp__Action *x = as->actions[i];
        s_act_t *a = &self->acts[i];
        a->type = (gpp_act_type_t)x->type;
        a->mb = x->mb;
        a->tensor = x->tensor;
        a->lo = x->lo;
        a->hi = x->hi;
        a->peer = -1;
        if (a->type > GPP_ACT_RECV_GRAD || a->type < GPP_ACT_SEND_ACT)
            continue;
        if (a->tensor >= g->n_ops)
            return gpp_err_set(err, "action %d: tensor %d is not an op of %s", i, a->tensor,
                               g->name);
        /* activations go downstream, gradients upstream: the tensor is ours
         * when we send activations or receive gradients */
        int ours = a->type == GPP_ACT_SEND_ACT || a->type == GPP_ACT_RECV_GRAD;
        a->peer = s_peer_rank(as, x->peer_stage, x->peer_replica, a->tensor, ours, err);
        if (a->peer < 0)
            return gpp_err_prefix(err, "action %d", i);
        int64_t mylo, myn;
        s_my_range(as, a->mb, &mylo, &myn);
        if (a->mb < 0 || a->lo < mylo || a->hi > mylo + myn)
            return gpp_err_set(err,
                               "action %d: samples [%lld, %lld) outside this replica's "
                               "[%lld, %lld) of micro-batch %d",
                               i, (long long)a->lo, (long long)a->hi, (long long)mylo,
                               (long long)(mylo + myn), a->mb);
        a->off = a->lo - mylo;
        const gpp_op_t *op = &g->ops[a->tensor];
        a->row_elems = op->rows * op->cols;
        a->dtype = op->type == GPP_OP_INPUT && op->input_kind == GPP_INPUT_INDICES ? GPP_DTYPE_I32
                                                                                   : GPP_DTYPE_F32;
        if (a->type == GPP_ACT_SEND_GRAD || a->type == GPP_ACT_RECV_GRAD)
            a->dtype = GPP_DTYPE_F32;
        a->bytes = (size_t)((a->hi - a->lo) * a->row_elems) * 4;
        uint64_t tag = ((uint64_t)a->lo * (uint64_t)g->n_ops + (uint64_t)a->tensor) * 2 +
                       (a->type >= GPP_ACT_SEND_GRAD);
        if (tag > UINT32_MAX)
            return gpp_err_set(err,
                               "action %d: message tag overflows 32 bits (batch x ops too "
                               "large)",
                               i);
        a->tag = (uint32_t)tag;
        a->buf = gpp_xcalloc(a->bytes ? a->bytes : 1, 1);
    }
    return 0;
}

static int s_setup(gpp_runner_t *self, gpp_err_t *err)
{
    const Gpp__Assignment *as = self->as;
    snprintf(self->phase, sizeof self->phase, "building stage %d", as->stage);
    self->g = gpp_model_load(as->model, err);
    if (!self->g)
        return -1;
    for (size_t i = 0; i < as->n_ops; i++)
        if (as->ops[i] >= self->g->n_ops)
            return gpp_err_set(err, "assignment.ops[%zu] = %d: %s has %d ops", i, as->ops[i],
                               self->g->name, self->g->n_ops);
    gpp_backend_cfg_t bc = {.kind = GPP_DEVICE_CPU, .cpu_threads = self->cfg.threads};
    self->be = gpp_backend_new(&bc, err);
    if (!self->be)
        return -1;
    self->data = gpp_data_new(self->g, as->seed);
    const Gpp__HyperParams *h = as->hyper;
    gpp_exec_cfg_t ec = {.seed = as->seed,
                         .optim = {.kind = h->optimizer == GPP__OPTIMIZER__OPTIMIZER_SGD
                                               ? GPP_OPTIM_SGD
                                               : GPP_OPTIM_ADAMW,
                                   .lr = (float)h->lr,
                                   .weight_decay = (float)h->weight_decay,
                                   .momentum = (float)h->momentum,
                                   .beta1 = (float)h->beta1,
                                   .beta2 = (float)h->beta2,
                                   .eps = (float)h->eps},
                         .batch = as->batch};
    self->ex = gpp_exec_new(self->g, (int)as->n_ops, as->ops, self->be, self->data, &ec, err);
    if (!self->ex)
        return -1;
    if (as->start_iteration > 0) {
        char path[4200];
        snprintf(path, sizeof path, "%s/stage%d.ckpt", as->checkpoint_dir, as->stage);
        if (gpp_ckpt_load(self->ex, path, err) < 0)
            return -1;
    }
    if (s_resolve(self, err) < 0)
        return -1;

    snprintf(self->phase, sizeof self->phase, "joining the communicator (rank %d of %d)",
             as->comm->rank, as->comm->world_size);
    gpp_rdv_client_t *rdv =
        gpp_rdv_client_new(as->comm->rdv_endpoint, as->comm->rdv_token, as->comm->rank, err);
    if (!rdv)
        return -1;
    gpp_comm_opts_t co = {.rdv = rdv, /* the comm takes it over */
                          .prefix = as->comm->prefix,
                          .world_size = as->comm->world_size,
                          .rank = as->comm->rank,
                          .host = self->host,
                          .timeout_ms = self->cfg.comm_timeout_ms};
    gpp_comm_t *comm = gpp_comm_gloo_new(&co, err);
    if (!comm)
        return -1;
    pthread_mutex_lock(&self->mu);
    self->comm = comm;
    int aborted = atomic_load(&self->abort);
    pthread_mutex_unlock(&self->mu);
    if (aborted)
        return gpp_err_set(err, "aborted");
    if (as->replicas > 1) {
        /* dp_ranks are ascending: consecutive devices of one stage */
        self->dp = gpp_comm_group_new(self->comm, as->dp_ranks, (int)as->n_dp_ranks, err);
        if (!self->dp)
            return -1;
    }
    return 0;
}

/* ---- one iteration ---- */

static int s_sync(gpp_runner_t *self, gpp_err_t *err)
{
    return gpp_stream_sync(gpp_exec_stream(self->ex), err);
}

/* Sums one embedding table's sparse gradient over the stage's replicas:
 * each replica's touched rows travel as one all-gathered block (int32 row
 * ids [count], then fp32 values [count, dim]; count follows from the size),
 * and every replica rebuilds the sum by adding the blocks in replica order
 * to an empty gradient. Same blocks, same order: the same rows and bits on
 * every replica and in every run. The runner's backend is the CPU one, so
 * the gradient's device arrays are host memory. */
static int s_sync_sparse(gpp_runner_t *self, gpp_sparse_grad_t *sg, gpp_err_t *err)
{
    gpp_stream_t *st = gpp_exec_stream(self->ex);
    const int n = gpp_comm_group_size(self->dp);
    const int64_t dim = gpp_sparse_grad_dim(sg), count = gpp_sparse_grad_count(sg);
    const size_t row_bytes = sizeof(int32_t) + (size_t)dim * sizeof(float);
    const size_t ids_bytes = (size_t)count * sizeof(int32_t);
    char *mine = gpp_xcalloc(count ? (size_t)count * row_bytes : 1, 1);
    if (count) {
        memcpy(mine, gpp_sparse_grad_rows(sg), ids_bytes);
        memcpy(mine + ids_bytes, gpp_sparse_grad_values(sg), (size_t)count * row_bytes - ids_bytes);
    }
    size_t *bytes_each = gpp_xcalloc((size_t)n, sizeof *bytes_each);
    char *all = NULL;
    int rc = gpp_comm_allgatherv(self->comm, self->dp, mine, (size_t)count * row_bytes,
                                 (void **)&all, bytes_each, err);
    if (rc == 0)
        rc = gpp_sparse_grad_clear(st, sg, err);
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
        const int32_t *ids = (const int32_t *)(const void *)(all + off);
        const float *vals = (const float *)(const void *)(all + off + (size_t)k * sizeof(int32_t));
        rc = gpp_sparse_grad_add(st, sg, k, ids, vals, err);
        off += bytes_each[r];
    }
    if (rc == 0)
        rc = s_sync(self, err); /* the adds have read `all` */
    free(all);
    free(bytes_each);
    free(mine);
    return rc;
}

/* Sums the dense gradients over the stage's replicas with one all-reduce,
 * and each embedding table's sparse gradient by exchanging touched rows
 * only (s_sync_sparse): a million-row table costs what its batch touched,
 * not the table. */
static int s_allreduce(gpp_runner_t *self, gpp_err_t *err)
{
    if (!self->dp)
        return 0;
    if (s_sync(self, err) < 0)
        return -1;
    int64_t numel = 0;
    float *gr = gpp_exec_grads(self->ex, &numel);
    if (numel > 0 && gpp_comm_allreduce_sum_f32(self->comm, self->dp, gr, (size_t)numel, err) < 0)
        return -1;
    for (int i = 0; i < gpp_exec_n_sparse(self->ex); i++)
        if (s_sync_sparse(self, gpp_exec_sparse_grad(self->ex, i), err) < 0)
            return gpp_err_prefix(err, "sparse gradient %d", i);
    return 0;
}

static int s_mkdirs(const char *dir, gpp_err_t *err)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0777) < 0 && errno != EEXIST)
                return gpp_err_set(err, "mkdir %s: %s", p, strerror(errno));
            *s = '/';
        }
    if (mkdir(p, 0777) < 0 && errno != EEXIST)
        return gpp_err_set(err, "mkdir %s: %s", p, strerror(errno));
    return 0;
}

static int s_iteration(gpp_runner_t *self, int it, double *loss_out, int *has_loss,
                       int64_t *samples, double *iter_ms, double *bubble_ms, gpp_err_t *err)
{
    const Gpp__Assignment *as = self->as;
    int64_t base = (int64_t)it * as->batch;
    int n_mb = as->batch / as->micro_batch;
    char *begun = gpp_xcalloc((size_t)n_mb, 1);
    int rc = -1, pending_release = -1;
    double t_iter = gpp_now_ms(), bubble = 0;
    *samples = 0;

    /* post every receive of the iteration now; each is waited just before use */
    for (int i = 0; i < self->n_acts; i++) {
        s_act_t *a = &self->acts[i];
        if ((a->type == GPP_ACT_RECV_ACT || a->type == GPP_ACT_RECV_GRAD) &&
            gpp_comm_irecv(self->comm, a->buf, a->bytes, a->peer, a->tag, &a->req, err) < 0)
            goto out;
    }
    for (int i = 0; i < self->n_acts; i++) {
        if (atomic_load(&self->abort)) {
            gpp_err_set(err, "aborted");
            goto out;
        }
        s_act_t *a = &self->acts[i];
        double t0 = gpp_now_ms();
        if (pending_release >= 0 && !(a->type == GPP_ACT_SEND_GRAD && a->mb == pending_release)) {
            gpp_exec_release(self->ex, pending_release);
            pending_release = -1;
        }
        int64_t mylo, myn;
        if (a->mb >= 0) {
            s_my_range(as, a->mb, &mylo, &myn);
            if (!begun[a->mb] && (a->type == GPP_ACT_FWD || a->type == GPP_ACT_RECV_ACT)) {
                if (gpp_exec_begin(self->ex, a->mb, base + mylo, myn, err) < 0)
                    goto out;
                begun[a->mb] = 1;
                *samples += myn;
            }
        }
        switch (a->type) {
        case GPP_ACT_FWD:
            if (gpp_exec_forward(self->ex, a->mb, err) < 0 || s_sync(self, err) < 0)
                goto out;
            break;
        case GPP_ACT_BWD:
            if (gpp_exec_backward(self->ex, a->mb, err) < 0 || s_sync(self, err) < 0)
                goto out;
            pending_release = a->mb;
            break;
        case GPP_ACT_RECV_ACT:
        case GPP_ACT_RECV_GRAD: {
            if (gpp_comm_wait(self->comm, &a->req, err) < 0)
                goto out;
            bubble += gpp_now_ms() - t0;
            gpp_tensor_t src =
                gpp_tensor(a->buf, a->dtype, a->hi - a->lo, self->g->ops[a->tensor].rows,
                           self->g->ops[a->tensor].cols);
            int r = a->type == GPP_ACT_RECV_ACT
                        ? gpp_exec_set_input(self->ex, a->mb, a->tensor, &src, a->off, err)
                        : gpp_exec_add_output_grad(self->ex, a->mb, a->tensor, &src, a->off, err);
            if (r < 0)
                goto out;
            break;
        }
        case GPP_ACT_SEND_ACT:
        case GPP_ACT_SEND_GRAD: {
            const gpp_tensor_t *t = a->type == GPP_ACT_SEND_ACT
                                        ? gpp_exec_output(self->ex, a->mb, a->tensor)
                                        : gpp_exec_input_grad(self->ex, a->mb, a->tensor);
            if (!t) {
                gpp_err_set(err, "action %d: no %s of op %d for micro-batch %d", i,
                            a->type == GPP_ACT_SEND_ACT ? "output" : "input gradient", a->tensor,
                            a->mb);
                goto out;
            }
            const char *src = (const char *)t->data + (size_t)(a->off * a->row_elems) * 4;
            if (gpp_stream_copy(gpp_exec_stream(self->ex), a->buf, src, a->bytes, GPP_COPY_D2H,
                                err) < 0 ||
                s_sync(self, err) < 0 ||
                gpp_comm_isend(self->comm, a->buf, a->bytes, a->peer, a->tag, &a->req, err) < 0)
                goto out;
            break;
        }
        case GPP_ACT_ALLREDUCE:
            if (s_allreduce(self, err) < 0)
                goto out;
            break;
        case GPP_ACT_STEP:
            if (gpp_exec_has_loss(self->ex)) {
                if (gpp_exec_loss(self->ex, loss_out, err) < 0)
                    goto out;
                *has_loss = 1;
            }
            if (gpp_exec_step(self->ex, err) < 0)
                goto out;
            break;
        default:
            gpp_err_set(err, "action %d: unknown type %d", i, (int)a->type);
            goto out;
        }
        self->act_ms[i] = gpp_now_ms() - t0;
    }
    if (pending_release >= 0)
        gpp_exec_release(self->ex, pending_release);
    /* every send completes within its iteration */
    double t_send = gpp_now_ms();
    for (int i = 0; i < self->n_acts; i++) {
        s_act_t *a = &self->acts[i];
        if (a->req && (a->type == GPP_ACT_SEND_ACT || a->type == GPP_ACT_SEND_GRAD) &&
            gpp_comm_wait(self->comm, &a->req, err) < 0)
            goto out;
    }
    bubble += gpp_now_ms() - t_send;
    rc = 0;
out:
    *iter_ms = gpp_now_ms() - t_iter;
    *bubble_ms = bubble < *iter_ms ? bubble : *iter_ms;
    free(begun);
    if (rc < 0)
        gpp_err_prefix(err, "iteration %d", it);
    return rc;
}

static int s_train(gpp_runner_t *self, gpp_err_t *err)
{
    const Gpp__Assignment *as = self->as;
    if (s_setup(self, err) < 0)
        return -1;
    /* Ready, then the start barrier */
    Gpp__Ready rd = GPP__READY__INIT;
    rd.stage = as->stage;
    rd.replica = as->replica;
    gpp_msg_t m;
    gpp_msg_init(&m, 1, 0);
    m.body_case = GPP__ENVELOPE__BODY_READY;
    m.ready = &rd;
    s_post(self, &m);
    Gpp__BarrierEnter be = GPP__BARRIER_ENTER__INIT;
    be.barrier_id = 0;
    gpp_msg_init(&m, 1, 0);
    m.body_case = GPP__ENVELOPE__BODY_BARRIER_ENTER;
    m.barrier_enter = &be;
    s_post(self, &m);
    snprintf(self->phase, sizeof self->phase, "waiting for the start barrier");
    if (s_wait_word(self) != 0)
        return gpp_err_set(err, "stopped before training");
    int save = as->checkpoint_dir[0] && as->replica == 0;
    if (save && s_mkdirs(as->checkpoint_dir, err) < 0)
        return -1;
    for (int it = as->start_iteration; it < as->iterations; it++) {
        snprintf(self->phase, sizeof self->phase, "training iteration %d", it);
        double loss = 0, iter_ms = 0, bubble_ms = 0;
        int has_loss = 0;
        int64_t samples = 0;
        if (s_iteration(self, it, &loss, &has_loss, &samples, &iter_ms, &bubble_ms, err) < 0)
            return -1;
        int last = it + 1 == as->iterations;
        if (save &&
            (last || (as->checkpoint_interval > 0 && (it + 1) % as->checkpoint_interval == 0))) {
            char path[4200];
            snprintf(path, sizeof path, "%s/stage%d.ckpt", as->checkpoint_dir, as->stage);
            if (gpp_ckpt_save(self->ex, path, err) < 0)
                return -1;
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        Gpp__Metrics mt = GPP__METRICS__INIT;
        mt.iteration = it - as->start_iteration;
        mt.n_action_ms = (size_t)self->n_acts;
        mt.action_ms = self->act_ms;
        mt.iteration_ms = iter_ms;
        mt.bubble_ms = bubble_ms;
        mt.mem_high_water_bytes = (int64_t)ru.ru_maxrss * 1024;
        mt.has_loss = has_loss;
        mt.loss = loss;
        mt.samples = samples;
        gpp_msg_init(&m, 1, 0);
        m.body_case = GPP__ENVELOPE__BODY_METRICS;
        m.metrics = &mt;
        s_post(self, &m);
    }
    snprintf(self->phase, sizeof self->phase, "trained; waiting for shutdown");
    return 0;
}

static void s_teardown(gpp_runner_t *self)
{
    for (int i = 0; i < self->n_acts; i++)
        free(self->acts[i].buf); /* requests are freed with the comm */
    free(self->acts);
    self->acts = NULL;
    free(self->act_ms);
    self->act_ms = NULL;
    gpp_comm_group_destroy(&self->dp);
    pthread_mutex_lock(&self->mu);
    gpp_comm_destroy(&self->comm);
    pthread_mutex_unlock(&self->mu);
    gpp_exec_destroy(&self->ex);
    gpp_data_destroy(&self->data);
    gpp_backend_destroy(&self->be);
    gpp_graph_destroy(&self->g);
}

/* Times every op of the model at the requested micro-batch sizes
 * (gpp_profile, the same code as gpp-train --profile-out) and reports the
 * measured forward and backward of each op and size as rows. */
static int s_profile(gpp_runner_t *self, gpp_err_t *err)
{
    const Gpp__ProfileRequest *rq = self->msg->profile_request;
    snprintf(self->phase, sizeof self->phase, "profiling %s", rq->model);
    int rc = -1, max_mb = 1, *ops = NULL;
    cJSON *root = NULL;
    Gpp__OpProfile *rows = NULL, **rowp = NULL;
    self->g = gpp_model_load(rq->model, err);
    if (!self->g)
        goto out;
    gpp_backend_cfg_t bc = {.kind = GPP_DEVICE_CPU, .cpu_threads = self->cfg.threads};
    if (!(self->be = gpp_backend_new(&bc, err)))
        goto out;
    self->data = gpp_data_new(self->g, 1);
    for (size_t i = 0; i < rq->n_micro_batches; i++)
        if (rq->micro_batches[i] > max_mb)
            max_mb = rq->micro_batches[i];
    ops = gpp_xcalloc((size_t)self->g->n_ops, sizeof *ops);
    for (int i = 0; i < self->g->n_ops; i++)
        ops[i] = i;
    gpp_profile_cfg_t pc = {.max_micro_batch = max_mb, .reps = rq->iterations, .seed = 1};
    root = gpp_profile_measure(self->g, self->g->n_ops, ops, self->be, self->data, &pc, err);
    if (!root)
        goto out;
    size_t n = 0, cap = 64;
    rows = gpp_xcalloc(cap, sizeof *rows);
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(e, "runtime"), *v;
        const cJSON *fw = cJSON_GetObjectItemCaseSensitive(e, "forward");
        cJSON_ArrayForEach(v, rt)
        {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(fw, v->string);
            if (n == cap) {
                cap *= 2;
                rows = gpp_xrealloc(rows, cap * sizeof *rows);
            }
            gpp__op_profile__init(&rows[n]);
            rows[n].op = atoi(e->string);
            rows[n].micro_batch = atoi(v->string);
            assert(cJSON_IsNumber(f) && f->valuedouble <= v->valuedouble); /* our table */
            rows[n].fwd_ms = f->valuedouble;
            rows[n].bwd_ms = v->valuedouble - f->valuedouble;
            n++;
        }
    }
    rowp = gpp_xcalloc(n ? n : 1, sizeof *rowp);
    for (size_t i = 0; i < n; i++)
        rowp[i] = &rows[i];
    Gpp__ProfileResult res = GPP__PROFILE_RESULT__INIT;
    res.n_ops = n;
    res.ops = rowp;
    gpp_msg_t m;
    gpp_msg_init(&m, 1, 0);
    m.body_case = GPP__ENVELOPE__BODY_PROFILE_RESULT;
    m.profile_result = &res;
    s_post(self, &m);
    rc = 0;
out:
    cJSON_Delete(root);
    free(rows);
    free(rowp);
    free(ops);
    return rc;
}

static void *s_worker(void *arg)
{
    gpp_runner_t *self = arg;
    gpp_sigfd_mask(SIG_BLOCK); /* signals are the loop thread's; Gloo's threads inherit this */
    gpp_err_t err = {{0}};
    int profile = self->msg->body_case == GPP__ENVELOPE__BODY_PROFILE_REQUEST;
    int ok = (profile ? s_profile(self, &err) : s_train(self, &err)) == 0;
    if (!ok && !atomic_load(&self->abort)) {
        char text[GPP_MSG_STR_MAX];
        if (profile)
            snprintf(text, sizeof text, "%s: %s", self->phase, err.msg);
        else
            snprintf(text, sizeof text, "stage %d replica %d: %s: %s", self->as->stage,
                     self->as->replica, self->phase, err.msg);
        gpp_error("runner: %s", text);
        s_post_error(self,
                     strstr(err.msg, "comm") || strstr(err.msg, "gloo")
                         ? GPP__ERROR_CODE__ERROR_COMM
                         : GPP__ERROR_CODE__ERROR_INTERNAL,
                     text);
    }
    if (ok && !profile) /* keep the communicator up until every agent has finished */
        while (s_wait_word(self) >= 0)
            ;
    s_teardown(self);
    zmsg_t *zm = zmsg_new();
    zmsg_addstr(zm, "done");
    zmsg_addstr(zm, ok && !atomic_load(&self->abort) ? "1" : "0");
    zmsg_send(&zm, self->wpipe);
    return NULL;
}

/* ---- main thread ---- */

static int s_on_pipe(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    gpp_runner_t *self = arg;
    zmsg_t *zm = zmsg_recv(sock);
    if (!zm)
        return 0;
    char *w = zmsg_popstr(zm);
    int rc = 0;
    if (w && strcmp(w, "fwd") == 0) {
        zframe_t *f = zmsg_pop(zm);
        gpp_err_t err = {{0}};
        if (f && gpp_control_forward(self->ctl, zframe_data(f), zframe_size(f), &err) < 0)
            gpp_warn("runner: %s", err.msg);
        zframe_destroy(&f);
    } else if (w && strcmp(w, "done") == 0) {
        char *ok = zmsg_popstr(zm);
        self->ok = ok && ok[0] == '1';
        free(ok);
        atomic_store(&self->done, 1);
        zloop_reader_end(self->loop, self->pipe);
        rc = self->cfg.on_done ? self->cfg.on_done(self->cfg.arg, self->ok) : 0;
    }
    free(w);
    zmsg_destroy(&zm);
    return rc;
}

gpp_runner_t *gpp_runner_start(gpp_msg_t **assignment_p, const gpp_runner_cfg_t *cfg, zloop_t *loop,
                               gpp_control_t *ctl, gpp_err_t *err)
{
    assert(assignment_p && *assignment_p && cfg && loop && ctl);
    assert((*assignment_p)->body_case == GPP__ENVELOPE__BODY_ASSIGNMENT ||
           (*assignment_p)->body_case == GPP__ENVELOPE__BODY_PROFILE_REQUEST);
    gpp_runner_t *self = gpp_xcalloc(1, sizeof *self);
    self->msg = *assignment_p;
    *assignment_p = NULL;
    self->as =
        self->msg->body_case == GPP__ENVELOPE__BODY_ASSIGNMENT ? self->msg->assignment : NULL;
    self->cfg = *cfg;
    self->loop = loop;
    self->ctl = ctl;
    snprintf(self->host, sizeof self->host, "%s", cfg->host ? cfg->host : "");
    pthread_mutex_init(&self->mu, NULL);
    self->pipe = zsys_create_pipe(&self->wpipe);
    if (!self->pipe) {
        gpp_err_set(err, "runner: cannot create the worker pipe");
        goto fail;
    }
    if (zloop_reader(loop, self->pipe, s_on_pipe, self) < 0) {
        gpp_err_set(err, "runner: zloop_reader failed");
        goto fail;
    }
    int rc = pthread_create(&self->th, NULL, s_worker, self);
    if (rc != 0) {
        gpp_err_set(err, "runner: pthread_create: %s", strerror(rc));
        goto fail;
    }
    self->th_started = 1;
    return self;
fail:
    gpp_runner_destroy(&self);
    return NULL;
}

void gpp_runner_release(gpp_runner_t *self, int barrier_id)
{
    zmsg_t *zm = zmsg_new();
    zmsg_addstr(zm, "release");
    zmsg_addstrf(zm, "%d", barrier_id);
    zmsg_send(&zm, self->pipe);
}

void gpp_runner_stop(gpp_runner_t *self, int abort)
{
    if (atomic_load(&self->done))
        return;
    if (abort) {
        atomic_store(&self->abort, 1);
        pthread_mutex_lock(&self->mu);
        if (self->comm)
            gpp_comm_abort(self->comm, "the job was stopped");
        pthread_mutex_unlock(&self->mu);
    }
    zstr_send(self->pipe, "stop");
}

int gpp_runner_done(const gpp_runner_t *self)
{
    return atomic_load(&self->done);
}

void gpp_runner_destroy(gpp_runner_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_runner_t *self = *self_p;
    *self_p = NULL;
    if (self->th_started) {
        if (!atomic_load(&self->done))
            gpp_runner_stop(self, 1);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += S_JOIN_GRACE_MS / 1000;
        if (pthread_timedjoin_np(self->th, NULL, &ts) != 0) {
            /* stuck in a blocking rendezvous: the process is ending anyway */
            gpp_warn("runner: worker still %s after %d ms; leaving it", self->phase,
                     S_JOIN_GRACE_MS);
            return;
        }
    }
    zloop_reader_end(self->loop, self->pipe);
    zsock_destroy(&self->pipe);
    zsock_destroy(&self->wpipe);
    gpp_msg_destroy(&self->msg);
    pthread_mutex_destroy(&self->mu);
    free(self);
}
