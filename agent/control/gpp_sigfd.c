/* gpp_sigfd: see gpp_sigfd.h. */
#include "agent/control/gpp_sigfd.h"

#include <czmq.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static void s_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGHUP);
}

int gpp_sigfd_open(gpp_err_t *err)
{
    /* CZMQ installs SIGINT/SIGTERM handlers on first use unless told not to;
     * with the signals blocked they would never run, but zloop would still
     * consult zsys_interrupted. Off, explicitly. */
    zsys_handler_set(NULL);
    sigset_t set;
    s_set(&set);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc != 0)
        return gpp_err_set(err, "pthread_sigmask: %s", strerror(rc));
    int fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        return gpp_err_set(err, "signalfd: %s", strerror(errno));
    return fd;
}

int gpp_sigfd_read(int fd)
{
    struct signalfd_siginfo si;
    ssize_t n = read(fd, &si, sizeof si);
    if (n == (ssize_t)sizeof si)
        return (int)si.ssi_signo;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -1;
}

void gpp_sigfd_reset_child(void)
{
    sigset_t set;
    s_set(&set);
    for (int s = 1; s < 32; s++)
        if (sigismember(&set, s))
            signal(s, SIG_DFL);
    sigemptyset(&set);
    sigprocmask(SIG_SETMASK, &set, NULL);
}
