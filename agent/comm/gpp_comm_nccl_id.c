/* gpp_comm_nccl_id: the NCCL unique ids through the rendezvous (plain C,
 * built with or without CUDA; tested in tests/unit/test_comm_nccl_id.c).
 * Without CUDA in the build gpp_comm_nccl_new is defined here and refuses. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/comm/gpp_comm_nccl.h"

int gpp_nccl_id_key(char *out, size_t len, const char *prefix, const int *ranks, int n,
                    gpp_err_t *err)
{
    int w = ranks ? snprintf(out, len, "%s/nccl/g/", prefix)
                  : snprintf(out, len, "%s/nccl/world", prefix);
    for (int i = 0; ranks && i < n && w >= 0 && (size_t)w < len; i++)
        w += snprintf(out + w, len - (size_t)w, i ? ".%d" : "%d", ranks[i]);
    if (w < 0 || (size_t)w >= len)
        return gpp_err_set(err,
                           "nccl: the rendezvous key for prefix \"%s\" and %d rank(s) "
                           "exceeds %zu bytes",
                           prefix, n, len);
    return 0;
}

static int s_check_len(const char *what, const char *key, size_t len, gpp_err_t *err)
{
    if (len != GPP_NCCL_ID_BYTES)
        return gpp_err_set(err,
                           "nccl unique id \"%s\": %s %zu bytes, expected %d "
                           "(NCCL_UNIQUE_ID_BYTES); do all agents use the same NCCL 2.x, and "
                           "is the key written by anything else?",
                           key, what, len, GPP_NCCL_ID_BYTES);
    return 0;
}

int gpp_nccl_id_publish(gpp_rdv_client_t *rdv, const char *key, const void *id, size_t len,
                        int timeout_ms, gpp_err_t *err)
{
    if (s_check_len("publishing", key, len, err) < 0)
        return -1;
    if (gpp_rdv_client_set(rdv, key, id, len, timeout_ms, err) < 0)
        return gpp_err_prefix(err, "nccl unique id \"%s\"", key);
    return 0;
}

int gpp_nccl_id_fetch(gpp_rdv_client_t *rdv, const char *key, void *id, size_t len, int timeout_ms,
                      gpp_err_t *err)
{
    if (s_check_len("asked for", key, len, err) < 0)
        return -1;
    void *val = NULL;
    size_t got = 0;
    if (gpp_rdv_client_get(rdv, &key, 1, timeout_ms, &val, &got, err) < 0)
        return gpp_err_prefix(err, "nccl unique id \"%s\"", key);
    int rc = s_check_len("the rendezvous holds", key, got, err);
    if (rc == 0)
        memcpy(id, val, len);
    free(val);
    return rc;
}

#ifndef GPP_HAVE_NCCL
gpp_comm_t *gpp_comm_nccl_new(gpp_comm_opts_t *opts, gpp_err_t *err)
{
    if (opts)
        gpp_rdv_client_destroy(&opts->rdv);
    gpp_err_set(err, "comm nccl: this gpp was built without CUDA (GPP_CUDA=OFF or no nvcc); "
                     "rebuild with the CUDA toolkit or use the gloo comm");
    return NULL;
}

int gpp_comm_nccl_load(int *version, gpp_err_t *err)
{
    *version = 0;
    return gpp_err_set(err, "comm nccl: this gpp was built without CUDA");
}

int gpp_comm_nccl_warmup(gpp_comm_t *comm, const int *peers, int n, gpp_err_t *err)
{
    (void)comm, (void)peers, (void)n;
    return gpp_err_set(err, "gpp_comm_nccl_warmup: this gpp was built without CUDA");
}
#endif
