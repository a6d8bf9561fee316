/* gpp_model: see gpp_model.h. */
#include "model/gpp_model.h"

#include <string.h>

#include "model/gpp_onnx.h"

gpp_graph_t *gpp_model_load(const char *spec, gpp_err_t *err)
{
    size_t n = strlen(spec);
    int json = n > 5 && strcmp(spec + n - 5, ".json") == 0;
    gpp_graph_t *g = json                    ? gpp_graph_read_json(spec, err)
                     : gpp_onnx_is_spec(spec) ? gpp_onnx_load_spec(spec, err)
                                              : gpp_zoo_build(spec, err);
    if (!g)
        return NULL;
    if (gpp_graph_finalize(g, err) < 0) {
        gpp_graph_destroy(&g);
        return NULL;
    }
    return g;
}
