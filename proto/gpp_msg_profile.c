/* gpp_msg_profile: see gpp_msg_profile.h. */
#include "proto/gpp_msg_profile.h"

#include <assert.h>

void gpp_msg_profile_pack(const gpp_profile_row_t *rows, size_t n, Gpp__OpProfile *msgs,
                          Gpp__OpProfile **ptrs)
{
    for (size_t i = 0; i < n; i++) {
        const gpp_profile_row_t *r = &rows[i];
        Gpp__OpProfile *m = &msgs[i];
        assert(r->has_fwd);
        gpp__op_profile__init(m);
        m->op = r->op;
        m->micro_batch = r->micro_batch;
        m->fwd_ms = r->fwd_ms;
        m->bwd_ms = r->ms - r->fwd_ms;
        m->kernel_stash_set = r->has_kernel_stash;
        m->kernel_stash = r->kernel_stash;
        m->workspace_set = r->has_workspace;
        m->workspace_fixed = r->workspace.fixed;
        m->workspace_per_sample = r->workspace.per_sample;
        m->out_bytes_set = r->has_out_bytes;
        m->out_bytes = r->out_bytes;
        ptrs[i] = m;
    }
}

gpp_profile_row_t *gpp_msg_profile_rows(const Gpp__ProfileResult *res)
{
    gpp_profile_row_t *rows = gpp_xcalloc(res->n_ops + 1, sizeof *rows);
    for (size_t i = 0; i < res->n_ops; i++) {
        const Gpp__OpProfile *m = res->ops[i];
        rows[i] = (gpp_profile_row_t){.op = m->op,
                                      .micro_batch = m->micro_batch,
                                      .ms = m->fwd_ms + m->bwd_ms,
                                      .has_fwd = 1,
                                      .fwd_ms = m->fwd_ms,
                                      .has_kernel_stash = m->kernel_stash_set,
                                      .kernel_stash = m->kernel_stash,
                                      .has_workspace = m->workspace_set,
                                      .workspace = {m->workspace_fixed, m->workspace_per_sample},
                                      .has_out_bytes = m->out_bytes_set,
                                      .out_bytes = m->out_bytes};
    }
    return rows;
}
