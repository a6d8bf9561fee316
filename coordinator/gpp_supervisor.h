/* gpp_supervisor: runs one gpp-coordinator job to its end and gives the
 * program's exit status. It owns what outlives a restart (the control
 * plane's keys, gpp-top's run directory, the /metrics server, the slot
 * list) and runs attempts: a coordinator loop (gpp_coord) with its local
 * agents (gpp_launch) and plan (gpp_job). When agents die it starts the job
 * again from the newest complete checkpoint set, at most max_restarts times
 * per slot; with elastic a slot past that (or, external, not back within
 * the rejoin timeout) is dropped and the job re-planned on the rest.
 *
 * Exit status: 0 finished; 1 stopped (the reason logged last); 2 the
 * command line's or cluster file's to fix; 128+N after signal N.
 *
 * Ownership: gpp_supervisor_new takes the configuration (*cfg is moved in
 * and zeroed) and returns an object the caller owns. */
#ifndef GPP_SUPERVISOR_H
#define GPP_SUPERVISOR_H

#include <stdio.h>

#include "config/gpp_config.h"
#include "coordinator/gpp_coord.h"
#include "coordinator/job/gpp_job.h"

typedef struct gpp_supervisor_s gpp_supervisor_t;

/* What one attempt starts with. */
typedef struct {
    int attempt;               /* 0, then one more per restart */
    const gpp_coord_cfg_t *cc; /* the coordinator's: agents, endpoint, timeouts, the job's
                                  callbacks (plan_arg is the supervisor) */
    gpp_job_t *job;            /* NULL: a control-only job */
    const char *plan;          /* --plan of this attempt (a plan file turns into the
                                  planner once elastic dropped a slot) */
} gpp_supervisor_attempt_t;

/* What an attempt's loop ended with. */
typedef struct {
    int status;          /* exit status: 0 finished, 1 stopped, 2 a bad job, 128+N */
    int agent_failed;    /* gpp_coord_agent_failed */
    int failed_peer;     /* gpp_coord_failed_peer, -1 none */
    int port;            /* the port the ROUTER was bound to */
    const char *reason;  /* gpp_coord_reason; borrowed until the next attempt */
    gpp_registry_t *reg; /* the agents as the loop left them; borrowed likewise */
} gpp_supervisor_outcome_t;

/* Runs one attempt: 0 with *out filled once the loop ran; -1 when it could
 * not start (out->status: 2 for an endpoint the configuration must change,
 * else 1; the reason logged). */
typedef int(gpp_supervisor_run_fn)(void *arg, const gpp_supervisor_attempt_t *at,
                                   gpp_supervisor_outcome_t *out);

typedef struct {
    const char *plan;       /* auto | gpp | spp | FILE.json */
    const char *endpoint;   /* bind here; NULL: [coordinator] endpoint */
    const char *agent_path; /* gpp-agent of a local launch; NULL: $GPP_AGENT, beside this
                               program, ../agent/ from it, the build's */
    int control_only;       /* no training: agents run `barriers` barriers */
    int barriers;
    int start_timeout_ms;          /* every agent registered within this, > 0 */
    int external;                  /* never launch agents, even with launch = "local" */
    int reprofile;                 /* --plan auto: measure a new profile, not the kept one */
    int resume;                    /* 0 fresh, 1 --resume, 2 --resume=auto */
    int resume_from;               /* --resume-from: that set; 0 the newest that verifies */
    int replan;                    /* --resume with another plan than the set's: re-shard it */
    int max_restarts;              /* restarts per slot after its agent died */
    int elastic;                   /* drop slots past max_restarts (or not back) and re-plan */
    int rejoin_timeout_ms;         /* external, after a stop: every agent back within this */
    const char *run_dir;           /* gpp-top's run directory; NULL: a local launch's default */
    int insecure;                  /* external agents without key_dir: plaintext */
    const char *trace;             /* Chrome trace of one measured iteration, or NULL */
    int trace_iteration;           /* -1: the last */
    int sigfd;                     /* gpp_sigfd, or -1 */
    FILE *out;                     /* plan, progress and summary lines */
    gpp_supervisor_run_fn *run_fn; /* NULL: the coordinator (tests give a fake) */
    void *run_arg;
} gpp_supervisor_opts_t;

/* Sets up what outlives restarts and the first attempt's job (planned now
 * unless it waits for the agents). NULL when it cannot start: the reason
 * logged, *status the exit status (2: the command line's or cluster
 * file's to fix). */
gpp_supervisor_t *gpp_supervisor_new(const gpp_supervisor_opts_t *opts, gpp_config_t *cfg,
                                     int *status);
/* Runs attempts until the job finishes or stops for good: the exit status. */
int gpp_supervisor_run(gpp_supervisor_t *self);
/* Reaps local agents, closes the run directory, frees everything. */
void gpp_supervisor_destroy(gpp_supervisor_t **self_p);

#endif
