/* gpp_rundir: the coordinator's run directory, what `gpp-top --run-dir DIR`
 * on the same machine needs: DIR/ 0700, DIR/endpoint 0600 (rewritten at
 * every bind), DIR/monitor.key_secret 0600 (a monitor key made for this
 * run; none without CURVE), DIR/coordinator.key. Whoever reads DIR may
 * watch the job, nothing more. Files are created exclusively, never
 * through a link; DIR is removed at the end when this run made it.
 *
 * Ownership: the caller owns the gpp_rundir_t; gpp_rundir_close frees. */
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
