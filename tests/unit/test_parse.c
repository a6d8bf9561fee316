/* Tests of common/gpp_parse: whole-string numbers, bounds, messages, and
 * the command-line flavour every program uses. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpp_parse.h"
#include "tests/gpp_test.h"

static void t_int(void)
{
    gpp_err_t err = {{0}};
    int64_t x = -7;
    GPP_EXPECT(gpp_parse_int64("--n", "42", 1, 100, &x, &err) == 0 && x == 42);
    GPP_EXPECT(gpp_parse_int64("--n", "-3", -5, 5, &x, &err) == 0 && x == -3);
    struct {
        const char *v, *want;
    } bad[] = {{"", "expected an integer >= 1, got ''"},
               {"12x", "expected an integer >= 1, got '12x'"},
               {"0", "expected an integer >= 1, got '0'"},
               {"101", "expected an integer <= 100, got '101'"},
               {"99999999999999999999", "expected an integer <= 100"},
               {"1.5", ">= 1, got '1.5'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        x = -7;
        GPP_EXPECT_MSG(gpp_parse_int64("--n", bad[i].v, 1, 100, &x, &err) == -1 &&
                           strstr(err.msg, bad[i].want) && strncmp(err.msg, "--n: ", 5) == 0 &&
                           x == -7,
                       "'%s' -> '%s'", bad[i].v, err.msg);
    }
    GPP_EXPECT(gpp_parse_int64("--n", "x", 0, 1, &x, NULL) == -1); /* err optional */
}

static void t_double(void)
{
    gpp_err_t err = {{0}};
    double d = -1;
    GPP_EXPECT(gpp_parse_double("--m", "0.25", 0, 1, 10, &d, &err) == 0 && d == 0.25);
    GPP_EXPECT(gpp_parse_double("--m", "0", 0, 0, 10, &d, &err) == 0 && d == 0);
    GPP_EXPECT(gpp_parse_double("--m", "0", 0, 1, 10, &d, &err) == -1 &&
               strstr(err.msg, "expected a positive number, got '0'"));
    GPP_EXPECT(gpp_parse_double("--m", "-1", 0, 0, 10, &d, &err) == -1 &&
               strstr(err.msg, "non-negative"));
    GPP_EXPECT(gpp_parse_double("--m", "12GB", 0, 1, 10, &d, &err) == -1 &&
               strstr(err.msg, "got '12GB'"));
    GPP_EXPECT(gpp_parse_double("--m", "11", 0, 1, 10, &d, &err) == -1 &&
               strstr(err.msg, "<= 10"));
    GPP_EXPECT(gpp_parse_double("--m", "nan", 0, 0, 10, &d, &err) == -1);
    GPP_EXPECT(gpp_parse_double("--m", "inf", 0, 0, INFINITY, &d, &err) == -1);
    GPP_EXPECT(gpp_parse_double("--m", "1", 2, 0, 10, &d, &err) == -1 &&
               strstr(err.msg, "expected a number >= 2"));
}

/* What the flag parsers print to stderr for one bad and one good value. */
static void t_flag(void)
{
    char path[] = "/tmp/gpp_test_parse_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    GPP_EXPECT(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    int64_t x = -7;
    double d = -7;
    int r1 = gpp_parse_flag_int64("gpp-x", "--slot", "3", 0, 10, &x);
    int r2 = gpp_parse_flag_int64("gpp-x", "--slot", "11", 0, 10, &x);
    int r3 = gpp_parse_flag_double("gpp-x: error", "--lr", "-1", 0, 0, 10, &d);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char out[512] = {0};
    FILE *f = fdopen(fd, "r");
    rewind(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    fclose(f);
    unlink(path);
    GPP_EXPECT(r1 == 0 && r2 == -1 && r3 == -1 && x == 3 && d == -7);
    GPP_EXPECT_MSG(strcmp(out, "gpp-x: --slot: expected an integer <= 10, got '11'\n"
                               "gpp-x: error: --lr: expected a non-negative number, got '-1'\n") ==
                       0,
                   "%s", out);
}

static const gpp_test_case_t cases[] = {
    {"int", t_int}, {"double", t_double}, {"flag", t_flag}, {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
