/* bench_cuda_ops: the CUDA backend's ops at the zoo models' shapes.
 *
 *   bench_cuda_ops [--device N] [--reps R] [--quick]
 *
 * For each op and shape it enqueues R calls on one stream after a warm-up
 * call and synchronises once, so the time per call is the device time plus
 * whatever of the launch cost the queue does not hide; it prints the time
 * per call and, for products, TFLOP/s. Runs the products in fp32, tf32,
 * bf16, bf16p (bf16 with GPP_CUDA_BF16_GEMM=packed) and bf16t (bf16 with
 * the activations stored in bf16, as the executor keeps them at bf16: the
 * products, attention, layer norm and GELU then read and write 2-byte
 * elements; one backend each). The launch-overhead line
 * is a ReLU over one element: the cost of one enqueued op that does nothing. Shapes: MMT at hidden
 * 1024, seq 128, micro-batch 8 (m = 1024 token rows: the QKV, output, FFN-in and FFN-out products,
 * attention with 16 heads, layer norm, GELU); the DLRM-like (2048, 512 -> 256) MLP layer; the
 * CANDLE-Uno-like wide input layer (64, 29120 -> 4096). Linear + GELU /
 * ReLU forward as one call (gpp_linear_act_fwd: the activation in
 * cuBLASLt's epilogue) against the product and the activation as two ops.
 * Attention's fused core against batched products + softmax at seq 128 and
 * 256 (micro-batch 8 and 32), fp32 and bf16. The embedding bag's sparse
 * backward (device accumulation) at DLRM's micro-batches 256 and 2048. The
 * bf16 pack kernel alone (GB/s) at the MMT and CANDLE operand shapes.
 *
 * Without a usable GPU it prints why and exits 77 (nothing is measured). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_time.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_sparse.h"
#ifdef GPP_HAVE_CUDA
#include "kernels/cuda/gpp_cuda.h" /* the pack kernel's launcher and the stream */
#endif

static int s_reps = 50;

typedef struct {
    gpp_backend_t *be;
    gpp_stream_t *st;
} gpu_t;

/* the element type of activations (inputs, outputs, their gradients):
 * bf16 in the bf16t pass (the executor's bf16 tensors), else fp32 */
static gpp_dtype_t s_act_dt = GPP_DTYPE_F32;

static int s_tensor_of(gpu_t *d, gpp_dtype_t dt, int64_t n, int64_t rows, int64_t cols,
                       gpp_tensor_t *t)
{
    gpp_err_t err;
    if (gpp_tensor_alloc(d->be, dt, n, rows, cols, t, &err) < 0 ||
        gpp_stream_zero(d->st, t->data, gpp_tensor_bytes(t), &err) < 0) {
        fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
        exit(1);
    }
    return 0;
}
static int s_tensor(gpu_t *d, int64_t n, int64_t rows, int64_t cols, gpp_tensor_t *t)
{
    return s_tensor_of(d, GPP_DTYPE_F32, n, rows, cols, t);
}
static int s_act(gpu_t *d, int64_t n, int64_t rows, int64_t cols, gpp_tensor_t *t)
{
    return s_tensor_of(d, s_act_dt, n, rows, cols, t);
}

/* ms per call of fn over s_reps enqueued calls (one warm-up first) */
typedef int (*op_fn)(gpu_t *d, void *ctx, gpp_err_t *err);
static double s_time(gpu_t *d, op_fn fn, void *ctx)
{
    gpp_err_t err;
    if (fn(d, ctx, &err) < 0 || gpp_stream_sync(d->st, &err) < 0) {
        fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
        exit(1);
    }
    double t0 = gpp_now_ms();
    for (int i = 0; i < s_reps; i++)
        if (fn(d, ctx, &err) < 0) {
            fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
            exit(1);
        }
    if (gpp_stream_sync(d->st, &err) < 0) {
        fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
        exit(1);
    }
    return (gpp_now_ms() - t0) / s_reps;
}

/* ---- linear ---- */
typedef struct {
    gpp_tensor_t x, w, b, y, dx, dw, db;
    int bwd;
} lin_t;

static int s_lin(gpu_t *d, void *c, gpp_err_t *err)
{
    lin_t *l = c;
    if (l->bwd)
        return gpp_linear_bwd(d->st, &l->x, &l->w, &l->y, &l->dx, &l->dw, &l->db, err);
    return gpp_linear_fwd(d->st, &l->x, &l->w, &l->b, &l->y, err);
}

/* ms per forward (*f) and backward (*b) call of a linear with bias,
 * (m, in -> out) */
static void s_time_linear(gpu_t *d, int64_t m, int64_t in, int64_t out, double *f, double *b)
{
    lin_t l = {0};
    s_act(d, 1, m, in, &l.x);
    s_tensor(d, 1, out, in, &l.w);
    s_tensor(d, 1, 1, out, &l.b);
    s_act(d, 1, m, out, &l.y);
    s_act(d, 1, m, in, &l.dx);
    s_tensor(d, 1, out, in, &l.dw);
    s_tensor(d, 1, 1, out, &l.db);
    *f = s_time(d, s_lin, &l);
    l.bwd = 1;
    *b = s_time(d, s_lin, &l);
    gpp_tensor_t *ts[] = {&l.x, &l.w, &l.b, &l.y, &l.dx, &l.dw, &l.db};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        gpp_tensor_free(d->be, ts[i]);
}

static void s_bench_linear(gpu_t *d, const char *prec, const char *name, int64_t m, int64_t in,
                           int64_t out)
{
    double flop = 2.0 * (double)m * (double)in * (double)out, f, b;
    s_time_linear(d, m, in, out, &f, &b);
    printf("%-5s linear+b %-22s (%5lld, %5lld -> %5lld): fwd %8.3f ms %7.2f TFLOP/s | "
           "bwd %8.3f ms %7.2f TFLOP/s\n",
           prec, name, (long long)m, (long long)in, (long long)out, f, flop / f * 1e-9, b,
           2 * flop / b * 1e-9);
}

/* ---- linear + activation: one call (cuBLASLt epilogue) vs two ops ---- */
typedef struct {
    gpp_tensor_t x, w, b, z, y;
    gpp_op_type_t act;
    int fused;
} lact_t;

static int s_lact(gpu_t *d, void *c, gpp_err_t *err)
{
    lact_t *l = c;
    if (l->fused)
        return gpp_linear_act_fwd(d->st, &l->x, &l->w, &l->b, l->act, GPP_GELU_TANH,
                                  l->act == GPP_OP_GELU ? &l->z : NULL, &l->y, err);
    if (gpp_linear_fwd(d->st, &l->x, &l->w, &l->b, &l->z, err) < 0)
        return -1;
    return l->act == GPP_OP_RELU ? gpp_relu_fwd(d->st, &l->z, &l->y, err)
                                 : gpp_gelu_fwd(d->st, &l->z, GPP_GELU_TANH, &l->y, err);
}

static void s_bench_linear_act(gpu_t *d, const char *prec, const char *name, gpp_op_type_t act,
                               int64_t m, int64_t in, int64_t out)
{
    lact_t l = {.act = act};
    s_act(d, 1, m, in, &l.x);
    s_tensor(d, 1, out, in, &l.w);
    s_tensor(d, 1, 1, out, &l.b);
    s_act(d, 1, m, out, &l.z);
    s_act(d, 1, m, out, &l.y);
    double u = s_time(d, s_lact, &l);
    l.fused = 1;
    double f = s_time(d, s_lact, &l);
    printf("%-5s linear+%s %-20s (%5lld, %5lld -> %5lld): fused fwd %8.3f ms | two ops %8.3f ms "
           "| %.2fx\n",
           prec, act == GPP_OP_RELU ? "relu" : "gelu", name, (long long)m, (long long)in,
           (long long)out, f, u, u / f);
    gpp_tensor_t *ts[] = {&l.x, &l.w, &l.b, &l.z, &l.y};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        gpp_tensor_free(d->be, ts[i]);
}

/* ---- attention, layer norm, GELU, launch overhead ---- */
typedef struct {
    gpp_tensor_t x, y, dx, g, b, dg, db, stash;
    gpp_attention_params_t p, dp;
    int heads, kind, bwd; /* kind 0 attention, 1 layer norm, 2 gelu, 3 relu */
} misc_t;

static int s_misc(gpu_t *d, void *c, gpp_err_t *err)
{
    misc_t *k = c;
    switch (k->kind) {
    case 0:
        return k->bwd
                   ? gpp_attention_bwd(d->st, &k->x, &k->p, k->heads, 0, k->stash.data, &k->y,
                                       &k->dx, &k->dp, err)
                   : gpp_attention_fwd(d->st, &k->x, &k->p, k->heads, 0, &k->y, k->stash.data, err);
    case 1:
        return k->bwd ? gpp_layernorm_bwd(d->st, &k->x, &k->g, k->stash.data, &k->y, &k->dx, &k->dg,
                                          &k->db, err)
                      : gpp_layernorm_fwd(d->st, &k->x, &k->g, &k->b, &k->y, k->stash.data, err);
    case 2:
        return k->bwd ? gpp_gelu_bwd(d->st, &k->x, GPP_GELU_TANH, &k->y, &k->dx, err)
                      : gpp_gelu_fwd(d->st, &k->x, GPP_GELU_TANH, &k->y, err);
    default:
        return gpp_relu_fwd(d->st, &k->x, &k->y, err);
    }
}

/* The parameters and their gradients of an attention op, in that order */
static void s_attn_params(misc_t *k, gpp_tensor_t *pw[8])
{
    gpp_tensor_t *t[] = {&k->p.w_qkv,  &k->p.b_qkv,  &k->p.w_o,  &k->p.b_o,
                         &k->dp.w_qkv, &k->dp.b_qkv, &k->dp.w_o, &k->dp.b_o};
    memcpy(pw, t, sizeof t);
}

/* The tensors of one op of `kind` at these shapes, zeroed. */
static void s_misc_new(gpu_t *d, misc_t *k, int kind, int64_t n, int64_t seq, int64_t hid,
                       int heads)
{
    *k = (misc_t){.kind = kind, .heads = heads};
    s_act(d, n, seq, hid, &k->x);
    s_act(d, n, seq, hid, &k->y);
    s_act(d, n, seq, hid, &k->dx);
    s_tensor(d, 1, 1, hid, &k->g);
    s_tensor(d, 1, 1, hid, &k->b);
    s_tensor(d, 1, 1, hid, &k->dg);
    s_tensor(d, 1, 1, hid, &k->db);
    size_t stash = kind == 0 ? gpp_attention_stash_bytes(n, seq, hid, heads)
                             : gpp_layernorm_stash_bytes(n, seq);
    s_tensor(d, 1, 1, (int64_t)(stash / 4) + 1, &k->stash);
    gpp_tensor_t *pw[8];
    s_attn_params(k, pw);
    for (int i = 0; kind == 0 && i < 8; i++) {
        int j = i % 4;
        s_tensor(d, 1, j == 0 ? 3 * hid : j == 2 ? hid : 1, j == 1 ? 3 * hid : hid, pw[i]);
    }
}

static void s_misc_free(gpu_t *d, misc_t *k)
{
    gpp_tensor_t *ts[] = {&k->x, &k->y, &k->dx, &k->g, &k->b, &k->dg, &k->db, &k->stash};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        gpp_tensor_free(d->be, ts[i]);
    gpp_tensor_t *pw[8];
    s_attn_params(k, pw);
    for (int i = 0; k->kind == 0 && i < 8; i++)
        gpp_tensor_free(d->be, pw[i]);
}

static void s_bench_misc(gpu_t *d, int kind, int64_t n, int64_t seq, int64_t hid, int heads)
{
    misc_t k;
    s_misc_new(d, &k, kind, n, seq, hid, heads);
    static const char *names[] = {"attention", "layernorm", "gelu", "relu (1 element)"};
    double f = s_time(d, s_misc, &k);
    if (kind == 3) {
        printf("      launch overhead: %s %.2f us per enqueued op\n", names[kind], f * 1e3);
    } else {
        k.bwd = 1;
        double b = s_time(d, s_misc, &k);
        printf("      %-10s n %lld seq %lld hidden %lld%s: fwd %8.3f ms | bwd %8.3f ms%s\n",
               names[kind], (long long)n, (long long)seq, (long long)hid,
               kind == 0 ? " (16 heads)" : "", f, b,
               s_act_dt == GPP_DTYPE_BF16 ? " (bf16 tensors)" : "");
    }
    s_misc_free(d, &k);
}

/* The embedding bag's backward into its sparse gradient (all on the
 * device: radix sort, first-touch numbering, pair-order sums) and the
 * clear after the optimizer step, at DLRM's shapes: `bags` bags of `bag`
 * indices into a (rows, dim) table, a third of them on 64 hot rows. */
typedef struct {
    gpp_tensor_t idx, dy;
    gpp_sparse_grad_t *g;
} sparse_t;

static int s_sparse(gpu_t *d, void *c, gpp_err_t *err)
{
    sparse_t *k = c;
    if (gpp_embedding_bag_bwd(d->st, &k->idx, &k->dy, k->g, err) < 0)
        return -1;
    return gpp_sparse_grad_clear(d->st, k->g, err);
}

static void s_bench_sparse(gpu_t *d, int64_t bags, int64_t bag, int64_t rows, int64_t dim)
{
    gpp_err_t err;
    sparse_t k = {0};
    int32_t *h = malloc((size_t)(bags * bag) * sizeof *h);
    uint64_t rng = 88172645463325252ull;
    for (int64_t i = 0; i < bags * bag; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        h[i] = (int32_t)(i % 3 == 0 ? rng % 64 * (uint64_t)(rows / 64) : rng % (uint64_t)rows);
    }
    if (gpp_tensor_alloc(d->be, GPP_DTYPE_I32, bags, 1, bag, &k.idx, &err) < 0 ||
        gpp_stream_copy(d->st, k.idx.data, h, (size_t)(bags * bag) * 4, GPP_COPY_H2D, &err) < 0 ||
        s_tensor(d, bags, 1, dim, &k.dy) < 0 ||
        !(k.g = gpp_sparse_grad_new(d->st, rows, dim, bags * bag, &err)) ||
        gpp_stream_sync(d->st, &err) < 0) {
        fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
        exit(1);
    }
    free(h);
    double ms = s_time(d, s_sparse, &k);
    printf("      embedding bwd (sparse, %lld pairs into %lld x %lld) + clear: %8.3f ms\n",
           (long long)(bags * bag), (long long)rows, (long long)dim, ms);
    gpp_sparse_grad_destroy(&k.g);
    gpp_tensor_free(d->be, &k.idx);
    gpp_tensor_free(d->be, &k.dy);
}

/* The bf16 pack kernel of GPP_CUDA_BF16_GEMM=packed alone (an operand
 * rounded before a product): ms per call and GB/s of its bytes (4 read
 * and 2 written an element), against the device's memory bandwidth. */
#ifdef GPP_HAVE_CUDA
typedef struct {
    gpp_tensor_t x;
    void *dst;
} pack_t;

static int s_pack(gpu_t *d, void *c, gpp_err_t *err)
{
    pack_t *p = c;
    cudaError_t e = gpp_cuk_pack_bf16(gpp_cuda_stream(d->st), 1, p->x.rows, p->x.cols, p->x.data,
                                      p->x.cols, 0, p->dst);
    return e == cudaSuccess ? 0 : gpp_err_set(err, "pack_bf16: %s", cudaGetErrorString(e));
}
#endif

static void s_bench_pack(gpu_t *d, int64_t rows, int64_t cols)
{
#ifdef GPP_HAVE_CUDA
    pack_t p;
    gpp_err_t err;
    s_tensor(d, 1, rows, cols, &p.x);
    if (!(p.dst = gpp_backend_alloc(d->be, (size_t)(rows * cols) * 2, &err))) {
        fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
        exit(1);
    }
    double ms = s_time(d, s_pack, &p);
    printf("      pack bf16 (%5lld x %5lld): %8.4f ms, %7.1f GB/s\n", (long long)rows,
           (long long)cols, ms, 6.0 * (double)(rows * cols) / (ms * 1e6));
    gpp_backend_free(d->be, &p.dst);
    gpp_tensor_free(d->be, &p.x);
#else
    (void)d, (void)rows, (void)cols;
#endif
}

/* Attention with the fused core (gpp_cuda_flash.cuh), with batched
 * products + softmax (GPP_CUDA_ATTENTION=unfused: at bf16 over bf16
 * operands and stash) and, at bf16, the products over fp32 operands
 * (unfused-fp32, the bf16 core's comparison), each on its own backend,
 * at MMT's hidden 1024, 16 heads (dh 64): TFLOP/s of the op's model FLOPs
 * (projections and core: 8 s h^2 + 4 s^2 h per sample forward, twice that
 * backward, as model/gpp_optable.c counts them). Each precision first
 * times the two projections alone (the QKV and output linears, the same
 * products the op makes), and each core's line then gives the core's
 * share: the op's time less the projections'. */
static int s_bench_attention_modes(int device, int64_t q)
{
    static const gpp_precision_t precs[] = {GPP_PRECISION_FP32, GPP_PRECISION_BF16};
    static const char *modes[] = {"fused", "unfused", "unfused-fp32"};
    static const int64_t shapes[][2] = {{8, 128}, {8, 256}, {32, 256}}; /* n, seq */
    const int64_t hid = 1024;
    printf("    attention cores, hidden %lld, 16 heads:\n", (long long)hid);
    /* the projections' time per shape, taken on each precision's first backend */
    double proj_f[sizeof shapes / sizeof shapes[0]], proj_b[sizeof proj_f / sizeof(double)];
    for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++)
        for (int mi = 0; mi < 3; mi++) {
            if (mi == 2 && precs[pi] != GPP_PRECISION_BF16)
                continue; /* unfused-fp32 is unfused there */
            gpp_err_t err;
            gpp_backend_cfg_t cfg = {
                .kind = GPP_DEVICE_CUDA, .device = device, .precision = precs[pi]};
            setenv("GPP_CUDA_ATTENTION", modes[mi], 1);
            gpu_t d = {.be = gpp_backend_new(&cfg, &err)};
            unsetenv("GPP_CUDA_ATTENTION");
            if (!d.be || !(d.st = gpp_stream_new(d.be, &err))) {
                fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
                gpp_backend_destroy(&d.be);
                return -1;
            }
            for (size_t si = 0; mi == 0 && si < sizeof shapes / sizeof shapes[0]; si++) {
                int64_t m = shapes[si][0] / q * shapes[si][1];
                double f3, b3, f1, b1;
                s_time_linear(&d, m, hid, 3 * hid, &f3, &b3);
                s_time_linear(&d, m, hid, hid, &f1, &b1);
                proj_f[si] = f3 + f1;
                proj_b[si] = b3 + b1;
                printf("      %-12s %-4s n %2lld seq %lld: fwd %8.3f ms | bwd %8.3f ms\n",
                       "projections", gpp_precision_name(precs[pi]), (long long)(shapes[si][0] / q),
                       (long long)shapes[si][1], proj_f[si], proj_b[si]);
            }
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                int64_t n = shapes[si][0] / q, seq = shapes[si][1];
                misc_t k;
                s_misc_new(&d, &k, 0, n, seq, hid, 16);
                double f = s_time(&d, s_misc, &k);
                k.bwd = 1;
                double b = s_time(&d, s_misc, &k);
                double flops = (double)n * (8.0 * seq * hid * hid + 4.0 * seq * seq * hid);
                printf(
                    "      %-12s %-4s n %2lld seq %lld: fwd %8.3f ms (%6.1f TFLOP/s) | bwd %8.3f "
                    "ms (%6.1f TFLOP/s) | core fwd %7.3f, bwd %7.3f ms\n",
                    modes[mi], gpp_precision_name(precs[pi]), (long long)n, (long long)seq, f,
                    flops / (f * 1e9), b, 2.0 * flops / (b * 1e9), f - proj_f[si], b - proj_b[si]);
                s_misc_free(&d, &k);
            }
            gpp_stream_destroy(&d.st);
            gpp_backend_destroy(&d.be);
        }
    return 0;
}

int main(int argc, char **argv)
{
    int device = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            s_reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else {
            fprintf(stderr, "usage: bench_cuda_ops [--device N] [--reps R] [--quick]\n");
            return 2;
        }
    }
    if (s_reps < 1)
        s_reps = 1;
    int64_t q = quick ? 4 : 1;
    gpp_err_t err;
    /* bf16p: precision bf16 with GPP_CUDA_BF16_GEMM=packed (operands
     * rounded to bf16 by a kernel, then a bf16 product) */
    /* bf16t: precision bf16 with the activations in bf16 (the executor's
     * bf16 tensors): every product reads and writes them directly */
    static const gpp_precision_t precs[] = {GPP_PRECISION_FP32, GPP_PRECISION_TF32,
                                            GPP_PRECISION_BF16, GPP_PRECISION_BF16,
                                            GPP_PRECISION_BF16};
    static const char *labels[] = {"fp32", "tf32", "bf16", "bf16p", "bf16t"};
    for (size_t pi = 0; pi < sizeof precs / sizeof precs[0]; pi++) {
        int first = pi == 0;
        gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CUDA, .device = device, .precision = precs[pi]};
        gpu_t d = {0};
        if (pi == 3)
            setenv("GPP_CUDA_BF16_GEMM", "packed", 1);
        d.be = gpp_backend_new(&cfg, &err);
        unsetenv("GPP_CUDA_BF16_GEMM");
        if (!d.be) {
            printf("bench_cuda_ops: not measured: %s\n", err.msg);
            return 77;
        }
        if (!(d.st = gpp_stream_new(d.be, &err))) {
            fprintf(stderr, "bench_cuda_ops: %s\n", err.msg);
            return 1;
        }
        const char *prec = labels[pi];
        s_act_dt = pi == 4 ? GPP_DTYPE_BF16 : GPP_DTYPE_F32;
        if (first)
            printf("bench_cuda_ops: %s, %d reps per op\n", gpp_backend_name(d.be), s_reps);
        s_bench_linear(&d, prec, "mmt qkv", 1024 / q, 1024, 3072 / q);
        s_bench_linear(&d, prec, "mmt out proj", 1024 / q, 1024, 1024 / q);
        s_bench_linear(&d, prec, "mmt ffn in", 1024 / q, 1024, 4096 / q);
        s_bench_linear(&d, prec, "mmt ffn out", 1024 / q, 4096 / q, 1024);
        s_bench_linear(&d, prec, "dlrm mlp", 2048 / q, 512, 256);
        s_bench_linear(&d, prec, "candle input", 64, 29120 / q, 4096 / q);
        s_bench_linear_act(&d, prec, "mmt ffn in", GPP_OP_GELU, 1024 / q, 1024, 4096 / q);
        s_bench_linear_act(&d, prec, "dlrm mlp", GPP_OP_RELU, 2048 / q, 512, 256);
        s_bench_linear_act(&d, prec, "small mmt ffn", GPP_OP_GELU, 256, 128, 512);
        s_bench_misc(&d, 0, 8 / q, 128, 1024, 16);
        if (first || pi == 4) { /* fp32, and over bf16 tensors */
            s_bench_misc(&d, 1, 8 / q, 128, 1024, 0);
            s_bench_misc(&d, 2, 8 / q, 128, 4096, 0);
        }
        if (first) {
            s_bench_misc(&d, 3, 1, 1, 1, 0);
            s_bench_sparse(&d, 256 / q, 16, 100000, 32);
            s_bench_sparse(&d, 2048 / q, 16, 100000, 32);
        }
        if (pi == 3) { /* the packed products' operands, as above */
            s_bench_pack(&d, 1024 / q, 1024);
            s_bench_pack(&d, 4096 / q, 1024);
            s_bench_pack(&d, 64, 29120 / q);
        }
        gpp_backend_mem_t mem;
        gpp_backend_cache_t cache;
        gpp_backend_mem(d.be, &mem);
        if (gpp_backend_cache_stats(d.be, &cache))
            printf("      device memory: peak %lld MiB, %llu cudaMalloc calls\n",
                   (long long)(mem.peak_bytes >> 20), (unsigned long long)cache.device_allocs);
        gpp_stream_destroy(&d.st);
        gpp_backend_destroy(&d.be);
    }
    return s_bench_attention_modes(device, q) < 0 ? 1 : 0;
}
