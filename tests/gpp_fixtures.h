/* gpp_fixtures: fixtures shared by the unit tests — small hand-built graphs
 * and plan stages, temporary files and whole-file read/write, and a zoo model with a CPU
 * backend and a synthetic data source for executor tests.
 *
 * Header-only (static inline) like gpp_test.h; include it after gpp_test.h.
 * Failures inside a fixture are counted with GPP_EXPECT like any other. */
#ifndef GPP_FIXTURES_H
#define GPP_FIXTURES_H
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/data/gpp_data.h"
#include "agent/exec/gpp_exec.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_graph.h"
#include "model/gpp_model.h"
#include "planner/gpp_plan.h"
#include "tests/gpp_test.h"

/* A chain of n linear layers of `width` features:
 * in(0) -> l1(1) -> ... -> l_n(n) -> loss(n+1). Caller owns the result. */
static inline gpp_graph_t *gpp_fixture_chain(int n, int width)
{
    gpp_graph_t *g = gpp_graph_new("chain");
    int x = gpp_graph_input(g, "in", 1, width);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "l%d", i + 1);
        x = gpp_graph_linear(g, name, x, width, 1);
    }
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", x);
    gpp_err_t err;
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    return g;
}

/* A diamond of linear layers of `width` features:
 * in(0) -> a(1) -> {b(2), c(3)} -> cat(4) -> loss(5). Caller owns the result. */
static inline gpp_graph_t *gpp_fixture_diamond(int width)
{
    gpp_graph_t *g = gpp_graph_new("diamond");
    int in = gpp_graph_input(g, "in", 1, width);
    int a = gpp_graph_linear(g, "a", in, width, 1);
    int b = gpp_graph_linear(g, "b", a, width, 1);
    int c = gpp_graph_linear(g, "c", a, width, 1);
    int bc[2] = {b, c};
    int cat = gpp_graph_concat(g, "cat", 2, bc);
    gpp_graph_unary(g, GPP_OP_LOSS_MSE, "loss", cat);
    gpp_err_t err;
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    return g;
}

/* Appends to p a stage of ops [lo, hi] on `devices` replicas with
 * micro-batch b and a 1F1B schedule (k = 1); returns it (owned by p). */
static inline gpp_stage_t *gpp_fixture_stage(gpp_plan_t *p, int lo, int hi, int devices, int b)
{
    int ops[256], n = 0;
    assert(hi - lo < 256);
    for (int o = lo; o <= hi; o++)
        ops[n++] = o;
    gpp_stage_t *st = gpp_plan_add_stage(p, n, ops);
    st->devices = devices;
    st->micro_batch = b;
    st->k = 1;
    return st;
}

/* Creates an empty file /tmp/gpp_test_<tag>_XXXXXX; caller owns the path
 * (free it, unlink the file). */
static inline char *gpp_fixture_tmpfile(const char *tag)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/gpp_test_%s_XXXXXX", tag);
    char *p = strdup(path);
    int fd = mkstemp(p);
    GPP_EXPECT(fd >= 0);
    if (fd >= 0)
        close(fd);
    return p;
}

/* Reads the whole file; *len is its size, or -1 on a short read. Returns
 * NULL when it cannot be opened; caller owns the buffer. */
static inline unsigned char *gpp_fixture_slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)*len + 1);
    if (fread(b, 1, (size_t)*len, f) != (size_t)*len)
        *len = -1;
    fclose(f);
    return b;
}

/* Writes len bytes of b as the whole file. */
static inline void gpp_fixture_spit(const char *path, const unsigned char *b, long len)
{
    FILE *f = fopen(path, "wb");
    GPP_EXPECT(f && fwrite(b, 1, (size_t)len, f) == (size_t)len);
    if (f)
        fclose(f);
}

/* Writes a .npy file: magic, version major.0, the header dict text padded
 * with spaces to a 64-byte boundary plus '\n' (as numpy.save does), then
 * `data_bytes` of data; pad < 0 leaves the header unpadded. */
static inline void gpp_fixture_npy(const char *path, int major, const char *dict, const void *data,
                                   size_t data_bytes, int pad)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hl = dl + 1;
    if (pad >= 0)
        while ((pre + hl) % 64)
            hl++;
    unsigned char *b = calloc(1, pre + hl + data_bytes + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        b[8 + i] = (unsigned char)(hl >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hl - dl - 1);
    b[pre + hl - 1] = '\n';
    if (data_bytes)
        memcpy(b + pre + hl, data, data_bytes);
    gpp_fixture_spit(path, b, (long)(pre + hl + data_bytes));
    free(b);
}

/* After a failed atomic write (gpp_atomic_file) to path: the file still holds the
 * len bytes of orig, and the writer's temporary path.tmp.<pid> is gone. */
static inline void gpp_fixture_expect_untouched(const char *path, const unsigned char *orig,
                                                long len)
{
    long now = 0;
    unsigned char *after = gpp_fixture_slurp(path, &now);
    GPP_EXPECT(after && now == len && memcmp(after, orig, (size_t)len) == 0);
    free(after);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    GPP_EXPECT(access(tmp, F_OK) != 0);
}

/* A zoo model with a one-thread CPU backend and a synthetic data source. */
typedef struct {
    gpp_graph_t *g;
    gpp_backend_t *be;
    gpp_data_t *data;
    int *all; /* [g->n_ops]: 0..n_ops-1, the whole model as one stage */
} gpp_fixture_exec_t;

/* Builds the model of `spec` and a data source seeded with data_seed.
 * Returns 0 (close f with gpp_fixture_exec_close), or -1 with the failure
 * counted and nothing left to close. */
static inline int gpp_fixture_exec_open(gpp_fixture_exec_t *f, const char *spec, uint64_t data_seed)
{
    gpp_err_t err = {0};
    memset(f, 0, sizeof *f);
    f->g = gpp_model_load(spec, &err); /* a zoo spec or a graph file */
    GPP_EXPECT_MSG(f->g != NULL, "%s", err.msg);
    gpp_backend_cfg_t bc = {.kind = GPP_DEVICE_CPU, .cpu_threads = 1};
    f->be = gpp_backend_new(&bc, &err);
    GPP_EXPECT_MSG(f->be != NULL, "%s", err.msg);
    if (!f->g || !f->be) {
        gpp_backend_destroy(&f->be);
        gpp_graph_destroy(&f->g);
        return -1;
    }
    f->data = gpp_data_new(f->g, data_seed);
    f->all = calloc((size_t)f->g->n_ops, sizeof(int));
    for (int i = 0; i < f->g->n_ops; i++)
        f->all[i] = i;
    return 0;
}

static inline void gpp_fixture_exec_close(gpp_fixture_exec_t *f)
{
    gpp_data_destroy(&f->data);
    gpp_backend_destroy(&f->be);
    gpp_graph_destroy(&f->g);
    free(f->all);
    f->all = NULL;
}
/* A zoo model cut into stages by op-name prefix (the first rule that
 * matches an op's name gives its stage), as the executor tests drive them
 * (test_exec, test_cuda_graphs). */
typedef struct {
    const char *prefix; /* op names starting with it */
    int stage;
} gpp_fixture_rule_t;

/* The stage of op `name`, or -1. */
static inline int gpp_fixture_stage_of(const char *name, const gpp_fixture_rule_t *rules)
{
    for (const gpp_fixture_rule_t *r = rules; r->prefix; r++)
        if (strncmp(name, r->prefix, strlen(r->prefix)) == 0)
            return r->stage;
    return -1;
}

/* The small zoo models of the executor tests and their cuts. MMT, 5 stages:
 * b0.l0.add1's output feeds ln2 (stage 1) and add2 (stage 2), so its
 * gradient is the sum of two consumer stages'. */
#define GPP_FIXTURE_MMT "mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64,classes=8"
static const gpp_fixture_rule_t gpp_fixture_mmt_stages[] = {
    {"b0.input", 0},  {"b0.l0.ln1", 0},  {"b0.l0.attn", 0}, {"b0.l0.add1", 0}, {"b0.l0.ln2", 1},
    {"b0.l0.fc1", 1}, {"b0.l0.gelu", 1}, {"b0.l0.fc2", 2},  {"b0.l0.add2", 2}, {"b0.ln_f", 2},
    {"b1.", 3},       {"concat", 4},     {"head", 4},       {"loss", 4},       {NULL, 0}};
/* DLRM, 5 stages: an index input alone in a stage, sent to its embedding
 * stage; the other index input regenerated by its consumer. */
#define GPP_FIXTURE_DLRM                                                                           \
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=2,rows=100,"       \
    "dim=8,bag=4,top_layers=1"
static const gpp_fixture_rule_t gpp_fixture_dlrm_stages[] = {
    {"dense0.", 0}, {"dense1.", 1}, {"sparse0.input", 2}, {"sparse0.emb", 3}, {"sparse1.", 3},
    {"concat", 4},  {"top", 4},     {"out", 4},           {"loss", 4},        {NULL, 0}};
/* CANDLE-Uno, 4 stages: a cut between feat0.fc0 and its ReLU (the linear
 * sends its output unfused; the ReLU reads it received), feat0.fc1 + relu1
 * fused in the stage after it. */
#define GPP_FIXTURE_CANDLE "candle_uno:branches=2,layers=2,hidden=32,in=16,doses=1,top_layers=1"
static const gpp_fixture_rule_t gpp_fixture_candle_stages[] = {
    {"feat0.input", 0}, {"feat0.fc0", 0}, {"feat0.", 1}, {"feat1.", 2}, {"dose0", 2},
    {"concat", 3},      {"top", 3},       {"out", 3},    {"loss", 3},   {NULL, 0}};

/* Driving stages as a pipeline agent would, in one process (ex[s] the
 * executor of stage s, stage_of[op] its stage): stage s's boundary inputs
 * of micro-batch slot m (n samples) from their producers' outputs, in two
 * re-sharded pieces; data inputs with an odd op id are left for the stage
 * to regenerate. 0, or -1 with err. */
static inline int gpp_fixture_hand_inputs(gpp_exec_t *const *ex, const int *stage_of, int s, int m,
                                          int64_t n, gpp_err_t *err)
{
    const gpp_graph_t *g = gpp_exec_graph(ex[s]);
    int64_t h = n / 2;
    for (int k = 0; k < gpp_exec_n_inputs(ex[s]); k++) {
        int p = gpp_exec_input_op(ex[s], k);
        if (g->ops[p].type == GPP_OP_INPUT && p % 2)
            continue;
        const gpp_tensor_t *y = gpp_exec_output(ex[stage_of[p]], m, p);
        int64_t per = y->rows * y->cols * (int64_t)gpp_dtype_bytes(y->dtype);
        gpp_tensor_t a = gpp_tensor(y->data, y->dtype, h, y->rows, y->cols);
        gpp_tensor_t c = gpp_tensor((char *)y->data + h * per, y->dtype, n - h, y->rows, y->cols);
        if (gpp_exec_set_input(ex[s], m, p, &c, h, err) < 0 ||
            (h && gpp_exec_set_input(ex[s], m, p, &a, 0, err) < 0))
            return -1;
    }
    return 0;
}

/* Stage s's boundary outputs' gradients of micro-batch slot m (n samples)
 * from every later stage that consumes them (after its backward), in two
 * pieces. 0, or -1 with err. */
static inline int gpp_fixture_hand_grads(gpp_exec_t *const *ex, int n_stages, int s, int m,
                                         int64_t n, gpp_err_t *err)
{
    int64_t h = n / 2;
    for (int k = 0; k < gpp_exec_n_outputs(ex[s]); k++) {
        int o = gpp_exec_output_op(ex[s], k);
        for (int t = s + 1; t < n_stages; t++)
            for (int q = 0; q < gpp_exec_n_inputs(ex[t]); q++) {
                if (gpp_exec_input_op(ex[t], q) != o)
                    continue;
                const gpp_tensor_t *dy = gpp_exec_input_grad(ex[t], m, o);
                if (!dy)
                    continue; /* data: no gradient */
                int64_t per = dy->rows * dy->cols * (int64_t)gpp_dtype_bytes(dy->dtype);
                gpp_tensor_t a = gpp_tensor(dy->data, dy->dtype, h, dy->rows, dy->cols);
                gpp_tensor_t c =
                    gpp_tensor((char *)dy->data + h * per, dy->dtype, n - h, dy->rows, dy->cols);
                if (gpp_exec_add_output_grad(ex[s], m, o, &a, 0, err) < 0 ||
                    gpp_exec_add_output_grad(ex[s], m, o, &c, h, err) < 0)
                    return -1;
            }
    }
    return 0;
}

#endif
