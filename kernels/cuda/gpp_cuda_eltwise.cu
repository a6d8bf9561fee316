/* gpp_cuda_eltwise: element-wise, reduction, loss and optimizer kernels of
 * the CUDA backend (launchers in gpp_cuda_kern.h). The element math is
 * kernels/gpp_math.h, shared with the CPU backend. Every reduction runs in
 * one fixed order (a fixed block shape, a fixed tree), so results are
 * bit-reproducible on a given GPU. */
#include <cuda_bf16.h>

#include "kernels/cuda/gpp_cuda_kern.h"

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
__global__ void k_pack_bf16(int64_t batch, int64_t rows, int64_t cols, const float *src, int64_t ld,
                            int64_t stride, __nv_bfloat16 *dst)
{
    int64_t per = rows * cols;
    S_FOR(i, batch * per)
    {
        int64_t b = i / per, r = i % per / cols, c = i % cols;
        dst[i] = __float2bfloat16_rn(src[b * stride + r * ld + c]);
    }
}
extern "C" cudaError_t gpp_cuk_pack_bf16(cudaStream_t st, int64_t batch, int64_t rows,
                                         int64_t cols, const float *src, int64_t ld,
                                         int64_t stride, void *dst)
{
    k_pack_bf16<<<s_blocks(batch * rows * cols), S_THREADS, 0, st>>>(
        batch, rows, cols, src, ld, stride, (__nv_bfloat16 *)dst);
    return cudaGetLastError();
}

__global__ void k_relu_fwd(int64_t n, const float *x, float *y)
{
    S_FOR(i, n) y[i] = gpp_math_relu(x[i]);
}
__global__ void k_relu_bwd(int64_t n, const float *x, const float *dy, float *dx)
{
    S_FOR(i, n) dx[i] += gpp_math_relu_grad(x[i], dy[i]);
}
/* ERF: 1 the exact form (GPP_GELU_ERF), 0 the tanh approximation */
template <int ERF> __global__ void k_gelu_fwd(int64_t n, const float *x, float *y)
{
    S_FOR(i, n) y[i] = ERF ? gpp_math_gelu_erf(x[i]) : gpp_math_gelu(x[i]);
}
template <int ERF> __global__ void k_gelu_bwd(int64_t n, const float *x, const float *dy, float *dx)
{
    S_FOR(i, n) dx[i] += dy[i] * (ERF ? gpp_math_gelu_erf_deriv(x[i]) : gpp_math_gelu_deriv(x[i]));
}
__global__ void k_add(int64_t n, const float *a, const float *b, float *y)
{
    S_FOR(i, n) y[i] = a[i] + b[i];
}
__global__ void k_axpy(int64_t n, float alpha, const float *x, float *y)
{
    S_FOR(i, n) y[i] += alpha * x[i];
}

extern "C" cudaError_t gpp_cuk_relu_fwd(cudaStream_t st, int64_t n, const float *x, float *y)
{
    k_relu_fwd<<<s_blocks(n), S_THREADS, 0, st>>>(n, x, y);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_relu_bwd(cudaStream_t st, int64_t n, const float *x, const float *dy,
                                        float *dx)
{
    k_relu_bwd<<<s_blocks(n), S_THREADS, 0, st>>>(n, x, dy, dx);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_gelu_fwd(cudaStream_t st, int64_t n, int erf, const float *x,
                                        float *y)
{
    if (erf)
        k_gelu_fwd<1><<<s_blocks(n), S_THREADS, 0, st>>>(n, x, y);
    else
        k_gelu_fwd<0><<<s_blocks(n), S_THREADS, 0, st>>>(n, x, y);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_gelu_bwd(cudaStream_t st, int64_t n, int erf, const float *x,
                                        const float *dy, float *dx)
{
    if (erf)
        k_gelu_bwd<1><<<s_blocks(n), S_THREADS, 0, st>>>(n, x, dy, dx);
    else
        k_gelu_bwd<0><<<s_blocks(n), S_THREADS, 0, st>>>(n, x, dy, dx);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_add(cudaStream_t st, int64_t n, const float *a, const float *b,
                                   float *y)
{
    k_add<<<s_blocks(n), S_THREADS, 0, st>>>(n, a, b, y);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_axpy(cudaStream_t st, int64_t n, float alpha, const float *x,
                                    float *y)
{
    k_axpy<<<s_blocks(n), S_THREADS, 0, st>>>(n, alpha, x, y);
    return cudaGetLastError();
}

/* ---- column sums: a block of 32 columns x 8 row lanes; lane ty sums rows
 * ty, ty + 8, ... in order, then the 8 partials are added in lane order ---- */
#define S_CT 32
#define S_RT 8

__global__ void k_colsum_acc(int64_t rows, int64_t cols, const float *x, int64_t ld, float *y)
{
    __shared__ float part[S_RT][S_CT];
    int64_t j = (int64_t)blockIdx.x * S_CT + threadIdx.x;
    float acc = 0.0f;
    if (j < cols)
        for (int64_t r = threadIdx.y; r < rows; r += S_RT)
            acc += x[r * ld + j];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
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
    k_colsum_acc<<<(unsigned)((cols + S_CT - 1) / S_CT), blk, 0, st>>>(rows, cols, x, ld, y);
    return cudaGetLastError();
}

__global__ void k_block_acc(int64_t rows, int64_t c, const float *src, int64_t lds, float *dst,
                            int64_t ldd)
{
    S_FOR(i, rows * c) dst[(i / c) * ldd + i % c] += src[(i / c) * lds + i % c];
}

extern "C" cudaError_t gpp_cuk_block_acc(cudaStream_t st, int64_t rows, int64_t c, const float *src,
                                         int64_t lds, float *dst, int64_t ldd)
{
    k_block_acc<<<s_blocks(rows * c), S_THREADS, 0, st>>>(rows, c, src, lds, dst, ldd);
    return cudaGetLastError();
}

/* ---- single-block reductions in double: thread t sums t, t + 1024, ...;
 * then a fixed tree over the block ---- */
#define S_RED 1024

static __device__ double s_block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int w = S_RED / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    return sh[0];
}

__global__ void __launch_bounds__(S_RED)
    k_mse(int64_t n, const float *x, const float *t, float *dx, float g, float *loss)
{
    __shared__ double sh[S_RED];
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

__global__ void __launch_bounds__(S_RED) k_mean(int64_t n, const float *v, float *out)
{
    __shared__ double sh[S_RED];
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
    k_mse<<<1, S_RED, 0, st>>>(n, x, t, dx, g, loss);
    return cudaGetLastError();
}

extern "C" cudaError_t gpp_cuk_mean(cudaStream_t st, int64_t n, const float *v, float *out)
{
    k_mean<<<1, S_RED, 0, st>>>(n, v, out);
    return cudaGetLastError();
}

/* Cross-entropy: one warp per row; lanes stride the classes, partial
 * results combine by a fixed butterfly. */
static __device__ float s_warp_max(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
static __device__ double s_warp_sum(double v)
{
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__global__ void k_ce_rows(int64_t rows, int64_t c, const float *logits, const int32_t *labels,
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
    k_ce_rows<<<(unsigned)((threads + S_THREADS - 1) / S_THREADS), S_THREADS, 0, st>>>(
        rows, c, logits, labels, dx, g, row_loss, fault);
    return cudaGetLastError();
}

/* ---- optimizers ---- */

__global__ void k_sgd(int64_t n, float lr, float wd, float mu, float *p, float *v, const float *g)
{
    S_FOR(i, n) gpp_math_sgd(lr, wd, mu, g[i], &p[i], v ? &v[i] : (float *)0);
}
__global__ void k_adamw(int64_t n, gpp_math_adamw_t k, float *p, float *m, float *v, const float *g)
{
    S_FOR(i, n) gpp_math_adamw(&k, g[i], &p[i], &m[i], &v[i]);
}
__global__ void k_sgd_table(int64_t rows, int64_t dim, float lr, float wd, float mu, float *table,
                            float *v, const int32_t *slot_map, const float *values)
{
    S_FOR(i, rows * dim)
    {
        int32_t slot = slot_map[i / dim];
        float g = slot < 0 ? 0.0f : values[(int64_t)slot * dim + i % dim];
        gpp_math_sgd(lr, wd, mu, g, &table[i], v ? &v[i] : (float *)0);
    }
}
__global__ void k_sgd_rows(int64_t count, int64_t dim, float lr, float wd, float mu, float *table,
                           float *v, const int32_t *rows, const float *values)
{
    S_FOR(i, count * dim)
    {
        int64_t off = (int64_t)rows[i / dim] * dim + i % dim;
        gpp_math_sgd(lr, wd, mu, values[i], &table[off], v ? &v[off] : (float *)0);
    }
}
__global__ void k_adamw_rows(int64_t count, int64_t dim, gpp_math_adamw_t k, float *table, float *m,
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
    k_sgd<<<s_blocks(n), S_THREADS, 0, st>>>(n, lr, wd, mu, p, mu != 0.0f ? v : nullptr, g);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_adamw(cudaStream_t st, int64_t n, gpp_math_adamw_t k, float *p,
                                     float *m, float *v, const float *g)
{
    k_adamw<<<s_blocks(n), S_THREADS, 0, st>>>(n, k, p, m, v, g);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_sgd_table(cudaStream_t st, int64_t table_rows, int64_t dim, float lr,
                                         float wd, float mu, float *table, float *v,
                                         const int32_t *slot_map, const float *values)
{
    int64_t n = table_rows * dim;
    k_sgd_table<<<s_blocks(n), S_THREADS, 0, st>>>(table_rows, dim, lr, wd, mu, table,
                                                   mu != 0.0f ? v : nullptr, slot_map, values);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_sgd_rows(cudaStream_t st, int64_t count, int64_t dim, float lr,
                                        float wd, float mu, float *table, float *v,
                                        const int32_t *rows, const float *values)
{
    k_sgd_rows<<<s_blocks(count * dim), S_THREADS, 0, st>>>(count, dim, lr, wd, mu, table,
                                                            mu != 0.0f ? v : nullptr, rows, values);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_adamw_rows(cudaStream_t st, int64_t count, int64_t dim,
                                          gpp_math_adamw_t k, float *table, float *m, float *v,
                                          const int32_t *rows, const float *values)
{
    k_adamw_rows<<<s_blocks(count * dim), S_THREADS, 0, st>>>(count, dim, k, table, m, v, rows,
                                                              values);
    return cudaGetLastError();
}
