/* test_timeline: the measured trace (coordinator/gpp_timeline.h) — agents'
 * action times moved onto the coordinator's clock by their offsets and
 * starting at 0, named like the simulator's spans, beside the simulated
 * stages; action times that do not fit the plan refused (the caller drops
 * and counts them); nothing to write or an unwritable path an error. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "coordinator/gpp_timeline.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "planner/gpp_trace.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

/* A 2-stage chain (in l1 | l2 loss), micro-batch 1, batch 3, lowered. */
static gpp_plan_t *s_plan(gpp_graph_t *g)
{
    gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 3);
    for (int s = 0; s < 2; s++) {
        gpp_stage_t *st = gpp_fixture_stage(p, 2 * s, 2 * s + 1, 1, 1);
        st->fwd_ms = 1, st->bwd_ms = 2;
        st->inflight = s == 0 ? 2 : 1;
    }
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_plan_link(p, g, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    return p;
}

/* Metrics of iteration `it` with n actions: action i runs [base + 10 i,
 * base + 10 i + 5) on the agent's clock. */
typedef struct {
    Gpp__Metrics m;
    double ms[64];
    int64_t start[64], end[64];
} s_metrics_t;

static void s_metrics(s_metrics_t *x, int it, int n, int64_t base)
{
    gpp__metrics__init(&x->m);
    x->m.iteration = it;
    for (int i = 0; i < n; i++) {
        x->ms[i] = 0.005;
        x->start[i] = base + 10 * i;
        x->end[i] = x->start[i] + 5;
    }
    x->m.n_action_ms = x->m.n_action_start_us = x->m.n_action_end_us = (size_t)n;
    x->m.action_ms = x->ms;
    x->m.action_start_us = x->start;
    x->m.action_end_us = x->end;
}

static double s_num(const cJSON *o, const char *k)
{
    return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static void t_clock_axis_and_names(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 8);
    gpp_plan_t *p = s_plan(g);
    int n0 = p->stages[0].replica[0].n, n1 = p->stages[1].replica[0].n;
    GPP_EXPECT(n0 > 0 && n0 <= 64 && n1 > 0 && n1 <= 64);
    gpp_timeline_t *tl = gpp_timeline_new(p, 1);
    gpp_err_t err = {{0}};
    /* rank 0's clock is 1 s ahead of ours, rank 1's 500 us behind; on ours
       rank 0 starts at 10100, rank 1 at 10120 */
    s_metrics_t a, b;
    s_metrics(&a, 1, n0, 10100 + 1000000);
    s_metrics(&b, 1, n1, 10120 - 500);
    GPP_EXPECT_MSG(gpp_timeline_add(tl, 0, &a.m, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(gpp_timeline_add(tl, 1, &b.m, &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_timeline_ranks(tl) == 2);
    gpp_clock_est_t clocks[2] = {{.offset_us = 1000000, .delay_us = 50, .samples = 3},
                                 {.offset_us = -500, .delay_us = 40, .samples = 2}};
    gpp_sim_t *sim = gpp_sim_new(p, g, NULL);
    GPP_EXPECT_MSG(gpp_sim_run(sim, &err) == 0, "%s", err.msg);
    char *path = gpp_fixture_tmpfile("timeline");
    gpp_timeline_summary_t sum;
    GPP_EXPECT_MSG(gpp_timeline_write(tl, sim, clocks, path, NULL, &sum, &err) == 0, "%s", err.msg);
    double want_ms = (fmax(10.0 * (n0 - 1), 20.0 + 10.0 * (n1 - 1)) + 5) / 1000.0;
    GPP_EXPECT_NEAR(sum.measured_ms, want_ms, 1e-9);
    GPP_EXPECT_NEAR(sum.simulated_ms, gpp_sim_iteration_ms(sim), 1e-9);
    GPP_EXPECT(sum.ranks == 2);

    long len = 0;
    char *text = (char *)gpp_fixture_slurp(path, &len);
    cJSON *root = text ? cJSON_ParseWithLength(text, (size_t)len) : NULL;
    GPP_EXPECT(root != NULL);
    const cJSON *other = cJSON_GetObjectItemCaseSensitive(root, "otherData");
    GPP_EXPECT_NEAR(s_num(other, "measured_iteration_ms"), want_ms, 1e-9);
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(other, "clock_offset_us");
    GPP_EXPECT(cJSON_GetArraySize(off) == 2 &&
               cJSON_GetNumberValue(cJSON_GetArrayItem(off, 0)) == 1000000 &&
               cJSON_GetNumberValue(cJSON_GetArrayItem(off, 1)) == -500);
    int seen[2] = {0}, sim_spans = 0, procs = 0, ok_ts = 1, ok_names = 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents"))
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        int pid = (int)s_num(e, "pid");
        if (strcmp(ph, "M") == 0 && strcmp(name, "process_name") == 0) {
            const char *pn = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(e, "args"), "name"));
            char want[64];
            snprintf(want, sizeof want, "%s stage %d", pid < 2 ? "measured" : "simulated", pid % 2);
            GPP_EXPECT_MSG(strcmp(pn, want) == 0, "pid %d: %s", pid, pn);
            procs++;
            continue;
        }
        if (strcmp(ph, "X") != 0)
            continue;
        if (pid >= 2) {
            sim_spans++;
            continue;
        }
        /* measured: the i-th span of rank `pid` at its place on our clock */
        int i = seen[pid]++;
        double want_ts = (pid == 0 ? 0 : 20) + 10.0 * i;
        ok_ts &= s_num(e, "ts") == want_ts && s_num(e, "dur") == 5 && s_num(e, "tid") == 0;
        char want[128];
        gpp_trace_action_name(&p->stages[pid].replica[0].a[i], want, sizeof want);
        ok_names &= strcmp(name, want) == 0;
    }
    GPP_EXPECT_MSG(seen[0] == n0 && seen[1] == n1, "%d/%d and %d/%d spans", seen[0], n0, seen[1],
                   n1);
    GPP_EXPECT(ok_ts && ok_names && procs == 4);
    const gpp_sim_event_t *ev;
    GPP_EXPECT(sim_spans == gpp_sim_events(sim, &ev) && sim_spans > 0);
    cJSON_Delete(root);
    free(text);

    /* an unwritable path: an error naming it, nothing else touched */
    GPP_EXPECT(gpp_timeline_write(tl, sim, clocks, "/nonexistent-dir/t.json", NULL, NULL, &err) ==
               -1);
    GPP_EXPECT_MSG(strstr(err.msg, "/nonexistent-dir/t.json"), "%s", err.msg);
    unlink(path);
    free(path);
    gpp_sim_destroy(&sim);
    gpp_timeline_destroy(&tl);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_refused_times(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 8);
    gpp_plan_t *p = s_plan(g);
    int n0 = p->stages[0].replica[0].n;
    gpp_timeline_t *tl = gpp_timeline_new(p, 2);
    gpp_err_t err = {{0}};
    s_metrics_t x;
    static const struct {
        int rank, iteration, n;
        const char *expect;
    } rows[] = {
        {0, 1, -1, "action times of iteration 1 from rank 0; iteration 2 is traced"},
        {0, 2, 1, "1 action times from rank 0, whose list has"},
        {5, 2, -1, "action times from rank 5, which has no stage in the plan"},
        {-1, 2, -1, "rank -1"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        s_metrics(&x, rows[i].iteration, rows[i].n < 0 ? n0 : rows[i].n, 1000);
        memset(&err, 0, sizeof err);
        GPP_EXPECT_MSG(gpp_timeline_add(tl, rows[i].rank, &x.m, &err) == -1, "row %zu taken", i);
        GPP_EXPECT_MSG(strstr(err.msg, rows[i].expect), "row %zu: '%s'", i, err.msg);
    }
    /* Metrics without times (every iteration but the traced one): nothing */
    s_metrics(&x, 1, n0, 1000);
    x.m.n_action_start_us = x.m.n_action_end_us = 0;
    GPP_EXPECT(gpp_timeline_add(tl, 0, &x.m, &err) == 0 && gpp_timeline_ranks(tl) == 0);
    /* nothing in: no trace */
    gpp_clock_est_t clocks[2] = {{.samples = 0}, {.samples = 0}};
    gpp_sim_t *sim = gpp_sim_new(p, g, NULL);
    GPP_EXPECT(gpp_sim_run(sim, &err) == 0);
    GPP_EXPECT(gpp_timeline_write(tl, sim, clocks, "/tmp/unused.json", NULL, NULL, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "no agent reported its action times of iteration 2"), "%s",
                   err.msg);
    /* a second report of the same rank */
    s_metrics(&x, 2, n0, 1000);
    GPP_EXPECT(gpp_timeline_add(tl, 0, &x.m, &err) == 0);
    GPP_EXPECT(gpp_timeline_add(tl, 0, &x.m, &err) == -1 && strstr(err.msg, "a second time"));
    GPP_EXPECT(gpp_timeline_ranks(tl) == 1);
    gpp_sim_destroy(&sim);
    gpp_timeline_destroy(&tl);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {{"clock_axis_and_names", t_clock_axis_and_names},
                                        {"refused_times", t_refused_times},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
