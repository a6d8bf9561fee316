/* bench_plan: times the partitioner on one model/cluster and prints one
 * line: planner, model, devices, batch, micro-batch, stages, depth,
 * bottleneck TPS, estimated iteration, search time (best of --repeat runs).
 *
 * The search time is wall clock (the plan's search_ms); cpu is the process
 * CPU time of the same call, which a loaded machine inflates less.
 *
 *   bench_plan MODEL DEVICES BATCH [--spp] [--device v100-16g] [--gpn 4]
 *              [--repeat N] [--mbs B] [--eps E] [--per-stage-mbs] [--kfkb]
 *              [--no-chain] [--stages]
 * --no-chain: the graph pipeline's own search only, without its chain candidate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gpp_time.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_part.h"

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: %s MODEL DEVICES BATCH [--spp] [--device NAME] [--gpn N] [--repeat N] "
                "[--mbs B] [--eps E] [--per-stage-mbs] [--kfkb] [--no-chain] [--stages]\n",
                argv[0]);
        return 2;
    }
    const char *model = argv[1], *device = "v100-16g";
    int n_dev = atoi(argv[2]), batch = atoi(argv[3]), gpn = 4, repeat = 1, spp = 0, show = 0,
        no_chain = 0;
    int mbs = 0;
    double eps = 0;
    int per_stage = 0, kfkb = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--spp"))
            spp = 1;
        else if (!strcmp(argv[i], "--stages"))
            show = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device = argv[++i];
        else if (!strcmp(argv[i], "--gpn") && i + 1 < argc)
            gpn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mbs") && i + 1 < argc)
            mbs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--per-stage-mbs"))
            per_stage = 1;
        else if (!strcmp(argv[i], "--kfkb"))
            kfkb = 1;
        else if (!strcmp(argv[i], "--no-chain"))
            no_chain = 1;
        else if (!strcmp(argv[i], "--eps") && i + 1 < argc)
            eps = atof(argv[++i]);
        else {
            fprintf(stderr, "unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build(model, &err);
    if (!g || gpp_graph_finalize(g, &err)) {
        fprintf(stderr, "bench_plan: %s\n", err.msg);
        return 1;
    }
    gpp_cluster_t cl;
    if (gpp_cluster_init(&cl, device, n_dev, gpn, &err)) {
        fprintf(stderr, "bench_plan: %s\n", err.msg);
        return 1;
    }
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, batch);
    o.spp = spp;
    o.micro_batch = mbs;
    o.per_stage_mbs = per_stage;
    o.kfkb = kfkb;
    o.no_chain = no_chain;
    if (eps > 0)
        o.eps = eps;
    double best_ms = 1e300, best_cpu_ms = 1e300;
    gpp_plan_t *p = NULL;
    for (int r = 0; r < repeat; r++) {
        gpp_plan_destroy(&p);
        int64_t need = 0;
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        p = gpp_part_run(g, cost, &o, &need, &err);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        double cpu = (c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
        if (cpu < best_cpu_ms)
            best_cpu_ms = cpu;
        if (!p) {
            fprintf(stderr, "bench_plan: %s\n", err.msg);
            return 1;
        }
        if (p->search_ms < best_ms)
            best_ms = p->search_ms;
    }
    int used = 0;
    for (int s = 0; s < p->n_stages; s++)
        used += p->stages[s].devices;
    printf("%-4s %-28s dev %5d (used %5d) batch %6d mbs %5d stages %4d depth %3d "
           "tps %10.5f ms iter %10.2f ms search %10.2f ms cpu %10.2f ms\n",
           p->planner, model, n_dev, used, batch, p->micro_batch, p->n_stages, p->depth,
           p->bottleneck_tps_ms, p->iteration_ms, best_ms, best_cpu_ms);
    if (show)
        for (int s = 0; s < p->n_stages; s++) {
            const gpp_stage_t *st = &p->stages[s];
            printf("  stage %3d ops %4d [%s .. %s] dev %3d b %4d k %d inflight %5d tps %.5f "
                   "mem %.2f GiB succ %d\n",
                   s, st->n_ops, g->ops[st->ops[0]].name, g->ops[st->ops[st->n_ops - 1]].name,
                   st->devices, st->micro_batch, st->k, st->inflight, st->tps_ms,
                   st->mem_bytes / 1073741824.0, st->n_succ);
        }
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
    return 0;
}
