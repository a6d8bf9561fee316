/* gpp_store: see gpp_store.h. The server is one thread with one poll()
 * loop over the listening socket, a wake-up pipe and every client; a client
 * request is handled when complete, replies are short and written
 * blocking. */
#include "agent/comm/gpp_store.h"

#include <assert.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "common/gpp_time.h"

typedef struct {
    char *key;
    void *val;
    size_t len;
} s_entry_t;

typedef struct {
    int fd;
    uint8_t *buf; /* bytes received, not yet handled */
    size_t len, cap;
} s_client_t;

struct gpp_store_server {
    int listen_fd;
    int wake[2]; /* write a byte to wake[1] to stop the thread */
    int port;
    pthread_t thread;
    s_entry_t *entries;
    size_t n_entries, cap_entries;
    s_client_t *clients;
    size_t n_clients, cap_clients;
};

struct gpp_store {
    int fd;
    char addr[256];
};

/* ---- helpers ---- */

static void s_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16),
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t s_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int s_write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int s_read_all(int fd, void *data, size_t len)
{
    uint8_t *p = data;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Splits "host:port" (the last colon); 0 or -1. */
static int s_split_addr(const char *addr, char *host, size_t host_len, char *port, size_t port_len)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= host_len || strlen(colon + 1) == 0 ||
        strlen(colon + 1) >= port_len)
        return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    snprintf(port, port_len, "%s", colon + 1);
    return 0;
}

/* ---- server ---- */

static s_entry_t *s_find(gpp_store_server_t *s, const char *key, size_t klen)
{
    for (size_t i = 0; i < s->n_entries; i++)
        if (strlen(s->entries[i].key) == klen && memcmp(s->entries[i].key, key, klen) == 0)
            return &s->entries[i];
    return NULL;
}

static void s_set(gpp_store_server_t *s, const uint8_t *key, size_t klen, const uint8_t *val,
                  size_t vlen)
{
    s_entry_t *e = s_find(s, (const char *)key, klen);
    if (!e) {
        if (s->n_entries == s->cap_entries) {
            s->cap_entries = s->cap_entries ? 2 * s->cap_entries : 64;
            s->entries = gpp_xrealloc(s->entries, s->cap_entries * sizeof *s->entries);
        }
        e = &s->entries[s->n_entries++];
        e->key = gpp_xcalloc(klen + 1, 1);
        memcpy(e->key, key, klen);
        e->val = NULL;
    }
    free(e->val);
    e->val = gpp_xcalloc(vlen ? vlen : 1, 1);
    memcpy(e->val, val, vlen);
    e->len = vlen;
}

/* Handles every complete request in c->buf. Returns -1 to drop the client. */
static int s_serve(gpp_store_server_t *s, s_client_t *c)
{
    size_t off = 0;
    for (;;) {
        const uint8_t *p = c->buf + off;
        size_t avail = c->len - off;
        if (avail < 5)
            break;
        uint8_t op = p[0];
        uint32_t klen = s_get_u32(p + 1);
        if ((op != 'S' && op != 'G') || klen == 0 || klen > GPP_STORE_KEY_MAX ||
            memchr(p + 5, 0, klen < avail - 5 ? klen : avail - 5))
            return -1;
        if (avail < 5 + (size_t)klen)
            break;
        const uint8_t *key = p + 5;
        if (op == 'S') {
            if (avail < 9 + (size_t)klen)
                break;
            uint32_t vlen = s_get_u32(key + klen);
            if (vlen > GPP_STORE_VALUE_MAX)
                return -1;
            if (avail < 9 + (size_t)klen + vlen)
                break;
            s_set(s, key, klen, key + klen + 4, vlen);
            if (s_write_all(c->fd, "K", 1) < 0)
                return -1;
            off += 9 + (size_t)klen + vlen;
        } else {
            s_entry_t *e = s_find(s, (const char *)key, klen);
            if (!e) {
                if (s_write_all(c->fd, "N", 1) < 0)
                    return -1;
            } else {
                uint8_t hdr[5] = {'Y'};
                s_put_u32(hdr + 1, (uint32_t)e->len);
                if (s_write_all(c->fd, hdr, 5) < 0 || s_write_all(c->fd, e->val, e->len) < 0)
                    return -1;
            }
            off += 5 + (size_t)klen;
        }
    }
    memmove(c->buf, c->buf + off, c->len - off);
    c->len -= off;
    return 0;
}

static void s_drop(gpp_store_server_t *s, size_t i)
{
    close(s->clients[i].fd);
    free(s->clients[i].buf);
    s->clients[i] = s->clients[--s->n_clients];
}

static void *s_thread(void *arg)
{
    gpp_store_server_t *s = arg;
    struct pollfd *pfd = NULL;
    size_t cap_pfd = 0;
    for (;;) {
        size_t n = 2 + s->n_clients;
        if (n > cap_pfd) {
            cap_pfd = 2 * n;
            pfd = gpp_xrealloc(pfd, cap_pfd * sizeof *pfd);
        }
        pfd[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        pfd[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < s->n_clients; i++)
            pfd[2 + i] = (struct pollfd){.fd = s->clients[i].fd, .events = POLLIN};
        if (poll(pfd, n, -1) < 0) {
            if (errno == EINTR)
                continue;
            gpp_error("gpp_store: poll: %s; store thread stops", strerror(errno));
            break;
        }
        if (pfd[0].revents)
            break;
        /* Clients first, from the end, so drops do not disturb indices still
         * to be visited (s_drop moves the last client into the hole). */
        for (size_t i = s->n_clients; i-- > 0;) {
            if (!pfd[2 + i].revents)
                continue;
            s_client_t *c = &s->clients[i];
            if (c->cap - c->len < 65536) {
                c->cap = c->cap * 2 + 65536;
                c->buf = gpp_xrealloc(c->buf, c->cap);
            }
            ssize_t got = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                s_drop(s, i);
                continue;
            }
            c->len += (size_t)got;
            if (s_serve(s, c) < 0)
                s_drop(s, i);
        }
        if (pfd[1].revents & POLLIN) {
            int fd = accept(s->listen_fd, NULL, NULL);
            if (fd >= 0) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                /* Replies are written blocking: a client that stops reading
                 * is dropped after this long instead of stalling the store. */
                struct timeval tv = {.tv_sec = 5};
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                if (s->n_clients == s->cap_clients) {
                    s->cap_clients = s->cap_clients ? 2 * s->cap_clients : 16;
                    s->clients = gpp_xrealloc(s->clients, s->cap_clients * sizeof *s->clients);
                }
                s->clients[s->n_clients++] = (s_client_t){.fd = fd};
            }
        }
    }
    free(pfd);
    return NULL;
}

gpp_store_server_t *gpp_store_server_new(const char *host, int port, gpp_err_t *err)
{
    gpp_store_server_t *s = gpp_xcalloc(1, sizeof *s);
    s->listen_fd = -1;
    s->wake[0] = s->wake[1] = -1;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    struct addrinfo hints = {
        .ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host && host[0] ? host : NULL, port_s, &hints, &ai);
    if (rc) {
        gpp_err_set(err, "gpp_store: cannot resolve '%s': %s", host ? host : "", gai_strerror(rc));
        goto fail;
    }
    GPP_CHECK_SYS_GOTO(s->listen_fd = socket(ai->ai_family, ai->ai_socktype, 0), err, fail);
    int one = 1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->listen_fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        gpp_err_set(err,
                    "gpp_store: cannot listen on %s:%d: %s; is another job using the port? "
                    "set coordinator.store in cluster.toml",
                    host && host[0] ? host : "*", port, strerror(errno));
        goto fail;
    }
    GPP_CHECK_SYS_GOTO(listen(s->listen_fd, 256), err, fail);
    struct sockaddr_in sin;
    socklen_t sl = sizeof sin;
    GPP_CHECK_SYS_GOTO(getsockname(s->listen_fd, (struct sockaddr *)&sin, &sl), err, fail);
    s->port = ntohs(sin.sin_port);
    GPP_CHECK_SYS_GOTO(pipe(s->wake), err, fail);
    rc = pthread_create(&s->thread, NULL, s_thread, s);
    if (rc) {
        gpp_err_set(err, "gpp_store: pthread_create: %s", strerror(rc));
        goto fail;
    }
    freeaddrinfo(ai);
    return s;
fail:
    if (ai)
        freeaddrinfo(ai);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->wake[0] >= 0)
        close(s->wake[0]), close(s->wake[1]);
    free(s);
    return NULL;
}

int gpp_store_server_port(const gpp_store_server_t *self)
{
    assert(self);
    return self->port;
}

void gpp_store_server_destroy(gpp_store_server_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_store_server_t *s = *self_p;
    ssize_t w;
    do
        w = write(s->wake[1], "x", 1);
    while (w < 0 && errno == EINTR);
    pthread_join(s->thread, NULL);
    while (s->n_clients)
        s_drop(s, s->n_clients - 1);
    free(s->clients);
    for (size_t i = 0; i < s->n_entries; i++) {
        free(s->entries[i].key);
        free(s->entries[i].val);
    }
    free(s->entries);
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
    *self_p = NULL;
}

/* ---- client ---- */

gpp_store_t *gpp_store_connect(const char *addr, int timeout_ms, gpp_err_t *err)
{
    assert(addr);
    char host[256], port[16];
    if (s_split_addr(addr, host, sizeof host, port, sizeof port) < 0) {
        gpp_err_set(err, "gpp_store: '%s' is not HOST:PORT", addr);
        return NULL;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc) {
        gpp_err_set(err, "gpp_store: cannot resolve '%s': %s", host, gai_strerror(rc));
        return NULL;
    }
    double deadline = gpp_now_ms() + timeout_ms;
    int fd = -1, last_errno = 0;
    for (;;) {
        fd = socket(ai->ai_family, ai->ai_socktype, 0);
        if (fd < 0) {
            last_errno = errno;
            break;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        last_errno = errno;
        close(fd);
        fd = -1;
        if (gpp_now_ms() >= deadline)
            break;
        nanosleep(&(struct timespec){0, 50 * 1000000L}, NULL);
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        gpp_err_set(err,
                    "gpp_store: cannot connect to %s within %d ms: %s; is the coordinator "
                    "(store server) running?",
                    addr, timeout_ms, strerror(last_errno));
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    gpp_store_t *s = gpp_xcalloc(1, sizeof *s);
    s->fd = fd;
    snprintf(s->addr, sizeof s->addr, "%s", addr);
    return s;
}

void gpp_store_destroy(gpp_store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    close((*self_p)->fd);
    free(*self_p);
    *self_p = NULL;
}

static int s_request(gpp_store_t *s, char op, const char *key, const void *val, size_t vlen,
                     gpp_err_t *err)
{
    size_t klen = strlen(key);
    assert(klen > 0 && klen <= GPP_STORE_KEY_MAX && vlen <= GPP_STORE_VALUE_MAX);
    uint8_t hdr[5];
    hdr[0] = (uint8_t)op;
    s_put_u32(hdr + 1, (uint32_t)klen);
    uint8_t vl[4];
    s_put_u32(vl, (uint32_t)vlen);
    if (s_write_all(s->fd, hdr, 5) < 0 || s_write_all(s->fd, key, klen) < 0 ||
        (op == 'S' && (s_write_all(s->fd, vl, 4) < 0 || s_write_all(s->fd, val, vlen) < 0)))
        return gpp_err_set(err, "gpp_store %s: send: %s; did the store server stop?", s->addr,
                           strerror(errno));
    return 0;
}

int gpp_store_set(gpp_store_t *self, const char *key, const void *data, size_t len, gpp_err_t *err)
{
    assert(self && key && (data || !len));
    if (len > GPP_STORE_VALUE_MAX)
        return gpp_err_set(err, "gpp_store: value of '%s' is %zu bytes, at most %d", key, len,
                           GPP_STORE_VALUE_MAX);
    if (s_request(self, 'S', key, data, len, err) < 0)
        return -1;
    char ack;
    if (s_read_all(self->fd, &ack, 1) < 0 || ack != 'K')
        return gpp_err_set(err, "gpp_store %s: no acknowledgement for '%s'", self->addr, key);
    return 0;
}

int gpp_store_get(gpp_store_t *self, const char *key, int timeout_ms, void **data, size_t *len,
                  gpp_err_t *err)
{
    assert(self && key && data && len);
    *data = NULL;
    *len = 0;
    double deadline = gpp_now_ms() + timeout_ms;
    for (;;) {
        if (s_request(self, 'G', key, NULL, 0, err) < 0)
            return -1;
        uint8_t tag;
        if (s_read_all(self->fd, &tag, 1) < 0)
            return gpp_err_set(err, "gpp_store %s: connection lost", self->addr);
        if (tag == 'Y') {
            uint8_t vl[4];
            if (s_read_all(self->fd, vl, 4) < 0)
                return gpp_err_set(err, "gpp_store %s: connection lost", self->addr);
            uint32_t n = s_get_u32(vl);
            if (n > GPP_STORE_VALUE_MAX)
                return gpp_err_set(err, "gpp_store %s: bad reply", self->addr);
            void *buf = gpp_xcalloc(n ? n : 1, 1);
            if (s_read_all(self->fd, buf, n) < 0) {
                free(buf);
                return gpp_err_set(err, "gpp_store %s: connection lost", self->addr);
            }
            *data = buf;
            *len = n;
            return 0;
        }
        if (tag != 'N')
            return gpp_err_set(err, "gpp_store %s: bad reply", self->addr);
        if (gpp_now_ms() >= deadline)
            return gpp_err_set(err,
                               "gpp_store %s: key '%s' not set within %d ms; a peer did not "
                               "join (check that every agent of the job started)",
                               self->addr, key, timeout_ms);
        nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
    }
}
