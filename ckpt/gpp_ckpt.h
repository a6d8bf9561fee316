/* gpp_ckpt: a stage checkpoint file, written and read without an executor
 * (the executor's side is agent/exec/gpp_exec_ckpt.h).
 *
 * Format, version 1, little-endian, no padding:
 *   char magic[8] = "GPPCKPT\0"; u32 version = 1;
 *   u32 optimizer (gpp_optim_kind_t); u64 steps (optimizer steps taken);
 *   u32 spec_len; char spec[spec_len] (the model's canonical spec);
 *   u32 n_tensors; then per tensor:
 *     u32 name_len; char name[name_len] ("<op>.<param>");
 *     u32 role (0 the value, 1 + k optimizer state buffer k);
 *     i64 rows; i64 cols; f32 data[rows x cols]
 *   u32 crc: CRC-32 (zlib) of every byte before it.
 *
 * The writer streams through gpp_atomic_file: an existing file is untouched
 * when a save fails. The reader checks every count, length and shape
 * against the file's size, every value finite (NaN/Inf refused naming the
 * tensor) and the CRC; messages name the file and what to do.
 *
 * Fault injection: "ckpt_kill:N" (GPP_FAULT_CKPT_KILL) makes the process
 * SIGKILL itself after the header of its (N+1)-th checkpoint file; for
 * N >= 1 once the set before it in the directory is committed (10 s at
 * most), so the kill tests a save cut short, not a report in flight. */
#ifndef GPP_CKPT_H
#define GPP_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"

#define GPP_CKPT_MAGIC "GPPCKPT"
#define GPP_CKPT_VERSION 1
/* More optimizer steps than any run takes (2^40): a larger count in a file
 * is corruption, and would overflow sample indices (step x batch). */
#define GPP_CKPT_MAX_STEPS ((uint64_t)1 << 40)
#define GPP_CKPT_SPEC_MAX 4096
/* roles in [0, GPP_CKPT_MAX_ROLES): the value and two optimizer buffers */
#define GPP_CKPT_MAX_ROLES 3

typedef struct {
    uint32_t optimizer; /* gpp_optim_kind_t */
    uint64_t steps;     /* optimizer steps taken */
    char spec[GPP_CKPT_SPEC_MAX + 1];
} gpp_ckpt_header_t;

/* ---- writing ---- */
typedef struct gpp_ckpt_writer_s gpp_ckpt_writer_t;

/* Starts path's temp file with h and n_tensors entries to follow. Caller
 * owns the result (gpp_ckpt_writer_commit or _destroy). */
gpp_ckpt_writer_t *gpp_ckpt_writer_new(const char *path, const gpp_ckpt_header_t *h,
                                       uint32_t n_tensors, gpp_err_t *err);
/* The next tensor's entry; its rows x cols values follow in
 * gpp_ckpt_writer_data calls. */
int gpp_ckpt_writer_tensor(gpp_ckpt_writer_t *self, const char *name, uint32_t role, int64_t rows,
                           int64_t cols, gpp_err_t *err);
/* n host floats of the current tensor, in order. */
int gpp_ckpt_writer_data(gpp_ckpt_writer_t *self, const float *v, size_t n, gpp_err_t *err);
/* Appends the CRC, makes the file durable and renames it into place;
 * destroys the writer. */
int gpp_ckpt_writer_commit(gpp_ckpt_writer_t **self_p, gpp_err_t *err);
/* Drops an uncommitted file (the previous one at path stays). */
void gpp_ckpt_writer_destroy(gpp_ckpt_writer_t **self_p);

/* ---- reading ---- */
typedef struct gpp_ckpt_reader_s gpp_ckpt_reader_t;

typedef struct {
    const char *name;
    uint32_t role;
    int64_t rows, cols;
} gpp_ckpt_entry_t;

/* A reader of path (borrowed: it must outlive the reader); reads nothing
 * yet. Caller owns the result. */
gpp_ckpt_reader_t *gpp_ckpt_reader_new(const char *path);
void gpp_ckpt_reader_destroy(gpp_ckpt_reader_t **self_p);
const char *gpp_ckpt_reader_path(const gpp_ckpt_reader_t *self);
/* The header and the table of tensors only (the data is skipped over:
 * neither its values nor the CRC are checked). */
int gpp_ckpt_reader_index(gpp_ckpt_reader_t *self, gpp_err_t *err);
/* The whole file, every check, once (later calls return 0); a malformed
 * body is reported as the checksum mismatch that explains it, when there
 * is one. */
int gpp_ckpt_reader_verify(gpp_ckpt_reader_t *self, gpp_err_t *err);
int gpp_ckpt_reader_verified(const gpp_ckpt_reader_t *self);
/* After _index or _verify: the header, and the tensors in file order. */
const gpp_ckpt_header_t *gpp_ckpt_reader_header(const gpp_ckpt_reader_t *self);
int gpp_ckpt_reader_count(const gpp_ckpt_reader_t *self);
const gpp_ckpt_entry_t *gpp_ckpt_reader_entry(const gpp_ckpt_reader_t *self, int i);
/* The tensor (name, role), or -1. */
int gpp_ckpt_reader_find(const gpp_ckpt_reader_t *self, const char *name, uint32_t role);
/* After _verify: n values of tensor i from element `off` into host out. */
int gpp_ckpt_reader_data(gpp_ckpt_reader_t *self, int i, int64_t off, size_t n, float *out,
                         gpp_err_t *err);

#endif
