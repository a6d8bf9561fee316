/* gpp_cuda_port: the few CUDA constructs a kernel written for both nvcc and
 * the host emulator may use. Private to kernels/cuda/ and its tests.
 *
 * A kernel source that sticks to these (and plain C++ arithmetic on global
 * and shared arrays) compiles twice: with nvcc for the device (the half
 * below), and in the tests with the host C++ compiler, where
 * tests/emu/gpp_emu_port.h defines them on a block emulator that runs each
 * CUDA thread as a fiber (test_flash_emu; the host emulation of the CUDA
 * backend, docs/gpu.md). The product never includes the emulation.
 *
 *   GPP_KERNEL       __global__
 *   GPP_LAUNCH_BOUNDS(n)   __launch_bounds__(n) (nothing on the host)
 *   GPP_DEV          an inline device function
 *   GPP_SHARED       a block's shared array (declared inside the kernel)
 *   GPP_SYNC()       __syncthreads(): every thread of the block, uniformly
 *   gpp_shfl_xor     __shfl_xor_sync over the full warp: every lane of the
 *                    warp must call it (a warp that returned as a whole
 *                    need not)
 *   GPP_UNROLL       #pragma unroll (nothing on the host)
 *   GPP_SYNC_WARP()  __syncwarp(): every lane of the warp
 *   GPP_ALIGN16      alignment of a shared array (gpp_ld4: 16 bytes)
 *   gpp_f4, gpp_ld4, gpp_st4   float4, and a 16-byte load / store of 4
 *                    floats at a 16-byte aligned address (one LDS.128 from
 *                    shared memory, one LDG.128 / STG.128 in global)
 *   gpp_st8_bf16(p, a, b)   one 16-byte store of the 8 floats a, b
 *                    rounded to bf16 (nearest even) at a 16-byte aligned p;
 *   gpp_st4_bf16(p, a)      one 8-byte store of a's 4, 8-byte aligned
 *   threadIdx, blockIdx, blockDim, gridDim   as in CUDA
 *   gpp_exp2_approx(x)   2^x on the SFU (ex2.approx.ftz.f32: relative
 *                    error about 2^-22, subnormal results flushed to 0,
 *                    2^-inf = 0); the host computes exp2f
 *   gpp_bf16, gpp_to_e<E>(x), gpp_from_e(x)   bfloat16 (round to nearest
 *                    even) and the conversions of an element type E (float
 *                    or gpp_bf16) from and to float
 *   gpp_mma16::      the warp matrix product mma.sync.m16n8k16 (row.col,
 *                    fp32 accumulators) on pairs of elements of type E:
 *                    x2<E> (two elements; on the device one 32-bit
 *                    register, the first element in its low half),
 *                    pack<E>(lo, hi) (rounds two floats), ld2 / st2 (a
 *                    32-bit shared-memory load / store of two consecutive
 *                    elements, aligned to their size), ldx / stx (the
 *                    same of an x2<E> array element), mma(c, a, b):
 *                    c[4] += A B for A 16x16 (a[4]), B 16x8 (b[2]), each
 *                    lane holding the elements the PTX ISA assigns it
 *                    ("Matrix fragments for mma.m16n8k16 with floating
 *                    point type": with g = lane / 4, t = lane % 4, a[0]
 *                    is A[g][2t, 2t+1], a[1] A[g+8][2t..], a[2] A[g][2t+8..],
 *                    a[3] A[g+8][2t+8..]; b[0] B[2t, 2t+1][g], b[1]
 *                    B[2t+8..][g]; c[0], c[1] C[g][2t, 2t+1], c[2], c[3]
 *                    C[g+8][2t..]). Every lane of a whole warp calls mma.
 *                    The device has E = gpp_bf16 only (sm_80+); the
 *                    emulator also takes E = float, exchanges the
 *                    fragments across the warp at a warp barrier and
 *                    multiplies by that layout, so a kernel that indexes
 *                    its fragments wrongly gets wrong results here too.
 *   atomicCAS(int *, int, int)   as in CUDA
 *   GPP_LAUNCH(grid, block, shmem, stream, kernel...)(args...)
 *                    kernel<<<grid, block, shmem, stream>>>(args...) (the
 *                    kernel last, so that k<A, B> may hold a comma). On the
 *                    host (where <cuda_runtime_api.h> is on the include
 *                    path): the arguments are converted to the kernel's
 *                    parameters and kept by value, the configuration is
 *                    checked as the device checks it (a bad one sets the
 *                    last error, cudaErrorInvalidConfiguration, and queues
 *                    nothing), and the grid is queued on the stream of the
 *                    emulated runtime (tests/emu/gpp_emu_rt.h), to
 *                    run in the emulator when the stream's work is forced. */
#ifndef GPP_CUDA_PORT_H
#define GPP_CUDA_PORT_H

#include "kernels/cuda/gpp_cuda_act.h" /* gpp_cuk_t */

#ifdef __CUDACC__

#include <cuda_bf16.h>
#include <stdint.h>

#define GPP_KERNEL __global__
#define GPP_LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define GPP_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#define GPP_DEV __device__ __forceinline__
#define GPP_SHARED __shared__
#define GPP_SYNC() __syncthreads()
#define GPP_UNROLL _Pragma("unroll")
#define GPP_ALIGN16 __align__(16)
#define GPP_SYNC_WARP() __syncwarp()
template <typename V> __device__ __forceinline__ V gpp_shfl_xor(V v, int lane_mask)
{
    return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
typedef float4 gpp_f4;
__device__ __forceinline__ gpp_f4 gpp_ld4(const float *p)
{
    return *reinterpret_cast<const float4 *>(p);
}
__device__ __forceinline__ void gpp_st4(float *p, gpp_f4 v)
{
    *reinterpret_cast<float4 *>(p) = v;
}

__device__ __forceinline__ float gpp_exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

typedef __nv_bfloat16 gpp_bf16;
template <typename E> __device__ __forceinline__ E gpp_to_e(float x);
template <> __device__ __forceinline__ float gpp_to_e<float>(float x)
{
    return x;
}
template <> __device__ __forceinline__ gpp_bf16 gpp_to_e<gpp_bf16>(float x)
{
    return __float2bfloat16_rn(x);
}
__device__ __forceinline__ float gpp_from_e(float x)
{
    return x;
}
__device__ __forceinline__ float gpp_from_e(gpp_bf16 x)
{
    return __bfloat162float(x);
}
/* two rounded floats as one 32-bit word, the first in the low half */
__device__ __forceinline__ uint32_t gpp_bf16x2_bits(float lo, float hi)
{
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t *>(&h);
}
/* 4 bf16 at an 8-byte aligned p, one 8-byte load, as floats */
__device__ __forceinline__ gpp_f4 gpp_ld4_bf16(const gpp_bf16 *p)
{
    uint2 u = *reinterpret_cast<const uint2 *>(p);
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u),
                       __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xffff0000u));
}
__device__ __forceinline__ void gpp_st4_bf16(gpp_bf16 *p, gpp_f4 a)
{
    *reinterpret_cast<uint2 *>(p) =
        make_uint2(gpp_bf16x2_bits(a.x, a.y), gpp_bf16x2_bits(a.z, a.w));
}
__device__ __forceinline__ void gpp_st8_bf16(gpp_bf16 *p, gpp_f4 a, gpp_f4 b)
{
    *reinterpret_cast<uint4 *>(p) =
        make_uint4(gpp_bf16x2_bits(a.x, a.y), gpp_bf16x2_bits(a.z, a.w), gpp_bf16x2_bits(b.x, b.y),
                   gpp_bf16x2_bits(b.z, b.w));
}

namespace gpp_mma16
{
template <typename E> struct x2;
template <> struct x2<gpp_bf16> {
    uint32_t u;
};
template <typename E> __device__ __forceinline__ x2<E> pack(float lo, float hi);
template <> __device__ __forceinline__ x2<gpp_bf16> pack<gpp_bf16>(float lo, float hi)
{
    return x2<gpp_bf16>{gpp_bf16x2_bits(lo, hi)};
}
__device__ __forceinline__ x2<gpp_bf16> ld2(const gpp_bf16 *p)
{
    return x2<gpp_bf16>{*reinterpret_cast<const uint32_t *>(p)};
}
__device__ __forceinline__ void st2(gpp_bf16 *p, x2<gpp_bf16> v)
{
    *reinterpret_cast<uint32_t *>(p) = v.u;
}
template <typename E> __device__ __forceinline__ x2<E> ldx(const x2<E> *p)
{
    return *p;
}
template <typename E> __device__ __forceinline__ void stx(x2<E> *p, x2<E> v)
{
    *p = v;
}
__device__ __forceinline__ void mma(float (&c)[4], const x2<gpp_bf16> (&a)[4],
                                    const x2<gpp_bf16> (&b)[2])
{
#if __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0].u), "r"(a[1].u), "r"(a[2].u), "r"(a[3].u), "r"(b[0].u), "r"(b[1].u));
#else
    __trap(); /* bf16 products need sm_80: kernels using them compile empty before */
#endif
}
} /* namespace gpp_mma16 */

#elif !defined(GPP_EMU_PORT_H)
#error "the kernels compile with nvcc, or on the host through the test emulation (tests/emu/gpp_emu_port.h, included first)"
#endif

/* ---- a gpp_cuk_t's elements (gpp_cuda_kern.h: fp32 or bf16, chosen per
 * tensor at run time), on the device and the host alike ---- */
GPP_DEV float gpp_ldt(gpp_cuk_t t, int64_t i)
{
    return t.bf16 ? gpp_from_e(((const gpp_bf16 *)t.p)[i]) : ((const float *)t.p)[i];
}
GPP_DEV void gpp_stt(gpp_cuk_t t, int64_t i, float v)
{
    if (t.bf16)
        ((gpp_bf16 *)t.p)[i] = gpp_to_e<gpp_bf16>(v);
    else
        ((float *)t.p)[i] = v;
}
/* elements i .. i + 3 in one access: 16 bytes of fp32 or 8 of bf16, at an
 * address aligned to it (gpp_cuk_al4) */
GPP_DEV gpp_f4 gpp_ldt4(gpp_cuk_t t, int64_t i)
{
    return t.bf16 ? gpp_ld4_bf16((const gpp_bf16 *)t.p + i) : gpp_ld4((const float *)t.p + i);
}
GPP_DEV void gpp_stt4(gpp_cuk_t t, int64_t i, gpp_f4 v)
{
    if (t.bf16)
        gpp_st4_bf16((gpp_bf16 *)t.p + i, v);
    else
        gpp_st4((float *)t.p + i, v);
}
/* whether t.p is aligned for gpp_ldt4 / gpp_stt4 (an absent t is) */
static inline int gpp_cuk_al4(gpp_cuk_t t)
{
    return (uintptr_t)t.p % (t.bf16 ? 8 : 16) == 0;
}
#endif
