/* gpp_data_shape: a sample's layout (see gpp_data_shape.h). */
#include "agent/data/gpp_data_shape.h"

#include <assert.h>

#include "model/gpp_optable.h"

int gpp_data_shape_is_loss(const gpp_op_t *op)
{
    return gpp_optable[op->type].role == GPP_ROLE_LOSS;
}

void gpp_data_shape_label(const gpp_graph_t *g, int op, gpp_dtype_t *dtype, int64_t *rows,
                          int64_t *cols)
{
    const gpp_op_t *L = &g->ops[op];
    assert(gpp_data_shape_is_loss(L));
    const gpp_op_t *x = &g->ops[L->inputs[0]];
    *rows = x->rows;
    *dtype = L->type == GPP_OP_LOSS_CE ? GPP_DTYPE_I32 : GPP_DTYPE_F32;
    *cols = L->type == GPP_OP_LOSS_CE ? 1 : x->cols;
}

int64_t gpp_data_shape_bytes(const gpp_graph_t *g, int op)
{
    gpp_dtype_t dt;
    int64_t r = g->ops[op].rows, c = g->ops[op].cols;
    if (gpp_data_shape_is_loss(&g->ops[op]))
        gpp_data_shape_label(g, op, &dt, &r, &c);
    else if (g->ops[op].type != GPP_OP_INPUT)
        return 0;
    return r * c * 4;
}
