/* gpp_staging: a comm's transfer buffers and the copies to and from them
 * (see gpp_staging.h). */
#include "agent/comm/gpp_staging.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    S_HOST,   /* host backend: everything is host memory */
    S_STAGED, /* device backend, host comm */
    S_DEVICE  /* device backend, device comm */
} s_way_t;

/* A staged way's host buffer and whether it is page-locked; found by
 * address (a stage has a few dozen transfers). */
typedef struct {
    void *p;
    int pinned;
} s_pin_t;

struct gpp_staging_s {
    gpp_backend_t *be;
    gpp_stream_t *s;
    s_way_t way;
    void *dev; /* staged: the receives' device buffer */
    size_t dev_bytes;
    float *red; /* staged: host copy of an all-reduce */
    size_t red_n;
    int red_pinned;
    s_pin_t *pins;
    int n_pins, cap_pins;
    int warned; /* a refused page-lock was reported */
};

/* Page-locks host memory through the backend so that copies between it and
 * the GPU run at full bandwidth; 1 when pinned. Pageable memory works as
 * well, only slower: a refusal is warned about once. */
static int s_pin(gpp_staging_t *self, void *p, size_t bytes)
{
    gpp_err_t err = {{0}};
    int pinned = gpp_backend_host_pin(self->be, p, bytes, &err) == 1;
    if (!pinned && err.msg[0] && !self->warned++)
        gpp_warn("comm staging: page-locking a %zu-byte buffer: %s; staging through pageable "
                 "memory (slower copies)",
                 bytes, err.msg);
    return pinned;
}

gpp_staging_t *gpp_staging_new(gpp_backend_t *be, gpp_stream_t *s, const gpp_comm_t *comm)
{
    assert(be && s);
    gpp_staging_t *self = gpp_xcalloc(1, sizeof *self);
    self->be = be;
    self->s = s;
    if (gpp_backend_kind(be) == GPP_DEVICE_CPU || !comm)
        self->way = S_HOST;
    else
        self->way = gpp_comm_is_device(comm) ? S_DEVICE : S_STAGED;
    return self;
}

void gpp_staging_destroy(gpp_staging_t **self_p)
{
    assert(self_p);
    gpp_staging_t *self = *self_p;
    if (!self)
        return;
    for (int i = 0; i < self->n_pins; i++)
        if (self->pins[i].pinned)
            gpp_backend_host_unpin(self->be, self->pins[i].p);
    free(self->pins);
    if (self->red_pinned)
        gpp_backend_host_unpin(self->be, self->red);
    free(self->red);
    gpp_backend_free(self->be, &self->dev);
    free(self);
    *self_p = NULL;
}

int gpp_staging_device_bufs(const gpp_staging_t *self)
{
    assert(self);
    return self->way == S_DEVICE;
}

void *gpp_staging_buf_new(gpp_staging_t *self, size_t bytes, gpp_err_t *err)
{
    assert(self);
    if (self->way == S_DEVICE)
        return gpp_backend_alloc(self->be, bytes ? bytes : 4, err);
    void *p = gpp_xcalloc(bytes ? bytes : 1, 1);
    if (self->way == S_STAGED) {
        if (self->n_pins == self->cap_pins) {
            self->cap_pins = self->cap_pins ? 2 * self->cap_pins : 16;
            self->pins = gpp_xrealloc(self->pins, (size_t)self->cap_pins * sizeof *self->pins);
        }
        self->pins[self->n_pins++] = (s_pin_t){p, s_pin(self, p, bytes)};
    }
    return p;
}

void gpp_staging_buf_free(gpp_staging_t *self, void **buf_p)
{
    assert(self && buf_p);
    if (!*buf_p)
        return;
    if (self->way == S_DEVICE) {
        gpp_backend_free(self->be, buf_p);
        return;
    }
    for (int i = 0; i < self->n_pins; i++)
        if (self->pins[i].p == *buf_p) {
            if (self->pins[i].pinned)
                gpp_backend_host_unpin(self->be, *buf_p);
            self->pins[i] = self->pins[--self->n_pins];
            break;
        }
    free(*buf_p);
    *buf_p = NULL;
}

int gpp_staging_reserve(gpp_staging_t *self, size_t bytes, gpp_err_t *err)
{
    assert(self);
    if (self->way != S_STAGED || bytes <= self->dev_bytes)
        return 0;
    gpp_backend_free(self->be, &self->dev);
    self->dev_bytes = 0;
    if (!(self->dev = gpp_backend_alloc(self->be, bytes, err)))
        return gpp_err_prefix(err, "staging buffer of the receives (%zu bytes)", bytes);
    self->dev_bytes = bytes;
    return 0;
}

size_t gpp_staging_device_bytes(const gpp_staging_t *self)
{
    assert(self);
    return self->dev_bytes;
}

int gpp_staging_put(gpp_staging_t *self, void *buf, const void *src, size_t bytes, gpp_err_t *err)
{
    assert(self);
    if (self->way == S_DEVICE) /* on the stream; the comm's launch waits for it */
        return gpp_stream_copy(self->s, buf, src, bytes, GPP_COPY_D2D, err);
    if (gpp_stream_copy(self->s, buf, src, bytes, GPP_COPY_D2H, err) < 0)
        return -1;
    return gpp_stream_sync(self->s, err);
}

const void *gpp_staging_get(gpp_staging_t *self, const void *buf, size_t bytes, gpp_err_t *err)
{
    assert(self);
    if (self->way != S_STAGED)
        return buf;
    assert(bytes <= self->dev_bytes);
    if (gpp_stream_copy(self->s, self->dev, buf, bytes, GPP_COPY_H2D, err) < 0 ||
        gpp_stream_sync(self->s, err) < 0)
        return NULL;
    return self->dev;
}

int gpp_staging_allreduce_sum_f32(gpp_staging_t *self, gpp_comm_t *comm, gpp_comm_group_t *group,
                                  float *x, size_t n, gpp_err_t *err)
{
    assert(self);
    if (n == 0)
        return 0;
    if (self->way != S_STAGED)
        return gpp_comm_allreduce_sum_f32(comm, group, x, n, err);
    if (self->red_n < n) {
        if (self->red_pinned)
            gpp_backend_host_unpin(self->be, self->red);
        free(self->red);
        self->red = gpp_xcalloc(n, sizeof *self->red);
        self->red_n = n;
        self->red_pinned = s_pin(self, self->red, n * sizeof *self->red);
    }
    if (gpp_stream_copy(self->s, self->red, x, n * sizeof *x, GPP_COPY_D2H, err) < 0 ||
        gpp_stream_sync(self->s, err) < 0 ||
        gpp_comm_allreduce_sum_f32(comm, group, self->red, n, err) < 0 ||
        gpp_stream_copy(self->s, x, self->red, n * sizeof *x, GPP_COPY_H2D, err) < 0)
        return -1;
    return gpp_stream_sync(self->s, err);
}

const void *gpp_staging_from_host(gpp_staging_t *self, const void *h, size_t bytes, void **copy,
                                  gpp_err_t *err)
{
    assert(self && copy);
    *copy = NULL;
    if (self->way != S_STAGED || bytes == 0)
        return h;
    if (!(*copy = gpp_backend_alloc(self->be, bytes, err)))
        return NULL;
    if (gpp_stream_copy(self->s, *copy, h, bytes, GPP_COPY_H2D, err) < 0)
        return NULL;
    return *copy;
}
