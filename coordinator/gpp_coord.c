/* gpp_coord: see gpp_coord.h. */
#include "coordinator/gpp_coord.h"

#include <assert.h>
#include <czmq.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/time.h>

#include "common/gpp_fault.h"
#include "common/gpp_net.h"
#include "common/gpp_notify.h"
#include "common/gpp_sigfd.h"
#include "common/gpp_time.h"
#include "common/gpp_zsock.h"
#include "coordinator/gpp_coord_imp.h"
#include "coordinator/gpp_expo.h"

#define S_EXIT_GRACE_MS 10000 /* after Shutdown/Abort, wait this long for local agents */
#define S_LINGER_MS 300       /* external agents: let the last messages go out */
#define S_RCVHWM 16           /* frames queued per peer (gpp_coord_new) */

const char *const gpp_coord_state_name[S_N_STATES] = {
    "waiting", "profiling", "planning", "assigning", "rendezvous", "training", "done"};

static gpp_monitor_render_fn s_render;

/* ---- sending ---- */

static int s_send_to(gpp_coord_t *self, const void *id, size_t id_len, uint64_t seq, gpp_msg_t *m)
{
    m->seq = seq;
    m->sender = GPP_MSG_SENDER_COORD;
    gpp_err_t err = {{0}};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (gpp_msg_encode(m, &buf, &len, &err) < 0) {
        gpp_error("coordinator: %s", err.msg);
        return -1;
    }
    /* never blocks: with ROUTER_MANDATORY a full or unknown peer is an error
     * (EAGAIN / EHOSTUNREACH), reported and survived */
    zframe_t *fid = zframe_new(id, id_len), *fbody = zframe_new(buf, len);
    free(buf);
    int rc = zframe_send(&fid, self->router, ZFRAME_MORE | ZFRAME_DONTWAIT);
    if (rc == 0)
        rc = zframe_send(&fbody, self->router, ZFRAME_DONTWAIT);
    int e = zmq_errno();
    /* a Reject goes to a peer that is no agent: often gone already (a flood
     * of hostile frames outlives its senders in our queue), not news */
    if (rc < 0 && m->body_case != GPP__ENVELOPE__BODY_REJECT)
        gpp_warn("coordinator: cannot send %s: %s", gpp_msg_type_name(m->body_case),
                 zmq_strerror(e));
    zframe_destroy(&fid);
    zframe_destroy(&fbody);
    errno = e; /* for the caller: EHOSTUNREACH is a peer gone */
    return rc;
}

int gpp_coord_send(gpp_coord_t *self, gpp_agent_t *a, gpp_msg_t *m)
{
    return s_send_to(self, a->id, a->id_len, ++a->sent_seq, m);
}

static void s_send_reject(gpp_coord_t *self, const void *id, size_t id_len, const char *reason)
{
    Gpp__Reject rj = GPP__REJECT__INIT;
    char buf[GPP_MSG_STR_MAX];
    snprintf(buf, sizeof buf, "%s", reason && reason[0] ? reason : "rejected");
    rj.reason = buf;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_REJECT, &rj);
    s_send_to(self, id, id_len, 1, &m);
}

/* Sends a body-less-ish message to every alive agent (or only in-job ones). */
static void s_broadcast(gpp_coord_t *self, gpp_msg_t *m, int only_in_job)
{
    int n = gpp_registry_size(self->reg);
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(self->reg, r);
        if (a->state != GPP_AGENT_ALIVE || (only_in_job && !self->in_job[r]))
            continue;
        gpp_coord_send(self, a, m);
    }
}

static int64_t s_realtime_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* A heartbeat. When clock offsets are wanted (cfg.clock_round_trips) it
 * carries mono_us = t0, and the agent's immediate answer is a round trip;
 * else the agent does not answer it. */
static void s_ping(gpp_coord_t *self, gpp_agent_t *a)
{
    Gpp__Heartbeat hb = GPP__HEARTBEAT__INIT;
    hb.timestamp_us = s_realtime_us();
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_HEARTBEAT, &hb);
    if (self->cfg.clock_round_trips > 0) {
        a->clock_pings++;
        hb.mono_us = gpp_now_us(); /* last: the agent answers at once */
    }
    gpp_coord_send(self, a, &m);
}

/* ---- stopping ---- */

static void s_enter_exit(gpp_coord_t *self)
{
    gpp_rdv_close(self->rdv, "the job ended");
    self->state = S_DONE;
    self->exit_deadline_ms = gpp_now_ms() + (self->cfg.launch ? S_EXIT_GRACE_MS : S_LINGER_MS);
}

/* Stops the job: Abort to every live agent, naming the reason. */
void gpp_coord_abort(gpp_coord_t *self, const char *fmt, ...)
{
    if (self->stopped)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(self->reason, sizeof self->reason, fmt, ap);
    va_end(ap);
    if (self->reporters[0]) { /* peers of the agent that went: not the cause */
        size_t len = strlen(self->reason);
        snprintf(self->reason + len, sizeof self->reason - len,
                 "; agent%s %s only reported a broken connection",
                 strchr(self->reporters, ',') ? "s" : "", self->reporters);
    }
    self->stopped = -1;
    atomic_store(&self->cancel, 1);
    if (!self->exit_code)
        self->exit_code = 1;
    gpp_error("coordinator: job stopped in state %s: %s", gpp_coord_state_name[self->state],
              self->reason);
    Gpp__Abort ab = GPP__ABORT__INIT;
    ab.reason = self->reason;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_ABORT, &ab);
    s_broadcast(self, &m, 0);
    int n = gpp_registry_size(self->reg);
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(self->reg, r);
        if (a->state == GPP_AGENT_ALIVE)
            a->state = GPP_AGENT_EXITED;
    }
    s_enter_exit(self);
}

void gpp_coord_shutdown_agent(gpp_coord_t *self, gpp_agent_t *a)
{
    Gpp__Shutdown sd = GPP__SHUTDOWN__INIT;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_SHUTDOWN, &sd);
    gpp_coord_send(self, a, &m);
    a->state = GPP_AGENT_EXITED;
}

void gpp_coord_finish(gpp_coord_t *self)
{
    gpp_info("coordinator: job finished; shutting down %d agents",
             gpp_registry_count(self->reg, GPP_AGENT_ALIVE));
    int n = gpp_registry_size(self->reg);
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(self->reg, r);
        if (a->state == GPP_AGENT_ALIVE)
            gpp_coord_shutdown_agent(self, a);
    }
    s_enter_exit(self);
}

/* ---- state transitions ---- */

/* Agents may already have entered barrier 0 (right after their Ready):
 * those entries stay counted. */
static void s_start_barrier_phase(gpp_coord_t *self)
{
    self->barrier_release_ms = gpp_now_ms();
}

/* ---- message handlers ---- */

void gpp_coord_drop(gpp_coord_t *self, const char *who, const char *why)
{
    self->dropped++;
    gpp_warn("coordinator: dropped a message from %s (%llu dropped so far): %s", who,
             (unsigned long long)self->dropped, why);
}

/* Logged refusals of frames from peers that are no agent of the job: the
 * first ones one by one, then one line per S_REFUSE_LOG_EVERY, like the ZAP
 * handler's (common/gpp_curve.c): a flood of hostile frames (bench/flood.sh:
 * 2.5 MB of log per second) must not fill the disk under the log. */
#define S_REFUSE_LOG_FIRST 20
#define S_REFUSE_LOG_EVERY 1000

/* A frame of an unregistered peer refused: counted, logged (see above),
 * answered with a Reject. */
static void s_refuse(gpp_coord_t *self, const void *id, size_t id_len, const char *what,
                     const char *why)
{
    self->dropped++;
    uint64_t n = ++self->refused;
    if (n <= S_REFUSE_LOG_FIRST)
        gpp_warn("coordinator: %s (%llu refused so far): %s", what, (unsigned long long)n, why);
    else if (n % S_REFUSE_LOG_EVERY == 0)
        gpp_warn("coordinator: %s (%llu refused so far, one in %d logged): %s", what,
                 (unsigned long long)n, S_REFUSE_LOG_EVERY, why);
    s_send_reject(self, id, id_len, why);
}

static void s_on_register(gpp_coord_t *self, const gpp_msg_t *m, const void *id, size_t id_len,
                          const char *user_id)
{
    gpp_err_t err = {{0}};
    const int bound = gpp_curve_server_slot(self->cfg.curve, user_id); /* -1: any */
    if (bound >= 0 && bound != m->register_->slot) {
        gpp_err_set(&err,
                    "its CURVE key (%s) admits slot %d only, but it registered for slot %d: "
                    "start it with --slot %d, or give it slot %d's key (agent-%d.key_secret)",
                    strchr(user_id, ':') + 1, bound, m->register_->slot, bound, m->register_->slot,
                    m->register_->slot);
    } else if (self->state != S_WAITING) {
        gpp_err_set(&err, "registration closed: the job is already %s",
                    gpp_coord_state_name[self->state]);
    } else if (m->sender != GPP_MSG_SENDER_UNREGISTERED) {
        gpp_err_set(&err, "register with sender %d, expected -2", m->sender);
    } else if (strcmp(m->register_->build_version, GPP_VERSION) != 0) {
        gpp_err_set(&err, "agent build %s, coordinator build %s; run the same gpp build",
                    m->register_->build_version, GPP_VERSION);
    } else {
        gpp_agent_t *a =
            gpp_registry_register(self->reg, m->register_, id, id_len, gpp_now_ms(), &err);
        if (a && self->cfg.require_gpu && a->backend != GPP__BACKEND__BACKEND_CUDA) {
            char name[GPP_REG_HOST_MAX + 64];
            gpp_err_set(&err,
                        "agent %s on host %s has no usable GPU (%s), but job.backend = \"cuda\"; "
                        "start it on a GPU with gpp-agent --gpu N (or --backend cuda), or set "
                        "backend = \"cpu\" in the cluster file",
                        gpp_agent_name(a, name, sizeof name), a->host,
                        a->device_error[0] ? a->device_error
                                           : "it registered as a CPU agent: started without "
                                             "--gpu / --backend cuda");
            s_send_reject(self, id, id_len, err.msg);
            self->exit_code = 2; /* the job's configuration does not fit its agents */
            gpp_coord_abort(self, "%s", err.msg);
            return;
        }
        if (a) {
            a->last_seq = m->seq;
            Gpp__RegisterAck ack = GPP__REGISTER_ACK__INIT;
            ack.rank = a->rank;
            ack.world_size = gpp_registry_size(self->reg);
            gpp_msg_t out;
            gpp_msg_wrap(&out, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_REGISTER_ACK, &ack);
            gpp_coord_send(self, a, &out);
            if (self->cfg.clock_round_trips > 0)
                s_ping(self, a);
            int have =
                gpp_registry_size(self->reg) - gpp_registry_count(self->reg, GPP_AGENT_EXPECTED);
            char name[GPP_REG_HOST_MAX + 64];
            if (a->gpu >= 0)
                gpp_info("coordinator: registered %s (%d/%d): GPU %d %s, %.1f GiB, %d SMs",
                         gpp_agent_name(a, name, sizeof name), have, gpp_registry_size(self->reg),
                         a->gpu, a->device_name, (double)a->mem_total_bytes / 1073741824.0,
                         a->sm_count);
            else
                gpp_info("coordinator: registered %s (%d/%d)", gpp_agent_name(a, name, sizeof name),
                         have, gpp_registry_size(self->reg));
            if (have == gpp_registry_size(self->reg))
                gpp_coord_profile_or_plan(self);
            return;
        }
    }
    char what[GPP_REG_HOST_MAX + 96];
    snprintf(what, sizeof what, "rejected a registration from %.*s:%d (pid %d)", GPP_REG_HOST_MAX,
             m->register_->host, m->register_->slot, m->register_->pid);
    s_refuse(self, id, id_len, what, err.msg);
}

static void s_on_barrier_enter(gpp_coord_t *self, gpp_agent_t *a, int id, const char *who)
{
    char why[256];
    /* control-only: agents may enter barrier 0 as soon as they are registered */
    int open = self->cfg.plan_fn ? (self->state >= S_ASSIGNING && self->state <= S_TRAINING)
                                 : (self->state == S_WAITING || self->state == S_TRAINING);
    if (!self->in_job[a->rank] || !open) {
        snprintf(why, sizeof why, "barrier_enter %d in state %s", id,
                 gpp_coord_state_name[self->state]);
        gpp_coord_drop(self, who, why);
        return;
    }
    if (id != self->barrier_id || a->barrier == id) {
        snprintf(why, sizeof why, "barrier_enter %d, but barrier %d is open and it entered %d", id,
                 self->barrier_id, a->barrier);
        gpp_coord_drop(self, who, why);
        return;
    }
    if (self->cfg.plan_fn && !a->ready) {
        snprintf(why, sizeof why, "barrier_enter %d before ready", id);
        gpp_coord_drop(self, who, why);
        return;
    }
    a->barrier = id;
    if (++self->barrier_count < self->n_in_job)
        return;
    /* everyone is in: release */
    double now = gpp_now_ms();
    if (id > 0) {
        if (self->n_barrier_ms == self->cap_barrier_ms) {
            self->cap_barrier_ms = self->cap_barrier_ms ? 2 * self->cap_barrier_ms : 64;
            self->barrier_ms =
                gpp_xrealloc(self->barrier_ms, (size_t)self->cap_barrier_ms * sizeof(double));
        }
        self->barrier_ms[self->n_barrier_ms++] = now - self->barrier_release_ms;
    }
    self->barrier_release_ms = now;
    Gpp__BarrierRelease rel = GPP__BARRIER_RELEASE__INIT;
    rel.barrier_id = id;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_BARRIER_RELEASE, &rel);
    s_broadcast(self, &m, 1);
    self->barrier_id++;
    self->barrier_count = 0;
    if (self->state == S_RENDEZVOUS && id == 0) {
        self->state = S_TRAINING;
        gpp_info("coordinator: all %d agents ready; training", self->n_in_job);
    } else if (!self->cfg.plan_fn && self->barrier_id == self->cfg.barriers) {
        gpp_coord_finish(self);
    }
}

static void s_on_ready(gpp_coord_t *self, gpp_agent_t *a, const Gpp__Ready *rd, const char *who)
{
    char why[256];
    if (self->state != S_ASSIGNING && self->state != S_RENDEZVOUS) {
        snprintf(why, sizeof why, "ready in state %s", gpp_coord_state_name[self->state]);
        gpp_coord_drop(self, who, why);
        return;
    }
    int stage = self->job.layout.stage_of_rank[a->rank];
    int replica = self->job.layout.replica_of_rank[a->rank];
    if (stage < 0 || rd->stage != stage || rd->replica != replica || a->ready) {
        snprintf(why, sizeof why, "ready for stage %d replica %d, assigned %d/%d%s", rd->stage,
                 rd->replica, stage, replica, a->ready ? " (already ready)" : "");
        gpp_coord_drop(self, who, why);
        return;
    }
    a->ready = 1;
    int ready = 0;
    for (int r = 0; r < gpp_registry_size(self->reg); r++)
        ready += gpp_registry_agent(self->reg, r)->ready;
    if (ready == self->n_in_job) {
        self->state = S_RENDEZVOUS;
        s_start_barrier_phase(self);
        gpp_info("coordinator: all %d agents brought up their communicators", ready);
    }
}

static void s_on_metrics(gpp_coord_t *self, gpp_agent_t *a, const Gpp__Metrics *mt, const char *who)
{
    if (self->state != S_TRAINING || !self->progress) {
        char why[128];
        snprintf(why, sizeof why, "metrics in state %s", gpp_coord_state_name[self->state]);
        gpp_coord_drop(self, who, why);
        return;
    }
    gpp_err_t err = {{0}};
    if (self->cfg.metrics_fn && self->cfg.metrics_fn(self->cfg.plan_arg, a->rank, mt, &err) < 0) {
        gpp_coord_drop(self, who, err.msg);
        return;
    }
    int completed = gpp_progress_add(self->progress, a->rank, mt, &err);
    if (completed == -2) { /* the metrics file: nothing the agent did */
        gpp_coord_abort(self, "%s", err.msg);
        return;
    }
    if (completed < 0) {
        gpp_coord_drop(self, who, err.msg);
        return;
    }
    a->iteration = mt->iteration;
    if (completed && self->cfg.iteration_fn) {
        gpp_progress_summary_t sum;
        gpp_progress_summary(self->progress, &sum);
        /* counted from the job's start: a resumed job's first is start + 1 */
        int done = self->job.layout.start_iteration + sum.iterations_done;
        if (self->cfg.iteration_fn(self->cfg.plan_arg, done, &err) < 0) {
            gpp_coord_abort(self, "%s", err.msg);
            return;
        }
    }
    if (gpp_progress_finished(self->progress))
        gpp_coord_finish(self);
}

/* An answer to one of our heartbeats is a round trip of the agent's clock
 * estimate (gpp.proto Heartbeat): t0 ours, t1 t2 its, t3 when it arrived. */
static void s_on_heartbeat(gpp_coord_t *self, gpp_agent_t *a, const Gpp__Heartbeat *hb,
                           const char *who)
{
    if (hb->echo_mono_us <= 0)
        return;
    if (gpp_clock_est_add(&a->clock, hb->echo_mono_us, hb->echo_recv_us, hb->mono_us, self->rx_us) <
            0 &&
        a->bad_clock++ == 0)
        gpp_warn("coordinator: %s: a heartbeat round trip with impossible times (sent %lld, "
                 "answered %lld..%lld, back %lld us); ignored",
                 who, (long long)hb->echo_mono_us, (long long)hb->echo_recv_us,
                 (long long)hb->mono_us, (long long)self->rx_us);
    if (a->clock_pings < self->cfg.clock_round_trips) /* the burst after registration */
        s_ping(self, a);
}

/* An agent's data plane broke (ERROR_COMM): its peer died or went silent,
 * or the link between them was cut. The stop waits up to a heartbeat
 * timeout for the agent that went (seen exiting or silent: the stop names
 * it), else stops with this first report (s_on_timer). */
static void s_comm_report(gpp_coord_t *self, gpp_agent_t *a, const char *text, const char *who)
{
    size_t len = strlen(self->reporters);
    snprintf(self->reporters + len, sizeof self->reporters - len, "%s%s", len ? ", " : "", who);
    a->comm_reported = 1;
    if (self->blame_ms > 0) {
        gpp_warn("coordinator: agent %s also reports a broken connection: %s", who, text);
        return;
    }
    self->blame_ms = gpp_now_ms() + self->cfg.timeout_ms + self->cfg.heartbeat_ms;
    self->agent_failed = 1;
    snprintf(self->first_report, sizeof self->first_report, "agent %s reported an error: %s", who,
             text);
    gpp_warn("coordinator: agent %s reports a broken connection (%s); waiting up to %.1f s for "
             "the agent that went",
             who, text, (self->cfg.timeout_ms + self->cfg.heartbeat_ms) / 1000.0);
}

static void s_on_agent_msg(gpp_coord_t *self, gpp_agent_t *a, const gpp_msg_t *m)
{
    char who[GPP_REG_HOST_MAX + 64];
    gpp_agent_name(a, who, sizeof who);
    char why[256];
    if (a->state != GPP_AGENT_ALIVE) {
        /* a late message from an agent we already told to go */
        if (a->state == GPP_AGENT_EXITED)
            return;
        snprintf(why, sizeof why, "%s from an agent marked dead", gpp_msg_type_name(m->body_case));
        gpp_coord_drop(self, who, why);
        return;
    }
    if (m->sender != a->rank) {
        snprintf(why, sizeof why, "sender %d, but it is rank %d", m->sender, a->rank);
        gpp_coord_drop(self, who, why);
        return;
    }
    if (m->seq <= a->last_seq) {
        snprintf(why, sizeof why, "seq %llu not after %llu", (unsigned long long)m->seq,
                 (unsigned long long)a->last_seq);
        gpp_coord_drop(self, who, why);
        return;
    }
    a->last_seq = m->seq;
    a->last_seen_ms = gpp_now_ms();
    if (m->body_case != GPP__ENVELOPE__BODY_HEARTBEAT)
        gpp_debug("coordinator: %s from %s", gpp_msg_type_name(m->body_case), who);
    switch (m->body_case) {
    case GPP__ENVELOPE__BODY_HEARTBEAT:
        s_on_heartbeat(self, a, m->heartbeat, who);
        return;
    case GPP__ENVELOPE__BODY_READY:
        s_on_ready(self, a, m->ready, who);
        return;
    case GPP__ENVELOPE__BODY_BARRIER_ENTER:
        s_on_barrier_enter(self, a, m->barrier_enter->barrier_id, who);
        return;
    case GPP__ENVELOPE__BODY_METRICS:
        s_on_metrics(self, a, m->metrics, who);
        return;
    case GPP__ENVELOPE__BODY_PROFILE_RESULT:
        gpp_coord_on_profile_result(self, a, m->profile_result, who);
        return;
    case GPP__ENVELOPE__BODY_ERROR:
        /* ERROR_CONFIG: the job's own input (model, data) is at fault: exit 2 */
        if (m->error->code == GPP__ERROR_CODE__ERROR_CONFIG && !self->exit_code)
            self->exit_code = 2;
        if (!self->stopped && m->error->code != GPP__ERROR_CODE__ERROR_CONFIG)
            self->agent_failed = 1;
        if (!self->stopped && self->failed_peer < 0 && m->error->failed_peer > 0 &&
            m->error->failed_peer <= gpp_registry_size(self->reg))
            self->failed_peer = m->error->failed_peer - 1;
        if (!self->stopped && m->error->code == GPP__ERROR_CODE__ERROR_COMM) {
            s_comm_report(self, a, m->error->text, who);
            return;
        }
        gpp_coord_abort(self, "agent %s reported an error: %s%s", who, m->error->text,
                        m->error->code == GPP__ERROR_CODE__ERROR_CONFIG
                            ? " (fix the cluster file's [job] and start again)"
                            : "");
        return;
    default:
        snprintf(why, sizeof why, "unexpected %s from an agent", gpp_msg_type_name(m->body_case));
        gpp_coord_drop(self, who, why);
        return;
    }
}

/* A monitor's request (its role was checked): the snapshot, or dropped. */
static void s_on_monitor_request(gpp_coord_t *self, const void *id, size_t id_len,
                                 const gpp_msg_t *m, const char *who)
{
    Gpp__MonitorReply rep;
    char why[256];
    if (!gpp_monitor_answer(self->monitor, id, id_len, m->seq, m->monitor_request, gpp_now_ms(),
                            &rep, why, sizeof why)) {
        gpp_coord_drop(self, who, why);
        return;
    }
    gpp_msg_t out;
    gpp_msg_wrap(&out, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_MONITOR_REPLY, &rep);
    s_send_to(self, id, id_len, 1, &out);
}

int gpp_coord_on_router(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    gpp_coord_t *self = arg;
    zmsg_t *zm = zmsg_recv(sock);
    if (!zm)
        return 0;
    self->rx_us = gpp_now_us();
    zframe_t *idf = zmsg_first(zm);
    zframe_t *body = zmsg_next(zm);
    const void *id = zframe_data(idf);
    size_t id_len = zframe_size(idf);
    gpp_agent_t *a = gpp_registry_find(self->reg, id, id_len);
    char who[GPP_REG_HOST_MAX + 64];
    if (a)
        gpp_agent_name(a, who, sizeof who);
    else
        snprintf(who, sizeof who, "an unregistered peer");
    gpp_err_t err = {{0}};
    gpp_msg_t *m = NULL;
    if (zmsg_size(zm) != 2)
        gpp_err_set(&err, "%zu frames, expected 1 after the routing id", zmsg_size(zm) - 1);
    else
        m = gpp_msg_decode(zframe_data(body), zframe_size(body), &err);
    /* what the peer's CURVE key lets it send: the ZAP user id on its frames */
    const char *refusal =
        m ? gpp_monitor_refusal(self->cfg.curve != NULL,
                                gpp_curve_user_role(zframe_meta(body, "User-Id")), m->body_case)
          : NULL;
    if (!m && a) {
        gpp_coord_drop(self, who, err.msg);
    } else if (!m) {
        s_refuse(self, id, id_len, "dropped a message from an unregistered peer", err.msg);
    } else if (refusal) {
        char why[512];
        snprintf(why, sizeof why, "%s: %s", gpp_msg_type_name(m->body_case), refusal);
        if (a)
            gpp_coord_drop(self, who, why);
        else
            s_refuse(self, id, id_len, "dropped a message from an unregistered peer", why);
    } else if (m->body_case == GPP__ENVELOPE__BODY_MONITOR_REQUEST) {
        s_on_monitor_request(self, id, id_len, m, a ? who : "a monitor");
    } else if (gpp_rdv_is_request(m)) {
        gpp_rdv_handle(self->rdv, id, id_len, m, gpp_now_ms());
    } else if (m->body_case == GPP__ENVELOPE__BODY_REGISTER && !a) {
        s_on_register(self, m, id, id_len, zframe_meta(body, "User-Id"));
    } else if (!a) {
        char why[128];
        snprintf(why, sizeof why, "%s before register", gpp_msg_type_name(m->body_case));
        s_refuse(self, id, id_len, "dropped a message from an unregistered peer", why);
    } else {
        s_on_agent_msg(self, a, m);
    }
    gpp_msg_destroy(&m);
    zmsg_destroy(&zm);
    return self->state == S_DONE && gpp_now_ms() > self->exit_deadline_ms ? -1 : 0;
}

/* ---- timers and signals ---- */

/* The job for /metrics and /schedule (gpp_monitor_render_fn). */
static void s_render(void *arg, gpp_expo_t *metrics, gpp_expo_t *schedule)
{
    gpp_coord_t *self = arg;
    /* the phases, and "stopped" for a job that ended before it finished */
    static const char *names[S_N_STATES + 1];
    if (!names[0]) {
        memcpy(names, gpp_coord_state_name, sizeof gpp_coord_state_name);
        names[S_N_STATES] = "stopped";
    }
    int stopped = self->stopped && self->state == S_DONE;
    gpp_expo_job_t v = {.state = stopped ? names[S_N_STATES] : names[self->state],
                        .state_names = names,
                        .n_states = S_N_STATES + 1,
                        .stop_reason = stopped ? self->reason : NULL,
                        .start_time_s = self->start_time_s,
                        .now_ms = gpp_now_ms(),
                        .reg = self->reg,
                        .job = self->progress ? &self->job : NULL,
                        .progress = self->progress,
                        .dropped = self->dropped,
                        .job_restarts = self->cfg.job_restarts,
                        .agent_restarts = self->cfg.agent_restarts};
    gpp_expo_job(metrics, &v);
    gpp_expo_schedule(schedule, &v);
}

/* Renders the job and hands the text to the HTTP thread (which reads
 * nothing else): at the start and on every heartbeat tick, not per
 * iteration (fast jobs run thousands a second). */
static void s_publish_metrics(gpp_coord_t *self)
{
    if (!self->cfg.http)
        return;
    gpp_expo_t t = {0}, u = {0};
    s_render(self, &t, &u);
    gpp_http_publish(self->cfg.http, GPP_HTTP_METRICS, t.buf, t.len);
    gpp_http_publish(self->cfg.http, GPP_HTTP_SCHEDULE, u.buf, u.len);
    gpp_expo_release(&t);
    gpp_expo_release(&u);
}

/* The live agent silent longest past the heartbeat timeout, or NULL. The
 * one silent longest is named (and blamed for a restart): a killed agent's
 * peers fail after it and may go quiet too. */
static gpp_agent_t *s_silent_longest(gpp_coord_t *self, double now)
{
    gpp_agent_t *silent = NULL;
    int n = gpp_registry_size(self->reg);
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(self->reg, r);
        if (a->state == GPP_AGENT_ALIVE && now - a->last_seen_ms > self->cfg.timeout_ms &&
            (!silent || a->last_seen_ms < silent->last_seen_ms))
            silent = a;
    }
    return silent;
}

static int s_on_timer(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    gpp_coord_t *self = arg;
    if (self->state != S_WAITING && !self->stalled && gpp_fault(GPP_FAULT_LOOP_STALL)) {
        self->stalled = 1;
        zclock_sleep((int)gpp_fault_arg(GPP_FAULT_LOOP_STALL));
    }
    double now = gpp_now_ms();
    gpp_rdv_tick(self->rdv, now);
    gpp_notify_tick(
        gpp_coord_state_name[self->state]); /* systemd: watchdog ping, state as STATUS */
    gpp_coord_progress_tick(self, now);
    s_publish_metrics(self);
    if (self->state == S_DONE) {
        if (self->cfg.launch && gpp_launch_live(self->cfg.launch) == 0)
            return -1;
        if (now > self->exit_deadline_ms) {
            if (self->cfg.launch)
                gpp_warn("coordinator: %d local agents still running after %d ms; stopping them",
                         gpp_launch_live(self->cfg.launch), S_EXIT_GRACE_MS);
            return -1;
        }
        return 0;
    }
    if (self->state == S_WAITING && now - self->start_ms > self->cfg.start_timeout_ms) {
        char missing[1024];
        gpp_registry_list(self->reg, GPP_AGENT_EXPECTED, 16, missing, sizeof missing);
        int n = gpp_registry_size(self->reg);
        gpp_coord_abort(
            self,
            "timed out after %.1f s waiting for agents: missing %s (%d of %d registered); "
            "start them or fix [[nodes]] in the cluster file",
            self->cfg.start_timeout_ms / 1000.0, missing,
            n - gpp_registry_count(self->reg, GPP_AGENT_EXPECTED), n);
        return 0;
    }
    gpp_agent_t *silent = s_silent_longest(self, now);
    if (silent) {
        /* What waits in the socket was sent: while the coordinator itself
           pauses (a loaded machine) the heartbeats queue there, and after
           the pause the timer runs before the reader. Read them before
           anyone is called silent (else an agent whose heartbeats queued
           is blamed for the coordinator's pause, and a dead peer that
           registered later is not: ext_recover saw that on a loaded CI). */
        if (gpp_zsock_read_queued(self->router, GPP_ZSOCK_QUEUED_MAX, gpp_coord_on_router, self) <
            0)
            return -1; /* as the reader would have ended the loop */
        if (self->stopped || self->state == S_DONE)
            return 0;
        silent = s_silent_longest(self, now);
    }
    if (silent) {
        silent->state = GPP_AGENT_DEAD;
        self->agent_failed = !self->stopped;
        char who[GPP_REG_HOST_MAX + 64];
        gpp_coord_abort(self, "agent %s silent for %.1f s (heartbeat timeout %.1f s)",
                        gpp_agent_name(silent, who, sizeof who),
                        (now - silent->last_seen_ms) / 1000.0, self->cfg.timeout_ms / 1000.0);
        /* a local agent that stopped answering (hung, stopped) will not
           act on the Abort: SIGKILL it now rather than after the exit
           grace, so a restart (--max-restarts) begins at once */
        pid_t pid = self->cfg.launch ? gpp_launch_kill(self->cfg.launch, silent->rank, SIGKILL) : 0;
        if (pid > 0)
            gpp_warn("coordinator: killed the silent local agent %s", who);
        return 0;
    }
    if (self->blame_ms > 0 && now >= self->blame_ms && !self->stopped) {
        self->reporters[0] = 0; /* nobody went: the first report is the reason */
        gpp_coord_abort(self, "%s (no agent died or went silent within %.1f s)", self->first_report,
                        (self->cfg.timeout_ms + self->cfg.heartbeat_ms) / 1000.0);
        return 0;
    }
    for (int r = 0, n = gpp_registry_size(self->reg); r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(self->reg, r);
        if (a->state == GPP_AGENT_ALIVE)
            s_ping(self, a);
    }
    return 0;
}

/* How long an agent's exit waits for the report it may have sent before
 * it (s_on_child_exit) */
#define S_EXIT_GRACE_US 300000

static void s_on_child_exit(void *arg, int tag, pid_t pid, int status)
{
    gpp_coord_t *self = arg;
    (void)tag;
    gpp_agent_t *a = gpp_registry_find_pid(self->reg, pid);
    char st[128], who[GPP_REG_HOST_MAX + 64];
    gpp_launch_status_str(status, st, sizeof st);
    if (!a) {
        gpp_warn("coordinator: child %d %s", (int)pid, st);
        return;
    }
    a->launched_pid = -pid; /* reaped; keep it out of find_pid */
    a->exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (a->pid <= 0)
        a->pid = pid;
    gpp_agent_name(a, who, sizeof who);
    if (a->state == GPP_AGENT_EXITED) {
        if (status != 0)
            gpp_warn("coordinator: agent %s %s", who, st);
        return;
    }
    /* An agent that failed reports why (an Error) and then exits; its
       report can still be on the way when the exit is seen (the exit's
       SIGCHLD and the message race on a loaded machine). Read what arrives
       for a moment first, so the job stops with the agent's own error
       rather than with its exit status. */
    const int64_t until = gpp_now_us() + S_EXIT_GRACE_US;
    while (status != 0 && !self->stopped && gpp_now_us() < until) {
        zmq_pollitem_t it = {zsock_resolve(self->router), 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 20) > 0 && (it.revents & ZMQ_POLLIN))
            gpp_coord_on_router(NULL, self->router, self);
    }
    if (a->comm_reported && !self->stopped && status != 0 && !WIFSIGNALED(status)) {
        a->state = GPP_AGENT_EXITED; /* it gave up on a peer that went: wait for that one */
        gpp_warn("coordinator: agent %s %s after its broken connection", who, st);
        return;
    }
    a->state = GPP_AGENT_DEAD;
    if (self->stopped) { /* its report (or another) stopped the job */
        if (status != 0)
            gpp_warn("coordinator: agent %s %s", who, st);
        return;
    }
    self->agent_failed = 1;
    gpp_coord_abort(self, "agent %s %s before the job finished (see its log above)", who, st);
}

static int s_on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void)loop;
    gpp_coord_t *self = arg;
    int sig;
    while ((sig = gpp_sigfd_read(item->fd)) > 0) {
        if (sig == SIGCHLD) {
            if (self->cfg.launch)
                gpp_launch_reap(self->cfg.launch, s_on_child_exit, self);
            continue;
        }
        if (self->state == S_DONE) {
            /* a second interrupt: stop waiting for agents */
            gpp_warn("coordinator: %s again; not waiting for agents any longer", strsignal(sig));
            return -1;
        }
        self->exit_code = 128 + sig;
        gpp_coord_abort(self, "interrupted by %s", strsignal(sig));
    }
    if (self->state == S_DONE && self->cfg.launch && gpp_launch_live(self->cfg.launch) == 0)
        return -1;
    return 0;
}

/* ---- lifecycle ---- */

static int s_rdv_send(void *arg, const void *id, size_t id_len, gpp_msg_t *m)
{
    return s_send_to(arg, id, id_len, m->seq, m);
}

/* Rendezvous only for live agents that have a part in the job. */
static int s_rdv_member(void *arg, int rank)
{
    gpp_coord_t *self = arg;
    return rank < gpp_registry_size(self->reg) && self->in_job[rank] &&
           gpp_registry_agent(self->reg, rank)->state == GPP_AGENT_ALIVE;
}

/* The ROUTER's admission, before it binds: the frame size limit and, with
 * cfg.curve, CURVE (only admitted agent keys complete the handshake; the
 * ZAP handler logs every refusal with the peer's address and key). */
static int s_secure(gpp_coord_t *self, gpp_err_t *err)
{
    if (gpp_curve_server_apply(self->cfg.curve, zsock_resolve(self->router), GPP_MSG_MAX_BYTES,
                               err) < 0)
        return gpp_err_prefix(err, "coordinator");
    if (self->cfg.curve)
        gpp_info("coordinator: CURVE on %s: %d admitted agent key%s, %d monitor key%s, "
                 "coordinator key %s",
                 self->cfg.endpoint, gpp_curve_server_size(self->cfg.curve),
                 gpp_curve_server_size(self->cfg.curve) == 1 ? "" : "s",
                 gpp_curve_server_monitors(self->cfg.curve),
                 gpp_curve_server_monitors(self->cfg.curve) == 1 ? "" : "s",
                 gpp_curve_server_public(self->cfg.curve));
    return 0;
}

gpp_coord_t *gpp_coord_new(const gpp_coord_cfg_t *cfg, gpp_err_t *err)
{
    assert(cfg && cfg->endpoint && cfg->n_agents > 0 && cfg->hosts && cfg->slots);
    if (cfg->heartbeat_ms <= 0 || cfg->timeout_ms <= cfg->heartbeat_ms ||
        cfg->start_timeout_ms <= 0 || cfg->barriers < 0) {
        gpp_err_set(err,
                    "coordinator: heartbeat %d ms, timeout %d ms, start timeout %d ms: need "
                    "0 < heartbeat < timeout and a positive start timeout",
                    cfg->heartbeat_ms, cfg->timeout_ms, cfg->start_timeout_ms);
        return NULL;
    }
    int bind_errno = 0;
    gpp_coord_t *self = gpp_xcalloc(1, sizeof *self);
    self->failed_peer = -1;
    self->cfg = *cfg;
    self->reg = gpp_registry_new(cfg->n_agents, cfg->hosts, cfg->slots);
    self->in_job = gpp_xcalloc((size_t)cfg->n_agents, sizeof *self->in_job);
    self->timer_id = -1;
    self->start_time_s = (double)s_realtime_us() / 1e6;
    self->rdv = gpp_rdv_new(NULL, s_rdv_send, s_rdv_member, self);
    self->monitor = gpp_monitor_new(cfg->heartbeat_ms, s_render, self);
    if (!cfg->plan_fn) {
        for (int r = 0; r < cfg->n_agents; r++)
            self->in_job[r] = 1;
        self->n_in_job = cfg->n_agents;
    }
    self->router = zsock_new(ZMQ_ROUTER);
    if (!self->router) {
        gpp_err_set(err, "coordinator: cannot create a ROUTER socket: %s",
                    zmq_strerror(zmq_errno()));
        goto fail;
    }
    zsock_set_router_mandatory(self->router, 1);
    zsock_set_sndhwm(self->router, 100000);
    /* frames queued per peer before libzmq stops reading its connection
     * (TCP holds the rest back; nothing is dropped): an agent has a few
     * messages in flight (heartbeat, metrics, barrier, rendezvous), while a
     * hostile peer at the default 1,000 held 1,000 frames each
     * (bench/flood.sh: 64 peers of garbage, 10 -> 140 MB) */
    zsock_set_rcvhwm(self->router, S_RCVHWM);
    zsock_set_linger(self->router, 1000);
    /* never wait in a receive: zloop runs its timers before its readers, so
       when the heartbeat timer has read what queued (gpp_zsock_read_queued)
       the reader is still called for the poll that saw it, and a blocking
       receive would then wait for the next frame forever */
    zsock_set_rcvtimeo(self->router, 0);
    if (s_secure(self, err) < 0)
        goto fail;
    /* ZeroMQ binds `*`, addresses and interfaces; a host name is resolved
     * here, and the rendezvous endpoint the agents get names the address */
    char addr[GPP_NET_ADDR_LEN];
    gpp_err_t berr = {{0}};
    if (gpp_net_bind_endpoint(cfg->endpoint, self->bind, sizeof self->bind, addr, sizeof addr,
                              &berr) < 0) {
        gpp_err_set(err, "%s; set [coordinator] endpoint in the cluster file or --endpoint",
                    berr.msg);
        bind_errno = EADDRNOTAVAIL;
        goto fail;
    }
    self->port = zsock_bind(self->router, "%s", self->bind);
    if (self->port < 0) {
        bind_errno = zmq_errno();
        gpp_err_set(err,
                    "coordinator: cannot bind '%s'%s%s%s: %s; %s set [coordinator] endpoint "
                    "in the cluster file or --endpoint",
                    cfg->endpoint, strcmp(self->bind, cfg->endpoint) ? " (" : "",
                    strcmp(self->bind, cfg->endpoint) ? self->bind : "",
                    strcmp(self->bind, cfg->endpoint) ? ")" : "", zmq_strerror(bind_errno),
                    bind_errno == EADDRINUSE ? "another program (another coordinator?) has the "
                                               "port: stop it or pick another port, and"
                                             : "");
        goto fail;
    }
    if (gpp_net_is_loopback(addr) && cfg->launch == NULL)
        gpp_warn("coordinator: %s binds loopback (%s) only: agents on other hosts cannot "
                 "connect; bind a host name that resolves to a network address, an interface "
                 "or tcp://*:PORT",
                 cfg->endpoint, addr);
    if (self->port == 0) /* a named endpoint without a port number */
        self->port = -1;
    self->loop = zloop_new();
    zloop_set_nonstop(self->loop, true);
    if (zloop_reader(self->loop, self->router, gpp_coord_on_router, self) < 0)
        goto fail_loop;
    self->timer_id = zloop_timer(self->loop, (size_t)cfg->heartbeat_ms, 0, s_on_timer, self);
    if (self->timer_id < 0)
        goto fail_loop;
    if (cfg->sigfd >= 0) {
        self->sig_item = (zmq_pollitem_t){NULL, cfg->sigfd, ZMQ_POLLIN, 0};
        if (zloop_poller(self->loop, &self->sig_item, s_on_signal, self) < 0)
            goto fail_loop;
    }
    return self;
fail_loop:
    gpp_err_set(err, "coordinator: cannot set up the event loop");
fail:
    gpp_coord_destroy(&self);
    errno = bind_errno; /* the header's contract: 0 unless the bind failed */
    return NULL;
}

void gpp_coord_destroy(gpp_coord_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_coord_t *self = *self_p;
    gpp_coord_planner_stop(self);
    zloop_destroy(&self->loop);
    zsock_destroy(&self->router);
    gpp_progress_destroy(&self->progress);
    gpp_rdv_destroy(&self->rdv);
    gpp_monitor_destroy(&self->monitor);
    gpp_registry_destroy(&self->reg);
    free(self->in_job);
    free(self->barrier_ms);
    free(self);
    *self_p = NULL;
}

int gpp_coord_run(gpp_coord_t *self)
{
    self->start_ms = gpp_now_ms();
    self->state = S_WAITING;
    s_publish_metrics(self);
    gpp_info("coordinator: listening on %s (%s, port %d), waiting for %d agents",
             self->cfg.endpoint, self->bind, self->port, gpp_registry_size(self->reg));
    gpp_sigfd_run_loop(self->loop);
    gpp_coord_planner_stop(self); /* no thread outlives the run */
    if (self->state != S_DONE && !self->stopped) {
        snprintf(self->reason, sizeof self->reason, "event loop ended in state %s",
                 gpp_coord_state_name[self->state]);
        self->stopped = -1;
        self->exit_code = 1;
    }
    s_publish_metrics(self); /* the final state, for scrapes after the end */
    return self->stopped;
}

int gpp_coord_port(const gpp_coord_t *self)
{
    return self->port;
}
gpp_registry_t *gpp_coord_registry(gpp_coord_t *self)
{
    return self->reg;
}
const char *gpp_coord_reason(const gpp_coord_t *self)
{
    return self->reason;
}
int gpp_coord_exit_code(const gpp_coord_t *self)
{
    return self->exit_code;
}

int gpp_coord_agent_failed(const gpp_coord_t *self)
{
    return self->agent_failed;
}

int gpp_coord_failed_peer(const gpp_coord_t *self)
{
    return self->failed_peer;
}
uint64_t gpp_coord_monitored(const gpp_coord_t *self)
{
    return gpp_monitor_answered(self->monitor);
}
uint64_t gpp_coord_dropped(const gpp_coord_t *self)
{
    return self->dropped;
}
const gpp_progress_t *gpp_coord_progress(const gpp_coord_t *self)
{
    return self->progress;
}

int gpp_coord_barrier_times(const gpp_coord_t *self, const double **ms_out)
{
    *ms_out = self->barrier_ms;
    return self->n_barrier_ms;
}
