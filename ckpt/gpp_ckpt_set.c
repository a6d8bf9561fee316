/* gpp_ckpt_set: checkpoint sets, their manifest and their pruning (format
 * in gpp_ckpt_set.h). */
#include "ckpt/gpp_ckpt_set.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "common/gpp_codec.h"
#include "common/gpp_json.h"
#include "common/gpp_sha256.h"

#define S_PREFIX "set-"
#define S_MANIFEST_MAX_BYTES ((size_t)1 << 20)
#define S_TEXT_MAX_BYTES ((size_t)64 << 20) /* plan.json, profile.json */
#define S_MAX_STAGES 65536                  /* cluster.nodes slots bound (gpp_config.c) */

void gpp_ckpt_set_dir(char *out, size_t len, const char *dir, int iteration)
{
    assert(iteration >= 0);
    snprintf(out, len, "%s/" S_PREFIX "%010d", dir, iteration);
}

void gpp_ckpt_set_stage_path(char *out, size_t len, const char *dir, int iteration, int stage)
{
    assert(iteration >= 0 && stage >= 0);
    snprintf(out, len, "%s/" S_PREFIX "%010d/stage%d.ckpt", dir, iteration, stage);
}

/* The set's number from a directory entry name, or -1 for anything else. */
static int s_set_number(const char *name)
{
    size_t pl = strlen(S_PREFIX);
    if (strncmp(name, S_PREFIX, pl) != 0 || strlen(name) != pl + 10)
        return -1;
    long long n = 0;
    for (const char *p = name + pl; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        n = n * 10 + (*p - '0');
    }
    return n <= INT_MAX ? (int)n : -1;
}

/* Size and the CRC-32 a stage file ends with (its last 4 bytes, little-endian). */
static int s_stage_trailer(const char *path, long long *bytes, uint32_t *crc, gpp_err_t *err)
{
    FILE *f = fopen(path, "rb");
    GPP_SYS_TRY(f != NULL, err, "%s", path);
    unsigned char b[4];
    int ok = fseeko(f, 0, SEEK_END) == 0 && (*bytes = ftello(f)) >= 4 &&
             fseeko(f, -4, SEEK_END) == 0 && fread(b, 1, 4, f) == 4;
    fclose(f);
    if (!ok)
        return gpp_err_set(err, "%s: too short for a checkpoint", path);
    *crc = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

/* The CRC-32 of a stage file's first `bytes` bytes (all but its trailer). */
static int s_data_crc(const char *path, long long bytes, uint32_t *crc, gpp_err_t *err)
{
    FILE *f = fopen(path, "rb");
    GPP_SYS_TRY(f != NULL, err, "%s", path);
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = gpp_xcalloc(1, CHUNK);
    uLong c = crc32_z(0, NULL, 0);
    long long left = bytes;
    while (left > 0) {
        size_t want = left < CHUNK ? (size_t)left : CHUNK;
        size_t got = fread(buf, 1, want, f);
        if (got != want)
            break;
        c = crc32_z(c, buf, got);
        left -= (long long)got;
    }
    int bad = ferror(f);
    free(buf);
    fclose(f);
    if (left > 0 || bad)
        return gpp_err_set(err, "%s: cannot read its %lld bytes%s", path, bytes,
                           bad ? " (read error)" : " (it shrank)");
    *crc = (uint32_t)c;
    return 0;
}

/* Adds {"file", "bytes", "crc32"} for one file of the set. */
static cJSON *s_entry(const char *file, long long bytes, uint32_t crc)
{
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "file", file);
    cJSON_AddNumberToObject(e, "bytes", (double)bytes);
    cJSON_AddNumberToObject(e, "crc32", (double)crc);
    return e;
}

/* Copies <dir>/<name> into the set (atomically); NULL entry when it is
 * missing and optional. */
static int s_copy_in(const char *dir, const char *set, const char *name, int required,
                     cJSON **entry, gpp_err_t *err)
{
    char src[PATH_MAX], dst[PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", dir, name);
    snprintf(dst, sizeof dst, "%s/%s", set, name);
    *entry = NULL;
    if (!required && access(src, F_OK) != 0)
        return 0;
    char *text = gpp_read_file(src, S_TEXT_MAX_BYTES, err);
    if (!text)
        return -1;
    size_t len = strlen(text);
    int rc = gpp_write_file_atomic(dst, text, len, err);
    if (rc == 0)
        *entry = s_entry(name, (long long)len, (uint32_t)crc32_z(0, (const Bytef *)text, len));
    free(text);
    return rc;
}

/* Removes a set directory: the manifest first, so that a removal cut short
 * leaves an incomplete set, never a complete one missing files. */
static void s_remove_set(const char *set)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", set, GPP_CKPT_MANIFEST);
    unlink(path);
    DIR *d = opendir(set);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", set, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    if (rmdir(set) != 0)
        gpp_warn("checkpoint set %s: cannot remove it: %s", set, strerror(errno));
}

static int s_cmp_desc(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* The set numbers under dir, newest first; *n of them. NULL with n = 0
 * when dir does not exist; -1 in *n with a message when unreadable. */
static int *s_list(const char *dir, int *n, gpp_err_t *err)
{
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno != ENOENT)
            *n = gpp_sys_fail(err, __FILE__, __LINE__, "checkpoint directory %s", dir);
        return NULL;
    }
    int *v = NULL, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int k = s_set_number(e->d_name);
        if (k < 0)
            continue;
        if (*n == cap)
            v = gpp_xrealloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *v);
        v[(*n)++] = k;
    }
    closedir(d);
    if (*n > 1)
        qsort(v, (size_t)*n, sizeof *v, s_cmp_desc);
    return v;
}

static int s_check(const char *dir, int iteration, char ***files, int deep, gpp_err_t *err);

/* Keeps the newest `keep` complete sets; removes every set older than the
 * oldest of them. */
static void s_prune(const char *dir, int keep)
{
    gpp_err_t err = {{0}};
    int n, kept = 0, oldest = -1;
    int *v = s_list(dir, &n, &err);
    for (int i = 0; i < n && kept < keep; i++)
        if (s_check(dir, v[i], NULL, 0, NULL) >= 0) { /* at every commit: no data reads */
            kept++;
            oldest = v[i];
        }
    for (int i = 0; i < n && kept == keep; i++)
        if (v[i] < oldest) {
            char set[PATH_MAX];
            gpp_ckpt_set_dir(set, sizeof set, dir, v[i]);
            s_remove_set(set);
        }
    free(v);
}

int gpp_ckpt_set_commit(const char *dir, int iteration, int n_stages, int keep,
                        const char *weights_sha256, gpp_err_t *err)
{
    assert(dir && iteration >= 0 && n_stages > 0 && keep >= 1);
    char set[PATH_MAX], path[PATH_MAX];
    gpp_ckpt_set_dir(set, sizeof set, dir, iteration);
    cJSON *m = cJSON_CreateObject(), *plan = NULL, *profile = NULL;
    char *text = NULL;
    int rc = -1;
    cJSON_AddStringToObject(m, "format", GPP_CKPT_SET_FORMAT);
    cJSON_AddNumberToObject(m, "iteration", iteration);
    cJSON *stages = cJSON_CreateArray();
    for (int s = 0; s < n_stages; s++) {
        long long bytes;
        uint32_t crc;
        gpp_ckpt_set_stage_path(path, sizeof path, dir, iteration, s);
        if (s_stage_trailer(path, &bytes, &crc, err) < 0) {
            cJSON_Delete(stages);
            goto done;
        }
        cJSON *e = s_entry(strrchr(path, '/') + 1, bytes, crc);
        cJSON_AddNumberToObject(e, "stage", s);
        cJSON_AddItemToArray(stages, e);
    }
    if (s_copy_in(dir, set, "plan.json", 1, &plan, err) < 0 ||
        s_copy_in(dir, set, "profile.json", 0, &profile, err) < 0) {
        cJSON_Delete(stages);
        goto done;
    }
    cJSON_AddItemToObject(m, "plan", plan);
    cJSON_AddItemToObject(m, "profile", profile ? profile : cJSON_CreateNull());
    cJSON_AddItemToObject(m, "stages", stages);
    if (weights_sha256)
        cJSON_AddStringToObject(m, "weights_sha256", weights_sha256);
    text = cJSON_Print(m);
    snprintf(path, sizeof path, "%s/%s", set, GPP_CKPT_MANIFEST);
    if (gpp_write_file_atomic(path, text, strlen(text), err) < 0)
        goto done;
    s_prune(dir, keep);
    rc = 0;
done:
    if (rc < 0)
        gpp_err_prefix(err, "committing checkpoint set %s (left incomplete)", set);
    free(text);
    cJSON_Delete(m);
    return rc;
}

/* A plain file name (no directory part, not hidden): what a manifest may name. */
static int s_plain_name(const cJSON *f)
{
    return cJSON_IsString(f) && f->valuestring[0] && f->valuestring[0] != '.' &&
           !strchr(f->valuestring, '/') && strlen(f->valuestring) < 256;
}

/* One file entry of a manifest against the file; deep: a stage file's
 * bytes against the CRC it ends with, too. */
static int s_check_entry(const char *set, const cJSON *e, int stage_file, int deep,
                         const char *where, gpp_err_t *err)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "file");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(e, "bytes");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "crc32");
    if (!s_plain_name(f) || !cJSON_IsNumber(b) || !cJSON_IsNumber(c))
        return gpp_err_set(err, "%s/%s: %s: expected {\"file\": a name, \"bytes\", \"crc32\"}", set,
                           GPP_CKPT_MANIFEST, where);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", set, f->valuestring);
    long long bytes = 0;
    uint32_t crc = 0;
    if (stage_file) {
        if (s_stage_trailer(path, &bytes, &crc, err) < 0)
            return -1;
    } else {
        char *text = gpp_read_file(path, S_TEXT_MAX_BYTES, err);
        if (!text)
            return -1;
        bytes = (long long)strlen(text);
        crc = (uint32_t)crc32_z(0, (const Bytef *)text, (size_t)bytes);
        free(text);
    }
    if ((double)bytes != b->valuedouble || (double)crc != c->valuedouble)
        return gpp_err_set(
            err,
            "%s: %lld bytes with CRC %08x, the manifest records %.0f bytes with "
            "CRC %08x: the set is damaged; use an older set",
            path, bytes, crc, b->valuedouble,
            (uint32_t)(c->valuedouble >= 0 && c->valuedouble <= UINT32_MAX ? c->valuedouble : 0));
    uint32_t data = 0;
    if (stage_file && deep && s_data_crc(path, bytes - 4, &data, err) < 0)
        return -1;
    if (stage_file && deep && data != crc)
        return gpp_err_set(err,
                           "%s: its data has CRC %08x, the file's trailer records %08x: "
                           "the file is corrupted; the set is damaged",
                           path, data, crc);
    return 0;
}

/* gpp_ckpt_set_check (deep: every stage file's data CRC too); with files,
 * also the stage files' paths (caller owns). */
static int s_check(const char *dir, int iteration, char ***files, int deep, gpp_err_t *err)
{
    char set[PATH_MAX], path[PATH_MAX];
    gpp_ckpt_set_dir(set, sizeof set, dir, iteration);
    snprintf(path, sizeof path, "%s/%s", set, GPP_CKPT_MANIFEST);
    if (access(path, F_OK) != 0)
        return gpp_err_set(err,
                           "checkpoint set %s is incomplete (no %s: a save was cut short); "
                           "use an older set",
                           set, GPP_CKPT_MANIFEST);
    char *text = gpp_read_file(path, S_MANIFEST_MAX_BYTES, err);
    cJSON *m = text ? gpp_json_parse(text, path, err) : NULL;
    free(text);
    if (!m)
        return -1;
    int rc = -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(m, "iteration");
    const cJSON *stages = cJSON_GetObjectItemCaseSensitive(m, "stages");
    const cJSON *profile = cJSON_GetObjectItemCaseSensitive(m, "profile");
    int n = cJSON_GetArraySize(stages);
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, GPP_CKPT_SET_FORMAT) != 0) {
        gpp_err_set(err, "%s: not a %s manifest", path, GPP_CKPT_SET_FORMAT);
        goto done;
    }
    if (!cJSON_IsNumber(it) || it->valuedouble != (double)iteration) {
        gpp_err_set(err, "%s: field 'iteration' is not %d, the set's number", path, iteration);
        goto done;
    }
    if (!cJSON_IsArray(stages) || n < 1 || n > S_MAX_STAGES) {
        gpp_err_set(err, "%s: field 'stages' must list 1 to %d stages", path, S_MAX_STAGES);
        goto done;
    }
    if (s_check_entry(set, cJSON_GetObjectItemCaseSensitive(m, "plan"), 0, 0, "plan", err) < 0 ||
        (!cJSON_IsNull(profile) && s_check_entry(set, profile, 0, 0, "profile", err) < 0))
        goto done;
    int s = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, stages)
    {
        char where[32];
        snprintf(where, sizeof where, "stages[%d]", s);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "stage");
        if (!cJSON_IsNumber(st) || st->valuedouble != (double)s) {
            gpp_err_set(err, "%s: %s.stage must be %d", path, where, s);
            goto done;
        }
        if (s_check_entry(set, e, 1, deep, where, err) < 0)
            goto done;
        s++;
    }
    rc = n;
    if (files) {
        *files = gpp_xcalloc((size_t)n + 1, sizeof **files);
        s = 0;
        cJSON_ArrayForEach(e, stages)
        {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "file");
            size_t len = strlen(set) + strlen(f->valuestring) + 2;
            (*files)[s] = gpp_xcalloc(1, len);
            snprintf((*files)[s++], len, "%s/%s", set, f->valuestring);
        }
    }
done:
    cJSON_Delete(m);
    return rc;
}

int gpp_ckpt_set_check(const char *dir, int iteration, gpp_err_t *err)
{
    return s_check(dir, iteration, NULL, 1, err);
}

int gpp_ckpt_set_files(const char *dir, int iteration, char ***files, gpp_err_t *err)
{
    assert(files);
    *files = NULL;
    return s_check(dir, iteration, files, 0, err);
}

int gpp_ckpt_set_header(const char *path, gpp_ckpt_header_t *h, gpp_err_t *err)
{
    unsigned char b[28];
    FILE *f = fopen(path, "rb");
    GPP_SYS_TRY(f != NULL, err, "checkpoint %s: cannot open", path);
    size_t got = fread(b, 1, sizeof b, f);
    gpp_codec_t c = gpp_codec_reader(b, sizeof b);
    char magic[8];
    uint32_t version = 0, spec_len = 0;
    gpp_codec_get_bytes(&c, magic, 8);
    gpp_codec_get_u32(&c, &version);
    gpp_codec_get_u32(&c, &h->optimizer);
    gpp_codec_get_u64(&c, &h->steps);
    gpp_codec_get_u32(&c, &spec_len);
    int rc = -1;
    if (got != sizeof b || memcmp(magic, GPP_CKPT_MAGIC, 8) != 0)
        gpp_err_set(err, "checkpoint %s: not a gpp checkpoint (bad magic)", path);
    else if (version != GPP_CKPT_VERSION)
        gpp_err_set(err, "checkpoint %s: format version %u, this gpp reads version %d", path,
                    version, GPP_CKPT_VERSION);
    else if (spec_len >= sizeof h->spec)
        gpp_err_set(err, "checkpoint %s: corrupt header (spec length %u)", path, spec_len);
    else if (fread(h->spec, 1, spec_len, f) != spec_len)
        gpp_err_set(err, "checkpoint %s: truncated header", path);
    else
        rc = 0;
    if (rc == 0)
        h->spec[spec_len] = 0;
    fclose(f);
    return rc;
}

void gpp_ckpt_set_files_free(char ***files_p)
{
    if (!files_p || !*files_p)
        return;
    for (char **f = *files_p; *f; f++)
        free(*f);
    free(*files_p);
    *files_p = NULL;
}

int gpp_ckpt_set_pick(const char *dir, int from, gpp_err_t *err)
{
    if (from > 0)
        return s_check(dir, from, NULL, 1, err) < 0 ? -1 : from;
    int n, best = 0;
    int *v = s_list(dir, &n, err);
    if (n < 0)
        return -1;
    for (int i = 0; i < n && !best; i++) {
        gpp_err_t why = {{0}};
        if (s_check(dir, v[i], NULL, 1, &why) >= 0)
            best = v[i];
        else
            gpp_warn("checkpoint: skipping set %d: %s", v[i], why.msg);
    }
    free(v);
    return best;
}

int gpp_ckpt_set_latest(const char *dir, gpp_err_t *err)
{
    return gpp_ckpt_set_pick(dir, 0, err);
}

int gpp_ckpt_set_supersede(const char *dir, int iteration, gpp_err_t *err)
{
    int n, moved = 0;
    int *v = s_list(dir, &n, err);
    if (n < 0)
        return -1;
    time_t now = time(NULL);
    struct tm tm;
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
    for (int i = 0; i < n && v[i] > iteration; i++) {
        char set[PATH_MAX], to[PATH_MAX + 48];
        gpp_ckpt_set_dir(set, sizeof set, dir, v[i]);
        snprintf(to, sizeof to, "%s.superseded-%s", set, stamp);
        for (int k = 2; access(to, F_OK) == 0 && k < 1000; k++) /* moved aside this second */
            snprintf(to, sizeof to, "%s.superseded-%s-%d", set, stamp, k);
        if (rename(set, to) != 0) {
            free(v);
            return gpp_sys_fail(err, __FILE__, __LINE__,
                                "checkpoint set %s: cannot move it aside to %s", set, to);
        }
        gpp_warn("checkpoint: set %d is newer than set %d, which the job resumes from: moved "
                 "aside to %s (nothing removed; delete it when it is not needed)",
                 v[i], iteration, to);
        moved++;
    }
    free(v);
    return moved;
}

/* Unlinks the ".tmp." files directly in d; counts them in *n. */
static int s_clean_one(const char *d, int *n, gpp_err_t *err)
{
    DIR *dd = opendir(d);
    if (!dd && errno == ENOENT)
        return 0;
    GPP_SYS_TRY(dd != NULL, err, "%s", d);
    for (struct dirent *e; (e = readdir(dd));) {
        if (!strstr(e->d_name, ".tmp."))
            continue;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", d, e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && unlink(path) == 0) {
            gpp_warn("checkpoint: removed %s, left by a save that was cut short", path);
            (*n)++;
        }
    }
    closedir(dd);
    return 0;
}

int gpp_ckpt_set_clean(const char *dir, gpp_err_t *err)
{
    int n_sets, removed = 0;
    int *v = s_list(dir, &n_sets, err);
    if (n_sets < 0 || s_clean_one(dir, &removed, err) < 0) {
        free(v);
        return -1;
    }
    for (int i = 0; i < n_sets; i++) {
        char set[PATH_MAX];
        gpp_ckpt_set_dir(set, sizeof set, dir, v[i]);
        if (s_clean_one(set, &removed, err) < 0) {
            free(v);
            return -1;
        }
    }
    free(v);
    return removed;
}

void gpp_ckpt_weights_digest(int n_ops, const unsigned char (*digests)[GPP_SHA256_BYTES],
                             const int *has, unsigned char out[GPP_SHA256_BYTES])
{
    gpp_sha256_t s;
    gpp_sha256_init(&s);
    for (int op = 0; op < n_ops; op++) {
        if (!has[op])
            continue;
        unsigned char id[4] = {(unsigned char)op, (unsigned char)(op >> 8),
                               (unsigned char)(op >> 16), (unsigned char)(op >> 24)};
        gpp_sha256_update(&s, id, 4);
        gpp_sha256_update(&s, digests[op], GPP_SHA256_BYTES);
    }
    gpp_sha256_final(&s, out);
}

int gpp_ckpt_set_digest(const char *dir, int iteration, char hex[65], gpp_err_t *err)
{
    char path[PATH_MAX];
    gpp_ckpt_set_dir(path, sizeof path, dir, iteration);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", GPP_CKPT_MANIFEST);
    char *text = gpp_read_file(path, S_MANIFEST_MAX_BYTES, err);
    cJSON *m = text ? gpp_json_parse(text, path, err) : NULL;
    free(text);
    if (!m)
        return -1;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "weights_sha256");
    int rc = 0;
    if (cJSON_IsString(d) && strlen(d->valuestring) == 64 &&
        strspn(d->valuestring, "0123456789abcdef") == 64) {
        memcpy(hex, d->valuestring, 65);
        rc = 1;
    } else if (d) {
        rc = gpp_err_set(err, "%s: weights_sha256 is not 64 hex digits", path);
    }
    cJSON_Delete(m);
    return rc;
}
