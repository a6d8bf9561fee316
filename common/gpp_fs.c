/* gpp_fs: file-system helpers (see gpp_fs.h). */
#include "common/gpp_fs.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* fsync of the directory that holds p, so that a new entry in it survives
 * a crash (a checkpoint set's directory before its files and manifest). */
static int s_sync_parent(const char *p, gpp_err_t *err)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", p);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return gpp_err_set(err, "mkdir %s: fsync of %s: %s", p, dir, strerror(e));
    }
    close(fd);
    return 0;
}

/* mkdir(p, mode), where an existing directory counts as success but an
 * existing non-directory does not; a new directory is made durable in its
 * parent. */
static int s_mkdir(const char *p, mode_t mode, gpp_err_t *err)
{
    if (mkdir(p, mode) == 0)
        return s_sync_parent(p, err);
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

int gpp_append_open(const char *path, int truncate)
{
    return open(path,
                O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | (truncate ? O_TRUNC : 0),
                0600);
}

int gpp_append_whole(int fd, const char *buf, size_t len)
{
    struct stat st; /* O_APPEND: every write goes to the end, whatever the offset */
    if (fstat(fd, &st) != 0)
        return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, buf + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            if (done > 0 && ftruncate(fd, st.st_size) != 0)
                gpp_warn("cannot cut a partly written line off: %s", strerror(errno));
            errno = e;
            return -1;
        }
        done += (size_t)w;
    }
    return 0;
}
