/* gpp_onnx: imports an ONNX model (an inference graph, as torch.onnx.export
 * writes it) as a gpp graph whose initial weights are the file's
 * initializers. docs/graph-format.md, "ONNX", lists the op patterns it maps
 * and the errors.
 *
 * A model spec names the file and, since an inference graph has no loss,
 * the loss put at each graph output:
 *
 *     [onnx:]FILE.onnx[:loss=mse|ce|bce]      (default loss: mse)
 *
 * The file is decoded with protobuf-c from the onnx.proto that Debian's
 * libonnx-dev installs, after a pre-scan that refuses messages nested
 * deeper than protobuf's own limit (gpp_onnx_wire.h). Every error names
 * the file and the node,
 * tensor or value at fault and says what gpp accepts instead. */
#ifndef GPP_ONNX_H
#define GPP_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"
#include "model/gpp_graph.h"

typedef enum { GPP_ONNX_LOSS_MSE = 0, GPP_ONNX_LOSS_CE = 1, GPP_ONNX_LOSS_BCE = 2 } gpp_onnx_loss_t;

/* Largest ONNX file read (protobuf's own 2 GiB message limit). */
#define GPP_ONNX_MAX_BYTES ((size_t)2 << 30)

/* 1 when spec names an ONNX model (an "onnx:" prefix, or a path ending in
 * ".onnx" optionally followed by ":loss=..."). */
int gpp_onnx_is_spec(const char *spec);

/* The model spec `spec` with the loss a --loss flag names (NULL: none
 * given; spec is copied): "FILE.onnx" + "ce" -> "FILE.onnx:loss=ce". A loss
 * for a model that is not ONNX, or other than mse|ce|bce: -1 + message. */
int gpp_onnx_spec_loss(const char *spec, const char *loss, char *out, size_t cap, gpp_err_t *err);

/* Reads the model a spec names. Caller owns the (not yet finalized) graph;
 * its init_weights hold the initializers. NULL + message naming the place. */
gpp_graph_t *gpp_onnx_load_spec(const char *spec, gpp_err_t *err);

/* Decodes an ONNX file's bytes; origin names it in messages. */
gpp_graph_t *gpp_onnx_parse(const uint8_t *buf, size_t len, const char *origin,
                            gpp_onnx_loss_t loss, gpp_err_t *err);

#endif
