/* gpp_plan: a pipeline plan, the planner's output and the coordinator's input.
 *
 * A plan is a DAG of stages. Stage s holds a convex set of ops, runs on
 * `devices` data-parallel replicas (global device ids first_device ..
 * first_device+devices-1), processes micro-batches of `micro_batch` samples
 * (each replica r takes samples [floor(r*b/d), floor((r+1)*b/d)) of every
 * micro-batch), and follows a kFkB schedule with `inflight` samples in flight
 * at most.
 *
 * Micro-batch j of stage s covers the iteration's samples [j*b, (j+1)*b);
 * the iteration has batch/b micro-batches (b divides batch).
 *
 * Producers: the partitioner (gpp_part) fills stages (ops, devices,
 * micro_batch, k, inflight, tps, memory, succ/pred); the scheduler
 * (gpp_sched) fills the per-stage compute order and the lowered per-replica
 * action lists; the simulator (gpp_sim) fills iteration time and throughput.
 *
 * Ownership: gpp_plan_new returns a plan the caller owns; gpp_plan_destroy
 * frees stages, arrays and action lists. */
#ifndef GPP_PLAN_H
#define GPP_PLAN_H

#include <stdint.h>

#include "common/gpp_err.h"
#include "model/gpp_graph.h"

typedef enum {
    GPP_ACT_FWD = 0,   /* forward of micro-batch mb */
    GPP_ACT_BWD,       /* backward of micro-batch mb */
    GPP_ACT_SEND_ACT,  /* activations of `tensor` for samples [lo,hi) to peer */
    GPP_ACT_RECV_ACT,  /* activations of `tensor` for samples [lo,hi) from peer */
    GPP_ACT_SEND_GRAD, /* gradient of `tensor` for samples [lo,hi) to peer */
    GPP_ACT_RECV_GRAD, /* gradient of `tensor` for samples [lo,hi) from peer */
    GPP_ACT_ALLREDUCE, /* gradient all-reduce across the stage's replicas */
    GPP_ACT_STEP,      /* optimizer step */
    GPP_ACT_BWD_IN,    /* zero-bubble B: input gradients of micro-batch mb */
    GPP_ACT_BWD_W,     /* zero-bubble W: parameter gradients of micro-batch mb */
    GPP_ACT__COUNT
} gpp_act_type_t;

/* A compute pass of one micro-batch (FWD, BWD, BWD_IN, BWD_W). */
static inline int gpp_act_is_pass(gpp_act_type_t t)
{
    return t == GPP_ACT_FWD || t == GPP_ACT_BWD || t == GPP_ACT_BWD_IN || t == GPP_ACT_BWD_W;
}
/* A backward that receives and sends gradients (BWD, or a zero-bubble B). */
static inline int gpp_act_is_bwd(gpp_act_type_t t)
{
    return t == GPP_ACT_BWD || t == GPP_ACT_BWD_IN;
}

/* The schedule of a plan (docs/planner.md "Zero-bubble schedules"): 1F1B
 * (kFkB) with whole backwards, or a zero-bubble shape whose backwards are
 * split into B (BWD_IN) and W (BWD_W) passes. */
typedef enum {
    GPP_SCHED_1F1B = 0,
    GPP_SCHED_ZB_H1, /* 1F1B's in-flight, W delayed by the upstream depth */
    GPP_SCHED_ZB_H2, /* in-flight with every hop counted twice, W delayed as zb-h1 */
    GPP_SCHED__COUNT
} gpp_sched_kind_t;

/* "1f1b", "zb-h1", "zb-h2" ("?" out of range). */
const char *gpp_sched_kind_name(gpp_sched_kind_t k);
/* A schedule word: one kind's name, or "auto" for all of them, as a mask
 * of (1 << kind). 0, or -1 with a message naming `what` (the flag or key)
 * and the words. */
int gpp_sched_kind_parse(const char *word, const char *what, unsigned *mask, gpp_err_t *err);
#define GPP_SCHED_AUTO ((1u << GPP_SCHED__COUNT) - 1)
typedef struct {
    gpp_act_type_t type;
    int mb;            /* this stage's micro-batch index (FWD/BWD, and the
                          micro-batch a SEND follows or a RECV precedes); -1 else */
    int peer_stage;    /* SEND/RECV: the other stage; -1 else */
    int peer_replica;  /* SEND/RECV: replica index within peer_stage */
    int tensor;        /* SEND/RECV: producer op id of the tensor */
    int64_t lo, hi;    /* SEND/RECV: sample range within the iteration */
} gpp_action_t;

/* The `tensor` of a SEND/RECV that carries no data: a dependency along a
 * chain edge (gpp_plan_t.chain) between stages no tensor flows between. The
 * message has zero bytes; the receiver only waits for it. */
#define GPP_DEP_TENSOR (-1)

typedef struct {
    int n;
    int cap;
    gpp_action_t *a;
} gpp_actions_t;

typedef struct {
    int id;
    int n_ops;
    int *ops;          /* ascending op ids */
    int devices;       /* data-parallel degree */
    int first_device;  /* global id of replica 0 */
    int micro_batch;   /* samples per micro-batch (split over replicas) */
    int k;             /* kFkB */
    int inflight;      /* samples in flight at most (warm-up forwards = ceil(inflight / micro_batch)) */
    int w_delay;       /* zero-bubble: W of micro-batch j runs right after B of j + w_delay */
    double tps_ms;     /* time per sample of this stage (compute + its share of comm) */
    double fwd_ms;     /* forward of one micro-batch on one replica */
    double bwd_ms;     /* backward of one micro-batch on one replica */
    double bwd_w_ms;   /* of bwd_ms, the parameter gradients' (a zero-bubble W pass) */
    double allreduce_ms; /* gradient sync per iteration (0 when devices == 1) */
    int64_t weight_bytes; /* weights + grads + optimizer state per device */
    int64_t act_bytes;    /* the rest of mem_bytes but reserved: micro-batches' tensors */
    int64_t mem_bytes;    /* peak per device as the executor allocates it
                             (gpp_cost_stage_mem, reserved included) */
    int n_succ, *succ;    /* successor stage ids, ascending */
    unsigned char *succ_dep; /* [n_succ]: 1 for a chain edge no tensor flows on */
    int n_pred, *pred;    /* predecessor stage ids, ascending */
    gpp_actions_t compute;   /* compute-only order: FWD/BWD */
    gpp_actions_t *replica;  /* [devices]: lowered action list per replica */
} gpp_stage_t;

typedef struct {
    char planner[8];      /* "gpp" | "spp" */
    char model[GPP_NAME_LEN];
    int model_ops;
    int n_devices;
    int batch;
    int micro_batch;      /* universal micro-batch, or 0 when per-stage */
    int chain;            /* 1: a sequential pipeline: stage s waits for stage s-1 (the
                             stage graph is the chain 0->1->..->n-1 plus the data edges;
                             an edge no tensor flows on is a dependency, succ_dep) */
    int depth;            /* stages on the longest path */
    gpp_sched_kind_t schedule; /* the stages' orders: 1F1B or zero-bubble */
    double bottleneck_tps_ms;
    double iteration_ms;  /* simulated */
    double throughput;    /* samples/s, simulated */
    double search_ms;
    int n_stages;
    gpp_stage_t *stages;
    int *stage_of_op;     /* [model_ops] */
} gpp_plan_t;

gpp_plan_t *gpp_plan_new(const char *planner, const gpp_graph_t *g, int n_devices, int batch);
void gpp_plan_destroy(gpp_plan_t **self_p);
/* Appends a stage with a copy of ops; returns it (owned by the plan). */
gpp_stage_t *gpp_plan_add_stage(gpp_plan_t *p, int n_ops, const int *ops);
/* Derives stage_of_op, succ/pred lists and depth from the graph; numbers
 * stages in a topological order and first_device consecutively. With
 * p->chain the stages are ordered by their smallest op id and each is
 * linked to the next (a dependency edge where no tensor flows); tensors
 * that skip stages go directly to their consumer, not relayed. */
int gpp_plan_link(gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err);

/* Topological order of S stages (Kahn, ready stages taken in ascending id)
 * from adj (S x S, row-major: adj[a*S + b] != 0 for an edge a -> b) into
 * order[S]. Returns how many stages it ordered: S when the stage graph is
 * acyclic; fewer when it has a cycle, and then order[n..S) lists the stages
 * left out (on a cycle or after one), ascending. */
int gpp_plan_topo_order(int S, const char *adj, int *order);

/* Re-places stages on devices so that every stage of d <= gpus_per_node
 * replicas lies inside one node and a larger one starts on a node boundary
 * (best fit, largest stages first) — the placement the cost model assumes
 * for data-parallel groups. When the devices cannot be packed that way the
 * consecutive placement of gpp_plan_link is kept. Returns 1 when
 * node-aligned, 0 when kept consecutive. */
int gpp_plan_place(gpp_plan_t *p, int gpus_per_node);

void gpp_actions_push(gpp_actions_t *l, gpp_action_t a);
void gpp_actions_clear(gpp_actions_t *l);
/* Most micro-batches a replica running actions a[0..n) holds at once: each
 * from its first RECV_ACT or FWD (the executor's begin) to its last
 * backward pass or gradient send (its release), in list order; >= 1. The
 * executor's memory plan has that many lanes (the agent's and the
 * coordinator's prediction count alike). */
int gpp_actions_inflight(const gpp_action_t *a, int n);
const char *gpp_act_type_name(gpp_act_type_t t);

#endif
