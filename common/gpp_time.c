#include "common/gpp_time.h"
#include <math.h>
#include <string.h>
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
    int64_t t = t0 / 2 + t3 / 2, w = t / GPP_CLOCK_WINDOW_US;
    gpp_clock_sample_t x = {w, t, offset, delay};
    gpp_clock_sample_t *last = e->n_win ? &e->win[e->n_win - 1] : NULL;
    if (last && last->window == w) {
        if (delay < last->delay_us)
            *last = x;
    } else {
        if (e->n_win == GPP_CLOCK_WINDOWS) { /* keep the first: the longest baseline */
            memmove(&e->win[1], &e->win[2], (GPP_CLOCK_WINDOWS - 2) * sizeof e->win[0]);
            e->n_win--;
        }
        e->win[e->n_win++] = x;
    }
    return best;
}

/* Weighted least squares through the windows (times relative to the
 * first, in seconds, and offsets relative to it, in us, so that doubles
 * keep every digit); 0 when the windows span less than 1 s. */
static int s_fit(const gpp_clock_est_t *e, double *slope_us_per_s, double *t_mean_s,
                 double *o_mean_us)
{
    if (e->n_win < 2 || e->win[e->n_win - 1].t_us - e->win[0].t_us < 1000000)
        return 0;
    double sw = 0, st = 0, so = 0;
    for (int i = 0; i < e->n_win; i++) {
        double h = (double)e->win[i].delay_us / 2 + 1, w = 1 / (h * h);
        sw += w;
        st += w * (double)(e->win[i].t_us - e->win[0].t_us) / 1e6;
        so += w * (double)(e->win[i].offset_us - e->win[0].offset_us);
    }
    double tm = st / sw, om = so / sw, stt = 0, sto = 0;
    for (int i = 0; i < e->n_win; i++) {
        double h = (double)e->win[i].delay_us / 2 + 1, w = 1 / (h * h);
        double dt = (double)(e->win[i].t_us - e->win[0].t_us) / 1e6 - tm;
        stt += w * dt * dt;
        sto += w * dt * ((double)(e->win[i].offset_us - e->win[0].offset_us) - om);
    }
    if (!(stt > 0))
        return 0;
    double k = sto / stt; /* us per s = ppm */
    if (k > GPP_CLOCK_MAX_DRIFT_PPM)
        k = GPP_CLOCK_MAX_DRIFT_PPM;
    if (k < -GPP_CLOCK_MAX_DRIFT_PPM)
        k = -GPP_CLOCK_MAX_DRIFT_PPM;
    *slope_us_per_s = k, *t_mean_s = tm, *o_mean_us = om;
    return 1;
}

int64_t gpp_clock_est_offset_at(const gpp_clock_est_t *e, int64_t t_us)
{
    double k, tm, om;
    if (!e->samples)
        return 0;
    if (!s_fit(e, &k, &tm, &om))
        return e->offset_us;
    double dt = (double)(t_us - e->win[0].t_us) / 1e6 - tm;
    return e->win[0].offset_us + (int64_t)llround(om + k * dt);
}

double gpp_clock_est_drift_ppm(const gpp_clock_est_t *e)
{
    double k, tm, om;
    return s_fit(e, &k, &tm, &om) ? k : 0;
}
