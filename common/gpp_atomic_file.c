/* gpp_atomic_file: exclusive temp file + fsync + rename + directory fsync
 * (see gpp_atomic_file.h). */
#include "common/gpp_atomic_file.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/gpp_fault.h"

struct gpp_atomic_file_s {
    FILE *f;
    char *path;
    char *tmp;
    int64_t size;
};

gpp_atomic_file_t *gpp_atomic_file_open(const char *path, gpp_err_t *err)
{
    assert(path);
    size_t n = strlen(path) + sizeof ".tmp.XXXXXX";
    char *tmp = gpp_xcalloc(1, n);
    snprintf(tmp, n, "%s.tmp.XXXXXX", path);
    /* mode 0600, O_EXCL (never through a link), a name from the kernel's
       random source (glibc), retried while taken */
    int fd = mkostemp(tmp, O_CLOEXEC);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        gpp_err_set(err,
                    "%s: cannot create a temp file beside it (%s): %s; check the "
                    "directory exists and is writable",
                    path, tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return NULL;
    }
    gpp_atomic_file_t *self = gpp_xcalloc(1, sizeof *self);
    self->f = f;
    self->path = gpp_xstrdup(path);
    self->tmp = tmp;
    return self;
}

int gpp_atomic_file_write(gpp_atomic_file_t *self, const void *data, size_t len, gpp_err_t *err)
{
    assert(self && self->f);
    if (gpp_fault(GPP_FAULT_ATOMIC_WRITE)) {
        int64_t limit = gpp_fault_arg(GPP_FAULT_ATOMIC_WRITE);
        if (self->size + (int64_t)len > limit) {
            size_t part = (size_t)(limit > self->size ? limit - self->size : 0);
            if (part)
                (void)!fwrite(data, 1, part, self->f);
            self->size += (int64_t)part;
            return gpp_err_set(err, "%s: write failed: %s (fault injection atomic_write)",
                               self->tmp, strerror(ENOSPC));
        }
    }
    if (len && fwrite(data, 1, len, self->f) != len)
        return gpp_err_set(err, "%s: write failed: %s", self->tmp, strerror(errno));
    self->size += (int64_t)len;
    return 0;
}

/* fsync of the directory holding path, so that a rename into it is durable. */
static int s_sync_dir(const char *path, gpp_err_t *err)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? gpp_xstrdup(path) : gpp_xstrdup(".");
    if (slash)
        dir[slash == path ? 1 : slash - path] = 0; /* "/x" -> "/", "a/b" -> "a" */
    int rc = 0, fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0)
        rc = gpp_err_set(err, "%s: written, but its directory %s cannot be synced: %s", path,
                         dir, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(dir);
    return rc;
}

int gpp_atomic_file_commit(gpp_atomic_file_t **self_p, gpp_err_t *err)
{
    assert(self_p && *self_p);
    gpp_atomic_file_t *self = *self_p;
    int rc = 0;
    if (fflush(self->f) != 0 || fsync(fileno(self->f)) != 0)
        rc = gpp_err_set(err, "%s: write failed: %s", self->tmp, strerror(errno));
    if (fclose(self->f) != 0 && rc == 0)
        rc = gpp_err_set(err, "%s: close failed: %s", self->tmp, strerror(errno));
    self->f = NULL;
    if (rc == 0 && rename(self->tmp, self->path) != 0)
        rc = gpp_err_set(err, "%s: cannot replace it with %s: %s", self->path, self->tmp,
                         strerror(errno));
    if (rc == 0) {
        free(self->tmp);
        self->tmp = NULL; /* renamed: nothing for destroy to unlink */
        rc = s_sync_dir(self->path, err);
    }
    gpp_atomic_file_destroy(self_p);
    return rc;
}

void gpp_atomic_file_destroy(gpp_atomic_file_t **self_p)
{
    assert(self_p);
    gpp_atomic_file_t *self = *self_p;
    if (!self)
        return;
    if (self->f)
        fclose(self->f);
    if (self->tmp) {
        unlink(self->tmp);
        free(self->tmp);
    }
    free(self->path);
    free(self);
    *self_p = NULL;
}

int gpp_write_file_atomic(const char *path, const void *data, size_t len, gpp_err_t *err)
{
    gpp_atomic_file_t *f = gpp_atomic_file_open(path, err);
    if (!f || gpp_atomic_file_write(f, data, len, err) < 0) {
        gpp_atomic_file_destroy(&f);
        return -1;
    }
    return gpp_atomic_file_commit(&f, err);
}
