/* test_onnx_wire: the nesting bound in front of protobuf-c (model/gpp_onnx_wire.c).
 *
 * Files nesting sub-graphs (ModelProto.graph -> GraphProto.node ->
 * NodeProto.attribute -> AttributeProto.g -> ...) or types
 * (ValueInfoProto.type -> TypeProto.sequence_type -> elem_type -> ...) are
 * written here byte by byte: GPP_ONNX_WIRE_DEPTH levels pass, one more is
 * refused naming the path, 100,000 levels (which would overflow the stack
 * inside protobuf-c's unpack) are refused without crashing, and a real
 * export with a deep but legal type appended still imports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_onnx.h"
#include "model/gpp_onnx_wire.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

/* A protobuf message written back to front: its bytes are p[start, cap). */
typedef struct {
    uint8_t *p;
    size_t start, cap;
} wbuf_t;

static void s_pre(wbuf_t *b, const void *data, size_t n)
{
    GPP_EXPECT(n <= b->start);
    b->start -= n;
    memcpy(b->p + b->start, data, n);
}

static void s_pre_varint(wbuf_t *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    s_pre(b, tmp, n);
}

/* The bytes written since `mark` (b->start then) become field `num`, a
 * length-delimited field (a message or a string). */
static void s_wrap(wbuf_t *b, uint32_t num, size_t mark)
{
    s_pre_varint(b, mark - b->start);
    s_pre_varint(b, (uint64_t)num << 3 | 2);
}

static void s_pre_str(wbuf_t *b, uint32_t num, const char *s)
{
    size_t mark = b->start;
    s_pre(b, s, strlen(s));
    s_wrap(b, num, mark);
}

/* ModelProto fields: graph 7; GraphProto: node 1, value_info 13; NodeProto:
 * output 2, op_type 4, attribute 5; AttributeProto: name 1, g 6;
 * ValueInfoProto: type 2; TypeProto: sequence_type 4; Sequence: elem_type 1
 * (onnx.proto, IR version 8). */
enum { MODEL_GRAPH = 7, GRAPH_NODE = 1, GRAPH_VALUE_INFO = 13, NODE_ATTRIBUTE = 5, ATTR_G = 6 };
enum { VI_TYPE = 2, TYPE_SEQUENCE = 4, SEQUENCE_ELEM = 1 };

/* A ModelProto whose innermost message sits `depth` levels below it:
 * sub-graphs (graph, node, attribute, g, node, ...) or types (graph,
 * value_info, type, sequence_type, elem_type, ...). Caller frees b->p. */
static wbuf_t s_nested(int depth, int types)
{
    static const uint32_t sub[] = {GRAPH_NODE, NODE_ATTRIBUTE, ATTR_G};
    static const uint32_t typ[] = {TYPE_SEQUENCE, SEQUENCE_ELEM};
    wbuf_t b = {.cap = (size_t)depth * 12 + 64};
    b.p = malloc(b.cap);
    b.start = b.cap;
    for (int k = depth - 1; k >= 0; k--) { /* the field entering level k + 1 */
        uint32_t f = k == 0   ? MODEL_GRAPH
                     : !types ? sub[(k - 1) % 3]
                     : k == 1 ? GRAPH_VALUE_INFO
                     : k == 2 ? VI_TYPE
                              : typ[(k - 3) % 2];
        s_wrap(&b, f, b.cap); /* around everything written so far */
    }
    return b;
}

static int s_check(const wbuf_t *b, gpp_err_t *err)
{
    return gpp_onnx_wire_check(b->p + b->start, b->cap - b->start, "t.onnx", err);
}

/* GPP_ONNX_WIRE_DEPTH levels pass; one more is refused, naming the path */
static void t_bound(void)
{
    for (int types = 0; types <= 1; types++) {
        gpp_err_t err = {{0}};
        wbuf_t ok = s_nested(GPP_ONNX_WIRE_DEPTH, types);
        wbuf_t deep = s_nested(GPP_ONNX_WIRE_DEPTH + 1, types);
        GPP_EXPECT_MSG(s_check(&ok, &err) == 0, "%d levels: %s", GPP_ONNX_WIRE_DEPTH, err.msg);
        GPP_EXPECT(s_check(&deep, &err) < 0);
        const char *want = types ? "t.onnx: graph.value_info[0].type.sequence_type.elem_type."
                                 : "t.onnx: graph.node[0].attribute[0].g.node[0].attribute[0].g.";
        GPP_EXPECT_MSG(strstr(err.msg, want) && strstr(err.msg, "nested more than 100 deep") &&
                           strstr(err.msg, "more)"),
                       "'%s'", err.msg);
        free(ok.p);
        free(deep.p);
    }
}

/* 100,000 levels: refused by gpp_onnx_parse before protobuf-c sees them */
static void t_deep(void)
{
    for (int types = 0; types <= 1; types++) {
        gpp_err_t err = {{0}};
        wbuf_t b = s_nested(100000, types);
        gpp_graph_t *g =
            gpp_onnx_parse(b.p + b.start, b.cap - b.start, "deep.onnx", GPP_ONNX_LOSS_MSE, &err);
        GPP_EXPECT(g == NULL);
        GPP_EXPECT_MSG(!strncmp(err.msg, "deep.onnx: graph.", 17) &&
                           strstr(err.msg, "nested more than 100 deep") &&
                           strstr(err.msg, "If/Loop/Scan"),
                       "'%s'", err.msg);
        gpp_graph_destroy(&g);
        free(b.p);
    }
}

/* Malformed wires: a length past the end, a cut varint, a group */
static void t_malformed(void)
{
    static const uint8_t past[] = {0x3a, 0x05, 0x0a, 0x00}, cut[] = {0x3a, 0x80},
                         group[] = {0x3b, 0x3c};
    static const struct {
        const uint8_t *p;
        size_t n;
    } c[] = {{past, sizeof past}, {cut, sizeof cut}, {group, sizeof group}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        gpp_err_t err = {{0}};
        GPP_EXPECT(gpp_onnx_wire_check(c[i].p, c[i].n, "m.onnx", &err) < 0);
        GPP_EXPECT_MSG(strstr(err.msg, "m.onnx: not a valid ONNX file: malformed protobuf field "
                                       "at byte 0"),
                       "'%s'", err.msg);
    }
}

/* The whole file (gpp_fixture_slurp); a missing or short file fails the test. */
static uint8_t *s_slurp(const char *path, size_t *len)
{
    long n = -1;
    uint8_t *b = gpp_fixture_slurp(path, &n);
    GPP_EXPECT_MSG(b && n >= 0, "cannot read %s (run from the source root)", path);
    *len = n > 0 ? (size_t)n : 0;
    return b;
}

/* A real export with more fields appended (protobuf merges a second
 * ModelProto.graph into the first): a value_info of a type nested to the
 * bound still imports; a node with a sub-graph is refused by the importer
 * naming the node and attribute. */
static void t_appended(void)
{
    size_t len = 0;
    uint8_t *base = s_slurp("tests/data/onnx/branches.onnx", &len);
    gpp_err_t err = {{0}};
    gpp_graph_t *g0 = base ? gpp_onnx_parse(base, len, "b.onnx", GPP_ONNX_LOSS_MSE, &err) : NULL;
    GPP_EXPECT_MSG(g0 != NULL, "%s", err.msg);

    wbuf_t t = s_nested(GPP_ONNX_WIRE_DEPTH, 1);
    uint8_t *buf = base ? malloc(len + (t.cap - t.start)) : NULL;
    if (buf) {
        memcpy(buf, base, len);
        memcpy(buf + len, t.p + t.start, t.cap - t.start);
        gpp_graph_t *g =
            gpp_onnx_parse(buf, len + (t.cap - t.start), "b.onnx", GPP_ONNX_LOSS_MSE, &err);
        GPP_EXPECT_MSG(g && g0 && g->n_ops == g0->n_ops, "%s", g ? "op count" : err.msg);
        gpp_graph_destroy(&g);
        free(buf);
    }
    free(t.p);

    /* graph { node { output "z" op_type "If" attribute { name "then_branch" g {} } } } */
    wbuf_t n = {.cap = 256};
    n.p = malloc(n.cap);
    n.start = n.cap;
    size_t graph = n.start, node = n.start, attr = n.start;
    s_wrap(&n, ATTR_G, n.start);
    s_pre_str(&n, 1, "then_branch");
    s_wrap(&n, NODE_ATTRIBUTE, attr);
    s_pre_str(&n, 4, "If");
    s_pre_str(&n, 2, "z");
    s_wrap(&n, GRAPH_NODE, node);
    s_wrap(&n, MODEL_GRAPH, graph);
    buf = base ? malloc(len + (n.cap - n.start)) : NULL;
    if (buf) {
        memcpy(buf, base, len);
        memcpy(buf + len, n.p + n.start, n.cap - n.start);
        gpp_graph_t *g =
            gpp_onnx_parse(buf, len + (n.cap - n.start), "b.onnx", GPP_ONNX_LOSS_MSE, &err);
        GPP_EXPECT(g == NULL);
        GPP_EXPECT_MSG(strstr(err.msg, "b.onnx: node") && strstr(err.msg, "(If): attribute "
                                                                          "'then_branch' is a "
                                                                          "sub-graph"),
                       "'%s'", err.msg);
        gpp_graph_destroy(&g);
        free(buf);
    }
    free(n.p);
    gpp_graph_destroy(&g0);
    free(base);
}

int main(void)
{
    static const gpp_test_case_t cases[] = {{"bound", t_bound},
                                            {"deep", t_deep},
                                            {"malformed", t_malformed},
                                            {"appended", t_appended},
                                            {NULL, NULL}};
    return gpp_test_run(cases);
}
