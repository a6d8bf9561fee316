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
#include "common/gpp_parse.h"
#include "common/gpp_sigfd.h"
#include "common/gpp_version.h"
#include "kernels/gpp_backend.h"

static void s_usage(FILE *f)
{
    fprintf(f, "usage: gpp-agent --coordinator tcp://HOST:PORT --host NAME --slot N\n"
               "                 [--backend cpu|cuda] [--gpu N]\n"
               "                 [--heartbeat-ms N] [--timeout-ms N] [--mem-bytes N]\n"
               "                 [--threads N] [--data-host ADDR] [--comm-timeout-ms N]\n"
               "                 [--control-barriers N] [--version]\n");
}

static int s_parse(int argc, char **argv, gpp_agent_cfg_t *o)
{
    static const struct option longs[] = {{"coordinator", required_argument, 0, 'c'},
                                          {"host", required_argument, 0, 'H'},
                                          {"slot", required_argument, 0, 's'},
                                          {"heartbeat-ms", required_argument, 0, 'b'},
                                          {"timeout-ms", required_argument, 0, 't'},
                                          {"mem-bytes", required_argument, 0, 'm'},
                                          {"threads", required_argument, 0, 'T'},
                                          {"control-barriers", required_argument, 0, 'B'},
                                          {"data-host", required_argument, 0, 'D'},
                                          {"comm-timeout-ms", required_argument, 0, 'C'},
                                          {"backend", required_argument, 0, 'k'},
                                          {"gpu", required_argument, 0, 'g'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    static char hostname[256];
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
        case 'k':
            if (strcmp(optarg, "cpu") == 0)
                o->ctl.backend = GPP__BACKEND__BACKEND_CPU;
            else if (strcmp(optarg, "cuda") == 0)
                o->ctl.backend = GPP__BACKEND__BACKEND_CUDA;
            else {
                fprintf(stderr, "gpp-agent: --backend: expected cpu or cuda, got '%s'\n", optarg);
                return -1;
            }
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
    if (!o->ctl.host || !o->ctl.host[0]) {
        if (gethostname(hostname, sizeof hostname - 1) < 0)
            snprintf(hostname, sizeof hostname, "localhost");
        o->ctl.host = hostname;
    }
    if (!o->data_host)
        o->data_host = o->ctl.host;
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
    gpp_agent_destroy(&agent);
    return code;
}
