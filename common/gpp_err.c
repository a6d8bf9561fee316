/* gpp_err: error buffers, logging and checked allocation. */
#include "common/gpp_err.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int gpp_err_set(gpp_err_t *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int gpp_err_prefix(gpp_err_t *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char old[GPP_ERR_LEN], pre[GPP_ERR_LEN];
    memcpy(old, err->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(err->msg, sizeof err->msg, "%s: %s", pre, old);
    return -1;
}

int gpp_sys_fail(gpp_err_t *err, const char *file, int line, const char *fmt, ...)
{
    int e = errno; /* before anything below can change it */
    if (!err)
        return -1;
    char ctx[GPP_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    snprintf(err->msg, sizeof err->msg, "%s: %s (%s:%d)", ctx, strerror(e), base ? base + 1 : file,
             line);
    return -1;
}

/* ---- logging ---- */

static atomic_int s_log_level = -1;
static atomic_int s_log_rank = -1;
static char s_log_component[64] = "gpp";
static atomic_int s_log_journal = -1; /* stderr goes to journald: 1; unknown: -1 */

static const char *s_level_names[] = {"error", "warn", "info", "debug"};

int gpp_log_level_parse(const char *s, int *level)
{
    if (!s)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, s_level_names[i]) == 0) {
            *level = i;
            return 0;
        }
    if (strcasecmp(s, "warning") == 0) {
        *level = GPP_LOG_WARN;
        return 0;
    }
    if (s[0] >= '0' && s[0] <= '3' && s[1] == 0) {
        *level = s[0] - '0';
        return 0;
    }
    return -1;
}

int gpp_log_init(gpp_err_t *err)
{
    const char *env = getenv("GPP_LOG_LEVEL");
    int level = GPP_LOG_INFO;
    if (env && env[0] && gpp_log_level_parse(env, &level) < 0) {
        atomic_store(&s_log_level, GPP_LOG_INFO);
        return gpp_err_set(err,
                           "GPP_LOG_LEVEL='%s' is not a log level; set it to debug, info, warn "
                           "or error (or 3..0), or unset it for info",
                           env);
    }
    atomic_store(&s_log_level, level);
    return 0;
}

void gpp_log_set_component(const char *name)
{
    snprintf(s_log_component, sizeof s_log_component, "%s", name);
}

void gpp_log_set_rank(int rank)
{
    atomic_store(&s_log_rank, rank);
}

/* JOURNAL_STREAM is "DEV:INODE" of the stream systemd connected to
 * journald; it is inherited by children whose stderr may go elsewhere, so
 * it counts only when it names our stderr (sd-daemon(3), systemd.exec(5)). */
static int s_journal_stderr(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void gpp_log(int level, const char *fmt, ...)
{
    if (atomic_load(&s_log_level) < 0) {
        gpp_err_t err;
        if (gpp_log_init(&err) < 0)
            gpp_log(GPP_LOG_WARN, "%s; logging at info", err.msg);
    }
    if (level > atomic_load(&s_log_level))
        return;
    if (atomic_load(&s_log_journal) < 0) /* threads racing here all find the same */
        atomic_store(&s_log_journal, s_journal_stderr());
    level = level < 0 ? 0 : level > 3 ? 3 : level;
    char line[2304];
    size_t off = 0;
    if (atomic_load(&s_log_journal)) {
        static const int prio[] = {3, 4, 6, 7}; /* LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
        off = (size_t)snprintf(line, sizeof line, "<%d>", prio[level]);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        off = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
        off += (size_t)snprintf(line + off, sizeof line - off, ".%03ldZ ",
                                (long)(ts.tv_nsec / 1000000));
    }
    int rank = atomic_load(&s_log_rank);
    if (rank >= 0)
        off += (size_t)snprintf(line + off, sizeof line - off, "%-5s %s[%d] ", s_level_names[level],
                                s_log_component, rank);
    else
        off += (size_t)snprintf(line + off, sizeof line - off, "%-5s %s ", s_level_names[level],
                                s_log_component);
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(line + off, sizeof line - off - 1, fmt, ap);
    va_end(ap);
    off = w < 0 ? off : off + (size_t)w;
    if (off > sizeof line - 2)
        off = sizeof line - 2;
    line[off++] = '\n';
    /* one write: lines from the worker and the loop thread do not mix */
    ssize_t done = 0;
    while (done < (ssize_t)off) {
        ssize_t k = write(STDERR_FILENO, line + done, off - (size_t)done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        done += k;
    }
}

void *gpp_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "gpp: out of memory (%zu x %zu bytes)\n", n, size);
        abort();
    }
    return p;
}

void *gpp_xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q) {
        fprintf(stderr, "gpp: out of memory (%zu bytes)\n", size);
        abort();
    }
    return q;
}

char *gpp_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = gpp_xcalloc(n, 1);
    memcpy(d, s, n);
    return d;
}
