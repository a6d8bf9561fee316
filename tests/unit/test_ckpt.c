/* Tests of checkpoints: save/load restores weights, optimizer state and the
 * step count so that training resumes bit-identically; a stage loads from a
 * whole-model checkpoint, and any stage from the files of another split
 * (gpp_exec_ckpt_load_files, files of one step count only); corrupted, truncated, foreign and mismatched
 * files are rejected with the executor unchanged, and so are crafted ones with a valid CRC (NaN
 * weights, absurd step counts); a failed save leaves the old file intact; files written before
 * gpp_codec and zlib's crc32 load and are written again byte for byte. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "common/gpp_codec.h"
#include "common/gpp_fault.h"
#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt.h"
#include "agent/data/gpp_data.h"
#include "agent/exec/gpp_exec.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

#define DLRM                                                                                       \
    "dlrm:dense_branches=1,sparse_branches=2,dense_in=8,hidden=16,dense_layers=1,rows=50,dim=4,"   \
    "bag=3,top_layers=1"

static gpp_exec_t *s_exec(gpp_fixture_exec_t *f, int n, const int *ops, gpp_optim_kind_t kind,
                          uint64_t seed)
{
    gpp_err_t err = {0};
    gpp_exec_cfg_t c = {.seed = seed, .batch = 8};
    c.optim = (gpp_optim_hp_t){.kind = kind,
                               .lr = 0.01f,
                               .momentum = 0.9f,
                               .beta1 = 0.9f,
                               .beta2 = 0.999f,
                               .eps = 1e-8f,
                               .weight_decay = 0.01f};
    gpp_exec_t *ex = gpp_exec_new(f->g, n, ops, f->be, f->data, &c, &err);
    GPP_EXPECT_MSG(ex != NULL, "%s", err.msg);
    return ex;
}

static void s_train(gpp_exec_t *ex, int iters)
{
    gpp_err_t err = {0};
    for (int i = 0; i < iters; i++) {
        int64_t t = gpp_exec_step_count(ex);
        for (int m = 0; m < 2; m++)
            GPP_EXPECT(gpp_exec_begin(ex, m, t * 8 + m * 4, 4, &err) == 0 &&
                       gpp_exec_forward(ex, m, &err) == 0 && gpp_exec_backward(ex, m, &err) == 0);
        GPP_EXPECT_MSG(gpp_exec_step(ex, &err) == 0, "%s", err.msg);
    }
}

/* The executor's parameters, through the checkpoint's iterator. */
typedef struct {
    int n;
    gpp_exec_param_t p[256];
} s_params_t;

static int s_collect(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    (void)err;
    s_params_t *ps = arg;
    if (ps->n == 256)
        return -1;
    ps->p[ps->n++] = *p;
    return 0;
}

/* Sum over parameters (and optimizer state when `state`) of |a - b|, by name
 * (CPU backend: the buffers are host memory). */
static double s_diff(gpp_exec_t *a, gpp_exec_t *b, int state)
{
    static s_params_t pa, pb;
    pa.n = pb.n = 0;
    GPP_EXPECT(gpp_exec_params_foreach(a, s_collect, &pa, NULL) == 0 &&
               gpp_exec_params_foreach(b, s_collect, &pb, NULL) == 0);
    double d = 0;
    for (int i = 0; i < pa.n; i++) {
        const gpp_exec_param_t *x = &pa.p[i], *y = NULL;
        for (int k = 0; k < pb.n; k++)
            if (strcmp(x->name, pb.p[k].name) == 0)
                y = &pb.p[k];
        if (!y || y->n_bufs != x->n_bufs)
            return INFINITY;
        for (int s = 0; s < (state ? x->n_bufs : 1); s++)
            for (int64_t e = 0; e < x->rows * x->cols; e++)
                d += fabs((double)x->buf[s][e] - (double)y->buf[s][e]);
    }
    return d;
}

static void t_resume_is_exact(void)
{
    const gpp_optim_kind_t kinds[] = {GPP_OPTIM_ADAMW, GPP_OPTIM_SGD};
    for (int k = 0; k < 2; k++) {
        gpp_fixture_exec_t f;
        if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
            return;
        gpp_err_t err = {0};
        char *path = gpp_fixture_tmpfile("ckpt");
        gpp_exec_t *a = s_exec(&f, f.g->n_ops, f.all, kinds[k], 1);
        gpp_exec_t *b = s_exec(&f, f.g->n_ops, f.all, kinds[k], 2); /* other initial weights */
        if (a && b) {
            s_train(a, 3);
            GPP_EXPECT_MSG(gpp_exec_ckpt_save(a, path, &err) == 0, "%s", err.msg);
            GPP_EXPECT(s_diff(a, b, 0) > 0);
            GPP_EXPECT_MSG(gpp_exec_ckpt_load(b, path, &err) == 0, "%s", err.msg);
            GPP_EXPECT(s_diff(a, b, 1) == 0);
            GPP_EXPECT(gpp_exec_step_count(b) == 3);
            s_train(a, 2);
            s_train(b, 2);
            double d = s_diff(a, b, 1);
            printf("    %s: weights + state after resuming 2 more steps differ by %g\n",
                   k ? "sgd" : "adamw", d);
            GPP_EXPECT(d == 0);
        }
        gpp_exec_destroy(&a);
        gpp_exec_destroy(&b);
        unlink(path);
        free(path);
        gpp_fixture_exec_close(&f);
    }
}

static void t_stage_loads_from_whole_model(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
        return;
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("ckpt");
    gpp_exec_t *a = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 1);
    int ops[4] = {0, 1}; /* dense0.input, dense0.fc0 */
    gpp_exec_t *st = s_exec(&f, 2, ops, GPP_OPTIM_ADAMW, 5);
    if (a && st) {
        s_train(a, 2);
        GPP_EXPECT(gpp_exec_ckpt_save(a, path, &err) == 0);
        GPP_EXPECT_MSG(gpp_exec_ckpt_load(st, path, &err) == 0, "%s", err.msg);
        GPP_EXPECT(s_diff(st, a, 1) == 0);
    }
    gpp_exec_destroy(&a);
    gpp_exec_destroy(&st);
    unlink(path);
    free(path);
    gpp_fixture_exec_close(&f);
}

/* Any split loads from the stage files of another: the whole model saved
 * as two stages (ops 0..h-1, h..n-1), loaded into the whole model and into
 * a stage that spans both files; files of different step counts, a file
 * missing and a damaged file are refused naming the file, the executor
 * unchanged. */
static void t_load_files_any_split(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
        return;
    gpp_err_t err = {0};
    char *whole = gpp_fixture_tmpfile("ckpt"), *p0 = gpp_fixture_tmpfile("ckpt"),
         *p1 = gpp_fixture_tmpfile("ckpt"), *later = gpp_fixture_tmpfile("ckpt");
    int n = f.g->n_ops, h = n / 2, lo[256], hi[256], span[2] = {h - 1, h};
    for (int i = 0; i < n; i++)
        (i < h ? lo : hi)[i < h ? i : i - h] = i;
    gpp_exec_t *a = s_exec(&f, n, f.all, GPP_OPTIM_ADAMW, 1);
    gpp_exec_t *s0 = s_exec(&f, h, lo, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *s1 = s_exec(&f, n - h, hi, GPP_OPTIM_ADAMW, 3);
    gpp_exec_t *c = s_exec(&f, n, f.all, GPP_OPTIM_ADAMW, 4);
    gpp_exec_t *sp = s_exec(&f, 2, span, GPP_OPTIM_ADAMW, 5);
    gpp_exec_t *snap = s_exec(&f, n, f.all, GPP_OPTIM_ADAMW, 4);
    if (a && s0 && s1 && c && sp && snap) {
        s_train(a, 2);
        GPP_EXPECT(gpp_exec_ckpt_save(a, whole, &err) == 0);
        GPP_EXPECT(gpp_exec_ckpt_load(s0, whole, &err) == 0 && gpp_exec_ckpt_save(s0, p0, &err) == 0);
        GPP_EXPECT(gpp_exec_ckpt_load(s1, whole, &err) == 0 && gpp_exec_ckpt_save(s1, p1, &err) == 0);
        const char *both[] = {p0, p1}, *mixed[] = {p0, later}, *one[] = {p0};
        /* the whole model from the two stage files, and a stage across them */
        GPP_EXPECT_MSG(gpp_exec_ckpt_load_files(c, both, 2, &err) == 0, "%s", err.msg);
        GPP_EXPECT(s_diff(c, a, 1) == 0 && gpp_exec_step_count(c) == 2);
        GPP_EXPECT_MSG(gpp_exec_ckpt_load_files(sp, both, 2, &err) == 0, "%s", err.msg);
        GPP_EXPECT(s_diff(sp, a, 1) == 0 && gpp_exec_step_count(sp) == 2);
        /* refusals: c stays as snap (freshly loaded the same) */
        GPP_EXPECT(gpp_exec_ckpt_load_files(snap, both, 2, &err) == 0);
        s_train(a, 1);
        GPP_EXPECT(gpp_exec_ckpt_save(a, later, &err) == 0);
        struct {
            const char *const *files;
            int n;
            const char *words;
        } bad[] = {{mixed, 2, "optimizer steps"}, {one, 1, "has no tensor"}};
        for (int i = 0; i < 2; i++) {
            GPP_EXPECT(gpp_exec_ckpt_load_files(c, bad[i].files, bad[i].n, &err) == -1);
            GPP_EXPECT_MSG(strstr(err.msg, bad[i].words) != NULL, "'%s' lacks '%s'", err.msg,
                           bad[i].words);
            printf("    rejected: %s\n", err.msg);
            GPP_EXPECT(s_diff(c, snap, 1) == 0 && gpp_exec_step_count(c) == 2);
        }
        GPP_EXPECT(strstr(err.msg, p0) != NULL);
        /* a damaged second file: its checksum, naming it */
        FILE *fp = fopen(p1, "r+b");
        GPP_EXPECT(fp && fseek(fp, 100, SEEK_SET) == 0 && fputc(0x5a, fp) != EOF);
        if (fp)
            fclose(fp);
        GPP_EXPECT(gpp_exec_ckpt_load_files(c, both, 2, &err) == -1);
        GPP_EXPECT_MSG(strstr(err.msg, p1) && strstr(err.msg, "checksum"), "%s", err.msg);
        printf("    rejected: %s\n", err.msg);
        GPP_EXPECT(s_diff(c, snap, 1) == 0);
    }
    gpp_exec_t **all[] = {&a, &s0, &s1, &c, &sp, &snap};
    for (int i = 0; i < 6; i++)
        gpp_exec_destroy(all[i]);
    char *paths[] = {whole, p0, p1, later};
    for (int i = 0; i < 4; i++) {
        unlink(paths[i]);
        free(paths[i]);
    }
    gpp_fixture_exec_close(&f);
}

static void s_expect_load_fails(gpp_exec_t *ex, gpp_exec_t *snapshot, const char *path,
                                const char *words)
{
    gpp_err_t err = {0};
    int64_t steps = gpp_exec_step_count(ex);
    GPP_EXPECT(gpp_exec_ckpt_load(ex, path, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, words) != NULL, "'%s' lacks '%s'", err.msg, words);
    printf("    rejected: %s\n", err.msg);
    GPP_EXPECT(s_diff(ex, snapshot, 1) == 0); /* unchanged */
    GPP_EXPECT(gpp_exec_step_count(ex) == steps);
}

static void t_bad_checkpoints_rejected(void)
{
    gpp_fixture_exec_t f, o;
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0 ||
        gpp_fixture_exec_open(&o, "candle_uno:branches=1,layers=1,hidden=8,in=4", 3) < 0)
        return;
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("ckpt"), *bad = gpp_fixture_tmpfile("ckpt");
    gpp_exec_t *a = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 1);
    gpp_exec_t *b = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *b_copy = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *sgd = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_SGD, 2);
    gpp_exec_t *foreign = s_exec(&o, o.g->n_ops, o.all, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *foreign_copy = s_exec(&o, o.g->n_ops, o.all, GPP_OPTIM_ADAMW, 2);
    if (!a || !b || !b_copy || !sgd || !foreign || !foreign_copy)
        goto done;
    s_train(a, 1);
    GPP_EXPECT(gpp_exec_ckpt_save(a, path, &err) == 0);
    long len = 0;
    unsigned char *orig = gpp_fixture_slurp(path, &len), *c = malloc(len > 0 ? (size_t)len : 1);

    for (long at = 8; at < len; at += len / 7) { /* a flipped byte anywhere */
        memcpy(c, orig, (size_t)len);
        c[at] ^= 0x40;
        gpp_fixture_spit(bad, c, len);
        s_expect_load_fails(b, b_copy, bad, at < 12 ? "version" : "checksum");
    }
    gpp_fixture_spit(bad, orig, len - 1);
    s_expect_load_fails(b, b_copy, bad, "checksum");
    gpp_fixture_spit(bad, orig, len / 2);
    s_expect_load_fails(b, b_copy, bad, "checksum");
    gpp_fixture_spit(bad, orig, 5);
    s_expect_load_fails(b, b_copy, bad, "bad magic");
    memcpy(c, orig, (size_t)len);
    c[1] = 'X';
    gpp_fixture_spit(bad, c, len);
    s_expect_load_fails(b, b_copy, bad, "bad magic");
    s_expect_load_fails(b, b_copy, "/nonexistent/ckpt", "cannot open");
    s_expect_load_fails(foreign, foreign_copy, path, "is for model");
    s_expect_load_fails(sgd, sgd, path, "pass --optimizer adamw");

    /* A failed save leaves the old checkpoint intact and no temp file. */
    s_train(a, 1);
    gpp_fault_arm("atomic_write", len / 2);
    GPP_EXPECT(gpp_exec_ckpt_save(a, path, &err) == -1);
    gpp_fault_arm("atomic_write", -1);
    printf("    failed save: %s\n", err.msg);
    GPP_EXPECT(strstr(err.msg, "untouched") != NULL);
    gpp_fixture_expect_untouched(path, orig, len);
    GPP_EXPECT(gpp_exec_ckpt_save(a, "/nonexistent/dir/ckpt", &err) == -1);
    GPP_EXPECT(gpp_exec_ckpt_load(b, path, &err) == 0); /* the old one still loads */
    free(orig);
    free(c);
done:
    gpp_exec_destroy(&a);
    gpp_exec_destroy(&b);
    gpp_exec_destroy(&b_copy);
    gpp_exec_destroy(&sgd);
    gpp_exec_destroy(&foreign);
    gpp_exec_destroy(&foreign_copy);
    unlink(path);
    unlink(bad);
    free(path);
    free(bad);
    gpp_fixture_exec_close(&f);
    gpp_fixture_exec_close(&o);
}

/* tests/data/ckpt_v1_dlrm.ckpt: `gpp-train --model DLRM --iterations 2
 * --batch 8 --threads 1 --save` at commit b73ed1a, before gpp_codec and
 * zlib's crc32 replaced the hand codec and CRC. */
static char *s_old_ckpt(long *len)
{
    const char *src = getenv("GPP_SRC");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/ckpt_v1_dlrm.ckpt", src ? src : ".");
    unsigned char *b = gpp_fixture_slurp(path, len);
    int ok = b != NULL && *len == 12582;
    GPP_EXPECT_MSG(ok, "%s", path);
    free(b);
    return ok ? gpp_xstrdup(path) : NULL;
}

/* An old file loads (step count 2) and is saved again byte for byte. */
static void t_old_file_reads_the_same(void)
{
    gpp_fixture_exec_t f;
    long len = 0;
    char *old = s_old_ckpt(&len);
    if (!old || gpp_fixture_exec_open(&f, DLRM, 3) < 0) {
        free(old);
        return;
    }
    gpp_err_t err = {0};
    char *path = gpp_fixture_tmpfile("ckpt");
    gpp_exec_t *ex = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 7);
    if (ex) {
        GPP_EXPECT_MSG(gpp_exec_ckpt_load(ex, old, &err) == 0, "%s", err.msg);
        GPP_EXPECT(gpp_exec_step_count(ex) == 2);
        GPP_EXPECT_MSG(gpp_exec_ckpt_save(ex, path, &err) == 0, "%s", err.msg);
        long n = 0, m = 0;
        unsigned char *a = gpp_fixture_slurp(old, &n), *b = gpp_fixture_slurp(path, &m);
        GPP_EXPECT(a && b && n == m && memcmp(a, b, (size_t)n) == 0);
        free(a);
        free(b);
    }
    gpp_exec_destroy(&ex);
    unlink(path);
    free(path);
    free(old);
    gpp_fixture_exec_close(&f);
}

/* The same run writes the same bytes: twice in one process, and as the
 * code before gpp_codec did (the CRC-32 of the whole file of a fresh
 * executor, seed 1, AdamW, that `gpp-train --iterations 0 --save` wrote at
 * commit b73ed1a: initial weights are counter-based, no BLAS involved). */
static void t_save_is_byte_identical(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
        return;
    gpp_err_t err = {0};
    char *p1 = gpp_fixture_tmpfile("ckpt"), *p2 = gpp_fixture_tmpfile("ckpt");
    gpp_exec_t *a = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 1);
    gpp_exec_t *b = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 1);
    if (a && b) {
        long n = 0, m = 0;
        GPP_EXPECT_MSG(gpp_exec_ckpt_save(a, p1, &err) == 0, "%s", err.msg);
        unsigned char *x = gpp_fixture_slurp(p1, &n);
        uint32_t crc = x ? (uint32_t)crc32_z(0, x, (size_t)n) : 0;
        printf("    fresh executor: %ld bytes, CRC-32 %08x\n", n, crc);
        GPP_EXPECT(crc == 0x2144df1cu);
        free(x);
        s_train(a, 2);
        s_train(b, 2);
        GPP_EXPECT(gpp_exec_ckpt_save(a, p1, &err) == 0 && gpp_exec_ckpt_save(b, p2, &err) == 0);
        x = gpp_fixture_slurp(p1, &n);
        unsigned char *y = gpp_fixture_slurp(p2, &m);
        GPP_EXPECT(x && y && n == m && memcmp(x, y, (size_t)n) == 0);
        free(x);
        free(y);
    }
    gpp_exec_destroy(&a);
    gpp_exec_destroy(&b);
    unlink(p1);
    unlink(p2);
    free(p1);
    free(p2);
    gpp_fixture_exec_close(&f);
}

/* Writes b with its trailing CRC made valid again. */
static void s_spit_valid(const char *path, unsigned char *b, long len)
{
    gpp_codec_t c = gpp_codec_writer(b + len - 4, 4);
    gpp_codec_put_u32(&c, (uint32_t)crc32_z(0, b, (size_t)(len - 4)));
    gpp_fixture_spit(path, b, len);
}

/* Crafted files with a valid CRC: numbers that would overflow or allocate
 * without bound, NaN and Inf weights. */
static void t_crafted_checkpoints_rejected(void)
{
    gpp_fixture_exec_t f;
    long len = 0;
    char *old = s_old_ckpt(&len);
    if (!old || gpp_fixture_exec_open(&f, DLRM, 3) < 0) {
        free(old);
        return;
    }
    char *bad = gpp_fixture_tmpfile("ckpt");
    gpp_exec_t *ex = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 2);
    gpp_exec_t *copy = s_exec(&f, f.g->n_ops, f.all, GPP_OPTIM_ADAMW, 2);
    unsigned char *orig = gpp_fixture_slurp(old, &len), *b = malloc((size_t)len);
    if (!ex || !copy || !orig || !b)
        goto done;
    /* the layout up to the first tensor's data */
    gpp_codec_t c = gpp_codec_reader(orig + 24, (size_t)len - 24);
    uint32_t spec_len, n_tensors, name_len;
    gpp_codec_get_u32(&c, &spec_len);
    c.pos += spec_len;
    gpp_codec_get_u32(&c, &n_tensors);
    long at_n = 24 + (long)c.pos - 4, at_entry = 24 + (long)c.pos;
    gpp_codec_get_u32(&c, &name_len);
    long at_rows = at_entry + 4 + (long)name_len + 4, at_data = at_rows + 16;
    GPP_EXPECT(!c.overrun && n_tensors > 0);
    const struct {
        long at;
        int bytes;
        uint64_t v;
        const char *words;
    } crafted[] = {
        {16, 8, (uint64_t)1 << 63, "corrupt header (9223372036854775808 optimizer steps)"},
        {16, 8, GPP_CKPT_MAX_STEPS + 1, "optimizer steps"},
        {at_n, 4, 0xffffffffu, "corrupt header (4294967295 tensors)"},
        {at_entry, 4, 0x7fffffffu, "name length"},
        {at_rows, 8, (uint64_t)1 << 62, "runs past the end"},
        {at_rows, 8, (uint64_t)-1, "runs past the end"},
        {at_rows + 8, 8, (uint64_t)1 << 40, "runs past the end"},
        {at_data, 4, 0x7fc00000u, "holds NaN at element 0"},
        {at_data + 4, 4, 0xff800000u, "holds Inf at element 1"},
    };
    for (size_t i = 0; i < sizeof crafted / sizeof crafted[0]; i++) {
        memcpy(b, orig, (size_t)len);
        gpp_codec_t w = gpp_codec_writer(b + crafted[i].at, (size_t)crafted[i].bytes);
        if (crafted[i].bytes == 8)
            gpp_codec_put_u64(&w, crafted[i].v);
        else
            gpp_codec_put_u32(&w, (uint32_t)crafted[i].v);
        s_spit_valid(bad, b, len);
        s_expect_load_fails(ex, copy, bad, crafted[i].words);
    }
    /* the NaN message names the file and the tensor */
    memcpy(b, orig, (size_t)len);
    memcpy(b + at_data, "\x00\x00\xc0\x7f", 4);
    s_spit_valid(bad, b, len);
    gpp_err_t err = {0};
    char name[256] = {0}, want[512];
    memcpy(name, orig + at_entry + 4, name_len < 255 ? name_len : 255);
    snprintf(want, sizeof want, "checkpoint %s: tensor '%s' holds NaN", bad, name);
    GPP_EXPECT(gpp_exec_ckpt_load(ex, bad, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, want) != NULL, "'%s' lacks '%s'", err.msg, want);
done:
    free(orig);
    free(b);
    gpp_exec_destroy(&ex);
    gpp_exec_destroy(&copy);
    unlink(bad);
    free(bad);
    free(old);
    gpp_fixture_exec_close(&f);
}

static const gpp_test_case_t cases[] = {
    {"resume_is_exact", t_resume_is_exact},
    {"stage_loads_from_whole_model", t_stage_loads_from_whole_model},
    {"load_files_any_split", t_load_files_any_split},
    {"bad_checkpoints_rejected", t_bad_checkpoints_rejected},
    {"old_file_reads_the_same", t_old_file_reads_the_same},
    {"save_is_byte_identical", t_save_is_byte_identical},
    {"crafted_checkpoints_rejected", t_crafted_checkpoints_rejected},
    {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
