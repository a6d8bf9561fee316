/* Tests of common/gpp_net: endpoint splitting, the coordinator's bind forms
 * (wildcard, address, interface, host name; one that does not resolve) and
 * the agent's data-plane address choice. Only loopback ("lo", localhost)
 * exists in every sandbox; tests/integration/multihost_netns.sh checks the
 * same against real interfaces in network namespaces. */
#include <string.h>

#include "common/gpp_net.h"
#include "tests/gpp_test.h"

static void t_split(void)
{
    gpp_err_t err = {{0}};
    char h[64], p[16];
    GPP_EXPECT(gpp_net_split("tcp://node-1:5555", h, sizeof h, p, sizeof p, &err) == 0 &&
               !strcmp(h, "node-1") && !strcmp(p, "5555"));
    GPP_EXPECT(gpp_net_split("tcp://[::1]:7", h, sizeof h, p, sizeof p, &err) == 0 &&
               !strcmp(h, "::1") && !strcmp(p, "7"));
    GPP_EXPECT(gpp_net_split("10.0.0.1:*", h, sizeof h, p, sizeof p, &err) == 0 &&
               !strcmp(h, "10.0.0.1") && !strcmp(p, "*"));
    GPP_EXPECT_MSG(gpp_net_split("tcp://node", h, sizeof h, p, sizeof p, &err) == -1 &&
                       strstr(err.msg, "'tcp://node': no port; write tcp://HOST:PORT"),
                   "%s", err.msg);
    GPP_EXPECT(gpp_net_split("tcp://:5", h, sizeof h, p, sizeof p, &err) == -1 &&
               strstr(err.msg, "no host"));
    GPP_EXPECT(gpp_net_is_wildcard("*") && gpp_net_is_wildcard("0.0.0.0") &&
               !gpp_net_is_wildcard("10.0.0.1"));
    GPP_EXPECT(gpp_net_is_loopback("127.0.1.1") && gpp_net_is_loopback("127.0.0.1") &&
               !gpp_net_is_loopback("10.0.0.1") && !gpp_net_is_loopback("node"));
}

static void t_bind(void)
{
    gpp_err_t err = {{0}};
    char b[128], a[GPP_NET_ADDR_LEN];
    GPP_EXPECT(gpp_net_bind_endpoint("tcp://*:5555", b, sizeof b, a, sizeof a, &err) == 0 &&
               !strcmp(b, "tcp://*:5555") && !a[0]);
    GPP_EXPECT(gpp_net_bind_endpoint("tcp://0.0.0.0:*", b, sizeof b, a, sizeof a, &err) == 0 &&
               !strcmp(b, "tcp://*:*"));
    GPP_EXPECT(gpp_net_bind_endpoint("tcp://127.0.0.1:9", b, sizeof b, a, sizeof a, &err) == 0 &&
               !strcmp(b, "tcp://127.0.0.1:9") && !strcmp(a, "127.0.0.1"));
    /* an interface name and a host name become the address */
    GPP_EXPECT_MSG(gpp_net_bind_endpoint("tcp://lo:9", b, sizeof b, a, sizeof a, &err) == 0 &&
                       !strcmp(b, "tcp://127.0.0.1:9"),
                   "%s %s", b, err.msg);
    GPP_EXPECT_MSG(gpp_net_bind_endpoint("tcp://localhost:9", b, sizeof b, a, sizeof a, &err) ==
                           0 &&
                       !strcmp(b, "tcp://127.0.0.1:9") && !strcmp(a, "127.0.0.1"),
                   "%s %s", b, err.msg);
    /* .invalid never resolves (RFC 6761) */
    GPP_EXPECT_MSG(
        gpp_net_bind_endpoint("tcp://nohost.invalid:9", b, sizeof b, a, sizeof a, &err) == -1 &&
            strstr(err.msg, "'tcp://nohost.invalid:9'") &&
            strstr(err.msg, "host name 'nohost.invalid' does not resolve") &&
            strstr(err.msg, "tcp://*:9"),
        "%s", err.msg);
    GPP_EXPECT(gpp_net_bind_endpoint("ipc:///tmp/x", b, sizeof b, a, sizeof a, &err) == 0 &&
               !strcmp(b, "ipc:///tmp/x") && !a[0]);
    GPP_EXPECT(gpp_net_bind_endpoint("tcp://node", b, sizeof b, a, sizeof a, &err) == -1 &&
               strstr(err.msg, "no port"));
}

static void t_iface(void)
{
    gpp_err_t err = {{0}};
    char a[GPP_NET_ADDR_LEN];
    GPP_EXPECT(gpp_net_iface_addr("lo", a, sizeof a, &err) == 0 && !strcmp(a, "127.0.0.1"));
    GPP_EXPECT(gpp_net_is_local("127.0.0.1") && !gpp_net_is_local("192.0.2.1")); /* TEST-NET-1 */
    GPP_EXPECT_MSG(gpp_net_iface_addr("nosuch0", a, sizeof a, &err) == -1 &&
                       strstr(err.msg, "interface 'nosuch0' has no IPv4 address") &&
                       strstr(err.msg, "lo"),
                   "%s", err.msg);
    GPP_EXPECT(gpp_net_route_src("127.0.0.1", a, sizeof a, &err) == 0 && !strcmp(a, "127.0.0.1"));
}

static void t_data_addr(void)
{
    gpp_err_t err = {{0}};
    char a[GPP_NET_ADDR_LEN], why[64];
    /* all on loopback: loopback is right */
    GPP_EXPECT_MSG(gpp_net_data_addr(NULL, NULL, "127.0.0.1", "tcp://127.0.0.1:5555", a, sizeof a,
                                     why, sizeof why, &err) == 0 &&
                       !strcmp(a, "127.0.0.1") && !strcmp(why, "host name 127.0.0.1"),
                   "%s %s %s", a, why, err.msg);
    /* a cluster-file name that is no host here: the route to the coordinator */
    GPP_EXPECT_MSG(gpp_net_data_addr(NULL, NULL, "n7.invalid", "tcp://localhost:5555", a, sizeof a,
                                     why, sizeof why, &err) == 0 &&
                       !strcmp(a, "127.0.0.1") && strstr(why, "route to the coordinator"),
                   "%s %s %s", a, why, err.msg);
    GPP_EXPECT(gpp_net_data_addr("10.9.8.7", NULL, "127.0.0.1", "tcp://127.0.0.1:1", a, sizeof a,
                                 why, sizeof why, &err) == 0 &&
               !strcmp(a, "10.9.8.7") && !strcmp(why, "--advertise"));
    GPP_EXPECT(
        gpp_net_data_addr(NULL, "lo", "x", "tcp://127.0.0.1:1", a, sizeof a, NULL, 0, &err) == 0 &&
        !strcmp(a, "127.0.0.1"));
    GPP_EXPECT(gpp_net_data_addr(NULL, "nosuch0", "x", "tcp://127.0.0.1:1", a, sizeof a, NULL, 0,
                                 &err) == -1 &&
               strstr(err.msg, "--iface: interface 'nosuch0'"));
    GPP_EXPECT_MSG(gpp_net_data_addr(NULL, NULL, "x", "tcp://coord.invalid:1", a, sizeof a, NULL, 0,
                                     &err) == -1 &&
                       strstr(err.msg, "--coordinator: host name 'coord.invalid' does not resolve"),
                   "%s", err.msg);
}

static const gpp_test_case_t cases[] = {{"split", t_split},
                                        {"bind", t_bind},
                                        {"iface", t_iface},
                                        {"data_addr", t_data_addr},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
