/* gpp_time: monotonic clock in the units the names say, and the NTP-style
 * estimate of another host's monotonic clock from timed round trips. */
#ifndef GPP_TIME_H
#define GPP_TIME_H

#ifdef __cplusplus
extern "C" {
#endif
#include <stdint.h>
double gpp_now_ms(void);  /* CLOCK_MONOTONIC, milliseconds */
int64_t gpp_now_us(void); /* CLOCK_MONOTONIC, microseconds */

/* A peer's clock relative to ours: peer time = our time + offset_us. Each
 * round trip gives t0 (we sent), t1 (peer received), t2 (peer sent), t3 (we
 * received); t0, t3 on our clock, t1, t2 on the peer's:
 *   offset = ((t1 - t0) + (t2 - t3)) / 2,  delay = (t3 - t0) - (t2 - t1).
 * The offset's error is at most delay / 2, so the sample with the smallest
 * delay is kept. Zero-initialise. */
typedef struct {
    int64_t offset_us; /* of the best sample */
    int64_t delay_us;  /* round trip less the peer's hold time, of the best sample */
    int samples;       /* plausible samples seen; 0: no estimate */
} gpp_clock_est_t;

/* Adds one round trip: 1 when it became the best sample, 0 when kept the
 * older, -1 when it is impossible (t3 < t0, t2 < t1, or a negative delay)
 * and was ignored. */
int gpp_clock_est_add(gpp_clock_est_t *e, int64_t t0, int64_t t1, int64_t t2, int64_t t3);
#ifdef __cplusplus
}
#endif

#endif
