/* gpp_precision: see gpp_precision.h. */
#include "common/gpp_precision.h"

#include <assert.h>
#include <string.h>

const char *const gpp_precision_names[GPP_PRECISION__COUNT + 1] = {[GPP_PRECISION_FP32] = "fp32",
                                                                   [GPP_PRECISION_TF32] = "tf32",
                                                                   [GPP_PRECISION_BF16] = "bf16",
                                                                   [GPP_PRECISION__COUNT] = NULL};

const char *gpp_precision_name(gpp_precision_t p)
{
    assert((unsigned)p < GPP_PRECISION__COUNT);
    return (unsigned)p < GPP_PRECISION__COUNT ? gpp_precision_names[p] : "invalid";
}

int gpp_precision_parse(const char *s, gpp_precision_t *out)
{
    for (int i = 0; s && i < GPP_PRECISION__COUNT; i++)
        if (strcmp(s, gpp_precision_names[i]) == 0) {
            *out = (gpp_precision_t)i;
            return 0;
        }
    return -1;
}
