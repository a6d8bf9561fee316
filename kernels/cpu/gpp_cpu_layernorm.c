/* gpp_cpu_layernorm: layer norm over the last dim with gain and bias.
 * Row statistics are accumulated in double in a fixed order; the stash keeps
 * (mean, 1/std) per row as floats. */
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"

int gpp_cpu_layernorm_fwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                          const gpp_tensor_t *bias, gpp_tensor_t *y, void *stash, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = x->n * x->rows, c = x->cols;
    const float *g = gain->data, *b = bias->data;
    float *st = stash;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = (const float *)x->data + r * c;
        float *yr = (float *)y->data + r * c;
        double sum = 0.0;
        for (int64_t j = 0; j < c; j++)
            sum += xr[j];
        double mean = sum / (double)c;
        double var = 0.0;
        for (int64_t j = 0; j < c; j++) {
            double d = xr[j] - mean;
            var += d * d;
        }
        var /= (double)c;
        float m = (float)mean;
        float rstd = (float)(1.0 / sqrt(var + (double)GPP_LAYERNORM_EPS));
        for (int64_t j = 0; j < c; j++)
            yr[j] = (xr[j] - m) * rstd * g[j] + b[j];
        st[2 * r] = m;
        st[2 * r + 1] = rstd;
    }
    return 0;
}

int gpp_cpu_layernorm_bwd(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *gain,
                          const void *stash, const gpp_tensor_t *dy, gpp_tensor_t *dx,
                          gpp_tensor_t *dgain, gpp_tensor_t *dbias, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = x->n * x->rows, c = x->cols;
    const float *g = gain->data, *st = stash;
    float *dg = dgain ? dgain->data : NULL, *dbb = dbias ? dbias->data : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = (const float *)x->data + r * c;
        const float *dyr = (const float *)dy->data + r * c;
        float m = st[2 * r], rstd = st[2 * r + 1];
        /* dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g */
        double sum_d = 0.0, sum_dx = 0.0;
        for (int64_t j = 0; j < c; j++) {
            float xhat = (xr[j] - m) * rstd;
            float dxhat = dyr[j] * g[j];
            sum_d += dxhat;
            sum_dx += (double)dxhat * xhat;
            if (dg)
                dg[j] += dyr[j] * xhat;
            if (dbb)
                dbb[j] += dyr[j];
        }
        if (!dx)
            continue;
        float mean_d = (float)(sum_d / (double)c), mean_dx = (float)(sum_dx / (double)c);
        float *dxr = (float *)dx->data + r * c;
        for (int64_t j = 0; j < c; j++) {
            float xhat = (xr[j] - m) * rstd;
            dxr[j] += rstd * (dyr[j] * g[j] - mean_d - xhat * mean_dx);
        }
    }
    return 0;
}
