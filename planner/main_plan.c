/* gpp-plan: plan a model on a cluster and print / write the plan.
 *
 *   gpp-plan (--model SPEC | --graph FILE | --profile FILE)
 *            (--devices N --device PRESET [--gpus-per-node G] | --cluster FILE.toml)
 *            --batch B [--micro-batch b] [--mem-gib M] [--planner gpp|spp]
 *            [--per-stage-mbs] [--kfkb] [--schedule auto|1f1b|zb-h1|zb-h2]
 *            [--print-schedule] [--json FILE] [--dot FILE] [--trace FILE] [--strategy FILE]
 *   gpp-plan --list-models
 *
 * Partition (gpp_part), schedule and validate (gpp_sched), simulate one
 * iteration (gpp_sim), then print the stage table and write the requested
 * files (gpp_plan_io, gpp_sim). Exit status: 0 on success, 2 on bad input
 * (flags, model, files, infeasible memory), 1 when a produced plan fails its
 * own validation (a bug). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_parse.h"
#include "common/gpp_err.h"
#include "common/gpp_time.h"
#include "model/gpp_optable.h"
#include "planner/gpp_cluster_config.h"
#include "planner/gpp_cost.h"
#include "model/gpp_graph.h"
#include "model/gpp_model.h"
#include "model/gpp_onnx.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_profile_io.h"
#include "model/gpp_profile_graph.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_sim.h"
#include "config/gpp_config.h"
#include "common/gpp_version.h"

#define EXIT_BAD_INPUT 2
#define EXIT_INTERNAL 1

static const char s_usage[] =
    "usage: gpp-plan (--model SPEC | --graph FILE | --profile FILE)\n"
    "                (--devices N --device PRESET [--gpus-per-node G] | --cluster FILE.toml)\n"
    "                --batch B [--micro-batch b] [--mem-gib M] [--planner gpp|spp]\n"
    "                [--per-stage-mbs] [--kfkb] [--json FILE] [--dot FILE] [--trace FILE]\n"
    "                [--strategy FILE] [--schedule S] [--print-schedule] [--cuda-graphs on|off]\n"
    "       gpp-plan --list-models | --version\n"
    "  --model SPEC       zoo model, e.g. mmt or mmt:branches=2,layers=2 (--list-models),\n"
    "                     or an ONNX model FILE.onnx (docs/graph-format.md, \"ONNX\")\n"
    "  --loss mse|ce      the loss at an ONNX model's outputs (default mse)\n"
    "  --graph FILE       model graph JSON (gpp-graph/1)\n"
    "  --profile FILE     profile.json: ops, sizes and measured runtimes\n"
    "  --devices N        devices to plan for; --device PRESET their kind\n"
    "  --gpus-per-node G  devices per node (default min(N, 8))\n"
    "  --cluster FILE     cluster.toml (device, nodes, links, and job defaults)\n"
    "  --batch B          mini-batch samples per iteration\n"
    "  --micro-batch b    fix the universal micro-batch (default: sweep divisors of B)\n"
    "  --mem-gib M        per-device memory bound (default: the device's, less 0.5 GiB)\n"
    "  --optimizer O      sgd|adamw: whose state stage memory counts (default adamw, or\n"
    "                     the --cluster file's job.optimizer)\n"
    "  --precision P      fp32|tf32|bf16: the GPU agents' matrix products (default fp32,\n"
    "                     or the --cluster file's cuda job.precision): the roofline's\n"
    "                     peak, and at bf16 half the activation bytes\n"
    "  --cuda-graphs on|off  GPU agents replay each pass as a CUDA graph (default off,\n"
    "                     or the --cluster file's job.cuda_graphs): stage memory counts\n"
    "                     the blocks the recordings keep\n"
    "  --bf16-tensors on|off  at --precision bf16, GPU agents keep activations in bf16\n"
    "                     (default off, or the --cluster file's job.bf16_tensors)\n"
    "  --planner gpp|spp  graph pipeline (default) or the sequential baseline\n"
    "  --per-stage-mbs    let each stage choose its micro-batch size\n"
    "  --kfkb             let each stage choose a kFkB schedule\n"
    "  --schedule S       auto|1f1b|zb-h1|zb-h2: the pipeline schedule (default auto,\n"
    "                     or the --cluster file's job.schedule): 1F1B, or zero-bubble\n"
    "                     (backwards split into B and W, W in the bubbles); auto takes\n"
    "                     the least simulated time that fits the memory (with a\n"
    "                     --cluster file whose job.backend is cuda: 1f1b, the one\n"
    "                     its agents run)\n"
    "  --print-schedule   also print each stage's pass order (F0 F1 B0 ... W0 ...)\n"
    "  --json/--dot/--trace/--strategy FILE   write the plan, the stage DAG, a Chrome\n"
    "                     trace of one simulated iteration, the authors' strategy file\n";

typedef struct {
    const char *model, *graph, *profile, *device, *cluster, *planner;
    const char *loss; /* --loss: an ONNX model's loss */
    const char *json, *dot, *trace, *strategy;
    int devices, gpus_per_node, batch, micro_batch;
    double mem_gib;
    const char *optimizer;   /* sgd | adamw: its state counts in stage memory */
    const char *cuda_graphs; /* on | off: GPU agents' CUDA graphs in stage memory */
    const char *bf16_tensors; /* on | off: GPU agents' bf16 activations at bf16 */
    const char *precision;   /* fp32 | tf32 | bf16: the GPU agents' products (roofline) */
    const char *schedule;    /* auto | 1f1b | zb-h1 | zb-h2 */
    int cuda_agents;         /* the --cluster file's agents are cuda: no split backward */
    int per_stage_mbs, kfkb, list_models, print_schedule;
} s_args_t;

static void s_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

static void s_die(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpp-plan: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (code == EXIT_BAD_INPUT)
        fprintf(stderr, "(gpp-plan --help shows the usage)\n");
    exit(code);
}

static int s_parse_int(const char *flag, const char *v, int lo)
{
    gpp_err_t err = {{0}};
    int64_t x = 0;
    if (gpp_parse_int64(flag, v, lo, INT_MAX, &x, &err) < 0)
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    return (int)x;
}

static double s_parse_pos(const char *flag, const char *v)
{
    gpp_err_t err = {{0}};
    double x = 0;
    if (gpp_parse_double(flag, v, 0, 1, 1e9, &x, &err) < 0)
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    return x;
}

/* Flags with a value; `seen` catches duplicates. */
typedef struct {
    const char *name;
    const char **str;
    int *i;
    double *d;
    int min;
} s_flag_t;

static void s_parse_args(int argc, char **argv, s_args_t *a)
{
    memset(a, 0, sizeof *a);
    const s_flag_t flags[] = {
        {"--model", &a->model, NULL, NULL, 0},
        {"--graph", &a->graph, NULL, NULL, 0},
        {"--profile", &a->profile, NULL, NULL, 0},
        {"--loss", &a->loss, NULL, NULL, 0},
        {"--device", &a->device, NULL, NULL, 0},
        {"--cluster", &a->cluster, NULL, NULL, 0},
        {"--planner", &a->planner, NULL, NULL, 0},
        {"--json", &a->json, NULL, NULL, 0},
        {"--dot", &a->dot, NULL, NULL, 0},
        {"--trace", &a->trace, NULL, NULL, 0},
        {"--strategy", &a->strategy, NULL, NULL, 0},
        {"--optimizer", &a->optimizer, NULL, NULL, 0},
        {"--cuda-graphs", &a->cuda_graphs, NULL, NULL, 0},
        {"--bf16-tensors", &a->bf16_tensors, NULL, NULL, 0},
        {"--precision", &a->precision, NULL, NULL, 0},
        {"--schedule", &a->schedule, NULL, NULL, 0},
        {"--devices", NULL, &a->devices, NULL, 1},
        {"--gpus-per-node", NULL, &a->gpus_per_node, NULL, 1},
        {"--batch", NULL, &a->batch, NULL, 1},
        {"--micro-batch", NULL, &a->micro_batch, NULL, 1},
        {"--mem-gib", NULL, NULL, &a->mem_gib, 0},
    };
    const struct {
        const char *name;
        int *v;
    } switches[] = {{"--per-stage-mbs", &a->per_stage_mbs},
                    {"--kfkb", &a->kfkb},
                    {"--list-models", &a->list_models},
                    {"--print-schedule", &a->print_schedule}};
    enum { NF = sizeof flags / sizeof *flags, NS = sizeof switches / sizeof *switches };
    int seen[NF + NS] = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            fputs(s_usage, stdout);
            exit(0);
        }
        const char *eq = strchr(arg, '=');
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        int found = 0;
        for (int f = 0; f < NF && !found; f++) {
            if (strlen(flags[f].name) != nlen || strncmp(arg, flags[f].name, nlen) != 0)
                continue;
            found = 1;
            if (seen[f]++)
                s_die(EXIT_BAD_INPUT, "%s given twice", flags[f].name);
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || (!eq && !strncmp(v, "--", 2)))
                s_die(EXIT_BAD_INPUT, "%s needs a value", flags[f].name);
            if (flags[f].str) {
                if (!*v)
                    s_die(EXIT_BAD_INPUT, "%s: empty value", flags[f].name);
                *flags[f].str = v;
            } else if (flags[f].i) {
                *flags[f].i = s_parse_int(flags[f].name, v, flags[f].min);
            } else {
                *flags[f].d = s_parse_pos(flags[f].name, v);
            }
        }
        for (int s = 0; s < NS && !found; s++) {
            if (strcmp(arg, switches[s].name) != 0)
                continue;
            found = 1;
            if (seen[NF + s]++)
                s_die(EXIT_BAD_INPUT, "%s given twice", switches[s].name);
            *switches[s].v = 1;
        }
        if (!found)
            s_die(EXIT_BAD_INPUT, "unknown argument '%s'", arg);
    }
}

/* A config's model is a zoo spec or, when it names a .json file, a graph. */
static int s_is_json_path(const char *s)
{
    size_t n = strlen(s);
    return n > 5 && strcmp(s + n - 5, ".json") == 0;
}

/* Fills the cluster (and job defaults) from the flags or the TOML file. */
static void s_cluster(s_args_t *a, gpp_cluster_t *cl)
{
    gpp_err_t err = {{0}};
    char cl_device[64] = ""; /* the --cluster file's device preset */
    int has_precision = 0;   /* a cuda job's precision, or --precision */
    gpp_precision_t precision = GPP_PRECISION_FP32;
    if (a->cluster) {
        if (a->devices || a->device || a->gpus_per_node)
            s_die(EXIT_BAD_INPUT, "--cluster replaces --devices, --device and --gpus-per-node; "
                                  "give one or the other");
        gpp_config_t cfg;
        if (gpp_config_load(&cfg, a->cluster, &err) < 0)
            s_die(EXIT_BAD_INPUT, "%s", err.msg);
        /* as the coordinator plans the file's job (--mem-gib overrides below) */
        if (gpp_cluster_from_config(&cfg, gpp_config_devices(&cfg), cl, &err) < 0)
            s_die(EXIT_BAD_INPUT, "%s", err.msg);
        snprintf(cl_device, sizeof cl_device, "%s", cfg.cluster.device);
        if (cfg.job.backend == GPP_DEVICE_CUDA) {
            precision = cfg.job.precision;
            has_precision = 1;
        }
        /* job defaults the flags did not give; strings live as long as the
           process, so the config is deliberately not released */
        static char model[GPP_CONFIG_PATH], profile[GPP_CONFIG_PATH], planner[8], schedule[8];
        if (!a->model && !a->graph && !a->profile) {
            if (cfg.cluster.profile[0]) {
                snprintf(profile, sizeof profile, "%s", cfg.cluster.profile);
                a->profile = profile;
            } else if (cfg.job.model[0]) {
                snprintf(model, sizeof model, "%s", cfg.job.model);
                if (s_is_json_path(model))
                    a->graph = model;
                else
                    a->model = model;
            }
        }
        if (!a->batch && cfg.job.batch > 0)
            a->batch = cfg.job.batch;
        if (!a->micro_batch && cfg.job.micro_batch > 0)
            a->micro_batch = cfg.job.micro_batch;
        if (!a->planner && cfg.job.planner[0]) {
            snprintf(planner, sizeof planner, "%s", cfg.job.planner);
            a->planner = planner;
        }
        if (!a->schedule && cfg.job.schedule[0]) {
            snprintf(schedule, sizeof schedule, "%s", cfg.job.schedule);
            a->schedule = schedule;
        }
        a->cuda_agents = cfg.job.backend == GPP_DEVICE_CUDA;
        gpp_config_release(&cfg);
    } else {
        if (!a->devices || !a->device)
            s_die(EXIT_BAD_INPUT, "give the cluster: --devices N --device PRESET, or --cluster "
                                  "FILE.toml");
        int gpn = a->gpus_per_node ? a->gpus_per_node : (a->devices < 8 ? a->devices : 8);
        if (gpp_cluster_init(cl, a->device, a->devices, gpn, &err) < 0)
            s_die(EXIT_BAD_INPUT, "--device %s: %s", a->device, err.msg);
        /* GPU agents load the next micro-batch's data ahead (their default)
           and round their blocks to the CUDA caching allocator's classes */
        int gpu = strcmp(a->device, "cpu") != 0;
        cl->load_ahead = gpu;
        cl->alloc_rule = gpu ? GPP_ALLOC_CLASSES : GPP_ALLOC_ALIGN64;
    }
    if (a->bf16_tensors && strcmp(a->bf16_tensors, "on") && strcmp(a->bf16_tensors, "off"))
        s_die(EXIT_BAD_INPUT, "--bf16-tensors %s: use on or off", a->bf16_tensors);
    int bf16_tensors = a->bf16_tensors ? !strcmp(a->bf16_tensors, "on") : cl->bf16_tensors;
    if (a->precision && gpp_precision_parse(a->precision, &precision) < 0)
        s_die(EXIT_BAD_INPUT, "--precision %s: use " GPP_PRECISION_CHOICES, a->precision);
    has_precision |= a->precision != NULL;
    if (has_precision && gpp_cluster_set_precision(cl, a->cluster ? cl_device : a->device,
                                                   precision, bf16_tensors, &err) < 0)
        s_die(EXIT_BAD_INPUT, "--precision %s: %s", gpp_precision_name(precision), err.msg);
    if (a->cuda_graphs) {
        if (strcmp(a->cuda_graphs, "on") && strcmp(a->cuda_graphs, "off"))
            s_die(EXIT_BAD_INPUT, "--cuda-graphs %s: use on or off", a->cuda_graphs);
        /* CPU agents never record: on only where the agents are GPUs */
        cl->graphs = !strcmp(a->cuda_graphs, "on") && cl->alloc_rule == GPP_ALLOC_CLASSES;
    }
    if (a->mem_gib > 0)
        cl->mem_bound_bytes = (int64_t)(a->mem_gib * (double)(1 << 30));
    if (a->optimizer) {
        gpp_optim_kind_t k;
        if (gpp_optim_kind_parse(a->optimizer, &k) < 0)
            s_die(EXIT_BAD_INPUT, "--optimizer '%s': use " GPP_OPTIM_KIND_CHOICES, a->optimizer);
        cl->optim_bufs = k == GPP_OPTIM_SGD ? GPP_OPTIM_BUFS_SGD : GPP_OPTIM_BUFS_ADAMW;
    }
}

/* The model: a zoo spec or ONNX file, a graph JSON file, or the graph of
 * the profile *prof (read here; the caller owns it). */
static gpp_graph_t *s_graph(const s_args_t *a, gpp_profile_t **prof)
{
    gpp_err_t err = {{0}};
    int given = !!a->model + !!a->graph + !!a->profile;
    if (given == 0)
        s_die(EXIT_BAD_INPUT, "give the model: --model SPEC, --graph FILE or --profile FILE");
    if (given > 1)
        s_die(EXIT_BAD_INPUT, "give only one of --model, --graph and --profile");
    char spec[4200];
    if (a->loss && !a->model)
        s_die(EXIT_BAD_INPUT, "--loss applies to --model FILE.onnx only");
    if (a->model && gpp_onnx_spec_loss(a->model, a->loss, spec, sizeof spec, &err) < 0)
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    if (a->profile && !(*prof = gpp_profile_io_read(a->profile, &err)))
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    gpp_graph_t *g = a->model   ? gpp_model_load(spec, &err)
                     : a->graph ? gpp_graph_read_json(a->graph, &err)
                                : gpp_profile_graph(*prof, &err);
    if (!g)
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    if (gpp_graph_finalize(g, &err) < 0)
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    return g;
}

/* "name" cut to fit n columns. */
static void s_fit(char *out, size_t n, const char *s)
{
    if (strlen(s) < n)
        snprintf(out, n, "%s", s);
    else
        snprintf(out, n, "%.*s~", (int)n - 2, s);
}

/* --print-schedule: every stage's pass order, "F0 F1 B0 ..." (gpp_sched_format). */
static void s_print_schedule(const gpp_plan_t *p)
{
    if (p->schedule == GPP_SCHED_1F1B)
        printf("\nschedule (each stage's pass order: F forward, B backward of micro-batch j)\n");
    else
        printf("\nschedule (each stage's pass order: F forward, B input gradients, W parameter "
               "gradients of micro-batch j)\n");
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_actions_t *l = &p->stages[s].compute;
        size_t n = gpp_sched_format(l, 0, NULL, 0) + 1;
        char *text = gpp_xcalloc(n, 1);
        gpp_sched_format(l, 0, text, n);
        printf("stage %-3d %s\n", s, text);
        free(text);
    }
}

static void s_print(const gpp_plan_t *p, const gpp_graph_t *g, const gpp_sim_t *sim,
                    const gpp_cluster_t *cl, double estimate_ms, double total_ms, int auto_1f1b)
{
    printf("%s plan of %s (%d ops, %.3g M params) on %d x %s (%d per node), batch %d\n\n",
           p->planner, g->spec[0] ? g->spec : p->model, g->n_ops, (double)gpp_graph_params(g) / 1e6,
           cl->n_devices, cl->device.name, cl->gpus_per_node, p->batch);
    printf("%-5s %-5s %-36s %-7s %-5s %-3s %-8s %-9s %-10s %-10s %-10s\n", "stage", "ops",
           "first .. last", "devices", "mbs", "k", "inflight", "TPS ms", "weights", "act",
           "sim peak");
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        char a[18], b[18], range[40], devs[16];
        s_fit(a, sizeof a, g->ops[st->ops[0]].name);
        s_fit(b, sizeof b, g->ops[st->ops[st->n_ops - 1]].name);
        snprintf(range, sizeof range, "%s .. %s", a, b);
        if (st->devices == 1)
            snprintf(devs, sizeof devs, "%d", st->first_device);
        else
            snprintf(devs, sizeof devs, "%d-%d", st->first_device,
                     st->first_device + st->devices - 1);
        printf("%-5d %-5d %-36s %-7s %-5d %-3d %-8d %-9.4f %-10.1f %-10.1f %-10.1f\n", s, st->n_ops,
               range, devs, st->micro_batch, st->k, st->inflight, st->tps_ms,
               (double)st->weight_bytes / (1 << 20), (double)st->act_bytes / (1 << 20),
               (double)gpp_sim_stage(sim, s)->peak_mem_bytes / (1 << 20));
    }
    printf("(memory in MiB per device; bound %.1f MiB)\n\n",
           (double)gpp_cluster_mem_bound(cl) / (1 << 20));
    printf("schedule          %s", gpp_sched_kind_name(p->schedule));
    if (p->schedule != GPP_SCHED_1F1B) {
        printf(" (W delay per stage:");
        for (int s = 0; s < p->n_stages; s++)
            printf(" %d", p->stages[s].w_delay);
        printf(")");
    }
    if (auto_1f1b)
        printf(" (auto: the cuda agents have no split backward)");
    printf("\n");
    printf("stages            %d\n", p->n_stages);
    printf("depth             %d\n", p->depth);
    /* stage edges; a chain plan's dependency edges (no tensor flows) as "~>" */
    printf("stage graph       %s", p->chain ? "chain" : "dag");
    for (int s = 0; s < p->n_stages; s++)
        for (int k = 0; k < p->stages[s].n_succ; k++)
            printf(" %d%s%d", s, p->stages[s].succ_dep && p->stages[s].succ_dep[k] ? "~>" : "->",
                   p->stages[s].succ[k]);
    printf("%s\n", p->chain ? "  (~> dependency only)" : "");
    if (p->micro_batch)
        printf("micro-batch       %d\n", p->micro_batch);
    else
        printf("micro-batch       per stage\n");
    printf("bottleneck TPS    %.4f ms/sample\n", p->bottleneck_tps_ms);
    printf("estimated         %.3f ms/iteration (partitioner)\n", estimate_ms);
    printf("simulated         %.3f ms/iteration, %.1f samples/s\n", p->iteration_ms, p->throughput);
    double worst = 0;
    int worst_s = 0;
    for (int s = 0; s < p->n_stages; s++)
        if (gpp_sim_stage(sim, s)->bubble_ms > worst)
            worst = gpp_sim_stage(sim, s)->bubble_ms, worst_s = s;
    printf("largest bubble    %.3f ms (stage %d)\n", worst, worst_s);
    printf("search time       %.1f ms (total with schedule and simulation %.1f ms)\n", p->search_ms,
           total_ms);
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        int first = gpp_cluster_node(cl, st->first_device);
        int last = gpp_cluster_node(cl, st->first_device + st->devices - 1);
        if (first != last && st->devices <= cl->gpus_per_node)
            printf("warning: stage %d's devices %d-%d span nodes %d-%d, so its all-reduce "
                   "crosses the inter-node link (%.3f ms simulated)\n",
                   s, st->first_device, st->first_device + st->devices - 1, first, last,
                   gpp_sim_stage(sim, s)->allreduce_ms);
    }
}

int main(int argc, char **argv)
{
    int start = gpp_main_start("gpp-plan", argc, argv);
    if (start >= 0)
        return start;
    s_args_t a;
    s_parse_args(argc, argv, &a);
    if (a.list_models) {
        gpp_zoo_list(stdout);
        printf("\ndevice presets:\n");
        gpp_device_list(stdout);
        return 0;
    }
    if (!a.model && !a.graph && !a.profile && !a.cluster) /* a cluster file may name one */
        s_die(EXIT_BAD_INPUT, "give the model: --model SPEC, --graph FILE or --profile FILE");
    double t0 = gpp_now_ms();
    gpp_cluster_t cl;
    s_cluster(&a, &cl);
    if (!a.batch)
        s_die(EXIT_BAD_INPUT, "give the mini-batch: --batch B");
    if (a.planner && strcmp(a.planner, "gpp") != 0 && strcmp(a.planner, "spp") != 0)
        s_die(EXIT_BAD_INPUT, "--planner: expected gpp or spp, got '%s'", a.planner);
    if (a.micro_batch && a.batch % a.micro_batch != 0)
        s_die(EXIT_BAD_INPUT, "--micro-batch %d does not divide --batch %d", a.micro_batch,
              a.batch);
    if (a.micro_batch && a.per_stage_mbs)
        s_die(EXIT_BAD_INPUT, "--micro-batch fixes one size for all stages; drop it or "
                              "--per-stage-mbs");
    gpp_profile_t *prof = NULL;
    gpp_graph_t *g = s_graph(&a, &prof);
    gpp_err_t err = {{0}};
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    if (prof && gpp_cost_attach_profile(cost, prof, &err) < 0)
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    char note[512];
    if (gpp_cost_profile_source(cost, note, sizeof note))
        printf("note: %s\n", note);
    if (gpp_cost_profile_note(cost, a.micro_batch ? a.micro_batch : a.batch, note, sizeof note))
        printf("note: %s\n", note);

    gpp_part_opts_t o;
    gpp_part_opts_default(&o, a.batch);
    o.micro_batch = a.micro_batch;
    o.per_stage_mbs = a.per_stage_mbs;
    o.kfkb = a.kfkb;
    o.spp = a.planner && !strcmp(a.planner, "spp");
    o.schedules = GPP_SCHED_AUTO;
    if (a.schedule && gpp_sched_kind_parse(a.schedule, "--schedule", &o.schedules, &err) < 0)
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    /* cuda agents have no split backward: auto is 1f1b for them */
    int auto_1f1b = a.cuda_agents && o.schedules == GPP_SCHED_AUTO;
    if (auto_1f1b)
        o.schedules = 1u << GPP_SCHED_1F1B;
    if (a.cuda_agents && !(o.schedules & 1u << GPP_SCHED_1F1B))
        s_die(EXIT_BAD_INPUT,
              "schedule %s: the cuda backend (the --cluster file's job.backend) has no split "
              "backward (B and W passes); use schedule 1f1b or auto, or backend = \"cpu\"",
              a.schedule);
    int64_t min_mem = 0;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, &min_mem, &err);
    if (!p) {
        if (min_mem > 0) /* rounded up to what --mem-gib can say */
            s_die(EXIT_BAD_INPUT,
                  "no %s plan of %s on %d devices (batch %d) fits in %.2f GiB "
                  "per device; the smallest memory that fits is %.2f GiB (--mem-gib %.2f), or "
                  "use more devices or a smaller batch",
                  o.spp ? "spp" : "gpp", g->name, cl.n_devices, a.batch,
                  (double)gpp_cluster_mem_bound(&cl) / (1 << 30),
                  ceil((double)min_mem / (1 << 30) * 100) / 100,
                  ceil((double)min_mem / (1 << 30) * 100) / 100);
        s_die(EXIT_BAD_INPUT, "no plan: %s", err.msg);
    }
    int used = 0; /* the partitioner may leave devices idle */
    for (int i = 0; i < p->n_stages; i++)
        used += p->stages[i].devices;
    int idle = p->n_devices - used;
    if (gpp_sched_build(p, g, &err) < 0)
        s_die(EXIT_INTERNAL, "internal error: the %s plan fails validation: %s", p->planner,
              err.msg);
    double estimate_ms = p->iteration_ms; /* the partitioner's, until simulated */
    gpp_sim_t *sim = gpp_sim_new(p, g, cost);
    if (gpp_sim_run(sim, &err) < 0)
        s_die(EXIT_INTERNAL, "internal error: simulation: %s", err.msg);
    p->iteration_ms = gpp_sim_iteration_ms(sim);
    p->throughput = gpp_sim_throughput(sim);
    s_print(p, g, sim, &cl, estimate_ms, gpp_now_ms() - t0, auto_1f1b);
    if (idle > 0)
        printf("idle devices      %d of %d (one more replica on any stage would not lower the "
               "estimated iteration time)\n",
               idle, cl.n_devices);
    if (a.print_schedule)
        s_print_schedule(p);

    if ((a.json && gpp_plan_write_json(p, a.json, &err) < 0) ||
        (a.strategy && gpp_plan_write_strategy(p, a.strategy, &err) < 0) ||
        (a.dot && gpp_plan_write_dot(p, g, a.dot, &err) < 0) ||
        (a.trace && gpp_sim_write_trace(sim, a.trace, &err) < 0))
        s_die(EXIT_BAD_INPUT, "%s", err.msg);
    gpp_sim_destroy(&sim);
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_profile_destroy(&prof);
    gpp_graph_destroy(&g);
    return 0;
}
