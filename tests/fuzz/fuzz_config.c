/* fuzz_config: the cluster file (TOML through toml++, then gpp_config's
 * checks). An accepted file must satisfy the checks the coordinator relies
 * on before it starts agents. */
#include "config/gpp_config.h"
#include "tests/fuzz/gpp_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = gpp_fuzz_text(data, size);
    gpp_config_t c;
    gpp_err_t err = {{0}};
    if (gpp_config_load_string(&c, text, "fuzz.toml", &err) == 0) {
        gpp_fuzz_check(c.n_nodes >= 1 && gpp_config_devices(&c) >= 1, "%d nodes", c.n_nodes);
        gpp_fuzz_check(c.job.batch >= 1 && c.job.iterations >= 1, "batch %d iterations %d",
                       c.job.batch, c.job.iterations);
        gpp_config_release(&c);
    } else {
        gpp_fuzz_check(err.msg[0] != '\0', "a refusal without a reason");
    }
    free(text);
    return 0;
}
