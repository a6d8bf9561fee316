/* gpp_onnx_imp: the ONNX importer's internals, shared by its parts:
 * gpp_onnx.c (values, errors, the walk, the public entry points),
 * gpp_onnx_ops.c (one node or a short chain: Gemm, MatMul, LayerNorm, Split,
 * Shape arithmetic, Reshape, ...) and gpp_onnx_attn.c (the self-attention
 * patterns). Not a public interface: model/gpp_onnx.h is. */
#ifndef GPP_ONNX_IMP_H
#define GPP_ONNX_IMP_H

#include <stddef.h>
#include <stdint.h>

#include "model/gpp_onnx.h"
#include "model/gpp_optable.h"
#include "model/onnx.pb-c.h"

#define DIM_MAX ((int64_t)1 << 40) /* the op table's largest size */
#define SLOTS GPP_GRAPH_PARAM_SLOTS

typedef Onnx__ModelProto model_t;
typedef Onnx__GraphProto graph_t;
typedef Onnx__NodeProto node_t;
typedef Onnx__TensorProto tensor_t;
typedef Onnx__AttributeProto attr_t;

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
    int unsup;            /* V_BAD: made by (or from) a node gpp does not map */
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
    char *unsup;         /* the nodes gpp does not map, one line each (heap) */
    size_t unsup_len;
    int n_unsup;
    gpp_err_t *err;
} imp_t;

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
    int slice[3];         /* the Q, K, V Slices of the packed projection */
    int reshape_out;      /* the output's Reshape to [S, N, E] */
    const char *tn[10];   /* the pattern's tensors whose Shape the export reads */
    int tk[10], ntn;      /* their layouts (MHA_X, ...) */
    int64_t heads;        /* set by s_mha_check */
    const tensor_t *mask; /* a causal mask added to the scores, or NULL */
    int64_t mask_s;       /* its sequence length */
};

/* "FILE: node 3 'name' (Op): message"; node < 0: "FILE: message" */
int gpp_onnx_fail(imp_t *im, int node, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

uint64_t gpp_onnx_fnv(const char *s);

val_t *gpp_onnx_find(imp_t *im, const char *name);

/* Defines a value; a name defined twice breaks ONNX's single assignment. */
val_t *gpp_onnx_define(imp_t *im, int node, const char *name, int kind);

/* Value `name` read by node, of kind `want` (-1: any); NULL + message. */
val_t *gpp_onnx_val(imp_t *im, int node, const char *name, int want);

/* Input `k` of node as a value of kind `want` (-1: any). */
val_t *gpp_onnx_in(imp_t *im, int node, int k, int want);

/* Nodes reading value `name`, plus 1 if it is a graph output; *first: the
 * first consuming node (-1 if none). */
int gpp_onnx_uses(const imp_t *im, const char *name, int *first);

const attr_t *gpp_onnx_attr(const node_t *n, const char *name);

int gpp_onnx_attr_int(imp_t *im, int node, const char *name, int64_t def, int64_t *out);

int gpp_onnx_attr_float(imp_t *im, int node, const char *name, double def, double *out);

/* Where t's elements are, checked against its dims: 0, or -1 + message. */
int gpp_onnx_tensor_check(imp_t *im, int node, const tensor_t *t, int want_float, int64_t *numel);

/* The fp32 elements of t, which must number `want` (caller frees). */
float *gpp_onnx_floats(imp_t *im, int node, const tensor_t *t, int64_t want);

/* Integer element i of t (checked by s_tensor_check). */
int64_t gpp_onnx_int_at(const tensor_t *t, int64_t i);

/* A 2-d fp32 constant's dims. */
int gpp_onnx_matrix(imp_t *im, int node, const val_t *v, int64_t *r, int64_t *c);

/* A unique op name of at most 63 bytes from base ("x.weight" or "x.bias"
 * -> "x" when strip_weight, so that gpp's parameters take PyTorch's names). */
void gpp_onnx_opname(imp_t *im, const char *base, int strip_weight, char out[GPP_NAME_LEN]);

/* Records the initial value of op's parameter slot k (takes w). */
void gpp_onnx_weight(imp_t *im, int op, int k, float *w);

/* The node's output as the output of gpp op `op` (rank with the batch);
 * derives the op's shape (its inputs are derived: ops come in order). */
int gpp_onnx_out_op(imp_t *im, int node, const char *name, int op, int rank);

/* The value's shape per sample (its producer's). */
int gpp_onnx_shape(imp_t *im, const val_t *x, int64_t *rows, int64_t *cols);

int gpp_onnx_gemm(imp_t *im, int i);

int gpp_onnx_matmul(imp_t *im, int i);

int gpp_onnx_unary(imp_t *im, int i, gpp_op_type_t t, const char *in_name, const char *out_name);

/* The single node reading value `name` if it has op type `op` (the other
 * input, when there are two, must not be `name` too); -1 otherwise. */
int gpp_onnx_next(imp_t *im, const char *name, const char *op);

/* The other input of a two-input node than `name`, or NULL. */
const char *gpp_onnx_other(const node_t *n, const char *name);

/* Gelu: the erf form, or the tanh one with approximate="tanh". */
int gpp_onnx_gelu(imp_t *im, int i);
/* GELU as torch exports it without a Gelu op:
 * Div(x, sqrt 2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5). Returns 1 when
 * node i starts it (mapped), 0 when not, -1 on error. */
int gpp_onnx_gelu_erf(imp_t *im, int i);
/* GELU's tanh form written out (torch's nn.GELU(approximate='tanh') below
 * opset 20, Hugging Face's NewGELUActivation): node i, a Mul or Pow, is its
 * first node. Returns 1 when mapped, 0 when not, -1 on error. */
int gpp_onnx_gelu_tanh(imp_t *im, int i);

int gpp_onnx_layernorm(imp_t *im, int i);
/* LayerNorm as torch exports it below opset 17: ReduceMean(x) -> Sub(x, .)
 * -> Pow(2) -> ReduceMean -> Add(eps) -> Sqrt -> Div(d, .) -> Mul(gain)
 * [-> Add(bias)], the means over the last axis. Returns 1 when node i (the
 * first ReduceMean) starts it (mapped), 0 when not, -1 on error. */
int gpp_onnx_layernorm_parts(imp_t *im, int i);

int gpp_onnx_concat(imp_t *im, int i);

int gpp_onnx_add(imp_t *im, int i);

/* Split along the features: a gpp slice per output. The sizes are the
 * 'split' input (opset 13+) or attribute (opset < 13), else equal parts
 * (num_outputs in opset 18, or the number of outputs). */
int gpp_onnx_split(imp_t *im, int i);

/* Slice of the features with step 1 (x[..., a:b] in PyTorch): a gpp slice.
 * starts, ends, axes, steps are constant inputs (opset 10+) or attributes. */
int gpp_onnx_slice(imp_t *im, int i);

/* The integers of value v (an integer constant of rank 0 or 1, or a folded
 * shape) into out[cap]; *scalar (may be NULL): v is 0-d. The batch symbol
 * only where allow_batch. The count, or -1 + message naming what it is. */
int gpp_onnx_ints(imp_t *im, int i, const val_t *v, const char *what, int64_t *out, int cap,
                  int *scalar, int allow_batch);

int gpp_onnx_gather(imp_t *im, int i);

/* ReduceSum / ReduceMean / ReduceMax (mode gpp_reduce_mode_t): of a Gather,
 * an embedding bag (sum or mean); of an activation, pooling over axis 1. */
int gpp_onnx_reduce(imp_t *im, int i, int mode);

int gpp_onnx_alias(imp_t *im, int i);

int gpp_onnx_constant(imp_t *im, int i);

/* The ONNX dims of activation x: d[0] the batch, then [rows,] cols. */
int gpp_onnx_dims(const imp_t *im, const val_t *x, int64_t d[3]);

/* "[N, 4, 8]" */
const char *gpp_onnx_dimstr(const int64_t *d, int n, char *buf, size_t cap);

/* 1 when value `name` is an integer vector the importer folds (a Shape's
 * result or an integer constant). */
int gpp_onnx_is_ints(imp_t *im, const char *name);

/* Shape, and Gather, Unsqueeze, Squeeze, Concat, Slice, Cast of integer
 * vectors: computed here, the batch kept as a symbol. */
int gpp_onnx_fold(imp_t *im, int i);

/* The target of Reshape node i for an input of dims d[xr]: 0 (copy) and -1
 * (infer) resolved, the batch first as BATCH. The rank, or -1 + message. */
int gpp_onnx_reshape_target(imp_t *im, int i, const int64_t *d, int xr, int64_t t[SV_MAX]);

int gpp_onnx_reshape(imp_t *im, int i);

/* Unsqueeze, Squeeze and Flatten of an activation */
int gpp_onnx_layout(imp_t *im, int i);

/* The first node that outputs `name`, or -1 (the patterns walk back
 * through producers many times: indexed by s_import). */
int gpp_onnx_producer(const imp_t *im, const char *name);

int gpp_onnx_is(const imp_t *im, int node, const char *op);

/* Matches the pattern ending in Softmax node sm: 1 (recorded), 0 (not it). */
int gpp_onnx_att_match(imp_t *im, int sm, struct att *a);

/* Matches nn.MultiheadAttention's export around Softmax node sm: 1
 * (recorded in a, its nodes marked done), 0 (not it). */
int gpp_onnx_mha_match(imp_t *im, int sm, struct att *a);

/* One gpp attention op for pattern a, at its last node i. */
int gpp_onnx_attention(imp_t *im, int i, struct att *a);

/* The hint for an op gpp does not map. */
const char *gpp_onnx_hint(const char *op);

/* A Softmax in no attention pattern: why, where an attention's variant
 * gpp lacks shows around it. */
int gpp_onnx_softmax(imp_t *im, int i);

#endif
