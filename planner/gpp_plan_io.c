/* gpp_plan_io: "gpp-plan/1" and "/2" JSON writer and validating reader, strategy
 * file and DOT writers. */
#include "planner/gpp_plan_io.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "common/gpp_json.h"
#include "planner/gpp_sched.h"

/* ---- writers ------------------------------------------------------------- */

static cJSON *s_int_array(const int *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

char *gpp_plan_to_json(const gpp_plan_t *p)
{
    cJSON *root = cJSON_CreateObject();
    int zb = p->schedule != GPP_SCHED_1F1B;
    cJSON_AddStringToObject(root, "format", zb ? GPP_PLAN_FORMAT_ZB : GPP_PLAN_FORMAT);
    cJSON_AddStringToObject(root, "planner", p->planner);
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "name", p->model);
    cJSON_AddNumberToObject(model, "ops", p->model_ops);
    cJSON_AddNumberToObject(root, "devices", p->n_devices);
    cJSON_AddNumberToObject(root, "batch", p->batch);
    cJSON_AddNumberToObject(root, "micro_batch", p->micro_batch);
    cJSON_AddBoolToObject(root, "chain", p->chain);
    cJSON_AddNumberToObject(root, "depth", p->depth);
    cJSON_AddNumberToObject(root, "bottleneck_tps_ms", p->bottleneck_tps_ms);
    cJSON_AddNumberToObject(root, "iteration_ms", p->iteration_ms);
    cJSON_AddNumberToObject(root, "throughput", p->throughput);
    cJSON_AddNumberToObject(root, "search_ms", p->search_ms);
    if (zb)
        cJSON_AddStringToObject(root, "schedule_kind", gpp_sched_kind_name(p->schedule));
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    cJSON *sched = cJSON_CreateArray();
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", st->id);
        cJSON_AddItemToObject(o, "ops", s_int_array(st->ops, st->n_ops));
        cJSON_AddNumberToObject(o, "devices", st->devices);
        cJSON_AddNumberToObject(o, "first_device", st->first_device);
        cJSON_AddNumberToObject(o, "micro_batch", st->micro_batch);
        cJSON_AddNumberToObject(o, "k", st->k);
        cJSON_AddNumberToObject(o, "inflight", st->inflight);
        if (zb)
            cJSON_AddNumberToObject(o, "w_delay", st->w_delay);
        cJSON_AddNumberToObject(o, "tps_ms", st->tps_ms);
        cJSON_AddNumberToObject(o, "mem_bytes", (double)st->mem_bytes);
        cJSON_AddItemToObject(o, "succ", s_int_array(st->succ, st->n_succ));
        if (p->chain) { /* the successors no tensor flows to: chain dependencies */
            cJSON *dep = cJSON_AddArrayToObject(o, "dep");
            for (int k = 0; k < st->n_succ; k++)
                if (st->succ_dep[k])
                    cJSON_AddItemToArray(dep, cJSON_CreateNumber(st->succ[k]));
        }
        cJSON_AddItemToArray(stages, o);
        cJSON *order = cJSON_CreateArray();
        for (int i = 0; i < st->compute.n; i++) {
            char buf[24];
            gpp_act_type_t t = st->compute.a[i].type;
            snprintf(buf, sizeof buf, "%c%d",
                     t == GPP_ACT_FWD     ? 'F'
                     : t == GPP_ACT_BWD_W ? 'W'
                                          : 'B',
                     st->compute.a[i].mb);
            cJSON_AddItemToArray(order, cJSON_CreateString(buf));
        }
        cJSON_AddItemToArray(sched, order);
    }
    cJSON_AddItemToObject(root, "schedule", sched);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(text);
    char *out = gpp_xrealloc(text, n + 2); /* end with a newline */
    out[n] = '\n';
    out[n + 1] = 0;
    return out;
}

static int s_write_string(char *text, const char *path, gpp_err_t *err)
{
    int rc = gpp_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return rc;
}

int gpp_plan_write_json(const gpp_plan_t *p, const char *path, gpp_err_t *err)
{
    return s_write_string(gpp_plan_to_json(p), path, err);
}

/* A growable string for the text formats. */
typedef struct {
    char *s;
    size_t n, cap;
} s_buf_t;

static void s_printf(s_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void s_printf(s_buf_t *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0)
            w = 0;
        if (b->s && b->n + (size_t)w < b->cap) {
            b->n += (size_t)w;
            return;
        }
        b->cap = 2 * (b->cap + (size_t)w + 64);
        b->s = gpp_xrealloc(b->s, b->cap);
    }
}

char *gpp_plan_to_strategy(const gpp_plan_t *p)
{
    s_buf_t b = {0};
    s_printf(&b, "%d", p->model_ops);
    for (int i = 0; i < p->model_ops; i++)
        s_printf(&b, " %d", p->stage_of_op[i]);
    s_printf(&b, "\n%d", p->n_stages);
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        s_printf(&b, " %d %d %d %d", st->micro_batch, st->inflight, st->k, st->devices);
    }
    s_printf(&b, "\n");
    return b.s;
}

int gpp_plan_write_strategy(const gpp_plan_t *p, const char *path, gpp_err_t *err)
{
    return s_write_string(gpp_plan_to_strategy(p), path, err);
}

/* An op name inside a DOT string: quotes and backslashes escaped. */
static const char *s_dot_str(const char *name, char *buf, size_t n)
{
    size_t k = 0;
    for (const char *c = name; *c && k + 3 < n; c++) {
        if (*c == '"' || *c == '\\')
            buf[k++] = '\\';
        buf[k++] = *c;
    }
    buf[k] = 0;
    return buf;
}

char *gpp_plan_to_dot(const gpp_plan_t *p, const gpp_graph_t *g)
{
    char e1[2 * GPP_NAME_LEN + 4], e2[2 * GPP_NAME_LEN + 4];
    s_buf_t b = {0};
    s_dot_str(p->model, e1, sizeof e1);
    s_printf(&b,
             "digraph \"%s\" {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n"
             "  label=\"%s plan of %s: %d stages, depth %d, %d devices, batch %d\";\n",
             e1, p->planner, e1, p->n_stages, p->depth, p->n_devices, p->batch);
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        s_printf(&b,
                 "  s%d [label=\"S%d: %d ops\\n%s .. %s\\ndevices %d-%d  b=%d  k=%d\\n"
                 "in-flight %d  TPS %.4f ms\"];\n",
                 s, s, st->n_ops, s_dot_str(g->ops[st->ops[0]].name, e1, sizeof e1),
                 s_dot_str(g->ops[st->ops[st->n_ops - 1]].name, e2, sizeof e2), st->first_device,
                 st->first_device + st->devices - 1, st->micro_batch, st->k, st->inflight,
                 st->tps_ms);
    }
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        for (int k = 0; k < st->n_succ; k++) {
            int t = st->succ[k], n = 0;
            if (st->succ_dep && st->succ_dep[k]) {
                s_printf(&b, "  s%d -> s%d [style=dashed, label=\"dep\"];\n", s, t);
                continue;
            }
            s_printf(&b, "  s%d -> s%d [label=\"", s, t);
            /* tensors of stage s read by stage t */
            for (int i = 0; i < st->n_ops; i++) {
                const gpp_op_t *op = &g->ops[st->ops[i]];
                for (int c = 0; c < op->n_outputs; c++)
                    if (p->stage_of_op[op->outputs[c]] == t) {
                        s_printf(&b, "%s%s", n++ ? "\\n" : "", s_dot_str(op->name, e1, sizeof e1));
                        break;
                    }
            }
            s_printf(&b, "\"];\n");
        }
    }
    s_printf(&b, "}\n");
    return b.s;
}

int gpp_plan_write_dot(const gpp_plan_t *p, const gpp_graph_t *g, const char *path, gpp_err_t *err)
{
    return s_write_string(gpp_plan_to_dot(p, g), path, err);
}

/* ---- reader ---------------------------------------------------------------- */

/* Required integer field in [lo, hi]. */
static int s_int(const cJSON *o, const char *key, const char *origin, const char *where, int64_t lo,
                 int64_t hi, int64_t *out, gpp_err_t *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        return gpp_err_set(err, "%s: %s: missing field '%s'", origin, where, key);
    /* the range first (and below 2^63): converting a double outside
     * int64's range is undefined */
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= (double)lo && v->valuedouble <= (double)hi) ||
        !(fabs(v->valuedouble) < 9.2e18) || v->valuedouble != (double)(int64_t)v->valuedouble)
        return gpp_err_set(err, "%s: %s.%s: expected an integer in [%lld, %lld]", origin, where,
                           key, (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return 0;
}

/* Required non-negative number. */
static int s_num(const cJSON *o, const char *key, const char *origin, const char *where,
                 double *out, gpp_err_t *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v)
        return gpp_err_set(err, "%s: %s: missing field '%s'", origin, where, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0))
        return gpp_err_set(err, "%s: %s.%s: expected a non-negative number", origin, where, key);
    *out = v->valuedouble;
    return 0;
}

/* Required array of integers in [lo, hi]; caller owns *out. */
static int s_int_list(const cJSON *o, const char *key, const char *origin, const char *where,
                      int lo, int hi, int **out, int *n, gpp_err_t *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a))
        return gpp_err_set(err, "%s: %s.%s: expected an array of integers", origin, where, key);
    *n = cJSON_GetArraySize(a);
    *out = gpp_xcalloc((size_t)*n + 1, sizeof(int));
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a)
    {
        /* the range first: converting a double outside int's range is undefined */
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
            v->valuedouble != (double)(int)v->valuedouble) {
            free(*out);
            *out = NULL;
            return gpp_err_set(err, "%s: %s.%s[%d]: expected an integer in [%d, %d]", origin, where,
                               key, i, lo, hi);
        }
        (*out)[i++] = (int)v->valuedouble;
    }
    return 0;
}

static int s_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Parses "F12" / "B3" / "W3" into stage.compute: B is a whole backward in
 * a 1F1B plan, the input gradients in a zero-bubble one (`zb`), where W
 * passes may come. */
static int s_parse_schedule(const cJSON *order, gpp_stage_t *st, int zb, const char *origin, int js,
                            gpp_err_t *err)
{
    if (!cJSON_IsArray(order))
        return gpp_err_set(err, "%s: schedule[%d]: expected an array of \"F<mb>\"/\"B<mb>\"",
                           origin, js);
    gpp_actions_clear(&st->compute);
    int i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, order)
    {
        const char *s = cJSON_GetStringValue(v);
        char *end = NULL;
        long mb = -1;
        if (s && (s[0] == 'F' || s[0] == 'B' || s[0] == 'W') && s[1] >= '0' && s[1] <= '9')
            mb = strtol(s + 1, &end, 10);
        if (mb < 0 || mb > INT_MAX || !end || *end)
            return gpp_err_set(err, "%s: schedule[%d][%d]: expected \"F<mb>\"%s or \"B<mb>\"",
                               origin, js, i, zb ? ", \"W<mb>\"" : "");
        if (s[0] == 'W' && !zb)
            return gpp_err_set(err,
                               "%s: schedule[%d][%d]: a W pass in a 1F1B plan; a zero-bubble "
                               "plan is format %s with \"schedule_kind\"",
                               origin, js, i, GPP_PLAN_FORMAT_ZB);
        gpp_action_t a = {.type = s[0] == 'F'   ? GPP_ACT_FWD
                                  : s[0] == 'W' ? GPP_ACT_BWD_W
                                  : zb          ? GPP_ACT_BWD_IN
                                                : GPP_ACT_BWD,
                          .mb = (int)mb,
                          .peer_stage = -1,
                          .peer_replica = -1,
                          .tensor = -1};
        gpp_actions_push(&st->compute, a);
        i++;
    }
    return 0;
}

gpp_plan_t *gpp_plan_parse_json(const char *text, const char *origin, const gpp_graph_t *g,
                                gpp_err_t *err)
{
    gpp_plan_t *p = NULL;
    int *ops = NULL, *succ = NULL, *json_of_op = NULL, *new_of_json = NULL;
    int n_ops = 0, n_succ = 0;
    char where[64];
    cJSON *root = gpp_json_parse(text, origin, err);
    if (!root)
        return NULL;
    if (!cJSON_IsObject(root)) {
        gpp_err_set(err, "%s: expected a JSON object with \"format\":\"%s\"", origin,
                    GPP_PLAN_FORMAT);
        goto fail;
    }
    const char *fmt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "format"));
    int zb = fmt && strcmp(fmt, GPP_PLAN_FORMAT_ZB) == 0;
    if (!fmt || (strcmp(fmt, GPP_PLAN_FORMAT) != 0 && !zb)) {
        gpp_err_set(err, "%s: format '%s' is not '%s' or '%s'; write plans with gpp-plan --json",
                    origin, fmt ? fmt : "(missing)", GPP_PLAN_FORMAT, GPP_PLAN_FORMAT_ZB);
        goto fail;
    }
    gpp_sched_kind_t kind = GPP_SCHED_1F1B;
    const cJSON *jkind = cJSON_GetObjectItemCaseSensitive(root, "schedule_kind");
    if (jkind || zb) {
        unsigned mask = 0;
        gpp_err_t e2 = {{0}};
        const char *word = cJSON_GetStringValue(jkind);
        if (!word || gpp_sched_kind_parse(word, "schedule_kind", &mask, &e2) < 0 ||
            mask == GPP_SCHED_AUTO || (mask == 1u << GPP_SCHED_1F1B) == zb) {
            gpp_err_set(err,
                        "%s: schedule_kind: expected %s for format %s (a plan's schedule, not "
                        "auto)",
                        origin, zb ? "\"zb-h1\" or \"zb-h2\"" : "\"1f1b\"", fmt);
            goto fail;
        }
        while (!(mask >> kind & 1))
            kind++;
    }
    const char *planner = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "planner"));
    if (!planner || (strcmp(planner, "gpp") != 0 && strcmp(planner, "spp") != 0)) {
        gpp_err_set(err, "%s: planner: expected \"gpp\" or \"spp\"", origin);
        goto fail;
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mname = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(model, "name"));
    int64_t mops = 0, devices = 0, batch = 0, mbs = 0, depth = 0;
    if (!mname) {
        gpp_err_set(err, "%s: model.name: expected a string", origin);
        goto fail;
    }
    if (s_int(model, "ops", origin, "model", 1, INT_MAX, &mops, err) < 0)
        goto fail;
    if (strcmp(mname, g->name) != 0 || mops != g->n_ops) {
        gpp_err_set(err,
                    "%s: the plan is for model '%s' with %lld ops, but the graph is '%s' "
                    "with %d ops; plan this model again",
                    origin, mname, (long long)mops, g->name, g->n_ops);
        goto fail;
    }
    if (s_int(root, "devices", origin, "plan", 1, INT_MAX, &devices, err) < 0 ||
        s_int(root, "batch", origin, "plan", 1, INT_MAX, &batch, err) < 0 ||
        s_int(root, "micro_batch", origin, "plan", 0, INT_MAX, &mbs, err) < 0 ||
        s_int(root, "depth", origin, "plan", 1, INT_MAX, &depth, err) < 0)
        goto fail;
    p = gpp_plan_new(planner, g, (int)devices, (int)batch);
    p->micro_batch = (int)mbs;
    p->schedule = kind;
    /* "chain" is absent in files written before chain plans: those plans keep
       the data edges only, as they were planned and run */
    const cJSON *chain = cJSON_GetObjectItemCaseSensitive(root, "chain");
    if (chain && !cJSON_IsBool(chain)) {
        gpp_err_set(err, "%s: chain: expected true or false", origin);
        goto fail;
    }
    p->chain = chain ? cJSON_IsTrue(chain) : 0;
    if (s_num(root, "bottleneck_tps_ms", origin, "plan", &p->bottleneck_tps_ms, err) < 0 ||
        s_num(root, "iteration_ms", origin, "plan", &p->iteration_ms, err) < 0 ||
        s_num(root, "throughput", origin, "plan", &p->throughput, err) < 0 ||
        s_num(root, "search_ms", origin, "plan", &p->search_ms, err) < 0)
        goto fail;
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(root, "stages");
    const cJSON *sched = cJSON_GetObjectItemCaseSensitive(root, "schedule");
    int S = cJSON_IsArray(stages) ? cJSON_GetArraySize(stages) : 0;
    if (S < 1) {
        gpp_err_set(err, "%s: stages: expected a non-empty array", origin);
        goto fail;
    }
    if (!cJSON_IsArray(sched) || cJSON_GetArraySize(sched) != S) {
        gpp_err_set(err, "%s: schedule: expected an array with one order per stage (%d)", origin,
                    S);
        goto fail;
    }
    json_of_op = gpp_xcalloc((size_t)g->n_ops, sizeof(int));
    for (int js = 0; js < S; js++) {
        const cJSON *o = cJSON_GetArrayItem(stages, js);
        int64_t id = 0, dev = 0, mb = 0, k = 0, inflight = 0;
        double mem = 0;
        snprintf(where, sizeof where, "stages[%d]", js);
        if (!cJSON_IsObject(o)) {
            gpp_err_set(err, "%s: %s: expected an object", origin, where);
            goto fail;
        }
        if (s_int(o, "id", origin, where, js, js, &id, err) < 0 ||
            s_int(o, "devices", origin, where, 1, devices, &dev, err) < 0 ||
            s_int(o, "micro_batch", origin, where, 1, batch, &mb, err) < 0 ||
            s_int(o, "k", origin, where, 1, batch, &k, err) < 0 ||
            s_int(o, "inflight", origin, where, 0, batch, &inflight, err) < 0 ||
            s_num(o, "mem_bytes", origin, where, &mem, err) < 0)
            goto fail;
        if (mem >= 9.2e18) { /* int64 bytes: the conversion below must be defined */
            gpp_err_set(err, "%s: %s.mem_bytes: %g bytes is beyond any device; expected < 2^63",
                        origin, where, mem);
            goto fail;
        }
        if (s_int_list(o, "ops", origin, where, 0, g->n_ops - 1, &ops, &n_ops, err) < 0)
            goto fail;
        if (n_ops < 1) {
            gpp_err_set(err, "%s: %s.ops: a stage holds one or more ops", origin, where);
            goto fail;
        }
        qsort(ops, (size_t)n_ops, sizeof(int), s_cmp_int);
        for (int i = 0; i < n_ops; i++)
            json_of_op[ops[i]] = js;
        gpp_stage_t *st = gpp_plan_add_stage(p, n_ops, ops);
        free(ops);
        ops = NULL;
        st->devices = (int)dev;
        st->micro_batch = (int)mb;
        st->k = (int)k;
        st->inflight = (int)inflight;
        st->mem_bytes = (int64_t)mem;
        if (s_num(o, "tps_ms", origin, where, &st->tps_ms, err) < 0)
            goto fail;
        if (zb) {
            int64_t d = 0;
            if (s_int(o, "w_delay", origin, where, 0, batch / mb, &d, err) < 0)
                goto fail;
            st->w_delay = (int)d;
        }
    }
    if (gpp_plan_link(p, g, err) < 0) {
        gpp_err_prefix(err, "%s", origin);
        goto fail;
    }
    /* the stage graph derived from the ops must be the one the file states */
    new_of_json = gpp_xcalloc((size_t)S, sizeof(int));
    for (int s = 0; s < S; s++)
        new_of_json[json_of_op[p->stages[s].ops[0]]] = s;
    for (int s = 0; s < S; s++) {
        gpp_stage_t *st = &p->stages[s];
        int js = json_of_op[st->ops[0]];
        const cJSON *o = cJSON_GetArrayItem(stages, js);
        snprintf(where, sizeof where, "stages[%d]", js);
        if (s_int_list(o, "succ", origin, where, 0, S - 1, &succ, &n_succ, err) < 0)
            goto fail;
        for (int i = 0; i < n_succ; i++)
            succ[i] = new_of_json[succ[i]];
        qsort(succ, (size_t)n_succ, sizeof(int), s_cmp_int);
        if (n_succ != st->n_succ || memcmp(succ, st->succ, (size_t)n_succ * sizeof(int)) != 0) {
            gpp_err_set(err,
                        "%s: %s.succ does not match the stage edges its ops' graph edges "
                        "give (C2)",
                        origin, where);
            goto fail;
        }
        free(succ);
        succ = NULL;
        if (p->chain && cJSON_GetObjectItemCaseSensitive(o, "dep")) {
            if (s_int_list(o, "dep", origin, where, 0, S - 1, &succ, &n_succ, err) < 0)
                goto fail;
            int n_dep = 0, ok = 1;
            for (int k = 0; k < st->n_succ; k++)
                n_dep += st->succ_dep[k];
            for (int i = 0; i < n_succ; i++) {
                int t = new_of_json[succ[i]], hit = 0;
                for (int k = 0; k < st->n_succ; k++)
                    hit |= st->succ[k] == t && st->succ_dep[k];
                ok &= hit;
            }
            if (!ok || n_succ != n_dep) {
                gpp_err_set(err,
                            "%s: %s.dep must list exactly the successors no tensor flows to "
                            "(%d of them)",
                            origin, where, n_dep);
                goto fail;
            }
            free(succ);
            succ = NULL;
        }
        /* placement: gpp_plan_link numbers devices consecutively; the file
           may place stages node-aligned (gpp_plan_place) */
        if (cJSON_GetObjectItemCaseSensitive(o, "first_device")) {
            int64_t first = 0;
            if (s_int(o, "first_device", origin, where, 0, devices - 1, &first, err) < 0)
                goto fail;
            st->first_device = (int)first;
        }
        if (s_parse_schedule(cJSON_GetArrayItem(sched, js), st, zb, origin, js, err) < 0)
            goto fail;
    }
    if (depth != p->depth) {
        gpp_err_set(err, "%s: depth %lld, but the stage graph's longest path has %d stages", origin,
                    (long long)depth, p->depth);
        goto fail;
    }
    if (gpp_sched_lower(p, g, err) < 0 || gpp_sched_validate(p, g, err) < 0) {
        gpp_err_prefix(err, "%s", origin);
        goto fail;
    }
    cJSON_Delete(root);
    free(json_of_op);
    free(new_of_json);
    return p;
fail:
    cJSON_Delete(root);
    free(ops);
    free(succ);
    free(json_of_op);
    free(new_of_json);
    gpp_plan_destroy(&p);
    return NULL;
}

gpp_plan_t *gpp_plan_read_json(const char *path, const gpp_graph_t *g, gpp_err_t *err)
{
    char *text = gpp_read_file(path, (size_t)256 << 20, err);
    if (!text)
        return NULL;
    gpp_plan_t *p = gpp_plan_parse_json(text, path, g, err);
    free(text);
    return p;
}
