/* gpp_profile: measures per-op forward+backward time of a stage at
 * micro-batch sizes 1, 2, 4, ... and writes the planner's profile table.
 *
 * Output schema (what gpp_cost_attach_profile reads; planner/gpp_cost.h):
 * one JSON object keyed by op id (string), each entry
 *   {"name": op name, "inputs": [producer ids], "input_size": [bytes per
 *    sample of each input], "weight_size": parameter bytes,
 *    "runtime": {"<micro-batch>": fwd+bwd ms, ...},
 *    "forward": {"<micro-batch>": fwd ms, ...}}  (gpp's addition to the
 *    authors' schema: the measured split; without it the planner assumes
 *    backward = 2 x forward).
 * The optional "reserved_mem" (a constant per-stage reservation to the
 * planner) is not written: the executor's memory is the graph's stash and
 * parameter figures, which the planner already has. planner/gpp_cost has no
 * writer, so this module writes the JSON with cJSON in that schema.
 *
 * Method: for each size b, an executor of the stage runs `warmup` untimed
 * and `reps` timed micro-batches with the per-op timing hook on
 * (gpp_exec_set_timing: a stream sync after every op); an op's time is the
 * mean fwd+bwd wall time per micro-batch. Boundary inputs of a partial stage
 * are N(0,1) (data inputs come from the data source), boundary output
 * gradients are N(0,1)/sqrt(numel per sample). */
#ifndef GPP_PROFILE_H
#define GPP_PROFILE_H

#include "agent/exec/gpp_data.h"
#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"
#include "planner/gpp_graph.h"

typedef struct {
    int max_micro_batch; /* sizes 1, 2, 4, ... up to this (inclusive if a power of 2) */
    int warmup;          /* untimed micro-batches per size (default 1 when 0) */
    int reps;            /* timed micro-batches per size (default 3 when 0) */
    uint64_t seed;
} gpp_profile_cfg_t;

/* Profiles ops[0..n_ops) of g on `be` and writes `path` atomically. */
int gpp_profile_write(const gpp_graph_t *g, int n_ops, const int *ops, gpp_backend_t *be,
                      gpp_data_t *data, const gpp_profile_cfg_t *cfg, const char *path,
                      gpp_err_t *err);

#endif
