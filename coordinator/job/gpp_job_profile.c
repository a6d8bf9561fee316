/* gpp_job_profile: what the job's cost model is made of besides the
 * preset: a profile kept by an earlier run, the agents' profile rows or
 * memory figures (their ProfileRequest), the agents' GPU memory
 * (gpp_job_impl.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/job/gpp_job_impl.h"

/* --plan auto with a checkpoint_dir: plans from the profile a previous run
 * kept there (gpp_job_plan_make) when it was measured for this model on this
 * device. 1: attached; 0: none to use (absent, --reprofile, another model or
 * device: the agents profile again); -1: the file does not fit the model. */
int gpp_job_profile_kept(gpp_job_t *self, int reprofile, gpp_err_t *err)
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
    char model[GPP_CONFIG_PATH], device[GPP_CONFIG_STR], prec[16];
    int n_ops = 0;
    if (gpp_cost_profile_meta(path, model, sizeof model, device, sizeof device, &n_ops, prec,
                              sizeof prec, err) < 0)
        return gpp_err_prefix(err, "kept profile (gpp-coordinator --reprofile measures a new one)");
    const char *job_prec = gpp_config_precision_name(cfg->job.precision);
    if (strcmp(model, cfg->job.model) != 0 || strcmp(device, cfg->cluster.device) != 0 ||
        strcmp(prec, job_prec) != 0) {
        if (self->out)
            fprintf(self->out,
                    "plan: %s was measured for %s on %s in %s, this job is %s on %s in %s; the "
                    "agents profile again\n",
                    path, model, device, prec, cfg->job.model, cfg->cluster.device, job_prec);
        return 0;
    }
    if (n_ops != self->g->n_ops)
        return gpp_err_set(err,
                           "%s: profile of %d ops, but model %s has %d; run gpp-coordinator "
                           "--reprofile to measure it again",
                           path, n_ops, self->g->spec, self->g->n_ops);
    if (gpp_cost_attach_profile(self->cost, path, err) < 0)
        return gpp_err_prefix(err, "kept profile does not match the model; run gpp-coordinator "
                                   "--reprofile to measure it again");
    if (self->out)
        fprintf(self->out,
                "plan: auto, from the profile kept in %s (not profiling again; "
                "gpp-coordinator --reprofile measures a new one)\n",
                path);
    return 1;
}

void gpp_job_profile_request_init(gpp_job_t *self, int figures_only)
{
    const gpp_config_t *cfg = &self->cfg;
    gpp__profile_request__init(&self->preq);
    self->preq.model = self->cfg.job.model;
    /* measured where the job trains: a cuda job's agent 0 times the ops
     * on its GPU (CUDA events) at the job's precision, or gives their
     * figures there */
    self->preq.backend = gpp_job_wire_backend(cfg);
    self->preq.precision = gpp_job_wire_precision(cfg);
    self->preq.bf16_tensors = gpp_config_bf16_tensors(cfg);
    /* powers of two up to the batch and to 2^24, the largest
     * micro-batch a profile table holds (gpp_cost_attach_rows); int64:
     * doubling past a batch near INT_MAX must not overflow (it used to
     * wrap and loop forever); the figures: [1] */
    int n = 0;
    for (int64_t b = 1; b <= cfg->job.batch && b <= 1 << 24; b *= 2)
        n++;
    n = figures_only ? 1 : n;
    self->preq_mbs = gpp_xcalloc((size_t)n, sizeof *self->preq_mbs);
    for (int i = 0; i < n; i++)
        self->preq_mbs[i] = (int32_t)1 << i;
    self->preq.n_micro_batches = (size_t)n;
    self->preq.micro_batches = self->preq_mbs;
    self->preq.iterations = figures_only ? 1 : 3;
    self->preq.figures_only = figures_only;
}

const Gpp__ProfileRequest *gpp_job_profile_request(const gpp_job_t *self)
{
    return self->state <= GPP_JOB_FIGURES ? &self->preq : NULL;
}

int gpp_job_profile_fn(void *arg, const Gpp__ProfileResult *res, gpp_err_t *err)
{
    gpp_job_t *self = arg;
    if (self->state > GPP_JOB_FIGURES)
        return gpp_err_set(err, "a profile the job did not ask for (its plan is made)");
    gpp_cost_row_t *rows = gpp_xcalloc(res->n_ops ? res->n_ops : 1, sizeof *rows);
    for (size_t i = 0; i < res->n_ops; i++) {
        const Gpp__OpProfile *r = res->ops[i];
        rows[i] = (gpp_cost_row_t){.op = r->op,
                                   .micro_batch = r->micro_batch,
                                   .fwd_ms = r->fwd_ms,
                                   .bwd_ms = r->bwd_ms,
                                   .has_kernel_stash = r->kernel_stash_set,
                                   .kernel_stash = r->kernel_stash,
                                   .has_workspace = r->workspace_set,
                                   .workspace = {r->workspace_fixed, r->workspace_per_sample},
                                   .has_out_bytes = r->out_bytes_set,
                                   .out_bytes = r->out_bytes};
    }
    /* memory figures, no times: kept for a cost model made again */
    if (self->state == GPP_JOB_FIGURES) {
        int rc =
            gpp_cost_attach_figures(self->cost, rows, res->n_ops, "agent 0's memory figures", err);
        if (rc == 0 && self->plan)
            gpp_job_plan_predict_mem(self); /* a plan file's */
        if (rc == 0)
            self->state = self->plan ? GPP_JOB_PLANNED : GPP_JOB_AWAIT_AGENTS;
        free(self->figs);
        self->figs = rc == 0 ? rows : NULL;
        self->n_figs = rc == 0 ? res->n_ops : 0;
        if (rc < 0)
            free(rows);
        return rc;
    }
    int rc = gpp_cost_attach_rows(self->cost, rows, res->n_ops, "the agents' profile", err);
    if (rc == 0) /* kept in <checkpoint_dir>/profile.json's record */
        gpp_cost_set_profile_source(self->cost,
                                    res->device_name && res->device_name[0] ? res->device_name : "",
                                    gpp_config_precision_name(self->cfg.job.precision));
    if (rc == 0) {
        self->times = GPP_JOB_TIMES_AGENTS;
        self->state = GPP_JOB_AWAIT_AGENTS;
    }
    free(rows);
    return rc;
}

/* The agents that run on a's GPU (same host and GPU index), a among them. */
int gpp_job_gpu_sharers(gpp_registry_t *reg, const gpp_agent_t *a)
{
    int share = 0;
    for (int q = 0; q < gpp_registry_size(reg); q++) {
        const gpp_agent_t *b = gpp_registry_agent(reg, q);
        share += b->gpu == a->gpu && strcmp(b->host, a->host) == 0;
    }
    return share > 0 ? share : 1;
}

int gpp_job_profile_device_mem(gpp_job_t *self, gpp_registry_t *reg, gpp_err_t *err)
{
    const gpp_config_t *cfg = &self->cfg;
    const int n = gpp_registry_size(reg);
    int64_t least = 0;
    int least_rank = -1, least_share = 1;
    for (int r = 0; r < n; r++) {
        const gpp_agent_t *a = gpp_registry_agent(reg, r);
        int share = gpp_job_gpu_sharers(reg, a);
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
    gpp_cost_t *cost = gpp_cost_new(self->g, &cl);
    /* the same measurements: the text round-trips exactly */
    if (self->times != GPP_JOB_TIMES_PRESET) {
        char *text = gpp_cost_profile_json(self->cost, cfg->job.model, cfg->cluster.device);
        int rc = gpp_cost_attach_profile_text(cost, text, "the profile planned from", err);
        free(text);
        if (rc < 0) {
            gpp_cost_destroy(&cost);
            return -1;
        }
    }
    if (self->n_figs && gpp_cost_attach_figures(cost, self->figs, self->n_figs,
                                                "agent 0's memory figures", err) < 0) {
        gpp_cost_destroy(&cost);
        return -1;
    }
    gpp_cost_destroy(&self->cost);
    self->cost = cost;
    const gpp_agent_t *a = gpp_registry_agent(reg, least_rank);
    char who[GPP_REG_HOST_MAX + 64];
    char tot[32];
    snprintf(self->mem_source, sizeof self->mem_source,
             "the smallest the agents reported: %s, GPU %d %s, %s%s",
             gpp_agent_name(a, who, sizeof who), a->gpu, a->device_name,
             gpp_job_size(tot, sizeof tot, a->mem_total_bytes),
             least_share > 1 ? ", shared by the agents on that GPU" : "");
    gpp_info("coordinator: plan: device memory %.2f GiB per agent, %s; not the %s preset's",
             (double)least / 1073741824.0, self->mem_source, cfg->cluster.device);
    return 0;
}
