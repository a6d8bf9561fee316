/* gpp_ckpt: checkpoints of an executor's parameters and optimizer state.
 *
 * File format, version 1, little-endian, no padding:
 *   char magic[8] = "GPPCKPT\0"; u32 version = 1;
 *   u32 optimizer (gpp_optim_kind_t); u64 steps (optimizer steps taken);
 *   u32 spec_len; char spec[spec_len] (the model's canonical spec);
 *   u32 n_tensors; then per tensor:
 *     u32 name_len; char name[name_len] ("<op>.<param>", see gpp_exec.h);
 *     u32 role (0 the value, 1 + k optimizer state buffer k);
 *     i64 rows; i64 cols; f32 data[rows x cols]
 *   u32 crc: CRC-32 of every byte before it.
 * A checkpoint holds one executor's (stage's) tensors; a stage loads from a
 * file holding a superset (e.g. a whole-model checkpoint) of the same model.
 *
 * Every number goes through gpp_codec, the CRC is zlib's crc32, and the
 * executor's state through gpp_exec_params_foreach.
 *
 * Saving streams through gpp_atomic_file (temp file + fsync + rename): an existing
 * file is untouched when the save fails. Loading first checks the whole file
 * in one read (magic, version, every count, length and shape against the
 * file's size, a step count of at most GPP_CKPT_MAX_STEPS, every value finite
 * (a NaN or Inf is refused naming the tensor), the CRC), then the model
 * spec, optimizer and every tensor's presence and shape, and only then
 * changes the executor: on any of those errors the executor is unchanged
 * (only a read error in the final copy, i.e. the file changing underneath,
 * could leave it partly loaded).
 *
 * Both synchronise the executor's stream; call them between iterations. */
#ifndef GPP_CKPT_H
#define GPP_CKPT_H

#include "agent/exec/gpp_exec.h"
#include "common/gpp_err.h"
#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_sha256.h"

/* GPP_CKPT_MAGIC, GPP_CKPT_VERSION: gpp_ckpt_set.h (its header reader
 * needs them without the executor) */
/* More optimizer steps than any run takes (2^40): a larger count in a file
 * is corruption, and would overflow sample indices (step x batch). */
#define GPP_CKPT_MAX_STEPS ((uint64_t)1 << 40)

int gpp_ckpt_save(gpp_exec_t *ex, const char *path, gpp_err_t *err);
int gpp_ckpt_load(gpp_exec_t *ex, const char *path, gpp_err_t *err);

/* Loads the executor from several files of one checkpoint (the stage files
 * of a set, written by any plan: tensors are keyed by op, "<op>.<param>"),
 * each tensor from the first file that holds it. Every file's table of
 * tensors is read; every file the executor takes a tensor from (the first
 * file, for the step count of a stage without parameters) gets all of
 * gpp_ckpt_load's checks, and all of them must hold the same model,
 * optimizer and step count (a disagreement names both files). n_paths == 1
 * is gpp_ckpt_load. The executor is unchanged on any of those errors. */
int gpp_ckpt_load_files(gpp_exec_t *ex, const char *const *paths, int n_paths, gpp_err_t *err);

/* ---- the weights digest (docs/checkpoints.md) ----
 * An op's digest: SHA-256 of its parameters' values (not the optimizer
 * state) in the op's parameter order, each rows x cols little-endian f32.
 * The weights digest: SHA-256 of (u32 little-endian op id, the op's
 * digest) for every op with parameters, in op id order. A stage yields
 * the digests of its own ops, so stages combine in any split: the whole
 * model in one executor and any plan's stages give the same digest for the
 * same values. */

/* Fills digests[op] (the graph's n_ops rows) and sets has[op] = 1 for every
 * op of the stage with parameters; other rows are untouched. Synchronises
 * the stream. */
int gpp_ckpt_op_digests(gpp_exec_t *ex, unsigned char (*digests)[GPP_SHA256_BYTES], int *has,
                        gpp_err_t *err);
/* The combination: gpp_ckpt_weights_digest in gpp_ckpt_set.h (no executor:
 * the coordinator combines the stages' digests). */

#endif
