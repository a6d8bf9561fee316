/* gpp_control: the agent's control-plane client (a DEALER socket to the
 * coordinator's ROUTER), driven by the agent's one zloop.
 *
 * gpp_control_new() connects, sends Register and arms the heartbeat timer.
 * Every frame from the coordinator is decoded and validated (gpp_msg) and
 * cross-checked against this agent (sender is the coordinator, a
 * RegisterAck/Assignment is for our slot and rank, barrier ids increase);
 * frames that fail are dropped with a logged reason and counted. Heartbeats
 * are answered internally: an agent sends one every heartbeat_ms once
 * registered, and declares the coordinator lost when nothing valid arrived
 * for timeout_ms. Every other valid message goes to on_message.
 *
 * Sends never block: a full queue (coordinator gone) drops the message with
 * a logged reason. Receives never block either (a reader called after the
 * heartbeat timer drained the socket finds nothing and returns).
 *
 * Ownership: gpp_control_new returns an object the caller owns; it borrows
 * the zloop, which must outlive it. */
#ifndef GPP_CONTROL_H
#define GPP_CONTROL_H

#include <czmq.h>
#include <stdint.h>

#include "common/gpp_err.h"
#include "proto/gpp_msg.h"

typedef struct gpp_control_s gpp_control_t;

/* The device an agent trains on, as Register reports it (agent/gpp_device.h
 * fills it). */
typedef struct {
    int gpu;                 /* CUDA: GPU index in this process; CPU: -1 */
    char name[256];          /* "NVIDIA H100 80GB HBM3"; CPU: "cpu" */
    int64_t mem_total_bytes; /* device (CPU: host) memory, > 0 */
    int64_t mem_free_bytes;  /* free when probed */
    int sm_count;            /* CUDA: multiprocessors; CPU: 0 */
    char error[512];         /* a GPU was asked for but none is usable: why; else "" */
} gpp_control_device_t;

typedef struct {
    const char *endpoint;  /* coordinator ROUTER, e.g. "tcp://127.0.0.1:5555" */
    const char *host;      /* this node's name as cluster.toml spells it */
    int slot;              /* CPU slot or GPU index on the node, >= 0 */
    int backend;           /* Gpp__Backend */
    const gpp_control_device_t *device; /* reported in Register; copied */
    int64_t mem_bytes;     /* device memory usable by the stage, > 0 */
    const char *data_addr; /* data-plane address, may be NULL */
    int heartbeat_ms;      /* interval between our heartbeats, > 0 */
    int timeout_ms;        /* coordinator silent this long: lost, > heartbeat_ms */
    const char *keys_from; /* where this process's CURVE keys came from, for messages
                              ("--key-dir /etc/gpp/keys"); NULL: none given */
} gpp_control_cfg_t;

typedef struct {
    /* A validated message other than Heartbeat (RegisterAck, Reject,
     * Assignment, BarrierRelease, Abort, Shutdown, ProfileRequest, Error).
     * The handler takes ownership of *msg_p (sets it NULL or leaves it for
     * the caller to free: gpp_control frees whatever is left). Return -1 to
     * end the zloop. */
    int (*on_message)(gpp_control_t *ctl, gpp_msg_t **msg_p, void *arg);
    /* Nothing valid from the coordinator for silent_ms >= timeout_ms, or
     * (silent_ms < 0) the connection dropped after registration: the
     * registration ended with it, the socket is disconnected (never
     * reconnected to whatever binds the endpoint next) and nothing more is
     * sent. Called once. Return -1 to end the zloop. */
    int (*on_lost)(gpp_control_t *ctl, double silent_ms, void *arg);
} gpp_control_handlers_t;

/* Connects and sends Register. NULL with a message on failure. */
gpp_control_t *gpp_control_new(const gpp_control_cfg_t *cfg, zloop_t *loop,
                               const gpp_control_handlers_t *handlers, void *arg, gpp_err_t *err);
/* Unregisters from the loop, closes the socket (lingering up to 1 s so that
 * a last message goes out). Accepts NULL. */
void gpp_control_destroy(gpp_control_t **self_p);

/* Sends an already-encoded envelope (made by another thread of this agent
 * with any seq/sender): decodes it, re-stamps seq and sender, sends. */
int gpp_control_forward(gpp_control_t *self, const uint8_t *data, size_t len, gpp_err_t *err);

/* Convenience senders. */
int gpp_control_barrier_enter(gpp_control_t *self, int barrier_id, gpp_err_t *err);
int gpp_control_error(gpp_control_t *self, int code, const char *text, gpp_err_t *err);

/* Frames dropped because they failed decoding or cross-checks. */
uint64_t gpp_control_dropped(const gpp_control_t *self);

#endif
