/* gpp_optim: optimizer state objects; the update math runs on the backend. */
#include "kernels/gpp_optim.h"

#include <assert.h>
#include <stdlib.h>

#include "kernels/gpp_backend_impl.h"

gpp_optim_state_t *gpp_optim_state_new(gpp_stream_t *s, gpp_optim_kind_t kind, int64_t numel,
                                       gpp_err_t *err)
{
    assert(s && numel >= 0 && (kind == GPP_OPTIM_SGD || kind == GPP_OPTIM_ADAMW));
    gpp_optim_state_t *self = gpp_xcalloc(1, sizeof *self);
    self->be = s->be;
    self->kind = kind;
    self->numel = numel;
    self->nbufs = kind == GPP_OPTIM_ADAMW ? 2 : 1;
    size_t bytes = (size_t)numel * sizeof(float);
    for (int i = 0; i < self->nbufs; i++) {
        self->buf[i] = s->be->vt->alloc(s->be, bytes, err);
        if (!self->buf[i] || gpp_stream_zero(s, self->buf[i], bytes, err) < 0)
            goto fail;
    }
    return self;
fail:
    gpp_err_prefix(err, "optimizer state for %lld parameters", (long long)numel);
    gpp_optim_state_destroy(&self);
    return NULL;
}

void gpp_optim_state_destroy(gpp_optim_state_t **self_p)
{
    assert(self_p);
    gpp_optim_state_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < self->nbufs; i++)
        gpp_backend_free(self->be, (void **)&self->buf[i]);
    free(self);
    *self_p = NULL;
}

gpp_optim_kind_t gpp_optim_state_kind(const gpp_optim_state_t *self)
{
    assert(self);
    return self->kind;
}

int64_t gpp_optim_state_numel(const gpp_optim_state_t *self)
{
    assert(self);
    return self->numel;
}

int gpp_optim_state_nbufs(const gpp_optim_state_t *self)
{
    assert(self);
    return self->nbufs;
}

float *gpp_optim_state_buf(gpp_optim_state_t *self, int i)
{
    assert(self && i >= 0 && i < self->nbufs);
    return self->buf[i];
}

static void s_check_hp(const gpp_optim_state_t *st, const gpp_optim_hp_t *hp, int64_t step)
{
    assert(st && hp && hp->kind == st->kind && step >= 1);
    assert(hp->lr >= 0 && hp->weight_decay >= 0);
    assert(hp->kind != GPP_OPTIM_ADAMW ||
           (hp->beta1 >= 0 && hp->beta1 < 1 && hp->beta2 >= 0 && hp->beta2 < 1 && hp->eps > 0));
    (void)st, (void)hp, (void)step;
}

int gpp_optim_step(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp, int64_t step,
                   gpp_tensor_t *param, const gpp_tensor_t *grad, gpp_err_t *err)
{
    s_check_hp(st, hp, step);
    assert(s && s->be == st->be && param && grad);
    assert(param->dtype == GPP_DTYPE_F32 && grad->dtype == GPP_DTYPE_F32);
    assert(gpp_tensor_numel(param) == st->numel && gpp_tensor_numel(grad) == st->numel);
    if (st->numel == 0)
        return 0;
    return s->be->vt->optim_step(s, st, hp, step, param->data, grad->data, err);
}

int gpp_optim_step_sparse(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                          int64_t step, gpp_tensor_t *table, const gpp_sparse_grad_t *grad,
                          gpp_err_t *err)
{
    s_check_hp(st, hp, step);
    assert(s && s->be == st->be && table && grad && grad->be == st->be);
    assert(table->dtype == GPP_DTYPE_F32 && table->n == 1);
    assert(table->rows == grad->table_rows && table->cols == grad->dim);
    assert(gpp_tensor_numel(table) == st->numel);
    return s->be->vt->optim_step_sparse(s, st, hp, step, table->data, grad, err);
}
