/* test_fault_ckpt: checkpoint sets under faults, in one process and its
 * forked children (the multi-process job: fault_ckpt_kill.sh).
 *   - a writer SIGKILLed in the middle of a save (GPP_FAULT ckpt_kill)
 *     leaves the previous set the newest complete one, loadable and
 *     bit-identical to what was saved; its temp file is removed by
 *     gpp_ckpt_set_clean and nothing else;
 *   - a set without a manifest, with a missing stage file or with a stage
 *     file whose CRC differs from the manifest's is never picked; loading
 *     falls back to the newest complete set;
 *   - commit keeps the newest checkpoint_keep complete sets and prunes older
 *     ones, complete or not. */
#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_fault.h"
#include "common/gpp_fs.h"
#include "tests/gpp_test.h"
#include "tests/gpp_fixtures.h"

#define DLRM                                                                                       \
    "dlrm:dense_branches=1,sparse_branches=2,dense_in=8,hidden=16,dense_layers=1,rows=50,dim=4,"   \
    "bag=3,top_layers=1"
#define STAGES 2 /* the model split in two halves, one executor each */

typedef struct {
    gpp_fixture_exec_t f;
    gpp_exec_t *ex[STAGES];
    char dir[128];
} s_job_t;

static int s_open(s_job_t *j)
{
    memset(j, 0, sizeof *j);
    if (gpp_fixture_exec_open(&j->f, DLRM, 3) < 0)
        return -1;
    gpp_err_t err = {{0}};
    gpp_exec_cfg_t c = {.seed = 11, .batch = 8};
    c.optim = (gpp_optim_hp_t){.kind = GPP_OPTIM_ADAMW, .lr = 0.01f, .beta1 = 0.9f,
                               .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f};
    int half = j->f.g->n_ops / 2;
    /* stage 0: ops [0, half), stage 1: the rest (parameters only matter here) */
    j->ex[0] = gpp_exec_new(j->f.g, half, j->f.all, j->f.be, j->f.data, &c, &err);
    j->ex[1] = gpp_exec_new(j->f.g, j->f.g->n_ops - half, j->f.all + half, j->f.be, j->f.data, &c,
                            &err);
    GPP_EXPECT_MSG(j->ex[0] && j->ex[1], "%s", err.msg);
    snprintf(j->dir, sizeof j->dir, "/tmp/gpp_test_fault_ckpt_%d", (int)getpid());
    GPP_EXPECT(gpp_mkdirs(j->dir, 0700, &err) == 0);
    char plan[200];
    snprintf(plan, sizeof plan, "%s/plan.json", j->dir);
    gpp_fixture_spit(plan, (const unsigned char *)"{\"format\": \"test\"}", 18);
    return j->ex[0] && j->ex[1] ? 0 : -1;
}

static int s_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void s_close(s_job_t *j)
{
    for (int s = 0; s < STAGES; s++)
        gpp_exec_destroy(&j->ex[s]);
    gpp_fixture_exec_close(&j->f);
    nftw(j->dir, s_rm, 8, FTW_DEPTH | FTW_PHYS);
}

/* What the agents do at a checkpoint: every stage saves into set n; then
 * what the coordinator does once all reported: commit. */
static void s_save_set(s_job_t *j, int n, int keep)
{
    gpp_err_t err = {{0}};
    char path[300];
    gpp_ckpt_set_dir(path, sizeof path, j->dir, n);
    GPP_EXPECT(gpp_mkdirs(path, 0700, &err) == 0);
    for (int s = 0; s < STAGES; s++) {
        gpp_ckpt_set_stage_path(path, sizeof path, j->dir, n, s);
        GPP_EXPECT_MSG(gpp_exec_ckpt_save(j->ex[s], path, &err) == 0, "%s", err.msg);
    }
    GPP_EXPECT_MSG(gpp_ckpt_set_commit(j->dir, n, STAGES, keep, NULL, &err) == 0, "%s", err.msg);
}

/* Moves every stage on by one optimizer step (zero gradients: AdamW's
 * weight decay and the step count change the state, so sets differ). */
static void s_train(s_job_t *j)
{
    gpp_err_t err = {{0}};
    for (int s = 0; s < STAGES; s++)
        GPP_EXPECT_MSG(gpp_exec_step(j->ex[s], &err) == 0, "%s", err.msg);
}

static int s_count_tmp(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        n += strstr(e->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    return n;
}

static void t_kill_during_save(void)
{
    s_job_t j;
    if (s_open(&j) < 0) {
        s_close(&j);
        return;
    }
    gpp_err_t err = {{0}};
    s_train(&j);
    s_save_set(&j, 2, 2);
    char set2[300], set4[300], path[320];
    gpp_ckpt_set_dir(set2, sizeof set2, j.dir, 2);
    gpp_ckpt_set_dir(set4, sizeof set4, j.dir, 4);
    long len0 = 0;
    snprintf(path, sizeof path, "%s/stage0.ckpt", set2);
    unsigned char *saved0 = gpp_fixture_slurp(path, &len0);
    s_train(&j);
    /* a child saves set 4 and is killed in its first save */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        gpp_fault_arm("ckpt_kill", 0);
        s_save_set(&j, 4, 2); /* does not return */
        gpp_test_exit(3);
    }
    int st = 0;
    GPP_EXPECT(waitpid(pid, &st, 0) == pid);
    GPP_EXPECT_MSG(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %d", st);
    snprintf(path, sizeof path, "%s/%s", set4, GPP_CKPT_MANIFEST);
    GPP_EXPECT(access(path, F_OK) != 0);
    GPP_EXPECT(s_count_tmp(set4) == 1);
    GPP_EXPECT(gpp_ckpt_set_check(j.dir, 4, &err) < 0 && strstr(err.msg, "is incomplete"));
    GPP_EXPECT_MSG(gpp_ckpt_set_latest(j.dir, &err) == 2, "%s", err.msg);
    /* the start of the next job: only the temp file goes */
    GPP_EXPECT(gpp_ckpt_set_clean(j.dir, &err) == 1);
    GPP_EXPECT(s_count_tmp(set4) == 0);
    GPP_EXPECT(gpp_ckpt_set_check(j.dir, 2, &err) == STAGES);
    /* set 2 loads: saving the loaded state gives its file back byte for byte */
    snprintf(path, sizeof path, "%s/stage0.ckpt", set2);
    GPP_EXPECT_MSG(gpp_exec_ckpt_load(j.ex[0], path, &err) == 0, "%s", err.msg);
    char again[320];
    snprintf(again, sizeof again, "%s/again.ckpt", j.dir);
    GPP_EXPECT_MSG(gpp_exec_ckpt_save(j.ex[0], again, &err) == 0, "%s", err.msg);
    long len1 = 0;
    unsigned char *back = gpp_fixture_slurp(again, &len1);
    GPP_EXPECT(saved0 && back && len0 == len1 && memcmp(saved0, back, (size_t)len0) == 0);
    free(saved0);
    free(back);
    s_close(&j);
}

static void t_incomplete_and_damaged_sets(void)
{
    s_job_t j;
    if (s_open(&j) < 0) {
        s_close(&j);
        return;
    }
    gpp_err_t err = {{0}};
    s_train(&j);
    s_save_set(&j, 2, 10);
    s_train(&j);
    s_save_set(&j, 4, 10);
    GPP_EXPECT(gpp_ckpt_set_latest(j.dir, &err) == 4);
    /* a stage file of set 4 altered (its trailer): set 2 is the newest */
    char path[320];
    gpp_ckpt_set_stage_path(path, sizeof path, j.dir, 4, 1);
    long len = 0;
    unsigned char *b = gpp_fixture_slurp(path, &len);
    if (b && len > 4) {
        b[len - 1] ^= 0x40;
        gpp_fixture_spit(path, b, len);
    }
    free(b);
    GPP_EXPECT(gpp_ckpt_set_check(j.dir, 4, &err) < 0 && strstr(err.msg, "stage1.ckpt") &&
               strstr(err.msg, "damaged"));
    GPP_EXPECT(gpp_ckpt_set_latest(j.dir, &err) == 2);
    /* a byte inside a stage file's data flipped (size, trailer and manifest
       agree): the data CRC finds it, set 2 is the newest (issue 33, item 4) */
    s_save_set(&j, 4, 10);
    GPP_EXPECT(gpp_ckpt_set_latest(j.dir, &err) == 4);
    b = gpp_fixture_slurp(path, &len);
    if (b && len > 8) {
        b[len / 2] ^= 0x10;
        gpp_fixture_spit(path, b, len);
    }
    free(b);
    GPP_EXPECT(gpp_ckpt_set_check(j.dir, 4, &err) < 0 && strstr(err.msg, "stage1.ckpt") &&
               strstr(err.msg, "its data has CRC"));
    GPP_EXPECT(gpp_ckpt_set_pick(j.dir, 4, &err) < 0 && strstr(err.msg, "corrupted"));
    GPP_EXPECT(gpp_ckpt_set_latest(j.dir, &err) == 2);
    GPP_EXPECT(gpp_ckpt_set_pick(j.dir, 2, &err) == 2);
    /* a stage file missing: the commit fails and names it, the set stays incomplete */
    char set6[300];
    gpp_ckpt_set_dir(set6, sizeof set6, j.dir, 6);
    GPP_EXPECT(gpp_mkdirs(set6, 0700, &err) == 0);
    gpp_ckpt_set_stage_path(path, sizeof path, j.dir, 6, 0);
    GPP_EXPECT(gpp_exec_ckpt_save(j.ex[0], path, &err) == 0);
    GPP_EXPECT(gpp_ckpt_set_commit(j.dir, 6, STAGES, 10, NULL, &err) < 0 &&
               strstr(err.msg, "stage1.ckpt") && strstr(err.msg, "left incomplete"));
    GPP_EXPECT(gpp_ckpt_set_latest(j.dir, &err) == 2);
    /* a manifest naming a path outside the set is refused */
    snprintf(path, sizeof path, "%s/%s", set6, GPP_CKPT_MANIFEST);
    const char *evil = "{\"format\": \"gpp-ckpt-set/1\", \"iteration\": 6, \"plan\": {\"file\": "
                       "\"../plan.json\", \"bytes\": 1, \"crc32\": 1}, \"profile\": null, "
                       "\"stages\": [{\"stage\": 0, \"file\": \"stage0.ckpt\", \"bytes\": 1, "
                       "\"crc32\": 1}]}";
    gpp_fixture_spit(path, (const unsigned char *)evil, (long)strlen(evil));
    GPP_EXPECT(gpp_ckpt_set_check(j.dir, 6, &err) < 0 && strstr(err.msg, "plan: expected"));
    GPP_EXPECT(gpp_ckpt_set_latest(j.dir, &err) == 2);
    s_close(&j);
}

static void t_keep_last_k(void)
{
    s_job_t j;
    if (s_open(&j) < 0) {
        s_close(&j);
        return;
    }
    gpp_err_t err = {{0}};
    char set[300];
    /* an incomplete leftover older than what is kept goes too */
    gpp_ckpt_set_dir(set, sizeof set, j.dir, 1);
    GPP_EXPECT(gpp_mkdirs(set, 0700, &err) == 0);
    for (int n = 2; n <= 8; n += 2) {
        s_train(&j);
        s_save_set(&j, n, 2);
    }
    for (int n = 1; n <= 8; n++) {
        gpp_ckpt_set_dir(set, sizeof set, j.dir, n);
        int want = n == 6 || n == 8;
        GPP_EXPECT_MSG((access(set, F_OK) == 0) == want, "set %d %s", n,
                       want ? "missing" : "not pruned");
    }
    GPP_EXPECT(gpp_ckpt_set_latest(j.dir, &err) == 8);
    s_close(&j);
}

static const gpp_test_case_t cases[] = {{"kill_during_save", t_kill_during_save},
                                        {"incomplete_and_damaged_sets",
                                         t_incomplete_and_damaged_sets},
                                        {"keep_last_k", t_keep_last_k},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
