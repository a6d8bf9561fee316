/* gpp_onnx: ONNX import (see gpp_onnx.h). The decoder is protobuf-c over
 * gpp's schema subset (gpp_onnx.proto); this file walks the decoded graph
 * once, in the file's node order (ONNX requires a topological order), and
 * maps each node, or a short pattern of nodes, onto gpp ops. Values are
 * tracked by name in a hash table; each value is a gpp op's output, a
 * constant (an initializer or a Constant node), a gathered embedding table
 * awaiting its ReduceSum, or an output gpp cannot use. */
#include "model/gpp_onnx.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/gpp_onnx.pb-c.h"
#include "model/gpp_optable.h"

#define DIM_MAX ((int64_t)1 << 40) /* the op table's largest size */
#define SLOTS GPP_GRAPH_PARAM_SLOTS

typedef Gpponnx__Model model_t;
typedef Gpponnx__Graph graph_t;
typedef Gpponnx__Node node_t;
typedef Gpponnx__Tensor tensor_t;
typedef Gpponnx__Attribute attr_t;

/* V_SHAPE: a small integer vector computed from shapes (Shape -> Gather ->
 * Unsqueeze -> Concat -> Reshape, as torch exports x.view(x.size(0), -1)),
 * folded at import; the batch size is the symbol BATCH. */
enum { V_OP, V_CONST, V_GATHER, V_BAD, V_SHAPE };

#define SV_MAX 8        /* elements of a V_SHAPE vector */
#define BATCH INT64_MIN /* the symbolic batch dimension in a V_SHAPE */

typedef struct {
    const char *name; /* points into the decoded message */
    int kind;
    int op;               /* V_OP: the gpp op; V_GATHER: the indices input op */
    int rank;             /* V_OP: 2 ([N, cols]) or 3 ([N, rows, cols]), the batch included */
    const tensor_t *t;    /* V_CONST: the value; V_GATHER: the table */
    const char *producer; /* V_BAD: the node that made it */
    int64_t sv[SV_MAX];   /* V_SHAPE: the elements */
    int sn;               /* V_SHAPE: their number */
    int scalar;           /* V_SHAPE: a 0-d value (sn = 1) */
} val_t;

typedef struct {
    const char *origin;
    const graph_t *gr;
    gpp_graph_t *g;
    val_t *vals;
    int n_vals, cap_vals;
    int *hash; /* open addressing: value index + 1, 0 = empty */
    size_t hmask;
    int *phash; /* the node defining each value name: node index + 1 (pmask + 1 slots) */
    size_t pmask;
    float **w; /* per op x SLOTS */
    int w_ops;
    unsigned char *done; /* per node: consumed by a pattern */
    struct att *att;     /* attention patterns found before the walk */
    int *att_at;         /* per node: 1 + the pattern it completes, or 0 */
    gpp_err_t *err;
} imp_t;

static const char SUPPORTED[] =
    "gpp maps Gemm, MatMul(+Add bias), Relu, Gelu (and its Erf form), LayerNormalization, "
    "Concat, Split and Slice (last axis), Add, Gather+ReduceSum (embedding bag), self-attention "
    "(MatMul, Softmax, MatMul with the heads' Reshape/Transpose; nn.MultiheadAttention's "
    "packed export), Reshape/Unsqueeze/Squeeze/"
    "Flatten that add or drop a dimension of 1, Shape arithmetic, Identity, Constant";

/* ---- errors ---- */

static int s_fail(imp_t *im, int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* "FILE: node 3 'name' (Op): message"; node < 0: "FILE: message" */
static int s_fail(imp_t *im, int node, const char *fmt, ...)
{
    char msg[GPP_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(im->err->msg, sizeof im->err->msg, "%s", msg);
    if (node >= 0) {
        const node_t *n = im->gr->node[node];
        gpp_err_prefix(im->err, "node %d '%s' (%s)", node, n->name ? n->name : "",
                       n->op_type ? n->op_type : "");
    }
    gpp_err_prefix(im->err, "%s", im->origin);
    return -1;
}

/* ---- values by name ---- */

static uint64_t s_fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static val_t *s_find(imp_t *im, const char *name)
{
    if (!name || !*name)
        return NULL;
    for (size_t i = s_fnv(name) & im->hmask;; i = (i + 1) & im->hmask) {
        int v = im->hash[i];
        if (!v)
            return NULL;
        if (!strcmp(im->vals[v - 1].name, name))
            return &im->vals[v - 1];
    }
}

/* Defines a value; a name defined twice breaks ONNX's single assignment. */
static val_t *s_define(imp_t *im, int node, const char *name, int kind)
{
    if (!name || !*name) {
        s_fail(im, node, "a value has an empty name");
        return NULL;
    }
    if (s_find(im, name)) {
        s_fail(im, node, "value '%s' is defined twice (ONNX values are assigned once)", name);
        return NULL;
    }
    if (im->n_vals == im->cap_vals) { /* sized by s_import: never reached */
        s_fail(im, node, "too many values");
        return NULL;
    }
    val_t *v = &im->vals[im->n_vals++];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->kind = kind;
    size_t i = s_fnv(name) & im->hmask;
    while (im->hash[i])
        i = (i + 1) & im->hmask;
    im->hash[i] = im->n_vals;
    return v;
}

/* Value `name` read by node, of kind `want` (-1: any); NULL + message. */
static val_t *s_val(imp_t *im, int node, const char *name, int want)
{
    val_t *v = s_find(im, name);
    if (!v) {
        s_fail(im, node,
               "input '%s' is not a graph input, an initializer or the output of an earlier "
               "node (ONNX nodes must be in topological order)",
               name);
        return NULL;
    }
    if (v->kind == V_BAD) {
        s_fail(im, node, "input '%s' is an extra output of node '%s', which gpp does not compute",
               v->name, v->producer);
        return NULL;
    }
    if (want >= 0 && v->kind != want) {
        static const char *what[] = {"an activation (the output of a node or a graph input)",
                                     "a constant (an initializer)", "a gathered table (Gather)", "",
                                     "a shape (Shape)"};
        s_fail(im, node, "input '%s' must be %s", v->name, what[want]);
        return NULL;
    }
    if (want == V_OP && im->g->ops[v->op].type == GPP_OP_INPUT &&
        im->g->ops[v->op].input_kind == GPP_INPUT_INDICES) {
        s_fail(im, node,
               "input '%s' holds integer indices; gpp reads them only through a Gather of an "
               "embedding table",
               v->name);
        return NULL;
    }
    return v;
}

/* Input `k` of node as a value of kind `want` (-1: any). */
static val_t *s_in(imp_t *im, int node, int k, int want)
{
    const node_t *n = im->gr->node[node];
    if (k >= (int)n->n_input || !n->input[k][0]) {
        s_fail(im, node, "input %d is missing", k + 1);
        return NULL;
    }
    return s_val(im, node, n->input[k], want);
}

/* Nodes reading value `name`, plus 1 if it is a graph output; *first: the
 * first consuming node (-1 if none). */
static int s_uses(const imp_t *im, const char *name, int *first)
{
    int n = 0;
    *first = -1;
    for (size_t i = 0; i < im->gr->n_node; i++)
        for (size_t k = 0; k < im->gr->node[i]->n_input; k++)
            if (!strcmp(im->gr->node[i]->input[k], name)) {
                if (*first < 0)
                    *first = (int)i;
                n++;
            }
    for (size_t i = 0; i < im->gr->n_output; i++)
        if (im->gr->output[i]->name && !strcmp(im->gr->output[i]->name, name))
            n++;
    return n;
}

/* ---- attributes ---- */

static const attr_t *s_attr(const node_t *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
            return n->attribute[i];
    return NULL;
}

static int s_attr_int(imp_t *im, int node, const char *name, int64_t def, int64_t *out)
{
    const attr_t *a = s_attr(im->gr->node[node], name);
    if (!a) {
        *out = def;
        return 0;
    }
    if (!a->has_i && a->type != GPPONNX__ATTRIBUTE__TYPE__INT)
        return s_fail(im, node, "attribute '%s' must be an integer", name);
    *out = a->i;
    return 0;
}

static int s_attr_float(imp_t *im, int node, const char *name, double def, double *out)
{
    const attr_t *a = s_attr(im->gr->node[node], name);
    if (!a) {
        *out = def;
        return 0;
    }
    if (!a->has_f && a->type != GPPONNX__ATTRIBUTE__TYPE__FLOAT)
        return s_fail(im, node, "attribute '%s' must be a float", name);
    *out = a->f;
    return 0;
}

/* ---- tensors ---- */

static const char *s_dtype(int t)
{
    static const char *n[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                              "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                              "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return t >= 0 && t < (int)(sizeof n / sizeof n[0]) ? n[t] : "unknown";
}

/* Element count of t (dims in [0, 2^40], product too); -1 + message. */
static int64_t s_numel(imp_t *im, int node, const tensor_t *t)
{
    int64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0 || t->dims[i] > DIM_MAX || (t->dims[i] && n > DIM_MAX / t->dims[i]))
            return s_fail(im, node, "tensor '%s': dimension %zu is %lld (outside 0..2^40)",
                          t->name ? t->name : "", i, (long long)t->dims[i]);
        n *= t->dims[i];
    }
    return n;
}

/* Where t's elements are, checked against its dims: 0, or -1 + message. */
static int s_tensor_check(imp_t *im, int node, const tensor_t *t, int want_float, int64_t *numel)
{
    const char *tn = t->name ? t->name : "";
    if ((t->has_data_location && t->data_location == 1) || t->n_external_data)
        return s_fail(im, node,
                      "tensor '%s' keeps its data in an external file; save the model in one "
                      "file (onnx.save(model, path, save_as_external_data=False))",
                      tn);
    int dt = t->has_data_type ? t->data_type : 0;
    if (want_float && dt != GPPONNX__TENSOR__DATA_TYPE__FLOAT)
        return s_fail(im, node,
                      "tensor '%s' has element type %s; gpp trains fp32 weights: export the "
                      "model in float32 (model.float() before torch.onnx.export)",
                      tn, s_dtype(dt));
    if (!want_float && dt != GPPONNX__TENSOR__DATA_TYPE__INT64 &&
        dt != GPPONNX__TENSOR__DATA_TYPE__INT32)
        return s_fail(im, node, "tensor '%s' has element type %s where integers are needed", tn,
                      s_dtype(dt));
    if ((*numel = s_numel(im, node, t)) < 0)
        return -1;
    size_t esz = dt == GPPONNX__TENSOR__DATA_TYPE__INT64 ? 8 : 4;
    size_t have = t->has_raw_data                           ? t->raw_data.len / esz
                  : dt == GPPONNX__TENSOR__DATA_TYPE__FLOAT ? t->n_float_data
                  : dt == GPPONNX__TENSOR__DATA_TYPE__INT64 ? t->n_int64_data
                                                            : t->n_int32_data;
    if ((t->has_raw_data && t->raw_data.len % esz) || have != (size_t)*numel)
        return s_fail(im, node,
                      "tensor '%s' holds %zu elements of %s but its dims say %lld (truncated or "
                      "corrupt file)",
                      tn, have, s_dtype(dt), (long long)*numel);
    return 0;
}

/* Little-endian element i of raw data. */
static uint64_t s_le(const uint8_t *p, size_t esz)
{
    uint64_t v = 0;
    for (size_t b = 0; b < esz; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return v;
}

/* The fp32 elements of t, which must number `want` (caller frees). */
static float *s_floats(imp_t *im, int node, const tensor_t *t, int64_t want)
{
    int64_t n;
    if (s_tensor_check(im, node, t, 1, &n) < 0)
        return NULL;
    if (n != want) {
        s_fail(im, node, "tensor '%s' has %lld elements, expected %lld", t->name ? t->name : "",
               (long long)n, (long long)want);
        return NULL;
    }
    float *out = gpp_xcalloc((size_t)n + 1, sizeof *out);
    for (int64_t i = 0; i < n; i++) {
        if (t->has_raw_data) {
            uint32_t u = (uint32_t)s_le(t->raw_data.data + 4 * i, 4);
            memcpy(&out[i], &u, 4);
        } else
            out[i] = t->float_data[i];
        if (!isfinite(out[i])) {
            s_fail(im, node, "tensor '%s' element %lld is not finite", t->name ? t->name : "",
                   (long long)i);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* Integer element i of t (checked by s_tensor_check). */
static int64_t s_int_at(const tensor_t *t, int64_t i)
{
    if (t->data_type == GPPONNX__TENSOR__DATA_TYPE__INT64)
        return t->has_raw_data ? (int64_t)s_le(t->raw_data.data + 8 * i, 8) : t->int64_data[i];
    return t->has_raw_data ? (int32_t)s_le(t->raw_data.data + 4 * i, 4) : t->int32_data[i];
}

/* A 2-d fp32 constant's dims. */
static int s_matrix(imp_t *im, int node, const val_t *v, int64_t *r, int64_t *c)
{
    if (v->t->n_dims != 2)
        return s_fail(im, node, "weight '%s' must be 2-d, it has %zu dimensions", v->name,
                      v->t->n_dims);
    *r = v->t->dims[0];
    *c = v->t->dims[1];
    if (*r < 1 || *c < 1 || *r > DIM_MAX || *c > DIM_MAX)
        return s_fail(im, node, "weight '%s' is [%lld, %lld]: an empty or oversized matrix",
                      v->name, (long long)*r, (long long)*c);
    return 0;
}

/* ---- gpp ops ---- */

/* A unique op name of at most 63 bytes from base ("x.weight" or "x.bias"
 * -> "x" when strip_weight, so that gpp's parameters take PyTorch's names). */
static void s_opname(imp_t *im, const char *base, int strip_weight, char out[GPP_NAME_LEN])
{
    char b[GPP_NAME_LEN];
    size_t n = strlen(base);
    if (strip_weight && n > 7 && !strcmp(base + n - 7, ".weight"))
        n -= 7;
    else if (strip_weight && n > 5 && !strcmp(base + n - 5, ".bias"))
        n -= 5;
    if (n == 0)
        base = "op", n = 2;
    snprintf(b, sizeof b, "%.*s", (int)(n < GPP_NAME_LEN - 1 ? n : GPP_NAME_LEN - 1), base);
    snprintf(out, GPP_NAME_LEN, "%s", b);
    for (int k = 2;; k++) {
        int taken = 0;
        for (int i = 0; i < im->g->n_ops && !taken; i++)
            taken = !strcmp(im->g->ops[i].name, out);
        if (!taken)
            return;
        char sfx[16];
        int sl = snprintf(sfx, sizeof sfx, "~%d", k);
        snprintf(
            out, GPP_NAME_LEN, "%.*s%s",
            (int)(GPP_NAME_LEN - 1 - sl < (int)strlen(b) ? GPP_NAME_LEN - 1 - sl : (int)strlen(b)),
            b, sfx);
    }
}

/* Records the initial value of op's parameter slot k (takes w). */
static void s_weight(imp_t *im, int op, int k, float *w)
{
    if (op >= im->w_ops) {
        int n = op + 1 > 2 * im->w_ops ? op + 1 : 2 * im->w_ops;
        im->w = gpp_xrealloc(im->w, (size_t)n * SLOTS * sizeof *im->w);
        memset(im->w + (size_t)im->w_ops * SLOTS, 0,
               (size_t)(n - im->w_ops) * SLOTS * sizeof *im->w);
        im->w_ops = n;
    }
    free(im->w[(size_t)op * SLOTS + k]);
    im->w[(size_t)op * SLOTS + k] = w;
}

/* The node's output as the output of gpp op `op` (rank with the batch);
 * derives the op's shape (its inputs are derived: ops come in order). */
static int s_out_op(imp_t *im, int node, const char *name, int op, int rank)
{
    gpp_op_t *o = &im->g->ops[op];
    if (o->type != GPP_OP_INPUT && gpp_op_derive(im->g, o, im->err) < 0)
        return s_fail(im, node, "%s", im->err->msg);
    val_t *v = s_define(im, node, name, V_OP);
    if (!v)
        return -1;
    v->op = op;
    v->rank = rank;
    return 0;
}

/* The value's shape per sample (its producer's). */
static int s_shape(imp_t *im, const val_t *x, int64_t *rows, int64_t *cols)
{
    *rows = im->g->ops[x->op].rows;
    *cols = im->g->ops[x->op].cols;
    return 0;
}

/* x W^T + b as a gpp linear. wt: the constant holds W^T ([in, out]);
 * bias: the bias constant or NULL. out_name: the ONNX value it defines. */
static int s_linear(imp_t *im, int node, const val_t *x, const val_t *wv, int wt, const val_t *bias,
                    const char *out_name)
{
    int64_t r = 0, c = 0, rows, in; /* set by s_matrix */
    if (s_matrix(im, node, wv, &r, &c) < 0 || s_shape(im, x, &rows, &in) < 0)
        return -1;
    int64_t out = wt ? c : r, win = wt ? r : c;
    if (win != in)
        return s_fail(im, node,
                      "weight '%s' is [%lld, %lld]: %lld input features, but '%s' has %lld",
                      wv->name, (long long)r, (long long)c, (long long)win, x->name, (long long)in);
    float *w = s_floats(im, node, wv->t, r * c), *b = NULL;
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
    if (bias && !(b = s_floats(im, node, bias->t, out))) {
        free(w);
        return s_fail(im, node, "bias '%s' must hold %lld values (one per output feature): %s",
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
    s_opname(im, base, base != im->gr->node[node]->name, name);
    int id = gpp_graph_linear(im->g, name, x->op, out, bias != NULL);
    s_weight(im, id, 0, w);
    if (b)
        s_weight(im, id, 1, b);
    return s_out_op(im, node, out_name, id, x->rank);
}

/* ---- node mappings ---- */

static int s_gemm(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t ta, tb;
    double alpha = 1, beta = 1; /* set by s_attr_float */
    if (s_attr_int(im, i, "transA", 0, &ta) < 0 || s_attr_int(im, i, "transB", 0, &tb) < 0 ||
        s_attr_float(im, i, "alpha", 1.0, &alpha) < 0 ||
        s_attr_float(im, i, "beta", 1.0, &beta) < 0)
        return -1;
    if (ta || alpha != 1.0 || (n->n_input > 2 && n->input[2][0] && beta != 1.0))
        return s_fail(im, i,
                      "gpp maps Gemm with transA=0, alpha=1, beta=1 (a Linear layer); "
                      "this node has transA=%lld alpha=%g beta=%g",
                      (long long)ta, alpha, beta);
    const val_t *x = s_in(im, i, 0, V_OP), *w = x ? s_in(im, i, 1, V_CONST) : NULL, *b = NULL;
    if (!w)
        return -1;
    if (x->rank != 2)
        return s_fail(im, i, "Gemm input '%s' must be 2-d", x->name);
    if (n->n_input > 2 && n->input[2][0] && !(b = s_in(im, i, 2, V_CONST)))
        return -1;
    return s_linear(im, i, x, w, !tb, b, n->output[0]);
}

static int s_matmul(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = s_in(im, i, 0, V_OP), *w = x ? s_in(im, i, 1, V_CONST) : NULL, *b = NULL;
    if (!w)
        return -1;
    /* a bias: the one consumer is an Add of a constant */
    const char *out = n->output[0];
    int c;
    if (s_uses(im, out, &c) == 1 && c > i && im->gr->node[c]->op_type &&
        !strcmp(im->gr->node[c]->op_type, "Add") && im->gr->node[c]->n_input == 2 &&
        im->gr->node[c]->n_output >= 1) {
        const node_t *add = im->gr->node[c];
        const val_t *o = s_find(im, add->input[!strcmp(add->input[0], out) ? 1 : 0]);
        if (o && o->kind == V_CONST) {
            b = o;
            out = add->output[0];
            im->done[c] = 1;
        }
    }
    return s_linear(im, i, x, w, 1, b, out);
}

static int s_unary(imp_t *im, int i, gpp_op_type_t t, const char *in_name, const char *out_name)
{
    const val_t *x = s_val(im, i, in_name, V_OP);
    if (!x)
        return -1;
    char name[GPP_NAME_LEN];
    s_opname(im, im->gr->node[i]->name ? im->gr->node[i]->name : gpp_op_type_name(t), 0, name);
    return s_out_op(im, i, out_name, gpp_graph_unary(im->g, t, name, x->op), x->rank);
}

/* A constant scalar's value, or NAN. */
static double s_scalar(imp_t *im, const char *name)
{
    const val_t *v = s_find(im, name);
    int64_t n;
    gpp_err_t e = {{0}}, *keep = im->err;
    if (!v || v->kind != V_CONST || v->t->data_type != GPPONNX__TENSOR__DATA_TYPE__FLOAT)
        return NAN;
    im->err = &e; /* a mismatch only means "not the pattern" */
    float *f =
        s_tensor_check(im, -1, v->t, 1, &n) == 0 && n == 1 ? s_floats(im, -1, v->t, 1) : NULL;
    im->err = keep;
    double r = f ? f[0] : NAN;
    free(f);
    return r;
}

/* The single node reading value `name` if it has op type `op` (the other
 * input, when there are two, must not be `name` too); -1 otherwise. */
static int s_next(imp_t *im, const char *name, const char *op)
{
    int c;
    if (s_uses(im, name, &c) != 1 || c < 0 || !im->gr->node[c]->op_type ||
        strcmp(im->gr->node[c]->op_type, op) || im->gr->node[c]->n_output < 1)
        return -1;
    return c;
}

/* The other input of a two-input node than `name`, or NULL. */
static const char *s_other(const node_t *n, const char *name)
{
    if (n->n_input != 2)
        return NULL;
    return !strcmp(n->input[0], name)   ? n->input[1]
           : !strcmp(n->input[1], name) ? n->input[0]
                                        : NULL;
}

/* GELU as torch exports it without a Gelu op:
 * Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5). Returns 1 when
 * node i starts it (mapped), 0 when not, -1 on error. */
static int s_gelu_erf(imp_t *im, int i)
{
    const node_t *d = im->gr->node[i];
    if (d->n_input != 2 || d->n_output < 1 || fabs(s_scalar(im, d->input[1]) - sqrt(2.0)) > 1e-6)
        return 0;
    const char *x = d->input[0];
    int e = s_next(im, d->output[0], "Erf");
    int a = e < 0 ? -1 : s_next(im, im->gr->node[e]->output[0], "Add");
    if (a < 0 ||
        fabs(s_scalar(im, s_other(im->gr->node[a], im->gr->node[e]->output[0])) - 1.0) > 1e-6)
        return 0;
    int m1 = s_next(im, im->gr->node[a]->output[0], "Mul");
    if (m1 < 0 || !s_other(im->gr->node[m1], im->gr->node[a]->output[0]) ||
        strcmp(s_other(im->gr->node[m1], im->gr->node[a]->output[0]), x))
        return 0;
    int m2 = s_next(im, im->gr->node[m1]->output[0], "Mul");
    if (m2 < 0 ||
        fabs(s_scalar(im, s_other(im->gr->node[m2], im->gr->node[m1]->output[0])) - 0.5) > 1e-6)
        return 0;
    im->done[e] = im->done[a] = im->done[m1] = im->done[m2] = 1;
    return s_unary(im, i, GPP_OP_GELU, x, im->gr->node[m2]->output[0]) < 0 ? -1 : 1;
}

static int s_layernorm(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis, rows, cols;
    double eps = 0; /* set by s_attr_float */
    if (s_attr_int(im, i, "axis", -1, &axis) < 0 || s_attr_float(im, i, "epsilon", 1e-5, &eps) < 0)
        return -1;
    const val_t *x = s_in(im, i, 0, V_OP), *sc = x ? s_in(im, i, 1, V_CONST) : NULL, *b = NULL;
    if (!sc || s_shape(im, x, &rows, &cols) < 0)
        return -1;
    if (axis != -1 && axis != x->rank - 1)
        return s_fail(im, i,
                      "gpp normalises over the last axis only (axis -1); this node has "
                      "axis %lld",
                      (long long)axis);
    /* 1e-5: PyTorch's nn.LayerNorm default, gpp's fixed epsilon (gpp_ops.h) */
    if (fabs(eps - 1e-5) > 1e-8)
        return s_fail(im, i,
                      "epsilon %g: gpp's layernorm uses 1e-5 (PyTorch's default); use "
                      "nn.LayerNorm(..., eps=1e-5)",
                      eps);
    if (n->n_input > 2 && n->input[2][0] && !(b = s_in(im, i, 2, V_CONST)))
        return -1;
    float *gw = s_floats(im, i, sc->t, cols), *bw = b ? s_floats(im, i, b->t, cols) : NULL;
    if (!gw || (b && !bw)) {
        free(gw);
        free(bw);
        return -1;
    }
    char name[GPP_NAME_LEN];
    s_opname(im, sc->name, 1, name);
    int id = gpp_graph_unary(im->g, GPP_OP_LAYERNORM, name, x->op);
    s_weight(im, id, 0, gw);
    if (bw)
        s_weight(im, id, 1, bw);
    return s_out_op(im, i, n->output[0], id, x->rank);
}

static int s_concat(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis;
    if (s_attr_int(im, i, "axis", 0, &axis) < 0 || !s_attr(n, "axis"))
        return s_fail(im, i, "Concat needs its axis attribute");
    if (n->n_input < 1)
        return s_fail(im, i, "Concat has no inputs");
    int *ins = gpp_xcalloc(n->n_input, sizeof *ins), rank = 0;
    for (size_t k = 0; k < n->n_input; k++) {
        const val_t *x = s_in(im, i, (int)k, V_OP);
        if (!x) {
            free(ins);
            return -1;
        }
        if (k && x->rank != rank) {
            free(ins);
            return s_fail(im, i, "inputs of different rank");
        }
        rank = x->rank;
        ins[k] = x->op;
    }
    if (axis != -1 && axis != rank - 1) {
        free(ins);
        return s_fail(im, i,
                      "gpp concatenates features (the last axis, %d or -1); this node "
                      "has axis %lld",
                      rank - 1, (long long)axis);
    }
    char name[GPP_NAME_LEN];
    s_opname(im, n->name ? n->name : "concat", 0, name);
    int id = gpp_graph_concat(im->g, name, (int)n->n_input, ins);
    free(ins);
    return s_out_op(im, i, n->output[0], id, rank);
}

static int s_add(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *a = s_in(im, i, 0, -1), *b = a ? s_in(im, i, 1, -1) : NULL;
    if (!b)
        return -1;
    if (a->kind != V_OP || b->kind != V_OP)
        return s_fail(im, i,
                      "Add of a constant: gpp maps it only as the bias right after a "
                      "MatMul (fold other constants into the weights)");
    if (a->rank != b->rank)
        return s_fail(im, i, "Add of different ranks (gpp does not broadcast)");
    char name[GPP_NAME_LEN];
    s_opname(im, n->name ? n->name : "add", 0, name);
    return s_out_op(im, i, n->output[0], gpp_graph_add2(im->g, name, a->op, b->op), a->rank);
}

/* The integers of value v (an integer constant of rank 0 or 1, or a folded
 * shape) into out[cap]; *scalar (may be NULL): v is 0-d. The batch symbol
 * only where allow_batch. The count, or -1 + message naming what it is. */
static int s_ints(imp_t *im, int i, const val_t *v, const char *what, int64_t *out, int cap,
                  int *scalar, int allow_batch)
{
    int64_t n;
    int sc;
    if (v->kind == V_SHAPE) {
        n = v->sn, sc = v->scalar;
        if (n <= cap)
            memcpy(out, v->sv, (size_t)n * sizeof *out);
    } else if (v->kind == V_CONST) {
        if (s_tensor_check(im, i, v->t, 0, &n) < 0)
            return -1;
        sc = v->t->n_dims == 0;
        for (int64_t k = 0; k < n && n <= cap && v->t->n_dims <= 1; k++)
            out[k] = s_int_at(v->t, k);
    } else
        return s_fail(im, i, "%s '%s' must be a constant", what, v->name);
    if ((v->kind == V_CONST && v->t->n_dims > 1) || n > cap)
        return s_fail(im, i, "%s '%s' must be a 1-d integer tensor of at most %d values", what,
                      v->name, cap);
    for (int64_t k = 0; k < n && !allow_batch; k++)
        if (out[k] == BATCH)
            return s_fail(im, i, "%s '%s' holds the batch size, which gpp leaves symbolic", what,
                          v->name);
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
    return s_fail(im, i,
                  "gpp %s only along the features (the last axis, %d or -1); this node "
                  "has axis %lld",
                  how, x->rank - 1, (long long)axis);
}

#define SPLIT_MAX 4096 /* outputs of one Split */

/* Split along the features: a gpp slice per output. The sizes are the
 * 'split' input (opset 13+) or attribute (opset < 13), else equal parts
 * (num_outputs in opset 18, or the number of outputs). */
static int s_split(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis, rows, cols, sz[SPLIT_MAX], nout = (int64_t)n->n_output, np;
    const val_t *x = s_in(im, i, 0, V_OP);
    if (!x || s_attr_int(im, i, "axis", 0, &axis) < 0 ||
        s_attr_int(im, i, "num_outputs", nout, &np) < 0 ||
        s_feature_axis(im, i, x, axis, "splits") < 0 || s_shape(im, x, &rows, &cols) < 0)
        return -1;
    if (nout > SPLIT_MAX || np != nout)
        return s_fail(im, i,
                      "%lld outputs, num_outputs %lld: gpp splits into 1..%d outputs, one "
                      "per part",
                      (long long)nout, (long long)np, SPLIT_MAX);
    const attr_t *a = s_attr(n, "split");
    int have = 0;
    if (n->n_input > 1 && n->input[1][0]) {
        const val_t *sv = s_in(im, i, 1, -1);
        if (!sv || (have = s_ints(im, i, sv, "split sizes", sz, SPLIT_MAX, NULL, 0)) < 0)
            return -1;
    } else if (a) {
        if (a->n_ints > SPLIT_MAX)
            return s_fail(im, i, "attribute 'split' has more than %d sizes", SPLIT_MAX);
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
            return s_fail(im, i,
                          "split size %d is %lld: gpp needs every part non-empty (at "
                          "most the %lld features of '%s')",
                          k + 1, (long long)sz[k], (long long)cols, x->name);
        sum += sz[k];
    }
    if (have != nout || sum != cols)
        return s_fail(im, i,
                      "split sizes give %d parts of %lld features in all, but the node has "
                      "%lld outputs and '%s' %lld features",
                      have, (long long)sum, (long long)nout, x->name, (long long)cols);
    int64_t start = 0;
    for (int64_t k = 0; k < nout; k++) {
        char name[GPP_NAME_LEN];
        s_opname(im, n->output[k], 0, name);
        int id = gpp_graph_slice(im->g, name, x->op, start, sz[k]);
        if (s_out_op(im, i, n->output[k], id, x->rank) < 0)
            return -1;
        start += sz[k];
    }
    return 0;
}

/* Slice of the features with step 1 (x[..., a:b] in PyTorch): a gpp slice.
 * starts, ends, axes, steps are constant inputs (opset 10+) or attributes. */
static int s_slice(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t rows, cols, v[4][8], cnt[4] = {0, 0, -1, -1};
    static const char *what[] = {"starts", "ends", "axes", "steps"};
    const val_t *x = s_in(im, i, 0, V_OP);
    if (!x || s_shape(im, x, &rows, &cols) < 0)
        return -1;
    for (int k = 0; k < 4; k++) {
        const attr_t *a = s_attr(n, what[k]);
        if (n->n_input > (size_t)k + 1 && n->input[k + 1][0]) {
            const val_t *c = s_in(im, i, k + 1, -1);
            if (!c || (cnt[k] = s_ints(im, i, c, what[k], v[k], 8, NULL, 0)) < 0)
                return -1;
        } else if (a) {
            if (a->n_ints > 8)
                return s_fail(im, i, "attribute '%s' has more than 8 values", what[k]);
            for (size_t j = 0; j < a->n_ints; j++)
                v[k][j] = a->ints[j];
            cnt[k] = (int64_t)a->n_ints;
        }
    }
    int64_t axis = cnt[2] < 0 ? 0 : cnt[2] == 1 ? v[2][0] : -2, step = cnt[3] == 1 ? v[3][0] : 1;
    if (cnt[0] != 1 || cnt[1] != 1 || (cnt[2] >= 0 && cnt[2] != 1) || (cnt[3] >= 0 && cnt[3] != 1))
        return s_fail(im, i, "gpp maps Slice of one axis only (one start, end and axis)");
    if (s_feature_axis(im, i, x, axis, "slices") < 0)
        return -1;
    if (step != 1)
        return s_fail(im, i, "Slice step %lld: gpp slices contiguous features (step 1)",
                      (long long)step);
    int64_t b = v[0][0] < 0 ? v[0][0] + cols : v[0][0], e = v[1][0] < 0 ? v[1][0] + cols : v[1][0];
    b = b < 0 ? 0 : b > cols ? cols : b; /* ONNX clamps; torch writes INT64_MAX for "to the end" */
    e = e < 0 ? 0 : e > cols ? cols : e;
    if (e <= b)
        return s_fail(im, i, "Slice [%lld, %lld) of '%s' (%lld features) is empty", (long long)b,
                      (long long)e, x->name, (long long)cols);
    char name[GPP_NAME_LEN];
    s_opname(im, n->name && *n->name ? n->name : n->output[0], 0, name);
    return s_out_op(im, i, n->output[0], gpp_graph_slice(im->g, name, x->op, b, e - b), x->rank);
}

static int s_gather(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int64_t axis, r = 0, c = 0; /* r, c set by s_matrix */
    if (s_attr_int(im, i, "axis", 0, &axis) < 0)
        return -1;
    const val_t *t = s_in(im, i, 0, V_CONST);
    if (!t || s_matrix(im, i, t, &r, &c) < 0)
        return -1;
    const val_t *ix = s_find(im, n->n_input > 1 ? n->input[1] : "");
    gpp_op_t *op = ix && ix->kind == V_OP ? &im->g->ops[ix->op] : NULL;
    if (!op || op->type != GPP_OP_INPUT || op->input_kind != GPP_INPUT_INDICES || axis != 0)
        return s_fail(im, i,
                      "gpp maps Gather only as an embedding lookup: axis 0 of a 2-d "
                      "table, indices a 2-d integer graph input [batch, bag]");
    if (!op->table_rows || r < op->table_rows)
        op->table_rows = r; /* indices must be valid for every table they index */
    val_t *v = s_define(im, i, n->output[0], V_GATHER);
    if (!v)
        return -1;
    v->op = ix->op;
    v->t = t->t;
    return 0;
}

static int s_reducesum(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *gv = s_in(im, i, 0, V_GATHER);
    if (!gv)
        return -1;
    int64_t keep, axis = 0, na = 0, r = gv->t->dims[0], c = gv->t->dims[1];
    if (s_attr_int(im, i, "keepdims", 1, &keep) < 0)
        return -1;
    const attr_t *a = s_attr(n, "axes");
    if (a) {
        na = (int64_t)a->n_ints;
        axis = na ? a->ints[0] : 0;
    } else if (n->n_input > 1 && n->input[1][0]) { /* opset 13: axes is an input */
        const val_t *av = s_in(im, i, 1, V_CONST);
        if (!av || s_tensor_check(im, i, av->t, 0, &na) < 0)
            return -1;
        axis = na ? s_int_at(av->t, 0) : 0;
    }
    if (na != 1 || (axis != 1 && axis != -2))
        return s_fail(im, i,
                      "gpp maps ReduceSum only over axis 1 of a Gather (the bag): an "
                      "embedding bag");
    char name[GPP_NAME_LEN];
    s_opname(im, gv->t->name ? gv->t->name : "embedding", 1, name);
    float *w = s_floats(im, i, gv->t, r * c);
    if (!w)
        return -1;
    int id = gpp_graph_embedding_bag(im->g, name, gv->op, r, c);
    s_weight(im, id, 0, w);
    return s_out_op(im, i, n->output[0], id, keep ? 3 : 2);
}

static int s_alias(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = s_in(im, i, 0, -1);
    if (x && x->kind == V_CONST) { /* torch copies a weight it reads twice (cross-attention) */
        val_t *v = s_define(im, i, n->output[0], V_CONST);
        if (v)
            v->t = x->t;
        return v ? 0 : -1;
    }
    if (!x || !(x = s_in(im, i, 0, V_OP)))
        return -1;
    return s_out_op(im, i, n->output[0], x->op, x->rank);
}

static int s_constant(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const attr_t *a = s_attr(n, "value");
    if (!a || !a->t)
        return s_fail(im, i, "gpp reads Constant nodes with a tensor 'value' only");
    val_t *v = s_define(im, i, n->output[0], V_CONST);
    if (!v)
        return -1;
    v->t = a->t;
    return 0;
}

/* ---- shapes: folded integer vectors and per-sample layouts ---- */

/* The ONNX dims of activation x: d[0] the batch, then [rows,] cols. */
static int s_dims(const imp_t *im, const val_t *x, int64_t d[3])
{
    d[0] = BATCH;
    d[x->rank - 1] = im->g->ops[x->op].cols;
    if (x->rank == 3)
        d[1] = im->g->ops[x->op].rows;
    return x->rank;
}

/* "[N, 4, 8]" */
static const char *s_dimstr(const int64_t *d, int n, char *buf, size_t cap)
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
static int s_is_ints(imp_t *im, const char *name)
{
    const val_t *v = s_find(im, name);
    return v && (v->kind == V_SHAPE || (v->kind == V_CONST && v->t->has_data_type &&
                                        (v->t->data_type == GPPONNX__TENSOR__DATA_TYPE__INT64 ||
                                         v->t->data_type == GPPONNX__TENSOR__DATA_TYPE__INT32)));
}

/* Integers from input k of node i (see s_ints). */
static int s_in_ints(imp_t *im, int i, int k, const char *what, int64_t *out, int cap, int *scalar,
                     int allow_batch)
{
    const val_t *v = s_in(im, i, k, -1);
    return v ? s_ints(im, i, v, what, out, cap, scalar, allow_batch) : -1;
}

/* Axes from the 'axes' attribute (older opsets) or input 1: the count, -1
 * for none, -2 + message on error. */
static int s_axes(imp_t *im, int i, int64_t *out, int cap)
{
    const node_t *n = im->gr->node[i];
    const attr_t *a = s_attr(n, "axes");
    if (n->n_input > 1 && n->input[1][0]) {
        int r = s_in_ints(im, i, 1, "axes", out, cap, NULL, 0);
        return r < 0 ? -2 : r;
    }
    if (!a)
        return -1;
    if (a->n_ints > (size_t)cap)
        return s_fail(im, i, "attribute 'axes' has more than %d values", cap) - 1;
    for (size_t k = 0; k < a->n_ints; k++)
        out[k] = a->ints[k];
    return (int)a->n_ints;
}

static int s_def_shape(imp_t *im, int i, const int64_t *v, int n, int scalar)
{
    val_t *o = s_define(im, i, im->gr->node[i]->output[0], V_SHAPE);
    if (!o)
        return -1;
    memcpy(o->sv, v, (size_t)n * sizeof *v);
    o->sn = n;
    o->scalar = scalar;
    return 0;
}

/* Shape, and Gather, Unsqueeze, Squeeze, Concat, Slice, Cast of integer
 * vectors: computed here, the batch kept as a symbol. */
static int s_fold(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const char *op = n->op_type;
    int64_t a[SV_MAX], b[SV_MAX], out[SV_MAX], axis;
    int na, nb = 0, no = 0, sa = 0, sb = 0;
    if (!strcmp(op, "Shape")) {
        const val_t *x = s_in(im, i, 0, V_OP);
        int64_t st, en, d[3];
        if (!x)
            return -1;
        int r = s_dims(im, x, d);
        if (s_attr_int(im, i, "start", 0, &st) < 0 || s_attr_int(im, i, "end", r, &en) < 0)
            return -1;
        st = st < 0 ? st + r : st, en = en < 0 ? en + r : en;
        st = st < 0 ? 0 : st > r ? r : st, en = en < 0 ? 0 : en > r ? r : en;
        for (int64_t k = st; k < en; k++)
            out[no++] = d[k];
        return s_def_shape(im, i, out, no, 0);
    }
    if (!strcmp(op, "Concat")) {
        if (s_attr_int(im, i, "axis", 0, &axis) < 0)
            return -1;
        if (axis != 0 && axis != -1)
            return s_fail(im, i, "a Concat of shapes must have axis 0");
        for (size_t k = 0; k < n->n_input; k++) {
            if ((na = s_in_ints(im, i, (int)k, "Concat input", a, SV_MAX, NULL, 1)) < 0)
                return -1;
            if (no + na > SV_MAX)
                return s_fail(im, i, "a shape of more than %d dimensions", SV_MAX);
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
        if (s_attr_int(im, i, "axis", 0, &axis) < 0 ||
            (nb = s_in_ints(im, i, 1, "indices", b, SV_MAX, &sb, 0)) < 0)
            return -1;
        if (sa || axis != 0)
            return s_fail(im, i, "a Gather from a shape must have axis 0 of a 1-d shape");
        for (int k = 0; k < nb; k++) {
            int64_t j = b[k] < 0 ? b[k] + na : b[k];
            if (j < 0 || j >= na)
                return s_fail(im, i, "index %lld is outside the shape's %d dimensions",
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
            return s_fail(im, i, "Unsqueeze needs its axes");
        if (unsq ? !(sa && nb == 1 && (b[0] == 0 || b[0] == -1))
                 : !(!sa && na == 1 && (nb == -1 || (nb == 1 && (b[0] == 0 || b[0] == -1)))))
            return s_fail(im, i,
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
                return s_fail(im, i, "a Slice of a shape takes one %s", what[k]);
        }
        int64_t st[1] = {v[0][0]}, en[1] = {v[1][0]}, ax[1] = {v[2][0]}, sp[1] = {v[3][0]};
        if (sa || (ax[0] != 0 && ax[0] != -1) || sp[0] != 1)
            return s_fail(im, i, "gpp folds a Slice of a shape along axis 0 with step 1 only");
        int64_t b0 = st[0] < 0 ? st[0] + na : st[0], e0 = en[0] < 0 ? en[0] + na : en[0];
        b0 = b0 < 0 ? 0 : b0 > na ? na : b0, e0 = e0 < 0 ? 0 : e0 > na ? na : e0;
        for (int64_t k = b0; k < e0; k++)
            out[no++] = a[k];
        return s_def_shape(im, i, out, no, 0);
    }
    return s_fail(im, i, "gpp does not compute %s of shapes", op);
}

/* Activation x seen with ONNX dims d[rank] (d[0] the batch): gpp keeps a
 * sample a [rows, cols] matrix, so only a dimension of 1 may come or go. */
static int s_relayout(imp_t *im, int i, const val_t *x, const int64_t *d, int rank,
                      const char *out_name)
{
    int64_t xd[3], rows = rank == 3 ? d[1] : 1, cols = d[rank - 1];
    int xr = s_dims(im, x, xd);
    char a[96], b[96];
    if (rank < 2 || rank > 3 || d[0] != BATCH || rows != im->g->ops[x->op].rows ||
        cols != im->g->ops[x->op].cols)
        return s_fail(im, i,
                      "'%s' %s would become %s: gpp keeps each sample a [rows, cols] matrix, the "
                      "batch first (only a dimension of 1 may be added or dropped; heads are "
                      "reshaped only inside the self-attention pattern, docs/graph-format.md)",
                      x->name, s_dimstr(xd, xr, a, sizeof a), s_dimstr(d, rank, b, sizeof b));
    return s_out_op(im, i, out_name, x->op, rank);
}

/* The target of Reshape node i for an input of dims d[xr]: 0 (copy) and -1
 * (infer) resolved, the batch first as BATCH. The rank, or -1 + message. */
static int s_reshape_target(imp_t *im, int i, const int64_t *d, int xr, int64_t t[SV_MAX])
{
    const node_t *n = im->gr->node[i];
    int64_t zero, known = 1, per = 1;
    if (s_attr_int(im, i, "allowzero", 0, &zero) < 0)
        return -1;
    int nt = s_in_ints(im, i, 1, "shape", t, SV_MAX, NULL, 1), infer = -1;
    if (nt < 0)
        return -1;
    for (int k = 1; k < xr; k++)
        per *= d[k];
    for (int k = 0; k < nt; k++) {
        if (t[k] == 0 && !zero) {
            if (k >= xr)
                return s_fail(im, i, "shape element %d is 0 (copy) but the input has rank %d", k,
                              xr);
            t[k] = d[k];
        }
        if (t[k] == BATCH && k)
            return s_fail(im, i,
                          "output '%s' would have the batch as dimension %d; gpp keeps "
                          "it first",
                          n->output[0], k);
        if (t[k] == -1 && infer < 0)
            infer = k;
        else if ((t[k] < 1 && t[k] != BATCH) || (k && known > DIM_MAX / t[k]))
            return s_fail(im, i, "shape element %d is %lld", k, (long long)t[k]);
        else if (k)
            known *= t[k];
    }
    if (infer > 0) {
        if (t[0] != BATCH || known < 1 || per % known)
            return s_fail(im, i, "cannot infer dimension %d of '%s' from %lld features per sample",
                          infer, n->output[0], (long long)per);
        t[infer] = per / known;
    } else if (infer == 0) { /* the batch from the rest */
        if (known != per)
            return s_fail(im, i, "output '%s' would mix the batch with the features", n->output[0]);
        t[0] = BATCH;
    } else if (t[0] != BATCH) {
        return s_fail(im, i,
                      "output '%s' has a fixed first dimension %lld: gpp keeps the batch "
                      "first and symbolic (use 0 or -1 there)",
                      n->output[0], (long long)t[0]);
    }
    return nt;
}

static int s_reshape(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = s_in(im, i, 0, V_OP);
    int64_t t[SV_MAX], d[3];
    if (!x)
        return -1;
    int nt = s_reshape_target(im, i, d, s_dims(im, x, d), t);
    if (nt < 0)
        return -1;
    return s_relayout(im, i, x, t, nt, n->output[0]);
}

/* Unsqueeze, Squeeze and Flatten of an activation */
static int s_layout(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const val_t *x = s_in(im, i, 0, V_OP);
    int64_t d[3], o[SV_MAX], ax[SV_MAX], axis;
    if (!x)
        return -1;
    int xr = s_dims(im, x, d), no = 0;
    if (!strcmp(n->op_type, "Flatten")) {
        if (s_attr_int(im, i, "axis", 1, &axis) < 0)
            return -1;
        if (axis != 1 && axis != 1 - xr)
            return s_fail(im, i, "gpp maps Flatten with axis 1 only (the batch kept)");
        o[0] = BATCH, o[1] = 1;
        for (int k = 1; k < xr; k++)
            o[1] *= d[k];
        return s_relayout(im, i, x, o, 2, n->output[0]);
    }
    int unsq = n->op_type[0] == 'U', na = s_axes(im, i, ax, SV_MAX);
    if (na < -1)
        return -1;
    if (unsq && na < 1)
        return s_fail(im, i, "Unsqueeze needs its axes");
    int r = unsq ? xr + na : xr, drop[SV_MAX + 3] = {0};
    for (int k = 0; k < na; k++) {
        int64_t a = ax[k] < 0 ? ax[k] + r : ax[k];
        if (a < 1 || a >= r || r > SV_MAX)
            return s_fail(im, i, "axis %lld: gpp keeps the batch as dimension 0", (long long)ax[k]);
        drop[a] = 1;
    }
    if (unsq) {
        for (int k = 0, j = 0; k < r; k++)
            o[no++] = drop[k] ? 1 : d[j++];
    } else {
        for (int k = 0; k < xr; k++) {
            int gone = na < 0 ? k > 0 && d[k] == 1 : drop[k];
            if (gone && d[k] != 1)
                return s_fail(im, i, "dimension %d of '%s' is %lld, not 1", k, x->name,
                              (long long)d[k]);
            if (!gone)
                o[no++] = d[k];
        }
    }
    return s_relayout(im, i, x, o, no, n->output[0]);
}

/* ---- attention ----
 * Self-attention as torch exports a hand-written one (or nn.Module code of
 * that shape), found before the walk because its projections come first:
 *   q = Reshape(x Wq + bq, [N, S, H, D]) -> Transpose(0, 2, 1, 3)
 *   k = Reshape(x Wk + bk, [N, S, H, D]) -> Transpose(0, 2, 3, 1)
 *   v = Reshape(x Wv + bv, [N, S, H, D]) -> Transpose(0, 2, 1, 3)
 *   ctx = MatMul(Softmax(MatMul(q, k) / sqrt(D)), v)   (or * 1/sqrt(D))
 *   out = Reshape(Transpose(ctx, 0, 2, 1, 3), [N, S, E]) Wo + bo
 * (consecutive Transposes compose; biases optional). The nodes are skipped in
 * the walk, which emits one gpp attention op at the pattern's last node. */
struct att {
    const char *x, *out;                   /* input and output values */
    const tensor_t *w[4], *b[4], *scale_t; /* Q, K, V, O: W as MatMul holds it [in, out]; bias */
    int64_t off[4]; /* where projection k starts in a packed w[k] (its column) and b[k] */
    int packed;     /* Q, K, V share one [E, 3E] weight and [3E] bias (nn.MultiheadAttention) */
    int outin;      /* w[3] is [out, in] (Gemm transB=1) */
    int reshape[4]; /* Q, K, V to heads; the context back */
    int mul, softmax;
    /* nn.MultiheadAttention (packed): */
    int slice[3];       /* the Q, K, V Slices of the packed projection */
    int reshape_out;    /* the output's Reshape to [S, N, E] */
    const char *tn[10]; /* the pattern's tensors whose Shape the export reads */
    int tk[10], ntn;    /* their layouts (MHA_X, ...) */
    int64_t heads;      /* set by s_mha_check */
};

/* The first node that outputs `name`, or -1 (the patterns walk back
 * through producers many times: indexed by s_import). */
static int s_producer(const imp_t *im, const char *name)
{
    if (!im->phash) /* before s_import indexed the nodes */
        return -1;
    for (size_t h = s_fnv(name) & im->pmask;; h = (h + 1) & im->pmask) {
        int i = im->phash[h] - 1;
        if (i < 0)
            return -1;
        for (size_t k = 0; k < im->gr->node[i]->n_output; k++)
            if (!strcmp(im->gr->node[i]->output[k], name))
                return i;
    }
}

static int s_is(const imp_t *im, int node, const char *op)
{
    return node >= 0 && im->gr->node[node]->op_type && !strcmp(im->gr->node[node]->op_type, op);
}

/* An initializer's or a Constant node's tensor, or NULL. */
static const tensor_t *s_const_t(imp_t *im, const char *name)
{
    const val_t *v = s_find(im, name);
    if (v)
        return v->kind == V_CONST ? v->t : NULL;
    int p = s_producer(im, name);
    const attr_t *a = s_is(im, p, "Constant") ? s_attr(im->gr->node[p], "value") : NULL;
    return a ? a->t : NULL;
}

static int s_single(const imp_t *im, const char *name)
{
    int c;
    return s_uses(im, name, &c) == 1;
}

/* Value `name` as x W (+ b), W a 2-d constant: 0 and the nodes, or -1. */
static int s_att_proj(imp_t *im, const char *name, const char **x, const tensor_t **w,
                      const tensor_t **b, int *nodes, int *nn)
{
    int p = s_producer(im, name);
    *b = NULL;
    if (s_is(im, p, "Add") && im->gr->node[p]->n_input == 2) {
        const node_t *a = im->gr->node[p];
        int k = s_const_t(im, a->input[0]) ? 0 : 1;
        *b = s_const_t(im, a->input[k]);
        nodes[(*nn)++] = p;
        if (!*b || !s_single(im, a->input[!k]))
            return -1;
        p = s_producer(im, a->input[!k]);
    }
    if (!s_is(im, p, "MatMul") || im->gr->node[p]->n_input != 2)
        return -1;
    *w = s_const_t(im, im->gr->node[p]->input[1]);
    *x = im->gr->node[p]->input[0];
    nodes[(*nn)++] = p;
    return *w && (*w)->n_dims == 2 ? 0 : -1;
}

/* Back from `name` through Transposes (composed) to a Reshape of a
 * projection: 0 when the composite permutation is `perm`. */
static int s_att_heads(imp_t *im, const char *name, const int64_t perm[4], struct att *a, int k,
                       int *nodes, int *nn)
{
    int64_t c[4] = {0, 1, 2, 3};
    int p;
    while (*nn < 56 && s_single(im, name) && s_is(im, p = s_producer(im, name), "Transpose")) {
        const attr_t *pa = s_attr(im->gr->node[p], "perm");
        if (!pa || pa->n_ints != 4 || im->gr->node[p]->n_input < 1)
            return -1;
        for (int j = 0; j < 4; j++) {
            if (c[j] < 0 || c[j] > 3 || pa->ints[c[j]] < 0 || pa->ints[c[j]] > 3)
                return -1;
            c[j] = pa->ints[c[j]];
        }
        nodes[(*nn)++] = p;
        name = im->gr->node[p]->input[0];
    }
    p = s_producer(im, name);
    if (memcmp(c, perm, sizeof c) || !s_single(im, name) || !s_is(im, p, "Reshape") ||
        im->gr->node[p]->n_input != 2 || !s_single(im, im->gr->node[p]->input[0]))
        return -1;
    a->reshape[k] = p;
    nodes[(*nn)++] = p;
    const char *x;
    if (s_att_proj(im, im->gr->node[p]->input[0], &x, &a->w[k], &a->b[k], nodes, nn) < 0 ||
        (a->x && strcmp(a->x, x)))
        return -1;
    a->x = x;
    return 0;
}

/* The single consumer of `name` with op type `op` reading it as input k. */
static int s_att_next(imp_t *im, const char *name, const char *op, int k)
{
    int c = s_next(im, name, op);
    return c >= 0 && (int)im->gr->node[c]->n_input > k && !strcmp(im->gr->node[c]->input[k], name)
               ? c
               : -1;
}

/* Matches the pattern ending in Softmax node sm: 1 (recorded), 0 (not it). */
static int s_att_match(imp_t *im, int sm, struct att *a)
{
    static const int64_t pq[4] = {0, 2, 1, 3}, pk[4] = {0, 2, 3, 1};
    const node_t *n = im->gr->node[sm];
    int nodes[64], nn = 0, p, cm, r, om, emit;
    int64_t axis = -1, c[4] = {0, 1, 2, 3};
    const attr_t *ax = s_attr(n, "axis");
    memset(a, 0, sizeof *a);
    if (ax)
        axis = ax->i;
    if ((axis != -1 && axis != 3) || n->n_input != 1 || n->n_output != 1 ||
        !s_single(im, n->input[0]))
        return 0;
    nodes[nn++] = sm;
    p = s_producer(im, n->input[0]); /* Div or Mul by the scale */
    if (!(s_is(im, p, "Div") || s_is(im, p, "Mul")) || im->gr->node[p]->n_input != 2 ||
        !(a->scale_t = s_const_t(im, im->gr->node[p]->input[1])) ||
        !s_single(im, im->gr->node[p]->input[0]))
        return 0;
    a->mul = s_is(im, p, "Mul");
    nodes[nn++] = p;
    p = s_producer(im, im->gr->node[p]->input[0]); /* MatMul(q, k) */
    if (!s_is(im, p, "MatMul") || im->gr->node[p]->n_input != 2)
        return 0;
    nodes[nn++] = p;
    if (s_att_heads(im, im->gr->node[p]->input[0], pq, a, 0, nodes, &nn) < 0 ||
        s_att_heads(im, im->gr->node[p]->input[1], pk, a, 1, nodes, &nn) < 0)
        return 0;
    if ((cm = s_att_next(im, n->output[0], "MatMul", 0)) < 0 || im->gr->node[cm]->n_input != 2 ||
        s_att_heads(im, im->gr->node[cm]->input[1], pq, a, 2, nodes, &nn) < 0)
        return 0;
    nodes[nn++] = cm;
    const char *v = im->gr->node[cm]->output[0];
    while ((p = s_att_next(im, v, "Transpose", 0)) >= 0) { /* forward: compose */
        const attr_t *pa = s_attr(im->gr->node[p], "perm");
        int64_t t[4];
        if (!pa || pa->n_ints != 4 || nn > 60)
            return 0;
        for (int j = 0; j < 4; j++)
            t[j] = pa->ints[j] >= 0 && pa->ints[j] <= 3 ? c[pa->ints[j]] : -1;
        memcpy(c, t, sizeof c);
        nodes[nn++] = p;
        v = im->gr->node[p]->output[0];
    }
    if (memcmp(c, pq, sizeof c) || (r = s_att_next(im, v, "Reshape", 0)) < 0)
        return 0;
    a->reshape[3] = r;
    nodes[nn++] = r;
    if ((om = s_att_next(im, im->gr->node[r]->output[0], "MatMul", 0)) < 0 ||
        im->gr->node[om]->n_input != 2 || !(a->w[3] = s_const_t(im, im->gr->node[om]->input[1])) ||
        a->w[3]->n_dims != 2)
        return 0;
    emit = om;
    int ad = s_next(im, im->gr->node[om]->output[0], "Add");
    const char *bo = ad >= 0 ? s_other(im->gr->node[ad], im->gr->node[om]->output[0]) : NULL;
    if (bo && (a->b[3] = s_const_t(im, bo))) {
        nodes[nn++] = om;
        emit = ad;
    }
    a->out = im->gr->node[emit]->output[0];
    a->softmax = sm;
    for (int k = 0; k < nn; k++)
        im->done[nodes[k]] = 1;
    im->done[emit] = 0;
    return 1;
}

/* ---- nn.MultiheadAttention ----
 * torch (1.13; batch_first=True, q = k = v = x, no mask, eval mode) exports
 * its self-attention time-first with one packed in-projection:
 *   t = Transpose(x, 1 0 2)                                  [S, N, E]
 *   p = MatMul(t, W_in^T) (+ b_in)                           [S, N, 3E]
 *   q, k, v = Slice(p) on the last axis, E wide each
 *   q = Transpose(Reshape(q, [S, N H, D]), 1 0 2) / sqrt(D)  [N H, S, D]
 *   k = Transpose(Reshape(k, [S, N H, D]), 1 2 0)            [N H, D, S]
 *   v = Transpose(Reshape(v, [S, N H, D]), 1 0 2)            [N H, S, D]
 *   c = Reshape(Transpose(MatMul(Softmax(MatMul(q, k)), v), 1 0 2), [S N, E])
 *   y = Transpose(Reshape(Gemm(c, W_o, b_o), [S, N, E]), 1 0 2)   [N, S, E]
 * (the scale may also follow MatMul(q, k); the output projection may be a
 * MatMul (+ Add)). The reshapes' shapes and the slices' bounds are computed
 * by Shape arithmetic on the pattern's own tensors: the matcher takes those
 * nodes in, and s_mha_check evaluates them at two batch sizes when the
 * input's shape is known. */
enum { MHA_X, MHA_T, MHA_P, MHA_C }; /* [N,S,E], [S,N,E], [S,N,3E], [S N,E] */
#define MHA_NODES 512

typedef struct {
    imp_t *im;
    const struct att *a;
    int nodes[MHA_NODES], nn;
    int64_t N, S, E; /* s_mha_ints: the sizes it evaluates at */
    int steps;       /* s_mha_ints: nodes evaluated, bounded (a DAG has many paths) */
} mha_t;

static int s_mha_add(mha_t *m, int node)
{
    for (int k = 0; k < m->nn; k++)
        if (m->nodes[k] == node)
            return 0;
    if (m->nn == MHA_NODES)
        return -1;
    m->nodes[m->nn++] = node;
    return 0;
}

static int s_mha_tensor(const struct att *a, const char *name)
{
    for (int k = 0; k < a->ntn; k++)
        if (!strcmp(a->tn[k], name))
            return a->tk[k];
    return -1;
}

/* The one reader of `name` that is not a Shape (the export reads the
 * pattern's tensors' shapes); *k: the input it reads it as. -1: none, or
 * several, or a graph output. */
static int s_mha_reader(const imp_t *im, const char *name, int *k)
{
    int c = -1;
    for (size_t i = 0; i < im->gr->n_node; i++)
        for (size_t j = 0; j < im->gr->node[i]->n_input; j++)
            if (!strcmp(im->gr->node[i]->input[j], name) && !s_is(im, (int)i, "Shape")) {
                if (c >= 0)
                    return -1;
                c = (int)i, *k = (int)j;
            }
    for (size_t i = 0; i < im->gr->n_output; i++)
        if (!strcmp(im->gr->output[i]->name ? im->gr->output[i]->name : "", name))
            return -1;
    return c;
}

/* That reader, if it has op type `op` and reads `name` as its input 0. */
static int s_mha_next(const imp_t *im, const char *name, const char *op)
{
    int k = -1, c = s_mha_reader(im, name, &k);
    return s_is(im, c, op) && k == 0 && im->gr->node[c]->n_output >= 1 ? c : -1;
}

static int s_mha_perm(const imp_t *im, int node, const int64_t *perm)
{
    const attr_t *pa = s_is(im, node, "Transpose") ? s_attr(im->gr->node[node], "perm") : NULL;
    return pa && im->gr->node[node]->n_input == 1 && pa->n_ints == 3 && pa->ints[0] == perm[0] &&
           pa->ints[1] == perm[1] && pa->ints[2] == perm[2];
}

/* `name` = Transpose(Reshape(Slice(p)), perm): the Slice (added with the
 * others to m) or -1. */
static int s_mha_heads(mha_t *m, const char *name, const int64_t *perm, int reader, int *reshape)
{
    const imp_t *im = m->im;
    int t = s_producer(im, name), r, sl, k;
    if (!s_mha_perm(im, t, perm) || s_mha_reader(im, name, &k) != reader)
        return -1;
    r = s_producer(im, im->gr->node[t]->input[0]);
    if (!s_is(im, r, "Reshape") || im->gr->node[r]->n_input != 2 ||
        s_mha_next(im, im->gr->node[r]->output[0], "Transpose") != t)
        return -1;
    sl = s_producer(im, im->gr->node[r]->input[0]);
    if (!s_is(im, sl, "Slice") || im->gr->node[sl]->n_input < 3 ||
        s_mha_next(im, im->gr->node[sl]->output[0], "Reshape") != r)
        return -1;
    *reshape = r;
    return s_mha_add(m, t) < 0 || s_mha_add(m, r) < 0 || s_mha_add(m, sl) < 0 ? -1 : sl;
}

/* Takes in the integer nodes computing `name` (a shape, a slice bound):
 * constants, Shape of the pattern's tensors and arithmetic on them. */
static int s_mha_collect(mha_t *m, const struct att *a, const char *name, int depth)
{
    static const char *ops[] = {"Constant", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast",
                                "Identity", "Add",    "Sub",       "Mul",     "Div"};
    int p = s_producer(m->im, name);
    if (p < 0)
        return s_const_t(m->im, name) ? 0 : -1;
    for (int k = 0; k < m->nn; k++)
        if (m->nodes[k] == p)
            return 0;
    if (depth > 32 || s_mha_add(m, p) < 0)
        return -1;
    if (s_is(m->im, p, "Shape"))
        return m->im->gr->node[p]->n_input == 1 &&
                       s_mha_tensor(a, m->im->gr->node[p]->input[0]) >= 0
                   ? 0
                   : -1;
    size_t k = 0;
    while (k < sizeof ops / sizeof ops[0] && !s_is(m->im, p, ops[k]))
        k++;
    if (k == sizeof ops / sizeof ops[0])
        return -1;
    for (k = 0; k < m->im->gr->node[p]->n_input; k++)
        if (m->im->gr->node[p]->input[k][0] &&
            s_mha_collect(m, a, m->im->gr->node[p]->input[k], depth + 1) < 0)
            return -1;
    return 0;
}

/* Matches nn.MultiheadAttention's export around Softmax node sm: 1
 * (recorded in a, its nodes marked done), 0 (not it). */
static int s_mha_match(imp_t *im, int sm, struct att *a)
{
    static const int64_t p102[3] = {1, 0, 2}, p120[3] = {1, 2, 0};
    mha_t m;
    const node_t *n = im->gr->node[sm];
    const attr_t *ax = s_attr(n, "axis");
    int p, mm, sc = -1, cm, r[3], sl[3], t, xt, r3, o, r4, y, proj;
    memset(a, 0, sizeof *a);
    memset(&m, 0, sizeof m);
    m.im = im;
    if ((ax && ax->i != -1 && ax->i != 2) || n->n_input != 1 || n->n_output != 1 ||
        s_mha_next(im, n->input[0], "Softmax") != sm)
        return 0;
    p = s_producer(im, n->input[0]);
    if ((s_is(im, p, "Div") || s_is(im, p, "Mul")) && im->gr->node[p]->n_input == 2 &&
        s_const_t(im, im->gr->node[p]->input[1]) &&
        s_mha_next(im, im->gr->node[p]->input[0], im->gr->node[p]->op_type) == p)
        sc = p, p = s_producer(im, im->gr->node[p]->input[0]);
    if (!s_is(im, p, "MatMul") || im->gr->node[p]->n_input != 2)
        return 0;
    mm = p;
    const char *qn = im->gr->node[mm]->input[0];
    p = s_producer(im, qn);
    if (sc < 0 && (s_is(im, p, "Div") || s_is(im, p, "Mul")) && im->gr->node[p]->n_input == 2 &&
        s_const_t(im, im->gr->node[p]->input[1]) && s_mha_next(im, qn, "MatMul") == mm)
        sc = p, qn = im->gr->node[p]->input[0];
    if (sc < 0)
        return 0;
    a->scale_t = s_const_t(im, im->gr->node[sc]->input[1]);
    a->mul = s_is(im, sc, "Mul");
    if ((cm = s_mha_next(im, n->output[0], "MatMul")) < 0 || im->gr->node[cm]->n_input != 2 ||
        (sl[0] = s_mha_heads(&m, qn, p102,
                             sc == s_producer(im, im->gr->node[mm]->input[0]) ? sc : mm, &r[0])) <
            0 ||
        (sl[1] = s_mha_heads(&m, im->gr->node[mm]->input[1], p120, mm, &r[1])) < 0 ||
        (sl[2] = s_mha_heads(&m, im->gr->node[cm]->input[1], p102, cm, &r[2])) < 0)
        return 0;
    /* the packed projection, p = MatMul(Transpose(x), W) (+ b) */
    const char *pn = im->gr->node[sl[0]]->input[0];
    if (strcmp(pn, im->gr->node[sl[1]]->input[0]) || strcmp(pn, im->gr->node[sl[2]]->input[0]))
        return 0;
    a->tn[a->ntn] = pn, a->tk[a->ntn++] = MHA_P;
    proj = s_producer(im, pn);
    if (s_is(im, proj, "Add") && im->gr->node[proj]->n_input == 2) {
        const node_t *ad = im->gr->node[proj];
        int k = s_const_t(im, ad->input[0]) ? 0 : 1, j;
        if (!(a->b[0] = s_const_t(im, ad->input[k])) || s_mha_reader(im, ad->input[!k], &j) != proj)
            return 0;
        s_mha_add(&m, proj);
        a->tn[a->ntn] = ad->input[!k], a->tk[a->ntn++] = MHA_P;
        proj = s_producer(im, ad->input[!k]);
    }
    if (!s_is(im, proj, "MatMul") || im->gr->node[proj]->n_input != 2 ||
        !(a->w[0] = s_const_t(im, im->gr->node[proj]->input[1])))
        return 0;
    xt = s_producer(im, im->gr->node[proj]->input[0]);
    if (!s_mha_perm(im, xt, p102) || s_mha_next(im, im->gr->node[xt]->output[0], "MatMul") != proj)
        return 0;
    a->x = im->gr->node[xt]->input[0];
    a->tn[a->ntn] = a->x, a->tk[a->ntn++] = MHA_X;
    a->tn[a->ntn] = im->gr->node[xt]->output[0], a->tk[a->ntn++] = MHA_T;
    for (int k = 0; k < 3; k++) {
        a->w[k] = a->w[0], a->b[k] = a->b[0], a->slice[k] = sl[k], a->reshape[k] = r[k];
        a->tn[a->ntn] = im->gr->node[sl[k]]->output[0], a->tk[a->ntn++] = MHA_T;
    }
    /* the context back to [N, S, E] through the output projection */
    if ((t = s_mha_next(im, im->gr->node[cm]->output[0], "Transpose")) < 0 ||
        !s_mha_perm(im, t, p102) ||
        (r3 = s_mha_next(im, im->gr->node[t]->output[0], "Reshape")) < 0 ||
        im->gr->node[r3]->n_input != 2)
        return 0;
    const char *cn = im->gr->node[r3]->output[0];
    if ((o = s_mha_next(im, cn, "Gemm")) >= 0) {
        int64_t ta, tb;
        double al, be;
        gpp_err_t e = {{0}}, *keep = im->err;
        im->err = &e;
        int bad = s_attr_int(im, o, "transA", 0, &ta) < 0 ||
                  s_attr_int(im, o, "transB", 0, &tb) < 0 ||
                  s_attr_float(im, o, "alpha", 1.0, &al) < 0 ||
                  s_attr_float(im, o, "beta", 1.0, &be) < 0 || ta || al != 1.0 || be != 1.0;
        im->err = keep;
        const node_t *g = im->gr->node[o];
        if (bad || g->n_input < 2 || !(a->w[3] = s_const_t(im, g->input[1])) ||
            (g->n_input > 2 && g->input[2][0] && !(a->b[3] = s_const_t(im, g->input[2]))))
            return 0;
        a->outin = tb != 0;
    } else if ((o = s_mha_next(im, cn, "MatMul")) >= 0) {
        if (im->gr->node[o]->n_input != 2 || !(a->w[3] = s_const_t(im, im->gr->node[o]->input[1])))
            return 0;
        int k, ad = s_mha_reader(im, im->gr->node[o]->output[0], &k);
        ad = s_is(im, ad, "Add") ? ad : -1;
        const char *bo = ad >= 0 ? s_other(im->gr->node[ad], im->gr->node[o]->output[0]) : NULL;
        if (bo && (a->b[3] = s_const_t(im, bo))) {
            s_mha_add(&m, o);
            a->tn[a->ntn] = im->gr->node[o]->output[0], a->tk[a->ntn++] = MHA_C;
            o = ad;
        }
    } else
        return 0;
    a->tn[a->ntn] = im->gr->node[o]->output[0], a->tk[a->ntn++] = MHA_C;
    if ((r4 = s_mha_next(im, im->gr->node[o]->output[0], "Reshape")) < 0 ||
        im->gr->node[r4]->n_input != 2 ||
        (y = s_mha_next(im, im->gr->node[r4]->output[0], "Transpose")) < 0 ||
        !s_mha_perm(im, y, p102))
        return 0;
    a->reshape[3] = r3, a->reshape_out = r4, a->packed = 1, a->softmax = sm;
    a->out = im->gr->node[y]->output[0];
    int core[] = {sm, sc, mm, cm, t, r3, o, r4, y, xt, proj};
    for (size_t k = 0; k < sizeof core / sizeof core[0]; k++)
        if (s_mha_add(&m, core[k]) < 0)
            return 0;
    for (int k = 0; k < 3; k++) /* slice bounds and reshape shapes */
        for (size_t j = 1; j < im->gr->node[sl[k]]->n_input; j++)
            if (im->gr->node[sl[k]]->input[j][0] &&
                s_mha_collect(&m, a, im->gr->node[sl[k]]->input[j], 0) < 0)
                return 0;
    int rs[5] = {r[0], r[1], r[2], r3, r4};
    for (int k = 0; k < 5; k++)
        if (s_mha_collect(&m, a, im->gr->node[rs[k]]->input[1], 0) < 0)
            return 0;
    /* closed: every value the pattern defines is read inside it only */
    unsigned char *in = gpp_xcalloc(im->gr->n_node + 1, 1);
    int open = 0;
    for (int k = 0; k < m.nn; k++)
        in[m.nodes[k]] = 1;
    for (int k = 0; k < m.nn && !open; k++) {
        const node_t *d = im->gr->node[m.nodes[k]];
        for (size_t j = 0; j < d->n_output && m.nodes[k] != y && !open; j++) {
            for (size_t i = 0; i < im->gr->n_node && !open; i++)
                for (size_t q = 0; q < im->gr->node[i]->n_input && !in[i] && !open; q++)
                    open = !strcmp(im->gr->node[i]->input[q], d->output[j]);
            for (size_t i = 0; i < im->gr->n_output && !open; i++)
                open =
                    !strcmp(im->gr->output[i]->name ? im->gr->output[i]->name : "", d->output[j]);
        }
    }
    free(in);
    if (open)
        return 0;
    for (int k = 0; k < m.nn; k++)
        im->done[m.nodes[k]] = 1;
    im->done[y] = 0;
    return 1;
}

/* Integer vector `name` at batch size m->N (m->S, m->E the input's sizes):
 * its count (*scalar: 0-d), or -1 when gpp cannot evaluate it. */
static int s_mha_ints(mha_t *m, const char *name, int64_t *out, int *scalar, int depth)
{
    imp_t *im = m->im;
    int p = s_producer(im, name), na, nb, sa, sb;
    int64_t a[SV_MAX], b[SV_MAX];
    const tensor_t *c = p < 0 || s_is(im, p, "Constant") ? s_const_t(im, name) : NULL;
    *scalar = 0;
    if (c) {
        int64_t n;
        gpp_err_t e = {{0}}, *keep = im->err;
        im->err = &e; /* not integers: not gpp's to evaluate */
        int bad = s_tensor_check(im, -1, c, 0, &n) < 0 || n > SV_MAX || c->n_dims > 1;
        im->err = keep;
        if (bad)
            return -1;
        for (int64_t k = 0; k < n; k++)
            out[k] = s_int_at(c, k);
        *scalar = c->n_dims == 0;
        return (int)n;
    }
    if (p < 0 || depth > 32 || ++m->steps > 100000 || im->gr->node[p]->n_input < 1)
        return -1;
    const node_t *nd = im->gr->node[p];
    if (s_is(im, p, "Shape")) {
        int64_t d[4][3] = {
            {m->N, m->S, m->E}, {m->S, m->N, m->E}, {m->S, m->N, 3 * m->E}, {m->S * m->N, m->E}};
        int kind = s_mha_tensor(m->a, nd->input[0]), r = kind == MHA_C ? 2 : 3;
        const attr_t *st = s_attr(nd, "start"), *en = s_attr(nd, "end");
        int64_t b0 = st ? st->i : 0, e0 = en ? en->i : r;
        b0 = b0 < 0 ? b0 + r : b0, e0 = e0 < 0 ? e0 + r : e0;
        if (kind < 0 || b0 < 0 || e0 > r)
            return -1;
        for (int64_t k = b0; k < e0; k++)
            out[k - b0] = d[kind][k];
        return (int)(e0 > b0 ? e0 - b0 : 0);
    }
    const attr_t *to = s_is(im, p, "Cast") ? s_attr(nd, "to") : NULL;
    if ((na = s_mha_ints(m, nd->input[0], a, &sa, depth + 1)) < 0 ||
        (to && to->i != GPPONNX__TENSOR__DATA_TYPE__INT64 &&
         to->i != GPPONNX__TENSOR__DATA_TYPE__INT32)) /* integers stay integers */
        return -1;
    if (s_is(im, p, "Cast") || s_is(im, p, "Identity") || s_is(im, p, "Unsqueeze") ||
        s_is(im, p, "Squeeze")) { /* the latter two between a scalar and one element */
        if ((s_is(im, p, "Unsqueeze") && !sa) || (s_is(im, p, "Squeeze") && na != 1))
            return -1;
        memcpy(out, a, (size_t)na * sizeof *a);
        *scalar = s_is(im, p, "Squeeze") || (sa && !s_is(im, p, "Unsqueeze"));
        return na;
    }
    if (s_is(im, p, "Concat")) {
        int n = 0;
        for (size_t k = 0; k < nd->n_input; k++) {
            if ((nb = s_mha_ints(m, nd->input[k], b, &sb, depth + 1)) < 0 || n + nb > SV_MAX)
                return -1;
            memcpy(out + n, b, (size_t)nb * sizeof *b);
            n += nb;
        }
        return n;
    }
    if (nd->n_input != 2 || (nb = s_mha_ints(m, nd->input[1], b, &sb, depth + 1)) < 0)
        return -1;
    if (s_is(im, p, "Gather")) { /* axis 0 of a vector */
        const attr_t *ax = s_attr(nd, "axis");
        if (sa || (ax && ax->i))
            return -1;
        for (int k = 0; k < nb; k++) {
            int64_t j = b[k] < 0 ? b[k] + na : b[k];
            if (j < 0 || j >= na)
                return -1;
            out[k] = a[j];
        }
        *scalar = sb;
        return nb;
    }
    int n = na > nb ? na : nb; /* Add, Sub, Mul, Div; one side may broadcast */
    if ((na != nb && na != 1 && nb != 1) || n == 0)
        return -1;
    for (int k = 0; k < n; k++) {
        int64_t x = a[na == 1 ? 0 : k], y = b[nb == 1 ? 0 : k];
        if ((s_is(im, p, "Div") && y == 0) || x < -INT32_MAX || x > INT32_MAX || y < -INT32_MAX ||
            y > INT32_MAX) /* sizes: no product overflows */
            return -1;
        out[k] = s_is(im, p, "Add")   ? x + y
                 : s_is(im, p, "Sub") ? x - y
                 : s_is(im, p, "Mul") ? x * y
                                      : x / y;
    }
    *scalar = sa && sb;
    return n;
}

/* Reshape node r's shape for an input of dims in[nin] at m's batch size,
 * 0 (copy) and -1 (infer) resolved: its rank, or -1. */
static int s_mha_target(mha_t *m, int r, const int64_t *in, int nin, int64_t *t)
{
    int sc, nt = s_mha_ints(m, m->im->gr->node[r]->input[1], t, &sc, 0), infer = -1;
    int64_t all = 1, known = 1;
    const attr_t *z = s_attr(m->im->gr->node[r], "allowzero");
    for (int k = 0; k < nin; k++)
        all *= in[k];
    for (int k = 0; k < nt; k++) {
        if (t[k] == 0 && !(z && z->i) && k < nin)
            t[k] = in[k];
        if (t[k] == -1 && infer < 0)
            infer = k;
        else if (t[k] < 1 || known > DIM_MAX / t[k])
            return -1;
        else
            known *= t[k];
    }
    if (infer >= 0) {
        if (all % known)
            return -1;
        t[infer] = all / known;
    }
    return nt; /* a count that differs from the input's fails the caller's comparison */
}

/* The packed pattern's slices and reshapes for an input [N, S, E], at two
 * batch sizes: sets a->off and a->heads, or -1 + message. */
static int s_mha_check(imp_t *im, struct att *a, int64_t S, int64_t E)
{
    mha_t m = {.im = im, .a = a, .S = S, .E = E};
    static const char *qkv[] = {"Q", "K", "V"};
    int64_t t[SV_MAX], v[4][SV_MAX] = {{0}}, H = 0;
    char b1[96], b2[96];
    if (E > INT32_MAX / 8 || S > INT32_MAX / 8) /* the sizes below stay in s_mha_ints' range */
        return s_fail(im, a->softmax, "nn.MultiheadAttention over [N, %lld, %lld]: too large",
                      (long long)S, (long long)E);
    for (m.N = 5; m.N <= 7; m.N += 2) { /* primes: a batch size no other size can mimic */
        for (int k = 0; k < 3; k++) {
            const node_t *sl = im->gr->node[a->slice[k]];
            int sc, got[4];
            v[2][0] = 0, v[3][0] = 1; /* axes, steps absent: axis 0 (ONNX's), step 1 */
            for (int j = 0; j < 4; j++)
                got[j] = (size_t)j + 1 < sl->n_input && sl->input[j + 1][0]
                             ? s_mha_ints(&m, sl->input[j + 1], v[j], &sc, 0)
                         : j >= 2 ? 1
                                  : -1;
            int64_t st = v[0][0] < 0 ? v[0][0] + 3 * E : v[0][0],
                    en = v[1][0] < 0 ? v[1][0] + 3 * E : v[1][0];
            st = st < 0 ? 0 : st > 3 * E ? 3 * E : st, en = en < 0 ? 0 : en > 3 * E ? 3 * E : en;
            if (got[0] != 1 || got[1] != 1 || got[2] != 1 || got[3] != 1 ||
                (v[2][0] != -1 && v[2][0] != 2) || v[3][0] != 1 || en - st != E ||
                (m.N > 5 && st != a->off[k]))
                return s_fail(im, a->slice[k],
                              "nn.MultiheadAttention: the %s slice of the packed projection "
                              "must be %lld features of the last axis (one third of [S, N, "
                              "%lld]), step 1",
                              qkv[k], (long long)E, (long long)(3 * E));
            a->off[k] = st;
        }
        for (int k = 0; k < 5; k++) { /* Q, K, V to heads, the context back, the output */
            int r = k < 3 ? a->reshape[k] : k == 3 ? a->reshape[3] : a->reshape_out;
            int64_t D = H ? E / H : 0, in[3] = {S, m.N, E}, want[3] = {S, m.N * H, D};
            int nin = k == 4 ? 2 : 3, wn = k == 3 ? 2 : 3;
            if (k == 3)
                in[1] = m.N * H, in[2] = D, want[0] = S * m.N, want[1] = E;
            if (k == 4)
                in[0] = S * m.N, in[1] = E, want[1] = m.N, want[2] = E;
            int nt = s_mha_target(&m, r, in, nin, t);
            if (k == 0 && !H && nt == 3 && E % t[2] == 0) { /* the head size D says H */
                H = E / t[2], want[1] = m.N * H, want[2] = t[2];
            }
            if (nt != wn || memcmp(t, want, (size_t)wn * sizeof *t) || !H)
                return s_fail(im, r,
                              "nn.MultiheadAttention: reshape to %s at batch %lld, expected %s "
                              "(torch's time-first layout, heads dividing %lld features)",
                              nt < 0 ? "a shape gpp cannot evaluate"
                                     : s_dimstr(t, nt, b1, sizeof b1),
                              (long long)m.N, s_dimstr(want, wn, b2, sizeof b2), (long long)E);
        }
    }
    a->heads = H;
    return 0;
}

/* One gpp attention op for pattern a, at its last node i. */
static int s_attention(imp_t *im, int i, struct att *a)
{
    const val_t *x = s_val(im, i, a->x, V_OP);
    int64_t d[4], t[SV_MAX], S, E, H = 0, D = 0;
    if (!x)
        return -1;
    if (x->rank != 3)
        return s_fail(im, i,
                      "attention over '%s': gpp's attention reads [batch, sequence, "
                      "features], '%s' has rank %d",
                      a->x, a->x, x->rank);
    s_dims(im, x, d);
    S = d[1], E = d[2];
    for (int k = 0; k < 4; k++) {
        int64_t wc = a->packed && k < 3 ? 3 * E : E; /* the [in, out] form's columns */
        if (a->w[k]->n_dims != 2 || a->w[k]->dims[0] != (k == 3 && a->outin ? wc : E) ||
            a->w[k]->dims[1] != (k == 3 && a->outin ? E : wc))
            return s_fail(im, i,
                          "attention weight '%s' must be [%lld, %lld] (features to "
                          "features%s)",
                          a->w[k]->name, (long long)E, (long long)wc,
                          wc > E ? ", Q K V packed" : "");
        if (k == 3 || a->packed)
            break;
        int nt = s_reshape_target(im, a->reshape[k], d, 3, t);
        if (nt < 0)
            return -1;
        if (nt != 4 || t[1] != S || t[2] * t[3] != E || (H && t[2] != H))
            return s_fail(im, a->reshape[k],
                          "attention heads: reshape to %s, expected [N, %lld, "
                          "heads, %lld / heads] alike for Q, K and V",
                          s_dimstr(t, nt, (char[96]){0}, 96), (long long)S, (long long)E);
        H = t[2], D = t[3];
    }
    if (a->packed) {
        if (s_mha_check(im, a, S, E) < 0)
            return -1;
        for (int k = 1; k < 4; k++)
            if (a->w[k]->n_dims != 2 ||
                a->w[k]->dims[0] != (k == 3 && a->outin ? E : a->w[0]->dims[0]) ||
                a->w[k]->dims[1] != (k == 3 ? E : a->w[0]->dims[1]))
                return s_fail(im, i, "attention weight '%s' must be [%lld, %lld]", a->w[k]->name,
                              (long long)E, (long long)(k == 3 ? E : 3 * E));
        H = a->heads, D = E / H;
    } else {
        int64_t dh[4] = {BATCH, S, H, D};
        int nt = s_reshape_target(im, a->reshape[3], dh, 4, t);
        if (nt < 0)
            return -1;
        if (nt != 3 || t[1] != S || t[2] != E)
            return s_fail(im, a->reshape[3],
                          "attention context: reshape to %s, expected [N, %lld, %lld]",
                          s_dimstr(t, nt, (char[96]){0}, 96), (long long)S, (long long)E);
    }
    int64_t sn;
    float *sc = s_tensor_check(im, a->softmax, a->scale_t, 1, &sn) == 0 && sn == 1
                    ? s_floats(im, a->softmax, a->scale_t, 1)
                    : NULL;
    if (!sc)
        return s_fail(im, a->softmax, "the attention scores' scale must be one float");
    double want = sqrt((double)D), got = a->mul ? 1.0 / sc[0] : sc[0];
    free(sc);
    if (fabs(got / want - 1.0) > 1e-5)
        return s_fail(im, a->softmax,
                      "attention scale: the scores are divided by %g; gpp's "
                      "attention divides by sqrt(%lld) = %g",
                      got, (long long)D, want);
    float *w[4] = {NULL}, *b[4] = {NULL}, *qkv = gpp_xcalloc((size_t)(3 * E * E), sizeof *qkv),
          *bqkv = gpp_xcalloc((size_t)(3 * E), sizeof *bqkv),
          *wo = gpp_xcalloc((size_t)(E * E), sizeof *wo), *bo = gpp_xcalloc((size_t)E, sizeof *bo);
    int rc = 0;
    for (int k = 0; k < 4 && rc == 0; k++) {
        int64_t wc = a->packed && k < 3 ? 3 * E : E, off = a->off[k];
        if (!(w[k] = s_floats(im, i, a->w[k], E * wc)) ||
            (a->b[k] && !(b[k] = s_floats(im, i, a->b[k], wc))))
            rc = -1;
        for (int64_t o = 0; rc == 0 && o < E; o++) { /* W^T [in, out] -> gpp's [out, in] */
            float *dst = k < 3 ? qkv + (k * E + o) * E : wo + o * E;
            for (int64_t in = 0; in < E; in++)
                dst[in] = k == 3 && a->outin ? w[k][o * E + in] : w[k][in * wc + off + o];
            (k < 3 ? bqkv + k * E : bo)[o] = b[k] ? b[k][off + o] : 0.0f;
        }
    }
    for (int k = 0; k < 4; k++)
        free(w[k]), free(b[k]);
    if (rc < 0) {
        free(qkv), free(bqkv), free(wo), free(bo);
        return -1;
    }
    char name[GPP_NAME_LEN];
    const char *base = a->b[3] && a->b[3]->name ? a->b[3]->name
                       : a->w[3]->name          ? a->w[3]->name
                                                : "attention";
    char nb[GPP_NAME_LEN]; /* nn.MultiheadAttention's "mha.out_proj.bias" -> "mha" */
    s_opname(im, base, 1, name);
    size_t nl = strlen(name);
    if (a->packed && nl > 9 && !strcmp(name + nl - 9, ".out_proj")) {
        snprintf(nb, sizeof nb, "%.*s", (int)(nl - 9), name);
        s_opname(im, nb, 0, name);
    }
    int id = gpp_graph_attention(im->g, name, x->op, (int)H);
    s_weight(im, id, 0, qkv);
    s_weight(im, id, 1, bqkv);
    s_weight(im, id, 2, wo);
    s_weight(im, id, 3, bo);
    return s_out_op(im, i, a->out, id, 3);
}

/* The hint for an op gpp does not map. */
static const char *s_hint(const char *op)
{
    static const struct {
        const char *op, *hint;
    } h[] = {
        {"Softmax", "for a classifier drop the final Softmax and train with loss=ce (it applies "
                    "log-softmax); gpp's softmax exists only inside its attention op, which gpp "
                    "maps from MatMul(Q, K^T) / sqrt(d) -> Softmax -> MatMul(V) with the heads' "
                    "Reshape/Transpose around it, and from nn.MultiheadAttention(batch_first="
                    "True) self-attention (q = k = v, no mask, eval mode)"},
        {"LogSoftmax", "drop it and train with loss=ce"},
        {"Split", "gpp splits the features (the last axis) only"},
        {"Dropout", "gpp has no dropout: export in eval mode (model.eval()), which leaves it out"},
        {"Transpose", "gpp keeps each sample a [rows, cols] matrix: no transposes but the "
                      "heads' inside the self-attention pattern (docs/graph-format.md: "
                      "MatMul(Q, K^T) / sqrt(d) -> Softmax -> MatMul(V), Q K V from one input)"},
        {"Sigmoid", "use Relu or Gelu"},
        {"Tanh", "use Relu or Gelu"},
        {"Mul", "elementwise products are not gpp ops (only inside the Erf form of Gelu)"},
        {"Sub", "fold constants into the weights"},
        {"Div", "fold constants into the weights"},
        {"BatchNormalization", "use LayerNormalization"},
        {"Conv", "gpp has dense layers only (Gemm / MatMul)"},
        {"Attention", "not imported yet; gpp-graph/1 JSON has an attention op"},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        if (!strcmp(op, h[i].op))
            return h[i].hint;
    return "express it with those";
}

/* A Softmax in no attention pattern: why, where an attention's variant
 * gpp lacks shows around it. */
static int s_softmax(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int p = n->n_input ? s_producer(im, n->input[0]) : -1, k,
        r = n->n_output ? s_mha_reader(im, n->output[0], &k) : -1;
    const char *why = "";
    if (s_is(im, p, "Add") || s_is(im, p, "Where") || s_is(im, p, "Sub"))
        why = " after an attention mask (the scores pass through Add/Where first: attn_mask, "
              "key_padding_mask or is_causal); gpp's attention has no mask";
    else if (s_is(im, r, "Dropout"))
        why = " before Dropout (a model exported in training mode): export with model.eval(), "
              "gpp's attention has no dropout";
    return s_fail(im, i, "unsupported op Softmax%s; %s", why, s_hint("Softmax"));
}

static int s_node(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
        return s_fail(im, i, "operator domain '%s': gpp reads the default ONNX domain only",
                      n->domain);
    if (n->n_output < 1 || !n->output[0][0])
        return s_fail(im, i, "the node has no output");
    for (size_t k = 0; k < n->n_attribute; k++)
        if ((n->attribute[k]->ref_attr_name && *n->attribute[k]->ref_attr_name) ||
            n->attribute[k]->has_g)
            return s_fail(im, i,
                          "attribute '%s' is a sub-graph or a function reference; gpp "
                          "imports flat graphs",
                          n->attribute[k]->name ? n->attribute[k]->name : "");
    int rc;
    if (im->att_at[i])
        return s_attention(im, i, &im->att[im->att_at[i] - 1]);
    int ints = n->n_input && s_is_ints(im, n->input[0]);
    for (size_t k = 1; !ints && !strcmp(op, "Concat") && k < n->n_input; k++)
        ints = s_is_ints(im, n->input[k]);
    if (!strcmp(op, "Shape") ||
        (ints && (!strcmp(op, "Gather") || !strcmp(op, "Concat") || !strcmp(op, "Slice") ||
                  !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") || !strcmp(op, "Cast") ||
                  !strcmp(op, "Identity"))))
        rc = s_fold(im, i);
    else if (!strcmp(op, "Reshape"))
        rc = s_reshape(im, i);
    else if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") || !strcmp(op, "Flatten"))
        rc = s_layout(im, i);
    else if (!strcmp(op, "Gemm"))
        rc = s_gemm(im, i);
    else if (!strcmp(op, "MatMul"))
        rc = s_matmul(im, i);
    else if (!strcmp(op, "Relu"))
        rc = s_unary(im, i, GPP_OP_RELU, n->n_input ? n->input[0] : "", n->output[0]);
    else if (!strcmp(op, "Gelu")) /* opset 20; either approximation (docs) */
        rc = s_unary(im, i, GPP_OP_GELU, n->n_input ? n->input[0] : "", n->output[0]);
    else if (!strcmp(op, "LayerNormalization"))
        rc = s_layernorm(im, i);
    else if (!strcmp(op, "Concat"))
        rc = s_concat(im, i);
    else if (!strcmp(op, "Add"))
        rc = s_add(im, i);
    else if (!strcmp(op, "Gather"))
        rc = s_gather(im, i);
    else if (!strcmp(op, "Split"))
        rc = s_split(im, i);
    else if (!strcmp(op, "Slice"))
        rc = s_slice(im, i);
    else if (!strcmp(op, "ReduceSum"))
        rc = s_reducesum(im, i);
    else if (!strcmp(op, "Identity"))
        rc = s_alias(im, i);
    else if (!strcmp(op, "Constant"))
        rc = s_constant(im, i);
    else if (!strcmp(op, "Div") && (rc = s_gelu_erf(im, i)) != 0)
        rc = rc < 0 ? -1 : 0;
    else
        return s_fail(im, i, "unsupported op %s; %s. %s", op, s_hint(op), SUPPORTED);
    if (rc < 0)
        return -1;
    /* extra outputs (LayerNormalization's mean, ...) exist but gpp has no
     * value for them; a Split defined all of its own */
    for (size_t k = 1; k < n->n_output && strcmp(op, "Split"); k++)
        if (n->output[k][0]) {
            val_t *v = s_define(im, i, n->output[k], V_BAD);
            if (!v)
                return -1;
            v->producer = n->name ? n->name : op;
        }
    return 0;
}

/* A graph input: [batch, cols] or [batch, rows, cols] fp32, or [batch, bag]
 * integer indices; every dimension but the batch fixed. */
static int s_input(imp_t *im, const Gpponnx__ValueInfo *vi)
{
    const char *nm = vi->name ? vi->name : "";
    const Gpponnx__TensorType *tt = vi->type ? vi->type->tensor_type : NULL;
    if (!tt || !tt->shape)
        return s_fail(im, -1,
                      "graph input '%s' has no tensor type with a shape; export with "
                      "example inputs so the shape is recorded",
                      nm);
    int dt = tt->has_elem_type ? tt->elem_type : 0, rank = (int)tt->shape->n_dim;
    int idx = dt == GPPONNX__TENSOR__DATA_TYPE__INT64 || dt == GPPONNX__TENSOR__DATA_TYPE__INT32;
    if (dt != GPPONNX__TENSOR__DATA_TYPE__FLOAT && !idx)
        return s_fail(im, -1,
                      "graph input '%s' has element type %s; gpp reads float32 features "
                      "or int32/int64 embedding indices",
                      nm, s_dtype(dt));
    if (rank < 2 || rank > (idx ? 2 : 3))
        return s_fail(im, -1, "graph input '%s' has rank %d; gpp reads [batch, features]%s", nm,
                      rank, idx ? " indices" : " or [batch, rows, features]");
    int64_t d[3] = {0, 1, 1};
    for (int k = 1; k < rank; k++) {
        const Gpponnx__Dim *dm = tt->shape->dim[k];
        if (!dm->has_dim_value || dm->dim_value < 1 || dm->dim_value > DIM_MAX)
            return s_fail(im, -1,
                          "dynamic shape: graph input '%s' dimension %d is %s%s%s; gpp plans "
                          "fixed sizes: only the batch (dimension 0) may be symbolic (leave it "
                          "out of torch.onnx.export's dynamic_axes)",
                          nm, k, dm->dim_param ? "'" : "",
                          dm->dim_param ? dm->dim_param : "unknown", dm->dim_param ? "'" : "");
        d[k] = dm->dim_value;
    }
    char name[GPP_NAME_LEN];
    s_opname(im, nm, 0, name);
    int id = idx ? gpp_graph_input_indices(im->g, name, d[1], 0)
                 : gpp_graph_input(im->g, name, rank == 3 ? d[1] : 1, rank == 3 ? d[2] : d[1]);
    return s_out_op(im, -1, nm, id, rank);
}

/* The shapes the file records for activations (value_info, graph outputs)
 * against those gpp derived: another rank or a fixed size that differs is an
 * error naming the tensor. A symbolic size where gpp derived a fixed one is
 * an exporter's artifact (the graph inputs are fixed but the batch) and
 * takes gpp's value. */
static int s_check_info(imp_t *im, const Gpponnx__ValueInfo *vi, const char *what)
{
    const val_t *v = vi->name ? s_find(im, vi->name) : NULL;
    const Gpponnx__TensorType *tt = vi->type ? vi->type->tensor_type : NULL;
    if (!v || v->kind != V_OP || !tt || !tt->shape)
        return 0;
    int64_t d[3];
    int r = s_dims(im, v, d);
    char a[96];
    if ((int)tt->shape->n_dim != r)
        return s_fail(im, -1, "%s '%s' has rank %zu in the file, but gpp derives %s", what,
                      vi->name, tt->shape->n_dim, s_dimstr(d, r, a, sizeof a));
    for (int k = 1; k < r; k++) {
        const Gpponnx__Dim *dm = tt->shape->dim[k];
        if (dm->has_dim_value && dm->dim_value != d[k])
            return s_fail(im, -1,
                          "%s '%s' has dimension %d = %lld in the file, but gpp derives "
                          "%s from the graph inputs (a stale value_info? re-export)",
                          what, vi->name, k, (long long)dm->dim_value, s_dimstr(d, r, a, sizeof a));
    }
    return 0;
}

static int s_import(imp_t *im, const model_t *m, gpp_onnx_loss_t loss)
{
    const graph_t *gr = m->graph;
    if (!gr)
        return s_fail(im, -1, "no graph (not an ONNX model, or an empty file)");
    im->gr = gr;
    if (gr->n_sparse_initializer)
        return s_fail(im, -1, "sparse initializers are not supported; store them dense");
    size_t nv = gr->n_initializer + gr->n_input + 1;
    for (size_t i = 0; i < gr->n_node; i++)
        nv += gr->node[i]->n_output;
    if (nv > (size_t)1 << 26)
        return s_fail(im, -1, "%zu values: more than gpp imports", nv);
    im->cap_vals = (int)nv;
    im->vals = gpp_xcalloc(nv, sizeof *im->vals);
    size_t hs = 16;
    while (hs < 2 * nv)
        hs *= 2;
    im->hash = gpp_xcalloc(hs, sizeof *im->hash);
    im->hmask = hs - 1;
    im->done = gpp_xcalloc(gr->n_node + 1, 1);
    for (size_t i = 0; i < gr->n_initializer; i++) {
        if (!gr->initializer[i]->name || !*gr->initializer[i]->name)
            return s_fail(im, -1, "initializer %zu has no name", i);
        val_t *v = s_define(im, -1, gr->initializer[i]->name, V_CONST);
        if (!v)
            return -1;
        v->t = gr->initializer[i];
    }
    for (size_t i = 0; i < gr->n_input; i++) /* IR < 4 lists the initializers as inputs too */
        if (!s_find(im, gr->input[i]->name) && s_input(im, gr->input[i]) < 0)
            return -1;
    if (!im->g->n_ops)
        return s_fail(im, -1, "the graph has no inputs besides its initializers");
    size_t ps = 16, no = 0;
    for (size_t i = 0; i < gr->n_node; i++)
        no += gr->node[i]->n_output;
    while (ps < 2 * no)
        ps *= 2;
    im->phash = gpp_xcalloc(ps, sizeof *im->phash);
    im->pmask = ps - 1;
    for (size_t i = 0; i < gr->n_node; i++) /* the first producer comes first in its chain */
        for (size_t k = 0; k < gr->node[i]->n_output; k++) {
            size_t h = s_fnv(gr->node[i]->output[k]) & im->pmask;
            while (im->phash[h] && im->phash[h] != (int)i + 1)
                h = (h + 1) & im->pmask;
            im->phash[h] = (int)i + 1;
        }
    im->att = gpp_xcalloc(gr->n_node + 1, sizeof *im->att);
    im->att_at = gpp_xcalloc(gr->n_node + 1, sizeof *im->att_at);
    for (size_t i = 0, n = 0; i < gr->n_node; i++)
        if (s_is(im, (int)i, "Softmax") && !im->done[i] &&
            (s_att_match(im, (int)i, &im->att[n]) || s_mha_match(im, (int)i, &im->att[n]))) {
            const char *out = im->att[n].out;
            im->att_at[s_producer(im, out)] = (int)++n;
        }
    for (size_t i = 0; i < gr->n_node; i++) /* said here: the walk would stop at a Transpose */
        if (s_is(im, (int)i, "Softmax") && !im->done[i])
            return s_softmax(im, (int)i);
    for (size_t i = 0; i < gr->n_node; i++)
        if (!im->done[i] && s_node(im, (int)i) < 0)
            return -1;
    if (!gr->n_output)
        return s_fail(im, -1, "the graph has no outputs");
    for (size_t i = 0; i < gr->n_value_info; i++)
        if (s_check_info(im, gr->value_info[i], "value") < 0)
            return -1;
    for (size_t i = 0; i < gr->n_output; i++)
        if (s_check_info(im, gr->output[i], "graph output") < 0)
            return -1;
    for (size_t i = 0; i < gr->n_output; i++) {
        const char *on = gr->output[i]->name ? gr->output[i]->name : "";
        const val_t *v = s_find(im, on);
        if (!v || v->kind != V_OP)
            return s_fail(im, -1, "graph output '%s' is not an activation gpp computes", on);
        char base[GPP_NAME_LEN + 8], name[GPP_NAME_LEN];
        snprintf(base, sizeof base, gr->n_output == 1 ? "loss" : "loss_%.56s", on);
        s_opname(im, base, 0, name);
        gpp_graph_add(im->g, loss == GPP_ONNX_LOSS_CE ? GPP_OP_LOSS_CE : GPP_OP_LOSS_MSE, name, 1,
                      &v->op);
    }
    for (int i = 0; i < im->g->n_ops; i++) {
        const gpp_op_t *op = &im->g->ops[i];
        if (op->type == GPP_OP_INPUT && op->input_kind == GPP_INPUT_INDICES && !op->table_rows)
            return s_fail(im, -1,
                          "integer graph input '%s' is not the index of a Gather; gpp "
                          "reads integers only as embedding indices",
                          op->name);
    }
    return 0;
}

gpp_graph_t *gpp_onnx_parse(const uint8_t *buf, size_t len, const char *origin,
                            gpp_onnx_loss_t loss, gpp_err_t *err)
{
    model_t *m = gpponnx__model__unpack(NULL, len, buf);
    if (!m) {
        gpp_err_set(err,
                    "%s: not a valid ONNX file: protobuf decoding failed (truncated or "
                    "corrupt; re-export it)",
                    origin);
        return NULL;
    }
    const char *slash = strrchr(origin, '/');
    imp_t im = {.origin = origin, .err = err};
    im.g = gpp_graph_new(m->graph && m->graph->name && *m->graph->name ? m->graph->name
                         : slash                                       ? slash + 1
                                                                       : origin);
    int rc = s_import(&im, m, loss);
    if (rc == 0) {
        if (im.w_ops < im.g->n_ops) /* sized to n_ops x SLOTS for gpp_graph_destroy */
            s_weight(&im, im.g->n_ops - 1, SLOTS - 1, NULL);
        im.g->init_weights = im.w;
        im.w = NULL;
    }
    for (int64_t i = 0; im.w && i < (int64_t)im.w_ops * SLOTS; i++)
        free(im.w[i]);
    free(im.w);
    free(im.vals);
    free(im.hash);
    free(im.done);
    free(im.att);
    free(im.phash);
    free(im.att_at);
    gpponnx__model__free_unpacked(m, NULL);
    if (rc < 0)
        gpp_graph_destroy(&im.g);
    return im.g;
}

/* "[onnx:]PATH[:loss=mse|ce]" -> path, loss. */
static int s_spec(const char *spec, char *path, size_t cap, gpp_onnx_loss_t *loss, gpp_err_t *err)
{
    if (!strncmp(spec, "onnx:", 5))
        spec += 5;
    const char *opt = strstr(spec, ":loss=");
    size_t n = opt ? (size_t)(opt - spec) : strlen(spec);
    if (n == 0 || n >= cap)
        return gpp_err_set(err, "model '%s': give the ONNX file's path", spec);
    memcpy(path, spec, n);
    path[n] = 0;
    *loss = GPP_ONNX_LOSS_MSE;
    if (opt) {
        const char *v = opt + 6;
        if (!strcmp(v, "ce"))
            *loss = GPP_ONNX_LOSS_CE;
        else if (strcmp(v, "mse"))
            return gpp_err_set(err, "model '%s': loss '%s': use loss=mse or loss=ce", spec, v);
    }
    return 0;
}

int gpp_onnx_is_spec(const char *spec)
{
    if (!strncmp(spec, "onnx:", 5))
        return 1;
    const char *p = strstr(spec, ".onnx");
    for (; p; p = strstr(p + 1, ".onnx"))
        if (p[5] == 0 || p[5] == ':')
            return 1;
    return 0;
}

int gpp_onnx_spec_loss(const char *spec, const char *loss, char *out, size_t cap, gpp_err_t *err)
{
    if (!loss) {
        if (strlen(spec) >= cap)
            return gpp_err_set(err, "model spec '%.40s...' is too long", spec);
        snprintf(out, cap, "%s", spec);
        return 0;
    }
    if (strcmp(loss, "mse") && strcmp(loss, "ce"))
        return gpp_err_set(err, "--loss '%s': use mse or ce", loss);
    if (!gpp_onnx_is_spec(spec))
        return gpp_err_set(err,
                           "--loss %s: only an ONNX model (FILE.onnx) takes a loss; a zoo "
                           "model or graph JSON has its own",
                           loss);
    if (strstr(spec, ":loss="))
        return gpp_err_set(err, "--loss %s: the model spec '%s' names a loss already", loss, spec);
    if (strlen(spec) + strlen(loss) + 7 >= cap)
        return gpp_err_set(err, "model spec '%.40s...' is too long", spec);
    snprintf(out, cap, "%s:loss=%s", spec, loss);
    return 0;
}

gpp_graph_t *gpp_onnx_load_spec(const char *spec, gpp_err_t *err)
{
    char path[4096];
    gpp_onnx_loss_t loss;
    if (s_spec(spec, path, sizeof path, &loss, err) < 0)
        return NULL;
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f) {
        gpp_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size > GPP_ONNX_MAX_BYTES) {
        fclose(f);
        gpp_err_set(err, "%s: not a regular file of at most 2 GiB", path);
        return NULL;
    }
    size_t len = (size_t)st.st_size;
    uint8_t *buf = gpp_xcalloc(len + 1, 1);
    size_t got = fread(buf, 1, len, f);
    fclose(f);
    if (got != len) {
        free(buf);
        gpp_err_set(err, "%s: read error", path);
        return NULL;
    }
    gpp_graph_t *g = gpp_onnx_parse(buf, len, path, loss, err);
    free(buf);
    if (g)
        snprintf(g->spec, sizeof g->spec, "%s", spec);
    return g;
}
