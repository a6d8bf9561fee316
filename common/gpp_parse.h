/* gpp_parse: checked parsing of numeric command-line and config values.
 *
 * One rule for every program: the whole string must be the number (no
 * trailing text, not empty), in range, no overflow. On failure returns -1
 * and fills err with "NAME: expected ..., got 'VALUE'"; each program adds its
 * own prefix and exit status. */
#ifndef GPP_PARSE_H
#define GPP_PARSE_H

#include <stdint.h>

#include "common/gpp_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Base-10 integer in [lo, hi]. */
int gpp_parse_int64(const char *name, const char *value, int64_t lo, int64_t hi, int64_t *out,
                    gpp_err_t *err);
/* Finite number in [lo, hi]; lo_open makes the lower bound exclusive (> lo). */
int gpp_parse_double(const char *name, const char *value, double lo, int lo_open, double hi,
                     double *out, gpp_err_t *err);

/* A program's command-line flag: the same, and on failure prints
 * "PROG: FLAG: expected ..., got 'VALUE'" to stderr (the program then exits
 * with its own status). */
int gpp_parse_flag_int64(const char *prog, const char *flag, const char *value, int64_t lo,
                         int64_t hi, int64_t *out);
int gpp_parse_flag_double(const char *prog, const char *flag, const char *value, double lo,
                          int lo_open, double hi, double *out);

#ifdef __cplusplus
}
#endif

#endif
