#include "common/gpp_time.h"
#include <time.h>
double gpp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int64_t gpp_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int gpp_clock_est_add(gpp_clock_est_t *e, int64_t t0, int64_t t1, int64_t t2, int64_t t3)
{
    int64_t delay = (t3 - t0) - (t2 - t1);
    if (t3 < t0 || t2 < t1 || delay < 0)
        return -1;
    /* halves separately: no overflow of the sum for any clock value */
    int64_t offset = (t1 - t0) / 2 + (t2 - t3) / 2;
    int best = e->samples == 0 || delay < e->delay_us;
    e->samples++;
    if (best) {
        e->offset_us = offset;
        e->delay_us = delay;
    }
    return best;
}
