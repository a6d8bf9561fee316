/* gpp_emu_rt: the host emulation of the CUDA runtime (gpp_cudart_emu.cc),
 * as the emulation's other two parts use it: the emulated cuBLASLt
 * (gpp_cublaslt_emu.cc) and kernel launches (GPP_LAUNCH in
 * kernels/cuda/gpp_cuda_port.h, host side). Host C++ only; private to
 * tests/emu/ (docs/gpu.md "The host emulation").
 *
 * The emulated runtime defines the cuda* functions the CUDA backend calls,
 * with their real signatures (from the toolkit's headers), so that the
 * backend's own C code runs unchanged on a machine without a GPU, with
 * "device" memory in host memory. Work queued on a stream does not run when
 * it is queued: it runs when something forces it (a synchronisation, a
 * wait on an event recorded after it, a copy to pageable host memory),
 * which is the latest the device could run it. Code that forgets a wait
 * reads stale data here, as it could on the device. */
#ifndef GPP_EMU_RT_H
#define GPP_EMU_RT_H

#ifdef __CUDACC__
#error "gpp_emu_rt.h is the host emulation: not for nvcc"
#endif

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

namespace gpp_emu
{

/* Queues fn on stream st (nullptr: the legacy default stream). It runs when
 * the stream's work up to it is forced, or, while st is being captured
 * (cudaStreamBeginCapture), it is recorded into the graph and runs at each
 * launch of the graph. `what` names it in error messages ("kernel
 * k_relu_fwd", "cublasLtMatmul"). Returns cudaSuccess, or the error the
 * runtime gives for st (cudaErrorInvalidResourceHandle for a stream that is
 * not one), which also becomes the sticky last error (cudaGetLastError). */
cudaError_t enqueue(cudaStream_t st, const char *what, std::function<void()> fn);

/* What [p, p + bytes) is: inside one device allocation (cudaMalloc), inside
 * one page-locked host allocation or registered range (cudaMallocHost,
 * cudaHostAlloc, cudaHostRegister), or neither (pageable host memory, or a
 * range that runs past the end of an allocation). */
enum mem_kind { MEM_PAGEABLE, MEM_DEVICE, MEM_PINNED, MEM_OVERRUN };
mem_kind mem_lookup(const void *p, size_t bytes);

/* Sets the sticky error cudaGetLastError returns (and clears) next; a kernel
 * launch with a bad configuration reports itself this way. */
void set_last_error(cudaError_t e);

} /* namespace gpp_emu */

#endif
