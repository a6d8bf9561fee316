/* gpp_cost: profile-based and roofline op times, stage cost and memory,
 * profile.json reading and writing (devices, links and the roofline are in
 * gpp_cost_device.c). See gpp_cost.h and docs/planner.md. */
#include "planner/gpp_cost.h"

#include <assert.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_json.h"
#include "model/gpp_memplan.h"
#include "model/gpp_optable.h"

#define PROFILE_MAX_BYTES ((size_t)256 << 20)

int64_t gpp_cluster_mem_bound(const gpp_cluster_t *c)
{
    if (c->mem_bound_bytes > 0)
        return c->mem_bound_bytes;
    return c->device.mem_bytes - GPP_CONTEXT_BYTES;
}

int gpp_cluster_optim_bufs(const gpp_cluster_t *c)
{
    return c->optim_bufs > 0 ? c->optim_bufs : GPP_OPTIM_BUFS_ADAMW;
}
/* ---- cost model ---- */

typedef struct {
    int n;       /* table points; 0 = roofline */
    int *mbs;    /* ascending micro-batch sizes */
    double *ms;  /* forward+backward ms at mbs[i] */
    double *fwd; /* forward ms at mbs[i] (the optional "forward" table), or NULL:
                    then forward is a third of ms (backward ~ 2x forward) */
    /* reserved_mem: a number (rm_n == 0: reserved_bytes at every size) or a
       table {"<micro-batch>": bytes} (rm_n points, ascending rm_mbs) */
    int64_t reserved_bytes;
    int64_t kstash; /* "kernel_stash" bytes per sample; valid when has_kstash */
    int has_kstash;
    gpp_work_t work; /* "workspace"; valid when has_work */
    int has_work;
    int64_t obytes; /* "out_bytes" per sample; valid when has_obytes */
    int has_obytes;
    int rm_n;
    int *rm_mbs;
    double *rm_bytes;
} s_prof_t;

struct gpp_cost {
    const gpp_graph_t *g;
    gpp_cluster_t cl;
    s_prof_t *prof;        /* [n_ops] */
    int64_t *kstash;       /* [n_ops] the profile's kernel stashes (-1: the op table's), or
                              NULL when no attached entry has one (gpp_stage_mem's argument) */
    int64_t *stash;        /* [n_ops] with kstash: each op's stash with the profile's kernel
                              stash (gpp_cost_op_stash_bytes), made once per attach */
    gpp_work_t *work;      /* [n_ops] the profile's workspaces (fixed -1: the op table's), or
                              NULL when no attached entry has one (gpp_stage_mem's argument) */
    int64_t *obytes;       /* [n_ops] the profile's output bytes per sample (-1: the graph's
                              fp32 figure), or NULL when no attached entry has one
                              (gpp_stage_mem's argument) */
    char prof_origin[256]; /* the last attached profile (file or "the agents' profile") */
    /* its GPP_PROFILE_META record's device and precision ("" when absent) */
    char prof_device[96], prof_precision[8];
};

static double s_share(const gpp_cluster_t *c)
{
    return c->compute_share > 0 && c->compute_share < 1 ? c->compute_share : 1.0;
}

/* Op k's output bytes per sample with no profile figure: the cluster's
 * bf16 tensors (a cuda job at bf16) halve every op's but data's (the CUDA
 * backend's rule, gpp_backend_op_out_dtype: every other op type takes
 * bf16); -1 (the graph's fp32 figure) otherwise. */
static int64_t s_default_obytes(const gpp_cost_t *c, int k)
{
    const gpp_op_t *o = &c->g->ops[k];
    if (!c->cl.bf16_tensors || o->type == GPP_OP_INPUT ||
        gpp_optable[o->type].role == GPP_ROLE_OPAQUE || o->n_outputs == 0)
        return -1;
    return o->out_bytes / 2;
}

/* c->obytes from the profile's figures and the defaults: NULL when every
 * op has the graph's figure */
static void s_obytes_make(gpp_cost_t *c)
{
    free(c->obytes);
    c->obytes = NULL;
    for (int k = 0; k < c->g->n_ops; k++) {
        int64_t v = c->prof[k].has_obytes ? c->prof[k].obytes : s_default_obytes(c, k);
        if (v >= 0 && !c->obytes) {
            c->obytes = gpp_xcalloc((size_t)c->g->n_ops, sizeof *c->obytes);
            for (int j = 0; j < k; j++)
                c->obytes[j] = -1;
        }
        if (c->obytes)
            c->obytes[k] = v;
    }
}

gpp_cost_t *gpp_cost_new(const gpp_graph_t *g, const gpp_cluster_t *c)
{
    assert(g->finalized && c->n_devices >= 1 && c->gpus_per_node >= 1);
    gpp_cost_t *self = gpp_xcalloc(1, sizeof *self);
    self->g = g;
    self->cl = *c;
    /* devices that share compute (CPU agents on fewer cores) run slower:
       scale the roofline's device; profiled times are scaled in s_op_ms */
    double share = s_share(c);
    self->cl.device.peak_flops *= share;
    self->cl.device.mem_bw_bytes_per_s *= share;
    self->prof = gpp_xcalloc((size_t)(g->n_ops > 0 ? g->n_ops : 1), sizeof *self->prof);
    s_obytes_make(self);
    return self;
}

static void s_prof_clear(s_prof_t *p)
{
    free(p->mbs);
    free(p->ms);
    free(p->fwd);
    free(p->rm_mbs);
    free(p->rm_bytes);
    memset(p, 0, sizeof *p);
}

void gpp_cost_destroy(gpp_cost_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_cost_t *self = *self_p;
    for (int i = 0; i < self->g->n_ops; i++)
        s_prof_clear(&self->prof[i]);
    free(self->prof);
    free(self->kstash);
    free(self->obytes);
    free(self->stash);
    free(self->work);
    free(self);
    *self_p = NULL;
}

const gpp_cluster_t *gpp_cost_cluster(const gpp_cost_t *c)
{
    return &c->cl;
}

/* Interpolates a table over the micro-batch sizes mbs: linear between
 * points, the per-sample rate of the nearest end beyond them (reserved_mem;
 * runtimes beyond the table follow the device curve instead, s_op_ms). */
static double s_table_at(int n, const int *mbs, const double *v, int samples)
{
    if (samples <= mbs[0])
        return v[0] * samples / mbs[0];
    if (samples >= mbs[n - 1])
        return v[n - 1] * samples / mbs[n - 1];
    int i = 1;
    while (mbs[i] < samples)
        i++;
    double f = (double)(samples - mbs[i - 1]) / (double)(mbs[i] - mbs[i - 1]);
    return v[i - 1] + f * (v[i] - v[i - 1]);
}

static double s_profile_ms(const s_prof_t *p, const double *ms, int samples)
{
    return s_table_at(p->n, p->mbs, ms, samples);
}

/* An op's reserved_mem for `samples` samples per replica: the number, or
 * the table interpolated as runtimes are (s_table_at). */
static int64_t s_reserved_at(const s_prof_t *p, int samples)
{
    if (!p->rm_n)
        return p->reserved_bytes;
    return (int64_t)llround(s_table_at(p->rm_n, p->rm_mbs, p->rm_bytes, samples));
}

/* The device curve: roofline forward and backward of op for `samples`
 * samples (see the file comment of gpp_cost.h). */
static void s_roof_ms(const gpp_cost_t *c, int op, int samples, double *fwd, double *bwd)
{
    const gpp_op_t *o = &c->g->ops[op];
    const gpp_device_t *dev = &c->cl.device;
    double act = c->cl.bf16_tensors && o->type != GPP_OP_INPUT ? 0.5 : 1.0; /* bf16 or fp32 */
    double bytes = (double)o->io_bytes * samples * act + (double)o->weight_io_bytes;
    const gpp_op_info_t *t = &gpp_optable[o->type];
    int kf = t->fwd_kernels;
    if (o->type == GPP_OP_INPUT) {
        *fwd = gpp_roofline_ms(dev, 0.0, bytes, 0, 0);
        *bwd = 0.0;
        return;
    }
    *fwd = gpp_roofline_ms(dev, o->fwd_flops * samples, bytes / 3.0, kf, t->fwd_gemms);
    *bwd = gpp_roofline_ms(dev, o->bwd_flops * samples, 2.0 * bytes / 3.0, 2 * kf, t->bwd_gemms);
}

/* A time measured at b samples carried to m samples along the device
 * curve: t(b) * roof(m) / roof(b); linear (t(b) * m / b) where the curve
 * has no time at b (an op without FLOPs, bytes or kernels). */
static double s_along_curve(double t_b, double roof_b, double roof_m, int b, int m)
{
    return roof_b > 0 ? t_b * roof_m / roof_b : t_b * m / b;
}

static void s_op_ms(const gpp_cost_t *c, int op, int samples, double *fwd, double *bwd)
{
    const s_prof_t *p = &c->prof[op];
    if (p->n == 0) {
        s_roof_ms(c, op, samples, fwd, bwd);
        return;
    }
    /* inside the table: linear between measured sizes; outside it: the
       nearest end's measurement along the device's curve, forward and
       backward each on its own curve */
    int lo = p->mbs[0], hi = p->mbs[p->n - 1];
    int at = samples < lo ? lo : samples > hi ? hi : samples;
    double share = s_share(&c->cl);
    double t = s_profile_ms(p, p->ms, at) / share;
    double f = p->fwd ? s_profile_ms(p, p->fwd, at) / share : t / 3.0;
    if (f > t)
        f = t;
    *fwd = f;
    *bwd = t - f;
    if (at != samples) {
        double rf_at, rb_at, rf, rb;
        s_roof_ms(c, op, at, &rf_at, &rb_at);
        s_roof_ms(c, op, samples, &rf, &rb);
        *fwd = s_along_curve(f, rf_at, rf, at, samples);
        *bwd = s_along_curve(t - f, rb_at, rb, at, samples);
    }
}

double gpp_cost_op_fwd_ms(const gpp_cost_t *c, int op, int samples)
{
    double f, b;
    s_op_ms(c, op, samples, &f, &b);
    return f;
}

double gpp_cost_op_bwd_ms(const gpp_cost_t *c, int op, int samples)
{
    double f, b;
    s_op_ms(c, op, samples, &f, &b);
    return b;
}

int gpp_cost_op_profiled(const gpp_cost_t *c, int op)
{
    return c->prof[op].n > 0;
}

int gpp_cost_profile_note(const gpp_cost_t *c, int max_samples, char *buf, size_t len)
{
    /* over the profiled ops: how many time one size (and which sizes), how
       many miss part of 1..max_samples, and the sizes their tables span */
    int n_one = 0, n_short = 0, one_lo = 1 << 30, one_hi = 0, lo = 1 << 30, hi = 0;
    for (int k = 0; k < c->g->n_ops; k++) {
        const s_prof_t *p = &c->prof[k];
        if (!p->n || (p->mbs[0] <= 1 && p->mbs[p->n - 1] >= max_samples))
            continue;
        n_short++;
        lo = p->mbs[0] < lo ? p->mbs[0] : lo;
        hi = p->mbs[p->n - 1] > hi ? p->mbs[p->n - 1] : hi;
        if (p->n == 1) {
            n_one++;
            one_lo = p->mbs[0] < one_lo ? p->mbs[0] : one_lo;
            one_hi = p->mbs[0] > one_hi ? p->mbs[0] : one_hi;
        }
    }
    if (!n_short)
        return 0;
    const char *curve = c->cl.device.name;
    if (n_one == n_short && one_lo == one_hi)
        snprintf(buf, len,
                 "profile %s times one micro-batch size (%d) for %d ops; other sizes "
                 "extrapolated with the %s curve",
                 c->prof_origin, one_lo, n_one, curve);
    else if (n_one == n_short)
        snprintf(buf, len,
                 "profile %s times one micro-batch size (%d..%d) for %d ops; other sizes "
                 "extrapolated with the %s curve",
                 c->prof_origin, one_lo, one_hi, n_one, curve);
    else
        snprintf(buf, len,
                 "profile %s times %d ops at micro-batch sizes %d..%d only; sizes outside "
                 "them (the planner uses 1..%d) extrapolated with the %s curve",
                 c->prof_origin, n_short, lo, hi, max_samples, curve);
    return 1;
}

int64_t gpp_cost_op_reserved_bytes(const gpp_cost_t *c, int op)
{
    const s_prof_t *p = &c->prof[op];
    return p->rm_n ? s_reserved_at(p, p->rm_mbs[p->rm_n - 1]) : p->reserved_bytes;
}

int64_t gpp_cost_op_reserved_at(const gpp_cost_t *c, int op, int samples)
{
    return s_reserved_at(&c->prof[op], samples > 0 ? samples : 1);
}

/* the kernel stash of op: the profile's when it has one (-1: the table's) */
static int64_t s_kstash(const gpp_cost_t *c, int op)
{
    const s_prof_t *p = &c->prof[op];
    return p->has_kstash && gpp_optable[c->g->ops[op].type].role != GPP_ROLE_OPAQUE ? p->kstash
                                                                                    : -1;
}

int64_t gpp_cost_stage_param_copy_bytes(const gpp_cost_t *c, int n_ops, const int *ops)
{
    int64_t b = 0;
    for (int k = 0; c->cl.bf16_tensors && k < n_ops; k++)
        b += gpp_op_param_copy_bytes(c->g, &c->g->ops[ops[k]], c->cl.alloc_rule);
    return b;
}

int64_t gpp_cost_op_out_bytes(const gpp_cost_t *c, int op)
{
    return c->obytes && c->obytes[op] >= 0 ? c->obytes[op] : c->g->ops[op].out_bytes;
}

gpp_work_t gpp_cost_op_workspace(const gpp_cost_t *c, int op)
{
    return c->work && c->work[op].fixed >= 0 ? c->work[op] : gpp_op_workspace(c->g, &c->g->ops[op]);
}

int64_t gpp_cost_op_stash_bytes(const gpp_cost_t *c, int op)
{
    return c->stash ? c->stash[op] : c->g->ops[op].stash_bytes;
}

double gpp_cost_op_grad_bytes(const gpp_cost_t *c, int op, int batch)
{
    const gpp_op_t *o = &c->g->ops[op];
    double dense = 4.0 * (double)o->params;
    if (!o->sparse_params || o->n_inputs < 1)
        return dense;
    /* rows a mini-batch touches: bag indices per sample, dim floats per row */
    double touched = (double)batch * (double)c->g->ops[o->inputs[0]].cols * (double)o->dim * 4.0;
    return touched < dense ? touched : dense;
}

const gpp_link_t *gpp_cost_p2p_link(const gpp_cost_t *c)
{
    return c->cl.n_devices <= c->cl.gpus_per_node ? &c->cl.intra : &c->cl.inter;
}

const gpp_link_t *gpp_cost_group_link(const gpp_cost_t *c, int d)
{
    return d <= c->cl.gpus_per_node ? &c->cl.intra : &c->cl.inter;
}

int64_t gpp_cost_act_bytes(int64_t stash_bytes, int inflight, int micro_batch, int devices)
{
    int64_t mbs_in_flight = (inflight + micro_batch - 1) / micro_batch;
    int64_t per_replica = (micro_batch + devices - 1) / devices;
    return stash_bytes * mbs_in_flight * per_replica;
}

int gpp_cost_step_kernels(int param_ops, int sparse_ops)
{
    return 2 * (param_ops > sparse_ops) + 2 * sparse_ops;
}

double gpp_cost_step_ms(const gpp_cost_t *c, double grad_bytes, int kernels)
{
    if (kernels <= 0)
        return 0.0;
    /* element-wise: no GEMM, so no fill */
    return gpp_roofline_ms(&c->cl.device, 12.0 * (grad_bytes / 4), 7.0 * grad_bytes, kernels, 0);
}

void gpp_cost_stage(const gpp_cost_t *c, int n_ops, const int *ops, int devices, int micro_batch,
                    int batch, gpp_stage_cost_t *out)
{
    const gpp_graph_t *g = c->g;
    memset(out, 0, sizeof *out);
    int m = (micro_batch + devices - 1) / devices;
    char *in = gpp_xcalloc((size_t)g->n_ops, 1);
    char *seen = gpp_xcalloc((size_t)g->n_ops, 1);
    for (int k = 0; k < n_ops; k++)
        in[ops[k]] = 1;
    double bnd_bytes = 0, grad = 0;
    int n_bnd = 0, param_ops = 0, sparse_ops = 0;
    for (int k = 0; k < n_ops; k++) {
        const gpp_op_t *o = &g->ops[ops[k]];
        double f, b;
        s_op_ms(c, ops[k], m, &f, &b);
        out->fwd_ms += f;
        out->bwd_ms += b;
        out->weight_bytes += gpp_cost_op_state_bytes(c, ops[k], batch);
        out->stash_bytes += gpp_cost_op_stash_bound(c, ops[k]);
        out->work_bytes += gpp_cost_op_work_bytes(c, ops[k]);
        out->reserved_bytes += s_reserved_at(&c->prof[ops[k]], m);
        grad += gpp_cost_op_grad_bytes(c, ops[k], batch);
        param_ops += o->params > 0;
        sparse_ops += o->params > 0 && o->sparse_params;
        for (int j = 0; j < o->n_outputs; j++)
            if (!in[o->outputs[j]]) {
                bnd_bytes += (double)gpp_cost_op_out_bytes(c, ops[k]);
                n_bnd++;
                break;
            }
        for (int j = 0; j < o->n_inputs; j++) {
            int q = o->inputs[j];
            if (!in[q] && !seen[q]) {
                seen[q] = 1;
                bnd_bytes += (double)gpp_cost_op_out_bytes(c, q);
                n_bnd++;
            }
        }
    }
    free(in);
    free(seen);
    const gpp_link_t *l = gpp_cost_p2p_link(c);
    /* each boundary tensor: activations one way in forward, gradients back in backward */
    out->comm_ms = 2.0 * n_bnd * l->alpha_ms + 2.0 * m * bnd_bytes / l->bw_bytes_per_s * 1e3;
    out->allreduce_ms = gpp_allreduce_ms(gpp_cost_group_link(c, devices), devices, grad);
    out->step_ms = gpp_cost_step_ms(c, grad, gpp_cost_step_kernels(param_ops, sparse_ops));
    out->tps_ms = (out->fwd_ms + out->bwd_ms + out->comm_ms) / micro_batch +
                  (out->allreduce_ms + out->step_ms) / batch;
    /* boundary tensors: received ones kept for a backward, sent ones kept
       until it; received ones alive in the running forward */
    int64_t bnd = gpp_cost_bnd_copies(c) * gpp_cost_mem_bound(c, (int64_t)bnd_bytes, n_bnd);
    out->stash_bytes += bnd;
    out->work_bytes += bnd + gpp_cost_workspace_bound(c);
}

int64_t gpp_cost_mem_bound(const gpp_cost_t *c, int64_t bytes, int64_t blocks)
{
    return gpp_alloc_bound(c->cl.alloc_rule, bytes) + blocks * gpp_alloc_floor(c->cl.alloc_rule);
}

int64_t gpp_cost_op_state_bytes(const gpp_cost_t *c, int op, int batch)
{
    const gpp_op_t *o = &c->g->ops[op];
    int bufs = gpp_cluster_optim_bufs(&c->cl);
    /* dense: a share of the value, gradient and optimizer-state buffers;
       sparse: value, state, slot map, row ids, rows */
    int64_t w = gpp_cost_mem_bound(c, gpp_op_state_bytes(c->g, o, bufs, batch),
                                   o->sparse_params ? 4 + bufs : 2 + bufs);
    /* + the bf16 copies of a product's parameters (a bf16 cuda job) */
    if (c->cl.bf16_tensors)
        w += gpp_op_param_copy_bytes(c->g, o, c->cl.alloc_rule);
    /* + a loss's value in each of at most `batch` micro-batch slots */
    return w + (gpp_optable[o->type].role == GPP_ROLE_LOSS
                    ? gpp_cost_mem_bound(c, 4 * (int64_t)batch, batch)
                    : 0);
}

int64_t gpp_cost_op_stash_bound(const gpp_cost_t *c, int op)
{
    return gpp_cost_mem_bound(c, gpp_cost_op_stash_bytes(c, op), 3);
}

/* Everything one micro-batch may hold beyond the stashes, per sample: each
 * output, label and gradient (the larger of the forward's transients and
 * the backward's gradients is at most their sum over outputs), and, where
 * the agents load ahead, the two device buffers of a SOURCE op's samples or
 * a loss's labels (gpp_stage_mem_t.ahead_bytes). Replayed as CUDA graphs,
 * also the feed buffer of a SOURCE op's samples or a loss's labels; the
 * pool's most blocks of each size stay within the same sum (a size's count
 * while one micro-batch runs is at most what it keeps plus what its
 * forward or its backward allocates of that size, each at most once per
 * output: gpp_cost_bnd_copies has the rest). */
int64_t gpp_cost_op_work_bytes(const gpp_cost_t *c, int op)
{
    const gpp_op_t *o = &c->g->ops[op];
    int64_t label = gpp_op_label_bytes(c->g, o), w = o->out_bytes + label;
    gpp_op_role_t role = gpp_optable[o->type].role;
    int64_t src = role == GPP_ROLE_SOURCE ? o->out_bytes : role == GPP_ROLE_LOSS ? label : 0;
    if (c->cl.load_ahead)
        w += 2 * src;
    if (c->cl.graphs)
        w += src;
    return gpp_cost_mem_bound(c, w, c->cl.graphs ? 8 : 7);
}

int gpp_cost_bnd_copies(const gpp_cost_t *c)
{
    /* each micro-batch in flight has a lane of its own in the stage's
       memory plan (model/gpp_memplan.h), which holds a boundary tensor and
       its gradient at once at the end of its backward (a received input's
       gradient waits there to be sent) */
    (void)c;
    return 2;
}

int64_t gpp_cost_workspace_bound(const gpp_cost_t *c)
{
    /* a stage's workspace is its largest request, w(n) = a n + c <= n w(1):
       the graph's largest w(1) bounds every stage's per sample */
    int64_t w = 0;
    for (int i = 0; i < c->g->n_ops; i++) {
        gpp_work_t x = gpp_cost_op_workspace(c, i);
        w = x.fixed + x.per_sample > w ? x.fixed + x.per_sample : w;
    }
    return w ? gpp_cost_mem_bound(c, w, 1) : 0; /* one block, when any op asks */
}

int64_t gpp_cost_stage_mem_bound(const gpp_stage_cost_t *sc, int inflight, int micro_batch,
                                 int devices)
{
    int64_t m = (micro_batch + devices - 1) / devices;
    return sc->weight_bytes + sc->reserved_bytes +
           gpp_cost_act_bytes(sc->stash_bytes, inflight, micro_batch, devices) + sc->work_bytes * m;
}

int64_t gpp_cost_stage_mem(const gpp_cost_t *c, int n_ops, const int *ops, int devices,
                           int micro_batch, int mbs, int batch)
{
    int m = (micro_batch + devices - 1) / devices;
    int slots = (batch + micro_batch - 1) / micro_batch;
    gpp_stage_dev_t dev = {.kernel_stash = c->kstash,
                           .work = c->work,
                           .out_bytes = c->obytes,
                           .param_copies = c->cl.bf16_tensors,
                           .alloc_rule = c->cl.alloc_rule,
                           .load_ahead = c->cl.load_ahead,
                           .graphs = c->cl.graphs};
    /* no more micro-batches in flight than there are */
    int inflight = mbs < 1 ? 1 : slots > 0 && mbs > slots ? slots : mbs;
    gpp_memplan_cfg_t cfg = {.optim_bufs = gpp_cluster_optim_bufs(&c->cl),
                             .batch = batch,
                             .n = m,
                             .inflight = inflight,
                             .slots = slots,
                             .dev = &dev};
    gpp_err_t err = {{0}};
    gpp_memplan_t *plan = gpp_memplan_new(c->g, n_ops, ops, &cfg, &err);
    assert(plan); /* a stage is a set of the graph's ops, its micro-batch >= 1 */
    int64_t reserved = 0;
    for (int k = 0; k < n_ops; k++)
        reserved += s_reserved_at(&c->prof[ops[k]], m);
    int64_t total = gpp_memplan_total(plan) + reserved;
    gpp_memplan_destroy(&plan);
    return total;
}

/* ---- profile.json ---- */

typedef struct {
    int id;          /* the file's id */
    const char *key; /* the file's key string */
    cJSON *entry;
    char name[GPP_NAME_LEN];
} s_entry_t;

static int s_entry_cmp(const void *a, const void *b)
{
    const s_entry_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Parses the top level: entries sorted by id, with unique names ("name", or
 * "name#id" when a name repeats). Caller frees *entries_out. */
static int s_profile_entries(const cJSON *root, const char *origin, s_entry_t **entries_out,
                             int *n_out, gpp_err_t *err)
{
    if (!cJSON_IsObject(root))
        return gpp_err_set(err, "%s: profile must be a JSON object keyed by op id", origin);
    int n = cJSON_GetArraySize(root);
    if (cJSON_GetObjectItemCaseSensitive(root, GPP_PROFILE_META))
        n--; /* gpp's own record of what was profiled, not an op */
    if (n < 1)
        return gpp_err_set(err, "%s: profile has no ops", origin);
    s_entry_t *e = gpp_xcalloc((size_t)n, sizeof *e);
    int i = 0;
    for (cJSON *it = root->child; it; it = it->next, i++) {
        if (strcmp(it->string, GPP_PROFILE_META) == 0) {
            i--;
            continue;
        }
        char *end = NULL;
        long id = strtol(it->string, &end, 10);
        if (!it->string[0] || *end || id < 0 || id > 1000000000L) {
            gpp_err_set(err, "%s: op key '%s' is not a non-negative integer id", origin,
                        it->string);
            goto fail;
        }
        e[i].id = (int)id;
        e[i].key = it->string;
        e[i].entry = it;
        if (!cJSON_IsObject(it)) {
            gpp_err_set(err, "%s: op %s: entry must be an object", origin, it->string);
            goto fail;
        }
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (!cJSON_IsString(nm) || !nm->valuestring[0]) {
            gpp_err_set(err, "%s: op %s: field 'name' missing or not a non-empty string", origin,
                        it->string);
            goto fail;
        }
    }
    qsort(e, (size_t)n, sizeof *e, s_entry_cmp);
    for (i = 1; i < n; i++)
        if (e[i].id == e[i - 1].id) {
            gpp_err_set(err, "%s: op id %d appears twice", origin, e[i].id);
            goto fail;
        }
    for (i = 0; i < n; i++) {
        const char *nm = cJSON_GetObjectItemCaseSensitive(e[i].entry, "name")->valuestring;
        int dup = 0;
        for (int j = 0; j < n && !dup; j++)
            dup =
                j != i &&
                strcmp(nm, cJSON_GetObjectItemCaseSensitive(e[j].entry, "name")->valuestring) == 0;
        if (dup)
            snprintf(e[i].name, sizeof e[i].name, "%.*s#%d", GPP_NAME_LEN - 13, nm, e[i].id);
        else
            snprintf(e[i].name, sizeof e[i].name, "%s", nm);
    }
    *entries_out = e;
    *n_out = n;
    return 0;
fail:
    free(e);
    return -1;
}

/* The largest byte count (weights, per-sample input) a profile may declare:
 * 1 TiB, over ten times the largest device preset's memory, so that every
 * byte figure derived from it (x3 for gradients and optimizer traffic, x4
 * bytes per float) stays exact in int64. */
#define S_PROFILE_MAX_BYTES 1099511627776.0

static int s_get_nonneg(const cJSON *o, const char *field, int required, double *v,
                        const char *origin, const char *key, gpp_err_t *err)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!f) {
        *v = 0;
        if (required)
            return gpp_err_set(err, "%s: op %s: field '%s' missing", origin, key, field);
        return 0;
    }
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) || f->valuedouble < 0)
        return gpp_err_set(err, "%s: op %s: field '%s' must be a non-negative number", origin, key,
                           field);
    *v = f->valuedouble;
    return 0;
}

static int s_int_cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The one check of an op's measured table, whichever way it came (a
 * profile.json entry or the agents' rows): micro-batch sizes 1..2^24, each
 * once; forward+backward ms[i] finite and >= 0; forward fwd[i] (fwd NULL:
 * none, a third is assumed) between 0 and ms[i]. NaN stands for a missing
 * or non-numeric figure. Fills p sorted by micro-batch size. */
static int s_prof_set(s_prof_t *p, int n, const int *mbs, const double *ms, const double *fwd,
                      const char *origin, const char *key, gpp_err_t *err)
{
    for (int i = 0; i < n; i++) {
        if (mbs[i] < 1 || mbs[i] > 1 << 24)
            return gpp_err_set(err, "%s: op %s: runtime key '%d' is not a micro-batch size >= 1",
                               origin, key, mbs[i]);
        if (!isfinite(ms[i]) || ms[i] < 0)
            return gpp_err_set(err,
                               "%s: op %s: runtime[\"%d\"] must be a non-negative number of ms",
                               origin, key, mbs[i]);
        if (fwd && (!isfinite(fwd[i]) || fwd[i] < 0 || fwd[i] > ms[i] * (1 + 1e-9)))
            return gpp_err_set(err,
                               "%s: op %s: forward[\"%d\"] must be a number of ms between 0 "
                               "and runtime[\"%d\"] (forward is part of forward+backward)",
                               origin, key, mbs[i], mbs[i]);
    }
    int *order = gpp_xcalloc((size_t)n, sizeof(int) * 2); /* (micro-batch, index) pairs */
    for (int i = 0; i < n; i++) {
        order[2 * i] = mbs[i];
        order[2 * i + 1] = i;
    }
    qsort(order, (size_t)n, sizeof(int) * 2, s_int_cmp);
    for (int i = 1; i < n; i++)
        if (order[2 * i] == order[2 * i - 2]) {
            int b = order[2 * i];
            free(order);
            return gpp_err_set(err, "%s: op %s: runtime lists micro-batch %d twice", origin, key,
                               b);
        }
    s_prof_clear(p);
    p->n = n;
    p->mbs = gpp_xcalloc((size_t)n, sizeof(int));
    p->ms = gpp_xcalloc((size_t)n, sizeof(double));
    p->fwd = fwd ? gpp_xcalloc((size_t)n, sizeof(double)) : NULL;
    for (int i = 0; i < n; i++) {
        int j = order[2 * i + 1];
        p->mbs[i] = mbs[j];
        p->ms[i] = ms[j];
        if (fwd)
            p->fwd[i] = fwd[j];
    }
    free(order);
    return 0;
}

/* A JSON number, or NaN (s_prof_set refuses it) for anything else. */
static double s_json_ms(const cJSON *v)
{
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Reads an entry's optional reserved_mem into p: a number of bytes (the
 * authors' older files) or an object {"<micro-batch>": bytes} (their current
 * ones); keys and values are checked as runtime's are. */
static int s_parse_reserved(const cJSON *entry, s_prof_t *p, const char *origin, const char *key,
                            gpp_err_t *err)
{
    const cJSON *rm = cJSON_GetObjectItemCaseSensitive(entry, "reserved_mem");
    if (!cJSON_IsObject(rm)) {
        double v = 0;
        if (s_get_nonneg(entry, "reserved_mem", 0, &v, origin, key, err) || v > S_PROFILE_MAX_BYTES)
            return gpp_err_set(err,
                               "%s: op %s: field 'reserved_mem' must be a non-negative number "
                               "of bytes (at most 1 TiB) or an object {\"<micro-batch>\": bytes}",
                               origin, key);
        p->reserved_bytes = (int64_t)v;
        return 0;
    }
    int n = cJSON_GetArraySize(rm), i = 0;
    if (n < 1)
        return gpp_err_set(err, "%s: op %s: field 'reserved_mem' is an empty object", origin, key);
    int *order = gpp_xcalloc((size_t)n, sizeof(int) * 2); /* (micro-batch, index) pairs */
    double *v = gpp_xcalloc((size_t)n, sizeof *v);
    for (const cJSON *it = rm->child; it; it = it->next, i++) {
        char *end = NULL;
        long b = strtol(it->string, &end, 10);
        if (!it->string[0] || *end || b < 1 || b > 1 << 24) {
            gpp_err_set(err, "%s: op %s: reserved_mem key '%s' is not a micro-batch size >= 1",
                        origin, key, it->string);
            goto fail;
        }
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble > S_PROFILE_MAX_BYTES) {
            gpp_err_set(err,
                        "%s: op %s: reserved_mem[\"%s\"] must be a non-negative number of bytes "
                        "(at most 1 TiB)",
                        origin, key, it->string);
            goto fail;
        }
        order[2 * i] = (int)b;
        order[2 * i + 1] = i;
        v[i] = it->valuedouble;
    }
    qsort(order, (size_t)n, sizeof(int) * 2, s_int_cmp);
    for (i = 1; i < n; i++)
        if (order[2 * i] == order[2 * i - 2]) {
            gpp_err_set(err, "%s: op %s: reserved_mem lists micro-batch %d twice", origin, key,
                        order[2 * i]);
            goto fail;
        }
    free(p->rm_mbs);
    free(p->rm_bytes);
    p->rm_n = n;
    p->rm_mbs = gpp_xcalloc((size_t)n, sizeof(int));
    p->rm_bytes = gpp_xcalloc((size_t)n, sizeof(double));
    for (i = 0; i < n; i++) {
        p->rm_mbs[i] = order[2 * i];
        p->rm_bytes[i] = v[order[2 * i + 1]];
    }
    free(order);
    free(v);
    return 0;
fail:
    free(order);
    free(v);
    return -1;
}

/* The optional "workspace": {"fixed": bytes, "per_sample": bytes}, each a
 * whole number 0..1 TiB. */
static int s_parse_workspace(const cJSON *entry, s_prof_t *p, const char *origin, const char *key,
                             gpp_err_t *err)
{
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(entry, "workspace");
    if (!ws)
        return 0;
    double v[2] = {-1, -1};
    const char *names[2] = {"fixed", "per_sample"};
    for (int i = 0; i < 2 && cJSON_IsObject(ws); i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(ws, names[i]);
        if (cJSON_IsNumber(f) && isfinite(f->valuedouble) && f->valuedouble >= 0 &&
            f->valuedouble <= S_PROFILE_MAX_BYTES && f->valuedouble == floor(f->valuedouble))
            v[i] = f->valuedouble;
    }
    if (v[0] < 0 || v[1] < 0 || cJSON_GetArraySize(ws) != 2)
        return gpp_err_set(err,
                           "%s: op %s: field 'workspace' must be {\"fixed\": bytes, "
                           "\"per_sample\": bytes}, whole non-negative numbers (at most 1 TiB "
                           "each): the stream workspace the op's kernels ask for n samples is "
                           "fixed + n x per_sample; remove it to use the op table's figure",
                           origin, key);
    p->work = (gpp_work_t){(int64_t)v[0], (int64_t)v[1]};
    p->has_work = 1;
    return 0;
}

/* The optional whole number of bytes per sample `field` (at least min, at
 * most 1 TiB) into *out, *has set; absent: untouched. what: the field's
 * meaning, for the message. */
static int s_parse_bytes(const cJSON *entry, const char *field, int min, const char *what,
                         int64_t *out, int *has, const char *origin, const char *key,
                         gpp_err_t *err)
{
    if (!cJSON_GetObjectItemCaseSensitive(entry, field))
        return 0;
    double v = 0;
    if (s_get_nonneg(entry, field, 1, &v, origin, key, err) || v < min || v > S_PROFILE_MAX_BYTES ||
        v != floor(v))
        return gpp_err_set(err,
                           "%s: op %s: field '%s' must be a whole %s number of bytes per sample "
                           "(at most 1 TiB): %s",
                           origin, key, field, min ? "positive" : "non-negative", what);
    *out = (int64_t)v;
    *has = 1;
    return 0;
}

/* Reads one entry's runtime (and optional forward) table into p. */
static int s_parse_runtime(const cJSON *entry, s_prof_t *p, const char *origin, const char *key,
                           gpp_err_t *err)
{
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(entry, "runtime");
    if (!cJSON_IsObject(rt) || cJSON_GetArraySize(rt) < 1)
        return gpp_err_set(err,
                           "%s: op %s: field 'runtime' must be a non-empty object "
                           "{\"<micro-batch>\": ms}",
                           origin, key);
    /* optional "forward": {"<micro-batch>": forward ms} for every runtime key */
    const cJSON *fw = cJSON_GetObjectItemCaseSensitive(entry, "forward");
    if (fw && !cJSON_IsObject(fw))
        return gpp_err_set(err,
                           "%s: op %s: field 'forward' must be an object "
                           "{\"<micro-batch>\": forward ms}",
                           origin, key);
    int n = cJSON_GetArraySize(rt), i = 0, rc = -1;
    int *mbs = gpp_xcalloc((size_t)n, sizeof *mbs);
    double *ms = gpp_xcalloc((size_t)n, sizeof *ms);
    double *fwd = fw ? gpp_xcalloc((size_t)n, sizeof *fwd) : NULL;
    for (const cJSON *it = rt->child; it; it = it->next, i++) {
        char *end = NULL;
        long b = strtol(it->string, &end, 10);
        if (!it->string[0] || *end || b < 1 || b > 1 << 24) {
            gpp_err_set(err, "%s: op %s: runtime key '%s' is not a micro-batch size >= 1", origin,
                        key, it->string);
            goto done;
        }
        mbs[i] = (int)b;
        ms[i] = s_json_ms(it);
        if (fw)
            fwd[i] = s_json_ms(cJSON_GetObjectItemCaseSensitive(fw, it->string));
    }
    if (s_prof_set(p, n, mbs, ms, fwd, origin, key, err) < 0)
        goto done;
    if (fw && cJSON_GetArraySize(fw) != n) {
        gpp_err_set(err,
                    "%s: op %s: 'forward' must have exactly the micro-batch sizes of 'runtime'",
                    origin, key);
        goto done;
    }
    if (s_parse_reserved(entry, p, origin, key, err))
        goto done;
    if (s_parse_bytes(entry, "kernel_stash", 0,
                      "what the op's forward kernel keeps for its backward; remove it to use the "
                      "op table's figure",
                      &p->kstash, &p->has_kstash, origin, key, err) ||
        s_parse_bytes(entry, "out_bytes", 1,
                      "the op's output as the device keeps it; remove it to use the model's fp32 "
                      "figure",
                      &p->obytes, &p->has_obytes, origin, key, err))
        goto done;
    if (s_parse_workspace(entry, p, origin, key, err))
        goto done;
    rc = 0;
done:
    free(mbs);
    free(ms);
    free(fwd);
    return rc;
}

/* Moves the checked tables of tmp (ops with one) into the model; an op with
 * memory figures and no table (gpp_cost_attach_figures) keeps its times and
 * takes the figures. */
static void s_prof_commit(gpp_cost_t *c, s_prof_t *tmp)
{
    int any = 0, any_work = 0;
    for (int k = 0; k < c->g->n_ops; k++) {
        if (tmp[k].n) {
            s_prof_clear(&c->prof[k]);
            c->prof[k] = tmp[k];
            memset(&tmp[k], 0, sizeof tmp[k]);
        } else {
            if (tmp[k].has_kstash) {
                c->prof[k].has_kstash = 1;
                c->prof[k].kstash = tmp[k].kstash;
            }
            if (tmp[k].has_work) {
                c->prof[k].has_work = 1;
                c->prof[k].work = tmp[k].work;
            }
            if (tmp[k].has_obytes) {
                c->prof[k].has_obytes = 1;
                c->prof[k].obytes = tmp[k].obytes;
            }
        }
        any |= s_kstash(c, k) >= 0;
        any_work |= c->prof[k].has_work;
    }
    s_obytes_make(c);
    free(c->work);
    c->work = NULL;
    if (any_work) {
        c->work = gpp_xcalloc((size_t)c->g->n_ops, sizeof *c->work);
        for (int k = 0; k < c->g->n_ops; k++)
            c->work[k] = c->prof[k].has_work ? c->prof[k].work : (gpp_work_t){-1, -1};
    }
    free(c->kstash);
    free(c->stash);
    c->kstash = c->stash = NULL;
    if (any) {
        c->kstash = gpp_xcalloc((size_t)c->g->n_ops, sizeof *c->kstash);
        c->stash = gpp_xcalloc((size_t)c->g->n_ops, sizeof *c->stash);
        for (int k = 0; k < c->g->n_ops; k++) {
            const gpp_op_t *o = &c->g->ops[k];
            c->kstash[k] = s_kstash(c, k);
            c->stash[k] = c->kstash[k] < 0
                              ? o->stash_bytes
                              : o->stash_bytes - gpp_op_kernel_stash_bytes(c->g, o) + c->kstash[k];
        }
    }
}

static void s_prof_free(const gpp_cost_t *c, s_prof_t **tmp_p)
{
    for (int k = 0; k < c->g->n_ops; k++)
        s_prof_clear(&(*tmp_p)[k]);
    free(*tmp_p);
    *tmp_p = NULL;
}

/* The optional device and precision of a GPP_PROFILE_META record (older
 * files and the authors' have neither; the record itself is optional). */
static int s_profile_source(const cJSON *root, const char *origin, char *dev, size_t dev_len,
                            char *prec, size_t prec_len, gpp_err_t *err)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, GPP_PROFILE_META);
    if (!m)
        return 0;
    if (!cJSON_IsObject(m))
        return gpp_err_set(err, "%s: field '%s' must be an object", origin, GPP_PROFILE_META);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "device");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "precision");
    if (d && !cJSON_IsString(d))
        return gpp_err_set(err, "%s: field '%s.device' must be a string (the device's name)",
                           origin, GPP_PROFILE_META);
    if (p && (!cJSON_IsString(p) ||
              (strcmp(p->valuestring, "fp32") != 0 && strcmp(p->valuestring, "tf32") != 0 &&
               strcmp(p->valuestring, "bf16") != 0)))
        return gpp_err_set(err, "%s: field '%s.precision' must be \"fp32\", \"tf32\" or \"bf16\"",
                           origin, GPP_PROFILE_META);
    if (d)
        snprintf(dev, dev_len, "%s", d->valuestring);
    if (p)
        snprintf(prec, prec_len, "%s", p->valuestring);
    return 0;
}

int gpp_cost_profile_source(const gpp_cost_t *c, char *buf, size_t len)
{
    if (!c->prof_device[0] && !c->prof_precision[0])
        return 0;
    snprintf(buf, len, "profile %s measured on %s, %s matrix products", c->prof_origin,
             c->prof_device[0] ? c->prof_device : "an unnamed device",
             c->prof_precision[0] ? c->prof_precision : "fp32");
    return 1;
}

int gpp_cost_attach_profile_text(gpp_cost_t *c, const char *text, const char *origin,
                                 gpp_err_t *err)
{
    cJSON *root = gpp_json_parse(text, origin, err);
    if (!root)
        return -1;
    s_entry_t *e = NULL;
    int n = 0, rc = -1;
    s_prof_t *tmp = gpp_xcalloc((size_t)c->g->n_ops, sizeof *tmp);
    if (s_profile_entries(root, origin, &e, &n, err))
        goto done;
    for (int i = 0; i < n; i++) {
        int op = -1;
        for (int k = 0; k < c->g->n_ops && op < 0; k++)
            if (strcmp(c->g->ops[k].name, e[i].name) == 0)
                op = k;
        if (op < 0) {
            gpp_err_set(err,
                        "%s: op %s: name '%s' is not an op of model '%s'; was the profile "
                        "written for another model?",
                        origin, e[i].key, e[i].name, c->g->name);
            goto done;
        }
        if (tmp[op].n) {
            gpp_err_set(err, "%s: op %s: model op '%s' is profiled twice", origin, e[i].key,
                        e[i].name);
            goto done;
        }
        if (s_parse_runtime(e[i].entry, &tmp[op], origin, e[i].key, err))
            goto done;
        if (tmp[op].has_obytes && tmp[op].obytes > c->g->ops[op].out_bytes) {
            gpp_err_set(err,
                        "%s: op %s: out_bytes %lld is more than the model's fp32 figure %lld "
                        "bytes per sample; was the profile written for another model?",
                        origin, e[i].key, (long long)tmp[op].obytes,
                        (long long)c->g->ops[op].out_bytes);
            goto done;
        }
    }
    char dev[sizeof c->prof_device] = "", prec[sizeof c->prof_precision] = "";
    if (s_profile_source(root, origin, dev, sizeof dev, prec, sizeof prec, err))
        goto done;
    s_prof_commit(c, tmp); /* all good: replace */
    snprintf(c->prof_origin, sizeof c->prof_origin, "%s", origin);
    snprintf(c->prof_device, sizeof c->prof_device, "%s", dev);
    snprintf(c->prof_precision, sizeof c->prof_precision, "%s", prec);
    rc = 0;
done:
    s_prof_free(c, &tmp);
    free(e);
    cJSON_Delete(root);
    return rc;
}

/* gpp_cost_attach_rows, or with figures_only the rows' memory figures
 * alone (gpp_cost_attach_figures). */
static int s_attach_rows(gpp_cost_t *c, const gpp_cost_row_t *rows, size_t n_rows,
                         const char *origin, int figures_only, gpp_err_t *err)
{
    const gpp_graph_t *g = c->g;
    /* the rows grouped by op: op's rows are by_op[first[op] .. first[op + 1]) */
    int *first = gpp_xcalloc((size_t)g->n_ops + 1, sizeof *first);
    for (size_t i = 0; i < n_rows; i++) {
        if (rows[i].op < 0 || rows[i].op >= g->n_ops) {
            free(first);
            return gpp_err_set(err, "%s: row %zu: op %d, but model '%s' has ops 0..%d", origin, i,
                               rows[i].op, g->name, g->n_ops - 1);
        }
        first[rows[i].op + 1]++;
    }
    for (int op = 0; op < g->n_ops; op++)
        first[op + 1] += first[op];
    size_t cap = n_rows ? n_rows : 1;
    int *fill = gpp_xcalloc((size_t)g->n_ops, sizeof *fill);
    size_t *by_op = gpp_xcalloc(cap, sizeof *by_op);
    for (size_t i = 0; i < n_rows; i++)
        by_op[first[rows[i].op] + fill[rows[i].op]++] = i;
    int *mbs = gpp_xcalloc(cap, sizeof *mbs);
    double *ms = gpp_xcalloc(cap, sizeof *ms);
    double *fwd = gpp_xcalloc(cap, sizeof *fwd);
    s_prof_t *tmp = gpp_xcalloc((size_t)g->n_ops, sizeof *tmp);
    int rc = 0;
    for (int op = 0; op < g->n_ops && rc == 0; op++) {
        int k = 0, ks_rows = 0, ws_rows = 0, ob_rows = 0;
        int64_t ks = -1, ob = -1;
        gpp_work_t ws = {-1, -1};
        char key[GPP_NAME_LEN + 16];
        snprintf(key, sizeof key, "%d (%s)", op, g->ops[op].name);
        for (int j = first[op]; j < first[op + 1]; j++, k++) {
            const gpp_cost_row_t *r = &rows[by_op[j]];
            mbs[k] = r->micro_batch;
            ms[k] = r->fwd_ms + r->bwd_ms;
            fwd[k] = r->fwd_ms;
            if (r->has_kernel_stash) {
                if (r->kernel_stash < 0 || r->kernel_stash > (int64_t)S_PROFILE_MAX_BYTES ||
                    (ks >= 0 && r->kernel_stash != ks))
                    rc = gpp_err_set(err,
                                     "%s: op %s: kernel_stash %lld: must be 0..1 TiB bytes per "
                                     "sample and the same in every row of the op",
                                     origin, key, (long long)r->kernel_stash);
                ks = r->kernel_stash;
                ks_rows++;
            }
            if (r->has_workspace && rc == 0) {
                const gpp_work_t *w = &r->workspace;
                if (w->fixed < 0 || w->fixed > (int64_t)S_PROFILE_MAX_BYTES || w->per_sample < 0 ||
                    w->per_sample > (int64_t)S_PROFILE_MAX_BYTES ||
                    (ws_rows && (w->fixed != ws.fixed || w->per_sample != ws.per_sample)))
                    rc = gpp_err_set(err,
                                     "%s: op %s: workspace fixed %lld + per sample %lld bytes: "
                                     "each must be 0..1 TiB and the same in every row of the op",
                                     origin, key, (long long)w->fixed, (long long)w->per_sample);
                ws = *w;
                ws_rows++;
            }
            if (r->has_out_bytes && rc == 0) {
                if (r->out_bytes < 1 || r->out_bytes > g->ops[op].out_bytes ||
                    (ob_rows && r->out_bytes != ob))
                    rc = gpp_err_set(err,
                                     "%s: op %s: out_bytes %lld: must be 1..%lld (the model's "
                                     "fp32 figure) bytes per sample and the same in every row "
                                     "of the op",
                                     origin, key, (long long)r->out_bytes,
                                     (long long)g->ops[op].out_bytes);
                ob = r->out_bytes;
                ob_rows++;
            }
        }
        if (!k || rc)
            continue;
        if (!figures_only)
            rc = s_prof_set(&tmp[op], k, mbs, ms, fwd, origin, key, err);
        if (rc == 0 && ks_rows) {
            tmp[op].has_kstash = 1;
            tmp[op].kstash = ks;
        }
        if (rc == 0 && ws_rows) {
            tmp[op].has_work = 1;
            tmp[op].work = ws;
        }
        if (rc == 0 && ob_rows) {
            tmp[op].has_obytes = 1;
            tmp[op].obytes = ob;
        }
    }
    if (rc == 0) {
        s_prof_commit(c, tmp);
        if (!figures_only)
            snprintf(c->prof_origin, sizeof c->prof_origin, "%s", origin);
    }
    s_prof_free(c, &tmp);
    free(first);
    free(fill);
    free(by_op);
    free(mbs);
    free(ms);
    free(fwd);
    return rc;
}

int gpp_cost_attach_rows(gpp_cost_t *c, const gpp_cost_row_t *rows, size_t n_rows,
                         const char *origin, gpp_err_t *err)
{
    return s_attach_rows(c, rows, n_rows, origin, 0, err);
}

int gpp_cost_attach_figures(gpp_cost_t *c, const gpp_cost_row_t *rows, size_t n_rows,
                            const char *origin, gpp_err_t *err)
{
    return s_attach_rows(c, rows, n_rows, origin, 1, err);
}

/* {size: value} with each value printed to 17 significant digits: cJSON's
 * own printer settles for 15 when they parse back within a few ulps, and a
 * kept profile must give the bit-identical costs (so the same plan) when it
 * is read again. Values are finite (the profile checks passed). */
static cJSON *s_table_json(int n, const int *mbs, const double *v)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < n; i++) {
        char key[16], num[32];
        snprintf(key, sizeof key, "%d", mbs[i]);
        snprintf(num, sizeof num, "%.17g", v[i]);
        cJSON_AddRawToObject(o, key, num);
    }
    return o;
}

char *gpp_cost_profile_json(const gpp_cost_t *c, const char *model, const char *device)
{
    const gpp_graph_t *g = c->g;
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, GPP_PROFILE_META);
    cJSON_AddStringToObject(meta, "model", model);
    cJSON_AddStringToObject(meta, "device", device);
    cJSON_AddNumberToObject(meta, "ops", g->n_ops);
    if (c->prof_precision[0]) /* the attached profile's, kept */
        cJSON_AddStringToObject(meta, "precision", c->prof_precision);
    for (int k = 0; k < g->n_ops; k++) {
        const s_prof_t *p = &c->prof[k];
        if (!p->n)
            continue;
        const gpp_op_t *o = &g->ops[k];
        char key[16];
        snprintf(key, sizeof key, "%d", k);
        cJSON *e = cJSON_AddObjectToObject(root, key);
        cJSON_AddStringToObject(e, "name", o->name);
        cJSON *in = cJSON_AddArrayToObject(e, "inputs");
        cJSON *sz = cJSON_AddArrayToObject(e, "input_size");
        for (int j = 0; j < o->n_inputs; j++) {
            cJSON_AddItemToArray(in, cJSON_CreateNumber(o->inputs[j]));
            cJSON_AddItemToArray(sz, cJSON_CreateNumber((double)g->ops[o->inputs[j]].out_bytes));
        }
        cJSON_AddNumberToObject(e, "weight_size", (double)(o->params * 4));
        cJSON_AddItemToObject(e, "runtime", s_table_json(p->n, p->mbs, p->ms));
        if (p->fwd)
            cJSON_AddItemToObject(e, "forward", s_table_json(p->n, p->mbs, p->fwd));
        if (p->rm_n)
            cJSON_AddItemToObject(e, "reserved_mem", s_table_json(p->rm_n, p->rm_mbs, p->rm_bytes));
        else if (p->reserved_bytes)
            cJSON_AddNumberToObject(e, "reserved_mem", (double)p->reserved_bytes);
        if (p->has_kstash)
            cJSON_AddNumberToObject(e, "kernel_stash", (double)p->kstash);
        if (p->has_obytes)
            cJSON_AddNumberToObject(e, "out_bytes", (double)p->obytes);
        if (p->has_work) {
            cJSON *ws = cJSON_AddObjectToObject(e, "workspace");
            cJSON_AddNumberToObject(ws, "fixed", (double)p->work.fixed);
            cJSON_AddNumberToObject(ws, "per_sample", (double)p->work.per_sample);
        }
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(text);
    char *out = gpp_xrealloc(text, n + 2);
    out[n] = '\n';
    out[n + 1] = 0;
    return out;
}

void gpp_cost_set_profile_source(gpp_cost_t *c, const char *device_name, const char *precision)
{
    snprintf(c->prof_device, sizeof c->prof_device, "%s", device_name ? device_name : "");
    snprintf(c->prof_precision, sizeof c->prof_precision, "%s", precision ? precision : "");
}

int gpp_cost_profile_meta(const char *path, char *model, size_t model_len, char *device,
                          size_t device_len, int *n_ops, char *precision, size_t precision_len,
                          gpp_err_t *err)
{
    char *text = gpp_read_file(path, PROFILE_MAX_BYTES, err);
    if (!text)
        return -1;
    cJSON *root = gpp_json_parse(text, path, err);
    free(text);
    if (!root)
        return -1;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, GPP_PROFILE_META);
    const cJSON *mm = cJSON_GetObjectItemCaseSensitive(m, "model");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(m, "device");
    const cJSON *mo = cJSON_GetObjectItemCaseSensitive(m, "ops");
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "precision");
    int rc = 0;
    if (!cJSON_IsString(mm) || !cJSON_IsString(md) || !cJSON_IsNumber(mo) ||
        !(mo->valuedouble >= 0 && mo->valuedouble <= INT_MAX))
        rc = gpp_err_set(err,
                         "%s: field '%s' missing or not {\"model\": string, \"device\": string, "
                         "\"ops\": number}",
                         path, GPP_PROFILE_META);
    else {
        snprintf(model, model_len, "%s", mm->valuestring);
        snprintf(device, device_len, "%s", md->valuestring);
        *n_ops = (int)mo->valuedouble;
        snprintf(precision, precision_len, "%s", cJSON_IsString(mp) ? mp->valuestring : "fp32");
    }
    cJSON_Delete(root);
    return rc;
}

int gpp_cost_attach_profile(gpp_cost_t *c, const char *path, gpp_err_t *err)
{
    char *text = gpp_read_file(path, PROFILE_MAX_BYTES, err);
    if (!text)
        return -1;
    int rc = gpp_cost_attach_profile_text(c, text, path, err);
    free(text);
    return rc;
}

gpp_graph_t *gpp_profile_parse_graph(const char *text, const char *origin, gpp_err_t *err)
{
    cJSON *root = gpp_json_parse(text, origin, err);
    if (!root)
        return NULL;
    s_entry_t *e = NULL;
    int n = 0;
    gpp_graph_t *g = NULL;
    int **ins = NULL, *nin = NULL, *newid = NULL, *order = NULL, *indeg = NULL;
    double **insz = NULL;
    if (s_profile_entries(root, origin, &e, &n, err))
        goto fail;
    ins = gpp_xcalloc((size_t)n, sizeof *ins);
    insz = gpp_xcalloc((size_t)n, sizeof *insz);
    nin = gpp_xcalloc((size_t)n, sizeof *nin);
    for (int i = 0; i < n; i++) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(e[i].entry, "inputs");
        const cJSON *sz = cJSON_GetObjectItemCaseSensitive(e[i].entry, "input_size");
        if (in && !cJSON_IsArray(in)) {
            gpp_err_set(err, "%s: op %s: field 'inputs' must be an array of op ids", origin,
                        e[i].key);
            goto fail;
        }
        nin[i] = in ? cJSON_GetArraySize(in) : 0;
        ins[i] = gpp_xcalloc((size_t)nin[i] + 1, sizeof(int));
        insz[i] = gpp_xcalloc((size_t)nin[i] + 1, sizeof(double));
        int k = 0;
        for (const cJSON *it = in ? in->child : NULL; it; it = it->next, k++) {
            int pid = -1;
            if (cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble < INT_MAX)
                pid = (int)it->valuedouble; /* in range: the conversion is defined */
            else if (cJSON_IsString(it))
                pid = atoi(it->valuestring);
            s_entry_t key = {.id = pid};
            s_entry_t *hit = bsearch(&key, e, (size_t)n, sizeof *e, s_entry_cmp);
            if (!hit || (!cJSON_IsNumber(it) && !cJSON_IsString(it))) {
                gpp_err_set(err, "%s: op %s: inputs[%d] does not name an op id of this profile",
                            origin, e[i].key, k);
                goto fail;
            }
            ins[i][k] = (int)(hit - e);
            if (ins[i][k] == i) {
                gpp_err_set(err, "%s: op %s: lists itself as an input", origin, e[i].key);
                goto fail;
            }
        }
        if (nin[i] > 0) {
            if (cJSON_IsNumber(sz) && nin[i] == 1 && sz->valuedouble >= 0 &&
                sz->valuedouble <= S_PROFILE_MAX_BYTES) {
                insz[i][0] = sz->valuedouble;
            } else if (!cJSON_IsArray(sz) || cJSON_GetArraySize(sz) != nin[i]) {
                gpp_err_set(err,
                            "%s: op %s: field 'input_size' must be an array with one "
                            "bytes-per-sample figure per input (%d)",
                            origin, e[i].key, nin[i]);
                goto fail;
            } else {
                k = 0;
                for (const cJSON *it = sz->child; it; it = it->next, k++) {
                    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0 ||
                        it->valuedouble > S_PROFILE_MAX_BYTES) {
                        gpp_err_set(err,
                                    "%s: op %s: input_size[%d] must be a number of bytes in "
                                    "[0, 2^40]",
                                    origin, e[i].key, k);
                        goto fail;
                    }
                    insz[i][k] = it->valuedouble;
                }
            }
        }
        double w = 0;
        if (s_get_nonneg(e[i].entry, "weight_size", 1, &w, origin, e[i].key, err))
            goto fail;
        if (w > S_PROFILE_MAX_BYTES) {
            gpp_err_set(err, "%s: op %s: weight_size %g must be a number of bytes in [0, 2^40]",
                        origin, e[i].key, w);
            goto fail;
        }
        s_prof_t check = {0};
        int bad = s_parse_runtime(e[i].entry, &check, origin, e[i].key, err);
        s_prof_clear(&check);
        if (bad)
            goto fail;
    }
    /* topological order (Kahn, smallest file id first) */
    indeg = gpp_xcalloc((size_t)n, sizeof(int));
    order = gpp_xcalloc((size_t)n, sizeof(int));
    newid = gpp_xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++)
        indeg[i] = nin[i];
    int done = 0;
    while (done < n) {
        int pick = -1;
        for (int i = 0; i < n && pick < 0; i++)
            if (indeg[i] == 0)
                pick = i;
        if (pick < 0) {
            for (int i = 0; i < n; i++)
                if (indeg[i] > 0) {
                    gpp_err_set(err, "%s: op %s: inputs form a cycle", origin, e[i].key);
                    break;
                }
            goto fail;
        }
        indeg[pick] = -1;
        newid[pick] = done;
        order[done++] = pick;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < nin[i]; k++)
                if (ins[i][k] == pick)
                    indeg[i]--;
    }
    const char *slash = strrchr(origin, '/');
    g = gpp_graph_new(slash ? slash + 1 : origin); /* the file's name */
    snprintf(g->spec, sizeof g->spec, "%s", origin);
    for (int t = 0; t < n; t++) {
        int i = order[t];
        int *mapped = gpp_xcalloc((size_t)nin[i] + 1, sizeof(int));
        for (int k = 0; k < nin[i]; k++)
            mapped[k] = newid[ins[i][k]];
        int id = gpp_graph_add(g, GPP_OP_OPAQUE, e[i].name, nin[i], mapped);
        free(mapped);
        gpp_op_t *op = gpp_graph_op(g, id);
        double w = cJSON_GetObjectItemCaseSensitive(e[i].entry, "weight_size")->valuedouble;
        op->params = (int64_t)(w / 4.0);
        op->weight_io_bytes = 3 * op->params * 4;
        op->rows = 1;
        int64_t stash = 0;
        for (int k = 0; k < nin[i]; k++)
            stash += (int64_t)insz[i][k];
        op->io_bytes = 3 * stash;
    }
    /* out_bytes: what consumers declare they read from the op (the largest) */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < nin[i]; k++) {
            gpp_op_t *p = gpp_graph_op(g, newid[ins[i][k]]);
            if ((int64_t)insz[i][k] > p->out_bytes)
                p->out_bytes = (int64_t)insz[i][k];
        }
    for (int i = 0; i < g->n_ops; i++) {
        gpp_op_t *op = gpp_graph_op(g, i);
        op->cols = op->out_bytes / 4 > 0 ? op->out_bytes / 4 : 1;
        op->io_bytes += op->out_bytes * 3;
        /* each tensor once, at its owner (the authors' count): an op keeps
           its output for the backward; a tensor read by several ops is not
           counted per reader (received ones: gpp_cost_stage's boundary) */
        op->stash_bytes = op->out_bytes;
    }
    if (gpp_graph_finalize(g, err)) {
        gpp_err_prefix(err, "%s", origin);
        goto fail;
    }
    goto done;
fail:
    gpp_graph_destroy(&g);
done:
    for (int i = 0; ins && i < n; i++)
        free(ins[i]), free(insz[i]);
    free(ins), free(insz), free(nin), free(newid), free(order), free(indeg), free(e);
    cJSON_Delete(root);
    return g;
}

gpp_graph_t *gpp_profile_read_graph(const char *path, gpp_err_t *err)
{
    char *text = gpp_read_file(path, PROFILE_MAX_BYTES, err);
    if (!text)
        return NULL;
    gpp_graph_t *g = gpp_profile_parse_graph(text, path, err);
    free(text);
    return g;
}
