/* gpp_data_shape: what one sample of a model's data is, for every data
 * source and its readers: an INPUT op's values ([rows, cols], f32 dense or
 * i32 indices) and a loss op's labels (MSE: f32 [rows, cols of its input];
 * CE: i32 [rows, 1] classes). */
#ifndef GPP_DATA_SHAPE_H
#define GPP_DATA_SHAPE_H

#include <stdint.h>

#include "kernels/gpp_backend.h"
#include "model/gpp_graph.h"

/* Per-sample label layout of loss op `op`. */
void gpp_data_shape_label(const gpp_graph_t *g, int op, gpp_dtype_t *dtype, int64_t *rows,
                          int64_t *cols);
/* Bytes of one sample of op's data (an INPUT op's values, a loss op's
 * labels); 0 for any other op. */
int64_t gpp_data_shape_bytes(const gpp_graph_t *g, int op);
/* 1 for a loss op (MSE or CE): one with labels. */
int gpp_data_shape_is_loss(const gpp_op_t *op);

#endif
