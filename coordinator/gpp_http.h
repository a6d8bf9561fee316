/* gpp_http: the coordinator's Prometheus endpoint ([metrics] http_port):
 * libmicrohttpd answers GET /metrics and /schedule with the last texts
 * the loop thread published (copied under a mutex), so the server thread
 * never reads coordinator state.
 *
 * Ownership: gpp_http_new returns an object the caller owns. */
#ifndef GPP_HTTP_H
#define GPP_HTTP_H

#include <stddef.h>

#include "common/gpp_err.h"

typedef struct gpp_http_s gpp_http_t;

/* Listens on TCP port `port` of every IPv4 interface (0: a free port, for
 * tests; gpp_http_port says which). NULL with a message naming the port
 * and what to change when it cannot (port in use, no permission). */
gpp_http_t *gpp_http_new(int port, gpp_err_t *err);
/* Stops the server thread and closes the port. */
void gpp_http_destroy(gpp_http_t **self_p);

int gpp_http_port(const gpp_http_t *self);

typedef enum { GPP_HTTP_METRICS = 0, GPP_HTTP_SCHEDULE, GPP_HTTP__COUNT } gpp_http_doc_t;

/* What /metrics (GPP_HTTP_METRICS) or /schedule serves from now on
 * (copied). Any thread. */
void gpp_http_publish(gpp_http_t *self, gpp_http_doc_t doc, const char *text, size_t len);

/* Scrapes served so far. */
unsigned long gpp_http_scrapes(const gpp_http_t *self);

#endif
