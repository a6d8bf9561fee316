/* gpp_exec_pool: the executor's memory, a pool of equal-size blocks
 * (micro-batches repeat shapes). The op table's gpp_stage_mem walks these
 * allocations in this order: a change here is a change there (test_optable
 * zoo_stage_peak checks). The whole of it is here, so that a planned
 * layout can replace it in one piece. */
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec_impl.h"

/* Gives every cached block back to the backend. */
static void s_pool_drop(gpp_exec_t *self)
{
    gpp_stream_sync(self->s, NULL);
    for (int i = 0; i < self->n_free; i++)
        gpp_backend_free(self->be, &self->free_blocks[i].p);
    self->n_free = 0;
}

/* Gives cached blocks back until the backend can take a block of `bytes`
 * without passing its high-water mark (or none is left): the smallest that
 * is at least as large, whose memory the new block can take again, else
 * the largest. */
static void s_pool_fit(gpp_exec_t *self, size_t bytes)
{
    gpp_alloc_rule_t rule = gpp_backend_alloc_rule(self->be);
    int64_t want = gpp_alloc_bytes(rule, (int64_t)bytes);
    gpp_backend_mem_t m;
    gpp_backend_mem(self->be, &m);
    int synced = 0;
    while (self->n_free && m.live_bytes + want > m.peak_bytes) {
        int v = 0;
        for (int i = 1; i < self->n_free; i++) {
            size_t bi = self->free_blocks[i].bytes, bv = self->free_blocks[v].bytes;
            if (bv < bytes ? bi > bv : bi >= bytes && bi < bv)
                v = i;
        }
        if (!synced++)
            gpp_stream_sync(self->s, NULL);
        m.live_bytes -= gpp_alloc_bytes(rule, (int64_t)self->free_blocks[v].bytes);
        gpp_backend_free(self->be, &self->free_blocks[v].p);
        self->free_blocks[v] = self->free_blocks[--self->n_free];
    }
}

void *gpp_exec_alloc(gpp_exec_t *self, size_t bytes, gpp_err_t *err)
{
    if (bytes == 0)
        bytes = 4;
    if (self->pg == PG_REPLAY) /* its callers leave the recordings before they allocate */
        return gpp_err_set(err, "executor: an allocation while replaying recorded passes"), NULL;
    void *p = NULL;
    for (int i = 0; i < self->n_free; i++)
        if (self->free_blocks[i].bytes == bytes) {
            p = self->free_blocks[i].p;
            self->free_blocks[i] = self->free_blocks[--self->n_free];
            break;
        }
    if (!p && self->capture_on) {
        /* nothing may synchronise or allocate inside a capture; the step ran
           once at this size, so this is a size it did not use */
        gpp_err_set(err,
                    "executor: a CUDA graph capture asked for %zu bytes the pool does not hold",
                    bytes);
        return NULL;
    }
    if (!p) {
        /* No cached block of this size. Below the backend's high-water mark
         * the cached blocks stay; to pass it, they go back first, so that
         * the mark is what is live then (gpp_stage_mem_peak predicts it).
         * A backward misses at every size change (gradients come as outputs
         * go): giving them back on each miss made the CPU backend free,
         * allocate and page-fault every iteration. */
        if (!self->pool_grow)
            s_pool_fit(self, bytes);
        int drop = self->n_free && !self->pool_grow;
        p = gpp_backend_alloc(self->be, bytes, drop ? NULL : err);
        if (!p && drop) { /* out of memory with cached blocks: give them back, retry */
            s_pool_drop(self);
            p = gpp_backend_alloc(self->be, bytes, err);
        }
        if (!p)
            return NULL;
        if (self->pool_grow) {
            self->grown++;
            gpp_exec_pool_register(self, p, bytes);
        }
    }
    self->live_bytes += (int64_t)bytes;
    if (self->live_bytes > self->peak_bytes)
        self->peak_bytes = self->live_bytes;
    return p;
}

void gpp_exec_pool_put(gpp_exec_t *self, void *p, size_t bytes)
{
    if (self->n_free == self->cap_free) {
        self->cap_free = self->cap_free ? 2 * self->cap_free : 64;
        self->free_blocks =
            gpp_xrealloc(self->free_blocks, (size_t)self->cap_free * sizeof *self->free_blocks);
    }
    self->free_blocks[self->n_free++] = (exec_block_t){p, bytes};
}

void gpp_exec_pool_release(gpp_exec_t *self, void **p_p, size_t bytes)
{
    if (!*p_p)
        return;
    if (bytes == 0)
        bytes = 4;
    /* Stream-ordered reuse: later work on the same stream may take it.
       Replaying passes, the block stays where the recording put it: the
       pool is not used (gpp_exec_graph.c). */
    if (self->pg != PG_REPLAY)
        gpp_exec_pool_put(self, *p_p, bytes);
    self->live_bytes -= (int64_t)bytes;
    *p_p = NULL;
}

int gpp_exec_tensor_new(gpp_exec_t *self, const exec_slot_t *sl, int64_t n, gpp_tensor_t *t,
                        gpp_err_t *err)
{
    *t = gpp_tensor(NULL, sl->dtype, n, sl->rows, sl->cols);
    t->data = gpp_exec_alloc(self, gpp_tensor_bytes(t), err);
    return t->data ? 0 : -1;
}

void gpp_exec_tensor_release(gpp_exec_t *self, gpp_tensor_t *t)
{
    gpp_exec_pool_release(self, &t->data, gpp_tensor_bytes(t));
}

/* Host staging buffer for data going to the device. */
void *gpp_exec_host(gpp_exec_t *self, size_t bytes)
{
    return gpp_data_buf_reserve(&self->host, bytes, self->be);
}

void gpp_exec_pool_register(gpp_exec_t *self, void *p, size_t bytes)
{
    if (self->n_reg == self->cap_reg) {
        self->cap_reg = self->cap_reg ? 2 * self->cap_reg : 64;
        self->reg = gpp_xrealloc(self->reg, (size_t)self->cap_reg * sizeof *self->reg);
    }
    self->reg[self->n_reg++] = (exec_block_t){p, bytes};
}

/* 1 when a micro-batch slot holds block p. */
static int s_held(const gpp_exec_t *self, const void *p)
{
    for (int m = 0; m < self->n_mb; m++) {
        const exec_mb_t *mb = &self->mb[m];
        for (int k = 0; k < self->n_slots; k++)
            if (mb->act[k].data == p || mb->grad[k].data == p)
                return 1;
        for (int i = 0; i < self->n_local; i++)
            if (mb->stash[i] == p)
                return 1;
    }
    return 0;
}

void gpp_exec_pool_thaw(gpp_exec_t *self)
{
    /* recordings may still be running on the blocks */
    gpp_stream_sync(self->s, NULL);
    self->n_free = 0;
    self->live_bytes = 0;
    for (int i = 0; i < self->n_reg; i++) {
        if (s_held(self, self->reg[i].p))
            self->live_bytes += (int64_t)self->reg[i].bytes;
        else
            gpp_exec_pool_put(self, self->reg[i].p, self->reg[i].bytes);
    }
    free(self->reg);
    self->reg = NULL;
    self->n_reg = self->cap_reg = 0;
    self->pool_grow = 0;
}

void gpp_exec_pool_free(gpp_exec_t *self)
{
    for (int i = 0; i < self->n_free; i++)
        gpp_backend_free(self->be, &self->free_blocks[i].p);
    free(self->free_blocks);
    self->free_blocks = NULL;
    self->n_free = self->cap_free = 0;
    free(self->reg);
    self->reg = NULL;
    self->n_reg = self->cap_reg = 0;
    gpp_data_buf_free(&self->host, self->be);
}
