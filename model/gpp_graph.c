/* gpp_graph: model graph IR — construction, validation; every op's shape
 * and figures come from the op table (gpp_optable.c). */
#include "model/gpp_graph.h"
#include "model/gpp_optable.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

gpp_graph_t *gpp_graph_new(const char *name)
{
    gpp_graph_t *g = gpp_xcalloc(1, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name ? name : "graph");
    snprintf(g->spec, sizeof g->spec, "%s", g->name);
    return g;
}

void gpp_graph_destroy(gpp_graph_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_graph_t *g = *self_p;
    for (int i = 0; i < g->n_ops; i++) {
        free(g->ops[i].inputs);
        free(g->ops[i].outputs);
    }
    if (g->init_weights) {
        for (int64_t i = 0; i < (int64_t)g->n_ops * GPP_GRAPH_PARAM_SLOTS; i++)
            free(g->init_weights[i]);
        free(g->init_weights);
    }
    free(g->ops);
    free(g);
    *self_p = NULL;
}

const float *gpp_graph_init_weight(const gpp_graph_t *g, int op, int k)
{
    if (!g->init_weights || op < 0 || op >= g->n_ops || k < 0 || k >= GPP_GRAPH_PARAM_SLOTS)
        return NULL;
    return g->init_weights[(int64_t)op * GPP_GRAPH_PARAM_SLOTS + k];
}

int gpp_graph_add(gpp_graph_t *g, gpp_op_type_t type, const char *name, int n_inputs,
                  const int *inputs)
{
    assert(type >= 0 && type < GPP_OP__COUNT);
    assert(n_inputs >= 0);
    if (g->n_ops == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->ops = gpp_xrealloc(g->ops, (size_t)g->cap * sizeof *g->ops);
    }
    gpp_op_t *op = &g->ops[g->n_ops];
    memset(op, 0, sizeof *op);
    op->id = g->n_ops;
    op->type = type;
    snprintf(op->name, sizeof op->name, "%s", name);
    op->n_inputs = n_inputs;
    op->inputs = gpp_xcalloc((size_t)(n_inputs ? n_inputs : 1), sizeof(int));
    if (n_inputs)
        memcpy(op->inputs, inputs, (size_t)n_inputs * sizeof(int));
    op->rows = 1;
    g->finalized = 0;
    return g->n_ops++;
}

gpp_op_t *gpp_graph_op(gpp_graph_t *g, int id)
{
    assert(id >= 0 && id < g->n_ops);
    return &g->ops[id];
}

int gpp_graph_input(gpp_graph_t *g, const char *name, int64_t rows, int64_t cols)
{
    int id = gpp_graph_add(g, GPP_OP_INPUT, name, 0, NULL);
    g->ops[id].rows = rows;
    g->ops[id].cols = cols;
    g->ops[id].input_kind = GPP_INPUT_DENSE;
    return id;
}

int gpp_graph_input_indices(gpp_graph_t *g, const char *name, int64_t bag, int64_t table_rows)
{
    int id = gpp_graph_add(g, GPP_OP_INPUT, name, 0, NULL);
    g->ops[id].rows = 1;
    g->ops[id].cols = bag;
    g->ops[id].input_kind = GPP_INPUT_INDICES;
    g->ops[id].table_rows = table_rows;
    return id;
}

int gpp_graph_linear(gpp_graph_t *g, const char *name, int in, int64_t out_features, int bias)
{
    int id = gpp_graph_add(g, GPP_OP_LINEAR, name, 1, &in);
    g->ops[id].out_features = out_features;
    g->ops[id].bias = bias;
    return id;
}

int gpp_graph_unary(gpp_graph_t *g, gpp_op_type_t type, const char *name, int in)
{
    return gpp_graph_add(g, type, name, 1, &in);
}

int gpp_graph_attention(gpp_graph_t *g, const char *name, int in, int heads)
{
    int id = gpp_graph_add(g, GPP_OP_ATTENTION, name, 1, &in);
    g->ops[id].heads = heads;
    return id;
}

int gpp_graph_embedding_bag(gpp_graph_t *g, const char *name, int in, int64_t table_rows,
                            int64_t dim)
{
    int id = gpp_graph_add(g, GPP_OP_EMBEDDING_BAG, name, 1, &in);
    g->ops[id].table_rows = table_rows;
    g->ops[id].dim = dim;
    return id;
}

int gpp_graph_concat(gpp_graph_t *g, const char *name, int n, const int *ins)
{
    return gpp_graph_add(g, GPP_OP_CONCAT, name, n, ins);
}

int gpp_graph_add2(gpp_graph_t *g, const char *name, int a, int b)
{
    int ins[2] = {a, b};
    return gpp_graph_add(g, GPP_OP_ADD, name, 2, ins);
}

int gpp_graph_slice(gpp_graph_t *g, const char *name, int in, int64_t start, int64_t width)
{
    int id = gpp_graph_add(g, GPP_OP_SLICE, name, 1, &in);
    g->ops[id].start = start;
    g->ops[id].width = width;
    return id;
}

int gpp_graph_reshape(gpp_graph_t *g, const char *name, int in, int64_t rows, int64_t cols)
{
    int id = gpp_graph_add(g, GPP_OP_RESHAPE, name, 1, &in);
    g->ops[id].rows = rows;
    g->ops[id].cols = cols;
    return id;
}

/* ---- validation and derived figures ---- */

static int s_cmp_name(const void *a, const void *b)
{
    const gpp_op_t *x = *(const gpp_op_t *const *)a, *y = *(const gpp_op_t *const *)b;
    return strcmp(x->name, y->name);
}

int gpp_graph_finalize(gpp_graph_t *g, gpp_err_t *err)
{
    if (g->n_ops == 0)
        return gpp_err_set(err, "graph '%s' has no ops", g->name);
    for (int i = 0; i < g->n_ops; i++) {
        gpp_op_t *op = &g->ops[i];
        if (!op->name[0])
            return gpp_err_set(err, "op %d has an empty name", i);
        for (int k = 0; k < op->n_inputs; k++) {
            int in = op->inputs[k];
            if (in < 0 || in >= i)
                return gpp_err_set(err,
                                   "op %d '%s': input %d refers to op %d, which is not an "
                                   "earlier op (ops must be in topological order)",
                                   i, op->name, k, in);
        }
        if (gpp_op_derive(g, op, err))
            return -1;
    }
    /* unique names */
    gpp_op_t **byname = gpp_xcalloc((size_t)g->n_ops, sizeof *byname);
    for (int i = 0; i < g->n_ops; i++)
        byname[i] = &g->ops[i];
    qsort(byname, (size_t)g->n_ops, sizeof *byname, s_cmp_name);
    for (int i = 1; i < g->n_ops; i++)
        if (strcmp(byname[i]->name, byname[i - 1]->name) == 0) {
            int a = byname[i - 1]->id, b = byname[i]->id;
            free(byname);
            return gpp_err_set(err, "ops %d and %d share the name '%s'; names must be unique",
                               a, b, g->ops[a].name);
        }
    free(byname);
    /* consumers */
    int *count = gpp_xcalloc((size_t)g->n_ops, sizeof *count);
    for (int i = 0; i < g->n_ops; i++)
        for (int k = 0; k < g->ops[i].n_inputs; k++)
            count[g->ops[i].inputs[k]]++;
    for (int i = 0; i < g->n_ops; i++) {
        free(g->ops[i].outputs);
        g->ops[i].outputs = gpp_xcalloc((size_t)(count[i] ? count[i] : 1), sizeof(int));
        g->ops[i].n_outputs = 0;
    }
    for (int i = 0; i < g->n_ops; i++)
        for (int k = 0; k < g->ops[i].n_inputs; k++) {
            gpp_op_t *p = &g->ops[g->ops[i].inputs[k]];
            /* an op may read the same producer twice (add(x, x)): list it once */
            if (p->n_outputs && p->outputs[p->n_outputs - 1] == i)
                continue;
            p->outputs[p->n_outputs++] = i;
        }
    free(count);
    /* what an op keeps for its backward depends on its consumers */
    for (int i = 0; i < g->n_ops; i++)
        g->ops[i].stash_bytes = gpp_op_stash_bytes(g, &g->ops[i]);
    g->finalized = 1;
    return 0;
}

int64_t gpp_graph_params(const gpp_graph_t *g)
{
    int64_t n = 0;
    for (int i = 0; i < g->n_ops; i++)
        n += g->ops[i].params;
    return n;
}

int gpp_graph_count_sinks(const gpp_graph_t *g)
{
    int n = 0;
    for (int i = 0; i < g->n_ops; i++)
        n += g->ops[i].n_outputs == 0;
    return n;
}
