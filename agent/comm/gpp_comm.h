/* gpp_comm: the data-plane communicator of one agent (one rank).
 *
 * An interface with one implementation per transport: Gloo over TCP
 * (gpp_comm_gloo_new, host buffers) and NCCL (gpp_comm_nccl_new, device
 * buffers of one GPU per rank; agent/comm/gpp_comm_nccl.h). Backends fill
 * the vtable of gpp_comm_impl.h; callers use only the functions below.
 *
 * Point-to-point: post a receive early (gpp_comm_irecv), wait for it just
 * before the data is used (gpp_comm_wait). A message is matched by (peer,
 * tag) in posting order; sizes must agree on both sides (Gloo terminates
 * the receiving process when a message is longer than the posted receive:
 * sizes come from the validated plan on both sides, so a mismatch is a gpp
 * bug, and the coordinator sees that agent die). Tags are the
 * caller's: the executor derives them from (tensor, micro-batch, direction)
 * so that different tensors never mix.
 *
 * Collectives run over a group: the whole world (group NULL) or a
 * sub-group made with gpp_comm_group_new (the data-parallel replicas of a
 * stage). Every member must issue the same collectives on a group in the
 * same order.
 *
 * Errors (peer gone, timeout, size mismatch, abort) return -1 and fill err.
 * After gpp_comm_abort() every pending and later operation fails: the
 * communicator is dead and must be destroyed. gpp_comm_abort() is the one
 * call that may come from another thread (a control thread unblocking an
 * executor stuck in a wait). Everything else is single-threaded per comm.
 *
 * Rendezvous goes through the coordinator's table with a rendezvous client
 * (agent/comm/gpp_rdv_client.h) that the comm takes over; keys are prefixed
 * with opts.prefix, unique per job attempt. */
#ifndef GPP_COMM_H
#define GPP_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "agent/comm/gpp_rdv_client.h"
#include "common/gpp_err.h"

/* Rendezvous and per-wait timeout when gpp_comm_opts_t.timeout_ms is 0. */
#define GPP_COMM_TIMEOUT_DEFAULT_MS 300000

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpp_comm gpp_comm_t;
typedef struct gpp_comm_req gpp_comm_req_t;
typedef struct gpp_comm_group gpp_comm_group_t;

typedef struct {
    gpp_rdv_client_t *rdv; /* rendezvous client: gpp_comm_gloo_new takes it
                              (also on failure) and sets this to NULL */
    const char *prefix;    /* rendezvous key prefix, unique per job attempt */
    int world_size;        /* > 0 */
    int rank;              /* 0 <= rank < world_size */
    const char *host;      /* address to bind and advertise for the data
                              plane; NULL or "" = this host's name */
    int timeout_ms;        /* per wait and for rendezvous; 0 = GPP_COMM_TIMEOUT_DEFAULT_MS */
    int device;            /* nccl: this rank's CUDA device (one GPU per rank) */
    void *compute_stream;  /* nccl: the cudaStream_t that produces and consumes
                              the buffers (launches wait for it); NULL: the
                              caller synchronised its work before each call */
} gpp_comm_opts_t;

/* Joins the world communicator (blocks until all world_size ranks joined or
 * timeout). Caller owns the result (gpp_comm_destroy), which owns opts->rdv
 * (gpp_comm_abort aborts it too). */
gpp_comm_t *gpp_comm_gloo_new(gpp_comm_opts_t *opts, gpp_err_t *err);

/* Joins by backend name: "gloo" or "nccl" (gpp_comm_nccl_new); any other
 * name is an error naming the known ones. */
gpp_comm_t *gpp_comm_new(const char *backend, gpp_comm_opts_t *opts, gpp_err_t *err);

/* Frees the communicator, closing its connections; accepts NULL. Requests
 * not yet waited for are freed too. */
void gpp_comm_destroy(gpp_comm_t **self_p);

int gpp_comm_rank(const gpp_comm_t *self);
int gpp_comm_size(const gpp_comm_t *self);
const char *gpp_comm_backend(const gpp_comm_t *self); /* "gloo" | "nccl" */
/* 1 when buffers are device memory (nccl), 0 when host memory (gloo). */
int gpp_comm_is_device(const gpp_comm_t *self);

/* Starts sending `bytes` bytes of buf to rank `peer` with `tag`. buf must
 * stay valid and unchanged until the request completes. On success *req is
 * a request the caller owns: complete it with gpp_comm_wait. */
int gpp_comm_isend(gpp_comm_t *self, const void *buf, size_t bytes, int peer, uint32_t tag,
                   gpp_comm_req_t **req, gpp_err_t *err);
/* Posts a receive of exactly `bytes` bytes from `peer` with `tag` into buf. */
int gpp_comm_irecv(gpp_comm_t *self, void *buf, size_t bytes, int peer, uint32_t tag,
                   gpp_comm_req_t **req, gpp_err_t *err);
/* Waits for the request to complete; takes ownership of *req (frees it and
 * NULLs it, also on error). */
int gpp_comm_wait(gpp_comm_t *self, gpp_comm_req_t **req, gpp_err_t *err);
/* Sets *done to 1 when a wait would not block. The request stays owned by
 * the caller. */
int gpp_comm_test(gpp_comm_t *self, gpp_comm_req_t *req, int *done, gpp_err_t *err);

/* Starts what was posted since the last flush as one group (nccl:
 * ncclGroupStart/End on the communication stream: call it once per schedule
 * step after posting that step's sends and receives). wait/test flush
 * first; a no-op for gloo, whose requests start when posted. */
int gpp_comm_flush(gpp_comm_t *self, gpp_err_t *err);

/* Blocking conveniences: isend/irecv + wait. */
int gpp_comm_send(gpp_comm_t *self, const void *buf, size_t bytes, int peer, uint32_t tag,
                  gpp_err_t *err);
int gpp_comm_recv(gpp_comm_t *self, void *buf, size_t bytes, int peer, uint32_t tag,
                  gpp_err_t *err);

/* Creates the sub-group of the given world ranks (ascending, unique, this
 * rank among them). Collective over the members only: each member calls it
 * with the same list. Caller owns the result (gpp_comm_group_destroy, before
 * the comm is destroyed). */
gpp_comm_group_t *gpp_comm_group_new(gpp_comm_t *self, const int *ranks, int n, gpp_err_t *err);
void gpp_comm_group_destroy(gpp_comm_group_t **group_p);
int gpp_comm_group_size(const gpp_comm_group_t *group);
int gpp_comm_group_rank(const gpp_comm_group_t *group); /* this rank's index in the group */

/* In-place sum of count floats over the group (NULL = world); every member
 * ends with the same bits. */
int gpp_comm_allreduce_sum_f32(gpp_comm_t *self, gpp_comm_group_t *group, float *buf, size_t count,
                               gpp_err_t *err);
/* All-gather of byte buffers whose sizes differ by member: each member of
 * the group (NULL = world) contributes `bytes` bytes of buf (0 allowed).
 * On success *out is a buffer the caller owns (free(); never NULL, even
 * when every member gave 0 bytes) holding the contributions in group-rank
 * order, and bytes_each (the caller's array of gpp_comm_group_size
 * entries, or of the world size) gets each member's size: member i's bytes
 * start at the sum of bytes_each[0..i). Every member ends with the same
 * bytes. Sizes travel first (one 8-byte word per member), then the
 * payloads; both phases are abortable. On error *out is NULL. */
int gpp_comm_allgatherv(gpp_comm_t *self, gpp_comm_group_t *group, const void *buf, size_t bytes,
                        void **out, size_t *bytes_each, gpp_err_t *err);
/* Returns when every member of the group (NULL = world) has entered. */
int gpp_comm_barrier(gpp_comm_t *self, gpp_comm_group_t *group, gpp_err_t *err);

/* Fails every pending and later operation with "aborted: <reason>". Safe to
 * call from another thread and more than once. */
void gpp_comm_abort(gpp_comm_t *self, const char *reason);

#ifdef __cplusplus
}
#endif
#endif
