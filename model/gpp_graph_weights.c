/* gpp_graph_weights: a graph's initial weights from a safetensors file
 * under torch's state_dict names (gpp_graph.h, gpp_graph_load_weights;
 * docs/graph-format.md "Weights in a graph file"). */
#include "model/gpp_graph.h"
#include "model/gpp_optable.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HEADER_MAX ((uint64_t)100 << 20) /* the format's own bound on the header */

static char *s_slurp(const char *path, size_t *len, gpp_err_t *err)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f)
        return gpp_err_set(err, "%s: cannot open: %s", path, strerror(errno)), NULL;
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ((off_t)1 << 34)) {
        fclose(f);
        return gpp_err_set(err, "%s: not a regular file of at most 16 GiB", path), NULL;
    }
    *len = (size_t)st.st_size;
    char *buf = gpp_xcalloc(*len + 1, 1);
    size_t got = fread(buf, 1, *len, f);
    fclose(f);
    if (got != *len) {
        free(buf);
        return gpp_err_set(err, "%s: read error", path), NULL;
    }
    return buf;
}

int gpp_graph_load_weights(gpp_graph_t *g, const char *path, gpp_err_t *err)
{
    size_t len = 0;
    char *buf = s_slurp(path, &len, err);
    cJSON *hdr = NULL;
    float **w = NULL;
    int used = 0, rc = -1;
    if (!buf)
        return -1;
    uint64_t n = 0;
    for (int b = 0; b < 8 && len >= 8; b++)
        n |= (uint64_t)(unsigned char)buf[b] << (8 * b);
    if (len < 8 || n > HEADER_MAX || n > len - 8) {
        gpp_err_set(err,
                    "%s: not a safetensors file (header length %llu of a %zu-byte file; "
                    "truncated or another format): write it with scripts/gpp-export or "
                    "safetensors.torch.save_file",
                    path, (unsigned long long)n, len);
        goto done;
    }
    char save = buf[8 + n];
    buf[8 + n] = 0;
    hdr = cJSON_Parse(buf + 8);
    buf[8 + n] = save;
    if (!cJSON_IsObject(hdr)) {
        gpp_err_set(err, "%s: the safetensors header is not a JSON object (corrupt file)", path);
        goto done;
    }
    const char *data = buf + 8 + n;
    size_t dlen = len - 8 - (size_t)n;
    w = gpp_xcalloc((size_t)g->n_ops * GPP_GRAPH_PARAM_SLOTS + 1, sizeof *w);
    for (int i = 0; i < g->n_ops; i++) {
        gpp_param_t spec[GPP_OP_MAX_PARAMS];
        int np = gpp_op_params(g, &g->ops[i], spec);
        for (int k = 0; k < np; k++) {
            char name[2 * GPP_NAME_LEN];
            int64_t dims[4], numel = 1;
            int nd = gpp_op_param_torch(g, &g->ops[i], k, name, sizeof name, dims);
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(hdr, name);
            const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype");
            const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
            const cJSON *off = cJSON_GetObjectItemCaseSensitive(t, "data_offsets");
            if (!t) {
                gpp_err_set(err, "%s: tensor '%s' (op '%s', a %s) is missing", path, name,
                            g->ops[i].name, gpp_op_type_name(g->ops[i].type));
                goto done;
            }
            if (!cJSON_IsString(dt) || strcmp(dt->valuestring, "F32")) {
                gpp_err_set(err,
                            "%s: tensor '%s' has dtype %s; gpp trains F32 weights "
                            "(model.float() before saving)",
                            path, name, cJSON_IsString(dt) ? dt->valuestring : "(none)");
                goto done;
            }
            int ok = cJSON_IsArray(sh) && cJSON_GetArraySize(sh) == nd;
            for (int d = 0; ok && d < nd; d++) {
                const cJSON *v = cJSON_GetArrayItem(sh, d);
                ok = cJSON_IsNumber(v) && v->valuedouble == (double)dims[d];
                numel *= dims[d];
            }
            if (!ok) {
                char want[96] = "[";
                for (int d = 0; d < nd; d++)
                    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld",
                             d ? ", " : "", (long long)dims[d]);
                gpp_err_set(err, "%s: tensor '%s' has another shape than the model's %s]", path,
                            name, want);
                goto done;
            }
            const cJSON *b = cJSON_GetArrayItem(off, 0), *e = cJSON_GetArrayItem(off, 1);
            if (!cJSON_IsNumber(b) || !cJSON_IsNumber(e) || b->valuedouble < 0 ||
                e->valuedouble > (double)dlen || e->valuedouble - b->valuedouble != numel * 4.0) {
                gpp_err_set(err,
                            "%s: tensor '%s': data_offsets outside the file's %zu data bytes "
                            "or not %lld floats (truncated or corrupt)",
                            path, name, dlen, (long long)numel);
                goto done;
            }
            float *v = gpp_xcalloc((size_t)numel + 1, sizeof *v);
            memcpy(v, data + (size_t)b->valuedouble, (size_t)numel * 4);
            w[(size_t)i * GPP_GRAPH_PARAM_SLOTS + k] = v;
            used++;
        }
    }
    int have = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, hdr) have += strcmp(it->string, "__metadata__") != 0;
    if (have != used) {
        cJSON_ArrayForEach(it, hdr)
        {
            int found = !strcmp(it->string, "__metadata__");
            for (int i = 0; i < g->n_ops && !found; i++) {
                gpp_param_t spec[GPP_OP_MAX_PARAMS];
                int np = gpp_op_params(g, &g->ops[i], spec);
                for (int k = 0; k < np && !found; k++) {
                    char name[2 * GPP_NAME_LEN];
                    int64_t dims[4];
                    gpp_op_param_torch(g, &g->ops[i], k, name, sizeof name, dims);
                    found = !strcmp(name, it->string);
                }
            }
            if (!found) {
                gpp_err_set(err, "%s: tensor '%s' belongs to no parameter of the graph", path,
                            it->string);
                goto done;
            }
        }
    }
    if (g->init_weights) {
        for (int64_t i = 0; i < (int64_t)g->n_ops * GPP_GRAPH_PARAM_SLOTS; i++)
            free(g->init_weights[i]);
        free(g->init_weights);
    }
    g->init_weights = w;
    w = NULL;
    rc = 0;
done:
    for (int64_t i = 0; w && i < (int64_t)g->n_ops * GPP_GRAPH_PARAM_SLOTS; i++)
        free(w[i]);
    free(w);
    cJSON_Delete(hdr);
    free(buf);
    return rc;
}
