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
 * delay is kept. Clocks of two hosts also drift apart (crystal tolerances
 * are tens of ppm: 40 ppm is 2.4 ms a minute), so the least-delay sample of
 * each GPP_CLOCK_WINDOW_US window of our clock is kept too (the first
 * window, then the latest ones) and gpp_clock_est_offset_at fits a line
 * through them. Zero-initialise. */
#define GPP_CLOCK_WINDOWS 32
#define GPP_CLOCK_WINDOW_US 5000000LL
typedef struct {
    int64_t window;    /* our time / GPP_CLOCK_WINDOW_US */
    int64_t t_us;      /* our time of the sample: (t0 + t3) / 2 */
    int64_t offset_us; /* its offset and delay */
    int64_t delay_us;
} gpp_clock_sample_t;

typedef struct {
    int64_t offset_us; /* of the best sample */
    int64_t delay_us;  /* round trip less the peer's hold time, of the best sample */
    int samples;       /* plausible samples seen; 0: no estimate */
    gpp_clock_sample_t win[GPP_CLOCK_WINDOWS]; /* [0]: the first window; then the latest */
    int n_win;
} gpp_clock_est_t;

/* Adds one round trip: 1 when it became the best sample, 0 when kept the
 * older, -1 when it is impossible (t3 < t0, t2 < t1, or a negative delay)
 * and was ignored. */
int gpp_clock_est_add(gpp_clock_est_t *e, int64_t t0, int64_t t1, int64_t t2, int64_t t3);

/* The offset at our time t_us: with windows at least 1 s apart, the
 * weighted least-squares line through the windows' samples (weights
 * 1 / (delay/2 + 1 us)^2: each sample's error bound), its slope limited to
 * GPP_CLOCK_MAX_DRIFT_PPM; else the best sample's offset. 0 without any. */
#define GPP_CLOCK_MAX_DRIFT_PPM 500.0
int64_t gpp_clock_est_offset_at(const gpp_clock_est_t *e, int64_t t_us);
/* The fitted drift in ppm (peer runs faster: > 0); 0 without a fit. */
double gpp_clock_est_drift_ppm(const gpp_clock_est_t *e);
#ifdef __cplusplus
}
#endif

#endif
