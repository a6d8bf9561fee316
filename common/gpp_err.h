/* gpp_err: the run-time error tier (STYLE rule 4).
 *
 * Library code never exits: a function that can fail on run-time input
 * (a file, a config, a peer, CUDA) returns -1/NULL and fills a gpp_err_t with
 * a message a user can act on ("FILE:LINE: field 'x': expected ...; fix ...").
 * Programmer errors are assert()s. */
#ifndef GPP_ERR_H
#define GPP_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdarg.h>
#include <stddef.h>

#define GPP_ERR_LEN 8192 /* room for a whole list (every unsupported node, every op type) */

typedef struct {
    char msg[GPP_ERR_LEN];
} gpp_err_t;

/* Fills err (if not NULL) with a printf-style message; returns -1 so that
 * `return gpp_err_set(err, ...)` reads as a failing return. */
int gpp_err_set(gpp_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message: "prefix: old message". Returns -1. */
int gpp_err_prefix(gpp_err_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Check macros for syscalls and libc calls that set errno (STYLE rule 5;
 * CUDA's: kernels/cuda/gpp_cuda_check.h, NCCL's: agent/comm/gpp_comm_nccl.c).
 * `ok` is the call's success test. On failure err gets the printf-style
 * context, the library's message (strerror of errno as the call left it)
 * and the check's file:line, e.g. "dataset d.bin: cannot open: No such
 * file or directory (gpp_data.c:201)". GPP_SYS_TRY returns -1,
 * GPP_SYS_TRY_GOTO jumps to label; gpp_sys_fail is their message. */
int gpp_sys_fail(gpp_err_t *err, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define GPP_SYS_TRY(ok, err, ...)                                                                  \
    do {                                                                                           \
        if (!(ok))                                                                                 \
            return gpp_sys_fail((err), __FILE__, __LINE__, __VA_ARGS__);                           \
    } while (0)
#define GPP_SYS_TRY_GOTO(ok, err, label, ...)                                                      \
    do {                                                                                           \
        if (!(ok)) {                                                                               \
            gpp_sys_fail((err), __FILE__, __LINE__, __VA_ARGS__);                                  \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

/* Logging to stderr, one line per call, written with one write so that
 * threads do not interleave:
 *
 *   2026-11-24T13:45:01.123Z info  gpp-agent[3] worker: text
 *   TIMESTAMP (UTC, ms)      LEVEL COMPONENT[RANK] text
 *
 * COMPONENT is the program (gpp_log_set_component, default "gpp"), [RANK]
 * the agent's rank once it has one (gpp_log_set_rank; absent for programs
 * without one). Under systemd (JOURNAL_STREAM names our stderr) the
 * timestamp gives way to a syslog priority prefix "<N>" that journald
 * turns into the entry's priority (sd-daemon(3)): error 3, warn 4, info 6,
 * debug 7. GPP_LOG_LEVEL = debug|info|warn|error (or 3..0) is read once
 * (gpp_log_init; lazily on the first line otherwise, where a bad value
 * falls back to info with a warning). */
enum { GPP_LOG_ERROR = 0, GPP_LOG_WARN = 1, GPP_LOG_INFO = 2, GPP_LOG_DEBUG = 3 };
void gpp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads GPP_LOG_LEVEL; -1 with a message naming the value and the choices
 * when it is not one of them. */
int gpp_log_init(gpp_err_t *err);
/* Parses a level word or number into *level; -1 when it is neither. */
int gpp_log_level_parse(const char *s, int *level);
/* The component every line names (a program name; the string is copied). */
void gpp_log_set_component(const char *name);
/* The rank every line names from now on; -1: none. Any thread. */
void gpp_log_set_rank(int rank);
#define gpp_error(...) gpp_log(GPP_LOG_ERROR, __VA_ARGS__)
#define gpp_warn(...) gpp_log(GPP_LOG_WARN, __VA_ARGS__)
#define gpp_info(...) gpp_log(GPP_LOG_INFO, __VA_ARGS__)
#define gpp_debug(...) gpp_log(GPP_LOG_DEBUG, __VA_ARGS__)

/* Checked allocation: allocation failure is treated as fatal (abort with a
 * message), as in CZMQ; everything else reports through gpp_err_t. */
void *gpp_xcalloc(size_t n, size_t size);
void *gpp_xrealloc(void *p, size_t size);
char *gpp_xstrdup(const char *s);

#ifdef __cplusplus
}
#endif

#endif
