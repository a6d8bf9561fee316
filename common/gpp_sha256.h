/* gpp_sha256: SHA-256 from libsodium (crypto_hash_sha256), under the names
 * the checkpoint code uses. Streaming: init, update any number of times,
 * final. Used for the digest of the final weights (docs/checkpoints.md,
 * "weights sha256"). */
#ifndef GPP_SHA256_H
#define GPP_SHA256_H

#include <sodium/crypto_hash_sha256.h>
#include <stddef.h>

#define GPP_SHA256_BYTES crypto_hash_sha256_BYTES
#define GPP_SHA256_HEX (2 * GPP_SHA256_BYTES + 1) /* with the NUL */

typedef crypto_hash_sha256_state gpp_sha256_t;

void gpp_sha256_init(gpp_sha256_t *s);
void gpp_sha256_update(gpp_sha256_t *s, const void *data, size_t len);
void gpp_sha256_final(gpp_sha256_t *s, unsigned char out[GPP_SHA256_BYTES]);
/* One call: SHA-256 of len bytes. */
void gpp_sha256(const void *data, size_t len, unsigned char out[GPP_SHA256_BYTES]);
/* Lower-case hex of a digest into hex[GPP_SHA256_HEX]. */
void gpp_sha256_hex(const unsigned char d[GPP_SHA256_BYTES], char hex[GPP_SHA256_HEX]);

#endif
