/* gpp_comm: argument checks and dispatch to the backend's vtable. */
#include "agent/comm/gpp_comm.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "agent/comm/gpp_comm_nccl.h"

#include "agent/comm/gpp_comm_impl.h"

gpp_comm_t *gpp_comm_new(const char *backend, gpp_comm_opts_t *opts, gpp_err_t *err)
{
    assert(backend && opts);
    if (strcmp(backend, "gloo") == 0)
        return gpp_comm_gloo_new(opts, err);
    if (strcmp(backend, "nccl") == 0)
        return gpp_comm_nccl_new(opts, err);
    gpp_rdv_client_destroy(&opts->rdv); /* taken on failure too */
    gpp_err_set(err, "gpp_comm: unknown comm backend \"%s\"; use \"gloo\" or \"nccl\"", backend);
    return NULL;
}

void gpp_comm_destroy(gpp_comm_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    (*self_p)->ops->destroy(*self_p);
    *self_p = NULL;
}

int gpp_comm_rank(const gpp_comm_t *self)
{
    return self->rank;
}
int gpp_comm_size(const gpp_comm_t *self)
{
    return self->world_size;
}
const char *gpp_comm_backend(const gpp_comm_t *self)
{
    return self->ops->name;
}

int gpp_comm_is_device(const gpp_comm_t *self)
{
    return self->ops->device;
}

int gpp_comm_flush(gpp_comm_t *self, gpp_err_t *err)
{
    assert(self);
    return self->ops->flush ? self->ops->flush(self, err) : 0;
}

static int s_check_peer(const gpp_comm_t *c, int peer, gpp_err_t *err)
{
    if (peer < 0 || peer >= c->world_size || (peer == c->rank && !c->ops->self_p2p))
        return gpp_err_set(err, "gpp_comm: peer %d is not another rank of [0, %d) (this is %d)",
                           peer, c->world_size, c->rank);
    return 0;
}

int gpp_comm_isend(gpp_comm_t *self, const void *buf, size_t bytes, int peer, uint32_t tag,
                   gpp_comm_req_t **req, gpp_err_t *err)
{
    assert(self && req && (buf || !bytes));
    *req = NULL;
    if (s_check_peer(self, peer, err) < 0)
        return -1;
    return self->ops->isend(self, buf, bytes, peer, tag, req, err);
}

int gpp_comm_irecv(gpp_comm_t *self, void *buf, size_t bytes, int peer, uint32_t tag,
                   gpp_comm_req_t **req, gpp_err_t *err)
{
    assert(self && req && (buf || !bytes));
    *req = NULL;
    if (s_check_peer(self, peer, err) < 0)
        return -1;
    return self->ops->irecv(self, buf, bytes, peer, tag, req, err);
}

int gpp_comm_wait(gpp_comm_t *self, gpp_comm_req_t **req, gpp_err_t *err)
{
    assert(self && req && *req && (*req)->comm == self);
    int rc = self->ops->wait(self, *req, err);
    self->ops->req_free(self, *req);
    *req = NULL;
    return rc;
}

int gpp_comm_test(gpp_comm_t *self, gpp_comm_req_t *req, int *done, gpp_err_t *err)
{
    assert(self && req && req->comm == self && done);
    return self->ops->test(self, req, done, err);
}

int gpp_comm_send(gpp_comm_t *self, const void *buf, size_t bytes, int peer, uint32_t tag,
                  gpp_err_t *err)
{
    gpp_comm_req_t *r;
    if (gpp_comm_isend(self, buf, bytes, peer, tag, &r, err) < 0)
        return -1;
    return gpp_comm_wait(self, &r, err);
}

int gpp_comm_recv(gpp_comm_t *self, void *buf, size_t bytes, int peer, uint32_t tag, gpp_err_t *err)
{
    gpp_comm_req_t *r;
    if (gpp_comm_irecv(self, buf, bytes, peer, tag, &r, err) < 0)
        return -1;
    return gpp_comm_wait(self, &r, err);
}

gpp_comm_group_t *gpp_comm_group_new(gpp_comm_t *self, const int *ranks, int n, gpp_err_t *err)
{
    assert(self && ranks);
    int me = 0;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= self->world_size || (i && ranks[i] <= ranks[i - 1])) {
            gpp_err_set(err,
                        "gpp_comm: group ranks must be ascending ranks of [0, %d); "
                        "ranks[%d] = %d",
                        self->world_size, i, ranks[i]);
            return NULL;
        }
        me += ranks[i] == self->rank;
    }
    if (n <= 0 || !me) {
        gpp_err_set(err, "gpp_comm: rank %d is not a member of the %d-rank group it creates",
                    self->rank, n);
        return NULL;
    }
    return self->ops->group_new(self, ranks, n, err);
}

void gpp_comm_group_destroy(gpp_comm_group_t **group_p)
{
    if (!group_p || !*group_p)
        return;
    (*group_p)->comm->ops->group_free(*group_p);
    *group_p = NULL;
}

int gpp_comm_group_size(const gpp_comm_group_t *group)
{
    return group->size;
}
int gpp_comm_group_rank(const gpp_comm_group_t *group)
{
    return group->rank;
}

int gpp_comm_allreduce_sum_f32(gpp_comm_t *self, gpp_comm_group_t *group, float *buf, size_t count,
                               gpp_err_t *err)
{
    assert(self && (buf || !count) && (!group || group->comm == self));
    return self->ops->allreduce_sum_f32(self, group, buf, count, err);
}

int gpp_comm_allgatherv(gpp_comm_t *self, gpp_comm_group_t *group, const void *buf, size_t bytes,
                        void **out, size_t *bytes_each, gpp_err_t *err)
{
    assert(self && (buf || !bytes) && out && bytes_each && (!group || group->comm == self));
    *out = NULL;
    return self->ops->allgatherv(self, group, buf, bytes, out, bytes_each, err);
}

int gpp_comm_barrier(gpp_comm_t *self, gpp_comm_group_t *group, gpp_err_t *err)
{
    assert(self && (!group || group->comm == self));
    return self->ops->barrier(self, group, err);
}

void gpp_comm_abort(gpp_comm_t *self, const char *reason)
{
    assert(self);
    self->ops->abort(self, reason ? reason : "no reason given");
}
