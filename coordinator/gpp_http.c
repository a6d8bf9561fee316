/* gpp_http: see gpp_http.h. */
#include "coordinator/gpp_http.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The content type Prometheus expects of the text format (its
 * exposition_formats.md). */
#define S_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define S_MAX_CONNECTIONS 16  /* scrapers, not a web server */
#define S_CONN_TIMEOUT_S 10   /* a stalled client is dropped after this */

struct gpp_http_s {
    struct MHD_Daemon *daemon;
    int fd; /* the listening socket (MHD_stop_daemon closes it) */
    int port;
    pthread_mutex_t lock;
    char *text[GPP_HTTP__COUNT]; /* the published snapshots, under lock */
    size_t len[GPP_HTTP__COUNT];
    atomic_ulong scrapes;
};

static enum MHD_Result s_reply(struct MHD_Connection *c, unsigned status, const char *type,
                               char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* On the server thread: copies the snapshot out; touches nothing else. */
static enum MHD_Result s_on_request(void *arg, struct MHD_Connection *c, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)con_cls;
    gpp_http_t *self = arg;
    if (*upload_data_size) /* a body we do not read */
        *upload_data_size = 0;
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return s_reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                       gpp_xstrdup("only GET /metrics\n"), strlen("only GET /metrics\n"));
    int doc = strcmp(url, "/metrics") == 0 ? GPP_HTTP_METRICS
              : strcmp(url, "/schedule") == 0 ? GPP_HTTP_SCHEDULE
                                              : -1;
    if (doc < 0) {
        const char *msg = "gpp-coordinator: the metrics are at /metrics\n";
        return s_reply(c, MHD_HTTP_NOT_FOUND, "text/plain", gpp_xstrdup(msg), strlen(msg));
    }
    pthread_mutex_lock(&self->lock);
    size_t len = self->len[doc];
    char *body = gpp_xcalloc(len + 1, 1);
    if (len)
        memcpy(body, self->text[doc], len);
    pthread_mutex_unlock(&self->lock);
    if (doc == GPP_HTTP_METRICS)
        atomic_fetch_add(&self->scrapes, 1);
    return s_reply(c, MHD_HTTP_OK, doc == GPP_HTTP_METRICS ? S_CONTENT_TYPE : "text/plain", body,
                   len);
}

/* Binds the port ourselves, so that a port in use is reported with the
 * kernel's reason rather than MHD's NULL. */
static int s_listen(int port, gpp_err_t *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        gpp_err_set(err, "metrics http_port %d: socket: %s", port, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* TIME_WAIT of a last run */
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE)
            gpp_err_set(err,
                        "metrics http_port %d: port %d is in use (another coordinator or "
                        "exporter?); set [metrics] http_port to a free port, or 0 for none",
                        port, port);
        else
            gpp_err_set(err, "metrics http_port %d: cannot listen: %s; set [metrics] http_port "
                             "to a port this user may open (>= 1024 without privileges)",
                        port, strerror(e));
        return -1;
    }
    return fd;
}

gpp_http_t *gpp_http_new(int port, gpp_err_t *err)
{
    if (port < 0 || port > 65535) {
        gpp_err_set(err, "metrics http_port %d: a TCP port is 1..65535 (0: none)", port);
        return NULL;
    }
    int fd = s_listen(port, err);
    if (fd < 0)
        return NULL;
    gpp_http_t *self = gpp_xcalloc(1, sizeof *self);
    pthread_mutex_init(&self->lock, NULL);
    self->fd = fd;
    struct sockaddr_in a;
    socklen_t alen = sizeof a;
    self->port = getsockname(fd, (struct sockaddr *)&a, &alen) == 0 ? ntohs(a.sin_port) : port;
    self->daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, s_on_request, self,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)S_MAX_CONNECTIONS,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)S_CONN_TIMEOUT_S, MHD_OPTION_END);
    if (!self->daemon) {
        gpp_err_set(err, "metrics http_port %d: libmicrohttpd did not start its server thread",
                    self->port);
        close(fd);
        pthread_mutex_destroy(&self->lock);
        free(self);
        return NULL;
    }
    return self;
}

void gpp_http_destroy(gpp_http_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_http_t *self = *self_p;
    MHD_stop_daemon(self->daemon); /* joins its thread and closes the socket it was given */
    pthread_mutex_destroy(&self->lock);
    for (int d = 0; d < GPP_HTTP__COUNT; d++)
        free(self->text[d]);
    free(self);
    *self_p = NULL;
}

int gpp_http_port(const gpp_http_t *self)
{
    return self->port;
}

void gpp_http_publish(gpp_http_t *self, gpp_http_doc_t doc, const char *text, size_t len)
{
    assert(doc >= 0 && doc < GPP_HTTP__COUNT);
    char *copy = gpp_xcalloc(len + 1, 1);
    memcpy(copy, text, len);
    pthread_mutex_lock(&self->lock);
    char *old = self->text[doc];
    self->text[doc] = copy;
    self->len[doc] = len;
    pthread_mutex_unlock(&self->lock);
    free(old);
}

unsigned long gpp_http_scrapes(const gpp_http_t *self)
{
    return atomic_load(&((gpp_http_t *)self)->scrapes);
}
