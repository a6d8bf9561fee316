/* gpp_cpu_loss: MSE and softmax cross-entropy, loss and gradient in one
 * pass. Sums run in double in a fixed order. */
#include <math.h>

#include "kernels/cpu/gpp_cpu.h"

int gpp_cpu_loss_mse(gpp_stream_t *s, const gpp_tensor_t *x, const gpp_tensor_t *target,
                     float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t n = gpp_tensor_numel(x);
    const float *xp = x->data, *tp = target->data;
    float *dxp = dx ? dx->data : NULL;
    float g = 2.0f * grad_scale / (float)n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float d = xp[i] - tp[i];
        sum += (double)d * d;
        if (dxp)
            dxp[i] += g * d;
    }
    *loss = (float)(sum / (double)n);
    return 0;
}

int gpp_cpu_loss_ce(gpp_stream_t *s, const gpp_tensor_t *logits, const gpp_tensor_t *labels,
                    float *loss, float grad_scale, gpp_tensor_t *dx, gpp_err_t *err)
{
    (void)s;
    int64_t rows = logits->n * logits->rows, c = logits->cols;
    const int32_t *lab = labels->data;
    for (int64_t r = 0; r < rows; r++)
        if (lab[r] < 0 || lab[r] >= c)
            return gpp_err_set(err,
                               "cross-entropy: row %lld: label %d outside [0, %lld) "
                               "classes; check the data source's labels",
                               (long long)r, lab[r], (long long)c);
    float g = grad_scale / (float)rows;
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        const float *z = (const float *)logits->data + r * c;
        float mx = z[0];
        for (int64_t j = 1; j < c; j++)
            mx = z[j] > mx ? z[j] : mx;
        double sum = 0.0;
        for (int64_t j = 0; j < c; j++)
            sum += exp((double)(z[j] - mx));
        double lse = log(sum) + mx;
        total += lse - z[lab[r]];
        if (!dx)
            continue;
        /* d/dz = softmax(z) - onehot(label) */
        float *d = (float *)dx->data + r * c;
        for (int64_t j = 0; j < c; j++)
            d[j] += g * ((float)exp((double)z[j] - lse) - (j == lab[r] ? 1.0f : 0.0f));
    }
    *loss = (float)(total / (double)rows);
    return 0;
}
