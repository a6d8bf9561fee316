/* gpp_alloc_rule: see gpp_alloc_rule.h. */
#include "common/gpp_alloc_rule.h"

#include <assert.h>

#define S_MIN_SHIFT GPP_ALLOC_MIN_SHIFT
#define S_MIN_BYTES ((size_t)1 << S_MIN_SHIFT)
#define S_STEP_SHIFT GPP_ALLOC_STEP_SHIFT
#define S_STEPS (1 << S_STEP_SHIFT)

int gpp_alloc_class(size_t bytes, size_t *class_bytes)
{
    if (bytes <= S_MIN_BYTES) {
        *class_bytes = S_MIN_BYTES;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(bytes - 1)); /* 2^e < bytes <= 2^(e+1) */
    size_t base = (size_t)1 << e, step = base >> S_STEP_SHIFT;
    size_t steps = (bytes - base + step - 1) / step; /* 1..S_STEPS */
    *class_bytes = base + steps * step;
    return (e - S_MIN_SHIFT) * S_STEPS + (int)steps;
}

size_t gpp_alloc_class_bytes(int cls)
{
    assert(cls >= 0 && cls < GPP_ALLOC_CLASS_COUNT);
    if (cls == 0)
        return S_MIN_BYTES;
    int e = (cls - 1) / S_STEPS + S_MIN_SHIFT, steps = (cls - 1) % S_STEPS + 1;
    size_t base = (size_t)1 << e;
    return base + (size_t)steps * (base >> S_STEP_SHIFT);
}

int64_t gpp_alloc_bytes(gpp_alloc_rule_t rule, int64_t bytes)
{
    assert(bytes >= 0);
    if (rule == GPP_ALLOC_CLASSES) {
        size_t cb;
        gpp_alloc_class((size_t)bytes, &cb);
        return (int64_t)cb;
    }
    return bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
}
