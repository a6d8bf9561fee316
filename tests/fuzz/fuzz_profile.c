/* fuzz_profile: profile JSON, both readers: the graph of opaque ops a
 * profile alone describes (gpp_profile_parse_graph) and the measurements
 * attached to a model's costs (gpp_cost_attach_profile_text), here for the
 * graph of tests/data/profile_small.json's shape built from the input
 * itself when it parses, else for a fixed zoo model. Every cost read after
 * an accepted profile must be finite and non-negative. */
#include <math.h>

#include "planner/gpp_cost.h"
#include "tests/fuzz/gpp_fuzz.h"

#define ZOO_SPEC "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

static void s_attach(const gpp_graph_t *g, const char *text)
{
    gpp_err_t err = {{0}};
    gpp_cluster_t cl;
    gpp_fuzz_check(gpp_cluster_init(&cl, "v100-16g", 2, 2, &err) == 0, "%s", err.msg);
    gpp_cost_t *c = gpp_cost_new(g, &cl);
    if (gpp_cost_attach_profile_text(c, text, "fuzz.json", &err) == 0) {
        for (int op = 0; op < g->n_ops; op++)
            for (int b = 1; b <= 64; b *= 4) {
                double f = gpp_cost_op_fwd_ms(c, op, b), w = gpp_cost_op_bwd_ms(c, op, b);
                gpp_fuzz_check(isfinite(f) && f >= 0 && isfinite(w) && w >= 0,
                               "op %d b %d: fwd %g bwd %g ms", op, b, f, w);
            }
    } else {
        gpp_fuzz_check(err.msg[0] != '\0', "a refusal without a reason");
    }
    gpp_cost_destroy(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gpp_graph_t *zoo;
    gpp_err_t err = {{0}};
    if (!zoo && !(zoo = gpp_zoo_build(ZOO_SPEC, &err))) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    char *text = gpp_fuzz_text(data, size);
    gpp_graph_t *g = gpp_profile_parse_graph(text, "fuzz.json", &err);
    s_attach(g ? g : zoo, text);
    gpp_graph_destroy(&g);
    free(text);
    return 0;
}
