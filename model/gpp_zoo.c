/* gpp_zoo: the paper's models (appendix "DNN Model Configurations") as
 * parameterised graph builders. Defaults reproduce the appendix exactly; every
 * size is a parameter: "mmt:branches=2,layers=2,hidden=64,heads=4,seq=16". */
#include "model/gpp_graph.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ZOO_MAX_PARAMS 12

typedef struct {
    const char *key;
    int64_t def;
    int64_t min;
    const char *help;
} zoo_param_t;

typedef struct {
    const char *name;
    const char *help;
    zoo_param_t params[ZOO_MAX_PARAMS];
    void (*build)(gpp_graph_t *g, const int64_t *v);
} zoo_model_t;

/* Pre-LayerNorm transformer layer: x + attn(ln(x)), then + ffn(ln(.)). */
static int s_transformer_layer(gpp_graph_t *g, const char *pre, int x, int64_t hidden, int heads,
                               int64_t ffn)
{
    char n[GPP_NAME_LEN];
    snprintf(n, sizeof n, "%s.ln1", pre);
    int ln1 = gpp_graph_unary(g, GPP_OP_LAYERNORM, n, x);
    snprintf(n, sizeof n, "%s.attn", pre);
    int at = gpp_graph_attention(g, n, ln1, heads);
    snprintf(n, sizeof n, "%s.add1", pre);
    int x1 = gpp_graph_add2(g, n, x, at);
    snprintf(n, sizeof n, "%s.ln2", pre);
    int ln2 = gpp_graph_unary(g, GPP_OP_LAYERNORM, n, x1);
    snprintf(n, sizeof n, "%s.fc1", pre);
    int f1 = gpp_graph_linear(g, n, ln2, ffn, 1);
    snprintf(n, sizeof n, "%s.gelu", pre);
    int ge = gpp_graph_unary(g, GPP_OP_GELU, n, f1);
    snprintf(n, sizeof n, "%s.fc2", pre);
    int f2 = gpp_graph_linear(g, n, ge, hidden, 1);
    snprintf(n, sizeof n, "%s.add2", pre);
    return gpp_graph_add2(g, n, x1, f2);
}

/* MLP of `layers` linear+ReLU layers of width `hidden`. */
static int s_mlp(gpp_graph_t *g, const char *pre, int x, int layers, int64_t hidden)
{
    char n[GPP_NAME_LEN];
    for (int l = 0; l < layers; l++) {
        snprintf(n, sizeof n, "%s.fc%d", pre, l);
        x = gpp_graph_linear(g, n, x, hidden, 1);
        snprintf(n, sizeof n, "%s.relu%d", pre, l);
        x = gpp_graph_unary(g, GPP_OP_RELU, n, x);
    }
    return x;
}

/* Joins branch outputs (concat when more than one) and adds the head. */
static int s_join(gpp_graph_t *g, int n, const int *outs)
{
    return n == 1 ? outs[0] : gpp_graph_concat(g, "concat", n, outs);
}

/* v: branches, layers, hidden, heads, seq, ffn, classes */
static void s_build_mmt(gpp_graph_t *g, const int64_t *v)
{
    int B = (int)v[0], L = (int)v[1];
    int *outs = gpp_xcalloc((size_t)B, sizeof(int));
    char n[GPP_NAME_LEN];
    for (int b = 0; b < B; b++) {
        snprintf(n, sizeof n, "b%d.input", b);
        int x = gpp_graph_input(g, n, v[4], v[2]);
        for (int l = 0; l < L; l++) {
            snprintf(n, sizeof n, "b%d.l%d", b, l);
            x = s_transformer_layer(g, n, x, v[2], (int)v[3], v[5]);
        }
        snprintf(n, sizeof n, "b%d.ln_f", b);
        outs[b] = gpp_graph_unary(g, GPP_OP_LAYERNORM, n, x);
    }
    int j = s_join(g, B, outs);
    int h = gpp_graph_linear(g, "head", j, v[6], 1);
    gpp_graph_unary(g, GPP_OP_LOSS_CE, "loss", h);
    free(outs);
}

/* v: layers, hidden, heads, seq, ffn, classes (one MMT branch) */
static void s_build_transformer(gpp_graph_t *g, const int64_t *v)
{
    int64_t m[7] = {1, v[0], v[1], v[2], v[3], v[4], v[5]};
    s_build_mmt(g, m);
}

/* v: dense_branches, sparse_branches, dense_in, hidden, dense_layers, rows, dim, bag,
 *    top_layers */
static void s_build_dlrm(gpp_graph_t *g, const int64_t *v)
{
    int D = (int)v[0], S = (int)v[1];
    int *outs = gpp_xcalloc((size_t)(D + S), sizeof(int));
    char n[GPP_NAME_LEN], pre[GPP_NAME_LEN];
    for (int b = 0; b < D; b++) {
        snprintf(n, sizeof n, "dense%d.input", b);
        int x = gpp_graph_input(g, n, 1, v[2]);
        snprintf(pre, sizeof pre, "dense%d", b);
        outs[b] = s_mlp(g, pre, x, (int)v[4], v[3]);
    }
    for (int b = 0; b < S; b++) {
        snprintf(n, sizeof n, "sparse%d.input", b);
        int x = gpp_graph_input_indices(g, n, v[7], v[5]);
        snprintf(n, sizeof n, "sparse%d.emb", b);
        outs[D + b] = gpp_graph_embedding_bag(g, n, x, v[5], v[6]);
    }
    int j = s_join(g, D + S, outs);
    int t = s_mlp(g, "top", j, (int)v[8], v[3]);
    int o = gpp_graph_linear(g, "out", t, 1, 1);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", o);
    free(outs);
}

/* v: branches, layers, hidden, in, doses, top_layers */
static void s_build_candle(gpp_graph_t *g, const int64_t *v)
{
    int B = (int)v[0], doses = (int)v[4];
    int *outs = gpp_xcalloc((size_t)(B + doses), sizeof(int));
    char n[GPP_NAME_LEN], pre[GPP_NAME_LEN];
    for (int b = 0; b < B; b++) {
        snprintf(n, sizeof n, "feat%d.input", b);
        int x = gpp_graph_input(g, n, 1, v[3]);
        snprintf(pre, sizeof pre, "feat%d", b);
        outs[b] = s_mlp(g, pre, x, (int)v[1], v[2]);
    }
    for (int d = 0; d < doses; d++) {
        snprintf(n, sizeof n, "dose%d.input", d);
        outs[B + d] = gpp_graph_input(g, n, 1, 1);
    }
    int j = s_join(g, B + doses, outs);
    int t = s_mlp(g, "top", j, (int)v[5], v[2]);
    int o = gpp_graph_linear(g, "out", t, 1, 1);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", o);
    free(outs);
}

/* v: branches, blocks, hidden, heads, seq, ffn, classes. The paper's case-study
 * block is one multi-head attention and two linear layers; a ReLU sits between
 * the linears so the block is not a single affine map. */
static void s_build_case_study(gpp_graph_t *g, const int64_t *v)
{
    int B = (int)v[0], K = (int)v[1];
    int *outs = gpp_xcalloc((size_t)B, sizeof(int));
    char n[GPP_NAME_LEN];
    for (int b = 0; b < B; b++) {
        snprintf(n, sizeof n, "b%d.input", b);
        int x = gpp_graph_input(g, n, v[4], v[2]);
        for (int k = 0; k < K; k++) {
            snprintf(n, sizeof n, "b%d.k%d.attn", b, k);
            x = gpp_graph_attention(g, n, x, (int)v[3]);
            snprintf(n, sizeof n, "b%d.k%d.fc1", b, k);
            x = gpp_graph_linear(g, n, x, v[5], 1);
            snprintf(n, sizeof n, "b%d.k%d.relu", b, k);
            x = gpp_graph_unary(g, GPP_OP_RELU, n, x);
            snprintf(n, sizeof n, "b%d.k%d.fc2", b, k);
            x = gpp_graph_linear(g, n, x, v[2], 1);
        }
        outs[b] = x;
    }
    int j = s_join(g, B, outs);
    int h = gpp_graph_linear(g, "head", j, v[6], 1);
    gpp_graph_unary(g, GPP_OP_LOSS_CE, "loss", h);
    free(outs);
}

static const zoo_model_t s_zoo[] = {
    {"mmt",
     "multi-modal transformer: parallel branches of pre-LN transformer layers, concat, "
     "linear head, softmax cross-entropy",
     {{"branches", 4, 1, "parallel modality branches"},
      {"layers", 8, 1, "transformer layers per branch"},
      {"hidden", 1024, 1, "hidden (= embedding) size"},
      {"heads", 16, 1, "attention heads"},
      {"seq", 256, 1, "sequence length"},
      {"ffn", 4096, 1, "feed-forward hidden size"},
      {"classes", 16, 2, "per-token classes of the head"}},
     s_build_mmt},
    {"dlrm",
     "DLRM: dense MLP branches and embedding-bag branches, concat, top MLP, output 1, MSE",
     {{"dense_branches", 7, 0, "dense-feature branches"},
      {"sparse_branches", 7, 0, "embedding-bag branches"},
      {"dense_in", 4096, 1, "dense features per branch"},
      {"hidden", 4096, 1, "width of every feed-forward layer"},
      {"dense_layers", 4, 1, "feed-forward layers per dense branch"},
      {"rows", 1000000, 1, "rows per embedding table"},
      {"dim", 64, 1, "embedding dimension"},
      {"bag", 100, 1, "indices per bag (summed)"},
      {"top_layers", 2, 0, "feed-forward layers after the interaction"}},
     s_build_dlrm},
    {"candle_uno",
     "CANDLE-Uno: feature branches of feed-forward layers plus dose inputs, concat, top "
     "MLP, output 1, MSE",
     {{"branches", 7, 1, "feature branches"},
      {"layers", 4, 1, "feed-forward layers per branch"},
      {"hidden", 4096, 1, "width of every feed-forward layer"},
      {"in", 4096, 1, "input features per branch"},
      {"doses", 1, 0, "dose inputs (1 feature each) joined at the concat"},
      {"top_layers", 2, 0, "feed-forward layers after the concat"}},
     s_build_candle},
    {"transformer",
     "sequential transformer: one MMT branch (same layer), linear head, cross-entropy",
     {{"layers", 8, 1, "transformer layers"},
      {"hidden", 1024, 1, "hidden size"},
      {"heads", 16, 1, "attention heads"},
      {"seq", 256, 1, "sequence length"},
      {"ffn", 4096, 1, "feed-forward hidden size"},
      {"classes", 16, 2, "per-token classes of the head"}},
     s_build_transformer},
    {"case_study",
     "the paper's case-study model: branches of (attention, linear, ReLU, linear) blocks, "
     "concat, head",
     {{"branches", 2, 1, "parallel branches"},
      {"blocks", 4, 1, "blocks per branch"},
      {"hidden", 1024, 1, "hidden size"},
      {"heads", 16, 1, "attention heads"},
      {"seq", 256, 1, "sequence length"},
      {"ffn", 4096, 1, "inner size of the two linears"},
      {"classes", 16, 2, "per-token classes of the head"}},
     s_build_case_study},
};
#define ZOO_N ((int)(sizeof s_zoo / sizeof s_zoo[0]))

static int s_nparams(const zoo_model_t *m)
{
    int n = 0;
    while (n < ZOO_MAX_PARAMS && m->params[n].key)
        n++;
    return n;
}

static void s_keys(const zoo_model_t *m, char *buf, size_t len)
{
    buf[0] = 0;
    for (int i = 0; i < s_nparams(m); i++) {
        size_t u = strlen(buf);
        snprintf(buf + u, len - u, "%s%s", i ? ", " : "", m->params[i].key);
    }
}

gpp_graph_t *gpp_zoo_build(const char *spec, gpp_err_t *err)
{
    if (!spec || !*spec) {
        gpp_err_set(err, "empty model spec; use one of: mmt, dlrm, candle_uno, transformer, "
                         "case_study (gpp-plan --list-models)");
        return NULL;
    }
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    const zoo_model_t *m = NULL;
    for (int i = 0; i < ZOO_N; i++)
        if (strlen(s_zoo[i].name) == nlen && strncmp(s_zoo[i].name, spec, nlen) == 0)
            m = &s_zoo[i];
    if (!m) {
        gpp_err_set(err, "unknown model '%.*s'; the zoo has: mmt, dlrm, candle_uno, transformer, "
                         "case_study (gpp-plan --list-models)",
                    (int)nlen, spec);
        return NULL;
    }
    int np = s_nparams(m);
    int64_t v[ZOO_MAX_PARAMS];
    for (int i = 0; i < np; i++)
        v[i] = m->params[i].def;
    char keys[256];
    s_keys(m, keys, sizeof keys);
    if (colon) {
        char *rest = gpp_xstrdup(colon + 1), *save = NULL;
        for (char *kv = strtok_r(rest, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) {
                gpp_err_set(err, "model '%s': parameter '%s' needs a value (key=value); keys: %s",
                            m->name, kv, keys);
                free(rest);
                return NULL;
            }
            *eq = 0;
            int idx = -1;
            for (int i = 0; i < np; i++)
                if (strcmp(m->params[i].key, kv) == 0)
                    idx = i;
            if (idx < 0) {
                gpp_err_set(err, "model '%s': unknown parameter '%s'; keys: %s", m->name, kv, keys);
                free(rest);
                return NULL;
            }
            char *end = NULL;
            errno = 0;
            long long x = strtoll(eq + 1, &end, 10);
            if (errno || end == eq + 1 || *end || x < m->params[idx].min || x > (1LL << 40)) {
                gpp_err_set(err, "model '%s': parameter %s='%s' must be an integer >= %lld",
                            m->name, kv, eq + 1, (long long)m->params[idx].min);
                free(rest);
                return NULL;
            }
            v[idx] = x;
        }
        free(rest);
    }
    if (strcmp(m->name, "dlrm") == 0 && v[0] + v[1] < 1) {
        gpp_err_set(err, "model 'dlrm': needs at least one dense or sparse branch");
        return NULL;
    }
    gpp_graph_t *g = gpp_graph_new(m->name);
    m->build(g, v);
    /* canonical spec with every parameter */
    size_t u = (size_t)snprintf(g->spec, sizeof g->spec, "%s", m->name);
    for (int i = 0; i < np && u < sizeof g->spec; i++)
        u += (size_t)snprintf(g->spec + u, sizeof g->spec - u, "%c%s=%lld", i ? ',' : ':',
                              m->params[i].key, (long long)v[i]);
    if (gpp_graph_finalize(g, err)) {
        gpp_err_prefix(err, "model '%s'", g->spec);
        gpp_graph_destroy(&g);
        return NULL;
    }
    return g;
}

void gpp_zoo_list(FILE *out)
{
    for (int i = 0; i < ZOO_N; i++) {
        const zoo_model_t *m = &s_zoo[i];
        fprintf(out, "%s — %s\n", m->name, m->help);
        for (int k = 0; k < s_nparams(m); k++)
            fprintf(out, "    %-16s default %-9lld %s\n", m->params[k].key,
                    (long long)m->params[k].def, m->params[k].help);
    }
    fprintf(out, "spec: NAME or NAME:key=value,key=value  (e.g. mmt:branches=2,layers=2,hidden=64,"
                 "heads=4,seq=16)\n");
}

int gpp_zoo_count(void)
{
    return ZOO_N;
}

const char *gpp_zoo_name(int i)
{
    return i >= 0 && i < ZOO_N ? s_zoo[i].name : NULL;
}
