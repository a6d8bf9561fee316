/* gpp_data_pool: the small persistent thread pool that generates synthetic
 * data (gpp_data) in parallel and in the background.
 *
 * A job is a function run once per chunk index in [0, n_chunks), by any
 * thread, in any order: the caller makes every chunk write disjoint memory
 * and depend only on its index, so the result never depends on the number of
 * threads or the timing. Jobs start in submission order; a job with `after`
 * set starts none of its chunks before that job has finished (a two-phase
 * piece of work: inputs, then the labels computed from them).
 *
 * gpp_data_pool_wait makes the waiting thread work on the job's unclaimed
 * chunks, so a pool of `workers` threads plus the caller runs a synchronous
 * job on workers + 1 threads, and a pool with 0 workers runs every job in
 * gpp_data_pool_wait (nothing in the background).
 *
 * Ownership: gpp_data_pool_new returns a pool the caller owns;
 * gpp_data_pool_destroy waits for the jobs submitted and joins the threads.
 * Jobs are caller-owned memory that must stay valid until waited. Submit
 * and wait from one thread (the data source's). */
#ifndef GPP_DATA_POOL_H
#define GPP_DATA_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/gpp_backend.h"

/* Threads a data source may generate or read on. */
#define GPP_DATA_MAX_THREADS 256

typedef struct gpp_data_pool_s gpp_data_pool_t;

typedef void (*gpp_data_pool_fn)(void *arg, int chunk, int n_chunks);

typedef struct gpp_data_job_s {
    gpp_data_pool_fn fn;
    void *arg;
    int n_chunks;
    struct gpp_data_job_s *after; /* NULL, or a job submitted before */
    /* pool-private */
    int next, done;
    struct gpp_data_job_s *link;
} gpp_data_job_t;

/* A pool of `workers` >= 0 threads. Caller owns the result. */
gpp_data_pool_t *gpp_data_pool_new(int workers);
void gpp_data_pool_destroy(gpp_data_pool_t **self_p);
int gpp_data_pool_workers(const gpp_data_pool_t *self);

/* Queues job (fn, arg, n_chunks >= 1 and after set by the caller). */
void gpp_data_pool_submit(gpp_data_pool_t *self, gpp_data_job_t *job);
/* Returns when every chunk of job has run (the caller runs unclaimed ones). */
void gpp_data_pool_wait(gpp_data_pool_t *self, gpp_data_job_t *job);
/* Submit + wait. */
void gpp_data_pool_run(gpp_data_pool_t *self, gpp_data_job_t *job);

/* Online CPUs capped at 8: the default generation threads. */
int gpp_data_pool_default_threads(void);

/* A prefetch buffer of a data source: page-aligned host memory, page-locked
 * through `be` when the source has one (gpp_data_set_backend), so that the
 * executor's copy of a prefetched micro-batch to the device is a DMA at
 * full bandwidth rather than a staged pageable copy. */
typedef struct {
    void *p;
    size_t cap;
    int pinned;
} gpp_data_buf_t;

/* Makes buf hold at least `bytes` (the contents are lost when it grows) and
 * returns it; page-locks new memory through be (NULL: never). A refusal to
 * page-lock (RLIMIT_MEMLOCK) is warned about once per process; the buffer
 * works unlocked. */
void *gpp_data_buf_reserve(gpp_data_buf_t *buf, size_t bytes, gpp_backend_t *be);
/* Unlocks (through the same be) and frees; buf is empty after. */
void gpp_data_buf_free(gpp_data_buf_t *buf, gpp_backend_t *be);

/* The range tracker of a prefetch (gpp_data_gen's, gpp_data_ahead's and
 * the executor's load-ahead). The calls of one micro-batch share a sample
 * range. When a call brings a new range R, the next range is predicted to
 * start one stride on, R.lo + stride (consecutive micro-batches, or a
 * data-parallel replica's shares a micro-batch apart), the stride learnt
 * from a full-size range to the one after it; after a range shorter than
 * the largest so far (a mini-batch's uneven last micro-batch) right after
 * it, R.lo + R.n. Its size is the largest so far, its ops those asked for
 * at the range before R. */
typedef struct {
    int n_ops;
    int64_t cur_lo, cur_n; /* range of the latest call (n -1: none) */
    char *cur_ops;         /* [n_ops] ops asked for at the current range */
    char *want;            /* [n_ops] ops predicted at `next` */
    int64_t next, next_n;  /* the predicted range, next -1: none */
    int64_t stride, max_n; /* learnt so far (0: none) */
} gpp_data_track_t;

void gpp_data_track_init(gpp_data_track_t *t, int n_ops);
void gpp_data_track_free(gpp_data_track_t *t);
/* Forgets every range (after a change of threads or prefetch). */
void gpp_data_track_reset(gpp_data_track_t *t);
/* Notes a call for op on [lo, lo + n). Returns 1 when it starts a new range,
 * with `next` and `want` then the prediction (next -1: no forward stride
 * known), else 0. */
int gpp_data_track_note(gpp_data_track_t *t, int op, int64_t lo, int64_t n);

#endif
