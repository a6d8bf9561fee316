/* gpp_trace: Chrome trace JSON built in memory with cJSON. */
#include "planner/gpp_trace.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/gpp_json.h"

struct gpp_trace {
    cJSON *root;
    cJSON *other;  /* root.otherData */
    cJSON *events; /* root.traceEvents */
};

gpp_trace_t *gpp_trace_new(void)
{
    gpp_trace_t *t = gpp_xcalloc(1, sizeof *t);
    t->root = cJSON_CreateObject();
    cJSON_AddStringToObject(t->root, "displayTimeUnit", "ms");
    t->other = cJSON_AddObjectToObject(t->root, "otherData");
    t->events = cJSON_AddArrayToObject(t->root, "traceEvents");
    assert(t->root && t->other && t->events);
    return t;
}

void gpp_trace_destroy(gpp_trace_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    cJSON_Delete((*self_p)->root);
    free(*self_p);
    *self_p = NULL;
}

void gpp_trace_info_num(gpp_trace_t *t, const char *key, double value)
{
    cJSON_AddNumberToObject(t->other, key, value);
}

void gpp_trace_info_str(gpp_trace_t *t, const char *key, const char *value)
{
    cJSON_AddStringToObject(t->other, key, value);
}

void gpp_trace_info_nums(gpp_trace_t *t, const char *key, const double *v, int n)
{
    cJSON *a = cJSON_AddArrayToObject(t->other, key);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, isnan(v[i]) ? cJSON_CreateNull() : cJSON_CreateNumber(v[i]));
}

static cJSON *s_meta(gpp_trace_t *t, const char *what, int pid, int tid)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", what);
    cJSON_AddStringToObject(e, "ph", "M");
    cJSON_AddNumberToObject(e, "pid", pid);
    cJSON_AddNumberToObject(e, "tid", tid);
    cJSON_AddItemToArray(t->events, e);
    return cJSON_AddObjectToObject(e, "args");
}

void gpp_trace_process(gpp_trace_t *t, int pid, const char *name, int sort_index)
{
    cJSON_AddStringToObject(s_meta(t, "process_name", pid, 0), "name", name);
    cJSON_AddNumberToObject(s_meta(t, "process_sort_index", pid, 0), "sort_index", sort_index);
}

void gpp_trace_thread(gpp_trace_t *t, int pid, int tid, const char *name)
{
    cJSON_AddStringToObject(s_meta(t, "thread_name", pid, tid), "name", name);
}

void gpp_trace_span(gpp_trace_t *t, int pid, int tid, const char *name, const char *cat,
                    double ts_us, double dur_us, int stage, int mb)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", name);
    cJSON_AddStringToObject(e, "cat", cat);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "ts", ts_us);
    cJSON_AddNumberToObject(e, "dur", dur_us);
    cJSON_AddNumberToObject(e, "pid", pid);
    cJSON_AddNumberToObject(e, "tid", tid);
    cJSON *args = cJSON_AddObjectToObject(e, "args");
    cJSON_AddNumberToObject(args, "stage", stage);
    cJSON_AddNumberToObject(args, "mb", mb);
    cJSON_AddItemToArray(t->events, e);
}

char *gpp_trace_json(const gpp_trace_t *t)
{
    return cJSON_PrintUnformatted(t->root);
}

int gpp_trace_write(const gpp_trace_t *t, const char *path, gpp_err_t *err)
{
    char *json = gpp_trace_json(t);
    int rc = gpp_write_file_atomic(path, json, strlen(json), err);
    free(json);
    return rc;
}

void gpp_trace_action_name(const gpp_action_t *a, char *buf, size_t len)
{
    switch (a->type) {
    case GPP_ACT_FWD:
    case GPP_ACT_BWD:
    case GPP_ACT_BWD_IN:
    case GPP_ACT_BWD_W:
        snprintf(buf, len, "%c%d",
                 a->type == GPP_ACT_FWD     ? 'F'
                 : a->type == GPP_ACT_BWD_W ? 'W'
                                            : 'B',
                 a->mb);
        return;
    case GPP_ACT_ALLREDUCE:
        snprintf(buf, len, "ALLREDUCE");
        return;
    case GPP_ACT_STEP:
        snprintf(buf, len, "STEP");
        return;
    default: {
        int send = a->type == GPP_ACT_SEND_ACT || a->type == GPP_ACT_SEND_GRAD;
        int act = a->type == GPP_ACT_SEND_ACT || a->type == GPP_ACT_RECV_ACT;
        snprintf(buf, len, "%s %s t%d [%lld,%lld) %s s%d.%d", send ? "send" : "recv",
                 act ? "act" : "grad", a->tensor, (long long)a->lo, (long long)a->hi,
                 send ? "to" : "from", a->peer_stage, a->peer_replica);
        return;
    }
    }
}

const char *gpp_trace_action_cat(const gpp_action_t *a)
{
    return a->type >= GPP_ACT_SEND_ACT && a->type <= GPP_ACT_RECV_GRAD ? "comm" : "compute";
}
