/* gpp_plan: plan construction and stage-graph derivation. */
#include "planner/gpp_plan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

static const char *s_act_names[GPP_ACT__COUNT] = {
    "FWD", "BWD", "SEND_ACT", "RECV_ACT", "SEND_GRAD", "RECV_GRAD", "ALLREDUCE", "STEP", "BWD_IN",
    "BWD_W"};

static const char *s_sched_names[GPP_SCHED__COUNT] = {"1f1b", "zb-h1", "zb-h2"};

const char *gpp_sched_kind_name(gpp_sched_kind_t k)
{
    return (k >= 0 && k < GPP_SCHED__COUNT) ? s_sched_names[k] : "?";
}

int gpp_sched_kind_parse(const char *word, const char *what, unsigned *mask, gpp_err_t *err)
{
    if (word && !strcmp(word, "auto")) {
        *mask = GPP_SCHED_AUTO;
        return 0;
    }
    for (int k = 0; word && k < GPP_SCHED__COUNT; k++)
        if (!strcmp(word, s_sched_names[k])) {
            *mask = 1u << k;
            return 0;
        }
    return gpp_err_set(err, "%s '%s': use auto, 1f1b, zb-h1 or zb-h2", what, word ? word : "");
}

int gpp_actions_inflight(const gpp_action_t *a, int n)
{
    int hi = 0, most = 1, live = 0;
    for (int j = 0; j < n; j++)
        hi = a[j].mb + 1 > hi ? a[j].mb + 1 : hi;
    int *end = gpp_xcalloc((size_t)hi + 1, sizeof(int)); /* last action + 1, 0: none */
    char *begun = gpp_xcalloc((size_t)hi + 1, 1);
    for (int j = 0; j < n; j++) {
        gpp_act_type_t t = a[j].type;
        if (a[j].mb >= 0 && (t == GPP_ACT_BWD || t == GPP_ACT_BWD_IN || t == GPP_ACT_BWD_W ||
                             t == GPP_ACT_SEND_GRAD))
            end[a[j].mb] = j + 1;
    }
    for (int j = 0; j < n; j++) {
        int m = a[j].mb;
        if (m < 0)
            continue;
        if ((a[j].type == GPP_ACT_FWD || a[j].type == GPP_ACT_RECV_ACT) && !begun[m]) {
            begun[m] = 1;
            most = ++live > most ? live : most;
        }
        if (begun[m] == 1 && end[m] == j + 1) {
            begun[m] = 2;
            live--;
        }
    }
    free(begun);
    free(end);
    return most;
}

const char *gpp_act_type_name(gpp_act_type_t t)
{
    return (t >= 0 && t < GPP_ACT__COUNT) ? s_act_names[t] : "?";
}

void gpp_actions_push(gpp_actions_t *l, gpp_action_t a)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->a = gpp_xrealloc(l->a, (size_t)l->cap * sizeof *l->a);
    }
    l->a[l->n++] = a;
}

void gpp_actions_clear(gpp_actions_t *l)
{
    free(l->a);
    l->a = NULL;
    l->n = l->cap = 0;
}

gpp_plan_t *gpp_plan_new(const char *planner, const gpp_graph_t *g, int n_devices, int batch)
{
    gpp_plan_t *p = gpp_xcalloc(1, sizeof *p);
    snprintf(p->planner, sizeof p->planner, "%s", planner);
    snprintf(p->model, sizeof p->model, "%s", g->name);
    p->model_ops = g->n_ops;
    p->n_devices = n_devices;
    p->batch = batch;
    p->chain = !strcmp(planner, "spp");
    p->stage_of_op = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    for (int i = 0; i < g->n_ops; i++)
        p->stage_of_op[i] = -1;
    return p;
}

static void s_stage_free(gpp_stage_t *s)
{
    free(s->ops);
    free(s->succ);
    free(s->succ_dep);
    free(s->pred);
    gpp_actions_clear(&s->compute);
    if (s->replica) {
        for (int r = 0; r < s->devices; r++)
            gpp_actions_clear(&s->replica[r]);
        free(s->replica);
    }
}

void gpp_plan_destroy(gpp_plan_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_plan_t *p = *self_p;
    for (int i = 0; i < p->n_stages; i++)
        s_stage_free(&p->stages[i]);
    free(p->stages);
    free(p->stage_of_op);
    free(p);
    *self_p = NULL;
}

gpp_stage_t *gpp_plan_add_stage(gpp_plan_t *p, int n_ops, const int *ops)
{
    assert(n_ops > 0);
    p->stages = gpp_xrealloc(p->stages, (size_t)(p->n_stages + 1) * sizeof *p->stages);
    gpp_stage_t *s = &p->stages[p->n_stages];
    memset(s, 0, sizeof *s);
    s->id = p->n_stages++;
    s->n_ops = n_ops;
    s->ops = gpp_xcalloc((size_t)n_ops, sizeof(int));
    memcpy(s->ops, ops, (size_t)n_ops * sizeof(int));
    s->devices = 1;
    s->micro_batch = 1;
    s->k = 1;
    return s;
}

static int s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Adds v to a sorted unique list (n, arr) of capacity >= n+1. */
static void s_set_add(int *arr, int *n, int v)
{
    for (int i = 0; i < *n; i++)
        if (arr[i] == v)
            return;
    arr[(*n)++] = v;
    qsort(arr, (size_t)*n, sizeof(int), s_cmp_int);
}

int gpp_plan_topo_order(int S, const char *adj, int *order)
{
    int *indeg = gpp_xcalloc((size_t)(S > 0 ? S : 1), sizeof(int));
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            indeg[b] += adj[(size_t)a * S + b] != 0;
    int head = 0, tail = 0;
    for (int s = 0; s < S; s++)
        if (!indeg[s])
            order[tail++] = s;
    while (head < tail) {
        int a = order[head++];
        for (int b = 0; b < S; b++)
            if (adj[(size_t)a * S + b] && --indeg[b] == 0)
                order[tail++] = b;
    }
    int n = tail;
    for (int s = 0; s < S; s++) /* left out: still waiting on a predecessor */
        if (indeg[s])
            order[tail++] = s;
    free(indeg);
    return n;
}

int gpp_plan_link(gpp_plan_t *p, const gpp_graph_t *g, gpp_err_t *err)
{
    int S = p->n_stages;
    if (S == 0)
        return gpp_err_set(err, "plan has no stages");
    for (int i = 0; i < g->n_ops; i++)
        p->stage_of_op[i] = -1;
    for (int s = 0; s < S; s++) {
        gpp_stage_t *st = &p->stages[s];
        qsort(st->ops, (size_t)st->n_ops, sizeof(int), s_cmp_int);
        for (int k = 0; k < st->n_ops; k++) {
            int o = st->ops[k];
            if (o < 0 || o >= g->n_ops)
                return gpp_err_set(err, "stage %d: op id %d out of range [0,%d)", s, o, g->n_ops);
            if (p->stage_of_op[o] >= 0)
                return gpp_err_set(err, "op %d '%s' is in stages %d and %d (C1: stages must not overlap)",
                                   o, g->ops[o].name, p->stage_of_op[o], s);
            p->stage_of_op[o] = s;
        }
    }
    for (int i = 0; i < g->n_ops; i++)
        if (p->stage_of_op[i] < 0)
            return gpp_err_set(err, "op %d '%s' is in no stage (C1: stages must cover the graph)",
                               i, g->ops[i].name);
    /* stage edges (C2) */
    char *adj = gpp_xcalloc((size_t)S * (size_t)S, 1);
    for (int i = 0; i < g->n_ops; i++)
        for (int k = 0; k < g->ops[i].n_inputs; k++) {
            int a = p->stage_of_op[g->ops[i].inputs[k]], b = p->stage_of_op[i];
            if (a != b)
                adj[(size_t)a * S + b] = 1;
        }
    if (p->chain && S > 1) { /* dependency edges: consecutive by smallest op id */
        int *by_op = gpp_xcalloc((size_t)S, sizeof(int)), n = 0;
        for (int i = 0; i < g->n_ops; i++) {
            int s = p->stage_of_op[i];
            if (p->stages[s].ops[0] == i)
                by_op[n++] = s;
        }
        for (int k = 0; k + 1 < n; k++)
            if (!adj[(size_t)by_op[k] * S + by_op[k + 1]])
                adj[(size_t)by_op[k] * S + by_op[k + 1]] = 2;
        free(by_op);
    }
    /* topological order of stages; a cycle means a non-convex stage */
    int *order = gpp_xcalloc((size_t)S, sizeof(int));
    if (gpp_plan_topo_order(S, adj, order) != S) {
        free(adj), free(order);
        return gpp_err_set(err, p->chain ? "stage graph has a cycle: in a chain (sequential) "
                                           "plan every stage must be a run of consecutive ops"
                                         : "stage graph has a cycle: some stage is not convex (C1/C2)");
    }
    /* renumber stages in topological order (stable: by smallest op id among ready ones
       is not needed; Kahn order from ascending ids is deterministic) */
    gpp_stage_t *old = p->stages;
    gpp_stage_t *ns = gpp_xcalloc((size_t)S, sizeof *ns);
    int *newid = gpp_xcalloc((size_t)S, sizeof(int));
    for (int i = 0; i < S; i++) {
        ns[i] = old[order[i]];
        newid[order[i]] = i;
        ns[i].id = i;
    }
    char *nadj = gpp_xcalloc((size_t)S * (size_t)S, 1);
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            if (adj[(size_t)a * S + b])
                nadj[(size_t)newid[a] * S + newid[b]] = adj[(size_t)a * S + b];
    free(old);
    p->stages = ns;
    for (int i = 0; i < g->n_ops; i++)
        p->stage_of_op[i] = newid[p->stage_of_op[i]];
    int dev = 0;
    for (int s = 0; s < S; s++) {
        gpp_stage_t *st = &p->stages[s];
        free(st->succ), free(st->succ_dep), free(st->pred);
        st->succ = gpp_xcalloc((size_t)S, sizeof(int));
        st->succ_dep = gpp_xcalloc((size_t)S, 1);
        st->pred = gpp_xcalloc((size_t)S, sizeof(int));
        st->n_succ = st->n_pred = 0;
        st->first_device = dev;
        dev += st->devices;
    }
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            if (nadj[(size_t)a * S + b]) { /* b ascending: succ stays sorted */
                p->stages[a].succ_dep[p->stages[a].n_succ] = nadj[(size_t)a * S + b] == 2;
                p->stages[a].succ[p->stages[a].n_succ++] = b;
                s_set_add(p->stages[b].pred, &p->stages[b].n_pred, a);
            }
    /* depth: stages on the longest path */
    int *longest = gpp_xcalloc((size_t)S, sizeof(int));
    p->depth = 0;
    for (int s = 0; s < S; s++) {
        int best = 0;
        for (int k = 0; k < p->stages[s].n_pred; k++)
            if (longest[p->stages[s].pred[k]] > best)
                best = longest[p->stages[s].pred[k]];
        longest[s] = best + 1;
        if (longest[s] > p->depth)
            p->depth = longest[s];
    }
    free(longest), free(adj), free(nadj), free(order), free(newid);
    return 0;
}

int gpp_plan_place(gpp_plan_t *p, int gpus_per_node)
{
    int G = gpus_per_node, N = p->n_devices, S = p->n_stages;
    if (G < 1 || N < 1 || S < 1)
        return 0;
    int nodes = (N + G - 1) / G;
    int *next = gpp_xcalloc((size_t)nodes, sizeof(int)); /* next free device per node */
    int *end = gpp_xcalloc((size_t)nodes, sizeof(int));
    int *order = gpp_xcalloc((size_t)S, sizeof(int)), *start = gpp_xcalloc((size_t)S, sizeof(int));
    for (int n = 0; n < nodes; n++) {
        next[n] = n * G;
        end[n] = (n + 1) * G < N ? (n + 1) * G : N;
    }
    for (int s = 0; s < S; s++)
        order[s] = s;
    /* largest first; ties by id, so placement is deterministic */
    for (int i = 1; i < S; i++)
        for (int j = i; j > 0 && p->stages[order[j]].devices > p->stages[order[j - 1]].devices; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    int ok = 1;
    for (int i = 0; i < S && ok; i++) {
        int s = order[i], d = p->stages[s].devices, chosen = -1;
        if (d <= G) { /* best fit inside one node */
            for (int n = 0; n < nodes; n++)
                if (end[n] - next[n] >= d &&
                    (chosen < 0 || end[n] - next[n] < end[chosen] - next[chosen]))
                    chosen = n;
            if (chosen < 0) {
                ok = 0;
                break;
            }
            start[s] = next[chosen];
            next[chosen] += d;
        } else { /* whole fresh nodes, the last one possibly partly */
            int span = (d + G - 1) / G;
            for (int n = 0; n + span <= nodes && chosen < 0; n++) {
                int fresh = 1;
                for (int m = n; m < n + span; m++)
                    fresh &= next[m] == m * G;
                if (fresh && n * G + d <= N)
                    chosen = n;
            }
            if (chosen < 0) {
                ok = 0;
                break;
            }
            start[s] = chosen * G;
            for (int m = chosen; m < chosen + span; m++)
                next[m] = (start[s] + d < end[m]) ? start[s] + d : end[m];
        }
    }
    if (ok)
        for (int s = 0; s < S; s++)
            p->stages[s].first_device = start[s];
    free(next), free(end), free(order), free(start);
    return ok;
}
