/* gpp_job: the coordinator's planning step and the job it hands out.
 *
 * From the cluster file and --plan it builds the model graph (zoo spec or
 * graph JSON), the planner's cost model (every slot is one device of
 * [cluster] device, e.g. the planner's "cpu" preset for CPU agent slots, with
 * the compute share of local agents that outnumber the cores), and a plan:
 *   auto      the planner the cluster file names (job.planner, gpp default)
 *   gpp, spp  that partitioner
 *   FILE.json a gpp-plan/1 file (gpp-plan --json, or hand-written)
 * The plan is lowered (gpp_sched) and simulated (gpp_sim) for the predicted
 * iteration time: in gpp_job_new, or with --plan auto and no
 * cluster.profile on the coordinator's planning thread once the agents'
 * profile is in. Then gpp_job_plan_fn makes one Assignment per agent: agent rank r runs plan device
 * r (stage s, replica r - first_device(s)); ranks past the plan's devices get none. Comm ranks
 * equal agent ranks; the comm world is the plan's devices.
 *
 * The Assignments carry the coordinator's rendezvous endpoint and job token
 * (gpp_coord_job_t rdv_*, coordinator/gpp_rdv.h) and a key prefix unique to
 * this job.
 *
 * Ownership: gpp_job_new returns an object the caller owns; it owns the
 * graph, plan, cost model and the Assignments it hands out (valid until
 * gpp_job_destroy). */
#ifndef GPP_JOB_H
#define GPP_JOB_H

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
typedef int gpp_job_start_t;

/* Plans the job (no network yet) and prints the plan on out (may be NULL).
 * With --plan auto and no cluster.profile, planning waits for the agents'
 * profile (gpp_job_profile_request / gpp_job_profile_fn). NULL with a
 * message naming what is wrong (model, plan file, infeasible plan, more
 * devices than slots). */
/* With --plan auto, no cluster.profile and a job.checkpoint_dir, the
 * profile the plan comes from is kept as <checkpoint_dir>/profile.json
 * (atomically, beside plan.json); a later start with the same
 * checkpoint_dir, model and cluster.device plans from it instead of
 * profiling, unless reprofile is set. A kept file whose ops do not match the
 * model is an error naming it and suggesting --reprofile. */
/* resume (gpp_job_start_t; gpp-coordinator --resume): continue the job
 * from the newest complete checkpoint set N in job.checkpoint_dir
 * (gpp_ckpt_set_latest): the set's stage files must be of job.model and
 * job.optimizer and of one step count, and the plan to run must match set
 * N's plan.json (same batch, stages, ops, devices, micro-batch and k; else
 * an error naming both and the way out) unless resume has GPP_JOB_REPLAN,
 * where any plan of the same batch is run and said to re-shard the set; the
 * Assignments carry start_iteration N (every stage loads its file of set
 * N), the layout counts iterations N+1..job.iterations and the metrics file
 * is appended to. An error when there is no complete set or set N already
 * has job.iterations. Without resume, a job.checkpoint_dir that holds a
 * complete set is refused (naming the directory, --resume and a new
 * directory) before anything in it is written. With GPP_JOB_AUTO a
 * directory without a complete set (or no checkpoint_dir) is a fresh
 * start, said in the log. */
gpp_job_t *gpp_job_new(const gpp_config_t *cfg, const char *plan, int reprofile,
                       gpp_job_start_t resume, FILE *out, gpp_err_t *err);

/* The ProfileRequest for the rank-0 agent, or NULL when the plan is made. */
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
