/* gpp_trace: a Chrome trace (the JSON that chrome://tracing and
 * ui.perfetto.dev load) built in memory and written atomically. The one
 * trace writer: the simulator's (gpp-plan --trace) and the coordinator's
 * measured trace (gpp-coordinator --trace) both go through it.
 *
 *   {"displayTimeUnit":"ms","otherData":{...},"traceEvents":[
 *     {"name":"process_name","ph":"M","pid":P,"tid":0,"args":{"name":...}},
 *     {"name":"F0","cat":"compute","ph":"X","ts":us,"dur":us,"pid":P,"tid":T,
 *      "args":{"stage":S,"mb":M}}, ...]}
 *
 * Ownership: gpp_trace_new returns an object the caller owns. */
#ifndef GPP_TRACE_H
#define GPP_TRACE_H

#include <stddef.h>

#include "common/gpp_err.h"
#include "planner/gpp_plan.h"

typedef struct gpp_trace gpp_trace_t;

gpp_trace_t *gpp_trace_new(void);
void gpp_trace_destroy(gpp_trace_t **self_p);

/* otherData fields (free-form facts about the trace). */
void gpp_trace_info_num(gpp_trace_t *t, const char *key, double value);
void gpp_trace_info_str(gpp_trace_t *t, const char *key, const char *value);
/* An array of n numbers; NAN is written as null. */
void gpp_trace_info_nums(gpp_trace_t *t, const char *key, const double *v, int n);
/* Names a process (a group of rows); sort_index orders them in the UI. */
void gpp_trace_process(gpp_trace_t *t, int pid, const char *name, int sort_index);
/* Names a row of a process. */
void gpp_trace_thread(gpp_trace_t *t, int pid, int tid, const char *name);
/* A complete span ("ph":"X") on row (pid, tid), times in microseconds; cat
 * "compute" or "comm"; stage and mb go to args (mb -1: none). */
void gpp_trace_span(gpp_trace_t *t, int pid, int tid, const char *name, const char *cat,
                    double ts_us, double dur_us, int stage, int mb);

/* Caller owns the result (free()). */
char *gpp_trace_json(const gpp_trace_t *t);
/* Atomically (common/gpp_atomic_file.h); -1 with a message naming path. */
int gpp_trace_write(const gpp_trace_t *t, const char *path, gpp_err_t *err);

/* The name both traces give an action: F<mb>, B<mb>, ALLREDUCE, STEP,
 * "send act t<op> [lo,hi) to s<stage>.<replica>", "recv grad ... from ..."
 * (t-1: a dependency without data). */
void gpp_trace_action_name(const gpp_action_t *a, char *buf, size_t len);
/* "compute" for FWD, BWD, ALLREDUCE and STEP; "comm" for sends and receives. */
const char *gpp_trace_action_cat(const gpp_action_t *a);

#endif
