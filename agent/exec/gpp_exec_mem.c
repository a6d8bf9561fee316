/* gpp_exec_mem: the executor's memory, the stage's memory plan
 * (model/gpp_memplan.h). One arena from the backend holds every buffer of
 * every micro-batch at the plan's offsets: a micro-batch takes a lane at
 * begin and gives it back at release, and each of its tensors is the arena
 * plus gpp_memplan_at(lane, buffer). Nothing is allocated per iteration,
 * and the backend's high-water mark is the plan's total by construction.
 * live_bytes counts the buffers a micro-batch holds now (the measure
 * gpp_exec_stash_bytes gives), at their actual samples. */
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec_impl.h"

static const char *s_kind_name(gpp_buf_kind_t k)
{
    static const char *names[GPP_BUF__COUNT] = {"output", "gradient", "stash", "labels"};
    return names[k];
}

static void s_count(gpp_exec_t *self, size_t bytes)
{
    self->live_bytes += (int64_t)(bytes ? bytes : 4);
    if (self->live_bytes > self->peak_bytes)
        self->peak_bytes = self->live_bytes;
}

void *gpp_exec_block_take(gpp_exec_t *self, const exec_mb_t *mb, gpp_buf_kind_t kind, int op,
                          size_t bytes, gpp_err_t *err)
{
    int b = gpp_memplan_buf(self->plan, kind, op);
    if (b < 0 || mb->lane < 0 || (int64_t)bytes > gpp_memplan_buf_bytes(self->plan, b))
        return gpp_err_set(err,
                           "executor: op %d's %s of %zu bytes has no room in the stage's memory "
                           "plan (%lld bytes planned)",
                           op, s_kind_name(kind), bytes,
                           (long long)(b < 0 ? 0 : gpp_memplan_buf_bytes(self->plan, b))),
               NULL;
    s_count(self, bytes);
    return (char *)self->arena + gpp_memplan_at(self->plan, mb->lane, b);
}

void gpp_exec_block_release(gpp_exec_t *self, void **p_p, size_t bytes)
{
    if (!*p_p)
        return;
    self->live_bytes -= (int64_t)(bytes ? bytes : 4);
    *p_p = NULL;
}

int gpp_exec_tensor_take(gpp_exec_t *self, const exec_mb_t *mb, gpp_buf_kind_t kind,
                         const exec_slot_t *sl, gpp_tensor_t *t, gpp_err_t *err)
{
    *t = gpp_tensor(NULL, sl->dtype, mb->n, sl->rows, sl->cols);
    t->data = gpp_exec_block_take(self, mb, kind, sl->producer, gpp_tensor_bytes(t), err);
    return t->data ? 0 : -1;
}

void gpp_exec_tensor_release(gpp_exec_t *self, gpp_tensor_t *t)
{
    gpp_exec_block_release(self, &t->data, gpp_tensor_bytes(t));
}

int gpp_exec_lane_take(gpp_exec_t *self, exec_mb_t *mb, int m, gpp_err_t *err)
{
    gpp_memplan_sum_t s;
    gpp_memplan_summary(self->plan, &s);
    for (int l = 0; l < s.lanes; l++)
        if (self->lane_of[l] < 0) {
            self->lane_of[l] = m;
            mb->lane = l;
            return 0;
        }
    return gpp_err_set(err,
                       "executor: micro-batch slot %d: all %d lanes of the stage's memory plan are "
                       "held (micro-batches begun and not released; gpp_exec_cfg_t.inflight)",
                       m, s.lanes);
}

void gpp_exec_lane_give(gpp_exec_t *self, exec_mb_t *mb)
{
    if (mb->lane >= 0)
        self->lane_of[mb->lane] = -1;
    mb->lane = -1;
}

int gpp_exec_mem_new(gpp_exec_t *self, const gpp_memplan_cfg_t *cfg, gpp_err_t *err)
{
    int *ids = gpp_xcalloc((size_t)self->n_local, sizeof(int));
    for (int i = 0; i < self->n_local; i++)
        ids[i] = self->ops[i].op->id;
    self->plan = gpp_memplan_new(self->g, self->n_local, ids, cfg, err);
    free(ids);
    if (!self->plan)
        return -1;
    gpp_memplan_sum_t s;
    gpp_memplan_summary(self->plan, &s);
    self->lane_of = gpp_xcalloc((size_t)s.lanes + 1, sizeof(int));
    for (int l = 0; l < s.lanes; l++)
        self->lane_of[l] = -1;
    if (s.arena_raw > 0 &&
        !(self->arena = gpp_backend_alloc(self->be, (size_t)s.arena_raw, err)))
        return gpp_err_prefix(err, "executor: the stage's arena of %lld bytes",
                              (long long)s.arena_raw);
    int64_t wb = 0, at = gpp_memplan_work_at(self->plan, &wb);
    if (wb > 0)
        gpp_stream_lend_workspace(self->s, (char *)self->arena + at, (size_t)wb);
    return 0;
}

void gpp_exec_mem_free(gpp_exec_t *self)
{
    if (self->s)
        gpp_stream_lend_workspace(self->s, NULL, 0);
    gpp_backend_free(self->be, &self->arena);
    free(self->lane_of);
    self->lane_of = NULL;
    gpp_memplan_destroy(&self->plan);
    gpp_data_buf_free(&self->host, self->be);
}

void *gpp_exec_host(gpp_exec_t *self, size_t bytes)
{
    return gpp_data_buf_reserve(&self->host, bytes, self->be);
}
