/* gpp_profile: measures per-op forward+backward time of a stage at
 * micro-batch sizes 1, 2, 4, ... and writes the planner's profile table,
 * on any backend: ops are timed with timed events on the executor's stream
 * (gpp_event_elapsed_ms), so on a GPU the table holds device time, not the
 * host's launch time.
 * The sizes go up to max_micro_batch (the planner's largest micro-batch is
 * the mini-batch), as far as a time budget allows: the warm-up times each
 * size, and a size whose projected cost (twice the last size's per
 * micro-batch time, warmup + 2 x reps times) would take the profile past
 * budget_ms is not timed, nor any larger one. Sizes 1 and 2 always are, so
 * the planner sees the device's curve; beyond the table it follows the
 * device preset's curve (gpp_cost_op_fwd_ms) and gpp-plan says so.
 *
 * Output schema (what gpp_cost_attach_profile reads; planner/gpp_cost.h):
 * one JSON object keyed by op id (string), each entry
 *   {"name": op name, "inputs": [producer ids], "input_size": [bytes per
 *    sample of each input], "weight_size": parameter bytes,
 *    "runtime": {"<micro-batch>": fwd+bwd ms, ...},
 *    "forward": {"<micro-batch>": fwd ms, ...},  (gpp's addition to the
 *    authors' schema: the measured split; without it the planner assumes
 *    backward = 2 x forward)
 *    "kernel_stash": bytes per sample the op's forward kernel keeps for the
 *    backward on this backend (gpp's addition: gpp_exec_kernel_stash_bytes;
 *    CUDA's fused attention keeps less than the op table's layout, and the
 *    planner's memory model takes this figure: gpp_cost_op_stash_bytes),
 *    "workspace": {"fixed": bytes, "per_sample": bytes}: the stream
 *    workspace the op's kernels ask on this backend for n samples, fixed +
 *    n x per_sample (gpp's addition: gpp_exec_op_workspace; CUDA's
 *    attention cores ask more than the op table's CPU layout),
 *    "out_bytes": bytes per sample of the op's output (and its gradient)
 *    as this backend keeps it inside a stage (gpp's addition:
 *    gpp_backend_op_out_bytes; at bf16 on CUDA half the fp32 figure where
 *    the executor keeps it in bf16)}.
 * gpp_profile_write adds gpp's record of what was measured where, under
 * GPP_PROFILE_META ("_gpp", which readers of the authors' schema skip):
 *   {"model": spec, "device": the device's own name (gpp_backend_device_name:
 *    "NVIDIA H100 80GB HBM3", "cpu"), "ops": the model's op count,
 *    "backend": "cuda:0" | "cpu", "precision": "fp32" | "tf32" | "bf16"}.
 * Files without it (older gpp, the authors' profiles) load as before.
 * The optional "reserved_mem" (a constant per-stage reservation to the
 * planner) is not written: the executor's memory is the graph's stash and
 * parameter figures, which the planner already has, with the kernels'
 * stashes and workspaces as "kernel_stash" and "workspace" say. planner/gpp_cost has no
 * writer, so this module writes the JSON with cJSON in that schema.
 *
 * Method: one executor of the stage runs, at every size b, `warmup` untimed
 * micro-batches, then `reps` timed ones with the per-op timing hook on
 * (gpp_exec_set_timing: timed events before the first op and after each
 * op, no synchronisation between ops; an op's time is the device time
 * from the end of the op before it to its own end, its kernels plus any
 * wait for their launch, as in training). Each repetition is
 * timed on its own, and an op's entry is the MEDIAN over the repetitions of
 * its fwd+bwd ("runtime") and of its fwd ("forward") wall time per
 * micro-batch: on a shared machine a preempted repetition would inflate a
 * mean (tables varied up to 1.7x between runs with the mean of 3), the
 * median drops it, and keeps forward <= runtime for every op and size.
 * Repetitions go round the sizes (repetition r of every size before r + 1
 * of any), so that a burst of load spoils one repetition of a few sizes,
 * not all of one size; each timed micro-batch follows an untimed one of its
 * size, so caches hold what a steady stream of that size leaves there, as
 * in training. Cost per size: warmup + 2 x reps micro-batches. Boundary
 * inputs of a partial stage are N(0,1) (data inputs come from the data
 * source), boundary output gradients are N(0,1)/sqrt(numel per sample).
 *
 * Fault injection: hook GPP_FAULT_PROFILE_SLOW ("profile_slow:FROM_REP",
 * gpp_fault.h): every op of timed repetitions FROM_REP, FROM_REP+1, ...
 * (0-based, at every size) reads GPP_PROFILE_FAULT_MS slower, as if those
 * repetitions had been preempted. Tests use it to show the table ignores a minority of slow
 * repetitions and that every repetition is run. */
#ifndef GPP_PROFILE_H
#define GPP_PROFILE_H

#include <cjson/cJSON.h>

#include "agent/data/gpp_data.h"
#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_graph.h"

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

/* Profiles ops[0..n_ops) of g on `be`: the table above as a cJSON object.
 * Caller owns the result (cJSON_Delete); NULL with a message on error. */
cJSON *gpp_profile_measure(const gpp_graph_t *g, int n_ops, const int *ops, gpp_backend_t *be,
                           gpp_data_t *data, const gpp_profile_cfg_t *cfg, gpp_err_t *err);

/* gpp_profile_measure, written to `path` atomically; *largest_mb (when
 * not NULL) gets the largest size timed. */
int gpp_profile_write(const gpp_graph_t *g, int n_ops, const int *ops, gpp_backend_t *be,
                      gpp_data_t *data, const gpp_profile_cfg_t *cfg, const char *path,
                      int *largest_mb, gpp_err_t *err);

/* What a repetition slowed by the profile_slow fault adds per op. */
#define GPP_PROFILE_FAULT_MS 1000.0

#endif
