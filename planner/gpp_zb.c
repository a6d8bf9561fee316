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

/* Stage s's memory plan with the backward split (*reserved: the profile's
 * reserved bytes of it); caller owns it. */
static gpp_memplan_t *s_split_plan(const gpp_cost_t *c, const gpp_plan_t *p, int s,
                                   int64_t *reserved)
{
    const gpp_stage_t *st = &p->stages[s];
    return gpp_cost_stage_plan(c, st->n_ops, st->ops, st->devices, st->micro_batch, 1, p->batch, 1,
                               reserved);
}

/* The peak of stage st's order: its split plan with a lane per micro-batch
 * begun and not past its W at once. */
static int64_t s_order_peak(const gpp_stage_t *st, const gpp_memplan_t *plan, int64_t reserved)
{
    int lanes = gpp_actions_inflight(st->compute.a, st->compute.n);
    return gpp_memplan_total_lanes(plan, lanes) + reserved;
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
    int64_t reserved = 0;
    gpp_memplan_t *plan = s_split_plan(c, p, s, &reserved);
    int64_t peak = s_order_peak(st, plan, reserved);
    gpp_memplan_destroy(&plan);
    return peak;
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
        int64_t reserved = 0;
        gpp_memplan_t *plan = s_split_plan(c, p, s, &reserved);
        int64_t peak = s_order_peak(st, plan, reserved);
        while (peak > bound && p->schedule == GPP_SCHED_ZB_H1 && st->w_delay > 0) {
            st->w_delay--;
            if (gpp_sched_stage_order(p, s, err) < 0) {
                gpp_memplan_destroy(&plan);
                return -1;
            }
            peak = s_order_peak(st, plan, reserved);
        }
        gpp_memplan_destroy(&plan);
        st->mem_bytes = peak;
        st->act_bytes = peak - st->weight_bytes - reserved;
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
