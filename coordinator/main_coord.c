/* gpp-coordinator: plans a job from cluster.toml, launches or awaits the
 * agents, drives them through assignment, rendezvous and training, and
 * reports progress. See docs/coordinator.md.
 *
 *   gpp-coordinator [--plan auto|gpp|spp|FILE.json] [options] CLUSTER.toml
 *
 * Exit status: 0 job finished, 1 job stopped (the reason is the last line on
 * stderr), 2 bad command line or configuration, 128+N killed by signal N. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/gpp_net.h"
#include "common/gpp_atomic_file.h"
#include "common/gpp_curve.h"
#include "common/gpp_notify.h"
#include "common/gpp_parse.h"
#include "common/gpp_sigfd.h"
#include "common/gpp_time.h"
#include "common/gpp_version.h"
#include "agent/exec/gpp_ckpt_set.h"
#include "config/gpp_config.h"
#include "coordinator/gpp_coord.h"
#include "coordinator/gpp_job.h"
#include "coordinator/gpp_launch.h"
#include "coordinator/gpp_rundir.h"

/* --trace: heartbeat round trips with each agent right after it registered
 * (the clock offset keeps the one with the least delay; gpp_time.h) */
#define S_CLOCK_ROUND_TRIPS 32
/* a restart's bind of the port its last socket closed: retried this long */
#define S_REBIND_MS 5000.0

typedef struct {
    const char *config_path;
    const char *plan;     /* auto | gpp | spp | FILE.json */
    const char *endpoint; /* bind override */
    const char *agent_path;
    const char *metrics; /* override of [metrics] file */
    int control_only;
    int barriers;
    int start_timeout_ms;
    int external;   /* ignore launch = "local" */
    int iterations; /* override of job.iterations, 0 keep */
    int quiet_agents;
    int reprofile;         /* --plan auto: measure a new profile, not the kept one */
    int resume;            /* continue from the newest complete set in job.checkpoint_dir: 1
                              --resume, 2 --resume=auto (a fresh start when there is none) */
    int replan;            /* --resume with a plan other than the set's: re-shard the set */
    int max_restarts;      /* restarts per agent slot after it died (local: forked again;
                              external: waited for until it registers again) */
    int elastic;           /* a slot past max_restarts (or, external, not back within
                              rejoin_timeout_ms) is dropped, the job re-planned on the rest */
    int rejoin_timeout_ms; /* external launch, after a stop: every slot's agent registers
                              again within this; 0: start_timeout_ms */
    const char *keygen;    /* --keygen DIR: make CURVE keys and exit */
    int keygen_agents;     /* --agents N with --keygen; 0: the cluster file's devices */
    int keygen_monitors;   /* --monitors N with --keygen (default 1) */
    const char *run_dir;   /* --run-dir DIR: gpp-top's way in (gpp_rundir.h) */
    int insecure;          /* --insecure: external agents without key_dir, plaintext */
    const char *trace;     /* --trace FILE: measured + simulated Chrome trace */
    int trace_iteration;   /* --trace-iteration N; -1: the last */
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
    o->plan = "auto";
    o->barriers = 1;
    o->start_timeout_ms = 60000;
    o->trace_iteration = -1;
    o->keygen_monitors = -1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        long v = 0;
        if (c == 'b' || c == 't' || c == 'i' || c == 'M' || c == 'N' || c == 'I' || c == 'J' ||
            c == 'O') {
            const char *flag = c == 'b'   ? "--barriers"
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
            o->plan = optarg;
            break;
        case 'c':
            o->control_only = 1;
            break;
        case 'b':
            o->barriers = (int)v;
            break;
        case 'e':
            o->endpoint = optarg;
            break;
        case 't':
            o->start_timeout_ms = (int)v;
            break;
        case 'x':
            o->external = 1;
            break;
        case 'a':
            o->agent_path = optarg;
            break;
        case 'm':
            o->metrics = optarg;
            break;
        case 'i':
            o->iterations = (int)v;
            break;
        case 'r':
            o->reprofile = 1;
            break;
        case 'R':
            if (optarg && strcmp(optarg, "auto") != 0) {
                fprintf(stderr,
                        "gpp-coordinator: --resume=%s: expected --resume or --resume=auto\n",
                        optarg);
                return -1;
            }
            o->resume = optarg ? 2 : 1;
            break;
        case 'P':
            o->replan = 1;
            break;
        case 'E':
            o->elastic = 1;
            break;
        case 'M':
            o->max_restarts = (int)v;
            break;
        case 'J':
            o->rejoin_timeout_ms = (int)v;
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
            o->run_dir = optarg;
            break;
        case 'S':
            o->insecure = 1;
            break;
        case 'T':
            o->trace = optarg;
            break;
        case 'I':
            o->trace_iteration = (int)v;
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
    if (o->resume && o->control_only) {
        fprintf(stderr, "gpp-coordinator: --resume continues a training job; a --control-only "
                        "job has no checkpoints (drop one of the two)\n");
        return -1;
    }
    if ((o->trace || o->trace_iteration >= 0) && o->control_only) {
        fprintf(stderr, "gpp-coordinator: --trace needs a training job; a --control-only job "
                        "runs no actions\n");
        return -1;
    }
    if (o->trace_iteration >= 0 && !o->trace) {
        fprintf(stderr, "gpp-coordinator: --trace-iteration goes with --trace FILE\n");
        return -1;
    }
    if (o->elastic && o->control_only) {
        fprintf(stderr, "gpp-coordinator: --elastic re-plans a training job; a --control-only "
                        "job has no plan (drop one of the two)\n");
        return -1;
    }
    if (o->replan && !o->resume) {
        fprintf(stderr, "gpp-coordinator: --replan re-shards the checkpoint set a job resumes "
                        "from; it goes with --resume\n");
        return -1;
    }
    if (o->start_timeout_ms <= 0) {
        fprintf(stderr, "gpp-coordinator: --start-timeout-ms must be positive\n");
        return -1;
    }
    if (o->rejoin_timeout_ms == 0)
        o->rejoin_timeout_ms = o->start_timeout_ms;
    return 0;
}

/* The gpp-agent binary: --agent, $GPP_AGENT, next to us, at ../agent/ from
 * us (a build tree's layout, also where a build tree was moved: a bundle on
 * a GPU machine), or the build's compiled-in path. */
static int s_agent_path(const s_opts_t *o, char *out, size_t len)
{
    if (o->agent_path) {
        snprintf(out, len, "%s", o->agent_path);
        return 0;
    }
    const char *env = getenv("GPP_AGENT");
    if (env && env[0]) {
        snprintf(out, len, "%s", env);
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(out, len, "%s/gpp-agent", self);
            if (access(out, X_OK) == 0)
                return 0;
            snprintf(out, len, "%s/../agent/gpp-agent", self);
            if (access(out, X_OK) == 0)
                return 0;
        }
    }
    snprintf(out, len, "%s", GPP_AGENT_BUILD_PATH);
    return access(out, X_OK) == 0 ? 0 : -1;
}

/* Where local agents connect: the bound address, 127.0.0.1 for a wildcard
 * bind (gpp_net_bind_endpoint checked the endpoint before the bind). */
static void s_connect_endpoint(const char *bind, int port, char *out, size_t len)
{
    char b[512], addr[GPP_NET_ADDR_LEN];
    if (gpp_net_bind_endpoint(bind, b, sizeof b, addr, sizeof addr, NULL) < 0 || !addr[0])
        snprintf(addr, sizeof addr, "127.0.0.1");
    snprintf(out, len, "tcp://%s:%d", addr, port);
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

/* The control plane's admission (docs/operations.md, Security): a local
 * launch makes fresh keys for the agents it forks (keys[n], handed to each
 * child through an inherited fd); external agents are admitted by the
 * key directory; without one the job is refused unless the operator opted
 * into plaintext (insecure), said loudly at every start. With monitor, a
 * fresh monitor pair for the run directory is admitted too. */
static gpp_curve_server_t *s_curve_setup(const gpp_config_t *cfg, int local, int n,
                                         gpp_curve_client_t *keys, gpp_curve_client_t *monitor,
                                         int insecure, int *failed)
{
    gpp_err_t err = {{0}};
    gpp_curve_server_t *srv = NULL;
    *failed = 0;
    if (local) {
        srv = gpp_curve_server_new_ephemeral(n, keys, monitor, &err);
    } else if (cfg->coordinator.key_dir[0]) {
        srv = gpp_curve_server_load(cfg->coordinator.key_dir, monitor, &err);
    } else if (insecure) {
        gpp_warn("control: INSECURE: no [coordinator] key_dir and plaintext allowed (%s): the "
                 "control plane is NOT authenticated or encrypted; anyone who reaches %s can "
                 "register as an agent, watch or disrupt the job. Use it only where every "
                 "host and user is trusted; make keys with gpp-coordinator --keygen DIR and set "
                 "key_dir (docs/operations.md, Security)",
                 cfg->coordinator.insecure_plaintext ? "[coordinator] insecure_plaintext = true"
                                                     : "--insecure",
                 cfg->coordinator.endpoint);
        return NULL;
    } else {
        gpp_error("%s: launch = \"external\" without [coordinator] key_dir: the control plane "
                  "would be plaintext, and anyone who reaches %s could register as an agent. "
                  "Make keys with gpp-coordinator --keygen DIR --agents N and set [coordinator] "
                  "key_dir = \"DIR\" (docs/operations.md, Security); to run without "
                  "authentication on a trusted network, set [coordinator] insecure_plaintext = "
                  "true or pass --insecure",
                  cfg->path, cfg->coordinator.endpoint);
        *failed = 1;
        return NULL;
    }
    if (!srv) {
        gpp_error("%s: %s", cfg->path, err.msg);
        *failed = 1;
    }
    return srv;
}

static int s_launch_agents(gpp_coord_t *coord, gpp_launch_t *launch, const gpp_config_t *cfg,
                           const s_opts_t *o, const char *const *hosts, const int *slots, int n,
                           const gpp_curve_client_t *keys)
{
    char agent[PATH_MAX];
    if (s_agent_path(o, agent, sizeof agent) < 0) {
        gpp_error("cannot find gpp-agent (tried --agent, $GPP_AGENT, next to "
                  "this binary, ../agent/ from it and %s); pass --agent PATH",
                  GPP_AGENT_BUILD_PATH);
        return -1;
    }
    char ep[512], slot[16], hb[16], to[16], mem[32], bar[16], thr[16], keyfd[16], gpu[16];
    const int cuda = cfg->job.backend == GPP_DEVICE_CUDA && !o->control_only;
    /* the cores are shared out among the local agents (one thread at least):
     * a fixed count per run keeps OpenBLAS results reproducible */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(thr, sizeof thr, "%ld", cores > n ? cores / n : 1);
    s_connect_endpoint(o->endpoint ? o->endpoint : cfg->coordinator.endpoint, gpp_coord_port(coord),
                       ep, sizeof ep);
    snprintf(hb, sizeof hb, "%d", cfg->health.heartbeat_ms);
    snprintf(to, sizeof to, "%d", cfg->health.timeout_ms);
    /* cuda: 0 = the GPU's own memory, reported by the agent */
    snprintf(mem, sizeof mem, "%lld",
             (long long)(cfg->cluster.mem_gib > 0 ? cfg->cluster.mem_gib * 1073741824.0
                         : cuda                   ? 0
                                                  : 4 * 1073741824.0));
    snprintf(bar, sizeof bar, "%d", o->control_only ? o->barriers : 0);
    /* Local agents are not a unit's main process: systemd would drop their
     * sd_notify messages with a warning each. They run without NOTIFY_SOCKET
     * (put back for us once they are forked; no other thread runs yet). */
    char notify[PATH_MAX] = "";
    if (getenv("NOTIFY_SOCKET"))
        snprintf(notify, sizeof notify, "%s", getenv("NOTIFY_SOCKET"));
    unsetenv("NOTIFY_SOCKET");
    int spawned = 0;
    for (int r = 0; r < n; r++) {
        snprintf(slot, sizeof slot, "%d", slots[r]);
        /* local launch: one node; [[nodes]] gpus shares its GPUs among the slots */
        snprintf(gpu, sizeof gpu, "%d", gpp_config_slot_gpu(cfg, 0, slots[r]));
        char *argv[] = {agent,
                        "--coordinator",
                        ep,
                        "--host",
                        (char *)hosts[r],
                        "--slot",
                        slot,
                        "--heartbeat-ms",
                        hb,
                        "--timeout-ms",
                        to,
                        "--mem-bytes",
                        mem,
                        "--control-barriers",
                        bar,
                        "--threads",
                        thr,
                        "--key-fd",
                        keyfd,
                        cuda ? "--gpu" : NULL,
                        gpu,
                        NULL};
        gpp_err_t err = {{0}};
        int fd = gpp_curve_client_to_fd(&keys[r], &err);
        snprintf(keyfd, sizeof keyfd, "%d", fd);
        pid_t pid = fd < 0 ? -1 : gpp_launch_spawn(launch, argv, r, fd, &err);
        if (fd >= 0)
            close(fd);
        if (pid < 0) {
            gpp_error("%s", err.msg);
            break;
        }
        gpp_registry_agent(gpp_coord_registry(coord), r)->launched_pid = pid;
        spawned++;
    }
    if (notify[0])
        setenv("NOTIFY_SOCKET", notify, 1);
    if (spawned < n)
        return -1;
    gpp_info("launched %d local agents (%s, %s CPU thread%s each)", n, agent, thr,
             strcmp(thr, "1") ? "s" : "");
    if (cores < n)
        printf("note: %d agents share %ld cores; the simulation assumes a device each, so the "
               "measured iterations will be slower\n",
               n, cores);
    return 0;
}

/* iteration_fn in between (it gets plan_arg, the job): the job's, then
 * STATUS= for `systemctl status`. */
static int s_iterations; /* of the job, for the status line */

static int s_iteration_fn(void *job, int done, gpp_err_t *err)
{
    if (gpp_job_iteration_fn(job, done, err) < 0)
        return -1;
    gpp_notify_status("training: iteration %d of %d done", done, s_iterations);
    return 0;
}

/* The agents to blame for a stop: those whose process a signal ended
 * (killed, crashed), else the one the coordinator saw die first (its peers
 * that failed on the broken connection may exit before the killed agent is
 * reaped, and would be blamed for it), else (external agents, nobody seen
 * dying) the rank whose connection a peer's ERROR_COMM named first. */
static int s_died(const gpp_agent_t *a, int any_signal, int r, int failed_peer)
{
    if (failed_peer >= 0)
        return r == failed_peer;
    return any_signal ? a->exit_signal != 0 : a->state == GPP_AGENT_DEAD;
}

/* After a stopped local job: 1 when agents died and every dead slot has a
 * restart left (counted in restarts[n]), 0 when the stop had another cause
 * or a slot used up --max-restarts (said why). With elastic, such a slot is
 * marked in drop[n] instead (1 is returned while a slot remains).
 * External agents (external = 1): the coordinator sees no process end, so
 * an agent's failure (gpp_coord_agent_failed) is blamed on the agent it
 * found silent, else (a peer's Error about the broken connection came
 * first) on the rank that Error named (gpp_coord_failed_peer), else on
 * every slot: each one's agent exits on the Abort and its supervisor starts
 * it again. */
static int s_restart_due(gpp_coord_t *coord, int *restarts, int n, int max, int elastic, int *drop,
                         int external)
{
    gpp_registry_t *reg = gpp_coord_registry(coord);
    int dead = 0, dropped = 0, any_signal = 0;
    for (int r = 0; r < n; r++)
        any_signal |= gpp_registry_agent(reg, r)->exit_signal != 0;
    int unseen = /* nobody seen dying: a peer's Error stopped the job first */
        external && gpp_coord_agent_failed(coord) && !gpp_registry_count(reg, GPP_AGENT_DEAD);
    int peer = unseen ? gpp_coord_failed_peer(coord) : -1;
    if (peer >= n)
        peer = -1;
    int blame_all = unseen && peer < 0;
    if (peer >= 0) {
        gpp_agent_t *a = gpp_registry_agent(reg, peer);
        gpp_warn("agent %s:%d (rank %d) is blamed: a peer's connection to it broke first", a->host,
                 a->slot, peer);
    } else if (blame_all) {
        gpp_warn("no agent was seen dying and no peer named one: every slot counts a restart");
    }
    if (external ? !gpp_coord_agent_failed(coord)
                 : !any_signal && !gpp_registry_count(reg, GPP_AGENT_DEAD))
        return 0; /* not stopped by a death (a peer's error may come first) */
    for (int r = 0; blame_all && r < n; r++) /* no one to drop: the one that died is unknown */
        if (restarts[r] >= max) {
            gpp_error("external agents restarted %d time%s (an agent's error stops the job "
                      "before the coordinator knows which died, so every slot counts): "
                      "--max-restarts %d reached, not restarting",
                      restarts[r], restarts[r] == 1 ? "" : "s", max);
            return 0;
        }
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(reg, r);
        drop[r] = 0;
        if (!blame_all && !s_died(a, any_signal, r, peer))
            continue;
        dead++;
        if (restarts[r] < max)
            continue;
        if (!elastic) {
            if (max > 0)
                gpp_error("agent %s:%d (rank %d) died after %d restart%s: --max-restarts %d "
                          "reached, not restarting",
                          a->host, a->slot, r, restarts[r], restarts[r] == 1 ? "" : "s", max);
            return 0;
        }
        gpp_warn("agent %s:%d (rank %d) died after %d restart%s: --max-restarts %d reached; "
                 "--elastic: dropping slot %s:%d",
                 a->host, a->slot, r, restarts[r], restarts[r] == 1 ? "" : "s", max, a->host,
                 a->slot);
        drop[r] = 1;
        dropped++;
    }
    if (!dead)
        return 0;
    if (dropped == n) {
        gpp_error("--elastic: every slot is gone (the last %d died after --max-restarts %d); "
                  "not restarting",
                  dropped, max);
        return 0;
    }
    for (int r = 0; r < n; r++)
        if (!drop[r] && (blame_all || s_died(gpp_registry_agent(reg, r), any_signal, r, peer)))
            restarts[r]++;
    return 1;
}

/* External launch, after the wait for the agents to register again
 * (restart > 0) timed out: with elastic, the slots still missing are marked
 * in drop[n] and 1 is returned (no restart is counted: the slots that came
 * back did nothing wrong); else 0 (the coordinator's reason names them). */
static int s_rejoin_due(gpp_coord_t *coord, int n, int elastic, int rejoin_timeout_ms, int *drop)
{
    gpp_registry_t *reg = gpp_coord_registry(coord);
    int missing = gpp_registry_count(reg, GPP_AGENT_EXPECTED);
    if (!elastic || missing == 0)
        return 0;
    if (missing == n) {
        gpp_error("--elastic: no agent registered again within %.1f s (--rejoin-timeout-ms); "
                  "not restarting",
                  rejoin_timeout_ms / 1000.0);
        return 0;
    }
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(reg, r);
        drop[r] = a->state == GPP_AGENT_EXPECTED;
        if (drop[r])
            gpp_warn("agent %s:%d (rank %d) not back within %.1f s (--rejoin-timeout-ms); "
                     "--elastic: dropping slot %s:%d",
                     a->host, a->slot, r, rejoin_timeout_ms / 1000.0, a->host, a->slot);
    }
    return 1;
}

/* --elastic: removes the dropped ranks from the job's slot lists (kept in
 * rank order) and from the cluster file's node counts, so that the next
 * plan is made for the devices that remain. Returns the new count. */
static int s_drop_slots(gpp_config_t *cfg, const int *drop, int n, const char **hosts, int *slots,
                        int *node, int *restarts, gpp_curve_client_t *keys)
{
    int m = 0;
    for (int r = 0; r < n; r++) {
        if (drop[r]) {
            cfg->nodes[node[r]].slots--;
            continue;
        }
        hosts[m] = hosts[r];
        slots[m] = slots[r];
        node[m] = node[r];
        restarts[m] = restarts[r];
        keys[m] = keys[r];
        m++;
    }
    return m;
}

static void s_print_barriers(gpp_coord_t *coord, int n_agents)
{
    const double *ms;
    int n = gpp_coord_barrier_times(coord, &ms);
    if (n <= 0)
        return;
    double *s = gpp_xcalloc((size_t)n, sizeof *s);
    memcpy(s, ms, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += s[i];
    printf("barrier: %d agents, %d round trips: mean %.3f ms, p50 %.3f ms, p99 %.3f ms, max "
           "%.3f ms\n",
           n_agents, n, sum / n, s[n / 2], s[(int)((n - 1) * 0.99)], s[n - 1]);
    free(s);
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
    if (o.trace && s_trace_writable(o.trace) < 0)
        return 2;
    gpp_err_t err = {{0}};
    int sigfd = gpp_sigfd_open(&err);
    if (sigfd < 0) {
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
    if (cfg.job.backend == GPP_DEVICE_CUDA && !o.control_only) {
        fprintf(stderr,
                "gpp-coordinator: %s: job.backend = \"cuda\": this gpp was built without CUDA "
                "(its agents cannot open a GPU); rebuild with -DGPP_CUDA=ON on a machine with "
                "nvcc, or set backend = \"cpu\"\n",
                o.config_path);
        gpp_config_release(&cfg);
        return 2;
    }
#endif

    int n = gpp_config_devices(&cfg);
    const char **hosts = gpp_xcalloc((size_t)n, sizeof *hosts);
    int *slots = gpp_xcalloc((size_t)n, sizeof *slots);
    int *node = gpp_xcalloc((size_t)n, sizeof *node); /* of each rank, for --elastic */
    int *drop = gpp_xcalloc((size_t)n, sizeof *drop);
    for (int i = 0, r = 0; i < cfg.n_nodes; i++)
        for (int s = 0; s < cfg.nodes[i].slots; s++, r++) {
            hosts[r] = cfg.nodes[i].host;
            slots[r] = s;
            node[r] = i;
        }

    int rc = 1, metrics_failed = 0;
    gpp_launch_t *launch = NULL;
    gpp_coord_t *coord = NULL;
    gpp_job_t *job = NULL;
    gpp_http_t *http = NULL;
    int *restarts = NULL; /* [n]: restarts of each slot (--max-restarts) */
    gpp_curve_server_t *curve = NULL;
    gpp_rundir_t rundir = {0};
    gpp_curve_client_t *keys = gpp_xcalloc((size_t)n, sizeof *keys); /* local agents' */
    const int n_keys = n; /* n shrinks when --elastic drops slots */
    gpp_coord_cfg_t cc = {0};
    char pinned_ep[512]; /* external restarts: the endpoint with the bound port */
    cc.endpoint = o.endpoint ? o.endpoint : cfg.coordinator.endpoint;
    cc.n_agents = n;
    cc.hosts = hosts;
    cc.slots = slots;
    cc.heartbeat_ms = cfg.health.heartbeat_ms;
    cc.timeout_ms = cfg.health.timeout_ms;
    cc.start_timeout_ms = o.start_timeout_ms;
    cc.barriers = o.barriers;
    cc.progress = stdout;
    cc.metrics_path = o.metrics ? o.metrics : cfg.metrics.file;
    cc.sigfd = sigfd;
    /* keys before anything is planned or written: a bad key_dir is exit 2 */
    int local = cfg.job.launch == GPP_CONFIG_LAUNCH_LOCAL && !o.external;
    int curve_failed = 0;
    /* gpp-top's way in: a local launch always has a run directory */
    int want_rundir = o.run_dir || local;
    gpp_curve_client_t monitor_key;
    curve = s_curve_setup(&cfg, local, n, keys, want_rundir ? &monitor_key : NULL,
                          o.insecure || cfg.coordinator.insecure_plaintext, &curve_failed);
    if (curve_failed) {
        rc = 2;
        goto done;
    }
    if (want_rundir) {
        char def[PATH_MAX];
        int bad = (!o.run_dir && gpp_rundir_default(def, sizeof def, &err) < 0) ||
                  gpp_rundir_open(&rundir, o.run_dir ? o.run_dir : def, curve ? &monitor_key : NULL,
                                  &err) < 0;
        explicit_bzero(&monitor_key, sizeof monitor_key);
        if (bad && o.run_dir) { /* asked for: the command line's to fix */
            gpp_error("%s", err.msg);
            rc = 2;
            goto done;
        }
        if (bad) /* the default: the job runs, unwatched over CURVE */
            gpp_warn("%s; gpp-top cannot watch this job through a run directory (its HTTP "
                     "port still serves)",
                     err.msg);
    }
    cc.curve = curve;
    cc.clock_round_trips = o.trace ? S_CLOCK_ROUND_TRIPS : 0;
    cc.require_gpu = cfg.job.backend == GPP_DEVICE_CUDA && !o.control_only;
    if (!o.control_only) {
        job = gpp_job_new(&cfg, o.plan, o.reprofile,
                          !o.resume ? GPP_JOB_FRESH
                                    : GPP_JOB_RESUME | (o.replan ? GPP_JOB_REPLAN : 0) |
                                          (o.resume == 2 ? GPP_JOB_AUTO : 0),
                          stdout, &err);
        if (!job) {
            gpp_error("%s", err.msg);
            rc = 2;
            goto done;
        }
        if (o.trace && gpp_job_trace(job, o.trace_iteration, &err) < 0) {
            gpp_error("%s", err.msg);
            rc = 2;
            goto done;
        }
        cc.plan_fn = gpp_job_plan_fn;
        cc.plan_arg = job;
        s_iterations = cfg.job.iterations;
        cc.iteration_fn = s_iteration_fn;
        cc.metrics_fn = gpp_job_metrics_fn;
        cc.profile_req = gpp_job_profile_request(job);
        cc.profile_fn = gpp_job_profile_fn;
    }
    if (cfg.metrics.http_port > 0) { /* a port in use is the cluster file's to fix: exit 2 */
        http = gpp_http_new(cfg.metrics.http_port, &err);
        if (!http) {
            gpp_error("%s: %s", o.config_path, err.msg);
            rc = 2;
            goto done;
        }
        cc.http = http;
        gpp_info("metrics: serving Prometheus /metrics on port %d", gpp_http_port(http));
    }
    if (local) {
        launch = gpp_launch_new();
        cc.launch = launch;
    }
    restarts = gpp_xcalloc((size_t)n, sizeof *restarts);
    cc.agent_restarts = restarts;
    for (;;) {
        coord = gpp_coord_new(&cc, &err);
        /* a restart binds the port the last socket just closed, which the
         * ZeroMQ I/O thread may still hold for a moment: retry, bounded */
        for (double t0 = gpp_now_ms(); !coord && cc.job_restarts > 0 && errno == EADDRINUSE &&
                                       gpp_now_ms() - t0 < S_REBIND_MS;) {
            usleep(50 * 1000);
            coord = gpp_coord_new(&cc, &err);
        }
        if (!coord) {
            /* an endpoint that does not resolve here or a port in use: the
             * configuration's to change (exit status 2) */
            if (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == ENODEV || errno == EACCES)
                rc = 2;
            gpp_error("%s", err.msg);
            goto done;
        }
        if (rundir.open) {
            char ep[512];
            s_connect_endpoint(cc.endpoint, gpp_coord_port(coord), ep, sizeof ep);
            if (gpp_rundir_endpoint(&rundir, ep, &err) < 0) {
                gpp_error("%s", err.msg);
                goto done;
            }
            gpp_info("monitor: gpp-top --run-dir %s (or gpp-top ... %s with a monitor key)",
                     rundir.path, ep);
        }
        /* bound: ready for systemd (Type=notify; a restart says it again, a no-op) */
        gpp_notify_ready("listening on port %d; waiting for %d agents", gpp_coord_port(coord), n);
        if (local && s_launch_agents(coord, launch, &cfg, &o, hosts, slots, n, keys) < 0)
            goto done;
        rc = gpp_coord_run(coord) == 0 ? 0 : gpp_coord_exit_code(coord);
        if (o.control_only)
            s_print_barriers(coord, n);
        else if (job && gpp_coord_progress(coord) &&
                 gpp_job_print_summary(job, gpp_coord_progress(coord), stdout) < 0 && rc == 0)
            metrics_failed = 1;
        if (rc == 0 && job && o.trace &&
            gpp_job_write_trace(job, gpp_coord_registry(coord), o.trace, stdout, &err) < 0) {
            gpp_error("%s", err.msg);
            rc = 1;
        }
        if (gpp_coord_dropped(coord))
            printf("control: %llu invalid messages dropped\n",
                   (unsigned long long)gpp_coord_dropped(coord));
        if (rc != 0 && gpp_coord_reason(coord)[0]) /* else the failure was logged already */
            gpp_error("job stopped: %s", gpp_coord_reason(coord));
        if (metrics_failed) /* trained, but the metrics file lacks the digest: not a clean end */
            rc = 1;
        /* agents died (not a signal to us, not a bad job): every local
         * agent is stopped and reaped, every external one exits on the
         * Abort and is started again by its supervisor; then the job starts
         * again from the newest complete set (from iteration 0 when there
         * is none yet), external agents registering again on the same
         * endpoint. A restart whose agents did not all come back re-plans
         * without the missing (--elastic) or ends. */
        int rejoin_timed_out =
            !local && cc.job_restarts > 0 && !gpp_coord_agent_failed(coord) &&
            gpp_registry_count(gpp_coord_registry(coord), GPP_AGENT_EXPECTED) > 0;
        if (rc != 1 || !job || (o.max_restarts <= 0 && !o.elastic) ||
            !(rejoin_timed_out
                  ? s_rejoin_due(coord, n, o.elastic, o.rejoin_timeout_ms, drop)
                  : s_restart_due(coord, restarts, n, o.max_restarts, o.elastic, drop, !local))) {
            gpp_notify_stopping();
            if (rc == 0)
                gpp_notify_status("job finished");
            else
                gpp_notify_status("job stopped: %s", gpp_coord_reason(coord));
            break;
        }
        gpp_notify_status("restarting: agents died");
        cc.job_restarts++;
        /* external agents come back to the port they know: a port the
         * kernel picked (`:*`) is kept for the next bind */
        size_t el = strlen(cc.endpoint);
        if (!local && el > 2 && strcmp(cc.endpoint + el - 2, ":*") == 0) {
            snprintf(pinned_ep, sizeof pinned_ep, "%.*s:%d", (int)(el - 2), cc.endpoint,
                     gpp_coord_port(coord));
            cc.endpoint = pinned_ep;
        }
        if (!local)
            cc.start_timeout_ms = o.rejoin_timeout_ms;
        gpp_launch_destroy(&launch);
        gpp_coord_destroy(&coord);
        gpp_job_destroy(&job);
        int m = s_drop_slots(&cfg, drop, n, hosts, slots, node, restarts, keys);
        double replan_start_ms = gpp_now_ms();
        int from =
            cfg.job.checkpoint_dir[0] ? gpp_ckpt_set_latest(cfg.job.checkpoint_dir, &err) : 0;
        if (from < 0) {
            gpp_error("%s", err.msg);
            goto done;
        }
        /* a plan file is for the devices that were: the planner re-plans
         * (this time and every later one) */
        size_t pl = strlen(o.plan);
        if (m < n && pl > 5 && strcmp(o.plan + pl - 5, ".json") == 0)
            o.plan = cfg.job.planner[0] ? cfg.job.planner : "gpp";
        const char *plan = o.plan;
        if (m < n)
            printf("elastic: %d slot%s dropped; re-planning (--plan %s) on the %d remaining "
                   "device%s from %s%d\n",
                   n - m, n - m == 1 ? "" : "s", plan, m, m == 1 ? "" : "s",
                   from > 0 ? "checkpoint set " : "iteration ", from);
        else if (local)
            printf("restart: agents died; starting them again from %s%d\n",
                   from > 0 ? "checkpoint set " : "iteration ", from);
        else
            printf("restart: agents died; waiting up to %.1f s for all %d to register again, "
                   "then resuming from %s%d\n",
                   o.rejoin_timeout_ms / 1000.0, m, from > 0 ? "checkpoint set " : "iteration ",
                   from);
        fflush(stdout);
        n = m;
        cc.n_agents = n;
        job = gpp_job_new(&cfg, plan, 0,
                          from == 0   ? GPP_JOB_FRESH
                          : o.elastic ? GPP_JOB_RESUME | GPP_JOB_REPLAN
                                      : GPP_JOB_RESUME,
                          stdout, &err);
        if (!job) {
            gpp_error("restart: %s", err.msg);
            goto done;
        }
        if (o.trace && gpp_job_trace(job, o.trace_iteration, &err) < 0) {
            gpp_error("restart: %s", err.msg);
            goto done;
        }
        if (o.elastic && !gpp_job_profile_request(job)) { /* else planned later */
            printf("elastic: planned for %d device%s in %.1f ms\n", n, n == 1 ? "" : "s",
                   gpp_now_ms() - replan_start_ms);
            fflush(stdout);
        }
        cc.plan_arg = job;
        cc.profile_req = gpp_job_profile_request(job);
        if (local) {
            launch = gpp_launch_new();
            cc.launch = launch;
        }
    }
done:
    gpp_launch_destroy(&launch); /* reaps every child: no orphans */
    gpp_coord_destroy(&coord);
    gpp_curve_server_destroy(&curve); /* after the ROUTER: it authenticates through it */
    gpp_rundir_close(&rundir);
    explicit_bzero(keys, (size_t)n_keys * sizeof *keys);
    free(keys);
    gpp_http_destroy(&http); /* after the loop: nothing publishes any more */
    gpp_job_destroy(&job);
    free(restarts);
    free(hosts);
    free(slots);
    free(node);
    free(drop);
    gpp_config_release(&cfg);
    fflush(stdout);
    return rc;
}
