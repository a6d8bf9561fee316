/* test_config_errors: cluster.toml texts the loader must refuse, each with
 * the words its message must hold (the place, the field, the fix), and the
 * environment overrides' own errors. Complements test_config.c (fixture
 * files under tests/data/config/); these are texts in memory
 * (gpp_config_load_string), named "c.toml". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/gpp_config.h"
#include "tests/gpp_test.h"

#define MODEL "[job]\nmodel = \"mmt\"\n"

typedef struct {
    const char *what;
    const char *toml;
    const char *words[3]; /* each must be in the message */
} s_bad_t;

static const s_bad_t S_BAD[] = {
    {"boolean for a number",
     MODEL "batch = true\n",
     {"c.toml:3:9: job.batch: expected a positive integer, got true"}},
    {"array for a string", MODEL "planner = [1]\n", {"c.toml:3:", "job.planner", "got a array"}},
    {"float for an integer", MODEL "iterations = 2.5\n", {"job.iterations", "got 2.5"}},
    {"integer for a word",
     MODEL "optimizer = 3\n",
     {"job.optimizer: expected one of \"sgd\", \"adamw\", got 3"}},
    {"string too long",
     "[cluster]\ndevice = \"cpu\"\n" MODEL "planner = \"gppgppgppgpp\"\n",
     {"job.planner: longer than 7 bytes"}},
    {"nodes not an array",
     "nodes = 3\n" MODEL,
     {"c.toml:1:", "nodes: expected an array of tables"}},
    {"empty nodes", "nodes = []\n" MODEL, {"nodes: expected 1 to 4096 nodes, got 0"}},
    {"a node not a table", "nodes = [1]\n" MODEL, {"nodes[0]: expected a table, got a integer"}},
    {"a node without a host",
     "[[nodes]]\nslots = 2\n" MODEL,
     {"nodes[0].host: missing; add host = \"name\""}},
    {"a host twice",
     "[[nodes]]\nhost = \"a\"\n[[nodes]]\nhost = \"a\"\n" MODEL,
     {"nodes[1].host: \"a\" listed twice"}},
    {"unknown node key",
     "[[nodes]]\nhost = \"a\"\ngpu = 2\n" MODEL,
     {"nodes[0].gpu: unknown key", "takes: host, slots, gpus"}},
    {"more GPUs than slots",
     "[[nodes]]\nhost = \"a\"\nslots = 1\ngpus = 2\n" MODEL,
     {"nodes[0].gpus: 2 GPUs for 1 slots", "set gpus <= slots"}},
    {"precision on cpu",
     MODEL "precision = \"bf16\"\n",
     {"c.toml:", "job.precision: \"bf16\" needs backend = \"cuda\"", "precision = \"fp32\""}},
    {"nccl on cpu",
     MODEL "comm = \"nccl\"\n",
     {"c.toml:", "job.comm: \"nccl\" moves device memory", "comm = \"gloo\""}},
    {"cuda_graphs not a bool",
     MODEL "cuda_graphs = \"yes\"\n",
     {"c.toml:", "job.cuda_graphs: expected true or false, got \"yes\""}},
    {"schedule word",
     MODEL "schedule = \"zb-v\"\n",
     {"c.toml:3:", "job.schedule", "\"auto\", \"1f1b\", \"zb-h1\" or \"zb-h2\""}},
    {"comm word",
     MODEL "comm = \"mpi\"\n",
     {"job.comm: expected one of \"gloo\", \"nccl\", got \"mpi\""}},
    {"precision word",
     MODEL "precision = \"fp16\"\n",
     {"job.precision: expected one of \"fp32\", \"tf32\", \"bf16\", got \"fp16\""}},
    {"section not a table",
     "job = 3\n",
     {"c.toml:1:1: job: expected a table [job], got a integer"}},
    {"removed store key",
     MODEL "[coordinator]\nstore = \"127.0.0.1:29400\"\n",
     {"coordinator.store", "removed", "delete this line"}},
    {"endpoint not ZeroMQ",
     MODEL "[coordinator]\nendpoint = \"http://x:1\"\n",
     {"coordinator.endpoint: \"http://x:1\" is not a ZeroMQ endpoint"}},
    {"unreadable profile",
     "[cluster]\nprofile = \"/nonexistent/profile.json\"\n" MODEL,
     {"c.toml:2:", "cluster.profile: cannot read \"/nonexistent/profile.json\""}},
    {"interval without a directory",
     MODEL "checkpoint_interval = 5\n",
     {"job.checkpoint_interval: 5 needs job.checkpoint_dir"}},
    {"cuda on the cpu preset",
     MODEL "backend = \"cuda\"\n",
     {"job.backend: \"cuda\" with cluster.device \"cpu\""}},
    {"local launch on two nodes",
     "[[nodes]]\nhost = \"a\"\n[[nodes]]\nhost = \"b\"\n" MODEL,
     {"job.launch: \"local\" starts every agent on this host but 2 nodes are listed"}},
    {NULL, NULL, {NULL}},
};

static void t_bad_texts(void)
{
    for (const s_bad_t *b = S_BAD; b->what; b++) {
        gpp_config_t c;
        gpp_err_t err = {{0}};
        int rc = gpp_config_load_string(&c, b->toml, "c.toml", &err);
        GPP_EXPECT_MSG(rc < 0, "%s: accepted", b->what);
        if (rc == 0)
            gpp_config_release(&c);
        for (int w = 0; w < 3 && b->words[w]; w++)
            GPP_EXPECT_MSG(strstr(err.msg, b->words[w]), "%s: '%s' lacks '%s'", b->what, err.msg,
                           b->words[w]);
        if (getenv("GPP_TEST_VERBOSE"))
            printf("  %-32s %s\n", b->what, err.msg);
    }
}

/* Environment overrides: parsed like the file's value; a bad one names the
 * variable; a good one wins over the file. */
static void t_environment(void)
{
    static const struct {
        const char *var, *value, *words;
    } bad[] = {
        {"GPP_ITERATIONS", "ten", "environment GPP_ITERATIONS"},
        {"GPP_ITERATIONS", "12abc", "job.iterations: expected a positive integer, got '12abc'"},
        {"GPP_SEED", "-1", "GPP_SEED"},
        {"GPP_BACKEND", "tpu", "GPP_BACKEND"},
        {"GPP_TIMEOUT_MS", "99999999999999999999", "GPP_TIMEOUT_MS"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv(bad[i].var, bad[i].value, 1);
        gpp_config_t c;
        gpp_err_t err = {{0}};
        int rc = gpp_config_load_string(&c, MODEL, "c.toml", &err);
        GPP_EXPECT_MSG(rc < 0, "%s=%s accepted", bad[i].var, bad[i].value);
        if (rc == 0)
            gpp_config_release(&c);
        GPP_EXPECT_MSG(strstr(err.msg, bad[i].words), "'%s' lacks '%s'", err.msg, bad[i].words);
        unsetenv(bad[i].var);
    }
    setenv("GPP_ITERATIONS", "7", 1);
    setenv("GPP_SEED", "123", 1);
    setenv("GPP_METRICS_FILE", "/tmp/m.jsonl", 1);
    gpp_config_t c;
    gpp_err_t err = {{0}};
    int rc = gpp_config_load_string(&c, MODEL "iterations = 3\nseed = 4\n", "c.toml", &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc == 0) {
        GPP_EXPECT(c.job.iterations == 7 && c.job.seed == 123);
        GPP_EXPECT(strcmp(c.metrics.file, "/tmp/m.jsonl") == 0);
        gpp_config_release(&c);
    }
    unsetenv("GPP_ITERATIONS");
    unsetenv("GPP_SEED");
    unsetenv("GPP_METRICS_FILE");
}

/* Planned keys load (with a warning on stderr) and keep their values. */
static void t_planned_keys(void)
{
    gpp_config_t c;
    gpp_err_t err = {{0}};
    int rc = gpp_config_load_string(&c,
                                    "[cluster]\ndevice = \"a100-80g\"\n" MODEL
                                    "backend = \"cuda\"\n[metrics]\nhttp_port = 9464\n",
                                    "c.toml", &err);
    GPP_EXPECT_MSG(rc == 0, "%s", err.msg);
    if (rc == 0) {
        GPP_EXPECT(c.job.backend == GPP_DEVICE_CUDA && c.metrics.http_port == 9464);
        gpp_config_release(&c);
    }
}

static const gpp_test_case_t cases[] = {{"bad_texts", t_bad_texts},
                                        {"environment", t_environment},
                                        {"planned_keys", t_planned_keys},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
