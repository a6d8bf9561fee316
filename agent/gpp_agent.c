/* gpp_agent: the agent's event loop and state machine. See gpp_agent.h. */
#include "agent/gpp_agent.h"

#include <assert.h>
#include <signal.h>
#include <string.h>

#include <czmq.h>

#include "agent/comm/gpp_comm.h"
#include "agent/gpp_device.h"
#include "agent/gpp_worker.h"
#include "common/gpp_notify.h"
#include "common/gpp_sigfd.h"

#define S_HOST_MAX 256

struct gpp_agent_s {
    char endpoint[S_HOST_MAX];
    char host[S_HOST_MAX];
    char data_host[S_HOST_MAX];
    int slot;
    int backend; /* Gpp__Backend registered with */
    int gpu;     /* CUDA: the GPU; -1 CPU */
    int timeout_ms;
    int control_barriers;
    int threads;
    int comm_timeout_ms;
    zloop_t *loop;
    gpp_control_t *ctl;
    zmq_pollitem_t sig_item;
    int next_barrier; /* control-only job */
    int exit_code;
    int finished;           /* the loop should end */
    int stop_timer;         /* the deadline of a stop that waits for a worker; -1 none */
    int abandoned;          /* the loop ended without a worker that did not stop */
    gpp_worker_t *trainer;  /* the training worker, once assigned */
    gpp_worker_t *profiler; /* the profiling worker, while asked to profile */
};

/* The stop's deadline passed with a worker still running: a thread stuck
 * in a call nothing can interrupt (a data-plane connect, a kernel, a
 * disk). The agent ends without it (gpp_agent_abandoned). */
static int s_on_deadline(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    gpp_agent_t *self = arg;
    self->stop_timer = -1;
    gpp_error("agent %s:%d: its worker did not stop within %.1f s (--comm-timeout-ms) of the "
              "stop; exiting without it",
              self->host, self->slot, self->comm_timeout_ms / 1000.0);
    self->abandoned = 1;
    return -1;
}

/* Ends the agent with `code` (the first reason wins). A running worker is
 * stopped and waited for at most the comm timeout (s_on_deadline). */
static int s_end(gpp_agent_t *self, int code)
{
    if (!self->finished) {
        self->finished = 1;
        self->exit_code = code;
        gpp_notify_stopping();
    }
    gpp_worker_t *w = self->profiler && !gpp_worker_done(self->profiler) ? self->profiler
                      : self->trainer && !gpp_worker_done(self->trainer) ? self->trainer
                                                                         : NULL;
    if (!w)
        return -1;
    /* still running: stop it (at once unless the job ended normally); the
       loop ends when it reports done, or at the deadline */
    gpp_worker_stop(w, w == self->profiler || code != 0);
    if (self->stop_timer < 0)
        self->stop_timer =
            zloop_timer(self->loop, (size_t)self->comm_timeout_ms, 1, s_on_deadline, self);
    return 0;
}

/* The training worker ended: after Shutdown/Abort (finished is set), or by
 * itself on a failure, which it already reported to the coordinator. */
static int s_on_trainer_done(void *arg, int ok)
{
    gpp_agent_t *self = arg;
    if (!self->finished) {
        self->finished = 1;
        self->exit_code = 1;
    } else if (!ok && self->exit_code == 0) {
        self->exit_code = 1;
    }
    return -1;
}

/* The profiling worker ended: carry on (the assignment comes next) unless
 * the agent is ending. A failure was reported to the coordinator. */
static int s_on_profiler_done(void *arg, int ok)
{
    gpp_agent_t *self = arg;
    if (self->finished)
        return -1;
    if (!ok) {
        self->finished = 1;
        self->exit_code = 1;
        return -1;
    }
    return 0;
}

static int s_control_barrier(gpp_agent_t *self)
{
    gpp_err_t err = {{0}};
    if (gpp_control_barrier_enter(self->ctl, self->next_barrier, &err) < 0) {
        gpp_error("agent %s:%d: %s", self->host, self->slot, err.msg);
        return s_end(self, 1);
    }
    self->next_barrier++;
    return 0;
}

/* Starts a worker on an Assignment or a ProfileRequest; on failure tells
 * the coordinator (with `code`) and ends the agent. */
static int s_start_worker(gpp_agent_t *self, gpp_msg_t **msg_p, gpp_worker_t **worker_p,
                          int (*on_done)(void *, int), int code)
{
    gpp_err_t err = {{0}};
    gpp_worker_cfg_t wc = {.threads = self->threads,
                           .gpu = self->backend == GPP__BACKEND__BACKEND_CUDA ? self->gpu : -1,
                           .host = self->data_host,
                           .comm_timeout_ms = self->comm_timeout_ms,
                           .on_done = on_done,
                           .arg = self};
    *worker_p = gpp_worker_start(msg_p, &wc, self->loop, self->ctl, &err);
    if (*worker_p)
        return 0;
    gpp_error("agent %s:%d: %s", self->host, self->slot, err.msg);
    gpp_err_t e2 = {{0}};
    gpp_control_error(self->ctl, code, err.msg, &e2);
    return s_end(self, 1);
}

static int s_on_message(gpp_control_t *ctl, gpp_msg_t **msg_p, void *arg)
{
    (void)ctl;
    gpp_agent_t *self = arg;
    gpp_msg_t *m = *msg_p;
    const char *host = self->host;
    int slot = self->slot;
    switch (m->body_case) {
    case GPP__ENVELOPE__BODY_REGISTER_ACK:
        gpp_log_set_rank(m->register_ack->rank); /* every log line names it from now on */
        gpp_info("agent %s:%d: registered as rank %d of %d", host, slot, m->register_ack->rank,
                 m->register_ack->world_size);
        gpp_notify_ready("registered with %s as rank %d of %d", self->endpoint,
                         m->register_ack->rank, m->register_ack->world_size);
        if (self->control_barriers > 0)
            return s_control_barrier(self);
        return 0;
    case GPP__ENVELOPE__BODY_REJECT:
        gpp_error("agent %s:%d: rejected by the coordinator: %s", host, slot, m->reject->reason);
        return s_end(self, 1);
    case GPP__ENVELOPE__BODY_BARRIER_RELEASE:
        if (self->trainer) {
            gpp_worker_release(self->trainer, m->barrier_release->barrier_id);
            return 0;
        }
        if (self->next_barrier < self->control_barriers)
            return s_control_barrier(self);
        return 0;
    case GPP__ENVELOPE__BODY_ASSIGNMENT:
        if (self->trainer) {
            gpp_warn("agent %s:%d: a second assignment; ignored", host, slot);
            return 0;
        }
        gpp_worker_destroy(&self->profiler); /* done: its report came before this */
        gpp_info("agent %s:%d: assigned stage %d replica %d of %d (%zu ops, %zu actions)", host,
                 slot, m->assignment->stage, m->assignment->replica, m->assignment->replicas,
                 m->assignment->n_ops, m->assignment->n_actions);
        gpp_notify_status("training stage %d replica %d of %d", m->assignment->stage,
                          m->assignment->replica, m->assignment->replicas);
        return s_start_worker(self, msg_p, &self->trainer, s_on_trainer_done,
                              GPP__ERROR_CODE__ERROR_CONFIG);
    case GPP__ENVELOPE__BODY_PROFILE_REQUEST:
        if (self->profiler || self->trainer) {
            gpp_warn("agent %s:%d: a second profile request; ignored", host, slot);
            return 0;
        }
        gpp_info("agent %s:%d: profiling %s", host, slot, m->profile_request->model);
        gpp_notify_status("profiling %s", m->profile_request->model);
        return s_start_worker(self, msg_p, &self->profiler, s_on_profiler_done,
                              GPP__ERROR_CODE__ERROR_INTERNAL);
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
    gpp_agent_t *self = arg;
    if (self->finished && silent_ms < 0) /* it went after its Shutdown or Abort: the worker */
        return 0;                        /* finishes as told, within the stop's deadline */
    if (silent_ms < 0)
        gpp_error("agent %s:%d: the connection to the coordinator %s dropped; its registration "
                  "ended with it (whatever binds that endpoint next is another job): giving up",
                  self->host, self->slot, self->endpoint);
    else
        gpp_error("agent %s:%d: coordinator %s silent for %.1f s (timeout %.1f s); giving up",
                  self->host, self->slot, self->endpoint, silent_ms / 1000.0,
                  self->timeout_ms / 1000.0);
    return s_end(self, 1);
}

/* systemd's watchdog (WatchdogSec=): the timer runs on the event loop, so
 * a stuck loop stops the pings and systemd restarts the agent. */
static int s_on_watchdog(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    (void)arg;
    gpp_notify_tick(NULL);
    return 0;
}

static int s_on_signal(zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    (void)loop;
    gpp_agent_t *self = arg;
    int sig;
    while ((sig = gpp_sigfd_read(item->fd)) > 0) {
        if (sig == SIGCHLD)
            continue;
        if (self->finished) { /* already stopping: do not wait for a worker any longer */
            gpp_warn("agent %s:%d: %s while stopping; exiting now", self->host, self->slot,
                     strsignal(sig));
            if (self->exit_code == 0)
                self->exit_code = 128 + sig;
            self->abandoned = (self->profiler && !gpp_worker_done(self->profiler)) ||
                              (self->trainer && !gpp_worker_done(self->trainer));
            return -1;
        }
        gpp_warn("agent %s:%d: %s; stopping", self->host, self->slot, strsignal(sig));
        if (s_end(self, 128 + sig) < 0)
            return -1;
    }
    return 0;
}

gpp_agent_t *gpp_agent_new(const gpp_agent_cfg_t *cfg, gpp_err_t *err)
{
    assert(cfg);
    if (cfg->threads < 1 || cfg->control_barriers < 0 || cfg->comm_timeout_ms < 0) {
        gpp_err_set(err,
                    "agent: %d threads, %d control barriers, comm timeout %d ms: need "
                    "threads >= 1 and the others >= 0",
                    cfg->threads, cfg->control_barriers, cfg->comm_timeout_ms);
        return NULL;
    }
    gpp_agent_t *self = gpp_xcalloc(1, sizeof *self);
    const char *host = cfg->ctl.host ? cfg->ctl.host : "";
    snprintf(self->endpoint, sizeof self->endpoint, "%s",
             cfg->ctl.endpoint ? cfg->ctl.endpoint : "");
    snprintf(self->host, sizeof self->host, "%s", host);
    snprintf(self->data_host, sizeof self->data_host, "%s", cfg->data_host ? cfg->data_host : host);
    self->slot = cfg->ctl.slot;
    self->timeout_ms = cfg->ctl.timeout_ms;
    self->control_barriers = cfg->control_barriers;
    self->threads = cfg->threads;
    self->comm_timeout_ms =
        cfg->comm_timeout_ms > 0 ? cfg->comm_timeout_ms : GPP_COMM_TIMEOUT_DEFAULT_MS;
    self->stop_timer = -1;
    self->loop = zloop_new();
    zloop_set_nonstop(self->loop, true);
    if (cfg->sigfd >= 0) {
        self->sig_item = (zmq_pollitem_t){NULL, cfg->sigfd, ZMQ_POLLIN, 0};
        if (zloop_poller(self->loop, &self->sig_item, s_on_signal, self) < 0) {
            gpp_err_set(err, "agent: zloop_poller failed on the signal fd");
            goto fail;
        }
    }
    int wd_ms = gpp_notify_watchdog_ms();
    /* at half the ping interval: a ping is never more than one period late */
    if (wd_ms > 0 &&
        zloop_timer(self->loop, (size_t)(wd_ms > 1 ? wd_ms / 2 : 1), 0, s_on_watchdog, self) < 0) {
        gpp_err_set(err, "agent: zloop_timer failed for the systemd watchdog");
        goto fail;
    }
    /* the device this agent trains on: registered as it is, never guessed */
    gpp_control_device_t dev;
    gpp_control_cfg_t cc = cfg->ctl;
    gpp_device_probe(cc.backend == GPP__BACKEND__BACKEND_CUDA,
                     cfg->gpu >= 0 ? cfg->gpu : cfg->ctl.slot, &dev);
    if (dev.error[0])
        gpp_warn("agent %s:%d: %s; registering as a CPU agent (a cuda job will refuse it)", host,
                 self->slot, dev.error);
    else if (dev.gpu >= 0)
        gpp_info("agent %s:%d: GPU %d: %s, %.1f GiB (%.1f GiB free), %d SMs", host, self->slot,
                 dev.gpu, dev.name, (double)dev.mem_total_bytes / 1073741824.0,
                 (double)dev.mem_free_bytes / 1073741824.0, dev.sm_count);
    cc.backend = dev.gpu >= 0 ? GPP__BACKEND__BACKEND_CUDA : GPP__BACKEND__BACKEND_CPU;
    cc.device = &dev;
    if (cc.mem_bytes <= 0)
        cc.mem_bytes = dev.mem_total_bytes;
    self->backend = cc.backend;
    self->gpu = dev.gpu;
    gpp_control_handlers_t h = {s_on_message, s_on_lost};
    self->ctl = gpp_control_new(&cc, self->loop, &h, self, err);
    if (!self->ctl)
        goto fail;
    return self;
fail:
    gpp_agent_destroy(&self);
    return NULL;
}

int gpp_agent_run(gpp_agent_t *self)
{
    assert(self);
    if (!self->finished)
        gpp_sigfd_run_loop(self->loop);
    if (self->abandoned) { /* a worker that did not stop is left to the process's end */
        gpp_worker_abandon(&self->profiler);
        gpp_worker_abandon(&self->trainer);
    }
    gpp_worker_destroy(&self->profiler); /* join the workers */
    gpp_worker_destroy(&self->trainer);
    if (gpp_control_dropped(self->ctl))
        gpp_warn("agent %s:%d: %llu invalid messages from the coordinator dropped", self->host,
                 self->slot, (unsigned long long)gpp_control_dropped(self->ctl));
    return self->exit_code;
}

int gpp_agent_abandoned(const gpp_agent_t *self)
{
    return self->abandoned;
}

uint64_t gpp_agent_dropped(const gpp_agent_t *self)
{
    return gpp_control_dropped(self->ctl);
}

void gpp_agent_destroy(gpp_agent_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_agent_t *self = *self_p;
    *self_p = NULL;
    gpp_worker_destroy(&self->profiler);
    gpp_worker_destroy(&self->trainer);
    gpp_control_destroy(&self->ctl);
    zloop_destroy(&self->loop);
    free(self);
}
