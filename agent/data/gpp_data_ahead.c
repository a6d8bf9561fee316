/* gpp_data_ahead: read-ahead of stored data (see gpp_data_ahead.h). */
#include "agent/data/gpp_data_ahead.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* Bound of one slot, as the synthetic prefetch's: two slots within 1 GiB of
 * host memory (a budget, not a speed setting; larger micro-batches read on
 * demand). */
#define AHEAD_MAX_BYTES ((size_t)512 << 20)
/* Smallest read a chunk makes: below it a pool hand-off costs more than the
 * copy out of the page cache it parallelises. */
#define AHEAD_MIN_CHUNK ((int64_t)1 << 20)

typedef struct gpp_data_ahead_s gpp_data_ahead_t;

typedef struct {
    gpp_data_ahead_t *owner;
    int64_t lo, n;       /* n -1: empty */
    int busy;            /* job submitted and not yet waited */
    int n_read;          /* ops[0..n_read) are being (or were) read */
    int *ops;            /* [n_ops] */
    int K;               /* chunks per op */
    char *failed;        /* [n_read * K] a chunk's read failed (retried on demand) */
    char *has;           /* [n_ops] read without error, after the wait */
    gpp_data_buf_t *mem; /* [n_ops] */
    gpp_data_job_t job;
} ahead_slot_t;

struct gpp_data_ahead_s {
    int n_ops;
    int64_t *per; /* [n_ops] bytes per sample */
    gpp_data_ahead_fill_fn fill, now;
    void *src;
    gpp_backend_t *be;
    gpp_data_pool_t *pool;
    int threads;
    ahead_slot_t sl[2]; /* sl[cur]: the current range's */
    int cur;
    gpp_data_track_t tr;
    int64_t hits;
};

/* Chunk c: piece c % K of op ops[c / K], samples [lo + n p / K, lo + n (p + 1) / K). */
static void s_chunk(void *arg, int c, int n_chunks)
{
    (void)n_chunks;
    ahead_slot_t *sl = arg;
    const gpp_data_ahead_t *self = sl->owner;
    int op = sl->ops[c / sl->K], p = c % sl->K;
    int64_t a = sl->n * p / sl->K, b = sl->n * (p + 1) / sl->K;
    if (b == a)
        return;
    gpp_err_t err = {{0}};
    char *out = (char *)sl->mem[op].p + a * self->per[op];
    if (self->fill(self->src, op, sl->lo + a, b - a, out, &err) < 0)
        sl->failed[c] = 1;
}

static void s_wait(gpp_data_ahead_t *self, ahead_slot_t *sl)
{
    if (!sl->busy)
        return;
    gpp_data_pool_wait(self->pool, &sl->job);
    sl->busy = 0;
    for (int i = 0; i < sl->n_read; i++) {
        int ok = 1;
        for (int p = 0; p < sl->K; p++)
            ok &= !sl->failed[i * sl->K + p];
        sl->has[sl->ops[i]] = (char)ok;
    }
}

static void s_drop(gpp_data_ahead_t *self, ahead_slot_t *sl)
{
    s_wait(self, sl);
    sl->n = -1;
    memset(sl->has, 0, (size_t)self->n_ops);
}

/* Starts reading [lo, lo + n) of the ops in want into the idle slot sl;
 * skipped past AHEAD_MAX_BYTES. */
static void s_start(gpp_data_ahead_t *self, ahead_slot_t *sl, int64_t lo, int64_t n,
                    const char *want)
{
    size_t bytes = 0;
    int64_t largest = 0;
    sl->n_read = 0;
    for (int o = 0; o < self->n_ops; o++)
        if (want[o] && self->per[o] > 0) {
            sl->ops[sl->n_read++] = o;
            bytes += (size_t)(n * self->per[o]);
            largest = n * self->per[o] > largest ? n * self->per[o] : largest;
        }
    if (sl->n_read == 0 || bytes > AHEAD_MAX_BYTES || n < 1)
        return;
    int64_t K = largest / AHEAD_MIN_CHUNK;
    K = K > 4 * self->threads ? 4 * self->threads : K;
    K = K > n ? n : K;
    sl->K = K < 1 ? 1 : (int)K;
    sl->failed = gpp_xrealloc(sl->failed, (size_t)(sl->n_read * sl->K));
    memset(sl->failed, 0, (size_t)(sl->n_read * sl->K));
    for (int i = 0; i < sl->n_read; i++) {
        int o = sl->ops[i];
        gpp_data_buf_reserve(&sl->mem[o], (size_t)(n * self->per[o]), self->be);
    }
    sl->lo = lo, sl->n = n;
    sl->job = (gpp_data_job_t){.fn = s_chunk, .arg = sl, .n_chunks = sl->n_read * sl->K};
    gpp_data_pool_submit(self->pool, &sl->job);
    sl->busy = 1;
}

gpp_data_ahead_t *gpp_data_ahead_new(int n_ops, const int64_t *per_sample,
                                     gpp_data_ahead_fill_fn fill, gpp_data_ahead_fill_fn now,
                                     void *src, int threads, gpp_backend_t *be)
{
    assert(n_ops > 0 && per_sample && fill && threads >= 1);
    gpp_data_ahead_t *self = gpp_xcalloc(1, sizeof *self);
    self->n_ops = n_ops;
    self->per = gpp_xcalloc((size_t)n_ops, sizeof *self->per);
    memcpy(self->per, per_sample, (size_t)n_ops * sizeof *self->per);
    self->fill = fill;
    self->now = now ? now : fill;
    self->src = src;
    self->be = be;
    self->threads = threads;
    self->pool = gpp_data_pool_new(threads);
    for (int i = 0; i < 2; i++) {
        ahead_slot_t *sl = &self->sl[i];
        sl->owner = self;
        sl->n = -1;
        sl->ops = gpp_xcalloc((size_t)n_ops, sizeof *sl->ops);
        sl->has = gpp_xcalloc((size_t)n_ops, 1);
        sl->mem = gpp_xcalloc((size_t)n_ops, sizeof *sl->mem);
    }
    gpp_data_track_init(&self->tr, n_ops);
    return self;
}

void gpp_data_ahead_destroy(gpp_data_ahead_t **self_p)
{
    assert(self_p);
    gpp_data_ahead_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < 2; i++)
        s_wait(self, &self->sl[i]);
    gpp_data_pool_destroy(&self->pool);
    for (int i = 0; i < 2; i++) {
        ahead_slot_t *sl = &self->sl[i];
        for (int o = 0; o < self->n_ops; o++)
            gpp_data_buf_free(&sl->mem[o], self->be);
        free(sl->mem);
        free(sl->ops);
        free(sl->has);
        free(sl->failed);
    }
    gpp_data_track_free(&self->tr);
    free(self->per);
    free(self);
    *self_p = NULL;
}

const void *gpp_data_ahead_get(gpp_data_ahead_t *self, int op, int64_t lo, int64_t n, void *out,
                               gpp_err_t *err)
{
    assert(self && op >= 0 && op < self->n_ops && self->per[op] > 0);
    if (gpp_data_track_note(&self->tr, op, lo, n)) {
        ahead_slot_t *other = &self->sl[1 - self->cur];
        if (other->n == n && other->lo == lo)
            self->cur = 1 - self->cur; /* the prediction was right */
        else
            s_drop(self, &self->sl[self->cur]);
        s_drop(self, &self->sl[1 - self->cur]); /* the old range's or a wrong guess */
    }
    ahead_slot_t *sl = &self->sl[self->cur];
    const void *v = NULL;
    if (sl->n == n && sl->lo == lo) {
        s_wait(self, sl);
        if (sl->has[op]) {
            v = sl->mem[op].p;
            self->hits++;
        }
    }
    if (!v) {
        if (self->now(self->src, op, lo, n, out, err) < 0)
            return NULL;
        v = out;
    }
    if (self->tr.next >= 0) { /* into the other slot: v stays valid */
        s_start(self, &self->sl[1 - self->cur], self->tr.next, self->tr.next_n, self->tr.want);
        self->tr.next = -1;
    }
    return v;
}

int64_t gpp_data_ahead_hits(const gpp_data_ahead_t *self)
{
    assert(self);
    return self->hits;
}
