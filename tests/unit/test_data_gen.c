/* Tests of parallel and prefetched data (gpp_data_gen and gpp_data_ahead
 * through gpp_data, and gpp_data_pool): inputs and labels are bit-identical
 * for T = 1, 2, 4, 7 threads with and without prefetch, on MMT (dense
 * inputs, CE labels), DLRM (index inputs) and CANDLE (MSE targets), along
 * call patterns of a trainer (consecutive micro-batches), of a
 * data-parallel replica (strided shares), of a sink stage (labels only)
 * and with wrong guesses, through gpp_data_input/label and through
 * gpp_data_ref (no copy); the same for the read-ahead of dataset files and
 * shuffled .npy arrays (many epochs), where a bad value the read-ahead met
 * is still reported by the call that needs it; the pool runs every chunk
 * once, honours `after`, and shuts down cleanly. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/data/gpp_data.h"
#include "agent/data/gpp_data_pool.h"
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
    return (size_t)(n * gpp_data_shape_bytes(g, op));
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

/* The call patterns every source is played along (at most 40 calls). */
static int s_calls(const gpp_graph_t *g, call_t *calls)
{
    int in0 = s_first(g, 0), L = s_first(g, 1);
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
    return n;
}

/* Zoo model m and its call patterns (NULL when it does not build). */
static gpp_graph_t *s_model(size_t m, call_t *calls, int *n)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build(MODELS[m], &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    *n = g ? s_calls(g, calls) : 0;
    return g;
}

static void t_threads_and_prefetch_bit_identical(void)
{
    for (size_t m = 0; m < sizeof MODELS / sizeof *MODELS; m++) {
        call_t calls[40];
        int n;
        gpp_graph_t *g = s_model(m, calls, &n);
        if (!g)
            continue;
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
                GPP_EXPECT_MSG(pf ? hits > 0 : hits == 0,
                               "T=%d prefetch=%d: %lld calls served "
                               "from the prefetch",
                               T[t], pf, (long long)hits);
                if (t == 0 && pf)
                    printf("    prefetch served %lld calls\n", (long long)hits);
                if (b != bytes || memcmp(got, want, bytes) != 0) {
                    fprintf(stderr, "  %s: T=%d prefetch=%d differs from T=1\n", MODELS[m], T[t],
                            pf);
                    bad++;
                }
                free(got);
                gpp_data_destroy(&d); /* with a prefetch possibly under way */
            }
        printf("    %.40s...: %zu bytes of inputs and labels, %d of 8 settings differ\n", MODELS[m],
               bytes, bad);
        GPP_EXPECT(bad == 0);
        free(want);
        gpp_data_destroy(&ref);
        gpp_graph_destroy(&g);
    }
}

/* Samples in the stored datasets: the call patterns wrap around many times. */
#define STORED_SAMPLES 23

/* Writes the .npy arrays of g's first STORED_SAMPLES synthetic samples into
 * directory dir (<op name>.npy per input and loss op). */
static void s_write_npy_dir(const gpp_graph_t *g, const char *dir)
{
    gpp_data_t *src = gpp_data_new(g, 5);
    for (int o = 0; o < g->n_ops; o++) {
        const gpp_op_t *op = &g->ops[o];
        if (op->type != GPP_OP_INPUT && !s_is_loss(op))
            continue;
        gpp_dtype_t dt = GPP_DTYPE_F32;
        int64_t r = op->rows, c = op->cols;
        if (s_is_loss(op))
            gpp_data_shape_label(g, o, &dt, &r, &c);
        else if (op->input_kind == GPP_INPUT_INDICES)
            dt = GPP_DTYPE_I32;
        size_t b = s_bytes(g, o, STORED_SAMPLES);
        void *v = malloc(b);
        gpp_err_t err = {0};
        int rc = op->type == GPP_OP_INPUT ? gpp_data_input(src, o, 0, STORED_SAMPLES, v, &err)
                                          : gpp_data_label(src, o, 0, STORED_SAMPLES, v, &err);
        GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
        char dict[160], path[512];
        snprintf(dict, sizeof dict,
                 "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %lld, %lld), }",
                 dt == GPP_DTYPE_I32 ? "<i4" : "<f4", STORED_SAMPLES, (long long)r, (long long)c);
        snprintf(path, sizeof path, "%s/%s.npy", dir, op->name);
        gpp_fixture_npy(path, 1, dict, v, b, 0);
        free(v);
    }
    gpp_data_destroy(&src);
}

/* Dataset files and shuffled .npy arrays: the read-ahead on T threads gives
 * the bytes of plain reads, along the same call patterns (every range
 * wraps: STORED_SAMPLES records, 40 epochs and more of shuffles). */
static void t_read_ahead_bit_identical(void)
{
    for (size_t m = 0; m < sizeof MODELS / sizeof *MODELS; m++) {
        gpp_err_t err = {0};
        call_t calls[40];
        int n;
        gpp_graph_t *g = s_model(m, calls, &n);
        if (!g)
            continue;
        char *file = gpp_fixture_tmpfile("ahead");
        char dir[] = "/tmp/gpp_test_ahead_npy_XXXXXX";
        GPP_EXPECT(mkdtemp(dir) != NULL);
        gpp_data_t *src = gpp_data_new(g, 5);
        GPP_EXPECT_MSG(gpp_data_write_file(src, file, STORED_SAMPLES, &err) == 0, "%s", err.msg);
        gpp_data_destroy(&src);
        s_write_npy_dir(g, dir);
        const char *paths[2] = {file, dir};
        for (int k = 0; k < 2; k++) {
            gpp_data_t *ref = gpp_data_open(g, paths[k], 1, 3, &err);
            GPP_EXPECT_MSG(ref != NULL, "%s", err.msg);
            if (!ref)
                continue;
            GPP_EXPECT(gpp_data_set_threads(ref, 1, 0) == 0);
            unsigned char *want = NULL;
            size_t bytes = s_play(g, ref, calls, n, &want);
            const int T[] = {1, 2, 4};
            int bad = 0;
            for (int t = 0; t < 3; t++) {
                gpp_data_t *d = gpp_data_open(g, paths[k], 1, 3, &err);
                GPP_EXPECT(d && gpp_data_set_threads(d, T[t], 1) == 0);
                if (!d)
                    continue;
                unsigned char *got = NULL;
                size_t b = s_play(g, d, calls, n, &got);
                int64_t hits = gpp_data_prefetched(d);
                GPP_EXPECT_MSG(hits > 0, "T=%d: %lld calls served from the read-ahead", T[t],
                               (long long)hits);
                if (t == 0)
                    printf("    %s: read-ahead served %lld calls\n", k ? "npy" : "file",
                           (long long)hits);
                bad += b != bytes || memcmp(got, want, bytes) != 0;
                free(got);
                gpp_data_destroy(&d); /* with a read possibly under way */
            }
            printf("    %.40s... %s: %zu bytes, %d of 3 settings differ\n", MODELS[m],
                   k ? "npy" : "file", bytes, bad);
            GPP_EXPECT(bad == 0);
            free(want);
            gpp_data_destroy(&ref);
        }
        for (int o = 0; o < g->n_ops; o++) {
            char path[512];
            snprintf(path, sizeof path, "%s/%s.npy", dir, g->ops[o].name);
            unlink(path);
        }
        rmdir(dir);
        unlink(file);
        free(file);
        gpp_graph_destroy(&g);
    }
}

/* A class outside the model's range in record 4: the call that needs it
 * reports it with its own message whether the read-ahead met it first or
 * not, and the calls before it are served. */
static void t_read_ahead_reports_bad_value(void)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build(MODELS[0], &err); /* MMT: CE classes */
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    char dir[] = "/tmp/gpp_test_ahead_bad_XXXXXX";
    GPP_EXPECT(mkdtemp(dir) != NULL);
    s_write_npy_dir(g, dir);
    int L = s_first(g, 1);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.npy", dir, g->ops[L].name);
    long len = 0;
    unsigned char *b = gpp_fixture_slurp(path, &len);
    int64_t rows = g->ops[g->ops[L].inputs[0]].rows;
    int32_t bad = 99;                                                 /* classes = 5 */
    memcpy(b + len - (long)(STORED_SAMPLES - 4) * rows * 4, &bad, 4); /* record 4, row 0 */
    gpp_fixture_spit(path, b, len);
    free(b);
    for (int pf = 0; pf < 2; pf++) {
        gpp_data_t *d = gpp_data_open(g, dir, 0, 3, &err);
        GPP_EXPECT_MSG(d != NULL, "%s", err.msg);
        if (!d)
            continue;
        GPP_EXPECT(gpp_data_set_threads(d, 2, pf) == 0);
        size_t sz = s_bytes(g, L, 2);
        void *out = malloc(sz);
        int served = 0, failed_at = -1;
        char msg[GPP_ERR_LEN] = "";
        for (int k = 0; k < 4 && failed_at < 0; k++) { /* [0,2) [2,4) [4,6): record 4 */
            gpp_err_t e = {0};
            if (gpp_data_ref(d, L, 2 * k, 2, out, &e))
                served++;
            else
                failed_at = k, snprintf(msg, sizeof msg, "%s", e.msg);
        }
        GPP_EXPECT_MSG(served == 2 && failed_at == 2, "prefetch %d: served %d, failed at %d", pf,
                       served, failed_at);
        GPP_EXPECT_MSG(strstr(msg, "record 4") && strstr(msg, "outside [0, 5)"), "%s", msg);
        if (pf)
            printf("    read-ahead on: %s\n", msg);
        free(out);
        gpp_data_destroy(&d);
    }
    for (int o = 0; o < g->n_ops; o++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, g->ops[o].name);
        unlink(path);
    }
    rmdir(dir);
    gpp_graph_destroy(&g);
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

/* The range tracker's guesses: consecutive micro-batches with an uneven
 * last one (12 + 12 + 8 a mini-batch), and a data-parallel replica's
 * shares (3 samples, a micro-batch of 6 apart). */
static void t_track_predicts(void)
{
    gpp_data_track_t t;
    gpp_data_track_init(&t, 2);
    /* lo, n of each call; the predicted next and next_n after it */
    static const int64_t seq[][4] = {
        {0, 12, -1, 12},  /* no stride known yet */
        {12, 12, 24, 12}, /* stride 12 */
        {24, 8, 32, 12},  /* short: the next mini-batch starts right after */
        {32, 12, 44, 12}, /* the stride stays 12 (not 8) */
        {44, 12, 56, 12},
    };
    for (int i = 0; i < 5; i++) {
        GPP_EXPECT(gpp_data_track_note(&t, 0, seq[i][0], seq[i][1]) == 1);
        GPP_EXPECT(gpp_data_track_note(&t, 1, seq[i][0], seq[i][1]) == 0); /* same range */
        GPP_EXPECT_MSG(t.next == seq[i][2] && t.next_n == seq[i][3],
                       "after [%lld, +%lld): next %lld (+%lld), want %lld (+%lld)",
                       (long long)seq[i][0], (long long)seq[i][1], (long long)t.next,
                       (long long)t.next_n, (long long)seq[i][2], (long long)seq[i][3]);
    }
    gpp_data_track_reset(&t);
    for (int m = 0; m < 4; m++) { /* replica 1 of 2: [6 m + 3, +3) */
        gpp_data_track_note(&t, 0, 6 * m + 3, 3);
        GPP_EXPECT(t.next == (m ? 6 * m + 9 : -1) && t.next_n == 3);
    }
    gpp_data_track_free(&t);
}

static const gpp_test_case_t cases[] = {
    {"threads_and_prefetch_bit_identical", t_threads_and_prefetch_bit_identical},
    {"read_ahead_bit_identical", t_read_ahead_bit_identical},
    {"read_ahead_reports_bad_value", t_read_ahead_reports_bad_value},
    {"set_threads_range", t_set_threads_range},
    {"pool_runs_each_chunk_once", t_pool_runs_each_chunk_once},
    {"track_predicts", t_track_predicts},
    {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
