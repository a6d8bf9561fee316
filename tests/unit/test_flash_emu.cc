/* test_flash_emu: the CUDA backend's fused attention kernels, the fp32
 * core (kernels/cuda/gpp_cuda_flash.cuh) and the tensor-core core
 * (gpp_cuda_flash_tc.cuh), compiled for the host and run in the block
 * emulator (gpp_cuda_emu.h: each CUDA thread a fiber, real barriers,
 * shuffles and whole-tile warp products), against attention computed in
 * double. The tensor-core kernels run with fp32 elements (their indexing
 * and masking checked to fp32) and with bf16 elements (their rounding).
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
 * Tolerance with fp32 elements: |emulated - double| <= 2e-5 (1 + |double|).
 * The kernels sum in fp32 (the rows' dO.O sums in double): at these sizes
 * (<= 150 terms of magnitude <= 4) the differences are ~1e-6. With bf16
 * elements: BF16_TOL below. Each output compared is one check; the last
 * line is "N passed, M failed". */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

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

/* The fp32 core's kernels at tier DH */
template <int DH> struct fp32_core {
    static unsigned blocks(int seq)
    {
        return gpp_flash::cfg<DH>::blocks(seq);
    }
    template <typename... A> static void fwd(A... a)
    {
        gpp_flash::k_flash_fwd<DH>(a...);
    }
    template <typename... A> static void bwd_kv(A... a)
    {
        gpp_flash::k_flash_bwd_kv<DH>(a...);
    }
    template <typename... A> static void bwd_q(A... a)
    {
        gpp_flash::k_flash_bwd_q<DH>(a...);
    }
};

/* The tensor-core core's kernels at tier DH with element type E */
template <int DH, typename E> struct tc_core {
    static unsigned blocks(int seq)
    {
        return gpp_flash::tc_cfg<DH>::blocks(seq);
    }
    template <typename... A> static void fwd(A... a)
    {
        gpp_flash::k_flash_tc_fwd<DH, E>(a...);
    }
    template <typename... A> static void bwd_kv(A... a)
    {
        gpp_flash::k_flash_tc_bwd_kv<DH, E>(a...);
    }
    template <typename... A> static void bwd_q(A... a)
    {
        gpp_flash::k_flash_tc_bwd_q<DH, E>(a...);
    }
};

/* Forward, row dot and backward of core K on problem P, each checked. */
template <class K> void run_core(const problem &P, const char *name, double tol)
{
    std::printf("    %s\n", name);
    const int seq = P.seq, dh = P.dh, heads = P.heads, causal = P.causal;
    const int64_t ldq = P.ldq, ldo = P.ldo, hid = P.hid;
    const float scale = P.scale;
    const float *q = P.qkv.data(), *k = q + hid, *v = q + 2 * hid, *dctx = P.dctx.data();
    std::vector<float> o = out_buf(P.m * ldo), lse = out_buf(P.rows);
    gpp_emu_dim3 grid{(unsigned)P.batch, K::blocks(seq), 1}, block{gpp_flash::THREADS, 1, 1};
    gpp_emu::launch(grid, block, [&] {
        K::fwd(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, o.data(), lse.data());
    });
    check("o", o, P.o_ref, tol);
    check("lse", lse, P.lse_ref, tol);

    /* the row sums of this core's own output */
    std::vector<float> dsum = out_buf(P.rows);
    std::vector<double> dsum_ref(P.rows);
    for (int b = 0; b < P.batch; b++)
        for (int i = 0; i < seq; i++) {
            double acc = 0.0;
            for (int d = 0; d < dh; d++)
                acc += (double)o[P.at1(b, i, d)] * dctx[P.at1(b, i, d)];
            dsum_ref[(size_t)b * seq + i] = acc;
        }
    gpp_emu::launch({(unsigned)((P.rows + gpp_flash::THREADS - 1) / gpp_flash::THREADS), 1, 1},
                    block, [&] {
                        gpp_flash::k_flash_rowdot((int64_t)P.rows, seq, dh, heads, ldo, o.data(),
                                                  dctx, dsum.data());
                    });
    check("dsum", dsum, dsum_ref, 2e-5);

    std::vector<float> dqkv = out_buf(P.m * ldq);
    float *dq = dqkv.data(), *dk = dq + hid, *dv = dq + 2 * hid;
    gpp_emu::launch(grid, block, [&] {
        K::bwd_kv(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, dctx, lse.data(), dsum.data(),
                  dk, dv);
    });
    gpp_emu::launch(grid, block, [&] {
        K::bwd_q(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, dctx, lse.data(), dsum.data(),
                 dq);
    });
    check("dqkv", dqkv, P.dqkv_ref, tol);
}

template <int DH> void run_tiers(const problem &P)
{
    run_core<fp32_core<DH>>(P, "fp32 core (CUDA cores)", 2e-5);
    if constexpr (DH <= 64) {
        run_core<tc_core<DH, float>>(P, "tensor-core core, fp32 elements", 2e-5);
        run_core<tc_core<DH, gpp_bf16>>(P, "tensor-core core, bf16 elements", BF16_TOL);
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
    EXPECT(gpp_flash::tier(0) == 0 && gpp_flash::tier(129) == 0 && gpp_flash::tier(128) == 128,
           "tiers");
    for (const shape &sh : shapes)
        for (int causal = 0; causal < 2; causal++)
            run_shape(sh, causal);
    /* a failure outside a check (the tiers) fails a check of its own */
    int other = g_failures && !g_failed_checks;
    std::printf("%d passed, %d failed\n", g_checks - g_failed_checks, g_failed_checks + other);
    return g_failures ? 1 : 0;
}
