/* test_sim: the event simulator against closed forms on balanced plans,
 * communication and memory accounting, the Chrome trace, and every plan of
 * the zoo models (hand-cut and from the partitioner) passing C1-C4 and the
 * deadlock check. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "planner/gpp_cost.h"
#include "model/gpp_graph.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "planner/gpp_zb.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

static gpp_stage_t *s_stage(gpp_plan_t *p, int lo, int hi, int devices, int b, double fwd_ms,
                            double bwd_ms)
{
    gpp_stage_t *st = gpp_fixture_stage(p, lo, hi, devices, b);
    st->fwd_ms = fwd_ms;
    st->bwd_ms = bwd_ms;
    return st;
}

/* The partitioner's default 1F1B rule: a sink holds b samples, every other
 * stage b more than its most demanding successor (capped at the batch). */
static void s_default_inflight(gpp_plan_t *p)
{
    for (int s = p->n_stages - 1; s >= 0; s--) {
        gpp_stage_t *st = &p->stages[s];
        int most = 0;
        for (int k = 0; k < st->n_succ; k++)
            if (p->stages[st->succ[k]].inflight > most)
                most = p->stages[st->succ[k]].inflight;
        st->inflight = st->micro_batch + most;
        if (st->inflight > p->batch)
            st->inflight = p->batch;
    }
}

static double s_sim(gpp_plan_t *p, const gpp_graph_t *g, const gpp_cost_t *cost)
{
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_plan_link(p, g, &err) == 0, "%s", err.msg);
    s_default_inflight(p);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(gpp_sim_plan(p, g, cost, &err) == 0, "%s", err.msg);
    return p->iteration_ms;
}

static void t_balanced_chain_closed_form(void)
{
    /* (m + p - 1)(t_f + t_b) for every p, m with free communication */
    int ps[] = {1, 2, 3, 4, 6}, ms[] = {1, 2, 4, 7, 16};
    double tf = 1.25, tb = 2.5;
    double maxdiff = 0;
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
            int P = ps[i], m = ms[j];
            gpp_graph_t *g = gpp_fixture_chain(2 * P - 2, 16);
            gpp_plan_t *pl = gpp_plan_new("gpp", g, P, m);
            for (int s = 0; s < P; s++)
                s_stage(pl, 2 * s, 2 * s + 1, 1, 1, tf, tb);
            double it = s_sim(pl, g, NULL);
            double want = (m + P - 1) * (tf + tb);
            if (fabs(it - want) > maxdiff)
                maxdiff = fabs(it - want);
            GPP_EXPECT_MSG(fabs(it - want) < 1e-9, "p=%d m=%d: %.6f vs %.6f", P, m, it, want);
            { /* the last stage waits for micro-batch 0's forward on the P-1 before it */
                gpp_sim_t *bs = gpp_sim_new(pl, g, NULL);
                double bound = gpp_sim_bound_ms(bs), lb = (P - 1) * tf + m * (tf + tb);
                GPP_EXPECT_MSG(fabs(bound - lb) < 1e-9 && bound <= it + 1e-9,
                               "p=%d m=%d: bound %.6f, want %.6f (sim %.6f)", P, m, bound, lb, it);
                gpp_sim_destroy(&bs);
            }
            GPP_EXPECT_NEAR(pl->throughput, m / (want / 1000.0), 1e-6 * pl->throughput);
            gpp_plan_destroy(&pl);
            gpp_graph_destroy(&g);
        }
    printf("  balanced chain: max |sim - (m+p-1)(tf+tb)| = %.3g ms\n", maxdiff);
}

static void t_balanced_tps_formula(void)
{
    /* diamond, stage 0 data-parallel over 2 devices, b = 4, B = 32: TPS of
       every stage (fwd+bwd)/b + allreduce/B; iteration ~ TPS (B + (depth-1) b) */
    gpp_graph_t *g = gpp_fixture_diamond(16);
    int b = 4, B = 32;
    double tf = 1.0, tb = 2.0, ar = 0.05;
    gpp_plan_t *p = gpp_plan_new("gpp", g, 5, B);
    gpp_stage_t *st = s_stage(p, 0, 1, 2, b, tf, tb);
    st->allreduce_ms = ar;
    s_stage(p, 2, 2, 1, b, tf, tb);
    s_stage(p, 3, 3, 1, b, tf, tb);
    s_stage(p, 4, 5, 1, b, tf, tb);
    double it = s_sim(p, g, NULL);
    double tps = (tf + tb) / b + ar / B;
    double want = tps * (B + (p->depth - 1) * b);
    GPP_EXPECT(p->depth == 3);
    printf("  diamond: sim %.4f ms, TPS formula %.4f ms, rel diff %.3g\n", it, want,
           fabs(it - want) / want);
    GPP_EXPECT_MSG(fabs(it - want) <= 0.01 * want, "%.4f vs %.4f", it, want);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_memory_and_busy(void)
{
    gpp_graph_t *g = gpp_fixture_chain(6, 16);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 4, 16);
    for (int s = 0; s < 4; s++)
        s_stage(p, 2 * s, 2 * s + 1, 1, 2, 1, 2);
    GPP_EXPECT(s_sim(p, g, NULL) > 0);
    gpp_sim_t *sim = gpp_sim_new(p, g, NULL);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_sim_run(sim, &err) == 0);
    for (int s = 0; s < 4; s++) {
        const gpp_sim_stage_t *r = gpp_sim_stage(sim, s);
        /* 1F1B: stage s holds 4 - s micro-batches at its peak */
        GPP_EXPECT_MSG(r->peak_live_mbs == 4 - s, "stage %d: %d", s, r->peak_live_mbs);
        int64_t stash = 0, params = 0;
        for (int k = 0; k < p->stages[s].n_ops; k++) {
            stash += g->ops[p->stages[s].ops[k]].stash_bytes;
            params += g->ops[p->stages[s].ops[k]].params;
        }
        GPP_EXPECT(r->stash_peak_bytes == (4 - s) * 2 * stash);
        GPP_EXPECT(r->peak_mem_bytes == GPP_BYTES_PER_PARAM * params + r->stash_peak_bytes);
        GPP_EXPECT_NEAR(r->busy_ms, 8 * 3.0, 1e-9);
        GPP_EXPECT_NEAR(r->busy_ms + r->bubble_ms, gpp_sim_iteration_ms(sim), 1e-9);
    }
    gpp_sim_destroy(&sim);
    gpp_sim_destroy(&sim);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_comm_cost(void)
{
    /* two stages on two nodes, one micro-batch: the activation crosses the
       inter-node link forward and its gradient backward */
    gpp_graph_t *g = gpp_fixture_chain(2, 16);
    gpp_cluster_t cl;
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_cluster_init(&cl, "a100-80g", 2, 1, &err) == 0, "%s", err.msg);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 8);
    s_stage(p, 0, 1, 1, 8, 1, 2);
    s_stage(p, 2, 3, 1, 8, 1, 2);
    double it = s_sim(p, g, cost);
    double bytes = (double)g->ops[1].out_bytes * 8;
    double c = gpp_link_ms(gpp_cluster_link(&cl, 0, 1), bytes);
    gpp_sim_t *sim = gpp_sim_new(p, g, cost);
    GPP_EXPECT(gpp_sim_run(sim, &err) == 0);
    double step = gpp_sim_stage(sim, 0)->step_ms;
    GPP_EXPECT(step > 0);
    GPP_EXPECT(gpp_sim_stage(sim, 0)->allreduce_ms == 0);
    /* stage 0 finishes last: F, send, (F B on stage 1), send back, B, STEP */
    double want = 1 + c + 1 + 2 + c + 2 + step;
    GPP_EXPECT_MSG(fabs(it - want) < 1e-9, "%.6f vs %.6f (comm %.6f)", it, want, c);
    gpp_sim_destroy(&sim);
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* The same two-stage plan on h100-80g with both devices in one node and
 * with one device per node: each edge crossing costs the link of its kind
 * (NVLink4 vs NDR InfiniBand), so the iterations differ by exactly two
 * crossings' difference, forward activation and backward gradient. */
static void t_comm_intra_inter(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 16);
    gpp_err_t err = {{0}};
    double it[2];
    gpp_cluster_t cl[2];
    for (int k = 0; k < 2; k++) {
        GPP_EXPECT_MSG(gpp_cluster_init(&cl[k], "h100-80g", 2, k ? 1 : 2, &err) == 0, "%s",
                       err.msg);
        gpp_cost_t *cost = gpp_cost_new(g, &cl[k]);
        gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 8);
        s_stage(p, 0, 1, 1, 8, 1, 2);
        s_stage(p, 2, 3, 1, 8, 1, 2);
        it[k] = s_sim(p, g, cost);
        gpp_plan_destroy(&p);
        gpp_cost_destroy(&cost);
    }
    GPP_EXPECT(gpp_cluster_link(&cl[0], 0, 1) == &cl[0].intra);
    GPP_EXPECT(gpp_cluster_link(&cl[1], 0, 1) == &cl[1].inter);
    GPP_EXPECT(cl[0].intra.bw_bytes_per_s > cl[0].inter.bw_bytes_per_s);
    double bytes = (double)g->ops[1].out_bytes * 8;
    double diff = 2 * (gpp_link_ms(&cl[1].inter, bytes) - gpp_link_ms(&cl[0].intra, bytes));
    GPP_EXPECT(diff > 0);
    GPP_EXPECT_MSG(fabs((it[1] - it[0]) - diff) < 1e-9, "%.6f vs %.6f", it[1] - it[0], diff);
    gpp_graph_destroy(&g);
}

static void t_trace(void)
{
    gpp_graph_t *g = gpp_fixture_diamond(16);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 5, 8);
    s_stage(p, 0, 1, 2, 2, 1, 2)->allreduce_ms = 0.5;
    s_stage(p, 2, 2, 1, 2, 1, 2);
    s_stage(p, 3, 3, 1, 2, 1, 2);
    s_stage(p, 4, 5, 1, 2, 1, 2);
    s_sim(p, g, NULL);
    gpp_sim_t *sim = gpp_sim_new(p, g, NULL);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_sim_run(sim, &err) == 0);
    char *json = gpp_sim_trace_json(sim);
    cJSON *root = cJSON_Parse(json);
    GPP_EXPECT(root != NULL);
    cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    GPP_EXPECT(cJSON_IsArray(ev));
    int spans = 0, rows[8] = {0}, ok = 1;
    cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
        if (!ph || strcmp(ph, "X") != 0)
            continue;
        spans++;
        int tid = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "tid"));
        if (tid >= 0 && tid < 8)
            rows[tid]++;
        ok &= cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "ts")) &&
              cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(e, "dur")) &&
              cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name"));
    }
    /* 5 devices x (4 F + 4 B + STEP) + 2 ALLREDUCE */
    GPP_EXPECT_MSG(spans == 5 * 9 + 2, "%d spans", spans);
    GPP_EXPECT(ok);
    for (int d = 0; d < 5; d++)
        GPP_EXPECT(rows[d] == 9 + (d < 2));
    cJSON_Delete(root);
    free(json);
    GPP_EXPECT(gpp_sim_write_trace(sim, "/nonexistent-dir/trace.json", &err) == -1);
    gpp_sim_destroy(&sim);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_stall_reported(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 16);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 4);
    s_stage(p, 0, 1, 1, 1, 1, 2);
    s_stage(p, 2, 3, 1, 2, 1, 2);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    p->stages[0].inflight = 1; /* needs 4: the consumer takes two mbs at once */
    p->stages[1].inflight = 2;
    GPP_EXPECT(gpp_sched_compute(p, &err) == 0 && gpp_sched_lower(p, g, &err) == 0);
    GPP_EXPECT(gpp_sim_plan(p, g, NULL, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "stalls") && strstr(err.msg, "stage"), "%s", err.msg);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* Zoo models cut into contiguous op-id ranges (always convex: ids are a
 * topological order), default in-flight counts: C1-C4 and deadlock free. */
static void t_zoo_handmade_plans(void)
{
    const char *specs[] = {"mmt:branches=2,layers=2,hidden=64,heads=4,seq=16", "dlrm", "candle_uno",
                           "case_study", "transformer:layers=2,hidden=64,heads=4,seq=16"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        gpp_err_t err = {{0}};
        gpp_graph_t *g = gpp_zoo_build(specs[i], &err);
        GPP_EXPECT_MSG(g != NULL, "%s: %s", specs[i], err.msg);
        if (!g)
            continue;
        for (int P = 1; P <= 4; P++) {
            gpp_plan_t *p = gpp_plan_new("spp", g, P * 2, 16);
            int per = (g->n_ops + P - 1) / P;
            for (int s = 0; s < P && s * per < g->n_ops; s++) {
                int hi = (s + 1) * per - 1 < g->n_ops - 1 ? (s + 1) * per - 1 : g->n_ops - 1;
                s_stage(p, s * per, hi, 2, 4, 1, 2);
            }
            p->n_devices = 2 * p->n_stages;
            double it = s_sim(p, g, NULL);
            GPP_EXPECT_MSG(it > 0, "%s P=%d", specs[i], P);
            gpp_plan_destroy(&p);
        }
        gpp_graph_destroy(&g);
    }
}

/* Every plan the partitioner makes for the zoo models (GPP and SPP, default
 * and per-stage micro-batch + kFkB) passes C1-C4 and the deadlock check,
 * simulates, and keeps its simulated peak memory within the bound. Prints
 * simulated vs TPS-estimated iteration times. */
static void t_zoo_partitioner_plans(void)
{
    static const struct {
        const char *spec;
        int batch;
    } models[] = {
        {"mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=128", 32},
        {"mmt:branches=4,layers=2,hidden=128,heads=4,seq=32,ffn=256", 64},
        {"dlrm", 256},
        {"candle_uno", 256},
        {"case_study", 64},
    };
    static const int devices[] = {4, 8};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++) {
        gpp_err_t err = {{0}};
        gpp_graph_t *g = gpp_zoo_build(models[i].spec, &err);
        GPP_EXPECT_MSG(g != NULL, "%s: %s", models[i].spec, err.msg);
        if (!g)
            continue;
        for (size_t d = 0; d < sizeof devices / sizeof *devices; d++)
            for (int mode = 0; mode < 4; mode++) {
                gpp_cluster_t cl;
                GPP_EXPECT(gpp_cluster_init(&cl, "a100-80g", devices[d], 4, &err) == 0);
                gpp_cost_t *cost = gpp_cost_new(g, &cl);
                gpp_part_opts_t o;
                gpp_part_opts_default(&o, models[i].batch);
                o.spp = mode & 1;
                o.per_stage_mbs = o.kfkb = (mode & 2) != 0;
                o.max_mbs = 32; /* keeps the per-stage search short */
                int64_t min_mem = 0;
                gpp_plan_t *p = gpp_part_run(g, cost, &o, &min_mem, &err);
                GPP_EXPECT_MSG(p != NULL, "%s on %d (mode %d): %s", models[i].spec, devices[d],
                               mode, err.msg);
                if (p) {
                    int used = 0; /* the partitioner may leave devices idle */
                    for (int s = 0; s < p->n_stages; s++)
                        used += p->stages[s].devices;
                    GPP_EXPECT(used <= p->n_devices);
                    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s on %d (mode %d): %s",
                                   models[i].spec, devices[d], mode, err.msg);
                    gpp_sim_t *sim = gpp_sim_new(p, g, cost);
                    GPP_EXPECT_MSG(gpp_sim_run(sim, &err) == 0, "%s", err.msg);
                    double est = p->iteration_ms;
                    for (int s = 0; s < p->n_stages; s++) /* the planned stash holds */
                        GPP_EXPECT_MSG(gpp_sim_stage(sim, s)->stash_peak_bytes <=
                                           p->stages[s].act_bytes,
                                       "%s stage %d: stash %lld > planned %lld", models[i].spec, s,
                                       (long long)gpp_sim_stage(sim, s)->stash_peak_bytes,
                                       (long long)p->stages[s].act_bytes);
                    for (int s = 0; s < p->n_stages; s++)
                        GPP_EXPECT_MSG(gpp_sim_stage(sim, s)->peak_mem_bytes <=
                                           gpp_cluster_mem_bound(&cl),
                                       "%s stage %d: %lld bytes", models[i].spec, s,
                                       (long long)gpp_sim_stage(sim, s)->peak_mem_bytes);
                    printf("  %-10.10s %s%s on %d: %d stages, depth %d, estimate %.3f ms, "
                           "simulated %.3f ms (%.3fx)\n",
                           models[i].spec, o.spp ? "spp" : "gpp", mode & 2 ? "+mbs+kfkb" : "",
                           devices[d], p->n_stages, p->depth, est, gpp_sim_iteration_ms(sim),
                           gpp_sim_iteration_ms(sim) / est);
                    { /* the search skips a candidate by this bound: never above */
                        gpp_sim_t *bs = gpp_sim_new(p, g, cost);
                        double bound = gpp_sim_bound_ms(bs);
                        GPP_EXPECT_MSG(bound > 0 && bound <= gpp_sim_iteration_ms(sim) * (1 + 1e-9),
                                       "%s on %d (mode %d): bound %.6f > simulated %.6f",
                                       models[i].spec, devices[d], mode, bound,
                                       gpp_sim_iteration_ms(sim));
                        gpp_sim_destroy(&bs);
                    }
                    { /* the search's simulation: no spans, the same figures */
                        gpp_sim_t *bare = gpp_sim_new(p, g, cost);
                        gpp_sim_keep_events(bare, 0);
                        const gpp_sim_event_t *ev;
                        GPP_EXPECT(gpp_sim_run(bare, &err) == 0);
                        GPP_EXPECT(gpp_sim_iteration_ms(bare) == gpp_sim_iteration_ms(sim));
                        GPP_EXPECT(gpp_sim_events(bare, &ev) == 0 && gpp_sim_events(sim, &ev) > 0);
                        for (int s = 0; s < p->n_stages; s++)
                            GPP_EXPECT(gpp_sim_stage(bare, s)->peak_mem_bytes ==
                                           gpp_sim_stage(sim, s)->peak_mem_bytes &&
                                       gpp_sim_stage(bare, s)->busy_ms ==
                                           gpp_sim_stage(sim, s)->busy_ms);
                        gpp_sim_destroy(&bare);
                    }
                    gpp_sim_destroy(&sim);
                    /* the coordinator's path: JSON out, read back, same plan */
                    char *json = gpp_plan_to_json(p);
                    gpp_plan_t *q = gpp_plan_parse_json(json, models[i].spec, g, &err);
                    GPP_EXPECT_MSG(q != NULL, "%s", err.msg);
                    if (q) {
                        char *again = gpp_plan_to_json(q);
                        GPP_EXPECT(strcmp(json, again) == 0);
                        free(again);
                    }
                    gpp_plan_destroy(&q);
                    free(json);
                }
                gpp_plan_destroy(&p);
                gpp_cost_destroy(&cost);
            }
        gpp_graph_destroy(&g);
    }
}

/* Zero-bubble shapes on a balanced chain with free communication and F =
 * B = W = t (the paper's setting): 1F1B takes (m + p - 1) 3t, ZB-H1 3 m t +
 * (p - 1) t, its bubble cut to a third as in the paper. That is also the
 * least any schedule takes when the iterations do not overlap (the last
 * stage's first input comes after p - 1 forwards): ZB-H2 reaches it too (the
 * paper's zero bubble overlaps iterations by post-validating the optimizer
 * step, which gpp does not). Every stage is busy 3 m t: B + W = the
 * backward. */
static void t_zb_balanced_chain(void)
{
    int ps[] = {2, 3, 4, 6}, ms[] = {8, 12, 24};
    const double t = 1.0;
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        for (size_t j = 0; j < sizeof ms / sizeof *ms; j++) {
            int P = ps[i], m = ms[j];
            double it[GPP_SCHED__COUNT];
            for (int kind = 0; kind < GPP_SCHED__COUNT; kind++) {
                gpp_graph_t *g = gpp_fixture_chain(2 * P - 2, 16);
                gpp_plan_t *pl = gpp_plan_new("spp", g, P, m);
                for (int s = 0; s < P; s++)
                    s_stage(pl, 2 * s, 2 * s + 1, 1, 1, t, 2 * t)->bwd_w_ms = t;
                gpp_err_t err = {{0}};
                GPP_EXPECT_MSG(gpp_plan_link(pl, g, &err) == 0, "%s", err.msg);
                gpp_zb_shape(pl, (gpp_sched_kind_t)kind);
                GPP_EXPECT_MSG(gpp_sched_build(pl, g, &err) == 0, "%s", err.msg);
                GPP_EXPECT_MSG(gpp_sim_plan(pl, g, NULL, &err) == 0, "%s", err.msg);
                it[kind] = pl->iteration_ms;
                gpp_sim_t *sim = gpp_sim_new(pl, g, NULL);
                GPP_EXPECT(gpp_sim_run(sim, &err) == 0);
                for (int s = 0; s < P; s++) /* every stage computes 3 m t */
                    GPP_EXPECT_NEAR(gpp_sim_stage(sim, s)->busy_ms, 3 * m * t, 1e-9);
                gpp_sim_destroy(&sim);
                gpp_plan_destroy(&pl);
                gpp_graph_destroy(&g);
            }
            GPP_EXPECT_NEAR(it[GPP_SCHED_1F1B], (m + P - 1) * 3 * t, 1e-9);
            GPP_EXPECT_MSG(fabs(it[GPP_SCHED_ZB_H1] - (3 * m + P - 1) * t) < 1e-9,
                           "p=%d m=%d: zb-h1 %.3f, want %.3f", P, m, it[GPP_SCHED_ZB_H1],
                           (3 * m + P - 1) * t);
            GPP_EXPECT_MSG(fabs(it[GPP_SCHED_ZB_H2] - (3 * m + P - 1) * t) < 1e-9,
                           "p=%d m=%d: zb-h2 %.3f", P, m, it[GPP_SCHED_ZB_H2]);
            if (j == 0)
                printf("  balanced chain p=%d m=%d: 1f1b %.1f, zb-h1 %.1f, zb-h2 %.1f (3 m t = "
                       "%.1f)\n",
                       P, m, it[0], it[1], it[2], 3 * m * t);
        }
}

/* The memory of a zero-bubble order (gpp_zb_stage_mem: the stage's memory
 * plan with the backward split) on a plan of the partitioner (MMT, SPP
 * chain, universal micro-batch): with W delay 0 every stage keeps at least
 * its 1F1B peak; zb-h1's and zb-h2's deeper orders keep at
 * least as much as delay 0; the simulator reports the same figure; under
 * a bound at the 1F1B peak, zb-h1 lowers its W delays until it fits or
 * reaches 0, and zb-h2 is refused naming the stage and the schedule. */
static void t_zb_memory(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g =
        gpp_zoo_build("mmt:branches=1,layers=4,hidden=128,heads=4,seq=32,ffn=256", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    gpp_cluster_t cl;
    GPP_EXPECT(gpp_cluster_init(&cl, "a100-80g", 4, 4, &err) == 0);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, 64);
    o.spp = 1;
    o.micro_batch = 4;
    int64_t min_mem = 0;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, &min_mem, &err);
    GPP_EXPECT_MSG(p && p->n_stages > 1, "%s", err.msg);
    if (!p || p->n_stages < 2)
        goto out;
    int S = p->n_stages;
    int64_t one[16] = {0}, zero[16] = {0}, most1 = 0;
    GPP_EXPECT(gpp_sched_build(p, g, &err) == 0);
    for (int s = 0; s < S && s < 16; s++) {
        one[s] = gpp_zb_stage_mem(cost, p, s);
        most1 = one[s] > most1 ? one[s] : most1;
    }
    gpp_zb_shape(p, GPP_SCHED_ZB_H1);
    for (int s = 0; s < S; s++)
        p->stages[s].w_delay = 0;
    GPP_EXPECT(gpp_sched_build(p, g, &err) == 0);
    for (int s = 0; s < S && s < 16; s++) {
        zero[s] = gpp_zb_stage_mem(cost, p, s);
        GPP_EXPECT_MSG(zero[s] >= one[s], "stage %d: delay 0 %lld < 1F1B %lld", s,
                       (long long)zero[s], (long long)one[s]);
    }
    for (int kind = GPP_SCHED_ZB_H1; kind < GPP_SCHED__COUNT; kind++) {
        gpp_zb_shape(p, (gpp_sched_kind_t)kind);
        int64_t need = 0;
        GPP_EXPECT(gpp_zb_fit(p, cost, INT64_MAX, &need, &err) == 0);
        GPP_EXPECT(gpp_sched_lower(p, g, &err) == 0);
        gpp_sim_t *sim = gpp_sim_new(p, g, cost);
        GPP_EXPECT_MSG(gpp_sim_run(sim, &err) == 0, "%s", err.msg);
        for (int s = 0; s < S && s < 16; s++) {
            int64_t m = gpp_zb_stage_mem(cost, p, s);
            GPP_EXPECT(m >= zero[s] && m <= need && m == p->stages[s].mem_bytes);
            GPP_EXPECT(gpp_sim_stage(sim, s)->peak_mem_bytes == m);
        }
        printf("  %s: largest stage %.2f MiB (1f1b %.2f MiB)\n",
               gpp_sched_kind_name((gpp_sched_kind_t)kind), (double)need / (1 << 20),
               (double)most1 / (1 << 20));
        gpp_sim_destroy(&sim);
        /* under the 1F1B peak */
        gpp_zb_shape(p, (gpp_sched_kind_t)kind);
        int rc = gpp_zb_fit(p, cost, most1, &need, &err);
        if (kind == GPP_SCHED_ZB_H1) {
            for (int s = 0; s < S; s++) /* what still exceeds has no delay left */
                GPP_EXPECT(p->stages[s].mem_bytes <= most1 || p->stages[s].w_delay == 0);
        } else if (need > most1) {
            GPP_EXPECT(rc == -1);
            GPP_EXPECT_MSG(strstr(err.msg, "per device with zb-h2") && strstr(err.msg, "stage "),
                           "%s", err.msg);
        }
    }
out:
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {
    {"balanced_chain_closed_form", t_balanced_chain_closed_form},
    {"balanced_tps_formula", t_balanced_tps_formula},
    {"memory_and_busy", t_memory_and_busy},
    {"comm_cost", t_comm_cost},
    {"comm_intra_inter", t_comm_intra_inter},
    {"trace", t_trace},
    {"stall_reported", t_stall_reported},
    {"zoo_handmade_plans", t_zoo_handmade_plans},
    {"zoo_partitioner_plans", t_zoo_partitioner_plans},
    {"zb_balanced_chain", t_zb_balanced_chain},
    {"zb_memory", t_zb_memory},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
