/* gpp_cuda_check: the check macros of the CUDA runtime (STYLE rule 5), for
 * every C caller of it (the CUDA backend, the NCCL comm). A failed call
 * becomes a gpp_err naming file:line, the call and the runtime's own
 * message and error name: GPP_CUDA_TRY returns -1, GPP_CUDA_TRY_GOTO jumps
 * to label; gpp_cuda_fail is their message for flows that handle some
 * errors themselves (cudaErrorNotReady). */
#ifndef GPP_CUDA_CHECK_H
#define GPP_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "common/gpp_err.h"

/* "file:line: call: message (cudaErrorName)" into err; returns -1. */
int gpp_cuda_fail(gpp_err_t *err, const char *file, int line, const char *call, cudaError_t e);

#define GPP_CUDA_TRY(call, err)                                                                    \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return gpp_cuda_fail((err), __FILE__, __LINE__, #call, e_);                            \
    } while (0)
#define GPP_CUDA_TRY_GOTO(call, err, label)                                                        \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            gpp_cuda_fail((err), __FILE__, __LINE__, #call, e_);                                   \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

#endif
