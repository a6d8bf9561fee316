/* gpp_curve: see gpp_curve.h. */
#include "common/gpp_curve.h"

#include <assert.h>
#include <czmq.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* RFC 27: the one endpoint libzmq sends ZAP requests to, in the context of
 * the socket being authenticated (CZMQ's for every zsock). */
#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_ZAP_DOMAIN "gpp"
/* libzmq's socket option 93 (a draft in zmq.h 4.3, in Debian's library):
 * without a ZAP handler, refuse the handshake instead of admitting every
 * CURVE client ("Stonehouse"). Where the library lacks it, the handler's
 * thread is the only guard (it never ends before its server). */
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif
#define S_PATH_MAX 4096
#define S_LOG_FIRST 20      /* refusals logged one by one ... */
#define S_LOG_EVERY 1000    /* ... then one line per this many */
#define S_ALLOW_MAX 1000000 /* agent keys in a key directory */

typedef struct {
    uint8_t key[32];
    char name[80]; /* the ZAP user id: GPP_CURVE_AGENT or GPP_CURVE_MONITOR, then the name */
    int slot;      /* an agent key's slot (gpp_curve_server_slot), -1 any */
} s_allowed_t;

struct gpp_curve_server_s {
    char public_key[GPP_CURVE_Z85_LEN + 1];
    char secret_key[GPP_CURVE_Z85_LEN + 1];
    s_allowed_t *allowed; /* fixed once the handler runs */
    int n_allowed, cap_allowed;
    int n_agents; /* of them agent keys; the rest monitor keys */
    zactor_t *zap;
    int zap_bound; /* set by the actor before its ready signal */
    atomic_uint_fast64_t refused;
};

static gpp_curve_client_t s_identity;
static int s_have_identity;

/* ---- keys as text ---- */

static int s_z85_ok(const char *z85)
{
    uint8_t raw[32];
    return z85 && strlen(z85) == GPP_CURVE_Z85_LEN && zmq_z85_decode(raw, z85) != NULL;
}

/* The secret cert file of a path given as "X" or "X_secret". */
static void s_secret_path(const char *path, char *out, size_t len)
{
    size_t n = strlen(path);
    if (n >= 7 && !strcmp(path + n - 7, "_secret"))
        snprintf(out, len, "%s", path);
    else
        snprintf(out, len, "%s_secret", path);
}

/* Loads a secret cert: a regular file only its owner may read. */
static zcert_t *s_load_secret(const char *path, const char *what, gpp_err_t *err)
{
    char sp[S_PATH_MAX];
    s_secret_path(path, sp, sizeof sp);
    struct stat st;
    if (stat(sp, &st) < 0) {
        gpp_err_set(err, "%s: cannot read %s: %s; make keys with gpp-coordinator --keygen DIR",
                    what, sp, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        gpp_err_set(err, "%s: %s is not a regular file", what, sp);
        return NULL;
    }
    if (st.st_mode & 077) {
        gpp_err_set(err,
                    "%s: %s holds a secret key but has mode %04o (group or others may "
                    "read it); run chmod 600 %s",
                    what, sp, (unsigned)(st.st_mode & 07777), sp);
        return NULL;
    }
    zcert_t *c = zcert_load(sp);
    if (!c || !s_z85_ok(zcert_public_txt(c)) || !s_z85_ok(zcert_secret_txt(c)) ||
        !strcmp(zcert_secret_txt(c), "0000000000000000000000000000000000000000")) {
        zcert_destroy(&c);
        gpp_err_set(err,
                    "%s: %s is not a CZMQ secret certificate (curve public-key and "
                    "secret-key in Z85); make keys with gpp-coordinator --keygen DIR",
                    what, sp);
        return NULL;
    }
    return c;
}

/* zcert_save* write in place through fopen: refuse to follow a link or
 * reuse a file, then set the mode we promise. */
static int s_save(zcert_t *c, const char *path, int secret, gpp_err_t *err)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        return gpp_err_set(err,
                           "keygen: %s exists; nothing is overwritten (remove it or "
                           "choose another directory)",
                           path);
    int rc = secret ? zcert_save_secret(c, path) : zcert_save_public(c, path);
    if (rc < 0 || chmod(path, secret ? 0600 : 0644) < 0)
        return gpp_err_set(err, "keygen: cannot write %s: %s", path, strerror(errno));
    return 0;
}

static int s_mkdir_private(const char *dir, gpp_err_t *err)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return gpp_err_set(err, "keygen: mkdir %s: %s", dir, strerror(errno));
    struct stat st;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return gpp_err_set(err, "keygen: %s is not a directory", dir);
    if (chmod(dir, 0700) < 0)
        return gpp_err_set(err, "keygen: chmod 700 %s: %s", dir, strerror(errno));
    return 0;
}

/* One pair of a role: DIR/<sub>/<role>-<i>.key (public, the allow-list)
 * and DIR/<role>-<i>.key_secret. */
static int s_keygen_pair(const char *dir, const char *sub, const char *role, int i, gpp_err_t *err)
{
    char p[S_PATH_MAX];
    zcert_t *c = zcert_new();
    zcert_set_meta(c, "name", "%s-%d", role, i);
    if (!strcmp(sub, "agents")) /* the slot it admits (gpp_curve_server_slot) */
        zcert_set_meta(c, "slot", "%d", i);
    snprintf(p, sizeof p, "%s/%s/%s-%d.key", dir, sub, role, i);
    int rc = s_save(c, p, 0, err);
    snprintf(p, sizeof p, "%s/%s-%d.key_secret", dir, role, i);
    if (rc == 0)
        rc = s_save(c, p, 1, err);
    zcert_destroy(&c);
    return rc;
}

int gpp_curve_keygen(const char *dir, int n_agents, int n_monitors, gpp_err_t *err)
{
    assert(dir);
    if (n_agents < 1 || n_agents > S_ALLOW_MAX)
        return gpp_err_set(err, "keygen: %d agents; need 1 to %d", n_agents, S_ALLOW_MAX);
    if (n_monitors < 0 || n_monitors > S_ALLOW_MAX)
        return gpp_err_set(err, "keygen: %d monitors; need 0 to %d", n_monitors, S_ALLOW_MAX);
    char p[S_PATH_MAX];
    snprintf(p, sizeof p, "%s/coordinator.key_secret", dir);
    if (access(p, F_OK) == 0)
        return gpp_err_set(err,
                           "keygen: %s already holds keys (%s); nothing is overwritten: "
                           "remove the directory or choose another",
                           dir, p);
    if (s_mkdir_private(dir, err) < 0)
        return -1;
    snprintf(p, sizeof p, "%s/agents", dir);
    if (s_mkdir_private(p, err) < 0)
        return -1;
    snprintf(p, sizeof p, "%s/monitors", dir);
    if (n_monitors > 0 && s_mkdir_private(p, err) < 0)
        return -1;
    zcert_t *c = zcert_new();
    zcert_set_meta(c, "name", "coordinator");
    snprintf(p, sizeof p, "%s/coordinator.key", dir);
    int rc = s_save(c, p, 0, err);
    snprintf(p, sizeof p, "%s/coordinator.key_secret", dir);
    if (rc == 0)
        rc = s_save(c, p, 1, err);
    zcert_destroy(&c);
    for (int i = 0; i < n_agents && rc == 0; i++)
        rc = s_keygen_pair(dir, "agents", "agent", i, err);
    for (int i = 0; i < n_monitors && rc == 0; i++)
        rc = s_keygen_pair(dir, "monitors", "monitor", i, err);
    return rc;
}

/* Whether a key argument is the key's Z85 text rather than a path: a path
 * when anything by that name exists, or when it names a file in a
 * directory that exists (a missing key file, reported as such); Z85 text
 * only when it is 40 Z85 characters and can be neither. The Z85 alphabet
 * holds '/' and '.', and `mktemp -d` names make DIR/keys/coordinator.key
 * exactly 40 of them. A leading '/' alone (the root) is no directory part:
 * keys start with it one time in 85. */
static int s_key_text(const char *arg)
{
    struct stat st;
    if (!s_z85_ok(arg) || lstat(arg, &st) == 0)
        return 0;
    const char *slash = strrchr(arg, '/');
    if (!slash || slash == arg)
        return 1;
    char dir[GPP_CURVE_Z85_LEN + 1];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - arg), arg);
    return !(stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
}

int gpp_curve_client_load(gpp_curve_client_t *out, const char *server_key, const char *key_file,
                          gpp_err_t *err)
{
    assert(out && server_key && key_file);
    memset(out, 0, sizeof *out);
    if (s_key_text(server_key)) {
        snprintf(out->server_key, sizeof out->server_key, "%s", server_key);
    } else {
        /* a public cert: zcert_load would prefer a _secret file beside it;
           only its public key is taken */
        int readable = access(server_key, R_OK) == 0;
        const char *why = readable ? "no public-key in it" : strerror(errno);
        zcert_t *s = readable ? zcert_load(server_key) : NULL;
        if (!s || !s_z85_ok(zcert_public_txt(s))) {
            zcert_destroy(&s);
            return gpp_err_set(err,
                               "--coordinator-key %s: neither a readable certificate (%s) nor "
                               "a 40-character Z85 key (text that names no file or directory); "
                               "pass the coordinator.key that gpp-coordinator --keygen made",
                               server_key, why);
        }
        snprintf(out->server_key, sizeof out->server_key, "%s", zcert_public_txt(s));
        zcert_destroy(&s);
    }
    zcert_t *c = s_load_secret(key_file, "--key", err);
    if (!c)
        return -1;
    snprintf(out->public_key, sizeof out->public_key, "%s", zcert_public_txt(c));
    snprintf(out->secret_key, sizeof out->secret_key, "%s", zcert_secret_txt(c));
    zcert_destroy(&c);
    return 0;
}

int gpp_curve_client_save(const gpp_curve_client_t *c, const char *dir, gpp_err_t *err)
{
    char p[S_PATH_MAX];
    uint8_t pub[32], sec[32], srv[32];
    zmq_z85_decode(pub, c->public_key);
    zmq_z85_decode(sec, c->secret_key);
    zmq_z85_decode(srv, c->server_key);
    zcert_t *mine = zcert_new_from(pub, sec);
    memset(sec, 0, sizeof sec);
    zcert_t *server = zcert_new_from(srv, sec); /* only its public half is written */
    explicit_bzero(sec, sizeof sec);
    zcert_set_meta(mine, "name", "monitor");
    zcert_set_meta(server, "name", "coordinator");
    snprintf(p, sizeof p, "%s/monitor.key_secret", dir);
    int rc = s_save(mine, p, 1, err);
    snprintf(p, sizeof p, "%s/coordinator.key", dir);
    if (rc == 0)
        rc = s_save(server, p, 0, err);
    zcert_destroy(&mine);
    zcert_destroy(&server);
    return rc;
}

int gpp_curve_client_to_fd(const gpp_curve_client_t *c, gpp_err_t *err)
{
    char buf[3 * (GPP_CURVE_Z85_LEN + 1) + 1];
    int n = snprintf(buf, sizeof buf, "%s\n%s\n%s\n", c->public_key, c->secret_key, c->server_key);
    int fd = memfd_create("gpp-agent-key", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return gpp_err_set(err, "launch: memfd_create for an agent's key: %s", strerror(errno));
    if (write(fd, buf, (size_t)n) != n ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0 ||
        lseek(fd, 0, SEEK_SET) != 0) {
        gpp_err_set(err, "launch: cannot write an agent's key to its memfd: %s", strerror(errno));
        close(fd);
        fd = -1;
    }
    explicit_bzero(buf, sizeof buf);
    return fd;
}

int gpp_curve_client_from_fd(gpp_curve_client_t *out, int fd, gpp_err_t *err)
{
    memset(out, 0, sizeof *out);
    char buf[3 * (GPP_CURVE_Z85_LEN + 1) + 2];
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        if (got == sizeof buf - 1)
            break;
    }
    buf[got] = '\0';
    close(fd);
    char *lines[3] = {NULL, NULL, NULL}, *save = NULL;
    lines[0] = strtok_r(buf, "\n", &save);
    lines[1] = lines[0] ? strtok_r(NULL, "\n", &save) : NULL;
    lines[2] = lines[1] ? strtok_r(NULL, "\n", &save) : NULL;
    int ok = got == 3 * (GPP_CURVE_Z85_LEN + 1) && s_z85_ok(lines[0]) && s_z85_ok(lines[1]) &&
             s_z85_ok(lines[2]);
    if (ok) {
        snprintf(out->public_key, sizeof out->public_key, "%s", lines[0]);
        snprintf(out->secret_key, sizeof out->secret_key, "%s", lines[1]);
        snprintf(out->server_key, sizeof out->server_key, "%s", lines[2]);
    }
    explicit_bzero(buf, sizeof buf);
    if (!ok)
        return gpp_err_set(err,
                           "--key-fd %d: expected three Z85 keys (%d bytes), got %zu bytes; "
                           "this fd is for the coordinator's local launch only",
                           fd, 3 * (GPP_CURVE_Z85_LEN + 1), got);
    return 0;
}

/* ---- identity ---- */

void gpp_curve_identity_set(const gpp_curve_client_t *c)
{
    if (c)
        s_identity = *c;
    else
        explicit_bzero(&s_identity, sizeof s_identity);
    s_have_identity = c != NULL;
}

const gpp_curve_client_t *gpp_curve_identity(void)
{
    return s_have_identity ? &s_identity : NULL;
}

static int s_setopt(void *sock, int opt, const void *v, size_t len, const char *name,
                    gpp_err_t *err)
{
    if (zmq_setsockopt(sock, opt, v, len) < 0)
        return gpp_err_set(err, "control socket: setting %s: %s", name, zmq_strerror(zmq_errno()));
    return 0;
}

int gpp_curve_client_apply(void *zmq_sock, int64_t max_msg_bytes, gpp_err_t *err)
{
    assert(zmq_sock && max_msg_bytes > 0);
    if (s_setopt(zmq_sock, ZMQ_MAXMSGSIZE, &max_msg_bytes, sizeof max_msg_bytes, "ZMQ_MAXMSGSIZE",
                 err) < 0)
        return -1;
    const gpp_curve_client_t *c = gpp_curve_identity();
    if (!c)
        return 0;
    if (s_setopt(zmq_sock, ZMQ_CURVE_SERVERKEY, c->server_key, GPP_CURVE_Z85_LEN,
                 "ZMQ_CURVE_SERVERKEY", err) < 0 ||
        s_setopt(zmq_sock, ZMQ_CURVE_PUBLICKEY, c->public_key, GPP_CURVE_Z85_LEN,
                 "ZMQ_CURVE_PUBLICKEY", err) < 0 ||
        s_setopt(zmq_sock, ZMQ_CURVE_SECRETKEY, c->secret_key, GPP_CURVE_Z85_LEN,
                 "ZMQ_CURVE_SECRETKEY", err) < 0)
        return -1;
    return 0;
}

/* ---- server: allow-list and ZAP handler ---- */

static void s_allow(gpp_curve_server_t *self, const char *z85, const char *role, const char *name)
{
    if (self->n_allowed == self->cap_allowed) {
        self->cap_allowed = self->cap_allowed ? 2 * self->cap_allowed : 16;
        self->allowed =
            gpp_xrealloc(self->allowed, (size_t)self->cap_allowed * sizeof *self->allowed);
    }
    s_allowed_t *a = &self->allowed[self->n_allowed++];
    zmq_z85_decode(a->key, z85);
    snprintf(a->name, sizeof a->name, "%s%s", role, name);
    a->slot = -1;
}

static const s_allowed_t *s_find(const gpp_curve_server_t *self, const uint8_t *key)
{
    for (int i = 0; i < self->n_allowed; i++)
        if (!memcmp(self->allowed[i].key, key, 32))
            return &self->allowed[i];
    return NULL;
}

/* Answers one ZAP request (RFC 27): version, request id, domain, address,
 * routing id, mechanism, credentials (CURVE: the client's 32-byte key). */
static void s_zap_answer(gpp_curve_server_t *self, zsock_t *zap)
{
    zmsg_t *req = zmsg_recv(zap);
    if (!req)
        return;
    char *version = zmsg_popstr(req), *request_id = zmsg_popstr(req);
    char *domain = zmsg_popstr(req), *address = zmsg_popstr(req);
    zframe_t *routing = zmsg_pop(req);
    char *mechanism = zmsg_popstr(req);
    zframe_t *cred = zmsg_pop(req);
    const s_allowed_t *who = NULL;
    char key[GPP_CURVE_Z85_LEN + 1] = "(none)";
    const char *why = "not CURVE";
    if (mechanism && !strcmp(mechanism, "CURVE") && cred && zframe_size(cred) == 32) {
        zmq_z85_encode(key, zframe_data(cred), 32);
        if (!domain || strcmp(domain, S_ZAP_DOMAIN))
            why = "another ZAP domain";
        else if (!(who = s_find(self, zframe_data(cred))))
            why = "not an admitted agent or monitor key";
    }
    zmsg_t *rep = zmsg_new();
    zmsg_addstr(rep, "1.0");
    zmsg_addstr(rep, request_id ? request_id : "");
    zmsg_addstr(rep, who ? "200" : "400");
    zmsg_addstr(rep, who ? "OK" : why);
    zmsg_addstr(rep, who ? who->name : "");
    zmsg_addmem(rep, "", 0);
    zmsg_send(&rep, zap);
    if (!who) {
        uint64_t n = atomic_fetch_add(&self->refused, 1) + 1;
        if (n <= S_LOG_FIRST || n % S_LOG_EVERY == 0)
            gpp_warn("control: refused a connection from %s: CURVE key %s is %s (%llu refused "
                     "so far); an agent needs --coordinator-key and its own --key from "
                     "gpp-coordinator --keygen, listed in the key directory's agents/ (a "
                     "monitor: its key in monitors/)",
                     address && address[0] ? address : "(unknown address)", key, why,
                     (unsigned long long)n);
    }
    zstr_free(&version);
    zstr_free(&request_id);
    zstr_free(&domain);
    zstr_free(&address);
    zstr_free(&mechanism);
    zframe_destroy(&routing);
    zframe_destroy(&cred);
    zmsg_destroy(&req);
}

static void s_zap_actor(zsock_t *pipe, void *arg)
{
    gpp_curve_server_t *self = arg;
    /* no signal handler runs on this thread: an interrupted poll must not
     * end it (without a ZAP handler libzmq lets every CURVE client in) */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    zsock_t *zap = zsock_new(ZMQ_REP);
    /* the endpoint is fixed (RFC 27) and libzmq releases an inproc name
     * only when its reaper thread closes the socket: right after a previous
     * server was destroyed it may still be taken, so try again for up to 2 s */
    int bound = zap ? zsock_bind(zap, S_ZAP_ENDPOINT) : -1;
    for (int i = 0; zap && bound < 0 && zmq_errno() == EADDRINUSE && i < 200; i++) {
        zclock_sleep(10);
        bound = zsock_bind(zap, S_ZAP_ENDPOINT);
    }
    if (!zap || bound < 0) {
        zsock_destroy(&zap);
        zsock_signal(pipe, 0); /* zactor_new waits for it; zap_bound stays 0 */
        return;
    }
    self->zap_bound = 1;
    zsock_signal(pipe, 0);
    zpoller_t *poller = zpoller_new(pipe, zap, NULL);
    zpoller_set_nonstop(poller, true); /* CZMQ's SIGINT flag is not ours to obey */
    for (;;) {
        zsock_t *which = zpoller_wait(poller, -1);
        if (which == zap) {
            s_zap_answer(self, zap);
            continue;
        }
        if (!which && zmq_errno() == EINTR)
            continue; /* only $TERM on the pipe (or the context's end) stops it */
        if (which != pipe)
            break;
        zmsg_t *cmd = zmsg_recv(pipe);
        char *word = cmd ? zmsg_popstr(cmd) : NULL;
        int term = !word || !strcmp(word, "$TERM");
        zstr_free(&word);
        zmsg_destroy(&cmd);
        if (term)
            break;
    }
    zpoller_destroy(&poller);
    zsock_destroy(&zap);
}

static int s_start(gpp_curve_server_t *self, gpp_err_t *err)
{
    /* zactor_new returns after the actor's ready signal */
    self->zap = zactor_new(s_zap_actor, self);
    if (!self->zap)
        return gpp_err_set(err, "control: cannot start the CURVE authentication thread");
    if (!self->zap_bound) {
        zactor_destroy(&self->zap);
        return gpp_err_set(err,
                           "control: cannot bind the ZAP handler %s (another CURVE server "
                           "in this process?)",
                           S_ZAP_ENDPOINT);
    }
    return 0;
}

/* A fresh monitor pair for *m, admitted as GPP_CURVE_MONITOR "run-dir". */
static void s_fresh_monitor(gpp_curve_server_t *self, gpp_curve_client_t *m)
{
    zcert_t *c = zcert_new();
    snprintf(m->public_key, sizeof m->public_key, "%s", zcert_public_txt(c));
    snprintf(m->secret_key, sizeof m->secret_key, "%s", zcert_secret_txt(c));
    snprintf(m->server_key, sizeof m->server_key, "%s", self->public_key);
    s_allow(self, m->public_key, GPP_CURVE_MONITOR, "run-dir");
    zcert_destroy(&c);
}

gpp_curve_server_t *gpp_curve_server_new_ephemeral(int n_agents, gpp_curve_client_t *agents,
                                                   gpp_curve_client_t *monitor, gpp_err_t *err)
{
    assert(n_agents >= 0 && (agents || n_agents == 0));
    gpp_curve_server_t *self = gpp_xcalloc(1, sizeof *self);
    atomic_init(&self->refused, 0);
    zcert_t *c = zcert_new();
    snprintf(self->public_key, sizeof self->public_key, "%s", zcert_public_txt(c));
    snprintf(self->secret_key, sizeof self->secret_key, "%s", zcert_secret_txt(c));
    zcert_destroy(&c);
    for (int i = 0; i < n_agents; i++) {
        c = zcert_new();
        gpp_curve_client_t *a = &agents[i];
        snprintf(a->public_key, sizeof a->public_key, "%s", zcert_public_txt(c));
        snprintf(a->secret_key, sizeof a->secret_key, "%s", zcert_secret_txt(c));
        snprintf(a->server_key, sizeof a->server_key, "%s", self->public_key);
        char name[32];
        snprintf(name, sizeof name, "local-%d", i);
        s_allow(self, a->public_key, GPP_CURVE_AGENT, name);
        self->n_agents++;
        zcert_destroy(&c);
    }
    if (monitor)
        s_fresh_monitor(self, monitor);
    if (s_start(self, err) < 0)
        gpp_curve_server_destroy(&self);
    return self;
}

/* The slot an agent key admits: its cert's "slot" metadata (--keygen
 * writes it), else N of a name agent-<N>, else any slot (said once). */
static int s_bind_slot(s_allowed_t *a, const char *meta, const char *name, const char *file,
                       gpp_err_t *err)
{
    const char *num = meta ? meta : !strncmp(name, "agent-", 6) ? name + 6 : NULL;
    char *end = NULL;
    long v = num && *num ? strtol(num, &end, 10) : -1;
    if (num && *num && (*end || v < 0 || v > INT_MAX)) {
        if (meta)
            return gpp_err_set(err,
                               "[coordinator] key_dir: %s: slot = \"%s\" is not a slot number; "
                               "set it to the one slot this key admits",
                               file, meta);
        v = -1; /* a name like agent-hosta: no slot in it */
    }
    a->slot = (int)v;
    if (a->slot < 0)
        gpp_warn("[coordinator] key_dir: %s binds no slot (no slot metadata, not named "
                 "agent-<N>.key): it admits an agent on any slot; add a line slot = \"N\" "
                 "under metadata to bind it",
                 file);
    return 0;
}

/* Adds every DIR/<sub>/\*.key as role; a missing <sub> is 0 keys when
 * optional. Returns the count, -1 with a message. */
static int s_load_list(gpp_curve_server_t *self, const char *dir, const char *sub, const char *role,
                       int optional, gpp_err_t *err)
{
    char p[S_PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    DIR *d = opendir(p);
    if (!d && optional && errno == ENOENT)
        return 0;
    if (!d)
        return gpp_err_set(err,
                           "[coordinator] key_dir: cannot list %s: %s; it holds the admitted "
                           "%s' public certs (gpp-coordinator --keygen makes it)",
                           p, strerror(errno), sub);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".key") || e->d_name[0] == '.')
            continue;
        char f[S_PATH_MAX];
        snprintf(f, sizeof f, "%s/%s", p, e->d_name);
        zcert_t *a = zcert_load(f);
        if (!a || !s_z85_ok(zcert_public_txt(a)) || self->n_allowed >= S_ALLOW_MAX) {
            zcert_destroy(&a);
            closedir(d);
            return gpp_err_set(err,
                               "[coordinator] key_dir: %s is not a CZMQ public certificate "
                               "(or more than %d keys); remove it or make keys with --keygen",
                               f, S_ALLOW_MAX);
        }
        uint8_t raw[32];
        zmq_z85_decode(raw, zcert_public_txt(a));
        const s_allowed_t *dup = s_find(self, raw);
        if (dup) {
            zcert_destroy(&a);
            closedir(d);
            return gpp_err_set(err,
                               "[coordinator] key_dir: %s is the key of %s already; one key "
                               "has one role (an agent's key never monitors, a monitor's "
                               "never registers): remove one of the two",
                               f, dup->name);
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(len - 4 < 60 ? len - 4 : 60), e->d_name);
        s_allow(self, zcert_public_txt(a), role, name);
        if (!strcmp(role, GPP_CURVE_AGENT) &&
            s_bind_slot(&self->allowed[self->n_allowed - 1], zcert_meta(a, "slot"), name, f, err) <
                0) {
            zcert_destroy(&a);
            closedir(d);
            return -1;
        }
        zcert_destroy(&a);
        n++;
    }
    closedir(d);
    return n;
}

gpp_curve_server_t *gpp_curve_server_load(const char *dir, gpp_curve_client_t *monitor,
                                          gpp_err_t *err)
{
    assert(dir);
    gpp_curve_server_t *self = gpp_xcalloc(1, sizeof *self);
    atomic_init(&self->refused, 0);
    char p[S_PATH_MAX];
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        gpp_err_set(err,
                    "[coordinator] key_dir %s: not a directory; make one with "
                    "gpp-coordinator --keygen %s",
                    dir, dir);
        goto fail;
    }
    if (st.st_mode & 022) {
        gpp_err_set(err,
                    "[coordinator] key_dir %s: mode %04o lets others change the admitted "
                    "keys; run chmod 700 %s",
                    dir, (unsigned)(st.st_mode & 07777), dir);
        goto fail;
    }
    snprintf(p, sizeof p, "%s/coordinator.key_secret", dir);
    zcert_t *c = s_load_secret(p, "[coordinator] key_dir", err);
    if (!c)
        goto fail;
    snprintf(self->public_key, sizeof self->public_key, "%s", zcert_public_txt(c));
    snprintf(self->secret_key, sizeof self->secret_key, "%s", zcert_secret_txt(c));
    zcert_destroy(&c);
    self->n_agents = s_load_list(self, dir, "agents", GPP_CURVE_AGENT, 0, err);
    if (self->n_agents < 0)
        goto fail;
    if (self->n_agents == 0) {
        gpp_err_set(err,
                    "[coordinator] key_dir: %s/agents holds no agent key (*.key); no agent "
                    "could register. Run gpp-coordinator --keygen DIR --agents N",
                    dir);
        goto fail;
    }
    if (s_load_list(self, dir, "monitors", GPP_CURVE_MONITOR, 1, err) < 0)
        goto fail;
    if (monitor)
        s_fresh_monitor(self, monitor);
    if (s_start(self, err) < 0)
        goto fail;
    return self;
fail:
    gpp_curve_server_destroy(&self);
    return NULL;
}

void gpp_curve_server_destroy(gpp_curve_server_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp_curve_server_t *self = *self_p;
    zactor_destroy(&self->zap);
    explicit_bzero(self->secret_key, sizeof self->secret_key);
    free(self->allowed);
    free(self);
    *self_p = NULL;
}

int gpp_curve_server_apply(const gpp_curve_server_t *self, void *zmq_sock, int64_t max_msg_bytes,
                           gpp_err_t *err)
{
    assert(zmq_sock && max_msg_bytes > 0);
    if (s_setopt(zmq_sock, ZMQ_MAXMSGSIZE, &max_msg_bytes, sizeof max_msg_bytes, "ZMQ_MAXMSGSIZE",
                 err) < 0)
        return -1;
    if (!self)
        return 0;
    int one = 1;
    if (s_setopt(zmq_sock, ZMQ_ZAP_DOMAIN, S_ZAP_DOMAIN, strlen(S_ZAP_DOMAIN), "ZMQ_ZAP_DOMAIN",
                 err) < 0 ||
        (zmq_setsockopt(zmq_sock, ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one) < 0 &&
         zmq_errno() != EINVAL &&
         s_setopt(zmq_sock, ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one, "ZMQ_ZAP_ENFORCE_DOMAIN",
                  err) < 0) ||
        s_setopt(zmq_sock, ZMQ_CURVE_SERVER, &one, sizeof one, "ZMQ_CURVE_SERVER", err) < 0 ||
        s_setopt(zmq_sock, ZMQ_CURVE_SECRETKEY, self->secret_key, GPP_CURVE_Z85_LEN,
                 "ZMQ_CURVE_SECRETKEY", err) < 0)
        return -1;
    return 0;
}

const char *gpp_curve_server_public(const gpp_curve_server_t *self)
{
    return self->public_key;
}

int gpp_curve_server_size(const gpp_curve_server_t *self)
{
    return self->n_agents;
}

int gpp_curve_server_monitors(const gpp_curve_server_t *self)
{
    return self->n_allowed - self->n_agents;
}

gpp_curve_role_t gpp_curve_user_role(const char *user_id)
{
    if (!user_id)
        return GPP_CURVE_ROLE_NONE;
    if (!strncmp(user_id, GPP_CURVE_AGENT, strlen(GPP_CURVE_AGENT)))
        return GPP_CURVE_ROLE_AGENT;
    if (!strncmp(user_id, GPP_CURVE_MONITOR, strlen(GPP_CURVE_MONITOR)))
        return GPP_CURVE_ROLE_MONITOR;
    return GPP_CURVE_ROLE_NONE;
}

uint64_t gpp_curve_server_refused(const gpp_curve_server_t *self)
{
    return atomic_load(&((gpp_curve_server_t *)self)->refused);
}

int gpp_curve_server_slot(const gpp_curve_server_t *self, const char *user_id)
{
    if (!self || !user_id)
        return -1;
    for (int i = 0; i < self->n_allowed; i++)
        if (!strcmp(self->allowed[i].name, user_id))
            return self->allowed[i].slot;
    return -1;
}
