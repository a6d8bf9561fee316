/* gpp_data: training data for source stages and labels for sink stages.
 *
 * Two kinds of source behind one interface:
 *
 *  - Synthetic (gpp_data_new): every value is a pure function of (seed, op
 *    id, sample index), so any replica regenerates any sample with no data
 *    traffic. Dense inputs are N(0, 1) (gpp_hash_normal: exact mean and
 *    variance, tails cut at +-3.46); index inputs are uniform in
 *    [0, table_rows). Labels come from a FIXED TEACHER, a function of the
 *    sample's inputs only, so the task is learnable and the loss decreases:
 *      z_r = the features of row r of the sample: for each INPUT op the loss
 *            depends on, in op order, its row r (its mean over rows when its
 *            row count differs from the loss input's), and for an index
 *            input the sum over the bag of a fixed random N(0,1) vector of
 *            GPP_DATA_TEACHER_DIM elements per index, divided by sqrt(bag);
 *      u_r = z_r P / sqrt(dim z), P a fixed N(0,1) matrix [dim z, C] per loss;
 *      MSE: target row r = u_r (C = the loss input's cols);
 *      CE:  label of row r = argmax_c u_r[c] (C = classes).
 *    The sink stage regenerates the inputs it does not hold to compute them
 *    (a source keeps the last block it generated per input op, up to 64 MB,
 *    so a stage holding both inputs and loss generates them once).
 *
 *  - A dataset file (gpp_data_open), written by gpp_data_write_file (or
 *    `gpp-train --write-dataset FILE --samples N`) from a synthetic source.
 *    Sample index i reads record i mod n_samples (epochs wrap around).
 *
 * Dataset file format, version 1, little-endian, no padding:
 *   header:  char magic[8] = "GPPDATA\0"; u32 version = 1; u32 n_arrays;
 *            u64 n_samples; u64 header_bytes (= 32 + 104 n_arrays + 4)
 *   n_arrays entries of 104 bytes:
 *            char name[64] (op name, NUL-padded); u32 role (0 input, 1 label);
 *            u32 dtype (0 f32, 1 i32); i64 rows; i64 cols (per sample);
 *            i64 range (i32 arrays: values lie in [0, range); f32: 0);
 *            u32 data_crc (CRC-32 of the array's data); u32 reserved = 0
 *   u32 header_crc: CRC-32 of every header byte before it
 *   data: each array in entry order, n_samples x rows x cols x 4 bytes,
 *            sample-major ([n_samples, rows, cols] row-major)
 * The file holds one input array per INPUT op and one label array per loss
 * op of the model (MSE: f32 [rows, cols] targets; CE: i32 [rows, 1]
 * classes). Opening validates magic, version, header CRC, every count and
 * size (no overflow, no allocation a crafted header could inflate), the
 * exact file size (truncation), that the arrays match the model's ops by name, role,
 * dtype and shape, and every array's data CRC (one sequential read of the
 * file); reads check index and class ranges.
 *
 *
 *  - NumPy arrays (gpp_data_open with a directory or an "op=FILE.npy,..."
 *    list): one .npy file per INPUT op and one per loss op (the labels),
 *    named <op name>.npy in the directory. Each is memory-mapped and checked
 *    (gpp_npy.h: magic, version 1/2/3, C order, dtype): dense inputs and MSE
 *    targets '<f4', indices inputs and CE classes '<i4' or '<i8' (narrowed
 *    to i32 after the range check); shape (N, rows, cols), or (N, cols) when
 *    rows is 1, or (N,) when rows x cols is 1; the same N in every array.
 *    Sample index i reads record perm_e[i mod N] of epoch e = i / N, perm_e a
 *    permutation drawn from (seed, e) when shuffling (the identity when not).
 *    Every replica of a data-parallel stage builds the same permutation and
 *    reads its own sample indices of the global stream (the pipeline gives
 *    each replica its share of every micro-batch), so the replicas read
 *    disjoint records and together one epoch is every record once.
 *
 * Synthetic generation runs on T threads (gpp_data_gen.h), bit-identical
 * for every T. With prefetch on, every kind of source has one read-ahead
 * (gpp_data_ahead.h): the predicted next micro-batch is generated or read
 * on its threads while the caller's device computes, into buffers
 * page-locked through the backend set with gpp_data_set_backend (the copy
 * to a GPU is then a DMA). The bytes never depend on the timing.
 *
 * Ownership: gpp_data_new / gpp_data_open return a source the caller owns;
 * it borrows the graph, which must outlive it. A source is used from one
 * thread at a time. */
#ifndef GPP_DATA_H
#define GPP_DATA_H

#include <stdint.h>

#include "agent/data/gpp_data_pool.h"
#include "agent/data/gpp_data_shape.h"
#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_graph.h"

#define GPP_DATA_MAGIC "GPPDATA"
#define GPP_DATA_VERSION 1

typedef struct gpp_data_s gpp_data_t;

/* Synthetic source for g (finalized). Caller owns the result. */
gpp_data_t *gpp_data_new(const gpp_graph_t *g, uint64_t seed);
/* Dataset source for g: a gpp dataset file (read in order; shuffle and seed
 * unused), or .npy arrays when path is a directory or an "op=FILE.npy,..."
 * list (gpp_data_is_npy), shuffled from `seed` per epoch when `shuffle`.
 * Caller owns the result; NULL + message naming the file, the field and the
 * fix when it is not a valid dataset for g. */
gpp_data_t *gpp_data_open(const gpp_graph_t *g, const char *path, int shuffle, uint64_t seed,
                          gpp_err_t *err);
/* 1 when gpp_data_open reads `path` as .npy arrays. */
int gpp_data_is_npy(const char *path);
/* .npy source: the record that sample index `sample` reads. */
int64_t gpp_data_record(gpp_data_t *self, int64_t sample);
void gpp_data_destroy(gpp_data_t **self_p);

/* Synthetic generation on `threads` in [1, GPP_DATA_MAX_THREADS] threads
 * (the caller and threads - 1 pool workers), and, when `prefetch`, the
 * read-ahead of the next micro-batch on `threads` workers (none otherwise:
 * every value made on the caller's call). Waits for the jobs under way,
 * drops what was prefetched. Returns 0, or -1 when threads is out of range
 * (nothing changed). */
int gpp_data_set_threads(gpp_data_t *self, int threads, int prefetch);
int gpp_data_threads(const gpp_data_t *self);
/* Calls served from the prefetch or read-ahead so far. */
int64_t gpp_data_prefetched(const gpp_data_t *self);
/* Page-locks the prefetch buffers through be from now on (NULL: stop);
 * drops what was prefetched. be must outlive the source or a later call
 * with NULL. */
void gpp_data_set_backend(gpp_data_t *self, gpp_backend_t *be);

/* Samples in the file or arrays; -1 for a synthetic source (unbounded). */
int64_t gpp_data_samples(const gpp_data_t *self);

/* Fills host memory `out` with INPUT op `op`'s values for samples
 * [sample_lo, sample_lo + n): [n, rows, cols], f32 (dense) or i32 (indices).
 * Returns 0, or -1 + message (file read error, value out of range). */
int gpp_data_input(gpp_data_t *self, int op, int64_t sample_lo, int64_t n, void *out,
                   gpp_err_t *err);
/* Fills host memory `out` with loss op `op`'s labels for the same samples
 * (layout from gpp_data_shape_label). Returns 0 or -1 + message. */
int gpp_data_label(gpp_data_t *self, int op, int64_t sample_lo, int64_t n, void *out,
                   gpp_err_t *err);

/* gpp_data_input (INPUT op) or gpp_data_label (loss op) without the copy
 * when the source holds the values already (a prefetched micro-batch):
 * returns a pointer to them, valid until the next call on this source, or
 * `out` after filling it; NULL + message on failure. */
const void *gpp_data_ref(gpp_data_t *self, int op, int64_t sample_lo, int64_t n, void *out,
                         gpp_err_t *err);

/* Writes samples [0, n_samples) of `src` as a dataset file, atomically
 * (temp file + rename: an existing file is untouched on failure). */
int gpp_data_write_file(gpp_data_t *src, const char *path, int64_t n_samples, gpp_err_t *err);

#endif
