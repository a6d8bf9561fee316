/* gpp_timeline: see gpp_timeline.h. */
#include "coordinator/gpp_timeline.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/gpp_trace.h"

struct gpp_timeline_s {
    const gpp_plan_t *p;
    int iteration;
    int n_ranks;        /* the plan's devices */
    int *stage;         /* [n_ranks] */
    int *replica;       /* [n_ranks] */
    int64_t **start_us; /* [n_ranks][actions of the rank], NULL: not in */
    int64_t **end_us;
};

gpp_timeline_t *gpp_timeline_new(const gpp_plan_t *p, int iteration)
{
    assert(p && iteration >= 0);
    gpp_timeline_t *self = gpp_xcalloc(1, sizeof *self);
    self->p = p;
    self->iteration = iteration;
    self->n_ranks = p->n_devices;
    size_t n = (size_t)(p->n_devices > 0 ? p->n_devices : 1);
    self->stage = gpp_xcalloc(n, sizeof *self->stage);
    self->replica = gpp_xcalloc(n, sizeof *self->replica);
    self->start_us = gpp_xcalloc(n, sizeof *self->start_us);
    self->end_us = gpp_xcalloc(n, sizeof *self->end_us);
    for (int r = 0; r < self->n_ranks; r++)
        self->stage[r] = -1;
    for (int s = 0; s < p->n_stages; s++)
        for (int q = 0; q < p->stages[s].devices; q++) {
            int r = p->stages[s].first_device + q;
            assert(r >= 0 && r < self->n_ranks);
            self->stage[r] = s;
            self->replica[r] = q;
        }
    return self;
}

void gpp_timeline_destroy(gpp_timeline_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_timeline_t *self = *self_p;
    for (int r = 0; r < self->n_ranks; r++) {
        free(self->start_us[r]);
        free(self->end_us[r]);
    }
    free(self->start_us);
    free(self->end_us);
    free(self->stage);
    free(self->replica);
    free(self);
    *self_p = NULL;
}

static const gpp_actions_t *s_list(const gpp_timeline_t *self, int rank)
{
    return &self->p->stages[self->stage[rank]].replica[self->replica[rank]];
}

int gpp_timeline_add(gpp_timeline_t *self, int rank, const Gpp__Metrics *m, gpp_err_t *err)
{
    if (m->n_action_start_us == 0)
        return 0;
    if (rank < 0 || rank >= self->n_ranks || self->stage[rank] < 0)
        return gpp_err_set(err, "action times from rank %d, which has no stage in the plan", rank);
    if (m->iteration != self->iteration)
        return gpp_err_set(err, "action times of iteration %d from rank %d; iteration %d is traced",
                           m->iteration, rank, self->iteration);
    int n = s_list(self, rank)->n;
    if (m->n_action_start_us != (size_t)n)
        return gpp_err_set(err, "%zu action times from rank %d, whose list has %d actions",
                           m->n_action_start_us, rank, n);
    if (self->start_us[rank])
        return gpp_err_set(err, "action times from rank %d a second time", rank);
    /* gpp_msg validated the lengths, end >= start and the order */
    self->start_us[rank] = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    self->end_us[rank] = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    memcpy(self->start_us[rank], m->action_start_us, (size_t)n * sizeof(int64_t));
    memcpy(self->end_us[rank], m->action_end_us, (size_t)n * sizeof(int64_t));
    return 0;
}

int gpp_timeline_ranks(const gpp_timeline_t *self)
{
    int k = 0;
    for (int r = 0; r < self->n_ranks; r++)
        k += self->start_us[r] != NULL;
    return k;
}

static int s_busy(gpp_act_type_t t)
{
    return gpp_act_is_pass(t) || t == GPP_ACT_ALLREDUCE || t == GPP_ACT_STEP;
}

int gpp_timeline_write(const gpp_timeline_t *self, const gpp_sim_t *sim,
                       const gpp_clock_est_t *clocks, const char *path, FILE *out,
                       gpp_timeline_summary_t *sum, gpp_err_t *err)
{
    const gpp_plan_t *p = self->p;
    int ranks = gpp_timeline_ranks(self);
    if (ranks == 0)
        return gpp_err_set(err, "trace %s: no agent reported its action times of iteration %d",
                           path, self->iteration);
    /* each rank's offset at the traced iteration (drift corrected: the
       clock may have moved since the best round trip) */
    int64_t *off_at = gpp_xcalloc((size_t)self->n_ranks + 1, sizeof *off_at);
    for (int r = 0; r < self->n_ranks; r++)
        if (clocks[r].samples)
            off_at[r] = self->start_us[r] && s_list(self, r)->n > 0
                            ? gpp_clock_est_offset_at(&clocks[r],
                                                      self->start_us[r][0] - clocks[r].offset_us)
                            : clocks[r].offset_us;
    /* the iteration's first start and last end on our clock */
    int64_t t0 = INT64_MAX, t1 = INT64_MIN;
    for (int r = 0; r < self->n_ranks; r++) {
        int n = self->start_us[r] ? s_list(self, r)->n : 0;
        if (n == 0)
            continue;
        int64_t off = off_at[r];
        if (self->start_us[r][0] - off < t0)
            t0 = self->start_us[r][0] - off;
        if (self->end_us[r][n - 1] - off > t1)
            t1 = self->end_us[r][n - 1] - off;
    }
    if (t0 == INT64_MAX) /* every reporting rank has an empty list */
        t0 = t1 = 0;
    double iter_us = (double)(t1 - t0);
    double *busy_us = gpp_xcalloc((size_t)p->n_stages, sizeof *busy_us);
    double *off_us = gpp_xcalloc((size_t)self->n_ranks + 1, sizeof *off_us);
    double *delay_us = gpp_xcalloc((size_t)self->n_ranks + 1, sizeof *delay_us);
    double *drift_ppm = gpp_xcalloc((size_t)self->n_ranks + 1, sizeof *drift_ppm);

    gpp_trace_t *t = gpp_trace_new();
    gpp_trace_info_num(t, "iteration", self->iteration);
    gpp_trace_info_num(t, "measured_iteration_ms", iter_us / 1e3);
    gpp_trace_info_num(t, "simulated_iteration_ms", gpp_sim_iteration_ms(sim));
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        char name[64];
        snprintf(name, sizeof name, "measured stage %d", s);
        gpp_trace_process(t, s, name, s);
        snprintf(name, sizeof name, "simulated stage %d", s);
        gpp_trace_process(t, p->n_stages + s, name, p->n_stages + s);
        for (int q = 0; q < st->devices; q++) {
            snprintf(name, sizeof name, "replica %d (rank %d)", q, st->first_device + q);
            gpp_trace_thread(t, s, q, name);
            gpp_trace_thread(t, p->n_stages + s, q, name);
            snprintf(name, sizeof name, "replica %d sends", q);
            gpp_trace_thread(t, p->n_stages + s, st->devices + q, name);
        }
    }
    for (int r = 0; r < self->n_ranks; r++) {
        off_us[r] = clocks[r].samples ? (double)off_at[r] : NAN;
        delay_us[r] = clocks[r].samples ? (double)clocks[r].delay_us : NAN;
        drift_ppm[r] = clocks[r].samples ? gpp_clock_est_drift_ppm(&clocks[r]) : NAN;
        if (!self->start_us[r])
            continue;
        const gpp_actions_t *l = s_list(self, r);
        int s = self->stage[r];
        int64_t off = off_at[r];
        double busy = 0;
        for (int i = 0; i < l->n; i++) {
            char name[128];
            gpp_trace_action_name(&l->a[i], name, sizeof name);
            double dur = (double)(self->end_us[r][i] - self->start_us[r][i]);
            gpp_trace_span(t, s, self->replica[r], name, gpp_trace_action_cat(&l->a[i]),
                           (double)(self->start_us[r][i] - off - t0), dur, s, l->a[i].mb);
            if (s_busy(l->a[i].type))
                busy += dur;
        }
        if (busy > busy_us[s])
            busy_us[s] = busy;
    }
    gpp_trace_info_nums(t, "clock_offset_us", off_us, self->n_ranks);
    gpp_trace_info_nums(t, "clock_delay_us", delay_us, self->n_ranks);
    gpp_trace_info_nums(t, "clock_drift_ppm", drift_ppm, self->n_ranks);
    const gpp_sim_event_t *ev;
    int n_ev = gpp_sim_events(sim, &ev);
    for (int i = 0; i < n_ev; i++) {
        const gpp_stage_t *st = &p->stages[ev[i].stage];
        gpp_trace_span(t, p->n_stages + ev[i].stage,
                       ev[i].row ? st->devices + ev[i].replica : ev[i].replica, ev[i].name,
                       ev[i].row ? "comm" : "compute", ev[i].ts_ms * 1e3, ev[i].dur_ms * 1e3,
                       ev[i].stage, ev[i].mb);
    }
    int rc = gpp_trace_write(t, path, err);
    gpp_trace_destroy(&t);
    if (rc == 0 && out) {
        double sim_ms = gpp_sim_iteration_ms(sim), worst = 0;
        fprintf(out,
                "trace: iteration %d measured %.3f ms, simulated %.3f ms (x%.2f); bubble "
                "measured/simulated:",
                self->iteration, iter_us / 1e3, sim_ms, sim_ms > 0 ? iter_us / 1e3 / sim_ms : NAN);
        for (int s = 0; s < p->n_stages; s++) {
            const gpp_sim_stage_t *ss = gpp_sim_stage(sim, s);
            fprintf(out, " s%d %.0f%%/%.0f%%", s,
                    iter_us > 0 ? 100.0 * (iter_us - busy_us[s]) / iter_us : 0,
                    sim_ms > 0 ? 100.0 * ss->bubble_ms / sim_ms : 0);
        }
        for (int r = 0; r < self->n_ranks; r++)
            if (clocks[r].samples && fabs(off_us[r]) > worst)
                worst = fabs(off_us[r]);
        fprintf(out, "; clock offsets <= %.0f us; %d of %d ranks -> %s\n", worst, ranks,
                self->n_ranks, path);
        fflush(out);
    }
    if (sum)
        *sum = (gpp_timeline_summary_t){.measured_ms = iter_us / 1e3,
                                        .simulated_ms = gpp_sim_iteration_ms(sim),
                                        .ranks = ranks};
    free(busy_us);
    free(off_us);
    free(delay_us);
    free(drift_ppm);
    free(off_at);
    return rc;
}
