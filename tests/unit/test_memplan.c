/* Tests of the memory plan (model/gpp_memplan.h): the lifetimes of a small
 * chain's buffers step by step, with the backward whole and split in B and
 * W; for every zoo model (small sizes), whole and cut, with 1 to 3
 * micro-batches in flight, whole and split, no two buffers that can be
 * alive at once share a byte, every buffer lies inside its region and the
 * arena, and the figures add up to the total; bad configurations are
 * refused. The planner's figure is this total (test_cost stage_mem), the
 * executor's allocation too (test_optable zoo_stage_peak). */
#include <stdlib.h>
#include <string.h>

#include "model/gpp_graph.h"
#include "model/gpp_memplan.h"
#include "model/gpp_optable.h"
#include "tests/gpp_test.h"

static const char *const s_zoo[] = {
    "mmt:branches=2,layers=1,hidden=32,heads=4,seq=8,ffn=64,classes=8",
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=2,rows=100,dim=8,"
    "bag=4,top_layers=1",
    "candle_uno:branches=2,layers=2,hidden=32,in=16,doses=1,top_layers=1",
    "transformer:layers=2,hidden=16,heads=2,seq=4,ffn=32,classes=4",
    "case_study:branches=2,blocks=2,hidden=16,heads=4,seq=4,ffn=32,classes=4",
};

static void s_life(const gpp_memplan_t *p, gpp_buf_kind_t kind, int op, gpp_pass_kind_t bk, int bt,
                   gpp_pass_kind_t dk, int dt)
{
    int b = gpp_memplan_buf(p, kind, op);
    GPP_EXPECT_MSG(b >= 0, "buffer kind %d of op %d missing", (int)kind, op);
    if (b < 0)
        return;
    gpp_pass_kind_t xbk, xdk;
    int xbt, xdt;
    gpp_memplan_life(p, b, &xbk, &xbt, &xdk, &xdt);
    GPP_EXPECT_MSG(xbk == bk && xbt == bt && xdk == dk && xdt == dt,
                   "kind %d of op %d: lives %c%d..%c%d, expected %c%d..%c%d", (int)kind, op,
                   "FBW"[xbk], xbt, "FBW"[xdk], xdt, "FBW"[bk], bt, "FBW"[dk], dt);
}

/* x -> linear -> relu (fused: the linear's output never exists) -> linear
 * -> mse, 2 samples: each buffer's birth and death. Steps: forward 1..5 by
 * ascending ids, backward 1..5 by descending ids, 6 each pass's end. */
static void t_chain_lifetimes(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_graph_new("chain");
    int x = gpp_graph_input(g, "x", 1, 8);
    int l1 = gpp_graph_linear(g, "l1", x, 16, 1);
    int r = gpp_graph_unary(g, GPP_OP_RELU, "r", l1);
    int l2 = gpp_graph_linear(g, "l2", r, 4, 1);
    int loss = gpp_graph_add(g, GPP_OP_LOSS_MSE, "loss", 1, &l2);
    GPP_EXPECT_MSG(gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    int all[] = {x, l1, r, l2, loss};
    gpp_memplan_cfg_t cfg = {
        .optim_bufs = GPP_OPTIM_BUFS_SGD, .batch = 8, .n = 2, .inflight = 2, .slots = 4};
    gpp_memplan_t *p = gpp_memplan_new(g, 5, all, &cfg, &err);
    GPP_EXPECT_MSG(p != NULL, "%s", err.msg);
    if (!p) {
        gpp_graph_destroy(&g);
        return;
    }
    s_life(p, GPP_BUF_ACT, x, GPP_PASS_F, 1, GPP_PASS_B, 6); /* l1's backward reads it */
    GPP_EXPECT(gpp_memplan_buf(p, GPP_BUF_ACT, l1) < 0);     /* fused into the ReLU */
    s_life(p, GPP_BUF_ACT, r, GPP_PASS_F, 2, GPP_PASS_B, 6); /* written by l1's call */
    s_life(p, GPP_BUF_LABEL, loss, GPP_PASS_F, 5, GPP_PASS_F, 5);
    s_life(p, GPP_BUF_GRAD, l2, GPP_PASS_F, 5, GPP_PASS_B, 2); /* the loss's forward */
    s_life(p, GPP_BUF_GRAD, r, GPP_PASS_B, 2, GPP_PASS_B, 3);  /* l2's backward -> r's */
    s_life(p, GPP_BUF_GRAD, l1, GPP_PASS_B, 3, GPP_PASS_B, 4); /* r's -> l1's */
    GPP_EXPECT(gpp_memplan_buf(p, GPP_BUF_GRAD, x) < 0);       /* data */
    GPP_EXPECT(gpp_memplan_buf(p, GPP_BUF_ACT, loss) < 0);     /* its value: the slot's */
    /* l2's output: the loss reads it in the forward, nobody in the backward */
    int b = gpp_memplan_buf(p, GPP_BUF_ACT, l2);
    GPP_EXPECT(b >= 0 && gpp_memplan_buf_bytes(p, b) == 2 * g->ops[l2].out_bytes);
    if (b >= 0) {
        gpp_pass_kind_t bk, dk;
        int bt, dt;
        gpp_memplan_life(p, b, &bk, &bt, &dk, &dt);
        GPP_EXPECT(bk == GPP_PASS_F && bt == 4);
        GPP_EXPECT(gpp_optable[GPP_OP_LOSS_MSE].bwd_reads_inputs ? dk == GPP_PASS_B && dt == 6
                                                                 : dk == GPP_PASS_F && dt == 5);
    }
    /* a label lives inside one op of one pass: a transient */
    int lab = gpp_memplan_buf(p, GPP_BUF_LABEL, loss);
    GPP_EXPECT(lab >= 0);
    gpp_memplan_sum_t s;
    gpp_memplan_summary(p, &s);
    GPP_EXPECT(s.lanes == 2 && s.slots == 4 && s.loss_bytes == 4 * 64);
    GPP_EXPECT(s.total_bytes == s.state_bytes + s.arena_bytes);
    /* dense: 8x16+16 + 16x4+4 floats, values + gradients + momentum, one block each */
    int64_t dense = (8 * 16 + 16 + 16 * 4 + 4) * 4;
    GPP_EXPECT(s.state_bytes == 3 * ((dense + 63) / 64 * 64));
    gpp_memplan_destroy(&p);
    /* the backward split: l2's and l1's W read their inputs (r, x), output
       gradients and nothing else (a linear has no stash); W steps as B's */
    cfg.split = 1;
    p = gpp_memplan_new(g, 5, all, &cfg, &err);
    GPP_EXPECT_MSG(p != NULL, "%s", err.msg);
    if (p) {
        s_life(p, GPP_BUF_ACT, x, GPP_PASS_F, 1, GPP_PASS_W, 4);
        s_life(p, GPP_BUF_ACT, r, GPP_PASS_F, 2, GPP_PASS_W, 2);
        s_life(p, GPP_BUF_GRAD, l2, GPP_PASS_F, 5, GPP_PASS_W, 2);
        s_life(p, GPP_BUF_GRAD, r, GPP_PASS_B, 2, GPP_PASS_B, 3); /* the ReLU has no W */
        s_life(p, GPP_BUF_GRAD, l1, GPP_PASS_B, 3, GPP_PASS_W, 4);
        GPP_EXPECT(gpp_memplan_buf(p, GPP_BUF_WSTASH, l1) < 0);
        gpp_memplan_sum_t w;
        gpp_memplan_summary(p, &w);
        GPP_EXPECT(w.lane_bytes + w.scratch_bytes >= s.lane_bytes + s.scratch_bytes);
        GPP_EXPECT(w.live_bytes > s.live_bytes);
    }
    gpp_memplan_destroy(&p);
    GPP_EXPECT(p == NULL);
    gpp_memplan_destroy(&p);
    gpp_graph_destroy(&g);
}

static int s_overlap(int64_t a, int64_t an, int64_t b, int64_t bn)
{
    return a < b + bn && b < a + an;
}

/* Lifetimes on one micro-batch's clock: forward 0..L+1, backward
 * L+2..2L+3, W 2L+4.. */
static void s_clock(const gpp_memplan_t *p, int L, int b, int *t0, int *t1)
{
    gpp_pass_kind_t bk, dk;
    int bt, dt;
    gpp_memplan_life(p, b, &bk, &bt, &dk, &dt);
    *t0 = (int)bk * (L + 2) + bt;
    *t1 = (int)dk * (L + 2) + dt;
}

/* Every invariant of one plan; returns 1 when all hold. */
static int s_check_plan(const gpp_graph_t *g, int n_ops, const int *ops, const gpp_memplan_t *p,
                        const gpp_memplan_cfg_t *cfg, const char *what)
{
    int ok = 1;
    gpp_memplan_sum_t s;
    gpp_memplan_summary(p, &s);
    int nb = gpp_memplan_n_bufs(p);
    int64_t lane0 = s.arena_raw - s.scratch_bytes - s.lanes * s.lane_bytes;
    int64_t scratch0 = s.arena_raw - s.scratch_bytes;
    int64_t sizes[nb ? nb : 1];
    for (int b = 0; b < nb; b++) { /* as the device carves it */
        int64_t x = gpp_memplan_buf_bytes(p, b);
        sizes[b] = x <= 64 ? 64 : (x + 63) / 64 * 64;
    }
    /* every buffer inside its region; births before deaths */
    for (int b = 0; b < nb; b++) {
        int t0, t1;
        s_clock(p, n_ops, b, &t0, &t1);
        ok &= t0 <= t1;
        for (int l = 0; l < s.lanes; l++) {
            int64_t at = gpp_memplan_at(p, l, b);
            if (gpp_memplan_in_scratch(p, b))
                ok &= at >= scratch0 && at + sizes[b] <= s.arena_raw;
            else
                ok &= at >= lane0 + l * s.lane_bytes &&
                      at + sizes[b] <= lane0 + (l + 1) * s.lane_bytes;
        }
    }
    GPP_EXPECT_MSG(ok, "%s: a buffer outside its region or dying before its birth", what);
    /* no two buffers that may be alive at once share a byte: of one
       micro-batch, when their lifetimes meet; of two (two lanes), a lane's
       own buffer against anything of the other */
    int bad = 0;
    for (int b = 0; b < nb; b++)
        for (int c = 0; c < nb; c++) {
            int b0, b1, c0, c1;
            s_clock(p, n_ops, b, &b0, &b1);
            s_clock(p, n_ops, c, &c0, &c1);
            int meet = b0 <= c1 && c0 <= b1;
            for (int l = 0; l < s.lanes; l++)
                for (int m = 0; m < s.lanes; m++) {
                    if (l == m && b == c)
                        continue;
                    int both_scratch = gpp_memplan_in_scratch(p, b) && gpp_memplan_in_scratch(p, c);
                    int alive = l == m ? meet : !both_scratch; /* passes run one at a time */
                    if (alive && s_overlap(gpp_memplan_at(p, l, b), sizes[b],
                                           gpp_memplan_at(p, m, c), sizes[c]))
                        bad++;
                }
        }
    GPP_EXPECT_MSG(bad == 0, "%s: %d pairs of live buffers share bytes", what, bad);
    ok &= bad == 0;
    /* the stage's own buffers below the lanes, apart from each other */
    int64_t wb = 0, end = gpp_memplan_work_at(p, &wb);
    end += wb ? (wb + 63) / 64 * 64 : 0;
    for (int i = 0; i < g->n_ops; i++)
        for (int k = 0; k < 3; k++) { /* load-ahead 0, 1, then the feed */
            int64_t bytes, at = gpp_memplan_data_at(p, i, k < 2 ? k : -1, &bytes);
            if (at < 0)
                continue;
            ok &= at == end; /* laid one after the other */
            end = at + (bytes <= 64 ? 64 : (bytes + 63) / 64 * 64);
        }
    for (int sl = 0; sl < s.slots; sl++)
        ok &= gpp_memplan_loss_at(p, sl) < 0 || gpp_memplan_loss_at(p, sl) >= end;
    GPP_EXPECT_MSG(end + s.loss_bytes == lane0,
                   "%s: the stage's buffers end at %lld, lanes at %lld", what,
                   (long long)(end + s.loss_bytes), (long long)lane0);
    /* the figures add up; a micro-batch's live bytes fit its lane and the scratch */
    ok &= s.total_bytes == s.state_bytes + s.arena_bytes && s.arena_bytes >= s.arena_raw;
    ok &= s.arena_raw == lane0 + s.lanes * s.lane_bytes + s.scratch_bytes;
    ok &= s.live_bytes <= s.lane_bytes + s.scratch_bytes;
    ok &= gpp_memplan_total(p) == s.total_bytes;
    GPP_EXPECT_MSG(ok, "%s: figures do not add up", what);
    /* the state is the op table's per op (gpp_op_state_bytes), each of its
       allocations rounded up to 64 bytes: the dense ones' flat buffers, an
       embedding table's value, optimizer state and sparse gradient (3) */
    int64_t raw = 0, blocks = 2 + cfg->optim_bufs;
    for (int k = 0; k < n_ops; k++) {
        const gpp_op_t *op = &g->ops[ops[k]];
        raw += gpp_op_state_bytes(g, op, cfg->optim_bufs, cfg->batch);
        blocks += op->sparse_params ? 1 + cfg->optim_bufs + 3 : 0;
    }
    GPP_EXPECT_MSG(s.state_bytes >= raw && s.state_bytes < raw + 64 * blocks,
                   "%s: state %lld, the op table's %lld in %lld blocks", what,
                   (long long)s.state_bytes, (long long)raw, (long long)blocks);
    return ok;
}

static void t_zoo_layouts(void)
{
    int plans = 0;
    int64_t worst = 0;
    double most_over = 0;
    for (size_t z = 0; z < sizeof s_zoo / sizeof s_zoo[0]; z++) {
        gpp_err_t err = {0};
        gpp_graph_t *g = gpp_zoo_build(s_zoo[z], &err);
        GPP_EXPECT_MSG(g && gpp_graph_finalize(g, &err) == 0, "%s: %s", s_zoo[z], err.msg);
        if (!g)
            continue;
        int n = g->n_ops;
        int *all = malloc((size_t)n * sizeof *all);
        for (int i = 0; i < n; i++)
            all[i] = i;
        const int cut[][2] = {{0, n}, {0, n / 3}, {n / 3, n}, {n / 3, 2 * n / 3}};
        for (size_t c = 0; c < sizeof cut / sizeof cut[0]; c++)
            for (int infl = 1; infl <= 3; infl++) {
                gpp_memplan_cfg_t cfg = {.optim_bufs = GPP_OPTIM_BUFS_ADAMW,
                                         .batch = 16,
                                         .n = 3,
                                         .inflight = infl,
                                         .slots = 4,
                                         .split = infl == 2};
                gpp_memplan_t *p =
                    gpp_memplan_new(g, cut[c][1] - cut[c][0], all + cut[c][0], &cfg, &err);
                GPP_EXPECT_MSG(p != NULL, "%s: %s", s_zoo[z], err.msg);
                if (!p)
                    continue;
                char what[160];
                snprintf(what, sizeof what, "%.40s ops [%d, %d) x%d%s", s_zoo[z], cut[c][0],
                         cut[c][1], infl, cfg.split ? " split" : "");
                s_check_plan(g, cut[c][1] - cut[c][0], all + cut[c][0], p, &cfg, what);
                gpp_memplan_sum_t s;
                gpp_memplan_summary(p, &s);
                /* another lane count without planning again: the plan made
                   for it */
                cfg.inflight = infl + 1;
                gpp_memplan_t *more =
                    gpp_memplan_new(g, cut[c][1] - cut[c][0], all + cut[c][0], &cfg, &err);
                GPP_EXPECT_MSG(more && gpp_memplan_total_lanes(p, infl + 1) ==
                                           gpp_memplan_total(more) &&
                                   gpp_memplan_total_lanes(p, infl) == s.total_bytes,
                               "%s: %d lanes", what, infl + 1);
                gpp_memplan_destroy(&more);
                cfg.inflight = infl;
                /* how much the layout wastes against the live bytes */
                int64_t waste = s.lane_bytes + s.scratch_bytes - s.live_bytes;
                worst = waste > worst ? waste : worst;
                /* the split backward keeps more, never less: the same
                   buffers living until W, and W stashes */
                if (cfg.split) {
                    cfg.split = 0;
                    gpp_memplan_t *q =
                        gpp_memplan_new(g, cut[c][1] - cut[c][0], all + cut[c][0], &cfg, &err);
                    gpp_memplan_sum_t w;
                    gpp_memplan_summary(q, &w);
                    GPP_EXPECT_MSG(s.live_bytes >= w.live_bytes && s.state_bytes == w.state_bytes,
                                   "%s: live %lld, whole backward %lld", what,
                                   (long long)s.live_bytes, (long long)w.live_bytes);
                    double over = w.live_bytes ? 100.0 * (double)(s.live_bytes - w.live_bytes) /
                                                     (double)w.live_bytes
                                               : 0;
                    most_over = over > most_over ? over : most_over;
                    gpp_memplan_destroy(&q);
                }
                plans++;
                gpp_memplan_destroy(&p);
            }
        free(all);
        gpp_graph_destroy(&g);
    }
    printf("  %d plans: lane + scratch - live bytes at most %lld; the split backward's live "
           "bytes at most %.1f %% above the whole one's\n",
           plans, (long long)worst, most_over);
}

/* Load-ahead and graphs add their buffers; n 0 has none of a micro-batch. */
static void t_device_buffers(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build(s_zoo[0], &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    if (!g)
        return;
    int *all = malloc((size_t)g->n_ops * sizeof *all);
    for (int i = 0; i < g->n_ops; i++)
        all[i] = i;
    gpp_stage_dev_t dev = {.alloc_rule = GPP_ALLOC_ALIGN64, .load_ahead = 1, .graphs = 1};
    gpp_memplan_cfg_t cfg = {
        .optim_bufs = 1, .batch = 8, .n = 4, .inflight = 2, .slots = 2, .dev = &dev};
    gpp_memplan_t *p = gpp_memplan_new(g, g->n_ops, all, &cfg, &err);
    GPP_EXPECT(p != NULL);
    gpp_memplan_sum_t s;
    gpp_memplan_summary(p, &s);
    /* two load-ahead buffers and a feed of the SOURCE op's samples and the
       loss's labels, each its own 64-byte blocks; the workspace the
       largest request at n */
    int64_t ahead = 0, feed = 0, work = 0;
    for (int i = 0; i < g->n_ops; i++) {
        gpp_op_role_t role = gpp_optable[g->ops[i].type].role;
        int64_t b = role == GPP_ROLE_SOURCE ? 4 * g->ops[i].out_bytes
                    : role == GPP_ROLE_LOSS ? 4 * gpp_op_label_bytes(g, &g->ops[i])
                                            : 0;
        ahead += b ? 2 * ((b + 63) / 64 * 64) : 0;
        feed += b ? (b + 63) / 64 * 64 : 0;
        int64_t w = gpp_op_workspace_bytes(g, &g->ops[i], 4);
        work = w > work ? w : work;
    }
    GPP_EXPECT(s.ahead_bytes > 0 && s.ahead_bytes == ahead);
    GPP_EXPECT(s.feed_bytes > 0 && s.feed_bytes == feed);
    GPP_EXPECT(s.work_bytes == (work + 63) / 64 * 64);
    s_check_plan(g, g->n_ops, all, p, &cfg, "mmt with load-ahead and graphs");
    gpp_memplan_destroy(&p);
    cfg.n = 0;
    p = gpp_memplan_new(g, g->n_ops, all, &cfg, &err);
    GPP_EXPECT(p && gpp_memplan_n_bufs(p) == 0);
    if (p) {
        gpp_memplan_summary(p, &s);
        GPP_EXPECT(s.lane_bytes == 0 && s.scratch_bytes == 0 && s.ahead_bytes == 0);
    }
    gpp_memplan_destroy(&p);
    free(all);
    gpp_graph_destroy(&g);
}

static void t_bad_config(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build(s_zoo[3], &err);
    GPP_EXPECT(g && gpp_graph_finalize(g, &err) == 0);
    if (!g)
        return;
    int twice[] = {1, 2, 1}, outside[] = {0, g->n_ops};
    gpp_memplan_cfg_t cfg = {.optim_bufs = 1, .batch = 8, .n = 2, .inflight = 0, .slots = 1};
    GPP_EXPECT(gpp_memplan_new(g, 2, twice, &cfg, &err) == NULL && strstr(err.msg, "inflight"));
    cfg.inflight = 1;
    GPP_EXPECT(gpp_memplan_new(g, 3, twice, &cfg, &err) == NULL && strstr(err.msg, "twice"));
    GPP_EXPECT(gpp_memplan_new(g, 2, outside, &cfg, &err) == NULL && strstr(err.msg, "not an op"));
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {{"chain_lifetimes", t_chain_lifetimes},
                                        {"zoo_layouts", t_zoo_layouts},
                                        {"device_buffers", t_device_buffers},
                                        {"bad_config", t_bad_config},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
