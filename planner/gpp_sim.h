/* gpp_sim: event-driven simulation of one training iteration of a lowered
 * plan (every stage's per-replica action lists, gpp_sched_lower).
 *
 * Every replica is one device that runs its list in order:
 *   FWD / BWD   stage fwd_ms / bwd_ms per micro-batch (from the plan; when
 *               both are 0 and a cost model is given, from gpp_cost_stage)
 *   BWD_IN      bwd_ms - bwd_w_ms (a zero-bubble B pass)
 *   BWD_W       bwd_w_ms (a W pass: the op table's parameter-gradient share of
 *               each op's backward, docs/planner.md "Zero-bubble schedules")
 *   SEND_*      asynchronous: costs the device nothing; the message occupies
 *               the (src device, dst device) link for alpha + bytes / bw,
 *               after the messages sent earlier on that link, with
 *               bytes = out_bytes(tensor) per sample x samples; intra- or
 *               inter-node link by device ids (gpp_cluster_link)
 *   RECV_*      waits until the message has arrived (receives are posted
 *               early, so arrival does not depend on when the RECV is reached)
 *   ALLREDUCE   a barrier over the stage's replicas, then the ring
 *               all-reduce of the stage's gradient bytes on the link its
 *               device group spans (without a cost model: stage allreduce_ms)
 *   STEP        the AdamW update of the stage's gradient bytes,
 *               gpp_cost_step_ms (the partitioner's TPS charges the same);
 *               0 without a cost model
 * Without a cost model communication and the step are free.
 *
 * Outputs: iteration time (the last device to finish), throughput
 * (batch / iteration), per stage busy time (compute, all-reduce and step on
 * its busiest replica), bubble (iteration - busy) and peak memory per device
 * (weights + grads + optimizer state + the high-water mark of stashed
 * activations over the schedule + reserved bytes), and a Chrome trace.
 *
 * Ownership: gpp_sim_new borrows plan, graph and cost (they must outlive the
 * simulator); the caller owns the simulator (gpp_sim_destroy). */
#ifndef GPP_SIM_H
#define GPP_SIM_H

#include <stdint.h>

#include "common/gpp_err.h"
#include "planner/gpp_cost.h"
#include "model/gpp_graph.h"
#include "planner/gpp_plan.h"

typedef struct gpp_sim gpp_sim_t;

typedef struct {
    double fwd_ms, bwd_ms; /* per micro-batch on one replica, as simulated */
    double bwd_w_ms;       /* of bwd_ms, a W pass (zero-bubble; a B pass is the rest) */
    double busy_ms;        /* compute + all-reduce + step, busiest replica */
    double bubble_ms;      /* iteration_ms - busy_ms */
    double allreduce_ms;   /* all-reduce time, as simulated */
    double step_ms;
    int peak_live_mbs;        /* most micro-batches stashed at once (forwarded, and not
                                 backwarded or, split, not past their W pass) */
    int64_t stash_peak_bytes; /* high-water of stashed activations, busiest replica */
    int64_t peak_mem_bytes;   /* with a cost model: the executor's peak with peak_live_mbs
                                 in flight (gpp_cost_stage_mem), a zero-bubble plan's its
                                 order's split memory plan (gpp_zb_stage_mem); else weight_bytes +
                                 stash_peak_bytes + reserved */
} gpp_sim_stage_t;

/* cost may be NULL (free communication and step). */
gpp_sim_t *gpp_sim_new(const gpp_plan_t *p, const gpp_graph_t *g, const gpp_cost_t *cost);
void gpp_sim_destroy(gpp_sim_t **self_p);

/* Simulates one iteration. The plan must be lowered; fails (naming the
 * stage) when its lists do not match up or cannot all complete. */
int gpp_sim_run(gpp_sim_t *s, gpp_err_t *err);

/* A lower bound on the iteration time gpp_sim_run would give, without
 * scheduling or simulating: over the stages, the forward of micro-batch 0
 * along the longest path to the stage, then the stage's own work (every
 * forward and backward pass, its all-reduce and optimizer step), which
 * runs one action at a time on each replica whatever the waits. */
double gpp_sim_bound_ms(gpp_sim_t *s);
double gpp_sim_iteration_ms(const gpp_sim_t *s);
double gpp_sim_throughput(const gpp_sim_t *s); /* samples per second */
/* Result for stage i (0 <= i < n_stages); valid after gpp_sim_run. */
const gpp_sim_stage_t *gpp_sim_stage(const gpp_sim_t *s, int i);

/* One span of the last run. */
typedef struct {
    int stage, replica, device;
    int row; /* 0: the device's FWD/BWD/ALLREDUCE/STEP; 1: a transfer it sends */
    int mb;  /* -1: none */
    double ts_ms, dur_ms;
    char name[64]; /* gpp_trace_action_name (planner/gpp_trace.h) */
} gpp_sim_event_t;

/* Whether gpp_sim_run records its spans (default 1). A search that wants
 * only the iteration time turns them off: formatting a name per span is
 * most of a simulation's cost. Without them gpp_sim_events returns 0. */
void gpp_sim_keep_events(gpp_sim_t *s, int keep);

/* The spans of the last run, in simulation order; *out borrowed (valid
 * until the next run or destroy). Returns how many. */
int gpp_sim_events(const gpp_sim_t *s, const gpp_sim_event_t **out);

/* Chrome trace of the last run ({"traceEvents":[...]}, Perfetto-loadable):
 * pid 0 has one row (tid) per device with its FWD/BWD/ALLREDUCE/STEP spans;
 * pid 1 has one row per device with the transfers it sends. Times in us.
 * Caller owns the string (free()). */
char *gpp_sim_trace_json(const gpp_sim_t *s);
int gpp_sim_write_trace(const gpp_sim_t *s, const char *path, gpp_err_t *err);

/* Runs a simulator and stores iteration_ms and throughput in the plan. */
int gpp_sim_plan(gpp_plan_t *p, const gpp_graph_t *g, const gpp_cost_t *cost, gpp_err_t *err);

#endif
