/* gpp_safetensors: safetensors writer (format in gpp_safetensors.h). */
#include "agent/exec/gpp_safetensors.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_atomic_file.h"
#include "common/gpp_codec.h"
#include "model/gpp_optable.h"

#define CHUNK_BYTES ((size_t)4 << 20)

typedef struct {
    const gpp_graph_t *g;
    cJSON *hdr;
    int64_t off; /* bytes of data so far */
    gpp_atomic_file_t *f;
    gpp_stream_t *s;
    unsigned char *bytes; /* CHUNK_BYTES */
} writer_t;

static int s_describe(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    writer_t *w = arg;
    char name[2 * GPP_NAME_LEN];
    int64_t dims[4];
    int nd = gpp_op_param_torch(w->g, &w->g->ops[p->op], p->slot, name, sizeof name, dims);
    if (cJSON_GetObjectItemCaseSensitive(w->hdr, name))
        return gpp_err_set(err, "parameter name '%s' appears twice", name);
    cJSON *t = cJSON_AddObjectToObject(w->hdr, name);
    cJSON_AddStringToObject(t, "dtype", "F32");
    cJSON *shape = cJSON_AddArrayToObject(t, "shape");
    for (int d = 0; d < nd; d++)
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)dims[d]));
    int64_t bytes = p->rows * p->cols * 4;
    cJSON *off = cJSON_AddArrayToObject(t, "data_offsets");
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)w->off));
    cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(w->off + bytes)));
    w->off += bytes;
    return 0;
}

/* The value buffer, device -> host -> file, little-endian, in chunks. */
static int s_write(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    writer_t *w = arg;
    int64_t numel = p->rows * p->cols, chunk = (int64_t)(CHUNK_BYTES / 4);
    for (int64_t off = 0; off < numel; off += chunk) {
        size_t n = (size_t)(numel - off < chunk ? numel - off : chunk);
        if (gpp_stream_copy(w->s, w->bytes, p->buf[0] + off, n * 4, GPP_COPY_D2H, err) < 0 ||
            gpp_stream_sync(w->s, err) < 0)
            return -1;
        gpp_codec_t c = gpp_codec_writer(w->bytes, n * 4);
        gpp_codec_put_array32(&c, w->bytes, n); /* in place */
        if (gpp_atomic_file_write(w->f, w->bytes, n * 4, err) < 0)
            return -1;
    }
    return 0;
}

int gpp_safetensors_save(gpp_exec_t *ex, const char *path, gpp_err_t *err)
{
    assert(ex && path);
    writer_t w = {.g = gpp_exec_graph(ex), .hdr = cJSON_CreateObject(), .s = gpp_exec_stream(ex)};
    char *json = NULL;
    unsigned char *head = NULL;
    int rc = -1;
    cJSON *meta = cJSON_AddObjectToObject(w.hdr, "__metadata__");
    char steps[32];
    snprintf(steps, sizeof steps, "%lld", (long long)gpp_exec_step_count(ex));
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddStringToObject(meta, "gpp_spec", gpp_exec_graph(ex)->spec);
    cJSON_AddStringToObject(meta, "gpp_steps", steps);
    if (gpp_exec_params_foreach(ex, s_describe, &w, err) < 0)
        goto done;
    json = cJSON_PrintUnformatted(w.hdr);
    size_t jl = strlen(json), padded = (jl + 7) / 8 * 8;
    head = gpp_xcalloc(1, 8 + padded);
    gpp_codec_t c = gpp_codec_writer(head, 8);
    gpp_codec_put_u64(&c, (uint64_t)padded);
    memcpy(head + 8, json, jl);
    memset(head + 8 + jl, ' ', padded - jl);
    w.bytes = gpp_xcalloc(1, CHUNK_BYTES);
    if (gpp_stream_sync(w.s, err) < 0 || !(w.f = gpp_atomic_file_open(path, err)) ||
        gpp_atomic_file_write(w.f, head, 8 + padded, err) < 0 ||
        gpp_exec_params_foreach(ex, s_write, &w, err) < 0)
        goto done;
    rc = gpp_atomic_file_commit(&w.f, err);
done:
    if (rc < 0)
        gpp_err_prefix(err, "saving weights %s (any previous file there is untouched)", path);
    gpp_atomic_file_destroy(&w.f);
    cJSON_Delete(w.hdr);
    free(json);
    free(head);
    free(w.bytes);
    return rc;
}
