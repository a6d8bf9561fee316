/* gpp_expo: see gpp_expo.h. */
#include "coordinator/gpp_expo.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_version.h"

static void s_put(gpp_expo_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_put(gpp_expo_t *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = t->cap - t->len;
        int w = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? room : 0, fmt, ap);
        va_end(ap);
        if (w < 0)
            return;
        if (t->buf && (size_t)w < room) {
            t->len += (size_t)w;
            return;
        }
        t->cap = (t->cap ? 2 * t->cap : 4096) + (size_t)w;
        t->buf = gpp_xrealloc(t->buf, t->cap);
        if (t->len == 0)
            t->buf[0] = 0;
    }
}

void gpp_expo_release(gpp_expo_t *t)
{
    free(t->buf);
    memset(t, 0, sizeof *t);
}

void gpp_expo_family(gpp_expo_t *t, const char *name, const char *type, const char *help)
{
    s_put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, double quote and newline escaped. */
static void s_put_label_value(gpp_expo_t *t, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            s_put(t, "\\%c", *v);
        else if (*v == '\n')
            s_put(t, "\\n");
        else
            s_put(t, "%c", *v);
    }
}

void gpp_expo_sample(gpp_expo_t *t, const char *name, double v, ...)
{
    s_put(t, "%s", name);
    va_list ap;
    va_start(ap, v);
    const char *k;
    int n = 0;
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *val = va_arg(ap, const char *);
        s_put(t, "%s%s=\"", n++ ? "," : "{", k);
        s_put_label_value(t, val ? val : "");
        s_put(t, "\"");
    }
    va_end(ap);
    if (n)
        s_put(t, "}");
    if (isnan(v))
        s_put(t, " NaN\n");
    else if (isinf(v))
        s_put(t, " %sInf\n", v > 0 ? "+" : "-");
    else
        s_put(t, " %.17g\n", v);
}

/* Seconds of compute, communication and idle of rank r's report: actions
 * by type from its assignment. */
static void s_split(const Gpp__Assignment *as, const gpp_progress_rank_t *pr, double *compute_s,
                    double *comm_s, double *idle_s)
{
    double comp = 0, comm = 0;
    int n = pr->n_action_ms < (int)as->n_actions ? pr->n_action_ms : (int)as->n_actions;
    for (int i = 0; i < n; i++) {
        switch (as->actions[i]->type) {
        case GPP__ACTION_TYPE__ACT_FWD:
        case GPP__ACTION_TYPE__ACT_BWD:
        case GPP__ACTION_TYPE__ACT_BWD_INPUT:
        case GPP__ACTION_TYPE__ACT_BWD_WEIGHT:
        case GPP__ACTION_TYPE__ACT_STEP:
            comp += pr->action_ms[i];
            break;
        case GPP__ACTION_TYPE__ACT_SEND_ACT:
        case GPP__ACTION_TYPE__ACT_SEND_GRAD:
        case GPP__ACTION_TYPE__ACT_ALLREDUCE:
            comm += pr->action_ms[i];
            break;
        default: /* receives: the wait is in the bubble */
            break;
        }
    }
    *compute_s = comp / 1000.0;
    *comm_s = comm / 1000.0;
    *idle_s = pr->bubble_ms / 1000.0;
}

static const char *const s_agent_state[] = {"expected", "alive", "dead", "exited"};

void gpp_expo_job(gpp_expo_t *t, const gpp_expo_job_t *v)
{
    gpp_expo_family(t, "gpp_build_info", "gauge",
                    "The coordinator's build: version and git commit.");
    gpp_expo_sample(t, "gpp_build_info", 1, "version", gpp_version(), "commit", gpp_git_commit(),
                    NULL);
    gpp_expo_family(t, "gpp_coordinator_start_time_seconds", "gauge",
                    "When the coordinator started, Unix time; a change means it restarted.");
    gpp_expo_sample(t, "gpp_coordinator_start_time_seconds", v->start_time_s, NULL);
    gpp_expo_family(t, "gpp_job_restarts_total", "counter",
                    "Times the job was started again from its newest checkpoint set after "
                    "agents died (--max-restarts).");
    gpp_expo_sample(t, "gpp_job_restarts_total", v->job_restarts, NULL);
    gpp_expo_family(t, "gpp_job_state", "gauge",
                    "1 for the job's current state, 0 for the others.");
    for (int i = 0; i < v->n_states; i++)
        gpp_expo_sample(t, "gpp_job_state", strcmp(v->state, v->state_names[i]) == 0, "state",
                        v->state_names[i], NULL);
    gpp_expo_family(t, "gpp_job_stop_info", "gauge",
                    "1, with the reason, once the job stopped before it finished (state "
                    "stopped); no sample otherwise.");
    if (v->stop_reason && v->stop_reason[0])
        gpp_expo_sample(t, "gpp_job_stop_info", 1, "reason", v->stop_reason, NULL);

    /* agents */
    int n = gpp_registry_size(v->reg);
    const gpp_progress_layout_t *l = v->job ? &v->job->layout : NULL;
    const gpp_progress_t *pg = v->progress;
    int last = pg ? gpp_progress_done(pg) - 1 : -1;
    gpp_expo_family(t, "gpp_agents", "gauge", "Agents of the cluster file, by registry state.");
    for (int s = 0; s < 4; s++)
        gpp_expo_sample(t, "gpp_agents", gpp_registry_count(v->reg, (gpp_agent_state_t)s), "state",
                        s_agent_state[s], NULL);
    static const char *const fam[][3] = {
        {"gpp_agent_up", "gauge",
         "1 while the agent is registered and heard from; device is cpu:SLOT or cuda:GPU and "
         "device_name the GPU's name (\"cpu\" for CPU agents) once registered."},
        {"gpp_agent_state", "gauge",
         "1 for the agent's registry state (expected: not registered yet; alive; dead: it died "
         "or went silent; exited: told to go, or gave up on a peer that went), 0 for the "
         "others."},
        {"gpp_agent_heartbeat_age_seconds", "gauge",
         "Time since the agent's last valid message (registered agents)."},
        {"gpp_agent_memory_limit_bytes", "gauge",
         "Device memory the agent reported at registration."},
        {"gpp_agent_memory_high_water_bytes", "gauge",
         "The agent's memory high-water mark in the last complete iteration."},
        {"gpp_agent_compute_seconds", "gauge",
         "Forward, backward and step time of the agent in the last complete iteration."},
        {"gpp_agent_comm_seconds", "gauge",
         "Send and all-reduce time of the agent in the last complete iteration."},
        {"gpp_agent_idle_seconds", "gauge",
         "Time the agent waited (bubble) in the last complete iteration."},
        {"gpp_agent_restarts_total", "counter",
         "Times the agent of this rank died and the job was restarted (--max-restarts)."},
    };
    enum { F_UP, F_STATE, F_AGE, F_LIMIT, F_MEM, F_COMP, F_COMM, F_IDLE, F_RESTARTS, F_N };
    int n_stages = l ? l->n_stages : 0;
    double *st_sum = gpp_xcalloc((size_t)(n_stages ? n_stages : 1) * 3, sizeof *st_sum);
    int *st_n = gpp_xcalloc((size_t)(n_stages ? n_stages : 1), sizeof *st_n);
    for (int f = 0; f < F_N; f++) {
        gpp_expo_family(t, fam[f][0], fam[f][1], fam[f][2]);
        for (int r = 0; r < n; r++) {
            gpp_agent_t *a = gpp_registry_agent(v->reg, r);
            char rank[16], slot[16], stage[16];
            snprintf(rank, sizeof rank, "%d", r);
            snprintf(slot, sizeof slot, "%d", a->slot);
            int s = l && r < l->n_agents ? l->stage_of_rank[r] : -1;
            snprintf(stage, sizeof stage, "%d", s);
            int registered = a->state != GPP_AGENT_EXPECTED;
            gpp_progress_rank_t pr;
            int have = s >= 0 && pg && gpp_progress_rank(pg, last, r, &pr) == 0;
            double comp = 0, comm = 0, idle = 0;
            if (have && f >= F_COMP && f <= F_IDLE)
                s_split(v->job->assign[r], &pr, &comp, &comm, &idle);
            switch (f) {
            case F_UP: {
                char device[32] = "";
                int cuda = a->backend == GPP__BACKEND__BACKEND_CUDA;
                if (registered)
                    snprintf(device, sizeof device, "%s:%d", cuda ? "cuda" : "cpu",
                             cuda ? a->gpu : a->slot);
                gpp_expo_sample(t, fam[f][0], a->state == GPP_AGENT_ALIVE, "rank", rank, "host",
                                a->host, "slot", slot, "device", device, "device_name",
                                registered ? a->device_name : "", NULL);
                break;
            }
            case F_STATE:
                for (int k = 0; k < 4; k++)
                    gpp_expo_sample(t, fam[f][0], (int)a->state == k, "rank", rank, "host", a->host,
                                    "slot", slot, "state", s_agent_state[k], NULL);
                break;
            case F_AGE:
                if (registered)
                    gpp_expo_sample(t, fam[f][0], (v->now_ms - a->last_seen_ms) / 1000.0, "rank",
                                    rank, "host", a->host, "slot", slot, NULL);
                break;
            case F_RESTARTS:
                gpp_expo_sample(t, fam[f][0], v->agent_restarts ? v->agent_restarts[r] : 0, "rank",
                                rank, "host", a->host, "slot", slot, NULL);
                break;
            case F_LIMIT:
                if (registered)
                    gpp_expo_sample(t, fam[f][0], (double)a->mem_bytes, "rank", rank, "host",
                                    a->host, "slot", slot, NULL);
                break;
            default:
                if (!have)
                    break;
                gpp_expo_sample(t, fam[f][0],
                                f == F_MEM    ? (double)pr.mem_bytes
                                : f == F_COMP ? comp
                                : f == F_COMM ? comm
                                              : idle,
                                "rank", rank, "host", a->host, "slot", slot, "stage", stage, NULL);
                if (f == F_IDLE) { /* the last pass: sum the stage's replicas */
                    s_split(v->job->assign[r], &pr, &comp, &comm, &idle);
                    st_sum[3 * s] += comp;
                    st_sum[3 * s + 1] += comm;
                    st_sum[3 * s + 2] += idle;
                    st_n[s]++;
                }
                break;
            }
        }
    }

    /* stages: mean over replicas */
    static const char *const sfam[][2] = {
        {"gpp_stage_compute_seconds", "Forward, backward and step time of the last complete "
                                      "iteration, mean over the stage's replicas."},
        {"gpp_stage_comm_seconds", "Send and all-reduce time of the last complete iteration, "
                                   "mean over the stage's replicas."},
        {"gpp_stage_idle_seconds", "Idle (bubble) time of the last complete iteration, mean "
                                   "over the stage's replicas."},
    };
    for (int f = 0; f < 3; f++) {
        gpp_expo_family(t, sfam[f][0], "gauge", sfam[f][1]);
        for (int s = 0; s < n_stages; s++) {
            if (!st_n[s])
                continue;
            char stage[16];
            snprintf(stage, sizeof stage, "%d", s);
            gpp_expo_sample(t, sfam[f][0], st_sum[3 * s + f] / st_n[s], "stage", stage, NULL);
        }
    }
    free(st_sum);
    free(st_n);
    /* a stage's device memory: the planner's prediction and the same
       quantity measured (the backend's peak), like with like */
    static const char *const mfam[][2] = {
        {"gpp_stage_memory_predicted_bytes",
         "The stage's peak device memory as the planner's memory model predicts it for its "
         "schedule, with the backend's own buffers."},
        {"gpp_stage_memory_peak_bytes",
         "The stage's measured peak device memory (the backend's high-water mark), highest over "
         "its replicas."},
    };
    for (int f = 0; f < 2; f++) {
        gpp_expo_family(t, mfam[f][0], "gauge", mfam[f][1]);
        for (int s = 0; pg && s < n_stages; s++) {
            int64_t b = f ? gpp_progress_stage_mem(pg, s) : gpp_progress_stage_mem_predicted(pg, s);
            char stage[16];
            snprintf(stage, sizeof stage, "%d", s);
            if (b > 0)
                gpp_expo_sample(t, mfam[f][0], (double)b, "stage", stage, NULL);
        }
    }

    /* the job */
    /* counted from the job's iteration 0: a job resumed from checkpoint
       set N (--resume) starts at N */
    int start = l ? l->start_iteration : 0;
    gpp_expo_family(t, "gpp_iterations_planned", "gauge", "Iterations the job runs.");
    if (l)
        gpp_expo_sample(t, "gpp_iterations_planned", start + l->iterations, NULL);
    gpp_expo_family(t, "gpp_iterations_completed_total", "counter",
                    "Iterations every agent has reported (with those before a resume).");
    gpp_expo_sample(t, "gpp_iterations_completed_total", start + last + 1, NULL);
    gpp_expo_family(t, "gpp_samples_total", "counter", "Samples trained in complete iterations.");
    gpp_expo_sample(t, "gpp_samples_total", l ? (double)(last + 1) * l->batch : 0, NULL);
    if (last >= 0) {
        double it_ms = gpp_progress_iteration_ms(pg, last);
        gpp_expo_family(t, "gpp_iteration_seconds", "gauge",
                        "Time of the last complete iteration (the slowest agent's).");
        gpp_expo_sample(t, "gpp_iteration_seconds", it_ms / 1000.0, NULL);
        gpp_expo_family(t, "gpp_samples_per_second", "gauge",
                        "Mini-batch over the last complete iteration's time.");
        gpp_expo_sample(t, "gpp_samples_per_second", it_ms > 0 ? l->batch * 1000.0 / it_ms : 0,
                        NULL);
        double loss = gpp_progress_loss(pg, last);
        if (!isnan(loss)) {
            gpp_expo_family(t, "gpp_loss", "gauge",
                            "Training loss of the last complete iteration.");
            gpp_expo_sample(t, "gpp_loss", loss, NULL);
        }
    }
    gpp_expo_family(t, "gpp_control_messages_dropped_total", "counter",
                    "Control-plane messages the coordinator dropped as invalid.");
    gpp_expo_sample(t, "gpp_control_messages_dropped_total", (double)v->dropped, NULL);
}

void gpp_expo_schedule(gpp_expo_t *t, const gpp_expo_job_t *v)
{
    const gpp_progress_t *pg = v->progress;
    int last = pg ? gpp_progress_done(pg) - 1 : -1;
    s_put(t, "# gpp-schedule/1 iteration %d\n", last);
    if (last < 0 || !v->job)
        return;
    static const char *const code[] = {
        [GPP__ACTION_TYPE__ACT_FWD] = "F",        [GPP__ACTION_TYPE__ACT_BWD] = "B",
        [GPP__ACTION_TYPE__ACT_SEND_ACT] = "SA",  [GPP__ACTION_TYPE__ACT_RECV_ACT] = "RA",
        [GPP__ACTION_TYPE__ACT_SEND_GRAD] = "SG", [GPP__ACTION_TYPE__ACT_RECV_GRAD] = "RG",
        [GPP__ACTION_TYPE__ACT_ALLREDUCE] = "AR", [GPP__ACTION_TYPE__ACT_STEP] = "ST",
        [GPP__ACTION_TYPE__ACT_BWD_INPUT] = "B",  [GPP__ACTION_TYPE__ACT_BWD_WEIGHT] = "W"};
    const gpp_progress_layout_t *l = &v->job->layout;
    for (int r = 0; r < l->n_agents; r++) {
        gpp_progress_rank_t pr;
        const Gpp__Assignment *as = v->job->assign[r];
        if (!as || gpp_progress_rank(pg, last, r, &pr) < 0 || !pr.n_action_ms)
            continue;
        s_put(t, "%d %d %d %.4f:", r, l->stage_of_rank[r], l->replica_of_rank[r], pr.iteration_ms);
        int n = pr.n_action_ms < (int)as->n_actions ? pr.n_action_ms : (int)as->n_actions;
        for (int i = 0; i < n; i++) {
            const Gpp__Action *a = as->actions[i];
            int known = a->type >= 0 && a->type < (int)(sizeof code / sizeof *code);
            if (a->type == GPP__ACTION_TYPE__ACT_ALLREDUCE || a->type == GPP__ACTION_TYPE__ACT_STEP)
                s_put(t, " %s %.4f", code[a->type], pr.action_ms[i]);
            else
                s_put(t, " %s%d %.4f", known ? code[a->type] : "?", a->mb, pr.action_ms[i]);
        }
        s_put(t, "\n");
    }
}
