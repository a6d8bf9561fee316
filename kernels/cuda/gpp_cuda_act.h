/* gpp_cuda_act: an activation's elements as a CUDA kernel reads and writes
 * them (gpp_cuk_t), for the launchers' C side (gpp_cuda_kern.h) and the
 * kernels' portable side (gpp_cuda_port.h: gpp_ldt, gpp_stt), which also
 * builds where the CUDA headers are not on the include path. Private to
 * kernels/cuda/. */
#ifndef GPP_CUDA_ACT_H
#define GPP_CUDA_ACT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* fp32, or bf16 (2 bytes; stores round to nearest even; arithmetic in
 * fp32), chosen per tensor at run time (the executor's bf16 tensors,
 * gpp_backend_act_bf16), so that one kernel serves every mix of element
 * types. p NULL: absent, where a launcher says it may be. */
typedef struct {
    void *p;
    int bf16;
} gpp_cuk_t;
static inline gpp_cuk_t gpp_cuk_f32(const float *p)
{
    gpp_cuk_t t = {(void *)p, 0};
    return t;
}
/* t offset by i elements (absent stays absent) */
static inline gpp_cuk_t gpp_cuk_at(gpp_cuk_t t, int64_t i)
{
    if (t.p)
        t.p = (char *)t.p + i * (t.bf16 ? 2 : 4);
    return t;
}

#ifdef __cplusplus
}
#endif

#endif
