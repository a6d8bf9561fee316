/* gpp_curve: CURVE keys and admission for the control plane (ZeroMQ
 * CurveZMQ, RFC 26: every frame after the handshake is encrypted and
 * authenticated; the coordinator proves it holds the secret of the public
 * key the agents were given, and each agent proves it holds the secret of
 * a public key the coordinator admits).
 *
 * Keys are CZMQ certificates (zcert) as Z85 text. `gpp-coordinator --keygen
 * DIR` (gpp_curve_keygen) writes:
 *
 *   DIR/                      0700
 *   DIR/coordinator.key       the coordinator's public cert (give it to agents)
 *   DIR/coordinator.key_secret  0600, the coordinator's pair
 *   DIR/agents/agent-<i>.key  the admitted agents' public certs (the allow-list;
 *                             agent-<i> admits slot i only, on any host)
 *   DIR/agent-<i>.key_secret  0600, agent i's pair (copy it to that agent's host)
 *   DIR/monitors/monitor-<i>.key  the admitted monitors' public certs (gpp-top)
 *   DIR/monitor-<i>.key_secret  0600, monitor i's pair
 *
 * Roles: a key is an agent's or a monitor's, never both. The ZAP handler
 * admits both lists and names the role in the ZAP user id it returns
 * (GPP_CURVE_AGENT or GPP_CURVE_MONITOR, then the key's name), which
 * libzmq attaches to every frame of that connection as its "User-Id"
 * property: the coordinator reads it (gpp_curve_user_role) so that a
 * monitor key can never register or speak as an agent, nor an agent key
 * monitor.
 *
 * Server (coordinator): gpp_curve_server_load(DIR) or, for a local launch,
 * gpp_curve_server_new_ephemeral (fresh keys in memory only, one pair per
 * agent it forks). Either way a ZAP handler (RFC 27) runs on its own thread
 * (a CZMQ actor) in CZMQ's context from then on: it admits exactly the
 * listed agent and monitor keys on sockets gpp_curve_server_apply
 * prepared, and logs every refusal with the peer's address and key. The
 * thread blocks every signal and lives as long as the server (without it
 * libzmq would admit any CURVE client; the sockets also set
 * ZMQ_ZAP_ENFORCE_DOMAIN). The allow-list is fixed once the server
 * exists, so the handler reads it without locks.
 *
 * Client (agent): the process has one control-plane identity
 * (gpp_curve_identity_set, from its key file or the fd its launcher handed
 * it); gpp_curve_client_apply puts it on each socket the agent opens to
 * the coordinator (control DEALER and rendezvous DEALER). Without an
 * identity the sockets stay plaintext (external agents of a coordinator
 * without key_dir).
 *
 * Both apply functions also set ZMQ_MAXMSGSIZE: libzmq then refuses a
 * larger frame from its length header and drops the peer, before
 * allocating or buffering any of it. */
#ifndef GPP_CURVE_H
#define GPP_CURVE_H

#include <stdint.h>

#include "common/gpp_err.h"

#define GPP_CURVE_Z85_LEN 40     /* a 32-byte key in Z85 (ZeroMQ RFC 32) */
#define GPP_CURVE_AGENT "agent:" /* ZAP user id prefixes (the roles) */
#define GPP_CURVE_MONITOR "monitor:"

/* An agent's keys for one coordinator. */
typedef struct {
    char public_key[GPP_CURVE_Z85_LEN + 1];
    char secret_key[GPP_CURVE_Z85_LEN + 1];
    char server_key[GPP_CURVE_Z85_LEN + 1]; /* the coordinator's public key */
} gpp_curve_client_t;

/* ---- key files ---- */

/* Makes DIR (0700; refused when it already holds coordinator.key_secret:
 * nothing is overwritten) with the coordinator's pair, n_agents agent
 * pairs and n_monitors monitor pairs as above. -1 with a message naming
 * the file on failure. */
int gpp_curve_keygen(const char *dir, int n_agents, int n_monitors, gpp_err_t *err);

/* An agent's keys: server_key is the coordinator's public cert file
 * (DIR/coordinator.key) or its 40-character Z85 key (a path that exists is
 * always the file; text is a key only where it cannot be a path); key_file is the
 * agent's secret cert (agent-<i>.key_secret), refused when group or others
 * may read it. -1 with a message naming the file and the fix. */
int gpp_curve_client_load(gpp_curve_client_t *out, const char *server_key, const char *key_file,
                          gpp_err_t *err);

/* Writes c as DIR/monitor.key_secret (0600, c's pair) and
 * DIR/coordinator.key (c's server key, public); DIR must exist and be
 * private (0700); existing files are refused. -1 with a message. */
int gpp_curve_client_save(const gpp_curve_client_t *c, const char *dir, gpp_err_t *err);

/* The local launcher's hand-over: writes the keys to a new anonymous file
 * (memfd, close-on-exec, sealed read-only) and returns its fd, at offset 0.
 * The caller passes it to one child (gpp_launch_spawn's keep_fd) and closes
 * it. -1 with a message. */
int gpp_curve_client_to_fd(const gpp_curve_client_t *c, gpp_err_t *err);
/* The child's side: reads the keys from fd (gpp-agent --key-fd) and closes
 * it. -1 with a message when the fd holds no valid keys. */
int gpp_curve_client_from_fd(gpp_curve_client_t *out, int fd, gpp_err_t *err);

/* ---- the process's client identity ---- */

/* Sets (c) or clears (NULL) the keys every later gpp_curve_client_apply
 * uses. Call before any thread opens a control-plane socket. */
void gpp_curve_identity_set(const gpp_curve_client_t *c);
/* Borrowed; NULL when none is set. */
const gpp_curve_client_t *gpp_curve_identity(void);

/* On a libzmq socket (zsock_resolve() of a zsock) before it connects:
 * ZMQ_MAXMSGSIZE = max_msg_bytes and, with an identity, CURVE client keys.
 * -1 with a message. */
int gpp_curve_client_apply(void *zmq_sock, int64_t max_msg_bytes, gpp_err_t *err);

/* ---- server ---- */

typedef struct gpp_curve_server_s gpp_curve_server_t;

/* Loads DIR/coordinator.key_secret (refused when group or others may read
 * it), the allow-list DIR/agents/\*.key (at least one) and, when the
 * folder exists, DIR/monitors/\*.key (a key in both is refused), and
 * starts the ZAP handler. With monitor != NULL a fresh monitor pair is
 * admitted too and written there (the run directory's, see
 * gpp_curve_client_save). NULL with a message naming the file and the
 * fix. Caller owns the result. */
gpp_curve_server_t *gpp_curve_server_load(const char *dir, gpp_curve_client_t *monitor,
                                          gpp_err_t *err);
/* Fresh keys in memory: the coordinator's pair and n_agents agent pairs,
 * written to agents[0 .. n_agents-1] (to hand to the children), and with
 * monitor != NULL one monitor pair written there; starts the ZAP handler.
 * NULL with a message. Caller owns the result. */
gpp_curve_server_t *gpp_curve_server_new_ephemeral(int n_agents, gpp_curve_client_t *agents,
                                                   gpp_curve_client_t *monitor, gpp_err_t *err);
/* Stops the ZAP handler (sockets still using it fail their handshakes)
 * and wipes the keys. Accepts NULL. */
void gpp_curve_server_destroy(gpp_curve_server_t **self_p);

/* On a libzmq socket before it binds: ZMQ_MAXMSGSIZE = max_msg_bytes and,
 * when self is not NULL, CURVE server with the coordinator's secret and
 * the ZAP domain of self's handler. -1 with a message. */
int gpp_curve_server_apply(const gpp_curve_server_t *self, void *zmq_sock, int64_t max_msg_bytes,
                           gpp_err_t *err);

/* The coordinator's public key (Z85). Borrowed. */
const char *gpp_curve_server_public(const gpp_curve_server_t *self);
/* Admitted agent keys. */
int gpp_curve_server_size(const gpp_curve_server_t *self);
/* Admitted monitor keys. */
int gpp_curve_server_monitors(const gpp_curve_server_t *self);

typedef enum {
    GPP_CURVE_ROLE_NONE = 0,
    GPP_CURVE_ROLE_AGENT,
    GPP_CURVE_ROLE_MONITOR
} gpp_curve_role_t;

/* The role of a ZAP user id (a frame's "User-Id" property, zframe_meta):
 * NONE for NULL (plaintext) or an id that is not one of ours. */
gpp_curve_role_t gpp_curve_user_role(const char *user_id);
/* The slot an agent key admits, by its ZAP user id: the "slot" metadata of
 * its cert in agents/ (--keygen writes slot = i into agent-i.key), else N
 * of a file named agent-<N>.key; -1 when it admits any slot (another name,
 * or an ephemeral local-launch key) or user_id is not an agent key. The
 * coordinator refuses a Register for another slot. */
int gpp_curve_server_slot(const gpp_curve_server_t *self, const char *user_id);
/* Handshakes refused so far (unknown key or wrong mechanism/domain). */
uint64_t gpp_curve_server_refused(const gpp_curve_server_t *self);

#endif
