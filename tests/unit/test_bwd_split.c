/* test_bwd_split: the split backward of zero-bubble schedules (gpp_ops.h
 * gpp_bwd_part_t; docs/planner.md "Zero-bubble schedules") gives the fused
 * backward's gradients bit for bit, through gpp_op_bwd as the executor
 * calls it, for every op of every zoo model (small sizes) and of the
 * PyTorch modules' graph file:
 *
 *   fused:  ALL(mb 0), ALL(mb 1)              (a 1F1B stage's order)
 *   split:  IN(mb 0), IN(mb 1), W(mb 0), W(mb 1)  (a zero-bubble order)
 *
 * from the same forward stashes and output gradients; each micro-batch's
 * input gradients start from the same non-zero values (a gradient that
 * other consumers already added to) and the parameter gradients from the
 * same non-zero sum (earlier micro-batches), so accumulation is compared
 * too. Dense gradients must be equal byte for byte, sparse ones row for row.
 * The op table's W figures: W FLOPs never above the backward's, none
 * without parameters; a W stash exactly where the kernel needs one. A
 * backend without the split refuses it naming the ways out. */
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

#define N 3   /* samples per micro-batch */
#define MBS 2 /* micro-batches */

static gpp_backend_t *s_be;
static gpp_stream_t *s_st;
static uint64_t s_rng = 0x9e3779b97f4a7c15ull;

static float s_uni(void) /* xorshift: uniform in [-1, 1) */
{
    s_rng ^= s_rng << 13, s_rng ^= s_rng >> 7, s_rng ^= s_rng << 17;
    return (float)((double)(s_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static float *s_floats(int64_t n)
{
    float *p = calloc((size_t)n + 1, sizeof *p);
    for (int64_t i = 0; i < n; i++)
        p[i] = s_uni();
    return p;
}

static void *s_dup(const void *p, size_t bytes)
{
    void *q = malloc(bytes + 1);
    memcpy(q, p, bytes);
    return q;
}

static const char *const s_specs[] = {
    "mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64,classes=8",
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=2,rows=100,dim=8,"
    "bag=4,top_layers=1",
    "candle_uno:branches=2,layers=2,hidden=32,in=16,doses=1,top_layers=1",
    "transformer:layers=2,hidden=16,heads=2,seq=4,ffn=32,classes=4",
    "case_study:branches=2,blocks=2,hidden=16,heads=4,seq=4,ffn=32,classes=4",
};

/* One op at its shapes in the graph: inputs and stash per micro-batch, its
 * parameters, and the gradients of both runs. */
typedef struct {
    const gpp_graph_t *g;
    const gpp_op_t *op;
    int nx, nw;
    gpp_tensor_t x[MBS][4], w[GPP_OP_MAX_PARAMS], y[MBS], dy[MBS];
    void *stash[MBS], *wstash[MBS];
    /* [run 0 fused, 1 split] */
    gpp_tensor_t dx[2][MBS][4], dw[2][GPP_OP_MAX_PARAMS];
    gpp_sparse_grad_t *sp[2];
} s_case_t;

static int s_is_idx(const gpp_op_t *in)
{
    return in->type == GPP_OP_INPUT && in->input_kind == GPP_INPUT_INDICES;
}

static void s_args(s_case_t *c, int run, int mb, gpp_bwd_part_t part, const gpp_tensor_t **xs,
                   gpp_tensor_t **dxs, gpp_op_args_t *a)
{
    for (int k = 0; k < c->nx; k++) {
        xs[k] = &c->x[mb][k];
        dxs[k] = c->dx[run][mb][k].data ? &c->dx[run][mb][k] : NULL;
    }
    *a = (gpp_op_args_t){.op = c->op,
                         .x = xs,
                         .dx = dxs,
                         .y = &c->y[mb],
                         .dy = &c->dy[mb],
                         .w = c->w,
                         .dw = c->dw[run],
                         .dsparse = c->sp[run],
                         .stash = c->stash[mb],
                         .seed = 11,
                         .sample_lo = (int64_t)mb * N,
                         .train = 1,
                         .part = part,
                         .wstash = c->wstash[mb]};
}

/* Builds the case, runs both forwards; 0 when the op has no backward. */
static int s_case_init(s_case_t *c, const gpp_graph_t *g, const gpp_op_t *op)
{
    gpp_err_t err = {0};
    memset(c, 0, sizeof *c);
    c->g = g, c->op = op;
    const gpp_op_info_t *T = &gpp_optable[op->type];
    if (T->role != GPP_ROLE_LAYER || !gpp_op_kernels[op->type].bwd)
        return 0;
    c->nx = op->n_inputs;
    for (int mb = 0; mb < MBS; mb++)
        for (int k = 0; k < c->nx; k++) {
            const gpp_op_t *in = &g->ops[op->inputs[k]];
            int64_t m = N * in->rows * in->cols;
            float *data = s_floats(m);
            if (s_is_idx(in))
                for (int64_t i = 0; i < m; i++)
                    ((int32_t *)data)[i] = (int32_t)((s_rng >> 20) % (uint64_t)in->table_rows),
                              s_uni();
            c->x[mb][k] = gpp_tensor(data, s_is_idx(in) ? GPP_DTYPE_I32 : GPP_DTYPE_F32, N,
                                     in->rows, in->cols);
            for (int k2 = 0; k2 < k; k2++) /* an input read twice is one tensor */
                if (op->inputs[k2] == op->inputs[k]) {
                    free(c->x[mb][k].data);
                    c->x[mb][k] = c->x[mb][k2];
                }
            if (s_is_idx(in))
                continue;
            /* non-zero: what other consumers of the tensor already added */
            float *d0 = s_floats(m);
            c->dx[0][mb][k] = gpp_tensor(d0, GPP_DTYPE_F32, N, in->rows, in->cols);
            c->dx[1][mb][k] =
                gpp_tensor(s_dup(d0, (size_t)m * 4), GPP_DTYPE_F32, N, in->rows, in->cols);
            for (int k2 = 0; k2 < k; k2++) /* one gradient buffer for a tensor read twice */
                if (op->inputs[k2] == op->inputs[k])
                    for (int r = 0; r < 2; r++) {
                        free(c->dx[r][mb][k].data);
                        c->dx[r][mb][k] = c->dx[r][mb][k2];
                    }
        }
    gpp_param_t p[GPP_OP_MAX_PARAMS];
    c->nw = gpp_op_params(g, op, p);
    for (int k = 0; k < c->nw; k++) {
        int64_t e = p[k].rows * p[k].cols;
        c->w[k] = gpp_tensor(s_floats(e), GPP_DTYPE_F32, 1, p[k].rows, p[k].cols);
        float *d0 = s_floats(e); /* earlier micro-batches' sum */
        c->dw[0][k] = gpp_tensor(d0, GPP_DTYPE_F32, 1, p[k].rows, p[k].cols);
        c->dw[1][k] = gpp_tensor(s_dup(d0, (size_t)e * 4), GPP_DTYPE_F32, 1, p[k].rows, p[k].cols);
        if (p[k].sparse)
            for (int r = 0; r < 2; r++) {
                c->sp[r] = gpp_sparse_grad_new(s_st, p[k].rows, p[k].cols, 0, &err);
                GPP_EXPECT_MSG(c->sp[r] != NULL, "%s", err.msg);
            }
    }
    int64_t ks = gpp_op_kernel_stash_bytes(g, op), ws = gpp_op_wstash_bytes(g, op);
    for (int mb = 0; mb < MBS; mb++) {
        c->stash[mb] = calloc((size_t)(N * ks) + 1, 1);
        c->wstash[mb] = ws ? calloc((size_t)(N * ws) + 1, 1) : NULL;
        c->y[mb] = gpp_tensor(calloc((size_t)(N * op->rows * op->cols) + 1, 4), GPP_DTYPE_F32, N,
                              op->rows, op->cols);
        c->dy[mb] =
            gpp_tensor(s_floats(N * op->rows * op->cols), GPP_DTYPE_F32, N, op->rows, op->cols);
        const gpp_tensor_t *xs[4];
        gpp_tensor_t *dxs[4];
        gpp_op_args_t a;
        s_args(c, 0, mb, GPP_BWD_ALL, xs, dxs, &a);
        GPP_EXPECT_MSG(gpp_op_kernels[op->type].fwd(s_st, &a, &err) == 0, "%s: %s", op->name,
                       err.msg);
    }
    return 1;
}

static void s_case_free(s_case_t *c)
{
    for (int mb = 0; mb < MBS; mb++) {
        for (int k = 0; k < c->nx; k++) {
            int dup = 0;
            for (int k2 = 0; k2 < k; k2++)
                dup |= c->op->inputs[k2] == c->op->inputs[k];
            if (dup)
                continue;
            free(c->x[mb][k].data);
            free(c->dx[0][mb][k].data), free(c->dx[1][mb][k].data);
        }
        free(c->stash[mb]), free(c->wstash[mb]);
        free(c->y[mb].data), free(c->dy[mb].data);
    }
    for (int k = 0; k < c->nw; k++)
        free(c->w[k].data), free(c->dw[0][k].data), free(c->dw[1][k].data);
    gpp_sparse_grad_destroy(&c->sp[0]);
    gpp_sparse_grad_destroy(&c->sp[1]);
}

static int s_bwd(s_case_t *c, int run, int mb, gpp_bwd_part_t part)
{
    gpp_err_t err = {0};
    const gpp_tensor_t *xs[4];
    gpp_tensor_t *dxs[4];
    gpp_op_args_t a;
    s_args(c, run, mb, part, xs, dxs, &a);
    int rc = gpp_op_bwd(s_st, &a, &err);
    GPP_EXPECT_MSG(rc == 0, "%s (part %d): %s", c->op->name, (int)part, err.msg);
    return rc;
}

/* Byte differences between the two runs' gradients (0: bit for bit). */
static int64_t s_diff(const s_case_t *c)
{
    int64_t bad = 0;
    for (int mb = 0; mb < MBS; mb++)
        for (int k = 0; k < c->nx; k++)
            if (c->dx[0][mb][k].data)
                bad += memcmp(c->dx[0][mb][k].data, c->dx[1][mb][k].data,
                              gpp_tensor_bytes(&c->dx[0][mb][k])) != 0;
    for (int k = 0; k < c->nw; k++)
        bad += memcmp(c->dw[0][k].data, c->dw[1][k].data, gpp_tensor_bytes(&c->dw[0][k])) != 0;
    if (c->sp[0]) {
        int64_t n = gpp_sparse_grad_count(c->sp[0]), dim = gpp_sparse_grad_dim(c->sp[0]);
        bad += n != gpp_sparse_grad_count(c->sp[1]) ||
               memcmp(gpp_sparse_grad_rows(c->sp[0]), gpp_sparse_grad_rows(c->sp[1]),
                      (size_t)n * 4) != 0 ||
               memcmp(gpp_sparse_grad_values(c->sp[0]), gpp_sparse_grad_values(c->sp[1]),
                      (size_t)(n * dim) * 4) != 0;
        bad += n == 0; /* the comparison must have rows to compare */
    }
    return bad;
}

/* Every op of g; *ops counts the ops compared, *with_w those with a W part. */
static void s_check_graph(const gpp_graph_t *g, const char *what, int *ops, int *with_w)
{
    for (int i = 0; i < g->n_ops; i++) {
        const gpp_op_t *op = &g->ops[i];
        GPP_EXPECT_MSG(op->bwd_w_flops >= 0 && op->bwd_w_flops <= op->bwd_flops &&
                           (op->params > 0) == (op->bwd_w_flops > 0),
                       "%s: op %s: W FLOPs %g of %g with %lld parameters", what, op->name,
                       op->bwd_w_flops, op->bwd_flops, (long long)op->params);
        GPP_EXPECT_MSG((gpp_op_wstash_bytes(g, op) > 0) ==
                           (op->type == GPP_OP_ATTENTION || op->type == GPP_OP_CROSS_ATTENTION),
                       "%s: op %s: W stash %lld", what, op->name,
                       (long long)gpp_op_wstash_bytes(g, op));
        s_case_t c;
        if (!s_case_init(&c, g, op)) {
            s_case_free(&c);
            continue;
        }
        for (int mb = 0; mb < MBS; mb++)
            s_bwd(&c, 0, mb, GPP_BWD_ALL);
        for (int mb = 0; mb < MBS; mb++)
            s_bwd(&c, 1, mb, GPP_BWD_IN);
        for (int mb = 0; mb < MBS; mb++)
            s_bwd(&c, 1, mb, GPP_BWD_W);
        int64_t bad = s_diff(&c);
        GPP_EXPECT_MSG(bad == 0,
                       "%s: op %s (%s): %lld gradients differ between the fused "
                       "backward and B then W",
                       what, op->name, gpp_op_type_name(op->type), (long long)bad);
        (*ops)++;
        *with_w += op->params > 0;
        s_case_free(&c);
    }
}

static void t_zoo(void)
{
    int ops = 0, with_w = 0;
    for (size_t i = 0; i < sizeof s_specs / sizeof *s_specs; i++) {
        gpp_err_t err = {0};
        gpp_graph_t *g = gpp_zoo_build(s_specs[i], &err);
        GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s: %s", s_specs[i], err.msg);
        if (g)
            s_check_graph(g, s_specs[i], &ops, &with_w);
        gpp_graph_destroy(&g);
    }
    GPP_EXPECT(gpp_zoo_count() == (int)(sizeof s_specs / sizeof *s_specs));
    printf("  zoo: %d ops, %d with parameters: B then W == the fused backward, bit for bit\n", ops,
           with_w);
    GPP_EXPECT(with_w > 20);
}

static void t_torch_ops(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_graph_read_json("tests/data/graphs/torch_ops.json", &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    int ops = 0, with_w = 0;
    if (g)
        s_check_graph(g, "torch_ops.json", &ops, &with_w);
    int seen[GPP_OP__COUNT] = {0};
    for (int i = 0; g && i < g->n_ops; i++)
        seen[g->ops[i].type] = 1;
    /* the PyTorch modules' op types with parameters are all there */
    GPP_EXPECT(seen[GPP_OP_EMBEDDING] && seen[GPP_OP_PARAM_ADD] && seen[GPP_OP_PATCH_EMBED] &&
               seen[GPP_OP_CROSS_ATTENTION] && seen[GPP_OP_EMBEDDING_BAG]);
    printf("  torch_ops.json: %d ops, %d with parameters: bit for bit\n", ops, with_w);
    gpp_graph_destroy(&g);
}

/* A backend without the split (the CUDA backend's table) refuses it. */
static void t_refusal(void)
{
    gpp_err_t err = {0};
    GPP_EXPECT(gpp_backend_bwd_split(s_be, &err) == 1);
    gpp_backend_vt_t vt = *s_be->vt;
    vt.attention_bwd_in = NULL;
    vt.attention_bwd_w = NULL;
    struct gpp_backend_s fake = *s_be;
    fake.vt = &vt;
    snprintf(fake.name, sizeof fake.name, "cuda");
    GPP_EXPECT(gpp_backend_bwd_split(&fake, &err) == 0);
    GPP_EXPECT_MSG(strstr(err.msg, "cuda backend has no split backward") &&
                       strstr(err.msg, "schedule = \"1f1b\"") &&
                       strstr(err.msg, "backend = \"cpu\""),
                   "%s", err.msg);
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
        {"zoo", t_zoo}, {"torch_ops", t_torch_ops}, {"refusal", t_refusal}, {NULL, NULL}};
    int rc = gpp_test_run(cases);
    gpp_stream_destroy(&s_st);
    gpp_backend_destroy(&s_be);
    return rc;
}
