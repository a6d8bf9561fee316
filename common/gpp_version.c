/* gpp_version: see gpp_version.h. */
#include "common/gpp_version.h"

#include <string.h>

#include "common/gpp_err.h"
#include "gpp_git_commit.h" /* generated in the build tree */

const char *gpp_version(void)
{
    return GPP_VERSION;
}

const char *gpp_git_commit(void)
{
    return GPP_GIT_COMMIT;
}

void gpp_version_print(FILE *f, const char *prog)
{
    fprintf(f, "%s %s (git %s)\n", prog, GPP_VERSION, GPP_GIT_COMMIT);
}

int gpp_main_start(const char *prog, int argc, char **argv)
{
    gpp_log_set_component(prog);
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--version") == 0) {
            gpp_version_print(stdout, prog);
            return 0;
        }
    gpp_err_t err;
    if (gpp_log_init(&err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err.msg);
        return 2;
    }
    return -1;
}
