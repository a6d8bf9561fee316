/* gpp_comm_nccl: the NCCL comm backend (gpp_comm.h) and its host-side
 * bootstrap: ncclUniqueIds handed out through the coordinator's rendezvous.
 *
 * Buffers are device memory of opts.device (one GPU per rank: NCCL refuses
 * two ranks on one GPU; agents sharing a GPU use gloo with host staging,
 * gpp_staging.h). The world communicator and one communicator
 * per group (gpp_comm_group_new: a data-parallel group) are each initialised
 * from a unique id that the group's lowest rank draws (ncclGetUniqueId) and
 * publishes under "<prefix>/nccl/world" or "<prefix>/nccl/g/<r0>.<r1>...";
 * members fetch it and check its size. Initialisation is non-blocking
 * (ncclCommInitRankConfig, blocking = 0) and polled with
 * ncclCommGetAsyncError against the deadline and the abort flag.
 *
 * Point-to-point: isend/irecv are deferred and launched together by
 * gpp_comm_flush (or the first wait/test) inside ncclGroupStart/End on the
 * communication stream, after an event from the compute stream
 * (opts.compute_stream). NCCL has no tags: messages between two ranks match
 * in posting order, so both sides must post them in the same order (the
 * tag is kept only for messages). Send/recv to self is allowed.
 * wait/test poll a CUDA event, ncclCommGetAsyncError, the abort flag and the
 * deadline; on a timeout, an NCCL error or gpp_comm_abort the polling
 * thread calls ncclCommAbort on every communicator of the rank, so nothing
 * stays blocked inside NCCL. Collectives: all-reduce in place on device
 * memory; all-gather-v and barrier take host buffers (staged through a
 * device scratch buffer). Every NCCL failure is a gpp_err naming the call,
 * the rank and ncclGetErrorString.
 *
 * libnccl.so.2 (218 MB) is loaded with dlopen when the first NCCL comm
 * opens, not linked: every gpp program links gpp_comm, and linking NCCL
 * added about 15 ms and 2.7 MB to each start here (docs/gpu.md); loaded
 * lazily, a gloo-only agent starts where libnccl is absent. */
#ifndef GPP_COMM_NCCL_H
#define GPP_COMM_NCCL_H

#include <stddef.h>

#include "agent/comm/gpp_comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* NCCL_UNIQUE_ID_BYTES of nccl.h (2.x: 128); gpp_comm_nccl.c asserts it. */
#define GPP_NCCL_ID_BYTES 128

/* Joins the NCCL world communicator of opts->world_size ranks on GPU
 * opts->device. Takes opts->rdv (also on failure). Without CUDA in the build
 * or without a usable GPU: NULL and a message saying so. */
gpp_comm_t *gpp_comm_nccl_new(gpp_comm_opts_t *opts, gpp_err_t *err);

/* The host emulation's NCCL (tests/emu/gpp_nccl_emu.cc, docs/gpu.md
 * "The host emulation"): where a program defines this hook (only the
 * emulated builds of the GPU tests do), gpp_comm_nccl.c takes every NCCL
 * function from it by name instead of dlopen'ing libnccl. */
void *gpp_nccl_builtin_sym(const char *name) __attribute__((weak));

/* Loads libnccl.so.2 and resolves every entry point used (no GPU needed);
 * *version gets ncclGetVersion's code (e.g. 22805 for 2.28.5). */
int gpp_comm_nccl_load(int *version, gpp_err_t *err);

/* Connects every edge to the given peers before the first timed iteration
 * (NCCL connects lazily: a first send can take most of a second): one byte
 * each way per peer in one group. Each listed peer must call it with this
 * rank in its list, in the same order relative to its other peers (NCCL
 * matches by posting order). A peer may be this rank. Not an nccl comm: an
 * error. */
int gpp_comm_nccl_warmup(gpp_comm_t *comm, const int *peers, int n, gpp_err_t *err);

/* The rendezvous key of a unique id: "<prefix>/nccl/world" (ranks NULL) or
 * "<prefix>/nccl/g/<r0>.<r1>..." for a group. -1 when it does not fit. */
int gpp_nccl_id_key(char *out, size_t len, const char *prefix, const int *ranks, int n,
                    gpp_err_t *err);
/* Publishes a unique id of GPP_NCCL_ID_BYTES bytes under key. */
int gpp_nccl_id_publish(gpp_rdv_client_t *rdv, const char *key, const void *id, size_t len,
                        int timeout_ms, gpp_err_t *err);
/* Waits for key and copies its value into id (GPP_NCCL_ID_BYTES bytes); a
 * value of another size is an error naming the key and both sizes. */
int gpp_nccl_id_fetch(gpp_rdv_client_t *rdv, const char *key, void *id, size_t len, int timeout_ms,
                      gpp_err_t *err);

#ifdef __cplusplus
}
#endif
#endif
