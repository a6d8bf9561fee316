/* test_comm_nccl_id: the NCCL backend's host side, no GPU needed. Unique
 * ids through the rendezvous (the coordinator's table, served in-process by
 * a thread): rank 0 publishes, rank 1 fetches the same bytes; a value of the
 * wrong size (another NCCL, or a key written by something else) is an error
 * naming the key and both sizes; the key names for the world and a group;
 * opening an NCCL comm where it cannot work fails with a message and takes
 * the rendezvous client; unknown comm backend names; gloo by name with its
 * flags (host buffers, no send to self); libnccl loads with every entry
 * point (CUDA builds). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "agent/comm/gpp_comm.h"
#include "agent/comm/gpp_comm_nccl.h"
#include "agent/comm/gpp_rdv_client.h"
#include "coordinator/gpp_rdv.h"
#include "tests/gpp_test.h"

static gpp_rdv_service_t *s_svc;
static atomic_int s_stop;

static void *s_serve(void *arg)
{
    (void)arg;
    while (!atomic_load(&s_stop))
        gpp_rdv_service_poll(s_svc, 10);
    return NULL;
}

static gpp_rdv_client_t *s_client(int rank)
{
    gpp_err_t err = {{0}};
    gpp_rdv_client_t *c = gpp_rdv_client_new(gpp_rdv_service_endpoint(s_svc),
                                             gpp_rdv_service_token(s_svc), rank, &err);
    GPP_EXPECT_MSG(c, "%s", err.msg);
    return c;
}

static void t_key(void)
{
    gpp_err_t err = {{0}};
    char k[64];
    GPP_EXPECT(gpp_nccl_id_key(k, sizeof k, "job/3", NULL, 0, &err) == 0 &&
               strcmp(k, "job/3/nccl/world") == 0);
    const int ranks[] = {0, 2, 13};
    GPP_EXPECT(gpp_nccl_id_key(k, sizeof k, "job/3", ranks, 3, &err) == 0 &&
               strcmp(k, "job/3/nccl/g/0.2.13") == 0);
    char tiny[16];
    GPP_EXPECT(gpp_nccl_id_key(tiny, sizeof tiny, "job/3", ranks, 3, &err) == -1 &&
               strstr(err.msg, "exceeds 16 bytes"));
}

static void t_id_roundtrip(void)
{
    gpp_rdv_client_t *a = s_client(0), *b = s_client(1);
    if (!a || !b)
        goto out;
    unsigned char id[GPP_NCCL_ID_BYTES], got[GPP_NCCL_ID_BYTES];
    for (int i = 0; i < GPP_NCCL_ID_BYTES; i++)
        id[i] = (unsigned char)(i * 37 + 11);
    memset(got, 0, sizeof got);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_nccl_id_publish(a, "t/nccl/world", id, sizeof id, 5000, &err) == 0, "%s",
                   err.msg);
    GPP_EXPECT_MSG(gpp_nccl_id_fetch(b, "t/nccl/world", got, sizeof got, 5000, &err) == 0, "%s",
                   err.msg);
    GPP_EXPECT(memcmp(id, got, sizeof id) == 0);
    /* a caller with another id size is refused before any traffic */
    GPP_EXPECT(gpp_nccl_id_publish(a, "t/short", id, 100, 5000, &err) == -1 &&
               strstr(err.msg, "100 bytes") && strstr(err.msg, "expected 128"));
    GPP_EXPECT(gpp_nccl_id_fetch(b, "t/nccl/world", got, 64, 5000, &err) == -1 &&
               strstr(err.msg, "64 bytes"));
out:
    gpp_rdv_client_destroy(&a);
    gpp_rdv_client_destroy(&b);
}

/* a value of the wrong size under the key: the fetch names key and sizes
 * and leaves the caller's buffer untouched */
static void t_id_bad_length(void)
{
    gpp_rdv_client_t *a = s_client(0), *b = s_client(1);
    if (!a || !b)
        goto out;
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_rdv_client_set(a, "t/bad/nccl/world", "12345", 5, 5000, &err) == 0, "%s",
                   err.msg);
    unsigned char got[GPP_NCCL_ID_BYTES];
    memset(got, 0xab, sizeof got);
    GPP_EXPECT(gpp_nccl_id_fetch(b, "t/bad/nccl/world", got, sizeof got, 5000, &err) == -1);
    GPP_EXPECT_MSG(strstr(err.msg, "\"t/bad/nccl/world\"") && strstr(err.msg, "holds 5 bytes") &&
                       strstr(err.msg, "expected 128"),
                   "%s", err.msg);
    int untouched = 1;
    for (size_t i = 0; i < sizeof got; i++)
        untouched &= got[i] == 0xab;
    GPP_EXPECT(untouched);
    /* a key nobody sets: the rendezvous timeout, prefixed with the id's key */
    GPP_EXPECT(gpp_nccl_id_fetch(b, "t/never", got, sizeof got, 100, &err) == -1 &&
               strstr(err.msg, "nccl unique id \"t/never\""));
out:
    gpp_rdv_client_destroy(&a);
    gpp_rdv_client_destroy(&b);
}

/* No usable device 4096 anywhere: the open fails with a message (no GPU, no
 * such GPU, or no CUDA in the build) and takes the rendezvous client. */
static void t_open_refused(void)
{
    gpp_comm_opts_t o = {.rdv = s_client(1),
                         .prefix = "t/open",
                         .world_size = 2,
                         .rank = 1,
                         .timeout_ms = 200,
                         .device = 4096};
    gpp_err_t err = {{0}};
    GPP_EXPECT(gpp_comm_new("nccl", &o, &err) == NULL && err.msg[0] && o.rdv == NULL);
    printf("  nccl open on device 4096: %s\n", err.msg);
    o.rdv = s_client(1);
    o.device = 0;
    GPP_EXPECT(gpp_comm_new("mpi", &o, &err) == NULL && o.rdv == NULL &&
               strstr(err.msg, "\"mpi\"") && strstr(err.msg, "\"nccl\""));
}

/* The registration by name and the per-backend flags, on a 1-rank gloo
 * comm: host buffers, flush a no-op, no send to self (nccl allows it). */
static void t_gloo_by_name(void)
{
    gpp_comm_opts_t o = {.rdv = s_client(0),
                         .prefix = "t/gloo",
                         .world_size = 1,
                         .rank = 0,
                         .host = "127.0.0.1",
                         .timeout_ms = 5000};
    gpp_err_t err = {{0}};
    gpp_comm_t *c = o.rdv ? gpp_comm_new("gloo", &o, &err) : NULL;
    GPP_EXPECT_MSG(c && o.rdv == NULL, "%s", err.msg);
    if (!c)
        return;
    GPP_EXPECT(strcmp(gpp_comm_backend(c), "gloo") == 0 && !gpp_comm_is_device(c));
    GPP_EXPECT(gpp_comm_flush(c, &err) == 0);
    char b = 1;
    gpp_comm_req_t *r = NULL;
    GPP_EXPECT(gpp_comm_isend(c, &b, 1, 0, 0, &r, &err) == -1 && !r &&
               strstr(err.msg, "not another rank"));
    gpp_comm_destroy(&c);
}

static void t_nccl_load(void)
{
    gpp_err_t err = {{0}};
    int version = 0;
#ifdef GPP_HAVE_CUDA
    int rc = gpp_comm_nccl_load(&version, &err);
    GPP_EXPECT_MSG(rc == 0 && version >= 21800, "%s (version %d)", err.msg, version);
    printf("  libnccl loaded: version code %d\n", version);
#else
    GPP_EXPECT(gpp_comm_nccl_load(&version, &err) == -1 && strstr(err.msg, "without CUDA"));
#endif
}

static const gpp_test_case_t cases[] = {
    {"key", t_key},
    {"id_roundtrip", t_id_roundtrip},
    {"id_bad_length", t_id_bad_length},
    {"open_refused", t_open_refused},
    {"gloo_by_name", t_gloo_by_name},
    {"nccl_load", t_nccl_load},
    {NULL, NULL},
};

int main(void)
{
    gpp_err_t err = {{0}};
    s_svc = gpp_rdv_service_new("tcp://127.0.0.1:*", 2, &err);
    if (!s_svc) {
        fprintf(stderr, "rendezvous service: %s\n", err.msg);
        return 1;
    }
    pthread_t th;
    pthread_create(&th, NULL, s_serve, NULL);
    int rc = gpp_test_run(cases);
    atomic_store(&s_stop, 1);
    pthread_join(th, NULL);
    gpp_rdv_service_destroy(&s_svc);
    return rc;
}
