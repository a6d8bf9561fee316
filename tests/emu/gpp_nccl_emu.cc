/* gpp_nccl_emu: the NCCL functions the NCCL comm backend calls
 * (agent/comm/gpp_comm_nccl.c, S_NCCL_FNS), emulated on the host between
 * processes, so that the NCCL data plane between agents runs where there is
 * no GPU (docs/gpu.md "The host emulation"). Handed to gpp_comm_nccl.c
 * through the weak hook gpp_nccl_builtin_sym instead of dlopen'ing libnccl;
 * linked only into the emulated builds (library gpp_cuda_emu).
 *
 * Ranks are processes. A communicator's ranks meet by its ncclUniqueId
 * (random bytes): each listens on a Unix socket of the abstract namespace
 * named from the id and its rank (nothing to clean up in the file system),
 * connects to every other rank and sends a hello with its rank and CUDA
 * device. A receiver thread per communicator drains every incoming
 * connection into in-memory queues per source rank and channel (point to
 * point, collectives), so a send never waits for the matching receive (two
 * ranks sending each other large messages in one group do not deadlock),
 * and notices a peer that goes away: end of file without the goodbye that
 * ncclCommFinalize/Destroy send makes ncclCommGetAsyncError report
 * ncclRemoteError. As NCCL, ranks of one communicator on the same device
 * are refused at initialisation (ncclInvalidUsage).
 *
 * Every data operation is queued on its stream (gpp_emu::enqueue) and reads
 * or writes device memory only when the stream runs it; inside
 * ncclGroupStart/End the operations are collected and queued as one task
 * that does every send first (collectives: this rank's contribution to every
 * peer), then the receives and the collectives' results. Messages between
 * two ranks match in posting order, as in NCCL; a receive whose matching
 * send has another size fails (ncclInvalidUsage; NCCL leaves it undefined).
 * All-reduce sums float32 in rank order (every rank gets the same bits);
 * other reductions and types are refused (ncclInvalidArgument): the comm
 * backend uses none.
 *
 * A task runs under the emulated runtime's process-wide lock, and a receive
 * in it blocks until its data arrives, the peer goes away or the
 * communicator is aborted: ncclCommAbort may come from another thread and
 * takes no lock of the runtime. A failed operation leaves its output as it
 * was and makes the communicator's asynchronous error sticky. */
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "agent/comm/gpp_comm_nccl.h"
#include "tests/emu/gpp_emu_rt.h"

namespace
{

/* ---- last error (ncclGetLastError: one per process, as NCCL's) ---- */

std::mutex g_err_mu;
char g_last[512];

ncclResult_t s_fail(ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ncclResult_t s_fail(ncclResult_t r, const char *fmt, ...)
{
    std::lock_guard<std::mutex> l(g_err_mu);
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(g_last, sizeof g_last, fmt, ap);
    va_end(ap);
    return r;
}

/* ---- wire: a 24-byte header, then `bytes` of payload ---- */

enum : uint32_t { WIRE_MAGIC = 0x6e63656d /* "ncem" */ };
enum kind_t : uint32_t { K_HELLO = 1, K_DATA = 2, K_BYE = 3 };
enum chan_t : uint32_t { CH_P2P = 0, CH_COLL = 1, CH_N = 2 };
struct wire_hdr {
    uint32_t magic, kind, chan, src;
    uint64_t bytes;
};
struct hello {
    int32_t rank, device;
};

bool s_write_all(int fd, const void *p, size_t n)
{
    const char *c = (const char *)p;
    while (n > 0) {
        ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

/* ---- a communicator ---- */

struct peer_t {
    std::deque<std::vector<char>> q[CH_N]; /* messages received, in order */
    bool hello = false, bye = false, eof = false;
    int device = -1;
};

/* an incoming connection, read by the receiver thread */
struct conn_t {
    int fd = -1, src = -1;
    wire_hdr h{};
    size_t got_h = 0, got_p = 0;
    std::vector<char> payload;
};

struct state {
    int n = 0, rank = 0, device = 0;
    std::string sock_base; /* abstract socket name without the rank */
    int lfd = -1, wake[2] = {-1, -1};
    std::vector<int> out; /* connected socket per peer; -1 for self */
    std::vector<peer_t> peers;
    std::mutex mu;  /* peers, out, async, aborted, finalized */
    std::mutex wmu; /* one frame at a time on the outgoing sockets */
    std::condition_variable cv;
    ncclResult_t async = ncclInProgress;
    std::atomic<bool> stop{false};
    bool aborted = false, finalized = false;
    std::thread rx, init;
    std::atomic<bool> down{false};

    ~state()
    {
        for (int fd : out)
            if (fd >= 0)
                ::close(fd);
        if (lfd >= 0)
            ::close(lfd);
        for (int fd : wake)
            if (fd >= 0)
                ::close(fd);
    }

    std::string sock_name(int r) const
    {
        return sock_base + "." + std::to_string(r);
    }

    /* a sticky asynchronous error (the first one is kept) */
    void set_error(ncclResult_t r)
    {
        std::lock_guard<std::mutex> l(mu);
        if (async == ncclSuccess || async == ncclInProgress)
            async = r;
        cv.notify_all();
    }

    void receiver();
    void initialise();
    void shutdown(bool abort);
    ncclResult_t send_msg(int peer, chan_t ch, const void *p, size_t bytes);
    ncclResult_t recv_msg(int peer, chan_t ch, std::vector<char> *m, const char *what);
};

/* the handle: the state lives on while a queued task still holds it */
} /* namespace */

struct ncclComm {
    std::shared_ptr<state> s;
};

namespace
{

socklen_t s_addr(const std::string &name, sockaddr_un *a)
{
    std::memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    /* abstract namespace: a leading NUL, no file */
    size_t n = name.size() < sizeof a->sun_path - 1 ? name.size() : sizeof a->sun_path - 1;
    std::memcpy(a->sun_path + 1, name.data(), n);
    return (socklen_t)(offsetof(sockaddr_un, sun_path) + 1 + n);
}

/* Reads every incoming connection into the peers' queues until stopped. */
void state::receiver()
{
    std::vector<conn_t> conns;
    while (!stop.load()) {
        std::vector<pollfd> pf;
        pf.push_back({wake[0], POLLIN, 0});
        pf.push_back({lfd, POLLIN, 0});
        for (conn_t &c : conns)
            pf.push_back({c.fd, POLLIN, 0});
        if (::poll(pf.data(), pf.size(), -1) < 0 && errno != EINTR)
            break;
        if (stop.load())
            break;
        if (pf[1].revents & POLLIN) {
            int fd = ::accept(lfd, nullptr, nullptr);
            if (fd >= 0) {
                conn_t c;
                c.fd = fd;
                conns.push_back(std::move(c));
            }
        }
        for (size_t i = 0; i < conns.size(); i++) {
            conn_t &c = conns[i];
            if (!(pf[2 + i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k;
            if (c.got_h < sizeof c.h)
                k = ::read(c.fd, (char *)&c.h + c.got_h, sizeof c.h - c.got_h);
            else
                k = ::read(c.fd, c.payload.data() + c.got_p, c.payload.size() - c.got_p);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) { /* end of file: a goodbye first, or the peer is gone */
                std::lock_guard<std::mutex> l(mu);
                if (c.src >= 0) {
                    peers[(size_t)c.src].eof = true;
                    /* the first error only: the last error names the comm's error;
                     * during the initialisation, initialise() decides */
                    if (!peers[(size_t)c.src].bye && !aborted && async == ncclSuccess) {
                        s_fail(ncclRemoteError,
                               "gpp_nccl_emu rank %d: rank %d closed its connection without "
                               "ncclCommFinalize/ncclCommDestroy (its process exited or "
                               "aborted)",
                               rank, c.src);
                        async = ncclRemoteError;
                    }
                }
                cv.notify_all();
                ::close(c.fd);
                conns.erase(conns.begin() + (long)i);
                break; /* the poll set changed */
            }
            if (c.got_h < sizeof c.h) {
                c.got_h += (size_t)k;
                if (c.got_h < sizeof c.h)
                    continue;
                if (c.h.magic != WIRE_MAGIC || c.h.src >= (uint32_t)n || c.h.chan >= CH_N ||
                    (c.src >= 0 && c.h.src != (uint32_t)c.src)) {
                    /* not a peer of this communicator: dropped, the initialisation or
                     * the receives waiting for it fail */
                    s_fail(ncclSystemError,
                           "gpp_nccl_emu rank %d: a malformed frame on a connection (not a "
                           "rank of this communicator?): connection dropped",
                           rank);
                    set_error(ncclSystemError);
                    ::close(c.fd);
                    conns.erase(conns.begin() + (long)i);
                    break;
                }
                c.payload.assign(c.h.bytes, 0);
                c.got_p = 0;
            } else {
                c.got_p += (size_t)k;
            }
            if (c.got_p < c.payload.size())
                continue;
            /* a whole frame */
            std::lock_guard<std::mutex> l(mu);
            peer_t &p = peers[c.h.src];
            if (c.h.kind == K_HELLO && c.payload.size() == sizeof(hello)) {
                hello hl;
                std::memcpy(&hl, c.payload.data(), sizeof hl);
                c.src = (int)c.h.src;
                p.hello = true;
                p.device = hl.device;
            } else if (c.h.kind == K_DATA) {
                p.q[c.h.chan].push_back(std::move(c.payload));
            } else if (c.h.kind == K_BYE) {
                p.bye = true;
            }
            c.payload.clear();
            c.got_h = c.got_p = 0;
            cv.notify_all();
        }
    }
    for (conn_t &c : conns)
        ::close(c.fd);
}

/* Connects to every other rank, says hello, waits for every hello, checks
 * the devices. Runs on its own thread (non-blocking initialisation). */
void state::initialise()
{
    hello me{rank, device};
    for (int r = 0; r < n && !stop.load(); r++) {
        if (r == rank)
            continue;
        int fd = -1;
        while (!stop.load()) { /* until the peer listens */
            fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            sockaddr_un a;
            socklen_t len = s_addr(sock_name(r), &a);
            if (fd >= 0 && ::connect(fd, (sockaddr *)&a, len) == 0)
                break;
            if (fd >= 0)
                ::close(fd);
            fd = -1;
            usleep(2000);
        }
        if (fd < 0)
            break;
        wire_hdr h{WIRE_MAGIC, K_HELLO, CH_P2P, (uint32_t)rank, sizeof me};
        bool said = s_write_all(fd, &h, sizeof h) && s_write_all(fd, &me, sizeof me);
        int e = errno;
        {
            std::lock_guard<std::mutex> l(mu); /* published after the hello: frames whole */
            out[(size_t)r] = fd;
        }
        if (!said) {
            s_fail(ncclSystemError, "gpp_nccl_emu rank %d: hello to rank %d: %s", rank, r,
                   std::strerror(e));
            set_error(ncclSystemError);
            return;
        }
    }
    std::unique_lock<std::mutex> l(mu);
    auto all_hello = [&] {
        for (int r = 0; r < n; r++)
            if (r != rank && !peers[(size_t)r].hello)
                return false;
        return true;
    };
    /* from every peer: its hello, or its end */
    auto heard = [&] {
        for (int r = 0; r < n; r++)
            if (r != rank && !peers[(size_t)r].hello && !peers[(size_t)r].eof)
                return false;
        return true;
    };
    cv.wait(l, [&] { return stop.load() || async != ncclInProgress || heard(); });
    if (stop.load())
        return;
    /* checked even when a peer has gone meanwhile: a peer that found the clash
     * first aborts, and the clash is the cause */
    for (int r = 0; r < n && all_hello(); r++)
        if (r != rank && peers[(size_t)r].device == device) {
            s_fail(ncclInvalidUsage,
                   "gpp_nccl_emu: ranks %d and %d of one communicator both use CUDA device %d "
                   "(NCCL refuses two ranks on one GPU: give each rank its own device)",
                   rank < r ? rank : r, rank < r ? r : rank, device);
            async = ncclInvalidUsage;
            cv.notify_all();
            return;
        }
    for (int r = 0; r < n && async == ncclInProgress; r++)
        if (r != rank && peers[(size_t)r].eof && !peers[(size_t)r].bye) {
            s_fail(ncclRemoteError,
                   "gpp_nccl_emu rank %d: rank %d closed its connection during the "
                   "initialisation (its process exited or aborted)",
                   rank, r);
            async = ncclRemoteError;
        }
    if (async == ncclInProgress)
        async = ncclSuccess;
    cv.notify_all();
}

/* Stops the threads and wakes every wait (idempotent; from any thread,
 * taking no lock of the emulated runtime). abort: no goodbye, so the peers
 * see the connections end as a failure. */
void state::shutdown(bool abort)
{
    if (down.exchange(true))
        return;
    std::vector<int> fds;
    {
        std::lock_guard<std::mutex> l(mu);
        if (abort)
            aborted = true;
        stop.store(true);
        cv.notify_all();
        fds = out;
    }
    char b = 1;
    if (::write(wake[1], &b, 1) < 0) { /* the pipe is never full: one byte per shutdown */
    }
    for (int fd : fds)
        if (fd >= 0)
            ::shutdown(fd, SHUT_RDWR); /* wakes a send blocked on a full socket */
    if (init.joinable() && init.get_id() != std::this_thread::get_id())
        init.join();
    if (rx.joinable() && rx.get_id() != std::this_thread::get_id())
        rx.join();
}

ncclResult_t state::send_msg(int peer, chan_t ch, const void *p, size_t bytes)
{
    if (peer == rank) {
        std::lock_guard<std::mutex> l(mu);
        peers[(size_t)peer].q[ch].emplace_back((const char *)p, (const char *)p + bytes);
        cv.notify_all();
        return ncclSuccess;
    }
    int fd;
    {
        std::lock_guard<std::mutex> l(mu);
        if (stop.load())
            return s_fail(ncclInvalidUsage, "gpp_nccl_emu rank %d: the communicator was %s", rank,
                          aborted ? "aborted" : "destroyed");
        fd = out[(size_t)peer];
    }
    wire_hdr h{WIRE_MAGIC, K_DATA, ch, (uint32_t)rank, bytes};
    std::unique_lock<std::mutex> w(wmu);
    bool sent = fd >= 0 && s_write_all(fd, &h, sizeof h) && s_write_all(fd, p, bytes);
    int e = errno;
    w.unlock();
    if (!sent)
        return s_fail(ncclRemoteError, "gpp_nccl_emu rank %d: send of %zu bytes to rank %d: %s",
                      rank, bytes, peer, fd < 0 ? "not connected" : std::strerror(e));
    return ncclSuccess;
}

ncclResult_t state::recv_msg(int peer, chan_t ch, std::vector<char> *m, const char *what)
{
    std::unique_lock<std::mutex> l(mu);
    peer_t &p = peers[(size_t)peer];
    cv.wait(l, [&] { return !p.q[ch].empty() || stop.load() || p.eof || p.bye; });
    if (!p.q[ch].empty()) {
        *m = std::move(p.q[ch].front());
        p.q[ch].pop_front();
        return ncclSuccess;
    }
    if (stop.load())
        return s_fail(ncclInvalidUsage,
                      "gpp_nccl_emu rank %d: %s from rank %d: the communicator "
                      "was %s while it waited",
                      rank, what, peer, aborted ? "aborted" : "destroyed");
    return s_fail(ncclRemoteError, "gpp_nccl_emu rank %d: %s from rank %d: the peer %s", rank, what,
                  peer, p.bye ? "finalized its communicator" : "is gone");
}

/* ---- operations and groups ---- */

enum op_kind { OP_SEND, OP_RECV, OP_ALLREDUCE, OP_ALLGATHER };
struct op_t {
    op_kind kind;
    std::shared_ptr<state> s;
    const char *sbuf;
    char *rbuf;
    size_t count, esize;
    int peer;
    cudaStream_t stream;
};

thread_local int g_depth;
thread_local std::vector<op_t> g_ops;
thread_local ncclResult_t g_group_err = ncclSuccess;

const char *s_op_name(op_kind k)
{
    return k == OP_SEND        ? "ncclSend"
           : k == OP_RECV      ? "ncclRecv"
           : k == OP_ALLREDUCE ? "ncclAllReduce"
                               : "ncclAllGather";
}

/* Runs one group (on its stream, under the runtime's lock): every send and
 * contribution first, then the receives and results. */
void s_run(std::vector<op_t> &ops)
{
    std::vector<std::vector<char>> mine(ops.size());
    std::vector<bool> failed(ops.size(), false);
    auto fail = [&](size_t i, ncclResult_t r) {
        failed[i] = true;
        ops[i].s->set_error(r);
    };
    for (size_t i = 0; i < ops.size(); i++) {
        op_t &o = ops[i];
        state &s = *o.s;
        size_t bytes = o.count * o.esize;
        if (o.kind == OP_SEND) {
            ncclResult_t r = s.send_msg(o.peer, CH_P2P, o.sbuf, bytes);
            if (r != ncclSuccess)
                fail(i, r);
        } else if (o.kind == OP_ALLREDUCE || o.kind == OP_ALLGATHER) {
            mine[i].assign(o.sbuf, o.sbuf + bytes); /* in place: read before anything is written */
            for (int p = 0; p < s.n && !failed[i]; p++)
                if (p != s.rank) {
                    ncclResult_t r = s.send_msg(p, CH_COLL, mine[i].data(), bytes);
                    if (r != ncclSuccess)
                        fail(i, r);
                }
        }
    }
    for (size_t i = 0; i < ops.size(); i++) {
        op_t &o = ops[i];
        state &s = *o.s;
        size_t bytes = o.count * o.esize;
        if (failed[i] || o.kind == OP_SEND)
            continue;
        if (o.kind == OP_RECV) {
            std::vector<char> m;
            ncclResult_t r = s.recv_msg(o.peer, CH_P2P, &m, "ncclRecv");
            if (r == ncclSuccess && m.size() != bytes)
                r = s_fail(ncclInvalidUsage,
                           "gpp_nccl_emu rank %d: ncclRecv of %zu bytes from rank %d matched a "
                           "ncclSend of %zu bytes (messages match in posting order)",
                           s.rank, bytes, o.peer, m.size());
            if (r != ncclSuccess)
                fail(i, r);
            else if (bytes)
                std::memcpy(o.rbuf, m.data(), bytes);
            continue;
        }
        /* every rank's contribution, in rank order */
        std::vector<std::vector<char>> all((size_t)s.n);
        ncclResult_t r = ncclSuccess;
        for (int p = 0; p < s.n && r == ncclSuccess; p++) {
            if (p == s.rank) {
                all[(size_t)p] = mine[i];
                continue;
            }
            r = s.recv_msg(p, CH_COLL, &all[(size_t)p], s_op_name(o.kind));
            if (r == ncclSuccess && all[(size_t)p].size() != bytes)
                r = s_fail(ncclInvalidUsage,
                           "gpp_nccl_emu rank %d: %s of %zu bytes got %zu bytes from rank %d "
                           "(the ranks called collectives in different orders or sizes)",
                           s.rank, s_op_name(o.kind), bytes, all[(size_t)p].size(), p);
        }
        if (r != ncclSuccess) {
            fail(i, r);
            continue;
        }
        if (o.kind == OP_ALLGATHER) {
            for (int p = 0; p < s.n; p++)
                if (bytes)
                    std::memcpy(o.rbuf + (size_t)p * bytes, all[(size_t)p].data(), bytes);
            continue;
        }
        std::vector<float> sum(o.count);
        if (bytes)
            std::memcpy(sum.data(), all[0].data(), bytes);
        for (int p = 1; p < s.n; p++) {
            const float *x = (const float *)(const void *)all[(size_t)p].data();
            for (size_t k = 0; k < o.count; k++)
                sum[k] += x[k];
        }
        if (bytes)
            std::memcpy(o.rbuf, sum.data(), bytes);
    }
}

/* Checks a group and queues it on its stream as one task. */
ncclResult_t s_launch(std::vector<op_t> ops)
{
    if (ops.empty())
        return ncclSuccess;
    cudaStream_t st = ops[0].stream;
    for (const op_t &o : ops)
        if (o.stream != st)
            return s_fail(ncclInvalidUsage, "gpp_nccl_emu: a group with operations on several "
                                            "streams (the emulation queues a group on one stream)");
    /* a send to self must be in the group of its receive */
    for (const op_t &o : ops) {
        if (o.kind != OP_RECV || o.peer != o.s->rank)
            continue;
        long bal = 0;
        for (const op_t &p : ops)
            if (p.s == o.s && p.peer == o.s->rank)
                bal += p.kind == OP_SEND ? 1 : p.kind == OP_RECV ? -1 : 0;
        if (bal != 0)
            return s_fail(ncclInvalidUsage,
                          "gpp_nccl_emu rank %d: sends and receives to self "
                          "in one group must pair up (%ld unmatched)",
                          o.s->rank, bal);
    }
    auto shared = std::make_shared<std::vector<op_t>>(std::move(ops));
    cudaError_t e = gpp_emu::enqueue(st, "nccl group", [shared] { s_run(*shared); });
    if (e != cudaSuccess)
        return s_fail(ncclUnhandledCudaError, "gpp_nccl_emu: queueing on the stream: %s",
                      cudaGetErrorString(e));
    return ncclSuccess;
}

size_t s_esize(ncclDataType_t t)
{
    switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    default:
        return 0;
    }
}

bool s_device_buf(const void *p, size_t bytes)
{
    return bytes == 0 || (p && gpp_emu::mem_lookup(p, bytes) == gpp_emu::MEM_DEVICE);
}

/* Adds one operation: to the open group, or queued alone. */
ncclResult_t s_op(op_t o, size_t sbytes, size_t rbytes)
{
    ncclResult_t r = ncclSuccess;
    if (!o.s)
        r = s_fail(ncclInvalidArgument, "%s: a NULL communicator", s_op_name(o.kind));
    else if (o.s->down.load())
        r = s_fail(ncclInvalidUsage, "%s: the communicator was destroyed or aborted",
                   s_op_name(o.kind));
    else if (o.esize == 0)
        r = s_fail(ncclInvalidArgument, "%s: a data type the emulation does not know",
                   s_op_name(o.kind));
    else if ((o.kind == OP_SEND || o.kind == OP_RECV) && (o.peer < 0 || o.peer >= o.s->n))
        r = s_fail(ncclInvalidArgument, "%s: peer %d is not a rank of [0, %d)", s_op_name(o.kind),
                   o.peer, o.s->n);
    else if (!s_device_buf(o.sbuf, sbytes) || !s_device_buf(o.rbuf, rbytes))
        r = s_fail(ncclInvalidArgument,
                   "%s: a buffer that is not device memory (cudaMalloc) of the size given",
                   s_op_name(o.kind));
    if (r != ncclSuccess) {
        if (g_depth > 0)
            g_group_err = r;
        return r;
    }
    if (g_depth > 0) {
        g_ops.push_back(std::move(o));
        return ncclSuccess;
    }
    std::vector<op_t> one;
    one.push_back(std::move(o));
    return s_launch(std::move(one));
}

std::shared_ptr<state> s_of(ncclComm_t c)
{
    return c ? c->s : nullptr;
}

} /* namespace */

/* ---- the API ---- */

/* the NCCL_VERSION_CODE of the nccl.h this emulation was compiled with (it
 * is the emulation, not that NCCL) */
extern "C" ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    if (!id)
        return ncclInvalidArgument;
    size_t got = 0;
    while (got < sizeof id->internal) {
        ssize_t k = getrandom(id->internal + got, sizeof id->internal - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return s_fail(ncclSystemError, "ncclGetUniqueId: getrandom: %s", std::strerror(errno));
        got += (size_t)k;
    }
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id,
                                               int rank, ncclConfig_t *config)
{
    if (!comm)
        return s_fail(ncclInvalidArgument, "ncclCommInitRankConfig: comm is NULL");
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return s_fail(ncclInvalidArgument, "ncclCommInitRankConfig: rank %d of %d", rank, nranks);
    if (config && config->magic != 0xcafebeef)
        return s_fail(ncclInvalidArgument,
                      "ncclCommInitRankConfig: config not set from NCCL_CONFIG_INITIALIZER");
    bool blocking = !config || config->blocking != 0;
    auto s = std::make_shared<state>();
    s->n = nranks;
    s->rank = rank;
    if (cudaGetDevice(&s->device) != cudaSuccess)
        return s_fail(ncclUnhandledCudaError, "ncclCommInitRankConfig: cudaGetDevice failed");
    char hex[33];
    for (int i = 0; i < 16; i++)
        std::snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id.internal[i]);
    s->sock_base = std::string("gpp-nccl-emu.") + hex;
    s->out.assign((size_t)nranks, -1);
    s->peers.resize((size_t)nranks);
    sockaddr_un a;
    socklen_t len = s_addr(s->sock_name(rank), &a);
    s->lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || ::bind(s->lfd, (sockaddr *)&a, len) < 0 || ::listen(s->lfd, 64) < 0)
        return s_fail(ncclSystemError,
                      "ncclCommInitRankConfig: rank %d cannot listen on its socket: %s (a rank "
                      "of this unique id is initialised twice?)",
                      rank, std::strerror(errno));
    if (::pipe2(s->wake, O_CLOEXEC) < 0)
        return s_fail(ncclSystemError, "ncclCommInitRankConfig: pipe: %s", std::strerror(errno));
    state *raw = s.get();
    s->rx = std::thread([raw] { raw->receiver(); });
    s->init = std::thread([raw] { raw->initialise(); });
    *comm = new ncclComm{s};
    if (!blocking)
        return ncclInProgress;
    std::unique_lock<std::mutex> l(s->mu);
    s->cv.wait(l, [&] { return s->async != ncclInProgress; });
    return s->async;
}

extern "C" ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    auto s = s_of(comm);
    if (!s || !err)
        return ncclInvalidArgument;
    std::lock_guard<std::mutex> l(s->mu);
    *err = s->async;
    return ncclSuccess;
}

/* Says goodbye to every peer: its later end of connection is no failure.
 * (Operations still queued on a stream are not waited for.) */
extern "C" ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    auto s = s_of(comm);
    if (!s)
        return ncclInvalidArgument;
    std::vector<int> fds;
    {
        std::lock_guard<std::mutex> l(s->mu);
        if (s->finalized)
            return ncclSuccess;
        s->finalized = true;
        fds = s->out;
    }
    wire_hdr h{WIRE_MAGIC, K_BYE, CH_P2P, (uint32_t)s->rank, 0};
    std::lock_guard<std::mutex> w(s->wmu);
    for (int fd : fds)
        if (fd >= 0)
            s_write_all(fd, &h, sizeof h); /* a peer already gone needs no goodbye */
    return ncclSuccess;
}

extern "C" ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    ncclCommFinalize(comm);
    comm->s->shutdown(false);
    delete comm;
    return ncclSuccess;
}

/* From any thread: wakes a receive blocked in a queued task (it fails) and
 * takes no lock of the emulated runtime. */
extern "C" ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    comm->s->shutdown(true);
    delete comm;
    return ncclSuccess;
}

extern "C" const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

extern "C" const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    std::lock_guard<std::mutex> l(g_err_mu);
    return g_last;
}

extern "C" ncclResult_t ncclGroupStart()
{
    if (g_depth++ == 0) {
        g_ops.clear();
        g_group_err = ncclSuccess;
    }
    return ncclSuccess;
}

extern "C" ncclResult_t ncclGroupEnd()
{
    if (g_depth == 0)
        return s_fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
    if (--g_depth > 0)
        return ncclSuccess;
    std::vector<op_t> ops = std::move(g_ops);
    g_ops.clear();
    if (g_group_err != ncclSuccess)
        return g_group_err; /* an operation was refused: nothing of the group is queued */
    return s_launch(std::move(ops));
}

extern "C" ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t dt, int peer,
                                 ncclComm_t comm, cudaStream_t st)
{
    size_t es = s_esize(dt);
    return s_op({OP_SEND, s_of(comm), (const char *)buf, nullptr, count, es, peer, st}, count * es,
                0);
}

extern "C" ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t dt, int peer,
                                 ncclComm_t comm, cudaStream_t st)
{
    size_t es = s_esize(dt);
    return s_op({OP_RECV, s_of(comm), nullptr, (char *)buf, count, es, peer, st}, 0, count * es);
}

extern "C" ncclResult_t ncclAllReduce(const void *sbuf, void *rbuf, size_t count, ncclDataType_t dt,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t st)
{
    if (dt != ncclFloat32 || op != ncclSum) {
        ncclResult_t r = s_fail(ncclInvalidArgument,
                                "ncclAllReduce: the emulation sums float32 "
                                "only (type %d, op %d)",
                                (int)dt, (int)op);
        if (g_depth > 0)
            g_group_err = r;
        return r;
    }
    return s_op({OP_ALLREDUCE, s_of(comm), (const char *)sbuf, (char *)rbuf, count, 4, 0, st},
                count * 4, count * 4);
}

extern "C" ncclResult_t ncclAllGather(const void *sbuf, void *rbuf, size_t count, ncclDataType_t dt,
                                      ncclComm_t comm, cudaStream_t st)
{
    size_t es = s_esize(dt);
    auto s = s_of(comm);
    return s_op({OP_ALLGATHER, s, (const char *)sbuf, (char *)rbuf, count, es, 0, st}, count * es,
                count * es * (size_t)(s ? s->n : 1));
}

/* ---- the hook (gpp_comm_nccl.h) ---- */

extern "C" void *gpp_nccl_builtin_sym(const char *name)
{
#define S_FN(f)                                                                                    \
    if (std::strcmp(name, #f) == 0)                                                                \
        return reinterpret_cast<void *>(&f);
    S_FN(ncclGetVersion)
    S_FN(ncclGetUniqueId)
    S_FN(ncclCommInitRankConfig)
    S_FN(ncclCommGetAsyncError)
    S_FN(ncclCommFinalize)
    S_FN(ncclCommDestroy)
    S_FN(ncclCommAbort)
    S_FN(ncclGetErrorString)
    S_FN(ncclGetLastError)
    S_FN(ncclGroupStart)
    S_FN(ncclGroupEnd)
    S_FN(ncclSend)
    S_FN(ncclRecv)
    S_FN(ncclAllReduce)
    S_FN(ncclAllGather)
#undef S_FN
    return nullptr;
}
