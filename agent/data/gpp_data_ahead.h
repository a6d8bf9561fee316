/* gpp_data_ahead: the one prefetch of a data source (gpp_data.c): the next
 * micro-batch generated or read on a pool's threads while the caller's
 * device computes.
 *
 * When a call brings a new sample range, the predicted next range
 * (gpp_data_track_t) of every op asked for at the previous one is filled
 * into the one of two slots not in use, in chunks. A call whose range and
 * op the current slot holds waits for it and gets the slot's copy (valid
 * until the next call); any other call fills on demand into the caller's
 * buffer, so an error is reported by the call that needs the data. The
 * bytes never depend on the timing or on whether a guess was right.
 *
 * The fill function runs on the pool's threads and the caller's at once:
 * it must be safe for disjoint outputs concurrently.
 *
 * Ownership: the caller owns a reader; destroy waits for the background
 * fills. One thread at a time calls it. */
#ifndef GPP_DATA_AHEAD_H
#define GPP_DATA_AHEAD_H

#include <stdint.h>

#include "agent/data/gpp_data_pool.h"
#include "common/gpp_err.h"

typedef struct gpp_data_ahead_s gpp_data_ahead_t;

/* Samples [lo, lo + n) of op into out ([n, per-sample bytes]); 0 or -1 with
 * err set. */
typedef int (*gpp_data_ahead_fill_fn)(void *src, int op, int64_t lo, int64_t n, void *out,
                                      gpp_err_t *err);

/* A reader for n_ops ops, op o's samples `per_sample[o]` bytes each (0: the
 * op is never asked for); `threads` >= 1 pool workers fill in the
 * background; `now` (NULL: fill) serves a call the slots do not hold, on
 * the caller's thread; buffers page-locked through be (NULL: not). */
gpp_data_ahead_t *gpp_data_ahead_new(int n_ops, const int64_t *per_sample,
                                     gpp_data_ahead_fill_fn fill, gpp_data_ahead_fill_fn now,
                                     void *src, int threads, gpp_backend_t *be);
void gpp_data_ahead_destroy(gpp_data_ahead_t **self_p);

/* Samples [lo, lo + n) of op: the current slot's copy, or read into out;
 * returns where they are, or NULL with err set (the on-demand read failed).
 * Then starts the read-ahead of the predicted next range. */
const void *gpp_data_ahead_get(gpp_data_ahead_t *self, int op, int64_t lo, int64_t n, void *out,
                               gpp_err_t *err);

/* Calls served from a slot so far. */
int64_t gpp_data_ahead_hits(const gpp_data_ahead_t *self);

#endif
