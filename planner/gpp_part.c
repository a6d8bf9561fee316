/* gpp_part: the partitioner's DP (the feasibility test of paper Algorithm 1),
 * see gpp_part.h, gpp_part_impl.h and docs/planner.md. The search around it
 * is in gpp_part_search.c; the plan it yields is built in gpp_plan_build.c.
 *
 * DP value. For an SP sub-graph G and a successor context ctx (the in-flight
 * level and schedule config of the stage(s) that follow G, or "none" when G
 * ends the model), D(G, ctx)[c][l] is the least number of devices that
 * partitions G into stages with TPS <= t and memory within the bound such
 * that G's source stages all use schedule config c and hold at most level l
 * (l * level_samples samples) in flight. Arrays are non-increasing in l.
 *
 *   series suffix i (children i..k-1): the first block is children i..m as
 *     one stage, or child i decomposed, or (child i parallel) its branches
 *     j..end joined with children i+1..m in one stage after the decomposed
 *     branches 0..j-1, or the same with only the tail of branch j in that
 *     stage and its head in one stage with whole branches h..j-1, after the
 *     decomposed branches 0..h-1; then suffix m+1, whose result is the
 *     block's context;
 *   parallel prefix e (branches 0..e): the last block is branches b..e as one
 *     stage or branch e decomposed, plus prefix b-1 under the same context
 *     (devices add, levels take the max).
 *
 * Every entry of a node for one ctx is filled in dependency order in one
 * call (s_fill), so recursion depth is the tree depth. Arrays live in a
 * chunked arena (stable pointers, reused between runs: no allocation in
 * steady state); memo slots are validated by a run generation, not cleared.
 * The stage set is rebuilt by re-running the same enumeration in "emit" mode
 * and following the transition that produced the value. */
#include "planner/gpp_part_impl.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int cf, lev, want; /* emit target */
} s_want_t;

/* ---- arena ---- */

static void s_arena_reset(gpp_dp_arena_t *a)
{
    for (int i = 0; i < a->n_chunks; i++)
        a->used[i] = 0;
    a->cur = 0;
}

static int *s_arena_get(gpp_dp_arena_t *a, size_t n)
{
    assert(n <= GPP_DP_ARENA_CHUNK);
    while (a->cur < a->n_chunks && a->used[a->cur] + n > GPP_DP_ARENA_CHUNK)
        a->cur++;
    if (a->cur == a->n_chunks) {
        a->chunks = gpp_xrealloc(a->chunks, (size_t)(a->n_chunks + 1) * sizeof *a->chunks);
        a->used = gpp_xrealloc(a->used, (size_t)(a->n_chunks + 1) * sizeof *a->used);
        a->chunks[a->n_chunks] = gpp_xrealloc(NULL, GPP_DP_ARENA_CHUNK * sizeof(int));
        a->used[a->n_chunks] = 0;
        a->n_chunks++;
    }
    int *p = a->chunks[a->cur] + a->used[a->cur];
    a->used[a->cur] += n;
    return p;
}

/* ---- in-flight of a stage with config ci before context ctx ---- */

/* gpp_dp_infl from the tables gpp_dp_configure builds (when small enough):
 * samples in flight, their level, and micro-batches (ceil(infl / b)). */
static inline int s_infl(const gpp_dp_t *s, int ci, int ctx)
{
    return s->infl_tab ? s->infl_tab[(size_t)ci * s->n_ctx + ctx] : gpp_dp_infl(s, ci, ctx);
}

static inline int s_lev(const gpp_dp_t *s, int ci, int ctx)
{
    return s->infl_tab ? s->lev_tab[(size_t)ci * s->n_ctx + ctx]
                       : gpp_dp_infl(s, ci, ctx) / s->level_samples;
}

static inline int s_mbf(const gpp_dp_t *s, int ci, int ctx)
{
    return s->infl_tab ? s->mbf_tab[(size_t)ci * s->n_ctx + ctx]
                       : (gpp_dp_infl(s, ci, ctx) + s->cfg[ci].b - 1) / s->cfg[ci].b;
}

static int s_ctx(const gpp_dp_t *s, int cy, int lev)
{
    return 1 + cy * s->n_levels + lev;
}

/* ---- one stage: least devices, or no_fit ---- */

static double s_compute_ms(const gpp_dp_t *s, int m, int l, int r)
{
    return s->pre_ms[m][r + 1] - s->pre_ms[m][l];
}

/* Least devices any set of stages covering positions [l, r] needs at TPS t:
 * a stage with d replicas and per-replica size m = ceil(b/d) has
 * d * TPS >= d * m / b * sum(rate) >= sum(rate), rate = least per-sample time
 * (plus a lower bound on the op's share of the optimizer step over B, which
 * each replica pays in full). */
static inline int s_lbdev(const gpp_dp_t *s, int l, int r)
{
    if (l > r)
        return 0;
    double x = (s->pre_rate_ms[r + 1] - s->pre_rate_ms[l]) * s->inv_target;
    if (x > s->n_dev)
        return s->n_dev + 1;
    int d = (int)x; /* ceil for 0 <= x <= n_dev, without the libm call */
    d += d < x;
    return d > 1 ? d : 1;
}

/* Devices an entry covering positions [l, r] may use. Every DP stage is a
 * contiguous position range and the entry is a union of whole stages, so no
 * stage holds ops on both sides of it: the ops left of l and the ops right
 * of r each need lbdev of their own. */
static int s_budget(const gpp_dp_t *s, int l, int r)
{
    int left = s_lbdev(s, 0, l - 1), right = s_lbdev(s, r + 1, s->tree->n_ops - 1);
    return s->n_dev - left - right;
}

/* Optimizer-step kernels of positions [l, r] (gpp_cost_step_kernels). */
static inline int s_step_kernels(const gpp_dp_t *s, int l, int r)
{
    return gpp_cost_step_kernels(s->pre_step_kernels[r + 1] - s->pre_step_kernels[l],
                                 s->pre_sparse_ops[r + 1] - s->pre_sparse_ops[l]);
}

/* Optimizer step of positions [l, r] (gpp_cost_step_ms of their gradient
 * bytes and kernels). The DP asks for the same range over many replica
 * counts in a row, and again in every run of the search: up to
 * GPP_DP_STEP_TABLE_MAX ops each range is computed once (step_rows), above
 * that the last range is cached. */
static inline double s_step_ms(const gpp_dp_t *s, int l, int r)
{
    gpp_dp_t *m = (gpp_dp_t *)s; /* cache only */
    if (m->step_rows) {          /* the range table (gpp_part_impl.h) */
        double *row = m->step_rows[l];
        if (!row) {
            int len = s->tree->n_ops - l;
            row = m->step_rows[l] = gpp_xcalloc((size_t)len, sizeof(double));
            for (int i = 0; i < len; i++)
                row[i] = NAN;
        }
        if (isnan(row[r - l]))
            row[r - l] = gpp_cost_step_ms(s->cost, s->pre_grad_bytes[r + 1] - s->pre_grad_bytes[l],
                                          s_step_kernels(s, l, r));
        return row[r - l];
    }
    if (l != m->step_cache_l || r != m->step_cache_r) {
        m->step_cache_l = l, m->step_cache_r = r;
        m->step_cache_ms = gpp_cost_step_ms(
            s->cost, s->pre_grad_bytes[r + 1] - s->pre_grad_bytes[l], s_step_kernels(s, l, r));
    }
    return m->step_cache_ms;
}

/* TPS of positions [l, r] as one stage of d replicas at micro-batch b
 * (the same figures gpp_cost_stage sums op by op). */
static inline double s_stage_tps(const gpp_dp_t *s, int l, int r, const gpp_dp_bnd_t *bd, int b,
                                 int d)
{
    int m = (b + d - 1) / d;
    double G = s->pre_grad_bytes[r + 1] - s->pre_grad_bytes[l];
    return (s_compute_ms(s, m, l, r) + 2.0 * bd->n * s->p2p_alpha_ms +
            2.0 * m * bd->bytes * s->p2p_ms_per_byte) /
               b +
           (s->ar_ms_per_byte[d] * G + s->ar_ms_fixed[d] + s_step_ms(s, l, r)) / s->batch;
}

/* Profile reserved_mem of positions [l, r] at m samples per replica
 * (gpp_cost_op_reserved_at); 0 without any. */
static int64_t s_reserved_at(gpp_dp_t *s, int l, int r, int m)
{
    if (!s->has_reserved)
        return 0;
    if (!s->pre_reserved_at[m]) {
        int n = s->tree->n_ops;
        int64_t *p = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
        for (int pos = 0; pos < n; pos++)
            p[pos + 1] = p[pos] + gpp_cost_op_reserved_at(s->cost, s->tree->op_at[pos], m);
        s->pre_reserved_at[m] = p;
    }
    return s->pre_reserved_at[m][r + 1] - s->pre_reserved_at[m][l];
}

/* Least replicas d in [d, dmax] with the stage's TPS <= t, visiting one d
 * per distinct ceil(b/d) (a larger d with the same per-replica size only
 * adds all-reduce time); no_fit when none. */
static int s_scan_dev(gpp_dp_t *s, int l, int r, const gpp_dp_bnd_t *bd, int b, int d, int dmax)
{
    double t = s->target_ms;
    while (d <= dmax) {
        int m = (b + d - 1) / d;
        if (s_stage_tps(s, l, r, bd, b, d) <= t)
            return d;
        if (m == 1)
            break;
        d = (b + m - 2) / (m - 1); /* least d with ceil(b/d) <= m-1 */
    }
    return s->no_fit;
}

/* The TPS scan of one stage (range and config) shared by the contexts it is
 * offered under: TPS does not depend on the samples in flight, only the
 * memory floor on d does. from = 0: not scanned yet; else d = the scan's
 * result from `from` up to hi (no_fit: none there). */
typedef struct {
    int from, hi, d;
    int64_t mbf_ok; /* d found: d fits memory with up to mbf_ok micro-batches in flight */
} s_scan_t;

/* Memory of positions [l, r] as one stage (the bound gpp_cost_stage_mem_bound, from the prefix
 * sums): state W, plus per sample of a replica's micro-batch `per1 * mbf + per0` (stashes of the
 * mbf micro-batches in flight, the running one's work), plus reserved_mem at m samples. */
typedef struct {
    int64_t W, per1, per0;
} s_mem_t;

static inline int s_mem_fits(gpp_dp_t *s, int l, int r, const s_mem_t *mm, int64_t mbf, int m)
{
    return mm->W + (mm->per1 * mbf + mm->per0) * m + s_reserved_at(s, l, r, m) <=
           s->mem_bound_bytes;
}

/* From d (a result of s_scan_dev), the least d' >= d on the scan's path
 * that also fits memory with mbf micro-batches in flight; no_fit when none.
 * reserved_mem need not grow with m, so a d that misses memory is followed
 * by a scan from the next per-replica size. */
static int s_fit_dev(gpp_dp_t *s, int l, int r, const gpp_dp_bnd_t *bd, int b, int d, int dmax,
                     const s_mem_t *mm, int64_t mbf)
{
    while (d < s->no_fit && d <= dmax) {
        int m = (b + d - 1) / d;
        if (s_mem_fits(s, l, r, mm, mbf, m))
            return d;
        if (m == 1)
            break;
        d = s_scan_dev(s, l, r, bd, b, (b + m - 2) / (m - 1), dmax);
    }
    return s->no_fit;
}

/* Least replicas of positions [l, r] as one stage with config ci before
 * context ctx (holding s_infl(ci, ctx) samples): TPS <= t and memory within the bound, at least
 * dmin (a known lower bound: s_lbdev of the interval), at most cap; no_fit when none. sc (or NULL):
 * the scan cache of this range and config, always called with the same dmin. With it the scan from
 * dmin is done once; when memory asks for d above its result, a scan from there follows, which
 * gives what a scan from that d alone would: every d the cached scan passed over with the same
 * ceil(b/d) has no more all-reduce time (it is non-decreasing in d: s->ar_monotone, else no cache).
 */
static int s_stage_dev(gpp_dp_t *s, int l, int r, const gpp_dp_bnd_t *bd, int ci, int ctx, int cap,
                       int dmin, s_scan_t *sc)
{
    s->n_eval++;
    int b = s->cfg[ci].b;
    int dmax = b < s->n_dev ? b : s->n_dev;
    if (cap < dmax)
        dmax = cap;
    int64_t mbf = s_mbf(s, ci, ctx);
    if (sc && sc->from && sc->d < s->no_fit && mbf <= sc->mbf_ok)
        return sc->d <= dmax ? sc->d : s->no_fit; /* below: sc->d fits memory at mbf */
    s_mem_t mm;
    mm.W = s->pre_state_bytes[r + 1] - s->pre_state_bytes[l];
    if (mm.W > s->mem_bound_bytes)
        return s->no_fit;
    /* the boundary tensors' blocks as the allocator rounds them (gpp_cost_mem_bound) */
    int64_t bnd = s->bnd_copies * (gpp_alloc_bound(s->alloc_rule, (int64_t)bd->bytes) +
                                   bd->n * gpp_alloc_floor(s->alloc_rule));
    mm.per1 = s->pre_stash_bytes[r + 1] - s->pre_stash_bytes[l] + bnd;
    mm.per0 = s->pre_work_bytes[r + 1] - s->pre_work_bytes[l] + bnd + s->work_bound_bytes;
    int64_t per = mm.per1 * mbf + mm.per0;
    int d = 1;
    if (per > 0) { /* a floor from W + per * m <= bound (reserved_mem >= 0 only raises it) */
        int64_t mcap = (s->mem_bound_bytes - mm.W) / per;
        if (mcap < 1)
            return s->no_fit;
        if (mcap < b)
            d = (int)((b + mcap - 1) / mcap);
    }
    if (d < dmin)
        d = dmin;
    if (!sc || !s->ar_monotone)
        return s_fit_dev(s, l, r, bd, b, s_scan_dev(s, l, r, bd, b, d, dmax), dmax, &mm, mbf);
    if (!sc->from || (sc->d >= s->no_fit && dmax > sc->hi)) {
        sc->from = dmin, sc->hi = dmax;
        sc->d = s_scan_dev(s, l, r, bd, b, dmin, dmax);
        sc->mbf_ok = -1; /* set on the next call: most stages are offered once */
    } else if (sc->mbf_ok < 0 && sc->d < s->no_fit) {
        /* micro-batches in flight at which sc->d replicas (m = ceil(b/d)
           samples each) fit memory; then the floor is <= sc->d too */
        int m = (b + sc->d - 1) / sc->d;
        int64_t room = s->mem_bound_bytes - mm.W - mm.per0 * m - s_reserved_at(s, l, r, m);
        if (room < 0)
            sc->mbf_ok = 0; /* never: mbf >= 1 */
        else
            sc->mbf_ok = mm.per1 > 0 ? room / (mm.per1 * m) : INT64_MAX;
    }
    if (sc->d >= s->no_fit) /* none in [dmin, hi], hi >= dmax */
        return s->no_fit;
    if (d <= sc->d)
        return sc->d <= dmax ? s_fit_dev(s, l, r, bd, b, sc->d, dmax, &mm, mbf) : s->no_fit;
    return s_fit_dev(s, l, r, bd, b, s_scan_dev(s, l, r, bd, b, d, dmax), dmax, &mm, mbf);
}

/* Lower bound: even with the most replicas the compute of [l, r] exceeds t
 * for every config (then so does every larger interval). */
static int s_too_heavy(const gpp_dp_t *s, int l, int r)
{
    for (int ci = 0; ci < s->n_cfg; ci++) {
        int b = s->cfg[ci].b, m = s->cfg_mmin[ci];
        if (s_compute_ms(s, m, l, r) / b <= s->target_ms &&
            s->pre_state_bytes[r + 1] - s->pre_state_bytes[l] <= s->mem_bound_bytes)
            return 0;
    }
    return 1;
}

/* ---- DP ---- */

static int *s_get(gpp_dp_t *s, int node, int idx, int ctx);

static void s_emit_stage(gpp_dp_t *s, int l, int r, const gpp_dp_bnd_t *bd, int ci, int d, int infl)
{
    if (s->n_out == s->cap_out) {
        s->cap_out = s->cap_out ? 2 * s->cap_out : 64;
        s->out = gpp_xrealloc(s->out, (size_t)s->cap_out * sizeof *s->out);
    }
    s->out[s->n_out++] =
        (gpp_dp_stage_t){l, r, ci, d, infl, s_stage_tps(s, l, r, bd, s->cfg[ci].b, d)};
}

static void s_emit_node(gpp_dp_t *s, int node, int idx, int ctx, int cf, int lev, int want);

static int s_nchild(const gpp_dp_t *s, int node)
{
    if (node >= s->tree->n_nodes)
        return s->view_k[node - s->tree->n_nodes];
    const gpp_sp_node_t *n = &s->tree->nodes[node];
    return n->kind == GPP_SP_LEAF ? 1 : n->n_children;
}

/* Entry holding the whole node: suffix 0 of a series (or view), prefix k-1
 * of a parallel node. */
static int s_top(const gpp_dp_t *s, int node)
{
    return node < s->tree->n_nodes && s->tree->nodes[node].kind == GPP_SP_PARALLEL
               ? s_nchild(s, node) - 1
               : 0;
}

/* Last position of a node or view. */
static int s_last_pos(const gpp_dp_t *s, int node)
{
    if (node < s->tree->n_nodes)
        return s->tree->nodes[node].last;
    const gpp_sp_node_t *n = &s->tree->nodes[gpp_dp_real(s, node)];
    return s->tree->nodes[n->children[s_nchild(s, node) - 1]].last;
}

/* Position range of child c of node (the leaf itself for a leaf); *child is
 * the child's node when it is not a leaf, else -1. */
static inline void s_child_range(const gpp_dp_t *s, int node, int c, int *first, int *last,
                                 int *child)
{
    const gpp_sp_node_t *n = &s->tree->nodes[gpp_dp_real(s, node)];
    if (n->kind == GPP_SP_LEAF) {
        *first = n->first, *last = n->last, *child = -1;
        return;
    }
    const gpp_sp_node_t *ch = &s->tree->nodes[n->children[c]];
    *first = ch->first, *last = ch->last;
    *child = ch->kind == GPP_SP_LEAF ? -1 : n->children[c];
}

/* Room for twice the view context slots (slot-major: cells keep their index). */
static void s_vmemo_grow(gpp_dp_t *s)
{
    int slots = s->vmemo_slots ? 2 * s->vmemo_slots : 4;
    size_t old = (size_t)s->vmemo_slots * (size_t)s->n_view_suffix,
           n = (size_t)slots * (size_t)s->n_view_suffix;
    s->vmemo_gen = gpp_xrealloc(s->vmemo_gen, n * sizeof *s->vmemo_gen);
    s->vmemo_p = gpp_xrealloc(s->vmemo_p, n * sizeof *s->vmemo_p);
    memset(s->vmemo_gen + old, 0, (n - old) * sizeof *s->vmemo_gen);
    s->vmemo_slots = slots;
}

/* Memo cell of entry idx of node under ctx: an index into memo_* for a tree
 * node; for a view (*view = 1) into vmemo_*, in the slot ctx has this run
 * (assigned when alloc; without one, -1). */
static ptrdiff_t s_cell(gpp_dp_t *s, int node, int idx, int ctx, int alloc, int *view)
{
    int n_nodes = s->tree->n_nodes;
    *view = node >= n_nodes;
    if (!*view)
        return (ptrdiff_t)(s->suffix_base[node] + idx) * s->n_ctx + ctx;
    if (s->vslot_gen[ctx] != s->memo_run) {
        if (!alloc)
            return -1;
        if (s->n_vslots == s->vmemo_slots)
            s_vmemo_grow(s);
        s->vslot_gen[ctx] = s->memo_run;
        s->vslot_of[ctx] = s->n_vslots++;
    }
    return (ptrdiff_t)s->vslot_of[ctx] * s->n_view_suffix + s->view_base[node - n_nodes] + idx;
}

static inline int *s_slot(gpp_dp_t *s, int node, int idx, int ctx)
{
    int view;
    ptrdiff_t k = s_cell(s, node, idx, ctx, 0, &view);
    if (k < 0 || (view ? s->vmemo_gen : s->memo_gen)[k] != s->memo_run)
        return NULL;
    return (view ? s->vmemo_p : s->memo_p)[k];
}

/* Accumulator of one entry: fill mode writes R; emit mode (w != NULL)
 * reports the first candidate equal to the wanted value. */
typedef struct {
    int *R;
    int n_levels;
    const s_want_t *w;
} s_acc_t;

static inline int s_offer(const s_acc_t *a, int cf, int lev, int v)
{
    if (!a->w) {
        int *x = &a->R[cf * a->n_levels + lev];
        if (v < *x)
            *x = v;
        return 0;
    }
    return cf == a->w->cf && lev <= a->w->lev && v == a->w->want;
}

/* Fill mode: an offer of at least v at (cf, lev) cannot lower the entry
 * (its value there is already <= v), so the stage need not be costed. */
static inline int s_dominated(const s_acc_t *a, int cf, int lev, int v)
{
    return !a->w && a->R[cf * a->n_levels + lev] <= v;
}

/* Steps of a non-increasing rest array: the levels where it drops. With
 * last != 0 there is no rest: one step, the outer context, 0 devices. */
#define FOR_REST_STEPS(s, rest, last, ctx, lim, xs, rv, ctx2)                                      \
    for (int n_ = (last) ? 1 : (rest)[(s)->n_cfg * (s)->n_levels], j_ = 0; j_ < n_; j_++)          \
        for (int xs = (last) ? 0 : (rest)[(s)->n_cfg * (s)->n_levels + 1 + j_],                    \
                 rv = (last) ? 0 : (rest)[xs], ctx2 = (last) ? (ctx) : 1 + xs, once_ = 1;          \
             once_ && rv < (lim); once_ = 0)

/* Emits entry idx of node under ctx with the value rv of step xs (config
 * and level cy * n_levels + l2) of its array. */
static void s_emit_step(gpp_dp_t *s, int node, int idx, int ctx, int xs, int rv)
{
    s_emit_node(s, node, idx, ctx, xs / s->n_levels, xs % s->n_levels, rv);
}

/* Least devices of an entry over every config and level (its step list's
 * last word, s_fill). */
static inline int s_entry_min(const gpp_dp_t *s, const int *entry)
{
    return entry[2 * s->n_cfg * s->n_levels + 1];
}

/* Offers A[cf][l] + B[cf][l] + add for every config cf and level l (an entry
 * whose source stages are A's and B's, plus `add` devices elsewhere). Emit
 * mode: 1 at the first one wanted, with it in *cf_out, *l_out. */
static int s_offer_sum(const gpp_dp_t *s, const s_acc_t *acc, const int *A, const int *B, int add,
                       int budget, int *cf_out, int *l_out)
{
    const int n_levels = s->n_levels;
    for (int cf = 0; cf < s->n_cfg; cf++)
        for (int l = 0; l < n_levels; l++) {
            int v = A[cf * n_levels + l] + B[cf * n_levels + l] + add;
            if (v <= budget && s_offer(acc, cf, l, v)) {
                *cf_out = cf, *l_out = l;
                return 1;
            }
        }
    return 0;
}

/* One entry of a series node under evaluation: the suffix from child i. */
typedef struct {
    int node, i, k, ctx; /* series node, first child of the suffix, children, context */
    int child;           /* child i's node; -1 for a leaf */
    int l0;              /* first position of child i */
    int budget;          /* devices the entry may use (s_budget) */
    const s_acc_t *acc;
} s_series_t;

/* (a) child i decomposed (its single-stage option is inside its own entry),
 * then the suffix i+1 whose step is child i's context. */
static int s_series_decomposed(gpp_dp_t *s, const s_series_t *E)
{
    const int last = E->i == E->k - 1, top = s_top(s, E->child);
    const int *rest = last ? NULL : s_slot(s, E->node, E->i + 1, E->ctx);
    FOR_REST_STEPS(s, rest, last, E->ctx, E->budget, xs, rv, ctx2)
    {
        const int *A = s_get(s, E->child, top, ctx2);
        int cf, l;
        if (s_offer_sum(s, E->acc, A, s->zero_row, rv, E->budget, &cf, &l)) {
            s_emit_node(s, E->child, top, ctx2, cf, l, A[cf * s->n_levels + l]);
            if (!last)
                s_emit_step(s, E->node, E->i + 1, E->ctx, xs, rv);
            return 1;
        }
    }
    return 0;
}

/* (b) for one m: children i..m (positions l0..last, boundary bd) as one
 * stage of every config, before each step of suffix m+1 (rest). */
static int s_one_stage_offer(gpp_dp_t *s, const s_series_t *E, int m, int last,
                             const gpp_dp_bnd_t *bd, int lbb, const int *rest)
{
    s_scan_t sc[GPP_DP_MAX_CFG];
    for (int c = 0; c < s->n_cfg; c++)
        sc[c].from = 0;
    FOR_REST_STEPS(s, rest, m == E->k - 1, E->ctx, E->budget - lbb + 1, xs, rv, ctx2)
    {
        for (int cx = 0; cx < s->n_cfg; cx++) {
            int lev = s_lev(s, cx, ctx2);
            if (lev > s->max_level || s_dominated(E->acc, cx, lev, lbb + rv))
                continue;
            int d = s_stage_dev(s, E->l0, last, bd, cx, ctx2, E->budget - rv, lbb, &sc[cx]);
            if (d >= s->no_fit || d + rv > E->budget)
                continue;
            if (s_offer(E->acc, cx, lev, d + rv)) {
                s_emit_stage(s, E->l0, last, bd, cx, d, s_infl(s, cx, ctx2));
                if (m < E->k - 1)
                    s_emit_step(s, E->node, m + 1, E->ctx, xs, rv);
                return 1;
            }
        }
    }
    return 0;
}

/* (b) children i..m as one stage, m = i.. (a decomposed child i is never a
 * stage alone here: its own entry holds that option). */
static int s_series_one_stage(gpp_dp_t *s, const s_series_t *E)
{
    gpp_dp_bnd_t bd;
    const gpp_dp_bnd_cell_t *row = gpp_dp_bnd_row(s, E->l0); /* NULL: grow bd */
    gpp_dp_bnd_start(s, &bd, E->l0, E->node, 0);
    for (int m = E->i; m < E->k; m++) {
        int f, last, ch_m;
        s_child_range(s, E->node, m, &f, &last, &ch_m);
        if (m == E->i && E->child >= 0)
            continue; /* the next block extends over it */
        int lbb = s_lbdev(s, E->l0, last);
        if (lbb > E->budget)
            break;
        const int *rest = m == E->k - 1 ? NULL : s_slot(s, E->node, m + 1, E->ctx);
        if (rest && lbb + s_entry_min(s, rest) > E->budget)
            continue; /* the rest alone leaves too few devices */
        if (s_too_heavy(s, E->l0, last))
            break;
        if (row)
            bd.r = last, bd.bytes = row[last - E->l0].bytes, bd.n = row[last - E->l0].n;
        else
            gpp_dp_bnd_extend(s, &bd, last);
        if (s_one_stage_offer(s, E, m, last, &bd, lbb, rest))
            return 1;
    }
    return 0;
}

/* (c) the join side of parallel child i = P: the tail stage T holds branches
 * j+1.. of P, branch j whole (e = -1) or its tail (children e+1..), and
 * children i+1..m; before T, with branch j whole, branches 0..j-1
 * decomposed; with a split, the head stage H = branches h..j-1 and children
 * 0..e of branch j, after branches 0..h-1 decomposed. */
typedef struct {
    const s_series_t *E;
    const gpp_sp_node_t *P;
    int m, last;      /* T ends with child m of the series node, at position last */
    const int *rest;  /* entry m+1; NULL when m is the last child */
    gpp_dp_bnd_t bd;  /* T's boundary: [tl, last], grown leftwards as (j, e) go down */
    int j, e;         /* T starts in branch j after its child e (e = -1: branch j whole) */
    int tl, hr;       /* T's first position; H's last position (split only) */
    int lbb, lbp;     /* s_lbdev of T; of P's positions before T */
    gpp_dp_head_t hd; /* H's boundaries for branch j (built on first use) */
    int have_hd;
} s_join_t;

/* T of one config (for one step of the rest). */
typedef struct {
    int cx, d, infl, lev; /* config, replicas, samples in flight, level */
    int ctx_before;       /* the context T gives the stages before it */
    int xs, rv;           /* the rest's step (config * n_levels + level), devices */
} s_tail_t;

static void s_emit_tail(gpp_dp_t *s, const s_join_t *J, const s_tail_t *T)
{
    s_emit_stage(s, J->tl, J->last, &J->bd, T->cx, T->d, T->infl);
}

static void s_emit_rest(gpp_dp_t *s, const s_join_t *J, const s_tail_t *T)
{
    if (J->m < J->E->k - 1)
        s_emit_step(s, J->E->node, J->m + 1, J->E->ctx, T->xs, T->rv);
}

/* Branch j whole: T is a source of P's block (config cx), after prefix j-1. */
static int s_join_whole(gpp_dp_t *s, const s_join_t *J, const s_tail_t *T)
{
    const s_series_t *E = J->E;
    const int n_levels = s->n_levels;
    const int *prefix = s_get(s, E->child, J->j - 1, T->ctx_before);
    for (int l = 0; l < n_levels; l++) {
        int pv = prefix[T->cx * n_levels + l], v = pv + T->d + T->rv;
        if (v > E->budget)
            continue;
        if (s_offer(E->acc, T->cx, l > T->lev ? l : T->lev, v)) {
            s_emit_tail(s, J, T);
            s_emit_node(s, E->child, J->j - 1, T->ctx_before, T->cx, l, pv);
            s_emit_rest(s, J, T);
            return 1;
        }
    }
    return 0;
}

/* H = branches h..j-1 and the head of branch j ([hl, hr], boundary bh) as
 * one stage of every config, after prefix h-1 (prefix: its entry). */
static int s_head_offer(gpp_dp_t *s, const s_join_t *J, const s_tail_t *T, int h, int hl, int lbh,
                        const gpp_dp_bnd_t *bh, const int *prefix, int *lean)
{
    const s_series_t *E = J->E;
    const int n_levels = s->n_levels;
    for (int cf = 0; cf < s->n_cfg; cf++) {
        int lh = s_lev(s, cf, T->ctx_before);
        if (lh > s->max_level)
            continue;
        int dh =
            s_stage_dev(s, hl, J->hr, bh, cf, T->ctx_before, E->budget - T->rv - T->d, lbh, NULL);
        *lean &= dh <= lbh;
        if (dh >= s->no_fit)
            continue;
        for (int l = lh; l < n_levels; l++) {
            int pv = prefix[cf * n_levels + l], v = pv + dh + T->d + T->rv;
            if (v > E->budget || !s_offer(E->acc, cf, l, v))
                continue;
            s_emit_tail(s, J, T);
            s_emit_stage(s, hl, J->hr, bh, cf, dh, s_infl(s, cf, T->ctx_before));
            if (h > 0)
                s_emit_node(s, E->child, h - 1, T->ctx_before, cf, l, pv);
            s_emit_rest(s, J, T);
            return 1;
        }
    }
    return 0;
}

/* Branch j split after child e: every head H, h = j down to 0. *lean: the
 * head alone (h = j) takes its least devices (s_lbdev) with every config
 * its level admits, or cannot take fewer than the budget leaves. */
static int s_join_split(gpp_dp_t *s, s_join_t *J, const s_tail_t *T, int *lean)
{
    const s_series_t *E = J->E;
    *lean = 1;
    for (int h = J->j; h >= 0; h--) {
        int hl = s->tree->nodes[J->P->children[h]].first;
        int lbh = s_lbdev(s, hl, J->hr);
        if (lbh + T->d + T->rv > E->budget)
            break;
        if (s_too_heavy(s, hl, J->hr)) {
            *lean &= h < J->j;
            break;
        }
        gpp_dp_bnd_t bh;
        gpp_dp_head_bnd(s, &J->hd, h, J->e, &bh);
        const int *prefix = h > 0 ? s_get(s, E->child, h - 1, T->ctx_before) : s->zero_row;
        int lean_h = 1;
        if (s_head_offer(s, J, T, h, hl, lbh, &bh, prefix, &lean_h))
            return 1;
        if (h == J->j)
            *lean = lean_h;
    }
    return 0;
}

/* Branch j split after child e, its head a chain: the view of branch j's
 * children 0..e (any partition of it in the space, e.g. a chain of stages)
 * under T's context, beside branches 0..j-1 decomposed (prefix j-1, same
 * context: devices add, levels take the max). Skipped when the head as
 * one stage is lean (s_join_split) in default mode: the view's stages then
 * take at least as many devices as that stage, at no lower level (their
 * sources hold b + at least T's samples), beside the same prefix. */
static int s_join_chain(gpp_dp_t *s, const s_join_t *J, const s_tail_t *T)
{
    const s_series_t *E = J->E;
    int bj = J->P->children[J->j];
    const int *Pv = s->zero_row;
    int need = s_lbdev(s, s->tree->nodes[bj].first, J->hr) + T->d + T->rv;
    if (need > E->budget)
        return 0;
    if (J->j > 0) {
        Pv = s_get(s, E->child, J->j - 1, T->ctx_before);
        if (need + s_entry_min(s, Pv) > E->budget)
            return 0;
    }
    int v = s->tree->n_nodes + s->view_first[bj] + J->e; /* children 0..e */
    const int *A = s_get(s, v, 0, T->ctx_before);
    int cf, l;
    if (!s_offer_sum(s, E->acc, A, Pv, T->d + T->rv, E->budget, &cf, &l))
        return 0;
    s_emit_tail(s, J, T);
    s_emit_node(s, v, 0, T->ctx_before, cf, l, A[cf * s->n_levels + l]);
    if (J->j > 0)
        s_emit_node(s, E->child, J->j - 1, T->ctx_before, cf, l, Pv[cf * s->n_levels + l]);
    s_emit_rest(s, J, T);
    return 1;
}

/* T = [tl, last] of every config, before each step of the rest. */
static int s_join_offer(gpp_dp_t *s, s_join_t *J)
{
    const s_series_t *E = J->E;
    s_scan_t sc[GPP_DP_MAX_CFG];
    for (int c = 0; c < s->n_cfg; c++)
        sc[c].from = 0;
    FOR_REST_STEPS(s, J->rest, J->m == E->k - 1, E->ctx, E->budget, xs, rv, ctx2)
    {
        for (int cx = 0; cx < s->n_cfg; cx++) {
            int I = s_infl(s, cx, ctx2), lev = s_lev(s, cx, ctx2);
            if (lev > s->max_level)
                continue;
            int d = s_stage_dev(s, J->tl, J->last, &J->bd, cx, ctx2, E->budget - rv - J->lbp,
                                J->lbb, &sc[cx]);
            if (d >= s->no_fit)
                continue;
            s_tail_t T = {cx, d, I, lev, s_ctx(s, cx, lev), xs, rv};
            int lean = 0;
            if (J->e < 0 ? s_join_whole(s, J, &T)
                         : s_join_split(s, J, &T, &lean) ||
                               (!(lean && !s->generalized) && s_join_chain(s, J, &T)))
                return 1;
        }
    }
    return 0;
}

/* T starting in branch j: e from its last split point down to -1 (whole).
 * Returns 1 when emitted, -1 when T has grown too heavy (no smaller j can
 * do better: stop), 0 otherwise. */
static int s_join_branch(gpp_dp_t *s, s_join_t *J, int j)
{
    const s_series_t *E = J->E;
    const gpp_sp_node_t *Bj = &s->tree->nodes[J->P->children[j]];
    int n_split = Bj->kind == GPP_SP_SERIES ? Bj->n_children - 1 : 0;
    J->j = j, J->have_hd = 0;
    for (int e = n_split - 1; e >= -1; e--) {
        if (e < 0 && j == 0)
            break; /* all of P with the join: a series block of (b) */
        int tl = e < 0 ? Bj->first : s->tree->nodes[Bj->children[e + 1]].first;
        int lbb = s_lbdev(s, tl, J->last);
        if (lbb + 1 > E->budget || s_too_heavy(s, tl, J->last))
            return -1;
        gpp_dp_bnd_extend_left(s, &J->bd, tl);
        /* every stage before T covers [P.first, tl - 1] */
        int lbp = s_lbdev(s, J->P->first, tl - 1);
        if (lbb + lbp + (J->rest ? s_entry_min(s, J->rest) : 0) > E->budget)
            continue;
        if (e >= 0 && !J->have_hd) {
            gpp_dp_head_init(s, E->node, E->child, j, &J->hd);
            J->have_hd = 1;
        }
        J->e = e, J->tl = tl, J->lbb = lbb, J->lbp = lbp;
        J->hr = e < 0 ? -1 : s->tree->nodes[Bj->children[e]].last;
        if (s_join_offer(s, J))
            return 1;
    }
    return 0;
}

/* (c) for every end m of T: branches j of P from the last down. */
static int s_series_join(gpp_dp_t *s, const s_series_t *E)
{
    s_join_t J = {.E = E, .P = &s->tree->nodes[E->child]};
    int f1, x1, c1;
    s_child_range(s, E->node, E->i + 1, &f1, &x1, &c1);
    for (int m = E->i + 1; m < E->k; m++) {
        int f, last, ch_m;
        s_child_range(s, E->node, m, &f, &last, &ch_m);
        if (s_lbdev(s, f1, last) + 1 > E->budget)
            break;
        const int *rest = m == E->k - 1 ? NULL : s_slot(s, E->node, m + 1, E->ctx);
        if (rest && s_lbdev(s, f1, last) + 1 + s_entry_min(s, rest) > E->budget)
            continue;
        J.m = m, J.last = last, J.rest = rest;
        gpp_dp_bnd_start(s, &J.bd, f1, E->node, 0);
        gpp_dp_bnd_extend(s, &J.bd, last);
        for (int j = J.P->n_children - 1; j >= 0; j--) {
            int r = s_join_branch(s, &J, j);
            if (r > 0)
                return 1;
            if (r < 0)
                break;
        }
    }
    return 0;
}

/* Series suffix i (children i..k-1) under ctx; also a leaf (k = 1). */
static int s_eval_series(gpp_dp_t *s, int node, int i, int ctx, const s_acc_t *acc)
{
    s_series_t E = {.node = node, .i = i, .k = s_nchild(s, node), .ctx = ctx, .acc = acc};
    int l1;
    s_child_range(s, node, i, &E.l0, &l1, &E.child);
    E.budget = s_budget(s, E.l0, s_last_pos(s, node));
    if (E.budget < 1)
        return 0;
    if (E.child >= 0 && s_series_decomposed(s, &E))
        return 1;
    if (s_series_one_stage(s, &E))
        return 1;
    if (E.child >= 0 && s->tree->nodes[E.child].kind == GPP_SP_PARALLEL && i < E.k - 1)
        return s_series_join(s, &E);
    return 0;
}

/* (b) of a parallel prefix: branches b..e ([fb, le], boundary bd) as one
 * stage of every config, after prefix b-1 under the same context. */
static int s_parallel_stage_offer(gpp_dp_t *s, int node, int b, int ctx, const s_acc_t *acc, int fb,
                                  int le, const gpp_dp_bnd_t *bd, int lbb, int budget)
{
    const int n_levels = s->n_levels;
    const int *Pv = b > 0 ? s_slot(s, node, b - 1, ctx) : s->zero_row;
    for (int cx = 0; cx < s->n_cfg; cx++) {
        int I = s_infl(s, cx, ctx), lev = s_lev(s, cx, ctx);
        if (lev > s->max_level)
            continue;
        int d = s_stage_dev(s, fb, le, bd, cx, ctx, budget, lbb, NULL);
        if (d >= s->no_fit)
            continue;
        for (int l = lev; l < n_levels; l++) {
            int v = d + Pv[cx * n_levels + l];
            if (v > budget || !s_offer(acc, cx, l, v))
                continue;
            s_emit_stage(s, fb, le, bd, cx, d, I);
            if (b > 0)
                s_emit_node(s, node, b - 1, ctx, cx, l, Pv[cx * n_levels + l]);
            return 1;
        }
    }
    return 0;
}

/* Parallel prefix e (branches 0..e) under ctx: every branch's stages share
 * the context; devices add up, levels take the max. */
static int s_eval_parallel(gpp_dp_t *s, int node, int e, int ctx, const s_acc_t *acc)
{
    const gpp_sp_node_t *n = &s->tree->nodes[node];
    int fe, le, child;
    s_child_range(s, node, e, &fe, &le, &child);
    const int budget = s_budget(s, n->first, le);
    if (budget < 1)
        return 0;
    /* (a) branch e decomposed */
    if (child >= 0) {
        const int *A = s_get(s, child, s_top(s, child), ctx);
        const int *Pv = e > 0 ? s_slot(s, node, e - 1, ctx) : s->zero_row;
        int cf, l;
        if (s_offer_sum(s, acc, A, Pv, 0, budget, &cf, &l)) {
            s_emit_node(s, child, s_top(s, child), ctx, cf, l, A[cf * s->n_levels + l]);
            if (e > 0)
                s_emit_node(s, node, e - 1, ctx, cf, l, Pv[cf * s->n_levels + l]);
            return 1;
        }
    }
    /* (b) branches b..e as one stage */
    gpp_dp_bnd_t bd;
    gpp_dp_bnd_start(s, &bd, fe, node, 0); /* built on first use: [fe, le], then leftwards */
    for (int b = e; b >= 0; b--) {
        int fb, lb, cb;
        s_child_range(s, node, b, &fb, &lb, &cb);
        int lbb = s_lbdev(s, fb, le);
        if (!(b == e && child >= 0) && (lbb > budget || s_too_heavy(s, fb, le)))
            break;
        if (b == e && child >= 0)
            continue;
        if (bd.r < le)
            gpp_dp_bnd_extend(s, &bd, le);
        gpp_dp_bnd_extend_left(s, &bd, fb);
        if (s_parallel_stage_offer(s, node, b, ctx, acc, fb, le, &bd, lbb, budget))
            return 1;
    }
    return 0;
}

/* Default mode (universal b, 1F1B: one config; in the per-stage search the
 * contexts a chain reaches multiply with the configs, and the series
 * recurrence is cheaper): the view of an all-leaf series branch (children
 * 0..kv-1, at positions first..first+kv-1) under ctx, built from its end:
 * the last stage [a, e] (config cx, in flight s_infl(cx, ctx)) after the
 * view of children 0..a-1 under that stage's context, or alone as the
 * source (a = first). Every partition of a chain of leaves in the space is
 * a chain of ranges, so this is the series recurrence on the same view; but
 * it asks only for entry 0 of shorter views (under the stage's context),
 * which the views of one branch share, where the suffix recurrence fills
 * all kv suffixes of every view. Those are filled before this entry holds
 * a boundary: they use the same depth's stamp rows. */
static int s_eval_leaf_view(gpp_dp_t *s, int node, int ctx, const s_acc_t *acc)
{
    const int kv = s_nchild(s, node), v1 = node - (kv - 1); /* v1 + x - 1: children 0..x-1 */
    const int first = s->tree->nodes[gpp_dp_real(s, node)].first, e = first + kv - 1;
    const int budget = s_budget(s, first, e), n_levels = s->n_levels;
    if (budget < 1)
        return 0;
    int a_min = e + 1; /* least first position of a last stage within the budget */
    while (a_min > first && s_lbdev(s, a_min - 1, e) <= budget && !s_too_heavy(s, a_min - 1, e))
        a_min--;
    for (int cx = 0; !acc->w && cx < s->n_cfg; cx++) { /* the shorter views, shortest first */
        int lev = s_lev(s, cx, ctx);
        for (int a = a_min > first ? a_min : first + 1; lev <= s->max_level && a <= e; a++)
            s_get(s, v1 + (a - first) - 1, 0, s_ctx(s, cx, lev));
    }
    gpp_dp_bnd_t bd;
    gpp_dp_bnd_start(s, &bd, e + 1, node, 0);
    s_scan_t sc[GPP_DP_MAX_CFG];
    for (int a = e; a >= a_min; a--) {
        gpp_dp_bnd_extend_left(s, &bd, a);
        int lbb = s_lbdev(s, a, e);
        for (int c = 0; c < s->n_cfg; c++)
            sc[c].from = 0;
        for (int cx = 0; cx < s->n_cfg; cx++) {
            int I = s_infl(s, cx, ctx), lev = s_lev(s, cx, ctx);
            if (lev > s->max_level)
                continue;
            int ctx2 = s_ctx(s, cx, lev);
            const int *rest = a > first ? s_slot(s, v1 + (a - first) - 1, 0, ctx2) : NULL;
            assert(rest || a == first); /* filled above */
            int n_steps = rest ? rest[s->n_cfg * n_levels] : 1;
            for (int j = 0; j < n_steps; j++) {
                int x = rest ? rest[s->n_cfg * n_levels + 1 + j] : cx * n_levels + lev;
                int rv = rest ? rest[x] : 0;
                if (lbb + rv > budget || s_dominated(acc, x / n_levels, x % n_levels, lbb + rv))
                    continue;
                int d = s_stage_dev(s, a, e, &bd, cx, ctx, budget - rv, lbb, &sc[cx]);
                if (d >= s->no_fit || !s_offer(acc, x / n_levels, x % n_levels, d + rv))
                    continue;
                s_emit_stage(s, a, e, &bd, cx, d, I);
                if (rest)
                    s_emit_node(s, v1 + (a - first) - 1, 0, ctx2, x / n_levels, x % n_levels, rv);
                return 1;
            }
        }
    }
    return 0;
}

static int s_eval(gpp_dp_t *s, int node, int idx, int ctx, const s_acc_t *acc)
{
    if (node >= s->tree->n_nodes) {
        if (s->view_leaves[node - s->tree->n_nodes] && !s->generalized) {
            assert(idx == 0);
            return s_eval_leaf_view(s, node, ctx, acc);
        }
        return s_eval_series(s, node, idx, ctx, acc);
    }
    if (s->tree->nodes[node].kind == GPP_SP_PARALLEL)
        return s_eval_parallel(s, node, idx, ctx, acc);
    return s_eval_series(s, node, idx, ctx, acc);
}

/* Fills every entry of node under ctx, in dependency order. */
static void s_fill(gpp_dp_t *s, int node, int ctx)
{
    int k = s_nchild(s, node);
    int par = s_top(s, node) > 0; /* a parallel node has >= 2 branches */
    if (node >= s->tree->n_nodes && s->view_leaves[node - s->tree->n_nodes] && !s->generalized)
        k = 1; /* entry 0 only (s_eval_leaf_view) */
    const int n_cfg = s->n_cfg, n_levels = s->n_levels;
    for (int it = 0; it < k; it++) {
        int idx = par ? it : k - 1 - it;
        /* R[n_cfg*n_levels], then the step list: count, indices where R drops */
        int *R = s_arena_get(&s->arena, (size_t)2 * n_cfg * n_levels + 2);
        for (int x = 0; x < n_cfg * n_levels; x++)
            R[x] = s->no_fit;
        s_acc_t acc = {R, n_levels, NULL};
        s_eval(s, node, idx, ctx, &acc);
        for (int cf = 0; cf < n_cfg; cf++)
            for (int l = 1; l < n_levels; l++)
                if (R[cf * n_levels + l - 1] < R[cf * n_levels + l])
                    R[cf * n_levels + l] = R[cf * n_levels + l - 1];
        int *steps = R + n_cfg * n_levels, n_steps = 0, lo = s->no_fit;
        for (int x = 0; x < n_cfg * n_levels; x++)
            if (R[x] < s->no_fit && (x % n_levels == 0 || R[x] != R[x - 1])) {
                steps[1 + n_steps++] = x;
                if (R[x] < lo)
                    lo = R[x];
            }
        steps[0] = n_steps;
        steps[n_cfg * n_levels + 1] = lo; /* least devices over all configs and levels */
        int view;
        ptrdiff_t key = s_cell(s, node, idx, ctx, 1, &view); /* after s_eval: it may grow vmemo */
        (view ? s->vmemo_p : s->memo_p)[key] = R;
        (view ? s->vmemo_gen : s->memo_gen)[key] = s->memo_run;
    }
}

static int *s_get(gpp_dp_t *s, int node, int idx, int ctx)
{
    int *R = s_slot(s, node, idx, ctx);
    if (R)
        return R;
    s_fill(s, node, ctx);
    return s_slot(s, node, idx, ctx);
}

static void s_emit_node(gpp_dp_t *s, int node, int idx, int ctx, int cf, int lev, int want)
{
    s_want_t w = {cf, lev, want};
    s_acc_t acc = {NULL, s->n_levels, &w};
    int found = s_eval(s, node, idx, ctx, &acc);
    assert(found && "partitioner: DP value could not be reconstructed");
    (void)found;
}

/* One DP run at target t. Returns 1 when some plan has every stage TPS <= t
 * and its source level <= max_level; then s->out holds the stages of the one
 * with the fewest samples in flight at its sources. */
int gpp_dp_run(gpp_dp_t *s, double t, int max_level)
{
    s->target_ms = t;
    s->inv_target = isfinite(t) ? (1.0 - 1e-9) / t : 0.0; /* t = inf: lbdev = 1 */
    /* levels only grow towards the sources, so no entry needs a level above
       the root's limit */
    s->max_level = max_level < s->n_levels - 1 ? max_level : s->n_levels - 1;
    s->memo_run++;
    s->n_vslots = 0;
    s_arena_reset(&s->arena);
    const int *R = s_get(s, s->tree->root, s_top(s, s->tree->root), 0);
    int best_cf = -1, best_l = -1;
    for (int l = 0; l < s->n_levels && l <= max_level && best_cf < 0; l++)
        for (int cf = 0; cf < s->n_cfg; cf++)
            if (R[cf * s->n_levels + l] <= s->n_dev &&
                (best_cf < 0 || R[cf * s->n_levels + l] < R[best_cf * s->n_levels + l]))
                best_cf = cf, best_l = l;
    if (best_cf < 0)
        return 0;
    s->n_out = 0;
    s_emit_node(s, s->tree->root, s_top(s, s->tree->root), 0, best_cf, best_l,
                R[best_cf * s->n_levels + best_l]);
    s->out_level = best_l;
    return 1;
}
