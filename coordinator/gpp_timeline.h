/* gpp_timeline: the measured trace of one iteration (gpp-coordinator
 * --trace). The agents' action start and end times (their
 * CLOCK_MONOTONIC) move onto the coordinator's clock through each agent's
 * estimated offset (gpp_clock_est_t) and are written as a Chrome trace
 * beside the simulator's iteration of the same plan (planner/gpp_trace.h):
 * pid S "measured stage S" (tid: replica), pid n_stages + S "simulated
 * stage S". Busy is what the simulator counts (FWD, BWD, ALLREDUCE,
 * STEP); a stage's bubble is the iteration less its busiest replica's busy
 * time. Times in us on the wire, ms in the summary.
 *
 * Ownership: gpp_timeline_new borrows the lowered plan (it must outlive
 * the timeline); the caller owns the result. */
#ifndef GPP_TIMELINE_H
#define GPP_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "common/gpp_err.h"
#include "common/gpp_time.h"
#include "planner/gpp_plan.h"
#include "planner/gpp_sim.h"
#include "proto/gpp_msg.h"

typedef struct gpp_timeline_s gpp_timeline_t;

/* iteration: the traced one, in Metrics.iteration numbering. */
gpp_timeline_t *gpp_timeline_new(const gpp_plan_t *p, int iteration);
void gpp_timeline_destroy(gpp_timeline_t **self_p);

/* Takes the action times of rank (a plan device) from m when it carries
 * them: 0 taken or none there; -1 with a message when they are not the
 * ones asked for (another iteration, a count other than the rank's action
 * list, a second report, a rank outside the plan): the caller drops them
 * (the rest of m stays good) and counts. */
int gpp_timeline_add(gpp_timeline_t *self, int rank, const Gpp__Metrics *m, gpp_err_t *err);

/* Ranks whose times are in. */
int gpp_timeline_ranks(const gpp_timeline_t *self);

typedef struct {
    double measured_ms;  /* first action's start to last action's end, our clock */
    double simulated_ms; /* the simulator's iteration */
    int ranks;           /* ranks in the trace; < the plan's devices: some missing */
} gpp_timeline_summary_t;

/* Writes the trace to path atomically; clocks[rank] for every plan device
 * (samples == 0: taken as our clock). sim: a simulator that ran the same
 * plan. Prints one summary line on out (may be NULL). -1 with a message
 * naming path when it cannot be written or no rank reported. */
int gpp_timeline_write(const gpp_timeline_t *self, const gpp_sim_t *sim,
                       const gpp_clock_est_t *clocks, const char *path, FILE *out,
                       gpp_timeline_summary_t *sum, gpp_err_t *err);

#endif
