/* gpp_ckpt_set: checkpoints as atomic sets (docs/checkpoints.md).
 *
 * One directory per checkpointed iteration count N (the state after N
 * iterations, N optimizer steps):
 *   <dir>/set-<N as 10 digits>/stage<S>.ckpt   one per stage (gpp_ckpt.h)
 *                              plan.json        the plan they belong to
 *                              profile.json     the profile it came from (if any)
 *                              MANIFEST.json    written last
 * A set is complete when its MANIFEST.json exists: {"format":
 * "gpp-ckpt-set/1", "iteration": N, "plan": {"file", "bytes", "crc32"},
 * "profile": {...} or null, "stages": [{"stage": S, "file", "bytes",
 * "crc32"}], and in the job's last set "weights_sha256"}, crc32 being the CRC-32 each stage file ends with (of every
 * byte before it) and the plain CRC-32 of plan and profile. The
 * coordinator commits a set (gpp_ckpt_set_commit) only once every stage
 * reported the iteration, i.e. after every stage file was made durable
 * (gpp_atomic_file: fsync of file and directory); the manifest goes through
 * the same writer, so a crash leaves a set complete or without a manifest.
 * A set without a manifest is incomplete and never loaded.
 */
#ifndef GPP_CKPT_SET_H
#define GPP_CKPT_SET_H

#include <stddef.h>
#include <stdint.h>

#include "ckpt/gpp_ckpt.h"
#include "common/gpp_err.h"

#define GPP_CKPT_SET_FORMAT "gpp-ckpt-set/1"
#define GPP_CKPT_MANIFEST "MANIFEST.json"

/* "<dir>/set-<N>", and a stage's file in it. */
void gpp_ckpt_set_dir(char *out, size_t len, const char *dir, int iteration);
void gpp_ckpt_set_stage_path(char *out, size_t len, const char *dir, int iteration, int stage);

/* Commits set `iteration` of n_stages stages: every stage file present and
 * ending in a CRC, <dir>/plan.json (required) and <dir>/profile.json
 * (when present) copied in, MANIFEST.json written atomically; then keeps
 * the newest `keep` (>= 1) complete sets and removes older sets, complete
 * or not. Returns 0, or -1 with a message naming the file (the set is then
 * left incomplete). */
int gpp_ckpt_set_commit(const char *dir, int iteration, int n_stages, int keep,
                        const char *weights_sha256, gpp_err_t *err);
/* weights_sha256 (gpp_ckpt_set_commit; NULL: none): the job's final
 * weights digest, recorded in the manifest of its last set, so that a
 * finished job's digest survives its coordinator. */

/* The weights digest set `iteration`'s manifest records, in hex[65]: 1,
 * 0 when it records none, -1 with a message when it cannot be read. */
int gpp_ckpt_set_digest(const char *dir, int iteration, char hex[65], gpp_err_t *err);

/* Checks set `iteration`: its manifest parses and names that iteration,
 * every file it lists has the size and CRC it records, and every stage
 * file's data has the CRC the file ends with (a full read). Returns the
 * number of stages, or -1 with a message naming the file (incomplete or
 * damaged). */
int gpp_ckpt_set_check(const char *dir, int iteration, gpp_err_t *err);

/* gpp_ckpt_set_check without the stage files' data reads (the agents check
 * every byte they load), and the paths of the set's stage files in manifest
 * order in *files (NULL-terminated; caller owns: gpp_ckpt_set_files_free).
 * A plan loads any set through them: a stage takes each of its ops'
 * tensors from whichever file holds it. */
int gpp_ckpt_set_files(const char *dir, int iteration, char ***files, gpp_err_t *err);
void gpp_ckpt_set_files_free(char ***files_p);

/* The header of a set's stage file (gpp_ckpt.h): enough for the
 * coordinator to refuse a set of another model or optimizer before any
 * agent starts. The agents check the whole file when they load it. */
int gpp_ckpt_set_header(const char *path, gpp_ckpt_header_t *h, gpp_err_t *err);

/* The newest complete set under dir whose every file verifies
 * (gpp_ckpt_set_check): its iteration count, 0 when there is none (also
 * when dir does not exist), -1 with a message when dir cannot be read.
 * Each newer set skipped is logged with the reason. */
int gpp_ckpt_set_latest(const char *dir, gpp_err_t *err);
/* from > 0: set `from` when it verifies (gpp_ckpt_set_check), else -1 with
 * the reason; from == 0: gpp_ckpt_set_latest. */
int gpp_ckpt_set_pick(const char *dir, int from, gpp_err_t *err);
/* Moves every set newer than `iteration` (complete, damaged or
 * incomplete) aside to <set>.superseded-<UTC time>, which no listing
 * reads and no pruning removes, so that a job resuming from `iteration`
 * never meets them. Returns how many, or -1 with a message. */
int gpp_ckpt_set_supersede(const char *dir, int iteration, gpp_err_t *err);

/* Removes the temp files a killed writer left (names with ".tmp." from
 * gpp_atomic_file) in dir and its set directories; the coordinator calls
 * it when a job starts. Returns how many, or -1 with a message. */
int gpp_ckpt_set_clean(const char *dir, gpp_err_t *err);

/* The weights digest from the stages' per-op digests
 * (agent/exec/gpp_exec_ckpt.h): SHA-256 of (u32 little-endian op id, digests[op]) for every
 * op with has[op], in op id order. */
void gpp_ckpt_weights_digest(int n_ops, const unsigned char (*digests)[32], const int *has,
                             unsigned char out[32]);

#endif
