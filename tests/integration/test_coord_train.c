/* test_coord_train: pipeline-parallel training with real processes on
 * loopback gives the weights and loss curve of single-process training.
 *
 * Each case runs gpp-coordinator (local launch, 4 gpp-agent processes,
 * Gloo over loopback) with a plan, and gpp-train on the same model, batch,
 * micro-batch, optimizer and seed, for 5 iterations. Then:
 *   - every stage checkpoint the agents wrote matches the single-process
 *     weights: over all parameters of the stage ||a - b|| / ||b|| <= 1e-4
 *     (printed with the largest absolute difference and the worst single
 *     tensor). Not per tensor: with data parallelism the gradient is summed
 *     in another order, and AdamW turns the rounding noise of a gradient
 *     that is exactly zero in theory (the key part of an attention's QKV
 *     bias: softmax ignores a constant added to every key) into +-lr steps,
 *     so that one small tensor differs by ~1e-2 relative while the stage
 *     agrees to ~1e-6. Plans without data parallelism match bit for bit;
 *   - the loss per iteration (metrics JSON lines) matches gpp-train's
 *     printed loss to a relative 1e-4;
 *   - the same plan and seed run twice give byte-identical checkpoints
 *     (mmt_dp for the dense all-reduce, dlrm_dp_big for the sparse sync);
 *   - the coordinator prints "weights sha256 <hex>", the digest of the final
 *     checkpoint set's parameters (per-op digests combined in op order).
 * Plans: tests/data/plans/ (gpp-plan/1), written by gpp-plan or by hand
 * where the planner would not produce the shape under test. The binaries
 * come from $GPP_BIN (ctest sets it). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/gpp_model.h"
#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt_set.h"
#include "agent/exec/gpp_exec.h"
#include "planner/gpp_plan_io.h"
#include "tests/gpp_test.h"

#define S_ITERS 5
#define S_BATCH 32
#define S_MB 8
#define S_SEED 42
#define S_TOL 1e-4

#define S_MMT "mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=128"
#define S_DLRM                                                                                     \
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=32,hidden=64,dense_layers=2,rows=1000,"      \
    "dim=16,bag=8,top_layers=2"
/* the same DLRM with tables far larger than a batch touches (32 samples x 8
 * ids: at most 256 of 100000 rows per table and iteration) */
#define S_DLRM_BIG                                                                                 \
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=32,hidden=64,dense_layers=2,rows=100000,"    \
    "dim=16,bag=8,top_layers=2"
#define S_UNO "candle_uno:branches=3,layers=2,hidden=64,in=32,doses=1,top_layers=2"

static char s_bin[1024], s_src[1024], s_tmp[256];
static char s_worst[128]; /* the parameter with the largest relative error */
static double s_max_abs;  /* the last case's largest absolute weight difference */

/* Writes the cluster file for one run; returns its path (static buffer). */
static const char *s_conf(const char *name, const char *model, const char *ckpt,
                          const char *metrics)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s.toml", s_tmp, name);
    /* the coordinator's port (the rendezvous runs on it too), free now
     * (kernel's choice) */
    int port = gpp_test_free_port();
    if (port < 0)
        return NULL;
    FILE *f = fopen(path, "w");
    if (!f)
        return NULL;
    fprintf(f,
            "[coordinator]\nendpoint = \"tcp://127.0.0.1:%d\"\n"
            "[cluster]\ndevice = \"cpu\"\nmem_gib = 4\n"
            "[[nodes]]\nhost = \"127.0.0.1\"\nslots = 4\n"
            "[job]\nmodel = \"%s\"\nbatch = %d\nmicro_batch = %d\niterations = %d\n"
            "optimizer = \"adamw\"\nlr = 1e-3\nseed = %d\nlaunch = \"local\"\n"
            "checkpoint_dir = \"%s\"\n"
            "[health]\nheartbeat_ms = 200\ntimeout_ms = 10000\n"
            "[metrics]\nfile = \"%s\"\n",
            port, model, S_BATCH, S_MB, S_ITERS, S_SEED, ckpt, metrics);
    fclose(f);
    return path;
}

static int s_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int s_sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "  command failed (%d): %s\n", rc, cmd);
    return rc;
}

/* Losses from the metrics file ("loss":x per line) or gpp-train's output
 * ("loss=x"). Returns how many. */
static int s_losses(const char *path, const char *key, double *out, int max)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[1 << 16];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, key);
        if (p)
            out[n++] = strtod(p + strlen(key), NULL);
    }
    fclose(f);
    return n;
}

/* Compares every stage checkpoint in dir (stages from dir/plan.json) with the
 * whole-model checkpoint ref. Returns the largest relative error of a stage;
 * *tensor_rel gets the largest of a single tensor (named in s_worst). */
static char s_digest[GPP_SHA256_HEX]; /* of the last s_compare's stage files */

static double s_compare(const char *model, const char *dir, const char *ref, double *max_abs,
                        double *tensor_rel)
{
    gpp_err_t err = {{0}};
    double worst = INFINITY, tworst = INFINITY;
    *max_abs = INFINITY;
    s_worst[0] = 0;
    gpp_graph_t *g = gpp_model_load(model, &err);
    unsigned char(*digests)[GPP_SHA256_BYTES] = NULL;
    int *has = NULL;
    char path[600];
    /* the last set, committed, with the plan its stages belong to */
    int latest = gpp_ckpt_set_latest(dir, &err);
    if (latest != S_ITERS)
        fprintf(stderr, "  newest complete checkpoint set in %s: %d, expected %d %s\n", dir, latest,
                S_ITERS, err.msg);
    gpp_ckpt_set_dir(path, sizeof path, dir, S_ITERS);
    snprintf(path + strlen(path), sizeof path - strlen(path), "/plan.json");
    gpp_plan_t *p = g && latest == S_ITERS ? gpp_plan_read_json(path, g, &err) : NULL;
    gpp_backend_cfg_t bc = {.kind = GPP_DEVICE_CPU, .cpu_threads = 1};
    gpp_backend_t *be = gpp_backend_new(&bc, &err);
    gpp_data_t *data = g ? gpp_data_new(g, S_SEED) : NULL;
    if (!p || !be) {
        fprintf(stderr, "  %s\n", err.msg);
        goto out;
    }
    worst = tworst = 0;
    *max_abs = 0;
    s_digest[0] = '\0';
    digests = calloc((size_t)g->n_ops, sizeof *digests);
    has = calloc((size_t)g->n_ops, sizeof *has);
    gpp_exec_cfg_t ec = {.seed = S_SEED,
                         .optim = {.kind = GPP_OPTIM_ADAMW,
                                   .lr = 1e-3f,
                                   .beta1 = 0.9f,
                                   .beta2 = 0.999f,
                                   .eps = 1e-8f},
                         .batch = S_BATCH};
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        gpp_exec_t *a = gpp_exec_new(g, st->n_ops, st->ops, be, data, &ec, &err);
        gpp_exec_t *b = gpp_exec_new(g, st->n_ops, st->ops, be, data, &ec, &err);
        gpp_ckpt_set_stage_path(path, sizeof path, dir, S_ITERS, s);
        if (!a || !b || gpp_exec_ckpt_load(a, path, &err) < 0 ||
            gpp_exec_ckpt_load(b, ref, &err) < 0) {
            fprintf(stderr, "  stage %d: %s\n", s, err.msg);
            worst = INFINITY;
        } else if (gpp_exec_ckpt_op_digests(a, digests, has, &err) < 0) {
            fprintf(stderr, "  stage %d: %s\n", s, err.msg);
            worst = INFINITY;
        } else {
            double sd2 = 0, sy2 = 0;
            for (int i = 0; i < gpp_exec_n_params(a); i++) {
                const gpp_tensor_t *x = gpp_exec_param(a, i), *y = gpp_exec_param(b, i);
                double d2 = 0, y2 = 0;
                for (int64_t k = 0; k < gpp_tensor_numel(x); k++) {
                    double d = (double)gpp_tensor_f32(x)[k] - (double)gpp_tensor_f32(y)[k];
                    d2 += d * d;
                    y2 += (double)gpp_tensor_f32(y)[k] * gpp_tensor_f32(y)[k];
                    if (fabs(d) > *max_abs)
                        *max_abs = fabs(d);
                }
                double rel = y2 > 0 ? sqrt(d2 / y2) : sqrt(d2);
                if (rel > tworst) {
                    tworst = rel;
                    snprintf(s_worst, sizeof s_worst, "%s", gpp_exec_param_name(a, i));
                }
                sd2 += d2;
                sy2 += y2;
            }
            double rel = sy2 > 0 ? sqrt(sd2 / sy2) : sqrt(sd2);
            if (rel > worst)
                worst = rel;
        }
        gpp_exec_destroy(&a);
        gpp_exec_destroy(&b);
    }
    if (isfinite(worst)) { /* the digest of the final set, as the coordinator combines it */
        unsigned char d[GPP_SHA256_BYTES];
        gpp_ckpt_weights_digest(g->n_ops, (const unsigned char(*)[GPP_SHA256_BYTES])digests, has,
                                d);
        gpp_sha256_hex(d, s_digest);
    }
out:
    free(digests);
    free(has);
    gpp_data_destroy(&data);
    gpp_backend_destroy(&be);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
    *tensor_rel = tworst;
    return worst;
}

/* One pipeline run against single-process training. plan: a fixture name
 * under tests/data/plans, or "gpp"/"spp" for the coordinator's planner. */
static void s_case(const char *name, const char *model, const char *plan)
{
    char ckpt[512], metrics[512], ref[512], ref_out[512], plan_arg[1024];
    snprintf(ckpt, sizeof ckpt, "%s/%s.ckpt", s_tmp, name);
    snprintf(metrics, sizeof metrics, "%s/%s.jsonl", s_tmp, name);
    snprintf(ref, sizeof ref, "%s/%s.ref", s_tmp, name);
    snprintf(ref_out, sizeof ref_out, "%s/%s.ref.txt", s_tmp, name);
    if (strchr(plan, '.'))
        snprintf(plan_arg, sizeof plan_arg, "%s/tests/data/plans/%s", s_src, plan);
    else
        snprintf(plan_arg, sizeof plan_arg, "%s", plan);
    const char *conf = s_conf(name, model, ckpt, metrics);
    GPP_EXPECT(conf != NULL);
    if (!conf)
        return;
    int rc = s_sh("timeout 180 %s/coordinator/gpp-coordinator --plan %s %s > %s/%s.out 2>&1", s_bin,
                  plan_arg, conf, s_tmp, name);
    GPP_EXPECT_MSG(rc == 0, "%s: coordinator failed; see %s/%s.out", name, s_tmp, name);
    s_max_abs = INFINITY;
    if (rc != 0) {
        s_sh("grep -v OpenBLAS %s/%s.out | tail -20 >&2", s_tmp, name);
        return;
    }
    rc = s_sh("timeout 180 %s/agent/exec/gpp-train --model '%s' --batch %d --micro-batch %d "
              "--iterations %d --seed %d --lr 1e-3 --threads 1 --save %s > %s 2>&1",
              s_bin, model, S_BATCH, S_MB, S_ITERS, S_SEED, ref, ref_out);
    GPP_EXPECT(rc == 0);
    double abs_diff, tensor_rel;
    double rel = s_compare(model, ckpt, ref, &abs_diff, &tensor_rel);
    s_max_abs = abs_diff;
    /* the coordinator's weights digest is the final set's */
    GPP_EXPECT_MSG(
        s_digest[0] && s_sh("grep -qx 'weights sha256 %s' %s/%s.out", s_digest, s_tmp, name) == 0,
        "%s: the coordinator's weights digest is not the final set's %s", name, s_digest);
    double l_pipe[S_ITERS], l_ref[S_ITERS];
    int np = s_losses(metrics, "\"loss\":", l_pipe, S_ITERS);
    int nr = s_losses(ref_out, "loss=", l_ref, S_ITERS);
    double lrel = 0;
    for (int i = 0; i < np && i < nr; i++) {
        double d = fabs(l_pipe[i] - l_ref[i]) / fmax(fabs(l_ref[i]), 1e-12);
        if (d > lrel)
            lrel = d;
    }
    printf("  %-16s weights: stage rel %.3g, max abs %.3g, worst tensor %.3g (%s); loss %.6f -> "
           "%.6f (ref %.6f -> %.6f), "
           "max rel %.3g\n",
           name, rel, abs_diff, tensor_rel, s_worst[0] ? s_worst : "-", np ? l_pipe[0] : NAN,
           np ? l_pipe[np - 1] : NAN, nr ? l_ref[0] : NAN, nr ? l_ref[nr - 1] : NAN, lrel);
    GPP_EXPECT_MSG(rel <= S_TOL, "%s: weights differ by %g (relative)", name, rel);
    GPP_EXPECT_MSG(np == S_ITERS && nr == S_ITERS, "%s: %d / %d losses", name, np, nr);
    GPP_EXPECT_MSG(lrel <= S_TOL, "%s: losses differ by %g (relative)", name, lrel);
    GPP_EXPECT_MSG(np < 2 || l_pipe[np - 1] < l_pipe[0], "%s: the loss did not decrease", name);
}

static void t_mmt_branches(void)
{
    s_case("mmt_branches", S_MMT, "mmt2_branches.json");
}
static void t_mmt_dp(void)
{
    s_case("mmt_dp", S_MMT, "mmt2_dp.json");
}
/* one tensor (a residual) consumed by two stages: its gradients are summed */
static void t_mmt_fanout(void)
{
    s_case("mmt_fanout", S_MMT, "mmt2_fanout.json");
}
/* per-stage micro-batch sizes (16 on 2 replicas next to 8): re-sharding */
static void t_mmt_mbs(void)
{
    s_case("mmt_mbs", S_MMT, "mmt2_mbs.json");
}
static void t_mmt_spp(void)
{
    s_case("mmt_spp", S_MMT, "mmt2_spp.json");
}
/* a chain (sequential) plan whose stages 1 and 2 share no tensor: the
 * dependency edge between them runs as zero-byte messages */
static void t_mmt_chain(void)
{
    s_case("mmt_chain", S_MMT, "mmt2_chain.json");
}
static void t_mmt_auto(void)
{
    s_case("mmt_auto", S_MMT, "gpp");
}
static void t_dlrm(void)
{
    s_case("dlrm", S_DLRM, "dlrm_gpp.json");
}
/* embedding tables in a data-parallel stage: the sparse gradient sync */
static void t_dlrm_dp(void)
{
    s_case("dlrm_dp", S_DLRM, "dlrm_dp.json");
}
/* the sparse sync on tables much larger than the touched rows, twice:
 * byte-identical checkpoints (the replicas' rows are merged in a fixed
 * order). The stage-relative bound is diluted by 100000 untouched rows (a
 * sync that drops the peer's rows exceeds it only 1.6-fold), so the weights
 * must also agree to 1e-6 absolute: such a bug moves them by ~2e-3. */
static void t_dlrm_dp_big(void)
{
    s_case("dlrm_dp_big", S_DLRM_BIG, "dlrm_dp.json");
    GPP_EXPECT_MSG(s_max_abs <= 1e-6, "dlrm_dp_big: weights differ by %g (absolute)", s_max_abs);
    s_case("dlrm_dp_big_again", S_DLRM_BIG, "dlrm_dp.json");
    int same = 1;
    for (int s = 0; s < 3; s++)
        same &= s_sh("cmp -s %s/dlrm_dp_big.ckpt/set-%010d/stage%d.ckpt "
                     "%s/dlrm_dp_big_again.ckpt/set-%010d/stage%d.ckpt",
                     s_tmp, S_ITERS, s, s_tmp, S_ITERS, s) == 0;
    printf("  dlrm_dp_big twice: stage checkpoints %s\n", same ? "bit-identical" : "DIFFER");
    GPP_EXPECT(same);
}
static void t_candle_uno(void)
{
    s_case("candle_uno", S_UNO, "candle_uno_gpp.json");
}

/* The same plan and seed twice: byte-identical stage checkpoints. */
static void t_deterministic(void)
{
    s_case("mmt_dp_again", S_MMT, "mmt2_dp.json");
    int same = 1;
    for (int s = 0; s < 3; s++)
        same &= s_sh("cmp -s %s/mmt_dp.ckpt/set-%010d/stage%d.ckpt "
                     "%s/mmt_dp_again.ckpt/set-%010d/stage%d.ckpt",
                     s_tmp, S_ITERS, s, s_tmp, S_ITERS, s) == 0;
    printf("  mmt_dp twice: stage checkpoints %s\n", same ? "bit-identical" : "DIFFER");
    GPP_EXPECT(same);
}

static const gpp_test_case_t cases[] = {{"mmt_branches", t_mmt_branches},
                                        {"mmt_dp", t_mmt_dp},
                                        {"mmt_fanout", t_mmt_fanout},
                                        {"mmt_mbs", t_mmt_mbs},
                                        {"mmt_spp", t_mmt_spp},
                                        {"mmt_chain", t_mmt_chain},
                                        {"mmt_auto", t_mmt_auto},
                                        {"dlrm", t_dlrm},
                                        {"dlrm_dp", t_dlrm_dp},
                                        {"dlrm_dp_big", t_dlrm_dp_big},
                                        {"candle_uno", t_candle_uno},
                                        {"deterministic", t_deterministic},
                                        {NULL, NULL}};

int main(void)
{
    const char *bin = getenv("GPP_BIN"), *src = getenv("GPP_SRC");
    snprintf(s_bin, sizeof s_bin, "%s", bin ? bin : "build");
    snprintf(s_src, sizeof s_src, "%s", src ? src : ".");
    snprintf(s_tmp, sizeof s_tmp, "/tmp/test_coord_train.XXXXXX");
    if (!mkdtemp(s_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    int rc = gpp_test_run(cases);
    if (rc == 0)
        s_sh("rm -rf %s", s_tmp);
    else
        fprintf(stderr, "logs kept in %s\n", s_tmp);
    return rc;
}
