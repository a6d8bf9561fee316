/* gpp_job_recover: where a job starts (fresh, or the newest complete
 * checkpoint set), what --resume checks before any agent starts, and what
 * a later start reads back: plan.json and the agents' profile.json beside
 * the checkpoints (gpp_job_impl.h). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_atomic_file.h"
#include "common/gpp_fs.h"
#include "coordinator/job/gpp_job_impl.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_profile_io.h"

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
 * load any set (gpp_exec_ckpt_load_files); only the batch must be the same. */
int gpp_job_recover_check_plan(gpp_job_t *self, gpp_err_t *err)
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
    if (!(self->resume & GPP_JOB_REPLAN))
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
int gpp_job_recover_check_set(gpp_job_t *self, gpp_err_t *err)
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
int gpp_job_recover_start(gpp_job_t *self, gpp_job_start_t start, gpp_err_t *err)
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
    const int from = (int)(start >> GPP_JOB_FROM_SHIFT);
    struct stat st;
    if (stat(dir, &st) == 0 && (st.st_mode & S_IWOTH))
        return gpp_err_set(err,
                           "%s: job.checkpoint_dir %s is writable by every user (mode %04o): "
                           "anyone on this host could plant a checkpoint set the agents load; "
                           "run chmod o-w %s (nothing was changed)",
                           cfg->path, dir, (unsigned)(st.st_mode & 07777), dir);
    int latest = resume ? gpp_ckpt_set_pick(dir, from, err) : gpp_ckpt_set_latest(dir, err);
    if (latest < 0 && from > 0)
        return gpp_err_prefix(err,
                              "--resume-from %d: checkpoint set %d in %s (%s) cannot be resumed "
                              "from; name another set, or use --resume for the newest that "
                              "verifies",
                              from, from, dir, cfg->path);
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
    gpp_info("coordinator: resuming from checkpoint set %d in %s: iterations %d..%d", latest, dir,
             latest + 1, cfg->job.iterations);
    return 0;
}

/* The plan beside the stage checkpoints (what they are checkpoints of) and
 * the profile it was planned from (so a restart plans the same): written
 * once the agents are known to fit the plan, so that a refused job leaves
 * the checkpoint directory as it was. */
int gpp_job_recover_keep(gpp_job_t *self, gpp_err_t *err)
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
    /* sets newer than the one resumed from (damaged, or passed over by
       --resume-from) would meet this run's sets of the same numbers */
    if (self->start > 0 && gpp_ckpt_set_supersede(cfg->job.checkpoint_dir, self->start, err) < 0)
        return gpp_err_prefix(err, "job.checkpoint_dir");
    if (self->times == GPP_JOB_TIMES_AGENTS && self->prof) {
        /* the record names the cluster's preset, which the next start
           compares (gpp_job_profile_kept) */
        snprintf(path, sizeof path, "%s/profile.json", cfg->job.checkpoint_dir);
        snprintf(self->prof->meta.device, sizeof self->prof->meta.device, "%s",
                 cfg->cluster.device);
        if (gpp_profile_io_write(self->prof, path, err) < 0)
            return gpp_err_prefix(err, "job.checkpoint_dir");
    }
    return 0;
}
