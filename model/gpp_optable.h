/* gpp_optable: the op table — one row per gpp_op_type_t holding everything
 * the project knows about an op type: its name, arity, attributes (JSON key,
 * required or optional, default, valid range), shape derivation, parameter
 * list (names, shapes, initialisation), FLOPs, bytes moved and what its
 * forward keeps for its backward.
 *
 * Readers: gpp_graph_finalize derives every op's shape and figures through
 * it; the graph JSON reader and writer name types and attributes through it;
 * the planner's cost model reads its kernel counts; the executor allocates
 * parameters and stashes from it. The kernels' entry points sit in a second
 * array indexed by the same enum next to the kernels (gpp_op_kernels in
 * kernels/gpp_ops.h), so the model does not depend on the kernels.
 *
 * Units: figures are per sample (FLOPs, bytes); a micro-batch of n samples
 * costs n times as much. docs/model.md says how to add an op. */
#ifndef GPP_OPTABLE_H
#define GPP_OPTABLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_alloc_rule.h"
#include "common/gpp_err.h"
#include "model/gpp_graph.h"

/* What an op is to the runtime. */
typedef enum {
    GPP_ROLE_SOURCE = 0, /* reads its output from the data source; no gradient */
    GPP_ROLE_LAYER,      /* forward kernel, backward kernel; its output takes a gradient */
    GPP_ROLE_LOSS,       /* reads labels; its forward also computes its input's gradient */
    GPP_ROLE_OPAQUE      /* costs only (from a profile): not executable */
} gpp_op_role_t;

/* An attribute: a field of gpp_op_t that a graph file sets. */
typedef enum {
    GPP_ATTR_I64 = 0, /* int64_t field, integer in [min, max] */
    GPP_ATTR_INT,     /* int field, integer in [min, max] */
    GPP_ATTR_NUM      /* double field, number >= min */
} gpp_attr_type_t;

typedef struct {
    const char *name; /* JSON key, the same as the gpp_op_t field */
    gpp_attr_type_t type;
    size_t offset;             /* offsetof(gpp_op_t, field) */
    int required;              /* 1: a graph file must give it */
    int64_t def;               /* value when an optional attribute is absent */
    int64_t min, max;          /* valid range (NUM: min only) */
    const char *const *labels; /* NULL, or the JSON strings of values 0, 1, ... */
} gpp_attr_t;

/* Parameter initialisation, from (seed, op id, parameter slot, element). */
typedef enum {
    GPP_INIT_ZERO = 0,
    GPP_INIT_ONE,
    GPP_INIT_UNIFORM, /* uniform in [-scale, scale] (Xavier: scale = sqrt(6 / (fan_in + fan_out)))
                       */
    GPP_INIT_NORMAL   /* normal, standard deviation `scale` */
} gpp_init_t;

/* One trainable parameter of an op: a [1, rows, cols] fp32 tensor named
 * "<op name>.<name>". The order of an op's list is the parameter slot order
 * of checkpoints, initialisation and kernel arguments. */
typedef struct {
    const char *name;
    int64_t rows, cols;
    int sparse; /* 1: row-sparse gradient (embedding table) */
    gpp_init_t init;
    float scale;
    /* torch's state_dict key after "<op name>." (NULL: `name`; "": the op's
     * name alone) and torch's shape (tdims 0: [rows, cols]); the same
     * elements in the same order (gpp_op_param_torch) */
    const char *torch;
    int tdims;
    int64_t tshape[4];
} gpp_param_t;

#define GPP_OP_MAX_PARAMS 4
#define GPP_OP_MAX_ATTRS 5

/* Per-sample figures of an op of known shape. */
typedef struct {
    double fwd_flops, bwd_flops;
    double bwd_w_flops;         /* of bwd_flops, the parameter gradients' (0 without parameters) */
    int64_t io_bytes;           /* activation bytes read + written by fwd + bwd */
    int64_t kernel_stash_bytes; /* what the forward kernel fills for the backward */
} gpp_op_cost_t;

typedef struct {
    const char *name; /* "linear": the graph file's "type" */
    gpp_op_role_t role;
    int min_inputs, max_inputs;
    int n_attrs;
    gpp_attr_t attrs[GPP_OP_MAX_ATTRS];
    int takes_indices;    /* may read an indices input (GPP_INPUT_INDICES) */
    int bwd_reads_inputs; /* the backward reads the forward's input activations */
    int fwd_kernels;      /* kernel launches of a forward (a backward: twice as many) */
    /* Of those, the matrix products (GEMMs) of a forward and of a backward:
     * the roofline charges its per-kernel fill only to these; element-wise
     * and memory-bound kernels (softmax, bias sums, gathers) pay the launch
     * only (planner/gpp_cost_device.c, gpp_roofline_ms). */
    int fwd_gemms, bwd_gemms;
    /* Validates the op against its inputs (already derived) and sets rows and
     * cols. NULL: the shape is given (INPUT, OPAQUE). 0, or -1 + message. */
    int (*shape)(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
    /* Fills out[0..n) and returns n; NULL: no parameters. */
    int (*params)(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t out[GPP_OP_MAX_PARAMS]);
    /* Per-sample figures; NULL: given by the profile (OPAQUE). */
    void (*cost)(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
} gpp_op_info_t;

/* Indexed by gpp_op_type_t. */
extern const gpp_op_info_t gpp_optable[GPP_OP__COUNT];

/* The attribute of op type t called `name`, or NULL. */
const gpp_attr_t *gpp_op_attr_find(gpp_op_type_t t, const char *name);
/* Reads / writes an attribute of op as a double (integers exactly up to 2^53). */
double gpp_op_attr_get(const gpp_op_t *op, const gpp_attr_t *a);
void gpp_op_attr_set(gpp_op_t *op, const gpp_attr_t *a, double v);

/* The parameter list of op (of a finalized graph, or one whose inputs are
 * derived); returns its length. */
int gpp_op_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t out[GPP_OP_MAX_PARAMS]);

/* The state_dict key and shape torch gives op's parameter slot k:
 * "<op>.in_proj_weight" [3E, E], "<op>.weight" [C] of a layer norm, ...
 * (docs/graph-format.md, "Name mapping"). Returns the number of dims. */
int gpp_op_param_torch(const gpp_graph_t *g, const gpp_op_t *op, int k, char *name, size_t cap,
                       int64_t dims[4]);

/* Stash: the bytes per sample an op holds from its forward to its backward,
 * each tensor counted ONCE, at the op that owns it (gpp_op_t.stash_bytes):
 *   its own output when a consumer's backward reads it (gpp_op_output_kept;
 *   a tensor read by several ops counts once)
 * + its kernel stash (gpp_op_cost_t.kernel_stash_bytes)
 * + for a loss, its input's gradient, which its forward computes (none when
 *   the input is data).
 * Tensors crossing a stage boundary (sent outputs, received inputs) depend
 * on the stage: its memory plan counts them. Opaque ops: the profile's. */
int64_t gpp_op_kernel_stash_bytes(const gpp_graph_t *g, const gpp_op_t *op);
/* The W stash: bytes per sample an op's B pass (its input-gradient part,
 * zero-bubble schedules) writes for its W pass: the q/k/v gradient of
 * attention (3 seq hidden floats) and cross-attention (sq E + sk 2E); 0
 * for every other op (its W reads only its inputs, stash and output
 * gradient). */
int64_t gpp_op_wstash_bytes(const gpp_graph_t *g, const gpp_op_t *op);
int64_t gpp_op_stash_bytes(const gpp_graph_t *g, const gpp_op_t *op);
/* 1 when op's output is kept for a backward (the whole graph one stage): a
 * consumer's backward reads it, or op is a fused ReLU (its backward reads
 * its output); 0 for a linear with a fused ReLU (never materialised). */
int gpp_op_output_kept(const gpp_graph_t *g, const gpp_op_t *op);

/* ---- linear + activation fusion (docs/executor.md "Fusion") ----
 * The executor runs a linear and the ReLU or GELU that is its output's only
 * consumer as one kernel call (gpp_linear_act_fwd) when both are in the
 * stage. A fused ReLU's input is never materialised: its backward reads the
 * ReLU's own output instead (kept from the forward). A fused GELU's input is
 * written by the same call and kept, as unfused. in_stage: a flag per op id
 * (NULL: the whole graph is one stage). gpp_op_fused_act gives the
 * activation op linear `op` computes, or -1; gpp_op_fused_from the linear
 * whose call computes activation `op`, or -1. The executor and the memory
 * plan apply the same rule. */
int gpp_op_fused_act(const gpp_graph_t *g, const char *in_stage, int op);
int gpp_op_fused_from(const gpp_graph_t *g, const char *in_stage, int op);

/* ---- device memory figures of ops (the stage's memory plan,
 * model/gpp_memplan.h, lays them out) ---- */

/* Optimizer state buffers per parameter element (kernels/gpp_optim.c): SGD
 * keeps its momentum buffer (also at momentum 0), AdamW m and v. */
#define GPP_OPTIM_BUFS_SGD 1
#define GPP_OPTIM_BUFS_ADAMW 2

/* Label bytes per sample a loss op reads (0 for other ops): loss_mse the
 * input's shape (f32), loss_ce one class index (i32) per row. */
int64_t gpp_op_label_bytes(const gpp_graph_t *g, const gpp_op_t *op);
/* The stream workspace an op's kernels ask for n samples, the larger of its
 * forward's and its backward's request: fixed + n x per_sample bytes. Every
 * backend's request is of this form (gpp_backend_op_workspace); a profile
 * records the pair ("workspace", planner/gpp_cost.h). */
typedef struct {
    int64_t fixed, per_sample;
} gpp_work_t;
/* The op table's figure, which is the CPU backend's: a linear with bias n x
 * rows floats of ones; attention gpp_attention_workspace_bytes (a seq x seq
 * block whatever n is, so a fixed part). */
gpp_work_t gpp_op_workspace(const gpp_graph_t *g, const gpp_op_t *op);
int64_t gpp_op_workspace_bytes(const gpp_graph_t *g, const gpp_op_t *op, int64_t n);
size_t gpp_attention_workspace_bytes(int64_t n, int64_t seq, int64_t hidden);
/* Rows a sparse gradient of op (an embedding table) is created with for
 * mini-batch `batch`: the most rows one mini-batch can touch, so it never
 * grows (min(table rows, batch x bag)); 0 without a sparse parameter. */
int64_t gpp_op_sparse_cap_rows(const gpp_graph_t *g, const gpp_op_t *op, int64_t batch);
/* The bf16 copies of op's parameters a CUDA backend keeps at precision
 * bf16 (its products read them: a linear's and attention's weights and
 * biases, rounded once per optimizer step; kernels/cuda/gpp_cuda_blas.c
 * "wpack"), each rounded by rule; 0 for other ops. */
int64_t gpp_op_param_copy_bytes(const gpp_graph_t *g, const gpp_op_t *op, gpp_alloc_rule_t rule);
/* Parameter state of op: values + gradients + optimizer state
 * (optim_bufs, GPP_OPTIM_BUFS_*). Dense: params x 4 x (2 + optim_bufs);
 * sparse: table x 4 x (1 + optim_bufs) + the sparse gradient (row map
 * table_rows x 4 + cap rows x (1 + dim) x 4). */
int64_t gpp_op_state_bytes(const gpp_graph_t *g, const gpp_op_t *op, int optim_bufs, int64_t batch);

/* 1 when the output of an op of type t takes a gradient (not data, not a
 * loss's value). */
int gpp_op_has_grad(gpp_op_type_t t);

/* Kernel stash layouts, in bytes for n samples (kernels/gpp_ops.h): layer
 * norm keeps mean and 1/std per row; attention keeps qkv [seq, 3 hidden],
 * the softmax probabilities [heads, seq, seq] and the context [seq, hidden]. */
size_t gpp_layernorm_stash_bytes(int64_t n, int64_t rows);
size_t gpp_attention_stash_bytes(int64_t n, int64_t seq, int64_t hidden, int heads);
/* cross_attention: q [sq, E], kv [sk, 2E], probabilities [heads, sq, sk],
 * ctx [sq, E]; its backward's workspace dctx, dq, dkv and one [sq, sk]. */
size_t gpp_cross_attention_stash_bytes(int64_t n, int64_t sq, int64_t sk, int64_t hidden,
                                       int heads);
size_t gpp_cross_attention_workspace_bytes(int64_t n, int64_t sq, int64_t sk, int64_t hidden);
/* patch_embed's workspace: the patches [P, C p p], their gradient, P ones. */
int64_t gpp_patch_embed_workspace_bytes(const gpp_graph_t *g, const gpp_op_t *op, int64_t n);

/* Validates op's arity, inputs and attribute ranges, derives its shape and
 * every figure (gpp_op_t's derived fields). Used by gpp_graph_finalize. */
int gpp_op_derive(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);

#endif
