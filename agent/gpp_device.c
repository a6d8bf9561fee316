/* gpp_device: see gpp_device.h. */
#include "agent/gpp_device.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef GPP_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* The host's memory: MemTotal and MemAvailable of /proc/meminfo, else
 * sysconf's physical and available pages. */
static void s_host(gpp_control_device_t *out)
{
    out->gpu = -1;
    out->sm_count = 0;
    snprintf(out->name, sizeof out->name, "cpu");
    long long total_kib = 0, avail_kib = -1;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        long long v;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "MemTotal: %lld kB", &v) == 1)
                total_kib = v;
            else if (sscanf(line, "MemAvailable: %lld kB", &v) == 1)
                avail_kib = v;
        }
        fclose(f);
    }
    long page = sysconf(_SC_PAGESIZE);
    if (total_kib <= 0)
        total_kib = (long long)sysconf(_SC_PHYS_PAGES) * page / 1024;
    if (avail_kib < 0)
        avail_kib = (long long)sysconf(_SC_AVPHYS_PAGES) * page / 1024;
    if (total_kib <= 0) /* no figure at all: one page, so that Register stays valid */
        total_kib = page > 1024 ? page / 1024 : 1;
    if (avail_kib > total_kib)
        avail_kib = total_kib;
    out->mem_total_bytes = total_kib * 1024;
    out->mem_free_bytes = avail_kib > 0 ? avail_kib * 1024 : 0;
}

#ifdef GPP_HAVE_CUDA
#define S_CUDA(call)                                                                               \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            snprintf(why, sizeof why, "%s: %s (%s)", #call, cudaGetErrorString(e_),                \
                     cudaGetErrorName(e_));                                                        \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static int s_cuda(int gpu, gpp_control_device_t *out)
{
    char why[400];
    int n = 0;
    size_t free_b = 0, total_b = 0;
    struct cudaDeviceProp p;
    S_CUDA(cudaGetDeviceCount(&n));
    if (gpu < 0 || gpu >= n) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(why, sizeof why,
                 "GPU %d: %d CUDA device(s) visible (CUDA_VISIBLE_DEVICES=%s); pass --gpu in "
                 "[0, %d)",
                 gpu, n, vis ? vis : "(unset)", n);
        goto fail;
    }
    S_CUDA(cudaGetDeviceProperties(&p, gpu));
    S_CUDA(cudaSetDevice(gpu));
    S_CUDA(cudaMemGetInfo(&free_b, &total_b));
    out->gpu = gpu;
    snprintf(out->name, sizeof out->name, "%s", p.name[0] ? p.name : "unnamed CUDA device");
    out->mem_total_bytes = (int64_t)total_b;
    out->mem_free_bytes = (int64_t)(free_b < total_b ? free_b : total_b);
    out->sm_count = p.multiProcessorCount;
    out->error[0] = 0;
    return 0;
fail:
    snprintf(out->error, sizeof out->error, "no usable GPU %d: %s", gpu, why);
    return -1;
}
#endif

void gpp_device_probe(int want_cuda, int gpu, gpp_control_device_t *out)
{
    assert(out);
    memset(out, 0, sizeof *out);
    if (want_cuda) {
#ifdef GPP_HAVE_CUDA
        if (s_cuda(gpu, out) == 0)
            return;
#else
        snprintf(out->error, sizeof out->error,
                 "no usable GPU %d: this gpp was built without CUDA (configure with "
                 "-DGPP_CUDA=ON on a machine with nvcc)",
                 gpu);
#endif
    }
    s_host(out);
}
