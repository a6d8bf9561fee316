/* test_observe: what the coordinator reports while it works — the
 * partitioner's progress hook (gpp_part_opts_t.on_candidate). */
#include <math.h>
#include <stdlib.h>

#include "model/gpp_graph.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_part.h"
#include "tests/gpp_test.h"

typedef struct {
    int calls, bad_b, worse;
} s_seen_t;

static void s_on_candidate(void *arg, int micro_batch, int depth, double est_ms, double best_ms)
{
    s_seen_t *s = arg;
    s->calls++;
    if (micro_batch < 0 || (micro_batch && 32 % micro_batch) || depth < 1 || !(est_ms > 0))
        s->bad_b++;
    if (!(best_ms <= est_ms)) /* the best of the pass includes this plan */
        s->worse++;
}

/* The hook sees every plan the search finds with a best-so-far no worse
 * than it, and it changes nothing: the same plan with and without it. */
static void t_part_progress_hook(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=2,layers=2,hidden=64,heads=4,seq=16", &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    if (!g)
        return;
    gpp_cluster_t cl;
    gpp_cluster_init(&cl, "v100-16g", 4, 4, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, 32);
    gpp_plan_t *plain = gpp_part_run(g, cost, &o, NULL, &err);
    s_seen_t seen = {0};
    o.on_candidate = s_on_candidate;
    o.on_candidate_arg = &seen;
    gpp_plan_t *hooked = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT(plain && hooked);
    GPP_EXPECT_MSG(seen.calls >= 2, "%d calls", seen.calls);
    GPP_EXPECT(seen.bad_b == 0);
    GPP_EXPECT_MSG(seen.worse == 0, "best so far above the plan just found %d times", seen.worse);
    if (plain && hooked) {
        GPP_EXPECT(plain->n_stages == hooked->n_stages && plain->micro_batch == hooked->micro_batch);
        GPP_EXPECT(plain->bottleneck_tps_ms == hooked->bottleneck_tps_ms);
        GPP_EXPECT(plain->iteration_ms == hooked->iteration_ms);
    }
    gpp_plan_destroy(&plain);
    gpp_plan_destroy(&hooked);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {
    {"part_progress_hook", t_part_progress_hook},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
