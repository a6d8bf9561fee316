/* gpp_sim: event-driven simulation of one iteration of a lowered plan. */
#include "planner/gpp_sim.h"

#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_json.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_trace.h"
#include "planner/gpp_zb.h"

struct gpp_sim {
    const gpp_plan_t *p;
    const gpp_graph_t *g;
    const gpp_cost_t *cost;
    double iteration_ms;
    double throughput;
    gpp_sim_stage_t *st; /* [n_stages] */
    gpp_sim_event_t *ev;
    int n_ev, cap_ev;
    int no_events; /* gpp_sim_keep_events(0): spans not recorded */
};

gpp_sim_t *gpp_sim_new(const gpp_plan_t *p, const gpp_graph_t *g, const gpp_cost_t *cost)
{
    assert(p && g);
    gpp_sim_t *s = gpp_xcalloc(1, sizeof *s);
    s->p = p;
    s->g = g;
    s->cost = cost;
    s->st = gpp_xcalloc((size_t)(p->n_stages > 0 ? p->n_stages : 1), sizeof *s->st);
    return s;
}

void gpp_sim_keep_events(gpp_sim_t *s, int keep)
{
    s->no_events = !keep;
}

void gpp_sim_destroy(gpp_sim_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_sim_t *s = *self_p;
    free(s->st);
    free(s->ev);
    free(s);
    *self_p = NULL;
}

double gpp_sim_iteration_ms(const gpp_sim_t *s)
{
    return s->iteration_ms;
}

double gpp_sim_throughput(const gpp_sim_t *s)
{
    return s->throughput;
}

const gpp_sim_stage_t *gpp_sim_stage(const gpp_sim_t *s, int i)
{
    assert(i >= 0 && i < s->p->n_stages);
    return &s->st[i];
}

static void s_event(gpp_sim_t *s, int device, int row, int stage, int replica, int mb, double ts,
                    double dur, const char *fmt, ...) __attribute__((format(printf, 9, 10)));

static void s_event(gpp_sim_t *s, int device, int row, int stage, int replica, int mb, double ts,
                    double dur, const char *fmt, ...)
{
    if (s->no_events)
        return;
    if (s->n_ev == s->cap_ev) {
        s->cap_ev = s->cap_ev ? 2 * s->cap_ev : 256;
        s->ev = gpp_xrealloc(s->ev, (size_t)s->cap_ev * sizeof *s->ev);
    }
    gpp_sim_event_t *e = &s->ev[s->n_ev++];
    e->device = device, e->row = row, e->stage = stage, e->replica = replica, e->mb = mb;
    e->ts_ms = ts, e->dur_ms = dur;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->name, sizeof e->name, fmt, ap);
    va_end(ap);
}

int gpp_sim_events(const gpp_sim_t *s, const gpp_sim_event_t **out)
{
    *out = s->ev;
    return s->n_ev;
}

/* Per-stage durations (fwd/bwd per micro-batch, all-reduce, step) and the
 * memory figures that do not depend on the schedule. */
static void s_stage_costs(gpp_sim_t *s, int i, int64_t *stash_per_sample, int64_t *fixed_bytes)
{
    const gpp_plan_t *p = s->p;
    const gpp_stage_t *st = &p->stages[i];
    gpp_sim_stage_t *r = &s->st[i];
    int64_t params = 0, stash = 0, reserved = 0;
    double grad_bytes = 0;
    int param_ops = 0, sparse_ops = 0;
    for (int k = 0; k < st->n_ops; k++) {
        const gpp_op_t *op = &s->g->ops[st->ops[k]];
        params += op->params;
        stash += s->cost ? gpp_cost_op_stash_bytes(s->cost, op->id) : op->stash_bytes;
        param_ops += op->params > 0;
        sparse_ops += op->params > 0 && op->sparse_params;
        if (s->cost) {
            grad_bytes += gpp_cost_op_grad_bytes(s->cost, op->id, p->batch);
            reserved += gpp_cost_op_reserved_at(s->cost, op->id,
                                                (st->micro_batch + st->devices - 1) / st->devices);
        }
    }
    r->fwd_ms = st->fwd_ms;
    r->bwd_ms = st->bwd_ms;
    r->bwd_w_ms = st->bwd_w_ms;
    r->allreduce_ms = st->devices > 1 ? st->allreduce_ms : 0;
    r->step_ms = 0;
    if (s->cost) {
        const gpp_cluster_t *cl = gpp_cost_cluster(s->cost);
        if (st->fwd_ms == 0 && st->bwd_ms == 0) {
            gpp_stage_cost_t sc;
            gpp_cost_stage(s->cost, st->n_ops, st->ops, st->devices, st->micro_batch, p->batch,
                           &sc);
            r->fwd_ms = sc.fwd_ms;
            r->bwd_ms = sc.bwd_ms;
            r->bwd_w_ms = sc.bwd_w_ms;
        }
        r->allreduce_ms = gpp_allreduce_ms(
            gpp_cluster_group_link(cl, st->first_device, st->devices), st->devices, grad_bytes);
        r->step_ms =
            gpp_cost_step_ms(s->cost, grad_bytes, gpp_cost_step_kernels(param_ops, sparse_ops));
    }
    *stash_per_sample = stash;
    *fixed_bytes =
        (st->weight_bytes > 0 ? st->weight_bytes : GPP_BYTES_PER_PARAM * params) + reserved;
}

double gpp_sim_bound_ms(gpp_sim_t *s)
{
    const gpp_plan_t *p = s->p;
    double lb = 0;
    /* first[i]: the earliest a replica of stage i can start its first
     * forward: micro-batch 0 has been forwarded along every path to it
     * (stages are in topological order; transfers count as free) */
    double *first = gpp_xcalloc((size_t)p->n_stages + 1, sizeof *first);
    for (int i = 0; i < p->n_stages; i++) {
        int64_t stash, fixed;
        s_stage_costs(s, i, &stash, &fixed);
    }
    for (int i = 0; i < p->n_stages; i++) {
        const gpp_stage_t *st = &p->stages[i];
        const gpp_sim_stage_t *r = &s->st[i];
        for (int j = 0; j < st->n_pred; j++) {
            int q = st->pred[j];
            if (first[q] + s->st[q].fwd_ms > first[i])
                first[i] = first[q] + s->st[q].fwd_ms;
        }
        /* then the lowered list: every pass of the stage's schedule, one at
         * a time, an all-reduce when replicated, the step */
        double n_mb = st->micro_batch > 0 ? (double)(p->batch / st->micro_batch) : 0;
        double busy = first[i] + n_mb * (r->fwd_ms + r->bwd_ms) +
                      (st->devices > 1 ? r->allreduce_ms : 0) + r->step_ms;
        if (busy > lb)
            lb = busy;
    }
    free(first);
    return lb;
}

static int s_is_recv(gpp_act_type_t t)
{
    return t == GPP_ACT_RECV_ACT || t == GPP_ACT_RECV_GRAD;
}

/* The lists whose next action can run, ordered by (clock, list index): the
 * next action is always the one of the least clock, the lower list on a
 * tie. An entry holds the list's position when it was queued; one whose
 * list has moved on since (an all-reduce advances every replica) is stale
 * and dropped when it comes up. Replaces a scan of every list per action,
 * which made each simulation O(actions x devices). */
typedef struct {
    double t;
    int li, pos;
} s_ready_t;

typedef struct {
    s_ready_t *e;
    int n, cap;
} s_heap_t;

static int s_before(const s_ready_t *a, const s_ready_t *b)
{
    return a->t < b->t || (a->t == b->t && a->li < b->li);
}

static void s_heap_push(s_heap_t *h, double t, int li, int pos)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->e = gpp_xrealloc(h->e, (size_t)h->cap * sizeof *h->e);
    }
    int i = h->n++;
    s_ready_t x = {t, li, pos};
    while (i > 0 && s_before(&x, &h->e[(i - 1) / 2])) {
        h->e[i] = h->e[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->e[i] = x;
}

static s_ready_t s_heap_pop(s_heap_t *h)
{
    s_ready_t top = h->e[0], x = h->e[--h->n];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && s_before(&h->e[c + 1], &h->e[c]))
            c++;
        if (!s_before(&h->e[c], &x))
            break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n > 0)
        h->e[i] = x;
    return top;
}

/* Simulation state the readiness test reads. */
typedef struct {
    const gpp_plan_t *p;
    const gpp_sched_links_t *k;
    const int *pos;
    const double *arrival;
    const double *t;
    int *queued; /* [n_lists]: the position a list is queued at, -1 none */
    s_heap_t heap;
} s_run_t;

/* Queues list li if its next action can run: a receive once its send has
 * run, an all-reduce once every replica of the stage has reached it. */
static void s_offer(s_run_t *r, int li)
{
    const gpp_sched_links_t *k = r->k;
    int si = k->list_stage[li];
    const gpp_stage_t *st = &r->p->stages[si];
    const gpp_actions_t *l = &st->replica[li - k->list_base[si]];
    int at = r->pos[li];
    if (at >= l->n || r->queued[li] == at)
        return;
    const gpp_action_t *a = &l->a[at];
    if (s_is_recv(a->type) && r->arrival[k->match[k->act_base[li] + at]] < 0)
        return;
    if (a->type == GPP_ACT_ALLREDUCE)
        for (int q = 0; q < st->devices; q++) {
            int lq = k->list_base[si] + q;
            if (r->pos[lq] >= st->replica[q].n ||
                st->replica[q].a[r->pos[lq]].type != GPP_ACT_ALLREDUCE)
                return;
        }
    r->queued[li] = at;
    s_heap_push(&r->heap, r->t[li], li, at);
}

int gpp_sim_run(gpp_sim_t *s, gpp_err_t *err)
{
    const gpp_plan_t *p = s->p;
    const gpp_cluster_t *cl = s->cost ? gpp_cost_cluster(s->cost) : NULL;
    gpp_sched_links_t *k = gpp_sched_links_new(p, err);
    if (!k)
        return -1;
    int nd = p->n_devices, rc = -1;
    for (int i = 0; i < p->n_stages; i++) {
        const gpp_stage_t *st = &p->stages[i];
        if (st->first_device < 0 || st->first_device + st->devices > nd) {
            gpp_err_set(err, "stage %d: devices [%d,%d) outside the plan's %d (C3)", i,
                        st->first_device, st->first_device + st->devices, nd);
            gpp_sched_links_destroy(&k);
            return -1;
        }
    }
    s->n_ev = 0;
    double *t = gpp_xcalloc((size_t)k->n_lists, sizeof(double));
    int *pos = gpp_xcalloc((size_t)k->n_lists, sizeof(int));
    double *arrival = gpp_xcalloc((size_t)k->n_acts + 1, sizeof(double));
    double *link_free = gpp_xcalloc((size_t)nd * (size_t)nd, sizeof(double));
    double *busy = gpp_xcalloc((size_t)k->n_lists, sizeof(double));
    int64_t *stash = gpp_xcalloc((size_t)p->n_stages, sizeof(int64_t));
    int64_t *fixed = gpp_xcalloc((size_t)p->n_stages, sizeof(int64_t));
    for (int i = 0; i < k->n_acts; i++)
        arrival[i] = -1;
    for (int i = 0; i < p->n_stages; i++)
        s_stage_costs(s, i, &stash[i], &fixed[i]);

    int remaining = 0;
    for (int li = 0; li < k->n_lists; li++) {
        int si = k->list_stage[li];
        remaining += p->stages[si].replica[li - k->list_base[si]].n > 0;
    }
    /* the list of every flat action index, to wake a receiver */
    int *list_of = gpp_xcalloc((size_t)k->n_acts + 1, sizeof(int));
    for (int li = 0; li < k->n_lists; li++)
        for (int x = k->act_base[li]; x < k->act_base[li + 1]; x++)
            list_of[x] = li;
    s_run_t run = {.p = p, .k = k, .pos = pos, .arrival = arrival, .t = t};
    run.queued = gpp_xcalloc((size_t)k->n_lists + 1, sizeof(int));
    for (int li = 0; li < k->n_lists; li++)
        run.queued[li] = -1;
    for (int li = 0; li < k->n_lists; li++)
        s_offer(&run, li);
    while (remaining) {
        /* the ready device with the earliest clock goes next */
        int best = -1;
        while (run.heap.n > 0 && best < 0) {
            s_ready_t x = s_heap_pop(&run.heap);
            if (pos[x.li] == x.pos) { /* else stale: the list moved on */
                best = x.li;
                run.queued[best] = -1;
            }
        }
        if (best < 0)
            break;
        int si = k->list_stage[best], r = best - k->list_base[si];
        const gpp_stage_t *st = &p->stages[si];
        const gpp_action_t *a = &st->replica[r].a[pos[best]];
        gpp_sim_stage_t *res = &s->st[si];
        int dev = st->first_device + r, flat = k->act_base[best] + pos[best];
        double dur = 0;
        switch (a->type) {
        case GPP_ACT_FWD:
        case GPP_ACT_BWD:
        case GPP_ACT_BWD_IN:
        case GPP_ACT_BWD_W:
            dur = a->type == GPP_ACT_FWD      ? res->fwd_ms
                  : a->type == GPP_ACT_BWD    ? res->bwd_ms
                  : a->type == GPP_ACT_BWD_IN ? res->bwd_ms - res->bwd_w_ms
                                              : res->bwd_w_ms;
            s_event(s, dev, 0, si, r, a->mb, t[best], dur, "%c%d",
                    a->type == GPP_ACT_FWD     ? 'F'
                    : a->type == GPP_ACT_BWD_W ? 'W'
                                               : 'B',
                    a->mb);
            break;
        case GPP_ACT_STEP:
            dur = res->step_ms;
            s_event(s, dev, 0, si, r, -1, t[best], dur, "STEP");
            break;
        case GPP_ACT_SEND_ACT:
        case GPP_ACT_SEND_GRAD: {
            const gpp_stage_t *peer = &p->stages[a->peer_stage];
            int pdev = peer->first_device + a->peer_replica;
            double bytes = a->tensor == GPP_DEP_TENSOR /* a dependency carries no data */
                               ? 0
                               : (double)(s->cost ? gpp_cost_op_out_bytes(s->cost, a->tensor)
                                                  : s->g->ops[a->tensor].out_bytes) *
                                     (double)(a->hi - a->lo);
            double cms = cl ? gpp_link_ms(gpp_cluster_link(cl, dev, pdev), bytes) : 0;
            double *lf = &link_free[(size_t)dev * (size_t)nd + (size_t)pdev];
            double start = t[best] > *lf ? t[best] : *lf;
            *lf = start + cms;
            arrival[flat] = start + cms;
            s_offer(&run, list_of[k->match[flat]]);
            if (cms > 0 && !s->no_events) {
                char name[sizeof s->ev->name];
                gpp_trace_action_name(a, name, sizeof name);
                s_event(s, dev, 1, si, r, a->mb, start, cms, "%s", name);
            }
            break;
        }
        case GPP_ACT_RECV_ACT:
        case GPP_ACT_RECV_GRAD: {
            double arr = arrival[k->match[flat]];
            if (arr > t[best])
                t[best] = arr;
            break;
        }
        case GPP_ACT_ALLREDUCE: {
            double start = 0;
            for (int q = 0; q < st->devices; q++)
                if (t[k->list_base[si] + q] > start)
                    start = t[k->list_base[si] + q];
            for (int q = 0; q < st->devices; q++) {
                int lq = k->list_base[si] + q;
                s_event(s, st->first_device + q, 0, si, q, -1, start, res->allreduce_ms,
                        "ALLREDUCE");
                t[lq] = start + res->allreduce_ms;
                busy[lq] += res->allreduce_ms;
                if (++pos[lq] == st->replica[q].n)
                    remaining--;
            }
            for (int q = 0; q < st->devices; q++)
                s_offer(&run, k->list_base[si] + q);
            continue;
        }
        default:
            assert(0 && "unknown action type");
        }
        t[best] += dur;
        busy[best] += dur;
        if (++pos[best] == st->replica[r].n)
            remaining--;
        s_offer(&run, best);
        /* the last replica to reach an all-reduce makes every replica ready */
        if (pos[best] < st->replica[r].n && st->replica[r].a[pos[best]].type == GPP_ACT_ALLREDUCE)
            for (int q = 0; q < st->devices; q++)
                s_offer(&run, k->list_base[si] + q);
    }
    if (remaining) {
        for (int li = 0; li < k->n_lists; li++) {
            int si = k->list_stage[li], r = li - k->list_base[si];
            const gpp_actions_t *l = &p->stages[si].replica[r];
            if (pos[li] < l->n) {
                gpp_err_set(err,
                            "simulation stalls: stage %d replica %d waits at action %d (%s "
                            "mb %d); validate the plan (gpp_sched_validate)",
                            si, r, pos[li], gpp_act_type_name(l->a[pos[li]].type),
                            l->a[pos[li]].mb);
                break;
            }
        }
        goto out;
    }
    s->iteration_ms = 0;
    for (int li = 0; li < k->n_lists; li++)
        if (t[li] > s->iteration_ms)
            s->iteration_ms = t[li];
    s->throughput = s->iteration_ms > 0 ? p->batch / (s->iteration_ms / 1000.0) : 0;
    for (int i = 0; i < p->n_stages; i++) {
        const gpp_stage_t *st = &p->stages[i];
        gpp_sim_stage_t *res = &s->st[i];
        res->busy_ms = 0;
        res->peak_live_mbs = 0;
        res->stash_peak_bytes = 0;
        for (int r = 0; r < st->devices; r++) {
            int li = k->list_base[i] + r;
            if (busy[li] > res->busy_ms)
                res->busy_ms = busy[li];
            /* stash high-water: samples forwarded and not yet backwarded */
            int64_t live = 0;
            int live_mbs = 0;
            for (int j = 0; j < st->replica[r].n; j++) {
                const gpp_action_t *a = &st->replica[r].a[j];
                /* a micro-batch is live from its forward to its backward, or
                   to its W pass when the backward is split */
                if (a->type != GPP_ACT_FWD && a->type != GPP_ACT_BWD && a->type != GPP_ACT_BWD_W)
                    continue;
                int64_t lo, hi;
                gpp_sched_replica_range(st, a->mb, r, &lo, &hi);
                int sign = a->type == GPP_ACT_FWD ? 1 : -1;
                live += sign * (hi - lo);
                live_mbs += sign;
                if (live * stash[i] > res->stash_peak_bytes)
                    res->stash_peak_bytes = live * stash[i];
                if (live_mbs > res->peak_live_mbs)
                    res->peak_live_mbs = live_mbs;
            }
        }
        res->bubble_ms = s->iteration_ms - res->busy_ms;
        res->peak_mem_bytes = fixed[i] + res->stash_peak_bytes;
        if (s->cost && p->schedule == GPP_SCHED_1F1B) /* the executor's peak with the
                                                          schedule's most micro-batches in flight */
            res->peak_mem_bytes = gpp_cost_stage_mem(s->cost, st->n_ops, st->ops, st->devices,
                                                     st->micro_batch, res->peak_live_mbs, p->batch);
        else if (s->cost) /* B and W hold different tensors: the split plan of the order */
            res->peak_mem_bytes = gpp_zb_stage_mem(s->cost, p, i);
    }
    rc = 0;
out:
    free(t);
    free(pos);
    free(arrival);
    free(list_of);
    free(run.queued);
    free(run.heap.e);
    free(link_free);
    free(busy);
    free(stash);
    free(fixed);
    gpp_sched_links_destroy(&k);
    return rc;
}

/* ---- Chrome trace ------------------------------------------------------ */

char *gpp_sim_trace_json(const gpp_sim_t *s)
{
    const gpp_plan_t *p = s->p;
    gpp_trace_t *t = gpp_trace_new();
    gpp_trace_info_str(t, "model", p->model);
    gpp_trace_info_str(t, "planner", p->planner);
    gpp_trace_info_num(t, "iteration_ms", s->iteration_ms);
    gpp_trace_process(t, 0, "compute", 0);
    gpp_trace_process(t, 1, "sends", 1);
    for (int i = 0; i < p->n_stages; i++)
        for (int r = 0; r < p->stages[i].devices; r++)
            for (int pid = 0; pid < 2; pid++) {
                char name[64];
                int dev = p->stages[i].first_device + r;
                snprintf(name, sizeof name, "dev %d: stage %d replica %d", dev, i, r);
                gpp_trace_thread(t, pid, dev, name);
            }
    for (int i = 0; i < s->n_ev; i++) {
        const gpp_sim_event_t *x = &s->ev[i];
        gpp_trace_span(t, x->row, x->device, x->name, x->row ? "comm" : "compute",
                       x->ts_ms * 1000.0, x->dur_ms * 1000.0, x->stage, x->mb);
    }
    char *text = gpp_trace_json(t);
    gpp_trace_destroy(&t);
    return text;
}

int gpp_sim_write_trace(const gpp_sim_t *s, const char *path, gpp_err_t *err)
{
    char *json = gpp_sim_trace_json(s);
    int rc = gpp_write_file_atomic(path, json, strlen(json), err);
    free(json);
    return rc;
}

int gpp_sim_plan(gpp_plan_t *p, const gpp_graph_t *g, const gpp_cost_t *cost, gpp_err_t *err)
{
    gpp_sim_t *s = gpp_sim_new(p, g, cost);
    int rc = gpp_sim_run(s, err);
    if (rc == 0) {
        p->iteration_ms = s->iteration_ms;
        p->throughput = s->throughput;
    }
    gpp_sim_destroy(&s);
    return rc;
}
