/* gpp_safetensors: a stage's trained weights as a safetensors file
 * (https://huggingface.co/docs/safetensors; header padded to 8 bytes),
 * under torch's state_dict names and layouts (gpp_op_param_torch,
 * docs/graph-format.md "Name mapping"), so a module whose ops gpp named
 * after its modules (scripts/gpp-export) loads them with
 * load_state_dict(strict=True). F32 values only: optimizer state stays in
 * the checkpoint. Metadata "format": "pt", "gpp_spec", "gpp_steps". */
#ifndef GPP_SAFETENSORS_H
#define GPP_SAFETENSORS_H

#include "agent/exec/gpp_exec.h"
#include "common/gpp_err.h"

/* Writes every parameter of ex's stage to path, atomically (an existing file
 * is untouched on failure). Between iterations only. 0, or -1 + message. */
int gpp_safetensors_save(gpp_exec_t *ex, const char *path, gpp_err_t *err);

#endif
