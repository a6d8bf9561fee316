/* gpp_sched: per-stage kFkB orders, lowering to per-replica action lists,
 * and validation (C1-C4, SEND/RECV matching, deadlock freedom). */
#include "planner/gpp_sched.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text form ------------------------------------------------------------ */

size_t gpp_sched_format(const gpp_actions_t *l, int first, char *buf, size_t size)
{
    static const char more[] = " ...";
    size_t total = 0, len = 0; /* len: bytes of buf in use, without the NUL */
    int cut = 0;
    if (first < 0)
        first = 0;
    if (size)
        buf[0] = 0;
    for (int i = first; i < l->n; i++) {
        const gpp_action_t *a = &l->a[i];
        if (!gpp_act_is_pass(a->type))
            continue;
        char tok[24];
        int n = snprintf(tok, sizeof tok, "%s%c%d", total ? " " : (first > 0 ? "... " : ""),
                         a->type == GPP_ACT_FWD     ? 'F'
                         : a->type == GPP_ACT_BWD_W ? 'W'
                                                    : 'B',
                         a->mb);
        total += (size_t)n;
        if (cut)
            continue;
        /* keep room for " ..." unless this could be the last pass */
        if (len + (size_t)n + 1 <= size) {
            memcpy(buf + len, tok, (size_t)n + 1);
            len += (size_t)n;
        } else {
            cut = 1;
        }
    }
    if (cut) { /* drop whole passes until " ..." fits */
        while (len > 0 && len + sizeof more > size) {
            while (len > 0 && buf[len - 1] != ' ')
                len--;
            if (len > 0)
                len--; /* the space before the dropped pass */
        }
        if (len + sizeof more <= size)
            memcpy(buf + len, len ? more : more + 1, sizeof more - (len ? 0 : 1));
        else if (size)
            buf[0] = 0;
    }
    return total;
}

/* ---- compute orders ---------------------------------------------------- */

static void s_push_pass(gpp_actions_t *l, gpp_act_type_t type, int mb)
{
    gpp_action_t a = {.type = type, .mb = mb, .peer_stage = -1, .peer_replica = -1, .tensor = -1};
    gpp_actions_push(l, a);
}

int gpp_sched_stage_order(gpp_plan_t *p, int s, gpp_err_t *err)
{
    gpp_stage_t *st = &p->stages[s];
    if (st->micro_batch < 1 || p->batch % st->micro_batch != 0)
        return gpp_err_set(err, "stage %d: micro-batch %d does not divide the batch %d", s,
                           st->micro_batch, p->batch);
    if (st->k < 1)
        return gpp_err_set(err, "stage %d: k = %d; kFkB needs k >= 1", s, st->k);
    int m = p->batch / st->micro_batch, zb = p->schedule != GPP_SCHED_1F1B;
    /* holding `inflight` samples takes ceil(inflight / b) micro-batches (as
       gpp_cost_act_bytes counts them); the appendix table gives counts
       that are not always multiples of b */
    int w = (st->inflight + st->micro_batch - 1) / st->micro_batch;
    if (w < 1)
        w = 1;
    if (w > m)
        w = m;
    int d = st->w_delay < 0 ? 0 : st->w_delay > m ? m : st->w_delay;
    gpp_actions_clear(&st->compute);
    int nf = 0, nb = 0, nw = 0;
    while (nf < w)
        s_push_pass(&st->compute, GPP_ACT_FWD, nf++);
    while (nb < m) {
        for (int t = 0; t < st->k && nb < nf; t++) {
            s_push_pass(&st->compute, zb ? GPP_ACT_BWD_IN : GPP_ACT_BWD, nb++);
            if (zb && nb - 1 >= d) /* W of j - d right after B of j */
                s_push_pass(&st->compute, GPP_ACT_BWD_W, nw++);
        }
        for (int t = 0; t < st->k && nf < m; t++)
            s_push_pass(&st->compute, GPP_ACT_FWD, nf++);
    }
    while (zb && nw < m) /* the last d: after the last B */
        s_push_pass(&st->compute, GPP_ACT_BWD_W, nw++);
    return 0;
}

int gpp_sched_compute(gpp_plan_t *p, gpp_err_t *err)
{
    if (p->schedule < 0 || p->schedule >= GPP_SCHED__COUNT)
        return gpp_err_set(err, "schedule kind %d; use 1f1b, zb-h1 or zb-h2", (int)p->schedule);
    for (int s = 0; s < p->n_stages; s++)
        if (gpp_sched_stage_order(p, s, err) < 0)
            return -1;
    return 0;
}

/* ---- lowering ------------------------------------------------------------ */

void gpp_sched_replica_range(const gpp_stage_t *st, int mb, int r, int64_t *lo, int64_t *hi)
{
    int64_t b = st->micro_batch, d = st->devices;
    *lo = (int64_t)mb * b + (int64_t)r * b / d;
    *hi = (int64_t)mb * b + (int64_t)(r + 1) * b / d;
}

/* An edge tensor of a stage: `tensor` (producer op id) crossing to/from `peer`. */
typedef struct {
    int peer;
    int tensor;
} s_edge_t;

typedef struct {
    int n, cap;
    s_edge_t *e;
} s_edges_t;

static void s_edges_add(s_edges_t *l, int peer, int tensor)
{
    for (int i = 0; i < l->n; i++)
        if (l->e[i].peer == peer && l->e[i].tensor == tensor)
            return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->e = gpp_xrealloc(l->e, (size_t)l->cap * sizeof *l->e);
    }
    l->e[l->n++] = (s_edge_t){peer, tensor};
}

/* in[s]: tensors stage s receives; out[s]: tensors stage s sends. */
static void s_edges_build(const gpp_plan_t *p, const gpp_graph_t *g, s_edges_t *in, s_edges_t *out)
{
    for (int v = 0; v < g->n_ops; v++) {
        int sv = p->stage_of_op[v];
        for (int k = 0; k < g->ops[v].n_inputs; k++) {
            int u = g->ops[v].inputs[k], su = p->stage_of_op[u];
            if (su == sv)
                continue;
            s_edges_add(&in[sv], su, u);
            s_edges_add(&out[su], sv, u);
        }
    }
    for (int a = 0; a < p->n_stages; a++) /* chain dependencies: zero-byte transfers */
        for (int k = 0; k < p->stages[a].n_succ; k++)
            if (p->stages[a].succ_dep && p->stages[a].succ_dep[k]) {
                s_edges_add(&in[p->stages[a].succ[k]], a, GPP_DEP_TENSOR);
                s_edges_add(&out[a], p->stages[a].succ[k], GPP_DEP_TENSOR);
            }
}

static void s_edges_free(s_edges_t *l, int n)
{
    for (int i = 0; i < n; i++)
        free(l[i].e);
    free(l);
}

static int s_cmp_transfer(const void *a, const void *b)
{
    const gpp_action_t *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    if (x->peer_stage != y->peer_stage)
        return x->peer_stage - y->peer_stage;
    if (x->tensor != y->tensor)
        return x->tensor - y->tensor;
    return x->peer_replica - y->peer_replica;
}

/* Pushes onto `l` the transfers of type `type` between replica r of stage st
 * (micro-batch mb) and every peer replica across the edges `e`, sorted. */
static void s_push_transfers(const gpp_plan_t *p, const gpp_graph_t *g, const gpp_stage_t *st,
                             int r, int mb, const s_edges_t *e, gpp_act_type_t type,
                             gpp_actions_t *l)
{
    int64_t lo, hi;
    gpp_sched_replica_range(st, mb, r, &lo, &hi);
    if (lo >= hi)
        return;
    int grad = type == GPP_ACT_SEND_GRAD || type == GPP_ACT_RECV_GRAD;
    gpp_actions_t tmp = {0};
    for (int i = 0; i < e->n; i++) {
        if (grad && e->e[i].tensor != GPP_DEP_TENSOR && g->ops[e->e[i].tensor].type == GPP_OP_INPUT)
            continue; /* data has no gradient */
        const gpp_stage_t *peer = &p->stages[e->e[i].peer];
        int pb = peer->micro_batch;
        for (int pj = (int)(lo / pb); pj <= (int)((hi - 1) / pb); pj++)
            for (int q = 0; q < peer->devices; q++) {
                int64_t qlo, qhi;
                gpp_sched_replica_range(peer, pj, q, &qlo, &qhi);
                int64_t a = lo > qlo ? lo : qlo, b = hi < qhi ? hi : qhi;
                if (a >= b)
                    continue;
                gpp_action_t x = {.type = type,
                                  .mb = mb,
                                  .peer_stage = peer->id,
                                  .peer_replica = q,
                                  .tensor = e->e[i].tensor,
                                  .lo = a,
                                  .hi = b};
                gpp_actions_push(&tmp, x);
            }
    }
    if (tmp.n > 1)
        qsort(tmp.a, (size_t)tmp.n, sizeof *tmp.a, s_cmp_transfer);
    for (int i = 0; i < tmp.n; i++)
        gpp_actions_push(l, tmp.a[i]);
    gpp_actions_clear(&tmp);
}

int gpp_sched_lower(gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err)
{
    if (p->model_ops != g->n_ops)
        return gpp_err_set(err, "plan is for %d ops, graph '%s' has %d", p->model_ops, g->name,
                           g->n_ops);
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        if (st->devices < 1)
            return gpp_err_set(err, "stage %d: %d devices (C3: every stage needs one or more)", s,
                               st->devices);
        if (st->micro_batch < 1)
            return gpp_err_set(err, "stage %d: micro-batch %d", s, st->micro_batch);
        if (st->id != s)
            return gpp_err_set(err, "stage %d carries id %d; link the plan first", s, st->id);
    }
    for (int i = 0; i < g->n_ops; i++)
        if (p->stage_of_op[i] < 0 || p->stage_of_op[i] >= p->n_stages)
            return gpp_err_set(err, "op %d '%s' is in no stage (C1); link the plan first", i,
                               g->ops[i].name);
    s_edges_t *in = gpp_xcalloc((size_t)p->n_stages, sizeof *in);
    s_edges_t *out = gpp_xcalloc((size_t)p->n_stages, sizeof *out);
    s_edges_build(p, g, in, out);
    for (int s = 0; s < p->n_stages; s++) {
        gpp_stage_t *st = &p->stages[s];
        if (st->replica) { /* made for the current device count, like gpp_plan_destroy assumes */
            for (int r = 0; r < st->devices; r++)
                gpp_actions_clear(&st->replica[r]);
            free(st->replica);
        }
        st->replica = gpp_xcalloc((size_t)st->devices, sizeof *st->replica);
        for (int r = 0; r < st->devices; r++) {
            gpp_actions_t *l = &st->replica[r];
            for (int i = 0; i < st->compute.n; i++) {
                gpp_action_t c = st->compute.a[i];
                if (c.type == GPP_ACT_BWD_W) { /* no transfers */
                    gpp_actions_push(l, c);
                    continue;
                }
                int fwd = c.type == GPP_ACT_FWD;
                s_push_transfers(p, g, st, r, c.mb, fwd ? &in[s] : &out[s],
                                 fwd ? GPP_ACT_RECV_ACT : GPP_ACT_RECV_GRAD, l);
                gpp_actions_push(l, c);
                s_push_transfers(p, g, st, r, c.mb, fwd ? &out[s] : &in[s],
                                 fwd ? GPP_ACT_SEND_ACT : GPP_ACT_SEND_GRAD, l);
            }
            if (st->devices > 1)
                s_push_pass(l, GPP_ACT_ALLREDUCE, -1);
            s_push_pass(l, GPP_ACT_STEP, -1);
        }
    }
    s_edges_free(in, p->n_stages);
    s_edges_free(out, p->n_stages);
    return 0;
}

int gpp_sched_build(gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err)
{
    if (gpp_sched_compute(p, err) < 0 || gpp_sched_lower(p, g, err) < 0)
        return -1;
    return gpp_sched_validate(p, g, err);
}

/* ---- SEND/RECV matching ------------------------------------------------- */

typedef struct {
    int src_stage, src_rep, dst_stage, dst_rep, grad, tensor;
    int64_t lo, hi;
    int is_send;
    int flat;
} s_msg_t;

/* Sort order: the message identity, then RECV before SEND. Field by field
 * with an early exit: the simulator matches every plan the search keeps,
 * and this comparison was most of that matching's time. */
#define S_CMP_FIELD(f)                                                                             \
    if (x->f != y->f)                                                                              \
    return x->f < y->f ? -1 : 1
static int s_cmp_msg(const void *a, const void *b)
{
    const s_msg_t *x = a, *y = b;
    S_CMP_FIELD(src_stage);
    S_CMP_FIELD(src_rep);
    S_CMP_FIELD(dst_stage);
    S_CMP_FIELD(dst_rep);
    S_CMP_FIELD(grad);
    S_CMP_FIELD(tensor);
    S_CMP_FIELD(lo);
    S_CMP_FIELD(hi);
    S_CMP_FIELD(is_send);
    return 0;
}
#undef S_CMP_FIELD

static int s_is_send(gpp_act_type_t t)
{
    return t == GPP_ACT_SEND_ACT || t == GPP_ACT_SEND_GRAD;
}

static int s_is_recv(gpp_act_type_t t)
{
    return t == GPP_ACT_RECV_ACT || t == GPP_ACT_RECV_GRAD;
}

static int s_msg_same(const s_msg_t *x, const s_msg_t *y)
{
    s_msg_t a = *x, b = *y;
    a.is_send = b.is_send = 0;
    a.flat = b.flat = 0;
    return s_cmp_msg(&a, &b) == 0;
}

static void s_msg_describe(const s_msg_t *m, char *buf, size_t n)
{
    snprintf(buf, n,
             "%s of tensor %d samples [%lld,%lld) from stage %d replica %d to stage %d replica %d",
             m->grad ? "gradient" : "activation", m->tensor, (long long)m->lo, (long long)m->hi,
             m->src_stage, m->src_rep, m->dst_stage, m->dst_rep);
}

void gpp_sched_links_destroy(gpp_sched_links_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_sched_links_t *k = *self_p;
    free(k->list_base);
    free(k->list_stage);
    free(k->act_base);
    free(k->match);
    free(k);
    *self_p = NULL;
}

gpp_sched_links_t *gpp_sched_links_new(const gpp_plan_t *p, gpp_err_t *err)
{
    gpp_sched_links_t *k = gpp_xcalloc(1, sizeof *k);
    k->list_base = gpp_xcalloc((size_t)p->n_stages + 1, sizeof(int));
    for (int s = 0; s < p->n_stages; s++) {
        if (!p->stages[s].replica) {
            gpp_err_set(err, "stage %d has no lowered action lists; run gpp_sched_lower", s);
            gpp_sched_links_destroy(&k);
            return NULL;
        }
        k->list_base[s] = k->n_lists;
        k->n_lists += p->stages[s].devices;
    }
    k->list_stage = gpp_xcalloc((size_t)k->n_lists, sizeof(int));
    k->act_base = gpp_xcalloc((size_t)k->n_lists + 1, sizeof(int));
    int n_msgs = 0;
    for (int s = 0, li = 0; s < p->n_stages; s++)
        for (int r = 0; r < p->stages[s].devices; r++, li++) {
            k->list_stage[li] = s;
            k->act_base[li + 1] = k->act_base[li] + p->stages[s].replica[r].n;
            for (int i = 0; i < p->stages[s].replica[r].n; i++) {
                gpp_act_type_t t = p->stages[s].replica[r].a[i].type;
                n_msgs += s_is_send(t) || s_is_recv(t);
            }
        }
    k->n_acts = k->act_base[k->n_lists];
    k->match = gpp_xcalloc((size_t)k->n_acts + 1, sizeof(int));
    for (int i = 0; i < k->n_acts; i++)
        k->match[i] = -1;
    s_msg_t *msgs = gpp_xcalloc((size_t)n_msgs + 1, sizeof *msgs);
    int n = 0;
    for (int s = 0, li = 0; s < p->n_stages; s++)
        for (int r = 0; r < p->stages[s].devices; r++, li++) {
            const gpp_actions_t *l = &p->stages[s].replica[r];
            for (int i = 0; i < l->n; i++) {
                const gpp_action_t *a = &l->a[i];
                int snd = s_is_send(a->type);
                if (!snd && !s_is_recv(a->type))
                    continue;
                if (a->peer_stage < 0 || a->peer_stage >= p->n_stages || a->peer_replica < 0 ||
                    a->peer_replica >= p->stages[a->peer_stage].devices || a->lo >= a->hi) {
                    gpp_err_set(err,
                                "stage %d replica %d action %d: %s names no valid peer or "
                                "an empty sample range",
                                s, r, i, gpp_act_type_name(a->type));
                    goto fail;
                }
                s_msg_t m = {.grad = a->type == GPP_ACT_SEND_GRAD || a->type == GPP_ACT_RECV_GRAD,
                             .tensor = a->tensor,
                             .lo = a->lo,
                             .hi = a->hi,
                             .is_send = snd,
                             .flat = k->act_base[li] + i};
                m.src_stage = snd ? s : a->peer_stage;
                m.src_rep = snd ? r : a->peer_replica;
                m.dst_stage = snd ? a->peer_stage : s;
                m.dst_rep = snd ? a->peer_replica : r;
                msgs[n++] = m;
            }
        }
    qsort(msgs, (size_t)n, sizeof *msgs, s_cmp_msg);
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && s_msg_same(&msgs[i], &msgs[j]))
            j++;
        if (j - i != 2 || msgs[i].is_send || !msgs[i + 1].is_send) {
            char d[200];
            s_msg_describe(&msgs[i], d, sizeof d);
            int sends = 0;
            for (int t = i; t < j; t++)
                sends += msgs[t].is_send;
            gpp_err_set(err,
                        "deadlock check: %s has %d SEND and %d RECV actions; each needs "
                        "exactly one of both (stage %d)",
                        d, sends, j - i - sends,
                        msgs[i].is_send ? msgs[i].src_stage : msgs[i].dst_stage);
            goto fail;
        }
        k->match[msgs[i].flat] = msgs[i + 1].flat;
        k->match[msgs[i + 1].flat] = msgs[i].flat;
        i = j;
    }
    free(msgs);
    return k;
fail:
    free(msgs);
    gpp_sched_links_destroy(&k);
    return NULL;
}

/* ---- validation ----------------------------------------------------------- */

/* C1: every op in exactly one stage, stage_of_op agrees, every stage convex. */
static int s_check_c1(const gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err)
{
    int *owner = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    char *mark = gpp_xcalloc((size_t)g->n_ops, 1);
    int rc = -1;
    for (int i = 0; i < g->n_ops; i++)
        owner[i] = -1;
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        if (st->n_ops < 1) {
            gpp_err_set(err, "C1: stage %d holds no ops", s);
            goto out;
        }
        for (int k = 0; k < st->n_ops; k++) {
            int o = st->ops[k];
            if (o < 0 || o >= g->n_ops) {
                gpp_err_set(err, "C1: stage %d names op %d, outside [0,%d)", s, o, g->n_ops);
                goto out;
            }
            if (owner[o] >= 0) {
                gpp_err_set(err, "C1: op %d '%s' is in stages %d and %d; stages must not overlap",
                            o, g->ops[o].name, owner[o], s);
                goto out;
            }
            owner[o] = s;
        }
    }
    for (int i = 0; i < g->n_ops; i++) {
        if (owner[i] < 0) {
            gpp_err_set(err, "C1: op %d '%s' is in no stage; stages must cover the graph", i,
                        g->ops[i].name);
            goto out;
        }
        if (p->stage_of_op[i] != owner[i]) {
            gpp_err_set(err, "C1: stage_of_op[%d] = %d but stage %d holds op %d '%s'", i,
                        p->stage_of_op[i], owner[i], i, g->ops[i].name);
            goto out;
        }
    }
    /* Convexity: ops are in topological order, so one pass marks every op
       outside stage s that is reachable from s; an op of s reachable that
       way closes a path that leaves s and comes back. */
    for (int s = 0; s < p->n_stages; s++) {
        memset(mark, 0, (size_t)g->n_ops);
        for (int v = 0; v < g->n_ops; v++) {
            const gpp_op_t *op = &g->ops[v];
            int from_s = 0, via_out = -1;
            for (int k = 0; k < op->n_inputs; k++) {
                int u = op->inputs[k];
                if (owner[u] == s)
                    from_s = 1;
                else if (mark[u])
                    via_out = u;
            }
            if (owner[v] == s) {
                if (via_out >= 0) {
                    gpp_err_set(err,
                                "C1: stage %d is not convex: a path leaves it and re-enters "
                                "at op %d '%s' through op %d '%s' of stage %d",
                                s, v, op->name, via_out, g->ops[via_out].name, owner[via_out]);
                    goto out;
                }
            } else if (from_s || via_out >= 0) {
                mark[v] = 1;
            }
        }
    }
    rc = 0;
out:
    free(owner);
    free(mark);
    return rc;
}

static int s_in_list(const int *a, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (a[i] == v)
            return 1;
    return 0;
}

/* C2: stage edges are exactly those induced by graph edges; stage DAG acyclic. */
static int s_check_c2(const gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err)
{
    int S = p->n_stages, rc = -1;
    char *adj = gpp_xcalloc((size_t)S * (size_t)S, 1);
    int *order = gpp_xcalloc((size_t)S, sizeof(int));
    for (int v = 0; v < g->n_ops; v++)
        for (int k = 0; k < g->ops[v].n_inputs; k++) {
            int u = g->ops[v].inputs[k], a = p->stage_of_op[u], b = p->stage_of_op[v];
            if (a == b)
                continue;
            if (!s_in_list(p->stages[a].succ, p->stages[a].n_succ, b) ||
                !s_in_list(p->stages[b].pred, p->stages[b].n_pred, a)) {
                gpp_err_set(err,
                            "C2: graph edge %d '%s' -> %d '%s' crosses from stage %d to "
                            "stage %d, but the stage graph has no edge (%d, %d)",
                            u, g->ops[u].name, v, g->ops[v].name, a, b, a, b);
                goto out;
            }
            adj[(size_t)a * S + b] = 1;
        }
    for (int a = 0; a < S; a++) { /* chain dependencies: only between consecutive stages */
        const gpp_stage_t *st = &p->stages[a];
        for (int k = 0; k < st->n_succ; k++) {
            if (!st->succ_dep || !st->succ_dep[k])
                continue;
            int b = st->succ[k];
            if (!p->chain || b != a + 1 || adj[(size_t)a * S + b]) {
                gpp_err_set(err, "C2: stage %d marks successor %d as a dependency edge, but %s", a,
                            b,
                            !p->chain    ? "the plan is not a chain"
                            : b != a + 1 ? "dependencies link consecutive stages only"
                                         : "a tensor flows on that edge");
                goto out;
            }
            adj[(size_t)a * S + b] = 2;
        }
        if (p->chain && a + 1 < S && !adj[(size_t)a * S + a + 1]) {
            gpp_err_set(err, "C2: the chain plan has no edge from stage %d to stage %d", a, a + 1);
            goto out;
        }
    }
    for (int a = 0; a < S; a++) {
        const gpp_stage_t *st = &p->stages[a];
        for (int k = 0; k < st->n_succ; k++) {
            int b = st->succ[k];
            if (b < 0 || b >= S || !adj[(size_t)a * S + b]) {
                gpp_err_set(err,
                            "C2: stage %d lists successor %d, but no graph edge goes from "
                            "stage %d to stage %d",
                            a, b, a, b);
                goto out;
            }
        }
        for (int k = 0; k < st->n_pred; k++) {
            int b = st->pred[k];
            if (b < 0 || b >= S || !adj[(size_t)b * S + a]) {
                gpp_err_set(err,
                            "C2: stage %d lists predecessor %d, but no graph edge goes from "
                            "stage %d to stage %d",
                            a, b, b, a);
                goto out;
            }
        }
    }
    int n = gpp_plan_topo_order(S, adj, order);
    if (n != S) {
        gpp_err_set(err, "C2: the stage graph has a cycle through stage %d", order[n]);
        goto out;
    }
    rc = 0;
out:
    free(adj);
    free(order);
    return rc;
}

/* C3: device ranges are disjoint and within [0, n_devices): they partition
 * the devices the plan uses; the partitioner may leave the rest idle. */
static int s_check_c3(const gpp_plan_t *p, gpp_err_t *err)
{
    int *owner = gpp_xcalloc((size_t)(p->n_devices > 0 ? p->n_devices : 1), sizeof(int));
    int rc = -1;
    for (int d = 0; d < p->n_devices; d++)
        owner[d] = -1;
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        if (st->devices < 1) {
            gpp_err_set(err, "C3: stage %d has %d devices; every stage needs one or more", s,
                        st->devices);
            goto out;
        }
        for (int d = st->first_device; d < st->first_device + st->devices; d++) {
            if (d < 0 || d >= p->n_devices) {
                gpp_err_set(err, "C3: stage %d uses device %d, outside [0,%d)", s, d, p->n_devices);
                goto out;
            }
            if (owner[d] >= 0) {
                gpp_err_set(err, "C3: device %d is given to stages %d and %d", d, owner[d], s);
                goto out;
            }
            owner[d] = s;
        }
    }
    rc = 0; /* devices left idle are allowed (gpp_part: "at most n_devices") */
out:
    free(owner);
    return rc;
}

/* Appends "; order: ... F3 B1 F5 ..." to err: the passes of l from a few
 * before action `at` on (the offending spot of a C4 or deadlock error). */
static int s_err_order(gpp_err_t *err, const gpp_actions_t *l, int at)
{
    if (!err)
        return -1;
    int first = at < l->n ? at : l->n;
    for (int back = 0; first > 0 && back < 8;) {
        first--;
        back += gpp_act_is_pass(l->a[first].type);
    }
    char order[160];
    gpp_sched_format(l, first, order, sizeof order);
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, "; order: %s", order);
    return -1;
}

/* C4 on one list of passes (FWD, BWD / BWD_IN, BWD_W; other actions
 * ignored): each kind in micro-batch order, a micro-batch's backward after
 * its forward and its W after its B, every micro-batch once; a 1F1B plan's
 * backwards whole, a zero-bubble plan's split. */
static int s_check_c4(const gpp_plan_t *p, int s, const gpp_actions_t *l, const char *what,
                      gpp_err_t *err)
{
    const gpp_stage_t *st = &p->stages[s];
    if (st->micro_batch < 1 || p->batch % st->micro_batch != 0)
        return gpp_err_set(err, "C4: stage %d: micro-batch %d does not divide the batch %d", s,
                           st->micro_batch, p->batch);
    int m = p->batch / st->micro_batch, nf = 0, nb = 0, nw = 0, zb = p->schedule != GPP_SCHED_1F1B;
    for (int i = 0; i < l->n; i++) {
        const gpp_action_t *a = &l->a[i];
        if (!gpp_act_is_pass(a->type))
            continue;
        if (a->type != GPP_ACT_FWD && (a->type == GPP_ACT_BWD) == zb) {
            gpp_err_set(err, "C4: stage %d %s: a %s pass in a %s plan (its backwards are %s)", s,
                        what, gpp_act_type_name(a->type), gpp_sched_kind_name(p->schedule),
                        zb ? "split into B and W" : "whole");
            return s_err_order(err, l, i);
        }
        if (a->type == GPP_ACT_FWD) {
            if (a->mb != nf) {
                gpp_err_set(err,
                            "C4: stage %d %s: fw_%d comes where fw_%d must (forwards in "
                            "micro-batch order)",
                            s, what, a->mb, nf);
                return s_err_order(err, l, i);
            }
            nf++;
        } else if (a->type == GPP_ACT_BWD_W) {
            if (a->mb != nw)
                gpp_err_set(err,
                            "C4: stage %d %s: w_%d comes where w_%d must (W passes in "
                            "micro-batch order)",
                            s, what, a->mb, nw);
            else if (a->mb >= nb)
                gpp_err_set(err, "C4: stage %d %s: w_%d precedes bw_%d", s, what, a->mb, a->mb);
            if (a->mb != nw || a->mb >= nb)
                return s_err_order(err, l, i);
            nw++;
        } else {
            if (a->mb != nb)
                gpp_err_set(err,
                            "C4: stage %d %s: bw_%d comes where bw_%d must (backwards in "
                            "micro-batch order)",
                            s, what, a->mb, nb);
            else if (a->mb >= nf)
                gpp_err_set(err, "C4: stage %d %s: bw_%d precedes fw_%d", s, what, a->mb, a->mb);
            if (a->mb != nb || a->mb >= nf)
                return s_err_order(err, l, i);
            nb++;
        }
    }
    if (nf != m || nb != m || nw != (zb ? m : 0)) {
        if (zb)
            gpp_err_set(err,
                        "C4: stage %d %s has %d forwards, %d B and %d W passes; the batch has %d "
                        "micro-batches (W passes never cross the optimizer step)",
                        s, what, nf, nb, nw, m);
        else
            gpp_err_set(err,
                        "C4: stage %d %s has %d forwards and %d backwards; the batch has %d "
                        "micro-batches",
                        s, what, nf, nb, m);
        return s_err_order(err, l, l->n);
    }
    return 0;
}

/* Replica lists: same passes as compute, ALLREDUCE iff devices > 1, STEP last. */
/* One replica list r of stage s against the rules above. */
static int s_check_replica(const gpp_plan_t *p, int s, int r, gpp_err_t *err)
{
    const gpp_stage_t *st = &p->stages[s];
    const gpp_actions_t *l = &st->replica[r];
    int c = 0, ar = 0, step = 0;
    for (int i = 0; i < l->n; i++) {
        const gpp_action_t *a = &l->a[i];
        int pass = gpp_act_is_pass(a->type);
        if (pass && (c >= st->compute.n || st->compute.a[c].type != a->type ||
                     st->compute.a[c].mb != a->mb))
            return gpp_err_set(err,
                               "stage %d replica %d: action %d (%s %d) departs from the "
                               "stage's compute order",
                               s, r, i, gpp_act_type_name(a->type), a->mb);
        if (a->type == GPP_ACT_STEP && i != l->n - 1)
            return gpp_err_set(err, "stage %d replica %d: STEP is not the last action", s, r);
        if ((int)a->type < 0 || a->type >= GPP_ACT__COUNT)
            return gpp_err_set(err, "stage %d replica %d: action %d has type %d", s, r, i,
                               (int)a->type);
        c += pass;
        ar += a->type == GPP_ACT_ALLREDUCE;
        step += a->type == GPP_ACT_STEP;
    }
    if (c != st->compute.n)
        return gpp_err_set(err, "stage %d replica %d runs %d of the %d passes of the compute order",
                           s, r, c, st->compute.n);
    if (step != 1)
        return gpp_err_set(err, "stage %d replica %d: %d STEP actions, want 1", s, r, step);
    if (ar != (st->devices > 1))
        return gpp_err_set(err, "stage %d replica %d: %d ALLREDUCE actions with %d replicas", s, r,
                           ar, st->devices);
    return 0;
}

static int s_check_replicas(const gpp_plan_t *p, gpp_err_t *err)
{
    for (int s = 0; s < p->n_stages; s++)
        for (int r = 0; r < p->stages[s].devices; r++)
            if (s_check_replica(p, s, r, err) < 0)
                return -1;
    return 0;
}

/* Every replica of stage s is at its ALLREDUCE or past it. */
static int s_allreduce_ready(const gpp_plan_t *p, const gpp_sched_links_t *k, const int *pos,
                             const char *ar_passed, int s)
{
    for (int q = 0; q < p->stages[s].devices; q++) {
        int lq = k->list_base[s] + q;
        const gpp_actions_t *lqa = &p->stages[s].replica[q];
        if (!ar_passed[lq] && !(pos[lq] < lqa->n && lqa->a[pos[lq]].type == GPP_ACT_ALLREDUCE))
            return 0;
    }
    return 1;
}

/* Runs list li from pos[li] until it blocks or ends; returns the actions run. */
static int s_advance_list(const gpp_plan_t *p, const gpp_sched_links_t *k, int li, int *pos,
                          char *done, char *ar_passed)
{
    int s = k->list_stage[li], r = li - k->list_base[s], ran = 0;
    const gpp_actions_t *l = &p->stages[s].replica[r];
    while (pos[li] < l->n) {
        const gpp_action_t *a = &l->a[pos[li]];
        int flat = k->act_base[li] + pos[li];
        if (s_is_recv(a->type) && !done[k->match[flat]])
            break;
        if (a->type == GPP_ACT_ALLREDUCE) {
            if (!s_allreduce_ready(p, k, pos, ar_passed, s))
                break;
            ar_passed[li] = 1;
        }
        done[flat] = 1;
        pos[li]++;
        ran++;
    }
    return ran;
}

/* Runs every list with buffered sends and blocking receives; ALLREDUCE is a
 * barrier over the stage's replicas. Fails naming a blocked stage. */
static int s_check_deadlock(const gpp_plan_t *p, const gpp_sched_links_t *k, gpp_err_t *err)
{
    int *pos = gpp_xcalloc((size_t)k->n_lists, sizeof(int));
    char *done = gpp_xcalloc((size_t)k->n_acts + 1, 1);
    char *ar_passed = gpp_xcalloc((size_t)k->n_lists, 1);
    int rc = -1, progress = 1, remaining = k->n_lists;
    while (progress && remaining) {
        progress = 0;
        for (int li = 0; li < k->n_lists; li++) {
            const gpp_actions_t *l =
                &p->stages[k->list_stage[li]].replica[li - k->list_base[k->list_stage[li]]];
            if (pos[li] == l->n)
                continue;
            if (s_advance_list(p, k, li, pos, done, ar_passed) > 0)
                progress = 1;
            if (pos[li] == l->n)
                remaining--;
        }
    }
    if (remaining) {
        for (int li = 0; li < k->n_lists; li++) {
            int s = k->list_stage[li], r = li - k->list_base[s];
            const gpp_actions_t *l = &p->stages[s].replica[r];
            if (pos[li] == l->n)
                continue;
            const gpp_action_t *a = &l->a[pos[li]];
            gpp_err_set(err,
                        "deadlock: stage %d replica %d blocks at action %d (%s mb %d, "
                        "tensor %d samples [%lld,%lld) from stage %d replica %d), which is never "
                        "sent; the in-flight count of stage %d or its producers is too small "
                        "for its consumers",
                        s, r, pos[li], gpp_act_type_name(a->type), a->mb, a->tensor,
                        (long long)a->lo, (long long)a->hi, a->peer_stage, a->peer_replica, s);
            s_err_order(err, l, pos[li]);
            break;
        }
        goto out;
    }
    rc = 0;
out:
    free(pos);
    free(done);
    free(ar_passed);
    return rc;
}

int gpp_sched_validate(const gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err)
{
    if (p->n_stages < 1)
        return gpp_err_set(err, "C1: the plan has no stages");
    if (p->model_ops != g->n_ops)
        return gpp_err_set(err, "plan is for %d ops, graph '%s' has %d", p->model_ops, g->name,
                           g->n_ops);
    if (p->batch < 1)
        return gpp_err_set(err, "batch %d; need 1 or more samples", p->batch);
    if (s_check_c1(p, g, err) < 0 || s_check_c2(p, g, err) < 0 || s_check_c3(p, err) < 0)
        return -1;
    for (int s = 0; s < p->n_stages; s++)
        if (s_check_c4(p, s, &p->stages[s].compute, "schedule", err) < 0)
            return -1;
    int lowered = 0;
    for (int s = 0; s < p->n_stages; s++)
        lowered += p->stages[s].replica != NULL;
    if (!lowered)
        return 0;
    if (lowered != p->n_stages)
        return gpp_err_set(err, "only %d of %d stages have lowered action lists", lowered,
                           p->n_stages);
    if (s_check_replicas(p, err) < 0)
        return -1;
    gpp_sched_links_t *k = gpp_sched_links_new(p, err);
    if (!k)
        return -1;
    int rc = s_check_deadlock(p, k, err);
    gpp_sched_links_destroy(&k);
    return rc;
}
