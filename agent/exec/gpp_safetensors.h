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
 * Names and shapes are torch's state_dict keys and layouts
 * (gpp_op_param_torch, docs/graph-format.md "Name mapping"): a linear's
 * "<op>.weight" [out, in] and "<op>.bias" [out], a layer norm's
 * "<op>.weight" / "<op>.bias", attention's "<op>.in_proj_weight",
 * "<op>.in_proj_bias", "<op>.out_proj.weight", "<op>.out_proj.bias", an
 * embedding's "<op>.weight", so that a module whose ops gpp named after its
 * modules (scripts/gpp-export) loads them with load_state_dict(strict=True). Only values: optimizer
 * state stays in gpp's checkpoint. Metadata: "format": "pt", "gpp_spec": the model spec,
 * "gpp_steps": optimizer steps taken. */
#ifndef GPP_SAFETENSORS_H
#define GPP_SAFETENSORS_H

#include "agent/exec/gpp_exec.h"
#include "common/gpp_err.h"

/* Writes every parameter of ex's stage to path, atomically (an existing file
 * is untouched on failure). Between iterations only. 0, or -1 + message. */
int gpp_safetensors_save(gpp_exec_t *ex, const char *path, gpp_err_t *err);

#endif
