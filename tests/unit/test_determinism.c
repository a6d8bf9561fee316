/* test_determinism: same inputs, same plan (issue 9). The partitioner run
 * twice on the same graph, cost, memory bound and devices, each time from a
 * freshly built graph and cost model, gives byte-identical plan JSON
 * (schedule included) apart from search_ms: on zoo models with the
 * roofline, and on a profile where every op takes the same time, so that
 * many stage choices tie and only the search's tie-break decides. */
#include <stdlib.h>
#include <string.h>

#include "model/gpp_graph.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_profile_io.h"
#include "planner/gpp_sched.h"
#include "tests/gpp_test.h"

/* A profile.json text (the authors' schema) giving every op of g the same
 * forward+backward time at every micro-batch size listed. */
static char *s_tie_profile(const gpp_graph_t *g)
{
    size_t cap = 256 + (size_t)g->n_ops * (GPP_NAME_LEN + 96), len = 0;
    char *t = malloc(cap);
    len += (size_t)snprintf(t + len, cap - len, "{");
    for (int i = 0; i < g->n_ops; i++)
        len += (size_t)snprintf(t + len, cap - len,
                                "%s\"%d\": {\"name\": \"%s\", \"runtime\": {\"1\": 1.0, \"4\": "
                                "2.0, \"16\": 5.0}}",
                                i ? "," : "", i, g->ops[i].name);
    snprintf(t + len, cap - len, "}");
    return t;
}

/* One planning from scratch; the plan's JSON with search_ms zeroed, or NULL. */
static char *s_plan_json(const char *spec, int devices, int batch, int spp, int tie)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build(spec, &err);
    GPP_EXPECT_MSG(g != NULL, "%s: %s", spec, err.msg);
    if (!g)
        return NULL;
    if (!g->finalized)
        GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t cl;
    GPP_EXPECT(gpp_cluster_init(&cl, "v100-16g", devices, 4, &err) == 0);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    if (tie) {
        char *text = s_tie_profile(g);
        gpp_profile_t *prof = gpp_profile_io_parse(text, "tie.json", &err);
        GPP_EXPECT_MSG(prof && gpp_cost_attach_profile(cost, prof, &err) == 0, "%s", err.msg);
        gpp_profile_destroy(&prof);
        free(text);
    }
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, batch);
    o.spp = spp;
    char *json = NULL;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(p != NULL, "%s on %d: %s", spec, devices, err.msg);
    if (p) {
        GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
        p->search_ms = 0;
        json = gpp_plan_to_json(p);
    }
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
    return json;
}

static void s_check(const char *spec, int devices, int batch, int spp, int tie)
{
    char *a = s_plan_json(spec, devices, batch, spp, tie);
    char *b = s_plan_json(spec, devices, batch, spp, tie);
    GPP_EXPECT_MSG(a && b && strcmp(a, b) == 0,
                   "%s on %d devices (spp %d, tie %d): two runs give different plans", spec,
                   devices, spp, tie);
    /* the compared text is a whole plan: stages and the lowered schedule */
    GPP_EXPECT(a && strstr(a, "\"stages\"") && strstr(a, "\"schedule\"") &&
               strstr(a, "\"search_ms\""));
    free(a);
    free(b);
}

static void t_zoo_roofline(void)
{
    static const struct {
        const char *spec;
        int batch;
    } models[] = {
        {"mmt:branches=4,layers=2,hidden=128,heads=4,seq=32,ffn=256", 64},
        {"candle_uno", 256},
        {"dlrm", 256},
    };
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        for (int spp = 0; spp < 2; spp++) {
            s_check(models[i].spec, 4, models[i].batch, spp, 0);
            s_check(models[i].spec, 8, models[i].batch, spp, 0);
        }
}

static void t_tied_profile(void)
{
    /* identical branches with identical profiled times: every branch-to-
       device assignment ties */
    const char *spec = "candle_uno:branches=4,layers=2,hidden=64,in=64";
    for (int spp = 0; spp < 2; spp++) {
        s_check(spec, 4, 64, spp, 1);
        s_check(spec, 8, 64, spp, 1);
    }
    s_check("mmt:branches=4,layers=2,hidden=128,heads=4,seq=32,ffn=256", 8, 64, 0, 1);
}

static const gpp_test_case_t cases[] = {
    {"zoo_roofline", t_zoo_roofline},
    {"tied_profile", t_tied_profile},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
