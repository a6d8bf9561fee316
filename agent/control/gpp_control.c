/* gpp_control: the agent's DEALER client. See gpp_control.h. */
#include "agent/control/gpp_control.h"

#include <assert.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/gpp_curve.h"
#include "common/gpp_fault.h"
#include "common/gpp_time.h"
#include "common/gpp_zsock.h"

#define S_HOST_MAX 256
#define S_SNDHWM 10000 /* queued messages before sends are dropped */

struct gpp_control_s {
    zloop_t *loop; /* borrowed */
    zsock_t *sock; /* DEALER */
    zsock_t *mon;  /* PAIR: sock's handshake failures (libzmq socket monitor) */
    int handshake_failures;
    int timer_id;
    gpp_control_handlers_t h;
    void *arg;
    char endpoint[S_HOST_MAX];
    char host[S_HOST_MAX];
    char data_addr[S_HOST_MAX];
    char keys_from[2 * S_HOST_MAX]; /* "" or " (keys: --key-dir DIR)" */
    int slot;
    int backend;
    gpp_control_device_t device;
    int64_t mem_bytes;
    int heartbeat_ms;
    int timeout_ms;
    uint64_t seq;      /* last sequence number sent */
    uint64_t peer_seq; /* last sequence number received */
    int rank;          /* -1 until RegisterAck */
    int world;
    int barrier_pending; /* id of the barrier we entered and await, -1 none */
    double last_rx_ms;   /* gpp_now_ms of the last valid message */
    int lost;            /* on_lost was called */
    int detached;        /* the connection dropped after registration: no more sends */
    int stalled;         /* the loop_stall fault (gpp_fault.h) has run */
    uint64_t dropped;
};

static int64_t s_realtime_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static int s_send_raw(gpp_control_t *self, gpp_msg_t *m, gpp_err_t *err)
{
    if (self->detached)
        return gpp_err_set(err, "control: %s not sent: the connection to %s dropped",
                           gpp_msg_type_name(m->body_case), self->endpoint);
    m->seq = ++self->seq;
    m->sender = self->rank >= 0 ? self->rank : GPP_MSG_SENDER_UNREGISTERED;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (gpp_msg_encode(m, &buf, &len, err) < 0)
        return -1;
    zframe_t *f = zframe_new(buf, len);
    free(buf);
    if (zframe_send(&f, self->sock, ZFRAME_DONTWAIT) < 0) {
        zframe_destroy(&f);
        return gpp_err_set(err, "control: cannot queue %s to %s: %s (coordinator gone?)",
                           gpp_msg_type_name(m->body_case), self->endpoint,
                           zmq_strerror(zmq_errno()));
    }
    if (m->body_case == GPP__ENVELOPE__BODY_BARRIER_ENTER)
        self->barrier_pending = m->barrier_enter->barrier_id;
    return 0;
}

int gpp_control_forward(gpp_control_t *self, const uint8_t *data, size_t len, gpp_err_t *err)
{
    assert(self);
    gpp_msg_t *m = gpp_msg_decode(data, len, err);
    if (!m)
        return gpp_err_prefix(err, "control: forward");
    int rc = s_send_raw(self, m, err);
    gpp_msg_destroy(&m);
    return rc;
}

int gpp_control_barrier_enter(gpp_control_t *self, int barrier_id, gpp_err_t *err)
{
    Gpp__BarrierEnter b = GPP__BARRIER_ENTER__INIT;
    b.barrier_id = barrier_id;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_BARRIER_ENTER, &b);
    return s_send_raw(self, &m, err);
}

int gpp_control_error(gpp_control_t *self, int code, const char *text, gpp_err_t *err)
{
    Gpp__Error e = GPP__ERROR__INIT;
    e.code = code;
    char buf[GPP_MSG_STR_MAX];
    snprintf(buf, sizeof buf, "%s", text ? text : "");
    e.text = buf;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_ERROR, &e);
    return s_send_raw(self, &m, err);
}

static int s_send_register(gpp_control_t *self, gpp_err_t *err)
{
    Gpp__Register r = GPP__REGISTER__INIT;
    r.host = self->host;
    r.slot = self->slot;
    r.backend = self->backend;
    r.mem_bytes = self->mem_bytes;
    r.pid = (int32_t)getpid();
    r.build_version = (char *)GPP_VERSION;
    r.data_addr = self->data_addr;
    r.gpu = self->device.gpu;
    r.device_name = self->device.name;
    r.mem_total_bytes = self->device.mem_total_bytes;
    r.mem_free_bytes = self->device.mem_free_bytes;
    r.sm_count = self->device.sm_count;
    r.device_error = self->device.error;
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_REGISTER, &r);
    return s_send_raw(self, &m, err);
}

/* Cross-checks a validated message against this agent. 0 ok, -1 drop. */
static int s_check(gpp_control_t *self, const gpp_msg_t *m, gpp_err_t *err)
{
    if (m->sender != GPP_MSG_SENDER_COORD)
        return gpp_err_set(err, "sender %d is not the coordinator (-1)", m->sender);
    if (m->seq <= self->peer_seq)
        return gpp_err_set(err, "seq %llu not after %llu (replayed or reordered)",
                           (unsigned long long)m->seq, (unsigned long long)self->peer_seq);
    switch (m->body_case) {
    case GPP__ENVELOPE__BODY_REGISTER_ACK:
        if (self->rank >= 0)
            return gpp_err_set(err, "second register_ack (rank %d, already rank %d)",
                               m->register_ack->rank, self->rank);
        return 0;
    case GPP__ENVELOPE__BODY_ASSIGNMENT: {
        const Gpp__Assignment *a = m->assignment;
        if (self->rank < 0)
            return gpp_err_set(err, "assignment before register_ack");
        /* comm ranks are agent ranks; the comm world is the agents the plan uses */
        if (a->comm->rank != self->rank || a->comm->world_size > self->world)
            return gpp_err_set(err, "assignment.comm rank %d / world %d, but we are rank %d of %d",
                               a->comm->rank, a->comm->world_size, self->rank, self->world);
        return 0;
    }
    case GPP__ENVELOPE__BODY_BARRIER_RELEASE:
        if (m->barrier_release->barrier_id != self->barrier_pending)
            return gpp_err_set(err, "barrier_release %d but we wait for %d",
                               m->barrier_release->barrier_id, self->barrier_pending);
        return 0;
    case GPP__ENVELOPE__BODY_REGISTER:
    case GPP__ENVELOPE__BODY_PROFILE_RESULT:
    case GPP__ENVELOPE__BODY_READY:
    case GPP__ENVELOPE__BODY_BARRIER_ENTER:
    case GPP__ENVELOPE__BODY_METRICS:
        return gpp_err_set(err, "%s is an agent-to-coordinator message",
                           gpp_msg_type_name(m->body_case));
    default:
        return 0;
    }
}

/* A heartbeat; echo_mono_us > 0 answers the coordinator's heartbeat sent at
 * echo_mono_us (its clock) that arrived at recv_us (ours): one round trip
 * of its clock-offset estimate. Only once registered. */
static void s_send_heartbeat(gpp_control_t *self, int64_t echo_mono_us, int64_t recv_us)
{
    if (self->rank < 0 || self->detached)
        return;
    Gpp__Heartbeat hb = GPP__HEARTBEAT__INIT;
    hb.timestamp_us = s_realtime_us();
    hb.echo_mono_us = echo_mono_us;
    hb.echo_recv_us = recv_us;
    hb.mono_us = gpp_now_us(); /* t2, last: as close to the send as it gets */
    gpp_msg_t m;
    gpp_msg_wrap(&m, 1, 0, GPP__ENVELOPE__BODY_HEARTBEAT, &hb);
    gpp_err_t err = {{0}};
    if (s_send_raw(self, &m, &err) < 0)
        gpp_warn("agent %s:%d: heartbeat: %s", self->host, self->slot, err.msg);
}

static int s_on_frame(zloop_t *loop, zsock_t *sock, void *arg)
{
    (void)loop;
    gpp_control_t *self = arg;
    zmsg_t *zm = zmsg_recv(sock);
    if (!zm)
        return 0;
    int64_t rx_us = gpp_now_us(); /* t1 of a clock-offset round trip (gpp.proto Heartbeat) */
    gpp_err_t err = {{0}};
    gpp_msg_t *m = NULL;
    if (zmsg_size(zm) != 1) {
        gpp_err_set(&err, "%zu frames, expected 1", zmsg_size(zm));
    } else {
        zframe_t *f = zmsg_first(zm);
        m = gpp_msg_decode(zframe_data(f), zframe_size(f), &err);
        if (m && s_check(self, m, &err) < 0)
            gpp_msg_destroy(&m);
    }
    zmsg_destroy(&zm);
    if (!m) {
        self->dropped++;
        gpp_warn("agent %s:%d: dropped a message from the coordinator (%llu so far): %s",
                 self->host, self->slot, (unsigned long long)self->dropped, err.msg);
        return 0;
    }
    self->peer_seq = m->seq;
    self->last_rx_ms = (double)rx_us / 1e3;
    if (m->body_case != GPP__ENVELOPE__BODY_HEARTBEAT)
        gpp_debug("agent %s:%d: %s from the coordinator", self->host, self->slot,
                  gpp_msg_type_name(m->body_case));
    int rc = 0;
    switch (m->body_case) {
    case GPP__ENVELOPE__BODY_HEARTBEAT:
        if (m->heartbeat->mono_us > 0)
            s_send_heartbeat(self, m->heartbeat->mono_us, rx_us);
        break;
    case GPP__ENVELOPE__BODY_REGISTER_ACK:
        self->rank = m->register_ack->rank;
        self->world = m->register_ack->world_size;
        rc = self->h.on_message(self, &m, self->arg);
        break;
    case GPP__ENVELOPE__BODY_BARRIER_RELEASE:
        self->barrier_pending = -1;
        rc = self->h.on_message(self, &m, self->arg);
        break;
    default:
        rc = self->h.on_message(self, &m, self->arg);
        break;
    }
    gpp_msg_destroy(&m);
    return rc;
}

/* The connection to the coordinator dropped after it registered us: the
 * registration ended with it (the coordinator's ROUTER knows this socket
 * by the routing id of that connection, and a process that binds the
 * endpoint next is another job). The socket is disconnected without
 * lingering, so that libzmq neither reconnects to a successor nor hands
 * it what queued meanwhile, and the agent gives up at once. */
static int s_detach(gpp_control_t *self)
{
    if (self->detached || self->rank < 0)
        return 0;
    self->detached = 1;
    zsock_set_linger(self->sock, 0);
    zsock_disconnect(self->sock, "%s", self->endpoint);
    if (self->lost)
        return 0;
    self->lost = 1;
    return self->h.on_lost ? self->h.on_lost(self, -1, self->arg) : -1;
}

/* A failed handshake leaves the agent hearing nothing (libzmq retries
 * quietly), so the first one says what is wrong in words. A dropped
 * connection after registration ends it (s_detach). */
static int s_on_monitor(zloop_t *loop, zsock_t *mon, void *arg)
{
    (void)loop;
    gpp_control_t *self = arg;
    zmsg_t *m = zmsg_recv(mon);
    zframe_t *f = m ? zmsg_first(m) : NULL;
    uint16_t event = 0;
    uint32_t value = 0;
    if (f && zframe_size(f) >= 6) {
        memcpy(&event, zframe_data(f), sizeof event);
        memcpy(&value, zframe_data(f) + 2, sizeof value);
    }
    if (event == ZMQ_EVENT_DISCONNECTED) {
        zmsg_destroy(&m);
        return s_detach(self);
    }
    if (event && self->handshake_failures++ == 0) {
        if (!gpp_curve_identity())
            gpp_warn("control: handshake with the coordinator at %s failed: it requires CURVE "
                     "keys; pass --coordinator-key and --key (docs/operations.md, Security)",
                     self->endpoint);
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            gpp_warn("control: the coordinator at %s refused this agent's CURVE key (ZAP status "
                     "%u): its key_dir's agents/ does not list the public half of our --key%s",
                     self->endpoint, value, self->keys_from);
        else
            gpp_warn("control: CURVE handshake with the coordinator at %s failed (event 0x%x, "
                     "%u): is --coordinator-key that coordinator's key, and does it run with "
                     "[coordinator] key_dir?%s",
                     self->endpoint, event, value, self->keys_from);
    }
    zmsg_destroy(&m);
    return 0;
}

/* Watches sock's handshakes (before it connects). */
static int s_monitor(gpp_control_t *self, gpp_err_t *err)
{
    /* a name never used before in this process: libzmq closes a stopped
     * monitor's socket asynchronously, so a name built from the (reused)
     * address of a destroyed client may still be bound */
    static atomic_uint s_seq;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://gpp-control-monitor-%u", atomic_fetch_add(&s_seq, 1));
    int events = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_DISCONNECTED;
    if (zmq_socket_monitor(zsock_resolve(self->sock), ep, events) < 0 ||
        !(self->mon = zsock_new(ZMQ_PAIR)) || zsock_connect(self->mon, "%s", ep) < 0 ||
        zloop_reader(self->loop, self->mon, s_on_monitor, self) < 0)
        return gpp_err_set(err, "control: cannot watch the socket's handshakes: %s",
                           zmq_strerror(zmq_errno()));
    return 0;
}

static int s_on_timer(zloop_t *loop, int timer_id, void *arg)
{
    (void)loop;
    (void)timer_id;
    gpp_control_t *self = arg;
    if (self->rank >= 0 && !self->stalled && gpp_fault(GPP_FAULT_LOOP_STALL)) {
        self->stalled = 1;
        zclock_sleep((int)gpp_fault_arg(GPP_FAULT_LOOP_STALL));
    }
    double silent_ms = gpp_now_ms() - self->last_rx_ms;
    if (!self->lost && silent_ms >= self->timeout_ms) {
        /* what queued while this loop paused (a loaded machine) was sent:
           read it before calling the coordinator lost */
        if (gpp_zsock_read_queued(self->sock, GPP_ZSOCK_QUEUED_MAX, s_on_frame, self) < 0)
            return -1;
        silent_ms = gpp_now_ms() - self->last_rx_ms;
    }
    if (!self->lost && silent_ms >= self->timeout_ms) {
        self->lost = 1;
        return self->h.on_lost ? self->h.on_lost(self, silent_ms, self->arg) : -1;
    }
    s_send_heartbeat(self, 0, 0);
    return 0;
}

gpp_control_t *gpp_control_new(const gpp_control_cfg_t *cfg, zloop_t *loop,
                               const gpp_control_handlers_t *handlers, void *arg, gpp_err_t *err)
{
    assert(cfg && loop && handlers && handlers->on_message);
    if (!cfg->endpoint || !cfg->endpoint[0] || !cfg->host || !cfg->host[0]) {
        gpp_err_set(err, "control: coordinator endpoint and host must be set");
        return NULL;
    }
    if (cfg->heartbeat_ms <= 0 || cfg->timeout_ms <= cfg->heartbeat_ms) {
        gpp_err_set(err, "control: heartbeat %d ms / timeout %d ms: need 0 < heartbeat < timeout",
                    cfg->heartbeat_ms, cfg->timeout_ms);
        return NULL;
    }
    gpp_control_t *self = gpp_xcalloc(1, sizeof *self);
    self->loop = loop;
    self->h = *handlers;
    self->arg = arg;
    snprintf(self->endpoint, sizeof self->endpoint, "%s", cfg->endpoint);
    snprintf(self->host, sizeof self->host, "%s", cfg->host);
    snprintf(self->data_addr, sizeof self->data_addr, "%s", cfg->data_addr ? cfg->data_addr : "");
    if (cfg->keys_from && cfg->keys_from[0])
        snprintf(self->keys_from, sizeof self->keys_from, " (keys: %s)", cfg->keys_from);
    self->slot = cfg->slot;
    self->backend = cfg->backend;
    assert(cfg->device);
    self->device = *cfg->device;
    self->mem_bytes = cfg->mem_bytes;
    self->heartbeat_ms = cfg->heartbeat_ms;
    self->timeout_ms = cfg->timeout_ms;
    self->rank = -1;
    self->barrier_pending = -1;
    self->timer_id = -1;
    self->last_rx_ms = gpp_now_ms();

    self->sock = zsock_new(ZMQ_DEALER);
    if (!self->sock) {
        gpp_err_set(err, "control: cannot create a DEALER socket: %s", zmq_strerror(zmq_errno()));
        goto fail;
    }
    zsock_set_sndhwm(self->sock, S_SNDHWM);
    zsock_set_linger(self->sock, 1000);
    /* never wait in a receive: zloop runs its timers before its readers, so
       when the heartbeat timer has read what queued (gpp_zsock_read_queued)
       the reader is still called for the poll that saw it, and a blocking
       receive would then wait for the next frame forever (the coordinator's
       ROUTER does the same, gpp_coord_new) */
    zsock_set_rcvtimeo(self->sock, 0);
    /* the size limit, and CURVE when this process has keys (gpp_curve.h) */
    if (gpp_curve_client_apply(zsock_resolve(self->sock), GPP_MSG_MAX_BYTES, err) < 0 ||
        s_monitor(self, err) < 0)
        goto fail;
    if (zsock_connect(self->sock, "%s", self->endpoint) < 0) {
        gpp_err_set(err, "control: cannot connect to '%s': %s; expected tcp://HOST:PORT",
                    self->endpoint, zmq_strerror(zmq_errno()));
        goto fail;
    }
    if (zloop_reader(loop, self->sock, s_on_frame, self) < 0) {
        gpp_err_set(err, "control: zloop_reader failed");
        goto fail;
    }
    self->timer_id = zloop_timer(loop, (size_t)self->heartbeat_ms, 0, s_on_timer, self);
    if (self->timer_id < 0) {
        gpp_err_set(err, "control: zloop_timer failed");
        goto fail;
    }
    if (s_send_register(self, err) < 0)
        goto fail;
    return self;
fail:
    gpp_control_destroy(&self);
    return NULL;
}

void gpp_control_destroy(gpp_control_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_control_t *self = *self_p;
    if (self->timer_id >= 0)
        zloop_timer_end(self->loop, self->timer_id);
    if (self->mon) {
        zloop_reader_end(self->loop, self->mon);
        zmq_socket_monitor(zsock_resolve(self->sock), NULL, 0);
        zsock_destroy(&self->mon);
    }
    if (self->sock) {
        zloop_reader_end(self->loop, self->sock);
        zsock_destroy(&self->sock);
    }
    free(self);
    *self_p = NULL;
}

uint64_t gpp_control_dropped(const gpp_control_t *self)
{
    return self->dropped;
}
