/* gpp_rundir: see gpp_rundir.h. */
#include "coordinator/gpp_rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const S_FILES[] = {"endpoint", "monitor.key_secret", "coordinator.key"};
#define S_N_FILES (sizeof S_FILES / sizeof S_FILES[0])

/* path is a directory (not a link) of ours that nobody else may enter. */
static int s_private_dir(const char *path, const char *what, gpp_err_t *err)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return gpp_err_set(err, "%s %s: %s", what, path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return gpp_err_set(err,
                           "%s %s: not a directory (a link or a file is never followed); "
                           "remove it or choose another",
                           what, path);
    if (st.st_uid != geteuid() || (st.st_mode & 077))
        return gpp_err_set(err,
                           "%s %s: owned by uid %u with mode %04o; it must be this user's "
                           "(uid %u) and 0700: others could read the monitor key or "
                           "replace the files. Remove it or choose another",
                           what, path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                           (unsigned)geteuid());
    return 0;
}

int gpp_rundir_default(char *out, size_t len, gpp_err_t *err)
{
    const char *base = getenv("XDG_RUNTIME_DIR");
    if (!base || base[0] != '/')
        base = "/tmp";
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s/gpp-%u", base, (unsigned)geteuid());
    if (mkdir(parent, 0700) < 0 && errno != EEXIST)
        return gpp_err_set(err, "run directory: mkdir %s: %s; pass --run-dir DIR", parent,
                           strerror(errno));
    if (s_private_dir(parent, "run directory", err) < 0)
        return -1;
    if ((size_t)snprintf(out, len, "%s/coordinator-%d", parent, (int)getpid()) >= len)
        return gpp_err_set(err, "run directory: %s/coordinator-%d is too long", parent,
                           (int)getpid());
    return 0;
}

int gpp_rundir_open(gpp_rundir_t *rd, const char *path, const gpp_curve_client_t *monitor,
                    gpp_err_t *err)
{
    memset(rd, 0, sizeof *rd);
    if (strlen(path) + 32 >= sizeof rd->path)
        return gpp_err_set(err, "--run-dir %s: path too long", path);
    snprintf(rd->path, sizeof rd->path, "%s", path);
    if (mkdir(path, 0700) == 0)
        rd->made = 1;
    else if (errno != EEXIST)
        return gpp_err_set(err, "--run-dir %s: mkdir: %s", path, strerror(errno));
    if (s_private_dir(path, "--run-dir", err) < 0)
        return -1;
    rd->open = 1;
    for (size_t i = 0; i < S_N_FILES; i++) { /* an earlier run's */
        char f[PATH_MAX + 32];
        snprintf(f, sizeof f, "%s/%s", path, S_FILES[i]);
        if (unlink(f) < 0 && errno != ENOENT) {
            gpp_err_set(err, "--run-dir %s: cannot remove %s: %s", path, f, strerror(errno));
            gpp_rundir_close(rd);
            return -1;
        }
    }
    if (monitor && gpp_curve_client_save(monitor, path, err) < 0) {
        gpp_rundir_close(rd);
        return gpp_err_prefix(err, "--run-dir %s", path);
    }
    return 0;
}

int gpp_rundir_endpoint(gpp_rundir_t *rd, const char *endpoint, gpp_err_t *err)
{
    char f[PATH_MAX + 32];
    snprintf(f, sizeof f, "%s/endpoint", rd->path);
    if (unlink(f) < 0 && errno != ENOENT)
        return gpp_err_set(err, "run directory: cannot replace %s: %s", f, strerror(errno));
    int fd = open(f, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return gpp_err_set(err, "run directory: cannot create %s: %s", f, strerror(errno));
    char line[600];
    int n = snprintf(line, sizeof line, "%s\n", endpoint);
    int ok = n > 0 && (size_t)n < sizeof line && write(fd, line, (size_t)n) == n;
    if (close(fd) < 0 || !ok)
        return gpp_err_set(err, "run directory: cannot write %s: %s", f, strerror(errno));
    return 0;
}

void gpp_rundir_close(gpp_rundir_t *rd)
{
    if (!rd->open)
        return;
    for (size_t i = 0; i < S_N_FILES; i++) {
        char f[PATH_MAX + 32];
        snprintf(f, sizeof f, "%s/%s", rd->path, S_FILES[i]);
        unlink(f);
    }
    if (rd->made)
        rmdir(rd->path);
    rd->open = 0;
}
