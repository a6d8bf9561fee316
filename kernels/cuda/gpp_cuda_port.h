/* gpp_cuda_port: the few CUDA constructs a kernel written for both nvcc and
 * the host emulator may use. Private to kernels/cuda/ and its tests.
 *
 * A kernel header that sticks to these (and plain C++ arithmetic on global
 * and shared arrays) compiles twice: with nvcc for the device, and with the
 * host C++ compiler against gpp_cuda_emu.h, which runs each CUDA thread of a
 * block as a host thread. tests/unit/test_flash_emu.cc runs the fused
 * attention kernels that way, so their indexing, tiling, masking and
 * barriers are checked in CI on machines without a GPU.
 *
 *   GPP_KERNEL       __global__
 *   GPP_DEV          an inline device function
 *   GPP_SHARED       a block's shared array (declared inside the kernel)
 *   GPP_SYNC()       __syncthreads(): every thread of the block, uniformly
 *   gpp_shfl_xor     __shfl_xor_sync over the full warp: every thread of the
 *                    block must call it uniformly (the emulator's exchange is
 *                    block-wide)
 *   GPP_UNROLL       #pragma unroll (nothing on the host)
 *   GPP_ALIGN16      16-byte alignment of a shared array (for gpp_ld4)
 *   gpp_f4, gpp_ld4  float4 and a 16-byte load of 4 floats at a 16-byte
 *                    aligned address (one LDS.128 from shared memory)
 *   threadIdx, blockIdx, blockDim, gridDim   as in CUDA */
#ifndef GPP_CUDA_PORT_H
#define GPP_CUDA_PORT_H

#ifdef __CUDACC__

#define GPP_KERNEL __global__
#define GPP_DEV __device__ __forceinline__
#define GPP_SHARED __shared__
#define GPP_SYNC() __syncthreads()
#define GPP_UNROLL _Pragma("unroll")
#define GPP_ALIGN16 __align__(16)
template <typename V> __device__ __forceinline__ V gpp_shfl_xor(V v, int lane_mask)
{
    return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}
typedef float4 gpp_f4;
__device__ __forceinline__ gpp_f4 gpp_ld4(const float *p)
{
    return *reinterpret_cast<const float4 *>(p);
}

#else /* the host emulator */

#include "kernels/cuda/gpp_cuda_emu.h"
#define GPP_KERNEL
#define GPP_DEV inline
#define GPP_SHARED static
#define GPP_SYNC() gpp_emu::sync()
#define GPP_UNROLL
#define GPP_ALIGN16 __attribute__((aligned(16)))
template <typename V> inline V gpp_shfl_xor(V v, int lane_mask)
{
    return gpp_emu::shfl_xor(v, lane_mask);
}
struct gpp_f4 {
    float x, y, z, w;
};
inline gpp_f4 gpp_ld4(const float *p)
{
    if ((uintptr_t)p % 16 != 0) { /* the device would fault: misaligned address */
        std::fprintf(stderr, "gpp_cuda_emu: 16-byte load from %p, not 16-byte aligned\n",
                     (const void *)p);
        std::abort();
    }
    return gpp_f4{p[0], p[1], p[2], p[3]};
}

#endif
#endif
