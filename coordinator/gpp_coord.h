/* gpp_coord: the coordinator's event loop and job state machine.
 *
 * One zloop drives everything: the ROUTER socket the agents' DEALERs talk
 * to, a heartbeat timer, (optionally) a signalfd for SIGINT/SIGTERM/
 * SIGCHLD, and while planning the pipe of the planning thread. No handler
 * blocks: planning (seconds at a thousand devices) runs on that thread.
 *
 *   waiting ──all registered──► (profiling) ──► planning ──plan_fn──► assigning ──all Ready──►
 *   rendezvous ──barrier 0 released──► training ──last metrics──► done
 *
 * waiting:    Register → RegisterAck (rank = the slot's place in the cluster
 *             file) or Reject with a reason (unknown slot, slot taken, bad
 *             message). Not all registered within start_timeout_ms: the job
 *             stops with a message naming the missing host:slot.
 * profiling:  with profile_req, the rank-0 agent times the model's ops and
 *             its ProfileResult goes to profile_fn (the cost model).
 * planning:   plan_fn runs on a planning thread (a CZMQ actor) and returns
 *             one Assignment per rank (NULL: agent unused, it gets Shutdown)
 *             and the job's layout; the loop meanwhile answers heartbeats
 *             and notices dead agents and signals. Its result on the
 *             actor's pipe moves the job on. A stop while planning sets the
 *             cancel flag plan_fn polls; the thread is joined (at the latest
 *             in gpp_coord_destroy). No plan_fn: a control-only job, in which
 *             the agents run `barriers` barriers and are shut down.
 * assigning / rendezvous: each agent brings up its comm backend and answers
 *             Ready, then enters barrier 0; releasing it starts training.
 * training:   Metrics per agent per iteration, aggregated by gpp_progress;
 *             barriers as agents ask.
 * done:       Shutdown to everyone; local agents are waited for.
 *
 * Failures (an agent silent past timeout_ms, a local agent exiting early,
 * an agent's Error, SIGINT/SIGTERM) stop the job: Abort goes to every live
 * agent with the reason, which names the agent, and gpp_coord_run returns -1.
 * Invalid frames (undecodable, failed validation, wrong sender/sequence,
 * wrong state or ids) are dropped with a logged reason and counted; an
 * unregistered peer also gets a Reject with that reason.
 *
 * Monitors (gpp-top) ask on the same ROUTER (MonitorRequest, answered by
 * coordinator/gpp_monitor.h with the /metrics and /schedule text). With
 * CURVE every message is first checked against its key's role, the ZAP
 * user id on its frame (gpp_monitor_refusal): a monitor key may only
 * monitor, an agent key only act as an agent.
 *
 * Ownership: gpp_coord_new returns an object the caller owns. It borrows
 * the launcher and the assignments plan_fn returns. */
#ifndef GPP_COORD_H
#define GPP_COORD_H

#include <stdatomic.h>
#include <stdio.h>

#include "common/gpp_curve.h"
#include "common/gpp_err.h"
#include "coordinator/gpp_http.h"
#include "coordinator/gpp_launch.h"
#include "coordinator/gpp_progress.h"
#include "coordinator/gpp_registry.h"
#include "proto/gpp_msg.h"

typedef struct gpp_coord_s gpp_coord_t;

/* What plan_fn hands back; arrays stay owned by the plan_fn's caller and
 * must outlive the coordinator. */
typedef struct {
    /* set by the coordinator before plan_fn: where and with which token
     * the agents reach the job's rendezvous table (coordinator/gpp_rdv.h) */
    const char *rdv_endpoint;
    const char *rdv_token;
    Gpp__Assignment **assign;     /* [n_agents]; NULL: agent not used (sent only) */
    gpp_progress_layout_t layout; /* who runs what, from the plan: the coordinator's
                                     view of the job (progress, Ready checks) */
} gpp_coord_job_t;

/* Makes the job once every agent registered (and profiled). Runs on the
 * coordinator's planning thread, never on the event loop: it may take
 * seconds while the loop goes on answering heartbeats. It may read the
 * agents' registration fields in reg (rank, host, slot, pid, mem_bytes:
 * fixed once all registered) and nothing else of the coordinator. *cancel
 * turns non-zero when the job is stopped meanwhile: return -1 soon after. */
typedef int(gpp_coord_plan_fn)(void *arg, gpp_registry_t *reg, const atomic_int *cancel,
                               gpp_coord_job_t *job, gpp_err_t *err);

typedef struct {
    const char *endpoint; /* bind address: tcp://WHAT:PORT, WHAT `*`, an IPv4 address, an
                             interface or a host name (gpp_net_bind_endpoint); port "*"
                             picks one */
    int n_agents;
    const char *const *hosts;   /* [n_agents], cluster-file order = rank */
    const int *slots;           /* [n_agents] */
    int heartbeat_ms;           /* our heartbeat interval, > 0 */
    int timeout_ms;             /* agent silent this long: dead, > heartbeat_ms */
    int start_timeout_ms;       /* every agent registered within this, > 0 */
    gpp_coord_plan_fn *plan_fn; /* NULL: control-only job */
    void *plan_arg;
    /* Profiling (state profiling, before planning): when profile_req is set,
     * it goes to the rank-0 agent once all have registered, and its
     * ProfileResult is handed to profile_fn(plan_arg, ...) on the event loop
     * (keep it cheap: take the rows; plan in plan_fn). */
    const Gpp__ProfileRequest *profile_req;
    int (*profile_fn)(void *arg, const Gpp__ProfileResult *res, gpp_err_t *err);
    /* Called on the event loop when the job's complete iterations (every
     * agent reported them, after the checkpoint saves that come before
     * each report) rose to `done` (counted from iteration 0 of the job, so
     * a job resumed at layout.start_iteration N reports N + 1 first):
     * gpp_job_iteration_fn commits checkpoint
     * sets here. -1 stops the job with its message. NULL: none. */
    int (*iteration_fn)(void *arg, int done, gpp_err_t *err);
    /* Called on the event loop with each Metrics of rank (already valid
     * as a message) before the progress takes it: -1 drops it with the
     * message (gpp_job_metrics_fn: the op digests). NULL: none. */
    int (*metrics_fn)(void *arg, int rank, const Gpp__Metrics *m, gpp_err_t *err);
    int barriers;             /* control-only job: barriers to run, >= 0 */
    FILE *progress;           /* progress lines; NULL: none */
    const char *metrics_path; /* JSON lines; NULL: none */
    int sigfd;                /* gpp_sigfd, or -1 */
    gpp_launch_t *launch;     /* local launcher, or NULL */
    /* CURVE on the ROUTER: only the server's admitted agent keys get
       through the handshake (common/gpp_curve.h; borrowed, must outlive the
       coordinator). NULL: plaintext, anyone who reaches the port may talk. */
    const gpp_curve_server_t *curve;
    gpp_http_t *http; /* /metrics server to publish snapshots to (every
                         heartbeat tick, from the loop thread), or NULL */
    /* restarts of the job so far (gpp-coordinator --max-restarts) and of each
       rank's agent ([ranks], borrowed; NULL: none), for /metrics */
    int job_restarts;
    const int *agent_restarts;
    /* job.backend = "cuda": an agent registering without a usable GPU is
     * rejected and the job stops with exit code 2, naming agent, host and
     * the agent's reason (never a CPU run) */
    int require_gpu;
    /* clock offsets (gpp-coordinator --trace): > 0: every heartbeat asks
     * for an immediate answer, a round trip that feeds gpp_agent_t.clock,
     * and right after an agent registered this many round trips run back
     * to back (each answer sends the next). 0: no round trips, agents do
     * not answer heartbeats. */
    int clock_round_trips;
} gpp_coord_cfg_t;

/* Binds the ROUTER (ZMQ_MAXMSGSIZE GPP_MSG_MAX_BYTES: a longer frame drops
 * its peer before any of it is buffered; CURVE with cfg->curve). NULL with
 * a message when the address is unusable; errno is then the bind's error
 * (EADDRINUSE, EADDRNOTAVAIL for a name that does not resolve to this host,
 * ...), 0 when something else failed. */
gpp_coord_t *gpp_coord_new(const gpp_coord_cfg_t *cfg, gpp_err_t *err);
void gpp_coord_destroy(gpp_coord_t **self_p);

/* The port the ROUTER is bound to. */
int gpp_coord_port(const gpp_coord_t *self);
gpp_registry_t *gpp_coord_registry(gpp_coord_t *self);

/* Runs the loop to the end of the job: 0 when it finished, -1 when it was
 * stopped (gpp_coord_reason says why; 130 from gpp_coord_exit_code after
 * SIGINT). */
int gpp_coord_run(gpp_coord_t *self);
const char *gpp_coord_reason(const gpp_coord_t *self);
int gpp_coord_exit_code(const gpp_coord_t *self);
/* 1 when an agent stopped the job: silent past timeout_ms, exited early, or
 * its Error other than ERROR_CONFIG (a broken connection to a dead peer):
 * what a restart may cure (gpp-coordinator --max-restarts). */
int gpp_coord_agent_failed(const gpp_coord_t *self);
/* The rank named by the first ERROR_COMM before the stop (Error.failed_peer:
 * the peer whose connection broke), -1 when none named one. What the
 * coordinator blames when it saw no agent die (external agents). */
int gpp_coord_failed_peer(const gpp_coord_t *self);

/* Frames dropped as invalid. */
uint64_t gpp_coord_dropped(const gpp_coord_t *self);

/* Training metrics (NULL for a control-only job or before planning). */
const gpp_progress_t *gpp_coord_progress(const gpp_coord_t *self);

/* Barrier round trips: the time from releasing barrier i-1 to releasing
 * barrier i (every agent received the release and entered the next), for
 * i >= 1, in ms. Returns how many; *ms_out borrowed. */
int gpp_coord_barrier_times(const gpp_coord_t *self, const double **ms_out);

#endif
