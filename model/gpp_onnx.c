/* gpp_onnx: ONNX import (see gpp_onnx.h). The decoder is protobuf-c over
 * Debian's onnx.proto, behind a wire pre-scan that bounds its recursion
 * (gpp_onnx_wire.c); this file walks the decoded graph
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

#include "model/gpp_onnx_imp.h"
#include "model/gpp_onnx_wire.h"

static const char SUPPORTED[] =
    "gpp maps Gemm, MatMul(+Add bias), Relu, Gelu (and its Erf and tanh forms), "
    "LayerNormalization (and its ReduceMean/Pow/Sqrt form), Concat, Split and Slice (last axis), "
    "Add, Gather (nn.Embedding) and Gather+ReduceSum/ReduceMean (embedding "
    "bag), ReduceMean/ReduceMax/ReduceSum over the sequence (axis 1), Sigmoid, Tanh, "
    "self-attention "
    "(MatMul, Softmax, MatMul with the heads' Reshape/Transpose; nn.MultiheadAttention's "
    "packed export; either with no mask or a causal one), Reshape/Unsqueeze/Squeeze/"
    "Flatten that keep the batch first and rank 2 or 3 ([N, S, C] <-> [N, S*C]), Shape "
    "arithmetic, Identity, Constant";

/* ---- errors ---- */

/* "FILE: node 3 'name' (Op): message"; node < 0: "FILE: message" */
int gpp_onnx_fail(imp_t *im, int node, const char *fmt, ...)
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

uint64_t gpp_onnx_fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

val_t *gpp_onnx_find(imp_t *im, const char *name)
{
    if (!name || !*name)
        return NULL;
    for (size_t i = gpp_onnx_fnv(name) & im->hmask;; i = (i + 1) & im->hmask) {
        int v = im->hash[i];
        if (!v)
            return NULL;
        if (!strcmp(im->vals[v - 1].name, name))
            return &im->vals[v - 1];
    }
}

/* Defines a value; a name defined twice breaks ONNX's single assignment. */
val_t *gpp_onnx_define(imp_t *im, int node, const char *name, int kind)
{
    if (!name || !*name) {
        gpp_onnx_fail(im, node, "a value has an empty name");
        return NULL;
    }
    if (gpp_onnx_find(im, name)) {
        gpp_onnx_fail(im, node, "value '%s' is defined twice (ONNX values are assigned once)",
                      name);
        return NULL;
    }
    if (im->n_vals == im->cap_vals) { /* sized by s_import: never reached */
        gpp_onnx_fail(im, node, "too many values");
        return NULL;
    }
    val_t *v = &im->vals[im->n_vals++];
    memset(v, 0, sizeof *v);
    v->name = name;
    v->kind = kind;
    size_t i = gpp_onnx_fnv(name) & im->hmask;
    while (im->hash[i])
        i = (i + 1) & im->hmask;
    im->hash[i] = im->n_vals;
    return v;
}

/* Value `name` read by node, of kind `want` (-1: any); NULL + message. */
val_t *gpp_onnx_val(imp_t *im, int node, const char *name, int want)
{
    val_t *v = gpp_onnx_find(im, name);
    if (!v) {
        gpp_onnx_fail(im, node,
                      "input '%s' is not a graph input, an initializer or the output of an earlier "
                      "node (ONNX nodes must be in topological order)",
                      name);
        return NULL;
    }
    if (v->kind == V_BAD) {
        gpp_onnx_fail(im, node,
                      "input '%s' is an extra output of node '%s', which gpp does not compute",
                      v->name, v->producer);
        return NULL;
    }
    if (want >= 0 && v->kind != want) {
        static const char *what[] = {"an activation (the output of a node or a graph input)",
                                     "a constant (an initializer)", "a gathered table (Gather)", "",
                                     "a shape (Shape)"};
        gpp_onnx_fail(im, node, "input '%s' must be %s", v->name, what[want]);
        return NULL;
    }
    if (want == V_OP && im->g->ops[v->op].type == GPP_OP_INPUT &&
        im->g->ops[v->op].input_kind == GPP_INPUT_INDICES) {
        gpp_onnx_fail(
            im, node,
            "input '%s' holds integer indices; gpp reads them only through a Gather of an "
            "embedding table (nn.Embedding; torch exports nn.EmbeddingBag through Shape and "
            "Loop nodes: export the module with scripts/gpp-export to a .json, or write "
            "nn.Embedding(...)(ids).sum(dim=1))",
            v->name);
        return NULL;
    }
    return v;
}

/* Input `k` of node as a value of kind `want` (-1: any). */
val_t *gpp_onnx_in(imp_t *im, int node, int k, int want)
{
    const node_t *n = im->gr->node[node];
    if (k >= (int)n->n_input || !n->input[k][0]) {
        gpp_onnx_fail(im, node, "input %d is missing", k + 1);
        return NULL;
    }
    return gpp_onnx_val(im, node, n->input[k], want);
}

/* Nodes reading value `name`, plus 1 if it is a graph output; *first: the
 * first consuming node (-1 if none). */
int gpp_onnx_uses(const imp_t *im, const char *name, int *first)
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

const attr_t *gpp_onnx_attr(const node_t *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (n->attribute[i]->name && !strcmp(n->attribute[i]->name, name))
            return n->attribute[i];
    return NULL;
}

int gpp_onnx_attr_int(imp_t *im, int node, const char *name, int64_t def, int64_t *out)
{
    const attr_t *a = gpp_onnx_attr(im->gr->node[node], name);
    if (!a) {
        *out = def;
        return 0;
    }
    if (!a->has_i && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT)
        return gpp_onnx_fail(im, node, "attribute '%s' must be an integer", name);
    *out = a->i;
    return 0;
}

int gpp_onnx_attr_float(imp_t *im, int node, const char *name, double def, double *out)
{
    const attr_t *a = gpp_onnx_attr(im->gr->node[node], name);
    if (!a) {
        *out = def;
        return 0;
    }
    if (!a->has_f && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT)
        return gpp_onnx_fail(im, node, "attribute '%s' must be a float", name);
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
            return gpp_onnx_fail(im, node, "tensor '%s': dimension %zu is %lld (outside 0..2^40)",
                                 t->name ? t->name : "", i, (long long)t->dims[i]);
        n *= t->dims[i];
    }
    return n;
}

/* Where t's elements are, checked against its dims: 0, or -1 + message. */
int gpp_onnx_tensor_check(imp_t *im, int node, const tensor_t *t, int want_float, int64_t *numel)
{
    const char *tn = t->name ? t->name : "";
    if ((t->has_data_location && t->data_location == 1) || t->n_external_data)
        return gpp_onnx_fail(
            im, node,
            "tensor '%s' keeps its data in an external file; save the model in one "
            "file (onnx.save(model, path, save_as_external_data=False))",
            tn);
    int dt = t->has_data_type ? t->data_type : 0;
    if (want_float && dt != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return gpp_onnx_fail(im, node,
                             "tensor '%s' has element type %s; gpp trains fp32 weights: export the "
                             "model in float32 (model.float() before torch.onnx.export)",
                             tn, s_dtype(dt));
    if (!want_float && dt != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
        dt != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)
        return gpp_onnx_fail(im, node, "tensor '%s' has element type %s where integers are needed",
                             tn, s_dtype(dt));
    if ((*numel = s_numel(im, node, t)) < 0)
        return -1;
    size_t esz = dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : 4;
    size_t have = t->has_raw_data                              ? t->raw_data.len / esz
                  : dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? t->n_float_data
                  : dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? t->n_int64_data
                                                               : t->n_int32_data;
    if ((t->has_raw_data && t->raw_data.len % esz) || have != (size_t)*numel)
        return gpp_onnx_fail(
            im, node,
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
float *gpp_onnx_floats(imp_t *im, int node, const tensor_t *t, int64_t want)
{
    int64_t n;
    if (gpp_onnx_tensor_check(im, node, t, 1, &n) < 0)
        return NULL;
    if (n != want) {
        gpp_onnx_fail(im, node, "tensor '%s' has %lld elements, expected %lld",
                      t->name ? t->name : "", (long long)n, (long long)want);
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
            gpp_onnx_fail(im, node, "tensor '%s' element %lld is not finite",
                          t->name ? t->name : "", (long long)i);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* Integer element i of t (checked by gpp_onnx_tensor_check). */
int64_t gpp_onnx_int_at(const tensor_t *t, int64_t i)
{
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        return t->has_raw_data ? (int64_t)s_le(t->raw_data.data + 8 * i, 8) : t->int64_data[i];
    return t->has_raw_data ? (int32_t)s_le(t->raw_data.data + 4 * i, 4) : t->int32_data[i];
}

/* A 2-d fp32 constant's dims. */
int gpp_onnx_matrix(imp_t *im, int node, const val_t *v, int64_t *r, int64_t *c)
{
    if (v->t->n_dims != 2)
        return gpp_onnx_fail(im, node, "weight '%s' must be 2-d, it has %zu dimensions", v->name,
                             v->t->n_dims);
    *r = v->t->dims[0];
    *c = v->t->dims[1];
    if (*r < 1 || *c < 1 || *r > DIM_MAX || *c > DIM_MAX)
        return gpp_onnx_fail(im, node, "weight '%s' is [%lld, %lld]: an empty or oversized matrix",
                             v->name, (long long)*r, (long long)*c);
    return 0;
}

/* ---- gpp ops ---- */

/* A unique op name of at most 63 bytes from base ("x.weight" or "x.bias"
 * -> "x" when strip_weight, so that gpp's parameters take PyTorch's names). */
void gpp_onnx_opname(imp_t *im, const char *base, int strip_weight, char out[GPP_NAME_LEN])
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
void gpp_onnx_weight(imp_t *im, int op, int k, float *w)
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
int gpp_onnx_out_op(imp_t *im, int node, const char *name, int op, int rank)
{
    gpp_op_t *o = &im->g->ops[op];
    if (o->type != GPP_OP_INPUT && gpp_op_derive(im->g, o, im->err) < 0)
        return gpp_onnx_fail(im, node, "%s", im->err->msg);
    val_t *v = gpp_onnx_define(im, node, name, V_OP);
    if (!v)
        return -1;
    v->op = op;
    v->rank = rank;
    return 0;
}

/* The value's shape per sample (its producer's). */
int gpp_onnx_shape(imp_t *im, const val_t *x, int64_t *rows, int64_t *cols)
{
    *rows = im->g->ops[x->op].rows;
    *cols = im->g->ops[x->op].cols;
    return 0;
}

/* Node i's outputs as values made from a node gpp does not map. */
static int s_outputs_unsup(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    for (size_t k = 0; k < n->n_output; k++)
        if (n->output[k][0] && !gpp_onnx_find(im, n->output[k])) {
            val_t *v = gpp_onnx_define(im, i, n->output[k], V_BAD);
            if (!v)
                return -1;
            v->producer = n->name ? n->name : "";
            v->unsup = 1;
        }
    return 0;
}

/* Records node i as one gpp does not map, with im->err's message (the
 * reason and the fix), and goes on: every such node is listed at the end. */
static int s_unsupported(imp_t *im, int i)
{
    const char *m = im->err->msg, *at = strstr(m, ": node ");
    m = at ? at + 2 : m; /* without the file's name: the list's header has it */
    size_t need = strlen(m) + 4;
    im->unsup = gpp_xrealloc(im->unsup, im->unsup_len + need + 1);
    im->unsup_len += (size_t)snprintf(im->unsup + im->unsup_len, need + 1, "\n  %s", m);
    im->n_unsup++;
    return s_outputs_unsup(im, i);
}

static int s_node(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    const char *op = n->op_type ? n->op_type : "";
    if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx"))
        return gpp_onnx_fail(im, i, "operator domain '%s': gpp reads the default ONNX domain only",
                             n->domain);
    if (n->n_output < 1 || !n->output[0][0])
        return gpp_onnx_fail(im, i, "the node has no output");
    for (size_t k = 0; k < n->n_attribute; k++)
        if ((n->attribute[k]->ref_attr_name && *n->attribute[k]->ref_attr_name) ||
            n->attribute[k]->g || n->attribute[k]->n_graphs)
            return gpp_onnx_fail(im, i,
                                 "attribute '%s' is a sub-graph or a function reference; gpp "
                                 "imports flat graphs",
                                 n->attribute[k]->name ? n->attribute[k]->name : "");
    int rc;
    for (size_t k = 0; k < n->n_input; k++) { /* downstream of an unmapped node: listed there */
        const val_t *v = gpp_onnx_find(im, n->input[k]);
        if (v && v->kind == V_BAD && v->unsup)
            return s_outputs_unsup(im, i);
    }
    if (im->att_at[i])
        return gpp_onnx_attention(im, i, &im->att[im->att_at[i] - 1]);
    int ints = n->n_input && gpp_onnx_is_ints(im, n->input[0]);
    for (size_t k = 1; !ints && !strcmp(op, "Concat") && k < n->n_input; k++)
        ints = gpp_onnx_is_ints(im, n->input[k]);
    if (!strcmp(op, "Shape") ||
        (ints && (!strcmp(op, "Gather") || !strcmp(op, "Concat") || !strcmp(op, "Slice") ||
                  !strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") || !strcmp(op, "Cast") ||
                  !strcmp(op, "Identity"))))
        rc = gpp_onnx_fold(im, i);
    else if (!strcmp(op, "Reshape"))
        rc = gpp_onnx_reshape(im, i);
    else if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze") || !strcmp(op, "Flatten"))
        rc = gpp_onnx_layout(im, i);
    else if (!strcmp(op, "Gemm"))
        rc = gpp_onnx_gemm(im, i);
    else if (!strcmp(op, "MatMul"))
        rc = gpp_onnx_matmul(im, i);
    else if (!strcmp(op, "Relu"))
        rc = gpp_onnx_unary(im, i, GPP_OP_RELU, n->n_input ? n->input[0] : "", n->output[0]);
    else if (!strcmp(op, "Gelu")) /* opset 20; either form (docs) */
        rc = gpp_onnx_gelu(im, i);
    else if (!strcmp(op, "LayerNormalization"))
        rc = gpp_onnx_layernorm(im, i);
    else if (!strcmp(op, "Concat"))
        rc = gpp_onnx_concat(im, i);
    else if (!strcmp(op, "Add"))
        rc = gpp_onnx_add(im, i);
    else if (!strcmp(op, "Gather"))
        rc = gpp_onnx_gather(im, i);
    else if (!strcmp(op, "Split"))
        rc = gpp_onnx_split(im, i);
    else if (!strcmp(op, "Slice"))
        rc = gpp_onnx_slice(im, i);
    else if (!strcmp(op, "ReduceSum"))
        rc = gpp_onnx_reduce(im, i, GPP_REDUCE_SUM);
    else if (!strcmp(op, "ReduceMax"))
        rc = gpp_onnx_reduce(im, i, GPP_REDUCE_MAX);
    else if (!strcmp(op, "Sigmoid") || !strcmp(op, "Tanh"))
        rc = gpp_onnx_unary(im, i, op[0] == 'S' ? GPP_OP_SIGMOID : GPP_OP_TANH,
                            n->n_input ? n->input[0] : "", n->output[0]);
    else if (!strcmp(op, "Identity"))
        rc = gpp_onnx_alias(im, i);
    else if (!strcmp(op, "Constant"))
        rc = gpp_onnx_constant(im, i);
    else if (!strcmp(op, "Div") && (rc = gpp_onnx_gelu_erf(im, i)) != 0)
        rc = rc < 0 ? -1 : 0;
    else if (!strcmp(op, "ReduceMean") && (rc = gpp_onnx_layernorm_parts(im, i)) != 0)
        rc = rc < 0 ? -1 : 0;
    else if (!strcmp(op, "ReduceMean"))
        rc = gpp_onnx_reduce(im, i, GPP_REDUCE_MEAN);
    else if ((!strcmp(op, "Mul") || !strcmp(op, "Pow")) && (rc = gpp_onnx_gelu_tanh(im, i)) != 0)
        rc = rc < 0 ? -1 : 0;
    else
        return gpp_onnx_fail(im, i, "unsupported op %s; %s", op, gpp_onnx_hint(op)),
               s_unsupported(im, i);
    if (rc < 0)
        return -1;
    /* extra outputs (LayerNormalization's mean, ...) exist but gpp has no
     * value for them; a Split defined all of its own */
    for (size_t k = 1; k < n->n_output && strcmp(op, "Split"); k++)
        if (n->output[k][0]) {
            val_t *v = gpp_onnx_define(im, i, n->output[k], V_BAD);
            if (!v)
                return -1;
            v->producer = n->name ? n->name : op;
        }
    return 0;
}

/* The tensor type of a value info, or NULL (none, or a sequence, map, ...). */
static const Onnx__TypeProto__Tensor *s_tensor_type(const Onnx__ValueInfoProto *vi)
{
    return vi->type && vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE
               ? vi->type->tensor_type
               : NULL;
}

/* A graph input: [batch, cols] or [batch, rows, cols] fp32, or [batch, bag]
 * integer indices; every dimension but the batch fixed. */
static int s_input(imp_t *im, const Onnx__ValueInfoProto *vi)
{
    const char *nm = vi->name ? vi->name : "";
    const Onnx__TypeProto__Tensor *tt = s_tensor_type(vi);
    if (!tt || !tt->shape)
        return gpp_onnx_fail(im, -1,
                             "graph input '%s' has no tensor type with a shape; export with "
                             "example inputs so the shape is recorded",
                             nm);
    int dt = tt->has_elem_type ? tt->elem_type : 0, rank = (int)tt->shape->n_dim;
    int idx =
        dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    if (dt != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT && !idx)
        return gpp_onnx_fail(im, -1,
                             "graph input '%s' has element type %s; gpp reads float32 features "
                             "or int32/int64 embedding indices",
                             nm, s_dtype(dt));
    if (rank < 2 || rank > (idx ? 2 : 3))
        return gpp_onnx_fail(im, -1, "graph input '%s' has rank %d; gpp reads [batch, features]%s",
                             nm, rank, idx ? " indices" : " or [batch, rows, features]");
    int64_t d[3] = {0, 1, 1};
    for (int k = 1; k < rank; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
        const char *param = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                ? dm->dim_param
                                : NULL;
        if (dm->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            dm->dim_value < 1 || dm->dim_value > DIM_MAX)
            return gpp_onnx_fail(
                im, -1,
                "dynamic shape: graph input '%s' dimension %d is %s%s%s; gpp plans "
                "fixed sizes: only the batch (dimension 0) may be symbolic (leave it "
                "out of torch.onnx.export's dynamic_axes)",
                nm, k, param ? "'" : "", param ? param : "unknown", param ? "'" : "");
        d[k] = dm->dim_value;
    }
    char name[GPP_NAME_LEN];
    gpp_onnx_opname(im, nm, 0, name);
    int id = idx ? gpp_graph_input_indices(im->g, name, d[1], 0)
                 : gpp_graph_input(im->g, name, rank == 3 ? d[1] : 1, rank == 3 ? d[2] : d[1]);
    return gpp_onnx_out_op(im, -1, nm, id, rank);
}

/* The shapes the file records for activations (value_info, graph outputs)
 * against those gpp derived: another rank or a fixed size that differs is an
 * error naming the tensor. A symbolic size where gpp derived a fixed one is
 * an exporter's artifact (the graph inputs are fixed but the batch) and
 * takes gpp's value. */
static int s_check_info(imp_t *im, const Onnx__ValueInfoProto *vi, const char *what)
{
    const val_t *v = vi->name ? gpp_onnx_find(im, vi->name) : NULL;
    const Onnx__TypeProto__Tensor *tt = s_tensor_type(vi);
    if (!v || v->kind != V_OP || !tt || !tt->shape)
        return 0;
    int64_t d[3];
    int r = gpp_onnx_dims(im, v, d);
    char a[96];
    if ((int)tt->shape->n_dim != r)
        return gpp_onnx_fail(im, -1, "%s '%s' has rank %zu in the file, but gpp derives %s", what,
                             vi->name, tt->shape->n_dim, gpp_onnx_dimstr(d, r, a, sizeof a));
    for (int k = 1; k < r; k++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[k];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            dm->dim_value != d[k])
            return gpp_onnx_fail(im, -1,
                                 "%s '%s' has dimension %d = %lld in the file, but gpp derives "
                                 "%s from the graph inputs (a stale value_info? re-export)",
                                 what, vi->name, k, (long long)dm->dim_value,
                                 gpp_onnx_dimstr(d, r, a, sizeof a));
    }
    return 0;
}

static int s_import(imp_t *im, const model_t *m, gpp_onnx_loss_t loss)
{
    const graph_t *gr = m->graph;
    if (!gr)
        return gpp_onnx_fail(im, -1, "no graph (not an ONNX model, or an empty file)");
    im->gr = gr;
    if (gr->n_sparse_initializer)
        return gpp_onnx_fail(im, -1, "sparse initializers are not supported; store them dense");
    size_t nv = gr->n_initializer + gr->n_input + 1;
    for (size_t i = 0; i < gr->n_node; i++)
        nv += gr->node[i]->n_output;
    if (nv > (size_t)1 << 26)
        return gpp_onnx_fail(im, -1, "%zu values: more than gpp imports", nv);
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
            return gpp_onnx_fail(im, -1, "initializer %zu has no name", i);
        val_t *v = gpp_onnx_define(im, -1, gr->initializer[i]->name, V_CONST);
        if (!v)
            return -1;
        v->t = gr->initializer[i];
    }
    for (size_t i = 0; i < gr->n_input; i++) /* IR < 4 lists the initializers as inputs too */
        if (!gpp_onnx_find(im, gr->input[i]->name) && s_input(im, gr->input[i]) < 0)
            return -1;
    if (!im->g->n_ops)
        return gpp_onnx_fail(im, -1, "the graph has no inputs besides its initializers");
    size_t ps = 16, no = 0;
    for (size_t i = 0; i < gr->n_node; i++)
        no += gr->node[i]->n_output;
    while (ps < 2 * no)
        ps *= 2;
    im->phash = gpp_xcalloc(ps, sizeof *im->phash);
    im->pmask = ps - 1;
    for (size_t i = 0; i < gr->n_node; i++) /* the first producer comes first in its chain */
        for (size_t k = 0; k < gr->node[i]->n_output; k++) {
            size_t h = gpp_onnx_fnv(gr->node[i]->output[k]) & im->pmask;
            while (im->phash[h] && im->phash[h] != (int)i + 1)
                h = (h + 1) & im->pmask;
            im->phash[h] = (int)i + 1;
        }
    /* torch writes one initializer for equal constants and Identity copies
       for the other readers (a second nn.MultiheadAttention's zero biases):
       those copies are constants before the attention patterns are sought */
    for (int pass = 1; pass;) {
        pass = 0;
        for (size_t i = 0; i < gr->n_node; i++) {
            const node_t *n = gr->node[i];
            const val_t *x = n->n_input == 1 ? gpp_onnx_find(im, n->input[0]) : NULL;
            if (im->done[i] || !gpp_onnx_is(im, (int)i, "Identity") || !x || x->kind != V_CONST ||
                n->n_output != 1 || gpp_onnx_find(im, n->output[0]))
                continue;
            val_t *v = gpp_onnx_define(im, (int)i, n->output[0], V_CONST);
            if (!v)
                return -1;
            v->t = x->t;
            im->done[i] = 1;
            pass = 1; /* an Identity of an Identity */
        }
    }
    im->att = gpp_xcalloc(gr->n_node + 1, sizeof *im->att);
    im->att_at = gpp_xcalloc(gr->n_node + 1, sizeof *im->att_at);
    for (size_t i = 0, n = 0; i < gr->n_node; i++)
        if (gpp_onnx_is(im, (int)i, "Softmax") && !im->done[i] &&
            (gpp_onnx_att_match(im, (int)i, &im->att[n]) ||
             gpp_onnx_mha_match(im, (int)i, &im->att[n]))) {
            const char *out = im->att[n].out;
            im->att_at[gpp_onnx_producer(im, out)] = (int)++n;
        }
    for (size_t i = 0; i < gr->n_node; i++) /* said here: the walk would stop at a Transpose */
        if (gpp_onnx_is(im, (int)i, "Softmax") && !im->done[i]) {
            gpp_onnx_softmax(im, (int)i);
            if (s_unsupported(im, (int)i) < 0)
                return -1;
            im->done[i] = 1;
        }
    for (size_t i = 0; i < gr->n_node; i++)
        if (!im->done[i] && s_node(im, (int)i) < 0)
            return -1;
    if (im->n_unsup)
        return gpp_onnx_fail(im, -1, "%d node%s gpp does not map:%s\n%s", im->n_unsup,
                             im->n_unsup > 1 ? "s" : "", im->unsup, SUPPORTED);
    if (!gr->n_output)
        return gpp_onnx_fail(im, -1, "the graph has no outputs");
    for (size_t i = 0; i < gr->n_value_info; i++)
        if (s_check_info(im, gr->value_info[i], "value") < 0)
            return -1;
    for (size_t i = 0; i < gr->n_output; i++)
        if (s_check_info(im, gr->output[i], "graph output") < 0)
            return -1;
    for (size_t i = 0; i < gr->n_output; i++) {
        const char *on = gr->output[i]->name ? gr->output[i]->name : "";
        const val_t *v = gpp_onnx_find(im, on);
        if (!v || v->kind != V_OP)
            return gpp_onnx_fail(im, -1, "graph output '%s' is not an activation gpp computes", on);
        char base[GPP_NAME_LEN + 8], name[GPP_NAME_LEN];
        snprintf(base, sizeof base, gr->n_output == 1 ? "loss" : "loss_%.56s", on);
        gpp_onnx_opname(im, base, 0, name);
        gpp_graph_add(im->g,
                      loss == GPP_ONNX_LOSS_CE    ? GPP_OP_LOSS_CE
                      : loss == GPP_ONNX_LOSS_BCE ? GPP_OP_LOSS_BCE
                                                  : GPP_OP_LOSS_MSE,
                      name, 1, &v->op);
    }
    for (int i = 0; i < im->g->n_ops; i++) {
        const gpp_op_t *op = &im->g->ops[i];
        if (op->type == GPP_OP_INPUT && op->input_kind == GPP_INPUT_INDICES && !op->table_rows)
            return gpp_onnx_fail(im, -1,
                                 "integer graph input '%s' is not the index of a Gather; gpp "
                                 "reads integers only as embedding indices",
                                 op->name);
    }
    return 0;
}

gpp_graph_t *gpp_onnx_parse(const uint8_t *buf, size_t len, const char *origin,
                            gpp_onnx_loss_t loss, gpp_err_t *err)
{
    if (gpp_onnx_wire_check(buf, len, origin, err) < 0) /* bounds unpack's recursion */
        return NULL;
    model_t *m = onnx__model_proto__unpack(NULL, len, buf);
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
            gpp_onnx_weight(&im, im.g->n_ops - 1, SLOTS - 1, NULL);
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
    free(im.unsup);
    onnx__model_proto__free_unpacked(m, NULL);
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
        else if (!strcmp(v, "bce"))
            *loss = GPP_ONNX_LOSS_BCE;
        else if (strcmp(v, "mse"))
            return gpp_err_set(err, "model '%s': loss '%s': use loss=mse, loss=ce or loss=bce",
                               spec, v);
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
    if (strcmp(loss, "mse") && strcmp(loss, "ce") && strcmp(loss, "bce"))
        return gpp_err_set(err, "--loss '%s': use mse, ce or bce (binary cross-entropy on logits)",
                           loss);
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
