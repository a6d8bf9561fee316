/* gpp_monitor: see gpp_monitor.h. */
#include "coordinator/gpp_monitor.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define S_ID_MAX 255 /* a ZeroMQ routing id's bytes */

typedef struct {
    uint8_t id[S_ID_MAX];
    size_t id_len; /* 0: a free slot */
    uint64_t ticket;
    double last_ms;
} s_peer_t;

struct gpp_monitor_s {
    double max_age_ms;
    gpp_monitor_render_fn *render;
    void *arg;
    gpp_expo_t metrics, schedule;
    double rendered_ms; /* < 0: never */
    s_peer_t peers[GPP_MONITOR_PEERS];
    double window_ms; /* the second the answer budget counts */
    int in_window;
    uint64_t answered;
};

gpp_monitor_t *gpp_monitor_new(double max_age_ms, gpp_monitor_render_fn *render, void *arg)
{
    assert(render && max_age_ms > 0);
    gpp_monitor_t *self = gpp_xcalloc(1, sizeof *self);
    self->max_age_ms = max_age_ms;
    self->render = render;
    self->arg = arg;
    self->rendered_ms = -1;
    return self;
}

void gpp_monitor_destroy(gpp_monitor_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_expo_release(&(*self_p)->metrics);
    gpp_expo_release(&(*self_p)->schedule);
    free(*self_p);
    *self_p = NULL;
}

uint64_t gpp_monitor_answered(const gpp_monitor_t *self)
{
    return self->answered;
}

/* A ticket nobody can guess: the proof that the peer read our last reply. */
static uint64_t s_ticket(void)
{
    uint64_t t = 0;
    while (t == 0)
        if (getrandom(&t, sizeof t, 0) != (ssize_t)sizeof t)
            t = 0;
    return t;
}

static s_peer_t *s_peer(gpp_monitor_t *self, const void *id, size_t id_len)
{
    for (int i = 0; i < GPP_MONITOR_PEERS; i++)
        if (self->peers[i].id_len == id_len && !memcmp(self->peers[i].id, id, id_len))
            return &self->peers[i];
    return NULL;
}

/* A slot for a new peer: a free one, else the least recently answered. */
static s_peer_t *s_new_peer(gpp_monitor_t *self, const void *id, size_t id_len)
{
    s_peer_t *p = &self->peers[0];
    for (int i = 0; i < GPP_MONITOR_PEERS && p->id_len; i++)
        if (!self->peers[i].id_len || self->peers[i].last_ms < p->last_ms)
            p = &self->peers[i];
    memcpy(p->id, id, id_len);
    p->id_len = id_len;
    return p;
}

int gpp_monitor_answer(gpp_monitor_t *self, const void *id, size_t id_len, uint64_t seq,
                       const Gpp__MonitorRequest *req, double now_ms, Gpp__MonitorReply *rep,
                       char *why, size_t why_len)
{
    if (id_len == 0 || id_len > S_ID_MAX) {
        snprintf(why, why_len, "monitor_request with a %zu-byte routing id", id_len);
        return 0;
    }
    s_peer_t *p = s_peer(self, id, id_len);
    if (p ? req->ticket != p->ticket : req->ticket != 0) {
        snprintf(why, why_len,
                 "monitor_request with ticket %llu, expected %s (one request per reply: a "
                 "monitor asks again only with its last reply's ticket)",
                 (unsigned long long)req->ticket, p ? "the last reply's" : "0 on a new connection");
        return 0;
    }
    if (!p)
        p = s_new_peer(self, id, id_len);
    p->ticket = s_ticket();
    p->last_ms = now_ms;
    gpp__monitor_reply__init(rep);
    rep->request_seq = seq;
    rep->ticket = p->ticket;
    if (now_ms - self->window_ms >= 1000.0) {
        self->window_ms = now_ms;
        self->in_window = 0;
    }
    if (self->in_window >= GPP_MONITOR_PER_S) {
        static char text[128];
        snprintf(text, sizeof text,
                 "the coordinator answers at most %d monitor requests a second; ask again later",
                 GPP_MONITOR_PER_S);
        rep->status = GPP__MONITOR_STATUS__MONITOR_BUSY;
        rep->text = text;
        return 1;
    }
    self->in_window++;
    if (self->rendered_ms < 0 || now_ms - self->rendered_ms > self->max_age_ms) {
        gpp_expo_release(&self->metrics);
        gpp_expo_release(&self->schedule);
        self->render(self->arg, &self->metrics, &self->schedule);
        self->rendered_ms = now_ms;
    }
    if (self->metrics.len > GPP_MONITOR_TEXT_MAX || self->schedule.len > GPP_MONITOR_TEXT_MAX) {
        static char text[256];
        snprintf(text, sizeof text,
                 "the job's metrics (%zu bytes) or schedule (%zu bytes) exceed %d bytes, more "
                 "than one reply carries; scrape /metrics over HTTP ([metrics] http_port)",
                 self->metrics.len, self->schedule.len, GPP_MONITOR_TEXT_MAX);
        rep->status = GPP__MONITOR_STATUS__MONITOR_REFUSED;
        rep->text = text;
        return 1;
    }
    rep->status = GPP__MONITOR_STATUS__MONITOR_OK;
    rep->metrics.data = (uint8_t *)self->metrics.buf;
    rep->metrics.len = self->metrics.len;
    rep->schedule.data = (uint8_t *)self->schedule.buf;
    rep->schedule.len = self->schedule.len;
    self->answered++;
    return 1;
}

const char *gpp_monitor_refusal(int curve, gpp_curve_role_t role, gpp_msg_type_t type)
{
    if (!curve)
        return NULL;
    int monitoring = type == GPP__ENVELOPE__BODY_MONITOR_REQUEST;
    if (monitoring && role != GPP_CURVE_ROLE_MONITOR)
        return "a monitor_request needs a monitor's CURVE key, not an agent's (gpp-top: key_dir's "
               "monitors/ or the run directory; docs/operations.md, gpp-top)";
    if (!monitoring && role != GPP_CURVE_ROLE_AGENT)
        return role == GPP_CURVE_ROLE_MONITOR
                   ? "a monitor key may only send monitor_request, never register or act as an "
                     "agent; an agent needs an agent key (key_dir's agents/)"
                   : "a CURVE key without a role";
    return NULL;
}
