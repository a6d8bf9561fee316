/* gpp_worker: the agent's worker thread. See gpp_worker.h. */
#include "agent/gpp_worker.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "agent/data/gpp_data.h"
#include "agent/pipeline/gpp_pipeline.h"
#include "agent/exec/gpp_profile.h"
#include "common/gpp_fault.h"
#include "common/gpp_sigfd.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_model.h"
#include "model/gpp_optable.h"
#include "proto/gpp_msg_profile.h"

#define S_JOIN_GRACE_MS 5000 /* a worker stuck in a rendezvous is left behind after this */

struct gpp_worker_s {
    /* shared between the threads */
    pthread_t th;
    int th_started;
    atomic_int stopping;      /* stop(abort) was called: failures are not reported */
    atomic_int done;          /* the thread has ended */
    gpp_pipeline_t *pipeline; /* training; made before the thread starts */

    /* main thread */
    zloop_t *loop;
    gpp_control_t *ctl;
    zsock_t *pipe; /* main end */
    gpp_worker_cfg_t cfg;
    int ok;

    /* the worker thread's (made by gpp_worker_start before the thread runs) */
    zsock_t *wpipe; /* worker end */
    gpp_msg_t *msg; /* the Assignment or ProfileRequest envelope, owned */
    char host[256];
    gpp_action_t *actions; /* [n_actions] the assignment's list, converted */
    int *peer_ranks;       /* [n_actions] */
    gpp_pipeline_cfg_t pcfg;
};

/* ---- worker -> main ---- */

static void s_post(gpp_worker_t *self, gpp_msg_t *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    gpp_err_t err = {{0}};
    if (gpp_msg_encode(m, &buf, &len, &err) < 0) {
        gpp_error("worker: %s", err.msg);
        return;
    }
    zmsg_t *zm = zmsg_new();
    zmsg_addstr(zm, "fwd");
    zmsg_addmem(zm, buf, len);
    free(buf);
    zmsg_send(&zm, self->wpipe);
}

/* failed_peer: the comm rank whose connection failed (ERROR_COMM), -1 none */
static void s_post_error(gpp_worker_t *self, int code, const char *text, int failed_peer)
{
    Gpp__Error e = GPP__ERROR__INIT;
    e.code = code;
    if (code == GPP__ERROR_CODE__ERROR_COMM && failed_peer >= 0)
        e.failed_peer = failed_peer + 1;
    char buf[GPP_MSG_STR_MAX];
    snprintf(buf, sizeof buf, "%s", text);
    e.text = buf;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_ERROR, &e);
    s_post(self, &m);
}

/* Waits for a word from the main thread: the barrier id for "release", -1
 * for "stop". */
static int s_wait_word(gpp_worker_t *self)
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

/* ---- the pipeline's callbacks, on the worker thread ---- */

static void s_on_ready(void *arg)
{
    gpp_worker_t *self = arg;
    Gpp__Ready rd = GPP__READY__INIT;
    rd.stage = self->pcfg.stage;
    rd.replica = self->pcfg.replica;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_READY, &rd);
    s_post(self, &m);
}

static int s_barrier(void *arg, int barrier_id)
{
    gpp_worker_t *self = arg;
    Gpp__BarrierEnter be = GPP__BARRIER_ENTER__INIT;
    be.barrier_id = barrier_id;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_BARRIER_ENTER, &be);
    s_post(self, &m);
    return s_wait_word(self) == barrier_id ? 0 : -1;
}

static void s_on_metrics(void *arg, const gpp_pipeline_metrics_t *pm)
{
    gpp_worker_t *self = arg;
    Gpp__Metrics mt = GPP__METRICS__INIT;
    mt.iteration = pm->iteration - self->pcfg.start_iteration;
    mt.n_action_ms = (size_t)pm->n_actions;
    mt.action_ms = (double *)pm->action_ms;
    /* only the iteration the coordinator traces (gpp-coordinator --trace) */
    const Gpp__Assignment *as = self->msg->assignment;
    if (as->trace && mt.iteration == as->trace_iteration) {
        mt.n_action_start_us = mt.n_action_end_us = (size_t)pm->n_actions;
        mt.action_start_us = (int64_t *)pm->action_start_us;
        mt.action_end_us = (int64_t *)pm->action_end_us;
    }
    mt.iteration_ms = pm->iteration_ms;
    mt.bubble_ms = pm->bubble_ms;
    mt.mem_high_water_bytes = pm->mem_high_water_bytes;
    mt.device_mem_peak_bytes = pm->device_mem_peak_bytes;
    mt.device_mem_backend_bytes = pm->device_mem_backend_bytes;
    mt.has_loss = pm->has_loss;
    mt.loss = pm->loss;
    mt.samples = pm->samples;
    Gpp__OpDigest *dg = gpp_xcalloc((size_t)pm->n_digests + 1, sizeof *dg);
    Gpp__OpDigest **dgp = gpp_xcalloc((size_t)pm->n_digests + 1, sizeof *dgp);
    for (int i = 0; i < pm->n_digests; i++) {
        gpp__op_digest__init(&dg[i]);
        dg[i].op = pm->digest_ops[i];
        dg[i].sha256.len = 32;
        dg[i].sha256.data = (uint8_t *)pm->digests[i];
        dgp[i] = &dg[i];
    }
    mt.n_op_digests = (size_t)pm->n_digests;
    mt.op_digests = dgp;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_METRICS, &mt);
    s_post(self, &m);
    free(dgp);
    free(dg);
}

/* ---- the assignment, as the pipeline's configuration ---- */

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

/* Converts the validated Assignment into the pipeline's configuration
 * (arrays owned by the worker, strings by the message). */
static int s_pipeline_cfg(gpp_worker_t *self, gpp_err_t *err)
{
    const Gpp__Assignment *as = self->msg->assignment;
    const size_t n = as->n_actions ? as->n_actions : 1;
    self->actions = gpp_xcalloc(n, sizeof *self->actions);
    self->peer_ranks = gpp_xcalloc(n, sizeof *self->peer_ranks);
    for (size_t i = 0; i < as->n_actions; i++) {
        const Gpp__Action *x = as->actions[i];
        gpp_action_t *a = &self->actions[i];
        *a = (gpp_action_t){.type = (gpp_act_type_t)x->type,
                            .mb = x->mb,
                            .peer_stage = x->peer_stage,
                            .peer_replica = x->peer_replica,
                            .tensor = x->tensor,
                            .lo = x->lo,
                            .hi = x->hi};
        self->peer_ranks[i] = -1;
        if (a->type < GPP_ACT_SEND_ACT || a->type > GPP_ACT_RECV_GRAD)
            continue;
        /* activations go downstream, gradients upstream: the tensor is ours
         * when we send activations or receive gradients */
        int ours = a->type == GPP_ACT_SEND_ACT || a->type == GPP_ACT_RECV_GRAD;
        self->peer_ranks[i] = s_peer_rank(as, x->peer_stage, x->peer_replica, a->tensor, ours, err);
        if (self->peer_ranks[i] < 0)
            return gpp_err_prefix(err, "action %zu", i);
    }
    const Gpp__HyperParams *h = as->hyper;
    const gpp_device_kind_t kind = gpp_msg_backend_of(as->backend);
    const int cuda = kind == GPP_DEVICE_CUDA;
    for (size_t i = 0; i < as->n_actions; i++) /* zero-bubble B and W passes */
        if (self->actions[i].type == GPP_ACT_BWD_IN || self->actions[i].type == GPP_ACT_BWD_W)
            return gpp_err_set(
                err,
                "action %zu (%s): the assignment's schedule is zero-bubble (zb-h1/zb-h2), %s; "
                "use schedule = \"1f1b\" or \"auto\"%s",
                i, gpp_act_type_name(self->actions[i].type),
                cuda ? "but the cuda backend has no split backward (B and W passes)"
                     : "which the agents do not run yet",
                cuda ? ", or backend = \"cpu\"" : "");
    if (cuda && self->cfg.gpu < 0)
        return gpp_err_set(err, "the assignment asks for backend cuda, but this agent registered "
                                "without a GPU (start it with --gpu N or --backend cuda on a GPU "
                                "host)");
    self->pcfg = (gpp_pipeline_cfg_t){
        .model = as->model,
        .stage = as->stage,
        .replica = as->replica,
        .replicas = as->replicas,
        .n_ops = (int)as->n_ops,
        .ops = as->ops,
        .micro_batch = as->micro_batch,
        .batch = as->batch,
        .n_actions = (int)as->n_actions,
        .actions = self->actions,
        .peer_ranks = self->peer_ranks,
        .dp_ranks = as->dp_ranks,
        .comm_order = as->comm_order,
        .n_comm_order = (int)as->n_comm_order,
        .comm_backend = as->comm->backend,
        .optim = {.kind = gpp_msg_optimizer_of(h->optimizer),
                  .lr = (float)h->lr,
                  .weight_decay = (float)h->weight_decay,
                  .momentum = (float)h->momentum,
                  .beta1 = (float)h->beta1,
                  .beta2 = (float)h->beta2,
                  .eps = (float)h->eps},
        .seed = as->seed,
        .iterations = as->iterations,
        .start_iteration = as->start_iteration,
        .checkpoint_dir = as->checkpoint_dir,
        .data = as->data,
        .checkpoint_interval = as->checkpoint_interval,
        .threads = self->cfg.threads,
        .device_kind = kind,
        .device = cuda ? self->cfg.gpu : 0,
        .precision = gpp_msg_precision_of(as->precision),
        .graphs = as->cuda_graphs,
        .bf16_tensors = as->bf16_tensors,
        .rdv_endpoint = as->comm->rdv_endpoint,
        .rdv_token = as->comm->rdv_token,
        .prefix = as->comm->prefix,
        .world_size = as->comm->world_size,
        .rank = as->comm->rank,
        .host = self->host,
        .comm_timeout_ms = self->cfg.comm_timeout_ms};
    gpp_pipeline_callbacks_t cb = {s_on_ready, s_barrier, s_on_metrics, self};
    self->pipeline = gpp_pipeline_new(&self->pcfg, &cb, err);
    return self->pipeline ? 0 : -1;
}

/* ---- the thread ---- */

/* Sends the ProfileResult of rows [n], naming the backend's device. */
static void s_post_profile(gpp_worker_t *self, gpp_backend_t *be, const gpp_profile_row_t *rows,
                           size_t n)
{
    Gpp__OpProfile *msgs = gpp_xcalloc(n + 1, sizeof *msgs);
    Gpp__OpProfile **ptrs = gpp_xcalloc(n + 1, sizeof *ptrs);
    gpp_msg_profile_pack(rows, n, msgs, ptrs);
    Gpp__ProfileResult res = GPP__PROFILE_RESULT__INIT;
    res.n_ops = n;
    res.ops = ptrs;
    char devname[GPP_MSG_DEVICE_NAME_MAX + 1];
    snprintf(devname, sizeof devname, "%s", gpp_backend_device_name(be));
    res.device_name = devname;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_PROFILE_RESULT, &res);
    s_post(self, &m);
    free(ptrs);
    free(msgs);
}

/* Answers a figures-only ProfileRequest: each executable op's kernel stash
 * and stream workspace on this agent's backend (what the executor will
 * keep and reserve), one row per op at micro-batch 1 with times 0, without
 * running anything or allocating the model. */
static void s_figures(gpp_worker_t *self, const gpp_graph_t *g, gpp_backend_t *be)
{
    gpp_profile_row_t *rows = gpp_xcalloc((size_t)g->n_ops + 1, sizeof *rows);
    size_t n = 0;
    for (int i = 0; i < g->n_ops; i++) {
        const gpp_op_t *op = &g->ops[i];
        if (gpp_optable[op->type].role == GPP_ROLE_OPAQUE)
            continue; /* a profile graph's: nothing runs it */
        rows[n++] = (gpp_profile_row_t){.op = i,
                                        .micro_batch = 1,
                                        .has_fwd = 1,
                                        .has_kernel_stash = 1,
                                        .kernel_stash = gpp_backend_op_kernel_stash(be, g, op),
                                        .has_out_bytes = op->out_bytes > 0,
                                        .out_bytes = gpp_backend_op_out_bytes(be, g, op),
                                        .has_workspace = 1,
                                        .workspace = gpp_backend_op_workspace(be, g, op)};
    }
    s_post_profile(self, be, rows, n);
    free(rows);
}

/* Times every op of the model at the requested micro-batch sizes
 * (gpp_profile, the same code as gpp-train --profile-out) and reports the
 * measured forward and backward of each op and size as rows. */
static int s_profile(gpp_worker_t *self, gpp_err_t *err)
{
    const Gpp__ProfileRequest *rq = self->msg->profile_request;
    int rc = -1, max_mb = 1, *ops = NULL;
    gpp_profile_t *prof = NULL;
    gpp_backend_t *be = NULL;
    gpp_data_t *data = NULL;
    gpp_graph_t *g = gpp_model_load(rq->model, err);
    if (!g)
        goto out;
    /* where the job trains: a cuda job's ops are timed on this agent's GPU
     * (CUDA events, gpp_profile.h) at the job's precision */
    const gpp_device_kind_t kind = gpp_msg_backend_of(rq->backend);
    const int cuda = kind == GPP_DEVICE_CUDA;
    if (cuda && self->cfg.gpu < 0) {
        gpp_err_set(err, "asked to profile on a GPU, but this agent has none (start it with "
                         "gpp-agent --gpu N, or set backend = \"cpu\" in the cluster file)");
        goto out;
    }
    gpp_backend_cfg_t bc = {.kind = kind,
                            .device = cuda ? self->cfg.gpu : 0,
                            .cpu_threads = self->cfg.threads,
                            .precision = gpp_msg_precision_of(rq->precision),
                            .bf16_tensors = rq->bf16_tensors};
    if (!(be = gpp_backend_new(&bc, err)))
        goto out;
    if (rq->figures_only) { /* no timing: the backend's layouts */
        s_figures(self, g, be);
        rc = 0;
        goto out;
    }
    data = gpp_data_new(g, 1);
    for (size_t i = 0; i < rq->n_micro_batches; i++)
        if (rq->micro_batches[i] > max_mb)
            max_mb = rq->micro_batches[i];
    ops = gpp_xcalloc((size_t)g->n_ops, sizeof *ops);
    for (int i = 0; i < g->n_ops; i++)
        ops[i] = i;
    gpp_profile_cfg_t pc = {.max_micro_batch = max_mb, .reps = rq->iterations, .seed = 1};
    if (!(prof = gpp_profile_measure(g, g->n_ops, ops, be, data, &pc, err)))
        goto out;
    s_post_profile(self, be, prof->rows, prof->n_rows);
    rc = 0;
out:
    gpp_profile_destroy(&prof);
    free(ops);
    gpp_data_destroy(&data);
    gpp_backend_destroy(&be);
    gpp_graph_destroy(&g);
    if (rc < 0)
        gpp_err_prefix(err, "profiling %s", rq->model);
    return rc;
}

/* A data-plane bind or connect that found no free port: say which range
 * ran out (the kernel's ephemeral ports; Gloo binds port 0) and the fix. */
static void s_port_hint(char *text, size_t cap)
{
    if (!strstr(text, "Address already in use") && !strstr(text, "Cannot assign requested address"))
        return;
    int lo = 0, hi = -1;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f && fscanf(f, "%d %d", &lo, &hi) != 2)
        hi = -1;
    if (f)
        fclose(f);
    size_t len = strlen(text);
    if (hi >= lo)
        snprintf(text + len, cap - len,
                 " (no free port: this host's ephemeral range net.ipv4.ip_local_port_range is "
                 "%d-%d, %d ports; the data plane takes about n*(n+2) for n agents on a host, "
                 "290 for 16: widen it, e.g. sysctl -w net.ipv4.ip_local_port_range=\"32768 "
                 "60999\"; docs/operations.md, Ports to open)",
                 lo, hi, hi - lo + 1);
}

static void *s_thread(void *arg)
{
    gpp_worker_t *self = arg;
    gpp_sigfd_mask(SIG_BLOCK); /* signals are the loop thread's; Gloo's threads inherit this */
    gpp_err_t err = {{0}};
    if (self->pipeline && gpp_fault(GPP_FAULT_WORKER_STUCK)) {
        int64_t ms = gpp_fault_arg(GPP_FAULT_WORKER_STUCK);
        gpp_warn("worker: fault worker_stuck: blocking %" PRId64 " ms before the data plane", ms);
        struct timespec left = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
        while (nanosleep(&left, &left) < 0 && errno == EINTR)
            ;
    }
    int ok = (self->pipeline ? gpp_pipeline_run(self->pipeline, &err) : s_profile(self, &err)) == 0;
    if (!ok && !atomic_load(&self->stopping)) {
        char text[GPP_MSG_STR_MAX];
        if (self->pipeline)
            snprintf(text, sizeof text, "stage %d replica %d: %s", self->pcfg.stage,
                     self->pcfg.replica, err.msg);
        else
            snprintf(text, sizeof text, "%s", err.msg);
        s_port_hint(text, sizeof text);
        gpp_error("worker: %s", text);
        int peer = self->pipeline ? gpp_pipeline_failed_peer(self->pipeline) : -1;
        int code =
            self->pipeline && gpp_pipeline_bad_input(self->pipeline) ? GPP__ERROR_CODE__ERROR_CONFIG
            : peer >= 0 || strstr(err.msg, "comm") || strstr(err.msg, "gloo") ||
                    strstr(err.msg, "nccl")
                ? GPP__ERROR_CODE__ERROR_COMM
            : strstr(err.msg, "cuda") || strstr(err.msg, "CUDA") ? GPP__ERROR_CODE__ERROR_DEVICE
                                                                 : GPP__ERROR_CODE__ERROR_INTERNAL;
        s_post_error(self, code, text, peer);
    }
    if (ok && self->pipeline) /* keep the communicator up until every agent has finished */
        while (s_wait_word(self) >= 0)
            ;
    zmsg_t *zm = zmsg_new();
    zmsg_addstr(zm, "done");
    zmsg_addstr(zm, ok && !atomic_load(&self->stopping) ? "1" : "0");
    zmsg_send(&zm, self->wpipe);
    return NULL;
}

/* ---- main thread ---- */

static int s_on_pipe(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    gpp_worker_t *self = arg;
    zmsg_t *zm = zmsg_recv(sock);
    if (!zm)
        return 0;
    char *w = zmsg_popstr(zm);
    int rc = 0;
    if (w && strcmp(w, "fwd") == 0) {
        zframe_t *f = zmsg_pop(zm);
        gpp_err_t err = {{0}};
        if (f && gpp_control_forward(self->ctl, zframe_data(f), zframe_size(f), &err) < 0)
            gpp_warn("worker: %s", err.msg);
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

gpp_worker_t *gpp_worker_start(gpp_msg_t **msg_p, const gpp_worker_cfg_t *cfg, zloop_t *loop,
                               gpp_control_t *ctl, gpp_err_t *err)
{
    assert(msg_p && *msg_p && cfg && loop && ctl);
    assert((*msg_p)->body_case == GPP__ENVELOPE__BODY_ASSIGNMENT ||
           (*msg_p)->body_case == GPP__ENVELOPE__BODY_PROFILE_REQUEST);
    gpp_worker_t *self = gpp_xcalloc(1, sizeof *self);
    self->msg = *msg_p;
    *msg_p = NULL;
    self->cfg = *cfg;
    self->loop = loop;
    self->ctl = ctl;
    snprintf(self->host, sizeof self->host, "%s", cfg->host ? cfg->host : "");
    if (self->msg->body_case == GPP__ENVELOPE__BODY_ASSIGNMENT && s_pipeline_cfg(self, err) < 0)
        goto fail;
    self->pipe = zsys_create_pipe(&self->wpipe);
    if (!self->pipe) {
        gpp_err_set(err, "worker: cannot create the worker pipe");
        goto fail;
    }
    if (zloop_reader(loop, self->pipe, s_on_pipe, self) < 0) {
        gpp_err_set(err, "worker: zloop_reader failed");
        goto fail;
    }
    int rc = pthread_create(&self->th, NULL, s_thread, self);
    if (rc != 0) {
        gpp_err_set(err, "worker: pthread_create: %s", strerror(rc));
        goto fail;
    }
    self->th_started = 1;
    return self;
fail:
    gpp_worker_destroy(&self);
    return NULL;
}

void gpp_worker_release(gpp_worker_t *self, int barrier_id)
{
    zmsg_t *zm = zmsg_new();
    zmsg_addstr(zm, "release");
    zmsg_addstrf(zm, "%d", barrier_id);
    zmsg_send(&zm, self->pipe);
}

void gpp_worker_stop(gpp_worker_t *self, int abort)
{
    if (atomic_load(&self->done))
        return;
    if (abort) {
        atomic_store(&self->stopping, 1);
        if (self->pipeline)
            gpp_pipeline_abort(self->pipeline, "the job was stopped");
    }
    zstr_send(self->pipe, "stop");
}

int gpp_worker_done(const gpp_worker_t *self)
{
    return atomic_load(&((gpp_worker_t *)self)->done);
}

void gpp_worker_abandon(gpp_worker_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_worker_t *self = *self_p;
    if (!self->th_started || atomic_load(&self->done)) {
        gpp_worker_destroy(self_p);
        return;
    }
    *self_p = NULL;
    zloop_reader_end(self->loop, self->pipe);
    pthread_detach(self->th);
}

void gpp_worker_destroy(gpp_worker_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_worker_t *self = *self_p;
    *self_p = NULL;
    if (self->th_started) {
        if (!atomic_load(&self->done))
            gpp_worker_stop(self, 1);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += S_JOIN_GRACE_MS / 1000;
        if (pthread_timedjoin_np(self->th, NULL, &ts) != 0) {
            /* stuck in a blocking rendezvous: the process is ending anyway */
            gpp_warn("worker: still running after %d ms; leaving it", S_JOIN_GRACE_MS);
            return;
        }
    }
    gpp_pipeline_destroy(&self->pipeline);
    if (self->pipe)
        zloop_reader_end(self->loop, self->pipe);
    zsock_destroy(&self->pipe);
    zsock_destroy(&self->wpipe);
    gpp_msg_destroy(&self->msg);
    free(self->actions);
    free(self->peer_ranks);
    free(self);
}
