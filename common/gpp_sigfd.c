/* gpp_sigfd: see gpp_sigfd.h.
 *
 * A self-pipe rather than signalfd(2): signalfd needs the signals blocked in
 * every thread, and libraries start threads before main (OpenBLAS's pool is
 * made by a constructor), so a blocked mask cannot be guaranteed. A handler
 * installed with sigaction runs in whichever thread takes the signal and
 * only writes the signal number to the pipe (async-signal-safe). */
#include "common/gpp_sigfd.h"

#include <czmq.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int s_pipe[2] = {-1, -1};
static const int s_sigs[] = {SIGINT, SIGTERM, SIGCHLD, SIGHUP};
#define S_NSIGS ((int)(sizeof s_sigs / sizeof s_sigs[0]))

static void s_handler(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(s_pipe[1], &b, 1); /* full pipe: the signal is already pending there */
    (void)w;
    errno = saved;
}

int gpp_sigfd_open(gpp_err_t *err)
{
    /* CZMQ installs SIGINT/SIGTERM handlers on first use unless told not to */
    zsys_handler_set(NULL);
    if (s_pipe[0] >= 0)
        return gpp_err_set(err, "gpp_sigfd_open: already open");
    if (pipe2(s_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
        return gpp_err_set(err, "pipe2: %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_handler;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < S_NSIGS; i++)
        if (sigaction(s_sigs[i], &sa, NULL) < 0)
            return gpp_err_set(err, "sigaction(%d): %s", s_sigs[i], strerror(errno));
    /* EPIPE from the write, not a death by signal (gpp_sigfd.h) */
    sa.sa_handler = SIG_IGN;
    sa.sa_flags = 0;
    if (sigaction(SIGPIPE, &sa, NULL) < 0)
        return gpp_err_set(err, "sigaction(SIGPIPE): %s", strerror(errno));
    return s_pipe[0];
}

int gpp_sigfd_read(int fd)
{
    unsigned char b;
    ssize_t n = read(fd, &b, 1);
    if (n == 1)
        return b;
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    return -1;
}

void gpp_sigfd_mask(int how)
{
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < S_NSIGS; i++)
        sigaddset(&set, s_sigs[i]);
    pthread_sigmask(how, &set, NULL);
}

void gpp_sigfd_run_loop(void *loop)
{
    while (zloop_start((zloop_t *)loop) == 0)
        ; /* interrupted by a signal: its number waits in the pipe */
}

void gpp_sigfd_reset_child(void)
{
    for (int i = 0; i < S_NSIGS; i++)
        signal(s_sigs[i], SIG_DFL);
    signal(SIGPIPE, SIG_DFL); /* an ignored signal stays ignored across execve */
    sigset_t set;
    sigemptyset(&set);
    sigprocmask(SIG_SETMASK, &set, NULL);
}
