/* gpp_config: cluster.toml -> one C struct (STYLE rule 11).
 *
 * gpp_config_load() parses the file with toml++ (through gpp_toml_shim),
 * starts from the defaults (docs/config.md), applies every key
 * (unknown keys and sections are errors: typos must not pass silently),
 * checks ranges and cross-field rules, then applies the environment
 * overrides (GPP_HEARTBEAT_MS, ... listed in docs/config.md), each read once
 * and logged at info level. Errors read
 *   "cluster.toml:12:9: job.batch: expected a positive integer, got -4".
 *
 * Units are in the field names. Every field is documented in docs/config.md. */
#ifndef GPP_CONFIG_H
#define GPP_CONFIG_H

#include <stdint.h>

#include "common/gpp_device_kind.h"
#include "common/gpp_err.h"
#include "common/gpp_optim_kind.h"
#include "common/gpp_precision.h"

#define GPP_CONFIG_STR 256   /* bytes incl. NUL: hosts, endpoints, presets */
#define GPP_CONFIG_PATH 1024 /* bytes incl. NUL: file and directory paths */
#define GPP_CONFIG_MAX_NODES 4096

/* Launch mode: local = the coordinator forks one agent per slot on this host;
 * external = agents are started elsewhere (systemd, Slurm) and register. */
typedef enum { GPP_CONFIG_LAUNCH_LOCAL = 0, GPP_CONFIG_LAUNCH_EXTERNAL } gpp_config_launch_t;
/* The agents' data plane: Gloo (host memory, any placement) or NCCL (device
 * memory; every agent a GPU of its own). */
typedef enum { GPP_CONFIG_COMM_GLOO = 0, GPP_CONFIG_COMM_NCCL } gpp_config_comm_t;

typedef struct {
    char host[GPP_CONFIG_STR]; /* hostname or address agents on it report */
    int slots;                 /* GPUs (cuda) or CPU agent slots (cpu) on it */
    int gpus;                  /* cuda, local launch: GPUs the slots share, slot s runs on
                                  GPU s % gpus; 0 = one GPU per slot (GPU = slot) */
} gpp_config_node_t;

typedef struct {
    char path[GPP_CONFIG_PATH]; /* the file this came from ("" for defaults) */

    struct {
        char endpoint[GPP_CONFIG_STR]; /* ZeroMQ endpoint, "tcp://127.0.0.1:5555" */
        char key_dir[GPP_CONFIG_PATH]; /* CURVE keys of external agents (gpp-coordinator
                                          --keygen); "" = none */
        int insecure_plaintext;        /* 1: external agents without key_dir are allowed
                                          (plaintext control plane); 0: that is an error */
    } coordinator;

    struct {
        char device[GPP_CONFIG_STR];   /* preset: v100-16g v100-32g a100-80g h100-80g cpu */
        char profile[GPP_CONFIG_PATH]; /* profile.json; "" = roofline of the preset */
        double mem_gib;                /* memory per device; 0 = the preset's */
        double intra_gbps;             /* intra-node link GB/s; 0 = planner default */
        double inter_gbps;             /* inter-node link GB/s; 0 = planner default */
        double intra_latency_us;       /* 0 = planner default */
        double inter_latency_us;       /* 0 = planner default */
    } cluster;

    int n_nodes;              /* >= 1 */
    gpp_config_node_t *nodes; /* [n_nodes], owned by the config */

    struct {
        char model[GPP_CONFIG_PATH]; /* zoo spec "mmt:branches=2,..." or graph JSON path */
        int batch;                   /* mini-batch samples per iteration */
        int iterations;
        gpp_optim_kind_t optimizer;
        double lr;
        double momentum; /* sgd */
        double weight_decay;
        double beta1, beta2; /* adamw */
        double eps;          /* adamw */
        uint64_t seed;
        char planner[8];                      /* "gpp" | "spp" */
        char schedule[8];                     /* "auto" | "1f1b" | "zb-h1" | "zb-h2" */
        int micro_batch;                      /* 0 = planner sweeps it */
        char checkpoint_dir[GPP_CONFIG_PATH]; /* "" = no checkpoints */
        char data[GPP_CONFIG_PATH];           /* dataset (gpp_data_open): a directory of
                                                 <op>.npy, "op=FILE.npy,...", or a gpp
                                                 dataset file; "" = synthetic */
        int checkpoint_interval;              /* iterations; 0 = none */
        int checkpoint_keep;                  /* complete sets kept, >= 1 */
        gpp_config_launch_t launch;
        gpp_device_kind_t backend;
        gpp_precision_t precision; /* cuda matrix products: fp32 | tf32 | bf16 */
        gpp_config_comm_t comm;    /* gloo | nccl (cuda only) */
        int cuda_graphs;           /* cuda: each stage records its passes as CUDA
                                      graphs and replays them (1); 0 off, the
                                      default (never run on a GPU yet); cpu: ignored */
        int bf16_tensors;          /* cuda at precision bf16: activations and their
                                      gradients kept and sent in bf16 (1); 0 fp32,
                                      the default (never run on a GPU yet) */
    } job;

    struct {
        int heartbeat_ms; /* interval between heartbeats, both ways */
        int timeout_ms;   /* silence after which a peer is declared dead */
    } health;

    struct {
        char file[GPP_CONFIG_PATH]; /* per-iteration metrics JSON lines; "" = none */
        int http_port;              /* Prometheus /metrics; 0 = off */
        int http_linger_ms;         /* /metrics served this long after the job ended */
    } metrics;
} gpp_config_t;

/* Loads path into *c (defaults, file, checks, environment). Returns 0, or -1
 * with "PATH:LINE:COL: section.key: problem; fix" in err, leaving *c
 * released. Release with gpp_config_release(). */
int gpp_config_load(gpp_config_t *c, const char *path, gpp_err_t *err);
/* Same for TOML text in memory; `name` stands for the path in messages.
 * Environment overrides apply as in gpp_config_load(). */
int gpp_config_load_string(gpp_config_t *c, const char *text, const char *name, gpp_err_t *err);

/* Frees what *c owns (the nodes array); *c can be loaded again. */
void gpp_config_release(gpp_config_t *c);

/* Total slots over all nodes: the planner's device count. */
int gpp_config_devices(const gpp_config_t *c);

/* The GPU index of slot `slot` of node `node` (gpus: slot % gpus, else slot). */
int gpp_config_slot_gpu(const gpp_config_t *c, int node, int slot);

/* "local" / "external" (backend, precision, optimizer: the common/ enums'
 * _name functions). */
const char *gpp_config_launch_name(gpp_config_launch_t l);
/* 1 when the job's agents keep bf16 tensors: job.bf16_tensors on a cuda
 * job at precision bf16 (the setting is ignored elsewhere) */
int gpp_config_bf16_tensors(const gpp_config_t *c);
const char *gpp_config_comm_name(gpp_config_comm_t c);

#endif
