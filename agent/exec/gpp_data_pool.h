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

#include <stdint.h>

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

#endif
