/* gpp_cluster_config: a cluster file's planner cluster (see the header). */
#include "planner/gpp_cluster_config.h"

#include <string.h>
#include <unistd.h>

#include "model/gpp_optable.h"

int gpp_cluster_from_config(const gpp_config_t *cfg, int n, gpp_cluster_t *cl, gpp_err_t *err)
{
    int gpn = cfg->nodes[0].slots;
    for (int i = 1; i < cfg->n_nodes; i++)
        if (cfg->nodes[i].slots != gpn)
            return gpp_err_set(err,
                               "%s: nodes have %d and %d slots; the planner needs the same "
                               "number of devices on every node",
                               cfg->path, gpn, cfg->nodes[i].slots);
    if (gpp_cluster_init(cl, cfg->cluster.device, n, gpn, err) < 0)
        return gpp_err_prefix(err, "%s: cluster.device", cfg->path);
    /* a cuda job's products run at its precision: the roofline's peak */
    if (cfg->job.backend == GPP_DEVICE_CUDA &&
        gpp_cluster_set_precision(cl, cfg->cluster.device, cfg->job.precision,
                                  gpp_config_bf16_tensors(cfg), err) < 0)
        return gpp_err_prefix(err, "%s: job.precision", cfg->path);
    if (strcmp(cfg->cluster.device, "cpu") == 0 && cfg->job.launch == GPP_CONFIG_LAUNCH_LOCAL) {
        /* local CPU agents share this host's cores (the launcher gives each
           max(1, cores / agents) threads): with more agents than cores each
           gets cores / agents of its device */
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (cores > 0 && cores < gpn)
            cl->compute_share = (double)cores / gpn;
    }
    /* the run's optimizer: its state is part of every stage's memory */
    cl->optim_bufs =
        cfg->job.optimizer == GPP_OPTIM_SGD ? GPP_OPTIM_BUFS_SGD : GPP_OPTIM_BUFS_ADAMW;
    /* cuda agents' executors load ahead (their default on a device) */
    cl->load_ahead = cfg->job.backend == GPP_DEVICE_CUDA;
    /* and, where the job turns them on, replay their passes as CUDA
       graphs (the pool then keeps the most blocks of each size) */
    cl->graphs = cfg->job.backend == GPP_DEVICE_CUDA && cfg->job.cuda_graphs;
    /* and round their blocks to the caching allocator's classes */
    cl->alloc_rule = cfg->job.backend == GPP_DEVICE_CUDA ? GPP_ALLOC_CLASSES : GPP_ALLOC_ALIGN64;
    if (cfg->cluster.mem_gib > 0) {
        cl->mem_bound_bytes = (int64_t)(cfg->cluster.mem_gib * 1073741824.0);
        if (cl->device.mem_bytes < cl->mem_bound_bytes)
            cl->device.mem_bytes = cl->mem_bound_bytes;
    }
    if (cfg->cluster.intra_gbps > 0)
        cl->intra.bw_bytes_per_s = cfg->cluster.intra_gbps * 1e9;
    if (cfg->cluster.inter_gbps > 0)
        cl->inter.bw_bytes_per_s = cfg->cluster.inter_gbps * 1e9;
    if (cfg->cluster.intra_latency_us > 0)
        cl->intra.alpha_ms = cfg->cluster.intra_latency_us / 1000.0;
    if (cfg->cluster.inter_latency_us > 0)
        cl->inter.alpha_ms = cfg->cluster.inter_latency_us / 1000.0;
    return 0;
}
