/* test_exec_split: the executor's split backward (gpp_exec_backward_part,
 * docs/executor.md "The split backward") on zoo models cut into stages as
 * a pipeline agent drives them, against the same stages running whole
 * backwards:
 *
 *   whole: F0..F(m-1) on every stage, then per micro-batch j (ascending)
 *          every stage's backward, last stage first
 *   split: the same forwards, then per j every stage's B (input gradients
 *          handed upstream at once), W(j - 1) after B(j), the last W at
 *          the end: a zero-bubble order with W delay 1
 *
 * Two iterations with an optimizer step between. Every boundary input
 * gradient after B equals the whole backward's, and the parameter
 * gradients (dense and sparse), the loss and the weights after each step
 * are equal bit for bit. Between B and W a stage holds memory (what W
 * reads); after W as much as after the whole backward. Misuse
 * fails with a message: W before B, B twice, a whole backward after B, a
 * begin or an optimizer step with a W pending, a backend without the
 * split, an executor whose memory plan is for whole backwards. */
#include <stdlib.h>
#include <string.h>

#include "agent/data/gpp_data.h"
#include "agent/exec/gpp_exec.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_backend_impl.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_sparse.h"
#include "model/gpp_graph.h"
#include "tests/gpp_test.h"
#include "tests/gpp_fixtures.h"

#define MAX_STAGES 8

/* The case-study and Transformer zoo models: two stages by op index. */
#define S_TRANSFORMER "transformer:layers=2,hidden=16,heads=2,seq=4,ffn=32,classes=4"
#define S_CASE "case_study:branches=2,blocks=2,hidden=16,heads=4,seq=4,ffn=32,classes=4"

/* An executor of ops for mini-batch B in micro-batches of b, all of them
 * in flight at once; split: planned for B and W passes. */
static gpp_exec_t *s_exec(gpp_fixture_exec_t *f, gpp_backend_t *be, int n, const int *ops,
                          int64_t B, int64_t b, int split)
{
    gpp_err_t err = {0};
    gpp_exec_cfg_t c = {
        .seed = 11,
        .batch = B,
        .micro = b,
        .inflight = (int)(B / b),
        .slots = (int)(B / b),
        .split = split,
        .optim = {
            .kind = GPP_OPTIM_ADAMW, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}};
    gpp_exec_t *ex = gpp_exec_new(f->g, n, ops, be, f->data, &c, &err);
    GPP_EXPECT_MSG(ex != NULL, "%s", err.msg);
    return ex;
}

/* Dense and sparse gradients of a and b equal byte for byte. */
static int s_same_grads(gpp_exec_t *a, gpp_exec_t *b)
{
    int64_t na = 0, nb = 0;
    const float *ga = gpp_exec_grads(a, &na), *gb = gpp_exec_grads(b, &nb);
    int same = na == nb && (na == 0 || memcmp(ga, gb, (size_t)na * 4) == 0);
    for (int i = 0; same && i < gpp_exec_n_sparse(a); i++) {
        gpp_sparse_grad_t *sa = gpp_exec_sparse_grad(a, i), *sb = gpp_exec_sparse_grad(b, i);
        int64_t k = gpp_sparse_grad_count(sa), d = gpp_sparse_grad_dim(sa);
        same = k == gpp_sparse_grad_count(sb) &&
               memcmp(gpp_sparse_grad_rows(sa), gpp_sparse_grad_rows(sb), (size_t)k * 4) == 0 &&
               memcmp(gpp_sparse_grad_values(sa), gpp_sparse_grad_values(sb),
                      (size_t)(k * d) * 4) == 0;
    }
    return same;
}

static int s_same_weights(gpp_exec_t *a, gpp_exec_t *b)
{
    int same = gpp_exec_n_params(a) == gpp_exec_n_params(b);
    for (int i = 0; same && i < gpp_exec_n_params(a); i++) {
        const gpp_tensor_t *x = gpp_exec_param(a, i), *y = gpp_exec_param(b, i);
        same = memcmp(x->data, y->data, gpp_tensor_bytes(x)) == 0;
    }
    return same;
}

/* Every boundary input gradient of micro-batch j: split's after its B
 * equals whole's after its backward. */
static int s_same_input_grads(gpp_exec_t *whole, gpp_exec_t *split, int j)
{
    int same = 1;
    for (int q = 0; q < gpp_exec_n_inputs(split); q++) {
        int p = gpp_exec_input_op(split, q);
        const gpp_tensor_t *a = gpp_exec_input_grad(whole, j, p),
                           *b = gpp_exec_input_grad(split, j, p);
        if (!a || !b) {
            same &= !a && !b;
            continue;
        }
        same &= gpp_tensor_bytes(a) == gpp_tensor_bytes(b) &&
                memcmp(a->data, b->data, gpp_tensor_bytes(a)) == 0;
    }
    return same;
}

/* One model cut by stage_of into n stages: two iterations, whole vs split. */
static void s_model(gpp_fixture_exec_t *f, const int *stage_of, int n, int64_t B, int64_t b)
{
    gpp_err_t err = {0};
    gpp_exec_t *whole[MAX_STAGES] = {0}, *split[MAX_STAGES] = {0};
    int ok = 1;
    for (int s = 0; s < n; s++) {
        int *ops = calloc((size_t)f->g->n_ops, sizeof *ops), k = 0;
        for (int i = 0; i < f->g->n_ops; i++)
            if (stage_of[i] == s)
                ops[k++] = i;
        whole[s] = s_exec(f, f->be, k, ops, B, b, 0);
        split[s] = s_exec(f, f->be, k, ops, B, b, 1);
        free(ops);
        ok &= whole[s] && split[s];
    }
    const int m = (int)(B / b);
    int in_grads = 1, grads = 1, weights = 1, losses = 1, released = 1;
    int64_t after_f = 0, after_b = 0;
    for (int it = 0; it < 2 && ok; it++) {
        for (int j = 0; j < m; j++)
            for (int s = 0; s < n; s++) {
                gpp_exec_t **set[2] = {whole, split};
                for (int v = 0; v < 2; v++) {
                    GPP_EXPECT(gpp_exec_begin(set[v][s], j, it * B + j * b, b, &err) == 0);
                    GPP_EXPECT_MSG(gpp_fixture_hand_inputs(set[v], stage_of, s, j, b, &err) == 0,
                                   "%s", err.msg);
                    GPP_EXPECT_MSG(gpp_exec_forward(set[v][s], j, &err) == 0, "%s", err.msg);
                }
            }
        for (int j = 0; j < m; j++) {
            for (int s = n - 1; s >= 0; s--) {
                GPP_EXPECT(gpp_fixture_hand_grads(whole, n, s, j, b, &err) == 0);
                GPP_EXPECT_MSG(gpp_exec_backward(whole[s], j, &err) == 0, "%s", err.msg);
                GPP_EXPECT(gpp_fixture_hand_grads(split, n, s, j, b, &err) == 0);
                int64_t f0 = gpp_exec_stash_bytes(split[s]);
                GPP_EXPECT_MSG(gpp_exec_backward_part(split[s], j, GPP_BWD_IN, &err) == 0, "%s",
                               err.msg);
                int64_t b0 = gpp_exec_stash_bytes(split[s]);
                after_f += f0, after_b += b0;
                in_grads &= s_same_input_grads(whole[s], split[s], j);
                if (j > 0)
                    GPP_EXPECT_MSG(gpp_exec_backward_part(split[s], j - 1, GPP_BWD_W, &err) == 0,
                                   "%s", err.msg);
            }
        }
        for (int s = 0; s < n; s++) {
            GPP_EXPECT_MSG(gpp_exec_backward_part(split[s], m - 1, GPP_BWD_W, &err) == 0, "%s",
                           err.msg);
            released &= gpp_exec_stash_bytes(split[s]) == gpp_exec_stash_bytes(whole[s]);
            grads &= s_same_grads(whole[s], split[s]);
            double lw = 0, ls = 0;
            GPP_EXPECT(gpp_exec_loss(whole[s], &lw, &err) == 0 &&
                       gpp_exec_loss(split[s], &ls, &err) == 0);
            losses &= lw == ls;
            for (int j = 0; j < m; j++) {
                gpp_exec_release(whole[s], j);
                gpp_exec_release(split[s], j);
            }
            released &= gpp_exec_stash_bytes(split[s]) == 0;
            GPP_EXPECT_MSG(gpp_exec_step(whole[s], &err) == 0 && gpp_exec_step(split[s], &err) == 0,
                           "%s", err.msg);
            weights &= s_same_weights(whole[s], split[s]);
        }
    }
    printf("  %s, %d stages, %d micro-batches: input gradients after B %s, gradients %s, "
           "losses %s, weights after 2 steps %s; live bytes before B %lld, after B %lld (summed "
           "over the B passes)\n",
           f->g->spec, n, m, in_grads ? "equal" : "DIFFER", grads ? "equal" : "DIFFER",
           losses ? "equal" : "DIFFER", weights ? "equal" : "DIFFER", (long long)after_f,
           (long long)after_b);
    GPP_EXPECT(ok && in_grads && grads && losses && weights && released);
    GPP_EXPECT(after_b > 0); /* W's inputs, output gradients and stashes */
    for (int s = 0; s < n; s++) {
        gpp_exec_destroy(&whole[s]);
        gpp_exec_destroy(&split[s]);
    }
}

static void t_zoo(void)
{
    const char *specs[] = {GPP_FIXTURE_MMT, GPP_FIXTURE_DLRM, GPP_FIXTURE_CANDLE, S_TRANSFORMER,
                           S_CASE};
    const gpp_fixture_rule_t *rules[] = {gpp_fixture_mmt_stages, gpp_fixture_dlrm_stages,
                                         gpp_fixture_candle_stages, NULL, NULL};
    const int stages[] = {5, 5, 4, 2, 2};
    for (int i = 0; i < 5; i++) {
        gpp_fixture_exec_t f;
        if (gpp_fixture_exec_open(&f, specs[i], 7) < 0)
            continue;
        int *stage_of = calloc((size_t)f.g->n_ops, sizeof *stage_of);
        for (int o = 0; o < f.g->n_ops; o++) {
            stage_of[o] =
                rules[i] ? gpp_fixture_stage_of(f.g->ops[o].name, rules[i]) : (o >= f.g->n_ops / 2);
            GPP_EXPECT_MSG(stage_of[o] >= 0, "op %s has no stage", f.g->ops[o].name);
        }
        s_model(&f, stage_of, stages[i], 12, 4);
        free(stage_of);
        gpp_fixture_exec_close(&f);
    }
}

/* Misuse: each call fails with a message and changes nothing. */
static void t_misuse(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, GPP_FIXTURE_MMT, 7) < 0)
        return;
    gpp_exec_t *ex = s_exec(&f, f.be, f.g->n_ops, f.all, 8, 4, 0);
    gpp_err_t err = {0};
    if (ex) { /* planned for whole backwards: no B pass */
        GPP_EXPECT(gpp_exec_begin(ex, 0, 0, 4, &err) == 0 && gpp_exec_forward(ex, 0, &err) == 0);
        GPP_EXPECT(gpp_exec_backward_part(ex, 0, GPP_BWD_IN, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "memory plan is for the whole backward") &&
                           strstr(err.msg, "gpp_exec_cfg_t.split = 1"),
                       "%s", err.msg);
        GPP_EXPECT(gpp_exec_backward(ex, 0, &err) == 0); /* the slot is as it was */
        gpp_exec_release(ex, 0);
        double loss;
        GPP_EXPECT(gpp_exec_loss(ex, &loss, &err) == 0 && gpp_exec_step(ex, &err) == 0);
    }
    gpp_exec_destroy(&ex);
    ex = s_exec(&f, f.be, f.g->n_ops, f.all, 8, 4, 1);
    if (ex) {
        GPP_EXPECT(gpp_exec_begin(ex, 0, 0, 4, &err) == 0 && gpp_exec_forward(ex, 0, &err) == 0);
        GPP_EXPECT(gpp_exec_backward_part(ex, 0, GPP_BWD_W, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "W pass of micro-batch 0 without its B pass"), "%s",
                       err.msg);
        GPP_EXPECT(gpp_exec_backward_part(ex, 0, GPP_BWD_IN, &err) == 0);
        GPP_EXPECT(gpp_exec_backward_part(ex, 0, GPP_BWD_IN, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "B pass of micro-batch 0 after its B pass (run its W"), "%s",
                       err.msg);
        GPP_EXPECT(gpp_exec_backward(ex, 0, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "backward of micro-batch 0 after its B pass"), "%s",
                       err.msg);
        GPP_EXPECT(gpp_exec_begin(ex, 0, 4, 4, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "slot 0 is still in flight (begun, its W pass pending)"),
                       "%s", err.msg);
        GPP_EXPECT(gpp_exec_step(ex, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "micro-batch 0's W pass pending (a W pass never crosses "
                                       "an optimizer step)"),
                       "%s", err.msg);
        GPP_EXPECT(gpp_exec_backward_part(ex, 0, GPP_BWD_W, &err) == 0);
        GPP_EXPECT(gpp_exec_backward_part(ex, 0, GPP_BWD_W, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "(its W pass already ran)"), "%s", err.msg);
        GPP_EXPECT(gpp_exec_step(ex, &err) == 0);
        /* release aborts a micro-batch between B and W: nothing held */
        GPP_EXPECT(gpp_exec_begin(ex, 1, 0, 4, &err) == 0 && gpp_exec_forward(ex, 1, &err) == 0 &&
                   gpp_exec_backward_part(ex, 1, GPP_BWD_IN, &err) == 0);
        GPP_EXPECT(gpp_exec_stash_bytes(ex) > 0);
        gpp_exec_release(ex, 1);
        GPP_EXPECT(gpp_exec_stash_bytes(ex) == 0);
        double loss;
        GPP_EXPECT(gpp_exec_loss(ex, &loss, &err) == 0 && gpp_exec_step(ex, &err) == 0);
    }
    gpp_exec_destroy(&ex);
    /* a backend without the split (the CUDA backend's table) */
    gpp_backend_vt_t vt = *f.be->vt;
    vt.attention_bwd_in = NULL;
    vt.attention_bwd_w = NULL;
    struct gpp_backend_s fake = *f.be;
    fake.vt = &vt;
    snprintf(fake.name, sizeof fake.name, "cuda");
    ex = s_exec(&f, &fake, f.g->n_ops, f.all, 8, 4, 1);
    if (ex) {
        GPP_EXPECT(gpp_exec_begin(ex, 0, 0, 4, &err) == 0 && gpp_exec_forward(ex, 0, &err) == 0);
        GPP_EXPECT(gpp_exec_backward_part(ex, 0, GPP_BWD_IN, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "B pass of micro-batch 0") &&
                           strstr(err.msg, "cuda backend has no split backward") &&
                           strstr(err.msg, "backend = \"cpu\""),
                       "%s", err.msg);
        GPP_EXPECT(gpp_exec_backward(ex, 0, &err) == 0); /* the slot is as it was */
    }
    gpp_exec_destroy(&ex);
    gpp_fixture_exec_close(&f);
}

int main(void)
{
    static const gpp_test_case_t cases[] = {{"zoo", t_zoo}, {"misuse", t_misuse}, {NULL, NULL}};
    return gpp_test_run(cases);
}
