/* Tests of common/: the little-endian codec (bounds, byte order, in-place
 * arrays, strings), the numbered fault hook (arming by name, by
 * environment, disarming) and the atomic file writer (exclusive 0600 temp
 * file with an unpredictable name, commit renames and syncs the directory,
 * abort and a failed write leave the target untouched) and gpp_mkdirs
 * (nested, existing, a file in the way, a read-only parent). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/gpp_atomic_file.h"
#include "common/gpp_codec.h"
#include "common/gpp_fault.h"
#include "common/gpp_fs.h"
#include "common/gpp_time.h"
#include "tests/gpp_fixtures.h"
#include "tests/gpp_test.h"

static void t_codec_round_trip(void)
{
    unsigned char b[64];
    gpp_codec_t w = gpp_codec_writer(b, sizeof b);
    float f[3] = {1.5f, -2.0f, 3.25f};
    GPP_EXPECT(gpp_codec_put_u32(&w, 0x04030201u) == 0 &&
               gpp_codec_put_u64(&w, 0x0c0b0a0908070605ull) == 0 &&
               gpp_codec_put_i64(&w, -2) == 0 && gpp_codec_put_str(&w, "ab") == 0 &&
               gpp_codec_put_array32(&w, f, 3) == 0 && gpp_codec_put_bytes(&w, "xyz", 3) == 0);
    GPP_EXPECT(!w.overrun && w.pos == 4 + 8 + 8 + 6 + 12 + 3);
    /* little-endian on the wire whatever the host */
    const unsigned char head[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    GPP_EXPECT(memcmp(b, head, sizeof head) == 0);
    GPP_EXPECT(b[12] == 0xfe && b[19] == 0xff);                             /* -2 */
    GPP_EXPECT(b[20] == 2 && b[24] == 'a' && b[25] == 'b');                 /* u32 length, no NUL */
    GPP_EXPECT(b[26] == 0 && b[27] == 0 && b[28] == 0xc0 && b[29] == 0x3f); /* 1.5f */

    gpp_codec_t r = gpp_codec_reader(b, w.pos);
    uint32_t u;
    uint64_t v;
    int64_t i;
    char s[8], x[3];
    float g[3];
    GPP_EXPECT(gpp_codec_get_u32(&r, &u) == 0 && u == 0x04030201u);
    GPP_EXPECT(gpp_codec_get_u64(&r, &v) == 0 && v == 0x0c0b0a0908070605ull);
    GPP_EXPECT(gpp_codec_get_i64(&r, &i) == 0 && i == -2);
    GPP_EXPECT(gpp_codec_get_str(&r, s, sizeof s) == 0 && strcmp(s, "ab") == 0);
    GPP_EXPECT(gpp_codec_get_array32(&r, g, 3) == 0 && memcmp(f, g, sizeof f) == 0);
    GPP_EXPECT(gpp_codec_get_bytes(&r, x, 3) == 0 && memcmp(x, "xyz", 3) == 0);
    GPP_EXPECT(!r.overrun && r.pos == w.pos);

    /* i64 extremes through u64 bits */
    const int64_t ext[] = {INT64_MIN, INT64_MAX, -1, 0};
    for (size_t k = 0; k < 4; k++) {
        w = gpp_codec_writer(b, 8);
        gpp_codec_put_i64(&w, ext[k]);
        r = gpp_codec_reader(b, 8);
        GPP_EXPECT(gpp_codec_get_i64(&r, &i) == 0 && i == ext[k]);
    }

    /* arrays in place: encode and decode the very bytes */
    float h[2] = {0.5f, -7.0f};
    w = gpp_codec_writer(h, sizeof h);
    GPP_EXPECT(gpp_codec_put_array32(&w, h, 2) == 0);
    r = gpp_codec_reader(h, sizeof h);
    GPP_EXPECT(gpp_codec_get_array32(&r, h, 2) == 0 && h[0] == 0.5f && h[1] == -7.0f);
}

static void t_codec_overrun(void)
{
    unsigned char b[10] = {0};
    gpp_codec_t w = gpp_codec_writer(b, sizeof b);
    GPP_EXPECT(gpp_codec_put_u64(&w, 1) == 0);
    GPP_EXPECT(gpp_codec_put_u32(&w, 2) == -1 && w.overrun && w.pos == 8);
    GPP_EXPECT(gpp_codec_put_bytes(&w, "a", 1) == -1 && w.pos == 8); /* sticky */
    w = gpp_codec_writer(b, sizeof b);
    GPP_EXPECT(gpp_codec_put_str(&w, "0123456789") == -1 && w.pos == 0); /* all or nothing */
    float f[4] = {0};
    w = gpp_codec_writer(b, sizeof b);
    GPP_EXPECT(gpp_codec_put_array32(&w, f, 3) == -1 && w.pos == 0);
    GPP_EXPECT(gpp_codec_put_array32(&w, f, SIZE_MAX / 2) == -1); /* n x 4 would wrap */

    gpp_codec_t r = gpp_codec_reader(b, 6);
    uint64_t v = 7;
    uint32_t u = 7;
    GPP_EXPECT(gpp_codec_get_u64(&r, &v) == -1 && v == 0 && r.overrun && r.pos == 0);
    GPP_EXPECT(gpp_codec_get_u32(&r, &u) == -1 && u == 0); /* sticky */
    GPP_EXPECT(gpp_codec_get_array32(&r, f, SIZE_MAX / 2) == -1);

    /* a string longer than its buffer, or than the bytes there */
    unsigned char sb[16];
    w = gpp_codec_writer(sb, sizeof sb);
    gpp_codec_put_str(&w, "abcdefgh");
    char s[8] = "zz";
    r = gpp_codec_reader(sb, w.pos);
    GPP_EXPECT(gpp_codec_get_str(&r, s, sizeof s) == -1 && r.overrun && s[0] == 0);
    r = gpp_codec_reader(sb, w.pos - 1);
    char big[64];
    GPP_EXPECT(gpp_codec_get_str(&r, big, sizeof big) == -1 && big[0] == 0);
    w = gpp_codec_writer(sb, 4);
    gpp_codec_put_u32(&w, 0xffffffffu); /* a crafted length */
    r = gpp_codec_reader(sb, 4);
    GPP_EXPECT(gpp_codec_get_str(&r, big, sizeof big) == -1);
}

static void t_fault_arm_by_name(void)
{
    GPP_EXPECT(!gpp_fault(GPP_FAULT_ATOMIC_WRITE) && gpp_fault_arg(GPP_FAULT_ATOMIC_WRITE) == -1);
    GPP_EXPECT(gpp_fault_arm("atomic_write", 4096) == 0);
    GPP_EXPECT(gpp_fault(GPP_FAULT_ATOMIC_WRITE) && gpp_fault_arg(GPP_FAULT_ATOMIC_WRITE) == 4096);
    GPP_EXPECT(!gpp_fault(GPP_FAULT_PROFILE_SLOW));
    GPP_EXPECT(gpp_fault_arm("atomic_write", -1) == 0 && !gpp_fault(GPP_FAULT_ATOMIC_WRITE));
    GPP_EXPECT(gpp_fault_arm("profile_slow", 0) == 0 && gpp_fault(GPP_FAULT_PROFILE_SLOW));
    GPP_EXPECT(gpp_fault_arm("profile_slow", -5) == 0 && !gpp_fault(GPP_FAULT_PROFILE_SLOW));
    GPP_EXPECT(gpp_fault_arm("no_such_fault", 1) == -1);
    GPP_EXPECT(gpp_fault_arm("atomic_writ", 1) == -1); /* whole names only */
}

/* GPP_FAULT is read once, in a fresh process: run this test binary again
 * with it set and only the env case selected. */
static void t_fault_from_environment(void)
{
    const char *self = getenv("GPP_BIN");
    char exe[4096], cmd[8192];
    snprintf(exe, sizeof exe, "%s/tests/test_common", self ? self : "build");
    if (access(exe, X_OK) != 0) {
        printf("    skipped: %s not found (GPP_BIN)\n", exe);
        return;
    }
    snprintf(cmd, sizeof cmd,
             "GPP_FAULT='profile_slow:3,bogus:1,atomic_write:x,atomic_write:77' "
             "GPP_TEST_FAULT_CHILD=1 %s 2>&1",
             exe);
    FILE *p = popen(cmd, "r");
    char out[8192] = {0};
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    int rc = p ? pclose(p) : -1;
    out[n] = 0;
    GPP_EXPECT_MSG(rc == 0, "child: %s", out);
    GPP_EXPECT(strstr(out, "fault injection armed: profile_slow:3 (GPP_FAULT)") != NULL);
    GPP_EXPECT(strstr(out, "fault injection armed: atomic_write:77 (GPP_FAULT)") != NULL);
    GPP_EXPECT(strstr(out, "'bogus:1' ignored") != NULL);
    GPP_EXPECT(strstr(out, "'atomic_write:x' ignored") != NULL);
}

/* The child of t_fault_from_environment. */
static int s_fault_child(void)
{
    int ok = gpp_fault(GPP_FAULT_PROFILE_SLOW) && gpp_fault_arg(GPP_FAULT_PROFILE_SLOW) == 3 &&
             gpp_fault_arg(GPP_FAULT_ATOMIC_WRITE) == 77;
    gpp_fault_arm("profile_slow", -1); /* an explicit arm wins */
    ok = ok && !gpp_fault(GPP_FAULT_PROFILE_SLOW);
    return ok ? 0 : 1;
}

/* A fresh directory for the writer's tests; caller frees. */
static char *s_tmpdir(void)
{
    char *d = gpp_xstrdup("/tmp/gpp_test_common_XXXXXX");
    GPP_EXPECT(mkdtemp(d) != NULL);
    return d;
}

/* Entries of dir whose name starts with prefix: how many, and the last. */
static int s_entries(const char *dir, const char *prefix, char *last, size_t cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            n++;
            if (last)
                snprintf(last, cap, "%s/%s", dir, e->d_name);
        }
    if (d)
        closedir(d);
    return n;
}

static void t_atomic_file_temp_is_exclusive(void)
{
    char *dir = s_tmpdir(), path[512], tmp1[600] = "", tmp2[600] = "";
    snprintf(path, sizeof path, "%s/target", dir);
    gpp_err_t err = {0};
    gpp_atomic_file_t *a = gpp_atomic_file_open(path, &err);
    GPP_EXPECT_MSG(a != NULL, "%s", err.msg);
    GPP_EXPECT(s_entries(dir, "target.tmp.", tmp1, sizeof tmp1) == 1);
    gpp_atomic_file_t *b = gpp_atomic_file_open(path, &err); /* a second writer */
    GPP_EXPECT(b != NULL && s_entries(dir, "target.tmp.", NULL, 0) == 2);
    struct stat st;
    GPP_EXPECT(lstat(tmp1, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600);
    /* "<target>.tmp." + 6 random characters (mkostemp), nothing derived from the pid */
    char pid[32];
    snprintf(pid, sizeof pid, ".%d", (int)getpid());
    const char *suffix = strrchr(tmp1, '.') + 1;
    GPP_EXPECT_MSG(strlen(suffix) == 6 && !strstr(tmp1, pid), "%s", tmp1);
    printf("    temp file %s, mode %o\n", tmp1, (unsigned)(st.st_mode & 0777));
    gpp_atomic_file_destroy(&b);
    GPP_EXPECT(b == NULL && s_entries(dir, "target.tmp.", tmp2, sizeof tmp2) == 1);
    GPP_EXPECT(strcmp(tmp1, tmp2) == 0); /* abort removed only its own file */
    gpp_atomic_file_destroy(&a);
    GPP_EXPECT(s_entries(dir, "target", NULL, 0) == 0);
    /* a target in a directory that does not exist */
    snprintf(path, sizeof path, "%s/none/target", dir);
    GPP_EXPECT(gpp_atomic_file_open(path, &err) == NULL && strstr(err.msg, "cannot create"));
    rmdir(dir);
    free(dir);
}

static void t_atomic_file_commit_syncs_directory(void)
{
    char *dir = s_tmpdir(), path[512], sub[512], cwd[4096];
    gpp_err_t err = {0};
    /* target names with and without a directory part: "dir/target",
     * "target" (the directory to sync is ".") and a link to the target,
     * which is replaced, not followed */
    snprintf(path, sizeof path, "%s/target", dir);
    GPP_EXPECT_MSG(gpp_write_file_atomic(path, "one", 3, &err) == 0, "%s", err.msg);
    long len = 0;
    unsigned char *b = gpp_fixture_slurp(path, &len);
    GPP_EXPECT(b && len == 3 && memcmp(b, "one", 3) == 0);
    free(b);
    struct stat st;
    GPP_EXPECT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    GPP_EXPECT(getcwd(cwd, sizeof cwd) != NULL && chdir(dir) == 0);
    GPP_EXPECT_MSG(gpp_write_file_atomic("target", "two!", 4, &err) == 0, "%s", err.msg);
    GPP_EXPECT(chdir(cwd) == 0);
    b = gpp_fixture_slurp(path, &len);
    GPP_EXPECT(b && len == 4 && memcmp(b, "two!", 4) == 0);
    free(b);
    snprintf(sub, sizeof sub, "%s/link", dir);
    GPP_EXPECT(symlink(path, sub) == 0);
    GPP_EXPECT(gpp_write_file_atomic(sub, "3", 1, &err) == 0);
    GPP_EXPECT(lstat(sub, &st) == 0 && S_ISREG(st.st_mode));
    b = gpp_fixture_slurp(path, &len);
    GPP_EXPECT(b && len == 4); /* the link's old target is untouched */
    free(b);
    GPP_EXPECT(s_entries(dir, "target.tmp.", NULL, 0) == 0);

    /* A directory the writer may create and rename in but not open for
     * reading: the rename is done, the directory sync fails and says so.
     * (root bypasses permissions: skipped there.) */
    if (geteuid() != 0) {
        GPP_EXPECT(chmod(dir, 0300) == 0);
        int rc = gpp_write_file_atomic(path, "four", 4, &err);
        GPP_EXPECT(chmod(dir, 0700) == 0);
        GPP_EXPECT(rc == -1 && strstr(err.msg, "its directory") != NULL);
        printf("    unreadable directory: %s\n", err.msg);
        b = gpp_fixture_slurp(path, &len);
        GPP_EXPECT(b && len == 4 && memcmp(b, "four", 4) == 0);
        free(b);
    } else {
        printf("    unreadable-directory case skipped (running as root)\n");
    }

    /* A failed write (fault hook) leaves the target and no temp file. */
    GPP_EXPECT(gpp_fault_arm("atomic_write", 2) == 0);
    GPP_EXPECT(gpp_write_file_atomic(path, "fault", 5, &err) == -1 &&
               strstr(err.msg, "fault injection atomic_write"));
    gpp_fault_arm("atomic_write", -1);
    b = gpp_fixture_slurp(path, &len);
    GPP_EXPECT(b && len == 4);
    free(b);
    GPP_EXPECT(s_entries(dir, "target.tmp.", NULL, 0) == 0);
    unlink(sub);
    unlink(path);
    GPP_EXPECT(rmdir(dir) == 0);
    free(dir);
}

/* 1 when path is a directory with permission bits mode. */
static int s_is_dir(const char *path, mode_t mode)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == mode;
}

/* gpp_append_open / gpp_append_whole: 0600, appended, never through a
 * link, truncated on request; a write that fails (ENOSPC on /dev/full)
 * reports the write's errno. */
static void t_append_whole(void)
{
    char *dir = s_tmpdir(), p[512], q[512], got[64] = "";
    snprintf(p, sizeof p, "%s/m.jsonl", dir);
    int fd = gpp_append_open(p, 0);
    GPP_EXPECT(fd >= 0 && gpp_append_whole(fd, "a\n", 2) == 0 && close(fd) == 0);
    fd = gpp_append_open(p, 0);
    GPP_EXPECT(fd >= 0 && gpp_append_whole(fd, "bc\n", 3) == 0 && close(fd) == 0);
    FILE *f = fopen(p, "r");
    GPP_EXPECT(f && fread(got, 1, sizeof got - 1, f) == 5 && fclose(f) == 0);
    GPP_EXPECT_MSG(strcmp(got, "a\nbc\n") == 0, "%s", got);
    struct stat st;
    GPP_EXPECT(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600);
    fd = gpp_append_open(p, 1);
    GPP_EXPECT(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0 && close(fd) == 0);
    snprintf(q, sizeof q, "%s/link", dir);
    GPP_EXPECT(symlink(p, q) == 0);
    GPP_EXPECT(gpp_append_open(q, 0) == -1 && errno == ELOOP);
    fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        GPP_EXPECT(gpp_append_whole(fd, "x\n", 2) == -1 && errno == ENOSPC);
        close(fd);
    }
}

static void t_mkdirs(void)
{
    char *dir = s_tmpdir(), p[512], q[512];
    gpp_err_t err = {0};
    mode_t old_mask = umask(022);
    /* nested: every missing component is made, with the mode asked for */
    snprintf(p, sizeof p, "%s/a/b/c", dir);
    GPP_EXPECT_MSG(gpp_mkdirs(p, 0700, &err) == 0, "%s", err.msg);
    GPP_EXPECT(s_is_dir(p, 0700));
    snprintf(q, sizeof q, "%s/a", dir);
    GPP_EXPECT(s_is_dir(q, 0700));
    /* existing: fine, also with a trailing or doubled slash */
    GPP_EXPECT_MSG(gpp_mkdirs(p, 0700, &err) == 0, "%s", err.msg);
    snprintf(q, sizeof q, "%s//a/b/c/", dir);
    GPP_EXPECT_MSG(gpp_mkdirs(q, 0700, &err) == 0, "%s", err.msg);
    /* a file in the way, as the last component and as a parent */
    snprintf(q, sizeof q, "%s/a/file", dir);
    FILE *f = fopen(q, "w");
    GPP_EXPECT(f && fclose(f) == 0);
    GPP_EXPECT(gpp_mkdirs(q, 0700, &err) == -1 && strstr(err.msg, q) &&
               strstr(err.msg, strerror(ENOTDIR)));
    printf("    file in the way: %s\n", err.msg);
    snprintf(p, sizeof p, "%s/sub", q);
    GPP_EXPECT(gpp_mkdirs(p, 0700, &err) == -1 && strstr(err.msg, strerror(ENOTDIR)));
    GPP_EXPECT(gpp_mkdirs("", 0700, &err) == -1);
    /* a read-only parent (root bypasses permissions: skipped there) */
    snprintf(p, sizeof p, "%s/a/b/c/new/deeper", dir);
    snprintf(q, sizeof q, "%s/a/b/c", dir);
    if (geteuid() != 0) {
        GPP_EXPECT(chmod(q, 0500) == 0);
        int rc = gpp_mkdirs(p, 0700, &err);
        GPP_EXPECT(chmod(q, 0700) == 0);
        snprintf(q, sizeof q, "mkdir %s/a/b/c/new: %s", dir, strerror(EACCES));
        GPP_EXPECT_MSG(rc == -1 && strcmp(err.msg, q) == 0, "%s", err.msg);
        printf("    read-only parent: %s\n", err.msg);
    } else {
        printf("    read-only-parent case skipped (running as root)\n");
    }
    umask(old_mask);
    snprintf(q, sizeof q, "%s/a/file", dir);
    GPP_EXPECT(unlink(q) == 0);
    const char *rm[] = {"a/b/c/new/deeper", "a/b/c/new", "a/b/c", "a/b", "a"};
    for (size_t i = 0; i < sizeof rm / sizeof rm[0]; i++) {
        snprintf(q, sizeof q, "%s/%s", dir, rm[i]);
        rmdir(q);
    }
    GPP_EXPECT(rmdir(dir) == 0);
    free(dir);
}

/* NTP-style offsets: a peer clock 1 s ahead (or behind), one-way delays
 * out / back and a hold time at the peer; the estimate is off by
 * (out - back) / 2 and the sample with the least delay wins. */
static void t_clock_offset_estimate(void)
{
    static const struct {
        int64_t peer_ahead_us, out_us, back_us, hold_us;
        int expect;                  /* gpp_clock_est_add */
        int64_t offset_us, delay_us; /* the estimate after it */
    } rows[] = {
        {1000000, 500, 100, 40, 1, 1000200, 600}, /* first sample: best */
        {1000000, 50, 60, 5000, 1, 999995, 110},  /* less delay, long hold: best */
        {1000000, 300, 300, 0, 0, 999995, 110},   /* exact but slower: kept the older */
        {1000000, 50, 50, 7, 1, 1000000, 100},    /* symmetric: exact */
    };
    gpp_clock_est_t e = {0};
    int64_t now = 123456789;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t t0 = now, t1 = t0 + rows[i].out_us + rows[i].peer_ahead_us,
                t2 = t1 + rows[i].hold_us,
                t3 = t0 + rows[i].out_us + rows[i].hold_us + rows[i].back_us;
        int rc = gpp_clock_est_add(&e, t0, t1, t2, t3);
        GPP_EXPECT_MSG(rc == rows[i].expect, "row %zu: %d", i, rc);
        GPP_EXPECT_MSG(e.offset_us == rows[i].offset_us && e.delay_us == rows[i].delay_us,
                       "row %zu: offset %lld delay %lld", i, (long long)e.offset_us,
                       (long long)e.delay_us);
        now += 1000000;
    }
    GPP_EXPECT(e.samples == 4);
    /* a peer behind us, odd halves: within 1 us */
    gpp_clock_est_t b = {0};
    GPP_EXPECT(gpp_clock_est_add(&b, 10, 10 + 7 - 5000001, 10 + 7 - 5000001 + 3, 10 + 7 + 3 + 8) ==
               1);
    GPP_EXPECT_MSG(llabs(b.offset_us + 5000001 - (7 - 8) / 2) <= 1 && b.delay_us == 15,
                   "offset %lld delay %lld", (long long)b.offset_us, (long long)b.delay_us);
    /* impossible round trips are ignored */
    gpp_clock_est_t z = {0};
    GPP_EXPECT(gpp_clock_est_add(&z, 100, 50, 60, 90) == -1);  /* back before sent */
    GPP_EXPECT(gpp_clock_est_add(&z, 100, 60, 50, 200) == -1); /* peer sent before it got it */
    GPP_EXPECT(gpp_clock_est_add(&z, 100, 0, 500, 200) == -1); /* held longer than the trip */
    GPP_EXPECT(z.samples == 0);
    GPP_EXPECT(gpp_clock_est_offset_at(&z, 12345) == 0);
}

/* A peer clock 1 s ahead that runs 40 ppm fast (2.4 ms a minute), seen
 * through round trips once a second for 10 minutes with one-way delays of
 * 20-1020 us (a fixed LCG), after a burst of 32 quick ones: the offset at
 * the end is the drifted one (within the delays' asymmetry), where the
 * best round trip alone is off by the whole drift; without drift the fit
 * stays at the constant offset. */
static void t_clock_drift(void)
{
    for (int ppm = 0; ppm <= 40; ppm += 40) {
        gpp_clock_est_t e = {0};
        uint32_t lcg = 12345;
        int64_t t = 5000000; /* our clock, us */
        double ahead = 1e6;
        for (int i = 0; i < 32 + 600; i++) {
            lcg = lcg * 1664525u + 1013904223u;
            int64_t out = i < 32 ? 20 : 20 + (int64_t)(lcg >> 8) % 1000;
            lcg = lcg * 1664525u + 1013904223u;
            int64_t back = i < 32 ? 20 : 20 + (int64_t)(lcg >> 8) % 1000;
            int64_t t0 = t, t3 = t0 + out + 5 + back;
            /* the peer's clock at our time x: x + ahead + ppm * 1e-6 * (x - 5 s) */
            int64_t t1 =
                t0 + out + (int64_t)llround(ahead + ppm * 1e-6 * (double)(t0 + out - 5000000));
            int64_t t2 = t1 + 5;
            GPP_EXPECT(gpp_clock_est_add(&e, t0, t1, t2, t3) >= 0);
            t += i < 32 ? 1000 : 1000000;
        }
        int64_t end = t, truth = (int64_t)llround(ahead + ppm * 1e-6 * (double)(end - 5000000));
        int64_t est = gpp_clock_est_offset_at(&e, end);
        GPP_EXPECT_MSG(llabs(est - truth) <= 100, "%d ppm: offset at the end %lld, truth %lld", ppm,
                       (long long)est, (long long)truth);
        GPP_EXPECT_MSG(fabs(gpp_clock_est_drift_ppm(&e) - ppm) < 1, "%d ppm: fitted %.3f", ppm,
                       gpp_clock_est_drift_ppm(&e));
        if (ppm)
            GPP_EXPECT_MSG(llabs(e.offset_us - truth) > 20000, "best alone: %lld vs %lld",
                           (long long)e.offset_us, (long long)truth);
        GPP_EXPECT(e.n_win == GPP_CLOCK_WINDOWS && e.win[0].t_us < 6000000);
    }
    /* one host, one CLOCK_MONOTONIC: the offset is within the delay */
    gpp_clock_est_t h = {0};
    for (int i = 0; i < 8; i++) {
        int64_t t0 = gpp_now_us(), t1 = gpp_now_us(), t2 = gpp_now_us(), t3 = gpp_now_us();
        GPP_EXPECT(gpp_clock_est_add(&h, t0, t1, t2, t3) >= 0);
    }
    GPP_EXPECT_MSG(h.samples == 8 && llabs(h.offset_us) <= h.delay_us + 1, "offset %lld delay %lld",
                   (long long)h.offset_us, (long long)h.delay_us);
}

static const gpp_test_case_t cases[] = {
    {"codec_round_trip", t_codec_round_trip},
    {"codec_overrun", t_codec_overrun},
    {"fault_arm_by_name", t_fault_arm_by_name},
    {"fault_from_environment", t_fault_from_environment},
    {"atomic_file_temp_is_exclusive", t_atomic_file_temp_is_exclusive},
    {"atomic_file_commit_syncs_directory", t_atomic_file_commit_syncs_directory},
    {"mkdirs", t_mkdirs},
    {"append_whole", t_append_whole},
    {"clock_offset_estimate", t_clock_offset_estimate},
    {"clock_drift", t_clock_drift},
    {NULL, NULL}};

int main(void)
{
    if (getenv("GPP_TEST_FAULT_CHILD"))
        return s_fault_child();
    return gpp_test_run(cases);
}
