/* test_graph_json: the gpp-graph/1 reader and writer (model/gpp_graph_json.c).
 *
 * Every malformed input is refused with a message that names the place: the
 * origin (file or file:line:col for bad JSON), the op and the field. A
 * table of bad documents, each with the words its message must hold; then
 * the good paths: ops in any order with any distinct ids, every attribute,
 * a write + read round trip, and the file errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpp_json.h"
#include "model/gpp_graph.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

#define HEAD "{\"format\": \"gpp-graph/1\", \"name\": \"t\", \"ops\": ["
#define IN0 "{\"id\": 0, \"name\": \"x\", \"type\": \"input\", \"inputs\": [], \"cols\": 8}"
#define LOSS(id, in)                                                                               \
    "{\"id\": " #id ", \"name\": \"loss\", \"type\": \"loss_mse\", \"inputs\": [" #in "]}"

/* op id, name, type, inputs (ids), more attributes (", \"k\": v") */
#define OP(id, name, type, ins, more)                                                              \
    "{\"id\": " #id ", \"name\": \"" name "\", \"type\": \"" type "\", \"inputs\": [" ins "]" more \
    "}"
/* a dense input of `rows` x 8 features; an indices input over `range` rows */
#define IN(id, name, rows) OP(id, name, "input", "", ", \"rows\": " #rows ", \"cols\": 8")
#define IDS(id, range)                                                                             \
    OP(id, "ids", "input", "",                                                                     \
       ", \"cols\": 4, \"input_kind\": \"indices\", \"table_rows\": " #range)
#define EMB ", \"table_rows\": 10, \"dim\": 4"

typedef struct {
    const char *what;
    const char *json;
    const char *words[3]; /* each must be in the message */
} s_bad_t;

static const s_bad_t S_BAD[] = {
    {"malformed JSON: line and column",
     "{\"format\": \"gpp-graph/1\",\n \"ops\": [ {\"id\": 0,, } ]}",
     {"g.json:2:", "malformed JSON near"}},
    {"empty text", "", {"g.json:1:1: malformed JSON", "<end of input>"}},
    {"trailing garbage", "{} x", {"g.json:1:", "malformed JSON"}},
    {"not a graph file",
     "{\"format\": \"gpp-plan/1\"}",
     {"g.json: field 'format' must be", "--profile"}},
    {"format not a string", "{\"format\": 1}", {"field 'format' must be"}},
    {"no ops", "{\"format\": \"gpp-graph/1\"}", {"g.json: field 'ops' must be a non-empty array"}},
    {"empty ops", HEAD "]}", {"field 'ops' must be a non-empty array"}},
    {"op not an object", HEAD "3]}", {"g.json: ops[0] must be an object"}},
    {"id missing", HEAD "{\"name\": \"x\"}]}", {"ops[0]: field 'id' must be an integer"}},
    {"id not an integer", HEAD IN0 ", {\"id\": 1.5}]}", {"ops[1]: field 'id' must be an integer"}},
    {"duplicate id", HEAD IN0 ", " IN0 "]}", {"ops[0] and ops[1] share id 0"}},
    {"name missing", HEAD "{\"id\": 7, \"type\": \"input\"}]}", {"op id 7: field 'name' must be"}},
    {"name empty",
     HEAD "{\"id\": 7, \"name\": \"\", \"type\": \"input\"}]}",
     {"op id 7: field 'name'"}},
    {"name too long",
     HEAD "{\"id\": 7, \"name\": \""
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaa"
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
          "aaaaaaaa"
          "\", \"type\": \"input\"}]}",
     {"op id 7: field 'name' must be a string of 1.."}},
    {"unknown op type",
     HEAD "{\"id\": 0, \"name\": \"x\", \"type\": \"frobnicate\"}]}",
     {"g.json: op 'x': field 'type' must be one of", "opaque"}},
    {"type not a string",
     HEAD "{\"id\": 0, \"name\": \"x\", \"type\": 3}]}",
     {"op 'x': field 'type'"}},
    {"inputs not an array",
     HEAD "{\"id\": 0, \"name\": \"x\", \"type\": \"input\", \"inputs\": 0}]}",
     {"op 'x': field 'inputs' must be an array of op ids"}},
    {"input to no op",
     HEAD IN0 ", {\"id\": 1, \"name\": \"r\", \"type\": \"relu\", \"inputs\": [9]}]}",
     {"op 'r': input 0 refers to no op id in this file"}},
    {"input not a number",
     HEAD IN0 ", {\"id\": 1, \"name\": \"r\", \"type\": \"relu\", \"inputs\": [\"x\"]}]}",
     {"op 'r': input 0 refers to no op id"}},
    {"op is its own input",
     HEAD IN0 ", {\"id\": 1, \"name\": \"r\", \"type\": \"relu\", \"inputs\": [1]}]}",
     {"op 'r' lists itself as an input"}},
    {"cycle",
     HEAD IN0 ", {\"id\": 1, \"name\": \"a\", \"type\": \"add\", \"inputs\": [0, 2]},"
              " {\"id\": 2, \"name\": \"b\", \"type\": \"relu\", \"inputs\": [1]}]}",
     {"g.json: the ops form a cycle through op id 1 'a'", "acyclic"}},
    {"integer attribute of the wrong type",
     HEAD "{\"id\": 0, \"name\": \"x\", \"type\": \"input\", \"inputs\": [], \"cols\": \"8\"}]}",
     {"op 'x': field 'cols' must be an integer"}},
    {"fractional attribute",
     HEAD IN0 ", {\"id\": 1, \"name\": \"fc\", \"type\": \"linear\", \"inputs\": [0], "
              "\"out_features\": 2.5}]}",
     {"op 'fc': field 'out_features' must be an integer"}},
    {"bad heads",
     HEAD IN0
     ", {\"id\": 1, \"name\": \"at\", \"type\": \"attention\", \"inputs\": [0], \"heads\": []}]}",
     {"op 'at': field 'heads' must be an integer"}},
    {"bad input_kind",
     HEAD "{\"id\": 0, \"name\": \"x\", \"type\": \"input\", \"inputs\": [], \"input_kind\": "
          "\"sparse\", \"cols\": 4}]}",
     {"g.json: op", "'x'", "input_kind"}},
    {"negative opaque size",
     HEAD IN0
     ", {\"id\": 1, \"name\": \"o\", \"type\": \"opaque\", \"inputs\": [0], \"params\": -1}]}",
     {"g.json: op 1 'o' (opaque): params must be >= 0"}},
    {"negative opaque flops",
     HEAD IN0
     ", {\"id\": 1, \"name\": \"o\", \"type\": \"opaque\", \"inputs\": [0], \"fwd_flops\": -2}]}",
     {"op 'o': field 'fwd_flops' must be a non-negative number"}},
    {"opaque flops not a number",
     HEAD IN0 ", {\"id\": 1, \"name\": \"o\", \"type\": \"opaque\", \"inputs\": [0], "
              "\"bwd_flops\": \"x\"}]}",
     {"op 'o': field 'bwd_flops'"}},
    /* shapes and arities (gpp_graph_finalize), prefixed with the origin */
    {"wrong arity",
     HEAD IN0 ", " OP(1, "r", "relu", "0, 0", "") "]}",
     {"g.json: op 1 'r' (relu): expected 1 input(s), got 2"}},
    {"too few inputs",
     HEAD IN0 ", " OP(1, "c", "concat", "", "") "]}",
     {"g.json: op 1 'c' (concat): expected at least 1 input(s), got 0"}},
    {"input with inputs",
     HEAD IN0 ", " OP(1, "y", "input", "0", ", \"cols\": 2") "]}",
     {"g.json: op 1 'y' (input): expected 0 input(s), got 1"}},
    {"empty input",
     HEAD OP(0, "x", "input", "", ", \"cols\": 0") "]}",
     {"g.json: op 0 'x'", ">= 1"}},
    {"indices without a range",
     HEAD IDS(0, 0) "]}",
     {"g.json: op 0 'ids' (input): an indices input needs table_rows >= 1"}},
    {"linear without outputs",
     HEAD IN0 ", " OP(1, "fc", "linear", "0", "") "]}",
     {"g.json: op 'fc': field 'out_features' is required for linear ops"}},
    {"heads not dividing",
     HEAD IN0 ", " OP(1, "at", "attention", "0", ", \"heads\": 3") "]}",
     {"g.json: op 1 'at'", "heads"}},
    {"causal not 0 or 1",
     HEAD IN0 ", " OP(1, "at", "attention", "0", ", \"heads\": 2, \"causal\": 2") "]}",
     {"g.json: op 1 'at'", "causal"}},
    {"gelu form not a known one",
     HEAD IN0 ", " OP(1, "g", "gelu", "0", ", \"form\": \"none\"") "]}",
     {"g.json: op 'g': field 'form' must be \"tanh\" or \"erf\""}},
    {"gelu form a number",
     HEAD IN0 ", " OP(1, "g", "gelu", "0", ", \"form\": 1") "]}",
     {"g.json: op 'g': field 'form' must be"}},
    {"embedding of dense features",
     HEAD IN0 ", " OP(1, "e", "embedding_bag", "0", EMB) "]}",
     {"g.json: op 1 'e' (embedding_bag): input 'x' must be an indices input"}},
    {"embedding without a table",
     HEAD IDS(0, 10) ", " OP(1, "e", "embedding_bag", "0", "") "]}",
     {"g.json: op 'e': field 'table_rows' is required for embedding_bag ops"}},
    {"indices beyond the table",
     HEAD IDS(0, 1000) ", " OP(1, "e", "embedding_bag", "0", EMB) "]}",
     {"g.json: op 1 'e' (embedding_bag): indices from 'ids' range over 1000 rows but the table has "
      "10"}},
    {"indices into a relu",
     HEAD IDS(0, 10) ", " OP(1, "r", "relu", "0", "") "]}",
     {"g.json: op 1 'r' (relu): input 'ids' holds embedding indices"}},
    {"indices into a concat",
     HEAD IDS(0, 10) ", " IN(1, "x", 1) ", " OP(2, "c", "concat", "1, 0", "") "]}",
     {"g.json: op 2 'c' (concat): input 'ids' holds embedding indices"}},
    {"concat of unequal rows",
     HEAD IN(0, "a", 1) ", " IN(1, "b", 2) ", " OP(2, "c", "concat", "0, 1", "") "]}",
     {"g.json: op 2 'c' (concat): input 'b' has 2 rows"}},
    {"add of unequal shapes",
     HEAD IN0 ", " OP(1, "fc", "linear", "0", ", \"out_features\": 4") ", " OP(2, "s", "add",
                                                                               "0, 1", "") "]}",
     {"g.json: op 2 's' (add): shapes differ"}},
    {"one class",
     HEAD IN0 ", " OP(1, "fc", "linear", "0", ", \"out_features\": 1") ", " OP(2, "ce", "loss_ce",
                                                                               "1", "") "]}",
     {"g.json: op 2 'ce' (loss_ce): needs >= 2 classes"}},
    {"two ops of one name", HEAD IN0 ", " OP(1, "x", "relu", "0", "") "]}", {"g.json", "'x'"}},
    {NULL, NULL, {NULL}},
};

static void t_bad_documents(void)
{
    for (const s_bad_t *b = S_BAD; b->what; b++) {
        gpp_err_t err = {{0}};
        gpp_graph_t *g = gpp_graph_parse_json(b->json, "g.json", &err);
        GPP_EXPECT_MSG(g == NULL, "%s: accepted", b->what);
        gpp_graph_destroy(&g);
        for (int w = 0; w < 3 && b->words[w]; w++)
            GPP_EXPECT_MSG(strstr(err.msg, b->words[w]), "%s: '%s' lacks '%s'", b->what, err.msg,
                           b->words[w]);
        if (getenv("GPP_TEST_VERBOSE"))
            printf("  %-36s %s\n", b->what, err.msg);
    }
}

/* Ops out of order with sparse ids: sorted topologically, ids renumbered,
 * attributes kept. */
static void t_any_order(void)
{
    const char *json = HEAD LOSS(
        90, 40) ", "
                "{\"id\": 40, \"name\": \"fc\", \"type\": \"linear\", \"inputs\": [-3], "
                "\"out_features\": 4, \"bias\": 0},"
                "{\"id\": -3, \"name\": \"x\", \"type\": \"input\", \"inputs\": [], \"rows\": 2, "
                "\"cols\": 8, \"input_kind\": \"dense\"}]}";
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_parse_json(json, "order.json", &err);
    GPP_EXPECT_MSG(g, "%s", err.msg);
    if (!g)
        return;
    GPP_EXPECT(g->n_ops == 3 && strcmp(g->name, "t") == 0 && strcmp(g->spec, "order.json") == 0);
    GPP_EXPECT(strcmp(g->ops[0].name, "x") == 0 && g->ops[0].rows == 2 && g->ops[0].cols == 8);
    GPP_EXPECT(strcmp(g->ops[1].name, "fc") == 0 && g->ops[1].out_features == 4 && !g->ops[1].bias);
    GPP_EXPECT(g->ops[1].n_inputs == 1 && g->ops[1].inputs[0] == 0);
    GPP_EXPECT(g->ops[1].params == 4 * 8);
    GPP_EXPECT(g->ops[2].type == GPP_OP_LOSS_MSE && g->ops[2].inputs[0] == 1);
    gpp_graph_destroy(&g);
}

/* Without a name the origin names the graph; an index input and an
 * embedding; opaque ops carry their given costs. */
static void t_attributes(void)
{
    const char *json =
        "{\"format\": \"gpp-graph/1\", \"ops\": ["
        "{\"id\": 0, \"name\": \"ids\", \"type\": \"input\", \"cols\": 4, \"table_rows\": 100, "
        "\"input_kind\": \"indices\"},"
        "{\"id\": 1, \"name\": \"emb\", \"type\": \"embedding_bag\", \"inputs\": [0], "
        "\"table_rows\": 100, \"dim\": 8},"
        "{\"id\": 2, \"name\": \"op\", \"type\": \"opaque\", \"inputs\": [1], \"params\": 10, "
        "\"out_bytes\": 32, \"stash_bytes\": 16, \"fwd_flops\": 1e3, \"bwd_flops\": 2e3}]}";
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_parse_json(json, "attrs.json", &err);
    GPP_EXPECT_MSG(g, "%s", err.msg);
    if (!g)
        return;
    GPP_EXPECT(strcmp(g->name, "attrs.json") == 0);
    GPP_EXPECT(g->ops[0].input_kind == GPP_INPUT_INDICES && g->ops[0].table_rows == 100);
    GPP_EXPECT(g->ops[1].dim == 8 && g->ops[1].params == 800);
    GPP_EXPECT(g->ops[2].params == 10 && g->ops[2].out_bytes == 32 && g->ops[2].stash_bytes == 16);
    GPP_EXPECT(g->ops[2].fwd_flops == 1e3 && g->ops[2].bwd_flops == 2e3);
    /* written and read again: the same text */
    char *j1 = gpp_graph_to_json(g);
    gpp_graph_t *h = j1 ? gpp_graph_parse_json(j1, "attrs.json", &err) : NULL;
    GPP_EXPECT_MSG(h, "%s", err.msg);
    char *j2 = h ? gpp_graph_to_json(h) : NULL;
    GPP_EXPECT(j1 && j2 && strcmp(j1, j2) == 0);
    free(j1);
    free(j2);
    gpp_graph_destroy(&h);
    gpp_graph_destroy(&g);
}

/* attention's causal: default 0, kept through write + read; the cost
 * model counts a causal attention as an unmasked one (no work skipped) */
static void t_causal(void)
{
    const char *json = "{\"format\": \"gpp-graph/1\", \"ops\": [" IN(0, "x", 4) ", " OP(
        1, "a", "attention", "0", ", \"heads\": 2") ", " OP(2, "c", "attention", "0",
                                                            ", \"heads\": 2, \"causal\": 1") "]}";
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_parse_json(json, "c.json", &err), *h = NULL;
    GPP_EXPECT_MSG(g, "%s", err.msg);
    if (!g)
        return;
    GPP_EXPECT(g->ops[1].causal == 0 && g->ops[2].causal == 1);
    GPP_EXPECT(g->ops[1].fwd_flops == g->ops[2].fwd_flops &&
               g->ops[1].bwd_flops == g->ops[2].bwd_flops &&
               g->ops[1].stash_bytes == g->ops[2].stash_bytes);
    char *j = gpp_graph_to_json(g);
    h = j ? gpp_graph_parse_json(j, "c.json", &err) : NULL;
    GPP_EXPECT_MSG(h && h->ops[1].causal == 0 && h->ops[2].causal == 1, "%s", err.msg);
    free(j);
    gpp_graph_destroy(&h);
    gpp_graph_destroy(&g);
}

/* gelu's form: default tanh (what a graph without it always meant), "erf"
 * read, both kept through write + read; the same cost either way */
static void t_gelu_form(void)
{
    const char *json = "{\"format\": \"gpp-graph/1\", \"ops\": [" IN(0, "x", 4) ", " OP(
        1, "t", "gelu", "0", "") ", " OP(2, "e", "gelu", "0", ", \"form\": \"erf\"") "]}";
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_parse_json(json, "g.json", &err), *h = NULL;
    GPP_EXPECT_MSG(g, "%s", err.msg);
    if (!g)
        return;
    GPP_EXPECT(g->ops[1].form == GPP_GELU_TANH && g->ops[2].form == GPP_GELU_ERF);
    GPP_EXPECT(g->ops[1].fwd_flops == g->ops[2].fwd_flops &&
               g->ops[1].bwd_flops == g->ops[2].bwd_flops &&
               g->ops[1].io_bytes == g->ops[2].io_bytes);
    char *j = gpp_graph_to_json(g);
    GPP_EXPECT(j && strstr(j, "\"form\":\t\"tanh\"") && strstr(j, "\"form\":\t\"erf\""));
    h = j ? gpp_graph_parse_json(j, "g.json", &err) : NULL;
    GPP_EXPECT_MSG(h && h->ops[1].form == GPP_GELU_TANH && h->ops[2].form == GPP_GELU_ERF, "%s",
                   err.msg);
    free(j);
    gpp_graph_destroy(&h);
    gpp_graph_destroy(&g);
}

/* Every zoo-like shape through the writer and back: the same graph. */
static void t_round_trip(void)
{
    gpp_graph_t *a = gpp_fixture_diamond(16);
    char *path = gpp_fixture_tmpfile("graph_json");
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_graph_write_json(a, path, &err) == 0, "%s", err.msg);
    gpp_graph_t *b = gpp_graph_read_json(path, &err);
    GPP_EXPECT_MSG(b, "%s", err.msg);
    if (b) {
        GPP_EXPECT(a->n_ops == b->n_ops);
        for (int i = 0; i < a->n_ops && i < b->n_ops; i++) {
            const gpp_op_t *x = &a->ops[i], *y = &b->ops[i];
            GPP_EXPECT_MSG(strcmp(x->name, y->name) == 0 && x->type == y->type &&
                               x->n_inputs == y->n_inputs && x->rows == y->rows &&
                               x->cols == y->cols && x->params == y->params,
                           "op %d: %s vs %s", i, x->name, y->name);
            for (int k = 0; k < x->n_inputs && k < y->n_inputs; k++)
                GPP_EXPECT(x->inputs[k] == y->inputs[k]);
        }
        /* the reader records the file as the graph's spec */
        GPP_EXPECT(strcmp(b->spec, path) == 0);
        snprintf(b->spec, sizeof b->spec, "%s", a->spec);
        char *ja = gpp_graph_to_json(a), *jb = gpp_graph_to_json(b);
        GPP_EXPECT(ja && jb && strcmp(ja, jb) == 0);
        free(ja);
        free(jb);
    }
    gpp_graph_destroy(&b);
    gpp_graph_destroy(&a);
    unlink(path);
    free(path);
}

/* File errors name the path. */
static void t_files(void)
{
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_graph_read_json("/nonexistent-dir/g.json", &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "/nonexistent-dir/g.json: cannot open"), "%s", err.msg);
    gpp_graph_t *g = gpp_fixture_chain(2, 4);
    GPP_EXPECT(gpp_graph_write_json(g, "/nonexistent-dir/g.json", &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "/nonexistent-dir/g.json"), "%s", err.msg);
    gpp_graph_destroy(&g);
    /* a directory opens but cannot be read */
    GPP_EXPECT(gpp_graph_read_json("/tmp", &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "/tmp"), "%s", err.msg);
    /* bad JSON in a file: file:line:col */
    char *path = gpp_fixture_tmpfile("graph_json_bad");
    FILE *f = fopen(path, "w");
    GPP_EXPECT(f != NULL);
    if (f) {
        fputs("{\"format\": \"gpp-graph/1\",\n\n  \"ops\": [}\n", f);
        fclose(f);
    }
    char want[160];
    snprintf(want, sizeof want, "%s:3:", path);
    GPP_EXPECT(gpp_graph_read_json(path, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
    unlink(path);
    free(path);
}

/* A file larger than the reader's bound is refused by name. */
static void t_read_bound(void)
{
    char *path = gpp_fixture_tmpfile("graph_json_big");
    FILE *f = fopen(path, "w");
    GPP_EXPECT(f != NULL);
    if (f) {
        for (int i = 0; i < (1 << 17); i++)
            fputc(' ', f);
        fclose(f);
    }
    gpp_err_t err = {{0}};
    char *text = gpp_read_file(path, 1 << 16, &err);
    GPP_EXPECT(text == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "larger than 65536 bytes"), "%s", err.msg);
    free(text);
    text = gpp_read_file(path, 1 << 20, &err);
    GPP_EXPECT(text && strlen(text) == (1 << 17));
    free(text);
    unlink(path);
    free(path);
}

static const gpp_test_case_t cases[] = {{"bad_documents", t_bad_documents},
                                        {"any_order", t_any_order},
                                        {"attributes", t_attributes},
                                        {"round_trip", t_round_trip},
                                        {"causal", t_causal},
                                        {"gelu_form", t_gelu_form},
                                        {"files", t_files},
                                        {"read_bound", t_read_bound},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
