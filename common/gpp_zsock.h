/* gpp_zsock: a CZMQ socket helper the control plane's two ends share (the
 * coordinator's ROUTER, an agent's DEALER). */
#ifndef GPP_ZSOCK_H
#define GPP_ZSOCK_H

#include <czmq.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Frames a heartbeat tick reads (gpp_zsock_read_queued's max) before it
 * judges a peer silent. */
#define GPP_ZSOCK_QUEUED_MAX 4096

/* Hands the frames already waiting on sock to fn (as the event loop's
 * reader would, loop NULL), without waiting for more: at most max, so
 * that a flood cannot hold the caller. A timer that judges a peer silent
 * calls it first, since what queued while its own loop paused was sent.
 * Returns how many were handed over, or -1 as soon as fn returns -1. */
int gpp_zsock_read_queued(zsock_t *sock, int max, zloop_reader_fn *fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif
