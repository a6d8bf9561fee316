/* fuzz_ckpt: the checkpoint loader (gpp_exec_ckpt_load) into a small DLRM stage
 * with AdamW state, the model of tests/data/ckpt_v1_dlrm.ckpt (the seed).
 * The input goes to a private temporary file the loader reads by path (in
 * /dev/shm where there is one). An
 * accepted checkpoint must leave a step count within GPP_CKPT_MAX_STEPS and
 * every value and optimizer state finite. */
#include <math.h>
#include <unistd.h>

#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt.h"
#include "agent/data/gpp_data.h"
#include "kernels/gpp_backend.h"
#include "tests/fuzz/gpp_fuzz.h"

#define DLRM                                                                                       \
    "dlrm:dense_branches=1,sparse_branches=2,dense_in=8,hidden=16,dense_layers=1,rows=50,dim=4,"   \
    "bag=3,top_layers=1"

static gpp_exec_t *s_ex;
static char s_path[64];

static void s_setup(void)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_zoo_build(DLRM, &err);
    gpp_backend_cfg_t bc = {.kind = GPP_DEVICE_CPU, .cpu_threads = 1};
    gpp_backend_t *be = g ? gpp_backend_new(&bc, &err) : NULL;
    if (!be) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    int *all = calloc((size_t)g->n_ops, sizeof *all);
    for (int i = 0; i < g->n_ops; i++)
        all[i] = i;
    gpp_exec_cfg_t c = {.seed = 7, .batch = 8};
    c.optim = (gpp_optim_hp_t){.kind = GPP_OPTIM_ADAMW,
                               .lr = 0.01f,
                               .beta1 = 0.9f,
                               .beta2 = 0.999f,
                               .eps = 1e-8f,
                               .weight_decay = 0.01f};
    /* lives for the process, like libFuzzer's */
    s_ex = gpp_exec_new(g, g->n_ops, all, be, gpp_data_new(g, 3), &c, &err);
    free(all);
    if (!s_ex) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    /* RAM (/dev/shm) where there is one: on ext4 each rewrite of the file
     * truncates it, and the close after a truncate starts writeback
     * (auto_da_alloc); that cost 90 % of the time, 256 -> 2,400 exec/s */
    const char *dir = getenv("TMPDIR");
    if (access("/dev/shm", W_OK | X_OK) == 0)
        dir = "/dev/shm";
    snprintf(s_path, sizeof s_path, "%s/gpp_fuzz_ckpt_XXXXXX",
             dir && strlen(dir) < 32 ? dir : "/tmp");
    int fd = mkstemp(s_path);
    if (fd < 0)
        abort();
    close(fd);
}

static void s_cleanup(void)
{
    unlink(s_path);
}

static int s_finite(void *arg, const gpp_exec_param_t *p, gpp_err_t *err)
{
    float *host = arg;
    int64_t numel = p->rows * p->cols;
    for (int k = 0; k < p->n_bufs; k++) {
        if (numel > (1 << 20) ||
            gpp_stream_copy(gpp_exec_stream(s_ex), host, p->buf[k], (size_t)numel * 4, GPP_COPY_D2H,
                            err) < 0 ||
            gpp_stream_sync(gpp_exec_stream(s_ex), err) < 0)
            return -1;
        for (int64_t i = 0; i < numel; i++)
            gpp_fuzz_check(isfinite(host[i]), "%s buffer %d element %lld", p->name, k,
                           (long long)i);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!s_ex) {
        s_setup();
        atexit(s_cleanup);
    }
    FILE *f = fopen(s_path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    gpp_err_t err = {{0}};
    if (gpp_exec_ckpt_load(s_ex, s_path, &err) == 0) {
        int64_t steps = gpp_exec_step_count(s_ex);
        gpp_fuzz_check(steps >= 0 && (uint64_t)steps <= GPP_CKPT_MAX_STEPS, "%lld steps",
                       (long long)steps);
        static float host[1 << 20];
        gpp_fuzz_check(gpp_exec_params_foreach(s_ex, s_finite, host, &err) == 0, "%s", err.msg);
    } else {
        gpp_fuzz_check(err.msg[0] != '\0', "a refusal without a reason");
    }
    return 0;
}
