/* gpp_coord_imp: the coordinator loop's internals, shared by gpp_coord.c
 * (sending, stopping, handlers, timers) and gpp_coord_plan.c (profiling,
 * planning thread, assignments). Not an interface: gpp_coord.h is. */
#ifndef GPP_COORD_IMP_H
#define GPP_COORD_IMP_H

#include <czmq.h>
#include <stdatomic.h>

#include "coordinator/gpp_coord.h"
#include "coordinator/gpp_monitor.h"
#include "coordinator/gpp_rdv.h"

typedef enum {
    S_WAITING = 0,
    S_PROFILING,
    S_PLANNING,
    S_ASSIGNING,
    S_RENDEZVOUS,
    S_TRAINING,
    S_DONE,
    S_N_STATES
} s_state_t;

struct gpp_coord_s {
    gpp_coord_cfg_t cfg;
    zloop_t *loop;
    zsock_t *router;
    int port;
    zmq_pollitem_t sig_item;
    int timer_id;
    s_state_t state;
    double start_ms;
    gpp_registry_t *reg;
    gpp_coord_job_t job; /* written by the planning thread until its result is in */
    zactor_t *planner;   /* the planning thread while it runs */
    atomic_int cancel;   /* set when the job stops: plan_fn gives up */
    double plan_start_ms;
    int *in_job; /* [n_agents]: 1 when the agent takes part (gets barriers) */
    int n_in_job;
    gpp_progress_t *progress;
    int barrier_id;            /* the barrier now open */
    int barrier_count;         /* agents in it */
    double barrier_release_ms; /* when the previous one was released */
    double *barrier_ms;
    int n_barrier_ms, cap_barrier_ms;
    int stopped; /* -1: aborted; 0: running/finished */
    int exit_code;
    int agent_failed; /* the stop was an agent's: silent, exited, or its (not config) Error */
    int failed_peer;  /* rank named by the first ERROR_COMM before the stop, -1 none */
    /* ERROR_COMM reports wait until blame_ms for the agent that died or went
       silent, whom the stop then names (0: none pending); reporters lists
       the agents that only reported a broken connection, first_report the
       first one's words (the reason if nobody is found) */
    double blame_ms;
    char reporters[512];
    char first_report[GPP_ERR_LEN];
    char reason[GPP_ERR_LEN];
    double exit_deadline_ms;
    uint64_t dropped;
    uint64_t refused;         /* of those, from peers that are no agent of the job (s_refuse) */
    s_state_t progress_state; /* the phase the progress lines are about */
    double progress_phase_ms; /* when it began */
    double progress_line_ms;  /* the last progress line (or the phase's start) */
    int progress_iters;       /* training: iterations done at progress_iter_ms */
    double progress_iter_ms;  /* when that count was first seen */
    double start_time_s;      /* Unix time of gpp_coord_new, for /metrics */
    gpp_rdv_t *rdv;           /* the job's rendezvous table */
    char rdv_endpoint[512];
    char bind[512]; /* cfg.endpoint with a host name or interface resolved (gpp_net) */
    int64_t rx_us;  /* gpp_now_us when the frame in hand arrived (t3 of a clock round trip) */
    gpp_monitor_t *monitor; /* answers gpp-top's MonitorRequests */
    int stalled;            /* the loop_stall fault (gpp_fault.h) has run */
};

/* the phases' names, for logs and /metrics ([S_N_STATES]) */
extern const char *const gpp_coord_state_name[S_N_STATES];

/* gpp_coord.c */
/* The control ROUTER's reader (a zloop_reader_fn): one message handled. */
int gpp_coord_on_router(zloop_t *loop, zsock_t *sock, void *arg);
/* Sends m to a registered agent; -1 (errno set) when it cannot go out. */
int gpp_coord_send(gpp_coord_t *self, gpp_agent_t *a, gpp_msg_t *m);
/* Stops the job (once): logs why, sends Abort to the agents, exit code 1. */
void gpp_coord_abort(gpp_coord_t *self, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* gpp_coord_progress.c: a progress line when a phase (or, training, an
 * iteration) has run long with nothing else to print. */
void gpp_coord_progress_tick(gpp_coord_t *self, double now);
/* Drops a frame from who (counted, logged sparsely) without stopping the job. */
void gpp_coord_drop(gpp_coord_t *self, const char *who, const char *why);
/* The job is done: Shutdown to every live agent, then exit. */
void gpp_coord_finish(gpp_coord_t *self);
/* Shutdown to one agent (it has no part in the job, or the job is done). */
void gpp_coord_shutdown_agent(gpp_coord_t *self, gpp_agent_t *a);

/* gpp_coord_plan.c */
/* Every agent is in: profile on rank 0 when the job asks, else plan. */
void gpp_coord_profile_or_plan(gpp_coord_t *self);
/* Rank 0's ProfileResult: handed to profile_fn, then planning starts. */
void gpp_coord_on_profile_result(gpp_coord_t *self, gpp_agent_t *a, const Gpp__ProfileResult *res,
                                 const char *who);
/* Joins the planning thread, cancelling it when it still runs. */
void gpp_coord_planner_stop(gpp_coord_t *self);

#endif
