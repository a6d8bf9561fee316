/* gpp_cost: the planner's cost model — devices, links, per-op time, stage
 * time and memory (the paper's TPS and DeviceMemoryUsage).
 *
 * Units are in the names (_ms, _bytes, _flops = FLOP/s). A micro-batch of b
 * samples on a stage of d replicas gives each replica ceil(b/d) samples.
 * Per-op time is a measured profile's (gpp_cost_attach_profile) or the
 * device's roofline (gpp_roofline_ms); stage memory is the total of the
 * stage's memory plan (model/gpp_memplan.h, docs/executor.md "Memory") plus
 * a profile's reserved bytes. docs/planner.md has the formulas and where
 * each constant comes from.
 *
 * Ownership: gpp_cost_new and gpp_cost_clone return a model the caller owns
 * (gpp_cost_destroy); it borrows the graph, which must outlive it, and
 * copies the cluster and any attached profile. */
#ifndef GPP_COST_H
#define GPP_COST_H

#include <stdint.h>
#include <stdio.h>

#include "common/gpp_alloc_rule.h"
#include "common/gpp_err.h"
#include "common/gpp_precision.h"
#include "model/gpp_graph.h"
#include "model/gpp_memplan.h"
#include "model/gpp_optable.h" /* gpp_work_t */
#include "model/gpp_profile.h"

typedef struct {
    char name[32];
    double peak_flops;         /* FLOP/s the roofline uses (fp32 or tensor, see preset) */
    double mem_bw_bytes_per_s; /* HBM bandwidth */
    int64_t mem_bytes;         /* device memory */
    double eff_max;            /* best fraction of peak a large kernel reaches */
    double fill_ms;            /* fill/tail time per GEMM kernel; sets w_half */
    double launch_ms;          /* per-kernel launch overhead */
} gpp_device_t;

typedef struct {
    double alpha_ms;       /* latency per message */
    double bw_bytes_per_s; /* bandwidth per direction */
} gpp_link_t;

/* One homogeneous cluster: device ids 0..n_devices-1, node = id / gpus_per_node.
 * Filled by gpp-plan and by gpp_cluster_from_config. */
typedef struct {
    int n_devices;
    int gpus_per_node;
    gpp_device_t device;
    int64_t mem_bound_bytes;     /* per-device bound; 0 = device.mem_bytes - GPP_CONTEXT_BYTES */
    gpp_link_t intra;            /* between devices of one node */
    gpp_link_t inter;            /* between nodes */
    double compute_share;        /* share of its device's compute each agent gets (CPU agents
                                    on fewer cores than agents x threads); 0 = 1 */
    int optim_bufs;              /* optimizer state floats per parameter: GPP_OPTIM_BUFS_SGD (1)
                                    or _ADAMW (2); 0 = AdamW */
    int load_ahead;              /* 1: the executors load the next micro-batch's inputs and
                                    labels ahead into device buffers (GPU agents) */
    int graphs;                  /* 1: the executors replay their passes as CUDA graphs */
    gpp_alloc_rule_t alloc_rule; /* how the agents' allocator rounds a block */
    int bf16_tensors;            /* 1: the agents keep bf16 activations (a bf16 cuda job with
                                    bf16_tensors): halves the roofline's activation bytes and each
                                    op's output but data's, and counts the bf16 weight copies */
} gpp_cluster_t;

#define GPP_CONTEXT_BYTES ((int64_t)512 << 20) /* CUDA context and libraries' workspaces */
#define GPP_BYTES_PER_PARAM 16                 /* fp32 AdamW: weight 4 + grad 4 + m 4 + v 4 */
/* Optimizer state floats per parameter the cluster's run uses (AdamW when unset). */
int gpp_cluster_optim_bufs(const gpp_cluster_t *c);

/* Presets: "v100-16g", "v100-32g", "a100-80g", "h100-80g", "h200-141g", "cpu"
 * (one core). mixed_precision 0: the fp32 (non-tensor) peak; 1: the dense
 * fp16/bf16 tensor-core peak. 0, or -1 listing the presets. */
int gpp_device_preset(const char *name, int mixed_precision, gpp_device_t *out, gpp_err_t *err);
void gpp_device_list(FILE *out);

/* The products' precision of a cluster made by gpp_cluster_init with the
 * same preset (a cuda job's [job] precision, gpp-plan --precision): tf32
 * takes the dense TF32 peak (none on V100: fp32 stays), bf16 the dense
 * bf16 peak at eff_max 0.8; bf16 with bf16_tensors sets c->bf16_tensors;
 * fp32 and the cpu preset change nothing. -1 for an unknown preset. */
int gpp_cluster_set_precision(gpp_cluster_t *c, const char *preset, gpp_precision_t precision,
                              int bf16_tensors, gpp_err_t *err);
/* Fills c with a preset device and its default links (its NVLink inside a
 * node, its InfiniBand between nodes; loopback for "cpu"). 0 or -1. */
int gpp_cluster_init(gpp_cluster_t *c, const char *preset, int n_devices, int gpus_per_node,
                     gpp_err_t *err);
/* The per-device memory bound the planner enforces. */
int64_t gpp_cluster_mem_bound(const gpp_cluster_t *c);
int gpp_cluster_node(const gpp_cluster_t *c, int device);
/* Link between two devices (intra when on one node). */
const gpp_link_t *gpp_cluster_link(const gpp_cluster_t *c, int dev_a, int dev_b);
/* Link of a collective over `devices` consecutive devices from first_device. */
const gpp_link_t *gpp_cluster_group_link(const gpp_cluster_t *c, int first_device, int devices);

/* Point-to-point message: alpha + bytes / bw. */
double gpp_link_ms(const gpp_link_t *l, double bytes);
/* Ring all-reduce over d ranks: 2(d-1)/d * bytes/bw + 2(d-1)*alpha; 0 when d <= 1. */
double gpp_allreduce_ms(const gpp_link_t *l, int d, double bytes);

/* Roofline time of `kernels` kernels, `gemms` of them matrix products:
 *   max((flops + gemms * w_half) / (peak * eff_max), bytes / bw) + kernels * launch_ms,
 * w_half = fill_ms * peak * eff_max (each product pays a fill). */
double gpp_roofline_ms(const gpp_device_t *dev, double flops, double bytes, int kernels, int gemms);

typedef struct gpp_cost gpp_cost_t;

/* Borrows g (finalized; must outlive the model); copies the cluster. */
gpp_cost_t *gpp_cost_new(const gpp_graph_t *g, const gpp_cluster_t *c);
/* A model of c's graph for cluster cl holding c's attached measurements
 * (what a cost model made again with other device memory needs). */
gpp_cost_t *gpp_cost_clone(const gpp_cost_t *c, const gpp_cluster_t *cl);
void gpp_cost_destroy(gpp_cost_t **self_p);
const gpp_cluster_t *gpp_cost_cluster(const gpp_cost_t *c);
const gpp_graph_t *gpp_cost_graph(const gpp_cost_t *c); /* the borrowed graph */

/* Attaches a profile's measurements: its ops are matched to the model's by
 * name (ops without one keep their table or the roofline); each op's rows
 * become its time table (forward a third of the total when not measured),
 * memory figures and reserved bytes; the record's device and precision are
 * kept (gpp_cost_profile_source). Checked (gpp_profile_check, an out_bytes
 * above the model's fp32 figure refused); all or nothing. 0, or -1 with a
 * message starting with p->origin. */
int gpp_cost_attach_profile(gpp_cost_t *c, const gpp_profile_t *p, gpp_err_t *err);
/* The same for the rows' memory figures alone (kernel_stash, workspace,
 * out_bytes: an agent's backend, ProfileRequest.figures_only): the ops keep
 * their times. */
int gpp_cost_attach_figures(gpp_cost_t *c, const gpp_profile_t *p, gpp_err_t *err);
/* Where the attached profile was measured: 1 with one line in buf ("profile
 * P measured on NVIDIA H100 80GB HBM3, bf16 matrix products"); 0 when its
 * record named neither device nor precision. */
int gpp_cost_profile_source(const gpp_cost_t *c, char *buf, size_t len);

/* Forward / backward time of op for `samples` samples on one device: the
 * roofline, or the op's measured table (linear between its sizes; beyond
 * them the nearest end's figure along the roofline's shape, t(m) = t(b_end)
 * roof(m) / roof(b_end), forward and backward each on its own curve). */
double gpp_cost_op_fwd_ms(const gpp_cost_t *c, int op, int samples);
double gpp_cost_op_bwd_ms(const gpp_cost_t *c, int op, int samples);
int gpp_cost_op_profiled(const gpp_cost_t *c, int op);
/* When measured tables do not cover 1..max_samples samples per replica: 1
 * with one line in buf (no newline) saying which sizes follow the device
 * curve ("profile P times one micro-batch size (8) for 42 ops; ..."); 0
 * otherwise. P: the last attached profile's origin. */
int gpp_cost_profile_note(const gpp_cost_t *c, int max_samples, char *buf, size_t len);
/* An op's profiled reserved bytes (0 without): the number form at every
 * size, the table interpolated as runtimes are (the per-sample rate of the
 * nearest end beyond it). _at: for `samples` per replica; without a size:
 * at the table's largest. */
int64_t gpp_cost_op_reserved_bytes(const gpp_cost_t *c, int op);
int64_t gpp_cost_op_reserved_at(const gpp_cost_t *c, int op, int samples);
/* An op's stash per sample (gpp_op_t.stash_bytes) with its kernel's part
 * as the profile measured it ("kernel_stash"); opaque ops: their own. */
int64_t gpp_cost_op_stash_bytes(const gpp_cost_t *c, int op);
/* The stream workspace op's kernels ask, the profile's "workspace" or the
 * op table's (gpp_op_workspace). */
gpp_work_t gpp_cost_op_workspace(const gpp_cost_t *c, int op);
/* Bytes per sample of op's output (and its gradient) on the profiled
 * device: the profile's "out_bytes", half the fp32 figure with the
 * cluster's bf16 tensors, else the graph's. What the memory plan keeps and
 * what an edge carries. */
int64_t gpp_cost_op_out_bytes(const gpp_cost_t *c, int op);
/* Of gpp_cost_stage_mem for these ops, the bf16 parameter copies the agents
 * keep (cluster bf16_tensors; else 0), which an agent reports apart. */
int64_t gpp_cost_stage_param_copy_bytes(const gpp_cost_t *c, int n_ops, const int *ops);
/* Bytes one replica contributes to op's gradient sync per iteration: dense
 * params*4; sparse (embedding) the rows a mini-batch touches, at most the table. */
double gpp_cost_op_grad_bytes(const gpp_cost_t *c, int op, int batch);

/* AdamW update on one replica: 28 bytes and 12 FLOPs per gradient element,
 * `kernels` element-wise kernels on the roofline; 0 without kernels. The
 * simulator's STEP charges the same. */
double gpp_cost_step_ms(const gpp_cost_t *c, double grad_bytes, int kernels);
/* Kernels the executor's optimizer step launches for a stage with
 * `param_ops` ops with parameters, `sparse_ops` of them tables
 * (gpp_exec_step: one dense update and zero fill; two per table). */
int gpp_cost_step_kernels(int param_ops, int sparse_ops);

/* Link for stage-to-stage traffic before placement: intra when the cluster
 * is one node, else inter (conservative). */
const gpp_link_t *gpp_cost_p2p_link(const gpp_cost_t *c);
/* Link of a d-replica group: intra when d fits a node (groups are placed
 * node-aligned), else inter. */
const gpp_link_t *gpp_cost_group_link(const gpp_cost_t *c, int d);

/* `blocks` allocations of `bytes` in all as the agents' allocator rounds
 * them at most: gpp_alloc_bound(bytes) + blocks x gpp_alloc_floor. A bound
 * per sample stays one for m >= 1 samples. */
int64_t gpp_cost_mem_bound(const gpp_cost_t *c, int64_t bytes, int64_t blocks);

/* Cost of one stage: ops on `devices` replicas, micro-batch b of mini-batch `batch`. */
typedef struct {
    double fwd_ms;       /* forward of one micro-batch on one replica */
    double bwd_ms;       /* backward of one micro-batch on one replica */
    double bwd_w_ms;     /* of bwd_ms, the parameter gradients' (a zero-bubble W pass):
                            each op's backward times its op table W FLOPs share */
    double comm_ms;      /* boundary activations in/out + their gradients, per
                            micro-batch per replica */
    double allreduce_ms; /* gradient sync per iteration */
    double step_ms;      /* optimizer step per iteration (gpp_cost_step_ms) */
    double tps_ms;       /* (fwd+bwd+comm)/b + (allreduce+step)/batch */
    /* memory per replica, the search's additive bound, each figure a
       gpp_cost_mem_bound */
    int64_t weight_bytes;   /* weights + gradients + optimizer state */
    int64_t stash_bytes;    /* per sample in flight: stashes + boundary tensors */
    int64_t work_bytes;     /* per sample of the running micro-batch: outputs, labels,
                               boundary tensors, workspace bound */
    int64_t reserved_bytes; /* profile reserved_mem at ceil(b/d) samples */
} gpp_stage_cost_t;

void gpp_cost_stage(const gpp_cost_t *c, int n_ops, const int *ops, int devices, int micro_batch,
                    int batch, gpp_stage_cost_t *out);
/* Activation bytes per replica with `inflight` samples in flight:
 * stash * ceil(inflight/b) * ceil(b/d). */
int64_t gpp_cost_act_bytes(int64_t stash_bytes, int inflight, int micro_batch, int devices);
/* The search's memory bound of a stage (sums over ops, for the DP's prefix
 * sums; never below gpp_cost_stage_mem): weight + reserved +
 * act_bytes(stash) + work * ceil(b/d). */
int64_t gpp_cost_stage_mem_bound(const gpp_stage_cost_t *sc, int inflight, int micro_batch,
                                 int devices);
/* Device memory of one replica of the stage: the total of its memory plan
 * (model/gpp_memplan.h) at ceil(b/d) samples, `mbs` micro-batches in
 * flight (at most the slots), batch / b micro-batch slots, + reserved bytes
 * at ceil(b/d). The figure plans report and agents' measurements are
 * compared with. */
int64_t gpp_cost_stage_mem(const gpp_cost_t *c, int n_ops, const int *ops, int devices,
                           int micro_batch, int mbs, int batch);
/* The memory plan behind it (caller owns it), with the backward split in
 * B and W when `split` (zero-bubble orders, gpp_zb_stage_mem: mbs
 * micro-batches begun and not past their W), and the reserved bytes at
 * ceil(b/d) into *reserved. */
gpp_memplan_t *gpp_cost_stage_plan(const gpp_cost_t *c, int n_ops, const int *ops, int devices,
                                   int micro_batch, int mbs, int batch, int split,
                                   int64_t *reserved);
/* One op's terms of gpp_stage_cost_t, each a gpp_cost_mem_bound: its state
 * (weights, gradients, optimizer state; a loss's value per slot), and per
 * sample the stash kept (at most 3 blocks a micro-batch) and the work of a
 * running micro-batch (at most 7 blocks, 8 with CUDA graphs). */
int64_t gpp_cost_op_state_bytes(const gpp_cost_t *c, int op, int batch);
int64_t gpp_cost_op_stash_bound(const gpp_cost_t *c, int op);
int64_t gpp_cost_op_work_bytes(const gpp_cost_t *c, int op);
/* The largest workspace any op asks for one sample: part of every stage's work. */
int64_t gpp_cost_workspace_bound(const gpp_cost_t *c);
/* How many times the search counts a stage's boundary tensors in what a
 * micro-batch keeps and in what it runs with: 2, a tensor and its gradient
 * (a micro-batch's lane in the memory plan holds both at the end of its
 * backward, model/gpp_memplan.h). */
int gpp_cost_bnd_copies(const gpp_cost_t *c);

#endif
