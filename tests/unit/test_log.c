/* test_log: the log line format (gpp_err.h): UTC ISO-8601 timestamp with
 * milliseconds, level word, component and rank; journald priorities under
 * systemd; GPP_LOG_LEVEL words and numbers, a bad value an error. Each case
 * runs in a forked child (the level and the journald check are read once per
 * process) whose stderr goes to a file the parent reads. */
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/gpp_err.h"
#include "common/gpp_version.h"
#include "tests/gpp_test.h"

typedef void (*s_child_fn)(void);

/* Runs fn in a child with stderr on a file; returns what it wrote (caller
 * frees) or NULL. */
static char *s_run_child(s_child_fn fn)
{
    char path[] = "/tmp/gpp_test_log.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        fn();
        gpp_test_exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    char *buf = gpp_xcalloc(8192, 1);
    ssize_t n = pread(fd, buf, 8191, 0);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    unlink(path);
    return buf;
}

static int s_match(const char *re, const char *s)
{
    regex_t r;
    if (regcomp(&r, re, REG_EXTENDED | REG_NEWLINE) != 0)
        return 0;
    int ok = regexec(&r, s, 0, NULL, 0) == 0;
    regfree(&r);
    return ok;
}

static void s_child_lines(void)
{
    unsetenv("JOURNAL_STREAM");
    setenv("GPP_LOG_LEVEL", "info", 1);
    gpp_log_set_component("gpp-agent");
    gpp_info("worker: before the rank");
    gpp_log_set_rank(3);
    gpp_warn("worker: %d stashes", 2);
    gpp_debug("not shown at info");
}

static void t_line_format(void)
{
    char *out = s_run_child(s_child_lines);
    GPP_EXPECT(out != NULL);
    if (!out)
        return;
    const char *ts = "^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\.[0-9]{3}Z ";
    char re[512];
    snprintf(re, sizeof re, "%sinfo  gpp-agent worker: before the rank$", ts);
    GPP_EXPECT_MSG(s_match(re, out), "%s", out);
    snprintf(re, sizeof re, "%swarn  gpp-agent\\[3\\] worker: 2 stashes$", ts);
    GPP_EXPECT_MSG(s_match(re, out), "%s", out);
    GPP_EXPECT(strstr(out, "not shown") == NULL);
    free(out);
}

/* stderr is the journal stream: priorities, no timestamp */
static void s_child_journal(void)
{
    struct stat st;
    fstat(STDERR_FILENO, &st);
    char js[64];
    snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    setenv("GPP_LOG_LEVEL", "debug", 1);
    gpp_log_set_component("gpp-coordinator");
    gpp_error("e");
    gpp_warn("w");
    gpp_info("i");
    gpp_debug("d");
}

static void t_journal_priorities(void)
{
    char *out = s_run_child(s_child_journal);
    GPP_EXPECT(out != NULL);
    if (!out)
        return;
    GPP_EXPECT_MSG(strcmp(out, "<3>error gpp-coordinator e\n<4>warn  gpp-coordinator w\n"
                               "<6>info  gpp-coordinator i\n<7>debug gpp-coordinator d\n") == 0,
                   "%s", out);
    free(out);
}

/* JOURNAL_STREAM inherited, but stderr is elsewhere: timestamps */
static void s_child_other_stream(void)
{
    setenv("JOURNAL_STREAM", "1:1", 1);
    setenv("GPP_LOG_LEVEL", "3", 1);
    gpp_debug("d");
}

static void t_journal_stream_elsewhere(void)
{
    char *out = s_run_child(s_child_other_stream);
    GPP_EXPECT(out && s_match("^[0-9]{4}-.*Z debug gpp d$", out));
    free(out);
}

static void t_level_words(void)
{
    int l = -1;
    GPP_EXPECT(gpp_log_level_parse("debug", &l) == 0 && l == GPP_LOG_DEBUG);
    GPP_EXPECT(gpp_log_level_parse("INFO", &l) == 0 && l == GPP_LOG_INFO);
    GPP_EXPECT(gpp_log_level_parse("warn", &l) == 0 && l == GPP_LOG_WARN);
    GPP_EXPECT(gpp_log_level_parse("warning", &l) == 0 && l == GPP_LOG_WARN);
    GPP_EXPECT(gpp_log_level_parse("error", &l) == 0 && l == GPP_LOG_ERROR);
    GPP_EXPECT(gpp_log_level_parse("0", &l) == 0 && l == GPP_LOG_ERROR);
    GPP_EXPECT(gpp_log_level_parse("3", &l) == 0 && l == GPP_LOG_DEBUG);
    GPP_EXPECT(gpp_log_level_parse("4", &l) == -1);
    GPP_EXPECT(gpp_log_level_parse("verbose", &l) == -1);
    GPP_EXPECT(gpp_log_level_parse("", &l) == -1);
    GPP_EXPECT(gpp_log_level_parse("2x", &l) == -1);
}

static void s_child_bad_level(void)
{
    setenv("GPP_LOG_LEVEL", "loud", 1);
    gpp_err_t err = {{0}};
    if (gpp_log_init(&err) == -1)
        fprintf(stderr, "[%s]\n", err.msg);
    gpp_info("still logs");
}

static void t_bad_level(void)
{
    char *out = s_run_child(s_child_bad_level);
    GPP_EXPECT(out && strstr(out, "[GPP_LOG_LEVEL='loud' is not a log level; set it to debug, info"));
    GPP_EXPECT(out && strstr(out, "info  gpp still logs"));
    free(out);
}

static void t_version(void)
{
    GPP_EXPECT(strcmp(gpp_version(), GPP_VERSION) == 0);
    const char *c = gpp_git_commit();
    GPP_EXPECT(strcmp(c, "unknown") == 0 || s_match("^[0-9a-f]{12}(-dirty)?$", c));
}

static const gpp_test_case_t cases[] = {
    {"line_format", t_line_format},
    {"journal_priorities", t_journal_priorities},
    {"journal_stream_elsewhere", t_journal_stream_elsewhere},
    {"level_words", t_level_words},
    {"bad_level", t_bad_level},
    {"version", t_version},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
