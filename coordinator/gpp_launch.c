/* gpp_launch: see gpp_launch.h. */
#include "coordinator/gpp_launch.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/gpp_sigfd.h"

typedef struct {
    pid_t pid; /* 0: slot free */
    int tag;
} s_child_t;

struct gpp_launch_s {
    int n, cap;
    s_child_t *kids;
};

gpp_launch_t *gpp_launch_new(void)
{
    return gpp_xcalloc(1, sizeof(gpp_launch_t));
}

/* Sends sig to every live child. */
static void s_signal(gpp_launch_t *self, int sig)
{
    for (int i = 0; i < self->n; i++)
        if (self->kids[i].pid)
            kill(self->kids[i].pid, sig);
}

static void s_wait(gpp_launch_t *self, int ms)
{
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (int waited = 0;
         gpp_launch_reap(self, NULL, NULL) >= 0 && gpp_launch_live(self) && waited < ms;
         waited += 10)
        nanosleep(&ts, NULL);
}

/* Waits up to grace_ms for the children to exit by themselves, then sends
 * SIGTERM, waits grace_ms more, then SIGKILL; reaps everything. Blocks. */
static void s_stop(gpp_launch_t *self, int grace_ms)
{
    s_wait(self, grace_ms);
    if (!gpp_launch_live(self))
        return;
    s_signal(self, SIGTERM);
    s_wait(self, grace_ms);
    if (!gpp_launch_live(self))
        return;
    s_signal(self, SIGKILL);
    for (int i = 0; i < self->n; i++)
        if (self->kids[i].pid) {
            waitpid(self->kids[i].pid, NULL, 0);
            self->kids[i].pid = 0;
        }
}

void gpp_launch_destroy(gpp_launch_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    s_stop(*self_p, 2000);
    free((*self_p)->kids);
    free(*self_p);
    *self_p = NULL;
}

pid_t gpp_launch_spawn(gpp_launch_t *self, char *const argv[], int tag, int keep_fd, gpp_err_t *err)
{
    assert(self && argv && argv[0]);
    if (access(argv[0], X_OK) < 0)
        return gpp_err_set(err, "launch: cannot execute '%s': %s", argv[0], strerror(errno));
    if (self->n == self->cap) {
        self->cap = self->cap ? 2 * self->cap : 8;
        self->kids = gpp_xrealloc(self->kids, (size_t)self->cap * sizeof *self->kids);
    }
    fflush(NULL); /* no duplicated stdio buffers in the child */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return gpp_err_set(err, "launch: fork: %s", strerror(errno));
    if (pid == 0) {
        /* Child: async-signal-safe calls only until execv. */
        gpp_sigfd_reset_child();
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
            _exit(127);
        /* descriptor flags are per process: only this child keeps it */
        if (keep_fd >= 0 && fcntl(keep_fd, F_SETFD, 0) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    self->kids[self->n].pid = pid;
    self->kids[self->n].tag = tag;
    self->n++;
    return pid;
}

int gpp_launch_reap(gpp_launch_t *self, gpp_launch_exit_fn *fn, void *arg)
{
    int reaped = 0;
    for (int i = 0; i < self->n; i++) {
        s_child_t *c = &self->kids[i];
        if (!c->pid)
            continue;
        int status = 0;
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid || (r < 0 && errno == ECHILD)) {
            pid_t pid = c->pid;
            c->pid = 0;
            reaped++;
            if (fn)
                fn(arg, c->tag, pid, r == pid ? status : 0);
        }
    }
    return reaped;
}

pid_t gpp_launch_kill(gpp_launch_t *self, int tag, int sig)
{
    for (int i = 0; i < self->n; i++)
        if (self->kids[i].pid && self->kids[i].tag == tag) {
            kill(self->kids[i].pid, sig);
            return self->kids[i].pid;
        }
    return 0;
}

int gpp_launch_live(const gpp_launch_t *self)
{
    int live = 0;
    for (int i = 0; i < self->n; i++)
        live += self->kids[i].pid != 0;
    return live;
}

const char *gpp_launch_status_str(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "ended with wait status 0x%x", status);
    return buf;
}
