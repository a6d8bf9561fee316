/* gpp_profile_io: profile.json, the one reader and the one writer of a
 * profile (model/gpp_profile.h) on disk.
 *
 * Schema: the GraphPipe authors' — an object keyed by op id, each entry
 * {"name", "inputs": [ids], "input_size": [bytes per sample of each input],
 * "weight_size": bytes, "runtime": {"<micro-batch>": fwd+bwd ms},
 * "reserved_mem"?: bytes or {"<micro-batch>": bytes}} — plus gpp's optional
 * fields: "forward" {"<micro-batch>": fwd ms} (the same sizes as runtime),
 * "kernel_stash", "out_bytes" (bytes per sample), "workspace" {"fixed",
 * "per_sample"} (bytes), and the GPP_PROFILE_META record. docs/planner.md
 * "Profiles" has the meaning of each. */
#ifndef GPP_PROFILE_IO_H
#define GPP_PROFILE_IO_H

#include "common/gpp_err.h"
#include "model/gpp_profile.h"

/* gpp's record of what was measured where, which readers of the authors'
 * schema skip: {"model", "device", "ops", "backend"?, "precision"?,
 * "bf16_tensors"?} (gpp_profile_meta_t). The record and each field may be
 * absent (the authors' files, older gpp). */
#define GPP_PROFILE_META "_gpp"
#define GPP_PROFILE_FILE_MAX_BYTES ((size_t)256 << 20)

/* Parses profile.json text; origin names it in messages and becomes the
 * profile's origin. Every field is validated (gpp_profile_check included);
 * a repeated op name becomes "name#id". Caller owns the result; NULL with
 * "ORIGIN: op ID (NAME): field 'x' ..." in err. */
gpp_profile_t *gpp_profile_io_parse(const char *text, const char *origin, gpp_err_t *err);
/* gpp_profile_io_parse of the file at path (at most
 * GPP_PROFILE_FILE_MAX_BYTES). */
gpp_profile_t *gpp_profile_io_read(const char *path, gpp_err_t *err);

/* p as profile.json text (the record when p->meta.present), times to 17
 * significant digits, so that the text parses back to the same doubles.
 * Caller owns the result (free()). */
char *gpp_profile_io_text(const gpp_profile_t *p);
/* gpp_profile_io_text written to path atomically. 0, or -1 with a message. */
int gpp_profile_io_write(const gpp_profile_t *p, const char *path, gpp_err_t *err);

#endif
