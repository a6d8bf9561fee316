/* gpp_sigfd: process signals as readable events for a daemon's zloop.
 *
 * Both daemons (gpp-coordinator, gpp-agent) handle SIGINT, SIGTERM and
 * SIGCHLD inside their one event loop instead of in async signal handlers:
 * gpp_sigfd_open() blocks the signals in the calling thread (call it first in
 * main, before CZMQ or any other thread starts, so every thread inherits the
 * mask) and returns a signalfd that a zloop poller watches. CZMQ's own
 * SIGINT handler is switched off so zloop never stops behind our back. */
#ifndef GPP_SIGFD_H
#define GPP_SIGFD_H

#include "common/gpp_err.h"

/* Blocks SIGINT, SIGTERM, SIGCHLD and SIGHUP and returns a non-blocking,
 * close-on-exec signalfd for them; -1 with a message on failure. The caller
 * owns the fd (close()). */
int gpp_sigfd_open(gpp_err_t *err);

/* Reads one pending signal: its number, 0 when none is pending, -1 on error. */
int gpp_sigfd_read(int fd);

/* Unblocks every signal and restores default dispositions. For a forked
 * child before execve (async-signal-safe). */
void gpp_sigfd_reset_child(void);

#endif
