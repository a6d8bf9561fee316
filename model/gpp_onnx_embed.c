/* gpp_onnx_embed: the ONNX importer's embeddings and pooling (see
 * gpp_onnx_imp.h): Gather of a table by integer ids, as an embedding bag
 * when a ReduceSum/ReduceMean over the bag follows or an embedding of one
 * row per id otherwise; ReduceMean/ReduceMax/ReduceSum of an activation over
 * its sequence (axis 1 of [N, S, C]) as a gpp reduce op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_onnx_imp.h"

/* Node i reduces over one axis (the attribute, or from opset 13/18 a
 * constant input): that axis, or -100 when it names several, none or a
 * non-constant. *keep: keepdims. */
static int64_t s_axis(imp_t *im, int i, int64_t *keep)
{
    const node_t *n = im->gr->node[i];
    const attr_t *a = gpp_onnx_attr(n, "axes");
    int64_t na = -1, axis = -100;
    if (gpp_onnx_attr_int(im, i, "keepdims", 1, keep) < 0)
        return -101;
    if (a) {
        na = (int64_t)a->n_ints;
        axis = na == 1 ? a->ints[0] : -100;
    } else if (n->n_input > 1 && n->input[1][0]) {
        const val_t *av = gpp_onnx_find(im, n->input[1]);
        gpp_err_t e = {{0}}, *keep_err = im->err;
        im->err = &e;
        if (av && av->kind == V_CONST && gpp_onnx_tensor_check(im, i, av->t, 0, &na) == 0 &&
            na == 1)
            axis = gpp_onnx_int_at(av->t, 0);
        im->err = keep_err;
    }
    return axis;
}

/* Whether value `name`'s one reader reduces it over axis 1 (a bag). */
static int s_bag_reader(imp_t *im, const char *name)
{
    int c;
    int64_t keep;
    if (gpp_onnx_uses(im, name, &c) != 1 || c < 0 ||
        !(gpp_onnx_is(im, c, "ReduceSum") || gpp_onnx_is(im, c, "ReduceMean")))
        return 0;
    gpp_err_t e = {{0}}, *keep_err = im->err;
    im->err = &e;
    int64_t axis = s_axis(im, c, &keep);
    im->err = keep_err;
    return axis == 1 || axis == -2;
}

/* The table's op: an embedding_bag (sum), or an embedding of `mode`. */
static int s_table_op(imp_t *im, int i, const val_t *gv, int mode, int rank)
{
    const node_t *n = im->gr->node[i];
    int64_t r = gv->t->dims[0], c = gv->t->dims[1];
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, gv->t->name ? gv->t->name : "embedding", 1, name);
    float *w = gpp_onnx_floats(im, i, gv->t, r * c);
    if (!w)
        return -1;
    int id;
    if (mode == GPP_EMBED_SUM) {
        id = gpp_graph_embedding_bag(im->g, name, gv->op, r, c);
    } else {
        id = gpp_graph_add(im->g, GPP_OP_EMBEDDING, name, 1, &gv->op);
        im->g->ops[id].table_rows = r, im->g->ops[id].dim = c, im->g->ops[id].mode = mode;
    }
    gpp_onnx_weight(im, id, 0, w);
    return gpp_onnx_out_op(im, i, n->output[0], id, rank);
}

int gpp_onnx_gather(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis, r = 0, c = 0; /* r, c set by gpp_onnx_matrix */
    if (gpp_onnx_attr_int(im, i, "axis", 0, &axis) < 0)
        return -1;
    const val_t *t = gpp_onnx_in(im, i, 0, V_CONST);
    if (!t || gpp_onnx_matrix(im, i, t, &r, &c) < 0)
        return -1;
    const val_t *ix = gpp_onnx_find(im, n->n_input > 1 ? n->input[1] : "");
    gpp_op_t *op = ix && ix->kind == V_OP ? &im->g->ops[ix->op] : NULL;
    if (!op || op->type != GPP_OP_INPUT || op->input_kind != GPP_INPUT_INDICES || axis != 0)
        return gpp_onnx_fail(im, i,
                             "gpp maps Gather only as an embedding lookup: axis 0 of a 2-d "
                             "table, indices a 2-d integer graph input [batch, ids] (for "
                             "nn.Embedding / nn.EmbeddingBag)");
    if (!op->table_rows || r < op->table_rows)
        op->table_rows = r; /* indices must be valid for every table they index */
    val_t gv = {.kind = V_GATHER, .op = ix->op, .t = t->t};
    if (!s_bag_reader(im, n->output[0])) /* nn.Embedding: a row per id, [N, L, D] */
        return s_table_op(im, i, &gv, GPP_EMBED_SEQ, 3);
    val_t *v = gpp_onnx_define(im, i, n->output[0], V_GATHER);
    if (!v)
        return -1;
    *v = gv;
    v->name = n->output[0];
    return 0;
}

int gpp_onnx_reduce(imp_t *im, int i, int mode)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = gpp_onnx_in(im, i, 0, -1);
    int64_t keep = 1, axis = s_axis(im, i, &keep);
    if (!x || axis == -101)
        return -1;
    if (x->kind == V_GATHER) {
        if (mode == GPP_REDUCE_MAX || (axis != 1 && axis != -2))
            return gpp_onnx_fail(im, i,
                                 "gpp maps a reduction of a Gather only as the sum or mean of a "
                                 "bag (axis 1): nn.EmbeddingBag(mode='sum' or 'mean')");
        return s_table_op(im, i, x, mode == GPP_REDUCE_SUM ? GPP_EMBED_SUM : GPP_EMBED_MEAN,
                          keep ? 3 : 2);
    }
    if (!(x = gpp_onnx_in(im, i, 0, V_OP)))
        return -1;
    if (x->rank != 3 || (axis != 1 && axis != -2))
        return gpp_onnx_fail(im, i,
                             "gpp pools over the sequence only: axis 1 of an [N, S, C] "
                             "activation (x.mean(dim=1), x.max(dim=1).values, x.sum(dim=1)); "
                             "this node reduces axis %lld of a rank-%d tensor",
                             (long long)axis, x->rank);
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, n->name && *n->name ? n->name : "pool", 0, name);
    int id = gpp_graph_add(im->g, GPP_OP_REDUCE, name, 1, &x->op);
    im->g->ops[id].mode = mode;
    return gpp_onnx_out_op(im, i, n->output[0], id, keep ? 3 : 2);
}
