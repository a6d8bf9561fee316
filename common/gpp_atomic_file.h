/* gpp_atomic_file: a file written atomically in pieces.
 *
 * Writes go to a temp file beside the target (same directory, so rename is
 * atomic), created exclusively by mkostemp (O_EXCL, so never through a
 * link; mode 0600) under an unpredictable name "<target>.tmp.<6 random
 * characters>", so no other process can plant a file or a link there. Commit flushes and fsyncs
 * the temp file, renames it over the target and fsyncs the directory, so the
 * new name survives a crash too; abort (destroy without commit) unlinks it.
 * An existing target is therefore either untouched or fully replaced,
 * whatever fails midway (disk full, a crash). The checkpoint and the dataset
 * writer stream through it, so a file larger than memory never has to be
 * built in memory; gpp_write_file_atomic writes one buffer (JSON files).
 *
 * Fault injection: hook GPP_FAULT_ATOMIC_WRITE ("atomic_write:N",
 * gpp_fault.h): writes fail with ENOSPC once N bytes went to the temp file.
 *
 * Ownership: gpp_atomic_file_open returns an object the caller owns;
 * gpp_atomic_file_commit and gpp_atomic_file_destroy both free it. */
#ifndef GPP_ATOMIC_FILE_H
#define GPP_ATOMIC_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"

typedef struct gpp_atomic_file_s gpp_atomic_file_t;

/* Caller owns the result; NULL + message when the temp file cannot be made. */
gpp_atomic_file_t *gpp_atomic_file_open(const char *path, gpp_err_t *err);
/* Appends len bytes. -1 + message on failure (the file is then unusable:
 * destroy it). */
int gpp_atomic_file_write(gpp_atomic_file_t *self, const void *data, size_t len, gpp_err_t *err);
/* Flush, fsync, rename over the target, fsync the directory; frees the
 * object and NULLs *self_p whatever the outcome. -1 + message on failure
 * (when only the directory fsync failed, the target already holds the new
 * contents but may lose its name in a crash). */
int gpp_atomic_file_commit(gpp_atomic_file_t **self_p, gpp_err_t *err);
/* Unlinks the temp file (when not committed) and frees; accepts NULL. */
void gpp_atomic_file_destroy(gpp_atomic_file_t **self_p);

/* Writes data to path atomically in one piece (open, write, commit). */
int gpp_write_file_atomic(const char *path, const void *data, size_t len, gpp_err_t *err);

#endif
