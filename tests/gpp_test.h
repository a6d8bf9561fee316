/* gpp_test: a tiny table-driven test runner shared by the unit tests.
 *
 *   static void t_foo(void) { GPP_EXPECT(x == 1); }
 *   static const gpp_test_case_t cases[] = {{"foo", t_foo}, {NULL, NULL}};
 *   int main(void) { return gpp_test_run(cases); }
 *
 * Prints one line per case and a closing "N passed, M failed" line. */
#ifndef GPP_TEST_H
#define GPP_TEST_H
#include <stdio.h>
#include <string.h>

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
