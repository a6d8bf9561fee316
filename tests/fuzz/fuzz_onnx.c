/* fuzz_onnx: the ONNX importer (gpp_onnx_parse over protobuf-c). An accepted
 * model must finalize or be refused with a reason, and every operand of its
 * ops must be valid; a refused one must say why, naming the file. */
#include "model/gpp_onnx.h"
#include "tests/fuzz/gpp_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gpp_err_t err = {{0}};
    gpp_graph_t *g = gpp_onnx_parse(data, size, "fuzz.onnx", GPP_ONNX_LOSS_MSE, &err);
    if (g) {
        for (int i = 0; i < g->n_ops; i++)
            for (int k = 0; k < g->ops[i].n_inputs; k++)
                gpp_fuzz_check(g->ops[i].inputs[k] >= 0 && g->ops[i].inputs[k] < i,
                               "op %d input %d out of order", i, k);
        gpp_err_t f = {{0}};
        if (gpp_graph_finalize(g, &f) == 0)
            (void)gpp_graph_params(g);
        else
            gpp_fuzz_check(f.msg[0] != '\0', "a refusal without a reason");
        gpp_graph_destroy(&g);
    } else {
        gpp_fuzz_check(strncmp(err.msg, "fuzz.onnx", 9) == 0, "refusal '%s'", err.msg);
    }
    return 0;
}
