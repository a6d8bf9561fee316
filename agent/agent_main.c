/* gpp-agent: one stage replica of a job. Connects to the coordinator,
 * registers, heartbeats, and on its assignment brings up the comm backend
 * and runs the stage's lowered action list with the executor, reporting
 * metrics per iteration. See docs/coordinator.md.
 *
 *   gpp-agent --coordinator tcp://HOST:PORT --host NAME --slot N [options]
 *
 * Threads: the main thread runs the one zloop (control socket, heartbeats,
 * signals, the worker's pipe); a worker thread runs the training, which
 * blocks in compute and communication. They talk over an inproc PAIR pipe:
 * the worker sends encoded envelopes for the coordinator (Ready,
 * BarrierEnter, Metrics, Error) and a final "done"/"failed" word; the main
 * thread sends barrier releases and, on Abort/Shutdown/signal, stops the
 * worker through gpp_runner_abort (which aborts the communicator so that a
 * blocked receive returns).
 *
 * Exit status: 0 after Shutdown, 1 after Abort, Reject, a lost coordinator
 * or a failure, 2 on a bad command line, 128+N on signal N. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <czmq.h>

#include "common/gpp_parse.h"
#include "kernels/gpp_backend.h"
#include "agent/control/gpp_control.h"
#include "common/gpp_sigfd.h"
#include "common/gpp_time.h"
#ifdef GPP_HAVE_RUNNER
#include "agent/control/gpp_runner.h"
#endif

typedef struct {
    gpp_control_cfg_t ctl;
    int control_barriers;  /* control-only job: barriers to run after RegisterAck */
    int threads;           /* CPU backend threads */
    const char *data_host; /* data-plane bind address; default: --host */
    int comm_timeout_ms;   /* data-plane rendezvous and waits */
} s_opts_t;

typedef struct {
    s_opts_t o;
    zloop_t *loop;
    gpp_control_t *ctl;
    zmq_pollitem_t sig_item;
    int next_barrier; /* control-only job */
    int exit_code;
    int finished; /* the loop should end */
#ifdef GPP_HAVE_RUNNER
    gpp_runner_t *runner;   /* the training worker, once assigned */
    gpp_runner_t *profiler; /* the profiling worker, while asked to profile */
#endif
} s_agent_t;

static void s_usage(FILE *f)
{
    fprintf(f, "usage: gpp-agent --coordinator tcp://HOST:PORT --host NAME --slot N\n"
               "                 [--heartbeat-ms N] [--timeout-ms N] [--mem-bytes N]\n"
               "                 [--threads N] [--data-host ADDR] [--comm-timeout-ms N]\n"
               "                 [--control-barriers N]\n");
}

static int s_parse(int argc, char **argv, s_opts_t *o)
{
    static const struct option longs[] = {{"coordinator", required_argument, 0, 'c'},
                                          {"host", required_argument, 0, 'H'},
                                          {"slot", required_argument, 0, 's'},
                                          {"heartbeat-ms", required_argument, 0, 'b'},
                                          {"timeout-ms", required_argument, 0, 't'},
                                          {"mem-bytes", required_argument, 0, 'm'},
                                          {"threads", required_argument, 0, 'T'},
                                          {"control-barriers", required_argument, 0, 'B'},
                                          {"data-host", required_argument, 0, 'D'},
                                          {"comm-timeout-ms", required_argument, 0, 'C'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    static char hostname[256];
    memset(o, 0, sizeof *o);
    o->ctl.slot = -1;
    o->ctl.backend = GPP__BACKEND__BACKEND_CPU;
    o->ctl.mem_bytes = 4LL << 30;
    o->ctl.heartbeat_ms = 500;
    o->ctl.timeout_ms = 5000;
    o->threads = 1;
    int c, idx;
    int64_t v;
    while ((c = getopt_long(argc, argv, "h", longs, &idx)) != -1) {
        switch (c) {
        case 'c':
            o->ctl.endpoint = optarg;
            break;
        case 'H':
            o->ctl.host = optarg;
            break;
        case 's':
            if (gpp_parse_flag_int64("gpp-agent", "--slot", optarg, 0, INT_MAX, &v) < 0)
                return -1;
            o->ctl.slot = (int)v;
            break;
        case 'b':
            if (gpp_parse_flag_int64("gpp-agent", "--heartbeat-ms", optarg, 1, INT_MAX, &v) < 0)
                return -1;
            o->ctl.heartbeat_ms = (int)v;
            break;
        case 't':
            if (gpp_parse_flag_int64("gpp-agent", "--timeout-ms", optarg, 2, INT_MAX, &v) < 0)
                return -1;
            o->ctl.timeout_ms = (int)v;
            break;
        case 'm':
            if (gpp_parse_flag_int64("gpp-agent", "--mem-bytes", optarg, 1, LONG_MAX, &v) < 0)
                return -1;
            o->ctl.mem_bytes = v;
            break;
        case 'T':
            if (gpp_parse_flag_int64("gpp-agent", "--threads", optarg, 1, 1024, &v) < 0)
                return -1;
            o->threads = (int)v;
            break;
        case 'B':
            if (gpp_parse_flag_int64("gpp-agent", "--control-barriers", optarg, 0, INT_MAX, &v) < 0)
                return -1;
            o->control_barriers = (int)v;
            break;
        case 'D':
            o->data_host = optarg;
            break;
        case 'C':
            if (gpp_parse_flag_int64("gpp-agent", "--comm-timeout-ms", optarg, 1, INT_MAX, &v) < 0)
                return -1;
            o->comm_timeout_ms = (int)v;
            break;
        case 'h':
            s_usage(stdout);
            exit(0);
        default:
            s_usage(stderr);
            return -1;
        }
    }
    if (optind != argc || !o->ctl.endpoint || o->ctl.slot < 0) {
        fprintf(stderr, "gpp-agent: --coordinator and --slot are required\n");
        s_usage(stderr);
        return -1;
    }
    if (!o->ctl.host) {
        if (gethostname(hostname, sizeof hostname - 1) < 0)
            snprintf(hostname, sizeof hostname, "localhost");
        o->ctl.host = hostname;
    }
    if (!o->data_host)
        o->data_host = o->ctl.host;
    if (!o->comm_timeout_ms) /* a dead peer is the coordinator's to report first */
        o->comm_timeout_ms = o->ctl.timeout_ms * 4 > 60000 ? o->ctl.timeout_ms * 4 : 60000;
    return 0;
}

/* Ends the agent with `code` (the first reason wins). */
static int s_end(s_agent_t *self, int code)
{
    if (!self->finished) {
        self->finished = 1;
        self->exit_code = code;
    }
#ifdef GPP_HAVE_RUNNER
    if (self->profiler && !gpp_runner_done(self->profiler)) {
        gpp_runner_stop(self->profiler, 1); /* the loop ends when it reports done */
        return 0;
    }
    if (self->runner && !gpp_runner_done(self->runner)) {
        /* the worker is still running: stop it (at once unless the job
         * ended normally); the loop ends when it reports done */
        gpp_runner_stop(self->runner, code != 0);
        return 0;
    }
#endif
    return -1;
}

#ifdef GPP_HAVE_RUNNER
/* The worker ended: after Shutdown/Abort (finished is set), or by itself
 * on a failure, which it already reported to the coordinator. */
static int s_on_runner_done(void *arg, int ok)
{
    s_agent_t *self = arg;
    if (!self->finished) {
        self->finished = 1;
        self->exit_code = 1;
    } else if (!ok && self->exit_code == 0) {
        self->exit_code = 1;
    }
    return -1;
}
#endif

#ifdef GPP_HAVE_RUNNER
/* The profiling worker ended: carry on (the assignment comes next) unless
 * the agent is ending. A failure was reported to the coordinator. */
static int s_on_profiler_done(void *arg, int ok)
{
    s_agent_t *self = arg;
    if (self->finished)
        return -1;
    if (!ok) {
        self->finished = 1;
        self->exit_code = 1;
        return -1;
    }
    return 0;
}
#endif

static int s_control_barrier(s_agent_t *self)
{
    gpp_err_t err = {{0}};
    if (gpp_control_barrier_enter(self->ctl, self->next_barrier, &err) < 0) {
        gpp_error("agent %s:%d: %s", self->o.ctl.host, self->o.ctl.slot, err.msg);
        return s_end(self, 1);
    }
    self->next_barrier++;
    return 0;
}

static int s_on_message(gpp_control_t *ctl, gpp_msg_t **msg_p, void *arg)
{
    (void)ctl;
    s_agent_t *self = arg;
    gpp_msg_t *m = *msg_p;
    const char *host = self->o.ctl.host;
    int slot = self->o.ctl.slot;
    switch (m->body_case) {
    case GPP__ENVELOPE__BODY_REGISTER_ACK:
        gpp_info("agent %s:%d: registered as rank %d of %d", host, slot, m->register_ack->rank,
                 m->register_ack->world_size);
        if (self->o.control_barriers > 0)
            return s_control_barrier(self);
        return 0;
    case GPP__ENVELOPE__BODY_REJECT:
        gpp_error("agent %s:%d: rejected by the coordinator: %s", host, slot, m->reject->reason);
        return s_end(self, 1);
    case GPP__ENVELOPE__BODY_BARRIER_RELEASE:
#ifdef GPP_HAVE_RUNNER
        if (self->runner) {
            gpp_runner_release(self->runner, m->barrier_release->barrier_id);
            return 0;
        }
#endif
        if (self->next_barrier < self->o.control_barriers)
            return s_control_barrier(self);
        return 0;
    case GPP__ENVELOPE__BODY_ASSIGNMENT: {
#ifdef GPP_HAVE_RUNNER
        if (self->runner) {
            gpp_warn("agent %s:%d: a second assignment; ignored", host, slot);
            return 0;
        }
        gpp_runner_destroy(&self->profiler); /* done: its report came before this */
        gpp_err_t err = {{0}};
        gpp_runner_cfg_t rc = {.threads = self->o.threads,
                               .host = self->o.data_host,
                               .comm_timeout_ms = self->o.comm_timeout_ms,
                               .on_done = s_on_runner_done,
                               .arg = self};
        gpp_info("agent %s:%d: assigned stage %d replica %d of %d (%zu ops, %zu actions)", host,
                 slot, m->assignment->stage, m->assignment->replica, m->assignment->replicas,
                 m->assignment->n_ops, m->assignment->n_actions);
        self->runner = gpp_runner_start(msg_p, &rc, self->loop, self->ctl, &err);
        if (!self->runner) {
            gpp_error("agent %s:%d: %s", host, slot, err.msg);
            gpp_err_t e2 = {{0}};
            gpp_control_error(self->ctl, GPP__ERROR_CODE__ERROR_CONFIG, err.msg, &e2);
            return s_end(self, 1);
        }
        return 0;
#else
        gpp_error("agent %s:%d: got an assignment, but this build has no executor", host, slot);
        gpp_err_t err = {{0}};
        gpp_control_error(self->ctl, GPP__ERROR_CODE__ERROR_CONFIG,
                          "this gpp-agent build has no executor", &err);
        return s_end(self, 1);
#endif
    }
    case GPP__ENVELOPE__BODY_PROFILE_REQUEST: {
#ifdef GPP_HAVE_RUNNER
        if (self->profiler || self->runner) {
            gpp_warn("agent %s:%d: a second profile request; ignored", host, slot);
            return 0;
        }
        gpp_err_t err = {{0}};
        gpp_runner_cfg_t rc = {
            .threads = self->o.threads, .on_done = s_on_profiler_done, .arg = self};
        gpp_info("agent %s:%d: profiling %s", host, slot, m->profile_request->model);
        self->profiler = gpp_runner_start(msg_p, &rc, self->loop, self->ctl, &err);
        if (!self->profiler) {
            gpp_error("agent %s:%d: %s", host, slot, err.msg);
            gpp_err_t e2 = {{0}};
            gpp_control_error(self->ctl, GPP__ERROR_CODE__ERROR_INTERNAL, err.msg, &e2);
            return s_end(self, 1);
        }
        return 0;
#else
        gpp_err_t err = {{0}};
        gpp_control_error(self->ctl, GPP__ERROR_CODE__ERROR_CONFIG,
                          "this gpp-agent build has no executor to profile with", &err);
        return s_end(self, 1);
#endif
    }
    case GPP__ENVELOPE__BODY_ABORT:
        gpp_error("agent %s:%d: job aborted by the coordinator: %s", host, slot, m->abort->reason);
        return s_end(self, 1);
    case GPP__ENVELOPE__BODY_SHUTDOWN:
        gpp_info("agent %s:%d: shutdown", host, slot);
        return s_end(self, 0);
    case GPP__ENVELOPE__BODY_ERROR:
        gpp_warn("agent %s:%d: coordinator error: %s", host, slot, m->error->text);
        return 0;
    default:
        gpp_warn("agent %s:%d: unexpected %s from the coordinator; ignored", host, slot,
                 gpp_msg_type_name(m->body_case));
        return 0;
    }
}

static int s_on_lost(gpp_control_t *ctl, double silent_ms, void *arg)
{
    (void)ctl;
    s_agent_t *self = arg;
    gpp_error("agent %s:%d: coordinator %s silent for %.1f s (timeout %.1f s); giving up",
              self->o.ctl.host, self->o.ctl.slot, self->o.ctl.endpoint, silent_ms / 1000.0,
              self->o.ctl.timeout_ms / 1000.0);
    return s_end(self, 1);
}

static int s_on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void)loop;
    s_agent_t *self = arg;
    int sig;
    while ((sig = gpp_sigfd_read(item->fd)) > 0) {
        if (sig == SIGCHLD)
            continue;
        gpp_warn("agent %s:%d: %s; stopping", self->o.ctl.host, self->o.ctl.slot, strsignal(sig));
        if (s_end(self, 128 + sig) < 0)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    gpp_cpu_blas_reexec(argv); /* before OpenBLAS's choice matters */
    s_agent_t self;
    memset(&self, 0, sizeof self);
    if (s_parse(argc, argv, &self.o) < 0)
        return 2;
    gpp_err_t err = {{0}};
    int sigfd = gpp_sigfd_open(&err);
    if (sigfd < 0) {
        gpp_error("gpp-agent: %s", err.msg);
        return 1;
    }
    self.loop = zloop_new();
    zloop_set_nonstop(self.loop, true);
    self.sig_item = (zmq_pollitem_t){NULL, sigfd, ZMQ_POLLIN, 0};
    zloop_poller(self.loop, &self.sig_item, s_on_signal, &self);
    gpp_control_handlers_t h = {s_on_message, s_on_lost};
    self.ctl = gpp_control_new(&self.o.ctl, self.loop, &h, &self, &err);
    if (!self.ctl) {
        gpp_error("gpp-agent: %s", err.msg);
        zloop_destroy(&self.loop);
        return 1;
    }
    gpp_sigfd_run_loop(self.loop);
#ifdef GPP_HAVE_RUNNER
    gpp_runner_destroy(&self.profiler); /* join the workers */
    gpp_runner_destroy(&self.runner);
#endif
    if (gpp_control_dropped(self.ctl))
        gpp_warn("agent %s:%d: %llu invalid messages from the coordinator dropped", self.o.ctl.host,
                 self.o.ctl.slot, (unsigned long long)gpp_control_dropped(self.ctl));
    gpp_control_destroy(&self.ctl);
    zloop_destroy(&self.loop);
    return self.exit_code;
}
