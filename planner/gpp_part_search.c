/* gpp_part_search: the search around the DP (see gpp_part.h): binary search
 * on the bottleneck TPS, the depth descent, the universal micro-batch sweep,
 * the per-stage / kFkB config sets, the simulated pick among candidates, the
 * least memory bound when none fits, and gpp_part_run. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_time.h"
#include "planner/gpp_part_impl.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "planner/gpp_zb.h"

/* Bottleneck TPS of the emitted stages. */
static double s_out_tps(const gpp_dp_t *s)
{
    double worst = 0;
    for (int i = 0; i < s->n_out; i++)
        if (s->out[i].tps_ms > worst)
            worst = s->out[i].tps_ms;
    return worst;
}

typedef struct {
    gpp_plan_t *best;
    double best_iter;   /* the best plan's key: estimate, or TPS with min_tps */
    double best_sim_ms; /* with simulate: the best plan's simulated time */
    gpp_plan_t **cand;  /* with simulate: every plan offered (owned) */
    int n_cand;
    double last_iter;     /* best estimate of the latest s_search */
    int any_feasible_mem; /* some config set was feasible at t = inf */
    long long evals, runs;
    const gpp_part_opts_t *opts; /* for its on_candidate hook and schedules */
    int64_t least_need; /* the least memory a candidate needed with a schedule that did not fit */
} s_result_t;

/* Least t (within eps) in (lo, hi] for which gpp_dp_run(t, max_level) succeeds:
 * gallop up from lo (runs below the optimum are cheap, the budget bound
 * prunes them hard), then bisect. Returns 1 with the plan in s->out and its
 * bottleneck in *t_out, or 0 when even hi fails. */
static int s_bsearch(gpp_dp_t *s, double eps, double lo, double hi, int max_level, double *t_out,
                     double *t_low, s_result_t *res)
{
    gpp_dp_stage_t *keep = NULL;
    int n_keep = 0, keep_level = 0, found = 0;
    double t_l = lo, t_r = hi;
    for (double step = 0.01;; step *= 2) {
        double t = lo * (1 + step);
        int last = !(t < hi);
        if (last)
            t = hi;
        res->runs++;
        if (gpp_dp_run(s, t, max_level)) {
            t_r = s_out_tps(s);
            if (t_r > t)
                t_r = t;
            found = 1;
            break;
        }
        t_l = t;
        if (last)
            break;
    }
    if (!found)
        return 0;
    keep = gpp_xcalloc((size_t)s->n_out, sizeof *keep);
    n_keep = s->n_out;
    keep_level = s->out_level;
    memcpy(keep, s->out, (size_t)n_keep * sizeof *keep);
    while (t_r - t_l > eps * t_r) {
        double mid = 0.5 * (t_l + t_r);
        res->runs++;
        if (gpp_dp_run(s, mid, max_level)) {
            double a = s_out_tps(s);
            t_r = a < mid ? a : mid;
            keep = gpp_xrealloc(keep, (size_t)s->n_out * sizeof *keep);
            n_keep = s->n_out;
            keep_level = s->out_level;
            memcpy(keep, s->out, (size_t)n_keep * sizeof *keep);
        } else {
            t_l = mid;
        }
    }
    if (s->cap_out < n_keep) {
        s->out = gpp_xrealloc(s->out, (size_t)n_keep * sizeof *s->out);
        s->cap_out = n_keep;
    }
    memcpy(s->out, keep, (size_t)n_keep * sizeof *keep);
    s->n_out = n_keep;
    s->out_level = keep_level;
    free(keep);
    *t_out = t_r;
    if (t_low)
        *t_low = t_l;
    return 1;
}

/* Builds the plan in s->out. The estimate (or TPS with min_tps) steers the
 * search (res->best_iter: the least one seen) and picks res->best; with
 * s->simulate every plan is also kept in res->cand for s_pick_simulated. */
static int s_offer_plan(gpp_dp_t *s, const char *planner, int universal_b, s_result_t *res,
                        gpp_err_t *err)
{
    gpp_plan_t *p = gpp_part_build_plan(s, planner, universal_b, err);
    if (!p)
        return -1;
    int depth = p->depth; /* p may be freed below */
    double it = gpp_part_iter_estimate(p);
    p->iteration_ms = it;
    p->throughput = it > 0 ? p->batch / it * 1e3 : 0;
    gpp_debug("partitioner: b=%d n_cfg=%d n_levels=%d level %d tps %.6f depth %d iter %.3f after "
              "%lld runs, "
              "%lld evals",
              universal_b, s->n_cfg, s->n_levels, s->out_level, p->bottleneck_tps_ms, p->depth, it,
              res->runs, s->n_eval);
    double key = s->min_tps ? p->bottleneck_tps_ms : it;
    if (key < res->last_iter)
        res->last_iter = key;
    int keep = s->simulate && !s->min_tps;
    if (keep) {
        res->cand = gpp_xrealloc(res->cand, (size_t)(res->n_cand + 1) * sizeof *res->cand);
        res->cand[res->n_cand++] = p;
    }
    if (!res->best || key < res->best_iter) {
        if (!keep)
            gpp_plan_destroy(&res->best);
        res->best = p;
        res->best_iter = key;
    } else if (!keep) {
        gpp_plan_destroy(&p);
    }
    if (res->opts && res->opts->on_candidate)
        res->opts->on_candidate(res->opts->on_candidate_arg, universal_b, depth, it,
                                res->best_iter);
    return 0;
}

/* Of the kept candidates, the one with the least simulated iteration time
 * (schedule, lower, one simulated iteration: what gpp-plan reports) becomes
 * res->best; the others are freed. Every candidate is simulated: the
 * estimate misses what the simulator sees (transfers overlapping compute
 * on links, the all-reduce and optimizer step after the drain, stages
 * faster than the bottleneck on the critical path), and by far more than
 * the gaps between candidates: DLRM on 16 V100s, b = 256 estimates 64.9 ms
 * and simulates 36.0, the best estimate (b = 128) 49.5 and 45.1; CANDLE-Uno
 * on 32, b = 8192 444 and 367, the best estimate (b = 1024) 374 and 403. So
 * no window around the best estimate holds the best plan for sure. A
 * simulation costs less than one DP run since the simulator keeps its
 * ready devices in a heap, and s_pick_simulated skips those its bound
 * rules out. */
/* What a schedule's shape changes in a plan's stages, to go back to the
 * partitioner's 1F1B figures after trying the zero-bubble ones. */
typedef struct {
    int inflight, w_delay;
    int64_t mem_bytes, act_bytes;
} s_shape_t;

static s_shape_t *s_shape_save(const gpp_plan_t *p)
{
    s_shape_t *v = gpp_xcalloc((size_t)p->n_stages + 1, sizeof *v);
    for (int i = 0; i < p->n_stages; i++) {
        const gpp_stage_t *st = &p->stages[i];
        v[i] = (s_shape_t){st->inflight, st->w_delay, st->mem_bytes, st->act_bytes};
    }
    return v;
}

static void s_shape_restore(gpp_plan_t *p, const s_shape_t *v, gpp_sched_kind_t kind)
{
    p->schedule = kind;
    for (int i = 0; i < p->n_stages; i++) {
        gpp_stage_t *st = &p->stages[i];
        st->inflight = v[i].inflight, st->w_delay = v[i].w_delay;
        st->mem_bytes = v[i].mem_bytes, st->act_bytes = v[i].act_bytes;
    }
}

/* Shapes p for `kind` (a 1F1B plan as the partitioner left it) and fits it
 * to the cluster's memory bound; 0, or -1 when it does not fit (*need:
 * its largest stage's need). */
static int s_schedule(gpp_plan_t *p, const gpp_cost_t *cost, gpp_sched_kind_t kind, int64_t *need,
                      gpp_err_t *err)
{
    if (kind != GPP_SCHED_1F1B)
        gpp_zb_shape(p, kind);
    return gpp_zb_fit(p, cost, gpp_cluster_mem_bound(gpp_cost_cluster(cost)), need, err);
}

/* The simulated iteration time of sim's plan p under `kind` (schedule and
 * lower only: the caller validates the plan it keeps); INFINITY when it
 * does not fit the memory bound (*need: what it would take) or cannot be
 * simulated. */
static double s_simulated_ms(gpp_sim_t *sim, gpp_plan_t *p, const gpp_graph_t *g,
                             const gpp_cost_t *cost, gpp_sched_kind_t kind, int64_t *need)
{
    gpp_err_t e = {{0}};
    if (s_schedule(p, cost, kind, need, &e) < 0 || gpp_sched_lower(p, g, &e) < 0)
        return INFINITY;
    gpp_sim_keep_events(sim, 0); /* only the time is wanted */
    return gpp_sim_run(sim, &e) == 0 ? gpp_sim_iteration_ms(sim) : INFINITY;
}

/* Candidate order for s_pick_simulated: the least estimate first, so that
 * a good simulated time is known early and the bound skips most others;
 * ties in the order they were offered. */
typedef struct {
    double est;
    int i;
} s_cand_key_t;

static int s_cmp_cand(const void *a, const void *b)
{
    const s_cand_key_t *x = a, *y = b;
    if (x->est != y->est)
        return x->est < y->est ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* A plan's simulated time is at least its busiest replica's own work (see
 * gpp_sim_bound_ms), so a candidate whose bound exceeds the best simulated
 * time so far is not simulated: the result is the one simulating every
 * candidate gives (least time, the earliest offered on a tie). */
static void s_pick_simulated(const gpp_dp_t *s, s_result_t *res)
{
    double best_ms = INFINITY;
    gpp_plan_t *best = res->best;
    int best_i = -1;
    unsigned mask = res->opts->schedules ? res->opts->schedules : 1u << GPP_SCHED_1F1B;
    gpp_sched_kind_t best_kind = GPP_SCHED_1F1B;
    s_shape_t *best_shape = NULL;
    s_cand_key_t *order = gpp_xcalloc((size_t)res->n_cand + 1, sizeof *order);
    for (int i = 0; i < res->n_cand; i++)
        order[i] = (s_cand_key_t){res->cand[i]->iteration_ms, i};
    qsort(order, (size_t)res->n_cand, sizeof *order, s_cmp_cand);
    for (int o = 0; o < res->n_cand; o++) {
        int i = order[o].i;
        gpp_plan_t *p = res->cand[i];
        int dup = 0; /* the refining pass often finds the same plan again */
        for (int j = 0; j < i && !dup; j++) {
            const gpp_plan_t *q = res->cand[j];
            dup = q && q->micro_batch == p->micro_batch && q->n_stages == p->n_stages &&
                  q->depth == p->depth && q->bottleneck_tps_ms == p->bottleneck_tps_ms &&
                  q->iteration_ms == p->iteration_ms;
        }
        if (dup)
            continue;
        gpp_sim_t *sim = gpp_sim_new(p, s->g, s->cost);
        double bound = gpp_sim_bound_ms(sim);
        if (bound > best_ms * (1 + 1e-9)) { /* the sum order may differ in the last bits */
            gpp_debug("partitioner: candidate %d (b=%d, depth %d): estimate %.3f ms, at least "
                      "%.3f ms: not simulated",
                      i, p->micro_batch, p->depth, p->iteration_ms, bound);
            gpp_sim_destroy(&sim);
            continue;
        }
        s_shape_t *partitioner = s_shape_save(p);
        for (int kind = 0; kind < GPP_SCHED__COUNT; kind++) {
            if (!(mask >> kind & 1))
                continue;
            int64_t need = 0;
            s_shape_restore(p, partitioner, GPP_SCHED_1F1B);
            double ms = s_simulated_ms(sim, p, s->g, s->cost, (gpp_sched_kind_t)kind, &need);
            gpp_debug("partitioner: candidate %d (b=%d, depth %d, %s): estimate %.3f ms, "
                      "simulated %.3f ms",
                      i, p->micro_batch, p->depth, gpp_sched_kind_name((gpp_sched_kind_t)kind),
                      p->iteration_ms, ms);
            if (!isfinite(ms) && need > 0 && (res->least_need == 0 || need < res->least_need))
                res->least_need = need;
            if (ms < best_ms || (ms == best_ms && best_i >= 0 && i < best_i)) {
                best_ms = ms, best = p, best_i = i, best_kind = (gpp_sched_kind_t)kind;
                free(best_shape);
                best_shape = s_shape_save(p);
            }
        }
        s_shape_restore(p, partitioner, GPP_SCHED_1F1B);
        free(partitioner);
        gpp_sim_destroy(&sim);
    }
    free(order);
    if (best_i < 0 && !(mask & 1u << GPP_SCHED_1F1B))
        best = NULL;        /* no candidate fits with the schedules asked */
    if (best && best_shape) /* the winner as it was shaped and fitted */
        s_shape_restore(best, best_shape, best_kind);
    free(best_shape);
    for (int i = 0; i < res->n_cand; i++)
        if (res->cand[i] != best)
            gpp_plan_destroy(&res->cand[i]);
    free(res->cand);
    res->cand = NULL;
    res->n_cand = 0;
    res->best = best;
    res->best_sim_ms = best_ms;
}

/* Without simulation: the lowest schedule asked, fitted to the bound. -1
 * (the plan freed, res->least_need set) when it does not fit. */
static int s_schedule_unsimulated(const gpp_dp_t *s, s_result_t *res, gpp_err_t *err)
{
    unsigned mask = res->opts->schedules;
    if (!mask || mask & 1u << GPP_SCHED_1F1B)
        return 0;
    gpp_sched_kind_t kind = GPP_SCHED_ZB_H1;
    while (!(mask >> kind & 1))
        kind++;
    int64_t need = 0;
    if (s_schedule(res->best, s->cost, kind, &need, err) == 0)
        return 0;
    res->least_need = need;
    gpp_plan_destroy(&res->best);
    return -1;
}

/* Upper bound on any stage's TPS (every op on one stage at the worst
 * per-sample rate, all boundary traffic, the largest all-reduce): above it
 * the TPS constraint never binds, so failing there means memory. */
static double s_tps_cap(const gpp_dp_t *s)
{
    int n = s->tree->n_ops;
    double worst = 0, bytes = 0; /* a stage's compute per sample is c(m)/b <= c(m)/m */
    for (int m = 1; m <= s->batch; m++)
        if (s->pre_ms[m] && s->pre_ms[m][n] / m > worst)
            worst = s->pre_ms[m][n] / m;
    for (int pos = 0; pos < n; pos++)
        bytes += s->pos_out_bytes[pos];
    double ar = 0;
    for (int d = 1; d <= s->n_dev; d++)
        if (s->ar_ms_per_byte[d] * s->pre_grad_bytes[n] + s->ar_ms_fixed[d] > ar)
            ar = s->ar_ms_per_byte[d] * s->pre_grad_bytes[n] + s->ar_ms_fixed[d];
    ar += gpp_cost_step_ms(s->cost, s->pre_grad_bytes[n],
                           gpp_cost_step_kernels(s->pre_step_kernels[n], s->pre_sparse_ops[n]));
    return (worst + 2.0 * bytes * s->p2p_ms_per_byte + 2.0 * n * s->p2p_alpha_ms + ar / s->batch) *
           1.01;
}

/* Search for one config set; keeps the best plan in res. In default mode the
 * source level is the pipeline depth: after the least-TPS plan (depth L) the
 * search also asks for the least TPS at depth L-1, L-2, ... while that keeps
 * improving the iteration estimate TPS * (B + (depth - 1) * b). */
static int s_search(gpp_dp_t *s, const gpp_part_opts_t *o, const char *planner, int universal_b,
                    double eps, double lo_hint, int descend, double *t_low, s_result_t *res,
                    gpp_err_t *err)
{
    double cap = s_tps_cap(s);
    double lb = INFINITY;
    for (int c = 0; c < s->n_cfg; c++) {
        int n = s->tree->n_ops;
        double w =
            (s->pre_rate_ms[n] +
             gpp_cost_step_ms(s->cost, s->pre_grad_bytes[n],
                              gpp_cost_step_kernels(s->pre_step_kernels[n], s->pre_sparse_ops[n])) /
                 s->batch) /
            s->n_dev;
        if (w < lb)
            lb = w;
    }
    /* a plan with TPS >= best_iter / B cannot beat the best one (estimate >= TPS * B) */
    if (!(lb > 0))
        lb = cap * 1e-9;
    if (lo_hint > lb)
        lb = lo_hint;
    if (t_low)
        *t_low = INFINITY;
    double beat = s->min_tps ? res->best_iter : res->best_iter / s->batch;
    double hi = res->best && beat < cap ? beat : cap;
    double t;
    double t_l = lb;
    if (lb >= hi || !s_bsearch(s, eps, lb, hi, s->n_levels - 1, &t, &t_l, res)) {
        if (hi >= cap)
            return 0; /* memory */
        res->any_feasible_mem = 1;
        return 0;
    }
    res->any_feasible_mem = 1;
    if (t_low)
        *t_low = t_l;
    int level = s->out_level;
    double tps = t;
    if (s_offer_plan(s, planner, universal_b, res, err))
        return -1;
    if (!descend || s->min_tps || s->generalized || !universal_b || o->micro_batch)
        return 0; /* a fixed b is Algorithm 1 as is: the least bottleneck TPS */
    for (int l = level - 1; l >= 1; l--) {
        double before = res->best_iter;
        double lim = res->best_iter / (s->batch + (double)(l - 1) * universal_b);
        if (lim <= tps || !s_bsearch(s, eps, tps, lim, l, &t, NULL, res))
            break;
        if (s_offer_plan(s, planner, universal_b, res, err))
            return -1;
        if (!(res->best_iter < before))
            break;
    }
    return 0;
}

void gpp_part_opts_default(gpp_part_opts_t *o, int batch)
{
    memset(o, 0, sizeof *o);
    o->batch = batch;
    o->max_k = 4;
    o->eps = 1e-3;
    o->simulate = 1;
}

/* Candidate micro-batch sizes: divisors of B (at most cap). */
static int s_divisors(int B, int cap, int *out, int max_out)
{
    int n = 0;
    for (int b = 1; b <= B && b <= cap && n < max_out; b++)
        if (B % b == 0)
            out[n++] = b;
    return n;
}

/* Runs every config set for one memory bound. Returns -1 on error. */
/* Universal micro-batch, 1F1B: the fixed b, or every divisor of B in two
 * passes (all to a 1% tolerance with the depth descent, then those within 2%
 * of the best estimate to eps). Larger b first: they usually win, and the
 * cut-off (best estimate / B) then prunes the small ones after one run. */
static int s_universal(gpp_dp_t *s, const gpp_part_opts_t *o, const char *planner, const int *divs,
                       int nd, s_result_t *res, gpp_err_t *err)
{
    if (o->micro_batch) {
        gpp_dp_cfg_t c = {o->micro_batch, 1};
        gpp_dp_configure(s, &c, 1, 0);
        return s_search(s, o, planner, o->micro_batch, o->eps, 0, 0, NULL, res, err);
    }
    double eps_c = o->eps < 1e-2 ? 1e-2 : o->eps;
    double low[GPP_DP_MAX_CFG], est[GPP_DP_MAX_CFG];
    for (int i = nd - 1; i >= 0; i--) {
        gpp_dp_cfg_t c = {divs[i], 1};
        gpp_dp_configure(s, &c, 1, 0);
        res->last_iter = INFINITY;
        if (s_search(s, o, planner, divs[i], eps_c, 0, 1, &low[i], res, err))
            return -1;
        est[i] = res->last_iter;
    }
    if (eps_c <= o->eps)
        return 0;
    for (int i = nd - 1; i >= 0; i--) {
        if (!(est[i] < res->best_iter * (1 + 2 * eps_c)) || !isfinite(low[i]))
            continue;
        gpp_dp_cfg_t c = {divs[i], 1};
        gpp_dp_configure(s, &c, 1, 0);
        if (s_search(s, o, planner, divs[i], o->eps, low[i], 1, NULL, res, err))
            return -1;
    }
    return 0;
}

/* Memo size guard for the generalized search (levels are counted in samples). */
static int s_check_size(const gpp_dp_t *s, const gpp_dp_cfg_t *cfg, int n_cfg, gpp_err_t *err)
{
    int level_samples;
    int64_t n_levels = gpp_dp_levels(s, cfg, n_cfg, 1, &level_samples),
            per = (int64_t)n_cfg * n_levels;
    if (2 * per + 2 > (int64_t)GPP_DP_ARENA_CHUNK || per * s->n_suffix > ((int64_t)1 << 25))
        return gpp_err_set(err,
                           "partitioner: the per-stage search has %d configs x %lld in-flight "
                           "levels; too large (use fewer micro-batch sizes: max_mbs, or a "
                           "smaller max_k)",
                           n_cfg, (long long)n_levels);
    return 0;
}

/* kFkB with a universal micro-batch: for each b (the fixed one or every
 * divisor), the configs (b, k), k = 1..max_k with k * b <= B. */
static int s_kfkb_universal(gpp_dp_t *s, const gpp_part_opts_t *o, const char *planner,
                            const int *divs, int nd, s_result_t *res, gpp_err_t *err)
{
    gpp_dp_cfg_t cfg[GPP_DP_MAX_CFG];
    int one = o->micro_batch;
    const int *bs = one ? &one : divs;
    for (int i = 0; i < (one ? 1 : nd); i++) {
        int n_cfg = 0;
        for (int k = 1; k <= o->max_k && n_cfg < GPP_DP_MAX_CFG; k++)
            if ((int64_t)k * bs[i] <= o->batch)
                cfg[n_cfg++] = (gpp_dp_cfg_t){bs[i], k};
        if (s_check_size(s, cfg, n_cfg, err))
            return -1;
        gpp_dp_configure(s, cfg, n_cfg, 1);
        if (s_search(s, o, planner, bs[i], o->eps, 0, 0, NULL, res, err))
            return -1;
    }
    return 0;
}

/* Every candidate set for one memory bound. With per-stage micro-batches or
 * kFkB the universal plans are candidates too, so the result is never worse
 * by the estimate. */
static int s_all(gpp_dp_t *s, const gpp_part_opts_t *o, const char *planner, s_result_t *res,
                 gpp_err_t *err)
{
    int B = o->batch;
    int cap = o->max_mbs > 0 ? o->max_mbs : B;
    int divs[GPP_DP_MAX_CFG];
    int nd = s_divisors(B, cap, divs, GPP_DP_MAX_CFG);
    s->min_tps = o->min_tps;
    s->simulate = o->simulate;
    if (!(o->min_tps && (o->per_stage_mbs || o->kfkb)) &&
        s_universal(s, o, planner, divs, nd, res, err))
        return -1;
    if (!o->per_stage_mbs && !o->kfkb)
        return 0;
    gpp_dp_cfg_t cfg[GPP_DP_MAX_CFG];
    int n_cfg = 0;
    if (!o->per_stage_mbs) /* universal b, each stage picks k */
        return s_kfkb_universal(s, o, planner, divs, nd, res, err);
    for (int i = 0; i < nd; i++)
        for (int k = 1; k <= (o->kfkb ? o->max_k : 1) && n_cfg < GPP_DP_MAX_CFG; k++)
            if ((int64_t)k * divs[i] <= B)
                cfg[n_cfg++] = (gpp_dp_cfg_t){divs[i], k};
    if (s_check_size(s, cfg, n_cfg, err))
        return -1;
    gpp_dp_configure(s, cfg, n_cfg, 1);
    return s_search(s, o, planner, 0, o->eps, 0, 0, NULL, res, err);
}

/* No plan at t = inf for any config: memory is the only reason. The least
 * per-device bound (to 1 MiB) above mem_bound_bytes that admits a plan goes
 * to *least (doubling, then bisection; feasibility runs only). */
static int s_least_mem_bound(gpp_dp_t *s, const gpp_part_opts_t *o, const char *planner,
                             int64_t mem_bound_bytes, int64_t *least, gpp_err_t *err)
{
    int64_t lo = mem_bound_bytes > 0 ? mem_bound_bytes : 0;
    int64_t hi = mem_bound_bytes > 0 ? mem_bound_bytes : ((int64_t)1 << 20);
    s_result_t probe = {0};
    gpp_part_opts_t q = *o;
    q.simulate = 0; /* feasibility only */
    do {
        hi *= 2;
        s->mem_bound_bytes = hi;
        gpp_plan_destroy(&probe.best);
        memset(&probe, 0, sizeof probe);
        if (s_all(s, &q, planner, &probe, err))
            return -1;
    } while (!probe.any_feasible_mem && hi < ((int64_t)1 << 52));
    gpp_plan_destroy(&probe.best);
    while (hi - lo > ((int64_t)1 << 20)) {
        int64_t mid = lo + (hi - lo) / 2;
        s->mem_bound_bytes = mid;
        memset(&probe, 0, sizeof probe);
        q.eps = 0.5; /* feasibility only */
        if (s_all(s, &q, planner, &probe, err))
            return -1;
        gpp_plan_destroy(&probe.best);
        if (probe.any_feasible_mem)
            hi = mid;
        else
            lo = mid;
    }
    *least = hi;
    return 0;
}

/* The error when candidates exist but none fits the memory bound with the
 * schedules asked (the 1F1B plans do: they were searched under it). */
static void s_no_schedule_fits(const gpp_graph_t *g, const gpp_part_opts_t *o, int n_dev,
                               int64_t bound, int64_t least_need, gpp_err_t *err)
{
    char asked[64] = "";
    for (int k = 0, n = 0; k < GPP_SCHED__COUNT; k++)
        if (o->schedules >> k & 1)
            n += snprintf(asked + n, sizeof asked - (size_t)n, "%s%s", n ? " or " : "",
                          gpp_sched_kind_name((gpp_sched_kind_t)k));
    gpp_err_set(err,
                "no %s plan of '%s' fits %.3f GiB per device on %d devices (batch %d): with it a "
                "stage needs %.3f GiB at the least; use schedule 1f1b, zb-h1 or auto, or a "
                "memory bound of %.3f GiB",
                asked, g->name, (double)bound / (1 << 30), n_dev, o->batch,
                (double)least_need / (1 << 30), ceil((double)least_need / (1 << 30) * 1000) / 1000);
}

/* The search; *rank_key gets the returned plan's key by the criterion the
 * search ranks with: the simulated iteration time (o->simulate), the
 * bottleneck TPS (o->min_tps) or the estimate. */
static gpp_plan_t *s_part_run(const gpp_graph_t *g, const gpp_cost_t *cost,
                              const gpp_part_opts_t *o, int64_t *min_mem_bytes, double *rank_key,
                              gpp_err_t *err)
{
    double t0 = gpp_now_ms();
    if (min_mem_bytes)
        *min_mem_bytes = 0;
    if (o->batch < 1) {
        gpp_err_set(err, "partitioner: batch must be >= 1 (got %d)", o->batch);
        return NULL;
    }
    if (o->micro_batch < 0 || (o->micro_batch > 0 && o->batch % o->micro_batch != 0)) {
        gpp_err_set(err, "partitioner: micro-batch %d must divide the batch %d", o->micro_batch,
                    o->batch);
        return NULL;
    }
    if (!(o->eps > 0 && o->eps < 1) || o->max_k < 1) {
        gpp_err_set(err, "partitioner: eps must be in (0,1) and max_k >= 1");
        return NULL;
    }
    if (!g->finalized) {
        gpp_err_set(err, "partitioner: graph '%s' is not finalized", g->name);
        return NULL;
    }
    gpp_sp_t *t = o->spp ? gpp_sp_linear(g) : gpp_sp_build(g, err);
    if (!t)
        return NULL;
    const char *planner = o->spp ? "spp" : "gpp";
    int64_t mem_bound_bytes = gpp_cluster_mem_bound(gpp_cost_cluster(cost));
    gpp_dp_t *s = gpp_dp_new(g, cost, t, o->batch, mem_bound_bytes);
    s_result_t res = {0};
    res.opts = o;
    gpp_plan_t *p = NULL;
    if (s_all(s, o, planner, &res, err))
        goto done;
    if (!res.best) {
        int64_t hi;
        if (s_least_mem_bound(s, o, planner, mem_bound_bytes, &hi, err))
            goto done;
        if (min_mem_bytes)
            *min_mem_bytes = hi;
        gpp_err_set(err,
                    "partitioner (%s): no plan of '%s' fits %lld MiB per device on %d devices "
                    "(batch %d); the least bound that fits is %lld MiB: use more devices, "
                    "a smaller batch or a larger memory bound",
                    planner, g->name, (long long)(mem_bound_bytes >> 20), s->n_dev, o->batch,
                    (long long)(hi >> 20));
        goto done;
    }
    if (res.n_cand)
        s_pick_simulated(s, &res);
    else
        s_schedule_unsimulated(s, &res, err);
    if (!res.best) {
        s_no_schedule_fits(g, o, s->n_dev, mem_bound_bytes, res.least_need, err);
        goto done;
    }
    p = res.best;
    *rank_key = o->simulate && !o->min_tps ? res.best_sim_ms : res.best_iter;
    p->search_ms = gpp_now_ms() - t0;
    gpp_debug("partitioner %s: %lld DP runs, %lld stage evaluations, %.2f ms", planner, res.runs,
              s->n_eval, p->search_ms);
done:
    for (int i = 0; i < res.n_cand; i++) /* an error left candidates (res.best among them) */
        gpp_plan_destroy(&res.cand[i]);
    free(res.cand);
    if (!res.n_cand && res.best != p)
        gpp_plan_destroy(&res.best);
    gpp_dp_destroy(&s);
    gpp_sp_destroy(&t);
    return p;
}

/* The chain candidate's search, run beside the graph pipeline's. */
typedef struct {
    const gpp_graph_t *g;
    const gpp_cost_t *cost;
    gpp_part_opts_t q;
    gpp_plan_t *plan;
    double key;
    gpp_err_t err;
} s_chain_job_t;

static void *s_chain_main(void *arg)
{
    s_chain_job_t *j = arg;
    j->plan = s_part_run(j->g, j->cost, &j->q, NULL, &j->key, &j->err);
    return NULL;
}

/* GPP contains SPP: a chain over the linearized graph is a stage DAG, so the
 * GPP search also plans the chain and keeps whichever ranks better (ties go
 * to the graph pipeline). The chain plan keeps its chain edges (p->chain),
 * planner "gpp". Above GPP_PART_CHAIN_MAX_DEVICES devices the chain search
 * is skipped: the SPP DP over the linearized graph takes over a minute on
 * 1024 GPUs (64 MMT branches), where the GPP search's budget is 10 s.
 *
 * The two searches share nothing but the graph and the cost model, which
 * they only read (the DP state, SP tree, scratch and candidates are each
 * search's own), so the chain search runs on a second thread while this
 * one runs the graph pipeline's: on two cores the wall time is the longer
 * of the two instead of their sum. The result does not depend on timing:
 * both searches run to the end and are compared afterwards, as before. The
 * chain search reports no progress (on_candidate is the caller's, called
 * from this thread only). Without a second thread it runs after. */
gpp_plan_t *gpp_part_run(const gpp_graph_t *g, const gpp_cost_t *cost, const gpp_part_opts_t *o,
                         int64_t *min_mem_bytes, gpp_err_t *err)
{
    double t0 = gpp_now_ms();
    double p_key = INFINITY;
    int want_chain = !o->spp && !o->no_chain && g->finalized &&
                     gpp_cost_cluster(cost)->n_devices <= GPP_PART_CHAIN_MAX_DEVICES;
    s_chain_job_t job = {.g = g, .cost = cost, .q = *o, .key = INFINITY};
    job.q.spp = 1;
    job.q.on_candidate = NULL;
    job.q.on_candidate_arg = NULL;
    pthread_t th;
    int threaded = want_chain && pthread_create(&th, NULL, s_chain_main, &job) == 0;
    gpp_plan_t *p = s_part_run(g, cost, o, min_mem_bytes, &p_key, err);
    if (threaded)
        pthread_join(th, NULL);
    else if (want_chain)
        s_chain_main(&job);
    if (!want_chain)
        return p;
    gpp_plan_t *c = job.plan;
    if (c && (!p || job.key < p_key)) {
        gpp_debug("partitioner gpp: the chain plan ranks better than the graph pipeline");
        gpp_plan_destroy(&p);
        p = c;
        c = NULL;
        snprintf(p->planner, sizeof p->planner, "gpp");
        if (min_mem_bytes)
            *min_mem_bytes = 0;
    }
    gpp_plan_destroy(&c);
    if (p)
        p->search_ms = gpp_now_ms() - t0;
    return p;
}
