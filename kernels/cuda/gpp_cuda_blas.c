/* gpp_cuda_blas: row-major matrix products through cuBLASLt, with a cache
 * of matmul plans (descriptors + the heuristic's algorithm) so that a shape
 * seen before costs one cublasLtMatmul call.
 *
 * Row-major to cuBLASLt's column-major: a row-major r x c matrix with row
 * stride ld is the column-major c x r matrix with leading dimension ld, so
 * row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
 * call passes B first, with M = n, N = m. The bias epilogue adds a vector
 * indexed by M, the row-major column: the linear layer's bias.
 *
 * Alignment: the heuristic assumes 256-byte aligned operands unless told
 * otherwise; views into tensors (attention heads, micro-batch slices) are
 * only 4-byte aligned, so the plan records each operand's actual alignment
 * (part of the cache key).
 *
 * Precision bf16 has two forms (gpp_cuda_t.bf16_packed). fast: the fp32
 * operands go to cuBLASLt as they are, with CUBLAS_COMPUTE_32F_FAST_16BF
 * (the library converts them). packed: a kernel first rounds each operand
 * to bf16 into a packed buffer of the stream (gpp_cuda_pack_buffer), then
 * the product is bf16 x bf16 -> fp32 with CUBLAS_COMPUTE_32F, which reads
 * half the bytes and can use the library's native bf16 kernels; C, the
 * bias and the GELU aux stay fp32. A parameter operand (a linear's weight,
 * gpp_cuda_gemm_t.b_param) is rounded once per value it takes, not once
 * per product: its rounding is kept (gpp_cuda_t.wpack) until an optimizer
 * step, a copy or a zeroing writes its source (gpp_cuda_wpack_forget),
 * as mixed-precision training keeps a bf16 copy of its fp32 master
 * weights. So a weight used by k micro-batches' forwards and backwards is
 * rounded once per iteration instead of 2k times.
 *
 * bf16 tensors (the executor's, gpp_backend_act_bf16): a product whose A, B
 * or C is stored in bf16 takes the packed form whatever the setting, with
 * only its fp32 operands rounded first (in the forward of a linear over a
 * bf16 input: only the weight, kept); with a bf16 C the result is written
 * in bf16 by cuBLASLt's epilogue, the bias (kept in bf16) and GELU's aux
 * in bf16 too, as cuBLASLt types them after D. */
#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/gpp_cuda.h"

/* ---- loading cuBLASLt (why: gpp_cuda.h) ---- */

#define S_STR2(x) #x
#define S_STR(x) S_STR2(x)
#define S_LT_SONAME "libcublasLt.so." S_STR(CUBLAS_VER_MAJOR)

gpp_cuda_lt_t gpp_cuda_lt;
static pthread_once_t s_lt_once = PTHREAD_ONCE_INIT;
static char s_lt_error[GPP_ERR_LEN];

static void s_lt_load_once(void)
{
    if (gpp_cuda_lt_builtin) {
        gpp_cuda_lt_builtin(&gpp_cuda_lt);
        return;
    }
    void *h = dlopen(S_LT_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(s_lt_error, sizeof s_lt_error,
                 "cannot load cuBLASLt: dlopen %s: %s; install the CUDA toolkit's cuBLAS or add "
                 "its lib64 folder to LD_LIBRARY_PATH",
                 S_LT_SONAME, dlerror());
        return;
    }
    gpp_cuda_lt_t lt;
#define S_LOAD(f)                                                                                  \
    *(void **)&lt.f = dlsym(h, #f);                                                                \
    if (!lt.f) {                                                                                   \
        snprintf(s_lt_error, sizeof s_lt_error, "cuBLASLt %s has no %s; a cuBLAS %d is needed",    \
                 S_LT_SONAME, #f, CUBLAS_VER_MAJOR);                                               \
        return;                                                                                    \
    }
    GPP_CUDA_LT_FNS(S_LOAD)
#undef S_LOAD
    gpp_cuda_lt = lt;
}

int gpp_cuda_lt_load(gpp_err_t *err)
{
    pthread_once(&s_lt_once, s_lt_load_once);
    if (!gpp_cuda_lt.cublasLtMatmul)
        return gpp_err_set(err, "%s", s_lt_error);
    return 0;
}

#define S_PLANS 512 /* cache slots; a zoo model has a few dozen distinct products */

typedef struct {
    int trans_a, trans_b, precision, packed, c_bf16, has_bias, epi;
    int64_t m, n, k, lda, ldb, ldc, batch, sa, sb, sc, aux_ld;
    uint32_t align_a, align_b, align_c, align_bias;
} s_key_t;

typedef struct {
    int used;
    int no_algo; /* the heuristic had none for this key: remembered, so that a caller's
                    fallback (GPP_CUDA_NO_ALGO) does not ask again each call */
    s_key_t key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} s_plan_t;

struct gpp_cuda_plans_s {
    s_plan_t slot[S_PLANS];
};

gpp_cuda_plans_t *gpp_cuda_plans_new(void)
{
    return gpp_xcalloc(1, sizeof(gpp_cuda_plans_t));
}

static void s_plan_release(s_plan_t *p)
{
    if (!p->used)
        return;
    if (p->la)
        gpp_cuda_lt.cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb)
        gpp_cuda_lt.cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lc)
        gpp_cuda_lt.cublasLtMatrixLayoutDestroy(p->lc);
    if (p->op)
        gpp_cuda_lt.cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

void gpp_cuda_plans_destroy(gpp_cuda_plans_t **self_p)
{
    assert(self_p);
    gpp_cuda_plans_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < S_PLANS; i++)
        s_plan_release(&self->slot[i]);
    free(self);
    *self_p = NULL;
}

static uint32_t s_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 4 && a % al)
        al /= 2;
    return al;
}

static size_t s_hash(const s_key_t *k)
{
    const unsigned char *b = (const unsigned char *)k;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < sizeof *k; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return (size_t)(h % S_PLANS);
}

/* A column-major layout for a row-major r x c matrix of type t with row
 * stride ld. */
static int s_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t r, int64_t c, int64_t ld,
                    int64_t batch, int64_t stride, gpp_err_t *err)
{
    GPP_LT_TRY(gpp_cuda_lt.cublasLtMatrixLayoutCreate(l, t, (uint64_t)c, (uint64_t)r, ld), err);
    if (batch > 1) {
        int32_t bc = (int32_t)batch;
        GPP_LT_TRY(gpp_cuda_lt.cublasLtMatrixLayoutSetAttribute(
                       *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc),
                   err);
        GPP_LT_TRY(gpp_cuda_lt.cublasLtMatrixLayoutSetAttribute(
                       *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
                   err);
    }
    return 0;
}

/* The epilogue of a key: bias and activation (the bias is added first). */
static cublasLtEpilogue_t s_epilogue(const s_key_t *k)
{
    switch ((gpp_cuda_epi_t)k->epi) {
    case GPP_CUDA_EPI_RELU:
        return k->has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case GPP_CUDA_EPI_GELU_AUX:
        return k->has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    case GPP_CUDA_EPI_NONE:
        break;
    }
    return k->has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

/* bias and aux: the first call's pointers. The heuristic reads their
 * alignment from the descriptor's pointer attributes (cublasLt.h,
 * CUBLASLT_MATMUL_DESC_BIAS_POINTER), so they are set before it runs; the
 * key holds the bias's alignment, and aux buffers come from the caching
 * allocator (256-byte aligned). */
static int s_plan_build(gpp_cuda_t *c, s_plan_t *p, const s_key_t *k, const void *bias,
                        const void *aux, gpp_err_t *err)
{
    memset(p, 0, sizeof *p);
    p->key = *k;
    cublasComputeType_t ct = k->packed                            ? CUBLAS_COMPUTE_32F
                             : k->precision == GPP_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                             : k->precision == GPP_PRECISION_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                                                  : CUBLAS_COMPUTE_32F;
    cudaDataType_t ab = k->packed ? CUDA_R_16BF : CUDA_R_32F; /* A, B */
    cudaDataType_t cd = k->c_bf16 ? CUDA_R_16BF : CUDA_R_32F; /* C, D (bias, aux: D's) */
    GPP_LT_TRY(gpp_cuda_lt.cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F), err);
    /* column-major: first operand is B (op trans_b), second A (op trans_a) */
    cublasOperation_t ob = k->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t oa = k->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    int rc = -1;
    cublasLtMatmulPreference_t pref = NULL;
    if (gpp_cuda_lt.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ob,
                                                   sizeof ob) ||
        gpp_cuda_lt.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &oa,
                                                   sizeof oa)) {
        gpp_err_set(err, "gpp_cuda_lt.cublasLtMatmulDescSetAttribute(TRANSA/TRANSB) failed");
        goto out;
    }
    if (k->has_bias || k->epi != GPP_CUDA_EPI_NONE) {
        cublasLtEpilogue_t epi = s_epilogue(k);
        if (gpp_cuda_lt.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                       sizeof epi)) {
            gpp_err_set(err, "cublasLtMatmulDescSetAttribute(EPILOGUE %d) failed", (int)epi);
            goto out;
        }
    }
    if (k->epi == GPP_CUDA_EPI_GELU_AUX &&
        gpp_cuda_lt.cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                                   &k->aux_ld, sizeof k->aux_ld)) {
        gpp_err_set(err, "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD %lld) failed",
                    (long long)k->aux_ld);
        goto out;
    }
    if ((bias && gpp_cuda_lt.cublasLtMatmulDescSetAttribute(
                     p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias)) ||
        (k->epi == GPP_CUDA_EPI_GELU_AUX &&
         gpp_cuda_lt.cublasLtMatmulDescSetAttribute(
             p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux))) {
        gpp_err_set(err, "cublasLtMatmulDescSetAttribute(BIAS/AUX_POINTER) failed");
        goto out;
    }
    if (k->packed && !k->c_bf16) { /* bias and aux stay fp32 with bf16 operands: say so */
        cudaDataType_t f32 = CUDA_R_32F;
        if ((k->has_bias && gpp_cuda_lt.cublasLtMatmulDescSetAttribute(
                                p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &f32, sizeof f32)) ||
            (k->epi == GPP_CUDA_EPI_GELU_AUX &&
             gpp_cuda_lt.cublasLtMatmulDescSetAttribute(
                 p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &f32, sizeof f32))) {
            gpp_err_set(err, "cublasLtMatmulDescSetAttribute(BIAS/AUX_DATA_TYPE fp32) failed");
            goto out;
        }
    }
    /* B row-major: (k x n) or, transposed, (n x k); A: (m x k) or (k x m) */
    if (s_layout(&p->lb, ab, k->trans_b ? k->n : k->k, k->trans_b ? k->k : k->n, k->ldb, k->batch,
                 k->sb, err) < 0 ||
        s_layout(&p->la, ab, k->trans_a ? k->k : k->m, k->trans_a ? k->m : k->k, k->lda, k->batch,
                 k->sa, err) < 0 ||
        s_layout(&p->lc, cd, k->m, k->n, k->ldc, k->batch, k->sc, err) < 0)
        goto out;
    if (gpp_cuda_lt.cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS) {
        gpp_err_set(err, "cublasLtMatmulPreferenceCreate failed");
        goto out;
    }
    size_t ws = GPP_CUDA_LT_WS_BYTES;
    gpp_cuda_lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &ws, sizeof ws);
    /* the column-major call's A is our B, its B our A */
    gpp_cuda_lt.cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &k->align_b, sizeof k->align_b);
    gpp_cuda_lt.cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &k->align_a, sizeof k->align_a);
    gpp_cuda_lt.cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &k->align_c, sizeof k->align_c);
    gpp_cuda_lt.cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &k->align_c, sizeof k->align_c);
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    cublasStatus_t st = gpp_cuda_lt.cublasLtMatmulAlgoGetHeuristic(
        c->lt, p->op, p->lb, p->la, p->lc, p->lc, pref, 1, &res, &nres);
    if (st != CUBLAS_STATUS_SUCCESS || nres == 0) {
        rc = GPP_CUDA_NO_ALGO;
        gpp_err_set(err,
                    "cuBLASLt has no algorithm for a %lldx%lldx%lld product (batch %lld, %s%s%s): "
                    "cublasLtMatmulAlgoGetHeuristic: %s",
                    (long long)k->m, (long long)k->n, (long long)k->k, (long long)k->batch,
                    gpp_precision_name((gpp_precision_t)k->precision),
                    k->packed ? ", bf16 operands" : "", k->c_bf16 ? ", bf16 result" : "",
                    st != CUBLAS_STATUS_SUCCESS ? gpp_cuda_lt.cublasLtGetStatusString(st)
                                                : "no result");
        goto out;
    }
    p->algo = res.algo;
    p->used = 1;
    rc = 0;
out:
    if (pref)
        gpp_cuda_lt.cublasLtMatmulPreferenceDestroy(pref);
    if (rc < 0) {
        p->used = 1; /* release what was created */
        s_plan_release(p);
        if (rc == GPP_CUDA_NO_ALGO) { /* remembered for the key */
            p->used = p->no_algo = 1;
            p->key = *k;
        }
    }
    return rc == 0 ? 0 : rc == GPP_CUDA_NO_ALGO ? GPP_CUDA_NO_ALGO : -1;
}

/* ---- packed bf16 roundings of parameters ---- */

#define S_WPACK_MAX 512 /* parameters a backend keeps roundings of; more are packed per product */

struct gpp_cuda_wpack_s {
    const float *src;
    int64_t rows, cols, ld; /* the source, row-major */
    void *bf16;             /* rows x cols, packed */
    int valid;              /* bf16 holds src's values as rounded on stream st */
    cudaStream_t st;
};

static size_t s_wpack_span(const struct gpp_cuda_wpack_s *w)
{
    return (size_t)((w->rows - 1) * w->ld + w->cols) * sizeof(float);
}

void gpp_cuda_wpack_forget(gpp_backend_t *be, const void *p, size_t bytes, int release)
{
    gpp_cuda_t *c = gpp_cuda_be(be);
    const char *lo = p, *hi = lo + bytes;
    for (int i = 0; i < c->n_wpack; i++) {
        struct gpp_cuda_wpack_s *w = &c->wpack[i];
        const char *a = (const char *)w->src, *b = a + s_wpack_span(w);
        if (a >= hi || b <= lo)
            continue;
        w->valid = 0;
        if (release) { /* the source is gone: so is the entry */
            gpp_cuda_own_free(be, w->bf16);
            c->wpack[i--] = c->wpack[--c->n_wpack];
        }
    }
}

void gpp_cuda_wpack_destroy(gpp_backend_t *be)
{
    gpp_cuda_t *c = gpp_cuda_be(be);
    for (int i = 0; i < c->n_wpack; i++)
        gpp_cuda_own_free(be, c->wpack[i].bf16);
    free(c->wpack);
    c->wpack = NULL;
    c->n_wpack = 0;
}

/* The bf16 rounding of parameter src (rows x cols, row stride ld) for a
 * product on stream cs: kept from an earlier product on the same stream
 * while src is unchanged, else (re)packed into the entry's buffer. NULL
 * when none can be kept (another stream's, no room): pack per product. */
static const void *s_wpack(gpp_stream_t *s, const float *src, int64_t rows, int64_t cols,
                           int64_t ld, gpp_err_t *err, int *rc)
{
    gpp_cuda_t *c = gpp_cuda_be(s->be);
    cudaStream_t st = gpp_cuda_stream(s);
    struct gpp_cuda_wpack_s *w = NULL;
    *rc = 0;
    for (int i = 0; i < c->n_wpack && !w; i++)
        if (c->wpack[i].src == src && c->wpack[i].rows == rows && c->wpack[i].cols == cols &&
            c->wpack[i].ld == ld)
            w = &c->wpack[i];
    if (w && w->valid && w->st == st)
        return w->bf16;
    if (w && w->valid) /* rounded for another stream: not ordered with this one */
        return NULL;
    if (!w) {
        if (c->n_wpack == S_WPACK_MAX)
            return NULL;
        void *buf = gpp_cuda_own_alloc(s->be, (size_t)(rows * cols) * 2);
        if (!buf)
            return NULL; /* no room: the per-product buffer says so if it has none either */
        if (!c->wpack)
            c->wpack = gpp_xcalloc(S_WPACK_MAX, sizeof *c->wpack);
        w = &c->wpack[c->n_wpack++];
        *w = (struct gpp_cuda_wpack_s){src, rows, cols, ld, buf, 0, st};
    }
    cudaError_t e = gpp_cuk_pack_bf16(st, 1, rows, cols, src, ld, 0, w->bf16);
    if (e != cudaSuccess) {
        *rc = gpp_cuda_fail(err, __FILE__, __LINE__, "gpp_cuk_pack_bf16", e);
        return NULL;
    }
    w->valid = 1;
    w->st = st;
    return w->bf16;
}

/* The bf16 operands of a product with packed set: each fp32 one rounded
 * into the stream's pack buffer (a parameter's kept rounding where there
 * is one), bf16 ones as they are; *k's strides and alignments follow. */
static int s_pack_operands(gpp_stream_t *s, const gpp_cuda_gemm_t *g, s_key_t *k, const void **a,
                           const void **b, const void **bias, gpp_err_t *err)
{
    cudaStream_t st = gpp_cuda_stream(s);
    /* row-major A (m x k, or k x m), B (k x n, or n x k); a packed row
     * stride is the row length */
    int64_t ra = g->trans_a ? g->k : g->m, ca = g->trans_a ? g->m : g->k;
    int64_t rb = g->trans_b ? g->n : g->k, cb = g->trans_b ? g->k : g->n;
    int rc = 0;
    const void *kb = NULL, *kbias = NULL;
    if (!g->b_bf16 && g->b_param && k->batch == 1 &&
        !(kb = s_wpack(s, (const float *)g->b, rb, cb, g->ldb, err, &rc)) && rc < 0)
        return rc;
    if (g->c_bf16 && g->bias && !(kbias = s_wpack(s, g->bias, 1, g->n, g->n, err, &rc)) && rc < 0)
        return rc;
    /* the pack buffer: A | B | bias, each part 256-byte aligned */
    size_t off_b = 0, off_bias = 0, bytes = 0;
    if (!g->a_bf16)
        bytes = (size_t)(k->batch * ra * ca) * 2;
    off_b = bytes = (bytes + 255) / 256 * 256;
    if (!g->b_bf16 && !kb)
        bytes += (size_t)(k->batch * rb * cb) * 2;
    off_bias = bytes = (bytes + 255) / 256 * 256;
    if (g->c_bf16 && g->bias && !kbias)
        bytes += (size_t)g->n * 2;
    char *pk = NULL;
    if (bytes > 0 && !(pk = gpp_cuda_pack_buffer(s, bytes, err)))
        return gpp_err_prefix(err, "backend %s: bf16 product", s->be->name);
    if (!g->a_bf16) {
        GPP_CUDA_TRY(gpp_cuk_pack_bf16(st, k->batch, ra, ca, g->a, g->lda, k->sa, pk), err);
        *a = pk;
        k->lda = ca;
        k->sa = k->batch > 1 ? ra * ca : 0;
    }
    if (!g->b_bf16) {
        if (!kb) {
            GPP_CUDA_TRY(gpp_cuk_pack_bf16(st, k->batch, rb, cb, g->b, g->ldb, k->sb, pk + off_b),
                         err);
            kb = pk + off_b;
        }
        *b = kb;
        k->ldb = cb;
        k->sb = k->batch > 1 ? rb * cb : 0;
    }
    if (g->c_bf16 && g->bias) {
        if (!kbias) {
            GPP_CUDA_TRY(gpp_cuk_pack_bf16(st, 1, 1, g->n, g->bias, g->n, 0, pk + off_bias), err);
            kbias = pk + off_bias;
        }
        *bias = kbias;
    }
    k->align_a = s_align(*a);
    k->align_b = s_align(*b);
    k->align_bias = *bias ? s_align(*bias) : 0;
    return 0;
}

int gpp_cuda_gemm(gpp_stream_t *s, const gpp_cuda_gemm_t *g, gpp_err_t *err)
{
    assert(g->k > 0);
    assert(g->epi == GPP_CUDA_EPI_NONE || g->batch <= 1);
    assert(g->epi != GPP_CUDA_EPI_GELU_AUX || (g->aux && g->aux_ld >= g->n && g->aux_ld % 8 == 0));
    if (g->m == 0 || g->n == 0)
        return 0;
    gpp_cuda_t *c = gpp_cuda_be(s->be);
    gpp_cuda_stream_t *cs = gpp_cuda_st(s);
    s_key_t k;
    memset(&k, 0, sizeof k); /* padding too: the key is hashed and compared as bytes */
    k.trans_a = g->trans_a;
    k.trans_b = g->trans_b;
    k.precision = (int)c->precision;
    k.c_bf16 = g->c_bf16 != 0;
    k.has_bias = g->bias != NULL;
    k.epi = (int)g->epi;
    k.aux_ld = g->epi == GPP_CUDA_EPI_GELU_AUX ? g->aux_ld : 0;
    k.m = g->m;
    k.n = g->n;
    k.k = g->k;
    k.lda = g->lda;
    k.ldb = g->ldb;
    k.ldc = g->ldc;
    k.batch = g->batch > 1 ? g->batch : 1;
    k.sa = k.batch > 1 ? g->sa : 0;
    k.sb = k.batch > 1 ? g->sb : 0;
    k.sc = k.batch > 1 ? g->sc : 0;
    k.align_a = s_align(g->a);
    k.align_b = s_align(g->b);
    k.align_c = s_align(g->c);
    k.align_bias = g->bias ? s_align(g->bias) : 0;
    const void *a = g->a, *b = g->b, *bias = g->bias;
    /* bf16 x bf16 -> fp32 or bf16: any bf16 operand or result, or packed
       bf16 precision (gpp_cuda_gemm_t) */
    k.packed = g->a_bf16 || g->b_bf16 || g->c_bf16 ||
               (c->precision == GPP_PRECISION_BF16 && c->bf16_packed);
    if (k.packed) {
        int rc = s_pack_operands(s, g, &k, &a, &b, &bias, err);
        if (rc < 0)
            return rc;
    }
    s_plan_t *p = &c->plans->slot[s_hash(&k)];
    if (p->used && p->no_algo && memcmp(&p->key, &k, sizeof k) == 0) {
        gpp_err_set(err,
                    "backend %s: cuBLASLt has no algorithm for a %lldx%lldx%lld product (batch "
                    "%lld) with this epilogue and these types (asked before)",
                    s->be->name, (long long)k.m, (long long)k.n, (long long)k.k,
                    (long long)k.batch);
        return GPP_CUDA_NO_ALGO;
    }
    if (!p->used || memcmp(&p->key, &k, sizeof k) != 0) {
        s_plan_release(p); /* a collision evicts the older plan */
        int rc = s_plan_build(c, p, &k, bias, g->aux, err);
        if (rc < 0) {
            gpp_err_prefix(err, "backend %s", s->be->name);
            return rc;
        }
    }
    if (bias)
        GPP_LT_TRY(gpp_cuda_lt.cublasLtMatmulDescSetAttribute(
                       p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
                   err);
    if (g->epi == GPP_CUDA_EPI_GELU_AUX)
        GPP_LT_TRY(gpp_cuda_lt.cublasLtMatmulDescSetAttribute(
                       p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof g->aux),
                   err);
    void *ws = gpp_cuda_lt_workspace(s, err);
    if (!ws)
        return -1;
    GPP_LT_TRY(gpp_cuda_lt.cublasLtMatmul(c->lt, p->op, &g->alpha, b, p->lb, a, p->la, &g->beta,
                                          g->c, p->lc, g->c, p->lc, &p->algo, ws,
                                          GPP_CUDA_LT_WS_BYTES, cs->st),
               err);
    return 0;
}
