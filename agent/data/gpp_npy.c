/* gpp_npy: NumPy .npy reader (see gpp_npy.h for the format and contract). */
#include "agent/data/gpp_npy.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gpp_npy maps '<' (little-endian) arrays in place: a little-endian host is needed"
#endif

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6

struct gpp_npy_s {
    char *path;
    void *map;
    size_t map_bytes;
    gpp_npy_dtype_t dtype;
    int ndim;
    int64_t shape[GPP_NPY_MAX_DIMS];
    int64_t record_elems;
    size_t data_off;
};

static const char *const S_DTYPES[] = {"<f4", "<i4", "<i8"};
static const size_t S_ITEMSIZE[] = {4, 4, 8};

const char *gpp_npy_dtype_name(gpp_npy_dtype_t t)
{
    assert(t >= GPP_NPY_F4 && t <= GPP_NPY_I8);
    return S_DTYPES[t];
}

/* ---- the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } ---- */

typedef struct {
    const char *p, *end;
} cursor_t;

static void s_ws(cursor_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static int s_eat(cursor_t *c, char ch)
{
    s_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string (no escapes: none of the values needs one). */
static int s_str(cursor_t *c, char *out, size_t cap)
{
    s_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return -1;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q && *c->p != '\\' && *c->p != '\n') {
        if (n + 1 >= cap)
            return -1;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end || *c->p != q)
        return -1;
    c->p++;
    out[n] = 0;
    return 0;
}

static int s_word(cursor_t *c, const char *w)
{
    s_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* (d0, d1, ...) with an optional trailing comma; () is a 0-d array. */
static int s_shape(cursor_t *c, int64_t *shape, int *ndim)
{
    *ndim = 0;
    if (!s_eat(c, '('))
        return -1;
    for (;;) {
        if (s_eat(c, ')'))
            return 0;
        s_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9' || *ndim == GPP_NPY_MAX_DIMS)
            return -1;
        int64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return -1;
            v = v * 10 + (*c->p++ - '0');
        }
        shape[(*ndim)++] = v;
        if (!s_eat(c, ',')) {
            if (!s_eat(c, ')'))
                return -1;
            return 0;
        }
    }
}

static int s_parse_header(gpp_npy_t *self, const char *h, size_t len, gpp_err_t *err)
{
    const char *path = self->path;
    if (len == 0 || h[len - 1] != '\n')
        return gpp_err_set(err,
                           "%s: header: does not end with a newline; not a .npy file "
                           "(write it with numpy.save)",
                           path);
    cursor_t c = {h, h + len - 1};
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    if (!s_eat(&c, '{'))
        return gpp_err_set(err,
                           "%s: header: not a Python dict literal; write the file with "
                           "numpy.save",
                           path);
    while (!s_eat(&c, '}')) {
        char key[32], val[32];
        if (s_str(&c, key, sizeof key) < 0 || !s_eat(&c, ':'))
            return gpp_err_set(err,
                               "%s: header: malformed near '%.20s'; write the file with "
                               "numpy.save",
                               path, c.p);
        if (strcmp(key, "descr") == 0) {
            if (s_str(&c, val, sizeof val) < 0)
                return gpp_err_set(err,
                                   "%s: header field 'descr': not a type string (a "
                                   "structured dtype?); save a plain array",
                                   path);
            int t = -1;
            for (int k = 0; k < 3; k++)
                if (strcmp(val, S_DTYPES[k]) == 0)
                    t = k;
            if (t < 0)
                return gpp_err_set(err,
                                   "%s: header field 'descr' is '%s'; gpp reads '<f4' "
                                   "(features, regression targets) or '<i4'/'<i8' (indices, "
                                   "class labels): save x.astype('<f4') or "
                                   "x.astype('<i8')",
                                   path, val);
            self->dtype = (gpp_npy_dtype_t)t;
            have_descr++;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (s_word(&c, "True"))
                return gpp_err_set(err,
                                   "%s: header field 'fortran_order' is True; gpp reads C "
                                   "order: save numpy.ascontiguousarray(x)",
                                   path);
            if (!s_word(&c, "False"))
                return gpp_err_set(err,
                                   "%s: header field 'fortran_order' must be True or "
                                   "False",
                                   path);
            have_fortran++;
        } else if (strcmp(key, "shape") == 0) {
            if (s_shape(&c, self->shape, &self->ndim) < 0)
                return gpp_err_set(err,
                                   "%s: header field 'shape': not a tuple of up to %d "
                                   "non-negative integers",
                                   path, GPP_NPY_MAX_DIMS);
            have_shape++;
        } else {
            return gpp_err_set(err,
                               "%s: header: unknown field '%s' (a .npy header holds "
                               "descr, fortran_order and shape); write the file with "
                               "numpy.save",
                               path, key);
        }
        if (!s_eat(&c, ',')) {
            if (!s_eat(&c, '}'))
                return gpp_err_set(err, "%s: header: malformed near '%.20s'", path, c.p);
            break;
        }
    }
    s_ws(&c);
    if (c.p != c.end)
        return gpp_err_set(err, "%s: header: bytes after the dict: '%.20s'", path, c.p);
    if (have_descr != 1 || have_fortran != 1 || have_shape != 1)
        return gpp_err_set(err,
                           "%s: header: needs each of 'descr', 'fortran_order' and 'shape' "
                           "once",
                           path);
    if (self->ndim < 1)
        return gpp_err_set(err,
                           "%s: header field 'shape' is (): a 0-d array holds no records; "
                           "save an array of shape (samples, ...)",
                           path);
    return 0;
}

gpp_npy_t *gpp_npy_open(const char *path, gpp_err_t *err)
{
    assert(path);
    gpp_npy_t *self = gpp_xcalloc(1, sizeof *self);
    self->path = gpp_xstrdup(path);
    self->map = MAP_FAILED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    GPP_SYS_TRY_GOTO(fd >= 0, err, fail, "%s: cannot open", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        gpp_err_set(err, "%s: not a regular file", path);
        goto fail;
    }
    if (st.st_size < MAGIC_LEN + 4) {
        gpp_err_set(err, "%s: truncated: %lld bytes, shorter than a .npy header", path,
                    (long long)st.st_size);
        goto fail;
    }
    self->map_bytes = (size_t)st.st_size;
    self->map = mmap(NULL, self->map_bytes, PROT_READ, MAP_SHARED, fd, 0);
    GPP_SYS_TRY_GOTO(self->map != MAP_FAILED, err, fail, "%s: mmap failed", path);
    close(fd);
    fd = -1;
    const unsigned char *b = self->map;
    if (memcmp(b, MAGIC, MAGIC_LEN) != 0) {
        gpp_err_set(err, "%s: field 'magic': not a NumPy .npy file (write it with numpy.save)",
                    path);
        goto fail;
    }
    int major = b[6], minor = b[7];
    if (major < 1 || major > 3 || minor != 0) {
        gpp_err_set(err, "%s: field 'version' is %d.%d; gpp reads .npy versions 1.0, 2.0 and 3.0",
                    path, major, minor);
        goto fail;
    }
    size_t hlen, pre = major == 1 ? 10 : 12;
    if (self->map_bytes < pre) {
        gpp_err_set(err, "%s: truncated inside the header length", path);
        goto fail;
    }
    hlen = major == 1
               ? (size_t)b[8] | (size_t)b[9] << 8
               : (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    if (hlen > self->map_bytes - pre) {
        gpp_err_set(err,
                    "%s: truncated: the header claims %zu bytes, the file has %zu after the "
                    "preamble",
                    path, hlen, self->map_bytes - pre);
        goto fail;
    }
    if (s_parse_header(self, (const char *)b + pre, hlen, err) < 0)
        goto fail;
    self->data_off = pre + hlen;
    size_t item = S_ITEMSIZE[self->dtype];
    if (self->data_off % item != 0) {
        gpp_err_set(err,
                    "%s: data start at byte %zu, not aligned to %zu; write the file with "
                    "numpy.save (it pads the header to 64 bytes)",
                    path, self->data_off, item);
        goto fail;
    }
    int64_t elems = 1;
    for (int d = 0; d < self->ndim; d++)
        if (__builtin_mul_overflow(elems, self->shape[d], &elems) || elems > (int64_t)1 << 56) {
            gpp_err_set(err, "%s: header field 'shape' claims an impossible size", path);
            goto fail;
        }
    self->record_elems = 1;
    for (int d = 1; d < self->ndim; d++)
        self->record_elems *= self->shape[d];
    size_t want = self->data_off + (size_t)elems * item;
    if (want != self->map_bytes) {
        gpp_err_set(err,
                    "%s: %s: shape %lld records x %lld elements of %s need %zu bytes, the "
                    "file has %zu",
                    path, want > self->map_bytes ? "truncated" : "trailing bytes",
                    (long long)self->shape[0], (long long)self->record_elems, S_DTYPES[self->dtype],
                    want, self->map_bytes);
        goto fail;
    }
    return self;
fail:
    if (fd >= 0)
        close(fd);
    gpp_npy_destroy(&self);
    return NULL;
}

void gpp_npy_destroy(gpp_npy_t **self_p)
{
    assert(self_p);
    gpp_npy_t *self = *self_p;
    if (!self)
        return;
    if (self->map != MAP_FAILED)
        munmap(self->map, self->map_bytes);
    free(self->path);
    free(self);
    *self_p = NULL;
}

const char *gpp_npy_path(const gpp_npy_t *self)
{
    return self->path;
}

gpp_npy_dtype_t gpp_npy_dtype(const gpp_npy_t *self)
{
    return self->dtype;
}

size_t gpp_npy_itemsize(const gpp_npy_t *self)
{
    return S_ITEMSIZE[self->dtype];
}

int gpp_npy_ndim(const gpp_npy_t *self)
{
    return self->ndim;
}

const int64_t *gpp_npy_shape(const gpp_npy_t *self)
{
    return self->shape;
}

int64_t gpp_npy_record_elems(const gpp_npy_t *self)
{
    return self->record_elems;
}

const void *gpp_npy_record(const gpp_npy_t *self, int64_t i)
{
    assert(i >= 0 && i < self->shape[0]);
    return (const char *)self->map + self->data_off +
           (size_t)i * (size_t)self->record_elems * S_ITEMSIZE[self->dtype];
}
