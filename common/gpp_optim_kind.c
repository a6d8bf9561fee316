/* gpp_optim_kind: see gpp_optim_kind.h. */
#include "common/gpp_optim_kind.h"

#include <string.h>

const char *const gpp_optim_kind_names[GPP_OPTIM__COUNT + 1] = {
    [GPP_OPTIM_SGD] = "sgd", [GPP_OPTIM_ADAMW] = "adamw", [GPP_OPTIM__COUNT] = NULL};

const char *gpp_optim_kind_name(gpp_optim_kind_t k)
{
    return (unsigned)k < GPP_OPTIM__COUNT ? gpp_optim_kind_names[k] : "unknown";
}

int gpp_optim_kind_parse(const char *s, gpp_optim_kind_t *out)
{
    for (int i = 0; s && i < GPP_OPTIM__COUNT; i++)
        if (strcmp(s, gpp_optim_kind_names[i]) == 0) {
            *out = (gpp_optim_kind_t)i;
            return 0;
        }
    return -1;
}
