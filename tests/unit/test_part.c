/* test_part: the GPP partitioner against independent brute force.
 *
 * - 240 random small graphs (<= 9 ops, <= 4 devices, seeded): the DP's
 *   bottleneck TPS equals the exhaustive optimum over the same SP-structured
 *   stage space (enumerated here from the SP tree, in-flight computed over
 *   the stage DAG of the SP-closed graph) within the binary-search eps, and
 *   both agree on feasibility. Also prints how often an unrestricted convex
 *   partition would be better, and by how much.
 * - 160 branch-and-join graphs (2-3 branches, a join, ops after it; 4
 *   devices, b = 1): the same check over the widened join split, where the
 *   split branch's head may be a chain of stages; counts the cases that
 *   chain heads improve (the test requires some).
 * - chain: GPP == SPP; in-flight rule on default plans; ComputeInFlight rows,
 *   coverage over the candidate domain; per-stage mbs / kFkB plans; the
 *   memory-infeasible error and its least bound. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/gpp_test.h"
#include "planner/gpp_cost.h"
#include "model/gpp_profile_graph.h"
#include "planner/gpp_profile_io.h"
#include "planner/gpp_part.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "planner/gpp_sp.h"

#define MAXN 9
#define EPS 1e-4

/* 0: the enumeration leaves out chain heads at the join split (the space
   before they were added), to count the cases they improve */
static int s_enum_chain_heads = 1;

static uint64_t s_rng = 0x9E3779B97F4A7C15ull;
static uint32_t s_rand(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return (uint32_t)(s_rng >> 11);
}
static int s_randi(int lo, int hi) /* inclusive */
{
    return lo + (int)(s_rand() % (uint32_t)(hi - lo + 1));
}

/* Appends an opaque op with random costs. */
static void s_random_op(gpp_graph_t *g, int ni, const int *ins)
{
    char name[16];
    snprintf(name, sizeof name, "op%d", g->n_ops);
    int id = gpp_graph_add(g, GPP_OP_OPAQUE, name, ni, ins);
    gpp_op_t *o = gpp_graph_op(g, id);
    o->rows = 1;
    o->cols = 256;
    o->params = (int64_t)s_randi(0, 4) * 1000000;
    o->fwd_flops = s_randi(1, 50) * 1e8;
    o->bwd_flops = 2 * o->fwd_flops;
    o->out_bytes = (int64_t)s_randi(1, 64) * 4096;
    o->stash_bytes = (int64_t)s_randi(0, 64) * 65536;
    o->io_bytes = 3 * o->out_bytes;
    o->weight_io_bytes = 3 * o->params * 4;
}

static gpp_graph_t *s_finalized(gpp_graph_t *g)
{
    gpp_err_t err = {{0}};
    int rc = gpp_graph_finalize(g, &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    return g;
}

/* Random DAG of opaque ops with random costs. */
static gpp_graph_t *s_random_graph(int n)
{
    gpp_graph_t *g = gpp_graph_new("rand");
    for (int i = 0; i < n; i++) {
        int ins[2], ni = 0;
        if (i > 0 && s_randi(0, 9) > 0) {
            ins[ni++] = s_randi(0, i - 1);
            if (i > 1 && s_randi(0, 2) == 0) {
                int b = s_randi(0, i - 1);
                if (b != ins[0])
                    ins[ni++] = b;
            }
        }
        s_random_op(g, ni, ins);
    }
    return s_finalized(g);
}

/* The zoo's shape in small: 2-3 branches (chains of 1-5 ops, sources inside
   them), a join, then 1-2 ops; at most MAXN ops. Where a long branch's
   chain of stages absorbs the join is where the widened join split pays. */
static gpp_graph_t *s_branchy_graph(void)
{
    gpp_graph_t *g = gpp_graph_new("branchy");
    int nb = s_randi(2, 3), after = s_randi(1, 2), ends[3], left = MAXN - 1 - after;
    for (int b = 0; b < nb; b++) {
        int len = s_randi(1, b == nb - 1 ? (left < 5 ? left : 5) : 2);
        left -= len;
        for (int x = 0; x < len; x++) {
            int in = g->n_ops - 1;
            s_random_op(g, x > 0, &in);
        }
        ends[b] = g->n_ops - 1;
    }
    s_random_op(g, nb, ends);
    for (int x = 0; x < after; x++) {
        int in = g->n_ops - 1;
        s_random_op(g, 1, &in);
    }
    return s_finalized(g);
}

/* ---- brute force ---- */

typedef struct {
    const gpp_graph_t *g;
    const gpp_cost_t *cost;
    int n, n_dev, b, B;
    int64_t M;
    int reach_extra[MAXN][MAXN]; /* extra (SP-closure) edges, position-free: op ids */
    /* per (mask, d) stage figures */
    double tps[1 << MAXN][5];
    int64_t fixed_bytes[1 << MAXN][5]; /* weights + reserved */
    int64_t stash[1 << MAXN];
    int64_t work[1 << MAXN];
    int have[1 << MAXN];
} s_bf_t;

static void s_bf_stage(s_bf_t *bf, unsigned mask)
{
    if (bf->have[mask])
        return;
    int ops[MAXN], k = 0;
    for (int i = 0; i < bf->n; i++)
        if (mask >> i & 1)
            ops[k++] = i;
    for (int d = 1; d <= bf->n_dev && d <= bf->b; d++) {
        gpp_stage_cost_t sc;
        gpp_cost_stage(bf->cost, k, ops, d, bf->b, bf->B, &sc);
        bf->tps[mask][d] = sc.tps_ms;
        bf->fixed_bytes[mask][d] = sc.weight_bytes + sc.reserved_bytes;
        bf->stash[mask] = sc.stash_bytes;
        bf->work[mask] = sc.work_bytes;
    }
    bf->have[mask] = 1;
}

/* Best bottleneck over device assignments for stages[] (op masks) with the
 * stage DAG given by adj; INFINITY when nothing fits. */
static double s_bf_eval(s_bf_t *bf, const unsigned *st, int S, const int adj[MAXN][MAXN])
{
    if (S > bf->n_dev)
        return INFINITY;
    for (int i = 0; i < S; i++)
        s_bf_stage(bf, st[i]);
    /* in-flight: 1F1B rule over the stage DAG (acyclic: iterate to fixpoint) */
    int infl[MAXN];
    for (int i = 0; i < S; i++)
        infl[i] = 0;
    for (int it = 0; it <= S; it++)
        for (int x = 0; x < S; x++) {
            int v = bf->b;
            for (int y = 0; y < S; y++)
                if (adj[x][y] && bf->b + infl[y] > v)
                    v = bf->b + infl[y];
            infl[x] = v < bf->B ? v : bf->B;
        }
    double best = INFINITY;
    int d[MAXN];
    for (int i = 0; i < S; i++)
        d[i] = 1;
    int dmax = bf->n_dev < bf->b ? bf->n_dev : bf->b;
    for (;;) {
        int sum = 0;
        for (int i = 0; i < S; i++)
            sum += d[i];
        if (sum <= bf->n_dev) {
            double worst = 0;
            int ok = 1;
            for (int i = 0; i < S && ok; i++) {
                /* gpp_cost_stage_mem_bound */
                int64_t mem = bf->fixed_bytes[st[i]][d[i]] +
                              gpp_cost_act_bytes(bf->stash[st[i]], infl[i], bf->b, d[i]) +
                              bf->work[st[i]] * ((bf->b + d[i] - 1) / d[i]);
                ok = mem <= bf->M;
                if (bf->tps[st[i]][d[i]] > worst)
                    worst = bf->tps[st[i]][d[i]];
            }
            if (ok && worst < best)
                best = worst;
        }
        int i = 0;
        while (i < S && d[i] == dmax)
            d[i++] = 1;
        if (i == S)
            break;
        d[i]++;
    }
    return best;
}

/* Stage adjacency from op edges (graph edges plus extra edges). Returns -1 on
 * a cycle. */
static int s_bf_adj(const s_bf_t *bf, const unsigned *st, int S, int adj[MAXN][MAXN], int use_extra)
{
    int of[MAXN];
    for (int s = 0; s < S; s++)
        for (int i = 0; i < bf->n; i++)
            if (st[s] >> i & 1)
                of[i] = s;
    for (int x = 0; x < S; x++)
        for (int y = 0; y < S; y++)
            adj[x][y] = 0;
    for (int v = 0; v < bf->n; v++) {
        for (int k = 0; k < bf->g->ops[v].n_inputs; k++) {
            int u = bf->g->ops[v].inputs[k];
            if (of[u] != of[v])
                adj[of[u]][of[v]] = 1;
        }
        for (int u = 0; use_extra && u < bf->n; u++)
            if (bf->reach_extra[u][v] && of[u] != of[v])
                adj[of[u]][of[v]] = 1;
    }
    /* cycle check: transitive closure */
    int r[MAXN][MAXN];
    memcpy(r, adj, sizeof r);
    for (int k = 0; k < S; k++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++)
                if (r[i][k] && r[k][j])
                    r[i][j] = 1;
    for (int i = 0; i < S; i++)
        if (r[i][i])
            return -1;
    return 0;
}

/* ---- SP-structured enumeration (mirrors the space, not the DP code) ---- */

typedef struct {
    unsigned st[MAXN * 2];
    int n;
} s_part_t;

typedef struct {
    s_part_t *p;
    int n, cap;
} s_plist_t;

static void s_pl_add(s_plist_t *l, s_part_t p)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->p = realloc(l->p, (size_t)l->cap * sizeof *l->p);
    }
    l->p[l->n++] = p;
}

static unsigned s_mask(const gpp_sp_t *t, int l, int r)
{
    unsigned m = 0;
    for (int p = l; p <= r; p++)
        m |= 1u << t->op_at[p];
    return m;
}

/* cartesian product a x b -> out (stage lists concatenated) */
static void s_pl_product(const s_plist_t *a, const s_plist_t *b, unsigned extra, int has_extra,
                         s_plist_t *out)
{
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++) {
            s_part_t p = a->p[i];
            if (p.n + b->p[j].n + has_extra > MAXN * 2)
                continue;
            for (int k = 0; k < b->p[j].n; k++)
                p.st[p.n++] = b->p[j].st[k];
            if (has_extra)
                p.st[p.n++] = extra;
            s_pl_add(out, p);
        }
}

static void s_enum_node(const gpp_sp_t *t, int v, s_plist_t *out);

static void s_unit(s_plist_t *l)
{
    s_part_t e = {{0}, 0};
    s_pl_add(l, e);
}

/* partitions of branches 0..e of parallel node v */
static void s_enum_par(const gpp_sp_t *t, int v, int e, s_plist_t *out)
{
    const gpp_sp_node_t *n = &t->nodes[v];
    if (e < 0) {
        s_unit(out);
        return;
    }
    const gpp_sp_node_t *be = &t->nodes[n->children[e]];
    for (int b = e; b >= 0; b--) {
        s_plist_t prev = {0};
        s_enum_par(t, v, b - 1, &prev);
        if (b == e && be->kind != GPP_SP_LEAF) {
            s_plist_t ch = {0};
            s_enum_node(t, n->children[e], &ch);
            s_pl_product(&prev, &ch, 0, 0, out);
            free(ch.p);
        } else {
            s_plist_t one = {0};
            s_unit(&one);
            s_pl_product(&prev, &one, s_mask(t, t->nodes[n->children[b]].first, be->last), 1, out);
            free(one.p);
        }
        free(prev.p);
    }
}

/* partitions of children i..k-1 of series node v (k: all of them, or fewer:
   a series branch cut before child k, the head of a join-side split) */
static void s_enum_ser(const gpp_sp_t *t, int v, int i, int k, s_plist_t *out)
{
    const gpp_sp_node_t *n = &t->nodes[v];
    if (i == k) {
        s_unit(out);
        return;
    }
    const gpp_sp_node_t *ci = &t->nodes[n->children[i]];
    if (ci->kind != GPP_SP_LEAF) {
        s_plist_t a = {0}, rest = {0};
        s_enum_node(t, n->children[i], &a);
        s_enum_ser(t, v, i + 1, k, &rest);
        s_pl_product(&a, &rest, 0, 0, out);
        free(a.p), free(rest.p);
    }
    for (int m = i; m < k; m++) {
        if (m == i && ci->kind != GPP_SP_LEAF)
            continue;
        s_plist_t rest = {0};
        s_enum_ser(t, v, m + 1, k, &rest);
        s_plist_t one = {0};
        s_unit(&one);
        s_pl_product(&rest, &one, s_mask(t, ci->first, t->nodes[n->children[m]].last), 1, out);
        free(one.p), free(rest.p);
    }
    if (ci->kind == GPP_SP_PARALLEL)
        for (int m = i + 1; m < k; m++)
            for (int j = ci->n_children - 1; j >= 1; j--) {
                s_plist_t pre = {0}, rest = {0}, tmp = {0};
                s_enum_par(t, n->children[i], j - 1, &pre);
                s_enum_ser(t, v, m + 1, k, &rest);
                s_pl_product(
                    &pre, &rest,
                    s_mask(t, t->nodes[ci->children[j]].first, t->nodes[n->children[m]].last), 1,
                    &tmp);
                for (int x = 0; x < tmp.n; x++)
                    s_pl_add(out, tmp.p[x]);
                free(pre.p), free(rest.p), free(tmp.p);
            }
    /* the join side cutting through a branch: T = the tail of series branch
       j (children e+1..), whole branches j+1.., children i+1..m; before it
       the parallel graph of branches 0..j-1 and the head of branch j
       (children 0..e) partitioned like a parallel node whose last branch is
       that head: either H = the head with whole branches h..j-1 as one
       stage, branches 0..h-1 partitioned as a parallel prefix; or the head
       partitioned as a series (e.g. a chain of stages), branches 0..j-1 as
       a parallel prefix; then the rest */
    if (ci->kind == GPP_SP_PARALLEL)
        for (int m = i + 1; m < k; m++)
            for (int j = 0; j < ci->n_children; j++) {
                const gpp_sp_node_t *bj = &t->nodes[ci->children[j]];
                if (bj->kind != GPP_SP_SERIES)
                    continue;
                for (int e = 0; e + 1 < bj->n_children; e++)
                    for (int h = j; h >= 0; h--) {
                        s_plist_t pre = {0}, rest = {0}, tmp = {0}, tmp2 = {0};
                        s_enum_par(t, n->children[i], h - 1, &pre);
                        s_enum_ser(t, v, m + 1, k, &rest);
                        unsigned T = s_mask(t, t->nodes[bj->children[e + 1]].first,
                                            t->nodes[n->children[m]].last);
                        unsigned H = s_mask(t, t->nodes[ci->children[h]].first,
                                            t->nodes[bj->children[e]].last);
                        s_pl_product(&pre, &rest, T, 1, &tmp);
                        s_plist_t one = {0};
                        s_unit(&one);
                        s_pl_product(&tmp, &one, H, 1, &tmp2);
                        for (int x = 0; x < tmp2.n; x++)
                            s_pl_add(out, tmp2.p[x]);
                        free(pre.p), free(rest.p), free(tmp.p), free(tmp2.p), free(one.p);
                    }
                for (int e = 0; s_enum_chain_heads && e + 1 < bj->n_children; e++) {
                    s_plist_t pre = {0}, rest = {0}, head = {0}, tmp = {0}, tmp2 = {0};
                    s_enum_par(t, n->children[i], j - 1, &pre);
                    s_enum_ser(t, ci->children[j], 0, e + 1, &head);
                    s_enum_ser(t, v, m + 1, k, &rest);
                    unsigned T = s_mask(t, t->nodes[bj->children[e + 1]].first,
                                        t->nodes[n->children[m]].last);
                    s_pl_product(&pre, &rest, T, 1, &tmp);
                    s_pl_product(&tmp, &head, 0, 0, &tmp2);
                    for (int x = 0; x < tmp2.n; x++)
                        s_pl_add(out, tmp2.p[x]);
                    free(pre.p), free(rest.p), free(head.p), free(tmp.p), free(tmp2.p);
                }
            }
}

static void s_enum_node(const gpp_sp_t *t, int v, s_plist_t *out)
{
    const gpp_sp_node_t *n = &t->nodes[v];
    if (n->kind == GPP_SP_LEAF) {
        s_part_t p = {{1u << n->op}, 1};
        s_pl_add(out, p);
    } else if (n->kind == GPP_SP_SERIES) {
        s_enum_ser(t, v, 0, n->n_children, out);
    } else {
        s_enum_par(t, v, n->n_children - 1, out);
    }
}

/* first / last ops of a node in the SP-closed graph */
static unsigned s_ends(const gpp_sp_t *t, int v, int last)
{
    const gpp_sp_node_t *n = &t->nodes[v];
    if (n->kind == GPP_SP_LEAF)
        return 1u << n->op;
    if (n->kind == GPP_SP_SERIES)
        return s_ends(t, n->children[last ? n->n_children - 1 : 0], last);
    unsigned m = 0;
    for (int c = 0; c < n->n_children; c++)
        m |= s_ends(t, n->children[c], last);
    return m;
}

static void s_closure_edges(s_bf_t *bf, const gpp_sp_t *t)
{
    memset(bf->reach_extra, 0, sizeof bf->reach_extra);
    for (int v = 0; v < t->n_nodes; v++) {
        const gpp_sp_node_t *n = &t->nodes[v];
        if (n->kind != GPP_SP_SERIES)
            continue;
        for (int c = 0; c + 1 < n->n_children; c++) {
            unsigned a = s_ends(t, n->children[c], 1), b = s_ends(t, n->children[c + 1], 0);
            for (int u = 0; u < bf->n; u++)
                for (int w = 0; w < bf->n; w++)
                    if ((a >> u & 1) && (b >> w & 1))
                        bf->reach_extra[u][w] = 1;
        }
    }
}

static double s_bf_sp(s_bf_t *bf, const gpp_sp_t *t)
{
    s_plist_t all = {0};
    s_enum_node(t, t->root, &all);
    double best = INFINITY;
    int adj[MAXN][MAXN];
    for (int i = 0; i < all.n; i++) {
        /* every op exactly once */
        unsigned seen = 0;
        int ok = 1;
        for (int s = 0; s < all.p[i].n; s++) {
            ok &= (seen & all.p[i].st[s]) == 0;
            seen |= all.p[i].st[s];
        }
        GPP_EXPECT(ok && seen == (1u << bf->n) - 1);
        if (all.p[i].n > bf->n_dev)
            continue;
        int rc = s_bf_adj(bf, all.p[i].st, all.p[i].n, adj, 1);
        GPP_EXPECT(rc == 0);
        double v = s_bf_eval(bf, all.p[i].st, all.p[i].n, adj);
        if (v < best) {
            best = v;
            if (getenv("GPP_TEST_VERBOSE")) {
                fprintf(stderr, "  bf best %.6f:", v);
                for (int s = 0; s < all.p[i].n; s++)
                    fprintf(stderr, " {%x}", all.p[i].st[s]);
                fprintf(stderr, "\n");
            }
        }
    }
    free(all.p);
    return best;
}

/* every convex partition into <= n_dev stages with an acyclic stage graph */
static double s_bf_convex(s_bf_t *bf)
{
    int n = bf->n;
    unsigned reach[MAXN] = {0}; /* reach[u]: ops reachable from u */
    for (int u = n - 1; u >= 0; u--)
        for (int k = 0; k < bf->g->ops[u].n_outputs; k++) {
            int w = bf->g->ops[u].outputs[k];
            reach[u] |= (1u << w) | reach[w];
        }
    int rgs[MAXN] = {0};
    double best = INFINITY;
    int adj[MAXN][MAXN];
    for (;;) {
        int S = 0;
        for (int i = 0; i < n; i++)
            if (rgs[i] + 1 > S)
                S = rgs[i] + 1;
        if (S <= bf->n_dev) {
            unsigned st[MAXN] = {0};
            for (int i = 0; i < n; i++)
                st[rgs[i]] |= 1u << i;
            int convex = 1;
            for (int s = 0; s < S && convex; s++) {
                unsigned out_reach = 0, into = 0;
                for (int u = 0; u < n; u++)
                    if (st[s] >> u & 1)
                        out_reach |= reach[u];
                out_reach &= ~st[s];
                for (int w = 0; w < n; w++)
                    if ((out_reach >> w & 1) && (reach[w] & st[s]))
                        into = 1;
                convex = !into;
            }
            if (convex && s_bf_adj(bf, st, S, adj, 0) == 0) {
                double v = s_bf_eval(bf, st, S, adj);
                if (v < best)
                    best = v;
            }
        }
        /* next restricted growth string */
        int i = n - 1;
        for (; i > 0; i--) {
            int mx = 0;
            for (int j = 0; j < i; j++)
                if (rgs[j] > mx)
                    mx = rgs[j];
            if (rgs[i] <= mx && rgs[i] + 1 < bf->n_dev) {
                rgs[i]++;
                break;
            }
            rgs[i] = 0;
        }
        if (i == 0)
            break;
    }
    return best;
}

typedef struct {
    int cases, infeasible, agree, compared, convex_better, sp_compared, sp_better, widened;
    double ratio_sum, ratio_max, sp_sum, sp_max;
} s_bf_stats_t;

/* One case: the DP (its own space: no chain candidate) against the brute
 * force over the SP stage space; with count_widened, also the brute force
 * without chain heads at the join split, to count where they win. */
static void s_bf_case(s_bf_t *bf, gpp_graph_t *g, int n_dev, int b_log_max, int count_widened,
                      s_bf_stats_t *st)
{
    int n = g->n_ops, c = st->cases++;
    gpp_cluster_t cl;
    gpp_err_t err = {{0}};
    gpp_cluster_init(&cl, "v100-16g", n_dev, 2, &err);
    int64_t w = GPP_BYTES_PER_PARAM * gpp_graph_params(g);
    /* bounds from tight to loose so that memory binds in some cases */
    cl.mem_bound_bytes = (int64_t)((w + (64 << 20)) * (0.3 + 0.2 * s_randi(0, 6)));
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    int b = 1 << s_randi(0, b_log_max), B = 8;
    memset(bf, 0, sizeof *bf);
    bf->g = g, bf->cost = cost, bf->n = n, bf->n_dev = n_dev, bf->b = b, bf->B = B;
    bf->M = cl.mem_bound_bytes;
    gpp_sp_t *t = gpp_sp_build(g, &err);
    GPP_EXPECT(t && gpp_sp_check(t, g, &err) == 0);
    s_closure_edges(bf, t);
    double want = s_bf_sp(bf, t);
    if (count_widened) {
        s_enum_chain_heads = 0;
        double narrow = s_bf_sp(bf, t);
        s_enum_chain_heads = 1;
        GPP_EXPECT(want <= narrow); /* a superset */
        st->widened += want < narrow * (1 - EPS);
    }
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, B);
    o.micro_batch = b;
    o.eps = EPS;
    o.no_chain = 1; /* the DP's own space, which the brute force enumerates */
    int64_t need = 0;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, &need, &err);
    if (!isfinite(want)) {
        st->infeasible++;
        GPP_EXPECT_MSG(p == NULL && need > 0, "case %d: brute force infeasible, DP %s", c,
                       p ? "found a plan" : "no bound");
    } else {
        GPP_EXPECT_MSG(p != NULL, "case %d: brute force %.6f, DP failed: %s", c, want, err.msg);
        if (p) {
            double got = p->bottleneck_tps_ms;
            int ok = got >= want * (1 - 1e-9) && got <= want * (1 + EPS) + 1e-12;
            GPP_EXPECT_MSG(ok, "case %d (n=%d dev=%d b=%d): DP %.9f vs brute force %.9f", c, n,
                           n_dev, b, got, want);
            if (!ok && getenv("GPP_TEST_VERBOSE")) {
                gpp_sp_print(t, g, stderr);
                for (int v = 0; v < n; v++) {
                    fprintf(stderr, "op%d <-", v);
                    for (int k = 0; k < g->ops[v].n_inputs; k++)
                        fprintf(stderr, " %d", g->ops[v].inputs[k]);
                    fprintf(stderr, "\n");
                }
                for (int sI = 0; sI < p->n_stages; sI++) {
                    fprintf(stderr, "  dp stage %d: d=%d infl=%d tps=%.6f mem=%lld ops", sI,
                            p->stages[sI].devices, p->stages[sI].inflight, p->stages[sI].tps_ms,
                            (long long)p->stages[sI].mem_bytes);
                    for (int k = 0; k < p->stages[sI].n_ops; k++)
                        fprintf(stderr, " %d", p->stages[sI].ops[k]);
                    fprintf(stderr, "\n");
                }
                fprintf(stderr, "  M=%lld\n", (long long)bf->M);
            }
            st->agree += ok;
            double conv = s_bf_convex(bf);
            GPP_EXPECT(conv <= want * (1 + 1e-9)); /* the SP space is a subset */
            double r = got / conv;
            st->ratio_sum += r;
            if (r > st->ratio_max)
                st->ratio_max = r;
            st->convex_better += r > 1 + EPS;
            st->compared++;
            if (t->added_cuts == 0) {
                st->sp_compared++;
                st->sp_better += r > 1 + EPS;
                st->sp_sum += r;
                if (r > st->sp_max)
                    st->sp_max = r;
            }
        }
    }
    gpp_plan_destroy(&p);
    gpp_sp_destroy(&t);
    gpp_cost_destroy(&cost);
}

static void t_random_vs_bruteforce(void)
{
    s_bf_stats_t st = {.ratio_max = 1, .sp_max = 1};
    s_bf_t *bf = calloc(1, sizeof *bf);
    for (int c = 0; c < 240; c++) {
        gpp_graph_t *g = s_random_graph(s_randi(2, MAXN));
        s_bf_case(bf, g, s_randi(1, 4), 2, 0, &st);
        gpp_graph_destroy(&g);
    }
    printf("  random graphs: %d cases, %d memory-infeasible (DP agrees), %d optimal within eps "
           "%.0e\n",
           st.cases, st.infeasible, st.agree, EPS);
    printf("  unrestricted convex partitions better in %d of %d cases (%.1f%%); GPP/convex TPS "
           "ratio mean %.4f max %.4f\n",
           st.convex_better, st.compared,
           st.compared ? 100.0 * st.convex_better / st.compared : 0.0,
           st.compared ? st.ratio_sum / st.compared : 1.0, st.ratio_max);
    printf("  of those, SP graphs: better in %d of %d; ratio mean %.4f max %.4f\n", st.sp_better,
           st.sp_compared, st.sp_compared ? st.sp_sum / st.sp_compared : 1.0, st.sp_max);
    /* branches and a join (the zoo's shape), 4 devices, b = 1 (with more
       samples per micro-batch data parallelism usually ties with a chain):
       the widened join split (a chain of stages in the split branch) must
       be found exactly */
    s_bf_stats_t br = {.ratio_max = 1, .sp_max = 1};
    for (int c = 0; c < 160; c++) {
        gpp_graph_t *g = s_branchy_graph();
        s_bf_case(bf, g, 4, 0, 1, &br);
        gpp_graph_destroy(&g);
    }
    printf("  branch-and-join graphs: %d cases, %d memory-infeasible (DP agrees), %d optimal "
           "within eps %.0e; a chain head at the join split is strictly better in %d\n",
           br.cases, br.infeasible, br.agree, EPS, br.widened);
    GPP_EXPECT(br.widened > 0); /* the cases exercise the widening */
    free(bf);
}

static gpp_plan_t *s_plan_zoo(const char *spec, int n_dev, int batch, int mbs, int spp,
                              gpp_graph_t **g_out, gpp_cost_t **cost_out)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build(spec, &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    gpp_cluster_t cl;
    gpp_cluster_init(&cl, "v100-16g", n_dev, 4, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, batch);
    o.micro_batch = mbs;
    o.spp = spp;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(p != NULL, "%s: %s", spec, err.msg);
    *g_out = g;
    *cost_out = cost;
    return p;
}

static void s_check_inflight_rule(const gpp_plan_t *p)
{
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        int v = st->k * st->micro_batch;
        if (st->n_succ) {
            v = 0;
            for (int j = 0; j < st->n_succ; j++) {
                const gpp_stage_t *y = &p->stages[st->succ[j]];
                int c = p->micro_batch ? st->micro_batch + y->inflight
                                       : gpp_part_inflight(st->k, st->micro_batch, y->k,
                                                           y->micro_batch, y->inflight, NULL);
                if (c > v)
                    v = c;
            }
        }
        if (v > p->batch)
            v = p->batch;
        GPP_EXPECT_MSG(st->inflight == v, "stage %d inflight %d, rule gives %d", s, st->inflight,
                       v);
        GPP_EXPECT(st->mem_bytes <= 15LL * (1 << 30) + (1 << 29));
    }
}

static void t_chain_gpp_equals_spp(void)
{
    gpp_graph_t *g1, *g2;
    gpp_cost_t *c1, *c2;
    const char *spec = "transformer:layers=4,hidden=256,heads=4,seq=64,ffn=1024";
    int devs[] = {2, 5, 8, 8}, mbs[] = {4, 8, 2, 0};
    for (int i = 0; i < 4; i++) {
        gpp_plan_t *a = s_plan_zoo(spec, devs[i], 64, mbs[i], 0, &g1, &c1);
        gpp_plan_t *b = s_plan_zoo(spec, devs[i], 64, mbs[i], 1, &g2, &c2);
        if (a && b) {
            GPP_EXPECT_NEAR(a->bottleneck_tps_ms, b->bottleneck_tps_ms, 1e-12);
            GPP_EXPECT(a->n_stages == b->n_stages && a->micro_batch == b->micro_batch);
            printf("  chain, %d devices, b=%d: gpp %.6f ms, spp %.6f ms per sample, %d stages\n",
                   devs[i], a->micro_batch, a->bottleneck_tps_ms, b->bottleneck_tps_ms,
                   a->n_stages);
        }
        gpp_plan_destroy(&a), gpp_plan_destroy(&b);
        gpp_cost_destroy(&c1), gpp_cost_destroy(&c2);
        gpp_graph_destroy(&g1), gpp_graph_destroy(&g2);
    }
}

static void t_inflight_rule_default(void)
{
    const char *specs[] = {"mmt:branches=3,layers=2,hidden=256,heads=4,seq=64,ffn=512",
                           "candle_uno:branches=4,layers=3,hidden=1024,in=1024",
                           "dlrm:dense_branches=2,sparse_branches=3,rows=100000", NULL};
    int devs[] = {8, 12, 6};
    for (int i = 0; specs[i]; i++) {
        gpp_graph_t *g;
        gpp_cost_t *c;
        gpp_plan_t *p = s_plan_zoo(specs[i], devs[i], 256, 0, 0, &g, &c);
        if (p) {
            s_check_inflight_rule(p);
            int used = 0;
            for (int s = 0; s < p->n_stages; s++) {
                used += p->stages[s].devices;
                GPP_EXPECT(p->stages[s].tps_ms <= p->bottleneck_tps_ms);
                GPP_EXPECT(p->stages[s].k == 1 && p->stages[s].micro_batch == p->micro_batch);
            }
            GPP_EXPECT(used <= devs[i]);
            GPP_EXPECT(p->batch % p->micro_batch == 0);
        }
        gpp_plan_destroy(&p);
        gpp_cost_destroy(&c);
        gpp_graph_destroy(&g);
    }
}

static void t_compute_inflight_rows(void)
{
    int row = 0;
    /* the required mixed case: b=1 2F2B feeding b=2 1F1B holding 14 -> 16 */
    GPP_EXPECT(gpp_part_inflight(2, 1, 1, 2, 14, &row) == 16);
    GPP_EXPECT(row == 7);
    /* one case per row, in table order (kx, bx, ky, by, iy) -> value, row */
    struct {
        int kx, bx, ky, by, iy, want, row;
    } c[] = {
        {3, 1, 4, 2, 10, 14, 1},  /* M=2 < X=3 < Y=8: iy + 2M */
        {2, 1, 2, 2, 10, 12, 2},  /* M=X=2 < Y=4: iy + M */
        {2, 1, 1, 2, 10, 12, 7},  /* X=Y=M=2 */
        {4, 2, 2, 2, 10, 18, 3},  /* bx<=by=2 < Y=4 < X=8: iy+X-Y+2by */
        {4, 1, 1, 2, 10, 14, 4},  /* bx<=by=Y=2 < X=4: iy+X */
        {4, 2, 3, 1, 10, 19, 5},  /* by=1<=bx=2 < Y=3 < X=8: iy+X-Y+2bx */
        {4, 2, 2, 1, 10, 18, 6},  /* by<=bx=Y=2 < X=8: iy+X */
        {2, 2, 4, 1, 10, 14, 8},  /* M=2 < Y=X=4: iy+2M */
        {1, 1, 1, 4, 10, 14, 9},  /* bx<=X=1 < by=4<=Y: iy+by */
        {2, 4, 1, 1, 10, 21, 10}, /* by<=Y=1 < bx=4<=X=8: iy+X-Y+bx */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int got = gpp_part_inflight(c[i].kx, c[i].bx, c[i].ky, c[i].by, c[i].iy, &row);
        GPP_EXPECT_MSG(got == c[i].want && row == c[i].row,
                       "case %zu: %d (row %d), want %d (row %d)", i, got, row, c[i].want, c[i].row);
    }
    /* coverage over the candidate domain the partitioner generates: b | B,
       1 <= k <= 8, k*b <= B; every pair matches >= 1 row, all matching rows
       agree (gpp_part_inflight asserts it); count the overlaps */
    int B = 64, bs[7] = {1, 2, 4, 8, 16, 32, 64}, pairs = 0, multi = 0, used_rows = 0;
    for (int a = 0; a < 7; a++)
        for (int kx = 1; kx <= 8; kx++)
            for (int bb = 0; bb < 7; bb++)
                for (int ky = 1; ky <= 8; ky++) {
                    if (kx * bs[a] > B || ky * bs[bb] > B)
                        continue;
                    int m = gpp_part_inflight_matches(kx, bs[a], ky, bs[bb]);
                    GPP_EXPECT(m >= 1);
                    multi += m > 1;
                    pairs++;
                    gpp_part_inflight(kx, bs[a], ky, bs[bb], 5, &row);
                    used_rows |= 1 << (row - 1);
                }
    GPP_EXPECT(used_rows == (1 << 10) - 1);
    printf("  ComputeInFlight: %d candidate pairs covered; %d match two rows (3/5 or 4/6 with "
           "bx == by, same value)\n",
           pairs, multi);
    /* also divisors that are not powers of two */
    for (int bx = 1; bx <= 12; bx++)
        for (int by = 1; by <= 12; by++)
            for (int kx = 1; kx <= 4; kx++)
                for (int ky = 1; ky <= 4; ky++)
                    GPP_EXPECT(gpp_part_inflight_matches(kx, bx, ky, by) >= 1);
}

static void t_generalized_plans(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g =
        gpp_zoo_build("case_study:branches=2,blocks=2,hidden=256,heads=4,seq=64,ffn=512", &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    gpp_cluster_t cl;
    gpp_cluster_init(&cl, "v100-16g", 6, 4, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, 32);
    o.per_stage_mbs = 1;
    o.kfkb = 1;
    o.max_k = 2;
    o.max_mbs = 8;
    /* the generalized DP alone: least TPS over per-stage (b, k) */
    o.min_tps = 1;
    gpp_plan_t *g1 = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(g1 != NULL, "%s", err.msg);
    if (g1) {
        GPP_EXPECT(g1->micro_batch == 0);
        s_check_inflight_rule(g1);
        int mixed = 0;
        for (int st = 0; st < g1->n_stages; st++)
            mixed |=
                g1->stages[st].micro_batch != g1->stages[0].micro_batch || g1->stages[st].k != 1;
        printf("  per-stage (b, k), least TPS: %.5f ms, %d stages:", g1->bottleneck_tps_ms,
               g1->n_stages);
        for (int st = 0; st < g1->n_stages; st++)
            printf(" (b=%d k=%d i=%d)", g1->stages[st].micro_batch, g1->stages[st].k,
                   g1->stages[st].inflight);
        printf("%s\n", mixed ? "" : " (uniform)");
        /* no universal b gives a lower TPS: the generalized space contains them */
        for (int b = 1; b <= 8; b *= 2) {
            gpp_part_opts_t u;
            gpp_part_opts_default(&u, 32);
            u.micro_batch = b;
            gpp_plan_t *q = gpp_part_run(g, cost, &u, NULL, &err);
            if (q)
                GPP_EXPECT_MSG(g1->bottleneck_tps_ms <= q->bottleneck_tps_ms * (1 + 2e-3),
                               "b=%d: universal %.6f < per-stage %.6f", b, q->bottleneck_tps_ms,
                               g1->bottleneck_tps_ms);
            gpp_plan_destroy(&q);
        }
    }
    gpp_plan_destroy(&g1);
    o.min_tps = 0;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(p != NULL, "%s", err.msg);
    if (p) {
        s_check_inflight_rule(p);
        for (int s = 0; s < p->n_stages; s++)
            GPP_EXPECT(p->stages[s].k * p->stages[s].micro_batch <= 32 &&
                       32 % p->stages[s].micro_batch == 0);
        /* never worse than the best universal plan over the same sizes */
        gpp_part_opts_t u;
        gpp_part_opts_default(&u, 32);
        u.max_mbs = 8;
        gpp_plan_t *q = gpp_part_run(g, cost, &u, NULL, &err);
        if (q) {
            printf("  per-stage mbs + kFkB: est %.3f ms, tps %.5f ms (%d stages, b=%d); universal: "
                   "est %.3f ms, tps %.5f (b=%d)\n",
                   p->iteration_ms, p->bottleneck_tps_ms, p->n_stages, p->micro_batch,
                   q->iteration_ms, q->bottleneck_tps_ms, q->micro_batch);
            GPP_EXPECT(p->iteration_ms <= q->iteration_ms * (1 + 1e-9));
        }
        gpp_plan_destroy(&q);
    }
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static void t_memory_infeasible(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g =
        gpp_zoo_build("mmt:branches=2,layers=2,hidden=512,heads=8,seq=128,ffn=2048", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t cl;
    gpp_cluster_init(&cl, "v100-16g", 2, 4, &err);
    cl.mem_bound_bytes = 64 << 20; /* far too small */
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, 16);
    int64_t need = 0;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, &need, &err);
    GPP_EXPECT(p == NULL && need > cl.mem_bound_bytes);
    GPP_EXPECT(strstr(err.msg, "least bound") != NULL);
    printf("  infeasible at 64 MiB: %s\n", err.msg);
    gpp_cost_destroy(&cost);
    /* the reported bound fits; 2 MiB less does not */
    cl.mem_bound_bytes = need;
    cost = gpp_cost_new(g, &cl);
    p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(p != NULL, "%s", err.msg);
    if (p)
        for (int s = 0; s < p->n_stages; s++)
            GPP_EXPECT(p->stages[s].mem_bytes <= need);
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    cl.mem_bound_bytes = need - (2 << 20);
    cost = gpp_cost_new(g, &cl);
    p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT(p == NULL);
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static void t_gpp_not_worse_than_spp_mmt(void)
{
    gpp_graph_t *g1, *g2;
    gpp_cost_t *c1, *c2;
    const char *spec = "mmt:branches=4,layers=2,hidden=512,heads=8,seq=128,ffn=2048";
    gpp_plan_t *a = s_plan_zoo(spec, 16, 256, 0, 0, &g1, &c1);
    gpp_plan_t *b = s_plan_zoo(spec, 16, 256, 0, 1, &g2, &c2);
    if (a && b) {
        printf(
            "  mmt 16 dev: gpp tps %.5f depth %d est %.2f ms; spp tps %.5f depth %d est %.2f ms\n",
            a->bottleneck_tps_ms, a->depth, a->iteration_ms, b->bottleneck_tps_ms, b->depth,
            b->iteration_ms);
        GPP_EXPECT(a->iteration_ms <= b->iteration_ms * (1 + 1e-9));
    }
    gpp_plan_destroy(&a), gpp_plan_destroy(&b);
    gpp_cost_destroy(&c1), gpp_cost_destroy(&c2);
    gpp_graph_destroy(&g1), gpp_graph_destroy(&g2);
}

/* Simulated iteration ms of p (schedule, lower, simulate): the criterion
 * the search ranks by; INFINITY on failure. */
static double s_sim_ms(gpp_plan_t *p, const gpp_graph_t *g, const gpp_cost_t *cost)
{
    gpp_err_t err = {{0}};
    double ms = INFINITY;
    if (gpp_sched_compute(p, &err) == 0 && gpp_sched_lower(p, g, &err) == 0 &&
        gpp_sched_validate(p, g, &err) == 0) {
        gpp_sim_t *sim = gpp_sim_new(p, g, cost);
        if (gpp_sim_run(sim, &err) == 0)
            ms = gpp_sim_iteration_ms(sim);
        gpp_sim_destroy(&sim);
    }
    GPP_EXPECT_MSG(isfinite(ms), "simulation failed: %s", err.msg);
    return ms;
}

/* GPP contains SPP: on the same cost model and memory bound the GPP plan's
 * simulated throughput is never below the SPP chain's (0.1 %), over random
 * SP graphs and every zoo model (default shape) at 4 and 8 devices. */
static int s_gpp_ge_spp(gpp_graph_t *g, gpp_cost_t *cost, int batch, const char *what)
{
    gpp_err_t err = {{0}};
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, batch);
    gpp_plan_t *a = gpp_part_run(g, cost, &o, NULL, &err);
    o.spp = 1;
    gpp_plan_t *b = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(!b || a, "%s: SPP has a plan, GPP none: %s", what, err.msg);
    int chain = -1; /* -1: no plan fits (neither planner) */
    if (a && b) {
        GPP_EXPECT(b->chain && b->depth == b->n_stages);
        double ga = batch / s_sim_ms(a, g, cost), gb = batch / s_sim_ms(b, g, cost);
        GPP_EXPECT_MSG(ga >= gb * (1 - 1e-3), "%s: GPP %.6g < SPP %.6g samples/ms", what, ga, gb);
        chain = a->chain;
    }
    gpp_plan_destroy(&a), gpp_plan_destroy(&b);
    return chain;
}

static void t_gpp_contains_spp(void)
{
    int n_chain = 0, n = 0, none = 0, r;
    for (int c = 0; c < 60; c++, n++) {
        gpp_graph_t *g = s_random_graph(s_randi(2, MAXN));
        gpp_cluster_t cl;
        gpp_err_t err = {{0}};
        gpp_cluster_init(&cl, "v100-16g", s_randi(1, 4), 2, &err);
        gpp_cost_t *cost = gpp_cost_new(g, &cl);
        char what[32];
        snprintf(what, sizeof what, "random case %d", c);
        r = s_gpp_ge_spp(g, cost, 8 << s_randi(0, 2), what);
        n_chain += r > 0, none += r < 0;
        gpp_cost_destroy(&cost), gpp_graph_destroy(&g);
    }
    for (int m = 0; m < gpp_zoo_count(); m++)
        for (int d = 4; d <= 8; d += 4, n++) {
            gpp_err_t err = {{0}};
            gpp_graph_t *g = gpp_zoo_build(gpp_zoo_name(m), &err);
            GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
            if (!g)
                continue;
            gpp_cluster_t cl;
            gpp_cluster_init(&cl, "v100-16g", d, 4, &err);
            gpp_cost_t *cost = gpp_cost_new(g, &cl);
            char what[64];
            snprintf(what, sizeof what, "%s on %d devices", gpp_zoo_name(m), d);
            r = s_gpp_ge_spp(g, cost, 16 * d, what);
            n_chain += r > 0, none += r < 0;
            gpp_cost_destroy(&cost), gpp_graph_destroy(&g);
        }
    printf("  GPP >= SPP on %d graphs (%d had no plan within memory); the chain plan won %d\n",
           n - none, none, n_chain);
    GPP_EXPECT(n - none >= n / 2);
}

static void t_edge_cases(void)
{
    gpp_err_t err = {{0}};
    /* one op, one device, batch 1 */
    gpp_graph_t *g = gpp_graph_new("one");
    int id = gpp_graph_add(g, GPP_OP_OPAQUE, "only", 0, NULL);
    gpp_graph_op(g, id)->fwd_flops = 1e9;
    gpp_graph_op(g, id)->out_bytes = 4;
    gpp_graph_op(g, id)->rows = gpp_graph_op(g, id)->cols = 1;
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t cl;
    gpp_cluster_init(&cl, "v100-16g", 1, 1, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, 1);
    gpp_plan_t *p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT_MSG(p && p->n_stages == 1 && p->stages[0].devices == 1 &&
                       p->stages[0].inflight == 1 && p->depth == 1,
                   "%s", err.msg);
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    /* more devices than samples: no stage gets more replicas than b */
    gpp_cluster_init(&cl, "v100-16g", 16, 4, &err);
    cost = gpp_cost_new(g, &cl);
    gpp_part_opts_default(&o, 4);
    p = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT(p != NULL);
    for (int s = 0; p && s < p->n_stages; s++)
        GPP_EXPECT(p->stages[s].devices <= p->stages[s].micro_batch);
    gpp_plan_destroy(&p);
    /* bad options are errors, not crashes */
    o.micro_batch = 3;
    GPP_EXPECT(gpp_part_run(g, cost, &o, NULL, &err) == NULL && strstr(err.msg, "divide"));
    gpp_part_opts_default(&o, 0);
    GPP_EXPECT(gpp_part_run(g, cost, &o, NULL, &err) == NULL);
    gpp_part_opts_default(&o, 8);
    o.eps = 0;
    GPP_EXPECT(gpp_part_run(g, cost, &o, NULL, &err) == NULL);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
    /* a profile-built graph plans end to end */
    char path[1024];
    const char *src = getenv("GPP_SRC");
    snprintf(path, sizeof path, "%s/tests/data/profile_small.json", src ? src : ".");
    gpp_profile_t *prof = gpp_profile_io_read(path, &err);
    g = prof ? gpp_profile_graph(prof, &err) : NULL;
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (g) {
        gpp_cluster_init(&cl, "v100-16g", 3, 4, &err);
        cost = gpp_cost_new(g, &cl);
        GPP_EXPECT(gpp_cost_attach_profile(cost, prof, &err) == 0);
        gpp_part_opts_default(&o, 8);
        p = gpp_part_run(g, cost, &o, NULL, &err);
        GPP_EXPECT_MSG(p != NULL, "%s", err.msg);
        if (p)
            s_check_inflight_rule(p);
        gpp_plan_destroy(&p);
        gpp_cost_destroy(&cost);
        gpp_graph_destroy(&g);
    }
    gpp_profile_destroy(&prof);
}

/* CANDLE-Uno, 8 GPUs, b = 512: the concat feeds a layer worth almost two
 * branches, so the best plan cuts through a branch at the join (the join
 * split); its estimate beats SPP's chain. */
static void t_join_split_candle(void)
{
    gpp_graph_t *g1, *g2;
    gpp_cost_t *c1, *c2;
    gpp_plan_t *a = s_plan_zoo("candle_uno", 8, 8192, 512, 0, &g1, &c1);
    gpp_plan_t *b = s_plan_zoo("candle_uno", 8, 8192, 512, 1, &g2, &c2);
    if (a && b) {
        int split = 0; /* a feature branch whose ops lie in two stages */
        for (int br = 0; br < 7 && !split; br++) {
            char pre[16];
            snprintf(pre, sizeof pre, "feat%d.", br);
            int first = -1;
            for (int v = 0; v < g1->n_ops; v++)
                if (!strncmp(g1->ops[v].name, pre, strlen(pre))) {
                    int st = a->stage_of_op[v];
                    if (first < 0)
                        first = st;
                    split |= st != first;
                }
        }
        printf("  candle_uno 8 dev b=512: gpp %d stages depth %d est %.2f ms (branch split: %s); "
               "spp %d stages depth %d est %.2f ms\n",
               a->n_stages, a->depth, a->iteration_ms, split ? "yes" : "no", b->n_stages, b->depth,
               b->iteration_ms);
        GPP_EXPECT(split);
        GPP_EXPECT(a->iteration_ms <= b->iteration_ms * (1 + 1e-9));
    }
    gpp_plan_destroy(&a), gpp_plan_destroy(&b);
    gpp_cost_destroy(&c1), gpp_cost_destroy(&c2);
    gpp_graph_destroy(&g1), gpp_graph_destroy(&g2);
}

/* DLRM on 16 and 32 GPUs: the spare devices the DP leaves go where an extra
 * replica lowers the refined estimate; every GPU ends up used. */
static void t_leftover_devices(void)
{
    int devs[] = {16, 32}, batch[] = {1024, 2048};
    for (int i = 0; i < 2; i++) {
        gpp_graph_t *g;
        gpp_cost_t *c;
        gpp_plan_t *p = s_plan_zoo("dlrm", devs[i], batch[i], 0, 0, &g, &c);
        if (p) {
            int used = 0;
            for (int s = 0; s < p->n_stages; s++)
                used += p->stages[s].devices;
            printf("  dlrm %d dev: %d stages, %d devices used\n", devs[i], p->n_stages, used);
            GPP_EXPECT(used == devs[i]);
        }
        gpp_plan_destroy(&p);
        gpp_cost_destroy(&c);
        gpp_graph_destroy(&g);
    }
}

static const gpp_test_case_t cases[] = {
    {"edge_cases", t_edge_cases},
    {"compute_inflight_rows", t_compute_inflight_rows},
    {"random_vs_bruteforce", t_random_vs_bruteforce},
    {"chain_gpp_equals_spp", t_chain_gpp_equals_spp},
    {"inflight_rule_default", t_inflight_rule_default},
    {"generalized_plans", t_generalized_plans},
    {"memory_infeasible", t_memory_infeasible},
    {"gpp_vs_spp_mmt", t_gpp_not_worse_than_spp_mmt},
    {"join_split_candle", t_join_split_candle},
    {"leftover_devices", t_leftover_devices},
    {"gpp_contains_spp", t_gpp_contains_spp},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
