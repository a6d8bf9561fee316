/* Tests of the op table (model/gpp_optable.h) and its readers: every type is
 * named and round-trips through its name, has a sane arity and attributes,
 * and has kernel entries (kernels/gpp_ops.h) when it runs; for every op of
 * every zoo model (small sizes) the planner's stash figure times the
 * micro-batch equals what the executor allocated for that op, and the
 * table's parameters are the executor's, name by name and float by float;
 * and a stage's peak device memory as the backend measures it is its
 * memory plan's total (model/gpp_memplan.h), to the byte. */
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec.h"
#include "kernels/gpp_ops.h"
#include "model/gpp_graph.h"
#include "model/gpp_memplan.h"
#include "model/gpp_optable.h"
#include "tests/gpp_test.h"
#include "tests/gpp_fixtures.h"

static void t_table_sanity(void)
{
    for (int t = 0; t < GPP_OP__COUNT; t++) {
        const gpp_op_info_t *T = &gpp_optable[t];
        GPP_EXPECT_MSG(T->name && T->name[0], "type %d has no name", t);
        if (!T->name)
            continue;
        GPP_EXPECT(gpp_op_type_parse(T->name) == t);
        GPP_EXPECT(strcmp(gpp_op_type_name((gpp_op_type_t)t), T->name) == 0);
        for (int u = 0; u < t; u++)
            GPP_EXPECT_MSG(strcmp(gpp_optable[u].name, T->name) != 0, "'%s' twice", T->name);
        GPP_EXPECT_MSG(T->min_inputs >= 0 && T->min_inputs <= T->max_inputs, "%s: arity", T->name);
        GPP_EXPECT(T->n_attrs >= 0 && T->n_attrs <= GPP_OP_MAX_ATTRS);
        for (int i = 0; i < T->n_attrs; i++) {
            const gpp_attr_t *a = &T->attrs[i];
            GPP_EXPECT_MSG(a->name && gpp_op_attr_find((gpp_op_type_t)t, a->name) == a,
                           "%s: attribute %d", T->name, i);
            GPP_EXPECT(a->offset < sizeof(gpp_op_t));
            GPP_EXPECT_MSG(a->required ||
                               (a->def >= a->min && (a->type == GPP_ATTR_NUM || a->def <= a->max)),
                           "%s.%s: default outside its range", T->name, a->name);
        }
        /* costs for every type whose figures are not given by a profile */
        GPP_EXPECT_MSG((T->cost != NULL) == (T->role != GPP_ROLE_OPAQUE), "%s: cost", T->name);
        /* kernel entries: a layer has both, a loss a forward, data and opaque none */
        const gpp_op_kernel_t *K = &gpp_op_kernels[t];
        GPP_EXPECT_MSG((K->fwd != NULL) == (T->role == GPP_ROLE_LAYER || T->role == GPP_ROLE_LOSS),
                       "%s: forward kernel entry", T->name);
        GPP_EXPECT_MSG((K->bwd != NULL) == (T->role == GPP_ROLE_LAYER), "%s: backward entry",
                       T->name);
        GPP_EXPECT(gpp_op_has_grad((gpp_op_type_t)t) ==
                   (T->role == GPP_ROLE_LAYER || T->role == GPP_ROLE_OPAQUE));
    }
    GPP_EXPECT(gpp_op_type_parse("conv") == -1);
    GPP_EXPECT(strcmp(gpp_op_type_name(GPP_OP__COUNT), "?") == 0);
    GPP_EXPECT(gpp_op_attr_find(GPP_OP_LINEAR, "heads") == NULL);
}

/* Small sizes of every zoo model; a model added to the zoo fails here until
 * it is listed. */
static const struct {
    const char *name, *spec;
} s_small[] = {
    {"mmt", "mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64,classes=8"},
    {"dlrm", "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=2,"
             "rows=100,dim=8,bag=4,top_layers=1"},
    {"candle_uno", "candle_uno:branches=2,layers=2,hidden=32,in=16,doses=1,top_layers=1"},
    {"transformer", "transformer:layers=2,hidden=16,heads=2,seq=4,ffn=32,classes=4"},
    {"case_study", "case_study:branches=2,blocks=2,hidden=16,heads=4,seq=4,ffn=32,classes=4"},
};

/* Graph files of the op types no zoo model has (the PyTorch modules'). */
static const char *const s_files[] = {"tests/data/graphs/torch_ops.json"};

static int s_find_param(gpp_exec_t *ex, const char *name)
{
    for (int i = 0; i < gpp_exec_n_params(ex); i++)
        if (strcmp(gpp_exec_param_name(ex, i), name) == 0)
            return i;
    return -1;
}

static void s_check_model(const char *spec)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, spec, 3) < 0)
        return;
    const gpp_graph_t *g = f.g;
    gpp_err_t err = {0};
    gpp_exec_cfg_t cfg = {.seed = 5, .batch = 8};
    cfg.optim.kind = GPP_OPTIM_ADAMW;
    cfg.optim.lr = 1e-3f;
    gpp_exec_t *ex = gpp_exec_new(g, g->n_ops, f.all, f.be, f.data, &cfg, &err);
    GPP_EXPECT_MSG(ex != NULL, "%s", err.msg);
    if (!ex) {
        gpp_fixture_exec_close(&f);
        return;
    }
    /* parameters: the table's list is the executor's, name by name */
    int64_t floats = 0, table_floats = 0;
    for (int i = 0; i < gpp_exec_n_params(ex); i++)
        floats += gpp_tensor_numel(gpp_exec_param(ex, i));
    int listed = 0;
    for (int op = 0; op < g->n_ops; op++) {
        gpp_param_t p[GPP_OP_MAX_PARAMS];
        int np = gpp_op_params(g, &g->ops[op], p);
        int64_t sum = 0;
        for (int k = 0; k < np; k++) {
            char name[GPP_NAME_LEN + 16];
            snprintf(name, sizeof name, "%s.%s", g->ops[op].name, p[k].name);
            int i = s_find_param(ex, name);
            GPP_EXPECT_MSG(i == listed, "%s: parameter %s at %d, expected %d", spec, name, i,
                           listed);
            if (i >= 0) {
                const gpp_tensor_t *t = gpp_exec_param(ex, i);
                GPP_EXPECT_MSG(t->rows == p[k].rows && t->cols == p[k].cols, "%s: %s shape", spec,
                               name);
            }
            sum += p[k].rows * p[k].cols;
            listed++;
        }
        GPP_EXPECT_MSG(sum == g->ops[op].params, "%s: op %s: %lld parameter floats, figure %lld",
                       spec, g->ops[op].name, (long long)sum, (long long)g->ops[op].params);
        table_floats += sum;
    }
    GPP_EXPECT(listed == gpp_exec_n_params(ex));
    GPP_EXPECT_MSG(floats == gpp_graph_params(g) && table_floats == floats,
                   "%s: executor %lld floats, graph %lld", spec, (long long)floats,
                   (long long)gpp_graph_params(g));

    /* stash: planner figure x micro-batch = executor allocation, per op */
    const int64_t n = 3;
    int64_t planned = 0, measured = 0, wrong = 0;
    if (gpp_exec_begin(ex, 0, 0, n, &err) < 0 || gpp_exec_forward(ex, 0, &err) < 0) {
        GPP_EXPECT_MSG(0, "%s: %s", spec, err.msg);
    } else {
        for (int op = 0; op < g->n_ops; op++) {
            int64_t want = g->ops[op].stash_bytes * n, got = gpp_exec_op_stash_bytes(ex, 0, op);
            if (got != want) {
                wrong++;
                printf("    %s: op %s (%s): executor %lld bytes, planner %lld x %lld\n", spec,
                       g->ops[op].name, gpp_op_type_name(g->ops[op].type), (long long)got,
                       (long long)g->ops[op].stash_bytes, (long long)n);
            }
            planned += want;
            measured += got;
        }
        /* the whole model as one stage holds nothing else between forward and
         * backward (no boundary outputs; no tensor kept for two ops in the zoo) */
        printf("  %s: stash %lld bytes planned, %lld allocated per op, %lld held\n", g->spec,
               (long long)planned, (long long)measured, (long long)gpp_exec_stash_bytes(ex));
        GPP_EXPECT(wrong == 0);
        GPP_EXPECT(gpp_exec_stash_bytes(ex) == planned);
        GPP_EXPECT_MSG(gpp_exec_backward(ex, 0, &err) == 0, "%s", err.msg);
    }
    gpp_exec_destroy(&ex);
    gpp_fixture_exec_close(&f);
}

static void t_zoo_stash_and_params(void)
{
    int n_small = (int)(sizeof s_small / sizeof s_small[0]);
    GPP_EXPECT(gpp_zoo_count() == n_small);
    for (int i = 0; i < gpp_zoo_count(); i++) {
        const char *spec = NULL;
        for (int k = 0; k < n_small; k++)
            if (strcmp(s_small[k].name, gpp_zoo_name(i)) == 0)
                spec = s_small[k].spec;
        GPP_EXPECT_MSG(spec != NULL, "zoo model '%s' has no small sizes in this test",
                       gpp_zoo_name(i));
        if (spec)
            s_check_model(spec);
    }
    for (size_t k = 0; k < sizeof s_files / sizeof s_files[0]; k++)
        s_check_model(s_files[k]);
}

/* Runs ops [lo, hi) of f's model as a stage with `mbs` micro-batches of at
 * most n samples in flight (all forwards, then all backwards, as a
 * pipeline's warm-up and drain; the last one smaller, as a mini-batch's
 * last) and compares the backend's high-water mark with the executor's
 * memory plan: every buffer in the plan's arena, nothing else allocated.
 * Returns measured - predicted. */
static int64_t s_stage_peak(gpp_fixture_exec_t *f, int lo, int hi, gpp_optim_kind_t kind, int mbs,
                            int64_t n)
{
    const gpp_graph_t *g = f->g;
    gpp_err_t err = {0};
    gpp_exec_cfg_t cfg = {.seed = 5, .batch = 4 * n, .micro = n, .inflight = mbs, .slots = mbs};
    cfg.optim.kind = kind;
    cfg.optim.lr = 1e-3f;
    gpp_backend_mem_t before;
    gpp_backend_mem(f->be, &before);
    GPP_EXPECT(before.live_bytes == 0);
    gpp_backend_mem_reset_peak(f->be);
    gpp_exec_t *ex = gpp_exec_new(g, hi - lo, f->all + lo, f->be, f->data, &cfg, &err);
    GPP_EXPECT_MSG(ex != NULL, "%s", err.msg);
    if (!ex)
        return 0;
    int ok = 1;
    for (int mb = 0; mb < mbs && ok; mb++) {
        int64_t k = mb == mbs - 1 && mbs > 1 ? n - 1 : n;
        ok = gpp_exec_begin(ex, mb, mb * n, k, &err) == 0;
        for (int i = 0; ok && i < gpp_exec_n_inputs(ex); i++) {
            int p = gpp_exec_input_op(ex, i);
            if (g->ops[p].type == GPP_OP_INPUT)
                continue; /* the executor regenerates data */
            gpp_tensor_t *t = gpp_exec_input(ex, mb, p);
            memset(t->data, 0, gpp_tensor_bytes(t));
        }
        ok = ok && gpp_exec_forward(ex, mb, &err) == 0;
    }
    for (int mb = 0; mb < mbs && ok; mb++) {
        for (int i = 0; ok && i < gpp_exec_n_outputs(ex); i++) {
            const gpp_op_t *o = &g->ops[gpp_exec_output_op(ex, i)];
            int64_t k = mb == mbs - 1 && mbs > 1 ? n - 1 : n;
            /* host memory: the CPU backend reads it, and it stays out of the count */
            float *dy = calloc((size_t)(k * o->rows * o->cols), sizeof(float));
            gpp_tensor_t t = gpp_tensor(dy, GPP_DTYPE_F32, k, o->rows, o->cols);
            ok = gpp_exec_add_output_grad(ex, mb, o->id, &t, 0, &err) == 0;
            free(dy);
        }
        ok = ok && gpp_exec_backward(ex, mb, &err) == 0;
        gpp_exec_release(ex, mb); /* input gradients sent */
    }
    GPP_EXPECT_MSG(ok, "%s ops [%d, %d): %s", g->spec, lo, hi, err.msg);
    int64_t pred = gpp_memplan_total(gpp_exec_plan(ex));
    gpp_backend_mem_t bm;
    gpp_backend_mem(f->be, &bm);
    /* every block counted as the backend rounds it: to the byte */
    GPP_EXPECT_MSG(bm.peak_bytes == pred,
                   "%s ops [%d, %d) %s, %d x %lld in flight: measured %lld, predicted %lld",
                   g->spec, lo, hi, kind == GPP_OPTIM_SGD ? "sgd" : "adamw", mbs, (long long)n,
                   (long long)bm.peak_bytes, (long long)pred);
    gpp_exec_destroy(&ex);
    return bm.peak_bytes - pred;
}

/* The memory plan is the executor's memory: for every zoo model, as one
 * stage and cut into two at a third and two thirds of its ops, with SGD and
 * AdamW and 1 or 3 micro-batches in flight, the backend's measured peak
 * equals the plan's total to the byte (the plan rounds the arena and each
 * state buffer as the backend does, common/gpp_alloc_rule.h). */
static void t_zoo_stage_peak(void)
{
    int64_t worst = 0, cases = 0;
    for (size_t k = 0; k < sizeof s_small / sizeof s_small[0]; k++) {
        gpp_fixture_exec_t f;
        if (gpp_fixture_exec_open(&f, s_small[k].spec, 3) < 0)
            continue;
        int n_ops = f.g->n_ops;
        const int cut[][2] = {{0, n_ops},
                              {0, n_ops / 3},
                              {n_ops / 3, n_ops},
                              {0, 2 * n_ops / 3},
                              {2 * n_ops / 3, n_ops}};
        for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++)
            for (int opt = 0; opt < 2; opt++)
                for (int mbs = 1; mbs <= 3; mbs += 2) {
                    int64_t d = s_stage_peak(&f, cut[c][0], cut[c][1],
                                             opt ? GPP_OPTIM_ADAMW : GPP_OPTIM_SGD, mbs, 3);
                    worst = d > worst ? d : worst;
                    cases++;
                }
        gpp_fixture_exec_close(&f);
    }
    for (size_t k = 0; k < sizeof s_files / sizeof s_files[0]; k++) {
        gpp_fixture_exec_t f;
        if (gpp_fixture_exec_open(&f, s_files[k], 3) < 0)
            continue;
        int n_ops = f.g->n_ops;
        const int cut[][2] = {{0, n_ops}, {0, n_ops / 2}, {n_ops / 2, n_ops}};
        for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++)
            for (int opt = 0; opt < 2; opt++)
                for (int mbs = 1; mbs <= 3; mbs += 2) {
                    int64_t d = s_stage_peak(&f, cut[c][0], cut[c][1],
                                             opt ? GPP_OPTIM_ADAMW : GPP_OPTIM_SGD, mbs, 3);
                    worst = d > worst ? d : worst;
                    cases++;
                }
        gpp_fixture_exec_close(&f);
    }
    printf("  %lld stages: measured - predicted peak at most %lld bytes\n",
           (long long)cases, (long long)worst);
}

static const gpp_test_case_t cases[] = {{"table_sanity", t_table_sanity},
                                        {"zoo_stash_and_params", t_zoo_stash_and_params},
                                        {"zoo_stage_peak", t_zoo_stage_peak},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
