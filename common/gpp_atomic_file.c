/* gpp_atomic_file: temp file + fsync + rename (see gpp_atomic_file.h). */
#include "common/gpp_atomic_file.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gpp_atomic_file_s {
    FILE *f;
    char *path;
    char *tmp;
    int64_t size;
};

static int64_t s_fault_after = -1;
static int s_fault_env_read;

void gpp_atomic_file_fault_after(int64_t bytes)
{
    s_fault_env_read = 1; /* an explicit setting wins over the environment */
    s_fault_after = bytes;
}

gpp_atomic_file_t *gpp_atomic_file_open(const char *path, gpp_err_t *err)
{
    assert(path);
    if (!s_fault_env_read) {
        s_fault_env_read = 1;
        const char *e = getenv("GPP_FAULT_AFILE_AFTER_BYTES");
        if (e && *e) {
            s_fault_after = strtoll(e, NULL, 10);
            gpp_warn("fault injection armed: afile.write fails after %lld bytes",
                     (long long)s_fault_after);
        }
    }
    size_t n = strlen(path) + 32;
    char *tmp = gpp_xcalloc(1, n);
    snprintf(tmp, n, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        gpp_err_set(err,
                    "%s: cannot create a temp file beside it (%s): %s; check the "
                    "directory exists and is writable",
                    path, tmp, strerror(errno));
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
    if (s_fault_after >= 0 && self->size + (int64_t)len > s_fault_after) {
        size_t part = (size_t)(s_fault_after > self->size ? s_fault_after - self->size : 0);
        if (part)
            (void)!fwrite(data, 1, part, self->f);
        self->size += (int64_t)part;
        return gpp_err_set(err, "%s: write failed: %s (fault injection afile.write)", self->tmp,
                           strerror(ENOSPC));
    }
    if (len && fwrite(data, 1, len, self->f) != len)
        return gpp_err_set(err, "%s: write failed: %s", self->tmp, strerror(errno));
    self->size += (int64_t)len;
    return 0;
}

int gpp_atomic_file_commit(gpp_atomic_file_t **self_p, gpp_err_t *err)
{
    assert(self_p && *self_p);
    gpp_atomic_file_t *self = *self_p;
    int rc = 0;
    if (fflush(self->f) != 0 || fsync(fileno(self->f)) != 0) {
        rc = gpp_err_set(err, "%s: write failed: %s", self->tmp, strerror(errno));
    }
    if (fclose(self->f) != 0 && rc == 0)
        rc = gpp_err_set(err, "%s: close failed: %s", self->tmp, strerror(errno));
    self->f = NULL;
    if (rc == 0 && rename(self->tmp, self->path) != 0)
        rc = gpp_err_set(err, "%s: cannot replace it with %s: %s", self->path, self->tmp,
                         strerror(errno));
    if (rc == 0) {
        free(self->tmp);
        self->tmp = NULL; /* renamed: nothing for destroy to unlink */
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
