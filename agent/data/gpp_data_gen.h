/* gpp_data_gen: the synthetic data source behind gpp_data_new.
 *
 * Values: gpp_data.h (counter-based N(0, 1) dense inputs, uniform indices,
 * labels from a fixed teacher). Generation runs on T threads: the calling
 * thread and T - 1 workers of a persistent gpp_data_pool, each taking chunks
 * of an op's elements (inputs) or samples (labels). Every value is a pure
 * function of its index and the teacher's sums keep their per-element order,
 * so the output is bit-identical for every T and every chunking.
 *
 * Prefetch (off by default): the calls of one micro-batch share a sample
 * range. When a call brings a new range R after range Q, the pool starts
 * generating the range R + (R.lo - Q.lo) (the next consecutive micro-batch,
 * or a data-parallel replica's next share) in the background, for every op
 * asked for at Q and the INPUT ops their teachers read, into the one of two
 * slots not in use. A call whose range and op the current slot holds waits
 * for it and copies; any other call generates on demand. The output never
 * depends on the timing or on whether a guess was right.
 *
 * Ownership: gpp_data_gen_new returns a generator the caller owns; it
 * borrows the graph. One thread at a time calls it; destroy waits for the
 * background jobs and joins the pool. */
#ifndef GPP_DATA_GEN_H
#define GPP_DATA_GEN_H

#include <stdint.h>

#include "agent/data/gpp_data.h"

typedef struct gpp_data_gen_s gpp_data_gen_t;

/* Synthetic generator for g (finalized) with gpp_data_pool_default_threads()
 * threads and no prefetch. Caller owns the result. */
gpp_data_gen_t *gpp_data_gen_new(const gpp_graph_t *g, uint64_t seed);
void gpp_data_gen_destroy(gpp_data_gen_t **self_p);

/* INPUT op's samples [lo, lo + n) ([n, rows, cols], f32 or i32): the
 * prefetch slot's copy when it holds them (valid until the next call), else
 * generated into out; returns where they are. */
const void *gpp_data_gen_input(gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out);
/* Loss op's labels of the same samples (gpp_data_label_shape's layout),
 * likewise. */
const void *gpp_data_gen_label(gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out);

/* threads in [1, GPP_DATA_MAX_THREADS]; see gpp_data_set_threads. */
int gpp_data_gen_set_threads(gpp_data_gen_t *self, int threads, int prefetch);
int gpp_data_gen_threads(const gpp_data_gen_t *self);
/* Page-locks the prefetch slots through be from now on; see
 * gpp_data_set_backend. */
void gpp_data_gen_set_backend(gpp_data_gen_t *self, gpp_backend_t *be);
/* Calls served from the prefetch so far. */
int64_t gpp_data_gen_prefetched(const gpp_data_gen_t *self);

#endif
