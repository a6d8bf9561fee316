/* gpp_cuda_eltwise: element-wise, reduction, loss and optimizer kernels of
 * the CUDA backend (launchers in gpp_cuda_kern.h). The element math is
 * kernels/gpp_math.h, shared with the CPU backend. Every reduction runs in
 * one fixed order (a fixed block shape, a fixed tree), so results are
 * bit-reproducible on a given GPU.
 * Written to gpp_cuda_port.h: nvcc compiles it for the device, and
 * tests/emu/gpp_kern_emu.cc for the host emulation. */
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
/* Rows several to a block (gpp_cuk_rows_shape): row r on threadIdx.y */
#define S_ROWS(r, n)                                                                               \
    for (int64_t r = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; r < (n);                      \
         r += (int64_t)gridDim.x * blockDim.y)

/* ---- element-wise ---- */

/* dst[b][r][c] = bf16(src[b stride + r ld + c]), rounded to nearest even.
 * A block takes a row at a time (grid-stride over the batch's rows, row R =
 * b rows + r), its threads along the row; with VEC each thread converts 8
 * columns: two 16-byte loads, one 16-byte store (src rows and dst 16-byte
 * aligned, cols a multiple of 8). One 64-bit division a row: the first
 * version computed b, r and c with three 64-bit divisions per element,
 * which the GPU does in software (dozens of instructions each), so the
 * pass was bound by them, not by memory; on the H100 (2026-11-25) packing
 * cost more than the bf16 products saved. */
template <int VEC>
GPP_KERNEL void k_pack_bf16(int64_t nrows, int64_t rows, int64_t cols, const float *src, int64_t ld,
                            int64_t stride, gpp_bf16 *dst)
{
    /* a row's columns over blockIdx.y's blocks too (few, long rows) */
    const int64_t t0 = (int64_t)blockIdx.y * blockDim.x + threadIdx.x,
                  step = (int64_t)gridDim.y * blockDim.x;
    for (int64_t R = blockIdx.x; R < nrows; R += gridDim.x) {
        const float *s = src + R / rows * stride + R % rows * ld;
        gpp_bf16 *d = dst + R * cols;
        if (VEC)
            for (int64_t c = 8 * t0; c < cols; c += 8 * step)
                gpp_st8_bf16(d + c, gpp_ld4(s + c), gpp_ld4(s + c + 4));
        else
            for (int64_t c = t0; c < cols; c += step)
                d[c] = gpp_to_e<gpp_bf16>(s[c]);
    }
}
extern "C" cudaError_t gpp_cuk_pack_bf16(cudaStream_t st, int64_t batch, int64_t rows, int64_t cols,
                                         const float *src, int64_t ld, int64_t stride, void *dst)
{
    int64_t nrows = batch * rows;
    if (nrows <= 0 || cols <= 0)
        return cudaSuccess;
    const int vec = cols % 8 == 0 && ld % 4 == 0 && (batch == 1 || stride % 4 == 0) &&
                    ((uintptr_t)src | (uintptr_t)dst) % 16 == 0;
    int64_t lanes = vec ? cols / 8 : cols; /* threads a row can use */
    unsigned threads = gpp_cuk_row_threads(lanes);
    /* rows on x; a row's columns split over y where there are fewer than
     * 512 rows for a row's many threads (CANDLE's input: 64 rows of 29120) */
    int64_t per_row = (lanes + threads - 1) / threads, want_y = (512 + nrows - 1) / nrows;
    dim3 blocks(gpp_cuk_row_blocks(nrows), (unsigned)(want_y < per_row ? want_y : per_row));
    if (vec) {
        GPP_LAUNCH(blocks, threads, 0, st, k_pack_bf16<1>)
        (nrows, rows, cols, src, ld, stride, (gpp_bf16 *)dst);
    } else {
        GPP_LAUNCH(blocks, threads, 0, st, k_pack_bf16<0>)
        (nrows, rows, cols, src, ld, stride, (gpp_bf16 *)dst);
    }
    return cudaGetLastError();
}

/* Element-wise maps y[i] = f(a[i], b[i], y[i]) (b may be absent; RY: f
 * reads y, as a gradient accumulation does), each of a, b, y fp32 or bf16
 * (gpp_cuk_t; f computes in fp32). Where a, b and y are aligned for it a
 * thread moves 4 elements per step with one access each (16 bytes of fp32,
 * 8 of bf16), and the n % 4 left run scalar; otherwise all run scalar.
 * Each element gets the same formula either way, so the results do not
 * depend on the path. The type tests are uniform over the grid. */
template <class F, int RY>
GPP_KERNEL void k_map(int64_t n, F f, gpp_cuk_t a, gpp_cuk_t b, gpp_cuk_t y)
{
    S_FOR(i, n)
    gpp_stt(y, i, f(gpp_ldt(a, i), b.p ? gpp_ldt(b, i) : 0.0f, RY ? gpp_ldt(y, i) : 0.0f));
}
template <class F, int RY>
GPP_KERNEL void k_map4(int64_t n4, F f, gpp_cuk_t a, gpp_cuk_t b, gpp_cuk_t y)
{
    S_FOR(i, n4)
    {
        gpp_f4 va = gpp_ldt4(a, 4 * i), vb = {0.0f, 0.0f, 0.0f, 0.0f}, vy = vb;
        if (b.p)
            vb = gpp_ldt4(b, 4 * i);
        if (RY)
            vy = gpp_ldt4(y, 4 * i);
        vy.x = f(va.x, vb.x, vy.x);
        vy.y = f(va.y, vb.y, vy.y);
        vy.z = f(va.z, vb.z, vy.z);
        vy.w = f(va.w, vb.w, vy.w);
        gpp_stt4(y, 4 * i, vy);
    }
}
template <int RY, class F>
static cudaError_t s_map(cudaStream_t st, int64_t n, F f, gpp_cuk_t a, gpp_cuk_t b, gpp_cuk_t y)
{
    int64_t n4 = gpp_cuk_al4(a) && gpp_cuk_al4(b) && gpp_cuk_al4(y) ? n / 4 : 0;
    if (n4 > 0)
        GPP_LAUNCH(s_blocks(n4), S_THREADS, 0, st, k_map4<F, RY>)(n4, f, a, b, y);
    if (n > 4 * n4)
        GPP_LAUNCH(s_blocks(n - 4 * n4), S_THREADS, 0, st, k_map<F, RY>)
    (n - 4 * n4, f, gpp_cuk_at(a, 4 * n4), gpp_cuk_at(b, 4 * n4), gpp_cuk_at(y, 4 * n4));
    return cudaGetLastError();
}

struct s_relu_fwd_f {
    GPP_DEV float operator()(float x, float, float) const
    {
        return gpp_math_relu(x);
    }
};
struct s_relu_bwd_f { /* a = x, b = dy, y = dx */
    GPP_DEV float operator()(float x, float dy, float dx) const
    {
        return dx + gpp_math_relu_grad(x, dy);
    }
};
/* ERF: 1 the exact form (GPP_GELU_ERF), 0 the tanh approximation */
template <int ERF> struct s_gelu_fwd_f {
    GPP_DEV float operator()(float x, float, float) const
    {
        return ERF ? gpp_math_gelu_erf(x) : gpp_math_gelu(x);
    }
};
template <int ERF> struct s_gelu_bwd_f {
    GPP_DEV float operator()(float x, float dy, float dx) const
    {
        return dx + dy * (ERF ? gpp_math_gelu_erf_deriv(x) : gpp_math_gelu_deriv(x));
    }
};
struct s_add_f {
    GPP_DEV float operator()(float a, float b, float) const
    {
        return a + b;
    }
};
struct s_axpy_f { /* a = x */
    float alpha;
    GPP_DEV float operator()(float x, float, float y) const
    {
        return y + alpha * x;
    }
};

static const gpp_cuk_t s_none = {nullptr, 0};

extern "C" cudaError_t gpp_cuk_relu_fwd(cudaStream_t st, int64_t n, gpp_cuk_t x, gpp_cuk_t y)
{
    return s_map<0>(st, n, s_relu_fwd_f{}, x, s_none, y);
}
extern "C" cudaError_t gpp_cuk_relu_bwd(cudaStream_t st, int64_t n, gpp_cuk_t x, gpp_cuk_t dy,
                                        gpp_cuk_t dx)
{
    return s_map<1>(st, n, s_relu_bwd_f{}, x, dy, dx);
}
extern "C" cudaError_t gpp_cuk_gelu_fwd(cudaStream_t st, int64_t n, int erf, gpp_cuk_t x,
                                        gpp_cuk_t y)
{
    return erf ? s_map<0>(st, n, s_gelu_fwd_f<1>{}, x, s_none, y)
               : s_map<0>(st, n, s_gelu_fwd_f<0>{}, x, s_none, y);
}
extern "C" cudaError_t gpp_cuk_gelu_bwd(cudaStream_t st, int64_t n, int erf, gpp_cuk_t x,
                                        gpp_cuk_t dy, gpp_cuk_t dx)
{
    return erf ? s_map<1>(st, n, s_gelu_bwd_f<1>{}, x, dy, dx)
               : s_map<1>(st, n, s_gelu_bwd_f<0>{}, x, dy, dx);
}
extern "C" cudaError_t gpp_cuk_add(cudaStream_t st, int64_t n, gpp_cuk_t a, gpp_cuk_t b,
                                   gpp_cuk_t y)
{
    return s_map<0>(st, n, s_add_f{}, a, b, y);
}
extern "C" cudaError_t gpp_cuk_axpy(cudaStream_t st, int64_t n, float alpha, gpp_cuk_t x,
                                    gpp_cuk_t y)
{
    return s_map<1>(st, n, s_axpy_f{alpha}, x, s_none, y);
}

/* ---- column sums in two passes (gpp_cuda_kern.h, gpp_cuk_chunks): block
 * (column tile, row chunk) has 32 columns x 8 row lanes; lane ty sums its
 * chunk's rows ty, ty + 8, ... in order, the 8 partials are added in lane
 * order into part[chunk][cols]; then a thread per column adds the chunks in
 * order ---- */
#define S_CT 32
#define S_RT 8

GPP_KERNEL void k_colsum_part(int64_t rows, int64_t cols, int64_t chunk, gpp_cuk_t x, int64_t ld,
                              float *part)
{
    GPP_SHARED float acc_t[S_RT][S_CT];
    int64_t j = (int64_t)blockIdx.x * S_CT + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float acc = 0.0f;
    if (j < cols)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += S_RT)
            acc += gpp_ldt(x, r * ld + j);
    acc_t[threadIdx.y][threadIdx.x] = acc;
    GPP_SYNC();
    if (threadIdx.y == 0 && j < cols) {
        float t = 0.0f;
        for (int k = 0; k < S_RT; k++)
            t += acc_t[k][threadIdx.x];
        part[(int64_t)blockIdx.y * cols + j] = t;
    }
}
/* y0[j] += sum_k part[k cols + j], y1[j] += sum_k part[(chunks + k) cols + j]
 * (k < chunks, in order); y1 NULL: one sum, y0 NULL: its sum unused */
GPP_KERNEL void k_chunks_sum(int64_t cols, int64_t chunks, const float *part, float *y0, float *y1)
{
    S_FOR(j, cols)
    {
        float t0 = 0.0f, t1 = 0.0f;
        for (int64_t k = 0; k < chunks; k++) {
            t0 += part[k * cols + j];
            if (y1)
                t1 += part[(chunks + k) * cols + j];
        }
        if (y0)
            y0[j] += t0;
        if (y1)
            y1[j] += t1;
    }
}
extern "C" cudaError_t gpp_cuk_chunks_sum(cudaStream_t st, int64_t cols, int64_t chunks,
                                          const float *part, float *y0, float *y1)
{
    GPP_LAUNCH(s_blocks(cols), S_THREADS, 0, st, k_chunks_sum)(cols, chunks, part, y0, y1);
    return cudaGetLastError();
}

extern "C" cudaError_t gpp_cuk_colsum_acc(cudaStream_t st, int64_t rows, int64_t cols, gpp_cuk_t x,
                                          int64_t ld, float *y, float *part, int64_t part_floats)
{
    int64_t chunks = gpp_cuk_chunks(rows, cols, 1, part_floats);
    if (chunks < 1 || rows < 1 || cols < 1)
        return chunks < 1 && cols > 0 ? cudaErrorInvalidValue : cudaSuccess;
    int64_t chunk = (rows + chunks - 1) / chunks;
    dim3 blk(S_CT, S_RT), grid((unsigned)((cols + S_CT - 1) / S_CT), (unsigned)chunks);
    GPP_LAUNCH(grid, blk, 0, st, k_colsum_part)(rows, cols, chunk, x, ld, part);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    return gpp_cuk_chunks_sum(st, cols, chunks, part, y, NULL);
}

/* dst[r][j] += src[r][j] for r < rows, j < c: a block per row at a time,
 * its threads along the row (no 64-bit division per element) */
GPP_KERNEL void k_bias_rows(int64_t rows, int64_t cols, const float *b, gpp_cuk_t y)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
        for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
            gpp_stt(y, r * cols + j, gpp_ldt(y, r * cols + j) + b[j]);
}
extern "C" cudaError_t gpp_cuk_bias_rows(cudaStream_t st, int64_t rows, int64_t cols,
                                         const float *b, gpp_cuk_t y)
{
    if (rows <= 0 || cols <= 0)
        return cudaSuccess;
    GPP_LAUNCH(gpp_cuk_row_blocks(rows), gpp_cuk_row_threads(cols), 0, st, k_bias_rows)
    (rows, cols, b, y);
    return cudaGetLastError();
}

template <int ACC>
GPP_KERNEL void k_block(int64_t rows, int64_t c, gpp_cuk_t src, int64_t lds, gpp_cuk_t dst,
                        int64_t ldd)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x)
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
            gpp_stt(dst, r * ldd + j,
                    (ACC ? gpp_ldt(dst, r * ldd + j) : 0.0f) + gpp_ldt(src, r * lds + j));
}

template <int ACC>
static cudaError_t s_block(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t src, int64_t lds,
                           gpp_cuk_t dst, int64_t ldd)
{
    if (rows <= 0 || c <= 0)
        return cudaSuccess;
    GPP_LAUNCH(gpp_cuk_row_blocks(rows), gpp_cuk_row_threads(c), 0, st, k_block<ACC>)
    (rows, c, src, lds, dst, ldd);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_block_acc(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t src,
                                         int64_t lds, gpp_cuk_t dst, int64_t ldd)
{
    return s_block<1>(st, rows, c, src, lds, dst, ldd);
}
extern "C" cudaError_t gpp_cuk_block_copy(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t src,
                                          int64_t lds, gpp_cuk_t dst, int64_t ldd)
{
    return s_block<0>(st, rows, c, src, lds, dst, ldd);
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
    k_mse(int64_t n, gpp_cuk_t x, const float *t, gpp_cuk_t dx, float g, float *loss)
{
    GPP_SHARED double sh[S_RED];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < n; i += S_RED) {
        float d = gpp_ldt(x, i) - t[i];
        acc += (double)d * d;
        if (dx.p)
            gpp_stt(dx, i, gpp_ldt(dx, i) + g * d);
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

extern "C" cudaError_t gpp_cuk_mse(cudaStream_t st, int64_t n, gpp_cuk_t x, const float *t,
                                   gpp_cuk_t dx, float g, float *loss)
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

GPP_KERNEL void k_ce_rows(int64_t rows, int64_t c, gpp_cuk_t logits, const int32_t *labels,
                          gpp_cuk_t dx, float g, float *row_loss, gpp_cuda_fault_t *fault)
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
    const int64_t o = r * c; /* the row's first element */
    float mx = -INFINITY;
    for (int64_t j = lane; j < c; j += 32)
        mx = fmaxf(mx, gpp_ldt(logits, o + j));
    mx = s_warp_max(mx);
    double sum = 0.0;
    for (int64_t j = lane; j < c; j += 32)
        sum += exp((double)(gpp_ldt(logits, o + j) - mx));
    sum = s_warp_sum(sum);
    double lse = log(sum) + mx;
    if (lane == 0)
        row_loss[r] = (float)(lse - gpp_ldt(logits, o + lab));
    if (!dx.p)
        return;
    for (int64_t j = lane; j < c; j += 32)
        gpp_stt(dx, o + j,
                gpp_ldt(dx, o + j) + g * ((float)exp((double)gpp_ldt(logits, o + j) - lse) -
                                          (j == lab ? 1.0f : 0.0f)));
}

extern "C" cudaError_t gpp_cuk_ce_rows(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t logits,
                                       const int32_t *labels, gpp_cuk_t dx, float g,
                                       float *row_loss, gpp_cuda_fault_t *fault)
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
GPP_KERNEL void k_sgd_rows(int64_t bound, const int32_t *count, int64_t dim, float lr, float wd,
                           float mu, float *table, float *v, const int32_t *rows,
                           const float *values)
{
    int64_t c = *count, nr = bound < c ? bound : c;
    S_ROWS(r, nr)
    {
        int64_t off = (int64_t)rows[r] * dim;
        for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
            gpp_math_sgd(lr, wd, mu, values[r * dim + j], &table[off + j],
                         v ? &v[off + j] : (float *)0);
    }
}
GPP_KERNEL void k_adamw_rows(int64_t bound, const int32_t *count, int64_t dim, gpp_math_adamw_t k,
                             float *table, float *m, float *v, const int32_t *rows,
                             const float *values)
{
    int64_t c = *count, nr = bound < c ? bound : c;
    S_ROWS(r, nr)
    {
        int64_t off = (int64_t)rows[r] * dim;
        for (int64_t j = threadIdx.x; j < dim; j += blockDim.x)
            gpp_math_adamw(&k, values[r * dim + j], &table[off + j], &m[off + j], &v[off + j]);
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
extern "C" cudaError_t gpp_cuk_sgd_rows(cudaStream_t st, int64_t bound, const int32_t *count,
                                        int64_t dim, float lr, float wd, float mu, float *table,
                                        float *v, const int32_t *rows, const float *values)
{
    unsigned bx, by, blocks;
    gpp_cuk_rows_shape(bound, dim, &bx, &by, &blocks);
    GPP_LAUNCH(blocks > 0 ? blocks : 1, dim3(bx, by), 0, st, k_sgd_rows)
    (bound, count, dim, lr, wd, mu, table, mu != 0.0f ? v : nullptr, rows, values);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_adamw_rows(cudaStream_t st, int64_t bound, const int32_t *count,
                                          int64_t dim, gpp_math_adamw_t k, float *table, float *m,
                                          float *v, const int32_t *rows, const float *values)
{
    unsigned bx, by, blocks;
    gpp_cuk_rows_shape(bound, dim, &bx, &by, &blocks);
    GPP_LAUNCH(blocks > 0 ? blocks : 1, dim3(bx, by), 0, st, k_adamw_rows)
    (bound, count, dim, k, table, m, v, rows, values);
    return cudaGetLastError();
}
