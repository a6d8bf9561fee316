/* gpp_safetensors: a stage's trained weights in the safetensors format, the
 * file PyTorch users load in one line:
 *
 *     from safetensors.torch import load_file; w = load_file("w.safetensors")
 *
 * Format (https://huggingface.co/docs/safetensors, "Format"): u64 N
 * (little-endian), then N bytes of UTF-8 JSON, then the data. The JSON maps
 * each tensor name to {"dtype": "F32", "shape": [...], "data_offsets":
 * [begin, end]} (byte offsets into the data, which follows the header
 * directly; tensors in order, no gaps), plus "__metadata__" with string
 * values. gpp pads the header with spaces to a multiple of 8 bytes, as the
 * reference writer does, so every tensor is aligned.
 *
 * Names are the model's parameter names "<op name>.<param>" (gpp_optable:
 * weight, bias, gain, w_qkv, b_qkv, w_o, b_o, table). Matrices keep gpp's
 * [rows, cols] (a linear weight is [out_features, in_features], as
 * torch.nn.Linear's); the vectors (bias, gain, b_qkv, b_o: [1, n] in gpp)
 * are written 1-d [n], as torch holds them. Only values: optimizer state
 * stays in gpp's checkpoint. Metadata: "format": "pt", "gpp_spec": the
 * model spec, "gpp_steps": optimizer steps taken. */
#ifndef GPP_SAFETENSORS_H
#define GPP_SAFETENSORS_H

#include "agent/exec/gpp_exec.h"
#include "common/gpp_err.h"

/* Writes every parameter of ex's stage to path, atomically (an existing file
 * is untouched on failure). Between iterations only. 0, or -1 + message. */
int gpp_safetensors_save(gpp_exec_t *ex, const char *path, gpp_err_t *err);

#endif
