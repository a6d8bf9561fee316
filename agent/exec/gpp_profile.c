/* gpp_profile: per-op timing table for the planner (see gpp_profile.h). */
#include "agent/exec/gpp_profile.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec.h"
#include "agent/data/gpp_hash.h"
#include "common/gpp_fault.h"
#include "common/gpp_time.h"

static int s_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of x[0..n) (sorts x). Taken per op over repetitions: a repetition
 * preempted by a neighbour on a shared machine is an outlier, not a sample
 * the mean should spread over every op. The median is order-preserving: if
 * f[r] <= t[r] for every r, median(f) <= median(t), so forward stays within
 * forward+backward as the planner requires. */
static double s_median(double *x, int n)
{
    assert(n > 0);
    qsort(x, (size_t)n, sizeof *x, s_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Fills a device tensor with scaled N(0,1) values through a host buffer. */
static int s_fill(gpp_stream_t *s, gpp_tensor_t *t, uint64_t key, float scale, gpp_err_t *err)
{
    int64_t n = gpp_tensor_numel(t);
    float *h = gpp_xcalloc((size_t)n + 1, sizeof(float));
    for (int64_t i = 0; i < n; i++)
        h[i] = scale * gpp_hash_normal(key, (uint64_t)i);
    gpp_dtype_from_f32(t->dtype, h, n, h); /* a bf16 tensor's elements, in place */
    int rc = gpp_stream_copy(s, t->data, h, gpp_tensor_bytes(t), GPP_COPY_H2D, err);
    if (rc == 0)
        rc = gpp_stream_sync(s, err);
    free(h);
    return rc;
}

/* One micro-batch of b samples through the stage; dys: the boundary output
 * gradients at the largest size, of which the first b samples are used. */
static int s_run(gpp_exec_t *ex, int64_t b, const gpp_tensor_t *dys, gpp_err_t *err)
{
    const gpp_graph_t *g = gpp_exec_graph(ex);
    gpp_stream_t *s = gpp_exec_stream(ex);
    if (gpp_exec_begin(ex, 0, 0, b, err) < 0)
        return -1;
    for (int i = 0; i < gpp_exec_n_inputs(ex); i++) {
        int p = gpp_exec_input_op(ex, i);
        if (g->ops[p].type == GPP_OP_INPUT)
            continue; /* the executor reads data itself */
        if (s_fill(s, gpp_exec_input(ex, 0, p), gpp_hash_key(1, 2, (uint64_t)p), 1.0f, err) < 0)
            return -1;
    }
    if (gpp_exec_forward(ex, 0, err) < 0)
        return -1;
    for (int i = 0; i < gpp_exec_n_outputs(ex); i++) {
        gpp_tensor_t dy = gpp_tensor(dys[i].data, dys[i].dtype, b, dys[i].rows, dys[i].cols);
        if (gpp_exec_add_output_grad(ex, 0, gpp_exec_output_op(ex, i), &dy, 0, err) < 0)
            return -1;
    }
    if (gpp_exec_backward(ex, 0, err) < 0)
        return -1;
    gpp_exec_release(ex, 0);
    return gpp_stream_sync(s, err);
}

gpp_profile_t *gpp_profile_measure(const gpp_graph_t *g, int n_ops, const int *ops,
                                   gpp_backend_t *be, gpp_data_t *data,
                                   const gpp_profile_cfg_t *cfg, gpp_err_t *err)
{
    assert(g && ops && be && cfg);
    int warmup = cfg->warmup > 0 ? cfg->warmup : GPP_PROFILE_WARMUP_DEFAULT;
    int reps = cfg->reps > 0 ? cfg->reps : GPP_PROFILE_REPS_DEFAULT;
    if (cfg->max_micro_batch < 1) {
        gpp_err_set(err, "profile: largest micro-batch must be >= 1");
        return NULL;
    }
    double budget_ms = cfg->budget_ms > 0 ? cfg->budget_ms : GPP_PROFILE_BUDGET_MS_DEFAULT;
    int n_max = 0; /* sizes 1, 2, 4, ... up to max_micro_batch; n_sizes of them are timed */
    while ((int64_t)1 << n_max <= cfg->max_micro_batch) /* max_micro_batch < 2^31 */
        n_max++;
    int n_sizes = 0;
    int64_t b_max = (int64_t)1 << (n_max - 1);
    /* [size][op][rep]: fwd ms and fwd+bwd ms of one micro-batch */
    size_t n_cells = (size_t)n_max * (size_t)n_ops * (size_t)reps;
    double *f_ms = gpp_xcalloc(n_cells, sizeof *f_ms);
    double *t_ms = gpp_xcalloc(n_cells, sizeof *t_ms);
    /* per op: its memory figures on this backend, in every row */
    gpp_profile_row_t *fig = gpp_xcalloc((size_t)n_ops + 1, sizeof *fig);
    gpp_profile_row_t *rows = NULL;
    gpp_profile_t *p = NULL;
    gpp_exec_t *ex = NULL;
    gpp_tensor_t *dys = NULL;
    int n_dys = 0;
    /* One executor runs every size: a micro-batch may hold fewer samples
     * than the mini-batch (only the loss scale depends on it; lr = 0). */
    gpp_exec_cfg_t ec = {.seed = cfg->seed, .batch = b_max};
    ec.optim.kind = GPP_OPTIM_SGD;
    ec.optim.lr = 0;
    if (!(ex = gpp_exec_new(g, n_ops, ops, be, data, &ec, err)))
        goto done;
    /* what each kernel keeps for its backward and asks as workspace on
       this backend: the planner's memory model uses them instead of the op
       table's layouts */
    for (int i = 0; i < n_ops; i++) {
        int64_t ob = gpp_backend_op_out_bytes(be, g, &g->ops[ops[i]]);
        fig[i] = (gpp_profile_row_t){.op = ops[i],
                                     .has_fwd = 1,
                                     .has_kernel_stash = 1,
                                     .kernel_stash = gpp_exec_kernel_stash_bytes(ex, ops[i]),
                                     .has_out_bytes = ob > 0,
                                     .out_bytes = ob,
                                     .has_workspace = 1,
                                     .workspace = gpp_exec_op_workspace(ex, ops[i])};
    }
    n_dys = gpp_exec_n_outputs(ex);
    dys = gpp_xcalloc((size_t)n_dys + 1, sizeof *dys);
    for (int i = 0; i < n_dys; i++) {
        const gpp_op_t *o = &g->ops[gpp_exec_output_op(ex, i)];
        /* the output's type: bf16 where the stage keeps it so (bf16 tensors) */
        gpp_dtype_t dt = gpp_backend_op_out_dtype(be, g, o);
        if (gpp_tensor_alloc(be, dt, b_max, o->rows, o->cols, &dys[i], err) < 0 ||
            s_fill(gpp_exec_stream(ex), &dys[i], gpp_hash_key(3, 4, (uint64_t)o->id),
                   1.0f / sqrtf((float)(o->rows * o->cols)), err) < 0)
            goto done;
    }
    /* Warm-up, size by size upwards, timed: a size's micro-batches cost
     * `per_mb` each, warmup + 2 x reps of them in all. The next size
     * (twice the samples) is expected to cost at least twice as much;
     * sizes stop where that would take the profile past its budget (the
     * first two are always timed, so the table has a slope). */
    double projected_ms = 0, per_mb = 0;
    for (int k = 0; k < n_max; k++) {
        if (k >= 2 && projected_ms + 2 * per_mb * (warmup + 2 * reps) > budget_ms)
            break;
        per_mb = INFINITY; /* the fastest warm-up: the first one allocates */
        for (int r = 0; r < warmup; r++) {
            double t0 = gpp_now_ms();
            if (s_run(ex, (int64_t)1 << k, dys, err) < 0)
                goto done;
            per_mb = fmin(per_mb, gpp_now_ms() - t0);
        }
        projected_ms += per_mb * (warmup + 2 * reps);
        n_sizes = k + 1;
    }
    /* Repetition r of every size before repetition r + 1 of any, so that a
     * burst of load from a neighbour spoils one repetition of a few sizes
     * (which the median drops), not every repetition of one size. Each
     * timed micro-batch follows an untimed one of its size: the caches then
     * hold what a steady stream of that size leaves there, as in training,
     * not the last larger size's activations. */
    for (int r = 0; r < reps; r++) {
        double slow =
            gpp_fault(GPP_FAULT_PROFILE_SLOW) && r >= gpp_fault_arg(GPP_FAULT_PROFILE_SLOW)
                ? GPP_PROFILE_FAULT_MS
                : 0;
        for (int k = 0; k < n_sizes; k++) {
            gpp_exec_set_timing(ex, 0);
            if (s_run(ex, (int64_t)1 << k, dys, err) < 0)
                goto done;
            gpp_exec_set_timing(ex, 1);
            gpp_exec_reset_times(ex);
            if (s_run(ex, (int64_t)1 << k, dys, err) < 0)
                goto done;
            for (int i = 0; i < n_ops; i++) {
                double f, bw;
                int64_t calls; /* 1 */
                gpp_exec_op_time(ex, ops[i], &f, &bw, &calls);
                size_t at = ((size_t)k * (size_t)n_ops + (size_t)i) * (size_t)reps + (size_t)r;
                f_ms[at] = f + slow;
                t_ms[at] = f + bw + slow;
            }
        }
    }
    rows = gpp_xcalloc((size_t)n_sizes * (size_t)n_ops + 1, sizeof *rows);
    for (int k = 0; k < n_sizes; k++)
        for (int i = 0; i < n_ops; i++) {
            size_t at = ((size_t)k * (size_t)n_ops + (size_t)i) * (size_t)reps;
            gpp_profile_row_t *r = &rows[(size_t)k * (size_t)n_ops + (size_t)i];
            *r = fig[i];
            r->micro_batch = 1 << k;
            r->ms = s_median(&t_ms[at], reps);
            r->fwd_ms = s_median(&f_ms[at], reps);
        }
    p = gpp_profile_of_graph(g, rows, (size_t)n_sizes * (size_t)n_ops, "the profiler's table", err);
    if (p) { /* what was measured where */
        gpp_profile_meta_t *m = &p->meta;
        m->present = 1;
        snprintf(m->model, sizeof m->model, "%s", g->spec);
        snprintf(m->device, sizeof m->device, "%s", gpp_backend_device_name(be));
        m->n_ops = g->n_ops;
        snprintf(m->backend, sizeof m->backend, "%s", gpp_backend_name(be));
        m->has_precision = 1;
        m->precision = gpp_backend_precision(be);
        m->has_bf16_tensors = 1;
        m->bf16_tensors = gpp_backend_bf16_tensors(be);
    }
done:
    for (int i = 0; dys && i < n_dys; i++)
        gpp_tensor_free(be, &dys[i]);
    free(dys);
    gpp_exec_destroy(&ex);
    free(f_ms);
    free(t_ms);
    free(fig);
    free(rows);
    return p;
}
