/* gpp_launch: the local launcher (launch = "local"): forks and execs the
 * agents, reaps them on SIGCHLD without blocking (gpp_launch_reap). No
 * orphans: each child gets PR_SET_PDEATHSIG, and gpp_launch_destroy waits,
 * terminates and reaps whatever still runs.
 *
 * Ownership: gpp_launch_new returns an object the caller owns. */
#ifndef GPP_LAUNCH_H
#define GPP_LAUNCH_H

#include <sys/types.h>

#include "common/gpp_err.h"

typedef struct gpp_launch_s gpp_launch_t;

/* Caller owns the result. */
gpp_launch_t *gpp_launch_new(void);
/* Waits up to 2 s for the children, then SIGTERM, 2 s more, then SIGKILL;
 * reaps them all and frees. Blocks. Accepts NULL. */
void gpp_launch_destroy(gpp_launch_t **self_p);

/* Forks and execs argv (argv[0] a path, NULL-terminated); tag is the
 * caller's name for the child (the agent's rank). keep_fd >= 0: a
 * close-on-exec descriptor that this one child inherits under the same
 * number (its CURVE keys, gpp_curve_client_to_fd: private to the child,
 * never in argv or the environment, which other users can read); -1: none.
 * Returns the pid, or -1 with a message. */
pid_t gpp_launch_spawn(gpp_launch_t *self, char *const argv[], int tag, int keep_fd,
                       gpp_err_t *err);

/* Reaps every child that has exited, without blocking, calling
 * fn(arg, tag, pid, status) for each (status as from waitpid). Returns the
 * number reaped. */
typedef void(gpp_launch_exit_fn)(void *arg, int tag, pid_t pid, int status);
int gpp_launch_reap(gpp_launch_t *self, gpp_launch_exit_fn *fn, void *arg);

/* Children not yet reaped. */
int gpp_launch_live(const gpp_launch_t *self);
/* Sends sig to the live (not yet reaped) child spawned with tag; its pid
 * or 0 when there is none. A reaped pid is never signalled, so a reused
 * pid is safe. */
pid_t gpp_launch_kill(gpp_launch_t *self, int tag, int sig);

/* "exited with status 3" / "killed by signal 9 (Killed)". */
const char *gpp_launch_status_str(int status, char *buf, size_t len);

#endif
