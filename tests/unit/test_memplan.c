/* Tests of the memory plan (model/gpp_memplan.h): the lifetimes of a small
 * chain's buffers step by step; for every zoo model (small sizes), whole
 * and cut, with 1 to 3 micro-batches in flight, no two buffers that can be
 * alive at once share a byte, every buffer lies inside its region and the
 * arena, and the figures add up to the total; bad configurations are
 * refused. The planner's figure is this total (test_cost stage_mem). */
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
                   "FB"[xbk], xbt, "FB"[xdk], xdt, "FB"[bk], bt, "FB"[dk], dt);
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
    GPP_EXPECT(p == NULL);
    gpp_memplan_destroy(&p);
    gpp_graph_destroy(&g);
}

static int s_overlap(int64_t a, int64_t an, int64_t b, int64_t bn)
{
    return a < b + bn && b < a + an;
}

/* Lifetimes on one micro-batch's clock: forward 0..L+1, backward L+2.. */
static void s_clock(const gpp_memplan_t *p, int L, int b, int *t0, int *t1)
{
    gpp_pass_kind_t bk, dk;
    int bt, dt;
    gpp_memplan_life(p, b, &bk, &bt, &dk, &dt);
    *t0 = bk == GPP_PASS_F ? bt : L + 2 + bt;
    *t1 = dk == GPP_PASS_F ? dt : L + 2 + dt;
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
    /* the state is the op table's walk's, buffer for buffer */
    gpp_stage_mem_t sm;
    gpp_stage_mem(g, n_ops, ops, cfg->optim_bufs, cfg->batch, cfg->n, cfg->dev, &sm);
    GPP_EXPECT_MSG(s.state_bytes == sm.state_bytes, "%s: state %lld, the walk's %lld", what,
                   (long long)s.state_bytes, (long long)sm.state_bytes);
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
                                         .slots = 4};
                gpp_memplan_t *p =
                    gpp_memplan_new(g, cut[c][1] - cut[c][0], all + cut[c][0], &cfg, &err);
                GPP_EXPECT_MSG(p != NULL, "%s: %s", s_zoo[z], err.msg);
                if (!p)
                    continue;
                char what[160];
                snprintf(what, sizeof what, "%.40s ops [%d, %d) x%d", s_zoo[z], cut[c][0],
                         cut[c][1], infl);
                s_check_plan(g, cut[c][1] - cut[c][0], all + cut[c][0], p, &cfg, what);
                gpp_memplan_sum_t s;
                gpp_memplan_summary(p, &s);
                /* how much the layout wastes against the live bytes */
                int64_t waste = s.lane_bytes + s.scratch_bytes - s.live_bytes;
                worst = waste > worst ? waste : worst;
                /* never less than the executor's pool holds at its peak (the
                   op table's walk of it), the same buffers, rounded alike */
                gpp_stage_mem_t sm;
                gpp_stage_mem(g, cut[c][1] - cut[c][0], all + cut[c][0], cfg.optim_bufs, cfg.batch,
                              cfg.n, NULL, &sm);
                int64_t pool = gpp_stage_mem_peak(&sm, infl, cfg.slots);
                GPP_EXPECT_MSG(s.total_bytes >= pool, "%s: plan %lld < the pool's %lld", what,
                               (long long)s.total_bytes, (long long)pool);
                double over = pool ? 100.0 * (double)(s.total_bytes - pool) / (double)pool : 0;
                most_over = over > most_over ? over : most_over;
                plans++;
                gpp_memplan_destroy(&p);
            }
        free(all);
        gpp_graph_destroy(&g);
    }
    printf("  %d plans: lane + scratch - live bytes at most %lld; total at most %.1f %% above "
           "the pool's peak\n",
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
    gpp_stage_mem_t sm;
    gpp_stage_mem(g, g->n_ops, all, 1, 8, 4, &dev, &sm);
    gpp_memplan_sum_t s;
    gpp_memplan_summary(p, &s);
    GPP_EXPECT(s.ahead_bytes > 0 && s.ahead_bytes == sm.ahead_bytes);
    GPP_EXPECT(s.feed_bytes > 0 && s.feed_bytes == sm.feed_bytes);
    GPP_EXPECT(s.work_bytes == sm.work_bytes);
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
