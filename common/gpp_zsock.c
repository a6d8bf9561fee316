/* gpp_zsock: see gpp_zsock.h. */
#include "common/gpp_zsock.h"

#include <assert.h>

int gpp_zsock_read_queued(zsock_t *sock, int max, zloop_reader_fn *fn, void *arg)
{
    assert(sock && fn && max >= 0);
    zmq_pollitem_t it = {zsock_resolve(sock), 0, ZMQ_POLLIN, 0};
    int n = 0;
    while (n < max) {
        it.revents = 0;
        if (zmq_poll(&it, 1, 0) <= 0 || !(it.revents & ZMQ_POLLIN))
            break;
        n++;
        if (fn(NULL, sock, arg) < 0)
            return -1;
    }
    return n;
}
