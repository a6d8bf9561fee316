/* gpp_cuda_splan: grouping sparse-gradient pairs by destination slot (the
 * plan format is in gpp_cuda_splan.h). */
#include "kernels/cuda/gpp_cuda_splan.h"

#include <assert.h>
#include <stdlib.h>

#include "common/gpp_err.h"

int64_t gpp_cuda_splan_build(gpp_cuda_smirror_t *m, int64_t *touched, const int32_t *ids,
                             int64_t count, int32_t *plan)
{
    assert(m && touched && (count == 0 || (ids && plan)) && count < INT32_MAX / 5);
    int32_t *pg = gpp_xcalloc((size_t)count + 1, sizeof(int32_t));    /* group of each pair */
    int32_t *gslot = gpp_xcalloc((size_t)count + 1, sizeof(int32_t)); /* slot of each group */
    int32_t *gn = gpp_xcalloc((size_t)count + 1, sizeof(int32_t));    /* pairs per group */
    int64_t groups = 0, old = *touched, next = old;
    for (int64_t k = 0; k < count; k++) {
        int32_t r = ids[k];
        assert(r >= 0 && r < m->table_rows);
        if (m->slot[r] < 0) { /* fresh row: the next slot */
            m->slot[r] = (int32_t)next;
            m->rows[next++] = r;
        }
        int32_t slot = m->slot[r];
        if (m->grp[slot] < 0) {
            m->grp[slot] = (int32_t)groups;
            gslot[groups++] = slot;
        }
        pg[k] = m->grp[slot];
        gn[pg[k]]++;
    }
    int32_t *off = plan, *pair = off + groups + 1;
    int32_t *pslot = pair + count, *prow = pslot + groups, *fresh = prow + groups;
    off[0] = 0;
    for (int64_t i = 0; i < groups; i++) {
        off[i + 1] = off[i] + gn[i];
        gn[i] = off[i]; /* where group i's next pair goes */
        pslot[i] = gslot[i];
        prow[i] = m->rows[gslot[i]];
        fresh[i] = gslot[i] >= old;
        m->grp[gslot[i]] = -1;
    }
    for (int64_t k = 0; k < count; k++)
        pair[gn[pg[k]]++] = (int32_t)k;
    free(pg);
    free(gslot);
    free(gn);
    *touched = next;
    return groups;
}

void gpp_cuda_splan_undo(gpp_cuda_smirror_t *m, const int32_t *plan, int64_t groups, int64_t count)
{
    const int32_t *prow = plan + groups + 1 + count + groups, *fresh = prow + groups;
    for (int64_t i = 0; i < groups; i++)
        if (fresh[i])
            m->slot[prow[i]] = -1;
}

void gpp_cuda_smirror_clear(gpp_cuda_smirror_t *m, int64_t touched)
{
    for (int64_t k = 0; k < touched; k++)
        m->slot[m->rows[k]] = -1;
}
