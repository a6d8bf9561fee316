/* gpp_time: monotonic clock in the units the names say. */
#ifndef GPP_TIME_H
#define GPP_TIME_H

#ifdef __cplusplus
extern "C" {
#endif
#include <stdint.h>
double gpp_now_ms(void);   /* CLOCK_MONOTONIC, milliseconds */
#ifdef __cplusplus
}
#endif

#endif
