/* gpp_cuda_emu: runs a kernel written to gpp_cuda_port.h on the host, each
 * CUDA thread of a block as a fiber (ucontext) of the calling thread. Host
 * C++ only; private to kernels/cuda/ and its tests
 * (tests/unit/test_flash_emu.cc).
 *
 *   gpp_emu::launch({gx, gy, 1}, {threads, 1, 1}, [&] { k_foo<64>(...); });
 *
 * runs the blocks one after another (x fastest, then y, then z). Within a
 * block, each fiber runs until its next GPP_SYNC() (or its end), then the
 * next fiber: a barrier is a round in which every fiber reached it, so a
 * block's static "shared" arrays are used by one block at a time, and the
 * run is deterministic. gpp_shfl_xor is an exchange through a block-wide
 * buffer between two barriers: stricter than the device (where it is per
 * warp), and enough to run code that is correct there. A barrier that not
 * every thread of the block reaches (a __syncthreads or shuffle inside
 * divergent code, undefined on the device) is reported and aborts.
 *
 * What it does not model: warps (lanes of one warp are not lock-step),
 * memory spaces, the device's float rounding (the host compiler decides
 * whether a*b+c is fused), and performance. */
#ifndef GPP_CUDA_EMU_H
#define GPP_CUDA_EMU_H

#ifdef __CUDACC__
#error "gpp_cuda_emu.h is the host emulator: not for nvcc"
#endif

#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

struct gpp_emu_dim3 {
    unsigned x = 1, y = 1, z = 1;
};
/* CUDA's built-in indices (threadIdx: of the fiber running) */
inline gpp_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace gpp_emu
{

struct fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    bool done;
};

struct state {
    ucontext_t sched;
    std::vector<fiber> fibers;
    std::vector<uint64_t> xchg; /* one shuffle slot per thread */
    const std::function<void()> *fn = nullptr;
    unsigned cur = 0;
};
inline state g;

/* A barrier: back to the scheduler, which resumes this fiber once every
 * fiber of the block has arrived. */
inline void sync()
{
    swapcontext(&g.fibers[g.cur].ctx, &g.sched);
}

/* __shfl_xor_sync(full mask, v, lane_mask) for a 4- or 8-byte value */
template <typename V> V shfl_xor(V v, int lane_mask)
{
    static_assert(sizeof(V) <= sizeof(uint64_t), "shuffle of a value wider than 8 bytes");
    unsigned me = threadIdx.x, lane = me % 32u, peer = (me - lane) + (lane ^ (unsigned)lane_mask);
    if (peer >= blockDim.x) {
        std::fprintf(stderr,
                     "gpp_cuda_emu: shuffle from lane %u reads thread %u of a %u-thread block\n",
                     lane, peer, blockDim.x);
        std::abort();
    }
    std::memcpy(&g.xchg[me], &v, sizeof v);
    sync();
    V r;
    std::memcpy(&r, &g.xchg[peer], sizeof r);
    sync(); /* nobody overwrites a slot before every thread has read it */
    return r;
}

inline void fiber_main()
{
    (*g.fn)();
    g.fibers[g.cur].done = true;
    /* returning resumes uc_link: the scheduler */
}

/* Runs fn as the body of every thread of every block of the grid. Not
 * reentrant: one launch at a time per process. */
inline void launch(gpp_emu_dim3 grid, gpp_emu_dim3 block, const std::function<void()> &fn)
{
    const size_t stack_bytes = 256 << 10;
    unsigned n = block.x * block.y * block.z;
    if (block.y != 1 || block.z != 1 || n == 0 || n > 1024) {
        std::fprintf(stderr, "gpp_cuda_emu: blocks are 1-D of 1..1024 threads here\n");
        std::abort();
    }
    gridDim = grid;
    blockDim = block;
    g.fn = &fn;
    g.fibers.resize(n);
    g.xchg.assign(n, 0);
    for (auto &f : g.fibers)
        f.stack.resize(stack_bytes);
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = gpp_emu_dim3{x, y, z};
                for (auto &f : g.fibers) {
                    getcontext(&f.ctx);
                    f.ctx.uc_stack.ss_sp = f.stack.data();
                    f.ctx.uc_stack.ss_size = f.stack.size();
                    f.ctx.uc_link = &g.sched;
                    f.done = false;
                    makecontext(&f.ctx, fiber_main, 0);
                }
                for (unsigned round = 0;; round++) {
                    unsigned done = 0;
                    for (unsigned t = 0; t < n; t++) {
                        g.cur = t;
                        threadIdx = gpp_emu_dim3{t, 0, 0};
                        if (!g.fibers[t].done)
                            swapcontext(&g.sched, &g.fibers[t].ctx);
                        done += g.fibers[t].done;
                    }
                    if (done == n)
                        break;
                    if (done != 0) {
                        std::fprintf(stderr,
                                     "gpp_cuda_emu: block (%u, %u, %u): %u of %u threads ended "
                                     "while the others wait at barrier %u: a __syncthreads or "
                                     "shuffle not reached by every thread of the block\n",
                                     x, y, z, done, n, round + 1);
                        std::abort();
                    }
                }
            }
    g.fn = nullptr;
}

} /* namespace gpp_emu */

#endif
