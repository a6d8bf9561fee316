/* gpp_hash: a table-driven CRC-32 (see gpp_hash.h). */
#include "agent/exec/gpp_hash.h"

#include <pthread.h>

static uint32_t s_crc_table[8][256];
static pthread_once_t s_crc_once = PTHREAD_ONCE_INIT;

static void s_crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        s_crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            s_crc_table[t][n] =
                s_crc_table[0][s_crc_table[t - 1][n] & 0xff] ^ (s_crc_table[t - 1][n] >> 8);
}

/* Slicing-by-8: checkpoints are hundreds of MB, so the byte-at-a-time loop
 * would cost more than writing them. */
uint32_t gpp_crc32(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&s_crc_once, s_crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    while (len >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        uint32_t hi =
            (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = s_crc_table[7][lo & 0xff] ^ s_crc_table[6][(lo >> 8) & 0xff] ^
              s_crc_table[5][(lo >> 16) & 0xff] ^ s_crc_table[4][lo >> 24] ^
              s_crc_table[3][hi & 0xff] ^ s_crc_table[2][(hi >> 8) & 0xff] ^
              s_crc_table[1][(hi >> 16) & 0xff] ^ s_crc_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = s_crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
