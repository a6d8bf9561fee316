/* gpp_alloc_rule: how a backend's allocator rounds a request — one rule the
 * allocators and the memory plan share, so that a prediction
 * (model/gpp_memplan.h) counts the bytes a device holds, not the bytes
 * asked for.
 *
 * GPP_ALLOC_ALIGN64: the CPU backend (kernels/cpu): multiples of 64 bytes,
 * at least 64. GPP_ALLOC_CLASSES: the CUDA backend's caching allocator
 * (kernels/cuda/gpp_cuda_cache.c): 512 bytes, then 32 classes per power of
 * two, so a block wastes less than 1/32 of its size. */
#ifndef GPP_ALLOC_RULE_H
#define GPP_ALLOC_RULE_H

#include <stddef.h>
#include <stdint.h>

typedef enum { GPP_ALLOC_ALIGN64 = 0, GPP_ALLOC_CLASSES = 1 } gpp_alloc_rule_t;

#define GPP_ALLOC_MIN_SHIFT 9  /* the least class: 512 bytes (cudaMalloc aligns to 256) */
#define GPP_ALLOC_STEP_SHIFT 5 /* 32 classes per power of two */

/* The bytes a request of `bytes` (>= 0) holds under rule. */
int64_t gpp_alloc_bytes(gpp_alloc_rule_t rule, int64_t bytes);

/* GPP_ALLOC_CLASSES: the class index of a request, in [0,
 * GPP_ALLOC_CLASS_COUNT), and, in *class_bytes, its size (the caching
 * allocator's free lists are indexed by it). */
#define GPP_ALLOC_CLASS_COUNT ((1 << GPP_ALLOC_STEP_SHIFT) * (64 - GPP_ALLOC_MIN_SHIFT) + 1)
int gpp_alloc_class(size_t bytes, size_t *class_bytes);
/* The size of class cls (gpp_alloc_class's inverse). */
size_t gpp_alloc_class_bytes(int cls);

/* The part of gpp_alloc_bytes that grows with the bytes, for the planner's
 * linear memory bound: bytes + ceil(bytes / 32) under the classes (a block
 * above 512 bytes wastes less than 1/32 of itself), bytes under ALIGN64.
 * Inline: the partitioner's search asks for it on every stage it tries. */
static inline int64_t gpp_alloc_bound(gpp_alloc_rule_t rule, int64_t bytes)
{
    const int64_t steps = 1 << GPP_ALLOC_STEP_SHIFT;
    return rule == GPP_ALLOC_CLASSES ? bytes + (bytes + steps - 1) / steps : bytes;
}
/* The least block of the rule (512 or 64 bytes): gpp_alloc_bytes(rule, x) <=
 * gpp_alloc_bound(rule, x) + gpp_alloc_floor(rule) for every x >= 0. */
static inline int64_t gpp_alloc_floor(gpp_alloc_rule_t rule)
{
    return rule == GPP_ALLOC_CLASSES ? (int64_t)1 << GPP_ALLOC_MIN_SHIFT : 64;
}

/* Inside one allocation carved into buffers (the executor's arena,
 * model/gpp_memplan.h) each buffer starts at a multiple of the device's
 * alignment: 64 bytes on the CPU (the backend's guarantee), 256 on CUDA
 * (cudaMalloc's, which the kernels and cuBLASLt expect). gpp_alloc_carve
 * is the bytes a buffer of `bytes` takes there (at least one unit). */
static inline int64_t gpp_alloc_align(gpp_alloc_rule_t rule)
{
    return rule == GPP_ALLOC_CLASSES ? 256 : 64;
}
static inline int64_t gpp_alloc_carve(gpp_alloc_rule_t rule, int64_t bytes)
{
    int64_t a = gpp_alloc_align(rule);
    return bytes <= a ? a : (bytes + a - 1) / a * a;
}

#endif
