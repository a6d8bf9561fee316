/* gpp_cuda_flash_tc: the fused attention core on tensor cores, for
 * precision bf16 (gpp_cuda_flash.cuh is the fp32 CUDA-core one; same
 * method, layouts, stash and results up to bf16 rounding).
 *
 * Every product is a 16x16x16 warp matrix product (gpp_mma: nvcuda::wmma
 * on the device) on E = bf16 tiles with fp32 accumulation, as PyTorch's
 * bf16 flash attention computes: q (times the scale), k, v, dO are rounded
 * to bf16 when a tile is staged in shared memory, and so are the
 * probabilities P before P V and dS before dS K and dS^T Q. Softmax, the
 * running max and sum, lse and dsum stay fp32.
 *
 * A block is 4 warps; each warp owns 16 rows (queries in the forward and
 * in dQ, keys in dK/dV), so a block covers 64 rows, and streams the other
 * side through shared memory in tiles of BC rows. After a product the warp
 * writes its 16 x BC scores to shared memory, where lane 2r + h works on
 * row r, columns [h BC/2, (h + 1) BC/2): mask, exp, the row's max and sum
 * over the lane pair. The probabilities go back as E over the scores (the
 * warp has read them all first). The output accumulators stay in
 * fragments; the forward rescales them through a 16 x 16 scratch tile per
 * warp (a fragment's element layout is unspecified). Head sizes up to 64
 * (tiers 16, 32, 64; columns past dh are zero), keeping shared memory
 * under 48 KiB; larger heads run the fp32 core.
 *
 * Templated on E so that the host test also runs the same code with E =
 * float (no rounding), which checks the indexing to fp32 accuracy; the
 * device instantiates E = gpp_bf16 only. */
#ifndef GPP_CUDA_FLASH_TC_CUH
#define GPP_CUDA_FLASH_TC_CUH

#include "kernels/cuda/gpp_cuda_flash.cuh"

/* 16x16x16 products on bf16 need sm_80: a device pass for an older
 * architecture compiles the kernels empty (the backend never launches them
 * on such a device: gpp_cuda_ops.c checks the compute capability). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GPP_TC_BODY 0
#else
#define GPP_TC_BODY 1
#endif

namespace gpp_flash
{

template <int DH> struct tc_cfg {
    static_assert(DH == 16 || DH == 32 || DH == 64, "tensor-core tiers: 16, 32, 64");
    static constexpr int WARPS = THREADS / 32;    /* 4 */
    static constexpr int BR = 16 * WARPS;         /* rows per block */
    static constexpr int BC = DH <= 32 ? 64 : 32; /* streamed rows per tile: forward */
    static constexpr int BCB = 32;                /* and backward (two score tiles a warp) */
    static constexpr int KT = DH / 16;            /* 16-column tiles of a head */
    static constexpr unsigned blocks(int64_t seq)
    {
        return (unsigned)((seq + BR - 1) / BR);
    }
};

/* The tensor-core tier of a head size, 0 when it has none. */
constexpr int tc_tier(int64_t dh)
{
    return dh < 1 ? 0 : dh <= 16 ? 16 : dh <= 32 ? 32 : dh <= 64 ? 64 : 0;
}

/* dst[r][c] = E(mul * src[(r0 + r) ld + c]), 0 past nrows rows or dh columns */
template <typename E, int DH, int ROWS>
GPP_DEV void load_tile_e(E (*dst)[DH], const float *src, int64_t ld, int r0, int nrows, int dh,
                         float mul)
{
    for (int x = threadIdx.x; x < ROWS * DH; x += THREADS) {
        int r = x / DH, c = x % DH, j = r0 + r;
        dst[r][c] = gpp_to_e<E>(j < nrows && c < dh ? mul * src[(int64_t)j * ld + c] : 0.0f);
    }
}

/* out (16 x N, row stride N) = A B^T: A the warp's 16 rows of a [][DH]
 * tile, B the N rows of another (its rows are B^T's columns) */
template <int DH, int N, typename E>
GPP_DEV void tc_rows_product(const E (*a)[DH], const E (*b)[DH], float (*out)[N])
{
    namespace M = gpp_mma;
    GPP_UNROLL
    for (int nt = 0; nt < N / 16; nt++) {
        M::frag_c s;
        M::zero(s);
        GPP_UNROLL
        for (int kt = 0; kt < DH / 16; kt++) {
            M::frag_a<E> fa;
            M::frag_bt<E> fb;
            M::load(fa, &a[0][16 * kt], DH);
            M::load(fb, &b[16 * nt][16 * kt], DH);
            M::mma(s, fa, fb);
        }
        M::store_c(&out[0][16 * nt], s, N);
    }
}

/* acc[f] (16 x 16: columns 16 f.. of a 16 x DH result) += A B: A 16 x N
 * (row stride N), B the N rows of a [][DH] tile */
template <int DH, int N, typename E>
GPP_DEV void tc_acc_product(gpp_mma::frag_c (&acc)[DH / 16], const E *a, const E (*b)[DH])
{
    namespace M = gpp_mma;
    GPP_UNROLL
    for (int f = 0; f < DH / 16; f++)
        GPP_UNROLL
    for (int kt = 0; kt < N / 16; kt++) {
        M::frag_a<E> fa;
        M::frag_b<E> fb;
        M::load(fa, a + 16 * kt, N);
        M::load(fb, &b[16 * kt][16 * f], DH);
        M::mma(acc[f], fa, fb);
    }
}

/* Writes the 16 x 16 accumulator f (rows row0.., columns col0.. of the
 * warp's output) to global rows of stride ld, times mul[row] (per row of
 * the tile), through the warp's scratch tile. */
GPP_DEV void tc_store_rows(float (*scr)[16], const gpp_mma::frag_c &f, float *dst, int64_t ld,
                           int row0, int nrows, int col0, int dh, const float *mul)
{
    const int lane = (int)threadIdx.x % 32;
    gpp_mma::store_c(&scr[0][0], f, 16);
    GPP_SYNC_WARP();
    GPP_UNROLL
    for (int e = 0; e < 8; e++) {
        int x = lane * 8 + e, r = x / 16, c = x % 16;
        if (row0 + r < nrows && col0 + c < dh)
            dst[(int64_t)(row0 + r) * ld + col0 + c] = scr[r][c] * mul[r];
    }
    GPP_SYNC_WARP();
}

/* grid (n heads, tc_cfg<DH>::blocks(seq)), THREADS threads */
template <int DH, typename E>
GPP_KERNEL void k_flash_tc_fwd(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                               int causal, const float *q, const float *k, const float *v, float *o,
                               float *lse)
{
#if GPP_TC_BODY
    typedef tc_cfg<DH> C;
    namespace M = gpp_mma;
    GPP_SHARED GPP_ALIGN32 E qs[C::BR][DH]; /* scale q */
    GPP_SHARED GPP_ALIGN32 E ks[C::BC][DH];
    GPP_SHARED GPP_ALIGN32 E vs[C::BC][DH];
    GPP_SHARED GPP_ALIGN32 float sw[C::WARPS][16][C::BC]; /* scores, then P as E */
    GPP_SHARED GPP_ALIGN32 float scr[C::WARPS][16][16];
    GPP_SHARED float rowf[C::WARPS][16]; /* per row: the rescale, then 1 / l */
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int i0 = (int)blockIdx.y * C::BR, w0 = i0 + 16 * warp; /* the warp's first row */
    const int rr = lane / 2, half = lane % 2, i = w0 + rr;       /* this lane's softmax row */
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo);
    E *pw = reinterpret_cast<E *>(&sw[warp][0][0]); /* P [16][BC] */

    load_tile_e<E, DH, C::BR>(qs, q + bq, ldq, i0, seq, dh, scale);
    M::frag_c acc[C::KT];
    GPP_UNROLL
    for (int f = 0; f < C::KT; f++)
        M::zero(acc[f]);
    float m = -INFINITY, l = 0.0f;
    const int kv_end = causal ? imin(seq, i0 + C::BR) : seq;
    for (int j0 = 0; j0 < kv_end; j0 += C::BC) {
        GPP_SYNC(); /* the previous tiles are consumed (and qs is staged) */
        load_tile_e<E, DH, C::BC>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
        load_tile_e<E, DH, C::BC>(vs, v + bq, ldq, j0, seq, dh, 1.0f);
        GPP_SYNC();
        /* S = (scale Q) K^T: 16 x BC */
        tc_rows_product<DH, C::BC>(&qs[16 * warp], ks, sw[warp]);
        GPP_SYNC_WARP();
        /* the row's share: mask, max, exp, sum over the lane pair */
        float pv[C::BC / 2], mx = m;
        GPP_UNROLL
        for (int c = 0; c < C::BC / 2; c++) {
            int col = half * (C::BC / 2) + c, j = j0 + col;
            pv[c] = j < seq && (!causal || j <= i) ? sw[warp][rr][col] : -INFINITY;
            mx = fmaxf(mx, pv[c]);
        }
        mx = fmaxf(mx, gpp_shfl_xor(mx, 1));
        /* key 0 is in every row's first tile: mx is finite from there */
        float alpha = m == -INFINITY ? 0.0f : gpp_math_expf(m - mx), sum = 0.0f;
        GPP_UNROLL
        for (int c = 0; c < C::BC / 2; c++) {
            pv[c] = pv[c] == -INFINITY ? 0.0f : gpp_math_expf(pv[c] - mx);
            sum += pv[c];
        }
        sum += gpp_shfl_xor(sum, 1);
        l = l * alpha + sum;
        m = mx;
        GPP_SYNC_WARP(); /* every score read before P overwrites them */
        GPP_UNROLL
        for (int c = 0; c < C::BC / 2; c++)
            pw[rr * C::BC + half * (C::BC / 2) + c] = gpp_to_e<E>(pv[c]);
        if (half == 0)
            rowf[warp][rr] = alpha;
        GPP_SYNC_WARP();
        /* O = diag(alpha) O + P V */
        GPP_UNROLL
        for (int f = 0; f < C::KT; f++) {
            M::store_c(&scr[warp][0][0], acc[f], 16);
            GPP_SYNC_WARP();
            GPP_UNROLL
            for (int e = 0; e < 8; e++) {
                int x = lane * 8 + e;
                scr[warp][x / 16][x % 16] *= rowf[warp][x / 16];
            }
            GPP_SYNC_WARP();
            M::load_c(acc[f], &scr[warp][0][0], 16);
            GPP_SYNC_WARP(); /* scr is free again */
        }
        tc_acc_product<DH, C::BC>(acc, pw, vs);
    }
    if (half == 0)
        rowf[warp][rr] = 1.0f / l;
    GPP_SYNC_WARP();
    GPP_UNROLL
    for (int f = 0; f < C::KT; f++)
        tc_store_rows(scr[warp], acc[f], o + bo, ldo, w0, seq, 16 * f, dh, rowf[warp]);
    if (half == 0 && i < seq)
        lse[(int64_t)blockIdx.x * seq + i] = m + logf(l);
#endif
}

/* dK, dV: each warp owns 16 keys. grid (n heads, tc_cfg<DH>::blocks(seq)). */
template <int DH, typename E>
GPP_KERNEL void k_flash_tc_bwd_kv(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                                  int causal, const float *q, const float *k, const float *v,
                                  const float *dout, const float *lse, const float *dsum, float *dk,
                                  float *dv)
{
#if GPP_TC_BODY
    typedef tc_cfg<DH> C;
    namespace M = gpp_mma;
    GPP_SHARED GPP_ALIGN32 E ks[C::BR][DH];
    GPP_SHARED GPP_ALIGN32 E vs[C::BR][DH];
    GPP_SHARED GPP_ALIGN32 E qs[C::BCB][DH]; /* scale q */
    GPP_SHARED GPP_ALIGN32 E dos[C::BCB][DH];
    GPP_SHARED GPP_ALIGN32 float st[C::WARPS][16][C::BCB];  /* S^T, then P^T as E */
    GPP_SHARED GPP_ALIGN32 float dpt[C::WARPS][16][C::BCB]; /* dP^T, then dS^T as E */
    GPP_SHARED GPP_ALIGN32 float scr[C::WARPS][16][16];
    GPP_SHARED float ls[C::BCB], ds_[C::BCB], ones[16];
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int j0 = (int)blockIdx.y * C::BR, w0 = j0 + 16 * warp;
    const int rr = lane / 2, half = lane % 2, j = w0 + rr; /* this lane's key row */
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo),
                  rbase = (int64_t)blockIdx.x * seq;
    E *pt = reinterpret_cast<E *>(&st[warp][0][0]), *dst = reinterpret_cast<E *>(&dpt[warp][0][0]);

    load_tile_e<E, DH, C::BR>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
    load_tile_e<E, DH, C::BR>(vs, v + bq, ldq, j0, seq, dh, 1.0f);
    if (threadIdx.x < 16)
        ones[threadIdx.x] = 1.0f;
    M::frag_c dka[C::KT], dva[C::KT];
    GPP_UNROLL
    for (int f = 0; f < C::KT; f++) {
        M::zero(dka[f]);
        M::zero(dva[f]);
    }
    /* causal: queries before this block's first key see none of its keys */
    const int i_begin = causal ? j0 / C::BCB * C::BCB : 0;
    for (int i0 = i_begin; i0 < seq; i0 += C::BCB) {
        GPP_SYNC();
        load_tile_e<E, DH, C::BCB>(qs, q + bq, ldq, i0, seq, dh, scale);
        load_tile_e<E, DH, C::BCB>(dos, dout + bo, ldo, i0, seq, dh, 1.0f);
        for (int x = threadIdx.x; x < C::BCB; x += THREADS) {
            bool in = i0 + x < seq;
            ls[x] = in ? lse[rbase + i0 + x] : 0.0f;
            ds_[x] = in ? dsum[rbase + i0 + x] : 0.0f;
        }
        GPP_SYNC();
        /* S^T = K (scale Q)^T and dP^T = V dO^T: 16 keys x BC queries */
        tc_rows_product<DH, C::BCB>(&ks[16 * warp], qs, st[warp]);
        tc_rows_product<DH, C::BCB>(&vs[16 * warp], dos, dpt[warp]);
        GPP_SYNC_WARP();
        float pv[C::BCB / 2], dsv[C::BCB / 2];
        GPP_UNROLL
        for (int c = 0; c < C::BCB / 2; c++) {
            int col = half * (C::BCB / 2) + c, iq = i0 + col;
            bool keep = j < seq && iq < seq && (!causal || j <= iq);
            float p = keep ? gpp_math_expf(st[warp][rr][col] - ls[col]) : 0.0f;
            pv[c] = p;
            dsv[c] = p * (dpt[warp][rr][col] - ds_[col]);
        }
        GPP_SYNC_WARP(); /* every value read before P^T and dS^T overwrite them */
        GPP_UNROLL
        for (int c = 0; c < C::BCB / 2; c++) {
            int x = rr * C::BCB + half * (C::BCB / 2) + c;
            pt[x] = gpp_to_e<E>(pv[c]);
            dst[x] = gpp_to_e<E>(dsv[c]);
        }
        GPP_SYNC_WARP();
        /* dV += P^T dO, dK += dS^T (scale Q) */
        tc_acc_product<DH, C::BCB>(dva, pt, dos);
        tc_acc_product<DH, C::BCB>(dka, dst, qs);
    }
    GPP_SYNC();
    GPP_UNROLL
    for (int f = 0; f < C::KT; f++) {
        tc_store_rows(scr[warp], dka[f], dk + bq, ldq, w0, seq, 16 * f, dh, ones);
        tc_store_rows(scr[warp], dva[f], dv + bq, ldq, w0, seq, 16 * f, dh, ones);
    }
#endif
}

/* dQ: each warp owns 16 queries. grid (n heads, tc_cfg<DH>::blocks(seq)). */
template <int DH, typename E>
GPP_KERNEL void k_flash_tc_bwd_q(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                                 int causal, const float *q, const float *k, const float *v,
                                 const float *dout, const float *lse, const float *dsum, float *dq)
{
#if GPP_TC_BODY
    typedef tc_cfg<DH> C;
    namespace M = gpp_mma;
    GPP_SHARED GPP_ALIGN32 E qs[C::BR][DH]; /* scale q */
    GPP_SHARED GPP_ALIGN32 E dos[C::BR][DH];
    GPP_SHARED GPP_ALIGN32 E ks[C::BCB][DH];
    GPP_SHARED GPP_ALIGN32 E vs[C::BCB][DH];
    GPP_SHARED GPP_ALIGN32 float sw[C::WARPS][16][C::BCB];  /* S, then dS as E */
    GPP_SHARED GPP_ALIGN32 float dpw[C::WARPS][16][C::BCB]; /* dP */
    GPP_SHARED GPP_ALIGN32 float scr[C::WARPS][16][16];
    GPP_SHARED float scales[16];
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int i0 = (int)blockIdx.y * C::BR, w0 = i0 + 16 * warp;
    const int rr = lane / 2, half = lane % 2, i = w0 + rr; /* this lane's query row */
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo),
                  rbase = (int64_t)blockIdx.x * seq;
    E *dsw = reinterpret_cast<E *>(&sw[warp][0][0]);

    load_tile_e<E, DH, C::BR>(qs, q + bq, ldq, i0, seq, dh, scale);
    load_tile_e<E, DH, C::BR>(dos, dout + bo, ldo, i0, seq, dh, 1.0f);
    if (threadIdx.x < 16)
        scales[threadIdx.x] = scale;
    const float li = i < seq ? lse[rbase + i] : 0.0f, di = i < seq ? dsum[rbase + i] : 0.0f;
    M::frag_c dqa[C::KT];
    GPP_UNROLL
    for (int f = 0; f < C::KT; f++)
        M::zero(dqa[f]);
    const int kv_end = causal ? imin(seq, i0 + C::BR) : seq;
    for (int j0 = 0; j0 < kv_end; j0 += C::BCB) {
        GPP_SYNC();
        load_tile_e<E, DH, C::BCB>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
        load_tile_e<E, DH, C::BCB>(vs, v + bq, ldq, j0, seq, dh, 1.0f);
        GPP_SYNC();
        /* S = (scale Q) K^T and dP = dO V^T: 16 queries x BC keys */
        tc_rows_product<DH, C::BCB>(&qs[16 * warp], ks, sw[warp]);
        tc_rows_product<DH, C::BCB>(&dos[16 * warp], vs, dpw[warp]);
        GPP_SYNC_WARP();
        float dsv[C::BCB / 2];
        GPP_UNROLL
        for (int c = 0; c < C::BCB / 2; c++) {
            int col = half * (C::BCB / 2) + c, jk = j0 + col;
            bool keep = i < seq && jk < seq && (!causal || jk <= i);
            float p = keep ? gpp_math_expf(sw[warp][rr][col] - li) : 0.0f;
            dsv[c] = p * (dpw[warp][rr][col] - di);
        }
        GPP_SYNC_WARP();
        GPP_UNROLL
        for (int c = 0; c < C::BCB / 2; c++)
            dsw[rr * C::BCB + half * (C::BCB / 2) + c] = gpp_to_e<E>(dsv[c]);
        GPP_SYNC_WARP();
        /* dQ += dS K (the scale at the end) */
        tc_acc_product<DH, C::BCB>(dqa, dsw, ks);
    }
    GPP_SYNC();
    GPP_UNROLL
    for (int f = 0; f < C::KT; f++)
        tc_store_rows(scr[warp], dqa[f], dq + bq, ldq, w0, seq, 16 * f, dh, scales);
#endif
}

} /* namespace gpp_flash */

#endif
