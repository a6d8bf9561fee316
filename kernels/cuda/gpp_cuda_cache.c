/* gpp_cuda_cache: size-class free lists over a raw device allocator, and a
 * pointer -> class map (open addressing) for the blocks it handed out. */
#include "kernels/cuda/gpp_cuda_cache.h"

#include <assert.h>
#include <stdlib.h>

#include "common/gpp_alloc_rule.h"
#include "common/gpp_err.h"

/* the classes: common/gpp_alloc_rule.h (GPP_ALLOC_CLASSES), which the
   memory model rounds by too */
#define S_CLASSES GPP_ALLOC_CLASS_COUNT

typedef struct {
    void **p;
    int n, cap;
} s_list_t;

typedef struct {
    void *p;   /* NULL: empty slot */
    int cls;   /* -1: tombstone (p kept non-NULL so probes go on) */
    int inuse; /* handed out (1) or on a free list (0) */
} s_slot_t;

struct gpp_cuda_cache_s {
    gpp_cuda_raw_alloc_fn raw_alloc;
    gpp_cuda_raw_free_fn raw_free;
    void *ctx;
    s_list_t free_list[S_CLASSES];
    s_slot_t *map; /* power-of-two size */
    size_t map_cap, map_used;
    gpp_cuda_cache_stats_t st;
};

static size_t s_hash(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL; /* MurmurHash3 fmix64 */
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static s_slot_t *s_find(gpp_cuda_cache_t *self, const void *p)
{
    for (size_t i = s_hash(p, self->map_cap), k = 0; k < self->map_cap;
         i = (i + 1) & (self->map_cap - 1), k++) {
        if (!self->map[i].p)
            return NULL;
        if (self->map[i].p == p && self->map[i].cls >= 0)
            return &self->map[i];
    }
    return NULL;
}

static void s_insert(gpp_cuda_cache_t *self, void *p, int cls);

static void s_rehash(gpp_cuda_cache_t *self, size_t cap)
{
    s_slot_t *old = self->map;
    size_t old_cap = self->map_cap;
    self->map = gpp_xcalloc(cap, sizeof *self->map);
    self->map_cap = cap;
    self->map_used = 0;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].p && old[i].cls >= 0) {
            s_insert(self, old[i].p, old[i].cls);
            s_find(self, old[i].p)->inuse = old[i].inuse;
        }
    free(old);
}

static void s_insert(gpp_cuda_cache_t *self, void *p, int cls)
{
    if ((self->map_used + 1) * 2 > self->map_cap)
        s_rehash(self, self->map_cap * 2);
    size_t i = s_hash(p, self->map_cap);
    while (self->map[i].p)
        i = (i + 1) & (self->map_cap - 1);
    self->map[i] = (s_slot_t){.p = p, .cls = cls, .inuse = 1};
    self->map_used++;
}

gpp_cuda_cache_t *gpp_cuda_cache_new(gpp_cuda_raw_alloc_fn raw_alloc, gpp_cuda_raw_free_fn raw_free,
                                     void *ctx)
{
    assert(raw_alloc && raw_free);
    gpp_cuda_cache_t *self = gpp_xcalloc(1, sizeof *self);
    self->raw_alloc = raw_alloc;
    self->raw_free = raw_free;
    self->ctx = ctx;
    self->map_cap = 256;
    self->map = gpp_xcalloc(self->map_cap, sizeof *self->map);
    return self;
}

void gpp_cuda_cache_trim(gpp_cuda_cache_t *self)
{
    assert(self);
    for (int c = 0; c < S_CLASSES; c++) {
        s_list_t *l = &self->free_list[c];
        size_t bytes;
        bytes = gpp_alloc_class_bytes(c);
        for (int i = 0; i < l->n; i++) {
            s_slot_t *slot = s_find(self, l->p[i]);
            assert(slot && !slot->inuse);
            slot->cls = -1; /* tombstone */
            self->raw_free(self->ctx, l->p[i]);
            self->st.raw_frees++;
            self->st.reserved_bytes -= bytes;
        }
        l->n = 0;
    }
    /* drop the tombstones */
    s_rehash(self, self->map_cap);
}

void gpp_cuda_cache_destroy(gpp_cuda_cache_t **self_p)
{
    assert(self_p);
    gpp_cuda_cache_t *self = *self_p;
    if (!self)
        return;
    for (size_t i = 0; i < self->map_cap; i++)
        if (self->map[i].p && self->map[i].cls >= 0)
            self->raw_free(self->ctx, self->map[i].p);
    for (int c = 0; c < S_CLASSES; c++)
        free(self->free_list[c].p);
    free(self->map);
    free(self);
    *self_p = NULL;
}

void *gpp_cuda_cache_alloc(gpp_cuda_cache_t *self, size_t bytes)
{
    assert(self);
    size_t cb;
    int cls = gpp_alloc_class(bytes, &cb);
    assert(cls < S_CLASSES);
    s_list_t *l = &self->free_list[cls];
    void *p = NULL;
    if (l->n > 0) {
        p = l->p[--l->n];
        s_find(self, p)->inuse = 1;
        self->st.hits++;
    } else {
        p = self->raw_alloc(self->ctx, cb);
        if (!p) { /* give the cached blocks back and try once more */
            gpp_cuda_cache_trim(self);
            p = self->raw_alloc(self->ctx, cb);
        }
        if (!p)
            return NULL;
        s_insert(self, p, cls);
        self->st.raw_allocs++;
        self->st.reserved_bytes += cb;
    }
    self->st.in_use_bytes += cb;
    if (self->st.in_use_bytes > self->st.peak_bytes)
        self->st.peak_bytes = self->st.in_use_bytes;
    return p;
}

size_t gpp_cuda_cache_free(gpp_cuda_cache_t *self, void *p)
{
    assert(self);
    if (!p)
        return 0;
    s_slot_t *slot = s_find(self, p);
    assert(slot && slot->inuse); /* a pointer this cache handed out, freed once */
    slot->inuse = 0;
    size_t cb;
    cb = gpp_alloc_class_bytes(slot->cls);
    s_list_t *l = &self->free_list[slot->cls];
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->p = gpp_xrealloc(l->p, (size_t)l->cap * sizeof *l->p);
    }
    l->p[l->n++] = p;
    self->st.in_use_bytes -= cb;
    return cb;
}

void gpp_cuda_cache_stats(const gpp_cuda_cache_t *self, gpp_cuda_cache_stats_t *out)
{
    assert(self && out);
    *out = self->st;
}
