// gpp_comm_gloo: the Gloo backend of gpp_comm (CPU tensors over TCP).
//
// One gloo tcp Device per comm; the world is a gloo rendezvous Context
// connected as a full mesh through the rendezvous client (the coordinator's
// table, agent/comm/gpp_rdv_client.h; keys "<prefix>/world/...").
// Each sub-group gets its own Context on the same Device, rendezvoused
// under "<prefix>/group/<r0,r1,...>/<n>" where n counts earlier groups with
// the same members in this process (members create groups in the same
// order, so they agree on n).
//
// Point-to-point uses gloo unbound buffers on the world context: the gloo
// slot is the caller's 32-bit tag. Collectives run on the group's context
// with slots 0x20 << 56 | sequence number, so they never meet user tags:
// a ring all-reduce (reduce-scatter then all-gather) and a ring all-gather
// of variable-size blocks (sizes first, then payloads; each phase its own
// sequence number). We ring ourselves rather than call gloo::allreduce /
// gloo::allgatherv so that every wait is on an unbound buffer this file
// knows about: abort() wakes all of them with abortWaitRecv/abortWaitSend,
// whichever thread is blocked.
//
// test() cannot peek at a gloo buffer (no such API), so the first test() of
// a request starts a helper thread that does the wait; later tests read its
// flag and wait() joins it. Requests that are only waited never start one.
//
// No exception leaves this file: every entry point catches and fills err.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

// common/gpp_err.h has no extern "C" guard of its own.
extern "C" {
#include "common/gpp_err.h"
}
#include "agent/comm/gpp_comm_impl.h"
#include "agent/comm/gpp_rdv_client.h"
extern "C" {
#include "proto/gpp_msg.h" // GPP_RDV_* limits
}

namespace
{

using Buffer = gloo::transport::UnboundBuffer;
constexpr uint64_t kCollSlot = uint64_t(0x20) << 56;
constexpr int kDefaultTimeoutMs = GPP_COMM_TIMEOUT_DEFAULT_MS;

// gloo::rendezvous::Store over the rendezvous client: the coordinator's
// table (coordinator/gpp_rdv.h). Errors become exceptions, which
// connectFullMesh passes on to s_connect's callers.
class RdvStore : public gloo::rendezvous::Store
{
  public:
    RdvStore(gpp_rdv_client_t *c, int timeout_ms) : c_(c), timeout_ms_(timeout_ms)
    {
    }
    void set(const std::string &key, const std::vector<char> &data) override
    {
        gpp_err_t err{};
        if (gpp_rdv_client_set(c_, key.c_str(), data.data(), data.size(), timeout_ms_, &err) < 0)
            throw std::runtime_error(err.msg);
    }
    std::vector<char> get(const std::string &key) override
    {
        gpp_err_t err{};
        const char *k = key.c_str();
        void *data = nullptr;
        size_t len = 0;
        if (gpp_rdv_client_get(c_, &k, 1, timeout_ms_, &data, &len, &err) < 0)
            throw std::runtime_error(err.msg);
        std::vector<char> v((char *)data, (char *)data + len);
        free(data);
        return v;
    }
    void wait(const std::vector<std::string> &keys) override
    {
        wait(keys, std::chrono::milliseconds(timeout_ms_));
    }
    void wait(const std::vector<std::string> &keys,
              const std::chrono::milliseconds &timeout) override
    {
        const int ms = (int)std::min<long long>(timeout.count(), GPP_RDV_TIMEOUT_MAX_MS);
        std::vector<const char *> ks;
        for (const auto &k : keys)
            ks.push_back(k.c_str());
        for (size_t i = 0; i < ks.size(); i += GPP_RDV_GET_KEYS_MAX) {
            gpp_err_t err{};
            size_t n = std::min<size_t>(GPP_RDV_GET_KEYS_MAX, ks.size() - i);
            if (gpp_rdv_client_get(c_, ks.data() + i, n, ms, nullptr, nullptr, &err) < 0)
                throw std::runtime_error(err.msg);
        }
    }

  private:
    gpp_rdv_client_t *c_;
    int timeout_ms_;
};

struct CommImpl;

struct ReqImpl {
    std::unique_ptr<Buffer> buf;
    bool is_recv = false;
    int peer = -1;
    uint32_t tag = 0;
    size_t bytes = 0;
    // Set once the wait finished (by wait() or by the helper thread).
    std::atomic<bool> finished{false};
    int result = 0;
    std::string error;
    std::thread helper;
};

struct CommImpl {
    gpp_rdv_client_t *rdv = nullptr; // owned
    std::unique_ptr<RdvStore> adapter;
    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<gloo::rendezvous::Context> world;
    std::string prefix;
    int timeout_ms = kDefaultTimeoutMs;
    uint32_t world_coll_seq = 0;
    std::map<std::string, int> group_gen;

    std::mutex mu;           // guards live and reason
    std::set<Buffer *> live; // buffers that may be waited on now
    std::atomic<bool> aborted{false};
    std::string reason;
};

struct GroupImpl {
    std::shared_ptr<gloo::rendezvous::Context> ctx;
    uint32_t coll_seq = 0;
};

// The C-visible objects: standard layout, base first.
struct s_comm {
    gpp_comm_t base;
    CommImpl *impl;
};
struct s_req {
    gpp_comm_req_t base;
    ReqImpl *impl;
};
struct s_group {
    gpp_comm_group_t base;
    GroupImpl *impl;
};

CommImpl *s_impl(gpp_comm_t *c)
{
    return reinterpret_cast<s_comm *>(c)->impl;
}
ReqImpl *s_rimpl(gpp_comm_req_t *r)
{
    return reinterpret_cast<s_req *>(r)->impl;
}
GroupImpl *s_gimpl(gpp_comm_group_t *g)
{
    return reinterpret_cast<s_group *>(g)->impl;
}

void s_track(CommImpl *ci, Buffer *b)
{
    std::lock_guard<std::mutex> lock(ci->mu);
    ci->live.insert(b);
    if (ci->aborted) {
        // abort() ran before this buffer was tracked: make its waits fail.
        b->abortWaitRecv();
        b->abortWaitSend();
    }
}

void s_untrack(CommImpl *ci, Buffer *b)
{
    std::lock_guard<std::mutex> lock(ci->mu);
    ci->live.erase(b);
}

int s_aborted_err(CommImpl *ci, gpp_err_t *err, const char *what)
{
    std::lock_guard<std::mutex> lock(ci->mu);
    return gpp_err_set(err, "gpp_comm: %s: aborted: %s", what, ci->reason.c_str());
}

// Waits for one completion of b (recv or send). Returns 0, or -1 with err.
int s_wait_one(CommImpl *ci, Buffer *b, bool recv, const char *what, gpp_err_t *err)
{
    if (ci->aborted)
        return s_aborted_err(ci, err, what);
    try {
        bool ok = recv ? b->waitRecv() : b->waitSend();
        if (!ok || ci->aborted)
            return s_aborted_err(ci, err, what);
        return 0;
    } catch (const std::exception &e) {
        return gpp_err_set(err, "gpp_comm: %s: %s", what, e.what());
    }
}

void s_describe(const ReqImpl *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s %zu bytes %s rank %d tag %u", r->is_recv ? "recv" : "send", r->bytes,
             r->is_recv ? "from" : "to", r->peer, r->tag);
}

// The wait proper, run by wait() or by the helper thread.
void s_req_run(CommImpl *ci, ReqImpl *r)
{
    gpp_err_t err{};
    char what[128];
    s_describe(r, what, sizeof what);
    r->result = r->bytes == 0 ? 0 : s_wait_one(ci, r->buf.get(), r->is_recv, what, &err);
    if (r->result < 0)
        r->error = err.msg;
    if (r->buf)
        s_untrack(ci, r->buf.get());
    r->finished = true;
}

int s_post(gpp_comm_t *c, void *buf, size_t bytes, int peer, uint32_t tag, bool recv,
           gpp_comm_req_t **req, gpp_err_t *err)
{
    CommImpl *ci = s_impl(c);
    if (ci->aborted)
        return s_aborted_err(ci, err, recv ? "irecv" : "isend");
    auto *r = new ReqImpl;
    r->is_recv = recv;
    r->peer = peer;
    r->tag = tag;
    r->bytes = bytes;
    try {
        if (bytes > 0) {
            r->buf = ci->world->createUnboundBuffer(buf, bytes);
            s_track(ci, r->buf.get());
            if (recv)
                r->buf->recv(peer, tag, 0, bytes);
            else
                r->buf->send(peer, tag, 0, bytes);
        }
    } catch (const std::exception &e) {
        if (r->buf)
            s_untrack(ci, r->buf.get());
        delete r;
        return gpp_err_set(err, "gpp_comm: %s rank %d tag %u: %s", recv ? "irecv from" : "isend to",
                           peer, tag, e.what());
    }
    auto *sr = static_cast<s_req *>(gpp_xcalloc(1, sizeof(s_req)));
    sr->base.comm = c;
    sr->impl = r;
    *req = &sr->base;
    return 0;
}

int s_isend(gpp_comm_t *c, const void *buf, size_t bytes, int peer, uint32_t tag,
            gpp_comm_req_t **req, gpp_err_t *err)
{
    return s_post(c, const_cast<void *>(buf), bytes, peer, tag, false, req, err);
}

int s_irecv(gpp_comm_t *c, void *buf, size_t bytes, int peer, uint32_t tag, gpp_comm_req_t **req,
            gpp_err_t *err)
{
    return s_post(c, buf, bytes, peer, tag, true, req, err);
}

int s_wait(gpp_comm_t *c, gpp_comm_req_t *req, gpp_err_t *err)
{
    CommImpl *ci = s_impl(c);
    ReqImpl *r = s_rimpl(req);
    if (r->helper.joinable())
        r->helper.join();
    if (!r->finished)
        s_req_run(ci, r);
    if (r->result < 0)
        return gpp_err_set(err, "%s", r->error.c_str());
    return 0;
}

int s_test(gpp_comm_t *c, gpp_comm_req_t *req, int *done, gpp_err_t *err)
{
    CommImpl *ci = s_impl(c);
    ReqImpl *r = s_rimpl(req);
    if (!r->finished && !r->helper.joinable()) {
        try {
            r->helper = std::thread(s_req_run, ci, r);
        } catch (const std::exception &e) {
            return gpp_err_set(err, "gpp_comm: test: cannot start a helper thread: %s", e.what());
        }
    }
    *done = r->finished ? 1 : 0;
    if (*done && r->result < 0)
        return gpp_err_set(err, "%s", r->error.c_str());
    return 0;
}

void s_req_free(gpp_comm_t *c, gpp_comm_req_t *req)
{
    CommImpl *ci = s_impl(c);
    ReqImpl *r = s_rimpl(req);
    if (r->helper.joinable()) {
        if (!r->finished && r->buf) {
            r->buf->abortWaitRecv();
            r->buf->abortWaitSend();
        }
        r->helper.join();
    }
    if (r->buf)
        s_untrack(ci, r->buf.get());
    delete r;
    free(reinterpret_cast<s_req *>(req));
}

// Ring all-reduce (sum, fp32) over ctx. Every wait is on a tracked buffer.
int s_ring_allreduce(CommImpl *ci, gloo::rendezvous::Context &ctx, uint32_t seq, float *data,
                     size_t count, gpp_err_t *err)
{
    const int n = ctx.size, me = ctx.rank;
    if (n == 1 || count == 0)
        return 0;
    std::vector<size_t> off(n + 1, 0);
    for (int i = 0; i < n; i++)
        off[i + 1] = off[i] + count / n + ((size_t)i < count % n ? 1 : 0);
    const size_t max_seg = count / n + 1;
    std::vector<float> tmp(max_seg);
    const int right = (me + 1) % n, left = (me - 1 + n) % n;
    const uint64_t slot = kCollSlot | seq;
    int rc = -1;
    std::unique_ptr<Buffer> bbuf, tbuf;
    try {
        bbuf = ctx.createUnboundBuffer(data, count * sizeof(float));
        tbuf = ctx.createUnboundBuffer(tmp.data(), max_seg * sizeof(float));
        s_track(ci, bbuf.get());
        s_track(ci, tbuf.get());
        // Step s of 2(n-1): reduce-scatter for s < n-1, then all-gather.
        for (int s = 0; s < 2 * (n - 1); s++) {
            const bool gather = s >= n - 1;
            const int k = gather ? s - (n - 1) : s;
            const int send_seg = ((gather ? me + 1 : me) - k + 2 * n) % n;
            const int recv_seg = ((gather ? me : me - 1) - k + 2 * n) % n;
            const size_t send_n = off[send_seg + 1] - off[send_seg];
            const size_t recv_n = off[recv_seg + 1] - off[recv_seg];
            if (recv_n) {
                if (gather)
                    bbuf->recv(left, slot, off[recv_seg] * sizeof(float), recv_n * sizeof(float));
                else
                    tbuf->recv(left, slot, 0, recv_n * sizeof(float));
            }
            if (send_n)
                bbuf->send(right, slot, off[send_seg] * sizeof(float), send_n * sizeof(float));
            if (recv_n &&
                s_wait_one(ci, gather ? bbuf.get() : tbuf.get(), true, "allreduce recv", err) < 0)
                goto done;
            if (send_n && s_wait_one(ci, bbuf.get(), false, "allreduce send", err) < 0)
                goto done;
            if (!gather)
                for (size_t j = 0; j < recv_n; j++)
                    data[off[recv_seg] + j] += tmp[j];
        }
        rc = 0;
    } catch (const std::exception &e) {
        gpp_err_set(err, "gpp_comm: allreduce: %s", e.what());
    }
done:
    if (bbuf)
        s_untrack(ci, bbuf.get());
    if (tbuf)
        s_untrack(ci, tbuf.get());
    return rc;
}

// Ring all-gather over ctx of the blocks [off[i], off[i + 1]) of data, one
// per member, this member's filled in. In step s each member passes on the
// block it got in step s - 1 (its own first). Empty blocks are neither sent
// nor received: every member knows every block's size. Every wait is on a
// tracked buffer.
int s_ring_allgather(CommImpl *ci, gloo::rendezvous::Context &ctx, uint32_t seq, char *data,
                     const std::vector<size_t> &off, const char *what, gpp_err_t *err)
{
    const int n = ctx.size, me = ctx.rank;
    if (n == 1 || off[n] == 0)
        return 0;
    const int right = (me + 1) % n, left = (me - 1 + n) % n;
    const uint64_t slot = kCollSlot | seq;
    int rc = -1;
    std::unique_ptr<Buffer> buf;
    try {
        buf = ctx.createUnboundBuffer(data, off[n]);
        s_track(ci, buf.get());
        for (int s = 0; s < n - 1; s++) {
            const int send_blk = (me - s + n) % n, recv_blk = (me - s - 1 + n) % n;
            const size_t send_n = off[send_blk + 1] - off[send_blk];
            const size_t recv_n = off[recv_blk + 1] - off[recv_blk];
            if (recv_n)
                buf->recv(left, slot, off[recv_blk], recv_n);
            if (send_n)
                buf->send(right, slot, off[send_blk], send_n);
            if (recv_n && s_wait_one(ci, buf.get(), true, what, err) < 0)
                goto done;
            if (send_n && s_wait_one(ci, buf.get(), false, what, err) < 0)
                goto done;
        }
        rc = 0;
    } catch (const std::exception &e) {
        gpp_err_set(err, "gpp_comm: %s: %s", what, e.what());
    }
done:
    if (buf)
        s_untrack(ci, buf.get());
    return rc;
}

// The context of a group (NULL = world) and its collective sequence counter.
gloo::rendezvous::Context &s_coll_ctx(CommImpl *ci, gpp_comm_group_t *g, uint32_t **seq)
{
    if (!g) {
        *seq = &ci->world_coll_seq;
        return *ci->world;
    }
    GroupImpl *gi = s_gimpl(g);
    *seq = &gi->coll_seq;
    return *gi->ctx;
}

int s_allreduce(gpp_comm_t *c, gpp_comm_group_t *g, float *buf, size_t count, gpp_err_t *err)
{
    CommImpl *ci = s_impl(c);
    if (ci->aborted)
        return s_aborted_err(ci, err, "allreduce");
    uint32_t *seq;
    gloo::rendezvous::Context &ctx = s_coll_ctx(ci, g, &seq);
    return s_ring_allreduce(ci, ctx, (*seq)++, buf, count, err);
}

int s_allgatherv(gpp_comm_t *c, gpp_comm_group_t *g, const void *buf, size_t bytes, void **out,
                 size_t *bytes_each, gpp_err_t *err)
{
    CommImpl *ci = s_impl(c);
    if (ci->aborted)
        return s_aborted_err(ci, err, "allgatherv");
    uint32_t *seq;
    gloo::rendezvous::Context &ctx = s_coll_ctx(ci, g, &seq);
    const int n = ctx.size, me = ctx.rank;
    const uint32_t size_seq = (*seq)++, data_seq = (*seq)++;
    // Phase 1: every member's size, a uint64 each in host byte order (every
    // member runs this build).
    std::vector<uint64_t> sizes(n, 0);
    std::vector<size_t> off(n + 1, 0);
    sizes[me] = bytes;
    for (int i = 0; i < n; i++)
        off[i + 1] = off[i] + sizeof(uint64_t);
    if (s_ring_allgather(ci, ctx, size_seq, reinterpret_cast<char *>(sizes.data()), off,
                         "allgatherv sizes", err) < 0)
        return -1;
    for (int i = 0; i < n; i++) {
        if (sizes[i] > SIZE_MAX - off[i])
            return gpp_err_set(err,
                               "gpp_comm: allgatherv: member %d of %d sends %llu bytes: "
                               "more than this host can hold",
                               i, n, (unsigned long long)sizes[i]);
        off[i + 1] = off[i] + (size_t)sizes[i];
        bytes_each[i] = (size_t)sizes[i];
    }
    // Phase 2: the payloads, straight into the caller's result.
    char *data = static_cast<char *>(gpp_xcalloc(off[n] ? off[n] : 1, 1));
    if (bytes)
        memcpy(data + off[me], buf, bytes);
    if (s_ring_allgather(ci, ctx, data_seq, data, off, "allgatherv", err) < 0) {
        free(data);
        return -1;
    }
    *out = data;
    return 0;
}

int s_barrier(gpp_comm_t *c, gpp_comm_group_t *g, gpp_err_t *err)
{
    float one = 1.0f;
    if (s_allreduce(c, g, &one, 1, err) < 0)
        return gpp_err_prefix(err, "barrier");
    return 0;
}

std::shared_ptr<gloo::rendezvous::Context> s_connect(CommImpl *ci, const std::string &key, int rank,
                                                     int size)
{
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(std::chrono::milliseconds(ci->timeout_ms));
    gloo::rendezvous::PrefixStore ps(ci->prefix + "/" + key, *ci->adapter);
    ctx->connectFullMesh(ps, ci->dev);
    return ctx;
}

gpp_comm_group_t *s_group_new(gpp_comm_t *c, const int *ranks, int n, gpp_err_t *err)
{
    CommImpl *ci = s_impl(c);
    if (ci->aborted) {
        s_aborted_err(ci, err, "group_new");
        return nullptr;
    }
    std::string members;
    int me = -1;
    for (int i = 0; i < n; i++) {
        members += (i ? "," : "") + std::to_string(ranks[i]);
        if (ranks[i] == c->rank)
            me = i;
    }
    int gen = ci->group_gen[members]++;
    auto *gi = new GroupImpl;
    try {
        gi->ctx = s_connect(ci, "group/" + members + "/" + std::to_string(gen), me, n);
    } catch (const std::exception &e) {
        delete gi;
        gpp_err_set(err, "gpp_comm: group {%s}: rendezvous failed: %s", members.c_str(), e.what());
        return nullptr;
    }
    auto *sg = static_cast<s_group *>(gpp_xcalloc(1, sizeof(s_group)));
    sg->base.comm = c;
    sg->base.size = n;
    sg->base.rank = me;
    sg->impl = gi;
    return &sg->base;
}

void s_group_free(gpp_comm_group_t *g)
{
    delete s_gimpl(g);
    free(reinterpret_cast<s_group *>(g));
}

void s_abort(gpp_comm_t *c, const char *reason)
{
    CommImpl *ci = s_impl(c);
    std::lock_guard<std::mutex> lock(ci->mu);
    if (!ci->aborted)
        ci->reason = reason;
    ci->aborted = true;
    for (Buffer *b : ci->live) {
        b->abortWaitRecv();
        b->abortWaitSend();
    }
    gpp_rdv_client_abort(ci->rdv, reason); // a group_new waiting in its rendezvous
}

void s_destroy(gpp_comm_t *c)
{
    CommImpl *ci = s_impl(c);
    try {
        ci->world.reset();
        ci->dev.reset();
    } catch (...) {
        // Tearing down sockets of a failed job: nothing left to report to.
    }
    gpp_rdv_client_destroy(&ci->rdv);
    delete ci;
    free(reinterpret_cast<s_comm *>(c));
}

// host buffers, no self send/recv, requests start when posted (no flush)
const gpp_comm_ops_t s_ops = {
    "gloo",       0,           0,            nullptr,
    s_isend,     s_irecv,      s_wait,    s_test,  s_req_free, s_group_new,
    s_group_free, s_allreduce, s_allgatherv, s_barrier, s_abort, s_destroy,
};

} // namespace

extern "C" gpp_comm_t *gpp_comm_gloo_new(gpp_comm_opts_t *o, gpp_err_t *err)
{
    if (!o || !o->rdv || !o->prefix || o->world_size <= 0 || o->rank < 0 ||
        o->rank >= o->world_size) {
        gpp_err_set(err,
                    "gpp_comm_gloo_new: need a rendezvous client, a prefix and 0 <= rank < "
                    "world_size (got rank %d of %d)",
                    o ? o->rank : -1, o ? o->world_size : -1);
        if (o)
            gpp_rdv_client_destroy(&o->rdv);
        return nullptr;
    }
    auto *ci = new CommImpl;
    ci->prefix = o->prefix;
    ci->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : kDefaultTimeoutMs;
    ci->rdv = o->rdv;
    o->rdv = nullptr; // ours now
    ci->adapter.reset(new RdvStore(ci->rdv, ci->timeout_ms));
    char host[256] = "";
    if (o->host && o->host[0])
        snprintf(host, sizeof host, "%s", o->host);
    else if (gethostname(host, sizeof host) < 0)
        snprintf(host, sizeof host, "127.0.0.1");
    try {
        gloo::transport::tcp::attr attr;
        attr.hostname = host;
        ci->dev = gloo::transport::tcp::CreateDevice(attr);
        ci->world = s_connect(ci, "world", o->rank, o->world_size);
    } catch (const std::exception &e) {
        gpp_err_set(err, "gpp_comm: rank %d of %d on %s: rendezvous failed: %s", o->rank,
                    o->world_size, host, e.what());
        ci->world.reset();
        ci->dev.reset();
        gpp_rdv_client_destroy(&ci->rdv);
        delete ci;
        return nullptr;
    }
    auto *sc = static_cast<s_comm *>(gpp_xcalloc(1, sizeof(s_comm)));
    sc->base.ops = &s_ops;
    sc->base.rank = o->rank;
    sc->base.world_size = o->world_size;
    sc->impl = ci;
    return &sc->base;
}
