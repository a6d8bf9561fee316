/* test_plan_io: "gpp-plan/1" JSON round trip and the reader's validation
 * errors; "gpp-plan/2" (zero-bubble orders) likewise; strategy file and DOT
 * shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_graph.h"
#include "planner/gpp_plan.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_zb.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

static gpp_plan_t *s_plan(const gpp_graph_t *g)
{
    static const int st_ops[4][2] = {{0, 1}, {2, -1}, {3, -1}, {4, 5}};
    static const int devs[4] = {2, 1, 1, 1}, inflight[4] = {12, 8, 8, 4};
    gpp_plan_t *p = gpp_plan_new("gpp", g, 5, 16);
    for (int s = 0; s < 4; s++) {
        gpp_stage_t *st = gpp_plan_add_stage(p, st_ops[s][1] < 0 ? 1 : 2, st_ops[s]);
        st->devices = devs[s];
        st->micro_batch = 4;
        st->inflight = inflight[s];
        st->tps_ms = 0.25 * (s + 1);
        st->mem_bytes = (int64_t)3 << 32; /* above 2^32: must survive as an integer */
    }
    p->micro_batch = 4;
    p->bottleneck_tps_ms = 1.0;
    p->iteration_ms = 21.5;
    p->throughput = 744.186;
    p->search_ms = 3.25;
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_plan_link(p, g, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    return p;
}

static void t_round_trip(void)
{
    gpp_graph_t *g = gpp_fixture_diamond(16);
    gpp_plan_t *p = s_plan(g);
    /* a node-aligned placement, not gpp_plan_link's consecutive one, survives */
    p->n_devices = 8;
    GPP_EXPECT(gpp_plan_place(p, 2) == 1);
    p->stages[3].first_device = 7; /* and one that is not consecutive for sure */
    GPP_EXPECT_MSG(gpp_sched_validate(p, g, &(gpp_err_t){{0}}) == 0, "placed plan invalid");
    char *json = gpp_plan_to_json(p);
    gpp_err_t err = {{0}};
    gpp_plan_t *q = gpp_plan_parse_json(json, "mem", g, &err);
    GPP_EXPECT_MSG(q != NULL, "%s", err.msg);
    if (q) {
        GPP_EXPECT(strcmp(q->planner, "gpp") == 0 && q->n_devices == 8 && q->batch == 16);
        GPP_EXPECT(q->micro_batch == 4 && q->depth == 3 && q->n_stages == 4);
        GPP_EXPECT(q->iteration_ms == 21.5 && q->search_ms == 3.25 && q->throughput == 744.186);
        for (int s = 0; s < 4; s++) {
            const gpp_stage_t *a = &p->stages[s], *b = &q->stages[s];
            GPP_EXPECT(a->n_ops == b->n_ops && !memcmp(a->ops, b->ops, sizeof(int) * a->n_ops));
            GPP_EXPECT(a->devices == b->devices && a->first_device == b->first_device);
            GPP_EXPECT(a->micro_batch == b->micro_batch && a->k == b->k);
            GPP_EXPECT(a->inflight == b->inflight && a->tps_ms == b->tps_ms);
            GPP_EXPECT(a->mem_bytes == b->mem_bytes);
            GPP_EXPECT(a->n_succ == b->n_succ);
            GPP_EXPECT(a->compute.n == b->compute.n &&
                       !memcmp(a->compute.a, b->compute.a, sizeof *a->compute.a * a->compute.n));
            /* the reader lowers the plan too */
            GPP_EXPECT(b->replica && b->replica[0].n == a->replica[0].n);
        }
        char *again = gpp_plan_to_json(q);
        GPP_EXPECT(strcmp(json, again) == 0);
        free(again);
    }
    gpp_plan_destroy(&q);
    free(json);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* Replaces the first occurrence of `from` in json by `to`, parses it and
 * expects an error containing `want`. */
static void s_bad(const gpp_graph_t *g, const char *json, const char *from, const char *to,
                  const char *want)
{
    const char *at = strstr(json, from);
    GPP_EXPECT_MSG(at != NULL, "'%s' not in the JSON", from);
    if (!at)
        return;
    size_t n = strlen(json) + strlen(to) + 1;
    char *bad = malloc(n);
    snprintf(bad, n, "%.*s%s%s", (int)(at - json), json, to, at + strlen(from));
    gpp_err_t err = {{0}};
    gpp_plan_t *q = gpp_plan_parse_json(bad, "plan.json", g, &err);
    GPP_EXPECT_MSG(q == NULL && strstr(err.msg, want) != NULL, "'%s' -> '%s': got '%s'", from, to,
                   err.msg);
    gpp_plan_destroy(&q);
    free(bad);
}

static void t_reader_errors(void)
{
    gpp_graph_t *g = gpp_fixture_diamond(16);
    gpp_plan_t *p = s_plan(g);
    char *json = gpp_plan_to_json(p);
    s_bad(g, json, "gpp-plan/1", "gpp-plan/9", "format 'gpp-plan/9' is not 'gpp-plan/1'");
    s_bad(g, json, "\"batch\":", "\"batch\"::", "plan.json:");
    s_bad(g, json, "\"diamond\"", "\"mmt\"", "plan is for model 'mmt'");
    s_bad(g, json, "\"batch\":\t16", "\"batch\":\t\"16\"", "plan.batch: expected an integer");
    s_bad(g, json, "\"planner\":\t\"gpp\"", "\"planner\":\t\"pp\"", "planner: expected");
    s_bad(g, json, "\"micro_batch\":\t4,\n\t\t\t\"k\"", "\"micro_batch\":\t0,\n\t\t\t\"k\"",
          "stages[0].micro_batch: expected an integer in [1, 16]");
    s_bad(g, json, "\"ops\":\t[0, 1]", "\"ops\":\t[0, 1, 2]", "C1");
    s_bad(g, json, "\"ops\":\t[0, 1]", "\"ops\":\t[0, 7]", "stages[0].ops[1]");
    s_bad(g, json, "\"succ\":\t[1, 2]", "\"succ\":\t[1]", "stages[0].succ does not match");
    s_bad(g, json, "\"depth\":\t3", "\"depth\":\t2", "longest path has 3 stages");
    s_bad(g, json, "\"F0\", \"F1\"", "\"F1\", \"F0\"", "C4: stage 0");
    s_bad(g, json, "\"F0\"", "\"X0\"", "schedule[0][0]: expected \"F<mb>\"");
    s_bad(g, json, "\"devices\":\t5", "\"devices\":\t3",
          "stages[2].first_device: expected an integer in [0, 2]");
    s_bad(g, json, "\"first_device\":\t2", "\"first_device\":\t1",
          "C3: device 1 is given to stages 0 and 1");
    s_bad(g, json, "\"inflight\":\t12", "\"inflight\":\t-1", "stages[0].inflight");
    free(json);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_read_json("/nonexistent/plan.json", g, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "/nonexistent/plan.json") != NULL, "%s", err.msg);
    GPP_EXPECT(gpp_plan_parse_json("[1]", "x.json", g, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "expected a JSON object") != NULL, "%s", err.msg);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_strategy_and_dot(void)
{
    gpp_graph_t *g = gpp_fixture_diamond(16);
    gpp_plan_t *p = s_plan(g);
    char *s = gpp_plan_to_strategy(p);
    GPP_EXPECT_MSG(strcmp(s, "6 0 0 1 2 3 3\n4 4 12 1 2 4 8 1 1 4 8 1 1 4 4 1 1\n") == 0, "%s", s);
    free(s);
    char *d = gpp_plan_to_dot(p, g);
    GPP_EXPECT(strstr(d, "digraph") && strstr(d, "s0 -> s1 [label=\"a\"]") &&
               strstr(d, "s0 -> s2") && strstr(d, "s1 -> s3 [label=\"b\"]") &&
               strstr(d, "s2 -> s3"));
    free(d);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* A zero-bubble plan is written as gpp-plan/2 with its kind, W delays and
 * W tokens, read back to the same orders, and refused where the kind, the
 * format and the orders disagree; a 1F1B plan has none of the keys. */
static void t_zb_round_trip(void)
{
    gpp_graph_t *g = gpp_fixture_diamond(16);
    gpp_plan_t *p = s_plan(g);
    char *json1 = gpp_plan_to_json(p);
    GPP_EXPECT(strstr(json1, "gpp-plan/1") && !strstr(json1, "schedule_kind") &&
               !strstr(json1, "w_delay") && !strstr(json1, "\"W0\""));
    free(json1);
    gpp_zb_shape(p, GPP_SCHED_ZB_H1);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    char *json = gpp_plan_to_json(p);
    GPP_EXPECT(strstr(json, "\"gpp-plan/2\"") && strstr(json, "\"schedule_kind\":\t\"zb-h1\"") &&
               strstr(json, "\"w_delay\"") && strstr(json, "\"W0\""));
    gpp_plan_t *q = gpp_plan_parse_json(json, "mem", g, &err);
    GPP_EXPECT_MSG(q != NULL, "%s", err.msg);
    if (q) {
        GPP_EXPECT(q->schedule == GPP_SCHED_ZB_H1);
        for (int s = 0; s < p->n_stages; s++) {
            const gpp_stage_t *a = &p->stages[s], *b = &q->stages[s];
            GPP_EXPECT(a->w_delay == b->w_delay);
            GPP_EXPECT(a->compute.n == b->compute.n &&
                       !memcmp(a->compute.a, b->compute.a, sizeof *a->compute.a * a->compute.n));
        }
        char *again = gpp_plan_to_json(q);
        GPP_EXPECT(strcmp(json, again) == 0);
        free(again);
    }
    gpp_plan_destroy(&q);
    s_bad(g, json, "gpp-plan/2", "gpp-plan/1", "schedule_kind: expected \"1f1b\"");
    s_bad(g, json, "\"zb-h1\"", "\"auto\"", "schedule_kind: expected \"zb-h1\" or \"zb-h2\"");
    s_bad(g, json, "\"zb-h1\"", "\"1f1b\"", "schedule_kind: expected \"zb-h1\" or \"zb-h2\"");
    s_bad(g, json, "\"zb-h1\"", "\"zb-v\"", "schedule_kind: expected \"zb-h1\" or \"zb-h2\"");
    s_bad(g, json, "\"w_delay\":\t", "\"w_delay\":\t9", "stages[0].w_delay");
    s_bad(g, json, "\"W0\"", "\"B0\"", "C4: stage 0");
    free(json);
    /* W tokens in a /1 file */
    gpp_zb_shape(p, GPP_SCHED_1F1B);
    GPP_EXPECT(gpp_sched_build(p, g, &err) == 0);
    json = gpp_plan_to_json(p);
    s_bad(g, json, "\"B0\"", "\"W0\"", "a W pass in a 1F1B plan");
    free(json);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {
    {"round_trip", t_round_trip},
    {"reader_errors", t_reader_errors},
    {"zb_round_trip", t_zb_round_trip},
    {"strategy_and_dot", t_strategy_and_dot},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
