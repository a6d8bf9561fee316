/* gpp_notify: the service manager protocol of systemd (sd_notify(3)) for
 * the daemons: READY=1 once they can serve (the coordinator once bound,
 * an agent once registered), STATUS= lines on state changes, WATCHDOG=1
 * pings at half of WatchdogSec= and STOPPING=1 on the way out.
 *
 * Every call is a no-op returning 0 when NOTIFY_SOCKET is unset (not run
 * by systemd with Type=notify, or run by hand): no error, nothing sent.
 * Calls come from one thread (the event loop's). */
#ifndef GPP_NOTIFY_H
#define GPP_NOTIFY_H

/* READY=1 with STATUS=<text>. 1 when sent, 0 when no manager listens,
 * -1 when sending failed (logged as a warning; the daemon carries on). */
int gpp_notify_ready(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* STATUS=<text>: what `systemctl status` shows. Same returns. */
int gpp_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* STOPPING=1: the daemon is shutting down. Same returns. */
int gpp_notify_stopping(void);

/* The watchdog ping interval in ms: half of the WATCHDOG_USEC systemd set
 * for this process (sd_watchdog_enabled(3)), 0 when there is no watchdog. */
int gpp_notify_watchdog_ms(void);

/* Called from a daemon's periodic timer (any period shorter than the
 * interval above): sends WATCHDOG=1 when half the watchdog interval passed
 * since the last ping, and STATUS=<status> when status differs from the
 * last one sent this way (NULL: none). Returns what the pings returned
 * (0 when nothing was due). */
int gpp_notify_tick(const char *status);

#endif
