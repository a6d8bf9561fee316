/* gpp_part_setup: the partitioner DP's state (gpp_part_impl.h): per-position
 * prefix sums of the costs, boundary and head scratch, the memo sized for a
 * config set, and its release. Nothing here runs per DP entry. */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/gpp_part_impl.h"

static void s_arena_free(gpp_dp_arena_t *a)
{
    for (int i = 0; i < a->n_chunks; i++)
        free(a->chunks[i]);
    free(a->chunks);
    free(a->used);
    memset(a, 0, sizeof *a);
}

static void s_ensure_ms(gpp_dp_t *s, int m)
{
    if (s->pre_ms[m])
        return;
    int n = s->tree->n_ops;
    double *p = gpp_xcalloc((size_t)n + 1, sizeof(double));
    for (int pos = 0; pos < n; pos++) {
        int op = s->tree->op_at[pos];
        p[pos + 1] =
            p[pos] + gpp_cost_op_fwd_ms(s->cost, op, m) + gpp_cost_op_bwd_ms(s->cost, op, m);
    }
    s->pre_ms[m] = p;
}

static int s_sp_depth(const gpp_sp_t *t, int v)
{
    const gpp_sp_node_t *n = &t->nodes[v];
    if (n->kind == GPP_SP_LEAF)
        return 1;
    int acc = 0;
    for (int c = 0; c < n->n_children; c++) {
        int d = s_sp_depth(t, n->children[c]);
        acc = n->kind == GPP_SP_SERIES ? acc + d : (d > acc ? d : acc);
    }
    return acc;
}

gpp_dp_t *gpp_dp_new(const gpp_graph_t *g, const gpp_cost_t *cost, const gpp_sp_t *t, int batch,
                     int64_t mem_bound_bytes)
{
    gpp_dp_t *s = gpp_xcalloc(1, sizeof *s);
    const gpp_cluster_t *cl = gpp_cost_cluster(cost);
    s->g = g, s->cost = cost, s->tree = t, s->batch = batch, s->mem_bound_bytes = mem_bound_bytes;
    s->n_dev = cl->n_devices;
    s->no_fit = s->n_dev + 1;
    int n = t->n_ops;
    s->pre_state_bytes = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    s->pre_stash_bytes = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    s->pre_work_bytes = gpp_xcalloc((size_t)n + 1, sizeof(int64_t));
    s->pre_reserved_at = gpp_xcalloc((size_t)batch + 1, sizeof(int64_t *));
    s->work_bound_bytes = gpp_cost_workspace_bound(cost);
    s->alloc_rule = gpp_cost_cluster(cost)->alloc_rule;
    s->bnd_copies = gpp_cost_bnd_copies(cost);
    s->pre_grad_bytes = gpp_xcalloc((size_t)n + 1, sizeof(double));
    s->pre_step_kernels = gpp_xcalloc((size_t)n + 1, sizeof(int));
    s->pre_sparse_ops = gpp_xcalloc((size_t)n + 1, sizeof(int));
    s->step_cache_l = s->step_cache_r = -1;
    if (n <= GPP_DP_RANGE_TABLE_MAX) {
        s->step_rows = gpp_xcalloc((size_t)n + 1, sizeof(double *));
        s->bnd_rows = gpp_xcalloc((size_t)n + 1, sizeof *s->bnd_rows);
        s->bnd_stamp = gpp_xcalloc((size_t)n + 1, sizeof(int));
    }
    s->last_consumer = gpp_xcalloc((size_t)n, sizeof(int));
    s->pos_out_bytes = gpp_xcalloc((size_t)n, sizeof(double));
    s->in_off = gpp_xcalloc((size_t)n + 1, sizeof(int));
    s->node_depth = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    int max_depth = 0;
    for (int v = 0; v < t->n_nodes; v++) {
        int dv = 0;
        for (int u = t->nodes[v].parent; u >= 0; u = t->nodes[u].parent)
            dv++;
        s->node_depth[v] = dv;
        if (dv > max_depth)
            max_depth = dv;
    }
    s->stamp = gpp_xcalloc((size_t)2 * (size_t)(max_depth + 1) * (size_t)n, sizeof(int));
    /* s_head_init rows per depth: nc + the branches' children doubles; as
       many ints plus 3 per branch, plus 3 per graph edge for the lists */
    s->head_row_len = 1;
    size_t n_edges = 0;
    for (int v = 0; v < n; v++)
        n_edges += (size_t)g->ops[v].n_inputs;
    for (int v = 0; v < t->n_nodes; v++) {
        const gpp_sp_node_t *P = &t->nodes[v];
        if (P->kind != GPP_SP_PARALLEL)
            continue;
        size_t x = (size_t)P->n_children;
        for (int c = 0; c < P->n_children; c++)
            x += (size_t)t->nodes[P->children[c]].n_children;
        if (x > s->head_row_len)
            s->head_row_len = x;
        if (P->n_children > s->head_max_branches)
            s->head_max_branches = P->n_children;
    }
    s->head_irow_len = s->head_row_len + 3 * (size_t)s->head_max_branches + 3 * (n_edges + 1);
    s->in_pos = gpp_xcalloc(n_edges + 1, sizeof(int));
    s->head_bytes = gpp_xcalloc((size_t)(max_depth + 1) * s->head_row_len, sizeof(double));
    s->head_owner = gpp_xcalloc((size_t)max_depth + 1, sizeof(int));
    s->head_used = gpp_xcalloc((size_t)max_depth + 1, sizeof(int));
    for (int dv = 0; dv <= max_depth; dv++)
        s->head_owner[dv] = -1;
    s->head_ints = gpp_xcalloc((size_t)(max_depth + 1) * s->head_irow_len, sizeof(int));
    for (int pos = 0; pos < n; pos++) {
        int op = t->op_at[pos];
        const gpp_op_t *o = &g->ops[op];
        s->pre_state_bytes[pos + 1] =
            s->pre_state_bytes[pos] + gpp_cost_op_state_bytes(cost, op, batch);
        s->pre_stash_bytes[pos + 1] = s->pre_stash_bytes[pos] + gpp_cost_op_stash_bound(cost, op);
        s->pre_work_bytes[pos + 1] = s->pre_work_bytes[pos] + gpp_cost_op_work_bytes(cost, op);
        s->has_reserved |= gpp_cost_op_reserved_bytes(cost, op) > 0;
        s->pre_grad_bytes[pos + 1] =
            s->pre_grad_bytes[pos] + gpp_cost_op_grad_bytes(cost, op, batch);
        s->pre_step_kernels[pos + 1] = s->pre_step_kernels[pos] + (o->params > 0);
        s->pre_sparse_ops[pos + 1] = s->pre_sparse_ops[pos] + (o->params > 0 && o->sparse_params);
        int mc = -1;
        for (int k = 0; k < o->n_outputs; k++)
            if (t->pos_of[o->outputs[k]] > mc)
                mc = t->pos_of[o->outputs[k]];
        s->last_consumer[pos] = mc;
        s->pos_out_bytes[pos] = (double)gpp_cost_op_out_bytes(cost, op); /* as it travels */
        s->in_off[pos + 1] = s->in_off[pos];
        for (int k = 0; k < o->n_inputs; k++) {
            int dup = 0;
            for (int j = 0; j < k; j++)
                dup |= o->inputs[j] == o->inputs[k];
            if (!dup)
                s->in_pos[s->in_off[pos + 1]++] = t->pos_of[o->inputs[k]];
        }
    }
    s->pre_ms = gpp_xcalloc((size_t)batch + 1, sizeof(double *));
    s->ar_ms_per_byte = gpp_xcalloc((size_t)s->n_dev + 1, sizeof(double));
    s->ar_ms_fixed = gpp_xcalloc((size_t)s->n_dev + 1, sizeof(double));
    for (int d = 1; d <= s->n_dev; d++) {
        const gpp_link_t *l = gpp_cost_group_link(cost, d);
        s->ar_ms_per_byte[d] = gpp_allreduce_ms(l, d, 1.0) - gpp_allreduce_ms(l, d, 0.0);
        s->ar_ms_fixed[d] = gpp_allreduce_ms(l, d, 0.0);
    }
    s->ar_monotone = 1;
    for (int d = 2; d <= s->n_dev; d++)
        s->ar_monotone &= s->ar_ms_per_byte[d] >= s->ar_ms_per_byte[d - 1] &&
                          s->ar_ms_fixed[d] >= s->ar_ms_fixed[d - 1];
    const gpp_link_t *p2p = gpp_cost_p2p_link(cost);
    s->p2p_alpha_ms = p2p->alpha_ms;
    s->p2p_ms_per_byte = 1e3 / p2p->bw_bytes_per_s;
    s->suffix_base = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    for (int v = 0; v < t->n_nodes; v++) {
        s->suffix_base[v] = s->n_suffix;
        const gpp_sp_node_t *nv = &t->nodes[v];
        s->n_suffix += nv->kind == GPP_SP_LEAF ? 1 : nv->n_children;
    }
    /* views of the series branches (the chain before a join-side tail) */
    s->view_first = gpp_xcalloc((size_t)t->n_nodes, sizeof(int));
    for (int v = 0; v < t->n_nodes; v++) {
        const gpp_sp_node_t *nv = &t->nodes[v];
        s->view_first[v] = -1;
        if (nv->kind == GPP_SP_SERIES && nv->parent >= 0 &&
            t->nodes[nv->parent].kind == GPP_SP_PARALLEL) {
            s->view_first[v] = s->n_views;
            s->n_views += nv->n_children - 1;
        }
    }
    s->view_node = gpp_xcalloc((size_t)s->n_views + 1, sizeof(int));
    s->view_k = gpp_xcalloc((size_t)s->n_views + 1, sizeof(int));
    s->view_base = gpp_xcalloc((size_t)s->n_views + 1, sizeof(int));
    s->view_leaves = gpp_xcalloc((size_t)s->n_views + 1, sizeof(int));
    for (int v = 0; v < t->n_nodes; v++) {
        int leaves = 1;
        for (int c = 0; c < t->nodes[v].n_children; c++)
            leaves &= t->nodes[t->nodes[v].children[c]].kind == GPP_SP_LEAF;
        for (int kv = 1; s->view_first[v] >= 0 && kv < t->nodes[v].n_children; kv++) {
            int x = s->view_first[v] + kv - 1;
            s->view_node[x] = v, s->view_k[x] = kv, s->view_base[x] = s->n_view_suffix;
            s->view_leaves[x] = leaves;
            s->n_view_suffix += kv;
        }
    }
    s->sp_depth = s_sp_depth(t, t->root);
    s->pre_rate_ms = gpp_xcalloc((size_t)n + 1, sizeof(double));
    return s;
}

/* In-flight levels the memo keeps for configs cfg[0..n_cfg): multiples of
 * the gcd of their micro-batch sizes (the samples per level, into
 * *level_samples_out), from 0 up to the samples in flight at most (stages on
 * a path x k x b, three times that in the generalized search), capped at the
 * batch. Returns the number of levels. */
int64_t gpp_dp_levels(const gpp_dp_t *s, const gpp_dp_cfg_t *cfg, int n_cfg, int generalized,
                      int *level_samples_out)
{
    int gcd = 0, max_kb = 0;
    for (int c = 0; c < n_cfg; c++) {
        int a = gcd, b = cfg[c].b;
        while (b) {
            int r = a % b;
            a = b, b = r;
        }
        gcd = a;
        if (cfg[c].k * cfg[c].b > max_kb)
            max_kb = cfg[c].k * cfg[c].b;
    }
    int depth = s->sp_depth < s->n_dev ? s->sp_depth : s->n_dev;
    int64_t top = (int64_t)depth * (generalized ? 3 * max_kb : max_kb);
    if (top > s->batch)
        top = s->batch;
    *level_samples_out = gcd;
    return top / gcd + 1;
}

int gpp_dp_infl(const gpp_dp_t *s, int ci, int ctx)
{
    const gpp_dp_cfg_t *x = &s->cfg[ci];
    int v;
    if (ctx == 0) {
        v = x->k * x->b;
    } else {
        int cb = (ctx - 1) / s->n_levels, ib = (ctx - 1) % s->n_levels;
        int iy = ib * s->level_samples;
        if (!s->generalized)
            v = x->b + iy;
        else
            v = gpp_part_inflight(x->k, x->b, s->cfg[cb].k, s->cfg[cb].b, iy, NULL);
    }
    return v < s->batch ? v : s->batch;
}

/* Sets the candidate configs and sizes the memo. */
void gpp_dp_configure(gpp_dp_t *s, const gpp_dp_cfg_t *cfg, int n_cfg, int generalized)
{
    assert(n_cfg >= 1 && n_cfg <= GPP_DP_MAX_CFG);
    memcpy(s->cfg, cfg, (size_t)n_cfg * sizeof *cfg);
    s->n_cfg = n_cfg;
    s->generalized = generalized;
    for (int c = 0; c < n_cfg; c++) {
        int dmax = cfg[c].b < s->n_dev ? cfg[c].b : s->n_dev;
        s->cfg_mmin[c] = (cfg[c].b + dmax - 1) / dmax;
        for (int d = 1; d <= dmax; d++)
            s_ensure_ms(s, (cfg[c].b + d - 1) / d);
    }
    s->n_levels = (int)gpp_dp_levels(s, cfg, n_cfg, generalized, &s->level_samples);
    for (int pos = 0; pos < s->tree->n_ops; pos++) {
        double best = INFINITY;
        for (int c = 0; c < n_cfg; c++) {
            int dmax = cfg[c].b < s->n_dev ? cfg[c].b : s->n_dev;
            for (int d = 1; d <= dmax; d++) {
                int m = (cfg[c].b + d - 1) / d;
                double r = (s->pre_ms[m][pos + 1] - s->pre_ms[m][pos]) / m;
                if (r < best)
                    best = r;
            }
        }
        /* plus the op's share of a lower bound on the optimizer step, which
           every replica runs once per iteration: gpp_cost_step_ms of a stage
           is at least its memory term plus its launches; both are additive
           over ops if a dense op's share of the stage's dense launches is
           taken as none (gpp_cost_step_kernels) */
        const gpp_device_t *dev = &gpp_cost_cluster(s->cost)->device;
        double grad = s->pre_grad_bytes[pos + 1] - s->pre_grad_bytes[pos];
        int kern = 2 * (s->pre_sparse_ops[pos + 1] - s->pre_sparse_ops[pos]);
        double step_lb =
            grad > 0 ? 7.0 * grad / dev->mem_bw_bytes_per_s * 1e3 + kern * dev->launch_ms : 0.0;
        s->pre_rate_ms[pos + 1] = s->pre_rate_ms[pos] + best + step_lb / s->batch;
    }
    s->n_ctx = 1 + n_cfg * s->n_levels;
    size_t slots = (size_t)s->n_suffix * s->n_ctx;
    if (slots > s->memo_slots) { /* generations keep old slots invalid: no clearing */
        free(s->memo_gen);
        free(s->memo_p);
        s->memo_gen = gpp_xcalloc(slots, sizeof(unsigned));
        s->memo_p = gpp_xcalloc(slots, sizeof(int *));
        s->memo_slots = slots;
    }
    if (s->n_ctx > s->vslot_len) { /* zeroed: no slot is valid (runs count from 1) */
        free(s->vslot_of);
        free(s->vslot_gen);
        s->vslot_of = gpp_xcalloc((size_t)s->n_ctx, sizeof(int));
        s->vslot_gen = gpp_xcalloc((size_t)s->n_ctx, sizeof(unsigned));
        s->vslot_len = s->n_ctx;
    }
    free(s->zero_row);
    s->zero_row = gpp_xcalloc((size_t)n_cfg * s->n_levels, sizeof(int));
    /* the in-flight tables (the DP's inner loops ask for these per step) */
    free(s->infl_tab), free(s->lev_tab), free(s->mbf_tab);
    s->infl_tab = s->lev_tab = s->mbf_tab = NULL;
    size_t cells = (size_t)n_cfg * (size_t)s->n_ctx;
    if (cells <= ((size_t)1 << 20)) {
        s->infl_tab = gpp_xcalloc(cells, sizeof(int));
        s->lev_tab = gpp_xcalloc(cells, sizeof(int));
        s->mbf_tab = gpp_xcalloc(cells, sizeof(int));
        for (int c = 0; c < n_cfg; c++)
            for (int x = 0; x < s->n_ctx; x++) {
                size_t k = (size_t)c * s->n_ctx + x;
                s->infl_tab[k] = gpp_dp_infl(s, c, x);
                s->lev_tab[k] = s->infl_tab[k] / s->level_samples;
                s->mbf_tab[k] = (s->infl_tab[k] + cfg[c].b - 1) / cfg[c].b;
            }
    }
}

void gpp_dp_destroy(gpp_dp_t **sp)
{
    gpp_dp_t *s = *sp;
    if (!s)
        return;
    for (int m = 0; m <= s->batch; m++)
        free(s->pre_reserved_at[m]);
    free(s->pre_state_bytes), free(s->pre_stash_bytes), free(s->pre_work_bytes),
        free(s->pre_reserved_at), free(s->pre_grad_bytes);
    free(s->pre_step_kernels);
    free(s->pre_sparse_ops);
    for (int l = 0; s->step_rows && l < s->tree->n_ops; l++)
        free(s->step_rows[l]), free(s->bnd_rows[l]);
    free(s->step_rows), free(s->bnd_rows), free(s->bnd_stamp);
    for (int m = 0; m <= s->batch; m++)
        free(s->pre_ms[m]);
    free(s->pre_ms);
    free(s->ar_ms_per_byte), free(s->ar_ms_fixed), free(s->last_consumer), free(s->pre_rate_ms),
        free(s->stamp), free(s->suffix_base);
    free(s->node_depth), free(s->head_bytes), free(s->head_ints);
    free(s->head_owner), free(s->head_used);
    free(s->memo_gen), free(s->memo_p), free(s->zero_row), free(s->out);
    free(s->view_first), free(s->view_node), free(s->view_k), free(s->view_base);
    free(s->view_leaves), free(s->infl_tab), free(s->lev_tab), free(s->mbf_tab);
    free(s->pos_out_bytes), free(s->in_off), free(s->in_pos);
    free(s->vmemo_gen), free(s->vmemo_p), free(s->vslot_of), free(s->vslot_gen);
    s_arena_free(&s->arena);
    free(s);
    *sp = NULL;
}
