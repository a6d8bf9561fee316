/* gpp_monitor: the coordinator's answers to monitors (gpp-top) on its
 * control ROUTER: MonitorReply with the /metrics and /schedule texts,
 * rendered at most once per max_age_ms however many ask. What a monitor
 * can make the coordinator hold is bounded: one reply outstanding per
 * connection (a ticket per reply), GPP_MONITOR_PEERS connections,
 * GPP_MONITOR_PER_S answers a second (then MONITOR_BUSY), a snapshot of at
 * most GPP_MONITOR_TEXT_MAX bytes (else MONITOR_REFUSED); docs/protocol.md,
 * Monitoring. Who may ask is gpp_monitor_refusal's. Loop thread only.
 *
 * Ownership: gpp_monitor_new returns an object the caller owns. */
#ifndef GPP_MONITOR_H
#define GPP_MONITOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_curve.h"
#include "coordinator/gpp_expo.h"
#include "proto/gpp_msg.h"

/* gpp-top asks at most every 100 ms (its --interval-ms floor): 5 of them at
 * that rate, or many more at its default 1 s */
#define GPP_MONITOR_PER_S 50
#define GPP_MONITOR_PEERS 64

typedef struct gpp_monitor_s gpp_monitor_t;

/* Renders the job now into metrics and schedule (empty on entry). */
typedef void(gpp_monitor_render_fn)(void *arg, gpp_expo_t *metrics, gpp_expo_t *schedule);

/* max_age_ms: a snapshot is rendered again (render(arg, ...)) when it is
 * older than this. Caller owns the result. */
gpp_monitor_t *gpp_monitor_new(double max_age_ms, gpp_monitor_render_fn *render, void *arg);
void gpp_monitor_destroy(gpp_monitor_t **self_p);

/* A MonitorRequest of envelope seq `seq` from routing id `id`: 1 with *rep
 * filled (it borrows the monitor's snapshot until the next call), 0 when
 * it is to be dropped, why says why. */
int gpp_monitor_answer(gpp_monitor_t *self, const void *id, size_t id_len, uint64_t seq,
                       const Gpp__MonitorRequest *req, double now_ms, Gpp__MonitorReply *rep,
                       char *why, size_t why_len);

/* What a peer may send on the control ROUTER, by the role of its CURVE key
 * (gpp_curve_user_role of the ZAP user id libzmq puts on every frame): an
 * agent key every agent message and no monitor_request, a monitor key
 * monitor_request only. NULL: allowed; else why not. Without CURVE
 * (curve = 0: --insecure) nobody is authenticated and anyone may send
 * anything. */
const char *gpp_monitor_refusal(int curve, gpp_curve_role_t role, gpp_msg_type_t type);

/* Replies with a snapshot so far. */
uint64_t gpp_monitor_answered(const gpp_monitor_t *self);

#endif
