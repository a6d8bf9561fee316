/* gpp_net: host names, interfaces and addresses for a job that spans hosts
 * (docs/operations.md, "Multi-host by hand").
 *
 * Two questions, answered once at start-up:
 *   - where the coordinator binds: "tcp://WHAT:PORT" with WHAT the wildcard
 *     `*` (or 0.0.0.0), an IPv4 address, an interface name (eth0) or a host
 *     name; ZeroMQ binds only the first three, so a host name is resolved
 *     here (its first IPv4 address);
 *   - which address an agent's data plane (Gloo) binds and advertises to its
 *     peers: one they can reach, never loopback unless the coordinator (and
 *     so every agent) is on this host too.
 * IPv4 only: the data plane's peers exchange IPv4 addresses. */
#ifndef GPP_NET_H
#define GPP_NET_H

#include <stddef.h>

#include "common/gpp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An address as text, e.g. "10.0.0.2" (INET_ADDRSTRLEN is 16). */
#define GPP_NET_ADDR_LEN 64

/* Splits "tcp://HOST:PORT" (scheme optional, "[v6]" brackets removed) into
 * host and port text. -1 with err naming the endpoint when there is no
 * port or a part does not fit. */
int gpp_net_split(const char *endpoint, char *host, size_t host_len, char *port, size_t port_len,
                  gpp_err_t *err);

/* 1 for the bind wildcards `*`, 0.0.0.0, `::` */
int gpp_net_is_wildcard(const char *host);

/* 1 when the numeric IPv4 address is in 127.0.0.0/8 */
int gpp_net_is_loopback(const char *addr);

/* The first IPv4 address of interface `name` into out; -1 with err naming
 * the interface and the ones this host has when it has none. */
int gpp_net_iface_addr(const char *name, char *out, size_t len, gpp_err_t *err);

/* The first IPv4 address `host` (a name or an address) resolves to;
 * -1 with err naming the host and what to fix. */
int gpp_net_resolve(const char *host, char *out, size_t len, gpp_err_t *err);

/* 1 when the numeric IPv4 address belongs to an interface of this host */
int gpp_net_is_local(const char *addr);

/* The source address the kernel picks to reach `host` (the address of the
 * interface on the route to it; a UDP connect sends nothing). -1 with err. */
int gpp_net_route_src(const char *host, char *out, size_t len, gpp_err_t *err);

/* The coordinator's bind endpoint: `bind` gets "tcp://ADDR:PORT" with ADDR
 * numeric (or `*` for a wildcard), `addr` the numeric address ("" for a
 * wildcard: the caller names the host agents use). An interface is looked
 * up before a host name, as ZeroMQ does. -1 with err naming the endpoint's
 * host and the fix. */
int gpp_net_bind_endpoint(const char *endpoint, char *bind, size_t bind_len, char *addr,
                          size_t addr_len, gpp_err_t *err);

/* The data-plane address an agent binds and advertises, in this order:
 *   advertise  (--advertise: an address or a host name, taken as given)
 *   iface      (--iface: that interface's address)
 *   host       (--host, the cluster file's name for this host) when it
 *              resolves to a non-loopback address of this host
 *   the source address of the route to the coordinator's host
 * Loopback results only when the coordinator is on loopback too. `why`
 * (may be NULL) gets which rule chose it, for the log. -1 with err. */
int gpp_net_data_addr(const char *advertise, const char *iface, const char *host,
                      const char *coordinator, char *out, size_t len, char *why, size_t why_len,
                      gpp_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
