/* gpp_cuda_port: the few CUDA constructs a kernel written for both nvcc and
 * the host emulator may use. Private to kernels/cuda/ and its tests.
 *
 * A kernel source that sticks to these (and plain C++ arithmetic on global
 * and shared arrays) compiles twice: with nvcc for the device, and with the
 * host C++ compiler against gpp_cuda_emu.h, which runs each CUDA thread of a
 * block as a fiber. tests/unit/test_flash_emu.cc runs the fused attention
 * kernels that way, so their indexing, tiling, masking and barriers are
 * checked in CI on machines without a GPU; kernels/cuda/emu/gpp_kern_emu.cc
 * compiles all of the backend's .cu files, launchers included, for the host
 * emulation of the CUDA backend.
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
 *   GPP_ALIGN16, GPP_ALIGN32   alignment of a shared array (gpp_ld4: 16
 *                    bytes; gpp_mma loads and stores: 32)
 *   gpp_f4, gpp_ld4, gpp_st4   float4, and a 16-byte load / store of 4
 *                    floats at a 16-byte aligned address (one LDS.128 from
 *                    shared memory, one LDG.128 / STG.128 in global)
 *   threadIdx, blockIdx, blockDim, gridDim   as in CUDA
 *   gpp_bf16, gpp_to_e<E>(x), gpp_from_e(x)   bfloat16 (round to nearest
 *                    even) and the conversions of an element type E (float
 *                    or gpp_bf16) from and to float
 *   gpp_mma::        16x16x16 warp matrix products (nvcuda::wmma on the
 *                    device): frag_a<E> (row-major A), frag_b<E> (row-major
 *                    B), frag_bt<E> (B = M^T of a row-major M: col-major),
 *                    frag_c (fp32 accumulator); load(f, p, ldm), load_c,
 *                    store_c (row-major), zero, mma(c, a, b): c += a b.
 *                    Every lane of the warp calls them; pointers 32-byte
 *                    aligned, ldm a multiple of 16 bytes. The emulator
 *                    holds a whole tile in each lane's fragment and checks
 *                    alignment and ldm as the device requires.
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
 *                    emulated runtime (kernels/cuda/emu/gpp_emu_rt.h), to
 *                    run in the emulator when the stream's work is forced. */
#ifndef GPP_CUDA_PORT_H
#define GPP_CUDA_PORT_H

#ifdef __CUDACC__

#include <cuda_bf16.h>
#include <mma.h>

#define GPP_KERNEL __global__
#define GPP_LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define GPP_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<grid, block, shmem, stream>>>
#define GPP_DEV __device__ __forceinline__
#define GPP_SHARED __shared__
#define GPP_SYNC() __syncthreads()
#define GPP_UNROLL _Pragma("unroll")
#define GPP_ALIGN16 __align__(16)
#define GPP_ALIGN32 __align__(32)
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

namespace gpp_mma
{
namespace w = nvcuda::wmma;
template <typename E> using frag_a = w::fragment<w::matrix_a, 16, 16, 16, E, w::row_major>;
template <typename E> using frag_b = w::fragment<w::matrix_b, 16, 16, 16, E, w::row_major>;
template <typename E> using frag_bt = w::fragment<w::matrix_b, 16, 16, 16, E, w::col_major>;
typedef w::fragment<w::accumulator, 16, 16, 16, float> frag_c;
template <typename F, typename E>
__device__ __forceinline__ void load(F &f, const E *p, unsigned ldm)
{
    w::load_matrix_sync(f, p, ldm);
}
__device__ __forceinline__ void load_c(frag_c &f, const float *p, unsigned ldm)
{
    w::load_matrix_sync(f, p, ldm, w::mem_row_major);
}
__device__ __forceinline__ void store_c(float *p, const frag_c &f, unsigned ldm)
{
    w::store_matrix_sync(p, f, ldm, w::mem_row_major);
}
__device__ __forceinline__ void zero(frag_c &f)
{
    w::fill_fragment(f, 0.0f);
}
template <typename A, typename B>
__device__ __forceinline__ void mma(frag_c &c, const A &a, const B &b)
{
    w::mma_sync(c, a, b, c);
}
} /* namespace gpp_mma */

#else /* the host emulator */

#include "kernels/cuda/gpp_cuda_emu.h"
#define GPP_KERNEL
#define GPP_LAUNCH_BOUNDS(n)
#define GPP_DEV inline
#define GPP_SHARED static
#define GPP_SYNC() gpp_emu::sync(__FILE__, __LINE__)
#define GPP_UNROLL
#define GPP_ALIGN16 __attribute__((aligned(16)))
#define GPP_ALIGN32 __attribute__((aligned(32)))
#define GPP_SYNC_WARP() gpp_emu::sync_warp(__FILE__, __LINE__)
/* file and line: of the call, to name the shuffle in the emulator's
 * messages */
template <typename V>
inline V gpp_shfl_xor(V v, int lane_mask, const char *file = __builtin_FILE(),
                      int line = __builtin_LINE())
{
    return gpp_emu::shfl_xor(v, lane_mask, file, line);
}
/* The emulator runs one thread at a time; atomic anyway, as the word may be
 * mapped host memory that a host thread reads (the fault word). */
inline int atomicCAS(int *address, int compare, int val)
{
    __atomic_compare_exchange_n(address, &compare, val, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return compare; /* the old value */
}
struct gpp_f4 {
    float x, y, z, w;
};
inline void gpp_emu_al16(const void *p, const char *what)
{
    if ((uintptr_t)p % 16 != 0) { /* the device would fault: misaligned address */
        std::fprintf(stderr, "gpp_cuda_emu: 16-byte %s at %p, not 16-byte aligned\n", what, p);
        std::abort();
    }
}
inline gpp_f4 gpp_ld4(const float *p)
{
    gpp_emu_al16(p, "load");
    return gpp_f4{p[0], p[1], p[2], p[3]};
}
inline void gpp_st4(float *p, gpp_f4 v)
{
    gpp_emu_al16(p, "store");
    p[0] = v.x;
    p[1] = v.y;
    p[2] = v.z;
    p[3] = v.w;
}

/* bfloat16: the top 16 bits of a float, rounded to nearest even */
struct gpp_bf16 {
    uint16_t bits;
};
template <typename E> inline E gpp_to_e(float x);
template <> inline float gpp_to_e<float>(float x)
{
    return x;
}
template <> inline gpp_bf16 gpp_to_e<gpp_bf16>(float x)
{
    uint32_t u;
    std::memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: the canonical one, as cvt.rn.bf16.f32 */
        return gpp_bf16{0x7fffu};
    u += 0x7fffu + ((u >> 16) & 1u);
    return gpp_bf16{(uint16_t)(u >> 16)};
}
inline float gpp_from_e(float x)
{
    return x;
}
inline float gpp_from_e(gpp_bf16 x)
{
    uint32_t u = (uint32_t)x.bits << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

namespace gpp_mma
{
template <typename E, bool COLMAJOR> struct frag {
    float v[16][16]; /* [row][col] of the tile, in every lane */
};
template <typename E> using frag_a = frag<E, false>;
template <typename E> using frag_b = frag<E, false>;
template <typename E> using frag_bt = frag<E, true>;
struct frag_c {
    float v[16][16];
};
inline void check(const void *p, unsigned ldm, size_t elem)
{
    if ((uintptr_t)p % 32 != 0 || (ldm * elem) % 16 != 0) {
        std::fprintf(stderr,
                     "gpp_cuda_emu: wmma access at %p with ldm %u (%zu-byte elements): the "
                     "device needs a 32-byte aligned pointer and ldm a multiple of 16 bytes\n",
                     p, ldm, elem);
        std::abort();
    }
}
template <typename E, bool CM> void load(frag<E, CM> &f, const E *p, unsigned ldm)
{
    check(p, ldm, sizeof(E));
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.v[r][c] = gpp_from_e(CM ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c]);
}
inline void load_c(frag_c &f, const float *p, unsigned ldm)
{
    check(p, ldm, 4);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            f.v[r][c] = p[(size_t)r * ldm + c];
}
inline void store_c(float *p, const frag_c &f, unsigned ldm)
{
    check(p, ldm, 4);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            p[(size_t)r * ldm + c] = f.v[r][c];
}
inline void zero(frag_c &f)
{
    std::memset(f.v, 0, sizeof f.v);
}
template <typename E, bool CA, bool CB>
void mma(frag_c &c, const frag<E, CA> &a, const frag<E, CB> &b)
{
    for (int r = 0; r < 16; r++)
        for (int n = 0; n < 16; n++) {
            float acc = c.v[r][n];
            for (int k = 0; k < 16; k++)
                acc += a.v[r][k] * b.v[k][n];
            c.v[r][n] = acc;
        }
}
} /* namespace gpp_mma */

#if __has_include(<cuda_runtime_api.h>)
#include "kernels/cuda/emu/gpp_emu_rt.h"

namespace gpp_emu
{
/* A kernel argument that is a pointer must point into device or
 * page-locked memory (or be null): a host pointer handed to a kernel is an
 * illegal address on the device, and here it would silently work. */
template <typename T> inline void check_arg(const T &, int, const char *)
{
}
template <typename T> inline void check_arg(T *p, int i, const char *name)
{
    if (p && mem_lookup(p, 1) == MEM_PAGEABLE) {
        std::fprintf(stderr,
                     "gpp_cuda_emu: kernel %s: argument %d (%p) points to neither device nor "
                     "page-locked memory: an illegal address on the device\n",
                     name, i, (const void *)p);
        std::abort();
    }
}

/* GPP_LAUNCH on the host: what `kernel<<<grid, block, shmem, stream>>>`
 * becomes. what: "kernel <name>" (a literal: the runtime may keep it). */
template <typename... P> struct launcher {
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    const char *what;

    /* P by value: the arguments convert as in a call of the kernel */
    void operator()(P... args) const
    {
        unsigned long long threads = (unsigned long long)block.x * block.y * block.z;
        /* the device's limits (CUDA C++ Programming Guide, "Compute
         * capabilities", sm_80 and sm_90): threads per block and block x, y
         * <= 1024, block z <= 64, grid x < 2^31, grid y, z <= 65535 */
        if (threads < 1 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64 ||
            grid.x < 1 || grid.x > 0x7fffffffu || grid.y < 1 || grid.y > 65535 || grid.z < 1 ||
            grid.z > 65535) {
            set_last_error(cudaErrorInvalidConfiguration);
            return;
        }
        /* dynamic shared memory past the default 48 KiB needs an opt-in
         * (cudaFuncSetAttribute) that the port does not have; the port's
         * kernels declare no dynamic shared array, so below it is unused */
        if (shmem > 48u << 10) {
            set_last_error(cudaErrorInvalidValue);
            return;
        }
        void (*k)(P...) = kernel;
        gpp_emu_dim3 g{grid.x, grid.y, grid.z}, b{block.x, block.y, block.z};
        const char *name = what + sizeof "kernel " - 1;
        int i = 0;
        (check_arg(args, i++, name), ...);
        (void)i;
        enqueue(stream, what, [=] {
            launch(
                g, b, [&] { k(args...); }, name);
        });
    }
};
template <typename... P>
launcher<P...> make_launcher(dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                             const char *what, void (*kernel)(P...))
{
    return launcher<P...>{kernel, grid, block, shmem, stream, what};
}
} /* namespace gpp_emu */

#define GPP_LAUNCH(grid, block, shmem, stream, ...)                                                \
    gpp_emu::make_launcher(grid, block, shmem, stream, "kernel " #__VA_ARGS__, __VA_ARGS__)
#endif /* <cuda_runtime_api.h> */

#endif
#endif
