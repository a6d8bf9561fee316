/* gpp_cublaslt_emu: the host emulation of the 14 cuBLASLt entry points the
 * CUDA backend calls (GPP_CUDA_LT_FNS in kernels/cuda/gpp_cuda.h), so that
 * gpp_cuda_blas.c runs unchanged without a GPU (docs/gpu.md "The host
 * emulation"). Signatures come from the toolkit's cublasLt.h, included here
 * so the compiler checks them; gpp_lt_emu_table.c puts the functions in the
 * backend's table.
 *
 * What it computes (column-major, as cuBLASLt): per batch instance,
 *   D = act(alpha op(A) op(B) + beta C + bias),  aux = the input of act,
 * the order NVIDIA's cuBLAS documentation gives for cublasLtMatmul and
 * cublasLtEpilogue_t ("apply Bias and then ReLU/GELU"; the GELU aux is "GELU
 * input matrix", leading dimension divisible by 8 and >= the rows of D;
 * the bias is a packed vector of D's row count, broadcast over columns).
 * Each element is a dot product accumulated in double in k order, so a
 * result does not depend on blocking and is the same on every run; A and B
 * are first rounded as the compute type lets the library do it (FAST_TF32:
 * 10 mantissa bits, FAST_16BF: 7, nearest even). Supported, and nothing
 * else (a type, epilogue, order, pointer mode or attribute value outside
 * this list gives CUBLAS_STATUS_NOT_SUPPORTED, never a different product):
 *   A/B: CUDA_R_32F with CUBLAS_COMPUTE_32F, _32F_FAST_TF32, _32F_FAST_16BF;
 *        CUDA_R_16BF with CUBLAS_COMPUTE_32F.
 *   C/D: CUDA_R_32F; CUDA_R_16BF with bf16 A and B (cuBLASLt's table of
 *        type combinations has no fp32 A, B with bf16 C, D). A bf16 D is
 *        the fp32 result rounded to nearest even. Scale: 32F.
 *   transa/transb: N, T. Order: column. Pointer mode: host. Batches: strided.
 *   Epilogues: DEFAULT, BIAS, RELU(_BIAS), GELU(_BIAS), GELU_AUX(_BIAS), with
 *   bias and aux of D's type (their data types unset, which means D's in
 *   cublasLt.h, or set to it); a bf16 aux is rounded like D.
 *
 * cublasLtMatmul validates the call at once, as the library does, then
 * queues the product on the stream (gpp_emu::enqueue) with a copy of every
 * setting it needs: the caller may change or destroy descriptors right
 * after, as with the library, while the operands are read and written only
 * when the stream runs. An operand that is not device or pinned memory is
 * an illegal address on the device: reported and aborted. */
#include <cublasLt.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "tests/emu/gpp_emu_rt.h"

namespace
{

struct s_handle {
    int unused;
};

/* Attributes this emulation accepts (size-checked) but only at their
 * default, all-zero value: a non-default one is remembered as a bit here
 * and makes the heuristic and cublasLtMatmul say NOT_SUPPORTED. */
typedef uint64_t s_other_t;

struct s_layout {
    uint32_t type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch = 1;
    int64_t stride = 0;
    s_other_t other = 0; /* ORDER, PLANE_OFFSET, BATCH_MODE */
};

struct s_desc {
    int32_t compute, scale;
    int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N, transc = CUBLAS_OP_N;
    int32_t fill = CUBLAS_FILL_MODE_FULL;
    uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void *bias = nullptr;
    int64_t bias_bstride = 0;
    void *aux = nullptr;
    int64_t aux_ld = 0, aux_bstride = 0;
    int32_t aux_type = -1, bias_type = -1; /* -1: D's type (fp32) */
    int32_t sm_target = 0;                 /* a scheduling hint: no effect here */
    s_other_t other = 0;                   /* scale/amax pointers, fp8 modes, ... */
};

struct s_pref {
    uint32_t search = CUBLASLT_SEARCH_BEST_FIT, reduction = CUBLASLT_REDUCTION_SCHEME_MASK;
    uint64_t max_ws = 0, impl = ~(uint64_t)0;
    uint32_t align[4] = {256, 256, 256, 256}; /* A, B, C, D: the header's defaults */
    float max_waves = 0.0f;
};

/* The algorithm the heuristic returns: a tag, the workspace it needs (none)
 * and the operand alignments (A, B, C, D) the preference promised, which
 * cublasLtMatmul then holds the pointers to. */
constexpr uint64_t S_ALGO_TAG = 0x67707065'6d756c74ULL; /* "gppemult" */

/* One product as the queued work sees it: copies, never the caller's
 * descriptors. */
struct s_prob {
    s_desc d;
    s_layout a, b, c, o; /* o: D */
    uint64_t m, n, k;
    bool bias, aux, relu, gelu;
};

template <typename T> cublasStatus_t s_put(T *field, const void *buf, size_t size)
{
    if (!buf || size != sizeof(T))
        return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(field, buf, sizeof(T));
    return CUBLAS_STATUS_SUCCESS;
}

/* An attribute accepted at its all-zero default only (see s_other_t). */
cublasStatus_t s_put_other(s_other_t *other, int attr, size_t want, const void *buf, size_t size)
{
    if (!buf || size != want)
        return CUBLAS_STATUS_INVALID_VALUE;
    bool nonzero = false;
    for (size_t i = 0; i < size; i++)
        nonzero |= ((const unsigned char *)buf)[i] != 0;
    if (nonzero)
        *other |= (s_other_t)1 << attr;
    else
        *other &= ~((s_other_t)1 << attr);
    return CUBLAS_STATUS_SUCCESS;
}

template <typename T, typename H> cublasStatus_t s_create(H *out, T *obj)
{
    if (!obj)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *out = reinterpret_cast<H>(obj);
    return CUBLAS_STATUS_SUCCESS;
}

s_desc *s_d(cublasLtMatmulDesc_t h)
{
    return reinterpret_cast<s_desc *>(h);
}
s_layout *s_l(cublasLtMatrixLayout_t h)
{
    return reinterpret_cast<s_layout *>(h);
}
s_pref *s_p(cublasLtMatmulPreference_t h)
{
    return reinterpret_cast<s_pref *>(h);
}

/* Elements a column-major batched layout spans from its first one. */
uint64_t s_span(const s_layout &l)
{
    if (l.rows == 0 || l.cols == 0)
        return 0;
    return (uint64_t)(l.batch - 1) * (uint64_t)l.stride + (l.cols - 1) * (uint64_t)l.ld + l.rows;
}

/* Checks a product's settings as the library does; fills p. INVALID_VALUE
 * for settings that contradict each other, NOT_SUPPORTED for consistent
 * ones this emulation does not compute; *why says which. */
cublasStatus_t s_check(const s_desc *d, const s_layout *a, const s_layout *b, const s_layout *c,
                       const s_layout *o, s_prob *p, const char **why)
{
#define S_FAIL(st, msg)                                                                            \
    do {                                                                                           \
        *why = msg;                                                                                \
        return st;                                                                                 \
    } while (0)
    if (!d || !a || !b || !c || !o)
        S_FAIL(CUBLAS_STATUS_INVALID_VALUE, "a NULL descriptor or layout");
    if (d->other || a->other || b->other || c->other || o->other)
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED,
               "an attribute at a value the emulation does not handle (order, batch mode, "
               "plane offset, scale or amax pointer, fp8 setting)");
    if (d->scale != CUDA_R_32F || d->pointer_mode != CUBLASLT_POINTER_MODE_HOST)
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "scale type not fp32, or pointer mode not host");
    if (d->transc != CUBLAS_OP_N || d->fill != CUBLAS_FILL_MODE_FULL)
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC not N or FILL_MODE not FULL");
    if ((d->transa != CUBLAS_OP_N && d->transa != CUBLAS_OP_T) ||
        (d->transb != CUBLAS_OP_N && d->transb != CUBLAS_OP_T))
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "a transpose other than N or T");
    if (a->type != b->type || c->type != o->type)
        S_FAIL(CUBLAS_STATUS_INVALID_VALUE, "A and B, or C and D, of different types");
    if ((a->type != CUDA_R_32F && a->type != CUDA_R_16BF) ||
        (c->type != CUDA_R_32F && c->type != CUDA_R_16BF))
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "a data type other than fp32 or bf16");
    if (c->type == CUDA_R_16BF && a->type != CUDA_R_16BF)
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "bf16 C and D with fp32 A and B");
    /* cuBLASLt's FAST compute types are defined for fp32 A and B only */
    bool fast =
        d->compute == CUBLAS_COMPUTE_32F_FAST_TF32 || d->compute == CUBLAS_COMPUTE_32F_FAST_16BF;
    if (!(d->compute == CUBLAS_COMPUTE_32F || (fast && a->type == CUDA_R_32F)))
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "compute type not 32F, 32F_FAST_TF32 (fp32 A, B) "
                                            "or 32F_FAST_16BF (fp32 A, B)");
    uint64_t m = o->rows, n = o->cols;
    uint64_t ar = d->transa == CUBLAS_OP_N ? a->rows : a->cols;
    uint64_t k = d->transa == CUBLAS_OP_N ? a->cols : a->rows;
    uint64_t bk = d->transb == CUBLAS_OP_N ? b->rows : b->cols;
    uint64_t bn = d->transb == CUBLAS_OP_N ? b->cols : b->rows;
    if (c->rows != m || c->cols != n || ar != m || bn != n || bk != k)
        S_FAIL(CUBLAS_STATUS_INVALID_VALUE, "op(A) m x k, op(B) k x n, C and D m x n disagree");
    for (const s_layout *l : {a, b, c, o}) {
        if (l->rows > INT32_MAX || l->cols > INT32_MAX)
            S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "a dimension beyond int32");
        if (l->ld < 1 || (uint64_t)l->ld < l->rows)
            S_FAIL(CUBLAS_STATUS_INVALID_VALUE, "a leading dimension below the row count");
        if (l->batch < 1 || l->batch != o->batch)
            S_FAIL(CUBLAS_STATUS_INVALID_VALUE, "batch counts differ or are below 1");
        if (l->stride < 0)
            S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "a negative batch stride");
    }
    uint32_t e = d->epilogue;
    bool bias = e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU_BIAS ||
                e == CUBLASLT_EPILOGUE_GELU_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool relu = e == CUBLASLT_EPILOGUE_RELU || e == CUBLASLT_EPILOGUE_RELU_BIAS;
    bool aux = e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    bool gelu = aux || e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS;
    if (!bias && !relu && !gelu && e != CUBLASLT_EPILOGUE_DEFAULT)
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED,
               "an epilogue other than DEFAULT, BIAS, RELU(_BIAS), GELU(_BIAS), GELU_AUX(_BIAS)");
    if ((bias && d->bias_type != -1 && d->bias_type != (int32_t)o->type) ||
        (aux && d->aux_type != -1 && d->aux_type != (int32_t)o->type))
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "a bias or aux data type other than D's");
    if (bias && d->bias_bstride < 0)
        S_FAIL(CUBLAS_STATUS_NOT_SUPPORTED, "a negative bias batch stride");
    /* the header's rule for the GELU aux: ld and batch stride divisible by
     * 8, ld no less than D's rows */
    if (aux &&
        (d->aux_ld < (int64_t)m || d->aux_ld % 8 || d->aux_bstride < 0 || d->aux_bstride % 8))
        S_FAIL(CUBLAS_STATUS_INVALID_VALUE,
               "EPILOGUE_AUX_LD below D's rows or not a multiple of 8, or a bad aux batch stride");
#undef S_FAIL
    p->d = *d;
    p->a = *a;
    p->b = *b;
    p->c = *c;
    p->o = *o;
    p->m = m;
    p->n = n;
    p->k = k;
    p->bias = bias;
    p->aux = aux;
    p->relu = relu;
    p->gelu = gelu;
    return CUBLAS_STATUS_SUCCESS;
}

/* x rounded to nearest even at `drop` fewer mantissa bits (13: tf32, 16:
 * bf16), still an fp32 value; a NaN stays a (quiet) NaN, overflow gives inf
 * as IEEE rounding does. */
float s_round(float x, int drop)
{
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    uint32_t low = ((uint32_t)1 << drop) - 1;
    if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x007fffffu)
            u |= 0x00400000u; /* the quiet bit survives the mask below */
    } else {
        u += (low >> 1) + ((u >> drop) & 1u);
    }
    u &= ~low;
    std::memcpy(&x, &u, sizeof x);
    return x;
}

/* Element i of an A or B matrix of type t, as the compute type sees it. */
float s_load(const void *base, uint32_t t, uint64_t i, int32_t compute)
{
    if (t == CUDA_R_16BF) {
        uint16_t h;
        std::memcpy(&h, (const char *)base + 2 * i, sizeof h);
        uint32_t u = (uint32_t)h << 16; /* bf16 is the top half of an fp32 */
        float x;
        std::memcpy(&x, &u, sizeof x);
        return x;
    }
    float x = ((const float *)base)[i];
    if (compute == CUBLAS_COMPUTE_32F_FAST_TF32)
        return s_round(x, 13);
    if (compute == CUBLAS_COMPUTE_32F_FAST_16BF)
        return s_round(x, 16);
    return x;
}

/* GELU as cuBLASLt's epilogue computes it: the tanh approximation
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) of Hendrycks & Gimpel
 * (arXiv:1606.08415). NVIDIA's cublasLtEpilogue_t documentation says only
 * "x := GELU(x)"; that it is the tanh form is what PyTorch found and
 * matched (pytorch/pytorch#104061: "cuBLASLt-based fused GELU epilogue ...
 * uses tanh approximation"), and what docs/gpu.md relies on (only the
 * tanh-form GELU is fused). */
double s_gelu(double x)
{
    const double c = 0.79788456080286535588; /* sqrt(2 / pi) */
    return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

/* Element i of a C, D, bias or aux of type t (fp32 or bf16), and its
 * store (bf16: rounded to nearest even). */
double s_get(const void *base, uint32_t t, uint64_t i)
{
    return t == CUDA_R_16BF ? s_load(base, t, i, CUBLAS_COMPUTE_32F) : ((const float *)base)[i];
}
void s_set(void *base, uint32_t t, uint64_t i, double v)
{
    float x = (float)v;
    if (t != CUDA_R_16BF) {
        ((float *)base)[i] = x;
        return;
    }
    uint32_t u;
    if (std::isnan(x)) {
        u = 0x7fff0000u; /* the canonical NaN, as cvt.rn.bf16.f32 */
    } else {
        x = s_round(x, 16);
        std::memcpy(&u, &x, sizeof u);
    }
    uint16_t h = (uint16_t)(u >> 16);
    std::memcpy((char *)base + 2 * i, &h, sizeof h);
}

/* The queued work: reads A, B, C (and the bias), writes D (and the aux). */
void s_run(const s_prob &p, float alpha, float beta, const void *A, const void *B, const void *C,
           void *D)
{
    const uint64_t m = p.m, n = p.n, k = p.k;
    const size_t ea = p.a.type == CUDA_R_16BF ? 2 : 4;
    std::vector<float> pa(m * k), pb(n * k); /* op(A) by rows, op(B) by columns */
    for (int64_t bi = 0; bi < p.o.batch; bi++) {
        const char *a = (const char *)A + (size_t)bi * (size_t)p.a.stride * ea;
        const char *b = (const char *)B + (size_t)bi * (size_t)p.b.stride * ea;
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t q = 0; q < k; q++)
                pa[i * k + q] = s_load(a, p.a.type,
                                       p.d.transa == CUBLAS_OP_N ? i + q * (uint64_t)p.a.ld
                                                                 : q + i * (uint64_t)p.a.ld,
                                       p.d.compute);
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t q = 0; q < k; q++)
                pb[j * k + q] = s_load(b, p.b.type,
                                       p.d.transb == CUBLAS_OP_N ? q + j * (uint64_t)p.b.ld
                                                                 : j + q * (uint64_t)p.b.ld,
                                       p.d.compute);
        const uint32_t t = p.o.type; /* C, D, bias and aux */
        const size_t et = t == CUDA_R_16BF ? 2 : 4;
        const char *c = beta != 0.0f ? (const char *)C + (size_t)(bi * p.c.stride) * et : nullptr;
        char *o = (char *)D + (size_t)(bi * p.o.stride) * et;
        const char *bias =
            p.bias ? (const char *)p.d.bias + (size_t)(bi * p.d.bias_bstride) * et : nullptr;
        char *aux = p.aux ? (char *)p.d.aux + (size_t)(bi * p.d.aux_bstride) * et : nullptr;
        for (uint64_t j = 0; j < n; j++) {
            for (uint64_t i = 0; i < m; i++) {
                double acc = 0.0;
                for (uint64_t q = 0; q < k; q++)
                    acc += (double)pa[i * k + q] * (double)pb[j * k + q];
                double v = (double)alpha * acc;
                if (c) /* beta 0: C is not read (cuBLAS: it need not be valid) */
                    v += (double)beta * s_get(c, t, i + j * (uint64_t)p.c.ld);
                if (bias)
                    v += s_get(bias, t, i);
                if (aux)
                    s_set(aux, t, i + j * (uint64_t)p.d.aux_ld, v);
                if (p.relu) /* as gpp_math_relu: a NaN gives 0 */
                    v = v > 0.0 ? v : 0.0;
                else if (p.gelu)
                    v = s_gelu(v);
                s_set(o, t, i + j * (uint64_t)p.o.ld, v);
            }
        }
    }
}

/* Aborts when [p, p + bytes) is not device or pinned memory: an illegal
 * address on the device. */
void s_need_device(const char *what, const void *p, uint64_t bytes, const s_prob &pr)
{
    if (bytes == 0)
        return;
    gpp_emu::mem_kind kind = gpp_emu::mem_lookup(p, (size_t)bytes);
    if (kind == gpp_emu::MEM_DEVICE || kind == gpp_emu::MEM_PINNED)
        return;
    std::fprintf(stderr,
                 "gpp_cublaslt_emu: cublasLtMatmul (m %llu n %llu k %llu, batch %d): operand %s "
                 "at %p, bytes [%p, %p), is %s: on the device this is an illegal address\n",
                 (unsigned long long)pr.m, (unsigned long long)pr.n, (unsigned long long)pr.k,
                 (int)pr.o.batch, what, p, p, (const void *)((const char *)p + bytes),
                 kind == gpp_emu::MEM_OVERRUN ? "past the end of its allocation"
                                              : "pageable host memory");
    std::abort();
}

uint32_t s_align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    return a ? (uint32_t)(a & (~a + 1)) : 0x80000000u; /* lowest set bit */
}

cublasStatus_t s_matmul_fail(cublasStatus_t st, const char *why)
{
    /* the library logs its reasons only when asked (CUBLASLT_LOG_LEVEL);
     * here a refused call is a bug in the caller, so always say why */
    std::fprintf(stderr, "gpp_cublaslt_emu: cublasLtMatmul: %s: %s\n",
                 st == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                                   : "CUBLAS_STATUS_INVALID_VALUE",
                 why);
    return st;
}

} /* namespace */

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle)
        return CUBLAS_STATUS_INVALID_VALUE;
    return s_create(lightHandle, new (std::nothrow) s_handle());
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    delete reinterpret_cast<s_handle *>(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t status)
{
    switch (status) {
#define S_NAME(s)                                                                                  \
    case s:                                                                                        \
        return #s;
        S_NAME(CUBLAS_STATUS_SUCCESS)
        S_NAME(CUBLAS_STATUS_NOT_INITIALIZED)
        S_NAME(CUBLAS_STATUS_ALLOC_FAILED)
        S_NAME(CUBLAS_STATUS_INVALID_VALUE)
        S_NAME(CUBLAS_STATUS_ARCH_MISMATCH)
        S_NAME(CUBLAS_STATUS_MAPPING_ERROR)
        S_NAME(CUBLAS_STATUS_EXECUTION_FAILED)
        S_NAME(CUBLAS_STATUS_INTERNAL_ERROR)
        S_NAME(CUBLAS_STATUS_NOT_SUPPORTED)
        S_NAME(CUBLAS_STATUS_LICENSE_ERROR)
#undef S_NAME
    }
    return "<unrecognized cuBLAS status>";
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType, cudaDataType_t scaleType)
{
    if (!matmulDesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    s_desc *d = new (std::nothrow) s_desc();
    if (d) {
        d->compute = computeType;
        d->scale = scaleType;
    }
    return s_create(matmulDesc, d);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    delete s_d(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void *buf,
                                              size_t sizeInBytes)
{
    s_desc *d = s_d(matmulDesc);
    if (!d)
        return CUBLAS_STATUS_INVALID_VALUE;
    const size_t ptr = sizeof(void *);
    switch (attr) { /* each attribute's type is the one cublasLt.h gives */
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
        return s_put(&d->compute, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
        return s_put(&d->scale, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        return s_put(&d->pointer_mode, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSA:
        return s_put(&d->transa, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSB:
        return s_put(&d->transb, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_TRANSC:
        return s_put(&d->transc, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_FILL_MODE:
        return s_put(&d->fill, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        return s_put(&d->epilogue, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        return s_put(&d->bias, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
        return s_put(&d->bias_bstride, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
        return s_put(&d->aux, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
        return s_put(&d->aux_ld, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
        return s_put(&d->aux_bstride, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
        return s_put(&d->aux_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        return s_put(&d->bias_type, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET:
        return s_put(&d->sm_target, buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE:
        return s_put_other(&d->other, attr, sizeof(int64_t), buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
        return s_put_other(&d->other, attr, sizeof(int8_t), buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_A_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_B_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_C_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_D_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE:
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE:
        return s_put_other(&d->other, attr, sizeof(int32_t), buf, sizeInBytes);
    case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER:
    case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER:
    case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR:
        return s_put_other(&d->other, attr, ptr, buf, sizeInBytes);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref)
        return CUBLAS_STATUS_INVALID_VALUE;
    return s_create(pref, new (std::nothrow) s_pref());
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    delete s_p(pref);
    return CUBLAS_STATUS_SUCCESS;
}

/* The search mode, reduction-scheme and implementation masks and the wave
 * limit only steer which algorithm is chosen: stored, with no effect on
 * the single one offered here. */
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t sizeInBytes)
{
    s_pref *p = s_p(pref);
    if (!p)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE:
        return s_put(&p->search, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
        return s_put(&p->max_ws, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK:
        return s_put(&p->reduction, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
        return s_put(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf,
                     sizeInBytes);
    case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT:
        return s_put(&p->max_waves, buf, sizeInBytes);
    case CUBLASLT_MATMUL_PREF_IMPL_MASK:
        return s_put(&p->impl, buf, sizeInBytes);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (!matLayout)
        return CUBLAS_STATUS_INVALID_VALUE;
    s_layout *l = new (std::nothrow) s_layout();
    if (l) {
        l->type = (uint32_t)type;
        l->rows = rows;
        l->cols = cols;
        l->ld = ld;
    }
    return s_create(matLayout, l);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    delete s_l(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes)
{
    s_layout *l = s_l(matLayout);
    if (!l)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE:
        return s_put(&l->type, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
        return s_put(&l->rows, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_COLS:
        return s_put(&l->cols, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_LD:
        return s_put(&l->ld, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        return s_put(&l->batch, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        return s_put(&l->stride, buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_ORDER: /* default CUBLASLT_ORDER_COL, 0 */
        return s_put_other(&l->other, attr, sizeof(int32_t), buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET:
        return s_put_other(&l->other, attr, sizeof(int64_t), buf, sizeInBytes);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: /* default CUBLASLT_BATCH_MODE_STRIDED, 0 */
        return s_put_other(&l->other, attr, sizeof(uint32_t), buf, sizeInBytes);
    }
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (requestedAlgoCount <= 0 || !heuristicResultsArray || !returnAlgoCount || !preference)
        return CUBLAS_STATUS_INVALID_VALUE;
    *returnAlgoCount = 0;
    s_prob p;
    const char *why = nullptr;
    cublasStatus_t st =
        s_check(s_d(operationDesc), s_l(Adesc), s_l(Bdesc), s_l(Cdesc), s_l(Ddesc), &p, &why);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st; /* no message: a caller may fall back (GPP_CUDA_NO_ALGO) */
    /* GPP_EMU_LT_NO_BIAS_EPILOGUE=1: no algorithm for a bias epilogue (as a
       library without one for some type or shape would answer), so that the
       callers' fallbacks run on the emulation */
    const char *nb = std::getenv("GPP_EMU_LT_NO_BIAS_EPILOGUE");
    if (p.bias && nb && std::strcmp(nb, "1") == 0)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    cublasLtMatmulHeuristicResult_t *r = &heuristicResultsArray[0];
    std::memset(r, 0, sizeof *r);
    r->algo.data[0] = S_ALGO_TAG;
    r->algo.data[1] = 0; /* workspace bytes */
    for (int i = 0; i < 4; i++)
        r->algo.data[2 + i] = s_p(preference)->align[i];
    r->workspaceSize = 0;
    r->state = CUBLAS_STATUS_SUCCESS;
    r->wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                              const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                              void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    s_prob p;
    const char *why = nullptr;
    cublasStatus_t st =
        s_check(s_d(computeDesc), s_l(Adesc), s_l(Bdesc), s_l(Cdesc), s_l(Ddesc), &p, &why);
    if (st != CUBLAS_STATUS_SUCCESS)
        return s_matmul_fail(st, why);
    if (!alpha || !beta)
        return s_matmul_fail(CUBLAS_STATUS_INVALID_VALUE, "alpha or beta NULL");
    /* pointer mode host: the scalars are read now, as the library does */
    float al, be;
    std::memcpy(&al, alpha, sizeof al);
    std::memcpy(&be, beta, sizeof be);
    if (!A || !B || !D || (!C && be != 0.0f))
        return s_matmul_fail(CUBLAS_STATUS_INVALID_VALUE, "A, B, D or (beta != 0) C NULL");
    if (C == D && (p.c.ld != p.o.ld || p.c.stride != p.o.stride))
        return s_matmul_fail(CUBLAS_STATUS_INVALID_VALUE,
                             "in place (C == D) with different C and D layouts");
    if ((p.bias && !p.d.bias) || (p.aux && !p.d.aux))
        return s_matmul_fail(CUBLAS_STATUS_INVALID_VALUE,
                             "the epilogue's BIAS_POINTER or EPILOGUE_AUX_POINTER is NULL");
    if (algo) {
        if (algo->data[0] != S_ALGO_TAG)
            return s_matmul_fail(CUBLAS_STATUS_INVALID_VALUE,
                                 "an algorithm cublasLtMatmulAlgoGetHeuristic did not return");
        if (workspaceSizeInBytes < algo->data[1] || (algo->data[1] && !workspace))
            return s_matmul_fail(CUBLAS_STATUS_INVALID_VALUE,
                                 "a workspace smaller than the algorithm's");
        /* the algorithm was chosen for operands at least this aligned
         * (MIN_ALIGNMENT_*_BYTES): one less aligned is outside its
         * contract, whatever the device would do with it */
        const void *ops[4] = {A, B, C ? C : D, D};
        for (int i = 0; i < 4; i++)
            if (s_align_of(ops[i]) < algo->data[2 + i])
                return s_matmul_fail(CUBLAS_STATUS_INVALID_VALUE,
                                     "an operand less aligned than the preference's "
                                     "MIN_ALIGNMENT_*_BYTES the algorithm was chosen for");
    }
    if (p.m == 0 || p.n == 0)
        return CUBLAS_STATUS_SUCCESS;
    const uint64_t ea = p.a.type == CUDA_R_16BF ? 2 : 4, et = p.o.type == CUDA_R_16BF ? 2 : 4;
    const uint64_t batches = (uint64_t)(p.o.batch - 1);
    s_need_device("A", A, s_span(p.a) * ea, p);
    s_need_device("B", B, s_span(p.b) * ea, p);
    if (be != 0.0f)
        s_need_device("C", C, s_span(p.c) * et, p);
    s_need_device("D", D, s_span(p.o) * et, p);
    if (p.bias)
        s_need_device("bias", p.d.bias, (batches * (uint64_t)p.d.bias_bstride + p.m) * et, p);
    if (p.aux)
        s_need_device(
            "aux", p.d.aux,
            (batches * (uint64_t)p.d.aux_bstride + (p.n - 1) * (uint64_t)p.d.aux_ld + p.m) * et, p);
    (void)workspace;
    cudaError_t e = gpp_emu::enqueue(stream, "cublasLtMatmul",
                                     [p, al, be, A, B, C, D] { s_run(p, al, be, A, B, C, D); });
    return e == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

} /* extern "C" */
