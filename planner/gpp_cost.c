/* gpp_cost: profile-based and roofline op times, stage cost and memory
 * (devices, links and the roofline are in gpp_cost_device.c; profile.json
 * in gpp_profile_io.c). See gpp_cost.h and docs/planner.md. */
#include "planner/gpp_cost.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_memplan.h"
#include "model/gpp_optable.h"

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
                              NULL when no attached entry has one (gpp_stage_dev_t's) */
    int64_t *stash;        /* [n_ops] with kstash: each op's stash with the profile's kernel
                              stash (gpp_cost_op_stash_bytes), made once per attach */
    gpp_work_t *work;      /* [n_ops] the profile's workspaces (fixed -1: the op table's), or
                              NULL when no attached entry has one (gpp_stage_dev_t's) */
    int64_t *obytes;       /* [n_ops] the profile's output bytes per sample (-1: the graph's
                              fp32 figure), or NULL when no attached entry has one
                              (gpp_stage_dev_t's) */
    char prof_origin[256]; /* the last attached profile (file or "the agents' profile") */
    /* where it was measured: its record's device ("" unknown) and precision */
    char prof_device[256];
    int prof_has_precision;
    gpp_precision_t prof_precision;
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

const gpp_graph_t *gpp_cost_graph(const gpp_cost_t *c)
{
    return c->g;
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
        /* a W pass: the parameter gradients' share of the backward's FLOPs */
        out->bwd_w_ms += o->bwd_flops > 0 ? b * (o->bwd_w_flops / o->bwd_flops) : 0;
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
 * a loss's labels (the memory plan's load-ahead). Replayed as CUDA graphs,
 * also the feed buffer of a SOURCE op's samples or a loss's labels. */
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

gpp_memplan_t *gpp_cost_stage_plan(const gpp_cost_t *c, int n_ops, const int *ops, int devices,
                                   int micro_batch, int mbs, int batch, int split,
                                   int64_t *reserved)
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
                             .split = split,
                             .dev = &dev};
    gpp_err_t err = {{0}};
    gpp_memplan_t *plan = gpp_memplan_new(c->g, n_ops, ops, &cfg, &err);
    assert(plan); /* a stage is a set of the graph's ops, its micro-batch >= 1 */
    *reserved = 0;
    for (int k = 0; k < n_ops; k++)
        *reserved += s_reserved_at(&c->prof[ops[k]], m);
    return plan;
}

int64_t gpp_cost_stage_mem(const gpp_cost_t *c, int n_ops, const int *ops, int devices,
                           int micro_batch, int mbs, int batch)
{
    int64_t reserved = 0;
    gpp_memplan_t *plan =
        gpp_cost_stage_plan(c, n_ops, ops, devices, micro_batch, mbs, batch, 0, &reserved);
    int64_t total = gpp_memplan_total(plan) + reserved;
    gpp_memplan_destroy(&plan);
    return total;
}

/* ---- measurements ---- */

/* Moves the tables of tmp (ops with one) into the model; an op with memory
 * figures and no table (gpp_cost_attach_figures) keeps its times and takes
 * the figures. */
static void s_prof_commit(gpp_cost_t *c, s_prof_t *tmp)
{
    for (int k = 0; k < c->g->n_ops; k++) {
        if (tmp[k].n) {
            s_prof_clear(&c->prof[k]);
            c->prof[k] = tmp[k];
            memset(&tmp[k], 0, sizeof tmp[k]);
            continue;
        }
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
}

/* The per-op arrays the memory plan takes (kstash, stash, work, obytes),
 * made again from prof[]: NULL where no op has the profile's figure. */
static void s_derive(gpp_cost_t *c)
{
    const int n = c->g->n_ops;
    int any = 0, any_work = 0;
    for (int k = 0; k < n; k++) {
        any |= s_kstash(c, k) >= 0;
        any_work |= c->prof[k].has_work;
    }
    s_obytes_make(c);
    free(c->work);
    c->work = NULL;
    if (any_work) {
        c->work = gpp_xcalloc((size_t)n, sizeof *c->work);
        for (int k = 0; k < n; k++)
            c->work[k] = c->prof[k].has_work ? c->prof[k].work : (gpp_work_t){-1, -1};
    }
    free(c->kstash);
    free(c->stash);
    c->kstash = c->stash = NULL;
    if (any) {
        c->kstash = gpp_xcalloc((size_t)n, sizeof *c->kstash);
        c->stash = gpp_xcalloc((size_t)n, sizeof *c->stash);
        for (int k = 0; k < n; k++) {
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

int gpp_cost_profile_source(const gpp_cost_t *c, char *buf, size_t len)
{
    if (!c->prof_device[0] && !c->prof_has_precision)
        return 0;
    snprintf(buf, len, "profile %s measured on %s, %s matrix products", c->prof_origin,
             c->prof_device[0] ? c->prof_device : "an unnamed device",
             gpp_precision_name(c->prof_has_precision ? c->prof_precision : GPP_PRECISION_FP32));
    return 1;
}

static int s_row_cmp(const void *a, const void *b)
{
    const gpp_profile_row_t *x = a, *y = b;
    if (x->op != y->op)
        return (x->op > y->op) - (x->op < y->op);
    return (x->micro_batch > y->micro_batch) - (x->micro_batch < y->micro_batch);
}

/* The model op of each of p's ops, matched by name (an agent's profile
 * names the ops of the graph it ran; a profile-built graph renumbers ids):
 * [p->n_ops], caller frees; NULL with a message naming the op. */
static int *s_match(const gpp_cost_t *c, const gpp_profile_t *p, gpp_err_t *err)
{
    const gpp_graph_t *g = c->g;
    int *model_op = gpp_xcalloc((size_t)p->n_ops + 1, sizeof *model_op);
    char *taken = gpp_xcalloc((size_t)g->n_ops + 1, 1);
    for (int i = 0; i < p->n_ops; i++) {
        const gpp_profile_op_t *o = &p->ops[i];
        int op = o->id < g->n_ops && strcmp(g->ops[o->id].name, o->name) == 0 ? o->id : -1;
        for (int k = 0; k < g->n_ops && op < 0; k++)
            if (strcmp(g->ops[k].name, o->name) == 0)
                op = k;
        if (op < 0 || taken[op]) {
            if (op < 0)
                gpp_err_set(err,
                            "%s: op %d (%s): name '%s' is not an op of model '%s'; was the "
                            "profile written for another model?",
                            p->origin, o->id, o->name, o->name, g->name);
            else
                gpp_err_set(err, "%s: op %d (%s): model op '%s' is profiled twice", p->origin,
                            o->id, o->name, o->name);
            free(model_op);
            free(taken);
            return NULL;
        }
        taken[op] = 1;
        model_op[i] = op;
    }
    free(taken);
    return model_op;
}

/* An op's checked rows r[0..n) (ascending sizes; one op) into its table. */
static void s_prof_table(s_prof_t *t, const gpp_profile_row_t *r, int n)
{
    t->n = n;
    t->mbs = gpp_xcalloc((size_t)n, sizeof *t->mbs);
    t->ms = gpp_xcalloc((size_t)n, sizeof *t->ms);
    t->fwd = r[0].has_fwd ? gpp_xcalloc((size_t)n, sizeof *t->fwd) : NULL;
    for (int i = 0; i < n; i++) {
        t->mbs[i] = r[i].micro_batch;
        t->ms[i] = r[i].ms;
        if (t->fwd)
            t->fwd[i] = r[i].fwd_ms;
    }
}

/* gpp_cost_attach_profile, or with figures_only the rows' memory figures
 * alone (gpp_cost_attach_figures). */
static int s_attach(gpp_cost_t *c, const gpp_profile_t *p, int figures_only, gpp_err_t *err)
{
    const gpp_graph_t *g = c->g;
    if (gpp_profile_check(p, err) < 0)
        return -1;
    int *model_op = s_match(c, p, err);
    if (!model_op)
        return -1;
    gpp_profile_row_t *rows = gpp_xcalloc(p->n_rows + 1, sizeof *rows);
    memcpy(rows, p->rows, p->n_rows * sizeof *rows);
    qsort(rows, p->n_rows, sizeof *rows, s_row_cmp);
    s_prof_t *tmp = gpp_xcalloc((size_t)g->n_ops, sizeof *tmp);
    int rc = 0;
    for (size_t i = 0, j; i < p->n_rows && rc == 0; i = j) {
        for (j = i + 1; j < p->n_rows && rows[j].op == rows[i].op; j++)
            ;
        const gpp_profile_op_t *o = gpp_profile_op(p, rows[i].op);
        int op = model_op[o - p->ops];
        const gpp_profile_row_t *r = &rows[i];
        if (r->has_out_bytes && r->out_bytes > g->ops[op].out_bytes) {
            rc = gpp_err_set(err,
                             "%s: op %d (%s): out_bytes %lld is more than the model's fp32 "
                             "figure %lld bytes per sample; was the profile written for another "
                             "model?",
                             p->origin, o->id, o->name, (long long)r->out_bytes,
                             (long long)g->ops[op].out_bytes);
            break;
        }
        s_prof_t *t = &tmp[op];
        t->has_kstash = r->has_kernel_stash;
        t->kstash = r->kernel_stash;
        t->has_work = r->has_workspace;
        t->work = r->workspace;
        t->has_obytes = r->has_out_bytes;
        t->obytes = r->out_bytes;
        if (figures_only)
            continue;
        s_prof_table(t, r, (int)(j - i));
        t->reserved_bytes = o->reserved_bytes;
        if (o->n_reserved) {
            t->rm_n = o->n_reserved;
            t->rm_mbs = gpp_xcalloc((size_t)t->rm_n, sizeof *t->rm_mbs);
            t->rm_bytes = gpp_xcalloc((size_t)t->rm_n, sizeof *t->rm_bytes);
            memcpy(t->rm_mbs, o->reserved_mbs, (size_t)t->rm_n * sizeof *t->rm_mbs);
            memcpy(t->rm_bytes, o->reserved_at, (size_t)t->rm_n * sizeof *t->rm_bytes);
        }
    }
    if (rc == 0) { /* all good: replace */
        s_prof_commit(c, tmp);
        s_derive(c);
        if (!figures_only) {
            snprintf(c->prof_origin, sizeof c->prof_origin, "%s", p->origin);
            snprintf(c->prof_device, sizeof c->prof_device, "%s", p->meta.device);
            c->prof_has_precision = p->meta.has_precision;
            c->prof_precision = p->meta.precision;
        }
    }
    s_prof_free(c, &tmp);
    free(rows);
    free(model_op);
    return rc;
}

int gpp_cost_attach_profile(gpp_cost_t *c, const gpp_profile_t *p, gpp_err_t *err)
{
    return s_attach(c, p, 0, err);
}

int gpp_cost_attach_figures(gpp_cost_t *c, const gpp_profile_t *p, gpp_err_t *err)
{
    return s_attach(c, p, 1, err);
}

static void *s_dup(const void *src, size_t bytes)
{
    if (!src)
        return NULL;
    void *d = gpp_xcalloc(1, bytes ? bytes : 1);
    memcpy(d, src, bytes);
    return d;
}

gpp_cost_t *gpp_cost_clone(const gpp_cost_t *c, const gpp_cluster_t *cl)
{
    gpp_cost_t *self = gpp_cost_new(c->g, cl);
    for (int k = 0; k < c->g->n_ops; k++) {
        const s_prof_t *p = &c->prof[k];
        s_prof_t *q = &self->prof[k];
        *q = *p;
        q->mbs = s_dup(p->mbs, (size_t)p->n * sizeof *p->mbs);
        q->ms = s_dup(p->ms, (size_t)p->n * sizeof *p->ms);
        q->fwd = s_dup(p->fwd, (size_t)p->n * sizeof *p->fwd);
        q->rm_mbs = s_dup(p->rm_mbs, (size_t)p->rm_n * sizeof *p->rm_mbs);
        q->rm_bytes = s_dup(p->rm_bytes, (size_t)p->rm_n * sizeof *p->rm_bytes);
    }
    s_derive(self);
    memcpy(self->prof_origin, c->prof_origin, sizeof self->prof_origin);
    memcpy(self->prof_device, c->prof_device, sizeof self->prof_device);
    self->prof_has_precision = c->prof_has_precision;
    self->prof_precision = c->prof_precision;
    return self;
}
