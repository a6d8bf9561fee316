/* gpp_sparse: row-sparse gradient objects; accumulation runs on the backend. */
#include "kernels/gpp_sparse.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/gpp_backend_impl.h"

/* Rows the value block holds at first when the caller gives no hint. */
#define GPP_SPARSE_DEFAULT_CAP 1024

gpp_sparse_grad_t *gpp_sparse_grad_new(gpp_stream_t *s, int64_t table_rows, int64_t dim,
                                       int64_t cap_rows, gpp_err_t *err)
{
    assert(s && table_rows > 0 && table_rows <= INT32_MAX && dim > 0 && cap_rows >= 0);
    gpp_backend_t *be = s->be;
    gpp_sparse_grad_t *self = gpp_xcalloc(1, sizeof *self);
    self->be = be;
    self->table_rows = table_rows;
    self->dim = dim;
    self->cap = cap_rows ? cap_rows : GPP_SPARSE_DEFAULT_CAP;
    if (self->cap > table_rows)
        self->cap = table_rows;
    /* the last word: an asynchronous backend's device counter */
    self->slot = be->vt->alloc(be, (size_t)(table_rows + 1) * sizeof(int32_t), err);
    if (!self->slot)
        goto fail;
    self->rows = be->vt->alloc(be, (size_t)self->cap * sizeof(int32_t), err);
    if (!self->rows)
        goto fail;
    self->values = be->vt->alloc(be, (size_t)(self->cap * dim) * sizeof(float), err);
    if (!self->values)
        goto fail;
    if (be->vt->sparse_init(s, self, err) < 0)
        goto fail;
    return self;
fail:
    gpp_err_prefix(err, "sparse gradient for a (%lld, %lld) table", (long long)table_rows,
                   (long long)dim);
    gpp_sparse_grad_destroy(&self);
    return NULL;
}

void gpp_sparse_grad_destroy(gpp_sparse_grad_t **self_p)
{
    assert(self_p);
    gpp_sparse_grad_t *self = *self_p;
    if (!self)
        return;
    gpp_backend_free(self->be, (void **)&self->slot);
    gpp_backend_free(self->be, (void **)&self->rows);
    gpp_backend_free(self->be, (void **)&self->values);
    if (self->be->vt->sparse_fini)
        self->be->vt->sparse_fini(self);
    else
        free(self->host);
    free(self);
    *self_p = NULL;
}

int64_t gpp_sparse_grad_dim(const gpp_sparse_grad_t *self)
{
    assert(self);
    return self->dim;
}

int64_t gpp_sparse_grad_count(const gpp_sparse_grad_t *self)
{
    assert(self);
    return self->be->vt->sparse_count ? self->be->vt->sparse_count(self) : self->count;
}

const int32_t *gpp_sparse_grad_rows(const gpp_sparse_grad_t *self)
{
    assert(self);
    return self->rows;
}

const float *gpp_sparse_grad_values(const gpp_sparse_grad_t *self)
{
    assert(self);
    return self->values;
}

int gpp_sparse_grad_add(gpp_stream_t *s, gpp_sparse_grad_t *self, int64_t count,
                        const int32_t *rows, const float *values, gpp_err_t *err)
{
    assert(s && self && s->be == self->be && count >= 0 && (count == 0 || (rows && values)));
    if (count == 0)
        return 0;
    return s->be->vt->sparse_add(s, self, count, rows, values, self->dim, err);
}

int gpp_sparse_grad_reserve(gpp_stream_t *s, gpp_sparse_grad_t *g, int64_t need, gpp_err_t *err)
{
    assert(s && g && s->be == g->be && need >= 0);
    if (need <= g->cap)
        return 0;
    int64_t cap = g->cap * 2 > need ? g->cap * 2 : need;
    cap = cap > g->table_rows ? g->table_rows : cap;
    gpp_backend_t *be = g->be;
    int32_t *rows = be->vt->alloc(be, (size_t)cap * sizeof(int32_t), err);
    float *values = rows ? be->vt->alloc(be, (size_t)(cap * g->dim) * sizeof(float), err) : NULL;
    if (!rows || !values) {
        be->vt->free(be, rows);
        return gpp_err_prefix(err, "growing a sparse gradient to %lld rows", (long long)cap);
    }
    /* count: the rows held so far, or more (an upper bound on CUDA) */
    if (be->vt->copy(s, rows, g->rows, (size_t)g->count * sizeof(int32_t), GPP_COPY_D2D, err) < 0 ||
        be->vt->copy(s, values, g->values, (size_t)(g->count * g->dim) * sizeof(float),
                     GPP_COPY_D2D, err) < 0) {
        be->vt->stream_free(s, rows);
        be->vt->stream_free(s, values);
        return gpp_err_prefix(err, "growing a sparse gradient to %lld rows", (long long)cap);
    }
    be->vt->stream_free(s, g->rows);
    be->vt->stream_free(s, g->values);
    g->rows = rows;
    g->values = values;
    g->cap = cap;
    return 0;
}

int64_t gpp_sparse_grad_bound(const gpp_sparse_grad_t *self)
{
    assert(self);
    return self->count;
}

int64_t gpp_sparse_grad_room(const gpp_sparse_grad_t *self)
{
    assert(self);
    return self->cap >= self->table_rows ? INT64_MAX : self->cap - self->count;
}

void gpp_sparse_grad_set_bound(gpp_sparse_grad_t *self, int64_t bound)
{
    assert(self && bound >= 0 && bound <= self->cap);
    self->count = bound;
}

int gpp_sparse_grad_clear(gpp_stream_t *s, gpp_sparse_grad_t *self, gpp_err_t *err)
{
    assert(s && self && s->be == self->be);
    return s->be->vt->sparse_clear(s, self, err);
}
