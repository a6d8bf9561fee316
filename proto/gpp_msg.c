/* gpp_msg: encode, decode and validate control-plane envelopes.
 *
 * Validation has two passes. The structural pass walks the protobuf-c
 * descriptors, so it covers every field of every message, present and
 * future: strings bounded, enums known, doubles finite, repeated counts
 * bounded, repeated sub-messages non-NULL. The semantic pass checks what the
 * schema cannot say (ranges, ranks < world size, lo < hi, ...). Decoding also
 * requires the canonical encoding: the decoded message must re-encode to
 * exactly the bytes received. protobuf-c stores strings C-style, so a string
 * with an embedded NUL would otherwise decode to a silently shorter one; the
 * same check rejects duplicated fields and overlong varints, which our
 * encoder never produces. */
#include "proto/gpp_msg.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_PATH_LEN 160

#define S_REQUIRE(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return gpp_err_set(err, __VA_ARGS__);                                                  \
    } while (0)

/* Precision on the wire is gpp_precision_t + 1 (0: not set). */
_Static_assert(GPP__PRECISION__PRECISION_FP32 == GPP_PRECISION_FP32 + 1 &&
                   GPP__PRECISION__PRECISION_TF32 == GPP_PRECISION_TF32 + 1 &&
                   GPP__PRECISION__PRECISION_BF16 == GPP_PRECISION_BF16 + 1,
               "proto Precision and gpp_precision_t drifted apart");
_Static_assert(GPP_PRECISION__COUNT == 3, "a new gpp_precision_t needs a proto Precision value");

Gpp__Precision gpp_msg_precision(gpp_precision_t p)
{
    assert((unsigned)p < GPP_PRECISION__COUNT);
    return (Gpp__Precision)((int)p + 1);
}

/* 1 when the wire's p names a gpp_precision_t (the range check on decode) */
static int s_precision_ok(Gpp__Precision p)
{
    return (int)p >= 1 && (int)p - 1 < GPP_PRECISION__COUNT;
}

gpp_precision_t gpp_msg_precision_of(Gpp__Precision p)
{
    assert(s_precision_ok(p));
    return s_precision_ok(p) ? (gpp_precision_t)((int)p - 1) : GPP_PRECISION_FP32;
}

/* Backend on the wire is gpp_device_kind_t + 1 (0: not set). */
_Static_assert(GPP__BACKEND__BACKEND_CPU == GPP_DEVICE_CPU + 1 &&
                   GPP__BACKEND__BACKEND_CUDA == GPP_DEVICE_CUDA + 1,
               "proto Backend and gpp_device_kind_t drifted apart");
_Static_assert(GPP_DEVICE__COUNT == 2, "a new gpp_device_kind_t needs a proto Backend value");

Gpp__Backend gpp_msg_backend(gpp_device_kind_t k)
{
    assert((unsigned)k < GPP_DEVICE__COUNT);
    return (Gpp__Backend)((int)k + 1);
}

/* 1 when the wire's b names a gpp_device_kind_t (the range check on decode) */
static int s_backend_ok(Gpp__Backend b)
{
    return (int)b >= 1 && (int)b - 1 < GPP_DEVICE__COUNT;
}

gpp_device_kind_t gpp_msg_backend_of(Gpp__Backend b)
{
    assert(s_backend_ok(b));
    return s_backend_ok(b) ? (gpp_device_kind_t)((int)b - 1) : GPP_DEVICE_CPU;
}

/* Optimizer on the wire is gpp_optim_kind_t + 1 (0: not set). */
_Static_assert(GPP__OPTIMIZER__OPTIMIZER_SGD == GPP_OPTIM_SGD + 1 &&
                   GPP__OPTIMIZER__OPTIMIZER_ADAMW == GPP_OPTIM_ADAMW + 1,
               "proto Optimizer and gpp_optim_kind_t drifted apart");
_Static_assert(GPP_OPTIM__COUNT == 2, "a new gpp_optim_kind_t needs a proto Optimizer value");

Gpp__Optimizer gpp_msg_optimizer(gpp_optim_kind_t k)
{
    assert((unsigned)k < GPP_OPTIM__COUNT);
    return (Gpp__Optimizer)((int)k + 1);
}

/* 1 when the wire's o names a gpp_optim_kind_t (the range check on decode) */
static int s_optimizer_ok(Gpp__Optimizer o)
{
    return (int)o >= 1 && (int)o - 1 < GPP_OPTIM__COUNT;
}

gpp_optim_kind_t gpp_msg_optimizer_of(Gpp__Optimizer o)
{
    assert(s_optimizer_ok(o));
    return s_optimizer_ok(o) ? (gpp_optim_kind_t)((int)o - 1) : GPP_OPTIM_ADAMW;
}

/* Initializes *m: magic, our protocol version, seq, sender; no body. */
static void s_envelope_init(gpp_msg_t *m, uint64_t seq, int sender)
{
    assert(m);
    gpp__envelope__init(m);
    m->magic = GPP_MSG_MAGIC;
    m->protocol_version = GPP_PROTOCOL_VERSION;
    m->seq = seq;
    m->sender = sender;
}

/* The envelope's oneof field for a body type, or NULL. */
static const ProtobufCFieldDescriptor *s_body_field(gpp_msg_type_t t)
{
    const ProtobufCFieldDescriptor *f =
        protobuf_c_message_descriptor_get_field(&gpp__envelope__descriptor, (unsigned)t);
    return f && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ? f : NULL;
}

void gpp_msg_wrap(gpp_msg_t *m, uint64_t seq, int sender, gpp_msg_type_t type, void *body)
{
    assert(m && body);
    s_envelope_init(m, seq, sender);
    const ProtobufCFieldDescriptor *f = s_body_field(type);
    assert(f && ((const ProtobufCMessage *)body)->descriptor == f->descriptor);
    if (!f)
        return; /* NDEBUG: left without a body, which encode refuses */
    *(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
    *(void **)((char *)m + f->offset) = body;
}

const char *gpp_msg_type_name(gpp_msg_type_t t)
{
    if (t == GPP__ENVELOPE__BODY__NOT_SET)
        return "none";
    const ProtobufCFieldDescriptor *f = s_body_field(t);
    return f ? f->name : "unknown";
}

/* ---- structural pass ---- */

static int s_walk(const ProtobufCMessage *msg, char *path, size_t plen, gpp_err_t *err);

static int s_check_value(const ProtobufCFieldDescriptor *f, const void *p, char *path, size_t plen,
                         gpp_err_t *err)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(const char *const *)p;
        S_REQUIRE(!s || strnlen(s, GPP_MSG_STR_MAX + 1) <= GPP_MSG_STR_MAX,
                  "%s: string longer than %d bytes", path, GPP_MSG_STR_MAX);
        return 0;
    }
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        S_REQUIRE(protobuf_c_enum_descriptor_get_value(f->descriptor, v) != NULL,
                  "%s: %d is not a valid %s", path, v,
                  ((const ProtobufCEnumDescriptor *)f->descriptor)->short_name);
        return 0;
    }
    case PROTOBUF_C_TYPE_DOUBLE:
        S_REQUIRE(isfinite(*(const double *)p), "%s: not a finite number", path);
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
        S_REQUIRE(isfinite(*(const float *)p), "%s: not a finite number", path);
        return 0;
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)p;
        return sub ? s_walk(sub, path, plen, err) : 0;
    }
    default:
        return 0;
    }
}

static size_t s_elem_size(const ProtobufCFieldDescriptor *f)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* path holds the dotted path of msg (plen bytes used); fields append to it. */
static int s_walk(const ProtobufCMessage *msg, char *path, size_t plen, gpp_err_t *err)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    const char *base = (const char *)msg;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t which = *(const uint32_t *)(base + f->quantifier_offset);
            if (which != f->id)
                continue;
        }
        int n = snprintf(path + plen, S_PATH_LEN - plen, "%s%s", plen ? "." : "", f->name);
        size_t flen = plen + (n > 0 ? (size_t)n : 0);
        if (flen >= S_PATH_LEN)
            flen = S_PATH_LEN - 1;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t count = *(const size_t *)(base + f->quantifier_offset);
            const char *arr = *(const char *const *)(base + f->offset);
            S_REQUIRE(count <= GPP_MSG_REPEATED_MAX, "%s: %zu elements, at most %d allowed", path,
                      count, GPP_MSG_REPEATED_MAX);
            S_REQUIRE(count == 0 || arr, "%s: %zu elements but no array", path, count);
            size_t esz = s_elem_size(f);
            for (size_t k = 0; k < count; k++) {
                int m = snprintf(path + flen, S_PATH_LEN - flen, "[%zu]", k);
                size_t elen = flen + (m > 0 ? (size_t)m : 0);
                if (elen >= S_PATH_LEN)
                    elen = S_PATH_LEN - 1;
                const void *p = arr + k * esz;
                if (f->type == PROTOBUF_C_TYPE_MESSAGE)
                    S_REQUIRE(*(const void *const *)p, "%s: missing element", path);
                if (s_check_value(f, p, path, elen, err) < 0)
                    return -1;
            }
        } else if (s_check_value(f, base + f->offset, path, flen, err) < 0) {
            return -1;
        }
        path[plen] = '\0';
    }
    return 0;
}

/* ---- semantic pass ---- */

static int s_nonempty(const char *s)
{
    return s && s[0];
}

static int s_check_register(const Gpp__Register *r, gpp_err_t *err)
{
    S_REQUIRE(s_nonempty(r->host), "register.host: empty");
    S_REQUIRE(r->slot >= 0, "register.slot: %d is negative", r->slot);
    S_REQUIRE(r->backend != GPP__BACKEND__BACKEND_UNSPECIFIED, "register.backend: not set");
    S_REQUIRE(s_backend_ok(r->backend), "register.backend: %d names no device kind",
              (int)r->backend);
    S_REQUIRE(r->mem_bytes > 0, "register.mem_bytes: %lld is not positive",
              (long long)r->mem_bytes);
    S_REQUIRE(r->pid > 0, "register.pid: %d is not positive", r->pid);
    size_t nl = r->device_name ? strlen(r->device_name) : 0;
    S_REQUIRE(nl > 0 && nl <= GPP_MSG_DEVICE_NAME_MAX,
              "register.device_name: %zu bytes, expected 1..%d", nl, GPP_MSG_DEVICE_NAME_MAX);
    S_REQUIRE(r->mem_total_bytes > 0, "register.mem_total_bytes: %lld is not positive",
              (long long)r->mem_total_bytes);
    S_REQUIRE(r->mem_free_bytes >= 0 && r->mem_free_bytes <= r->mem_total_bytes,
              "register.mem_free_bytes: %lld outside [0, mem_total_bytes %lld]",
              (long long)r->mem_free_bytes, (long long)r->mem_total_bytes);
    if (r->backend == GPP__BACKEND__BACKEND_CUDA) {
        S_REQUIRE(r->gpu >= 0 && r->gpu < GPP_MSG_GPU_MAX, "register.gpu: %d outside [0, %d)",
                  r->gpu, GPP_MSG_GPU_MAX);
        S_REQUIRE(r->sm_count >= 1 && r->sm_count <= 65536,
                  "register.sm_count: %d outside [1, 65536] for a GPU", r->sm_count);
        S_REQUIRE(!s_nonempty(r->device_error),
                  "register.device_error: set for an agent with a GPU");
    } else {
        S_REQUIRE(r->gpu == -1, "register.gpu: %d for a CPU agent, expected -1", r->gpu);
        S_REQUIRE(r->sm_count == 0, "register.sm_count: %d for a CPU agent, expected 0",
                  r->sm_count);
    }
    return 0;
}

static int s_check_profile_request(const Gpp__ProfileRequest *p, gpp_err_t *err)
{
    S_REQUIRE(s_nonempty(p->model), "profile_request.model: empty");
    S_REQUIRE(p->n_micro_batches > 0, "profile_request.micro_batches: empty");
    for (size_t i = 0; i < p->n_micro_batches; i++)
        S_REQUIRE(p->micro_batches[i] > 0, "profile_request.micro_batches[%zu]: %d is not positive",
                  i, p->micro_batches[i]);
    S_REQUIRE(p->iterations > 0, "profile_request.iterations: %d is not positive", p->iterations);
    S_REQUIRE(p->backend != GPP__BACKEND__BACKEND_UNSPECIFIED, "profile_request.backend: not set");
    S_REQUIRE(s_backend_ok(p->backend), "profile_request.backend: %d names no device kind",
              (int)p->backend);
    S_REQUIRE(p->precision != GPP__PRECISION__PRECISION_UNSPECIFIED,
              "profile_request.precision: not set");
    S_REQUIRE(s_precision_ok(p->precision), "profile_request.precision: %d names no precision",
              (int)p->precision);
    S_REQUIRE(p->precision == GPP__PRECISION__PRECISION_FP32 ||
                  p->backend == GPP__BACKEND__BACKEND_CUDA,
              "profile_request.precision: %s needs backend cuda (the CPU backend computes fp32)",
              gpp_precision_name(gpp_msg_precision_of(p->precision)));
    S_REQUIRE(!p->bf16_tensors || (p->backend == GPP__BACKEND__BACKEND_CUDA &&
                                   p->precision == GPP__PRECISION__PRECISION_BF16),
              "profile_request.bf16_tensors: set without backend cuda at precision bf16");
    S_REQUIRE(!p->figures_only || (p->n_micro_batches == 1 && p->micro_batches[0] == 1),
              "profile_request.micro_batches: figures_only takes [1], got %zu sizes from %d",
              p->n_micro_batches, p->micro_batches[0]);
    return 0;
}

static int s_check_profile_result(const Gpp__ProfileResult *p, gpp_err_t *err)
{
    size_t dl = p->device_name ? strlen(p->device_name) : 0;
    S_REQUIRE(dl <= GPP_MSG_DEVICE_NAME_MAX, "profile_result.device_name: %zu bytes, at most %d",
              dl, GPP_MSG_DEVICE_NAME_MAX);
    for (size_t i = 0; i < p->n_ops; i++) {
        const Gpp__OpProfile *o = p->ops[i];
        S_REQUIRE(o->op >= 0, "profile_result.ops[%zu].op: %d is negative", i, o->op);
        S_REQUIRE(o->micro_batch > 0, "profile_result.ops[%zu].micro_batch: %d is not positive", i,
                  o->micro_batch);
        S_REQUIRE(o->fwd_ms >= 0 && o->bwd_ms >= 0, "profile_result.ops[%zu]: negative time", i);
        S_REQUIRE(!o->kernel_stash_set || o->kernel_stash >= 0,
                  "profile_result.ops[%zu].kernel_stash: %lld is negative", i,
                  (long long)o->kernel_stash);
        S_REQUIRE(!o->out_bytes_set || o->out_bytes > 0,
                  "profile_result.ops[%zu].out_bytes: %lld is not positive", i,
                  (long long)o->out_bytes);
        S_REQUIRE(!o->workspace_set || (o->workspace_fixed >= 0 && o->workspace_per_sample >= 0),
                  "profile_result.ops[%zu].workspace: fixed %lld, per sample %lld: negative", i,
                  (long long)o->workspace_fixed, (long long)o->workspace_per_sample);
    }
    return 0;
}

/* ---- rendezvous ---- */

static int s_check_token(const char *t, const char *path, gpp_err_t *err)
{
    size_t n = t ? strlen(t) : 0;
    S_REQUIRE(n == GPP_RDV_TOKEN_LEN, "%s: %zu characters, expected %d hex digits", path, n,
              GPP_RDV_TOKEN_LEN);
    for (size_t i = 0; i < n; i++)
        S_REQUIRE((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f'),
                  "%s: character %zu is not a hex digit [0-9a-f]", path, i);
    return 0;
}

static int s_check_key(const char *k, const char *path, gpp_err_t *err)
{
    size_t n = k ? strlen(k) : 0;
    S_REQUIRE(n > 0 && n <= GPP_RDV_KEY_MAX, "%s: %zu bytes, expected 1..%d", path, n,
              GPP_RDV_KEY_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = k[i];
        S_REQUIRE((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      (c && strchr("._,:/=+-", c)),
                  "%s: byte %zu (0x%02x) outside [A-Za-z0-9._,:/=+-]", path, i, (unsigned char)c);
    }
    return 0;
}

static int s_check_rdv_endpoint(const char *ep, gpp_err_t *err)
{
    S_REQUIRE(s_nonempty(ep), "assignment.comm.rdv_endpoint: empty");
    S_REQUIRE(!strncmp(ep, "tcp://", 6) || !strncmp(ep, "ipc://", 6),
              "assignment.comm.rdv_endpoint: \"%.64s\" is not tcp://HOST:PORT or ipc://PATH", ep);
    for (const char *p = ep; *p; p++)
        S_REQUIRE((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f,
                  "assignment.comm.rdv_endpoint: blank or non-ASCII byte 0x%02x",
                  (unsigned char)*p);
    return 0;
}

static int s_check_rdv_set(const Gpp__RdvSet *r, gpp_err_t *err)
{
    if (s_check_token(r->token, "rdv_set.token", err) < 0 ||
        s_check_key(r->key, "rdv_set.key", err) < 0)
        return -1;
    S_REQUIRE(r->value.len <= GPP_RDV_VALUE_MAX, "rdv_set.value: %zu bytes, at most %d allowed",
              r->value.len, GPP_RDV_VALUE_MAX);
    return 0;
}

static int s_check_rdv_get(const Gpp__RdvGet *r, gpp_err_t *err)
{
    if (s_check_token(r->token, "rdv_get.token", err) < 0)
        return -1;
    S_REQUIRE(r->n_keys > 0 && r->n_keys <= GPP_RDV_GET_KEYS_MAX,
              "rdv_get.keys: %zu keys, expected 1..%d", r->n_keys, GPP_RDV_GET_KEYS_MAX);
    char path[48];
    for (size_t i = 0; i < r->n_keys; i++) {
        snprintf(path, sizeof path, "rdv_get.keys[%zu]", i);
        if (s_check_key(r->keys[i], path, err) < 0)
            return -1;
    }
    S_REQUIRE(r->timeout_ms >= 0 && r->timeout_ms <= GPP_RDV_TIMEOUT_MAX_MS,
              "rdv_get.timeout_ms: %d outside [0, %d]", r->timeout_ms, GPP_RDV_TIMEOUT_MAX_MS);
    return 0;
}

static int s_check_rdv_reply(const Gpp__RdvReply *r, gpp_err_t *err)
{
    S_REQUIRE(r->request_seq > 0, "rdv_reply.request_seq: 0");
    S_REQUIRE(r->status != GPP__RDV_STATUS__RDV_STATUS_UNSPECIFIED, "rdv_reply.status: not set");
    S_REQUIRE(r->status == GPP__RDV_STATUS__RDV_OK || r->n_entries == 0,
              "rdv_reply.entries: %zu entries with an error status", r->n_entries);
    S_REQUIRE(r->n_entries <= GPP_RDV_GET_KEYS_MAX, "rdv_reply.entries: %zu, at most %d",
              r->n_entries, GPP_RDV_GET_KEYS_MAX);
    char path[48];
    for (size_t i = 0; i < r->n_entries; i++) {
        snprintf(path, sizeof path, "rdv_reply.entries[%zu].key", i);
        if (s_check_key(r->entries[i]->key, path, err) < 0)
            return -1;
        S_REQUIRE(r->entries[i]->value.len <= GPP_RDV_VALUE_MAX,
                  "rdv_reply.entries[%zu].value: %zu bytes, at most %d allowed", i,
                  r->entries[i]->value.len, GPP_RDV_VALUE_MAX);
    }
    return 0;
}

static int s_check_monitor_reply(const Gpp__MonitorReply *r, gpp_err_t *err)
{
    S_REQUIRE(r->request_seq > 0, "monitor_reply.request_seq: 0");
    S_REQUIRE(r->status != GPP__MONITOR_STATUS__MONITOR_STATUS_UNSPECIFIED,
              "monitor_reply.status: not set");
    S_REQUIRE(r->ticket > 0, "monitor_reply.ticket: 0");
    int ok = r->status == GPP__MONITOR_STATUS__MONITOR_OK;
    S_REQUIRE(ok || (r->metrics.len == 0 && r->schedule.len == 0),
              "monitor_reply: %zu + %zu bytes of metrics and schedule with a status other than ok",
              r->metrics.len, r->schedule.len);
    S_REQUIRE(ok || s_nonempty(r->text), "monitor_reply.text: empty with a status other than ok");
    S_REQUIRE(r->metrics.len <= GPP_MONITOR_TEXT_MAX && r->schedule.len <= GPP_MONITOR_TEXT_MAX,
              "monitor_reply: %zu bytes of metrics, %zu of schedule: at most %d each",
              r->metrics.len, r->schedule.len, GPP_MONITOR_TEXT_MAX);
    return 0;
}

static int s_is_comm_action(Gpp__ActionType t)
{
    return t == GPP__ACTION_TYPE__ACT_SEND_ACT || t == GPP__ACTION_TYPE__ACT_RECV_ACT ||
           t == GPP__ACTION_TYPE__ACT_SEND_GRAD || t == GPP__ACTION_TYPE__ACT_RECV_GRAD ||
           t == GPP__ACTION_TYPE__ACT_ALLREDUCE;
}

static int s_check_action(const Gpp__Assignment *a, size_t i, gpp_err_t *err)
{
    const Gpp__Action *x = a->actions[i];
    int n_mb = a->batch / a->micro_batch;
    switch (x->type) {
    case GPP__ACTION_TYPE__ACT_FWD:
    case GPP__ACTION_TYPE__ACT_BWD:
    case GPP__ACTION_TYPE__ACT_BWD_INPUT:
    case GPP__ACTION_TYPE__ACT_BWD_WEIGHT:
        S_REQUIRE(x->mb >= 0 && x->mb < n_mb,
                  "assignment.actions[%zu].mb: %d outside [0, %d) (batch/micro_batch)", i, x->mb,
                  n_mb);
        return 0;
    case GPP__ACTION_TYPE__ACT_SEND_ACT:
    case GPP__ACTION_TYPE__ACT_RECV_ACT:
    case GPP__ACTION_TYPE__ACT_SEND_GRAD:
    case GPP__ACTION_TYPE__ACT_RECV_GRAD:
        S_REQUIRE(x->mb >= -1 && x->mb < n_mb, "assignment.actions[%zu].mb: %d outside [-1, %d)", i,
                  x->mb, n_mb);
        S_REQUIRE(x->peer_stage >= 0 && x->peer_stage < a->n_stages && x->peer_stage != a->stage,
                  "assignment.actions[%zu].peer_stage: %d is not another stage of [0, %d)", i,
                  x->peer_stage, a->n_stages);
        S_REQUIRE(x->peer_replica >= 0, "assignment.actions[%zu].peer_replica: %d is negative", i,
                  x->peer_replica);
        S_REQUIRE(x->tensor >= -1, /* -1: a chain dependency without data */
                  "assignment.actions[%zu].tensor: %d is below -1", i, x->tensor);
        S_REQUIRE(x->lo >= 0 && x->lo < x->hi && x->hi <= a->batch,
                  "assignment.actions[%zu]: samples [%lld, %lld) not within [0, %d) or empty", i,
                  (long long)x->lo, (long long)x->hi, a->batch);
        return 0;
    default: /* ALLREDUCE, STEP: no operands */
        return 0;
    }
}

static int s_check_assignment(const Gpp__Assignment *a, gpp_err_t *err)
{
    S_REQUIRE(s_nonempty(a->model), "assignment.model: empty");
    S_REQUIRE(a->n_stages > 0, "assignment.n_stages: %d is not positive", a->n_stages);
    S_REQUIRE(a->stage >= 0 && a->stage < a->n_stages, "assignment.stage: %d outside [0, %d)",
              a->stage, a->n_stages);
    S_REQUIRE(a->replicas > 0, "assignment.replicas: %d is not positive", a->replicas);
    S_REQUIRE(a->replica >= 0 && a->replica < a->replicas, "assignment.replica: %d outside [0, %d)",
              a->replica, a->replicas);
    S_REQUIRE(a->n_ops > 0, "assignment.ops: empty");
    for (size_t i = 0; i < a->n_ops; i++)
        S_REQUIRE(a->ops[i] >= 0 && (i == 0 || a->ops[i] > a->ops[i - 1]),
                  "assignment.ops[%zu]: %d is negative or not ascending", i, a->ops[i]);
    S_REQUIRE(a->micro_batch > 0, "assignment.micro_batch: %d is not positive", a->micro_batch);
    S_REQUIRE(a->k > 0, "assignment.k: %d is not positive", a->k);
    S_REQUIRE(a->batch > 0 && a->batch % a->micro_batch == 0,
              "assignment.batch: %d is not a positive multiple of micro_batch %d", a->batch,
              a->micro_batch);
    S_REQUIRE(a->comm, "assignment.comm: missing");
    const Gpp__CommBootstrap *c = a->comm;
    if (s_check_rdv_endpoint(c->rdv_endpoint, err) < 0 ||
        s_check_token(c->rdv_token, "assignment.comm.rdv_token", err) < 0)
        return -1;
    S_REQUIRE(c->world_size > 0, "assignment.comm.world_size: %d is not positive", c->world_size);
    S_REQUIRE(!c->backend || !c->backend[0] || strcmp(c->backend, "gloo") == 0 ||
                  strcmp(c->backend, "nccl") == 0,
              "assignment.comm.backend: \"%.32s\" is not gloo or nccl", c->backend);
    S_REQUIRE(!(c->backend && strcmp(c->backend, "nccl") == 0) ||
                  a->backend == GPP__BACKEND__BACKEND_CUDA,
              "assignment.comm.backend: nccl needs backend cuda");
    S_REQUIRE(c->rank >= 0 && c->rank < c->world_size, "assignment.comm.rank: %d outside [0, %d)",
              c->rank, c->world_size);
    for (size_t i = 0; i < a->n_actions; i++)
        if (s_check_action(a, i, err) < 0)
            return -1;
    for (size_t i = 0; i < a->n_edges; i++) {
        const Gpp__Edge *e = a->edges[i];
        S_REQUIRE(e->peer_stage >= 0 && e->peer_stage < a->n_stages && e->peer_stage != a->stage,
                  "assignment.edges[%zu].peer_stage: %d is not another stage of [0, %d)", i,
                  e->peer_stage, a->n_stages);
        S_REQUIRE(e->n_tensors > 0, "assignment.edges[%zu].tensors: empty", i);
        for (size_t j = 0; j < e->n_tensors; j++)
            S_REQUIRE(e->tensors[j] >= -1, "assignment.edges[%zu].tensors[%zu]: %d is below -1", i,
                      j, e->tensors[j]);
        S_REQUIRE(e->n_replicas > 0, "assignment.edges[%zu].replicas: empty", i);
        for (size_t j = 0; j < e->n_replicas; j++) {
            const Gpp__PeerReplica *r = e->replicas[j];
            S_REQUIRE(r->replica >= 0,
                      "assignment.edges[%zu].replicas[%zu].replica: %d is negative", i, j,
                      r->replica);
            S_REQUIRE(r->rank >= 0 && r->rank < c->world_size,
                      "assignment.edges[%zu].replicas[%zu].rank: %d outside [0, %d)", i, j, r->rank,
                      c->world_size);
        }
    }
    size_t n_comm = 0;
    for (size_t i = 0; i < a->n_actions; i++)
        n_comm += s_is_comm_action(a->actions[i]->type);
    S_REQUIRE(a->n_comm_order || !n_comm || !a->comm->backend ||
                  strcmp(a->comm->backend, "nccl") != 0,
              "assignment.comm_order: empty, but comm.backend nccl runs the transfers only in "
              "that order");
    if (a->n_comm_order) {
        S_REQUIRE(a->n_comm_order == n_comm,
                  "assignment.comm_order: %zu entries for %zu SEND, RECV and ALLREDUCE actions",
                  a->n_comm_order, n_comm);
        char *seen = gpp_xcalloc(a->n_actions + 1, 1);
        for (size_t i = 0; i < a->n_comm_order; i++) {
            int32_t j = a->comm_order[i];
            int ok = j >= 0 && (size_t)j < a->n_actions && !seen[j] &&
                     s_is_comm_action(a->actions[j]->type);
            if (!ok) {
                free(seen);
                return gpp_err_set(err,
                                   "assignment.comm_order[%zu]: %d is not the index of a SEND, "
                                   "RECV or ALLREDUCE in assignment.actions, or repeats one",
                                   i, j);
            }
            seen[j] = 1;
        }
        free(seen);
    }
    S_REQUIRE(a->n_dp_ranks == (size_t)a->replicas,
              "assignment.dp_ranks: %zu ranks for %d replicas", a->n_dp_ranks, a->replicas);
    for (size_t i = 0; i < a->n_dp_ranks; i++)
        S_REQUIRE(a->dp_ranks[i] >= 0 && a->dp_ranks[i] < c->world_size,
                  "assignment.dp_ranks[%zu]: %d outside [0, %d)", i, a->dp_ranks[i], c->world_size);
    S_REQUIRE(a->dp_ranks[a->replica] == c->rank,
              "assignment.dp_ranks[%d]: %d is not this agent's comm rank %d", a->replica,
              a->dp_ranks[a->replica], c->rank);
    S_REQUIRE(a->hyper, "assignment.hyper: missing");
    const Gpp__HyperParams *h = a->hyper;
    S_REQUIRE(h->optimizer != GPP__OPTIMIZER__OPTIMIZER_UNSPECIFIED,
              "assignment.hyper.optimizer: not set");
    S_REQUIRE(s_optimizer_ok(h->optimizer), "assignment.hyper.optimizer: %d names no optimizer",
              (int)h->optimizer);
    S_REQUIRE(h->lr > 0, "assignment.hyper.lr: %g is not positive", h->lr);
    S_REQUIRE(h->momentum >= 0 && h->momentum < 1, "assignment.hyper.momentum: %g outside [0, 1)",
              h->momentum);
    S_REQUIRE(h->weight_decay >= 0, "assignment.hyper.weight_decay: %g is negative",
              h->weight_decay);
    S_REQUIRE(h->beta1 >= 0 && h->beta1 < 1 && h->beta2 >= 0 && h->beta2 < 1,
              "assignment.hyper: betas (%g, %g) outside [0, 1)", h->beta1, h->beta2);
    S_REQUIRE(h->eps >= 0, "assignment.hyper.eps: %g is negative", h->eps);
    S_REQUIRE(a->iterations > 0, "assignment.iterations: %d is not positive", a->iterations);
    S_REQUIRE(a->checkpoint_interval >= 0, "assignment.checkpoint_interval: %d is negative",
              a->checkpoint_interval);
    S_REQUIRE(a->checkpoint_interval == 0 || s_nonempty(a->checkpoint_dir),
              "assignment.checkpoint_dir: empty with checkpoint_interval %d",
              a->checkpoint_interval);
    S_REQUIRE(a->start_iteration >= 0 && a->start_iteration <= a->iterations,
              "assignment.start_iteration: %d outside [0, %d]", a->start_iteration, a->iterations);
    S_REQUIRE(a->backend != GPP__BACKEND__BACKEND_UNSPECIFIED, "assignment.backend: not set");
    S_REQUIRE(s_backend_ok(a->backend), "assignment.backend: %d names no device kind",
              (int)a->backend);
    S_REQUIRE(a->precision != GPP__PRECISION__PRECISION_UNSPECIFIED,
              "assignment.precision: not set");
    S_REQUIRE(s_precision_ok(a->precision), "assignment.precision: %d names no precision",
              (int)a->precision);
    S_REQUIRE(a->precision == GPP__PRECISION__PRECISION_FP32 ||
                  a->backend == GPP__BACKEND__BACKEND_CUDA,
              "assignment.precision: %s needs backend cuda (the CPU backend computes fp32)",
              gpp_precision_name(gpp_msg_precision_of(a->precision)));
    S_REQUIRE(!a->cuda_graphs || a->backend == GPP__BACKEND__BACKEND_CUDA,
              "assignment.cuda_graphs: set with backend cpu (CUDA graphs need cuda)");
    S_REQUIRE(!a->bf16_tensors || (a->backend == GPP__BACKEND__BACKEND_CUDA &&
                                   a->precision == GPP__PRECISION__PRECISION_BF16),
              "assignment.bf16_tensors: set without backend cuda at precision bf16");
    if (a->trace)
        S_REQUIRE(a->trace_iteration >= 0 &&
                      a->trace_iteration < a->iterations - a->start_iteration,
                  "assignment.trace_iteration: %d outside [0, %d)", a->trace_iteration,
                  a->iterations - a->start_iteration);
    else
        S_REQUIRE(a->trace_iteration == 0, "assignment.trace_iteration: %d without trace",
                  a->trace_iteration);
    return 0;
}

static int s_check_metrics(const Gpp__Metrics *m, gpp_err_t *err)
{
    S_REQUIRE(m->iteration >= 0, "metrics.iteration: %d is negative", m->iteration);
    for (size_t i = 0; i < m->n_action_ms; i++)
        S_REQUIRE(m->action_ms[i] >= 0, "metrics.action_ms[%zu]: %g is negative", i,
                  m->action_ms[i]);
    S_REQUIRE(m->iteration_ms >= 0, "metrics.iteration_ms: %g is negative", m->iteration_ms);
    S_REQUIRE(m->bubble_ms >= 0 && m->bubble_ms <= m->iteration_ms,
              "metrics.bubble_ms: %g outside [0, iteration_ms=%g]", m->bubble_ms, m->iteration_ms);
    S_REQUIRE(m->mem_high_water_bytes >= 0, "metrics.mem_high_water_bytes: negative");
    S_REQUIRE(m->device_mem_peak_bytes >= 0, "metrics.device_mem_peak_bytes: %lld is negative",
              (long long)m->device_mem_peak_bytes);
    S_REQUIRE(m->device_mem_backend_bytes >= 0 &&
                  m->device_mem_backend_bytes <= m->device_mem_peak_bytes,
              "metrics.device_mem_backend_bytes: %lld outside [0, device_mem_peak_bytes %lld]",
              (long long)m->device_mem_backend_bytes, (long long)m->device_mem_peak_bytes);
    S_REQUIRE(m->samples >= 0, "metrics.samples: %lld is negative", (long long)m->samples);
    for (size_t i = 0; i < m->n_op_digests; i++) {
        S_REQUIRE(m->op_digests[i] != NULL, "metrics.op_digests[%zu]: missing", i);
        S_REQUIRE(m->op_digests[i]->op >= 0, "metrics.op_digests[%zu].op: %d is negative", i,
                  m->op_digests[i]->op);
        S_REQUIRE(m->op_digests[i]->sha256.len == 32,
                  "metrics.op_digests[%zu].sha256: %zu bytes, a SHA-256 has 32", i,
                  m->op_digests[i]->sha256.len);
    }
    S_REQUIRE(m->n_action_start_us == m->n_action_end_us &&
                  (m->n_action_start_us == 0 || m->n_action_start_us == m->n_action_ms),
              "metrics: %zu action_start_us and %zu action_end_us for %zu actions",
              m->n_action_start_us, m->n_action_end_us, m->n_action_ms);
    for (size_t i = 0; i < m->n_action_start_us; i++) {
        int64_t s = m->action_start_us[i], e = m->action_end_us[i];
        S_REQUIRE(s >= 0 && e >= s, "metrics.action_*_us[%zu]: [%lld, %lld] not 0 <= start <= end",
                  i, (long long)s, (long long)e);
        S_REQUIRE(i == 0 || s >= m->action_end_us[i - 1],
                  "metrics.action_start_us[%zu]: %lld before the previous action's end %lld", i,
                  (long long)s, (long long)m->action_end_us[i - 1]);
    }
    return 0;
}

static int s_check_heartbeat(const Gpp__Heartbeat *h, gpp_err_t *err)
{
    S_REQUIRE(h->timestamp_us >= 0 && h->mono_us >= 0 && h->echo_mono_us >= 0,
              "heartbeat: negative time (%lld, %lld, %lld)", (long long)h->timestamp_us,
              (long long)h->mono_us, (long long)h->echo_mono_us);
    S_REQUIRE((h->echo_mono_us > 0) == (h->echo_recv_us > 0),
              "heartbeat: echo_mono_us %lld and echo_recv_us %lld: set both or neither",
              (long long)h->echo_mono_us, (long long)h->echo_recv_us);
    S_REQUIRE(h->echo_recv_us <= h->mono_us,
              "heartbeat.echo_recv_us: %lld after the send time mono_us %lld",
              (long long)h->echo_recv_us, (long long)h->mono_us);
    return 0;
}

static int s_check_body(const gpp_msg_t *m, gpp_err_t *err)
{
    switch (m->body_case) {
    case GPP__ENVELOPE__BODY_REGISTER:
        return s_check_register(m->register_, err);
    case GPP__ENVELOPE__BODY_REGISTER_ACK:
        S_REQUIRE(m->register_ack->world_size > 0, "register_ack.world_size: %d is not positive",
                  m->register_ack->world_size);
        S_REQUIRE(m->register_ack->rank >= 0 && m->register_ack->rank < m->register_ack->world_size,
                  "register_ack.rank: %d outside [0, %d)", m->register_ack->rank,
                  m->register_ack->world_size);
        return 0;
    case GPP__ENVELOPE__BODY_REJECT:
        S_REQUIRE(s_nonempty(m->reject->reason), "reject.reason: empty");
        return 0;
    case GPP__ENVELOPE__BODY_PROFILE_REQUEST:
        return s_check_profile_request(m->profile_request, err);
    case GPP__ENVELOPE__BODY_PROFILE_RESULT:
        return s_check_profile_result(m->profile_result, err);
    case GPP__ENVELOPE__BODY_ASSIGNMENT:
        return s_check_assignment(m->assignment, err);
    case GPP__ENVELOPE__BODY_READY:
        S_REQUIRE(m->ready->stage >= 0 && m->ready->replica >= 0,
                  "ready: stage %d / replica %d negative", m->ready->stage, m->ready->replica);
        return 0;
    case GPP__ENVELOPE__BODY_BARRIER_ENTER:
        S_REQUIRE(m->barrier_enter->barrier_id >= 0, "barrier_enter.barrier_id: %d is negative",
                  m->barrier_enter->barrier_id);
        return 0;
    case GPP__ENVELOPE__BODY_BARRIER_RELEASE:
        S_REQUIRE(m->barrier_release->barrier_id >= 0, "barrier_release.barrier_id: %d is negative",
                  m->barrier_release->barrier_id);
        return 0;
    case GPP__ENVELOPE__BODY_HEARTBEAT:
        return s_check_heartbeat(m->heartbeat, err);
    case GPP__ENVELOPE__BODY_METRICS:
        return s_check_metrics(m->metrics, err);
    case GPP__ENVELOPE__BODY_ABORT:
        S_REQUIRE(s_nonempty(m->abort->reason), "abort.reason: empty");
        return 0;
    case GPP__ENVELOPE__BODY_SHUTDOWN:
        return 0;
    case GPP__ENVELOPE__BODY_ERROR:
        S_REQUIRE(m->error->code != GPP__ERROR_CODE__ERROR_UNSPECIFIED, "error.code: not set");
        S_REQUIRE(m->error->failed_peer >= 0, "error.failed_peer: %d, expected 0 or 1 + a rank",
                  m->error->failed_peer);
        S_REQUIRE(!m->error->failed_peer || m->error->code == GPP__ERROR_CODE__ERROR_COMM,
                  "error.failed_peer: %d on an error of code %d (only ERROR_COMM names a peer)",
                  m->error->failed_peer, (int)m->error->code);
        return 0;
    case GPP__ENVELOPE__BODY_RDV_SET:
        return s_check_rdv_set(m->rdv_set, err);
    case GPP__ENVELOPE__BODY_RDV_GET:
        return s_check_rdv_get(m->rdv_get, err);
    case GPP__ENVELOPE__BODY_RDV_REPLY:
        return s_check_rdv_reply(m->rdv_reply, err);
    case GPP__ENVELOPE__BODY_MONITOR_REQUEST:
        return 0; /* any ticket: the coordinator compares it with the one it gave */
    case GPP__ENVELOPE__BODY_MONITOR_REPLY:
        return s_check_monitor_reply(m->monitor_reply, err);
    default:
        return gpp_err_set(err, "body: unknown message type %d", (int)m->body_case);
    }
}

/* The oneof member for body_case, or NULL (a decoded oneof always has one). */
static const void *s_body_ptr(const gpp_msg_t *m)
{
    const ProtobufCFieldDescriptor *f = s_body_field(m->body_case);
    return f ? *(const void *const *)((const char *)m + f->offset) : NULL;
}

int gpp_msg_validate(const gpp_msg_t *m, gpp_err_t *err)
{
    assert(m);
    S_REQUIRE(m->magic == GPP_MSG_MAGIC, "magic: 0x%08x is not a gpp message (0x%08x)", m->magic,
              GPP_MSG_MAGIC);
    S_REQUIRE(m->protocol_version == GPP_PROTOCOL_VERSION,
              "protocol_version: peer speaks %u, we speak %u; run the same gpp build on "
              "coordinator and agents",
              m->protocol_version, GPP_PROTOCOL_VERSION);
    S_REQUIRE(m->seq > 0, "seq: 0 (sequence numbers start at 1)");
    S_REQUIRE(m->sender >= GPP_MSG_SENDER_UNREGISTERED, "sender: %d is not a rank, -1 or -2",
              m->sender);
    S_REQUIRE(m->body_case != GPP__ENVELOPE__BODY__NOT_SET, "body: no message type set");
    S_REQUIRE(s_body_ptr(m), "body: message type %d without a body", (int)m->body_case);
    char path[S_PATH_LEN] = "";
    if (s_walk(&m->base, path, 0, err) < 0)
        return -1;
    return s_check_body(m, err);
}

int gpp_msg_encode(const gpp_msg_t *m, uint8_t **data_out, size_t *len_out, gpp_err_t *err)
{
    assert(m && data_out && len_out);
    *data_out = NULL;
    *len_out = 0;
    if (gpp_msg_validate(m, err) < 0)
        return gpp_err_prefix(err, "gpp_msg: refusing to encode %s",
                              gpp_msg_type_name(m->body_case));
    size_t len = gpp__envelope__get_packed_size(m);
    if (len > GPP_MSG_MAX_BYTES)
        return gpp_err_set(err, "gpp_msg: %s message of %zu bytes exceeds %u bytes",
                           gpp_msg_type_name(m->body_case), len, GPP_MSG_MAX_BYTES);
    uint8_t *buf = gpp_xcalloc(len ? len : 1, 1);
    size_t n = gpp__envelope__pack(m, buf);
    assert(n == len);
    *data_out = buf;
    *len_out = n;
    return 0;
}

/* protobuf-c's packer, comparing what it writes with the frame instead of
 * storing it: no copy of a frame of up to GPP_MSG_MAX_BYTES. */
typedef struct {
    ProtobufCBuffer base;
    const uint8_t *data;
    size_t len, pos;
    int same;
} s_cmp_buffer_t;

static void s_cmp_append(ProtobufCBuffer *buffer, size_t n, const uint8_t *bytes)
{
    s_cmp_buffer_t *c = (s_cmp_buffer_t *)buffer;
    c->same = c->same && n <= c->len - c->pos && memcmp(c->data + c->pos, bytes, n) == 0;
    if (c->same)
        c->pos += n;
}

/* 1 when m encodes to exactly data[0, len): the frame was canonical. The
 * size alone is not enough: protobuf-c takes an over-long tag varint of
 * field 0 (80 00) for an unknown field and writes it back as the invalid
 * 00, and a repeated field sent unpacked is written packed; one byte less
 * and one more leave the size alone (fuzz_msg, corpus/msg/crash-218d3f). */
static int s_encodes_to(const gpp_msg_t *m, const uint8_t *data, size_t len)
{
    s_cmp_buffer_t c = {.base = {.append = s_cmp_append}, .data = data, .len = len, .same = 1};
    gpp__envelope__pack_to_buffer(m, &c.base);
    return c.same && c.pos == len;
}

gpp_msg_t *gpp_msg_decode(const uint8_t *data, size_t len, gpp_err_t *err)
{
    assert(data || len == 0);
    static const uint8_t empty[1];
    if (len > GPP_MSG_MAX_BYTES) {
        gpp_err_set(err, "gpp_msg: frame of %zu bytes exceeds %u bytes; not a gpp message", len,
                    GPP_MSG_MAX_BYTES);
        return NULL;
    }
    gpp_msg_t *m = gpp__envelope__unpack(NULL, len, data ? data : empty);
    if (!m) {
        gpp_err_set(err,
                    "gpp_msg: %zu bytes do not decode as a gpp envelope (truncated or "
                    "corrupt frame, or not a gpp peer)",
                    len);
        return NULL;
    }
    if (gpp_msg_validate(m, err) < 0) {
        gpp_err_prefix(err, "gpp_msg: bad %s message from sender %d",
                       gpp_msg_type_name(m->body_case), m->sender);
        gpp_msg_destroy(&m);
        return NULL;
    }
    size_t canon = gpp__envelope__get_packed_size(m);
    if (canon != len || !s_encodes_to(m, data, len)) {
        gpp_err_set(err,
                    "gpp_msg: bad %s message from sender %d: %zu bytes re-encode to %zu other "
                    "bytes (embedded NUL in a string, duplicated field or non-canonical "
                    "encoding)",
                    gpp_msg_type_name(m->body_case), m->sender, len, canon);
        gpp_msg_destroy(&m);
        return NULL;
    }
    return m;
}

void gpp_msg_destroy(gpp_msg_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    gpp__envelope__free_unpacked(*self_p, NULL);
    *self_p = NULL;
}
