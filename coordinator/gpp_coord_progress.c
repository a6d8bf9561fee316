/* gpp_coord_progress: the coordinator's progress lines while a phase has
 * nothing else to print (gpp_coord_progress_tick, on the heartbeat timer). */
#include <stdio.h>

#include "coordinator/gpp_coord_imp.h"

/* Long phases (waiting, profiling, planning, bring-up) say where they are
 * this often; the heartbeat timer checks, so the gap between two lines is
 * at most S_PROGRESS_MS + heartbeat_ms: 2 s at the default 500 ms, the
 * most silence docs/operations.md promises. */
#define S_PROGRESS_MS 1500.0
#define S_SLOW_ITER_MS 2000.0 /* training: an iteration this long gets progress lines */

/* Training: an iteration running past S_SLOW_ITER_MS gets a line per
 * stage every S_PROGRESS_MS: whether each agent finished it and when it
 * was last heard from, so that a slow or stuck stage shows before the
 * iteration ends (or the heartbeat timeout calls it silent). */
static void s_training_progress(gpp_coord_t *self, double now)
{
    int done = self->progress ? gpp_progress_done(self->progress) : 0;
    if (done != self->progress_iters || self->progress_iter_ms == 0) {
        self->progress_iters = done;
        self->progress_iter_ms = now;
        return;
    }
    if (now - self->progress_iter_ms < S_SLOW_ITER_MS ||
        now - self->progress_line_ms < S_PROGRESS_MS)
        return;
    self->progress_line_ms = now;
    const gpp_progress_layout_t *l = &self->job.layout;
    gpp_info("coordinator: iteration %d/%d running for %.1f s", l->start_iteration + done + 1,
             l->start_iteration + l->iterations, (now - self->progress_iter_ms) / 1000.0);
    for (int st = 0; st < l->n_stages; st++) {
        char list[1024];
        size_t off = 0;
        list[0] = 0;
        for (int r = 0, n = gpp_registry_size(self->reg); r < n && off < sizeof list; r++) {
            const gpp_agent_t *a = gpp_registry_agent(self->reg, r);
            if (l->stage_of_rank[r] == st)
                off +=
                    (size_t)snprintf(list + off, sizeof list - off, "%s%s:%d %s (heard %.1f s ago)",
                                     off ? ", " : "", a->host, a->slot,
                                     a->state != GPP_AGENT_ALIVE ? "gone"
                                     : a->iteration + 1 > done   ? "finished it"
                                                                 : "working on it",
                                     (now - a->last_seen_ms) / 1000.0);
        }
        gpp_info("coordinator:   stage %d: %s", st, list);
    }
}

/* A progress line every S_PROGRESS_MS while a phase that has nothing else
 * to print goes on: who is still missing, what is being measured, how long
 * planning has run (the search logs its own progress too). */
void gpp_coord_progress_tick(gpp_coord_t *self, double now)
{
    if (self->state != self->progress_state || self->progress_phase_ms == 0) {
        self->progress_state = self->state;
        self->progress_phase_ms = self->progress_line_ms =
            self->state == S_WAITING ? self->start_ms : now;
        return;
    }
    if (self->state == S_TRAINING) { /* every tick: when did the count last move */
        s_training_progress(self, now);
        return;
    }
    if (now - self->progress_line_ms < S_PROGRESS_MS)
        return;
    self->progress_line_ms = now;
    double secs = (now - self->progress_phase_ms) / 1000.0;
    int n = gpp_registry_size(self->reg);
    char list[1024];
    switch (self->state) {
    case S_WAITING: {
        gpp_registry_list(self->reg, GPP_AGENT_EXPECTED, 16, list, sizeof list);
        gpp_info("coordinator: waiting for agents: %d of %d registered after %.1f s (start "
                 "timeout %.0f s); missing %s",
                 n - gpp_registry_count(self->reg, GPP_AGENT_EXPECTED), n, secs,
                 self->cfg.start_timeout_ms / 1000.0, list);
        break;
    }
    case S_PROFILING: {
        const Gpp__ProfileRequest *pr = self->cfg.profile_req;
        const gpp_agent_t *a = gpp_registry_agent(self->reg, 0);
        gpp_info("coordinator: profiling on %s:%d: %.1f s so far (%zu micro-batch sizes up to "
                 "%d, %d timed repetitions each)",
                 a->host, a->slot, secs, pr->n_micro_batches,
                 pr->n_micro_batches ? pr->micro_batches[pr->n_micro_batches - 1] : 0,
                 pr->iterations);
        break;
    }
    case S_PLANNING:
        gpp_info("coordinator: planning: %.1f s so far", secs);
        break;
    case S_ASSIGNING:
    case S_RENDEZVOUS: {
        /* the agents not yet ready (assigning) or not yet in barrier 0 */
        size_t off = 0;
        int missing = 0;
        list[0] = 0;
        for (int r = 0; r < n; r++) {
            gpp_agent_t *a = gpp_registry_agent(self->reg, r);
            int waiting =
                self->in_job[r] && (self->state == S_ASSIGNING ? !a->ready : a->barrier != 0);
            if (!waiting)
                continue;
            if (++missing <= 16 && off < sizeof list)
                off += (size_t)snprintf(list + off, sizeof list - off, "%s%s:%d",
                                        missing > 1 ? ", " : "", a->host, a->slot);
        }
        if (missing > 16 && off < sizeof list)
            snprintf(list + off, sizeof list - off, " and %d more", missing - 16);
        gpp_info("coordinator: %s: %.1f s, waiting for %d of %d agents: %s",
                 self->state == S_ASSIGNING ? "agents building their stages and communicators"
                                            : "entering the first barrier",
                 secs, missing, self->n_in_job, list);
        break;
    }
    default:
        break;
    }
}
