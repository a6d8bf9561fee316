/* test_cuda_events: timed events on the CUDA backend (gpp_event_new_timed,
 * gpp_event_elapsed_ms) and the executor's per-op timing hook built on them,
 * the way gpp-train --profile-out --backend cuda measures ops.
 *
 * Checks, none on a timing threshold: elapsed time over a chain of events
 * is non-negative and additive (t0->t2 = t0->t1 + t1->t2 within CUDA's
 * event resolution, about 0.5 us per event); an event never recorded is an
 * error with CUDA's message, not a crash; the device name is the GPU's own;
 * the executor's op times on the GPU are all recorded (one call per op per
 * pass) and non-negative, and a pass's ops add up to no more than the
 * host's wall time around the pass plus a margin of the event resolution.
 *
 * Without a usable GPU (or in a build without CUDA) the test prints why and
 * exits 77, which ctest reports as skipped (SKIP_RETURN_CODE). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/data/gpp_data.h"
#include "agent/exec/gpp_exec.h"
#include "common/gpp_time.h"
#include "kernels/gpp_backend.h"
#include "model/gpp_graph.h"
#include "tests/gpp_test.h"

#define SKIP 77
/* CUDA documents cudaEventElapsedTime's resolution as around 0.5 us */
#define EVENT_RES_MS 0.0005

static gpp_backend_t *s_be;

static void t_events(void)
{
    gpp_err_t err = {{0}};
    gpp_stream_t *s = gpp_stream_new(s_be, &err);
    GPP_EXPECT(s != NULL);
    if (!s)
        return;
    GPP_EXPECT(strncmp(gpp_backend_name(s_be), "cuda:", 5) == 0);
    GPP_EXPECT(strcmp(gpp_backend_device_name(s_be), gpp_backend_name(s_be)) != 0);
    gpp_event_t *e[3];
    for (int i = 0; i < 3; i++)
        GPP_EXPECT((e[i] = gpp_event_new_timed(s_be, &err)) != NULL);
    double ms = -1;
    err.msg[0] = 0;
    GPP_EXPECT(gpp_event_elapsed_ms(e[0], e[1], &ms, &err) == -1 && err.msg[0] && ms == -1);
    size_t bytes = (size_t)64 << 20;
    void *a = gpp_backend_alloc(s_be, bytes, &err), *b = gpp_backend_alloc(s_be, bytes, &err);
    GPP_EXPECT(a && b);
    GPP_EXPECT(gpp_event_record(e[0], s, &err) == 0);
    GPP_EXPECT(gpp_stream_zero(s, a, bytes, &err) == 0);
    GPP_EXPECT(gpp_event_record(e[1], s, &err) == 0);
    for (int r = 0; r < 4; r++)
        GPP_EXPECT(gpp_stream_copy(s, b, a, bytes, GPP_COPY_D2D, &err) == 0);
    GPP_EXPECT(gpp_event_record(e[2], s, &err) == 0);
    double m01 = -1, m12 = -1, m02 = -1;
    GPP_EXPECT_MSG(gpp_event_elapsed_ms(e[0], e[1], &m01, &err) == 0, "%s", err.msg);
    GPP_EXPECT(gpp_event_elapsed_ms(e[1], e[2], &m12, &err) == 0);
    GPP_EXPECT(gpp_event_elapsed_ms(e[0], e[2], &m02, &err) == 0);
    printf("  zero 64 MiB %.4f ms, 4 x copy 64 MiB %.4f ms, both %.4f ms\n", m01, m12, m02);
    GPP_EXPECT(m01 >= 0 && m12 >= 0);
    GPP_EXPECT_MSG(fabs(m02 - (m01 + m12)) <= 3 * EVENT_RES_MS, "%.6f vs %.6f", m02, m01 + m12);
    GPP_EXPECT(gpp_event_query(e[2], &err) == 1);
    gpp_backend_free(s_be, &a);
    gpp_backend_free(s_be, &b);
    for (int i = 0; i < 3; i++)
        gpp_event_destroy(&e[i]);
    gpp_stream_destroy(&s);
}

static void t_exec_timing(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g =
        gpp_zoo_build("mmt:branches=2,layers=1,hidden=64,heads=4,seq=16,ffn=128", &err);
    GPP_EXPECT_MSG(g != NULL, "%s", err.msg);
    if (!g)
        return;
    int *ops = calloc((size_t)g->n_ops, sizeof *ops);
    for (int i = 0; i < g->n_ops; i++)
        ops[i] = i;
    gpp_data_t *data = gpp_data_new(g, 1);
    gpp_exec_cfg_t ec = {.seed = 1, .batch = 8};
    ec.optim.kind = GPP_OPTIM_SGD;
    gpp_exec_t *ex = gpp_exec_new(g, g->n_ops, ops, s_be, data, &ec, &err);
    GPP_EXPECT_MSG(ex != NULL, "%s", err.msg);
    for (int pass = 0; ex && pass < 2; pass++) {
        gpp_exec_set_timing(ex, pass == 1);
        gpp_exec_reset_times(ex);
        double t0 = gpp_now_ms();
        GPP_EXPECT_MSG(gpp_exec_begin(ex, 0, 0, 8, &err) == 0 &&
                           gpp_exec_forward(ex, 0, &err) == 0 &&
                           gpp_exec_backward(ex, 0, &err) == 0,
                       "%s", err.msg);
        gpp_exec_release(ex, 0);
        GPP_EXPECT(gpp_stream_sync(gpp_exec_stream(ex), &err) == 0);
        double wall = gpp_now_ms() - t0, sum = 0;
        for (int i = 0; i < g->n_ops; i++) {
            double f = -1, b = -1;
            int64_t calls = -1;
            gpp_exec_op_time(ex, i, &f, &b, &calls);
            GPP_EXPECT(calls == (pass == 1 ? 1 : 0) && f >= 0 && b >= 0);
            sum += f + b;
        }
        if (pass == 1) {
            printf("  mmt, micro-batch 8: ops sum to %.4f ms of device time, %.4f ms wall\n", sum,
                   wall);
            GPP_EXPECT(sum > 0);
            GPP_EXPECT_MSG(sum <= wall + 2 * g->n_ops * EVENT_RES_MS, "%.4f vs %.4f", sum, wall);
        }
    }
    gpp_exec_destroy(&ex);
    gpp_data_destroy(&data);
    free(ops);
    gpp_graph_destroy(&g);
}

static const gpp_test_case_t cases[] = {
    {"events", t_events},
    {"exec_timing", t_exec_timing},
    {NULL, NULL},
};

int main(void)
{
    gpp_err_t err;
    gpp_backend_cfg_t gc = {.kind = GPP_DEVICE_CUDA, .device = 0};
    if (!(s_be = gpp_backend_new(&gc, &err))) {
        printf("test_cuda_events: SKIPPED: %s\n", err.msg);
        return SKIP;
    }
    printf("test_cuda_events: %s (%s)\n", gpp_backend_name(s_be), gpp_backend_device_name(s_be));
    int rc = gpp_test_run(cases);
    gpp_backend_destroy(&s_be);
    return rc;
}
