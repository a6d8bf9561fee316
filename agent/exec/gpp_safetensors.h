/* gpp_safetensors: a stage's trained weights as a safetensors file, the one
 * PyTorch loads with safetensors.torch.load_file (format:
 * https://huggingface.co/docs/safetensors; header padded to 8 bytes).
 * Tensors are the parameters' values by name "<op name>.<param>", F32,
 * matrices [rows, cols] (a linear weight [out, in], as torch's), vectors
 * 1-d; metadata "format": "pt", "gpp_spec", "gpp_steps". Optimizer state
 * stays in the checkpoint. */
#ifndef GPP_SAFETENSORS_H
#define GPP_SAFETENSORS_H

#include "agent/exec/gpp_exec.h"
#include "common/gpp_err.h"

/* Writes every parameter of ex's stage to path, atomically (an existing file
 * is untouched on failure). Between iterations only. 0, or -1 + message. */
int gpp_safetensors_save(gpp_exec_t *ex, const char *path, gpp_err_t *err);

#endif
