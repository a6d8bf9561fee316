/* gpp_device: what an agent reports about the device it trains on
 * (Register: GPU name, total and free memory, SM count; the host's memory
 * for a CPU agent).
 *
 * gpp_device_probe(want_cuda = 1, gpu) opens nothing but asks the CUDA
 * runtime about GPU `gpu` (an index among the GPUs CUDA_VISIBLE_DEVICES
 * leaves visible; this creates the process's CUDA context on it, which the
 * CUDA backend reuses). When that GPU is not usable (no driver, no such
 * index, a build without CUDA) the result describes the host with gpu = -1
 * and error holding the runtime's message: the agent registers as a CPU
 * agent and the coordinator refuses it for a cuda job, naming it. */
#ifndef GPP_DEVICE_H
#define GPP_DEVICE_H

#include "agent/control/gpp_control.h"

/* Fills *out (never fails: see above). */
void gpp_device_probe(int want_cuda, int gpu, gpp_control_device_t *out);

#endif
