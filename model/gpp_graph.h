/* gpp_graph: the model graph IR, one source of truth for planner and runtime.
 *
 * A graph is a list of ops in topological order (every input id is smaller
 * than the op's own id). Each op produces one tensor. Per sample, a tensor is
 * a row-major matrix of `rows` x `cols` elements (rows = sequence length, 1 for
 * flat features); a micro-batch of b samples is [b, rows, cols] row-major.
 * Dense tensors are fp32 as the graph counts them (out_bytes); the output of
 * a GPP_INPUT_INDICES input is int32 (4 bytes too), holding `cols` table
 * indices per sample. (A CUDA executor at precision bf16 keeps some
 * activations in bf16: kernels/gpp_backend.h, gpp_backend_act_bf16.)
 *
 * After gpp_graph_finalize() every op carries derived figures (parameters,
 * FLOPs, bytes) that the cost model and the memory bound use, and the
 * consumer lists. Types, attributes, shapes and figures are defined in one
 * place, the op table (gpp_optable.h). The executor instantiates the same
 * ops as kernels.
 *
 * Ownership: gpp_graph_new/zoo/read return a graph the caller owns; free with
 * gpp_graph_destroy(). Ops and their arrays are owned by the graph. */
#ifndef GPP_GRAPH_H
#define GPP_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "common/gpp_err.h"

typedef enum {
    GPP_OP_INPUT = 0,     /* data source: no inputs; attrs rows, cols, input_kind */
    GPP_OP_LINEAR,        /* y = x W^T (+ b); W (out_features, cols_in); attr bias */
    GPP_OP_RELU,
    GPP_OP_GELU,          /* attr form: gpp_gelu_form_t (tanh approximation or exact erf) */
    GPP_OP_LAYERNORM,     /* over the last dim, with gain and bias, eps 1e-5 */
    GPP_OP_ATTENTION,     /* multi-head self-attention over rows=seq, including the
                             QKV projection (cols -> 3 cols) and output projection
                             (cols -> cols); attr heads; no causal mask */
    GPP_OP_EMBEDDING_BAG, /* input: indices [bag]; table (table_rows, dim); sum */
    GPP_OP_CONCAT,        /* along features (cols); all inputs have equal rows */
    GPP_OP_ADD,           /* residual add of two equal-shaped inputs */
    GPP_OP_LOSS_MSE,      /* mean squared error against the teacher target; out 1x1 */
    GPP_OP_LOSS_CE,       /* softmax cross-entropy per row against teacher classes; out 1x1 */
    GPP_OP_SLICE,         /* columns [start, start + width) of its input (a split branch) */
    GPP_OP_RESHAPE,       /* its input's elements in order as another rows x cols per sample
                             (attrs rows, cols; the count kept): [S, C] <-> [1, S*C] */
    GPP_OP_OPAQUE,        /* from a profile file: costs only, not executable */
    /* PyTorch modules (scripts/gpp-export; CPU kernels only, docs/graph-format.md) */
    GPP_OP_EMBEDDING,     /* ids [1, L] -> [L, dim] (mode seq) or a bag's sum/mean */
    GPP_OP_PARAM_ADD,     /* y = x + P, P a learned [rows, cols] (positional) */
    GPP_OP_REDUCE,        /* over the rows: mean, max or sum -> [1, cols] */
    GPP_OP_SIGMOID,
    GPP_OP_TANH,
    GPP_OP_DROPOUT,       /* attr p; the mask from (seed, sample, op, element) */
    GPP_OP_MATMUL,        /* per sample a [r, k] x b [k, c] of two activations */
    GPP_OP_TRANSPOSE,     /* per sample [r, c] -> [c, r] */
    GPP_OP_STACK,         /* joins rows of inputs of equal cols */
    GPP_OP_TRIU,          /* [k, k] -> its upper triangle, row by row */
    GPP_OP_PATCH_EMBED,   /* Conv2d, kernel = stride, as a linear over patches */
    GPP_OP_CROSS_ATTENTION, /* queries of input 0, keys = values input 1 */
    GPP_OP_LOSS_BCE,      /* binary cross-entropy on logits; out 1x1 */
    GPP_OP__COUNT
} gpp_op_type_t;

typedef enum {
    GPP_INPUT_DENSE = 0,  /* fp32 features [rows, cols] */
    GPP_INPUT_INDICES = 1 /* int32 indices [1, cols=bag] in [0, table_rows) */
} gpp_input_kind_t;

/* GELU's formula (docs/graph-format.md). Tanh is 0 so that graphs written
 * before the attribute existed, and the zoo's models, keep their meaning. */
typedef enum {
    GPP_GELU_TANH = 0, /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    GPP_GELU_ERF = 1   /* 0.5 x (1 + erf(x / sqrt 2)), exact: torch's nn.GELU() default */
} gpp_gelu_form_t;

/* EMBEDDING's output: one row per id (nn.Embedding), or the bag's sum or
 * mean (nn.EmbeddingBag). */
typedef enum { GPP_EMBED_SEQ = 0, GPP_EMBED_SUM = 1, GPP_EMBED_MEAN = 2 } gpp_embed_mode_t;
typedef enum { GPP_REDUCE_MEAN = 0, GPP_REDUCE_MAX = 1, GPP_REDUCE_SUM = 2 } gpp_reduce_mode_t;
/* How an embedding table's optimizer step treats it: lazy updates only the
 * rows a mini-batch touched from a row-sparse gradient (torch's
 * SparseAdam / sparse=True); dense takes a dense gradient and steps every
 * row as torch's AdamW does (docs/config.md "Optimizer"). */
typedef enum { GPP_TABLE_LAZY = 0, GPP_TABLE_DENSE = 1 } gpp_table_update_t;

#define GPP_NAME_LEN 64

typedef struct {
    int id;                  /* index in gpp_graph_t.ops */
    char name[GPP_NAME_LEN]; /* unique within the graph */
    gpp_op_type_t type;
    int n_inputs;
    int *inputs;             /* producer op ids, in operand order */

    /* attributes (those not used by the type are 0) */
    int64_t rows, cols;      /* output shape per sample (derived but for INPUT, RESHAPE) */
    int64_t out_features;    /* LINEAR */
    int bias;                /* LINEAR: 1 with bias */
    int heads;               /* ATTENTION */
    int causal;              /* ATTENTION: 1 = query row i attends keys j <= i only */
    int form;                /* GELU: gpp_gelu_form_t */
    int64_t table_rows;      /* EMBEDDING_BAG: table rows; INPUT_INDICES: index range */
    int64_t dim;             /* EMBEDDING_BAG */
    int input_kind;          /* INPUT: gpp_input_kind_t */
    int64_t classes;         /* LOSS_CE: classes = cols of its input */
    int64_t start, width;    /* SLICE: first column taken and how many */
    int mode;                /* EMBEDDING: gpp_embed_mode_t; REDUCE: gpp_reduce_mode_t */
    int update;              /* EMBEDDING, EMBEDDING_BAG: gpp_table_update_t */
    double p;                /* DROPOUT, CROSS_ATTENTION (its probabilities): the probability
                                of zeroing an element */
    int offset;              /* TRIU: 1 without the diagonal, 0 with it */
    int lead;                /* PARAM_ADD: 1 when torch holds P as [1, rows, cols] */
    int64_t height, patch;   /* PATCH_EMBED: image height (width = cols / height), patch side */

    /* derived by gpp_graph_finalize (OPAQUE: given by the profile) */
    int64_t params;          /* trainable parameters (elements) */
    double fwd_flops;        /* per sample */
    double bwd_flops;        /* per sample (input grads + weight grads) */
    double bwd_w_flops;      /* per sample: of bwd_flops, the parameter gradients' (a W
                                pass of the zero-bubble schedules) */
    int64_t out_bytes;       /* output tensor bytes per sample */
    int64_t stash_bytes;     /* bytes kept from forward to backward, per sample
                                (gpp_op_stash_bytes: what the executor allocates) */
    int64_t io_bytes;        /* activation bytes read + written by fwd+bwd, per sample
                                (memory-bound roofline term) */
    int64_t weight_io_bytes; /* weight bytes touched by fwd+bwd per micro-batch, independent
                                of its size (dense: 3 x params x 4; embedding: only touched rows,
                                counted in io_bytes instead) */
    int sparse_params;       /* 1 when gradients are sparse (embedding tables) */

    /* derived: consumers */
    int n_outputs;
    int *outputs;            /* consumer op ids, ascending */
} gpp_op_t;

typedef struct {
    char name[GPP_NAME_LEN]; /* zoo name ("mmt") or the file's name */
    char spec[512];          /* full spec with every parameter, or the file path */
    int n_ops;
    gpp_op_t *ops;
    int cap;
    int finalized;
    /* Initial parameter values, or NULL (every parameter seeded): an array of
     * n_ops x GPP_GRAPH_PARAM_SLOTS host arrays, op i's parameter slot k at
     * [i * GPP_GRAPH_PARAM_SLOTS + k], each rows x cols floats in gpp's layout
     * (gpp_op_params); a NULL entry is initialised from the seed. The ONNX
     * importer fills it from the file's initializers; the executor copies
     * them in place of its seeded init. Owned by the graph; set after the
     * last gpp_graph_add. */
    float **init_weights;
} gpp_graph_t;

#define GPP_GRAPH_PARAM_SLOTS 4 /* = GPP_OP_MAX_PARAMS (gpp_optable.h) */

/* Caller owns the result. */
gpp_graph_t *gpp_graph_new(const char *name);
void gpp_graph_destroy(gpp_graph_t **self_p);

/* Appends an op; copies `name` and the `inputs` array. Returns the new id.
 * Attributes are set on the returned op (gpp_graph_op()) before finalize. */
int gpp_graph_add(gpp_graph_t *g, gpp_op_type_t type, const char *name, int n_inputs,
                  const int *inputs);
gpp_op_t *gpp_graph_op(gpp_graph_t *g, int id);

/* Convenience builders used by the zoo and tests; return the new op id. */
int gpp_graph_input(gpp_graph_t *g, const char *name, int64_t rows, int64_t cols);
int gpp_graph_input_indices(gpp_graph_t *g, const char *name, int64_t bag, int64_t table_rows);
int gpp_graph_linear(gpp_graph_t *g, const char *name, int in, int64_t out_features, int bias);
int gpp_graph_unary(gpp_graph_t *g, gpp_op_type_t type, const char *name, int in);
int gpp_graph_attention(gpp_graph_t *g, const char *name, int in, int heads);
int gpp_graph_embedding_bag(gpp_graph_t *g, const char *name, int in, int64_t table_rows,
                            int64_t dim);
int gpp_graph_concat(gpp_graph_t *g, const char *name, int n, const int *ins);
int gpp_graph_add2(gpp_graph_t *g, const char *name, int a, int b);
int gpp_graph_slice(gpp_graph_t *g, const char *name, int in, int64_t start, int64_t width);
int gpp_graph_reshape(gpp_graph_t *g, const char *name, int in, int64_t rows, int64_t cols);

/* Validates (topological order, arity, shapes, unique names, one or more
 * sinks) and derives shapes, figures and consumer lists. Idempotent.
 * Returns 0, or -1 with a message naming the op. */
int gpp_graph_finalize(gpp_graph_t *g, gpp_err_t *err);

/* Totals over all ops. */
int64_t gpp_graph_params(const gpp_graph_t *g);

/* Number of sink ops (no consumers) and source ops (no inputs). */
int gpp_graph_count_sinks(const gpp_graph_t *g);

/* The op table's name of a type ("linear"; "?" out of range), and back
 * (-1 for an unknown name). Everything else about a type: gpp_optable.h. */
const char *gpp_op_type_name(gpp_op_type_t t);
int gpp_op_type_parse(const char *name);

/* ---- model zoo (gpp_zoo.c) ----
 * spec: "name" or "name:key=value,key=value". Unknown names or keys, bad
 * values -> NULL with a message listing what is accepted. */
gpp_graph_t *gpp_zoo_build(const char *spec, gpp_err_t *err);
/* Writes every zoo model with its parameters and defaults. */
void gpp_zoo_list(FILE *out);
/* The zoo's models: count and the name of model i in [0, count). */
int gpp_zoo_count(void);
const char *gpp_zoo_name(int i);

/* ---- JSON (gpp_graph_json.c) ----
 * Format "gpp-graph/1": {"format":"gpp-graph/1","name":...,"ops":[{"id","name",
 * "type","inputs":[...], attrs...}]}. Ids in the file may be any distinct
 * integers; ops may come in any order (they are sorted topologically; a
 * cycle is an error). Errors name the file, op and field. */
gpp_graph_t *gpp_graph_read_json(const char *path, gpp_err_t *err);
gpp_graph_t *gpp_graph_parse_json(const char *text, const char *origin, gpp_err_t *err);
int gpp_graph_write_json(const gpp_graph_t *g, const char *path, gpp_err_t *err);
/* Caller owns the returned string (free()). */
char *gpp_graph_to_json(const gpp_graph_t *g);

/* Initial weights from a safetensors file under torch's state_dict names
 * and layouts (gpp_op_param_torch): every parameter of finalized g must be
 * there, F32 and of its shape, and nothing else; replaces init_weights.
 * A graph file's "weights" key names one (gpp_graph_weights.c). 0, or -1 +
 * message naming the file and the tensor. */
int gpp_graph_load_weights(gpp_graph_t *g, const char *path, gpp_err_t *err);

/* The initial value of op's parameter slot k given by the model file
 * (init_weights), or NULL when it is seeded. */
const float *gpp_graph_init_weight(const gpp_graph_t *g, int op, int k);

#endif
