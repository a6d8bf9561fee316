/* gpp_registry: see gpp_registry.h. */
#include "coordinator/gpp_registry.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gpp_registry_s {
    int n;
    gpp_agent_t *agents; /* [n] */
};

gpp_registry_t *gpp_registry_new(int n, const char *const *hosts, const int *slots)
{
    assert(n > 0 && hosts && slots);
    gpp_registry_t *self = gpp_xcalloc(1, sizeof *self);
    self->n = n;
    self->agents = gpp_xcalloc((size_t)n, sizeof *self->agents);
    for (int i = 0; i < n; i++) {
        gpp_agent_t *a = &self->agents[i];
        a->rank = i;
        snprintf(a->host, sizeof a->host, "%s", hosts[i]);
        a->slot = slots[i];
        a->state = GPP_AGENT_EXPECTED;
        a->barrier = -1;
        a->iteration = -1;
    }
    return self;
}

void gpp_registry_destroy(gpp_registry_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->agents);
    free(*self_p);
    *self_p = NULL;
}

int gpp_registry_size(const gpp_registry_t *self)
{
    return self->n;
}

gpp_agent_t *gpp_registry_agent(gpp_registry_t *self, int rank)
{
    assert(rank >= 0 && rank < self->n);
    return &self->agents[rank];
}

const char *gpp_agent_name(const gpp_agent_t *a, char *buf, size_t len)
{
    if (a->pid > 0)
        snprintf(buf, len, "%s:%d (rank %d, pid %d)", a->host, a->slot, a->rank, a->pid);
    else
        snprintf(buf, len, "%s:%d (rank %d)", a->host, a->slot, a->rank);
    return buf;
}

gpp_agent_t *gpp_registry_find(gpp_registry_t *self, const void *id, size_t id_len)
{
    for (int i = 0; i < self->n; i++) {
        gpp_agent_t *a = &self->agents[i];
        if (a->state != GPP_AGENT_EXPECTED && a->id_len == id_len && !memcmp(a->id, id, id_len))
            return a;
    }
    return NULL;
}

gpp_agent_t *gpp_registry_find_pid(gpp_registry_t *self, int pid)
{
    for (int i = 0; i < self->n; i++)
        if (pid > 0 && self->agents[i].launched_pid == pid)
            return &self->agents[i];
    return NULL;
}

gpp_agent_t *gpp_registry_register(gpp_registry_t *self, const Gpp__Register *r, const void *id,
                                   size_t id_len, double now_ms, gpp_err_t *err)
{
    assert(r && id && id_len > 0);
    if (id_len > GPP_REG_ID_MAX) {
        gpp_err_set(err, "routing identity of %zu bytes (max %d)", id_len, GPP_REG_ID_MAX);
        return NULL;
    }
    char name[GPP_REG_HOST_MAX + 64];
    const gpp_agent_t *same = gpp_registry_find(self, id, id_len);
    if (same) {
        gpp_err_set(err, "this peer is already registered as %s",
                    gpp_agent_name(same, name, sizeof name));
        return NULL;
    }
    for (int i = 0; i < self->n; i++) {
        gpp_agent_t *a = &self->agents[i];
        if (strcmp(a->host, r->host) != 0 || a->slot != r->slot)
            continue;
        if (a->state != GPP_AGENT_EXPECTED) {
            gpp_err_set(err,
                        "slot %s:%d is already taken by %s; two agents were started for "
                        "one slot",
                        r->host, r->slot, gpp_agent_name(a, name, sizeof name));
            return NULL;
        }
        a->state = GPP_AGENT_ALIVE;
        memcpy(a->id, id, id_len);
        a->id_len = id_len;
        a->pid = r->pid;
        a->mem_bytes = r->mem_bytes;
        a->backend = r->backend;
        a->gpu = r->gpu;
        snprintf(a->device_name, sizeof a->device_name, "%s", r->device_name);
        a->mem_total_bytes = r->mem_total_bytes;
        a->mem_free_bytes = r->mem_free_bytes;
        a->sm_count = r->sm_count;
        snprintf(a->device_error, sizeof a->device_error, "%s",
                 r->device_error ? r->device_error : "");
        snprintf(a->build_version, sizeof a->build_version, "%s", r->build_version);
        a->last_seen_ms = now_ms;
        return a;
    }
    char known[512];
    gpp_registry_list(self, GPP_AGENT_EXPECTED, 8, known, sizeof known);
    gpp_err_set(err,
                "slot %s:%d is not in the cluster file (unregistered slots: %s); "
                "check the agent's --host/--slot against [[nodes]]",
                r->host, r->slot, known[0] ? known : "none");
    return NULL;
}

int gpp_registry_count(const gpp_registry_t *self, gpp_agent_state_t state)
{
    int c = 0;
    for (int i = 0; i < self->n; i++)
        c += self->agents[i].state == state;
    return c;
}

void gpp_registry_list(const gpp_registry_t *self, gpp_agent_state_t state, int max_list, char *buf,
                       size_t len)
{
    assert(buf && len > 0);
    buf[0] = 0;
    size_t off = 0;
    int listed = 0, more = 0;
    for (int i = 0; i < self->n; i++) {
        const gpp_agent_t *a = &self->agents[i];
        if (a->state != state)
            continue;
        if (listed >= max_list) {
            more++;
            continue;
        }
        int w = snprintf(buf + off, len - off, "%s%s:%d", listed ? ", " : "", a->host, a->slot);
        if (w < 0 || (size_t)w >= len - off)
            return;
        off += (size_t)w;
        listed++;
    }
    if (more)
        snprintf(buf + off, len - off, " and %d more", more);
}
