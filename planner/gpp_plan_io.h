/* gpp_plan_io: plan files — the "gpp-plan/1" JSON the coordinator consumes
 * (writer and validating reader), the paper authors' strategy file, and a
 * Graphviz DOT picture of the stage DAG. docs/plan-format.md describes the
 * formats.
 *
 * JSON (numbers in the units the keys say):
 *   {"format":"gpp-plan/1","planner":"gpp","model":{"name":"mmt","ops":N},
 *    "devices":D,"batch":B,"micro_batch":b (0 = per-stage),
 *    "chain":true|false (a sequential plan; absent = false),"depth":P,
 *    "bottleneck_tps_ms":x,"iteration_ms":x,"throughput":samples/s,
 *    "search_ms":x,
 *    "stages":[{"id":0,"ops":[op ids],"devices":d,"first_device":id,"micro_batch":b,"k":k,
 *               "inflight":samples,"tps_ms":x,"mem_bytes":n,"succ":[ids],
 *               "dep":[the succ ids no tensor flows to; chain plans only]}],
 *    "schedule":[["F0","F1","B0",...] per stage]}
 *
 * Strategy file (two lines of space-separated integers):
 *   n_ops stage_of_op[0] ... stage_of_op[n_ops-1]
 *   n_stages (micro_batch inflight k devices) per stage
 *
 * Writers write atomically (temp file + rename). Ownership: to_* strings
 * and read/parse plans are owned by the caller (free() / gpp_plan_destroy). */
#ifndef GPP_PLAN_IO_H
#define GPP_PLAN_IO_H

#include "common/gpp_err.h"
#include "model/gpp_graph.h"
#include "planner/gpp_plan.h"

/* 1F1B plans are written as /1; plans with split backwards (zero-bubble
 * schedules: "schedule_kind", per-stage "w_delay", W tokens) as /2, which
 * older readers refuse by the format. Readers take both. */
#define GPP_PLAN_FORMAT "gpp-plan/1"
#define GPP_PLAN_FORMAT_ZB "gpp-plan/2"

char *gpp_plan_to_json(const gpp_plan_t *p);
int gpp_plan_write_json(const gpp_plan_t *p, const char *path, gpp_err_t *err);

/* Rebuilds a plan (stages, stage graph, compute schedule) against graph g,
 * lowers it (gpp_sched_lower) and validates it (C1-C4, deadlock freedom).
 * Errors name the origin, the field ("stages[2].micro_batch") and what is
 * expected; syntax errors name origin:line:col. Returns NULL on error. */
gpp_plan_t *gpp_plan_parse_json(const char *text, const char *origin, const gpp_graph_t *g,
                                gpp_err_t *err);
gpp_plan_t *gpp_plan_read_json(const char *path, const gpp_graph_t *g, gpp_err_t *err);

char *gpp_plan_to_strategy(const gpp_plan_t *p);
int gpp_plan_write_strategy(const gpp_plan_t *p, const char *path, gpp_err_t *err);

/* Stage DAG: one box per stage (ops first..last, devices, micro-batch,
 * in-flight, TPS), one arrow per stage edge labelled with the tensors
 * that cross it. */
char *gpp_plan_to_dot(const gpp_plan_t *p, const gpp_graph_t *g);
int gpp_plan_write_dot(const gpp_plan_t *p, const gpp_graph_t *g, const char *path, gpp_err_t *err);

#endif
