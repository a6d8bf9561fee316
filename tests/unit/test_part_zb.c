/* test_part_zb: the partitioner's search prices the schedule it plans
 * (docs/planner.md "Pricing the schedule in the search").
 *
 * - fill_shapes: a stage's fill and drain part under each schedule is the
 *   zero-bubble paper's per-stage bubble (1F1B F + B + W, ZB-H1
 *   F + B - W, ZB-H2 F + B - 2W; B the input part), never below F and its
 *   transfers;
 * - estimate_order: on zoo plans the zero-bubble estimates lie between
 *   TPS * B and the 1F1B estimate, zb-h2's at most zb-h1's, and the 1F1B
 *   one is the search's own;
 * - zb_search_not_worse: the plan a zero-bubble search returns simulates no
 *   slower under that schedule than the 1F1B search's plan does under it
 *   (pricing zero-bubble only adds candidates). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/gpp_test.h"
#include "model/gpp_graph.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_part.h"
#include "planner/gpp_part_impl.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "planner/gpp_zb.h"

static void t_fill_shapes(void)
{
    /* F = B = W = 1 (bwd 2 of which W 1): 3, 1, and zb-h2 at the floor F */
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_1F1B, 1, 2, 1, 0) == 3);
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_ZB_H1, 1, 2, 1, 0) == 1);
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_ZB_H2, 1, 2, 1, 0) == 1);
    /* F 1, B 2, W 1 (bwd 3): F + B - W = 2, F + B - 2W = 1 */
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_1F1B, 1, 3, 1, 0) == 4);
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_ZB_H1, 1, 3, 1, 0) == 2);
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_ZB_H2, 1, 3, 1, 0) == 1);
    /* F 1, B 4, W 1 (bwd 5): zb-h2 F + B - 2W = 3 above the floor */
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_ZB_H2, 1, 5, 1, 0) == 3);
    /* transfers stay whole: with comm 0.5, F = B = W = 1 */
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_1F1B, 1, 2, 1, 0.5) == 3.5);
    GPP_EXPECT(gpp_part_fill_ms(GPP_SCHED_ZB_H1, 1, 2, 1, 0.5) == 1.5);
    /* no parameters, no W: nothing to fill the bubbles with */
    for (int k = 0; k < GPP_SCHED__COUNT; k++)
        GPP_EXPECT(gpp_part_fill_ms((gpp_sched_kind_t)k, 1, 2, 0, 0.25) == 3.25);
}

typedef struct {
    const char *spec;
    int n_dev, batch;
} s_case_t;

static const s_case_t s_cases[] = {
    {"mmt", 8, 128},
    {"dlrm", 8, 512},
    {"candle_uno", 8, 8192},
    {"transformer", 8, 128},
};

/* A zoo model's graph and cost model on n_dev v100-16g, 4 per node. */
static int s_setup(const s_case_t *c, gpp_graph_t **g, gpp_cost_t **cost, gpp_cluster_t *cl)
{
    gpp_err_t err = {{0}};
    *g = gpp_zoo_build(c->spec, &err);
    GPP_EXPECT_MSG(*g && gpp_graph_finalize(*g, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(gpp_cluster_init(cl, "v100-16g", c->n_dev, 4, &err) == 0, "%s", err.msg);
    *cost = *g ? gpp_cost_new(*g, cl) : NULL;
    return *cost ? 0 : -1;
}

static gpp_plan_t *s_search(const s_case_t *c, const gpp_graph_t *g, const gpp_cost_t *cost,
                            unsigned schedules)
{
    gpp_err_t err = {{0}};
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, c->batch);
    o.schedules = schedules;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(p != NULL, "%s: %s", c->spec, err.msg);
    return p;
}

static void t_estimate_order(void)
{
    for (size_t i = 0; i < sizeof s_cases / sizeof s_cases[0]; i++) {
        gpp_graph_t *g = NULL;
        gpp_cost_t *cost = NULL;
        gpp_cluster_t cl;
        if (s_setup(&s_cases[i], &g, &cost, &cl) == 0) {
            gpp_plan_t *p = s_search(&s_cases[i], g, cost, 0);
            if (p) {
                double e1 = gpp_part_iter_estimate(p, GPP_SCHED_1F1B),
                       h1 = gpp_part_iter_estimate(p, GPP_SCHED_ZB_H1),
                       h2 = gpp_part_iter_estimate(p, GPP_SCHED_ZB_H2),
                       floor = p->bottleneck_tps_ms * p->batch;
                printf("  %s %d dev: depth %d, estimate 1f1b %.2f zb-h1 %.2f zb-h2 %.2f ms "
                       "(TPS x B %.2f)\n",
                       s_cases[i].spec, s_cases[i].n_dev, p->depth, e1, h1, h2, floor);
                GPP_EXPECT(e1 == p->iteration_ms);
                GPP_EXPECT(floor <= h2 && h2 <= h1 && h1 <= e1);
                GPP_EXPECT(p->depth < 2 || h1 < e1);
            }
            gpp_plan_destroy(&p);
        }
        gpp_cost_destroy(&cost);
        gpp_graph_destroy(&g);
    }
}

/* p's simulated iteration under `kind`, shaped and fitted as the search
 * does; INFINITY when it does not fit the cluster's memory. */
static double s_sim_as(gpp_plan_t *p, const gpp_graph_t *g, const gpp_cost_t *cost,
                       const gpp_cluster_t *cl, gpp_sched_kind_t kind)
{
    gpp_err_t err = {{0}};
    if (kind != GPP_SCHED_1F1B)
        gpp_zb_shape(p, kind);
    if (gpp_zb_fit(p, cost, gpp_cluster_mem_bound(cl), NULL, &err) < 0)
        return INFINITY;
    GPP_EXPECT_MSG(gpp_sched_lower(p, g, &err) == 0, "%s", err.msg);
    gpp_sim_t *sim = gpp_sim_new(p, g, cost);
    GPP_EXPECT_MSG(gpp_sim_run(sim, &err) == 0, "%s", err.msg);
    double ms = gpp_sim_iteration_ms(sim);
    gpp_sim_destroy(&sim);
    return ms;
}

static void t_zb_search_not_worse(void)
{
    for (size_t i = 0; i < sizeof s_cases / sizeof s_cases[0]; i++) {
        gpp_graph_t *g = NULL;
        gpp_cost_t *cost = NULL;
        gpp_cluster_t cl;
        if (s_setup(&s_cases[i], &g, &cost, &cl) < 0)
            goto next;
        for (int kind = GPP_SCHED_ZB_H1; kind < GPP_SCHED__COUNT; kind++) {
            gpp_plan_t *one = s_search(&s_cases[i], g, cost, 0);
            gpp_plan_t *zb = s_search(&s_cases[i], g, cost, 1u << kind);
            if (one && zb) {
                GPP_EXPECT(zb->schedule == (gpp_sched_kind_t)kind);
                double base = s_sim_as(one, g, cost, &cl, (gpp_sched_kind_t)kind);
                double got = s_sim_as(zb, g, cost, &cl, (gpp_sched_kind_t)kind);
                printf("  %s %d dev %s: 1f1b search's plan %.3f ms, %s search's %.3f ms\n",
                       s_cases[i].spec, s_cases[i].n_dev,
                       gpp_sched_kind_name((gpp_sched_kind_t)kind), base,
                       gpp_sched_kind_name((gpp_sched_kind_t)kind), got);
                GPP_EXPECT(isfinite(got));
                GPP_EXPECT_MSG(got <= base * (1 + 1e-9), "%s: %.6f > %.6f", s_cases[i].spec, got,
                               base);
            }
            gpp_plan_destroy(&one);
            gpp_plan_destroy(&zb);
        }
    next:
        gpp_cost_destroy(&cost);
        gpp_graph_destroy(&g);
    }
}

static const gpp_test_case_t cases[] = {
    {"fill_shapes", t_fill_shapes},
    {"estimate_order", t_estimate_order},
    {"zb_search_not_worse", t_zb_search_not_worse},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
