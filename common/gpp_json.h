/* gpp_json: small helpers shared by every JSON and file reader/writer
 * (graph, profile, plan, checkpoints' sidecars). */
#ifndef GPP_JSON_H
#define GPP_JSON_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/gpp_atomic_file.h" /* gpp_write_file_atomic */
#include "common/gpp_err.h"

/* Reads a whole file (at most max_bytes). Caller owns the NUL-terminated
 * result (free()); NULL with a message on error. */
char *gpp_read_file(const char *path, size_t max_bytes, gpp_err_t *err);

/* Parses JSON; on error the message names origin:line:col. Caller owns the
 * result (cJSON_Delete). */
cJSON *gpp_json_parse(const char *text, const char *origin, gpp_err_t *err);

#endif
