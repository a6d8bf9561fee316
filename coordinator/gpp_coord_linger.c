/* gpp_coord_linger: the coordinator after its job ended (gpp_coord.h,
 * gpp_coord_linger). Its loop has stopped, so the control ROUTER is polled
 * here: monitors' requests are answered with the final state (a job done
 * or stopped, the stop reason, the last iteration, agents down) so that
 * gpp-top shows the end instead of losing the coordinator at once. */
#include <czmq.h>
#include <signal.h>

#include "common/gpp_sigfd.h"
#include "common/gpp_time.h"
#include "common/gpp_zsock.h"
#include "coordinator/gpp_coord_imp.h"

int gpp_coord_linger(gpp_coord_t *self, int ms, int sigfd)
{
    zmq_pollitem_t it[2] = {{zsock_resolve(self->router), 0, ZMQ_POLLIN, 0},
                            {NULL, sigfd, ZMQ_POLLIN, 0}};
    for (double end = gpp_now_ms() + ms, now; (now = gpp_now_ms()) < end;) {
        if (zmq_poll(it, sigfd >= 0 ? 2 : 1, (long)(end - now) + 1) <= 0)
            continue; /* timed out, or EINTR: the signal is on sigfd */
        if (it[1].revents & ZMQ_POLLIN) {
            int sig;
            while ((sig = gpp_sigfd_read(sigfd)) > 0)
                if (sig != SIGCHLD) /* a child reaped late: the launcher's, at its destroy */
                    return 1;
        }
        /* what waits: the handlers' return (the loop's end) is moot here */
        if (it[0].revents & ZMQ_POLLIN)
            gpp_zsock_read_queued(self->router, GPP_ZSOCK_QUEUED_MAX, gpp_coord_on_router, self);
    }
    return 0;
}
