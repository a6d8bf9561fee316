/* fuzz_graph: graph JSON ("gpp-graph/1", gpp_graph_parse_json). An accepted
 * graph must write out as JSON that parses to the same text again (the
 * graph's spec is its origin: the same name both times). */
#include "model/gpp_graph.h"
#include "tests/fuzz/gpp_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = gpp_fuzz_text(data, size);
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_graph_parse_json(text, "fuzz.json", &err);
    if (g) {
        (void)gpp_graph_params(g);
        char *a = gpp_graph_to_json(g);
        gpp_graph_t *g2 = gpp_graph_parse_json(a, "fuzz.json", &err);
        gpp_fuzz_check(g2 != NULL, "%s", err.msg);
        char *b = gpp_graph_to_json(g2);
        gpp_fuzz_check(strcmp(a, b) == 0, "writing the graph again changed it");
        free(a);
        free(b);
        gpp_graph_destroy(&g2);
        gpp_graph_destroy(&g);
    } else {
        gpp_fuzz_check(err.msg[0] != '\0', "a refusal without a reason");
    }
    free(text);
    return 0;
}
