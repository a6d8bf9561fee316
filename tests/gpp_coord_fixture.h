/* gpp_coord_fixture: a coordinator (gpp_coord) running on its own thread,
 * for tests that talk to it as agents or raw peers (test_coord,
 * test_curve). Header-only, like gpp_fixtures.h.
 *
 *   gpp_fixture_coord_t run;
 *   gpp_fixture_coord_init(&run, n);   // n agents "h":0..n-1 on 127.0.0.1:*
 *   run.cfg.barriers = 2;              // adjust cfg as the test needs
 *   int port = gpp_fixture_coord_start(&run);   // -1 when gpp_coord_new failed
 *   ...
 *   gpp_fixture_coord_join(&run);      // then run.rc, reason, dropped, ... */
#ifndef GPP_COORD_FIXTURE_H
#define GPP_COORD_FIXTURE_H

#include <assert.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coordinator/gpp_coord.h"

#define GPP_FIXTURE_COORD_MAX 4

typedef struct {
    gpp_coord_cfg_t cfg;
    const char *hosts[GPP_FIXTURE_COORD_MAX];
    int slots[GPP_FIXTURE_COORD_MAX];
    sem_t up;
    int port;                 /* the bound port, -1 when the coordinator failed */
    int rc;                   /* gpp_coord_run's */
    char reason[GPP_ERR_LEN]; /* gpp_coord_reason once it ran */
    uint64_t dropped;         /* invalid frames it dropped */
    int barriers_timed;       /* gpp_coord_barrier_times */
    pthread_t th;
} gpp_fixture_coord_t;

static inline void *gpp_fixture_coord_thread(void *arg)
{
    gpp_fixture_coord_t *r = arg;
    gpp_err_t err = {{0}};
    gpp_coord_t *c = gpp_coord_new(&r->cfg, &err);
    if (!c) {
        fprintf(stderr, "gpp_coord_new: %s\n", err.msg);
        r->port = -1;
        sem_post(&r->up);
        return NULL;
    }
    r->port = gpp_coord_port(c);
    sem_post(&r->up);
    r->rc = gpp_coord_run(c);
    snprintf(r->reason, sizeof r->reason, "%s", gpp_coord_reason(c));
    r->dropped = gpp_coord_dropped(c);
    const double *ms;
    r->barriers_timed = gpp_coord_barrier_times(c, &ms);
    gpp_coord_destroy(&c);
    return NULL;
}

/* A control-only job of n agents on host "h", slots 0..n-1, bound to
 * tcp://127.0.0.1:* with 50 ms heartbeats and no signal fd. */
static inline void gpp_fixture_coord_init(gpp_fixture_coord_t *r, int n)
{
    assert(n > 0 && n <= GPP_FIXTURE_COORD_MAX);
    memset(r, 0, sizeof *r);
    for (int i = 0; i < n; i++) {
        r->hosts[i] = "h";
        r->slots[i] = i;
    }
    r->cfg.endpoint = "tcp://127.0.0.1:*";
    r->cfg.n_agents = n;
    r->cfg.hosts = r->hosts;
    r->cfg.slots = r->slots;
    r->cfg.heartbeat_ms = 50;
    r->cfg.sigfd = -1;
}

/* Starts the thread; returns once the coordinator is bound (its port) or
 * failed (-1). */
static inline int gpp_fixture_coord_start(gpp_fixture_coord_t *r)
{
    sem_init(&r->up, 0, 0);
    pthread_create(&r->th, NULL, gpp_fixture_coord_thread, r);
    sem_wait(&r->up);
    return r->port;
}

static inline void gpp_fixture_coord_join(gpp_fixture_coord_t *r)
{
    pthread_join(r->th, NULL);
    sem_destroy(&r->up);
}

#endif
