/* gpp_emu_port: the host half of kernels/cuda/gpp_cuda_port.h, for the test
 * emulation only. Include it before any kernel source or header: it defines
 * the port's constructs on the block emulator (gpp_cuda_emu.h: each CUDA
 * thread a fiber) and then includes the port, whose device half is for
 * nvcc. Where <cuda_runtime_api.h> is on the include path, GPP_LAUNCH
 * queues the grid on the emulated runtime's stream (gpp_emu_rt.h), checking
 * the configuration and every pointer argument as the device would. */
#ifndef GPP_EMU_PORT_H
#define GPP_EMU_PORT_H

#ifdef __CUDACC__
#error "gpp_emu_port.h is the host emulation: not for nvcc"
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/gpp_cuda_act.h" /* gpp_cuk_t */
#include "tests/emu/gpp_cuda_emu.h"


#define GPP_KERNEL
#define GPP_LAUNCH_BOUNDS(n)
#define GPP_DEV inline
#define GPP_SHARED static
#define GPP_SYNC() gpp_emu::sync(__FILE__, __LINE__)
#define GPP_UNROLL
#define GPP_ALIGN16 __attribute__((aligned(16)))
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

inline float gpp_exp2_approx(float x)
{
    return std::exp2(x);
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
inline gpp_f4 gpp_ld4_bf16(const gpp_bf16 *p)
{
    if ((uintptr_t)p % 8 != 0) { /* the device would fault: misaligned address */
        std::fprintf(stderr, "gpp_cuda_emu: 8-byte load at %p, not 8-byte aligned\n",
                     (const void *)p);
        std::abort();
    }
    return gpp_f4{gpp_from_e(p[0]), gpp_from_e(p[1]), gpp_from_e(p[2]), gpp_from_e(p[3])};
}
inline void gpp_st4_bf16(gpp_bf16 *p, gpp_f4 a)
{
    if ((uintptr_t)p % 8 != 0) { /* the device would fault: misaligned address */
        std::fprintf(stderr, "gpp_cuda_emu: 8-byte store at %p, not 8-byte aligned\n", (void *)p);
        std::abort();
    }
    const float v[4] = {a.x, a.y, a.z, a.w};
    for (int i = 0; i < 4; i++)
        p[i] = gpp_to_e<gpp_bf16>(v[i]);
}
inline void gpp_st8_bf16(gpp_bf16 *p, gpp_f4 a, gpp_f4 b)
{
    gpp_emu_al16(p, "store");
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    for (int i = 0; i < 8; i++)
        p[i] = gpp_to_e<gpp_bf16>(v[i]);
}

namespace gpp_mma16
{
template <typename E> struct x2 {
    E lo, hi;
};
template <typename E> inline x2<E> pack(float lo, float hi)
{
    return x2<E>{gpp_to_e<E>(lo), gpp_to_e<E>(hi)};
}
template <typename E> inline void check2(const E *p, const char *what)
{
    if ((uintptr_t)p % (2 * sizeof(E)) != 0) { /* the device would fault */
        std::fprintf(stderr, "gpp_cuda_emu: element-pair %s at %p, not %zu-byte aligned\n", what,
                     (const void *)p, 2 * sizeof(E));
        std::abort();
    }
}
/* file and line: of the call, for the emulator's bank check */
template <typename E>
inline x2<E> ld2(const E *p, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    check2(p, "load");
    gpp_emu::bank_record(p, 2 * sizeof(E), file, line);
    return x2<E>{p[0], p[1]};
}
template <typename E>
inline void st2(E *p, x2<E> v, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    check2(p, "store");
    gpp_emu::bank_record(p, 2 * sizeof(E), file, line);
    p[0] = v.lo;
    p[1] = v.hi;
}
template <typename E>
inline x2<E> ldx(const x2<E> *p, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    gpp_emu::bank_record(p, sizeof *p, file, line);
    return *p;
}
template <typename E>
inline void stx(x2<E> *p, x2<E> v, const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    gpp_emu::bank_record(p, sizeof *p, file, line);
    *p = v;
}
/* file and line: of the call, to name it in the emulator's messages */
template <typename E>
inline void mma(float (&c)[4], const x2<E> (&a)[4], const x2<E> (&b)[2],
                const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    float af[8], bf[4];
    for (int r = 0; r < 4; r++) {
        af[2 * r] = gpp_from_e(a[r].lo);
        af[2 * r + 1] = gpp_from_e(a[r].hi);
    }
    for (int r = 0; r < 2; r++) {
        bf[2 * r] = gpp_from_e(b[r].lo);
        bf[2 * r + 1] = gpp_from_e(b[r].hi);
    }
    gpp_emu::mma_m16n8k16(c, af, bf, file, line);
}
} /* namespace gpp_mma16 */

#if __has_include(<cuda_runtime_api.h>)
#include "tests/emu/gpp_emu_rt.h"

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
inline void check_arg(const gpp_cuk_t &t, int i, const char *name)
{
    check_arg(t.p, i, name);
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

#include "kernels/cuda/gpp_cuda_port.h"

#endif
