/* gpp_cuda_eltwise: element-wise, reduction, loss and optimizer kernels of
 * the CUDA backend (launchers in gpp_cuda_kern.h). The element math is
 * kernels/gpp_math.h, shared with the CPU backend. Every reduction runs in
 * one fixed order (a fixed block shape, a fixed tree), so results are
 * bit-reproducible on a given GPU.
 * Written to gpp_cuda_port.h: nvcc compiles it for the device, and
 * kernels/cuda/emu/gpp_kern_emu.cc for the host emulation. */
#include "kernels/cuda/gpp_cuda_kern.h"
#include "kernels/cuda/gpp_cuda_port.h"

#define S_THREADS 256
/* Grid-stride loops: at most this many blocks (a few per SM of any current
 * GPU; the loop covers the rest). */
#define S_MAX_BLOCKS 4096

static unsigned s_blocks(int64_t n)
{
    int64_t b = (n + S_THREADS - 1) / S_THREADS;
    return (unsigned)(b < 1 ? 1 : b > S_MAX_BLOCKS ? S_MAX_BLOCKS : b);
}

#define S_FOR(i, n)                                                                                \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

/* ---- element-wise ---- */

/* dst[b][r][c] = bf16(src[b stride + r ld + c]), rounded to nearest even */
GPP_KERNEL void k_pack_bf16(int64_t batch, int64_t rows, int64_t cols, const float *src, int64_t ld,
                            int64_t stride, gpp_bf16 *dst)
{
    int64_t per = rows * cols;
    S_FOR(i, batch * per)
    {
        int64_t b = i / per, r = i % per / cols, c = i % cols;
        dst[i] = gpp_to_e<gpp_bf16>(src[b * stride + r * ld + c]);
    }
}
extern "C" cudaError_t gpp_cuk_pack_bf16(cudaStream_t st, int64_t batch, int64_t rows, int64_t cols,
                                         const float *src, int64_t ld, int64_t stride, void *dst)
{
    GPP_LAUNCH(s_blocks(batch * rows * cols), S_THREADS, 0, st, k_pack_bf16)
    (batch, rows, cols, src, ld, stride, (gpp_bf16 *)dst);
    return cudaGetLastError();
}

GPP_KERNEL void k_relu_fwd(int64_t n, const float *x, float *y)
{
    S_FOR(i, n) y[i] = gpp_math_relu(x[i]);
}
GPP_KERNEL void k_relu_bwd(int64_t n, const float *x, const float *dy, float *dx)
{
    S_FOR(i, n) dx[i] += gpp_math_relu_grad(x[i], dy[i]);
}
/* ERF: 1 the exact form (GPP_GELU_ERF), 0 the tanh approximation */
template <int ERF> GPP_KERNEL void k_gelu_fwd(int64_t n, const float *x, float *y)
{
    S_FOR(i, n) y[i] = ERF ? gpp_math_gelu_erf(x[i]) : gpp_math_gelu(x[i]);
}
template <int ERF> GPP_KERNEL void k_gelu_bwd(int64_t n, const float *x, const float *dy, float *dx)
{
    S_FOR(i, n) dx[i] += dy[i] * (ERF ? gpp_math_gelu_erf_deriv(x[i]) : gpp_math_gelu_deriv(x[i]));
}
GPP_KERNEL void k_add(int64_t n, const float *a, const float *b, float *y)
{
    S_FOR(i, n) y[i] = a[i] + b[i];
}
GPP_KERNEL void k_axpy(int64_t n, float alpha, const float *x, float *y)
{
    S_FOR(i, n) y[i] += alpha * x[i];
}

extern "C" cudaError_t gpp_cuk_relu_fwd(cudaStream_t st, int64_t n, const float *x, float *y)
{
    GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_relu_fwd)(n, x, y);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_relu_bwd(cudaStream_t st, int64_t n, const float *x, const float *dy,
                                        float *dx)
{
    GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_relu_bwd)(n, x, dy, dx);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_gelu_fwd(cudaStream_t st, int64_t n, int erf, const float *x,
                                        float *y)
{
    if (erf)
        GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_gelu_fwd<1>)(n, x, y);
    else
        GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_gelu_fwd<0>)(n, x, y);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_gelu_bwd(cudaStream_t st, int64_t n, int erf, const float *x,
                                        const float *dy, float *dx)
{
    if (erf)
        GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_gelu_bwd<1>)(n, x, dy, dx);
    else
        GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_gelu_bwd<0>)(n, x, dy, dx);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_add(cudaStream_t st, int64_t n, const float *a, const float *b,
                                   float *y)
{
    GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_add)(n, a, b, y);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_axpy(cudaStream_t st, int64_t n, float alpha, const float *x,
                                    float *y)
{
    GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_axpy)(n, alpha, x, y);
    return cudaGetLastError();
}

/* ---- column sums: a block of 32 columns x 8 row lanes; lane ty sums rows
 * ty, ty + 8, ... in order, then the 8 partials are added in lane order ---- */
#define S_CT 32
#define S_RT 8

GPP_KERNEL void k_colsum_acc(int64_t rows, int64_t cols, const float *x, int64_t ld, float *y)
{
    GPP_SHARED float part[S_RT][S_CT];
    int64_t j = (int64_t)blockIdx.x * S_CT + threadIdx.x;
    float acc = 0.0f;
    if (j < cols)
        for (int64_t r = threadIdx.y; r < rows; r += S_RT)
            acc += x[r * ld + j];
    part[threadIdx.y][threadIdx.x] = acc;
    GPP_SYNC();
    if (threadIdx.y == 0 && j < cols) {
        float t = 0.0f;
        for (int k = 0; k < S_RT; k++)
            t += part[k][threadIdx.x];
        y[j] += t;
    }
}

extern "C" cudaError_t gpp_cuk_colsum_acc(cudaStream_t st, int64_t rows, int64_t cols,
                                          const float *x, int64_t ld, float *y)
{
    dim3 blk(S_CT, S_RT);
    GPP_LAUNCH((unsigned)((cols + S_CT - 1) / S_CT), blk, 0, st, k_colsum_acc)
    (rows, cols, x, ld, y);
    return cudaGetLastError();
}

GPP_KERNEL void k_block_acc(int64_t rows, int64_t c, const float *src, int64_t lds, float *dst,
                            int64_t ldd)
{
    S_FOR(i, rows * c) dst[(i / c) * ldd + i % c] += src[(i / c) * lds + i % c];
}

extern "C" cudaError_t gpp_cuk_block_acc(cudaStream_t st, int64_t rows, int64_t c, const float *src,
                                         int64_t lds, float *dst, int64_t ldd)
{
    GPP_LAUNCH(s_blocks(rows * c), S_THREADS, 0, st, k_block_acc)(rows, c, src, lds, dst, ldd);
    return cudaGetLastError();
}

/* ---- single-block reductions in double: thread t sums t, t + 1024, ...;
 * then a fixed tree over the block ---- */
#define S_RED 1024

static GPP_DEV double s_block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    GPP_SYNC();
    for (int w = S_RED / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        GPP_SYNC();
    }
    return sh[0];
}

GPP_KERNEL void GPP_LAUNCH_BOUNDS(S_RED)
    k_mse(int64_t n, const float *x, const float *t, float *dx, float g, float *loss)
{
    GPP_SHARED double sh[S_RED];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += S_RED) {
        float d = x[i] - t[i];
        acc += (double)d * d;
        if (dx)
            dx[i] += g * d;
    }
    double total = s_block_sum(acc, sh);
    if (threadIdx.x == 0)
        *loss = (float)(total / (double)n);
}

GPP_KERNEL void GPP_LAUNCH_BOUNDS(S_RED) k_mean(int64_t n, const float *v, float *out)
{
    GPP_SHARED double sh[S_RED];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += S_RED)
        acc += v[i];
    double total = s_block_sum(acc, sh);
    if (threadIdx.x == 0)
        *out = (float)(total / (double)n);
}

extern "C" cudaError_t gpp_cuk_mse(cudaStream_t st, int64_t n, const float *x, const float *t,
                                   float *dx, float g, float *loss)
{
    GPP_LAUNCH(1, S_RED, 0, st, k_mse)(n, x, t, dx, g, loss);
    return cudaGetLastError();
}

extern "C" cudaError_t gpp_cuk_mean(cudaStream_t st, int64_t n, const float *v, float *out)
{
    GPP_LAUNCH(1, S_RED, 0, st, k_mean)(n, v, out);
    return cudaGetLastError();
}

/* Cross-entropy: one warp per row; lanes stride the classes, partial
 * results combine by a fixed butterfly. */
static GPP_DEV float s_warp_max(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v = fmaxf(v, gpp_shfl_xor(v, o));
    return v;
}
static GPP_DEV double s_warp_sum(double v)
{
    for (int o = 16; o > 0; o /= 2)
        v += gpp_shfl_xor(v, o);
    return v;
}

GPP_KERNEL void k_ce_rows(int64_t rows, int64_t c, const float *logits, const int32_t *labels,
                          float *dx, float g, float *row_loss, gpp_cuda_fault_t *fault)
{
    int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows)
        return;
    int32_t lab = labels[r];
    if (lab < 0 || lab >= c) {
        if (lane == 0) {
            if (atomicCAS(&fault->code, 0, GPP_CUDA_FAULT_CE_LABEL) == 0) {
                fault->value = lab;
                fault->a = r;
                fault->b = c;
            }
            row_loss[r] = 0.0f;
        }
        return;
    }
    const float *z = logits + r * c;
    float mx = -INFINITY;
    for (int64_t j = lane; j < c; j += 32)
        mx = fmaxf(mx, z[j]);
    mx = s_warp_max(mx);
    double sum = 0.0;
    for (int64_t j = lane; j < c; j += 32)
        sum += exp((double)(z[j] - mx));
    sum = s_warp_sum(sum);
    double lse = log(sum) + mx;
    if (lane == 0)
        row_loss[r] = (float)(lse - z[lab]);
    if (!dx)
        return;
    float *d = dx + r * c;
    for (int64_t j = lane; j < c; j += 32)
        d[j] += g * ((float)exp((double)z[j] - lse) - (j == lab ? 1.0f : 0.0f));
}

extern "C" cudaError_t gpp_cuk_ce_rows(cudaStream_t st, int64_t rows, int64_t c,
                                       const float *logits, const int32_t *labels, float *dx,
                                       float g, float *row_loss, gpp_cuda_fault_t *fault)
{
    int64_t threads = rows * 32;
    GPP_LAUNCH((unsigned)((threads + S_THREADS - 1) / S_THREADS), S_THREADS, 0, st, k_ce_rows)
    (rows, c, logits, labels, dx, g, row_loss, fault);
    return cudaGetLastError();
}

/* ---- optimizers ---- */

GPP_KERNEL void k_sgd(int64_t n, float lr, float wd, float mu, float *p, float *v, const float *g)
{
    S_FOR(i, n) gpp_math_sgd(lr, wd, mu, g[i], &p[i], v ? &v[i] : (float *)0);
}
GPP_KERNEL void k_adamw(int64_t n, gpp_math_adamw_t k, float *p, float *m, float *v, const float *g)
{
    S_FOR(i, n) gpp_math_adamw(&k, g[i], &p[i], &m[i], &v[i]);
}
GPP_KERNEL void k_sgd_table(int64_t rows, int64_t dim, float lr, float wd, float mu, float *table,
                            float *v, const int32_t *slot_map, const float *values)
{
    S_FOR(i, rows * dim)
    {
        int32_t slot = slot_map[i / dim];
        float g = slot < 0 ? 0.0f : values[(int64_t)slot * dim + i % dim];
        gpp_math_sgd(lr, wd, mu, g, &table[i], v ? &v[i] : (float *)0);
    }
}
GPP_KERNEL void k_sgd_rows(int64_t count, int64_t dim, float lr, float wd, float mu, float *table,
                           float *v, const int32_t *rows, const float *values)
{
    S_FOR(i, count * dim)
    {
        int64_t off = (int64_t)rows[i / dim] * dim + i % dim;
        gpp_math_sgd(lr, wd, mu, values[i], &table[off], v ? &v[off] : (float *)0);
    }
}
GPP_KERNEL void k_adamw_rows(int64_t count, int64_t dim, gpp_math_adamw_t k, float *table, float *m,
                             float *v, const int32_t *rows, const float *values)
{
    S_FOR(i, count * dim)
    {
        int64_t off = (int64_t)rows[i / dim] * dim + i % dim;
        gpp_math_adamw(&k, values[i], &table[off], &m[off], &v[off]);
    }
}

extern "C" cudaError_t gpp_cuk_sgd(cudaStream_t st, int64_t n, float lr, float wd, float mu,
                                   float *p, float *v, const float *g)
{
    GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_sgd)(n, lr, wd, mu, p, mu != 0.0f ? v : nullptr, g);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_adamw(cudaStream_t st, int64_t n, gpp_math_adamw_t k, float *p,
                                     float *m, float *v, const float *g)
{
    GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_adamw)(n, k, p, m, v, g);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_sgd_table(cudaStream_t st, int64_t table_rows, int64_t dim, float lr,
                                         float wd, float mu, float *table, float *v,
                                         const int32_t *slot_map, const float *values)
{
    int64_t n = table_rows * dim;
    GPP_LAUNCH(s_blocks(n), S_THREADS, 0, st, k_sgd_table)
    (table_rows, dim, lr, wd, mu, table, mu != 0.0f ? v : nullptr, slot_map, values);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_sgd_rows(cudaStream_t st, int64_t count, int64_t dim, float lr,
                                        float wd, float mu, float *table, float *v,
                                        const int32_t *rows, const float *values)
{
    GPP_LAUNCH(s_blocks(count * dim), S_THREADS, 0, st, k_sgd_rows)
    (count, dim, lr, wd, mu, table, mu != 0.0f ? v : nullptr, rows, values);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_adamw_rows(cudaStream_t st, int64_t count, int64_t dim,
                                          gpp_math_adamw_t k, float *table, float *m, float *v,
                                          const int32_t *rows, const float *values)
{
    GPP_LAUNCH(s_blocks(count * dim), S_THREADS, 0, st, k_adamw_rows)
    (count, dim, k, table, m, v, rows, values);
    return cudaGetLastError();
}
