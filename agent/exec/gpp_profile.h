/* gpp_profile (the profiler): measures per-op forward and backward time of
 * a stage at micro-batch sizes 1, 2, 4, ... on any backend, as a profile
 * (model/gpp_profile.h) the cost model attaches and gpp_profile_io writes.
 *
 * Times are device time between timed events on the executor's stream
 * (gpp_exec_set_timing): an op's time runs from the end of the op before it
 * to its own end, as in training. Each size gets `warmup` untimed
 * micro-batches, then `reps` timed ones, each after an untimed one of its
 * size, repetition r of every size before r + 1 of any; a row holds the
 * median over the repetitions, so a repetition a busy neighbour preempted
 * is dropped and forward stays within forward + backward. Sizes stop where
 * the projected time (twice the last size's per micro-batch, warmup + 2 x
 * reps times) would pass budget_ms; sizes 1 and 2 always run. Each row also
 * carries the backend's figures: kernel_stash (gpp_exec_kernel_stash_bytes),
 * workspace (gpp_exec_op_workspace) and out_bytes (gpp_backend_op_out_bytes),
 * which the planner's memory model takes over the op table's. Boundary
 * inputs are N(0,1), boundary output gradients N(0,1)/sqrt(numel per sample).
 *
 * Fault hook GPP_FAULT_PROFILE_SLOW ("profile_slow:FROM_REP"): every op of
 * repetitions FROM_REP, FROM_REP+1, ... reads GPP_PROFILE_FAULT_MS slower. */
#ifndef GPP_EXEC_PROFILE_H
#define GPP_EXEC_PROFILE_H

#include "agent/data/gpp_data.h"
#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_graph.h"
#include "model/gpp_profile.h"

#define GPP_PROFILE_WARMUP_DEFAULT 2
#define GPP_PROFILE_REPS_DEFAULT 7
/* Profiling time to aim for: "a few seconds" on a CPU agent, so that
 * --plan auto does not wait long for its first plan. */
#define GPP_PROFILE_BUDGET_MS_DEFAULT 5000.0

typedef struct {
    int max_micro_batch; /* sizes 1, 2, 4, ... up to this (inclusive if a power of 2) */
    int warmup;          /* untimed micro-batches per size (GPP_PROFILE_WARMUP_DEFAULT = 2
                            when <= 0) */
    int reps;            /* timed micro-batches per size, each timed on its own (and each
                            after an untimed one); the table holds their median
                            (GPP_PROFILE_REPS_DEFAULT = 7 when <= 0; an odd count makes the
                            median one measured repetition) */
    uint64_t seed;       /* weights and boundary-tensor noise */
    double budget_ms;    /* projected profiling time that stops larger sizes
                            (GPP_PROFILE_BUDGET_MS_DEFAULT when <= 0) */
} gpp_profile_cfg_t;

/* Profiles ops[0..n_ops) of g on `be`: a row per op and size timed, the
 * record naming model, device, backend, precision and bf16 tensors. Caller
 * owns the result; NULL with a message on error. */
gpp_profile_t *gpp_profile_measure(const gpp_graph_t *g, int n_ops, const int *ops,
                                   gpp_backend_t *be, gpp_data_t *data,
                                   const gpp_profile_cfg_t *cfg, gpp_err_t *err);

/* What a repetition slowed by the profile_slow fault adds per op. */
#define GPP_PROFILE_FAULT_MS 1000.0

#endif
