/* gpp_cuda_flash: launchers of the fused attention kernels
 * (gpp_cuda_flash.cuh; declared in gpp_cuda_kern.h). */
#include "kernels/cuda/gpp_cuda_flash.cuh"
#include "kernels/cuda/gpp_cuda_kern.h"

using gpp_flash::cfg;
using gpp_flash::THREADS;

/* The grid's y dimension holds the row blocks: at most 65535. */
static bool s_shape_ok(int64_t batch, int64_t seq, int64_t dh)
{
    return batch >= 0 && batch <= 0x7fffffff && seq >= 0 && seq <= 65535 * 32 &&
           gpp_flash::tier(dh) != 0;
}

template <int DH>
static cudaError_t s_fwd(cudaStream_t st, int64_t batch, int64_t seq, int64_t dh, float scale,
                         int causal, const float *q, const float *k, const float *v, float *o,
                         float *lse)
{
    dim3 grid((unsigned)batch, cfg<DH>::blocks(seq));
    gpp_flash::k_flash_fwd<DH>
        <<<grid, THREADS, 0, st>>>((int)seq, (int)dh, scale, causal, q, k, v, o, lse);
    return cudaGetLastError();
}

template <int DH>
static cudaError_t s_bwd(cudaStream_t st, int64_t batch, int64_t seq, int64_t dh, float scale,
                         int causal, const float *q, const float *k, const float *v,
                         const float *dout, const float *lse, const float *dsum, float *dq,
                         float *dk, float *dv)
{
    dim3 grid((unsigned)batch, cfg<DH>::blocks(seq));
    gpp_flash::k_flash_bwd_kv<DH><<<grid, THREADS, 0, st>>>((int)seq, (int)dh, scale, causal, q, k,
                                                            v, dout, lse, dsum, dk, dv);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    gpp_flash::k_flash_bwd_q<DH>
        <<<grid, THREADS, 0, st>>>((int)seq, (int)dh, scale, causal, q, k, v, dout, lse, dsum, dq);
    return cudaGetLastError();
}

extern "C" int gpp_cuk_flash_supports(int64_t dh)
{
    return gpp_flash::tier(dh) != 0;
}

extern "C" cudaError_t gpp_cuk_flash_fwd(cudaStream_t st, int64_t batch, int64_t seq, int64_t dh,
                                         float scale, int causal, const float *q, const float *k,
                                         const float *v, float *o, float *lse)
{
    if (!s_shape_ok(batch, seq, dh))
        return cudaErrorInvalidValue;
    if (batch == 0 || seq == 0)
        return cudaSuccess;
    switch (gpp_flash::tier(dh)) {
    case 16:
        return s_fwd<16>(st, batch, seq, dh, scale, causal, q, k, v, o, lse);
    case 32:
        return s_fwd<32>(st, batch, seq, dh, scale, causal, q, k, v, o, lse);
    case 64:
        return s_fwd<64>(st, batch, seq, dh, scale, causal, q, k, v, o, lse);
    default:
        return s_fwd<128>(st, batch, seq, dh, scale, causal, q, k, v, o, lse);
    }
}

extern "C" cudaError_t gpp_cuk_flash_bwd(cudaStream_t st, int64_t n, int64_t heads, int64_t seq,
                                         int64_t dh, float scale, int causal, const float *q,
                                         const float *k, const float *v, const float *out,
                                         const float *dout, const float *dout_hm, const float *lse,
                                         float *dsum, float *dq, float *dk, float *dv)
{
    int64_t batch = n * heads, rows = batch * seq;
    if (heads < 1 || !s_shape_ok(batch, seq, dh))
        return cudaErrorInvalidValue;
    if (rows == 0)
        return cudaSuccess;
    int64_t blocks = (rows + THREADS - 1) / THREADS;
    if (blocks > 0x7fffffff)
        return cudaErrorInvalidValue;
    gpp_flash::k_flash_rowdot<<<(unsigned)blocks, THREADS, 0, st>>>(rows, (int)seq, (int)heads,
                                                                    (int)dh, out, dout, dsum);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    switch (gpp_flash::tier(dh)) {
    case 16:
        return s_bwd<16>(st, batch, seq, dh, scale, causal, q, k, v, dout_hm, lse, dsum, dq, dk,
                         dv);
    case 32:
        return s_bwd<32>(st, batch, seq, dh, scale, causal, q, k, v, dout_hm, lse, dsum, dq, dk,
                         dv);
    case 64:
        return s_bwd<64>(st, batch, seq, dh, scale, causal, q, k, v, dout_hm, lse, dsum, dq, dk,
                         dv);
    default:
        return s_bwd<128>(st, batch, seq, dh, scale, causal, q, k, v, dout_hm, lse, dsum, dq, dk,
                          dv);
    }
}
