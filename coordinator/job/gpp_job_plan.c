/* gpp_job_plan: the plan, from the partitioner or a plan file, lowered,
 * simulated and laid out for the coordinator (gpp_job_impl.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpp_fs.h"
#include "common/gpp_time.h"
#include "coordinator/job/gpp_job_impl.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "planner/gpp_zb.h"

/* Most micro-batches a replica of st holds at once as the agents run its
 * lowered actions (the lanes of its executor's memory plan). */
static int s_stage_mbs(const gpp_stage_t *st)
{
    int most = 1;
    for (int r = 0; r < st->devices; r++) {
        int k = gpp_actions_inflight(st->replica[r].a, st->replica[r].n);
        most = k > most ? k : most;
    }
    return most;
}

/* Each stage's predicted peak device memory for its lowered schedule. */
void gpp_job_plan_predict_mem(gpp_job_t *self)
{
    const gpp_plan_t *p = self->plan;
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        /* the agents report the bf16 parameter copies with the backend's own
           buffers, which the table adds as measured: not twice */
        int64_t peak = p->schedule == GPP_SCHED_1F1B
                           ? gpp_cost_stage_mem(self->cost, st->n_ops, st->ops, st->devices,
                                                st->micro_batch, s_stage_mbs(st), p->batch)
                           : gpp_zb_stage_mem(self->cost, p, s); /* B and W keep apart */
        self->mem_predicted[s] =
            peak - gpp_cost_stage_param_copy_bytes(self->cost, st->n_ops, st->ops);
    }
}

/* Who runs what (gpp_progress_layout_t), which stages hold a loss op, and
 * each stage's predicted peak device memory for its lowered schedule. */
static void s_layout(gpp_job_t *self)
{
    const gpp_plan_t *p = self->plan;
    self->sink = gpp_xcalloc((size_t)p->n_stages, sizeof *self->sink);
    self->mem_predicted = gpp_xcalloc((size_t)p->n_stages, sizeof *self->mem_predicted);
    gpp_job_plan_predict_mem(self);
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        for (int i = 0; i < st->n_ops; i++) {
            gpp_op_type_t t = self->g->ops[st->ops[i]].type;
            if (gpp_optable[t].role == GPP_ROLE_LOSS)
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
                           gpp_job_size(b, sizeof b, bound), gpp_job_size(m, sizeof m, min_mem),
                           cl->n_devices, self->cfg.job.batch);
    return gpp_err_set(
        err,
        "no plan fits the device memory: %s per device (%s) less %s for the "
        "runtime's context and workspaces leaves %s; the smallest plan needs %s "
        "+ %s per device (%d devices, batch %d): use devices with more memory%s, "
        "more devices, a smaller job.batch, or cluster.mem_gib",
        gpp_job_size(d, sizeof d, cl->device.mem_bytes), self->mem_source,
        gpp_job_size(r, sizeof r, GPP_CONTEXT_BYTES), gpp_job_size(b, sizeof b, bound),
        gpp_job_size(m, sizeof m, min_mem), r, cl->n_devices, self->cfg.job.batch,
        self->cfg.job.backend == GPP_DEVICE_CUDA ? ", fewer agents per GPU (nodes.gpus)" : "");
}

/* 1 when --plan names a plan file (.json), not a planner. */
int gpp_job_plan_is_file(const gpp_job_t *self)
{
    size_t pl = strlen(self->plan_arg);
    return pl > 5 && strcmp(self->plan_arg + pl - 5, ".json") == 0;
}

int gpp_job_plan_schedule_check(const gpp_job_t *self, const gpp_plan_t *p, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    const char *kind = p ? gpp_sched_kind_name(p->schedule) : cfg->job.schedule;
    /* auto plans what the backend runs (s_schedules) */
    if (p ? p->schedule == GPP_SCHED_1F1B
          : !strcmp(kind, "1f1b") || !strcmp(kind, "auto") || !kind[0])
        return 0;
    /* the CPU backend has the split backward (B and W passes), the CUDA one
       not (gpp_backend_bwd_split) */
    if (cfg->job.backend != GPP_DEVICE_CUDA)
        return 0;
    char what[GPP_CONFIG_PATH + 64];
    if (p)
        snprintf(what, sizeof what, "plan %s: schedule_kind \"%s\"", self->plan_arg, kind);
    else
        snprintf(what, sizeof what, "%s: job.schedule = \"%s\"", cfg->path, kind);
    return gpp_err_set(err,
                       "%s: the cuda backend has no split backward (B and W passes); use "
                       "schedule = \"1f1b\" or \"auto\"%s, or backend = \"cpu\"",
                       what, p ? " (gpp-plan --schedule 1f1b)" : "");
}

/* The schedules the partitioner plans for the agents (a mask of 1 <<
 * gpp_sched_kind_t): job.schedule's (gpp_job_plan_schedule_check refused
 * a zero-bubble one for cuda). auto is all of them on the CPU backend (the
 * least simulated time under the memory bound, as gpp-plan --schedule auto)
 * and 1f1b on cuda, which has no split backward (docs/planner.md
 * "Zero-bubble schedules"). */
static unsigned s_schedules(const gpp_config_t *cfg)
{
    unsigned mask = GPP_SCHED_AUTO;
    gpp_err_t ignored = {{0}}; /* the config reader checked the word */
    if (cfg->job.schedule[0] &&
        gpp_sched_kind_parse(cfg->job.schedule, "job.schedule", &mask, &ignored) < 0)
        mask = 1u << GPP_SCHED_1F1B;
    if (mask == GPP_SCHED_AUTO && cfg->job.backend == GPP_DEVICE_CUDA)
        mask = 1u << GPP_SCHED_1F1B;
    return mask;
}

int gpp_job_plan_make(gpp_job_t *self, const atomic_int *cancel, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    const char *plan = self->plan_arg;
    const char *which =
        strcmp(plan, "auto") == 0 ? (cfg->job.planner[0] ? cfg->job.planner : "gpp") : plan;
    size_t pl = strlen(which);
    if (pl > 5 && strcmp(which + pl - 5, ".json") == 0) {
        self->plan = gpp_plan_read_json(which, self->g, err);
        if (!self->plan || gpp_job_plan_schedule_check(self, self->plan, err) < 0)
            return -1;
        if (self->plan->batch != cfg->job.batch)
            return gpp_err_set(err, "plan %s is for batch %d, but %s has job.batch = %d", which,
                               self->plan->batch, cfg->path, cfg->job.batch);
    } else if (strcmp(which, "gpp") == 0 || strcmp(which, "spp") == 0) {
        gpp_part_opts_t o;
        gpp_part_opts_default(&o, cfg->job.batch);
        o.micro_batch = cfg->job.micro_batch;
        o.spp = which[0] == 's';
        o.schedules = s_schedules(cfg);
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
        if (gpp_job_cancelled(cancel, err) || gpp_sched_build(self->plan, self->g, err) < 0)
            return -1;
    } else {
        return gpp_err_set(err, "--plan %s: use auto, gpp, spp or a gpp-plan/1 FILE.json", plan);
    }
    snprintf(self->plan_name, sizeof self->plan_name, "%s%s%s%s", which,
             strcmp(which, self->plan->planner) != 0 ? " (" : "",
             strcmp(which, self->plan->planner) != 0 ? self->plan->planner : "",
             strcmp(which, self->plan->planner) != 0 ? ")" : "");
    if (self->times == GPP_JOB_TIMES_KEPT || self->times == GPP_JOB_TIMES_AGENTS)
        snprintf(self->plan_name + strlen(self->plan_name),
                 sizeof self->plan_name - strlen(self->plan_name), "%s",
                 self->times == GPP_JOB_TIMES_KEPT ? " (kept profile)" : " (agent profile)");
    for (int s = 0; s < self->plan->n_stages; s++)
        self->used += self->plan->stages[s].devices;
    if (self->used > self->n_agents)
        return gpp_err_set(err, "the plan uses %d devices, but %s has %d slots", self->used,
                           cfg->path, self->n_agents);
    if (gpp_job_cancelled(cancel, err))
        return -1;
    if (gpp_sim_plan(self->plan, self->g, self->cost, err) < 0)
        return gpp_err_prefix(err, "simulating the plan");
    s_layout(self);
    if (gpp_job_cancelled(cancel, err))
        return -1;
    if (self->out)
        gpp_job_plan_print(self, self->out);
    if (self->start > 0 && gpp_job_recover_check_plan(self, err) < 0)
        return -2; /* the command line's or cluster file's to fix */
    /* the checkpoint directory must take the plan (gpp_job_recover_keep writes it
       once the agents fit it): a directory that cannot is an error now,
       before any agent starts */
    const char *dir = self->cfg.job.checkpoint_dir;
    if (dir[0] && gpp_mkdirs(dir, 0700, err) < 0)
        return gpp_err_prefix(err, "job.checkpoint_dir");
    if (dir[0] && access(dir, W_OK | X_OK) < 0)
        return gpp_err_set(err, "job.checkpoint_dir: %s is not writable: %s", dir, strerror(errno));
    return 0;
}

/* The stage table (ops, devices, micro-batch, k, in-flight, agents), the
 * simulated iteration time and the schedule. */
void gpp_job_plan_print(const gpp_job_t *self, FILE *out)
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
    /* auto on cuda is 1f1b (s_schedules): say why the zero-bubble ones are out */
    const char *sched = self->cfg.job.schedule;
    int auto_1f1b = !gpp_job_plan_is_file(self) && self->cfg.job.backend == GPP_DEVICE_CUDA &&
                    (!sched[0] || !strcmp(sched, "auto"));
    fprintf(out, "  simulated iteration %.3f ms (%.1f samples/s), schedule %s%s\n", p->iteration_ms,
            p->throughput, gpp_sched_kind_name(p->schedule),
            auto_1f1b ? " (auto: the cuda agents have no split backward)" : "");
    fflush(out);
}
