/* gpp_cuda_flash: launchers of the fused attention kernels (fp32:
 * gpp_cuda_flash.cuh; bf16 on tensor cores: gpp_cuda_flash_tc.cuh; declared
 * in gpp_cuda_kern.h). */
#include "kernels/cuda/gpp_cuda_flash_tc.cuh"
#include "kernels/cuda/gpp_cuda_kern.h"

using gpp_flash::cfg;
using gpp_flash::tc_cfg;
using gpp_flash::THREADS;

/* batch = n heads in the grid's x dimension (< 2^31), the row blocks in y
 * (<= 65535 blocks of >= 32 rows) */
static bool s_shape_ok(int64_t n, int64_t heads, int64_t seq, int64_t dh)
{
    return n >= 0 && heads >= 1 && heads <= 0x7fffffff && n <= 0x7fffffff / heads && seq >= 0 &&
           seq <= 65535 * 32 && gpp_flash::tier(dh) != 0;
}

template <int DH>
static cudaError_t s_fwd(cudaStream_t st, int64_t batch, int64_t heads, int64_t seq, int64_t dh,
                         int64_t ldq, int64_t ldo, float scale, int causal, const float *q,
                         const float *k, const float *v, float *o, float *lse)
{
    dim3 grid((unsigned)batch, cfg<DH>::blocks(seq));
    gpp_flash::k_flash_fwd<DH><<<grid, THREADS, 0, st>>>((int)seq, (int)dh, (int)heads, ldq, ldo,
                                                         scale, causal, q, k, v, o, lse);
    return cudaGetLastError();
}

template <int DH>
static cudaError_t s_bwd(cudaStream_t st, int64_t batch, int64_t heads, int64_t seq, int64_t dh,
                         int64_t ldq, int64_t ldo, float scale, int causal, const float *q,
                         const float *k, const float *v, const float *dout, const float *lse,
                         const float *dsum, float *dq, float *dk, float *dv)
{
    dim3 grid((unsigned)batch, cfg<DH>::blocks(seq));
    gpp_flash::k_flash_bwd_kv<DH><<<grid, THREADS, 0, st>>>(
        (int)seq, (int)dh, (int)heads, ldq, ldo, scale, causal, q, k, v, dout, lse, dsum, dk, dv);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    gpp_flash::k_flash_bwd_q<DH><<<grid, THREADS, 0, st>>>(
        (int)seq, (int)dh, (int)heads, ldq, ldo, scale, causal, q, k, v, dout, lse, dsum, dq);
    return cudaGetLastError();
}

template <int DH>
static cudaError_t s_tc_fwd(cudaStream_t st, int64_t batch, int64_t heads, int64_t seq, int64_t dh,
                            int64_t ldq, int64_t ldo, float scale, int causal, const float *q,
                            const float *k, const float *v, float *o, float *lse)
{
    dim3 grid((unsigned)batch, tc_cfg<DH>::blocks(seq));
    gpp_flash::k_flash_tc_fwd<DH, gpp_bf16><<<grid, THREADS, 0, st>>>(
        (int)seq, (int)dh, (int)heads, ldq, ldo, scale, causal, q, k, v, o, lse);
    return cudaGetLastError();
}

template <int DH>
static cudaError_t s_tc_bwd(cudaStream_t st, int64_t batch, int64_t heads, int64_t seq, int64_t dh,
                            int64_t ldq, int64_t ldo, float scale, int causal, const float *q,
                            const float *k, const float *v, const float *dout, const float *lse,
                            const float *dsum, float *dq, float *dk, float *dv)
{
    dim3 grid((unsigned)batch, tc_cfg<DH>::blocks(seq));
    gpp_flash::k_flash_tc_bwd_kv<DH, gpp_bf16><<<grid, THREADS, 0, st>>>(
        (int)seq, (int)dh, (int)heads, ldq, ldo, scale, causal, q, k, v, dout, lse, dsum, dk, dv);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    gpp_flash::k_flash_tc_bwd_q<DH, gpp_bf16><<<grid, THREADS, 0, st>>>(
        (int)seq, (int)dh, (int)heads, ldq, ldo, scale, causal, q, k, v, dout, lse, dsum, dq);
    return cudaGetLastError();
}

extern "C" int gpp_cuk_flash_supports(int64_t dh)
{
    return gpp_flash::tier(dh) != 0;
}

extern "C" int gpp_cuk_flash_tc_supports(int64_t dh)
{
    return gpp_flash::tc_tier(dh) != 0;
}

extern "C" cudaError_t gpp_cuk_flash_fwd(cudaStream_t st, int64_t n, int64_t heads, int64_t seq,
                                         int64_t dh, int64_t ldq, int64_t ldo, float scale,
                                         int causal, int bf16, const float *q, const float *k,
                                         const float *v, float *o, float *lse)
{
    if (!s_shape_ok(n, heads, seq, dh))
        return cudaErrorInvalidValue;
    int64_t b = n * heads;
    if (b == 0 || seq == 0)
        return cudaSuccess;
#define S_FWD(DH) s_fwd<DH>(st, b, heads, seq, dh, ldq, ldo, scale, causal, q, k, v, o, lse)
#define S_TC_FWD(DH) s_tc_fwd<DH>(st, b, heads, seq, dh, ldq, ldo, scale, causal, q, k, v, o, lse)
    if (bf16)
        switch (gpp_flash::tc_tier(dh)) {
        case 16:
            return S_TC_FWD(16);
        case 32:
            return S_TC_FWD(32);
        case 64:
            return S_TC_FWD(64);
        default:
            break; /* larger heads: the fp32 core */
        }
#undef S_TC_FWD
    switch (gpp_flash::tier(dh)) {
    case 16:
        return S_FWD(16);
    case 32:
        return S_FWD(32);
    case 64:
        return S_FWD(64);
    default:
        return S_FWD(128);
    }
#undef S_FWD
}

extern "C" cudaError_t gpp_cuk_flash_bwd(cudaStream_t st, int64_t n, int64_t heads, int64_t seq,
                                         int64_t dh, int64_t ldq, int64_t ldo, float scale,
                                         int causal, int bf16, const float *q, const float *k,
                                         const float *v, const float *out, const float *dout,
                                         const float *lse, float *dsum, float *dq, float *dk,
                                         float *dv)
{
    if (!s_shape_ok(n, heads, seq, dh))
        return cudaErrorInvalidValue;
    int64_t b = n * heads, rows = b * seq;
    if (rows == 0)
        return cudaSuccess;
    gpp_flash::k_flash_rowdot<<<(unsigned)((rows + THREADS - 1) / THREADS), THREADS, 0, st>>>(
        rows, (int)seq, (int)dh, (int)heads, ldo, out, dout, dsum);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
#define S_BWD(DH)                                                                                  \
    s_bwd<DH>(st, b, heads, seq, dh, ldq, ldo, scale, causal, q, k, v, dout, lse, dsum, dq, dk, dv)
#define S_TC_BWD(DH)                                                                               \
    s_tc_bwd<DH>(st, b, heads, seq, dh, ldq, ldo, scale, causal, q, k, v, dout, lse, dsum, dq, dk, \
                 dv)
    if (bf16)
        switch (gpp_flash::tc_tier(dh)) {
        case 16:
            return S_TC_BWD(16);
        case 32:
            return S_TC_BWD(32);
        case 64:
            return S_TC_BWD(64);
        default:
            break;
        }
#undef S_TC_BWD
    switch (gpp_flash::tier(dh)) {
    case 16:
        return S_BWD(16);
    case 32:
        return S_BWD(32);
    case 64:
        return S_BWD(64);
    default:
        return S_BWD(128);
    }
#undef S_BWD
}
