/* Tests of the model graph IR, the zoo and graph JSON (every op type and
 * attribute of the op table round-trips; attribute errors name the field). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_json.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h"
#include "tests/gpp_test.h"

static int s_count_type(const gpp_graph_t *g, gpp_op_type_t t)
{
    int n = 0;
    for (int i = 0; i < g->n_ops; i++)
        n += g->ops[i].type == t;
    return n;
}

static void t_zoo_defaults_match_appendix(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build("mmt", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    /* 4 branches x 8 layers, each layer one attention; hidden 1024, seq 256 */
    GPP_EXPECT(s_count_type(g, GPP_OP_ATTENTION) == 32);
    GPP_EXPECT(s_count_type(g, GPP_OP_INPUT) == 4);
    GPP_EXPECT(s_count_type(g, GPP_OP_CONCAT) == 1);
    GPP_EXPECT(gpp_graph_count_sinks(g) == 1);
    const gpp_op_t *in = &g->ops[0];
    GPP_EXPECT(in->rows == 256 && in->cols == 1024);
    /* a transformer layer: attention 4h^2+4h, two LN 2h each, ffn 2*h*4h + 4h + h */
    int64_t h = 1024, per_layer = 4 * h * h + 4 * h + 4 * h + 2 * h * 4096 + 4096 + h;
    int64_t expect = 32 * per_layer + 4 * 2 * h + (4 * h * 16 + 16);
    GPP_EXPECT_MSG(gpp_graph_params(g) == expect, "%lld vs %lld",
                   (long long)gpp_graph_params(g), (long long)expect);
    gpp_graph_destroy(&g);
    GPP_EXPECT(g == NULL);

    g = gpp_zoo_build("dlrm", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    GPP_EXPECT(s_count_type(g, GPP_OP_EMBEDDING_BAG) == 7);
    GPP_EXPECT(s_count_type(g, GPP_OP_INPUT) == 14);
    int cat = -1;
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].type == GPP_OP_CONCAT)
            cat = i;
    GPP_EXPECT(cat >= 0 && g->ops[cat].cols == 7 * 4096 + 7 * 64);
    for (int i = 0; i < g->n_ops; i++)
        if (g->ops[i].type == GPP_OP_EMBEDDING_BAG)
            GPP_EXPECT(g->ops[i].params == 1000000LL * 64 && g->ops[i].sparse_params);
    gpp_graph_destroy(&g);

    g = gpp_zoo_build("candle_uno", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    /* 7 branches x 4 layers + 2 top + output */
    GPP_EXPECT(s_count_type(g, GPP_OP_LINEAR) == 7 * 4 + 2 + 1);
    GPP_EXPECT(s_count_type(g, GPP_OP_INPUT) == 8); /* 7 features + dose */
    gpp_graph_destroy(&g);

    g = gpp_zoo_build("transformer", &err);
    GPP_EXPECT(g && s_count_type(g, GPP_OP_ATTENTION) == 8 && s_count_type(g, GPP_OP_CONCAT) == 0);
    gpp_graph_destroy(&g);
    g = gpp_zoo_build("case_study", &err);
    GPP_EXPECT(g && s_count_type(g, GPP_OP_ATTENTION) == 8 &&
               s_count_type(g, GPP_OP_LINEAR) == 2 * 4 * 2 + 1);
    gpp_graph_destroy(&g);
}

static void t_zoo_params_and_errors(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=2,layers=2,hidden=64,heads=4,seq=16", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    GPP_EXPECT(g && s_count_type(g, GPP_OP_ATTENTION) == 4);
    GPP_EXPECT(g && strstr(g->spec, "hidden=64") && strstr(g->spec, "ffn=4096"));
    gpp_graph_destroy(&g);

    g = gpp_zoo_build("nosuch", &err);
    GPP_EXPECT(g == NULL && strstr(err.msg, "unknown model 'nosuch'"));
    g = gpp_zoo_build("mmt:layerz=2", &err);
    GPP_EXPECT(g == NULL && strstr(err.msg, "unknown parameter 'layerz'") &&
               strstr(err.msg, "layers"));
    g = gpp_zoo_build("mmt:layers=abc", &err);
    GPP_EXPECT(g == NULL && strstr(err.msg, "must be an integer"));
    g = gpp_zoo_build("mmt:layers=0", &err);
    GPP_EXPECT(g == NULL && strstr(err.msg, ">= 1"));
    g = gpp_zoo_build("mmt:hidden=100,heads=16", &err);
    GPP_EXPECT(g == NULL && strstr(err.msg, "divide"));
    g = gpp_zoo_build("mmt:layers", &err);
    GPP_EXPECT(g == NULL && strstr(err.msg, "needs a value"));
}

static void t_figures(void)
{
    gpp_graph_t *g = gpp_graph_new("t");
    int x = gpp_graph_input(g, "x", 4, 8);
    int l = gpp_graph_linear(g, "fc", x, 16, 1);
    int r = gpp_graph_unary(g, GPP_OP_RELU, "relu", l);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", r);
    gpp_err_t err = {0};
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    const gpp_op_t *fc = &g->ops[l];
    GPP_EXPECT(fc->rows == 4 && fc->cols == 16);
    GPP_EXPECT(fc->params == 16 * 8 + 16);
    GPP_EXPECT_NEAR(fc->fwd_flops, 2.0 * 4 * 8 * 16, 0);
    GPP_EXPECT_NEAR(fc->bwd_flops, 2 * fc->fwd_flops, 0);
    GPP_EXPECT(fc->out_bytes == 4 * 16 * 4);
    /* each tensor once, at its owner: x keeps its output (fc's backward
       reads it); fc and relu are fused (gpp_op_fused_act), so fc's output is
       never materialised and relu keeps its own (its backward reads it, not
       its input); the loss keeps the gradient it computes */
    GPP_EXPECT(gpp_op_fused_act(g, NULL, l) == r);
    GPP_EXPECT(g->ops[x].stash_bytes == 4 * 8 * 4);
    GPP_EXPECT(fc->stash_bytes == 0);
    GPP_EXPECT(g->ops[r].stash_bytes == 4 * 16 * 4);
    GPP_EXPECT(g->ops[r + 1].stash_bytes == 4 * 16 * 4);
    GPP_EXPECT(g->ops[x].n_outputs == 1 && g->ops[x].outputs[0] == l);
    gpp_graph_destroy(&g);

    /* shape errors name the op */
    g = gpp_graph_new("bad");
    int a = gpp_graph_input(g, "a", 1, 8), b = gpp_graph_input(g, "b", 1, 9);
    gpp_graph_add2(g, "sum", a, b);
    GPP_EXPECT(gpp_graph_finalize(g, &err) == -1 && strstr(err.msg, "'sum'") &&
               strstr(err.msg, "shapes differ"));
    gpp_graph_destroy(&g);
}

static void t_json_roundtrip(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build("dlrm:dense_branches=2,sparse_branches=2,dense_in=32,"
                                   "hidden=32,rows=100,dim=8,bag=4",
                                   &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    char *s = gpp_graph_to_json(g);
    gpp_graph_t *h = gpp_graph_parse_json(s, "mem", &err);
    GPP_EXPECT_MSG(h != NULL, "%s", err.msg);
    if (h) {
        GPP_EXPECT(h->n_ops == g->n_ops);
        for (int i = 0; i < g->n_ops && i < h->n_ops; i++) {
            GPP_EXPECT(h->ops[i].type == g->ops[i].type);
            GPP_EXPECT(strcmp(h->ops[i].name, g->ops[i].name) == 0);
            GPP_EXPECT(h->ops[i].params == g->ops[i].params);
            GPP_EXPECT(h->ops[i].out_bytes == g->ops[i].out_bytes);
            GPP_EXPECT(h->ops[i].n_inputs == g->ops[i].n_inputs);
        }
    }
    free(s);
    gpp_graph_destroy(&h);
    gpp_graph_destroy(&g);
}

static void t_json_any_order_and_errors(void)
{
    gpp_err_t err = {0};
    /* ids out of order, consumer listed first */
    const char *ok = "{\"format\":\"gpp-graph/1\",\"name\":\"mine\",\"ops\":["
                     "{\"id\":7,\"name\":\"loss\",\"type\":\"loss_mse\",\"inputs\":[3]},"
                     "{\"id\":3,\"name\":\"fc\",\"type\":\"linear\",\"inputs\":[10],"
                     "\"out_features\":4},"
                     "{\"id\":10,\"name\":\"x\",\"type\":\"input\",\"rows\":1,\"cols\":8}]}";
    gpp_graph_t *g = gpp_graph_parse_json(ok, "mine.json", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    GPP_EXPECT(g && g->n_ops == 3 && strcmp(g->ops[0].name, "x") == 0 &&
               strcmp(g->ops[2].name, "loss") == 0);
    gpp_graph_destroy(&g);

    struct {
        const char *text, *want;
    } bad[] = {
        {"{\"format\":\"gpp-graph/1\",\n\"ops\":[ {\"id\":1,}]}", "bad.json:2:"},
        {"{\"format\":\"x\",\"ops\":[]}", "'format'"},
        {"{\"format\":\"gpp-graph/1\",\"ops\":[{\"id\":1,\"name\":\"a\",\"type\":\"linear\","
         "\"inputs\":[2],\"out_features\":2},{\"id\":2,\"name\":\"b\",\"type\":\"relu\","
         "\"inputs\":[1]}]}",
         "cycle"},
        {"{\"format\":\"gpp-graph/1\",\"ops\":[{\"id\":1,\"name\":\"a\",\"type\":\"conv\"}]}",
         "'type'"},
        {"{\"format\":\"gpp-graph/1\",\"ops\":[{\"id\":1,\"name\":\"a\",\"type\":\"relu\","
         "\"inputs\":[5]}]}",
         "refers to no op"},
        {"{\"format\":\"gpp-graph/1\",\"ops\":[{\"id\":1,\"name\":\"a\",\"type\":\"input\","
         "\"rows\":\"x\",\"cols\":3}]}",
         "'rows'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        g = gpp_graph_parse_json(bad[i].text, "bad.json", &err);
        GPP_EXPECT_MSG(g == NULL && strstr(err.msg, bad[i].want), "case %zu: '%s'", i, err.msg);
        gpp_graph_destroy(&g);
    }
}

/* A graph with an op of every type, opaque included. */
static gpp_graph_t *s_every_type(void)
{
    gpp_graph_t *g = gpp_graph_new("every");
    int x = gpp_graph_input(g, "x", 4, 8);
    int ln = gpp_graph_unary(g, GPP_OP_LAYERNORM, "ln", x);
    int at = gpp_graph_attention(g, "attn", ln, 2);
    int a = gpp_graph_add2(g, "add", x, at);
    int fc = gpp_graph_linear(g, "fc", a, 6, 0);
    int r = gpp_graph_unary(g, GPP_OP_RELU, "relu", fc);
    int ge = gpp_graph_unary(g, GPP_OP_GELU, "gelu", r);
    gpp_graph_unary(g, GPP_OP_LOSS_CE, "ce", ge);
    int idx = gpp_graph_input_indices(g, "idx", 3, 10);
    int emb = gpp_graph_embedding_bag(g, "emb", idx, 12, 6);
    int d = gpp_graph_input(g, "d", 1, 5);
    int cat_in[2] = {emb, d};
    int cat = gpp_graph_concat(g, "cat", 2, cat_in);
    int sl = gpp_graph_slice(g, "slice", cat, 2, 7);
    int rs = gpp_graph_reshape(g, "reshape", sl, 7, 1);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "mse", rs);
    int op = gpp_graph_add(g, GPP_OP_OPAQUE, "prof", 1, &r);
    gpp_op_t *o = gpp_graph_op(g, op);
    o->params = 12, o->out_bytes = 40, o->stash_bytes = 16;
    o->fwd_flops = 1.5e3, o->bwd_flops = 3e3;
    /* the PyTorch modules' types */
    int tok = gpp_graph_input_indices(g, "tok", 5, 10);
    int e = gpp_graph_add(g, GPP_OP_EMBEDDING, "emb2", 1, &tok);
    g->ops[e].table_rows = 10, g->ops[e].dim = 4, g->ops[e].update = GPP_TABLE_DENSE;
    int pa = gpp_graph_add(g, GPP_OP_PARAM_ADD, "pos", 1, &e);
    g->ops[pa].lead = 1;
    int dr = gpp_graph_add(g, GPP_OP_DROPOUT, "drop", 1, &pa);
    g->ops[dr].p = 0.25;
    int ca_in[2] = {dr, x};
    int img = gpp_graph_input(g, "img", 2, 16);
    int pe = gpp_graph_add(g, GPP_OP_PATCH_EMBED, "patch", 1, &img);
    g->ops[pe].height = 4, g->ops[pe].patch = 2, g->ops[pe].out_features = 8;
    ca_in[0] = pe;
    int ca = gpp_graph_add(g, GPP_OP_CROSS_ATTENTION, "xattn", 2, ca_in);
    g->ops[ca].heads = 2;
    int tr = gpp_graph_add(g, GPP_OP_TRANSPOSE, "tr", 1, &dr);
    int mm_in[2] = {dr, tr};
    int mm = gpp_graph_add(g, GPP_OP_MATMUL, "mm", 2, mm_in);
    int tu = gpp_graph_add(g, GPP_OP_TRIU, "triu", 1, &mm);
    g->ops[tu].offset = 1;
    int rd = gpp_graph_add(g, GPP_OP_REDUCE, "pool", 1, &ca);
    g->ops[rd].mode = GPP_REDUCE_MAX;
    int sg = gpp_graph_unary(g, GPP_OP_SIGMOID, "sig", rd);
    int th = gpp_graph_unary(g, GPP_OP_TANH, "tanh", sg);
    int st_in[2] = {th, th};
    int st = gpp_graph_add(g, GPP_OP_STACK, "stack", 2, st_in);
    gpp_graph_unary(g, GPP_OP_LOSS_BCE, "bce", st);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "mse2", tu);
    return g;
}

static void t_json_every_type_roundtrip(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = s_every_type();
    GPP_EXPECT_MSG(gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    int seen[GPP_OP__COUNT] = {0};
    for (int i = 0; i < g->n_ops; i++)
        seen[g->ops[i].type] = 1;
    for (int t = 0; t < GPP_OP__COUNT; t++)
        GPP_EXPECT_MSG(seen[t], "no %s op in the test graph", gpp_op_type_name((gpp_op_type_t)t));
    char *s = gpp_graph_to_json(g);
    gpp_graph_t *h = gpp_graph_parse_json(s, "every.json", &err);
    GPP_EXPECT_MSG(h != NULL, "%s", err.msg);
    for (int i = 0; h && i < g->n_ops; i++) {
        const gpp_op_t *a = &g->ops[i], *b = &h->ops[i];
        const gpp_op_info_t *T = &gpp_optable[a->type];
        GPP_EXPECT(a->type == b->type && strcmp(a->name, b->name) == 0);
        for (int k = 0; k < T->n_attrs; k++)
            GPP_EXPECT_MSG(gpp_op_attr_get(a, &T->attrs[k]) == gpp_op_attr_get(b, &T->attrs[k]),
                           "op %s: attribute %s", a->name, T->attrs[k].name);
        GPP_EXPECT_MSG(a->rows == b->rows && a->cols == b->cols && a->params == b->params &&
                           a->fwd_flops == b->fwd_flops && a->bwd_flops == b->bwd_flops &&
                           a->out_bytes == b->out_bytes && a->stash_bytes == b->stash_bytes &&
                           a->io_bytes == b->io_bytes && a->weight_io_bytes == b->weight_io_bytes &&
                           a->sparse_params == b->sparse_params,
                       "op %s: figures differ after the round trip", a->name);
    }
    free(s);
    gpp_graph_destroy(&h);
    gpp_graph_destroy(&g);
}

static void t_attribute_errors(void)
{
    gpp_err_t err = {0};
/* an input x [1, 8], then the op under test */
#define HEAD                                                                                       \
    "{\"format\":\"gpp-graph/1\",\"ops\":["                                                        \
    "{\"id\":0,\"name\":\"x\",\"type\":\"input\",\"cols\":8},"
    struct {
        const char *text, *want;
    } bad[] = {
        {HEAD "{\"id\":1,\"name\":\"fc\",\"type\":\"linear\",\"inputs\":[0]}]}",
         "field 'out_features' is required for linear ops"},
        {HEAD "{\"id\":1,\"name\":\"fc\",\"type\":\"linear\",\"inputs\":[0],"
              "\"out_features\":4,\"bias\":2}]}",
         "bias must be in [0, 1]"},
        {HEAD "{\"id\":1,\"name\":\"at\",\"type\":\"attention\",\"inputs\":[0],\"heads\":0}]}",
         "heads must be >= 1"},
        {HEAD "{\"id\":1,\"name\":\"at\",\"type\":\"attention\",\"inputs\":[0],\"heads\":3}]}",
         "must divide the hidden size 8"},
        {HEAD "{\"id\":1,\"name\":\"s\",\"type\":\"slice\",\"inputs\":[0],\"start\":6,"
              "\"width\":3}]}",
         "columns [6, 9) exceed the 8 of input 'x'"},
        {HEAD "{\"id\":1,\"name\":\"s\",\"type\":\"slice\",\"inputs\":[0]}]}",
         "field 'width' is required for slice ops"},
        {HEAD "{\"id\":1,\"name\":\"fc\",\"type\":\"linear\",\"inputs\":[0],"
              "\"out_features\":4.5}]}",
         "field 'out_features' must be an integer"},
        {"{\"format\":\"gpp-graph/1\",\"ops\":[{\"id\":0,\"name\":\"x\",\"type\":\"input\","
         "\"cols\":8,\"input_kind\":\"sparse\"}]}",
         "field 'input_kind' must be \"dense\" or \"indices\""},
        {"{\"format\":\"gpp-graph/1\",\"ops\":[{\"id\":0,\"name\":\"x\",\"type\":\"input\"}]}",
         "field 'cols' is required for input ops"},
        {HEAD "{\"id\":1,\"name\":\"p\",\"type\":\"opaque\",\"inputs\":[0],\"fwd_flops\":-1}]}",
         "field 'fwd_flops' must be a non-negative number"},
        {HEAD "{\"id\":1,\"name\":\"r\",\"type\":\"relu\",\"inputs\":[0,0]}]}",
         "expected 1 input(s), got 2"},
    };
#undef HEAD
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err.msg[0] = 0;
        gpp_graph_t *g = gpp_graph_parse_json(bad[i].text, "a.json", &err);
        GPP_EXPECT_MSG(g == NULL && strstr(err.msg, bad[i].want) && strstr(err.msg, "a.json"),
                       "case %zu: '%s'", i, err.msg);
        gpp_graph_destroy(&g);
    }
    /* ranges hold for graphs built in code too */
    gpp_graph_t *g = gpp_graph_new("code");
    int x = gpp_graph_input(g, "x", 1, 4);
    gpp_graph_linear(g, "fc", x, 0, 1);
    GPP_EXPECT(gpp_graph_finalize(g, &err) == -1 && strstr(err.msg, "'fc' (linear)") &&
               strstr(err.msg, "out_features must be >= 1"));
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {
    {"zoo_defaults_match_appendix", t_zoo_defaults_match_appendix},
    {"zoo_params_and_errors", t_zoo_params_and_errors},
    {"figures", t_figures},
    {"json_roundtrip", t_json_roundtrip},
    {"json_any_order_and_errors", t_json_any_order_and_errors},
    {"json_every_type_roundtrip", t_json_every_type_roundtrip},
    {"attribute_errors", t_attribute_errors},
    {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
