/* test_observe: what the coordinator reports while it works — the
 * partitioner's progress hook (gpp_part_opts_t.on_candidate), the
 * Prometheus text writer (gpp_expo) and the /metrics server (gpp_http). */
#include <math.h>
#include <stdlib.h>

#include "coordinator/gpp_expo.h"
#include "coordinator/gpp_http.h"

#include "model/gpp_graph.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_part.h"
#include "tests/gpp_test.h"

typedef struct {
    int calls, bad_b, worse;
} s_seen_t;

static void s_on_candidate(void *arg, int micro_batch, int depth, double est_ms, double best_ms)
{
    s_seen_t *s = arg;
    s->calls++;
    if (micro_batch < 0 || (micro_batch && 32 % micro_batch) || depth < 1 || !(est_ms > 0))
        s->bad_b++;
    if (!(best_ms <= est_ms)) /* the best of the pass includes this plan */
        s->worse++;
}

/* The hook sees every plan the search finds with a best-so-far no worse
 * than it, and it changes nothing: the same plan with and without it. */
static void t_part_progress_hook(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build("mmt:branches=2,layers=2,hidden=64,heads=4,seq=16", &err);
    GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    if (!g)
        return;
    gpp_cluster_t cl;
    gpp_cluster_init(&cl, "v100-16g", 4, 4, &err);
    gpp_cost_t *cost = gpp_cost_new(g, &cl);
    gpp_part_opts_t o;
    gpp_part_opts_default(&o, 32);
    gpp_plan_t *plain = gpp_part_run(g, cost, &o, NULL, &err);
    s_seen_t seen = {0};
    o.on_candidate = s_on_candidate;
    o.on_candidate_arg = &seen;
    gpp_plan_t *hooked = gpp_part_run(g, cost, &o, NULL, &err);
    GPP_EXPECT(plain && hooked);
    GPP_EXPECT_MSG(seen.calls >= 2, "%d calls", seen.calls);
    GPP_EXPECT(seen.bad_b == 0);
    GPP_EXPECT_MSG(seen.worse == 0, "best so far above the plan just found %d times", seen.worse);
    if (plain && hooked) {
        GPP_EXPECT(plain->n_stages == hooked->n_stages && plain->micro_batch == hooked->micro_batch);
        GPP_EXPECT(plain->bottleneck_tps_ms == hooked->bottleneck_tps_ms);
        GPP_EXPECT(plain->iteration_ms == hooked->iteration_ms);
    }
    gpp_plan_destroy(&plain);
    gpp_plan_destroy(&hooked);
    gpp_cost_destroy(&cost);
    gpp_graph_destroy(&g);
}

/* Label values escaped, special floats spelled as Prometheus reads them. */
static void t_expo_text(void)
{
    gpp_expo_t t = {0};
    gpp_expo_family(&t, "gpp_x_seconds", "gauge", "An x.");
    gpp_expo_sample(&t, "gpp_x_seconds", 0.5, NULL);
    gpp_expo_sample(&t, "gpp_x_seconds", NAN, "host", "a\"b\\c\nd", "stage", "1", NULL);
    gpp_expo_sample(&t, "gpp_x_seconds", INFINITY, "rank", "0", NULL);
    gpp_expo_sample(&t, "gpp_x_seconds", -INFINITY, NULL);
    const char *want = "# HELP gpp_x_seconds An x.\n# TYPE gpp_x_seconds gauge\n"
                       "gpp_x_seconds 0.5\n"
                       "gpp_x_seconds{host=\"a\\\"b\\\\c\\nd\",stage=\"1\"} NaN\n"
                       "gpp_x_seconds{rank=\"0\"} +Inf\n"
                       "gpp_x_seconds -Inf\n";
    GPP_EXPECT_MSG(t.buf && strcmp(t.buf, want) == 0, "%s", t.buf ? t.buf : "(null)");
    GPP_EXPECT(t.len == strlen(want));
    gpp_expo_release(&t);
    GPP_EXPECT(t.buf == NULL && t.len == 0);
}

/* Sends one request to 127.0.0.1:port; the response (caller frees). */
static char *s_http_get(int port, const char *request)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (write(fd, request, strlen(request)) < 0) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = calloc(cap, 1);
    ssize_t k;
    while (len < cap - 1 && (k = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)k;
    close(fd);
    return buf;
}

/* The server serves what was published last, 404 elsewhere, 405 for
 * other methods; a second server on its port is refused with the port
 * named. */
static void t_http_serves_snapshot(void)
{
    gpp_err_t err = {{0}};
    gpp_http_t *h = gpp_http_new(0, &err);
    GPP_EXPECT_MSG(h != NULL, "%s", err.msg);
    if (!h)
        return;
    int port = gpp_http_port(h);
    GPP_EXPECT(port > 0);
    char *r = s_http_get(port, "GET /metrics HTTP/1.0\r\n\r\n");
    GPP_EXPECT_MSG(r && strstr(r, "200 OK") && strstr(r, "text/plain; version=0.0.4"), "%s", r);
    free(r);
    const char *snap = "# TYPE gpp_a gauge\ngpp_a 1\n";
    gpp_http_publish(h, GPP_HTTP_METRICS, snap, strlen(snap));
    gpp_http_publish(h, GPP_HTTP_METRICS, "gpp_a 2\n", 8); /* the last one wins */
    gpp_http_publish(h, GPP_HTTP_SCHEDULE, "0 0 0 1.5: F0 1.5\n", 18);
    r = s_http_get(port, "GET /metrics HTTP/1.0\r\n\r\n");
    GPP_EXPECT_MSG(r && strstr(r, "\r\n\r\ngpp_a 2\n"), "%s", r);
    free(r);
    r = s_http_get(port, "GET /schedule HTTP/1.0\r\n\r\n");
    GPP_EXPECT_MSG(r && strstr(r, "\r\n\r\n0 0 0 1.5: F0 1.5\n"), "%s", r);
    free(r);
    r = s_http_get(port, "GET /other HTTP/1.0\r\n\r\n");
    GPP_EXPECT_MSG(r && strstr(r, " 404 "), "%s", r);
    free(r);
    r = s_http_get(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    GPP_EXPECT_MSG(r && strstr(r, " 405 "), "%s", r);
    free(r);
    GPP_EXPECT(gpp_http_scrapes(h) == 2);
    gpp_http_t *h2 = gpp_http_new(port, &err);
    char want[64];
    snprintf(want, sizeof want, "port %d is in use", port);
    GPP_EXPECT_MSG(h2 == NULL && strstr(err.msg, want), "%s", err.msg);
    gpp_http_destroy(&h2);
    gpp_http_destroy(&h);
    GPP_EXPECT(h == NULL);
    GPP_EXPECT(gpp_http_new(70000, &err) == NULL && strstr(err.msg, "1..65535"));
}

/* A job that ended: "stopped" in the state set with the reason (escaped)
 * on gpp_job_stop_info, and each agent's registry state on
 * gpp_agent_state (what gpp-top shows as down and exited); a job that
 * finished has no gpp_job_stop_info sample. */
static void t_expo_job_end(void)
{
    const char *hosts[] = {"127.0.0.1", "127.0.0.1"};
    const int slots[] = {0, 1};
    gpp_registry_t *reg = gpp_registry_new(2, hosts, slots);
    gpp_registry_agent(reg, 0)->state = GPP_AGENT_EXITED;
    gpp_registry_agent(reg, 1)->state = GPP_AGENT_DEAD;
    const char *names[] = {"training", "done", "stopped"};
    gpp_expo_job_t v = {.state = "stopped",
                        .state_names = names,
                        .n_states = 3,
                        .stop_reason = "agent 127.0.0.1:1 (rank 1) \"killed\" by signal 9",
                        .reg = reg};
    gpp_expo_t t = {0};
    gpp_expo_job(&t, &v);
    static const char *const want[] = {
        "\ngpp_job_state{state=\"stopped\"} 1\n",
        "\ngpp_job_state{state=\"done\"} 0\n",
        "\ngpp_job_stop_info{reason=\"agent 127.0.0.1:1 (rank 1) \\\"killed\\\" by signal 9\"} 1\n",
        "\ngpp_agent_state{rank=\"0\",host=\"127.0.0.1\",slot=\"0\",state=\"exited\"} 1\n",
        "\ngpp_agent_state{rank=\"0\",host=\"127.0.0.1\",slot=\"0\",state=\"alive\"} 0\n",
        "\ngpp_agent_state{rank=\"1\",host=\"127.0.0.1\",slot=\"1\",state=\"dead\"} 1\n",
        "\ngpp_agent_state{rank=\"1\",host=\"127.0.0.1\",slot=\"1\",state=\"expected\"} 0\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        GPP_EXPECT_MSG(t.buf && strstr(t.buf, want[i]), "no %s in:\n%s", want[i], t.buf);
    gpp_expo_release(&t);
    v.state = "done";
    v.stop_reason = NULL;
    gpp_expo_job(&t, &v);
    GPP_EXPECT_MSG(t.buf && strstr(t.buf, "\ngpp_job_state{state=\"done\"} 1\n") &&
                       !strstr(t.buf, "\ngpp_job_stop_info{"),
                   "%s", t.buf);
    gpp_expo_release(&t);
    gpp_registry_destroy(&reg);
}

static const gpp_test_case_t cases[] = {
    {"part_progress_hook", t_part_progress_hook},
    {"expo_text", t_expo_text},
    {"expo_job_end", t_expo_job_end},
    {"http_serves_snapshot", t_http_serves_snapshot},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
