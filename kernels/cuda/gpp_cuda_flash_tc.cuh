/* gpp_cuda_flash_tc: the fused attention core on tensor cores, for
 * precision bf16 (gpp_cuda_flash.cuh is the fp32 CUDA-core one; same
 * method, layouts, stash and results up to bf16 rounding).
 *
 * FlashAttention-2's kernel structure on the warp-level product
 * mma.sync.m16n8k16 (gpp_mma16 in gpp_cuda_port.h): E = bf16 operands,
 * fp32 accumulation, as PyTorch's bf16 flash attention computes. q (times
 * the scale), k, v and dO are rounded to bf16 when a tile is staged in
 * shared memory, and so are the probabilities P before P V and dS before
 * dS K and dS^T Q. Softmax, the running max and sum, lse and dsum stay
 * fp32.
 *
 * A block is 4 warps; each warp owns 16 rows (queries in the forward and
 * in dQ, keys in dK/dV), so a block covers 64 rows, and streams the other
 * side through shared memory in tiles (64 keys in the forward, 32 rows in
 * the backward). The scores never leave registers: an accumulator tile of
 * mma.m16n8k16 holds, in lane 4g + t, rows g and g + 8 and columns 2t,
 * 2t + 1 of each 8 columns, which is also the layout of the A operand of
 * the next product, so P (or dS) goes from the scores' registers straight
 * into P V (FlashAttention-2's register reuse). A row's max and sum are
 * reduced over its 4 lanes with two shuffles; each lane keeps its own
 * partial sum until the end. The row's rescale applies to the output
 * accumulators in place (their layout is known, unlike wmma's).
 *
 * Shared tiles, laid out so that every fragment load is one 32-bit load
 * with no bank conflict:
 *   row-major [rows][DH + 8]: the A operand (rows of Q, K, V, dO) and a B
 *     operand that is a row-major matrix transposed (K in Q K^T); the 8
 *     pad elements make the 8 rows a fragment load touches fall in
 *     different banks (a staging store: stage_rows);
 *   transposed [DH][R rows / 2] of element pairs: a B operand that is a
 *     row-major matrix as is (V in P V, dO in P^T dO, Q in dS^T Q, K in
 *     dS K), each 32-bit word two consecutive rows of one column, its
 *     position swizzled by an xor of the column (swz) so that both the
 *     fragment loads and the staging stores (a warp writes 32 columns of
 *     one row pair) hit 32 different banks (at DH 16 the stores are
 *     2-way: a warp writes 16 columns of two row pairs).
 * The emulator counts the conflicts (test_flash_emu requires none at DH 32
 * and 64).
 *
 * Head sizes up to 64 (tiers 16, 32, 64; columns past dh are zero);
 * larger heads run the fp32 core. Static shared memory: 26.0 KiB forward,
 * 35.3 KiB dK/dV, 31.0 KiB dQ at DH 64.
 *
 * Templated on E so that the host test also runs the same code with E =
 * float (no rounding), which checks the indexing and the fragment layout
 * (the emulator multiplies by the PTX ISA's layout) to fp32 accuracy; the
 * device instantiates E = gpp_bf16 only. */
#ifndef GPP_CUDA_FLASH_TC_CUH
#define GPP_CUDA_FLASH_TC_CUH

#include "kernels/cuda/gpp_cuda_flash.cuh"

/* bf16 products need sm_80: a device pass for an older architecture
 * compiles the kernels empty (the backend never launches them on such a
 * device: gpp_cuda_ops.c checks the compute capability). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GPP_TC_BODY 0
#else
#define GPP_TC_BODY 1
#endif

namespace gpp_flash
{

template <int DH> struct tc_cfg {
    static_assert(DH == 16 || DH == 32 || DH == 64, "tensor-core tiers: 16, 32, 64");
    static constexpr int WARPS = THREADS / 32; /* 4 */
    static constexpr int BR = 16 * WARPS;      /* rows per block */
    static constexpr int BC = 64;              /* streamed rows per tile: forward */
    static constexpr int BCB = 32;             /* and backward */
    static constexpr int SP = DH + 8;          /* row stride of a row-major tile */
    static constexpr int KT = DH / 16;         /* 16-column steps over a head */
    static constexpr int NT = DH / 8;          /* 8-column output tiles of a head */
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

using gpp_mma16::x2;

/* log2 e: the kernels exponentiate with the SFU's 2^x (gpp_exp2_approx),
 * as FlashAttention-2 does; its relative error (about 2^-22) is far below
 * the bf16 rounding of P that follows */
constexpr float L2E = 1.4426950408889634f;

/* The xor that places column c's word in a transposed tile of R rows (R / 2
 * words a column). Fragment loads read columns n0 + g (n0 a multiple of 8,
 * g < 8) at words w0 + t (w0 a multiple of 4, t < 4); staging writes 32
 * consecutive columns (from a multiple of 32) at one word. R = 64: bank =
 * word ^ (4 (c % 8) + (c / 8) % 4); R = 32: bank = 16 (c % 2) + (word ^
 * (4 ((c / 2) % 4) + (c / 8) % 4)); 32 different banks in both cases. */
template <int R> GPP_DEV int swz(int c)
{
    static_assert(R == 32 || R == 64, "transposed tiles of 32 or 64 rows");
    return R == 64 ? 4 * (c & 7) + ((c >> 3) & 3) : 4 * ((c >> 1) & 3) + ((c >> 3) & 3);
}

/* dst[r][c] (row stride DH + 8) = E(mul src[(r0 + r) ld + c]), 0 past nrows
 * rows or dh columns: two columns per thread, one 32-bit store. A warp's
 * store covers 32 / W rows of W = DH / 2 words, W / 4 rows apart, whose
 * offsets r (W + 4) % 32 are then 32 / W disjoint runs of W banks (DH 32:
 * rows r, r + 4 at 0 and 16; DH 16: r, r + 2, r + 4, r + 6 at 0, 24, 16,
 * 8); 8 rows take W / 4 warp steps. */
template <typename E, int DH, int ROWS, typename S>
GPP_DEV void stage_rows(E *dst, const S *src, int64_t ld, int r0, int nrows, int dh, float mul)
{
    constexpr int W = DH / 2, STEP = W / 4;
    static_assert(ROWS % 8 == 0, "rows in blocks of 8");
    for (int x = threadIdx.x; x < ROWS * W; x += THREADS) {
        const int k = x / 32, lane = x % 32;
        int r = k / STEP * 8 + k % STEP + STEP * (lane / W), c = 2 * (lane % W), j = r0 + r;
        float v0 = 0.0f, v1 = 0.0f;
        if (j < nrows) {
            const S *s = src + (int64_t)j * ld + c;
            v0 = c < dh ? mul * gpp_from_e(s[0]) : 0.0f;
            v1 = c + 1 < dh ? mul * gpp_from_e(s[1]) : 0.0f;
        }
        gpp_mma16::st2(dst + r * (DH + 8) + c, gpp_mma16::pack<E>(v0, v1));
    }
}

/* The transposed tile of rows r0 .. r0 + R - 1 of src (columns < DH): word
 * (c, p) = E(mul src[r0 + 2p][c]), E(mul src[r0 + 2p + 1][c]), 0 past nrows
 * rows or dh columns */
template <typename E, int DH, int R, typename S>
GPP_DEV void stage_t(x2<E> *dst, const S *src, int64_t ld, int r0, int nrows, int dh, float mul)
{
    for (int x = threadIdx.x; x < DH * (R / 2); x += THREADS) {
        int c = x % DH, p = x / DH, j = r0 + 2 * p;
        float v0 = 0.0f, v1 = 0.0f;
        if (c < dh) {
            if (j < nrows)
                v0 = mul * gpp_from_e(src[(int64_t)j * ld + c]);
            if (j + 1 < nrows)
                v1 = mul * gpp_from_e(src[(int64_t)(j + 1) * ld + c]);
        }
        gpp_mma16::stx(&dst[c * (R / 2) + (p ^ swz<R>(c))], gpp_mma16::pack<E>(v0, v1));
    }
}

/* The A operand (16 x 16): rows m0.., columns k0.. of a row-major tile. g =
 * lane / 4, t = lane % 4. */
template <typename E, int DH>
GPP_DEV void frag_a(x2<E> (&a)[4], const E *tile, int m0, int k0, int g, int t)
{
    const E *p = tile + (m0 + g) * (DH + 8) + k0 + 2 * t;
    a[0] = gpp_mma16::ld2(p);
    a[1] = gpp_mma16::ld2(p + 8 * (DH + 8));
    a[2] = gpp_mma16::ld2(p + 8);
    a[3] = gpp_mma16::ld2(p + 8 * (DH + 8) + 8);
}

/* The B operand (16 x 8) B[k][n] = M[n0 + n][k0 + k] of a row-major tile M
 * (a product with M^T) */
template <typename E, int DH>
GPP_DEV void frag_bt(x2<E> (&b)[2], const E *tile, int n0, int k0, int g, int t)
{
    const E *p = tile + (n0 + g) * (DH + 8) + k0 + 2 * t;
    b[0] = gpp_mma16::ld2(p);
    b[1] = gpp_mma16::ld2(p + 8);
}

/* The B operand (16 x 8) B[k][n] = X[k0 + k][n0 + n] of a matrix X held as
 * a transposed tile of R rows (stage_t) */
template <typename E, int R>
GPP_DEV void frag_b(x2<E> (&b)[2], const x2<E> *tile, int n0, int k0, int g, int t)
{
    const int c = n0 + g, s = swz<R>(c);
    b[0] = gpp_mma16::ldx(&tile[c * (R / 2) + ((k0 / 2 + t) ^ s)]);
    b[1] = gpp_mma16::ldx(&tile[c * (R / 2) + ((k0 / 2 + 4 + t) ^ s)]);
}

/* The A operand (16 x 16) made of two accumulator tiles (16 x 8 each: the
 * columns 0-7 and 8-15), rounded to E: the accumulator's layout is the A
 * operand's */
template <typename E>
GPP_DEV void frag_a_acc(x2<E> (&a)[4], const float (&lo)[4], const float (&hi)[4])
{
    a[0] = gpp_mma16::pack<E>(lo[0], lo[1]);
    a[1] = gpp_mma16::pack<E>(lo[2], lo[3]);
    a[2] = gpp_mma16::pack<E>(hi[0], hi[1]);
    a[3] = gpp_mma16::pack<E>(hi[2], hi[3]);
}

/* s (16 x N) = A M^T: A the warp's 16 x DH operand (fragments a[k] for
 * columns 16k..), M the N rows of a row-major tile */
template <typename E, int DH, int N>
GPP_DEV void rows_product(float (&s)[N / 8][4], const x2<E> (&a)[DH / 16][4], const E *m, int g,
                          int t)
{
    GPP_UNROLL
    for (int nt = 0; nt < N / 8; nt++) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        GPP_UNROLL
        for (int kk = 0; kk < DH / 16; kk++) {
            x2<E> b[2];
            frag_bt<E, DH>(b, m, 8 * nt, 16 * kk, g, t);
            gpp_mma16::mma(s[nt], a[kk], b);
        }
    }
}

/* s = A M^T and s2 = A2 M2^T (16 x N each): A, A2 the rows m0.. m0 + 15
 * of two row-major tiles, M, M2 the N rows of two others; the A fragments
 * loaded a 16-column step at a time (fewer registers live than
 * rows_product's whole-row fragments) */
template <typename E, int DH, int N>
GPP_DEV void rows_product2(float (&s)[N / 8][4], float (&s2)[N / 8][4], const E *a_tile,
                           const E *a2_tile, int m0, const E *m, const E *m2, int g, int t)
{
    GPP_UNROLL
    for (int nt = 0; nt < N / 8; nt++)
        GPP_UNROLL
    for (int e = 0; e < 4; e++)
        s[nt][e] = s2[nt][e] = 0.0f;
    GPP_UNROLL
    for (int kk = 0; kk < DH / 16; kk++) {
        x2<E> a[4], a2[4];
        frag_a<E, DH>(a, a_tile, m0, 16 * kk, g, t);
        frag_a<E, DH>(a2, a2_tile, m0, 16 * kk, g, t);
        GPP_UNROLL
        for (int nt = 0; nt < N / 8; nt++) {
            x2<E> b[2];
            frag_bt<E, DH>(b, m, 8 * nt, 16 * kk, g, t);
            gpp_mma16::mma(s[nt], a, b);
            frag_bt<E, DH>(b, m2, 8 * nt, 16 * kk, g, t);
            gpp_mma16::mma(s2[nt], a2, b);
        }
    }
}

/* acc (16 x DH) += A X: A the 16 x N accumulator tiles a (rounded to E),
 * X the N x DH matrix held as a transposed tile of N rows; with TWO, also
 * acc2 += A2 X2, interleaved a 16-row step at a time (written as two
 * calls, dK/dV took 255 registers and spilled) */
template <typename E, int DH, int N, bool TWO = false>
GPP_DEV void acc_product(float (&acc)[DH / 8][4], const float (&a)[N / 8][4], const x2<E> *xt,
                         float (&acc2)[DH / 8][4], const float (&a2)[N / 8][4], const x2<E> *xt2,
                         int g, int t)
{
    GPP_UNROLL
    for (int kk = 0; kk < N / 16; kk++) {
        x2<E> fa[4], fa2[4];
        frag_a_acc<E>(fa, a[2 * kk], a[2 * kk + 1]);
        if constexpr (TWO)
            frag_a_acc<E>(fa2, a2[2 * kk], a2[2 * kk + 1]);
        GPP_UNROLL
        for (int f = 0; f < DH / 8; f++) {
            x2<E> b[2];
            frag_b<E, N>(b, xt, 8 * f, 16 * kk, g, t);
            gpp_mma16::mma(acc[f], fa, b);
            if constexpr (TWO) {
                frag_b<E, N>(b, xt2, 8 * f, 16 * kk, g, t);
                gpp_mma16::mma(acc2[f], fa2, b);
            }
        }
    }
}

/* The max (op 0) or sum (op 1) of x over the 4 lanes of a row (lanes 4g ..
 * 4g + 3) */
template <int OP> GPP_DEV float quad(float x)
{
    GPP_UNROLL
    for (int o = 1; o <= 2; o *= 2) {
        float y = gpp_shfl_xor(x, o);
        x = OP == 0 ? fmaxf(x, y) : x + y;
    }
    return x;
}

/* Writes a warp's 16 x DH accumulators (rows row0 + g, row0 + g + 8) times
 * mul_a / mul_b (per row) to global rows of stride ld, columns < dh, rows <
 * nrows */
template <int DH, typename S>
GPP_DEV void store_acc(const float (&acc)[DH / 8][4], S *dst, int64_t ld, int row0, int nrows,
                       int dh, int g, int t, float mul_a, float mul_b)
{
    const int ra = row0 + g, rb = ra + 8;
    GPP_UNROLL
    for (int f = 0; f < DH / 8; f++)
        GPP_UNROLL
    for (int e = 0; e < 2; e++) {
        int c = 8 * f + 2 * t + e;
        if (c < dh) {
            if (ra < nrows)
                dst[(int64_t)ra * ld + c] = gpp_to_e<S>(acc[f][e] * mul_a);
            if (rb < nrows)
                dst[(int64_t)rb * ld + c] = gpp_to_e<S>(acc[f][2 + e] * mul_b);
        }
    }
}

/* grid (n heads, tc_cfg<DH>::blocks(seq)), THREADS threads */
template <int DH, typename E, typename S = float>
GPP_KERNEL void k_flash_tc_fwd(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                               int causal, const S *q, const S *k, const S *v, S *o, float *lse)
{
#if GPP_TC_BODY
    typedef tc_cfg<DH> C;
    GPP_SHARED GPP_ALIGN16 E qs[C::BR * C::SP]; /* scale q */
    GPP_SHARED GPP_ALIGN16 E ks[C::BC * C::SP];
    GPP_SHARED GPP_ALIGN16 x2<E> vt[DH * C::BC / 2]; /* V transposed */
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int i0 = (int)blockIdx.y * C::BR, w0 = i0 + 16 * warp;
    const int ia = w0 + g, ib = ia + 8; /* this lane's two query rows */
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo);

    stage_rows<E, DH, C::BR>(qs, q + bq, ldq, i0, seq, dh, scale);
    GPP_SYNC();
    x2<E> qa[C::KT][4];
    GPP_UNROLL
    for (int kk = 0; kk < C::KT; kk++)
        frag_a<E, DH>(qa[kk], qs, 16 * warp, 16 * kk, g, t);
    float acc[C::NT][4];
    GPP_UNROLL
    for (int f = 0; f < C::NT; f++)
        acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.0f;
    /* running max of rows ia and ib (over their 4 lanes), this lane's part
     * of their sums */
    float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f;
    const int kv_end = causal ? imin(seq, i0 + C::BR) : seq;
    for (int j0 = 0; j0 < kv_end; j0 += C::BC) {
        GPP_SYNC(); /* the previous tiles are consumed */
        stage_rows<E, DH, C::BC>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
        stage_t<E, DH, C::BC>(vt, v + bq, ldq, j0, seq, dh, 1.0f);
        GPP_SYNC();
        /* S = (scale Q) K^T: 16 x BC, 8 columns a tile */
        float s[C::BC / 8][4];
        rows_product<E, DH, C::BC>(s, qa, ks, g, t);
        /* the mask, where the tile has keys past seq or (causal) past
         * the warp's first row: the same for the warp's 32 lanes */
        if (j0 + C::BC > seq || (causal && j0 + C::BC - 1 > w0))
            GPP_UNROLL
        for (int nt = 0; nt < C::BC / 8; nt++)
            GPP_UNROLL
        for (int e = 0; e < 2; e++) {
            int j = j0 + 8 * nt + 2 * t + e;
            if (j >= seq || (causal && j > ia))
                s[nt][e] = -INFINITY;
            if (j >= seq || (causal && j > ib))
                s[nt][2 + e] = -INFINITY;
        }
        float mxa = ma, mxb = mb;
        GPP_UNROLL
        for (int nt = 0; nt < C::BC / 8; nt++) {
            mxa = fmaxf(mxa, fmaxf(s[nt][0], s[nt][1]));
            mxb = fmaxf(mxb, fmaxf(s[nt][2], s[nt][3]));
        }
        mxa = quad<0>(mxa);
        mxb = quad<0>(mxb);
        /* p = 2^(s log2 e - m log2 e): one multiply-add and the SFU's ex2.
         * A row with no key yet (past seq, or all masked) keeps max -inf:
         * its offset is 0, so its p are 2^-inf = 0 and its alpha 0. */
        const float oa = mxa == -INFINITY ? 0.0f : mxa * L2E;
        const float ob = mxb == -INFINITY ? 0.0f : mxb * L2E;
        const float aa = gpp_exp2_approx(ma * L2E - oa), ab = gpp_exp2_approx(mb * L2E - ob);
        float sa = 0.0f, sb = 0.0f;
        GPP_UNROLL
        for (int nt = 0; nt < C::BC / 8; nt++)
            GPP_UNROLL
        for (int e = 0; e < 2; e++) {
            s[nt][e] = gpp_exp2_approx(s[nt][e] * L2E - oa);
            s[nt][2 + e] = gpp_exp2_approx(s[nt][2 + e] * L2E - ob);
            sa += s[nt][e];
            sb += s[nt][2 + e];
        }
        la = la * aa + sa;
        lb = lb * ab + sb;
        ma = mxa;
        mb = mxb;
        /* O = diag(alpha) O + P V */
        GPP_UNROLL
        for (int f = 0; f < C::NT; f++) {
            acc[f][0] *= aa;
            acc[f][1] *= aa;
            acc[f][2] *= ab;
            acc[f][3] *= ab;
        }
        acc_product<E, DH, C::BC>(acc, s, vt, acc, s, vt, g, t);
    }
    la = quad<1>(la);
    lb = quad<1>(lb);
    store_acc<DH>(acc, o + bo, ldo, w0, seq, dh, g, t, 1.0f / la, 1.0f / lb);
    if (t == 0) {
        if (ia < seq)
            lse[(int64_t)blockIdx.x * seq + ia] = ma + logf(la);
        if (ib < seq)
            lse[(int64_t)blockIdx.x * seq + ib] = mb + logf(lb);
    }
#endif
}

/* dK, dV: each warp owns 16 keys. grid (n heads, tc_cfg<DH>::blocks(seq)). */
template <int DH, typename E, typename S = float>
GPP_KERNEL void k_flash_tc_bwd_kv(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                                  int causal, const S *q, const S *k, const S *v, const S *dout,
                                  const float *lse, const float *dsum, S *dk, S *dv)
{
#if GPP_TC_BODY
    typedef tc_cfg<DH> C;
    GPP_SHARED GPP_ALIGN16 E ks[C::BR * C::SP];
    GPP_SHARED GPP_ALIGN16 E vs[C::BR * C::SP];
    GPP_SHARED GPP_ALIGN16 E qs[C::BCB * C::SP];                            /* scale q */
    GPP_SHARED GPP_ALIGN16 E dos[C::BCB * C::SP];                           /* dO */
    GPP_SHARED GPP_ALIGN16 x2<E> qt[DH * C::BCB / 2], dot[DH * C::BCB / 2]; /* transposed */
    GPP_SHARED float ls[C::BCB], dss[C::BCB];
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int j0 = (int)blockIdx.y * C::BR, w0 = j0 + 16 * warp;
    const int ja = w0 + g, jb = ja + 8; /* this lane's two key rows */
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo),
                  rbase = (int64_t)blockIdx.x * seq;

    stage_rows<E, DH, C::BR>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
    stage_rows<E, DH, C::BR>(vs, v + bq, ldq, j0, seq, dh, 1.0f);
    float dka[C::NT][4], dva[C::NT][4];
    GPP_UNROLL
    for (int f = 0; f < C::NT; f++)
        GPP_UNROLL
    for (int e = 0; e < 4; e++)
        dka[f][e] = dva[f][e] = 0.0f;
    /* causal: queries before this block's first key see none of its keys */
    const int i_begin = causal ? j0 / C::BCB * C::BCB : 0;
    for (int i0 = i_begin; i0 < seq; i0 += C::BCB) {
        GPP_SYNC();
        stage_rows<E, DH, C::BCB>(qs, q + bq, ldq, i0, seq, dh, scale);
        stage_t<E, DH, C::BCB>(qt, q + bq, ldq, i0, seq, dh, scale);
        stage_rows<E, DH, C::BCB>(dos, dout + bo, ldo, i0, seq, dh, 1.0f);
        stage_t<E, DH, C::BCB>(dot, dout + bo, ldo, i0, seq, dh, 1.0f);
        for (int x = threadIdx.x; x < C::BCB; x += THREADS) {
            bool in = i0 + x < seq;
            ls[x] = in ? lse[rbase + i0 + x] * L2E : 0.0f;
            dss[x] = in ? dsum[rbase + i0 + x] : 0.0f;
        }
        GPP_SYNC();
        /* S^T = K (scale Q)^T and dP^T = V dO^T: 16 keys x BCB queries */
        float st[C::BCB / 8][4], dpt[C::BCB / 8][4];
        rows_product2<E, DH, C::BCB>(st, dpt, ks, vs, 16 * warp, qs, dos, g, t);
        /* P^T, then dS^T = P^T (dP^T - dsum) */
        GPP_UNROLL
        for (int nt = 0; nt < C::BCB / 8; nt++)
            GPP_UNROLL
        for (int e = 0; e < 2; e++) {
            const int col = 8 * nt + 2 * t + e, iq = i0 + col;
            const bool qin = iq < seq;
            float pa = qin && ja < seq && (!causal || ja <= iq)
                           ? gpp_exp2_approx(st[nt][e] * L2E - ls[col])
                           : 0.0f;
            float pb = qin && jb < seq && (!causal || jb <= iq)
                           ? gpp_exp2_approx(st[nt][2 + e] * L2E - ls[col])
                           : 0.0f;
            st[nt][e] = pa;
            st[nt][2 + e] = pb;
            dpt[nt][e] = pa * (dpt[nt][e] - dss[col]);
            dpt[nt][2 + e] = pb * (dpt[nt][2 + e] - dss[col]);
        }
        /* dV += P^T dO, dK += dS^T (scale Q) */
        acc_product<E, DH, C::BCB, true>(dva, st, dot, dka, dpt, qt, g, t);
    }
    store_acc<DH>(dka, dk + bq, ldq, w0, seq, dh, g, t, 1.0f, 1.0f);
    store_acc<DH>(dva, dv + bq, ldq, w0, seq, dh, g, t, 1.0f, 1.0f);
#endif
}

/* dQ: each warp owns 16 queries. grid (n heads, tc_cfg<DH>::blocks(seq)). */
template <int DH, typename E, typename S = float>
GPP_KERNEL void k_flash_tc_bwd_q(int seq, int dh, int heads, int64_t ldq, int64_t ldo, float scale,
                                 int causal, const S *q, const S *k, const S *v, const S *dout,
                                 const float *lse, const float *dsum, S *dq)
{
#if GPP_TC_BODY
    typedef tc_cfg<DH> C;
    GPP_SHARED GPP_ALIGN16 E qs[C::BR * C::SP]; /* scale q */
    GPP_SHARED GPP_ALIGN16 E dos[C::BR * C::SP];
    GPP_SHARED GPP_ALIGN16 E ks[C::BCB * C::SP];
    GPP_SHARED GPP_ALIGN16 E vs[C::BCB * C::SP];
    GPP_SHARED GPP_ALIGN16 x2<E> kt[DH * C::BCB / 2]; /* K transposed */
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32;
    const int g = lane / 4, t = lane % 4;
    const int i0 = (int)blockIdx.y * C::BR, w0 = i0 + 16 * warp;
    const int ia = w0 + g, ib = ia + 8; /* this lane's two query rows */
    const int64_t bq = head_base(blockIdx.x, heads, seq, dh, ldq);
    const int64_t bo = head_base(blockIdx.x, heads, seq, dh, ldo),
                  rbase = (int64_t)blockIdx.x * seq;

    stage_rows<E, DH, C::BR>(qs, q + bq, ldq, i0, seq, dh, scale);
    stage_rows<E, DH, C::BR>(dos, dout + bo, ldo, i0, seq, dh, 1.0f);
    /* lse in log2 units */
    const float la = ia < seq ? lse[rbase + ia] * L2E : 0.0f,
                lb = ib < seq ? lse[rbase + ib] * L2E : 0.0f;
    const float da = ia < seq ? dsum[rbase + ia] : 0.0f, db = ib < seq ? dsum[rbase + ib] : 0.0f;
    GPP_SYNC();
    x2<E> qa[C::KT][4], doa[C::KT][4];
    GPP_UNROLL
    for (int kk = 0; kk < C::KT; kk++) {
        frag_a<E, DH>(qa[kk], qs, 16 * warp, 16 * kk, g, t);
        frag_a<E, DH>(doa[kk], dos, 16 * warp, 16 * kk, g, t);
    }
    float dqa[C::NT][4];
    GPP_UNROLL
    for (int f = 0; f < C::NT; f++)
        dqa[f][0] = dqa[f][1] = dqa[f][2] = dqa[f][3] = 0.0f;
    const int kv_end = causal ? imin(seq, i0 + C::BR) : seq;
    for (int j0 = 0; j0 < kv_end; j0 += C::BCB) {
        GPP_SYNC();
        stage_rows<E, DH, C::BCB>(ks, k + bq, ldq, j0, seq, dh, 1.0f);
        stage_t<E, DH, C::BCB>(kt, k + bq, ldq, j0, seq, dh, 1.0f);
        stage_rows<E, DH, C::BCB>(vs, v + bq, ldq, j0, seq, dh, 1.0f);
        GPP_SYNC();
        /* S = (scale Q) K^T and dP = dO V^T: 16 queries x BCB keys */
        float s[C::BCB / 8][4], dp[C::BCB / 8][4];
        rows_product<E, DH, C::BCB>(s, qa, ks, g, t);
        rows_product<E, DH, C::BCB>(dp, doa, vs, g, t);
        /* dS = P (dP - dsum), into s */
        GPP_UNROLL
        for (int nt = 0; nt < C::BCB / 8; nt++)
            GPP_UNROLL
        for (int e = 0; e < 2; e++) {
            const int jk = j0 + 8 * nt + 2 * t + e;
            const bool kin = jk < seq;
            float pa = kin && ia < seq && (!causal || jk <= ia)
                           ? gpp_exp2_approx(s[nt][e] * L2E - la)
                           : 0.0f;
            float pb = kin && ib < seq && (!causal || jk <= ib)
                           ? gpp_exp2_approx(s[nt][2 + e] * L2E - lb)
                           : 0.0f;
            s[nt][e] = pa * (dp[nt][e] - da);
            s[nt][2 + e] = pb * (dp[nt][2 + e] - db);
        }
        /* dQ += dS K (the scale at the end) */
        acc_product<E, DH, C::BCB>(dqa, s, kt, dqa, s, kt, g, t);
    }
    store_acc<DH>(dqa, dq + bq, ldq, w0, seq, dh, g, t, scale, scale);
#endif
}

} /* namespace gpp_flash */

#endif
