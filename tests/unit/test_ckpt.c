/* Tests of checkpoints: save/load restores weights, optimizer state and the
 * step count so that training resumes bit-identically; a stage loads from a
 * whole-model checkpoint; corrupted, truncated, foreign and mismatched files
 * are rejected with the executor unchanged; a failed save leaves the old
 * file intact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpp_atomic_file.h"
#include "agent/exec/gpp_ckpt.h"
#include "agent/exec/gpp_data.h"
#include "agent/exec/gpp_exec.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

#define DLRM                                                                                       \
    "dlrm:dense_branches=1,sparse_branches=2,dense_in=8,hidden=16,dense_layers=1,rows=50,dim=4,"   \
    "bag=3,top_layers=1"

static gpp_exec_t *s_exec(gpp_fixture_exec_t *f, int n, const int *ops, gpp_optim_kind_t kind,
                          uint64_t seed)
{
    gpp_err_t err = {0};
    gpp_exec_cfg_t c = {.seed = seed, .batch = 8};
    c.optim = (gpp_optim_hp_t){.kind = kind,
                               .lr = 0.01f,
                               .momentum = 0.9f,
                               .beta1 = 0.9f,
                               .beta2 = 0.999f,
                               .eps = 1e-8f,
                               .weight_decay = 0.01f};
    gpp_exec_t *ex = gpp_exec_new(f->g, n, ops, f->be, f->data, &c, &err);
    GPP_EXPECT_MSG(ex != NULL, "%s", err.msg);
    return ex;
}

static void s_train(gpp_exec_t *ex, int iters)
{
    gpp_err_t err = {0};
    for (int i = 0; i < iters; i++) {
        int64_t t = gpp_exec_step_count(ex);
        for (int m = 0; m < 2; m++)
            GPP_EXPECT(gpp_exec_begin(ex, m, t * 8 + m * 4, 4, &err) == 0 &&
                       gpp_exec_forward(ex, m, &err) == 0 && gpp_exec_backward(ex, m, &err) == 0);
        GPP_EXPECT_MSG(gpp_exec_step(ex, &err) == 0, "%s", err.msg);
    }
}

/* Sum over parameters (and optimizer state when `state`) of |a - b|, by name. */
static double s_diff(gpp_exec_t *a, gpp_exec_t *b, int state)
{
    double d = 0;
    for (int i = 0; i < gpp_exec_n_params(a); i++) {
        int j = -1;
        for (int k = 0; k < gpp_exec_n_params(b); k++)
            if (strcmp(gpp_exec_param_name(a, i), gpp_exec_param_name(b, k)) == 0)
                j = k;
        if (j < 0)
            return INFINITY;
        int64_t n = gpp_tensor_numel(gpp_exec_param(a, i));
        for (int s = 0; s <= (state ? gpp_exec_optim_nbufs(a) : 0); s++) {
            const float *x =
                s ? gpp_exec_param_state(a, i, s - 1) : gpp_tensor_f32(gpp_exec_param(a, i));
            const float *y =
                s ? gpp_exec_param_state(b, j, s - 1) : gpp_tensor_f32(gpp_exec_param(b, j));
            for (int64_t e = 0; e < n; e++)
                d += fabs((double)x[e] - (double)y[e]);
        }
    }
    return d;
}

static void t_resume_is_exact(void)
{
    const gpp_optim_kind_t kinds[] = {GPP_OPTIM_ADAMW, GPP_OPTIM_SGD};
    for (int k = 0; k < 2; k++) {
        gpp_fixture_exec_t f;
        if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
            return;
        gpp_err_t err = {0};
        char *path = gpp_fixture_tmpfile("ckpt");
        gpp_exec_t *a = s_exec(&f, f.g->n_ops, f.all, kinds[k], 1);
        gpp_exec_t *b = s_exec(&f, f.g->n_ops, f.all, kinds[k], 2); /* other initial weights */
        if (a && b) {
            s_train(a, 3);
            GPP_EXPECT_MSG(gpp_ckpt_save(a, path, &err) == 0, "%s", err.msg);
            GPP_EXPECT(s_diff(a, b, 0) > 0);
            GPP_EXPECT_MSG(gpp_ckpt_load(b, path, &err) == 0, "%s", err.msg);
            GPP_EXPECT(s_diff(a, b, 1) == 0);
            GPP_EXPECT(gpp_exec_step_count(b) == 3);
            s_train(a, 2);
            s_train(b, 2);
            double d = s_diff(a, b, 1);
            printf("    %s: weights + state after resuming 2 more steps differ by %g\n",
                   k ? "sgd" : "adamw", d);
            GPP_EXPECT(d == 0);
        }
        gpp_exec_destroy(&a);
        gpp_exec_destroy(&b);
        unlink(path);
        free(path);
        gpp_fixture_exec_close(&f);
    }
}

static void t_stage_loads_from_whole_model(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
        return;
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("ckpt");
    gpp_exec_t *a = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 1);
    int ops[4] = {0, 1}; /* dense0.input, dense0.fc0 */
    gpp_exec_t *st = s_exec(&f, 2, ops, GPP_OPTIM_ADAMW, 5);
    if (a && st) {
        s_train(a, 2);
        GPP_EXPECT(gpp_ckpt_save(a, path, &err) == 0);
        GPP_EXPECT_MSG(gpp_ckpt_load(st, path, &err) == 0, "%s", err.msg);
        GPP_EXPECT(s_diff(st, a, 1) == 0);
    }
    gpp_exec_destroy(&a);
    gpp_exec_destroy(&st);
    unlink(path);
    free(path);
    gpp_fixture_exec_close(&f);
}

static void s_expect_load_fails(gpp_exec_t *ex, gpp_exec_t *snapshot, const char *path,
                                const char *words)
{
    gpp_err_t err = {0};
    int64_t steps = gpp_exec_step_count(ex);
    GPP_EXPECT(gpp_ckpt_load(ex, path, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, words) != NULL, "'%s' lacks '%s'", err.msg, words);
    printf("    rejected: %s\n", err.msg);
    GPP_EXPECT(s_diff(ex, snapshot, 1) == 0); /* unchanged */
    GPP_EXPECT(gpp_exec_step_count(ex) == steps);
}

static void t_bad_checkpoints_rejected(void)
{
    gpp_fixture_exec_t f, o;
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0 ||
        gpp_fixture_exec_open(&o, "candle_uno:branches=1,layers=1,hidden=8,in=4", 3) < 0)
        return;
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("ckpt"), *bad = gpp_fixture_tmpfile("ckpt");
    gpp_exec_t *a = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 1);
    gpp_exec_t *b = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *b_copy = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *sgd = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_SGD, 2);
    gpp_exec_t *foreign = s_exec(&o, o.g->n_ops, o.all, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *foreign_copy = s_exec(&o, o.g->n_ops, o.all, GPP_OPTIM_ADAMW, 2);
    if (!a || !b || !b_copy || !sgd || !foreign || !foreign_copy)
        goto done;
    s_train(a, 1);
    GPP_EXPECT(gpp_ckpt_save(a, path, &err) == 0);
    long len = 0;
    unsigned char *orig = gpp_fixture_slurp(path, &len), *c = malloc(len > 0 ? (size_t)len : 1);

    for (long at = 8; at < len; at += len / 7) { /* a flipped byte anywhere */
        memcpy(c, orig, (size_t)len);
        c[at] ^= 0x40;
        gpp_fixture_spit(bad, c, len);
        s_expect_load_fails(b, b_copy, bad, at < 12 ? "version" : "checksum");
    }
    gpp_fixture_spit(bad, orig, len - 1);
    s_expect_load_fails(b, b_copy, bad, "checksum");
    gpp_fixture_spit(bad, orig, len / 2);
    s_expect_load_fails(b, b_copy, bad, "checksum");
    gpp_fixture_spit(bad, orig, 5);
    s_expect_load_fails(b, b_copy, bad, "bad magic");
    memcpy(c, orig, (size_t)len);
    c[1] = 'X';
    gpp_fixture_spit(bad, c, len);
    s_expect_load_fails(b, b_copy, bad, "bad magic");
    s_expect_load_fails(b, b_copy, "/nonexistent/ckpt", "cannot open");
    s_expect_load_fails(foreign, foreign_copy, path, "is for model");
    s_expect_load_fails(sgd, sgd, path, "pass --optimizer adamw");

    /* A failed save leaves the old checkpoint intact and no temp file. */
    s_train(a, 1);
    gpp_atomic_file_fault_after(len / 2);
    GPP_EXPECT(gpp_ckpt_save(a, path, &err) == -1);
    gpp_atomic_file_fault_after(-1);
    printf("    failed save: %s\n", err.msg);
    GPP_EXPECT(strstr(err.msg, "untouched") != NULL);
    gpp_fixture_expect_untouched(path, orig, len);
    GPP_EXPECT(gpp_ckpt_save(a, "/nonexistent/dir/ckpt", &err) == -1);
    GPP_EXPECT(gpp_ckpt_load(b, path, &err) == 0); /* the old one still loads */
    free(orig);
    free(c);
done:
    gpp_exec_destroy(&a);
    gpp_exec_destroy(&b);
    gpp_exec_destroy(&b_copy);
    gpp_exec_destroy(&sgd);
    gpp_exec_destroy(&foreign);
    gpp_exec_destroy(&foreign_copy);
    unlink(path);
    unlink(bad);
    free(path);
    free(bad);
    gpp_fixture_exec_close(&f);
    gpp_fixture_exec_close(&o);
}

static const gpp_test_case_t cases[] = {
    {"resume_is_exact", t_resume_is_exact},
    {"stage_loads_from_whole_model", t_stage_loads_from_whole_model},
    {"bad_checkpoints_rejected", t_bad_checkpoints_rejected},
    {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
