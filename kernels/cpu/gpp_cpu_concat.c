/* gpp_cpu_concat: concat along features and its backward, the split; the
 * slice of a column block and its backward. */
#include <string.h>

#include "kernels/cpu/gpp_cpu.h"

int gpp_cpu_concat_fwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *const *xs, gpp_tensor_t *y,
                       gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = y->n * y->rows, cy = y->cols;
    int64_t off = 0;
    for (int i = 0; i < n_in; i++) {
        int64_t c = xs[i]->cols;
        const float *x = xs[i]->data;
        float *yb = (float *)y->data + off;
        for (int64_t r = 0; r < rows; r++)
            memcpy(yb + r * cy, x + r * c, (size_t)c * sizeof(float));
        off += c;
    }
    return 0;
}

int gpp_cpu_concat_bwd(gpp_stream_t *s, int n_in, const gpp_tensor_t *dy, gpp_tensor_t *const *dxs,
                       gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = dy->n * dy->rows, cy = dy->cols;
    /* NULL entries are adjacent (gpp_ops.h): the first of them spans all
     * the columns the others leave, the rest none */
    int64_t null_cols = cy;
    for (int i = 0; i < n_in; i++)
        null_cols -= dxs[i] ? dxs[i]->cols : 0;
    int64_t off = 0;
    for (int i = 0; i < n_in; i++) {
        if (!dxs[i]) {
            off += null_cols;
            null_cols = 0;
            continue;
        }
        int64_t c = dxs[i]->cols;
        float *dx = dxs[i]->data;
        const float *dyb = (const float *)dy->data + off;
        off += c;
        if (!dx)
            continue;
        for (int64_t r = 0; r < rows; r++)
            gpp_cpu_acc(c, dyb + r * cy, dx + r * c);
    }
    return 0;
}

int gpp_cpu_slice_fwd(gpp_stream_t *s, const gpp_tensor_t *x, int64_t start, gpp_tensor_t *y,
                      gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = y->n * y->rows, c = y->cols, cx = x->cols;
    const float *xb = (const float *)x->data + start;
    for (int64_t r = 0; r < rows; r++)
        memcpy((float *)y->data + r * c, xb + r * cx, (size_t)c * sizeof(float));
    return 0;
}

int gpp_cpu_slice_bwd(gpp_stream_t *s, const gpp_tensor_t *dy, int64_t start, gpp_tensor_t *dx,
                      gpp_err_t *err)
{
    (void)s, (void)err;
    int64_t rows = dy->n * dy->rows, c = dy->cols, cx = dx->cols;
    float *dxb = (float *)dx->data + start;
    for (int64_t r = 0; r < rows; r++)
        gpp_cpu_acc(c, (const float *)dy->data + r * c, dxb + r * cx);
    return 0;
}
