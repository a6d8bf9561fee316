/* gpp_job: the job the coordinator hands out: model, cost model, plan
 * (--plan auto|gpp|spp|FILE.json) and one Assignment per agent. Agent
 * rank r runs plan device r (stage s, replica r - first_device(s)); ranks
 * past the plan's devices get none. Callbacks of gpp_coord_cfg_t run it
 * through profiling, planning (on the planning thread) and training.
 *
 * Ownership: gpp_job_new returns an object the caller owns; it owns the
 * graph, plan, cost model and Assignments (valid until gpp_job_destroy). */
#ifndef GPP_JOB_H
#define GPP_JOB_H

#include <stdint.h>
#include <stdio.h>

#include "common/gpp_err.h"
#include "config/gpp_config.h"
#include "coordinator/gpp_coord.h"
#include "coordinator/gpp_progress.h"
#include "model/gpp_graph.h"
#include "planner/gpp_plan.h"

typedef struct gpp_job_s gpp_job_t;

/* How a job starts (gpp_job_new's resume): GPP_JOB_FRESH, or
 * GPP_JOB_RESUME with any of the modifiers or'ed in. */
enum {
    GPP_JOB_FRESH = 0,  /* from iteration 0 */
    GPP_JOB_RESUME = 1, /* --resume: from the newest set, with the set's plan */
    GPP_JOB_REPLAN = 2, /* --replan: the set re-sharded to the plan to run */
    GPP_JOB_AUTO = 4    /* --resume=auto: a fresh start where there is no set */
};
/* --resume-from N: GPP_JOB_RESUME | GPP_JOB_FROM(N) resumes from set N, not
 * the newest; GPP_JOB_FROM(0) is the newest that verifies. */
#define GPP_JOB_FROM_SHIFT 8
#define GPP_JOB_FROM(n) ((gpp_job_start_t)(n) << GPP_JOB_FROM_SHIFT)
typedef int64_t gpp_job_start_t;

/* Makes the job (no network yet) and prints its plan on out (may be NULL):
 * now, or, when it waits for the agents (an agent profile for --plan auto
 * without cluster.profile or a kept <checkpoint_dir>/profile.json; a cuda
 * job's memory figures or GPU memory), in gpp_job_plan_fn. reprofile
 * ignores a kept profile. resume: from the newest complete set N whose
 * files verify (or the set GPP_JOB_FROM names; newer sets are moved aside
 * once the job is assigned, gpp_ckpt_set_supersede), whose
 * stage files must be of job.model and job.optimizer and whose plan.json
 * the plan must match (unless GPP_JOB_REPLAN); the Assignments then start
 * at iteration N. Without resume a checkpoint_dir holding a complete set
 * is refused before anything in it is written (docs/checkpoints.md,
 * Resume). NULL with a message naming the file, the key and the fix. */
gpp_job_t *gpp_job_new(const gpp_config_t *cfg, const char *plan, int reprofile,
                       gpp_job_start_t resume, FILE *out, gpp_err_t *err);

/* The ProfileRequest for the rank-0 agent while the job awaits a profile
 * or memory figures, else NULL. Borrowed until gpp_job_destroy. */
const Gpp__ProfileRequest *gpp_job_profile_request(const gpp_job_t *self);
/* gpp_coord profile_fn (on the event loop, cheap): hands the measured rows
 * to the cost model; the plan is made by gpp_job_plan_fn. */
int gpp_job_profile_fn(void *arg, const Gpp__ProfileResult *res, gpp_err_t *err);
void gpp_job_destroy(gpp_job_t **self_p);

/* gpp_coord_plan_fn (on the coordinator's planning thread): makes the plan
 * if the agents' profile was awaited (partitioner, lowering, simulation,
 * plan.json), checks the agents' memory against it and fills job with one
 * Assignment per rank and the layout from the plan. arg is the gpp_job_t.
 * Fault hook GPP_FAULT_PLAN_SLOW ("plan_slow:MS", gpp_fault.h) makes it
 * first wait MS milliseconds (cancellable). */
int gpp_job_plan_fn(void *arg, gpp_registry_t *reg, const atomic_int *cancel, gpp_coord_job_t *job,
                    gpp_err_t *err);

/* gpp_coord iteration_fn (on the event loop): when `done` iterations are
 * complete and the agents saved a checkpoint after the last of them
 * (job.checkpoint_interval, the last iteration), commits that checkpoint
 * set (gpp_ckpt_set_commit: manifest, keeping job.checkpoint_keep sets).
 * gpp_job_new removes the temp files a killed save left in
 * job.checkpoint_dir. */
int gpp_job_iteration_fn(void *arg, int done, gpp_err_t *err);

/* gpp_coord metrics_fn: keeps the op digests of the last iteration
 * (replica 0 of each stage, for the stage's own ops); -1 for a digest of an
 * op outside the model or the rank's stage. */
int gpp_job_metrics_fn(void *arg, int rank, const Gpp__Metrics *m, gpp_err_t *err);

/* Plan, loss, samples/s and the simulated iteration time next to the
 * measured one; when every op with parameters reported its digest, the
 * line "weights sha256 <hex>" (gpp_ckpt_weights_digest), also appended to
 * the metrics file as {"weights_sha256": "<hex>"}. Returns -1 (logged)
 * when the metrics file could not take that line (the job's exit status is
 * then 1), else 0. */
int gpp_job_print_summary(const gpp_job_t *self, const gpp_progress_t *progress, FILE *out);

/* gpp-coordinator --trace: the agents report every action's start and end
 * in the job's iteration `iteration` (0-based; -1: the last, whose actions
 * end before the final checkpoint and weight digest are made). Call before
 * the plan is handed out. -1 with a message when the run does not train
 * that iteration. */
int gpp_job_trace(gpp_job_t *self, int iteration, gpp_err_t *err);

/* After the job: writes the measured iteration beside the simulated one
 * (coordinator/gpp_timeline.h) to path, with the agents' clock offsets
 * from reg, and prints the summary line on out. -1 with a message. */
int gpp_job_write_trace(const gpp_job_t *self, gpp_registry_t *reg, const char *path, FILE *out,
                        gpp_err_t *err);

#endif
