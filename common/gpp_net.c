/* gpp_net: see gpp_net.h. */
#include "common/gpp_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int gpp_net_split(const char *endpoint, char *host, size_t host_len, char *port, size_t port_len,
                  gpp_err_t *err)
{
    const char *h = strstr(endpoint, "://");
    h = h ? h + 3 : endpoint;
    const char *colon = strrchr(h, ':');
    if (!colon || !colon[1])
        return gpp_err_set(err, "endpoint '%s': no port; write tcp://HOST:PORT", endpoint);
    size_t hl = (size_t)(colon - h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:5555 */
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= host_len || strlen(colon + 1) >= port_len)
        return gpp_err_set(err, "endpoint '%s': %s; write tcp://HOST:PORT", endpoint,
                           hl == 0 ? "no host" : "too long");
    memcpy(host, h, hl);
    host[hl] = '\0';
    snprintf(port, port_len, "%s", colon + 1);
    return 0;
}

int gpp_net_is_wildcard(const char *host)
{
    return !strcmp(host, "*") || !strcmp(host, "0.0.0.0") || !strcmp(host, "::");
}

int gpp_net_is_loopback(const char *addr)
{
    struct in_addr a;
    return inet_pton(AF_INET, addr, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

static void s_ntop(const struct sockaddr *sa, char *out, size_t len)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    if (!inet_ntop(AF_INET, &in->sin_addr, out, (socklen_t)len))
        snprintf(out, len, "?");
}

int gpp_net_iface_addr(const char *name, char *out, size_t len, gpp_err_t *err)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return gpp_err_set(err, "interface '%s': getifaddrs: %s", name, strerror(errno));
    char names[256] = "";
    int found = 0;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if (!strcmp(i->ifa_name, name)) {
            s_ntop(i->ifa_addr, out, len);
            found = 1;
            break;
        }
        size_t nl = strlen(names);
        snprintf(names + nl, sizeof names - nl, "%s%s", nl ? ", " : "", i->ifa_name);
    }
    freeifaddrs(ifs);
    if (!found)
        return gpp_err_set(err,
                           "interface '%s' has no IPv4 address on this host (interfaces with "
                           "one: %s); name one of those",
                           name, names[0] ? names : "none");
    return 0;
}

int gpp_net_resolve(const char *host, char *out, size_t len, gpp_err_t *err)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res)
        return gpp_err_set(err,
                           "host name '%s' does not resolve (%s); add it to DNS or /etc/hosts on "
                           "this host, or write its IPv4 address",
                           host, rc ? gai_strerror(rc) : "no IPv4 address");
    s_ntop(res->ai_addr, out, len);
    freeaddrinfo(res);
    return 0;
}

int gpp_net_is_local(const char *addr)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return 0;
    int local = 0;
    char a[GPP_NET_ADDR_LEN];
    for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            s_ntop(i->ifa_addr, a, sizeof a);
            local = !strcmp(a, addr);
        }
    freeifaddrs(ifs);
    return local;
}

int gpp_net_route_src(const char *host, char *out, size_t len, gpp_err_t *err)
{
    char addr[GPP_NET_ADDR_LEN];
    if (gpp_net_resolve(host, addr, sizeof addr, err) < 0)
        return -1;
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(9)}; /* discard */
    inet_pton(AF_INET, addr, &to.sin_addr);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof to) < 0 ||
        getsockname(fd, (struct sockaddr *)&me, &ml) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return gpp_err_set(err, "no route to %s (%s): %s; check this host's network", host, addr,
                           strerror(e));
    }
    close(fd);
    s_ntop((struct sockaddr *)&me, out, len);
    return 0;
}

int gpp_net_bind_endpoint(const char *endpoint, char *bind, size_t bind_len, char *addr,
                          size_t addr_len, gpp_err_t *err)
{
    if (strstr(endpoint, "://") && strncmp(endpoint, "tcp://", 6) != 0) { /* ipc://: as given */
        snprintf(bind, bind_len, "%s", endpoint);
        snprintf(addr, addr_len, "%s", "");
        return 0;
    }
    char host[256], port[32];
    if (gpp_net_split(endpoint, host, sizeof host, port, sizeof port, err) < 0)
        return -1;
    char a[GPP_NET_ADDR_LEN] = "";
    struct in_addr probe;
    gpp_err_t ierr = {{0}};
    if (gpp_net_is_wildcard(host))
        snprintf(bind, bind_len, "tcp://*:%s", port);
    else if (inet_pton(AF_INET, host, &probe) == 1)
        snprintf(a, sizeof a, "%s", host);
    else if (if_nametoindex(host) > 0) {
        if (gpp_net_iface_addr(host, a, sizeof a, &ierr) < 0)
            return gpp_err_set(err, "coordinator endpoint '%s': %s", endpoint, ierr.msg);
    } else if (gpp_net_resolve(host, a, sizeof a, &ierr) < 0)
        return gpp_err_set(err,
                           "coordinator endpoint '%s': '%s' is no interface of this host and %s "
                           "(or bind every interface: tcp://*:%s)",
                           endpoint, host, ierr.msg, port);
    else if (!gpp_net_is_local(a))
        return gpp_err_set(err,
                           "coordinator endpoint '%s': host name '%s' resolves to %s, which is "
                           "not an address of this host; name this host (or tcp://*:%s)",
                           endpoint, host, a, port);
    if (a[0])
        snprintf(bind, bind_len, "tcp://%s:%s", a, port);
    snprintf(addr, addr_len, "%s", a);
    return 0;
}

int gpp_net_data_addr(const char *advertise, const char *iface, const char *host,
                      const char *coordinator, char *out, size_t len, char *why, size_t why_len,
                      gpp_err_t *err)
{
    char tmp[1];
    if (!why) {
        why = tmp;
        why_len = sizeof tmp;
    }
    if (advertise && advertise[0]) {
        snprintf(out, len, "%s", advertise);
        snprintf(why, why_len, "--advertise");
        return 0;
    }
    if (iface && iface[0]) {
        if (gpp_net_iface_addr(iface, out, len, err) < 0)
            return gpp_err_prefix(err, "--iface");
        snprintf(why, why_len, "--iface %s", iface);
        return 0;
    }
    char chost[256], cport[32], caddr[GPP_NET_ADDR_LEN];
    if (gpp_net_split(coordinator, chost, sizeof chost, cport, sizeof cport, err) < 0 ||
        gpp_net_resolve(chost, caddr, sizeof caddr, err) < 0)
        return gpp_err_prefix(err, "--coordinator");
    int coord_lo = gpp_net_is_loopback(caddr);
    char a[GPP_NET_ADDR_LEN];
    if (host && host[0] && gpp_net_resolve(host, a, sizeof a, NULL) == 0 && gpp_net_is_local(a) &&
        (coord_lo || !gpp_net_is_loopback(a))) {
        snprintf(out, len, "%s", a);
        snprintf(why, why_len, "host name %s", host);
        return 0;
    }
    /* the name is another host's, unknown here or loopback (Debian maps the
     * host name to 127.0.1.1): the interface that reaches the coordinator */
    if (gpp_net_route_src(caddr, out, len, err) < 0)
        return gpp_err_prefix(err, "data-plane address");
    snprintf(why, why_len, "route to the coordinator %s", chost);
    return 0;
}
