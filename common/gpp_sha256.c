/* gpp_sha256: see gpp_sha256.h. libsodium's SHA-256 needs no sodium_init()
 * (no CPU dispatch, no random source); its calls cannot fail. */
#include "common/gpp_sha256.h"

#include <sodium/utils.h>

void gpp_sha256_init(gpp_sha256_t *s)
{
    crypto_hash_sha256_init(s);
}

void gpp_sha256_update(gpp_sha256_t *s, const void *data, size_t len)
{
    crypto_hash_sha256_update(s, data, len);
}

void gpp_sha256_final(gpp_sha256_t *s, unsigned char out[GPP_SHA256_BYTES])
{
    crypto_hash_sha256_final(s, out);
}

void gpp_sha256(const void *data, size_t len, unsigned char out[GPP_SHA256_BYTES])
{
    crypto_hash_sha256(out, data, len);
}

void gpp_sha256_hex(const unsigned char d[GPP_SHA256_BYTES], char hex[GPP_SHA256_HEX])
{
    sodium_bin2hex(hex, GPP_SHA256_HEX, d, GPP_SHA256_BYTES);
}
