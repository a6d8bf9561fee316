/* test_sched: kFkB compute orders, lowering (re-sharding, per-stage
 * micro-batches, multi-consumer tensors), validation of C1-C4 and
 * deadlock freedom on hand-built plans, and the one message order per
 * directed replica pair that NCCL's untagged matching needs; the same for
 * the zero-bubble schedules (zb-h1, zb-h2: B and W passes, gpp_zb). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_graph.h"
#include "planner/gpp_part.h"
#include "planner/gpp_plan.h"
#include "planner/gpp_sched.h"
#include "planner/gpp_zb.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

/* The list (replica) holding flat action x of the links k. */
static int s_list_of(const gpp_sched_links_t *k, int x)
{
    int lo = 0, hi = k->n_lists - 1;
    while (lo < hi) { /* the last list whose first action is at or before x */
        int mid = (lo + hi + 1) / 2;
        if (k->act_base[mid] <= x)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* The order NCCL needs (issue 10): it matches a rank's sends to a peer with
 * the peer's receives from it in posting order, with no tags, so for every
 * directed replica pair the RECVs that gpp_sched_links matches (by message
 * identity) to the sender's SENDs must come in the receiver's list in the
 * sender's order. Returns the pairs that break it; *pairs counts pairs. */
static int s_pair_order_bad(const gpp_plan_t *p, int *pairs)
{
    gpp_err_t err = {{0}};
    gpp_sched_links_t *k = gpp_sched_links_new(p, &err);
    GPP_EXPECT_MSG(k != NULL, "%s", err.msg);
    if (!k)
        return 1;
    size_t L = (size_t)k->n_lists;
    int *last = malloc(L * L * sizeof *last); /* [sender][receiver]: last RECV matched */
    char *bad = calloc(L * L, 1);
    for (size_t i = 0; i < L * L; i++)
        last[i] = -1;
    for (int li = 0; li < k->n_lists; li++) {
        int st = k->list_stage[li];
        const gpp_actions_t *l = &p->stages[st].replica[li - k->list_base[st]];
        for (int x = k->act_base[li]; x < k->act_base[li + 1]; x++) {
            gpp_act_type_t t = l->a[x - k->act_base[li]].type;
            if (t != GPP_ACT_SEND_ACT && t != GPP_ACT_SEND_GRAD)
                continue;
            int m = k->match[x], cell = li * k->n_lists + s_list_of(k, m);
            bad[cell] |= m <= last[cell];
            last[cell] = m;
        }
    }
    int n_bad = 0;
    for (size_t i = 0; i < L * L; i++) {
        *pairs += last[i] >= 0;
        n_bad += bad[i];
    }
    free(last);
    free(bad);
    gpp_sched_links_destroy(&k);
    return n_bad;
}

/* What a communication stream runs. */
static int s_comm_type(gpp_act_type_t t)
{
    return t == GPP_ACT_SEND_ACT || t == GPP_ACT_SEND_GRAD || t == GPP_ACT_RECV_ACT ||
           t == GPP_ACT_RECV_GRAD || t == GPP_ACT_ALLREDUCE;
}

/* The pass before position i of list l (flat base `base`) is done, or
 * there is none. */
static int s_prev_pass_done(const gpp_actions_t *l, int base, const char *done, int i)
{
    for (int j = i - 1; j >= 0; j--)
        if (!s_comm_type(l->a[j].type))
            return done[base + j];
    return 1;
}

/* Runs plan p as blocking streams would (NCCL with one communicator and one
 * communication stream per agent): per list, a compute cursor over its
 * passes (FWD, BWD, STEP in list order) and a comm cursor over its SENDs,
 * RECVs and ALLREDUCE in the order of o (gpp_sched_order_new), or in the
 * list's own order when o is NULL. A pass runs when the RECVs and the
 * ALLREDUCE since the previous pass are done (sends do not hold compute);
 * a SEND when the pass before it in its list is done and its RECV is at
 * the head of the receiver's comm cursor (a rendezvous: neither side
 * finishes alone, as a large NCCL message); an ALLREDUCE when every replica
 * of the stage has it at its head with the passes before it done. Returns
 * 1 when every action runs, 0 on a deadlock. */
static int s_run_blocking(const gpp_plan_t *p, const gpp_sched_links_t *k,
                          const gpp_sched_order_t *o)
{
    int L = k->n_lists, N = k->n_acts;
    char *done = calloc((size_t)N + 1, 1);
    int *cpos = calloc((size_t)L, sizeof(int)); /* compute cursor: list position */
    int *qb = calloc((size_t)L + 1, sizeof(int)), *q = malloc(((size_t)N + 1) * sizeof(int));
    int *qh = calloc((size_t)L, sizeof(int));
    const gpp_actions_t **lists = calloc((size_t)L, sizeof *lists);
    for (int li = 0; li < L; li++) {
        int st = k->list_stage[li];
        lists[li] = &p->stages[st].replica[li - k->list_base[st]];
    }
    for (int li = 0, n = 0; li < L; li++) {
        qb[li] = n;
        if (o) {
            for (int j = o->seq_base[li]; j < o->seq_base[li + 1]; j++)
                q[n++] = o->seq[j];
        } else {
            for (int i = 0; i < lists[li]->n; i++)
                if (s_comm_type(lists[li]->a[i].type))
                    q[n++] = k->act_base[li] + i;
        }
        qb[li + 1] = n;
    }
    for (int progress = 1; progress;) {
        progress = 0;
        for (int li = 0; li < L; li++) {
            const gpp_actions_t *l = lists[li];
            /* compute: as far as it may go */
            for (;;) {
                while (cpos[li] < l->n && s_comm_type(l->a[cpos[li]].type))
                    cpos[li]++;
                if (cpos[li] >= l->n)
                    break;
                int ok = 1;
                for (int j = cpos[li] - 1; j >= 0 && s_comm_type(l->a[j].type); j--) {
                    gpp_act_type_t t = l->a[j].type;
                    if (t != GPP_ACT_SEND_ACT && t != GPP_ACT_SEND_GRAD)
                        ok &= done[k->act_base[li] + j];
                }
                if (!ok)
                    break;
                done[k->act_base[li] + cpos[li]++] = 1;
                progress = 1;
            }
            /* comm: the head */
            if (qh[li] >= qb[li + 1] - qb[li])
                continue;
            int f = q[qb[li] + qh[li]], i = f - k->act_base[li];
            gpp_act_type_t t = l->a[i].type;
            if (t == GPP_ACT_SEND_ACT || t == GPP_ACT_SEND_GRAD) {
                int m = k->match[f], lm = s_list_of(k, m);
                if (s_prev_pass_done(lists[li], k->act_base[li], done, i) &&
                    qh[lm] < qb[lm + 1] - qb[lm] && q[qb[lm] + qh[lm]] == m) {
                    done[f] = done[m] = 1;
                    qh[li]++, qh[lm]++;
                    progress = 1;
                }
            } else if (t == GPP_ACT_ALLREDUCE) {
                int st = k->list_stage[li], ok = 1;
                for (int r = 0; r < p->stages[st].devices && ok; r++) {
                    int lr = k->list_base[st] + r;
                    if (qh[lr] >= qb[lr + 1] - qb[lr]) {
                        ok = 0;
                        break;
                    }
                    int g = q[qb[lr] + qh[lr]];
                    ok = lists[lr]->a[g - k->act_base[lr]].type == GPP_ACT_ALLREDUCE &&
                         s_prev_pass_done(lists[lr], k->act_base[lr], done, g - k->act_base[lr]);
                }
                if (ok) {
                    for (int r = 0; r < p->stages[st].devices; r++) {
                        int lr = k->list_base[st] + r;
                        done[q[qb[lr] + qh[lr]++]] = 1;
                    }
                    progress = 1;
                }
            }
        }
    }
    int all = 1;
    for (int f = 0; f < N; f++)
        all &= done[f];
    free(done), free(cpos), free(qb), free(q), free(qh), free(lists);
    return all;
}

/* gpp_sched_order_new on p: its order runs on blocking streams (1 when it
 * does); *naive_deadlocks += 1 when the lists' own order would not. */
static int s_order_ok(const gpp_plan_t *p, int *naive_deadlocks)
{
    gpp_err_t err = {{0}};
    gpp_sched_links_t *k = gpp_sched_links_new(p, &err);
    gpp_sched_order_t *o = k ? gpp_sched_order_new(p, k, &err) : NULL;
    GPP_EXPECT_MSG(k && o, "%s", err.msg);
    int ok = 0;
    if (o) {
        ok = s_run_blocking(p, k, o);
        *naive_deadlocks += !s_run_blocking(p, k, NULL);
    }
    gpp_sched_order_destroy(&o);
    gpp_sched_links_destroy(&k);
    return ok;
}

/* Adds a stage of ops [lo, hi] with a kFkB schedule and samples in flight. */
static gpp_stage_t *s_stage(gpp_plan_t *p, int lo, int hi, int devices, int b, int k, int inflight)
{
    gpp_stage_t *st = gpp_fixture_stage(p, lo, hi, devices, b);
    st->k = k;
    st->inflight = inflight;
    return st;
}

static int s_count(const gpp_actions_t *l, gpp_act_type_t t)
{
    int n = 0;
    for (int i = 0; i < l->n; i++)
        n += l->a[i].type == t;
    return n;
}

static void t_1f1b_chain(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 8); /* in l1 l2 loss: stages {in,l1} {l2,loss} */
    gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 4);
    s_stage(p, 0, 1, 1, 1, 1, 2);
    s_stage(p, 2, 3, 1, 1, 1, 1);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    char buf[256];
    gpp_sched_format(&p->stages[0].compute, 0, buf, sizeof buf);
    GPP_EXPECT_MSG(strcmp(buf, "F0 F1 B0 F2 B1 F3 B2 B3") == 0, "%s", buf);
    gpp_sched_format(&p->stages[1].compute, 0, buf, sizeof buf);
    GPP_EXPECT_MSG(strcmp(buf, "F0 B0 F1 B1 F2 B2 F3 B3") == 0, "%s", buf);
    /* stage 0 sends l1's output after every FWD and receives its gradient
       before every BWD; no ALLREDUCE with one device; STEP last */
    const gpp_actions_t *l0 = &p->stages[0].replica[0];
    GPP_EXPECT(s_count(l0, GPP_ACT_SEND_ACT) == 4);
    GPP_EXPECT(s_count(l0, GPP_ACT_RECV_GRAD) == 4);
    GPP_EXPECT(s_count(l0, GPP_ACT_RECV_ACT) == 0);
    GPP_EXPECT(s_count(l0, GPP_ACT_ALLREDUCE) == 0);
    GPP_EXPECT(l0->a[l0->n - 1].type == GPP_ACT_STEP);
    GPP_EXPECT(l0->a[0].type == GPP_ACT_FWD && l0->a[1].type == GPP_ACT_SEND_ACT);
    GPP_EXPECT(l0->a[1].tensor == 1 && l0->a[1].lo == 0 && l0->a[1].hi == 1);
    const gpp_actions_t *l1 = &p->stages[1].replica[0];
    GPP_EXPECT(l1->a[0].type == GPP_ACT_RECV_ACT && l1->a[0].peer_stage == 0);
    GPP_EXPECT(s_count(l1, GPP_ACT_SEND_GRAD) == 4);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_kfkb_order(void)
{
    gpp_graph_t *g = gpp_fixture_chain(1, 8);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 1, 8);
    s_stage(p, 0, 2, 1, 1, 2, 4); /* warm-up 4, then 2B 2F */
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    char buf[256];
    gpp_sched_format(&p->stages[0].compute, 0, buf, sizeof buf);
    GPP_EXPECT_MSG(strcmp(buf, "F0 F1 F2 F3 B0 B1 F4 F5 B2 B3 F6 F7 B4 B5 B6 B7") == 0, "%s", buf);
    /* in-flight below one micro-batch still schedules one warm-up forward;
       above the batch it is capped */
    p->stages[0].k = 1, p->stages[0].inflight = 0;
    GPP_EXPECT(gpp_sched_compute(p, &err) == 0);
    gpp_sched_format(&p->stages[0].compute, 0, buf, sizeof buf);
    GPP_EXPECT_MSG(strncmp(buf, "F0 B0 F1 B1", 11) == 0, "%s", buf);
    p->stages[0].inflight = 100;
    GPP_EXPECT(gpp_sched_compute(p, &err) == 0);
    gpp_sched_format(&p->stages[0].compute, 0, buf, sizeof buf);
    GPP_EXPECT_MSG(strcmp(buf, "F0 F1 F2 F3 F4 F5 F6 F7 B0 B1 B2 B3 B4 B5 B6 B7") == 0, "%s", buf);
    p->stages[0].micro_batch = 3;
    GPP_EXPECT(gpp_sched_compute(p, &err) == -1 && strstr(err.msg, "does not divide"));
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* Sums the sample counts of `type` transfers of replica list l per peer. */
static int64_t s_samples(const gpp_actions_t *l, gpp_act_type_t type, int mb)
{
    int64_t n = 0;
    for (int i = 0; i < l->n; i++)
        if (l->a[i].type == type && (mb < 0 || l->a[i].mb == mb))
            n += l->a[i].hi - l->a[i].lo;
    return n;
}

static void t_reshard(void)
{
    /* stage 0: 2 replicas, b = 4; stage 1: 3 replicas, b = 6 (batch 12). */
    gpp_graph_t *g = gpp_fixture_chain(2, 8);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 5, 12);
    s_stage(p, 0, 1, 2, 4, 1, 12);
    s_stage(p, 2, 3, 3, 6, 1, 6);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    /* every consumer replica receives exactly its own samples */
    const gpp_stage_t *c = &p->stages[1];
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < 2; j++) {
            int64_t lo, hi;
            gpp_sched_replica_range(c, j, r, &lo, &hi);
            GPP_EXPECT(hi - lo == 2);
            GPP_EXPECT(s_samples(&c->replica[r], GPP_ACT_RECV_ACT, j) == hi - lo);
            GPP_EXPECT(s_samples(&c->replica[r], GPP_ACT_SEND_GRAD, j) == hi - lo);
            for (int i = 0; i < c->replica[r].n; i++) {
                const gpp_action_t *a = &c->replica[r].a[i];
                if (a->type == GPP_ACT_RECV_ACT && a->mb == j)
                    GPP_EXPECT(a->lo >= lo && a->hi <= hi);
            }
        }
    /* producer replicas send all their samples: 2 per micro-batch, 3 mbs */
    for (int r = 0; r < 2; r++) {
        GPP_EXPECT(s_samples(&p->stages[0].replica[r], GPP_ACT_SEND_ACT, -1) == 6);
        GPP_EXPECT(s_count(&p->stages[0].replica[r], GPP_ACT_ALLREDUCE) == 1);
    }
    /* replica 1 of stage 1 (samples 2,3 of mb 0) takes sample 2 from
       stage-0 replica 1 (samples [2,4) of mb 0) */
    const gpp_actions_t *l = &c->replica[1];
    int seen = 0;
    for (int i = 0; i < l->n; i++)
        if (l->a[i].type == GPP_ACT_RECV_ACT && l->a[i].lo == 2) {
            GPP_EXPECT(l->a[i].peer_replica == 1 && l->a[i].hi == 4);
            seen = 1;
        }
    GPP_EXPECT(seen);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_per_stage_mbs(void)
{
    /* producer b = 1 feeds consumer b = 2: the consumer's FWD j needs two
       producer micro-batches; the producer needs 2 more in flight. */
    gpp_graph_t *g = gpp_fixture_chain(2, 8);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 8);
    s_stage(p, 0, 1, 1, 1, 1, 4);
    s_stage(p, 2, 3, 1, 2, 1, 2);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    const gpp_actions_t *l = &p->stages[1].replica[0];
    GPP_EXPECT(l->a[0].type == GPP_ACT_RECV_ACT && l->a[0].lo == 0 && l->a[0].hi == 1);
    GPP_EXPECT(l->a[1].type == GPP_ACT_RECV_ACT && l->a[1].lo == 1 && l->a[1].hi == 2);
    GPP_EXPECT(l->a[2].type == GPP_ACT_FWD && l->a[2].mb == 0);
    /* reverse: producer b = 2, consumer b = 1: the receive for consumer mb 1
       sits before its FWD 1, not batched before FWD 0 */
    p->stages[0].micro_batch = 2, p->stages[0].inflight = 4;
    p->stages[1].micro_batch = 1, p->stages[1].inflight = 1;
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    l = &p->stages[1].replica[0];
    GPP_EXPECT(l->a[0].type == GPP_ACT_RECV_ACT && l->a[0].hi == 1 && l->a[1].type == GPP_ACT_FWD);
    /* too few in flight at the b = 1 producer: its BWD 0 waits for the
       consumer's BWD 0, which waits for the producer's FWD 1 -> deadlock */
    p->stages[0].micro_batch = 1, p->stages[0].inflight = 1;
    p->stages[1].micro_batch = 2, p->stages[1].inflight = 2;
    GPP_EXPECT(gpp_sched_build(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "deadlock") != NULL, "%s", err.msg);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_multi_consumer(void)
{
    /* stages {in,a} -> {b} , {c} -> {cat,loss}: tensor a feeds stages 1 and
       2; stage 0 receives one gradient of a from each and sums them. */
    gpp_graph_t *g = gpp_fixture_diamond(8);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 4, 4);
    s_stage(p, 0, 1, 1, 1, 1, 3);
    s_stage(p, 2, 2, 1, 1, 1, 2);
    s_stage(p, 3, 3, 1, 1, 1, 2);
    s_stage(p, 4, 5, 1, 1, 1, 1);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    GPP_EXPECT(p->depth == 3);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    const gpp_actions_t *l0 = &p->stages[0].replica[0];
    GPP_EXPECT(s_count(l0, GPP_ACT_SEND_ACT) == 8);  /* a to stages 1, 2 */
    GPP_EXPECT(s_count(l0, GPP_ACT_RECV_GRAD) == 8); /* grad of a from both */
    for (int i = 0; i < l0->n; i++)
        if (l0->a[i].type == GPP_ACT_RECV_GRAD)
            GPP_EXPECT(l0->a[i].tensor == 1);
    const gpp_actions_t *l3 = &p->stages[3].replica[0];
    GPP_EXPECT(s_count(l3, GPP_ACT_RECV_ACT) == 8);
    /* receives of one FWD come ordered by peer stage */
    GPP_EXPECT(l3->a[0].peer_stage == 1 && l3->a[1].peer_stage == 2);
    /* the input's tensor is never sent: 'in' and 'a' share stage 0 */
    GPP_EXPECT(s_count(&p->stages[1].replica[0], GPP_ACT_SEND_GRAD) == 4);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

static void t_input_no_grad(void)
{
    /* the input alone in stage 0: activations go forward, no gradient back */
    gpp_graph_t *g = gpp_fixture_chain(1, 8);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 2);
    s_stage(p, 0, 0, 1, 1, 1, 2);
    s_stage(p, 1, 2, 1, 1, 1, 1);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    GPP_EXPECT(s_count(&p->stages[0].replica[0], GPP_ACT_SEND_ACT) == 2);
    GPP_EXPECT(s_count(&p->stages[0].replica[0], GPP_ACT_RECV_GRAD) == 0);
    GPP_EXPECT(s_count(&p->stages[1].replica[0], GPP_ACT_SEND_GRAD) == 0);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* A linked, scheduled 2-stage chain plan for the negative tests. */
static gpp_plan_t *s_good(const gpp_graph_t *g)
{
    gpp_plan_t *p = gpp_plan_new("gpp", g, 3, 4);
    s_stage(p, 0, 1, 1, 1, 1, 2);
    s_stage(p, 2, 3, 2, 2, 1, 2);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    return p;
}

static void t_validate_errors(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 8);
    gpp_err_t err = {{0}};
    gpp_plan_t *p;

    /* C1: op 1 moved to stage 1 without telling stage 0 -> overlap */
    p = s_good(g);
    p->stages[1].ops[0] = 1;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C1") && strstr(err.msg, "stages 0 and 1"), "%s", err.msg);
    gpp_plan_destroy(&p);

    /* C1: non-convex: stage 0 = {in, l2}, stage 1 = {l1, loss} */
    p = s_good(g);
    p->stages[0].ops[1] = 2, p->stages[1].ops[0] = 1;
    p->stage_of_op[1] = 1, p->stage_of_op[2] = 0;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C1") && strstr(err.msg, "not convex"), "%s", err.msg);
    gpp_plan_destroy(&p);

    /* C2: missing stage edge */
    p = s_good(g);
    p->stages[0].n_succ = 0;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C2") && strstr(err.msg, "stage 0"), "%s", err.msg);
    gpp_plan_destroy(&p);

    /* C2: an edge with no graph edge behind it (1 -> 0) */
    p = s_good(g);
    p->stages[1].succ = realloc(p->stages[1].succ, sizeof(int));
    p->stages[1].succ[0] = 0, p->stages[1].n_succ = 1;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C2") && strstr(err.msg, "stage 1"), "%s", err.msg);
    gpp_plan_destroy(&p);

    /* C3: overlapping devices, devices outside the plan's; idle ones are fine */
    p = s_good(g);
    p->stages[1].first_device = 0;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C3") && strstr(err.msg, "device 0"), "%s", err.msg);
    p->stages[1].first_device = 2;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C3: stage 1 uses device 3, outside [0,3)"), "%s", err.msg);
    p->n_devices = 4; /* device 1 idle */
    GPP_EXPECT_MSG(gpp_sched_validate(p, g, &err) == 0, "%s", err.msg);
    p->stages[1].devices = 0;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C3: stage 1 has 0 devices"), "%s", err.msg);
    p->stages[1].devices = 2;
    gpp_plan_destroy(&p);

    /* C4: swapped forwards, backward before its forward */
    p = s_good(g);
    gpp_actions_t *c = &p->stages[0].compute;
    gpp_action_t t = c->a[0];
    c->a[0] = c->a[1], c->a[1] = t;
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C4") && strstr(err.msg, "stage 0"), "%s", err.msg);
    GPP_EXPECT_MSG(strstr(err.msg, "; order: F1 F0 "), "%s", err.msg); /* the offending order */
    c->a[1] = c->a[0], c->a[0] = t;
    for (int i = 0; i < c->n; i++)
        if (c->a[i].type == GPP_ACT_BWD && c->a[i].mb == 0) {
            gpp_action_t b = c->a[i];
            memmove(&c->a[1], &c->a[0], (size_t)i * sizeof *c->a);
            c->a[0] = b;
            break;
        }
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C4") && strstr(err.msg, "bw_0 precedes fw_0"), "%s", err.msg);
    GPP_EXPECT_MSG(strstr(err.msg, "; order: B0 F0 "), "%s", err.msg);
    gpp_plan_destroy(&p);

    /* unmatched SEND: drop a RECV from the consumer's replica 1 */
    p = s_good(g);
    gpp_actions_t *l = &p->stages[1].replica[1];
    for (int i = 0; i < l->n; i++)
        if (l->a[i].type == GPP_ACT_RECV_ACT) {
            memmove(&l->a[i], &l->a[i + 1], (size_t)(l->n - i - 1) * sizeof *l->a);
            l->n--;
            break;
        }
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "1 SEND and 0 RECV"), "%s", err.msg);
    gpp_plan_destroy(&p);

    /* a RECV moved before the SEND it waits for on the same list is a
       deadlock: stage 0 waits for a gradient before its first FWD */
    p = s_good(g);
    l = &p->stages[0].replica[0];
    for (int i = 0; i < l->n; i++)
        if (l->a[i].type == GPP_ACT_RECV_GRAD) {
            gpp_action_t a = l->a[i];
            memmove(&l->a[1], &l->a[0], (size_t)i * sizeof *l->a);
            l->a[0] = a;
            break;
        }
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "deadlock") && strstr(err.msg, "stage 0"), "%s", err.msg);
    GPP_EXPECT_MSG(strstr(err.msg, "; order: F0 "), "%s", err.msg); /* blocked before F0 */
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* gpp_sched_format: passes only, a window from `first`, whole passes with
 * " ..." when cut, snprintf's return value. */
static void t_format(void)
{
    gpp_actions_t l = {0};
    const gpp_act_type_t ty[] = {GPP_ACT_FWD, GPP_ACT_SEND_ACT, GPP_ACT_FWD, GPP_ACT_BWD,
                                 GPP_ACT_FWD, GPP_ACT_BWD,      GPP_ACT_BWD, GPP_ACT_STEP};
    const int mb[] = {0, 0, 1, 0, 2, 1, 2, -1};
    for (size_t i = 0; i < sizeof ty / sizeof *ty; i++)
        gpp_actions_push(&l, (gpp_action_t){.type = ty[i], .mb = mb[i], .peer_stage = -1});
    const char *full = "F0 F1 B0 F2 B1 B2";
    char buf[64];
    GPP_EXPECT(gpp_sched_format(&l, 0, NULL, 0) == strlen(full));
    GPP_EXPECT(gpp_sched_format(&l, 0, buf, sizeof buf) == strlen(full));
    GPP_EXPECT_MSG(strcmp(buf, full) == 0, "%s", buf);
    gpp_sched_format(&l, 0, buf, strlen(full) + 1); /* exactly fits */
    GPP_EXPECT_MSG(strcmp(buf, full) == 0, "%s", buf);
    gpp_sched_format(&l, 0, buf, 12);
    GPP_EXPECT_MSG(strcmp(buf, "F0 F1 ...") == 0, "%s", buf);
    gpp_sched_format(&l, 0, buf, 3);
    GPP_EXPECT_MSG(strcmp(buf, "") == 0, "%s", buf);
    gpp_sched_format(&l, 4, buf, sizeof buf);
    GPP_EXPECT_MSG(strcmp(buf, "... F2 B1 B2") == 0, "%s", buf);
    free(l.a);
}

static void t_links(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 8);
    gpp_plan_t *p = s_good(g);
    gpp_err_t err = {{0}};
    gpp_sched_links_t *k = gpp_sched_links_new(p, &err);
    GPP_EXPECT(k != NULL);
    if (k) {
        GPP_EXPECT(k->n_lists == 3);
        int pairs = 0;
        for (int i = 0; i < k->n_acts; i++)
            if (k->match[i] >= 0) {
                GPP_EXPECT(k->match[k->match[i]] == i);
                pairs++;
            }
        /* 4 samples forward and back, one transfer per sample range piece:
           mb j of stage 0 (1 sample) -> one replica of stage 1: 4 + 4 */
        GPP_EXPECT_MSG(pairs == 2 * 8, "%d", pairs);
    }
    gpp_sched_links_destroy(&k);
    gpp_sched_links_destroy(&k);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* Every W pass of every replica list comes before its ALLREDUCE and STEP
 * (W never crosses the optimizer step); 1 when they do. */
static int s_w_before_step(const gpp_plan_t *p)
{
    for (int s = 0; s < p->n_stages; s++)
        for (int r = 0; r < p->stages[s].devices; r++) {
            const gpp_actions_t *l = &p->stages[s].replica[r];
            int sync = l->n;
            for (int i = 0; i < l->n; i++)
                if (l->a[i].type == GPP_ACT_ALLREDUCE || l->a[i].type == GPP_ACT_STEP) {
                    sync = i;
                    break;
                }
            for (int i = sync; i < l->n; i++)
                if (l->a[i].type == GPP_ACT_BWD_W || l->a[i].type == GPP_ACT_BWD_IN)
                    return 0;
            if (s_count(l, GPP_ACT_BWD_W) !=
                (p->schedule == GPP_SCHED_1F1B ? 0 : p->batch / p->stages[s].micro_batch))
                return 0;
        }
    return 1;
}

/* Every combination of per-stage micro-batch sizes and kFkB schedules, with
 * in-flight counts from the appendix ComputeInFlight table (the maximum over
 * successors), lowers to deadlock-free lists: the scheduler's kFkB orders are
 * the ones the table assumes. Chain in -> {0,1} -> {2} -> {3,4} and diamond
 * {0,1} -> {2}, {3} -> {4,5}. */
static void t_kfkb_inflight_table(void)
{
    static const int bs[] = {1, 2, 4, 8};
    const int B = 48;
    int tried = 0, failed = 0, misordered = 0, pairs = 0, blocked = 0, naive = 0;
    int zb_tried = 0, w_crossed = 0;
    for (int shape = 0; shape < 2; shape++) {
        gpp_graph_t *g = shape ? gpp_fixture_diamond(8) : gpp_fixture_chain(3, 8);
        int S = shape ? 4 : 3;
        for (int combo = 0; combo < 4 * 4 * 4 * 4 * 4 * 4; combo++) {
            int b[4], k[4], c = combo, ok = 1;
            for (int s = 0; s < 3; s++) {
                b[s] = bs[c % 4], c /= 4;
                k[s] = 1 + c % 4, c /= 4;
            }
            b[3] = b[1], k[3] = k[1] == 4 ? 1 : k[1] + 1; /* the diamond's other branch */
            for (int s = 0; s < S; s++)
                ok &= B % (k[s] * b[s]) == 0;
            if (!ok)
                continue;
            gpp_plan_t *p = gpp_plan_new("gpp", g, S, B);
            static const int chain[3][2] = {{0, 1}, {2, 3}, {4, 4}};
            static const int diamond[4][2] = {{0, 1}, {2, 2}, {3, 3}, {4, 5}};
            for (int s = 0; s < S; s++) {
                const int *r = shape ? diamond[s] : chain[s];
                s_stage(p, r[0], r[1], 1, b[s], k[s], 0);
            }
            gpp_err_t err = {{0}};
            GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
            for (int s = S - 1; s >= 0; s--) {
                gpp_stage_t *x = &p->stages[s];
                x->inflight = x->n_succ ? 0 : x->k * x->micro_batch;
                for (int t = 0; t < x->n_succ; t++) {
                    const gpp_stage_t *y = &p->stages[x->succ[t]];
                    int i = gpp_part_inflight(x->k, x->micro_batch, y->k, y->micro_batch,
                                              y->inflight, NULL);
                    if (i > x->inflight)
                        x->inflight = i;
                }
                if (x->inflight > B)
                    x->inflight = B;
            }
            tried++;
            if (gpp_sched_build(p, g, &err) < 0) {
                if (failed++ < 5)
                    fprintf(stderr, "  shape %d b=%d,%d,%d,%d k=%d,%d,%d,%d: %s\n", shape, b[0],
                            b[1], b[2], b[3], k[0], k[1], k[2], k[3], err.msg);
            } else {
                if (!s_order_ok(p, &naive) && blocked++ < 5)
                    fprintf(stderr,
                            "  shape %d b=%d,%d,%d,%d k=%d,%d,%d,%d: the blocking order "
                            "deadlocks\n",
                            shape, b[0], b[1], b[2], b[3], k[0], k[1], k[2], k[3]);
                int bad = s_pair_order_bad(p, &pairs);
                if (bad && misordered++ < 5)
                    fprintf(stderr,
                            "  shape %d b=%d,%d,%d,%d k=%d,%d,%d,%d: %d pairs out of order\n",
                            shape, b[0], b[1], b[2], b[3], k[0], k[1], k[2], k[3], bad);
                /* gpp_zb_shape's 1F1B in-flight is the table's, as above */
                int inflight[4];
                for (int s = 0; s < S; s++)
                    inflight[s] = p->stages[s].inflight;
                gpp_zb_shape(p, GPP_SCHED_1F1B);
                for (int s = 0; s < S; s++)
                    GPP_EXPECT(p->stages[s].inflight == inflight[s] && p->stages[s].w_delay == 0);
                /* the zero-bubble shapes of the same plan */
                for (int kind = GPP_SCHED_ZB_H1; kind < GPP_SCHED__COUNT; kind++) {
                    gpp_zb_shape(p, (gpp_sched_kind_t)kind);
                    zb_tried++;
                    if (gpp_sched_build(p, g, &err) < 0) {
                        if (failed++ < 5)
                            fprintf(stderr, "  %s shape %d b=%d,%d,%d,%d k=%d,%d,%d,%d: %s\n",
                                    gpp_sched_kind_name((gpp_sched_kind_t)kind), shape, b[0], b[1],
                                    b[2], b[3], k[0], k[1], k[2], k[3], err.msg);
                        continue;
                    }
                    int zn = 0;
                    if (!s_order_ok(p, &zn) && blocked++ < 5)
                        fprintf(stderr, "  %s shape %d b=%d,%d,%d,%d k=%d,%d,%d,%d: deadlocks\n",
                                gpp_sched_kind_name((gpp_sched_kind_t)kind), shape, b[0], b[1],
                                b[2], b[3], k[0], k[1], k[2], k[3]);
                    int zbad = s_pair_order_bad(p, &pairs);
                    if (zbad && misordered++ < 5)
                        fprintf(stderr,
                                "  %s shape %d b=%d,%d,%d,%d k=%d,%d,%d,%d: %d pairs out "
                                "of order\n",
                                gpp_sched_kind_name((gpp_sched_kind_t)kind), shape, b[0], b[1],
                                b[2], b[3], k[0], k[1], k[2], k[3], zbad);
                    w_crossed += !s_w_before_step(p);
                }
            }
            gpp_plan_destroy(&p);
        }
        gpp_graph_destroy(&g);
    }
    printf("  %d per-stage mbs/kFkB plans, %d deadlocked; %d directed replica pairs, sends and "
           "receives in one order in all but %d plans\n",
           tried, failed, pairs, misordered);
    printf("  blocking streams (NCCL, one comm stream per agent): gpp_sched_order runs all but %d; "
           "the lists' own order deadlocks %d\n",
           blocked, naive);
    printf("  zb-h1 and zb-h2 shapes of the same plans: %d, W passes after the step in %d\n",
           zb_tried, w_crossed);
    GPP_EXPECT(tried > 1000 && failed == 0 && misordered == 0 && blocked == 0);
    GPP_EXPECT(zb_tried == 2 * tried && w_crossed == 0);
}

/* The same order on the partitioner's plans of zoo models, GPP and SPP,
 * universal and per-stage micro-batches with kFkB, data-parallel stages
 * (re-sharding) included. */
static void t_zoo_pair_order(void)
{
    static const char *const specs[] = {
        "mmt:branches=4,layers=2,hidden=128,heads=4,seq=32,ffn=256",
        "dlrm:rows=1000",
        "candle_uno:branches=4,hidden=256,in=256",
    };
    static const int devices[] = {6, 8};
    int plans = 0, pairs = 0, bad = 0, naive = 0, zb = 0;
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        gpp_err_t err = {{0}};
        gpp_graph_t *g = gpp_zoo_build(specs[i], &err);
        GPP_EXPECT_MSG(g != NULL, "%s: %s", specs[i], err.msg);
        for (size_t d = 0; g && d < sizeof devices / sizeof *devices; d++)
            for (int mode = 0; mode < 4; mode++) {
                gpp_cluster_t cl;
                GPP_EXPECT(gpp_cluster_init(&cl, "a100-80g", devices[d], 4, &err) == 0);
                gpp_cost_t *cost = gpp_cost_new(g, &cl);
                gpp_part_opts_t o;
                gpp_part_opts_default(&o, 64);
                o.spp = mode & 1;
                o.per_stage_mbs = o.kfkb = (mode & 2) != 0;
                o.max_mbs = 32;
                o.schedules = 1u << (mode + (int)d) % GPP_SCHED__COUNT; /* each kind in turn */
                int64_t min_mem = 0;
                gpp_plan_t *p = gpp_part_run(g, cost, &o, &min_mem, &err);
                GPP_EXPECT_MSG(p && gpp_sched_build(p, g, &err) == 0, "%s on %d (mode %d): %s",
                               specs[i], devices[d], mode, err.msg);
                GPP_EXPECT(!p || o.schedules == 1u << p->schedule);
                zb += p && p->schedule != GPP_SCHED_1F1B;
                if (p && p->stages[0].replica) {
                    GPP_EXPECT(s_w_before_step(p));
                    GPP_EXPECT_MSG(s_order_ok(p, &naive),
                                   "%s on %d (mode %d): the blocking order "
                                   "deadlocks",
                                   specs[i], devices[d], mode);
                    int b = s_pair_order_bad(p, &pairs);
                    GPP_EXPECT_MSG(b == 0, "%s on %d (mode %d): %d pairs out of order", specs[i],
                                   devices[d], mode, b);
                    bad += b;
                    plans++;
                }
                gpp_plan_destroy(&p);
                gpp_cost_destroy(&cost);
            }
        gpp_graph_destroy(&g);
    }
    printf("  %d zoo plans (%d zb-h1 or zb-h2), %d directed replica pairs, %d out of order; on "
           "blocking streams gpp_sched_order runs every plan, the lists' own order deadlocks %d\n",
           plans, zb, pairs, bad, naive);
    GPP_EXPECT(zb == 15); /* (mode + d) % 3 over 3 models, 2 sizes, 4 modes */
}

/* A chain of p stages with one micro-batch size: zb-h1 is the paper's
 * ZB-H1 (warm-up p - i, W delay i on stage i from the source), zb-h2 its
 * ZB-H2 (warm-up 2(p - i) - 1); both lower to lists whose W passes have no
 * transfers and come before the STEP, and validate. */
static void t_zb_chain(void)
{
    gpp_graph_t *g = gpp_fixture_chain(5, 8); /* in l1..l5 loss: 7 ops */
    static const int lohi[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 6}};
    const int P = 4, B = 12;
    for (int kind = GPP_SCHED_1F1B; kind < GPP_SCHED__COUNT; kind++) {
        gpp_plan_t *p = gpp_plan_new("spp", g, P, B);
        for (int s = 0; s < P; s++)
            s_stage(p, lohi[s][0], lohi[s][1], 1, 1, 1, 0);
        gpp_err_t err = {{0}};
        GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
        gpp_zb_shape(p, (gpp_sched_kind_t)kind);
        GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s: %s",
                       gpp_sched_kind_name((gpp_sched_kind_t)kind), err.msg);
        for (int s = 0; s < P; s++) {
            const gpp_stage_t *st = &p->stages[s];
            int warm = kind == GPP_SCHED_ZB_H2 ? 2 * (P - s) - 1 : P - s, nf = 0;
            while (nf < st->compute.n && st->compute.a[nf].type == GPP_ACT_FWD)
                nf++;
            GPP_EXPECT_MSG(nf == warm, "%s stage %d: warm-up %d, want %d",
                           gpp_sched_kind_name((gpp_sched_kind_t)kind), s, nf, warm);
            GPP_EXPECT(st->w_delay == (kind == GPP_SCHED_1F1B ? 0 : s));
            GPP_EXPECT(s_count(&st->compute, GPP_ACT_BWD) == (kind ? 0 : B));
            GPP_EXPECT(s_count(&st->compute, GPP_ACT_BWD_IN) == (kind ? B : 0));
        }
        if (kind) {
            char buf[256];
            gpp_sched_format(&p->stages[1].compute, 0, buf, sizeof buf);
            if (kind == GPP_SCHED_ZB_H1) /* warm-up 3, W delay 1 */
                GPP_EXPECT_MSG(strncmp(buf, "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5", 32) == 0, "%s",
                               buf);
            GPP_EXPECT(s_w_before_step(p));
            /* a W pass has no transfers around it */
            const gpp_actions_t *l = &p->stages[1].replica[0];
            for (int i = 0; i + 1 < l->n; i++)
                if (l->a[i].type == GPP_ACT_BWD_W)
                    GPP_EXPECT(
                        l->a[i + 1].type == GPP_ACT_FWD || l->a[i + 1].type == GPP_ACT_RECV_ACT ||
                        l->a[i + 1].type == GPP_ACT_RECV_GRAD ||
                        l->a[i + 1].type == GPP_ACT_BWD_W || l->a[i + 1].type == GPP_ACT_STEP);
        }
        int pairs = 0, naive = 0;
        GPP_EXPECT(s_order_ok(p, &naive) && s_pair_order_bad(p, &pairs) == 0);
        gpp_plan_destroy(&p);
    }
    gpp_graph_destroy(&g);
}

/* Zero-bubble orders that break C4 are refused naming the pass. */
static void t_zb_validate(void)
{
    gpp_graph_t *g = gpp_fixture_chain(2, 8);
    gpp_plan_t *p = gpp_plan_new("gpp", g, 2, 4);
    s_stage(p, 0, 1, 1, 1, 1, 2);
    s_stage(p, 2, 3, 1, 1, 1, 1);
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_plan_link(p, g, &err) == 0);
    gpp_zb_shape(p, GPP_SCHED_ZB_H1);
    GPP_EXPECT_MSG(gpp_sched_build(p, g, &err) == 0, "%s", err.msg);
    gpp_actions_t *c = &p->stages[0].compute;
    int w0 = -1, b0 = -1;
    for (int i = 0; i < c->n; i++) {
        if (c->a[i].type == GPP_ACT_BWD_W && c->a[i].mb == 0)
            w0 = i;
        if (c->a[i].type == GPP_ACT_BWD_IN && c->a[i].mb == 0)
            b0 = i;
    }
    GPP_EXPECT(w0 > b0 && b0 >= 0);
    /* W0 before B0 */
    gpp_action_t t = c->a[w0];
    memmove(&c->a[b0 + 1], &c->a[b0], (size_t)(w0 - b0) * sizeof t);
    c->a[b0] = t;
    GPP_EXPECT(gpp_sched_lower(p, g, &err) == 0);
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C4") && strstr(err.msg, "w_0 precedes bw_0"), "%s", err.msg);
    /* a whole backward in a zero-bubble plan */
    GPP_EXPECT(gpp_sched_compute(p, &err) == 0);
    c->a[b0].type = GPP_ACT_BWD;
    GPP_EXPECT(gpp_sched_lower(p, g, &err) == 0);
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "C4") && strstr(err.msg, "a BWD pass in a zb-h1 plan"), "%s",
                   err.msg);
    /* a W dropped: the optimizer step would miss it */
    GPP_EXPECT(gpp_sched_compute(p, &err) == 0);
    c->n--; /* the last W */
    GPP_EXPECT(gpp_sched_lower(p, g, &err) == 0);
    GPP_EXPECT(gpp_sched_validate(p, g, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "3 W passes") && strstr(err.msg, "optimizer step"), "%s",
                   err.msg);
    gpp_plan_destroy(&p);
    gpp_graph_destroy(&g);
}

/* gpp_plan_topo_order: ready stages in ascending id; a cycle leaves its
 * stages and those after it out, listed ascending after the ordered ones. */
static void t_topo_order(void)
{
    /* 0 -> {2, 1} -> 3: ascending among the ready */
    char dag[16] = {0};
    dag[0 * 4 + 2] = dag[0 * 4 + 1] = dag[1 * 4 + 3] = dag[2 * 4 + 3] = 1;
    int order[4];
    GPP_EXPECT(gpp_plan_topo_order(4, dag, order) == 4);
    GPP_EXPECT(order[0] == 0 && order[1] == 1 && order[2] == 2 && order[3] == 3);
    /* 3 -> 0, 0 <-> 2 (a cycle), 2 -> 1: only 3 is ordered */
    char cyc[16] = {0};
    cyc[3 * 4 + 0] = cyc[0 * 4 + 2] = cyc[2 * 4 + 0] = cyc[2 * 4 + 1] = 1;
    GPP_EXPECT(gpp_plan_topo_order(4, cyc, order) == 1);
    GPP_EXPECT(order[0] == 3 && order[1] == 0 && order[2] == 1 && order[3] == 2);
}

static const gpp_test_case_t cases[] = {
    {"1f1b_chain", t_1f1b_chain},
    {"kfkb_order", t_kfkb_order},
    {"zoo_pair_order", t_zoo_pair_order},
    {"reshard", t_reshard},
    {"per_stage_mbs", t_per_stage_mbs},
    {"multi_consumer", t_multi_consumer},
    {"input_no_grad", t_input_no_grad},
    {"validate_errors", t_validate_errors},
    {"links", t_links},
    {"kfkb_inflight_table", t_kfkb_inflight_table},
    {"topo_order", t_topo_order},
    {"zb_chain", t_zb_chain},
    {"zb_validate", t_zb_validate},
    {"format", t_format},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
