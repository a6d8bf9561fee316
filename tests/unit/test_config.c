/* test_config: cluster.toml loading (config/gpp_config). The examples and a
 * good fixture parse to the expected struct; every bad fixture in
 * tests/data/config/ is rejected with "file:line:col: section.key: ..." and
 * environment overrides apply and are checked. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/gpp_config.h"
#include "tests/gpp_test.h"

static const char *s_src(void)
{
    const char *s = getenv("GPP_SRC");
    return s ? s : ".";
}

static int s_load(gpp_config_t *c, const char *rel, gpp_err_t *err)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", s_src(), rel);
    memset(err, 0, sizeof *err);
    return gpp_config_load(c, path, err);
}

static void t_local_cpu_example(void)
{
    gpp_config_t c;
    gpp_err_t err;
    int rc = s_load(&c, "config/examples/local-cpu.toml", &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc)
        return;
    GPP_EXPECT(strcmp(c.coordinator.endpoint, "tcp://127.0.0.1:5555") == 0);
    GPP_EXPECT(c.n_nodes == 1 && c.nodes[0].slots == 4 && gpp_config_devices(&c) == 4);
    GPP_EXPECT(strncmp(c.job.model, "mmt:branches=2,", 15) == 0);
    GPP_EXPECT(c.job.iterations == 20 && c.job.batch == 32 && c.job.seed == 42);
    GPP_EXPECT(c.job.optimizer == GPP_OPTIM_ADAMW && c.job.lr == 1e-3);
    GPP_EXPECT(c.job.launch == GPP_CONFIG_LAUNCH_LOCAL && c.job.backend == GPP_DEVICE_CPU);
    GPP_EXPECT(strcmp(c.cluster.device, "cpu") == 0 && c.cluster.mem_gib == 0.03);
    GPP_EXPECT(strcmp(gpp_optim_kind_name(c.job.optimizer), "adamw") == 0);
    gpp_config_release(&c);
    GPP_EXPECT(c.nodes == NULL);
}

static void t_multi_node_example(void)
{
    gpp_config_t c;
    gpp_err_t err;
    int rc = s_load(&c, "config/examples/multi-node-a100.toml", &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc)
        return;
    GPP_EXPECT(c.n_nodes == 4 && gpp_config_devices(&c) == 32);
    GPP_EXPECT(strcmp(c.nodes[3].host, "node-3") == 0);
    GPP_EXPECT(c.job.launch == GPP_CONFIG_LAUNCH_EXTERNAL && c.job.backend == GPP_DEVICE_CUDA);
    GPP_EXPECT(c.cluster.inter_gbps == 25 && c.cluster.intra_latency_us == 5);
    /* the defaults: what has run on a GPU (no graphs, fp32 tensors) */
    GPP_EXPECT(c.job.cuda_graphs == 0 && c.job.bf16_tensors == 0);
    GPP_EXPECT(c.job.beta2 == 0.95 && c.metrics.http_port == 9464);
    GPP_EXPECT(strcmp(gpp_config_launch_name(c.job.launch), "external") == 0);
    gpp_config_release(&c);
}

/* Every example in config/examples/ loads (a new example is tested too). */
static void t_all_examples(void)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/config/examples", s_src());
    DIR *d = opendir(dir);
    GPP_EXPECT_MSG(d, "cannot open %s", dir);
    if (!d)
        return;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".toml"))
            continue;
        char rel[512];
        snprintf(rel, sizeof rel, "config/examples/%s", e->d_name);
        gpp_config_t c;
        gpp_err_t err;
        GPP_EXPECT_MSG(s_load(&c, rel, &err) == 0, "%s", err.msg);
        gpp_config_release(&c);
        n++;
    }
    closedir(d);
    GPP_EXPECT(n >= 2);
}

/* sgd without lr or weight decay: torch.optim.SGD's defaults, as gpp-train's */
static void t_sgd_defaults(void)
{
    gpp_config_t c;
    gpp_err_t err;
    int rc = gpp_config_load_string(&c,
                                    "[job]\nmodel = \"mmt\"\noptimizer = \"sgd\"\n"
                                    "[[nodes]]\nhost = \"127.0.0.1\"\nslots = 1\n",
                                    "sgd.toml", &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc)
        return;
    GPP_EXPECT(c.job.lr == 0.05 && c.job.weight_decay == 0.0 && c.job.momentum == 0.9);
    gpp_config_release(&c);
}

static void t_defaults(void)
{
    gpp_config_t c;
    gpp_err_t err;
    int rc = s_load(&c, "tests/data/config/good-minimal.toml", &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc)
        return;
    GPP_EXPECT(c.n_nodes == 1 && c.nodes[0].slots == 1);
    GPP_EXPECT(c.job.batch == 32 && c.job.iterations == 20 && c.job.micro_batch == 0);
    /* gpp-train's defaults, torch's AdamW (common/gpp_optim_defaults.h) */
    GPP_EXPECT(c.job.optimizer == GPP_OPTIM_ADAMW && c.job.lr == 1e-3 &&
               c.job.weight_decay == 0.01 && c.job.momentum == 0.9 && c.job.beta1 == 0.9 &&
               c.job.beta2 == 0.999 && c.job.eps == 1e-8);
    GPP_EXPECT(strcmp(c.job.planner, "gpp") == 0 && c.job.checkpoint_interval == 0);
    GPP_EXPECT(c.health.heartbeat_ms == 500 && c.health.timeout_ms == 5000);
    GPP_EXPECT(c.metrics.file[0] == '\0' && c.metrics.http_port == 0);
    gpp_config_release(&c);
    gpp_config_release(&c); /* idempotent */
}

typedef struct {
    const char *file;   /* in tests/data/config/ */
    const char *expect; /* substring of the message: file:line:col: field: ... */
} bad_t;

static const bad_t BAD[] = {
    {"bad-batch.toml", "bad-batch.toml:3:9: job.batch: expected a positive integer, got -4"},
    {"bad-unknown-key.toml", "bad-unknown-key.toml:3:1: job.bacth: unknown key; [job] takes: "},
    {"bad-unknown-section.toml", "bad-unknown-section.toml:1:2: [jobs]: unknown section"},
    {"bad-type.toml", "bad-type.toml:6:9: nodes[0].slots: expected a positive integer (GPUs or "
                      "CPU agent slots), got \"four\""},
    {"bad-optimizer.toml", "bad-optimizer.toml:3:13: job.optimizer: expected one of \"sgd\", "
                           "\"adamw\", got \"adam\""},
    {"bad-device.toml", "bad-device.toml:2:10: cluster.device: expected one of v100-16g"},
    {"bad-momentum.toml",
     "bad-momentum.toml:4:12: job.momentum: expected a number in [0, 1), got 1"},
    {"bad-timeout.toml",
     "bad-timeout.toml:6:1: health.timeout_ms: 500 must exceed heartbeat_ms 1000"},
    {"bad-node-host.toml", "bad-node-host.toml:9:1: nodes[1].host: missing"},
    {"bad-local-multinode.toml", "bad-local-multinode.toml:3:1: job.launch: \"local\" starts every "
                                 "agent on this host but 2 nodes"},
    {"bad-syntax.toml", "bad-syntax.toml:2:"},
    {"bad-endpoint.toml",
     "bad-endpoint.toml:2:1: coordinator.endpoint: \"127.0.0.1:5555\" is not a "
     "ZeroMQ endpoint"},
    {"bad-no-model.toml", "bad-no-model.toml: job.model: missing; add model = "},
    {"bad-nul.toml", "bad-nul.toml:2:9: job.model: contains a NUL character"},
    {"bad-profile.toml", "bad-profile.toml:3:1: cluster.profile: cannot read "
                         "\"tests/data/config/no-such-profile.json\": No such file"},
    {"bad-micro-batch.toml",
     "bad-micro-batch.toml:4:1: job.micro_batch: 5 does not divide job.batch 32"},
};

static void t_bad_fixtures(void)
{
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "tests/data/config/%s", BAD[i].file);
        gpp_config_t c;
        gpp_err_t err;
        int rc = s_load(&c, rel, &err);
        GPP_EXPECT_MSG(rc == -1, "%s accepted", BAD[i].file);
        GPP_EXPECT_MSG(strstr(err.msg, BAD[i].expect), "%s:\n    got      '%s'\n    expected '%s'",
                       BAD[i].file, err.msg, BAD[i].expect);
        GPP_EXPECT(c.nodes == NULL);
        printf("  %s\n", err.msg);
    }
}

static void t_missing_file(void)
{
    gpp_config_t c;
    gpp_err_t err;
    GPP_EXPECT(s_load(&c, "tests/data/config/no-such-file.toml", &err) == -1);
    GPP_EXPECT(strstr(err.msg, "no-such-file.toml: cannot open"));
}

static void t_env_override(void)
{
    const char *text = "[cluster]\ndevice = \"a100-80g\"\n[job]\nmodel = \"mmt\"\n"
                       "[health]\nheartbeat_ms = 100\ntimeout_ms = 1000\n";
    gpp_config_t c;
    gpp_err_t err = {{0}};
    setenv("GPP_HEARTBEAT_MS", "250", 1);
    setenv("GPP_BACKEND", "cuda", 1);
    setenv("GPP_SEED", "18446744", 1);
    setenv("GPP_CUDA_GRAPHS", "true", 1);
    setenv("GPP_BF16_TENSORS", "true", 1);
    int rc = gpp_config_load_string(&c, text, "inline.toml", &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc == 0) {
        GPP_EXPECT(c.health.heartbeat_ms == 250 && c.health.timeout_ms == 1000);
        GPP_EXPECT(c.job.seed == 18446744u && c.job.cuda_graphs == 1 && c.job.bf16_tensors == 1);
        gpp_config_release(&c);
    }
    unsetenv("GPP_SEED");
    unsetenv("GPP_CUDA_GRAPHS");
    unsetenv("GPP_BF16_TENSORS");
    GPP_EXPECT(strcmp(gpp_device_kind_name(GPP_DEVICE_CUDA), "cuda") == 0);
    setenv("GPP_HEARTBEAT_MS", "2000", 1);
    memset(&err, 0, sizeof err);
    GPP_EXPECT(gpp_config_load_string(&c, text, "inline.toml", &err) == -1);
    GPP_EXPECT_MSG(
        strstr(err.msg, "inline.toml:7:1: health.timeout_ms: 1000 must exceed heartbeat_ms 2000"),
        "%s", err.msg);
    setenv("GPP_HEARTBEAT_MS", "12x", 1);
    memset(&err, 0, sizeof err);
    GPP_EXPECT(gpp_config_load_string(&c, text, "inline.toml", &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg,
                          "environment GPP_HEARTBEAT_MS: inline.toml: health.heartbeat_ms: "
                          "expected a positive integer (milliseconds), got '12x'"),
                   "%s", err.msg);
    unsetenv("GPP_HEARTBEAT_MS");
    setenv("GPP_BACKEND", "tpu", 1);
    memset(&err, 0, sizeof err);
    GPP_EXPECT(gpp_config_load_string(&c, text, "inline.toml", &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "job.backend: expected one of \"cpu\", \"cuda\", got 'tpu'"),
                   "%s", err.msg);
    unsetenv("GPP_BACKEND");
}

static const gpp_test_case_t cases[] = {
    {"local_cpu_example", t_local_cpu_example},
    {"multi_node_example", t_multi_node_example},
    {"all_examples", t_all_examples},
    {"defaults", t_defaults},
    {"sgd_defaults", t_sgd_defaults},
    {"bad_fixtures", t_bad_fixtures},
    {"missing_file", t_missing_file},
    {"env_override", t_env_override},
    {NULL, NULL},
};

int main(void)
{
    return gpp_test_run(cases);
}
