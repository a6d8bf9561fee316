/* test_flash_emu: the CUDA backend's fused attention kernels, the fp32
 * core (kernels/cuda/gpp_cuda_flash.cuh) and the tensor-core core
 * (gpp_cuda_flash_tc.cuh), compiled for the host and run in the block
 * emulator (gpp_cuda_emu.h: each CUDA thread a fiber, real barriers,
 * shuffles and warp matrix products by the PTX ISA's fragment layout),
 * against attention computed in
 * double. The tensor-core kernels run with fp32 elements (their indexing
 * and masking checked to fp32), with bf16 elements (their rounding), and
 * with bf16 elements and bf16 global I/O (q, k, v, O, dO, dQ, dK, dV in
 * bf16: the attention op over bf16 tensors); the fp32 core with fp32 and
 * with bf16 global I/O.
 *
 * What this checks without a GPU: the tiling and its edges (seq not a
 * multiple of a tile, one row, several row blocks), the head-size tiers and
 * their zero padding (dh 8 in tier 16, 24 in 32, 100 in 128), the causal
 * mask and the tiles it skips, the online softmax, the stashed
 * log-sum-exp, the backward's recomputation, the natural-layout row dot,
 * that every output element is written and nothing past an output is, and
 * that every barrier and shuffle is reached by every thread and every
 * 16-byte or warp-product access is aligned as the device needs (the
 * emulator aborts otherwise). What it cannot check: device rounding (nvcc
 * fuses a*b+c), the fragments' real layout, warp timing, performance;
 * tests/gpu/test_cuda_ops.c runs the same kernels on a GPU against the CPU
 * backend.
 *
 * The kernels read and write the attention op's natural layouts (heads in
 * place in qkv [n seq, 3 hidden] and ctx [n seq, hidden]), as the CUDA
 * backend calls them.
 *
 * First, the emulator's own semantics, on small kernels written here: a
 * warp-per-row kernel whose first warps return as a whole (shuffles are
 * barriers of the warp only), a 2-D block with a shared-memory barrier, a
 * 3-D block's thread numbering (x fastest, warps of 32 consecutive ids, a
 * partial last warp), a kernel with a barrier in some blocks only (the
 * switch from plain calls to fibers), the warp matrix product (fragments
 * placed by the PTX ISA's formulas, written in the test apart from the
 * kernels' helpers); and, in fork()ed children, that a shuffle, a
 * __syncthreads or a warp matrix product that some thread does not reach
 * aborts naming the block and the barrier, as does a product in a partial
 * warp.
 *
 * The bf16 tensor-core runs also count shared-memory bank conflicts (the
 * emulator's bank check): none allowed at head-size tiers 32 and 64, 2-way
 * at tier 16 (the transposed tiles' staging stores).
 *
 * Tolerance with fp32 elements: |emulated - double| <= 2e-5 (1 + |double|).
 * The kernels sum in fp32 (the rows' dO.O sums in double): at these sizes
 * (<= 150 terms of magnitude <= 4) the differences are ~1e-6. With bf16
 * elements: BF16_TOL below. Each output compared is one check; the last
 * line is "N passed, M failed". */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/emu/gpp_emu_port.h" /* first: the port's host half */

#include "kernels/cuda/gpp_cuda_flash_tc.cuh"

namespace
{

int g_failures, g_checks, g_failed_checks;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                 \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fprintf(stderr, "\n");                                                            \
            g_failures++;                                                                          \
        }                                                                                          \
    } while (0)

uint64_t g_rng = 0x9e3779b97f4a7c15ull;
float uniform() /* [-1, 1) */
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* bf16 elements: q, k, v, dO, P and dS rounded to 8 significant bits
 * (unit roundoff 2^-8 = 3.9e-3) before each product; the tolerance is 5
 * such units of 1 + |ref|. */
constexpr double BF16_TOL = 0.02;

constexpr float GUARD = 12345.0f; /* after every output: must stay */
constexpr int NGUARD = 64;

/* an output buffer of n elements, NaN (so an element never written fails)
 * then NGUARD guard values */
std::vector<float> out_buf(size_t n)
{
    std::vector<float> b(n + NGUARD, NAN);
    for (int g = 0; g < NGUARD; g++)
        b[n + g] = GUARD;
    return b;
}

void check(const char *what, const std::vector<float> &got, const std::vector<double> &want,
           double tol)
{
    double worst = 0.0, maxdiff = 0.0;
    size_t bad = 0, n = want.size();
    for (size_t i = 0; i < n; i++) {
        double d = std::fabs((double)got[i] - want[i]);
        if (!(d <= tol * (1.0 + std::fabs(want[i]))))
            bad++;
        if (!(d <= maxdiff))
            maxdiff = d;
        double r = d / (1.0 + std::fabs(want[i]));
        if (!(r <= worst))
            worst = r;
    }
    size_t guard_bad = 0;
    for (int g = 0; g < NGUARD; g++)
        guard_bad += got[n + g] != GUARD;
    std::printf("      %-5s max |diff| %.3g (relative to 1 + |ref|: %.3g)\n", what, maxdiff, worst);
    int before = g_failures;
    EXPECT(bad == 0, "%s: %zu of %zu elements off (tolerance %g)", what, bad, n, tol);
    EXPECT(guard_bad == 0, "%s: %zu elements written past the output", what, guard_bad);
    g_checks++;
    g_failed_checks += g_failures != before;
}

struct shape {
    int n, heads, seq, dh;
};

/* One attention problem in the attention op's layouts, as the CUDA backend
 * passes them: qkv [n seq, 3 hid] (q, k, v of head h at columns h dh,
 * hid + h dh, 2 hid + h dh), ctx and dctx [n seq, hid], lse and dsum
 * [n heads, seq]; and its answer in double. */
struct problem {
    int n, heads, seq, dh, batch, causal;
    int64_t hid, ldq, ldo;
    size_t m, rows;
    float scale;
    std::vector<float> qkv, dctx;
    std::vector<double> o_ref, lse_ref, dqkv_ref;

    /* element d of row i of (sample, head) b: of part 0 q, 1 k, 2 v; of ctx */
    size_t at3(int part, int b, int i, int d) const
    {
        return (size_t)(b / heads) * seq * ldq + (size_t)i * ldq + (size_t)part * hid +
               (size_t)(b % heads) * dh + d;
    }
    size_t at1(int b, int i, int d) const
    {
        return (size_t)(b / heads) * seq * ldo + (size_t)i * ldo + (size_t)(b % heads) * dh + d;
    }

    problem(const shape &sh, int causal_)
        : n(sh.n), heads(sh.heads), seq(sh.seq), dh(sh.dh), batch(sh.n * sh.heads), causal(causal_),
          hid((int64_t)sh.heads * sh.dh), ldq(3 * hid), ldo(hid), m((size_t)sh.n * sh.seq),
          rows((size_t)batch * sh.seq), scale(1.0f / std::sqrt((float)sh.dh))
    {
        qkv.resize(m * ldq);
        dctx.resize(m * ldo);
        for (size_t i = 0; i < qkv.size(); i++)
            qkv[i] = (i % ldq < (size_t)(2 * hid) ? 2.0f : 1.0f) * uniform(); /* q, k wider */
        for (auto &x : dctx)
            x = uniform();
        o_ref.assign(m * ldo, 0.0);
        lse_ref.assign(rows, 0.0);
        dqkv_ref.assign(m * ldq, 0.0);
        std::vector<double> p((size_t)seq), dp((size_t)seq);
        for (int b = 0; b < batch; b++)
            for (int i = 0; i < seq; i++) {
                int nk = causal ? i + 1 : seq;
                double mx = -INFINITY;
                for (int j = 0; j < nk; j++) {
                    double s = 0.0;
                    for (int d = 0; d < dh; d++)
                        s += (double)qkv[at3(0, b, i, d)] * qkv[at3(1, b, j, d)];
                    p[j] = s * scale;
                    mx = std::fmax(mx, p[j]);
                }
                double sum = 0.0;
                for (int j = 0; j < nk; j++)
                    sum += (p[j] = std::exp(p[j] - mx));
                lse_ref[(size_t)b * seq + i] = mx + std::log(sum);
                for (int j = 0; j < nk; j++)
                    p[j] /= sum;
                double dsum = 0.0;
                for (int j = 0; j < nk; j++) {
                    dp[j] = 0.0;
                    for (int d = 0; d < dh; d++)
                        dp[j] += (double)dctx[at1(b, i, d)] * qkv[at3(2, b, j, d)];
                    dsum += p[j] * dp[j];
                }
                for (int d = 0; d < dh; d++) {
                    double acc = 0.0;
                    for (int j = 0; j < nk; j++)
                        acc += p[j] * qkv[at3(2, b, j, d)];
                    o_ref[at1(b, i, d)] = acc;
                }
                for (int j = 0; j < nk; j++) {
                    double ds = p[j] * (dp[j] - dsum);
                    for (int d = 0; d < dh; d++) {
                        dqkv_ref[at3(0, b, i, d)] += scale * ds * qkv[at3(1, b, j, d)];
                        dqkv_ref[at3(1, b, j, d)] += scale * ds * qkv[at3(0, b, i, d)];
                        dqkv_ref[at3(2, b, j, d)] += p[j] * dctx[at1(b, i, d)];
                    }
                }
            }
    }
};

/* The fp32 core's kernels at tier DH, global I/O of type S */
template <int DH, typename S = float> struct fp32_core {
    typedef S io;
    static unsigned blocks(int seq)
    {
        return gpp_flash::cfg<DH>::blocks(seq);
    }
    template <typename... A> static void fwd(A... a)
    {
        gpp_flash::k_flash_fwd<DH, S>(a...);
    }
    template <typename... A> static void bwd_kv(A... a)
    {
        gpp_flash::k_flash_bwd_kv<DH, S>(a...);
    }
    template <typename... A> static void bwd_q(A... a)
    {
        gpp_flash::k_flash_bwd_q<DH, S>(a...);
    }
};

/* The tensor-core core's kernels at tier DH with element type E, global
 * I/O of type S */
template <int DH, typename E, typename S = float> struct tc_core {
    typedef S io;
    static unsigned blocks(int seq)
    {
        return gpp_flash::tc_cfg<DH>::blocks(seq);
    }
    template <typename... A> static void fwd(A... a)
    {
        gpp_flash::k_flash_tc_fwd<DH, E, S>(a...);
    }
    template <typename... A> static void bwd_kv(A... a)
    {
        gpp_flash::k_flash_tc_bwd_kv<DH, E, S>(a...);
    }
    template <typename... A> static void bwd_q(A... a)
    {
        gpp_flash::k_flash_tc_bwd_q<DH, E, S>(a...);
    }
};

/* The row dots dO.O of each (batch, query) row, in double, of the O and
 * dO the kernels were given (the reference of k_flash_rowdot) */
std::vector<double> rowdot_ref(const problem &P, const float *o, const float *dctx)
{
    std::vector<double> ref(P.rows);
    for (int b = 0; b < P.batch; b++)
        for (int i = 0; i < P.seq; i++) {
            double acc = 0.0;
            for (int d = 0; d < P.dh; d++)
                acc += (double)o[P.at1(b, i, d)] * dctx[P.at1(b, i, d)];
            ref[(size_t)b * P.seq + i] = acc;
        }
    return ref;
}

/* Buffers of S: x rounded to S (n of them, then NGUARD guard values as
 * S), and back to floats (with the guards for check()) */
template <typename S> std::vector<S> to_io(const float *x, size_t n, size_t guards)
{
    std::vector<S> b(n + guards);
    for (size_t i = 0; i < n; i++)
        b[i] = gpp_to_e<S>(x[i]);
    for (size_t g = 0; g < guards; g++)
        b[n + g] = gpp_to_e<S>(GUARD);
    return b;
}
template <typename S> std::vector<float> from_io(const std::vector<S> &b, size_t guards)
{
    const float g = gpp_from_e(gpp_to_e<S>(GUARD)); /* GUARD as S holds it */
    std::vector<float> f(b.size());
    for (size_t i = 0; i < b.size(); i++) {
        f[i] = gpp_from_e(b[i]);
        if (i >= b.size() - guards && f[i] == g)
            f[i] = GUARD; /* an untouched guard */
    }
    return f;
}

/* Forward, row dot and backward of core K on problem P, each checked
 * against the double reference within tol. q, k, v and dO are given in
 * K::io, O, dQ, dK, dV written in it (outputs start as NaN, guards follow
 * them); lse and the row dots fp32. With bf16 I/O (the attention op over
 * bf16 tensors, docs/gpu.md "bf16 tensors") the inputs' and outputs'
 * rounding is 2^-9 each, within BF16_TOL; the row dots are checked against
 * the rounded O and dO's own sums (2e-5). */
template <class K> void run_core(const problem &P, const char *name, double tol)
{
    typedef typename K::io S;
    std::printf("    %s\n", name);
    const int seq = P.seq, dh = P.dh, heads = P.heads, causal = P.causal;
    const int64_t ldq = P.ldq, ldo = P.ldo, hid = P.hid;
    const float scale = P.scale;
    const std::vector<S> qkv = to_io<S>(P.qkv.data(), P.qkv.size(), 0);
    const std::vector<S> dctx = to_io<S>(P.dctx.data(), P.dctx.size(), 0);
    const std::vector<float> nan_o(P.m * ldo, NAN), nan_q(P.m * ldq, NAN);
    const S *q = qkv.data(), *k = q + hid, *v = q + 2 * hid;
    std::vector<S> o = to_io<S>(nan_o.data(), nan_o.size(), NGUARD);
    std::vector<float> lse = out_buf(P.rows);
    gpp_emu_dim3 grid{(unsigned)P.batch, K::blocks(seq), 1}, block{gpp_flash::THREADS, 1, 1};
    gpp_emu::launch(grid, block, [&] {
        K::fwd(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, o.data(), lse.data());
    });
    const std::vector<float> of = from_io(o, NGUARD);
    check("o", of, P.o_ref, tol);
    check("lse", lse, P.lse_ref, tol);

    /* the row sums of this core's own output */
    std::vector<float> dsum = out_buf(P.rows);
    std::vector<double> dsum_ref = rowdot_ref(P, of.data(), from_io(dctx, 0).data());
    gpp_emu::launch({(unsigned)((P.rows + gpp_flash::THREADS - 1) / gpp_flash::THREADS), 1, 1},
                    block, [&] {
                        gpp_flash::k_flash_rowdot((int64_t)P.rows, seq, dh, heads, ldo,
                                                  (const S *)o.data(), dctx.data(), dsum.data());
                    });
    check("dsum", dsum, dsum_ref, 2e-5);

    std::vector<S> dqkv = to_io<S>(nan_q.data(), nan_q.size(), NGUARD);
    S *dq = dqkv.data(), *dk = dq + hid, *dv = dq + 2 * hid;
    gpp_emu::launch(grid, block, [&] {
        K::bwd_kv(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, dctx.data(), lse.data(),
                  dsum.data(), dk, dv);
    });
    gpp_emu::launch(grid, block, [&] {
        K::bwd_q(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, dctx.data(), lse.data(),
                 dsum.data(), dq);
    });
    check("dqkv", from_io(dqkv, NGUARD), P.dqkv_ref, tol);
}

/* The emulator's bank check over the bf16 tensor-core runs, per tier and
 * source line (gpp_cuda_emu.h, bank_check) */
std::map<int, std::map<std::string, gpp_emu::bank_site>> g_banks;

template <int DH> void run_tiers(const problem &P)
{
    run_core<fp32_core<DH>>(P, "fp32 core (CUDA cores)", 2e-5);
    run_core<fp32_core<DH, gpp_bf16>>(P, "fp32 core, bf16 q, k, v, O, dO, dQ, dK, dV", BF16_TOL);
    if constexpr (DH <= 64) {
        run_core<tc_core<DH, float>>(P, "tensor-core core, fp32 elements", 2e-5);
        gpp_emu::bank_sites.clear();
        gpp_emu::bank_check = true;
        run_core<tc_core<DH, gpp_bf16>>(P, "tensor-core core, bf16 elements", BF16_TOL);
        gpp_emu::bank_check = false;
        run_core<tc_core<DH, gpp_bf16, gpp_bf16>>(
            P, "tensor-core core, bf16 elements, bf16 q, k, v, O, dO, dQ, dK, dV", BF16_TOL);
        for (const auto &[site, b] : gpp_emu::bank_sites) {
            gpp_emu::bank_site &t = g_banks[DH][site];
            t.instr += b.instr;
            t.wavefronts += b.wavefronts;
            t.ideal += b.ideal;
            t.worst = b.worst > t.worst ? b.worst : t.worst;
        }
    }
}

void run_shape(const shape &sh, int causal)
{
    problem P(sh, causal);
    std::printf("  n %d, heads %d, seq %d, dh %d (tier %d), %s\n", sh.n, sh.heads, sh.seq, sh.dh,
                gpp_flash::tier(sh.dh), causal ? "causal" : "full");
    switch (gpp_flash::tier(sh.dh)) {
    case 16:
        return run_tiers<16>(P);
    case 32:
        return run_tiers<32>(P);
    case 64:
        return run_tiers<64>(P);
    case 128:
        return run_tiers<128>(P);
    default:
        EXPECT(false, "dh %d has no tier", sh.dh);
    }
}

/* ---- the emulator's semantics ---- */

/* One warp per row: the row's sum in double by a butterfly, written by
 * lanes 0 and 31. Warps take rows from the grid's end (row = warps - 1 -
 * warp), so the first warps of the grid, past the last row, return before
 * any shuffle. */
GPP_KERNEL void k_row_sums(int rows, int cols, const float *x, double *first, double *last)
{
    int warps = (int)(gridDim.x * blockDim.x / 32);
    int r = warps - 1 - (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32);
    int lane = (int)threadIdx.x % 32;
    if (r >= rows)
        return;
    double acc = 0.0;
    for (int j = lane; j < cols; j += 32)
        acc += x[(size_t)r * cols + j];
    for (int o = 16; o > 0; o /= 2)
        acc += gpp_shfl_xor(acc, o);
    if (lane == 0)
        first[r] = acc;
    if (lane == 31)
        last[r] = acc;
}

/* Block (32, 8): column j's sum over rows, row lane y summing rows y, y + 8,
 * ..., then lane 0 the 8 partials through shared memory. */
GPP_KERNEL void k_col_sums(int rows, int cols, const float *x, float *out)
{
    GPP_SHARED float part[8][32];
    int j = (int)(blockIdx.x * 32 + threadIdx.x);
    float acc = 0.0f;
    if (j < cols)
        for (int r = (int)threadIdx.y; r < rows; r += 8)
            acc += x[(size_t)r * cols + j];
    part[threadIdx.y][threadIdx.x] = acc;
    GPP_SYNC();
    if (threadIdx.y == 0 && j < cols) {
        float t = 0.0f;
        for (int k = 0; k < 8; k++)
            t += part[k][threadIdx.x];
        out[j] = t;
    }
}

/* out[block][linear id] = the linear id of the lane one xor away, xor 1:
 * equal to the linear id when a warp is 32 consecutive ids, x fastest. */
GPP_KERNEL void k_lane_ids(unsigned *out)
{
    unsigned n = blockDim.x * blockDim.y * blockDim.z;
    unsigned id = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    unsigned peer = gpp_shfl_xor(id, 1);
    GPP_SYNC_WARP();
    out[blockIdx.x * n + id] = peer ^ 1u;
}

/* Block 0 copies its 64 values without a barrier; the others reverse theirs
 * through shared memory. */
GPP_KERNEL void k_late_barrier(const int *in, int *out)
{
    GPP_SHARED int s[64];
    unsigned t = threadIdx.x, base = blockIdx.x * 64;
    if (blockIdx.x == 0) {
        out[t] = in[t];
        return;
    }
    s[t] = in[base + t];
    GPP_SYNC();
    out[base + t] = s[63 - t];
}

/* Lane 5 of block 1's first warp skips the shuffle. */
GPP_KERNEL void k_bad_shuffle(float *out)
{
    float v = (float)threadIdx.x;
    if (blockIdx.x == 1 && threadIdx.x == 5)
        return;
    out[threadIdx.x] = gpp_shfl_xor(v, 1);
}

/* Threads 64.. of block 2 skip the __syncthreads. */
GPP_KERNEL void k_bad_sync(float *out)
{
    GPP_SHARED float s[128];
    if (blockIdx.x == 2 && threadIdx.x >= 64)
        return;
    s[threadIdx.x] = 1.0f;
    GPP_SYNC();
    out[threadIdx.x] = s[127 - threadIdx.x];
}

/* In a 40-thread block, lane 0 of the partial warp (8 lanes) reads lane 8 */
GPP_KERNEL void k_bad_lane(float *out)
{
    out[threadIdx.x] = gpp_shfl_xor((float)threadIdx.x, 8);
}

/* Warp w multiplies its own A (16 x 16, row-major, at a + 256 w) by B (16 x
 * 8, row-major, at b + 128 w), reps times into the same accumulators, and
 * writes C (16 x 8 at c + 128 w). Each lane takes the elements the PTX ISA
 * assigns it for mma.m16n8k16 ("Matrix fragments for mma.m16n8k16 with
 * floating point type"), written here from the ISA's formulas, apart from
 * the kernels' helpers: with g = lane / 4, t = lane % 4, element i < 8 of
 * A at row g + 8 ((i / 2) % 2), column 2t + i % 2 + 8 (i / 4); element i < 4
 * of B at row 2t + i % 2 + 8 (i / 2), column g; element i < 4 of C at row
 * g + 8 (i / 2), column 2t + i % 2. Register r holds elements 2r, 2r + 1. */
GPP_KERNEL void k_mma(const float *a, const float *b, float *c, int reps)
{
    const int w = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, g = lane / 4, t = lane % 4;
    float ae[8], be[4];
    for (int i = 0; i < 8; i++)
        ae[i] = a[256 * w + (g + 8 * ((i / 2) % 2)) * 16 + 2 * t + i % 2 + 8 * (i / 4)];
    for (int i = 0; i < 4; i++)
        be[i] = b[128 * w + (2 * t + i % 2 + 8 * (i / 2)) * 8 + g];
    gpp_mma16::x2<float> ar[4], br[2];
    for (int r = 0; r < 4; r++)
        ar[r] = gpp_mma16::pack<float>(ae[2 * r], ae[2 * r + 1]);
    for (int r = 0; r < 2; r++)
        br[r] = gpp_mma16::pack<float>(be[2 * r], be[2 * r + 1]);
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k = 0; k < reps; k++)
        gpp_mma16::mma(acc, ar, br);
    for (int i = 0; i < 4; i++)
        c[128 * w + (g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc[i];
}

/* Lane 3 of the only warp skips the warp matrix product. */
GPP_KERNEL void k_bad_mma(float *out)
{
    gpp_mma16::x2<float> a[4] = {}, b[2] = {};
    float acc[4] = {};
    if (threadIdx.x == 3)
        return;
    gpp_mma16::mma(acc, a, b);
    out[threadIdx.x] = acc[0];
}

/* A 40-thread block: the partial second warp (8 lanes) multiplies. */
GPP_KERNEL void k_partial_mma(float *out)
{
    gpp_mma16::x2<float> a[4] = {}, b[2] = {};
    float acc[4] = {};
    gpp_mma16::mma(acc, a, b);
    out[threadIdx.x] = acc[0];
}

/* Runs f in a fork()ed child, its stderr into *err: whether it aborted. */
bool aborts(const std::function<void()> &f, std::string *err)
{
    int fd[2];
    if (pipe(fd) != 0)
        return false;
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none); /* no core file */
        dup2(fd[1], 2);
        close(fd[0]);
        f();
        _exit(0);
    }
    close(fd[1]);
    char buf[512];
    ssize_t got;
    while ((got = read(fd[0], buf, sizeof buf)) > 0)
        err->append(buf, (size_t)got);
    close(fd[0]);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return false;
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

/* One check: f's child aborts, and its message holds every one of want. */
void expect_abort(const char *what, const std::function<void()> &f, std::vector<const char *> want)
{
    std::string err;
    bool aborted = aborts(f, &err);
    std::printf("    %s: %s", what, err.empty() ? "(no message)\n" : err.c_str());
    int before = g_failures;
    EXPECT(aborted, "%s: the child did not abort", what);
    for (const char *w : want)
        EXPECT(err.find(w) != std::string::npos, "%s: no \"%s\" in the message", what, w);
    g_checks++;
    g_failed_checks += g_failures != before;
}

void check_exact(const char *what, size_t bad, size_t n)
{
    std::printf("    %s: %zu of %zu wrong\n", what, bad, n);
    int before = g_failures;
    EXPECT(bad == 0, "%s: %zu of %zu elements wrong", what, bad, n);
    g_checks++;
    g_failed_checks += g_failures != before;
}

void emulator_semantics()
{
    std::printf("  the emulator\n");
    { /* 13 rows, 4 blocks of 4 warps: the first 3 warps return */
        const int rows = 13, cols = 70;
        std::vector<float> x((size_t)rows * cols);
        for (auto &v : x)
            v = uniform();
        std::vector<double> first(rows, NAN), last(rows, NAN);
        gpp_emu::launch({4, 1, 1}, {128, 1, 1},
                        [&] { k_row_sums(rows, cols, x.data(), first.data(), last.data()); });
        size_t bad = 0;
        for (int r = 0; r < rows; r++) {
            double want = 0.0; /* in another order: differs by rounding, ~1e-15 */
            for (int j = 0; j < cols; j++)
                want += x[(size_t)r * cols + j];
            bad += !(std::fabs(first[r] - want) <= 1e-12) || first[r] != last[r];
        }
        check_exact("warp per row, first warps return early", bad, rows);
    }
    { /* 2-D blocks (32, 8), 3 blocks over 70 columns */
        const int rows = 21, cols = 70;
        std::vector<float> x((size_t)rows * cols), out(cols, NAN);
        for (auto &v : x)
            v = uniform();
        gpp_emu::launch({3, 1, 1}, {32, 8, 1},
                        [&] { k_col_sums(rows, cols, x.data(), out.data()); });
        size_t bad = 0;
        for (int j = 0; j < cols; j++) {
            float part[8] = {}, t = 0.0f;
            for (int r = 0; r < rows; r++)
                part[r % 8] += x[(size_t)r * cols + j];
            for (float p : part)
                t += p;
            bad += out[j] != t;
        }
        check_exact("2-D block (32, 8), shared-memory barrier", bad, cols);
    }
    { /* 3-D block (4, 3, 5): 60 threads, the second warp 28 lanes */
        std::vector<unsigned> out(120, ~0u);
        gpp_emu::launch({2, 1, 1}, {4, 3, 5}, [&] { k_lane_ids(out.data()); });
        size_t bad = 0;
        for (unsigned i = 0; i < 120; i++)
            bad += out[i] != i % 60;
        check_exact("3-D block (4, 3, 5): warps of consecutive ids, x fastest", bad, 120);
    }
    { /* block 0 without a barrier (plain calls), blocks 1, 2 with one */
        std::vector<int> in(192), out(192, -1);
        for (int i = 0; i < 192; i++)
            in[i] = i * 7;
        gpp_emu::launch({3, 1, 1}, {64, 1, 1}, [&] { k_late_barrier(in.data(), out.data()); });
        size_t bad = 0;
        for (int i = 0; i < 192; i++)
            bad += out[i] != (i < 64 ? in[i] : in[i / 64 * 64 + 63 - i % 64]);
        check_exact("a barrier in some blocks only", bad, 192);
    }
    { /* the warp matrix product, 2 warps of their own data, accumulated 3 times:
         small integers, so every sum is exact in float */
        std::vector<float> a(512), b(256), c(256, NAN);
        for (auto &v : a)
            v = (float)((int)(uniform() * 5.0f));
        for (auto &v : b)
            v = (float)((int)(uniform() * 5.0f));
        gpp_emu::launch({1, 1, 1}, {64, 1, 1}, [&] { k_mma(a.data(), b.data(), c.data(), 3); });
        size_t bad = 0;
        for (int w = 0; w < 2; w++)
            for (int r = 0; r < 16; r++)
                for (int n = 0; n < 8; n++) {
                    float want = 0.0f;
                    for (int k = 0; k < 16; k++)
                        want += a[256 * w + r * 16 + k] * b[128 * w + k * 8 + n];
                    bad += c[128 * w + r * 8 + n] != 3.0f * want;
                }
        check_exact("mma.m16n8k16 by the PTX ISA's fragment layout, 2 warps", bad, 256);
    }
    std::vector<float> sink(128);
    expect_abort("a shuffle that lane 5 skips",
                 [&] {
                     gpp_emu::launch(
                         {2, 1, 1}, {64, 1, 1}, [&] { k_bad_shuffle(sink.data()); },
                         "k_bad_shuffle");
                 },
                 {"k_bad_shuffle", "block (1, 0, 0)", "warp 0", "lane 5 ended", "shuffle (",
                  "test_flash_emu.cc:"});
    expect_abort("a __syncthreads that threads 64.. skip",
                 [&] {
                     gpp_emu::launch(
                         {3, 1, 1}, {128, 1, 1}, [&] { k_bad_sync(sink.data()); }, "k_bad_sync");
                 },
                 {"k_bad_sync", "block (2, 0, 0)", "thread 64 (warp 2) ended", "__syncthreads",
                  "test_flash_emu.cc:"});
    expect_abort("a shuffle past the partial warp",
                 [&] {
                     gpp_emu::launch(
                         {1, 1, 1}, {40, 1, 1}, [&] { k_bad_lane(sink.data()); }, "k_bad_lane");
                 },
                 {"k_bad_lane", "block (0, 0, 0)", "lane 0 of warp 1 reads lane 8", "40 threads"});
    expect_abort("a warp matrix product that lane 3 skips",
                 [&] {
                     gpp_emu::launch(
                         {1, 1, 1}, {32, 1, 1}, [&] { k_bad_mma(sink.data()); }, "k_bad_mma");
                 },
                 {"k_bad_mma", "lane 3 ended", "warp matrix product ("});
    expect_abort("a warp matrix product in a partial warp",
                 [&] {
                     gpp_emu::launch(
                         {1, 1, 1}, {40, 1, 1}, [&] { k_partial_mma(sink.data()); },
                         "k_partial_mma");
                 },
                 {"k_partial_mma", "warp 1 of 8 lanes", "needs a whole warp"});
}

} /* namespace */

int main()
{
    /* tiers and tiles: tier 16/32 rows blocks of 128 and key tiles of 64,
     * tier 64 of 64 and 64, tier 128 of 32 and 32 */
    const shape shapes[] = {
        {2, 3, 37, 8},   /* tier 16, padded, one partial tile */
        {2, 2, 1, 16},   /* one row */
        {2, 1, 70, 24},  /* tier 32, padded, two key tiles */
        {1, 2, 150, 32}, /* tier 32: two row blocks, three key tiles */
        {1, 2, 130, 64}, /* tier 64: three row blocks, causal skips */
        {1, 1, 45, 100}, /* tier 128, padded: four threads a row */
    };
    emulator_semantics();
    EXPECT(gpp_flash::tier(0) == 0 && gpp_flash::tier(129) == 0 && gpp_flash::tier(128) == 128,
           "tiers");
    for (const shape &sh : shapes)
        for (int causal = 0; causal < 2; causal++)
            run_shape(sh, causal);
    /* shared-memory bank conflicts of the bf16 tensor-core kernels'
     * fragment loads and staging stores: none at tiers 32 and 64 (the
     * layouts in gpp_cuda_flash_tc.cuh are made for it); at tier 16 a
     * transposed tile's staging store (a warp writes 16 columns of two row
     * pairs) is allowed 2-way */
    std::printf("  shared-memory banks, bf16 tensor-core kernels (wavefronts / ideal)\n");
    for (const auto &[dh, sites] : g_banks)
        for (const auto &[site, b] : sites) {
            const char *file = std::strrchr(site.c_str(), '/');
            std::printf("    tier %d %-34s %8llu instr  %8llu / %8llu  worst %u-way\n", dh,
                        file ? file + 1 : site.c_str(), (unsigned long long)b.instr,
                        (unsigned long long)b.wavefronts, (unsigned long long)b.ideal, b.worst);
            int before = g_failures;
            EXPECT(b.worst <= (dh == 16 ? 2u : 1u), "tier %d, %s: %u-way bank conflict", dh,
                   site.c_str(), b.worst);
            g_checks++;
            g_failed_checks += g_failures != before;
        }
    EXPECT(gpp_emu::bank_divergent == 0, "%llu warps with divergent shared accesses",
           (unsigned long long)gpp_emu::bank_divergent);
    /* a failure outside a check (the tiers) fails a check of its own */
    int other = g_failures && !g_failed_checks;
    std::printf("%d passed, %d failed\n", g_checks - g_failed_checks, g_failed_checks + other);
    return g_failures ? 1 : 0;
}
