/* gpp_onnx_shape: the ONNX importer's shape handling (see gpp_onnx_imp.h):
 * Shape arithmetic on integer vectors folded at import (the batch kept as a
 * symbol), and the per-sample relayouts of activations (Reshape, Unsqueeze,
 * Squeeze, Flatten) as gpp reshape ops or aliases. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_onnx_imp.h"

/* ---- shapes: folded integer vectors and per-sample layouts ---- */

/* The ONNX dims of activation x: d[0] the batch, then [rows,] cols. */
int gpp_onnx_dims(const imp_t *im, const val_t *x, int64_t d[3])
{
    d[0] = BATCH;
    d[x->rank - 1] = im->g->ops[x->op].cols;
    if (x->rank == 3)
        d[1] = im->g->ops[x->op].rows;
    return x->rank;
}

/* "[N, 4, 8]" */
const char *gpp_onnx_dimstr(const int64_t *d, int n, char *buf, size_t cap)
{
    size_t at = 0;
    at += (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < n && at < cap; k++) {
        if (d[k] == BATCH)
            at += (size_t)snprintf(buf + at, cap - at, "%sN", k ? ", " : "");
        else
            at += (size_t)snprintf(buf + at, cap - at, "%s%lld", k ? ", " : "", (long long)d[k]);
    }
    if (at < cap)
        snprintf(buf + at, cap - at, "]");
    return buf;
}

/* 1 when value `name` is an integer vector the importer folds (a Shape's
 * result or an integer constant). */
int gpp_onnx_is_ints(imp_t *im, const char *name)
{
    const val_t *v = gpp_onnx_find(im, name);
    return v && (v->kind == V_SHAPE || (v->kind == V_CONST && v->t->has_data_type &&
                                        (v->t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ||
                                         v->t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32)));
}

/* Integers from input k of node i (see s_ints). */
static int s_in_ints(imp_t *im, int i, int k, const char *what, int64_t *out, int cap, int *scalar,
                     int allow_batch)
{
    const val_t *v = gpp_onnx_in(im, i, k, -1);
    return v ? gpp_onnx_ints(im, i, v, what, out, cap, scalar, allow_batch) : -1;
}

/* Axes from the 'axes' attribute (older opsets) or input 1: the count, -1
 * for none, -2 + message on error. */
static int s_axes(imp_t *im, int i, int64_t *out, int cap)
{
    const node_t *n = im->gr->node[i];
    const attr_t *a = gpp_onnx_attr(n, "axes");
    if (n->n_input > 1 && n->input[1][0]) {
        int r = s_in_ints(im, i, 1, "axes", out, cap, NULL, 0);
        return r < 0 ? -2 : r;
    }
    if (!a)
        return -1;
    if (a->n_ints > (size_t)cap)
        return gpp_onnx_fail(im, i, "attribute 'axes' has more than %d values", cap) - 1;
    for (size_t k = 0; k < a->n_ints; k++)
        out[k] = a->ints[k];
    return (int)a->n_ints;
}

static int s_def_shape(imp_t *im, int i, const int64_t *v, int n, int scalar)
{
    val_t *o = gpp_onnx_define(im, i, im->gr->node[i]->output[0], V_SHAPE);
    if (!o)
        return -1;
    memcpy(o->sv, v, (size_t)n * sizeof *v);
    o->sn = n;
    o->scalar = scalar;
    return 0;
}

/* Shape, and Gather, Unsqueeze, Squeeze, Concat, Slice, Cast of integer
 * vectors: computed here, the batch kept as a symbol. */
int gpp_onnx_fold(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const char *op = n->op_type;
    int64_t a[SV_MAX], b[SV_MAX], out[SV_MAX], axis;
    int na, nb = 0, no = 0, sa = 0, sb = 0;
    if (!strcmp(op, "Shape")) {
        const val_t *x = gpp_onnx_in(im, i, 0, V_OP);
        int64_t st, en, d[3];
        if (!x)
            return -1;
        int r = gpp_onnx_dims(im, x, d);
        if (gpp_onnx_attr_int(im, i, "start", 0, &st) < 0 ||
            gpp_onnx_attr_int(im, i, "end", r, &en) < 0)
            return -1;
        st = st < 0 ? st + r : st, en = en < 0 ? en + r : en;
        st = st < 0 ? 0 : st > r ? r : st, en = en < 0 ? 0 : en > r ? r : en;
        for (int64_t k = st; k < en; k++)
            out[no++] = d[k];
        return s_def_shape(im, i, out, no, 0);
    }
    if (!strcmp(op, "Concat")) {
        if (gpp_onnx_attr_int(im, i, "axis", 0, &axis) < 0)
            return -1;
        if (axis != 0 && axis != -1)
            return gpp_onnx_fail(im, i, "a Concat of shapes must have axis 0");
        for (size_t k = 0; k < n->n_input; k++) {
            if ((na = s_in_ints(im, i, (int)k, "Concat input", a, SV_MAX, NULL, 1)) < 0)
                return -1;
            if (no + na > SV_MAX)
                return gpp_onnx_fail(im, i, "a shape of more than %d dimensions", SV_MAX);
            memcpy(out + no, a, (size_t)na * sizeof *a);
            no += na;
        }
        return s_def_shape(im, i, out, no, 0);
    }
    if ((na = s_in_ints(im, i, 0, "input", a, SV_MAX, &sa, 1)) < 0)
        return -1;
    if (!strcmp(op, "Cast") || !strcmp(op, "Identity"))
        return s_def_shape(im, i, a, na, sa);
    if (!strcmp(op, "Gather")) {
        if (gpp_onnx_attr_int(im, i, "axis", 0, &axis) < 0 ||
            (nb = s_in_ints(im, i, 1, "indices", b, SV_MAX, &sb, 0)) < 0)
            return -1;
        if (sa || axis != 0)
            return gpp_onnx_fail(im, i, "a Gather from a shape must have axis 0 of a 1-d shape");
        for (int k = 0; k < nb; k++) {
            int64_t j = b[k] < 0 ? b[k] + na : b[k];
            if (j < 0 || j >= na)
                return gpp_onnx_fail(im, i, "index %lld is outside the shape's %d dimensions",
                                     (long long)b[k], na);
            out[no++] = a[j];
        }
        return s_def_shape(im, i, out, no, sb);
    }
    if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze")) {
        int unsq = op[0] == 'U';
        if ((nb = s_axes(im, i, b, SV_MAX)) < -1)
            return -1;
        if (nb == -1 && unsq)
            return gpp_onnx_fail(im, i, "Unsqueeze needs its axes");
        if (unsq ? !(sa && nb == 1 && (b[0] == 0 || b[0] == -1))
                 : !(!sa && na == 1 && (nb == -1 || (nb == 1 && (b[0] == 0 || b[0] == -1)))))
            return gpp_onnx_fail(im, i,
                                 "gpp folds %s of shapes only between a scalar and a 1-element "
                                 "vector",
                                 op);
        return s_def_shape(im, i, a, 1, !unsq);
    }
    if (!strcmp(op, "Slice")) {
        /* starts, ends, axes, steps: one value each (inputs 1..4; the last two optional) */
        int64_t v[4][1] = {{0}, {0}, {0}, {1}};
        static const char *what[] = {"starts", "ends", "axes", "steps"};
        for (int k = 0; k < 4; k++) {
            if (k >= 2 && ((int)n->n_input <= k + 1 || !n->input[k + 1][0]))
                continue;
            int r = s_in_ints(im, i, k + 1, what[k], v[k], 1, NULL, 0);
            if (r < 0)
                return -1;
            if (r != 1)
                return gpp_onnx_fail(im, i, "a Slice of a shape takes one %s", what[k]);
        }
        int64_t st[1] = {v[0][0]}, en[1] = {v[1][0]}, ax[1] = {v[2][0]}, sp[1] = {v[3][0]};
        if (sa || (ax[0] != 0 && ax[0] != -1) || sp[0] != 1)
            return gpp_onnx_fail(im, i,
                                 "gpp folds a Slice of a shape along axis 0 with step 1 only");
        int64_t b0 = st[0] < 0 ? st[0] + na : st[0], e0 = en[0] < 0 ? en[0] + na : en[0];
        b0 = b0 < 0 ? 0 : b0 > na ? na : b0, e0 = e0 < 0 ? 0 : e0 > na ? na : e0;
        for (int64_t k = b0; k < e0; k++)
            out[no++] = a[k];
        return s_def_shape(im, i, out, no, 0);
    }
    return gpp_onnx_fail(im, i, "gpp does not compute %s of shapes", op);
}

/* Activation x seen with ONNX dims d[rank] (d[0] the batch): gpp keeps a
 * sample a [rows, cols] matrix, row-major, so any reshape to rank 2 or 3
 * that keeps the batch first and the sample's element count is the same
 * bytes: a dimension of 1 coming or going changes nothing (an alias), any
 * other ([N, S, C] <-> [N, S*C]) becomes a gpp reshape op. */
static int s_relayout(imp_t *im, int i, const val_t *x, const int64_t *d, int rank,
                      const char *out_name)
{
    int64_t xd[3], rows = rank == 3 ? d[1] : 1, cols = d[rank - 1];
    const gpp_op_t *xo = &im->g->ops[x->op];
    int xr = gpp_onnx_dims(im, x, xd);
    char a[96], b[96];
    if (rank < 2 || rank > 3 || d[0] != BATCH || rows < 1 || cols < 1 ||
        rows > xo->rows * xo->cols / cols || rows * cols != xo->rows * xo->cols)
        return gpp_onnx_fail(
            im, i,
            "'%s' %s would become %s: gpp keeps each sample a [rows, cols] matrix, the "
            "batch first, and reshapes it to another of the same size only (heads "
            "are reshaped only inside the self-attention pattern, "
            "docs/graph-format.md)",
            x->name, gpp_onnx_dimstr(xd, xr, a, sizeof a), gpp_onnx_dimstr(d, rank, b, sizeof b));
    if (rows == xo->rows && cols == xo->cols)
        return gpp_onnx_out_op(im, i, out_name, x->op, rank);
    const node_t *n = im->gr->node[i];
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, n->name && *n->name ? n->name : out_name, 0, name);
    return gpp_onnx_out_op(im, i, out_name, gpp_graph_reshape(im->g, name, x->op, rows, cols),
                           rank);
}

/* The target of Reshape node i for an input of dims d[xr]: 0 (copy) and -1
 * (infer) resolved, the batch first as BATCH. The rank, or -1 + message. */
int gpp_onnx_reshape_target(imp_t *im, int i, const int64_t *d, int xr, int64_t t[SV_MAX])
{
    const node_t *n = im->gr->node[i];
    int64_t zero, known = 1, per = 1;
    if (gpp_onnx_attr_int(im, i, "allowzero", 0, &zero) < 0)
        return -1;
    int nt = s_in_ints(im, i, 1, "shape", t, SV_MAX, NULL, 1), infer = -1;
    if (nt < 0)
        return -1;
    for (int k = 1; k < xr; k++)
        per *= d[k];
    for (int k = 0; k < nt; k++) {
        if (t[k] == 0 && !zero) {
            if (k >= xr)
                return gpp_onnx_fail(
                    im, i, "shape element %d is 0 (copy) but the input has rank %d", k, xr);
            t[k] = d[k];
        }
        if (t[k] == BATCH && k)
            return gpp_onnx_fail(im, i,
                                 "output '%s' would have the batch as dimension %d; gpp keeps "
                                 "it first",
                                 n->output[0], k);
        if (t[k] == -1 && infer < 0)
            infer = k;
        else if ((t[k] < 1 && t[k] != BATCH) || (k && known > DIM_MAX / t[k]))
            return gpp_onnx_fail(im, i, "shape element %d is %lld", k, (long long)t[k]);
        else if (k)
            known *= t[k];
    }
    if (infer > 0) {
        if (t[0] != BATCH || known < 1 || per % known)
            return gpp_onnx_fail(im, i,
                                 "cannot infer dimension %d of '%s' from %lld features per sample",
                                 infer, n->output[0], (long long)per);
        t[infer] = per / known;
    } else if (infer == 0) { /* the batch from the rest */
        if (known != per)
            return gpp_onnx_fail(im, i, "output '%s' would mix the batch with the features",
                                 n->output[0]);
        t[0] = BATCH;
    } else if (t[0] != BATCH) {
        return gpp_onnx_fail(im, i,
                             "output '%s' has a fixed first dimension %lld: gpp keeps the batch "
                             "first and symbolic (use 0 or -1 there)",
                             n->output[0], (long long)t[0]);
    }
    return nt;
}

int gpp_onnx_reshape(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = gpp_onnx_in(im, i, 0, V_OP);
    int64_t t[SV_MAX], d[3];
    if (!x)
        return -1;
    int nt = gpp_onnx_reshape_target(im, i, d, gpp_onnx_dims(im, x, d), t);
    if (nt < 0)
        return -1;
    return s_relayout(im, i, x, t, nt, n->output[0]);
}

/* Unsqueeze, Squeeze and Flatten of an activation */
int gpp_onnx_layout(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = gpp_onnx_in(im, i, 0, V_OP);
    int64_t d[3], o[SV_MAX], ax[SV_MAX], axis;
    if (!x)
        return -1;
    int xr = gpp_onnx_dims(im, x, d), no = 0;
    if (!strcmp(n->op_type, "Flatten")) {
        if (gpp_onnx_attr_int(im, i, "axis", 1, &axis) < 0)
            return -1;
        if (axis != 1 && axis != 1 - xr)
            return gpp_onnx_fail(im, i, "gpp maps Flatten with axis 1 only (the batch kept)");
        o[0] = BATCH, o[1] = 1;
        for (int k = 1; k < xr; k++)
            o[1] *= d[k];
        return s_relayout(im, i, x, o, 2, n->output[0]);
    }
    int unsq = n->op_type[0] == 'U', na = s_axes(im, i, ax, SV_MAX);
    if (na < -1)
        return -1;
    if (unsq && na < 1)
        return gpp_onnx_fail(im, i, "Unsqueeze needs its axes");
    int r = unsq ? xr + na : xr, drop[SV_MAX + 3] = {0};
    for (int k = 0; k < na; k++) {
        int64_t a = ax[k] < 0 ? ax[k] + r : ax[k];
        if (a < 1 || a >= r || r > SV_MAX)
            return gpp_onnx_fail(im, i, "axis %lld: gpp keeps the batch as dimension 0",
                                 (long long)ax[k]);
        drop[a] = 1;
    }
    if (unsq) {
        for (int k = 0, j = 0; k < r; k++)
            o[no++] = drop[k] ? 1 : d[j++];
    } else {
        for (int k = 0; k < xr; k++) {
            int gone = na < 0 ? k > 0 && d[k] == 1 : drop[k];
            if (gone && d[k] != 1)
                return gpp_onnx_fail(im, i, "dimension %d of '%s' is %lld, not 1", k, x->name,
                                     (long long)d[k]);
            if (!gone)
                o[no++] = d[k];
        }
    }
    return s_relayout(im, i, x, o, no, n->output[0]);
}
