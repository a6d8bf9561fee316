/* gpp_optim: optimizer state and steps (SGD with momentum, AdamW).
 *
 * One gpp_optim_state_t per parameter tensor holds that parameter's state
 * buffers in device memory of the backend, zero at creation:
 *   SGD:   buffer 0 = momentum v (unused while momentum is 0)
 *   AdamW: buffer 0 = first moment m, buffer 1 = second moment v
 * The checkpoint saves and restores them through gpp_optim_state_buf.
 *
 * Update rules (g the gradient, p the parameter, t the 1-based step):
 *   SGD (PyTorch semantics, dampening 0, not Nesterov):
 *       g' = g + weight_decay p;  v = momentum v + g';  p -= lr v
 *       (with momentum 0: p -= lr g')
 *   AdamW (decoupled weight decay, bias-corrected):
 *       p -= lr weight_decay p
 *       m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
 *       p -= lr (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
 *
 * Sparse gradients (embedding tables, gpp_sparse.h):
 *   SGD is exact: the step equals the dense step with zero gradient in the
 *       untouched rows. With momentum or weight decay every row moves, so
 *       that step is dense over the table (O(table)); without either only
 *       the touched rows are visited.
 *   AdamW is LAZY (like PyTorch's SparseAdam): only touched rows update m, v
 *       and the parameter (weight decay included); untouched rows keep their
 *       state and value. Bias correction uses the global step t. This differs
 *       from dense AdamW for rows without gradient in a step, by design: it
 *       keeps a step O(touched rows) for million-row tables.
 *
 * Ownership: gpp_optim_state_new returns an object the caller owns. */
#ifndef GPP_OPTIM_H
#define GPP_OPTIM_H

#include <stdint.h>

#include "common/gpp_err.h"
#include "common/gpp_optim_kind.h"
#include "kernels/gpp_backend.h"
#include "kernels/gpp_sparse.h"

typedef struct {
    gpp_optim_kind_t kind;
    float lr;
    float weight_decay; /* SGD: L2 term added to the gradient; AdamW: decoupled */
    float momentum;     /* SGD */
    float beta1, beta2; /* AdamW (0.9, 0.999 usual) */
    float eps;          /* AdamW (1e-8 usual) */
} gpp_optim_hp_t;

typedef struct gpp_optim_state_s gpp_optim_state_t;

/* State for a parameter of `numel` elements, zeroed on `s`. Caller owns the
 * result; NULL + message when out of memory. */
gpp_optim_state_t *gpp_optim_state_new(gpp_stream_t *s, gpp_optim_kind_t kind, int64_t numel,
                                       gpp_err_t *err);
/* Accepts NULL; the caller must have synchronised the streams using it. */
void gpp_optim_state_destroy(gpp_optim_state_t **self_p);
gpp_optim_kind_t gpp_optim_state_kind(const gpp_optim_state_t *self);
int64_t gpp_optim_state_numel(const gpp_optim_state_t *self);
/* Number of state buffers (SGD 1, AdamW 2) and buffer i (device memory of
 * numel floats, owned by the state). */
int gpp_optim_state_nbufs(const gpp_optim_state_t *self);
float *gpp_optim_state_buf(gpp_optim_state_t *self, int i);

/* Dense step: param and grad have the state's numel (any shape). step >= 1. */
int gpp_optim_step(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp, int64_t step,
                   gpp_tensor_t *param, const gpp_tensor_t *grad, gpp_err_t *err);
/* Sparse step for a table [1, table_rows, dim] (rules above). The gradient
 * is not cleared. */
int gpp_optim_step_sparse(gpp_stream_t *s, gpp_optim_state_t *st, const gpp_optim_hp_t *hp,
                          int64_t step, gpp_tensor_t *table, const gpp_sparse_grad_t *grad,
                          gpp_err_t *err);

#endif
