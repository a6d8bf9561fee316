/* gpp_zb: zero-bubble shapes, the memory of an order, fitting to a bound.
 * See gpp_zb.h and docs/planner.md "Zero-bubble schedules". */
#include "planner/gpp_zb.h"

#include <assert.h>
#include <stdlib.h>

#include "model/gpp_optable.h"
#include "planner/gpp_part.h"
#include "planner/gpp_sched.h"

/* The hop of stage edge (x, y): what ComputeInFlight adds to y's in-flight
 * (every row of the table is i_y plus a term of the k's and b's alone). */
static int s_hop(const gpp_stage_t *x, const gpp_stage_t *y)
{
    return gpp_part_inflight(x->k, x->micro_batch, y->k, y->micro_batch, 0, NULL);
}

void gpp_zb_shape(gpp_plan_t *p, gpp_sched_kind_t kind)
{
    assert(kind >= 0 && kind < GPP_SCHED__COUNT);
    p->schedule = kind;
    int twice = kind == GPP_SCHED_ZB_H2;
    for (int i = p->n_stages - 1; i >= 0; i--) { /* successors first */
        gpp_stage_t *x = &p->stages[i];
        int v = x->k * x->micro_batch;
        if (x->n_succ > 0) {
            v = 0;
            for (int j = 0; j < x->n_succ; j++) {
                const gpp_stage_t *y = &p->stages[x->succ[j]];
                int c = y->inflight + (twice ? 2 : 1) * s_hop(x, y);
                v = c > v ? c : v;
            }
        }
        x->inflight = v < p->batch ? v : p->batch;
    }
    int *up = gpp_xcalloc((size_t)p->n_stages + 1, sizeof(int));
    for (int i = 0; i < p->n_stages; i++) { /* predecessors first */
        gpp_stage_t *y = &p->stages[i];
        for (int j = 0; j < y->n_pred; j++) {
            int q = y->pred[j], c = up[q] + s_hop(&p->stages[q], y);
            up[i] = c > up[i] ? c : up[i];
        }
        int m = p->batch / y->micro_batch, d = up[i] / y->micro_batch;
        y->w_delay = kind == GPP_SCHED_1F1B ? 0 : d < m ? d : m;
    }
    free(up);
}

/* What one replica of stage s keeps: the walk's figures and the W-held
 * bytes of a micro-batch between its B and its W pass. */
typedef struct {
    gpp_stage_mem_t m;
    int64_t reserved, wheld, base;
    int slots;
} s_mem_t;

static void s_mem_figures(const gpp_cost_t *c, const gpp_plan_t *p, int s, s_mem_t *f)
{
    const gpp_stage_t *st = &p->stages[s];
    const gpp_graph_t *g = gpp_cost_graph(c);
    f->reserved = gpp_cost_stage_mem_parts(c, st->n_ops, st->ops, st->devices, st->micro_batch,
                                           p->batch, &f->m);
    f->slots = (p->batch + st->micro_batch - 1) / st->micro_batch;
    /* what every point of the order holds: the walk's peak less its one
       running micro-batch */
    f->base = gpp_stage_mem_peak(&f->m, 1, f->slots) - f->m.run_bytes + f->reserved;
    /* B keeps each parameter op's output gradient and W stash for W */
    int64_t n = (st->micro_batch + st->devices - 1) / st->devices;
    gpp_alloc_rule_t rule = gpp_cost_cluster(c)->alloc_rule;
    f->wheld = 0;
    for (int k = 0; k < st->n_ops; k++) {
        const gpp_op_t *op = &g->ops[st->ops[k]];
        if (op->params <= 0 || n == 0)
            continue;
        f->wheld += gpp_alloc_bytes(rule, n * gpp_cost_op_out_bytes(c, op->id));
        int64_t ws = gpp_op_wstash_bytes(g, op);
        if (ws > 0)
            f->wheld += gpp_alloc_bytes(rule, n * ws);
    }
}

/* The peak of stage s's order with figures f. */
static int64_t s_order_peak(const gpp_stage_t *st, const s_mem_t *f)
{
    const gpp_actions_t *l = &st->compute;
    int64_t held = f->m.held_bytes, run = f->m.run_bytes, wh = held + f->wheld, peak = 0;
    int nb = 0, nw = 0; /* others waiting: between F and B, between B and W */
    for (int i = 0; i < l->n; i++) {
        int64_t at = 0;
        switch (l->a[i].type) {
        case GPP_ACT_FWD:
            at = nb * held + nw * wh + run;
            nb++;
            break;
        case GPP_ACT_BWD:
            at = (nb - 1) * held + nw * wh + run;
            nb--;
            break;
        case GPP_ACT_BWD_IN: /* its output gradients and W stash stay */
            at = (nb - 1) * held + nw * wh + run + f->wheld;
            nb--, nw++;
            break;
        case GPP_ACT_BWD_W:
            at = nb * held + nw * wh;
            nw--;
            break;
        default:
            continue;
        }
        peak = at > peak ? at : peak;
    }
    return f->base + peak;
}

int64_t gpp_zb_stage_mem(const gpp_cost_t *c, const gpp_plan_t *p, int s)
{
    const gpp_stage_t *st = &p->stages[s];
    if (p->schedule == GPP_SCHED_1F1B) { /* the most micro-batches in flight */
        int live = 0, most = 1;
        for (int i = 0; i < st->compute.n; i++) {
            live += st->compute.a[i].type == GPP_ACT_FWD   ? 1
                    : st->compute.a[i].type == GPP_ACT_BWD ? -1
                                                           : 0;
            most = live > most ? live : most;
        }
        return gpp_cost_stage_mem(c, st->n_ops, st->ops, st->devices, st->micro_batch, most,
                                  p->batch);
    }
    s_mem_t f;
    s_mem_figures(c, p, s, &f);
    return s_order_peak(st, &f);
}

int gpp_zb_fit(gpp_plan_t *p, const gpp_cost_t *c, int64_t bound, int64_t *need, gpp_err_t *err)
{
    if (need)
        *need = 0;
    if (gpp_sched_compute(p, err) < 0)
        return -1;
    if (p->schedule == GPP_SCHED_1F1B)
        return 0; /* the partitioner fitted it */
    int rc = 0;
    for (int s = 0; s < p->n_stages; s++) {
        gpp_stage_t *st = &p->stages[s];
        s_mem_t f;
        s_mem_figures(c, p, s, &f);
        int64_t peak = s_order_peak(st, &f);
        while (peak > bound && p->schedule == GPP_SCHED_ZB_H1 && st->w_delay > 0) {
            st->w_delay--;
            if (gpp_sched_stage_order(p, s, err) < 0)
                return -1;
            peak = s_order_peak(st, &f);
        }
        st->mem_bytes = peak;
        st->act_bytes = peak - st->weight_bytes - f.reserved;
        if (st->act_bytes < 0)
            st->act_bytes = 0;
        if (need && peak > *need)
            *need = peak;
        if (peak > bound && rc == 0) {
            gpp_err_set(err, "stage %d needs %.2f GiB per device with %s (bound %.2f GiB)", s,
                        (double)peak / (1 << 30), gpp_sched_kind_name(p->schedule),
                        (double)bound / (1 << 30));
            rc = -1;
        }
    }
    return rc;
}
