/* gpp_cuda_emu: runs a kernel written to gpp_cuda_port.h on the host, each
 * CUDA thread of a block as a fiber of the calling thread. Host
 * C++ only, no CUDA header needed; private to kernels/cuda/ and its tests
 * (tests/unit/test_flash_emu.cc; kernel launches of the host emulation:
 * GPP_LAUNCH in gpp_cuda_port.h).
 *
 *   gpp_emu::launch({gx, gy, 1}, {tx, ty, 1}, [&] { k_foo<64>(...); });
 *
 * runs the blocks one after another (x fastest, then y, then z). Blocks are
 * 1-, 2- or 3-D of at most 1024 threads; the linear id of a thread is
 * x + tx (y + ty z) (threadIdx from it, x fastest), and a warp is 32
 * consecutive linear ids (the last one partial when the block is not a
 * multiple of 32), as on the device.
 *
 * Within a block each thread runs until its next barrier (or its end), in
 * linear order, then the barriers that are complete are released:
 *   GPP_SYNC()        __syncthreads: every thread of the block, at the same
 *                     GPP_SYNC;
 *   gpp_shfl_xor,     barriers of the thread's warp only: every lane of the
 *   GPP_SYNC_WARP(),  warp (all 32, or all of the partial last warp) at a
 *   gpp_mma16::mma    shuffle, every lane at a __syncwarp, or all 32 at a
 *                     warp matrix product (mma_m16n8k16 below). A
 *                     shuffle's exchange happens when its warp's barrier
 *                     completes.
 * So a kernel whose whole warps return early (one warp per row, rows past
 * the end) runs as on the device, a block's static "shared" arrays are
 * used by one block at a time, and a run is deterministic. A barrier that
 * some thread it needs never reaches (a __syncthreads or a shuffle in
 * divergent code, undefined on the device) aborts naming the kernel, the
 * block, the warp and the barrier's source line.
 *
 * Speed: a context switch is a few instructions on x86-64
 * (gpp_emu_switch), swapcontext elsewhere and under sanitizers (a system
 * call each way). Most kernels are grid-stride loops without a barrier, so
 * a block's threads start as plain calls, one after another, on a single
 * fiber: the first thread that reaches a barrier keeps that fiber, and the
 * threads after it get fibers of their own. The threads before it ended
 * without a barrier, which is what the fiber schedule would have run first
 * anyway: the result is the same, and a barrier-free block costs one
 * context switch instead of two per thread (5x faster with
 * gpp_emu_switch, 140x with swapcontext: bench/bench_emu.cc,
 * BENCHMARKS.md).
 *
 * Not reentrant: one launch at a time per process (a kernel that launches
 * aborts), from one host thread at a time (the emulated runtime runs one
 * task at a time).
 *
 * What it does not model: lock-step warps (a warp's lanes run one after
 * another between its barriers), memory spaces, the device's float
 * rounding (the host compiler decides whether a*b+c is fused), and
 * performance, but for one count: the shared-memory bank conflicts of the
 * accesses a kernel makes through the port's recorded loads and stores
 * (bank_check below). */
#ifndef GPP_CUDA_EMU_H
#define GPP_CUDA_EMU_H

#ifdef __CUDACC__
#error "gpp_cuda_emu.h is the host emulator: not for nvcc"
#endif

#include <ucontext.h>

#include <array>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

struct gpp_emu_dim3 {
    unsigned x = 1, y = 1, z = 1;
};
/* CUDA's built-in indices (threadIdx: of the thread running) */
inline gpp_emu_dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace gpp_emu
{

/* Where a thread is: running (or runnable), waiting at a barrier, ended. */
enum wait_t : unsigned char { RUN, AT_SYNC, AT_SYNC_WARP, AT_SHUFFLE, AT_MMA, DONE };

/* A fiber's context. On x86-64 (outside sanitizers, which need to see the
 * stack switches) a switch is gpp_emu_switch below: the callee-saved
 * registers, the SSE and x87 control words and the stack pointer, no
 * system call; elsewhere swapcontext, which also saves and restores the
 * signal mask (an rt_sigprocmask system call each way). */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GPP_EMU_UCONTEXT 1
#endif
#endif
#else
#define GPP_EMU_UCONTEXT 1
#endif

#ifndef GPP_EMU_UCONTEXT
/* gpp_emu_switch(&from_sp, to_sp): saves the running context on its stack
 * and its stack pointer in *from_sp, then resumes the one saved at to_sp.
 * Weak: every unit that includes this header defines it alike. */
extern "C" void gpp_emu_switch(void **from_sp, void *to_sp);
asm(".pushsection .text\n"
    ".weak gpp_emu_switch\n"
    ".type gpp_emu_switch, @function\n"
    "gpp_emu_switch:\n"
    "    endbr64\n" /* a branch target under CET (a no-op elsewhere) */
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    fnstcw 4(%rsp)\n"
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    "    ldmxcsr (%rsp)\n"
    "    fldcw 4(%rsp)\n"
    "    addq $8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    ".size gpp_emu_switch, .-gpp_emu_switch\n"
    ".popsection\n");
#endif

struct fiber {
#ifdef GPP_EMU_UCONTEXT
    ucontext_t ctx;
#else
    void *sp = nullptr;
#endif
    std::unique_ptr<char[]> stack;
};

constexpr size_t STACK_BYTES = 256 << 10; /* per fiber */

struct state {
    fiber sched; /* the launching code's context while a fiber runs */
    /* fibers[t] for thread t; fibers[n] the one that runs a block's
     * threads as plain calls */
    std::vector<std::unique_ptr<fiber>> fibers;
    std::vector<fiber *> of;         /* the fiber of each thread */
    std::vector<wait_t> wait;        /* per thread */
    std::vector<const char *> file;  /* per thread: the barrier it waits at */
    std::vector<int> line;           /* (source line) */
    std::vector<uint64_t> xin, xout; /* shuffle: the value given, the one got */
    std::vector<unsigned> peer;      /* shuffle: the lane read */
    /* warp matrix product: each lane's A and B elements (mma_m16n8k16) */
    std::vector<std::array<float, 8>> ma;
    std::vector<std::array<float, 4>> mb;
    /* bank check: each thread's shared-memory accesses since its warp's
     * last barrier (address, bytes, site) */
    struct access {
        uintptr_t addr;
        unsigned bytes;
        const char *file;
        int line;
    };
    std::vector<std::vector<access>> acc;
    const std::function<void()> *fn = nullptr;
    const char *name = nullptr; /* of the kernel, for messages; may be null */
    unsigned n = 0;             /* threads per block */
    unsigned cur = 0;           /* linear id of the thread running */
    unsigned syncs = 0;         /* block barriers passed in this block */
    bool direct = false;        /* threads run as plain calls on fibers[n] */
    bool active = false;        /* a launch is running */
};
inline state g;

/* Off: every thread of every block gets a fiber (bench/bench_emu.cc
 * measures the difference; results are the same). */
inline bool plain_calls = true;

/* Counters of the blocks run each way since the process started. */
inline uint64_t blocks_plain, blocks_fibers;

[[noreturn]] inline void fail(const char *fmt, ...)
{
    std::fprintf(stderr, "gpp_cuda_emu: kernel %s, block (%u, %u, %u) of (%u, %u, %u): ",
                 g.name ? g.name : "(unnamed)", blockIdx.x, blockIdx.y, blockIdx.z, gridDim.x,
                 gridDim.y, gridDim.z);
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
    std::fputc('\n', stderr);
    std::abort();
}

/* Shared-memory bank check (off unless bank_check is set): the accesses a
 * kernel makes through the port's recorded loads and stores
 * (gpp_mma16::ld2, st2, ldx, stx) are grouped as the device issues them:
 * the k-th access of each lane of a warp between two of its barriers is
 * one instruction (the lanes of a warp run the same code between
 * barriers: a divergent sequence is reported as such). An instruction of
 * w bytes a lane is served in phases of 128 / w lanes; a phase takes as
 * many wavefronts as the most distinct 4-byte words that fall in one of
 * the 32 banks (lanes reading the same word share it). Per source line:
 * instructions, wavefronts, and the ideal (one a phase). */
struct bank_site {
    uint64_t instr = 0, wavefronts = 0, ideal = 0;
    unsigned worst = 0; /* most wavefronts of one phase */
};
inline bool bank_check = false;
inline std::map<std::string, bank_site> bank_sites;
inline uint64_t bank_divergent = 0; /* warps whose lanes' sequences differed */

/* Records an access of the running thread. */
inline void bank_record(const void *p, unsigned bytes, const char *file, int line)
{
    if (bank_check)
        g.acc[g.cur].push_back({(uintptr_t)p, bytes, file, line});
}

/* Groups and counts the recorded accesses of the warp of threads
 * [w0, w1), then forgets them. */
inline void bank_flush(unsigned w0, unsigned w1)
{
    if (!bank_check)
        return;
    size_t len = g.acc[w0].size();
    bool same = true;
    for (unsigned t = w0; t < w1; t++)
        same = same && g.acc[t].size() == len;
    if (!same)
        bank_divergent++;
    for (size_t k = 0; same && k < len; k++) {
        const state::access &a0 = g.acc[w0][k];
        bank_site &site = bank_sites[std::string(a0.file) + ":" + std::to_string(a0.line)];
        unsigned per_phase = a0.bytes >= 1 && a0.bytes <= 4 ? 32u : 128u / a0.bytes;
        site.instr++;
        for (unsigned p0 = w0; p0 < w1; p0 += per_phase) {
            unsigned p1 = p0 + per_phase < w1 ? p0 + per_phase : w1, worst = 0;
            std::vector<uintptr_t> words; /* distinct words of the phase */
            for (unsigned t = p0; t < p1; t++) {
                const state::access &a = g.acc[t][k];
                for (unsigned b = 0; b < (a.bytes + 3) / 4; b++) {
                    uintptr_t w = a.addr / 4 + b;
                    bool seen = false;
                    for (uintptr_t x : words)
                        seen = seen || x == w;
                    if (!seen)
                        words.push_back(w);
                }
            }
            for (unsigned bank = 0; bank < 32; bank++) {
                unsigned n = 0;
                for (uintptr_t w : words)
                    n += w % 32 == bank;
                worst = n > worst ? n : worst;
            }
            site.wavefronts += worst;
            site.ideal++;
            site.worst = worst > site.worst ? worst : site.worst;
        }
    }
    for (unsigned t = w0; t < w1; t++)
        g.acc[t].clear();
}

/* bank_flush for every warp of the block */
inline void bank_flush_all()
{
    for (unsigned w0 = 0; w0 < g.n; w0 += 32)
        bank_flush(w0, w0 + 32 < g.n ? w0 + 32 : g.n);
}

inline void set_thread(unsigned t)
{
    g.cur = t;
    threadIdx =
        gpp_emu_dim3{t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
}

/* Saves the running context in from and resumes to. */
inline void switch_to(fiber *from, fiber *to)
{
#ifdef GPP_EMU_UCONTEXT
    swapcontext(&from->ctx, &to->ctx);
#else
    gpp_emu_switch(&from->sp, to->sp);
#endif
}

/* The running thread waits at a barrier of kind w (at file:line) until the
 * scheduler releases it. */
inline void wait_at(wait_t w, const char *file, int line)
{
    if (!g.active) {
        std::fprintf(stderr, "gpp_cuda_emu: a barrier at %s:%d outside a launch\n", file, line);
        std::abort();
    }
    unsigned t = g.cur;
    if (g.direct) { /* the plain calls stop: this thread keeps their fiber */
        g.direct = false;
        g.of[t] = g.fibers[g.n].get();
    }
    g.wait[t] = w;
    g.file[t] = file;
    g.line[t] = line;
    switch_to(g.of[t], &g.sched);
}

/* __syncthreads */
inline void sync(const char *file, int line)
{
    wait_at(AT_SYNC, file, line);
}
/* __syncwarp() (full mask) */
inline void sync_warp(const char *file, int line)
{
    wait_at(AT_SYNC_WARP, file, line);
}

/* __shfl_xor_sync(full mask, v, lane_mask) for a value of at most 8 bytes */
template <typename V> V shfl_xor(V v, int lane_mask, const char *file, int line)
{
    static_assert(sizeof(V) <= sizeof(uint64_t) && std::is_trivially_copyable<V>::value,
                  "shuffle of a value wider than 8 bytes");
    unsigned me = g.cur, lane = me % 32u;
    if (lane_mask < 0 || lane_mask > 31)
        fail("shuffle at %s:%d with lane mask %d (0..31 here)", file, line, lane_mask);
    unsigned peer = me - lane + (lane ^ (unsigned)lane_mask);
    if (peer >= g.n)
        fail("shuffle at %s:%d: lane %u of warp %u reads lane %u, past the block's %u threads",
             file, line, lane, me / 32u, peer % 32u, g.n);
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    g.xin[me] = bits;
    g.peer[me] = peer;
    wait_at(AT_SHUFFLE, file, line);
    V r;
    std::memcpy(&r, &g.xout[me], sizeof r);
    return r;
}

/* mma.sync.aligned.m16n8k16.row.col.f32: c += A B over the warp, A 16 x 16,
 * B 16 x 8, each lane giving its elements in the PTX ISA's fragment order
 * (gpp_cuda_port.h, gpp_mma16): a[0..7] = A[g][2t], A[g][2t+1],
 * A[g+8][2t], A[g+8][2t+1], A[g][2t+8], A[g][2t+9], A[g+8][2t+8],
 * A[g+8][2t+9]; b[0..3] = B[2t][g], B[2t+1][g], B[2t+8][g], B[2t+9][g];
 * c = C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1] (g = lane / 4,
 * t = lane % 4). Every lane of a whole warp calls it at the same point: the
 * lanes deposit their elements at a warp barrier, each computes its four
 * results from all of them (in float, k ascending, then added to c), and a
 * second warp barrier keeps the deposits until every lane has read them. */
inline void mma_m16n8k16(float (&c)[4], const float (&a)[8], const float (&b)[4], const char *file,
                         int line)
{
    unsigned me = g.cur, lane = me % 32u, w0 = me - lane;
    if (w0 + 32u > g.n)
        fail("warp matrix product at %s:%d in warp %u of %u lanes: it needs a whole warp", file,
             line, w0 / 32u, g.n - w0);
    std::memcpy(g.ma[me].data(), a, sizeof a);
    std::memcpy(g.mb[me].data(), b, sizeof b);
    wait_at(AT_MMA, file, line);
    const unsigned gr = lane / 4u, t = lane % 4u;
    for (unsigned i = 0; i < 4; i++) {
        unsigned row = gr + 8u * (i / 2u), col = 2u * t + i % 2u;
        float acc = 0.0f;
        for (unsigned k = 0; k < 16; k++) {
            unsigned hi_k = k >= 8u, pair = (k % 8u) / 2u;
            float av = g.ma[w0 + 4u * (row % 8u) + pair][2u * ((row >= 8u) + 2u * hi_k) + k % 2u];
            float bv = g.mb[w0 + 4u * col + pair][2u * hi_k + k % 2u];
            acc += av * bv;
        }
        c[i] += acc;
    }
    wait_at(AT_MMA, file, line);
}

/* Plain calls: thread g.cur, then the next ones, until one reaches a
 * barrier (which then owns this fiber) or the block's last ends. */
inline void plain_main()
{
    for (;;) {
        unsigned t = g.cur;
        (*g.fn)();
        if (!g.direct || t + 1 == g.n) {
            g.wait[t] = DONE;
            switch_to(g.fibers[g.n].get(), &g.sched); /* never resumed */
        }
        g.wait[t] = DONE;
        set_thread(t + 1);
    }
}

inline void fiber_main()
{
    unsigned t = g.cur;
    (*g.fn)();
    g.wait[t] = DONE;
    switch_to(g.of[t], &g.sched); /* never resumed */
}

/* Makes f start entry (which must never return: it ends by switching
 * away) at its next resume. */
inline void start(fiber *f, void (*entry)())
{
#ifdef GPP_EMU_UCONTEXT
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack.get();
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = &g.sched.ctx;
    makecontext(&f->ctx, entry, 0);
#else
    /* the frame gpp_emu_switch pops: control words, r15 .. rbp, then entry
     * as the return address, above it a null one (entry never returns);
     * entry starts with rsp = 8 mod 16, as after a call (SysV ABI) */
    uintptr_t top = ((uintptr_t)f->stack.get() + STACK_BYTES) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 72);
    uint32_t cw[2] = {0x1f80u, 0x037fu}; /* the ABI's initial MXCSR and x87 control word */
    std::memcpy(&sp[0], cw, 8);
    for (int r = 1; r <= 6; r++)
        sp[r] = 0;
    sp[7] = (uint64_t)(uintptr_t)entry;
    sp[8] = 0;
    f->sp = sp;
#endif
}

inline void resume(unsigned t)
{
    set_thread(t);
    switch_to(&g.sched, g.of[t]);
}

/* What thread t is doing, for messages: "ended", "waits at a shuffle
 * (file:line)" */
inline const char *doing(unsigned t, char *buf, size_t len)
{
    static const char *const names[] = {"running", "__syncthreads", "__syncwarp", "shuffle",
                                        "warp matrix product"};
    if (g.wait[t] == DONE)
        std::snprintf(buf, len, "ended");
    else
        std::snprintf(buf, len, "waits at a %s (%s:%d)", names[g.wait[t]], g.file[t], g.line[t]);
    return buf;
}

/* Releases the warps whose lanes all wait at a warp barrier; aborts on a
 * warp only some of whose lanes do. Returns whether any was released. */
inline bool release_warps()
{
    bool any = false;
    for (unsigned w0 = 0; w0 < g.n; w0 += 32) {
        unsigned w1 = w0 + 32 < g.n ? w0 + 32 : g.n, at = 0;
        for (unsigned t = w0; t < w1; t++)
            at += g.wait[t] == AT_SHUFFLE || g.wait[t] == AT_SYNC_WARP || g.wait[t] == AT_MMA;
        if (at == 0)
            continue;
        unsigned first = w0;
        while (g.wait[first] != AT_SHUFFLE && g.wait[first] != AT_SYNC_WARP &&
               g.wait[first] != AT_MMA)
            first++;
        for (unsigned t = w0; t < w1; t++)
            if (g.wait[t] != g.wait[first]) {
                char a[256], b[256];
                fail("warp %u: lane %u %s while lane %u %s: a warp barrier that not every lane "
                     "of the warp reaches",
                     w0 / 32, first - w0, doing(first, a, sizeof a), t - w0, doing(t, b, sizeof b));
            }
        if (g.wait[first] == AT_SHUFFLE)
            for (unsigned t = w0; t < w1; t++)
                g.xout[t] = g.xin[g.peer[t]];
        bank_flush(w0, w1);
        for (unsigned t = w0; t < w1; t++)
            g.wait[t] = RUN;
        any = true;
    }
    return any;
}

/* Runs the current block (blockIdx) to its end. */
inline void run_block()
{
    const unsigned n = g.n;
    g.syncs = 0;
    g.direct = plain_calls;
    for (unsigned t = 0; t < n; t++)
        g.wait[t] = RUN;
    unsigned next = 0; /* threads before it have run (or are running) */
    if (g.direct) {
        start(g.fibers[n].get(), plain_main);
        set_thread(0);
        switch_to(&g.sched, g.fibers[n].get());
        if (g.direct) { /* every thread ended without a barrier */
            bank_flush_all();
            blocks_plain++;
            return;
        }
        next = g.cur + 1; /* g.cur waits at a barrier on fibers[n] */
    }
    blocks_fibers++;
    for (unsigned t = next; t < n; t++) {
        g.of[t] = g.fibers[t].get();
        start(g.of[t], fiber_main);
    }
    for (;;) {
        for (unsigned t = 0; t < n; t++)
            if (g.wait[t] == RUN)
                resume(t);
        if (release_warps())
            continue;
        unsigned done = 0, at_sync = 0, first = n;
        for (unsigned t = 0; t < n; t++) {
            done += g.wait[t] == DONE;
            if (g.wait[t] == AT_SYNC) {
                at_sync++;
                first = first < t ? first : t;
            }
        }
        if (done == n) {
            bank_flush_all();
            return;
        }
        if (at_sync < n) {
            unsigned t = 0;
            while (g.wait[t] != DONE)
                t++;
            fail("thread %u (warp %u) ended while thread %u waits at __syncthreads %s:%d "
                 "(barrier %u of the block): a __syncthreads not reached by every thread",
                 t, t / 32, first, g.file[first], g.line[first], g.syncs + 1);
        }
        for (unsigned t = 0; t < n; t++)
            if (g.line[t] != g.line[first] || std::strcmp(g.file[t], g.file[first]) != 0)
                fail("threads %u and %u wait at different __syncthreads (%s:%d, %s:%d)", first, t,
                     g.file[first], g.line[first], g.file[t], g.line[t]);
        bank_flush_all();
        g.syncs++;
        for (unsigned t = 0; t < n; t++)
            g.wait[t] = RUN;
    }
}

/* Runs fn as the body of every thread of every block of the grid; name (may
 * be null) names the kernel in messages. The configuration must be one the
 * device takes (gpp_cuda_port.h's launcher checks it first); anything else
 * aborts. */
inline void launch(gpp_emu_dim3 grid, gpp_emu_dim3 block, const std::function<void()> &fn,
                   const char *name = nullptr)
{
    unsigned long long n = (unsigned long long)block.x * block.y * block.z;
    if (g.active) {
        std::fprintf(stderr,
                     "gpp_cuda_emu: launch of %s inside a launch of %s: the emulator runs one "
                     "grid at a time\n",
                     name ? name : "(unnamed)", g.name ? g.name : "(unnamed)");
        std::abort();
    }
    if (n == 0 || n > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
        std::fprintf(stderr,
                     "gpp_cuda_emu: kernel %s: grid (%u, %u, %u) of blocks (%u, %u, %u): blocks "
                     "of 1..1024 threads (z <= 64), grids of at least one block\n",
                     name ? name : "(unnamed)", grid.x, grid.y, grid.z, block.x, block.y, block.z);
        std::abort();
    }
    g.active = true;
    g.n = (unsigned)n;
    g.fn = &fn;
    g.name = name;
    gridDim = grid;
    blockDim = block;
    while (g.fibers.size() < n + 1) {
        g.fibers.emplace_back(new fiber);
        g.fibers.back()->stack.reset(new char[STACK_BYTES]);
    }
    g.of.assign(n, nullptr);
    g.wait.assign(n, RUN);
    g.file.assign(n, "");
    g.line.assign(n, 0);
    g.xin.assign(n, 0);
    g.xout.assign(n, 0);
    g.peer.assign(n, 0);
    g.ma.assign(n, {});
    g.mb.assign(n, {});
    g.acc.assign(n, {});
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = gpp_emu_dim3{x, y, z};
                run_block();
            }
    g.fn = nullptr;
    g.name = nullptr;
    g.active = false;
}

} /* namespace gpp_emu */

#endif
