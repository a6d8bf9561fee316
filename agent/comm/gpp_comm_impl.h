/* gpp_comm_impl: what a comm backend provides (the vtable behind
 * gpp_comm.h). Only backend sources include this. The dispatch layer
 * (gpp_comm.c) checks arguments before calling in, so backends may assert
 * them. Each backend allocates its comm, request and group objects with
 * these structs as their first member. */
#ifndef GPP_COMM_IMPL_H
#define GPP_COMM_IMPL_H

#include "agent/comm/gpp_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *name;
    int device;                                  /* buffers are device memory */
    int self_p2p;                                /* send/recv with peer == own rank allowed */
    int (*flush)(gpp_comm_t *c, gpp_err_t *err); /* NULL: nothing deferred */
    int (*isend)(gpp_comm_t *c, const void *buf, size_t bytes, int peer, uint32_t tag,
                 gpp_comm_req_t **req, gpp_err_t *err);
    int (*irecv)(gpp_comm_t *c, void *buf, size_t bytes, int peer, uint32_t tag,
                 gpp_comm_req_t **req, gpp_err_t *err);
    int (*wait)(gpp_comm_t *c, gpp_comm_req_t *req, gpp_err_t *err); /* does not free */
    int (*test)(gpp_comm_t *c, gpp_comm_req_t *req, int *done, gpp_err_t *err);
    void (*req_free)(gpp_comm_t *c, gpp_comm_req_t *req);
    gpp_comm_group_t *(*group_new)(gpp_comm_t *c, const int *ranks, int n, gpp_err_t *err);
    void (*group_free)(gpp_comm_group_t *g);
    int (*allreduce_sum_f32)(gpp_comm_t *c, gpp_comm_group_t *g, float *buf, size_t count,
                             gpp_err_t *err);
    /* *out: gpp_xcalloc'd, at least 1 byte; bytes_each: group size entries */
    int (*allgatherv)(gpp_comm_t *c, gpp_comm_group_t *g, const void *buf, size_t bytes, void **out,
                      size_t *bytes_each, gpp_err_t *err);
    int (*barrier)(gpp_comm_t *c, gpp_comm_group_t *g, gpp_err_t *err);
    void (*abort)(gpp_comm_t *c, const char *reason);
    void (*destroy)(gpp_comm_t *c);
} gpp_comm_ops_t;

struct gpp_comm {
    const gpp_comm_ops_t *ops;
    int rank;
    int world_size;
};

struct gpp_comm_req {
    gpp_comm_t *comm;
};

struct gpp_comm_group {
    gpp_comm_t *comm;
    int size;
    int rank; /* index of this rank in the group */
};

#ifdef __cplusplus
}
#endif
#endif
