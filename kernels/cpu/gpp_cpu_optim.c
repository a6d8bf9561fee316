/* gpp_cpu_optim: SGD with momentum and AdamW updates (rules in gpp_optim.h).
 * One span update per optimizer serves the dense step and each row of the
 * sparse step. */
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"

/* SGD over n elements; g NULL means a zero gradient. v unused without
 * momentum. */
GPP_CPU_CLONES
static void s_sgd_span(int64_t n, const gpp_optim_hp_t *hp, float *p, float *v, const float *g)
{
    float lr = hp->lr, wd = hp->weight_decay, mu = hp->momentum;
    for (int64_t i = 0; i < n; i++) {
        float gi = (g ? g[i] : 0.0f) + wd * p[i];
        if (mu != 0.0f) {
            v[i] = mu * v[i] + gi;
            gi = v[i];
        }
        p[i] -= lr * gi;
    }
}

/* AdamW over n elements; bc1 = 1 - beta1^t, bc2 = 1 - beta2^t. */
GPP_CPU_CLONES
static void s_adamw_span(int64_t n, const gpp_optim_hp_t *hp, float bc1, float bc2, float *p,
                         float *m, float *v, const float *g)
{
    float lr = hp->lr, b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
    float decay = 1.0f - hp->lr * hp->weight_decay;
    float step = lr / bc1, inv_sqrt_bc2 = 1.0f / sqrtf(bc2);
    for (int64_t i = 0; i < n; i++) {
        p[i] *= decay;
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        p[i] -= step * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

static void s_bias_corrections(const gpp_optim_hp_t *hp, int64_t step, float *bc1, float *bc2)
{
    *bc1 = (float)(1.0 - pow((double)hp->beta1, (double)step));
    *bc2 = (float)(1.0 - pow((double)hp->beta2, (double)step));
}

int gpp_cpu_optim_step(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                       int64_t step, float *param, const float *grad, gpp_err_t *err)
{
    (void)s, (void)err;
    if (hp->kind == GPP_OPTIM_SGD) {
        s_sgd_span(st->numel, hp, param, st->buf[0], grad);
        return 0;
    }
    float bc1, bc2;
    s_bias_corrections(hp, step, &bc1, &bc2);
    s_adamw_span(st->numel, hp, bc1, bc2, param, st->buf[0], st->buf[1], grad);
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
    float bc1 = 1.0f, bc2 = 1.0f;
    if (hp->kind == GPP_OPTIM_ADAMW)
        s_bias_corrections(hp, step, &bc1, &bc2);
    for (int64_t k = 0; k < grad->count; k++) {
        int64_t off = (int64_t)grad->rows[k] * dim;
        const float *g = grad->values + k * dim;
        if (hp->kind == GPP_OPTIM_SGD)
            s_sgd_span(dim, hp, table + off, st->buf[0] + off, g);
        else
            s_adamw_span(dim, hp, bc1, bc2, table + off, st->buf[0] + off, st->buf[1] + off, g);
    }
    return 0;
}
