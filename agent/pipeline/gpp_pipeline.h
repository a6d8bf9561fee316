/* gpp_pipeline: the schedule interpreter. One stage replica runs its
 * lowered action list (planner/gpp_plan.h) with the executor and the
 * communicator (docs/executor.md "The schedule interpreter").
 *
 * gpp_pipeline_run blocks: it builds the model, the backend, the data
 * source and the stage's executor (loading the checkpoint set of
 * start_iteration when resuming), joins the communicator and the
 * data-parallel group, calls on_ready and barrier(0), then runs each
 * iteration: passes in the list's order (a zero-bubble list's B and W
 * passes too: gradients sent after B, the micro-batch released after W;
 * refused at setup on a backend without the split backward), transfers
 * and the all-reduce in the transfers' order (cfg.comm_order; a RECV is
 * waited just before the pass that needs it; received pieces land at
 * their sample offsets, so degrees may differ across an edge), every send
 * complete by the end.
 * After each iteration: on_metrics; at checkpoint_interval and at the end
 * replica 0 saves its stage file into the set (ckpt/gpp_ckpt_set.h) before
 * reporting. The communicator stays up until gpp_pipeline_destroy.
 *
 * Message tags: (lo * (n_ops + 1) + tensor) * 2 + (0 activation | 1
 * gradient): unique per transfer between two ranks within an iteration.
 *
 * Threads: run on one thread; only gpp_pipeline_abort from another, at any
 * time (a blocked receive, rendezvous or barrier returns; run fails with
 * "aborted").
 *
 * Ownership: the caller owns the pipeline; it borrows cfg and everything
 * cfg points to. */
#ifndef GPP_PIPELINE_H
#define GPP_PIPELINE_H

#include <stdint.h>

#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_optim.h"
#include "planner/gpp_plan.h"

typedef struct gpp_pipeline_s gpp_pipeline_t;

typedef struct {
    const char *model; /* zoo spec or graph file, as the planner read it */
    int stage;         /* stage id (checkpoint file name, messages) */
    int replica;       /* 0 <= replica < replicas; replica 0 saves checkpoints */
    int replicas;      /* data-parallel degree of the stage, > 0 */
    int n_ops;
    const int *ops;  /* [n_ops] op ids of the stage */
    int micro_batch; /* samples per micro-batch over all replicas, > 0 */
    int batch;       /* mini-batch samples, a multiple of micro_batch */
    int n_actions;
    const gpp_action_t *actions; /* [n_actions] this replica's lowered list */
    const int *peer_ranks;       /* [n_actions]: SEND/RECV peer's comm rank, else ignored */
    const int *dp_ranks;         /* [replicas] comm ranks of the stage's replicas, ascending */
    /* Every SEND, RECV and ALLREDUCE of actions once: the order blocking
     * communication streams run them in (Assignment.comm_order,
     * gpp_sched_order_new). NULL / 0: the list's order (refused with a
     * device comm, which needs the global one). */
    const int *comm_order;
    int n_comm_order;
    /* the data plane: "gloo" (NULL or ""), or "nccl" (CUDA backend, one GPU
     * per rank: transfers from and into device memory, in comm_order) */
    const char *comm_backend;
    gpp_optim_hp_t optim;
    uint64_t seed;
    int iterations;             /* run iterations [start_iteration, iterations) */
    int start_iteration;        /* > 0: resume from the stage's checkpoint */
    const char *checkpoint_dir; /* NULL or "": no checkpoints */
    const char *data;           /* NULL or "": synthetic; else gpp_data_open's path, shuffled
                                   from seed (every replica draws the same order) */
    int checkpoint_interval;    /* iterations between checkpoints, 0: only the last */
    int threads;                /* CPU backend threads, >= 1 */
    /* the backend: CPU, or CUDA on GPU `device` (the process's CUDA index)
     * with matrix products in `precision`. With a CUDA backend and a host
     * comm (gloo) every tensor crosses host memory (see gpp_pipeline.c). */
    gpp_device_kind_t device_kind;
    int device;
    gpp_precision_t precision;
    /* CUDA: record each pass as a CUDA graph after one eager iteration
     * and replay it (gpp_exec_cfg_t.graphs, docs/gpu.md "CUDA graphs");
     * ignored on the CPU backend */
    int graphs;
    /* CUDA at precision bf16: activations kept and sent in bf16
     * (gpp_backend_cfg_t.bf16_tensors); 0 fp32 */
    int bf16_tensors;
    /* the communicator; a world of one rank has none */
    const char *rdv_endpoint; /* the coordinator's rendezvous endpoint (gpp_rdv_client) */
    const char *rdv_token;    /* the job's rendezvous token */
    const char *prefix;       /* rendezvous key prefix of this job attempt */
    int world_size;           /* > 0 */
    int rank;                 /* this replica's comm rank */
    const char *host;         /* data-plane address to bind, e.g. "127.0.0.1" */
    int comm_timeout_ms;      /* rendezvous and per-wait limit; 0: the comm's default */
} gpp_pipeline_cfg_t;

/* What one iteration measured; valid during the on_metrics call only. */
typedef struct {
    int iteration; /* absolute iteration index */
    int n_actions;
    const double *action_ms; /* [n_actions] wall time of each action */
    /* [n_actions] each action's start and end on CLOCK_MONOTONIC
     * (gpp_now_us), microseconds (gpp-coordinator --trace) */
    const int64_t *action_start_us, *action_end_us;
    double iteration_ms;
    double bubble_ms;                 /* waiting for receives and the last sends */
    int64_t mem_high_water_bytes;     /* peak RSS of the process */
    int64_t device_mem_peak_bytes;    /* the backend's high-water mark since the stage was
                                         built (gpp_backend_mem) */
    int64_t device_mem_backend_bytes; /* of it, the backend's own buffers (own_bytes) */
    int has_loss;                     /* the stage holds a loss op */
    double loss;                      /* this replica's share of the mini-batch loss */
    int64_t samples;                  /* samples this replica processed */
    /* the last iteration on replica 0: the weight digests of the stage's
     * ops with parameters (gpp_exec_ckpt_op_digests); else n_digests = 0 */
    int n_digests;
    const int *digest_ops;              /* [n_digests] */
    const unsigned char (*digests)[32]; /* [n_digests] */
} gpp_pipeline_metrics_t;

/* How the pipeline reports; called on the thread running gpp_pipeline_run.
 * Any may be NULL. */
typedef struct {
    /* The stage is built and the communicator joined. */
    void (*on_ready)(void *arg);
    /* Blocks until every replica of the job entered barrier_id: 0 when it
     * was released, -1 when the job is stopping. NULL: no barrier. */
    int (*barrier)(void *arg, int barrier_id);
    void (*on_metrics)(void *arg, const gpp_pipeline_metrics_t *m);
    void *arg;
} gpp_pipeline_callbacks_t;

/* Checks the configuration (no blocking work). NULL with a message naming
 * the action or field at fault. */
gpp_pipeline_t *gpp_pipeline_new(const gpp_pipeline_cfg_t *cfg, const gpp_pipeline_callbacks_t *cb,
                                 gpp_err_t *err);
/* Builds the stage, joins the communicator, waits for barrier 0 and trains.
 * 0 when every iteration ran; -1 with a message saying what it was doing
 * (building, joining, iteration i) on failure or abort. Call once. */
int gpp_pipeline_run(gpp_pipeline_t *self, gpp_err_t *err);
/* 1 when the last gpp_pipeline_run failed on the input the job names (the
 * model cannot be loaded, the dataset cannot be opened or does not fit the
 * model): the user's to fix, not a fault of this agent. */
int gpp_pipeline_bad_input(const gpp_pipeline_t *self);
/* The comm rank of the peer whose send or receive failed first in the last
 * gpp_pipeline_run (its connection broke: that agent died or hung up), -1
 * when no point-to-point operation failed (a collective, or another
 * failure). The coordinator blames that rank when it saw no agent die. */
int gpp_pipeline_failed_peer(const gpp_pipeline_t *self);
/* Makes a running or later gpp_pipeline_run fail with "aborted": aborts the
 * communicator so that blocked waits return. Any thread; idempotent. */
void gpp_pipeline_abort(gpp_pipeline_t *self, const char *reason);
/* Closes the communicator, frees everything. Not concurrently with run.
 * Accepts NULL. */
void gpp_pipeline_destroy(gpp_pipeline_t **self_p);

#endif
