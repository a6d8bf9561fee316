/* gpp_coord: the coordinator's event loop and job state machine, one zloop
 * over the ROUTER the agents' DEALERs and gpp-top talk to, a heartbeat
 * timer, signals and the planning thread's pipe. No handler blocks:
 * planning (seconds at a thousand devices) runs on its own thread.
 *
 *   waiting -> (profiling) -> planning -> assigning -> rendezvous -> training -> done
 *
 * A failure (an agent silent past timeout_ms, a local agent exiting early,
 * an agent's Error, SIGINT/SIGTERM) stops the job: Abort to every live
 * agent, gpp_coord_run returns -1. Invalid frames are dropped, logged and
 * counted. With CURVE each message is checked against its key's role
 * (agent or monitor). States and messages: docs/coordinator.md.
 *
 * Ownership: gpp_coord_new returns an object the caller owns. It borrows
 * the launcher, the CURVE server, the /metrics server and the assignments
 * plan_fn returns. */
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

/* Makes the job once every agent registered (and profiled), on the
 * planning thread: it may read the agents' registration fields in reg
 * (fixed by then) and nothing else of the coordinator. *cancel turns
 * non-zero when the job stops meanwhile: return -1 soon after. -2: the
 * cluster file or command line is at fault (the job stops with exit 2). */
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
    /* set: sent to rank 0 once all registered; its ProfileResult goes to
     * profile_fn(plan_arg, ...) on the loop (cheap: take the rows, plan in
     * plan_fn) */
    const Gpp__ProfileRequest *profile_req;
    int (*profile_fn)(void *arg, const Gpp__ProfileResult *res, gpp_err_t *err);
    /* On the loop when every agent reported (after its checkpoint save)
     * `done` iterations of the job (a job resumed at start_iteration N
     * reports N + 1 first): checkpoint sets are committed here. -1 stops
     * the job with its message. NULL: none. */
    int (*iteration_fn)(void *arg, int done, gpp_err_t *err);
    /* On the loop with each valid Metrics of rank before the progress
     * takes it: -1 drops it with the message. NULL: none. */
    int (*metrics_fn)(void *arg, int rank, const Gpp__Metrics *m, gpp_err_t *err);
    int barriers;             /* control-only job: barriers to run, >= 0 */
    FILE *progress;           /* progress lines; NULL: none */
    const char *metrics_path; /* JSON lines; NULL: none */
    int sigfd;                /* gpp_sigfd, or -1 */
    gpp_launch_t *launch;     /* local launcher, or NULL */
    /* CURVE on the ROUTER: only admitted keys get through the handshake
       (borrowed). NULL: plaintext, anyone who reaches the port may talk. */
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
    /* --trace's clock offsets: > 0: every heartbeat is a round trip feeding
     * gpp_agent_t.clock, and this many run back to back right after an
     * agent registered. 0: none. */
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
/* After gpp_coord_run: the control socket stays open with the job's final
 * state for ms more, answering monitors (gpp-top) as during the run;
 * registrations are refused (the job is done) and agents' late messages
 * handled as at its end. A signal on sigfd (-1: none) other than SIGCHLD
 * ends the wait: returns 1 then, else 0. gpp_coord_linger.c. */
int gpp_coord_linger(gpp_coord_t *self, int ms, int sigfd);
/* Monitor requests answered with a snapshot so far: someone watches. */
uint64_t gpp_coord_monitored(const gpp_coord_t *self);
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
