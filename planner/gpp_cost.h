/* gpp_cost: the planner's cost model — devices, links, per-op time, stage
 * time and memory (paper section 3 and 5: TPS and DeviceMemoryUsage).
 *
 * Units are in the names: _ms (milliseconds), _bytes, _flops (FLOP/s for
 * peaks). "Samples" are training samples; a micro-batch of b samples on a
 * stage with d data-parallel replicas gives each replica ceil(b/d) samples.
 *
 * Per-op time comes from a measured profile when one is attached (the paper
 * authors' profile.json schema, see gpp_cost_attach_profile), otherwise from
 * a roofline of the device:
 *   t(flops, bytes, kernels, gemms) = max(flops / (peak * eff(w)), bytes / bw)
 *                                     + kernels * launch_ms,
 *   eff(w) = eff_max * w / (w + w_half), w = flops per GEMM kernel,
 *   w_half = fill_ms * peak * eff_max (the work whose ideal time equals the
 *   per-kernel fill/tail time); so the compute term is
 *   (flops + gemms * w_half) / (peak * eff_max). Only matrix products
 *   (gemms of the kernels: the op table's fwd_gemms / bwd_gemms) pay the
 *   fill; element-wise kernels pay the launch only. docs/planner.md
 *   justifies the constants.
 *
 * Memory per device of a stage: the total of the stage's memory plan
 * (model/gpp_memplan.h, docs/executor.md "Memory"): weights, gradients and
 * the state of the run's optimizer (gpp_cluster_t.optim_bufs), a lane per
 * micro-batch in flight, the scratch of the running pass, the kernels'
 * workspace; plus reserved bytes from the profile at the stage's
 * per-replica micro-batch.
 *
 * Ownership: gpp_cost_new returns a model the caller owns (free with
 * gpp_cost_destroy); it borrows the graph, which must outlive it, and copies
 * the cluster. gpp_profile_read_graph returns a graph the caller owns. */
#ifndef GPP_COST_H
#define GPP_COST_H

#include <stdint.h>
#include <stdio.h>

#include "common/gpp_alloc_rule.h"
#include "common/gpp_err.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h" /* gpp_work_t */

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
 * Filled by the CLI and by the coordinator's cluster.toml loader. */
typedef struct {
    int n_devices;
    int gpus_per_node;
    gpp_device_t device;
    int64_t mem_bound_bytes;     /* per-device bound for the planner; 0 = device.mem_bytes
                                    minus GPP_CONTEXT_BYTES (CUDA context, workspaces) */
    gpp_link_t intra;            /* between devices of one node */
    gpp_link_t inter;            /* between nodes */
    double compute_share;        /* fraction of its device's compute each device gets: 1 for
                                    GPUs; cores / (agents x threads) for CPU agents that share
                                    fewer cores (0 = 1). Scales every compute time. */
    int optim_bufs;              /* optimizer state floats per parameter of the run's optimizer:
                                    GPP_OPTIM_BUFS_SGD (1) or _ADAMW (2); 0 = AdamW */
    int load_ahead;              /* 1: the agents' executors load the next micro-batch's
                                    inputs and labels ahead into device buffers (their
                                    default on a GPU), which a stage with SOURCE or loss ops
                                    holds besides its tensors (gpp_stage_mem_t.ahead_bytes);
                                    0: they do not (CPU agents) */
    int graphs;                  /* 1: the agents' executors replay their passes as CUDA
                                    graphs (cuda jobs, [job] cuda_graphs; GPU presets in
                                    gpp-plan): a stage then holds feed buffers and, of each
                                    block size, the most blocks live at once
                                    (gpp_stage_dev_t.graphs) */
    gpp_alloc_rule_t alloc_rule; /* how the agents' allocator rounds each block
                                    (common/gpp_alloc_rule.h): GPP_ALLOC_CLASSES for
                                    cuda agents, GPP_ALLOC_ALIGN64 (0) for CPU ones */
    int bf16_tensors;            /* 1: the agents keep bf16 tensors (a bf16 cuda job with
                                    bf16_tensors, gpp_cluster_set_precision): the roofline's activation
                                    bytes and, without a profile's figure, every op's output
                                    but data's are halved; stage memory counts the bf16 copies
                                    of the linears' and attention's parameters
                                    (gpp_op_param_copy_bytes) */
} gpp_cluster_t;

#define GPP_CONTEXT_BYTES ((int64_t)512 << 20)
#define GPP_BYTES_PER_PARAM 16 /* fp32 AdamW: weight 4 + grad 4 + m 4 + v 4 */
/* Optimizer state floats per parameter the cluster's run uses (AdamW when unset). */
int gpp_cluster_optim_bufs(const gpp_cluster_t *c);

/* Presets: "v100-16g", "v100-32g", "a100-80g", "h100-80g", "h200-141g", "cpu" (one core).
 * Each carries its default links (gpp_cluster_init). mixed_precision 0
 * uses the fp32 (non-tensor) peak — what the fp32 executor runs; 1 uses the
 * fp16/bf16 dense tensor-core peak. Returns 0, or -1 listing the presets. */
int gpp_device_preset(const char *name, int mixed_precision, gpp_device_t *out, gpp_err_t *err);
void gpp_device_list(FILE *out);

/* The matrix-product precision of the cluster's devices (a cuda job's
 * [job] precision; gpp-plan --precision), after gpp_cluster_init with the
 * same preset: tf32 takes the preset's dense TF32 tensor-core peak (none
 * on V100: fp32 stays), bf16 its dense fp16/bf16 peak (eff_max 0.8, as
 * gpp_device_preset's mixed precision); bf16 with bf16_tensors (the
 * agents keep bf16 tensors, [job] bf16_tensors, off by default) also
 * halves the roofline's activation bytes and counts the bf16 copies of
 * the product weights in stage memory; fp32 and the cpu preset change
 * nothing. -1 with a message for another name. */
int gpp_cluster_set_precision(gpp_cluster_t *c, const char *preset, const char *precision,
                              int bf16_tensors, gpp_err_t *err);
/* Fills c with a preset device and its default links: the preset's NVLink
 * generation between devices of one node, its InfiniBand generation between
 * nodes, measured figures (gpp_cost_device.c, docs/planner.md "Devices");
 * loopback / 10 GbE for "cpu". Returns 0 or -1. */
int gpp_cluster_init(gpp_cluster_t *c, const char *preset, int n_devices, int gpus_per_node,
                     gpp_err_t *err);
/* The per-device memory bound the planner enforces. */
int64_t gpp_cluster_mem_bound(const gpp_cluster_t *c);
int gpp_cluster_node(const gpp_cluster_t *c, int device);
/* Link between two devices (intra when on one node). */
const gpp_link_t *gpp_cluster_link(const gpp_cluster_t *c, int dev_a, int dev_b);
/* Link a group of `devices` consecutive devices starting at first_device
 * uses for collectives: inter when the group spans nodes. */
const gpp_link_t *gpp_cluster_group_link(const gpp_cluster_t *c, int first_device, int devices);

/* Point-to-point message: alpha + bytes / bw. */
double gpp_link_ms(const gpp_link_t *l, double bytes);
/* Ring all-reduce over d ranks: 2(d-1)/d * bytes/bw + 2(d-1)*alpha; 0 when d <= 1. */
double gpp_allreduce_ms(const gpp_link_t *l, int d, double bytes);

/* Roofline time of one kernel group (see the file comment): `kernels`
 * launches, of which `gemms` are matrix products that pay the fill. */
double gpp_roofline_ms(const gpp_device_t *dev, double flops, double bytes, int kernels, int gemms);

typedef struct gpp_cost gpp_cost_t;

/* Borrows g (finalized; must outlive the model); copies the cluster. */
gpp_cost_t *gpp_cost_new(const gpp_graph_t *g, const gpp_cluster_t *c);
void gpp_cost_destroy(gpp_cost_t **self_p);
const gpp_cluster_t *gpp_cost_cluster(const gpp_cost_t *c);

/* Attaches measured runtimes from a profile.json (schema: object keyed by
 * op id string; entry {name, inputs, input_size, weight_size, runtime:
 * {"<micro-batch>": fwd+bwd ms}, reserved_mem?: bytes or {"<micro-batch>": bytes}}). Entries are
 * matched by id and must carry the op's name; ops without an entry keep the roofline. Runtime for b
 * samples: linear between table points, the device curve outside them (gpp_cost_op_fwd_ms);
 * split fwd:bwd = 1:2. Errors name the file, op id and field. Returns 0 or -1. */
int gpp_cost_attach_profile(gpp_cost_t *c, const char *path, gpp_err_t *err);
int gpp_cost_attach_profile_text(gpp_cost_t *c, const char *text, const char *origin,
                                 gpp_err_t *err);

/* The top-level key of gpp's record in a profile.json it writes (readers
 * skip it): {"model": spec, "device": preset or the device's own name,
 * "ops": the model's op count, "precision"?: "fp32" | "tf32" | "bf16",
 * "backend"?: "cpu" | "cuda:N"}. gpp-train --profile-out writes the
 * device's name (gpp_backend_device_name), the coordinator's kept profile
 * the cluster's preset. The record and its optional fields may be absent
 * (older files, the authors' profiles): such files load as before. */
#define GPP_PROFILE_META "_gpp"
/* Where the attached profile was measured, from its record: 1 with one
 * line in buf ("profile P measured on NVIDIA H100 80GB HBM3, bf16 matrix
 * products"); 0 when the file said neither device nor precision. */
int gpp_cost_profile_source(const gpp_cost_t *c, char *buf, size_t len);
/* Records where the attached rows were measured (the device's own name, ""
 * when unknown; the precision name): gpp_cost_profile_source and the
 * record gpp_cost_profile_json writes report them. */
void gpp_cost_set_profile_source(gpp_cost_t *c, const char *device_name, const char *precision);

/* The attached measurements as a profile.json (authors' schema: an entry
 * per profiled op keyed by op index with name, inputs, input_size,
 * weight_size, runtime, reserved_mem when set; plus gpp's forward table and
 * the GPP_PROFILE_META record naming model and device). Numbers round-trip
 * exactly, so attaching the text gives the same costs. Caller frees. */
char *gpp_cost_profile_json(const gpp_cost_t *c, const char *model, const char *device);
/* Reads the GPP_PROFILE_META record of such a file: model, device, op
 * count and precision ("fp32" when the record has none). Returns 0 or -1
 * (file, JSON or record missing or malformed: the message names the file). */
int gpp_cost_profile_meta(const char *path, char *model, size_t model_len, char *device,
                          size_t device_len, int *n_ops, char *precision, size_t precision_len,
                          gpp_err_t *err);

/* One measured (op, micro-batch) figure, as the agents' profiler reports it. */
typedef struct {
    int op;          /* the model's op index */
    int micro_batch; /* samples */
    double fwd_ms;   /* forward */
    double bwd_ms;   /* backward */
    /* the profile's "kernel_stash" (gpp_cost_op_stash_bytes) when
       has_kernel_stash; the same in every row of an op */
    int has_kernel_stash;
    int64_t kernel_stash;
    /* the profile's "workspace" (gpp_cost_op_workspace) when has_workspace;
       the same in every row of an op */
    int has_workspace;
    gpp_work_t workspace;
    /* the profile's "out_bytes" (the output's bytes per sample as the
       backend keeps it inside a stage) when has_out_bytes; the same in
       every row of an op, 1 .. the op's fp32 figure */
    int has_out_bytes;
    int64_t out_bytes;
} gpp_cost_row_t;

/* Attaches measured rows (any order) as a profile.json with runtime =
 * fwd_ms + bwd_ms and forward = fwd_ms would: the same checks (one
 * function), the same interpolation; ops without rows keep their table or
 * the roofline. Errors start with origin and name the op. All or nothing:
 * on -1 the model is unchanged. Returns 0 or -1. */
int gpp_cost_attach_rows(gpp_cost_t *c, const gpp_cost_row_t *rows, size_t n_rows,
                         const char *origin, gpp_err_t *err);
/* Attaches only the rows' memory figures (kernel_stash, workspace: an
 * agent's backend layouts, ProfileRequest.figures_only): the same checks;
 * the ops keep their times (table or roofline). All or nothing. */
int gpp_cost_attach_figures(gpp_cost_t *c, const gpp_cost_row_t *rows, size_t n_rows,
                            const char *origin, gpp_err_t *err);

/* Builds a graph of GPP_OP_OPAQUE ops from a profile.json (params =
 * weight_size/4, out_bytes = the largest input_size any consumer declares
 * for it, stash_bytes = sum of the op's own input sizes; docs/planner.md).
 * Op names are the entries' names made unique. Caller owns the result. */
gpp_graph_t *gpp_profile_read_graph(const char *path, gpp_err_t *err);
gpp_graph_t *gpp_profile_parse_graph(const char *text, const char *origin, gpp_err_t *err);

/* Forward / backward time of op for `samples` samples on one device: the
 * roofline, or the op's measured table (linear between its sizes); beyond
 * the table, the nearest end's figure scaled by the device curve,
 * t(m) = t(b_end) * roof(m) / roof(b_end), forward and backward each on
 * its own curve (linear where the roofline has no time). */
double gpp_cost_op_fwd_ms(const gpp_cost_t *c, int op, int samples);
double gpp_cost_op_bwd_ms(const gpp_cost_t *c, int op, int samples);
int gpp_cost_op_profiled(const gpp_cost_t *c, int op);
/* Says when measured tables do not cover the sizes the planner asks for,
 * 1..max_samples samples per replica (ceil(b/d) for b <= batch): those
 * sizes follow the device curve. 1 with one line in buf (no newline), e.g.
 * "profile P times one micro-batch size (8) for 42 ops; other sizes
 * extrapolated with the v100-16g curve"; 0 when every table covers them or
 * nothing is profiled. P: the file (or origin) of the last attach. */
int gpp_cost_profile_note(const gpp_cost_t *c, int max_samples, char *buf, size_t len);
/* An op's profiled reserved_mem (0 without one). The number form is the
 * same at every micro-batch size; the object form {"<micro-batch>": bytes}
 * is interpolated as runtimes are (linear between points, the per-sample
 * rate of the nearest end beyond them). _at: for `samples` samples per
 * replica (gpp_cost_stage uses ceil(b/d)); without a size: at the table's
 * largest micro-batch size. */
int64_t gpp_cost_op_reserved_bytes(const gpp_cost_t *c, int op);
int64_t gpp_cost_op_reserved_at(const gpp_cost_t *c, int op, int samples);
/* An op's stash per sample (gpp_op_t.stash_bytes) with its kernel's part as
 * the attached profile measured it: the optional entry field
 * "kernel_stash" (bytes per sample the backend's forward kernel keeps for
 * the backward; gpp_profile_write records it: the CUDA backend's fused
 * attention keeps no seq x seq probabilities, the op table's layout does).
 * Without the field, the op table's. Opaque ops: always their own. */
int64_t gpp_cost_op_stash_bytes(const gpp_cost_t *c, int op);
/* The stream workspace op's kernels ask (fixed + n x per_sample bytes for n
 * samples) as the attached profile measured it: the optional entry field
 * "workspace": {"fixed": bytes, "per_sample": bytes} (gpp_profile_write
 * records the backend's figure: the CUDA attention cores ask more than the
 * op table's CPU layout). Without the field, the op table's
 * (gpp_op_workspace). */
gpp_work_t gpp_cost_op_workspace(const gpp_cost_t *c, int op);
/* The bytes per sample of op's output (and its gradient) on the profiled
 * device: the profile's "out_bytes" (a bf16 tensor at precision bf16 on
 * CUDA: half), else the graph's fp32 figure. What the memory walk keeps and
 * what an edge carries between stages (the partitioner's and the
 * simulator's transfer sizes). */
int64_t gpp_cost_op_out_bytes(const gpp_cost_t *c, int op);
/* Of gpp_cost_stage_mem for these ops, the bf16 parameter copies the
 * agents keep (cluster bf16_tensors; else 0): the backend's own buffers,
 * which an agent reports apart from its stage's (the coordinator's
 * predicted-against-measured table adds the reported ones instead). */
int64_t gpp_cost_stage_param_copy_bytes(const gpp_cost_t *c, int n_ops, const int *ops);
/* Bytes one replica contributes to the per-iteration gradient sync of op:
 * dense: params*4; sparse (embedding): the rows a mini-batch touches, at most
 * the table. */
double gpp_cost_op_grad_bytes(const gpp_cost_t *c, int op, int batch);

/* AdamW update on one replica (each replica updates its own full copy):
 * read w, g, m, v and write w, m, v — 28 bytes and 12 FLOPs per gradient
 * element (grad_bytes / 4), `kernels` element-wise kernels (launch, no
 * fill; gpp_cost_step_kernels), roofline of the device; 0 without kernels.
 * The simulator's STEP action charges the same, so the partitioner's TPS
 * counts it once per iteration. */
double gpp_cost_step_ms(const gpp_cost_t *c, double grad_bytes, int kernels);
/* Kernels the executor's optimizer step launches for a stage holding
 * `param_ops` ops with parameters, `sparse_ops` of them embedding tables
 * (agent/exec/gpp_exec.c gpp_exec_step): the update and the zero fill of
 * the one flat buffer of every dense parameter, the sparse update and the
 * clear per table. Not one per op: the dense step is one call. */
int gpp_cost_step_kernels(int param_ops, int sparse_ops);

/* Link the planner assumes for stage-to-stage traffic before placement:
 * intra when the whole cluster is one node, else inter (conservative). */
const gpp_link_t *gpp_cost_p2p_link(const gpp_cost_t *c);
/* Link the planner assumes for a d-replica group: intra when d fits a node
 * (groups are placed node-aligned), else inter. */
const gpp_link_t *gpp_cost_group_link(const gpp_cost_t *c, int d);

/* The planner's linear memory bound holds `blocks` allocations of `bytes`
 * in all as the agents' allocator rounds them at most (the cluster's
 * alloc_rule): gpp_alloc_bound(bytes) + blocks x gpp_alloc_floor. A figure
 * per sample stays a bound for m samples (m >= 1), so the search's
 * W + (stash x mbf + work) x m covers the executor's rounded blocks
 * (gpp_cost_stage_mem, the exact walk). */
int64_t gpp_cost_mem_bound(const gpp_cost_t *c, int64_t bytes, int64_t blocks);

/* Cost of one stage: a set of ops run on `devices` replicas with
 * micro-batch b out of mini-batch `batch`. */
typedef struct {
    double fwd_ms;       /* forward of one micro-batch on one replica */
    double bwd_ms;       /* backward of one micro-batch on one replica */
    double comm_ms;      /* boundary activations in/out + their gradients, per
                            micro-batch per replica */
    double allreduce_ms; /* gradient sync per iteration */
    double step_ms;      /* optimizer step per iteration (gpp_cost_step_ms) */
    double tps_ms;       /* (fwd+bwd+comm)/b + (allreduce+step)/batch */
    /* memory per replica, the search's additive bound (gpp_cost_stage_mem_bound),
       each figure as the allocator rounds it at most (gpp_cost_mem_bound) */
    int64_t weight_bytes;   /* weights + gradients + optimizer state (gpp_cost_op_state_bytes) */
    int64_t stash_bytes;    /* per sample in flight: the ops' stashes + boundary tensors */
    int64_t work_bytes;     /* per sample of one micro-batch: every output and label +
                               boundary tensors + gpp_cost_workspace_bound (the running one) */
    int64_t reserved_bytes; /* profile reserved_mem at ceil(b/d) samples */
} gpp_stage_cost_t;

void gpp_cost_stage(const gpp_cost_t *c, int n_ops, const int *ops, int devices, int micro_batch,
                    int batch, gpp_stage_cost_t *out);
/* Activation bytes per replica with `inflight` samples in flight:
 * stash * ceil(inflight/b) * ceil(b/d). */
int64_t gpp_cost_act_bytes(int64_t stash_bytes, int inflight, int micro_batch, int devices);
/* The search's memory bound of a stage (sums over ops, so the DP can use
 * prefix sums; never below gpp_cost_stage_mem): weight + reserved +
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
/* Figures of one op the search sums (see gpp_stage_cost_t), each a
 * gpp_cost_mem_bound: state (its parameters' share of the flat buffers, or
 * an embedding table's own blocks; a loss's value per slot), and per
 * sample the stash kept (gpp_cost_op_stash_bytes: at most 3 blocks per
 * micro-batch, output, kernel stash and a gradient) and the work of a
 * running micro-batch (at most 7: output, a fused activation's output,
 * kernel stash, label, gradient, two load-ahead buffers). */
int64_t gpp_cost_op_state_bytes(const gpp_cost_t *c, int op, int batch);
int64_t gpp_cost_op_stash_bound(const gpp_cost_t *c, int op);
int64_t gpp_cost_op_work_bytes(const gpp_cost_t *c, int op);
/* The kernels' workspace per sample any stage may ask for (the graph's
 * largest request for one sample); part of every stage's work_bytes. */
int64_t gpp_cost_workspace_bound(const gpp_cost_t *c);
/* How many times the search counts a stage's boundary tensors in what a
 * micro-batch keeps and in what it runs with: 2, a tensor and its gradient
 * (a micro-batch's lane in the memory plan holds both at the end of its
 * backward, model/gpp_memplan.h). */
int gpp_cost_bnd_copies(const gpp_cost_t *c);

#endif
