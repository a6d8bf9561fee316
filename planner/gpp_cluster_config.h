/* gpp_cluster_config: the planner's cluster (planner/gpp_cost.h) of a
 * cluster file (config/gpp_config.h), one function for gpp-coordinator and
 * gpp-plan --cluster, so that both plan the same job alike. Its own library
 * (gpp_cluster_config): the planner library does not read cluster files. */
#ifndef GPP_CLUSTER_CONFIG_H
#define GPP_CLUSTER_CONFIG_H

#include "common/gpp_err.h"
#include "config/gpp_config.h"
#include "planner/gpp_cost.h"

/* Fills cl for n devices from cfg: the device preset, the nodes' slots
 * (the same on every node), [cluster] links and memory bound, the job's
 * optimizer, the load-ahead of a cuda job's agents, and, for local CPU
 * agents that outnumber this host's cores, their share of it. 0, or -1 and
 * a message naming the file. */
int gpp_cluster_from_config(const gpp_config_t *cfg, int n, gpp_cluster_t *cl, gpp_err_t *err);

#endif
