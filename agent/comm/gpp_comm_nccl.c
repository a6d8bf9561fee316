/* gpp_comm_nccl: the NCCL comm backend (design: gpp_comm_nccl.h,
 * docs/gpu.md "NCCL data plane"). Built only with CUDA (GPP_HAVE_NCCL). */
#define _POSIX_C_SOURCE 200809L
#include "agent/comm/gpp_comm_nccl.h"

#include <assert.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/comm/gpp_comm_impl.h"
#include "common/gpp_err.h"
#include "common/gpp_time.h"
#include "kernels/cuda/gpp_cuda_check.h"

_Static_assert(GPP_NCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "GPP_NCCL_ID_BYTES is nccl.h's");
_Static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId is its bytes");

/* ---- libnccl, loaded with dlopen when first used (gpp_comm_nccl.h) ---- */

#define S_NCCL_SONAME "libnccl.so.2" /* NCCL_MAJOR 2 */
#define S_NCCL_FNS(X)                                                                              \
    X(ncclGetVersion)                                                                              \
    X(ncclGetUniqueId)                                                                             \
    X(ncclCommInitRankConfig)                                                                      \
    X(ncclCommGetAsyncError)                                                                       \
    X(ncclCommFinalize)                                                                            \
    X(ncclCommDestroy)                                                                             \
    X(ncclCommAbort)                                                                               \
    X(ncclGetErrorString)                                                                          \
    X(ncclGetLastError)                                                                            \
    X(ncclGroupStart)                                                                              \
    X(ncclGroupEnd)                                                                                \
    X(ncclSend)                                                                                    \
    X(ncclRecv)                                                                                    \
    X(ncclAllReduce)                                                                               \
    X(ncclAllGather)
static struct {
#define S_FIELD(f) __typeof__(&f) f;
    S_NCCL_FNS(S_FIELD)
#undef S_FIELD
} s_nc;
static pthread_once_t s_once = PTHREAD_ONCE_INIT;
static char s_load_err[512];

static void s_load_once(void)
{
    /* the host emulation's NCCL, where linked in (gpp_comm_nccl.h) */
    void *h = gpp_nccl_builtin_sym ? NULL : dlopen(S_NCCL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h && !gpp_nccl_builtin_sym) {
        snprintf(s_load_err, sizeof s_load_err,
                 "cannot load NCCL: dlopen %s: %s; install the CUDA toolkit's NCCL or add "
                 "its lib directory to LD_LIBRARY_PATH",
                 S_NCCL_SONAME, dlerror());
        return;
    }
#define S_SYM(f)                                                                                   \
    *(void **)&s_nc.f = gpp_nccl_builtin_sym ? gpp_nccl_builtin_sym(#f) : dlsym(h, #f);            \
    if (!s_nc.f) {                                                                                 \
        snprintf(s_load_err, sizeof s_load_err, "NCCL %s has no symbol %s (NCCL >= 2.18 needed)",  \
                 S_NCCL_SONAME, #f);                                                               \
        return;                                                                                    \
    }
    S_NCCL_FNS(S_SYM)
#undef S_SYM
}

static int s_load(gpp_err_t *err)
{
    pthread_once(&s_once, s_load_once);
    if (s_load_err[0])
        return gpp_err_set(err, "%s", s_load_err);
    return 0;
}

/* ---- objects ---- */

/* A deferred point-to-point operation: launched by s_flush, done when its
 * event (recorded on the communication stream after the group) completes. */
typedef struct s_req {
    gpp_comm_req_t base;
    int send, peer;
    uint32_t tag;
    void *buf;
    size_t bytes;
    cudaEvent_t ev; /* NULL until launched */
    struct s_req *next_pending;
} s_req_t;

typedef struct {
    gpp_comm_group_t base;
    ncclComm_t nc; /* NULL once aborted */
    int slot;      /* index in s_comm_t.groups */
} s_group_t;

#define S_MAX_GROUPS 64 /* data-parallel groups of one rank: one per stage it holds */

typedef struct {
    gpp_comm_t base;
    gpp_rdv_client_t *rdv;
    char *prefix;
    int timeout_ms, device;
    ncclComm_t world; /* NULL once aborted */
    cudaStream_t cs;  /* communication stream */
    cudaStream_t compute;
    cudaEvent_t ev_compute;
    s_req_t *pending, **pending_tail;
    s_group_t *groups[S_MAX_GROUPS];
    char *group_keys[S_MAX_GROUPS]; /* keys used: a rank set is initialised once */
    void *scratch;                  /* device, for the host-buffer collectives */
    size_t scratch_bytes;
    atomic_int aborted;
    pthread_mutex_t mu; /* reason */
    char reason[256];
    int torn_down; /* ncclCommAbort done on every communicator */
} s_comm_t;

static const gpp_comm_ops_t s_ops;

/* ---- errors and polling ---- */

/* NCCL's check macros (STYLE rule 5; CUDA's: gpp_cuda_check.h): a failed
 * call (not ncclSuccess, not ncclInProgress of a non-blocking
 * communicator) becomes a gpp_err naming the rank (c NULL: none), file:line, the call,
 * NCCL's message and its last error. S_NCCL_TRY returns -1,
 * S_NCCL_TRY_GOTO jumps to label; S_NCCL_FAIL is their message for a
 * result found otherwise (an asynchronous error). */
static int s_nccl_fail(s_comm_t *c, gpp_err_t *err, const char *file, int line, const char *call,
                       ncclResult_t r)
{
    const char *last = s_nc.ncclGetLastError ? s_nc.ncclGetLastError(NULL) : NULL;
    const char *base = strrchr(file, '/');
    char who[64] = "nccl";
    if (c)
        snprintf(who, sizeof who, "nccl rank %d (GPU %d)", c->base.rank, c->device);
    return gpp_err_set(err, "%s: %s:%d: %s: %s%s%s", who, base ? base + 1 : file, line, call,
                       s_nc.ncclGetErrorString(r), last && *last ? ": " : "", last ? last : "");
}
#define S_NCCL_FAIL(c, err, call, r) s_nccl_fail((c), (err), __FILE__, __LINE__, (call), (r))
#define S_NCCL_TRY(c, call, err)                                                                   \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess && r_ != ncclInProgress)                                             \
            return S_NCCL_FAIL((c), (err), #call, r_);                                             \
    } while (0)
#define S_NCCL_TRY_GOTO(c, call, err, label)                                                       \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess && r_ != ncclInProgress) {                                           \
            S_NCCL_FAIL((c), (err), #call, r_);                                                    \
            goto label;                                                                            \
        }                                                                                          \
    } while (0)

int gpp_comm_nccl_load(int *version, gpp_err_t *err)
{
    if (s_load(err) < 0)
        return -1;
    S_NCCL_TRY(NULL, s_nc.ncclGetVersion(version), err);
    return 0;
}

/* ncclCommAbort on every communicator of the rank (owner thread only: a
 * communicator is not used by two threads at once). Idempotent. */
static void s_teardown(s_comm_t *c)
{
    if (c->torn_down)
        return;
    c->torn_down = 1;
    for (int i = 0; i < S_MAX_GROUPS; i++)
        if (c->groups[i] && c->groups[i]->nc) {
            s_nc.ncclCommAbort(c->groups[i]->nc);
            c->groups[i]->nc = NULL;
        }
    if (c->world) {
        s_nc.ncclCommAbort(c->world);
        c->world = NULL;
    }
}

static int s_aborted_err(s_comm_t *c, gpp_err_t *err)
{
    pthread_mutex_lock(&c->mu);
    gpp_err_set(err, "nccl rank %d: aborted: %s", c->base.rank, c->reason);
    pthread_mutex_unlock(&c->mu);
    return -1;
}

/* Fails the whole rank: records the reason, aborts every communicator. */
static int s_fail_all(s_comm_t *c, gpp_err_t *err)
{
    pthread_mutex_lock(&c->mu);
    if (!atomic_load(&c->aborted))
        snprintf(c->reason, sizeof c->reason, "%s", err->msg);
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->aborted, 1);
    s_teardown(c);
    return -1;
}

/* Polling interval: short against a p2p step of tens of microseconds, long
 * enough not to starve a shared core. */
static void s_nap(void)
{
    struct timespec ts = {0, 20 * 1000};
    nanosleep(&ts, NULL);
}

/* Waits until `nc` has no operation in progress (non-blocking init, group
 * end, finalize) with the deadline and the abort flag. */
static int s_settle(s_comm_t *c, ncclComm_t nc, const char *what, gpp_err_t *err)
{
    double deadline = gpp_now_ms() + c->timeout_ms;
    for (;;) {
        ncclResult_t st = ncclInProgress;
        ncclResult_t r = s_nc.ncclCommGetAsyncError(nc, &st);
        if (r != ncclSuccess) {
            S_NCCL_FAIL(c, err, "ncclCommGetAsyncError", r);
            return s_fail_all(c, err);
        }
        if (st == ncclSuccess)
            return 0;
        if (st != ncclInProgress) {
            S_NCCL_FAIL(c, err, what, st);
            return s_fail_all(c, err);
        }
        if (atomic_load(&c->aborted)) {
            s_aborted_err(c, err);
            s_teardown(c);
            return -1;
        }
        if (gpp_now_ms() > deadline) {
            gpp_err_set(err,
                        "nccl rank %d (GPU %d): %s did not complete within %d ms (a peer is "
                        "gone or stuck); communicators aborted",
                        c->base.rank, c->device, what, c->timeout_ms);
            return s_fail_all(c, err);
        }
        s_nap();
    }
}

/* Whether the rank was aborted or `nc` has an asynchronous error: -1 and
 * the communicators torn down. */
static int s_check(s_comm_t *c, ncclComm_t nc, const char *what, gpp_err_t *err)
{
    if (atomic_load(&c->aborted)) {
        s_aborted_err(c, err);
        s_teardown(c);
        return -1;
    }
    ncclResult_t st = ncclSuccess;
    if (nc && s_nc.ncclCommGetAsyncError(nc, &st) == ncclSuccess && st != ncclSuccess &&
        st != ncclInProgress) {
        S_NCCL_FAIL(c, err, what, st);
        return s_fail_all(c, err);
    }
    return 0;
}

/* Waits for an event on the communication stream, watching NCCL's
 * asynchronous errors on `nc`, the abort flag and the deadline. Checked
 * once more when the event is complete: a query may block until the work
 * ends (the host emulation's cudaEventQuery runs the queued work, a receive
 * included) and the abort or a failed operation, whose event completes with
 * its data not received, came meanwhile. */
static int s_wait_event(s_comm_t *c, ncclComm_t nc, cudaEvent_t ev, const char *what,
                        gpp_err_t *err)
{
    double deadline = gpp_now_ms() + c->timeout_ms;
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return s_check(c, nc, what, err);
        if (e != cudaErrorNotReady) {
            gpp_cuda_fail(err, __FILE__, __LINE__, "cudaEventQuery", e);
            return s_fail_all(c, err);
        }
        if (s_check(c, nc, what, err) < 0)
            return -1;
        if (gpp_now_ms() > deadline) {
            gpp_err_set(err,
                        "nccl rank %d (GPU %d): %s not done within %d ms (a peer is gone or "
                        "never posted the matching call); communicators aborted",
                        c->base.rank, c->device, what, c->timeout_ms);
            return s_fail_all(c, err);
        }
        s_nap();
    }
}

static int s_live(s_comm_t *c, gpp_err_t *err)
{
    if (atomic_load(&c->aborted) || !c->world) {
        s_aborted_err(c, err);
        s_teardown(c);
        return -1;
    }
    return 0;
}

/* The communication stream waits for the work queued so far on the compute
 * stream (the producer of what is sent). */
static int s_after_compute(s_comm_t *c, gpp_err_t *err)
{
    if (!c->compute)
        return 0;
    GPP_CUDA_TRY(cudaEventRecord(c->ev_compute, c->compute), err);
    GPP_CUDA_TRY(cudaStreamWaitEvent(c->cs, c->ev_compute, 0), err);
    return 0;
}

/* ---- communicator creation ---- */

static int s_init_comm(s_comm_t *c, ncclComm_t *out, const char *key, int n, int me, int publisher,
                       gpp_err_t *err)
{
    ncclUniqueId id;
    if (publisher) {
        S_NCCL_TRY(c, s_nc.ncclGetUniqueId(&id), err);
        if (gpp_nccl_id_publish(c->rdv, key, &id, sizeof id, c->timeout_ms, err) < 0)
            return -1;
    } else if (gpp_nccl_id_fetch(c->rdv, key, &id, sizeof id, c->timeout_ms, err) < 0) {
        return -1;
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* returns at once; s_settle polls with the deadline and the abort flag */
    ncclComm_t nc = NULL;
    ncclResult_t r = s_nc.ncclCommInitRankConfig(&nc, n, id, me, &cfg);
    if (r != ncclSuccess && r != ncclInProgress) {
        S_NCCL_FAIL(c, err, "ncclCommInitRankConfig", r);
        if (nc)
            s_nc.ncclCommAbort(nc);
        return -1;
    }
    if (s_settle(c, nc, "ncclCommInitRankConfig", err) < 0) {
        if (nc)
            s_nc.ncclCommAbort(nc); /* not yet registered: s_teardown does not see it */
        return gpp_err_prefix(err, "communicator %s", key);
    }
    *out = nc;
    return 0;
}

/* Orderly end of one communicator (finalize, then destroy); abort when that
 * fails or does not complete in time. */
static void s_close_comm(s_comm_t *c, ncclComm_t *nc)
{
    if (!*nc)
        return;
    gpp_err_t err = {{0}};
    ncclResult_t r = s_nc.ncclCommFinalize(*nc);
    if ((r == ncclSuccess || r == ncclInProgress) &&
        s_settle(c, *nc, "ncclCommFinalize", &err) == 0 && *nc)
        s_nc.ncclCommDestroy(*nc);
    else if (*nc) /* s_settle's failure aborted it already */
        s_nc.ncclCommAbort(*nc);
    *nc = NULL;
}

static void s_destroy(gpp_comm_t *base)
{
    s_comm_t *c = (s_comm_t *)base;
    cudaSetDevice(c->device);
    while (c->pending) {
        s_req_t *r = c->pending;
        c->pending = r->next_pending;
        r->next_pending = NULL;
    }
    if (atomic_load(&c->aborted))
        s_teardown(c);
    for (int i = 0; i < S_MAX_GROUPS; i++) {
        if (c->groups[i]) {
            s_close_comm(c, &c->groups[i]->nc);
            c->groups[i]->base.comm = NULL;
        }
        free(c->group_keys[i]);
    }
    s_close_comm(c, &c->world);
    if (c->scratch)
        cudaFree(c->scratch);
    if (c->ev_compute)
        cudaEventDestroy(c->ev_compute);
    if (c->cs)
        cudaStreamDestroy(c->cs);
    gpp_rdv_client_destroy(&c->rdv);
    pthread_mutex_destroy(&c->mu);
    free(c->prefix);
    free(c);
}

gpp_comm_t *gpp_comm_nccl_new(gpp_comm_opts_t *o, gpp_err_t *err)
{
    if (!o || !o->rdv || !o->prefix || o->world_size <= 0 || o->rank < 0 ||
        o->rank >= o->world_size || o->device < 0) {
        gpp_err_set(err,
                    "gpp_comm_nccl_new: need a rendezvous client, a prefix, 0 <= rank < "
                    "world_size and a device >= 0 (got rank %d of %d, device %d)",
                    o ? o->rank : -1, o ? o->world_size : -1, o ? o->device : -1);
        if (o)
            gpp_rdv_client_destroy(&o->rdv);
        return NULL;
    }
    s_comm_t *c = gpp_xcalloc(1, sizeof *c);
    c->base.ops = &s_ops;
    c->base.rank = o->rank;
    c->base.world_size = o->world_size;
    c->rdv = o->rdv;
    o->rdv = NULL;
    c->prefix = gpp_xstrdup(o->prefix);
    c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : GPP_COMM_TIMEOUT_DEFAULT_MS;
    c->device = o->device;
    c->compute = (cudaStream_t)o->compute_stream;
    c->pending_tail = &c->pending;
    pthread_mutex_init(&c->mu, NULL);
    char key[512];
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess) {
        gpp_cuda_fail(err, __FILE__, __LINE__, "cudaGetDeviceCount", e);
        gpp_err_prefix(err, "comm nccl: no usable GPU (run on a machine with an NVIDIA GPU and "
                            "driver, or use the gloo comm)");
        goto fail;
    }
    if (o->device >= n_dev) {
        gpp_err_set(err,
                    "comm nccl rank %d: GPU %d does not exist (%d visible); choose a device "
                    "in [0, %d)",
                    o->rank, o->device, n_dev, n_dev);
        goto fail;
    }
    if (s_load(err) < 0)
        goto fail;
    e = cudaSetDevice(c->device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&c->cs, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&c->ev_compute, cudaEventDisableTiming);
    if (e != cudaSuccess) {
        gpp_cuda_fail(err, __FILE__, __LINE__, "communication stream", e);
        goto fail;
    }
    if (gpp_nccl_id_key(key, sizeof key, c->prefix, NULL, 0, err) < 0 ||
        s_init_comm(c, &c->world, key, o->world_size, o->rank, o->rank == 0, err) < 0)
        goto fail;
    return &c->base;
fail:
    s_destroy(&c->base);
    return NULL;
}

/* ---- point-to-point ---- */

static int s_post(gpp_comm_t *base, int send, void *buf, size_t bytes, int peer, uint32_t tag,
                  gpp_comm_req_t **req, gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    if (s_live(c, err) < 0)
        return -1;
    s_req_t *r = gpp_xcalloc(1, sizeof *r);
    r->base.comm = base;
    r->send = send;
    r->peer = peer;
    r->tag = tag;
    r->buf = buf;
    r->bytes = bytes;
    *c->pending_tail = r;
    c->pending_tail = &r->next_pending;
    *req = &r->base;
    return 0;
}
static int s_isend(gpp_comm_t *c, const void *buf, size_t bytes, int peer, uint32_t tag,
                   gpp_comm_req_t **req, gpp_err_t *err)
{
    return s_post(c, 1, (void *)(uintptr_t)buf, bytes, peer, tag, req, err);
}
static int s_irecv(gpp_comm_t *c, void *buf, size_t bytes, int peer, uint32_t tag,
                   gpp_comm_req_t **req, gpp_err_t *err)
{
    return s_post(c, 0, buf, bytes, peer, tag, req, err);
}

/* Launches the pending operations as one NCCL group on the communication
 * stream, then one event per request. */
static int s_flush(gpp_comm_t *base, gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    if (!c->pending)
        return 0;
    if (s_live(c, err) < 0)
        return -1;
    GPP_CUDA_TRY(cudaSetDevice(c->device), err);
    if (s_after_compute(c, err) < 0)
        return -1;
    S_NCCL_TRY(c, s_nc.ncclGroupStart(), err);
    ncclResult_t r = ncclSuccess;
    const char *call = "ncclSend";
    for (s_req_t *q = c->pending; q && (r == ncclSuccess || r == ncclInProgress);
         q = q->next_pending) {
        call = q->send ? "ncclSend" : "ncclRecv";
        r = q->send ? s_nc.ncclSend(q->buf, q->bytes, ncclUint8, q->peer, c->world, c->cs)
                    : s_nc.ncclRecv(q->buf, q->bytes, ncclUint8, q->peer, c->world, c->cs);
    }
    ncclResult_t r_end = s_nc.ncclGroupEnd();
    if (r != ncclSuccess && r != ncclInProgress) {
        S_NCCL_FAIL(c, err, call, r);
        return s_fail_all(c, err);
    }
    if (r_end != ncclSuccess && r_end != ncclInProgress) {
        S_NCCL_FAIL(c, err, "ncclGroupEnd", r_end);
        return s_fail_all(c, err);
    }
    if (s_settle(c, c->world, "ncclGroupEnd (point-to-point)", err) < 0)
        return -1;
    while (c->pending) {
        s_req_t *q = c->pending;
        GPP_CUDA_TRY(cudaEventCreateWithFlags(&q->ev, cudaEventDisableTiming), err);
        GPP_CUDA_TRY(cudaEventRecord(q->ev, c->cs), err);
        c->pending = q->next_pending;
        q->next_pending = NULL;
    }
    c->pending_tail = &c->pending;
    return 0;
}

static int s_wait(gpp_comm_t *base, gpp_comm_req_t *req, gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    s_req_t *r = (s_req_t *)req;
    if (!r->ev && s_flush(base, err) < 0)
        return -1;
    if (!r->ev)
        return s_live(c, err);
    char what[96];
    snprintf(what, sizeof what, "%s of %zu bytes %s rank %d (tag %u)",
             r->send ? "ncclSend" : "ncclRecv", r->bytes, r->send ? "to" : "from", r->peer, r->tag);
    if (s_wait_event(c, c->world, r->ev, what, err) < 0)
        return -1;
    if (c->compute && !r->send) /* the consumer's later work follows the data */
        GPP_CUDA_TRY(cudaStreamWaitEvent(c->compute, r->ev, 0), err);
    return 0;
}

static int s_test(gpp_comm_t *base, gpp_comm_req_t *req, int *done, gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    s_req_t *r = (s_req_t *)req;
    *done = 0;
    if (!r->ev && s_flush(base, err) < 0)
        return -1;
    if (s_live(c, err) < 0)
        return -1;
    cudaError_t e = cudaEventQuery(r->ev);
    if (e == cudaErrorNotReady)
        return 0;
    if (e != cudaSuccess) {
        gpp_cuda_fail(err, __FILE__, __LINE__, "cudaEventQuery", e);
        return s_fail_all(c, err);
    }
    if (s_check(c, c->world, "gpp_comm_test", err) < 0) /* as in s_wait_event */
        return -1;
    *done = 1;
    return 0;
}

static void s_req_free(gpp_comm_t *base, gpp_comm_req_t *req)
{
    s_comm_t *c = (s_comm_t *)base;
    s_req_t *r = (s_req_t *)req;
    /* a request still pending leaves the list (it was never launched) */
    for (s_req_t **p = &c->pending; *p; p = &(*p)->next_pending)
        if (*p == r) {
            *p = r->next_pending;
            if (c->pending_tail == &r->next_pending)
                c->pending_tail = p;
            break;
        }
    if (r->ev)
        cudaEventDestroy(r->ev);
    free(r);
}

/* ---- groups ---- */

static gpp_comm_group_t *s_group_new(gpp_comm_t *base, const int *ranks, int n, gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    char key[512];
    if (s_live(c, err) < 0 || gpp_nccl_id_key(key, sizeof key, c->prefix, ranks, n, err) < 0)
        return NULL;
    int slot = -1, me = 0;
    for (int i = 0; i < S_MAX_GROUPS; i++) {
        if (c->group_keys[i] && strcmp(c->group_keys[i], key) == 0) {
            gpp_err_set(err,
                        "nccl rank %d: a group of these ranks (%s) exists already; one "
                        "communicator per rank set and plan",
                        base->rank, key);
            return NULL;
        }
        if (slot < 0 && !c->group_keys[i])
            slot = i;
    }
    if (slot < 0) {
        gpp_err_set(err, "nccl rank %d: more than %d groups on one rank", base->rank, S_MAX_GROUPS);
        return NULL;
    }
    while (ranks[me] != base->rank)
        me++;
    cudaError_t e = cudaSetDevice(c->device);
    if (e != cudaSuccess) {
        gpp_cuda_fail(err, __FILE__, __LINE__, "cudaSetDevice", e);
        return NULL;
    }
    ncclComm_t nc = NULL;
    if (s_init_comm(c, &nc, key, n, me, me == 0, err) < 0)
        return NULL;
    s_group_t *g = gpp_xcalloc(1, sizeof *g);
    g->base.comm = base;
    g->base.size = n;
    g->base.rank = me;
    g->nc = nc;
    g->slot = slot;
    c->groups[slot] = g;
    c->group_keys[slot] = gpp_xstrdup(key);
    return &g->base;
}

static void s_group_free(gpp_comm_group_t *gb)
{
    s_group_t *g = (s_group_t *)gb;
    s_comm_t *c = (s_comm_t *)gb->comm;
    if (c) {
        s_close_comm(c, &g->nc);
        c->groups[g->slot] = NULL; /* the key stays used: its unique id was consumed */
    }
    free(g);
}

static ncclComm_t s_nc_of(s_comm_t *c, gpp_comm_group_t *g)
{
    return g ? ((s_group_t *)g)->nc : c->world;
}

/* ---- collectives ---- */

/* Runs one collective already enqueued on the communication stream to its
 * end (group end settled, event completed). */
static int s_finish(s_comm_t *c, ncclComm_t nc, const char *what, gpp_err_t *err)
{
    if (s_settle(c, nc, what, err) < 0)
        return -1;
    cudaEvent_t ev;
    GPP_CUDA_TRY(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), err);
    cudaError_t e = cudaEventRecord(ev, c->cs);
    int rc = e == cudaSuccess ? s_wait_event(c, nc, ev, what, err)
                              : gpp_cuda_fail(err, __FILE__, __LINE__, "cudaEventRecord", e);
    cudaEventDestroy(ev);
    return rc;
}

static int s_allreduce(gpp_comm_t *base, gpp_comm_group_t *g, float *buf, size_t count,
                       gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    if (s_live(c, err) < 0)
        return -1;
    ncclComm_t nc = s_nc_of(c, g);
    if (!nc)
        return s_aborted_err(c, err);
    GPP_CUDA_TRY(cudaSetDevice(c->device), err);
    if (s_after_compute(c, err) < 0)
        return -1;
    S_NCCL_TRY_GOTO(c, s_nc.ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, nc, c->cs), err,
                    fail_all);
    if (s_finish(c, nc, "ncclAllReduce", err) < 0)
        return -1;
    if (c->compute) {
        GPP_CUDA_TRY(cudaEventRecord(c->ev_compute, c->cs), err);
        GPP_CUDA_TRY(cudaStreamWaitEvent(c->compute, c->ev_compute, 0), err);
    }
    return 0;
fail_all:
    return s_fail_all(c, err);
}

static int s_scratch(s_comm_t *c, size_t bytes, gpp_err_t *err)
{
    if (bytes <= c->scratch_bytes)
        return 0;
    if (c->scratch)
        cudaFree(c->scratch);
    c->scratch = NULL;
    c->scratch_bytes = 0;
    GPP_CUDA_TRY(cudaMalloc(&c->scratch, bytes), err);
    c->scratch_bytes = bytes;
    return 0;
}

/* All-gather of `each` bytes per member through the scratch buffer: mine
 * (host) in, every member's block (host, n * each bytes) out. */
static int s_gather_fixed(s_comm_t *c, ncclComm_t nc, int n, int me, const void *mine, size_t each,
                          void *all, gpp_err_t *err)
{
    if (s_scratch(c, each * (size_t)n, err) < 0)
        return -1;
    char *d = c->scratch;
    GPP_CUDA_TRY(cudaMemcpyAsync(d + each * (size_t)me, mine, each, cudaMemcpyHostToDevice, c->cs),
                 err);
    S_NCCL_TRY_GOTO(c, s_nc.ncclAllGather(d + each * (size_t)me, d, each, ncclUint8, nc, c->cs),
                    err, fail_all);
    if (s_finish(c, nc, "ncclAllGather", err) < 0)
        return -1;
    GPP_CUDA_TRY(cudaMemcpy(all, d, each * (size_t)n, cudaMemcpyDeviceToHost), err);
    return 0;
fail_all:
    return s_fail_all(c, err);
}

static int s_allgatherv(gpp_comm_t *base, gpp_comm_group_t *g, const void *buf, size_t bytes,
                        void **out, size_t *bytes_each, gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    if (s_live(c, err) < 0)
        return -1;
    ncclComm_t nc = s_nc_of(c, g);
    if (!nc)
        return s_aborted_err(c, err);
    const int n = g ? g->size : base->world_size, me = g ? g->rank : base->rank;
    GPP_CUDA_TRY(cudaSetDevice(c->device), err);
    uint64_t mine = bytes, *sizes = gpp_xcalloc((size_t)n, sizeof *sizes);
    int rc = s_gather_fixed(c, nc, n, me, &mine, sizeof mine, sizes, err);
    size_t max = 0, total = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        bytes_each[i] = (size_t)sizes[i];
        max = bytes_each[i] > max ? bytes_each[i] : max;
        total += bytes_each[i];
    }
    char *padded = NULL, *res = NULL;
    if (rc == 0 && max > 0) {
        /* payloads padded to the largest: NCCL has no all-gather-v */
        padded = gpp_xcalloc((size_t)n, max);
        char *own = gpp_xcalloc(1, max);
        if (bytes)
            memcpy(own, buf, bytes);
        rc = s_gather_fixed(c, nc, n, me, own, max, padded, err);
        free(own);
    }
    if (rc == 0) {
        res = gpp_xcalloc(total ? total : 1, 1);
        size_t off = 0;
        for (int i = 0; i < n && max > 0; i++) {
            memcpy(res + off, padded + (size_t)i * max, bytes_each[i]);
            off += bytes_each[i];
        }
        *out = res;
    }
    free(padded);
    free(sizes);
    return rc;
}

static int s_barrier(gpp_comm_t *base, gpp_comm_group_t *g, gpp_err_t *err)
{
    s_comm_t *c = (s_comm_t *)base;
    if (s_live(c, err) < 0)
        return -1;
    ncclComm_t nc = s_nc_of(c, g);
    if (!nc)
        return s_aborted_err(c, err);
    GPP_CUDA_TRY(cudaSetDevice(c->device), err);
    if (s_scratch(c, sizeof(float), err) < 0)
        return -1;
    S_NCCL_TRY_GOTO(c,
                    s_nc.ncclAllReduce(c->scratch, c->scratch, 1, ncclFloat32, ncclSum, nc, c->cs),
                    err, fail_all);
    return s_finish(c, nc, "ncclAllReduce (barrier)", err);
fail_all:
    return s_fail_all(c, err);
}

int gpp_comm_nccl_warmup(gpp_comm_t *base, const int *peers, int n, gpp_err_t *err)
{
    assert(base && (peers || !n));
    if (base->ops != &s_ops)
        return gpp_err_set(err, "gpp_comm_nccl_warmup: the comm is %s, not nccl", base->ops->name);
    s_comm_t *c = (s_comm_t *)base;
    if (n <= 0)
        return 0;
    if (s_live(c, err) < 0)
        return -1;
    GPP_CUDA_TRY(cudaSetDevice(c->device), err);
    /* one byte each way per peer: [0, n) sent, [n, 2n) received */
    if (s_scratch(c, 2 * (size_t)n, err) < 0)
        return -1;
    char *d = c->scratch;
    gpp_comm_req_t **reqs = gpp_xcalloc(2 * (size_t)n, sizeof *reqs);
    int rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (peers[i] < 0 || peers[i] >= base->world_size)
            rc = gpp_err_set(err, "gpp_comm_nccl_warmup: peer %d is not a rank of [0, %d)",
                             peers[i], base->world_size);
        else
            rc = gpp_comm_isend(base, d + i, 1, peers[i], 0, &reqs[2 * i], err) < 0 ||
                         gpp_comm_irecv(base, d + n + i, 1, peers[i], 0, &reqs[2 * i + 1], err) < 0
                     ? -1
                     : 0;
    }
    if (rc == 0)
        rc = gpp_comm_flush(base, err);
    for (int i = 0; i < 2 * n; i++)
        if (reqs[i]) {
            if (rc == 0)
                rc = gpp_comm_wait(base, &reqs[i], err);
            else
                s_req_free(base, reqs[i]);
        }
    free(reqs);
    return rc < 0 ? gpp_err_prefix(err, "warming up %d edge(s)", n) : 0;
}

/* From any thread: only flags; the owner thread's polling (or destroy)
 * calls ncclCommAbort, so no communicator is used by two threads. The
 * rendezvous client is aborted at once (it may block a group creation). */
static void s_abort(gpp_comm_t *base, const char *reason)
{
    s_comm_t *c = (s_comm_t *)base;
    pthread_mutex_lock(&c->mu);
    if (!atomic_load(&c->aborted))
        snprintf(c->reason, sizeof c->reason, "%s", reason);
    atomic_store(&c->aborted, 1);
    pthread_mutex_unlock(&c->mu);
    if (c->rdv)
        gpp_rdv_client_abort(c->rdv, reason);
}

/* device buffers, send/recv to self allowed, deferred launch (flush) */
static const gpp_comm_ops_t s_ops = {
    .name = "nccl",
    .device = 1,
    .self_p2p = 1,
    .flush = s_flush,
    .isend = s_isend,
    .irecv = s_irecv,
    .wait = s_wait,
    .test = s_test,
    .req_free = s_req_free,
    .group_new = s_group_new,
    .group_free = s_group_free,
    .allreduce_sum_f32 = s_allreduce,
    .allgatherv = s_allgatherv,
    .barrier = s_barrier,
    .abort = s_abort,
    .destroy = s_destroy,
};
