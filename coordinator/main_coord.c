/* gpp-coordinator: parses the command line and the cluster file, then runs
 * the job's supervisor (coordinator/gpp_supervisor.h: launch, restarts,
 * resume, exit status). See docs/coordinator.md.
 *
 *   gpp-coordinator [--plan auto|gpp|spp|FILE.json] [options] CLUSTER.toml
 *
 * Exit status: 0 job finished, 1 job stopped (the reason is the last line on
 * stderr), 2 bad command line or configuration, 128+N killed by signal N. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/gpp_atomic_file.h"
#include "common/gpp_curve.h"
#include "common/gpp_parse.h"
#include "common/gpp_sigfd.h"
#include "common/gpp_version.h"
#include "config/gpp_config.h"
#include "coordinator/gpp_supervisor.h"

/* The command line: the supervisor's options and what only main uses. */
typedef struct {
    gpp_supervisor_opts_t sv;
    const char *config_path;
    const char *metrics; /* override of [metrics] file */
    int iterations;      /* override of job.iterations, 0 keep */
    const char *keygen;  /* --keygen DIR: make CURVE keys and exit */
    int keygen_agents;   /* --agents N with --keygen; 0: the cluster file's devices */
    int keygen_monitors; /* --monitors N with --keygen (default 1) */
} s_opts_t;

static void s_usage(FILE *f)
{
    fprintf(f,
            "usage: gpp-coordinator [options] CLUSTER.toml\n"
            "  --plan auto|gpp|spp|FILE.json  plan to run (auto: the cluster file's planner)\n"
            "  --control-only                 no training: agents register, run barriers, stop\n"
            "  --barriers N                   barriers of a control-only job (default 1)\n"
            "  --endpoint ENDPOINT            bind here instead of [coordinator] endpoint\n"
            "  --start-timeout-ms N           wait this long for all agents (default 60000)\n"
            "  --external                     do not launch agents even if launch = \"local\"\n"
            "  --agent PATH                   gpp-agent binary for local launch\n"
            "  --metrics FILE                 JSON-lines metrics file (overrides [metrics] file)\n"
            "  --iterations N                 override job.iterations\n"
            "  --reprofile                    --plan auto: profile on the agents again instead\n"
            "                                 of reusing <checkpoint_dir>/profile.json\n"
            "  --resume[=auto]                continue the job from the newest complete\n"
            "                                 checkpoint set in job.checkpoint_dir; =auto:\n"
            "                                 start fresh when it holds none (a service that\n"
            "                                 systemd restarts: gpp-coordinator.service)\n"
            "  --resume-from N                continue from checkpoint set N (it must verify);\n"
            "                                 newer sets are moved aside, never removed\n"
            "  --replan                       with --resume: run the plan made now even if it\n"
            "                                 differs from the set's (other devices, planner),\n"
            "                                 re-sharding the set's stage files to its stages\n"
            "  --max-restarts N               when agents die, restart the job from the\n"
            "                                 newest complete set, at most N times per agent\n"
            "                                 slot (default 0); external agents are waited for\n"
            "                                 until they register again (their supervisor\n"
            "                                 starts them: systemd Restart=, Slurm requeue)\n"
            "  --rejoin-timeout-ms N          external launch: after a stop, every slot's agent\n"
            "                                 must register again within this (default: the\n"
            "                                 --start-timeout-ms)\n"
            "  --elastic                      a slot that dies after its --max-restarts (or,\n"
            "                                 external, is not back within the rejoin timeout)\n"
            "                                 is dropped and the job re-planned on the\n"
            "                                 remaining devices from the newest set\n"
            "  --trace FILE                   write a Chrome/Perfetto trace of one measured\n"
            "                                 iteration (every agent on one time axis) beside\n"
            "                                 the simulated one (docs/operations.md, Traces)\n"
            "  --trace-iteration N            the iteration to trace, 0-based (default: the last)\n"
            "  --keygen DIR [--agents N] [--monitors M]\n"
            "                                 make CURVE keys for the control plane in DIR\n"
            "                                 (the coordinator's pair, N agent pairs, N from\n"
            "                                 --agents or the cluster file, and M monitor pairs\n"
            "                                 for gpp-top, default 1) and exit; set\n"
            "                                 [coordinator] key_dir = DIR (docs/operations.md)\n"
            "  --run-dir DIR                  write what gpp-top --run-dir DIR needs (the\n"
            "                                 control endpoint, a monitor key of this run) to\n"
            "                                 DIR, 0700 (a local launch: a directory under\n"
            "                                 $XDG_RUNTIME_DIR or /tmp unless given)\n"
            "  --insecure                     allow external agents without [coordinator]\n"
            "                                 key_dir: a plaintext control plane anyone who\n"
            "                                 reaches the port may join (trusted networks only;\n"
            "                                 also [coordinator] insecure_plaintext = true)\n"
            "  --version                      print the version and git commit\n"
            "  --help\n");
}

static int s_parse(int argc, char **argv, s_opts_t *o)
{
    static const struct option longs[] = {{"plan", required_argument, 0, 'p'},
                                          {"control-only", no_argument, 0, 'c'},
                                          {"barriers", required_argument, 0, 'b'},
                                          {"endpoint", required_argument, 0, 'e'},
                                          {"start-timeout-ms", required_argument, 0, 't'},
                                          {"external", no_argument, 0, 'x'},
                                          {"agent", required_argument, 0, 'a'},
                                          {"metrics", required_argument, 0, 'm'},
                                          {"iterations", required_argument, 0, 'i'},
                                          {"reprofile", no_argument, 0, 'r'},
                                          {"resume", optional_argument, 0, 'R'},
                                          {"resume-from", required_argument, 0, 'F'},
                                          {"replan", no_argument, 0, 'P'},
                                          {"elastic", no_argument, 0, 'E'},
                                          {"max-restarts", required_argument, 0, 'M'},
                                          {"rejoin-timeout-ms", required_argument, 0, 'J'},
                                          {"keygen", required_argument, 0, 'K'},
                                          {"agents", required_argument, 0, 'N'},
                                          {"monitors", required_argument, 0, 'O'},
                                          {"run-dir", required_argument, 0, 'D'},
                                          {"insecure", no_argument, 0, 'S'},
                                          {"trace", required_argument, 0, 'T'},
                                          {"trace-iteration", required_argument, 0, 'I'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->sv.plan = "auto";
    o->sv.barriers = 1;
    o->sv.start_timeout_ms = 60000;
    o->sv.trace_iteration = -1;
    o->keygen_monitors = -1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        long v = 0;
        if (c == 'b' || c == 't' || c == 'i' || c == 'M' || c == 'N' || c == 'I' || c == 'J' ||
            c == 'O' || c == 'F') {
            const char *flag = c == 'b'   ? "--barriers"
                               : c == 'F' ? "--resume-from"
                               : c == 'O' ? "--monitors"
                               : c == 't' ? "--start-timeout-ms"
                               : c == 'J' ? "--rejoin-timeout-ms"
                               : c == 'M' ? "--max-restarts"
                               : c == 'N' ? "--agents"
                               : c == 'I' ? "--trace-iteration"
                                          : "--iterations";
            int64_t x;
            if (gpp_parse_flag_int64("gpp-coordinator", flag, optarg, 0, INT_MAX, &x) < 0)
                return -1;
            v = (long)x;
        }
        switch (c) {
        case 'p':
            o->sv.plan = optarg;
            break;
        case 'c':
            o->sv.control_only = 1;
            break;
        case 'b':
            o->sv.barriers = (int)v;
            break;
        case 'e':
            o->sv.endpoint = optarg;
            break;
        case 't':
            o->sv.start_timeout_ms = (int)v;
            break;
        case 'x':
            o->sv.external = 1;
            break;
        case 'a':
            o->sv.agent_path = optarg;
            break;
        case 'm':
            o->metrics = optarg;
            break;
        case 'i':
            o->iterations = (int)v;
            break;
        case 'r':
            o->sv.reprofile = 1;
            break;
        case 'R':
            if (optarg && strcmp(optarg, "auto") != 0) {
                fprintf(stderr,
                        "gpp-coordinator: --resume=%s: expected --resume or --resume=auto\n",
                        optarg);
                return -1;
            }
            if (optarg && o->sv.resume_from) {
                fprintf(stderr, "gpp-coordinator: --resume-from names the set; drop "
                                "--resume=auto\n");
                return -1;
            }
            if (!o->sv.resume_from)
                o->sv.resume = optarg ? 2 : 1;
            break;
        case 'F':
            if (v < 1) {
                fprintf(stderr,
                        "gpp-coordinator: --resume-from %ld: expected a checkpoint set's "
                        "iteration count, 1 or more (the N of set-N)\n",
                        v);
                return -1;
            }
            if (o->sv.resume == 2) {
                fprintf(stderr, "gpp-coordinator: --resume-from names the set; drop "
                                "--resume=auto\n");
                return -1;
            }
            o->sv.resume = 1;
            o->sv.resume_from = (int)v;
            break;
        case 'P':
            o->sv.replan = 1;
            break;
        case 'E':
            o->sv.elastic = 1;
            break;
        case 'M':
            o->sv.max_restarts = (int)v;
            break;
        case 'J':
            o->sv.rejoin_timeout_ms = (int)v;
            break;
        case 'K':
            o->keygen = optarg;
            break;
        case 'N':
            o->keygen_agents = (int)v;
            break;
        case 'O':
            o->keygen_monitors = (int)v;
            break;
        case 'D':
            o->sv.run_dir = optarg;
            break;
        case 'S':
            o->sv.insecure = 1;
            break;
        case 'T':
            o->sv.trace = optarg;
            break;
        case 'I':
            o->sv.trace_iteration = (int)v;
            break;
        case 'h':
            s_usage(stdout);
            exit(0);
        default:
            s_usage(stderr);
            return -1;
        }
    }
    if (o->keygen && (o->keygen_agents > 0 ? optind == argc : optind == argc - 1)) {
        o->config_path = optind < argc ? argv[optind] : NULL;
        return 0;
    }
    if (o->keygen || o->keygen_agents || o->keygen_monitors >= 0) {
        fprintf(stderr, "gpp-coordinator: --keygen DIR needs --agents N or one cluster file (one "
                        "key pair per device); --agents and --monitors go with --keygen only\n");
        return -1;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "gpp-coordinator: expected one cluster file, got %d arguments\n",
                argc - optind);
        s_usage(stderr);
        return -1;
    }
    o->config_path = argv[optind];
    if (o->sv.resume && o->sv.control_only) {
        fprintf(stderr, "gpp-coordinator: --resume continues a training job; a --control-only "
                        "job has no checkpoints (drop one of the two)\n");
        return -1;
    }
    if ((o->sv.trace || o->sv.trace_iteration >= 0) && o->sv.control_only) {
        fprintf(stderr, "gpp-coordinator: --trace needs a training job; a --control-only job "
                        "runs no actions\n");
        return -1;
    }
    if (o->sv.trace_iteration >= 0 && !o->sv.trace) {
        fprintf(stderr, "gpp-coordinator: --trace-iteration goes with --trace FILE\n");
        return -1;
    }
    if (o->sv.elastic && o->sv.control_only) {
        fprintf(stderr, "gpp-coordinator: --elastic re-plans a training job; a --control-only "
                        "job has no plan (drop one of the two)\n");
        return -1;
    }
    if (o->sv.replan && !o->sv.resume) {
        fprintf(stderr, "gpp-coordinator: --replan re-shards the checkpoint set a job resumes "
                        "from; it goes with --resume\n");
        return -1;
    }
    if (o->sv.start_timeout_ms <= 0) {
        fprintf(stderr, "gpp-coordinator: --start-timeout-ms must be positive\n");
        return -1;
    }
    if (o->sv.rejoin_timeout_ms == 0)
        o->sv.rejoin_timeout_ms = o->sv.start_timeout_ms;
    return 0;
}

/* --keygen DIR: exit status 0 made, 2 refused (bad count, existing keys). */
static int s_keygen(const s_opts_t *o)
{
    int n = o->keygen_agents;
    gpp_err_t err = {{0}};
    if (n == 0) {
        gpp_config_t cfg;
        if (gpp_config_load(&cfg, o->config_path, &err) < 0) {
            gpp_error("%s", err.msg);
            return 2;
        }
        n = gpp_config_devices(&cfg);
        gpp_config_release(&cfg);
    }
    int monitors = o->keygen_monitors < 0 ? 1 : o->keygen_monitors;
    if (gpp_curve_keygen(o->keygen, n, monitors, &err) < 0) {
        gpp_error("%s", err.msg);
        return 2;
    }
    printf("keys: %s/coordinator.key (public: give it to every agent, --coordinator-key), "
           "%s/coordinator.key_secret (0600, stays here), %d agent pairs %s/agent-<i>.key_secret "
           "(0600: copy each to its agent's host, --key), admitted through %s/agents/*.key; set "
           "[coordinator] key_dir = \"%s\"\n",
           o->keygen, o->keygen, n, o->keygen, o->keygen, o->keygen);
    if (monitors > 0)
        printf("monitor keys: %d pair%s %s/monitor-<i>.key_secret (0600: for gpp-top --key-dir "
               "or --key), admitted through %s/monitors/*.key; a monitor key can only watch\n",
               monitors, monitors == 1 ? "" : "s", o->keygen, o->keygen);
    return 0;
}

/* --trace FILE can be written: a temp file beside it is made and removed,
 * as the final atomic write will (so an unwritable path fails now, before
 * any agent runs, not after the job). */
static int s_trace_writable(const char *path)
{
    gpp_err_t err = {{0}};
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "gpp-coordinator: --trace %s: is a directory; name a file\n", path);
        return -1;
    }
    gpp_atomic_file_t *f = gpp_atomic_file_open(path, &err);
    if (!f) {
        fprintf(stderr, "gpp-coordinator: --trace %s: cannot write there: %s\n", path, err.msg);
        return -1;
    }
    gpp_atomic_file_destroy(&f);
    return 0;
}

int main(int argc, char **argv)
{
    int start = gpp_main_start("gpp-coordinator", argc, argv);
    if (start >= 0)
        return start;
    s_opts_t o;
    if (s_parse(argc, argv, &o) < 0)
        return 2;
    if (o.keygen)
        return s_keygen(&o);
    if (o.sv.trace && s_trace_writable(o.sv.trace) < 0)
        return 2;
    gpp_err_t err = {{0}};
    o.sv.sigfd = gpp_sigfd_open(&err);
    if (o.sv.sigfd < 0) {
        gpp_error("%s", err.msg);
        return 1;
    }
    gpp_config_t cfg;
    if (gpp_config_load(&cfg, o.config_path, &err) < 0) {
        gpp_error("%s", err.msg);
        return 2;
    }
    if (o.iterations > 0)
        cfg.job.iterations = o.iterations;
    /* --metrics replaces [metrics] file everywhere (the digest line too) */
    if (o.metrics)
        snprintf(cfg.metrics.file, sizeof cfg.metrics.file, "%s", o.metrics);
#ifndef GPP_HAVE_CUDA
    if (cfg.job.backend == GPP_DEVICE_CUDA && !o.sv.control_only) {
        fprintf(stderr,
                "gpp-coordinator: %s: job.backend = \"cuda\": this gpp was built without CUDA "
                "(its agents cannot open a GPU); rebuild with -DGPP_CUDA=ON on a machine with "
                "nvcc, or set backend = \"cpu\"\n",
                o.config_path);
        gpp_config_release(&cfg);
        return 2;
    }
#endif
    o.sv.out = stdout;
    int rc;
    gpp_supervisor_t *sv = gpp_supervisor_new(&o.sv, &cfg, &rc);
    if (sv)
        rc = gpp_supervisor_run(sv);
    gpp_supervisor_destroy(&sv);
    fflush(stdout);
    return rc;
}
