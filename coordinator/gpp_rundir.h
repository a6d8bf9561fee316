/* gpp_rundir: the coordinator's run directory, what a monitor on the same
 * machine needs to watch the job (`gpp-top --run-dir DIR`,
 * docs/operations.md, gpp-top):
 *
 *   DIR/                0700, owned by the coordinator's user
 *   DIR/endpoint        0600, the control endpoint to connect to
 *                       ("tcp://127.0.0.1:5555\n"), rewritten at every
 *                       (re)start of the job's ROUTER
 *   DIR/monitor.key_secret  0600, a monitor key pair made for this run
 *                       (admitted by the coordinator's ZAP handler; none
 *                       without CURVE)
 *   DIR/coordinator.key the coordinator's public key
 *
 * Whoever can read DIR can watch the job, nothing more: the monitor key
 * cannot register or act as an agent (gpp_monitor_refusal). A local launch
 * has one by default (gpp_rundir_default); `gpp-coordinator --run-dir DIR`
 * names it. Files are created exclusively, never through a link; the
 * directory is removed at the end when this run made it. */
#ifndef GPP_RUNDIR_H
#define GPP_RUNDIR_H

#include <limits.h>

#include "common/gpp_curve.h"
#include "common/gpp_err.h"

typedef struct {
    char path[PATH_MAX];
    int made; /* 1: this run made the directory (removed at the end) */
    int open;
} gpp_rundir_t;

/* "${XDG_RUNTIME_DIR:-/tmp}/gpp-<uid>/coordinator-<pid>", making the
 * per-user parent (0700) when missing; refused when it exists as a link,
 * not ours, or open to others. -1 with a message. */
int gpp_rundir_default(char *out, size_t len, gpp_err_t *err);

/* Makes path (0700), or takes an existing directory of ours that only we
 * may enter (stale files of an earlier run are removed); writes the
 * monitor's keys when monitor is not NULL. -1 with a message naming the
 * path and the fix. */
int gpp_rundir_open(gpp_rundir_t *rd, const char *path, const gpp_curve_client_t *monitor,
                    gpp_err_t *err);
/* (Re)writes DIR/endpoint. -1 with a message. */
int gpp_rundir_endpoint(gpp_rundir_t *rd, const char *endpoint, gpp_err_t *err);
/* Removes the files (and the directory when this run made it). */
void gpp_rundir_close(gpp_rundir_t *rd);

#endif
