/* gpp_cpu_backend: the CPU backend's memory, streams and events.
 *
 * Device memory is host memory; every enqueued call runs to completion
 * before it returns, so a stream is only a workspace owner and an event is
 * complete as soon as it is recorded. The asynchronous API is kept so that
 * code written for the CPU backend is correct on CUDA. */
#include <assert.h>
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpp_alloc_rule.h"
#include "common/gpp_time.h"
#include "kernels/cpu/gpp_cpu.h"

#define GPP_CPU_ALIGN 64 /* GPP_ALLOC_ALIGN64: the rule the memory model rounds by */

/* OpenBLAS picks its kernels from the CPU model when it loads. A CPU model
 * it does not know (common in VMs: "Intel Xeon Processor") makes it fall
 * back to SSE3 "Prescott" kernels, 4-5x slower on an AVX-512 machine. The
 * choice cannot be changed once loaded: OPENBLAS_CORETYPE must be set before
 * the process starts (gpp_cpu_blas_reexec). Returns the core type this
 * process should use when OpenBLAS misdetected the CPU and loaded legacy
 * kernels ("SkylakeX", "Haswell"), else NULL. */
static const char *s_better_coretype(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    static const char *legacy[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom"};
    const char *core = openblas_get_corename();
    if (!core || !__builtin_cpu_supports("avx2"))
        return NULL;
    for (size_t i = 0; i < sizeof legacy / sizeof legacy[0]; i++)
        if (!strcmp(core, legacy[i]))
            return __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell";
#endif
    return NULL;
}

void gpp_cpu_blas_reexec(char **argv)
{
    const char *better = s_better_coretype();
    if (!better || getenv("OPENBLAS_CORETYPE"))
        return; /* right kernels, or the user chose; never loop */
    if (setenv("OPENBLAS_CORETYPE", better, 0) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OPENBLAS_CORETYPE"); /* exec failed: go on with the slow kernels */
}

static void s_check_openblas_core(void)
{
    static int checked;
    if (checked++)
        return;
    const char *better = s_better_coretype();
    if (better)
        gpp_warn("cpu backend: OpenBLAS chose its %s kernels on a CPU with %s support; "
                 "matrix products run several times slower than they could; set "
                 "OPENBLAS_CORETYPE=%s in the environment",
                 openblas_get_corename(), strcmp(better, "SkylakeX") ? "AVX2" : "AVX-512", better);
}

static int s_init(gpp_backend_t *be, gpp_err_t *err)
{
    (void)err;
    s_check_openblas_core();
    if (be->cfg.cpu_threads > 0)
        openblas_set_num_threads(be->cfg.cpu_threads);
    snprintf(be->name, sizeof be->name, "cpu");
    snprintf(be->device_name, sizeof be->device_name, "cpu");
    return 0;
}

static size_t s_size(const char *h)
{
    size_t r;
    memcpy(&r, h, sizeof r);
    return r;
}

static void s_fini(gpp_backend_t *be)
{
    (void)be;
}

/* Each block carries its rounded size in a header of GPP_CPU_ALIGN bytes
 * (keeps the alignment) so that a free can account for it. The accounting
 * counts the rounded size: what a caller can use. Nothing is cached: the
 * executor allocates its memory plan's arena once, so no block is freed
 * and taken again per iteration. */
static void *s_alloc(gpp_backend_t *be, size_t bytes, gpp_err_t *err)
{
    size_t rounded = (size_t)gpp_alloc_bytes(GPP_ALLOC_ALIGN64, (int64_t)bytes);
    char *p = aligned_alloc(GPP_CPU_ALIGN, rounded + GPP_CPU_ALIGN);
    if (!p) {
        gpp_err_set(err,
                    "cpu backend: out of memory allocating %zu bytes; reduce the "
                    "micro-batch size or the stage's ops",
                    bytes);
        return NULL;
    }
    memcpy(p, &rounded, sizeof rounded);
    gpp_backend_account(be, (int64_t)rounded);
    return p + GPP_CPU_ALIGN;
}

static void s_free(gpp_backend_t *be, void *p)
{
    if (!p)
        return;
    char *h = (char *)p - GPP_CPU_ALIGN;
    size_t rounded = s_size(h);
    gpp_backend_account(be, -(int64_t)rounded);
    free(h);
}

/* Work enqueued before has completed already. */
static void s_stream_free(gpp_stream_t *s, void *p)
{
    s_free(s->be, p);
}

static int s_stream_init(gpp_stream_t *s, gpp_err_t *err)
{
    (void)s, (void)err;
    return 0;
}

static void s_stream_fini(gpp_stream_t *s)
{
    (void)s;
}

static int s_stream_sync(gpp_stream_t *s, gpp_err_t *err)
{
    (void)s, (void)err;
    return 0;
}

static int s_copy(gpp_stream_t *s, void *dst, const void *src, size_t bytes, gpp_copy_kind_t kind,
                  gpp_err_t *err)
{
    (void)s, (void)kind, (void)err;
    memmove(dst, src, bytes);
    return 0;
}

static int s_zero(gpp_stream_t *s, void *dst, size_t bytes, gpp_err_t *err)
{
    (void)s, (void)err;
    memset(dst, 0, bytes);
    return 0;
}

/* An event is complete once recorded (every call ran to completion); a
 * timed one keeps the host clock at its record (impl: a double, negative
 * until recorded). */
static int s_event_init(gpp_event_t *e, gpp_err_t *err)
{
    (void)err;
    if (e->timed) {
        double *t = gpp_xcalloc(1, sizeof *t);
        *t = -1.0;
        e->impl = t;
    }
    return 0;
}

static void s_event_fini(gpp_event_t *e)
{
    free(e->impl);
    e->impl = NULL;
}

static int s_event_record(gpp_event_t *e, gpp_stream_t *s, gpp_err_t *err)
{
    (void)s, (void)err;
    if (e->timed)
        *(double *)e->impl = gpp_now_ms();
    return 0;
}

static int s_event_wait(gpp_event_t *e, gpp_stream_t *s, gpp_err_t *err)
{
    (void)e, (void)s, (void)err;
    return 0;
}

static int s_event_sync(gpp_event_t *e, gpp_err_t *err)
{
    (void)e, (void)err;
    return 0;
}

static int s_event_query(gpp_event_t *e, gpp_err_t *err)
{
    (void)e, (void)err;
    return 1;
}

static int s_event_elapsed(gpp_event_t *a, gpp_event_t *b, double *ms, gpp_err_t *err)
{
    double ta = *(const double *)a->impl, tb = *(const double *)b->impl;
    if (ta < 0 || tb < 0)
        return gpp_err_set(err, "backend cpu: elapsed time of a timed event never recorded "
                                "(record both events with gpp_event_record first)");
    *ms = tb - ta;
    return 0;
}

const gpp_backend_vt_t gpp_cpu_backend_vt = {
    .init = s_init,
    .fini = s_fini,
    .alloc = s_alloc,
    .free = s_free,
    .stream_init = s_stream_init,
    .stream_fini = s_stream_fini,
    .stream_sync = s_stream_sync,
    .stream_free = s_stream_free,
    .copy = s_copy,
    .zero = s_zero,
    .event_init = s_event_init,
    .event_fini = s_event_fini,
    .event_record = s_event_record,
    .event_wait = s_event_wait,
    .event_sync = s_event_sync,
    .event_query = s_event_query,
    .event_elapsed = s_event_elapsed,
    .ext = gpp_cpu_ext_kernels,
    .linear_fwd = gpp_cpu_linear_fwd,
    .linear_bwd = gpp_cpu_linear_bwd,
    .linear_act_fwd = gpp_cpu_linear_act_fwd,
    .relu_fwd = gpp_cpu_relu_fwd,
    .relu_bwd = gpp_cpu_relu_bwd,
    .gelu_fwd = gpp_cpu_gelu_fwd,
    .gelu_bwd = gpp_cpu_gelu_bwd,
    .layernorm_fwd = gpp_cpu_layernorm_fwd,
    .layernorm_bwd = gpp_cpu_layernorm_bwd,
    .attention_fwd = gpp_cpu_attention_fwd,
    .attention_bwd = gpp_cpu_attention_bwd,
    .attention_bwd_in = gpp_cpu_attention_bwd_in,
    .attention_bwd_w = gpp_cpu_attention_bwd_w,
    .embedding_bag_fwd = gpp_cpu_embedding_bag_fwd,
    .embedding_bag_bwd = gpp_cpu_embedding_bag_bwd,
    .concat_fwd = gpp_cpu_concat_fwd,
    .concat_bwd = gpp_cpu_concat_bwd,
    .slice_fwd = gpp_cpu_slice_fwd,
    .slice_bwd = gpp_cpu_slice_bwd,
    .loss_mse = gpp_cpu_loss_mse,
    .loss_ce = gpp_cpu_loss_ce,
    .add = gpp_cpu_add,
    .axpy = gpp_cpu_axpy,
    .sparse_init = gpp_cpu_sparse_init,
    .sparse_add = gpp_cpu_sparse_add,
    .sparse_clear = gpp_cpu_sparse_clear,
    .optim_step = gpp_cpu_optim_step,
    .optim_step_sparse = gpp_cpu_optim_step_sparse,
};
