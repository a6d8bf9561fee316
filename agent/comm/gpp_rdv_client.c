/* gpp_rdv_client: see gpp_rdv_client.h. */
#include "agent/comm/gpp_rdv_client.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <zmq.h>

#include "common/gpp_curve.h"
#include "common/gpp_time.h"
#include "proto/gpp_msg.h"

struct gpp_rdv_client {
    void *ctx;
    void *sock; /* DEALER */
    char endpoint[256];
    char token[GPP_RDV_TOKEN_LEN + 1];
    int rank;
    uint64_t seq;
    atomic_int aborted;
    pthread_mutex_t mu; /* guards reason */
    char reason[256];
};

gpp_rdv_client_t *gpp_rdv_client_new(const char *endpoint, const char *token, int rank,
                                     gpp_err_t *err)
{
    if (!endpoint || !endpoint[0] || strlen(endpoint) >= 256 || !token ||
        strlen(token) != GPP_RDV_TOKEN_LEN || rank < 0) {
        gpp_err_set(err,
                    "rendezvous: need an endpoint, a token of %d hex digits and a rank >= 0 "
                    "(got rank %d)",
                    GPP_RDV_TOKEN_LEN, rank);
        return NULL;
    }
    gpp_rdv_client_t *self = gpp_xcalloc(1, sizeof *self);
    snprintf(self->endpoint, sizeof self->endpoint, "%s", endpoint);
    snprintf(self->token, sizeof self->token, "%s", token);
    self->rank = rank;
    atomic_init(&self->aborted, 0);
    pthread_mutex_init(&self->mu, NULL);
    uint32_t nonce = 0;
    if (getrandom(&nonce, sizeof nonce, GRND_NONBLOCK) != (ssize_t)sizeof nonce)
        nonce = (uint32_t)((uint64_t)(gpp_now_ms() * 1000.0) ^ (uint64_t)(uintptr_t)self);
    char identity[64];
    int idl = snprintf(identity, sizeof identity, "rdv/%d/%08x", rank, nonce);
    int zero = 0;
    self->ctx = zmq_ctx_new();
    self->sock = self->ctx ? zmq_socket(self->ctx, ZMQ_DEALER) : NULL;
    if (!self->sock || zmq_setsockopt(self->sock, ZMQ_ROUTING_ID, identity, (size_t)idl) < 0 ||
        zmq_setsockopt(self->sock, ZMQ_LINGER, &zero, sizeof zero) < 0) {
        gpp_err_set(err, "rendezvous: cannot open a socket to '%s': %s", endpoint,
                    zmq_strerror(zmq_errno()));
        gpp_rdv_client_destroy(&self);
        return NULL;
    }
    /* the coordinator's port is the control plane's: the same size limit
       and CURVE keys as the agent's control socket (gpp_curve.h) */
    if (gpp_curve_client_apply(self->sock, GPP_MSG_MAX_BYTES, err) < 0) {
        gpp_rdv_client_destroy(&self);
        return NULL;
    }
    if (zmq_connect(self->sock, endpoint) < 0) {
        gpp_err_set(err, "rendezvous: cannot connect to '%s': %s; expected tcp://HOST:PORT",
                    endpoint, zmq_strerror(zmq_errno()));
        gpp_rdv_client_destroy(&self);
        return NULL;
    }
    return self;
}

void gpp_rdv_client_destroy(gpp_rdv_client_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_rdv_client_t *self = *self_p;
    if (self->sock)
        zmq_close(self->sock);
    if (self->ctx)
        zmq_ctx_term(self->ctx);
    pthread_mutex_destroy(&self->mu);
    free(self);
    *self_p = NULL;
}

void gpp_rdv_client_abort(gpp_rdv_client_t *self, const char *reason)
{
    if (!self)
        return;
    pthread_mutex_lock(&self->mu);
    if (!atomic_load(&self->aborted))
        snprintf(self->reason, sizeof self->reason, "%s", reason && reason[0] ? reason : "abort");
    atomic_store(&self->aborted, 1);
    pthread_mutex_unlock(&self->mu);
}

static int s_aborted(gpp_rdv_client_t *self, const char *what, gpp_err_t *err)
{
    pthread_mutex_lock(&self->mu);
    gpp_err_set(err, "rendezvous: %s: aborted: %s", what, self->reason);
    pthread_mutex_unlock(&self->mu);
    return -1;
}

/* Sends m and waits up to wait_ms for the RdvReply to it. Returns the
 * decoded reply envelope (caller destroys) or NULL with err. */
static gpp_msg_t *s_call(gpp_rdv_client_t *self, gpp_msg_t *m, const char *what, int wait_ms,
                         gpp_err_t *err)
{
    if (atomic_load(&self->aborted)) {
        s_aborted(self, what, err);
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (gpp_msg_encode(m, &buf, &len, err) < 0) {
        gpp_err_prefix(err, "rendezvous: %s", what);
        return NULL;
    }
    /* a DEALER queues while not connected yet; DONTWAIT fails only on a
     * full queue, which one request at a time never fills */
    int rc = zmq_send(self->sock, buf, len, ZMQ_DONTWAIT);
    free(buf);
    if (rc < 0) {
        gpp_err_set(err, "rendezvous: %s: cannot send to %s: %s", what, self->endpoint,
                    zmq_strerror(zmq_errno()));
        return NULL;
    }
    double end = gpp_now_ms() + wait_ms;
    zmq_pollitem_t it = {self->sock, 0, ZMQ_POLLIN, 0};
    for (;;) {
        if (atomic_load(&self->aborted)) {
            s_aborted(self, what, err);
            return NULL;
        }
        double left = end - gpp_now_ms();
        if (left <= 0) {
            gpp_err_set(err, "rendezvous: %s: no answer from the coordinator at %s within %d ms",
                        what, self->endpoint, wait_ms);
            return NULL;
        }
        int n = zmq_poll(&it, 1,
                         left < GPP_RDV_CLIENT_SLICE_MS ? (long)left + 1 : GPP_RDV_CLIENT_SLICE_MS);
        if (n <= 0)
            continue;
        zmq_msg_t f;
        zmq_msg_init(&f);
        if (zmq_msg_recv(&f, self->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f);
            continue;
        }
        gpp_err_t derr = {{0}};
        gpp_msg_t *r = gpp_msg_decode(zmq_msg_data(&f), zmq_msg_size(&f), &derr);
        zmq_msg_close(&f);
        if (!r) {
            gpp_warn("rendezvous: dropped a frame: %s", derr.msg);
            continue;
        }
        if (r->body_case == GPP__ENVELOPE__BODY_REJECT) {
            /* the coordinator did not take us for a rendezvous peer */
            gpp_err_set(err, "rendezvous: %s: rejected by the coordinator: %s", what,
                        r->reject->reason);
            gpp_msg_destroy(&r);
            return NULL;
        }
        if (r->sender != GPP_MSG_SENDER_COORD || r->body_case != GPP__ENVELOPE__BODY_RDV_REPLY ||
            r->rdv_reply->request_seq != m->seq) {
            gpp_msg_destroy(&r); /* a late answer to an earlier request */
            continue;
        }
        return r;
    }
}

int gpp_rdv_client_set(gpp_rdv_client_t *self, const char *key, const void *value, size_t len,
                       int timeout_ms, gpp_err_t *err)
{
    assert(self && key && (value || !len));
    Gpp__RdvSet s = GPP__RDV_SET__INIT;
    s.token = self->token;
    s.key = (char *)key;
    s.value.data = (uint8_t *)value;
    s.value.len = len;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++self->seq, self->rank, GPP__ENVELOPE__BODY_RDV_SET, &s);
    char what[GPP_RDV_KEY_MAX + 16];
    snprintf(what, sizeof what, "set %s", key);
    gpp_msg_t *r = s_call(self, &m, what, timeout_ms > 0 ? timeout_ms : 1, err);
    if (!r)
        return -1;
    int rc = 0;
    if (r->rdv_reply->status != GPP__RDV_STATUS__RDV_OK)
        rc = gpp_err_set(err, "rendezvous: %s: refused by the coordinator: %s", what,
                         r->rdv_reply->text);
    gpp_msg_destroy(&r);
    return rc;
}

int gpp_rdv_client_get(gpp_rdv_client_t *self, const char *const *keys, size_t n_keys,
                       int timeout_ms, void **values, size_t *lens, gpp_err_t *err)
{
    assert(self && keys && n_keys > 0 && (!values) == (!lens));
    if (values)
        for (size_t i = 0; i < n_keys; i++)
            values[i] = NULL;
    if (timeout_ms < 0)
        timeout_ms = 0;
    if (timeout_ms > GPP_RDV_TIMEOUT_MAX_MS)
        timeout_ms = GPP_RDV_TIMEOUT_MAX_MS;
    Gpp__RdvGet g = GPP__RDV_GET__INIT;
    g.token = self->token;
    g.keys = (char **)keys;
    g.n_keys = n_keys;
    g.timeout_ms = timeout_ms;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++self->seq, self->rank, GPP__ENVELOPE__BODY_RDV_GET, &g);
    char what[GPP_RDV_KEY_MAX + 32];
    snprintf(what, sizeof what, "get %s%s", keys[0], n_keys > 1 ? " (and more)" : "");
    /* the coordinator answers RDV_TIMEOUT at timeout_ms (on its timer's
     * beat); wait a little longer for that answer, which names the keys */
    gpp_msg_t *r = s_call(self, &m, what, timeout_ms + 2000, err);
    if (!r)
        return -1;
    const Gpp__RdvReply *rep = r->rdv_reply;
    int rc = 0;
    if (rep->status == GPP__RDV_STATUS__RDV_TIMEOUT)
        rc = gpp_err_set(err, "rendezvous: %s: timed out after %d ms (%s)", what, timeout_ms,
                         rep->text);
    else if (rep->status != GPP__RDV_STATUS__RDV_OK)
        rc = gpp_err_set(err, "rendezvous: %s: refused by the coordinator: %s", what, rep->text);
    else if (rep->n_entries != n_keys)
        rc = gpp_err_set(err, "rendezvous: %s: %zu values for %zu keys", what, rep->n_entries,
                         n_keys);
    for (size_t i = 0; rc == 0 && i < n_keys; i++)
        if (strcmp(rep->entries[i]->key, keys[i]) != 0)
            rc = gpp_err_set(err, "rendezvous: %s: answer %zu is for key %s", what, i,
                             rep->entries[i]->key);
    for (size_t i = 0; rc == 0 && values && i < n_keys; i++) {
        size_t l = rep->entries[i]->value.len;
        values[i] = gpp_xcalloc(l ? l : 1, 1);
        if (l)
            memcpy(values[i], rep->entries[i]->value.data, l);
        lens[i] = l;
    }
    gpp_msg_destroy(&r);
    return rc;
}
