/* gpp_fuzz: what the fuzz harnesses (tests/fuzz/fuzz_*.c) share.
 *
 * Each harness defines LLVMFuzzerTestOneInput (libFuzzer's entry point) over
 * one parser of outside input. Built with -DGPP_FUZZ=ON (clang), libFuzzer
 * supplies main(); otherwise fuzz_replay.c does, feeding the seed corpus
 * (tests/fuzz/corpus/<name>/) once: a regression test in every build.
 *
 * A harness aborts (gpp_fuzz_check) when an invariant of an accepted input
 * fails, e.g. a decoded message that does not encode again: libFuzzer
 * reports that as a crash like any sanitizer finding. */
#ifndef GPP_FUZZ_H
#define GPP_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a NUL-terminated string (parsers of text take one); a NUL
 * inside stays and ends the text early, as it would from a file read with
 * the project's readers. Caller frees. */
static inline char *gpp_fuzz_text(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    if (!t)
        abort();
    memcpy(t, data, size);
    t[size] = '\0';
    return t;
}

/* Aborts with a message when an accepted input breaks an invariant. */
#define gpp_fuzz_check(cond, ...)                                                                  \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz invariant failed: %s: ", #cond);                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
