/* gpp_cuda_rows: row-wise kernels of the CUDA backend (layer norm, softmax,
 * the attention head permutes) and the embedding bag / sparse gradient
 * kernels (launchers in gpp_cuda_kern.h). Row statistics: one warp per row,
 * lanes stride the columns, partials combine by a fixed butterfly, in
 * double like the CPU backend.
 * Written to gpp_cuda_port.h: nvcc compiles it for the device, and
 * kernels/cuda/emu/gpp_kern_emu.cc for the host emulation. */
#include "kernels/cuda/gpp_cuda_kern.h"
#include "kernels/cuda/gpp_cuda_port.h"

#define S_THREADS 256
#define S_MAX_BLOCKS 4096
#define S_WARPS (S_THREADS / 32)

static unsigned s_blocks(int64_t n)
{
    int64_t b = (n + S_THREADS - 1) / S_THREADS;
    return (unsigned)(b < 1 ? 1 : b > S_MAX_BLOCKS ? S_MAX_BLOCKS : b);
}
static unsigned s_row_blocks(int64_t rows)
{
    return (unsigned)((rows + S_WARPS - 1) / S_WARPS);
}

#define S_FOR(i, n)                                                                                \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

static GPP_DEV double s_warp_sum(double v)
{
    for (int o = 16; o > 0; o /= 2)
        v += gpp_shfl_xor(v, o);
    return v;
}
static GPP_DEV float s_warp_max(float v)
{
    for (int o = 16; o > 0; o /= 2)
        v = fmaxf(v, gpp_shfl_xor(v, o));
    return v;
}

#define S_ROW_BEGIN(rows)                                                                          \
    int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;                             \
    int lane = threadIdx.x % 32;                                                                   \
    if (r >= (rows))                                                                               \
        return;

/* ---- layer norm ---- */

GPP_KERNEL void k_ln_fwd(int64_t rows, int64_t c, const float *x, const float *g, const float *b,
                         float *y, float *stash, float eps)
{
    S_ROW_BEGIN(rows)
    const float *xr = x + r * c;
    double acc = 0.0;
    for (int64_t j = lane; j < c; j += 32)
        acc += xr[j];
    double mean = s_warp_sum(acc) / (double)c;
    double acc2 = 0.0;
    for (int64_t j = lane; j < c; j += 32) {
        double d = xr[j] - mean;
        acc2 += d * d;
    }
    double var = s_warp_sum(acc2) / (double)c;
    float m = (float)mean, rstd = (float)(1.0 / sqrt(var + (double)eps));
    float *yr = y + r * c;
    for (int64_t j = lane; j < c; j += 32)
        yr[j] = (xr[j] - m) * rstd * g[j] + b[j];
    if (lane == 0) {
        stash[2 * r] = m;
        stash[2 * r + 1] = rstd;
    }
}

/* dx += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g */
GPP_KERNEL void k_ln_bwd_dx(int64_t rows, int64_t c, const float *x, const float *g,
                            const float *stash, const float *dy, float *dx)
{
    S_ROW_BEGIN(rows)
    const float *xr = x + r * c, *dyr = dy + r * c;
    float m = stash[2 * r], rstd = stash[2 * r + 1];
    double ad = 0.0, adx = 0.0;
    for (int64_t j = lane; j < c; j += 32) {
        float xhat = (xr[j] - m) * rstd, dxhat = dyr[j] * g[j];
        ad += dxhat;
        adx += (double)dxhat * xhat;
    }
    float mean_d = (float)(s_warp_sum(ad) / (double)c);
    float mean_dx = (float)(s_warp_sum(adx) / (double)c);
    float *dxr = dx + r * c;
    for (int64_t j = lane; j < c; j += 32) {
        float xhat = (xr[j] - m) * rstd;
        dxr[j] += rstd * (dyr[j] * g[j] - mean_d - xhat * mean_dx);
    }
}

/* dgain and dbias in two passes (gpp_cuda_kern.h, gpp_cuk_chunks): block
 * (column tile, row chunk) sums its chunk's rows, 32 columns x 8 row lanes
 * combined in lane order, into part[0 / 1][chunk][c]; then
 * gpp_cuk_chunks_sum adds the chunks in order. */
#define S_CT 32
#define S_RT 8
GPP_KERNEL void k_ln_bwd_part(int64_t rows, int64_t c, int64_t chunk, const float *x,
                              const float *stash, const float *dy, float *part)
{
    GPP_SHARED float pg[S_RT][S_CT], pb[S_RT][S_CT];
    int64_t j = (int64_t)blockIdx.x * S_CT + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float ag = 0.0f, ab = 0.0f;
    if (j < c)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += S_RT) {
            float d = dy[r * c + j];
            ag += d * ((x[r * c + j] - stash[2 * r]) * stash[2 * r + 1]);
            ab += d;
        }
    pg[threadIdx.y][threadIdx.x] = ag;
    pb[threadIdx.y][threadIdx.x] = ab;
    GPP_SYNC();
    if (threadIdx.y == 0 && j < c) {
        float tg = 0.0f, tb = 0.0f;
        for (int k = 0; k < S_RT; k++) {
            tg += pg[k][threadIdx.x];
            tb += pb[k][threadIdx.x];
        }
        part[(int64_t)blockIdx.y * c + j] = tg;
        part[((int64_t)gridDim.y + blockIdx.y) * c + j] = tb;
    }
}

extern "C" cudaError_t gpp_cuk_layernorm_fwd(cudaStream_t st, int64_t rows, int64_t c,
                                             const float *x, const float *g, const float *b,
                                             float *y, float *stash, float eps)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_ln_fwd)(rows, c, x, g, b, y, stash, eps);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_layernorm_bwd_dx(cudaStream_t st, int64_t rows, int64_t c,
                                                const float *x, const float *g, const float *stash,
                                                const float *dy, float *dx)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_ln_bwd_dx)(rows, c, x, g, stash, dy, dx);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_layernorm_bwd_params(cudaStream_t st, int64_t rows, int64_t c,
                                                    const float *x, const float *stash,
                                                    const float *dy, float *dg, float *db,
                                                    float *part, int64_t part_floats)
{
    int64_t chunks = gpp_cuk_chunks(rows, c, 2, part_floats);
    if (chunks < 1 || rows < 1)
        return chunks < 1 ? cudaErrorInvalidValue : cudaSuccess;
    int64_t chunk = (rows + chunks - 1) / chunks;
    dim3 blk(S_CT, S_RT), grid((unsigned)((c + S_CT - 1) / S_CT), (unsigned)chunks);
    GPP_LAUNCH(grid, blk, 0, st, k_ln_bwd_part)(rows, c, chunk, x, stash, dy, part);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    return gpp_cuk_chunks_sum(st, c, chunks, part, dg, db);
}

/* ---- softmax over rows, in place (exp: gpp_math_expf, as on the CPU) ---- */

/* the largest of a row's first cols entries, in every lane of its warp */
static GPP_DEV float s_row_max(const float *row, int64_t cols, int lane)
{
    float mx = -INFINITY;
    for (int64_t j = lane; j < cols; j += 32)
        mx = fmaxf(mx, row[j]);
    return s_warp_max(mx);
}

GPP_KERNEL void k_softmax_fwd(int64_t rows, int64_t stride, float *a, int causal)
{
    S_ROW_BEGIN(rows)
    float *ar = a + r * stride;
    /* causal: rows are [batch][seq] over seq keys; query r % seq keeps keys
     * 0..r % seq, the rest (scores taken as -inf) become 0 */
    int64_t cols = causal ? r % stride + 1 : stride;
    for (int64_t j = cols + lane; j < stride; j += 32)
        ar[j] = 0.0f;
    float mx = s_row_max(ar, cols, lane);
    double acc = 0.0;
    for (int64_t j = lane; j < cols; j += 32) {
        float e = gpp_math_expf(ar[j] - mx);
        ar[j] = e;
        acc += e;
    }
    float inv = (float)(1.0 / s_warp_sum(acc));
    for (int64_t j = lane; j < cols; j += 32)
        ar[j] *= inv;
}

GPP_KERNEL void k_softmax_bwd(int64_t rows, int64_t cols, const float *p, float *dp)
{
    S_ROW_BEGIN(rows)
    const float *pr = p + r * cols;
    float *dr = dp + r * cols;
    double acc = 0.0;
    for (int64_t j = lane; j < cols; j += 32)
        acc += (double)dr[j] * pr[j];
    float d = (float)s_warp_sum(acc);
    for (int64_t j = lane; j < cols; j += 32)
        dr[j] = pr[j] * (dr[j] - d);
}

extern "C" cudaError_t gpp_cuk_softmax_fwd(cudaStream_t st, int64_t rows, int64_t cols, float *a,
                                           int causal)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_softmax_fwd)(rows, cols, a, causal);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_softmax_bwd(cudaStream_t st, int64_t rows, int64_t cols,
                                           const float *p, float *dp)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_softmax_bwd)(rows, cols, p, dp);
    return cudaGetLastError();
}

/* Softmax of fp32 scores s into bf16 probabilities p (another buffer):
 * the same max, exponentials and sum as k_softmax_fwd, each probability
 * e * inv rounded once to bf16 (the exponential is taken again in the
 * last pass instead of being kept: a pass of 4-byte writes and reads
 * fewer). */
GPP_KERNEL void k_softmax_fwd_bf16(int64_t rows, int64_t stride, const float *s, gpp_bf16 *p,
                                   int causal)
{
    S_ROW_BEGIN(rows)
    const float *sr = s + r * stride;
    gpp_bf16 *pr = p + r * stride;
    int64_t cols = causal ? r % stride + 1 : stride;
    for (int64_t j = cols + lane; j < stride; j += 32)
        pr[j] = gpp_to_e<gpp_bf16>(0.0f);
    float mx = s_row_max(sr, cols, lane);
    double acc = 0.0;
    for (int64_t j = lane; j < cols; j += 32)
        acc += gpp_math_expf(sr[j] - mx);
    float inv = (float)(1.0 / s_warp_sum(acc));
    for (int64_t j = lane; j < cols; j += 32)
        pr[j] = gpp_to_e<gpp_bf16>(gpp_math_expf(sr[j] - mx) * inv);
}

/* ds (bf16) = p (dp - sum_j dp_j p_j) with p in bf16 and dp in fp32 */
GPP_KERNEL void k_softmax_bwd_bf16(int64_t rows, int64_t cols, const gpp_bf16 *p, const float *dp,
                                   gpp_bf16 *ds)
{
    S_ROW_BEGIN(rows)
    const gpp_bf16 *pr = p + r * cols;
    const float *dr = dp + r * cols;
    gpp_bf16 *sr = ds + r * cols;
    double acc = 0.0;
    for (int64_t j = lane; j < cols; j += 32)
        acc += (double)dr[j] * gpp_from_e(pr[j]);
    float d = (float)s_warp_sum(acc);
    for (int64_t j = lane; j < cols; j += 32)
        sr[j] = gpp_to_e<gpp_bf16>(gpp_from_e(pr[j]) * (dr[j] - d));
}

extern "C" cudaError_t gpp_cuk_softmax_fwd_bf16(cudaStream_t st, int64_t rows, int64_t cols,
                                                const float *s, void *p, int causal)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_softmax_fwd_bf16)
    (rows, cols, s, (gpp_bf16 *)p, causal);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_softmax_bwd_bf16(cudaStream_t st, int64_t rows, int64_t cols,
                                                const void *p, const float *dp, void *ds)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_softmax_bwd_bf16)
    (rows, cols, (const gpp_bf16 *)p, dp, (gpp_bf16 *)ds);
    return cudaGetLastError();
}

/* ---- natural <-> head-major: element (part, i, h, s, d) ----
 * D: the element type of dst (float, or gpp_bf16 for the bf16 core's
 * operands, head-major) */
template <typename D>
GPP_KERNEL void k_heads_permute(int64_t n, int64_t seq, int64_t heads, int64_t dh, int parts,
                                const float *src, D *dst, int to_heads)
{
    int64_t hid = heads * dh, total = (int64_t)parts * n * seq * hid;
    S_FOR(i, total)
    {
        /* i indexes the head-major layout */
        int64_t d = i % dh, rest = i / dh;
        int64_t s = rest % seq;
        rest /= seq;
        int64_t h = rest % heads;
        rest /= heads;
        int64_t smp = rest % n, part = rest / n;
        int64_t nat = ((smp * seq + s) * parts + part) * hid + h * dh + d;
        if (to_heads)
            dst[i] = gpp_to_e<D>(src[nat]);
        else
            dst[nat] = gpp_to_e<D>(src[i]);
    }
}

extern "C" cudaError_t gpp_cuk_heads_permute(cudaStream_t st, int64_t n, int64_t seq, int64_t heads,
                                             int64_t dh, int parts, const float *src, float *dst,
                                             int to_heads)
{
    int64_t total = (int64_t)parts * n * seq * heads * dh;
    GPP_LAUNCH(s_blocks(total), S_THREADS, 0, st, k_heads_permute<float>)
    (n, seq, heads, dh, parts, src, dst, to_heads);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_heads_to_bf16(cudaStream_t st, int64_t n, int64_t seq, int64_t heads,
                                             int64_t dh, int parts, const float *src, void *dst)
{
    int64_t total = (int64_t)parts * n * seq * heads * dh;
    GPP_LAUNCH(s_blocks(total), S_THREADS, 0, st, k_heads_permute<gpp_bf16>)
    (n, seq, heads, dh, parts, src, (gpp_bf16 *)dst, 1);
    return cudaGetLastError();
}

/* ---- embedding bag: thread per (bag, column), the bag's rows in order ---- */
GPP_KERNEL void k_embedding_fwd(int64_t bags, int64_t bag, int64_t dim, int64_t table_rows,
                                const int32_t *idx, const float *table, float *y,
                                gpp_cuda_fault_t *fault)
{
    S_FOR(i, bags * dim)
    {
        int64_t b = i / dim, j = i % dim;
        float acc = 0.0f;
        for (int64_t k = 0; k < bag; k++) {
            int32_t r = idx[b * bag + k];
            if (r < 0 || r >= table_rows) {
                if (j == 0 && atomicCAS(&fault->code, 0, GPP_CUDA_FAULT_EMB_INDEX) == 0) {
                    fault->value = r;
                    fault->a = b;
                    fault->b = k;
                    fault->c = table_rows;
                }
                break;
            }
            acc += table[(int64_t)r * dim + j];
        }
        y[i] = acc;
    }
}

extern "C" cudaError_t gpp_cuk_embedding_fwd(cudaStream_t st, int64_t bags, int64_t bag,
                                             int64_t dim, int64_t table_rows, const int32_t *idx,
                                             const float *table, float *y, gpp_cuda_fault_t *fault)
{
    GPP_LAUNCH(s_blocks(bags * dim), S_THREADS, 0, st, k_embedding_fwd)
    (bags, bag, dim, table_rows, idx, table, y, fault);
    return cudaGetLastError();
}

/* ---- sparse gradient: thread per (group, column), pairs in order ---- */
GPP_KERNEL void k_sparse_accum(int64_t groups, int64_t dim, const int32_t *plan,
                               const float *values, int64_t div, int64_t stride, float *gvalues,
                               int32_t *slot_map, int32_t *rows)
{
    const int32_t *off = plan, *pair = off + groups + 1;
    const int32_t *slot = pair + off[groups], *row = slot + groups, *fresh = row + groups;
    S_FOR(i, groups * dim)
    {
        int64_t gi = i / dim, j = i % dim;
        float *dst = gvalues + (int64_t)slot[gi] * dim + j;
        float acc = fresh[gi] ? 0.0f : *dst;
        for (int32_t q = off[gi]; q < off[gi + 1]; q++)
            acc += values[(pair[q] / div) * stride + j];
        *dst = acc;
        if (j == 0 && fresh[gi]) {
            slot_map[row[gi]] = slot[gi];
            rows[slot[gi]] = row[gi];
        }
    }
}

GPP_KERNEL void k_sparse_clear(int64_t count, const int32_t *rows, int32_t *slot_map)
{
    S_FOR(k, count) slot_map[rows[k]] = -1;
}

extern "C" cudaError_t gpp_cuk_sparse_accum(cudaStream_t st, int64_t groups, int64_t dim,
                                            const int32_t *plan, const float *values, int64_t div,
                                            int64_t stride, float *gvalues, int32_t *slot_map,
                                            int32_t *rows)
{
    GPP_LAUNCH(s_blocks(groups * dim), S_THREADS, 0, st, k_sparse_accum)
    (groups, dim, plan, values, div, stride, gvalues, slot_map, rows);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_sparse_clear(cudaStream_t st, int64_t count, const int32_t *rows,
                                            int32_t *slot_map)
{
    GPP_LAUNCH(s_blocks(count), S_THREADS, 0, st, k_sparse_clear)(count, rows, slot_map);
    return cudaGetLastError();
}
