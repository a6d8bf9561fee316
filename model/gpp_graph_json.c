/* gpp_graph_json: "gpp-graph/1" JSON read and write, so users can plan
 * their own models. Op types and their attributes are the op table's
 * (gpp_optable.h). Errors name the origin (file[:line:col]), the op and the
 * field. */
#include "common/gpp_json.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GRAPH_FORMAT "gpp-graph/1"

char *gpp_read_file(const char *path, size_t max_bytes, gpp_err_t *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        gpp_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = gpp_xcalloc(cap + 1, 1);
    for (;;) {
        if (n == cap) {
            if (cap >= max_bytes) {
                gpp_err_set(err, "%s: larger than %zu bytes", path, max_bytes);
                free(buf);
                fclose(f);
                return NULL;
            }
            cap *= 2;
            buf = gpp_xrealloc(buf, cap + 1);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        gpp_err_set(err, "%s: read error", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

cJSON *gpp_json_parse(const char *text, const char *origin, gpp_err_t *err)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        int line = 1, col = 1;
        for (const char *p = text; at && p < at && *p; p++) {
            if (*p == '\n')
                line++, col = 1;
            else
                col++;
        }
        gpp_err_set(err, "%s:%d:%d: malformed JSON near '%.20s'", origin, line, col,
                    at && *at ? at : "<end of input>");
    }
    return root;
}

/* Reads the op's attributes of its type from its JSON object (absent
 * optional ones take their default). Ranges are checked by finalize. */
static int s_get_attrs(const cJSON *o, gpp_op_t *op, const char *origin, gpp_err_t *err)
{
    const gpp_op_info_t *T = &gpp_optable[op->type];
    for (int i = 0; i < T->n_attrs; i++) {
        const gpp_attr_t *a = &T->attrs[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a->name);
        double x = (double)a->def;
        if (!v && a->required)
            return gpp_err_set(err, "%s: op '%s': field '%s' is required for %s ops", origin,
                               op->name, a->name, T->name);
        if (v && a->labels) {
            int k = -1;
            for (int j = 0; cJSON_IsString(v) && a->labels[j]; j++)
                if (strcmp(v->valuestring, a->labels[j]) == 0)
                    k = j;
            if (k < 0)
                return gpp_err_set(err, "%s: op '%s': field '%s' must be \"%s\" or \"%s\"", origin,
                                   op->name, a->name, a->labels[0], a->labels[1]);
            x = k;
        } else if (v && a->type == GPP_ATTR_NUM) {
            if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0))
                return gpp_err_set(err, "%s: op '%s': field '%s' must be a non-negative number",
                                   origin, op->name, a->name);
            x = v->valuedouble;
        } else if (v) {
            /* integers beyond 2^53 are not exact in JSON's doubles; an int field holds
             * less */
            double lim = a->type == GPP_ATTR_INT ? (double)INT_MAX : 9007199254740992.0;
            if (!cJSON_IsNumber(v) || fabs(v->valuedouble) > lim ||
                v->valuedouble != floor(v->valuedouble))
                return gpp_err_set(err, "%s: op '%s': field '%s' must be an integer", origin,
                                   op->name, a->name);
            x = v->valuedouble;
        }
        gpp_op_attr_set(op, a, x);
    }
    return 0;
}

typedef struct {
    int64_t file_id;
    const cJSON *obj;
    int new_id; /* -1 until placed */
} json_op_t;

gpp_graph_t *gpp_graph_parse_json(const char *text, const char *origin, gpp_err_t *err)
{
    gpp_graph_t *g = NULL;
    json_op_t *jo = NULL;
    int *ins = NULL;
    cJSON *root = gpp_json_parse(text, origin, err);
    if (!root)
        return NULL;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, GRAPH_FORMAT) != 0) {
        gpp_err_set(err, "%s: field 'format' must be \"" GRAPH_FORMAT "\" (is this a graph file? "
                         "a profile.json goes to --profile)",
                    origin);
        goto fail;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "ops");
    if (!cJSON_IsArray(ops) || cJSON_GetArraySize(ops) == 0) {
        gpp_err_set(err, "%s: field 'ops' must be a non-empty array", origin);
        goto fail;
    }
    int n = cJSON_GetArraySize(ops);
    jo = gpp_xcalloc((size_t)n, sizeof *jo);
    int i = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, ops)
    {
        char where[64];
        snprintf(where, sizeof where, "#%d", i);
        if (!cJSON_IsObject(o)) {
            gpp_err_set(err, "%s: ops[%d] must be an object", origin, i);
            goto fail;
        }
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
        /* below 2^63 first: converting a double outside int64's range is undefined */
        if (!cJSON_IsNumber(id) || !(fabs(id->valuedouble) < 9.2e18) ||
            id->valuedouble != (double)(int64_t)id->valuedouble) {
            gpp_err_set(err, "%s: ops[%d]: field 'id' must be an integer", origin, i);
            goto fail;
        }
        jo[i].file_id = (int64_t)id->valuedouble;
        jo[i].obj = o;
        jo[i].new_id = -1;
        for (int k = 0; k < i; k++)
            if (jo[k].file_id == jo[i].file_id) {
                gpp_err_set(err, "%s: ops[%d] and ops[%d] share id %lld", origin, k, i,
                            (long long)jo[i].file_id);
                goto fail;
            }
        i++;
    }
    g = gpp_graph_new(cJSON_IsString(name) ? name->valuestring : origin);
    snprintf(g->spec, sizeof g->spec, "%s", origin);
    /* place ops in topological order: repeatedly take the first op whose
       inputs are all placed (stable: keeps file order when it is already
       topological) */
    int placed = 0;
    while (placed < n) {
        int progress = 0;
        for (int k = 0; k < n; k++) {
            if (jo[k].new_id >= 0)
                continue;
            const cJSON *o2 = jo[k].obj;
            const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o2, "name");
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o2, "type");
            const cJSON *in = cJSON_GetObjectItemCaseSensitive(o2, "inputs");
            char opname[GPP_NAME_LEN];
            snprintf(opname, sizeof opname, "%s",
                     cJSON_IsString(nm) ? nm->valuestring : "(unnamed)");
            if (!cJSON_IsString(nm) || !nm->valuestring[0] ||
                strlen(nm->valuestring) >= GPP_NAME_LEN) {
                gpp_err_set(err, "%s: op id %lld: field 'name' must be a string of 1..%d chars",
                            origin, (long long)jo[k].file_id, GPP_NAME_LEN - 1);
                goto fail;
            }
            int type = cJSON_IsString(ty) ? gpp_op_type_parse(ty->valuestring) : -1;
            if (type < 0) {
                char names[1024] = "";
                for (int t = 0; t < GPP_OP__COUNT; t++) {
                    size_t u = strlen(names);
                    snprintf(names + u, sizeof names - u, "%s%s", t ? ", " : "",
                             gpp_optable[t].name);
                }
                gpp_err_set(err, "%s: op '%s': field 'type' must be one of %s", origin, opname,
                            names);
                goto fail;
            }
            if (in && !cJSON_IsArray(in)) {
                gpp_err_set(err, "%s: op '%s': field 'inputs' must be an array of op ids", origin,
                            opname);
                goto fail;
            }
            int nin = in ? cJSON_GetArraySize(in) : 0, ready = 1;
            free(ins);
            ins = gpp_xcalloc((size_t)(nin ? nin : 1), sizeof(int));
            int q = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, in)
            {
                int found = -1;
                if (cJSON_IsNumber(x))
                    for (int m = 0; m < n; m++)
                        if ((double)jo[m].file_id == x->valuedouble)
                            found = m;
                if (found < 0) {
                    gpp_err_set(err, "%s: op '%s': input %d refers to no op id in this file",
                                origin, opname, q);
                    goto fail;
                }
                if (found == k) {
                    gpp_err_set(err, "%s: op '%s' lists itself as an input", origin, opname);
                    goto fail;
                }
                if (jo[found].new_id < 0)
                    ready = 0;
                ins[q++] = jo[found].new_id;
            }
            if (!ready)
                continue;
            int id = gpp_graph_add(g, (gpp_op_type_t)type, opname, nin, ins);
            gpp_op_t *op = gpp_graph_op(g, id);
            if (s_get_attrs(o2, op, origin, err))
                goto fail;
            jo[k].new_id = id;
            placed++;
            progress = 1;
        }
        if (!progress) {
            for (int k = 0; k < n; k++)
                if (jo[k].new_id < 0) {
                    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(jo[k].obj, "name");
                    gpp_err_set(err, "%s: the ops form a cycle through op id %lld '%s'; a model "
                                     "graph must be acyclic",
                                origin, (long long)jo[k].file_id,
                                cJSON_IsString(nm) ? nm->valuestring : "?");
                    break;
                }
            goto fail;
        }
    }
    if (gpp_graph_finalize(g, err)) {
        gpp_err_prefix(err, "%s", origin);
        goto fail;
    }
    const cJSON *wf = cJSON_GetObjectItemCaseSensitive(root, "weights");
    if (wf) { /* initial weights under torch's names, beside the graph file */
        char wpath[4096];
        const char *slash = strrchr(origin, '/');
        if (!cJSON_IsString(wf) || !*wf->valuestring) {
            gpp_err_set(err, "%s: field 'weights' must be the path of a safetensors file", origin);
            goto fail;
        }
        if (wf->valuestring[0] == '/' || !slash)
            snprintf(wpath, sizeof wpath, "%s", wf->valuestring);
        else
            snprintf(wpath, sizeof wpath, "%.*s/%s", (int)(slash - origin), origin,
                     wf->valuestring);
        if (gpp_graph_load_weights(g, wpath, err) < 0) {
            gpp_err_prefix(err, "%s: weights", origin);
            goto fail;
        }
    }
    free(ins);
    free(jo);
    cJSON_Delete(root);
    return g;
fail:
    free(ins);
    free(jo);
    gpp_graph_destroy(&g);
    cJSON_Delete(root);
    return NULL;
}

gpp_graph_t *gpp_graph_read_json(const char *path, gpp_err_t *err)
{
    char *text = gpp_read_file(path, (size_t)1 << 30, err);
    if (!text)
        return NULL;
    gpp_graph_t *g = gpp_graph_parse_json(text, path, err);
    free(text);
    return g;
}

char *gpp_graph_to_json(const gpp_graph_t *g)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", GRAPH_FORMAT);
    cJSON_AddStringToObject(root, "name", g->name);
    cJSON_AddStringToObject(root, "spec", g->spec);
    cJSON *ops = cJSON_AddArrayToObject(root, "ops");
    for (int i = 0; i < g->n_ops; i++) {
        const gpp_op_t *op = &g->ops[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", op->id);
        cJSON_AddStringToObject(o, "name", op->name);
        cJSON_AddStringToObject(o, "type", gpp_op_type_name(op->type));
        cJSON *in = cJSON_AddArrayToObject(o, "inputs");
        for (int k = 0; k < op->n_inputs; k++)
            cJSON_AddItemToArray(in, cJSON_CreateNumber(op->inputs[k]));
        const gpp_op_info_t *T = &gpp_optable[op->type];
        for (int k = 0; k < T->n_attrs; k++) {
            const gpp_attr_t *a = &T->attrs[k];
            double v = gpp_op_attr_get(op, a);
            if (a->labels)
                cJSON_AddStringToObject(o, a->name, a->labels[(int)v]);
            else
                cJSON_AddNumberToObject(o, a->name, v);
        }
        cJSON_AddItemToArray(ops, o);
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

int gpp_graph_write_json(const gpp_graph_t *g, const char *path, gpp_err_t *err)
{
    char *s = gpp_graph_to_json(g);
    int rc = gpp_write_file_atomic(path, s, strlen(s), err);
    free(s);
    return rc;
}
