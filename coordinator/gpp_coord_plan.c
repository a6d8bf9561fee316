/* gpp_coord_plan: the coordinator's profiling and planning phase (see
 * gpp_coord_imp.h): a ProfileRequest to rank 0 when the job profiles, the
 * planning thread running plan_fn off the event loop, and the assignments
 * sent once its plan is in. */
#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "common/gpp_sigfd.h"
#include "common/gpp_time.h"
#include "coordinator/gpp_coord_imp.h"

/* The plan is in: check it, set up progress, send the assignments. */
static void s_assign(gpp_coord_t *self)
{
    int n = gpp_registry_size(self->reg);
    gpp_progress_layout_t *l = &self->job.layout;
    int bad = l->n_agents != n || l->n_stages < 1 || l->iterations < 1 || l->batch < 1;
    for (int r = 0; r < n && !bad; r++) {
        int s = l->stage_of_rank[r];
        if (s >= l->n_stages || (s >= 0) != (self->job.assign[r] != NULL))
            bad = 1;
        else if (s >= 0) {
            self->in_job[r] = 1;
            self->n_in_job++;
        }
    }
    if (bad || !self->n_in_job) {
        gpp_coord_abort(self, "planning produced %s",
                        bad ? "an inconsistent job (stages, ranks, iterations or batch)"
                            : "no assignment for any agent");
        return;
    }
    gpp_err_t err = {{0}};
    self->progress = gpp_progress_new(l, self->cfg.progress, self->cfg.metrics_path, &err);
    if (!self->progress) {
        gpp_coord_abort(self, "%s", err.msg);
        return;
    }
    self->state = S_ASSIGNING;
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(self->reg, r);
        if (!self->in_job[r]) {
            gpp_info("coordinator: agent %s:%d has no stage in the plan; shutting it down", a->host,
                     a->slot);
            gpp_coord_shutdown_agent(self, a);
            continue;
        }
        gpp_msg_t m;
        gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_ASSIGNMENT,
                     self->job.assign[r]);
        if (gpp_coord_send(self, a, &m) < 0) {
            /* its connection is gone (ROUTER_MANDATORY: EHOSTUNREACH): it died
               between registering and now, a death like any other */
            int e = errno;
            if (e == EHOSTUNREACH) {
                a->state = GPP_AGENT_DEAD;
                self->agent_failed = !self->stopped;
            }
            gpp_coord_abort(self, "cannot send the assignment of %s:%d (%s)", a->host, a->slot,
                            zmq_strerror(e));
            return;
        }
    }
    gpp_info("coordinator: assignments sent to %d agents", self->n_in_job);
}

/* The planning thread: runs plan_fn, sends "rc, message" on its pipe, then
 * waits for $TERM (zactor_destroy). */
static void s_planner_actor(zsock_t *pipe, void *arg)
{
    gpp_coord_t *self = arg;
    zsock_signal(pipe, 0);
    gpp_err_t err = {{0}};
    int rc = self->cfg.plan_fn(self->cfg.plan_arg, self->reg, &self->cancel, &self->job, &err);
    zsock_send(pipe, "is", rc, err.msg);
    for (;;) {
        char *cmd = zstr_recv(pipe);
        int term = !cmd || strcmp(cmd, "$TERM") == 0;
        zstr_free(&cmd);
        if (term)
            break;
    }
}

/* Joins the planning thread, cancelling it when it still runs. */
void gpp_coord_planner_stop(gpp_coord_t *self)
{
    if (!self->planner)
        return;
    atomic_store(&self->cancel, 1);
    if (self->loop)
        zloop_reader_end(self->loop, zactor_sock(self->planner));
    zactor_destroy(&self->planner);
}

static int s_on_planned(zloop_t *loop, zsock_t *pipe, void *arg)
{
    (void)loop;
    gpp_coord_t *self = arg;
    int rc = -1;
    char *msg = NULL;
    if (zsock_recv(pipe, "is", &rc, &msg) < 0)
        rc = -1;
    gpp_coord_planner_stop(self);    /* it is done: joins at once */
    if (self->state == S_PLANNING) { /* not stopped meanwhile */
        if (rc < 0) {
            if (rc == -2 && !self->exit_code) /* the cluster file's or command line's */
                self->exit_code = 2;
            gpp_coord_abort(self, "planning failed: %s",
                            msg ? msg : "no result from the planning thread");
        } else {
            gpp_info("coordinator: planned in %.1f ms", gpp_now_ms() - self->plan_start_ms);
            s_assign(self);
        }
    }
    zstr_free(&msg);
    return 0;
}

/* Every agent is in (and profiled): planning starts on its own thread. */
static void s_plan(gpp_coord_t *self)
{
    int n = gpp_registry_size(self->reg);
    if (!self->cfg.plan_fn) {
        /* control-only job: every agent takes part in the barriers (set up
         * in gpp_coord_new, so that early entries count) */
        self->state = S_TRAINING;
        gpp_info("coordinator: control-only job: %d barriers across %d agents", self->cfg.barriers,
                 n);
        if (self->cfg.barriers == 0)
            gpp_coord_finish(self);
        return;
    }
    self->state = S_PLANNING;
    self->plan_start_ms = gpp_now_ms();
    /* the job's rendezvous table: its endpoint and token go into the
     * assignments that plan_fn makes */
    gpp_err_t err = {{0}};
    if (gpp_rdv_open(self->rdv, n, &err) < 0) {
        gpp_coord_abort(self, "%s", err.msg);
        return;
    }
    gpp_rdv_endpoint(self->bind, self->port, self->cfg.launch != NULL, self->rdv_endpoint,
                     sizeof self->rdv_endpoint);
    self->job.rdv_endpoint = self->rdv_endpoint;
    self->job.rdv_token = gpp_rdv_token(self->rdv);
    if (self->cfg.sigfd >= 0)
        gpp_sigfd_mask(SIG_BLOCK); /* signals stay with the loop thread */
    self->planner = zactor_new(s_planner_actor, self);
    if (self->cfg.sigfd >= 0)
        gpp_sigfd_mask(SIG_UNBLOCK);
    if (!self->planner ||
        zloop_reader(self->loop, zactor_sock(self->planner), s_on_planned, self) < 0)
        gpp_coord_abort(self, "cannot start the planning thread");
}

/* All agents are in: profile first when asked to, else plan. */
void gpp_coord_profile_or_plan(gpp_coord_t *self)
{
    if (!self->cfg.profile_req || !self->cfg.plan_fn) {
        s_plan(self);
        return;
    }
    self->state = S_PROFILING;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_PROFILE_REQUEST,
                 (Gpp__ProfileRequest *)self->cfg.profile_req);
    gpp_agent_t *a = gpp_registry_agent(self->reg, 0);
    if (gpp_coord_send(self, a, &m) < 0) {
        gpp_coord_abort(self, "cannot send the profile request to %s:%d", a->host, a->slot);
        return;
    }
    if (self->cfg.profile_req->figures_only)
        gpp_info("coordinator: asking %s:%d for its backend's memory figures of the model's ops",
                 a->host, a->slot);
    else
        gpp_info("coordinator: profiling the model's ops on %s:%d", a->host, a->slot);
}

void gpp_coord_on_profile_result(gpp_coord_t *self, gpp_agent_t *a, const Gpp__ProfileResult *res,
                                 const char *who)
{
    if (self->state != S_PROFILING || a->rank != 0) {
        char why[128];
        snprintf(why, sizeof why, "profile_result in state %s from rank %d",
                 gpp_coord_state_name[self->state], a->rank);
        gpp_coord_drop(self, who, why);
        return;
    }
    gpp_err_t err = {{0}};
    if (self->cfg.profile_fn(self->cfg.plan_arg, res, &err) < 0) {
        gpp_coord_abort(self, "the profile from %s: %s", who, err.msg);
        return;
    }
    if (self->cfg.profile_req->figures_only)
        gpp_info("coordinator: memory figures of %zu ops from %s", res->n_ops, who);
    else
        gpp_info("coordinator: profile of %zu (op, micro-batch) pairs from %s", res->n_ops, who);
    s_plan(self);
}
