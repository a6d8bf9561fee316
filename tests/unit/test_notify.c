/* test_notify: the sd_notify messages of common/gpp_notify.h, received on a
 * unix datagram socket set as NOTIFY_SOCKET (what systemd does for a
 * Type=notify unit): READY=1 with STATUS, STATUS alone, STOPPING=1, the
 * watchdog interval from WATCHDOG_USEC/WATCHDOG_PID, WATCHDOG=1 pings only
 * when due, STATUS from the tick only on a change, and nothing at all (0
 * returned) without NOTIFY_SOCKET. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/gpp_notify.h"
#include "tests/gpp_test.h"

static int s_fd = -1;
static char s_path[108];

static void s_open(void)
{
    snprintf(s_path, sizeof s_path, "/tmp/gpp_test_notify.%d", (int)getpid());
    unlink(s_path);
    s_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", s_path);
    if (s_fd < 0 || bind(s_fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("test_notify: socket");
        exit(1);
    }
    setenv("NOTIFY_SOCKET", s_path, 1);
}

/* The next datagram ("" when none is queued: sd_notify sends before it
 * returns, so whatever was sent is there). */
static const char *s_recv(void)
{
    static char buf[512];
    ssize_t n = recv(s_fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static void t_ready(void)
{
    GPP_EXPECT(gpp_notify_ready("registered as rank %d of %d", 1, 2) == 1);
    const char *m = s_recv();
    GPP_EXPECT_MSG(strcmp(m, "READY=1\nSTATUS=registered as rank 1 of 2") == 0, "%s", m);
    GPP_EXPECT(strcmp(s_recv(), "") == 0);
}

static void t_status_one_line(void)
{
    GPP_EXPECT(gpp_notify_status("two\nlines") == 1);
    const char *m = s_recv();
    GPP_EXPECT_MSG(strcmp(m, "STATUS=two lines") == 0, "%s", m);
    GPP_EXPECT(gpp_notify_stopping() == 1);
    m = s_recv();
    GPP_EXPECT_MSG(strcmp(m, "STOPPING=1") == 0, "%s", m);
}

static void t_watchdog_interval(void)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    unsetenv("WATCHDOG_USEC");
    GPP_EXPECT(gpp_notify_watchdog_ms() == 0);
    setenv("WATCHDOG_USEC", "30000000", 1); /* WatchdogSec=30 */
    setenv("WATCHDOG_PID", pid, 1);
    GPP_EXPECT(gpp_notify_watchdog_ms() == 15000);
    setenv("WATCHDOG_PID", "1", 1); /* meant for another process */
    GPP_EXPECT(gpp_notify_watchdog_ms() == 0);
    unsetenv("WATCHDOG_PID"); /* no PID: ours */
    GPP_EXPECT(gpp_notify_watchdog_ms() == 15000);
}

static void t_tick(void)
{
    unsetenv("WATCHDOG_PID");
    setenv("WATCHDOG_USEC", "600000000", 1); /* 10 min: the second tick is not due */
    GPP_EXPECT(gpp_notify_tick("waiting") == 1);
    const char *m = s_recv();
    GPP_EXPECT_MSG(strcmp(m, "STATUS=waiting") == 0, "%s", m);
    m = s_recv();
    GPP_EXPECT_MSG(strcmp(m, "WATCHDOG=1") == 0, "%s", m);
    GPP_EXPECT(gpp_notify_tick("waiting") == 0); /* same status, ping not due */
    GPP_EXPECT(strcmp(s_recv(), "") == 0);
    GPP_EXPECT(gpp_notify_tick("training") == 1);
    m = s_recv();
    GPP_EXPECT_MSG(strcmp(m, "STATUS=training") == 0, "%s", m);
    GPP_EXPECT(strcmp(s_recv(), "") == 0);
    /* WATCHDOG_USEC=2000: a ping every 1 ms; 5 ms later one is due */
    setenv("WATCHDOG_USEC", "2000", 1);
    usleep(5000);
    GPP_EXPECT(gpp_notify_tick(NULL) == 1);
    m = s_recv();
    GPP_EXPECT_MSG(strcmp(m, "WATCHDOG=1") == 0, "%s", m);
    unsetenv("WATCHDOG_USEC");
    GPP_EXPECT(gpp_notify_tick(NULL) == 0);
    GPP_EXPECT(strcmp(s_recv(), "") == 0);
}

static void t_no_socket(void)
{
    unsetenv("NOTIFY_SOCKET");
    setenv("WATCHDOG_USEC", "2000", 1);
    usleep(5000);
    GPP_EXPECT(gpp_notify_ready("x") == 0);
    GPP_EXPECT(gpp_notify_status("y") == 0);
    GPP_EXPECT(gpp_notify_stopping() == 0);
    GPP_EXPECT(gpp_notify_tick("z") == 0);
    GPP_EXPECT(strcmp(s_recv(), "") == 0);
    unsetenv("WATCHDOG_USEC");
}

/* a NOTIFY_SOCKET nobody listens on: -1 and a warning, no crash */
static void t_dead_socket(void)
{
    setenv("NOTIFY_SOCKET", "/nonexistent/gpp_notify.sock", 1);
    GPP_EXPECT(gpp_notify_ready("x") == -1);
    unsetenv("NOTIFY_SOCKET");
}

static const gpp_test_case_t cases[] = {
    {"ready", t_ready},
    {"status_one_line", t_status_one_line},
    {"watchdog_interval", t_watchdog_interval},
    {"tick", t_tick},
    {"no_socket", t_no_socket},
    {"dead_socket", t_dead_socket},
    {NULL, NULL},
};

int main(void)
{
    s_open();
    int rc = gpp_test_run(cases);
    close(s_fd);
    unlink(s_path);
    return rc;
}
