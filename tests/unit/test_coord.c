/* test_coord: the coordinator's registry, metrics aggregation and control
 * protocol. The protocol cases run a real gpp_coord (control-only job) in a
 * thread and talk to it through raw ZeroMQ DEALER sockets that speak the
 * protocol by hand, so that they can also send garbage, a wrong protocol
 * version, replays and duplicate slots. */
#include <czmq.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/gpp_fault.h"
#include "config/gpp_config.h"
#include "coordinator/gpp_coord.h"
#include "tests/gpp_coord_fixture.h"
#include "coordinator/job/gpp_job.h"
#include "coordinator/gpp_progress.h"
#include "coordinator/gpp_registry.h"
#include "tests/gpp_test.h"

/* ---- registry ---- */

static Gpp__Register s_reg_msg(const char *host, int slot)
{
    Gpp__Register r = GPP__REGISTER__INIT;
    r.host = (char *)host;
    r.slot = slot;
    r.backend = GPP__BACKEND__BACKEND_CPU;
    r.mem_bytes = 1 << 20;
    r.pid = 4242;
    r.build_version = (char *)GPP_VERSION;
    r.gpu = -1;
    r.device_name = "cpu";
    r.mem_total_bytes = 1 << 30;
    r.mem_free_bytes = 1 << 29;
    return r;
}

static void t_registry(void)
{
    const char *hosts[] = {"a", "a", "b"};
    const int slots[] = {0, 1, 0};
    gpp_registry_t *reg = gpp_registry_new(3, hosts, slots);
    gpp_err_t err = {{0}};
    Gpp__Register r = s_reg_msg("a", 1);
    gpp_agent_t *ag = gpp_registry_register(reg, &r, "id1", 3, 0, &err);
    GPP_EXPECT(ag && ag->rank == 1 && ag->state == GPP_AGENT_ALIVE);
    /* the same slot again, from another peer */
    GPP_EXPECT(!gpp_registry_register(reg, &r, "id2", 3, 0, &err));
    GPP_EXPECT_MSG(strstr(err.msg, "already taken"), "%s", err.msg);
    /* the same peer again, for another slot */
    Gpp__Register r2 = s_reg_msg("b", 0);
    GPP_EXPECT(!gpp_registry_register(reg, &r2, "id1", 3, 0, &err));
    GPP_EXPECT_MSG(strstr(err.msg, "already registered"), "%s", err.msg);
    /* a slot that is not in the cluster file */
    Gpp__Register r3 = s_reg_msg("c", 0);
    GPP_EXPECT(!gpp_registry_register(reg, &r3, "id3", 3, 0, &err));
    GPP_EXPECT_MSG(strstr(err.msg, "not in the cluster file") && strstr(err.msg, "a:0, b:0"), "%s",
                   err.msg);
    GPP_EXPECT(gpp_registry_find(reg, "id1", 3) == ag);
    GPP_EXPECT(!gpp_registry_find(reg, "id2", 3));
    GPP_EXPECT(gpp_registry_count(reg, GPP_AGENT_EXPECTED) == 2);
    char buf[64];
    gpp_registry_list(reg, GPP_AGENT_EXPECTED, 1, buf, sizeof buf);
    GPP_EXPECT_MSG(!strcmp(buf, "a:0 and 1 more"), "%s", buf);
    gpp_registry_destroy(&reg);
    GPP_EXPECT(reg == NULL);
}

/* ---- progress ---- */

static void t_progress(void)
{
    /* 3 agents: stage 0 (rank 0), stage 1 with two replicas (ranks 1, 2, the sink) */
    const int stage[] = {0, 1, 1}, replica[] = {0, 0, 1}, nact[] = {4, 5, 5}, sink[] = {0, 1};
    char path[] = "/tmp/test_coord_metrics_XXXXXX";
    int fd = mkstemp(path);
    GPP_EXPECT(fd >= 0);
    close(fd);
    FILE *text = tmpfile();
    gpp_err_t err = {{0}};
    const int64_t pred[] = {1000, 2000};
    const gpp_progress_layout_t layout = {3, 2, stage, replica, nact, sink, pred, 2, 16, 0};
    gpp_progress_t *p = gpp_progress_new(&layout, text, path, &err);
    GPP_EXPECT_MSG(p, "%s", err.msg);
    if (!p)
        return;
    double act[5] = {1, 2, 3, 4, 5};
    Gpp__Metrics m = GPP__METRICS__INIT;
    m.iteration = 0;
    m.iteration_ms = 10;
    m.bubble_ms = 2;
    m.n_action_ms = 4;
    m.action_ms = act;
    GPP_EXPECT(gpp_progress_add(p, 0, &m, &err) == 0);
    /* the same iteration twice */
    GPP_EXPECT(gpp_progress_add(p, 0, &m, &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "expected 1"), "%s", err.msg);
    /* a loss from a stage without a loss op */
    m.iteration = 1;
    m.has_loss = 1;
    GPP_EXPECT(gpp_progress_add(p, 0, &m, &err) < 0);
    /* wrong action count */
    m.iteration = 0;
    m.n_action_ms = 3;
    GPP_EXPECT(gpp_progress_add(p, 1, &m, &err) < 0);
    m.n_action_ms = 5;
    m.iteration_ms = 20;
    m.loss = 0.5; /* shares: half the batch each */
    m.samples = 8;
    m.device_mem_peak_bytes = 2100;
    GPP_EXPECT(gpp_progress_add(p, 1, &m, &err) == 0);
    m.loss = 1.5;
    m.samples = 8;
    m.device_mem_peak_bytes = 1900; /* the stage's measure: its highest replica */
    GPP_EXPECT(gpp_progress_add(p, 2, &m, &err) == 1); /* completes iteration 0 */
    GPP_EXPECT_NEAR(gpp_progress_loss(p, 0), 2.0, 1e-12);
    GPP_EXPECT(isnan(gpp_progress_loss(p, 1)));
    GPP_EXPECT(!gpp_progress_finished(p));
    gpp_progress_summary_t s;
    gpp_progress_summary(p, &s);
    GPP_EXPECT(s.iterations_done == 1);
    GPP_EXPECT_NEAR(s.iteration_ms, 20, 1e-12);
    GPP_EXPECT_NEAR(s.samples_per_s, 800, 1e-9);
    GPP_EXPECT(gpp_progress_stage_mem(p, 0) == 0 && gpp_progress_stage_mem(p, 1) == 2100);
    GPP_EXPECT(gpp_progress_stage_mem_predicted(p, 1) == 2000);
    gpp_progress_destroy(&p);
    /* one text line and one JSON line */
    char line[4096];
    rewind(text);
    GPP_EXPECT(fgets(line, sizeof line, text) && strstr(line, "iter 1/2") &&
               strstr(line, "loss 2.000000") && strstr(line, "800.0 samples/s") &&
               strstr(line, "s0=20%") && strstr(line, "s1=10%"));
    fclose(text);
    FILE *f = fopen(path, "r");
    GPP_EXPECT(f && fgets(line, sizeof line, f));
    GPP_EXPECT_MSG(strstr(line, "\"iteration\":0,\"loss\":2,") &&
                       strstr(line, "\"action_ms\":[1,2,3,4,5]") &&
                       strstr(line, "{\"stage\":1,\"bubble_pct\":10,\"mem_predicted_bytes\":2000,"
                                    "\"mem_measured_bytes\":2100}") &&
                       strstr(line, "\"device_mem_peak_bytes\":1900"),
                   "%s", line);
    GPP_EXPECT(!fgets(line, sizeof line, f));
    fclose(f);
    unlink(path);
}

/* A new run (not resumed) on a metrics file that holds another run's lines
 * keeps them as FILE.<UTC time> (twice in one second: -1) and starts an
 * empty file: nothing is truncated. */
static void t_progress_keeps_previous(void)
{
    const int stage[] = {0}, replica[] = {0}, nact[] = {0}, sink[] = {1};
    char dir[] = "/tmp/test_coord_keep_XXXXXX";
    GPP_EXPECT(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/m.jsonl", dir);
    const gpp_progress_layout_t layout = {1, 1, stage, replica, nact, sink, NULL, 6, 4, 0};
    gpp_err_t err = {{0}};
    const char *runs[] = {"{\"run\":1}\n", "{\"run\":2}\n"};
    for (int r = 0; r < 2; r++) {
        FILE *f = fopen(path, "w");
        GPP_EXPECT(f && fputs(runs[r], f) >= 0 && fclose(f) == 0);
        gpp_progress_t *p = gpp_progress_new(&layout, NULL, path, &err);
        GPP_EXPECT_MSG(p, "%s", err.msg);
        gpp_progress_destroy(&p);
        struct stat st;
        GPP_EXPECT(stat(path, &st) == 0 && st.st_size == 0); /* the new run's, empty */
    }
    /* both earlier runs' lines are kept, each in its own file */
    char cmd[512], line[256];
    snprintf(cmd, sizeof cmd, "cat %s/m.jsonl.* | sort | tr -d '\\n'", dir);
    FILE *pp = popen(cmd, "r");
    GPP_EXPECT(pp && fgets(line, sizeof line, pp));
    GPP_EXPECT_MSG(!strcmp(line, "{\"run\":1}{\"run\":2}"), "kept: %s", line);
    if (pp)
        pclose(pp);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    GPP_EXPECT(system(cmd) == 0);
}

/* A job resumed at iteration 4 of 6: the metrics file keeps what was in
 * it, gets the marker line, then iterations numbered from 4; the text says
 * "iter 5/6". */
static void t_progress_resumed(void)
{
    const int stage[] = {0}, replica[] = {0}, nact[] = {0}, sink[] = {1};
    char path[] = "/tmp/test_coord_resumed_XXXXXX";
    int fd = mkstemp(path);
    GPP_EXPECT(fd >= 0);
    const char old[] = "{\"iteration\":0,\"loss\":1}\n";
    GPP_EXPECT(write(fd, old, sizeof old - 1) == (ssize_t)(sizeof old - 1));
    close(fd);
    FILE *text = tmpfile();
    gpp_err_t err = {{0}};
    const gpp_progress_layout_t layout = {.n_agents = 1,
                                          .n_stages = 1,
                                          .stage_of_rank = stage,
                                          .replica_of_rank = replica,
                                          .n_actions_of_rank = nact,
                                          .sink_stage = sink,
                                          .iterations = 2,
                                          .batch = 16,
                                          .start_iteration = 4};
    gpp_progress_t *p = gpp_progress_new(&layout, text, path, &err);
    GPP_EXPECT_MSG(p, "%s", err.msg);
    if (!p)
        return;
    Gpp__Metrics m = GPP__METRICS__INIT;
    m.has_loss = 1;
    m.loss = 0.25;
    m.iteration_ms = 10;
    m.samples = 16;
    GPP_EXPECT(gpp_progress_add(p, 0, &m, &err) == 1);
    m.iteration = 1;
    GPP_EXPECT(gpp_progress_add(p, 0, &m, &err) == 1);
    GPP_EXPECT(gpp_progress_finished(p));
    gpp_progress_destroy(&p);
    char line[4096];
    rewind(text);
    GPP_EXPECT(fgets(line, sizeof line, text) && strstr(line, "iter 5/6 "));
    GPP_EXPECT(fgets(line, sizeof line, text) && strstr(line, "iter 6/6 "));
    fclose(text);
    FILE *f = fopen(path, "r");
    GPP_EXPECT(f && fgets(line, sizeof line, f) && !strcmp(line, old));
    GPP_EXPECT(f && fgets(line, sizeof line, f) && !strcmp(line, "{\"resumed_at_iteration\":4}\n"));
    GPP_EXPECT(f && fgets(line, sizeof line, f) && strstr(line, "{\"iteration\":4,\"loss\":0.25,"));
    GPP_EXPECT(f && fgets(line, sizeof line, f) && strstr(line, "{\"iteration\":5,\"loss\":0.25,"));
    GPP_EXPECT(f && !fgets(line, sizeof line, f));
    if (f)
        fclose(f);
    unlink(path);
}

/* ---- a coordinator in a thread (tests/gpp_coord_fixture.h) ---- */

typedef gpp_fixture_coord_t s_coord_run_t;

/* A job of n agents on host "h", slots 0..n-1: control-only when plan_fn
 * is NULL. */
static int s_coord_start_job(s_coord_run_t *r, int n, int barriers, int timeout_ms, int start_ms,
                             gpp_coord_plan_fn *plan_fn, void *plan_arg)
{
    gpp_fixture_coord_init(r, n);
    r->cfg.timeout_ms = timeout_ms;
    r->cfg.start_timeout_ms = start_ms;
    r->cfg.barriers = barriers;
    r->cfg.plan_fn = plan_fn;
    r->cfg.plan_arg = plan_arg;
    return gpp_fixture_coord_start(r);
}

static int s_coord_start(s_coord_run_t *r, int n, int barriers, int timeout_ms, int start_ms)
{
    return s_coord_start_job(r, n, barriers, timeout_ms, start_ms, NULL, NULL);
}

static void s_coord_join(s_coord_run_t *r)
{
    gpp_fixture_coord_join(r);
}

/* ---- a raw peer ---- */

typedef struct {
    zsock_t *s;
    uint64_t seq;
    int rank;
} s_peer_t;

static void s_peer_open(s_peer_t *p, int port)
{
    p->s = zsock_new(ZMQ_DEALER);
    zsock_set_rcvtimeo(p->s, 5000);
    zsock_set_linger(p->s, 0);
    zsock_connect(p->s, "tcp://127.0.0.1:%d", port);
    p->seq = 0;
    p->rank = GPP_MSG_SENDER_UNREGISTERED;
}

static void s_send_bytes(s_peer_t *p, const void *data, size_t len)
{
    zframe_t *f = zframe_new(data, len);
    zframe_send(&f, p->s, 0);
}

/* Packs m as it is (no validation: the tests send invalid envelopes too). */
static void s_send_env(s_peer_t *p, gpp_msg_t *m)
{
    size_t len = gpp__envelope__get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    gpp__envelope__pack(m, buf);
    s_send_bytes(p, buf, len);
    free(buf);
}

static void s_send_register(s_peer_t *p, int slot, unsigned version)
{
    Gpp__Register r = s_reg_msg("h", slot);
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++p->seq, GPP_MSG_SENDER_UNREGISTERED, GPP__ENVELOPE__BODY_REGISTER, &r);
    m.protocol_version = version;
    s_send_env(p, &m);
}

static void s_send_barrier(s_peer_t *p, int id)
{
    Gpp__BarrierEnter b = GPP__BARRIER_ENTER__INIT;
    b.barrier_id = id;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++p->seq, p->rank, GPP__ENVELOPE__BODY_BARRIER_ENTER, &b);
    s_send_env(p, &m);
}

/* The next message other than a heartbeat, or NULL after the timeout. */
static gpp_msg_t *s_recv(s_peer_t *p)
{
    for (;;) {
        zframe_t *f = zframe_recv(p->s);
        if (!f)
            return NULL;
        gpp_err_t err = {{0}};
        gpp_msg_t *m = gpp_msg_decode(zframe_data(f), zframe_size(f), &err);
        zframe_destroy(&f);
        if (!m) {
            fprintf(stderr, "  peer: undecodable reply: %s\n", err.msg);
            return NULL;
        }
        if (m->body_case != GPP__ENVELOPE__BODY_HEARTBEAT)
            return m;
        gpp_msg_destroy(&m);
    }
}

static int s_expect(s_peer_t *p, gpp_msg_type_t type, const char *needle, gpp_msg_t **out)
{
    gpp_msg_t *m = s_recv(p);
    int ok = m && m->body_case == type;
    const char *text = !m                                           ? ""
                       : m->body_case == GPP__ENVELOPE__BODY_REJECT ? m->reject->reason
                       : m->body_case == GPP__ENVELOPE__BODY_ABORT  ? m->abort->reason
                                                                    : "";
    if (ok && needle && !strstr(text, needle))
        ok = 0;
    if (!ok)
        fprintf(stderr, "  expected %s%s%s, got %s '%s'\n", gpp_msg_type_name(type),
                needle ? " containing " : "", needle ? needle : "",
                m ? gpp_msg_type_name(m->body_case) : "nothing", text);
    if (out && ok)
        *out = m;
    else
        gpp_msg_destroy(&m);
    return ok;
}

static void s_heartbeat(s_peer_t *p)
{
    Gpp__Heartbeat hb = GPP__HEARTBEAT__INIT;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++p->seq, p->rank, GPP__ENVELOPE__BODY_HEARTBEAT, &hb);
    s_send_env(p, &m);
}

static int s_register_ok(s_peer_t *p, int slot)
{
    s_send_register(p, slot, GPP_PROTOCOL_VERSION);
    gpp_msg_t *m = NULL;
    if (!s_expect(p, GPP__ENVELOPE__BODY_REGISTER_ACK, NULL, &m))
        return 0;
    p->rank = m->register_ack->rank;
    gpp_msg_destroy(&m);
    return 1;
}

/* Garbage, a wrong version, a duplicate slot and a replay are dropped and
 * counted; the job (2 agents, 3 barriers) goes on and finishes. */
static void t_bad_peers(void)
{
    s_coord_run_t run;
    int port = s_coord_start(&run, 2, 3, 5000, 5000);
    GPP_EXPECT(port > 0);
    if (port <= 0)
        return;
    s_peer_t junk, oldv, a, b, dup;
    s_peer_open(&junk, port);
    s_peer_open(&oldv, port);
    s_peer_open(&a, port);
    s_peer_open(&b, port);
    s_peer_open(&dup, port);

    const char garbage[] = "\xff\x01this is not a protobuf envelope\x00\x07";
    s_send_bytes(&junk, garbage, sizeof garbage);
    GPP_EXPECT(s_expect(&junk, GPP__ENVELOPE__BODY_REJECT, "gpp", NULL));
    s_send_register(&oldv, 0, GPP_PROTOCOL_VERSION + 1);
    GPP_EXPECT(s_expect(&oldv, GPP__ENVELOPE__BODY_REJECT, "protocol_version", NULL));

    GPP_EXPECT(s_register_ok(&a, 0));
    GPP_EXPECT(a.rank == 0);
    s_send_register(&dup, 0, GPP_PROTOCOL_VERSION);
    GPP_EXPECT(s_expect(&dup, GPP__ENVELOPE__BODY_REJECT, "already taken", NULL));
    /* a registered agent replays an old sequence number: dropped */
    uint64_t seq = a.seq;
    a.seq = 0;
    s_heartbeat(&a);
    a.seq = seq;
    GPP_EXPECT(s_register_ok(&b, 1));
    GPP_EXPECT(b.rank == 1);
    for (int i = 0; i < 3; i++) {
        s_send_barrier(&a, i);
        s_send_barrier(&b, i);
        gpp_msg_t *m = NULL;
        GPP_EXPECT(s_expect(&a, GPP__ENVELOPE__BODY_BARRIER_RELEASE, NULL, &m) &&
                   m->barrier_release->barrier_id == i);
        gpp_msg_destroy(&m);
        GPP_EXPECT(s_expect(&b, GPP__ENVELOPE__BODY_BARRIER_RELEASE, NULL, &m) &&
                   m->barrier_release->barrier_id == i);
        gpp_msg_destroy(&m);
    }
    GPP_EXPECT(s_expect(&a, GPP__ENVELOPE__BODY_SHUTDOWN, NULL, NULL));
    GPP_EXPECT(s_expect(&b, GPP__ENVELOPE__BODY_SHUTDOWN, NULL, NULL));
    s_coord_join(&run);
    GPP_EXPECT_MSG(run.rc == 0, "rc %d: %s", run.rc, run.reason);
    GPP_EXPECT_MSG(run.dropped == 4,
                   "dropped %llu, expected 4 (garbage, version, duplicate, "
                   "replay)",
                   (unsigned long long)run.dropped);
    GPP_EXPECT(run.barriers_timed == 2);
    zsock_destroy(&junk.s);
    zsock_destroy(&oldv.s);
    zsock_destroy(&a.s);
    zsock_destroy(&b.s);
    zsock_destroy(&dup.s);
}

/* One of two agents never comes: the job stops naming its host:slot, and
 * the registered one gets Abort with the same reason. */
static void t_missing_agent(void)
{
    s_coord_run_t run;
    int port = s_coord_start(&run, 2, 1, 5000, 300);
    s_peer_t a;
    s_peer_open(&a, port);
    GPP_EXPECT(s_register_ok(&a, 1));
    GPP_EXPECT(s_expect(&a, GPP__ENVELOPE__BODY_ABORT, "missing h:0", NULL));
    s_coord_join(&run);
    GPP_EXPECT(run.rc == -1);
    GPP_EXPECT_MSG(strstr(run.reason, "waiting for agents: missing h:0 (1 of 2 registered)"), "%s",
                   run.reason);
    zsock_destroy(&a.s);
}

/* A registered agent goes silent: the job stops naming it. */
static void t_silent_agent(void)
{
    s_coord_run_t run;
    int port = s_coord_start(&run, 2, 5, 400, 5000);
    s_peer_t a, b;
    s_peer_open(&a, port);
    s_peer_open(&b, port);
    GPP_EXPECT(s_register_ok(&a, 0));
    GPP_EXPECT(s_register_ok(&b, 1));
    /* a keeps heartbeating, b says nothing more */
    gpp_msg_t *m = NULL;
    int64_t t0 = zclock_mono();
    while (zclock_mono() - t0 < 3000) {
        s_heartbeat(&a);
        zsock_set_rcvtimeo(a.s, 50);
        m = s_recv(&a);
        if (m)
            break;
    }
    GPP_EXPECT_MSG(m && m->body_case == GPP__ENVELOPE__BODY_ABORT &&
                       strstr(m->abort->reason, "agent h:1 (rank 1, pid 4242) silent"),
                   "%s", m && m->body_case == GPP__ENVELOPE__BODY_ABORT ? m->abort->reason : "-");
    gpp_msg_destroy(&m);
    s_coord_join(&run);
    GPP_EXPECT(run.rc == -1 && strstr(run.reason, "heartbeat timeout"));
    zsock_destroy(&a.s);
    zsock_destroy(&b.s);
}

/* Protocol misuse by a registered agent (wrong sender, a barrier that is
 * not open, a coordinator-only message) is dropped; the job still ends. */
static void t_misuse(void)
{
    s_coord_run_t run;
    int port = s_coord_start(&run, 1, 1, 5000, 5000);
    s_peer_t a;
    s_peer_open(&a, port);
    GPP_EXPECT(s_register_ok(&a, 0));
    a.rank = 7; /* lies about its rank */
    s_heartbeat(&a);
    a.rank = 0;
    s_send_barrier(&a, 5); /* not the open barrier */
    Gpp__Shutdown sd = GPP__SHUTDOWN__INIT;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++a.seq, 0, GPP__ENVELOPE__BODY_SHUTDOWN, &sd);
    s_send_env(&a, &m);
    s_send_barrier(&a, 0);
    GPP_EXPECT(s_expect(&a, GPP__ENVELOPE__BODY_BARRIER_RELEASE, NULL, NULL));
    GPP_EXPECT(s_expect(&a, GPP__ENVELOPE__BODY_SHUTDOWN, NULL, NULL));
    s_coord_join(&run);
    GPP_EXPECT_MSG(run.rc == 0, "%s", run.reason);
    GPP_EXPECT_MSG(run.dropped == 3, "dropped %llu", (unsigned long long)run.dropped);
    zsock_destroy(&a.s);
}

/* ---- planning off the event loop ---- */

/* A planned job (gpp_job, a small model on two CPU slots) whose planning
 * takes delay_ms (the plan_slow fault hook). NULL when it cannot be set up. */
static gpp_job_t *s_job_new(int delay_ms)
{
    const char *text = "[cluster]\ndevice = \"cpu\"\n[[nodes]]\nhost = \"h\"\nslots = 2\n"
                       "[job]\nmodel = \"mmt:branches=2,layers=1,hidden=64,heads=4,seq=16\"\n"
                       "batch = 8\niterations = 2\nplanner = \"gpp\"\nlaunch = \"external\"\n";
    gpp_config_t cfg;
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_config_load_string(&cfg, text, "inline.toml", &err) == 0, "%s", err.msg);
    if (err.msg[0])
        return NULL;
    gpp_job_t *job = gpp_job_new(&cfg, "gpp", 0, 0, NULL, &err);
    GPP_EXPECT_MSG(job, "%s", err.msg);
    gpp_config_release(&cfg);
    GPP_EXPECT(gpp_fault_arm("plan_slow", delay_ms) == 0);
    return job;
}

/* Registers with memory enough for any stage of the plan. */
static int s_register_big(s_peer_t *p, int slot)
{
    Gpp__Register r = s_reg_msg("h", slot);
    r.mem_bytes = (int64_t)8 << 30;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++p->seq, GPP_MSG_SENDER_UNREGISTERED, GPP__ENVELOPE__BODY_REGISTER, &r);
    s_send_env(p, &m);
    gpp_msg_t *ack = NULL;
    if (!s_expect(p, GPP__ENVELOPE__BODY_REGISTER_ACK, NULL, &ack))
        return 0;
    p->rank = ack->register_ack->rank;
    gpp_msg_destroy(&ack);
    return 1;
}

/* Heartbeats from peers a and b (b only when b_alive) for at most ms;
 * counts the coordinator's heartbeats each receives. The first other
 * message a peer gets goes to other[i] (else NULL); the wait ends when
 * every heartbeating peer got one. */
static void s_heartbeat_for(s_peer_t *a, s_peer_t *b, int b_alive, int ms, int hb[2],
                            gpp_msg_t *other[2])
{
    s_peer_t *p[2] = {a, b};
    other[0] = other[1] = NULL;
    int64_t t0 = zclock_mono();
    while (zclock_mono() - t0 < ms && !(other[0] && (other[1] || !b_alive))) {
        for (int i = 0; i < 2; i++) {
            if (i == 0 || b_alive)
                s_heartbeat(p[i]);
            zframe_t *f;
            while (!other[i] && (f = zframe_recv_nowait(p[i]->s)) != NULL) {
                gpp_err_t err = {{0}};
                gpp_msg_t *m = gpp_msg_decode(zframe_data(f), zframe_size(f), &err);
                zframe_destroy(&f);
                if (m && m->body_case == GPP__ENVELOPE__BODY_HEARTBEAT) {
                    hb[i]++;
                    gpp_msg_destroy(&m);
                } else {
                    other[i] = m;
                }
            }
        }
        zclock_sleep(20);
    }
}

static const char *s_type(const gpp_msg_t *m)
{
    return m ? gpp_msg_type_name(m->body_case) : "nothing";
}

/* A planned job whose planning takes delay_ms, its coordinator (agents
 * silent for timeout_ms are dead) and two registered peers. */
typedef struct {
    gpp_job_t *job;
    s_coord_run_t run;
    s_peer_t a, b;
} s_planned_t;

static int s_planned_start(s_planned_t *p, int delay_ms, int timeout_ms)
{
    p->job = s_job_new(delay_ms);
    if (!p->job)
        return 0;
    int port = s_coord_start_job(&p->run, 2, 0, timeout_ms, 5000, gpp_job_plan_fn, p->job);
    s_peer_open(&p->a, port);
    s_peer_open(&p->b, port);
    int ok = s_register_big(&p->a, 0) && s_register_big(&p->b, 1);
    GPP_EXPECT(ok);
    return 1;
}

/* After s_coord_join. */
static void s_planned_end(s_planned_t *p)
{
    zsock_destroy(&p->a.s);
    zsock_destroy(&p->b.s);
    gpp_fault_arm("plan_slow", -1);
    gpp_job_destroy(&p->job);
}

/* After s_heartbeat_for: both peers got heartbeats only (at least min
 * each) while `when`; destroys other[]. */
static void s_expect_quiet(gpp_msg_t *other[2], const int hb[2], int min, const char *when)
{
    GPP_EXPECT_MSG(!other[0] && !other[1], "got %s and %s %s", s_type(other[0]), s_type(other[1]),
                   when);
    GPP_EXPECT_MSG(hb[0] >= min && hb[1] >= min, "heartbeats %s: %d and %d", when, hb[0], hb[1]);
    for (int i = 0; i < 2; i++)
        gpp_msg_destroy(&other[i]);
}

/* other[] (s_heartbeat_for's) holds the plan: an Assignment for at least
 * one peer, a Shutdown (an unused agent) for the other; destroys them. */
static void s_expect_plan(gpp_msg_t *other[2])
{
    int assigned = 0, answered = 0;
    for (int i = 0; i < 2; i++) {
        int t = other[i] ? (int)other[i]->body_case : -1;
        assigned += t == GPP__ENVELOPE__BODY_ASSIGNMENT;
        answered += t == GPP__ENVELOPE__BODY_ASSIGNMENT || t == GPP__ENVELOPE__BODY_SHUTDOWN;
    }
    GPP_EXPECT_MSG(assigned >= 1 && answered == 2, "after planning: %s and %s", s_type(other[0]),
                   s_type(other[1]));
    for (int i = 0; i < 2; i++)
        gpp_msg_destroy(&other[i]);
}

/* Planning that takes 2.5 s runs beside the loop: both agents get the
 * coordinator's heartbeats all along (50 ms apart) and nobody is declared
 * dead (timeout 1 s); then the assignments go out. */
static void t_planning_keeps_heartbeats(void)
{
    s_planned_t pl;
    if (!s_planned_start(&pl, 2500, 1000))
        return;
    int hb[2] = {0, 0};
    gpp_msg_t *other[2];
    s_heartbeat_for(&pl.a, &pl.b, 1, 2000, hb, other); /* inside the 2.5 s of planning */
    s_expect_quiet(other, hb, 10, "while planning");
    /* then the plan: an Assignment (or Shutdown for an unused agent) each */
    s_heartbeat_for(&pl.a, &pl.b, 1, 3000, hb, other);
    s_expect_plan(other);
    /* the agents fall silent: the job stops */
    s_coord_join(&pl.run);
    GPP_EXPECT_MSG(pl.run.rc == -1 && strstr(pl.run.reason, "silent"), "%s", pl.run.reason);
    s_planned_end(&pl);
}

/* An agent dies while planning (10 s) runs: the job stops at once naming
 * it, planning is cancelled and its thread joined: the run ends well before
 * planning would have. */
static void t_planning_cancelled(void)
{
    s_planned_t pl;
    if (!s_planned_start(&pl, 10000, 400))
        return;
    int64_t t0 = zclock_mono();
    int hb[2] = {0, 0};
    gpp_msg_t *other[2];
    s_heartbeat_for(&pl.a, &pl.b, 0, 3000, hb, other); /* b is silent */
    GPP_EXPECT_MSG(other[0] && other[0]->body_case == GPP__ENVELOPE__BODY_ABORT &&
                       strstr(other[0]->abort->reason, "agent h:1 (rank 1, pid 4242) silent"),
                   "got %s", s_type(other[0]));
    gpp_msg_destroy(&other[0]);
    gpp_msg_destroy(&other[1]);
    s_coord_join(&pl.run);
    int64_t took = zclock_mono() - t0;
    GPP_EXPECT_MSG(took < 3000, "the run took %lld ms after planning started", (long long)took);
    GPP_EXPECT_MSG(pl.run.rc == -1 && strstr(pl.run.reason, "heartbeat timeout"), "%s",
                   pl.run.reason);
    s_planned_end(&pl);
}

/* The coordinator's loop stalls 1.5 s (a loaded machine; timeout 1 s)
 * right after the plan went out, while both agents keep sending heartbeats:
 * what queued in its socket is read before anyone is called silent, so the
 * job goes on; then b falls silent and is named. */
static void t_stall_reads_queued(void)
{
    gpp_fault_arm("loop_stall", 1500);
    s_planned_t pl;
    if (!s_planned_start(&pl, 0, 1000)) {
        gpp_fault_arm("loop_stall", -1);
        return;
    }
    int hb[2] = {0, 0};
    gpp_msg_t *other[2];
    s_heartbeat_for(&pl.a, &pl.b, 1, 3000, hb, other); /* the plan */
    s_expect_plan(other);
    hb[0] = hb[1] = 0;
    s_heartbeat_for(&pl.a, &pl.b, 1, 2500, hb, other); /* the stall and after */
    s_expect_quiet(other, hb, 5, "across the stall");
    s_heartbeat_for(&pl.a, &pl.b, 0, 3000, hb, other); /* b is silent */
    GPP_EXPECT_MSG(other[0] && other[0]->body_case == GPP__ENVELOPE__BODY_ABORT &&
                       strstr(other[0]->abort->reason, "agent h:1 (rank 1, pid 4242) silent"),
                   "got %s", s_type(other[0]));
    for (int i = 0; i < 2; i++)
        gpp_msg_destroy(&other[i]);
    s_coord_join(&pl.run);
    GPP_EXPECT_MSG(pl.run.rc == -1 && strstr(pl.run.reason, "h:1"), "%s", pl.run.reason);
    s_planned_end(&pl);
    gpp_fault_arm("loop_stall", -1);
}

/* ---- the agent side: a real gpp-agent against a hand-driven ROUTER ---- */

static void s_router_send(zsock_t *r, zframe_t *id, gpp_msg_t *m)
{
    size_t len = gpp__envelope__get_packed_size(m);
    uint8_t *buf = malloc(len ? len : 1);
    gpp__envelope__pack(m, buf);
    zmsg_t *zm = zmsg_new();
    zmsg_addmem(zm, zframe_data(id), zframe_size(id));
    zmsg_addmem(zm, buf, len);
    zmsg_send(&zm, r);
    free(buf);
}

/* A real gpp-agent (slot h:0, heartbeat 100 ms, the given timeout, the
 * environment entry env when not NULL) connected to a ROUTER of our own,
 * its stderr in a temp file. s_agent_start returns 0 (after a failed
 * EXPECT, everything released) when no Register came. */
typedef struct {
    zsock_t *r;
    pid_t pid;
    char logp[64];
    zframe_t *id; /* the agent's routing id */
} s_agent_t;

static int s_agent_start(s_agent_t *ag, const char *timeout_ms, const char *env)
{
    const char *bin = getenv("GPP_BIN");
    char agent[1024], ep[64];
    snprintf(agent, sizeof agent, "%s/agent/gpp-agent", bin ? bin : "build");
    snprintf(ag->logp, sizeof ag->logp, "/tmp/test_coord_agent_XXXXXX");
    ag->id = NULL;
    ag->r = zsock_new(ZMQ_ROUTER);
    zsock_set_rcvtimeo(ag->r, 5000);
    zsock_set_linger(ag->r, 0);
    int port = zsock_bind(ag->r, "tcp://127.0.0.1:*");
    GPP_EXPECT(port > 0);
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    int logfd = mkstemp(ag->logp);
    ag->pid = fork();
    if (ag->pid == 0) {
        dup2(logfd, 2);
        if (env)
            putenv((char *)env);
        execl(agent, agent, "--coordinator", ep, "--host", "h", "--slot", "0", "--heartbeat-ms",
              "100", "--timeout-ms", timeout_ms, (char *)NULL);
        _exit(127);
    }
    close(logfd);
    zmsg_t *reg = zmsg_recv(ag->r);
    GPP_EXPECT_MSG(reg && zmsg_size(reg) == 2, "no register from %s", agent);
    if (!reg || zmsg_size(reg) != 2) {
        kill(ag->pid, SIGKILL);
        waitpid(ag->pid, NULL, 0);
        zmsg_destroy(&reg);
        zsock_destroy(&ag->r);
        unlink(ag->logp);
        return 0;
    }
    ag->id = zmsg_pop(reg);
    zframe_t *body = zmsg_pop(reg);
    gpp_err_t err = {{0}};
    gpp_msg_t *m = gpp_msg_decode(zframe_data(body), zframe_size(body), &err);
    GPP_EXPECT(m && m->body_case == GPP__ENVELOPE__BODY_REGISTER && m->register_->slot == 0 &&
               !strcmp(m->register_->host, "h"));
    gpp_msg_destroy(&m);
    zframe_destroy(&body);
    zmsg_destroy(&reg);
    return 1;
}

/* Waits (at most 10 s, then SIGKILL) for the agent; its wait status (-1
 * when killed) and its log in log[cap]; releases everything. */
static int s_agent_end(s_agent_t *ag, char *log, size_t cap)
{
    int status = -1;
    for (int i = 0; i < 100; i++) { /* at most 10 s */
        if (waitpid(ag->pid, &status, WNOHANG) == ag->pid)
            break;
        status = -1;
        zclock_sleep(100);
    }
    if (status == -1) {
        kill(ag->pid, SIGKILL);
        waitpid(ag->pid, NULL, 0);
    }
    log[0] = 0;
    FILE *f = fopen(ag->logp, "r");
    if (f) {
        size_t n = fread(log, 1, cap - 1, f);
        log[n] = 0;
        fclose(f);
    }
    unlink(ag->logp);
    zframe_destroy(&ag->id);
    zsock_destroy(&ag->r);
    return status;
}

/* gpp-agent drops (and counts) garbage, a wrong version, a message not from
 * the coordinator, a release of a barrier it never entered, a second ack and
 * a replayed sequence number, then obeys Shutdown and exits 0. */
static void t_agent_drops_bad_frames(void)
{
    s_agent_t ag;
    if (!s_agent_start(&ag, "5000", NULL))
        return;
    zsock_t *r = ag.r;
    zframe_t *id = ag.id;
    zmsg_t *junk = zmsg_new(); /* 1: garbage */
    zmsg_addmem(junk, zframe_data(id), zframe_size(id));
    zmsg_addstr(junk, "definitely not an envelope");
    zmsg_send(&junk, r);
    Gpp__RegisterAck ack = GPP__REGISTER_ACK__INIT;
    ack.rank = 0;
    ack.world_size = 1;
    gpp_msg_t out;
    /* 2: wrong protocol version */
    gpp_msg_wrap(&out, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_REGISTER_ACK, &ack);
    out.protocol_version = GPP_PROTOCOL_VERSION + 7;
    s_router_send(r, id, &out);
    /* 3: not from the coordinator */
    gpp_msg_wrap(&out, 2, 3, GPP__ENVELOPE__BODY_REGISTER_ACK, &ack);
    s_router_send(r, id, &out);
    /* accepted */
    gpp_msg_wrap(&out, 5, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_REGISTER_ACK, &ack);
    s_router_send(r, id, &out);
    Gpp__BarrierRelease rel = GPP__BARRIER_RELEASE__INIT;
    /* 4: a barrier it never entered */
    gpp_msg_wrap(&out, 6, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_BARRIER_RELEASE, &rel);
    s_router_send(r, id, &out);
    /* 5: a second ack */
    gpp_msg_wrap(&out, 7, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_REGISTER_ACK, &ack);
    s_router_send(r, id, &out);
    Gpp__Heartbeat hb = GPP__HEARTBEAT__INIT;
    /* 6: a replayed sequence number */
    gpp_msg_wrap(&out, 3, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_HEARTBEAT, &hb);
    s_router_send(r, id, &out);
    Gpp__Shutdown sd = GPP__SHUTDOWN__INIT;
    gpp_msg_wrap(&out, 8, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_SHUTDOWN, &sd);
    s_router_send(r, id, &out);

    char log[8192];
    int status = s_agent_end(&ag, log, sizeof log);
    GPP_EXPECT_MSG(status == 0, "agent wait status %d", status);
    GPP_EXPECT_MSG(strstr(log, "6 invalid messages from the coordinator dropped") &&
                       strstr(log, "protocol_version: peer speaks") &&
                       strstr(log, "is not the coordinator") &&
                       strstr(log, "barrier_release 0 but we wait for -1") &&
                       strstr(log, "second register_ack") && strstr(log, "not after 5"),
                   "agent log:\n%s", log);
}

/* The agent's control loop stalls 1.5 s (timeout 1 s) after its
 * RegisterAck while our heartbeats keep coming every 100 ms: it reads what
 * queued before calling the coordinator lost, stays, and obeys Shutdown. */
static void t_agent_stall_reads_queued(void)
{
    s_agent_t ag;
    if (!s_agent_start(&ag, "1000", "GPP_FAULT=loop_stall:1500"))
        return;
    Gpp__RegisterAck ack = GPP__REGISTER_ACK__INIT;
    ack.rank = 0;
    ack.world_size = 1;
    gpp_msg_t out;
    uint64_t seq = 1;
    gpp_msg_wrap(&out, seq++, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_REGISTER_ACK, &ack);
    s_router_send(ag.r, ag.id, &out);
    Gpp__Heartbeat hb = GPP__HEARTBEAT__INIT;
    int64_t t0 = zclock_mono();
    while (zclock_mono() - t0 < 3000) {
        gpp_msg_wrap(&out, seq++, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_HEARTBEAT, &hb);
        s_router_send(ag.r, ag.id, &out);
        zmsg_t *in;
        while ((in = zmsg_recv_nowait(ag.r)) != NULL) /* its heartbeats */
            zmsg_destroy(&in);
        zclock_sleep(100);
    }
    Gpp__Shutdown sd = GPP__SHUTDOWN__INIT;
    gpp_msg_wrap(&out, seq++, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_SHUTDOWN, &sd);
    s_router_send(ag.r, ag.id, &out);
    char log[8192];
    int status = s_agent_end(&ag, log, sizeof log);
    GPP_EXPECT_MSG(status == 0 && strstr(log, "GPP_FAULT") && !strstr(log, "giving up"),
                   "agent wait status %d, log:\n%s", status, log);
}

static const gpp_test_case_t cases[] = {{"registry", t_registry},
                                        {"progress", t_progress},
                                        {"progress_resumed", t_progress_resumed},
                                        {"progress_keeps_previous", t_progress_keeps_previous},
                                        {"bad_peers", t_bad_peers},
                                        {"missing_agent", t_missing_agent},
                                        {"silent_agent", t_silent_agent},
                                        {"misuse", t_misuse},
                                        {"planning_keeps_heartbeats", t_planning_keeps_heartbeats},
                                        {"planning_cancelled", t_planning_cancelled},
                                        {"stall_reads_queued", t_stall_reads_queued},
                                        {"agent_drops_bad_frames", t_agent_drops_bad_frames},
                                        {"agent_stall_reads_queued", t_agent_stall_reads_queued},
                                        {NULL, NULL}};

int main(void)
{
    zsys_handler_set(NULL);
    return gpp_test_run(cases);
}
