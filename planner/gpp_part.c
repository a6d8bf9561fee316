/* gpp_part: GPP / SPP stage partitioner (paper Algorithm 1), see gpp_part.h
 * and docs/planner.md.
 *
 * DP value. For an SP sub-graph G and a successor context ctx (the in-flight
 * level and schedule config of the stage(s) that follow G, or "none" when G
 * ends the model), D(G, ctx)[c][l] is the least number of devices that
 * partitions G into stages with TPS <= t and memory within the bound such
 * that G's source stages all use schedule config c and hold at most level l
 * (l * q samples) in flight. Arrays are non-increasing in l.
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
#include "planner/gpp_part.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_time.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "planner/gpp_sp.h"

#define MAX_CFG 256
#define ARENA_CHUNK ((size_t)1 << 18)

typedef struct {
    int b, k;
} s_cfg_t;

typedef struct {
    int l, r; /* leaf positions */
    int ci;   /* config index */
    int d;
    int infl; /* samples in flight (DP view) */
    double tps_ms;
} s_stage_t;

typedef struct {
    int cf, lev, want; /* emit target */
} s_want_t;

typedef struct {
    int **chunks;
    size_t *used;
    int n_chunks, cur;
} s_arena_t;

typedef struct {
    const gpp_graph_t *g;
    const gpp_cost_t *cost;
    const gpp_sp_t *t;
    int B, n_dev, INF;
    int64_t M;
    int generalized;
    int C;
    s_cfg_t cfg[MAX_CFG];
    int q, NL, nctx;
    int sp_depth;
    /* per position prefix sums */
    int64_t *pre_params, *pre_stash, *pre_res;
    double *pre_grad;
    int *pre_kern;      /* ops with parameters (optimizer-step kernels) */
    int step_l, step_r; /* s_step_ms cache: range and value */
    double step_v;
    double *pre_rate;    /* least per-sample fwd+bwd ms of each op over the used sizes */
    double **pre_ms;     /* [B+1]: per samples m, prefix of fwd+bwd ms */
    double *ar_a, *ar_b; /* [n_dev+1]: allreduce_ms = ar_a*bytes + ar_b */
    double p2p_alpha_ms, p2p_ms_per_byte;
    /* boundary */
    int *maxc;                      /* [pos]: largest consumer position, -1 for none */
    int *stamp;                     /* [2 * (tree depth + 1)][pos]: one pair of rows per SP-tree
                                       depth, so that a boundary survives the nested fills its
                                       entry triggers (those only touch deeper rows) */
    int *node_depth;                /* [node] depth in the SP tree, root 0 */
    double *hsc_bytes;              /* [depth][hsc_stride]: s_head_t scratch (W, Hd bytes) */
    int *hsc_int;                   /* [depth][hsc_istride]: W, Hd counts, shared producers */
    size_t hsc_stride, hsc_istride; /* row sizes (s_head_init) */
    int hsc_maxnc;
    int *hsc_owner, *hsc_used; /* [depth]: parallel node owning the row, list entries used */
    int stamp_v;
    /* memo */
    int *base; /* [node] first suffix id */
    int n_suffix;
    unsigned *memo_gen;
    int **memo_p; /* [n_suffix * nctx] pointer into arena */
    unsigned gen;
    size_t memo_slots;
    s_arena_t ar;
    int *zero;    /* [C*NL] zeros */
    double tgt;   /* target TPS */
    double inv_t; /* (1 - 1e-9) / tgt: lbdev rounds safely down */
    /* emit */
    s_stage_t *out;
    int n_out, cap_out;
    int out_level; /* source level of the emitted plan */
    int max_level; /* level limit of the current run */
    int min_tps;   /* opts.min_tps: rank plans by TPS, not by the estimate */
    int simulate;  /* opts.simulate: keep candidates for s_pick_simulated */
    long long n_eval;
} s_dp_t;

/* ---- ComputeInFlight (appendix table) ---- */

static int s_cif_all(int kx, int bx, int ky, int by, int iy, int vals[10])
{
    int X = kx * bx, Y = ky * by, M = bx > by ? bx : by;
    int cond[10] = {
        M < X && X < Y,
        M == X && X < Y,
        bx <= by && by < Y && Y < X,
        bx <= by && by == Y && Y < X,
        by <= bx && bx < Y && Y < X,
        by <= bx && bx == Y && Y < X,
        M == Y && Y == X,
        M < Y && Y == X,
        bx <= X && X < by && by <= Y,
        by <= Y && Y < bx && bx <= X,
    };
    int res[10] = {
        iy + 2 * M, iy + M, iy + X - Y + 2 * by, iy + X,  iy + X - Y + 2 * bx,
        iy + X,     iy + Y, iy + 2 * M,          iy + by, iy + X - Y + bx,
    };
    int mask = 0;
    for (int r = 0; r < 10; r++) {
        vals[r] = res[r];
        if (cond[r])
            mask |= 1 << r;
    }
    return mask;
}

int gpp_part_inflight_matches(int kx, int bx, int ky, int by)
{
    int v[10];
    return __builtin_popcount((unsigned)s_cif_all(kx, bx, ky, by, 0, v));
}

int gpp_part_inflight(int kx, int bx, int ky, int by, int iy, int *row_out)
{
    assert(kx >= 1 && bx >= 1 && ky >= 1 && by >= 1 && iy >= 0);
    int v[10];
    int mask = s_cif_all(kx, bx, ky, by, iy, v);
    assert(mask != 0 && "ComputeInFlight: no table row matches");
    int row = __builtin_ctz((unsigned)mask);
    for (int r = row + 1; r < 10; r++)
        assert(!(mask >> r & 1) || v[r] == v[row]);
    if (row_out)
        *row_out = row + 1;
    return v[row];
}

/* ---- arena ---- */

static void s_arena_reset(s_arena_t *a)
{
    for (int i = 0; i < a->n_chunks; i++)
        a->used[i] = 0;
    a->cur = 0;
}

static int *s_arena_get(s_arena_t *a, size_t n)
{
    assert(n <= ARENA_CHUNK);
    while (a->cur < a->n_chunks && a->used[a->cur] + n > ARENA_CHUNK)
        a->cur++;
    if (a->cur == a->n_chunks) {
        a->chunks = gpp_xrealloc(a->chunks, (size_t)(a->n_chunks + 1) * sizeof *a->chunks);
        a->used = gpp_xrealloc(a->used, (size_t)(a->n_chunks + 1) * sizeof *a->used);
        a->chunks[a->n_chunks] = gpp_xrealloc(NULL, ARENA_CHUNK * sizeof(int));
        a->used[a->n_chunks] = 0;
        a->n_chunks++;
    }
    int *p = a->chunks[a->cur] + a->used[a->cur];
    a->used[a->cur] += n;
    return p;
}

static void s_arena_free(s_arena_t *a)
{
    for (int i = 0; i < a->n_chunks; i++)
        free(a->chunks[i]);
    free(a->chunks);
    free(a->used);
    memset(a, 0, sizeof *a);
}

/* ---- in-flight of a stage with config ci before context ctx ---- */

static int s_infl(const s_dp_t *s, int ci, int ctx)
{
    const s_cfg_t *x = &s->cfg[ci];
    int v;
    if (ctx == 0) {
        v = x->k * x->b;
    } else {
        int cb = (ctx - 1) / s->NL, ib = (ctx - 1) % s->NL;
        int iy = ib * s->q;
        if (!s->generalized)
            v = x->b + iy;
        else
            v = gpp_part_inflight(x->k, x->b, s->cfg[cb].k, s->cfg[cb].b, iy, NULL);
    }
    return v < s->B ? v : s->B;
}

static int s_ctx(const s_dp_t *s, int cy, int lev)
{
    return 1 + cy * s->NL + lev;
}

/* ---- boundary of a growing interval [l, r] ---- */

typedef struct {
    int l, r; /* current interval, r = l - 1 when empty */
    double bytes;
    int n;
    int st;
    int *stamp; /* the stamp row this boundary owns */
} s_bnd_t;

/* Starts an empty interval at l; `row` (0 or 1) picks one of the two stamp
 * rows of `node`'s depth: two boundaries of one entry use different rows. */
static void s_bnd_start(s_dp_t *s, s_bnd_t *bd, int l, int node, int row)
{
    bd->l = l;
    bd->r = l - 1;
    bd->bytes = 0;
    bd->n = 0;
    bd->st = ++s->stamp_v;
    bd->stamp = s->stamp + (size_t)(2 * s->node_depth[node] + row) * (size_t)s->t->n_ops;
}

static void s_bnd_extend(s_dp_t *s, s_bnd_t *bd, int r)
{
    const gpp_graph_t *g = s->g;
    while (bd->r < r) {
        int pos = ++bd->r;
        const gpp_op_t *o = &g->ops[s->t->op_at[pos]];
        if (s->maxc[pos] > pos) {
            bd->bytes += (double)o->out_bytes;
            bd->n++;
        }
        for (int k = 0; k < o->n_inputs; k++) {
            int q = o->inputs[k], pq = s->t->pos_of[q];
            int dup = 0;
            for (int j = 0; j < k; j++)
                dup |= o->inputs[j] == q;
            if (dup)
                continue;
            if (pq < bd->l) {
                if (bd->stamp[pq] != bd->st) {
                    bd->stamp[pq] = bd->st;
                    bd->bytes += (double)g->ops[q].out_bytes;
                    bd->n++;
                }
            } else if (s->maxc[pq] == pos) {
                bd->bytes -= (double)g->ops[q].out_bytes;
                bd->n--;
            }
        }
    }
}

/* Grows the interval to the left down to position l. */
static void s_bnd_extend_left(s_dp_t *s, s_bnd_t *bd, int l)
{
    const gpp_graph_t *g = s->g;
    while (bd->l > l) {
        int pos = --bd->l;
        const gpp_op_t *o = &g->ops[s->t->op_at[pos]];
        if (bd->stamp[pos] == bd->st) { /* was an outside producer of the interval */
            bd->stamp[pos] = 0;
            bd->bytes -= (double)o->out_bytes;
            bd->n--;
        }
        if (s->maxc[pos] > bd->r) {
            bd->bytes += (double)o->out_bytes;
            bd->n++;
        }
        for (int k = 0; k < o->n_inputs; k++) {
            int pq = s->t->pos_of[o->inputs[k]];
            if (bd->stamp[pq] != bd->st) {
                bd->stamp[pq] = bd->st;
                bd->bytes += (double)g->ops[o->inputs[k]].out_bytes;
                bd->n++;
            }
        }
    }
}

/* ---- one stage: least devices, or INF ---- */

static double s_compute_ms(const s_dp_t *s, int m, int l, int r)
{
    return s->pre_ms[m][r + 1] - s->pre_ms[m][l];
}

/* Least devices any set of stages covering positions [l, r] needs at TPS t:
 * a stage with d replicas and per-replica size m = ceil(b/d) has
 * d * TPS >= d * m / b * sum(rate) >= sum(rate), rate = least per-sample time
 * (plus a lower bound on the op's share of the optimizer step over B, which
 * each replica pays in full). */
static inline int s_lbdev(const s_dp_t *s, int l, int r)
{
    if (l > r)
        return 0;
    double x = (s->pre_rate[r + 1] - s->pre_rate[l]) * s->inv_t;
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
static int s_budget(const s_dp_t *s, int l, int r)
{
    int left = s_lbdev(s, 0, l - 1), right = s_lbdev(s, r + 1, s->t->n_ops - 1);
    return s->n_dev - left - right;
}

/* Optimizer step of positions [l, r] (gpp_cost_step_ms of their gradient
 * bytes and kernels). The DP asks for the same range over many replica
 * counts in a row: the last range is cached. */
static inline double s_step_ms(const s_dp_t *s, int l, int r)
{
    s_dp_t *m = (s_dp_t *)s; /* cache only */
    if (l != m->step_l || r != m->step_r) {
        m->step_l = l, m->step_r = r;
        m->step_v = gpp_cost_step_ms(s->cost, s->pre_grad[r + 1] - s->pre_grad[l],
                                     s->pre_kern[r + 1] - s->pre_kern[l]);
    }
    return m->step_v;
}

/* TPS of positions [l, r] as one stage of d replicas at micro-batch b
 * (the same figures gpp_cost_stage sums op by op). */
static inline double s_stage_tps(const s_dp_t *s, int l, int r, const s_bnd_t *bd, int b, int d)
{
    int m = (b + d - 1) / d;
    double G = s->pre_grad[r + 1] - s->pre_grad[l];
    return (s_compute_ms(s, m, l, r) + 2.0 * bd->n * s->p2p_alpha_ms +
            2.0 * m * bd->bytes * s->p2p_ms_per_byte) /
               b +
           (s->ar_a[d] * G + s->ar_b[d] + s_step_ms(s, l, r)) / s->B;
}

/* dmin: a known lower bound (s_lbdev of the interval). */
static int s_stage_dev(s_dp_t *s, int l, int r, const s_bnd_t *bd, int ci, int infl, int cap,
                       int dmin)
{
    s->n_eval++;
    int b = s->cfg[ci].b;
    int dmax = b < s->n_dev ? b : s->n_dev;
    if (cap < dmax)
        dmax = cap;
    int64_t W = GPP_BYTES_PER_PARAM * (s->pre_params[r + 1] - s->pre_params[l]) +
                (s->pre_res[r + 1] - s->pre_res[l]);
    if (W > s->M)
        return s->INF;
    int64_t stash = s->pre_stash[r + 1] - s->pre_stash[l];
    int64_t mbf = (infl + b - 1) / b;
    int d = 1;
    if (stash > 0) {
        int64_t mcap = (s->M - W) / (stash * mbf);
        if (mcap < 1)
            return s->INF;
        if (mcap < b)
            d = (int)((b + mcap - 1) / mcap);
    }
    if (d < dmin)
        d = dmin;
    double t = s->tgt;
    while (d <= dmax) {
        int m = (b + d - 1) / d;
        if (s_stage_tps(s, l, r, bd, b, d) <= t)
            return d;
        if (m == 1)
            break;
        d = (b + m - 2) / (m - 1); /* least d with ceil(b/d) <= m-1 */
    }
    return s->INF;
}

/* Lower bound: even with the most replicas the compute of [l, r] exceeds t
 * for every config (then so does every larger interval). */
static int s_too_heavy(const s_dp_t *s, int l, int r)
{
    for (int ci = 0; ci < s->C; ci++) {
        int b = s->cfg[ci].b;
        int dmax = b < s->n_dev ? b : s->n_dev;
        int m = (b + dmax - 1) / dmax;
        if (s_compute_ms(s, m, l, r) / b <= s->tgt &&
            GPP_BYTES_PER_PARAM * (s->pre_params[r + 1] - s->pre_params[l]) <= s->M)
            return 0;
    }
    return 1;
}

/* ---- DP ---- */

static int *s_get(s_dp_t *s, int node, int idx, int ctx);

static void s_emit_stage(s_dp_t *s, int l, int r, const s_bnd_t *bd, int ci, int d, int infl)
{
    if (s->n_out == s->cap_out) {
        s->cap_out = s->cap_out ? 2 * s->cap_out : 64;
        s->out = gpp_xrealloc(s->out, (size_t)s->cap_out * sizeof *s->out);
    }
    s->out[s->n_out++] = (s_stage_t){l, r, ci, d, infl, s_stage_tps(s, l, r, bd, s->cfg[ci].b, d)};
}

static void s_emit_node(s_dp_t *s, int node, int idx, int ctx, int cf, int lev, int want);

static int s_nchild(const s_dp_t *s, int node)
{
    const gpp_sp_node_t *n = &s->t->nodes[node];
    return n->kind == GPP_SP_LEAF ? 1 : n->n_children;
}

/* Entry holding the whole node: suffix 0 of a series, prefix k-1 of a parallel node. */
static int s_top(const s_dp_t *s, int node)
{
    return s->t->nodes[node].kind == GPP_SP_PARALLEL ? s_nchild(s, node) - 1 : 0;
}

/* Position range of child c of node (the leaf itself for a leaf); *child is
 * the child's node when it is not a leaf, else -1. */
static inline void s_child_range(const s_dp_t *s, int node, int c, int *first, int *last,
                                 int *child)
{
    const gpp_sp_node_t *n = &s->t->nodes[node];
    if (n->kind == GPP_SP_LEAF) {
        *first = n->first, *last = n->last, *child = -1;
        return;
    }
    const gpp_sp_node_t *ch = &s->t->nodes[n->children[c]];
    *first = ch->first, *last = ch->last;
    *child = ch->kind == GPP_SP_LEAF ? -1 : n->children[c];
}

static int *s_slot(s_dp_t *s, int node, int idx, int ctx)
{
    size_t k = (size_t)(s->base[node] + idx) * s->nctx + ctx;
    if (s->memo_gen[k] != s->gen)
        return NULL;
    return s->memo_p[k];
}

/* Accumulator of one entry: fill mode writes R; emit mode (w != NULL)
 * reports the first candidate equal to the wanted value. */
typedef struct {
    int *R;
    int NL;
    const s_want_t *w;
} s_acc_t;

static inline int s_offer(const s_acc_t *a, int cf, int lev, int v)
{
    if (!a->w) {
        int *x = &a->R[cf * a->NL + lev];
        if (v < *x)
            *x = v;
        return 0;
    }
    return cf == a->w->cf && lev <= a->w->lev && v == a->w->want;
}

/* Steps of a non-increasing rest array: the levels where it drops. With
 * last != 0 there is no rest: one step, the outer context, 0 devices. */
#define FOR_REST_STEPS(s, rest, last, ctx, lim, cy, l2, rv, ctx2)                                  \
    for (int n_ = (last) ? 1 : (rest)[(s)->C * (s)->NL], j_ = 0; j_ < n_; j_++)                    \
        for (int idx_ = (last) ? 0 : (rest)[(s)->C * (s)->NL + 1 + j_], cy = idx_ / (s)->NL,       \
                 l2 = idx_ % (s)->NL, rv = (last) ? 0 : (rest)[idx_],                              \
                 ctx2 = (last) ? (ctx) : s_ctx((s), cy, l2), once_ = 1;                            \
             once_ && rv < (lim); once_ = 0)

/* Head stages of a join-side split through series branch j of parallel node
 * P (a child of series `node`): H(h, e) = W(h) + Hd(e), W(h) = whole branches
 * h..j-1, Hd(e) = children 0..e of branch j; one contiguous range. Branches
 * of a parallel node share no edge, so the boundary of H is W's plus Hd's
 * less the producers outside P that both read (counted once). Hd and its
 * shared-producer list depend on (P, j) only: they are built once and kept
 * in node's depth row of the scratch (the nested fills use deeper rows)
 * until another parallel node at that depth claims the row. W grows
 * leftwards on demand. Row layout, doubles: W bytes [nc], Hd bytes per
 * branch; ints: W counts [nc], Hd counts per branch, then per branch the
 * owner P (-1: not built), list offset and length, then the lists. */
typedef struct {
    const gpp_sp_node_t *P, *Bj;
    int node, j, w_low;
    s_bnd_t w;
    double *w_bytes, *hd_bytes; /* [nc], [kj - 1] */
    int *w_n, *hd_n;
    const int *lst; /* shared candidates: (position, first e, last branch < j reading it) */
    int nl;
} s_head_t;

static void s_head_init(s_dp_t *s, int node, int pnode, int j, s_head_t *H)
{
    const gpp_sp_t *t = s->t;
    const gpp_graph_t *g = s->g;
    const gpp_sp_node_t *P = &t->nodes[pnode];
    int nc = P->n_children, off = 0;
    for (int c = 0; c < j; c++)
        off += t->nodes[P->children[c]].n_children;
    H->P = P, H->Bj = &t->nodes[P->children[j]], H->node = node, H->j = j, H->w_low = j;
    size_t dr = (size_t)s->node_depth[node];
    double *db = s->hsc_bytes + dr * s->hsc_stride;
    int *di = s->hsc_int + dr * s->hsc_istride;
    int *owner = di + s->hsc_stride, *loff = owner + nc, *llen = loff + nc;
    int *lists = di + s->hsc_stride + 3 * (size_t)s->hsc_maxnc, *used = &s->hsc_used[dr];
    H->w_bytes = db, H->w_n = di;
    H->hd_bytes = db + nc + off, H->hd_n = di + nc + off;
    if (s->hsc_owner[dr] != pnode) { /* claim the row */
        s->hsc_owner[dr] = pnode;
        for (int c = 0; c < nc; c++)
            owner[c] = -1;
        *used = 0;
    }
    if (owner[j] != pnode) {
        owner[j] = pnode;
        loff[j] = *used;
        int nl = 0, *lst = lists + 3 * (size_t)loff[j];
        int kj = H->Bj->n_children;
        s_bnd_t bd;
        s_bnd_start(s, &bd, H->Bj->first, node, 1);
        for (int e = 0; e < kj - 1; e++) {
            const gpp_sp_node_t *ce = &t->nodes[H->Bj->children[e]];
            s_bnd_extend(s, &bd, ce->last);
            H->hd_bytes[e] = bd.bytes, H->hd_n[e] = bd.n;
            for (int pos = ce->first; pos <= ce->last; pos++) {
                const gpp_op_t *o = &g->ops[t->op_at[pos]];
                for (int k = 0; k < o->n_inputs; k++) {
                    int pq = t->pos_of[o->inputs[k]], dup = 0;
                    if (pq >= P->first)
                        continue;
                    for (int x = 0; x < nl && !dup; x++)
                        dup = lst[3 * x] == pq;
                    if (dup)
                        continue;
                    int hmax = -1; /* last branch before j that reads pq */
                    const gpp_op_t *po = &g->ops[t->op_at[pq]];
                    for (int c = 0; c < po->n_outputs; c++) {
                        int cp = t->pos_of[po->outputs[c]];
                        if (cp < P->first || cp >= H->Bj->first)
                            continue;
                        for (int br = j - 1; br > hmax; br--)
                            if (cp >= t->nodes[P->children[br]].first) {
                                hmax = br;
                                break;
                            }
                    }
                    int *L = lst + 3 * nl++;
                    L[0] = pq, L[1] = e, L[2] = hmax;
                }
            }
        }
        llen[j] = nl;
        *used += nl;
    }
    H->lst = lists + 3 * (size_t)loff[j];
    H->nl = llen[j];
    s_bnd_start(s, &H->w, H->Bj->first, node, 1); /* W(j): empty */
}

/* Boundary of H(h, e) into *bh (bytes and count only). */
static void s_head_bnd(s_dp_t *s, s_head_t *H, int h, int e, s_bnd_t *bh)
{
    while (H->w_low > h) {
        H->w_low--;
        s_bnd_extend_left(s, &H->w, s->t->nodes[H->P->children[H->w_low]].first);
        H->w_bytes[H->w_low] = H->w.bytes, H->w_n[H->w_low] = H->w.n;
    }
    double bytes = H->hd_bytes[e] + (h < H->j ? H->w_bytes[h] : 0);
    int n = H->hd_n[e] + (h < H->j ? H->w_n[h] : 0);
    for (int x = 0; x < H->nl; x++) {
        const int *L = H->lst + 3 * x;
        if (L[1] <= e && L[2] >= h) {
            bytes -= (double)s->g->ops[s->t->op_at[L[0]]].out_bytes;
            n--;
        }
    }
    bh->bytes = bytes, bh->n = n;
}

/* Series suffix i (children i..k-1) under ctx; also a leaf (k = 1). */
static int s_eval_series(s_dp_t *s, int node, int i, int ctx, const s_acc_t *acc)
{
    const gpp_sp_node_t *n = &s->t->nodes[node];
    const int C = s->C, NL = s->NL, INF = s->INF;
    const int k = s_nchild(s, node);
    int l0, l1, child;
    s_child_range(s, node, i, &l0, &l1, &child);
    const int budget = s_budget(s, l0, n->last);
    if (budget < 1)
        return 0;
    const int *rest_i = i == k - 1 ? NULL : s_slot(s, node, i + 1, ctx);
    /* (a) child i decomposed; its single-stage option is inside A */
    if (child >= 0) {
        FOR_REST_STEPS(s, rest_i, i == k - 1, ctx, budget, cy, l2, rv, ctx2)
        {
            const int *A = s_get(s, child, s_top(s, child), ctx2);
            for (int cf = 0; cf < C; cf++)
                for (int l = 0; l < NL; l++) {
                    int v = A[cf * NL + l] + rv;
                    if (v <= budget && s_offer(acc, cf, l, v)) {
                        s_emit_node(s, child, s_top(s, child), ctx2, cf, l, A[cf * NL + l]);
                        if (i < k - 1)
                            s_emit_node(s, node, i + 1, ctx, cy, l2, rv);
                        return 1;
                    }
                }
        }
    }
    /* (b) children i..m as one stage */
    s_bnd_t bd;
    s_bnd_start(s, &bd, l0, node, 0);
    for (int m = i; m < k; m++) {
        int f, last, ch_m;
        s_child_range(s, node, m, &f, &last, &ch_m);
        if (m == i && child >= 0)
            continue; /* the next block extends over it */
        int lbb = s_lbdev(s, l0, last);
        if (lbb > budget)
            break;
        const int *rest = m == k - 1 ? NULL : s_slot(s, node, m + 1, ctx);
        if (rest && lbb + rest[2 * C * NL + 1] > budget)
            continue; /* the rest alone leaves too few devices */
        if (s_too_heavy(s, l0, last))
            break;
        s_bnd_extend(s, &bd, last);
        FOR_REST_STEPS(s, rest, m == k - 1, ctx, budget, cy, l2, rv, ctx2)
        {
            for (int cx = 0; cx < C; cx++) {
                int I = s_infl(s, cx, ctx2);
                if (I / s->q > s->max_level)
                    continue;
                int d = s_stage_dev(s, l0, last, &bd, cx, I, budget - rv, lbb);
                if (d >= INF || d + rv > budget)
                    continue;
                if (s_offer(acc, cx, I / s->q, d + rv)) {
                    s_emit_stage(s, l0, last, &bd, cx, d, I);
                    if (m < k - 1)
                        s_emit_node(s, node, m + 1, ctx, cy, l2, rv);
                    return 1;
                }
            }
        }
    }
    /* (c) child i parallel P, the join side: one stage T holds branches
       j+1..end of P, branch j whole or its tail (series children e+1..),
       and children i+1..m. Before T: with branch j whole (j >= 1), branches
       0..j-1 decomposed; with a split, the head of branch j (children 0..e)
       is one stage H, alone or with whole branches h..j-1, after branches
       0..h-1 decomposed. T (and H) are contiguous position ranges; T only
       grows as (j, e) go down, so its boundary is extended leftwards. */
    if (child >= 0 && s->t->nodes[child].kind == GPP_SP_PARALLEL && i < k - 1) {
        const gpp_sp_node_t *P = &s->t->nodes[child];
        int f1, x1, c1;
        s_child_range(s, node, i + 1, &f1, &x1, &c1);
        for (int m = i + 1; m < k; m++) {
            int f, last, ch_m;
            s_child_range(s, node, m, &f, &last, &ch_m);
            if (s_lbdev(s, f1, last) + 1 > budget)
                break;
            const int *rest = m == k - 1 ? NULL : s_slot(s, node, m + 1, ctx);
            if (rest && s_lbdev(s, f1, last) + 1 + rest[2 * C * NL + 1] > budget)
                continue;
            s_bnd_start(s, &bd, f1, node, 0);
            s_bnd_extend(s, &bd, last);
            int stop = 0;
            for (int j = P->n_children - 1; j >= 0 && !stop; j--) {
                const gpp_sp_node_t *Bj = &s->t->nodes[P->children[j]];
                int n_split = Bj->kind == GPP_SP_SERIES ? Bj->n_children - 1 : 0;
                int have_h = 0;
                s_head_t hd;
                /* e = n_split - 1 .. 0: split after child e; e = -1: branch j whole */
                for (int e = n_split - 1; e >= -1; e--) {
                    if (e < 0 && j == 0)
                        break; /* all of P with the join: a series block of (b) */
                    int tl = e < 0 ? Bj->first : s->t->nodes[Bj->children[e + 1]].first;
                    int lbb = s_lbdev(s, tl, last);
                    if (lbb + 1 > budget || s_too_heavy(s, tl, last)) {
                        stop = 1;
                        break;
                    }
                    s_bnd_extend_left(s, &bd, tl);
                    int hr = e < 0 ? -1 : s->t->nodes[Bj->children[e]].last;
                    /* every stage before T covers [P.first, tl - 1] */
                    int lbp = s_lbdev(s, P->first, tl - 1);
                    if (lbb + lbp + (rest ? rest[2 * C * NL + 1] : 0) > budget)
                        continue;
                    if (e >= 0 && !have_h) {
                        s_head_init(s, node, child, j, &hd);
                        have_h = 1;
                    }
                    FOR_REST_STEPS(s, rest, m == k - 1, ctx, budget, cy, l2, rv, ctx2)
                    {
                        for (int cx = 0; cx < C; cx++) {
                            int I = s_infl(s, cx, ctx2);
                            int lev = I / s->q;
                            if (lev > s->max_level)
                                continue;
                            int d = s_stage_dev(s, tl, last, &bd, cx, I, budget - rv - lbp, lbb);
                            if (d >= INF)
                                continue;
                            int ctxb = s_ctx(s, cx, lev);
                            if (e < 0) { /* T is a source of P's block: config cx */
                                const int *Pp = s_get(s, child, j - 1, ctxb);
                                for (int l = 0; l < NL; l++) {
                                    int pv = Pp[cx * NL + l], v = pv + d + rv;
                                    if (v > budget)
                                        continue;
                                    if (s_offer(acc, cx, l > lev ? l : lev, v)) {
                                        s_emit_stage(s, tl, last, &bd, cx, d, I);
                                        s_emit_node(s, child, j - 1, ctxb, cx, l, pv);
                                        if (m < k - 1)
                                            s_emit_node(s, node, m + 1, ctx, cy, l2, rv);
                                        return 1;
                                    }
                                }
                                continue;
                            }
                            /* split: H = branches h..j-1 and the head of branch j */
                            for (int h = j; h >= 0; h--) {
                                int hl = s->t->nodes[P->children[h]].first;
                                int lbh = s_lbdev(s, hl, hr);
                                if (lbh + d + rv > budget || s_too_heavy(s, hl, hr))
                                    break;
                                s_bnd_t bh;
                                s_head_bnd(s, &hd, h, e, &bh);
                                const int *Pv = h > 0 ? s_get(s, child, h - 1, ctxb) : s->zero;
                                for (int cf = 0; cf < C; cf++) {
                                    int IH = s_infl(s, cf, ctxb);
                                    if (IH / s->q > s->max_level)
                                        continue;
                                    int dh =
                                        s_stage_dev(s, hl, hr, &bh, cf, IH, budget - rv - d, lbh);
                                    if (dh >= INF)
                                        continue;
                                    for (int l = IH / s->q; l < NL; l++) {
                                        int pv = Pv[cf * NL + l], v = pv + dh + d + rv;
                                        if (v > budget)
                                            continue;
                                        if (s_offer(acc, cf, l, v)) {
                                            s_emit_stage(s, tl, last, &bd, cx, d, I);
                                            s_emit_stage(s, hl, hr, &bh, cf, dh, IH);
                                            if (h > 0)
                                                s_emit_node(s, child, h - 1, ctxb, cf, l, pv);
                                            if (m < k - 1)
                                                s_emit_node(s, node, m + 1, ctx, cy, l2, rv);
                                            return 1;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    return 0;
}

/* Parallel prefix e (branches 0..e) under ctx: every branch's stages share
 * the context; devices add up, levels take the max. */
static int s_eval_parallel(s_dp_t *s, int node, int e, int ctx, const s_acc_t *acc)
{
    const gpp_sp_node_t *n = &s->t->nodes[node];
    const int C = s->C, NL = s->NL, INF = s->INF;
    int fe, le, child;
    s_child_range(s, node, e, &fe, &le, &child);
    const int budget = s_budget(s, n->first, le);
    if (budget < 1)
        return 0;
    /* (a) branch e decomposed */
    if (child >= 0) {
        const int *A = s_get(s, child, s_top(s, child), ctx);
        const int *Pv = e > 0 ? s_slot(s, node, e - 1, ctx) : s->zero;
        for (int cf = 0; cf < C; cf++)
            for (int l = 0; l < NL; l++) {
                int v = A[cf * NL + l] + Pv[cf * NL + l];
                if (v <= budget && s_offer(acc, cf, l, v)) {
                    s_emit_node(s, child, s_top(s, child), ctx, cf, l, A[cf * NL + l]);
                    if (e > 0)
                        s_emit_node(s, node, e - 1, ctx, cf, l, Pv[cf * NL + l]);
                    return 1;
                }
            }
    }
    /* (b) branches b..e as one stage */
    s_bnd_t bd;
    s_bnd_start(s, &bd, fe, node, 0); /* built on first use: [fe, le], then leftwards */
    for (int b = e; b >= 0; b--) {
        int fb, lb, cb;
        s_child_range(s, node, b, &fb, &lb, &cb);
        int lbb = s_lbdev(s, fb, le);
        if (!(b == e && child >= 0) && (lbb > budget || s_too_heavy(s, fb, le)))
            break;
        if (b == e && child >= 0)
            continue;
        if (bd.r < le)
            s_bnd_extend(s, &bd, le);
        s_bnd_extend_left(s, &bd, fb);
        const int *Pv = b > 0 ? s_slot(s, node, b - 1, ctx) : s->zero;
        for (int cx = 0; cx < C; cx++) {
            int I = s_infl(s, cx, ctx);
            if (I / s->q > s->max_level)
                continue;
            int d = s_stage_dev(s, fb, le, &bd, cx, I, budget, lbb);
            if (d >= INF)
                continue;
            for (int l = I / s->q; l < NL; l++) {
                int v = d + Pv[cx * NL + l];
                if (v <= budget && s_offer(acc, cx, l, v)) {
                    s_emit_stage(s, fb, le, &bd, cx, d, I);
                    if (b > 0)
                        s_emit_node(s, node, b - 1, ctx, cx, l, Pv[cx * NL + l]);
                    return 1;
                }
            }
        }
    }
    return 0;
}

static int s_eval(s_dp_t *s, int node, int idx, int ctx, const s_acc_t *acc)
{
    if (s->t->nodes[node].kind == GPP_SP_PARALLEL)
        return s_eval_parallel(s, node, idx, ctx, acc);
    return s_eval_series(s, node, idx, ctx, acc);
}

/* Fills every entry of node under ctx, in dependency order. */
static void s_fill(s_dp_t *s, int node, int ctx)
{
    int k = s_nchild(s, node);
    int par = s->t->nodes[node].kind == GPP_SP_PARALLEL;
    const int C = s->C, NL = s->NL;
    for (int it = 0; it < k; it++) {
        int idx = par ? it : k - 1 - it;
        size_t key = (size_t)(s->base[node] + idx) * s->nctx + ctx;
        /* R[C*NL], then the step list: count, indices where R drops */
        int *R = s_arena_get(&s->ar, (size_t)2 * C * NL + 2);
        for (int x = 0; x < C * NL; x++)
            R[x] = s->INF;
        s_acc_t acc = {R, NL, NULL};
        s_eval(s, node, idx, ctx, &acc);
        for (int cf = 0; cf < C; cf++)
            for (int l = 1; l < NL; l++)
                if (R[cf * NL + l - 1] < R[cf * NL + l])
                    R[cf * NL + l] = R[cf * NL + l - 1];
        int *steps = R + C * NL, n_steps = 0, lo = s->INF;
        for (int x = 0; x < C * NL; x++)
            if (R[x] < s->INF && (x % NL == 0 || R[x] != R[x - 1])) {
                steps[1 + n_steps++] = x;
                if (R[x] < lo)
                    lo = R[x];
            }
        steps[0] = n_steps;
        steps[C * NL + 1] = lo; /* least devices over all configs and levels */
        s->memo_p[key] = R;
        s->memo_gen[key] = s->gen;
    }
}

static int *s_get(s_dp_t *s, int node, int idx, int ctx)
{
    int *R = s_slot(s, node, idx, ctx);
    if (R)
        return R;
    s_fill(s, node, ctx);
    return s_slot(s, node, idx, ctx);
}

static void s_emit_node(s_dp_t *s, int node, int idx, int ctx, int cf, int lev, int want)
{
    s_want_t w = {cf, lev, want};
    s_acc_t acc = {NULL, s->NL, &w};
    int found = s_eval(s, node, idx, ctx, &acc);
    assert(found && "partitioner: DP value could not be reconstructed");
    (void)found;
}

/* One DP run at target t. Returns 1 when some plan has every stage TPS <= t
 * and its source level <= max_level; then s->out holds the stages of the one
 * with the fewest samples in flight at its sources. */
static int s_run(s_dp_t *s, double t, int max_level)
{
    s->tgt = t;
    s->inv_t = isfinite(t) ? (1.0 - 1e-9) / t : 0.0; /* t = inf: lbdev = 1 */
    /* levels only grow towards the sources, so no entry needs a level above
       the root's limit */
    s->max_level = max_level < s->NL - 1 ? max_level : s->NL - 1;
    s->gen++;
    s_arena_reset(&s->ar);
    const int *R = s_get(s, s->t->root, s_top(s, s->t->root), 0);
    int best_cf = -1, best_l = -1;
    for (int l = 0; l < s->NL && l <= max_level && best_cf < 0; l++)
        for (int cf = 0; cf < s->C; cf++)
            if (R[cf * s->NL + l] <= s->n_dev &&
                (best_cf < 0 || R[cf * s->NL + l] < R[best_cf * s->NL + l]))
                best_cf = cf, best_l = l;
    if (best_cf < 0)
        return 0;
    s->n_out = 0;
    s_emit_node(s, s->t->root, s_top(s, s->t->root), 0, best_cf, best_l,
                R[best_cf * s->NL + best_l]);
    s->out_level = best_l;
    return 1;
}

/* ---- setup ---- */

static void s_ensure_ms(s_dp_t *s, int m)
{
    if (s->pre_ms[m])
        return;
    int n = s->t->n_ops;
    double *p = gpp_xcalloc((size_t)n + 1, sizeof(double));
    for (int pos = 0; pos < n; pos++) {
        int op = s->t->op_at[pos];
        p[pos + 1] =
            p[pos] + gpp_cost_op_fwd_ms(s->cost, op, m) + gpp_cost_op_bwd_ms(s->cost, op, m);
    }
    s->pre_ms[m] = p;
}

static int s_sp_depth(const gpp_sp_t *t, int v)
{
    const gpp_sp_node_t *n = &t->nodes[v];
    if (n->kind == GPP_SP_LEAF)
        return 1;
    int acc = 0;
    for (int c = 0; c < n->n_children; c++) {
        int d = s_sp_depth(t, n->children[c]);
        acc = n->kind == GPP_SP_SERIES ? acc + d : (d > acc ? d : acc);
    }
    return acc;
}

static s_dp_t *s_dp_new(const gpp_graph_t *g, const gpp_cost_t *cost, const gpp_sp_t *t, int B,
                        int64_t M)
{
    s_dp_t *s = gpp_xcalloc(1, sizeof *s);
    const gpp_cluster_t *cl = gpp_cost_cluster(cost);
    s->g = g, s->cost = cost, s->t = t, s->B = B, s->M = M;
    s->n_dev = cl->n_devices;
    s->INF = s->n_dev + 1;
    int n = t->n_ops;
    s->pre_params = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    s->pre_stash = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    s->pre_res = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    s->pre_grad = gpp_xcalloc((size_t)n + 1, sizeof(double));
    s->pre_kern = gpp_xcalloc((size_t)n + 1, sizeof(int));
    s->step_l = s->step_r = -1;
    s->maxc = gpp_xcalloc((size_t)n, sizeof(int));
    s->node_depth = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    int max_depth = 0;
    for (int v = 0; v < t->n_nodes; v++) {
        int dv = 0;
        for (int u = t->nodes[v].parent; u >= 0; u = t->nodes[u].parent)
            dv++;
        s->node_depth[v] = dv;
        if (dv > max_depth)
            max_depth = dv;
    }
    s->stamp = gpp_xcalloc((size_t)2 * (size_t)(max_depth + 1) * (size_t)n, sizeof(int));
    /* s_head_init rows per depth: nc + the branches' children doubles; as
       many ints plus 3 per branch, plus 3 per graph edge for the lists */
    s->hsc_stride = 1;
    size_t n_edges = 0;
    for (int v = 0; v < n; v++)
        n_edges += (size_t)g->ops[v].n_inputs;
    for (int v = 0; v < t->n_nodes; v++) {
        const gpp_sp_node_t *P = &t->nodes[v];
        if (P->kind != GPP_SP_PARALLEL)
            continue;
        size_t x = (size_t)P->n_children;
        for (int c = 0; c < P->n_children; c++)
            x += (size_t)t->nodes[P->children[c]].n_children;
        if (x > s->hsc_stride)
            s->hsc_stride = x;
        if (P->n_children > s->hsc_maxnc)
            s->hsc_maxnc = P->n_children;
    }
    s->hsc_istride = s->hsc_stride + 3 * (size_t)s->hsc_maxnc + 3 * (n_edges + 1);
    s->hsc_bytes = gpp_xcalloc((size_t)(max_depth + 1) * s->hsc_stride, sizeof(double));
    s->hsc_owner = gpp_xcalloc((size_t)max_depth + 1, sizeof(int));
    s->hsc_used = gpp_xcalloc((size_t)max_depth + 1, sizeof(int));
    for (int dv = 0; dv <= max_depth; dv++)
        s->hsc_owner[dv] = -1;
    s->hsc_int = gpp_xcalloc((size_t)(max_depth + 1) * s->hsc_istride, sizeof(int));
    for (int pos = 0; pos < n; pos++) {
        int op = t->op_at[pos];
        const gpp_op_t *o = &g->ops[op];
        s->pre_params[pos + 1] = s->pre_params[pos] + o->params;
        s->pre_stash[pos + 1] = s->pre_stash[pos] + o->stash_bytes;
        s->pre_res[pos + 1] = s->pre_res[pos] + gpp_cost_op_reserved_bytes(cost, op);
        s->pre_grad[pos + 1] = s->pre_grad[pos] + gpp_cost_op_grad_bytes(cost, op, B);
        s->pre_kern[pos + 1] = s->pre_kern[pos] + (o->params > 0);
        int mc = -1;
        for (int k = 0; k < o->n_outputs; k++)
            if (t->pos_of[o->outputs[k]] > mc)
                mc = t->pos_of[o->outputs[k]];
        s->maxc[pos] = mc;
    }
    s->pre_ms = gpp_xcalloc((size_t)B + 1, sizeof(double *));
    s->ar_a = gpp_xcalloc((size_t)s->n_dev + 1, sizeof(double));
    s->ar_b = gpp_xcalloc((size_t)s->n_dev + 1, sizeof(double));
    for (int d = 1; d <= s->n_dev; d++) {
        const gpp_link_t *l = gpp_cost_group_link(cost, d);
        s->ar_a[d] = gpp_allreduce_ms(l, d, 1.0) - gpp_allreduce_ms(l, d, 0.0);
        s->ar_b[d] = gpp_allreduce_ms(l, d, 0.0);
    }
    const gpp_link_t *p2p = gpp_cost_p2p_link(cost);
    s->p2p_alpha_ms = p2p->alpha_ms;
    s->p2p_ms_per_byte = 1e3 / p2p->bw_bytes_per_s;
    s->base = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    for (int v = 0; v < t->n_nodes; v++) {
        s->base[v] = s->n_suffix;
        s->n_suffix += s_nchild(s, v);
    }
    s->sp_depth = s_sp_depth(t, t->root);
    s->pre_rate = gpp_xcalloc((size_t)n + 1, sizeof(double));
    return s;
}

/* In-flight levels the memo keeps for configs cfg[0..C): multiples of q, the
 * gcd of their micro-batch sizes, from 0 up to the samples in flight at most
 * (stages on a path x k x b, three times that in the generalized search),
 * capped at the batch. Returns the number of levels; q in *q_out. */
static int64_t s_levels(const s_dp_t *s, const s_cfg_t *cfg, int C, int generalized, int *q_out)
{
    int q = 0, maxkb = 0;
    for (int c = 0; c < C; c++) {
        int a = q, b = cfg[c].b;
        while (b) {
            int r = a % b;
            a = b, b = r;
        }
        q = a;
        if (cfg[c].k * cfg[c].b > maxkb)
            maxkb = cfg[c].k * cfg[c].b;
    }
    int depth = s->sp_depth < s->n_dev ? s->sp_depth : s->n_dev;
    int64_t top = (int64_t)depth * (generalized ? 3 * maxkb : maxkb);
    if (top > s->B)
        top = s->B;
    *q_out = q;
    return top / q + 1;
}

/* Sets the candidate configs and sizes the memo. */
static void s_dp_configure(s_dp_t *s, const s_cfg_t *cfg, int C, int generalized)
{
    assert(C >= 1 && C <= MAX_CFG);
    memcpy(s->cfg, cfg, (size_t)C * sizeof *cfg);
    s->C = C;
    s->generalized = generalized;
    for (int c = 0; c < C; c++) {
        int dmax = cfg[c].b < s->n_dev ? cfg[c].b : s->n_dev;
        for (int d = 1; d <= dmax; d++)
            s_ensure_ms(s, (cfg[c].b + d - 1) / d);
    }
    s->NL = (int)s_levels(s, cfg, C, generalized, &s->q);
    for (int pos = 0; pos < s->t->n_ops; pos++) {
        double best = INFINITY;
        for (int c = 0; c < C; c++) {
            int dmax = cfg[c].b < s->n_dev ? cfg[c].b : s->n_dev;
            for (int d = 1; d <= dmax; d++) {
                int m = (cfg[c].b + d - 1) / d;
                double r = (s->pre_ms[m][pos + 1] - s->pre_ms[m][pos]) / m;
                if (r < best)
                    best = r;
            }
        }
        /* plus the op's share of a lower bound on the optimizer step, which
           every replica runs once per iteration: gpp_cost_step_ms of a stage
           is at least its memory term plus its launches, both additive */
        const gpp_device_t *dev = &gpp_cost_cluster(s->cost)->device;
        double grad = s->pre_grad[pos + 1] - s->pre_grad[pos];
        int kern = s->pre_kern[pos + 1] - s->pre_kern[pos];
        double step_lb =
            kern ? 7.0 * grad / dev->mem_bw_bytes_per_s * 1e3 + kern * dev->launch_ms : 0.0;
        s->pre_rate[pos + 1] = s->pre_rate[pos] + best + step_lb / s->B;
    }
    s->nctx = 1 + C * s->NL;
    size_t slots = (size_t)s->n_suffix * s->nctx;
    if (slots > s->memo_slots) { /* generations keep old slots invalid: no clearing */
        free(s->memo_gen);
        free(s->memo_p);
        s->memo_gen = gpp_xcalloc(slots, sizeof(unsigned));
        s->memo_p = gpp_xcalloc(slots, sizeof(int *));
        s->memo_slots = slots;
        s->gen = 0;
    }
    free(s->zero);
    s->zero = gpp_xcalloc((size_t)C * s->NL, sizeof(int));
}

static void s_dp_destroy(s_dp_t **sp)
{
    s_dp_t *s = *sp;
    if (!s)
        return;
    free(s->pre_params), free(s->pre_stash), free(s->pre_res), free(s->pre_grad);
    free(s->pre_kern);
    for (int m = 0; m <= s->B; m++)
        free(s->pre_ms[m]);
    free(s->pre_ms);
    free(s->ar_a), free(s->ar_b), free(s->maxc), free(s->pre_rate), free(s->stamp), free(s->base);
    free(s->node_depth), free(s->hsc_bytes), free(s->hsc_int);
    free(s->hsc_owner), free(s->hsc_used);
    free(s->memo_gen), free(s->memo_p), free(s->zero), free(s->out);
    s_arena_free(&s->ar);
    free(s);
    *sp = NULL;
}

/* ---- plan assembly ---- */

static int s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static void s_stage_ops(const s_dp_t *s, const s_stage_t *st, int *ops)
{
    int n = st->r - st->l + 1;
    for (int i = 0; i < n; i++)
        ops[i] = s->t->op_at[st->l + i];
    qsort(ops, (size_t)n, sizeof(int), s_cmp_int);
}

/* Bottleneck TPS of the emitted stages. */
static double s_out_tps(const s_dp_t *s)
{
    double worst = 0;
    for (int i = 0; i < s->n_out; i++)
        if (s->out[i].tps_ms > worst)
            worst = s->out[i].tps_ms;
    return worst;
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

/* Builds the plan from s->out: link, leftover devices where they lower the
 * refined estimate, in-flight over the real stage DAG, costs and memory. */
static gpp_plan_t *s_build_plan(const s_dp_t *s, const char *planner, int universal_b,
                                gpp_err_t *err)
{
    int S = s->n_out;
    int *ops = gpp_xcalloc((size_t)s->t->n_ops, sizeof(int));
    gpp_plan_t *p = gpp_plan_new(planner, s->g, s->n_dev, s->B);
    int used = 0;
    for (int i = 0; i < S; i++) {
        s_stage_ops(s, &s->out[i], ops);
        gpp_stage_t *st = gpp_plan_add_stage(p, s->out[i].r - s->out[i].l + 1, ops);
        st->devices = s->out[i].d;
        st->micro_batch = s->cfg[s->out[i].ci].b;
        st->k = s->cfg[s->out[i].ci].k;
        st->inflight = s->out[i].infl;
        used += st->devices;
    }
    free(ops);
    if (gpp_plan_link(p, s->g, err)) {
        gpp_err_prefix(err, "partitioner produced an invalid plan");
        gpp_plan_destroy(&p);
        return NULL;
    }
    /* leftover devices: one at a time to the stage where an extra replica
       lowers the refined estimate most (fewer samples per replica, more
       all-reduce; memory only shrinks), while one lowers it or keeps it and
       shortens that stage's micro-batch time */
    S = p->n_stages;
    double *c = gpp_xcalloc((size_t)S, sizeof(double)),
           *ar = gpp_xcalloc((size_t)S, sizeof(double));
    double *acc = gpp_xcalloc((size_t)S, sizeof(double));
    double *c1 = gpp_xcalloc((size_t)S, sizeof(double)),
           *ar1 = gpp_xcalloc((size_t)S, sizeof(double));
    int *bs = gpp_xcalloc((size_t)S, sizeof(int));
    int *added = gpp_xcalloc((size_t)s->n_dev + 1, sizeof(int)), n_added = 0;
    gpp_stage_cost_t sc;
    for (int i = 0; i < S && used < s->n_dev; i++) {
        const gpp_stage_t *st = &p->stages[i];
        bs[i] = st->micro_batch;
        gpp_cost_stage(s->cost, st->n_ops, st->ops, st->devices, st->micro_batch, s->B, &sc);
        c[i] = sc.fwd_ms + sc.bwd_ms + sc.comm_ms, ar[i] = sc.allreduce_ms + sc.step_ms;
        if (st->devices + 1 <= st->micro_batch) {
            gpp_cost_stage(s->cost, st->n_ops, st->ops, st->devices + 1, st->micro_batch, s->B,
                           &sc);
            c1[i] = sc.fwd_ms + sc.bwd_ms + sc.comm_ms, ar1[i] = sc.allreduce_ms + sc.step_ms;
        }
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
        if (st->devices + 1 <= st->micro_batch) {
            gpp_cost_stage(s->cost, st->n_ops, st->ops, st->devices + 1, st->micro_batch, s->B,
                           &sc);
            c1[best] = sc.fwd_ms + sc.bwd_ms + sc.comm_ms, ar1[best] = sc.allreduce_ms + sc.step_ms;
        }
    }
    free(c), free(ar), free(acc), free(c1), free(ar1), free(bs);
    /* the cost model assumes node-aligned groups: when the DP's stages pack
       that way, take extra replicas back, latest first, until they still do */
    int gpn = gpp_cost_cluster(s->cost)->gpus_per_node, aligned0 = 1;
    if (n_added > 0) { /* would the DP's own assignment pack? */
        for (int i = 0; i < n_added; i++)
            p->stages[added[i]].devices--;
        for (int i = 0, dev = 0; i < S; dev += p->stages[i++].devices)
            p->stages[i].first_device = dev;
        aligned0 = gpp_plan_place(p, gpn);
        for (int i = 0; i < n_added; i++)
            p->stages[added[i]].devices++;
    }
    if (!aligned0)
        n_added = 0; /* nothing to preserve */
    for (;;) {
        for (int i = 0, dev = 0; i < S; dev += p->stages[i++].devices)
            p->stages[i].first_device = dev; /* consecutive, as gpp_plan_link places */
        if (gpp_plan_place(p, gpn) || n_added == 0)
            break;
        p->stages[added[--n_added]].devices--;
    }
    free(added);
    /* in-flight over the real stage DAG (reverse topological order) */
    for (int i = p->n_stages - 1; i >= 0; i--) {
        gpp_stage_t *st = &p->stages[i];
        int v = st->k * st->micro_batch;
        if (st->n_succ > 0) {
            v = 0;
            for (int j = 0; j < st->n_succ; j++) {
                const gpp_stage_t *y = &p->stages[st->succ[j]];
                int c = s->generalized ? gpp_part_inflight(st->k, st->micro_batch, y->k,
                                                           y->micro_batch, y->inflight, NULL)
                                       : st->micro_batch + y->inflight;
                if (c > v)
                    v = c;
            }
        }
        if (v > s->B)
            v = s->B;
        if (!s->generalized)
            assert(v <= st->inflight); /* the DP view is never optimistic */
        st->inflight = v;
    }
    p->micro_batch = universal_b;
    p->bottleneck_tps_ms = 0;
    for (int i = 0; i < p->n_stages; i++) {
        gpp_stage_t *st = &p->stages[i];
        gpp_cost_stage(s->cost, st->n_ops, st->ops, st->devices, st->micro_batch, s->B, &sc);
        st->fwd_ms = sc.fwd_ms;
        st->bwd_ms = sc.bwd_ms;
        st->allreduce_ms = sc.allreduce_ms;
        st->tps_ms = sc.tps_ms;
        st->weight_bytes = sc.weight_bytes;
        st->act_bytes =
            gpp_cost_act_bytes(sc.stash_bytes, st->inflight, st->micro_batch, st->devices);
        st->mem_bytes = st->weight_bytes + st->act_bytes + sc.reserved_bytes;
        if (st->tps_ms > p->bottleneck_tps_ms)
            p->bottleneck_tps_ms = st->tps_ms;
    }
    return p;
}

/* Estimated iteration time: TPS * (B + (longest path of micro-batch sizes) - b_last). */
static double s_iter_estimate(const gpp_plan_t *p)
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

/* ---- search ---- */

typedef struct {
    gpp_plan_t *best;
    double best_iter;  /* the best plan's key: estimate, or TPS with min_tps */
    gpp_plan_t **cand; /* with simulate: every plan offered (owned) */
    int n_cand;
    double last_iter;     /* best estimate of the latest s_search */
    int any_feasible_mem; /* some config set was feasible at t = inf */
    long long evals, runs;
} s_result_t;

/* Least t (within eps) in (lo, hi] for which s_run(t, max_level) succeeds:
 * gallop up from lo (runs below the optimum are cheap, the budget bound
 * prunes them hard), then bisect. Returns 1 with the plan in s->out and its
 * bottleneck in *t_out, or 0 when even hi fails. */
static int s_bsearch(s_dp_t *s, double eps, double lo, double hi, int max_level, double *t_out,
                     double *t_low, s_result_t *res)
{
    s_stage_t *keep = NULL;
    int n_keep = 0, keep_level = 0, found = 0;
    double t_l = lo, t_r = hi;
    for (double step = 0.01;; step *= 2) {
        double t = lo * (1 + step);
        int last = !(t < hi);
        if (last)
            t = hi;
        res->runs++;
        if (s_run(s, t, max_level)) {
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
        if (s_run(s, mid, max_level)) {
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
static int s_offer_plan(s_dp_t *s, const char *planner, int universal_b, s_result_t *res,
                        gpp_err_t *err)
{
    gpp_plan_t *p = s_build_plan(s, planner, universal_b, err);
    if (!p)
        return -1;
    double it = s_iter_estimate(p);
    p->iteration_ms = it;
    p->throughput = it > 0 ? p->batch / it * 1e3 : 0;
    gpp_debug("partitioner: b=%d C=%d NL=%d level %d tps %.6f depth %d iter %.3f after %lld runs, "
              "%lld evals",
              universal_b, s->C, s->NL, s->out_level, p->bottleneck_tps_ms, p->depth, it, res->runs,
              s->n_eval);
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
    return 0;
}

/* Of the kept candidates whose estimate is within SIM_WINDOW of the best
 * estimate, the one with the least simulated iteration time (schedule,
 * lower, one simulated iteration: what gpp-plan reports) becomes res->best;
 * the others are freed. The estimate misses what the simulator sees (the
 * all-reduce and optimizer step after the drain, transfers queued on
 * links, stages faster than the bottleneck on the critical path); on the
 * zoo models the candidate the simulator prefers was within 3% of the best
 * estimate, and every simulation costs search time, hence 5%. */
#define SIM_WINDOW 0.05
static void s_pick_simulated(const s_dp_t *s, s_result_t *res)
{
    double best_ms = INFINITY;
    gpp_plan_t *best = res->best;
    for (int i = 0; i < res->n_cand; i++) {
        gpp_plan_t *p = res->cand[i];
        if (!(p->iteration_ms <= res->best_iter * (1 + SIM_WINDOW)))
            continue;
        int dup = 0; /* the refining pass often finds the same plan again */
        for (int j = 0; j < i && !dup; j++) {
            const gpp_plan_t *q = res->cand[j];
            dup = q && q->micro_batch == p->micro_batch && q->n_stages == p->n_stages &&
                  q->depth == p->depth && q->bottleneck_tps_ms == p->bottleneck_tps_ms &&
                  q->iteration_ms == p->iteration_ms;
        }
        if (dup)
            continue;
        gpp_err_t e = {{0}};
        double ms = INFINITY;
        /* schedule and lower only: the caller validates the plan it keeps */
        if (gpp_sched_compute(p, &e) == 0 && gpp_sched_lower(p, s->g, &e) == 0) {
            gpp_sim_t *sim = gpp_sim_new(p, s->g, s->cost);
            if (gpp_sim_run(sim, &e) == 0)
                ms = gpp_sim_iteration_ms(sim);
            gpp_sim_destroy(&sim);
        }
        gpp_debug("partitioner: candidate %d (b=%d, depth %d): estimate %.3f ms, simulated %.3f ms",
                  i, p->micro_batch, p->depth, p->iteration_ms, ms);
        if (ms < best_ms)
            best_ms = ms, best = p;
    }
    for (int i = 0; i < res->n_cand; i++)
        if (res->cand[i] != best)
            gpp_plan_destroy(&res->cand[i]);
    free(res->cand);
    res->cand = NULL;
    res->n_cand = 0;
    res->best = best;
}

/* Upper bound on any stage's TPS (every op on one stage at the worst
 * per-sample rate, all boundary traffic, the largest all-reduce): above it
 * the TPS constraint never binds, so failing there means memory. */
static double s_tps_cap(const s_dp_t *s)
{
    int n = s->t->n_ops;
    double worst = 0, bytes = 0; /* a stage's compute per sample is c(m)/b <= c(m)/m */
    for (int m = 1; m <= s->B; m++)
        if (s->pre_ms[m] && s->pre_ms[m][n] / m > worst)
            worst = s->pre_ms[m][n] / m;
    for (int pos = 0; pos < n; pos++)
        bytes += (double)s->g->ops[s->t->op_at[pos]].out_bytes;
    double ar = 0;
    for (int d = 1; d <= s->n_dev; d++)
        if (s->ar_a[d] * s->pre_grad[n] + s->ar_b[d] > ar)
            ar = s->ar_a[d] * s->pre_grad[n] + s->ar_b[d];
    ar += gpp_cost_step_ms(s->cost, s->pre_grad[n], s->pre_kern[n]);
    return (worst + 2.0 * bytes * s->p2p_ms_per_byte + 2.0 * n * s->p2p_alpha_ms + ar / s->B) *
           1.01;
}

/* Search for one config set; keeps the best plan in res. In default mode the
 * source level is the pipeline depth: after the least-TPS plan (depth L) the
 * search also asks for the least TPS at depth L-1, L-2, ... while that keeps
 * improving the iteration estimate TPS * (B + (depth - 1) * b). */
static int s_search(s_dp_t *s, const gpp_part_opts_t *o, const char *planner, int universal_b,
                    double eps, double lo_hint, int descend, double *t_low, s_result_t *res,
                    gpp_err_t *err)
{
    double cap = s_tps_cap(s);
    double lb = INFINITY;
    for (int c = 0; c < s->C; c++) {
        int n = s->t->n_ops;
        double w =
            (s->pre_rate[n] + gpp_cost_step_ms(s->cost, s->pre_grad[n], s->pre_kern[n]) / s->B) /
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
    double beat = s->min_tps ? res->best_iter : res->best_iter / s->B;
    double hi = res->best && beat < cap ? beat : cap;
    double t;
    double t_l = lb;
    if (lb >= hi || !s_bsearch(s, eps, lb, hi, s->NL - 1, &t, &t_l, res)) {
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
        double lim = res->best_iter / (s->B + (double)(l - 1) * universal_b);
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
static int s_universal(s_dp_t *s, const gpp_part_opts_t *o, const char *planner, const int *divs,
                       int nd, s_result_t *res, gpp_err_t *err)
{
    if (o->micro_batch) {
        s_cfg_t c = {o->micro_batch, 1};
        s_dp_configure(s, &c, 1, 0);
        return s_search(s, o, planner, o->micro_batch, o->eps, 0, 0, NULL, res, err);
    }
    double eps_c = o->eps < 1e-2 ? 1e-2 : o->eps;
    double low[MAX_CFG], est[MAX_CFG];
    for (int i = nd - 1; i >= 0; i--) {
        s_cfg_t c = {divs[i], 1};
        s_dp_configure(s, &c, 1, 0);
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
        s_cfg_t c = {divs[i], 1};
        s_dp_configure(s, &c, 1, 0);
        if (s_search(s, o, planner, divs[i], o->eps, low[i], 1, NULL, res, err))
            return -1;
    }
    return 0;
}

/* Memo size guard for the generalized search (levels are counted in samples). */
static int s_check_size(const s_dp_t *s, const s_cfg_t *cfg, int C, gpp_err_t *err)
{
    int q;
    int64_t NL = s_levels(s, cfg, C, 1, &q), per = (int64_t)C * NL;
    if (2 * per + 2 > (int64_t)ARENA_CHUNK || per * s->n_suffix > ((int64_t)1 << 25))
        return gpp_err_set(err,
                           "partitioner: the per-stage search has %d configs x %lld in-flight "
                           "levels; too large (use fewer micro-batch sizes: max_mbs, or a "
                           "smaller max_k)",
                           C, (long long)NL);
    return 0;
}

/* Every candidate set for one memory bound. With per-stage micro-batches or
 * kFkB the universal plans are candidates too, so the result is never worse
 * by the estimate. */
static int s_all(s_dp_t *s, const gpp_part_opts_t *o, const char *planner, s_result_t *res,
                 gpp_err_t *err)
{
    int B = o->batch;
    int cap = o->max_mbs > 0 ? o->max_mbs : B;
    int divs[MAX_CFG];
    int nd = s_divisors(B, cap, divs, MAX_CFG);
    s->min_tps = o->min_tps;
    s->simulate = o->simulate;
    if (!(o->min_tps && (o->per_stage_mbs || o->kfkb)) &&
        s_universal(s, o, planner, divs, nd, res, err))
        return -1;
    if (!o->per_stage_mbs && !o->kfkb)
        return 0;
    s_cfg_t cfg[MAX_CFG];
    int C = 0;
    if (!o->per_stage_mbs) { /* universal b, each stage picks k */
        int one = o->micro_batch;
        const int *bs = one ? &one : divs;
        for (int i = 0; i < (one ? 1 : nd); i++) {
            C = 0;
            for (int k = 1; k <= o->max_k && C < MAX_CFG; k++)
                if ((int64_t)k * bs[i] <= B)
                    cfg[C++] = (s_cfg_t){bs[i], k};
            if (s_check_size(s, cfg, C, err))
                return -1;
            s_dp_configure(s, cfg, C, 1);
            if (s_search(s, o, planner, bs[i], o->eps, 0, 0, NULL, res, err))
                return -1;
        }
        return 0;
    }
    for (int i = 0; i < nd; i++)
        for (int k = 1; k <= (o->kfkb ? o->max_k : 1) && C < MAX_CFG; k++)
            if ((int64_t)k * divs[i] <= B)
                cfg[C++] = (s_cfg_t){divs[i], k};
    if (s_check_size(s, cfg, C, err))
        return -1;
    s_dp_configure(s, cfg, C, 1);
    return s_search(s, o, planner, 0, o->eps, 0, 0, NULL, res, err);
}

gpp_plan_t *gpp_part_run(const gpp_graph_t *g, const gpp_cost_t *cost, const gpp_part_opts_t *o,
                         int64_t *min_mem_bytes, gpp_err_t *err)
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
    int64_t M = gpp_cluster_mem_bound(gpp_cost_cluster(cost));
    s_dp_t *s = s_dp_new(g, cost, t, o->batch, M);
    s_result_t res = {0};
    gpp_plan_t *p = NULL;
    if (s_all(s, o, planner, &res, err))
        goto done;
    if (!res.best) {
        /* memory is the only reason at t = inf: find the least bound that fits */
        int64_t lo = M > 0 ? M : 0, hi = M > 0 ? M : ((int64_t)1 << 20);
        s_result_t probe = {0};
        gpp_part_opts_t q = *o;
        q.simulate = 0; /* feasibility only */
        do {
            hi *= 2;
            s->M = hi;
            gpp_plan_destroy(&probe.best);
            memset(&probe, 0, sizeof probe);
            if (s_all(s, &q, planner, &probe, err))
                goto done;
        } while (!probe.any_feasible_mem && hi < ((int64_t)1 << 52));
        gpp_plan_destroy(&probe.best);
        while (hi - lo > ((int64_t)1 << 20)) {
            int64_t mid = lo + (hi - lo) / 2;
            s->M = mid;
            memset(&probe, 0, sizeof probe);
            q.eps = 0.5; /* feasibility only */
            if (s_all(s, &q, planner, &probe, err))
                goto done;
            gpp_plan_destroy(&probe.best);
            if (probe.any_feasible_mem)
                hi = mid;
            else
                lo = mid;
        }
        if (min_mem_bytes)
            *min_mem_bytes = hi;
        gpp_err_set(err,
                    "partitioner (%s): no plan of '%s' fits %lld MiB per device on %d devices "
                    "(batch %d); the least bound that fits is %lld MiB: use more devices, "
                    "a smaller batch or a larger memory bound",
                    planner, g->name, (long long)(M >> 20), s->n_dev, o->batch,
                    (long long)(hi >> 20));
        goto done;
    }
    if (res.n_cand)
        s_pick_simulated(s, &res);
    p = res.best;
    p->search_ms = gpp_now_ms() - t0;
    gpp_debug("partitioner %s: %lld DP runs, %lld stage evaluations, %.2f ms", planner, res.runs,
              s->n_eval, p->search_ms);
done:
    for (int i = 0; i < res.n_cand; i++) /* an error left candidates (res.best among them) */
        gpp_plan_destroy(&res.cand[i]);
    free(res.cand);
    if (!res.n_cand && res.best != p)
        gpp_plan_destroy(&res.best);
    s_dp_destroy(&s);
    gpp_sp_destroy(&t);
    return p;
}
