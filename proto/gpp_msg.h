/* gpp_msg: the control-plane message layer over the generated protobuf-c
 * code (proto/gpp.proto).
 *
 * A message is a Gpp__Envelope (typedef gpp_msg_t): magic, protocol version,
 * sequence number, sender, and a oneof body. Build the body on the stack
 * with the generated *_INIT macro, wrap it with gpp_msg_wrap() (envelope
 * fields, body case and pointer in one call), then gpp_msg_encode().
 * Receivers call gpp_msg_decode(), which returns a message only after it
 * passed gpp_msg_validate(): the structural pass (every string bounded and
 * NUL-free, every enum a known value, every double finite, counts bounded)
 * and the semantic pass (ranks < world size, lo < hi, ids non-negative,
 * ...). protobuf-c alone accepts such garbage, so nothing from the wire is
 * used before this. See docs/protocol.md. */
#ifndef GPP_MSG_H
#define GPP_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_device_kind.h"
#include "common/gpp_err.h"
#include "common/gpp_optim_kind.h"
#include "common/gpp_precision.h"
#include "proto/gpp.pb-c.h"

#define GPP_MSG_MAGIC 0x31505047u /* "GPP1" as little-endian bytes */
/* 2: rendezvous through the coordinator; 3: devices in Register, backend and
 * precision in Assignment and ProfileRequest, the measuring device in
 * ProfileResult; 4: measured traces (Assignment.trace, Metrics.action_*_us,
 * clock round trips in Heartbeat); 5: MonitorRequest / MonitorReply (gpp-top on
 * the control plane) */
#define GPP_PROTOCOL_VERSION 5u

/* Envelope.sender values that are not agent ranks. */
#define GPP_MSG_SENDER_COORD (-1)
#define GPP_MSG_SENDER_UNREGISTERED (-2)

#define GPP_MSG_MAX_BYTES (64u << 20)  /* larger frames are rejected unread */
#define GPP_MSG_STR_MAX 4096           /* bytes, excluding the NUL */
#define GPP_MSG_REPEATED_MAX (1 << 22) /* elements in one repeated field */
#define GPP_MSG_DEVICE_NAME_MAX                                                                    \
    255                      /* Register.device_name bytes (cudaDeviceProp.name: 256               \
                                with the NUL) */
#define GPP_MSG_GPU_MAX 1024 /* Register.gpu: indices in [0, GPP_MSG_GPU_MAX) */

/* Rendezvous messages (RdvSet, RdvGet, RdvReply; CommBootstrap.rdv_*). The
 * coordinator's table has lower limits of its own (coordinator/gpp_rdv.h). */
#define GPP_RDV_TOKEN_LEN 32           /* hex digits [0-9a-f] */
#define GPP_RDV_KEY_MAX 256            /* bytes, charset [A-Za-z0-9._,:/=+-] */
#define GPP_RDV_VALUE_MAX (1 << 20)    /* bytes */
#define GPP_RDV_GET_KEYS_MAX 1024      /* keys in one RdvGet */
#define GPP_RDV_TIMEOUT_MAX_MS 3600000 /* RdvGet.timeout_ms */

/* MonitorReply.metrics and .schedule, bytes each: a job of thousands of
 * agents renders about 1 MiB of /metrics (docs/operations.md) */
#define GPP_MONITOR_TEXT_MAX (16 << 20)

typedef Gpp__Envelope gpp_msg_t;
typedef Gpp__Envelope__BodyCase gpp_msg_type_t;

/* The one envelope builder: initializes *m (magic, our protocol version,
 * seq, sender) and sets the body of the given type, e.g.
 * gpp_msg_wrap(&m, 1, rank, GPP__ENVELOPE__BODY_READY, &ready) with a
 * Gpp__Ready ready. body is borrowed (it must outlive m) and
 * must be the generated message of that type (asserted). */
void gpp_msg_wrap(gpp_msg_t *m, uint64_t seq, int sender, gpp_msg_type_t type, void *body);

/* Validates m, then encodes it. On success *data_out is a malloc'ed buffer of
 * *len_out bytes: caller owns the result (free()). On failure returns -1,
 * fills err and leaves *data_out NULL. */
int gpp_msg_encode(const gpp_msg_t *m, uint8_t **data_out, size_t *len_out, gpp_err_t *err);

/* Decodes len bytes and validates the result. Returns NULL with the reason
 * in err on any failure (never crashes on hostile input). Caller owns the
 * result: free it with gpp_msg_destroy(). */
gpp_msg_t *gpp_msg_decode(const uint8_t *data, size_t len, gpp_err_t *err);

/* Frees a message returned by gpp_msg_decode() and NULLs *self_p; accepts
 * NULL and *self_p == NULL. Not for messages built by the caller. */
void gpp_msg_destroy(gpp_msg_t **self_p);

/* Both validation passes. Returns 0, or -1 with "<path>: <problem>" in err,
 * e.g. "assignment.actions[3]: lo=8 >= hi=4". */
int gpp_msg_validate(const gpp_msg_t *m, gpp_err_t *err);

/* The job's precision and device kind as Register, Assignment and
 * ProfileRequest carry them: proto Precision = gpp_precision_t + 1, proto
 * Backend = gpp_device_kind_t + 1, 0 being "not set". The one conversion
 * each way; _of takes a validated message's value (gpp_msg_validate refuses
 * UNSPECIFIED and any value without a C counterpart). */
Gpp__Precision gpp_msg_precision(gpp_precision_t p);
gpp_precision_t gpp_msg_precision_of(Gpp__Precision p);
Gpp__Backend gpp_msg_backend(gpp_device_kind_t k);
gpp_device_kind_t gpp_msg_backend_of(Gpp__Backend b);
/* The optimizer as HyperParams carries it: proto Optimizer =
 * gpp_optim_kind_t + 1, the same way. */
Gpp__Optimizer gpp_msg_optimizer(gpp_optim_kind_t k);
gpp_optim_kind_t gpp_msg_optimizer_of(Gpp__Optimizer o);

/* "register", "assignment", ...; "none" for an unset body, "unknown" else. */
const char *gpp_msg_type_name(gpp_msg_type_t t);

#endif
