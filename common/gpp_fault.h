/* gpp_fault: numbered fault-injection hook points (STYLE rule 10; SQLite's
 * sqlite3FaultSim).
 *
 * Code that can fail in ways a test cannot provoke (a full disk, a slow
 * repetition) asks `if (gpp_fault(GPP_FAULT_X))` at its hook point and, when
 * it returns non-zero, behaves as the failure would, reading the number the
 * fault was armed with from gpp_fault_arg. Unarmed, a hook costs a call and
 * two loads.
 *
 * Arming: from a test with gpp_fault_arm("name", arg), or for multi-process
 * tests through one environment variable read once (at the first hook or
 * arm) and logged:  GPP_FAULT=name:arg[,name:arg...]  e.g.
 * GPP_FAULT=atomic_write:4096. An explicit gpp_fault_arm wins over the
 * environment. Arm and disarm from one thread, before the code under test
 * runs. */
#ifndef GPP_FAULT_H
#define GPP_FAULT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gpp_fault_id {
    /* "atomic_write": gpp_atomic_file writes fail with ENOSPC once arg bytes
     * have gone to the temp file (0: the first write fails). */
    GPP_FAULT_ATOMIC_WRITE,
    /* "profile_slow": profiler repetitions from number arg (0-based) on read
     * GPP_PROFILE_FAULT_MS slower per op. */
    GPP_FAULT_PROFILE_SLOW,
    /* "plan_slow": the coordinator's planning (gpp_job_plan_fn) first waits
     * arg milliseconds, still cancellable, so that tests can watch the
     * event loop while planning takes long. */
    GPP_FAULT_PLAN_SLOW,
    /* "ckpt_kill": the process SIGKILLs itself in the middle of writing its
     * checkpoint file number arg (0-based, counted per process: arg saves
     * complete first), after the header went to the temp file. */
    GPP_FAULT_CKPT_KILL,
    /* "loop_stall": the coordinator's event loop (an agent's control loop)
     * stalls arg milliseconds once, at its first heartbeat tick after every
     * agent registered (after its RegisterAck), as a loaded machine can
     * stall it, while the peers' messages queue. */
    GPP_FAULT_LOOP_STALL,
    /* "worker_stuck": an agent's training worker, before it joins the data
     * plane, blocks arg milliseconds in a call that neither an abort nor a
     * signal interrupts, as a Gloo connect to a peer that went can. */
    GPP_FAULT_WORKER_STUCK,
    GPP_FAULT_COUNT
};

/* Non-zero when fault `id` is armed. */
int gpp_fault(enum gpp_fault_id id);
/* The number `id` was armed with (meaning: see the enum); -1 when unarmed. */
int64_t gpp_fault_arg(enum gpp_fault_id id);
/* Arms fault `name` with arg >= 0, or disarms it with arg < 0. -1 when no
 * fault has that name. */
int gpp_fault_arm(const char *name, int64_t arg);

#ifdef __cplusplus
}
#endif

#endif
