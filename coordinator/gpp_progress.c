/* gpp_progress: see gpp_progress.h. */
#include "coordinator/gpp_progress.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/gpp_fs.h"

typedef struct {
    int reported; /* this rank's metrics for the iteration arrived */
    double iteration_ms;
    double bubble_ms;
    int64_t mem_bytes;        /* RSS high-water */
    int64_t device_mem_bytes; /* device (backend) high-water */
    int has_loss;
    double loss;
    int64_t samples;
    int n_action_ms;
    double *action_ms; /* owned */
} s_cell_t;

struct gpp_progress_s {
    int n_agents, n_stages, iterations, batch;
    int start; /* gpp_progress_layout_t start_iteration */
    int *stage_of_rank, *replica_of_rank, *n_actions_of_rank, *sink_stage;
    int64_t *mem_predicted; /* [n_stages], 0 when not given */
    int64_t *mem_measured;  /* [n_stages]: highest device peak reported so far */
    int64_t *mem_backend;   /* [n_stages]: the most backend-own bytes a replica reported */
    int in_job;             /* ranks with a stage */
    int *next_iter;         /* [n_agents]: the iteration each rank reports next */
    int *count;             /* [iterations]: ranks that reported it */
    s_cell_t *cells;        /* [iterations * n_agents] */
    double *loss;           /* [iterations] */
    double *iter_ms;        /* [iterations] */
    int done;               /* complete iterations (they complete in order) */
    FILE *text;
    int jsonl; /* the metrics file (gpp_append_open), -1 none */
    char jsonl_path[4096];
};

/* open_memstream failing is an allocation failure: fatal, as gpp_xcalloc */
static void s_oom(void)
{
    fprintf(stderr, "gpp: out of memory\n");
    abort();
}

static int *s_dup(const int *a, int n)
{
    int *b = gpp_xcalloc((size_t)n, sizeof *b);
    memcpy(b, a, (size_t)n * sizeof *b);
    return b;
}

double gpp_progress_table_bytes(int n_agents, int iterations)
{
    return (double)iterations *
           ((double)n_agents * sizeof(s_cell_t) + sizeof(int) + 2 * sizeof(double));
}

/* A new run's metrics file: when `path` holds another run's lines, they move
 * to `path.<UTC time>` (then `-1`, `-2`, ... when taken) so nothing is
 * truncated, and the log says where. */
static int s_keep_previous(const char *path, gpp_err_t *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size == 0)
        return 0;
    char stamp[32], kept[4200];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    for (int k = 0; k < 1000; k++) {
        if (k == 0)
            snprintf(kept, sizeof kept, "%s.%s", path, stamp);
        else
            snprintf(kept, sizeof kept, "%s.%s-%d", path, stamp, k);
        if (link(path, kept) == 0) { /* fails when taken: never replaces a file */
            if (unlink(path) != 0)
                return gpp_err_set(err,
                                   "metrics file '%s': cannot move the previous run's "
                                   "lines aside: %s",
                                   path, strerror(errno));
            gpp_info("metrics file %s held another run's lines: kept as %s", path, kept);
            return 0;
        }
        if (errno != EEXIST)
            return gpp_err_set(err,
                               "metrics file '%s' holds another run's lines and they cannot be "
                               "kept as '%s': %s; use another [metrics] file or --resume",
                               path, kept, strerror(errno));
    }
    return gpp_err_set(err, "metrics file '%s': no free name to keep the previous run's lines",
                       path);
}

gpp_progress_t *gpp_progress_new(const gpp_progress_layout_t *l, FILE *text, const char *jsonl_path,
                                 gpp_err_t *err)
{
    assert(l->n_agents > 0 && l->n_stages > 0 && l->iterations > 0 && l->batch > 0);
    int n_agents = l->n_agents, iterations = l->iterations;
    gpp_progress_t *self = gpp_xcalloc(1, sizeof *self);
    self->jsonl = -1;
    self->n_agents = n_agents;
    self->n_stages = l->n_stages;
    self->iterations = iterations;
    self->batch = l->batch;
    self->start = l->start_iteration;
    self->stage_of_rank = s_dup(l->stage_of_rank, n_agents);
    self->replica_of_rank = s_dup(l->replica_of_rank, n_agents);
    self->n_actions_of_rank = s_dup(l->n_actions_of_rank, n_agents);
    self->sink_stage = s_dup(l->sink_stage, l->n_stages);
    self->mem_predicted = gpp_xcalloc((size_t)l->n_stages, sizeof(int64_t));
    self->mem_measured = gpp_xcalloc((size_t)l->n_stages, sizeof(int64_t));
    self->mem_backend = gpp_xcalloc((size_t)l->n_stages, sizeof(int64_t));
    if (l->mem_predicted_bytes)
        memcpy(self->mem_predicted, l->mem_predicted_bytes, (size_t)l->n_stages * sizeof(int64_t));
    for (int r = 0; r < n_agents; r++)
        self->in_job += l->stage_of_rank[r] >= 0;
    self->next_iter = gpp_xcalloc((size_t)n_agents, sizeof *self->next_iter);
    self->count = gpp_xcalloc((size_t)iterations, sizeof *self->count);
    self->cells = gpp_xcalloc((size_t)iterations * (size_t)n_agents, sizeof *self->cells);
    self->loss = gpp_xcalloc((size_t)iterations, sizeof *self->loss);
    self->iter_ms = gpp_xcalloc((size_t)iterations, sizeof *self->iter_ms);
    self->text = text;
    if (jsonl_path && jsonl_path[0]) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", jsonl_path);
        char *slash = strrchr(dir, '/'); /* the file's directory, made as mkdir -p */
        if (slash && slash > dir) {
            *slash = 0;
            if (gpp_mkdirs(dir, 0700, err) < 0) {
                gpp_err_prefix(err, "metrics file '%s'", jsonl_path);
                gpp_progress_destroy(&self);
                return NULL;
            }
        }
        /* a resumed job continues the file of the run it resumes; a new one
           never truncates another run's: a non-empty file is kept beside */
        if (self->start == 0 && s_keep_previous(jsonl_path, err) < 0) {
            gpp_progress_destroy(&self);
            return NULL;
        }
        /* appended by whole lines (gpp_append_whole) */
        self->jsonl = gpp_append_open(jsonl_path, self->start == 0);
        snprintf(self->jsonl_path, sizeof self->jsonl_path, "%s", jsonl_path);
        char mark[64];
        int ml = snprintf(mark, sizeof mark, "{\"resumed_at_iteration\":%d}\n", self->start);
        if (self->jsonl < 0 ||
            (self->start > 0 && gpp_append_whole(self->jsonl, mark, (size_t)ml) < 0)) {
            gpp_err_set(err, "metrics file '%s': %s", jsonl_path, strerror(errno));
            gpp_progress_destroy(&self);
            return NULL;
        }
    }
    return self;
}

void gpp_progress_destroy(gpp_progress_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_progress_t *self = *self_p;
    if (self->cells)
        for (size_t i = 0; i < (size_t)self->iterations * (size_t)self->n_agents; i++)
            free(self->cells[i].action_ms);
    if (self->jsonl >= 0)
        close(self->jsonl);
    free(self->stage_of_rank);
    free(self->replica_of_rank);
    free(self->n_actions_of_rank);
    free(self->sink_stage);
    free(self->mem_predicted);
    free(self->mem_measured);
    free(self->mem_backend);
    free(self->next_iter);
    free(self->count);
    free(self->cells);
    free(self->loss);
    free(self->iter_ms);
    free(self);
    *self_p = NULL;
}

/* Writes iteration it (complete) as text and JSON; -1 when the metrics
 * file could not take the line. */
static int s_emit(gpp_progress_t *self, int it, gpp_err_t *err)
{
    int rc = 0;
    s_cell_t *row = &self->cells[(size_t)it * (size_t)self->n_agents];
    double iter_ms = 0, loss = 0;
    int has_loss = 0;
    for (int r = 0; r < self->n_agents; r++)
        if (self->stage_of_rank[r] >= 0 && row[r].iteration_ms > iter_ms)
            iter_ms = row[r].iteration_ms;
    for (int r = 0; r < self->n_agents; r++)
        if (self->stage_of_rank[r] >= 0 && row[r].has_loss) {
            loss += row[r].loss;
            has_loss = 1;
        }
    self->loss[it] = has_loss ? loss : NAN;
    self->iter_ms[it] = iter_ms;
    double sps = iter_ms > 0 ? self->batch * 1000.0 / iter_ms : 0;

    /* per-stage mean bubble % over replicas */
    double *bub = gpp_xcalloc((size_t)self->n_stages, sizeof *bub);
    int *nrep = gpp_xcalloc((size_t)self->n_stages, sizeof *nrep);
    for (int r = 0; r < self->n_agents; r++) {
        int s = self->stage_of_rank[r];
        if (s < 0)
            continue;
        bub[s] += row[r].iteration_ms > 0 ? 100.0 * row[r].bubble_ms / row[r].iteration_ms : 0;
        nrep[s]++;
    }
    if (self->text) {
        char stages[1024];
        size_t off = 0;
        stages[0] = 0;
        for (int s = 0; s < self->n_stages && off < sizeof stages; s++) {
            int w = snprintf(stages + off, sizeof stages - off, "%ss%d=%.0f%%", s ? " " : "", s,
                             nrep[s] ? bub[s] / nrep[s] : 0.0);
            if (w < 0)
                break;
            off += (size_t)w;
        }
        fprintf(self->text, "iter %d/%d  loss %s%.6f  %.1f samples/s  %.2f ms  bubble %s\n",
                self->start + it + 1, self->start + self->iterations, has_loss ? "" : "(none) ",
                has_loss ? loss : 0.0, sps, iter_ms, stages);
        fflush(self->text);
    }
    if (self->jsonl >= 0) {
        /* the line is made in memory and appended whole: a write that fails
           (a full disk) is cut back off, so the file holds whole lines only */
        char *line = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&line, &len);
        if (!f)
            s_oom();
        fprintf(f, "{\"iteration\":%d,", self->start + it);
        if (has_loss)
            fprintf(f, "\"loss\":%.9g,", loss);
        else
            fprintf(f, "\"loss\":null,");
        fprintf(f, "\"iteration_ms\":%.6g,\"samples_per_s\":%.6g,\"stages\":[", iter_ms, sps);
        for (int s = 0; s < self->n_stages; s++) {
            int64_t meas = 0; /* this iteration's reports: the peak so far */
            for (int r = 0; r < self->n_agents; r++)
                if (self->stage_of_rank[r] == s && row[r].device_mem_bytes > meas)
                    meas = row[r].device_mem_bytes;
            fprintf(f,
                    "%s{\"stage\":%d,\"bubble_pct\":%.4g,\"mem_predicted_bytes\":%lld,"
                    "\"mem_measured_bytes\":%lld}",
                    s ? "," : "", s, nrep[s] ? bub[s] / nrep[s] : 0.0,
                    (long long)gpp_progress_stage_mem_predicted(self, s), (long long)meas);
        }
        fprintf(f, "],\"agents\":[");
        int first = 1;
        for (int r = 0; r < self->n_agents; r++) {
            const s_cell_t *c = &row[r];
            if (self->stage_of_rank[r] < 0)
                continue;
            fprintf(f,
                    "%s{\"rank\":%d,\"stage\":%d,\"replica\":%d,\"iteration_ms\":%.6g,"
                    "\"bubble_ms\":%.6g,\"mem_high_water_bytes\":%lld,"
                    "\"device_mem_peak_bytes\":%lld,\"samples\":%lld",
                    first ? "" : ",", r, self->stage_of_rank[r], self->replica_of_rank[r],
                    c->iteration_ms, c->bubble_ms, (long long)c->mem_bytes,
                    (long long)c->device_mem_bytes, (long long)c->samples);
            if (c->has_loss)
                fprintf(f, ",\"loss\":%.9g", c->loss);
            fprintf(f, ",\"action_ms\":[");
            for (int i = 0; i < c->n_action_ms; i++)
                fprintf(f, "%s%.4g", i ? "," : "", c->action_ms[i]);
            fprintf(f, "]}");
            first = 0;
        }
        fprintf(f, "]}\n");
        if (fclose(f) != 0)
            s_oom();
        if (gpp_append_whole(self->jsonl, line, len) < 0)
            rc = gpp_err_set(err,
                             "metrics file '%s': cannot write iteration metrics: %s; free space "
                             "there or set another [metrics] file, then gpp-coordinator --resume",
                             self->jsonl_path, strerror(errno));
        free(line);
    }
    free(bub);
    free(nrep);
    return rc;
}

int gpp_progress_add(gpp_progress_t *self, int rank, const Gpp__Metrics *m, gpp_err_t *err)
{
    assert(self && m);
    if (rank < 0 || rank >= self->n_agents || self->stage_of_rank[rank] < 0)
        return gpp_err_set(err, "metrics from rank %d, which has no stage in this job", rank);
    int s = self->stage_of_rank[rank];
    if (m->iteration != self->next_iter[rank])
        return gpp_err_set(err, "metrics for iteration %d, expected %d", m->iteration,
                           self->next_iter[rank]);
    if (m->iteration >= self->iterations)
        return gpp_err_set(err, "metrics for iteration %d of a %d-iteration job", m->iteration,
                           self->iterations);
    if (m->has_loss && !self->sink_stage[s])
        return gpp_err_set(err, "loss from stage %d, which holds no loss op", s);
    if (m->n_action_ms != 0 && m->n_action_ms != (size_t)self->n_actions_of_rank[rank])
        return gpp_err_set(err, "%zu action times for an action list of %d", m->n_action_ms,
                           self->n_actions_of_rank[rank]);
    s_cell_t *c = &self->cells[(size_t)m->iteration * (size_t)self->n_agents + (size_t)rank];
    c->reported = 1;
    c->iteration_ms = m->iteration_ms;
    c->bubble_ms = m->bubble_ms;
    c->mem_bytes = m->mem_high_water_bytes;
    c->device_mem_bytes = m->device_mem_peak_bytes;
    if (m->device_mem_peak_bytes > self->mem_measured[s])
        self->mem_measured[s] = m->device_mem_peak_bytes;
    if (m->device_mem_backend_bytes > self->mem_backend[s])
        self->mem_backend[s] = m->device_mem_backend_bytes;
    c->has_loss = m->has_loss;
    c->loss = m->loss;
    c->samples = m->samples;
    c->n_action_ms = (int)m->n_action_ms;
    if (m->n_action_ms) {
        c->action_ms = gpp_xcalloc(m->n_action_ms, sizeof *c->action_ms);
        memcpy(c->action_ms, m->action_ms, m->n_action_ms * sizeof *c->action_ms);
    }
    self->next_iter[rank]++;
    self->count[m->iteration]++;
    int completed = 0;
    while (self->done < self->iterations && self->count[self->done] == self->in_job) {
        int rc = s_emit(self, self->done, err);
        self->done++;
        completed = 1;
        if (rc < 0)
            return -2;
    }
    return completed;
}

int gpp_progress_finished(const gpp_progress_t *self)
{
    return self->done == self->iterations;
}

int64_t gpp_progress_stage_mem(const gpp_progress_t *self, int stage)
{
    assert(stage >= 0 && stage < self->n_stages);
    return self->mem_measured[stage];
}

int64_t gpp_progress_stage_mem_predicted(const gpp_progress_t *self, int stage)
{
    assert(stage >= 0 && stage < self->n_stages);
    int64_t p = self->mem_predicted[stage];
    return p ? p + self->mem_backend[stage] : 0;
}

double gpp_progress_loss(const gpp_progress_t *self, int iteration)
{
    if (iteration < 0 || iteration >= self->done)
        return NAN;
    return self->loss[iteration];
}

void gpp_progress_summary(const gpp_progress_t *self, gpp_progress_summary_t *out)
{
    memset(out, 0, sizeof *out);
    out->iterations_done = self->done;
    out->loss_first = self->done ? self->loss[0] : NAN;
    out->loss_last = self->done ? self->loss[self->done - 1] : NAN;
    double sum = 0;
    int n = 0;
    for (int i = self->done > 1 ? 1 : 0; i < self->done; i++) {
        sum += self->iter_ms[i];
        n++;
    }
    out->iteration_ms = n ? sum / n : 0;
    out->samples_per_s = out->iteration_ms > 0 ? self->batch * 1000.0 / out->iteration_ms : 0;
    for (int i = 0; i < self->done; i++)
        for (int r = 0; r < self->n_agents; r++) {
            double b =
                (double)self->cells[(size_t)i * (size_t)self->n_agents + (size_t)r].mem_bytes;
            if (b > out->max_mem_bytes)
                out->max_mem_bytes = b;
        }
}

int gpp_progress_done(const gpp_progress_t *self)
{
    return self->done;
}

double gpp_progress_iteration_ms(const gpp_progress_t *self, int iteration)
{
    if (iteration < 0 || iteration >= self->done)
        return NAN;
    return self->iter_ms[iteration];
}

int gpp_progress_rank(const gpp_progress_t *self, int iteration, int rank, gpp_progress_rank_t *out)
{
    if (iteration < 0 || iteration >= self->done || rank < 0 || rank >= self->n_agents ||
        self->stage_of_rank[rank] < 0)
        return -1;
    const s_cell_t *c = &self->cells[(size_t)iteration * (size_t)self->n_agents + (size_t)rank];
    out->iteration_ms = c->iteration_ms;
    out->bubble_ms = c->bubble_ms;
    out->mem_bytes = c->mem_bytes;
    out->n_action_ms = c->n_action_ms;
    out->action_ms = c->action_ms;
    return 0;
}
