/* gpp_device_kind: see gpp_device_kind.h. */
#include "common/gpp_device_kind.h"

#include <assert.h>
#include <string.h>

const char *const gpp_device_kind_names[GPP_DEVICE__COUNT + 1] = {
    [GPP_DEVICE_CPU] = "cpu", [GPP_DEVICE_CUDA] = "cuda", [GPP_DEVICE__COUNT] = NULL};

const char *gpp_device_kind_name(gpp_device_kind_t k)
{
    assert((unsigned)k < GPP_DEVICE__COUNT);
    return (unsigned)k < GPP_DEVICE__COUNT ? gpp_device_kind_names[k] : "invalid";
}

int gpp_device_kind_parse(const char *s, gpp_device_kind_t *out)
{
    for (int i = 0; s && i < GPP_DEVICE__COUNT; i++)
        if (strcmp(s, gpp_device_kind_names[i]) == 0) {
            *out = (gpp_device_kind_t)i;
            return 0;
        }
    return -1;
}
