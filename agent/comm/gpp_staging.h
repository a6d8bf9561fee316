/* gpp_staging: where a comm's transfers live and how a stage's tensors get
 * there (host/device staging), fixed at creation by backend and comm:
 *  - CPU backend: host buffers; a send copies into its buffer;
 *  - device backend, host comm (Gloo): host buffers page-locked through the
 *    backend (a refusal is warned about once); a send copies device -> host
 *    and waits, a receive is copied into one device staging buffer all
 *    receives share (in stream order), a reduction runs on a host copy;
 *  - device backend, device comm (NCCL): device buffers; a send is a device
 *    copy on the stream the comm's launch waits for.
 *
 * Ownership: borrows the backend and the stream; buffers from
 * gpp_staging_buf_new are the caller's until gpp_staging_buf_free. One
 * thread. */
#ifndef GPP_STAGING_H
#define GPP_STAGING_H

#include <stddef.h>

#include "agent/comm/gpp_comm.h"
#include "common/gpp_err.h"
#include "kernels/gpp_backend.h"

typedef struct gpp_staging_s gpp_staging_t;

/* comm: the stage's communicator (its kind decides the way); NULL with
 * one rank (host buffers, nothing staged). Caller owns the result. */
gpp_staging_t *gpp_staging_new(gpp_backend_t *be, gpp_stream_t *s, const gpp_comm_t *comm);
void gpp_staging_destroy(gpp_staging_t **self_p);

/* 1: transfer buffers are device memory (a device comm). */
int gpp_staging_device_bufs(const gpp_staging_t *self);

/* A transfer buffer of `bytes` (0 allowed); NULL + message when device
 * memory runs out. */
void *gpp_staging_buf_new(gpp_staging_t *self, size_t bytes, gpp_err_t *err);
void gpp_staging_buf_free(gpp_staging_t *self, void **buf_p);

/* Room for the largest receive (bytes): the device staging buffer, when
 * receives are staged. 0 or -1 + message. */
int gpp_staging_reserve(gpp_staging_t *self, size_t bytes, gpp_err_t *err);
/* Device memory held outside the stage's plan (the staging buffer). */
size_t gpp_staging_device_bytes(const gpp_staging_t *self);

/* A send: `bytes` of the tensor at src (backend memory) into transfer
 * buffer buf, ready for the comm's send when this returns. */
int gpp_staging_put(gpp_staging_t *self, void *buf, const void *src, size_t bytes, gpp_err_t *err);
/* A completed receive in buf as backend memory the stage reads: buf, or
 * its copy in the staging buffer (valid until the next _get). */
const void *gpp_staging_get(gpp_staging_t *self, const void *buf, size_t bytes, gpp_err_t *err);

/* Sums n floats of backend memory at x over group (in place), through a
 * host copy when staged. */
int gpp_staging_allreduce_sum_f32(gpp_staging_t *self, gpp_comm_t *comm, gpp_comm_group_t *group,
                                  float *x, size_t n, gpp_err_t *err);
/* Host memory h from a comm (an all-gather) as backend memory: h itself,
 * or its device copy (enqueued on the stream) in *copy, which the caller
 * frees with gpp_backend_free once the stream's readers are done (*copy
 * NULL otherwise). NULL + message when device memory runs out. */
const void *gpp_staging_from_host(gpp_staging_t *self, const void *h, size_t bytes, void **copy,
                                  gpp_err_t *err);

#endif
