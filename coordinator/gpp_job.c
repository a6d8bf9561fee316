/* gpp_job: see gpp_job.h. */
#include "coordinator/gpp_job.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/exec/gpp_ckpt_set.h"
#include "common/gpp_sha256.h"
#include "model/gpp_model.h"
#include "common/gpp_atomic_file.h"
#include "common/gpp_fault.h"
#include "common/gpp_fs.h"
#include "common/gpp_time.h"
#include "model/gpp_optable.h"
#include "coordinator/gpp_progress.h"
#include "planner/gpp_cluster_config.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_profile_io.h"
#include "proto/gpp_msg_profile.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "coordinator/gpp_timeline.h"

/* The plan's action types cross the wire by a cast (here into the assignment,
 * the agent's runner back): the planner and protobuf enums must stay equal. */
_Static_assert(GPP_ACT_FWD == (int)GPP__ACTION_TYPE__ACT_FWD, "action enum: FWD");
_Static_assert(GPP_ACT_BWD == (int)GPP__ACTION_TYPE__ACT_BWD, "action enum: BWD");
_Static_assert(GPP_ACT_SEND_ACT == (int)GPP__ACTION_TYPE__ACT_SEND_ACT, "action enum: SEND_ACT");
_Static_assert(GPP_ACT_RECV_ACT == (int)GPP__ACTION_TYPE__ACT_RECV_ACT, "action enum: RECV_ACT");
_Static_assert(GPP_ACT_SEND_GRAD == (int)GPP__ACTION_TYPE__ACT_SEND_GRAD, "action enum: SEND_GRAD");
_Static_assert(GPP_ACT_RECV_GRAD == (int)GPP__ACTION_TYPE__ACT_RECV_GRAD, "action enum: RECV_GRAD");
_Static_assert(GPP_ACT_ALLREDUCE == (int)GPP__ACTION_TYPE__ACT_ALLREDUCE, "action enum: ALLREDUCE");
_Static_assert(GPP_ACT_STEP == (int)GPP__ACTION_TYPE__ACT_STEP, "action enum: STEP");
_Static_assert(GPP_ACT__COUNT == GPP_ACT_STEP + 1, "action enum: a new type needs a proto value");

struct gpp_job_s {
    gpp_config_t cfg;      /* copy; nodes not used after new */
    char plan_arg[1024];   /* --plan as given */
    char plan_name[1024];  /* the planner or file that made the plan */
    FILE *out;             /* plan table */
    int profiling;         /* plan after the agents' profile */
    int figures;           /* a cuda job without a profile from its GPUs: plan after agent 0
                              reported its backend's memory figures (figures_only) */
    gpp_profile_t *prof;   /* the agents' profile or figures, as attached; kept (profile.json) */
    int kept;              /* --plan auto from <checkpoint_dir>/profile.json */
    gpp_cluster_t cluster; /* what the cost model was made from */
    int measured;          /* the cost model holds a profile (file, kept or the agents') */
    int defer;             /* cuda without cluster.mem_gib: plan once the agents reported
                              their GPUs' memory (s_device_mem) */
    char mem_source[512];  /* where the cost model's device memory came from, for the
                              error when no plan fits: the agents' GPU share, or the preset */
    int start;             /* --resume: iterations of the set resumed from; 0 fresh */
    int replan;            /* --replan: the set may be of another plan (re-sharded) */
    Gpp__ProfileRequest preq;
    int32_t *preq_mbs;
    gpp_graph_t *g;
    gpp_cost_t *cost;
    gpp_plan_t *plan;
    int n_agents;
    int used;  /* devices the plan uses: ranks 0..used-1 */
    int *sink; /* [n_stages] */
    /* [n_agents]: stage, replica and action count of each rank (-1, -1, 0 unused) */
    int *rank_stage, *rank_replica, *rank_actions;
    int64_t *mem_predicted; /* [n_stages]: a replica's peak device memory */
    char rdv_endpoint[512];
    char rdv_token[GPP_RDV_TOKEN_LEN + 1];
    char prefix[96];
    /* the last iteration's op digests (gpp_job_metrics_fn) */
    unsigned char (*digest)[GPP_SHA256_BYTES]; /* [g->n_ops] */
    int *has_digest;                           /* [g->n_ops] */
    /* what gpp_job_plan_fn hands out */
    Gpp__Assignment **assign; /* [n_agents] */
    /* gpp_job_trace: the traced iteration (the job's numbering), -1 none */
    int trace_iteration;
    gpp_timeline_t *timeline; /* made with the assignments */
    uint64_t trace_dropped;   /* action times refused (gpp_timeline_add) */
};

static void s_print_plan(const gpp_job_t *self, FILE *out);

/* 1 when the coordinator stopped the job (cancel may be NULL: never). */
static int s_cancelled(const atomic_int *cancel, gpp_err_t *err)
{
    if (!cancel || !atomic_load(cancel))
        return 0;
    gpp_err_set(err, "planning cancelled: the job was stopped");
    return 1;
}

/* Most micro-batches a replica of st holds at once as the agents run its
 * lowered actions: from its first RECV_ACT or FWD (the executor's begin)
 * to its BWD. */
static int s_stage_mbs(const gpp_stage_t *st)
{
    int most = 1;
    for (int r = 0; r < st->devices; r++) {
        const gpp_actions_t *rs = &st->replica[r];
        int hi = 0, live = 0;
        for (int j = 0; j < rs->n; j++)
            hi = rs->a[j].mb + 1 > hi ? rs->a[j].mb + 1 : hi;
        char *begun = gpp_xcalloc((size_t)hi + 1, 1);
        for (int j = 0; j < rs->n; j++) {
            const gpp_action_t *a = &rs->a[j];
            if (a->mb < 0)
                continue;
            if ((a->type == GPP_ACT_FWD || a->type == GPP_ACT_RECV_ACT) && !begun[a->mb]) {
                begun[a->mb] = 1;
                most = ++live > most ? live : most;
            } else if (a->type == GPP_ACT_BWD) {
                live--;
            }
        }
        free(begun);
    }
    return most;
}

/* Each stage's predicted peak device memory for its lowered schedule. */
static void s_predict_mem(gpp_job_t *self)
{
    const gpp_plan_t *p = self->plan;
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        /* the agents report the bf16 parameter copies with the backend's own
           buffers, which the table adds as measured: not twice */
        self->mem_predicted[s] = gpp_cost_stage_mem(self->cost, st->n_ops, st->ops, st->devices,
                                                    st->micro_batch, s_stage_mbs(st), p->batch) -
                                 gpp_cost_stage_param_copy_bytes(self->cost, st->n_ops, st->ops);
    }
}

/* Who runs what (gpp_progress_layout_t), which stages hold a loss op, and
 * each stage's predicted peak device memory for its lowered schedule. */
static void s_layout(gpp_job_t *self)
{
    const gpp_plan_t *p = self->plan;
    self->sink = gpp_xcalloc((size_t)p->n_stages, sizeof *self->sink);
    self->mem_predicted = gpp_xcalloc((size_t)p->n_stages, sizeof *self->mem_predicted);
    s_predict_mem(self);
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        for (int i = 0; i < st->n_ops; i++) {
            gpp_op_type_t t = self->g->ops[st->ops[i]].type;
            if (t == GPP_OP_LOSS_MSE || t == GPP_OP_LOSS_CE)
                self->sink[s] = 1;
        }
    }
    size_t n = (size_t)self->n_agents;
    self->rank_stage = gpp_xcalloc(n, sizeof *self->rank_stage);
    self->rank_replica = gpp_xcalloc(n, sizeof *self->rank_replica);
    self->rank_actions = gpp_xcalloc(n, sizeof *self->rank_actions);
    for (size_t r = 0; r < n; r++)
        self->rank_stage[r] = self->rank_replica[r] = -1;
    for (int s = 0; s < p->n_stages; s++)
        for (int r = 0; r < p->stages[s].devices; r++) {
            int rank = p->stages[s].first_device + r;
            self->rank_stage[rank] = s;
            self->rank_replica[rank] = r;
            self->rank_actions[rank] = p->stages[s].replica[r].n;
        }
}

/* Search progress, logged at most every S_SEARCH_LOG_MS once a search has
 * run that long (short searches stay quiet): the micro-batch sizes tried
 * and the best estimate so far. */
#define S_SEARCH_LOG_MS 1000.0
typedef struct {
    double start_ms, logged_ms;
    double best_ms; /* over both passes (graph pipeline, chain) */
    int n_found;
    char sizes[256]; /* "16 8 4" in the order tried */
} s_search_progress_t;

static void s_on_candidate(void *arg, int micro_batch, int depth, double est_ms, double best_ms)
{
    s_search_progress_t *sp = arg;
    char b[16];
    snprintf(b, sizeof b, " %d ", micro_batch);
    char padded[sizeof sp->sizes + 2];
    snprintf(padded, sizeof padded, " %s ", sp->sizes);
    if (!strstr(padded, b) && strlen(sp->sizes) + strlen(b) < sizeof sp->sizes)
        snprintf(sp->sizes + strlen(sp->sizes), sizeof sp->sizes - strlen(sp->sizes), "%s%d",
                 sp->sizes[0] ? " " : "", micro_batch);
    sp->n_found++;
    if (sp->n_found == 1 || best_ms < sp->best_ms)
        sp->best_ms = best_ms;
    double now = gpp_now_ms();
    if (now - sp->start_ms < S_SEARCH_LOG_MS || now - sp->logged_ms < S_SEARCH_LOG_MS)
        return;
    sp->logged_ms = now;
    gpp_info("planning: %.1f s, %d plans found, micro-batch sizes tried %s; latest b=%d depth %d "
             "%.3f ms, best so far %.3f ms",
             (now - sp->start_ms) / 1000.0, sp->n_found, sp->sizes, micro_batch, depth, est_ms,
             sp->best_ms);
}

/* The first difference between two plans in what the stage checkpoints
 * depend on (the ops of each stage, its devices and the micro-batches the
 * gradients are summed over): "" when none. */
static void s_plan_diff(const gpp_plan_t *a, const gpp_plan_t *b, char *out, size_t len)
{
    out[0] = 0;
    if (a->batch != b->batch || a->n_stages != b->n_stages) {
        snprintf(out, len, "batch %d in %d stages vs batch %d in %d stages", a->batch, a->n_stages,
                 b->batch, b->n_stages);
        return;
    }
    for (int s = 0; s < a->n_stages; s++) {
        const gpp_stage_t *x = &a->stages[s], *y = &b->stages[s];
        int same_ops = x->n_ops == y->n_ops;
        for (int i = 0; same_ops && i < x->n_ops; i++)
            same_ops = x->ops[i] == y->ops[i];
        if (!same_ops)
            snprintf(out, len, "stage %d has %d ops (%d..%d) vs %d ops (%d..%d)", s, x->n_ops,
                     x->ops[0], x->ops[x->n_ops - 1], y->n_ops, y->ops[0], y->ops[y->n_ops - 1]);
        else if (x->devices != y->devices || x->first_device != y->first_device)
            snprintf(out, len, "stage %d runs on devices %d+%d vs %d+%d", s, x->first_device,
                     x->devices, y->first_device, y->devices);
        else if (x->micro_batch != y->micro_batch || x->k != y->k)
            snprintf(out, len, "stage %d has micro-batch %d, k %d vs micro-batch %d, k %d", s,
                     x->micro_batch, x->k, y->micro_batch, y->k);
        if (out[0])
            return;
    }
}

/* "S stages on D devices: ops/devices/micro-batch per stage", for the
 * re-sharding line. */
static void s_plan_brief(const gpp_plan_t *p, char *out, size_t len)
{
    int used = 0;
    for (int s = 0; s < p->n_stages; s++)
        used += p->stages[s].devices;
    size_t n = (size_t)snprintf(out, len, "%d stage%s on %d device%s:", p->n_stages,
                                p->n_stages == 1 ? "" : "s", used, used == 1 ? "" : "s");
    for (int s = 0; s < p->n_stages && n < len; s++)
        n += (size_t)snprintf(out + n, len - n, " s%d=%d ops x%d mb%d", s, p->stages[s].n_ops,
                              p->stages[s].devices, p->stages[s].micro_batch);
}

/* --resume: the plan to run must be the plan of the set it resumes from
 * (another split or data-parallel degree sums gradients in another order,
 * so the run is no longer bit-identical to an uninterrupted one), unless
 * --replan asks for it: stage files are keyed by op, so any plan's stages
 * load any set (gpp_ckpt_load_files); only the batch must be the same. */
static int s_resume_plan_check(gpp_job_t *self, gpp_err_t *err)
{
    const char *dir = self->cfg.job.checkpoint_dir;
    char path[GPP_CONFIG_PATH + 64];
    gpp_ckpt_set_dir(path, sizeof path, dir, self->start);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/plan.json");
    gpp_plan_t *set_plan = gpp_plan_read_json(path, self->g, err);
    if (!set_plan)
        return gpp_err_prefix(err, "--resume: the plan of checkpoint set %d", self->start);
    char diff[256], from[1024], to[1024];
    s_plan_diff(self->plan, set_plan, diff, sizeof diff);
    s_plan_brief(set_plan, from, sizeof from);
    s_plan_brief(self->plan, to, sizeof to);
    int batch = set_plan->batch;
    gpp_plan_destroy(&set_plan);
    if (!diff[0])
        return 0;
    if (batch != self->plan->batch)
        return gpp_err_set(err,
                           "--resume: job.batch = %d in %s, but checkpoint set %d (%s) was "
                           "trained with batch %d; a resumed job keeps its batch (the data "
                           "order and the optimizer's steps depend on it): set job.batch = %d",
                           self->plan->batch, self->cfg.path, self->start, path, batch, batch);
    if (!self->replan)
        return gpp_err_set(err,
                           "--resume: the plan to run (--plan %s) differs from the plan of "
                           "checkpoint set %d (%s): %s; resume with --plan %s, add --replan to "
                           "re-shard the set to the new plan, or start the new plan in a new "
                           "job.checkpoint_dir",
                           self->plan_name, self->start, path, diff, path);
    if (self->out) {
        fprintf(self->out,
                "replan: the plan to run differs from checkpoint set %d's: %s\n"
                "replan: re-sharding checkpoint set %d from plan %s (%s) to plan %s (%s)\n",
                self->start, diff, self->start, path, from, self->plan_name, to);
        fflush(self->out);
    }
    return 0;
}

/* --resume: the set's stage files are of this model and optimizer and of
 * one iteration (their headers; the agents check every byte they load),
 * refused before any agent starts. */
static int s_resume_set_check(gpp_job_t *self, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    char **files = NULL;
    int n = gpp_ckpt_set_files(cfg->job.checkpoint_dir, self->start, &files, err), rc = -1;
    gpp_ckpt_header_t *h = gpp_xcalloc(n > 0 ? (size_t)n : 1, sizeof *h);
    static const char *const optim[] = {"sgd", "adamw"};
    for (int i = 0; i < n; i++) {
        if (gpp_ckpt_set_header(files[i], &h[i], err) < 0)
            goto done;
        if (strcmp(h[i].spec, self->g->spec) != 0) {
            gpp_err_set(err,
                        "--resume: checkpoint %s is of model '%s', but %s has job.model = "
                        "'%s'; set job.model to the checkpoint's model, or start the new model "
                        "in a new job.checkpoint_dir",
                        files[i], h[i].spec, cfg->path, self->g->spec);
            goto done;
        }
        if (h[i].optimizer != (uint32_t)cfg->job.optimizer) {
            gpp_err_set(err,
                        "--resume: checkpoint %s holds %s optimizer state, but %s has "
                        "job.optimizer = \"%s\"; set job.optimizer = \"%s\"",
                        files[i], h[i].optimizer < 2 ? optim[h[i].optimizer] : "unknown", cfg->path,
                        optim[cfg->job.optimizer],
                        h[i].optimizer < 2 ? optim[h[i].optimizer] : "?");
            goto done;
        }
        if (h[i].steps != h[0].steps) {
            gpp_err_set(err,
                        "--resume: checkpoint %s holds the state after %llu optimizer steps, "
                        "%s after %llu: the set mixes iterations; it is damaged, remove it "
                        "to resume from an older set",
                        files[i], (unsigned long long)h[i].steps, files[0],
                        (unsigned long long)h[0].steps);
            goto done;
        }
    }
    rc = n < 0 ? -1 : 0;
done:
    free(h);
    gpp_ckpt_set_files_free(&files);
    return rc;
}

/* Where a job starts: --resume continues from the newest complete set in
 * job.checkpoint_dir; a fresh start refuses a directory that already holds
 * a complete set (it would mix two runs' plans and sets); --resume=auto is
 * either, by what the directory holds. */
static int s_start_point(gpp_job_t *self, gpp_job_start_t start, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    const char *dir = cfg->job.checkpoint_dir;
    int resume = (start & GPP_JOB_RESUME) != 0;
    if (!dir[0] && (start & GPP_JOB_AUTO)) {
        gpp_info("coordinator: --resume=auto: no job.checkpoint_dir; starting fresh");
        return 0;
    }
    if (!dir[0])
        return resume ? gpp_err_set(err,
                                    "--resume: %s sets no job.checkpoint_dir, so there is no "
                                    "checkpoint set to resume from; start without --resume",
                                    cfg->path)
                      : 0;
    int latest = gpp_ckpt_set_latest(dir, err);
    if (latest < 0)
        return gpp_err_prefix(err, "%s: job.checkpoint_dir", cfg->path);
    if ((start & GPP_JOB_AUTO) && latest == 0) {
        gpp_info("coordinator: --resume=auto: no complete checkpoint set in %s; starting fresh",
                 dir);
        return 0;
    }
    if (!resume && latest > 0)
        return gpp_err_set(err,
                           "%s: job.checkpoint_dir %s holds checkpoint set %d of an earlier run; "
                           "continue that run with gpp-coordinator --resume %s, or set "
                           "job.checkpoint_dir to a new directory (nothing was changed)",
                           cfg->path, dir, latest, cfg->path);
    if (!resume)
        return 0;
    if (latest == 0)
        return gpp_err_set(err,
                           "--resume: job.checkpoint_dir %s (%s) holds no complete checkpoint "
                           "set; start without --resume",
                           dir, cfg->path);
    if (latest >= cfg->job.iterations)
        return gpp_err_set(err,
                           "--resume: checkpoint set %d in %s already has all %d iterations of "
                           "the job; raise job.iterations (or --iterations) to train further",
                           latest, dir, cfg->job.iterations);
    self->start = latest;
    self->replan = (start & GPP_JOB_REPLAN) != 0;
    gpp_info("coordinator: resuming from checkpoint set %d in %s: iterations %d..%d", latest, dir,
             latest + 1, cfg->job.iterations);
    return 0;
}

/* Makes the plan (partitioner or file), schedules and simulates it, prints
 * it and writes it beside the checkpoints. Gives up between the steps when
 * cancel (may be NULL) is set. */
/* bytes as "12.50 GiB", or "496 MiB" below 1 GiB (also negative) */
static const char *s_size(char *buf, size_t len, int64_t bytes)
{
    if (bytes >= ((int64_t)1 << 30) || bytes <= -((int64_t)1 << 30))
        snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
    else
        snprintf(buf, len, "%.0f MiB", (double)bytes / 1048576.0);
    return buf;
}

/* No plan fits: which bound the search had, where it came from, what the
 * least plan needs (min_mem, the partitioner's least bound) and the fix. */
static int s_no_fit(const gpp_job_t *self, int64_t min_mem, gpp_err_t *err)
{
    const gpp_cluster_t *cl = gpp_cost_cluster(self->cost);
    int64_t bound = gpp_cluster_mem_bound(cl);
    char b[32], m[32], d[32], r[32];
    if (cl->mem_bound_bytes > 0)
        return gpp_err_set(err,
                           "no plan fits cluster.mem_gib = %s per device: the smallest plan "
                           "needs %s on %d devices (batch %d); raise cluster.mem_gib, use more "
                           "devices or a smaller job.batch",
                           s_size(b, sizeof b, bound), s_size(m, sizeof m, min_mem), cl->n_devices,
                           self->cfg.job.batch);
    return gpp_err_set(err,
                       "no plan fits the device memory: %s per device (%s) less %s for the "
                       "runtime's context and workspaces leaves %s; the smallest plan needs %s "
                       "+ %s per device (%d devices, batch %d): use devices with more memory%s, "
                       "more devices, a smaller job.batch, or cluster.mem_gib",
                       s_size(d, sizeof d, cl->device.mem_bytes), self->mem_source,
                       s_size(r, sizeof r, GPP_CONTEXT_BYTES), s_size(b, sizeof b, bound),
                       s_size(m, sizeof m, min_mem), r, cl->n_devices, self->cfg.job.batch,
                       self->cfg.job.backend == GPP_DEVICE_CUDA
                           ? ", fewer agents per GPU (nodes.gpus)"
                           : "");
}

static int s_make_plan(gpp_job_t *self, const atomic_int *cancel, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    const char *plan = self->plan_arg;
    const char *which =
        strcmp(plan, "auto") == 0 ? (cfg->job.planner[0] ? cfg->job.planner : "gpp") : plan;
    size_t pl = strlen(which);
    if (pl > 5 && strcmp(which + pl - 5, ".json") == 0) {
        self->plan = gpp_plan_read_json(which, self->g, err);
        if (!self->plan)
            return -1;
        if (self->plan->batch != cfg->job.batch)
            return gpp_err_set(err, "plan %s is for batch %d, but %s has job.batch = %d", which,
                               self->plan->batch, cfg->path, cfg->job.batch);
    } else if (strcmp(which, "gpp") == 0 || strcmp(which, "spp") == 0) {
        gpp_part_opts_t o;
        gpp_part_opts_default(&o, cfg->job.batch);
        o.micro_batch = cfg->job.micro_batch;
        o.spp = which[0] == 's';
        /* measured tables that miss sizes the search asks for: say so */
        char note[512];
        if (gpp_cost_profile_note(self->cost, o.micro_batch ? o.micro_batch : o.batch, note,
                                  sizeof note))
            gpp_info("coordinator: plan: note: %s", note);
        s_search_progress_t sp = {.start_ms = gpp_now_ms()};
        o.on_candidate = s_on_candidate;
        o.on_candidate_arg = &sp;
        int64_t min_mem = 0;
        self->plan = gpp_part_run(self->g, self->cost, &o, &min_mem, err);
        if (!self->plan)
            return min_mem > 0 ? s_no_fit(self, min_mem, err) : -1;
        /* the partitioner may leave devices idle; the plan (C3) covers the
         * ones it uses, numbered from 0: their agents get no assignment */
        int used = 0;
        for (int s = 0; s < self->plan->n_stages; s++)
            used += self->plan->stages[s].devices;
        self->plan->n_devices = used;
        if (s_cancelled(cancel, err) || gpp_sched_build(self->plan, self->g, err) < 0)
            return -1;
    } else {
        return gpp_err_set(err, "--plan %s: use auto, gpp, spp or a gpp-plan/1 FILE.json", plan);
    }
    snprintf(self->plan_name, sizeof self->plan_name, "%s%s%s%s", which,
             strcmp(which, self->plan->planner) != 0 ? " (" : "",
             strcmp(which, self->plan->planner) != 0 ? self->plan->planner : "",
             strcmp(which, self->plan->planner) != 0 ? ")" : "");
    if (self->profiling || self->kept)
        snprintf(self->plan_name + strlen(self->plan_name),
                 sizeof self->plan_name - strlen(self->plan_name), "%s",
                 self->kept ? " (kept profile)" : " (agent profile)");
    for (int s = 0; s < self->plan->n_stages; s++)
        self->used += self->plan->stages[s].devices;
    if (self->used > self->n_agents)
        return gpp_err_set(err, "the plan uses %d devices, but %s has %d slots", self->used,
                           cfg->path, self->n_agents);
    if (s_cancelled(cancel, err))
        return -1;
    if (gpp_sim_plan(self->plan, self->g, self->cost, err) < 0)
        return gpp_err_prefix(err, "simulating the plan");
    s_layout(self);
    if (s_cancelled(cancel, err))
        return -1;
    if (self->out)
        s_print_plan(self, self->out);
    if (self->start > 0 && s_resume_plan_check(self, err) < 0)
        return -1;
    /* the checkpoint directory must take the plan (s_keep_plan writes it
       once the agents fit it): a directory that cannot is an error now,
       before any agent starts */
    const char *dir = self->cfg.job.checkpoint_dir;
    if (dir[0] && gpp_mkdirs(dir, 0700, err) < 0)
        return gpp_err_prefix(err, "job.checkpoint_dir");
    if (dir[0] && access(dir, W_OK | X_OK) < 0)
        return gpp_err_set(err, "job.checkpoint_dir: %s is not writable: %s", dir, strerror(errno));
    return 0;
}

int gpp_job_metrics_fn(void *arg, int rank, const Gpp__Metrics *m, gpp_err_t *err)
{
    gpp_job_t *self = arg;
    if (m->n_action_start_us > 0) { /* bad times cost the trace, not the iteration */
        gpp_err_t terr = {{0}};
        if (!self->timeline)
            gpp_err_set(&terr, "action times from rank %d, but no trace was asked for", rank);
        if (!self->timeline || gpp_timeline_add(self->timeline, rank, m, &terr) < 0) {
            self->trace_dropped++;
            gpp_warn("trace: dropped: %s", terr.msg);
        }
    }
    if (m->n_op_digests == 0)
        return 0;
    int n_ops = self->g->n_ops, stage = rank < self->n_agents ? self->rank_stage[rank] : -1;
    if (stage < 0 || self->rank_replica[rank] != 0)
        return gpp_err_set(err, "op digests from rank %d, not replica 0 of a stage", rank);
    const gpp_stage_t *st = &self->plan->stages[stage];
    for (size_t i = 0; i < m->n_op_digests; i++) {
        int op = m->op_digests[i]->op, mine = 0;
        for (int k = 0; k < st->n_ops && !mine; k++)
            mine = st->ops[k] == op;
        if (op >= n_ops || !mine)
            return gpp_err_set(err, "metrics.op_digests[%zu]: op %d is not an op of stage %d", i,
                               op, stage);
    }
    if (!self->digest) {
        self->digest = gpp_xcalloc((size_t)n_ops, sizeof *self->digest);
        self->has_digest = gpp_xcalloc((size_t)n_ops, sizeof *self->has_digest);
    }
    for (size_t i = 0; i < m->n_op_digests; i++) {
        memcpy(self->digest[m->op_digests[i]->op], m->op_digests[i]->sha256.data, GPP_SHA256_BYTES);
        self->has_digest[m->op_digests[i]->op] = 1;
    }
    return 0;
}

/* The weights digest when every op with parameters reported one. */
static int s_weights_digest(const gpp_job_t *self, char hex[GPP_SHA256_HEX])
{
    if (!self->digest)
        return 0;
    for (int op = 0; op < self->g->n_ops; op++)
        if (self->g->ops[op].params > 0 && !self->has_digest[op])
            return 0;
    unsigned char out[GPP_SHA256_BYTES];
    gpp_ckpt_weights_digest(self->g->n_ops, (const unsigned char(*)[GPP_SHA256_BYTES])self->digest,
                            self->has_digest, out);
    gpp_sha256_hex(out, hex);
    return 1;
}

int gpp_job_iteration_fn(void *arg, int done, gpp_err_t *err)
{
    gpp_job_t *self = arg;
    const gpp_config_t *c = &self->cfg;
    /* the agents saved after iteration done - 1 (gpp_pipeline_run) */
    int saved = done == c->job.iterations ||
                (c->job.checkpoint_interval > 0 && done % c->job.checkpoint_interval == 0);
    if (!c->job.checkpoint_dir[0] || !saved)
        return 0;
    if (gpp_ckpt_set_commit(c->job.checkpoint_dir, done, self->plan->n_stages,
                            c->job.checkpoint_keep, err) < 0)
        return -1;
    gpp_info("coordinator: checkpoint set %d committed in %s", done, c->job.checkpoint_dir);
    return 0;
}

/* "bf16", or "bf16 with bf16 tensors" when the agents keep them */
static void s_precision_desc(gpp_precision_t p, int bf16_tensors, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", gpp_precision_name(p), bf16_tensors ? " with bf16 tensors" : "");
}

/* --plan auto with a checkpoint_dir: plans from the profile a previous run
 * kept there (s_make_plan) when it was measured for this model on this
 * device at this precision, with or without bf16 tensors as this job. 1:
 * attached; 0: none to use (absent, --reprofile, measured otherwise: the
 * agents profile again); -1: the file does not fit the model. */
static int s_kept_profile(gpp_job_t *self, int reprofile, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    char path[GPP_CONFIG_PATH + 16];
    snprintf(path, sizeof path, "%s/profile.json", cfg->job.checkpoint_dir);
    if (access(path, F_OK) != 0)
        return 0;
    if (reprofile) {
        if (self->out)
            fprintf(self->out, "plan: --reprofile: not using %s; the agents profile again\n", path);
        return 0;
    }
    gpp_profile_t *kept = gpp_profile_io_read(path, err);
    if (!kept)
        return gpp_err_prefix(err, "kept profile (gpp-coordinator --reprofile measures a new one)");
    const gpp_profile_meta_t *m = &kept->meta;
    if (!m->present || !m->model[0] || !m->device[0] || m->n_ops < 0) {
        gpp_profile_destroy(&kept);
        return gpp_err_set(err,
                           "%s: field '%s' missing or not {\"model\": string, \"device\": "
                           "string, \"ops\": number}; gpp-coordinator --reprofile measures a "
                           "new one",
                           path, GPP_PROFILE_META);
    }
    /* measured as this job runs: the products' precision and whether the
       agents kept bf16 tensors (older files: fp32, no bf16 tensors) */
    char prec[32], job_prec[32];
    s_precision_desc(m->has_precision ? m->precision : GPP_PRECISION_FP32,
                     m->has_bf16_tensors && m->bf16_tensors, prec, sizeof prec);
    s_precision_desc(cfg->job.precision, gpp_config_bf16_tensors(cfg), job_prec, sizeof job_prec);
    if (strcmp(m->model, cfg->job.model) != 0 || strcmp(m->device, cfg->cluster.device) != 0 ||
        strcmp(prec, job_prec) != 0) {
        if (self->out)
            fprintf(self->out,
                    "plan: %s was measured for %s on %s in %s, this job is %s on %s in %s; the "
                    "agents profile again\n",
                    path, m->model, m->device, prec, cfg->job.model, cfg->cluster.device, job_prec);
        gpp_profile_destroy(&kept);
        return 0;
    }
    if (m->n_ops != self->g->n_ops) {
        gpp_err_set(err,
                    "%s: profile of %d ops, but model %s has %d; run gpp-coordinator "
                    "--reprofile to measure it again",
                    path, m->n_ops, self->g->spec, self->g->n_ops);
        gpp_profile_destroy(&kept);
        return -1;
    }
    int rc = gpp_cost_attach_profile(self->cost, kept, err);
    gpp_profile_destroy(&kept);
    if (rc < 0)
        return gpp_err_prefix(err, "kept profile does not match the model; run gpp-coordinator "
                                   "--reprofile to measure it again");
    if (self->out)
        fprintf(self->out,
                "plan: auto, from the profile kept in %s (not profiling again; "
                "gpp-coordinator --reprofile measures a new one)\n",
                path);
    return 1;
}

/* 1 when --plan names a plan file (.json), not a planner. */
static int s_plan_file(const gpp_job_t *self)
{
    size_t pl = strlen(self->plan_arg);
    return pl > 5 && strcmp(self->plan_arg + pl - 5, ".json") == 0;
}

/* 1 when the search should wait for the agents: a cuda job that searches
 * (not a plan file) takes their GPUs' memory (without cluster.mem_gib) and
 * agent 0's memory figures (without a GPU profile). A plan file is read at
 * once; its prediction takes the figures later. */
static int s_defer(const gpp_job_t *self)
{
    return self->cfg.job.backend == GPP_DEVICE_CUDA && !s_plan_file(self) &&
           (self->cfg.cluster.mem_gib <= 0 || self->figures);
}

/* Plans with the smallest GPU memory the agents reported, divided among
 * the agents that share a GPU (same host and GPU index), in place of the
 * preset's figure: the cost model is made again with that memory and the
 * profile it held. Logs which figure the plan uses. */
/* The agents that run on a's GPU (same host and GPU index), a among them. */
static int s_gpu_sharers(gpp_registry_t *reg, const gpp_agent_t *a)
{
    int share = 0;
    for (int q = 0; q < gpp_registry_size(reg); q++) {
        const gpp_agent_t *b = gpp_registry_agent(reg, q);
        share += b->gpu == a->gpu && strcmp(b->host, a->host) == 0;
    }
    return share > 0 ? share : 1;
}

static int s_device_mem(gpp_job_t *self, gpp_registry_t *reg, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    const int n = gpp_registry_size(reg);
    int64_t least = 0;
    int least_rank = -1, least_share = 1;
    for (int r = 0; r < n; r++) {
        const gpp_agent_t *a = gpp_registry_agent(reg, r);
        int share = s_gpu_sharers(reg, a);
        int64_t m = a->mem_total_bytes / share;
        if (a->gpu >= 0 && (least_rank < 0 || m < least)) {
            least = m;
            least_rank = r;
            least_share = share;
        }
    }
    if (least_rank < 0) /* no GPU agents: the coordinator refused them already */
        return gpp_err_set(err, "no agent reported a GPU");
    gpp_cluster_t cl = self->cluster;
    cl.device.mem_bytes = least;
    gpp_cost_t *cost = gpp_cost_clone(self->cost, &cl); /* the same measurements */
    gpp_cost_destroy(&self->cost);
    self->cost = cost;
    const gpp_agent_t *a = gpp_registry_agent(reg, least_rank);
    char who[GPP_REG_HOST_MAX + 64];
    char tot[32];
    snprintf(self->mem_source, sizeof self->mem_source,
             "the smallest the agents reported: %s, GPU %d %s, %s%s",
             gpp_agent_name(a, who, sizeof who), a->gpu, a->device_name,
             s_size(tot, sizeof tot, a->mem_total_bytes),
             least_share > 1 ? ", shared by the agents on that GPU" : "");
    gpp_info("coordinator: plan: device memory %.2f GiB per agent, %s; not the %s preset's",
             (double)least / 1073741824.0, self->mem_source, cfg->cluster.device);
    return 0;
}

gpp_job_t *gpp_job_new(const gpp_config_t *cfg, const char *plan, int reprofile,
                       gpp_job_start_t resume, FILE *out, gpp_err_t *err)
{
    assert(cfg && plan);
    gpp_job_t *self = gpp_xcalloc(1, sizeof *self);
    self->trace_iteration = -1;
    self->cfg = *cfg;
    self->cfg.nodes = NULL;
    self->out = out;
    snprintf(self->plan_arg, sizeof self->plan_arg, "%s", plan);
    self->n_agents = gpp_config_devices(cfg);
    /* resume or fresh start: refused before anything in the directory changes */
    if (s_start_point(self, resume, err) < 0)
        goto fail;
    /* what a save killed midway left behind (gpp_ckpt_set.h) */
    if (cfg->job.checkpoint_dir[0] && gpp_ckpt_set_clean(cfg->job.checkpoint_dir, err) < 0) {
        gpp_err_prefix(err, "%s: job.checkpoint_dir", cfg->path);
        goto fail;
    }
    /* job.iterations sizes the coordinator's progress tables: refused here,
     * before any agent starts, when they cannot fit this machine's memory */
    double need = gpp_progress_table_bytes(self->n_agents, cfg->job.iterations);
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have) {
        gpp_err_set(err,
                    "%s: job.iterations = %d: the coordinator keeps a progress record per "
                    "iteration and agent, %.1f GiB for %d agents, more than this machine's "
                    "%.1f GiB of memory; lower job.iterations (or --iterations)",
                    cfg->path, cfg->job.iterations, need / 1073741824.0, self->n_agents,
                    have / 1073741824.0);
        goto fail;
    }
    if (!cfg->job.model[0]) {
        gpp_err_set(err,
                    "%s: job.model: not set; name a zoo model (\"mmt:branches=2\") or a "
                    "graph JSON file",
                    cfg->path);
        goto fail;
    }
    self->g = gpp_model_load(cfg->job.model, err);
    if (!self->g) {
        gpp_err_prefix(err, "%s: job.model", cfg->path);
        goto fail;
    }
    if (self->start > 0 && s_resume_set_check(self, err) < 0)
        goto fail;
    gpp_cluster_t cl;
    if (gpp_cluster_from_config(cfg, self->n_agents, &cl, err) < 0)
        goto fail;
    self->cluster = cl;
    snprintf(self->mem_source, sizeof self->mem_source, "the %s preset's", cl.device.name);
    self->cost = gpp_cost_new(self->g, &cl);
    if (cfg->cluster.profile[0]) {
        gpp_profile_t *p = gpp_profile_io_read(cfg->cluster.profile, err);
        int rc = p ? gpp_cost_attach_profile(self->cost, p, err) : -1;
        gpp_profile_destroy(&p);
        if (rc < 0)
            goto fail;
    }
    self->measured = cfg->cluster.profile[0] != 0;
    snprintf(self->prefix, sizeof self->prefix, "gpp-%d-%lld/", (int)getpid(),
             (long long)time(NULL));
    /* --plan auto without a measured profile: the agents measure one first */
    self->profiling = strcmp(plan, "auto") == 0 && !cfg->cluster.profile[0];
    if (self->profiling && cfg->job.checkpoint_dir[0]) {
        int kept = s_kept_profile(self, reprofile, err);
        if (kept < 0)
            goto fail;
        self->kept = kept;
        self->measured |= kept;
        self->profiling = !kept;
    }
    /* a cuda job without a profile from its GPUs: CUDA's attention keeps and
       asks its own layouts, not the op table's, so agent 0 reports its
       backend's figures (no timing) before the plan is made, or a plan file's
       memory predicted */
    self->figures =
        !self->profiling && !self->measured && cfg->job.backend == GPP_DEVICE_CUDA;
    if (self->profiling || self->figures) {
        gpp__profile_request__init(&self->preq);
        self->preq.model = self->cfg.job.model;
        /* measured where the job trains: a cuda job's agent 0 times the ops
         * on its GPU (CUDA events) at the job's precision, or gives their
         * figures there */
        self->preq.backend = gpp_msg_backend(cfg->job.backend);
        self->preq.precision = gpp_msg_precision(cfg->job.precision);
        self->preq.bf16_tensors = gpp_config_bf16_tensors(cfg);
        /* powers of two up to the batch and to 2^24, the largest
         * micro-batch a profile table holds (gpp_cost_attach_rows); int64:
         * doubling past a batch near INT_MAX must not overflow (it used to
         * wrap and loop forever); the figures: [1] */
        int n = 0;
        for (int64_t b = 1; b <= cfg->job.batch && b <= 1 << 24; b *= 2)
            n++;
        n = self->figures ? 1 : n;
        self->preq_mbs = gpp_xcalloc((size_t)n, sizeof *self->preq_mbs);
        for (int i = 0; i < n; i++)
            self->preq_mbs[i] = (int32_t)1 << i;
        self->preq.n_micro_batches = (size_t)n;
        self->preq.micro_batches = self->preq_mbs;
        self->preq.iterations = self->figures ? 1 : 3;
        self->preq.figures_only = self->figures;
    }
    if (self->profiling) {
        if (self->out)
            fprintf(self->out,
                    "plan: auto, after the agents profile %s at micro-batch 1, 2, 4 .. up to "
                    "%d (as far as a few seconds allow)\n",
                    self->g->spec, self->preq_mbs[self->preq.n_micro_batches - 1]);
    } else if (!(self->defer = s_defer(self)) && s_make_plan(self, NULL, err) < 0) {
        goto fail;
    }
    if (self->defer && self->out)
        fprintf(self->out, "plan: once the agents have reported their GPUs' memory\n");
    return self;
fail:
    gpp_job_destroy(&self);
    return NULL;
}

const Gpp__ProfileRequest *gpp_job_profile_request(const gpp_job_t *self)
{
    return self->profiling || self->figures ? &self->preq : NULL;
}

int gpp_job_profile_fn(void *arg, const Gpp__ProfileResult *res, gpp_err_t *err)
{
    gpp_job_t *self = arg;
    const gpp_config_t *cfg = &self->cfg;
    gpp_profile_row_t *rows = gpp_msg_profile_rows(res);
    gpp_profile_t *p = gpp_profile_of_graph(
        self->g, rows, res->n_ops,
        self->figures ? "agent 0's memory figures" : "the agents' profile", err);
    free(rows);
    if (!p)
        return -1;
    /* what was measured where: the GPU's own name; the job's precision */
    gpp_profile_meta_t *m = &p->meta;
    m->present = 1;
    snprintf(m->model, sizeof m->model, "%s", cfg->job.model);
    snprintf(m->device, sizeof m->device, "%s",
             res->device_name && res->device_name[0] ? res->device_name : "");
    m->n_ops = self->g->n_ops;
    m->has_precision = 1;
    m->precision = cfg->job.precision;
    m->has_bf16_tensors = 1;
    m->bf16_tensors = gpp_config_bf16_tensors(cfg);
    /* memory figures (no times), or the times kept in <checkpoint_dir>/profile.json */
    int rc = self->figures ? gpp_cost_attach_figures(self->cost, p, err)
                           : gpp_cost_attach_profile(self->cost, p, err);
    if (rc < 0) {
        gpp_profile_destroy(&p);
        return -1;
    }
    gpp_profile_destroy(&self->prof);
    self->prof = p;
    if (self->figures && self->plan)
        s_predict_mem(self); /* a plan file's */
    self->measured |= !self->figures;
    return 0;
}

static void s_free_assignment(Gpp__Assignment *a)
{
    if (!a)
        return;
    free(a->ops);
    for (size_t i = 0; i < a->n_actions; i++)
        free(a->actions[i]);
    free(a->actions);
    for (size_t i = 0; i < a->n_edges; i++) {
        Gpp__Edge *e = a->edges[i];
        free(e->tensors);
        for (size_t j = 0; j < e->n_replicas; j++)
            free(e->replicas[j]);
        free(e->replicas);
        free(e);
    }
    free(a->edges);
    free(a->dp_ranks);
    free(a->comm_order);
    free(a->comm);
    free(a->hyper);
    free(a);
}

void gpp_job_destroy(gpp_job_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_job_t *self = *self_p;
    if (self->assign)
        for (int r = 0; r < self->n_agents; r++)
            s_free_assignment(self->assign[r]);
    free(self->assign);
    free(self->preq_mbs);
    gpp_profile_destroy(&self->prof);
    free(self->sink);
    free(self->digest);
    free(self->has_digest);
    free(self->rank_stage);
    free(self->rank_replica);
    free(self->rank_actions);
    free(self->mem_predicted);
    gpp_timeline_destroy(&self->timeline);
    gpp_plan_destroy(&self->plan);
    gpp_cost_destroy(&self->cost);
    gpp_graph_destroy(&self->g);
    free(self);
    *self_p = NULL;
}

/* Producer op ids of the tensors on edge from -> to (ascending, unique). */
static int s_edge_tensors(const gpp_job_t *self, int from, int to, int32_t **out)
{
    const gpp_plan_t *p = self->plan;
    const gpp_stage_t *src = &p->stages[from];
    int n = 0;
    int32_t *t = gpp_xcalloc((size_t)src->n_ops, sizeof *t);
    for (int i = 0; i < src->n_ops; i++) {
        const gpp_op_t *op = &self->g->ops[src->ops[i]];
        for (int j = 0; j < op->n_outputs; j++)
            if (p->stage_of_op[op->outputs[j]] == to) {
                t[n++] = op->id;
                break;
            }
    }
    if (n == 0 && p->chain) /* a chain edge no tensor flows on: the dependency */
        t[n++] = GPP_DEP_TENSOR;
    *out = t;
    return n;
}

static Gpp__Edge *s_edge(const gpp_job_t *self, int s, int peer, int downstream)
{
    Gpp__Edge *e = gpp_xcalloc(1, sizeof *e);
    gpp__edge__init(e);
    e->peer_stage = peer;
    e->downstream = downstream;
    int32_t *t;
    e->n_tensors = (size_t)s_edge_tensors(self, downstream ? s : peer, downstream ? peer : s, &t);
    e->tensors = t;
    const gpp_stage_t *ps = &self->plan->stages[peer];
    e->n_replicas = (size_t)ps->devices;
    e->replicas = gpp_xcalloc(e->n_replicas, sizeof *e->replicas);
    for (int r = 0; r < ps->devices; r++) {
        Gpp__PeerReplica *pr = gpp_xcalloc(1, sizeof *pr);
        gpp__peer_replica__init(pr);
        pr->replica = r;
        pr->rank = ps->first_device + r;
        pr->address = (char *)"";
        e->replicas[r] = pr;
    }
    return e;
}

static Gpp__Assignment *s_assignment(gpp_job_t *self, int s, int r)
{
    const gpp_plan_t *p = self->plan;
    const gpp_stage_t *st = &p->stages[s];
    const gpp_config_t *c = &self->cfg;
    Gpp__Assignment *a = gpp_xcalloc(1, sizeof *a);
    gpp__assignment__init(a);
    a->model = self->cfg.job.model;
    a->stage = s;
    a->n_stages = p->n_stages;
    a->replica = r;
    a->replicas = st->devices;
    a->n_ops = (size_t)st->n_ops;
    a->ops = gpp_xcalloc(a->n_ops, sizeof *a->ops);
    for (int i = 0; i < st->n_ops; i++)
        a->ops[i] = st->ops[i];
    a->micro_batch = st->micro_batch;
    a->k = st->k;
    a->batch = p->batch;
    const gpp_actions_t *acts = &st->replica[r];
    a->n_actions = (size_t)acts->n;
    a->actions = gpp_xcalloc(a->n_actions ? a->n_actions : 1, sizeof *a->actions);
    for (int i = 0; i < acts->n; i++) {
        const gpp_action_t *x = &acts->a[i];
        Gpp__Action *y = gpp_xcalloc(1, sizeof *y);
        gpp__action__init(y);
        y->type = (Gpp__ActionType)x->type;
        y->mb = x->mb;
        y->peer_stage = x->peer_stage;
        y->peer_replica = x->peer_replica;
        y->tensor = x->tensor;
        y->lo = x->lo;
        y->hi = x->hi;
        a->actions[i] = y;
    }
    a->n_edges = (size_t)(st->n_succ + st->n_pred);
    a->edges = gpp_xcalloc(a->n_edges ? a->n_edges : 1, sizeof *a->edges);
    size_t e = 0;
    for (int i = 0; i < st->n_pred; i++)
        a->edges[e++] = s_edge(self, s, st->pred[i], 0);
    for (int i = 0; i < st->n_succ; i++)
        a->edges[e++] = s_edge(self, s, st->succ[i], 1);
    a->n_dp_ranks = (size_t)st->devices;
    a->dp_ranks = gpp_xcalloc(a->n_dp_ranks, sizeof *a->dp_ranks);
    for (int i = 0; i < st->devices; i++)
        a->dp_ranks[i] = st->first_device + i;
    a->comm = gpp_xcalloc(1, sizeof *a->comm);
    gpp__comm_bootstrap__init(a->comm);
    a->comm->rdv_endpoint = self->rdv_endpoint;
    a->comm->rdv_token = self->rdv_token;
    a->comm->prefix = self->prefix;
    a->comm->world_size = self->used;
    a->comm->backend = (char *)gpp_config_comm_name(self->cfg.job.comm);
    a->comm->rank = st->first_device + r;
    a->hyper = gpp_xcalloc(1, sizeof *a->hyper);
    gpp__hyper_params__init(a->hyper);
    a->hyper->optimizer = gpp_msg_optimizer(c->job.optimizer);
    a->hyper->lr = c->job.lr;
    a->hyper->momentum = c->job.momentum;
    a->hyper->weight_decay = c->job.weight_decay;
    a->hyper->beta1 = c->job.beta1;
    a->hyper->beta2 = c->job.beta2;
    a->hyper->eps = c->job.eps;
    a->iterations = c->job.iterations;
    a->seed = c->job.seed;
    a->checkpoint_dir = self->cfg.job.checkpoint_dir;
    a->data = self->cfg.job.data;
    a->checkpoint_interval = c->job.checkpoint_interval;
    a->start_iteration = self->start;
    a->backend = gpp_msg_backend(c->job.backend);
    a->precision = gpp_msg_precision(c->job.precision);
    a->cuda_graphs = c->job.backend == GPP_DEVICE_CUDA && c->job.cuda_graphs;
    a->bf16_tensors = gpp_config_bf16_tensors(c);
    a->trace = self->trace_iteration >= 0;
    a->trace_iteration = a->trace ? self->trace_iteration - self->start : 0;
    return a;
}

/* The plan beside the stage checkpoints (what they are checkpoints of) and
 * the profile it was planned from (so a restart plans the same): written
 * once the agents are known to fit the plan, so that a refused job leaves
 * the checkpoint directory as it was. */
static int s_keep_plan(gpp_job_t *self, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    if (!cfg->job.checkpoint_dir[0])
        return 0;
    char path[GPP_CONFIG_PATH + 16];
    if (gpp_mkdirs(cfg->job.checkpoint_dir, 0700, err) < 0)
        return gpp_err_prefix(err, "job.checkpoint_dir");
    snprintf(path, sizeof path, "%s/plan.json", cfg->job.checkpoint_dir);
    if (gpp_plan_write_json(self->plan, path, err) < 0)
        return gpp_err_prefix(err, "job.checkpoint_dir");
    if (self->profiling && self->prof) {
        /* the record names the cluster's preset, which the next start
           compares (s_kept_profile) */
        snprintf(path, sizeof path, "%s/profile.json", cfg->job.checkpoint_dir);
        snprintf(self->prof->meta.device, sizeof self->prof->meta.device, "%s",
                 cfg->cluster.device);
        if (gpp_profile_io_write(self->prof, path, err) < 0)
            return gpp_err_prefix(err, "job.checkpoint_dir");
    }
    return 0;
}

int gpp_job_plan_fn(void *arg, gpp_registry_t *reg, const atomic_int *cancel, gpp_coord_job_t *job,
                    gpp_err_t *err)
{
    gpp_job_t *self = arg;
    int n = gpp_registry_size(reg);
    assert(n == self->n_agents);
    if (!job->rdv_endpoint || !job->rdv_token)
        return gpp_err_set(err, "the coordinator gave no rendezvous endpoint and token");
    snprintf(self->rdv_endpoint, sizeof self->rdv_endpoint, "%s", job->rdv_endpoint);
    snprintf(self->rdv_token, sizeof self->rdv_token, "%s", job->rdv_token);
    const int64_t slow_ms = gpp_fault_arg(GPP_FAULT_PLAN_SLOW); /* -1: unarmed */
    for (int64_t t = 0; t < slow_ms; t += 10) {
        if (s_cancelled(cancel, err))
            return -1;
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    }
    /* --plan auto with the agents' profile, or a cuda job planned with the
     * agents' device memory: the plan is made here */
    if (!self->plan && self->cfg.job.backend == GPP_DEVICE_CUDA &&
        self->cfg.cluster.mem_gib <= 0 && s_device_mem(self, reg, err) < 0)
        return -1;
    if (!self->plan && s_make_plan(self, cancel, err) < 0)
        return -1;
    const gpp_plan_t *p = self->plan;
    /* NCCL refuses two ranks on one GPU: with comm = nccl, one GPU each */
    for (int i = 0; self->cfg.job.comm == GPP_CONFIG_COMM_NCCL && i < n; i++)
        for (int j = i + 1; j < n; j++) {
            gpp_agent_t *a = gpp_registry_agent(reg, i), *b = gpp_registry_agent(reg, j);
            if (a->gpu >= 0 && a->gpu == b->gpu && strcmp(a->host, b->host) == 0) {
                char na[GPP_REG_HOST_MAX + 64], nb[GPP_REG_HOST_MAX + 64];
                return gpp_err_set(err,
                                   "agents %s and %s share GPU %d on host %s, but job.comm = "
                                   "\"nccl\" (NCCL refuses two ranks on one GPU); give every "
                                   "agent a GPU of its own, or set comm = \"gloo\"",
                                   gpp_agent_name(a, na, sizeof na),
                                   gpp_agent_name(b, nb, sizeof nb), a->gpu, a->host);
            }
        }
    /* every agent that gets a stage must have the memory the plan counts
       on: what it offers, and on a GPU its share of the GPU's memory */
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        for (int r = 0; r < st->devices; r++) {
            gpp_agent_t *a = gpp_registry_agent(reg, st->first_device + r);
            char who[GPP_REG_HOST_MAX + 64], need[32], has[32], tot[32], ctx[32];
            gpp_agent_name(a, who, sizeof who);
            s_size(need, sizeof need, st->mem_bytes);
            if (a->mem_bytes < st->mem_bytes)
                return gpp_err_set(err, "agent %s offers %s, but stage %d needs %s", who,
                                   s_size(has, sizeof has, a->mem_bytes), s, need);
            if (a->gpu < 0)
                continue;
            int share = s_gpu_sharers(reg, a);
            int64_t avail = a->mem_total_bytes / share;
            s_size(has, sizeof has, avail);
            s_size(tot, sizeof tot, a->mem_total_bytes);
            if (avail < st->mem_bytes)
                return gpp_err_set(err,
                                   "stage %d needs %s of device memory, but agent %s has %s: "
                                   "GPU %d (%s, %s) on host %s is shared by %d agents; give "
                                   "each agent more GPU memory (fewer agents per GPU: "
                                   "nodes.gpus), or plan for it (--plan gpp)",
                                   s, need, who, has, a->gpu, a->device_name, tot, a->host, share);
            if (avail - st->mem_bytes < GPP_CONTEXT_BYTES)
                gpp_warn("coordinator: stage %d needs %s of device memory and agent %s has %s "
                         "(GPU %d, %s, shared by %d): less than the %s the planner keeps for "
                         "the CUDA context and library workspaces is left; it may run out",
                         s, need, who, has, a->gpu, tot, share,
                         s_size(ctx, sizeof ctx, GPP_CONTEXT_BYTES));
        }
    }
    if (!self->assign && s_keep_plan(self, err) < 0)
        return -1;
    if (self->trace_iteration >= 0 && !self->timeline)
        self->timeline = gpp_timeline_new(p, self->trace_iteration - self->start);
    if (!self->assign) {
        /* the order blocking communication streams run the transfers in
           (Assignment.comm_order) */
        gpp_sched_links_t *k = gpp_sched_links_new(p, err);
        gpp_sched_order_t *o = k ? gpp_sched_order_new(p, k, err) : NULL;
        if (!o) {
            gpp_sched_links_destroy(&k);
            return gpp_err_prefix(err, "plan's communication order");
        }
        self->assign = gpp_xcalloc((size_t)n, sizeof *self->assign);
        for (int s = 0; s < p->n_stages; s++)
            for (int r = 0; r < p->stages[s].devices; r++) {
                Gpp__Assignment *a = s_assignment(self, s, r);
                int li = k->list_base[s] + r;
                a->n_comm_order = (size_t)(o->seq_base[li + 1] - o->seq_base[li]);
                a->comm_order = gpp_xcalloc(a->n_comm_order + 1, sizeof *a->comm_order);
                for (size_t j = 0; j < a->n_comm_order; j++)
                    a->comm_order[j] = o->seq[o->seq_base[li] + (int)j] - k->act_base[li];
                self->assign[p->stages[s].first_device + r] = a;
            }
        gpp_sched_order_destroy(&o);
        gpp_sched_links_destroy(&k);
    }
    /* validate what we are about to send, as the agents will */
    for (int r = 0; r < n; r++) {
        if (!self->assign[r])
            continue;
        gpp_msg_t m;
        gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_ASSIGNMENT, self->assign[r]);
        if (gpp_msg_validate(&m, err) < 0)
            return gpp_err_prefix(err, "assignment of rank %d", r);
    }
    job->assign = self->assign;
    job->layout = (gpp_progress_layout_t){.n_agents = n,
                                          .n_stages = p->n_stages,
                                          .stage_of_rank = self->rank_stage,
                                          .replica_of_rank = self->rank_replica,
                                          .n_actions_of_rank = self->rank_actions,
                                          .sink_stage = self->sink,
                                          .mem_predicted_bytes = self->mem_predicted,
                                          .iterations = self->cfg.job.iterations - self->start,
                                          .batch = p->batch,
                                          .start_iteration = self->start};
    return 0;
}

/* The stage table (ops, devices, micro-batch, k, in-flight, agents) and
 * the simulated iteration time. */
static void s_print_plan(const gpp_job_t *self, FILE *out)
{
    const gpp_plan_t *p = self->plan;
    fprintf(out, "plan %s for %s: %d stage%s, depth %d, %d of %d devices, batch %d\n",
            self->plan_name, self->g->spec, p->n_stages, p->n_stages == 1 ? "" : "s", p->depth,
            self->used, self->n_agents, p->batch);
    fprintf(out, "  stage  ops                 agents  micro-batch  k  in-flight  succ\n");
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        char ops[64], succ[64], ag[32];
        snprintf(ops, sizeof ops, "%d ops (%s..%s)", st->n_ops, self->g->ops[st->ops[0]].name,
                 self->g->ops[st->ops[st->n_ops - 1]].name);
        if (strlen(ops) > 19)
            snprintf(ops, sizeof ops, "%d ops (%d..%d)", st->n_ops, st->ops[0],
                     st->ops[st->n_ops - 1]);
        size_t off = 0;
        succ[0] = 0;
        for (int i = 0; i < st->n_succ && off < sizeof succ; i++)
            off +=
                (size_t)snprintf(succ + off, sizeof succ - off, "%s%d", i ? "," : "", st->succ[i]);
        if (st->devices == 1)
            snprintf(ag, sizeof ag, "%d", st->first_device);
        else
            snprintf(ag, sizeof ag, "%d-%d", st->first_device, st->first_device + st->devices - 1);
        fprintf(out, "  %5d  %-19s %-7s %11d  %d  %9d  %s\n", s, ops, ag, st->micro_batch, st->k,
                st->inflight, st->n_succ ? succ : "-");
    }
    fprintf(out, "  simulated iteration %.3f ms (%.1f samples/s)\n", p->iteration_ms,
            p->throughput);
    fflush(out);
}

int gpp_job_print_summary(const gpp_job_t *self, const gpp_progress_t *progress, FILE *out)
{
    int rc = 0;
    gpp_progress_summary_t s;
    gpp_progress_summary(progress, &s);
    const gpp_plan_t *p = self->plan;
    if (self->start > 0)
        fprintf(out, "summary: %d iterations (%d..%d, resumed from checkpoint set %d)\n",
                s.iterations_done, self->start + 1, self->start + s.iterations_done, self->start);
    else
        fprintf(out, "summary: %d iterations\n", s.iterations_done);
    s_print_plan(self, out);
    if (s.iterations_done == 0) {
        fflush(out);
        return 0;
    }
    fprintf(out, "  loss %.6f -> %.6f\n", s.loss_first, s.loss_last);
    fprintf(out, "  measured  %.3f ms/iteration, %.1f samples/s\n", s.iteration_ms,
            s.samples_per_s);
    fprintf(out, "  simulated %.3f ms/iteration, %.1f samples/s (measured/simulated %.2f)\n",
            p->iteration_ms, p->throughput,
            p->iteration_ms > 0 ? s.iteration_ms / p->iteration_ms : NAN);
    /* a replica's peak device memory: the op table's model of the executor
       for the stage's schedule vs the backend's high-water mark */
    fprintf(out, "  memory  stage  predicted MiB  measured MiB  error %%\n");
    for (int st = 0; st < p->n_stages; st++) {
        int64_t pred = gpp_progress_stage_mem_predicted(progress, st);
        int64_t meas = gpp_progress_stage_mem(progress, st);
        fprintf(out, "          %5d  %13.3f  %12.3f  %+7.2f\n", st, (double)pred / 1048576.0,
                (double)meas / 1048576.0,
                meas > 0 ? 100.0 * (double)(pred - meas) / (double)meas : NAN);
    }
    char hex[GPP_SHA256_HEX];
    if (self->start + s.iterations_done == self->cfg.job.iterations &&
        s_weights_digest(self, hex)) {
        fprintf(out, "weights sha256 %s\n", hex);
        fflush(out);
        const char *path = self->cfg.metrics.file;
        char line[GPP_SHA256_HEX + 32];
        snprintf(line, sizeof line, "{\"weights_sha256\":\"%s\"}\n", hex);
        int fd = path[0] ? gpp_append_open(path, 0) : -1;
        if (path[0] && (fd < 0 || gpp_append_whole(fd, line, strlen(line)) < 0)) {
            gpp_error("metrics file %s: cannot append the weights digest: %s; the digest is the "
                      "\"weights sha256\" line above",
                      path, strerror(errno));
            rc = -1;
        }
        if (fd >= 0)
            close(fd);
    }
    fflush(out);
    return rc;
}

int gpp_job_trace(gpp_job_t *self, int iteration, gpp_err_t *err)
{
    int last = self->cfg.job.iterations - 1;
    if (iteration < 0)
        iteration = last;
    if (iteration < self->start || iteration > last)
        return gpp_err_set(err, "--trace-iteration %d: this run trains iterations %d..%d",
                           iteration, self->start, last);
    self->trace_iteration = iteration;
    return 0;
}

int gpp_job_write_trace(const gpp_job_t *self, gpp_registry_t *reg, const char *path, FILE *out,
                        gpp_err_t *err)
{
    if (!self->timeline)
        return gpp_err_set(err, "trace %s: no plan was made, nothing to trace", path);
    if (self->trace_dropped)
        gpp_warn("trace: %llu malformed action-time reports dropped",
                 (unsigned long long)self->trace_dropped);
    int n = self->plan->n_devices;
    gpp_clock_est_t *clocks = gpp_xcalloc((size_t)n + 1, sizeof *clocks);
    for (int r = 0; r < n && r < gpp_registry_size(reg); r++) {
        clocks[r] = gpp_registry_agent(reg, r)->clock;
        if (clocks[r].samples == 0)
            gpp_warn("trace: no heartbeat round trip with rank %d: its times are taken as on the "
                     "coordinator's clock",
                     r);
    }
    gpp_sim_t *sim = gpp_sim_new(self->plan, self->g, self->cost);
    int rc = gpp_sim_run(sim, err);
    if (rc == 0)
        rc = gpp_timeline_write(self->timeline, sim, clocks, path, out, NULL, err);
    gpp_sim_destroy(&sim);
    free(clocks);
    return rc;
}
