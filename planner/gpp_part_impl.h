/* gpp_part_impl: private to the partitioner's files (not installed, not for
 * other modules).
 *
 *   gpp_inflight.c     the appendix ComputeInFlight table (gpp_part_inflight)
 *   gpp_part.c         the DP over the SP tree: one run at a target TPS
 *   gpp_part_setup.c   the DP's state: prefix sums, scratch, memo sizing
 *   gpp_part_bnd.c     stage boundaries (incremental) and the join split's head scratch
 *   gpp_plan_build.c   a gpp_plan_t from the DP's stages; iteration estimates
 *   gpp_part_search.c  binary search on the TPS, the micro-batch sweep, the
 *                      candidates' simulation, gpp_part_run
 *
 * Units: *_ms milliseconds, *_bytes bytes; "positions" are indices into the
 * SP tree's op order (tree->op_at); an in-flight "level" l stands for
 * l * level_samples samples. */
#ifndef GPP_PART_IMPL_H
#define GPP_PART_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "planner/gpp_cost.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan.h"
#include "planner/gpp_sp.h"

#define GPP_DP_MAX_CFG 256                   /* schedule configs one search may use */
#define GPP_DP_ARENA_CHUNK ((size_t)1 << 18) /* ints per arena chunk */
#define GPP_DP_RANGE_TABLE_MAX                                                                     \
    2048 /* ops up to which the step and boundary of every range are kept */

/* A schedule config: micro-batch b samples, k of kFkB. */
typedef struct {
    int b, k;
} gpp_dp_cfg_t;

/* A stage the DP emitted. */
typedef struct {
    int l, r;      /* first and last position */
    int ci;        /* config index into gpp_dp_t.cfg */
    int d;         /* data-parallel replicas */
    int infl;      /* samples in flight (the DP's view) */
    double tps_ms; /* time per sample */
} gpp_dp_stage_t;

/* Chunked int arena of the memo arrays: stable pointers, reused by runs. */
typedef struct {
    int **chunks;
    size_t *used;
    int n_chunks, cur;
} gpp_dp_arena_t;

typedef struct {
    const gpp_graph_t *g;
    const gpp_cost_t *cost;
    gpp_alloc_rule_t alloc_rule; /* the cluster's (gpp_cost_mem_bound's rule, kept here for
                                    the boundary bound on every stage tried) */
    int bnd_copies;              /* gpp_cost_bnd_copies */
    const gpp_sp_t *tree;
    int batch;               /* mini-batch B, samples per iteration */
    int n_dev;               /* devices of the cluster */
    int no_fit;              /* n_dev + 1: the device count meaning "does not fit" */
    int64_t mem_bound_bytes; /* per-device memory bound */
    int generalized;         /* 1: ComputeInFlight table (per-stage mbs / kFkB) */
    int n_cfg;
    gpp_dp_cfg_t cfg[GPP_DP_MAX_CFG];
    int level_samples;                 /* samples per in-flight level: gcd of the configs' b */
    int n_levels;                      /* in-flight levels the memo keeps */
    int n_ctx;                         /* successor contexts: 1 (none) + n_cfg * n_levels */
    int *infl_tab, *lev_tab, *mbf_tab; /* [n_cfg * n_ctx]: gpp_dp_infl, its level and
                                          micro-batches; NULL when too large */
    int sp_depth;                      /* most stages on a path of the SP tree */
    /* per position prefix sums: entry pos + 1 sums positions 0..pos */
    /* memory (gpp_cost_stage_mem_bound's sums): state, stash and work bytes;
       reserved bytes per per-replica micro-batch m, built on first use
       (pre_reserved_at[m], NULL rows until then; all NULL without any) */
    int64_t *pre_state_bytes, *pre_stash_bytes, *pre_work_bytes;
    int64_t **pre_reserved_at;
    int64_t work_bound_bytes; /* gpp_cost_workspace_bound */
    int has_reserved;
    double *pre_grad_bytes;
    int *pre_step_kernels;          /* ops with parameters */
    int *pre_sparse_ops;            /* of them, embedding tables (gpp_cost_step_kernels) */
    int step_cache_l, step_cache_r; /* s_step_ms cache: range and value */
    double step_cache_ms;
    /* With n_ops <= GPP_DP_RANGE_TABLE_MAX (else NULL): row l holds, at r - l, the
       range [l, r]'s s_step_ms (NAN: not yet) and its boundary (gpp_dp_bnd_row);
       rows are allocated on first use, at most 20 bytes per range (40 MiB) */
    double **step_rows;
    struct gpp_dp_bnd_cell **bnd_rows;
    int *bnd_stamp;      /* stamp row of the gpp_dp_bnd_row passes */
    double *pre_rate_ms; /* least per-sample fwd+bwd ms of each op over the used sizes */
    double **pre_ms;     /* [batch+1]: per samples m, prefix of fwd+bwd ms */
    double *ar_ms_per_byte, *ar_ms_fixed; /* [n_dev+1]: allreduce ms = per_byte * bytes + fixed */
    int ar_monotone; /* both non-decreasing in the group size (s_stage_dev's scan cache) */
    double p2p_alpha_ms, p2p_ms_per_byte;
    /* boundary */
    int *last_consumer;           /* [pos]: largest consumer position, -1 for none */
    int *in_off, *in_pos;         /* [pos + 1], [edges]: distinct producer positions of each op */
    double *pos_out_bytes;        /* [pos]: out_bytes of the op at pos */
    int cfg_mmin[GPP_DP_MAX_CFG]; /* ceil(b / min(b, n_dev)): least samples per replica */
    int *stamp;                   /* [2 * (tree depth + 1)][pos]: one pair of rows per SP-tree
                                     depth, so that a boundary survives the nested fills its
                                     entry triggers (those only touch deeper rows) */
    int stamp_next;
    int *node_depth; /* [node] depth in the SP tree, root 0 */
    /* join-split head scratch (s_head_t), one row per SP-tree depth */
    double *head_bytes; /* [depth][head_row_len]: W, Hd boundary bytes */
    int *head_ints;     /* [depth][head_irow_len]: W, Hd counts, shared producers */
    size_t head_row_len, head_irow_len;
    int head_max_branches;       /* most branches of a parallel node */
    int *head_owner, *head_used; /* [depth]: parallel node owning the row, list entries used */
    /* memo */
    int *suffix_base; /* [node] first suffix id */
    int n_suffix;
    unsigned *memo_gen; /* [n_suffix * n_ctx]: run that filled the slot */
    int **memo_p;       /* [n_suffix * n_ctx]: pointer into the arena */
    unsigned memo_run;  /* current run (never reset); older slots are stale */
    size_t memo_slots;
    /* views: a series branch of a parallel node cut after its first kv
       children (kv = 1..k-1), the chain before a join-side tail stage; node
       id tree->n_nodes + view index. Their memo is keyed by the contexts a
       run actually asks for (a few tail contexts), not by every context:
       cell (slot, view suffix), slot-major, slots numbered per run. */
    int *view_first;         /* [node]: view index of kv = 1, -1 for none */
    int *view_node, *view_k; /* [view]: the series node, kv */
    int *view_base;          /* [view]: first view suffix id */
    int *view_leaves;        /* [view]: 1 when the series' children are all leaves */
    int n_views, n_view_suffix;
    unsigned *vmemo_gen; /* [vmemo_slots * n_view_suffix] */
    int **vmemo_p;
    int vmemo_slots;         /* context slots allocated */
    int *vslot_of;           /* [n_ctx]: the context's slot ... */
    unsigned *vslot_gen;     /* [n_ctx]: ... valid when == memo_run */
    int vslot_len, n_vslots; /* length of those; slots used this run */
    gpp_dp_arena_t arena;
    int *zero_row;     /* [n_cfg * n_levels] zeros */
    double target_ms;  /* target TPS of the current run */
    double inv_target; /* (1 - 1e-9) / target_ms: lbdev rounds safely down */
    /* emit */
    gpp_dp_stage_t *out;
    int n_out, cap_out;
    int out_level; /* source level of the emitted plan */
    int max_level; /* level limit of the current run */
    int min_tps;   /* opts.min_tps: rank plans by TPS, not by the estimate */
    int simulate;  /* opts.simulate: keep candidates for the simulated pick */
    long long n_eval;
} gpp_dp_t;

/* The tree node of a node id: itself, or the series node of a view. */
static inline int gpp_dp_real(const gpp_dp_t *s, int node)
{
    return node < s->tree->n_nodes ? node : s->view_node[node - s->tree->n_nodes];
}

/* gpp_part_bnd.c: boundary of a growing interval [l, r] of positions. */
typedef struct {
    int l, r; /* current interval, r = l - 1 when empty */
    double bytes;
    int n;
    int st;
    int *stamp; /* the stamp row this boundary owns */
} gpp_dp_bnd_t;
/* The boundary of [l, r] without the interval's scratch. */
typedef struct gpp_dp_bnd_cell {
    double bytes;
    int n;
} gpp_dp_bnd_cell_t;
/* Boundaries of [l, r] for every r from l to the last position, index r - l:
 * one gpp_dp_bnd_extend pass from l (the same sums in the same order as a
 * boundary grown from l), made on first use and kept for the search. NULL
 * above GPP_DP_RANGE_TABLE_MAX ops: grow a boundary instead. */
const gpp_dp_bnd_cell_t *gpp_dp_bnd_row(gpp_dp_t *s, int l);
/* Starts an empty interval at l; `row` (0 or 1) picks one of the two stamp
 * rows of `node`'s depth: two boundaries of one entry use different rows. */
void gpp_dp_bnd_start(gpp_dp_t *s, gpp_dp_bnd_t *bd, int l, int node, int row);
/* Grows the interval to the right up to position r. */
void gpp_dp_bnd_extend(gpp_dp_t *s, gpp_dp_bnd_t *bd, int r);
/* Grows the interval to the left down to position l. */
void gpp_dp_bnd_extend_left(gpp_dp_t *s, gpp_dp_bnd_t *bd, int l);

/* Head stages of a join-side split through series branch j of parallel node
 * P (a child of series `node`): H(h, e) = W(h) + Hd(e), W(h) = whole branches
 * h..j-1, Hd(e) = children 0..e of branch j; one contiguous range. Branches
 * of a parallel node share no edge, so the boundary of H is W's plus Hd's
 * less the producers outside P that both read (counted once). Hd and its
 * shared-producer list depend on (P, j) only: they are built once and kept
 * in node's depth row of the scratch (the nested fills use deeper rows)
 * until another parallel node at that depth claims the row. W grows
 * leftwards on demand. Row layout, doubles: W bytes [nc], Hd bytes per
 * branch; ints: W counts [nc], Hd counts per branch, then per branch the
 * owner P (-1: not built), list offset and length, then the lists. */
typedef struct {
    const gpp_sp_node_t *P, *Bj;
    int node, j, w_low;
    gpp_dp_bnd_t w;
    double *w_bytes, *hd_bytes; /* [nc], [kj - 1] */
    int *w_n, *hd_n;
    const int *lst; /* shared candidates: (position, first e, last branch < j reading it) */
    int nl;
} gpp_dp_head_t;
/* Builds (or finds) the scratch of branch j of parallel node pnode, a child
 * of series node `node`. */
void gpp_dp_head_init(gpp_dp_t *s, int node, int pnode, int j, gpp_dp_head_t *H);
/* Boundary of H(h, e) into *bh (bytes and count only). */
void gpp_dp_head_bnd(gpp_dp_t *s, gpp_dp_head_t *H, int h, int e, gpp_dp_bnd_t *bh);

/* gpp_part.c: the DP state for g on cost's cluster, batch and memory bound. */
gpp_dp_t *gpp_dp_new(const gpp_graph_t *g, const gpp_cost_t *cost, const gpp_sp_t *tree, int batch,
                     int64_t mem_bound_bytes);
void gpp_dp_destroy(gpp_dp_t **sp);
/* Sets the candidate configs cfg[0..n_cfg) and sizes the memo. */
void gpp_dp_configure(gpp_dp_t *s, const gpp_dp_cfg_t *cfg, int n_cfg, int generalized);
/* In-flight levels for these configs; the samples per level in *level_samples. */
int64_t gpp_dp_levels(const gpp_dp_t *s, const gpp_dp_cfg_t *cfg, int n_cfg, int generalized,
                      int *level_samples);
/* Samples in flight of a stage with config ci before context ctx (0: a sink;
 * else 1 + successor config * n_levels + successor level), capped at B. */
int gpp_dp_infl(const gpp_dp_t *s, int ci, int ctx);
/* One DP run at target TPS target_ms: 1 with the stages in s->out, or 0. */
int gpp_dp_run(gpp_dp_t *s, double target_ms, int max_level);

/* gpp_plan_build.c: the plan of s->out (linked, spare devices placed where
 * they lower the refined estimate under `kind`, in-flight, costs, memory);
 * NULL with a message. */
gpp_plan_t *gpp_part_build_plan(const gpp_dp_t *s, const char *planner, int universal_b,
                                gpp_sched_kind_t kind, gpp_err_t *err);
/* The fill and drain part of a stage's micro-batch time under `kind`, ms:
 * 1F1B fwd + bwd + comm; zb-h1 2 bwd_w less, zb-h2 3 bwd_w less, at least
 * fwd + comm. */
double gpp_part_fill_ms(gpp_sched_kind_t kind, double fwd_ms, double bwd_ms, double bwd_w_ms,
                        double comm_ms);
/* TPS * (B + longest path of micro-batch sizes - b_last), ms, each size
 * weighted by its stage's gpp_part_fill_ms share under a zero-bubble kind. */
double gpp_part_iter_estimate(const gpp_plan_t *p, gpp_sched_kind_t kind);

#endif
