/* gpp_notify: sd_notify for the daemons. See gpp_notify.h. */
#include "common/gpp_notify.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "common/gpp_err.h"
#include "common/gpp_time.h"

static double s_last_ping_ms = -1; /* gpp_now_ms of the last WATCHDOG=1 */
static char s_last_status[256];

/* sd_notify's result as ours: >0 sent, 0 no manager, <0 -errno. */
static int s_send(const char *msg)
{
    const char *sock = getenv("NOTIFY_SOCKET");
    if (!sock || !sock[0])
        return 0;
    int r = sd_notify(0, msg);
    if (r < 0) {
        gpp_warn("systemd: sd_notify(\"%.40s\") to NOTIFY_SOCKET=%s failed: %s", msg, sock,
                 strerror(-r));
        return -1;
    }
    return r > 0 ? 1 : 0;
}

static int s_vsend(const char *prefix, const char *fmt, va_list ap)
{
    char text[200], msg[256];
    vsnprintf(text, sizeof text, fmt, ap);
    for (char *p = text; *p; p++) /* one line: the protocol is newline-separated */
        if (*p == '\n')
            *p = ' ';
    snprintf(msg, sizeof msg, "%sSTATUS=%s", prefix, text);
    return s_send(msg);
}

int gpp_notify_ready(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = s_vsend("READY=1\n", fmt, ap);
    va_end(ap);
    return r;
}

int gpp_notify_status(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = s_vsend("", fmt, ap);
    va_end(ap);
    return r;
}

int gpp_notify_stopping(void)
{
    return s_send("STOPPING=1");
}

int gpp_notify_watchdog_ms(void)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return 0;
    uint64_t ms = usec / 2000; /* half the interval, as sd_watchdog_enabled(3) advises */
    return ms < 1 ? 1 : ms > (uint64_t)INT32_MAX ? INT32_MAX : (int)ms;
}

int gpp_notify_tick(const char *status)
{
    int r = 0;
    if (status && strncmp(status, s_last_status, sizeof s_last_status) != 0) {
        snprintf(s_last_status, sizeof s_last_status, "%s", status);
        r = gpp_notify_status("%s", status);
    }
    int every = gpp_notify_watchdog_ms();
    if (every > 0) {
        double now = gpp_now_ms();
        if (s_last_ping_ms < 0 || now - s_last_ping_ms >= every) {
            s_last_ping_ms = now;
            int w = s_send("WATCHDOG=1");
            r = r < 0 || w < 0 ? -1 : (r > w ? r : w);
        }
    }
    return r;
}
