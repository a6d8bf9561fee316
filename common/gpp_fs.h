/* gpp_fs: file-system helpers shared by the coordinator and the agents. */
#ifndef GPP_FS_H
#define GPP_FS_H

#include <sys/types.h>

#include "common/gpp_err.h"

/* Creates directory path and its missing parents, as mkdir -p, each new one
 * with mode (before the umask; 0700 for run and checkpoint directories)
 * and made durable (fsync of the directory that holds it).
 * Directories that exist already are fine. Returns 0, or -1 with
 * "mkdir <the component>: <strerror>" in err when one cannot be made (no
 * permission, a file in the way, a path longer than PATH_MAX). */
int gpp_mkdirs(const char *path, mode_t mode, gpp_err_t *err);

/* A line-oriented log (the metrics file): opened for appending, 0600,
 * close-on-exec, never through a symbolic link; truncate empties it first.
 * The descriptor, or -1 with errno set. */
int gpp_append_open(const char *path, int truncate);
/* Appends len bytes (whole lines) to fd (from gpp_append_open): all of
 * them, or none: when the write fails part way (a full disk) what reached
 * the file is cut off again, so the file never ends in half a line.
 * Returns 0, or -1 with errno set to the write's error. */
int gpp_append_whole(int fd, const char *buf, size_t len);

#endif
