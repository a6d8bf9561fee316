/* gpp_err: error buffers, logging and checked allocation. */
#include "common/gpp_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int s_log_level = -1;

void gpp_log(int level, const char *fmt, ...)
{
    if (s_log_level < 0) {
        const char *env = getenv("GPP_LOG_LEVEL");
        s_log_level = env ? atoi(env) : GPP_LOG_INFO;
    }
    if (level > s_log_level)
        return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gpp %s: %s\n", names[level < 0 ? 0 : level > 3 ? 3 : level], buf);
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
