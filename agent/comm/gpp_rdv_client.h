/* gpp_rdv_client: an agent's rendezvous client, the data-plane bootstrap
 * through the coordinator (coordinator/gpp_rdv.h holds the table).
 *
 * Its own ZeroMQ DEALER socket (and context) on the coordinator's ROUTER
 * endpoint (Assignment.comm.rdv_endpoint: the same port as the control
 * connection), routing identity "rdv/<rank>/<random>", so the client can
 * live on the training worker thread, apart from the agent's control
 * socket. Every request is an envelope from sender = rank carrying the
 * job's token (Assignment.comm.rdv_token), and is answered by an RdvReply
 * naming its sequence number; late answers to earlier requests are skipped.
 *
 * Calls are synchronous with a timeout. gpp_rdv_client_abort() is the one
 * call that may come from another thread: a blocked or later call then
 * fails with "aborted: <reason>" within GPP_RDV_CLIENT_SLICE_MS. */
#ifndef GPP_RDV_CLIENT_H
#define GPP_RDV_CLIENT_H

#include <stddef.h>

#include "common/gpp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPP_RDV_CLIENT_SLICE_MS 50

typedef struct gpp_rdv_client gpp_rdv_client_t;

/* Connects (lazily: ZeroMQ retries while the coordinator is away). NULL with
 * a message on a bad endpoint or token. Caller owns the result. */
gpp_rdv_client_t *gpp_rdv_client_new(const char *endpoint, const char *token, int rank,
                                     gpp_err_t *err);
/* Closes the socket at once (pending requests are dropped); accepts NULL. */
void gpp_rdv_client_destroy(gpp_rdv_client_t **self_p);

/* Sets key to len bytes of value; returns once the coordinator stored it. */
int gpp_rdv_client_set(gpp_rdv_client_t *self, const char *key, const void *value, size_t len,
                       int timeout_ms, gpp_err_t *err);
/* Waits up to timeout_ms until every key is set, then fills values[i] (a
 * malloc'ed copy the caller frees, never NULL) and lens[i]. values and lens
 * NULL: only wait. On error every values[i] is NULL. */
int gpp_rdv_client_get(gpp_rdv_client_t *self, const char *const *keys, size_t n_keys,
                       int timeout_ms, void **values, size_t *lens, gpp_err_t *err);

/* Makes every blocked and later call fail. Thread-safe, idempotent. */
void gpp_rdv_client_abort(gpp_rdv_client_t *self, const char *reason);

#ifdef __cplusplus
}
#endif
#endif
