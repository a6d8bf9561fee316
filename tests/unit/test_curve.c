/* test_curve: the control plane's CURVE admission (common/gpp_curve.h) and
 * frame size limit. Key files and their modes, the launcher's fd
 * hand-over, and a real gpp_coord (control-only job) in a thread with
 * CURVE on: a peer without keys and a peer with an unknown key never get an
 * answer (the second is refused and counted by the ZAP handler), an
 * admitted peer registers and finishes the job, and a frame longer than
 * GPP_MSG_MAX_BYTES from an admitted peer drops that peer without the
 * coordinator buffering it. */
#include <czmq.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/gpp_curve.h"
#include "coordinator/gpp_coord.h"
#include "tests/gpp_coord_fixture.h"
#include "proto/gpp_msg.h"
#include "tests/gpp_test.h"

static int s_mode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

/* ---- key files ---- */

static void t_keygen(void)
{
    char dir[] = "/tmp/test_curve_XXXXXX";
    GPP_EXPECT(mkdtemp(dir) != NULL);
    char keys[512], p[600];
    snprintf(keys, sizeof keys, "%s/keys", dir);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_curve_keygen(keys, 3, 1, &err) == 0, "%s", err.msg);
    GPP_EXPECT(s_mode(keys) == 0700);
    snprintf(p, sizeof p, "%s/coordinator.key_secret", keys);
    GPP_EXPECT(s_mode(p) == 0600);
    snprintf(p, sizeof p, "%s/agent-2.key_secret", keys);
    GPP_EXPECT(s_mode(p) == 0600);
    snprintf(p, sizeof p, "%s/agents/agent-2.key", keys);
    GPP_EXPECT(s_mode(p) == 0644);
    snprintf(p, sizeof p, "%s/agents/agent-3.key", keys);
    GPP_EXPECT(s_mode(p) == -1);
    snprintf(p, sizeof p, "%s/monitor-0.key_secret", keys);
    GPP_EXPECT(s_mode(p) == 0600);
    snprintf(p, sizeof p, "%s/monitors/monitor-0.key", keys);
    GPP_EXPECT(s_mode(p) == 0644);
    /* nothing is overwritten */
    GPP_EXPECT(gpp_curve_keygen(keys, 3, 1, &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "already holds keys"), "%s", err.msg);

    /* an agent's keys: the coordinator's public cert (or its Z85) + its pair */
    gpp_curve_client_t a, b;
    char srv[600], sec[600];
    snprintf(srv, sizeof srv, "%s/coordinator.key", keys);
    snprintf(sec, sizeof sec, "%s/agent-1.key_secret", keys);
    GPP_EXPECT_MSG(gpp_curve_client_load(&a, srv, sec, &err) == 0, "%s", err.msg);
    GPP_EXPECT(strlen(a.public_key) == 40 && strlen(a.secret_key) == 40);
    GPP_EXPECT_MSG(gpp_curve_client_load(&b, a.server_key, sec, &err) == 0, "%s", err.msg);
    GPP_EXPECT(!memcmp(&a, &b, sizeof a));
    /* the coordinator's secret never ends up as an agent's key */
    GPP_EXPECT(strcmp(a.public_key, a.server_key) != 0);
    GPP_EXPECT(gpp_curve_client_load(&b, "not-a-key", sec, &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "--coordinator-key not-a-key"), "%s", err.msg);
    /* a secret others may read is refused, naming the fix */
    GPP_EXPECT(chmod(sec, 0644) == 0);
    GPP_EXPECT(gpp_curve_client_load(&b, srv, sec, &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "chmod 600") && strstr(err.msg, "agent-1.key_secret"), "%s",
                   err.msg);

    /* the server side: the coordinator's pair and the allow-list */
    gpp_curve_client_t run;
    gpp_curve_server_t *s = gpp_curve_server_load(keys, &run, &err);
    GPP_EXPECT_MSG(s != NULL, "%s", err.msg);
    if (s) {
        GPP_EXPECT(gpp_curve_server_size(s) == 3);
        /* monitors/monitor-0.key and the run directory's fresh pair */
        GPP_EXPECT(gpp_curve_server_monitors(s) == 2);
        GPP_EXPECT(!strcmp(gpp_curve_server_public(s), a.server_key));
        GPP_EXPECT(!strcmp(run.server_key, a.server_key) && strcmp(run.public_key, a.public_key));
        /* the run directory's files load as a monitor's keys */
        char rd[600];
        snprintf(rd, sizeof rd, "%s/run", dir);
        GPP_EXPECT(mkdir(rd, 0700) == 0);
        GPP_EXPECT_MSG(gpp_curve_client_save(&run, rd, &err) == 0, "%s", err.msg);
        snprintf(p, sizeof p, "%s/monitor.key_secret", rd);
        GPP_EXPECT(s_mode(p) == 0600);
        snprintf(srv, sizeof srv, "%s/coordinator.key", rd);
        GPP_EXPECT_MSG(gpp_curve_client_load(&b, srv, p, &err) == 0, "%s", err.msg);
        GPP_EXPECT(!memcmp(&b, &run, sizeof b));
        GPP_EXPECT(gpp_curve_client_save(&run, rd, &err) < 0); /* never overwrites */
        /* one ZAP handler per process */
        gpp_curve_server_t *s2 = gpp_curve_server_load(keys, NULL, &err);
        GPP_EXPECT(s2 == NULL);
        GPP_EXPECT_MSG(strstr(err.msg, "ZAP handler"), "%s", err.msg);
    }
    gpp_curve_server_destroy(&s);
    GPP_EXPECT(s == NULL);
    /* one key, one role: an agent's key among the monitors is refused */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cp '%s/agents/agent-0.key' '%s/monitors/x.key'", keys, keys);
    GPP_EXPECT(system(cmd) == 0);
    GPP_EXPECT(gpp_curve_server_load(keys, NULL, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "monitors/x.key is the key of agent:agent-0"), "%s", err.msg);
    snprintf(p, sizeof p, "%s/monitors/x.key", keys);
    unlink(p);
    /* roles from ZAP user ids */
    GPP_EXPECT(gpp_curve_user_role("agent:agent-0") == GPP_CURVE_ROLE_AGENT);
    GPP_EXPECT(gpp_curve_user_role("monitor:run-dir") == GPP_CURVE_ROLE_MONITOR);
    GPP_EXPECT(gpp_curve_user_role("") == GPP_CURVE_ROLE_NONE);
    GPP_EXPECT(gpp_curve_user_role(NULL) == GPP_CURVE_ROLE_NONE);
    /* an empty allow-list is an error, not an open door */
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/agents/agent-%d.key", keys, i);
        unlink(p);
    }
    GPP_EXPECT(gpp_curve_server_load(keys, NULL, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "no agent key"), "%s", err.msg);
    snprintf(p, sizeof p, "%s/coordinator.key_secret", keys);
    GPP_EXPECT(chmod(p, 0640) == 0);
    GPP_EXPECT(gpp_curve_server_load(keys, NULL, &err) == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, "chmod 600"), "%s", err.msg);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    GPP_EXPECT(system(cmd) == 0);
}

/* A key argument is a file whenever such a file exists: `mktemp -d` names
 * make DIR/keys/coordinator.key exactly 40 characters of the Z85 alphabet
 * (issue 33), which was read as a key, not as the file. Z85 text is taken
 * only where it cannot be a path. */
static void t_key_path_40(void)
{
    char dir[] = "/tmp/tcurve4-XXXXXX"; /* /tmp/ + 14 + /keys/coordinator.key = 40 */
    GPP_EXPECT(mkdtemp(dir) != NULL);
    char keys[64], srv[64], sec[128];
    snprintf(keys, sizeof keys, "%s/keys", dir);
    snprintf(srv, sizeof srv, "%s/coordinator.key", keys);
    snprintf(sec, sizeof sec, "%s/agent-0.key_secret", keys);
    uint8_t raw[32];
    GPP_EXPECT_MSG(strlen(srv) == 40 && zmq_z85_decode(raw, srv) != NULL,
                   "%s: the case needs a path that decodes as Z85", srv);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_curve_keygen(keys, 1, 0, &err) == 0, "%s", err.msg);
    zcert_t *c = zcert_load(srv);
    GPP_EXPECT(c != NULL);
    gpp_curve_client_t a;
    GPP_EXPECT_MSG(gpp_curve_client_load(&a, srv, sec, &err) == 0, "%s", err.msg);
    GPP_EXPECT_MSG(c && !strcmp(a.server_key, zcert_public_txt(c)), "server key %s, file's %s",
                   a.server_key, c ? zcert_public_txt(c) : "?");
    zcert_destroy(&c);
    /* a missing file in a directory that exists is a missing file, named */
    char gone[64];
    snprintf(gone, sizeof gone, "%s/coordinator.kez", keys);
    GPP_EXPECT(strlen(gone) == 40 && zmq_z85_decode(raw, gone) != NULL);
    gpp_curve_client_t b;
    GPP_EXPECT(gpp_curve_client_load(&b, gone, sec, &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, gone) && strstr(err.msg, "No such file"), "%s", err.msg);
    /* the key's own text still works, also one that starts with '/' */
    GPP_EXPECT_MSG(gpp_curve_client_load(&b, a.server_key, sec, &err) == 0, "%s", err.msg);
    GPP_EXPECT(!strcmp(a.server_key, b.server_key));
    char slash_key[41];
    for (int k = 0; k < 32; k++)
        raw[k] = (uint8_t)(0x11 + 7 * k);
    /* the first 4 bytes big-endian in [69, 70) x 85^4: Z85 digit 69 is '/' */
    raw[0] = 0xd6, raw[1] = 0xaf, raw[2] = 0xf3, raw[3] = 0xee;
    zmq_z85_encode(slash_key, raw, 32);
    GPP_EXPECT(slash_key[0] == '/');
    GPP_EXPECT_MSG(gpp_curve_client_load(&b, slash_key, sec, &err) == 0, "%s", err.msg);
    GPP_EXPECT(!strcmp(b.server_key, slash_key));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    GPP_EXPECT(system(cmd) == 0);
}

static void t_fd_handover(void)
{
    gpp_curve_client_t keys[2], got;
    gpp_err_t err = {{0}};
    gpp_curve_server_t *s = gpp_curve_server_new_ephemeral(2, keys, NULL, &err);
    GPP_EXPECT_MSG(s != NULL, "%s", err.msg);
    if (!s)
        return;
    GPP_EXPECT(strcmp(keys[0].public_key, keys[1].public_key) != 0);
    GPP_EXPECT(!strcmp(keys[1].server_key, gpp_curve_server_public(s)));
    int fd = gpp_curve_client_to_fd(&keys[1], &err);
    GPP_EXPECT_MSG(fd >= 0, "%s", err.msg);
    GPP_EXPECT((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0); /* no other child inherits it */
    GPP_EXPECT(write(fd, "x", 1) < 0);                  /* sealed */
    GPP_EXPECT_MSG(gpp_curve_client_from_fd(&got, fd, &err) == 0, "%s", err.msg);
    GPP_EXPECT(!memcmp(&got, &keys[1], sizeof got));
    /* anything else on that fd is refused */
    int pfd[2];
    GPP_EXPECT(pipe(pfd) == 0);
    GPP_EXPECT(write(pfd[1], "garbage\n", 8) == 8);
    close(pfd[1]);
    GPP_EXPECT(gpp_curve_client_from_fd(&got, pfd[0], &err) < 0);
    GPP_EXPECT_MSG(strstr(err.msg, "--key-fd"), "%s", err.msg);
    gpp_curve_server_destroy(&s);
}

/* ---- a CURVE coordinator in a thread (tests/gpp_coord_fixture.h) ---- */

typedef gpp_fixture_coord_t s_run_t;

/* One agent (h:0), one barrier, CURVE from srv. */
static int s_start(s_run_t *r, const gpp_curve_server_t *srv)
{
    gpp_fixture_coord_init(r, 1);
    r->cfg.timeout_ms = 10000;
    r->cfg.start_timeout_ms = 20000;
    r->cfg.barriers = 1;
    r->cfg.curve = srv;
    return gpp_fixture_coord_start(r);
}

/* A DEALER with keys (NULL: plaintext) and the frame size limit. */
static zsock_t *s_peer(int port, const gpp_curve_client_t *keys)
{
    zsock_t *s = zsock_new(ZMQ_DEALER);
    zsock_set_rcvtimeo(s, 1000);
    zsock_set_linger(s, 0);
    gpp_curve_identity_set(keys);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_curve_client_apply(zsock_resolve(s), GPP_MSG_MAX_BYTES, &err) == 0, "%s",
                   err.msg);
    gpp_curve_identity_set(NULL);
    zsock_connect(s, "tcp://127.0.0.1:%d", port);
    return s;
}

static void s_send(zsock_t *s, gpp_msg_type_t type, void *body, uint64_t seq, int sender)
{
    gpp_msg_t m;
    gpp_msg_wrap(&m, seq, sender, type, body);
    uint8_t *buf = NULL;
    size_t len = 0;
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_msg_encode(&m, &buf, &len, &err) == 0, "%s", err.msg);
    zframe_t *f = zframe_new(buf, len);
    free(buf);
    zframe_send(&f, s, 0);
}

static void s_register(zsock_t *s)
{
    Gpp__Register r = GPP__REGISTER__INIT;
    r.host = "h";
    r.backend = GPP__BACKEND__BACKEND_CPU;
    r.mem_bytes = 1 << 20;
    r.pid = 4242;
    r.build_version = (char *)GPP_VERSION;
    r.gpu = -1; /* a CPU agent's device (protocol 3) */
    r.device_name = "cpu";
    r.mem_total_bytes = 1 << 30;
    r.mem_free_bytes = 1 << 29;
    s_send(s, GPP__ENVELOPE__BODY_REGISTER, &r, 1, GPP_MSG_SENDER_UNREGISTERED);
}

/* The next message other than a heartbeat; NULL after the 1 s timeout. */
static gpp_msg_t *s_recv(zsock_t *s)
{
    for (;;) {
        zframe_t *f = zframe_recv(s);
        if (!f)
            return NULL;
        gpp_err_t err = {{0}};
        gpp_msg_t *m = gpp_msg_decode(zframe_data(f), zframe_size(f), &err);
        zframe_destroy(&f);
        if (!m || m->body_case != GPP__ENVELOPE__BODY_HEARTBEAT)
            return m;
        gpp_msg_destroy(&m);
    }
}

/* Peak resident set of this process, kB (/proc/self/status VmHWM). */
static long s_hwm_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* A child (own libzmq context: nothing of the parent's threads) sends one
 * frame of `bytes` with the admitted keys and exits 0 once the coordinator
 * drops the connection, 1 when it is still connected after 20 s. */
static pid_t s_spawn_big_sender(int port, const gpp_curve_client_t *keys, size_t bytes)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, ev = ZMQ_EVENT_DISCONNECTED;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, keys->server_key, 40);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, keys->public_key, 40);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, keys->secret_key, 40);
    zmq_socket_monitor(s, "inproc://mon", ev);
    void *mon = zmq_socket(ctx, ZMQ_PAIR);
    zmq_connect(mon, "inproc://mon");
    int timeout_ms = 20000;
    zmq_setsockopt(mon, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
    zmq_connect(s, ep);
    char *big = calloc(1, bytes);
    zmq_send(s, big, bytes, 0);
    zmq_msg_t m;
    zmq_msg_init(&m);
    int got = zmq_msg_recv(&m, mon, 0) >= 0; /* the event frame */
    gpp_test_exit(got ? 0 : 1);
    return 0;
}

static void s_on_usr1(int sig)
{
    (void)sig;
}

static void t_coord_admission(void)
{
    gpp_curve_client_t keys[1], unknown[1];
    gpp_err_t err = {{0}};
    /* a second key pair nobody admitted, made (and its handler stopped) first */
    gpp_curve_server_t *other = gpp_curve_server_new_ephemeral(1, unknown, NULL, &err);
    GPP_EXPECT(other != NULL);
    gpp_curve_server_destroy(&other);
    /* a signal for the process, with a handler, at a moment the only
       thread that does not block it is the ZAP handler's (made while this
       thread did not): an interrupted poll must not end the handler, or
       libzmq would let every CURVE client in from then on */
    struct sigaction sa = {.sa_handler = s_on_usr1};
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    gpp_curve_server_t *srv = gpp_curve_server_new_ephemeral(1, keys, NULL, &err);
    GPP_EXPECT_MSG(srv != NULL, "%s", err.msg);
    if (!srv)
        return;
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    for (int i = 0; i < 5; i++) {
        kill(getpid(), SIGUSR1);
        usleep(20 * 1000);
    }
    snprintf(unknown[0].server_key, sizeof unknown[0].server_key, "%s", keys[0].server_key);
    s_run_t run;
    int port = s_start(&run, srv);
    GPP_EXPECT(port > 0);
    if (port <= 0) {
        gpp_curve_server_destroy(&srv);
        return;
    }

    /* without keys: the handshake fails, nothing reaches the coordinator */
    zsock_t *plain = s_peer(port, NULL);
    s_register(plain);
    gpp_msg_t *m = s_recv(plain);
    GPP_EXPECT_MSG(m == NULL, "a peer without keys got %s", gpp_msg_type_name(m->body_case));
    gpp_msg_destroy(&m);
    zsock_destroy(&plain);

    /* with a key nobody admitted: refused by the ZAP handler, counted, logged */
    zsock_t *stranger = s_peer(port, &unknown[0]);
    s_register(stranger);
    m = s_recv(stranger);
    GPP_EXPECT_MSG(m == NULL, "an unknown key got %s", gpp_msg_type_name(m->body_case));
    gpp_msg_destroy(&m);
    for (int i = 0; i < 100 && gpp_curve_server_refused(srv) == 0; i++)
        usleep(50 * 1000); /* the ZAP handler answers on its own thread */
    GPP_EXPECT(gpp_curve_server_refused(srv) >= 1);
    zsock_destroy(&stranger);

    /* a frame over the limit from an admitted key: the peer is dropped,
       the frame is never delivered and never buffered */
    long hwm0 = s_hwm_kb();
    pid_t big = s_spawn_big_sender(port, &keys[0], (size_t)GPP_MSG_MAX_BYTES + 1);
    int status = -1;
    waitpid(big, &status, 0);
    GPP_EXPECT_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                   "the coordinator kept the connection of an oversized frame (status 0x%x)",
                   status);
    long grew_kb = s_hwm_kb() - hwm0;
    printf("  peak RSS grew by %ld kB while refusing a %u-byte frame\n", grew_kb,
           GPP_MSG_MAX_BYTES + 1);
    GPP_EXPECT_MSG(grew_kb < (long)(GPP_MSG_MAX_BYTES / 1024 / 4),
                   "peak RSS grew by %ld kB while refusing a %u-byte frame", grew_kb,
                   GPP_MSG_MAX_BYTES + 1);

    /* the admitted key registers and runs the job to its end */
    zsock_t *agent = s_peer(port, &keys[0]);
    zsock_set_rcvtimeo(agent, 10000);
    s_register(agent);
    m = s_recv(agent);
    GPP_EXPECT_MSG(m && m->body_case == GPP__ENVELOPE__BODY_REGISTER_ACK, "got %s",
                   m ? gpp_msg_type_name(m->body_case) : "nothing");
    gpp_msg_destroy(&m);
    Gpp__BarrierEnter b = GPP__BARRIER_ENTER__INIT;
    s_send(agent, GPP__ENVELOPE__BODY_BARRIER_ENTER, &b, 2, 0);
    int released = 0, shutdown = 0;
    while (!shutdown && (m = s_recv(agent))) {
        released |= m->body_case == GPP__ENVELOPE__BODY_BARRIER_RELEASE;
        shutdown |= m->body_case == GPP__ENVELOPE__BODY_SHUTDOWN;
        gpp_msg_destroy(&m);
    }
    GPP_EXPECT(released && shutdown);
    zsock_destroy(&agent);
    gpp_fixture_coord_join(&run);
    GPP_EXPECT_MSG(run.rc == 0, "coordinator rc %d", run.rc);
    GPP_EXPECT_MSG(run.dropped == 0, "%llu frames dropped", (unsigned long long)run.dropped);
    gpp_curve_server_destroy(&srv);
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL); /* the pending one runs the no-op handler */
    signal(SIGUSR1, SIG_DFL);
}

static const gpp_test_case_t cases[] = {{"keygen", t_keygen},
                                        {"key_path_40", t_key_path_40},
                                        {"fd_handover", t_fd_handover},
                                        {"coord_admission", t_coord_admission},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
