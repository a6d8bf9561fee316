/* gpp_rdv: see gpp_rdv.h. Small tables (a few keys per rank): linear scans. */
#include "coordinator/gpp_rdv.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <sodium/utils.h>
#include <zmq.h>

#include "common/gpp_curve.h"
#include "common/gpp_time.h"

typedef struct {
    char *key;
    uint8_t *value;
    size_t len;
} s_entry_t;

typedef struct {
    uint8_t id[256]; /* routing identity */
    size_t id_len;
    uint64_t request_seq;
    int rank;
    char **keys;
    size_t n_keys;
    double deadline_ms;
} s_parked_t;

struct gpp_rdv_s {
    gpp_rdv_limits_t lim;
    gpp_rdv_send_fn *send_fn;
    gpp_rdv_member_fn *member_fn;
    void *arg;
    int open;
    int world_size;
    char token[GPP_RDV_TOKEN_LEN + 1];
    s_entry_t *e;
    int n_e, cap_e;
    size_t bytes; /* keys and values */
    s_parked_t *p;
    int n_p, cap_p;
    uint64_t seq;     /* of our replies */
    uint64_t refused; /* requests refused */
};

gpp_rdv_t *gpp_rdv_new(const gpp_rdv_limits_t *lim, gpp_rdv_send_fn *send_fn,
                       gpp_rdv_member_fn *member_fn, void *arg)
{
    assert(send_fn);
    gpp_rdv_t *self = gpp_xcalloc(1, sizeof *self);
    if (lim)
        self->lim = *lim;
    if (self->lim.max_keys <= 0)
        self->lim.max_keys = GPP_RDV_DEFAULT_KEYS;
    if (self->lim.max_value_bytes == 0)
        self->lim.max_value_bytes = GPP_RDV_DEFAULT_VALUE_BYTES;
    if (self->lim.max_value_bytes > GPP_RDV_VALUE_MAX)
        self->lim.max_value_bytes = GPP_RDV_VALUE_MAX;
    if (self->lim.max_total_bytes == 0)
        self->lim.max_total_bytes = GPP_RDV_DEFAULT_TOTAL_BYTES;
    if (self->lim.max_parked <= 0)
        self->lim.max_parked = GPP_RDV_DEFAULT_PARKED;
    self->send_fn = send_fn;
    self->member_fn = member_fn;
    self->arg = arg;
    return self;
}

static void s_free_parked(s_parked_t *p)
{
    for (size_t i = 0; i < p->n_keys; i++)
        free(p->keys[i]);
    free(p->keys);
}

static void s_clear(gpp_rdv_t *self)
{
    for (int i = 0; i < self->n_e; i++) {
        free(self->e[i].key);
        free(self->e[i].value);
    }
    self->n_e = 0;
    self->bytes = 0;
    for (int i = 0; i < self->n_p; i++)
        s_free_parked(&self->p[i]);
    self->n_p = 0;
}

void gpp_rdv_destroy(gpp_rdv_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_rdv_t *self = *self_p;
    s_clear(self);
    free(self->e);
    free(self->p);
    free(self);
    *self_p = NULL;
}

static int s_random(uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(buf + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

int gpp_rdv_open(gpp_rdv_t *self, int world_size, gpp_err_t *err)
{
    assert(self && world_size > 0);
    gpp_rdv_close(self, "a new job opened the rendezvous");
    uint8_t raw[GPP_RDV_TOKEN_LEN / 2];
    if (s_random(raw, sizeof raw) < 0)
        return gpp_err_set(err, "rendezvous: no random bytes for the job token: %s",
                           strerror(errno));
    sodium_bin2hex(self->token, sizeof self->token, raw, sizeof raw);
    self->world_size = world_size;
    self->open = 1;
    return 0;
}

const char *gpp_rdv_token(const gpp_rdv_t *self)
{
    return self->open ? self->token : "";
}

int gpp_rdv_n_keys(const gpp_rdv_t *self)
{
    return self->n_e;
}
size_t gpp_rdv_n_bytes(const gpp_rdv_t *self)
{
    return self->bytes;
}
int gpp_rdv_n_parked(const gpp_rdv_t *self)
{
    return self->n_p;
}

int gpp_rdv_is_request(const gpp_msg_t *m)
{
    return m->body_case == GPP__ENVELOPE__BODY_RDV_SET ||
           m->body_case == GPP__ENVELOPE__BODY_RDV_GET;
}

/* ---- answers ---- */

static void s_reply(gpp_rdv_t *self, const void *id, size_t id_len, uint64_t request_seq,
                    Gpp__RdvStatus status, const char *text, Gpp__RdvEntry **entries, size_t n)
{
    Gpp__RdvReply r = GPP__RDV_REPLY__INIT;
    r.request_seq = request_seq;
    r.status = status;
    char buf[GPP_MSG_STR_MAX];
    snprintf(buf, sizeof buf, "%s", text ? text : "");
    r.text = buf;
    r.entries = entries;
    r.n_entries = n;
    gpp_msg_t m;
    gpp_msg_wrap(&m, ++self->seq, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_RDV_REPLY, &r);
    self->send_fn(self->arg, id, id_len, &m);
}

static void s_refuse(gpp_rdv_t *self, const void *id, size_t id_len, int rank, uint64_t seq,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void s_refuse(gpp_rdv_t *self, const void *id, size_t id_len, int rank, uint64_t seq,
                     const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    /* the first ones one by one, then one line per 1,000, like the
     * coordinator's refusals of unregistered peers: a flood of requests
     * must not fill the disk under the log */
    uint64_t n = ++self->refused;
    if (n <= 20)
        gpp_warn("rendezvous: refused a request of rank %d (%llu refused so far): %s", rank,
                 (unsigned long long)n, text);
    else if (n % 1000 == 0)
        gpp_warn("rendezvous: refused a request of rank %d (%llu refused so far, one in 1000 "
                 "logged): %s",
                 rank, (unsigned long long)n, text);
    s_reply(self, id, id_len, seq, GPP__RDV_STATUS__RDV_REFUSED, text, NULL, 0);
}

static s_entry_t *s_find(gpp_rdv_t *self, const char *key)
{
    for (int i = 0; i < self->n_e; i++)
        if (strcmp(self->e[i].key, key) == 0)
            return &self->e[i];
    return NULL;
}

/* Answers a get whose keys are all set: RDV_OK with every value. */
static void s_answer_get(gpp_rdv_t *self, const void *id, size_t id_len, uint64_t seq, int rank,
                         char *const *keys, size_t n_keys)
{
    Gpp__RdvEntry *ent = gpp_xcalloc(n_keys, sizeof *ent);
    Gpp__RdvEntry **ptr = gpp_xcalloc(n_keys, sizeof *ptr);
    size_t total = 0;
    for (size_t i = 0; i < n_keys; i++) {
        const s_entry_t *e = s_find(self, keys[i]);
        assert(e);
        gpp__rdv_entry__init(&ent[i]);
        ent[i].key = e->key;
        ent[i].value.data = e->value;
        ent[i].value.len = e->len;
        ptr[i] = &ent[i];
        total += strlen(e->key) + e->len + 16;
    }
    if (total > GPP_MSG_MAX_BYTES - 4096)
        s_refuse(self, id, id_len, rank, seq,
                 "the values of %zu keys hold %zu bytes, more than one message (%u bytes); "
                 "get fewer keys at a time",
                 n_keys, total, GPP_MSG_MAX_BYTES);
    else
        s_reply(self, id, id_len, seq, GPP__RDV_STATUS__RDV_OK, NULL, ptr, n_keys);
    free(ptr);
    free(ent);
}

static int s_all_set(gpp_rdv_t *self, char *const *keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!s_find(self, keys[i]))
            return 0;
    return 1;
}

static void s_unpark(gpp_rdv_t *self, int i)
{
    s_free_parked(&self->p[i]);
    self->p[i] = self->p[--self->n_p];
}

/* ---- requests ---- */

static void s_on_set(gpp_rdv_t *self, const void *id, size_t id_len, uint64_t seq, int rank,
                     const Gpp__RdvSet *r)
{
    const gpp_rdv_limits_t *L = &self->lim;
    if (r->value.len > L->max_value_bytes) {
        s_refuse(self, id, id_len, rank, seq,
                 "key %s: value of %zu bytes exceeds the limit of %zu bytes per value "
                 "(max_value_bytes)",
                 r->key, r->value.len, L->max_value_bytes);
        return;
    }
    s_entry_t *e = s_find(self, r->key);
    size_t klen = strlen(r->key);
    size_t after = self->bytes - (e ? e->len : 0) + r->value.len + (e ? 0 : klen);
    if (!e && self->n_e >= L->max_keys) {
        s_refuse(self, id, id_len, rank, seq,
                 "key %s: the table holds %d keys, the limit (max_keys)", r->key, self->n_e);
        return;
    }
    if (after > L->max_total_bytes) {
        s_refuse(self, id, id_len, rank, seq,
                 "key %s: %zu bytes would exceed the limit of %zu bytes in all (max_total_bytes)",
                 r->key, after, L->max_total_bytes);
        return;
    }
    if (!e) {
        if (self->n_e == self->cap_e) {
            self->cap_e = self->cap_e ? 2 * self->cap_e : 64;
            self->e = gpp_xrealloc(self->e, (size_t)self->cap_e * sizeof *self->e);
        }
        e = &self->e[self->n_e++];
        e->key = gpp_xstrdup(r->key);
        e->value = NULL;
        e->len = 0;
    }
    free(e->value);
    e->value = gpp_xcalloc(r->value.len ? r->value.len : 1, 1);
    if (r->value.len)
        memcpy(e->value, r->value.data, r->value.len);
    e->len = r->value.len;
    self->bytes = after;
    s_reply(self, id, id_len, seq, GPP__RDV_STATUS__RDV_OK, NULL, NULL, 0);
    /* answer the parked gets this set completes */
    for (int i = 0; i < self->n_p;) {
        s_parked_t *p = &self->p[i];
        if (s_all_set(self, p->keys, p->n_keys)) {
            s_answer_get(self, p->id, p->id_len, p->request_seq, p->rank, p->keys, p->n_keys);
            s_unpark(self, i);
        } else {
            i++;
        }
    }
}

static void s_on_get(gpp_rdv_t *self, const void *id, size_t id_len, uint64_t seq, int rank,
                     const Gpp__RdvGet *r, double now_ms)
{
    if (s_all_set(self, r->keys, r->n_keys)) {
        s_answer_get(self, id, id_len, seq, rank, r->keys, r->n_keys);
        return;
    }
    if (r->timeout_ms == 0) {
        s_reply(self, id, id_len, seq, GPP__RDV_STATUS__RDV_TIMEOUT, "not set", NULL, 0);
        return;
    }
    if (self->n_p >= self->lim.max_parked) {
        s_refuse(self, id, id_len, rank, seq, "%d gets are waiting already, the limit (max_parked)",
                 self->n_p);
        return;
    }
    if (id_len > sizeof self->p[0].id) {
        s_refuse(self, id, id_len, rank, seq, "routing identity of %zu bytes", id_len);
        return;
    }
    if (self->n_p == self->cap_p) {
        self->cap_p = self->cap_p ? 2 * self->cap_p : 16;
        self->p = gpp_xrealloc(self->p, (size_t)self->cap_p * sizeof *self->p);
    }
    s_parked_t *p = &self->p[self->n_p++];
    memset(p, 0, sizeof *p);
    memcpy(p->id, id, id_len);
    p->id_len = id_len;
    p->request_seq = seq;
    p->rank = rank;
    p->n_keys = r->n_keys;
    p->keys = gpp_xcalloc(r->n_keys, sizeof *p->keys);
    for (size_t i = 0; i < r->n_keys; i++)
        p->keys[i] = gpp_xstrdup(r->keys[i]);
    p->deadline_ms = now_ms + r->timeout_ms;
}

/* Constant-time comparison of two tokens of GPP_RDV_TOKEN_LEN characters. */
static int s_token_ok(const char *a, const char *b)
{
    unsigned diff = 0;
    for (int i = 0; i < GPP_RDV_TOKEN_LEN; i++)
        diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

void gpp_rdv_handle(gpp_rdv_t *self, const void *id, size_t id_len, const gpp_msg_t *m,
                    double now_ms)
{
    assert(self && m && gpp_rdv_is_request(m));
    const int set = m->body_case == GPP__ENVELOPE__BODY_RDV_SET;
    const char *token = set ? m->rdv_set->token : m->rdv_get->token; /* validated: 32 chars */
    const int rank = m->sender;
    if (!self->open) {
        s_refuse(self, id, id_len, rank, m->seq, "no job has its rendezvous open");
        return;
    }
    if (!s_token_ok(token, self->token)) {
        s_refuse(self, id, id_len, rank, m->seq, "wrong job token");
        return;
    }
    if (rank < 0 || rank >= self->world_size ||
        (self->member_fn && !self->member_fn(self->arg, rank))) {
        s_refuse(self, id, id_len, rank, m->seq, "sender %d is not an agent of this job (%d ranks)",
                 rank, self->world_size);
        return;
    }
    if (set)
        s_on_set(self, id, id_len, m->seq, rank, m->rdv_set);
    else
        s_on_get(self, id, id_len, m->seq, rank, m->rdv_get, now_ms);
}

void gpp_rdv_tick(gpp_rdv_t *self, double now_ms)
{
    for (int i = 0; i < self->n_p;) {
        s_parked_t *p = &self->p[i];
        if (now_ms < p->deadline_ms) {
            i++;
            continue;
        }
        char text[512] = "";
        size_t off = 0;
        int missing = 0;
        for (size_t k = 0; k < p->n_keys; k++)
            if (!s_find(self, p->keys[k])) {
                if (missing++ < 4 && off < sizeof text)
                    off += (size_t)snprintf(text + off, sizeof text - off, "%s%s",
                                            missing > 1 ? ", " : "not set: ", p->keys[k]);
            }
        if (missing > 4 && off < sizeof text)
            snprintf(text + off, sizeof text - off, " and %d more", missing - 4);
        s_reply(self, p->id, p->id_len, p->request_seq, GPP__RDV_STATUS__RDV_TIMEOUT, text, NULL,
                0);
        s_unpark(self, i);
    }
}

void gpp_rdv_close(gpp_rdv_t *self, const char *reason)
{
    if (!self)
        return;
    for (int i = 0; i < self->n_p; i++)
        s_reply(self, self->p[i].id, self->p[i].id_len, self->p[i].request_seq,
                GPP__RDV_STATUS__RDV_REFUSED, reason && reason[0] ? reason : "the job ended", NULL,
                0);
    s_clear(self);
    memset(self->token, 0, sizeof self->token);
    self->open = 0;
    self->world_size = 0;
}

void gpp_rdv_endpoint(const char *bind, int port, int local, char *out, size_t len)
{
    const char *host = strstr(bind, "://");
    const char *scheme_end = host;
    host = host ? host + 3 : bind;
    const char *colon = strrchr(host, ':');
    int hl = colon ? (int)(colon - host) : (int)strlen(host);
    int wild = (hl == 1 && host[0] == '*') || (hl == 7 && !strncmp(host, "0.0.0.0", 7)) ||
               (hl == 2 && !strncmp(host, "::", 2)) || (hl == 4 && !strncmp(host, "[::]", 4));
    int sl = scheme_end ? (int)(scheme_end - bind) : 3;
    const char *scheme = scheme_end ? bind : "tcp";
    if (!wild) {
        snprintf(out, len, "%.*s://%.*s:%d", sl, scheme, hl, host, port);
        return;
    }
    char name[256] = "127.0.0.1";
    if (!local && gethostname(name, sizeof name) < 0)
        snprintf(name, sizeof name, "127.0.0.1");
    name[sizeof name - 1] = '\0';
    snprintf(out, len, "%.*s://%s:%d", sl, scheme, name, port);
}

/* ---- standalone service ---- */

struct gpp_rdv_service_s {
    void *ctx;
    void *router;
    gpp_rdv_t *rdv;
    char endpoint[256];
    int dropped;
};

static int s_service_send(void *arg, const void *id, size_t id_len, gpp_msg_t *m)
{
    gpp_rdv_service_t *self = arg;
    gpp_err_t err = {{0}};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (gpp_msg_encode(m, &buf, &len, &err) < 0) {
        gpp_warn("rendezvous service: %s", err.msg);
        return -1;
    }
    int rc = zmq_send(self->router, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
                     zmq_send(self->router, buf, len, ZMQ_DONTWAIT) < 0
                 ? -1
                 : 0;
    free(buf);
    return rc;
}

gpp_rdv_service_t *gpp_rdv_service_new(const char *bind, int world_size, gpp_err_t *err)
{
    gpp_rdv_service_t *self = gpp_xcalloc(1, sizeof *self);
    self->ctx = zmq_ctx_new();
    self->router = self->ctx ? zmq_socket(self->ctx, ZMQ_ROUTER) : NULL;
    int one = 1, zero = 0;
    char last[256];
    size_t ll = sizeof last;
    if (!self->router || zmq_setsockopt(self->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one) < 0 ||
        zmq_setsockopt(self->router, ZMQ_LINGER, &zero, sizeof zero) < 0 ||
        gpp_curve_server_apply(NULL, self->router, GPP_MSG_MAX_BYTES, err) < 0 ||
        zmq_bind(self->router, bind) < 0 ||
        zmq_getsockopt(self->router, ZMQ_LAST_ENDPOINT, last, &ll) < 0) {
        gpp_err_set(err, "rendezvous service: cannot bind %s: %s", bind, zmq_strerror(zmq_errno()));
        gpp_rdv_service_destroy(&self);
        return NULL;
    }
    const char *colon = strrchr(last, ':');
    gpp_rdv_endpoint(bind, colon ? atoi(colon + 1) : 0, 1, self->endpoint, sizeof self->endpoint);
    self->rdv = gpp_rdv_new(NULL, s_service_send, NULL, self);
    if (gpp_rdv_open(self->rdv, world_size, err) < 0) {
        gpp_rdv_service_destroy(&self);
        return NULL;
    }
    return self;
}

const char *gpp_rdv_service_endpoint(const gpp_rdv_service_t *self)
{
    return self->endpoint;
}
const char *gpp_rdv_service_token(const gpp_rdv_service_t *self)
{
    return gpp_rdv_token(self->rdv);
}
gpp_rdv_t *gpp_rdv_service_table(gpp_rdv_service_t *self)
{
    return self->rdv;
}
int gpp_rdv_service_dropped(const gpp_rdv_service_t *self)
{
    return self->dropped;
}

void gpp_rdv_service_poll(gpp_rdv_service_t *self, int timeout_ms)
{
    zmq_pollitem_t it = {self->router, 0, ZMQ_POLLIN, 0};
    double end = gpp_now_ms() + timeout_ms;
    for (;;) {
        double left = end - gpp_now_ms();
        gpp_rdv_tick(self->rdv, gpp_now_ms());
        if (zmq_poll(&it, 1, left > 0 ? (long)left : 0) <= 0) {
            if (gpp_now_ms() >= end)
                return;
            continue;
        }
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        int more = 0;
        size_t ml = sizeof more;
        if (zmq_msg_recv(&id, self->router, 0) >= 0 &&
            zmq_getsockopt(self->router, ZMQ_RCVMORE, &more, &ml) == 0 && more &&
            zmq_msg_recv(&body, self->router, 0) >= 0) {
            gpp_err_t err = {{0}};
            gpp_msg_t *m = gpp_msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), &err);
            if (m && gpp_rdv_is_request(m))
                gpp_rdv_handle(self->rdv, zmq_msg_data(&id), zmq_msg_size(&id), m, gpp_now_ms());
            else
                self->dropped++;
            gpp_msg_destroy(&m);
        }
        /* drop any further frames of a malformed multi-part message */
        while (zmq_getsockopt(self->router, ZMQ_RCVMORE, &more, &ml) == 0 && more) {
            zmq_msg_close(&body);
            zmq_msg_init(&body);
            if (zmq_msg_recv(&body, self->router, 0) < 0)
                break;
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
}

void gpp_rdv_service_destroy(gpp_rdv_service_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_rdv_service_t *self = *self_p;
    gpp_rdv_destroy(&self->rdv);
    if (self->router)
        zmq_close(self->router);
    if (self->ctx)
        zmq_ctx_term(self->ctx);
    free(self);
    *self_p = NULL;
}
