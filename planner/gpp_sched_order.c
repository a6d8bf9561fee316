/* gpp_sched_order: one global order of an iteration's transfers and
 * all-reduces, for a communication library that runs a rank's operations
 * one after another on one stream and blocks each until its peer takes
 * part (NCCL with one communicator and one communication stream per rank;
 * docs/gpu.md "NCCL between agents"). See gpp_sched.h.
 *
 * The union graph of a lowered plan: per replica list, its passes (FWD,
 * BWD, STEP) in list order; a transfer (a matched SEND/RECV pair, one node)
 * after the pass before its SEND in the sender's list; the pass after a
 * RECV in the receiver's list after that transfer; a stage's all-reduce
 * (one node for all its replicas) after each replica's last pass, and its
 * STEP after it. The transfers need not keep the lists' order: the lists
 * order them for Gloo, whose sends are buffered and whose receives are
 * posted at the start, where a blocking stream would deadlock (1F1B: A
 * sends act(1) before it receives grad(0), B sends grad(0) before it
 * receives act(1)). A topological order of the union graph is safe: every
 * rank's sequence is a subsequence of it, so the earliest transfer not yet
 * done always has both sides at the head of their streams, its sender's
 * pass done (earlier in the order) and nothing it waits for later. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_err.h"
#include "planner/gpp_sched.h"

static int s_is_send(gpp_act_type_t t)
{
    return t == GPP_ACT_SEND_ACT || t == GPP_ACT_SEND_GRAD;
}
static int s_is_recv(gpp_act_type_t t)
{
    return t == GPP_ACT_RECV_ACT || t == GPP_ACT_RECV_GRAD;
}
static int s_is_pass(gpp_act_type_t t)
{
    return gpp_act_is_pass(t) || t == GPP_ACT_STEP;
}
/* what a communication stream runs */
static int s_is_comm(gpp_act_type_t t)
{
    return s_is_send(t) || s_is_recv(t) || t == GPP_ACT_ALLREDUCE;
}

/* flat action f of list li */
static const gpp_action_t *s_action(const gpp_plan_t *p, const gpp_sched_links_t *k, int li, int f)
{
    int s = k->list_stage[li];
    return &p->stages[s].replica[li - k->list_base[s]].a[f - k->act_base[li]];
}

typedef struct {
    int n_nodes;
    int *node_of; /* [n_acts]: node of an action (SEND/RECV: the transfer; ALLREDUCE: the
                     stage's), -1 for none */
    int *rep;     /* [n_nodes]: a flat action of the node (the SEND; replica 0's ALLREDUCE;
                     the pass) */
    int *indeg;
    int *head, *next, *to; /* adjacency: edges from node */
    int n_edges, cap_edges;
} s_graph_t;

static void s_edge(s_graph_t *g, int a, int b)
{
    if (a < 0 || b < 0 || a == b)
        return;
    if (g->n_edges == g->cap_edges) {
        g->cap_edges = g->cap_edges ? 2 * g->cap_edges : 256;
        g->next = gpp_xrealloc(g->next, (size_t)g->cap_edges * sizeof(int));
        g->to = gpp_xrealloc(g->to, (size_t)g->cap_edges * sizeof(int));
    }
    g->to[g->n_edges] = b;
    g->next[g->n_edges] = g->head[a];
    g->head[a] = g->n_edges++;
    g->indeg[b]++;
}

/* Min-heap of ready nodes keyed by their representative flat action:
 * deterministic, and earlier stages' and earlier actions' first. */
static void s_push(int *h, int *n, const int *key, int v)
{
    int i = (*n)++;
    h[i] = v;
    while (i > 0 && key[h[(i - 1) / 2]] > key[h[i]]) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i], h[i] = t, i = p;
    }
}
static int s_pop(int *h, int *n, const int *key)
{
    int v = h[0];
    h[0] = h[--*n];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && key[h[l]] < key[h[m]])
            m = l;
        if (r < *n && key[h[r]] < key[h[m]])
            m = r;
        if (m == i)
            break;
        int t = h[m];
        h[m] = h[i], h[i] = t, i = m;
    }
    return v;
}

gpp_sched_order_t *gpp_sched_order_new(const gpp_plan_t *p, const gpp_sched_links_t *k,
                                       gpp_err_t *err)
{
    assert(p && k);
    s_graph_t g = {0};
    int *list_of = gpp_xcalloc((size_t)k->n_acts + 1, sizeof(int));
    for (int li = 0; li < k->n_lists; li++)
        for (int f = k->act_base[li]; f < k->act_base[li + 1]; f++)
            list_of[f] = li;
    g.node_of = gpp_xcalloc((size_t)k->n_acts + 1, sizeof(int));
    g.rep = gpp_xcalloc((size_t)k->n_acts + 1, sizeof(int));
    for (int i = 0; i < k->n_acts; i++)
        g.node_of[i] = -1;
    /* nodes: passes, transfers (at the SEND), all-reduces (at replica 0's:
       a stage's replica 0 list comes before its others) */
    int *ar_node = gpp_xcalloc((size_t)p->n_stages + 1, sizeof(int));
    for (int s = 0; s < p->n_stages; s++)
        ar_node[s] = -1;
    for (int f = 0; f < k->n_acts; f++) {
        int li = list_of[f], s = k->list_stage[li], r = li - k->list_base[s];
        gpp_act_type_t t = s_action(p, k, li, f)->type;
        if (s_is_pass(t) || s_is_send(t) || (t == GPP_ACT_ALLREDUCE && r == 0)) {
            g.rep[g.n_nodes] = f;
            g.node_of[f] = g.n_nodes++;
            if (t == GPP_ACT_ALLREDUCE)
                ar_node[s] = g.node_of[f];
        } else if (t == GPP_ACT_ALLREDUCE) {
            if (ar_node[s] < 0) {
                gpp_err_set(err, "stage %d: replica %d has an ALLREDUCE, replica 0 none", s, r);
                free(ar_node);
                goto fail;
            }
            g.node_of[f] = ar_node[s];
        }
    }
    free(ar_node);
    /* a RECV is its SEND's transfer (the SEND may come in a later list) */
    for (int f = 0; f < k->n_acts; f++)
        if (s_is_recv(s_action(p, k, list_of[f], f)->type))
            g.node_of[f] = k->match[f] >= 0 ? g.node_of[k->match[f]] : -1;
    g.indeg = gpp_xcalloc((size_t)g.n_nodes + 1, sizeof(int));
    g.head = gpp_xcalloc((size_t)g.n_nodes + 1, sizeof(int));
    for (int i = 0; i < g.n_nodes; i++)
        g.head[i] = -1;
    /* edges, list by list */
    for (int li = 0; li < k->n_lists; li++) {
        int s = k->list_stage[li], r = li - k->list_base[s];
        const gpp_actions_t *l = &p->stages[s].replica[r];
        int last = -1;     /* the node of the last pass (or all-reduce) so far */
        int recv_from = 0; /* RECVs since the last pass: positions [recv_from, i) */
        for (int i = 0; i < l->n; i++) {
            int f = k->act_base[li] + i, v = g.node_of[f];
            gpp_act_type_t t = l->a[i].type;
            if (s_is_send(t)) {
                if (k->match[f] < 0) {
                    gpp_err_set(err, "stage %d replica %d action %d: an unmatched SEND", s, r, i);
                    goto fail;
                }
                s_edge(&g, last, v);
            } else if (s_is_recv(t)) {
                if (v < 0) {
                    gpp_err_set(err, "stage %d replica %d action %d: an unmatched RECV", s, r, i);
                    goto fail;
                }
            } else if (s_is_pass(t) || t == GPP_ACT_ALLREDUCE) {
                s_edge(&g, last, v);
                for (int j = recv_from; j < i; j++)
                    if (s_is_recv(l->a[j].type))
                        s_edge(&g, g.node_of[k->act_base[li] + j], v);
                last = v;
                recv_from = i + 1;
            }
        }
    }
    /* Kahn, smallest representative first */
    gpp_sched_order_t *o = gpp_xcalloc(1, sizeof *o);
    o->n_lists = k->n_lists;
    o->seq_base = gpp_xcalloc((size_t)k->n_lists + 1, sizeof(int));
    int *count = gpp_xcalloc((size_t)k->n_lists + 1, sizeof(int));
    for (int f = 0; f < k->n_acts; f++)
        count[list_of[f]] += s_is_comm(s_action(p, k, list_of[f], f)->type);
    for (int li = 0; li < k->n_lists; li++)
        o->seq_base[li + 1] = o->seq_base[li] + count[li];
    o->seq = gpp_xcalloc((size_t)o->seq_base[k->n_lists] + 1, sizeof(int));
    memset(count, 0, (size_t)k->n_lists * sizeof(int));
    /* the actions of each node, to emit them per list */
    int *first = gpp_xcalloc((size_t)g.n_nodes + 1, sizeof(int)),
        *nxt = gpp_xcalloc((size_t)k->n_acts + 1, sizeof(int));
    for (int v = 0; v < g.n_nodes; v++)
        first[v] = -1;
    for (int f = k->n_acts - 1; f >= 0; f--)
        if (g.node_of[f] >= 0) {
            nxt[f] = first[g.node_of[f]];
            first[g.node_of[f]] = f;
        }
    int *heap = gpp_xcalloc((size_t)g.n_nodes + 1, sizeof(int)), nh = 0, done = 0;
    for (int v = 0; v < g.n_nodes; v++)
        if (g.indeg[v] == 0)
            s_push(heap, &nh, g.rep, v);
    while (nh > 0) {
        int v = s_pop(heap, &nh, g.rep);
        done++;
        for (int f = first[v]; f >= 0; f = nxt[f]) {
            int li = list_of[f];
            if (s_is_comm(s_action(p, k, li, f)->type))
                o->seq[o->seq_base[li] + count[li]++] = f;
        }
        for (int e = g.head[v]; e >= 0; e = g.next[e])
            if (--g.indeg[g.to[e]] == 0)
                s_push(heap, &nh, g.rep, g.to[e]);
    }
    free(heap);
    free(first);
    free(nxt);
    free(count);
    if (done != g.n_nodes) {
        gpp_err_set(err,
                    "the plan's transfers have no order one blocking stream per replica can run "
                    "(a cycle through %d of %d passes and transfers)",
                    g.n_nodes - done, g.n_nodes);
        gpp_sched_order_destroy(&o);
    }
    free(list_of);
    free(g.node_of), free(g.rep), free(g.indeg), free(g.head), free(g.next), free(g.to);
    return o;
fail:
    free(list_of);
    free(g.node_of), free(g.rep), free(g.indeg), free(g.head), free(g.next), free(g.to);
    return NULL;
}

void gpp_sched_order_destroy(gpp_sched_order_t **self_p)
{
    assert(self_p);
    gpp_sched_order_t *o = *self_p;
    if (!o)
        return;
    free(o->seq_base);
    free(o->seq);
    free(o);
    *self_p = NULL;
}
