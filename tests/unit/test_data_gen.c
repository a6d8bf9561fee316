/* Tests of parallel and prefetched synthetic data (gpp_data_gen through
 * gpp_data, and gpp_data_pool): inputs and labels are bit-identical for
 * T = 1, 2, 4, 7 threads with and without prefetch, on MMT (dense inputs, CE
 * labels), DLRM (index inputs) and CANDLE (MSE targets), along call patterns
 * of a trainer (consecutive micro-batches), of a data-parallel replica
 * (strided shares), of a sink stage (labels only) and with wrong guesses,
 * through gpp_data_input/label and through gpp_data_ref (no copy);
 * the pool runs every chunk once, honours `after`, and shuts down cleanly. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_data.h"
#include "agent/exec/gpp_data_pool.h"
#include "model/gpp_graph.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

static const char *const MODELS[] = {
    "mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32,classes=5",
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=1,rows=100,"
    "dim=8,bag=4,top_layers=1",
    "candle_uno:branches=2,layers=1,hidden=16,in=8,doses=1,top_layers=1",
};

static int s_is_loss(const gpp_op_t *op)
{
    return op->type == GPP_OP_LOSS_MSE || op->type == GPP_OP_LOSS_CE;
}

static size_t s_bytes(const gpp_graph_t *g, int op, int64_t n)
{
    gpp_dtype_t dt;
    int64_t r = g->ops[op].rows, c = g->ops[op].cols;
    if (s_is_loss(&g->ops[op]))
        gpp_data_label_shape(g, op, &dt, &r, &c);
    return (size_t)(n * r * c) * 4;
}

/* One call of a pattern: op (-1: every INPUT op then every loss op, as a
 * stage holding the whole model asks), samples [lo, lo + n). */
typedef struct {
    int op;
    int64_t lo, n;
} call_t;

/* Runs the calls on `d` and appends every output, in order, to *out. */
static size_t s_play(const gpp_graph_t *g, gpp_data_t *d, const call_t *calls, int n_calls,
                     unsigned char **out)
{
    size_t used = 0, cap = 0;
    *out = NULL;
    for (int k = 0; k < n_calls; k++)
        for (int pass = 0; pass < 2; pass++)
            for (int o = 0; o < g->n_ops; o++) {
                const gpp_op_t *op = &g->ops[o];
                int want = calls[k].op < 0 ? (pass == 0 ? op->type == GPP_OP_INPUT : s_is_loss(op))
                                           : pass == 0 && o == calls[k].op;
                if (!want)
                    continue;
                size_t b = s_bytes(g, o, calls[k].n);
                if (used + b > cap) {
                    cap = 2 * (used + b);
                    *out = realloc(*out, cap);
                }
                gpp_err_t err = {0};
                int rc;
                if (k % 2) { /* the executor's way: the source's copy when it has one */
                    char *scratch = malloc(b + 1);
                    const void *v = gpp_data_ref(d, o, calls[k].lo, calls[k].n, scratch, &err);
                    rc = v ? 0 : -1;
                    if (v)
                        memcpy(*out + used, v, b);
                    free(scratch);
                } else {
                    rc = op->type == GPP_OP_INPUT
                             ? gpp_data_input(d, o, calls[k].lo, calls[k].n, *out + used, &err)
                             : gpp_data_label(d, o, calls[k].lo, calls[k].n, *out + used, &err);
                }
                GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
                used += b;
            }
    return used;
}

static int s_first(const gpp_graph_t *g, int loss)
{
    for (int o = 0; o < g->n_ops; o++)
        if (loss ? s_is_loss(&g->ops[o]) : g->ops[o].type == GPP_OP_INPUT)
            return o;
    return -1;
}

static void t_threads_and_prefetch_bit_identical(void)
{
    for (size_t m = 0; m < sizeof MODELS / sizeof *MODELS; m++) {
        gpp_err_t err = {0};
        gpp_graph_t *g = gpp_zoo_build(MODELS[m], &err);
        GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
        if (!g)
            continue;
        int in0 = s_first(g, 0), L = s_first(g, 1);
        call_t calls[40];
        int n = 0;
        /* a trainer: consecutive micro-batches of 6, a short last one */
        for (int k = 0; k < 5; k++)
            calls[n++] = (call_t){-1, 6 * k, 6};
        calls[n++] = (call_t){-1, 30, 4};
        calls[n++] = (call_t){-1, 34, 6};
        /* a data-parallel replica: its 3 of every 8 samples, at offset 5 */
        for (int k = 0; k < 5; k++)
            calls[n++] = (call_t){-1, 100 + 5 + 8 * k, 3};
        /* a sink stage: labels only (the teacher's inputs never asked) */
        for (int k = 0; k < 4; k++)
            calls[n++] = (call_t){L, 200 + 7 * k, 7};
        /* one input op only, then a jump back (a wrong guess) */
        for (int k = 0; k < 4; k++)
            calls[n++] = (call_t){in0, 300 + 9 * k, 9};
        calls[n++] = (call_t){-1, 2, 9};
        calls[n++] = (call_t){-1, 11, 9};
        calls[n++] = (call_t){-1, 20, 1};
        gpp_data_t *ref = gpp_data_new(g, 11);
        GPP_EXPECT(gpp_data_set_threads(ref, 1, 0) == 0 && gpp_data_threads(ref) == 1);
        unsigned char *want = NULL;
        size_t bytes = s_play(g, ref, calls, n, &want);
        const int T[] = {1, 2, 4, 7};
        int bad = 0;
        for (int t = 0; t < 4; t++)
            for (int pf = 0; pf < 2; pf++) {
                gpp_data_t *d = gpp_data_new(g, 11);
                GPP_EXPECT(gpp_data_set_threads(d, T[t], pf) == 0);
                unsigned char *got = NULL;
                size_t b = s_play(g, d, calls, n, &got);
                /* the same calls hit the prefetch whatever the timing */
                int64_t hits = gpp_data_prefetched(d);
                GPP_EXPECT_MSG(pf ? hits > 0 : hits == 0, "T=%d prefetch=%d: %lld calls served "
                               "from the prefetch", T[t], pf, (long long)hits);
                if (t == 0 && pf)
                    printf("    prefetch served %lld calls\n", (long long)hits);
                if (b != bytes || memcmp(got, want, bytes) != 0) {
                    fprintf(stderr, "  %s: T=%d prefetch=%d differs from T=1\n", MODELS[m],
                            T[t], pf);
                    bad++;
                }
                free(got);
                gpp_data_destroy(&d); /* with a prefetch possibly under way */
            }
        printf("    %.40s...: %zu bytes of inputs and labels, %d of 8 settings differ\n",
               MODELS[m], bytes, bad);
        GPP_EXPECT(bad == 0);
        free(want);
        gpp_data_destroy(&ref);
        gpp_graph_destroy(&g);
    }
}

static void t_set_threads_range(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build(MODELS[0], &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    gpp_data_t *d = gpp_data_new(g, 1);
    int def = gpp_data_threads(d);
    GPP_EXPECT(def >= 1 && def <= 8 && def == gpp_data_pool_default_threads());
    GPP_EXPECT(gpp_data_set_threads(d, 0, 0) < 0 && gpp_data_threads(d) == def);
    GPP_EXPECT(gpp_data_set_threads(d, GPP_DATA_MAX_THREADS + 1, 1) < 0);
    GPP_EXPECT(gpp_data_set_threads(d, 3, 1) == 0 && gpp_data_threads(d) == 3);
    gpp_data_destroy(&d);
    gpp_graph_destroy(&g);
}

/* Chunk c adds c + 1 to its own cell; a second job checks the first one's
 * cells are final when it starts (`after`). */
typedef struct {
    atomic_int runs[64];
    const atomic_int *before; /* cells of the job this one runs after */
    int n_before;
    atomic_int early; /* chunks that saw an unfinished `after` job */
} count_t;

static void s_count(void *arg, int c, int n_chunks)
{
    count_t *k = arg;
    (void)n_chunks;
    for (int i = 0; i < k->n_before; i++)
        if (atomic_load(&k->before[i]) != i + 1)
            atomic_fetch_add(&k->early, 1);
    atomic_fetch_add(&k->runs[c], c + 1);
}

static void t_pool_runs_each_chunk_once(void)
{
    for (int workers = 0; workers <= 3; workers++) {
        gpp_data_pool_t *p = gpp_data_pool_new(workers);
        GPP_EXPECT(gpp_data_pool_workers(p) == workers);
        int bad = 0;
        for (int round = 0; round < 50; round++) {
            count_t a = {0}, b = {0};
            b.before = a.runs;
            b.n_before = 64;
            gpp_data_job_t ja = {.fn = s_count, .arg = &a, .n_chunks = 64};
            gpp_data_job_t jb = {.fn = s_count, .arg = &b, .n_chunks = 40, .after = &ja};
            gpp_data_pool_submit(p, &ja);
            gpp_data_pool_submit(p, &jb);
            gpp_data_pool_wait(p, &jb);
            for (int c = 0; c < 64; c++)
                bad += atomic_load(&a.runs[c]) != c + 1;
            for (int c = 0; c < 40; c++)
                bad += atomic_load(&b.runs[c]) != c + 1;
            bad += atomic_load(&b.early);
        }
        GPP_EXPECT_MSG(bad == 0, "workers %d: %d chunks ran wrong", workers, bad);
        /* destroy with a job submitted and never waited: it still runs */
        count_t c = {0};
        gpp_data_job_t jc = {.fn = s_count, .arg = &c, .n_chunks = 8};
        gpp_data_pool_submit(p, &jc);
        gpp_data_pool_destroy(&p);
        GPP_EXPECT(p == NULL);
        for (int i = 0; i < 8; i++)
            GPP_EXPECT(atomic_load(&c.runs[i]) == i + 1);
    }
    gpp_data_pool_t *none = NULL;
    gpp_data_pool_destroy(&none); /* NULL is fine */
}

static const gpp_test_case_t cases[] = {
    {"threads_and_prefetch_bit_identical", t_threads_and_prefetch_bit_identical},
    {"set_threads_range", t_set_threads_range},
    {"pool_runs_each_chunk_once", t_pool_runs_each_chunk_once},
    {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
