/* gpp_cpu_optim: SGD with momentum and AdamW updates (rules in gpp_optim.h).
 * One span update per optimizer serves the dense step and each row of the
 * sparse step. */
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"

/* SGD over n elements; g NULL means a zero gradient. v unused without
 * momentum. The element update is gpp_math_sgd (kernels/gpp_math.h). */
GPP_CPU_CLONES
static void s_sgd_span(int64_t n, const gpp_optim_hp_t *hp, float *p, float *v, const float *g)
{
    float lr = hp->lr, wd = hp->weight_decay, mu = hp->momentum;
    for (int64_t i = 0; i < n; i++)
        gpp_math_sgd(lr, wd, mu, g ? g[i] : 0.0f, &p[i], mu != 0.0f ? &v[i] : NULL);
}

/* AdamW over n elements with the step's constants (gpp_math_adamw). */
GPP_CPU_CLONES
static void s_adamw_span(int64_t n, const gpp_math_adamw_t *k, float *p, float *m, float *v,
                         const float *g)
{
    const gpp_math_adamw_t kk = *k;
    for (int64_t i = 0; i < n; i++)
        gpp_math_adamw(&kk, g[i], &p[i], &m[i], &v[i]);
}

static gpp_math_adamw_t s_adamw_consts(const gpp_optim_hp_t *hp, int64_t step)
{
    return gpp_math_adamw_consts(hp->lr, hp->weight_decay, hp->beta1, hp->beta2, hp->eps, step);
}

int gpp_cpu_optim_step(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                       int64_t step, float *param, const float *grad, gpp_err_t *err)
{
    (void)s, (void)err;
    if (hp->kind == GPP_OPTIM_SGD) {
        s_sgd_span(st->numel, hp, param, st->buf[0], grad);
        return 0;
    }
    gpp_math_adamw_t k = s_adamw_consts(hp, step);
    s_adamw_span(st->numel, &k, param, st->buf[0], st->buf[1], grad);
    return 0;
}

int gpp_cpu_optim_step_sparse(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                              int64_t step, float *table, const gpp_sparse_grad_t *grad,
                              gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t dim = grad->dim;
    if (hp->kind == GPP_OPTIM_SGD && (hp->momentum != 0.0f || hp->weight_decay != 0.0f)) {
        /* every row moves: walk the whole table, gradient rows via the slot map */
        for (int64_t r = 0; r < grad->table_rows; r++) {
            int32_t slot = grad->slot[r];
            s_sgd_span(dim, hp, table + r * dim, st->buf[0] + r * dim,
                       slot < 0 ? NULL : grad->values + (int64_t)slot * dim);
        }
        return 0;
    }
    gpp_math_adamw_t ak = {0};
    if (hp->kind == GPP_OPTIM_ADAMW)
        ak = s_adamw_consts(hp, step);
    for (int64_t k = 0; k < grad->count; k++) {
        int64_t off = (int64_t)grad->rows[k] * dim;
        const float *g = grad->values + k * dim;
        if (hp->kind == GPP_OPTIM_SGD)
            s_sgd_span(dim, hp, table + off, st->buf[0] + off, g);
        else
            s_adamw_span(dim, &ak, table + off, st->buf[0] + off, st->buf[1] + off, g);
    }
    return 0;
}
