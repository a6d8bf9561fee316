/* test_flash_emu: the CUDA backend's fused attention kernels
 * (kernels/cuda/gpp_cuda_flash.cuh), compiled for the host and run in the
 * block emulator (gpp_cuda_emu.h: one host thread per CUDA thread, real
 * barriers and shuffles), against attention computed in double.
 *
 * What this checks without a GPU: the tiling and its edges (seq not a
 * multiple of a tile, one row, several row blocks), the head-size tiers and
 * their zero padding (dh 8 in tier 16, 24 in 32, 100 in 128), the causal
 * mask and the tiles it skips, the online softmax, the stashed
 * log-sum-exp, the backward's recomputation, the natural-layout row dot,
 * that every output element is written and nothing past an output is, and
 * that every barrier and shuffle is reached by every thread (the emulator
 * aborts otherwise). What it cannot check: device rounding (nvcc fuses
 * a*b+c), warp timing, performance; tests/gpu/test_cuda_ops.c runs the same
 * kernels on a GPU against the CPU backend.
 *
 * The kernels read and write the attention op's natural layouts (heads in
 * place in qkv [n seq, 3 hidden] and ctx [n seq, hidden]), as the CUDA
 * backend calls them.
 *
 * Tolerance: |emulated - double| <= 2e-5 (1 + |double|). The kernels sum
 * in fp32 (the rows' dO.O sums in double): at these sizes (<= 150 terms of
 * magnitude <= 4) the differences are ~1e-6. */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/cuda/gpp_cuda_flash.cuh"

namespace
{

int g_failures;

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

void check(const char *what, const std::vector<float> &got, const std::vector<double> &want)
{
    double worst = 0.0, maxdiff = 0.0;
    size_t bad = 0, n = want.size();
    for (size_t i = 0; i < n; i++) {
        double d = std::fabs((double)got[i] - want[i]);
        if (!(d <= 2e-5 * (1.0 + std::fabs(want[i]))))
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
    std::printf("    %-5s max |diff| %.3g (relative to 1 + |ref|: %.3g)\n", what, maxdiff, worst);
    EXPECT(bad == 0, "%s: %zu of %zu elements off", what, bad, n);
    EXPECT(guard_bad == 0, "%s: %zu elements written past the output", what, guard_bad);
}

struct shape {
    int n, heads, seq, dh;
};

/* The attention op's layouts, as the CUDA backend passes them: qkv
 * [n seq, 3 hid] (q, k, v of head h at columns h dh, hid + h dh, 2 hid +
 * h dh), ctx and dctx [n seq, hid], lse and dsum [n heads, seq]. */
template <int DH> void run(const shape &sh, int causal)
{
    using gpp_flash::cfg;
    const int n = sh.n, heads = sh.heads, seq = sh.seq, dh = sh.dh, batch = n * heads;
    const int64_t hid = (int64_t)heads * dh, ldq = 3 * hid, ldo = hid;
    const size_t m = (size_t)n * seq, rows = (size_t)batch * seq;
    const float scale = 1.0f / std::sqrt((float)dh);
    std::printf("  n %d, heads %d, seq %d, dh %d (tier %d), %s\n", n, heads, seq, dh, DH,
                causal ? "causal" : "full");
    std::vector<float> qkv(m * ldq), dctx(m * ldo);
    for (size_t i = 0; i < qkv.size(); i++)
        qkv[i] = (i % ldq < (size_t)(2 * hid) ? 2.0f : 1.0f) * uniform(); /* q, k wider than v */
    for (auto &x : dctx)
        x = uniform();
    /* element d of row i of (sample, head) b, part 0 q, 1 k, 2 v */
    auto at3 = [&](int part, int b, int i, int d) {
        return (size_t)(b / heads) * seq * ldq + (size_t)i * ldq + (size_t)part * hid +
               (size_t)(b % heads) * dh + d;
    };
    auto at1 = [&](int b, int i, int d) {
        return (size_t)(b / heads) * seq * ldo + (size_t)i * ldo + (size_t)(b % heads) * dh + d;
    };

    /* reference, in double */
    std::vector<double> o_ref(m * ldo), lse_ref(rows), dqkv_ref(m * ldq, 0.0);
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

    /* forward */
    const float *q = qkv.data(), *k = q + hid, *v = q + 2 * hid;
    std::vector<float> o = out_buf(m * ldo), lse = out_buf(rows);
    gpp_emu_dim3 grid{(unsigned)batch, cfg<DH>::blocks(seq), 1}, block{gpp_flash::THREADS, 1, 1};
    gpp_emu::launch(grid, block, [&] {
        gpp_flash::k_flash_fwd<DH>(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, o.data(),
                                   lse.data());
    });
    check("o", o, o_ref);
    check("lse", lse, lse_ref);

    /* backward */
    std::vector<float> dsum = out_buf(rows);
    std::vector<double> dsum_ref(rows);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < seq; i++) {
            double acc = 0.0;
            for (int d = 0; d < dh; d++)
                acc += (double)o[at1(b, i, d)] * dctx[at1(b, i, d)];
            dsum_ref[(size_t)b * seq + i] = acc;
        }
    gpp_emu::launch({(unsigned)((rows + gpp_flash::THREADS - 1) / gpp_flash::THREADS), 1, 1}, block,
                    [&] {
                        gpp_flash::k_flash_rowdot((int64_t)rows, seq, dh, heads, ldo, o.data(),
                                                  dctx.data(), dsum.data());
                    });
    check("dsum", dsum, dsum_ref);

    std::vector<float> dqkv = out_buf(m * ldq);
    float *dq = dqkv.data(), *dk = dq + hid, *dv = dq + 2 * hid;
    gpp_emu::launch(grid, block, [&] {
        gpp_flash::k_flash_bwd_kv<DH>(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, dctx.data(),
                                      lse.data(), dsum.data(), dk, dv);
    });
    gpp_emu::launch(grid, block, [&] {
        gpp_flash::k_flash_bwd_q<DH>(seq, dh, heads, ldq, ldo, scale, causal, q, k, v, dctx.data(),
                                     lse.data(), dsum.data(), dq);
    });
    check("dqkv", dqkv, dqkv_ref);
}

void run_shape(const shape &sh, int causal)
{
    switch (gpp_flash::tier(sh.dh)) {
    case 16:
        return run<16>(sh, causal);
    case 32:
        return run<32>(sh, causal);
    case 64:
        return run<64>(sh, causal);
    case 128:
        return run<128>(sh, causal);
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
    std::printf("test_flash_emu: %s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}
