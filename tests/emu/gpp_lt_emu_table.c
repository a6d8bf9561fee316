/* gpp_lt_emu_table: hands the emulated cuBLASLt (gpp_cublaslt_emu.cc) to
 * the CUDA backend. gpp_cuda_blas.c calls cuBLASLt only through the table
 * gpp_cuda_lt; defining the weak hook gpp_cuda_lt_builtin here makes it
 * fill the table from these functions instead of dlopen'ing libcublasLt
 * (docs/gpu.md "The host emulation"). Linked only into the emulated
 * backend: as an object, not from a static archive, since a weak reference
 * alone does not pull an archive member in. */
#include "kernels/cuda/gpp_cuda.h"

void gpp_cuda_lt_builtin(gpp_cuda_lt_t *lt)
{
#define S_FILL(f) lt->f = f;
    GPP_CUDA_LT_FNS(S_FILL)
#undef S_FILL
}
