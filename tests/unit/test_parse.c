/* Tests of common/gpp_parse: whole-string numbers, bounds, messages. */
#include <math.h>
#include <stdint.h>
#include <string.h>

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

static const gpp_test_case_t cases[] = {{"int", t_int}, {"double", t_double}, {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
