/* gpp_json: small helpers shared by every JSON and file reader/writer
 * (graph, profile, plan, checkpoints' sidecars). */
#ifndef GPP_JSON_H
#define GPP_JSON_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/gpp_err.h"

/* Reads a whole file (at most max_bytes). Caller owns the NUL-terminated
 * result (free()); NULL with a message on error. */
char *gpp_read_file(const char *path, size_t max_bytes, gpp_err_t *err);

/* Parses JSON; on error the message names origin:line:col. Caller owns the
 * result (cJSON_Delete). */
cJSON *gpp_json_parse(const char *text, const char *origin, gpp_err_t *err);

/* Writes data to path atomically (temp file in the same directory, fsync,
 * rename): an existing file is either untouched or fully replaced. */
int gpp_write_file_atomic(const char *path, const void *data, size_t len, gpp_err_t *err);

#endif
