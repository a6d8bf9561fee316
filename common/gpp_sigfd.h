/* gpp_sigfd: process signals as readable events for a daemon's zloop.
 *
 * Both daemons (gpp-coordinator, gpp-agent) handle SIGINT, SIGTERM, SIGHUP
 * and SIGCHLD inside their one event loop: the signal handler only writes
 * the signal number to a pipe, and gpp_sigfd_open() returns the pipe's read
 * end for a zloop poller. CZMQ's own SIGINT handler is switched off so
 * zloop never stops behind our back. SIGPIPE is ignored: a peer that
 * closes its end of a socket (a Gloo pair whose agent died, a scrape client
 * gone) makes the write fail with EPIPE, reported as that connection's
 * error, instead of killing the process, which the coordinator would count
 * as a second dead device. One per process. */
#ifndef GPP_SIGFD_H
#define GPP_SIGFD_H

#include "common/gpp_err.h"

/* Installs the handlers and returns the non-blocking, close-on-exec read
 * end of the signal pipe; -1 with a message on failure. Call once, early in
 * main. The fd stays open for the process's life. */
int gpp_sigfd_open(gpp_err_t *err);

/* Blocks (how = SIG_BLOCK) or unblocks (SIG_UNBLOCK) the handled signals in
 * the calling thread; threads it creates inherit the mask. Worker threads
 * block them so that only the loop thread is interrupted. */
void gpp_sigfd_mask(int how);

/* zloop_start() returns 0 when a signal interrupted its poll (EINTR) and -1
 * when a handler ended it: runs it until a handler ends it. */
void gpp_sigfd_run_loop(void *zloop);

/* Reads one pending signal: its number, 0 when none is pending, -1 on error. */
int gpp_sigfd_read(int fd);

/* Restores default dispositions (SIGPIPE's too) and an empty mask. For a forked child
 * before execve (async-signal-safe). */
void gpp_sigfd_reset_child(void);

#endif
