/* gpp_exec_load: what the executor reads from the data source: an INPUT
 * op's samples or a loss op's labels for a micro-batch, now or from the
 * load-ahead (gpp_exec_cfg_t.load_ahead: the next micro-batch copied to the
 * device on a copy stream while the compute stream works). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec_impl.h"

/* Data for an INPUT op's slot (or a loss op's labels), read now: through
 * the host staging buffer, or straight from the data source's prefetched
 * copy. */
static int s_load_now(gpp_exec_t *self, exec_mb_t *mb, int op, gpp_tensor_t *dst, gpp_err_t *err)
{
    const void *h = gpp_data_ref(self->data, op, mb->sample_lo, mb->n,
                                 gpp_exec_host(self, gpp_tensor_bytes(dst)), err);
    if (!h)
        return -1;
    if (gpp_stream_copy(self->s, dst->data, h, gpp_tensor_bytes(dst), GPP_COPY_H2D, err) < 0)
        return -1;
    /* The staging buffer is reused by the next load, the source's copy valid
     * until its next call: wait for the copy. */
    return gpp_stream_sync(self->s, err);
}

/* op's load-ahead entry, made on first use (NULL: no memory for events) */
static exec_ahead_t *s_ahead_of(gpp_exec_t *self, int op)
{
    for (int i = 0; i < self->n_ahead; i++)
        if (self->ahead[i].op == op)
            return &self->ahead[i];
    assert(self->n_ahead < self->n_local + 1);
    exec_ahead_t *a = &self->ahead[self->n_ahead];
    memset(a, 0, sizeof *a);
    a->op = op;
    for (int k = 0; k < 2; k++) {
        int64_t cap = 0, at = gpp_memplan_data_at(self->plan, op, k, &cap);
        a->buf[k] = at < 0 ? NULL : (char *)self->arena + at;
        a->cap[k] = at < 0 ? 0 : (size_t)cap;
        a->n[k] = -1;
        if (!(a->copied[k] = gpp_event_new(self->be, NULL)) ||
            !(a->read[k] = gpp_event_new(self->be, NULL))) {
            for (int j = 0; j <= k; j++) {
                gpp_event_destroy(&a->copied[j]);
                gpp_event_destroy(&a->read[j]);
            }
            return NULL;
        }
    }
    self->n_ahead++;
    return a;
}

/* Starts filling a's next buffer with samples [lo, lo + n) (bytes) on the
 * copy stream: the tracker's guess of the next micro-batch (a smaller one,
 * the last of a mini-batch, is a part of the buffer). Best effort: when the
 * plan's buffer cannot hold them (an op it plans none for, a guess over
 * its micro-batch) or on any failure the buffer stays empty, and the load
 * that needs those samples reads them itself, reporting the error. The host waits
 * for the copy itself (the source's memory is reused by its next call),
 * not for the compute stream. */
static void s_ahead_fill(gpp_exec_t *self, exec_ahead_t *a, int64_t lo, int64_t n, size_t bytes)
{
    int k = a->next;
    a->n[k] = -1;
    if (n <= 0 || bytes == 0 || a->cap[k] < bytes)
        return;
    gpp_err_t e;
    const void *h = gpp_data_ref(self->data, a->op, lo, n, gpp_exec_host(self, bytes), &e);
    if (!h || gpp_event_wait(a->read[k], self->cs, &e) < 0 ||
        gpp_stream_copy(self->cs, a->buf[k], h, bytes, GPP_COPY_H2D, &e) < 0 ||
        gpp_event_record(a->copied[k], self->cs, &e) < 0 || gpp_event_sync(a->copied[k], &e) < 0)
        return;
    a->lo[k] = lo;
    a->n[k] = n;
    a->bytes[k] = bytes;
    a->next = k ^ 1;
}

/* Starts the fills the loads asked for. Called once the micro-batch's work
 * is enqueued (end of forward, after a replay's launch), so that the host's
 * wait for each copy overlaps the device running that work: a fill started
 * at the load itself would leave the device idle on a fresh queue (and put
 * the copy in the next op's profiled time). */
void gpp_exec_ahead_flush(gpp_exec_t *self)
{
    /* inside a capture nothing runs, and a fill waits for its copy on the
       host, which the capture refuses: the fills start after the launch */
    if (self->capture_on)
        return;
    /* the loads of a micro-batch share its range; no stride known yet (the
       first range): the samples that follow */
    const gpp_data_track_t *t = &self->tr;
    int64_t lo = t->next >= 0 ? t->next : t->cur_lo + t->cur_n, n = t->next_n;
    for (int i = 0; i < self->n_ahead; i++) {
        exec_ahead_t *a = &self->ahead[i];
        if (a->pend)
            s_ahead_fill(self, a, lo, n, a->per * (size_t)n);
        a->pend = 0;
    }
}

/* Data for an INPUT op's slot (or a loss op's labels): from the load-ahead
 * buffer when it holds these samples (a device copy, no host wait), else
 * read now; the next micro-batch's samples are then asked for
 * (gpp_exec_ahead_flush starts them). */
int gpp_exec_load(gpp_exec_t *self, exec_mb_t *mb, int op, gpp_tensor_t *dst, gpp_err_t *err)
{
    if (self->capture_on) { /* loaded before the launch into the graph's feed buffer */
        int64_t cap = 0, at = gpp_memplan_data_at(self->plan, op, -1, &cap);
        if (at < 0 || cap < (int64_t)gpp_tensor_bytes(dst))
            return gpp_err_set(err, "executor: op %d has no graph feed buffer of %zu bytes", op,
                               gpp_tensor_bytes(dst));
        return gpp_stream_copy(self->s, dst->data, (char *)self->arena + at,
                               gpp_tensor_bytes(dst), GPP_COPY_D2D, err);
    }
    exec_ahead_t *a = self->cs && mb->n > 0 ? s_ahead_of(self, op) : NULL;
    if (!a)
        return s_load_now(self, mb, op, dst, err);
    size_t bytes = gpp_tensor_bytes(dst), per = bytes / (size_t)mb->n;
    int k = -1; /* a buffer holding samples [lo, lo + n) */
    for (int j = 0; j < 2; j++)
        if (a->n[j] > 0 && a->bytes[j] / (size_t)a->n[j] == per && a->lo[j] <= mb->sample_lo &&
            mb->sample_lo + mb->n <= a->lo[j] + a->n[j])
            k = j;
    int rc;
    if (k >= 0) {
        const char *src = (const char *)a->buf[k] + (size_t)(mb->sample_lo - a->lo[k]) * per;
        rc = gpp_event_wait(a->copied[k], self->s, err) < 0 ||
                     gpp_stream_copy(self->s, dst->data, src, bytes, GPP_COPY_D2D, err) < 0 ||
                     gpp_event_record(a->read[k], self->s, err) < 0
                 ? -1
                 : 0;
        a->n[k] = -1; /* used: its next fill waits for read[k] */
        self->ahead_hits++;
    } else {
        rc = s_load_now(self, mb, op, dst, err);
        self->ahead_misses++;
    }
    if (rc == 0) {
        gpp_data_track_note(&self->tr, op, mb->sample_lo, mb->n);
        a->pend = 1;
        a->per = per;
    }
    return rc;
}

void gpp_exec_load_ahead_stats(const gpp_exec_t *self, int64_t *hits, int64_t *misses)
{
    assert(self);
    if (hits)
        *hits = self->ahead_hits;
    if (misses)
        *misses = self->ahead_misses;
}

void gpp_exec_load_free(gpp_exec_t *self)
{
    if (self->cs) /* the compute stream was synchronised before */
        gpp_stream_sync(self->cs, NULL);
    for (int i = 0; i < self->n_ahead; i++) {
        exec_ahead_t *a = &self->ahead[i];
        for (int k = 0; k < 2; k++) { /* the buffers are the arena's */
            gpp_event_destroy(&a->copied[k]);
            gpp_event_destroy(&a->read[k]);
        }
    }
    free(self->ahead);
    self->ahead = NULL;
    self->n_ahead = 0;
    if (self->cs)
        gpp_data_track_free(&self->tr);
    gpp_stream_destroy(&self->cs);
}
