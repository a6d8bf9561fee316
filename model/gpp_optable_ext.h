/* gpp_optable_ext: the op table's shape, parameter and cost functions of
 * the op types that come from PyTorch modules (gpp_optable_ext.c); their
 * rows are in gpp_optable.c. Private to model/. */
#ifndef GPP_OPTABLE_EXT_H
#define GPP_OPTABLE_EXT_H

#include "model/gpp_optable.h"

extern const char *const gpp_embed_modes[];
extern const char *const gpp_table_updates[];
extern const char *const gpp_reduce_modes[];

int gpp_ext_embedding_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
int gpp_ext_embedding_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p);
void gpp_ext_embedding_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
int gpp_ext_param_add_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p);
void gpp_ext_param_add_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
int gpp_ext_reduce_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
void gpp_ext_reduce_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
void gpp_ext_act_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
int gpp_ext_dropout_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
void gpp_ext_dropout_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
int gpp_ext_matmul_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
void gpp_ext_matmul_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
int gpp_ext_transpose_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
void gpp_ext_copy_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
int gpp_ext_stack_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
int gpp_ext_triu_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
int gpp_ext_patch_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
int gpp_ext_patch_params(const gpp_graph_t *g, const gpp_op_t *op, gpp_param_t *p);
void gpp_ext_patch_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);
int gpp_ext_cross_shape(const gpp_graph_t *g, gpp_op_t *op, gpp_err_t *err);
void gpp_ext_cross_cost(const gpp_graph_t *g, const gpp_op_t *op, gpp_op_cost_t *c);

#endif
