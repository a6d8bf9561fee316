/* gpp_registry: the coordinator's table of agents, known up front: one per
 * (host, slot) of cluster.toml, rank = the file's order. Register is
 * matched to its slot (unknown and duplicate slots refused with a reason);
 * the table keeps each peer's routing identity, liveness and progress.
 * Dead or departed agents stay (marked), so late messages naming them can
 * be reported.
 *
 * Ownership: gpp_registry_new returns an object the caller owns; agent
 * pointers are the registry's, valid until it is destroyed. */
#ifndef GPP_REGISTRY_H
#define GPP_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_time.h"
#include "proto/gpp_msg.h"

#define GPP_REG_HOST_MAX 256
#define GPP_REG_ID_MAX 256 /* ZeroMQ routing ids are at most 255 bytes */

typedef enum {
    GPP_AGENT_EXPECTED = 0, /* not registered yet */
    GPP_AGENT_ALIVE,        /* registered, heard from within the timeout */
    GPP_AGENT_DEAD,         /* silent past the timeout or exited unexpectedly */
    GPP_AGENT_EXITED        /* left after Shutdown/Abort */
} gpp_agent_state_t;

typedef struct {
    int rank; /* index in cluster.toml order */
    char host[GPP_REG_HOST_MAX];
    int slot;
    gpp_agent_state_t state;
    uint8_t id[GPP_REG_ID_MAX]; /* ROUTER routing identity */
    size_t id_len;
    int pid; /* as the agent reported it */
    int64_t mem_bytes;
    int backend;             /* Gpp__Backend it registered with (its device: backend + slot) */
    int gpu;                 /* CUDA: its GPU index on the host; -1 CPU */
    char device_name[256];   /* "NVIDIA H100 80GB HBM3", "cpu" */
    int64_t mem_total_bytes; /* device (CPU: host) memory it reported */
    int64_t mem_free_bytes;
    int sm_count;
    char device_error[512]; /* why it has no usable GPU, when it was asked for one */
    char build_version[64];
    double last_seen_ms;   /* gpp_now_ms of its last valid message */
    uint64_t last_seq;     /* its last sequence number */
    uint64_t sent_seq;     /* our last sequence number to it */
    int ready;             /* sent Ready for its assignment */
    int barrier;           /* last barrier id it entered, -1 none */
    int iteration;         /* last iteration it reported metrics for, -1 none */
    int launched_pid;      /* local launch: the child's pid, 0 else */
    gpp_clock_est_t clock; /* its CLOCK_MONOTONIC relative to ours, from heartbeat round
                              trips (agent time = ours + clock.offset_us) */
    uint64_t bad_clock;    /* round trips with impossible times, ignored */
    int clock_pings;       /* heartbeats sent to it that start a round trip */
    int exit_signal;       /* local launch: the signal that ended it once reaped, 0 none */
    int comm_reported;     /* it reported a broken data-plane connection (ERROR_COMM) */
} gpp_agent_t;

typedef struct gpp_registry_s gpp_registry_t;

/* n expected agents; hosts[i], slots[i] in rank order. Caller owns the result. */
gpp_registry_t *gpp_registry_new(int n, const char *const *hosts, const int *slots);
void gpp_registry_destroy(gpp_registry_t **self_p);

int gpp_registry_size(const gpp_registry_t *self);
gpp_agent_t *gpp_registry_agent(gpp_registry_t *self, int rank);

/* Registers a validated Register from routing identity id. Returns the
 * agent, or NULL with the reason in err (slot not in the cluster file,
 * slot already taken, identity already registered). */
gpp_agent_t *gpp_registry_register(gpp_registry_t *self, const Gpp__Register *r, const void *id,
                                   size_t id_len, double now_ms, gpp_err_t *err);

/* The registered agent with this routing identity, or NULL. */
gpp_agent_t *gpp_registry_find(gpp_registry_t *self, const void *id, size_t id_len);
/* The agent that the local launcher started as pid, or NULL. */
gpp_agent_t *gpp_registry_find_pid(gpp_registry_t *self, int pid);

/* Agents in the given state. */
int gpp_registry_count(const gpp_registry_t *self, gpp_agent_state_t state);

/* Writes "host:slot, host:slot, ..." of the agents in `state` (at most
 * `max_list` named, then "and N more") into buf. */
void gpp_registry_list(const gpp_registry_t *self, gpp_agent_state_t state, int max_list, char *buf,
                       size_t len);

/* "host:slot (rank R, pid P)" for messages. */
const char *gpp_agent_name(const gpp_agent_t *a, char *buf, size_t len);

#endif
