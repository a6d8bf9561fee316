/* gpp_cpu_embedding: embedding bag (sum) and the row-sparse gradient it
 * accumulates into (gpp_sparse.h). Accumulation is sequential in index
 * order, so the slot order and every sum are reproducible. */
#include <string.h>

#include "kernels/cpu/gpp_cpu.h"

int gpp_cpu_embedding_bag_fwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *table,
                              gpp_tensor_t *y, gpp_err_t *err)
{
    (void)s;
    int64_t bags = idx->n * idx->rows, bag = idx->cols, dim = table->cols;
    const int32_t *ix = idx->data;
    const float *tab = table->data;
    for (int64_t b = 0; b < bags; b++) {
        float *yr = (float *)y->data + b * dim;
        memset(yr, 0, (size_t)dim * sizeof(float));
        for (int64_t k = 0; k < bag; k++) {
            int32_t r = ix[b * bag + k];
            if (r < 0 || r >= table->rows)
                return gpp_err_set(err,
                                   "embedding bag: sample %lld, bag %lld, position %lld: index "
                                   "%d outside the table's [0, %lld) rows; check the data "
                                   "source's index range",
                                   (long long)(b / idx->rows), (long long)(b % idx->rows),
                                   (long long)k, r, (long long)table->rows);
            gpp_cpu_acc(dim, tab + (int64_t)r * dim, yr);
        }
    }
    return 0;
}

int gpp_cpu_embedding_bag_bwd(gpp_stream_t *s, const gpp_tensor_t *idx, const gpp_tensor_t *dy,
                              gpp_sparse_grad_t *dtable, gpp_err_t *err)
{
    int64_t bags = idx->n * idx->rows, bag = idx->cols, dim = dy->cols;
    for (int64_t b = 0; b < bags; b++) {
        /* every index of the bag receives the bag's output gradient */
        if (gpp_cpu_sparse_add(s, dtable, bag, (const int32_t *)idx->data + b * bag,
                               (const float *)dy->data + b * dim, 0, err) < 0)
            return gpp_err_prefix(err, "embedding bag backward, bag %lld", (long long)b);
    }
    return 0;
}

int gpp_cpu_sparse_init(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err)
{
    (void)s, (void)err;
    memset(g->slot, 0xff, (size_t)g->table_rows * sizeof(int32_t)); /* all -1 */
    g->count = 0;
    return 0;
}

int gpp_cpu_sparse_add(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t count, const int32_t *rows,
                       const float *values, int64_t value_stride, gpp_err_t *err)
{
    (void)s;
    /* Validate first so that a bad id leaves the gradient untouched. */
    int64_t fresh = 0;
    for (int64_t k = 0; k < count; k++) {
        if (rows[k] < 0 || rows[k] >= g->table_rows)
            return gpp_err_set(err,
                               "sparse gradient: row id %d at position %lld outside the "
                               "table's [0, %lld) rows",
                               rows[k], (long long)k, (long long)g->table_rows);
        fresh += g->slot[rows[k]] < 0;
    }
    /* fresh over-counts ids repeated within this call: enough room, capped */
    int64_t need = g->count + fresh;
    if (gpp_sparse_grad_reserve(s, g, need < g->table_rows ? need : g->table_rows, err) < 0)
        return -1;
    int64_t dim = g->dim;
    for (int64_t k = 0; k < count; k++) {
        const float *v = values + k * value_stride;
        int32_t r = rows[k];
        int32_t slot = g->slot[r];
        if (slot < 0) {
            slot = (int32_t)g->count++;
            g->slot[r] = slot;
            g->rows[slot] = r;
            memcpy(g->values + (int64_t)slot * dim, v, (size_t)dim * sizeof(float));
        } else {
            gpp_cpu_acc(dim, v, g->values + (int64_t)slot * dim);
        }
    }
    return 0;
}

int gpp_cpu_sparse_clear(gpp_stream_t *s, gpp_sparse_grad_t *g, gpp_err_t *err)
{
    (void)s, (void)err;
    for (int64_t k = 0; k < g->count; k++)
        g->slot[g->rows[k]] = -1;
    g->count = 0;
    return 0;
}
