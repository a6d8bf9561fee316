/* gpp_exec_impl: the executor's private state, shared by its files (not
 * for callers: gpp_exec.h is the contract). Each file calls only the ones
 * below it:
 *   gpp_exec.c        construction, entry points, parameters, measurement
 *   gpp_exec_graph.c  CUDA graphs of the passes
 *   gpp_exec_pass.c   a forward or backward run eagerly
 *   gpp_exec_load.c   data and labels, the load-ahead
 *   gpp_exec_mem.c    the arena: the stage's memory plan, lanes */
#ifndef GPP_EXEC_IMPL_H
#define GPP_EXEC_IMPL_H

#include "agent/data/gpp_data.h"
#include "agent/data/gpp_data_pool.h"
#include "agent/exec/gpp_exec.h"
#include "model/gpp_memplan.h"

/* MB_BWD_IN: a split backward's B ran, its W is pending (gpp_exec_backward_part) */
enum { MB_FREE = 0, MB_OPEN, MB_FORWARD, MB_BWD_IN, MB_BACKWARD };

typedef struct {
    char name[GPP_NAME_LEN + 8];
    int op, slot;   /* the op's id and its parameter slot (gpp_op_params order) */
    int sparse;     /* index into the sparse arrays, or -1 */
    int64_t offset; /* dense: element offset into pflat / gflat */
    gpp_tensor_t value;
    gpp_tensor_t grad; /* dense: view into gflat; sparse: data NULL */
} exec_param_t;

typedef struct {
    int producer;     /* op id */
    int local;        /* produced inside the stage */
    int needs_grad;   /* gradient flows into it (producer is not an INPUT op) */
    int keep;         /* needed after the forward: a backward reads it or it is sent */
    int last_use;     /* index of the last local op whose forward reads it, or -1 */
    int boundary_out; /* local op consumed outside the stage */
    gpp_dtype_t dtype;
    int64_t rows, cols;
} exec_slot_t;

typedef struct {
    const gpp_op_t *op;
    int out;         /* slot of the output */
    int *in;         /* slots of the inputs */
    int first_param; /* index into params */
    int n_params;
    int loss;                   /* index into losses, or -1 */
    int64_t kernel_stash_bytes; /* per sample (the backend's: <= the op table's) */
    gpp_work_t work;            /* the stream workspace its kernels ask (the backend's) */
    int fuse_to;                /* a linear: index of the ReLU/GELU its call computes, or -1 */
    int fused;                  /* an activation computed by its linear's call */
    int bwd_reads_out;          /* a fused ReLU: its backward reads its output (its input,
                                   the linear's, is never materialised) */
    double fwd_ms, bwd_ms;
    int64_t calls;
} exec_op_t;

typedef struct {
    int state;
    int lane; /* the memory plan's lane it holds, -1 none */
    int64_t sample_lo, n;
    gpp_tensor_t *act;  /* [n_slots] */
    gpp_tensor_t *grad; /* [n_slots] */
    int64_t *filled;    /* [n_slots]: samples set by the caller (boundary inputs) */
    int *got_grad;      /* [n_slots]: boundary output gradient received */
    void **stash;       /* [n_local] */
    size_t *stash_bytes;
    /* the split backward: [n_local] ops whose W is pending after B, and the
       W stashes B wrote for them (gpp_op_wstash_bytes x n) */
    char *wpend;
    void **wstash;
    size_t *wstash_bytes;
    float *loss_dev;  /* [n_loss] device: the plan's loss values of the slot */
    float *loss_host; /* [n_loss] host, valid after a stream sync */
    int loss_pending; /* loss_host holds values not yet folded into loss_acc */
} exec_mb_t;

/* CUDA graphs of a stage's passes (gpp_exec_forward / backward, as the
 * pipeline and gpp_exec_run drive them; gpp_exec_graph.c, docs/gpu.md "CUDA
 * graphs"): the state of the executor. */
typedef enum {
    PG_IDLE = 0, /* allowed; nothing run yet (the first begin starts) */
    PG_OFF,      /* not allowed, or left (graphs_off says why) */
    PG_WARM,     /* one iteration runs eagerly (the kernels' first calls) */
    PG_CAPTURE,  /* this iteration records each pass (and launches the recording) */
    PG_REPLAY    /* each pass launches its recording */
} exec_pg_t;

/* One micro-batch slot's passes as the capture iteration recorded them. */
typedef struct {
    int64_t n;               /* samples; -1: the slot was not begun in that iteration */
    int lane;                /* the lane the slot held: its recorded addresses */
    int has_fwd, has_bwd;    /* recorded (a pass of n 0 runs nothing: no graph) */
    gpp_replay_t *fwd, *bwd; /* the recordings, NULL where nothing runs */
    char *regen;                    /* [n_slots] a boundary INPUT the forward loaded itself */
    exec_mb_t after_fwd, after_bwd; /* the slot's host state after each pass */
    int64_t live_fwd, live_bwd;     /* what each pass changed live_bytes by */
    int64_t *sbound;                /* [2 n_sparse] each sparse gradient's bound
                                       (gpp_sparse_grad_bound) before and after the backward */
    const void **sblk;              /* [2 n_sparse] its rows and values blocks, recorded */
} exec_pass_t;

/* Load-ahead (gpp_exec_cfg_t.load_ahead): the data of one op (an INPUT,
 * or a loss op's labels) for the micro-batch after the one just loaded,
 * copied to the device on the copy stream while the compute stream works.
 * Two device buffers of the memory plan, used in turn. */
typedef struct {
    int op;
    void *buf[2];           /* in the arena (NULL: the plan has none) */
    size_t cap[2], bytes[2];
    int64_t lo[2], n[2];    /* the samples a buffer holds; n < 0: none */
    gpp_event_t *copied[2]; /* copy stream: the buffer is filled */
    gpp_event_t *read[2];   /* compute stream: its last reader is done */
    int next;               /* the buffer the next fill uses */
    int pend;               /* a fill to start at the tracker's guess */
    size_t per;             /* bytes per sample */
} exec_ahead_t;

struct gpp_exec_s {
    const gpp_graph_t *g;
    gpp_backend_t *be;
    gpp_stream_t *s;
    gpp_data_t *data;
    gpp_exec_cfg_t cfg;
    int n_local;
    exec_op_t *ops; /* [n_local], ascending ids */
    int *slot_of;   /* [g->n_ops] -> slot or -1 */
    int n_slots;
    exec_slot_t *slots;
    int n_inputs, *inputs;   /* boundary input producers */
    int n_outputs, *outputs; /* boundary output ops */
    int n_loss;
    /* parameters */
    int n_params;
    exec_param_t *params;
    float *pflat, *gflat; /* dense values and gradients, device */
    int64_t dense_numel;
    gpp_optim_state_t *dense_state;
    int n_sparse;
    gpp_sparse_grad_t **sgrad;
    gpp_optim_state_t **sstate;
    int *sparse_param; /* [n_sparse] -> param index */
    int64_t steps;
    /* micro-batches */
    int n_mb;
    exec_mb_t *mb;
    double loss_acc;
    int eval; /* gpp_exec_evaluate running: kernels in evaluation mode, no graphs */
    /* memory: the stage's plan and its arena (gpp_exec_mem.c) */
    gpp_memplan_t *plan;
    int64_t plan_n; /* the plan's micro-batch samples: the most a slot may begin */
    void *arena;
    int *lane_of; /* [lanes] the slot holding each lane, -1 free */
    int64_t live_bytes, peak_bytes;
    gpp_data_buf_t host; /* staging to the device, page-locked where the backend can */
    int timing;
    gpp_event_t **tev; /* [n_local + 1] timed events of the timing hook, made on first use */
    /* CUDA graphs of the passes (gpp_exec_graph.c) */
    const char *graphs_off; /* why passes are not recorded, or NULL */
    char graphs_why[GPP_ERR_LEN];
    int capture_on; /* inside a capture: nothing may synchronise */
    int64_t captures, replays;
    exec_pg_t pg;
    int n_pass;
    exec_pass_t *pass; /* [n_pass] by micro-batch slot */
    /* load-ahead */
    gpp_stream_t *cs; /* the copy stream; NULL: load-ahead off */
    int n_ahead;
    exec_ahead_t *ahead; /* [n_local]: at most one per op */
    gpp_data_track_t tr; /* the loads' ranges: where the next one starts */
    int64_t ahead_hits, ahead_misses;
};

/* ---- gpp_exec_mem.c ---- */
/* Plans the stage (cfg) and allocates its arena; lends the stream its
 * workspace there. -1 + message. */
int gpp_exec_mem_new(gpp_exec_t *self, const gpp_memplan_cfg_t *cfg, gpp_err_t *err);
/* Frees the arena, the plan and the host buffer (destroy). */
void gpp_exec_mem_free(gpp_exec_t *self);
/* A free lane for slot m into mb->lane, or -1 + message; and its return. */
int gpp_exec_lane_take(gpp_exec_t *self, exec_mb_t *mb, int m, gpp_err_t *err);
void gpp_exec_lane_give(gpp_exec_t *self, exec_mb_t *mb);
/* The plan's buffer (kind, op) of mb's lane for `bytes` (at most the
 * plan's), NULL + message; its release (NULLs *p_p). */
void *gpp_exec_block_take(gpp_exec_t *self, const exec_mb_t *mb, gpp_buf_kind_t kind, int op,
                          size_t bytes, gpp_err_t *err);
void gpp_exec_block_release(gpp_exec_t *self, void **p_p, size_t bytes);
/* The tensor of slot sl (its output or, kind GRAD, gradient) for mb's
 * samples, in the plan's buffer; its release. */
int gpp_exec_tensor_take(gpp_exec_t *self, const exec_mb_t *mb, gpp_buf_kind_t kind,
                         const exec_slot_t *sl, gpp_tensor_t *t, gpp_err_t *err);
void gpp_exec_tensor_release(gpp_exec_t *self, gpp_tensor_t *t);
/* The host staging buffer of data going to the device (>= bytes). */
void *gpp_exec_host(gpp_exec_t *self, size_t bytes);

/* ---- gpp_exec_load.c ---- */
/* Loads op's data (INPUT) or labels (loss) for mb's samples into dst. */
int gpp_exec_load(gpp_exec_t *self, exec_mb_t *mb, int op, gpp_tensor_t *dst, gpp_err_t *err);
/* Starts the load-ahead fills the loads asked for (not inside a capture). */
void gpp_exec_ahead_flush(gpp_exec_t *self);
/* Frees the load-ahead's buffers, events and copy stream (destroy). */
void gpp_exec_load_free(gpp_exec_t *self);

/* ---- gpp_exec_pass.c ---- */
/* A micro-batch slot's host arrays (n_slots / n_local long), made or freed;
 * copy: the host state a pass changes (state, tensors, stashes, fills,
 * loss_pending), not its samples or loss buffers. */
void gpp_exec_mb_arrays(const gpp_exec_t *self, exec_mb_t *x);
void gpp_exec_mb_arrays_free(exec_mb_t *x);
void gpp_exec_mb_copy(const gpp_exec_t *self, exec_mb_t *dst, const exec_mb_t *src);
/* Slot k's gradient, zeroed, made on first use; NULL + message. */
gpp_tensor_t *gpp_exec_grad_in(gpp_exec_t *self, exec_mb_t *mb, int k, gpp_err_t *err);
/* The bodies of gpp_exec_forward / backward once their checks passed: -1
 * leaves the slot as it stands (the callers release or undo it). part:
 * the whole backward, or B then W of gpp_exec_backward_part (B keeps what
 * W reads; W frees what the whole backward would). */
int gpp_exec_forward_run(gpp_exec_t *self, int m, gpp_err_t *err);
int gpp_exec_backward_run(gpp_exec_t *self, int m, gpp_err_t *err);
int gpp_exec_backward_part_run(gpp_exec_t *self, int m, gpp_bwd_part_t part, gpp_err_t *err);
/* Frees the W stashes a slot holds (release). */
void gpp_exec_wstash_release(gpp_exec_t *self, exec_mb_t *mb);

/* ---- gpp_exec_graph.c ---- */
/* Frees the passes' recordings and feeds (destroy). */
void gpp_exec_graphs_free(gpp_exec_t *self);
/* Per-pass graphs, called by gpp_exec.c at each entry point (a no-op unless
 * the executor records or replays passes). begin: once slot m took its lane
 * for n samples (recording: notes them; replaying: leaves unless the slot
 * was recorded with them). */
void gpp_exec_pg_begin(gpp_exec_t *self, int m, int64_t n);
/* Runs the pass (forward fwd 1, backward 0) of a begun slot whose checks
 * passed, when the executor records or replays passes: 1 done (recorded and
 * launched, or replayed), 0 not handled (run it eagerly), -1 error. */
int gpp_exec_pg_pass(gpp_exec_t *self, int m, int fwd, gpp_err_t *err);
/* The end of an iteration (gpp_exec_step): warm -> capture -> replay. */
void gpp_exec_pg_step(gpp_exec_t *self);
/* Leaves per-pass graphs for good (why NULL: quietly, destroy). */
void gpp_exec_pg_leave(gpp_exec_t *self, const char *why);

#endif
