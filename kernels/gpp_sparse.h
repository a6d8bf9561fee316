/* gpp_sparse: row-sparse gradients of embedding tables.
 *
 * An embedding bag touches a few rows of a table that may have millions, so
 * its gradient is kept as (row id, value row) pairs: `count` distinct row
 * ids in first-touch order and a [count, dim] value block, plus a row -> slot
 * map (one int32 per table row, 4 MB for a 1M-row table) that makes
 * accumulation O(1) per touched index and clearing O(count). Accumulating the
 * same rows again sums into the existing slots, so the gradient sums over
 * bags, samples and micro-batches like a dense one would.
 *
 * All storage is device memory of the backend; the value block grows as
 * needed (at most table_rows rows). Reads of count / rows / values are valid
 * once the stream that accumulated has been synchronised.
 *
 * Ownership: gpp_sparse_grad_new returns an object the caller owns; the
 * arrays returned by the accessors are owned by it and valid until the next
 * accumulate, clear or destroy. */
#ifndef GPP_SPARSE_H
#define GPP_SPARSE_H

#include <stdint.h>

#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"

typedef struct gpp_sparse_grad_s gpp_sparse_grad_t;

/* An empty gradient for a (table_rows, dim) table, with room for cap_rows
 * rows before growing (0: a default). Uses `s` to initialise the row map.
 * Caller owns the result; NULL + message when out of memory. */
gpp_sparse_grad_t *gpp_sparse_grad_new(gpp_stream_t *s, int64_t table_rows, int64_t dim,
                                       int64_t cap_rows, gpp_err_t *err);
/* Accepts NULL; the caller must have synchronised the streams using it. */
void gpp_sparse_grad_destroy(gpp_sparse_grad_t **self_p);

int64_t gpp_sparse_grad_dim(const gpp_sparse_grad_t *self);
/* Number of distinct touched rows (as of the last synchronisation of the
 * stream that accumulated). */
int64_t gpp_sparse_grad_count(const gpp_sparse_grad_t *self);
/* Device arrays: row ids [count] and values [count, dim]. */
const int32_t *gpp_sparse_grad_rows(const gpp_sparse_grad_t *self);
const float *gpp_sparse_grad_values(const gpp_sparse_grad_t *self);

/* Adds `count` (row id, value row) pairs (device arrays; ids may repeat) —
 * e.g. a peer's gradient during the sparse gradient sync. An id out of
 * [0, table_rows) is a run-time error. */
int gpp_sparse_grad_add(gpp_stream_t *s, gpp_sparse_grad_t *self, int64_t count,
                        const int32_t *rows, const float *values, gpp_err_t *err);
/* What the host knows of the count without a synchronisation: an upper
 * bound (the count itself on the CPU backend; on CUDA, min(table rows, the
 * pairs accumulated since the last clear)). The value block holds at least
 * this many rows. */
int64_t gpp_sparse_grad_bound(const gpp_sparse_grad_t *self);
/* Pairs an accumulation can add without growing the value block (a CUDA
 * graph that records one cannot allocate); INT64_MAX when the block holds
 * the whole table. */
int64_t gpp_sparse_grad_room(const gpp_sparse_grad_t *self);
/* For a replayed recording of accumulations (agent/exec/gpp_exec_graph.c):
 * the device did what the recording did, so the host's bound becomes the
 * one the recording left. bound <= the value block's rows. */
void gpp_sparse_grad_set_bound(gpp_sparse_grad_t *self, int64_t bound);
/* Back to empty (after the optimizer step), O(count). */
int gpp_sparse_grad_clear(gpp_stream_t *s, gpp_sparse_grad_t *self, gpp_err_t *err);

#endif
