/* gpp_parse: checked numeric parsing (see gpp_parse.h). */
#include "common/gpp_parse.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

int gpp_parse_int64(const char *name, const char *value, int64_t lo, int64_t hi, int64_t *out,
                    gpp_err_t *err)
{
    char *end = NULL;
    errno = 0;
    long long x = strtoll(value, &end, 10);
    if (!*value || *end || (errno && x != LLONG_MAX) || x < lo)
        return gpp_err_set(err, "%s: expected an integer >= %" PRId64 ", got '%s'", name, lo,
                           value);
    if (errno || x > hi)
        return gpp_err_set(err, "%s: expected an integer <= %" PRId64 ", got '%s'", name, hi,
                           value);
    *out = x;
    return 0;
}

int gpp_parse_double(const char *name, const char *value, double lo, int lo_open, double hi,
                     double *out, gpp_err_t *err)
{
    char *end = NULL;
    errno = 0;
    double x = strtod(value, &end);
    if (!*value || *end || isnan(x) || (lo_open ? !(x > lo) : !(x >= lo))) {
        if (lo == 0)
            return gpp_err_set(err, "%s: expected a %s number, got '%s'", name,
                               lo_open ? "positive" : "non-negative", value);
        return gpp_err_set(err, "%s: expected a number %s %g, got '%s'", name,
                           lo_open ? ">" : ">=", lo, value);
    }
    if (errno || !isfinite(x) || x > hi)
        return gpp_err_set(err, "%s: expected a number <= %g, got '%s'", name, hi, value);
    *out = x;
    return 0;
}

int gpp_parse_flag_int64(const char *prog, const char *flag, const char *value, int64_t lo,
                         int64_t hi, int64_t *out)
{
    gpp_err_t err;
    if (gpp_parse_int64(flag, value, lo, hi, out, &err) == 0)
        return 0;
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    return -1;
}

int gpp_parse_flag_double(const char *prog, const char *flag, const char *value, double lo,
                          int lo_open, double hi, double *out)
{
    gpp_err_t err;
    if (gpp_parse_double(flag, value, lo, lo_open, hi, out, &err) == 0)
        return 0;
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    return -1;
}
