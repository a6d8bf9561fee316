/* test_pipeline: the schedule interpreter (agent/pipeline/gpp_pipeline.h) in
 * process, one stage on one rank (no communicator): it trains exactly as
 * the executor driven by hand (the same losses and checkpoint bytes),
 * reports per iteration, saves at the interval and resumes from it, stops
 * when the barrier says so or when aborted from another thread, and refuses
 * a bad configuration with a message naming the place. */
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt_set.h"
#include "agent/exec/gpp_exec.h"
#include "agent/pipeline/gpp_pipeline.h"
#include "tests/gpp_test.h"
#include "tests/gpp_fixtures.h"

#define S_SPEC "mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64,classes=8"
#define S_SEED 7
#define S_BATCH 8
#define S_MB 4
#define S_ITERS 4

/* A single-stage job over the whole model: two micro-batches 1F1B. */
typedef struct {
    gpp_pipeline_cfg_t cfg;
    gpp_action_t acts[6];
    int peers[6];
    int *ops;
    char dir[64];
    /* what the callbacks saw */
    int ready;
    int barriers;
    int release; /* barrier answer */
    int n_metrics;
    double loss[S_ITERS];
    int iteration[S_ITERS];
    int64_t samples;
} s_job_t;

static void s_on_ready(void *arg)
{
    ((s_job_t *)arg)->ready++;
}

static int s_barrier(void *arg, int id)
{
    s_job_t *j = arg;
    GPP_EXPECT(id == 0);
    j->barriers++;
    return j->release;
}

static void s_on_metrics(void *arg, const gpp_pipeline_metrics_t *m)
{
    s_job_t *j = arg;
    GPP_EXPECT(m->n_actions == 6 && m->has_loss && m->iteration_ms >= m->bubble_ms &&
               m->mem_high_water_bytes > 0);
    for (int i = 0; i < m->n_actions; i++)
        GPP_EXPECT(m->action_ms[i] >= 0);
    if (j->n_metrics < S_ITERS) {
        j->loss[j->n_metrics] = m->loss;
        j->iteration[j->n_metrics] = m->iteration;
    }
    j->n_metrics++;
    j->samples += m->samples;
}

static void s_job_init(s_job_t *j, int n_ops)
{
    memset(j, 0, sizeof *j);
    const gpp_act_type_t types[6] = {GPP_ACT_FWD, GPP_ACT_BWD,       GPP_ACT_FWD,
                                     GPP_ACT_BWD, GPP_ACT_ALLREDUCE, GPP_ACT_STEP};
    const int mbs[6] = {0, 0, 1, 1, -1, -1};
    for (int i = 0; i < 6; i++) {
        j->acts[i] = (gpp_action_t){
            .type = types[i], .mb = mbs[i], .peer_stage = -1, .peer_replica = -1, .tensor = -1};
        j->peers[i] = -1;
    }
    j->ops = calloc((size_t)n_ops, sizeof *j->ops);
    for (int i = 0; i < n_ops; i++)
        j->ops[i] = i;
    snprintf(j->dir, sizeof j->dir, "/tmp/gpp_test_pipeline_%d", (int)getpid());
    static const int dp0[1] = {0};
    j->cfg = (gpp_pipeline_cfg_t){.model = S_SPEC,
                                  .stage = 0,
                                  .replica = 0,
                                  .replicas = 1,
                                  .n_ops = n_ops,
                                  .ops = j->ops,
                                  .micro_batch = S_MB,
                                  .batch = S_BATCH,
                                  .n_actions = 6,
                                  .actions = j->acts,
                                  .peer_ranks = j->peers,
                                  .dp_ranks = dp0,
                                  .optim = {.kind = GPP_OPTIM_ADAMW,
                                            .lr = 1e-3f,
                                            .beta1 = 0.9f,
                                            .beta2 = 0.999f,
                                            .eps = 1e-8f,
                                            .weight_decay = 0.01f},
                                  .seed = S_SEED,
                                  .iterations = S_ITERS,
                                  .checkpoint_dir = j->dir,
                                  .checkpoint_interval = 2,
                                  .threads = 1,
                                  .world_size = 1,
                                  .rank = 0};
    j->release = 0;
}

static gpp_pipeline_callbacks_t s_cb(s_job_t *j)
{
    return (gpp_pipeline_callbacks_t){s_on_ready, s_barrier, s_on_metrics, j};
}

static int s_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void s_job_fini(s_job_t *j)
{
    nftw(j->dir, s_rm, 8, FTW_DEPTH | FTW_PHYS); /* the sets, plan.json, the dir */
    free(j->ops);
}

/* The same training with the executor driven by hand; returns the losses
 * and saves the checkpoint after `iters` iterations to path. */
static void s_reference(const gpp_optim_hp_t *hp, int iters, double *loss, const char *path)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, S_SPEC, S_SEED) < 0)
        return;
    gpp_err_t err = {{0}};
    gpp_exec_cfg_t ec = {.seed = S_SEED, .optim = *hp, .batch = S_BATCH};
    gpp_exec_t *ex = gpp_exec_new(f.g, f.g->n_ops, f.all, f.be, f.data, &ec, &err);
    GPP_EXPECT_MSG(ex, "%s", err.msg);
    for (int it = 0; ex && it < iters; it++) {
        for (int mb = 0; mb < S_BATCH / S_MB; mb++) {
            GPP_EXPECT(gpp_exec_begin(ex, mb, (int64_t)it * S_BATCH + mb * S_MB, S_MB, &err) == 0);
            GPP_EXPECT(gpp_exec_forward(ex, mb, &err) == 0);
            GPP_EXPECT(gpp_exec_backward(ex, mb, &err) == 0);
            gpp_exec_release(ex, mb);
        }
        GPP_EXPECT(gpp_exec_loss(ex, &loss[it], &err) == 0);
        GPP_EXPECT(gpp_exec_step(ex, &err) == 0);
    }
    if (ex)
        GPP_EXPECT_MSG(gpp_exec_ckpt_save(ex, path, &err) == 0, "%s", err.msg);
    gpp_exec_destroy(&ex);
    gpp_fixture_exec_close(&f);
}

static int s_n_ops(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, S_SPEC, 1) < 0)
        return 1;
    int n = f.g->n_ops;
    gpp_fixture_exec_close(&f);
    return n;
}

/* Trains, matches the hand-driven executor bit for bit (losses and the
 * checkpoint file), then resumes from the interval's checkpoint and
 * continues the same curve. */
static void t_trains_like_the_executor(void)
{
    s_job_t j;
    s_job_init(&j, s_n_ops());
    gpp_pipeline_callbacks_t cb = s_cb(&j);
    gpp_err_t err = {{0}};
    gpp_pipeline_t *p = gpp_pipeline_new(&j.cfg, &cb, &err);
    GPP_EXPECT_MSG(p, "%s", err.msg);
    if (!p) {
        s_job_fini(&j);
        return;
    }
    GPP_EXPECT_MSG(gpp_pipeline_run(p, &err) == 0, "%s", err.msg);
    gpp_pipeline_destroy(&p);
    GPP_EXPECT(p == NULL);
    GPP_EXPECT(j.ready == 1 && j.barriers == 1 && j.n_metrics == S_ITERS);
    GPP_EXPECT(j.samples == (int64_t)S_ITERS * S_BATCH);
    double ref[S_ITERS];
    char ref_path[128], path[128];
    snprintf(ref_path, sizeof ref_path, "%s.ref.ckpt", j.dir);
    gpp_ckpt_set_stage_path(path, sizeof path, j.dir, S_ITERS, 0);
    s_reference(&j.cfg.optim, S_ITERS, ref, ref_path);
    for (int i = 0; i < S_ITERS; i++) {
        GPP_EXPECT(j.iteration[i] == i);
        GPP_EXPECT_MSG(j.loss[i] == ref[i], "iteration %d: %.9g vs %.9g", i, j.loss[i], ref[i]);
        printf("  iteration %d loss %.6f (reference %.6f)\n", i, j.loss[i], ref[i]);
    }
    GPP_EXPECT(j.loss[S_ITERS - 1] < j.loss[0]);
    long a = 0, b = 0;
    unsigned char *x = gpp_fixture_slurp(path, &a), *y = gpp_fixture_slurp(ref_path, &b);
    GPP_EXPECT(x && y && a == b && a > 0 && memcmp(x, y, (size_t)a) == 0);
    free(x);
    free(y);

    /* resume: the interval's set (after iteration 2) holds the reference
     * after 2 iterations byte for byte; not loadable before it is committed
     * (the coordinator's part: here by hand, with a plan file) */
    s_reference(&j.cfg.optim, 2, ref, ref_path);
    gpp_ckpt_set_stage_path(path, sizeof path, j.dir, 2, 0);
    x = gpp_fixture_slurp(path, &a), y = gpp_fixture_slurp(ref_path, &b);
    GPP_EXPECT(x && y && a == b && a > 0 && memcmp(x, y, (size_t)a) == 0);
    free(x);
    free(y);
    s_job_t k;
    s_job_init(&k, j.cfg.n_ops);
    k.cfg.start_iteration = 2;
    cb = s_cb(&k);
    p = gpp_pipeline_new(&k.cfg, &cb, &err);
    GPP_EXPECT(p && gpp_pipeline_run(p, &err) < 0 && strstr(err.msg, "is incomplete"));
    gpp_pipeline_destroy(&p);
    char plan[160];
    snprintf(plan, sizeof plan, "%s/plan.json", j.dir);
    gpp_fixture_spit(plan, (const unsigned char *)"{}", 2);
    GPP_EXPECT_MSG(gpp_ckpt_set_commit(j.dir, 2, 1, 2, NULL, &err) == 0, "%s", err.msg);
    free(k.ops);
    s_job_init(&k, j.cfg.n_ops);
    k.cfg.start_iteration = 2;
    cb = s_cb(&k);
    p = gpp_pipeline_new(&k.cfg, &cb, &err);
    GPP_EXPECT_MSG(p && gpp_pipeline_run(p, &err) == 0, "%s", err.msg);
    gpp_pipeline_destroy(&p);
    GPP_EXPECT(k.n_metrics == S_ITERS - 2 && k.iteration[0] == 2);
    GPP_EXPECT_MSG(k.loss[0] == j.loss[2] && k.loss[1] == j.loss[3],
                   "resumed %.9g %.9g vs %.9g %.9g", k.loss[0], k.loss[1], j.loss[2], j.loss[3]);
    unlink(ref_path);
    s_job_fini(&k);
    s_job_fini(&j);
}

/* The start barrier answers "stopping": no iteration runs. */
static void t_stopped_at_the_barrier(void)
{
    s_job_t j;
    s_job_init(&j, s_n_ops());
    j.release = -1;
    j.cfg.checkpoint_dir = NULL;
    gpp_pipeline_callbacks_t cb = s_cb(&j);
    gpp_err_t err = {{0}};
    gpp_pipeline_t *p = gpp_pipeline_new(&j.cfg, &cb, &err);
    GPP_EXPECT(p && gpp_pipeline_run(p, &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "waiting for the start barrier: stopped before training"), "%s",
                   err.msg);
    GPP_EXPECT(j.ready == 1 && j.n_metrics == 0);
    gpp_pipeline_destroy(&p);
    s_job_fini(&j);
}

typedef struct {
    gpp_pipeline_t *p;
    atomic_int started; /* the barrier is waiting */
    atomic_int aborted; /* gpp_pipeline_abort has returned */
} s_aborter_t;

static void *s_abort_later(void *arg)
{
    s_aborter_t *a = arg;
    while (!atomic_load(&a->started))
        usleep(1000);
    usleep(20000);
    gpp_pipeline_abort(a->p, "test");
    atomic_store(&a->aborted, 1);
    return NULL;
}

static s_aborter_t *s_aborter;

/* A barrier that blocks until the pipeline is aborted (like the agent's
 * worker waiting on its pipe). */
static int s_barrier_blocks(void *arg, int id)
{
    (void)arg;
    (void)id;
    atomic_store(&s_aborter->started, 1);
    while (!atomic_load(&s_aborter->aborted))
        usleep(1000);
    return -1;
}

/* Aborted from another thread while blocked: run returns "aborted";
 * aborted before run: run refuses at once. */
static void t_abort_from_another_thread(void)
{
    s_job_t j;
    s_job_init(&j, s_n_ops());
    j.cfg.checkpoint_dir = NULL;
    gpp_pipeline_callbacks_t cb = {NULL, s_barrier_blocks, s_on_metrics, &j};
    gpp_err_t err = {{0}};
    s_aborter_t ab = {0};
    s_aborter = &ab;
    ab.p = gpp_pipeline_new(&j.cfg, &cb, &err);
    GPP_EXPECT(ab.p);
    if (ab.p) {
        pthread_t th;
        pthread_create(&th, NULL, s_abort_later, &ab);
        GPP_EXPECT(gpp_pipeline_run(ab.p, &err) < 0);
        GPP_EXPECT_MSG(strstr(err.msg, "aborted"), "%s", err.msg);
        pthread_join(th, NULL);
        gpp_pipeline_abort(ab.p, "twice"); /* idempotent */
        gpp_pipeline_destroy(&ab.p);
    }
    GPP_EXPECT(j.n_metrics == 0);

    cb = s_cb(&j);
    gpp_pipeline_t *p = gpp_pipeline_new(&j.cfg, &cb, &err);
    gpp_pipeline_abort(p, "early");
    GPP_EXPECT(gpp_pipeline_run(p, &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "aborted"), "%s", err.msg);
    gpp_pipeline_destroy(&p);
    gpp_pipeline_destroy(NULL);
    s_job_fini(&j);
}

typedef void (*s_mutate_fn)(s_job_t *j);
static void m_batch(s_job_t *j)
{
    j->cfg.batch = 6;
}
static void m_replica(s_job_t *j)
{
    j->cfg.replica = 1;
}
static void m_rank(s_job_t *j)
{
    j->cfg.rank = 1;
}
static void m_iters(s_job_t *j)
{
    j->cfg.start_iteration = 9;
}
static void m_threads(s_job_t *j)
{
    j->cfg.threads = 0;
}
static void m_act_type(s_job_t *j)
{
    j->acts[1].type = (gpp_act_type_t)42;
}
static void m_act_mb(s_job_t *j)
{
    j->acts[2].mb = 2;
}
static void m_peer(s_job_t *j)
{
    j->acts[0] = (gpp_action_t){.type = GPP_ACT_RECV_ACT, .mb = 0, .tensor = 1, .lo = 0, .hi = 4};
    j->peers[0] = 0;
}
/* comm_order naming a pass (action 1, a FWD) instead of the ALLREDUCE (action 4) */
static const int s_order_fwd[1] = {1};
static void m_order(s_job_t *j)
{
    j->cfg.comm_order = s_order_fwd;
    j->cfg.n_comm_order = 1;
}
static void m_op(s_job_t *j)
{
    j->ops[0] = 100000;
}
/* a receive on a two-rank job: resolved (and refused) before the rendezvous */
static void s_recv_from_rank1(s_job_t *j, int tensor, int64_t lo, int64_t hi)
{
    j->cfg.world_size = 2;
    j->acts[0] =
        (gpp_action_t){.type = GPP_ACT_RECV_ACT, .mb = 0, .tensor = tensor, .lo = lo, .hi = hi};
    j->peers[0] = 1;
}
static void m_tensor(s_job_t *j)
{
    s_recv_from_rank1(j, 100000, 0, 4);
}
static void m_samples(s_job_t *j)
{
    s_recv_from_rank1(j, 1, 2, 6);
}
static void m_model(s_job_t *j)
{
    j->cfg.model = "nosuchmodel:x=1";
}
static void m_ckpt_dir(s_job_t *j)
{
    j->cfg.checkpoint_dir = "/proc/gpp_cannot_mkdir";
}
static void m_resume_missing(s_job_t *j)
{
    j->cfg.start_iteration = 1;
}

/* Refusals: at gpp_pipeline_new for the configuration, at run for what
 * needs the model or the file system; each names the place. */
static void t_refuses_bad_config(void)
{
    const struct {
        s_mutate_fn fn;
        int at_run;
        const char *want;
    } cases[] = {
        {m_batch, 0, "micro-batch 4, batch 6"},
        {m_replica, 0, "replica 1 of 1"},
        {m_rank, 0, "rank 1 of 1"},
        {m_iters, 0, "iterations [9, 4)"},
        {m_threads, 0, "0 threads"},
        {m_act_type, 0, "action 1: unknown type 42"},
        {m_act_mb, 0, "action 2 (FWD): micro-batch 2 outside [0, 2)"},
        {m_peer, 0, "action 0 (RECV_ACT): peer rank 0 is not another rank of 1"},
        {m_order, 0,
         "comm_order is not every SEND, RECV and ALLREDUCE of the 6 actions once "
         "(1 entries for 1; entry 0)"},
        {m_op, 1, "building stage 0: ops[0] = 100000"},
        {m_tensor, 1, "building stage 0: action 0: tensor 100000 is not an op of"},
        {m_samples, 1, "action 0: samples [2, 6) outside this replica's [0, 4) of micro-batch 0"},
        {m_model, 1, "building stage 0"},
        {m_ckpt_dir, 1, "mkdir /proc/gpp_cannot_mkdir"},
        {m_resume_missing, 1, "set-0000000001 is incomplete"},
    };
    int n_ops = s_n_ops();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s_job_t j;
        s_job_init(&j, n_ops);
        cases[i].fn(&j);
        gpp_pipeline_callbacks_t cb = s_cb(&j);
        gpp_err_t err = {{0}};
        gpp_pipeline_t *p = gpp_pipeline_new(&j.cfg, &cb, &err);
        if (cases[i].at_run) {
            GPP_EXPECT(p != NULL);
            if (p)
                GPP_EXPECT(gpp_pipeline_run(p, &err) < 0);
        } else {
            GPP_EXPECT(p == NULL);
        }
        GPP_EXPECT_MSG(strstr(err.msg, cases[i].want), "case %zu: '%s' lacks '%s'", i, err.msg,
                       cases[i].want);
        GPP_EXPECT(j.n_metrics == 0);
        gpp_pipeline_destroy(&p);
        s_job_fini(&j);
    }
}

static const gpp_test_case_t cases[] = {
    {"trains like the executor, resumes", t_trains_like_the_executor},
    {"stopped at the start barrier", t_stopped_at_the_barrier},
    {"abort from another thread", t_abort_from_another_thread},
    {"refuses a bad configuration", t_refuses_bad_config},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
