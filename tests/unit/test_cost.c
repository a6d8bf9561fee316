/* test_cost: device presets, roofline monotonicity, links and the ring
 * all-reduce formula, profile.json parsing (fixture tests/data/
 * profile_small.json), malformed profiles, stage cost and memory. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/gpp_test.h"
#include "agent/exec/gpp_profile.h"
#include "model/gpp_memplan.h"
#include "model/gpp_optable.h"
#include "model/gpp_profile_graph.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_profile_io.h"
#include "tests/gpp_fixtures.h"

/* The total of the memory plan of ops[0..n_ops) (dev NULL: the op table's). */
static int64_t s_plan_total(const gpp_graph_t *g, int n_ops, const int *ops, int optim_bufs,
                            int64_t batch, int64_t n, int inflight, int slots,
                            const gpp_stage_dev_t *dev)
{
    gpp_err_t err = {{0}};
    gpp_memplan_cfg_t pc = {.optim_bufs = optim_bufs,
                            .batch = batch,
                            .n = n,
                            .inflight = inflight,
                            .slots = slots,
                            .dev = dev};
    gpp_memplan_t *plan = gpp_memplan_new(g, n_ops, ops, &pc, &err);
    GPP_EXPECT_MSG(plan != NULL, "%s", err.msg);
    int64_t t = plan ? gpp_memplan_total(plan) : -1;
    gpp_memplan_destroy(&plan);
    return t;
}
static char s_path[1024];

static const char *s_data(const char *name)
{
    const char *src = getenv("GPP_SRC");
    snprintf(s_path, sizeof s_path, "%s/tests/data/%s", src ? src : ".", name);
    return s_path;
}

/* profile.json text through the one reader, attached */
static int s_attach_text(gpp_cost_t *c, const char *text, const char *origin, gpp_err_t *err)
{
    gpp_profile_t *p = gpp_profile_io_parse(text, origin, err);
    int rc = p ? gpp_cost_attach_profile(c, p, err) : -1;
    gpp_profile_destroy(&p);
    return rc;
}

static int s_attach_file(gpp_cost_t *c, const char *path, gpp_err_t *err)
{
    gpp_profile_t *p = gpp_profile_io_read(path, err);
    int rc = p ? gpp_cost_attach_profile(c, p, err) : -1;
    gpp_profile_destroy(&p);
    return rc;
}

/* rows of graph g attached as the coordinator attaches the agents' (their
 * times, or with figures_only their memory figures) */
static int s_attach_rows(gpp_cost_t *c, const gpp_graph_t *g, const gpp_profile_row_t *rows,
                         size_t n, const char *origin, int figures_only, gpp_err_t *err)
{
    gpp_profile_t *p = gpp_profile_of_graph(g, rows, n, origin, err);
    int rc = !p             ? -1
             : figures_only ? gpp_cost_attach_figures(c, p, err)
                            : gpp_cost_attach_profile(c, p, err);
    gpp_profile_destroy(&p);
    return rc;
}

/* the graph of a profile file or text alone (gpp-plan --profile) */
static gpp_graph_t *s_profile_graph(const char *text, const char *path, gpp_err_t *err)
{
    gpp_profile_t *p =
        text ? gpp_profile_io_parse(text, path, err) : gpp_profile_io_read(path, err);
    gpp_graph_t *g = p ? gpp_profile_graph(p, err) : NULL;
    gpp_profile_destroy(&p);
    return g;
}

/* profile.json text as the writer gives it back after reading it */
static char *s_rewrite(const char *text, gpp_err_t *err)
{
    gpp_profile_t *p = gpp_profile_io_parse(text, "rewrite.json", err);
    char *out = p ? gpp_profile_io_text(p) : NULL;
    gpp_profile_destroy(&p);
    return out;
}

/* one measured row: forward f and backward b ms */
static gpp_profile_row_t s_row(int op, int mb, double f, double b)
{
    return (gpp_profile_row_t){.op = op, .micro_batch = mb, .ms = f + b, .has_fwd = 1, .fwd_ms = f};
}

static void t_presets(void)
{
    gpp_device_t d;
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_device_preset("v100-16g", 0, &d, &err) == 0);
    GPP_EXPECT_NEAR(d.peak_flops, 15.7e12, 1);
    GPP_EXPECT_NEAR(d.mem_bw_bytes_per_s, 900e9, 1);
    GPP_EXPECT(d.mem_bytes == 16LL << 30);
    GPP_EXPECT(gpp_device_preset("v100-32g", 1, &d, &err) == 0);
    GPP_EXPECT_NEAR(d.peak_flops, 125e12, 1);
    GPP_EXPECT(d.mem_bytes == 32LL << 30);
    GPP_EXPECT(gpp_device_preset("a100-80g", 1, &d, &err) == 0);
    GPP_EXPECT_NEAR(d.peak_flops, 312e12, 1);
    GPP_EXPECT(gpp_device_preset("h100-80g", 0, &d, &err) == 0);
    GPP_EXPECT_NEAR(d.peak_flops, 67e12, 1);
    GPP_EXPECT_NEAR(d.mem_bw_bytes_per_s, 3350e9, 1);
    GPP_EXPECT(gpp_device_preset("h200-141g", 1, &d, &err) == 0);
    GPP_EXPECT_NEAR(d.peak_flops, 989e12, 1);
    GPP_EXPECT_NEAR(d.mem_bw_bytes_per_s, 4800e9, 1);
    GPP_EXPECT(d.mem_bytes == 141LL << 30);
    GPP_EXPECT(gpp_device_preset("tpu", 0, &d, &err) == -1);
    GPP_EXPECT(strstr(err.msg, "v100-16g") != NULL && strstr(err.msg, "h200-141g") != NULL);
    gpp_cluster_t c;
    /* links per kind, measured figures (gpp_cost_device.c): NVLink4 p2p
       send/recv and NDR per NIC on H100/H200; NVLink3 and HDR on A100 */
    GPP_EXPECT(gpp_cluster_init(&c, "h100-80g", 16, 8, &err) == 0);
    GPP_EXPECT_NEAR(c.intra.bw_bytes_per_s, 180e9, 1);
    GPP_EXPECT_NEAR(c.inter.bw_bytes_per_s, 47e9, 1);
    GPP_EXPECT(gpp_cluster_link(&c, 0, 7) == &c.intra && gpp_cluster_link(&c, 7, 8) == &c.inter);
    GPP_EXPECT(gpp_cluster_init(&c, "h200-141g", 2, 1, &err) == 0);
    GPP_EXPECT_NEAR(c.intra.bw_bytes_per_s, 180e9, 1);
    GPP_EXPECT(gpp_cluster_init(&c, "a100-80g", 2, 1, &err) == 0);
    GPP_EXPECT_NEAR(c.intra.bw_bytes_per_s, 200e9, 1);
    GPP_EXPECT_NEAR(c.inter.bw_bytes_per_s, 24.4e9, 1);
    GPP_EXPECT(gpp_cluster_init(&c, "v100-16g", 8, 4, &err) == 0);
    GPP_EXPECT(gpp_cluster_mem_bound(&c) == (16LL << 30) - GPP_CONTEXT_BYTES);
    c.mem_bound_bytes = 1 << 30;
    GPP_EXPECT(gpp_cluster_mem_bound(&c) == 1 << 30);
    GPP_EXPECT(gpp_cluster_init(&c, "v100-16g", 0, 4, &err) == -1);
}

static void t_roofline_monotone(void)
{
    gpp_device_t d;
    gpp_device_preset("v100-16g", 0, &d, NULL);
    double prev = 0;
    for (double f = 1e6; f < 1e13; f *= 3) {
        double t = gpp_roofline_ms(&d, f, 1e6, 1, 1);
        GPP_EXPECT(t >= prev);
        prev = t;
        /* efficiency grows with work: time per flop falls, never below peak */
        GPP_EXPECT(t * 1e-3 >= f / (d.peak_flops * d.eff_max));
    }
    prev = 0;
    for (double b = 1e3; b < 1e11; b *= 3) {
        double t = gpp_roofline_ms(&d, 1e9, b, 1, 1);
        GPP_EXPECT(t >= prev);
        prev = t;
    }
    /* memory-bound: bytes / bw plus launch */
    GPP_EXPECT_NEAR(gpp_roofline_ms(&d, 1.0, 9e9, 1, 1), 10.0 + d.launch_ms, 1e-6);
    /* half efficiency at w_half: time = 2 * w / (peak * eff_max) + launch */
    double w_half = d.fill_ms * 1e-3 * d.peak_flops * d.eff_max;
    GPP_EXPECT_NEAR(gpp_roofline_ms(&d, w_half, 0, 1, 1),
                    2 * w_half / (d.peak_flops * d.eff_max) * 1e3 + d.launch_ms, 1e-9);
    /* the fill is charged per GEMM only: an element-wise-only group has no fill term,
       compute-bound it is flops / (peak * eff_max) + launches */
    GPP_EXPECT_NEAR(gpp_roofline_ms(&d, 1e9, 0, 3, 0),
                    1e9 / (d.peak_flops * d.eff_max) * 1e3 + 3 * d.launch_ms, 1e-12);
    GPP_EXPECT_NEAR(gpp_roofline_ms(&d, 1e9, 0, 3, 2) - gpp_roofline_ms(&d, 1e9, 0, 3, 0),
                    2 * d.fill_ms, 1e-12);
    /* no FLOPs: no compute term, GEMMs or not */
    GPP_EXPECT_NEAR(gpp_roofline_ms(&d, 0, 9e6, 2, 2), 0.01 + 2 * d.launch_ms, 1e-12);

    /* per-op: time grows with samples, time per sample falls */
    gpp_err_t err = {{0}};
    gpp_graph_t *g =
        gpp_zoo_build("mmt:branches=1,layers=1,hidden=256,heads=4,seq=64,ffn=512", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "v100-16g", 1, 1, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    int bad = 0;
    for (int op = 0; op < g->n_ops; op++) {
        double pt = 0, pps = 1e300;
        for (int m = 1; m <= 256; m *= 2) {
            double t = gpp_cost_op_fwd_ms(cost, op, m) + gpp_cost_op_bwd_ms(cost, op, m);
            bad += t < pt - 1e-12 || t / m > pps + 1e-12;
            pt = t, pps = t / m;
        }
        if (g->ops[op].type == GPP_OP_LINEAR || g->ops[op].type == GPP_OP_ATTENTION)
            GPP_EXPECT(gpp_cost_op_bwd_ms(cost, op, 8) > gpp_cost_op_fwd_ms(cost, op, 8));
    }
    GPP_EXPECT_MSG(bad == 0, "%d non-monotone op times", bad);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* Which kernels pay the fill: the GEMMs of each op type, forward and backward
 * (kernels/cpu: linear is one sgemm forward, dx and dW backward; attention
 * four of its five forward kernels, softmax being the fifth). */
static void t_gemm_split(void)
{
    static const struct {
        gpp_op_type_t t;
        int kernels, fwd_gemms, bwd_gemms;
    } want[] = {
        {GPP_OP_INPUT, 0, 0, 0},
        {GPP_OP_LINEAR, 1, 1, 2},
        {GPP_OP_RELU, 1, 0, 0},
        {GPP_OP_GELU, 1, 0, 0},
        {GPP_OP_LAYERNORM, 1, 0, 0},
        {GPP_OP_ATTENTION, 5, 4, 8},
        {GPP_OP_EMBEDDING_BAG, 1, 0, 0},
        {GPP_OP_CONCAT, 1, 0, 0},
        {GPP_OP_ADD, 1, 0, 0},
        {GPP_OP_LOSS_MSE, 2, 0, 0},
        {GPP_OP_LOSS_CE, 2, 0, 0},
        {GPP_OP_SLICE, 1, 0, 0},
        {GPP_OP_RESHAPE, 1, 0, 0},
        {GPP_OP_OPAQUE, 1, 1, 2},
        /* the PyTorch modules' types (kernels/cpu/gpp_cpu_ext.c, gpp_cpu_xattn.c) */
        {GPP_OP_EMBEDDING, 1, 0, 0},
        {GPP_OP_PARAM_ADD, 1, 0, 0},
        {GPP_OP_REDUCE, 1, 0, 0},
        {GPP_OP_SIGMOID, 1, 0, 0},
        {GPP_OP_TANH, 1, 0, 0},
        {GPP_OP_DROPOUT, 1, 0, 0},
        {GPP_OP_MATMUL, 1, 1, 2},
        {GPP_OP_TRANSPOSE, 1, 0, 0},
        {GPP_OP_STACK, 1, 0, 0},
        {GPP_OP_TRIU, 1, 0, 0},
        {GPP_OP_PATCH_EMBED, 2, 1, 2},
        {GPP_OP_CROSS_ATTENTION, 6, 5, 10},
        {GPP_OP_LOSS_BCE, 2, 0, 0},
    };
    int n = (int)(sizeof want / sizeof want[0]);
    GPP_EXPECT(n == GPP_OP__COUNT);
    for (int i = 0; i < n; i++) {
        const gpp_op_info_t *T = &gpp_optable[want[i].t];
        GPP_EXPECT_MSG(T->fwd_kernels == want[i].kernels && T->fwd_gemms == want[i].fwd_gemms &&
                           T->bwd_gemms == want[i].bwd_gemms,
                       "%s: %d kernels, %d/%d GEMMs", T->name, T->fwd_kernels, T->fwd_gemms,
                       T->bwd_gemms);
        GPP_EXPECT(T->fwd_gemms <= T->fwd_kernels && T->bwd_gemms <= 2 * T->fwd_kernels);
    }

    /* per op on the device curve: GEMM ops pay kernels' launches and GEMMs' fill;
       element-wise ops (layer norm, GELU, add, loss) the launches only */
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=1,layers=1,hidden=64,heads=4,seq=8,ffn=128", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "v100-16g", 1, 1, &err);
    const gpp_device_t *d = &c.device;
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    int seen[GPP_OP__COUNT] = {0};
    for (int op = 0; op < g->n_ops; op++) {
        const gpp_op_t *o = &g->ops[op];
        int k = 0, gf = 0, gb = 0;
        for (int i = 0; i < n; i++)
            if (want[i].t == o->type)
                k = want[i].kernels, gf = want[i].fwd_gemms, gb = want[i].bwd_gemms;
        if (o->type == GPP_OP_INPUT)
            continue;
        seen[o->type] = 1;
        double bytes = (double)o->io_bytes * 2 + (double)o->weight_io_bytes;
        double f = o->fwd_flops * 2 / (d->peak_flops * d->eff_max) * 1e3 + gf * d->fill_ms;
        double b = o->bwd_flops * 2 / (d->peak_flops * d->eff_max) * 1e3 + gb * d->fill_ms;
        double fm = bytes / 3.0 / d->mem_bw_bytes_per_s * 1e3;
        double bm = 2.0 * bytes / 3.0 / d->mem_bw_bytes_per_s * 1e3;
        GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, op, 2), (f > fm ? f : fm) + k * d->launch_ms,
                        1e-12);
        GPP_EXPECT_NEAR(gpp_cost_op_bwd_ms(cost, op, 2), (b > bm ? b : bm) + 2 * k * d->launch_ms,
                        1e-12);
        if (!gf) /* under a launch plus the fill: no fill term */
            GPP_EXPECT(gpp_cost_op_fwd_ms(cost, op, 2) < k * d->launch_ms + d->fill_ms);
    }
    GPP_EXPECT(seen[GPP_OP_LINEAR] && seen[GPP_OP_ATTENTION] && seen[GPP_OP_LAYERNORM] &&
               seen[GPP_OP_GELU] && seen[GPP_OP_ADD]);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static void t_links_allreduce(void)
{
    gpp_err_t err = {{0}};
    gpp_cluster_t c;
    gpp_cluster_init(&c, "v100-16g", 16, 4, &err);
    GPP_EXPECT_NEAR(c.intra.bw_bytes_per_s, 50e9, 1);   /* NVLink2 (Summit) */
    GPP_EXPECT_NEAR(c.inter.bw_bytes_per_s, 12.2e9, 1); /* EDR, measured */
    GPP_EXPECT(gpp_cluster_node(&c, 5) == 1);
    GPP_EXPECT(gpp_cluster_link(&c, 4, 7) == &c.intra);
    GPP_EXPECT(gpp_cluster_link(&c, 3, 4) == &c.inter);
    GPP_EXPECT(gpp_cluster_group_link(&c, 4, 4) == &c.intra);
    GPP_EXPECT(gpp_cluster_group_link(&c, 2, 4) == &c.inter);
    GPP_EXPECT_NEAR(gpp_link_ms(&c.intra, 50e6), 1.0 + c.intra.alpha_ms, 1e-12);
    double bytes = 1e9;
    GPP_EXPECT(gpp_allreduce_ms(&c.inter, 1, bytes) == 0.0);
    for (int d = 2; d <= 16; d++) {
        double want = 2.0 * (d - 1) / d * bytes / c.inter.bw_bytes_per_s * 1e3 +
                      2.0 * (d - 1) * c.inter.alpha_ms;
        GPP_EXPECT_NEAR(gpp_allreduce_ms(&c.inter, d, bytes), want, 1e-9);
        GPP_EXPECT(gpp_allreduce_ms(&c.inter, d, bytes) > gpp_allreduce_ms(&c.inter, d - 1, bytes));
    }
    gpp_graph_t *g = gpp_zoo_build("candle_uno:branches=2,layers=1,hidden=64,in=64", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    const gpp_cluster_t *cc = gpp_cost_cluster(cost); /* the model keeps a copy */
    GPP_EXPECT(gpp_cost_group_link(cost, 4) == &cc->intra);
    GPP_EXPECT(gpp_cost_group_link(cost, 5) == &cc->inter);
    GPP_EXPECT(gpp_cost_p2p_link(cost) == &cc->inter);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static void t_profile_graph(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = s_profile_graph(NULL, s_data("profile_small.json"), &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    GPP_EXPECT(g->n_ops == 5);
    const char *order[] = {"in", "fc_a", "fc_b", "cat", "loss"};
    for (int i = 0; i < 5; i++)
        GPP_EXPECT(strcmp(g->ops[i].name, order[i]) == 0 && g->ops[i].type == GPP_OP_OPAQUE);
    GPP_EXPECT(g->ops[1].params == 4194304 / 4);
    GPP_EXPECT(g->ops[0].out_bytes == 4096); /* fc_a and fc_b read 4096 */
    GPP_EXPECT(g->ops[1].out_bytes == 4096); /* cat reads 4096 from fc_a */
    GPP_EXPECT(g->ops[2].out_bytes == 2048); /* and 2048 from fc_b */
    GPP_EXPECT(g->ops[3].out_bytes == 6144);
    GPP_EXPECT(g->ops[3].stash_bytes == 6144); /* its output, once */
    GPP_EXPECT(g->ops[3].n_inputs == 2 && g->ops[3].inputs[0] == 1 && g->ops[3].inputs[1] == 2);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "v100-16g", 2, 2, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    GPP_EXPECT_MSG(s_attach_file(cost, s_data("profile_small.json"), &err) == 0, "%s", err.msg);
    /* fc_a: {1: 0.3, 2: 0.4, 8: 1.0} ms fwd+bwd, split 1:2 */
    GPP_EXPECT(gpp_cost_op_profiled(cost, 1));
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 1, 1), 0.1, 1e-12);
    GPP_EXPECT_NEAR(gpp_cost_op_bwd_ms(cost, 1, 1), 0.2, 1e-12);
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 1, 4) * 3, 0.6, 1e-12); /* linear 2..8 */
    /* beyond 8: the measured 1.0 ms along the v100-16g roofline of the op */
    gpp_cost_t *roof = gpp_cost_new(g, &c);
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 1, 16) * 3,
                    1.0 * gpp_cost_op_fwd_ms(roof, 1, 16) / gpp_cost_op_fwd_ms(roof, 1, 8), 1e-12);
    gpp_cost_destroy(&roof);
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 0, 2) * 3, 0.04, 1e-12); /* in: 1..4 */
    GPP_EXPECT(gpp_cost_op_reserved_bytes(cost, 2) == 1048576);
    gpp_stage_cost_t sc;
    int ops[] = {1, 2};
    gpp_cost_stage(cost, 2, ops, 1, 2, 8, &sc);
    GPP_EXPECT_NEAR(sc.fwd_ms + sc.bwd_ms, 0.8, 1e-12);
    /* each figure as the allocator rounds it at most (gpp_cost_mem_bound; a
       CPU cluster: one 64-byte floor per block): weights, gradients and two
       AdamW buffers of the two ops */
    const int64_t fl = gpp_alloc_floor(GPP_ALLOC_ALIGN64);
    GPP_EXPECT(sc.weight_bytes == GPP_BYTES_PER_PARAM * 2 * (4194304 / 4) + 2 * 4 * fl);
    GPP_EXPECT(sc.reserved_bytes == 1048576);
    /* the ops' outputs once (4096 + 2048) + the boundary tensors and their
       gradients (in 4096 received; fc_a 4096 and fc_b 2048 sent): 3 blocks
       kept per op, 7 of a running micro-batch, two per boundary tensor */
    GPP_EXPECT(sc.stash_bytes == 4096 + 2048 + 2 * 10240 + 2 * 3 * fl + 2 * 3 * fl);
    GPP_EXPECT(sc.work_bytes == 4096 + 2048 + 2 * 10240 + 2 * 7 * fl + 2 * 3 * fl);
    GPP_EXPECT(gpp_cost_stage_mem_bound(&sc, 4, 2, 1) ==
               sc.weight_bytes + sc.reserved_bytes + 2 * 2 * sc.stash_bytes + 2 * sc.work_bytes);
    /* boundary: in (4096) received, fc_a (4096) and fc_b (2048) sent */
    const gpp_link_t *l = gpp_cost_p2p_link(cost);
    GPP_EXPECT_NEAR(
        sc.comm_ms,
        2.0 * 3 * l->alpha_ms + 2.0 * 2 * (4096 + 4096 + 2048) / l->bw_bytes_per_s * 1e3, 1e-12);
    /* AdamW step: 28 bytes and 12 FLOPs per gradient element; the kernels
       the executor launches: update + zero fill of the flat dense buffer
       (2, however many ops hold parameters), 2 per embedding table */
    GPP_EXPECT(gpp_cost_step_kernels(0, 0) == 0 && gpp_cost_step_kernels(1, 0) == 2 &&
               gpp_cost_step_kernels(40, 0) == 2 && gpp_cost_step_kernels(3, 3) == 6 &&
               gpp_cost_step_kernels(5, 3) == 8);
    GPP_EXPECT_NEAR(sc.step_ms,
                    gpp_roofline_ms(&c.device, 12.0 * 2 * (4194304 / 4), 7.0 * 2 * 4194304, 2, 0),
                    1e-12);
    GPP_EXPECT_NEAR(sc.tps_ms, (sc.fwd_ms + sc.bwd_ms + sc.comm_ms) / 2 + sc.step_ms / 8, 1e-12);
    gpp_cost_stage(cost, 2, ops, 2, 2, 8, &sc);
    GPP_EXPECT_NEAR(sc.allreduce_ms, gpp_allreduce_ms(&c.intra, 2, 2.0 * 4194304), 1e-12);
    GPP_EXPECT(gpp_cost_act_bytes(1000, 6, 2, 2) == 1000 * 3 * 1);
    GPP_EXPECT(gpp_cost_act_bytes(1000, 5, 4, 3) == 1000 * 2 * 2);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static void t_malformed(void)
{
    struct {
        const char *text, *expect;
    } bad[] = {
        {"[1, 2]", "object keyed by op id"},
        {"{\"a\": {}}", "not a non-negative integer"},
        {"{\"0\": {\"inputs\": []}}", "'name'"},
        {"{\"0\": {\"name\": \"x\", \"weight_size\": 0}}", "'runtime'"},
        {"{\"0\": {\"name\": \"x\", \"weight_size\": 0, \"runtime\": {\"0\": 1}}}", "runtime key"},
        {"{\"0\": {\"name\": \"x\", \"weight_size\": 0, \"runtime\": {\"1\": -1}}}",
         "runtime[\"1\"]"},
        {"{\"0\": {\"name\": \"x\", \"runtime\": {\"1\": 1}}}", "'weight_size' missing"},
        {"{\"0\": {\"name\": \"x\", \"weight_size\": -4, \"runtime\": {\"1\": 1}}}",
         "'weight_size'"},
        {"{\"0\": {\"name\": \"x\", \"inputs\": [7], \"input_size\": [4], \"weight_size\": 0, "
         "\"runtime\": {\"1\": 1}}}",
         "inputs[0]"},
        {"{\"0\": {\"name\": \"x\", \"weight_size\": 0, \"runtime\": {\"1\": 1}}, \"1\": "
         "{\"name\": "
         "\"y\", \"inputs\": [0], \"input_size\": [4, 4], \"weight_size\": 0, \"runtime\": "
         "{\"1\": 1}}}",
         "'input_size'"},
        {"{\"0\": {\"name\": \"x\", \"inputs\": [1], \"input_size\": [4], \"weight_size\": 0, "
         "\"runtime\": {\"1\": 1}}, \"1\": {\"name\": \"y\", \"inputs\": [0], \"input_size\": [4], "
         "\"weight_size\": 0, \"runtime\": {\"1\": 1}}}",
         "cycle"},
        {"{\"0\": {\"name\": \"x\", \"weight_size\": 0, \"runtime\": {\"1\": 1}, \"reserved_mem\": "
         "\"lots\"}}",
         "'reserved_mem'"},
        {"{\"0\": {\"name\": ", "bad.json"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpp_err_t err = {{0}};
        gpp_graph_t *g = s_profile_graph(bad[i].text, "bad.json", &err);
        GPP_EXPECT_MSG(g == NULL, "case %zu parsed", i);
        GPP_EXPECT_MSG(strstr(err.msg, bad[i].expect) && strstr(err.msg, "bad.json"),
                       "case %zu: '%s' lacks '%s'", i, err.msg, bad[i].expect);
        gpp_graph_destroy(&g);
    }
    /* attaching a profile of another model names the op */
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("candle_uno:branches=2,layers=1,hidden=64,in=64", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "v100-16g", 2, 2, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    GPP_EXPECT(s_attach_file(cost, s_data("profile_small.json"), &err) == -1);
    GPP_EXPECT(strstr(err.msg, "op 0") && strstr(err.msg, "'in'"));
    GPP_EXPECT(s_attach_file(cost, s_data("no_such_profile.json"), &err) == -1);
    /* a good partial profile of this model attaches; others keep the roofline */
    char text[512];
    snprintf(text, sizeof text,
             "{\"3\": {\"name\": \"%s\", \"weight_size\": 0, \"runtime\": {\"4\": 2.0}}}",
             g->ops[3].name);
    GPP_EXPECT_MSG(s_attach_text(cost, text, "ok.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_op_profiled(cost, 3) && !gpp_cost_op_profiled(cost, 2));
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 3, 2) * 3, 1.0, 1e-12); /* rate below 4 */
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static void t_sparse_grad(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("dlrm:dense_branches=1,sparse_branches=1", &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "v100-16g", 2, 2, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].type == GPP_OP_EMBEDDING_BAG) {
            double table = 4.0 * g->ops[i].params;
            GPP_EXPECT_NEAR(gpp_cost_op_grad_bytes(cost, i, 64), 64.0 * 100 * 64 * 4, 1e-6);
            GPP_EXPECT_NEAR(gpp_cost_op_grad_bytes(cost, i, 1 << 20), table, 1e-6);
        } else {
            GPP_EXPECT_NEAR(gpp_cost_op_grad_bytes(cost, i, 64), 4.0 * g->ops[i].params, 1e-6);
        }
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* CPU agent slots: the "cpu" preset with loopback links, and agents sharing
 * fewer cores (compute_share) slow every compute time, roofline or profiled,
 * but not communication. */
static void t_cpu_share(void)
{
    gpp_err_t err = {{0}};
    gpp_cluster_t whole, half;
    GPP_EXPECT(gpp_cluster_init(&whole, "cpu", 4, 4, &err) == 0);
    GPP_EXPECT(whole.compute_share == 1.0 && whole.intra.bw_bytes_per_s < 50e9);
    half = whole;
    half.compute_share = 0.5;
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=2,layers=1,hidden=64,heads=4,seq=16", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    gpp_cost_t *a = gpp_cost_new(g, &whole), *b = gpp_cost_new(g, &half);
    for (int op = 0; op < g->n_ops; op++) {
        double fa = gpp_cost_op_fwd_ms(a, op, 8), fb = gpp_cost_op_fwd_ms(b, op, 8);
        double ba = gpp_cost_op_bwd_ms(a, op, 8), bb = gpp_cost_op_bwd_ms(b, op, 8);
        /* launch overhead is per call, not shared: between 1x and 2x, 2x for big ops */
        GPP_EXPECT(fb >= fa && fb <= 2 * fa + 1e-12 && bb >= ba && bb <= 2 * ba + 1e-12);
    }
    gpp_cost_destroy(&a); /* before the graph it borrows */
    gpp_cost_destroy(&b);
    gpp_graph_destroy(&g);

    g = s_profile_graph(NULL, s_data("profile_small.json"), &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    a = gpp_cost_new(g, &whole), b = gpp_cost_new(g, &half);
    GPP_EXPECT(s_attach_file(a, s_data("profile_small.json"), &err) == 0);
    GPP_EXPECT(s_attach_file(b, s_data("profile_small.json"), &err) == 0);
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(b, 1, 1), 2 * gpp_cost_op_fwd_ms(a, 1, 1), 1e-12);
    GPP_EXPECT_NEAR(gpp_cost_op_bwd_ms(b, 1, 8), 2 * gpp_cost_op_bwd_ms(a, 1, 8), 1e-12);
    gpp_cost_destroy(&a);
    gpp_cost_destroy(&b);
    gpp_graph_destroy(&g);
}

/* The optional "forward" table: the measured split replaces the 1:2
 * assumption; it must match runtime's sizes and stay within runtime. */
static void t_profile_forward(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_new("fw");
    int x = gpp_graph_input(g, "x", 1, 8);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", gpp_graph_linear(g, "fc", x, 8, 1));
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "cpu", 1, 1, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    const char *ok = "{\"1\":{\"name\":\"fc\",\"inputs\":[0],\"input_size\":[32],"
                     "\"weight_size\":288,\"runtime\":{\"1\":1.0,\"4\":2.0},"
                     "\"forward\":{\"1\":0.4,\"4\":0.5}}}";
    GPP_EXPECT_MSG(s_attach_text(cost, ok, "fw.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 1, 1), 0.4, 1e-12);
    GPP_EXPECT_NEAR(gpp_cost_op_bwd_ms(cost, 1, 1), 0.6, 1e-12);
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 1, 2), 0.4 + 0.1 / 3, 1e-12); /* linear 1..4 */
    gpp_cost_t *roof = gpp_cost_new(g, &c); /* beyond 4: along the cpu curve */
    GPP_EXPECT_NEAR(gpp_cost_op_bwd_ms(cost, 1, 8),
                    1.5 * gpp_cost_op_bwd_ms(roof, 1, 8) / gpp_cost_op_bwd_ms(roof, 1, 4), 1e-12);
    gpp_cost_destroy(&roof);
    const char *bad[][2] = {
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1.0},\"forward\":{\"1\":1.5}}}", "between 0"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1.0},\"forward\":{\"2\":0.5}}}",
         "forward[\"1\"]"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1.0},\"forward\":{\"1\":0.5,"
         "\"2\":0.5}}}",
         "exactly"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1.0},\"forward\":[0.5]}}", "object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        GPP_EXPECT_MSG(s_attach_text(cost, bad[i][0], "fw.json", &err) == -1 &&
                           strstr(err.msg, bad[i][1]) && strstr(err.msg, "fw.json"),
                       "case %zu: %s", i, err.msg);
    }
    /* a rejected file leaves the attached profile as it was */
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(cost, 1, 1), 0.4, 1e-12);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* reserved_mem in both of the authors' forms: a number (the same at every
 * micro-batch size) and an object keyed by micro-batch size (interpolated
 * as runtimes are); bad keys and values name the file, op and key. */
static void t_reserved_forms(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_new("rm");
    int x = gpp_graph_input(g, "x", 1, 8);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", gpp_graph_linear(g, "fc", x, 8, 1));
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "cpu", 2, 2, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    const char *num = "{\"1\":{\"name\":\"fc\",\"weight_size\":288,\"runtime\":{\"1\":1.0},"
                      "\"reserved_mem\":1000}}";
    GPP_EXPECT_MSG(s_attach_text(cost, num, "rm.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_op_reserved_at(cost, 1, 1) == 1000);
    GPP_EXPECT(gpp_cost_op_reserved_at(cost, 1, 64) == 1000);
    GPP_EXPECT(gpp_cost_op_reserved_bytes(cost, 1) == 1000);
    const char *obj = "{\"1\":{\"name\":\"fc\",\"weight_size\":288,\"runtime\":{\"1\":1.0},"
                      "\"reserved_mem\":{\"4\":1000,\"2\":600}}}";
    GPP_EXPECT_MSG(s_attach_text(cost, obj, "rm.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_op_reserved_at(cost, 1, 2) == 600);
    GPP_EXPECT(gpp_cost_op_reserved_at(cost, 1, 3) == 800);  /* linear 2..4 */
    GPP_EXPECT(gpp_cost_op_reserved_at(cost, 1, 1) == 300);  /* rate of 2 below it */
    GPP_EXPECT(gpp_cost_op_reserved_at(cost, 1, 8) == 2000); /* rate of 4 beyond it */
    GPP_EXPECT(gpp_cost_op_reserved_bytes(cost, 1) == 1000); /* at the largest size */
    /* a stage costs the reserve at its per-replica micro-batch ceil(b/d) */
    gpp_stage_cost_t sc;
    int ops[] = {1};
    gpp_cost_stage(cost, 1, ops, 2, 6, 12, &sc);
    GPP_EXPECT(sc.reserved_bytes == 800);
    gpp_cost_stage(cost, 1, ops, 1, 4, 12, &sc);
    GPP_EXPECT(sc.reserved_bytes == 1000);
    /* and so does the stage's peak memory (the executor's model + reserve) */
    GPP_EXPECT(gpp_cost_stage_mem(cost, 1, ops, 2, 6, 2, 12) ==
               s_plan_total(g, 1, ops, GPP_OPTIM_BUFS_ADAMW, 12, 3, 2, 2, NULL) + 800);
    const char *bad[][2] = {
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":{\"0\":5}}}",
         "reserved_mem key '0'"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":{\"two\":5}}}",
         "reserved_mem key 'two'"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":{\"2\":-5}}}",
         "reserved_mem[\"2\"]"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":{\"2\":\"x\"}}}",
         "reserved_mem[\"2\"]"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":{\"2\":1,"
         "\"02\":1}}}",
         "micro-batch 2 twice"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":{}}}", "empty"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":-1}}", "'reserved_mem'"},
        {"{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":1},\"reserved_mem\":[1]}}", "'reserved_mem'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        GPP_EXPECT_MSG(s_attach_text(cost, bad[i][0], "rm.json", &err) == -1 &&
                           strstr(err.msg, bad[i][1]) && strstr(err.msg, "rm.json") &&
                           strstr(err.msg, "op 1"),
                       "case %zu: %s", i, err.msg);
    }
    /* a rejected file leaves the attached reserve as it was */
    GPP_EXPECT(gpp_cost_op_reserved_at(cost, 1, 3) == 800);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* A profile through the one writer reads back to the same costs exactly
 * (times to 17 digits), with its "_gpp" record (bf16_tensors included);
 * the agents' rows written as the coordinator keeps them carry the graph's
 * names, inputs and weight bytes; a cost model cloned for other device
 * memory holds the same measurements. */
static void t_profile_keep(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_new("keep");
    int x = gpp_graph_input(g, "x", 1, 8);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", gpp_graph_linear(g, "fc", x, 8, 1));
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "cpu", 1, 1, &err);
    gpp_cost_t *a = gpp_cost_new(g, &c), *b = gpp_cost_new(g, &c);
    const char *text = "{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":0.10000000000000002,\"3\":0.7},"
                       "\"forward\":{\"1\":0.03,\"3\":0.2},\"reserved_mem\":{\"2\":77}},"
                       "\"2\":{\"name\":\"loss\",\"runtime\":{\"2\":0.123456789012345678},"
                       "\"reserved_mem\":5}}";
    gpp_profile_t *p = gpp_profile_io_parse(text, "keep.json", &err);
    GPP_EXPECT_MSG(p && gpp_cost_attach_profile(a, p, &err) == 0, "%s", err.msg);
    if (!p)
        return;
    GPP_EXPECT(!p->meta.present); /* an authors' file has no record */
    p->meta = (gpp_profile_meta_t){.present = 1,
                                   .model = "keep-model",
                                   .device = "cpu",
                                   .n_ops = 3,
                                   .has_bf16_tensors = 1,
                                   .bf16_tensors = 1};
    char *kept = gpp_profile_io_text(p);
    GPP_EXPECT(strstr(kept, "\"_gpp\"") && strstr(kept, "\"reserved_mem\""));
    GPP_EXPECT_MSG(s_attach_text(b, kept, "kept.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT(!gpp_cost_op_profiled(b, 0) && gpp_cost_op_profiled(b, 1) &&
               gpp_cost_op_profiled(b, 2));
    gpp_cluster_t more = c;
    more.device.mem_bytes *= 2;
    gpp_cost_t *clone = gpp_cost_clone(a, &more);
    GPP_EXPECT(gpp_cost_cluster(clone)->device.mem_bytes == 2 * c.device.mem_bytes);
    for (int op = 0; op < 3; op++)
        for (int m = 1; m <= 8; m++) {
            GPP_EXPECT(gpp_cost_op_fwd_ms(a, op, m) == gpp_cost_op_fwd_ms(b, op, m));
            GPP_EXPECT(gpp_cost_op_bwd_ms(a, op, m) == gpp_cost_op_bwd_ms(b, op, m));
            GPP_EXPECT(gpp_cost_op_reserved_at(a, op, m) == gpp_cost_op_reserved_at(b, op, m));
            GPP_EXPECT(gpp_cost_op_fwd_ms(a, op, m) == gpp_cost_op_fwd_ms(clone, op, m));
            GPP_EXPECT(gpp_cost_op_bwd_ms(a, op, m) == gpp_cost_op_bwd_ms(clone, op, m));
            GPP_EXPECT(gpp_cost_op_reserved_at(a, op, m) == gpp_cost_op_reserved_at(clone, op, m));
        }
    char note[512], note2[512];
    GPP_EXPECT(gpp_cost_profile_note(a, 8, note, sizeof note) == 1 &&
               gpp_cost_profile_note(clone, 8, note2, sizeof note2) == 1 &&
               strcmp(note, note2) == 0 && strstr(note, "keep.json"));
    gpp_cost_destroy(&clone);
    char path[] = "/tmp/gpp_test_keep_XXXXXX";
    int fd = mkstemp(path);
    GPP_EXPECT(fd >= 0);
    if (fd >= 0) {
        close(fd);
        GPP_EXPECT_MSG(gpp_profile_io_write(p, path, &err) == 0, "%s", err.msg);
        gpp_profile_t *back = gpp_profile_io_read(path, &err);
        GPP_EXPECT_MSG(back != NULL, "%s", err.msg);
        if (back) {
            const gpp_profile_meta_t *m = &back->meta;
            GPP_EXPECT(m->present && strcmp(m->model, "keep-model") == 0 &&
                       strcmp(m->device, "cpu") == 0 && m->n_ops == 3);
            GPP_EXPECT(!m->has_precision); /* none recorded */
            GPP_EXPECT(m->has_bf16_tensors && m->bf16_tensors);
            GPP_EXPECT(back->n_rows == p->n_rows && back->n_ops == p->n_ops);
        }
        gpp_profile_destroy(&back);
        unlink(path);
    }
    free(kept);
    gpp_profile_destroy(&p);
    /* the agents' rows as the coordinator keeps them: the graph's facts */
    gpp_profile_row_t rows[2] = {s_row(1, 1, 0.25, 0.5), s_row(1, 2, 0.5, 1)};
    p = gpp_profile_of_graph(g, rows, 2, "the agents' profile", &err);
    GPP_EXPECT_MSG(p != NULL, "%s", err.msg);
    if (p) {
        kept = gpp_profile_io_text(p);
        char want[64];
        snprintf(want, sizeof want, "\"weight_size\":\t%lld", (long long)g->ops[1].params * 4);
        GPP_EXPECT_MSG(strstr(kept, "\"fc\"") && strstr(kept, want) &&
                           strstr(kept, "\"input_size\":\t[32]") && !strstr(kept, "_gpp"),
                       "%s", kept);
        free(kept);
    }
    gpp_profile_destroy(&p);
    gpp_cost_destroy(&a);
    gpp_cost_destroy(&b);
    gpp_graph_destroy(&g);
}

/* gpp-train's record of where a profile was measured (device name,
 * precision) is read, reported and kept; files without it load as before;
 * a malformed record is refused naming file and field, the model unchanged. */
static void t_profile_source(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_new("src");
    int x = gpp_graph_input(g, "x", 1, 8);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", gpp_graph_linear(g, "fc", x, 8, 1));
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "h100-80g", 1, 1, &err);
    gpp_cost_t *a = gpp_cost_new(g, &c);
    char line[256];
    const char *old = "{\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":0.5}}}";
    GPP_EXPECT_MSG(s_attach_text(a, old, "old.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_profile_source(a, line, sizeof line) == 0);
    const char *gpu = "{\"_gpp\":{\"model\":\"m\",\"device\":\"NVIDIA H100 80GB HBM3\","
                      "\"ops\":3,\"backend\":\"cuda:0\",\"precision\":\"bf16\"},"
                      "\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":0.25}}}";
    GPP_EXPECT_MSG(s_attach_text(a, gpu, "gpu.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(a, 1, 1) + gpp_cost_op_bwd_ms(a, 1, 1), 0.25, 1e-12);
    GPP_EXPECT(gpp_cost_profile_source(a, line, sizeof line) == 1);
    GPP_EXPECT_MSG(strstr(line, "gpu.json") && strstr(line, "NVIDIA H100 80GB HBM3") &&
                       strstr(line, "bf16"),
                   "%s", line);
    char *kept = s_rewrite(gpu, &err);
    GPP_EXPECT(kept && strstr(kept, "\"precision\":\t\"bf16\"") &&
               strstr(kept, "NVIDIA H100 80GB HBM3") && strstr(kept, "\"backend\":\t\"cuda:0\""));
    free(kept);
    static const char *const bad[][2] = {
        {"{\"_gpp\":{\"precision\":\"fp16\"},\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":9}}}",
         "_gpp.precision"},
        {"{\"_gpp\":{\"device\":7},\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":9}}}", "_gpp.device"},
        {"{\"_gpp\":[1],\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":9}}}", "'_gpp'"},
        {"{\"_gpp\":{\"bf16_tensors\":1},\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":9}}}",
         "_gpp.bf16_tensors"},
        {"{\"_gpp\":{\"ops\":-1},\"1\":{\"name\":\"fc\",\"runtime\":{\"1\":9}}}", "_gpp.ops"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        GPP_EXPECT_MSG(s_attach_text(a, bad[i][0], "bad.json", &err) == -1 &&
                           strstr(err.msg, bad[i][1]) && strstr(err.msg, "bad.json"),
                       "case %zu: %s", i, err.msg);
    }
    /* refused files change nothing */
    GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(a, 1, 1) + gpp_cost_op_bwd_ms(a, 1, 1), 0.25, 1e-12);
    GPP_EXPECT(gpp_cost_profile_source(a, line, sizeof line) == 1 && strstr(line, "gpu.json"));
    gpp_cost_destroy(&a);
    gpp_graph_destroy(&g);
}

/* The agents' rows in memory and the same figures as profile.json text
 * give the same op times, and the rows go through the same checks. */
static void t_profile_rows(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=2,layers=1,hidden=64,heads=4,seq=16", &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    if (!g)
        return;
    gpp_cluster_t c;
    gpp_cluster_init(&c, "cpu", 2, 2, &err);
    c.compute_share = 0.5;
    gpp_cost_t *json = gpp_cost_new(g, &c), *mem = gpp_cost_new(g, &c);
    /* every other op at micro-batch 4, 1, 2 (out of order), odd figures */
    gpp_profile_row_t rows[3 * 64];
    size_t n = 0;
    char *text = calloc(1, 1 << 16);
    size_t off = (size_t)snprintf(text, 1 << 16, "{");
    for (int op = 0; op < g->n_ops && op < 128; op += 2) {
        const int mbs[3] = {4, 1, 2};
        off += (size_t)snprintf(text + off, (1 << 16) - off, "%s\"%d\":{\"name\":\"%s\",",
                                op ? "," : "", op, g->ops[op].name);
        char rt[256] = "", fw[256] = "";
        size_t ro = 0, fo = 0;
        for (int k = 0; k < 3; k++) {
            gpp_profile_row_t r =
                s_row(op, mbs[k], 0.1 * (op + 1) * mbs[k] / 3.0, 0.7 * (op + 2) * mbs[k] / 7.0);
            rows[n++] = r;
            ro += (size_t)snprintf(rt + ro, sizeof rt - ro, "%s\"%d\":%.17g", k ? "," : "", mbs[k],
                                   r.ms);
            fo += (size_t)snprintf(fw + fo, sizeof fw - fo, "%s\"%d\":%.17g", k ? "," : "", mbs[k],
                                   r.fwd_ms);
        }
        off += (size_t)snprintf(text + off, (1 << 16) - off, "\"runtime\":{%s},\"forward\":{%s}}",
                                rt, fw);
    }
    snprintf(text + off, (1 << 16) - off, "}");
    GPP_EXPECT_MSG(s_attach_text(json, text, "rows.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(s_attach_rows(mem, g, rows, n, "the agents' profile", 0, &err) == 0, "%s",
                   err.msg);
    int same = 1;
    for (int op = 0; op < g->n_ops; op++) {
        GPP_EXPECT(gpp_cost_op_profiled(mem, op) == (op % 2 == 0));
        for (int b = 1; b <= 9; b++)
            same &= gpp_cost_op_fwd_ms(json, op, b) == gpp_cost_op_fwd_ms(mem, op, b) &&
                    gpp_cost_op_bwd_ms(json, op, b) == gpp_cost_op_bwd_ms(mem, op, b);
    }
    GPP_EXPECT_MSG(same, "in-memory rows and profile.json differ");
    /* the same checks: each bad row is refused naming the figure, and the
     * model keeps its tables */
    double before = gpp_cost_op_fwd_ms(mem, 0, 3);
    struct {
        gpp_profile_row_t row;
        const char *expect;
    } bad[] = {
        {s_row(0, 0, 1, 1), "runtime key '0'"},     {s_row(0, 1, NAN, 1), "runtime[\"1\"]"},
        {s_row(0, 1, -1, 2), "forward[\"1\"]"},     {s_row(0, 1, 2, -1), "forward[\"1\"]"},
        {s_row(0, 4, 1, 1), "micro-batch 4 twice"}, {s_row(g->n_ops, 1, 1, 1), "has ops 0.."},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpp_profile_row_t two[2] = {s_row(0, 4, 0.5, 0.5), bad[i].row};
        err.msg[0] = 0;
        GPP_EXPECT_MSG(s_attach_rows(mem, g, two, 2, "agents", 0, &err) == -1 &&
                           strstr(err.msg, bad[i].expect) && strstr(err.msg, "agents"),
                       "case %zu: %s", i, err.msg);
    }
    GPP_EXPECT(gpp_cost_op_fwd_ms(mem, 0, 3) == before);
    free(text);
    gpp_cost_destroy(&json);
    gpp_cost_destroy(&mem);
    gpp_graph_destroy(&g);
}

/* Every op timed at one size b (fwd_ms(op), twice that backward), as the
 * agents report rows. */
static int s_rows_at(const gpp_graph_t *g, const int *mbs, int n_mbs, gpp_profile_row_t *rows)
{
    int n = 0;
    for (int op = 0; op < g->n_ops; op++)
        for (int k = 0; k < n_mbs; k++)
            rows[n++] =
                s_row(op, mbs[k], 0.01 * (op + 1) * (1 + mbs[k]), 0.02 * (op + 1) * (1 + mbs[k]));
    return n;
}

/* A profile timed at one micro-batch size follows the preset's curve to
 * other sizes, t(m) = t(b) * roof(m) / roof(b), forward and backward each
 * on its own; the per-sample time falls with m (fixed per-kernel costs),
 * so the curve is not linear; another preset gives another shape; and the
 * model says so in one note naming the origin, the size, the op count and
 * the preset. A multi-size table is linear inside and follows the curve
 * outside, and the note names the range it misses. */
static void t_profile_curve(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=2,layers=1,hidden=64,heads=4,seq=16", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    gpp_profile_row_t *rows = calloc((size_t)g->n_ops * 3, sizeof *rows);
    const char *presets[] = {"v100-16g", "cpu"};
    double ratio[2] = {0, 0}; /* fwd(1) / fwd(8) of the first attention op */
    int attn = -1;
    for (int op = 0; op < g->n_ops && attn < 0; op++)
        if (g->ops[op].type == GPP_OP_ATTENTION)
            attn = op;
    for (int pi = 0; pi < 2; pi++) {
        gpp_cluster_t c;
        GPP_EXPECT(gpp_cluster_init(&c, presets[pi], 4, 4, &err) == 0);
        gpp_cost_t *roof = gpp_cost_new(g, &c), *one = gpp_cost_new(g, &c);
        int eight = 8, n = s_rows_at(g, &eight, 1, rows);
        GPP_EXPECT_MSG(s_attach_rows(one, g, rows, (size_t)n, "prof8.json", 0, &err) == 0, "%s",
                       err.msg);
        int bad_shape = 0, not_falling = 0;
        for (int op = 0; op < g->n_ops; op++) {
            double f8 = rows[op].fwd_ms, b8 = rows[op].ms - rows[op].fwd_ms;
            double rf8 = gpp_cost_op_fwd_ms(roof, op, 8), rb8 = gpp_cost_op_bwd_ms(roof, op, 8);
            const int ms[] = {1, 2, 3, 5, 8, 16, 64};
            for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) {
                int m = ms[k];
                double f = gpp_cost_op_fwd_ms(one, op, m), b = gpp_cost_op_bwd_ms(one, op, m);
                double ef = rf8 > 0 ? f8 * gpp_cost_op_fwd_ms(roof, op, m) / rf8 : f8 * m / 8;
                double eb = rb8 > 0 ? b8 * gpp_cost_op_bwd_ms(roof, op, m) / rb8 : b8 * m / 8;
                bad_shape += fabs(f - ef) > 1e-12 * ef || fabs(b - eb) > 1e-12 * eb;
            }
            /* fixed costs per kernel: one sample costs more than 1/8 of eight */
            if (g->ops[op].type != GPP_OP_INPUT)
                not_falling += !(gpp_cost_op_fwd_ms(one, op, 1) * 8 > f8);
        }
        GPP_EXPECT_MSG(bad_shape == 0, "%s: %d (op, size) pairs off the curve", presets[pi],
                       bad_shape);
        GPP_EXPECT_MSG(not_falling == 0, "%s: %d ops scale linearly", presets[pi], not_falling);
        ratio[pi] = gpp_cost_op_fwd_ms(one, attn, 1) / gpp_cost_op_fwd_ms(one, attn, 8);
        char note[512], want[64];
        GPP_EXPECT(gpp_cost_profile_note(one, 64, note, sizeof note) == 1);
        snprintf(want, sizeof want, "for %d ops", g->n_ops);
        GPP_EXPECT_MSG(strstr(note, "prof8.json") && strstr(note, "one micro-batch size (8)") &&
                           strstr(note, want) && strstr(note, presets[pi]),
                       "%s", note);
        GPP_EXPECT(gpp_cost_profile_note(roof, 64, note, sizeof note) == 0); /* nothing measured */

        /* sizes 1, 2, 4: linear inside, the curve beyond 4 */
        gpp_cost_t *multi = gpp_cost_new(g, &c);
        const int mbs[] = {1, 2, 4};
        n = s_rows_at(g, mbs, 3, rows);
        GPP_EXPECT_MSG(s_attach_rows(multi, g, rows, (size_t)n, "prof124.json", 0, &err) == 0, "%s",
                       err.msg);
        const gpp_profile_row_t *r2 = &rows[3 * attn + 1], *r4 = &rows[3 * attn + 2];
        GPP_EXPECT_NEAR(gpp_cost_op_fwd_ms(multi, attn, 3), 0.5 * (r2->fwd_ms + r4->fwd_ms), 1e-12);
        GPP_EXPECT_NEAR(gpp_cost_op_bwd_ms(multi, attn, 32),
                        (r4->ms - r4->fwd_ms) * gpp_cost_op_bwd_ms(roof, attn, 32) /
                            gpp_cost_op_bwd_ms(roof, attn, 4),
                        1e-12);
        GPP_EXPECT(gpp_cost_profile_note(multi, 4, note, sizeof note) == 0); /* covered */
        GPP_EXPECT(gpp_cost_profile_note(multi, 64, note, sizeof note) == 1);
        GPP_EXPECT_MSG(strstr(note, "prof124.json") && strstr(note, "1..4") &&
                           strstr(note, "1..64") && strstr(note, presets[pi]),
                       "%s", note);
        gpp_cost_destroy(&roof);
        gpp_cost_destroy(&one);
        gpp_cost_destroy(&multi);
    }
    /* the two presets' curves differ in shape (the fixed costs weigh
       differently next to their peaks), so the preset's curve is used */
    GPP_EXPECT_MSG(fabs(ratio[0] - ratio[1]) > 1e-3 * ratio[0], "v100 %.6f, cpu %.6f", ratio[0],
                   ratio[1]);
    free(rows);
    gpp_graph_destroy(&g);
}

/* A small MMT with its attention op *att and every op id in *all (caller
 * frees both), or NULL. */
static gpp_graph_t *s_att_model(int *att, int **all)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=1,layers=1,hidden=32,heads=4,seq=16,ffn=64", &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    if (!g)
        return NULL;
    *att = -1;
    for (int i = 0; i < g->n_ops && *att < 0; i++)
        if (g->ops[i].type == GPP_OP_ATTENTION)
            *att = i;
    GPP_EXPECT(*att >= 0);
    *all = malloc(sizeof(int) * (size_t)g->n_ops);
    for (int i = 0; i < g->n_ops; i++)
        (*all)[i] = i;
    return g;
}

/* Each value of bad[] as op's `field` in a profile is refused, naming the
 * file, the op and the field. */
static void s_expect_bad_field(gpp_cost_t *cost, const gpp_graph_t *g, int op, const char *field,
                               const char *const *bad, size_t n)
{
    char text[512], want[64], name[32];
    snprintf(want, sizeof want, "'%s'", field);
    snprintf(name, sizeof name, "op %d", op);
    for (size_t i = 0; i < n; i++) {
        snprintf(text, sizeof text, "{\"%d\":{\"name\":\"%s\",\"runtime\":{\"1\":1.0},\"%s\":%s}}",
                 op, g->ops[op].name, field, bad[i]);
        gpp_err_t err = {{0}};
        GPP_EXPECT_MSG(s_attach_text(cost, text, "bad.json", &err) == -1 && strstr(err.msg, want) &&
                           strstr(err.msg, "bad.json") && strstr(err.msg, name),
                       "%s: %s", bad[i], err.msg);
    }
}

/* A profile's "kernel_stash" (what the backend's kernel keeps: CUDA's fused
 * attention has no seq x seq probabilities) replaces the op table's figure
 * in the planner's memory model: the op's stash, the stage's stash and the
 * stage's peak all drop by the difference; it survives the coordinator's
 * kept profile; a bad value names the file, the op and the field. */
static void t_kernel_stash(void)
{
    gpp_err_t err = {{0}};
    int att, *all;
    gpp_graph_t *g = s_att_model(&att, &all);
    if (!g)
        return;
    gpp_cluster_t c;
    gpp_cluster_init(&c, "h100-80g", 1, 1, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    const gpp_op_t *a = &g->ops[att];
    int64_t table = gpp_op_kernel_stash_bytes(g, a);
    /* the fused core's: qkv, ctx and one log-sum-exp per row and head */
    int64_t fused = 4 * (a->rows * 3 * a->cols + a->rows * a->cols + a->heads * a->rows);
    GPP_EXPECT(fused < table);
    gpp_stage_cost_t before, after;
    gpp_cost_stage(cost, g->n_ops, all, 1, 4, 8, &before);
    int64_t mem_before = gpp_cost_stage_mem(cost, g->n_ops, all, 1, 4, 2, 8);
    char text[512];
    snprintf(text, sizeof text,
             "{\"%d\":{\"name\":\"%s\",\"weight_size\":%lld,\"runtime\":{\"1\":1.0},"
             "\"kernel_stash\":%lld}}",
             att, a->name, (long long)a->params * 4, (long long)fused);
    GPP_EXPECT_MSG(s_attach_text(cost, text, "ks.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_op_stash_bytes(cost, att) == a->stash_bytes - table + fused);
    gpp_cost_stage(cost, g->n_ops, all, 1, 4, 8, &after);
    GPP_EXPECT(before.stash_bytes - after.stash_bytes == table - fused);
    int64_t mem_after = gpp_cost_stage_mem(cost, g->n_ops, all, 1, 4, 2, 8);
    /* two micro-batches of 4 in flight hold the stash: at least 4 x the difference less */
    GPP_EXPECT_MSG(mem_before - mem_after >= 4 * (table - fused), "%lld -> %lld",
                   (long long)mem_before, (long long)mem_after);
    char *kept = s_rewrite(text, &err);
    char want[64];
    snprintf(want, sizeof want, "\"kernel_stash\":\t%lld", (long long)fused);
    GPP_EXPECT_MSG(kept && strstr(kept, want), "kept profile lacks %s", want);
    free(kept);
    const char *bad[] = {"-4", "\"big\"", "1.5", "2e12"};
    s_expect_bad_field(cost, g, att, "kernel_stash", bad, sizeof bad / sizeof bad[0]);
    GPP_EXPECT(gpp_cost_op_stash_bytes(cost, att) == a->stash_bytes - table + fused);
    /* the agents' rows carry it too (ProfileResult.ops[].kernel_stash) */
    gpp_cost_t *rc = gpp_cost_new(g, &c);
    gpp_profile_row_t rows[2] = {s_row(att, 1, 0.1, 0.2), s_row(att, 2, 0.2, 0.4)};
    for (int i = 0; i < 2; i++) {
        rows[i].has_kernel_stash = 1;
        rows[i].kernel_stash = fused;
    }
    GPP_EXPECT_MSG(s_attach_rows(rc, g, rows, 2, "rows", 0, &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_op_stash_bytes(rc, att) == a->stash_bytes - table + fused);
    rows[1].kernel_stash = fused + 4; /* one op, two figures */
    err.msg[0] = 0;
    GPP_EXPECT_MSG(s_attach_rows(rc, g, rows, 2, "rows", 0, &err) == -1 &&
                       strstr(err.msg, "kernel_stash") && strstr(err.msg, "rows"),
                   "%s", err.msg);
    gpp_cost_destroy(&rc);
    free(all);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* A cuda job's precision (gpp_cluster_set_precision) moves the roofline to
 * the datasheet's tensor-core peak: bf16 the dense fp16/bf16 figure, tf32
 * half of it on A100/H100/H200 and none on V100 (fp32 stays); bf16 also
 * with the agents' bf16 tensors ([job] bf16_tensors) halves every op's
 * output bytes but data's and the roofline's activation bytes, so a memory-bound op takes half the
 * time; a profile's out_bytes still wins; fp32 puts everything back; an
 * unknown preset is refused naming it; the spellings round-trip. */
static void t_precision(void)
{
    gpp_err_t err = {{0}};
    int att, *all;
    gpp_graph_t *g = s_att_model(&att, &all);
    if (!g)
        return;
    gpp_cluster_t c;
    GPP_EXPECT(gpp_cluster_init(&c, "h100-80g", 1, 1, &err) == 0);
    int ln = g->ops[att].inputs[0], in = -1; /* a layer norm (memory-bound), a data input */
    for (int i = 0; i < g->n_ops && in < 0; i++)
        if (g->ops[i].type == GPP_OP_INPUT)
            in = i;
    GPP_EXPECT(g->ops[ln].type == GPP_OP_LAYERNORM && in >= 0);
    gpp_cost_t *f = gpp_cost_new(g, &c);
    GPP_EXPECT(gpp_cluster_set_precision(&c, "h100-80g", GPP_PRECISION_BF16, 1, &err) == 0);
    GPP_EXPECT_NEAR(c.device.peak_flops, 989e12, 1);
    gpp_cost_t *b = gpp_cost_new(g, &c);
    double lf = gpp_cost_op_fwd_ms(f, ln, 65536), lb = gpp_cost_op_fwd_ms(b, ln, 65536);
    double af = gpp_cost_op_fwd_ms(f, att, 65536), ab = gpp_cost_op_fwd_ms(b, att, 65536);
    printf("  h100 fp32 -> bf16: layer norm fwd %.4f -> %.4f ms, attention fwd %.4f -> %.4f ms\n",
           lf, lb, af, ab);
    GPP_EXPECT(lb < 0.6 * lf && ab < 0.6 * af); /* memory-bound here: about half */
    GPP_EXPECT(gpp_cost_op_out_bytes(b, ln) == g->ops[ln].out_bytes / 2);
    GPP_EXPECT(gpp_cost_op_out_bytes(b, in) == g->ops[in].out_bytes);
    GPP_EXPECT(gpp_cost_op_out_bytes(f, ln) == g->ops[ln].out_bytes);
    /* the bf16 copies of the linears' and attention's parameters are state
       at bf16 (each rounded), and apart from them activations are halved */
    int64_t copies = gpp_cost_stage_param_copy_bytes(b, g->n_ops, all), want = 0;
    for (int i = 0; i < g->n_ops; i++) {
        if (g->ops[i].type != GPP_OP_LINEAR && g->ops[i].type != GPP_OP_ATTENTION)
            continue;
        gpp_param_t spec[GPP_OP_MAX_PARAMS];
        int np = gpp_op_params(g, &g->ops[i], spec);
        for (int k = 0; k < np; k++) /* one buffer each, rounded by the cluster's rule */
            want += gpp_alloc_bytes(c.alloc_rule, spec[k].rows * spec[k].cols * 2);
    }
    GPP_EXPECT(copies > 0 && copies == want);
    GPP_EXPECT(gpp_cost_stage_param_copy_bytes(f, g->n_ops, all) == 0);
    GPP_EXPECT(gpp_op_param_copy_bytes(g, &g->ops[ln], c.alloc_rule) == 0); /* no product */
    GPP_EXPECT(gpp_cost_stage_mem(b, g->n_ops, all, 1, 4, 2, 8) - copies <
               gpp_cost_stage_mem(f, g->n_ops, all, 1, 4, 2, 8));
    gpp_stage_cost_t sb;
    gpp_cost_stage(b, g->n_ops, all, 1, 4, 8, &sb);
    GPP_EXPECT_MSG(gpp_cost_stage_mem_bound(&sb, 8, 4, 1) >=
                       gpp_cost_stage_mem(b, g->n_ops, all, 1, 4, 2, 8),
                   "the partitioner's bound below the walk at bf16");
    /* a profile's figure wins over the default */
    char text[256];
    snprintf(text, sizeof text,
             "{\"%d\":{\"name\":\"%s\",\"runtime\":{\"1\":1.0},\"out_bytes\":%lld}}", ln,
             g->ops[ln].name, (long long)g->ops[ln].out_bytes);
    GPP_EXPECT_MSG(s_attach_text(b, text, "p.json", &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_op_out_bytes(b, ln) == g->ops[ln].out_bytes);
    GPP_EXPECT(gpp_cost_op_out_bytes(b, att) == g->ops[att].out_bytes / 2);
    GPP_EXPECT(gpp_cluster_set_precision(&c, "h100-80g", GPP_PRECISION_TF32, 1, &err) == 0);
    GPP_EXPECT_NEAR(c.device.peak_flops, 494.5e12, 1);
    GPP_EXPECT(!c.bf16_tensors);
    /* bf16 without the agents' bf16 tensors (the default): fp32 activations */
    GPP_EXPECT(gpp_cluster_set_precision(&c, "h100-80g", GPP_PRECISION_BF16, 0, &err) == 0);
    GPP_EXPECT(!c.bf16_tensors && c.device.peak_flops > 900e12);
    GPP_EXPECT(gpp_cluster_set_precision(&c, "h100-80g", GPP_PRECISION_FP32, 1, &err) == 0);
    GPP_EXPECT_NEAR(c.device.peak_flops, 67e12, 1);
    gpp_cluster_t v;
    GPP_EXPECT(gpp_cluster_init(&v, "v100-16g", 1, 1, &err) == 0);
    GPP_EXPECT(gpp_cluster_set_precision(&v, "v100-16g", GPP_PRECISION_TF32, 1, &err) == 0);
    GPP_EXPECT_NEAR(v.device.peak_flops, 15.7e12, 1); /* no TF32 on V100 */
    GPP_EXPECT(gpp_cluster_set_precision(&v, "v200-16g", GPP_PRECISION_BF16, 1, &err) == -1 &&
               strstr(err.msg, "v200-16g"));
    /* one spelling table: names and values round-trip, others are refused */
    for (int p = 0; p < GPP_PRECISION__COUNT; p++) {
        gpp_precision_t back = GPP_PRECISION__COUNT;
        GPP_EXPECT(gpp_precision_parse(gpp_precision_name((gpp_precision_t)p), &back) == 0 &&
                   back == (gpp_precision_t)p);
    }
    gpp_precision_t fp16 = GPP_PRECISION_FP32;
    GPP_EXPECT(gpp_precision_parse("fp16", &fp16) == -1 && fp16 == GPP_PRECISION_FP32);
    gpp_cost_destroy(&f);
    gpp_cost_destroy(&b);
    free(all);
    gpp_graph_destroy(&g);
}

/* A profile's "out_bytes" (an op's output as the device keeps it: CUDA at
 * bf16 keeps most activations in bf16, in the stage that makes them and in
 * the stages that receive them) replaces the graph's fp32 figure in the
 * memory model's walk, for a stage that keeps the output and for one that
 * sends it; the kept profile keeps the figure, the agents' rows carry it,
 * a bad value names the file, the op and the field, and a figure above the
 * fp32 one is refused. */
static void t_out_bytes(void)
{
    gpp_err_t err = {{0}};
    int att, *all;
    gpp_graph_t *g = s_att_model(&att, &all);
    if (!g)
        return;
    gpp_cluster_t c;
    gpp_cluster_init(&c, "h100-80g", 1, 1, &err);
    /* attention's input: kept for attention's backward */
    int op = g->ops[att].inputs[0];
    const gpp_op_t *a = &g->ops[op];
    GPP_EXPECT(gpp_op_output_kept(g, a) && a->n_outputs > 0 && a->outputs[0] > op);
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    int upto = op + 1; /* ops 0..op: the stage sends the output */
    int64_t whole0 = gpp_cost_stage_mem(cost, g->n_ops, all, 1, 4, 2, 8);
    int64_t part0 = gpp_cost_stage_mem(cost, upto, all, 1, 4, 2, 8);
    gpp_stage_cost_t sc0, sc1; /* the sending stage's transfers */
    gpp_cost_stage(cost, upto, all, 1, 4, 8, &sc0);
    GPP_EXPECT(gpp_cost_op_out_bytes(cost, op) == a->out_bytes);
    char text[512];
    snprintf(text, sizeof text,
             "{\"%d\":{\"name\":\"%s\",\"weight_size\":%lld,\"runtime\":{\"1\":1.0},"
             "\"out_bytes\":%lld}}",
             op, a->name, (long long)a->params * 4, (long long)a->out_bytes / 2);
    GPP_EXPECT_MSG(s_attach_text(cost, text, "ob.json", &err) == 0, "%s", err.msg);
    int64_t whole1 = gpp_cost_stage_mem(cost, g->n_ops, all, 1, 4, 2, 8);
    int64_t part1 = gpp_cost_stage_mem(cost, upto, all, 1, 4, 2, 8);
    printf("  out_bytes %lld of %lld: whole stage %lld -> %lld, sending stage %lld -> %lld\n",
           (long long)a->out_bytes / 2, (long long)a->out_bytes, (long long)whole0,
           (long long)whole1, (long long)part0, (long long)part1);
    GPP_EXPECT(whole1 < whole0);
    GPP_EXPECT(part1 < part0);
    /* what the edge carries: half the bytes, so less link time */
    GPP_EXPECT(gpp_cost_op_out_bytes(cost, op) == a->out_bytes / 2);
    gpp_cost_stage(cost, upto, all, 1, 4, 8, &sc1);
    GPP_EXPECT_MSG(sc1.comm_ms < sc0.comm_ms, "comm %g -> %g ms", sc0.comm_ms, sc1.comm_ms);
    /* the memory plan itself: the same through gpp_stage_dev_t */
    int64_t *ob = malloc(sizeof(int64_t) * (size_t)g->n_ops);
    for (int i = 0; i < g->n_ops; i++)
        ob[i] = i == op ? a->out_bytes / 2 : -1;
    gpp_stage_dev_t d1 = {.out_bytes = ob, .alloc_rule = GPP_ALLOC_ALIGN64};
    GPP_EXPECT(s_plan_total(g, g->n_ops, all, 1, 8, 4, 1, 2, &d1) <
               s_plan_total(g, g->n_ops, all, 1, 8, 4, 1, 2, NULL));
    free(ob);
    char *kept = s_rewrite(text, &err);
    char want[64];
    snprintf(want, sizeof want, "\"out_bytes\":\t%lld", (long long)a->out_bytes / 2);
    GPP_EXPECT_MSG(kept && strstr(kept, want), "kept profile lacks %s", want);
    free(kept);
    const char *bad[] = {"0", "-2", "1.5", "\"8\"", "2e12"};
    s_expect_bad_field(cost, g, op, "out_bytes", bad, sizeof bad / sizeof bad[0]);
    snprintf(text, sizeof text,
             "{\"%d\":{\"name\":\"%s\",\"runtime\":{\"1\":1.0},\"out_bytes\":%lld}}", op, a->name,
             (long long)a->out_bytes + 4);
    err.msg[0] = 0;
    GPP_EXPECT_MSG(s_attach_text(cost, text, "big.json", &err) == -1 &&
                       strstr(err.msg, "fp32 figure") && strstr(err.msg, "big.json"),
                   "%s", err.msg);
    GPP_EXPECT(gpp_cost_stage_mem(cost, g->n_ops, all, 1, 4, 2, 8) == whole1);
    /* the agents' rows carry it too (ProfileResult.ops[].out_bytes) */
    gpp_cost_t *rc = gpp_cost_new(g, &c);
    gpp_profile_row_t rows[2] = {s_row(op, 1, 0.1, 0.2), s_row(op, 2, 0.2, 0.4)};
    for (int i = 0; i < 2; i++) {
        rows[i].has_out_bytes = 1;
        rows[i].out_bytes = a->out_bytes / 2;
    }
    GPP_EXPECT_MSG(s_attach_rows(rc, g, rows, 2, "rows", 0, &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_stage_mem(rc, g->n_ops, all, 1, 4, 2, 8) == whole1);
    rows[1].out_bytes = a->out_bytes; /* one op, two figures */
    err.msg[0] = 0;
    GPP_EXPECT_MSG(s_attach_rows(rc, g, rows, 2, "rows", 0, &err) == -1 &&
                       strstr(err.msg, "out_bytes") && strstr(err.msg, "rows"),
                   "%s", err.msg);
    gpp_cost_destroy(&rc);
    free(all);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* A profile's "workspace" (the stream workspace the backend's kernels ask:
 * the CUDA attention cores ask more than the op table's CPU layout)
 * replaces the op table's figure in the planner's memory model: the exact
 * walk's workspace is the stage's largest request, rounded as the device's
 * allocator rounds it; the partitioner's bound stays above the walk; the
 * kept profile keeps the figure; the agents' rows carry it; a bad value
 * names the file, the op and the field, and changes nothing. */
static void t_workspace(void)
{
    gpp_err_t err = {{0}};
    int att, *all;
    gpp_graph_t *g = s_att_model(&att, &all);
    if (!g)
        return;
    gpp_cluster_t c;
    gpp_cluster_init(&c, "h100-80g", 1, 1, &err);
    c.alloc_rule = GPP_ALLOC_CLASSES;
    gpp_cost_t *cost = gpp_cost_new(g, &c);
    int64_t table_max = 0; /* the stage's largest request at 4 samples, the op table's */
    for (int i = 0; i < g->n_ops; i++) {
        int64_t w = gpp_op_workspace_bytes(g, &g->ops[i], 4);
        table_max = w > table_max ? w : table_max;
    }
    const gpp_op_t *a = &g->ops[att];
    gpp_work_t t = gpp_cost_op_workspace(cost, att), tab = gpp_op_workspace(g, a);
    GPP_EXPECT(t.fixed == tab.fixed && t.per_sample == tab.per_sample && tab.fixed > 0);
    /* the unfused CUDA core's backward: 7 seq hidden + heads seq^2 floats a sample, + the
       head-major dctx, 256-byte padded (no seq^2 block whatever the size) */
    gpp_work_t cuda = {0, (7 * a->rows * a->cols + a->heads * a->rows * a->rows) * 4 +
                              a->rows * a->cols * 4};
    GPP_EXPECT(cuda.fixed + 4 * cuda.per_sample > table_max);
    gpp_stage_cost_t before, after;
    gpp_cost_stage(cost, g->n_ops, all, 1, 4, 8, &before);
    int64_t mem_before = gpp_cost_stage_mem(cost, g->n_ops, all, 1, 4, 2, 8);
    char text[512];
    snprintf(text, sizeof text,
             "{\"%d\":{\"name\":\"%s\",\"weight_size\":%lld,\"runtime\":{\"1\":1.0},"
             "\"workspace\":{\"fixed\":%lld,\"per_sample\":%lld}}}",
             att, a->name, (long long)a->params * 4, (long long)cuda.fixed,
             (long long)cuda.per_sample);
    GPP_EXPECT_MSG(s_attach_text(cost, text, "ws.json", &err) == 0, "%s", err.msg);
    t = gpp_cost_op_workspace(cost, att);
    GPP_EXPECT(t.fixed == cuda.fixed && t.per_sample == cuda.per_sample);
    int64_t mem_after = gpp_cost_stage_mem(cost, g->n_ops, all, 1, 4, 2, 8);
    /* the workspace's place in the arena grows by this much; the arena, one
       block of the caching allocator, is rounded to its class (< 1/32 more) */
    int64_t want = gpp_alloc_carve(GPP_ALLOC_CLASSES, cuda.fixed + 4 * cuda.per_sample) -
                   gpp_alloc_carve(GPP_ALLOC_CLASSES, table_max);
    GPP_EXPECT_MSG(mem_after - mem_before >= want &&
                       mem_after - mem_before <= want + mem_after / 32 + 512,
                   "%lld -> %lld: expected %+lld and a class's rounding", (long long)mem_before,
                   (long long)mem_after, (long long)want);
    gpp_cost_stage(cost, g->n_ops, all, 1, 4, 8, &after);
    GPP_EXPECT(after.work_bytes > before.work_bytes);
    int64_t bound = gpp_cost_stage_mem_bound(&after, 8, 4, 1);
    GPP_EXPECT_MSG(bound >= mem_after, "bound %lld below the walk's %lld", (long long)bound,
                   (long long)mem_after);
    char *kept = s_rewrite(text, &err);
    char want_s[64];
    snprintf(want_s, sizeof want_s, "\"per_sample\":\t%lld", (long long)cuda.per_sample);
    GPP_EXPECT_MSG(kept && strstr(kept, "\"workspace\":") && strstr(kept, want_s),
                   "kept profile lacks %s", want_s);
    free(kept);
    const char *bad[] = {"-1",
                         "{\"fixed\":0}",
                         "{\"fixed\":0,\"per_sample\":1.5}",
                         "{\"fixed\":-4,\"per_sample\":0}",
                         "{\"fixed\":0,\"per_sample\":2e12}",
                         "{\"fixed\":0,\"per_sample\":\"8\"}",
                         "{\"fixed\":0,\"per_sample\":1,\"extra\":2}"};
    s_expect_bad_field(cost, g, att, "workspace", bad, sizeof bad / sizeof bad[0]);
    t = gpp_cost_op_workspace(cost, att);
    GPP_EXPECT(t.fixed == cuda.fixed && t.per_sample == cuda.per_sample);
    /* the agents' rows carry it too (ProfileResult.ops[].workspace_*) */
    gpp_cost_t *rc = gpp_cost_new(g, &c);
    gpp_profile_row_t rows[2] = {s_row(att, 1, 0.1, 0.2), s_row(att, 2, 0.2, 0.4)};
    for (int i = 0; i < 2; i++) {
        rows[i].has_workspace = 1;
        rows[i].workspace = cuda;
    }
    GPP_EXPECT_MSG(s_attach_rows(rc, g, rows, 2, "rows", 0, &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_stage_mem(rc, g->n_ops, all, 1, 4, 2, 8) == mem_after);
    rows[1].workspace.per_sample += 4; /* one op, two figures */
    err.msg[0] = 0;
    GPP_EXPECT_MSG(s_attach_rows(rc, g, rows, 2, "rows", 0, &err) == -1 &&
                       strstr(err.msg, "workspace") && strstr(err.msg, "rows"),
                   "%s", err.msg);
    gpp_cost_destroy(&rc);
    /* an agent's memory figures alone (ProfileRequest.figures_only): the
       same memory, the op's times the roofline's as before */
    gpp_cost_t *fig = gpp_cost_new(g, &c), *plain = gpp_cost_new(g, &c);
    gpp_profile_row_t one = s_row(att, 1, 0, 0);
    one.has_workspace = 1;
    one.workspace = cuda;
    GPP_EXPECT_MSG(s_attach_rows(fig, g, &one, 1, "figures", 1, &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_cost_stage_mem(fig, g->n_ops, all, 1, 4, 2, 8) == mem_after);
    gpp_stage_cost_t sf, sp;
    gpp_cost_stage(fig, g->n_ops, all, 1, 4, 8, &sf);
    gpp_cost_stage(plain, g->n_ops, all, 1, 4, 8, &sp);
    GPP_EXPECT_MSG(sf.fwd_ms == sp.fwd_ms && sf.bwd_ms == sp.bwd_ms && sf.fwd_ms > 0,
                   "times %g + %g, roofline %g + %g", sf.fwd_ms, sf.bwd_ms, sp.fwd_ms, sp.bwd_ms);
    one.workspace.fixed = -1; /* checked as rows are */
    err.msg[0] = 0;
    GPP_EXPECT_MSG(s_attach_rows(fig, g, &one, 1, "figures", 1, &err) == -1 &&
                       strstr(err.msg, "figures") && strstr(err.msg, "workspace"),
                   "%s", err.msg);
    GPP_EXPECT(gpp_cost_stage_mem(fig, g->n_ops, all, 1, 4, 2, 8) == mem_after);
    gpp_cost_destroy(&fig);
    gpp_cost_destroy(&plain);
    free(all);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* The profiler's table of f's whole model written to path (gpp-train
 * --profile-out): the largest size timed, or -1. */
static int s_profile_to(gpp_fixture_exec_t *f, const gpp_profile_cfg_t *pc, const char *path,
                        gpp_err_t *err)
{
    gpp_profile_t *p = gpp_profile_measure(f->g, f->g->n_ops, f->all, f->be, f->data, pc, err);
    int largest = -1;
    for (size_t i = 0; p && i < p->n_rows; i++)
        largest = p->rows[i].micro_batch > largest ? p->rows[i].micro_batch : largest;
    if (p && gpp_profile_io_write(p, path, err) < 0)
        largest = -1;
    gpp_profile_destroy(&p);
    return largest;
}

/* The profiler times several micro-batch sizes (1, 2, 4, 8 here) for
 * every op, and only 1 and 2 when its time budget is spent; the planner
 * reads them all (no note: they cover 1..8), gpp-plan --profile plans from
 * the file alone, and a bad entry in such a file is still an error naming
 * the file, the op and the key. */
static void t_profile_sizes(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, "mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64", 5) < 0)
        return;
    char *path = gpp_fixture_tmpfile("sizes");
    gpp_err_t err = {{0}};
    gpp_profile_cfg_t pc = {.max_micro_batch = 8, .warmup = 1, .reps = 1, .seed = 3};
    GPP_EXPECT_MSG(s_profile_to(&f, &pc, path, &err) == 8, "%s", err.msg);
    /* a budget spent at once still times sizes 1 and 2 (a slope), no more */
    gpp_profile_cfg_t tight = pc;
    tight.budget_ms = 1e-9;
    int two = s_profile_to(&f, &tight, path, &err);
    GPP_EXPECT_MSG(two == 2, "largest size %d under a spent budget: %s", two, err.msg);
    GPP_EXPECT_MSG(s_profile_to(&f, &pc, path, &err) == 8, "%s", err.msg);
    long len = 0;
    char *text = (char *)gpp_fixture_slurp(path, &len);
    GPP_EXPECT(text && len > 0);
    if (!text || len <= 0) {
        free(text);
        free(path);
        gpp_fixture_exec_close(&f);
        return;
    }
    text[len] = 0;
    cJSON *root = cJSON_Parse(text);
    int ops_with_all = 0, stash_ok = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root)
    {
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(e, "runtime");
        ops_with_all += cJSON_GetArraySize(rt) == 4 && cJSON_GetObjectItemCaseSensitive(rt, "1") &&
                        cJSON_GetObjectItemCaseSensitive(rt, "8");
        /* the CPU backend keeps the op table's kernel stash */
        const cJSON *ks = cJSON_GetObjectItemCaseSensitive(e, "kernel_stash");
        int id = atoi(e->string);
        stash_ok += e->string[0] != '_' && cJSON_IsNumber(ks) &&
                    ks->valuedouble == (double)gpp_op_kernel_stash_bytes(f.g, &f.g->ops[id]);
    }
    GPP_EXPECT_MSG(stash_ok == f.g->n_ops, "%d of %d ops record the table's kernel stash", stash_ok,
                   f.g->n_ops);
    GPP_EXPECT_MSG(ops_with_all == f.g->n_ops, "%d of %d ops have sizes 1, 2, 4, 8", ops_with_all,
                   f.g->n_ops);
    cJSON_Delete(root);
    gpp_cluster_t c;
    gpp_cluster_init(&c, "cpu", 1, 1, &err);
    gpp_cost_t *cost = gpp_cost_new(f.g, &c);
    GPP_EXPECT_MSG(s_attach_file(cost, path, &err) == 0, "%s", err.msg);
    char note[512];
    GPP_EXPECT(gpp_cost_profile_note(cost, 8, note, sizeof note) == 0);
    GPP_EXPECT(gpp_cost_profile_note(cost, 32, note, sizeof note) == 1 && strstr(note, path));
    /* gpp-plan --profile: the file alone gives a graph its figures fit (a
       loss has an output though nothing reads it) */
    gpp_graph_t *pg = s_profile_graph(NULL, path, &err);
    GPP_EXPECT_MSG(pg != NULL, "%s", err.msg);
    if (pg) {
        gpp_cost_t *pcost = gpp_cost_new(pg, &c);
        GPP_EXPECT_MSG(s_attach_file(pcost, path, &err) == 0, "%s", err.msg);
        GPP_EXPECT(gpp_cost_op_profiled(pcost, pg->n_ops - 1));
        gpp_cost_destroy(&pcost);
        gpp_graph_destroy(&pg);
    }
    /* a size key of the written file turned bad: file, op id and key named */
    char *at = strstr(text, "\"runtime\"");
    char *key = at ? strstr(at, "\"4\":") : NULL;
    GPP_EXPECT(key != NULL);
    if (key) {
        key[1] = '0'; /* "4" -> "0" */
        gpp_fixture_spit(path, (unsigned char *)text, len);
        err.msg[0] = 0;
        GPP_EXPECT(s_attach_file(cost, path, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, path) && strstr(err.msg, "op 0") &&
                           strstr(err.msg, "runtime key '0'"),
                       "%s", err.msg);
    }
    unlink(path);
    free(path);
    free(text);
    gpp_cost_destroy(&cost);
    gpp_fixture_exec_close(&f);
}

/* Stage memory: gpp_cost_stage_mem is the stage's memory plan
 * (model/gpp_memplan.h, test_memplan) at ceil(b/d) samples with the
 * cluster's optimizer; the search's additive bound is never below it, on
 * every contiguous op range of small zoo models. */
static void t_stage_mem(void)
{
    gpp_err_t err = {{0}};
    const char *specs[] = {"mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64,classes=8",
                           "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,"
                           "dense_layers=2,rows=100,dim=8,bag=4,top_layers=1",
                           "candle_uno:branches=2,layers=2,hidden=32,in=16,doses=1,top_layers=1"};
    int64_t checked = 0, tightest = INT64_MAX;
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        gpp_graph_t *g = gpp_zoo_build(specs[k], &err);
        GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
        if (!g)
            continue;
        gpp_cluster_t c;
        gpp_cluster_init(&c, "v100-16g", 4, 4, &err);
        gpp_cost_t *adamw = gpp_cost_new(g, &c);
        c.load_ahead = 1; /* GPU agents: the load-ahead's buffers on the device */
        gpp_cost_t *ahead = gpp_cost_new(g, &c);
        c.alloc_rule = GPP_ALLOC_CLASSES; /* and the caching allocator's blocks */
        gpp_cost_t *cls = gpp_cost_new(g, &c);
        c.graphs = 1; /* and their passes replayed as CUDA graphs */
        gpp_cost_t *gra = gpp_cost_new(g, &c);
        c.graphs = 0;
        c.alloc_rule = GPP_ALLOC_ALIGN64;
        c.load_ahead = 0;
        c.optim_bufs = GPP_OPTIM_BUFS_SGD;
        gpp_cost_t *sgd = gpp_cost_new(g, &c);
        int *ops = calloc((size_t)g->n_ops, sizeof(int));
        for (int i = 0; i < g->n_ops; i++)
            ops[i] = i;
        /* the whole model, 2 replicas of micro-batch 5 (3 samples each), 2 in flight */
        gpp_stage_dev_t ahead_dev = {.alloc_rule = GPP_ALLOC_ALIGN64, .load_ahead = 1};
        gpp_memplan_cfg_t pc = {.optim_bufs = GPP_OPTIM_BUFS_ADAMW,
                                .batch = 20,
                                .n = 3,
                                .inflight = 2,
                                .slots = 4,
                                .dev = &ahead_dev};
        gpp_memplan_t *plan = gpp_memplan_new(g, g->n_ops, ops, &pc, &err);
        GPP_EXPECT_MSG(plan != NULL, "%s", err.msg);
        gpp_memplan_sum_t sm = {0};
        if (plan)
            gpp_memplan_summary(plan, &sm);
        gpp_memplan_destroy(&plan);
        /* the load-ahead: two micro-batches of the inputs and labels, each a
           block of 3 samples rounded to 64 bytes */
        int64_t src = 0;
        for (int i = 0; i < g->n_ops; i++) {
            int64_t x = gpp_optable[g->ops[i].type].role == GPP_ROLE_SOURCE
                            ? g->ops[i].out_bytes
                            : gpp_op_label_bytes(g, &g->ops[i]);
            src += x ? gpp_alloc_bytes(GPP_ALLOC_ALIGN64, 3 * x) : 0;
        }
        GPP_EXPECT(sm.ahead_bytes == 2 * src && src > 0);
        GPP_EXPECT(gpp_cost_stage_mem(ahead, g->n_ops, ops, 2, 5, 2, 20) == sm.total_bytes);
        /* CPU agents load no data ahead */
        GPP_EXPECT(gpp_cost_stage_mem(adamw, g->n_ops, ops, 2, 5, 2, 20) ==
                   sm.total_bytes - 2 * src);
        /* SGD keeps one state buffer, AdamW two: 4 bytes per parameter apart,
           in the blocks the allocator rounds (the dense parameters' flat
           buffer, each embedding table's own) */
        int64_t dense = 0, one_buf = 0;
        for (int i = 0; i < g->n_ops; i++)
            if (g->ops[i].sparse_params)
                one_buf += gpp_alloc_bytes(GPP_ALLOC_ALIGN64, 4 * g->ops[i].params);
            else
                dense += 4 * g->ops[i].params;
        one_buf += gpp_alloc_bytes(GPP_ALLOC_ALIGN64, dense);
        GPP_EXPECT(gpp_cost_stage_mem(adamw, g->n_ops, ops, 2, 5, 2, 20) -
                       gpp_cost_stage_mem(sgd, g->n_ops, ops, 2, 5, 2, 20) ==
                   one_buf);
        GPP_EXPECT(one_buf >= 4 * gpp_graph_params(g) &&
                   one_buf < 4 * gpp_graph_params(g) + 64 * 8);
        for (int lo = 0; lo < g->n_ops; lo++)
            for (int hi = lo + 1; hi <= g->n_ops; hi++)
                for (int d = 1; d <= 8; d++)
                    for (int infl = 4; infl <= 12; infl += 8) {
                        /* d 3, 4: d - 2 replicas, load-ahead; 5, 6: d - 4, and the
                           CUDA allocator's classes; 7, 8: d - 6, and CUDA graphs */
                        gpp_cost_t *cc = d > 6 ? gra : d > 4 ? cls : d > 2 ? ahead : adamw;
                        int dd = d > 6 ? d - 6 : d > 4 ? d - 4 : d > 2 ? d - 2 : d;
                        gpp_stage_cost_t sc;
                        gpp_cost_stage(cc, hi - lo, ops + lo, dd, 4, 16, &sc);
                        int64_t bound = gpp_cost_stage_mem_bound(&sc, infl, 4, dd);
                        int64_t exact =
                            gpp_cost_stage_mem(cc, hi - lo, ops + lo, dd, 4, infl / 4, 16);
                        GPP_EXPECT_MSG(bound >= exact, "%s ops [%d, %d) d=%d: bound %lld < %lld",
                                       g->spec, lo, hi, d, (long long)bound, (long long)exact);
                        if (exact > 0 && bound - exact < tightest)
                            tightest = bound - exact;
                        checked++;
                    }
        free(ops);
        gpp_cost_destroy(&adamw);
        gpp_cost_destroy(&ahead);
        gpp_cost_destroy(&cls);
        gpp_cost_destroy(&gra);
        gpp_cost_destroy(&sgd);
        gpp_graph_destroy(&g);
    }
    printf("  %lld stages: search bound >= executor's peak (closest %lld bytes above)\n",
           (long long)checked, (long long)tightest);
}

static const gpp_test_case_t cases[] = {
    {"presets", t_presets},
    {"roofline_monotone", t_roofline_monotone},
    {"gemm_split", t_gemm_split},
    {"links_allreduce", t_links_allreduce},
    {"profile_graph", t_profile_graph},
    {"malformed", t_malformed},
    {"sparse_grad", t_sparse_grad},
    {"cpu_share", t_cpu_share},
    {"profile_forward", t_profile_forward},
    {"profile_rows", t_profile_rows},
    {"reserved_forms", t_reserved_forms},
    {"kernel_stash", t_kernel_stash},
    {"workspace", t_workspace},
    {"out_bytes", t_out_bytes},
    {"precision", t_precision},
    {"profile_keep", t_profile_keep},
    {"profile_source", t_profile_source},
    {"profile_curve", t_profile_curve},
    {"profile_sizes", t_profile_sizes},
    {"stage_mem", t_stage_mem},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
