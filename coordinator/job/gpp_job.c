/* gpp_job: lifecycle and the planning thread's entry (see gpp_job.h; the
 * phases are the other files of coordinator/job/, gpp_job_impl.h). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_fault.h"
#include "coordinator/job/gpp_job_impl.h"
#include "model/gpp_model.h"
#include "planner/gpp_cluster_config.h"
#include "planner/gpp_profile_io.h"

int gpp_job_cancelled(const atomic_int *cancel, gpp_err_t *err)
{
    if (!cancel || !atomic_load(cancel))
        return 0;
    gpp_err_set(err, "planning cancelled: the job was stopped");
    return 1;
}

const char *gpp_job_size(char *buf, size_t len, int64_t bytes)
{
    if (bytes >= ((int64_t)1 << 30) || bytes <= -((int64_t)1 << 30))
        snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
    else
        snprintf(buf, len, "%.0f MiB", (double)bytes / 1048576.0);
    return buf;
}

/* The cost model: every slot one device of [cluster] device, with
 * cluster.profile's times when given, or a kept profile's. cfg is
 * gpp_job_new's (self->cfg has no nodes). */
static int s_cost(gpp_job_t *self, const gpp_config_t *cfg, int reprofile, gpp_err_t *err)
{
    gpp_cluster_t cl;
    if (gpp_cluster_from_config(cfg, self->n_agents, &cl, err) < 0)
        return -1;
    self->cluster = cl;
    snprintf(self->mem_source, sizeof self->mem_source, "the %s preset's", cl.device.name);
    self->cost = gpp_cost_new(self->g, &cl);
    if (cfg->cluster.profile[0]) {
        gpp_profile_t *p = gpp_profile_io_read(cfg->cluster.profile, err);
        int rc = p ? gpp_cost_attach_profile(self->cost, p, err) : -1;
        gpp_profile_destroy(&p);
        if (rc < 0)
            return -1;
    }
    self->times = cfg->cluster.profile[0] ? GPP_JOB_TIMES_FILE : GPP_JOB_TIMES_PRESET;
    /* --plan auto without a measured profile: a kept one, else the agents measure */
    if (strcmp(self->plan_arg, "auto") == 0 && !cfg->cluster.profile[0] &&
        cfg->job.checkpoint_dir[0]) {
        int kept = gpp_job_profile_kept(self, reprofile, err);
        if (kept < 0)
            return -1;
        if (kept)
            self->times = GPP_JOB_TIMES_KEPT;
    }
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
    self->resume = resume;
    snprintf(self->plan_arg, sizeof self->plan_arg, "%s", plan);
    self->n_agents = gpp_config_devices(cfg);
    /* resume or fresh start: refused before anything in the directory changes */
    if (gpp_job_recover_start(self, resume, err) < 0)
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
    if (gpp_job_plan_schedule_check(self, NULL, err) < 0)
        goto fail;
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
    if (self->start > 0 && gpp_job_recover_check_set(self, err) < 0)
        goto fail;
    if (s_cost(self, cfg, reprofile, err) < 0)
        goto fail;
    snprintf(self->prefix, sizeof self->prefix, "gpp-%d-%lld/", (int)getpid(),
             (long long)time(NULL));
    const int cuda = cfg->job.backend == GPP_DEVICE_CUDA;
    if (strcmp(plan, "auto") == 0 && self->times == GPP_JOB_TIMES_PRESET) {
        self->state = GPP_JOB_PROFILING; /* the agents measure a profile first */
    } else if (cuda && self->times == GPP_JOB_TIMES_PRESET) {
        /* a cuda job without a profile from its GPUs: CUDA's attention keeps
           and asks its own layouts, not the op table's, so agent 0 reports
           its backend's figures (no timing) before the plan is made, or a
           plan file's memory predicted */
        self->state = GPP_JOB_FIGURES;
    } else {
        /* a cuda job that searches without cluster.mem_gib plans with the
           agents' GPU memory, once they registered */
        self->state = cuda && !gpp_job_plan_is_file(self) && cfg->cluster.mem_gib <= 0
                          ? GPP_JOB_AWAIT_AGENTS
                          : GPP_JOB_PLANNED;
    }
    if (self->state <= GPP_JOB_FIGURES)
        gpp_job_profile_request_init(self, self->state == GPP_JOB_FIGURES);
    if (self->state == GPP_JOB_PROFILING && self->out)
        fprintf(self->out,
                "plan: auto, after the agents profile %s at micro-batch 1, 2, 4 .. up to "
                "%d (as far as a few seconds allow)\n",
                self->g->spec, self->preq_mbs[self->preq.n_micro_batches - 1]);
    /* a plan file is read at once, also while the figures are awaited (its
       memory is predicted again once they are in) */
    int now = self->state == GPP_JOB_PLANNED ||
              (self->state == GPP_JOB_FIGURES && gpp_job_plan_is_file(self));
    if (now && gpp_job_plan_make(self, NULL, err) < 0)
        goto fail;
    if (!now && self->state != GPP_JOB_PROFILING && self->out)
        fprintf(self->out, "plan: once the agents have reported their GPUs' memory\n");
    return self;
fail:
    gpp_job_destroy(&self);
    return NULL;
}

void gpp_job_destroy(gpp_job_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_job_t *self = *self_p;
    if (self->assign)
        for (int r = 0; r < self->n_agents; r++)
            gpp_job_assign_free(self->assign[r]);
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
        if (gpp_job_cancelled(cancel, err))
            return -1;
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    }
    if (self->state < GPP_JOB_AWAIT_AGENTS)
        return gpp_err_set(err, "the plan waits for agent 0's %s, which has not come",
                           self->state == GPP_JOB_PROFILING ? "profile" : "memory figures");
    /* --plan auto with the agents' profile, or a cuda job planned with the
     * agents' device memory: the plan is made here */
    if (self->state == GPP_JOB_AWAIT_AGENTS) {
        if (self->cfg.job.backend == GPP_DEVICE_CUDA && self->cfg.cluster.mem_gib <= 0 &&
            gpp_job_profile_device_mem(self, reg, err) < 0)
            return -1;
        int rc = gpp_job_plan_make(self, cancel, err);
        if (rc < 0)
            return rc; /* -2: a --resume the set's plan refuses (exit 2) */
    }
    if (gpp_job_assign_make(self, reg, err) < 0)
        return -1;
    const gpp_plan_t *p = self->plan;
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
