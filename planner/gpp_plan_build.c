/* gpp_plan_build: a gpp_plan_t from the DP's stages (gpp_dp_t.out): linked
 * into a stage DAG, spare devices placed where they lower the refined
 * iteration estimate, node-aligned, in-flight over the real DAG, costs and
 * memory; and the iteration estimate that ranks plans. */
#include <assert.h>
#include <stdlib.h>

#include "planner/gpp_part_impl.h"

static int s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void s_stage_ops(const gpp_dp_t *s, const gpp_dp_stage_t *st, int *ops)
{
    int n = st->r - st->l + 1;
    for (int i = 0; i < n; i++)
        ops[i] = s->tree->op_at[st->l + i];
    qsort(ops, (size_t)n, sizeof(int), s_cmp_int);
}

/* Refined iteration estimate of stages with per-micro-batch time c[i]
 * (fwd + bwd + comm of one micro-batch on one replica), micro-batch b[i] and
 * per-iteration sync ar[i] (all-reduce + optimizer step), over the linked
 * stage DAG p: the steady state repeats the slowest stage (B/b - 1 more
 * micro-batches), the first micro-batch crosses the longest path of c, and
 * the slowest sync ends the iteration (all in ms). Unlike
 * TPS * (B + (depth - 1) b) it sees a faster non-bottleneck stage on the
 * critical path (what an extra replica buys there). acc: scratch [S]. */
static double s_refined_estimate(const gpp_plan_t *p, const double *c, const int *b,
                                 const double *ar, double *acc)
{
    double steady = 0, path = 0, sync = 0;
    for (int i = 0; i < p->n_stages; i++) { /* stages are in topological order */
        double best = 0;
        for (int j = 0; j < p->stages[i].n_pred; j++)
            if (acc[p->stages[i].pred[j]] > best)
                best = acc[p->stages[i].pred[j]];
        acc[i] = best + c[i];
        if (acc[i] > path)
            path = acc[i];
        double st = ((double)p->batch / b[i] - 1) * c[i];
        if (st > steady)
            steady = st;
        if (ar[i] > sync)
            sync = ar[i];
    }
    return steady + path + sync;
}

/* The DP's stages as a linked plan (NULL with a message); *used gets the
 * devices they take. */
static gpp_plan_t *s_plan_of_stages(const gpp_dp_t *s, const char *planner, int *used,
                                    gpp_err_t *err)
{
    int *ops = gpp_xcalloc((size_t)s->tree->n_ops, sizeof(int));
    gpp_plan_t *p = gpp_plan_new(planner, s->g, s->n_dev, s->batch);
    *used = 0;
    for (int i = 0; i < s->n_out; i++) {
        s_stage_ops(s, &s->out[i], ops);
        gpp_stage_t *st = gpp_plan_add_stage(p, s->out[i].r - s->out[i].l + 1, ops);
        st->devices = s->out[i].d;
        st->micro_batch = s->cfg[s->out[i].ci].b;
        st->k = s->cfg[s->out[i].ci].k;
        st->inflight = s->out[i].infl;
        *used += st->devices;
    }
    free(ops);
    if (gpp_plan_link(p, s->g, err)) {
        gpp_err_prefix(err, "partitioner produced an invalid plan");
        gpp_plan_destroy(&p);
    }
    return p;
}

/* Per-micro-batch time (fwd + bwd + comm, ms) and per-iteration sync
 * (all-reduce + optimizer step, ms) of stage st with `devices` replicas. */
static void s_stage_times(const gpp_dp_t *s, const gpp_stage_t *st, int devices, double *c_ms,
                          double *sync_ms)
{
    gpp_stage_cost_t sc;
    gpp_cost_stage(s->cost, st->n_ops, st->ops, devices, st->micro_batch, s->batch, &sc);
    *c_ms = sc.fwd_ms + sc.bwd_ms + sc.comm_ms, *sync_ms = sc.allreduce_ms + sc.step_ms;
}

/* Leftover devices: one at a time to the stage where an extra replica
 * lowers the refined estimate most (fewer samples per replica, more
 * all-reduce; memory only shrinks), while one lowers it or keeps it and
 * shortens that stage's micro-batch time. added[] gets the stages in the
 * order they got one; returns how many. */
static int s_spare_devices(const gpp_dp_t *s, gpp_plan_t *p, int used, int *added)
{
    int S = p->n_stages, n_added = 0;
    double *c = gpp_xcalloc((size_t)S, sizeof(double)),
           *ar = gpp_xcalloc((size_t)S, sizeof(double));
    double *acc = gpp_xcalloc((size_t)S, sizeof(double));
    double *c1 = gpp_xcalloc((size_t)S, sizeof(double)),
           *ar1 = gpp_xcalloc((size_t)S, sizeof(double));
    int *bs = gpp_xcalloc((size_t)S, sizeof(int));
    for (int i = 0; i < S && used < s->n_dev; i++) {
        const gpp_stage_t *st = &p->stages[i];
        bs[i] = st->micro_batch;
        s_stage_times(s, st, st->devices, &c[i], &ar[i]);
        if (st->devices + 1 <= st->micro_batch)
            s_stage_times(s, st, st->devices + 1, &c1[i], &ar1[i]);
    }
    for (; used < s->n_dev; used++) {
        double now = s_refined_estimate(p, c, bs, ar, acc), best_e = now;
        int best = -1;
        for (int i = 0; i < S; i++) {
            if (p->stages[i].devices + 1 > p->stages[i].micro_batch)
                continue;
            double c0 = c[i], a0 = ar[i];
            c[i] = c1[i], ar[i] = ar1[i];
            double e = s_refined_estimate(p, c, bs, ar, acc);
            c[i] = c0, ar[i] = a0;
            /* ties count (two equal bottlenecks need a device each), as
               long as the replica lowers the stage's own micro-batch time */
            if (c1[i] < c[i] && (best < 0 ? e <= now : e < best_e))
                best = i, best_e = e;
        }
        if (best < 0)
            break;
        gpp_stage_t *st = &p->stages[best];
        st->devices++;
        added[n_added++] = best;
        c[best] = c1[best], ar[best] = ar1[best];
        if (st->devices + 1 <= st->micro_batch)
            s_stage_times(s, st, st->devices + 1, &c1[best], &ar1[best]);
    }
    free(c), free(ar), free(acc), free(c1), free(ar1), free(bs);
    return n_added;
}

/* Consecutive device ranges in stage order, as gpp_plan_link places them. */
static void s_place_consecutive(gpp_plan_t *p)
{
    for (int i = 0, dev = 0; i < p->n_stages; dev += p->stages[i++].devices)
        p->stages[i].first_device = dev;
}

/* The cost model assumes node-aligned groups: when the DP's stages pack
 * that way, take extra replicas back, latest first, until they still do. */
static void s_node_align(const gpp_dp_t *s, gpp_plan_t *p, const int *added, int n_added)
{
    int gpn = gpp_cost_cluster(s->cost)->gpus_per_node, aligned0 = 1;
    if (n_added > 0) { /* would the DP's own assignment pack? */
        for (int i = 0; i < n_added; i++)
            p->stages[added[i]].devices--;
        s_place_consecutive(p);
        aligned0 = gpp_plan_place(p, gpn);
        for (int i = 0; i < n_added; i++)
            p->stages[added[i]].devices++;
    }
    if (!aligned0)
        n_added = 0; /* nothing to preserve */
    for (;;) {
        s_place_consecutive(p);
        if (gpp_plan_place(p, gpn) || n_added == 0)
            break;
        p->stages[added[--n_added]].devices--;
    }
}

/* In-flight samples of stage i over the real stage DAG (successors done). */
static int s_stage_inflight(const gpp_dp_t *s, const gpp_plan_t *p, int i)
{
    const gpp_stage_t *st = &p->stages[i];
    int v = st->k * st->micro_batch;
    if (st->n_succ > 0) {
        v = 0;
        for (int j = 0; j < st->n_succ; j++) {
            const gpp_stage_t *y = &p->stages[st->succ[j]];
            int c = s->generalized ? gpp_part_inflight(st->k, st->micro_batch, y->k, y->micro_batch,
                                                       y->inflight, NULL)
                                   : st->micro_batch + y->inflight;
            if (c > v)
                v = c;
        }
    }
    return v < s->batch ? v : s->batch;
}

/* Stage times and memory from the cost model; the plan's bottleneck TPS. */
static void s_plan_costs(const gpp_dp_t *s, gpp_plan_t *p)
{
    gpp_stage_cost_t sc;
    p->bottleneck_tps_ms = 0;
    for (int i = 0; i < p->n_stages; i++) {
        gpp_stage_t *st = &p->stages[i];
        gpp_cost_stage(s->cost, st->n_ops, st->ops, st->devices, st->micro_batch, s->batch, &sc);
        st->fwd_ms = sc.fwd_ms;
        st->bwd_ms = sc.bwd_ms;
        st->bwd_w_ms = sc.bwd_w_ms;
        st->allreduce_ms = sc.allreduce_ms;
        st->tps_ms = sc.tps_ms;
        /* the executor's peak (the search checked a bound never below it) */
        int mbs = (st->inflight + st->micro_batch - 1) / st->micro_batch;
        st->mem_bytes = gpp_cost_stage_mem(s->cost, st->n_ops, st->ops, st->devices,
                                           st->micro_batch, mbs, s->batch);
        st->weight_bytes = sc.weight_bytes < st->mem_bytes ? sc.weight_bytes : st->mem_bytes;
        st->act_bytes = st->mem_bytes - st->weight_bytes - sc.reserved_bytes;
        if (st->act_bytes < 0)
            st->act_bytes = 0;
        if (st->tps_ms > p->bottleneck_tps_ms)
            p->bottleneck_tps_ms = st->tps_ms;
    }
}

/* Builds the plan from s->out: link, leftover devices where they lower the
 * refined estimate, in-flight over the real stage DAG, costs and memory. */
gpp_plan_t *gpp_part_build_plan(const gpp_dp_t *s, const char *planner, int universal_b,
                                gpp_err_t *err)
{
    int used;
    gpp_plan_t *p = s_plan_of_stages(s, planner, &used, err);
    if (!p)
        return NULL;
    int *added = gpp_xcalloc((size_t)s->n_dev + 1, sizeof(int));
    int n_added = s_spare_devices(s, p, used, added);
    s_node_align(s, p, added, n_added);
    free(added);
    for (int i = p->n_stages - 1; i >= 0; i--) { /* reverse topological order */
        int v = s_stage_inflight(s, p, i);
        if (!s->generalized)
            assert(v <= p->stages[i].inflight); /* the DP view is never optimistic */
        p->stages[i].inflight = v;
    }
    p->micro_batch = universal_b;
    s_plan_costs(s, p);
    return p;
}

/* Estimated iteration time: TPS * (B + (longest path of micro-batch sizes) - b_last). */
double gpp_part_iter_estimate(const gpp_plan_t *p)
{
    int S = p->n_stages;
    int *acc = gpp_xcalloc((size_t)S, sizeof(int));
    int worst = 0;
    for (int i = 0; i < S; i++) {
        int best = 0;
        for (int j = 0; j < p->stages[i].n_pred; j++)
            if (acc[p->stages[i].pred[j]] > best)
                best = acc[p->stages[i].pred[j]];
        acc[i] = best + p->stages[i].micro_batch;
        if (p->stages[i].n_succ == 0 && acc[i] - p->stages[i].micro_batch > worst)
            worst = acc[i] - p->stages[i].micro_batch;
    }
    free(acc);
    return p->bottleneck_tps_ms * ((double)p->batch + worst);
}
