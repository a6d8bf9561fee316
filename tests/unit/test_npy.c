/* test_npy: NumPy .npy datasets (agent/data/gpp_npy.c, the .npy source of
 * agent/data/gpp_data.c), with hand-built files.
 *
 * The header parser on good files of versions 1, 2 and 3 and on a table of
 * broken ones (each message must name the file and the field); then a model
 * with a dense input, an indices input and a cross-entropy loss read from a
 * directory and from an op=FILE list: values, i64 narrowing, shuffling from
 * the seed, sharding across replicas, and the mismatches a user makes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/data/gpp_data.h"
#include "agent/data/gpp_npy.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

static void t_header_good(void)
{
    float v[6] = {1, 2, 3, 4, 5, 6};
    char *p = gpp_fixture_tmpfile("npy");
    gpp_err_t err;
    for (int major = 1; major <= 3; major++) {
        gpp_fixture_npy(p, major, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", v, sizeof v,
              0);
        gpp_npy_t *a = gpp_npy_open(p, &err);
        GPP_EXPECT_MSG(a != NULL, "v%d: %s", major, err.msg);
        if (!a)
            continue;
        GPP_EXPECT(gpp_npy_dtype(a) == GPP_NPY_F4 && gpp_npy_ndim(a) == 2);
        GPP_EXPECT(gpp_npy_shape(a)[0] == 3 && gpp_npy_record_elems(a) == 2);
        GPP_EXPECT(((const float *)gpp_npy_record(a, 2))[1] == 6.0f);
        gpp_npy_destroy(&a);
    }
    /* key order free, double quotes, 1-d shape with a trailing comma */
    int64_t w[4] = {7, 8, 9, -1};
    gpp_fixture_npy(p, 1, "{\"shape\": (4,), \"fortran_order\": False, \"descr\": \"<i8\"}", w, sizeof w, 0);
    gpp_npy_t *a = gpp_npy_open(p, &err);
    GPP_EXPECT_MSG(a != NULL, "%s", err.msg);
    if (a) {
        GPP_EXPECT(gpp_npy_dtype(a) == GPP_NPY_I8 && gpp_npy_ndim(a) == 1);
        GPP_EXPECT(gpp_npy_record_elems(a) == 1 && *(const int64_t *)gpp_npy_record(a, 3) == -1);
    }
    gpp_npy_destroy(&a);
    unlink(p);
    free(p);
}

typedef struct {
    const char *what;
    int major;
    const char *dict;
    size_t data_bytes; /* of zeros */
    int pad;
    const char *words[2];
} s_bad_t;

#define F4 "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"
static const s_bad_t S_BAD[] = {
    {"truncated data", 1, F4, 20, 0, {"truncated", "need 152 bytes, the file has 148"}},
    {"trailing bytes", 1, F4, 28, 0, {"trailing bytes"}},
    {"wrong dtype",
     1,
     "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
     24,
     0,
     {"field 'descr' is '<f8'", "astype('<f4')"}},
    {"big-endian",
     1,
     "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }",
     12,
     0,
     {"field 'descr' is '>f4'"}},
    {"structured dtype",
     1,
     "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,), }",
     12,
     0,
     {"field 'descr'", "plain array"}},
    {"fortran order",
     1,
     "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }",
     24,
     0,
     {"field 'fortran_order' is True", "ascontiguousarray"}},
    {"unknown key",
     1,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}",
     12,
     0,
     {"unknown field 'x'"}},
    {"missing shape",
     1,
     "{'descr': '<f4', 'fortran_order': False}",
     0,
     0,
     {"needs each of 'descr', 'fortran_order' and 'shape'"}},
    {"negative dim",
     1,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }",
     0,
     0,
     {"field 'shape'"}},
    {"0-d array",
     1,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
     4,
     0,
     {"field 'shape' is ()"}},
    {"version 4", 4, F4, 24, 0, {"field 'version' is 4.0"}},
    {"unaligned data",
     1,
     "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}",
     4,
     -1,
     {"not aligned to 4"}},
    {"not a dict", 1, "['descr']", 0, 0, {"not a Python dict"}},
};

static void t_header_bad(void)
{
    char *p = gpp_fixture_tmpfile("npy");
    static const unsigned char zeros[64];
    for (size_t i = 0; i < sizeof S_BAD / sizeof S_BAD[0]; i++) {
        const s_bad_t *b = &S_BAD[i];
        gpp_fixture_npy(p, b->major, b->dict, zeros, b->data_bytes, b->pad);
        gpp_err_t err = {0};
        gpp_npy_t *a = gpp_npy_open(p, &err);
        GPP_EXPECT_MSG(a == NULL, "%s: accepted", b->what);
        GPP_EXPECT_MSG(strstr(err.msg, p) != NULL, "%s: '%s' does not name the file", b->what,
                       err.msg);
        for (int k = 0; k < 2 && b->words[k]; k++)
            GPP_EXPECT_MSG(strstr(err.msg, b->words[k]) != NULL, "%s: '%s' lacks '%s'", b->what,
                           err.msg, b->words[k]);
        gpp_npy_destroy(&a);
    }
    /* not .npy at all; shorter than a preamble; header longer than the file */
    const char *junk[] = {"PK\003\004 a zip, not an array", "\x93NUM",
                          "\x93NUMPY\001\000\377\177{"};
    size_t jl[] = {26, 5, 11};
    const char *jw[] = {"field 'magic'", "truncated", "truncated: the header claims"};
    for (int i = 0; i < 3; i++) {
        gpp_fixture_spit(p, (const unsigned char *)junk[i], (long)jl[i]);
        gpp_err_t err = {0};
        gpp_npy_t *a = gpp_npy_open(p, &err);
        GPP_EXPECT_MSG(a == NULL && strstr(err.msg, jw[i]), "junk %d: '%s'", i, err.msg);
        gpp_npy_destroy(&a);
    }
    unlink(p);
    free(p);
}

/* Every prefix of a good file, and every single-byte corruption of its
 * header, is refused with a message naming the file (or, were a flip to
 * leave a consistent file, read within bounds): nothing crashes. */
static void t_every_truncation(void)
{
    float v[6] = {1, 2, 3, 4, 5, 6};
    char *p = gpp_fixture_tmpfile("npy");
    gpp_fixture_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", v, sizeof v, 0);
    long len = 0;
    unsigned char *good = gpp_fixture_slurp(p, &len);
    GPP_EXPECT(good && len == 128 + 24);
    int refused = 0, read = 0;
    for (long n = 0; good && n < len; n++) {
        gpp_fixture_spit(p, good, n);
        gpp_err_t err = {0};
        gpp_npy_t *a = gpp_npy_open(p, &err);
        GPP_EXPECT_MSG(a == NULL && strstr(err.msg, p), "prefix %ld: '%s'", n, err.msg);
        refused += a == NULL;
        gpp_npy_destroy(&a);
    }
    for (long i = 0; good && i < 128; i++) {
        unsigned char *b = malloc((size_t)len);
        memcpy(b, good, (size_t)len);
        b[i] ^= 0x5a;
        gpp_fixture_spit(p, b, len);
        gpp_err_t err = {0};
        gpp_npy_t *a = gpp_npy_open(p, &err);
        if (a) { /* a flip in padding or a digit: the file must still be consistent */
            int64_t r = gpp_npy_shape(a)[0];
            GPP_EXPECT(r >= 0 && gpp_npy_record_elems(a) >= 0);
            if (r > 0)
                (void)*(const volatile char *)gpp_npy_record(a, r - 1);
            read++;
        } else {
            GPP_EXPECT_MSG(strstr(err.msg, p) != NULL, "flip %ld: '%s'", i, err.msg);
        }
        gpp_npy_destroy(&a);
        free(b);
    }
    printf("    %d prefixes refused; %d header flips still valid files\n", refused, read);
    free(good);
    unlink(p);
    free(p);
}

/* x: dense [1, 4]; ids: indices bag 2 over 10 rows -> emb -> concat with x
 * -> linear 3 -> loss_ce. */
static gpp_graph_t *s_model(void)
{
    gpp_graph_t *g = gpp_graph_new("npy");
    int x = gpp_graph_input(g, "x", 1, 4);
    int ids = gpp_graph_input_indices(g, "ids", 2, 10);
    int e = gpp_graph_embedding_bag(g, "emb", ids, 10, 4);
    int ins[2] = {x, e};
    int cat = gpp_graph_concat(g, "cat", 2, ins);
    int out = gpp_graph_linear(g, "out", cat, 3, 1);
    gpp_graph_unary(g, GPP_OP_LOSS_CE, "loss", out);
    gpp_err_t err;
    GPP_EXPECT_MSG(gpp_graph_finalize(g, &err) == 0, "%s", err.msg);
    return g;
}

#define N 50

/* dir/x.npy (N, 4) f4 = 100 r + c; dir/ids.npy (N, 2) i8 = (r + k) % 10;
 * dir/loss.npy (N,) i4 = r % 3. */
static char *s_dir(void)
{
    char *d = gpp_fixture_tmpfile("npydir");
    unlink(d);
    GPP_EXPECT(mkdir(d, 0700) == 0);
    float x[N * 4];
    int64_t ids[N * 2];
    int32_t lab[N];
    for (int r = 0; r < N; r++) {
        for (int c = 0; c < 4; c++)
            x[r * 4 + c] = (float)(100 * r + c);
        for (int k = 0; k < 2; k++)
            ids[r * 2 + k] = (r + k) % 10;
        lab[r] = r % 3;
    }
    char p[256];
    snprintf(p, sizeof p, "%s/x.npy", d);
    gpp_fixture_npy(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (50, 4), }", x, sizeof x, 0);
    snprintf(p, sizeof p, "%s/ids.npy", d);
    gpp_fixture_npy(p, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (50, 1, 2), }", ids, sizeof ids,
          0);
    snprintf(p, sizeof p, "%s/loss.npy", d);
    gpp_fixture_npy(p, 2, "{'descr': '<i4', 'fortran_order': False, 'shape': (50,), }", lab, sizeof lab, 0);
    return d;
}

static void s_rmdir(char *d)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
    GPP_EXPECT(system(cmd) == 0);
    free(d);
}

static int s_op(const gpp_graph_t *g, const char *name)
{
    for (int o = 0; o < g->n_ops; o++)
        if (strcmp(g->ops[o].name, name) == 0)
            return o;
    return -1;
}

/* In order (no shuffle): sample i is record i mod N, every array agrees. */
static void t_read_in_order(void)
{
    gpp_graph_t *g = s_model();
    char *d = s_dir();
    gpp_err_t err;
    gpp_data_t *src = gpp_data_open(g, d, 0, 1, &err);
    GPP_EXPECT_MSG(src != NULL, "%s", err.msg);
    if (src) {
        GPP_EXPECT(gpp_data_samples(src) == N);
        float x[8 * 4];
        int32_t ids[8 * 2], lab[8];
        GPP_EXPECT(gpp_data_input(src, s_op(g, "x"), 47, 8, x, &err) == 0);
        GPP_EXPECT(gpp_data_input(src, s_op(g, "ids"), 47, 8, ids, &err) == 0);
        GPP_EXPECT(gpp_data_label(src, s_op(g, "loss"), 47, 8, lab, &err) == 0);
        for (int s = 0; s < 8; s++) {
            int r = (47 + s) % N;
            GPP_EXPECT(x[s * 4 + 3] == (float)(100 * r + 3));
            GPP_EXPECT(ids[s * 2 + 1] == (r + 1) % 10);
            GPP_EXPECT(lab[s] == r % 3);
        }
    }
    gpp_data_destroy(&src);
    /* the same arrays named one by one */
    char spec[1024];
    snprintf(spec, sizeof spec, "x=%s/x.npy,ids=%s/ids.npy,loss=%s/loss.npy", d, d, d);
    src = gpp_data_open(g, spec, 0, 1, &err);
    GPP_EXPECT_MSG(src != NULL, "%s", err.msg);
    float x0[4];
    GPP_EXPECT(src && gpp_data_input(src, s_op(g, "x"), 3, 1, x0, &err) == 0 && x0[0] == 300.0f);
    gpp_data_destroy(&src);
    s_rmdir(d);
    gpp_graph_destroy(&g);
}

/* Shuffled: each epoch is a permutation, fixed by the seed; two replicas
 * reading their halves of the sample stream read disjoint records. */
static void t_shuffle_and_shards(void)
{
    gpp_graph_t *g = s_model();
    char *d = s_dir();
    gpp_err_t err;
    gpp_data_t *a = gpp_data_open(g, d, 1, 7, &err), *b = gpp_data_open(g, d, 1, 7, &err);
    gpp_data_t *c = gpp_data_open(g, d, 1, 8, &err);
    GPP_EXPECT(a && b && c);
    if (a && b && c) {
        int seen[N] = {0}, moved = 0, differs = 0, epoch2 = 0;
        for (int64_t i = 0; i < N; i++) {
            int64_t r = gpp_data_record(a, i);
            GPP_EXPECT(r >= 0 && r < N);
            if (r >= 0 && r < N)
                seen[r]++;
            moved += r != i;
            differs += gpp_data_record(c, i) != r;
        }
        for (int64_t i = 0; i < N; i++) {
            GPP_EXPECT(seen[i] == 1);
            epoch2 += gpp_data_record(a, N + i) != gpp_data_record(b, i);
        }
        GPP_EXPECT(moved > 0 && differs > 0 && epoch2 > 0);
        printf("    records moved %d/%d, other seed differs at %d, next epoch at %d\n", moved, N,
               differs, epoch2);
        /* replicas: a reads samples [0, 25), b [25, 50) of the same iteration */
        int32_t la[25], lb[25];
        float xa[25 * 4];
        GPP_EXPECT(gpp_data_label(a, s_op(g, "loss"), 0, 25, la, &err) == 0);
        GPP_EXPECT(gpp_data_label(b, s_op(g, "loss"), 25, 25, lb, &err) == 0);
        GPP_EXPECT(gpp_data_input(a, s_op(g, "x"), 0, 25, xa, &err) == 0);
        int hit[N] = {0};
        for (int s = 0; s < 25; s++) {
            int ra = (int)gpp_data_record(a, s), rb = (int)gpp_data_record(b, 25 + s);
            hit[ra]++, hit[rb]++;
            GPP_EXPECT(la[s] == ra % 3 && lb[s] == rb % 3);
            GPP_EXPECT(xa[s * 4] == (float)(100 * ra)); /* inputs and labels stay paired */
        }
        for (int r = 0; r < N; r++)
            GPP_EXPECT(hit[r] == 1);
    }
    gpp_data_destroy(&a);
    gpp_data_destroy(&b);
    gpp_data_destroy(&c);
    s_rmdir(d);
    gpp_graph_destroy(&g);
}

/* Rewrites one array of a good directory, opens it, and checks the message. */
static void s_expect_bad(const char *file, const char *dict, const void *data, size_t bytes,
                         const char *w1, const char *w2)
{
    gpp_graph_t *g = s_model();
    char *d = s_dir();
    char p[256];
    snprintf(p, sizeof p, "%s/%s", d, file);
    if (dict)
        gpp_fixture_npy(p, 1, dict, data, bytes, 0);
    else
        unlink(p);
    gpp_err_t err = {0};
    gpp_data_t *src = gpp_data_open(g, d, 1, 1, &err);
    GPP_EXPECT_MSG(src == NULL, "%s: accepted", file);
    GPP_EXPECT_MSG(strstr(err.msg, w1) && (!w2 || strstr(err.msg, w2)), "'%s' lacks '%s' / '%s'",
                   err.msg, w1, w2 ? w2 : "");
    gpp_data_destroy(&src);
    s_rmdir(d);
    gpp_graph_destroy(&g);
}

static void t_mismatches(void)
{
    static float z[N * 5];
    static int64_t zl[N * 3];
    s_expect_bad("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (49, 4), }", z,
                 49 * 16, "ids.npy: field 'shape' holds 50 samples", "x.npy holds 49");
    s_expect_bad("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (50, 5), }", z,
                 sizeof z, "field 'shape' is (50, 5)", "input op 'x' of model npy needs (N, 1, 4)");
    s_expect_bad("ids.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (50, 2), }", z,
                 N * 8, "field 'descr' is '<f4'", "'<i4' or '<i8'");
    s_expect_bad("loss.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (50, 3), }", zl,
                 sizeof zl, "loss.npy: field 'shape' is (50, 3)",
                 "labels of loss op 'loss' of model npy needs (N, 1, 1) or (N, cols)");
    s_expect_bad("x.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (50, 4), }", z, N * 16,
                 "x.npy: header field 'fortran_order' is True", NULL);
    s_expect_bad("ids.npy", NULL, NULL, 0, "no ids.npy for the input op 'ids'", NULL);
    /* a list missing an op, naming an unknown op */
    gpp_graph_t *g = s_model();
    gpp_err_t err = {0};
    gpp_data_t *src = gpp_data_open(g, "x=a.npy,ids=b.npy", 1, 1, &err);
    GPP_EXPECT_MSG(!src && strstr(err.msg, "labels of loss op 'loss'") &&
                       strstr(err.msg, "loss=FILE.npy"),
                   "%s", err.msg);
    gpp_data_destroy(&src);
    src = gpp_data_open(g, "cat=a.npy", 1, 1, &err);
    GPP_EXPECT_MSG(!src && strstr(err.msg, "'cat' must be OP=FILE.npy"), "%s", err.msg);
    gpp_data_destroy(&src);
    gpp_graph_destroy(&g);
}

/* An index beyond the table fails the read, naming file, record and range. */
static void t_value_range(void)
{
    gpp_graph_t *g = s_model();
    char *d = s_dir();
    int64_t ids[N * 2] = {0};
    ids[2 * 17 + 1] = 10;
    char p[256];
    snprintf(p, sizeof p, "%s/ids.npy", d);
    gpp_fixture_npy(p, 3, "{'descr': '<i8', 'fortran_order': False, 'shape': (50, 2), }", ids, sizeof ids, 0);
    gpp_err_t err = {0};
    gpp_data_t *src = gpp_data_open(g, d, 0, 1, &err);
    GPP_EXPECT_MSG(src != NULL, "%s", err.msg);
    int32_t out[N * 2];
    if (src) {
        GPP_EXPECT(gpp_data_input(src, s_op(g, "ids"), 0, 17, out, &err) == 0);
        GPP_EXPECT(gpp_data_input(src, s_op(g, "ids"), 0, 18, out, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, "ids.npy: record 17 element 1: value 10 outside [0, 10)"),
                       "%s", err.msg);
    }
    gpp_data_destroy(&src);
    s_rmdir(d);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {{"header_good", t_header_good},
                                        {"header_bad", t_header_bad},
                                        {"every_truncation", t_every_truncation},
                                        {"read_in_order", t_read_in_order},
                                        {"shuffle_and_shards", t_shuffle_and_shards},
                                        {"mismatches", t_mismatches},
                                        {"value_range", t_value_range},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
