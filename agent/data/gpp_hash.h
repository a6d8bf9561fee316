/* gpp_hash: counter-based random numbers for the executor.
 *
 * Random numbers are a pure function of a key, never of a stream position:
 * the value for (seed, op id, element index) is the same in every process,
 * whatever order or subset of elements it generates. That is what lets every
 * replica build identical weights and regenerate any sample's data with no
 * traffic. The mixer is splitmix64's finaliser (Steele, Lea, Flood 2014).
 * (The checkpoint and dataset formats' CRC-32 is zlib's crc32.) */
#ifndef GPP_HASH_H
#define GPP_HASH_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64 finaliser: a bijective 64-bit mix. */
static inline uint64_t gpp_hash_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Key of a stream of numbers: mixes up to three 64-bit fields (seed, op id,
 * a purpose tag, ...). Element i of the stream is gpp_hash_mix(key + i). */
static inline uint64_t gpp_hash_key(uint64_t a, uint64_t b, uint64_t c)
{
    return gpp_hash_mix(gpp_hash_mix(gpp_hash_mix(a) ^ b) ^ c);
}

/* Uniform in [0, 1) with 24 random bits (exact in float). */
static inline float gpp_hash_uniform(uint64_t key, uint64_t i)
{
    return (float)(gpp_hash_mix(key + i) >> 40) * (1.0f / 16777216.0f);
}

/* Approximately standard normal: the sum of four 16-bit uniforms of one
 * draw, centred and scaled (Irwin-Hall, n = 4): mean 0, variance 1, a
 * bell-shaped density with tails cut at +-3.46. Exact normals (log and
 * sincos per value) made data generation half of a small model's training
 * time; the teacher and the initialisation only need these moments. */
static inline float gpp_hash_normal(uint64_t key, uint64_t i)
{
    uint64_t r = gpp_hash_mix(key + i);
    uint32_t s = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) +
                 (uint32_t)((r >> 32) & 0xffff) + (uint32_t)(r >> 48);
    /* (s + 2) / 65536 is the sum of four uniforms in (0, 1); mean 2, var 1/3 */
    return ((float)s + 2.0f - 131072.0f) * (1.7320508f / 65536.0f);
}

/* Uniform integer in [0, n) (n >= 1; multiply-shift, bias < n / 2^32). */
static inline int64_t gpp_hash_below(uint64_t key, uint64_t i, int64_t n)
{
    return (int64_t)(((gpp_hash_mix(key + i) >> 32) * (uint64_t)n) >> 32);
}

#endif
