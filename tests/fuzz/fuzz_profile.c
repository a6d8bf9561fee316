/* fuzz_profile: profile JSON through its one reader (gpp_profile_io_parse),
 * then both users of what it accepts: the graph of opaque ops the profile
 * alone describes (gpp_profile_graph) and the measurements attached to a
 * model's costs (gpp_cost_attach_profile), here for that graph when it
 * builds, else for a fixed zoo model. Every cost read after an accepted
 * profile must be finite and non-negative; what the writer makes of it
 * must read back. */
#include <math.h>

#include "model/gpp_profile_graph.h"
#include "planner/gpp_cost.h"
#include "planner/gpp_profile_io.h"
#include "tests/fuzz/gpp_fuzz.h"

#define ZOO_SPEC "mmt:branches=2,layers=1,hidden=32,heads=2,seq=8,ffn=64"

static void s_attach(const gpp_graph_t *g, const gpp_profile_t *p)
{
    gpp_err_t err = {{0}};
    gpp_cluster_t cl;
    gpp_fuzz_check(gpp_cluster_init(&cl, "v100-16g", 2, 2, &err) == 0, "%s", err.msg);
    gpp_cost_t *c = gpp_cost_new(g, &cl);
    if (gpp_cost_attach_profile(c, p, &err) == 0) {
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
    gpp_profile_t *p = gpp_profile_io_parse(text, "fuzz.json", &err);
    free(text);
    if (!p) {
        gpp_fuzz_check(err.msg[0] != '\0', "a refusal without a reason");
        return 0;
    }
    char *again = gpp_profile_io_text(p);
    gpp_profile_t *q = gpp_profile_io_parse(again, "written.json", &err);
    gpp_fuzz_check(q && q->n_rows == p->n_rows && q->n_ops == p->n_ops,
                   "the writer's text does not read back: %s", q ? "rows differ" : err.msg);
    gpp_profile_destroy(&q);
    free(again);
    gpp_graph_t *g = gpp_profile_graph(p, &err);
    s_attach(g ? g : zoo, p);
    gpp_graph_destroy(&g);
    gpp_profile_destroy(&p);
    return 0;
}
