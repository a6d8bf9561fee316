/* test_onnx: the ONNX importer (model/gpp_onnx.c).
 *
 * The fixtures of tests/data/onnx (written by make_onnx.py with python3-onnx)
 * import to the expected gpp graph with the file's initializers as initial
 * weights, transposed where ONNX holds W^T; the model spec's loss; then a
 * table of broken models built here with protobuf-c (one defect each) whose
 * messages must name the node or tensor and the fix, and every truncation
 * of a real file, which must be refused or imported but never crash. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_model.h"
#include "model/gpp_onnx.h"
#include "model/onnx.pb-c.h"
#include "model/gpp_optable.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

#define BRANCHES "tests/data/onnx/branches.onnx"
/* which member of a dimension's oneof is set (onnx.proto's value oneof) */
#define DIM_VALUE ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
#define DIM_PARAM ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM

/* The whole file (gpp_fixture_slurp); a missing or short file fails the test. */
static uint8_t *s_slurp(const char *path, size_t *len)
{
    long n = -1;
    uint8_t *b = gpp_fixture_slurp(path, &n);
    GPP_EXPECT_MSG(b && n >= 0, "cannot read %s (run from the source root)", path);
    *len = n > 0 ? (size_t)n : 0;
    return b;
}

static int s_find_op(const gpp_graph_t *g, const char *name)
{
    for (int i = 0; i < g->n_ops; i++)
        if (!strcmp(g->ops[i].name, name))
            return i;
    return -1;
}

static const Onnx__TensorProto *s_init(const Onnx__ModelProto *m, const char *name)
{
    for (size_t i = 0; i < m->graph->n_initializer; i++)
        if (!strcmp(m->graph->initializer[i]->name, name))
            return m->graph->initializer[i];
    return NULL;
}

/* Element i of an fp32 initializer (raw_data or float_data). */
static float s_f(const Onnx__TensorProto *t, size_t i)
{
    if (!t->has_raw_data)
        return t->float_data[i];
    float v;
    memcpy(&v, t->raw_data.data + 4 * i, 4);
    return v;
}

static void t_branches(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_model_load(BRANCHES, &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    GPP_EXPECT(g->n_ops == 12);
    static const struct {
        const char *name;
        gpp_op_type_t type;
        int64_t rows, cols;
    } want[] = {{"a", GPP_OP_INPUT, 1, 8},          {"b", GPP_OP_INPUT, 1, 6},
                {"idx", GPP_OP_INPUT, 1, 3},        {"fa", GPP_OP_LINEAR, 1, 16},
                {"/relu/Relu", GPP_OP_RELU, 1, 16}, {"fb", GPP_OP_LINEAR, 1, 12},
                {"/gelu/Div", GPP_OP_GELU, 1, 12},  {"emb", GPP_OP_EMBEDDING_BAG, 1, 5},
                {"/Concat", GPP_OP_CONCAT, 1, 33},  {"ln", GPP_OP_LAYERNORM, 1, 33},
                {"head", GPP_OP_LINEAR, 1, 4},      {"loss", GPP_OP_LOSS_MSE, 1, 1}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int id = s_find_op(g, want[i].name);
        GPP_EXPECT_MSG(id >= 0, "no op '%s'", want[i].name);
        if (id < 0)
            continue;
        GPP_EXPECT_MSG(g->ops[id].type == want[i].type && g->ops[id].rows == want[i].rows &&
                           g->ops[id].cols == want[i].cols,
                       "op '%s': %s %lldx%lld", want[i].name, gpp_op_type_name(g->ops[id].type),
                       (long long)g->ops[id].rows, (long long)g->ops[id].cols);
    }
    int ge = s_find_op(g, "/gelu/Div"); /* torch's Erf form: the exact erf GELU */
    GPP_EXPECT(ge >= 0 && g->ops[ge].form == GPP_GELU_ERF);
    int idx = s_find_op(g, "idx");
    GPP_EXPECT(idx >= 0 && g->ops[idx].input_kind == GPP_INPUT_INDICES &&
               g->ops[idx].table_rows == 20);
    int cat = s_find_op(g, "/Concat");
    GPP_EXPECT(cat >= 0 && g->ops[cat].n_inputs == 3 &&
               g->ops[cat].inputs[0] == s_find_op(g, "/relu/Relu") &&
               g->ops[cat].inputs[2] == s_find_op(g, "emb"));
    GPP_EXPECT(gpp_graph_params(g) == 16 * 8 + 16 + 12 * 6 + 12 + 20 * 5 + 2 * 33 + 4 * 33 + 4);

    /* the initializers, in gpp's layout: [out, in] weights */
    size_t len = 0;
    uint8_t *buf = s_slurp(BRANCHES, &len);
    Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
    GPP_EXPECT(m != NULL);
    if (m) {
        static const struct {
            const char *op, *init;
            int slot, transposed;
            int64_t rows, cols;
        } w[] = {{"fa", "fa.weight", 0, 0, 16, 8},      {"fa", "fa.bias", 1, 0, 1, 16},
                 {"fb", "onnx::MatMul_9", 0, 1, 12, 6}, {"fb", "fb.bias", 1, 0, 1, 12},
                 {"emb", "emb.weight", 0, 0, 20, 5},    {"ln", "ln.weight", 0, 0, 1, 33},
                 {"ln", "ln.bias", 1, 0, 1, 33},        {"head", "onnx::Gemm_20", 0, 1, 4, 33},
                 {"head", "head.bias", 1, 0, 1, 4}};
        for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
            const float *v = gpp_graph_init_weight(g, s_find_op(g, w[i].op), w[i].slot);
            const Onnx__TensorProto *t = s_init(m, w[i].init);
            GPP_EXPECT_MSG(v && t, "%s slot %d", w[i].op, w[i].slot);
            if (!v || !t)
                continue;
            int bad = 0;
            for (int64_t r = 0; r < w[i].rows; r++)
                for (int64_t c = 0; c < w[i].cols; c++) {
                    float x = w[i].transposed ? s_f(t, (size_t)(c * w[i].rows + r))
                                              : s_f(t, (size_t)(r * w[i].cols + c));
                    bad += v[r * w[i].cols + c] != x;
                }
            GPP_EXPECT_MSG(bad == 0, "%s: %d values differ from %s", w[i].op, bad, w[i].init);
        }
        GPP_EXPECT(gpp_graph_init_weight(g, s_find_op(g, "/relu/Relu"), 0) == NULL);
        onnx__model_proto__free_unpacked(m, NULL);
    }
    gpp_graph_destroy(&g);

    /* the loss a spec names */
    g = gpp_model_load("onnx:" BRANCHES ":loss=ce", &err);
    GPP_EXPECT_MSG(g && g->ops[g->n_ops - 1].type == GPP_OP_LOSS_CE, "%s", err.msg);
    gpp_graph_destroy(&g);
    GPP_EXPECT(gpp_model_load(BRANCHES ":loss=l1", &err) == NULL && strstr(err.msg, "loss=ce"));

    /* every truncation: refused with a reason, or a smaller valid model */
    int refused = 0;
    for (size_t n = 0; buf && n < len; n++) {
        gpp_err_t e = {{0}};
        gpp_graph_t *t = gpp_onnx_parse(buf, n, "cut.onnx", GPP_ONNX_LOSS_MSE, &e);
        if (!t) {
            refused++;
            GPP_EXPECT_MSG(!strncmp(e.msg, "cut.onnx", 8), "prefix %zu: '%s'", n, e.msg);
        } else {
            gpp_err_t f = {{0}};
            GPP_EXPECT_MSG(gpp_graph_finalize(t, &f) == 0 || f.msg[0], "prefix %zu", n);
        }
        gpp_graph_destroy(&t);
    }
    GPP_EXPECT(refused > (int)len / 2);
    free(buf);
}

static void t_residual(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_model_load("tests/data/onnx/residual.onnx", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    /* x [1, 2, 8]: rows 2; MatMul without a bias; the Add of two activations */
    GPP_EXPECT(g->n_ops == 5 && g->ops[0].rows == 2 && g->ops[0].cols == 8);
    GPP_EXPECT(g->ops[1].type == GPP_OP_LINEAR && g->ops[1].bias == 0);
    GPP_EXPECT(g->ops[3].type == GPP_OP_ADD && g->ops[3].inputs[1] == 0);
    GPP_EXPECT(g->ops[4].type == GPP_OP_LOSS_MSE && g->ops[4].inputs[0] == 3);
    gpp_graph_destroy(&g);
}

/* split.onnx: Split [4, 6] and Slice [2, end) of one input x [N, 10] */
static void t_split(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_model_load("tests/data/onnx/split.onnx", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    static const struct {
        const char *name;
        gpp_op_type_t type;
        int64_t start, cols;
    } want[] = {{"x", GPP_OP_INPUT, 0, 10},    {"xa", GPP_OP_SLICE, 0, 4},
                {"xb", GPP_OP_SLICE, 4, 6},    {"fa", GPP_OP_LINEAR, 0, 5},
                {"fb", GPP_OP_LINEAR, 0, 7},   {"/Slice", GPP_OP_SLICE, 2, 8},
                {"fc", GPP_OP_LINEAR, 0, 3},   {"/Concat", GPP_OP_CONCAT, 0, 15},
                {"head", GPP_OP_LINEAR, 0, 3}, {"loss", GPP_OP_LOSS_MSE, 0, 1}};
    GPP_EXPECT(g->n_ops == 12);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int id = s_find_op(g, want[i].name);
        GPP_EXPECT_MSG(id >= 0 && g->ops[id].type == want[i].type &&
                           g->ops[id].start == want[i].start && g->ops[id].cols == want[i].cols &&
                           g->ops[id].rows == 1,
                       "op '%s'", want[i].name);
    }
    int xa = s_find_op(g, "xa"), fb = s_find_op(g, "fb");
    GPP_EXPECT(xa >= 0 && g->ops[xa].inputs[0] == s_find_op(g, "x"));
    GPP_EXPECT(fb >= 0 && g->ops[fb].inputs[0] == s_find_op(g, "xb") && g->ops[fb].bias);
    gpp_graph_t *j = NULL;
    GPP_EXPECT_MSG(gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    /* through gpp-graph/1 JSON: slice's attributes round-trip */
    char *text = gpp_graph_to_json(g);
    j = gpp_graph_parse_json(text, "split.json", &err);
    GPP_EXPECT_MSG(j && gpp_graph_finalize(j, &err) == 0, "%s", err.msg);
    int js = j ? s_find_op(j, "xb") : -1;
    GPP_EXPECT(js >= 0 && j->ops[js].start == 4 && j->ops[js].width == 6);
    free(text);
    gpp_graph_destroy(&j);
    gpp_graph_destroy(&g);
}

/* reshape.onnx: torch's shape plumbing folded, with and without value_info */
static void t_reshape(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g[2] = {gpp_model_load("tests/data/onnx/reshape.onnx", &err), NULL};
    GPP_EXPECT_MSG(g[0] != NULL, "%s", err.msg);
    g[1] = gpp_model_load("tests/data/onnx/reshape_inferred.onnx", &err);
    GPP_EXPECT_MSG(g[1] != NULL, "%s", err.msg);
    static const struct {
        const char *name;
        gpp_op_type_t type;
        int64_t cols;
    } want[] = {{"x", GPP_OP_INPUT, 6},  {"fc", GPP_OP_LINEAR, 8},   {"/Relu", GPP_OP_RELU, 8},
                {"/Add", GPP_OP_ADD, 8}, {"head", GPP_OP_LINEAR, 3}, {"loss", GPP_OP_LOSS_MSE, 1}};
    for (int f = 0; f < 2 && g[0] && g[1]; f++) {
        GPP_EXPECT_MSG(g[f]->n_ops == 6, "file %d: %d ops", f, g[f]->n_ops);
        for (int k = 0; k < 6 && k < g[f]->n_ops; k++)
            GPP_EXPECT_MSG(!strcmp(g[f]->ops[k].name, want[k].name) &&
                               g[f]->ops[k].type == want[k].type &&
                               g[f]->ops[k].cols == want[k].cols && g[f]->ops[k].rows == 1,
                           "file %d op %d '%s'", f, k, g[f]->ops[k].name);
        /* Reshape's and Squeeze+Flatten's results are the Relu's output */
        int add = s_find_op(g[f], "/Add"), relu = s_find_op(g[f], "/Relu");
        GPP_EXPECT(add >= 0 && g[f]->ops[add].inputs[0] == relu &&
                   g[f]->ops[add].inputs[1] == relu);
    }
    for (int k = 0; g[0] && g[1] && k < 2; k++) /* the same weights */
        GPP_EXPECT(!memcmp(gpp_graph_init_weight(g[0], 1, k), gpp_graph_init_weight(g[1], 1, k),
                           (k ? 8 : 48) * sizeof(float)));
    gpp_graph_destroy(&g[0]);
    gpp_graph_destroy(&g[1]);
}

/* flatten.onnx: reshapes that change the sample's shape become gpp reshape
 * ops, [4, 5] -> [1, 20] (Flatten; Reshape [0, -1]) and [1, 12] -> [3, 4]
 * (Reshape [0, 3, -1]), the rows of the Linear after it following */
static void t_flatten(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_model_load("tests/data/onnx/flatten.onnx", &err);
    GPP_EXPECT_MSG(g != NULL && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    if (!g)
        return;
    static const struct {
        const char *name;
        gpp_op_type_t type;
        int64_t rows, cols;
    } want[] = {{"x", GPP_OP_INPUT, 4, 6},
                {"a", GPP_OP_LINEAR, 4, 5},
                {"/Relu", GPP_OP_RELU, 4, 5},
                {"/Flatten", GPP_OP_RESHAPE, 1, 20},
                {"/Reshape", GPP_OP_RESHAPE, 1, 20},
                {"/Add", GPP_OP_ADD, 1, 20},
                {"m", GPP_OP_LINEAR, 1, 12},
                {"/Relu_1", GPP_OP_RELU, 1, 12},
                {"/Reshape_1", GPP_OP_RESHAPE, 3, 4},
                {"o", GPP_OP_LINEAR, 3, 2},
                {"loss", GPP_OP_LOSS_MSE, 1, 1}};
    GPP_EXPECT_MSG(g->n_ops == 11, "%d ops", g->n_ops);
    for (int k = 0; k < 11 && k < g->n_ops; k++)
        GPP_EXPECT_MSG(!strcmp(g->ops[k].name, want[k].name) && g->ops[k].type == want[k].type &&
                           g->ops[k].rows == want[k].rows && g->ops[k].cols == want[k].cols,
                       "op %d '%s' %s %lldx%lld", k, g->ops[k].name,
                       gpp_op_type_name(g->ops[k].type), (long long)g->ops[k].rows,
                       (long long)g->ops[k].cols);
    /* a reshape keeps no activation for its backward: no stash of its own */
    for (int k = 0; k < g->n_ops; k++)
        if (g->ops[k].type == GPP_OP_RESHAPE)
            GPP_EXPECT(g->ops[k].params == 0 &&
                       g->ops[k].io_bytes == 5 * g->ops[k].rows * g->ops[k].cols * 4 &&
                       g->ops[k].inputs[0] == (k == 8 ? 7 : 2));
    gpp_graph_destroy(&g);
}

#define ATTENTION "tests/data/onnx/attention.onnx"

/* Fixture `path` with the raw bytes of initializer `name` (or of Constant
 * node `name`'s value) replaced by v[n] (same size), parsed; NULL + message
 * in err. */
static gpp_graph_t *s_edited(const char *path, const char *name, const void *v, size_t n,
                             gpp_err_t *err)
{
    size_t len = 0;
    uint8_t *buf = s_slurp(path, &len);
    Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
    gpp_graph_t *g = NULL;
    Onnx__TensorProto *t = m ? (Onnx__TensorProto *)s_init(m, name) : NULL;
    for (size_t i = 0; m && !t && i < m->graph->n_node; i++)
        if (!strcmp(m->graph->node[i]->name, name) && m->graph->node[i]->n_attribute == 1)
            t = m->graph->node[i]->attribute[0]->t;
    GPP_EXPECT_MSG(t && t->has_raw_data && t->raw_data.len == n, "initializer %s", name);
    if (t && t->raw_data.len == n) {
        memcpy(t->raw_data.data, v, n);
        size_t plen = onnx__model_proto__get_packed_size(m);
        uint8_t *out = malloc(plen);
        onnx__model_proto__pack(m, out);
        g = gpp_onnx_parse(out, plen, "a.onnx", GPP_ONNX_LOSS_MSE, err);
        free(out);
    }
    if (m)
        onnx__model_proto__free_unpacked(m, NULL);
    free(buf);
    return g;
}

/* attention.onnx: one gpp attention op, its weights the four projections' */
static void t_attention(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_model_load(ATTENTION, &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    int at = s_find_op(g, "o");
    GPP_EXPECT_MSG(g->n_ops == 3 && at == 1 && g->ops[at].type == GPP_OP_ATTENTION &&
                       g->ops[at].heads == 2 && g->ops[at].rows == 4 && g->ops[at].cols == 8 &&
                       g->ops[at].inputs[0] == 0,
                   "%d ops", g->n_ops);
    size_t len = 0;
    uint8_t *buf = s_slurp(ATTENTION, &len);
    Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
    GPP_EXPECT(m != NULL && at == 1);
    if (m && at == 1) {
        /* gpp's [out, in] rows from MatMul's [in, out]: w_qkv = Wq | Wk | Wv, w_o */
        static const char *wn[4] = {"onnx::MatMul_q", "onnx::MatMul_k", "onnx::MatMul_v",
                                    "onnx::MatMul_o"};
        static const char *bn[4] = {"q.bias", "k.bias", NULL, "o.bias"};
        const float *wqkv = gpp_graph_init_weight(g, at, 0),
                    *bqkv = gpp_graph_init_weight(g, at, 1);
        const float *wo = gpp_graph_init_weight(g, at, 2), *bo = gpp_graph_init_weight(g, at, 3);
        int bad = 0;
        for (int k = 0; k < 4; k++) {
            const Onnx__TensorProto *w = s_init(m, wn[k]), *b = bn[k] ? s_init(m, bn[k]) : NULL;
            for (int o = 0; o < 8; o++) {
                for (int i = 0; i < 8; i++)
                    bad += (k < 3 ? wqkv[(k * 8 + o) * 8 + i] : wo[o * 8 + i]) !=
                           s_f(w, (size_t)(i * 8 + o));
                bad += (k < 3 ? bqkv[k * 8 + o] : bo[o]) != (b ? s_f(b, (size_t)o) : 0.0f);
            }
        }
        GPP_EXPECT_MSG(bad == 0, "%d attention weights differ from the initializers", bad);
        onnx__model_proto__free_unpacked(m, NULL);
    }
    free(buf);
    gpp_graph_destroy(&g);

    /* a scale other than 1/sqrt(head size); heads that do not tile the features */
    float scale = 0.4f;
    g = s_edited(ATTENTION, "scale", &scale, 4, &err);
    GPP_EXPECT_MSG(!g &&
                       strstr(err.msg, "a.onnx: node 14 '/Softmax' (Softmax): attention scale: "
                                       "the scores are divided by 2.5") &&
                       strstr(err.msg, "sqrt(4) = 2"),
                   "'%s'", err.msg);
    gpp_graph_destroy(&g);
    int64_t heads[4] = {0, 0, 4, 4};
    g = s_edited(ATTENTION, "heads", heads, sizeof heads, &err);
    GPP_EXPECT_MSG(!g && strstr(err.msg, "attention heads: reshape to [N, 4, 4, 4]") &&
                       strstr(err.msg, "(Reshape)"),
                   "'%s'", err.msg);
    gpp_graph_destroy(&g);
}

#define MHA "tests/data/onnx/mha.onnx"

/* The initializer of dims [r, c]. */
static const Onnx__TensorProto *s_init_dims(const Onnx__ModelProto *m, int64_t r, int64_t c)
{
    for (size_t i = 0; i < m->graph->n_initializer; i++) {
        const Onnx__TensorProto *t = m->graph->initializer[i];
        if (t->n_dims == 2 && t->dims[0] == r && t->dims[1] == c)
            return t;
    }
    return NULL;
}

/* mha.onnx, mha_nobias.onnx (torch's export of nn.MultiheadAttention, made
 * by make_mha.py): one gpp attention op whose w_qkv rows are the packed
 * in-projection W_in (stored as W_in^T [8, 24]), b_qkv b_in, w_o, b_o
 * out_proj's (Gemm: [out, in] as gpp holds it; MatMul: W_o^T) */
static void t_mha(void)
{
    static const char *file[2] = {MHA, "tests/data/onnx/mha_nobias.onnx"};
    for (int f = 0; f < 2; f++) {
        gpp_err_t err = {{0}};
        gpp_graph_t *g = gpp_model_load(file[f], &err);
        GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
        if (!g)
            continue;
        int at = f ? 1 : s_find_op(g, "mha");
        GPP_EXPECT_MSG(g->n_ops == 3 && at == 1 && g->ops[at].type == GPP_OP_ATTENTION &&
                           g->ops[at].heads == 2 && g->ops[at].rows == 4 && g->ops[at].cols == 8 &&
                           g->ops[at].inputs[0] == 0,
                       "%s: %d ops", file[f], g->n_ops);
        size_t len = 0;
        uint8_t *buf = s_slurp(file[f], &len);
        Onnx__ModelProto *m = buf ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
        const Onnx__TensorProto *w = m ? s_init_dims(m, 8, 24) : NULL,
                                *b = m && !f ? s_init(m, "mha.in_proj_bias") : NULL,
                                *wo = m ? (f ? s_init_dims(m, 8, 8)
                                             : s_init(m, "mha.out_proj.weight"))
                                        : NULL,
                                *bo = m && !f ? s_init(m, "mha.out_proj.bias") : NULL;
        GPP_EXPECT(w && wo && (f || (b && bo)) && at == 1);
        if (w && wo && (f || (b && bo)) && at == 1) {
            const float *wqkv = gpp_graph_init_weight(g, at, 0),
                        *bqkv = gpp_graph_init_weight(g, at, 1),
                        *gwo = gpp_graph_init_weight(g, at, 2),
                        *gbo = gpp_graph_init_weight(g, at, 3);
            int bad = 0;
            for (int r = 0; r < 24; r++) {
                for (int i = 0; i < 8; i++)
                    bad += wqkv[r * 8 + i] != s_f(w, (size_t)(i * 24 + r));
                bad += bqkv[r] != (b ? s_f(b, (size_t)r) : 0.0f);
            }
            for (int o = 0; o < 8; o++) {
                for (int i = 0; i < 8; i++)
                    bad += gwo[o * 8 + i] != s_f(wo, (size_t)(f ? i * 8 + o : o * 8 + i));
                bad += gbo[o] != (bo ? s_f(bo, (size_t)o) : 0.0f);
            }
            GPP_EXPECT_MSG(bad == 0, "%s: %d attention weights differ from the initializers",
                           file[f], bad);
        }
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        free(buf);
        gpp_graph_destroy(&g);
    }

    /* a scale other than 1/sqrt(head size), a Q slice 16 wide, 4 heads in
     * one reshape only */
    static const struct {
        const char *node;
        int64_t v;
        size_t n;
        const char *want1, *want2;
    } bad[] = {
        {"/mha/Constant_14", 0, 4, "attention scale: the scores are divided by 2.5", "sqrt(4) = 2"},
        {"/mha/Constant_8", 2, 8, "(Slice): nn.MultiheadAttention: the Q slice",
         "must be 8 features of the last axis"},
        {"/mha/Constant_11", 4, 8,
         "(Reshape): nn.MultiheadAttention: reshape to [4, 20, 4] at "
         "batch 5, expected [4, 10, 4]",
         "heads dividing 8 features"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        gpp_err_t err = {{0}};
        float scale = 2.5f;
        gpp_graph_t *g =
            s_edited(MHA, bad[k].node, k ? (const void *)&bad[k].v : &scale, bad[k].n, &err);
        GPP_EXPECT_MSG(!g && strstr(err.msg, bad[k].want1) && strstr(err.msg, bad[k].want2) &&
                           !strncmp(err.msg, "a.onnx: node ", 13),
                       "%s: '%s'", bad[k].node, err.msg);
        gpp_graph_destroy(&g);
    }
    /* mha_mask.onnx: attn_mask = triu(-inf, 1) (a bool mask torch turns
     * into that constant): a causal attention op; mha.onnx's is not */
    gpp_err_t err = {{0}};
    const char *mask = "tests/data/onnx/mha_mask.onnx";
    gpp_graph_t *g = gpp_model_load(mask, &err), *plain = gpp_model_load(MHA, &err);
    int at = g ? s_find_op(g, "mha") : -1;
    GPP_EXPECT_MSG(g && plain && g->n_ops == 3 && at == 1 && g->ops[at].causal == 1 &&
                       g->ops[at].heads == 2 && plain->ops[1].causal == 0,
                   "mask: '%s'", err.msg);
    gpp_graph_destroy(&g);
    gpp_graph_destroy(&plain);
    /* the mask's constant edited: -1e4 above the diagonal is causal too;
     * one entry off (0 above, or -inf below the diagonal) is refused */
    float m[16];
    for (int e = 0; e < 3; e++) {
        for (int i = 0; i < 16; i++)
            m[i] = i % 4 > i / 4 ? (e == 0 ? -1e4f : -INFINITY) : 0.0f;
        if (e == 1)
            m[1] = 0.0f;
        if (e == 2)
            m[4] = -INFINITY;
        memset(&err, 0, sizeof err);
        g = s_edited(mask, "/mha/Constant_16", m, sizeof m, &err);
        if (e == 0)
            GPP_EXPECT_MSG(g && g->ops[1].causal == 1, "mask -1e4: '%s'", err.msg);
        else
            GPP_EXPECT_MSG(!g &&
                               strstr(err.msg, "'/mha/Softmax' (Softmax): unsupported op Softmax "
                                               "after an attention mask") &&
                               strstr(err.msg, "gpp's attention has no mask but a causal one"),
                           "mask %d: '%s'", e, err.msg);
        gpp_graph_destroy(&g);
    }
}

#define GELU_TANH "tests/data/onnx/gelu_tanh.onnx"

/* gelu_tanh.onnx: torch's tanh-form GELU, then the same chain with every
 * operand order swapped: two gelu ops of form tanh; a constant that is not
 * the formula's leaves the arithmetic unmapped (refused at its first Mul) */
static void t_gelu_tanh(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_model_load(GELU_TANH, &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    int g1 = s_find_op(g, "/g/Mul"), g2 = s_find_op(g, "/g2/Mul");
    GPP_EXPECT_MSG(g->n_ops == 6 && g1 == 2 && g2 == 3 && g->ops[g1].type == GPP_OP_GELU &&
                       g->ops[g2].type == GPP_OP_GELU && g->ops[g1].form == GPP_GELU_TANH &&
                       g->ops[g2].form == GPP_GELU_TANH && g->ops[g2].inputs[0] == g1 &&
                       g->ops[g1].cols == 8,
                   "%d ops, gelu at %d and %d", g->n_ops, g1, g2);
    gpp_graph_destroy(&g);
    static const struct {
        const char *name; /* a Constant node or an initializer */
        const char *at;   /* the node refused */
    } edits[] = {{"/g/k", "node 1 '/g/Mul' (Mul): unsupported op Mul"},
                 {"/g/b", "node 1 '/g/Mul' (Mul): unsupported op Mul"},
                 {"half", "'/g2/Mul' (Mul): unsupported op Mul"}};
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        float v = 0.05f;
        memset(&err, 0, sizeof err);
        g = s_edited(GELU_TANH, edits[i].name, &v, sizeof v, &err);
        GPP_EXPECT_MSG(!g && strstr(err.msg, edits[i].at), "%s 0.05: '%s'", edits[i].name, err.msg);
        gpp_graph_destroy(&g);
    }
}

static void t_spec(void)
{
    GPP_EXPECT(gpp_onnx_is_spec("m.onnx") && gpp_onnx_is_spec("onnx:m") &&
               gpp_onnx_is_spec("d/m.onnx:loss=ce") && !gpp_onnx_is_spec("m.onnx.json") &&
               !gpp_onnx_is_spec("mmt:branches=2") && !gpp_onnx_is_spec("g.json"));
    char out[64];
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_onnx_spec_loss("m.onnx", "ce", out, sizeof out, &err) == 0 &&
               !strcmp(out, "m.onnx:loss=ce"));
    GPP_EXPECT(gpp_onnx_spec_loss("mmt", NULL, out, sizeof out, &err) == 0 && !strcmp(out, "mmt"));
    GPP_EXPECT(gpp_onnx_spec_loss("mmt", "ce", out, sizeof out, &err) < 0 &&
               strstr(err.msg, "only an ONNX model"));
    GPP_EXPECT(gpp_onnx_spec_loss("m.onnx", "hinge", out, sizeof out, &err) < 0 &&
               strstr(err.msg, "use mse, ce or bce"));
    GPP_EXPECT(gpp_onnx_spec_loss("m.onnx:loss=ce", "mse", out, sizeof out, &err) < 0 &&
               strstr(err.msg, "names a loss already"));
    GPP_EXPECT(gpp_model_load("/nonexistent/m.onnx", &err) == NULL &&
               strstr(err.msg, "cannot open"));
    GPP_EXPECT(gpp_model_load("onnx:/tmp:loss=ce", &err) == NULL &&
               strstr(err.msg, "regular file"));
}

/* ---- broken models, built with protobuf-c ----
 * The base model: x [N, 4] -> Gemm(W [3, 4], b [3], transB=1) -> Relu -> y. */

typedef struct {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__NodeProto gemm, relu, *nodes[3];
    Onnx__AttributeProto tb, *gemm_attrs[2];
    Onnx__TensorProto w, b, *inits[3];
    Onnx__ValueInfoProto x, y, *ins[2], *outs[1];
    Onnx__TypeProto xt, yt;
    Onnx__TypeProto__Tensor xtt, ytt;
    Onnx__TensorShapeProto xs, ys;
    Onnx__TensorShapeProto__Dimension xd[3], yd[2], *xdp[3], *ydp[2];
    char *gemm_in[3], *gemm_out[1], *relu_in[1], *relu_out[1];
    int64_t wdims[2], bdims[1];
    float wv[12], bv[3];
} base_t;

static void s_base(base_t *s)
{
    memset(s, 0, sizeof *s);
    onnx__model_proto__init(&s->m);
    onnx__graph_proto__init(&s->g);
    s->m.graph = &s->g;
    onnx__node_proto__init(&s->gemm);
    onnx__node_proto__init(&s->relu);
    onnx__attribute_proto__init(&s->tb);
    s->tb.name = "transB";
    s->tb.has_i = 1;
    s->tb.i = 1;
    s->tb.has_type = 1;
    s->tb.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    s->gemm_attrs[0] = &s->tb;
    s->gemm.attribute = s->gemm_attrs;
    s->gemm.n_attribute = 1;
    s->gemm.name = "/fc/Gemm";
    s->gemm.op_type = "Gemm";
    s->gemm_in[0] = "x", s->gemm_in[1] = "fc.weight", s->gemm_in[2] = "fc.bias";
    s->gemm.input = s->gemm_in;
    s->gemm.n_input = 3;
    s->gemm_out[0] = "h";
    s->gemm.output = s->gemm_out;
    s->gemm.n_output = 1;
    s->relu.name = "/Relu";
    s->relu.op_type = "Relu";
    s->relu_in[0] = "h";
    s->relu.input = s->relu_in;
    s->relu.n_input = 1;
    s->relu_out[0] = "y";
    s->relu.output = s->relu_out;
    s->relu.n_output = 1;
    s->nodes[0] = &s->gemm, s->nodes[1] = &s->relu;
    s->g.node = s->nodes;
    s->g.n_node = 2;
    onnx__tensor_proto__init(&s->w);
    onnx__tensor_proto__init(&s->b);
    for (int i = 0; i < 12; i++)
        s->wv[i] = 0.1f * (float)(i - 6);
    s->w.name = "fc.weight";
    s->w.has_data_type = 1;
    s->w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    s->wdims[0] = 3, s->wdims[1] = 4;
    s->w.dims = s->wdims;
    s->w.n_dims = 2;
    s->w.float_data = s->wv;
    s->w.n_float_data = 12;
    s->b.name = "fc.bias";
    s->b.has_data_type = 1;
    s->b.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    s->bdims[0] = 3;
    s->b.dims = s->bdims;
    s->b.n_dims = 1;
    s->b.float_data = s->bv;
    s->b.n_float_data = 3;
    s->inits[0] = &s->w, s->inits[1] = &s->b;
    s->g.initializer = s->inits;
    s->g.n_initializer = 2;
    Onnx__ValueInfoProto *vi[2] = {&s->x, &s->y};
    Onnx__TypeProto *ty[2] = {&s->xt, &s->yt};
    Onnx__TypeProto__Tensor *tt[2] = {&s->xtt, &s->ytt};
    Onnx__TensorShapeProto *sh[2] = {&s->xs, &s->ys};
    Onnx__TensorShapeProto__Dimension *d[2] = {s->xd, s->yd};
    Onnx__TensorShapeProto__Dimension **dp[2] = {s->xdp, s->ydp};
    const char *names[2] = {"x", "y"};
    int64_t cols[2] = {4, 3};
    for (int k = 0; k < 2; k++) {
        onnx__value_info_proto__init(vi[k]);
        onnx__type_proto__init(ty[k]);
        onnx__type_proto__tensor__init(tt[k]);
        onnx__tensor_shape_proto__init(sh[k]);
        for (int j = 0; j < 2; j++) {
            onnx__tensor_shape_proto__dimension__init(&d[k][j]);
            dp[k][j] = &d[k][j];
        }
        d[k][0].value_case = DIM_PARAM, d[k][0].dim_param = "N";
        d[k][1].value_case = DIM_VALUE;
        d[k][1].dim_value = cols[k];
        sh[k]->dim = dp[k];
        sh[k]->n_dim = 2;
        tt[k]->has_elem_type = 1;
        tt[k]->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
        tt[k]->shape = sh[k];
        ty[k]->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, ty[k]->tensor_type = tt[k];
        vi[k]->type = ty[k];
        vi[k]->name = (char *)names[k];
    }
    onnx__tensor_shape_proto__dimension__init(&s->xd[2]);
    s->xdp[2] = &s->xd[2];
    s->ins[0] = &s->x;
    s->outs[0] = &s->y;
    s->g.input = s->ins;
    s->g.n_input = 1;
    s->g.output = s->outs;
    s->g.n_output = 1;
}

/* Packs and imports s; returns the graph or NULL with err. */
static gpp_graph_t *s_import(const base_t *s, gpp_err_t *err)
{
    size_t n = onnx__model_proto__get_packed_size(&s->m);
    uint8_t *buf = malloc(n + 1);
    onnx__model_proto__pack(&s->m, buf);
    gpp_graph_t *g = gpp_onnx_parse(buf, n, "t.onnx", GPP_ONNX_LOSS_MSE, err);
    if (g && gpp_graph_finalize(g, err) < 0)
        gpp_graph_destroy(&g);
    free(buf);
    return g;
}

static void s_softmax(base_t *s)
{
    s->relu.op_type = "Softmax";
}
static void s_dynamic(base_t *s)
{
    s->xd[1].value_case = DIM_PARAM, s->xd[1].dim_param = "feat";
}
static void s_rank1(base_t *s)
{
    s->xs.n_dim = 1;
}
static void s_rank4(base_t *s)
{
    s->xs.n_dim = 3, s->xd[2].value_case = DIM_VALUE, s->xd[2].dim_value = 2;
}
static void s_double(base_t *s)
{
    s->w.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
}
static void s_xdouble(base_t *s)
{
    s->xtt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
}
static void s_short(base_t *s)
{
    s->w.n_float_data = 10;
}
static void s_baddim(base_t *s)
{
    s->wdims[0] = -3;
}
static void s_wshape(base_t *s)
{
    s->wdims[0] = 4, s->wdims[1] = 3;
}
static void s_order(base_t *s)
{
    s->nodes[0] = &s->relu, s->nodes[1] = &s->gemm;
}
static void s_missing(base_t *s)
{
    s->relu_in[0] = "hh";
}
static void s_twice(base_t *s)
{
    s->relu_out[0] = "h";
}
static void s_alpha(base_t *s)
{
    s->tb.name = "alpha", s->tb.has_f = 1, s->tb.f = 2.0f;
}
static void s_transa(base_t *s)
{
    s->tb.name = "transA";
}
static void s_domain(base_t *s)
{
    s->relu.domain = "com.microsoft";
}
static void s_nograph(base_t *s)
{
    s->m.graph = NULL;
}
static void s_noshape(base_t *s)
{
    s->xtt.shape = NULL;
}
static void s_nooutput(base_t *s)
{
    s->g.n_output = 0;
}
static void s_outconst(base_t *s)
{
    s->y.name = "fc.bias";
}
static void s_external(base_t *s)
{
    s->w.has_data_location = 1, s->w.data_location = 1;
}
static void s_nan(base_t *s)
{
    s->wv[5] = NAN;
}
static void s_inval(base_t *s)
{
    s->xtt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
}
static void s_const_in(base_t *s)
{
    s->gemm_in[0] = "fc.bias";
}
static void s_noinput(base_t *s)
{
    s->g.n_input = 0;
}
static void s_biasn(base_t *s)
{
    s->bdims[0] = 2, s->b.n_float_data = 2;
}
static void s_sparse(base_t *s)
{
    static Onnx__SparseTensorProto sp, *spp[1] = {&sp};
    onnx__sparse_tensor_proto__init(&sp);
    s->g.sparse_initializer = spp;
    s->g.n_sparse_initializer = 1;
}

/* The Relu as a Split / Slice of h [N, 3] with the given attribute, and
 * with the features as the axis (Split's axis -1, Slice's axes [-1]). */
static Onnx__AttributeProto s_a[3], *s_ap[3];
static void s_as(base_t *s, const char *op, const char *attr, int n, const int64_t *v, int outs)
{
    static int64_t iv[4], minus1[1] = {-1};
    static char *out[3] = {"y", "y2", "y3"};
    memcpy(iv, v, (size_t)n * sizeof *iv);
    for (int k = 0; k < 3; k++) {
        onnx__attribute_proto__init(&s_a[k]);
        s_ap[k] = &s_a[k];
    }
    s_a[0].name = (char *)attr;
    if (n == 1 && !strcmp(attr, "axis"))
        s_a[0].has_i = 1, s_a[0].i = v[0];
    else
        s_a[0].ints = iv, s_a[0].n_ints = (size_t)n;
    if (!strcmp(op, "Split"))
        s_a[1].name = "axis", s_a[1].has_i = 1, s_a[1].i = -1;
    else
        s_a[1].name = "axes", s_a[1].ints = minus1, s_a[1].n_ints = 1;
    s->relu.op_type = (char *)op;
    s->relu.attribute = s_ap;
    s->relu.n_attribute = strcmp(attr, "axis") ? 2 : 1;
    s->relu.output = out;
    s->relu.n_output = (size_t)outs;
}
static void s_split_axis(base_t *s)
{
    s_as(s, "Split", "axis", 1, (int64_t[]){0}, 1);
}
static void s_split_sum(base_t *s)
{
    s_as(s, "Split", "split", 2, (int64_t[]){1, 1}, 2);
}
static void s_split_zero(base_t *s)
{
    s_as(s, "Split", "split", 2, (int64_t[]){3, 0}, 2);
}
static void s_split_parts(base_t *s)
{
    s_as(s, "Split", "split", 3, (int64_t[]){1, 1, 1}, 2);
}
static void s_slice_axis(base_t *s)
{
    s_as(s, "Slice", "starts", 1, (int64_t[]){0}, 1);
    static char *in[4] = {"h", "fc.weight", "fc.weight", "fc.weight"};
    s->relu.input = in; /* starts from a float tensor */
    s->relu.n_input = 4;
}
static void s_slice_empty(base_t *s)
{
    static int64_t en[1] = {1};
    s_as(s, "Slice", "starts", 1, (int64_t[]){2}, 1);
    s_a[2].name = "ends", s_a[2].ints = en, s_a[2].n_ints = 1;
    s->relu.n_attribute = 3;
}

/* Split without sizes: equal parts (opset 18's num_outputs rule) */
static void t_split_equal(void)
{
    base_t s;
    gpp_err_t err = {{0}};
    s_base(&s);
    s_as(&s, "Split", "axis", 1, (int64_t[]){-1}, 3);
    s.yd[1].dim_value = 1; /* the graph output y is the first part */
    gpp_graph_t *g = s_import(&s, &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    for (int k = 0; g && k < 3; k++) {
        int id = s_find_op(g, k == 0 ? "y" : k == 1 ? "y2" : "y3");
        GPP_EXPECT(id >= 0 && g->ops[id].type == GPP_OP_SLICE && g->ops[id].start == k &&
                   g->ops[id].width == 1);
    }
    gpp_graph_destroy(&g);
}

/* The Relu as Reshape(h, shape) with an int64 constant shape. */
static void s_reshape_to(base_t *s, int n, const int64_t *shape)
{
    static Onnx__TensorProto t;
    static int64_t v[4], dims[1];
    static char *in[2] = {"h", "shape"};
    onnx__tensor_proto__init(&t);
    memcpy(v, shape, (size_t)n * sizeof *v);
    dims[0] = n;
    t.name = "shape", t.has_data_type = 1, t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t.dims = dims, t.n_dims = 1, t.int64_data = v, t.n_int64_data = (size_t)n;
    s->inits[2] = &t;
    s->g.n_initializer = 3;
    s->relu.op_type = "Reshape";
    s->relu.input = in;
    s->relu.n_input = 2;
}
static void s_reshape_rows(base_t *s)
{
    s_reshape_to(s, 3, (int64_t[]){0, 2, 2});
}
static void s_reshape_rank4(base_t *s)
{
    s_reshape_to(s, 4, (int64_t[]){0, 3, 1, 1});
}
static void s_reshape_fixed(base_t *s)
{
    s_reshape_to(s, 2, (int64_t[]){2, 3});
}
static void s_reshape_infer(base_t *s)
{
    s_reshape_to(s, 3, (int64_t[]){0, 2, -1});
}
static void s_transpose(base_t *s)
{
    s->relu.op_type = "Transpose";
}
static void s_unsq_batch(base_t *s)
{
    s_as(s, "Unsqueeze", "axes", 1, (int64_t[]){0}, 1);
}
/* a value_info for h [N, 3] that says otherwise */
static Onnx__ValueInfoProto *s_hinfo(base_t *s, int rank, int64_t d1)
{
    static Onnx__ValueInfoProto vi, *vip[1];
    static Onnx__TypeProto ty;
    static Onnx__TypeProto__Tensor tt;
    static Onnx__TensorShapeProto sh;
    static Onnx__TensorShapeProto__Dimension d[3], *dp[3];
    onnx__value_info_proto__init(&vi), onnx__type_proto__init(&ty);
    onnx__type_proto__tensor__init(&tt), onnx__tensor_shape_proto__init(&sh);
    for (int k = 0; k < 3; k++) {
        onnx__tensor_shape_proto__dimension__init(&d[k]);
        dp[k] = &d[k];
    }
    d[0].value_case = DIM_PARAM, d[0].dim_param = "batch";
    d[1].value_case = DIM_VALUE, d[1].dim_value = d1;
    d[2].value_case = DIM_PARAM,
    d[2].dim_param = "unk__0"; /* symbolic: an exporter's artifact, gpp's value counts */
    sh.dim = dp, sh.n_dim = (size_t)rank;
    tt.shape = &sh, ty.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE, ty.tensor_type = &tt,
    vi.type = &ty, vi.name = "h";
    vip[0] = &vi;
    s->g.value_info = vip;
    s->g.n_value_info = 1;
    return &vi;
}
static void s_vinfo(base_t *s)
{
    s_hinfo(s, 2, 5);
}
static void s_vinfo_rank(base_t *s)
{
    s_hinfo(s, 3, 1);
}
static void s_outinfo(base_t *s)
{
    s->yd[1].dim_value = 7;
}

/* value_info agreeing with gpp, or symbolic where gpp derives a size: fine */
static void t_value_info(void)
{
    base_t s;
    gpp_err_t err = {{0}};
    s_base(&s);
    Onnx__ValueInfoProto *vi = s_hinfo(&s, 2, 3);
    gpp_graph_t *g = s_import(&s, &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    gpp_graph_destroy(&g);
    vi->type->tensor_type->shape->dim[1]->value_case = DIM_PARAM;
    vi->type->tensor_type->shape->dim[1]->dim_param = "unk__1";
    g = s_import(&s, &err);
    GPP_EXPECT_MSG(g != NULL && g->ops[1].cols == 3, "%s", err.msg);
    gpp_graph_destroy(&g);
}

/* Gelu (opset 20): approximate absent or "none" is the exact erf form,
 * "tanh" the tanh one; anything else is refused at the node. */
static void t_gelu(void)
{
    static const struct {
        const char *approx; /* NULL: no attribute; "": an integer attribute */
        int form;           /* gpp_gelu_form_t, or -1: refused */
    } cases[] = {{NULL, GPP_GELU_ERF},
                 {"none", GPP_GELU_ERF},
                 {"tanh", GPP_GELU_TANH},
                 {"exact", -1},
                 {"", -1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        base_t s;
        Onnx__AttributeProto a, *attrs[1] = {&a};
        gpp_err_t err = {{0}};
        s_base(&s);
        s.relu.op_type = "Gelu";
        onnx__attribute_proto__init(&a);
        a.name = "approximate", a.has_type = 1, a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a.has_i = 1, a.i = 1;
        if (cases[i].approx && *cases[i].approx) {
            a.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, a.has_i = 0, a.has_s = 1;
            a.s.data = (uint8_t *)cases[i].approx, a.s.len = strlen(cases[i].approx);
        }
        if (cases[i].approx)
            s.relu.attribute = attrs, s.relu.n_attribute = 1;
        gpp_graph_t *g = s_import(&s, &err);
        int at = g ? s_find_op(g, "/Relu") : -1;
        if (cases[i].form >= 0)
            GPP_EXPECT_MSG(at >= 0 && g->ops[at].type == GPP_OP_GELU &&
                               g->ops[at].form == cases[i].form,
                           "case %zu: %s", i, g ? "another form" : err.msg);
        else
            GPP_EXPECT_MSG(!g && strstr(err.msg, "node 1 '/Relu' (Gelu): attribute 'approximate' "
                                                 "must be the string \"none\""),
                           "case %zu: '%s'", i, err.msg);
        gpp_graph_destroy(&g);
    }
}

static void t_errors(void)
{
    static const struct {
        const char *what;
        void (*mutate)(base_t *);
        const char *want1, *want2;
    } cases[] = {
        {"unsupported op", s_softmax, "node 1 '/Relu' (Softmax): unsupported op Softmax",
         "loss=ce"},
        {"dynamic shape", s_dynamic, "dynamic shape: graph input 'x' dimension 1 is 'feat'",
         "dynamic_axes"},
        {"rank 1 input", s_rank1, "graph input 'x' has rank 1", "[batch, features]"},
        {"rank 3 input into Gemm", s_rank4, "Gemm input 'x' must be 2-d", "/fc/Gemm"},
        {"double weight", s_double, "tensor 'fc.weight' has element type DOUBLE", "model.float()"},
        {"double input", s_xdouble, "graph input 'x' has element type DOUBLE", "float32"},
        {"short data", s_short, "tensor 'fc.weight' holds 10 elements", "truncated"},
        {"negative dim", s_baddim, "weight 'fc.weight' is [-3, 4]", "/fc/Gemm"},
        {"weight shape", s_wshape, "3 input features, but 'x' has 4", "fc.weight"},
        {"order", s_order, "input 'h' is not a graph input", "topological order"},
        {"missing value", s_missing, "input 'hh' is not a graph input", "/Relu"},
        {"value defined twice", s_twice, "value 'h' is defined twice", "/Relu"},
        {"gemm alpha", s_alpha, "alpha=2", "/fc/Gemm"},
        {"gemm transA", s_transa, "transA=1", "Linear"},
        {"foreign domain", s_domain, "operator domain 'com.microsoft'", "/Relu"},
        {"no graph", s_nograph, "no graph", "t.onnx"},
        {"no shape", s_noshape, "graph input 'x' has no tensor type with a shape", "example"},
        {"no outputs", s_nooutput, "no outputs", "t.onnx"},
        {"constant output", s_outconst, "graph output 'fc.bias' is not an activation", "t.onnx"},
        {"external data", s_external, "external file", "save_as_external_data=False"},
        {"nan weight", s_nan, "element 5 is not finite", "fc.weight"},
        {"integer input", s_inval, "input 'x' holds integer indices", "Gather"},
        {"constant as activation", s_const_in, "input 'fc.bias' must be an activation", "Gemm"},
        {"no inputs", s_noinput, "no inputs besides its initializers", "t.onnx"},
        {"bias size", s_biasn, "bias 'fc.bias' must hold 3 values", "/fc/Gemm"},
        {"sparse initializer", s_sparse, "sparse initializers", "dense"},
        {"split axis", s_split_axis, "node 1 '/Relu' (Split): gpp splits only along the features",
         "axis 0"},
        {"split sizes", s_split_sum, "split sizes give 2 parts of 2 features in all",
         "'h' 3 features"},
        {"split empty part", s_split_zero, "split size 2 is 0", "non-empty"},
        {"split parts", s_split_parts, "3 parts of 3 features", "has 2 outputs"},
        {"slice float axes", s_slice_axis, "tensor 'fc.weight' has element type FLOAT", "(Slice)"},
        {"reshape size", s_reshape_rows, "'h' [N, 3] would become [N, 2, 2]", "of the same size"},
        {"reshape rank 4", s_reshape_rank4, "'h' [N, 3] would become [N, 3, 1, 1]", "batch first"},
        {"reshape fixed batch", s_reshape_fixed, "fixed first dimension 2", "(Reshape)"},
        {"reshape infer", s_reshape_infer, "cannot infer dimension 2 of 'y' from 3 features",
         "/Relu"},
        {"transpose", s_transpose, "unsupported op Transpose", "self-attention pattern"},
        {"unsqueeze batch", s_unsq_batch, "axis 0: gpp keeps the batch as dimension 0",
         "(Unsqueeze)"},
        {"value_info size", s_vinfo,
         "value 'h' has dimension 1 = 5 in the file, but gpp derives "
         "[N, 3]",
         "re-export"},
        {"value_info rank", s_vinfo_rank, "value 'h' has rank 3 in the file", "[N, 3]"},
        {"graph output size", s_outinfo, "graph output 'y' has dimension 1 = 7", "[N, 3]"},
        {"slice empty", s_slice_empty, "Slice [2, 1) of 'h' (3 features) is empty", "/Relu"},
    };
    base_t s;
    gpp_err_t err = {{0}};
    s_base(&s);
    gpp_graph_t *g = s_import(&s, &err);
    GPP_EXPECT_MSG(g && g->n_ops == 4 && g->ops[1].bias == 1 && !strcmp(g->ops[1].name, "fc"),
                   "base model: %s", err.msg);
    if (g)
        GPP_EXPECT(gpp_graph_init_weight(g, 1, 0)[5] == s.wv[5]);
    gpp_graph_destroy(&g);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_base(&s);
        cases[i].mutate(&s);
        memset(&err, 0, sizeof err);
        g = s_import(&s, &err);
        GPP_EXPECT_MSG(g == NULL, "%s: accepted", cases[i].what);
        gpp_graph_destroy(&g);
        GPP_EXPECT_MSG(strstr(err.msg, cases[i].want1) && strstr(err.msg, cases[i].want2) &&
                           !strncmp(err.msg, "t.onnx", 6),
                       "%s: '%s'", cases[i].what, err.msg);
    }
    /* not protobuf at all */
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x0f};
    GPP_EXPECT(gpp_onnx_parse(junk, sizeof junk, "j.onnx", GPP_ONNX_LOSS_MSE, &err) == NULL &&
               strstr(err.msg, "j.onnx: not a valid ONNX file"));
}

int main(void)
{
    static const gpp_test_case_t cases[] = {{"branches", t_branches},
                                            {"residual", t_residual},
                                            {"split", t_split},
                                            {"split_equal", t_split_equal},
                                            {"reshape", t_reshape},
                                            {"flatten", t_flatten},
                                            {"value_info", t_value_info},
                                            {"attention", t_attention},
                                            {"mha", t_mha},
                                            {"spec", t_spec},
                                            {"gelu", t_gelu},
                                            {"gelu_tanh", t_gelu_tanh},
                                            {"errors", t_errors},
                                            {NULL, NULL}};
    return gpp_test_run(cases);
}
