/* gpp_job_impl: private to the job's files (coordinator/job/), one per phase:
 *
 *   gpp_job.c          lifecycle (new, destroy), the planning thread's entry
 *   gpp_job_profile.c  what the cost model is made of: a kept profile, the
 *                      ProfileRequest, the agents' rows and figures, the
 *                      agents' GPU memory
 *   gpp_job_plan.c     the plan (partitioner or file), its layout, memory
 *                      prediction and table
 *   gpp_job_assign.c   one Assignment per rank, the checks before they go out
 *   gpp_job_train.c    during and after training: metrics, checkpoint sets,
 *                      summary, weights digest, trace
 *   gpp_job_recover.c  where a job starts (fresh or a set), the set and plan
 *                      checks of --resume, plan.json and profile.json kept
 *
 * Sizes in bytes, times in ms. */
#ifndef GPP_JOB_IMPL_H
#define GPP_JOB_IMPL_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/gpp_sha256.h"
#include "coordinator/gpp_rdv.h"
#include "coordinator/gpp_timeline.h"
#include "coordinator/job/gpp_job.h"
#include "planner/gpp_cost.h"

/* What the job waits for; it only moves forward:
 *   PROFILING ──rows──► AWAIT_AGENTS ──plan_fn──► PLANNED ──► ASSIGNED
 *   FIGURES ──figures──► AWAIT_AGENTS, or PLANNED (a plan file, read at new)
 * gpp_job_new starts in PLANNED when nothing from the agents is needed. */
typedef enum {
    GPP_JOB_PROFILING,    /* rank 0's profile: --plan auto with nothing measured */
    GPP_JOB_FIGURES,      /* agent 0's memory figures: a cuda job without a profile from
                             its GPUs (a plan file is read already, its memory predicted
                             again once they are in) */
    GPP_JOB_AWAIT_AGENTS, /* planned by plan_fn once every agent is in (a cuda job without
                             cluster.mem_gib: with their GPUs' memory) */
    GPP_JOB_PLANNED,      /* plan, layout and memory prediction made */
    GPP_JOB_ASSIGNED      /* one Assignment per used rank made (plan.json kept) */
} gpp_job_state_t;

/* Where the cost model's op times come from. */
typedef enum {
    GPP_JOB_TIMES_PRESET, /* the device preset's roofline */
    GPP_JOB_TIMES_FILE,   /* cluster.profile */
    GPP_JOB_TIMES_KEPT,   /* <checkpoint_dir>/profile.json of an earlier run */
    GPP_JOB_TIMES_AGENTS  /* rank 0's ProfileResult */
} gpp_job_times_t;

struct gpp_job_s {
    gpp_job_state_t state;
    gpp_job_times_t times;
    gpp_config_t cfg;       /* copy; nodes not used after new */
    char plan_arg[1024];    /* --plan as given */
    char plan_name[1024];   /* the planner or file that made the plan */
    FILE *out;              /* plan table; NULL none */
    gpp_job_start_t resume; /* how gpp_job_new was asked to start */
    int start;              /* iterations of the set resumed from; 0 fresh */
    gpp_profile_t *prof;    /* the agents' profile or agent 0's memory figures, as
                               attached; kept as <checkpoint_dir>/profile.json */
    gpp_cluster_t cluster;  /* what the cost model was made from */
    char mem_source[512];   /* where the cost model's device memory came from, for the
                               error when no plan fits: the agents' GPU share, or the preset */
    Gpp__ProfileRequest preq;
    int32_t *preq_mbs;
    gpp_graph_t *g;
    gpp_cost_t *cost;
    gpp_plan_t *plan;
    int n_agents;
    int used;  /* devices the plan uses: ranks 0..used-1 */
    int *sink; /* [n_stages]: 1 where the stage holds a loss op */
    /* [n_agents]: stage, replica and action count of each rank (-1, -1, 0 unused) */
    int *rank_stage, *rank_replica, *rank_actions;
    int64_t *mem_predicted; /* [n_stages]: a replica's peak device memory */
    char rdv_endpoint[512];
    char rdv_token[GPP_RDV_TOKEN_LEN + 1];
    char prefix[96]; /* the rendezvous keys' prefix, unique to this job */
    /* the last iteration's op digests (gpp_job_metrics_fn) */
    unsigned char (*digest)[GPP_SHA256_BYTES]; /* [g->n_ops] */
    int *has_digest;                           /* [g->n_ops] */
    Gpp__Assignment **assign;                  /* [n_agents], what plan_fn hands out */
    int trace_iteration;                       /* gpp_job_trace's (the job's numbering), -1 none */
    gpp_timeline_t *timeline;                  /* made with the assignments */
    uint64_t trace_dropped;                    /* action times refused (gpp_timeline_add) */
};

/* gpp_job.c */
/* 1 with a message when the coordinator stopped the job (cancel may be NULL: never). */
int gpp_job_cancelled(const atomic_int *cancel, gpp_err_t *err);
/* bytes as "12.50 GiB", or "496 MiB" below 1 GiB (also negative); returns buf */
const char *gpp_job_size(char *buf, size_t len, int64_t bytes);

/* gpp_job_profile.c */
/* --plan auto with a checkpoint_dir: attaches the profile an earlier run
 * kept there when it was measured for this model, device, precision and
 * bf16 tensors. 1 attached; 0 none to use (the agents profile again); -1
 * it does not fit the model. */
int gpp_job_profile_kept(gpp_job_t *self, int reprofile, gpp_err_t *err);
/* Fills self->preq: the job's model, backend and precision, micro-batch
 * sizes 1, 2, 4 .. up to the batch (figures: [1]). */
void gpp_job_profile_request_init(gpp_job_t *self, int figures_only);
/* A cuda job without cluster.mem_gib: the cost model made again with the
 * smallest GPU memory the agents reported, shared among the agents on a
 * GPU. */
int gpp_job_profile_device_mem(gpp_job_t *self, gpp_registry_t *reg, gpp_err_t *err);
/* The agents that run on a's GPU (same host and GPU index), a among them. */
int gpp_job_gpu_sharers(gpp_registry_t *reg, const gpp_agent_t *a);

/* gpp_job_plan.c */
/* 1 when --plan names a plan file (.json), not a planner. */
int gpp_job_plan_is_file(const gpp_job_t *self);
/* Makes the plan (partitioner or file), schedules, simulates and prints
 * it, lays it out; gives up between the steps when cancel is set. -2 when
 * --resume's set was made with another plan (exit 2), else -1. */
int gpp_job_plan_make(gpp_job_t *self, const atomic_int *cancel, gpp_err_t *err);
/* The schedule the agents must run: the config's job.schedule (p NULL) or
 * plan file p's kind. 0 for 1f1b and auto (1f1b on cuda: s_schedules); else
 * -1 naming the setting and the ways out (the agents, and the cuda
 * backend's kernels, run no B and W passes). */
int gpp_job_plan_schedule_check(const gpp_job_t *self, const gpp_plan_t *p, gpp_err_t *err);
/* Each stage's predicted peak device memory for its lowered schedule. */
void gpp_job_plan_predict_mem(gpp_job_t *self);
/* The stage table and the simulated iteration time. */
void gpp_job_plan_print(const gpp_job_t *self, FILE *out);

/* gpp_job_assign.c */
/* Checks the agents in reg against the plan (memory, NCCL's one rank per
 * GPU), makes the Assignments once and validates them. */
int gpp_job_assign_make(gpp_job_t *self, gpp_registry_t *reg, gpp_err_t *err);
void gpp_job_assign_free(Gpp__Assignment *a);

/* gpp_job_recover.c */
/* Where a job starts (gpp_job_start_t): sets self->start. -1 with a
 * message for a directory that does not fit the request. */
int gpp_job_recover_start(gpp_job_t *self, gpp_job_start_t start, gpp_err_t *err);
/* --resume: the set's stage files are of this model, optimizer and one step. */
int gpp_job_recover_check_set(gpp_job_t *self, gpp_err_t *err);
/* --resume: the plan to run is the set's (or --replan re-shards). */
int gpp_job_recover_check_plan(gpp_job_t *self, gpp_err_t *err);
/* plan.json (and the agents' profile.json) beside the checkpoints. */
int gpp_job_recover_keep(gpp_job_t *self, gpp_err_t *err);

#endif
