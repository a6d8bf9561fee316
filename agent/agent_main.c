/* gpp-agent: one stage replica of a job (agent/gpp_agent.h): connects to
 * the coordinator, registers, heartbeats, and on its assignment trains its
 * stage replica, reporting metrics per iteration. See docs/coordinator.md.
 *
 *   gpp-agent --coordinator tcp://HOST:PORT --host NAME --slot N [options]
 *
 * Exit status: 0 after Shutdown, 1 after Abort, Reject, a lost coordinator
 * or a failure, 2 on a bad command line, 128+N on signal N. */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/gpp_agent.h"
#include "common/gpp_net.h"
#include "common/gpp_curve.h"
#include "common/gpp_parse.h"
#include "common/gpp_sigfd.h"
#include "common/gpp_version.h"
#include "kernels/gpp_backend.h"

static void s_usage(FILE *f)
{
    fprintf(f, "usage: gpp-agent --coordinator tcp://HOST:PORT --host NAME --slot N\n"
               "                 [--backend cpu|cuda] [--gpu N]\n"
               "                 [--heartbeat-ms N] [--timeout-ms N] [--mem-bytes N]\n"
               "                 [--threads N] [--advertise ADDR | --iface NAME]\n"
               "                 [--comm-timeout-ms N] [--control-barriers N] [--version]\n"
               "                 [--coordinator-key FILE|Z85 --key FILE | --key-dir DIR]\n"
               "                 [--key-fd N]\n"
               "  --advertise ADDR  data-plane address (or host name) the other agents reach\n"
               "                    this one at (--data-host is the same); default: the --host\n"
               "                    name if it resolves to a network address of this host,\n"
               "                    else the address of the interface that reaches the\n"
               "                    coordinator\n"
               "  --iface NAME      the data plane uses this interface's IPv4 address\n"
               "  --coordinator-key the coordinator's public key (coordinator.key from\n"
               "                    gpp-coordinator --keygen, or its Z85 text): CURVE on\n"
               "  --key             this agent's secret cert (agent-<i>.key_secret, mode 0600)\n"
               "  --key-dir DIR     both from a --keygen directory: DIR/coordinator.key and\n"
               "                    DIR/agent-<slot>.key_secret (one line for every systemd\n"
               "                    instance: GPP_AGENT_ARGS in agent.env)\n"
               "  --key-fd N        keys from an inherited fd (the coordinator's local launch)\n");
}

/* The control plane's keys (gpp_curve.h), kept for gpp_curve_identity_set. */
static gpp_curve_client_t s_keys;
static int s_have_keys;

static int s_parse(int argc, char **argv, gpp_agent_cfg_t *o)
{
    const char *server_key = NULL, *key_file = NULL, *key_dir = NULL;
    int key_fd = -1;
    static const struct option longs[] = {{"coordinator", required_argument, 0, 'c'},
                                          {"host", required_argument, 0, 'H'},
                                          {"slot", required_argument, 0, 's'},
                                          {"heartbeat-ms", required_argument, 0, 'b'},
                                          {"timeout-ms", required_argument, 0, 't'},
                                          {"mem-bytes", required_argument, 0, 'm'},
                                          {"threads", required_argument, 0, 'T'},
                                          {"control-barriers", required_argument, 0, 'B'},
                                          {"data-host", required_argument, 0, 'D'},
                                          {"advertise", required_argument, 0, 'D'},
                                          {"iface", required_argument, 0, 'I'},
                                          {"comm-timeout-ms", required_argument, 0, 'C'},
                                          {"coordinator-key", required_argument, 0, 'S'},
                                          {"key", required_argument, 0, 'k'},
                                          {"key-fd", required_argument, 0, 'F'},
                                          {"key-dir", required_argument, 0, 'K'},
                                          {"backend", required_argument, 0, 'A'},
                                          {"gpu", required_argument, 0, 'g'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    static char hostname[256];
    static char data_addr[GPP_NET_ADDR_LEN];
    const char *iface = NULL;
    memset(o, 0, sizeof *o);
    o->ctl.slot = -1;
    o->ctl.backend = GPP__BACKEND__BACKEND_CPU;
    o->ctl.mem_bytes = 0; /* the device's (CPU: the host's) total memory */
    o->gpu = -1;          /* the slot index */
    o->ctl.heartbeat_ms = 500;
    o->ctl.timeout_ms = 5000;
    o->threads = 1;
    int c, idx;
    int64_t v;
    gpp_device_kind_t kind;
    while ((c = getopt_long(argc, argv, "h", longs, &idx)) != -1) {
        switch (c) {
        case 'c':
            o->ctl.endpoint = optarg;
            break;
        case 'H':
            o->ctl.host = optarg;
            break;
        case 's':
            if (gpp_parse_flag_int64("gpp-agent", "--slot", optarg, 0, INT_MAX, &v) < 0)
                return -1;
            o->ctl.slot = (int)v;
            break;
        case 'b':
            if (gpp_parse_flag_int64("gpp-agent", "--heartbeat-ms", optarg, 1, INT_MAX, &v) < 0)
                return -1;
            o->ctl.heartbeat_ms = (int)v;
            break;
        case 't':
            if (gpp_parse_flag_int64("gpp-agent", "--timeout-ms", optarg, 2, INT_MAX, &v) < 0)
                return -1;
            o->ctl.timeout_ms = (int)v;
            break;
        case 'm':
            if (gpp_parse_flag_int64("gpp-agent", "--mem-bytes", optarg, 0, LONG_MAX, &v) < 0)
                return -1;
            o->ctl.mem_bytes = v;
            break;
        case 'T':
            if (gpp_parse_flag_int64("gpp-agent", "--threads", optarg, 1, 1024, &v) < 0)
                return -1;
            o->threads = (int)v;
            break;
        case 'B':
            if (gpp_parse_flag_int64("gpp-agent", "--control-barriers", optarg, 0, INT_MAX, &v) < 0)
                return -1;
            o->control_barriers = (int)v;
            break;
        case 'D':
            o->data_host = optarg;
            break;
        case 'I':
            iface = optarg;
            break;
        case 'A':
            if (gpp_device_kind_parse(optarg, &kind) < 0) {
                fprintf(stderr,
                        "gpp-agent: --backend: expected " GPP_DEVICE_KIND_CHOICES ", got '%s'\n",
                        optarg);
                return -1;
            }
            o->ctl.backend = gpp_msg_backend(kind);
            break;
        case 'g': /* a GPU: the agent is a CUDA agent */
            if (gpp_parse_flag_int64("gpp-agent", "--gpu", optarg, 0, 1023, &v) < 0)
                return -1;
            o->gpu = (int)v;
            o->ctl.backend = GPP__BACKEND__BACKEND_CUDA;
            break;
        case 'C':
            if (gpp_parse_flag_int64("gpp-agent", "--comm-timeout-ms", optarg, 1, INT_MAX, &v) < 0)
                return -1;
            o->comm_timeout_ms = (int)v;
            break;
        case 'S':
            server_key = optarg;
            break;
        case 'k':
            key_file = optarg;
            break;
        case 'K':
            key_dir = optarg;
            break;
        case 'F':
            if (gpp_parse_flag_int64("gpp-agent", "--key-fd", optarg, 3, INT_MAX, &v) < 0)
                return -1;
            key_fd = (int)v;
            break;
        case 'h':
            s_usage(stdout);
            exit(0);
        default:
            s_usage(stderr);
            return -1;
        }
    }
    if (optind != argc || !o->ctl.endpoint || o->ctl.slot < 0) {
        fprintf(stderr, "gpp-agent: --coordinator and --slot are required\n");
        s_usage(stderr);
        return -1;
    }
    if (!o->ctl.endpoint[0]) { /* the unit's ${GPP_COORDINATOR} with no environment file */
        fprintf(stderr, "gpp-agent: --coordinator is empty: pass tcp://HOST:PORT (the cluster "
                        "file's [coordinator] endpoint); under systemd set GPP_COORDINATOR in "
                        "the unit's environment file (gpp-agent@.service: EnvironmentFile=, "
                        "e.g. /etc/gpp/agent.env)\n");
        return -1;
    }
    static char dir_server[4096], dir_key[4096];
    if (key_dir) {
        if (server_key || key_file || key_fd >= 0) {
            fprintf(stderr, "gpp-agent: --key-dir names both keys; it excludes --key, "
                            "--coordinator-key and --key-fd\n");
            return -1;
        }
        if (!key_dir[0]) { /* ${GPP_KEY_DIR} of a unit whose environment lacks it */
            fprintf(stderr, "gpp-agent: --key-dir is empty: pass the directory gpp-coordinator "
                            "--keygen made\n");
            return -1;
        }
        snprintf(dir_server, sizeof dir_server, "%s/coordinator.key", key_dir);
        snprintf(dir_key, sizeof dir_key, "%s/agent-%d.key_secret", key_dir, o->ctl.slot);
        server_key = dir_server;
        key_file = dir_key;
    }
    if (key_fd >= 0 && (server_key || key_file)) {
        fprintf(stderr, "gpp-agent: --key-fd is the local launch's; it excludes --key and "
                        "--coordinator-key\n");
        return -1;
    }
    if (!server_key != !key_file) {
        fprintf(stderr, "gpp-agent: --coordinator-key and --key go together (CURVE needs the "
                        "coordinator's public key and this agent's secret cert; gpp-coordinator "
                        "--keygen DIR makes both)\n");
        return -1;
    }
    static char keys_from[8300];
    if (key_dir)
        snprintf(keys_from, sizeof keys_from, "--key-dir %s: %s and %s", key_dir, dir_server,
                 dir_key);
    else if (server_key)
        snprintf(keys_from, sizeof keys_from, "--coordinator-key %s --key %s", server_key,
                 key_file);
    o->ctl.keys_from = keys_from[0] ? keys_from : NULL;
    gpp_err_t err = {{0}};
    if (key_fd >= 0 || server_key) {
        int rc = key_fd >= 0 ? gpp_curve_client_from_fd(&s_keys, key_fd, &err)
                             : gpp_curve_client_load(&s_keys, server_key, key_file, &err);
        if (rc < 0) {
            fprintf(stderr, "gpp-agent: %s\n", err.msg);
            return -1;
        }
        s_have_keys = 1;
    }
    if (!o->ctl.host || !o->ctl.host[0]) {
        if (gethostname(hostname, sizeof hostname - 1) < 0)
            snprintf(hostname, sizeof hostname, "localhost");
        o->ctl.host = hostname;
    }
    if (o->data_host && iface) {
        fprintf(stderr, "gpp-agent: --advertise and --iface both name the data-plane address: "
                        "pass one of the two\n");
        return -1;
    }
    /* the address every peer's Gloo pair connects to: never loopback when the
     * coordinator (and so some agent) is on another host */
    char why[128];
    if (gpp_net_data_addr(o->data_host, iface, o->ctl.host, o->ctl.endpoint, data_addr,
                          sizeof data_addr, why, sizeof why, &err) < 0) {
        fprintf(stderr, "gpp-agent: %s\n", err.msg);
        return -1;
    }
    o->data_host = data_addr;
    gpp_info("agent %s:%d: data plane on %s (%s)", o->ctl.host, o->ctl.slot, data_addr, why);
    if (!o->comm_timeout_ms) /* a dead peer is the coordinator's to report first */
        o->comm_timeout_ms = o->ctl.timeout_ms * 4 > 60000 ? o->ctl.timeout_ms * 4 : 60000;
    return 0;
}

int main(int argc, char **argv)
{
    int start = gpp_main_start("gpp-agent", argc, argv);
    if (start >= 0)
        return start;
    gpp_cpu_blas_reexec(argv); /* before OpenBLAS's choice matters */
    gpp_agent_cfg_t cfg;
    if (s_parse(argc, argv, &cfg) < 0)
        return 2;
    /* before any socket or thread: both of the agent's sockets to the
       coordinator (control, rendezvous) use these keys */
    gpp_curve_identity_set(s_have_keys ? &s_keys : NULL);
    explicit_bzero(&s_keys, sizeof s_keys);
    gpp_err_t err = {{0}};
    cfg.sigfd = gpp_sigfd_open(&err);
    if (cfg.sigfd < 0) {
        gpp_error("%s", err.msg);
        return 1;
    }
    gpp_agent_t *agent = gpp_agent_new(&cfg, &err);
    if (!agent) {
        gpp_error("%s", err.msg);
        return 1;
    }
    int code = gpp_agent_run(agent);
    if (gpp_agent_abandoned(agent)) { /* a stuck worker thread: leave without it */
        fflush(NULL);
        _exit(code);
    }
    gpp_agent_destroy(&agent);
    return code;
}
