/* gpp_job_train: the job while and after it trains: the op digests of
 * the metrics, committing checkpoint sets, the closing summary and weights
 * digest, the measured trace (gpp_job_impl.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_fs.h"
#include "coordinator/job/gpp_job_impl.h"
#include "planner/gpp_sim.h"

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
    /* the last set records the final weights digest (a resumed finished
       job prints it: gpp_supervisor) */
    char hex[GPP_SHA256_HEX];
    int final = done == c->job.iterations && s_weights_digest(self, hex);
    if (gpp_ckpt_set_commit(c->job.checkpoint_dir, done, self->plan->n_stages,
                            c->job.checkpoint_keep, final ? hex : NULL, err) < 0)
        return -1;
    gpp_info("coordinator: checkpoint set %d committed in %s", done, c->job.checkpoint_dir);
    return 0;
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
    gpp_job_plan_print(self, out);
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
