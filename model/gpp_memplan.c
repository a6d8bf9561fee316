/* gpp_memplan: one layout of a stage's device memory (gpp_memplan.h), which
 * the executor allocates (agent/exec/gpp_exec_mem.c). The lifetimes follow
 * the executor's passes (agent/exec/gpp_exec_pass.c): forward ops in
 * ascending ids, an input nobody keeps dies with its last reader, kept
 * tensors and stashes die at the end of the backward, gradients after
 * their op's backward, received inputs' gradients when the micro-batch is
 * released; with the backward split, what an op's W reads dies at its W. */
#include "model/gpp_memplan.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    gpp_buf_kind_t kind;
    int op;
    int64_t bytes; /* asked, at n samples */
    int64_t size;  /* carved (gpp_alloc_carve) */
    gpp_pass_kind_t bk, dk;
    int bt, dt;
    int scratch;
    int64_t rel; /* offset in the lane or in the scratch */
} s_buf_t;

struct gpp_memplan_s {
    int n_ops_g, L;
    gpp_alloc_rule_t rule;
    int n_bufs;
    s_buf_t *bufs;
    int *index; /* [GPP_BUF__COUNT * n_ops_g] -> buffer or -1 */
    /* the arena: work, data buffers, losses, lanes, scratch */
    int64_t work_bytes, *data_at, *data_bytes; /* [3 * n_ops_g]: ahead 0, ahead 1, feed */
    int64_t ahead_bytes, feed_bytes, loss_at, loss_one, lanes_at, lane_bytes, scratch_at,
        scratch_bytes, arena_raw, state_bytes, live_bytes;
    int lanes, slots;
};

/* A buffer's lifetime on one micro-batch's clock: forward steps 0 .. L+1,
 * then backward steps L+2 .. 2L+3, then W steps 2L+4 .. 3L+5. */
static int s_clock(const gpp_memplan_t *p, gpp_pass_kind_t k, int t)
{
    return (int)k * (p->L + 2) + t;
}
static int s_t0(const gpp_memplan_t *p, const s_buf_t *b)
{
    return s_clock(p, b->bk, b->bt);
}
static int s_t1(const gpp_memplan_t *p, const s_buf_t *b)
{
    return s_clock(p, b->dk, b->dt);
}

static int s_add(gpp_memplan_t *p, int *cap, gpp_buf_kind_t kind, int op, int64_t bytes,
                 gpp_pass_kind_t bk, int bt)
{
    if (p->n_bufs == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        p->bufs = realloc(p->bufs, (size_t)*cap * sizeof *p->bufs);
        assert(p->bufs);
    }
    s_buf_t *b = &p->bufs[p->n_bufs];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->op = op;
    b->bytes = bytes;
    b->size = gpp_alloc_carve(p->rule, bytes);
    b->bk = b->dk = bk;
    b->bt = b->dt = bt;
    p->index[kind * p->n_ops_g + op] = p->n_bufs;
    return p->n_bufs++;
}

static void s_die(gpp_memplan_t *p, int b, gpp_pass_kind_t dk, int dt)
{
    p->bufs[b].dk = dk;
    p->bufs[b].dt = dt;
}

/* Buffer b (or none, -1) lives at least until step dt of pass dk. */
static void s_live_until(gpp_memplan_t *p, int b, gpp_pass_kind_t dk, int dt)
{
    if (b >= 0 && s_clock(p, dk, dt) > s_t1(p, &p->bufs[b]))
        s_die(p, b, dk, dt);
}

/* ---- placement ---- */

/* Placed buffers of one region, by ascending offset. */
typedef struct {
    int *ids;
    int n;
} s_list_t;

/* The lowest offset in list l where buffer b overlaps no buffer alive
 * while it is. */
static int64_t s_first_fit(const gpp_memplan_t *p, const s_list_t *l, const s_buf_t *b)
{
    int t0 = s_t0(p, b), t1 = s_t1(p, b);
    int64_t at = 0;
    for (int i = 0; i < l->n; i++) {
        const s_buf_t *o = &p->bufs[l->ids[i]];
        if (s_t0(p, o) > t1 || t0 > s_t1(p, o))
            continue;
        if (o->rel >= at + b->size)
            break;
        if (o->rel + o->size > at)
            at = o->rel + o->size;
    }
    return at;
}

static void s_insert(const gpp_memplan_t *p, s_list_t *l, int id)
{
    int i = l->n++;
    for (; i > 0 && p->bufs[l->ids[i - 1]].rel > p->bufs[id].rel; i--)
        l->ids[i] = l->ids[i - 1];
    l->ids[i] = id;
}

/* Largest first; then the earliest birth; then the buffer's index. */
typedef struct {
    int64_t size;
    int t0, id;
} s_key_t;
static int s_by_size(const void *a, const void *b)
{
    const s_key_t *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    return x->id - y->id;
}

/* Places the lane's own buffers, then the transients: a hole of the lane,
 * else the scratch. */
static void s_place(gpp_memplan_t *p)
{
    int nb = p->n_bufs;
    s_key_t *key = malloc((size_t)(nb ? nb : 1) * sizeof *key);
    int *order = malloc((size_t)(nb ? nb : 1) * sizeof *order);
    s_list_t lane = {malloc((size_t)(nb ? nb : 1) * sizeof(int)), 0};
    s_list_t scr = {malloc((size_t)(nb ? nb : 1) * sizeof(int)), 0};
    assert(key && order && lane.ids && scr.ids);
    for (int i = 0; i < nb; i++)
        key[i] = (s_key_t){p->bufs[i].size, s_t0(p, &p->bufs[i]), i};
    qsort(key, (size_t)nb, sizeof *key, s_by_size);
    for (int i = 0; i < nb; i++)
        order[i] = key[i].id;
    free(key);
    p->lane_bytes = p->scratch_bytes = 0;
    for (int pass = 0; pass < 2; pass++) /* 0: the lane's own, 1: transients */
        for (int k = 0; k < nb; k++) {
            s_buf_t *b = &p->bufs[order[k]];
            if (b->scratch != pass)
                continue;
            int64_t at = s_first_fit(p, &lane, b);
            if (pass == 0 || at + b->size <= p->lane_bytes) {
                b->scratch = 0;
                b->rel = at;
                if (at + b->size > p->lane_bytes)
                    p->lane_bytes = at + b->size;
                s_insert(p, &lane, order[k]);
                continue;
            }
            b->rel = s_first_fit(p, &scr, b);
            if (b->rel + b->size > p->scratch_bytes)
                p->scratch_bytes = b->rel + b->size;
            s_insert(p, &scr, order[k]);
        }
    /* the most bytes alive at once on the micro-batch's clock */
    int64_t *delta = calloc((size_t)(3 * p->L + 8), sizeof *delta), live = 0;
    assert(delta);
    for (int j = 0; j < nb; j++) {
        delta[s_t0(p, &p->bufs[j])] += p->bufs[j].size;
        delta[s_t1(p, &p->bufs[j]) + 1] -= p->bufs[j].size;
    }
    p->live_bytes = 0;
    for (int t = 0; t <= 3 * p->L + 5; t++) {
        live += delta[t];
        p->live_bytes = live > p->live_bytes ? live : p->live_bytes;
    }
    free(delta);
    free(scr.ids);
    free(lane.ids);
    free(order);
}

/* ---- lifetimes ---- */

/* The micro-batch's buffers and their lifetimes. in: stage flags by op id;
 * li: local index by op id. */
static void s_buffers(gpp_memplan_t *p, const gpp_graph_t *g, const char *in, const int *li,
                      int64_t n, const gpp_stage_dev_t *dev, int no_fuse, int split)
{
    const int L = p->L, E = L + 1; /* E: a pass's end */
#define OB(i) (dev->out_bytes && dev->out_bytes[i] >= 0 ? dev->out_bytes[i] : g->ops[i].out_bytes)
#define FT(i) (li[i] + 1) /* forward step of local op i */
#define BT(i) (L - li[i]) /* backward step */
    int cap = 0;
    char *keep = calloc((size_t)g->n_ops + 1, 1);
    int *last = calloc((size_t)g->n_ops + 1, sizeof(int)); /* last local reader + 1 */
    assert(keep && last);
    for (int i = 0; i < g->n_ops; i++) {
        if (!in[i])
            continue;
        const gpp_op_t *op = &g->ops[i];
        const gpp_op_info_t *T = &gpp_optable[op->type];
        int relu_fused = !no_fuse && op->type == GPP_OP_RELU && gpp_op_fused_from(g, in, i) >= 0;
        for (int k = 0; k < op->n_inputs; k++) {
            int q = op->inputs[k];
            if (!in[q] && p->index[GPP_BUF_ACT * p->n_ops_g + q] < 0) /* begin takes it */
                s_add(p, &cap, GPP_BUF_ACT, q, n * OB(q), GPP_PASS_F, 0);
            keep[q] |= T->bwd_reads_inputs && !relu_fused;
            last[q] = i + 1;
        }
        keep[i] |= relu_fused;
        for (int k = 0; k < op->n_outputs; k++)
            keep[i] |= !in[op->outputs[k]]; /* sent */
        if (T->role == GPP_ROLE_LOSS)
            keep[i] = 0;
    }
    /* forward */
    for (int i = 0; i < g->n_ops; i++) {
        if (!in[i])
            continue;
        const gpp_op_t *op = &g->ops[i];
        const gpp_op_info_t *T = &gpp_optable[op->type];
        int act = no_fuse ? -1 : gpp_op_fused_act(g, in, i);
        int ghost = act >= 0 && g->ops[act].type == GPP_OP_RELU;
        if (T->role != GPP_ROLE_LOSS && !ghost && (no_fuse || gpp_op_fused_from(g, in, i) < 0))
            s_add(p, &cap, GPP_BUF_ACT, i, n * OB(i), GPP_PASS_F, FT(i));
        if (act >= 0) /* the linear's call writes it */
            s_add(p, &cap, GPP_BUF_ACT, act, n * OB(act), GPP_PASS_F, FT(i));
        int64_t stash = T->role == GPP_ROLE_OPAQUE ? op->stash_bytes
                        : dev->kernel_stash && dev->kernel_stash[i] >= 0
                            ? dev->kernel_stash[i]
                            : gpp_op_kernel_stash_bytes(g, op);
        if (stash > 0 && T->role != GPP_ROLE_SOURCE) {
            int b = s_add(p, &cap, GPP_BUF_STASH, i, n * stash, GPP_PASS_F, FT(i));
            s_die(p, b, GPP_PASS_B, E);
        }
        if (T->role == GPP_ROLE_LOSS) {
            s_add(p, &cap, GPP_BUF_LABEL, i, n * gpp_op_label_bytes(g, op), GPP_PASS_F, FT(i));
            int x = op->inputs[0];
            if (gpp_op_has_grad(g->ops[x].type) && p->index[GPP_BUF_GRAD * p->n_ops_g + x] < 0) {
                int b = s_add(p, &cap, GPP_BUF_GRAD, x, n * OB(x), GPP_PASS_F, FT(i));
                s_die(p, b, GPP_PASS_B, in[x] ? BT(x) : E);
            }
        }
    }
    /* activations: kept ones to the backward's end, others to their last
       reader (the forward's end when no local op reads them) */
    for (int q = 0; q < g->n_ops; q++) {
        int b = p->index[GPP_BUF_ACT * p->n_ops_g + q];
        if (b < 0)
            continue;
        if (keep[q])
            s_die(p, b, GPP_PASS_B, E);
        else
            s_die(p, b, GPP_PASS_F, last[q] ? FT(last[q] - 1) : E);
    }
    /* backward: the sent outputs' gradients arrive first */
    for (int q = 0; q < g->n_ops; q++) {
        if (!in[q] || !gpp_op_has_grad(g->ops[q].type) ||
            p->index[GPP_BUF_GRAD * p->n_ops_g + q] >= 0)
            continue;
        int sent = 0;
        for (int k = 0; k < g->ops[q].n_outputs; k++)
            sent |= !in[g->ops[q].outputs[k]];
        if (sent)
            s_die(p, s_add(p, &cap, GPP_BUF_GRAD, q, n * OB(q), GPP_PASS_B, 0), GPP_PASS_B, BT(q));
    }
    for (int i = g->n_ops - 1; i >= 0; i--) {
        const gpp_op_t *op = &g->ops[i];
        if (!in[i] || gpp_optable[op->type].role != GPP_ROLE_LAYER ||
            p->index[GPP_BUF_GRAD * p->n_ops_g + i] < 0)
            continue; /* no gradient reaches it: its backward runs nothing */
        for (int k = 0; k < op->n_inputs; k++) {
            int x = op->inputs[k];
            if (gpp_op_has_grad(g->ops[x].type) && p->index[GPP_BUF_GRAD * p->n_ops_g + x] < 0) {
                int b = s_add(p, &cap, GPP_BUF_GRAD, x, n * OB(x), GPP_PASS_B, BT(i));
                s_die(p, b, GPP_PASS_B, in[x] ? BT(x) : E);
            }
        }
    }
    /* a received input nothing reached gets a zero gradient at the end */
    for (int q = 0; q < g->n_ops; q++)
        if (!in[q] && p->index[GPP_BUF_ACT * p->n_ops_g + q] >= 0 &&
            gpp_op_has_grad(g->ops[q].type) && p->index[GPP_BUF_GRAD * p->n_ops_g + q] < 0)
            s_add(p, &cap, GPP_BUF_GRAD, q, n * OB(q), GPP_PASS_B, E);
    /* the backward split: B keeps for each parameter op's W (descending
       ids, as B) its inputs, its output gradient and kernel stash, and
       writes its W stash */
    for (int i = g->n_ops - 1; split && i >= 0; i--) {
        const gpp_op_t *op = &g->ops[i];
        int dy = p->index[GPP_BUF_GRAD * p->n_ops_g + i];
        if (!in[i] || gpp_optable[op->type].role != GPP_ROLE_LAYER || op->params <= 0 || dy < 0)
            continue; /* no parameter gradient, or no gradient reaches it */
        s_live_until(p, dy, GPP_PASS_W, BT(i));
        s_live_until(p, p->index[GPP_BUF_STASH * p->n_ops_g + i], GPP_PASS_W, BT(i));
        for (int k = 0; k < op->n_inputs; k++)
            s_live_until(p, p->index[GPP_BUF_ACT * p->n_ops_g + op->inputs[k]], GPP_PASS_W, BT(i));
        int64_t ws = gpp_op_wstash_bytes(g, op);
        if (ws > 0)
            s_die(p, s_add(p, &cap, GPP_BUF_WSTASH, i, n * ws, GPP_PASS_B, BT(i)), GPP_PASS_W,
                  BT(i));
    }
    /* a transient lives inside one pass's ops: nobody outside the pass
       fills or reads it */
    for (int b = 0; b < p->n_bufs; b++) {
        s_buf_t *x = &p->bufs[b];
        x->scratch = x->bk == x->dk && x->bt >= 1 && x->dt <= L;
    }
    free(keep);
    free(last);
#undef OB
#undef FT
#undef BT
}

/* Parameters, gradients and optimizer state, as the executor and the
 * optimizer allocate them: the dense ones in flat buffers, each embedding
 * table's in blocks of its own with its sparse gradient. */
static int64_t s_state(const gpp_graph_t *g, const char *in, const gpp_memplan_cfg_t *cfg,
                       const gpp_stage_dev_t *dev)
{
    int64_t state = 0, dense = 0;
#define R(bytes) gpp_alloc_bytes(dev->alloc_rule, (bytes))
    for (int i = 0; i < g->n_ops; i++) {
        if (!in[i])
            continue;
        const gpp_op_t *op = &g->ops[i];
        if (dev->param_copies)
            state += gpp_op_param_copy_bytes(g, op, dev->alloc_rule);
        if (!op->sparse_params) {
            dense += op->params * 4;
        } else { /* value + optimizer state; the sparse gradient's slot map, ids, rows */
            int64_t c = gpp_op_sparse_cap_rows(g, op, cfg->batch);
            state += (1 + cfg->optim_bufs) * R(op->params * 4) + R((op->table_rows + 1) * 4) +
                     R(c * 4) + R(c * op->dim * 4);
        }
    }
    /* a stage without dense parameters has no dense optimizer state */
    return state + (2 + (dense ? cfg->optim_bufs : 0)) * R(dense);
#undef R
}

gpp_memplan_t *gpp_memplan_new(const gpp_graph_t *g, int n_ops, const int *ops,
                               const gpp_memplan_cfg_t *cfg, gpp_err_t *err)
{
    static const gpp_stage_dev_t table = {.alloc_rule = GPP_ALLOC_ALIGN64};
    if (!g->finalized || n_ops < 0 || cfg->n < 0 || cfg->inflight < 1 || cfg->slots < 0 ||
        cfg->optim_bufs < 0) {
        gpp_err_set(err,
                    "memory plan: a finalized graph, n >= 0 samples, inflight >= 1 and slots >= 0 "
                    "(got n %lld, inflight %d, slots %d)",
                    (long long)cfg->n, cfg->inflight, cfg->slots);
        return NULL;
    }
    const gpp_stage_dev_t *dev = cfg->dev ? cfg->dev : &table;
    char *in = calloc((size_t)g->n_ops + 1, 1);
    int *li = calloc((size_t)g->n_ops + 1, sizeof(int));
    gpp_memplan_t *p = calloc(1, sizeof *p);
    assert(in && li && p);
    for (int k = 0; k < n_ops; k++) {
        if (ops[k] < 0 || ops[k] >= g->n_ops || in[ops[k]]) {
            gpp_err_set(err, "memory plan: op %d of the stage is not an op of the graph, or twice",
                        ops[k]);
            free(in);
            free(li);
            free(p);
            return NULL;
        }
        in[ops[k]] = 1;
    }
    for (int i = 0; i < g->n_ops; i++)
        if (in[i])
            li[i] = p->L++;
    p->n_ops_g = g->n_ops;
    p->rule = dev->alloc_rule;
    p->lanes = cfg->inflight;
    p->slots = cfg->slots;
    p->index = malloc((size_t)(GPP_BUF__COUNT * g->n_ops + 1) * sizeof *p->index);
    p->data_at = malloc((size_t)(3 * g->n_ops + 1) * sizeof *p->data_at);
    p->data_bytes = calloc((size_t)(3 * g->n_ops + 1), sizeof *p->data_bytes);
    assert(p->index && p->data_at && p->data_bytes);
    for (int i = 0; i < GPP_BUF__COUNT * g->n_ops; i++)
        p->index[i] = -1;
    for (int i = 0; i < 3 * g->n_ops; i++)
        p->data_at[i] = -1;
    p->state_bytes = s_state(g, in, cfg, dev);
    if (cfg->n > 0)
        s_buffers(p, g, in, li, cfg->n, dev, cfg->no_fuse, cfg->split);
    s_place(p);
    /* the stage's own buffers: workspace, load-ahead, feeds, loss values */
    int64_t at = 0, n = cfg->n;
    int n_loss = 0;
    for (int i = 0; i < g->n_ops; i++) {
        if (!in[i])
            continue;
        const gpp_op_t *op = &g->ops[i];
        gpp_work_t w =
            dev->work && dev->work[i].fixed >= 0 ? dev->work[i] : gpp_op_workspace(g, op);
        int64_t wb = w.fixed + n * w.per_sample;
        p->work_bytes = wb > p->work_bytes ? wb : p->work_bytes;
        n_loss += gpp_optable[op->type].role == GPP_ROLE_LOSS;
    }
    at = p->work_bytes ? gpp_alloc_carve(p->rule, p->work_bytes) : 0;
    for (int i = 0; i < g->n_ops && n > 0; i++) {
        const gpp_op_t *op = &g->ops[i];
        gpp_op_role_t role = gpp_optable[op->type].role;
        int64_t bytes = 0;
        if (in[i] && role == GPP_ROLE_LOSS)
            bytes = n * gpp_op_label_bytes(g, op);
        else if (in[i] && role == GPP_ROLE_SOURCE)
            bytes =
                n * (dev->out_bytes && dev->out_bytes[i] >= 0 ? dev->out_bytes[i] : op->out_bytes);
        for (int k = 0; k < 2 && bytes && dev->load_ahead; k++) {
            p->data_at[3 * i + k] = at;
            p->data_bytes[3 * i + k] = bytes;
            at += gpp_alloc_carve(p->rule, bytes);
            p->ahead_bytes += gpp_alloc_carve(p->rule, bytes);
        }
        /* a graph's feed: also a received data input the stage regenerates */
        if (!in[i] && op->type == GPP_OP_INPUT && p->index[GPP_BUF_ACT * g->n_ops + i] >= 0)
            bytes = p->bufs[p->index[GPP_BUF_ACT * g->n_ops + i]].bytes;
        if (bytes && dev->graphs) {
            p->data_at[3 * i + 2] = at;
            p->data_bytes[3 * i + 2] = bytes;
            at += gpp_alloc_carve(p->rule, bytes);
            p->feed_bytes += gpp_alloc_carve(p->rule, bytes);
        }
    }
    p->loss_at = at;
    p->loss_one = n_loss ? gpp_alloc_carve(p->rule, 4 * (int64_t)n_loss) : 0;
    at += p->slots * p->loss_one;
    p->lanes_at = at;
    at += p->lanes * p->lane_bytes;
    p->scratch_at = at;
    p->arena_raw = at + p->scratch_bytes;
    free(in);
    free(li);
    return p;
}

void gpp_memplan_destroy(gpp_memplan_t **self_p)
{
    gpp_memplan_t *p = *self_p;
    if (!p)
        return;
    free(p->bufs);
    free(p->index);
    free(p->data_at);
    free(p->data_bytes);
    free(p);
    *self_p = NULL;
}

void gpp_memplan_summary(const gpp_memplan_t *self, gpp_memplan_sum_t *out)
{
    memset(out, 0, sizeof *out);
    out->state_bytes = self->state_bytes;
    out->arena_raw = self->arena_raw;
    out->arena_bytes = self->arena_raw ? gpp_alloc_bytes(self->rule, self->arena_raw) : 0;
    out->total_bytes = out->state_bytes + out->arena_bytes;
    out->work_bytes = self->work_bytes ? gpp_alloc_carve(self->rule, self->work_bytes) : 0;
    out->ahead_bytes = self->ahead_bytes;
    out->feed_bytes = self->feed_bytes;
    out->loss_bytes = self->slots * self->loss_one;
    out->lane_bytes = self->lane_bytes;
    out->scratch_bytes = self->scratch_bytes;
    out->live_bytes = self->live_bytes;
    out->lanes = self->lanes;
    out->slots = self->slots;
}

int64_t gpp_memplan_total(const gpp_memplan_t *self)
{
    gpp_memplan_sum_t s;
    gpp_memplan_summary(self, &s);
    return s.total_bytes;
}

int64_t gpp_memplan_total_lanes(const gpp_memplan_t *self, int lanes)
{
    assert(lanes >= 1);
    int64_t raw = self->arena_raw + (int64_t)(lanes - self->lanes) * self->lane_bytes;
    return self->state_bytes + (raw ? gpp_alloc_bytes(self->rule, raw) : 0);
}

int gpp_memplan_n_bufs(const gpp_memplan_t *self)
{
    return self->n_bufs;
}

int gpp_memplan_buf(const gpp_memplan_t *self, gpp_buf_kind_t kind, int op)
{
    assert(kind >= 0 && kind < GPP_BUF__COUNT);
    if (op < 0 || op >= self->n_ops_g)
        return -1;
    return self->index[kind * self->n_ops_g + op];
}

void gpp_memplan_buf_info(const gpp_memplan_t *self, int b, gpp_buf_kind_t *kind, int *op)
{
    assert(b >= 0 && b < self->n_bufs);
    *kind = self->bufs[b].kind;
    *op = self->bufs[b].op;
}

int64_t gpp_memplan_buf_bytes(const gpp_memplan_t *self, int b)
{
    assert(b >= 0 && b < self->n_bufs);
    return self->bufs[b].bytes;
}

void gpp_memplan_life(const gpp_memplan_t *self, int b, gpp_pass_kind_t *bk, int *bt,
                      gpp_pass_kind_t *dk, int *dt)
{
    assert(b >= 0 && b < self->n_bufs);
    const s_buf_t *x = &self->bufs[b];
    *bk = x->bk;
    *bt = x->bt;
    *dk = x->dk;
    *dt = x->dt;
}

int gpp_memplan_in_scratch(const gpp_memplan_t *self, int b)
{
    assert(b >= 0 && b < self->n_bufs);
    return self->bufs[b].scratch;
}

int64_t gpp_memplan_at(const gpp_memplan_t *self, int l, int b)
{
    assert(b >= 0 && b < self->n_bufs && l >= 0 && l < self->lanes);
    const s_buf_t *x = &self->bufs[b];
    return x->scratch ? self->scratch_at + x->rel : self->lanes_at + l * self->lane_bytes + x->rel;
}

int64_t gpp_memplan_work_at(const gpp_memplan_t *self, int64_t *bytes)
{
    *bytes = self->work_bytes;
    return 0;
}

int64_t gpp_memplan_data_at(const gpp_memplan_t *self, int op, int k, int64_t *bytes)
{
    assert(k >= -1 && k <= 1);
    *bytes = 0;
    if (op < 0 || op >= self->n_ops_g)
        return -1;
    int j = 3 * op + (k < 0 ? 2 : k);
    *bytes = self->data_bytes[j];
    return self->data_at[j];
}

int64_t gpp_memplan_loss_at(const gpp_memplan_t *self, int s)
{
    if (!self->loss_one || s < 0 || s >= self->slots)
        return -1;
    return self->loss_at + s * self->loss_one;
}
