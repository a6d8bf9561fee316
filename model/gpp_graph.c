/* gpp_graph: model graph IR — construction, validation, derived figures. */
#include "model/gpp_graph.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static const char *s_type_names[GPP_OP__COUNT] = {
    "input",      "linear", "relu",   "gelu",     "layernorm", "attention",
    "embedding_bag", "concat", "add", "loss_mse", "loss_ce",   "opaque"};

const char *gpp_op_type_name(gpp_op_type_t t)
{
    return (t >= 0 && t < GPP_OP__COUNT) ? s_type_names[t] : "?";
}

int gpp_op_type_parse(const char *name)
{
    for (int t = 0; t < GPP_OP__COUNT; t++)
        if (strcmp(name, s_type_names[t]) == 0)
            return t;
    return -1;
}

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
    free(g->ops);
    free(g);
    *self_p = NULL;
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

/* ---- validation and derived figures ---- */

static int s_expect_arity(const gpp_op_t *op, int lo, int hi, gpp_err_t *err)
{
    if (op->n_inputs < lo || op->n_inputs > hi) {
        if (lo == hi)
            return gpp_err_set(err, "op %d '%s' (%s): expected %d input(s), got %d", op->id,
                               op->name, gpp_op_type_name(op->type), lo, op->n_inputs);
        return gpp_err_set(err, "op %d '%s' (%s): expected at least %d input(s), got %d",
                           op->id, op->name, gpp_op_type_name(op->type), lo, op->n_inputs);
    }
    return 0;
}

static int s_cmp_name(const void *a, const void *b)
{
    const gpp_op_t *x = *(const gpp_op_t *const *)a, *y = *(const gpp_op_t *const *)b;
    return strcmp(x->name, y->name);
}

/* Fills shape and figures of one op from its (already derived) inputs. */
static int s_derive(gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err)
{
    const gpp_op_t *in0 = op->n_inputs ? &g->ops[op->inputs[0]] : NULL;
    const char *tn = gpp_op_type_name(op->type);
    int64_t r, c, ci;
    if (op->type != GPP_OP_INPUT && op->type != GPP_OP_OPAQUE && op->type != GPP_OP_CONCAT &&
        op->type != GPP_OP_EMBEDDING_BAG) {
        for (int i = 0; i < op->n_inputs; i++)
            if (g->ops[op->inputs[i]].type == GPP_OP_INPUT &&
                g->ops[op->inputs[i]].input_kind == GPP_INPUT_INDICES)
                return gpp_err_set(err,
                                   "op %d '%s' (%s): input '%s' holds embedding indices; only "
                                   "embedding_bag can consume it",
                                   op->id, op->name, tn, g->ops[op->inputs[i]].name);
    }
    switch (op->type) {
    case GPP_OP_INPUT:
        if (s_expect_arity(op, 0, 0, err))
            return -1;
        if (op->rows < 1 || op->cols < 1)
            return gpp_err_set(err, "op %d '%s' (input): rows and cols must be >= 1 (got %lld x %lld)",
                               op->id, op->name, (long long)op->rows, (long long)op->cols);
        if (op->input_kind == GPP_INPUT_INDICES && op->table_rows < 1)
            return gpp_err_set(err, "op %d '%s' (input indices): table_rows must be >= 1", op->id,
                               op->name);
        op->params = 0;
        op->fwd_flops = op->bwd_flops = 0;
        op->out_bytes = op->rows * op->cols * 4;
        op->stash_bytes = 0;
        op->io_bytes = op->out_bytes; /* generated or read once */
        op->weight_io_bytes = 0;
        return 0;
    case GPP_OP_LINEAR:
        if (s_expect_arity(op, 1, 1, err))
            return -1;
        if (op->out_features < 1)
            return gpp_err_set(err, "op %d '%s' (linear): out_features must be >= 1", op->id,
                               op->name);
        r = in0->rows, ci = in0->cols, c = op->out_features;
        op->rows = r, op->cols = c;
        op->params = c * ci + (op->bias ? c : 0);
        op->fwd_flops = 2.0 * (double)(r * ci * c);
        op->bwd_flops = 4.0 * (double)(r * ci * c); /* dX and dW */
        op->stash_bytes = r * ci * 4;               /* x, for dW */
        op->io_bytes = 3 * (r * ci + r * c) * 4;
        op->weight_io_bytes = 3 * op->params * 4; /* read W fwd, read W + write dW bwd */
        break;
    case GPP_OP_RELU:
    case GPP_OP_GELU:
        if (s_expect_arity(op, 1, 1, err))
            return -1;
        r = in0->rows, c = in0->cols;
        op->rows = r, op->cols = c;
        op->fwd_flops = (op->type == GPP_OP_RELU ? 1.0 : 8.0) * (double)(r * c);
        op->bwd_flops = (op->type == GPP_OP_RELU ? 1.0 : 12.0) * (double)(r * c);
        op->stash_bytes = r * c * 4;
        op->io_bytes = 5 * r * c * 4;
        break;
    case GPP_OP_LAYERNORM:
        if (s_expect_arity(op, 1, 1, err))
            return -1;
        r = in0->rows, c = in0->cols;
        op->rows = r, op->cols = c;
        op->params = 2 * c;
        op->fwd_flops = 8.0 * (double)(r * c);
        op->bwd_flops = 12.0 * (double)(r * c);
        op->stash_bytes = r * c * 4 + 2 * r * 4; /* x, mean, rstd */
        op->io_bytes = 5 * r * c * 4;
        op->weight_io_bytes = 3 * op->params * 4;
        break;
    case GPP_OP_ATTENTION: {
        if (s_expect_arity(op, 1, 1, err))
            return -1;
        r = in0->rows, c = in0->cols;
        if (op->heads < 1 || c % op->heads != 0)
            return gpp_err_set(err,
                               "op %d '%s' (attention): heads=%d must be >= 1 and divide the "
                               "hidden size %lld",
                               op->id, op->name, op->heads, (long long)c);
        op->rows = r, op->cols = c;
        double s = (double)r, h = (double)c, H = op->heads;
        op->params = 4 * c * c + 4 * c;
        op->fwd_flops = 8.0 * s * h * h + 4.0 * s * s * h;
        op->bwd_flops = 2.0 * op->fwd_flops;
        /* x, qkv, probabilities per head, context before the output projection */
        op->stash_bytes = (int64_t)((5.0 * s * h + H * s * s) * 4.0);
        op->io_bytes = (int64_t)(3.0 * (10.0 * s * h + 4.0 * H * s * s) * 4.0);
        op->weight_io_bytes = 3 * op->params * 4;
        break;
    }
    case GPP_OP_EMBEDDING_BAG:
        if (s_expect_arity(op, 1, 1, err))
            return -1;
        if (!(in0->type == GPP_OP_INPUT && in0->input_kind == GPP_INPUT_INDICES))
            return gpp_err_set(err,
                               "op %d '%s' (embedding_bag): input '%s' must be an indices input "
                               "(input_kind \"indices\")",
                               op->id, op->name, in0->name);
        if (op->table_rows < 1 || op->dim < 1)
            return gpp_err_set(err, "op %d '%s' (embedding_bag): table_rows and dim must be >= 1",
                               op->id, op->name);
        if (in0->table_rows > op->table_rows)
            return gpp_err_set(err,
                               "op %d '%s' (embedding_bag): indices from '%s' range over %lld "
                               "rows but the table has %lld",
                               op->id, op->name, in0->name, (long long)in0->table_rows,
                               (long long)op->table_rows);
        op->rows = 1, op->cols = op->dim;
        op->params = op->table_rows * op->dim;
        op->sparse_params = 1;
        op->fwd_flops = (double)(in0->cols * op->dim);
        op->bwd_flops = (double)(in0->cols * op->dim);
        op->stash_bytes = in0->cols * 4; /* the indices */
        /* gather the bag's rows fwd; read-modify-write them bwd */
        op->io_bytes = 3 * in0->cols * op->dim * 4 + 2 * op->dim * 4;
        op->weight_io_bytes = 0;
        break;
    case GPP_OP_CONCAT:
        if (s_expect_arity(op, 1, 1 << 20, err))
            return -1;
        r = in0->rows, c = 0;
        for (int i = 0; i < op->n_inputs; i++) {
            const gpp_op_t *x = &g->ops[op->inputs[i]];
            if (x->type == GPP_OP_INPUT && x->input_kind == GPP_INPUT_INDICES)
                return gpp_err_set(err, "op %d '%s' (concat): input '%s' holds indices", op->id,
                                   op->name, x->name);
            if (x->rows != r)
                return gpp_err_set(err,
                                   "op %d '%s' (concat): input '%s' has %lld rows, input '%s' "
                                   "has %lld; concat joins features of equal rows",
                                   op->id, op->name, x->name, (long long)x->rows, in0->name,
                                   (long long)r);
            c += x->cols;
        }
        op->rows = r, op->cols = c;
        op->io_bytes = 4 * r * c * 4;
        break;
    case GPP_OP_ADD: {
        if (s_expect_arity(op, 2, 2, err))
            return -1;
        const gpp_op_t *b = &g->ops[op->inputs[1]];
        if (b->rows != in0->rows || b->cols != in0->cols)
            return gpp_err_set(err, "op %d '%s' (add): shapes differ: '%s' %lldx%lld, '%s' %lldx%lld",
                               op->id, op->name, in0->name, (long long)in0->rows,
                               (long long)in0->cols, b->name, (long long)b->rows,
                               (long long)b->cols);
        r = in0->rows, c = in0->cols;
        op->rows = r, op->cols = c;
        op->fwd_flops = (double)(r * c);
        op->io_bytes = 6 * r * c * 4;
        break;
    }
    case GPP_OP_LOSS_MSE:
    case GPP_OP_LOSS_CE:
        if (s_expect_arity(op, 1, 1, err))
            return -1;
        r = in0->rows, c = in0->cols;
        if (op->type == GPP_OP_LOSS_CE) {
            if (c < 2)
                return gpp_err_set(err, "op %d '%s' (loss_ce): needs >= 2 classes, input has %lld",
                                   op->id, op->name, (long long)c);
            op->classes = c;
        }
        op->rows = 1, op->cols = 1;
        op->fwd_flops = 5.0 * (double)(r * c);
        op->bwd_flops = 2.0 * (double)(r * c);
        op->stash_bytes = r * c * 4;
        op->io_bytes = 3 * r * c * 4;
        break;
    case GPP_OP_OPAQUE:
        /* figures were given by the profile */
        return 0;
    default:
        return gpp_err_set(err, "op %d '%s': unknown type %d", op->id, op->name, (int)op->type);
    }
    op->out_bytes = op->rows * op->cols * 4;
    return 0;
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
        if (s_derive(g, op, err))
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

double gpp_graph_flops(const gpp_graph_t *g)
{
    double f = 0;
    for (int i = 0; i < g->n_ops; i++)
        f += g->ops[i].fwd_flops + g->ops[i].bwd_flops;
    return f;
}

int gpp_graph_count_sinks(const gpp_graph_t *g)
{
    int n = 0;
    for (int i = 0; i < g->n_ops; i++)
        n += g->ops[i].n_outputs == 0;
    return n;
}
