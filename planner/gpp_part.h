/* gpp_part: the GPP pipeline stage partitioner (paper Algorithm 1) and the
 * SPP baseline.
 *
 * Binary search on the bottleneck time per sample (TPS); for a target t a
 * memoised DP over the SP tree (gpp_sp) decides whether the graph can be cut
 * into stages — a contiguous range of a series node's children, a contiguous
 * range of a parallel node's branches, any node, or on the join side of a
 * parallel node its last branches (the first of them whole or only its
 * tail) with the series children after it — each with its own
 * data-parallel degree, TPS <= t and memory within the bound given the
 * samples in flight the schedule implies. The DP value of a sub-graph, for
 * the successor's in-flight count and schedule, is the least number of
 * devices that reaches each in-flight count at its source stages. The DP
 * may leave devices idle ("at most n_devices"); spare devices then go, one
 * at a time, to the stage where one more replica lowers the refined
 * iteration estimate (docs/planner.md), while one does.
 *
 * In-flight samples (always capped at the mini-batch: a stage never holds
 * more than all its micro-batches): default (universal micro-batch b, 1F1B)
 * inflight(x) = b + max over successors inflight(y), a sink has b. With
 * per-stage micro-batch sizes or kFkB, the appendix ComputeInFlight table
 * (gpp_part_inflight), maximised over successors; a sink has k*b.
 *
 * The universal micro-batch is swept over the divisors of B; plans are
 * ranked by the estimated iteration time TPS * (B + (depth - 1) * b) (for
 * each b the least-TPS plan, then shallower ones while the estimate
 * improves). With per-stage micro-batches or kFkB those plans compete with
 * the universal ones by the same estimate. With opts.simulate (default)
 * every candidate the search built is simulated (gpp_sched, gpp_sim) and the
 * fastest is returned. A fixed micro-batch (or min_tps)
 * gives Algorithm 1 as is: the least bottleneck TPS.
 * SPP runs the same DP on gpp_sp_linear (a chain). */
#ifndef GPP_PART_H
#define GPP_PART_H

#include <stdint.h>

#include "common/gpp_err.h"
#include "planner/gpp_cost.h"
#include "model/gpp_graph.h"
#include "planner/gpp_plan.h"

typedef struct {
    int batch;          /* mini-batch B (samples per iteration) */
    int micro_batch;    /* universal b; 0 = sweep every divisor of B */
    int per_stage_mbs;  /* 1: each stage picks its own b (divisors of B, at most max_mbs) */
    int kfkb;           /* 1: each stage picks k in 1..max_k (k*b divides B) */
    int max_k;          /* default 4 */
    int max_mbs;        /* cap on candidate micro-batch sizes; 0 = B */
    double eps;         /* relative binary-search tolerance: stop when
                           t_r - t_l <= eps * t_r; default 1e-3 */
    int spp;            /* 1: SPP baseline (graph linearized in topological order) */
    int min_tps;        /* 1: return the least bottleneck TPS over the candidate
                           configs (Algorithm 1 as is) instead of the least
                           estimated iteration time; with per_stage_mbs/kfkb the
                           universal 1F1B plans are then not candidates */
    int simulate;       /* 1 (default): of the candidate plans the search yields
                           (per micro-batch size, per depth), keep the one with
                           the least simulated iteration time (gpp_sched +
                           gpp_sim); 0: the least estimate */
    unsigned schedules; /* the schedules the pick tries, a mask of (1 << gpp_sched_kind_t)
                           (GPP_SCHED_AUTO: all); 0 = 1F1B only (the default). Each
                           candidate plan is shaped, fitted to the memory bound
                           (gpp_zb_fit) and simulated under each; the least simulated
                           time wins, a tie to the lower kind (less memory). Without
                           simulate: the lowest kind asked. No candidate fitting with
                           any of them: an error naming the least memory that would */
    int no_chain;       /* 1: GPP returns the graph-pipeline DP's plan only; 0
                           (default): it also plans the SPP chain and keeps the
                           better of the two by the criterion above (up to
                           GPP_PART_CHAIN_MAX_DEVICES devices) */
    /* Optional progress for long searches: called on the searching thread
     * with every plan the search finds (its micro-batch size, depth and
     * estimated iteration ms) and the best estimate so far (the TPS with
     * min_tps) of the search pass it belongs to: GPP's search of the chain
     * (no_chain = 0) is a second pass that starts afresh. NULL: none. */
    void (*on_candidate)(void *arg, int micro_batch, int depth, double est_ms, double best_ms);
    void *on_candidate_arg;
} gpp_part_opts_t;

/* Most devices at which GPP also plans the SPP chain (no_chain = 0). */
#define GPP_PART_CHAIN_MAX_DEVICES 64

void gpp_part_opts_default(gpp_part_opts_t *o, int batch);

/* Partitions g for the cluster of `cost`. Caller owns the plan (planner,
 * stages with ops, devices, micro_batch, k, inflight, tps/fwd/bwd/allreduce
 * ms, weight/act/mem bytes, succ/pred, depth, bottleneck_tps_ms, search_ms;
 * iteration_ms holds the estimate until the simulator overwrites it).
 * Returns NULL with a message when no plan exists; when memory is what
 * prevents one and min_mem_bytes is not NULL, *min_mem_bytes is set to the
 * smallest per-device bound (to 1 MiB) that admits a plan, and 0 otherwise. */
gpp_plan_t *gpp_part_run(const gpp_graph_t *g, const gpp_cost_t *cost, const gpp_part_opts_t *opts,
                         int64_t *min_mem_bytes, gpp_err_t *err);

/* Appendix ComputeInFlight: in-flight samples of stage x (k_x F k_x B, micro-
 * batch b_x) feeding stage y that holds i_y samples. Rows are matched in the
 * table's order; *row_out (if not NULL) gets the 1-based row used. Asserts
 * that a row matches and that every matching row gives the same value (rows
 * 3/5 and 4/6 both match when b_x == b_y; they agree). */
int gpp_part_inflight(int kx, int bx, int ky, int by, int iy, int *row_out);
/* Number of table rows whose condition holds (for coverage tests). */
int gpp_part_inflight_matches(int kx, int bx, int ky, int by);

#endif
