/* gpp_npy: one NumPy .npy array, memory-mapped and validated.
 *
 * The format (numpy.lib.format, NEP 1): magic "\x93NUMPY", u8 major (1, 2 or
 * 3), u8 minor (0), header length (v1: u16; v2, v3: u32, little-endian),
 * then the header, a Python dict literal
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (N, a, b), }
 * (ASCII for v1/v2, UTF-8 for v3) padded with spaces and ended by '\n', then
 * the data, C order, shape[0] x prod(shape[1:]) elements.
 *
 * gpp_npy_open parses the header strictly: exactly those three keys, a
 * descr of '<f4', '<i4' or '<i8' ('|' or '>' byte orders and other types are
 * refused with the astype() call that fixes them), fortran_order False, a
 * shape of one to four non-negative dimensions, data aligned to its element
 * size and the file exactly as long as the header says (no truncation, no
 * trailing bytes). Errors name the file, the field and the fix.
 *
 * Ownership: gpp_npy_open returns an array the caller owns (destroy with
 * gpp_npy_destroy); pointers into its data live as long as it does. */
#ifndef GPP_NPY_H
#define GPP_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"

typedef enum { GPP_NPY_F4 = 0, GPP_NPY_I4, GPP_NPY_I8 } gpp_npy_dtype_t;

#define GPP_NPY_MAX_DIMS 4

typedef struct gpp_npy_s gpp_npy_t;

/* Caller owns the result; NULL + message naming the file and field. */
gpp_npy_t *gpp_npy_open(const char *path, gpp_err_t *err);
void gpp_npy_destroy(gpp_npy_t **self_p);

const char *gpp_npy_path(const gpp_npy_t *self);
gpp_npy_dtype_t gpp_npy_dtype(const gpp_npy_t *self);
/* "<f4", "<i4", "<i8" */
const char *gpp_npy_dtype_name(gpp_npy_dtype_t t);
size_t gpp_npy_itemsize(const gpp_npy_t *self);
/* Dimensions and their sizes (shape[0]: records). */
int gpp_npy_ndim(const gpp_npy_t *self);
const int64_t *gpp_npy_shape(const gpp_npy_t *self);
/* Elements per record: prod(shape[1:]) (1 for a 1-d array). */
int64_t gpp_npy_record_elems(const gpp_npy_t *self);
/* Record i in [0, shape[0]): record_elems little-endian elements. */
const void *gpp_npy_record(const gpp_npy_t *self, int64_t i);

#endif
