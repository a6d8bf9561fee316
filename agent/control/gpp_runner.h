/* gpp_runner: an agent's training worker — one stage replica running its
 * lowered action list (planner/gpp_sched.h) with the executor
 * (agent/exec/gpp_exec.h) and the communicator (agent/comm/gpp_comm.h).
 *
 * gpp_runner_start() takes the validated Assignment and starts a worker
 * thread; the agent's main thread keeps its zloop (heartbeats, control).
 * The two talk over an inproc PAIR pipe read by the zloop:
 *   worker -> main: envelopes for the coordinator (Ready, BarrierEnter,
 *                   Metrics, Error), forwarded through gpp_control; then
 *                   "done" with the outcome;
 *   main -> worker: barrier releases and "stop".
 *
 * The worker: builds the model, backend, data source and executor; joins
 * the communicator (rendezvous through the coordinator's store) and, with
 * replicas > 1, the data-parallel group; answers Ready and enters barrier
 * 0; then per iteration posts every receive of the iteration at its start
 * (each into its own buffer), and walks the list: a RECV waits for its
 * message just before the pass that uses it, FWD/BWD run the executor,
 * SEND copies the slice [lo, hi) of the output or input gradient and sends
 * it asynchronously, ALLREDUCE sums dense gradients (and densified sparse
 * ones) over the stage's replicas, STEP applies the optimizer. Received
 * pieces are placed at their sample offsets, so data-parallel degrees may
 * differ across an edge; gradients from several consumer stages add up in
 * the executor. Every send is complete before the iteration ends. After
 * each iteration it reports Metrics (per-action times, time spent waiting
 * for receives as the bubble, peak RSS, the loss share on sink stages) and
 * at checkpoint_interval and the end replica 0 saves
 * <checkpoint_dir>/stage<S>.ckpt. Then it waits for "stop".
 *
 * Message tags: (lo * n_ops + tensor) * 2 + (0 activation | 1 gradient) —
 * unique per transfer between two ranks within an iteration.
 *
 * Ownership: gpp_runner_start takes the assignment message; the caller owns
 * the runner; loop and control are borrowed and must outlive it. */
#ifndef GPP_RUNNER_H
#define GPP_RUNNER_H

#include <czmq.h>

#include "agent/control/gpp_control.h"
#include "common/gpp_err.h"
#include "proto/gpp_msg.h"

typedef struct gpp_runner_s gpp_runner_t;

typedef struct {
    int threads;         /* CPU backend threads, >= 1 */
    const char *host;    /* data-plane address to bind, e.g. "127.0.0.1" */
    int comm_timeout_ms; /* rendezvous and per-wait limit; 0: the comm's default */
    /* Main thread, once the worker has ended (ok = 1 when it trained and
     * was stopped, 0 on failure or abort). Return -1 to end the zloop. */
    int (*on_done)(void *arg, int ok);
    void *arg;
} gpp_runner_cfg_t;

/* Takes ownership of *assignment_p (an Assignment envelope, or a
 * ProfileRequest: then the worker times every op of the model at the sizes
 * asked with gpp_profile, reports a ProfileResult and ends by itself) and
 * starts the worker. NULL with a message when the pipe or thread cannot be
 * made. */
gpp_runner_t *gpp_runner_start(gpp_msg_t **assignment_p, const gpp_runner_cfg_t *cfg, zloop_t *loop,
                               gpp_control_t *ctl, gpp_err_t *err);

/* Passes a BarrierRelease on to the worker. */
void gpp_runner_release(gpp_runner_t *self, int barrier_id);
/* Asks the worker to end: after training (Shutdown), or at once when abort
 * is set (the communicator is aborted so that blocked waits return). */
void gpp_runner_stop(gpp_runner_t *self, int abort);
/* 1 once the worker has ended. */
int gpp_runner_done(const gpp_runner_t *self);
/* Aborts a running worker, joins it, frees. Accepts NULL. */
void gpp_runner_destroy(gpp_runner_t **self_p);

#endif
