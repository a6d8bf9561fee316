/* gpp_cuda_flash: launchers of the fused attention kernels (fp32:
 * gpp_cuda_flash.cuh; bf16 on tensor cores: gpp_cuda_flash_tc.cuh; declared
 * in gpp_cuda_kern.h; which one runs: gpp_cuda_attention_core).
 * Written to gpp_cuda_port.h: nvcc compiles it for the device, and
 * tests/emu/gpp_kern_emu.cc for the host emulation. */
#include "kernels/cuda/gpp_cuda_flash_tc.cuh"
#include "kernels/cuda/gpp_cuda_kern.h"
#include "kernels/cuda/gpp_cuda_port.h"

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

/* The arguments every kernel of a core takes: q, k, v, dout, o, dq, dk, dv
 * of element type S (float, or gpp_bf16: the attention op over bf16
 * tensors), lse and dsum fp32. */
struct s_args_t {
    int64_t batch, heads, seq, dh, ldq, ldo;
    float scale;
    int causal;
    const void *q, *k, *v, *dout;
    const float *lse, *dsum;
    void *o, *dq, *dk, *dv;
    float *out_lse;
};

/* One core's forward and backward at tier DH: grid (batch, row blocks) */
template <int DH, bool TC, typename S> struct s_core {
    static const S *c(const void *p)
    {
        return (const S *)p;
    }
    static S *m(void *p)
    {
        return (S *)p;
    }
    static dim3 grid(const s_args_t &a)
    {
        if constexpr (TC)
            return dim3((unsigned)a.batch, tc_cfg<DH>::blocks(a.seq));
        else
            return dim3((unsigned)a.batch, cfg<DH>::blocks(a.seq));
    }
    static cudaError_t fwd(cudaStream_t st, const s_args_t &a)
    {
        if constexpr (TC)
            GPP_LAUNCH(grid(a), THREADS, 0, st, gpp_flash::k_flash_tc_fwd<DH, gpp_bf16, S>)
        ((int)a.seq, (int)a.dh, (int)a.heads, a.ldq, a.ldo, a.scale, a.causal, c(a.q), c(a.k),
         c(a.v), m(a.o), a.out_lse);
        else GPP_LAUNCH(grid(a), THREADS, 0, st, gpp_flash::k_flash_fwd<DH, S>)(
            (int)a.seq, (int)a.dh, (int)a.heads, a.ldq, a.ldo, a.scale, a.causal, c(a.q), c(a.k),
            c(a.v), m(a.o), a.out_lse);
        return cudaGetLastError();
    }
    static cudaError_t bwd(cudaStream_t st, const s_args_t &a)
    {
        if constexpr (TC)
            GPP_LAUNCH(grid(a), THREADS, 0, st, gpp_flash::k_flash_tc_bwd_kv<DH, gpp_bf16, S>)
        ((int)a.seq, (int)a.dh, (int)a.heads, a.ldq, a.ldo, a.scale, a.causal, c(a.q), c(a.k),
         c(a.v), c(a.dout), a.lse, a.dsum, m(a.dk), m(a.dv));
        else GPP_LAUNCH(grid(a), THREADS, 0, st, gpp_flash::k_flash_bwd_kv<DH, S>)(
            (int)a.seq, (int)a.dh, (int)a.heads, a.ldq, a.ldo, a.scale, a.causal, c(a.q), c(a.k),
            c(a.v), c(a.dout), a.lse, a.dsum, m(a.dk), m(a.dv));
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
        if constexpr (TC)
            GPP_LAUNCH(grid(a), THREADS, 0, st, gpp_flash::k_flash_tc_bwd_q<DH, gpp_bf16, S>)
        ((int)a.seq, (int)a.dh, (int)a.heads, a.ldq, a.ldo, a.scale, a.causal, c(a.q), c(a.k),
         c(a.v), c(a.dout), a.lse, a.dsum, m(a.dq));
        else GPP_LAUNCH(grid(a), THREADS, 0, st, gpp_flash::k_flash_bwd_q<DH, S>)(
            (int)a.seq, (int)a.dh, (int)a.heads, a.ldq, a.ldo, a.scale, a.causal, c(a.q), c(a.k),
            c(a.v), c(a.dout), a.lse, a.dsum, m(a.dq));
        return cudaGetLastError();
    }
};

/* The forward (bwd 0) or backward of one core (tensor cores: TC) with
 * global I/O of type S at a's head size's tier: 16, 32, 64, and 128 for
 * the fp32 core; cudaErrorInvalidValue for a head size the core lacks. */
template <bool TC, typename S>
static cudaError_t s_tier(cudaStream_t st, const s_args_t &a, int bwd)
{
#define S_CALL(DH) (bwd ? s_core<DH, TC, S>::bwd(st, a) : s_core<DH, TC, S>::fwd(st, a))
    switch (TC ? gpp_flash::tc_tier(a.dh) : gpp_flash::tier(a.dh)) {
    case 16:
        return S_CALL(16);
    case 32:
        return S_CALL(32);
    case 64:
        return S_CALL(64);
    case 128:
        if constexpr (!TC)
            return S_CALL(128);
        break;
    }
    return cudaErrorInvalidValue;
#undef S_CALL
}

/* Runs the forward (bwd 0) or backward of a core: the tensor-core one when
 * tc (which must have the head size's tier: 16, 32, 64), else the fp32 one
 * (16, 32, 64, 128); with io_bf16 over bf16 q, k, v, O, dO, dQ, dK, dV. */
static cudaError_t s_run(cudaStream_t st, const s_args_t &a, int tc, int io_bf16, int bwd)
{
    if (tc)
        return io_bf16 ? s_tier<true, gpp_bf16>(st, a, bwd) : s_tier<true, float>(st, a, bwd);
    return io_bf16 ? s_tier<false, gpp_bf16>(st, a, bwd) : s_tier<false, float>(st, a, bwd);
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
                                         int causal, int tc, int io_bf16, const void *q,
                                         const void *k, const void *v, void *o, float *lse)
{
    if (!s_shape_ok(n, heads, seq, dh))
        return cudaErrorInvalidValue;
    if (n * heads == 0 || seq == 0)
        return cudaSuccess;
    s_args_t a = {};
    a.batch = n * heads, a.heads = heads, a.seq = seq, a.dh = dh, a.ldq = ldq, a.ldo = ldo;
    a.scale = scale, a.causal = causal, a.q = q, a.k = k, a.v = v, a.o = o, a.out_lse = lse;
    return s_run(st, a, tc, io_bf16, 0);
}

extern "C" cudaError_t gpp_cuk_flash_bwd(cudaStream_t st, int64_t n, int64_t heads, int64_t seq,
                                         int64_t dh, int64_t ldq, int64_t ldo, float scale,
                                         int causal, int tc, int io_bf16, const void *q,
                                         const void *k, const void *v, const void *out,
                                         const void *dout, const float *lse, float *dsum, void *dq,
                                         void *dk, void *dv)
{
    if (!s_shape_ok(n, heads, seq, dh))
        return cudaErrorInvalidValue;
    int64_t rows = n * heads * seq;
    if (rows == 0)
        return cudaSuccess;
    if (io_bf16)
        GPP_LAUNCH((unsigned)((rows + THREADS - 1) / THREADS), THREADS, 0, st,
                   gpp_flash::k_flash_rowdot<gpp_bf16>)
    (rows, (int)seq, (int)dh, (int)heads, ldo, (const gpp_bf16 *)out, (const gpp_bf16 *)dout, dsum);
    else GPP_LAUNCH((unsigned)((rows + THREADS - 1) / THREADS), THREADS, 0, st,
                    gpp_flash::k_flash_rowdot<float>)(
        rows, (int)seq, (int)dh, (int)heads, ldo, (const float *)out, (const float *)dout, dsum);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return e;
    s_args_t a = {};
    a.batch = n * heads, a.heads = heads, a.seq = seq, a.dh = dh, a.ldq = ldq, a.ldo = ldo;
    a.scale = scale, a.causal = causal, a.q = q, a.k = k, a.v = v, a.dout = dout, a.lse = lse;
    a.dsum = dsum, a.dq = dq, a.dk = dk, a.dv = dv;
    return s_run(st, a, tc, io_bf16, 1);
}
