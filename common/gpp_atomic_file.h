/* gpp_atomic_file: a file written atomically in pieces.
 *
 * Writes go to a temp file beside the target (same directory, so rename is
 * atomic); commit flushes, fsyncs and renames it over the target; abort (or
 * destroy without commit) unlinks it. An existing target is therefore either
 * untouched or fully replaced, whatever fails midway (disk full, a crash).
 * The checkpoint and the dataset writer stream through it, so a file larger
 * than memory never has to be built in memory.
 *
 * Fault injection (STYLE rule 10): hook point "afile.write". When armed with
 * gpp_atomic_file_fault_after(n), or by the environment variable
 * GPP_FAULT_AFILE_AFTER_BYTES=n read once at the first open, every write
 * fails with ENOSPC once n bytes have been written to the temp file. Tests
 * use it to show a failed save leaves the old file intact.
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
/* Flush, fsync, rename over the target; frees the object and NULLs *self_p
 * whatever the outcome. */
int gpp_atomic_file_commit(gpp_atomic_file_t **self_p, gpp_err_t *err);
/* Unlinks the temp file (when not committed) and frees; accepts NULL. */
void gpp_atomic_file_destroy(gpp_atomic_file_t **self_p);

/* Arms the "afile.write" fault: writes fail after `bytes` bytes; -1 disarms. */
void gpp_atomic_file_fault_after(int64_t bytes);

#endif
