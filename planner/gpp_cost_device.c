/* gpp_cost_device: the device side of gpp_cost (gpp_cost.h): presets with
 * their published peaks and per-kernel costs, the default links, the
 * point-to-point and ring all-reduce times, and the roofline curve every
 * per-op time follows (measured ops beyond their table too). See
 * docs/planner.md "Devices" and "Per-op time". */
#include <assert.h>
#include <string.h>

#include "planner/gpp_cost.h"

#define GIB ((int64_t)1 << 30)

/* Links, per link kind: alpha (latency per message) and bandwidth per
 * direction as MEASURED with NCCL point-to-point or per-NIC bus bandwidth,
 * not the line rate (a line rate overstates what a pipeline's send/recv
 * gets by 2x and more on NVLink). A stage-to-stage edge is one NCCL
 * send/recv pair; the gradient all-reduce uses the same figure (a ring's
 * bus bandwidth is higher on a fully connected NVSwitch node, so
 * all-reduce inside a node is costed conservatively).
 *
 * NVLink4 (H100 SXM, NVSwitch): 180 GB/s, 3 us. nccl-tests sendrecv_perf
 *   between two H100s over NVLink: bandwidth rising from 80 GB/s to a
 *   plateau of about 180 GB/s over 4 KiB..4 GiB messages (NVIDIA/nccl-tests
 *   issue #268, 2024); the line rate is 450 GB/s per direction and the
 *   memcpy p2p test reaches 376-380 GB/s unidirectional (NVIDIA/nccl issue
 *   #1264), which NCCL's send/recv does not. DeepSeek-V3's technical report
 *   (2024, and deepseek-ai/DeepSeek-V3 issue #28) gives 160 GB/s measured
 *   one-way on H800's reduced NVLink. Latency: nccl-tests reports about 3 us
 *   for a small send/recv between two NVLink-connected H100s (NVIDIA/nccl
 *   issue #1487).
 * NVLink3 (A100 SXM, NVSwitch): 200 GB/s, 3 us. NCCL all_reduce bus
 *   bandwidth on 8x A100-SXM4-80GB, about 200 GB/s (NVIDIA/nccl-tests issue
 *   #149, 2023; line rate 300 GB/s per direction); no published send/recv
 *   measurement between two A100s was found, so this is an upper figure
 *   for p2p (on H100 send/recv reached about half the ring bus bandwidth).
 *   Latency: the H100 figure (same NCCL protocol, one NVSwitch hop).
 * NVLink2 (V100 on Summit, the paper's machine): 50 GB/s, 5 us. Two bricks
 *   of 25 GB/s per direction between GPU pairs of a socket (OLCF Summit
 *   user guide); kept at that figure, which the planner's v100 results
 *   (issue 9's GPP/SPP sweep) were computed with.
 * InfiniBand NDR 400 Gb/s (one ConnectX-7 per GPU, H100 nodes): 47 GB/s,
 *   10 us. "For NDR @ 400Gbps you should see 46-48GB/s per NIC" (NVIDIA,
 *   NVIDIA/nccl-tests issue #290, 2025); 50 GB/s is the line rate.
 * InfiniBand HDR 200 Gb/s (A100 nodes): 24.4 GB/s, 10 us: twice the EDR
 *   figure below (HDR doubles EDR's signalling, same encoding and NIC
 *   path); no separate published measurement was found.
 * InfiniBand EDR 100 Gb/s (Summit): 12.2 GB/s, 10 us. "12.2 GB/s (for a
 *   100Gbps card) is as good as you can get" (NVIDIA, NVIDIA/nccl-tests
 *   issue #29, 2019); the line rate is 12.5 GB/s.
 * Inter-node latency 10 us: NCCL's small-message time between nodes is
 *   typically 10-30 us (NVIDIA/nccl-tests issue #214 shows 31-34 us on
 *   A40 nodes); 10 us is the lower end, which the bandwidth term dominates
 *   at the planner's message sizes (hundreds of KiB and up). */
static const gpp_link_t s_nvlink4 = {0.003, 180e9};
static const gpp_link_t s_nvlink3 = {0.003, 200e9};
static const gpp_link_t s_nvlink2 = {0.005, 50e9};
static const gpp_link_t s_ndr = {0.010, 47e9};
static const gpp_link_t s_hdr = {0.010, 24.4e9};
static const gpp_link_t s_edr = {0.010, 12.2e9};

/* Device presets. Sources, constant by constant:
 *
 * Peaks, bandwidth, memory: the vendors' datasheets (SXM parts). fp32 is the
 * CUDA-core peak, tensor the dense fp16/bf16 tensor-core peak (half of the
 * "with sparsity" figure).
 *   v100: NVIDIA Tesla V100 datasheet (2018): single precision 15.7 TFLOPS,
 *         tensor 125 TFLOPS, HBM2 900 GB/s, 16 or 32 GB.
 *   a100: NVIDIA A100 Tensor Core GPU datasheet (2021), 80GB SXM: FP32 19.5
 *         TFLOPS, FP16 tensor 312 TFLOPS, 2,039 GB/s.
 *   h100: NVIDIA H100 Tensor Core GPU datasheet (2023), SXM: FP32 67
 *         TFLOPS, FP16/BF16 tensor 1,979 TFLOPS with sparsity (989 dense),
 *         3.35 TB/s, 80 GB.
 *   h200: NVIDIA H200 Tensor Core GPU datasheet (2024), SXM: FP32 67
 *         TFLOPS, BF16 tensor 1,979 TFLOPS with sparsity (989 dense), HBM3e
 *         4.8 TB/s, 141 GB.
 *   TF32 (dense, the same datasheets, half their "with sparsity" figure):
 *         A100 156 TFLOPS, H100 and H200 SXM 494.5 (989 with sparsity);
 *         V100 has no TF32 (cuBLASLt's FAST_TF32 runs fp32 there).
 *   Memory is given in GiB as the parts' marketing GB (an 80 GB H100
 *   reports 79.1 GiB to CUDA; the planner's bound subtracts
 *   GPP_CONTEXT_BYTES and agents report the real figure).
 * Links per preset: the node's NVLink generation inside a node, the
 *   InfiniBand generation of the systems built with the part between
 *   nodes (DGX-1 / Summit EDR, DGX A100 HDR, DGX H100 / H200 NDR), figures
 *   above.
 * launch_ms (GPUs, 5 us): NVIDIA Technical Blog, A. Gray, "Getting Started
 *   with CUDA Graphs" (2019), V100: a 2.9 us kernel took 9.6 us per kernel
 *   when each launch was followed by a stream sync and 3.8 us when launched
 *   back to back, so 1-6.7 us of launch cost per kernel; 5 us is in that
 *   range (gpp's executor syncs between ops only when it times them).
 * eff_max (0.9 fp32, 0.8 tensor; set in gpp_device_preset) and fill_ms
 *   (10 us) are not datasheet figures. eff_max: the fraction of peak large
 *   cuBLAS / OpenBLAS SGEMMs are generally reported to sustain. fill_ms: a
 *   GEMM kernel's ramp-up and tail (wave quantization), which makes a
 *   matrix product of w FLOPs run at eff_max * w / (w + w_half). It is
 *   charged to GEMM kernels only (the op table's fwd_gemms / bwd_gemms);
 *   element-wise and memory-bound kernels pay launch_ms alone. On the CPU
 *   backend it is measured (bench/cost_curve.sh, BENCHMARKS.md "Cost
 *   model: the micro-batch curve"): the fixed part of an op's time, fitted
 *   over micro-batch 1..8, is 5-35 us per kernel for the GEMM ops (linear
 *   layers) and 0-3 us per op (mostly under 1 us per kernel) for
 *   element-wise ops (layer norm, add, GELU), hence the split; the value is
 *   the same 10 us for every preset, and the GPU value is not measured here
 *   (no GPU on the development machine).
 *
 * "cpu" is one x86-64 server core running the CPU backend (OpenBLAS), the
 * device of a CPU agent slot: Intel's published AVX-512 rate for Skylake-SP
 * (2 FMA units x 16 fp32 lanes x 2 flops = 64 flop/cycle) at a 2.0 GHz
 * AVX-512 all-core clock = 128 GFLOP/s; no tensor unit; single-core STREAM
 * bandwidth of that generation is about 12 GB/s. A call costs about a
 * microsecond (no kernel launch; the measured fixed part of element-wise
 * ops above). The memory is whatever the cluster file gives per agent
 * (cluster.mem_gib); 4 GiB otherwise. */
typedef struct {
    const char *name;
    double fp32_flops, tensor_flops, bw_bytes_per_s;
    int64_t mem_bytes;
    double tf32_flops; /* dense TF32 tensor-core peak; 0: no TF32 (tf32 runs as fp32) */
    double fill_ms, launch_ms;
    int is_cpu;
    const gpp_link_t *intra, *inter; /* default links, kinds named below */
    const char *intra_kind, *inter_kind;
} s_preset_t;

/* CPU agents on one host talk through gpp_comm's Gloo TCP pairs over
 * loopback. Measured with build/bench/bench_comm (2 forked ranks on the
 * project's 2-vCPU development VM, load average 0.6-1.0, 11 runs): one-way
 * time of a ping-pong (round trip / 2, median of 15) at 4 B .. 64 MiB, the
 * affine model fitted by least squares of the relative error over all
 * sizes: alpha 14-25 us (median 17.6), bw 5.1-7.4 GB/s (median 6.6). The
 * line is within 10% of the measurement up to 64 KiB, mostly within 25%
 * from 256 KiB to 16 MiB, and 25-38% below it at 64 MiB (3.8-4.7 GB/s).
 * The ring all-reduce (gpp_comm_allreduce_sum_f32, 2 ranks) is slower than
 * gpp_allreduce_ms with these constants: about 2x (1.5-3x) up to 256 KiB,
 * 2.5-5.7x at 1-64 MiB, because both ranks of a ring step send at once and
 * the two directions share the cores' copies (an exchange of bytes/2 each
 * way takes 1.6-3.2x, mostly 2-2.7x, the fitted one-way time), the
 * reduction and temporary segment add 40-120% on top of those transfers
 * at 1-64 MiB, and each step is a separate Gloo wake-up that waits up to
 * ~4 ms when the shared VM's cores are busy. These constants describe the
 * transport, not that algorithm (BENCHMARKS.md, "Loopback transport").
 * Between CPU hosts: 10 GbE, 1.25 GB/s, ~50 us (not measured). */
static const gpp_link_t s_loopback = {0.018, 6.5e9};
static const gpp_link_t s_10gbe = {0.050, 1.25e9};

static const s_preset_t s_presets[] = {
    {"v100-16g", 15.7e12, 125e12, 900e9, 16 * GIB, 0, 0.010, 0.005, 0, &s_nvlink2, &s_edr,
     "nvlink2", "ib-edr"},
    {"v100-32g", 15.7e12, 125e12, 900e9, 32 * GIB, 0, 0.010, 0.005, 0, &s_nvlink2, &s_edr,
     "nvlink2", "ib-edr"},
    {"a100-80g", 19.5e12, 312e12, 2039e9, 80 * GIB, 156e12, 0.010, 0.005, 0, &s_nvlink3, &s_hdr,
     "nvlink3", "ib-hdr"},
    {"h100-80g", 67e12, 989e12, 3350e9, 80 * GIB, 494.5e12, 0.010, 0.005, 0, &s_nvlink4, &s_ndr,
     "nvlink4", "ib-ndr"},
    {"h200-141g", 67e12, 989e12, 4800e9, 141 * GIB, 494.5e12, 0.010, 0.005, 0, &s_nvlink4, &s_ndr,
     "nvlink4", "ib-ndr"},
    {"cpu", 128e9, 128e9, 12e9, 4 * GIB, 0, 0.010, 0.001, 1, &s_loopback, &s_10gbe, "loopback",
     "10gbe"},
};
#define N_PRESETS ((int)(sizeof s_presets / sizeof s_presets[0]))

int gpp_device_preset(const char *name, int mixed_precision, gpp_device_t *out, gpp_err_t *err)
{
    for (int i = 0; i < N_PRESETS; i++) {
        if (strcmp(name, s_presets[i].name) != 0)
            continue;
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s%s", s_presets[i].name,
                 mixed_precision ? "+tc" : "");
        out->peak_flops = mixed_precision ? s_presets[i].tensor_flops : s_presets[i].fp32_flops;
        out->mem_bw_bytes_per_s = s_presets[i].bw_bytes_per_s;
        out->mem_bytes = s_presets[i].mem_bytes;
        out->eff_max = mixed_precision && !s_presets[i].is_cpu ? 0.8 : 0.9;
        out->fill_ms = s_presets[i].fill_ms;
        out->launch_ms = s_presets[i].launch_ms;
        return 0;
    }
    return gpp_err_set(err,
                       "unknown device preset '%s'; use one of: v100-16g, v100-32g, "
                       "a100-80g, h100-80g, h200-141g, cpu",
                       name);
}

void gpp_device_list(FILE *out)
{
    for (int i = 0; i < N_PRESETS; i++) {
        const s_preset_t *p = &s_presets[i];
        fprintf(out,
                "%-10s fp32 %.1f TFLOP/s, tensor %.0f TFLOP/s, HBM %.0f GB/s, %lld GiB; links: "
                "%s %.1f GB/s %.0f us in a node, %s %.1f GB/s %.0f us between nodes\n",
                p->name, p->fp32_flops / 1e12, p->tensor_flops / 1e12, p->bw_bytes_per_s / 1e9,
                (long long)(p->mem_bytes / GIB), p->intra_kind, p->intra->bw_bytes_per_s / 1e9,
                p->intra->alpha_ms * 1e3, p->inter_kind, p->inter->bw_bytes_per_s / 1e9,
                p->inter->alpha_ms * 1e3);
    }
}

int gpp_cluster_set_precision(gpp_cluster_t *c, const char *preset, gpp_precision_t precision,
                              int bf16_tensors, gpp_err_t *err)
{
    assert((unsigned)precision < GPP_PRECISION__COUNT);
    const s_preset_t *p = NULL;
    for (int i = 0; i < N_PRESETS && !p; i++)
        if (strcmp(preset, s_presets[i].name) == 0)
            p = &s_presets[i];
    if (!p)
        return gpp_err_set(err, "unknown device preset '%s'", preset);
    c->bf16_tensors = precision == GPP_PRECISION_BF16 && !p->is_cpu && bf16_tensors;
    if (precision == GPP_PRECISION_FP32 || p->is_cpu ||
        (precision == GPP_PRECISION_TF32 && p->tf32_flops <= 0)) {
        /* the fp32 peak, as gpp_cluster_init sets it */
        c->device.peak_flops = p->fp32_flops;
        c->device.eff_max = 0.9;
        snprintf(c->device.name, sizeof c->device.name, "%s", p->name);
        return 0;
    }
    c->device.peak_flops = precision == GPP_PRECISION_TF32 ? p->tf32_flops : p->tensor_flops;
    c->device.eff_max = 0.8; /* gpp_device_preset's tensor-core figure */
    snprintf(c->device.name, sizeof c->device.name, "%s+%s", p->name,
             gpp_precision_name(precision));
    return 0;
}

int gpp_cluster_init(gpp_cluster_t *c, const char *preset, int n_devices, int gpus_per_node,
                     gpp_err_t *err)
{
    memset(c, 0, sizeof *c);
    if (n_devices < 1)
        return gpp_err_set(err, "cluster: n_devices must be >= 1 (got %d)", n_devices);
    if (gpus_per_node < 1)
        return gpp_err_set(err, "cluster: gpus_per_node must be >= 1 (got %d)", gpus_per_node);
    if (gpp_device_preset(preset, 0, &c->device, err))
        return -1;
    c->n_devices = n_devices;
    c->gpus_per_node = gpus_per_node;
    for (int i = 0; i < N_PRESETS; i++)
        if (strcmp(preset, s_presets[i].name) == 0) {
            c->intra = *s_presets[i].intra;
            c->inter = *s_presets[i].inter;
        }
    c->compute_share = 1.0;
    return 0;
}

int gpp_cluster_node(const gpp_cluster_t *c, int device)
{
    return device / c->gpus_per_node;
}

const gpp_link_t *gpp_cluster_link(const gpp_cluster_t *c, int dev_a, int dev_b)
{
    return gpp_cluster_node(c, dev_a) == gpp_cluster_node(c, dev_b) ? &c->intra : &c->inter;
}

const gpp_link_t *gpp_cluster_group_link(const gpp_cluster_t *c, int first_device, int devices)
{
    if (devices <= 1)
        return &c->intra;
    return gpp_cluster_link(c, first_device, first_device + devices - 1);
}

double gpp_link_ms(const gpp_link_t *l, double bytes)
{
    return l->alpha_ms + bytes / l->bw_bytes_per_s * 1e3;
}

double gpp_allreduce_ms(const gpp_link_t *l, int d, double bytes)
{
    if (d <= 1)
        return 0.0;
    return 2.0 * (d - 1) / d * bytes / l->bw_bytes_per_s * 1e3 + 2.0 * (d - 1) * l->alpha_ms;
}

double gpp_roofline_ms(const gpp_device_t *dev, double flops, double bytes, int kernels, int gemms)
{
    /* flops / (peak * eff(w)) with eff(w) = eff_max * w / (w + w_half), w = flops per GEMM
       kernel, is (flops + gemms * w_half) / (peak * eff_max): each GEMM pays the fill, every
       kernel the launch. */
    double rate = dev->peak_flops * dev->eff_max; /* FLOP/s */
    double w_half = dev->fill_ms * 1e-3 * rate;
    double t_compute = flops > 0 ? (flops + (gemms > 0 ? gemms : 0) * w_half) / rate * 1e3 : 0.0;
    double t_mem = bytes / dev->mem_bw_bytes_per_s * 1e3;
    return (t_compute > t_mem ? t_compute : t_mem) + kernels * dev->launch_ms;
}
