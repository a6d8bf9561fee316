/* test_torch_ops: the CPU kernels of the PyTorch modules' op types
 * (gpp_ops.h "PyTorch modules") through gpp_op_kernels, as the executor
 * calls them.
 *
 * Gradients: for each op on a small graph (n = 2 samples), the directional
 * derivative of L = sum(y * r) (r fixed random, fed as dy) along a random
 * direction d of every float input and parameter, analytic (sum dx . d +
 * sum dw . d from the backward) against central differences with step
 * h = 1e-2 in fp32, L summed in double:
 *     |analytic - numeric| <= 2e-3 + 1e-2 |numeric|
 * (fp32 rounding of L / 2h and the O(h^2) truncation; printed per op). The
 * losses check their own input gradient against differences of the loss.
 * Dropout: the drop rate over 200,000 elements is p within 0.005, the kept
 * ones are scaled by 1 / (1 - p), evaluation (train 0) passes the input
 * through, the mask is a function of (seed, sample) only. A lazy (row-
 * sparse) embedding gradient equals the dense one. A backend without the
 * ext kernels (the CUDA backend) refuses each op naming it and backend cpu. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gpp_backend.h"
#include "kernels/gpp_backend_impl.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_sparse.h"
#include "model/gpp_graph.h"
#include "model/gpp_optable.h"
#include "tests/gpp_test.h"

#define N 2
#define H 1e-2

static gpp_backend_t *s_be;
static gpp_stream_t *s_st;
static uint64_t s_rng = 88172645463325252ull;

static float s_uni(void) /* xorshift: uniform in [-1, 1) */
{
    s_rng ^= s_rng << 13, s_rng ^= s_rng >> 7, s_rng ^= s_rng << 17;
    return (float)((double)(s_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *s_floats(int64_t n, float scale)
{
    float *p = calloc((size_t)n + 1, sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = scale * s_uni();
    return p;
}

/* One op under test: its graph, inputs, parameters and their gradients. */
typedef struct {
    gpp_graph_t *g;
    int op;
    gpp_tensor_t x[3], dx[3], w[GPP_OP_MAX_PARAMS], dw[GPP_OP_MAX_PARAMS];
    int nx, nw;
    float *dir_x[3], *dir_w[GPP_OP_MAX_PARAMS];
    void *stash;
    gpp_tensor_t y, target;
    float loss;
} tcase_t;

static void s_case_init(tcase_t *c, gpp_graph_t *g, int op)
{
    gpp_err_t err = {0};
    memset(c, 0, sizeof *c);
    c->g = g, c->op = op;
    GPP_EXPECT_MSG(gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    const gpp_op_t *o = &g->ops[op];
    c->nx = o->n_inputs;
    for (int k = 0; k < o->n_inputs; k++) {
        const gpp_op_t *in = &g->ops[o->inputs[k]];
        int idx = in->type == GPP_OP_INPUT && in->input_kind == GPP_INPUT_INDICES;
        int64_t m = N * in->rows * in->cols;
        void *data = s_floats(m, 1.0f);
        if (idx)
            for (int64_t i = 0; i < m; i++)
                ((int32_t *)data)[i] = (int32_t)((s_rng >> 20) % (uint64_t)in->table_rows), s_uni();
        c->x[k] = gpp_tensor(data, idx ? GPP_DTYPE_I32 : GPP_DTYPE_F32, N, in->rows, in->cols);
        c->dx[k] =
            gpp_tensor(idx ? NULL : calloc((size_t)m + 1, 4), GPP_DTYPE_F32, N, in->rows, in->cols);
        c->dir_x[k] = idx ? NULL : s_floats(m, 1.0f);
    }
    /* an input read twice is one tensor */
    for (int k = 1; k < o->n_inputs; k++)
        for (int j = 0; j < k; j++)
            if (o->inputs[k] == o->inputs[j]) {
                free(c->x[k].data), free(c->dx[k].data), free(c->dir_x[k]);
                c->x[k] = c->x[j], c->dx[k] = c->dx[j], c->dir_x[k] = NULL;
            }
    gpp_param_t p[GPP_OP_MAX_PARAMS];
    c->nw = gpp_op_params(g, o, p);
    for (int k = 0; k < c->nw; k++) {
        c->w[k] = gpp_tensor(s_floats(p[k].rows * p[k].cols, 0.5f), GPP_DTYPE_F32, 1, p[k].rows,
                             p[k].cols);
        c->dw[k] = gpp_tensor(calloc((size_t)(p[k].rows * p[k].cols) + 1, 4), GPP_DTYPE_F32, 1,
                              p[k].rows, p[k].cols);
        c->dir_w[k] = s_floats(p[k].rows * p[k].cols, 1.0f);
    }
    c->stash = calloc((size_t)(N * gpp_op_kernel_stash_bytes(g, o)) + 1, 1);
    c->y = gpp_tensor(calloc((size_t)(N * o->rows * o->cols) + 1, 4), GPP_DTYPE_F32, N, o->rows,
                      o->cols);
}

static void s_case_free(tcase_t *c)
{
    for (int k = 0; k < c->nx; k++) {
        int dup = 0;
        for (int j = 0; j < k; j++)
            dup |= c->x[k].data == c->x[j].data;
        if (!dup)
            free(c->x[k].data), free(c->dx[k].data), free(c->dir_x[k]);
    }
    for (int k = 0; k < c->nw; k++)
        free(c->w[k].data), free(c->dw[k].data), free(c->dir_w[k]);
    free(c->stash);
    free(c->y.data);
    free(c->target.data);
    gpp_graph_destroy(&c->g);
}

static int s_run(tcase_t *c, int bwd, const gpp_tensor_t *dy, int train, int64_t sample_lo)
{
    gpp_err_t err = {0};
    const gpp_op_t *o = &c->g->ops[c->op];
    const gpp_tensor_t *xs[3] = {&c->x[0], &c->x[1], &c->x[2]};
    gpp_tensor_t *dxs[3] = {NULL, NULL, NULL};
    for (int k = 0; k < c->nx; k++)
        dxs[k] = c->dx[k].data ? &c->dx[k] : NULL;
    gpp_op_args_t a = {.op = o,
                       .x = xs,
                       .dx = dxs,
                       .y = &c->y,
                       .dy = dy,
                       .w = c->w,
                       .dw = c->dw,
                       .stash = c->stash,
                       .seed = 7,
                       .sample_lo = sample_lo,
                       .train = train};
    int rc;
    if (gpp_optable[o->type].role == GPP_ROLE_LOSS) {
        a.y = NULL, a.target = &c->target, a.loss = &c->loss, a.grad_scale = 1.0f;
        if (!bwd)
            dxs[0] = NULL;
        rc = gpp_op_kernels[o->type].fwd(s_st, &a, &err);
    } else {
        rc = bwd ? gpp_op_kernels[o->type].bwd(s_st, &a, &err)
                 : gpp_op_kernels[o->type].fwd(s_st, &a, &err);
    }
    GPP_EXPECT_MSG(rc == 0, "%s: %s", o->name, err.msg);
    return rc;
}

/* sum(y * r), or the loss */
static double s_L(tcase_t *c, const float *r)
{
    s_run(c, 0, NULL, 1, 0);
    if (gpp_optable[c->g->ops[c->op].type].role == GPP_ROLE_LOSS)
        return c->loss;
    double L = 0;
    for (int64_t i = 0; i < gpp_tensor_numel(&c->y); i++)
        L += (double)((float *)c->y.data)[i] * r[i];
    return L;
}

/* Moves every float input and parameter by t d. */
static void s_move(tcase_t *c, double t)
{
    for (int k = 0; k < c->nx; k++)
        for (int64_t i = 0; c->dir_x[k] && i < gpp_tensor_numel(&c->x[k]); i++)
            ((float *)c->x[k].data)[i] += (float)(t * c->dir_x[k][i]);
    for (int k = 0; k < c->nw; k++)
        for (int64_t i = 0; i < gpp_tensor_numel(&c->w[k]); i++)
            ((float *)c->w[k].data)[i] += (float)(t * c->dir_w[k][i]);
}

static void s_gradcheck(tcase_t *c)
{
    const gpp_op_t *o = &c->g->ops[c->op];
    int64_t ny = gpp_tensor_numel(&c->y);
    float *r = s_floats(ny, 1.0f);
    gpp_tensor_t dy = gpp_tensor(r, GPP_DTYPE_F32, N, o->rows, o->cols);
    s_L(c, r);
    s_run(c, 1, &dy, 1, 0);
    double an = 0;
    for (int k = 0; k < c->nx; k++)
        for (int64_t i = 0; c->dir_x[k] && i < gpp_tensor_numel(&c->x[k]); i++)
            an += (double)((float *)c->dx[k].data)[i] * c->dir_x[k][i];
    for (int k = 0; k < c->nw; k++)
        for (int64_t i = 0; i < gpp_tensor_numel(&c->w[k]); i++)
            an += (double)((float *)c->dw[k].data)[i] * c->dir_w[k][i];
    s_move(c, H);
    double lp = s_L(c, r);
    s_move(c, -2 * H);
    double lm = s_L(c, r);
    s_move(c, H);
    double num = (lp - lm) / (2 * H);
    printf("  %-16s analytic %12.6f numeric %12.6f\n", o->name, an, num);
    GPP_EXPECT_MSG(fabs(an - num) <= 2e-3 + 1e-2 * fabs(num), "%s: analytic %g, numeric %g",
                   o->name, an, num);
    free(r);
}

/* A graph: inputs of the given shapes (cols < 0: indices of -cols over
 * table rows 7), then one op of type t on them. */
static gpp_graph_t *s_graph(gpp_op_type_t t, int n_in, const int64_t (*shape)[2], int *op)
{
    gpp_graph_t *g = gpp_graph_new(gpp_op_type_name(t));
    int in[3];
    for (int k = 0; k < n_in; k++) {
        char nm[8];
        snprintf(nm, sizeof nm, "x%d", k);
        in[k] = shape[k][1] < 0 ? gpp_graph_input_indices(g, nm, -shape[k][1], 7)
                                : gpp_graph_input(g, nm, shape[k][0], shape[k][1]);
    }
    *op = gpp_graph_add(g, t, gpp_op_type_name(t), n_in, in);
    return g;
}

static void t_gradients(void)
{
    struct {
        gpp_op_type_t t;
        int n_in;
        int64_t shape[3][2];
        void (*attrs)(gpp_op_t *o);
    } cases[] = {
        {GPP_OP_PARAM_ADD, 1, {{3, 4}}, NULL},
        {GPP_OP_REDUCE, 1, {{5, 4}}, NULL},
        {GPP_OP_SIGMOID, 1, {{3, 4}}, NULL},
        {GPP_OP_TANH, 1, {{3, 4}}, NULL},
        {GPP_OP_MATMUL, 2, {{3, 4}, {4, 5}}, NULL},
        {GPP_OP_TRANSPOSE, 1, {{3, 4}}, NULL},
        {GPP_OP_STACK, 3, {{1, 4}, {2, 4}, {1, 4}}, NULL},
        {GPP_OP_TRIU, 1, {{4, 4}}, NULL},
        {GPP_OP_LOSS_BCE, 1, {{1, 3}}, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int op;
        gpp_graph_t *g = s_graph(cases[i].t, cases[i].n_in, cases[i].shape, &op);
        if (cases[i].t == GPP_OP_TRIU)
            g->ops[op].offset = 1;
        tcase_t c;
        s_case_init(&c, g, op);
        if (cases[i].t == GPP_OP_LOSS_BCE) {
            c.target = gpp_tensor(calloc(N * 3, 4), GPP_DTYPE_F32, N, 1, 3);
            for (int e = 0; e < N * 3; e++)
                ((float *)c.target.data)[e] = (float)(e % 2);
        }
        s_gradcheck(&c);
        s_case_free(&c);
    }
    /* every reduce mode, dropout in training (the mask is fixed by the seed) */
    for (int mode = 0; mode < 3; mode++) {
        int op;
        const int64_t sh[1][2] = {{5, 4}};
        gpp_graph_t *g = s_graph(GPP_OP_REDUCE, 1, sh, &op);
        g->ops[op].mode = mode;
        tcase_t c;
        s_case_init(&c, g, op);
        if (mode == GPP_REDUCE_MAX) /* rows 0.3 apart: no argmax changes within h */
            for (int64_t e = 0; e < N * 5 * 4; e++)
                ((float *)c.x[0].data)[e] = 0.3f * (float)((e / 4 * 3 + e) % 5) + 0.01f * s_uni();
        s_gradcheck(&c);
        s_case_free(&c);
    }
    int op;
    const int64_t sh[1][2] = {{3, 8}};
    gpp_graph_t *g = s_graph(GPP_OP_DROPOUT, 1, sh, &op);
    g->ops[op].p = 0.3;
    tcase_t c;
    s_case_init(&c, g, op);
    s_gradcheck(&c);
    s_case_free(&c);
}

static void t_embeddings_and_attention(void)
{
    /* embedding (each mode, dense table gradient), embedding_bag dense,
       patch_embed, cross_attention (and with dropout on its probabilities) */
    for (int mode = 0; mode < 3; mode++) {
        int op;
        const int64_t sh[1][2] = {{1, -4}};
        gpp_graph_t *g = s_graph(GPP_OP_EMBEDDING, 1, sh, &op);
        g->ops[op].table_rows = 7, g->ops[op].dim = 3, g->ops[op].mode = mode;
        g->ops[op].update = GPP_TABLE_DENSE;
        tcase_t c;
        s_case_init(&c, g, op);
        s_gradcheck(&c);
        s_case_free(&c);
    }
    int op;
    const int64_t bag[1][2] = {{1, -3}};
    gpp_graph_t *g = s_graph(GPP_OP_EMBEDDING_BAG, 1, bag, &op);
    g->ops[op].table_rows = 7, g->ops[op].dim = 3, g->ops[op].update = GPP_TABLE_DENSE;
    tcase_t c;
    s_case_init(&c, g, op);
    s_gradcheck(&c);
    s_case_free(&c);

    const int64_t img[1][2] = {{2, 16}}; /* 2 channels of 4 x 4 */
    g = s_graph(GPP_OP_PATCH_EMBED, 1, img, &op);
    g->ops[op].height = 4, g->ops[op].patch = 2, g->ops[op].out_features = 3;
    s_case_init(&c, g, op);
    s_gradcheck(&c);
    s_case_free(&c);

    for (int drop = 0; drop < 2; drop++) {
        const int64_t qkv[2][2] = {{3, 4}, {5, 4}};
        g = s_graph(GPP_OP_CROSS_ATTENTION, 2, qkv, &op);
        g->ops[op].heads = 2, g->ops[op].p = drop ? 0.2 : 0.0;
        s_case_init(&c, g, op);
        s_gradcheck(&c);
        s_case_free(&c);
    }
    /* self-attention as cross-attention of one input with itself */
    g = gpp_graph_new("self");
    int x = gpp_graph_input(g, "x", 3, 4), two[2] = {x, x};
    op = gpp_graph_add(g, GPP_OP_CROSS_ATTENTION, "self", 2, two);
    g->ops[op].heads = 2;
    s_case_init(&c, g, op);
    s_gradcheck(&c);
    s_case_free(&c);
}

/* The lazy (row-sparse) table gradient of an embedding equals the dense. */
static void t_lazy_equals_dense(void)
{
    gpp_err_t err = {0};
    for (int mode = 0; mode < 3; mode++) {
        int op;
        const int64_t sh[1][2] = {{1, -4}};
        gpp_graph_t *g = s_graph(GPP_OP_EMBEDDING, 1, sh, &op);
        g->ops[op].table_rows = 7, g->ops[op].dim = 3, g->ops[op].mode = mode;
        g->ops[op].update = GPP_TABLE_DENSE;
        tcase_t c;
        s_case_init(&c, g, op);
        float *r = s_floats(gpp_tensor_numel(&c.y), 1.0f);
        gpp_tensor_t dy = gpp_tensor(r, GPP_DTYPE_F32, N, c.y.rows, c.y.cols);
        s_run(&c, 0, NULL, 1, 0);
        s_run(&c, 1, &dy, 1, 0);
        gpp_sparse_grad_t *sg = gpp_sparse_grad_new(s_st, 7, 3, 7, &err);
        GPP_EXPECT_MSG(sg != NULL, "%s", err.msg);
        g->ops[op].update = GPP_TABLE_LAZY;
        const gpp_tensor_t *xs[1] = {&c.x[0]};
        gpp_tensor_t *dxs[1] = {NULL};
        gpp_op_args_t a = {
            .op = &g->ops[op], .x = xs, .dx = dxs, .dy = &dy, .w = c.w, .dsparse = sg};
        GPP_EXPECT_MSG(gpp_op_kernels[GPP_OP_EMBEDDING].bwd(s_st, &a, &err) == 0, "%s", err.msg);
        float dense[21] = {0};
        for (int64_t k = 0; sg && k < sg->count; k++)
            for (int d = 0; d < 3; d++)
                dense[sg->rows[k] * 3 + d] += sg->values[k * 3 + d];
        double worst = 0;
        for (int e = 0; e < 21; e++)
            worst = fmax(worst, fabs(dense[e] - ((float *)c.dw[0].data)[e]));
        GPP_EXPECT_MSG(worst < 1e-6, "embedding mode %d: lazy and dense differ by %g", mode, worst);
        gpp_sparse_grad_destroy(&sg);
        free(r);
        s_case_free(&c);
    }
}

static void t_dropout(void)
{
    int op;
    const int64_t sh[1][2] = {{100, 1000}};
    gpp_graph_t *g = s_graph(GPP_OP_DROPOUT, 1, sh, &op);
    g->ops[op].p = 0.25;
    tcase_t c;
    s_case_init(&c, g, op);
    int64_t m = gpp_tensor_numel(&c.y), dropped = 0, wrong = 0;
    const float *x = c.x[0].data, *y = c.y.data;
    s_run(&c, 0, NULL, 1, 0);
    for (int64_t i = 0; i < m; i++) {
        dropped += y[i] == 0.0f;
        wrong += y[i] != 0.0f && y[i] != x[i] * (float)(1.0 / 0.75);
    }
    double rate = (double)dropped / (double)m;
    printf("  dropout p 0.25: %lld of %lld dropped (%.4f)\n", (long long)dropped, (long long)m,
           rate);
    GPP_EXPECT_MSG(fabs(rate - 0.25) < 0.005 && wrong == 0, "rate %g, %lld wrongly scaled", rate,
                   (long long)wrong);
    float *first = malloc((size_t)m * 4);
    memcpy(first, y, (size_t)m * 4);
    s_run(&c, 0, NULL, 1, 0);
    GPP_EXPECT_MSG(!memcmp(first, y, (size_t)m * 4), "the same seed and samples: the same mask");
    s_run(&c, 0, NULL, 1, 2); /* samples 2 and 3: other masks */
    GPP_EXPECT_MSG(memcmp(first, y, (size_t)m * 4) != 0, "other samples: other masks");
    s_run(&c, 0, NULL, 0, 0); /* evaluation */
    GPP_EXPECT_MSG(!memcmp(x, y, (size_t)m * 4), "evaluation passes the input through");
    free(first);
    s_case_free(&c);
}

/* A backend without the ext kernels (as the CUDA backend) refuses the ops at
 * setup, naming the op and backend cpu. */
static void t_refusal(void)
{
    gpp_backend_vt_t vt = *s_be->vt;
    vt.ext = NULL;
    struct gpp_backend_s fake = *s_be;
    fake.vt = &vt;
    snprintf(fake.name, sizeof fake.name, "cuda");
    int op;
    const int64_t sh[1][2] = {{3, 4}};
    gpp_graph_t *g = s_graph(GPP_OP_SIGMOID, 1, sh, &op);
    gpp_err_t err = {0};
    GPP_EXPECT(gpp_graph_finalize(g, &err) == 0);
    GPP_EXPECT(gpp_backend_op_supported(s_be, &g->ops[op], &err) == 1);
    GPP_EXPECT_MSG(gpp_backend_op_supported(&fake, &g->ops[op], &err) == 0 &&
                       strstr(err.msg, "'sigmoid' (sigmoid)") &&
                       strstr(err.msg, "cuda backend has no kernel") &&
                       strstr(err.msg, "use backend = \"cpu\""),
                   "%s", err.msg);
    GPP_EXPECT(gpp_backend_op_supported(&fake, &g->ops[0], &err) == 1); /* an input */
    gpp_graph_destroy(&g);
}

int main(void)
{
    gpp_err_t err = {0};
    gpp_backend_cfg_t bc = {.kind = GPP_DEVICE_CPU, .cpu_threads = 1};
    s_be = gpp_backend_new(&bc, &err);
    GPP_EXPECT_MSG(s_be != NULL, "%s", err.msg);
    s_st = s_be ? gpp_stream_new(s_be, &err) : NULL;
    if (!s_st)
        return 1;
    static const gpp_test_case_t cases[] = {
        {"gradients", t_gradients},
        {"embeddings_and_attention", t_embeddings_and_attention},
        {"lazy_equals_dense", t_lazy_equals_dense},
        {"dropout", t_dropout},
        {"refusal", t_refusal},
        {NULL, NULL}};
    int rc = gpp_test_run(cases);
    gpp_stream_destroy(&s_st);
    gpp_backend_destroy(&s_be);
    return rc;
}
