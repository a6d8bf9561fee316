/* bench_emu: what the block emulator (tests/emu/gpp_cuda_emu.h) costs
 * per launch, with barrier-free blocks run as plain calls (the default)
 * and with a fiber per thread (gpp_emu::plain_calls = false), on the launch
 * shapes of the CUDA backend's kernels: a grid-stride element-wise kernel
 * on the largest grid the launchers make (4096 blocks of 256 threads,
 * gpp_cuda_eltwise.cu's S_MAX_BLOCKS), and a warp-per-row kernel with
 * shuffles (layer norm's shape: 8 rows a block), which needs fibers either
 * way. Host C++ only; built as build/bench/bench_emu (with the build's
 * flags), or by hand (BENCHMARKS.md has the commands; -DGPP_EMU_UCONTEXT=1
 * switches fibers with swapcontext instead of gpp_emu_switch):
 *
 *   g++ -O2 -std=c++17 -I. bench/bench_emu.cc -o /tmp/bench_emu && /tmp/bench_emu
 *
 * Prints one line per kernel and mode: seconds per launch (best of 3) and
 * nanoseconds per CUDA thread; checks the outputs of both modes agree. */
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "tests/emu/gpp_emu_port.h"

namespace
{

/* y = relu(x), grid-stride (gpp_cuda_eltwise.cu's k_relu_fwd) */
GPP_KERNEL void k_relu(int64_t n, const float *x, float *y)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* one warp per row: the row's sum by a butterfly (gpp_cuda_rows.cu's
 * statistics) */
GPP_KERNEL void k_row_sum(int64_t rows, int64_t cols, const float *x, float *out)
{
    int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = (int)threadIdx.x % 32;
    if (r >= rows)
        return;
    double acc = 0.0;
    for (int64_t j = lane; j < cols; j += 32)
        acc += x[r * cols + j];
    for (int o = 16; o > 0; o /= 2)
        acc += gpp_shfl_xor(acc, o);
    if (lane == 0)
        out[r] = (float)acc;
}

double best_of_3(gpp_emu_dim3 grid, gpp_emu_dim3 block, const std::function<void()> &fn)
{
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        auto t0 = std::chrono::steady_clock::now();
        gpp_emu::launch(grid, block, fn);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = s < best ? s : best;
    }
    return best;
}

} /* namespace */

int main()
{
    int bad = 0;
    { /* 4096 x 256 threads, 4 elements each */
        const int64_t n = 4096LL * 256 * 4;
        std::vector<float> x(n), y[2];
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)(i % 7) - 3.0f;
        for (int plain = 1; plain >= 0; plain--) {
            gpp_emu::plain_calls = plain;
            y[plain].assign(n, NAN);
            double s =
                best_of_3({4096, 1, 1}, {256, 1, 1}, [&] { k_relu(n, x.data(), y[plain].data()); });
            std::printf(
                "grid-stride relu, 4096 x 256 threads: %-11s %8.4f s/launch %7.1f ns/thread\n",
                plain ? "plain calls" : "fibers", s, s * 1e9 / (4096.0 * 256));
        }
        bad += y[0] != y[1];
    }
    { /* 4096 rows of 256, 8 warps (rows) a block */
        const int64_t rows = 4096, cols = 256;
        std::vector<float> x(rows * cols), out[2];
        for (int64_t i = 0; i < rows * cols; i++)
            x[i] = (float)(i % 11) * 0.25f;
        for (int plain = 1; plain >= 0; plain--) {
            gpp_emu::plain_calls = plain;
            out[plain].assign(rows, NAN);
            double s = best_of_3({(unsigned)(rows / 8), 1, 1}, {256, 1, 1},
                                 [&] { k_row_sum(rows, cols, x.data(), out[plain].data()); });
            std::printf(
                "warp-per-row sum, %u x 256 threads:   %-11s %8.4f s/launch %7.1f ns/thread\n",
                (unsigned)(rows / 8), plain ? "plain calls" : "fibers", s,
                s * 1e9 / (double)(rows * 32));
        }
        bad += out[0] != out[1];
    }
    gpp_emu::plain_calls = true;
    std::printf("outputs of the two modes %s\n", bad ? "DIFFER" : "agree");
    return bad ? 1 : 0;
}
