/* gpp_version: what this build is, and the start every program's main()
 * shares.
 *
 * The version is CMake's project() VERSION; the commit is the source tree's
 * git commit at build time (12 hex digits, "-dirty" with uncommitted
 * changes, "unknown" outside git; cmake/gpp_git_commit.cmake). */
#ifndef GPP_VERSION_H
#define GPP_VERSION_H

#include <stdio.h>

const char *gpp_version(void);    /* "0.1.0" */
const char *gpp_git_commit(void); /* "1a2b3c4d5e6f", or "unknown" */

/* Prints "PROG VERSION (git COMMIT)" and a newline to f. */
void gpp_version_print(FILE *f, const char *prog);

/* The first call of a program's main(): names the log component prog,
 * answers --version anywhere among argv[1..] before "--" (prints, returns
 * 0: exit with it), and reads GPP_LOG_LEVEL (a bad value: prints the error
 * and returns 2). Returns -1 when main goes on. */
int gpp_main_start(const char *prog, int argc, char **argv);

#endif
