/* gpp_expo: a job in the Prometheus text format 0.0.4 (/metrics) and its
 * measured schedule (/schedule, gpp-top's Gantt chart). Names carry the
 * gpp_ prefix and base units (_seconds, _bytes, _total); figures are the
 * last complete iteration's. The metric list: docs/operations.md.
 *
 * Ownership: the text buffer is the gpp_expo_t's (gpp_expo_release). */
#ifndef GPP_EXPO_H
#define GPP_EXPO_H

#include <stddef.h>
#include <stdint.h>

#include "coordinator/gpp_coord.h"

typedef struct {
    char *buf; /* NUL-terminated text, len bytes */
    size_t len, cap;
} gpp_expo_t;

void gpp_expo_release(gpp_expo_t *t);

/* "# HELP name help" and "# TYPE name type" (gauge, counter). */
void gpp_expo_family(gpp_expo_t *t, const char *name, const char *type, const char *help);
/* One sample: name{k1="v1",...} value. The labels are NULL-terminated
 * (name, value) pairs of strings; values are escaped. NaN and infinities
 * are written as Prometheus spells them. */
void gpp_expo_sample(gpp_expo_t *t, const char *name, double v, ...) __attribute__((sentinel));

/* What the coordinator's loop thread knows of the job, borrowed for one
 * gpp_expo_job call. */
typedef struct {
    const char *state;              /* the job's state now */
    const char *const *state_names; /* [n_states] every state, for the state set */
    int n_states;
    const char *stop_reason;        /* why the job stopped before it finished; NULL: it did not */
    double start_time_s;            /* when the coordinator started, Unix seconds */
    double now_ms;                  /* gpp_now_ms(): heartbeat ages */
    gpp_registry_t *reg;            /* every agent of the cluster file */
    const gpp_coord_job_t *job;     /* NULL before planning finished */
    const gpp_progress_t *progress; /* NULL before training */
    uint64_t dropped;               /* control messages dropped as invalid */
    int job_restarts;               /* times the job was started again */
    const int *agent_restarts;      /* [ranks] restarts after the rank's agent died; NULL: none */
} gpp_expo_job_t;

/* Appends the job's metrics to t. */
void gpp_expo_job(gpp_expo_t *t, const gpp_expo_job_t *v);

/* Appends the measured schedule of the last complete iteration (what
 * /schedule serves, gpp-top's Gantt chart), one line per rank in the job:
 *
 *   # gpp-schedule/1 iteration I
 *   RANK STAGE REPLICA ITERATION_MS: CODE MS CODE MS ...
 *
 * in action order (an agent runs its actions one after another, so a
 * start is the sum of the times before it); CODE is F<mb> forward, B<mb>
 * backward, SA<mb> / SG<mb> send activations / gradients, RA<mb> / RG<mb>
 * receive (mostly waiting), AR all-reduce, ST optimizer step; times in ms.
 * Nothing but the header line before the first complete iteration. */
void gpp_expo_schedule(gpp_expo_t *t, const gpp_expo_job_t *v);

#endif
