/* gpp_cuda_flash: fused attention core (scores, softmax, weighted sum) that
 * never materialises the seq x seq probabilities: the tiled online-softmax
 * method of FlashAttention-2 (Dao, 2023), in fp32 on the CUDA cores.
 * Written to gpp_cuda_port.h, so the same source runs on the device
 * (gpp_cuda_flash.cu, launchers in gpp_cuda_kern.h) and in the host
 * emulator (tests/unit/test_flash_emu.cc).
 *
 * Layout: the rows of head h of sample s are read and written in place in
 * the natural layout, no permutes: row i of (s, h) of q, k, v, dq, dk, dv
 * starts at s seq ldq + i ldq + h dh of its pointer (the attention op's qkv
 * [n seq, 3 hidden]: ldq = 3 hidden, k and v at +hidden and +2 hidden), of
 * o and dout at s seq ldo + i ldo + h dh (ctx [n seq, hidden]: ldo =
 * hidden). heads = 1, ld = dh is the head-major layout. lse and dsum are
 * [batch][seq], batch = samples x heads, b = s heads + h. Causal: query i
 * attends to keys j <= i. The scores are scale q.k; exp is gpp_math_expf,
 * as in the CPU and unfused softmax.
 *
 * Work split. A head of dh <= DH (DH = 16, 32, 64 or 128, the "tier") is
 * held by T = DH / D threads of D <= 32 columns each, part t owning the
 * groups of 4 columns 4 t, 4 (t + T), 4 (t + 2T), ... (col(e, t)): a
 * thread reads its columns of a shared row with D/4 16-byte loads, and the
 * T parts of a row read T consecutive 16-byte words, so a warp's load has
 * no bank conflicts. A dot product is the parts' sum over a fixed xor
 * butterfly, the same on every part. A block is 128
 * threads = BR rows; key (or query) rows stream through shared memory in
 * tiles of BC rows, zero-filled past seq and past dh.
 *
 *   forward   one row per query: running max m and sum l per CHUNK keys,
 *             o = sum p v / l, lse = m + log l (stashed for the backward).
 *   backward  dsum_i = sum_d do_id o_id (k_flash_rowdot); then dK, dV with
 *             one row per key
 *             over the query tiles, and dQ with one row per query over the
 *             key tiles, both recomputing p = exp(s - lse) exactly as the
 *             forward computed s: dS = p (dP - dsum), dK = scale dS^T Q,
 *             dV = P^T dO, dQ = scale dS K. No atomics: every output row
 *             has one owner, so results are reproducible run to run. */
#ifndef GPP_CUDA_FLASH_CUH
#define GPP_CUDA_FLASH_CUH

#include <math.h>
#include <stdint.h>

#include "kernels/cuda/gpp_cuda_port.h"
#include "kernels/gpp_math.h"

namespace gpp_flash
{

constexpr int THREADS = 128; /* per block */
constexpr int CHUNK = 8;     /* keys per online-softmax update in the forward */

template <int DH> struct cfg {
    static_assert(DH == 16 || DH == 32 || DH == 64 || DH == 128, "tiers: 16, 32, 64, 128");
    static constexpr int D = DH < 32 ? DH : 32;   /* columns per thread */
    static constexpr int T = DH / D;              /* threads per row */
    static constexpr int BR = THREADS / T;        /* rows per block */
    static constexpr int BC = DH <= 64 ? 64 : 32; /* rows per shared tile: 2 tiles <= 32 KiB */
    static_assert(BC % CHUNK == 0 && 32 % T == 0 && D % 4 == 0, "tile shape");
    static constexpr unsigned blocks(int64_t seq)
    {
        return (unsigned)((seq + BR - 1) / BR);
    }
};

/* The tier a head size runs in, 0 when it has none (dh > 128). */
constexpr int tier(int64_t dh)
{
    return dh < 1 ? 0 : dh <= 16 ? 16 : dh <= 32 ? 32 : dh <= 64 ? 64 : dh <= 128 ? 128 : 0;
}

GPP_DEV int imin(int a, int b)
{
    return a < b ? a : b;
}

/* The column of element e (< D) of part t's share of a row. */
template <int T> GPP_DEV int col(int e, int t)
{
    return 4 * (t + T * (e / 4)) + e % 4;
}

/* The sum of x over the T parts of a row (lanes row*T .. row*T + T - 1). */
template <int T> GPP_DEV float row_sum(float x)
{
    GPP_UNROLL
    for (int o = T / 2; o > 0; o /= 2)
        x += gpp_shfl_xor(x, o);
    return x;
}

/* The offset of row 0 of (sample, head) b in a matrix of row stride ld. */
GPP_DEV int64_t head_base(int64_t b, int heads, int seq, int dh, int64_t ld)
{
    return (b / heads) * seq * ld + (b % heads) * dh;
}

/* sum over e of r[e] row[col(e, t)], e ascending: this part's share of a
 * dot product with a shared-memory row (16-byte loads) */
template <int T, int D> GPP_DEV float dot_part(const float (&r)[D], const float *row, int t)
{
    float acc = 0.0f;
    GPP_UNROLL
    for (int g = 0; g < D / 4; g++) {
        gpp_f4 x = gpp_ld4(&row[4 * (t + T * g)]);
        acc += r[4 * g] * x.x;
        acc += r[4 * g + 1] * x.y;
        acc += r[4 * g + 2] * x.z;
        acc += r[4 * g + 3] * x.w;
    }
    return acc;
}

/* acc[e] += a row[col(e, t)] */
template <int T, int D> GPP_DEV void axpy_part(float (&acc)[D], float a, const float *row, int t)
{
    GPP_UNROLL
    for (int g = 0; g < D / 4; g++) {
        gpp_f4 x = gpp_ld4(&row[4 * (t + T * g)]);
        acc[4 * g] += a * x.x;
        acc[4 * g + 1] += a * x.y;
        acc[4 * g + 2] += a * x.z;
        acc[4 * g + 3] += a * x.w;
    }
}

/* dst[r][c] = mul * src[(r0 + r) ld + c], 0 past nrows rows or dh columns
 * (src of S elements: the tile is fp32 either way). */
template <int DH, int ROWS, typename S>
GPP_DEV void load_tile(float (*dst)[DH], const S *src, int64_t ld, int r0, int nrows, int dh,
                       float mul)
{
    for (int x = threadIdx.x; x < ROWS * DH; x += THREADS) {
        int r = x / DH, c = x % DH, j = r0 + r;
        dst[r][c] = j < nrows && c < dh ? mul * gpp_from_e(src[(int64_t)j * ld + c]) : 0.0f;
    }
}

/* grid (batch, cfg<DH>::blocks(seq)), THREADS threads. S: the element type
 * of q, k, v, o, dout, dq, dk, dv in global memory (float, or gpp_bf16 for
 * the attention op over bf16 tensors); every product, the softmax and lse
 * and dsum stay fp32, an output rounded to S once when stored. */
template <int DH, typename S = float>
GPP_KERNEL void k_flash_fwd(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                            int causal, const S *q, const S *k, const S *v, S *o, float *lse)
{
    typedef cfg<DH> C;
    GPP_SHARED GPP_ALIGN16 float ks[C::BC][DH];
    GPP_SHARED GPP_ALIGN16 float vs[C::BC][DH];
    const int t = (int)threadIdx.x % C::T, i0 = (int)blockIdx.y * C::BR;
    const int i = i0 + (int)threadIdx.x / C::T;
    const bool valid = i < seq;
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo);
    float qr[C::D], acc[C::D];
    GPP_UNROLL
    for (int e = 0; e < C::D; e++) {
        int d = col<C::T>(e, t);
        qr[e] = valid && d < dh ? scale * gpp_from_e(q[bq + (int64_t)i * ldq + d]) : 0.0f;
        acc[e] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    /* causal: no row of this block sees a key past its last row */
    const int kv_end = causal ? imin(seq, i0 + C::BR) : seq;
    for (int j0 = 0; j0 < kv_end; j0 += C::BC) {
        GPP_SYNC(); /* the previous tile is consumed */
        load_tile<DH, C::BC>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
        load_tile<DH, C::BC>(vs, v + bq, ldq, j0, seq, dh, 1.0f);
        GPP_SYNC();
        const int jn = imin(C::BC, kv_end - j0);
        for (int c0 = 0; c0 < jn; c0 += CHUNK) {
            float s[CHUNK], mx = m;
            GPP_UNROLL
            for (int c = 0; c < CHUNK; c++) {
                float sc = row_sum<C::T>(dot_part<C::T>(qr, ks[c0 + c], t));
                int j = j0 + c0 + c;
                s[c] = c0 + c < jn && (!causal || j <= i) ? sc : -INFINITY;
                mx = fmaxf(mx, s[c]);
            }
            /* key 0 is in every row's first chunk: mx is finite from there */
            float alpha = m == -INFINITY ? 0.0f : gpp_math_expf(m - mx);
            l *= alpha;
            GPP_UNROLL
            for (int e = 0; e < C::D; e++)
                acc[e] *= alpha;
            GPP_UNROLL
            for (int c = 0; c < CHUNK; c++) {
                float p = s[c] == -INFINITY ? 0.0f : gpp_math_expf(s[c] - mx);
                l += p;
                axpy_part<C::T>(acc, p, vs[c0 + c], t);
            }
            m = mx;
        }
    }
    if (valid) {
        float inv = 1.0f / l;
        GPP_UNROLL
        for (int e = 0; e < C::D; e++) {
            int d = col<C::T>(e, t);
            if (d < dh)
                o[bo + (int64_t)i * ldo + d] = gpp_to_e<S>(acc[e] * inv);
        }
        if (t == 0)
            lse[(int64_t)blockIdx.x * seq + i] = m + logf(l);
    }
}

/* dsum[b seq + i] = sum_d dout_id out_id over the rows of out and dout
 * (row stride ldo), in double like the CPU's softmax backward. One thread
 * per (batch, query) row; grid of ceil(rows / THREADS) blocks. */
template <typename S>
GPP_KERNEL void k_flash_rowdot(int64_t rows, int seq, int dh, int heads, int64_t ldo, const S *out,
                               const S *dout, float *dsum)
{
    int64_t r = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (r >= rows)
        return; /* no barrier in this kernel */
    int64_t off = head_base(r / seq, heads, seq, dh, ldo) + (r % seq) * ldo;
    double acc = 0.0;
    for (int d = 0; d < dh; d++)
        acc += (double)gpp_from_e(dout[off + d]) * gpp_from_e(out[off + d]);
    dsum[r] = (float)acc;
}

/* dK, dV: one row per key. grid (batch, cfg<DH>::blocks(seq)). */
template <int DH, typename S = float>
GPP_KERNEL void k_flash_bwd_kv(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                               int causal, const S *q, const S *k, const S *v, const S *dout,
                               const float *lse, const float *dsum, S *dk, S *dv)
{
    typedef cfg<DH> C;
    GPP_SHARED GPP_ALIGN16 float qs[C::BC][DH]; /* scale q, as the forward's scores */
    GPP_SHARED GPP_ALIGN16 float dos[C::BC][DH];
    GPP_SHARED float ls[C::BC], ds_[C::BC];
    const int t = (int)threadIdx.x % C::T, j0 = (int)blockIdx.y * C::BR;
    const int j = j0 + (int)threadIdx.x / C::T;
    const bool valid = j < seq;
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo),
                  rbase = (int64_t)blockIdx.x * seq;
    float kr[C::D], vr[C::D], dkr[C::D], dvr[C::D];
    GPP_UNROLL
    for (int e = 0; e < C::D; e++) {
        int d = col<C::T>(e, t);
        bool in = valid && d < dh;
        kr[e] = in ? gpp_from_e(k[bq + (int64_t)j * ldq + d]) : 0.0f;
        vr[e] = in ? gpp_from_e(v[bq + (int64_t)j * ldq + d]) : 0.0f;
        dkr[e] = dvr[e] = 0.0f;
    }
    /* causal: queries before this block's first key see none of its keys */
    const int i_begin = causal ? j0 / C::BC * C::BC : 0;
    for (int i0 = i_begin; i0 < seq; i0 += C::BC) {
        GPP_SYNC();
        load_tile<DH, C::BC>(qs, q + bq, ldq, i0, seq, dh, scale);
        load_tile<DH, C::BC>(dos, dout + bo, ldo, i0, seq, dh, 1.0f);
        for (int x = threadIdx.x; x < C::BC; x += THREADS) {
            bool in = i0 + x < seq;
            ls[x] = in ? lse[rbase + i0 + x] : 0.0f;
            ds_[x] = in ? dsum[rbase + i0 + x] : 0.0f;
        }
        GPP_SYNC();
        const int in_rows = imin(C::BC, seq - i0);
        for (int ii = 0; ii < in_rows; ii++) {
            /* the forward's products in its order (e ascending): p is its p */
            float s = row_sum<C::T>(dot_part<C::T>(kr, qs[ii], t));
            float dp = row_sum<C::T>(dot_part<C::T>(vr, dos[ii], t));
            bool keep = valid && (!causal || j <= i0 + ii);
            float p = keep ? gpp_math_expf(s - ls[ii]) : 0.0f;
            float dsc = p * (dp - ds_[ii]);
            axpy_part<C::T>(dvr, p, dos[ii], t);
            axpy_part<C::T>(dkr, dsc, qs[ii], t); /* qs carries the scale */
        }
    }
    if (valid) {
        GPP_UNROLL
        for (int e = 0; e < C::D; e++) {
            int d = col<C::T>(e, t);
            if (d < dh) {
                dk[bq + (int64_t)j * ldq + d] = gpp_to_e<S>(dkr[e]);
                dv[bq + (int64_t)j * ldq + d] = gpp_to_e<S>(dvr[e]);
            }
        }
    }
}

/* dQ: one row per query. grid (batch, cfg<DH>::blocks(seq)). */
template <int DH, typename S = float>
GPP_KERNEL void k_flash_bwd_q(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                              int causal, const S *q, const S *k, const S *v, const S *dout,
                              const float *lse, const float *dsum, S *dq)
{
    typedef cfg<DH> C;
    GPP_SHARED GPP_ALIGN16 float ks[C::BC][DH];
    GPP_SHARED GPP_ALIGN16 float vs[C::BC][DH];
    const int t = (int)threadIdx.x % C::T, i0 = (int)blockIdx.y * C::BR;
    const int i = i0 + (int)threadIdx.x / C::T;
    const bool valid = i < seq;
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo),
                  rbase = (int64_t)blockIdx.x * seq;
    float qr[C::D], dor[C::D], dqr[C::D];
    GPP_UNROLL
    for (int e = 0; e < C::D; e++) {
        int d = col<C::T>(e, t);
        bool in = valid && d < dh;
        qr[e] = in ? scale * gpp_from_e(q[bq + (int64_t)i * ldq + d]) : 0.0f;
        dor[e] = in ? gpp_from_e(dout[bo + (int64_t)i * ldo + d]) : 0.0f;
        dqr[e] = 0.0f;
    }
    const float li = valid ? lse[rbase + i] : 0.0f, di = valid ? dsum[rbase + i] : 0.0f;
    const int kv_end = causal ? imin(seq, i0 + C::BR) : seq;
    for (int j0 = 0; j0 < kv_end; j0 += C::BC) {
        GPP_SYNC();
        load_tile<DH, C::BC>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
        load_tile<DH, C::BC>(vs, v + bq, ldq, j0, seq, dh, 1.0f);
        GPP_SYNC();
        const int jn = imin(C::BC, kv_end - j0);
        for (int jj = 0; jj < jn; jj++) {
            float s = row_sum<C::T>(dot_part<C::T>(qr, ks[jj], t));
            float dp = row_sum<C::T>(dot_part<C::T>(dor, vs[jj], t));
            bool keep = valid && (!causal || j0 + jj <= i);
            float p = keep ? gpp_math_expf(s - li) : 0.0f;
            float dsc = p * (dp - di);
            axpy_part<C::T>(dqr, dsc, ks[jj], t);
        }
    }
    if (valid) {
        GPP_UNROLL
        for (int e = 0; e < C::D; e++) {
            int d = col<C::T>(e, t);
            if (d < dh)
                dq[bq + (int64_t)i * ldq + d] = gpp_to_e<S>(scale * dqr[e]);
        }
    }
}

} /* namespace gpp_flash */

#endif
