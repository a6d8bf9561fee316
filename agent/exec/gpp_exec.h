/* gpp_exec: the stage executor. Runs a set of ops of a model (a pipeline
 * stage, or the whole model) forward and backward on one backend, one
 * micro-batch at a time, and owns the stage's parameters, gradients and
 * optimizer state (docs/executor.md).
 *
 * An iteration, as a pipeline agent drives it (micro-batch slots `mb` are
 * small integers the caller picks; several may be in flight):
 *   gpp_exec_begin(ex, mb, sample_lo, n)         samples [sample_lo, +n)
 *   gpp_exec_set_input(ex, mb, producer, t, lo)  every boundary input
 *   gpp_exec_forward(ex, mb)
 *   gpp_exec_output(ex, mb, op)                  -> consumer stages
 *   gpp_exec_add_output_grad(ex, mb, op, dy, lo) every boundary output, once
 *                                                per consumer piece: summed
 *   gpp_exec_backward(ex, mb)                    or, zero-bubble schedules:
 *                                                gpp_exec_backward_part(ex, mb, GPP_BWD_IN)
 *   gpp_exec_input_grad(ex, mb, producer)        -> producer stages
 *                                                ... gpp_exec_backward_part(ex, mb, GPP_BWD_W)
 *   gpp_exec_release(ex, mb)
 *   gpp_exec_grads / _sparse_grad                all-reduce across replicas
 *   gpp_exec_loss(ex, &loss), gpp_exec_step(ex)
 * INPUT ops and labels come from the data source by sample index (no data
 * or label traffic). Parameters are drawn from (seed, op id, slot, element
 * index), so every process builds the same weights for an op.
 *
 * Gradient convention: `batch` (B) counts every micro-batch of every
 * data-parallel replica; a loss over n samples contributes (n / B) x its
 * mean, so replicas SUM their gradients and gpp_exec_loss shares.
 *
 * Memory: the stage's memory plan (model/gpp_memplan.h), built at
 * creation for micro-batches of at most cfg.micro samples, cfg.inflight of
 * them begun and not released at once, in slots 0 .. cfg.slots - 1 (with
 * cfg.split, each held until its W pass): one arena from the backend,
 * every tensor of a micro-batch at the plan's offset in the lane it takes
 * at begin and gives back at release. The backend's memory is the plan's
 * total (gpp_exec_plan) by construction.
 *
 * Errors: run-time failures return -1 with a message; an op id that is not
 * a boundary of the stage is a programmer error (assert).
 *
 * Streams: everything is enqueued on gpp_exec_stream. Returned tensors are
 * complete once it is synchronised; tensors passed in must stay unchanged
 * until then.
 *
 * Ownership: the caller owns the executor; it borrows the graph, the
 * backend and the data source. Returned tensors belong to the executor. */
#ifndef GPP_EXEC_H
#define GPP_EXEC_H

#include <stdint.h>

#include "agent/data/gpp_data.h"
#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_optim.h"
#include "kernels/gpp_sparse.h"
#include "model/gpp_graph.h"
#include "model/gpp_memplan.h"
#include "model/gpp_optable.h"

typedef struct {
    uint64_t seed;        /* weight initialisation */
    gpp_optim_hp_t optim; /* optimizer and hyper-parameters */
    int64_t batch;        /* B: mini-batch samples over all micro-batches and replicas */
    int graphs;           /* 1: record and replay each pass as a CUDA graph once the
                             iterations repeat (gpp_exec_run below, docs/gpu.md "CUDA
                             graphs"); ignored where the backend cannot capture */
    int no_fuse;          /* 1: run a linear and the ReLU/GELU it feeds as two ops (a
                             debugging and benchmarking aid; the results are the same,
                             the memory plan holds both outputs) */
    int load_ahead;       /* 0: on where the backend is a device (CUDA), 1: on, -1: off.
                             On: after loading a micro-batch's inputs and labels, the
                             next micro-batch's samples (gpp_data_track_t's guess) are
                             copied to the device on a second stream while the compute
                             stream works, into two buffers per op of the memory plan;
                             a load they hold is a device copy, with no host wait */
    /* the memory plan: the samples of the largest micro-batch (0: batch),
       the most micro-batches begun and not released at once (0: 1), the
       micro-batch slots (0: batch, one a sample at most); begin refuses more */
    int64_t micro;
    int inflight;
    int slots;
    int split; /* 1: the stage runs B and W passes (gpp_exec_backward_part): the plan
                  holds what W reads until W, a lane until W; no CUDA graphs */
} gpp_exec_cfg_t;

typedef struct gpp_exec_s gpp_exec_t;

/* Instantiates ops `ops[0..n_ops)` (any order, no duplicates) of g
 * (finalized). `data` may be NULL when the stage has no INPUT op, no loss op
 * and no external INPUT producer. Caller owns the result; NULL + message on
 * an op that cannot run (OPAQUE), an id out of range, a bad config or no
 * memory. */
gpp_exec_t *gpp_exec_new(const gpp_graph_t *g, int n_ops, const int *ops, gpp_backend_t *be,
                         gpp_data_t *data, const gpp_exec_cfg_t *cfg, gpp_err_t *err);
void gpp_exec_destroy(gpp_exec_t **self_p);

gpp_stream_t *gpp_exec_stream(gpp_exec_t *self);
const gpp_graph_t *gpp_exec_graph(const gpp_exec_t *self);

/* ---- the stage's boundaries (ascending op ids) ---- */
/* Producers outside the stage whose tensors the stage consumes. */
int gpp_exec_n_inputs(const gpp_exec_t *self);
int gpp_exec_input_op(const gpp_exec_t *self, int i);
/* Ops of the stage consumed by ops outside it. */
int gpp_exec_n_outputs(const gpp_exec_t *self);
int gpp_exec_output_op(const gpp_exec_t *self, int i);
/* 1 when the stage holds a loss op. */
int gpp_exec_has_loss(const gpp_exec_t *self);

/* Loads served from the load-ahead buffers, and loads read then (the
 * first, and any whose samples were not the guess). */
void gpp_exec_load_ahead_stats(const gpp_exec_t *self, int64_t *hits, int64_t *misses);

/* ---- one micro-batch ---- */

/* Opens slot mb (>= 0) for samples [sample_lo, sample_lo + n), n >= 0 (0: an
 * empty data-parallel shard; forward and backward then run nothing and
 * outputs and gradients have n = 0); it takes a free lane of the memory
 * plan. -1 if the slot is still between forward and backward, is past the
 * plan's slots, n is over its micro-batch or no lane is free. A slot whose
 * backward is done is released implicitly. */
int gpp_exec_begin(gpp_exec_t *self, int mb, int64_t sample_lo, int64_t n, gpp_err_t *err);
/* The device buffer [n, rows, cols] of boundary input `producer` for the
 * caller to fill (e.g. receive into it); marks the input as set. */
gpp_tensor_t *gpp_exec_input(gpp_exec_t *self, int mb, int producer);
/* Copies device tensor src [k, rows, cols] into samples [lo, lo + k) of the
 * boundary input. -1 when dtype, rows or cols differ from the producer's or
 * [lo, lo + k) is outside the micro-batch. */
int gpp_exec_set_input(gpp_exec_t *self, int mb, int producer, const gpp_tensor_t *src, int64_t lo,
                       gpp_err_t *err);
/* Runs the stage's ops forward. Loss ops compute their loss and their
 * input's gradient here. -1 when a boundary input was not (fully) set (the
 * micro-batch stays open: set it and call again); -1 from the data source or
 * a kernel aborts the micro-batch (its slot is released). */
int gpp_exec_forward(gpp_exec_t *self, int mb, gpp_err_t *err);
/* Output [n, rows, cols] of a boundary output op, valid until the
 * micro-batch's backward. */
const gpp_tensor_t *gpp_exec_output(gpp_exec_t *self, int mb, int op);
/* Accumulates dy [k, rows, cols] into samples [lo, lo + k) of boundary output
 * op's gradient (+=). -1 on a shape mismatch or outside forward..backward. */
int gpp_exec_add_output_grad(gpp_exec_t *self, int mb, int op, const gpp_tensor_t *dy, int64_t lo,
                             gpp_err_t *err);
/* Runs backward; accumulates parameter gradients; frees activations and
 * stashes (a stage with no input gradient to send gives its lane back
 * here). -1 when a boundary output received no gradient. */
int gpp_exec_backward(gpp_exec_t *self, int mb, gpp_err_t *err);
/* The backward in two passes, for zero-bubble schedules (docs/executor.md
 * "The split backward"). GPP_BWD_IN (B): the input gradients, every
 * boundary one readable (gpp_exec_input_grad) at once. Until W the slot
 * keeps what it held between forward and backward (W reads the inputs and
 * kernel stashes of the ops with parameters; the memory model,
 * gpp_zb_stage_mem, holds all of it) plus those ops' output gradients and
 * the W stashes B writes (gpp_op_wstash_bytes); other gradients are freed.
 * GPP_BWD_W (W): the parameter gradients (+=), then frees what the slot
 * held; it is then as after gpp_exec_backward. B then W give gpp_exec_backward's gradients bit
 * for bit; GPP_BWD_ALL is gpp_exec_backward. -1 with a message on W before
 * B, a second B, a backend without the split (gpp_backend_bwd_split) and
 * gpp_exec_backward's errors. Between B and W the slot is in flight:
 * begin and gpp_exec_step refuse (a W pass never crosses an optimizer
 * step); gpp_exec_release aborts it. */
int gpp_exec_backward_part(gpp_exec_t *self, int mb, gpp_bwd_part_t part, gpp_err_t *err);
/* Gradient [n, rows, cols] of a boundary input after backward (or B);
 * NULL when the producer is an INPUT op (data has no gradient). Valid
 * until release. */
const gpp_tensor_t *gpp_exec_input_grad(gpp_exec_t *self, int mb, int producer);
/* Gives back whatever the slot still holds and its lane (also aborts a
 * micro-batch); its loss values stay until the step. */
void gpp_exec_release(gpp_exec_t *self, int mb);

/* ---- the iteration ---- */

/* Flat dense gradients (device memory, all dense parameters of the stage in
 * gpp_exec_param order); *numel receives the element count. */
float *gpp_exec_grads(gpp_exec_t *self, int64_t *numel);
/* Embedding tables' sparse gradients (gpp_sparse.h), in parameter order. */
int gpp_exec_n_sparse(const gpp_exec_t *self);
gpp_sparse_grad_t *gpp_exec_sparse_grad(gpp_exec_t *self, int i);
/* This replica's share of the loss of the micro-batches forwarded since the
 * last step (convention above); synchronises the stream. */
int gpp_exec_loss(gpp_exec_t *self, double *loss, gpp_err_t *err);

/* begin + forward + backward of micro-batch slot m over samples
 * [sample_lo, sample_lo + n). */
int gpp_exec_run(gpp_exec_t *self, int m, int64_t sample_lo, int64_t n, gpp_err_t *err);
/* Evaluation: the loss over samples [lo, lo + n) in micro-batches of at
 * most `micro` (and the plan's micro-batch), in slot 0, forward only, kernels in evaluation mode (dropout passes
 * its input through), nothing stepped or recorded. Between iterations
 * only (after gpp_exec_step), on a stage with the loss, without CUDA
 * graphs recorded. *loss: the mean over the n samples. */
int gpp_exec_evaluate(gpp_exec_t *self, int64_t lo, int64_t n, int64_t micro, double *loss,
                      gpp_err_t *err);
/* CUDA graphs (cfg.graphs on a backend that captures: CUDA; stages without
 * sparse parameters; the timing hook off): when every iteration (calls up
 * to gpp_exec_step) makes the same calls in the same order with the same
 * sizes, as a pipeline schedule and gpp-train's micro-batches do, the
 * executor records each forward and backward pass of each slot after one
 * eager iteration (in iteration 2; the memory plan fixes every address)
 * and replays it from then on: one
 * launch instead of one per kernel, the same results bit for bit. Inputs
 * and labels are loaded into feed buffers before each launch (the data
 * source runs on the host as before). Anything the recording did not make
 * (another size, a slot it did not record) makes the executor leave for
 * good and run as usual (gpp_exec_graphs_off says why); docs/gpu.md "CUDA
 * graphs". Figures: recordings and replays so far; the reason graphs are
 * off, NULL when on. */
void gpp_exec_graph_stats(const gpp_exec_t *self, int64_t *captures, int64_t *replays);
const char *gpp_exec_graphs_off(const gpp_exec_t *self);
/* bf16 tensors: the stage's activations (op outputs it makes) into *all
 * and, into *bf16, those kept in bf16 with their gradients: the ones whose
 * producer and every reader, in any stage, take bf16 on the backend
 * (gpp_backend_op_out_dtype; at precision bf16 on CUDA). Received and sent
 * ones travel in the same type. */
void gpp_exec_act_dtypes(const gpp_exec_t *self, int *bf16, int *all);
/* Optimizer step on every parameter, then zeroes the gradients. -1 when a
 * micro-batch is still in flight (its W pending included). */
int gpp_exec_step(gpp_exec_t *self, gpp_err_t *err);
/* Optimizer steps taken (restored by the checkpoint). */
int64_t gpp_exec_step_count(const gpp_exec_t *self);
void gpp_exec_set_step_count(gpp_exec_t *self, int64_t steps);
const gpp_optim_hp_t *gpp_exec_optim(const gpp_exec_t *self);

/* ---- the stage's state, as a checkpoint saves and restores it ---- */

/* A parameter's value and at most 2 optimizer state buffers (AdamW). */
#define GPP_EXEC_MAX_BUFS 3

/* One parameter of the stage. */
typedef struct {
    const char *name; /* "<op name>.<param>" (weight, bias, gain, w_qkv, b_qkv,
                         w_o, b_o, table) */
    int op, slot;     /* the op's id and the parameter's slot: torch's name and
                         shape are gpp_op_param_torch's */
    int64_t rows, cols;
    int n_bufs; /* 1 + optimizer state buffers (SGD 1, AdamW 2) */
    /* device memory, rows x cols floats each: buf[0] the value, buf[1 + k]
     * optimizer state buffer k (gpp_optim.h) */
    float *buf[GPP_EXEC_MAX_BUFS];
} gpp_exec_param_t;

typedef int (*gpp_exec_param_fn)(void *arg, const gpp_exec_param_t *p, gpp_err_t *err);

/* Calls fn(arg, p, err) for every parameter of the stage in parameter order
 * (p lives for the call); stops at the first fn that returns -1 and returns
 * -1. The buffers may be read or written (through gpp_exec_stream) between
 * iterations only. */
int gpp_exec_params_foreach(gpp_exec_t *self, gpp_exec_param_fn fn, void *arg, gpp_err_t *err);

/* ---- parameters (broadcast, tests) ---- */
int gpp_exec_n_params(const gpp_exec_t *self);
/* Name "<op name>.<param>" (weight, bias, gain, w_qkv, b_qkv, w_o, b_o,
 * table). */
const char *gpp_exec_param_name(const gpp_exec_t *self, int i);
/* The parameter's device tensor. */
gpp_tensor_t *gpp_exec_param(gpp_exec_t *self, int i);
/* Dense gradient of the parameter (a view into gpp_exec_grads); NULL for an
 * embedding table (its gradient is sparse). */
gpp_tensor_t *gpp_exec_param_grad(gpp_exec_t *self, int i);

/* ---- measurement ---- */
/* Bytes of micro-batch state held now and at most since creation
 * (activations kept for backward, op stashes, activation gradients). */
int64_t gpp_exec_stash_bytes(const gpp_exec_t *self);
int64_t gpp_exec_peak_stash_bytes(const gpp_exec_t *self);
/* Bytes micro-batch mb holds for the backward of `op` (in the stage) between
 * its forward and backward, as allocated: its output when a consumer's
 * backward reads it, its kernel stash and, for a loss, its input's gradient.
 * The op table's formula (gpp_op_stash_bytes) times the micro-batch size. */
int64_t gpp_exec_op_stash_bytes(const gpp_exec_t *self, int mb, int op);
/* Bytes per sample op's forward kernel keeps for its backward on this
 * executor's backend (the op table's figure, or less: CUDA's fused
 * attention), or -1 when op is not in the stage. The profiler
 * (gpp_profile_measure) records it ("kernel_stash") for the planner. */
int64_t gpp_exec_kernel_stash_bytes(const gpp_exec_t *self, int op);
/* The stream workspace op's kernels ask on this executor's backend
 * (gpp_backend_op_workspace), {-1, -1} when op is not in the stage. The
 * profiler (gpp_profile_measure) records it ("workspace") for the planner. */
gpp_work_t gpp_exec_op_workspace(const gpp_exec_t *self, int op);
/* The stage's memory plan the executor allocated (model/gpp_memplan.h):
 * with the backend's allocations all the executor's, the backend's peak
 * (gpp_backend_mem, less own_bytes) is gpp_memplan_total. */
const gpp_memplan_t *gpp_exec_plan(const gpp_exec_t *self);
/* Micro-batch slots the executor has opened (each holds its loss values). */
int gpp_exec_mb_slots(const gpp_exec_t *self);
/* Per-op timing hook: when on, timed events (gpp_event_new_timed) are
 * recorded on the stream before the first op and after every op, and each
 * op's device time (from the end of the op before it to its own end, so
 * the ops' times sum to the pass) is added to its forward or backward
 * total when the pass ends (one wait for the stream per pass; for
 * profiling). */
void gpp_exec_set_timing(gpp_exec_t *self, int on);
/* Totals since the last reset for op (must be in the stage). */
void gpp_exec_op_time(const gpp_exec_t *self, int op, double *fwd_ms, double *bwd_ms,
                      int64_t *calls);
void gpp_exec_reset_times(gpp_exec_t *self);

#endif
