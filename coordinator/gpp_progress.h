/* gpp_progress: the coordinator's per-iteration metrics. An iteration is
 * complete when every agent of the job reported it: one progress line goes
 * to the text stream and one JSON line to the metrics file (fields:
 * docs/coordinator.md). The job's iteration time is the slowest agent's;
 * its loss is the sum of the sink replicas' shares (each its samples' loss
 * sum / batch), the mini-batch mean.
 *
 * Ownership: gpp_progress_new returns an object the caller owns; it borrows
 * the text stream. */
#ifndef GPP_PROGRESS_H
#define GPP_PROGRESS_H

#include <stdio.h>

#include "common/gpp_err.h"
#include "proto/gpp_msg.h"

typedef struct gpp_progress_s gpp_progress_t;

typedef struct {
    int iterations_done;  /* complete iterations */
    double loss_first;    /* loss of the first complete iteration */
    double loss_last;     /* loss of the last complete iteration */
    double iteration_ms;  /* mean over complete iterations after the first
                             (the first warms caches and allocators);
                             the first one's when only one completed */
    double samples_per_s; /* batch / iteration_ms */
    double max_mem_bytes; /* highest memory high-water of any agent */
} gpp_progress_summary_t;

/* Who runs what in a training job, taken from the plan: rank r runs replica
 * replica_of_rank[r] of stage stage_of_rank[r] (-1 for both: an agent
 * outside the job) with an action list of n_actions_of_rank[r] actions
 * (Metrics.action_ms must have that length or be empty); sink_stage[s] is 1
 * for stages that report a loss. The arrays are borrowed. */
typedef struct {
    int n_agents, n_stages;
    const int *stage_of_rank, *replica_of_rank, *n_actions_of_rank; /* [n_agents] */
    const int *sink_stage;                                          /* [n_stages] */
    /* [n_stages] or NULL: the plan's predicted peak device memory of a
       replica of each stage (gpp_cost_stage_mem), compared with the agents'
       Metrics.device_mem_peak_bytes */
    const int64_t *mem_predicted_bytes;
    int iterations, batch;
    /* a resumed job (gpp-coordinator --resume): the iterations done before
       it, from the checkpoint set it resumed from. Metrics.iteration and the
       tables count from 0 (the first iteration of this run); the progress
       lines and the metrics file number iterations from start_iteration,
       and the metrics file is appended to (never truncated), after a line
       {"resumed_at_iteration": start_iteration}. 0: a fresh job. */
    int start_iteration;
} gpp_progress_layout_t;

/* Bytes of the per-iteration tables gpp_progress_new allocates for a job of
 * n_agents ranks and `iterations` iterations: what the coordinator checks
 * against the machine's memory before any agent starts. */
double gpp_progress_table_bytes(int n_agents, int iterations);

/* Copies the layout. jsonl_path may be NULL (no file). NULL with a message
 * when the file cannot be created. */
gpp_progress_t *gpp_progress_new(const gpp_progress_layout_t *layout, FILE *text,
                                 const char *jsonl_path, gpp_err_t *err);
void gpp_progress_destroy(gpp_progress_t **self_p);

/* Records rank's metrics. Checks them against the job (iteration is the
 * rank's next one, loss only from sink stages, action count): -1 with the
 * reason when they do not fit (the caller drops and counts them); -2 with
 * the reason when the metrics file could not take a completed iteration's
 * line (a full disk: the file keeps whole lines only; the caller stops the
 * job). Returns 1 when this completed an iteration (a line was printed and
 * written), else 0. */
int gpp_progress_add(gpp_progress_t *self, int rank, const Gpp__Metrics *m, gpp_err_t *err);

/* 1 when every iteration is complete. */
int gpp_progress_finished(const gpp_progress_t *self);

void gpp_progress_summary(const gpp_progress_t *self, gpp_progress_summary_t *out);

/* Measured peak device memory of stage s: the highest
 * Metrics.device_mem_peak_bytes any of its replicas reported (0 before any
 * report). Predicted: the layout's figure (0 without one) plus the most
 * Metrics.device_mem_backend_bytes a replica reported: the backend's own
 * buffers (the cuBLASLt workspace), which no model of the stage holds. */
int64_t gpp_progress_stage_mem(const gpp_progress_t *self, int stage);
int64_t gpp_progress_stage_mem_predicted(const gpp_progress_t *self, int stage);

/* Loss of complete iteration i (NAN when not complete or no sink). */
double gpp_progress_loss(const gpp_progress_t *self, int iteration);

/* Complete iterations so far (they complete in order: 0 .. done-1). */
int gpp_progress_done(const gpp_progress_t *self);

/* The job's time of complete iteration i, ms (NAN when not complete). */
double gpp_progress_iteration_ms(const gpp_progress_t *self, int iteration);

/* What one rank reported for one iteration; action_ms borrowed from the
 * progress object (n_action_ms may be 0: the agent sent no action times). */
typedef struct {
    double iteration_ms, bubble_ms;
    int64_t mem_bytes;
    int n_action_ms;
    const double *action_ms;
} gpp_progress_rank_t;

/* Rank's report of complete iteration i: 0, or -1 when i is not complete
 * or the rank has no stage. */
int gpp_progress_rank(const gpp_progress_t *self, int iteration, int rank,
                      gpp_progress_rank_t *out);

#endif
