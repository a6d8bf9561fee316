/* gpp_profile_graph: see gpp_profile_graph.h. */
#include "model/gpp_profile_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gpp_graph_t *gpp_profile_graph(const gpp_profile_t *p, gpp_err_t *err)
{
    const char *origin = p->origin;
    const int n = p->n_ops;
    gpp_graph_t *g = NULL;
    int **ins = gpp_xcalloc((size_t)n + 1, sizeof *ins); /* inputs as indices into p->ops */
    int *newid = gpp_xcalloc((size_t)n + 1, sizeof *newid);
    int *order = gpp_xcalloc((size_t)n + 1, sizeof *order);
    int *indeg = gpp_xcalloc((size_t)n + 1, sizeof *indeg);
    char key[GPP_NAME_LEN + 16];
    if (n < 1) {
        gpp_err_set(err, "%s: profile has no ops", origin);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        const gpp_profile_op_t *o = &p->ops[i];
        snprintf(key, sizeof key, "%d (%s)", o->id, o->name);
        if (!o->has_weight) {
            gpp_err_set(err, "%s: op %s: field 'weight_size' missing", origin, key);
            goto fail;
        }
        ins[i] = gpp_xcalloc((size_t)o->n_inputs + 1, sizeof(int));
        for (int k = 0; k < o->n_inputs; k++) {
            const gpp_profile_op_t *hit = gpp_profile_op(p, o->inputs[k]);
            if (!hit) {
                gpp_err_set(err, "%s: op %s: inputs[%d] does not name an op id of this profile",
                            origin, key, k);
                goto fail;
            }
            ins[i][k] = (int)(hit - p->ops);
            if (ins[i][k] == i) {
                gpp_err_set(err, "%s: op %s: lists itself as an input", origin, key);
                goto fail;
            }
        }
        indeg[i] = o->n_inputs;
    }
    /* topological order (Kahn, smallest id first) */
    for (int done = 0; done < n;) {
        int pick = -1;
        for (int i = 0; i < n && pick < 0; i++)
            if (indeg[i] == 0)
                pick = i;
        if (pick < 0) {
            for (int i = 0; i < n; i++)
                if (indeg[i] > 0) {
                    gpp_err_set(err, "%s: op %d (%s): inputs form a cycle", origin, p->ops[i].id,
                                p->ops[i].name);
                    break;
                }
            goto fail;
        }
        indeg[pick] = -1;
        newid[pick] = done;
        order[done++] = pick;
        for (int i = 0; i < n; i++)
            for (int k = 0; k < p->ops[i].n_inputs; k++)
                if (ins[i][k] == pick)
                    indeg[i]--;
    }
    const char *slash = strrchr(origin, '/');
    g = gpp_graph_new(slash ? slash + 1 : origin); /* the file's name */
    snprintf(g->spec, sizeof g->spec, "%s", origin);
    for (int t = 0; t < n; t++) {
        int i = order[t];
        const gpp_profile_op_t *o = &p->ops[i];
        int *mapped = gpp_xcalloc((size_t)o->n_inputs + 1, sizeof(int));
        for (int k = 0; k < o->n_inputs; k++)
            mapped[k] = newid[ins[i][k]];
        int id = gpp_graph_add(g, GPP_OP_OPAQUE, o->name, o->n_inputs, mapped);
        free(mapped);
        gpp_op_t *op = gpp_graph_op(g, id);
        op->params = (int64_t)(o->weight_bytes / 4.0);
        op->weight_io_bytes = 3 * op->params * 4;
        op->rows = 1;
        int64_t stash = 0;
        for (int k = 0; k < o->n_inputs; k++)
            stash += (int64_t)o->input_bytes[k];
        op->io_bytes = 3 * stash;
    }
    /* out_bytes: what consumers declare they read from the op (the largest),
       or the op's own figure when larger (gpp's profiles: an op without
       consumers, a loss, still has an output) */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p->ops[i].n_inputs; k++) {
            gpp_op_t *q = gpp_graph_op(g, newid[ins[i][k]]);
            if ((int64_t)p->ops[i].input_bytes[k] > q->out_bytes)
                q->out_bytes = (int64_t)p->ops[i].input_bytes[k];
        }
    for (size_t r = 0; r < p->n_rows; r++) {
        const gpp_profile_op_t *o = gpp_profile_op(p, p->rows[r].op);
        gpp_op_t *q = o ? gpp_graph_op(g, newid[o - p->ops]) : NULL;
        if (q && p->rows[r].has_out_bytes && p->rows[r].out_bytes > q->out_bytes)
            q->out_bytes = p->rows[r].out_bytes;
    }
    for (int i = 0; i < g->n_ops; i++) {
        gpp_op_t *op = gpp_graph_op(g, i);
        op->cols = op->out_bytes / 4 > 0 ? op->out_bytes / 4 : 1;
        op->io_bytes += op->out_bytes * 3;
        /* each tensor once, at its owner (the authors' count): an op keeps
           its output for the backward; a tensor read by several ops is not
           counted per reader (received ones: gpp_cost_stage's boundary) */
        op->stash_bytes = op->out_bytes;
    }
    if (gpp_graph_finalize(g, err)) {
        gpp_err_prefix(err, "%s", origin);
        goto fail;
    }
    goto done;
fail:
    gpp_graph_destroy(&g);
done:
    for (int i = 0; i < n; i++)
        free(ins[i]);
    free(ins), free(newid), free(order), free(indeg);
    return g;
}
