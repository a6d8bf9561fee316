/* gpp_store: a tiny TCP key-value store for data-plane rendezvous.
 *
 * The comm backends exchange their transport addresses through it (Gloo's
 * connectFullMesh; later an NCCL unique id). One server per job runs in the
 * coordinator (or in a test's parent process) on a thread of its own; the
 * keys live in its memory only, so nothing is left behind when it stops.
 * Each job attempt uses its own key prefix (Assignment.comm.prefix).
 *
 * Wire format (both directions little-endian):
 *   SET: 'S' u32 klen key u32 vlen value   -> 'K'
 *   GET: 'G' u32 klen key                  -> 'Y' u32 vlen value | 'N'
 * GET does not block in the server; the client polls until the key is set
 * or its deadline passes. Keys are at most GPP_STORE_KEY_MAX bytes, values
 * at most GPP_STORE_VALUE_MAX; a client that breaks the format is dropped. */
#ifndef GPP_STORE_H
#define GPP_STORE_H

#include <stddef.h>

#include "common/gpp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPP_STORE_KEY_MAX 1024
#define GPP_STORE_VALUE_MAX (1 << 20)

typedef struct gpp_store_server gpp_store_server_t;
typedef struct gpp_store gpp_store_t;

/* Listens on host:port (host NULL or "" = all interfaces; port 0 = any free
 * port, see gpp_store_server_port) and serves on a new thread. Caller owns
 * the result. Returns NULL with the reason in err. */
gpp_store_server_t *gpp_store_server_new(const char *host, int port, gpp_err_t *err);
int gpp_store_server_port(const gpp_store_server_t *self);
/* Stops the thread, closes every connection, frees the keys. */
void gpp_store_server_destroy(gpp_store_server_t **self_p);

/* Connects to "host:port", retrying until timeout_ms passes (the server may
 * start after the client). Caller owns the result. */
gpp_store_t *gpp_store_connect(const char *addr, int timeout_ms, gpp_err_t *err);
void gpp_store_destroy(gpp_store_t **self_p);

/* Sets key to len bytes of data (overwrites). */
int gpp_store_set(gpp_store_t *self, const char *key, const void *data, size_t len, gpp_err_t *err);
/* Waits up to timeout_ms for key to be set, then returns its value in *data
 * (malloc'ed, caller owns it: free()) and *len. */
int gpp_store_get(gpp_store_t *self, const char *key, int timeout_ms, void **data, size_t *len,
                  gpp_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
