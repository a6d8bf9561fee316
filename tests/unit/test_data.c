/* Tests of the data source: deterministic synthetic inputs and teacher
 * labels, the dataset file round trip, and the validated reader on bad,
 * truncated, corrupted and foreign files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/gpp_codec.h"
#include "common/gpp_fault.h"
#include "agent/data/gpp_data.h"
#include "model/gpp_graph.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

#define DLRM                                                                                       \
    "dlrm:dense_branches=2,sparse_branches=2,dense_in=16,hidden=32,dense_layers=1,rows=100,dim=8," \
    "bag=4,top_layers=1"
#define MMT "mmt:branches=2,layers=1,hidden=16,heads=2,seq=4,ffn=32,classes=5"

static gpp_graph_t *s_model(const char *spec)
{
    gpp_err_t err = {0};
    gpp_graph_t *g = gpp_zoo_build(spec, &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    return g;
}

static int s_op(const gpp_graph_t *g, const char *name)
{
    for (int i = 0; i < g->n_ops; i++)
        if (strcmp(g->ops[i].name, name) == 0)
            return i;
    return -1;
}

static void t_synthetic_is_deterministic(void)
{
    gpp_graph_t *g = s_model(DLRM);
    if (!g)
        return;
    gpp_err_t err = {0};
    gpp_data_t *a = gpp_data_new(g, 5), *b = gpp_data_new(g, 5), *c = gpp_data_new(g, 6);
    int d = s_op(g, "dense0.input"), sp = s_op(g, "sparse1.input"), L = s_op(g, "loss");
    float x[64 * 16], y[64 * 16], z[64 * 16];
    GPP_EXPECT(gpp_data_input(a, d, 100, 64, x, &err) == 0);
    /* any split of the sample range, in any process, gives the same values */
    GPP_EXPECT(gpp_data_input(b, d, 130, 34, y + 30 * 16, &err) == 0);
    GPP_EXPECT(gpp_data_input(b, d, 100, 30, y, &err) == 0);
    GPP_EXPECT(memcmp(x, y, sizeof x) == 0);
    GPP_EXPECT(gpp_data_input(c, d, 100, 64, z, &err) == 0);
    GPP_EXPECT(memcmp(x, z, sizeof x) != 0);
    double m = 0, v = 0;
    for (int i = 0; i < 64 * 16; i++)
        m += x[i], v += x[i] * x[i];
    m /= 64 * 16, v = v / (64 * 16) - m * m;
    printf("    dense inputs: mean %.3f variance %.3f\n", m, v);
    GPP_EXPECT(fabs(m) < 0.1 && fabs(v - 1) < 0.15);
    int32_t idx[256 * 4];
    int seen[100] = {0}, distinct = 0;
    GPP_EXPECT(gpp_data_input(a, sp, 0, 256, idx, &err) == 0);
    for (int i = 0; i < 256 * 4; i++) {
        GPP_EXPECT(idx[i] >= 0 && idx[i] < 100);
        if (idx[i] >= 0 && idx[i] < 100 && !seen[idx[i]]++)
            distinct++;
    }
    GPP_EXPECT(distinct > 90);
    float t1[256], t2[256];
    GPP_EXPECT(gpp_data_label(a, L, 0, 256, t1, &err) == 0);
    GPP_EXPECT(gpp_data_label(b, L, 0, 256, t2, &err) == 0);
    GPP_EXPECT(memcmp(t1, t2, sizeof t1) == 0);
    v = 0;
    for (int i = 0; i < 256; i++)
        v += t1[i] * t1[i];
    printf("    MSE teacher targets: mean square %.3f\n", v / 256);
    GPP_EXPECT(v / 256 > 0.3 && v / 256 < 3);
    gpp_data_destroy(&a);
    gpp_data_destroy(&b);
    gpp_data_destroy(&c);
    GPP_EXPECT(a == NULL);
    gpp_graph_destroy(&g);
}

static void t_ce_labels_follow_teacher(void)
{
    gpp_graph_t *g = s_model(MMT);
    if (!g)
        return;
    gpp_err_t err = {0};
    gpp_data_t *a = gpp_data_new(g, 1);
    int L = s_op(g, "loss");
    gpp_dtype_t dt;
    int64_t rows, cols;
    gpp_data_shape_label(g, L, &dt, &rows, &cols);
    GPP_EXPECT(dt == GPP_DTYPE_I32 && rows == 4 && cols == 1);
    int32_t lab[200 * 4];
    int count[5] = {0};
    GPP_EXPECT(gpp_data_label(a, L, 0, 200, lab, &err) == 0);
    for (int i = 0; i < 800; i++) {
        GPP_EXPECT(lab[i] >= 0 && lab[i] < 5);
        if (lab[i] >= 0 && lab[i] < 5)
            count[lab[i]]++;
    }
    printf("    class counts %d %d %d %d %d\n", count[0], count[1], count[2], count[3], count[4]);
    for (int c = 0; c < 5; c++)
        GPP_EXPECT(count[c] > 40); /* every class is used: a real task */
    gpp_data_destroy(&a);
    gpp_graph_destroy(&g);
}

static void t_file_round_trip(void)
{
    gpp_graph_t *g = s_model(DLRM);
    if (!g)
        return;
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("data");
    gpp_data_t *syn = gpp_data_new(g, 9);
    GPP_EXPECT_MSG(gpp_data_write_file(syn, path, 20, &err) == 0, "%s", err.msg);
    gpp_data_t *f = gpp_data_open(g, path, 0, 0, &err);
    GPP_EXPECT_MSG(f != NULL, "%s", err.msg);
    if (f) {
        GPP_EXPECT(gpp_data_samples(f) == 20 && gpp_data_samples(syn) == -1);
        for (int o = 0; o < g->n_ops; o++) {
            const gpp_op_t *op = &g->ops[o];
            int in = op->type == GPP_OP_INPUT, lab = op->type == GPP_OP_LOSS_MSE;
            if (!in && !lab)
                continue;
            float a[20 * 16], b[20 * 16], w[16];
            int ra =
                in ? gpp_data_input(f, o, 0, 20, a, &err) : gpp_data_label(f, o, 0, 20, a, &err);
            int rb = in ? gpp_data_input(syn, o, 0, 20, b, &err)
                        : gpp_data_label(syn, o, 0, 20, b, &err);
            GPP_EXPECT(ra == 0 && rb == 0);
            int64_t per = in ? op->rows * op->cols : 1;
            GPP_EXPECT(memcmp(a, b, (size_t)(20 * per * 4)) == 0);
            /* sample 23 wraps to record 3 */
            GPP_EXPECT(in ? gpp_data_input(f, o, 23, 1, w, &err) == 0
                          : gpp_data_label(f, o, 23, 1, w, &err) == 0);
            GPP_EXPECT(memcmp(w, a + 3 * per, (size_t)per * 4) == 0);
        }
    }
    gpp_data_destroy(&f);
    gpp_data_destroy(&syn);
    unlink(path);
    free(path);
    gpp_graph_destroy(&g);
}

static void s_expect_open_fails(const gpp_graph_t *g, const char *path, const char *words)
{
    gpp_err_t err = {0};
    gpp_data_t *d = gpp_data_open(g, path, 0, 0, &err);
    GPP_EXPECT(d == NULL);
    GPP_EXPECT_MSG(strstr(err.msg, words) != NULL, "'%s' lacks '%s'", err.msg, words);
    printf("    rejected: %s\n", err.msg);
    gpp_data_destroy(&d);
}

static void s_put32(unsigned char *p, uint32_t v)
{
    gpp_codec_t c = gpp_codec_writer(p, 4);
    gpp_codec_put_u32(&c, v);
}

static void s_put64(unsigned char *p, uint64_t v)
{
    gpp_codec_t c = gpp_codec_writer(p, 8);
    gpp_codec_put_u64(&c, v);
}

/* b with its header CRC made valid again after an edit of the header. */
static void s_spit_fixed_header(const char *path, unsigned char *b, long len, uint32_t hbytes)
{
    s_put32(b + hbytes - 4, (uint32_t)crc32_z(0, b, hbytes - 4));
    gpp_fixture_spit(path, b, len);
}

static void t_bad_files_rejected(void)
{
    gpp_graph_t *g = s_model(DLRM);
    gpp_graph_t *other = s_model("dlrm:dense_branches=2,sparse_branches=2,dense_in=8,hidden=32,"
                                 "dense_layers=1,rows=100,dim=8,bag=4,top_layers=1");
    if (!g || !other)
        return;
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("data"), *bad = gpp_fixture_tmpfile("data");
    gpp_data_t *syn = gpp_data_new(g, 9);
    GPP_EXPECT(gpp_data_write_file(syn, path, 10, &err) == 0);
    long len = 0;
    unsigned char *orig = gpp_fixture_slurp(path, &len), *b = malloc(len > 0 ? (size_t)len : 1);
    GPP_EXPECT(orig && len > 100);

    memcpy(b, orig, (size_t)len);
    b[0] = 'X';
    gpp_fixture_spit(bad, b, len);
    s_expect_open_fails(g, bad, "bad magic");

    memcpy(b, orig, (size_t)len);
    b[8] = 2; /* version */
    gpp_fixture_spit(bad, b, len);
    s_expect_open_fails(g, bad, "version 2");

    gpp_fixture_spit(bad, orig, len - 7);
    s_expect_open_fails(g, bad, "truncated");

    gpp_fixture_spit(bad, orig, 20);
    s_expect_open_fails(g, bad, "truncated");

    memcpy(b, orig, (size_t)len);
    b[len - 5] ^= 0x10; /* a label byte */
    gpp_fixture_spit(bad, b, len);
    s_expect_open_fails(g, bad, "checksum");

    memcpy(b, orig, (size_t)len);
    b[40] ^= 0x01; /* an array name in the header */
    gpp_fixture_spit(bad, b, len);
    s_expect_open_fails(g, bad, "header checksum");

    s_expect_open_fails(other, path, "another model");
    s_expect_open_fails(g, "/nonexistent/gpp.data", "cannot open");

    /* A bad index with valid checksums is caught when read. Layout: 5
     * arrays (dense0, dense1, sparse0, sparse1, loss); sparse0's data
     * follows two [10, 1, 16] f32 arrays. */
    uint32_t n_arrays = 5, hbytes = 32 + 104 * n_arrays + 4;
    memcpy(b, orig, (size_t)len);
    long off = (long)hbytes + 2 * 10 * 16 * 4;
    s_put32(b + off, 1000);
    s_put32(b + 32 + 104 * 2 + 96, (uint32_t)crc32_z(0, b + off, 10 * 4 * 4));
    s_spit_fixed_header(bad, b, len, hbytes);
    gpp_data_t *d = gpp_data_open(g, bad, 0, 0, &err);
    GPP_EXPECT_MSG(d != NULL, "%s", err.msg);
    int32_t idx[4];
    if (d) {
        GPP_EXPECT(gpp_data_input(d, s_op(g, "sparse0.input"), 0, 1, idx, &err) == -1);
        GPP_EXPECT(strstr(err.msg, "value 1000 outside [0, 100)") != NULL);
        GPP_EXPECT(gpp_data_input(d, s_op(g, "sparse0.input"), 1, 1, idx, &err) == 0);
    }
    gpp_data_destroy(&d);

    /* Crafted headers with valid CRCs: sizes that overflow or allocate
     * without bound are refused, never wrapped into a plausible size. */
    const struct {
        long at;
        uint64_t v;
        const char *words;
    } crafted[] = {
        {16, (uint64_t)1 << 63, "corrupt header"},            /* n_samples < 0 as i64 */
        {16, 0, "corrupt header"},                            /* no samples */
        {16, (uint64_t)1 << 60, "impossible size"},      /* x rows x cols x 4 overflows */
        {32 + 72, (uint64_t)1 << 62, "impossible size"}, /* rows */
        {32 + 80, (uint64_t)-16, "impossible size"},     /* cols < 0 */
        {32 + 72, 3, "truncated"},                            /* a plausible wrong size */
    };
    for (size_t i = 0; i < sizeof crafted / sizeof crafted[0]; i++) {
        memcpy(b, orig, (size_t)len);
        s_put64(b + crafted[i].at, crafted[i].v);
        s_spit_fixed_header(bad, b, len, hbytes);
        s_expect_open_fails(g, bad, crafted[i].words);
    }
    memcpy(b, orig, (size_t)len);
    s_put32(b + 12, 0x7fffffff); /* n_arrays */
    gpp_fixture_spit(bad, b, len);
    s_expect_open_fails(g, bad, "corrupt header");

    /* A failed write leaves the existing file intact and no temp file. */
    gpp_fault_arm("atomic_write", 100);
    GPP_EXPECT(gpp_data_write_file(syn, path, 50, &err) == -1);
    gpp_fault_arm("atomic_write", -1);
    printf("    failed write: %s\n", err.msg);
    gpp_fixture_expect_untouched(path, orig, len);

    gpp_data_destroy(&syn);
    unlink(path);
    unlink(bad);
    free(path);
    free(bad);
    free(orig);
    free(b);
    gpp_graph_destroy(&g);
    gpp_graph_destroy(&other);
}

static void t_crc32_known_value(void)
{
    /* the standard check value of CRC-32/IEEE, in one piece and in chunks */
    const unsigned char *s = (const unsigned char *)"123456789";
    GPP_EXPECT(crc32_z(0, s, 9) == 0xcbf43926u);
    GPP_EXPECT(crc32_z(crc32_z(0, s, 4), s + 4, 5) == 0xcbf43926u);
}

/* A dataset written before zlib's crc32 and gpp_codec replaced the hand
 * CRC and codec (tests/data/dataset_v1_dlrm.gppdata, 6 samples, gpp-train
 * --write-dataset at commit b73ed1a) opens, reads as the synthetic source
 * that wrote it, and is written again byte for byte. */
static void t_old_file_reads_the_same(void)
{
    const char *src = getenv("GPP_SRC");
    char old[4096];
    snprintf(old, sizeof old, "%s/tests/data/dataset_v1_dlrm.gppdata", src ? src : ".");
    gpp_graph_t *g = s_model("dlrm:dense_branches=1,sparse_branches=2,dense_in=8,hidden=16,"
                             "dense_layers=1,rows=50,dim=4,bag=3,top_layers=1");
    if (!g)
        return;
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("data"), *path2 = gpp_fixture_tmpfile("data");
    gpp_data_t *d = gpp_data_open(g, old, 0, 0, &err), *syn = gpp_data_new(g, 1);
    GPP_EXPECT_MSG(d != NULL, "%s", err.msg);
    if (d) {
        GPP_EXPECT(gpp_data_samples(d) == 6);
        GPP_EXPECT_MSG(gpp_data_write_file(d, path, 6, &err) == 0, "%s", err.msg);
        GPP_EXPECT_MSG(gpp_data_write_file(syn, path2, 6, &err) == 0, "%s", err.msg);
        long n_old = 0, n_new = 0, n_syn = 0;
        unsigned char *a = gpp_fixture_slurp(old, &n_old), *b = gpp_fixture_slurp(path, &n_new),
                      *c = gpp_fixture_slurp(path2, &n_syn);
        GPP_EXPECT(a && b && c && n_old == 812 && n_new == n_old && n_syn == n_old &&
                   memcmp(a, b, (size_t)n_old) == 0 && memcmp(a, c, (size_t)n_old) == 0);
        free(a);
        free(b);
        free(c);
    }
    gpp_data_destroy(&d);
    gpp_data_destroy(&syn);
    unlink(path);
    unlink(path2);
    free(path);
    free(path2);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {
    {"crc32_known_value", t_crc32_known_value},
    {"synthetic_is_deterministic", t_synthetic_is_deterministic},
    {"ce_labels_follow_teacher", t_ce_labels_follow_teacher},
    {"file_round_trip", t_file_round_trip},
    {"bad_files_rejected", t_bad_files_rejected},
    {"old_file_reads_the_same", t_old_file_reads_the_same},
    {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
