/* gpp-train: single-process training of any zoo model with the whole graph
 * as one stage (the numerical reference for pipeline-parallel runs), plus
 * the dataset writer and the op profiler. docs/executor.md describes it.
 *
 * Exit status: 0 success, 2 bad input (usage, unknown model, bad or
 * mismatched checkpoint or dataset) or a run-time failure. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt_set.h"
#include "agent/data/gpp_data.h"
#include "agent/data/gpp_data_pool.h"
#include "agent/exec/gpp_safetensors.h"
#include "agent/exec/gpp_exec.h"
#include "agent/exec/gpp_profile.h"
#include "common/gpp_optim_defaults.h"
#include "common/gpp_time.h"
#include "common/gpp_parse.h"
#include "common/gpp_version.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_graph.h"
#include "model/gpp_model.h"
#include "model/gpp_onnx.h"
#include "planner/gpp_profile_io.h"

typedef struct {
    const char *model;
    long long iterations, batch, micro_batch, samples, profile_max_mb, eval_batches;
    int threads;
    int data_threads;  /* 0: gpp_data_pool_default_threads() */
    int data_prefetch; /* -1: by backend (on for cuda), 0 off, 1 on */
    int load_ahead;    /* gpp_exec_cfg_t.load_ahead: 0 by backend, 1 on, -1 off */
    gpp_device_kind_t backend;
    int device;
    gpp_precision_t precision;
    unsigned long long seed;
    gpp_optim_hp_t hp;
    int lr_set, no_shuffle, no_fuse, graphs, bf16_tensors;
    const char *save, *save_weights, *load, *data, *write_dataset, *profile_out;
    const char *loss; /* --loss: an ONNX model's loss */
    int emb_update;   /* --embedding-update: gpp_table_update_t, -1 the model's */
} opts_t;

static void s_usage(FILE *out)
{
    fprintf(
        out,
        "usage: gpp-train --model SPEC [options]   (gpp-train --version: version, git commit)\n"
        "  --model SPEC          zoo model, e.g. mmt:branches=2,layers=2,hidden=64,heads=4,seq=16\n"
        "                        (--list-models shows the zoo), a graph FILE.json, or an ONNX\n"
        "                        model FILE.onnx (docs/graph-format.md, \"ONNX\")\n"
        "  --loss mse|ce|bce     the loss at an ONNX model's outputs (default mse; bce: binary\n"
        "                        cross-entropy on logits, labels 0/1)\n"
        "  --iterations N        optimizer steps (default 10)\n"
        "  --eval-batches K      after training, the loss of the K mini-batches after the\n"
        "                        trained ones in evaluation mode (dropout off; no step;\n"
        "                        torch's model.eval() under no_grad). Default 0\n"
        "  --batch B             mini-batch samples (default 32)\n"
        "  --micro-batch b       samples per micro-batch (default B); gradients accumulate\n"
        "  --optimizer sgd|adamw (default adamw)\n"
        "  --lr X                learning rate (default 1e-3 adamw, 0.05 sgd)\n"
        "  --momentum X          SGD momentum (default 0.9)\n"
        "  --weight-decay X      (default 0.01 adamw, as torch.optim.AdamW; 0 sgd)\n"
        "  --embedding-update lazy|dense  embedding tables' step: lazy, only the rows a\n"
        "                        mini-batch touched (torch.optim.SparseAdam), or dense,\n"
        "                        every row (torch.optim.AdamW); default: the model's\n"
        "                        own (an op's \"update\"; docs/config.md \"Optimizer\")\n"
        "  --seed S              weights and synthetic data (default 1)\n"
        "  --threads T           CPU threads for the kernels (default: OpenBLAS's)\n"
        "  --backend cpu|cuda    where the kernels run (default cpu); cuda without a usable\n"
        "                        GPU is an error, never a CPU run\n"
        "  --device N            CUDA device ordinal (default 0)\n"
        "  --precision fp32|tf32|bf16  CUDA matrix products (default fp32; tf32, bf16: operands\n"
        "                        rounded for the tensor cores, fp32 accumulation, fp32 weights\n"
        "                        and optimizer state)\n"
        "  --no-fuse             run each linear and the ReLU/GELU it feeds as two ops (default:\n"
        "                        one call, the activation in the product's epilogue on cuda;\n"
        "                        same results, for comparison)\n"
        "  --cuda-graphs         with --backend cuda: after one eager iteration, record each\n"
        "                        micro-batch's forward and backward as a CUDA\n"
        "                        graph and replay them (one launch per pass; not for models\n"
        "                        with embedding tables; docs/gpu.md \"CUDA graphs\"; not yet\n"
        "                        run on a GPU)\n"
        "  --bf16-tensors        with --precision bf16: keep activations and their gradients\n"
        "                        in bf16 between ops (docs/gpu.md \"bf16 tensors\"; not yet\n"
        "                        run on a GPU; default: fp32 tensors)\n"
        "  --data PATH           read inputs and labels from a gpp dataset file, or from\n"
        "                        NumPy arrays: a directory of <op name>.npy per input and\n"
        "                        loss op, or a list op=FILE.npy,op=FILE.npy (docs/executor.md)\n"
        "  --data-threads T      host threads generating synthetic data or reading ahead\n"
        "                        (default: online CPUs, at most 8); any T gives the same values\n"
        "  --data-prefetch on|off  generate or read the next micro-batch's data while the\n"
        "                        current one trains, into page-locked memory (default: on\n"
        "                        with cuda, off with cpu, where it would take cores from the\n"
        "                        kernels)\n"
        "  --load-ahead on|off   copy the next micro-batch's inputs and labels to the device\n"
        "                        while the current one trains (default: on with cuda, off\n"
        "                        with cpu, where there is no device to copy to)\n"
        "  --no-shuffle          read .npy records in file order (default: a permutation\n"
        "                        per epoch drawn from --seed)\n"
        "  --save FILE           write weights + optimizer state at the end (atomic)\n"
        "  --save-weights FILE.safetensors   write the trained weights for PyTorch at the end\n"
        "                        (safetensors, atomic; docs/executor.md)\n"
        "  --load FILE           start from a checkpoint of the same model and optimizer\n"
        "  --write-dataset FILE --samples N   write N synthetic samples and exit\n"
        "  --profile-out FILE [--profile-max-mb M]  time every op (device time, any backend\n"
        "                        and precision) at micro-batch 1,2,4..M\n"
        "                        (default: --batch, the planner's largest micro-batch), as\n"
        "                        far as a few seconds allow; write the planner's\n"
        "                        profile.json and exit\n");
}

static int s_num(const char *flag, const char *v, long long min, long long *out)
{
    int64_t x;
    if (gpp_parse_flag_int64("gpp-train: error", flag, v, min, INT64_MAX, &x) < 0)
        return -1;
    *out = x;
    return 0;
}

static int s_real(const char *flag, const char *v, float *out)
{
    double x;
    if (gpp_parse_flag_double("gpp-train: error", flag, v, 0, 0, 3.4e38, &x) < 0)
        return -1;
    *out = (float)x;
    return 0;
}

static int s_parse(int argc, char **argv, opts_t *o)
{
    enum {
        O_MODEL = 256,
        O_ITER,
        O_BATCH,
        O_MB,
        O_OPT,
        O_LR,
        O_MOM,
        O_WD,
        O_SEED,
        O_THREADS,
        O_DATA,
        O_SAVE,
        O_LOAD,
        O_WDS,
        O_SAMPLES,
        O_PROF,
        O_PROFMB,
        O_LIST,
        O_BACKEND,
        O_DEVICE,
        O_PRECISION,
        O_NOSHUF,
        O_SAVEW,
        O_DTHREADS,
        O_DPREFETCH,
        O_LAHEAD,
        O_LOSS,
        O_NOFUSE,
        O_GRAPHS,
        O_BF16T,
        O_EMBUPD,
        O_EVAL,
        O_HELP
    };
    static const struct option lo[] = {{"model", 1, 0, O_MODEL},
                                       {"iterations", 1, 0, O_ITER},
                                       {"batch", 1, 0, O_BATCH},
                                       {"micro-batch", 1, 0, O_MB},
                                       {"optimizer", 1, 0, O_OPT},
                                       {"lr", 1, 0, O_LR},
                                       {"momentum", 1, 0, O_MOM},
                                       {"weight-decay", 1, 0, O_WD},
                                       {"seed", 1, 0, O_SEED},
                                       {"threads", 1, 0, O_THREADS},
                                       {"data", 1, 0, O_DATA},
                                       {"save", 1, 0, O_SAVE},
                                       {"load", 1, 0, O_LOAD},
                                       {"write-dataset", 1, 0, O_WDS},
                                       {"samples", 1, 0, O_SAMPLES},
                                       {"profile-out", 1, 0, O_PROF},
                                       {"profile-max-mb", 1, 0, O_PROFMB},
                                       {"list-models", 0, 0, O_LIST},
                                       {"backend", 1, 0, O_BACKEND},
                                       {"device", 1, 0, O_DEVICE},
                                       {"precision", 1, 0, O_PRECISION},
                                       {"no-shuffle", 0, 0, O_NOSHUF},
                                       {"save-weights", 1, 0, O_SAVEW},
                                       {"data-threads", 1, 0, O_DTHREADS},
                                       {"data-prefetch", 1, 0, O_DPREFETCH},
                                       {"load-ahead", 1, 0, O_LAHEAD},
                                       {"loss", 1, 0, O_LOSS},
                                       {"no-fuse", 0, 0, O_NOFUSE},
                                       {"cuda-graphs", 0, 0, O_GRAPHS},
                                       {"bf16-tensors", 0, 0, O_BF16T},
                                       {"embedding-update", 1, 0, O_EMBUPD},
                                       {"eval-batches", 1, 0, O_EVAL},
                                       {"help", 0, 0, O_HELP},
                                       {0, 0, 0, 0}};
    o->iterations = 10;
    o->emb_update = -1;
    o->batch = 32;
    o->data_prefetch = -1;
    o->seed = 1;
    o->profile_max_mb = 0; /* --batch */
    /* the cluster file's defaults too (common/gpp_optim_defaults.h); lr and
       weight decay per optimizer once it is known (s_parse's end) */
    o->hp = (gpp_optim_hp_t){.kind = GPP_OPTIM_DEFAULT_ADAMW ? GPP_OPTIM_ADAMW : GPP_OPTIM_SGD,
                             .lr = -1.0f,
                             .weight_decay = -1.0f,
                             .momentum = (float)GPP_OPTIM_DEFAULT_MOMENTUM,
                             .beta1 = (float)GPP_OPTIM_DEFAULT_BETA1,
                             .beta2 = (float)GPP_OPTIM_DEFAULT_BETA2,
                             .eps = (float)GPP_OPTIM_DEFAULT_EPS};
    long long v;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case O_MODEL:
            o->model = optarg;
            break;
        case O_ITER:
            if (s_num("--iterations", optarg, 0, &o->iterations))
                return -1;
            break;
        case O_EVAL:
            if (s_num("--eval-batches", optarg, 0, &o->eval_batches))
                return -1;
            break;
        case O_BATCH:
            if (s_num("--batch", optarg, 1, &o->batch))
                return -1;
            break;
        case O_MB:
            if (s_num("--micro-batch", optarg, 1, &o->micro_batch))
                return -1;
            break;
        case O_OPT:
            if (gpp_optim_kind_parse(optarg, &o->hp.kind) < 0) {
                fprintf(stderr,
                        "gpp-train: error: --optimizer '%s': use " GPP_OPTIM_KIND_CHOICES "\n",
                        optarg);
                return -1;
            }
            break;
        case O_LR:
            if (s_real("--lr", optarg, &o->hp.lr))
                return -1;
            o->lr_set = 1;
            break;
        case O_MOM:
            if (s_real("--momentum", optarg, &o->hp.momentum))
                return -1;
            break;
        case O_WD:
            if (s_real("--weight-decay", optarg, &o->hp.weight_decay))
                return -1;
            break;
        case O_SEED:
            if (s_num("--seed", optarg, 0, &v))
                return -1;
            o->seed = (unsigned long long)v;
            break;
        case O_THREADS:
            if (s_num("--threads", optarg, 1, &v))
                return -1;
            o->threads = (int)v;
            break;
        case O_DATA:
            o->data = optarg;
            break;
        case O_DTHREADS:
            if (s_num("--data-threads", optarg, 1, &v))
                return -1;
            if (v > GPP_DATA_MAX_THREADS) {
                fprintf(stderr, "gpp-train: error: --data-threads %lld: at most %d\n", v,
                        GPP_DATA_MAX_THREADS);
                return -1;
            }
            o->data_threads = (int)v;
            break;
        case O_DPREFETCH:
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
                fprintf(stderr, "gpp-train: error: --data-prefetch '%s': use on or off\n", optarg);
                return -1;
            }
            o->data_prefetch = strcmp(optarg, "on") == 0;
            break;
        case O_LAHEAD:
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
                fprintf(stderr, "gpp-train: error: --load-ahead '%s': use on or off\n", optarg);
                return -1;
            }
            o->load_ahead = strcmp(optarg, "on") == 0 ? 1 : -1;
            break;
        case O_LOSS:
            o->loss = optarg;
            break;
        case O_EMBUPD:
            if (strcmp(optarg, "lazy") && strcmp(optarg, "dense")) {
                fprintf(stderr, "gpp-train: error: --embedding-update '%s': use lazy or dense\n",
                        optarg);
                return -1;
            }
            o->emb_update = strcmp(optarg, "dense") == 0 ? GPP_TABLE_DENSE : GPP_TABLE_LAZY;
            break;
        case O_SAVEW:
            o->save_weights = optarg;
            break;
        case O_NOSHUF:
            o->no_shuffle = 1;
            break;
        case O_NOFUSE:
            o->no_fuse = 1;
            break;
        case O_GRAPHS:
            o->graphs = 1;
            break;
        case O_BF16T:
            o->bf16_tensors = 1;
            break;
        case O_SAVE:
            o->save = optarg;
            break;
        case O_LOAD:
            o->load = optarg;
            break;
        case O_WDS:
            o->write_dataset = optarg;
            break;
        case O_SAMPLES:
            if (s_num("--samples", optarg, 1, &o->samples))
                return -1;
            break;
        case O_PROF:
            o->profile_out = optarg;
            break;
        case O_PROFMB:
            if (s_num("--profile-max-mb", optarg, 1, &o->profile_max_mb))
                return -1;
            break;
        case O_BACKEND:
            if (gpp_device_kind_parse(optarg, &o->backend) < 0) {
                fprintf(stderr,
                        "gpp-train: error: --backend '%s': use " GPP_DEVICE_KIND_CHOICES "\n",
                        optarg);
                return -1;
            }
            break;
        case O_DEVICE:
            if (s_num("--device", optarg, 0, &v))
                return -1;
            o->device = (int)v;
            break;
        case O_PRECISION:
            if (gpp_precision_parse(optarg, &o->precision) < 0) {
                fprintf(stderr,
                        "gpp-train: error: --precision '%s': use " GPP_PRECISION_CHOICES "\n",
                        optarg);
                return -1;
            }
            break;
        case O_LIST:
            gpp_zoo_list(stdout);
            exit(0);
        case O_HELP:
            s_usage(stdout);
            exit(0);
        default:
            fprintf(stderr, "gpp-train: error: unknown or incomplete option '%s'\n",
                    argv[optind - 1]);
            s_usage(stderr);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpp-train: error: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (!o->model) {
        fprintf(stderr, "gpp-train: error: --model SPEC is required\n");
        s_usage(stderr);
        return -1;
    }
    if (o->write_dataset && !o->samples) {
        fprintf(stderr, "gpp-train: error: --write-dataset needs --samples N\n");
        return -1;
    }
    if (!o->micro_batch)
        o->micro_batch = o->batch;
    if (o->micro_batch > o->batch) {
        fprintf(stderr, "gpp-train: error: --micro-batch %lld is larger than --batch %lld\n",
                o->micro_batch, o->batch);
        return -1;
    }
    if (o->backend != GPP_DEVICE_CUDA && o->precision != GPP_PRECISION_FP32) {
        fprintf(stderr,
                "gpp-train: error: --precision %s needs --backend cuda (the CPU backend "
                "computes fp32)\n",
                gpp_precision_name(o->precision));
        return -1;
    }
    if (o->bf16_tensors && o->precision != GPP_PRECISION_BF16) {
        fprintf(stderr, "gpp-train: error: --bf16-tensors needs --backend cuda --precision bf16\n");
        return -1;
    }
    if (o->hp.lr < 0)
        o->hp.lr = (float)gpp_optim_default_lr(o->hp.kind == GPP_OPTIM_ADAMW);
    if (o->hp.weight_decay < 0)
        o->hp.weight_decay = (float)gpp_optim_default_weight_decay(o->hp.kind == GPP_OPTIM_ADAMW);
    return 0;
}

/* "weights sha256 <hex>": the digest of every parameter in op order
 * (gpp_ckpt.h), the one a distributed run of the same model prints. */
static int s_print_digest(gpp_exec_t *ex, const gpp_graph_t *g, gpp_err_t *err)
{
    unsigned char(*d)[GPP_SHA256_BYTES] = gpp_xcalloc((size_t)g->n_ops, sizeof *d), out[32];
    int *has = gpp_xcalloc((size_t)g->n_ops, sizeof *has);
    int rc = gpp_exec_ckpt_op_digests(ex, d, has, err);
    if (rc == 0) {
        char hex[GPP_SHA256_HEX];
        gpp_ckpt_weights_digest(g->n_ops, (const unsigned char(*)[GPP_SHA256_BYTES])d, has, out);
        gpp_sha256_hex(out, hex);
        printf("weights sha256 %s\n", hex);
    }
    free(d);
    free(has);
    return rc;
}

static double s_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* One iteration: micro-batches of the mini-batch [t B, (t+1) B), micro-batch
 * m in slot m, one in flight (with --cuda-graphs each slot's passes are
 * recorded once at the size it has every iteration, and replayed). */
static int s_iteration(gpp_exec_t *ex, const opts_t *o, int64_t t, double *loss, gpp_err_t *err)
{
    int64_t lo = t * o->batch;
    for (int64_t done = 0, m = 0; done < o->batch; m++) {
        int64_t n = o->batch - done < o->micro_batch ? o->batch - done : o->micro_batch;
        if (gpp_exec_run(ex, (int)m, lo + done, n, err) < 0)
            return -1;
        gpp_exec_release(ex, (int)m); /* its lane for the next one */
        done += n;
    }
    if (gpp_exec_loss(ex, loss, err) < 0)
        return -1;
    return gpp_exec_step(ex, err);
}

int main(int argc, char **argv)
{
    int start = gpp_main_start("gpp-train", argc, argv);
    if (start >= 0)
        return start;
    gpp_cpu_blas_reexec(argv); /* before OpenBLAS's choice matters */
    opts_t o = {0};
    if (s_parse(argc, argv, &o) < 0)
        return 2;
    gpp_err_t err = {0};
    int rc = 2;
    gpp_graph_t *g = NULL;
    gpp_backend_t *be = NULL;
    gpp_data_t *data = NULL;
    gpp_exec_t *ex = NULL;
    int *ops = NULL;
    /* a zoo spec, a graph JSON file (gpp-graph/1) or an ONNX model */
    char spec[4200];
    if (gpp_onnx_spec_loss(o.model, o.loss, spec, sizeof spec, &err) < 0 ||
        !(g = gpp_model_load(spec, &err)))
        goto fail;
    if (o.emb_update >= 0) { /* every table's step, then the figures again */
        for (int i = 0; i < g->n_ops; i++)
            if (g->ops[i].type == GPP_OP_EMBEDDING || g->ops[i].type == GPP_OP_EMBEDDING_BAG)
                g->ops[i].update = o.emb_update;
        g->finalized = 0;
        if (gpp_graph_finalize(g, &err) < 0)
            goto fail;
    }
    gpp_backend_cfg_t bc = {
        .kind = o.backend, .device = o.device, .cpu_threads = o.threads, .precision = o.precision,
        .bf16_tensors = o.bf16_tensors};
    if (!(be = gpp_backend_new(&bc, &err)))
        goto fail;
    if (o.backend != GPP_DEVICE_CPU)
        printf("backend %s, %s matrix products\n", gpp_backend_name(be),
               gpp_precision_name(o.precision));
    data = o.data ? gpp_data_open(g, o.data, !o.no_shuffle, o.seed, &err) : gpp_data_new(g, o.seed);
    if (!data)
        goto fail;
    int data_threads = o.data_threads ? o.data_threads : gpp_data_pool_default_threads();
    gpp_data_set_threads(data, data_threads, 0); /* in range: s_parse checked it */
    if (o.data)
        printf("data: %s, %lld samples\n", o.data, (long long)gpp_data_samples(data));
    if (o.write_dataset) {
        if (gpp_data_write_file(data, o.write_dataset, o.samples, &err) < 0)
            goto fail;
        printf("wrote %lld samples of %s to %s\n", o.samples, g->spec, o.write_dataset);
        rc = 0;
        goto fail;
    }
    ops = calloc((size_t)g->n_ops, sizeof(int));
    for (int i = 0; i < g->n_ops; i++)
        ops[i] = i;
    if (o.profile_out) {
        long long want = o.profile_max_mb ? o.profile_max_mb : o.batch;
        int max_mb = want < 1 << 24 ? (int)want : 1 << 24, largest = 0; /* profile.json's limit */
        gpp_profile_cfg_t pc = {.max_micro_batch = max_mb, .seed = o.seed};
        gpp_profile_t *prof = gpp_profile_measure(g, g->n_ops, ops, be, data, &pc, &err);
        if (!prof) {
            gpp_err_prefix(&err, "profile %s", o.profile_out);
            goto fail;
        }
        for (size_t i = 0; i < prof->n_rows; i++) /* every op has the same sizes */
            largest = prof->rows[i].micro_batch > largest ? prof->rows[i].micro_batch : largest;
        int wrc = gpp_profile_io_write(prof, o.profile_out, &err);
        gpp_profile_destroy(&prof);
        if (wrc < 0)
            goto fail;
        printf("wrote profile of %s (%d ops, micro-batch 1..%d) on %s (%s, %s) to %s\n", g->spec,
               g->n_ops, largest, gpp_backend_device_name(be), gpp_backend_name(be),
               gpp_precision_name(gpp_backend_precision(be)), o.profile_out);
        if (largest < max_mb)
            printf("note: sizes above %d (up to %d) not timed (profiling budget %.0f s); the "
                   "planner extrapolates them with its device preset's curve\n",
                   largest, max_mb, GPP_PROFILE_BUDGET_MS_DEFAULT / 1e3);
        rc = 0;
        goto fail;
    }
    /* the prefetch only now: profiling and writing a dataset never ask twice */
    int prefetch = o.data_prefetch >= 0 ? o.data_prefetch : o.backend != GPP_DEVICE_CPU;
    gpp_data_set_threads(data, data_threads, prefetch);
    gpp_data_set_backend(data, be); /* prefetched micro-batches in page-locked memory */
    if (!o.data)
        printf("synthetic data: %d threads, prefetch %s\n", data_threads, prefetch ? "on" : "off");
    else
        printf("data read-ahead: %s (%d threads)\n", prefetch ? "on" : "off", data_threads);
    gpp_exec_cfg_t ec = {.seed = o.seed,
                         .optim = o.hp,
                         .batch = o.batch,
                         .no_fuse = o.no_fuse,
                         .graphs = o.graphs,
                         .load_ahead = o.load_ahead,
                         .micro = o.micro_batch,
                         .inflight = 1,
                         .slots = (int)((o.batch + o.micro_batch - 1) / o.micro_batch)};
    if (!(ex = gpp_exec_new(g, g->n_ops, ops, be, data, &ec, &err)))
        goto fail;
    if (o.load && gpp_exec_ckpt_load(ex, o.load, &err) < 0)
        goto fail;
    /* iteration t trains samples [t B, (t+1) B): the last index must fit int64 */
    int64_t steps = gpp_exec_step_count(ex);
    if (o.iterations > INT64_MAX / o.batch - steps) {
        gpp_err_set(&err,
                    "--batch %lld x (%lld steps%s%s + --iterations %lld) samples overflow the "
                    "64-bit sample index; lower --batch or --iterations",
                    o.batch, (long long)steps, o.load ? " of " : "", o.load ? o.load : "",
                    o.iterations);
        goto fail;
    }
    printf("model %s: %d ops, %lld parameters; batch %lld, micro-batch %lld, %s lr %g, %s\n",
           g->spec, g->n_ops, (long long)gpp_graph_params(g), o.batch, o.micro_batch,
           gpp_optim_kind_name(o.hp.kind), (double)o.hp.lr,
           o.load ? "resumed" : "fresh");
    double total_ms = 0;
    for (long long i = 0; i < o.iterations; i++) {
        double loss, t0 = gpp_now_ms(), c0 = s_cpu_ms();
        if (s_iteration(ex, &o, gpp_exec_step_count(ex), &loss, &err) < 0) {
            gpp_err_prefix(&err, "iteration %lld", i);
            goto fail;
        }
        double ms = gpp_now_ms() - t0;
        total_ms += ms;
        /* cpu_ms: CPU time of the process (all threads) for the iteration;
         * with one thread it is the wall time other processes did not take */
        printf("iter=%lld loss=%.6f samples/s=%.1f cpu_ms=%.2f\n", i, loss,
               (double)o.batch * 1000.0 / ms, s_cpu_ms() - c0);
        fflush(stdout);
    }
    if (o.iterations)
        printf("done: iterations=%lld steps=%lld samples/s=%.1f peak_stash_bytes=%lld\n",
               o.iterations, (long long)gpp_exec_step_count(ex),
               (double)o.batch * (double)o.iterations * 1000.0 / total_ms,
               (long long)gpp_exec_peak_stash_bytes(ex));
    if (o.eval_batches) {
        /* the samples after the trained ones: [steps B, (steps + K) B) */
        int64_t st = gpp_exec_step_count(ex);
        if (o.eval_batches > INT64_MAX / o.batch - st) {
            gpp_err_set(&err, "--eval-batches %lld: the sample index overflows; lower it",
                        o.eval_batches);
            goto fail;
        }
        double el = 0;
        if (gpp_exec_evaluate(ex, st * o.batch, o.eval_batches * o.batch, o.micro_batch, &el,
                              &err) < 0) {
            gpp_err_prefix(&err, "--eval-batches");
            goto fail;
        }
        printf("eval: batches=%lld samples=%lld loss=%.6f\n", o.eval_batches,
               o.eval_batches * o.batch, el);
    }
    int64_t la_hits = 0, la_misses = 0;
    gpp_exec_load_ahead_stats(ex, &la_hits, &la_misses);
    if (la_hits + la_misses)
        printf("load-ahead: %lld loads from the device copy, %lld read then\n", (long long)la_hits,
               (long long)la_misses);
    int act_bf16 = 0, act_all = 0;
    gpp_exec_act_dtypes(ex, &act_bf16, &act_all);
    if (act_bf16) /* at precision bf16 on cuda with --bf16-tensors */
        printf("bf16 tensors: %d of %d activations\n", act_bf16, act_all);
    if (o.graphs) {
        int64_t cap = 0, rep = 0;
        gpp_exec_graph_stats(ex, &cap, &rep);
        const char *off = gpp_exec_graphs_off(ex);
        printf("cuda graphs: captured=%lld replayed=%lld%s%s\n", (long long)cap, (long long)rep,
               off ? " off: " : "", off ? off : "");
    }
    if (o.iterations) {
        /* predicted (the stage's memory plan, one micro-batch in flight) vs
         * measured (the backend's high-water mark) */
        gpp_memplan_sum_t pm;
        gpp_backend_mem_t bm;
        gpp_memplan_summary(gpp_exec_plan(ex), &pm);
        gpp_backend_mem(be, &bm);
        /* plus the backend's own buffers (cuBLASLt workspaces), which the
           plan does not hold */
        int64_t pred = pm.total_bytes + bm.own_bytes;
        printf("memory: stage predicted_MiB measured_MiB error_%%\n");
        printf("memory: 0 %.3f %.3f %+.2f\n", (double)pred / (1 << 20),
               (double)bm.peak_bytes / (1 << 20),
               bm.peak_bytes ? 100.0 * (double)(pred - bm.peak_bytes) / (double)bm.peak_bytes
                             : 0.0);
        /* the process's peak RSS, for context: host buffers, the data source,
           OpenBLAS and the binary besides the device memory */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("memory_bytes: predicted=%lld measured=%lld state=%lld arena=%lld lane=%lld "
               "scratch=%lld workspace=%lld backend=%lld allocs=%lld rss=%lld\n",
               (long long)pred, (long long)bm.peak_bytes, (long long)pm.state_bytes,
               (long long)pm.arena_bytes, (long long)pm.lane_bytes, (long long)pm.scratch_bytes,
               (long long)pm.work_bytes,
               (long long)bm.own_bytes, (long long)bm.allocs, (long long)ru.ru_maxrss * 1024);
    }
    if (s_print_digest(ex, g, &err) < 0)
        goto fail;
    if (o.save && gpp_exec_ckpt_save(ex, o.save, &err) < 0)
        goto fail;
    if (o.save)
        printf("saved %s\n", o.save);
    if (o.save_weights && gpp_safetensors_save(ex, o.save_weights, &err) < 0)
        goto fail;
    if (o.save_weights)
        printf("saved weights %s\n", o.save_weights);
    rc = 0;
fail:
    if (rc)
        fprintf(stderr, "gpp-train: error: %s\n", err.msg);
    gpp_exec_destroy(&ex);
    gpp_data_destroy(&data);
    gpp_backend_destroy(&be);
    gpp_graph_destroy(&g);
    free(ops);
    return rc;
}
