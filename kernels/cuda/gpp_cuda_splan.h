/* gpp_cuda_splan: the host half of the CUDA backend's sparse-gradient
 * accumulation (gpp_sparse.h): grouping (row id, value row) pairs by their
 * destination slot, in first-touch order, against a host mirror of the
 * gradient's slot map.
 *
 * The result is a plan of int32 that one kernel (gpp_cuk_sparse_accum,
 * gpp_cuda_kern.h) applies: [off: G + 1][pair: count][slot: G][row: G]
 * [fresh: G] — group g sums the value rows of pairs pair[off[g] ..
 * off[g+1]) in that order onto slot[g], starting from 0 when fresh[g]
 * (which also records row[g] in the slot map and the slot's row id). That
 * is the CPU backend's order (gpp_cpu_sparse_add), so slots, row order and
 * sums match it. Pure C, unit-tested without a GPU (test_cuda_cache.c).
 */
#ifndef GPP_CUDA_SPLAN_H
#define GPP_CUDA_SPLAN_H

#include <stdint.h>

/* Host mirror of a gradient over a table of table_rows rows; all three
 * arrays have table_rows entries and start all -1. */
typedef struct {
    int64_t table_rows;
    int32_t *slot; /* slot of a row, or -1 */
    int32_t *rows; /* row of a slot (slots < the gradient's count) */
    int32_t *grp;  /* scratch of gpp_cuda_splan_build: -1 between calls */
} gpp_cuda_smirror_t;

/* Ints of a plan with `groups` groups over `count` pairs. */
static inline int64_t gpp_cuda_splan_ints(int64_t groups, int64_t count)
{
    return 4 * groups + 1 + count;
}

/* Plans `count` pairs with row ids ids[] (each in [0, table_rows): the
 * caller validated them) for a gradient of *touched rows: writes the plan
 * (room for gpp_cuda_splan_ints(count, count) ints), records the fresh rows
 * in the mirror, sets *touched to the new count and returns the number of
 * groups. */
int64_t gpp_cuda_splan_build(gpp_cuda_smirror_t *m, int64_t *touched, const int32_t *ids,
                             int64_t count, int32_t *plan);
/* Forgets the fresh rows of a plan that was not applied (the mirror then
 * matches the unchanged device gradient of `touched` rows again). */
void gpp_cuda_splan_undo(gpp_cuda_smirror_t *m, const int32_t *plan, int64_t groups, int64_t count);
/* Back to empty after the device cleared its `touched` rows. */
void gpp_cuda_smirror_clear(gpp_cuda_smirror_t *m, int64_t touched);

#endif
