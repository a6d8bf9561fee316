/* test_limits: numbers from outside that the coordinator checks before any
 * agent starts. job.iterations sizes its per-iteration progress tables: a
 * count whose tables cannot fit the machine's memory is refused by
 * gpp_job_new with a message naming the file, the key and the fix (it used
 * to abort the coordinator after the agents were forked); a count that fits
 * passes. The largest batch gives a finite profile request. */
#include <string.h>
#include <unistd.h>

#include "config/gpp_config.h"
#include "coordinator/job/gpp_job.h"
#include "coordinator/gpp_progress.h"
#include "tests/gpp_test.h"

static gpp_job_t *s_job_of(int batch, int iterations, const char *plan, gpp_err_t *err)
{
    char text[512];
    snprintf(text, sizeof text,
             "[cluster]\ndevice = \"cpu\"\n[[nodes]]\nhost = \"h\"\nslots = 2\n"
             "[job]\nmodel = \"mmt:branches=2,layers=1,hidden=64,heads=4,seq=16\"\n"
             "batch = %d\niterations = %d\nlaunch = \"external\"\n",
             batch, iterations);
    gpp_config_t cfg;
    GPP_EXPECT_MSG(gpp_config_load_string(&cfg, text, "limits.toml", err) == 0, "%s", err->msg);
    gpp_job_t *job = gpp_job_new(&cfg, plan, 0, 0, NULL, err);
    gpp_config_release(&cfg);
    return job;
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

static const gpp_test_case_t cases[] = {{"iterations_beyond_memory", t_iterations_beyond_memory},
                                        {"iterations_that_fit", t_iterations_that_fit},
                                        {"batch_int_max_profile_request",
                                         t_batch_int_max_profile_request},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
