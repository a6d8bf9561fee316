/* gpp_agent: one stage replica's daemon — the agent's event loop and state
 * machine, the mirror of coordinator/gpp_coord.h.
 *
 * One zloop drives everything: the DEALER socket to the coordinator
 * (agent/control/gpp_control.h: register, heartbeats, validation), the
 * signal fd, and the pipe of the worker thread (agent/gpp_worker.h), which
 * does the blocking work. No handler blocks.
 *
 *   registering ──RegisterAck──► registered ──ProfileRequest──► profiling ──┐
 *        │                           │  ◄──────────────────────────────────┘
 *        │                           └──Assignment──► training ──Shutdown──► done (0)
 *        └── Reject, Abort, a lost coordinator, a failed worker, a signal ──► done (1 / 128+N)
 *
 * registered: with control_barriers > 0 (a control-only job) the agent
 *             enters barriers 0 .. control_barriers-1 in turn, each after
 *             the previous one's release.
 * profiling:  a worker times the model's ops and reports a ProfileResult;
 *             the assignment comes next.
 * training:   a worker runs the stage replica (agent/pipeline/gpp_pipeline.h);
 *             barrier releases go to it; it reports Ready, BarrierEnter,
 *             Metrics and Error itself.
 * done:       Shutdown lets a trained worker finish and close its
 *             communicator; Abort, a signal or a lost coordinator stop it
 *             at once (blocked waits return). The loop ends when the worker
 *             has ended, or at the latest comm_timeout_ms after the stop or
 *             at a second signal: a worker stuck in a call nothing
 *             interrupts is then left behind (gpp_agent_abandoned), so an
 *             agent that gives up always exits.
 *
 * A second Assignment or ProfileRequest is ignored with a warning; a
 * coordinator's Error is logged. Exit status (gpp_agent_run): 0 after
 * Shutdown, 1 after Abort, Reject, a lost coordinator or a failure, 128+N
 * on signal N.
 *
 * Ownership: gpp_agent_new returns an object the caller owns; it copies
 * what it needs of cfg. */
#ifndef GPP_AGENT_H
#define GPP_AGENT_H

#include <stdint.h>

#include "agent/control/gpp_control.h"
#include "common/gpp_err.h"

typedef struct gpp_agent_s gpp_agent_t;

typedef struct {
    gpp_control_cfg_t ctl; /* coordinator, host, slot, heartbeats; data_addr unused.
                              ctl.backend is what the agent asks for (CUDA: probe its GPU,
                              agent/gpp_device.h; it registers as CPU, with the reason, when
                              the GPU is not usable); ctl.device is filled by
                              gpp_agent_new; ctl.mem_bytes 0: the device's total memory */
    int gpu;               /* CUDA: GPU index (CUDA_VISIBLE_DEVICES applied); -1: the slot */
    int control_barriers;  /* control-only job: barriers to run after RegisterAck, >= 0 */
    int threads;           /* CPU backend threads, >= 1 */
    const char *data_host; /* data-plane bind address; NULL: ctl.host */
    int comm_timeout_ms;   /* data-plane rendezvous and waits, and the most a stop waits
                              for the worker; 0: the comm's default */
    int sigfd;             /* gpp_sigfd_open()'s fd (or any fd yielding signal bytes), -1: none */
} gpp_agent_cfg_t;

/* Connects to the coordinator and sends Register. NULL with a message when
 * the configuration or the endpoint is unusable. */
gpp_agent_t *gpp_agent_new(const gpp_agent_cfg_t *cfg, gpp_err_t *err);
/* Runs the loop to the end of the job; returns the exit status (above).
 * Joins the worker before it returns. */
int gpp_agent_run(gpp_agent_t *self);
/* 1 when gpp_agent_run ended without a worker that did not stop: its
 * thread still runs, so the process must end with _exit (atexit handlers
 * would meet its sockets and locks). */
int gpp_agent_abandoned(const gpp_agent_t *self);
/* Invalid frames from the coordinator dropped so far. */
uint64_t gpp_agent_dropped(const gpp_agent_t *self);
/* Accepts NULL. */
void gpp_agent_destroy(gpp_agent_t **self_p);

#endif
