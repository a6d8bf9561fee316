/* fuzz_plan: plan JSON ("gpp-plan/1", gpp_plan_parse_json) against the
 * model of tests/data/plans/mmt2_*.json. An accepted plan must write out as
 * JSON that parses again. */
#include "planner/gpp_plan_io.h"
#include "tests/fuzz/gpp_fuzz.h"

#define MMT2 "mmt:branches=2,layers=2,hidden=64,heads=4,seq=16,ffn=128"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static gpp_graph_t *g;
    gpp_err_t err = {{0}};
    if (!g && !(g = gpp_zoo_build(MMT2, &err))) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    char *text = gpp_fuzz_text(data, size);
    gpp_plan_t *p = gpp_plan_parse_json(text, "fuzz.json", g, &err);
    if (p) {
        char *a = gpp_plan_to_json(p);
        gpp_plan_t *p2 = gpp_plan_parse_json(a, "fuzz.json (written again)", g, &err);
        gpp_fuzz_check(p2 != NULL, "%s", err.msg);
        free(a);
        gpp_plan_destroy(&p2);
        gpp_plan_destroy(&p);
    } else {
        gpp_fuzz_check(err.msg[0] != '\0', "a refusal without a reason");
    }
    free(text);
    return 0;
}
