/* gpp_test: a tiny table-driven test runner shared by the unit tests.
 *
 *   static void t_foo(void) { GPP_EXPECT(x == 1); }
 *   static const gpp_test_case_t cases[] = {{"foo", t_foo}, {NULL, NULL}};
 *   int main(void) { return gpp_test_run(cases); }
 *
 * Prints one line per case and a closing "N passed, M failed" line.
 *
 * Also: gpp_test_free_port() (a TCP port from the kernel for a daemon under
 * test) and gpp_test_exit() (how a forked child that does not exec ends, so
 * that a coverage build keeps its counters). */
#ifndef GPP_TEST_H
#define GPP_TEST_H
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
    const char *name;
    void (*fn)(void);
} gpp_test_case_t;

static int gpp_test_failures_;

#define GPP_EXPECT(cond)                                                         \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);    \
            gpp_test_failures_++;                                                \
        }                                                                        \
    } while (0)
#define GPP_EXPECT_MSG(cond, ...)                                                \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            gpp_test_failures_++;                                                \
        }                                                                        \
    } while (0)
#define GPP_EXPECT_NEAR(a, b, tol)                                               \
    GPP_EXPECT_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)", \
                   (double)(a), (double)(b), (double)(tol))

/* A TCP port on 127.0.0.1 that is free now: the kernel picks it for a socket
 * bound to port 0, which is then closed. Another process may take it before
 * the caller binds it; no two calls in a row return the same port by chance
 * of the pid, as a port derived from it would. Returns -1 when the kernel
 * refuses (no socket). */
static inline int gpp_test_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Ends a forked child that did not exec: _exit(status), after writing the
 * child's coverage counters in a coverage build (_exit skips the atexit
 * handler that writes them). */
#ifdef GPP_COVERAGE
void __gcov_dump(void);
#endif
static inline void gpp_test_exit(int status)
{
#ifdef GPP_COVERAGE
    __gcov_dump();
#endif
    _exit(status);
}
#ifdef GPP_COVERAGE
/* Tests that still call _exit() in a forked child get the same. */
#define _exit(status) gpp_test_exit(status)
#endif

static inline int gpp_test_run(const gpp_test_case_t *cases)
{
    int passed = 0, failed = 0;
    for (const gpp_test_case_t *c = cases; c->name; c++) {
        int before = gpp_test_failures_;
        c->fn();
        int ok = gpp_test_failures_ == before;
        printf("%s %s\n", ok ? "ok  " : "FAIL", c->name);
        fflush(stdout);
        if (ok)
            passed++;
        else
            failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#endif
