/* gpp_rdv: the job's rendezvous table, through which the agents' comm
 * backends exchange their data-plane addresses, served on the
 * coordinator's one ROUTER (RdvSet / RdvGet -> RdvReply): one port to
 * secure. Each job's table has a fresh random token the Assignments carry;
 * requests without it, from ranks outside the world or not members
 * (member_fn) are refused, and so is a request past a hard limit
 * (gpp_rdv_limits_t). A get waits (parked) until its keys are set or its
 * timeout passes. No I/O of its own (send_fn); single-threaded.
 * gpp_rdv_service_*: a standalone ROUTER serving a table, for tests and
 * benchmarks.
 *
 * Ownership: _new returns objects the caller owns. */
#ifndef GPP_RDV_H
#define GPP_RDV_H

#include <stddef.h>

#include "common/gpp_err.h"
#include "proto/gpp_msg.h"

typedef struct gpp_rdv_s gpp_rdv_t;

typedef struct {
    int max_keys;           /* 0: GPP_RDV_DEFAULT_KEYS */
    size_t max_value_bytes; /* 0: GPP_RDV_DEFAULT_VALUE_BYTES; at most GPP_RDV_VALUE_MAX */
    size_t max_total_bytes; /* keys and values; 0: GPP_RDV_DEFAULT_TOTAL_BYTES */
    int max_parked;         /* parked gets; 0: GPP_RDV_DEFAULT_PARKED */
} gpp_rdv_limits_t;

#define GPP_RDV_DEFAULT_KEYS 8192
#define GPP_RDV_DEFAULT_VALUE_BYTES (256u << 10)
#define GPP_RDV_DEFAULT_TOTAL_BYTES (32u << 20)
#define GPP_RDV_DEFAULT_PARKED 4096

/* Sends m (an RdvReply envelope) to the peer of routing identity id.
 * Returns 0 or -1 (logged by the caller; the answer is lost). */
typedef int(gpp_rdv_send_fn)(void *arg, const void *id, size_t id_len, gpp_msg_t *m);
/* 1 when rank may use the table now. */
typedef int(gpp_rdv_member_fn)(void *arg, int rank);

/* lim NULL: the defaults. member_fn NULL: every rank of the world. Caller
 * owns the result. The table starts closed (every request refused). */
gpp_rdv_t *gpp_rdv_new(const gpp_rdv_limits_t *lim, gpp_rdv_send_fn *send_fn,
                       gpp_rdv_member_fn *member_fn, void *arg);
void gpp_rdv_destroy(gpp_rdv_t **self_p);

/* Opens the table for a job of world_size ranks: clears it and draws a new
 * token. -1 with a message when the system has no randomness to give. */
int gpp_rdv_open(gpp_rdv_t *self, int world_size, gpp_err_t *err);
/* The open job's token, "" when closed. Borrowed. */
const char *gpp_rdv_token(const gpp_rdv_t *self);
/* Closes the table: parked gets are answered RDV_REFUSED with reason, every
 * key is freed, the token is forgotten. Accepts a closed table. */
void gpp_rdv_close(gpp_rdv_t *self, const char *reason);

/* 1 when m is a request for the table (RdvSet or RdvGet). */
int gpp_rdv_is_request(const gpp_msg_t *m);
/* Handles one validated request from routing identity id: RdvSet
 * overwrites; RdvGet is answered at once when every key is set, else
 * parked (answered in request order once they are, RDV_TIMEOUT naming the
 * missing keys after its timeout); a refusal is logged and answered
 * RDV_REFUSED naming the limit. now_ms: gpp_now_ms(). */
void gpp_rdv_handle(gpp_rdv_t *self, const void *id, size_t id_len, const gpp_msg_t *m,
                    double now_ms);
/* Answers the parked gets whose timeout has passed (RDV_TIMEOUT). */
void gpp_rdv_tick(gpp_rdv_t *self, double now_ms);

/* Current use, for tests and logs. */
int gpp_rdv_n_keys(const gpp_rdv_t *self);
size_t gpp_rdv_n_bytes(const gpp_rdv_t *self);
int gpp_rdv_n_parked(const gpp_rdv_t *self);

/* The endpoint agents connect to for a ROUTER bound to bind on port: a
 * wildcard host ("*", "0.0.0.0", "::", "[::]") becomes 127.0.0.1 when every
 * agent is local, else this host's name. */
void gpp_rdv_endpoint(const char *bind, int port, int local, char *out, size_t len);

/* ---- standalone service (tests, benchmarks) ---- */

typedef struct gpp_rdv_service_s gpp_rdv_service_t;

/* Binds a ROUTER on bind (e.g. "tcp://127.0.0.1:*": a port from the kernel)
 * and opens a table for world_size ranks. Caller owns the result. */
gpp_rdv_service_t *gpp_rdv_service_new(const char *bind, int world_size, gpp_err_t *err);
/* Where to connect ("tcp://127.0.0.1:PORT") and the token. Borrowed. */
const char *gpp_rdv_service_endpoint(const gpp_rdv_service_t *self);
const char *gpp_rdv_service_token(const gpp_rdv_service_t *self);
gpp_rdv_t *gpp_rdv_service_table(gpp_rdv_service_t *self);
/* Serves requests for up to timeout_ms (0: what is queued). Invalid frames
 * are dropped and counted. */
void gpp_rdv_service_poll(gpp_rdv_service_t *self, int timeout_ms);
/* Frames dropped as invalid so far. */
int gpp_rdv_service_dropped(const gpp_rdv_service_t *self);
void gpp_rdv_service_destroy(gpp_rdv_service_t **self_p);

#endif
