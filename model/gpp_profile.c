/* gpp_profile: see gpp_profile.h. */
#include "model/gpp_profile.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gpp_profile_t *gpp_profile_new(const char *origin)
{
    gpp_profile_t *p = gpp_xcalloc(1, sizeof *p);
    snprintf(p->origin, sizeof p->origin, "%s", origin ? origin : "");
    p->meta.n_ops = -1;
    return p;
}

void gpp_profile_destroy(gpp_profile_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_profile_t *p = *self_p;
    for (int i = 0; i < p->n_ops; i++) {
        gpp_profile_op_t *o = &p->ops[i];
        free(o->inputs);
        free(o->input_bytes);
        free(o->reserved_mbs);
        free(o->reserved_at);
    }
    free(p->ops);
    free(p->rows);
    free(p);
    *self_p = NULL;
}

gpp_profile_op_t *gpp_profile_add_op(gpp_profile_t *p, int id, const char *name)
{
    if (p->n_ops == p->cap_ops) {
        p->cap_ops = p->cap_ops ? 2 * p->cap_ops : 16;
        p->ops = gpp_xrealloc(p->ops, (size_t)p->cap_ops * sizeof *p->ops);
    }
    gpp_profile_op_t *o = &p->ops[p->n_ops++];
    memset(o, 0, sizeof *o);
    o->id = id;
    snprintf(o->name, sizeof o->name, "%s", name);
    return o;
}

void gpp_profile_add_row(gpp_profile_t *p, const gpp_profile_row_t *r)
{
    if (p->n_rows == p->cap_rows) {
        p->cap_rows = p->cap_rows ? 2 * p->cap_rows : 64;
        p->rows = gpp_xrealloc(p->rows, p->cap_rows * sizeof *p->rows);
    }
    p->rows[p->n_rows++] = *r;
}

static int s_op_cmp(const void *key, const void *elem)
{
    int id = *(const int *)key, o = ((const gpp_profile_op_t *)elem)->id;
    return (id > o) - (id < o);
}

const gpp_profile_op_t *gpp_profile_op(const gpp_profile_t *p, int id)
{
    return p->n_ops ? bsearch(&id, p->ops, (size_t)p->n_ops, sizeof *p->ops, s_op_cmp) : NULL;
}

/* rows ordered by (op, micro-batch) */
static int s_row_cmp(const void *a, const void *b)
{
    const gpp_profile_row_t *x = a, *y = b;
    if (x->op != y->op)
        return (x->op > y->op) - (x->op < y->op);
    return (x->micro_batch > y->micro_batch) - (x->micro_batch < y->micro_batch);
}

/* One row's own figures (its op's key: "ID (NAME)"). */
static int s_check_row(const gpp_profile_row_t *r, const char *origin, const char *key,
                       gpp_err_t *err)
{
    const double max = GPP_PROFILE_MAX_BYTES;
    if (r->micro_batch < 1 || r->micro_batch > GPP_PROFILE_MAX_MB)
        return gpp_err_set(err, "%s: op %s: runtime key '%d' is not a micro-batch size >= 1",
                           origin, key, r->micro_batch);
    if (!isfinite(r->ms) || r->ms < 0)
        return gpp_err_set(err, "%s: op %s: runtime[\"%d\"] must be a non-negative number of ms",
                           origin, key, r->micro_batch);
    if (r->has_fwd && (!isfinite(r->fwd_ms) || r->fwd_ms < 0 || r->fwd_ms > r->ms * (1 + 1e-9)))
        return gpp_err_set(err,
                           "%s: op %s: forward[\"%d\"] must be a number of ms between 0 and "
                           "runtime[\"%d\"] (forward is part of forward+backward)",
                           origin, key, r->micro_batch, r->micro_batch);
    if (r->has_kernel_stash && (r->kernel_stash < 0 || (double)r->kernel_stash > max))
        return gpp_err_set(err, "%s: op %s: kernel_stash %lld: must be 0..1 TiB bytes per sample",
                           origin, key, (long long)r->kernel_stash);
    if (r->has_workspace && (r->workspace.fixed < 0 || (double)r->workspace.fixed > max ||
                             r->workspace.per_sample < 0 || (double)r->workspace.per_sample > max))
        return gpp_err_set(err,
                           "%s: op %s: workspace fixed %lld + per sample %lld bytes: each must "
                           "be 0..1 TiB",
                           origin, key, (long long)r->workspace.fixed,
                           (long long)r->workspace.per_sample);
    if (r->has_out_bytes && (r->out_bytes < 1 || (double)r->out_bytes > max))
        return gpp_err_set(err, "%s: op %s: out_bytes %lld: must be 1..1 TiB bytes per sample",
                           origin, key, (long long)r->out_bytes);
    return 0;
}

/* What must be the same in every row of an op: a row against the op's first. */
static int s_check_same(const gpp_profile_row_t *a, const gpp_profile_row_t *r, const char *origin,
                        const char *key, gpp_err_t *err)
{
    if (a->has_fwd != r->has_fwd)
        return gpp_err_set(err,
                           "%s: op %s: 'forward' must have exactly the micro-batch sizes of "
                           "'runtime'",
                           origin, key);
    if (a->has_kernel_stash != r->has_kernel_stash ||
        (a->has_kernel_stash && a->kernel_stash != r->kernel_stash))
        return gpp_err_set(err,
                           "%s: op %s: kernel_stash %lld and %lld: must be the same in every "
                           "row of the op",
                           origin, key, (long long)a->kernel_stash, (long long)r->kernel_stash);
    if (a->has_workspace != r->has_workspace ||
        (a->has_workspace && (a->workspace.fixed != r->workspace.fixed ||
                              a->workspace.per_sample != r->workspace.per_sample)))
        return gpp_err_set(err,
                           "%s: op %s: workspace fixed %lld + per sample %lld bytes: must be the "
                           "same in every row of the op",
                           origin, key, (long long)r->workspace.fixed,
                           (long long)r->workspace.per_sample);
    if (a->has_out_bytes != r->has_out_bytes || (a->has_out_bytes && a->out_bytes != r->out_bytes))
        return gpp_err_set(err,
                           "%s: op %s: out_bytes %lld and %lld: must be the same in every row "
                           "of the op",
                           origin, key, (long long)a->out_bytes, (long long)r->out_bytes);
    return 0;
}

static void s_key(char *key, size_t len, const gpp_profile_op_t *o, int id)
{
    if (o)
        snprintf(key, len, "%d (%s)", o->id, o->name);
    else
        snprintf(key, len, "%d", id);
}

int gpp_profile_check(const gpp_profile_t *p, gpp_err_t *err)
{
    char key[GPP_NAME_LEN + 16];
    for (int i = 0; i < p->n_ops; i++) {
        const gpp_profile_op_t *o = &p->ops[i];
        s_key(key, sizeof key, o, o->id);
        if (o->id < 0 || o->id > 1000000000 || (i && o->id <= p->ops[i - 1].id))
            return gpp_err_set(err, "%s: op %s: ids must be 0..1e9, each once", p->origin, key);
        if (!o->name[0])
            return gpp_err_set(err, "%s: op %s: field 'name' missing or not a non-empty string",
                               p->origin, key);
        for (int k = 0; k < o->n_reserved; k++)
            if (o->reserved_mbs[k] < 1 || o->reserved_mbs[k] > GPP_PROFILE_MAX_MB ||
                (k && o->reserved_mbs[k] <= o->reserved_mbs[k - 1]) ||
                !isfinite(o->reserved_at[k]) || o->reserved_at[k] < 0 ||
                o->reserved_at[k] > GPP_PROFILE_MAX_BYTES)
                return gpp_err_set(err,
                                   "%s: op %s: reserved_mem: micro-batch sizes 1..2^24 each once, "
                                   "ascending; bytes 0..1 TiB",
                                   p->origin, key);
        if (o->reserved_bytes < 0 || (double)o->reserved_bytes > GPP_PROFILE_MAX_BYTES)
            return gpp_err_set(err, "%s: op %s: field 'reserved_mem' must be 0..1 TiB", p->origin,
                               key);
    }
    if (!p->n_rows)
        return 0;
    gpp_profile_row_t *sorted = gpp_xcalloc(p->n_rows, sizeof *sorted);
    memcpy(sorted, p->rows, p->n_rows * sizeof *sorted);
    qsort(sorted, p->n_rows, sizeof *sorted, s_row_cmp);
    int rc = 0;
    const gpp_profile_op_t *o = NULL;
    for (size_t i = 0; i < p->n_rows && rc == 0; i++) {
        const gpp_profile_row_t *r = &sorted[i];
        const gpp_profile_row_t *prev = i ? &sorted[i - 1] : NULL;
        int first = !prev || prev->op != r->op;
        if (first)
            o = gpp_profile_op(p, r->op);
        s_key(key, sizeof key, o, r->op);
        if (!o)
            rc = gpp_err_set(err, "%s: a row of op %d, which the profile does not list", p->origin,
                             r->op);
        else if (s_check_row(r, p->origin, key, err) < 0)
            rc = -1;
        else if (!first && prev->micro_batch == r->micro_batch)
            rc = gpp_err_set(err, "%s: op %s: runtime lists micro-batch %d twice", p->origin, key,
                             r->micro_batch);
        else if (!first && s_check_same(prev, r, p->origin, key, err) < 0)
            rc = -1;
    }
    free(sorted);
    return rc;
}

gpp_profile_t *gpp_profile_of_graph(const gpp_graph_t *g, const gpp_profile_row_t *rows,
                                    size_t n_rows, const char *origin, gpp_err_t *err)
{
    char *has = gpp_xcalloc((size_t)g->n_ops + 1, 1);
    for (size_t i = 0; i < n_rows; i++) {
        if (rows[i].op < 0 || rows[i].op >= g->n_ops) {
            free(has);
            gpp_err_set(err, "%s: row %zu: op %d, but model '%s' has ops 0..%d", origin, i,
                        rows[i].op, g->name, g->n_ops - 1);
            return NULL;
        }
        has[rows[i].op] = 1;
    }
    gpp_profile_t *p = gpp_profile_new(origin);
    for (int k = 0; k < g->n_ops; k++) {
        if (!has[k])
            continue;
        const gpp_op_t *op = &g->ops[k];
        gpp_profile_op_t *o = gpp_profile_add_op(p, k, op->name);
        o->n_inputs = op->n_inputs;
        o->inputs = gpp_xcalloc((size_t)op->n_inputs + 1, sizeof *o->inputs);
        o->input_bytes = gpp_xcalloc((size_t)op->n_inputs + 1, sizeof *o->input_bytes);
        for (int j = 0; j < op->n_inputs; j++) {
            o->inputs[j] = op->inputs[j];
            o->input_bytes[j] = (double)g->ops[op->inputs[j]].out_bytes;
        }
        o->has_weight = 1;
        o->weight_bytes = (double)(op->params * 4);
    }
    free(has);
    for (size_t i = 0; i < n_rows; i++)
        gpp_profile_add_row(p, &rows[i]);
    if (gpp_profile_check(p, err) < 0)
        gpp_profile_destroy(&p);
    return p;
}
