/* gpp_msg_profile: profile rows (model/gpp_profile.h) on the wire as
 * ProfileResult.ops (proto OpProfile): the one conversion each way. The
 * wire carries forward and backward ms; a row holds forward + backward and
 * forward. Memory figures travel with their *_set flags. */
#ifndef GPP_MSG_PROFILE_H
#define GPP_MSG_PROFILE_H

#include <stddef.h>

#include "model/gpp_profile.h"
#include "proto/gpp_msg.h"

/* rows[0..n) as messages: initializes msgs[i] and sets ptrs[i] = &msgs[i]
 * (caller's arrays of n, for ProfileResult.ops). Every row must have its
 * forward (asserted: the agents' profiler measures it). */
void gpp_msg_profile_pack(const gpp_profile_row_t *rows, size_t n, Gpp__OpProfile *msgs,
                          Gpp__OpProfile **ptrs);
/* The rows of a ProfileResult that passed gpp_msg_validate (ops >= 0, sizes
 * > 0, times finite and >= 0, figures not negative): [res->n_ops], caller
 * owns the result (free()); gpp_profile_check does the rest. */
gpp_profile_row_t *gpp_msg_profile_rows(const Gpp__ProfileResult *res);

#endif
