/* gpp_sp: series-parallel decomposition (see gpp_sp.h).
 *
 * decompose(S), S a set of ops:
 *   |S| = 1                       -> LEAF
 *   S not weakly connected        -> PARALLEL of its components
 *   S has "bottleneck" ops v (every other op of S is an ancestor or a
 *   descendant of v)              -> SERIES[seg0, v1, seg1, v2, ...] where
 *                                    seg_i = ops after v_i and before v_{i+1}
 *   else (not SP)                 -> SERIES[A, B] for the cut A = {level <= k}
 *                                    (longest-path level inside S) that keeps
 *                                    the most components in A and B; this adds
 *                                    the dependencies A -> B and no edge is lost.
 * Reachability inside S comes from whole-graph ancestor/descendant bitsets
 * masked by S. Nested SERIES/PARALLEL of the same kind are flattened. */
#include "planner/gpp_sp.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const gpp_graph_t *g;
    int W;          /* 64-bit words per bitset */
    uint64_t *anc;  /* [n_ops][W] */
    uint64_t *desc; /* [n_ops][W] */
    uint64_t *mask; /* [W] scratch: members of the current S */
    int *mark;      /* [n_ops] scratch stamps */
    int stamp;
    int *uf;   /* [n_ops] union-find parent */
    int *cidx; /* [n_ops] component index of a root */
    gpp_sp_t *t;
    int cap_nodes;
} s_build_t;

static int s_new_node(s_build_t *b, gpp_sp_kind_t kind, int op)
{
    gpp_sp_t *t = b->t;
    if (t->n_nodes == b->cap_nodes) {
        b->cap_nodes = b->cap_nodes ? 2 * b->cap_nodes : 64;
        t->nodes = gpp_xrealloc(t->nodes, (size_t)b->cap_nodes * sizeof *t->nodes);
    }
    gpp_sp_node_t *n = &t->nodes[t->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->op = op;
    n->parent = -1;
    return t->n_nodes++;
}

/* Appends child c to node p, splicing c's children when c has p's kind. */
static void s_add_child(s_build_t *b, int p, int c)
{
    gpp_sp_t *t = b->t;
    if (t->nodes[c].kind == t->nodes[p].kind) {
        for (int i = 0; i < t->nodes[c].n_children; i++)
            s_add_child(b, p, t->nodes[c].children[i]);
        free(t->nodes[c].children);
        t->nodes[c].children = NULL;
        t->nodes[c].n_children = 0;
        t->nodes[c].kind = GPP_SP_LEAF;
        t->nodes[c].op = -2; /* dead node, dropped by s_compact */
        return;
    }
    gpp_sp_node_t *n = &t->nodes[p];
    n->children = gpp_xrealloc(n->children, (size_t)(n->n_children + 1) * sizeof(int));
    n->children[n->n_children++] = c;
}

static int s_find(int *uf, int x)
{
    while (uf[x] != x) {
        uf[x] = uf[uf[x]];
        x = uf[x];
    }
    return x;
}

/* Marks S in b->mark with a fresh stamp; returns the stamp. */
static int s_mark(s_build_t *b, const int *S, int n)
{
    int st = ++b->stamp;
    for (int i = 0; i < n; i++)
        b->mark[S[i]] = st;
    return st;
}

/* Weakly connected components of S: comp[i] = component index of S[i]
 * (numbered by smallest member). Returns the count. */
static int s_components(s_build_t *b, const int *S, int n, int *comp)
{
    int st = s_mark(b, S, n);
    for (int i = 0; i < n; i++)
        b->uf[S[i]] = S[i];
    for (int i = 0; i < n; i++) {
        const gpp_op_t *o = &b->g->ops[S[i]];
        for (int k = 0; k < o->n_inputs; k++)
            if (b->mark[o->inputs[k]] == st) {
                int x = s_find(b->uf, S[i]), y = s_find(b->uf, o->inputs[k]);
                if (x != y)
                    b->uf[x > y ? x : y] = x < y ? x : y;
            }
    }
    int nc = 0;
    for (int i = 0; i < n; i++) /* roots first seen at their smallest member */
        if (s_find(b->uf, S[i]) == S[i])
            b->cidx[S[i]] = nc++;
    for (int i = 0; i < n; i++)
        comp[i] = b->cidx[s_find(b->uf, S[i])];
    return nc;
}

static inline int s_pop(uint64_t x) /* SWAR: no libgcc call without -mpopcnt */
{
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (int)((x * 0x0101010101010101ull) >> 56);
}

/* popcount(a & m) over words w0..w1 (the span of the set's ids) */
static int s_popcount_and(const uint64_t *a, const uint64_t *m, int w0, int w1)
{
    int c = 0;
    for (int w = w0; w <= w1; w++)
        c += s_pop(a[w] & m[w]);
    return c;
}

static int s_decompose(s_build_t *b, const int *S, int n);

/* Decomposes the members of S selected by sel[i] == want, in S's order. */
static int s_decompose_sel(s_build_t *b, const int *S, int n, const int *sel, int want)
{
    int *sub = gpp_xcalloc((size_t)n, sizeof(int));
    int m = 0;
    for (int i = 0; i < n; i++)
        if (sel[i] == want)
            sub[m++] = S[i];
    int node = s_decompose(b, sub, m);
    free(sub);
    return node;
}

static int s_decompose(s_build_t *b, const int *S, int n)
{
    assert(n >= 1);
    if (n == 1)
        return s_new_node(b, GPP_SP_LEAF, S[0]);
    int *tag = gpp_xcalloc((size_t)n, sizeof(int));
    int node;
    int nc = s_components(b, S, n, tag);
    if (nc > 1) {
        node = s_new_node(b, GPP_SP_PARALLEL, -1);
        for (int c = 0; c < nc; c++) {
            int ch = s_decompose_sel(b, S, n, tag, c);
            s_add_child(b, node, ch);
        }
        free(tag);
        return node;
    }
    /* connected: bottleneck ops */
    const int W = b->W;
    memset(b->mask + (S[0] >> 6), 0,
           (size_t)((S[n - 1] >> 6) - (S[0] >> 6) + 1) * sizeof(uint64_t));
    for (int i = 0; i < n; i++)
        b->mask[S[i] >> 6] |= 1ull << (S[i] & 63);
    int *bott = gpp_xcalloc((size_t)n, sizeof(int));
    int nb = 0;
    for (int i = 0; i < n; i++) {
        int v = S[i];
        int a = s_popcount_and(&b->anc[(size_t)v * W], b->mask, S[0] >> 6, S[n - 1] >> 6);
        int d = s_popcount_and(&b->desc[(size_t)v * W], b->mask, S[0] >> 6, S[n - 1] >> 6);
        if (a + d + 1 == n)
            bott[nb++] = v; /* ascending ids: ancestors come first */
    }
    node = s_new_node(b, GPP_SP_SERIES, -1);
    if (nb > 0) {
        /* tag[i] = 2*(bottlenecks S[i] descends from) for segment members,
           2*j+1 for the j-th bottleneck. Every member is comparable with
           every bottleneck and ids are topological, so S[i] descends from
           exactly the bottlenecks with smaller ids: tags never decrease
           along S, and each child is a contiguous run of S. */
        for (int i = 0, j = 0; i < n; i++) {
            while (j < nb && bott[j] < S[i])
                j++;
            tag[i] = j < nb && bott[j] == S[i] ? 2 * j + 1 : 2 * j;
        }
        for (int i = 0; i < n;) {
            int e = i + 1;
            while (e < n && tag[e] == tag[i])
                e++;
            s_add_child(b, node, s_decompose(b, S + i, e - i));
            i = e;
        }
    } else {
        /* not series-parallel here: cut by longest-path level */
        int st = s_mark(b, S, n);
        int maxlev = 0;
        int *lev = gpp_xcalloc((size_t)b->g->n_ops, sizeof(int));
        for (int i = 0; i < n; i++) { /* S ascending = topological */
            const gpp_op_t *o = &b->g->ops[S[i]];
            int l = 0;
            for (int k = 0; k < o->n_inputs; k++)
                if (b->mark[o->inputs[k]] == st && lev[o->inputs[k]] + 1 > l)
                    l = lev[o->inputs[k]] + 1;
            lev[S[i]] = l;
            if (l > maxlev)
                maxlev = l;
        }
        assert(maxlev >= 1);
        int best_k = 0, best_score = -1, best_bal = n + 1;
        int *side = gpp_xcalloc((size_t)n, sizeof(int));
        /* components of A = {level <= k} and of B = {level > k} for every k,
           by adding ops level by level to a union-find (one pass each way) */
        int *by_lev = gpp_xcalloc((size_t)n, sizeof(int)),
            *start = gpp_xcalloc((size_t)maxlev + 2, sizeof(int));
        int *comps_a = gpp_xcalloc((size_t)maxlev + 1, sizeof(int)),
            *comps_b = gpp_xcalloc((size_t)maxlev + 1, sizeof(int));
        for (int i = 0; i < n; i++)
            start[lev[S[i]] + 1]++;
        for (int k = 0; k <= maxlev; k++)
            start[k + 1] += start[k];
        for (int i = 0; i < n; i++)
            by_lev[start[lev[S[i]]]++] = S[i];
        for (int k = maxlev; k >= 0; k--) /* restore starts */
            start[k + 1] = start[k];
        start[0] = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int i = 0; i < n; i++)
                b->uf[S[i]] = S[i];
            int comps = 0;
            for (int step = 0; step <= maxlev; step++) {
                int k = pass == 0 ? step : maxlev - step;
                for (int j = start[k]; j < start[k + 1]; j++) {
                    int v = by_lev[j];
                    const gpp_op_t *o = &b->g->ops[v];
                    int deg = pass == 0 ? o->n_inputs : o->n_outputs;
                    const int *nb = pass == 0 ? o->inputs : o->outputs;
                    comps++;
                    for (int e = 0; e < deg; e++) {
                        int u = nb[e];
                        if (b->mark[u] != st)
                            continue; /* not in S; in S it was added before */
                        int x = s_find(b->uf, v), y = s_find(b->uf, u);
                        if (x != y) {
                            b->uf[x > y ? x : y] = x < y ? x : y;
                            comps--;
                        }
                    }
                }
                if (pass == 0)
                    comps_a[k] = comps; /* A = levels <= k */
                else if (k >= 1)
                    comps_b[k - 1] = comps; /* B = levels >= k */
            }
        }
        for (int k = 0; k < maxlev; k++) {
            int ca = comps_a[k], cb = comps_b[k];
            int na = start[k + 1], bal = abs(na - (n - na));
            if (ca + cb > best_score || (ca + cb == best_score && bal < best_bal))
                best_k = k, best_score = ca + cb, best_bal = bal;
        }
        free(by_lev), free(start), free(comps_a), free(comps_b);
        for (int i = 0; i < n; i++)
            side[i] = lev[S[i]] > best_k;
        b->t->added_cuts++;
        s_add_child(b, node, s_decompose_sel(b, S, n, side, 0));
        s_add_child(b, node, s_decompose_sel(b, S, n, side, 1));
        free(lev), free(side);
    }
    free(bott);
    free(tag);
    return node;
}

/* Drops dead nodes, renumbers, sets parents, positions and ranges. */
static void s_finish(gpp_sp_t *t, int root)
{
    int *newid = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    int *stack = gpp_xcalloc((size_t)t->n_nodes + 1, sizeof(int));
    int *order = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    int no = 0, sp = 0;
    /* preorder, children in order */
    stack[sp++] = root;
    while (sp) {
        int v = stack[--sp];
        order[no++] = v;
        for (int i = t->nodes[v].n_children - 1; i >= 0; i--)
            stack[sp++] = t->nodes[v].children[i];
    }
    for (int i = 0; i < t->n_nodes; i++)
        newid[i] = -1;
    for (int i = 0; i < no; i++)
        newid[order[i]] = i;
    gpp_sp_node_t *nn = gpp_xcalloc((size_t)no, sizeof *nn);
    for (int i = 0; i < no; i++) {
        nn[i] = t->nodes[order[i]];
        for (int c = 0; c < nn[i].n_children; c++)
            nn[i].children[c] = newid[nn[i].children[c]];
    }
    for (int i = 0; i < t->n_nodes; i++)
        if (newid[i] < 0)
            free(t->nodes[i].children);
    free(t->nodes);
    t->nodes = nn;
    t->n_nodes = no;
    t->root = 0;
    t->nodes[0].parent = -1;
    for (int i = 0; i < no; i++)
        for (int c = 0; c < nn[i].n_children; c++)
            nn[nn[i].children[c]].parent = i;
    /* preorder visits leaves left to right: positions */
    int pos = 0;
    for (int i = 0; i < no; i++)
        if (nn[i].kind == GPP_SP_LEAF) {
            t->op_at[pos] = nn[i].op;
            t->pos_of[nn[i].op] = pos;
            nn[i].first = nn[i].last = pos++;
        }
    for (int i = no - 1; i >= 0; i--)
        if (nn[i].kind != GPP_SP_LEAF) {
            nn[i].first = nn[nn[i].children[0]].first;
            nn[i].last = nn[nn[i].children[nn[i].n_children - 1]].last;
        }
    free(newid), free(stack), free(order);
}

gpp_sp_t *gpp_sp_build(const gpp_graph_t *g, gpp_err_t *err)
{
    if (!g->finalized || g->n_ops < 1) {
        gpp_err_set(err, "sp: graph '%s' must be finalized and non-empty", g->name);
        return NULL;
    }
    int n = g->n_ops, W = (n + 63) / 64;
    s_build_t b = {0};
    b.g = g;
    b.W = W;
    b.anc = gpp_xcalloc((size_t)n * W, sizeof(uint64_t));
    b.desc = gpp_xcalloc((size_t)n * W, sizeof(uint64_t));
    b.mask = gpp_xcalloc((size_t)W, sizeof(uint64_t));
    b.mark = gpp_xcalloc((size_t)n, sizeof(int));
    b.uf = gpp_xcalloc((size_t)n, sizeof(int));
    b.cidx = gpp_xcalloc((size_t)n, sizeof(int));
    for (int v = 0; v < n; v++) {
        const gpp_op_t *o = &g->ops[v];
        uint64_t *a = &b.anc[(size_t)v * W];
        for (int k = 0; k < o->n_inputs; k++) {
            int p = o->inputs[k];
            const uint64_t *ap = &b.anc[(size_t)p * W];
            for (int w = 0; w < W; w++)
                a[w] |= ap[w];
            a[p >> 6] |= 1ull << (p & 63);
        }
    }
    for (int v = n - 1; v >= 0; v--) {
        const gpp_op_t *o = &g->ops[v];
        uint64_t *d = &b.desc[(size_t)v * W];
        for (int k = 0; k < o->n_outputs; k++) {
            int c = o->outputs[k];
            const uint64_t *dc = &b.desc[(size_t)c * W];
            for (int w = 0; w < W; w++)
                d[w] |= dc[w];
            d[c >> 6] |= 1ull << (c & 63);
        }
    }
    gpp_sp_t *t = gpp_xcalloc(1, sizeof *t);
    t->n_ops = n;
    t->op_at = gpp_xcalloc((size_t)n, sizeof(int));
    t->pos_of = gpp_xcalloc((size_t)n, sizeof(int));
    b.t = t;
    int *all = gpp_xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++)
        all[i] = i;
    int root = s_decompose(&b, all, n);
    free(all);
    s_finish(t, root);
    free(b.anc), free(b.desc), free(b.mask), free(b.mark), free(b.uf), free(b.cidx);
    return t;
}

gpp_sp_t *gpp_sp_linear(const gpp_graph_t *g)
{
    int n = g->n_ops;
    assert(n >= 1);
    gpp_sp_t *t = gpp_xcalloc(1, sizeof *t);
    t->n_ops = n;
    t->op_at = gpp_xcalloc((size_t)n, sizeof(int));
    t->pos_of = gpp_xcalloc((size_t)n, sizeof(int));
    s_build_t b = {0};
    b.t = t;
    int root;
    if (n == 1) {
        root = s_new_node(&b, GPP_SP_LEAF, 0);
    } else {
        root = s_new_node(&b, GPP_SP_SERIES, -1);
        for (int i = 0; i < n; i++)
            s_add_child(&b, root, s_new_node(&b, GPP_SP_LEAF, i));
    }
    s_finish(t, root);
    return t;
}

void gpp_sp_destroy(gpp_sp_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_sp_t *t = *self_p;
    for (int i = 0; i < t->n_nodes; i++)
        free(t->nodes[i].children);
    free(t->nodes);
    free(t->op_at);
    free(t->pos_of);
    free(t);
    *self_p = NULL;
}

int gpp_sp_check(const gpp_sp_t *t, const gpp_graph_t *g, gpp_err_t *err)
{
    if (t->n_ops != g->n_ops)
        return gpp_err_set(err, "sp: tree has %d ops, graph %d", t->n_ops, g->n_ops);
    int *leaf = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    int *depth = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    int rc = 0;
    for (int i = 0; i < g->n_ops; i++)
        leaf[i] = -1;
    for (int v = 0; v < t->n_nodes; v++) {
        const gpp_sp_node_t *n = &t->nodes[v];
        depth[v] = n->parent >= 0 ? depth[n->parent] + 1 : 0; /* preorder: parent first */
        if (n->parent >= 0 && n->parent >= v) {
            rc = gpp_err_set(err, "sp: node %d precedes its parent", v);
            goto done;
        }
        if (n->kind == GPP_SP_LEAF) {
            if (n->op < 0 || n->op >= g->n_ops || leaf[n->op] >= 0) {
                rc = gpp_err_set(err, "sp: leaf %d holds op %d twice or out of range", v, n->op);
                goto done;
            }
            leaf[n->op] = v;
            if (t->op_at[n->first] != n->op || t->pos_of[n->op] != n->first) {
                rc = gpp_err_set(err, "sp: op %d position tables disagree", n->op);
                goto done;
            }
        } else {
            if (n->n_children < 2) {
                rc = gpp_err_set(err, "sp: inner node %d has %d children", v, n->n_children);
                goto done;
            }
            int expect = n->first;
            for (int c = 0; c < n->n_children; c++) {
                const gpp_sp_node_t *ch = &t->nodes[n->children[c]];
                if (ch->kind == n->kind || ch->first != expect || ch->parent != v) {
                    rc = gpp_err_set(err, "sp: node %d child %d breaks kind/range/parent rules", v,
                                     c);
                    goto done;
                }
                expect = ch->last + 1;
            }
            if (expect != n->last + 1) {
                rc = gpp_err_set(err, "sp: node %d range does not match its children", v);
                goto done;
            }
        }
    }
    for (int i = 0; i < g->n_ops; i++)
        if (leaf[i] < 0) {
            rc = gpp_err_set(err, "sp: op %d '%s' is in no leaf", i, g->ops[i].name);
            goto done;
        }
    for (int v = 0; v < g->n_ops; v++)
        for (int k = 0; k < g->ops[v].n_inputs; k++) {
            int u = g->ops[v].inputs[k];
            int a = leaf[u], b = leaf[v], ca = -1, cb = -1;
            while (depth[a] > depth[b])
                ca = a, a = t->nodes[a].parent;
            while (depth[b] > depth[a])
                cb = b, b = t->nodes[b].parent;
            while (a != b)
                ca = a, a = t->nodes[a].parent, cb = b, b = t->nodes[b].parent;
            /* a is the LCA; ca, cb its children on the two paths */
            int ia = -1, ib = -1;
            for (int c = 0; c < t->nodes[a].n_children; c++) {
                if (t->nodes[a].children[c] == ca)
                    ia = c;
                if (t->nodes[a].children[c] == cb)
                    ib = c;
            }
            if (t->nodes[a].kind != GPP_SP_SERIES || ia < 0 || ib < 0 || ia >= ib) {
                rc = gpp_err_set(err, "sp: edge %s -> %s is not ordered by a series node",
                                 g->ops[u].name, g->ops[v].name);
                goto done;
            }
        }
done:
    free(leaf);
    free(depth);
    return rc;
}

static void s_print(const gpp_sp_t *t, const gpp_graph_t *g, int v, int indent, FILE *out)
{
    const gpp_sp_node_t *n = &t->nodes[v];
    if (n->kind == GPP_SP_LEAF) {
        fprintf(out, "%*s%s\n", indent, "", g->ops[n->op].name);
        return;
    }
    fprintf(out, "%*s%s [%d..%d]\n", indent, "", n->kind == GPP_SP_SERIES ? "S" : "P", n->first,
            n->last);
    for (int c = 0; c < n->n_children; c++)
        s_print(t, g, n->children[c], indent + 2, out);
}

void gpp_sp_print(const gpp_sp_t *t, const gpp_graph_t *g, FILE *out)
{
    s_print(t, g, t->root, 0, out);
}
