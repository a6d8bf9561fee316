/* gpp_profile_graph: the graph a profile alone describes (gpp-plan --profile
 * with the GraphPipe authors' profile.json): one GPP_OP_OPAQUE op per
 * profiled op, in topological order (smallest id first among ready ops).
 *
 * params = weight bytes / 4 (fp32); out_bytes = the largest input_size any
 * consumer declares for the op (what crosses a stage boundary), or the
 * op's own out_bytes figure when larger (a gpp profile's loss); stash_bytes
 * = out_bytes (each tensor once, at its owner, as the authors count);
 * io_bytes = 3 x (its inputs + out_bytes), weight_io_bytes = 3 x weight
 * bytes (the roofline of ops without a runtime). docs/planner.md. */
#ifndef GPP_PROFILE_GRAPH_H
#define GPP_PROFILE_GRAPH_H

#include "common/gpp_err.h"
#include "model/gpp_graph.h"
#include "model/gpp_profile.h"

/* The finalized graph of p (every op needs its weight bytes; inputs must
 * name ops of p, without a cycle); named after p's origin. Caller owns the
 * result; NULL with "ORIGIN: op ID (NAME): what" in err. */
gpp_graph_t *gpp_profile_graph(const gpp_profile_t *p, gpp_err_t *err);

#endif
