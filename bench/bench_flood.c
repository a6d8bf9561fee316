/* bench_flood: hostile traffic against a coordinator's control-plane socket
 * for a fixed time, from many connections (bench/flood.sh samples the
 * coordinator's memory meanwhile and checks it still runs a job after).
 *
 *   bench_flood --endpoint tcp://H:P --seconds S --conns N --mode M
 *               [--server-key Z85] [--frame-bytes B]
 *
 * One process, N connections of mode M, each driven without blocking until
 * S seconds are over; at the end one line "mode M conns N frames F bytes B
 * connects C" on stdout. Modes (a peer never reads what the coordinator
 * answers, so answers pile up on the coordinator's side if anything does):
 *
 *   garbage   DEALER, frames of 1..4096 random bytes (malformed protobuf)
 *   register  DEALER, a valid Register of another build or an unknown slot
 *   rdv       DEALER, RdvSet of a 256 KiB value with a wrong job token
 *   big       DEALER, frames of --frame-bytes (default GPP_MSG_MAX_BYTES + 1:
 *             refused from the length header, the connection dropped; the
 *             socket is made again for each frame)
 *   cycle     DEALER, connect, one garbage frame, close, again
 *   stranger  DEALER with a fresh CURVE key nobody admitted (needs
 *             --server-key), one Register per connection, close, again
 *   raw       a plain TCP socket: ZMTP 3.0 greeting (CURVE mechanism with
 *             --server-key, else NULL), then the header of a frame of
 *             --frame-bytes and as much of its body as the coordinator
 *             takes, without ever finishing a handshake
 *
 * Only for measuring gpp's own coordinator on loopback. */
#include <arpa/inet.h>
#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/gpp_curve.h"
#include "common/gpp_time.h"
#include "proto/gpp_msg.h"

typedef struct {
    const char *endpoint, *mode, *server_key;
    double seconds;
    int conns;
    size_t frame_bytes;
} s_opts_t;

typedef struct {
    uint64_t frames, bytes, connects;
} s_count_t;

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;
static uint64_t s_rand(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

/* A DEALER to the endpoint: plaintext, or CURVE with a fresh key pair
 * nobody admitted (stranger != 0). Frame size limit as an agent's. */
static zsock_t *s_dealer(const s_opts_t *o, int stranger)
{
    zsock_t *s = zsock_new(ZMQ_DEALER);
    if (!s)
        return NULL;
    zsock_set_linger(s, 0);
    zsock_set_sndhwm(s, 1000);
    zsock_set_sndtimeo(s, 0);
    if (stranger) {
        zcert_t *c = zcert_new();
        zcert_apply(c, s);
        zcert_destroy(&c);
        zsock_set_curve_serverkey(s, o->server_key);
    }
    if (zsock_connect(s, "%s", o->endpoint) < 0) {
        zsock_destroy(&s);
        return NULL;
    }
    return s;
}

/* body: Register (another build or an unknown slot) or RdvSet (a wrong
 * token). Caller frees *buf. */
static void s_encode(const char *mode, uint8_t **buf, size_t *len)
{
    gpp_msg_t m;
    gpp_err_t err = {{0}};
    static uint8_t value[256 << 10];
    if (!strcmp(mode, "rdv")) {
        Gpp__RdvSet rs = GPP__RDV_SET__INIT;
        rs.token = "0123456789abcdef0123456789abcdef";
        char key[32];
        snprintf(key, sizeof key, "k%llu", (unsigned long long)(s_rand() % 100000));
        rs.key = key;
        rs.value.data = value;
        rs.value.len = sizeof value;
        gpp_msg_wrap(&m, 1, (int)(s_rand() % 4), GPP__ENVELOPE__BODY_RDV_SET, &rs);
        if (gpp_msg_encode(&m, buf, len, &err) < 0)
            abort();
        return;
    }
    Gpp__Register r = GPP__REGISTER__INIT;
    r.host = "127.0.0.1";
    r.slot = (s_rand() & 1) ? 0 : 1000 + (int)(s_rand() % 1000);
    r.backend = GPP__BACKEND__BACKEND_CPU;
    r.mem_bytes = 1 << 20;
    r.pid = 4242;
    r.build_version = (r.slot == 0) ? "0.0.0-intruder" : (char *)GPP_VERSION;
    r.gpu = -1;
    r.device_name = "cpu";
    r.mem_total_bytes = 1 << 30;
    r.mem_free_bytes = 1 << 29;
    gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_UNREGISTERED, GPP__ENVELOPE__BODY_REGISTER, &r);
    if (gpp_msg_encode(&m, buf, len, &err) < 0)
        abort();
}

/* One frame on s without blocking; 1 sent, 0 not now. */
static int s_send(zsock_t *s, const void *data, size_t len, s_count_t *n)
{
    zmq_msg_t msg;
    if (zmq_msg_init_size(&msg, len) != 0)
        return 0;
    memcpy(zmq_msg_data(&msg), data, len);
    if (zmq_msg_send(&msg, zsock_resolve(s), ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        return 0;
    }
    n->frames++;
    n->bytes += len;
    return 1;
}

/* ---- raw: a ZMTP greeting and an endless frame ---- */

typedef struct {
    int fd;
    size_t sent; /* of greeting + header + body */
} s_raw_t;

static int s_raw_open(const char *endpoint)
{
    char host[256];
    int port;
    if (sscanf(endpoint, "tcp://%255[^:]:%d", host, &port) != 2)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Greeting (ZMTP 3.0, RFC 23: signature, version 3.0, mechanism, as-server
 * 0, filler), then a long command frame of frame_bytes: 72 bytes. */
static size_t s_raw_head(uint8_t *h, const s_opts_t *o)
{
    memset(h, 0, 72);
    h[0] = 0xff;
    h[9] = 0x7f;
    h[10] = 3;
    h[11] = 0;
    memcpy(h + 12, o->server_key ? "CURVE" : "NULL", o->server_key ? 5 : 4);
    h[64] = 0x06; /* command, long size */
    uint64_t sz = o->frame_bytes;
    for (int i = 0; i < 8; i++)
        h[65 + i] = (uint8_t)(sz >> (56 - 8 * i));
    return 73;
}

static void s_raw_step(s_raw_t *r, const s_opts_t *o, s_count_t *n)
{
    static uint8_t junk[64 << 10];
    uint8_t head[80];
    size_t head_len = s_raw_head(head, o);
    if (r->fd < 0) {
        if ((r->fd = s_raw_open(o->endpoint)) < 0)
            return;
        r->sent = 0;
        n->connects++;
    }
    for (;;) {
        const uint8_t *p = r->sent < head_len ? head + r->sent : junk;
        size_t len = r->sent < head_len ? head_len - r->sent : sizeof junk;
        if (r->sent >= head_len && r->sent - head_len + len > o->frame_bytes)
            len = o->frame_bytes - (r->sent - head_len);
        if (len == 0) { /* the whole frame is out: start over */
            close(r->fd);
            r->fd = -1;
            n->frames++;
            return;
        }
        ssize_t w = send(r->fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (w <= 0) { /* dropped by the coordinator */
            close(r->fd);
            r->fd = -1;
            n->frames++;
            return;
        }
        r->sent += (size_t)w;
        n->bytes += (uint64_t)w;
    }
}

static int s_parse(int argc, char **argv, s_opts_t *o)
{
    *o = (s_opts_t){.seconds = 10, .conns = 16, .frame_bytes = (size_t)GPP_MSG_MAX_BYTES + 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--endpoint"))
            o->endpoint = argv[i + 1];
        else if (!strcmp(argv[i], "--mode"))
            o->mode = argv[i + 1];
        else if (!strcmp(argv[i], "--server-key"))
            o->server_key = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds"))
            o->seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--conns"))
            o->conns = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--frame-bytes"))
            o->frame_bytes = (size_t)strtoull(argv[i + 1], NULL, 10);
        else
            return -1;
    }
    static const char *modes[] = {"garbage", "register", "rdv", "big", "cycle", "stranger", "raw"};
    int known = 0;
    for (size_t i = 0; o->mode && i < sizeof modes / sizeof *modes; i++)
        known |= !strcmp(o->mode, modes[i]);
    if (!o->endpoint || !known || o->conns < 1 || o->conns > 4096 || o->seconds <= 0 ||
        (!strcmp(o->mode, "stranger") && !o->server_key) ||
        (o->server_key && strlen(o->server_key) != GPP_CURVE_Z85_LEN))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    s_opts_t o;
    if (s_parse(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: bench_flood --endpoint tcp://IP:PORT --mode "
                        "garbage|register|rdv|big|cycle|stranger|raw [--seconds S] [--conns N] "
                        "[--server-key Z85] [--frame-bytes B]\n"
                        "(stranger needs --server-key: the coordinator's public key)\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    zsys_init();
    zsys_set_max_sockets(0);
    zsys_set_logstream(NULL);
    s_rng ^= (uint64_t)getpid() << 32;
    s_count_t n = {0};
    const int recreate =
        !strcmp(o.mode, "big") || !strcmp(o.mode, "cycle") || !strcmp(o.mode, "stranger");
    const int raw = !strcmp(o.mode, "raw");
    zsock_t **s = calloc((size_t)o.conns, sizeof *s);
    s_raw_t *r = calloc((size_t)o.conns, sizeof *r);
    uint8_t *big = NULL;
    if (!strcmp(o.mode, "big") && !(big = calloc(1, o.frame_bytes)))
        return 1;
    for (int i = 0; i < o.conns; i++)
        r[i].fd = -1;
    uint8_t garbage[4096];
    double end_ms = gpp_now_ms() + o.seconds * 1000.0;
    while (gpp_now_ms() < end_ms) {
        for (int i = 0; i < o.conns; i++) {
            if (raw) {
                s_raw_step(&r[i], &o, &n);
                continue;
            }
            if (!s[i]) {
                if (!(s[i] = s_dealer(&o, !strcmp(o.mode, "stranger"))))
                    continue;
                n.connects++;
            }
            int sent;
            if (!strcmp(o.mode, "garbage") || !strcmp(o.mode, "cycle")) {
                size_t len = 1 + s_rand() % sizeof garbage;
                for (size_t k = 0; k < len; k += 8) {
                    uint64_t v = s_rand();
                    memcpy(garbage + k, &v, len - k < 8 ? len - k : 8);
                }
                sent = s_send(s[i], garbage, len, &n);
            } else if (big) {
                sent = s_send(s[i], big, o.frame_bytes, &n);
            } else {
                uint8_t *buf = NULL;
                size_t len = 0;
                s_encode(!strcmp(o.mode, "stranger") ? "register" : o.mode, &buf, &len);
                sent = s_send(s[i], buf, len, &n);
                free(buf);
            }
            if (sent && recreate) {
                if (big || !strcmp(o.mode, "stranger"))
                    zclock_sleep(20); /* let the frame (or handshake) go out first */
                zsock_destroy(&s[i]);
            }
        }
        if (raw || !strcmp(o.mode, "garbage") || !strcmp(o.mode, "register") ||
            !strcmp(o.mode, "rdv"))
            zclock_sleep(1); /* the queues are full: give the I/O threads a turn */
    }
    for (int i = 0; i < o.conns; i++) {
        zsock_destroy(&s[i]);
        if (r[i].fd >= 0)
            close(r[i].fd);
    }
    free(s);
    free(r);
    free(big);
    printf("mode %s conns %d frames %llu bytes %llu connects %llu\n", o.mode, o.conns,
           (unsigned long long)n.frames, (unsigned long long)n.bytes,
           (unsigned long long)n.connects);
    return 0;
}
