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

#endif
