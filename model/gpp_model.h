/* gpp_model: the model a job names, as both daemons build it.
 *
 * A job's model is a zoo spec ("mmt:branches=2,layers=2") or the path of a
 * gpp-graph/1 JSON file (ends in ".json") or an ONNX model
 * ("[onnx:]FILE.onnx[:loss=mse|ce]", gpp_onnx.h; its initializers ride along
 * as the graph's init_weights). The coordinator plans on the
 * graph and each agent instantiates its stage from the same string, so both
 * go through this one function. */
#ifndef GPP_MODEL_H
#define GPP_MODEL_H

#include "common/gpp_err.h"
#include "model/gpp_graph.h"

/* Builds and finalizes the graph. Caller owns the result; NULL with the
 * zoo's or the JSON reader's message. */
gpp_graph_t *gpp_model_load(const char *spec, gpp_err_t *err);

#endif
