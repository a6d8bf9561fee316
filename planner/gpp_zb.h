/* gpp_zb: zero-bubble schedules of a plan (docs/planner.md "Zero-bubble
 * schedules"): the shape of each stage's order (in-flight samples and W
 * delay) from the stage DAG and the appendix ComputeInFlight table, the
 * peak memory of a stage under its order, and fitting a shape to a memory
 * bound. gpp_sched_compute builds the orders from the shape. */
#ifndef GPP_ZB_H
#define GPP_ZB_H

#include <stdint.h>

#include "common/gpp_err.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_plan.h"

/* Sets p->schedule = kind and, on every stage of the linked plan p (stage
 * ids topological), its in-flight samples and W delay:
 *   1f1b, zb-h1: in-flight by the ComputeInFlight table over the stage DAG
 *     (a sink k b; at most B), what the partitioner computes;
 *   zb-h2: the same with every hop counted twice;
 *   W delay (zb-h1, zb-h2): floor(U_s / b_s), at most the stage's
 *     micro-batches, U_s the upstream depth in samples (0 at a source, else
 *     the most over predecessors q of U_q + the hop (q, s)); 0 for 1f1b.
 * The hop of an edge (x, y) is ComputeInFlight(k_x, b_x, k_y, b_y, i) - i.
 * Builds no orders (gpp_sched_compute does). */
void gpp_zb_shape(gpp_plan_t *p, gpp_sched_kind_t kind);

/* Peak device memory of one replica of stage s running its compute order
 * (stage.compute, from gpp_sched_compute): its memory plan with the
 * backward split in B and W (gpp_memplan_cfg_t.split: what an op's W reads,
 * its inputs, output gradient, kernel and W stash, lives until its W),
 * a lane per micro-batch begun and not past its W at once
 * (gpp_actions_inflight of the order), plus reserved bytes as
 * gpp_cost_stage_mem. A 1F1B order gives gpp_cost_stage_mem at its most
 * micro-batches in flight. */
int64_t gpp_zb_stage_mem(const gpp_cost_t *c, const gpp_plan_t *p, int s);

/* Builds the orders of shaped plan p and fits them to `bound` bytes per
 * device: zb-h1 lowers the W delay of a stage above the bound until it
 * fits (down to 0); 1f1b and zb-h2 are taken as shaped. A zero-bubble
 * plan's stages get mem_bytes (and act_bytes) from gpp_zb_stage_mem. 0
 * when every stage fits; -1 with a message naming the first stage that
 * does not ("stage 2 needs 31.20 GiB per device with zb-h2"). *need (may
 * be NULL) gets the largest need over the stages either way. */
int gpp_zb_fit(gpp_plan_t *p, const gpp_cost_t *c, int64_t bound, int64_t *need, gpp_err_t *err);

#endif
