/* gpp-top: a live monitor of a training job. Once per refresh it asks the
 * coordinator for the job's Prometheus text and measured schedule
 * (coordinator/gpp_expo.h) with a MonitorRequest on its control ROUTER,
 * with a monitor's CURVE key (docs/protocol.md, Monitoring) or in plaintext
 * against an --insecure coordinator. One transport: the [metrics] HTTP port
 * is for Prometheus scrapers. It keeps the samples/s history itself.
 *
 *   gpp-top [--once | --batch [--frames N]] [--interval-ms N]
 *           [--key-dir DIR | --key FILE --server-key KEY] tcp://HOST:PORT
 *   gpp-top [--once | --batch [--frames N]] [--interval-ms N] --run-dir DIR
 *
 * Keys: a agents, s stages, g Gantt, b all, q quit. When the coordinator
 * stops answering, the screen keeps the last frame with a line saying since
 * when and what it showed last (the job done or stopped, the iteration),
 * and asks again every interval. --once prints one frame as plain text;
 * --batch one per interval, ending with that line's frame (exit 0 when the
 * job had ended, 1 when it went mid-job). Exit 1 when the coordinator cannot
 * be reached or refuses the key, 2 on a bad command line or key file.
 * docs/operations.md. */
#include <curses.h>
#include <czmq.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/gpp_curve.h"
#include "common/gpp_err.h"
#include "common/gpp_parse.h"
#include "common/gpp_time.h"
#include "common/gpp_version.h"
#include "proto/gpp_msg.h"

#define S_IO_TIMEOUT_MS 3000 /* one request and its answer */
#define S_HISTORY 120        /* sparkline points kept */
#define S_MAX_LABELS 6

/* ---- one scrape, parsed ---- */

/* names and label values point into the scrape's text (unescaped in place) */
typedef struct {
    const char *name;
    int n_labels;
    const char *key[S_MAX_LABELS];
    const char *val[S_MAX_LABELS];
    double v;
} s_sample_t;

typedef struct {
    char *text; /* owned */
    s_sample_t *s;
    int n, cap;
} s_scrape_t;

static void s_scrape_release(s_scrape_t *sc)
{
    free(sc->text);
    free(sc->s);
    memset(sc, 0, sizeof *sc);
}

static const char *s_label(const s_sample_t *x, const char *key)
{
    for (int i = 0; i < x->n_labels; i++)
        if (strcmp(x->key[i], key) == 0)
            return x->val[i];
    return "";
}

/* The first sample of `name` whose label `key` (NULL: any) is `val`. */
static const s_sample_t *s_find(const s_scrape_t *sc, const char *name, const char *key,
                                const char *val)
{
    for (int i = 0; i < sc->n; i++)
        if (strcmp(sc->s[i].name, name) == 0 && (!key || strcmp(s_label(&sc->s[i], key), val) == 0))
            return &sc->s[i];
    return NULL;
}

static double s_value(const s_scrape_t *sc, const char *name, const char *key, const char *val)
{
    const s_sample_t *x = s_find(sc, name, key, val);
    return x ? x->v : NAN;
}

/* Parses the text exposition format: sample lines "name{k="v",...} value";
 * comments skipped. Takes text (the scrape's from now on). -1 with the
 * line when one is malformed. */
static int s_parse(char *text, s_scrape_t *sc, gpp_err_t *err)
{
    free(sc->text);
    sc->text = text;
    sc->n = 0;
    int line_no = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        if (line[0] == '#')
            continue;
        if (sc->n == sc->cap) {
            sc->cap = sc->cap ? 2 * sc->cap : 256;
            sc->s = gpp_xrealloc(sc->s, (size_t)sc->cap * sizeof *sc->s);
        }
        s_sample_t *x = &sc->s[sc->n];
        memset(x, 0, sizeof *x);
        char *p = line;
        size_t nl = strcspn(p, "{ ");
        if (nl == 0 || !p[nl])
            return gpp_err_set(err, "/metrics line %d: no metric name: %.80s", line_no, line);
        char open = p[nl];
        p[nl] = 0;
        x->name = line;
        p += nl + 1;
        if (open == '{') {
            while (*p && *p != '}') {
                size_t kl = strcspn(p, "=");
                if (kl == 0 || p[kl] != '=' || p[kl + 1] != '"')
                    return gpp_err_set(err, "/metrics line %d (%s): bad label", line_no, x->name);
                p[kl] = 0;
                int i = x->n_labels < S_MAX_LABELS ? x->n_labels++ : S_MAX_LABELS - 1;
                x->key[i] = p;
                p += kl + 2;
                char *o = p; /* unescaped in place: never longer */
                x->val[i] = o;
                for (; *p && *p != '"'; p++) {
                    char c = *p;
                    if (c == '\\' && p[1]) {
                        p++;
                        c = *p == 'n' ? '\n' : *p;
                    }
                    *o++ = c;
                }
                if (*p != '"')
                    return gpp_err_set(err, "/metrics line %d (%s): open label value", line_no,
                                       x->name);
                p++;
                *o = 0;
                if (*p == ',')
                    p++;
            }
            if (*p != '}')
                return gpp_err_set(err, "/metrics line %d (%s): no closing brace", line_no,
                                   x->name);
            p++;
        }
        char *end;
        x->v = strtod(p, &end);
        if (end == p)
            return gpp_err_set(err, "/metrics line %d (%s): no value", line_no, x->name);
        sc->n++;
    }
    return 0;
}

/* ---- fetching: a MonitorRequest on the control plane ---- */

typedef struct {
    const char *endpoint; /* tcp://HOST:PORT (or ipc://) of the coordinator's ROUTER */
    zsock_t *sock;        /* DEALER, CURVE client with the monitor key (gpp_curve_identity) */
    zsock_t *events;      /* its handshake failures (zmq_socket_monitor) */
    uint64_t seq, ticket; /* the next request's: ticket of the last reply (0: new socket) */
} s_ctl_t;

static void s_ctl_close(s_ctl_t *c)
{
    if (c->sock)
        zmq_socket_monitor(zsock_resolve(c->sock), NULL, 0);
    zsock_destroy(&c->events);
    zsock_destroy(&c->sock);
    c->ticket = 0;
}

static int s_ctl_open(s_ctl_t *c, gpp_err_t *err)
{
    static unsigned n_opened;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://gpp-top-events-%u", n_opened++);
    c->sock = zsock_new(ZMQ_DEALER);
    if (!c->sock)
        return gpp_err_set(err, "cannot make a ZeroMQ socket: %s", zmq_strerror(zmq_errno()));
    zsock_set_linger(c->sock, 0);
    if (gpp_curve_client_apply(zsock_resolve(c->sock), GPP_MSG_MAX_BYTES, err) < 0)
        return -1;
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    if (zmq_socket_monitor(zsock_resolve(c->sock), ep, events) < 0 ||
        !(c->events = zsock_new(ZMQ_PAIR)) || zsock_connect(c->events, "%s", ep) < 0)
        return gpp_err_set(err, "cannot watch the socket's handshakes: %s",
                           zmq_strerror(zmq_errno()));
    if (zsock_connect(c->sock, "%s", c->endpoint) < 0)
        return gpp_err_set(err,
                           "cannot connect to '%s': %s; give the coordinator's control "
                           "endpoint as tcp://HOST:PORT ([coordinator] endpoint)",
                           c->endpoint, zmq_strerror(zmq_errno()));
    return 0;
}

/* A failed handshake in words (the first event of the events socket). */
static int s_ctl_handshake(const s_ctl_t *c, gpp_err_t *err)
{
    zmsg_t *m = zmsg_recv(c->events);
    zframe_t *f = m ? zmsg_first(m) : NULL;
    uint16_t event = 0;
    uint32_t value = 0;
    if (f && zframe_size(f) >= 6) {
        memcpy(&event, zframe_data(f), sizeof event);
        memcpy(&value, zframe_data(f) + 2, sizeof value);
    }
    zmsg_destroy(&m);
    if (!gpp_curve_identity())
        return gpp_err_set(err,
                           "the coordinator at %s requires CURVE keys: pass --key-dir DIR, "
                           "--key FILE --server-key KEY, or --run-dir DIR "
                           "(docs/operations.md, gpp-top)",
                           c->endpoint);
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return gpp_err_set(err,
                           "the coordinator at %s refused this monitor's CURVE key (ZAP "
                           "status %u): its key_dir's monitors/ does not list the public "
                           "half of our key",
                           c->endpoint, value);
    return gpp_err_set(err,
                       "CURVE handshake with %s failed (event 0x%x, %u): is the server key "
                       "that coordinator's, and does it run with keys (not --insecure)?",
                       c->endpoint, event, value);
}

/* One MonitorRequest and its reply: the Prometheus text into *metrics and
 * the schedule into *schedule (caller frees both). A failure closes the
 * socket (the next try opens a new one, ticket 0). */
static int s_ctl_fetch(s_ctl_t *c, char **metrics, char **schedule, gpp_err_t *err)
{
    *metrics = *schedule = NULL;
    if (!c->sock && s_ctl_open(c, err) < 0) {
        s_ctl_close(c);
        return -1;
    }
    Gpp__MonitorRequest rq = GPP__MONITOR_REQUEST__INIT;
    rq.ticket = c->ticket;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++c->seq, GPP_MSG_SENDER_UNREGISTERED, GPP__ENVELOPE__BODY_MONITOR_REQUEST,
                 &rq);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (gpp_msg_encode(&m, &buf, &len, err) < 0) {
        s_ctl_close(c);
        return -1;
    }
    zframe_t *f = zframe_new(buf, len);
    free(buf);
    /* a DEALER queues the request until the handshake is done */
    if (zframe_send(&f, c->sock, ZFRAME_DONTWAIT) < 0) {
        zframe_destroy(&f);
        s_ctl_close(c);
        return gpp_err_set(err, "cannot send to %s: %s", c->endpoint, zmq_strerror(zmq_errno()));
    }
    zpoller_t *poller = zpoller_new(c->sock, c->events, NULL);
    int rc = -1;
    for (double t0 = gpp_now_ms(); rc < 0;) {
        int left = (int)(S_IO_TIMEOUT_MS - (gpp_now_ms() - t0));
        zsock_t *which = left > 0 ? zpoller_wait(poller, left) : NULL;
        if (which == c->events) {
            s_ctl_handshake(c, err);
            break;
        }
        if (which != c->sock) {
            gpp_err_set(err,
                        "no answer from %s within %.0f s: is a gpp-coordinator's control "
                        "endpoint ([coordinator] endpoint) there, and this gpp-top of the "
                        "same build?",
                        c->endpoint, S_IO_TIMEOUT_MS / 1000.0);
            break;
        }
        zframe_t *r = zframe_recv(c->sock);
        gpp_msg_t *a = r ? gpp_msg_decode(zframe_data(r), zframe_size(r), err) : NULL;
        zframe_destroy(&r);
        if (!a) {
            gpp_err_prefix(err, "%s answered something that is not a gpp message", c->endpoint);
            break;
        }
        if (a->body_case == GPP__ENVELOPE__BODY_REJECT) {
            gpp_err_set(err, "%s refused the request: %s", c->endpoint, a->reject->reason);
        } else if (a->body_case != GPP__ENVELOPE__BODY_MONITOR_REPLY ||
                   a->monitor_reply->request_seq != c->seq) {
            gpp_msg_destroy(&a);
            continue; /* not the answer to this request: a late one */
        } else {
            const Gpp__MonitorReply *mr = a->monitor_reply;
            c->ticket = mr->ticket;
            if (mr->status != GPP__MONITOR_STATUS__MONITOR_OK) {
                gpp_err_set(err, "%s: %s", c->endpoint, mr->text);
                gpp_msg_destroy(&a);
                zpoller_destroy(&poller);
                return -1; /* the connection stays: the ticket goes on */
            }
            *metrics = gpp_xcalloc(mr->metrics.len + 1, 1);
            memcpy(*metrics, mr->metrics.data, mr->metrics.len);
            *schedule = gpp_xcalloc(mr->schedule.len + 1, 1);
            memcpy(*schedule, mr->schedule.data, mr->schedule.len);
            rc = 0;
        }
        gpp_msg_destroy(&a);
        if (rc < 0)
            break;
    }
    zpoller_destroy(&poller);
    if (rc < 0)
        s_ctl_close(c);
    return rc;
}

/* ---- the frame ---- */

enum { V_ALL = 0, V_AGENTS, V_STAGES, V_GANTT };

typedef struct {
    char **line;
    int n, cap;
} s_frame_t;

static void s_add(s_frame_t *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void s_add(s_frame_t *f, const char *fmt, ...)
{
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 64;
        f->line = gpp_xrealloc(f->line, (size_t)f->cap * sizeof *f->line);
    }
    char buf[1280];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    f->line[f->n++] = gpp_xstrdup(buf);
}

static void s_frame_clear(s_frame_t *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->line[i]);
    f->n = 0;
}

/* "1.5G", "320M", ... of bytes */
static const char *s_bytes(double b, char *buf, size_t len)
{
    if (isnan(b))
        snprintf(buf, len, "-");
    else if (b >= 1073741824.0)
        snprintf(buf, len, "%.1fG", b / 1073741824.0);
    else if (b >= 1048576.0)
        snprintf(buf, len, "%.0fM", b / 1048576.0);
    else
        snprintf(buf, len, "%.0fK", b / 1024.0);
    return buf;
}

/* ASCII sparkline of the last `width` points, scaled to their maximum. */
static void s_sparkline(const double *h, int n, int width, char *out)
{
    static const char levels[] = " _.-=+*#";
    int first = n > width ? n - width : 0;
    double max = 0;
    for (int i = first; i < n; i++)
        if (h[i] > max)
            max = h[i];
    int o = 0;
    for (int i = first; i < n; i++) {
        int l = max > 0 && h[i] > 0 ? 1 + (int)(h[i] / max * 6.999) : 0;
        out[o++] = levels[l];
    }
    out[o] = 0;
}

/* The label `key` of the first sample of `name` with value 1 whose label
 * `by` is `val` (NULL: any): the current member of a state set. */
static const char *s_state_of(const s_scrape_t *sc, const char *name, const char *by,
                              const char *val, const char *key)
{
    for (int i = 0; i < sc->n; i++)
        if (sc->s[i].v == 1 && strcmp(sc->s[i].name, name) == 0 &&
            (!by || strcmp(s_label(&sc->s[i], by), val) == 0))
            return s_label(&sc->s[i], key);
    return NULL;
}

/* The job's state and "N/M" iterations of a scrape. */
static const char *s_job(const s_scrape_t *sc, char *iters, size_t len)
{
    const char *state = s_state_of(sc, "gpp_job_state", NULL, NULL, "state");
    double done = s_value(sc, "gpp_iterations_completed_total", NULL, NULL);
    double planned = s_value(sc, "gpp_iterations_planned", NULL, NULL);
    if (isnan(planned))
        snprintf(iters, len, "%.0f/?", isnan(done) ? 0 : done);
    else
        snprintf(iters, len, "%.0f/%.0f", isnan(done) ? 0 : done, planned);
    return state ? state : "?";
}

/* An agent's STATE column: its registry state (gpp_agent_state), else
 * (an older coordinator) what gpp_agent_up and the heartbeat age say. */
static const char *s_agent_state(const s_scrape_t *sc, const s_sample_t *up, double age)
{
    const char *st = s_state_of(sc, "gpp_agent_state", "rank", s_label(up, "rank"), "state");
    if (!st)
        return up->v == 1 ? "up" : isnan(age) ? "wait" : "down";
    return !strcmp(st, "alive")    ? "up"
           : !strcmp(st, "dead")   ? "down"
           : !strcmp(st, "exited") ? "exited"
                                   : "wait";
}

/* "label: text", cut into lines of at most width characters (0: one line). */
static void s_add_wrapped(s_frame_t *f, const char *label, const char *text, int width)
{
    char buf[1200];
    snprintf(buf, sizeof buf, "%s: %s", label, text);
    int n = (int)strlen(buf), w = width > 20 ? width : n ? n : 1;
    for (int o = 0; o < n; o += w)
        s_add(f, "%.*s", w, buf + o);
}

/* The frame of sc, the last scrape answered (n 0: none yet). While the
 * coordinator does not answer (error set), the last one with a line that
 * says since when (answered_s, Unix time) and what it showed last. */
static void s_render(const s_scrape_t *sc, const char *target, const char *error, time_t answered_s,
                     const double *hist, int n_hist, int view, int width, s_frame_t *f)
{
    s_frame_clear(f);
    char iters[64];
    const char *state = s_job(sc, iters, sizeof iters);
    const s_sample_t *bi = s_find(sc, "gpp_build_info", NULL, NULL);
    s_add(f, "gpp-top  %s  coordinator %s%s%s", target, bi ? s_label(bi, "version") : "?",
          bi ? " git " : "", bi ? s_label(bi, "commit") : "");
    if (error && answered_s) {
        char when[32];
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&answered_s, &tm));
        s_add(f, "coordinator not answering since %s (last seen: %s, iteration %s)", when, state,
              iters);
        s_add_wrapped(f, "  why", error, width);
    } else if (error) {
        s_add_wrapped(f, "error", error, width);
    }
    double loss = s_value(sc, "gpp_loss", NULL, NULL);
    double sps = s_value(sc, "gpp_samples_per_second", NULL, NULL);
    double it_s = s_value(sc, "gpp_iteration_seconds", NULL, NULL);
    char spark[S_HISTORY + 1];
    s_sparkline(hist, n_hist, 40, spark);
    char loss_s[32];
    snprintf(loss_s, sizeof loss_s, isnan(loss) ? "-" : "%.6f", loss);
    s_add(f, "job %-10s  iteration %s  loss %s  %.1f samples/s  %.2f ms/iteration", state, iters,
          loss_s, isnan(sps) ? 0 : sps, isnan(it_s) ? 0 : it_s * 1000);
    const char *reason = s_state_of(sc, "gpp_job_stop_info", NULL, NULL, "reason");
    if (reason)
        s_add_wrapped(f, "stopped", reason, width);
    s_add(f, "samples/s [%-40s]", spark);
    if (view == V_ALL || view == V_AGENTS) {
        s_add(f, "%s", "");
        s_add(f, "%4s  %-22s %-8s %5s  %-6s %8s  %7s / %-7s", "RANK", "AGENT", "DEVICE", "STAGE",
              "STATE", "HB AGE", "PEAK", "PRED");
        for (int i = 0; i < sc->n; i++) {
            const s_sample_t *x = &sc->s[i];
            if (strcmp(x->name, "gpp_agent_up") != 0)
                continue;
            const char *rank = s_label(x, "rank");
            const s_sample_t *hw = s_find(sc, "gpp_agent_memory_high_water_bytes", "rank", rank);
            double age = s_value(sc, "gpp_agent_heartbeat_age_seconds", "rank", rank);
            /* the stage's device memory: measured peak vs the planner's
               prediction of the same quantity */
            const char *st = hw ? s_label(hw, "stage") : "";
            double peak = s_value(sc, "gpp_stage_memory_peak_bytes", "stage", st);
            double pred = s_value(sc, "gpp_stage_memory_predicted_bytes", "stage", st);
            char who[200], a[16], b[16], agestr[16];
            snprintf(who, sizeof who, "%s:%s", s_label(x, "host"), s_label(x, "slot"));
            if (isnan(age))
                snprintf(agestr, sizeof agestr, "-");
            else
                snprintf(agestr, sizeof agestr, "%.1fs", age);
            const char *dev = s_label(x, "device"), *dn = s_label(x, "device_name");
            s_add(f, "%4s  %-22.22s %-8.8s %5s  %-6s %8s  %7s / %-7s  %.40s", rank, who,
                  dev[0] ? dev : "-", hw ? s_label(hw, "stage") : "-", s_agent_state(sc, x, age),
                  agestr, s_bytes(peak, a, sizeof a), s_bytes(pred, b, sizeof b),
                  strcmp(dn, "cpu") ? dn : "");
        }
    }
    if (view == V_ALL || view == V_STAGES) {
        s_add(f, "%s", "");
        s_add(f, "%5s  %10s %10s %10s  %7s", "STAGE", "COMPUTE ms", "COMM ms", "IDLE ms", "BUBBLE");
        for (int i = 0; i < sc->n; i++) {
            const s_sample_t *x = &sc->s[i];
            if (strcmp(x->name, "gpp_stage_compute_seconds") != 0)
                continue;
            const char *st = s_label(x, "stage");
            double comm = s_value(sc, "gpp_stage_comm_seconds", "stage", st);
            double idle = s_value(sc, "gpp_stage_idle_seconds", "stage", st);
            s_add(f, "%5s  %10.3f %10.3f %10.3f  %6.1f%%", st, x->v * 1000, comm * 1000,
                  idle * 1000, it_s > 0 ? 100.0 * idle / it_s : 0.0);
        }
    }
}

/* The Gantt chart of /schedule's text (gpp_expo.h): a row per stage (its
 * first replica), `width` columns for the longest iteration; each action
 * fills the columns its time covers, starting where the previous ended. */
static void s_gantt(char *text, int width, s_frame_t *f)
{
    if (width > 200)
        width = 200;
    int iteration = -1;
    sscanf(text, "# gpp-schedule/1 iteration %d", &iteration);
    s_add(f, "%s", "");
    if (iteration < 0) {
        s_add(f, "GANTT: no complete iteration yet");
        return;
    }
    /* pass 1: the longest iteration; pass 2: draw */
    double max_ms = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            s_add(f,
                  "GANTT of iteration %d, %.3f ms across (F forward, B backward, > send, "
                  ". receive/wait, A all-reduce, S step)",
                  iteration, max_ms);
        int shown_stage[4096] = {0}; /* first replica of each stage only */
        for (char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
            int rank, stage, replica, off = 0;
            double it_ms;
            if (*p == '#' ||
                sscanf(p, "%d %d %d %lf:%n", &rank, &stage, &replica, &it_ms, &off) != 4 ||
                stage < 0 || stage >= 4096)
                continue;
            if (pass == 0) {
                if (it_ms > max_ms)
                    max_ms = it_ms;
                continue;
            }
            if (shown_stage[stage]++ || max_ms <= 0)
                continue;
            char row[201];
            memset(row, ' ', (size_t)width);
            row[width] = 0;
            double t = 0;
            int next_compute = 0; /* the first column after the last compute action */
            char *q = p + off;
            char code[8];
            double ms;
            int n;
            while (sscanf(q, " %7s %lf%n", code, &ms, &n) == 2) {
                q += n;
                char g = code[0] == 'F'                     ? 'F'
                         : code[0] == 'B'                   ? 'B'
                         : code[0] == 'S' && code[1] == 'T' ? 'S'
                         : code[0] == 'S'                   ? '>'
                         : code[0] == 'R'                   ? '.'
                         : code[0] == 'A'                   ? 'A'
                                                            : '?';
                int c0 = (int)(t / max_ms * width), c1 = (int)((t + ms) / max_ms * width);
                int compute = g != '>' && g != '.';
                if (compute && c0 < next_compute)
                    c0 = next_compute; /* each compute action shows, in order */
                if (compute && c1 <= c0)
                    c1 = c0 + 1;
                for (int c = c0; c < c1 && c < width; c++)
                    if (compute || row[c] == ' ') /* sends and waits fill what is free */
                        row[c] = g;
                if (compute)
                    next_compute = c1;
                t += ms;
                if (*q == '\n')
                    break;
            }
            s_add(f, "stage %3d |%s|", stage, row);
        }
    }
}

/* ---- main ---- */

static void s_usage(FILE *f)
{
    fprintf(f,
            "usage: gpp-top [options] tcp://HOST:PORT   the coordinator's control endpoint\n"
            "       gpp-top [options] --run-dir DIR     a job on this machine (its run directory)\n"
            "  --key-dir DIR       keys from gpp-coordinator --keygen: DIR/coordinator.key and\n"
            "                      DIR/monitor-0.key_secret\n"
            "  --key FILE          a monitor's secret key file (monitor-<i>.key_secret)\n"
            "  --server-key KEY    the coordinator's public key: its coordinator.key or 40 Z85\n"
            "                      characters (with --key)\n"
            "  --run-dir DIR       the endpoint and a monitor key a coordinator wrote for this\n"
            "                      run (a local launch says where: 'monitor: gpp-top --run-dir')\n"
            "  --once              print one frame as plain text and exit\n"
            "  --batch             print a plain-text frame every interval until the\n"
            "                      coordinator stops answering (that frame says since when)\n"
            "  --frames N          with --batch: stop after N frames\n"
            "  --interval-ms N     refresh interval (default 1000)\n"
            "  --version, --help\n"
            "keys: a agents, s stages, g Gantt chart, b all, q quit\n");
}

/* The first line of DIR/endpoint into out. -1 with a message. */
static int s_run_dir_endpoint(const char *dir, char *out, size_t len, gpp_err_t *err)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/endpoint", dir);
    FILE *f = fopen(p, "re");
    if (!f)
        return gpp_err_set(err,
                           "--run-dir %s: cannot read %s: %s; is it the directory the "
                           "coordinator named ('monitor: gpp-top --run-dir ...'), and is "
                           "the job still running?",
                           dir, p, strerror(errno));
    int ok = fgets(out, (int)len, f) != NULL;
    fclose(f);
    out[strcspn(out, "\n")] = 0;
    if (!ok || (strncmp(out, "tcp://", 6) && strncmp(out, "ipc://", 6)))
        return gpp_err_set(err, "--run-dir %s: %s holds no tcp:// endpoint", dir, p);
    return 0;
}

/* The monitor's CURVE identity from --run-dir, --key-dir or --key and
 * --server-key (none given: plaintext, for an --insecure coordinator). */
static int s_keys(const char *run_dir, const char *key_dir, const char *key, const char *server,
                  gpp_err_t *err)
{
    char kp[PATH_MAX], sp[PATH_MAX];
    if ((key != NULL) != (server != NULL))
        return gpp_err_set(err, "--key and --server-key go together");
    if (!!run_dir + !!key_dir + !!key > 1)
        return gpp_err_set(err, "give one of --run-dir, --key-dir and --key/--server-key");
    if (run_dir) {
        snprintf(kp, sizeof kp, "%s/monitor.key_secret", run_dir);
        snprintf(sp, sizeof sp, "%s/coordinator.key", run_dir);
        if (access(kp, F_OK) < 0)
            return 0; /* the coordinator runs without CURVE (--insecure) */
    } else if (key_dir) {
        snprintf(kp, sizeof kp, "%s/monitor-0.key_secret", key_dir);
        snprintf(sp, sizeof sp, "%s/coordinator.key", key_dir);
        if (access(kp, F_OK) < 0)
            return gpp_err_set(err,
                               "--key-dir %s: no monitor-0.key_secret; make monitor keys "
                               "with gpp-coordinator --keygen DIR --monitors N (admitted "
                               "through DIR/monitors/), or pass --key FILE --server-key KEY",
                               key_dir);
    } else if (key) {
        snprintf(kp, sizeof kp, "%s", key);
        snprintf(sp, sizeof sp, "%s", server);
    } else {
        return 0;
    }
    gpp_curve_client_t c;
    if (gpp_curve_client_load(&c, sp, kp, err) < 0)
        return -1;
    gpp_curve_identity_set(&c);
    explicit_bzero(&c, sizeof c);
    return 0;
}

int main(int argc, char **argv)
{
    int start = gpp_main_start("gpp-top", argc, argv);
    if (start >= 0)
        return start;
    int once = 0, batch = 0;
    int64_t interval_ms = 1000, max_frames = 0;
    const char *target = NULL, *run_dir = NULL, *key_dir = NULL, *key = NULL, *server = NULL;
    for (int i = 1; i < argc; i++) {
        const char **val = !strcmp(argv[i], "--run-dir")      ? &run_dir
                           : !strcmp(argv[i], "--key-dir")    ? &key_dir
                           : !strcmp(argv[i], "--key")        ? &key
                           : !strcmp(argv[i], "--server-key") ? &server
                                                              : NULL;
        if (val && i + 1 < argc)
            *val = argv[++i];
        else if (strcmp(argv[i], "--once") == 0)
            once = 1;
        else if (strcmp(argv[i], "--batch") == 0)
            batch = 1;
        else if (strcmp(argv[i], "--frames") == 0 && i + 1 < argc) {
            if (gpp_parse_flag_int64("gpp-top", "--frames", argv[++i], 1, INT_MAX, &max_frames) < 0)
                return 2;
        } else if (strcmp(argv[i], "--interval-ms") == 0 && i + 1 < argc) {
            if (gpp_parse_flag_int64("gpp-top", "--interval-ms", argv[++i], 100, 3600000,
                                     &interval_ms) < 0)
                return 2;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            s_usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !target)
            target = argv[i];
        else {
            fprintf(stderr, "gpp-top: unexpected argument '%s'\n", argv[i]);
            s_usage(stderr);
            return 2;
        }
    }
    gpp_err_t kerr = {{0}};
    char run_ep[512];
    if (run_dir && !target) {
        if (s_run_dir_endpoint(run_dir, run_ep, sizeof run_ep, &kerr) < 0) {
            fprintf(stderr, "gpp-top: %s\n", kerr.msg);
            return 1; /* the job is gone (its directory removed), or never was */
        }
        target = run_ep;
    }
    if (once && (batch || max_frames)) {
        fprintf(stderr, "gpp-top: --once prints one frame; --batch and --frames go without it\n");
        return 2;
    }
    if (max_frames && !batch) {
        fprintf(stderr, "gpp-top: --frames N goes with --batch\n");
        return 2;
    }
    if (!target || (strncmp(target, "tcp://", 6) && strncmp(target, "ipc://", 6))) {
        fprintf(stderr,
                "gpp-top: %s%s%s: give the coordinator's control endpoint as tcp://HOST:PORT "
                "([coordinator] endpoint, with a monitor key) or its run directory (--run-dir "
                "DIR); its [metrics] http_port serves Prometheus scrapers, not gpp-top\n",
                target ? "'" : "", target ? target : "no coordinator", target ? "'" : "");
        s_usage(stderr);
        return 2;
    }
    s_ctl_t ctl = {.endpoint = target};
    if (s_keys(run_dir, key_dir, key, server, &kerr) < 0) {
        fprintf(stderr, "gpp-top: %s\n", kerr.msg);
        return 2;
    }
    zsys_handler_set(NULL); /* keys and signals stay ours (curses: Ctrl-C is a key) */
    char shown[600];
    snprintf(shown, sizeof shown, "%s%s", target,
             gpp_curve_identity() ? " (CURVE)" : " (plaintext)");

    /* sc: the last scrape answered, its schedule and when (0: never) */
    s_scrape_t sc = {0}, next = {0};
    char *sched = NULL;
    time_t answered_s = 0;
    s_frame_t f = {0};
    double hist[S_HISTORY];
    int n_hist = 0, view = V_ALL, rc = 0, plain = once || batch;
    if (!plain && !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "gpp-top: stdout is not a terminal; use --once or --batch for plain "
                        "text\n");
        return 2;
    }
    if (!plain) {
        initscr();
        raw(); /* Ctrl-C arrives as a key: quit through endwin, the terminal restored */
        noecho();
        curs_set(0);
        keypad(stdscr, TRUE);
    }
    for (int64_t frames = 1;; frames++) {
        gpp_err_t err = {{0}};
        char *body = NULL, *text = NULL;
        int ok = s_ctl_fetch(&ctl, &text, &body, &err) == 0 && s_parse(text, &next, &err) == 0;
        if (ok) {
            s_scrape_t t = sc; /* the new scrape is the last one answered */
            sc = next;
            next = t;
            free(sched);
            sched = body;
            answered_s = time(NULL);
            double sps = s_value(&sc, "gpp_samples_per_second", NULL, NULL);
            if (!isnan(sps)) {
                if (n_hist == S_HISTORY)
                    memmove(hist, hist + 1, (S_HISTORY - 1) * sizeof *hist), n_hist--;
                hist[n_hist++] = sps;
            }
        } else {
            free(body);
        }
        if (!ok && (once || (batch && !answered_s))) {
            fprintf(stderr, "gpp-top: %s\n", err.msg);
            rc = 1;
            break;
        }
        s_render(&sc, shown, ok ? NULL : err.msg, answered_s, hist, n_hist, view, plain ? 0 : COLS,
                 &f);
        if (sched && (view == V_ALL || view == V_GANTT))
            s_gantt(sched, plain ? 80 : (COLS > 24 ? COLS - 16 : 8), &f);
        if (plain) {
            for (int i = 0; i < f.n; i++)
                printf("%s\n", f.line[i]);
            if (once)
                break;
            if (!ok) { /* the coordinator went: 0 when the job had ended */
                char iters[64];
                const char *st = s_job(&sc, iters, sizeof iters);
                rc = strcmp(st, "done") && strcmp(st, "stopped") ? 1 : 0;
                break;
            }
            if (frames == max_frames)
                break;
            printf("\n");
            fflush(stdout);
            zclock_sleep((int)interval_ms);
            continue;
        }
        erase();
        for (int i = 0; i < f.n && i < LINES - 1; i++)
            mvaddnstr(i, 0, f.line[i], COLS);
        mvaddnstr(LINES - 1, 0, "a agents  s stages  g gantt  b all  q quit", COLS);
        refresh();
        timeout((int)interval_ms);
        int c = getch();
        if (c == 'q' || c == 'Q' || c == 3 /* Ctrl-C */)
            break;
        if (c == 'a')
            view = V_AGENTS;
        else if (c == 's')
            view = V_STAGES;
        else if (c == 'g')
            view = V_GANTT;
        else if (c == 'b')
            view = V_ALL;
    }
    if (!plain)
        endwin();
    s_ctl_close(&ctl);
    gpp_curve_identity_set(NULL);
    s_frame_clear(&f);
    free(f.line);
    free(sched);
    s_scrape_release(&sc);
    s_scrape_release(&next);
    return rc;
}
