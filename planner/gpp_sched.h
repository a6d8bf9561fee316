/* gpp_sched: the static micro-batch scheduler (paper section 5) and the
 * lowering of its per-stage orders into per-replica action lists.
 *
 * 1. gpp_sched_compute() fills stage.compute of every stage with FWD/BWD
 *    actions: warm-up forwards w = clamp(ceil(inflight / micro_batch), 1, m), then
 *    the kFkB steady state (k backwards, k forwards, alternating; 1F1B when
 *    k = 1), then the cool-down backwards. m = batch / micro_batch. A
 *    zero-bubble plan's backwards are BWD_IN (B) and BWD_W (W) passes.
 *
 * 2. gpp_sched_lower() fills stage.replica[r] for every replica r:
 *      RECV_ACT*  FWD j  SEND_ACT*      for every FWD of the compute order
 *      RECV_GRAD* BWD j  SEND_GRAD*     for every BWD (and BWD_IN)
 *      BWD_W j                          for every BWD_W (no transfers)
 *      ALLREDUCE (devices > 1)  STEP    at the end
 *    There is one transfer per edge tensor (the producer op id of a graph
 *    edge that crosses stages; a tensor read by several ops of one stage is
 *    sent once), per peer replica and per overlapping sample range. Replica r
 *    of a stage with d replicas and micro-batch b owns samples
 *    [j*b + floor(r*b/d), j*b + floor((r+1)*b/d)) of micro-batch j; a transfer
 *    carries the intersection of the two sides' ranges, so data-parallel
 *    degrees and micro-batch sizes may differ across an edge. Gradients flow
 *    back along the same transfers (none for tensors of INPUT ops: data has no
 *    gradient). When one tensor feeds several consumer stages, each sends its
 *    gradient back and the producer sums them (and adds the gradient from
 *    consumers inside its own stage). Receives for one FWD/BWD come in order
 *    of (lo, peer stage, tensor, peer replica): a receive precedes exactly the
 *    pass that needs it, never an earlier one, so receives from producers
 *    that finish at different times are never waited on together.
 *
 * 3. gpp_sched_validate() checks the paper's constraints C1-C4 (C3 over the
 *    devices the stages use: ranges disjoint and within [0, n_devices); the
 *    partitioner may leave devices idle) and that the
 *    lowered lists are consistent and deadlock-free: every SEND is matched
 *    by exactly one RECV with the same (src, dst, tensor, lo, hi), and an
 *    execution in which each replica runs its list in order, sends are
 *    asynchronous (buffered) and a RECV blocks until its SEND has run,
 *    completes. Messages name the violated constraint and the stage.
 *
 * gpp_sched_links_new() exposes that SEND/RECV matching to the simulator. */
#ifndef GPP_SCHED_H
#define GPP_SCHED_H

#include "common/gpp_err.h"
#include "model/gpp_graph.h"
#include "planner/gpp_plan.h"

/* Fills stage.compute for every stage (replacing what was there), by the
 * plan's schedule kind (p->schedule; zero-bubble: B and W passes, each W
 * right after the B of w_delay micro-batches later, the last w_delay after
 * the last B: docs/planner.md "Zero-bubble schedules"). Fails when a
 * stage's micro_batch does not divide the batch or k < 1. */
int gpp_sched_compute(gpp_plan_t *p, gpp_err_t *err);
/* The same for stage s alone. */
int gpp_sched_stage_order(gpp_plan_t *p, int s, gpp_err_t *err);

/* Fills stage.replica[0..devices) from stage.compute (replacing what was
 * there). Needs a linked plan (gpp_plan_link). */
int gpp_sched_lower(gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err);

/* gpp_sched_compute + gpp_sched_lower + gpp_sched_validate. */
int gpp_sched_build(gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err);

/* C1-C4 on stages and stage.compute; when the replica lists exist, also
 * their agreement with stage.compute, SEND/RECV matching and deadlock
 * freedom. Returns 0, or -1 with a message naming the constraint and stage. */
int gpp_sched_validate(const gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err);

/* The text form of a pass order: "F0 F1 B0 F2 B1 ..." (FWD and BWD of
 * micro-batch mb, BWD_IN as B and BWD_W as W; other actions are skipped), the passes of l from
 * action `first` on ("... " in front when first > 0). Writes at most size bytes with a NUL (whole
 * passes only; " ..." at the end when they do not all fit) and returns the length of the complete
 * text, like snprintf: pass (NULL, 0) to size a buffer. */
size_t gpp_sched_format(const gpp_actions_t *l, int first, char *buf, size_t size);

/* Samples [*lo, *hi) of micro-batch mb held by replica r of stage st. */
void gpp_sched_replica_range(const gpp_stage_t *st, int mb, int r, int64_t *lo, int64_t *hi);

/* The SEND/RECV matching of a lowered plan. Actions are numbered flat:
 * action i of stage s replica r is act_base[list_base[s] + r] + i. */
typedef struct {
    int n_lists;     /* replica lists over all stages */
    int *list_base;  /* [n_stages]: list index of each stage's replica 0 */
    int *list_stage; /* [n_lists]: stage of each list */
    int *act_base;   /* [n_lists + 1]: flat index of each list's first action */
    int n_acts;      /* act_base[n_lists] */
    int *match;      /* [n_acts]: flat index of the matching RECV (for a SEND)
                        or SEND (for a RECV); -1 for other actions */
} gpp_sched_links_t;

/* Caller owns the result (gpp_sched_links_destroy). NULL with a message
 * when a SEND or RECV has no partner or more than one. */
gpp_sched_links_t *gpp_sched_links_new(const gpp_plan_t *p, gpp_err_t *err);
void gpp_sched_links_destroy(gpp_sched_links_t **self_p);

/* The order in which a communication library that runs a rank's
 * operations one after another on one stream, each blocking until its peer
 * takes part (NCCL with one communicator and one communication stream per
 * agent), can run the plan's transfers and all-reduces without deadlock
 * (planner/gpp_sched_order.c derives it; docs/gpu.md). The lists' own order
 * is for buffered sends and receives posted early (Gloo) and can deadlock
 * on a blocking stream. seq[seq_base[li] .. seq_base[li + 1]) are the flat
 * action indices (gpp_sched_links_t numbering) of list li's SENDs, RECVs
 * and ALLREDUCE in the order its stream runs them: every list's sequence is
 * a subsequence of one topological order of the iteration's passes,
 * transfers and all-reduces. */
typedef struct {
    int n_lists;
    int *seq_base; /* [n_lists + 1] */
    int *seq;
} gpp_sched_order_t;

/* Caller owns the result. NULL with a message when a SEND or RECV is
 * unmatched or there is no such order (a cycle: not for a plan
 * gpp_sched_validate accepts). */
gpp_sched_order_t *gpp_sched_order_new(const gpp_plan_t *p, const gpp_sched_links_t *k,
                                       gpp_err_t *err);
void gpp_sched_order_destroy(gpp_sched_order_t **self_p);

#endif
