/* test_graph_schema: model/gpp-graph.schema.json against the op table and
 * against the files gpp reads and writes (docs/graph-format.md).
 *
 *  - the schema names every op type of gpp_optable, with exactly its
 *    attributes, their required flags, ranges and labels, and its arity;
 *  - every zoo model as gpp writes it, and the graphs in tests/data/graphs
 *    and examples/,
 *    are valid under Debian's python3-jsonschema (scripts/gpp-graph-check run
 *    by /usr/bin/python3), and gpp reads the test data;
 *  - a table of invalid documents fails both the schema and gpp's reader. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/gpp_json.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

#define SCHEMA "model/gpp-graph.schema.json"
#define CHECK "/usr/bin/python3 scripts/gpp-graph-check"

static cJSON *s_schema(void)
{
    gpp_err_t err;
    char *text = gpp_read_file(SCHEMA, 1 << 20, &err);
    GPP_EXPECT_MSG(text != NULL, "%s", err.msg);
    cJSON *s = text ? gpp_json_parse(text, SCHEMA, &err) : NULL;
    GPP_EXPECT_MSG(s != NULL, "%s", err.msg);
    free(text);
    return s;
}

/* The definition the schema applies to ops of type `name` (its allOf entry's
 * "then" reference), or NULL. */
static const cJSON *s_type_def(const cJSON *schema, const char *name)
{
    const cJSON *defs = cJSON_GetObjectItemCaseSensitive(schema, "definitions");
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(defs, "op");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(op, "allOf"))
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "if"),
                                             "properties"),
            "type");
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(c, "const");
        if (!cJSON_IsString(k) || strcmp(k->valuestring, name) != 0)
            continue;
        const cJSON *ref =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "then"), "$ref");
        const char *pre = "#/definitions/";
        if (!cJSON_IsString(ref) || strncmp(ref->valuestring, pre, strlen(pre)) != 0)
            return NULL;
        return cJSON_GetObjectItemCaseSensitive(defs, ref->valuestring + strlen(pre));
    }
    return NULL;
}

/* A property's schema with one level of "$ref" into definitions resolved. */
static const cJSON *s_resolve(const cJSON *schema, const cJSON *p)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(p, "$ref");
    if (!cJSON_IsString(ref))
        return p;
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(schema, "definitions"),
                                            ref->valuestring + strlen("#/definitions/"));
}

static double s_num(const cJSON *o, const char *key, double absent)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : absent;
}

static int s_in_array(const cJSON *arr, const char *s)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, arr) if (cJSON_IsString(x) && strcmp(x->valuestring, s) == 0) return 1;
    return 0;
}

/* The schema says what the op table says, type by type. */
static void t_schema_matches_optable(void)
{
    cJSON *schema = s_schema();
    if (!schema)
        return;
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(schema, "definitions"), "op"),
            "properties"),
        "type");
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(types, "enum");
    GPP_EXPECT(cJSON_GetArraySize(names) == GPP_OP__COUNT);
    for (int t = 0; t < GPP_OP__COUNT; t++) {
        const gpp_op_info_t *T = &gpp_optable[t];
        GPP_EXPECT_MSG(s_in_array(names, T->name), "type %s not in the schema's enum", T->name);
        const cJSON *def = s_type_def(schema, T->name);
        GPP_EXPECT_MSG(def != NULL, "no definition for %s", T->name);
        if (!def)
            continue;
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(def, "properties");
        const cJSON *req = cJSON_GetObjectItemCaseSensitive(def, "required");
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(def, "additionalProperties");
        GPP_EXPECT_MSG(cJSON_IsFalse(ap), "%s: additionalProperties must be false", T->name);
        /* id, name, type, inputs + the attributes, nothing else */
        GPP_EXPECT_MSG(cJSON_GetArraySize(props) == 4 + T->n_attrs, "%s: %d properties, want %d",
                       T->name, cJSON_GetArraySize(props), 4 + T->n_attrs);
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(props, "inputs");
        GPP_EXPECT_MSG(s_num(in, "minItems", 0) == T->min_inputs, "%s: minItems", T->name);
        double max_in = T->max_inputs == INT_MAX ? -1 : T->max_inputs;
        GPP_EXPECT_MSG(s_num(in, "maxItems", -1) == max_in, "%s: maxItems", T->name);
        GPP_EXPECT_MSG(s_in_array(req, "inputs") == (T->min_inputs > 0),
                       "%s: inputs required iff the type takes inputs", T->name);
        for (int i = 0; i < T->n_attrs; i++) {
            const gpp_attr_t *a = &T->attrs[i];
            const cJSON *p = s_resolve(schema, cJSON_GetObjectItemCaseSensitive(props, a->name));
            GPP_EXPECT_MSG(p != NULL, "%s: attribute %s missing", T->name, a->name);
            if (!p)
                continue;
            GPP_EXPECT_MSG(s_in_array(req, a->name) == a->required, "%s.%s: required", T->name,
                           a->name);
            const cJSON *en = cJSON_GetObjectItemCaseSensitive(p, "enum");
            if (a->labels) {
                int n = 0;
                for (; a->labels[n]; n++)
                    GPP_EXPECT_MSG(s_in_array(en, a->labels[n]), "%s.%s: label %s", T->name,
                                   a->name, a->labels[n]);
                GPP_EXPECT(cJSON_GetArraySize(en) == n);
                continue;
            }
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type");
            GPP_EXPECT_MSG(
                cJSON_IsString(ty) &&
                    strcmp(ty->valuestring, a->type == GPP_ATTR_NUM ? "number" : "integer") == 0,
                "%s.%s: type", T->name, a->name);
            GPP_EXPECT_MSG(s_num(p, "minimum", -1) == (double)a->min, "%s.%s: minimum", T->name,
                           a->name);
            /* int64 maxima beyond 2^53 are not exact in JSON: the reader's limit */
            double hi = a->type == GPP_ATTR_NUM               ? -1
                        : (double)a->max > 9007199254740992.0 ? 9007199254740992.0
                                                              : (double)a->max;
            GPP_EXPECT_MSG(s_num(p, "maximum", -1) == hi, "%s.%s: maximum %.0f, want %.0f", T->name,
                           a->name, s_num(p, "maximum", -1), hi);
        }
    }
    cJSON_Delete(schema);
}

static int s_check(const char *files)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, CHECK " %s >/dev/null", files);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every zoo model as gpp writes it, and the test data, are valid. */
static void t_valid_files(void)
{
    char *dir = gpp_fixture_tmpfile("schema");
    unlink(dir); /* a fresh name for a directory */
    GPP_EXPECT(mkdir(dir, 0700) == 0);
    char files[8192] = "tests/data/graphs/*.json examples/*/*.json";
    gpp_err_t err;
    for (int i = 0; i < gpp_zoo_count(); i++) {
        gpp_graph_t *g = gpp_zoo_build(gpp_zoo_name(i), &err);
        GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
        if (!g)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s.json", dir, gpp_zoo_name(i));
        GPP_EXPECT_MSG(gpp_graph_write_json(g, path, &err) == 0, "%s", err.msg);
        size_t u = strlen(files);
        snprintf(files + u, sizeof files - u, " %s", path);
        gpp_graph_destroy(&g);
    }
    int rc = s_check(files);
    GPP_EXPECT_MSG(rc == 0, "gpp-graph-check exit %d on %s (2: run scripts/install-deps.sh)", rc,
                   files);
    const char *data[] = {"tests/data/graphs/tiny_mlp.json", "tests/data/graphs/two_branch.json",
                          "tests/data/graphs/opaque.json", "examples/digits/digits.json"};
    for (size_t i = 0; i < sizeof data / sizeof data[0]; i++) {
        gpp_graph_t *g = gpp_graph_read_json(data[i], &err);
        GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
        gpp_graph_destroy(&g);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    GPP_EXPECT(system(cmd) == 0);
    free(dir);
}

#define HEAD "{\"format\": \"gpp-graph/1\", \"ops\": ["
#define X "{\"id\": 0, \"name\": \"x\", \"type\": \"input\", \"cols\": 8}"

/* Each fails the schema and gpp's reader. */
static const char *const S_INVALID[] = {
    "{\"format\": \"gpp-graph/2\", \"ops\": [" X "]}",
    HEAD "]}",
    HEAD "{\"id\": 0, \"name\": \"x\", \"type\": \"input\"}]}",
    HEAD X ", {\"id\": 1, \"name\": \"l\", \"type\": \"linear\", \"inputs\": [0], "
           "\"out_features\": 4, \"bias\": 2}]}",
    HEAD X ", {\"id\": 1, \"name\": \"s\", \"type\": \"add\", \"inputs\": [0]}]}",
    HEAD X ", {\"id\": 1, \"name\": \"s\", \"type\": \"softmax\", \"inputs\": [0]}]}",
    HEAD X
    ", {\"id\": 1, \"name\": \"a\", \"type\": \"attention\", \"inputs\": [0], \"heads\": 0}]}",
    HEAD
    "{\"id\": 0, \"name\": \"x\", \"type\": \"input\", \"cols\": 8, \"input_kind\": \"sparse\"}]}",
    HEAD "{\"id\": \"0\", \"name\": \"x\", \"type\": \"input\", \"cols\": 8}]}",
    HEAD X ", {\"id\": 1, \"name\": \"g\", \"type\": \"gelu\", \"inputs\": [0], "
           "\"form\": \"none\"}]}",
};

static void t_invalid_files(void)
{
    for (size_t i = 0; i < sizeof S_INVALID / sizeof S_INVALID[0]; i++) {
        char *path = gpp_fixture_tmpfile("bad.json");
        gpp_fixture_spit(path, (const unsigned char *)S_INVALID[i], (long)strlen(S_INVALID[i]));
        GPP_EXPECT_MSG(s_check(path) == 1, "schema accepts invalid document %zu: %s", i,
                       S_INVALID[i]);
        gpp_err_t err;
        gpp_graph_t *g = gpp_graph_read_json(path, &err);
        GPP_EXPECT_MSG(g == NULL, "gpp accepts invalid document %zu: %s", i, S_INVALID[i]);
        gpp_graph_destroy(&g);
        unlink(path);
        free(path);
    }
}

static const gpp_test_case_t cases[] = {{"schema_matches_optable", t_schema_matches_optable},
                                        {"valid_files", t_valid_files},
                                        {"invalid_files", t_invalid_files},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
