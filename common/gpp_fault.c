/* gpp_fault: numbered fault-injection hook points (see gpp_fault.h). */
#include "common/gpp_fault.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gpp_err.h"
#include "common/gpp_parse.h"

static const char *const s_names[GPP_FAULT_COUNT] = {
    [GPP_FAULT_ATOMIC_WRITE] = "atomic_write",
    [GPP_FAULT_PROFILE_SLOW] = "profile_slow",
    [GPP_FAULT_PLAN_SLOW] = "plan_slow",
    [GPP_FAULT_CKPT_KILL] = "ckpt_kill",
    [GPP_FAULT_LOOP_STALL] = "loop_stall",
    [GPP_FAULT_WORKER_STUCK] = "worker_stuck",
};
_Static_assert(sizeof s_names / sizeof s_names[0] == GPP_FAULT_COUNT, "a name per fault");

/* Armed faults and their numbers (zero-initialised: nothing armed). */
static int s_armed[GPP_FAULT_COUNT];
static int64_t s_arg[GPP_FAULT_COUNT];
static pthread_once_t s_env_once = PTHREAD_ONCE_INIT;

static int s_find(const char *name, size_t len)
{
    for (int i = 0; i < GPP_FAULT_COUNT; i++)
        if (strlen(s_names[i]) == len && strncmp(s_names[i], name, len) == 0)
            return i;
    return -1;
}

/* GPP_FAULT=name:arg[,name:arg...] */
static void s_read_env(void)
{
    const char *e = getenv("GPP_FAULT");
    if (!e || !*e)
        return;
    char *copy = gpp_xstrdup(e), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        int id = colon ? s_find(tok, (size_t)(colon - tok)) : -1;
        int64_t arg;
        if (id < 0 || gpp_parse_int64("GPP_FAULT", colon + 1, 0, INT64_MAX, &arg, NULL) < 0) {
            char names[256] = "";
            for (int i = 0; i < GPP_FAULT_COUNT; i++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                         s_names[i]);
            gpp_warn("GPP_FAULT: '%s' ignored: expected NAME:N with NAME one of %s", tok, names);
            continue;
        }
        s_armed[id] = 1;
        s_arg[id] = arg;
        gpp_warn("fault injection armed: %s:%" PRId64 " (GPP_FAULT)", s_names[id], arg);
    }
    free(copy);
}

int gpp_fault(enum gpp_fault_id id)
{
    assert(id >= 0 && id < GPP_FAULT_COUNT);
    pthread_once(&s_env_once, s_read_env);
    return s_armed[id];
}

int64_t gpp_fault_arg(enum gpp_fault_id id)
{
    assert(id >= 0 && id < GPP_FAULT_COUNT);
    pthread_once(&s_env_once, s_read_env);
    return s_armed[id] ? s_arg[id] : -1;
}

int gpp_fault_arm(const char *name, int64_t arg)
{
    assert(name);
    pthread_once(&s_env_once, s_read_env);
    int id = s_find(name, strlen(name));
    if (id < 0)
        return -1;
    s_armed[id] = arg >= 0;
    s_arg[id] = arg;
    return 0;
}
