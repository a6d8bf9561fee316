/* gpp_job_profile: what the job's cost model is made of besides the
 * preset: a profile kept by an earlier run, the agents' profile rows or
 * memory figures (their ProfileRequest), the agents' GPU memory
 * (gpp_job_impl.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coordinator/job/gpp_job_impl.h"
#include "planner/gpp_profile_io.h"
#include "proto/gpp_msg_profile.h"

/* "bf16", or "bf16 with bf16 tensors" when the agents keep them */
static void s_precision_desc(gpp_precision_t p, int bf16_tensors, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", gpp_precision_name(p), bf16_tensors ? " with bf16 tensors" : "");
}

/* --plan auto with a checkpoint_dir: plans from the profile a previous run
 * kept there (gpp_job_plan_make) when it was measured for this model on this
 * device at this precision, with or without bf16 tensors as this job. 1:
 * attached; 0: none to use (absent, --reprofile, measured otherwise: the
 * agents profile again); -1: the file does not fit the model. */
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

void gpp_job_profile_request_init(gpp_job_t *self, int figures_only)
{
    const gpp_config_t *cfg = &self->cfg;
    gpp__profile_request__init(&self->preq);
    self->preq.model = self->cfg.job.model;
    /* measured where the job trains: a cuda job's agent 0 times the ops
     * on its GPU (CUDA events) at the job's precision, or gives their
     * figures there */
    self->preq.backend = gpp_msg_backend(cfg->job.backend);
    self->preq.precision = gpp_msg_precision(cfg->job.precision);
    self->preq.bf16_tensors = gpp_config_bf16_tensors(cfg);
    /* powers of two up to the batch and to 2^24, the largest
     * micro-batch a profile table holds (GPP_PROFILE_MAX_MB); int64:
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
    const gpp_config_t *cfg = &self->cfg;
    const int figures = self->state == GPP_JOB_FIGURES;
    gpp_profile_row_t *rows = gpp_msg_profile_rows(res);
    gpp_profile_t *p =
        gpp_profile_of_graph(self->g, rows, res->n_ops,
                             figures ? "agent 0's memory figures" : "the agents' profile", err);
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
    int rc = figures ? gpp_cost_attach_figures(self->cost, p, err)
                     : gpp_cost_attach_profile(self->cost, p, err);
    if (rc < 0) {
        gpp_profile_destroy(&p);
        return -1;
    }
    gpp_profile_destroy(&self->prof);
    self->prof = p;
    if (figures) {
        if (self->plan)
            gpp_job_plan_predict_mem(self); /* a plan file's */
        self->state = self->plan ? GPP_JOB_PLANNED : GPP_JOB_AWAIT_AGENTS;
        return 0;
    }
    self->times = GPP_JOB_TIMES_AGENTS;
    self->state = GPP_JOB_AWAIT_AGENTS;
    return 0;
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
    gpp_cost_t *cost = gpp_cost_clone(self->cost, &cl); /* the same measurements */
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
