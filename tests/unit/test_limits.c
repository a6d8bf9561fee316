/* test_limits: numbers from outside that the coordinator checks before any
 * agent starts. job.iterations sizes its per-iteration progress tables: a
 * count whose tables cannot fit the machine's memory is refused by
 * gpp_job_new with a message naming the file, the key and the fix (it used
 * to abort the coordinator after the agents were forked); a count that fits
 * passes. The largest batch gives a finite profile request. A zero-bubble
 * job.schedule, which the agents do not run, is refused naming the key and
 * the ways out. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/gpp_config.h"
#include "coordinator/job/gpp_job.h"
#include "coordinator/gpp_progress.h"
#include "model/gpp_graph.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan_io.h"
#include "planner/gpp_sched.h"
#include "tests/gpp_test.h"

static gpp_job_t *s_job_sched(int batch, int iterations, const char *plan, const char *schedule,
                              gpp_err_t *err)
{
    char text[512];
    snprintf(text, sizeof text,
             "[cluster]\ndevice = \"cpu\"\n[[nodes]]\nhost = \"h\"\nslots = 2\n"
             "[job]\nmodel = \"mmt:branches=2,layers=1,hidden=64,heads=4,seq=16\"\n"
             "batch = %d\niterations = %d\nlaunch = \"external\"\nschedule = \"%s\"\n",
             batch, iterations, schedule);
    gpp_config_t cfg;
    GPP_EXPECT_MSG(gpp_config_load_string(&cfg, text, "limits.toml", err) == 0, "%s", err->msg);
    gpp_job_t *job = gpp_job_new(&cfg, plan, 0, 0, NULL, err);
    gpp_config_release(&cfg);
    return job;
}

static gpp_job_t *s_job_of(int batch, int iterations, const char *plan, gpp_err_t *err)
{
    return s_job_sched(batch, iterations, plan, "auto", err);
}

static gpp_job_t *s_job(int iterations, gpp_err_t *err)
{
    return s_job_of(8, iterations, "gpp", err);
}

static void t_iterations_beyond_memory(void)
{
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    /* the largest count the cluster file accepts needs more than any
     * machine this runs on has (checked, not assumed) */
    GPP_EXPECT(gpp_progress_table_bytes(2, 2147483647) > have);
    gpp_err_t err = {{0}};
    gpp_job_t *job = s_job(2147483647, &err);
    GPP_EXPECT(job == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "limits.toml: job.iterations = 2147483647") &&
                       strstr(err.msg, "lower job.iterations"),
                   "%s", err.msg);
    gpp_job_destroy(&job);
}

static void t_iterations_that_fit(void)
{
    gpp_err_t err = {{0}};
    gpp_job_t *job = s_job(1000, &err);
    GPP_EXPECT_MSG(job != NULL, "%s", err.msg);
    gpp_job_destroy(&job);
}

/* --plan auto with the largest batch: the profile request's micro-batches
 * are the powers of two up to 2^24, the largest a profile table holds
 * (computing them used to overflow and loop forever before any agent
 * started). */
static void t_batch_int_max_profile_request(void)
{
    gpp_err_t err = {{0}};
    gpp_job_t *job = s_job_of(2147483647, 2, "auto", &err);
    GPP_EXPECT_MSG(job != NULL, "%s", err.msg);
    const Gpp__ProfileRequest *r = job ? gpp_job_profile_request(job) : NULL;
    GPP_EXPECT(r && r->n_micro_batches == 25 && r->micro_batches[0] == 1 &&
               r->micro_batches[24] == 1 << 24);
    gpp_job_destroy(&job);
}

static void t_schedule(void)
{
    gpp_err_t err = {{0}};
    gpp_job_t *job = s_job_sched(8, 2, "gpp", "1f1b", &err);
    GPP_EXPECT_MSG(job != NULL, "%s", err.msg);
    gpp_job_destroy(&job);
    job = s_job_sched(8, 2, "gpp", "zb-h1", &err);
    GPP_EXPECT(job == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "limits.toml: job.schedule = \"zb-h1\"") &&
                       strstr(err.msg, "use schedule = \"1f1b\" or \"auto\""),
                   "%s", err.msg);
    gpp_job_destroy(&job);
}

/* A plan file with W passes (gpp-plan/2): refused at once, naming the file,
 * its kind and the way out. */
static void t_schedule_plan_file(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=2,layers=1,hidden=64,heads=4,seq=16", &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    gpp_cluster_t cl;
    GPP_EXPECT(gpp_cluster_init(&cl, "cpu", 2, 2, &err) == 0);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, 8);
    o.schedules = 1u << GPP_SCHED_ZB_H1;
    int64_t min_mem = 0;
    gpp_plan_t *p = gpp_part_run(g, cost, &o, &min_mem, &err);
    GPP_EXPECT_MSG(p && gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    char dir[] = "/tmp/gpp-limits-zb-XXXXXX", path[64];
    GPP_EXPECT(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/plan.json", dir);
    GPP_EXPECT_MSG(p && gpp_plan_write_json(p, path, &err) == 0, "%s", err.msg);
    gpp_job_t *job = s_job_of(8, 2, path, &err);
    GPP_EXPECT(job == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "schedule_kind \"zb-h1\"") && strstr(err.msg, path) &&
                       strstr(err.msg, "gpp-plan --schedule 1f1b"),
                   "%s", err.msg);
    gpp_job_destroy(&job);
    unlink(path);
    rmdir(dir);
    gpp_plan_destroy(&p);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {{"schedule", t_schedule},
                                        {"schedule_plan_file", t_schedule_plan_file},
                                        {"iterations_beyond_memory", t_iterations_beyond_memory},
                                        {"iterations_that_fit", t_iterations_that_fit},
                                        {"batch_int_max_profile_request",
                                         t_batch_int_max_profile_request},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
