/* gpp_exec_impl: the executor's private state, shared by its files (not
 * for callers: gpp_exec.h is the contract). Each file calls only the ones
 * below it:
 *   gpp_exec.c        construction, entry points, parameters, measurement
 *   gpp_exec_graph.c  CUDA graphs of the passes
 *   gpp_exec_pass.c   a forward or backward run eagerly
 *   gpp_exec_load.c   data and labels, the load-ahead
 *   gpp_exec_pool.c   the memory pool */
#ifndef GPP_EXEC_IMPL_H
#define GPP_EXEC_IMPL_H

#include "agent/data/gpp_data.h"
#include "agent/data/gpp_data_pool.h"
#include "agent/exec/gpp_exec.h"

enum { MB_FREE = 0, MB_OPEN, MB_FORWARD, MB_BACKWARD };

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
    int64_t sample_lo, n;
    gpp_tensor_t *act;  /* [n_slots] */
    gpp_tensor_t *grad; /* [n_slots] */
    int64_t *filled;    /* [n_slots]: samples set by the caller (boundary inputs) */
    int *got_grad;      /* [n_slots]: boundary output gradient received */
    void **stash;       /* [n_local] */
    size_t *stash_bytes;
    float *loss_dev;  /* [n_loss] device */
    float *loss_host; /* [n_loss] host, valid after a stream sync */
    int loss_pending; /* loss_host holds values not yet folded into loss_acc */
} exec_mb_t;

typedef struct {
    void *p;
    size_t bytes;
} exec_block_t;

/* CUDA graphs of a stage's passes (gpp_exec_forward / backward, as the
 * pipeline and gpp_exec_run drive them; gpp_exec_graph.c, docs/gpu.md "CUDA
 * graphs"): the state of the executor. */
typedef enum {
    PG_IDLE = 0, /* allowed; nothing run yet (the first begin starts) */
    PG_OFF,      /* not allowed, or left (graphs_off says why) */
    PG_WARM,     /* iterations run eagerly while the pool only grows */
    PG_CAPTURE,  /* this iteration records each pass (and launches the recording) */
    PG_REPLAY    /* each pass launches its recording; no allocation, no pool */
} exec_pg_t;

/* One micro-batch slot's passes as the capture iteration recorded them. */
typedef struct {
    int64_t n;                      /* samples; -1: the slot was not begun in that iteration */
    int has_fwd, has_bwd;           /* recorded (a pass of n 0 runs nothing: no graph) */
    gpp_replay_t *fwd, *bwd;        /* the recordings, NULL where nothing runs */
    void **in_blk;                  /* [n_slots] the block begin gave each boundary input */
    void **dy_blk;                  /* [n_slots] the block add_output_grad gave each boundary
                                       output's gradient */
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
 * Two device buffers, outside the pool, used in turn. */
typedef struct {
    int op;
    void *buf[2];
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
    /* memory */
    int n_free, cap_free;
    exec_block_t *free_blocks;
    int64_t live_bytes, peak_bytes;
    gpp_data_buf_t host; /* staging to the device, page-locked where the backend can */
    int timing;
    gpp_event_t **tev; /* [n_local + 1] timed events of the timing hook, made on first use */
    /* CUDA graphs of the passes (gpp_exec_graph.c) */
    const char *graphs_off; /* why passes are not recorded, or NULL */
    char graphs_why[GPP_ERR_LEN];
    int capture_on; /* inside a capture: nothing may allocate or synchronise */
    /* the pool only grows (s_alloc gives no cached block back) while passes
       are warmed for, recorded or replayed: it then holds, of every size, as
       many blocks as the iteration has live at once, which a capture (no
       allocation allowed) takes */
    int pool_grow;
    int64_t captures, replays;
    exec_pg_t pg;
    int pg_used;    /* passes were warmed for or recorded: the pool grew that way */
    int warm_iters; /* iterations run in PG_WARM */
    int64_t grown;  /* blocks the pool took from the backend this iteration */
    int n_pass;
    exec_pass_t *pass; /* [n_pass] by micro-batch slot */
    exec_block_t *reg; /* every block of the pool while passes are recorded or
                          replayed (it then only grows): free or held */
    int n_reg, cap_reg;
    void **feed; /* [g->n_ops] the passes' feed buffers, by op id: a recorded load
                    copies from there */
    size_t *feed_bytes;
    void *pg_ws; /* the stream workspace the passes were recorded with */
    /* load-ahead */
    gpp_stream_t *cs; /* the copy stream; NULL: load-ahead off */
    int n_ahead;
    exec_ahead_t *ahead; /* [n_local]: at most one per op */
    gpp_data_track_t tr; /* the loads' ranges: where the next one starts */
    int64_t ahead_hits, ahead_misses;
};

/* ---- gpp_exec_pool.c ---- */
/* A block of the pool (bytes 0: 4), NULL + message; never allocates inside
 * a capture or while recordings replay. While the pool only grows
 * (pool_grow) every new block is registered. */
void *gpp_exec_alloc(gpp_exec_t *self, size_t bytes, gpp_err_t *err);
void gpp_exec_pool_put(gpp_exec_t *self, void *p, size_t bytes);
/* Gives *p_p (bytes) back to the pool (not while replaying: the block stays
 * where the recording put it) and NULLs it. */
void gpp_exec_pool_release(gpp_exec_t *self, void **p_p, size_t bytes);
/* A tensor of slot sl for n samples from the pool, and its release. */
int gpp_exec_tensor_new(gpp_exec_t *self, const exec_slot_t *sl, int64_t n, gpp_tensor_t *t,
                        gpp_err_t *err);
void gpp_exec_tensor_release(gpp_exec_t *self, gpp_tensor_t *t);
/* The host staging buffer of data going to the device (>= bytes). */
void *gpp_exec_host(gpp_exec_t *self, size_t bytes);
/* Adds a block to the registry (every block of a pool that only grows). */
void gpp_exec_pool_register(gpp_exec_t *self, void *p, size_t bytes);
/* An ordinary pool again: the registered blocks no slot holds become free
 * blocks, the others live bytes; the registry is dropped. */
void gpp_exec_pool_thaw(gpp_exec_t *self);
/* Frees the free blocks, the registry and the host buffer (destroy). */
void gpp_exec_pool_free(gpp_exec_t *self);

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
/* Slot k's gradient, zeroed, made on first use (in block blk when given:
 * a replayed pass's); NULL + message. */
gpp_tensor_t *gpp_exec_grad_in(gpp_exec_t *self, exec_mb_t *mb, int k, void *blk, gpp_err_t *err);
/* The bodies of gpp_exec_forward / backward once their checks passed: -1
 * leaves the slot as it stands (the callers release or undo it). */
int gpp_exec_forward_run(gpp_exec_t *self, int m, gpp_err_t *err);
int gpp_exec_backward_run(gpp_exec_t *self, int m, gpp_err_t *err);

/* ---- gpp_exec_graph.c ---- */
/* Frees the passes' recordings and feeds (destroy). */
void gpp_exec_graphs_free(gpp_exec_t *self);
/* Per-pass graphs, called by gpp_exec.c at each entry point (a no-op unless
 * the executor records or replays passes). begin: before the slot is begun
 * (1: replayed, the slot's inputs hold their recorded blocks; 0: begin as
 * usual); begun: after an ordinary begin (records its blocks). */
int gpp_exec_pg_begin(gpp_exec_t *self, int m, int64_t n);
void gpp_exec_pg_begun(gpp_exec_t *self, int m);
/* The block a boundary output's gradient takes in add_output_grad: the
 * recorded one while replaying (else NULL: allocate), noted while recording. */
void *gpp_exec_pg_dy_block(gpp_exec_t *self, int m, int k);
void gpp_exec_pg_dy_noted(gpp_exec_t *self, int m, int k, void *p);
/* Runs the pass (forward fwd 1, backward 0) of a begun slot whose checks
 * passed, when the executor records or replays passes: 1 done (recorded and
 * launched, or replayed), 0 not handled (run it eagerly), -1 error. */
int gpp_exec_pg_pass(gpp_exec_t *self, int m, int fwd, gpp_err_t *err);
/* The end of an iteration (gpp_exec_step): warm -> capture -> replay. */
void gpp_exec_pg_step(gpp_exec_t *self);
/* Leaves per-pass graphs for good: the pool becomes an ordinary one again
 * (free: every block no slot holds). why NULL: quietly (destroy). */
void gpp_exec_pg_leave(gpp_exec_t *self, const char *why);

#endif
