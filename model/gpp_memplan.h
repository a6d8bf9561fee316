/* gpp_memplan: a stage's device memory, planned once. From the stage's ops,
 * the micro-batch size n, the micro-batches in flight and the micro-batch
 * slots it lays out every buffer of a micro-batch (activations, kernel
 * stashes, gradients, received tensors, labels) and the stage's own
 * buffers (stream workspace, load-ahead, CUDA graph feeds, loss values) at
 * fixed offsets in one arena. The executor allocates it (one arena, every
 * tensor at its offset) and the planner's stage memory figure
 * (planner/gpp_cost.c gpp_cost_stage_mem) is its total: one computation.
 *
 * Layout (docs/executor.md "Memory"): a buffer lives from the step of the
 * pass that writes it to the step of the pass that last reads it. One that
 * outlives a pass, or that a caller fills or reads between passes (received
 * tensors, arriving and leaving gradients), is the micro-batch's own: it
 * goes into the micro-batch's lane, one per micro-batch in flight, laid out
 * once for all lanes. One that lives inside one pass only is a transient:
 * it goes into a hole of the running micro-batch's lane where no buffer of
 * the lane lives then, else into the scratch every pass shares (a stage's
 * passes run one at a time on its stream). Both are placed largest first,
 * each at the lowest offset free for its lifetime. Parameters, gradients
 * and optimizer state are their own allocations; the total counts them. */
#ifndef GPP_MEMPLAN_H
#define GPP_MEMPLAN_H

#include <stdint.h>

#include "common/gpp_alloc_rule.h"
#include "common/gpp_err.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h"

/* What the device that runs the stage changes in its plan (a NULL
 * gpp_stage_dev_t: the op table's stashes, 64-byte blocks, no load-ahead,
 * no graphs). */
typedef struct {
    /* NULL, or per op id the bytes per sample its forward kernel keeps for
     * the backward on the backend that runs it, -1 for the op table's figure
     * (gpp_op_kernel_stash_bytes): the CUDA backend's attention cores keep
     * less than the table's layout (gpp_backend_attention_stash_bytes), and
     * a profile measured there says so (planner/gpp_cost.h) */
    const int64_t *kernel_stash;
    /* NULL, or per op id the stream workspace its kernels ask on the
     * backend that runs it (gpp_backend_op_workspace; fixed < 0: the op
     * table's, gpp_op_workspace): the CUDA attention cores ask more than the
     * CPU's, and a profile measured there says so */
    const gpp_work_t *work;
    /* NULL, or per op id the bytes per sample of its output (and of the
     * output's gradient) as the device keeps it (gpp_backend_op_out_bytes;
     * a profile's "out_bytes"), -1 for the op table's op->out_bytes (fp32):
     * at precision bf16 the CUDA backend keeps most activations in bf16,
     * half the bytes, in the stage that makes them and in the stages that
     * receive them alike */
    const int64_t *out_bytes;
    /* how the device's allocator rounds each block (common/gpp_alloc_rule.h;
     * gpp_backend_alloc_rule): every figure is in rounded bytes, as
     * gpp_backend_mem counts them */
    gpp_alloc_rule_t alloc_rule;
    int load_ahead;   /* the executor loads ahead: two buffers per SOURCE op and loss */
    int param_copies; /* the backend keeps bf16 copies of the product weights
                         (gpp_op_param_copy_bytes) in the state; the planner's
                         plan for a bf16 cuda job (the executor's own leaves them
                         to the backend's own bytes, measured) */
    int graphs;       /* the executor may replay its passes as CUDA graphs: the feeds */
} gpp_stage_dev_t;

/* A pass of one micro-batch: the forward (ops by ascending id), the
 * backward (descending) and, with the backward split (zero-bubble
 * schedules), the W pass after it (descending): B computes the input
 * gradients, W the parameter gradients from what it kept for it. A step of
 * a pass: 0 its start (begin, arriving gradients), 1 .. n_local its ops in
 * pass order, n_local + 1 its end (after the backward: until the input
 * gradients are sent and the micro-batch released). */
typedef enum { GPP_PASS_F = 0, GPP_PASS_B, GPP_PASS_W, GPP_PASS__COUNT } gpp_pass_kind_t;

typedef struct {
    int optim_bufs; /* optimizer state buffers per parameter (GPP_OPTIM_BUFS_*) */
    int64_t batch;  /* the mini-batch over all replicas (sparse gradients' rows) */
    int64_t n;      /* samples of the largest micro-batch this replica runs, >= 0 */
    int inflight;   /* most micro-batches begun and not released at once, >= 1 */
    int slots;      /* micro-batch slots (each keeps its loss values), >= 0 */
    int no_fuse;    /* 1: a linear and the ReLU/GELU it feeds run as two ops
                       (gpp_exec_cfg_t.no_fuse), each with its own output */
    int split;      /* 1: the backward split in B and W (GPP_BWD_IN, GPP_BWD_W):
                       what an op's W reads (its inputs, its output gradient, its
                       kernel stash, its W stash) lives until its W, and a
                       micro-batch's lane until its W pass; inflight then counts
                       micro-batches begun and not past W */
    /* what the device changes (NULL: the op table's figures, the CPU's
       64-byte alignment, no load-ahead, no graphs) */
    const gpp_stage_dev_t *dev;
} gpp_memplan_cfg_t;

typedef struct gpp_memplan_s gpp_memplan_t;

/* Plans ops `ops[0..n_ops)` of g (finalized, any order, no repeats).
 * Caller owns the result. NULL + message on a bad configuration. */
gpp_memplan_t *gpp_memplan_new(const gpp_graph_t *g, int n_ops, const int *ops,
                               const gpp_memplan_cfg_t *cfg, gpp_err_t *err);
void gpp_memplan_destroy(gpp_memplan_t **self_p);

/* The plan in figures, bytes. total = state + arena: what the backend
 * holds for the stage (gpp_backend_mem, less the backend's own buffers). */
typedef struct {
    int64_t total_bytes;
    int64_t state_bytes;   /* parameters, gradients, optimizer state (own allocations) */
    int64_t arena_bytes;   /* the arena as the allocator rounds it */
    int64_t arena_raw;     /* the arena's bytes asked */
    int64_t work_bytes;    /* of the arena: the stream workspace, the largest request */
    int64_t ahead_bytes;   /* of the arena: the load-ahead buffers (two per SOURCE op, loss) */
    int64_t feed_bytes;    /* of the arena: the CUDA graph feeds (one per SOURCE op, loss,
                              received data input) */
    int64_t loss_bytes;    /* of the arena: the loss values of every slot */
    int64_t lane_bytes;    /* one micro-batch's lane */
    int64_t scratch_bytes; /* the transients no lane's hole took */
    int64_t live_bytes;    /* the most bytes one micro-batch's buffers have alive at
                              once (a lane and the scratch never hold less) */
    int lanes;             /* lanes in the arena: the plan's in-flight count */
    int slots;
} gpp_memplan_sum_t;
void gpp_memplan_summary(const gpp_memplan_t *self, gpp_memplan_sum_t *out);
int64_t gpp_memplan_total(const gpp_memplan_t *self);
/* The total with `lanes` (>= 1) lanes instead of the plan's inflight: the
 * same layout, the arena longer or shorter by whole lanes (an order's
 * count, gpp_zb_stage_mem, without planning again). */
int64_t gpp_memplan_total_lanes(const gpp_memplan_t *self, int lanes);

/* ---- where each buffer is (the executor) ---- */

/* The buffers of a micro-batch, by kind and op id: an op's output (ACT; a
 * received tensor under its producer's id) and its gradient (GRAD), an
 * op's kernel stash (STASH), a loss's labels (LABEL), with the backward
 * split an op's W stash (WSTASH: B writes it, W reads it). */
typedef enum {
    GPP_BUF_ACT = 0,
    GPP_BUF_GRAD,
    GPP_BUF_STASH,
    GPP_BUF_LABEL,
    GPP_BUF_WSTASH,
    GPP_BUF__COUNT
} gpp_buf_kind_t;

int gpp_memplan_n_bufs(const gpp_memplan_t *self);
/* The buffer of that kind and op, or -1 (the stage never makes it). */
int gpp_memplan_buf(const gpp_memplan_t *self, gpp_buf_kind_t kind, int op);
void gpp_memplan_buf_info(const gpp_memplan_t *self, int b, gpp_buf_kind_t *kind, int *op);
/* Its bytes at the plan's n samples (a tensor of <= n samples fits). */
int64_t gpp_memplan_buf_bytes(const gpp_memplan_t *self, int b);
/* Birth and death of buffer b: pass kinds and steps (both inclusive). */
void gpp_memplan_life(const gpp_memplan_t *self, int b, gpp_pass_kind_t *bk, int *bt,
                      gpp_pass_kind_t *dk, int *dt);
/* 1 when b is in the scratch every pass shares, not in a lane. */
int gpp_memplan_in_scratch(const gpp_memplan_t *self, int b);
/* Where buffer b of the micro-batch in lane l (0 .. lanes - 1) starts in
 * the arena. */
int64_t gpp_memplan_at(const gpp_memplan_t *self, int l, int b);
/* The stream workspace: offset, and its bytes in *bytes (0: none). */
int64_t gpp_memplan_work_at(const gpp_memplan_t *self, int64_t *bytes);
/* Load-ahead buffer k (0, 1) of op (a SOURCE op or a loss), or a CUDA
 * graph feed of op (k -1): offset and bytes; -1 when op has none. */
int64_t gpp_memplan_data_at(const gpp_memplan_t *self, int op, int k, int64_t *bytes);
/* The loss values of slot s (4 bytes per loss op), -1 when none. */
int64_t gpp_memplan_loss_at(const gpp_memplan_t *self, int s);

#endif
