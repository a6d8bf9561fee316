/* test_supervisor: gpp-coordinator's supervision (gpp_supervisor) driven
 * through its API, a fake in place of each attempt's coordinator loop and
 * agents: the fake builds the registry an attempt would end with (who was
 * killed, who never came back, which peer a broken connection named) and,
 * where a test needs it, plans through the job's callbacks and saves and
 * commits a checkpoint set as the agents and the coordinator would.
 * Checked: restart accounting per slot (local: the killed, not the peers
 * that failed on it; external: the silent agent, the peer's named rank,
 * else every slot), --max-restarts, --elastic dropping slots (and a plan
 * file giving way to the planner), the rejoin timeout, the resume point of
 * a restart (the newest complete set), the pinned port of an external
 * restart, and the exit status of every way a job ends or cannot start
 * (the last one on a real coordinator whose port is taken). */
#include <czmq.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_fs.h"
#include "coordinator/gpp_supervisor.h"
#include "tests/gpp_test.h"
#include "tests/gpp_fixtures.h"

#define S_MODEL "mmt:branches=2,layers=1,hidden=64,heads=4,seq=16"
/* tests/data/plans/mmt2_branches.json's model and batch (4 devices) */
#define S_MMT "mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=128"
#define S_MAX_ATTEMPTS 8

/* What one attempt's loop ends with, as the test scripts it. */
typedef struct {
    int status;       /* the coordinator's exit status */
    int killed;       /* rank ended by SIGKILL (local launch), -1 none */
    int dead;         /* rank found dead without a signal (silent, or failed on a peer), -1 */
    int agent_failed; /* an agent stopped the job */
    int failed_peer;  /* the rank a peer's ERROR_COMM named, -1 */
    int missing;      /* rank that never registered, -1 */
    int plan;         /* plan through the job's callback (the planning thread's work) */
    int save_set;     /* > 0: the agents save set N and the coordinator commits it */
} s_script_t;

/* What the supervisor started each attempt with. */
typedef struct {
    int n_agents;
    int slots[4];
    int job_restarts;
    int agent_restarts[4];
    char endpoint[128];
    int start_timeout_ms;
    char plan[256];
    int has_job;
    int start_iteration; /* the layout plan_fn handed out (script.plan) */
    int iterations;
    int n_stages;
} s_seen_t;

typedef struct {
    s_script_t script[S_MAX_ATTEMPTS];
    s_seen_t seen[S_MAX_ATTEMPTS];
    int attempts;
    gpp_registry_t *reg; /* the last attempt's */
    const char *ckpt_dir;
} s_fake_t;

/* The agents' part of a checkpoint: every stage saves the model's state
 * after `steps` optimizer steps into set n (the whole model in each file:
 * a set's files are keyed by op); then the coordinator commits it through
 * the job's iteration callback. */
static void s_save_set(s_fake_t *f, const gpp_coord_cfg_t *cc, int n, int n_stages)
{
    gpp_fixture_exec_t fx;
    if (gpp_fixture_exec_open(&fx, S_MODEL, 1) < 0)
        return;
    gpp_err_t err = {{0}};
    gpp_exec_cfg_t c = {.seed = 1, .batch = 8};
    c.optim = (gpp_optim_hp_t){
        .kind = GPP_OPTIM_ADAMW, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    gpp_exec_t *ex = gpp_exec_new(fx.g, fx.g->n_ops, fx.all, fx.be, fx.data, &c, &err);
    GPP_EXPECT_MSG(ex != NULL, "%s", err.msg);
    char path[512];
    gpp_ckpt_set_dir(path, sizeof path, f->ckpt_dir, n);
    GPP_EXPECT(gpp_mkdirs(path, 0700, &err) == 0);
    for (int i = 0; ex && i < n; i++)
        GPP_EXPECT_MSG(gpp_exec_step(ex, &err) == 0, "%s", err.msg);
    for (int s = 0; ex && s < n_stages; s++) {
        gpp_ckpt_set_stage_path(path, sizeof path, f->ckpt_dir, n, s);
        GPP_EXPECT_MSG(gpp_exec_ckpt_save(ex, path, &err) == 0, "%s", err.msg);
    }
    GPP_EXPECT_MSG(cc->iteration_fn(cc->plan_arg, n, &err) == 0, "%s", err.msg);
    gpp_exec_destroy(&ex);
    gpp_fixture_exec_close(&fx);
}

static int s_fake_run(void *arg, const gpp_supervisor_attempt_t *at, gpp_supervisor_outcome_t *out)
{
    s_fake_t *f = arg;
    const gpp_coord_cfg_t *cc = at->cc;
    int i = at->attempt;
    GPP_EXPECT_MSG(i == f->attempts && i < S_MAX_ATTEMPTS, "attempt %d after %d", i, f->attempts);
    if (i >= S_MAX_ATTEMPTS)
        return -1;
    f->attempts++;
    s_seen_t *w = &f->seen[i];
    w->n_agents = cc->n_agents;
    for (int r = 0; r < cc->n_agents && r < 4; r++) {
        w->slots[r] = cc->slots[r];
        w->agent_restarts[r] = cc->agent_restarts[r];
    }
    w->job_restarts = cc->job_restarts;
    snprintf(w->endpoint, sizeof w->endpoint, "%s", cc->endpoint);
    w->start_timeout_ms = cc->start_timeout_ms;
    snprintf(w->plan, sizeof w->plan, "%s", at->plan);
    w->has_job = at->job != NULL;
    w->start_iteration = -1;

    const s_script_t *s = &f->script[i];
    gpp_registry_destroy(&f->reg);
    f->reg = gpp_registry_new(cc->n_agents, cc->hosts, cc->slots);
    for (int r = 0; r < cc->n_agents; r++) {
        gpp_agent_t *a = gpp_registry_agent(f->reg, r);
        a->state = r == s->missing ? GPP_AGENT_EXPECTED : GPP_AGENT_EXITED;
        a->gpu = -1;
        a->mem_bytes = a->mem_total_bytes = (int64_t)8 << 30;
    }
    if (s->plan) {
        gpp_coord_job_t job = {.rdv_endpoint = "tcp://127.0.0.1:1",
                               .rdv_token = "0123456789abcdef0123456789abcdef"};
        gpp_err_t err = {{0}};
        int planned = cc->plan_fn(cc->plan_arg, f->reg, NULL, &job, &err) == 0;
        GPP_EXPECT_MSG(planned, "%s", err.msg);
        w->start_iteration = job.layout.start_iteration;
        w->iterations = job.layout.iterations;
        w->n_stages = job.layout.n_stages;
        if (planned && s->save_set > 0)
            s_save_set(f, cc, s->save_set, job.layout.n_stages);
    }
    if (s->killed >= 0) {
        gpp_registry_agent(f->reg, s->killed)->exit_signal = 9;
        gpp_registry_agent(f->reg, s->killed)->state = GPP_AGENT_DEAD;
    }
    if (s->dead >= 0)
        gpp_registry_agent(f->reg, s->dead)->state = GPP_AGENT_DEAD;
    *out = (gpp_supervisor_outcome_t){.status = s->status,
                                      .agent_failed = s->agent_failed,
                                      .failed_peer = s->failed_peer,
                                      .port = 40000 + i,
                                      .reason = s->status ? "scripted stop" : "",
                                      .reg = f->reg};
    return 0;
}

/* An attempt that ends the way `status` says, nobody dead. */
static s_script_t s_ends(int status)
{
    return (s_script_t){
        .status = status, .killed = -1, .dead = -1, .failed_peer = -1, .missing = -1};
}

static s_script_t s_killed(int rank)
{
    s_script_t s = s_ends(1);
    s.killed = rank;
    return s;
}

static char *s_tmpdir(void)
{
    char *d = strdup("/tmp/gpp_test_supervisor.XXXXXX");
    GPP_EXPECT(mkdtemp(d) != NULL);
    return d;
}

static int s_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* A job of `model` at `batch` on `slots` slots of host "h"; with ckpt,
 * checkpoints every 2 iterations in a temp directory. */
typedef struct {
    char *dir; /* temp: the run directory and checkpoints go below it */
    char run_dir[512];
    char ckpt[512];
    gpp_config_t cfg;
    gpp_supervisor_opts_t o;
    s_fake_t fake;
    char *out;
    size_t out_len;
} s_case_t;

static int s_case(s_case_t *c, int slots, const char *launch, int ckpt, const char *model,
                  int batch)
{
    memset(c, 0, sizeof *c);
    c->dir = s_tmpdir();
    snprintf(c->run_dir, sizeof c->run_dir, "%s/run", c->dir);
    snprintf(c->ckpt, sizeof c->ckpt, "%s/ckpt", c->dir);
    char text[2048];
    snprintf(text, sizeof text,
             "[coordinator]\nendpoint = \"tcp://127.0.0.1:*\"\n"
             "[cluster]\ndevice = \"cpu\"\n[[nodes]]\nhost = \"h\"\nslots = %d\n"
             "[job]\nmodel = \"%s\"\nbatch = %d\niterations = 4\noptimizer = \"adamw\"\n"
             "launch = \"%s\"\n",
             slots, model, batch, launch);
    if (ckpt)
        snprintf(text + strlen(text), sizeof text - strlen(text),
                 "checkpoint_interval = 2\ncheckpoint_dir = \"%s\"\n", c->ckpt);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_config_load_string(&c->cfg, text, "test.toml", &err) == 0, "%s", err.msg);
    if (err.msg[0])
        return 0;
    c->o = (gpp_supervisor_opts_t){.plan = "gpp",
                                   .barriers = 1,
                                   .start_timeout_ms = 60000,
                                   .rejoin_timeout_ms = 5000,
                                   .insecure = 1,
                                   .run_dir = c->run_dir,
                                   .trace_iteration = -1,
                                   .sigfd = -1,
                                   .run_fn = s_fake_run,
                                   .run_arg = &c->fake};
    c->o.out = open_memstream(&c->out, &c->out_len);
    c->fake.ckpt_dir = c->ckpt;
    for (int i = 0; i < S_MAX_ATTEMPTS; i++)
        c->fake.script[i] = s_ends(0);
    return 1;
}

/* Runs the case: the supervisor's exit status (its new's when it cannot start). */
static int s_run(s_case_t *c)
{
    int status;
    gpp_supervisor_t *sv = gpp_supervisor_new(&c->o, &c->cfg, &status);
    if (sv)
        status = gpp_supervisor_run(sv);
    gpp_supervisor_destroy(&sv);
    fflush(c->o.out);
    return status;
}

static void s_case_end(s_case_t *c)
{
    fclose(c->o.out);
    free(c->out);
    gpp_registry_destroy(&c->fake.reg);
    gpp_config_release(&c->cfg);
    nftw(c->dir, s_rm, 8, FTW_DEPTH | FTW_PHYS);
    free(c->dir);
}

/* Local launch: the killed agent's slot counts a restart, not the peer that
 * failed on the broken connection; a second death of that slot after
 * --max-restarts 1 ends the job (exit 1). */
static void t_local_restart_accounting(void)
{
    s_case_t c;
    if (!s_case(&c, 2, "local", 0, S_MODEL, 8))
        return;
    c.o.max_restarts = 1;
    c.fake.script[0] = s_killed(1);
    c.fake.script[0].dead = 0; /* failed on its peer, no signal */
    c.fake.script[1] = s_killed(1);
    int rc = s_run(&c);
    GPP_EXPECT_MSG(rc == 1 && c.fake.attempts == 2, "exit %d after %d attempts", rc,
                   c.fake.attempts);
    s_seen_t *w = &c.fake.seen[1];
    GPP_EXPECT_MSG(w->job_restarts == 1 && w->agent_restarts[0] == 0 && w->agent_restarts[1] == 1,
                   "restarts: job %d, slots %d %d", w->job_restarts, w->agent_restarts[0],
                   w->agent_restarts[1]);
    GPP_EXPECT_MSG(strstr(c.out, "restart: agents died; starting them again from iteration 0") &&
                       !strstr(strstr(c.out, "starting them again") + 1, "starting them again"),
                   "%s", c.out);
    s_case_end(&c);
}

/* A restart resumes from the newest complete set: the first attempt's
 * agents commit set 2 of 4 and one is killed; the second attempt's job
 * starts at iteration 2 and trains the last 2. */
static void t_restart_resumes_newest_set(void)
{
    s_case_t c;
    if (!s_case(&c, 2, "local", 1, S_MODEL, 8))
        return;
    c.o.max_restarts = 1;
    c.fake.script[0] = s_killed(0);
    c.fake.script[0].plan = 1;
    c.fake.script[0].save_set = 2;
    c.fake.script[1].plan = 1;
    int rc = s_run(&c);
    GPP_EXPECT_MSG(rc == 0 && c.fake.attempts == 2, "exit %d after %d attempts", rc,
                   c.fake.attempts);
    GPP_EXPECT_MSG(c.fake.seen[0].start_iteration == 0 && c.fake.seen[0].iterations == 4,
                   "first attempt: from %d, %d iterations", c.fake.seen[0].start_iteration,
                   c.fake.seen[0].iterations);
    GPP_EXPECT_MSG(c.fake.seen[1].start_iteration == 2 && c.fake.seen[1].iterations == 2,
                   "restart: from %d, %d iterations", c.fake.seen[1].start_iteration,
                   c.fake.seen[1].iterations);
    GPP_EXPECT_MSG(strstr(c.out, "restart: agents died; starting them again from checkpoint set 2"),
                   "%s", c.out);
    s_case_end(&c);
}

/* --elastic, local: a slot killed after its --max-restarts 0 is dropped; the
 * 4-device plan file gives way to the planner on the 3 that remain. */
static void t_elastic_drops_slot(void)
{
    s_case_t c;
    if (!s_case(&c, 4, "local", 0, S_MMT, 32))
        return;
    c.o.plan = "tests/data/plans/mmt2_branches.json";
    c.o.elastic = 1;
    c.fake.script[0] = s_killed(2);
    int rc = s_run(&c);
    GPP_EXPECT_MSG(rc == 0 && c.fake.attempts == 2, "exit %d after %d attempts", rc,
                   c.fake.attempts);
    s_seen_t *w = &c.fake.seen[1];
    GPP_EXPECT_MSG(w->n_agents == 3 && w->slots[0] == 0 && w->slots[1] == 1 && w->slots[2] == 3,
                   "%d agents: slots %d %d %d", w->n_agents, w->slots[0], w->slots[1], w->slots[2]);
    GPP_EXPECT_MSG(strcmp(c.fake.seen[0].plan, c.o.plan) == 0 && strcmp(w->plan, "gpp") == 0,
                   "plans %s, then %s", c.fake.seen[0].plan, w->plan);
    GPP_EXPECT_MSG(strstr(c.out, "elastic: 1 slot dropped; re-planning (--plan gpp) on the 3 "
                                 "remaining devices from iteration 0") &&
                       strstr(c.out, "elastic: planned for 3 devices in"),
                   "%s", c.out);
    s_case_end(&c);
}

/* External agents: the rank a peer's broken connection named counts the
 * restart; the next bind keeps the port the kernel picked and waits the
 * rejoin timeout; then an error nobody can be blamed for counts for every
 * slot, and the named one is past --max-restarts 1: exit 1. */
static void t_external_blame(void)
{
    s_case_t c;
    if (!s_case(&c, 3, "external", 0, S_MODEL, 8))
        return;
    c.o.max_restarts = 1;
    c.fake.script[0] = s_ends(1);
    c.fake.script[0].agent_failed = 1;
    c.fake.script[0].failed_peer = 2;
    c.fake.script[1] = s_ends(1);
    c.fake.script[1].agent_failed = 1;
    int rc = s_run(&c);
    GPP_EXPECT_MSG(rc == 1 && c.fake.attempts == 2, "exit %d after %d attempts", rc,
                   c.fake.attempts);
    s_seen_t *w = &c.fake.seen[1];
    GPP_EXPECT_MSG(
        w->agent_restarts[0] == 0 && w->agent_restarts[1] == 0 && w->agent_restarts[2] == 1,
        "restarts %d %d %d", w->agent_restarts[0], w->agent_restarts[1], w->agent_restarts[2]);
    GPP_EXPECT_MSG(strcmp(c.fake.seen[0].endpoint, "tcp://127.0.0.1:*") == 0 &&
                       strcmp(w->endpoint, "tcp://127.0.0.1:40000") == 0,
                   "endpoints %s, then %s", c.fake.seen[0].endpoint, w->endpoint);
    GPP_EXPECT_MSG(c.fake.seen[0].start_timeout_ms == 60000 && w->start_timeout_ms == 5000,
                   "start timeouts %d, then %d", c.fake.seen[0].start_timeout_ms,
                   w->start_timeout_ms);
    GPP_EXPECT_MSG(strstr(c.out, "restart: agents died; waiting up to 5.0 s for all 3 to "
                                 "register again, then resuming from iteration 0"),
                   "%s", c.out);
    s_case_end(&c);
}

/* External, --elastic: a slot whose agent is not back within the rejoin
 * timeout is dropped without counting a restart for the others. */
static void t_rejoin_elastic(void)
{
    s_case_t c;
    if (!s_case(&c, 3, "external", 0, S_MODEL, 8))
        return;
    c.o.max_restarts = 1;
    c.o.elastic = 1;
    c.fake.script[0] = s_ends(1);
    c.fake.script[0].agent_failed = 1;
    c.fake.script[0].failed_peer = 1;
    c.fake.script[1] = s_ends(1);
    c.fake.script[1].missing = 1;
    int rc = s_run(&c);
    GPP_EXPECT_MSG(rc == 0 && c.fake.attempts == 3, "exit %d after %d attempts", rc,
                   c.fake.attempts);
    s_seen_t *w = &c.fake.seen[2];
    GPP_EXPECT_MSG(w->n_agents == 2 && w->slots[0] == 0 && w->slots[1] == 2 &&
                       w->agent_restarts[0] == 0 && w->agent_restarts[1] == 0 &&
                       w->job_restarts == 2,
                   "%d agents, slots %d %d, restarts %d %d, job %d", w->n_agents, w->slots[0],
                   w->slots[1], w->agent_restarts[0], w->agent_restarts[1], w->job_restarts);
    GPP_EXPECT_MSG(c.fake.seen[1].agent_restarts[1] == 1, "rank 1 restarts %d",
                   c.fake.seen[1].agent_restarts[1]);
    GPP_EXPECT_MSG(strstr(c.out, "elastic: 1 slot dropped; re-planning (--plan gpp) on the 2 "
                                 "remaining devices from iteration 0"),
                   "%s", c.out);
    s_case_end(&c);
}

/* The exit status of a job that ends: finished 0, a signal 128+N, a bad job
 * 2 and a stop no agent's death caused 1, none restarted although restarts
 * are left; a control-only job is never restarted. */
static void t_exit_status(void)
{
    const struct {
        s_script_t script;
        int control_only, want;
    } cases[] = {{s_ends(0), 0, 0}, {s_ends(130), 0, 130}, {s_ends(143), 0, 143},
                 {s_ends(2), 0, 2}, {s_ends(1), 0, 1},     {s_killed(0), 1, 1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        s_case_t c;
        if (!s_case(&c, 2, "local", 0, S_MODEL, 8))
            return;
        c.o.max_restarts = 3;
        c.o.control_only = cases[k].control_only;
        c.fake.script[0] = cases[k].script;
        int rc = s_run(&c);
        GPP_EXPECT_MSG(rc == cases[k].want && c.fake.attempts == 1,
                       "case %zu: exit %d after %d attempts, want %d after 1", k, rc,
                       c.fake.attempts, cases[k].want);
        GPP_EXPECT_MSG(c.fake.seen[0].has_job == !cases[k].control_only, "case %zu: job %d", k,
                       c.fake.seen[0].has_job);
        s_case_end(&c);
    }
}

/* What cannot start is the command line's or cluster file's to fix: exit
 * 2, no attempt made. */
static void t_refused_at_start(void)
{
    s_case_t c;
    /* external agents without keys, plaintext not allowed */
    if (s_case(&c, 2, "external", 0, S_MODEL, 8)) {
        c.o.insecure = 0;
        GPP_EXPECT(s_run(&c) == 2 && c.fake.attempts == 0);
        s_case_end(&c);
    }
    /* a --run-dir that is a file */
    if (s_case(&c, 2, "local", 0, S_MODEL, 8)) {
        FILE *f = fopen(c.run_dir, "w");
        if (f)
            fclose(f);
        GPP_EXPECT(s_run(&c) == 2 && c.fake.attempts == 0);
        s_case_end(&c);
    }
    /* a model that does not build */
    if (s_case(&c, 2, "local", 0, "mmt:branches=0", 8)) {
        GPP_EXPECT(s_run(&c) == 2 && c.fake.attempts == 0);
        s_case_end(&c);
    }
    /* --resume without a checkpoint directory */
    if (s_case(&c, 2, "local", 0, S_MODEL, 8)) {
        c.o.resume = 1;
        GPP_EXPECT(s_run(&c) == 2 && c.fake.attempts == 0);
        s_case_end(&c);
    }
}

/* The real attempt on a port another socket holds: exit 2 (the cluster
 * file's endpoint to change), with nothing forked (external agents). */
static void t_port_in_use(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    GPP_EXPECT(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 1) == 0 &&
               getsockname(fd, (struct sockaddr *)&a, &al) == 0);
    s_case_t c;
    if (s_case(&c, 2, "external", 0, S_MODEL, 8)) {
        char ep[64];
        snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
        c.o.endpoint = ep;
        c.o.control_only = 1;
        c.o.run_fn = NULL;
        int rc = s_run(&c);
        GPP_EXPECT_MSG(rc == 2, "exit %d", rc);
        s_case_end(&c);
    }
    close(fd);
}

static const gpp_test_case_t cases[] = {
    {"local_restart_accounting", t_local_restart_accounting},
    {"restart_resumes_newest_set", t_restart_resumes_newest_set},
    {"elastic_drops_slot", t_elastic_drops_slot},
    {"external_blame", t_external_blame},
    {"rejoin_elastic", t_rejoin_elastic},
    {"exit_status", t_exit_status},
    {"refused_at_start", t_refused_at_start},
    {"port_in_use", t_port_in_use},
    {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
