/* gpp_data: a stage's training data (INPUT ops' samples) and labels (loss
 * ops'), by sample index, from one of three sources (docs/executor.md
 * "Data"):
 *  - synthetic (gpp_data_new): values are pure functions of (seed, op id,
 *    sample index), labels a fixed teacher's function of the inputs, so any
 *    replica regenerates any sample with no data traffic;
 *  - a gpp dataset file (gpp_data_open; format below): sample i reads record
 *    i mod n_samples;
 *  - NumPy arrays (gpp_data_open of a directory or an "op=FILE.npy,..."
 *    list): one per INPUT and loss op, shuffled per epoch from the seed;
 *    data-parallel replicas read disjoint records of every micro-batch.
 * Sources are validated when opened (every count, size and CRC; messages
 * name the file, the field and the fix). With prefetch on, one read-ahead
 * serves them all (gpp_data_ahead.h); the bytes never depend on threads or
 * timing.
 *
 * Dataset file, version 1, little-endian, no padding: char magic[8]
 * "GPPDATA\0"; u32 version; u32 n_arrays; u64 n_samples; u64 header_bytes
 * (= 32 + 104 n_arrays + 4); n_arrays entries {char name[64] (op name);
 * u32 role (0 input, 1 label); u32 dtype (0 f32, 1 i32); i64 rows, cols
 * (per sample); i64 range (i32: values in [0, range), f32: 0); u32
 * data_crc; u32 0}; u32 header_crc (of every header byte before it); then
 * each array's data, [n_samples, rows, cols] row-major.
 *
 * Ownership: the caller owns a source; it borrows the graph, which must
 * outlive it. One thread at a time uses a source. */
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
