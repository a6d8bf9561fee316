/* gpp_config: the cluster.toml schema and its loader.
 *
 * The schema is one table (S_FIELDS): section, key, kind, where it lives in
 * gpp_config_t, its range, allowed words, environment override and the
 * words an error uses for what is expected. Loading walks the TOML document
 * against that table, so a key that is not in it is an error by
 * construction. [[nodes]] is an array of tables with its own small table. */
#include "config/gpp_config.h"
#include "common/gpp_optim_defaults.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/gpp_toml_shim.h"

typedef enum { F_STR, F_WORD, F_INT, F_U64, F_DOUBLE, F_BOOL } s_kind_t;

typedef struct {
    const char *section; /* NULL for [[nodes]] fields */
    const char *key;
    s_kind_t kind;
    size_t offset;            /* in gpp_config_t, or in gpp_config_node_t for nodes */
    size_t size;              /* F_STR: buffer bytes */
    double min, max;          /* F_INT / F_U64 / F_DOUBLE: range */
    int min_open;             /* 1: min itself is excluded */
    int max_open;             /* 1: max itself is excluded */
    const char *const *words; /* F_WORD: allowed words; index stored as int.
                                 F_STR: allowed values when not NULL */
    const char *env;          /* environment override, or NULL */
    const char *expect;       /* "a positive integer" */
} s_field_t;

/* every preset of planner/gpp_cost_device.c (keep the two lists equal) */
static const char *const S_DEVICES[] = {"v100-16g",  "v100-32g", "a100-80g", "h100-80g",
                                        "h200-141g", "cpu",      NULL};
static const char *const S_PLANNERS[] = {"gpp", "spp", NULL};
static const char *const S_SCHEDULES[] = {"auto", "1f1b", "zb-h1", "zb-h2", NULL};
static const char *const S_LAUNCHES[] = {"local", "external", NULL};
static const char *const S_COMMS[] = {"gloo", "nccl", NULL};

#define C_OFF(m) offsetof(gpp_config_t, m)
#define C_SZ(m) sizeof(((gpp_config_t *)0)->m)
#define S_STR(sec, k, m, env, what)                                                                \
    {                                                                                              \
        sec, k, F_STR, C_OFF(m), C_SZ(m), 0, 0, 0, 0, NULL, env, what                              \
    }
#define S_WORDS(sec, k, m, w, env)                                                                 \
    {                                                                                              \
        sec, k, F_WORD, C_OFF(m), 0, 0, 0, 0, 0, w, env, NULL                                      \
    }
#define S_INT(sec, k, m, lo, hi, env, what)                                                        \
    {                                                                                              \
        sec, k, F_INT, C_OFF(m), 0, lo, hi, 0, 0, NULL, env, what                                  \
    }
#define S_DBL(sec, k, m, lo, lo_open, hi, hi_open, what)                                           \
    {                                                                                              \
        sec, k, F_DOUBLE, C_OFF(m), 0, lo, hi, lo_open, hi_open, NULL, NULL, what                  \
    }

static const s_field_t S_FIELDS[] = {
    S_STR("coordinator", "endpoint", coordinator.endpoint, "GPP_ENDPOINT",
          "a ZeroMQ endpoint such as \"tcp://127.0.0.1:5555\""),
    S_STR("coordinator", "key_dir", coordinator.key_dir, "GPP_KEY_DIR",
          "a directory made by gpp-coordinator --keygen DIR"),
    {"coordinator", "insecure_plaintext", F_BOOL, C_OFF(coordinator.insecure_plaintext), 0, 0, 0, 0,
     0, NULL, "GPP_INSECURE_PLAINTEXT", "true or false"},
    {"cluster", "device", F_STR, C_OFF(cluster.device), C_SZ(cluster.device), 0, 0, 0, 0, S_DEVICES,
     NULL, "one of v100-16g, v100-32g, a100-80g, h100-80g, h200-141g, cpu"},
    S_STR("cluster", "profile", cluster.profile, NULL, "a path to a profile.json"),
    S_DBL("cluster", "mem_gib", cluster.mem_gib, 0, 0, 1e6, 0, "a memory size in GiB >= 0"),
    S_DBL("cluster", "intra_gbps", cluster.intra_gbps, 0, 0, 1e6, 0, "a bandwidth in GB/s >= 0"),
    S_DBL("cluster", "inter_gbps", cluster.inter_gbps, 0, 0, 1e6, 0, "a bandwidth in GB/s >= 0"),
    S_DBL("cluster", "intra_latency_us", cluster.intra_latency_us, 0, 0, 1e9, 0,
          "a latency in microseconds >= 0"),
    S_DBL("cluster", "inter_latency_us", cluster.inter_latency_us, 0, 0, 1e9, 0,
          "a latency in microseconds >= 0"),
    S_STR("job", "model", job.model, NULL,
          "a model spec such as \"mmt:branches=2,layers=2\", a graph JSON path or an ONNX "
          "model \"FILE.onnx[:loss=mse|ce]\""),
    S_INT("job", "batch", job.batch, 1, INT_MAX, NULL, "a positive integer"),
    S_INT("job", "iterations", job.iterations, 1, INT_MAX, "GPP_ITERATIONS", "a positive integer"),
    S_WORDS("job", "optimizer", job.optimizer, gpp_optim_kind_names, NULL),
    S_DBL("job", "lr", job.lr, 0, 1, 1e9, 0, "a positive learning rate"),
    S_DBL("job", "momentum", job.momentum, 0, 0, 1, 1, "a number in [0, 1)"),
    S_DBL("job", "weight_decay", job.weight_decay, 0, 0, 1e9, 0, "a number >= 0"),
    S_DBL("job", "beta1", job.beta1, 0, 0, 1, 1, "a number in [0, 1)"),
    S_DBL("job", "beta2", job.beta2, 0, 0, 1, 1, "a number in [0, 1)"),
    S_DBL("job", "eps", job.eps, 0, 0, 1, 0, "a number in [0, 1]"),
    {"job", "seed", F_U64, C_OFF(job.seed), 0, 0, 9.2e18, 0, 0, NULL, "GPP_SEED",
     "a non-negative integer"},
    {"job", "planner", F_STR, C_OFF(job.planner), C_SZ(job.planner), 0, 0, 0, 0, S_PLANNERS, NULL,
     "\"gpp\" or \"spp\""},
    {"job", "schedule", F_STR, C_OFF(job.schedule), C_SZ(job.schedule), 0, 0, 0, 0, S_SCHEDULES,
     NULL, "\"auto\", \"1f1b\", \"zb-h1\" or \"zb-h2\""},
    S_INT("job", "micro_batch", job.micro_batch, 0, INT_MAX, NULL,
          "a non-negative integer (0: the planner chooses)"),
    S_STR("job", "checkpoint_dir", job.checkpoint_dir, "GPP_CHECKPOINT_DIR", "a directory path"),
    S_STR("job", "data", job.data, NULL,
          "a dataset path: a directory of <op name>.npy files, \"op=FILE.npy,...\" or a gpp "
          "dataset file"),
    S_INT("job", "checkpoint_interval", job.checkpoint_interval, 0, INT_MAX, NULL,
          "a non-negative integer (0: no checkpoints)"),
    S_INT("job", "checkpoint_keep", job.checkpoint_keep, 1, 1000000, NULL,
          "a positive integer (complete checkpoint sets kept)"),
    S_WORDS("job", "launch", job.launch, S_LAUNCHES, NULL),
    S_WORDS("job", "backend", job.backend, gpp_device_kind_names, "GPP_BACKEND"),
    S_WORDS("job", "precision", job.precision, gpp_precision_names, "GPP_PRECISION"),
    S_WORDS("job", "comm", job.comm, S_COMMS, "GPP_COMM"),
    {"job", "cuda_graphs", F_BOOL, C_OFF(job.cuda_graphs), 0, 0, 0, 0, 0, NULL, "GPP_CUDA_GRAPHS",
     "true or false"},
    {"job", "bf16_tensors", F_BOOL, C_OFF(job.bf16_tensors), 0, 0, 0, 0, 0, NULL,
     "GPP_BF16_TENSORS", "true or false"},
    S_INT("health", "heartbeat_ms", health.heartbeat_ms, 1, 3600000, "GPP_HEARTBEAT_MS",
          "a positive integer (milliseconds)"),
    S_INT("health", "timeout_ms", health.timeout_ms, 1, 86400000, "GPP_TIMEOUT_MS",
          "a positive integer (milliseconds)"),
    S_STR("metrics", "file", metrics.file, "GPP_METRICS_FILE", "a file path"),
    S_INT("metrics", "http_port", metrics.http_port, 0, 65535, NULL,
          "a TCP port in [0, 65535] (0: off)"),
    S_INT("metrics", "http_linger_ms", metrics.http_linger_ms, 0, 3600000, NULL,
          "milliseconds in [0, 3600000]"),
};
#define S_N_FIELDS (sizeof S_FIELDS / sizeof S_FIELDS[0])

static const s_field_t S_NODE_FIELDS[] = {
    {NULL, "host", F_STR, offsetof(gpp_config_node_t, host), GPP_CONFIG_STR, 0, 0, 0, 0, NULL, NULL,
     "a hostname or address"},
    {NULL, "slots", F_INT, offsetof(gpp_config_node_t, slots), 0, 1, 65536, 0, 0, NULL, NULL,
     "a positive integer (GPUs or CPU agent slots)"},
    {NULL, "gpus", F_INT, offsetof(gpp_config_node_t, gpus), 0, 0, 65536, 0, 0, NULL, NULL,
     "a non-negative integer (GPUs the node's slots share; 0: one GPU per slot)"},
};
#define S_N_NODE_FIELDS (sizeof S_NODE_FIELDS / sizeof S_NODE_FIELDS[0])

static const char *const S_SECTIONS[] = {"coordinator", "cluster", "job",
                                         "health",      "metrics", NULL};

/* Where a field was last set, for cross-field messages. */
typedef struct {
    int line, col;
} s_pos_t;

typedef struct {
    gpp_config_t *c;
    const char *name; /* file name for messages */
    s_pos_t pos[S_N_FIELDS];
    gpp_err_t *err;
} s_load_t;

/* ---- small helpers ---- */

static const char *s_word_list(const char *const *w, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; w[i] && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "", w[i]);
    return buf;
}

static int s_word_index(const char *const *w, const char *s)
{
    for (int i = 0; w[i]; i++)
        if (strcmp(w[i], s) == 0)
            return i;
    return -1;
}

/* "PATH:LINE:COL: sect.key: " (LINE 0: no position). */
static int s_fail(s_load_t *L, s_pos_t p, const char *section, const char *key, const char *fmt,
                  ...) __attribute__((format(printf, 5, 6)));
static int s_fail(s_load_t *L, s_pos_t p, const char *section, const char *key, const char *fmt,
                  ...)
{
    char where[GPP_ERR_LEN / 2], what[GPP_ERR_LEN];
    if (p.line > 0)
        snprintf(where, sizeof where, "%s:%d:%d", L->name, p.line, p.col);
    else
        snprintf(where, sizeof where, "%s", L->name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return gpp_err_set(L->err, "%.200s: %s%s%s: %.280s", where, section ? section : "",
                       section ? "." : "", key, what);
}

/* A value to store: from TOML (typed) or from the environment (text). */
typedef struct {
    int is_text;
    const char *text; /* is_text */
    const gpp_toml_node_t *node;
} s_value_t;

static void s_got(const s_value_t *v, char *buf, size_t len)
{
    if (v->is_text) {
        snprintf(buf, len, "'%.100s'", v->text);
        return;
    }
    gpp_toml_kind_t k = gpp_toml_kind(v->node);
    switch (k) {
    case GPP_TOML_INT:
        snprintf(buf, len, "%lld", (long long)gpp_toml_int(v->node));
        break;
    case GPP_TOML_FLOAT:
        snprintf(buf, len, "%g", gpp_toml_float(v->node));
        break;
    case GPP_TOML_STRING:
        snprintf(buf, len, "\"%.100s\"", gpp_toml_string(v->node, NULL));
        break;
    case GPP_TOML_BOOL:
        snprintf(buf, len, "%s", gpp_toml_bool(v->node) ? "true" : "false");
        break;
    default:
        snprintf(buf, len, "a %s", gpp_toml_kind_name(k));
    }
}

/* 1 when v is a TOML string with an embedded NUL ("\u0000"). */
static int s_has_nul(const s_value_t *v)
{
    size_t len;
    return !v->is_text && gpp_toml_kind(v->node) == GPP_TOML_STRING &&
           strlen(gpp_toml_string(v->node, &len)) != len;
}

/* Reads v as a string; NULL when it is not one (or holds a NUL). */
static const char *s_as_string(const s_value_t *v)
{
    if (v->is_text)
        return v->text;
    if (gpp_toml_kind(v->node) != GPP_TOML_STRING)
        return NULL;
    size_t len;
    const char *s = gpp_toml_string(v->node, &len);
    return strlen(s) == len ? s : NULL;
}

/* Reads v as a number; 0 on success. ints_only rejects floats. */
static int s_as_number(const s_value_t *v, int ints_only, double *out, int64_t *iout)
{
    if (v->is_text) {
        char *end;
        errno = 0;
        if (ints_only) {
            long long x = strtoll(v->text, &end, 10);
            if (errno || end == v->text || *end)
                return -1;
            *iout = x;
            *out = (double)x;
        } else {
            double x = strtod(v->text, &end);
            if (errno || end == v->text || *end)
                return -1;
            *out = x;
        }
        return 0;
    }
    gpp_toml_kind_t k = gpp_toml_kind(v->node);
    if (k == GPP_TOML_INT) {
        *iout = gpp_toml_int(v->node);
        *out = (double)*iout;
        return 0;
    }
    if (k == GPP_TOML_FLOAT && !ints_only) {
        *out = gpp_toml_float(v->node);
        return 0;
    }
    return -1;
}

/* Stores v into the field f of base; on error names section.key at p. */
static int s_store(s_load_t *L, const s_field_t *f, const char *section, void *base,
                   const s_value_t *v, s_pos_t p)
{
    char *dst = (char *)base + f->offset;
    char got[160], words[160];
    s_got(v, got, sizeof got);
    if (s_has_nul(v))
        return s_fail(L, p, section, f->key, "contains a NUL character");
    switch (f->kind) {
    case F_STR: {
        const char *s = s_as_string(v);
        if (!s)
            return s_fail(L, p, section, f->key, "expected %s, got %s", f->expect, got);
        if (strlen(s) >= f->size)
            return s_fail(L, p, section, f->key, "longer than %zu bytes", f->size - 1);
        if (f->words && s_word_index(f->words, s) < 0)
            return s_fail(L, p, section, f->key, "expected %s, got %s", f->expect, got);
        memcpy(dst, s, strlen(s) + 1);
        return 0;
    }
    case F_WORD: {
        const char *s = s_as_string(v);
        int i = s ? s_word_index(f->words, s) : -1;
        if (i < 0)
            return s_fail(L, p, section, f->key, "expected one of %s, got %s",
                          s_word_list(f->words, words, sizeof words), got);
        *(int *)dst = i;
        return 0;
    }
    case F_BOOL: {
        /* TOML true/false; from the environment true/false/1/0 */
        int b = -1;
        if (!v->is_text && gpp_toml_kind(v->node) == GPP_TOML_BOOL)
            b = gpp_toml_bool(v->node) != 0;
        else if (v->is_text && (!strcmp(v->text, "true") || !strcmp(v->text, "1")))
            b = 1;
        else if (v->is_text && (!strcmp(v->text, "false") || !strcmp(v->text, "0")))
            b = 0;
        if (b < 0)
            return s_fail(L, p, section, f->key, "expected %s, got %s", f->expect, got);
        *(int *)dst = b;
        return 0;
    }
    case F_INT:
    case F_U64:
    case F_DOUBLE: {
        double x;
        int64_t ix = 0;
        int ints = f->kind != F_DOUBLE;
        int ok = s_as_number(v, ints, &x, &ix) == 0 && isfinite(x) &&
                 (f->min_open ? x > f->min : x >= f->min) &&
                 (f->max_open ? x < f->max : x <= f->max);
        if (!ok)
            return s_fail(L, p, section, f->key, "expected %s, got %s", f->expect, got);
        if (f->kind == F_INT)
            *(int *)dst = (int)ix;
        else if (f->kind == F_U64)
            *(uint64_t *)dst = (uint64_t)ix;
        else
            *(double *)dst = x;
        return 0;
    }
    }
    return 0;
}

/* Applies every key of one TOML table to `fields`; unknown keys are errors. */
static int s_apply_table(s_load_t *L, const gpp_toml_node_t *t, const char *section,
                         const s_field_t *fields, size_t n_fields, void *base, s_pos_t *pos)
{
    size_t n = gpp_toml_table_size(t);
    for (size_t i = 0; i < n; i++) {
        const char *key;
        s_pos_t kp;
        const gpp_toml_node_t *v = gpp_toml_table_at(t, i, &key, &kp.line, &kp.col);
        const s_field_t *f = NULL;
        size_t fi = 0;
        for (; fi < n_fields; fi++) {
            if ((!fields[fi].section || strcmp(fields[fi].section, section) == 0) &&
                strcmp(fields[fi].key, key) == 0) {
                f = &fields[fi];
                break;
            }
        }
        if (!f && strcmp(section, "coordinator") == 0 && strcmp(key, "store") == 0)
            return s_fail(L, kp, section, key,
                          "removed: the data-plane rendezvous now runs on the coordinator's "
                          "endpoint (no second port); delete this line");
        if (!f) {
            char known[320];
            size_t used = 0;
            known[0] = '\0';
            for (size_t j = 0; j < n_fields && used < sizeof known; j++)
                if (!fields[j].section || strcmp(fields[j].section, section) == 0)
                    used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                                             used ? ", " : "", fields[j].key);
            return s_fail(L, kp, section, key, "unknown key; [%s] takes: %s", section, known);
        }
        s_pos_t vp;
        gpp_toml_pos(v, &vp.line, &vp.col);
        s_value_t val = {0, NULL, v};
        if (s_store(L, f, section, base, &val, vp) < 0)
            return -1;
        if (pos)
            pos[fi] = kp;
    }
    return 0;
}

static int s_apply_nodes(s_load_t *L, const gpp_toml_node_t *arr, s_pos_t kp)
{
    if (gpp_toml_kind(arr) != GPP_TOML_ARRAY)
        return s_fail(L, kp, NULL, "nodes",
                      "expected an array of tables ([[nodes]] host = \"...\" slots = N), got a %s",
                      gpp_toml_kind_name(gpp_toml_kind(arr)));
    size_t n = gpp_toml_array_size(arr);
    if (n == 0 || n > GPP_CONFIG_MAX_NODES)
        return s_fail(L, kp, NULL, "nodes", "expected 1 to %d nodes, got %zu", GPP_CONFIG_MAX_NODES,
                      n);
    gpp_config_node_t *nodes = gpp_xcalloc(n, sizeof *nodes);
    free(L->c->nodes);
    L->c->nodes = nodes;
    L->c->n_nodes = (int)n;
    for (size_t i = 0; i < n; i++) {
        const gpp_toml_node_t *t = gpp_toml_array_at(arr, i);
        s_pos_t tp;
        gpp_toml_pos(t, &tp.line, &tp.col);
        char sect[32];
        snprintf(sect, sizeof sect, "nodes[%zu]", i);
        if (gpp_toml_kind(t) != GPP_TOML_TABLE)
            return s_fail(L, tp, NULL, sect, "expected a table, got a %s",
                          gpp_toml_kind_name(gpp_toml_kind(t)));
        nodes[i].slots = 1;
        if (s_apply_table(L, t, sect, S_NODE_FIELDS, S_N_NODE_FIELDS, &nodes[i], NULL) < 0)
            return -1;
        if (nodes[i].gpus > nodes[i].slots)
            return s_fail(L, tp, sect, "gpus",
                          "%d GPUs for %d slots: a slot runs on one GPU; set gpus <= slots "
                          "(or slots = %d)",
                          nodes[i].gpus, nodes[i].slots, nodes[i].gpus);
        if (!nodes[i].host[0])
            return s_fail(L, tp, sect, "host", "missing; add host = \"name\" to this [[nodes]]");
        for (size_t j = 0; j < i; j++)
            if (strcmp(nodes[j].host, nodes[i].host) == 0)
                return s_fail(L, tp, sect, "host",
                              "\"%s\" listed twice; give the node one entry with all its slots",
                              nodes[i].host);
    }
    return 0;
}

static int s_apply_doc(s_load_t *L, const gpp_toml_t *doc)
{
    const gpp_toml_node_t *root = gpp_toml_root(doc);
    size_t n = gpp_toml_table_size(root);
    for (size_t i = 0; i < n; i++) {
        const char *key;
        s_pos_t kp;
        const gpp_toml_node_t *v = gpp_toml_table_at(root, i, &key, &kp.line, &kp.col);
        if (strcmp(key, "nodes") == 0) {
            if (s_apply_nodes(L, v, kp) < 0)
                return -1;
            continue;
        }
        if (s_word_index(S_SECTIONS, key) < 0) {
            char words[160];
            return gpp_err_set(L->err, "%s:%d:%d: [%s]: unknown section; known: %s, [[nodes]]",
                               L->name, kp.line, kp.col, key,
                               s_word_list(S_SECTIONS, words, sizeof words));
        }
        if (gpp_toml_kind(v) != GPP_TOML_TABLE)
            return gpp_err_set(L->err, "%s:%d:%d: %s: expected a table [%s], got a %s", L->name,
                               kp.line, kp.col, key, key, gpp_toml_kind_name(gpp_toml_kind(v)));
        if (s_apply_table(L, v, key, S_FIELDS, S_N_FIELDS, L->c, L->pos) < 0)
            return -1;
    }
    return 0;
}

/* Environment overrides: read once per load, each logged. */
static int s_apply_env(s_load_t *L)
{
    for (size_t i = 0; i < S_N_FIELDS; i++) {
        const s_field_t *f = &S_FIELDS[i];
        const char *text = f->env ? getenv(f->env) : NULL;
        if (!text)
            continue;
        s_value_t v = {1, text, NULL};
        if (s_store(L, f, f->section, L->c, &v, (s_pos_t){0, 0}) < 0)
            return gpp_err_prefix(L->err, "environment %s", f->env);
        L->pos[i] = (s_pos_t){0, 0};
        gpp_info("config: %s=%s overrides %s.%s", f->env, text, f->section, f->key);
    }
    return 0;
}

static s_pos_t s_pos_of(const s_load_t *L, const char *section, const char *key)
{
    for (size_t i = 0; i < S_N_FIELDS; i++)
        if (strcmp(S_FIELDS[i].section, section) == 0 && strcmp(S_FIELDS[i].key, key) == 0)
            return L->pos[i];
    assert(0 && "no such field");
    return (s_pos_t){0, 0};
}

/* Rules that span fields. */
static int s_check(s_load_t *L)
{
    gpp_config_t *c = L->c;
    if (!c->job.model[0])
        return s_fail(L, (s_pos_t){0, 0}, "job", "model",
                      "missing; add model = \"mmt:branches=2,layers=2,hidden=64,heads=4,seq=16\" "
                      "(or a graph JSON path) under [job]");
    const char *ep = c->coordinator.endpoint;
    if (strncmp(ep, "tcp://", 6) && strncmp(ep, "ipc://", 6) && strncmp(ep, "inproc://", 9))
        return s_fail(L, s_pos_of(L, "coordinator", "endpoint"), "coordinator", "endpoint",
                      "\"%s\" is not a ZeroMQ endpoint; use \"tcp://HOST:PORT\"", ep);
    if (c->cluster.profile[0] && access(c->cluster.profile, R_OK) < 0)
        return s_fail(L, s_pos_of(L, "cluster", "profile"), "cluster", "profile",
                      "cannot read \"%s\": %s (paths are relative to the working directory)",
                      c->cluster.profile, strerror(errno));
    if (c->health.timeout_ms <= c->health.heartbeat_ms)
        return s_fail(L, s_pos_of(L, "health", "timeout_ms"), "health", "timeout_ms",
                      "%d must exceed heartbeat_ms %d (use a few heartbeats, e.g. %d)",
                      c->health.timeout_ms, c->health.heartbeat_ms, 5 * c->health.heartbeat_ms);
    if (c->job.checkpoint_interval > 0 && !c->job.checkpoint_dir[0])
        return s_fail(L, s_pos_of(L, "job", "checkpoint_interval"), "job", "checkpoint_interval",
                      "%d needs job.checkpoint_dir; set it or use 0", c->job.checkpoint_interval);
    if (c->job.micro_batch > 0 && c->job.batch % c->job.micro_batch)
        return s_fail(L, s_pos_of(L, "job", "micro_batch"), "job", "micro_batch",
                      "%d does not divide job.batch %d", c->job.micro_batch, c->job.batch);
    if (c->job.backend == GPP_DEVICE_CUDA && strcmp(c->cluster.device, "cpu") == 0)
        return s_fail(
            L, s_pos_of(L, "job", "backend"), "job", "backend",
            "\"cuda\" with cluster.device \"cpu\"; set a GPU preset or backend = \"cpu\"");
    if (c->job.comm == GPP_CONFIG_COMM_NCCL && c->job.backend != GPP_DEVICE_CUDA)
        return s_fail(L, s_pos_of(L, "job", "comm"), "job", "comm",
                      "\"nccl\" moves device memory between GPUs and needs backend = \"cuda\"; "
                      "set comm = \"gloo\" or backend = \"cuda\"");
    if (c->job.precision != GPP_PRECISION_FP32 && c->job.backend == GPP_DEVICE_CPU)
        return s_fail(L, s_pos_of(L, "job", "precision"), "job", "precision",
                      "\"%s\" needs backend = \"cuda\" (the CPU backend computes fp32 only); "
                      "set precision = \"fp32\" or backend = \"cuda\"",
                      gpp_precision_name(c->job.precision));
    if (c->job.launch == GPP_CONFIG_LAUNCH_LOCAL && c->n_nodes != 1)
        return s_fail(L, s_pos_of(L, "job", "launch"), "job", "launch",
                      "\"local\" starts every agent on this host but %d nodes are listed; list "
                      "one node or use launch = \"external\"",
                      c->n_nodes);
    return 0;
}

/* Fills *c with every default (one local node with 1 slot, no model). */
static void s_defaults(gpp_config_t *c)
{
    assert(c);
    memset(c, 0, sizeof *c);
    snprintf(c->coordinator.endpoint, sizeof c->coordinator.endpoint, "tcp://127.0.0.1:5555");
    snprintf(c->cluster.device, sizeof c->cluster.device, "cpu");
    c->n_nodes = 1;
    c->nodes = gpp_xcalloc(1, sizeof *c->nodes);
    snprintf(c->nodes[0].host, sizeof c->nodes[0].host, "127.0.0.1");
    c->nodes[0].slots = 1;
    c->job.batch = 32;
    c->job.iterations = 20;
    /* the newest set and one to fall back to should the newest be damaged */
    c->job.checkpoint_keep = 2;
    /* gpp-train's defaults (common/gpp_optim_defaults.h); lr and weight
       decay depend on the optimizer: -1 until s_load resolves them */
    c->job.optimizer = GPP_OPTIM_DEFAULT_ADAMW ? GPP_OPTIM_ADAMW : GPP_OPTIM_SGD;
    c->job.lr = -1;
    c->job.weight_decay = -1;
    c->job.momentum = GPP_OPTIM_DEFAULT_MOMENTUM;
    c->job.beta1 = GPP_OPTIM_DEFAULT_BETA1;
    c->job.beta2 = GPP_OPTIM_DEFAULT_BETA2;
    c->job.eps = GPP_OPTIM_DEFAULT_EPS;
    c->job.seed = 1;
    snprintf(c->job.planner, sizeof c->job.planner, "gpp");
    snprintf(c->job.schedule, sizeof c->job.schedule, "auto");
    c->job.launch = GPP_CONFIG_LAUNCH_LOCAL;
    c->job.backend = GPP_DEVICE_CPU;
    c->job.comm = GPP_CONFIG_COMM_GLOO;
    c->health.heartbeat_ms = 500;
    c->health.timeout_ms = 5000;
    c->metrics.http_linger_ms = 15000; /* two scrapes at the guide's 5 s interval, and one more */
}

static int s_load(gpp_config_t *c, gpp_toml_t *doc, const char *name, gpp_err_t *err)
{
    s_load_t L = {.c = c, .name = name, .err = err};
    s_defaults(c);
    snprintf(c->path, sizeof c->path, "%s", name);
    int rc = -1;
    if (!doc)
        goto fail;
    if (s_apply_doc(&L, doc) < 0 || s_apply_env(&L) < 0)
        goto fail;
    int adamw = c->job.optimizer == GPP_OPTIM_ADAMW;
    if (c->job.lr < 0)
        c->job.lr = gpp_optim_default_lr(adamw);
    if (c->job.weight_decay < 0)
        c->job.weight_decay = gpp_optim_default_weight_decay(adamw);
    if (s_check(&L) < 0)
        goto fail;
    rc = 0;
fail:
    gpp_toml_destroy(&doc);
    if (rc < 0)
        gpp_config_release(c);
    return rc;
}

/* ---- public API ---- */

int gpp_config_load(gpp_config_t *c, const char *path, gpp_err_t *err)
{
    assert(c && path);
    return s_load(c, gpp_toml_parse_file(path, err), path, err);
}

int gpp_config_load_string(gpp_config_t *c, const char *text, const char *name, gpp_err_t *err)
{
    assert(c && text && name);
    return s_load(c, gpp_toml_parse_string(text, name, err), name, err);
}

void gpp_config_release(gpp_config_t *c)
{
    if (!c)
        return;
    free(c->nodes);
    c->nodes = NULL;
    c->n_nodes = 0;
}

int gpp_config_devices(const gpp_config_t *c)
{
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++)
        n += c->nodes[i].slots;
    return n;
}

const char *gpp_config_launch_name(gpp_config_launch_t l)
{
    return S_LAUNCHES[l];
}
int gpp_config_bf16_tensors(const gpp_config_t *c)
{
    return c->job.backend == GPP_DEVICE_CUDA && c->job.precision == GPP_PRECISION_BF16 &&
           c->job.bf16_tensors;
}

const char *gpp_config_comm_name(gpp_config_comm_t c)
{
    return S_COMMS[c];
}

int gpp_config_slot_gpu(const gpp_config_t *c, int node, int slot)
{
    assert(node >= 0 && node < c->n_nodes && slot >= 0);
    int g = c->nodes[node].gpus;
    return g > 0 ? slot % g : slot;
}
