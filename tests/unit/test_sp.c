/* test_sp: series-parallel trees. Zoo models decompose without added
 * dependencies; non-SP graphs ("N", crossing ladders, random DAGs) are made
 * SP by adding dependencies only. gpp_sp_check verifies every op appears
 * once and every edge is ordered by a SERIES lowest common ancestor; the
 * tests also check it independently through the SP-closure reachability. */
#include <stdint.h>
#include <stdlib.h>

#include "tests/gpp_test.h"
#include "planner/gpp_sp.h"

static gpp_graph_t *s_opaque_graph(int n, const int (*edges)[2], int n_edges)
{
    gpp_graph_t *g = gpp_graph_new("t");
    for (int v = 0; v < n; v++) {
        int ins[16], k = 0;
        for (int e = 0; e < n_edges; e++)
            if (edges[e][1] == v)
                ins[k++] = edges[e][0];
        char name[16];
        snprintf(name, sizeof name, "v%d", v);
        int id = gpp_graph_add(g, GPP_OP_OPAQUE, name, k, ins);
        gpp_graph_op(g, id)->out_bytes = 4;
        gpp_graph_op(g, id)->rows = 1;
        gpp_graph_op(g, id)->cols = 1;
    }
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    return g;
}

/* Independent check: ancestors in the tree order = positions; every edge
 * u -> v must have pos(u) < pos(v) and the two leaves must not sit in
 * different branches of one PARALLEL node. Also each op exactly once. */
static void s_check_tree(const gpp_sp_t *t, const gpp_graph_t *g)
{
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_sp_check(t, g, &err) == 0, "%s", err.msg);
    int *count = calloc((size_t)g->n_ops, sizeof(int));
    for (int v = 0; v < t->n_nodes; v++)
        if (t->nodes[v].kind == GPP_SP_LEAF)
            count[t->nodes[v].op]++;
    for (int i = 0; i < g->n_ops; i++)
        GPP_EXPECT_MSG(count[i] == 1, "op %d appears %d times", i, count[i]);
    free(count);
    for (int v = 0; v < g->n_ops; v++)
        for (int k = 0; k < g->ops[v].n_inputs; k++) {
            int u = g->ops[v].inputs[k];
            GPP_EXPECT(t->pos_of[u] < t->pos_of[v]);
            for (int p = 0; p < t->n_nodes; p++) {
                const gpp_sp_node_t *n = &t->nodes[p];
                if (n->kind != GPP_SP_PARALLEL)
                    continue;
                int bu = -1, bv = -1;
                for (int c = 0; c < n->n_children; c++) {
                    const gpp_sp_node_t *ch = &t->nodes[n->children[c]];
                    if (ch->first <= t->pos_of[u] && t->pos_of[u] <= ch->last)
                        bu = c;
                    if (ch->first <= t->pos_of[v] && t->pos_of[v] <= ch->last)
                        bv = c;
                }
                GPP_EXPECT_MSG(!(bu >= 0 && bv >= 0 && bu != bv),
                               "edge %d -> %d crosses branches of a parallel node", u, v);
            }
        }
}

static int s_count(const gpp_sp_t *t, gpp_sp_kind_t k)
{
    int c = 0;
    for (int v = 0; v < t->n_nodes; v++)
        c += t->nodes[v].kind == k;
    return c;
}

static void t_zoo(void)
{
    const char *specs[] = {
        "mmt", "dlrm", "candle_uno", "transformer", "case_study", "mmt:branches=64,layers=2", NULL};
    for (int i = 0; specs[i]; i++) {
        gpp_err_t err = {{0}};
        gpp_graph_t *g = gpp_zoo_build(specs[i], &err);
        GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
        if (!g)
            continue;
        gpp_sp_t *t = gpp_sp_build(g, &err);
        GPP_EXPECT_MSG(t != NULL, "%s: %s", specs[i], err.msg);
        if (t) {
            s_check_tree(t, g);
            GPP_EXPECT_MSG(t->added_cuts == 0, "%s: %d cuts", specs[i], t->added_cuts);
            printf("  %-26s %5d ops: %4d series, %3d parallel nodes\n", specs[i], g->n_ops,
                   s_count(t, GPP_SP_SERIES), s_count(t, GPP_SP_PARALLEL));
        }
        gpp_sp_destroy(&t);
        gpp_graph_destroy(&g);
    }
}

static void t_mmt_shape(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=3,layers=1", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_sp_t *t = gpp_sp_build(g, &err);
    /* root: SERIES[PARALLEL(3 branches), concat, head, loss]; each branch a
       series of its ops (residual adds lifted into the series) */
    const gpp_sp_node_t *r = &t->nodes[t->root];
    GPP_EXPECT(r->kind == GPP_SP_SERIES && r->n_children == 4);
    const gpp_sp_node_t *p = &t->nodes[r->children[0]];
    GPP_EXPECT(p->kind == GPP_SP_PARALLEL && p->n_children == 3);
    for (int c = 0; c < p->n_children; c++) {
        const gpp_sp_node_t *b = &t->nodes[p->children[c]];
        GPP_EXPECT(b->kind == GPP_SP_SERIES && b->n_children == b->last - b->first + 1);
    }
    GPP_EXPECT(strcmp(g->ops[t->op_at[t->nodes[r->children[1]].first]].name, "concat") == 0);
    gpp_sp_destroy(&t);
    gpp_graph_destroy(&g);
}

static void t_residual(void)
{
    /* x -> ln -> attn -> add(x, attn): SERIES[x, ln, attn, add] */
    const int e[][2] = {{0, 1}, {1, 2}, {0, 3}, {2, 3}};
    gpp_graph_t *g = s_opaque_graph(4, e, 4);
    gpp_err_t err = {{0}};
    gpp_sp_t *t = gpp_sp_build(g, &err);
    s_check_tree(t, g);
    GPP_EXPECT(t->nodes[t->root].kind == GPP_SP_SERIES && t->nodes[t->root].n_children == 4);
    GPP_EXPECT(t->added_cuts == 0);
    gpp_sp_destroy(&t);
    gpp_graph_destroy(&g);
}

static void t_non_sp(void)
{
    /* the "N": a->c, a->d, b->d with two sources (a=0, b=1, c=2, d=3) */
    const int n_e[][2] = {{0, 2}, {0, 3}, {1, 3}};
    /* a crossing ladder: two chains with cross edges both ways in time */
    const int l_e[][2] = {{0, 2}, {2, 4}, {1, 3}, {3, 5}, {0, 3}, {1, 4}, {2, 5}};
    /* two sources and two sinks, fork without a join */
    const int f_e[][2] = {{0, 2}, {1, 2}, {2, 3}, {2, 4}};
    struct {
        const int (*e)[2];
        int n, ne;
        const char *name;
    } cases[] = {{n_e, 4, 3, "N"}, {l_e, 6, 7, "ladder"}, {f_e, 5, 4, "multi source/sink"}};
    for (int i = 0; i < 3; i++) {
        gpp_graph_t *g = s_opaque_graph(cases[i].n, cases[i].e, cases[i].ne);
        gpp_err_t err = {{0}};
        gpp_sp_t *t = gpp_sp_build(g, &err);
        GPP_EXPECT(t != NULL);
        s_check_tree(t, g);
        printf("  %s: %d added series cut(s)\n", cases[i].name, t->added_cuts);
        gpp_sp_print(t, g, stdout);
        gpp_sp_destroy(&t);
        gpp_graph_destroy(&g);
    }
}

static void t_random(void)
{
    uint64_t x = 12345;
    int non_sp = 0;
    for (int c = 0; c < 300; c++) {
        int n = 2 + (int)(c % 24);
        int(*e)[2] = calloc((size_t)n * 3, sizeof *e);
        int ne = 0;
        for (int v = 1; v < n; v++)
            for (int k = 0; k < 3; k++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                if ((x >> 33) % 3 == 0)
                    continue;
                int u = (int)((x >> 40) % (uint64_t)v);
                int dup = 0;
                for (int j = 0; j < ne; j++)
                    dup |= e[j][0] == u && e[j][1] == v;
                if (!dup) {
                    e[ne][0] = u;
                    e[ne][1] = v;
                    ne++;
                }
            }
        gpp_graph_t *g = s_opaque_graph(n, (const int(*)[2])e, ne);
        gpp_err_t err = {{0}};
        gpp_sp_t *t = gpp_sp_build(g, &err);
        GPP_EXPECT(t != NULL);
        if (t) {
            s_check_tree(t, g);
            non_sp += t->added_cuts > 0;
        }
        gpp_sp_destroy(&t);
        gpp_graph_destroy(&g);
        free(e);
    }
    printf("  300 random DAGs (2..25 ops): %d needed added dependencies; all edges kept\n", non_sp);
}

static void t_linear(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("dlrm:dense_branches=2,sparse_branches=2", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_sp_t *t = gpp_sp_linear(g);
    s_check_tree(t, g);
    GPP_EXPECT(t->nodes[t->root].kind == GPP_SP_SERIES && t->nodes[t->root].n_children == g->n_ops);
    for (int i = 0; i < g->n_ops; i++)
        GPP_EXPECT(t->op_at[i] == i);
    gpp_sp_destroy(&t);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {
    {"zoo", t_zoo},       {"mmt_shape", t_mmt_shape}, {"residual", t_residual},
    {"non_sp", t_non_sp}, {"random", t_random},       {"linear", t_linear},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
