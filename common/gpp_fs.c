/* gpp_fs: file-system helpers (see gpp_fs.h). */
#include "common/gpp_fs.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir(p, mode), where an existing directory counts as success but an
 * existing non-directory does not. */
static int s_mkdir(const char *p, mode_t mode, gpp_err_t *err)
{
    if (mkdir(p, mode) == 0)
        return 0;
    int e = errno;
    struct stat st;
    if (e == EEXIST && stat(p, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        e = ENOTDIR;
    }
    return gpp_err_set(err, "mkdir %s: %s", p, strerror(e));
}

int gpp_mkdirs(const char *path, mode_t mode, gpp_err_t *err)
{
    assert(path);
    char p[PATH_MAX];
    if (!path[0])
        return gpp_err_set(err, "mkdir: empty path");
    if ((size_t)snprintf(p, sizeof p, "%s", path) >= sizeof p)
        return gpp_err_set(err, "mkdir %.64s...: %s", path, strerror(ENAMETOOLONG));
    for (char *s = p + 1; *s; s++)
        if (*s == '/' && s[-1] != '/') {
            *s = 0;
            int rc = s_mkdir(p, mode, err);
            *s = '/';
            if (rc < 0)
                return -1;
        }
    return s_mkdir(p, mode, err);
}
