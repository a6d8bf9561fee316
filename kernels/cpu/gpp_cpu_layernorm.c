/* gpp_cpu_layernorm: layer norm over the last dim with gain and bias.
 * Row statistics are accumulated in double, in GPP_CPU_LANES interleaved
 * partial sums added in a fixed order (so that the loops vectorise and the
 * result does not depend on the vector width); the stash keeps (mean, 1/std)
 * per row as floats. */
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"

#define L GPP_CPU_LANES

GPP_CPU_CLONES
int gpp_cpu_layernorm_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                          const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = x->n * x->rows, c = x->cols, body = c - c % L;
    const float *restrict g = gain->data, *restrict b = bias->data;
    float *st = stash;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = (const float *)x->data + r * c;
        float *restrict yr = (float *)y->data + r * c;
        double acc[L] = {0};
        for (int64_t j = 0; j < body; j += L)
            for (int k = 0; k < L; k++)
                acc[k] += xr[j + k];
        for (int64_t j = body; j < c; j++)
            acc[j - body] += xr[j];
        double mean = gpp_cpu_lanes_total(acc) / (double)c;
        double acc2[L] = {0};
        for (int64_t j = 0; j < body; j += L)
            for (int k = 0; k < L; k++) {
                double d = xr[j + k] - mean;
                acc2[k] += d * d;
            }
        for (int64_t j = body; j < c; j++) {
            double d = xr[j] - mean;
            acc2[j - body] += d * d;
        }
        double var = gpp_cpu_lanes_total(acc2) / (double)c;
        float m = (float)mean;
        float rstd = (float)(1.0 / sqrt(var + (double)GPP_LAYERNORM_EPS));
        for (int64_t j = 0; j < c; j++)
            yr[j] = (xr[j] - m) * rstd * g[j] + b[j];
        st[2 * r] = m;
        st[2 * r + 1] = rstd;
    }
    return 0;
}

GPP_CPU_CLONES
int gpp_cpu_layernorm_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                          const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                          gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = x->n * x->rows, c = x->cols, body = c - c % L;
    const float *restrict g = gain->data, *st = stash;
    float *dg = dgain ? dgain->data : NULL, *dbb = dbias ? dbias->data : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *restrict xr = (const float *)x->data + r * c;
        const float *restrict dyr = (const float *)dy->data + r * c;
        float m = st[2 * r], rstd = st[2 * r + 1];
        if (dg)
            for (int64_t j = 0; j < c; j++)
                dg[j] += dyr[j] * ((xr[j] - m) * rstd);
        if (dbb)
            for (int64_t j = 0; j < c; j++)
                dbb[j] += dyr[j];
        if (!dx)
            continue;
        /* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g */
        double acc_d[L] = {0}, acc_dx[L] = {0};
        for (int64_t j = 0; j < body; j += L)
            for (int k = 0; k < L; k++)
                acc_d[k] += dyr[j + k] * g[j + k];
        for (int64_t j = 0; j < body; j += L)
            for (int k = 0; k < L; k++)
                acc_dx[k] += (double)(dyr[j + k] * g[j + k]) * ((xr[j + k] - m) * rstd);
        for (int64_t j = body; j < c; j++) {
            float xhat = (xr[j] - m) * rstd, dxhat = dyr[j] * g[j];
            acc_d[j - body] += dxhat;
            acc_dx[j - body] += (double)dxhat * xhat;
        }
        float mean_d = (float)(gpp_cpu_lanes_total(acc_d) / (double)c);
        float mean_dx = (float)(gpp_cpu_lanes_total(acc_dx) / (double)c);
        float *dxr = (float *)dx->data + r * c;
        for (int64_t j = 0; j < c; j++) {
            float xhat = (xr[j] - m) * rstd;
            dxr[j] += rstd * (dyr[j] * g[j] - mean_d - xhat * mean_dx);
        }
    }
    return 0;
}
