/* gpp_supervisor: see gpp_supervisor.h. */
#include "coordinator/gpp_supervisor.h"

#include <assert.h>
#include <poll.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_net.h"
#include "common/gpp_notify.h"
#include "common/gpp_time.h"
#include "coordinator/gpp_rundir.h"

/* --trace: heartbeat round trips with each agent right after it registered
 * (the clock offset keeps the one with the least delay; gpp_time.h) */
#define S_CLOCK_ROUND_TRIPS 32
/* a restart's bind of the port its last socket closed: retried this long */
#define S_REBIND_MS 5000.0

struct gpp_supervisor_s {
    gpp_supervisor_opts_t o;
    gpp_config_t cfg; /* owned; --elastic lowers its nodes' slot counts */
    int finished;     /* --resume of a finished job: nothing to run (s_finished) */
    FILE *out;
    int local; /* launch = "local" and not --external: agents are forked here */
    /* the job's slots in rank order, [n]; --elastic shrinks n */
    int n;
    const char **hosts; /* into cfg.nodes */
    int *slots;
    int *node;                /* of each rank, for --elastic */
    int *restarts;            /* of each slot (--max-restarts) */
    int *drop;                /* scratch of the restart decision */
    gpp_curve_client_t *keys; /* local agents' keys, [n_keys] */
    int n_keys;
    gpp_curve_server_t *curve;
    gpp_rundir_t rundir;
    gpp_http_t *http;
    const char *plan; /* --plan now (a file turns into the planner after a drop) */
    gpp_job_t *job;
    gpp_launch_t *launch;
    gpp_coord_t *coord;
    gpp_coord_cfg_t cc;
    char pinned_ep[512]; /* external restarts: the endpoint with the bound port */
    int attempt;
};

/* ---- the job's callbacks: plan_arg is the supervisor ---- */

static int s_plan_fn(void *arg, gpp_registry_t *reg, const atomic_int *cancel, gpp_coord_job_t *job,
                     gpp_err_t *err)
{
    gpp_supervisor_t *self = arg;
    return gpp_job_plan_fn(self->job, reg, cancel, job, err);
}

static int s_profile_fn(void *arg, const Gpp__ProfileResult *res, gpp_err_t *err)
{
    gpp_supervisor_t *self = arg;
    return gpp_job_profile_fn(self->job, res, err);
}

static int s_metrics_fn(void *arg, int rank, const Gpp__Metrics *m, gpp_err_t *err)
{
    gpp_supervisor_t *self = arg;
    return gpp_job_metrics_fn(self->job, rank, m, err);
}

/* The job's, then STATUS= for `systemctl status`. */
static int s_iteration_fn(void *arg, int done, gpp_err_t *err)
{
    gpp_supervisor_t *self = arg;
    if (gpp_job_iteration_fn(self->job, done, err) < 0)
        return -1;
    gpp_notify_status("training: iteration %d of %d done", done, self->cfg.job.iterations);
    return 0;
}

/* ---- setting up ---- */

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

/* Keys, run directory, job, /metrics: 0, or the exit status (logged). */
/* --resume of a job whose newest set has every iteration and records the
 * final weights digest: it finished; say so with the digest (exit 0). */
static int s_finished(gpp_supervisor_t *self)
{
    const char *dir = self->cfg.job.checkpoint_dir;
    gpp_err_t err = {{0}};
    char hex[65];
    int n = !self->o.resume || self->o.resume_from || !dir[0] ? 0 : gpp_ckpt_set_latest(dir, &err);
    if (n < self->cfg.job.iterations || gpp_ckpt_set_digest(dir, n, hex, &err) != 1)
        return 0;
    gpp_info("coordinator: --resume: checkpoint set %d in %s already has all %d iterations: the "
             "job finished (raise job.iterations or --iterations to train further)",
             n, dir, self->cfg.job.iterations);
    fprintf(self->out, "resume: the job finished at iteration %d (checkpoint set %d)\n", n, n);
    fprintf(self->out, "weights sha256 %s\n", hex);
    fflush(self->out);
    return 1;
}

static int s_setup(gpp_supervisor_t *self)
{
    gpp_config_t *cfg = &self->cfg;
    const gpp_supervisor_opts_t *o = &self->o;
    gpp_err_t err = {{0}};
    if (!o->control_only && (self->finished = s_finished(self)))
        return 0;
    /* keys before anything is planned or written: a bad key_dir is exit 2 */
    int curve_failed = 0;
    /* gpp-top's way in: a local launch always has a run directory */
    int want_rundir = o->run_dir || self->local;
    gpp_curve_client_t monitor_key;
    self->curve =
        s_curve_setup(cfg, self->local, self->n, self->keys, want_rundir ? &monitor_key : NULL,
                      o->insecure || cfg->coordinator.insecure_plaintext, &curve_failed);
    if (curve_failed)
        return 2;
    if (want_rundir) {
        char def[PATH_MAX];
        int bad = (!o->run_dir && gpp_rundir_default(def, sizeof def, &err) < 0) ||
                  gpp_rundir_open(&self->rundir, o->run_dir ? o->run_dir : def,
                                  self->curve ? &monitor_key : NULL, &err) < 0;
        explicit_bzero(&monitor_key, sizeof monitor_key);
        if (bad && o->run_dir) { /* asked for: the command line's to fix */
            gpp_error("%s", err.msg);
            return 2;
        }
        if (bad) /* the default: the job runs, unwatched over CURVE */
            gpp_warn("%s; gpp-top cannot watch this job through a run directory", err.msg);
    }
    self->cc.curve = self->curve;
    if (!o->control_only) {
        self->job = gpp_job_new(cfg, self->plan, o->reprofile,
                                !o->resume ? GPP_JOB_FRESH
                                           : GPP_JOB_RESUME | (o->replan ? GPP_JOB_REPLAN : 0) |
                                                 (o->resume == 2 ? GPP_JOB_AUTO : 0) |
                                                 GPP_JOB_FROM(o->resume_from),
                                self->out, &err);
        if (!self->job) {
            gpp_error("%s", err.msg);
            return 2;
        }
        if (o->trace && gpp_job_trace(self->job, o->trace_iteration, &err) < 0) {
            gpp_error("%s", err.msg);
            return 2;
        }
        self->cc.plan_fn = s_plan_fn;
        self->cc.plan_arg = self;
        self->cc.iteration_fn = s_iteration_fn;
        self->cc.metrics_fn = s_metrics_fn;
        self->cc.profile_req = gpp_job_profile_request(self->job);
        self->cc.profile_fn = s_profile_fn;
    }
    if (cfg->metrics.http_port > 0) { /* a port in use is the cluster file's to fix: exit 2 */
        self->http = gpp_http_new(cfg->metrics.http_port, &err);
        if (!self->http) {
            gpp_error("%s: %s", cfg->path, err.msg);
            return 2;
        }
        self->cc.http = self->http;
        gpp_info("metrics: serving Prometheus /metrics on port %d", gpp_http_port(self->http));
    }
    return 0;
}

gpp_supervisor_t *gpp_supervisor_new(const gpp_supervisor_opts_t *opts, gpp_config_t *cfg,
                                     int *status)
{
    assert(opts && cfg && status);
    gpp_supervisor_t *self = gpp_xcalloc(1, sizeof *self);
    self->o = *opts;
    self->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);
    self->out = opts->out ? opts->out : stdout;
    self->plan = opts->plan ? opts->plan : "auto";
    self->local = self->cfg.job.launch == GPP_CONFIG_LAUNCH_LOCAL && !opts->external;
    int n = self->n = self->n_keys = gpp_config_devices(&self->cfg);
    self->hosts = gpp_xcalloc((size_t)n, sizeof *self->hosts);
    self->slots = gpp_xcalloc((size_t)n, sizeof *self->slots);
    self->node = gpp_xcalloc((size_t)n, sizeof *self->node);
    self->restarts = gpp_xcalloc((size_t)n, sizeof *self->restarts);
    self->drop = gpp_xcalloc((size_t)n, sizeof *self->drop);
    self->keys = gpp_xcalloc((size_t)n, sizeof *self->keys);
    for (int i = 0, r = 0; i < self->cfg.n_nodes; i++)
        for (int s = 0; s < self->cfg.nodes[i].slots; s++, r++) {
            self->hosts[r] = self->cfg.nodes[i].host;
            self->slots[r] = s;
            self->node[r] = i;
        }
    gpp_coord_cfg_t *cc = &self->cc;
    cc->endpoint = opts->endpoint ? opts->endpoint : self->cfg.coordinator.endpoint;
    cc->n_agents = n;
    cc->hosts = self->hosts;
    cc->slots = self->slots;
    cc->heartbeat_ms = self->cfg.health.heartbeat_ms;
    cc->timeout_ms = self->cfg.health.timeout_ms;
    cc->start_timeout_ms = opts->start_timeout_ms;
    cc->barriers = opts->barriers;
    cc->progress = self->out;
    cc->metrics_path = self->cfg.metrics.file;
    cc->sigfd = opts->sigfd;
    cc->clock_round_trips = opts->trace ? S_CLOCK_ROUND_TRIPS : 0;
    cc->require_gpu = self->cfg.job.backend == GPP_DEVICE_CUDA && !opts->control_only;
    cc->agent_restarts = self->restarts;
    *status = s_setup(self);
    if (*status != 0)
        gpp_supervisor_destroy(&self);
    return self;
}

void gpp_supervisor_destroy(gpp_supervisor_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_supervisor_t *self = *self_p;
    gpp_launch_destroy(&self->launch); /* reaps every child: no orphans */
    gpp_coord_destroy(&self->coord);
    gpp_curve_server_destroy(&self->curve); /* after the ROUTER: it authenticates through it */
    gpp_rundir_close(&self->rundir);
    explicit_bzero(self->keys, (size_t)self->n_keys * sizeof *self->keys);
    free(self->keys);
    gpp_http_destroy(&self->http); /* after the loop: nothing publishes any more */
    gpp_job_destroy(&self->job);
    free(self->hosts);
    free(self->slots);
    free(self->node);
    free(self->restarts);
    free(self->drop);
    gpp_config_release(&self->cfg);
    fflush(self->out);
    free(self);
    *self_p = NULL;
}

/* ---- one attempt on the coordinator ---- */

/* The gpp-agent binary: the given path, $GPP_AGENT, next to us, at
 * ../agent/ from us (a build tree's layout, also where a build tree was
 * moved: a bundle on a GPU machine), or the build's compiled-in path. */
static int s_agent_path(const char *given, char *out, size_t len)
{
    if (given) {
        snprintf(out, len, "%s", given);
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

static int s_launch_agents(gpp_supervisor_t *self)
{
    const gpp_config_t *cfg = &self->cfg;
    const gpp_supervisor_opts_t *o = &self->o;
    const int n = self->n;
    char agent[PATH_MAX];
    if (s_agent_path(o->agent_path, agent, sizeof agent) < 0) {
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
    s_connect_endpoint(o->endpoint ? o->endpoint : cfg->coordinator.endpoint,
                       gpp_coord_port(self->coord), ep, sizeof ep);
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
        snprintf(slot, sizeof slot, "%d", self->slots[r]);
        /* local launch: one node; [[nodes]] gpus shares its GPUs among the slots */
        snprintf(gpu, sizeof gpu, "%d", gpp_config_slot_gpu(cfg, 0, self->slots[r]));
        char *argv[] = {agent,
                        "--coordinator",
                        ep,
                        "--host",
                        (char *)self->hosts[r],
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
        int fd = gpp_curve_client_to_fd(&self->keys[r], &err);
        snprintf(keyfd, sizeof keyfd, "%d", fd);
        pid_t pid = fd < 0 ? -1 : gpp_launch_spawn(self->launch, argv, r, fd, &err);
        if (fd >= 0)
            close(fd);
        if (pid < 0) {
            gpp_error("%s", err.msg);
            break;
        }
        gpp_registry_agent(gpp_coord_registry(self->coord), r)->launched_pid = pid;
        spawned++;
    }
    if (notify[0])
        setenv("NOTIFY_SOCKET", notify, 1);
    if (spawned < n)
        return -1;
    gpp_info("launched %d local agents (%s, %s CPU thread%s each)", n, agent, thr,
             strcmp(thr, "1") ? "s" : "");
    if (cores < n)
        fprintf(self->out,
                "note: %d agents share %ld cores; the simulation assumes a device each, so the "
                "measured iterations will be slower\n",
                n, cores);
    return 0;
}

static void s_print_barriers(gpp_supervisor_t *self)
{
    const double *ms;
    int n = gpp_coord_barrier_times(self->coord, &ms);
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
    fprintf(self->out,
            "barrier: %d agents, %d round trips: mean %.3f ms, p50 %.3f ms, p99 %.3f ms, max "
            "%.3f ms\n",
            self->n, n, sum / n, s[n / 2], s[(int)((n - 1) * 0.99)], s[n - 1]);
    free(s);
}

/* The real attempt: bind, launch the local agents, run the loop, report. */
static int s_run_coord(gpp_supervisor_t *self, gpp_supervisor_outcome_t *out)
{
    const gpp_supervisor_opts_t *o = &self->o;
    gpp_coord_cfg_t *cc = &self->cc;
    gpp_err_t err = {{0}};
    out->status = 1;
    self->coord = gpp_coord_new(cc, &err);
    /* a restart binds the port the last socket just closed, which the
     * ZeroMQ I/O thread may still hold for a moment: retry, bounded */
    for (double t0 = gpp_now_ms(); !self->coord && cc->job_restarts > 0 && errno == EADDRINUSE &&
                                   gpp_now_ms() - t0 < S_REBIND_MS;) {
        usleep(50 * 1000);
        self->coord = gpp_coord_new(cc, &err);
    }
    if (!self->coord) {
        /* an endpoint that does not resolve here or a port in use: the
         * configuration's to change (exit status 2) */
        if (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == ENODEV || errno == EACCES)
            out->status = 2;
        gpp_error("%s", err.msg);
        return -1;
    }
    gpp_coord_t *coord = self->coord;
    if (self->rundir.open) {
        char ep[512];
        s_connect_endpoint(cc->endpoint, gpp_coord_port(coord), ep, sizeof ep);
        if (gpp_rundir_endpoint(&self->rundir, ep, &err) < 0) {
            gpp_error("%s", err.msg);
            return -1;
        }
        gpp_info("monitor: gpp-top --run-dir %s (or gpp-top ... %s with a monitor key)",
                 self->rundir.path, ep);
    }
    /* bound: ready for systemd (Type=notify; a restart says it again, a no-op) */
    gpp_notify_ready("listening on port %d; waiting for %d agents", gpp_coord_port(coord), self->n);
    if (self->local && s_launch_agents(self) < 0)
        return -1;
    int rc = gpp_coord_run(coord) == 0 ? 0 : gpp_coord_exit_code(coord), metrics_failed = 0;
    if (o->control_only)
        s_print_barriers(self);
    else if (self->job && gpp_coord_progress(coord) &&
             gpp_job_print_summary(self->job, gpp_coord_progress(coord), self->out) < 0 && rc == 0)
        metrics_failed = 1;
    if (rc == 0 && self->job && o->trace &&
        gpp_job_write_trace(self->job, gpp_coord_registry(coord), o->trace, self->out, &err) < 0) {
        gpp_error("%s", err.msg);
        rc = 1;
    }
    if (gpp_coord_dropped(coord))
        fprintf(self->out, "control: %llu invalid messages dropped\n",
                (unsigned long long)gpp_coord_dropped(coord));
    if (rc != 0 && gpp_coord_reason(coord)[0]) /* else the failure was logged already */
        gpp_error("job stopped: %s", gpp_coord_reason(coord));
    if (metrics_failed) /* trained, but the metrics file lacks the digest: not a clean end */
        rc = 1;
    *out = (gpp_supervisor_outcome_t){.status = rc,
                                      .agent_failed = gpp_coord_agent_failed(coord),
                                      .failed_peer = gpp_coord_failed_peer(coord),
                                      .port = gpp_coord_port(coord),
                                      .reason = gpp_coord_reason(coord),
                                      .reg = gpp_coord_registry(coord)};
    return 0;
}

/* ---- restarts ---- */

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

/* After a stop: 1 when agents died and every dead slot has a restart left
 * (counted in restarts[]), 0 when the stop had another cause or a slot used
 * up max_restarts (said why). With elastic, such a slot is marked in drop[]
 * instead (1 is returned while a slot remains). External agents: the
 * supervisor sees no process end, so an agent's failure is blamed on the
 * agent found silent, else (a peer's Error about the broken connection came
 * first) on the rank that Error named, else on every slot: each one's
 * agent exits on the Abort and its supervisor starts it again. */
static int s_restart_due(gpp_supervisor_t *self, const gpp_supervisor_outcome_t *oc)
{
    gpp_registry_t *reg = oc->reg;
    const int n = self->n, max = self->o.max_restarts, elastic = self->o.elastic;
    const int external = !self->local;
    int *restarts = self->restarts, *drop = self->drop;
    int dead = 0, dropped = 0, any_signal = 0;
    for (int r = 0; r < n; r++)
        any_signal |= gpp_registry_agent(reg, r)->exit_signal != 0;
    int unseen = /* nobody seen dying: a peer's Error stopped the job first */
        external && oc->agent_failed && !gpp_registry_count(reg, GPP_AGENT_DEAD);
    int peer = unseen ? oc->failed_peer : -1;
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
    if (external ? !oc->agent_failed : !any_signal && !gpp_registry_count(reg, GPP_AGENT_DEAD))
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

/* External launch, after the wait for the agents to register again timed
 * out: with elastic, the slots still missing are marked in drop[] and 1 is
 * returned (no restart is counted: the slots that came back did nothing
 * wrong); else 0 (the coordinator's reason names them). */
static int s_rejoin_due(gpp_supervisor_t *self, const gpp_supervisor_outcome_t *oc)
{
    gpp_registry_t *reg = oc->reg;
    const int n = self->n;
    const double rejoin_s = self->o.rejoin_timeout_ms / 1000.0;
    int missing = gpp_registry_count(reg, GPP_AGENT_EXPECTED);
    if (!self->o.elastic || missing == 0)
        return 0;
    if (missing == n) {
        gpp_error("--elastic: no agent registered again within %.1f s (--rejoin-timeout-ms); "
                  "not restarting",
                  rejoin_s);
        return 0;
    }
    for (int r = 0; r < n; r++) {
        gpp_agent_t *a = gpp_registry_agent(reg, r);
        self->drop[r] = a->state == GPP_AGENT_EXPECTED;
        if (self->drop[r])
            gpp_warn("agent %s:%d (rank %d) not back within %.1f s (--rejoin-timeout-ms); "
                     "--elastic: dropping slot %s:%d",
                     a->host, a->slot, r, rejoin_s, a->host, a->slot);
    }
    return 1;
}

/* 1 when the stopped job starts again (drop[] says which slots go). */
static int s_again(gpp_supervisor_t *self, const gpp_supervisor_outcome_t *oc)
{
    /* a stop after an external restart whose agents did not all come back */
    int rejoin_timed_out = !self->local && self->cc.job_restarts > 0 && !oc->agent_failed &&
                           gpp_registry_count(oc->reg, GPP_AGENT_EXPECTED) > 0;
    if (oc->status != 1 || !self->job || (self->o.max_restarts <= 0 && !self->o.elastic))
        return 0;
    return rejoin_timed_out ? s_rejoin_due(self, oc) : s_restart_due(self, oc);
}

/* --elastic: removes the dropped ranks from the slot lists (kept in rank
 * order) and from the cluster file's node counts, so that the next plan is
 * made for the devices that remain. Returns the new count. */
static int s_drop_slots(gpp_supervisor_t *self)
{
    int m = 0;
    for (int r = 0; r < self->n; r++) {
        if (self->drop[r]) {
            self->cfg.nodes[self->node[r]].slots--;
            continue;
        }
        self->hosts[m] = self->hosts[r];
        self->slots[m] = self->slots[r];
        self->node[m] = self->node[r];
        self->restarts[m] = self->restarts[r];
        self->keys[m] = self->keys[r];
        m++;
    }
    return m;
}

/* Agents died: every local agent is stopped and reaped, every external one
 * exits on the Abort and is started again by its supervisor; the job starts
 * again from the newest complete set (from iteration 0 when there is none
 * yet), external agents registering again on the same endpoint, without the
 * dropped slots. -1 (logged) when it cannot. */
static int s_restart(gpp_supervisor_t *self, const gpp_supervisor_outcome_t *oc)
{
    gpp_coord_cfg_t *cc = &self->cc;
    const gpp_supervisor_opts_t *o = &self->o;
    gpp_err_t err = {{0}};
    cc->job_restarts++;
    /* external agents come back to the port they know: a port the kernel
     * picked (`:*`) is kept for the next bind */
    size_t el = strlen(cc->endpoint);
    if (!self->local && el > 2 && strcmp(cc->endpoint + el - 2, ":*") == 0) {
        snprintf(self->pinned_ep, sizeof self->pinned_ep, "%.*s:%d", (int)(el - 2), cc->endpoint,
                 oc->port);
        cc->endpoint = self->pinned_ep;
    }
    if (!self->local)
        cc->start_timeout_ms = o->rejoin_timeout_ms;
    gpp_launch_destroy(&self->launch);
    gpp_coord_destroy(&self->coord);
    gpp_job_destroy(&self->job);
    const int n = self->n, m = s_drop_slots(self);
    double replan_start_ms = gpp_now_ms();
    const char *dir = self->cfg.job.checkpoint_dir;
    int from = dir[0] ? gpp_ckpt_set_latest(dir, &err) : 0;
    if (from < 0) {
        gpp_error("%s", err.msg);
        return -1;
    }
    /* a plan file is for the devices that were: the planner re-plans
     * (this time and every later one) */
    size_t pl = strlen(self->plan);
    if (m < n && pl > 5 && strcmp(self->plan + pl - 5, ".json") == 0)
        self->plan = self->cfg.job.planner[0] ? self->cfg.job.planner : "gpp";
    const char *what = from > 0 ? "checkpoint set " : "iteration ";
    if (m < n)
        fprintf(self->out,
                "elastic: %d slot%s dropped; re-planning (--plan %s) on the %d remaining "
                "device%s from %s%d\n",
                n - m, n - m == 1 ? "" : "s", self->plan, m, m == 1 ? "" : "s", what, from);
    else if (self->local)
        fprintf(self->out, "restart: agents died; starting them again from %s%d\n", what, from);
    else
        fprintf(self->out,
                "restart: agents died; waiting up to %.1f s for all %d to register again, "
                "then resuming from %s%d\n",
                o->rejoin_timeout_ms / 1000.0, m, what, from);
    fflush(self->out);
    self->n = cc->n_agents = m;
    self->job = gpp_job_new(&self->cfg, self->plan, 0,
                            from == 0    ? GPP_JOB_FRESH
                            : o->elastic ? GPP_JOB_RESUME | GPP_JOB_REPLAN
                                         : GPP_JOB_RESUME,
                            self->out, &err);
    if (!self->job) {
        gpp_error("restart: %s", err.msg);
        return -1;
    }
    if (o->trace && gpp_job_trace(self->job, o->trace_iteration, &err) < 0) {
        gpp_error("restart: %s", err.msg);
        return -1;
    }
    if (o->elastic && !gpp_job_profile_request(self->job)) { /* else planned later */
        fprintf(self->out, "elastic: planned for %d device%s in %.1f ms\n", m, m == 1 ? "" : "s",
                gpp_now_ms() - replan_start_ms);
        fflush(self->out);
    }
    cc->profile_req = gpp_job_profile_request(self->job);
    return 0;
}

/* /metrics and the control socket's monitors (gpp-top) keep getting the
 * job's final state for [metrics] http_linger_ms, so that scrapers and
 * watchers see it end: with http_port, or when a monitor watched this run;
 * not after a signal, and a signal meanwhile ends the wait. */
static void s_linger(gpp_supervisor_t *self, int status)
{
    const int ms = self->cfg.metrics.http_linger_ms;
    int watched = self->coord && gpp_coord_monitored(self->coord) > 0;
    if ((!self->http && !watched) || ms <= 0 || status >= 128)
        return;
    char port[32] = "";
    if (self->http)
        snprintf(port, sizeof port, " on port %d", gpp_http_port(self->http));
    gpp_info("metrics: serving the job's final state%s%s for %.1f s more%s ([metrics] "
             "http_linger_ms; a signal ends it)",
             port, self->http ? "" : " to monitors", ms / 1000.0,
             self->http && self->coord ? ", and to monitors" : "");
    if (self->coord) {
        gpp_coord_linger(self->coord, ms, self->o.sigfd);
        return;
    }
    struct pollfd p = {.fd = self->o.sigfd, .events = POLLIN};
    for (double end = gpp_now_ms() + ms, now; (now = gpp_now_ms()) < end;)
        if (poll(&p, self->o.sigfd >= 0 ? 1 : 0, (int)(end - now) + 1) > 0)
            break;
}

int gpp_supervisor_run(gpp_supervisor_t *self)
{
    if (self->finished)
        return 0;
    for (;;) {
        if (self->local) {
            self->launch = gpp_launch_new();
            self->cc.launch = self->launch;
        }
        gpp_supervisor_attempt_t at = {
            .attempt = self->attempt, .cc = &self->cc, .job = self->job, .plan = self->plan};
        gpp_supervisor_outcome_t oc = {.status = 1, .failed_peer = -1, .reason = ""};
        int ran =
            self->o.run_fn ? self->o.run_fn(self->o.run_arg, &at, &oc) : s_run_coord(self, &oc);
        if (ran < 0)
            return oc.status;
        if (!s_again(self, &oc)) {
            gpp_notify_stopping();
            if (oc.status == 0)
                gpp_notify_status("job finished");
            else
                gpp_notify_status("job stopped: %s", oc.reason);
            s_linger(self, oc.status);
            return oc.status;
        }
        gpp_notify_status("restarting: agents died");
        if (s_restart(self, &oc) < 0)
            return 1;
        self->attempt++;
    }
}
