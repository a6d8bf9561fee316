/* test_monitor: the coordinator's answers to monitors (coordinator/
 * gpp_monitor.h) without sockets: the ticket chain (one reply outstanding
 * per connection), the connection table, the answer rate, rendering at
 * most once per max age, the size limit, and which role may send what. */
#include <stdio.h>
#include <string.h>

#include "coordinator/gpp_monitor.h"
#include "tests/gpp_test.h"

static int s_renders;
static size_t s_size = 20; /* bytes of metrics each render makes */

static void s_render(void *arg, gpp_expo_t *metrics, gpp_expo_t *schedule)
{
    (void)arg;
    s_renders++;
    metrics->buf = gpp_xcalloc(s_size + 1, 1); /* released by gpp_expo_release */
    memset(metrics->buf, 'x', s_size);
    metrics->len = s_size;
    metrics->cap = s_size + 1;
    gpp_expo_sample(schedule, "s", 2.0, NULL);
}

/* One request of connection id with ticket t at time now: 1 answered. */
static int s_ask(gpp_monitor_t *m, const char *id, uint64_t t, double now, Gpp__MonitorReply *rep)
{
    Gpp__MonitorRequest rq = GPP__MONITOR_REQUEST__INIT;
    rq.ticket = t;
    char why[256] = "";
    int ok = gpp_monitor_answer(m, id, strlen(id), 7, &rq, now, rep, why, sizeof why);
    GPP_EXPECT(ok || strstr(why, "ticket"));
    return ok;
}

static void t_ticket_chain(void)
{
    s_renders = 0;
    gpp_monitor_t *m = gpp_monitor_new(500, s_render, NULL);
    Gpp__MonitorReply r;
    GPP_EXPECT(s_ask(m, "A", 0, 0, &r) == 1);
    GPP_EXPECT(r.status == GPP__MONITOR_STATUS__MONITOR_OK && r.request_seq == 7);
    GPP_EXPECT(r.ticket != 0 && r.metrics.len > 0 && r.schedule.len > 0);
    uint64_t t = r.ticket;
    /* a wrong ticket, or 0 again: not answered (a peer that did not read
       the reply cannot ask again) */
    GPP_EXPECT(s_ask(m, "A", t + 1, 10, &r) == 0);
    GPP_EXPECT(s_ask(m, "A", 0, 10, &r) == 0);
    /* an unknown connection with a ticket it cannot have */
    GPP_EXPECT(s_ask(m, "B", t, 10, &r) == 0);
    /* the right one: answered, with a new ticket; same snapshot within 500 ms */
    GPP_EXPECT(s_ask(m, "A", t, 20, &r) == 1 && r.ticket != t);
    GPP_EXPECT(s_renders == 1);
    GPP_EXPECT(s_ask(m, "A", r.ticket, 600, &r) == 1 && s_renders == 2);
    GPP_EXPECT(gpp_monitor_answered(m) == 3);
    gpp_monitor_destroy(&m);
    GPP_EXPECT(m == NULL);
}

static void t_rate_and_table(void)
{
    gpp_monitor_t *m = gpp_monitor_new(500, s_render, NULL);
    Gpp__MonitorReply r;
    char id[16];
    /* GPP_MONITOR_PER_S new connections in one second are answered, the
       next one is told to wait (with a ticket: its chain goes on) */
    for (int i = 0; i < GPP_MONITOR_PER_S; i++) {
        snprintf(id, sizeof id, "c%d", i);
        GPP_EXPECT(s_ask(m, id, 0, 100 + i, &r) == 1 &&
                   r.status == GPP__MONITOR_STATUS__MONITOR_OK);
    }
    GPP_EXPECT(s_ask(m, "late", 0, 200, &r) == 1);
    GPP_EXPECT(r.status == GPP__MONITOR_STATUS__MONITOR_BUSY && r.metrics.len == 0 && r.text[0]);
    uint64_t t = r.ticket;
    GPP_EXPECT(s_ask(m, "late", t, 1200, &r) == 1 && r.status == GPP__MONITOR_STATUS__MONITOR_OK);
    /* more connections than the table holds: the least recently answered
       (c0) is forgotten, so its ticket is no longer known */
    for (int i = 0; i < GPP_MONITOR_PEERS; i++) {
        snprintf(id, sizeof id, "d%d", i);
        GPP_EXPECT(s_ask(m, id, 0, 3000 + 10 * i, &r) == 1);
    }
    GPP_EXPECT(s_ask(m, "c0", 1, 5000, &r) == 0);
    gpp_monitor_destroy(&m);
}

static void t_size(void)
{
    s_size = (size_t)GPP_MONITOR_TEXT_MAX + 20; /* more than one reply carries */
    gpp_monitor_t *m = gpp_monitor_new(500, s_render, NULL);
    Gpp__MonitorReply r;
    GPP_EXPECT(s_ask(m, "A", 0, 0, &r) == 1);
    GPP_EXPECT(r.status == GPP__MONITOR_STATUS__MONITOR_REFUSED && r.metrics.len == 0);
    GPP_EXPECT_MSG(strstr(r.text, "scrape /metrics over HTTP"), "%s", r.text);
    gpp_monitor_destroy(&m);
    s_size = 20;
}

static void t_roles(void)
{
    const gpp_msg_type_t reg = GPP__ENVELOPE__BODY_REGISTER,
                         mon = GPP__ENVELOPE__BODY_MONITOR_REQUEST,
                         rdv = GPP__ENVELOPE__BODY_RDV_SET;
    GPP_EXPECT(gpp_monitor_refusal(1, GPP_CURVE_ROLE_AGENT, reg) == NULL);
    GPP_EXPECT(gpp_monitor_refusal(1, GPP_CURVE_ROLE_AGENT, rdv) == NULL);
    GPP_EXPECT(gpp_monitor_refusal(1, GPP_CURVE_ROLE_MONITOR, mon) == NULL);
    const char *why = gpp_monitor_refusal(1, GPP_CURVE_ROLE_MONITOR, reg);
    GPP_EXPECT(why && strstr(why, "never register"));
    GPP_EXPECT(gpp_monitor_refusal(1, GPP_CURVE_ROLE_MONITOR, rdv) != NULL);
    why = gpp_monitor_refusal(1, GPP_CURVE_ROLE_AGENT, mon);
    GPP_EXPECT(why && strstr(why, "needs a monitor's CURVE key"));
    GPP_EXPECT(gpp_monitor_refusal(1, GPP_CURVE_ROLE_NONE, reg) != NULL);
    GPP_EXPECT(gpp_monitor_refusal(1, GPP_CURVE_ROLE_NONE, mon) != NULL);
    /* plaintext (--insecure): nobody is authenticated */
    GPP_EXPECT(gpp_monitor_refusal(0, GPP_CURVE_ROLE_NONE, reg) == NULL);
    GPP_EXPECT(gpp_monitor_refusal(0, GPP_CURVE_ROLE_NONE, mon) == NULL);
}

int main(void)
{
    static const gpp_test_case_t cases[] = {{"ticket_chain", t_ticket_chain},
                                            {"rate_and_table", t_rate_and_table},
                                            {"size", t_size},
                                            {"roles", t_roles},
                                            {NULL, NULL}};
    return gpp_test_run(cases);
}
