/* gpp_profile_io: profile.json reader and writer (see gpp_profile_io.h). */
#include "planner/gpp_profile_io.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_json.h"

#define S_MAX_BYTES GPP_PROFILE_MAX_BYTES

/* ---- reading ---- */

typedef struct {
    int id;
    const cJSON *entry;
    const char *name; /* the file's */
    int dup;          /* the name repeats: "name#id" */
} s_entry_t;

static int s_id_cmp(const void *a, const void *b)
{
    const s_entry_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static int s_name_cmp(const void *a, const void *b)
{
    const s_entry_t *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* The top level: entries sorted by id, names checked, repeats marked.
 * Caller frees *out. */
static int s_entries(const cJSON *root, const char *origin, s_entry_t **out, int *n_out,
                     gpp_err_t *err)
{
    if (!cJSON_IsObject(root))
        return gpp_err_set(err, "%s: profile must be a JSON object keyed by op id", origin);
    int n = 0;
    for (const cJSON *it = root->child; it; it = it->next)
        n += strcmp(it->string, GPP_PROFILE_META) != 0; /* gpp's record is not an op */
    if (n < 1)
        return gpp_err_set(err, "%s: profile has no ops", origin);
    s_entry_t *e = gpp_xcalloc((size_t)n, sizeof *e);
    s_entry_t **by_name = NULL;
    int i = 0;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, GPP_PROFILE_META) == 0)
            continue;
        char *end = NULL;
        long id = strtol(it->string, &end, 10);
        if (!it->string[0] || *end || id < 0 || id > 1000000000L) {
            gpp_err_set(err, "%s: op key '%s' is not a non-negative integer id", origin,
                        it->string);
            goto fail;
        }
        if (!cJSON_IsObject(it)) {
            gpp_err_set(err, "%s: op %s: entry must be an object", origin, it->string);
            goto fail;
        }
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name");
        if (!cJSON_IsString(nm) || !nm->valuestring[0]) {
            gpp_err_set(err, "%s: op %s: field 'name' missing or not a non-empty string", origin,
                        it->string);
            goto fail;
        }
        e[i++] = (s_entry_t){.id = (int)id, .entry = it, .name = nm->valuestring};
    }
    qsort(e, (size_t)n, sizeof *e, s_id_cmp);
    for (i = 1; i < n; i++)
        if (e[i].id == e[i - 1].id) {
            gpp_err_set(err, "%s: op id %d appears twice", origin, e[i].id);
            goto fail;
        }
    by_name = gpp_xcalloc((size_t)n, sizeof *by_name);
    for (i = 0; i < n; i++)
        by_name[i] = &e[i];
    qsort(by_name, (size_t)n, sizeof *by_name, s_name_cmp);
    for (i = 1; i < n; i++)
        if (strcmp(by_name[i]->name, by_name[i - 1]->name) == 0)
            by_name[i]->dup = by_name[i - 1]->dup = 1;
    free(by_name);
    *out = e;
    *n_out = n;
    return 0;
fail:
    free(e);
    return -1;
}

static int s_get_nonneg(const cJSON *o, const char *field, double *v, const char *origin,
                        const char *key, gpp_err_t *err)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, field);
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) || f->valuedouble < 0)
        return gpp_err_set(err, "%s: op %s: field '%s' must be a non-negative number", origin, key,
                           field);
    *v = f->valuedouble;
    return 0;
}

/* A micro-batch size key of a table ("runtime", "reserved_mem"), or -1. */
static int s_size_key(const char *s)
{
    char *end = NULL;
    long b = strtol(s, &end, 10);
    return s[0] && !*end && b >= 1 && b <= GPP_PROFILE_MAX_MB ? (int)b : -1;
}

/* "inputs" (ids: numbers or strings; anything else becomes -1, which names
 * no op) and "input_size" (bytes per sample of each; a number for one
 * input) into o. */
static int s_parse_inputs(const cJSON *entry, gpp_profile_op_t *o, const char *origin,
                          const char *key, gpp_err_t *err)
{
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(entry, "inputs");
    const cJSON *sz = cJSON_GetObjectItemCaseSensitive(entry, "input_size");
    if (in && !cJSON_IsArray(in))
        return gpp_err_set(err, "%s: op %s: field 'inputs' must be an array of op ids", origin,
                           key);
    int n = in ? cJSON_GetArraySize(in) : 0, k = 0;
    o->n_inputs = n;
    o->inputs = gpp_xcalloc((size_t)n + 1, sizeof *o->inputs);
    o->input_bytes = gpp_xcalloc((size_t)n + 1, sizeof *o->input_bytes);
    for (const cJSON *it = in ? in->child : NULL; it; it = it->next, k++) {
        int id = -1;
        if (cJSON_IsNumber(it) && it->valuedouble >= 0 && it->valuedouble < INT_MAX)
            id = (int)it->valuedouble; /* in range: the conversion is defined */
        else if (cJSON_IsString(it))
            id = atoi(it->valuestring);
        o->inputs[k] = id;
    }
    if (n == 0)
        return 0;
    if (cJSON_IsNumber(sz) && n == 1 && sz->valuedouble >= 0 && sz->valuedouble <= S_MAX_BYTES) {
        o->input_bytes[0] = sz->valuedouble;
        return 0;
    }
    if (!cJSON_IsArray(sz) || cJSON_GetArraySize(sz) != n)
        return gpp_err_set(err,
                           "%s: op %s: field 'input_size' must be an array with one "
                           "bytes-per-sample figure per input (%d)",
                           origin, key, n);
    k = 0;
    for (const cJSON *it = sz->child; it; it = it->next, k++) {
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble > S_MAX_BYTES)
            return gpp_err_set(err,
                               "%s: op %s: input_size[%d] must be a number of bytes in [0, 2^40]",
                               origin, key, k);
        o->input_bytes[k] = it->valuedouble;
    }
    return 0;
}

/* The optional "reserved_mem": a number of bytes (the authors' older files)
 * or {"<micro-batch>": bytes} (their current ones), into o. */
static int s_parse_reserved(const cJSON *entry, gpp_profile_op_t *o, const char *origin,
                            const char *key, gpp_err_t *err)
{
    const cJSON *rm = cJSON_GetObjectItemCaseSensitive(entry, "reserved_mem");
    if (!rm)
        return 0;
    if (!cJSON_IsObject(rm)) {
        double v = 0;
        if (s_get_nonneg(entry, "reserved_mem", &v, origin, key, err) || v > S_MAX_BYTES)
            return gpp_err_set(err,
                               "%s: op %s: field 'reserved_mem' must be a non-negative number "
                               "of bytes (at most 1 TiB) or an object {\"<micro-batch>\": bytes}",
                               origin, key);
        o->reserved_bytes = (int64_t)v;
        return 0;
    }
    int n = cJSON_GetArraySize(rm), i = 0;
    if (n < 1)
        return gpp_err_set(err, "%s: op %s: field 'reserved_mem' is an empty object", origin, key);
    o->reserved_mbs = gpp_xcalloc((size_t)n, sizeof *o->reserved_mbs);
    o->reserved_at = gpp_xcalloc((size_t)n, sizeof *o->reserved_at);
    for (const cJSON *it = rm->child; it; it = it->next, i++) {
        int b = s_size_key(it->string);
        if (b < 0)
            return gpp_err_set(err,
                               "%s: op %s: reserved_mem key '%s' is not a micro-batch size >= 1",
                               origin, key, it->string);
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble > S_MAX_BYTES)
            return gpp_err_set(err,
                               "%s: op %s: reserved_mem[\"%s\"] must be a non-negative number of "
                               "bytes (at most 1 TiB)",
                               origin, key, it->string);
        /* insertion by size: the table is short */
        int j = i;
        while (j > 0 && o->reserved_mbs[j - 1] > b) {
            o->reserved_mbs[j] = o->reserved_mbs[j - 1];
            o->reserved_at[j] = o->reserved_at[j - 1];
            j--;
        }
        if (j > 0 && o->reserved_mbs[j - 1] == b)
            return gpp_err_set(err, "%s: op %s: reserved_mem lists micro-batch %d twice", origin,
                               key, b);
        o->reserved_mbs[j] = b;
        o->reserved_at[j] = it->valuedouble;
        o->n_reserved = i + 1;
    }
    return 0;
}

/* The optional whole number of bytes `field` (at least min, at most 1 TiB)
 * into *out, *has set; what: its meaning, for the message. */
static int s_parse_bytes(const cJSON *entry, const char *field, int min, const char *what,
                         int64_t *out, int *has, const char *origin, const char *key,
                         gpp_err_t *err)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(entry, field);
    if (!f)
        return 0;
    double v = cJSON_IsNumber(f) ? f->valuedouble : NAN;
    if (!isfinite(v) || v < min || v > S_MAX_BYTES || v != floor(v))
        return gpp_err_set(err,
                           "%s: op %s: field '%s' must be a whole %s number of bytes per sample "
                           "(at most 1 TiB): %s",
                           origin, key, field, min ? "positive" : "non-negative", what);
    *out = (int64_t)v;
    *has = 1;
    return 0;
}

/* The optional "workspace": {"fixed": bytes, "per_sample": bytes}. */
static int s_parse_workspace(const cJSON *entry, gpp_profile_row_t *r, const char *origin,
                             const char *key, gpp_err_t *err)
{
    const cJSON *ws = cJSON_GetObjectItemCaseSensitive(entry, "workspace");
    if (!ws)
        return 0;
    double v[2] = {-1, -1};
    const char *names[2] = {"fixed", "per_sample"};
    for (int i = 0; i < 2 && cJSON_IsObject(ws); i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(ws, names[i]);
        if (cJSON_IsNumber(f) && isfinite(f->valuedouble) && f->valuedouble >= 0 &&
            f->valuedouble <= S_MAX_BYTES && f->valuedouble == floor(f->valuedouble))
            v[i] = f->valuedouble;
    }
    if (v[0] < 0 || v[1] < 0 || cJSON_GetArraySize(ws) != 2)
        return gpp_err_set(err,
                           "%s: op %s: field 'workspace' must be {\"fixed\": bytes, "
                           "\"per_sample\": bytes}, whole non-negative numbers (at most 1 TiB "
                           "each): the stream workspace the op's kernels ask for n samples is "
                           "fixed + n x per_sample; remove it to use the op table's figure",
                           origin, key);
    r->workspace = (gpp_work_t){(int64_t)v[0], (int64_t)v[1]};
    r->has_workspace = 1;
    return 0;
}

/* One entry's rows: "runtime" (and "forward") per size, each with the
 * entry's memory figures. */
static int s_parse_rows(const cJSON *entry, int id, gpp_profile_t *p, const char *key,
                        gpp_err_t *err)
{
    const char *origin = p->origin;
    const cJSON *rt = cJSON_GetObjectItemCaseSensitive(entry, "runtime");
    if (!cJSON_IsObject(rt) || cJSON_GetArraySize(rt) < 1)
        return gpp_err_set(err,
                           "%s: op %s: field 'runtime' must be a non-empty object "
                           "{\"<micro-batch>\": ms}",
                           origin, key);
    const cJSON *fw = cJSON_GetObjectItemCaseSensitive(entry, "forward");
    if (fw && !cJSON_IsObject(fw))
        return gpp_err_set(err,
                           "%s: op %s: field 'forward' must be an object "
                           "{\"<micro-batch>\": forward ms}",
                           origin, key);
    gpp_profile_row_t r = {.op = id, .has_fwd = fw != NULL};
    if (s_parse_bytes(entry, "kernel_stash", 0,
                      "what the op's forward kernel keeps for its backward; remove it to use the "
                      "op table's figure",
                      &r.kernel_stash, &r.has_kernel_stash, origin, key, err) ||
        s_parse_bytes(entry, "out_bytes", 1,
                      "the op's output as the device keeps it; remove it to use the model's fp32 "
                      "figure",
                      &r.out_bytes, &r.has_out_bytes, origin, key, err) ||
        s_parse_workspace(entry, &r, origin, key, err))
        return -1;
    for (const cJSON *it = rt->child; it; it = it->next) {
        r.micro_batch = s_size_key(it->string);
        if (r.micro_batch < 0)
            return gpp_err_set(err, "%s: op %s: runtime key '%s' is not a micro-batch size >= 1",
                               origin, key, it->string);
        /* NaN for anything but a number: gpp_profile_check refuses it */
        r.ms = cJSON_IsNumber(it) ? it->valuedouble : NAN;
        const cJSON *f = fw ? cJSON_GetObjectItemCaseSensitive(fw, it->string) : NULL;
        r.fwd_ms = cJSON_IsNumber(f) ? f->valuedouble : NAN;
        gpp_profile_add_row(p, &r);
    }
    return 0;
}

/* The "_gpp" record, when there is one. */
static int s_parse_meta(const cJSON *root, gpp_profile_t *p, gpp_err_t *err)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, GPP_PROFILE_META);
    const char *origin = p->origin;
    if (!m)
        return 0;
    if (!cJSON_IsObject(m))
        return gpp_err_set(err, "%s: field '%s' must be an object", origin, GPP_PROFILE_META);
    gpp_profile_meta_t *meta = &p->meta;
    meta->present = 1;
    static const struct {
        const char *field, *what;
        size_t off, len;
    } strs[] = {
        {"model", "the model spec", offsetof(gpp_profile_meta_t, model), sizeof meta->model},
        {"device", "the device's name", offsetof(gpp_profile_meta_t, device), sizeof meta->device},
        {"backend", "\"cpu\" or \"cuda:N\"", offsetof(gpp_profile_meta_t, backend),
         sizeof meta->backend},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(m, strs[i].field);
        if (f && !cJSON_IsString(f))
            return gpp_err_set(err, "%s: field '%s.%s' must be a string (%s)", origin,
                               GPP_PROFILE_META, strs[i].field, strs[i].what);
        if (f)
            snprintf((char *)meta + strs[i].off, strs[i].len, "%s", f->valuestring);
    }
    const cJSON *ops = cJSON_GetObjectItemCaseSensitive(m, "ops");
    if (ops && !(cJSON_IsNumber(ops) && ops->valuedouble >= 0 && ops->valuedouble <= INT_MAX))
        return gpp_err_set(err, "%s: field '%s.ops' must be the model's op count", origin,
                           GPP_PROFILE_META);
    if (ops)
        meta->n_ops = (int)ops->valuedouble;
    const cJSON *prec = cJSON_GetObjectItemCaseSensitive(m, "precision");
    if (prec &&
        (!cJSON_IsString(prec) || gpp_precision_parse(prec->valuestring, &meta->precision) < 0))
        return gpp_err_set(err, "%s: field '%s.precision' must be one of " GPP_PRECISION_CHOICES,
                           origin, GPP_PROFILE_META);
    meta->has_precision = prec != NULL;
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(m, "bf16_tensors");
    if (bt && !cJSON_IsBool(bt))
        return gpp_err_set(err, "%s: field '%s.bf16_tensors' must be true or false", origin,
                           GPP_PROFILE_META);
    meta->has_bf16_tensors = bt != NULL;
    meta->bf16_tensors = cJSON_IsTrue(bt);
    return 0;
}

gpp_profile_t *gpp_profile_io_parse(const char *text, const char *origin, gpp_err_t *err)
{
    cJSON *root = gpp_json_parse(text, origin, err);
    if (!root)
        return NULL;
    gpp_profile_t *p = gpp_profile_new(origin);
    s_entry_t *e = NULL;
    int n = 0;
    if (s_entries(root, origin, &e, &n, err) < 0)
        goto fail;
    for (int i = 0; i < n; i++) {
        char name[GPP_NAME_LEN], key[GPP_NAME_LEN + 16];
        if (e[i].dup)
            snprintf(name, sizeof name, "%.*s#%d", GPP_NAME_LEN - 13, e[i].name, e[i].id);
        else
            snprintf(name, sizeof name, "%s", e[i].name);
        gpp_profile_op_t *o = gpp_profile_add_op(p, e[i].id, name);
        snprintf(key, sizeof key, "%d (%s)", o->id, o->name);
        if (s_parse_inputs(e[i].entry, o, origin, key, err) < 0 ||
            s_parse_reserved(e[i].entry, o, origin, key, err) < 0)
            goto fail;
        if (cJSON_GetObjectItemCaseSensitive(e[i].entry, "weight_size")) {
            if (s_get_nonneg(e[i].entry, "weight_size", &o->weight_bytes, origin, key, err) < 0)
                goto fail;
            if (o->weight_bytes > S_MAX_BYTES) {
                gpp_err_set(err, "%s: op %s: weight_size %g must be a number of bytes in [0, 2^40]",
                            origin, key, o->weight_bytes);
                goto fail;
            }
            o->has_weight = 1;
        }
        if (s_parse_rows(e[i].entry, o->id, p, key, err) < 0)
            goto fail;
        const cJSON *fw = cJSON_GetObjectItemCaseSensitive(e[i].entry, "forward");
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(e[i].entry, "runtime");
        if (fw && cJSON_GetArraySize(fw) != cJSON_GetArraySize(rt)) {
            /* (a runtime size without a forward is refused with the rows) */
            gpp_err_set(err,
                        "%s: op %s: 'forward' must have exactly the micro-batch sizes of "
                        "'runtime'",
                        origin, key);
            goto fail;
        }
    }
    if (s_parse_meta(root, p, err) < 0 || gpp_profile_check(p, err) < 0)
        goto fail;
    free(e);
    cJSON_Delete(root);
    return p;
fail:
    free(e);
    cJSON_Delete(root);
    gpp_profile_destroy(&p);
    return NULL;
}

gpp_profile_t *gpp_profile_io_read(const char *path, gpp_err_t *err)
{
    char *text = gpp_read_file(path, GPP_PROFILE_FILE_MAX_BYTES, err);
    if (!text)
        return NULL;
    gpp_profile_t *p = gpp_profile_io_parse(text, path, err);
    free(text);
    return p;
}

/* ---- writing ---- */

/* {size: value} with each value printed to 17 significant digits: cJSON's
 * own printer settles for 15 when they parse back within a few ulps, and a
 * kept profile must give the bit-identical costs (so the same plan) when it
 * is read again. Values are finite (the profile was checked). */
static void s_table_add(cJSON *o, int mb, double v)
{
    char key[16], num[32];
    snprintf(key, sizeof key, "%d", mb);
    snprintf(num, sizeof num, "%.17g", v);
    cJSON_AddRawToObject(o, key, num);
}

static int s_row_cmp(const void *a, const void *b)
{
    const gpp_profile_row_t *x = a, *y = b;
    if (x->op != y->op)
        return (x->op > y->op) - (x->op < y->op);
    return (x->micro_batch > y->micro_batch) - (x->micro_batch < y->micro_batch);
}

char *gpp_profile_io_text(const gpp_profile_t *p)
{
    const gpp_profile_meta_t *m = &p->meta;
    cJSON *root = cJSON_CreateObject();
    if (m->present) {
        cJSON *meta = cJSON_AddObjectToObject(root, GPP_PROFILE_META);
        cJSON_AddStringToObject(meta, "model", m->model);
        cJSON_AddStringToObject(meta, "device", m->device);
        if (m->n_ops >= 0)
            cJSON_AddNumberToObject(meta, "ops", m->n_ops);
        if (m->backend[0])
            cJSON_AddStringToObject(meta, "backend", m->backend);
        if (m->has_precision)
            cJSON_AddStringToObject(meta, "precision", gpp_precision_name(m->precision));
        if (m->has_bf16_tensors)
            cJSON_AddBoolToObject(meta, "bf16_tensors", m->bf16_tensors);
    }
    /* rows by op and size: each op's tables in ascending sizes */
    gpp_profile_row_t *rows = gpp_xcalloc(p->n_rows + 1, sizeof *rows);
    memcpy(rows, p->rows, p->n_rows * sizeof *rows);
    qsort(rows, p->n_rows, sizeof *rows, s_row_cmp);
    size_t r = 0;
    for (int i = 0; i < p->n_ops; i++) {
        const gpp_profile_op_t *o = &p->ops[i];
        while (r < p->n_rows && rows[r].op < o->id)
            r++;
        size_t r0 = r;
        char key[16];
        snprintf(key, sizeof key, "%d", o->id);
        cJSON *e = cJSON_AddObjectToObject(root, key);
        cJSON_AddStringToObject(e, "name", o->name);
        cJSON *in = cJSON_AddArrayToObject(e, "inputs");
        cJSON *sz = cJSON_AddArrayToObject(e, "input_size");
        for (int j = 0; j < o->n_inputs; j++) {
            cJSON_AddItemToArray(in, cJSON_CreateNumber(o->inputs[j]));
            cJSON_AddItemToArray(sz, cJSON_CreateNumber(o->input_bytes[j]));
        }
        if (o->has_weight)
            cJSON_AddNumberToObject(e, "weight_size", o->weight_bytes);
        cJSON *rt = cJSON_AddObjectToObject(e, "runtime");
        for (r = r0; r < p->n_rows && rows[r].op == o->id; r++)
            s_table_add(rt, rows[r].micro_batch, rows[r].ms);
        const gpp_profile_row_t *first = r > r0 ? &rows[r0] : NULL;
        if (first && first->has_fwd) {
            cJSON *fw = cJSON_AddObjectToObject(e, "forward");
            for (size_t k = r0; k < r; k++)
                s_table_add(fw, rows[k].micro_batch, rows[k].fwd_ms);
        }
        if (o->n_reserved) {
            cJSON *rm = cJSON_AddObjectToObject(e, "reserved_mem");
            for (int k = 0; k < o->n_reserved; k++)
                s_table_add(rm, o->reserved_mbs[k], o->reserved_at[k]);
        } else if (o->reserved_bytes) {
            cJSON_AddNumberToObject(e, "reserved_mem", (double)o->reserved_bytes);
        }
        if (first && first->has_kernel_stash)
            cJSON_AddNumberToObject(e, "kernel_stash", (double)first->kernel_stash);
        if (first && first->has_out_bytes)
            cJSON_AddNumberToObject(e, "out_bytes", (double)first->out_bytes);
        if (first && first->has_workspace) {
            cJSON *ws = cJSON_AddObjectToObject(e, "workspace");
            cJSON_AddNumberToObject(ws, "fixed", (double)first->workspace.fixed);
            cJSON_AddNumberToObject(ws, "per_sample", (double)first->workspace.per_sample);
        }
    }
    free(rows);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(text);
    char *out = gpp_xrealloc(text, n + 2);
    out[n] = '\n';
    out[n + 1] = 0;
    return out;
}

int gpp_profile_io_write(const gpp_profile_t *p, const char *path, gpp_err_t *err)
{
    char *text = gpp_profile_io_text(p);
    int rc = gpp_write_file_atomic(path, text, strlen(text), err);
    free(text);
    if (rc < 0)
        gpp_err_prefix(err, "profile %s", path);
    return rc;
}
