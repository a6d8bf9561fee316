/* test_agent: the agent module (agent/gpp_agent.h) in process, against a
 * ROUTER socket the test drives by hand in place of a coordinator: register,
 * heartbeats, control-only barriers, Reject, Abort, Shutdown, a lost
 * coordinator, signals, a profile request, a one-rank training job from
 * assignment to shutdown, and the failures a worker reports (an assignment
 * that does not resolve, a model that does not build, an abort while
 * training). Each case checks the exit status gpp_agent_run returns. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <czmq.h>

#include "agent/gpp_agent.h"
#include "model/gpp_graph.h"
#include "proto/gpp_msg.h"
#include "tests/gpp_test.h"

#define S_SPEC "mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64,classes=8"

/* The hand-driven coordinator and the agent running on a thread. */
typedef struct {
    zsock_t *router;
    zframe_t *id; /* the agent's routing id, once it registered */
    uint64_t seq;
    char ep[64];
    gpp_agent_cfg_t cfg;
    gpp_agent_t *agent;
    pthread_t th;
    int code; /* gpp_agent_run's */
    int running;
} s_fx_t;

static void *s_run(void *arg)
{
    s_fx_t *f = arg;
    f->code = gpp_agent_run(f->agent);
    return NULL;
}

static void s_fx_init(s_fx_t *f)
{
    memset(f, 0, sizeof *f);
    f->router = zsock_new(ZMQ_ROUTER);
    zsock_set_rcvtimeo(f->router, 10000);
    zsock_set_linger(f->router, 0);
    int port = zsock_bind(f->router, "tcp://127.0.0.1:*");
    GPP_EXPECT(port > 0);
    snprintf(f->ep, sizeof f->ep, "tcp://127.0.0.1:%d", port);
    f->cfg = (gpp_agent_cfg_t){.ctl = {.endpoint = f->ep,
                                       .host = "h",
                                       .slot = 0,
                                       .backend = GPP__BACKEND__BACKEND_CPU,
                                       .mem_bytes = 1LL << 30,
                                       .heartbeat_ms = 50,
                                       .timeout_ms = 5000},
                               .threads = 1,
                               .data_host = "127.0.0.1",
                               .comm_timeout_ms = 5000,
                               .sigfd = -1};
}

/* Creates the agent (it connects and registers) and runs it on a thread. */
static int s_fx_start(s_fx_t *f)
{
    gpp_err_t err = {{0}};
    f->agent = gpp_agent_new(&f->cfg, &err);
    GPP_EXPECT_MSG(f->agent, "%s", err.msg);
    if (!f->agent)
        return -1;
    pthread_create(&f->th, NULL, s_run, f);
    f->running = 1;
    return 0;
}

/* Joins the agent's thread; its exit status. */
static int s_fx_join(s_fx_t *f)
{
    if (f->running)
        pthread_join(f->th, NULL);
    f->running = 0;
    return f->code;
}

static void s_fx_fini(s_fx_t *f)
{
    s_fx_join(f);
    gpp_agent_destroy(&f->agent);
    GPP_EXPECT(f->agent == NULL);
    zframe_destroy(&f->id);
    zsock_destroy(&f->router);
}

/* The next message from the agent other than a Heartbeat (NULL on
 * timeout); remembers the agent's routing id. Caller owns the result. */
static gpp_msg_t *s_recv(s_fx_t *f)
{
    for (;;) {
        zmsg_t *zm = zmsg_recv(f->router);
        if (!zm)
            return NULL;
        zframe_t *id = zmsg_pop(zm);
        zframe_t *body = zmsg_pop(zm);
        zmsg_destroy(&zm);
        if (!f->id)
            f->id = zframe_dup(id);
        zframe_destroy(&id);
        gpp_err_t err = {{0}};
        gpp_msg_t *m = body ? gpp_msg_decode(zframe_data(body), zframe_size(body), &err) : NULL;
        zframe_destroy(&body);
        GPP_EXPECT_MSG(m, "%s", err.msg);
        if (!m)
            return NULL;
        if (m->body_case != GPP__ENVELOPE__BODY_HEARTBEAT)
            return m;
        gpp_msg_destroy(&m);
    }
}

/* Receives until n Heartbeats came; returns how many other messages came
 * meanwhile (-1 on a timeout). */
static int s_heartbeats(s_fx_t *f, int n)
{
    int other = 0;
    for (int hb = 0; hb < n;) {
        zmsg_t *zm = zmsg_recv(f->router);
        if (!zm)
            return -1;
        zframe_t *body = zmsg_last(zm);
        gpp_err_t err = {{0}};
        gpp_msg_t *m = gpp_msg_decode(zframe_data(body), zframe_size(body), &err);
        GPP_EXPECT_MSG(m, "%s", err.msg);
        if (m && m->body_case == GPP__ENVELOPE__BODY_HEARTBEAT)
            hb++;
        else
            other++;
        gpp_msg_destroy(&m);
        zmsg_destroy(&zm);
    }
    return other;
}

/* Expects a message of type `want` (skipping heartbeats); returns it (the
 * caller owns it) or NULL after counting the failure. */
static gpp_msg_t *s_expect(s_fx_t *f, int want)
{
    gpp_msg_t *m = s_recv(f);
    GPP_EXPECT_MSG(m && (int)m->body_case == want, "wanted %s, got %s",
                   gpp_msg_type_name((Gpp__Envelope__BodyCase)want),
                   m ? gpp_msg_type_name(m->body_case) : "nothing");
    if (m && (int)m->body_case != want)
        gpp_msg_destroy(&m);
    return m;
}

static void s_send(s_fx_t *f, gpp_msg_t *m)
{
    m->seq = ++f->seq;
    m->sender = GPP_MSG_SENDER_COORD;
    uint8_t *buf = NULL;
    size_t len = 0;
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_msg_encode(m, &buf, &len, &err) == 0, "%s", err.msg);
    GPP_EXPECT(f->id != NULL);
    if (!buf || !f->id) {
        free(buf);
        return;
    }
    zmsg_t *zm = zmsg_new();
    zmsg_addmem(zm, zframe_data(f->id), zframe_size(f->id));
    zmsg_addmem(zm, buf, len);
    int rc = zmsg_send(&zm, f->router);
    GPP_EXPECT_MSG(rc == 0, "send: %s", zmq_strerror(zmq_errno()));
    zmsg_destroy(&zm);
    free(buf);
}

/* Expects Register from host h slot 0, answers RegisterAck (rank 0 of world). */
static void s_register(s_fx_t *f, int world)
{
    gpp_msg_t *m = s_expect(f, GPP__ENVELOPE__BODY_REGISTER);
    GPP_EXPECT(m && !strcmp(m->register_->host, "h") && m->register_->slot == 0);
    gpp_msg_destroy(&m);
    Gpp__RegisterAck ack = GPP__REGISTER_ACK__INIT;
    ack.rank = 0;
    ack.world_size = world;
    gpp_msg_t out;
    gpp_msg_wrap(&out, 0, 0, GPP__ENVELOPE__BODY_REGISTER_ACK, &ack);
    s_send(f, &out);
}

static void s_send_simple(s_fx_t *f, int body)
{
    Gpp__Shutdown sd = GPP__SHUTDOWN__INIT;
    Gpp__Abort ab = GPP__ABORT__INIT;
    Gpp__Reject rj = GPP__REJECT__INIT;
    Gpp__Error er = GPP__ERROR__INIT;
    gpp_msg_t out;
    void *b = NULL;
    switch (body) {
    case GPP__ENVELOPE__BODY_SHUTDOWN:
        b = &sd;
        break;
    case GPP__ENVELOPE__BODY_ABORT:
        ab.reason = "agent 1 died";
        b = &ab;
        break;
    case GPP__ENVELOPE__BODY_REJECT:
        rj.reason = "slot taken";
        b = &rj;
        break;
    case GPP__ENVELOPE__BODY_ERROR:
        er.code = GPP__ERROR_CODE__ERROR_INTERNAL;
        er.text = "a coordinator's complaint";
        b = &er;
        break;
    default:
        GPP_EXPECT(0);
        return;
    }
    gpp_msg_wrap(&out, 0, 0, (gpp_msg_type_t)body, b);
    s_send(f, &out);
}

static void s_release(s_fx_t *f, int id)
{
    Gpp__BarrierRelease rel = GPP__BARRIER_RELEASE__INIT;
    rel.barrier_id = id;
    gpp_msg_t out;
    gpp_msg_wrap(&out, 0, 0, GPP__ENVELOPE__BODY_BARRIER_RELEASE, &rel);
    s_send(f, &out);
}

/* ---- the assignment of a one-rank, one-stage job ---- */

typedef struct {
    Gpp__Assignment a;
    Gpp__Action act[6], *actp[6];
    Gpp__CommBootstrap comm;
    Gpp__HyperParams hyper;
    int32_t ops[64];
    int32_t dp_ranks[1];
} s_asg_t;

static int s_n_ops(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build(S_SPEC, &err);
    int n = g ? g->n_ops : 0;
    gpp_graph_destroy(&g);
    return n;
}

static void s_asg_init(s_asg_t *s, int iterations)
{
    memset(s, 0, sizeof *s);
    Gpp__Assignment *a = &s->a;
    gpp__assignment__init(a);
    a->model = S_SPEC;
    a->n_stages = 1;
    a->replicas = 1;
    int n = s_n_ops();
    GPP_EXPECT(n > 0 && n <= 64);
    for (int i = 0; i < n; i++)
        s->ops[i] = i;
    a->n_ops = (size_t)n;
    a->ops = s->ops;
    a->micro_batch = 4;
    a->k = 1;
    a->batch = 8;
    a->backend = GPP__BACKEND__BACKEND_CPU;
    a->precision = GPP__PRECISION__PRECISION_FP32;
    const Gpp__ActionType types[6] = {GPP__ACTION_TYPE__ACT_FWD,       GPP__ACTION_TYPE__ACT_BWD,
                                      GPP__ACTION_TYPE__ACT_FWD,       GPP__ACTION_TYPE__ACT_BWD,
                                      GPP__ACTION_TYPE__ACT_ALLREDUCE, GPP__ACTION_TYPE__ACT_STEP};
    const int mbs[6] = {0, 0, 1, 1, -1, -1};
    for (int i = 0; i < 6; i++) {
        gpp__action__init(&s->act[i]);
        s->act[i].type = types[i];
        s->act[i].mb = mbs[i];
        s->act[i].peer_stage = -1;
        s->act[i].peer_replica = -1;
        s->act[i].tensor = -1;
        s->actp[i] = &s->act[i];
    }
    a->n_actions = 6;
    a->actions = s->actp;
    s->dp_ranks[0] = 0;
    a->n_dp_ranks = 1;
    a->dp_ranks = s->dp_ranks;
    gpp__comm_bootstrap__init(&s->comm);
    s->comm.rdv_endpoint = "tcp://127.0.0.1:1"; /* one rank: never used */
    s->comm.rdv_token = "0123456789abcdef0123456789abcdef";
    s->comm.prefix = "test";
    s->comm.world_size = 1;
    s->comm.rank = 0;
    a->comm = &s->comm;
    gpp__hyper_params__init(&s->hyper);
    s->hyper.optimizer = GPP__OPTIMIZER__OPTIMIZER_SGD;
    s->hyper.lr = 0.01;
    a->hyper = &s->hyper;
    a->iterations = iterations;
    a->seed = 3;
    a->checkpoint_dir = "";
}

static void s_send_assignment(s_fx_t *f, s_asg_t *s)
{
    gpp_msg_t out;
    gpp_msg_wrap(&out, 0, 0, GPP__ENVELOPE__BODY_ASSIGNMENT, &s->a);
    s_send(f, &out);
}

static void s_send_profile_request_on(s_fx_t *f, const char *model, Gpp__Backend backend)
{
    Gpp__ProfileRequest rq = GPP__PROFILE_REQUEST__INIT;
    rq.backend = backend;
    rq.precision = GPP__PRECISION__PRECISION_FP32;
    int32_t mbs[2] = {1, 2};
    rq.model = (char *)model;
    rq.n_micro_batches = 2;
    rq.micro_batches = mbs;
    rq.iterations = 1;
    gpp_msg_t out;
    gpp_msg_wrap(&out, 0, 0, GPP__ENVELOPE__BODY_PROFILE_REQUEST, &rq);
    s_send(f, &out);
}

static void s_send_profile_request(s_fx_t *f, const char *model)
{
    s_send_profile_request_on(f, model, GPP__BACKEND__BACKEND_CPU);
}

/* ---- cases ---- */

/* Register, heartbeats once registered, a coordinator's Error only logged,
 * Shutdown: exit 0 with nothing dropped. */
static void t_register_heartbeat_shutdown(void)
{
    s_fx_t f;
    s_fx_init(&f);
    if (s_fx_start(&f) == 0) {
        s_register(&f, 1);
        s_send_simple(&f, GPP__ENVELOPE__BODY_ERROR);
        GPP_EXPECT(s_heartbeats(&f, 3) == 0);
        s_send_simple(&f, GPP__ENVELOPE__BODY_SHUTDOWN);
        GPP_EXPECT(s_fx_join(&f) == 0);
        GPP_EXPECT(gpp_agent_dropped(f.agent) == 0);
    }
    s_fx_fini(&f);
}

/* A control-only job: barriers 0 and 1 entered in turn, each after the
 * previous release; then Shutdown. */
static void t_control_barriers(void)
{
    s_fx_t f;
    s_fx_init(&f);
    f.cfg.control_barriers = 2;
    if (s_fx_start(&f) == 0) {
        s_register(&f, 1);
        for (int b = 0; b < 2; b++) {
            gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_BARRIER_ENTER);
            GPP_EXPECT(m && m->barrier_enter->barrier_id == b);
            gpp_msg_destroy(&m);
            s_release(&f, b);
        }
        s_release(&f, 5); /* never entered: dropped by the control client */
        s_send_simple(&f, GPP__ENVELOPE__BODY_SHUTDOWN);
        GPP_EXPECT(s_fx_join(&f) == 0);
        GPP_EXPECT(gpp_agent_dropped(f.agent) == 1);
    }
    s_fx_fini(&f);
}

/* Reject, Abort: exit 1. */
static void t_reject_and_abort(void)
{
    const int bodies[2] = {GPP__ENVELOPE__BODY_REJECT, GPP__ENVELOPE__BODY_ABORT};
    for (int i = 0; i < 2; i++) {
        s_fx_t f;
        s_fx_init(&f);
        if (s_fx_start(&f) == 0) {
            if (i == 0) {
                gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_REGISTER);
                gpp_msg_destroy(&m);
            } else {
                s_register(&f, 1);
            }
            s_send_simple(&f, bodies[i]);
            GPP_EXPECT_MSG(s_fx_join(&f) == 1, "case %d: exit %d", i, f.code);
        }
        s_fx_fini(&f);
    }
}

/* Nothing from the coordinator for timeout_ms: the agent gives up, exit 1. */
static void t_lost_coordinator(void)
{
    s_fx_t f;
    s_fx_init(&f);
    f.cfg.ctl.timeout_ms = 300;
    if (s_fx_start(&f) == 0) {
        gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_REGISTER);
        gpp_msg_destroy(&m);
        GPP_EXPECT(s_fx_join(&f) == 1);
    }
    s_fx_fini(&f);
}

/* A signal byte on the signal fd: SIGCHLD ignored, SIGTERM ends it with
 * 128 + 15. */
static void t_signal(void)
{
    s_fx_t f;
    s_fx_init(&f);
    int p[2];
    GPP_EXPECT(pipe(p) == 0);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    f.cfg.sigfd = p[0];
    if (s_fx_start(&f) == 0) {
        s_register(&f, 1);
        unsigned char sig[2] = {SIGCHLD, SIGTERM};
        GPP_EXPECT(write(p[1], sig, 2) == 2);
        GPP_EXPECT(s_fx_join(&f) == 128 + SIGTERM);
    }
    s_fx_fini(&f);
    close(p[0]);
    close(p[1]);
}

/* Refused before connecting: a bad configuration, an unusable endpoint. */
static void t_bad_config(void)
{
    s_fx_t f;
    s_fx_init(&f);
    gpp_err_t err = {{0}};
    f.cfg.threads = 0;
    GPP_EXPECT(gpp_agent_new(&f.cfg, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "0 threads"), "%s", err.msg);
    f.cfg.threads = 1;
    f.cfg.ctl.endpoint = "nowhere";
    GPP_EXPECT(gpp_agent_new(&f.cfg, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "cannot connect to 'nowhere'"), "%s", err.msg);
    f.cfg.ctl.endpoint = f.ep;
    f.cfg.ctl.timeout_ms = f.cfg.ctl.heartbeat_ms;
    GPP_EXPECT(gpp_agent_new(&f.cfg, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "need 0 < heartbeat < timeout"), "%s", err.msg);
    gpp_agent_destroy(NULL);
    s_fx_fini(&f);
}

/* A profile request: a ProfileResult with a row per op and size; a second
 * request is ignored; Shutdown ends it with 0. */
static void t_profile(void)
{
    s_fx_t f;
    s_fx_init(&f);
    if (s_fx_start(&f) == 0) {
        s_register(&f, 1);
        s_send_profile_request(&f, S_SPEC);
        gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_PROFILE_RESULT);
        GPP_EXPECT(m && m->profile_result->n_ops == 2 * (size_t)s_n_ops());
        GPP_EXPECT_MSG(
            m && m->profile_result->device_name &&
                strcmp(m->profile_result->device_name, "cpu") == 0,
            "%s", m && m->profile_result->device_name ? m->profile_result->device_name : "(none)");
        gpp_msg_destroy(&m);
        s_send_profile_request(&f, S_SPEC); /* ignored */
        s_send_simple(&f, GPP__ENVELOPE__BODY_SHUTDOWN);
        GPP_EXPECT(s_fx_join(&f) == 0);
    }
    s_fx_fini(&f);
}

/* A profile request for a model that does not build, or on a GPU this CPU
 * agent does not have: Error naming the cause, exit 1. */
static void t_profile_fails(void)
{
    for (int i = 0; i < 2; i++) {
        s_fx_t f;
        s_fx_init(&f);
        if (s_fx_start(&f) == 0) {
            s_register(&f, 1);
            if (i == 0)
                s_send_profile_request(&f, "nosuchmodel:x=1");
            else
                s_send_profile_request_on(&f, S_SPEC, GPP__BACKEND__BACKEND_CUDA);
            gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_ERROR);
            const char *want = i == 0 ? "profiling nosuchmodel" : "asked to profile on a GPU";
            GPP_EXPECT_MSG(m && strstr(m->error->text, want), "%s", m ? m->error->text : "");
            gpp_msg_destroy(&m);
            GPP_EXPECT(s_fx_join(&f) == 1);
        }
        s_fx_fini(&f);
    }
}

/* A one-rank job from assignment to shutdown: Ready, barrier 0, Metrics per
 * iteration with the loss; a second assignment is ignored. */
static void t_trains(void)
{
    s_fx_t f;
    s_fx_init(&f);
    s_asg_t s;
    s_asg_init(&s, 3);
    if (s_fx_start(&f) == 0) {
        s_register(&f, 1);
        s_send_assignment(&f, &s);
        gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_READY);
        GPP_EXPECT(m && m->ready->stage == 0 && m->ready->replica == 0);
        gpp_msg_destroy(&m);
        m = s_expect(&f, GPP__ENVELOPE__BODY_BARRIER_ENTER);
        GPP_EXPECT(m && m->barrier_enter->barrier_id == 0);
        gpp_msg_destroy(&m);
        s_release(&f, 0);
        for (int it = 0; it < 3; it++) {
            m = s_expect(&f, GPP__ENVELOPE__BODY_METRICS);
            GPP_EXPECT(m && m->metrics->iteration == it && m->metrics->has_loss &&
                       m->metrics->n_action_ms == 6 && m->metrics->samples == 8);
            gpp_msg_destroy(&m);
        }
        s_send_assignment(&f, &s); /* ignored */
        s_send_simple(&f, GPP__ENVELOPE__BODY_SHUTDOWN);
        GPP_EXPECT(s_fx_join(&f) == 0);
    }
    s_fx_fini(&f);
}

/* Abort while the worker waits for the start barrier: stopped at once, no
 * Error from the agent, exit 1. */
static void t_abort_while_training(void)
{
    s_fx_t f;
    s_fx_init(&f);
    s_asg_t s;
    s_asg_init(&s, 1000);
    if (s_fx_start(&f) == 0) {
        s_register(&f, 1);
        s_send_assignment(&f, &s);
        gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_READY);
        gpp_msg_destroy(&m);
        m = s_expect(&f, GPP__ENVELOPE__BODY_BARRIER_ENTER);
        gpp_msg_destroy(&m);
        s_send_simple(&f, GPP__ENVELOPE__BODY_ABORT);
        GPP_EXPECT(s_fx_join(&f) == 1);
        zsock_set_rcvtimeo(f.router, 200);
        m = s_recv(&f); /* the agent is gone: nothing more, no Error */
        GPP_EXPECT_MSG(!m, "got %s", m ? gpp_msg_type_name(m->body_case) : "");
        gpp_msg_destroy(&m);
    }
    s_fx_fini(&f);
}

/* Failures the worker reports: an action on no edge of the assignment
 * (Error config, before any thread), a model that does not build (Error
 * config from the worker: the job's input is at fault, and the coordinator
 * exits 2). Both end the agent with 1. */
static void t_assignment_fails(void)
{
    for (int i = 0; i < 4; i++) {
        s_fx_t f;
        s_fx_init(&f);
        s_asg_t s;
        s_asg_init(&s, 2);
        const char *want;
        int code;
        if (i == 0) {
            s.a.n_stages = 2;
            s.comm.world_size = 2;
            s.act[0].type = GPP__ACTION_TYPE__ACT_SEND_ACT;
            s.act[0].peer_stage = 1;
            s.act[0].peer_replica = 0;
            s.act[0].tensor = 1;
            s.act[0].lo = 0;
            s.act[0].hi = 4;
            want = "action 0: tensor 1 is on no outgoing edge to stage 1";
            code = GPP__ERROR_CODE__ERROR_CONFIG;
        } else if (i == 1) {
            s.a.model = "nosuchmodel:x=1";
            want = "stage 0 replica 0: building stage 0";
            code = GPP__ERROR_CODE__ERROR_CONFIG; /* the job's model: the user's to fix */
        } else { /* a zero-bubble list: refused at setup, on cuda naming the backend */
            s.act[1].type = GPP__ACTION_TYPE__ACT_BWD_INPUT;
            s.act[4].type = GPP__ACTION_TYPE__ACT_BWD_WEIGHT;
            s.act[4].mb = 0;
            if (i == 3)
                s.a.backend = GPP__BACKEND__BACKEND_CUDA;
            want = i == 2 ? "action 1 (BWD_IN): the assignment's schedule is zero-bubble "
                            "(zb-h1/zb-h2), which the agents do not run yet; use schedule = "
                            "\"1f1b\" or \"auto\""
                          : "action 1 (BWD_IN): the assignment's schedule is zero-bubble "
                            "(zb-h1/zb-h2), but the cuda backend has no split backward (B and W "
                            "passes); use schedule = \"1f1b\" or \"auto\", or backend = \"cpu\"";
            code = GPP__ERROR_CODE__ERROR_CONFIG;
        }
        if (s_fx_start(&f) == 0) {
            s_register(&f, s.comm.world_size);
            s_send_assignment(&f, &s);
            gpp_msg_t *m = s_expect(&f, GPP__ENVELOPE__BODY_ERROR);
            GPP_EXPECT_MSG(m && (int)m->error->code == code && strstr(m->error->text, want),
                           "case %d: %s", i, m ? m->error->text : "");
            gpp_msg_destroy(&m);
            GPP_EXPECT(s_fx_join(&f) == 1);
        }
        s_fx_fini(&f);
    }
}

/* gpp-agent's command line: a bad one exits 2 before connecting, --help 0. */
static void t_command_line(void)
{
    const char *bin = getenv("GPP_BIN");
    char agent[1024];
    snprintf(agent, sizeof agent, "%s/agent/gpp-agent", bin ? bin : "build");
    const struct {
        const char *args[6];
        int code;
    } cases[] = {
        {{"--help"}, 0},
        {{"--slot", "0"}, 2},
        {{"--coordinator", "tcp://127.0.0.1:1"}, 2},
        {{"--coordinator", "tcp://127.0.0.1:1", "--slot", "x"}, 2},
        {{"--coordinator", "tcp://127.0.0.1:1", "--slot", "0", "--threads", "0"}, 2},
        {{"--coordinator", "tcp://127.0.0.1:1", "--slot", "0", "--bogus"}, 2},
        {{"--coordinator", "tcp://127.0.0.1:1", "--slot", "0", "extra"}, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            const char *argv[8] = {agent};
            for (int k = 0; k < 6 && cases[i].args[k]; k++)
                argv[k + 1] = cases[i].args[k];
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            execv(agent, (char **)argv);
            _exit(127);
        }
        int status = -1;
        waitpid(pid, &status, 0);
        GPP_EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == cases[i].code,
                       "case %zu (%s): status %d, want exit %d", i, cases[i].args[0], status,
                       cases[i].code);
    }
}

static const gpp_test_case_t cases[] = {
    {"register, heartbeat, shutdown", t_register_heartbeat_shutdown},
    {"control-only barriers", t_control_barriers},
    {"reject and abort", t_reject_and_abort},
    {"lost coordinator", t_lost_coordinator},
    {"signal", t_signal},
    {"bad configuration", t_bad_config},
    {"profile", t_profile},
    {"profile fails", t_profile_fails},
    {"trains a one-rank job", t_trains},
    {"abort while training", t_abort_while_training},
    {"assignment fails", t_assignment_fails},
    {"command line", t_command_line},
    {NULL, NULL},
};

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return gpp_test_run(cases);
}
