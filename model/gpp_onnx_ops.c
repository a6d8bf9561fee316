/* gpp_onnx_ops: the ONNX importer's node mappings (see gpp_onnx_imp.h):
 * Gemm and MatMul(+Add) as linears, the unary ops and Gelu's Erf form,
 * LayerNormalization and its decomposition (ReduceMean, Sub, Pow, ReduceMean,
 * Add, Sqrt, Div, Mul, Add: nn.LayerNorm below opset 17), Concat, Add, Split, Slice,
 * Identity and Constant. The Shape arithmetic and the relayouts are
 * gpp_onnx_shape.c; embeddings and pooling gpp_onnx_embed.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_onnx_imp.h"

/* x W^T + b as a gpp linear. wt: the constant holds W^T ([in, out]);
 * bias: the bias constant or NULL. out_name: the ONNX value it defines. */
static int s_linear(imp_t *im, int node, const val_t *x, const val_t *wv, int wt, const val_t *bias,
                    const char *out_name)
{
    int64_t r = 0, c = 0, rows, in; /* set by gpp_onnx_matrix */
    if (gpp_onnx_matrix(im, node, wv, &r, &c) < 0 || gpp_onnx_shape(im, x, &rows, &in) < 0)
        return -1;
    int64_t out = wt ? c : r, win = wt ? r : c;
    if (win != in)
        return gpp_onnx_fail(
            im, node, "weight '%s' is [%lld, %lld]: %lld input features, but '%s' has %lld",
            wv->name, (long long)r, (long long)c, (long long)win, x->name, (long long)in);
    float *w = gpp_onnx_floats(im, node, wv->t, r * c), *b = NULL;
    if (!w)
        return -1;
    if (wt) { /* [in, out] -> gpp's [out, in] */
        float *tw = gpp_xcalloc((size_t)(r * c), sizeof *tw);
        for (int64_t i = 0; i < in; i++)
            for (int64_t o = 0; o < out; o++)
                tw[o * in + i] = w[i * out + o];
        free(w);
        w = tw;
    }
    if (bias && !(b = gpp_onnx_floats(im, node, bias->t, out))) {
        free(w);
        return gpp_onnx_fail(im, node,
                             "bias '%s' must hold %lld values (one per output feature): %s",
                             bias->name, (long long)out, im->err->msg);
    }
    /* torch names a Linear's weight "fc.weight", unless it exported it
     * transposed (then "onnx::MatMul_7"): the bias still says "fc.bias" */
    char name[GPP_NAME_LEN];
    size_t wl = strlen(wv->name), bl = bias ? strlen(bias->name) : 0;
    const char *base = wl > 7 && !strcmp(wv->name + wl - 7, ".weight")   ? wv->name
                       : bl > 5 && !strcmp(bias->name + bl - 5, ".bias") ? bias->name
                       : im->gr->node[node]->name                        ? im->gr->node[node]->name
                                                                         : "linear";
    gpp_onnx_opname(im, base, base != im->gr->node[node]->name, name);
    int id = gpp_graph_linear(im->g, name, x->op, out, bias != NULL);
    gpp_onnx_weight(im, id, 0, w);
    if (b)
        gpp_onnx_weight(im, id, 1, b);
    return gpp_onnx_out_op(im, node, out_name, id, x->rank);
}

/* ---- node mappings ---- */

int gpp_onnx_gemm(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t ta, tb;
    double alpha = 1, beta = 1; /* set by gpp_onnx_attr_float */
    if (gpp_onnx_attr_int(im, i, "transA", 0, &ta) < 0 ||
        gpp_onnx_attr_int(im, i, "transB", 0, &tb) < 0 ||
        gpp_onnx_attr_float(im, i, "alpha", 1.0, &alpha) < 0 ||
        gpp_onnx_attr_float(im, i, "beta", 1.0, &beta) < 0)
        return -1;
    if (ta || alpha != 1.0 || (n->n_input > 2 && n->input[2][0] && beta != 1.0))
        return gpp_onnx_fail(im, i,
                             "gpp maps Gemm with transA=0, alpha=1, beta=1 (a Linear layer); "
                             "this node has transA=%lld alpha=%g beta=%g",
                             (long long)ta, alpha, beta);
    const val_t *x = gpp_onnx_in(im, i, 0, V_OP), *w = x ? gpp_onnx_in(im, i, 1, V_CONST) : NULL,
                *b = NULL;
    if (!w)
        return -1;
    if (x->rank != 2)
        return gpp_onnx_fail(im, i, "Gemm input '%s' must be 2-d", x->name);
    if (n->n_input > 2 && n->input[2][0] && !(b = gpp_onnx_in(im, i, 2, V_CONST)))
        return -1;
    return s_linear(im, i, x, w, !tb, b, n->output[0]);
}

int gpp_onnx_matmul(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = gpp_onnx_in(im, i, 0, V_OP), *w = x ? gpp_onnx_in(im, i, 1, V_CONST) : NULL,
                *b = NULL;
    if (!w)
        return -1;
    /* a bias: the one consumer is an Add of a constant */
    const char *out = n->output[0];
    int c;
    if (gpp_onnx_uses(im, out, &c) == 1 && c > i && im->gr->node[c]->op_type &&
        !strcmp(im->gr->node[c]->op_type, "Add") && im->gr->node[c]->n_input == 2 &&
        im->gr->node[c]->n_output >= 1) {
        const node_t *add = im->gr->node[c];
        const val_t *o = gpp_onnx_find(im, add->input[!strcmp(add->input[0], out) ? 1 : 0]);
        if (o && o->kind == V_CONST) {
            b = o;
            out = add->output[0];
            im->done[c] = 1;
        }
    }
    return s_linear(im, i, x, w, 1, b, out);
}

int gpp_onnx_unary(imp_t *im, int i, gpp_op_type_t t, const char *in_name, const char *out_name)
{
    const val_t *x = gpp_onnx_val(im, i, in_name, V_OP);
    if (!x)
        return -1;
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, im->gr->node[i]->name ? im->gr->node[i]->name : gpp_op_type_name(t), 0,
                    name);
    return gpp_onnx_out_op(im, i, out_name, gpp_graph_unary(im->g, t, name, x->op), x->rank);
}

/* A constant scalar's value, or NAN: an initializer, a Constant node the
 * walk has read, or one it has not reached yet (torch writes the tanh
 * GELU's constants after the pattern's first node). */
static double s_scalar(imp_t *im, const char *name)
{
    const val_t *v = name ? gpp_onnx_find(im, name) : NULL;
    const tensor_t *t = v && v->kind == V_CONST ? v->t : NULL;
    if (name && !v) {
        int p = gpp_onnx_producer(im, name);
        const attr_t *a =
            gpp_onnx_is(im, p, "Constant") ? gpp_onnx_attr(im->gr->node[p], "value") : NULL;
        t = a ? a->t : NULL;
    }
    int64_t n;
    gpp_err_t e = {{0}}, *keep = im->err;
    if (!t || t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return NAN;
    im->err = &e; /* a mismatch only means "not the pattern" */
    float *f = gpp_onnx_tensor_check(im, -1, t, 1, &n) == 0 && n == 1
                   ? gpp_onnx_floats(im, -1, t, 1)
                   : NULL;
    im->err = keep;
    double r = f ? f[0] : NAN;
    free(f);
    return r;
}

/* The single node reading value `name` if it has op type `op` (the other
 * input, when there are two, must not be `name` too); -1 otherwise. */
int gpp_onnx_next(imp_t *im, const char *name, const char *op)
{
    int c;
    if (gpp_onnx_uses(im, name, &c) != 1 || c < 0 || !im->gr->node[c]->op_type ||
        strcmp(im->gr->node[c]->op_type, op) || im->gr->node[c]->n_output < 1)
        return -1;
    return c;
}

/* The other input of a two-input node than `name`, or NULL. */
const char *gpp_onnx_other(const node_t *n, const char *name)
{
    if (n->n_input != 2)
        return NULL;
    return !strcmp(n->input[0], name)   ? n->input[1]
           : !strcmp(n->input[1], name) ? n->input[0]
                                        : NULL;
}

/* A gpp gelu op of `form` from value x to value y, for node i. */
static int s_gelu(imp_t *im, int i, gpp_gelu_form_t form, const char *x, const char *y)
{
    if (gpp_onnx_unary(im, i, GPP_OP_GELU, x, y) < 0)
        return -1;
    im->g->ops[gpp_onnx_find(im, y)->op].form = form; /* the cost is the same either way */
    return 0;
}

/* Gelu (opset 20): approximate "none" (the default) is the exact erf form,
 * "tanh" the tanh approximation; gpp computes either as the model says. */
int gpp_onnx_gelu(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const attr_t *a = gpp_onnx_attr(n, "approximate");
    gpp_gelu_form_t form = GPP_GELU_ERF;
    if (a) {
        int str = a->has_s || a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
        size_t len = a->s.len;
        const char *v = (const char *)a->s.data;
        if (str && len == 4 && v && !memcmp(v, "tanh", 4))
            form = GPP_GELU_TANH;
        else if (!(str && len == 4 && v && !memcmp(v, "none", 4))) {
            char got[48] = "an attribute of another type";
            if (str)
                snprintf(got, sizeof got, "'%.*s'", v ? (int)(len > 32 ? 32 : len) : 0, v ? v : "");
            return gpp_onnx_fail(im, i,
                                 "attribute 'approximate' must be the string \"none\" (the exact "
                                 "erf form) or \"tanh\", got %s",
                                 got);
        }
    }
    return s_gelu(im, i, form, n->n_input ? n->input[0] : "", n->output[0]);
}

/* GELU as torch exports it without a Gelu op:
 * Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5). Returns 1 when
 * node i starts it (mapped), 0 when not, -1 on error. */
int gpp_onnx_gelu_erf(imp_t *im, int i)
{
    const node_t *d = im->gr->node[i];
    if (d->n_input != 2 || d->n_output < 1 || fabs(s_scalar(im, d->input[1]) - sqrt(2.0)) > 1e-6)
        return 0;
    const char *x = d->input[0];
    int e = gpp_onnx_next(im, d->output[0], "Erf");
    int a = e < 0 ? -1 : gpp_onnx_next(im, im->gr->node[e]->output[0], "Add");
    if (a < 0 || fabs(s_scalar(im, gpp_onnx_other(im->gr->node[a], im->gr->node[e]->output[0])) -
                      1.0) > 1e-6)
        return 0;
    int m1 = gpp_onnx_next(im, im->gr->node[a]->output[0], "Mul");
    if (m1 < 0 || !gpp_onnx_other(im->gr->node[m1], im->gr->node[a]->output[0]) ||
        strcmp(gpp_onnx_other(im->gr->node[m1], im->gr->node[a]->output[0]), x))
        return 0;
    int m2 = gpp_onnx_next(im, im->gr->node[m1]->output[0], "Mul");
    if (m2 < 0 || fabs(s_scalar(im, gpp_onnx_other(im->gr->node[m2], im->gr->node[m1]->output[0])) -
                       0.5) > 1e-6)
        return 0;
    im->done[e] = im->done[a] = im->done[m1] = im->done[m2] = 1;
    return s_gelu(im, i, GPP_GELU_ERF, x, im->gr->node[m2]->output[0]) < 0 ? -1 : 1;
}

/* The single reader of value `name` if it is an `op` whose other input is
 * `other` (a value name), or the scalar constant `k` when `other` is NULL;
 * -1 otherwise. */
static int s_gelu_step(imp_t *im, const char *name, const char *op, const char *other, double k)
{
    int c = gpp_onnx_next(im, name, op);
    const char *o = c < 0 ? NULL : gpp_onnx_other(im->gr->node[c], name);
    if (!o || (other ? strcmp(o, other) != 0 : !(fabs(s_scalar(im, o) - k) <= 1e-6)))
        return -1;
    return c;
}

/* The first node after `after` reading value x as op `op` with its other
 * input x too (other NULL) or the scalar k; -1 when none. */
static int s_reader(imp_t *im, int after, const char *x, const char *op, int twice, double k)
{
    for (int c = after + 1; c < (int)im->gr->n_node; c++) {
        const node_t *n = im->gr->node[c];
        if (!gpp_onnx_is(im, c, op) || n->n_input != 2 || n->n_output < 1)
            continue;
        const char *o = gpp_onnx_other(n, x);
        if (o && (twice ? !strcmp(o, x) && !strcmp(n->input[0], n->input[1])
                        : strcmp(o, x) && fabs(s_scalar(im, o) - k) <= 1e-6))
            return c;
    }
    return -1;
}

/* GELU's tanh form written out, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715
 * x^3))), as torch 1.13 exports nn.GELU(approximate='tanh') below opset 20
 * (Mul(x, x) -> Mul(x) -> Mul(0.044715) -> Add(x) -> Mul(sqrt(2/pi)) ->
 * Tanh -> Add(1) -> Mul(x) -> Mul(0.5)) or as Hugging Face's
 * NewGELUActivation exports (Mul(x, 0.5); Pow(x, 3) -> ... -> Add(1) ->
 * Mul(half, .)): the cube as Mul(x, Mul(x, x)) or Pow(x, 3), the halving
 * last or first; operands in either order. Node i, a Mul or Pow, must be
 * the pattern's first node. Returns 1 when mapped, 0 when not, -1 on error. */
int gpp_onnx_gelu_tanh(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    if (n->n_input != 2 || n->n_output < 1)
        return 0;
    for (int xi = 0; xi < 2; xi++) { /* x: either input that is an activation */
        const char *x = n->input[xi], *o = n->input[!xi];
        const val_t *xv = gpp_onnx_find(im, x);
        if (!xv || xv->kind != V_OP)
            continue;
        /* node i opens the pattern: Mul(x, x), Pow(x, 3) or Mul(x, 0.5); any
         * other Mul or Pow is no GELU (and costs no search below) */
        int pow = gpp_onnx_is(im, i, "Pow");
        if (pow ? xi != 0 || !(fabs(s_scalar(im, o) - 3.0) <= 1e-6)
                : strcmp(o, x) && !(fabs(s_scalar(im, o) - 0.5) <= 1e-6))
            continue;
        int nodes[12], nn = 0, c;
        /* x^3: Mul(x, Mul(x, x)) or Pow(x, 3) */
        int sq = s_reader(im, i - 1, x, "Mul", 1, 0), cube = -1;
        if (sq >= 0 && (cube = s_gelu_step(im, im->gr->node[sq]->output[0], "Mul", x, 0)) >= 0)
            nodes[nn++] = sq;
        else if ((cube = s_reader(im, i - 1, x, "Pow", 0, 3.0)) < 0)
            continue;
        nodes[nn++] = cube;
        static const struct {
            const char *op;
            int x; /* 1: the other operand is x */
            double k;
        } steps[] = {{"Mul", 0, 0.044715},
                     {"Add", 1, 0},
                     {"Mul", 0, 0.7978845608028654 /* sqrt(2/pi) */},
                     {"Tanh", 0, 0},
                     {"Add", 0, 1.0}};
        const char *v = im->gr->node[cube]->output[0];
        size_t k = 0;
        for (; k < sizeof steps / sizeof steps[0]; k++) {
            c = !strcmp(steps[k].op, "Tanh")
                    ? gpp_onnx_next(im, v, "Tanh")
                    : s_gelu_step(im, v, steps[k].op, steps[k].x ? x : NULL, steps[k].k);
            if (c < 0 || im->gr->node[c]->n_output < 1)
                break;
            nodes[nn++] = c;
            v = im->gr->node[c]->output[0];
        }
        if (k < sizeof steps / sizeof steps[0])
            continue;
        /* the halving: Mul(x, 1 + tanh) -> Mul(0.5), or Mul(Mul(x, 0.5), 1 + tanh) */
        int m = gpp_onnx_next(im, v, "Mul"), half = -1;
        const char *hv = m < 0 ? NULL : gpp_onnx_other(im->gr->node[m], v);
        if (!hv)
            continue;
        if (!strcmp(hv, x)) {
            if ((half = s_gelu_step(im, im->gr->node[m]->output[0], "Mul", NULL, 0.5)) < 0)
                continue;
            nodes[nn++] = m;
            nodes[nn++] = half;
        } else {
            int h = gpp_onnx_producer(im, hv), one;
            if (h < 0 || h != s_reader(im, h - 1, x, "Mul", 0, 0.5) ||
                gpp_onnx_uses(im, hv, &one) != 1)
                continue;
            nodes[nn++] = h;
            nodes[nn++] = m;
            half = m;
        }
        int first = nodes[0];
        for (int j = 1; j < nn; j++)
            first = nodes[j] < first ? nodes[j] : first;
        if (first != i)
            continue; /* the walk reaches the pattern at its first node */
        for (int j = 0; j < nn; j++)
            if (nodes[j] != i)
                im->done[nodes[j]] = 1;
        return s_gelu(im, i, GPP_GELU_TANH, x, im->gr->node[half]->output[0]) < 0 ? -1 : 1;
    }
    return 0;
}

/* gpp's layernorm of x with the gain and (if any) bias constants, defining
 * the ONNX value out_name (LayerNormalization and its decomposition). */
static int s_layernorm(imp_t *im, int i, const val_t *x, const val_t *gain, const val_t *bias,
                       const char *out_name)
{
    int64_t rows, cols;
    if (gpp_onnx_shape(im, x, &rows, &cols) < 0)
        return -1;
    float *gw = gpp_onnx_floats(im, i, gain->t, cols),
          *bw = bias ? gpp_onnx_floats(im, i, bias->t, cols) : NULL;
    if (!gw || (bias && !bw)) {
        free(gw);
        free(bw);
        return -1;
    }
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, gain->name, 1, name);
    int id = gpp_graph_unary(im->g, GPP_OP_LAYERNORM, name, x->op);
    gpp_onnx_weight(im, id, 0, gw);
    if (bw)
        gpp_onnx_weight(im, id, 1, bw);
    return gpp_onnx_out_op(im, i, out_name, id, x->rank);
}

/* 1e-5: PyTorch's nn.LayerNorm default, gpp's fixed epsilon (gpp_ops.h) */
static int s_ln_eps(imp_t *im, int i, double eps)
{
    if (fabs(eps - 1e-5) > 1e-8)
        return gpp_onnx_fail(im, i,
                             "epsilon %g: gpp's layernorm uses 1e-5 (PyTorch's default); use "
                             "nn.LayerNorm(..., eps=1e-5)",
                             eps);
    return 0;
}

int gpp_onnx_layernorm(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis;
    double eps = 0; /* set by gpp_onnx_attr_float */
    if (gpp_onnx_attr_int(im, i, "axis", -1, &axis) < 0 ||
        gpp_onnx_attr_float(im, i, "epsilon", 1e-5, &eps) < 0)
        return -1;
    const val_t *x = gpp_onnx_in(im, i, 0, V_OP), *sc = x ? gpp_onnx_in(im, i, 1, V_CONST) : NULL,
                *b = NULL;
    if (!sc)
        return -1;
    if (axis != -1 && axis != x->rank - 1)
        return gpp_onnx_fail(im, i,
                             "gpp normalises over the last axis only (axis -1); this node has "
                             "axis %lld",
                             (long long)axis);
    if (s_ln_eps(im, i, eps) < 0)
        return -1;
    if (n->n_input > 2 && n->input[2][0] && !(b = gpp_onnx_in(im, i, 2, V_CONST)))
        return -1;
    return s_layernorm(im, i, x, sc, b, n->output[0]);
}

/* Node `node` is a ReduceMean over the last of `rank` axes with keepdims 1
 * (axes as the attribute, or from opset 18 a constant input): 1, else 0. */
static int s_mean_last(imp_t *im, int node, int rank)
{
    const node_t *n = im->gr->node[node];
    if (!gpp_onnx_is(im, node, "ReduceMean") || n->n_input < 1 || n->n_output < 1)
        return 0;
    const attr_t *k = gpp_onnx_attr(n, "keepdims"), *a = gpp_onnx_attr(n, "axes");
    int64_t axis;
    if (k && k->i != 1)
        return 0;
    if (a) {
        if (a->n_ints != 1)
            return 0;
        axis = a->ints[0];
    } else if (n->n_input > 1 && n->input[1][0]) {
        const val_t *v = gpp_onnx_find(im, n->input[1]);
        int64_t cnt = 0;
        gpp_err_t e = {{0}}, *keep = im->err;
        im->err = &e; /* not a constant of one integer: not the pattern */
        int ok = v && v->kind == V_CONST && v->t &&
                 v->t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
                 gpp_onnx_tensor_check(im, -1, v->t, 0, &cnt) == 0 && cnt == 1;
        im->err = keep;
        if (!ok)
            return 0;
        axis = gpp_onnx_int_at(v->t, 0);
    } else {
        return 0; /* every axis */
    }
    return axis == -1 || axis == rank - 1;
}

/* A constant of `cols` fp32 values: the value, else NULL. */
static const val_t *s_row_const(imp_t *im, const char *name, int64_t cols)
{
    const val_t *v = name ? gpp_onnx_find(im, name) : NULL;
    int64_t cnt = 0;
    gpp_err_t e = {{0}}, *keep = im->err;
    im->err = &e;
    int ok = v && v->kind == V_CONST && v->t && gpp_onnx_tensor_check(im, -1, v->t, 1, &cnt) == 0 &&
             cnt == cols;
    im->err = keep;
    return ok ? v : NULL;
}

int gpp_onnx_layernorm_parts(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = n->n_input >= 1 ? gpp_onnx_find(im, n->input[0]) : NULL;
    int64_t rows, cols;
    if (!x || x->kind != V_OP || !s_mean_last(im, i, x->rank))
        return 0;
    gpp_err_t e = {{0}}, *keep = im->err;
    im->err = &e;
    int shaped = gpp_onnx_shape(im, x, &rows, &cols) == 0;
    im->err = keep;
    if (!shaped)
        return 0;
    const node_t *const *nd = (const node_t *const *)im->gr->node;
    const char *xn = n->input[0];
    /* d = Sub(x, mean), read by Pow(d, 2) and Div(d, std) only */
    int sub = gpp_onnx_next(im, n->output[0], "Sub");
    if (sub < 0 || nd[sub]->n_input != 2 || strcmp(nd[sub]->input[0], xn) ||
        strcmp(nd[sub]->input[1], n->output[0]))
        return 0;
    const char *d = nd[sub]->output[0];
    int first, pw = -1, dv = -1;
    if (gpp_onnx_uses(im, d, &first) != 2)
        return 0;
    for (int k = sub + 1; k < (int)im->gr->n_node; k++) {
        if (nd[k]->n_input != 2 || nd[k]->n_output < 1 || strcmp(nd[k]->input[0], d))
            continue;
        if (gpp_onnx_is(im, k, "Pow") && pw < 0)
            pw = k;
        else if (gpp_onnx_is(im, k, "Div") && dv < 0)
            dv = k;
    }
    if (pw < 0 || dv < 0 || !(fabs(s_scalar(im, nd[pw]->input[1]) - 2.0) <= 1e-6))
        return 0;
    /* var = ReduceMean(d^2), std = Sqrt(var + eps), Div(d, std) */
    int var = gpp_onnx_next(im, nd[pw]->output[0], "ReduceMean");
    if (var < 0 || !s_mean_last(im, var, x->rank))
        return 0;
    int add = gpp_onnx_next(im, nd[var]->output[0], "Add");
    const char *epsn = add < 0 ? NULL : gpp_onnx_other(nd[add], nd[var]->output[0]);
    double eps = epsn ? s_scalar(im, epsn) : NAN;
    if (isnan(eps))
        return 0;
    int sq = gpp_onnx_next(im, nd[add]->output[0], "Sqrt");
    if (sq < 0 || strcmp(nd[dv]->input[1], nd[sq]->output[0]))
        return 0;
    /* the affine part: Mul(gain) [Add(bias)]; gpp's layernorm learns a gain */
    int mul = gpp_onnx_next(im, nd[dv]->output[0], "Mul");
    const val_t *gain =
        mul < 0 ? NULL : s_row_const(im, gpp_onnx_other(nd[mul], nd[dv]->output[0]), cols);
    if (!gain)
        return gpp_onnx_fail(im, i,
                             "a LayerNorm written out without a weight (nn.LayerNorm("
                             "elementwise_affine=False)): gpp's layernorm always learns a gain "
                             "and a bias; use elementwise_affine=True");
    int addb = gpp_onnx_next(im, nd[mul]->output[0], "Add");
    const val_t *bias =
        addb < 0 ? NULL : s_row_const(im, gpp_onnx_other(nd[addb], nd[mul]->output[0]), cols);
    if (s_ln_eps(im, add, eps) < 0)
        return -1;
    int parts[] = {sub, pw, var, add, sq, dv, mul, bias ? addb : -1};
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++)
        if (parts[k] >= 0)
            im->done[parts[k]] = 1;
    return s_layernorm(im, i, x, gain, bias, nd[bias ? addb : mul]->output[0]) < 0 ? -1 : 1;
}

int gpp_onnx_concat(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis;
    if (gpp_onnx_attr_int(im, i, "axis", 0, &axis) < 0 || !gpp_onnx_attr(n, "axis"))
        return gpp_onnx_fail(im, i, "Concat needs its axis attribute");
    if (n->n_input < 1)
        return gpp_onnx_fail(im, i, "Concat has no inputs");
    int *ins = gpp_xcalloc(n->n_input, sizeof *ins), rank = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        const val_t *x = gpp_onnx_in(im, i, (int)k, V_OP);
        if (!x) {
            free(ins);
            return -1;
        }
        if (k && x->rank != rank) {
            free(ins);
            return gpp_onnx_fail(im, i, "inputs of different rank");
        }
        rank = x->rank;
        ins[k] = x->op;
    }
    if (axis != -1 && axis != rank - 1) {
        free(ins);
        return gpp_onnx_fail(im, i,
                             "gpp concatenates features (the last axis, %d or -1); this node "
                             "has axis %lld",
                             rank - 1, (long long)axis);
    }
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, n->name ? n->name : "concat", 0, name);
    int id = gpp_graph_concat(im->g, name, (int)n->n_input, ins);
    free(ins);
    return gpp_onnx_out_op(im, i, n->output[0], id, rank);
}

int gpp_onnx_add(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *a = gpp_onnx_in(im, i, 0, -1), *b = a ? gpp_onnx_in(im, i, 1, -1) : NULL;
    if (!b)
        return -1;
    if (a->kind == V_CONST && b->kind == V_OP) {
        const val_t *t = a;
        a = b, b = t;
    }
    if (a->kind == V_OP && b->kind == V_CONST) { /* a learned [S, D] or [1, S, D] parameter */
        const gpp_op_t *x = &im->g->ops[a->op];
        int64_t numel = 0;
        int nd = (int)b->t->n_dims;
        if (gpp_onnx_tensor_check(im, i, b->t, 1, &numel) < 0)
            return -1;
        if (numel == x->rows * x->cols && nd >= 1 && b->t->dims[nd - 1] == x->cols &&
            (nd == 1 ? x->rows == 1 : b->t->dims[nd - 2] == x->rows || x->rows == 1) &&
            (nd < 3 || b->t->dims[0] == 1)) {
            float *w = gpp_onnx_floats(im, i, b->t, numel);
            if (!w)
                return -1;
            char name[GPP_NAME_LEN];
            gpp_onnx_opname(im, b->name, 0, name);
            int id = gpp_graph_add(im->g, GPP_OP_PARAM_ADD, name, 1, &a->op);
            im->g->ops[id].lead = nd == 3;
            gpp_onnx_weight(im, id, 0, w);
            return gpp_onnx_out_op(im, i, n->output[0], id, a->rank);
        }
    }
    if (a->kind != V_OP || b->kind != V_OP)
        return gpp_onnx_fail(im, i,
                             "Add of a constant other than a parameter of the activation's "
                             "per-sample shape: gpp maps it as the bias right after a MatMul or "
                             "as a learned [S, D] parameter (a positional embedding); fold other "
                             "constants into the weights");
    if (a->rank != b->rank)
        return gpp_onnx_fail(im, i, "Add of different ranks (gpp does not broadcast)");
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, n->name ? n->name : "add", 0, name);
    return gpp_onnx_out_op(im, i, n->output[0], gpp_graph_add2(im->g, name, a->op, b->op), a->rank);
}

/* The integers of value v (an integer constant of rank 0 or 1, or a folded
 * shape) into out[cap]; *scalar (may be NULL): v is 0-d. The batch symbol
 * only where allow_batch. The count, or -1 + message naming what it is. */
int gpp_onnx_ints(imp_t *im, int i, const val_t *v, const char *what, int64_t *out, int cap,
                  int *scalar, int allow_batch)
{
    int64_t n;
    int sc;
    if (v->kind == V_SHAPE) {
        n = v->sn, sc = v->scalar;
        if (n <= cap)
            memcpy(out, v->sv, (size_t)n * sizeof *out);
    } else if (v->kind == V_CONST) {
        if (gpp_onnx_tensor_check(im, i, v->t, 0, &n) < 0)
            return -1;
        sc = v->t->n_dims == 0;
        for (int64_t k = 0; k < n && n <= cap && v->t->n_dims <= 1; k++)
            out[k] = gpp_onnx_int_at(v->t, k);
    } else
        return gpp_onnx_fail(im, i, "%s '%s' must be a constant", what, v->name);
    if ((v->kind == V_CONST && v->t->n_dims > 1) || n > cap)
        return gpp_onnx_fail(im, i, "%s '%s' must be a 1-d integer tensor of at most %d values",
                             what, v->name, cap);
    for (int64_t k = 0; k < n && !allow_batch; k++)
        if (out[k] == BATCH)
            return gpp_onnx_fail(im, i, "%s '%s' holds the batch size, which gpp leaves symbolic",
                                 what, v->name);
    if (scalar)
        *scalar = sc;
    return (int)n;
}

/* ONNX's axis as gpp's: the feature axis (rank - 1, or -1) -> 0; any other
 * -> -1 + message. */
static int s_feature_axis(imp_t *im, int i, const val_t *x, int64_t axis, const char *how)
{
    if (axis == -1 || axis == x->rank - 1)
        return 0;
    return gpp_onnx_fail(im, i,
                         "gpp %s only along the features (the last axis, %d or -1); this node "
                         "has axis %lld",
                         how, x->rank - 1, (long long)axis);
}

#define SPLIT_MAX 4096 /* outputs of one Split */

/* Split along the features: a gpp slice per output. The sizes are the
 * 'split' input (opset 13+) or attribute (opset < 13), else equal parts
 * (num_outputs in opset 18, or the number of outputs). */
int gpp_onnx_split(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis, rows, cols, sz[SPLIT_MAX], nout = (int64_t)n->n_output, np;
    const val_t *x = gpp_onnx_in(im, i, 0, V_OP);
    if (!x || gpp_onnx_attr_int(im, i, "axis", 0, &axis) < 0 ||
        gpp_onnx_attr_int(im, i, "num_outputs", nout, &np) < 0 ||
        s_feature_axis(im, i, x, axis, "splits") < 0 || gpp_onnx_shape(im, x, &rows, &cols) < 0)
        return -1;
    if (nout > SPLIT_MAX || np != nout)
        return gpp_onnx_fail(im, i,
                             "%lld outputs, num_outputs %lld: gpp splits into 1..%d outputs, one "
                             "per part",
                             (long long)nout, (long long)np, SPLIT_MAX);
    const attr_t *a = gpp_onnx_attr(n, "split");
    int have = 0;
    if (n->n_input > 1 && n->input[1][0]) {
        const val_t *sv = gpp_onnx_in(im, i, 1, -1);
        if (!sv || (have = gpp_onnx_ints(im, i, sv, "split sizes", sz, SPLIT_MAX, NULL, 0)) < 0)
            return -1;
    } else if (a) {
        if (a->n_ints > SPLIT_MAX)
            return gpp_onnx_fail(im, i, "attribute 'split' has more than %d sizes", SPLIT_MAX);
        for (size_t k = 0; k < a->n_ints; k++)
            sz[k] = a->ints[k];
        have = (int)a->n_ints;
    } else { /* equal parts, the last one smaller (opset 18) */
        int64_t part = (cols + nout - 1) / nout;
        for (int64_t k = 0; k < nout; k++)
            sz[k] = cols - k * part < part ? cols - k * part : part;
        have = (int)nout;
    }
    int64_t sum = 0;
    for (int k = 0; k < have; k++) {
        if (sz[k] < 1 || sz[k] > cols)
            return gpp_onnx_fail(im, i,
                                 "split size %d is %lld: gpp needs every part non-empty (at "
                                 "most the %lld features of '%s')",
                                 k + 1, (long long)sz[k], (long long)cols, x->name);
        sum += sz[k];
    }
    if (have != nout || sum != cols)
        return gpp_onnx_fail(im, i,
                             "split sizes give %d parts of %lld features in all, but the node has "
                             "%lld outputs and '%s' %lld features",
                             have, (long long)sum, (long long)nout, x->name, (long long)cols);
    int64_t start = 0;
    for (int64_t k = 0; k < nout; k++) {
        char name[GPP_NAME_LEN];
        gpp_onnx_opname(im, n->output[k], 0, name);
        int id = gpp_graph_slice(im->g, name, x->op, start, sz[k]);
        if (gpp_onnx_out_op(im, i, n->output[k], id, x->rank) < 0)
            return -1;
        start += sz[k];
    }
    return 0;
}

/* Slice of the features with step 1 (x[..., a:b] in PyTorch): a gpp slice.
 * starts, ends, axes, steps are constant inputs (opset 10+) or attributes. */
int gpp_onnx_slice(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t rows, cols, v[4][8], cnt[4] = {0, 0, -1, -1};
    static const char *what[] = {"starts", "ends", "axes", "steps"};
    const val_t *x = gpp_onnx_in(im, i, 0, V_OP);
    if (!x || gpp_onnx_shape(im, x, &rows, &cols) < 0)
        return -1;
    for (int k = 0; k < 4; k++) {
        const attr_t *a = gpp_onnx_attr(n, what[k]);
        if (n->n_input > (size_t)k + 1 && n->input[k + 1][0]) {
            const val_t *c = gpp_onnx_in(im, i, k + 1, -1);
            if (!c || (cnt[k] = gpp_onnx_ints(im, i, c, what[k], v[k], 8, NULL, 0)) < 0)
                return -1;
        } else if (a) {
            if (a->n_ints > 8)
                return gpp_onnx_fail(im, i, "attribute '%s' has more than 8 values", what[k]);
            for (size_t j = 0; j < a->n_ints; j++)
                v[k][j] = a->ints[j];
            cnt[k] = (int64_t)a->n_ints;
        }
    }
    int64_t axis = cnt[2] < 0 ? 0 : cnt[2] == 1 ? v[2][0] : -2, step = cnt[3] == 1 ? v[3][0] : 1;
    if (cnt[0] != 1 || cnt[1] != 1 || (cnt[2] >= 0 && cnt[2] != 1) || (cnt[3] >= 0 && cnt[3] != 1))
        return gpp_onnx_fail(im, i, "gpp maps Slice of one axis only (one start, end and axis)");
    if (s_feature_axis(im, i, x, axis, "slices") < 0)
        return -1;
    if (step != 1)
        return gpp_onnx_fail(im, i, "Slice step %lld: gpp slices contiguous features (step 1)",
                             (long long)step);
    int64_t b = v[0][0] < 0 ? v[0][0] + cols : v[0][0], e = v[1][0] < 0 ? v[1][0] + cols : v[1][0];
    b = b < 0 ? 0 : b > cols ? cols : b; /* ONNX clamps; torch writes INT64_MAX for "to the end" */
    e = e < 0 ? 0 : e > cols ? cols : e;
    if (e <= b)
        return gpp_onnx_fail(im, i, "Slice [%lld, %lld) of '%s' (%lld features) is empty",
                             (long long)b, (long long)e, x->name, (long long)cols);
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, n->name && *n->name ? n->name : n->output[0], 0, name);
    return gpp_onnx_out_op(im, i, n->output[0], gpp_graph_slice(im->g, name, x->op, b, e - b),
                           x->rank);
}

int gpp_onnx_alias(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = gpp_onnx_in(im, i, 0, -1);
    if (x && x->kind == V_CONST) { /* torch copies a weight it reads twice (cross-attention) */
        val_t *v = gpp_onnx_define(im, i, n->output[0], V_CONST);
        if (v)
            v->t = x->t;
        return v ? 0 : -1;
    }
    if (!x || !(x = gpp_onnx_in(im, i, 0, V_OP)))
        return -1;
    return gpp_onnx_out_op(im, i, n->output[0], x->op, x->rank);
}

int gpp_onnx_constant(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const attr_t *a = gpp_onnx_attr(n, "value");
    if (!a || !a->t)
        return gpp_onnx_fail(im, i, "gpp reads Constant nodes with a tensor 'value' only");
    val_t *v = gpp_onnx_define(im, i, n->output[0], V_CONST);
    if (!v)
        return -1;
    v->t = a->t;
    return 0;
}
