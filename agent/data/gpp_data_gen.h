/* gpp_data_gen: the synthetic data source behind gpp_data_new.
 *
 * Values: gpp_data.h (counter-based N(0, 1) dense inputs, uniform indices,
 * labels from a fixed teacher). On demand, generation runs on T threads:
 * the caller and T - 1 workers of a persistent gpp_data_pool, each taking
 * chunks of an op's elements (inputs) or samples (labels). Every value is
 * a pure function of its index and the teacher's sums keep their
 * per-element order, so the output is bit-identical for every T and every
 * chunking, and for gpp_data_gen_fill (the read-ahead's) as well.
 *
 * Ownership: gpp_data_gen_new returns a generator the caller owns; it
 * borrows the graph. _input, _label and _set_threads from one thread at a
 * time; _fill from any number of threads at once. */
#ifndef GPP_DATA_GEN_H
#define GPP_DATA_GEN_H

#include <stdint.h>

#include "agent/data/gpp_data_pool.h"
#include "agent/data/gpp_data_shape.h"
#include "model/gpp_graph.h"

/* Features per index of an index input in the teacher (gpp_data.h). */
#define GPP_DATA_TEACHER_DIM 8

typedef struct gpp_data_gen_s gpp_data_gen_t;

/* Synthetic generator for g (finalized) with gpp_data_pool_default_threads()
 * threads. Caller owns the result. */
gpp_data_gen_t *gpp_data_gen_new(const gpp_graph_t *g, uint64_t seed);
void gpp_data_gen_destroy(gpp_data_gen_t **self_p);

/* INPUT op's samples [lo, lo + n) into out ([n, rows, cols], f32 or i32),
 * on the threads; the block is kept (up to 64 MiB per op) for the labels
 * of the same samples. */
void gpp_data_gen_input(gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out);
/* Loss op's labels of the same samples (gpp_data_shape_label's layout). */
void gpp_data_gen_label(gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out);
/* Either of them on the calling thread alone, touching no shared state
 * (the labels regenerate their teacher's inputs). */
void gpp_data_gen_fill(const gpp_data_gen_t *self, int op, int64_t lo, int64_t n, void *out);

/* threads in [1, GPP_DATA_MAX_THREADS]: 0, or -1 (nothing changed). */
int gpp_data_gen_set_threads(gpp_data_gen_t *self, int threads);
int gpp_data_gen_threads(const gpp_data_gen_t *self);

#endif
