/* gpp_cuda_cache: a caching allocator over a raw device allocator.
 *
 * cudaMalloc and cudaFree synchronise the device and cost tens of
 * microseconds to milliseconds, so the CUDA backend never returns memory to
 * the driver in steady state: a freed block goes onto the free list of its
 * size class and the next request of that class takes it back. Classes are
 * 512 bytes and above that 32 per power of two (512, 528, 544, ..., 1024,
 * 1056, ...), so a block wastes under 1/32 (3.1 %) of its size; a size
 * that recurs every micro-batch is served from the cache from the second
 * micro-batch on. (Four per power of two, the first version, wasted up to
 * 25 %: the high-water mark of the emulated MMT run was 7-11 % above the
 * executor's exact bytes, which the planner's memory model predicts.) When the raw allocator fails,
 * every cached free block is released and the request retried once.
 *
 * Pure C with the raw allocator as two function pointers (cudaMalloc /
 * cudaFree in kernels/cuda/gpp_cuda_backend.c), so the logic is built and
 * unit-tested on machines without a GPU (tests/unit/test_cuda_cache.c).
 * Not thread-safe: a backend is used from one thread at a time.
 *
 * Ownership: gpp_cuda_cache_new returns an object the caller owns; its
 * destroy returns every block (cached or still in use) to the raw
 * allocator. */
#ifndef GPP_CUDA_CACHE_H
#define GPP_CUDA_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Returns NULL when out of memory. */
typedef void *(*gpp_cuda_raw_alloc_fn)(void *ctx, size_t bytes);
typedef void (*gpp_cuda_raw_free_fn)(void *ctx, void *p);

typedef struct gpp_cuda_cache_s gpp_cuda_cache_t;

typedef struct {
    size_t in_use_bytes;   /* class bytes of the blocks handed out now */
    size_t peak_bytes;     /* max of in_use_bytes since creation */
    size_t reserved_bytes; /* bytes held from the raw allocator (in use + cached) */
    uint64_t raw_allocs;   /* calls of the raw allocator that succeeded */
    uint64_t raw_frees;
    uint64_t hits; /* requests served from a free list */
} gpp_cuda_cache_stats_t;

gpp_cuda_cache_t *gpp_cuda_cache_new(gpp_cuda_raw_alloc_fn raw_alloc, gpp_cuda_raw_free_fn raw_free,
                                     void *ctx);
void gpp_cuda_cache_destroy(gpp_cuda_cache_t **self_p);

/* The classes are common/gpp_alloc_rule.h's (gpp_alloc_class: a request's
 * index and block size), which the memory model rounds by too. */

/* A block of at least `bytes` (0 allowed: a unique valid pointer); NULL when
 * the raw allocator fails even after the cache was released. */
void *gpp_cuda_cache_alloc(gpp_cuda_cache_t *self, size_t bytes);
/* Puts a block from gpp_cuda_cache_alloc back on its free list and returns
 * its class size; NULL is a no-op (0). The caller guarantees no device work
 * still uses it. */
size_t gpp_cuda_cache_free(gpp_cuda_cache_t *self, void *p);
/* Returns every cached free block to the raw allocator. */
void gpp_cuda_cache_trim(gpp_cuda_cache_t *self);
void gpp_cuda_cache_stats(const gpp_cuda_cache_t *self, gpp_cuda_cache_stats_t *out);

#endif
