/* gpp_data_pool: a persistent pthread pool of chunked jobs (see
 * gpp_data_pool.h). One mutex guards the queue and every job's counters;
 * a chunk runs outside it. */
#include "agent/data/gpp_data_pool.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpp_err.h"

struct gpp_data_pool_s {
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* a job was queued or finished, or stop */
    gpp_data_job_t *head; /* jobs with unclaimed chunks, submission order */
    int stop;
    int workers;
    pthread_t *th;
};

int gpp_data_pool_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    /* 8: beyond it one host thread per device already outruns the H100
     * training step (BENCHMARKS.md, "Data generation"); more threads only
     * take cores from the kernels of the CPU backend. */
    return n < 1 ? 1 : n > 8 ? 8 : (int)n;
}

static int s_ready(const gpp_data_job_t *j)
{
    return !j->after || j->after->done == j->after->n_chunks;
}

/* Claims a chunk of `j` (under mu); unlinks j when it has none left. */
static int s_claim(gpp_data_pool_t *self, gpp_data_job_t *j)
{
    int c = j->next++;
    if (j->next == j->n_chunks) {
        gpp_data_job_t **p = &self->head;
        while (*p != j)
            p = &(*p)->link;
        *p = j->link;
        j->link = NULL;
    }
    return c;
}

/* Runs chunk c of j outside the lock, then counts it (under mu on return). */
static void s_run_chunk(gpp_data_pool_t *self, gpp_data_job_t *j, int c)
{
    pthread_mutex_unlock(&self->mu);
    j->fn(j->arg, c, j->n_chunks);
    pthread_mutex_lock(&self->mu);
    if (++j->done == j->n_chunks)
        pthread_cond_broadcast(&self->cv);
}

static void *s_worker(void *arg)
{
    gpp_data_pool_t *self = arg;
    pthread_mutex_lock(&self->mu);
    for (;;) {
        gpp_data_job_t *j = self->head;
        while (j && !s_ready(j))
            j = j->link;
        if (j) {
            s_run_chunk(self, j, s_claim(self, j));
            continue;
        }
        if (self->stop && !self->head)
            break;
        /* nothing runnable: a new job or a finished one (an `after`) wakes us */
        pthread_cond_wait(&self->cv, &self->mu);
    }
    pthread_mutex_unlock(&self->mu);
    return NULL;
}

gpp_data_pool_t *gpp_data_pool_new(int workers)
{
    assert(workers >= 0);
    gpp_data_pool_t *self = gpp_xcalloc(1, sizeof *self);
    pthread_mutex_init(&self->mu, NULL);
    pthread_cond_init(&self->cv, NULL);
    self->th = gpp_xcalloc((size_t)workers + 1, sizeof *self->th);
    for (int i = 0; i < workers; i++) {
        if (pthread_create(&self->th[i], NULL, s_worker, self) != 0)
            break; /* fewer workers: the callers run the rest of the chunks */
        self->workers++;
    }
    return self;
}

void gpp_data_pool_destroy(gpp_data_pool_t **self_p)
{
    assert(self_p);
    gpp_data_pool_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock(&self->mu);
    self->stop = 1;
    pthread_cond_broadcast(&self->cv);
    pthread_mutex_unlock(&self->mu);
    for (int i = 0; i < self->workers; i++)
        pthread_join(self->th[i], NULL);
    /* with no workers, queued jobs run here */
    pthread_mutex_lock(&self->mu);
    while (self->head) {
        gpp_data_job_t *j = self->head;
        while (j && !s_ready(j))
            j = j->link;
        assert(j); /* an `after` job is queued before its dependants */
        s_run_chunk(self, j, s_claim(self, j));
    }
    pthread_mutex_unlock(&self->mu);
    pthread_cond_destroy(&self->cv);
    pthread_mutex_destroy(&self->mu);
    free(self->th);
    free(self);
    *self_p = NULL;
}

int gpp_data_pool_workers(const gpp_data_pool_t *self)
{
    assert(self);
    return self->workers;
}

void gpp_data_pool_submit(gpp_data_pool_t *self, gpp_data_job_t *job)
{
    assert(self && job && job->fn && job->n_chunks >= 1);
    job->next = job->done = 0;
    job->link = NULL;
    pthread_mutex_lock(&self->mu);
    gpp_data_job_t **p = &self->head;
    while (*p)
        p = &(*p)->link;
    *p = job;
    pthread_cond_broadcast(&self->cv);
    pthread_mutex_unlock(&self->mu);
}

void gpp_data_pool_wait(gpp_data_pool_t *self, gpp_data_job_t *job)
{
    assert(self && job);
    if (job->after)
        gpp_data_pool_wait(self, job->after);
    pthread_mutex_lock(&self->mu);
    while (job->next < job->n_chunks)
        s_run_chunk(self, job, s_claim(self, job));
    while (job->done < job->n_chunks)
        pthread_cond_wait(&self->cv, &self->mu);
    pthread_mutex_unlock(&self->mu);
}

void gpp_data_pool_run(gpp_data_pool_t *self, gpp_data_job_t *job)
{
    gpp_data_pool_submit(self, job);
    gpp_data_pool_wait(self, job);
}

/* ---- prefetch buffers ---- */

void *gpp_data_buf_reserve(gpp_data_buf_t *buf, size_t bytes, gpp_backend_t *be)
{
    assert(buf);
    if (bytes <= buf->cap && buf->p)
        return buf->p;
    gpp_data_buf_free(buf, be);
    size_t page = 4096, cap = (bytes + page - 1) / page * page;
    if (cap == 0)
        cap = page;
    void *p = NULL;
    if (posix_memalign(&p, page, cap) != 0) { /* fatal, as gpp_xcalloc */
        fprintf(stderr, "gpp: out of memory (%zu bytes of prefetch buffer)\n", cap);
        abort();
    }
    buf->p = p;
    buf->cap = cap;
    if (be) {
        static atomic_int warned;
        gpp_err_t err = {{0}};
        buf->pinned = gpp_backend_host_pin(be, p, cap, &err) == 1;
        if (!buf->pinned && err.msg[0] && atomic_exchange(&warned, 1) == 0)
            gpp_warn("data: page-locking a %zu-byte prefetch buffer: %s; copying to the device "
                     "from pageable memory (slower)",
                     cap, err.msg);
    }
    return p;
}

void gpp_data_buf_free(gpp_data_buf_t *buf, gpp_backend_t *be)
{
    assert(buf);
    if (buf->pinned && be)
        gpp_backend_host_unpin(be, buf->p);
    free(buf->p);
    memset(buf, 0, sizeof *buf);
}

/* ---- range tracker ---- */

void gpp_data_track_init(gpp_data_track_t *t, int n_ops)
{
    memset(t, 0, sizeof *t);
    t->n_ops = n_ops;
    t->cur_ops = gpp_xcalloc((size_t)n_ops + 1, 1);
    t->want = gpp_xcalloc((size_t)n_ops + 1, 1);
    gpp_data_track_reset(t);
}

void gpp_data_track_free(gpp_data_track_t *t)
{
    free(t->cur_ops);
    free(t->want);
    memset(t, 0, sizeof *t);
}

void gpp_data_track_reset(gpp_data_track_t *t)
{
    t->cur_lo = t->cur_n = t->next = -1;
    t->next_n = t->stride = t->max_n = 0;
    memset(t->cur_ops, 0, (size_t)t->n_ops);
    memset(t->want, 0, (size_t)t->n_ops);
}

int gpp_data_track_note(gpp_data_track_t *t, int op, int64_t lo, int64_t n)
{
    assert(op >= 0 && op < t->n_ops);
    int fresh = lo != t->cur_lo || n != t->cur_n;
    if (fresh) {
        if (t->cur_n >= 0 && t->cur_n >= t->max_n && lo > t->cur_lo)
            t->stride = lo - t->cur_lo; /* from a full-size range */
        if (n > t->max_n)
            t->max_n = n;
        t->next = n < t->max_n ? lo + n : t->stride > 0 ? lo + t->stride : -1;
        t->next_n = t->max_n;
        memcpy(t->want, t->cur_ops, (size_t)t->n_ops);
        memset(t->cur_ops, 0, (size_t)t->n_ops);
        t->cur_lo = lo, t->cur_n = n;
    }
    t->cur_ops[op] = 1;
    return fresh;
}
