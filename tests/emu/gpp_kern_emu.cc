/* gpp_kern_emu: the CUDA backend's kernels and their launchers
 * (gpp_cuda_kern.h), compiled for the host: the three .cu files, unchanged,
 * against the block emulator (tests/emu/gpp_cuda_emu.h) through
 * gpp_emu_port.h. Each launcher checks its configuration and queues its
 * grid on the emulated runtime's stream (gpp_emu_rt.h: gpp_emu::enqueue,
 * set_last_error; cudaGetLastError), where it runs when the stream's work
 * is forced. Part of the host emulation of the CUDA backend (docs/gpu.md
 * "The host emulation"); host C++17 only:
 *
 *   g++ -std=c++17 -I. -I/usr/local/cuda/include -c gpp_kern_emu.cc
 *
 * The .cu files' file-static helpers (s_blocks, s_warp_sum, ...) have the
 * same names in more than one of them: a namespace per file keeps them
 * apart (the launchers are extern "C": the same functions in any
 * namespace). */
#ifdef __CUDACC__
#error "gpp_kern_emu.cc is the host compilation of the kernels: not for nvcc"
#endif

#include "tests/emu/gpp_emu_port.h" /* first: the port's host half */

#include "kernels/cuda/gpp_cuda_kern.h"

#ifndef GPP_LAUNCH
#error "gpp_kern_emu.cc needs the CUDA toolkit's headers on the include path (-I.../cuda/include)"
#endif

/* the headers the .cu files include, outside the namespaces */
#include "kernels/cuda/gpp_cuda_flash_tc.cuh"

namespace gpp_kern_eltwise
{
#include "kernels/cuda/gpp_cuda_eltwise.cu"
}
namespace gpp_kern_flash
{
#include "kernels/cuda/gpp_cuda_flash.cu"
}
namespace gpp_kern_rows
{
#include "kernels/cuda/gpp_cuda_rows.cu"
}
