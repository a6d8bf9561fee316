/* gpp_exec_ckpt: an executor's parameters and optimizer state to and from
 * stage checkpoint files (ckpt/gpp_ckpt.h: the format), and the weights
 * digest of its parameters (docs/checkpoints.md).
 *
 * A file holds one executor's (stage's) tensors, each keyed by name
 * ("<op>.<param>") and role; a stage loads from files holding a superset
 * (a whole-model checkpoint, or the stage files of a set written by any
 * plan). Loading checks every file it takes a tensor from in full, and the
 * model spec, optimizer, step count and every tensor's presence and shape,
 * before it changes the executor: on any of those errors the executor is
 * unchanged (only a read error in the final copy, the file changing
 * underneath, could leave it partly loaded).
 *
 * All of them synchronise the executor's stream; call them between
 * iterations. */
#ifndef GPP_EXEC_CKPT_H
#define GPP_EXEC_CKPT_H

#include "agent/exec/gpp_exec.h"
#include "common/gpp_err.h"
#include "common/gpp_sha256.h"

/* Saves the executor to path atomically (the previous file stays on
 * failure). */
int gpp_exec_ckpt_save(gpp_exec_t *ex, const char *path, gpp_err_t *err);
int gpp_exec_ckpt_load(gpp_exec_t *ex, const char *path, gpp_err_t *err);
/* Loads from several files of one checkpoint, each tensor from the first
 * file that holds it; all files taken from must agree on model, optimizer
 * and step count (a disagreement names both). n_paths 1 is _load. */
int gpp_exec_ckpt_load_files(gpp_exec_t *ex, const char *const *paths, int n_paths,
                             gpp_err_t *err);

/* An op's digest: SHA-256 of its parameters' values (not the optimizer
 * state) in parameter order, each rows x cols little-endian f32. Fills
 * digests[op] (the graph's n_ops rows) and sets has[op] = 1 for every op
 * of the stage with parameters; other rows are untouched. The stages'
 * digests combine in any split (gpp_ckpt_weights_digest). */
int gpp_exec_ckpt_op_digests(gpp_exec_t *ex, unsigned char (*digests)[GPP_SHA256_BYTES], int *has,
                             gpp_err_t *err);

#endif
