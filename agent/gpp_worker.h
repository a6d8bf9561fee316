/* gpp_worker: the agent's worker thread and its bridge to the agent's
 * zloop. The blocking work of an agent — training a stage replica
 * (agent/pipeline/gpp_pipeline.h) or timing the model's ops for the
 * coordinator (agent/exec/gpp_profile.h) — runs on a thread of its own;
 * the agent's main thread keeps its zloop (heartbeats, control). The two
 * talk over an inproc PAIR pipe read by the zloop:
 *   worker -> main: envelopes for the coordinator (Ready, BarrierEnter,
 *                   Metrics, ProfileResult, Error), forwarded through
 *                   gpp_control; then "done" with the outcome;
 *   main -> worker: barrier releases and "stop".
 *
 * gpp_worker_start() turns an Assignment into the pipeline's configuration
 * (each SEND/RECV's peer replica resolved to its comm rank through the
 * assignment's edges) and starts the thread. A trained worker keeps the
 * communicator up until it is stopped, so that no peer loses a connection
 * it still uses.
 *
 * Ownership: gpp_worker_start takes the message; the caller owns the
 * worker; loop and control are borrowed and must outlive it. */
#ifndef GPP_WORKER_H
#define GPP_WORKER_H

#include <czmq.h>

#include "agent/control/gpp_control.h"
#include "common/gpp_err.h"
#include "proto/gpp_msg.h"

typedef struct gpp_worker_s gpp_worker_t;

typedef struct {
    int threads;         /* CPU backend threads, >= 1 */
    int gpu;             /* the GPU this agent registered with; -1: none (a CPU agent) */
    const char *host;    /* data-plane address to bind, e.g. "127.0.0.1" */
    int comm_timeout_ms; /* rendezvous and per-wait limit; 0: the comm's default */
    /* Main thread, once the worker has ended (ok = 1 when it trained and
     * was stopped, or profiled; 0 on failure or abort). Return -1 to end
     * the zloop. */
    int (*on_done)(void *arg, int ok);
    void *arg;
} gpp_worker_cfg_t;

/* Takes ownership of *msg_p (an Assignment envelope: the worker trains the
 * stage replica; or a ProfileRequest: it times every op of the model at
 * the sizes asked, reports a ProfileResult and ends by itself) and starts
 * the worker. NULL with a message when the assignment does not resolve or
 * the pipe or thread cannot be made. */
gpp_worker_t *gpp_worker_start(gpp_msg_t **msg_p, const gpp_worker_cfg_t *cfg, zloop_t *loop,
                               gpp_control_t *ctl, gpp_err_t *err);

/* Passes a BarrierRelease on to the worker. */
void gpp_worker_release(gpp_worker_t *self, int barrier_id);
/* Asks the worker to end: after training (Shutdown), or at once when abort
 * is set (the pipeline is aborted so that blocked waits return). */
void gpp_worker_stop(gpp_worker_t *self, int abort);
/* 1 once the worker has ended. */
int gpp_worker_done(const gpp_worker_t *self);
/* Aborts a running worker, joins it, frees. Accepts NULL. */
void gpp_worker_destroy(gpp_worker_t **self_p);
/* A worker that did not stop (stuck in a call nothing interrupts): its
 * thread is detached and left running with the object, which is never
 * freed; the process ends without it (gpp_agent_abandoned). A worker that
 * has ended is destroyed. NULLs *self_p; accepts NULL. */
void gpp_worker_abandon(gpp_worker_t **self_p);

#endif
