/* bench_curve: how well one measured micro-batch size predicts the others
 * along the device preset's curve (gpp_cost: t(m) = t(b) * roof(m) /
 * roof(b)), against the linear rule t(b) * m / b.
 *
 *   bench_curve MODEL PROFILE.json B [--device PRESET]   (default cpu)
 *                                  (B = 0: the largest size of the profile)
 *
 * PROFILE.json: a multi-size profile of MODEL (gpp-train --profile-out).
 * A second cost model keeps only size B of every op (what a one-size
 * profile gives). For every size m of the profile it prints the model's
 * forward+backward summed over ops: measured, extrapolated from B along the
 * curve, and linear from B, with the errors of both against the
 * measurement, and the median over ops of each rule's absolute relative
 * error (ops measured above 1 us at B); then each op's fixed time (the
 * intercept of a line fitted over sizes <= 8) per launched kernel, the
 * measured counterpart of the preset's per-kernel launch (+ fill for the
 * op's GEMM kernels, the GEMMs column). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_model.h"
#include "model/gpp_optable.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_profile_io.h"

static int s_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, s_cmp);
    return n ? (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) : NAN;
}

static double s_op_ms(const gpp_cost_t *c, int op, int m)
{
    return gpp_cost_op_fwd_ms(c, op, m) + gpp_cost_op_bwd_ms(c, op, m);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL PROFILE.json B [--device PRESET]\n", argv[0]);
        return 2;
    }
    const char *device = argc > 5 && !strcmp(argv[4], "--device") ? argv[5] : "cpu";
    int b = atoi(argv[3]);
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_model_load(argv[1], &err);
    gpp_cluster_t cl;
    if (!g || gpp_cluster_init(&cl, device, 1, 1, &err) < 0) {
        fprintf(stderr, "bench_curve: %s\n", err.msg);
        return 2;
    }
    gpp_cost_t *full = gpp_cost_new(g, &cl), *one = gpp_cost_new(g, &cl);
    gpp_profile_t *prof = gpp_profile_io_read(argv[2], &err);
    if (!prof || gpp_cost_attach_profile(full, prof, &err) < 0) {
        fprintf(stderr, "bench_curve: %s\n", err.msg);
        return 2;
    }
    /* the sizes of the profile: the first op's rows */
    int sizes[32], n_sizes = 0;
    for (size_t i = 0; i < prof->n_rows; i++)
        if (prof->rows[i].op == prof->ops[0].id && n_sizes < 32)
            sizes[n_sizes++] = prof->rows[i].micro_batch;
    if (b == 0) /* the largest size measured */
        for (int k = 0; k < n_sizes; k++)
            b = sizes[k] > b ? sizes[k] : b;
    /* only size b of every op: what a one-size profile gives */
    size_t kept = 0;
    for (size_t i = 0; i < prof->n_rows; i++)
        if (prof->rows[i].micro_batch == b)
            prof->rows[kept++] = prof->rows[i];
    prof->n_rows = kept;
    snprintf(prof->origin, sizeof prof->origin, "one-size");
    if (gpp_cost_attach_profile(one, prof, &err) < 0) {
        fprintf(stderr, "bench_curve: size %d: %s\n", b, err.msg);
        return 2;
    }
    printf("%s on the %s curve, extrapolated from micro-batch %d\n\n", g->spec, device, b);
    printf("| m | measured ms | curve ms | curve err | linear ms | linear err | median op err "
           "curve | median op err linear |\n|---|---|---|---|---|---|---|---|\n");
    double *ec = calloc((size_t)g->n_ops, sizeof *ec), *el = calloc((size_t)g->n_ops, sizeof *el);
    for (int k = 0; k < n_sizes; k++) {
        int m = sizes[k], n = 0;
        double meas = 0, curve = 0, lin = 0;
        for (int op = 0; op < g->n_ops; op++) {
            if (!gpp_cost_op_profiled(full, op))
                continue;
            double t = s_op_ms(full, op, m), tc = s_op_ms(one, op, m);
            double tl = s_op_ms(full, op, b) * m / b;
            meas += t, curve += tc, lin += tl;
            if (s_op_ms(full, op, b) > 1e-3 && t > 0) {
                ec[n] = fabs(tc / t - 1);
                el[n++] = fabs(tl / t - 1);
            }
        }
        printf("| %d | %.3f | %.3f | %+.1f%% | %.3f | %+.1f%% | %.1f%% | %.1f%% |\n", m, meas,
               curve, 100 * (curve / meas - 1), lin, 100 * (lin / meas - 1), 100 * s_median(ec, n),
               100 * s_median(el, n));
    }
    /* the fixed part of each op's measured time: the intercept of a
       least-squares line through its sizes <= 8, per launched kernel
       (forward kernels + twice as many backward, as the roofline counts) */
    printf("\n| op | type | kernels | GEMMs | fixed us (fit over m <= 8) | per kernel us |\n"
           "|---|---|---|---|---|---|\n");
    for (int op = 0; op < g->n_ops; op++) {
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        int n = 0;
        for (int k = 0; k < n_sizes; k++)
            if (sizes[k] <= 8) {
                double x = sizes[k], y = s_op_ms(full, op, sizes[k]) * 1e3;
                sx += x, sy += y, sxx += x * x, sxy += x * y, n++;
            }
        const gpp_op_info_t *T = &gpp_optable[g->ops[op].type];
        int kern = 3 * T->fwd_kernels, gemms = T->fwd_gemms + T->bwd_gemms;
        if (n < 2 || !gpp_cost_op_profiled(full, op) || !kern)
            continue;
        double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), icpt = (sy - slope * sx) / n;
        printf("| %s | %s | %d | %d | %.1f | %.1f |\n", g->ops[op].name, T->name, kern, gemms, icpt,
               icpt / kern);
    }
    free(ec);
    free(el);
    gpp_profile_destroy(&prof);
    gpp_cost_destroy(&full);
    gpp_cost_destroy(&one);
    gpp_graph_destroy(&g);
    return 0;
}
