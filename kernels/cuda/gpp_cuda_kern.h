/* gpp_cuda_kern: the CUDA kernels' launchers (kernels/cuda/gpp_cuda_*.cu),
 * callable from the C side of the backend. Private to kernels/cuda/.
 *
 * Every launcher enqueues one or two kernels on `st` and returns
 * cudaGetLastError() (a launch error; execution errors surface at the next
 * synchronisation). Pointers are device memory; shapes are the gpp_ops.h
 * shapes flattened to rows x cols, row-major. Data errors found inside a
 * kernel (an index out of range) are recorded in the stream's fault word
 * (gpp_cuda_fault_t, mapped host memory) and reported by the stream's next
 * synchronisation. Reductions have a fixed order (bit-reproducible for a
 * given device). */
#ifndef GPP_CUDA_KERN_H
#define GPP_CUDA_KERN_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "kernels/cuda/gpp_cuda_act.h"
#include "kernels/gpp_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launch shapes of the kernels whose blocks walk rows (grid-stride over
 * rows, threads along a row: no 64-bit division per element, which a GPU
 * does in software). A row of `lanes` work items takes whole warps, at
 * most 256 threads; a block per row, at most GPP_CUK_ROW_BLOCKS blocks. */
#define GPP_CUK_ROW_BLOCKS 32768
static inline unsigned gpp_cuk_row_threads(int64_t lanes)
{
    return lanes >= 256 ? 256u : (unsigned)((lanes + 31) / 32 * 32);
}
static inline unsigned gpp_cuk_row_blocks(int64_t rows)
{
    return rows < GPP_CUK_ROW_BLOCKS ? (unsigned)rows : GPP_CUK_ROW_BLOCKS;
}
/* Short rows several to a block of 256 threads: *bx threads along a row
 * (gpp_cuk_row_threads), *by rows a block, *blocks blocks for rows rows. */
static inline void gpp_cuk_rows_shape(int64_t rows, int64_t lanes, unsigned *bx, unsigned *by,
                                      unsigned *blocks)
{
    *bx = gpp_cuk_row_threads(lanes);
    *by = 256u / *bx;
    *blocks = gpp_cuk_row_blocks((rows + *by - 1) / *by);
}

/* The first data error a kernel found since the last synchronisation. */
enum {
    GPP_CUDA_FAULT_NONE = 0,
    GPP_CUDA_FAULT_EMB_INDEX = 1,
    GPP_CUDA_FAULT_CE_LABEL = 2,
    GPP_CUDA_FAULT_SPARSE_ROW = 3
};
typedef struct {
    int code;
    int value;         /* the bad index, label or row id */
    long long a, b, c; /* where: EMB_INDEX (bag, position, table rows); CE_LABEL (row, classes);
                          SPARSE_ROW (pair, -, table rows) */
} gpp_cuda_fault_t;

/* ---- element-wise (gpp_math.h) over fp32 or bf16 tensors ---- */
cudaError_t gpp_cuk_relu_fwd(cudaStream_t st, int64_t n, gpp_cuk_t x, gpp_cuk_t y);
cudaError_t gpp_cuk_relu_bwd(cudaStream_t st, int64_t n, gpp_cuk_t x, gpp_cuk_t dy, gpp_cuk_t dx);
/* erf: 1 the exact form (GPP_GELU_ERF), 0 the tanh approximation */
cudaError_t gpp_cuk_gelu_fwd(cudaStream_t st, int64_t n, int erf, gpp_cuk_t x, gpp_cuk_t y);
cudaError_t gpp_cuk_gelu_bwd(cudaStream_t st, int64_t n, int erf, gpp_cuk_t x, gpp_cuk_t dy,
                             gpp_cuk_t dx);
/* dst (packed bf16 [batch][rows][cols]) = src (fp32, row stride ld, batch
 * stride stride), rounded to nearest even: the operands of a product with
 * GPP_CUDA_BF16_GEMM=packed */
cudaError_t gpp_cuk_pack_bf16(cudaStream_t st, int64_t batch, int64_t rows, int64_t cols,
                              const float *src, int64_t ld, int64_t stride, void *dst);
/* y = a + b; y += alpha x */
cudaError_t gpp_cuk_add(cudaStream_t st, int64_t n, gpp_cuk_t a, gpp_cuk_t b, gpp_cuk_t y);
cudaError_t gpp_cuk_axpy(cudaStream_t st, int64_t n, float alpha, gpp_cuk_t x, gpp_cuk_t y);
/* Column sums over many rows (bias, layer-norm gain and bias gradients) run
 * in two passes, each in a fixed order: blocks of 32 columns x a chunk of
 * rows write partial sums to device scratch `part`, then a thread per column
 * adds the chunks in order. One block per 32 columns over all rows (the
 * first version) kept 32 of an H100's 132 SMs busy at 1024 columns and
 * walked 4096 rows one load at a time (175 us a call). The chunks: rows /
 * GPP_CUK_CHUNK_ROWS, at most GPP_CUK_MAX_CHUNKS and what part_floats holds
 * for `sums` sums per column; 0 when it cannot hold one. The sums' order
 * depends on rows, cols and part_floats alone. */
#define GPP_CUK_CHUNK_ROWS 64
#define GPP_CUK_MAX_CHUNKS 512
static inline int64_t gpp_cuk_chunks(int64_t rows, int64_t cols, int sums, int64_t part_floats)
{
    int64_t chunks = (rows + GPP_CUK_CHUNK_ROWS - 1) / GPP_CUK_CHUNK_ROWS;
    int64_t fit = part_floats / (sums * (cols > 0 ? cols : 1));
    chunks = chunks < 1 ? 1 : chunks > GPP_CUK_MAX_CHUNKS ? GPP_CUK_MAX_CHUNKS : chunks;
    return chunks < fit ? chunks : fit;
}
/* The second pass: y0[j] += the chunks' part[k cols + j] in order, and, y1
 * not NULL, y1[j] += their part[(chunks + k) cols + j]; y0 may be NULL. */
cudaError_t gpp_cuk_chunks_sum(cudaStream_t st, int64_t cols, int64_t chunks, const float *part,
                               float *y0, float *y1);
/* y[j] += sum over r < rows of x[r ld + j], j < cols (bias gradients; x
 * fp32 or bf16); part: scratch of part_floats floats (at least cols) */
cudaError_t gpp_cuk_colsum_acc(cudaStream_t st, int64_t rows, int64_t cols, gpp_cuk_t x, int64_t ld,
                               float *y, float *part, int64_t part_floats);
/* y[r cols + j] += b[j], r < rows, j < cols: a bias added after a product
 * that could not take it in its epilogue (y fp32 or bf16) */
cudaError_t gpp_cuk_bias_rows(cudaStream_t st, int64_t rows, int64_t cols, const float *b,
                              gpp_cuk_t y);
/* dst[r ldd + j] += src[r lds + j], r < rows, j < c: a column block of
 * one matrix into another (concat and slice backward); src and dst fp32 or
 * bf16 */
cudaError_t gpp_cuk_block_acc(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t src, int64_t lds,
                              gpp_cuk_t dst, int64_t ldd);
/* dst[r ldd + j] = src[r lds + j] converted: a column block between
 * tensors of different element types (concat and slice forward; one type:
 * cudaMemcpy2DAsync) */
cudaError_t gpp_cuk_block_copy(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t src, int64_t lds,
                               gpp_cuk_t dst, int64_t ldd);

/* ---- layer norm over cols; stash (mean, 1/std) per row, fp32; x, y, dy,
 * dx fp32 or bf16 ---- */
cudaError_t gpp_cuk_layernorm_fwd(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t x,
                                  const float *g, const float *b, gpp_cuk_t y, float *stash,
                                  float eps);
cudaError_t gpp_cuk_layernorm_bwd_dx(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t x,
                                     const float *g, const float *stash, gpp_cuk_t dy,
                                     gpp_cuk_t dx);
/* dg += sum_r dy xhat, db += sum_r dy; either may be NULL. part: scratch
 * of part_floats floats (at least 2 c), as for gpp_cuk_colsum_acc. */
cudaError_t gpp_cuk_layernorm_bwd_params(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t x,
                                         const float *stash, gpp_cuk_t dy, float *dg, float *db,
                                         float *part, int64_t part_floats);

/* ---- attention pieces ----
 * Softmax of rows in place (causal: rows are [batch][cols] queries over
 * cols keys, row r keeps keys j <= r % cols, zero after); backward
 * dp := p (dp - sum_j dp_j p_j). */
cudaError_t gpp_cuk_softmax_fwd(cudaStream_t st, int64_t rows, int64_t cols, float *a, int causal);
cudaError_t gpp_cuk_softmax_bwd(cudaStream_t st, int64_t rows, int64_t cols, const float *p,
                                float *dp);
/* The bf16 unfused core's softmaxes (bf16 = bfloat16, 2 bytes, round to
 * nearest even): p (bf16) = softmax of the fp32 scores s (the same rows
 * and causal rule as gpp_cuk_softmax_fwd, other buffers); ds (bf16) = p
 * (dp - sum_j dp_j p_j) with p bf16 and dp fp32. */
cudaError_t gpp_cuk_softmax_fwd_bf16(cudaStream_t st, int64_t rows, int64_t cols, const float *s,
                                     void *p, int causal);
cudaError_t gpp_cuk_softmax_bwd_bf16(cudaStream_t st, int64_t rows, int64_t cols, const void *p,
                                     const float *dp, void *ds);
/* Between the natural layout [n, seq, parts * hidden] (row stride
 * parts * hidden) and the head-major one [parts][n][heads][seq][dh]:
 * to_heads 1 writes head-major dst from natural src, 0 the reverse; src
 * and dst fp32 or bf16 each. */
cudaError_t gpp_cuk_heads_permute(cudaStream_t st, int64_t n, int64_t seq, int64_t heads,
                                  int64_t dh, int parts, gpp_cuk_t src, gpp_cuk_t dst,
                                  int to_heads);

/* Fused attention core (gpp_cuda_flash.cuh; tc != 0: on tensor cores in
 * bf16, gpp_cuda_flash_tc.cuh, for dh <= 64): reads and writes the heads
 * in place, row i of head h of sample s at s seq ld + i ld + h dh (q, k,
 * v, dq, dk, dv: ldq; out, dout: ldo); lse and dsum [n heads][seq].
 * supports: whether a head size has a kernel (1 <= dh <= 128). fwd writes
 * o and lse; bwd overwrites dsum, dq, dk, dv. q, k, v, out, dout, o, dq,
 * dk, dv are fp32, or bf16 with io_bf16 (either core: the fp32 one
 * computes in fp32 from them, each output rounded once when stored); lse
 * and dsum fp32. A shape without a kernel returns cudaErrorInvalidValue. */
int gpp_cuk_flash_supports(int64_t dh);
/* whether the tensor-core kernels take this head size (dh <= 64) */
int gpp_cuk_flash_tc_supports(int64_t dh);
cudaError_t gpp_cuk_flash_fwd(cudaStream_t st, int64_t n, int64_t heads, int64_t seq, int64_t dh,
                              int64_t ldq, int64_t ldo, float scale, int causal, int tc,
                              int io_bf16, const void *q, const void *k, const void *v, void *o,
                              float *lse);
cudaError_t gpp_cuk_flash_bwd(cudaStream_t st, int64_t n, int64_t heads, int64_t seq, int64_t dh,
                              int64_t ldq, int64_t ldo, float scale, int causal, int tc,
                              int io_bf16, const void *q, const void *k, const void *v,
                              const void *out, const void *dout, const float *lse, float *dsum,
                              void *dq, void *dk, void *dv);

/* ---- embedding bag and sparse gradients ----
 * y[b] = sum_k table[idx[b bag + k]] over bags (summed in fp32, y fp32 or
 * bf16); a bad index sets the fault (y undefined). */
cudaError_t gpp_cuk_embedding_fwd(cudaStream_t st, int64_t bags, int64_t bag, int64_t dim,
                                  int64_t table_rows, const int32_t *idx, const float *table,
                                  gpp_cuk_t y, gpp_cuda_fault_t *fault);
/* Sums n (row id, value row) pairs onto a sparse gradient (gpp_sparse.h),
 * all on the device (gpp_cuda_rows.cu says how): ids[p] in [0,
 * table_rows) (another sets the fault and is skipped), the value row of
 * pair p at values + (p / div) * stride (fp32, or bf16: an embedding
 * bag's bf16 dy; summed in fp32). Rows the gradient does not hold
 * take slots *count, *count + 1, ... in first-touch order; each row's
 * pairs are summed in pair order, as the CPU backend does. *count is the
 * gradient's device counter, *host_count its mapped host copy (both
 * updated in stream order); the caller guarantees *count + the fresh rows
 * <= the value block's rows. scratch: gpp_cuk_sparse_scratch_ints(n)
 * int32 of device memory, free once the stream passes this work. */
int64_t gpp_cuk_sparse_scratch_ints(int64_t n);
cudaError_t gpp_cuk_sparse_accum(cudaStream_t st, int64_t n, int64_t dim, int64_t table_rows,
                                 const int32_t *ids, gpp_cuk_t values, int64_t div, int64_t stride,
                                 int32_t *scratch, float *gvalues, int32_t *slot_map, int32_t *rows,
                                 int32_t *count, int32_t *host_count, gpp_cuda_fault_t *fault);
/* slot_map[rows[k]] = -1 for k < min(bound, *count), then *count =
 * *host_count = 0 (bound: the host's upper bound of *count) */
cudaError_t gpp_cuk_sparse_clear(cudaStream_t st, int64_t bound, int32_t *count,
                                 int32_t *host_count, const int32_t *rows, int32_t *slot_map);

/* ---- losses ----
 * MSE: *loss = mean (x - t)^2; dx (may be absent) += g (x - t), g = 2 scale
 * / n; x and dx fp32 or bf16, the target fp32. */
cudaError_t gpp_cuk_mse(cudaStream_t st, int64_t n, gpp_cuk_t x, const float *t, gpp_cuk_t dx,
                        float g, float *loss);
/* CE per row into row_loss [rows]; dx (may be absent) += g (softmax -
 * onehot); logits and dx fp32 or bf16. A label outside [0, c) sets the
 * fault. */
cudaError_t gpp_cuk_ce_rows(cudaStream_t st, int64_t rows, int64_t c, gpp_cuk_t logits,
                            const int32_t *labels, gpp_cuk_t dx, float g, float *row_loss,
                            gpp_cuda_fault_t *fault);
/* *out = sum of v[0..n) / n */
cudaError_t gpp_cuk_mean(cudaStream_t st, int64_t n, const float *v, float *out);

/* ---- optimizers (gpp_math.h element updates) ----
 * v may be NULL when mu == 0. */
cudaError_t gpp_cuk_sgd(cudaStream_t st, int64_t n, float lr, float wd, float mu, float *p,
                        float *v, const float *g);
cudaError_t gpp_cuk_adamw(cudaStream_t st, int64_t n, gpp_math_adamw_t k, float *p, float *m,
                          float *v, const float *g);
/* SGD over a whole table, the gradient of row r at values[slot_map[r]] or 0 */
cudaError_t gpp_cuk_sgd_table(cudaStream_t st, int64_t table_rows, int64_t dim, float lr, float wd,
                              float mu, float *table, float *v, const int32_t *slot_map,
                              const float *values);
/* Row-lazy steps over the *count touched rows (rows[k], values[k]); bound:
 * the host's upper bound of the device counter *count */
cudaError_t gpp_cuk_sgd_rows(cudaStream_t st, int64_t bound, const int32_t *count, int64_t dim,
                             float lr, float wd, float mu, float *table, float *v,
                             const int32_t *rows, const float *values);
cudaError_t gpp_cuk_adamw_rows(cudaStream_t st, int64_t bound, const int32_t *count, int64_t dim,
                               gpp_math_adamw_t k, float *table, float *m, float *v,
                               const int32_t *rows, const float *values);

#ifdef __cplusplus
}
#endif

#endif
