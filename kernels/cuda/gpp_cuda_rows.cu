/* gpp_cuda_rows: row-wise kernels of the CUDA backend (layer norm, softmax,
 * the attention head permutes) and the embedding bag / sparse gradient
 * kernels (launchers in gpp_cuda_kern.h). Row statistics: one warp per row,
 * lanes stride the columns, partials combine by a fixed butterfly, in
 * double like the CPU backend.
 * Written to gpp_cuda_port.h: nvcc compiles it for the device, and
 * tests/emu/gpp_kern_emu.cc for the host emulation. */
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

GPP_KERNEL void k_ln_fwd(int64_t rows, int64_t c, gpp_cuk_t x, const float *g, const float *b,
                         gpp_cuk_t y, float *stash, float eps)
{
    S_ROW_BEGIN(rows)
    const int64_t o = r * c;
    double acc = 0.0;
    for (int64_t j = lane; j < c; j += 32)
        acc += gpp_ldt(x, o + j);
    double mean = s_warp_sum(acc) / (double)c;
    double acc2 = 0.0;
    for (int64_t j = lane; j < c; j += 32) {
        double d = gpp_ldt(x, o + j) - mean;
        acc2 += d * d;
    }
    double var = s_warp_sum(acc2) / (double)c;
    float m = (float)mean, rstd = (float)(1.0 / sqrt(var + (double)eps));
    for (int64_t j = lane; j < c; j += 32)
        gpp_stt(y, o + j, (gpp_ldt(x, o + j) - m) * rstd * g[j] + b[j]);
    if (lane == 0) {
        stash[2 * r] = m;
        stash[2 * r + 1] = rstd;
    }
}

/* dx += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dxhat = dy g */
GPP_KERNEL void k_ln_bwd_dx(int64_t rows, int64_t c, gpp_cuk_t x, const float *g,
                            const float *stash, gpp_cuk_t dy, gpp_cuk_t dx)
{
    S_ROW_BEGIN(rows)
    const int64_t o = r * c;
    float m = stash[2 * r], rstd = stash[2 * r + 1];
    double ad = 0.0, adx = 0.0;
    for (int64_t j = lane; j < c; j += 32) {
        float xhat = (gpp_ldt(x, o + j) - m) * rstd, dxhat = gpp_ldt(dy, o + j) * g[j];
        ad += dxhat;
        adx += (double)dxhat * xhat;
    }
    float mean_d = (float)(s_warp_sum(ad) / (double)c);
    float mean_dx = (float)(s_warp_sum(adx) / (double)c);
    for (int64_t j = lane; j < c; j += 32) {
        float xhat = (gpp_ldt(x, o + j) - m) * rstd;
        gpp_stt(dx, o + j,
                gpp_ldt(dx, o + j) + rstd * (gpp_ldt(dy, o + j) * g[j] - mean_d - xhat * mean_dx));
    }
}

/* dgain and dbias in two passes (gpp_cuda_kern.h, gpp_cuk_chunks): block
 * (column tile, row chunk) sums its chunk's rows, 32 columns x 8 row lanes
 * combined in lane order, into part[0 / 1][chunk][c]; then
 * gpp_cuk_chunks_sum adds the chunks in order. */
#define S_CT 32
#define S_RT 8
GPP_KERNEL void k_ln_bwd_part(int64_t rows, int64_t c, int64_t chunk, gpp_cuk_t x,
                              const float *stash, gpp_cuk_t dy, float *part)
{
    GPP_SHARED float pg[S_RT][S_CT], pb[S_RT][S_CT];
    int64_t j = (int64_t)blockIdx.x * S_CT + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    float ag = 0.0f, ab = 0.0f;
    if (j < c)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += S_RT) {
            float d = gpp_ldt(dy, r * c + j);
            ag += d * ((gpp_ldt(x, r * c + j) - stash[2 * r]) * stash[2 * r + 1]);
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

extern "C" cudaError_t gpp_cuk_layernorm_fwd(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t x,
                                             const float *g, const float *b, gpp_cuk_t y,
                                             float *stash, float eps)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_ln_fwd)(rows, c, x, g, b, y, stash, eps);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_layernorm_bwd_dx(cudaStream_t st, int64_t rows, int64_t c,
                                                gpp_cuk_t x, const float *g, const float *stash,
                                                gpp_cuk_t dy, gpp_cuk_t dx)
{
    GPP_LAUNCH(s_row_blocks(rows), S_THREADS, 0, st, k_ln_bwd_dx)(rows, c, x, g, stash, dy, dx);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_layernorm_bwd_params(cudaStream_t st, int64_t rows, int64_t c,
                                                    gpp_cuk_t x, const float *stash, gpp_cuk_t dy,
                                                    float *dg, float *db, float *part,
                                                    int64_t part_floats)
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
 * natural: qkv [n seq, parts hid] (row (i seq + s) parts + part, column
 * h dh + d); head-major: [parts][n][heads][seq][dh]. src and dst each fp32
 * or bf16 (gpp_cuk_t: the bf16 core's operands, the op's bf16 tensors).
 * A block takes a natural row at a time (grid-stride), its threads along
 * the row's hid columns, with VEC 4 at a time (dh a multiple of 4, both
 * sides aligned for it: one load, one store of 4). The divisions are one
 * set a row and one 32-bit one per 4 columns: the first version took every
 * element's five coordinates apart with 64-bit divisions, which a GPU does
 * in software, and was bound by them. */
template <int VEC>
GPP_KERNEL void k_heads_permute(int64_t n, int64_t seq, int64_t heads, int64_t dh, int parts,
                                gpp_cuk_t src, gpp_cuk_t dst, int to_heads)
{
    const int hid = (int)(heads * dh), idh = (int)dh;
    const int64_t rows = n * seq * parts;
    for (int64_t R = blockIdx.x; R < rows; R += gridDim.x) {
        const int64_t ms = R / parts, part = R % parts, smp = ms / seq, s = ms % seq;
        const int64_t nat = R * hid;                                  /* the natural row */
        const int64_t hm = ((part * n + smp) * heads * seq + s) * dh; /* head 0's row */
        constexpr int W = VEC ? 4 : 1; /* columns a thread moves per step */
        for (int c = W * (int)threadIdx.x; c < hid; c += W * (int)blockDim.x) {
            const int h = c / idh;
            const int64_t j = hm + (int64_t)h * seq * dh + (c - h * idh); /* head-major */
            const int64_t from = to_heads ? nat + c : j, to = to_heads ? j : nat + c;
            if (VEC)
                gpp_stt4(dst, to, gpp_ldt4(src, from));
            else
                gpp_stt(dst, to, gpp_ldt(src, from));
        }
    }
}

extern "C" cudaError_t gpp_cuk_heads_permute(cudaStream_t st, int64_t n, int64_t seq, int64_t heads,
                                             int64_t dh, int parts, gpp_cuk_t src, gpp_cuk_t dst,
                                             int to_heads)
{
    const int64_t rows = n * seq * parts, hid = heads * dh;
    if (rows <= 0 || hid <= 0)
        return cudaSuccess;
    const int vec = dh % 4 == 0 && gpp_cuk_al4(src) && gpp_cuk_al4(dst);
    const unsigned threads = gpp_cuk_row_threads(vec ? hid / 4 : hid);
    const unsigned blocks = gpp_cuk_row_blocks(rows);
    if (vec) {
        GPP_LAUNCH(blocks, threads, 0, st, k_heads_permute<1>)
        (n, seq, heads, dh, parts, src, dst, to_heads);
    } else {
        GPP_LAUNCH(blocks, threads, 0, st, k_heads_permute<0>)
        (n, seq, heads, dh, parts, src, dst, to_heads);
    }
    return cudaGetLastError();
}

/* ---- embedding bag: thread per (bag, column), the bag's rows in order ---- */
GPP_KERNEL void k_embedding_fwd(int64_t bags, int64_t bag, int64_t dim, int64_t table_rows,
                                const int32_t *idx, const float *table, gpp_cuk_t y,
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
        gpp_stt(y, i, acc);
    }
}

extern "C" cudaError_t gpp_cuk_embedding_fwd(cudaStream_t st, int64_t bags, int64_t bag,
                                             int64_t dim, int64_t table_rows, const int32_t *idx,
                                             const float *table, gpp_cuk_t y,
                                             gpp_cuda_fault_t *fault)
{
    GPP_LAUNCH(s_blocks(bags * dim), S_THREADS, 0, st, k_embedding_fwd)
    (bags, bag, dim, table_rows, idx, table, y, fault);
    return cudaGetLastError();
}

/* ---- sparse gradient accumulation, all on the device ----
 * Pairs (row id, value row) are sorted by row id with a stable radix sort
 * (8-bit digits, one tile of S_THREADS pairs per block: a per-tile digit
 * histogram, one scan of all histograms in one block, a scatter where each
 * pair's rank among its tile's pairs of the same digit is counted in
 * shared memory), so each row's pairs lie together in pair order. The
 * first pair of a row the gradient does not hold yet is flagged at its
 * pair position; a scan of the flags in pair order numbers the fresh rows
 * in first-touch order, from the gradient's count on. Then a thread per
 * (row, column) sums the row's pairs in pair order onto its slot: the CPU
 * backend's slots, row order and sums, bit for bit. No atomics, no host
 * round trip: a CUDA graph can record it. Scratch (int32,
 * gpp_cuk_sparse_scratch_ints): keys[2][n] | vals[2][n] | flag[n] |
 * rank[n] | hist[256 tiles] | base. */
#define S_SP_DIGITS 256
#define S_SCAN 1024 /* threads of the one-block scan */

/* hist[d * tiles + tile] = pairs of this block's tile whose digit (in
 * dig[], -1 past the end) is d; thread t counts digit t */
static GPP_DEV void s_tile_hist(int64_t tiles, const int32_t *dig, int32_t *hist)
{
    GPP_SYNC();
    int t = threadIdx.x;
    int32_t c = 0;
    for (int k = 0; k < S_THREADS; k++)
        c += dig[k] == t;
    hist[(int64_t)t * tiles + blockIdx.x] = c;
}

/* The keys (row ids; a bad one sets the fault and becomes table_rows:
 * sorted last, summed nowhere), the pair numbers, the flags cleared, and
 * the first pass's histogram (digit 0); block = tile */
GPP_KERNEL void k_sp_keys(int64_t n, int64_t tiles, int64_t table_rows, const int32_t *ids,
                          int32_t *keys, int32_t *vals, int32_t *flag, int32_t *hist,
                          gpp_cuda_fault_t *fault)
{
    GPP_SHARED int32_t dig[S_THREADS];
    int t = threadIdx.x;
    int64_t p = (int64_t)blockIdx.x * S_THREADS + t;
    int32_t r = -1;
    if (p < n) {
        r = ids[p];
        if (r < 0 || r >= table_rows) {
            if (atomicCAS(&fault->code, 0, GPP_CUDA_FAULT_SPARSE_ROW) == 0) {
                fault->value = r;
                fault->a = p;
                fault->c = table_rows;
            }
            r = (int32_t)table_rows;
        }
        keys[p] = r;
        vals[p] = (int32_t)p;
        flag[p] = 0;
    }
    dig[t] = p < n ? r & (S_SP_DIGITS - 1) : -1;
    s_tile_hist(tiles, dig, hist);
}

/* the histogram of a later pass; block = tile */
GPP_KERNEL void k_sp_hist(int64_t n, int64_t tiles, int shift, const int32_t *keys, int32_t *hist)
{
    GPP_SHARED int32_t dig[S_THREADS];
    int t = threadIdx.x;
    int64_t i = (int64_t)blockIdx.x * S_THREADS + t;
    dig[t] = i < n ? (keys[i] >> shift) & (S_SP_DIGITS - 1) : -1;
    s_tile_hist(tiles, dig, hist);
}

/* One block (S_SCAN threads): out = exclusive prefix sums of in[0, m) (in
 * place allowed). Each thread sums its own run of ceil(m / S_SCAN) items,
 * one scan over the S_SCAN run sums in shared memory gives each run's
 * offset, and each thread writes its run: the data is read twice, with
 * two barriers per scan step over the run sums only. With count: *base =
 * *count, then *count and *host_count += the total. */
static GPP_DEV void s_block_scan(int64_t m, const int32_t *in, int32_t *out, int32_t *count,
                                 int32_t *host_count, int32_t *base)
{
    GPP_SHARED int32_t sum[S_SCAN];
    int t = threadIdx.x;
    int64_t per = (m + S_SCAN - 1) / S_SCAN, lo = t * per, hi = lo + per < m ? lo + per : m;
    int32_t run = 0;
    for (int64_t i = lo; i < hi; i++)
        run += in[i];
    sum[t] = run;
    GPP_SYNC();
    for (int d = 1; d < S_SCAN; d *= 2) {
        int32_t add = t >= d ? sum[t - d] : 0;
        GPP_SYNC();
        sum[t] += add;
        GPP_SYNC();
    }
    int32_t off = sum[t] - run;
    for (int64_t i = lo; i < hi; i++) {
        int32_t v = in[i];
        out[i] = off;
        off += v;
    }
    if (t == 0 && count) {
        *base = *count;
        *count += sum[S_SCAN - 1];
        *host_count = *count;
    }
}

GPP_KERNEL void k_sp_scan(int64_t m, int32_t *a)
{
    s_block_scan(m, a, a, (int32_t *)0, (int32_t *)0, (int32_t *)0);
}

/* Stable scatter by digit; block = tile (hist already scanned) */
GPP_KERNEL void k_sp_scatter(int64_t n, int64_t tiles, int shift, const int32_t *kin,
                             const int32_t *vin, const int32_t *hist, int32_t *kout, int32_t *vout)
{
    GPP_SHARED int32_t dig[S_THREADS];
    int t = threadIdx.x;
    int64_t i = (int64_t)blockIdx.x * S_THREADS + t;
    int32_t d = i < n ? (kin[i] >> shift) & (S_SP_DIGITS - 1) : -1;
    dig[t] = d;
    GPP_SYNC();
    if (i >= n)
        return;
    int32_t rank = 0;
    for (int k = 0; k < t; k++)
        rank += dig[k] == d;
    int64_t dst = hist[(int64_t)d * tiles + blockIdx.x] + rank;
    kout[dst] = kin[i];
    vout[dst] = vin[i];
}

/* One block: flag[first pair of each row the gradient does not hold] = 1
 * (each thread over its run of sorted positions), then rank = the flags'
 * exclusive prefix sums in pair order: the fresh rows' first-touch order,
 * counted on from *count. */
GPP_KERNEL void k_sp_fresh(int64_t n, int64_t table_rows, const int32_t *ks, const int32_t *vs,
                           const int32_t *slot_map, int32_t *flag, int32_t *rank, int32_t *count,
                           int32_t *host_count, int32_t *base)
{
    int64_t per = (n + S_SCAN - 1) / S_SCAN, lo = threadIdx.x * per;
    int64_t hi = lo + per < n ? lo + per : n;
    for (int64_t i = lo; i < hi; i++) {
        int32_t key = ks[i];
        if (key < table_rows && (i == 0 || ks[i - 1] != key) && slot_map[key] < 0)
            flag[vs[i]] = 1;
    }
    GPP_SYNC(); /* every flag written: the block's global writes are visible to it */
    s_block_scan(n, flag, rank, count, host_count, base);
}

/* Sorted positions on threadIdx.y (several a block), columns on
 * threadIdx.x (gpp_cuk_rows_shape); a row's first position sums its pairs
 * in pair order. The value row of pair p is values + (p / div) * stride
 * (32-bit division: pairs and div are below 2^31). A fresh row takes slot
 * base + its rank. */
GPP_KERNEL void k_sp_accum(int64_t n, int64_t dim, int64_t table_rows, const int32_t *ks,
                           const int32_t *vs, const int32_t *flag, const int32_t *rank,
                           const int32_t *base, gpp_cuk_t values, int64_t div, int64_t stride,
                           float *gvalues, int32_t *slot_map, int32_t *rows)
{
    const uint32_t udiv = (uint32_t)div;
    for (int64_t pos = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; pos < n;
         pos += (int64_t)gridDim.x * blockDim.y) {
        int32_t key = ks[pos];
        if (key >= table_rows || (pos > 0 && ks[pos - 1] == key))
            continue;
        int32_t p0 = vs[pos];
        int fresh = flag[p0];
        int64_t s = fresh ? (int64_t)*base + rank[p0] : slot_map[key];
        const int64_t v0 = (int64_t)((uint32_t)p0 / udiv) * stride; /* its value row */
        for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) {
            float *dst = gvalues + s * dim + j;
            /* a fresh row starts as its first value row (the CPU's copy: -0 stays -0) */
            float acc = fresh ? gpp_ldt(values, v0 + j) : *dst + gpp_ldt(values, v0 + j);
            for (int64_t q = pos + 1; q < n && ks[q] == key; q++)
                acc += gpp_ldt(values, (int64_t)((uint32_t)vs[q] / udiv) * stride + j);
            *dst = acc;
        }
        if (threadIdx.x == 0 && fresh) { /* only this row's threads read its entry, and
                                             not when fresh */
            slot_map[key] = (int32_t)s;
            rows[s] = key;
        }
    }
}

GPP_KERNEL void k_sparse_clear(int64_t bound, const int32_t *count, const int32_t *rows,
                               int32_t *slot_map)
{
    int64_t c = *count;
    S_FOR(k, bound < c ? bound : c) slot_map[rows[k]] = -1;
}
GPP_KERNEL void k_sp_zero_count(int32_t *count, int32_t *host_count)
{
    *count = 0;
    *host_count = 0;
}

extern "C" int64_t gpp_cuk_sparse_scratch_ints(int64_t n)
{
    int64_t tiles = (n + S_THREADS - 1) / S_THREADS;
    return 6 * n + S_SP_DIGITS * tiles + 1;
}

extern "C" cudaError_t gpp_cuk_sparse_accum(cudaStream_t st, int64_t n, int64_t dim,
                                            int64_t table_rows, const int32_t *ids,
                                            gpp_cuk_t values, int64_t div, int64_t stride,
                                            int32_t *scratch, float *gvalues, int32_t *slot_map,
                                            int32_t *rows, int32_t *count, int32_t *host_count,
                                            gpp_cuda_fault_t *fault)
{
    if (n <= 0)
        return cudaGetLastError();
    int64_t tiles = (n + S_THREADS - 1) / S_THREADS;
    int32_t *keys[2] = {scratch, scratch + n}, *vals[2] = {scratch + 2 * n, scratch + 3 * n};
    int32_t *flag = scratch + 4 * n, *rank = scratch + 5 * n, *hist = scratch + 6 * n;
    int32_t *base = hist + S_SP_DIGITS * tiles;
    int bits = 1; /* keys are in [0, table_rows] */
    while (bits < 31 && ((int64_t)1 << bits) <= table_rows)
        bits++;
    GPP_LAUNCH((unsigned)tiles, S_THREADS, 0, st, k_sp_keys)
    (n, tiles, table_rows, ids, keys[0], vals[0], flag, hist, fault);
    int cur = 0;
    for (int shift = 0; shift < bits; shift += 8, cur ^= 1) {
        if (shift > 0) { /* the first pass's came with the keys */
            GPP_LAUNCH((unsigned)tiles, S_THREADS, 0, st, k_sp_hist)
            (n, tiles, shift, keys[cur], hist);
        }
        GPP_LAUNCH(1, S_SCAN, 0, st, k_sp_scan)(S_SP_DIGITS * tiles, hist);
        GPP_LAUNCH((unsigned)tiles, S_THREADS, 0, st, k_sp_scatter)
        (n, tiles, shift, keys[cur], vals[cur], hist, keys[cur ^ 1], vals[cur ^ 1]);
    }
    GPP_LAUNCH(1, S_SCAN, 0, st, k_sp_fresh)
    (n, table_rows, keys[cur], vals[cur], slot_map, flag, rank, count, host_count, base);
    unsigned bx, by, blocks;
    gpp_cuk_rows_shape(n, dim, &bx, &by, &blocks);
    GPP_LAUNCH(blocks, dim3(bx, by), 0, st, k_sp_accum)
    (n, dim, table_rows, keys[cur], vals[cur], flag, rank, base, values, div, stride, gvalues,
     slot_map, rows);
    return cudaGetLastError();
}
extern "C" cudaError_t gpp_cuk_sparse_clear(cudaStream_t st, int64_t bound, int32_t *count,
                                            int32_t *host_count, const int32_t *rows,
                                            int32_t *slot_map)
{
    if (bound > 0)
        GPP_LAUNCH(s_blocks(bound), S_THREADS, 0, st, k_sparse_clear)(bound, count, rows, slot_map);
    GPP_LAUNCH(1, 1, 0, st, k_sp_zero_count)(count, host_count);
    return cudaGetLastError();
}
