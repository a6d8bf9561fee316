/* test_proto: the wire protocol (proto/gpp_msg). Round trip of every message
 * type; truncated frames, seeded random garbage and mutations, wrong
 * version and out-of-range fields must be rejected with a reason naming the
 * field, never crash (run under -DGPP_SANITIZE=ON too). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/gpp_msg.h"
#include "tests/gpp_test.h"

/* Storage for one message of every type, filled with valid values. */
typedef struct {
    gpp_msg_t env;
    Gpp__Register reg;
    Gpp__RegisterAck ack;
    Gpp__Reject reject;
    Gpp__ProfileRequest preq;
    int32_t preq_mb[3];
    Gpp__ProfileResult pres;
    Gpp__OpProfile op[2];
    Gpp__OpProfile *opp[2];
    Gpp__Assignment asg;
    int32_t ops[3];
    Gpp__Action act[4];
    Gpp__Action *actp[4];
    Gpp__Edge edge;
    Gpp__Edge *edgep[1];
    int32_t edge_tensors[1];
    Gpp__PeerReplica peer[2];
    Gpp__PeerReplica *peerp[2];
    int32_t dp_ranks[2];
    int32_t comm_order[2];
    Gpp__CommBootstrap comm;
    Gpp__HyperParams hyper;
    Gpp__Ready ready;
    Gpp__BarrierEnter benter;
    Gpp__BarrierRelease brelease;
    Gpp__Heartbeat hb;
    Gpp__Metrics metrics;
    double action_ms[4];
    int64_t act_start_us[4], act_end_us[4];
    Gpp__Abort abort_;
    Gpp__Shutdown shutdown;
    Gpp__Error error;
    Gpp__RdvSet rset;
    Gpp__RdvGet rget;
    char *rget_keys[2];
    Gpp__RdvReply rreply;
    Gpp__RdvEntry rentry[2];
    Gpp__RdvEntry *rentryp[2];
    Gpp__MonitorRequest mreq;
    Gpp__MonitorReply mrep;
} sample_t;

#define TOKEN "0123456789abcdef0123456789abcdef"

static const gpp_msg_type_t ALL_TYPES[] = {
    GPP__ENVELOPE__BODY_REGISTER,        GPP__ENVELOPE__BODY_REGISTER_ACK,
    GPP__ENVELOPE__BODY_REJECT,          GPP__ENVELOPE__BODY_PROFILE_REQUEST,
    GPP__ENVELOPE__BODY_PROFILE_RESULT,  GPP__ENVELOPE__BODY_ASSIGNMENT,
    GPP__ENVELOPE__BODY_READY,           GPP__ENVELOPE__BODY_BARRIER_ENTER,
    GPP__ENVELOPE__BODY_BARRIER_RELEASE, GPP__ENVELOPE__BODY_HEARTBEAT,
    GPP__ENVELOPE__BODY_METRICS,         GPP__ENVELOPE__BODY_ABORT,
    GPP__ENVELOPE__BODY_SHUTDOWN,        GPP__ENVELOPE__BODY_ERROR,
    GPP__ENVELOPE__BODY_RDV_SET,         GPP__ENVELOPE__BODY_RDV_GET,
    GPP__ENVELOPE__BODY_RDV_REPLY,       GPP__ENVELOPE__BODY_MONITOR_REQUEST,
    GPP__ENVELOPE__BODY_MONITOR_REPLY,
};
#define N_TYPES (sizeof ALL_TYPES / sizeof ALL_TYPES[0])

static void s_sample(sample_t *s, gpp_msg_type_t t)
{
    memset(s, 0, sizeof *s);
    void *body = NULL;
    int sender = 3;
    switch (t) {
    case GPP__ENVELOPE__BODY_REGISTER:
        gpp__register__init(&s->reg);
        s->reg.host = "node-a";
        s->reg.slot = 2;
        s->reg.backend = GPP__BACKEND__BACKEND_CUDA;
        s->reg.mem_bytes = 80LL << 30;
        s->reg.pid = 4242;
        s->reg.build_version = "0.1.0";
        s->reg.data_addr = "10.0.0.1:29500";
        s->reg.gpu = 2;
        s->reg.device_name = "NVIDIA H100 80GB HBM3";
        s->reg.mem_total_bytes = 85520809984LL;
        s->reg.mem_free_bytes = 84967555072LL;
        s->reg.sm_count = 132;
        sender = GPP_MSG_SENDER_UNREGISTERED;
        body = &s->reg;
        break;
    case GPP__ENVELOPE__BODY_REGISTER_ACK:
        gpp__register_ack__init(&s->ack);
        s->ack.rank = 3;
        s->ack.world_size = 4;
        sender = GPP_MSG_SENDER_COORD;
        body = &s->ack;
        break;
    case GPP__ENVELOPE__BODY_REJECT:
        gpp__reject__init(&s->reject);
        s->reject.reason = "job is full";
        body = &s->reject;
        break;
    case GPP__ENVELOPE__BODY_PROFILE_REQUEST:
        gpp__profile_request__init(&s->preq);
        s->preq.model = "mmt:branches=2,layers=2,hidden=64,heads=4,seq=16";
        s->preq_mb[0] = 1, s->preq_mb[1] = 2, s->preq_mb[2] = 4;
        s->preq.n_micro_batches = 3;
        s->preq.micro_batches = s->preq_mb;
        s->preq.iterations = 5;
        s->preq.backend = GPP__BACKEND__BACKEND_CUDA;
        s->preq.precision = GPP__PRECISION__PRECISION_BF16;
        body = &s->preq;
        break;
    case GPP__ENVELOPE__BODY_PROFILE_RESULT:
        gpp__profile_result__init(&s->pres);
        for (int i = 0; i < 2; i++) {
            gpp__op_profile__init(&s->op[i]);
            s->op[i].op = i;
            s->op[i].micro_batch = 4;
            s->op[i].fwd_ms = 0.25 * (i + 1);
            s->op[i].bwd_ms = 0.5 * (i + 1);
            s->opp[i] = &s->op[i];
        }
        s->pres.n_ops = 2;
        s->pres.ops = s->opp;
        body = &s->pres;
        break;
    case GPP__ENVELOPE__BODY_ASSIGNMENT: {
        Gpp__Assignment *a = &s->asg;
        gpp__assignment__init(a);
        a->model = "mmt:branches=2";
        a->backend = GPP__BACKEND__BACKEND_CUDA;
        a->precision = GPP__PRECISION__PRECISION_BF16;
        a->stage = 1;
        a->n_stages = 3;
        a->replica = 1;
        a->replicas = 2;
        s->ops[0] = 4, s->ops[1] = 5, s->ops[2] = 9;
        a->n_ops = 3;
        a->ops = s->ops;
        a->micro_batch = 4;
        a->k = 1;
        a->batch = 16;
        const Gpp__ActionType types[4] = {GPP__ACTION_TYPE__ACT_RECV_ACT, GPP__ACTION_TYPE__ACT_FWD,
                                          GPP__ACTION_TYPE__ACT_SEND_ACT,
                                          GPP__ACTION_TYPE__ACT_STEP};
        for (int i = 0; i < 4; i++) {
            gpp__action__init(&s->act[i]);
            s->act[i].type = types[i];
            s->act[i].mb = types[i] == GPP__ACTION_TYPE__ACT_STEP ? -1 : 0;
            s->act[i].peer_stage = i == 0 ? 0 : i == 2 ? 2 : -1;
            s->act[i].peer_replica = (i == 0 || i == 2) ? 0 : -1;
            s->act[i].tensor = (i == 0 || i == 2) ? 3 + i : -1;
            s->act[i].lo = (i == 0 || i == 2) ? 2 : 0;
            s->act[i].hi = (i == 0 || i == 2) ? 4 : 0;
            s->actp[i] = &s->act[i];
        }
        a->n_actions = 4;
        a->actions = s->actp;
        gpp__edge__init(&s->edge);
        s->edge.peer_stage = 2;
        s->edge.downstream = 1;
        s->edge_tensors[0] = 5;
        s->edge.n_tensors = 1;
        s->edge.tensors = s->edge_tensors;
        for (int i = 0; i < 2; i++) {
            gpp__peer_replica__init(&s->peer[i]);
            s->peer[i].replica = i;
            s->peer[i].rank = 3 + i;
            s->peer[i].address = "node-b:29500";
            s->peerp[i] = &s->peer[i];
        }
        s->edge.n_replicas = 2;
        s->edge.replicas = s->peerp;
        s->edgep[0] = &s->edge;
        a->n_edges = 1;
        a->edges = s->edgep;
        s->dp_ranks[0] = 1, s->dp_ranks[1] = 2;
        a->n_dp_ranks = 2;
        a->dp_ranks = s->dp_ranks;
        gpp__comm_bootstrap__init(&s->comm);
        s->comm.rdv_endpoint = "tcp://coord-host:5555";
        s->comm.rdv_token = TOKEN;
        s->comm.prefix = "job1/attempt0";
        s->comm.world_size = 5;
        s->comm.rank = 2;
        a->comm = &s->comm;
        gpp__hyper_params__init(&s->hyper);
        s->hyper.optimizer = GPP__OPTIMIZER__OPTIMIZER_ADAMW;
        s->hyper.lr = 1e-3;
        s->hyper.weight_decay = 0.01;
        s->hyper.beta1 = 0.9;
        s->hyper.beta2 = 0.999;
        s->hyper.eps = 1e-8;
        a->hyper = &s->hyper;
        a->iterations = 20;
        a->seed = 1234567890123ULL;
        a->checkpoint_dir = "/tmp/ckpt";
        a->checkpoint_interval = 5;
        a->start_iteration = 10;
        a->trace = 1;
        a->trace_iteration = 9; /* the run's last: iterations 10..19 */
        body = a;
        break;
    }
    case GPP__ENVELOPE__BODY_READY:
        gpp__ready__init(&s->ready);
        s->ready.stage = 1;
        s->ready.replica = 0;
        body = &s->ready;
        break;
    case GPP__ENVELOPE__BODY_BARRIER_ENTER:
        gpp__barrier_enter__init(&s->benter);
        s->benter.barrier_id = 12;
        body = &s->benter;
        break;
    case GPP__ENVELOPE__BODY_BARRIER_RELEASE:
        gpp__barrier_release__init(&s->brelease);
        s->brelease.barrier_id = 12;
        body = &s->brelease;
        break;
    case GPP__ENVELOPE__BODY_HEARTBEAT:
        gpp__heartbeat__init(&s->hb);
        s->hb.timestamp_us = 1700000000123456LL;
        s->hb.mono_us = 5000300;      /* t2 */
        s->hb.echo_mono_us = 4000000; /* t0, the coordinator's clock */
        s->hb.echo_recv_us = 5000100; /* t1 */
        body = &s->hb;
        break;
    case GPP__ENVELOPE__BODY_METRICS:
        gpp__metrics__init(&s->metrics);
        s->metrics.iteration = 9;
        for (int i = 0; i < 4; i++)
            s->action_ms[i] = 1.5 * i;
        s->metrics.n_action_ms = 4;
        s->metrics.action_ms = s->action_ms;
        s->metrics.iteration_ms = 20;
        s->metrics.bubble_ms = 3.5;
        s->metrics.mem_high_water_bytes = 123456789;
        s->metrics.device_mem_peak_bytes = 98765432;
        s->metrics.has_loss = 1;
        s->metrics.loss = 2.302585;
        s->metrics.samples = 16;
        for (int i = 0; i < 4; i++) { /* actions back to back, the second one empty */
            s->act_start_us[i] = 1000000 + 100 * i;
            s->act_end_us[i] = s->act_start_us[i] + (i == 1 ? 0 : 100);
        }
        s->metrics.n_action_start_us = s->metrics.n_action_end_us = 4;
        s->metrics.action_start_us = s->act_start_us;
        s->metrics.action_end_us = s->act_end_us;
        body = &s->metrics;
        break;
    case GPP__ENVELOPE__BODY_ABORT:
        gpp__abort__init(&s->abort_);
        s->abort_.reason = "agent 3 silent for 5000 ms";
        body = &s->abort_;
        break;
    case GPP__ENVELOPE__BODY_SHUTDOWN:
        gpp__shutdown__init(&s->shutdown);
        body = &s->shutdown;
        break;
    case GPP__ENVELOPE__BODY_ERROR:
        gpp__error__init(&s->error);
        s->error.code = GPP__ERROR_CODE__ERROR_DEVICE;
        s->error.text = "cudaMalloc: out of memory";
        body = &s->error;
        break;
    case GPP__ENVELOPE__BODY_RDV_SET:
        gpp__rdv_set__init(&s->rset);
        s->rset.token = TOKEN;
        s->rset.key = "gpp-1-2//world/3";
        s->rset.value.data = (uint8_t *)"\x00\x01"
                                        "addr";
        s->rset.value.len = 6;
        body = &s->rset;
        break;
    case GPP__ENVELOPE__BODY_RDV_GET:
        gpp__rdv_get__init(&s->rget);
        s->rget.token = TOKEN;
        s->rget_keys[0] = "job/world/0";
        s->rget_keys[1] = "job/group/0,1/0:x=y+z";
        s->rget.keys = s->rget_keys;
        s->rget.n_keys = 2;
        s->rget.timeout_ms = 30000;
        body = &s->rget;
        break;
    case GPP__ENVELOPE__BODY_RDV_REPLY:
        gpp__rdv_reply__init(&s->rreply);
        s->rreply.request_seq = 41;
        s->rreply.status = GPP__RDV_STATUS__RDV_OK;
        for (int i = 0; i < 2; i++) {
            gpp__rdv_entry__init(&s->rentry[i]);
            s->rentry[i].key = i ? "job/world/1" : "job/world/0";
            s->rentry[i].value.data = (uint8_t *)"value";
            s->rentry[i].value.len = (size_t)(5 - i);
            s->rentryp[i] = &s->rentry[i];
        }
        s->rreply.entries = s->rentryp;
        s->rreply.n_entries = 2;
        sender = GPP_MSG_SENDER_COORD;
        body = &s->rreply;
        break;
    case GPP__ENVELOPE__BODY_MONITOR_REQUEST:
        gpp__monitor_request__init(&s->mreq);
        s->mreq.ticket = 0x8000000000000001ULL;
        sender = GPP_MSG_SENDER_UNREGISTERED;
        body = &s->mreq;
        break;
    case GPP__ENVELOPE__BODY_MONITOR_REPLY:
        gpp__monitor_reply__init(&s->mrep);
        s->mrep.request_seq = 12;
        s->mrep.status = GPP__MONITOR_STATUS__MONITOR_OK;
        s->mrep.ticket = 99;
        s->mrep.metrics.data = (uint8_t *)"gpp_loss 0.5\n";
        s->mrep.metrics.len = 13;
        s->mrep.schedule.data = (uint8_t *)"# gpp-schedule/1 iteration 3\n";
        s->mrep.schedule.len = 29;
        sender = GPP_MSG_SENDER_COORD;
        body = &s->mrep;
        break;
    default:
        break;
    }
    gpp_msg_wrap(&s->env, 7, sender, t, body);
}

/* Packs without validation: how a buggy or hostile peer would send it. */
static uint8_t *s_pack_raw(const gpp_msg_t *m, size_t *len)
{
    *len = gpp__envelope__get_packed_size(m);
    uint8_t *buf = malloc(*len ? *len : 1);
    gpp__envelope__pack(m, buf);
    return buf;
}

static uint64_t s_rng = 0x9E3779B97F4A7C15ULL;
static uint64_t s_next(void)
{
    s_rng ^= s_rng << 13;
    s_rng ^= s_rng >> 7;
    s_rng ^= s_rng << 17;
    return s_rng;
}

static void t_round_trip_every_type(void)
{
    for (size_t i = 0; i < N_TYPES; i++) {
        sample_t s;
        s_sample(&s, ALL_TYPES[i]);
        gpp_err_t err = {{0}};
        uint8_t *buf = NULL;
        size_t len = 0;
        int rc = gpp_msg_encode(&s.env, &buf, &len, &err);
        GPP_EXPECT_MSG(rc == 0, "%s: %s", gpp_msg_type_name(ALL_TYPES[i]), err.msg);
        if (rc)
            continue;
        gpp_msg_t *m = gpp_msg_decode(buf, len, &err);
        GPP_EXPECT_MSG(m, "%s: %s", gpp_msg_type_name(ALL_TYPES[i]), err.msg);
        if (m) {
            GPP_EXPECT(m->body_case == ALL_TYPES[i]);
            GPP_EXPECT(m->seq == 7 && m->sender == s.env.sender);
            /* Same message: re-encoding gives the same bytes. */
            size_t len2 = 0;
            uint8_t *buf2 = s_pack_raw(m, &len2);
            GPP_EXPECT(len2 == len && memcmp(buf, buf2, len) == 0);
            free(buf2);
        }
        gpp_msg_destroy(&m);
        GPP_EXPECT(m == NULL);
        free(buf);
    }
    gpp_msg_destroy(NULL);
}

static void t_round_trip_fields(void)
{
    sample_t s;
    s_sample(&s, GPP__ENVELOPE__BODY_ASSIGNMENT);
    gpp_err_t err = {{0}};
    uint8_t *buf = NULL;
    size_t len = 0;
    GPP_EXPECT(gpp_msg_encode(&s.env, &buf, &len, &err) == 0);
    gpp_msg_t *m = gpp_msg_decode(buf, len, &err);
    GPP_EXPECT_MSG(m, "%s", err.msg);
    if (m) {
        const Gpp__Assignment *a = m->assignment;
        GPP_EXPECT(strcmp(a->model, "mmt:branches=2") == 0);
        GPP_EXPECT(a->n_ops == 3 && a->ops[2] == 9);
        GPP_EXPECT(a->n_actions == 4 && a->actions[0]->type == GPP__ACTION_TYPE__ACT_RECV_ACT);
        GPP_EXPECT(a->actions[3]->mb == -1 && a->actions[2]->lo == 2 && a->actions[2]->hi == 4);
        GPP_EXPECT(a->edges[0]->replicas[1]->rank == 4);
        GPP_EXPECT(strcmp(a->edges[0]->replicas[1]->address, "node-b:29500") == 0);
        GPP_EXPECT(a->comm->rank == 2 && a->comm->world_size == 5);
        GPP_EXPECT(a->hyper->beta2 == 0.999 && a->hyper->lr == 1e-3);
        GPP_EXPECT(a->seed == 1234567890123ULL && a->start_iteration == 10);
    }
    gpp_msg_destroy(&m);
    free(buf);
    /* Action types agree with planner/gpp_plan.h. */
    GPP_EXPECT(GPP__ACTION_TYPE__ACT_STEP == 7 && GPP__ACTION_TYPE__ACT_RECV_GRAD == 5);
    GPP_EXPECT(strcmp(gpp_msg_type_name(GPP__ENVELOPE__BODY_BARRIER_RELEASE), "barrier_release") ==
               0);
    GPP_EXPECT(strcmp(gpp_msg_type_name(GPP__ENVELOPE__BODY__NOT_SET), "none") == 0);
    GPP_EXPECT(strcmp(gpp_msg_type_name(GPP__ENVELOPE__BODY_RDV_GET), "rdv_get") == 0);
    /* the rendezvous fields survive the trip, bytes with a NUL included */
    s_sample(&s, GPP__ENVELOPE__BODY_RDV_SET);
    GPP_EXPECT(gpp_msg_encode(&s.env, &buf, &len, &err) == 0);
    m = gpp_msg_decode(buf, len, &err);
    GPP_EXPECT_MSG(m, "%s", err.msg);
    if (m)
        GPP_EXPECT(!strcmp(m->rdv_set->token, TOKEN) && m->rdv_set->value.len == 6 &&
                   !memcmp(m->rdv_set->value.data,
                           "\x00\x01"
                           "addr",
                           6));
    gpp_msg_destroy(&m);
    free(buf);
}

/* gpp_msg_wrap sets the envelope and exactly the body it is given. */
static void t_wrap(void)
{
    Gpp__Ready rd = GPP__READY__INIT;
    rd.stage = 2;
    gpp_msg_t m;
    memset(&m, 0xab, sizeof m);
    gpp_msg_wrap(&m, 9, 4, GPP__ENVELOPE__BODY_READY, &rd);
    GPP_EXPECT(m.magic == GPP_MSG_MAGIC && m.protocol_version == GPP_PROTOCOL_VERSION);
    GPP_EXPECT(m.seq == 9 && m.sender == 4);
    GPP_EXPECT(m.body_case == GPP__ENVELOPE__BODY_READY && m.ready == &rd);
    gpp_err_t err = {{0}};
    GPP_EXPECT_MSG(gpp_msg_validate(&m, &err) == 0, "%s", err.msg);
    Gpp__Shutdown sd = GPP__SHUTDOWN__INIT;
    gpp_msg_wrap(&m, 10, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_SHUTDOWN, &sd);
    GPP_EXPECT(m.body_case == GPP__ENVELOPE__BODY_SHUTDOWN && m.shutdown == &sd &&
               m.sender == GPP_MSG_SENDER_COORD);
}

static void t_truncated(void)
{
    for (size_t i = 0; i < N_TYPES; i++) {
        sample_t s;
        s_sample(&s, ALL_TYPES[i]);
        size_t len;
        uint8_t *buf = s_pack_raw(&s.env, &len);
        for (size_t cut = 0; cut < len; cut++) {
            gpp_err_t err = {{0}};
            uint8_t *copy = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
            memcpy(copy, buf, cut);
            gpp_msg_t *m = gpp_msg_decode(copy, cut, &err);
            GPP_EXPECT_MSG(!m, "%s cut at %zu of %zu accepted", gpp_msg_type_name(ALL_TYPES[i]),
                           cut, len);
            GPP_EXPECT(err.msg[0] != '\0');
            gpp_msg_destroy(&m);
            free(copy);
        }
        free(buf);
    }
}

static void t_random_garbage(void)
{
    s_rng = 12345;
    int rejected = 0;
    for (int c = 0; c < 10000; c++) {
        size_t len = (size_t)(s_next() % 512);
        uint8_t *buf = malloc(len ? len : 1);
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)s_next();
        /* Half the cases start with a valid header so the body is exercised. */
        if (c % 2 && len > 8) {
            const uint8_t hdr[] = {0x0d, 'G', 'P', 'P', '1', 0x10, GPP_PROTOCOL_VERSION, 0x18, 1};
            memcpy(buf, hdr, sizeof hdr < len ? sizeof hdr : len);
        }
        gpp_err_t err = {{0}};
        gpp_msg_t *m = gpp_msg_decode(buf, len, &err);
        if (!m) {
            rejected++;
            GPP_EXPECT(err.msg[0] != '\0');
        } else {
            GPP_EXPECT(gpp_msg_validate(m, &err) == 0);
        }
        gpp_msg_destroy(&m);
        free(buf);
    }
    printf("  random garbage: %d of 10000 rejected\n", rejected);
    GPP_EXPECT(rejected >= 9990);
}

static void t_mutations(void)
{
    /* Flip bytes of valid frames: anything accepted must still be valid. */
    s_rng = 777;
    int rejected = 0, total = 0;
    for (size_t i = 0; i < N_TYPES; i++) {
        sample_t s;
        s_sample(&s, ALL_TYPES[i]);
        size_t len;
        uint8_t *buf = s_pack_raw(&s.env, &len);
        for (int c = 0; c < 1000; c++, total++) {
            uint8_t *copy = malloc(len);
            memcpy(copy, buf, len);
            int flips = 1 + (int)(s_next() % 3);
            for (int f = 0; f < flips; f++)
                copy[s_next() % len] = (uint8_t)s_next();
            gpp_err_t err = {{0}};
            gpp_msg_t *m = gpp_msg_decode(copy, len, &err);
            if (!m) {
                rejected++;
                GPP_EXPECT(err.msg[0] != '\0');
            } else {
                GPP_EXPECT_MSG(gpp_msg_validate(m, &err) == 0, "%s", err.msg);
            }
            gpp_msg_destroy(&m);
            free(copy);
        }
        free(buf);
    }
    printf("  mutations: %d of %d rejected\n", rejected, total);
    GPP_EXPECT(rejected > 0);
}

/* One bad field: a mutation of a valid sample and the text the reason must
 * contain. */
typedef struct {
    const char *name;
    gpp_msg_type_t type;
    void (*mutate)(sample_t *s);
    const char *expect;
} bad_case_t;

static char s_long[GPP_MSG_STR_MAX + 2];

static void m_magic(sample_t *s)
{
    s->env.magic = 0x12345678;
}
static void m_version(sample_t *s)
{
    s->env.protocol_version = GPP_PROTOCOL_VERSION + 1;
}
static void m_seq(sample_t *s)
{
    s->env.seq = 0;
}
static void m_sender(sample_t *s)
{
    s->env.sender = -7;
}
static void m_no_body(sample_t *s)
{
    s->env.body_case = GPP__ENVELOPE__BODY__NOT_SET;
}
static void m_backend(sample_t *s)
{
    s->reg.backend = 9;
}
static void m_backend_unset(sample_t *s)
{
    s->reg.backend = 0;
}
static void m_host_long(sample_t *s)
{
    s->reg.host = s_long;
}
static void m_mem(sample_t *s)
{
    s->reg.mem_bytes = -1;
}
static void m_dev_name(sample_t *s)
{
    s->reg.device_name = "";
}
static void m_dev_free(sample_t *s)
{
    s->reg.mem_free_bytes = s->reg.mem_total_bytes + 1;
}
static void m_dev_total(sample_t *s)
{
    s->reg.mem_total_bytes = 0;
}
static void m_dev_gpu(sample_t *s)
{
    s->reg.gpu = -1;
}
static void m_dev_sm(sample_t *s)
{
    s->reg.sm_count = 0;
}
static void m_dev_cpu_gpu(sample_t *s)
{
    s->reg.backend = GPP__BACKEND__BACKEND_CPU;
    s->reg.sm_count = 0;
}
static void m_dev_error(sample_t *s)
{
    s->reg.device_error = "no GPU";
}
static void m_asg_backend(sample_t *s)
{
    s->asg.backend = GPP__BACKEND__BACKEND_UNSPECIFIED;
}
static void m_asg_precision(sample_t *s)
{
    s->asg.precision = 7;
}
static void m_asg_precision_cpu(sample_t *s)
{
    s->asg.backend = GPP__BACKEND__BACKEND_CPU;
}
static void m_asg_graphs_cpu(sample_t *s)
{
    s->asg.backend = GPP__BACKEND__BACKEND_CPU;
    s->asg.precision = GPP__PRECISION__PRECISION_FP32;
    s->asg.cuda_graphs = 1;
}
static void m_asg_bf16_tensors_fp32(sample_t *s)
{
    s->asg.backend = GPP__BACKEND__BACKEND_CUDA;
    s->asg.precision = GPP__PRECISION__PRECISION_FP32;
    s->asg.bf16_tensors = 1;
}
static void m_ack_rank(sample_t *s)
{
    s->ack.rank = 4;
}
static void m_prof_mb(sample_t *s)
{
    s->preq_mb[1] = 0;
}
static void m_prof_backend(sample_t *s)
{
    s->preq.backend = GPP__BACKEND__BACKEND_UNSPECIFIED;
}
static void m_prof_figures(sample_t *s)
{
    s->preq.figures_only = 1; /* with sizes 1, 2, 4 */
}
static void m_prof_precision(sample_t *s)
{
    s->preq.precision = GPP__PRECISION__PRECISION_UNSPECIFIED;
}
static void m_prof_cpu_bf16(sample_t *s)
{
    s->preq.backend = GPP__BACKEND__BACKEND_CPU;
}
static void m_prof_devname(sample_t *s)
{
    static char name[300];
    memset(name, 'g', sizeof name - 1);
    s->pres.device_name = name;
}
static void m_prof_nan(sample_t *s)
{
    s->op[1].fwd_ms = NAN;
}
static void m_prof_neg(sample_t *s)
{
    s->op[0].op = -3;
}
static void m_prof_stash(sample_t *s)
{
    s->op[1].kernel_stash_set = 1;
    s->op[1].kernel_stash = -8;
}
static void m_prof_out(sample_t *s)
{
    s->op[1].out_bytes_set = 1;
    s->op[1].out_bytes = 0;
}
static void m_prof_work(sample_t *s)
{
    s->op[1].workspace_set = 1;
    s->op[1].workspace_fixed = 0;
    s->op[1].workspace_per_sample = -16;
}
static void m_comm_rank(sample_t *s)
{
    s->comm.rank = 5;
}
static void m_peer_rank(sample_t *s)
{
    s->peer[1].rank = 99;
}
static void m_dp_rank(sample_t *s)
{
    s->dp_ranks[0] = -1;
}
static void m_dp_count(sample_t *s)
{
    s->asg.n_dp_ranks = 1;
}
/* comm_order: every SEND, RECV and ALLREDUCE once (actions 0 and 2) */
static void m_order_count(sample_t *s)
{
    s->comm_order[0] = 2;
    s->asg.n_comm_order = 1;
    s->asg.comm_order = s->comm_order;
}
static void m_order_pass(sample_t *s)
{
    s->comm_order[0] = 2, s->comm_order[1] = 1; /* a FWD */
    s->asg.n_comm_order = 2;
    s->asg.comm_order = s->comm_order;
}
static void m_order_repeat(sample_t *s)
{
    s->comm_order[0] = 2, s->comm_order[1] = 2;
    s->asg.n_comm_order = 2;
    s->asg.comm_order = s->comm_order;
}
static void m_order_range(sample_t *s)
{
    s->comm_order[0] = 0, s->comm_order[1] = 4;
    s->asg.n_comm_order = 2;
    s->asg.comm_order = s->comm_order;
}
static void m_comm_backend(sample_t *s)
{
    s->comm.backend = "mpi";
}
static void m_comm_nccl_cpu(sample_t *s)
{
    s->comm.backend = "nccl";
    s->asg.backend = GPP__BACKEND__BACKEND_CPU;
}
static void m_comm_nccl_no_order(sample_t *s)
{
    s->comm.backend = "nccl";
    s->asg.backend = GPP__BACKEND__BACKEND_CUDA;
}
static void m_lo_hi(sample_t *s)
{
    s->act[2].lo = 4;
}
static void m_hi_batch(sample_t *s)
{
    s->act[0].hi = 17;
}
static void m_act_type(sample_t *s)
{
    s->act[1].type = 42;
}
static void m_act_mb(sample_t *s)
{
    s->act[1].mb = 4;
}
static void m_act_peer(sample_t *s)
{
    s->act[0].peer_stage = 1;
}
static void m_op_neg(sample_t *s)
{
    s->ops[0] = -1;
}
static void m_op_order(sample_t *s)
{
    s->ops[2] = 5;
}
static void m_stage(sample_t *s)
{
    s->asg.stage = 3;
}
static void m_batch(sample_t *s)
{
    s->asg.batch = 18;
}
static void m_lr(sample_t *s)
{
    s->hyper.lr = INFINITY;
}
static void m_momentum(sample_t *s)
{
    s->hyper.momentum = 1.5;
}
static void m_optimizer(sample_t *s)
{
    s->hyper.optimizer = 3;
}
static void m_no_comm(sample_t *s)
{
    s->asg.comm = NULL;
}
static void m_ckpt(sample_t *s)
{
    s->asg.checkpoint_dir = "";
}
static void m_start(sample_t *s)
{
    s->asg.start_iteration = 21;
}
static void m_loss(sample_t *s)
{
    s->metrics.loss = NAN;
}
static void m_bubble(sample_t *s)
{
    s->metrics.bubble_ms = 30;
}
static void m_devmem(sample_t *s)
{
    s->metrics.device_mem_peak_bytes = -1;
}
static void m_times_count(sample_t *s)
{
    s->metrics.n_action_start_us = 3;
}
static void m_times_other_count(sample_t *s)
{
    s->metrics.n_action_start_us = s->metrics.n_action_end_us = 3;
}
static void m_times_end(sample_t *s)
{
    s->act_end_us[2] = s->act_start_us[2] - 1;
}
static void m_times_negative(sample_t *s)
{
    s->act_start_us[0] = -5;
}
static void m_times_overlap(sample_t *s)
{
    s->act_start_us[3] = s->act_end_us[2] - 1;
}
static void m_trace_iteration(sample_t *s)
{
    s->asg.trace_iteration = 10;
}
static void m_trace_off(sample_t *s)
{
    s->asg.trace = 0;
}
static void m_hb_echo_half(sample_t *s)
{
    s->hb.echo_recv_us = 0;
}
static void m_hb_echo_late(sample_t *s)
{
    s->hb.echo_recv_us = s->hb.mono_us + 1;
}
static void m_hb_negative(sample_t *s)
{
    s->hb.mono_us = -1;
}
static void m_barrier(sample_t *s)
{
    s->benter.barrier_id = -1;
}
static void m_err_code(sample_t *s)
{
    s->error.code = 1000;
}

static void m_err_peer_negative(sample_t *s)
{
    s->error.code = GPP__ERROR_CODE__ERROR_COMM;
    s->error.failed_peer = -3;
}

static void m_err_peer_not_comm(sample_t *s)
{
    s->error.failed_peer = 2; /* the sample's code is ERROR_DEVICE */
}
static void m_abort(sample_t *s)
{
    s->abort_.reason = "";
}

static void m_rdv_endpoint(sample_t *s)
{
    s->comm.rdv_endpoint = "coord-host:5555";
}
static void m_rdv_token(sample_t *s)
{
    s->comm.rdv_token = "0123456789ABCDEF0123456789abcdef";
}
static void m_rdv_token_short(sample_t *s)
{
    s->rset.token = "abc";
}
static void m_rdv_key_charset(sample_t *s)
{
    s->rset.key = "job/world 0";
}
static void m_rdv_key_empty(sample_t *s)
{
    s->rset.key = "";
}
static void m_rdv_key_long(sample_t *s)
{
    static char key[GPP_RDV_KEY_MAX + 2];
    memset(key, 'k', GPP_RDV_KEY_MAX + 1);
    s->rget_keys[1] = key;
}
static void m_rdv_value(sample_t *s)
{
    static uint8_t big[GPP_RDV_VALUE_MAX + 1];
    s->rset.value.data = big;
    s->rset.value.len = sizeof big;
}
static void m_rdv_no_keys(sample_t *s)
{
    s->rget.n_keys = 0;
}
static void m_rdv_timeout(sample_t *s)
{
    s->rget.timeout_ms = -1;
}
static void m_rdv_status(sample_t *s)
{
    s->rreply.status = 0;
}
static void m_rdv_error_entries(sample_t *s)
{
    s->rreply.status = GPP__RDV_STATUS__RDV_TIMEOUT;
}
static void m_rdv_entry_key(sample_t *s)
{
    s->rentry[1].key = "a\x01"
                       "b";
}
static void m_rdv_request_seq(sample_t *s)
{
    s->rreply.request_seq = 0;
}

static void m_mon_status(sample_t *s)
{
    s->mrep.status = 0;
}
static void m_mon_ticket(sample_t *s)
{
    s->mrep.ticket = 0;
}
static void m_mon_busy_body(sample_t *s)
{
    s->mrep.status = GPP__MONITOR_STATUS__MONITOR_BUSY;
    s->mrep.text = "rate limit";
}
static void m_mon_busy_text(sample_t *s)
{
    s->mrep.status = GPP__MONITOR_STATUS__MONITOR_BUSY;
    s->mrep.metrics.len = 0;
    s->mrep.schedule.len = 0;
}
static void m_mon_big(sample_t *s)
{
    static uint8_t big[GPP_MONITOR_TEXT_MAX + 1];
    s->mrep.metrics.data = big;
    s->mrep.metrics.len = sizeof big;
}

static const bad_case_t BAD[] = {
    {"monitor status", GPP__ENVELOPE__BODY_MONITOR_REPLY, m_mon_status,
     "monitor_reply.status: not set"},
    {"monitor ticket", GPP__ENVELOPE__BODY_MONITOR_REPLY, m_mon_ticket, "monitor_reply.ticket: 0"},
    {"monitor busy with a body", GPP__ENVELOPE__BODY_MONITOR_REPLY, m_mon_busy_body,
     "monitor_reply: 13 + 29 bytes of metrics and schedule with a status other than ok"},
    {"monitor busy without text", GPP__ENVELOPE__BODY_MONITOR_REPLY, m_mon_busy_text,
     "monitor_reply.text: empty"},
    {"monitor text size", GPP__ENVELOPE__BODY_MONITOR_REPLY, m_mon_big,
     "monitor_reply: 16777217 bytes of metrics"},
    {"rdv endpoint", GPP__ENVELOPE__BODY_ASSIGNMENT, m_rdv_endpoint,
     "assignment.comm.rdv_endpoint: \"coord-host:5555\" is not tcp://"},
    {"rdv token hex", GPP__ENVELOPE__BODY_ASSIGNMENT, m_rdv_token,
     "assignment.comm.rdv_token: character 10 is not a hex digit"},
    {"rdv token short", GPP__ENVELOPE__BODY_RDV_SET, m_rdv_token_short,
     "rdv_set.token: 3 characters, expected 32"},
    {"rdv key charset", GPP__ENVELOPE__BODY_RDV_SET, m_rdv_key_charset,
     "rdv_set.key: byte 9 (0x20) outside"},
    {"rdv key empty", GPP__ENVELOPE__BODY_RDV_SET, m_rdv_key_empty, "rdv_set.key: 0 bytes"},
    {"rdv key long", GPP__ENVELOPE__BODY_RDV_GET, m_rdv_key_long,
     "rdv_get.keys[1]: 257 bytes, expected 1..256"},
    {"rdv value", GPP__ENVELOPE__BODY_RDV_SET, m_rdv_value, "rdv_set.value: 1048577 bytes"},
    {"rdv no keys", GPP__ENVELOPE__BODY_RDV_GET, m_rdv_no_keys, "rdv_get.keys: 0 keys"},
    {"rdv timeout", GPP__ENVELOPE__BODY_RDV_GET, m_rdv_timeout, "rdv_get.timeout_ms: -1"},
    {"rdv status", GPP__ENVELOPE__BODY_RDV_REPLY, m_rdv_status, "rdv_reply.status: not set"},
    {"rdv error entries", GPP__ENVELOPE__BODY_RDV_REPLY, m_rdv_error_entries,
     "rdv_reply.entries: 2 entries with an error status"},
    {"rdv entry key", GPP__ENVELOPE__BODY_RDV_REPLY, m_rdv_entry_key,
     "rdv_reply.entries[1].key: byte 1 (0x01)"},
    {"rdv request seq", GPP__ENVELOPE__BODY_RDV_REPLY, m_rdv_request_seq,
     "rdv_reply.request_seq: 0"},
    {"magic", GPP__ENVELOPE__BODY_SHUTDOWN, m_magic, "magic"},
    {"version", GPP__ENVELOPE__BODY_HEARTBEAT, m_version, "protocol_version: peer speaks 6"},
    {"seq", GPP__ENVELOPE__BODY_HEARTBEAT, m_seq, "seq"},
    {"sender", GPP__ENVELOPE__BODY_HEARTBEAT, m_sender, "sender"},
    {"no body", GPP__ENVELOPE__BODY_HEARTBEAT, m_no_body, "body"},
    {"backend enum", GPP__ENVELOPE__BODY_REGISTER, m_backend,
     "register.backend: 9 is not a valid Backend"},
    {"backend unset", GPP__ENVELOPE__BODY_REGISTER, m_backend_unset, "register.backend"},
    {"host long", GPP__ENVELOPE__BODY_REGISTER, m_host_long, "register.host: string longer"},
    {"mem", GPP__ENVELOPE__BODY_REGISTER, m_mem, "register.mem_bytes"},
    {"device name", GPP__ENVELOPE__BODY_REGISTER, m_dev_name,
     "register.device_name: 0 bytes, expected 1..255"},
    {"device free", GPP__ENVELOPE__BODY_REGISTER, m_dev_free, "register.mem_free_bytes"},
    {"device total", GPP__ENVELOPE__BODY_REGISTER, m_dev_total, "register.mem_total_bytes"},
    {"device gpu", GPP__ENVELOPE__BODY_REGISTER, m_dev_gpu, "register.gpu: -1 outside [0, 1024)"},
    {"device sm", GPP__ENVELOPE__BODY_REGISTER, m_dev_sm, "register.sm_count: 0 outside"},
    {"cpu with gpu", GPP__ENVELOPE__BODY_REGISTER, m_dev_cpu_gpu,
     "register.gpu: 2 for a CPU agent"},
    {"device error", GPP__ENVELOPE__BODY_REGISTER, m_dev_error,
     "register.device_error: set for an agent with a GPU"},
    {"ack rank", GPP__ENVELOPE__BODY_REGISTER_ACK, m_ack_rank,
     "register_ack.rank: 4 outside [0, 4)"},
    {"profile mb", GPP__ENVELOPE__BODY_PROFILE_REQUEST, m_prof_mb,
     "profile_request.micro_batches[1]"},
    {"profile backend", GPP__ENVELOPE__BODY_PROFILE_REQUEST, m_prof_backend,
     "profile_request.backend: not set"},
    {"profile figures", GPP__ENVELOPE__BODY_PROFILE_REQUEST, m_prof_figures,
     "profile_request.micro_batches: figures_only takes [1], got 3 sizes from 1"},
    {"profile precision", GPP__ENVELOPE__BODY_PROFILE_REQUEST, m_prof_precision,
     "profile_request.precision: not set"},
    {"profile cpu bf16", GPP__ENVELOPE__BODY_PROFILE_REQUEST, m_prof_cpu_bf16,
     "profile_request.precision: bf16 needs backend cuda"},
    {"profile device name", GPP__ENVELOPE__BODY_PROFILE_RESULT, m_prof_devname,
     "profile_result.device_name: 299 bytes, at most 255"},
    {"profile nan", GPP__ENVELOPE__BODY_PROFILE_RESULT, m_prof_nan,
     "profile_result.ops[1].fwd_ms: not a finite"},
    {"profile op", GPP__ENVELOPE__BODY_PROFILE_RESULT, m_prof_neg, "profile_result.ops[0].op"},
    {"profile stash", GPP__ENVELOPE__BODY_PROFILE_RESULT, m_prof_stash,
     "profile_result.ops[1].kernel_stash: -8 is negative"},
    {"profile out_bytes", GPP__ENVELOPE__BODY_PROFILE_RESULT, m_prof_out,
     "profile_result.ops[1].out_bytes: 0 is not positive"},
    {"profile workspace", GPP__ENVELOPE__BODY_PROFILE_RESULT, m_prof_work,
     "profile_result.ops[1].workspace: fixed 0, per sample -16: negative"},
    {"comm rank", GPP__ENVELOPE__BODY_ASSIGNMENT, m_comm_rank,
     "assignment.comm.rank: 5 outside [0, 5)"},
    {"peer rank", GPP__ENVELOPE__BODY_ASSIGNMENT, m_peer_rank,
     "assignment.edges[0].replicas[1].rank"},
    {"dp rank", GPP__ENVELOPE__BODY_ASSIGNMENT, m_dp_rank, "assignment.dp_ranks[0]"},
    {"dp count", GPP__ENVELOPE__BODY_ASSIGNMENT, m_dp_count, "assignment.dp_ranks: 1 ranks for 2"},
    {"comm backend", GPP__ENVELOPE__BODY_ASSIGNMENT, m_comm_backend,
     "assignment.comm.backend: \"mpi\" is not gloo or nccl"},
    {"comm nccl cpu", GPP__ENVELOPE__BODY_ASSIGNMENT, m_comm_nccl_cpu,
     "assignment.comm.backend: nccl needs backend cuda"},
    {"comm nccl order", GPP__ENVELOPE__BODY_ASSIGNMENT, m_comm_nccl_no_order,
     "assignment.comm_order: empty, but comm.backend nccl"},
    {"comm order count", GPP__ENVELOPE__BODY_ASSIGNMENT, m_order_count,
     "assignment.comm_order: 1 entries for 2 SEND, RECV and ALLREDUCE actions"},
    {"comm order pass", GPP__ENVELOPE__BODY_ASSIGNMENT, m_order_pass,
     "assignment.comm_order[1]: 1 is not the index of a SEND, RECV or ALLREDUCE"},
    {"comm order repeat", GPP__ENVELOPE__BODY_ASSIGNMENT, m_order_repeat,
     "assignment.comm_order[1]: 2 is not the index"},
    {"comm order range", GPP__ENVELOPE__BODY_ASSIGNMENT, m_order_range,
     "assignment.comm_order[1]: 4 is not the index"},
    {"lo >= hi", GPP__ENVELOPE__BODY_ASSIGNMENT, m_lo_hi, "assignment.actions[2]: samples [4, 4)"},
    {"hi > batch", GPP__ENVELOPE__BODY_ASSIGNMENT, m_hi_batch, "assignment.actions[0]: samples"},
    {"action enum", GPP__ENVELOPE__BODY_ASSIGNMENT, m_act_type, "assignment.actions[1].type: 42"},
    {"action mb", GPP__ENVELOPE__BODY_ASSIGNMENT, m_act_mb, "assignment.actions[1].mb"},
    {"action self peer", GPP__ENVELOPE__BODY_ASSIGNMENT, m_act_peer,
     "assignment.actions[0].peer_stage"},
    {"op negative", GPP__ENVELOPE__BODY_ASSIGNMENT, m_op_neg, "assignment.ops[0]"},
    {"op order", GPP__ENVELOPE__BODY_ASSIGNMENT, m_op_order, "assignment.ops[2]"},
    {"stage", GPP__ENVELOPE__BODY_ASSIGNMENT, m_stage, "assignment.stage"},
    {"batch", GPP__ENVELOPE__BODY_ASSIGNMENT, m_batch, "assignment.batch"},
    {"lr inf", GPP__ENVELOPE__BODY_ASSIGNMENT, m_lr, "assignment.hyper.lr: not a finite"},
    {"momentum", GPP__ENVELOPE__BODY_ASSIGNMENT, m_momentum, "assignment.hyper.momentum"},
    {"optimizer enum", GPP__ENVELOPE__BODY_ASSIGNMENT, m_optimizer, "assignment.hyper.optimizer"},
    {"no comm", GPP__ENVELOPE__BODY_ASSIGNMENT, m_no_comm, "assignment.comm: missing"},
    {"asg backend", GPP__ENVELOPE__BODY_ASSIGNMENT, m_asg_backend, "assignment.backend: not set"},
    {"asg precision", GPP__ENVELOPE__BODY_ASSIGNMENT, m_asg_precision,
     "assignment.precision: 7 is not a valid Precision"},
    {"asg precision cpu", GPP__ENVELOPE__BODY_ASSIGNMENT, m_asg_precision_cpu,
     "assignment.precision: bf16 needs backend cuda"},
    {"asg graphs cpu", GPP__ENVELOPE__BODY_ASSIGNMENT, m_asg_graphs_cpu,
     "assignment.cuda_graphs: set with backend cpu"},
    {"asg bf16 tensors fp32", GPP__ENVELOPE__BODY_ASSIGNMENT, m_asg_bf16_tensors_fp32,
     "assignment.bf16_tensors: set without backend cuda at precision bf16"},
    {"checkpoint", GPP__ENVELOPE__BODY_ASSIGNMENT, m_ckpt, "assignment.checkpoint_dir"},
    {"start", GPP__ENVELOPE__BODY_ASSIGNMENT, m_start, "assignment.start_iteration"},
    {"loss nan", GPP__ENVELOPE__BODY_METRICS, m_loss, "metrics.loss: not a finite"},
    {"bubble", GPP__ENVELOPE__BODY_METRICS, m_bubble, "metrics.bubble_ms"},
    {"device mem", GPP__ENVELOPE__BODY_METRICS, m_devmem, "metrics.device_mem_peak_bytes"},
    {"times count", GPP__ENVELOPE__BODY_METRICS, m_times_count,
     "metrics: 3 action_start_us and 4 action_end_us for 4 actions"},
    {"times vs actions", GPP__ENVELOPE__BODY_METRICS, m_times_other_count,
     "metrics: 3 action_start_us and 3 action_end_us for 4 actions"},
    {"times end < start", GPP__ENVELOPE__BODY_METRICS, m_times_end,
     "metrics.action_*_us[2]: [1000200, 1000199] not 0 <= start <= end"},
    {"times negative", GPP__ENVELOPE__BODY_METRICS, m_times_negative, "metrics.action_*_us[0]"},
    {"times overlap", GPP__ENVELOPE__BODY_METRICS, m_times_overlap,
     "metrics.action_start_us[3]: 1000299 before the previous action's end 1000300"},
    {"trace iteration", GPP__ENVELOPE__BODY_ASSIGNMENT, m_trace_iteration,
     "assignment.trace_iteration: 10 outside [0, 10)"},
    {"trace off", GPP__ENVELOPE__BODY_ASSIGNMENT, m_trace_off,
     "assignment.trace_iteration: 9 without trace"},
    {"heartbeat echo", GPP__ENVELOPE__BODY_HEARTBEAT, m_hb_echo_half,
     "heartbeat: echo_mono_us 4000000 and echo_recv_us 0"},
    {"heartbeat echo late", GPP__ENVELOPE__BODY_HEARTBEAT, m_hb_echo_late,
     "heartbeat.echo_recv_us: 5000301 after the send time"},
    {"heartbeat negative", GPP__ENVELOPE__BODY_HEARTBEAT, m_hb_negative, "heartbeat: negative"},
    {"barrier", GPP__ENVELOPE__BODY_BARRIER_ENTER, m_barrier, "barrier_enter.barrier_id"},
    {"error code", GPP__ENVELOPE__BODY_ERROR, m_err_code, "error.code: 1000"},
    {"error failed_peer < 0", GPP__ENVELOPE__BODY_ERROR, m_err_peer_negative,
     "error.failed_peer: -3, expected 0 or 1 + a rank"},
    {"error failed_peer not comm", GPP__ENVELOPE__BODY_ERROR, m_err_peer_not_comm,
     "error.failed_peer: 2 on an error of code 5 (only ERROR_COMM names a peer)"},
    {"abort reason", GPP__ENVELOPE__BODY_ABORT, m_abort, "abort.reason"},
};

static void t_bad_fields(void)
{
    memset(s_long, 'x', sizeof s_long - 1);
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        const bad_case_t *c = &BAD[i];
        sample_t s;
        s_sample(&s, c->type);
        c->mutate(&s);
        /* Our encoder refuses it ... */
        gpp_err_t err = {{0}};
        uint8_t *buf = NULL;
        size_t len = 0;
        GPP_EXPECT_MSG(gpp_msg_encode(&s.env, &buf, &len, &err) < 0 && !buf, "%s encoded", c->name);
        GPP_EXPECT_MSG(strstr(err.msg, c->expect), "%s: '%s' lacks '%s'", c->name, err.msg,
                       c->expect);
        /* ... and our decoder rejects it from a peer that skips validation. */
        buf = s_pack_raw(&s.env, &len);
        memset(&err, 0, sizeof err);
        gpp_msg_t *m = gpp_msg_decode(buf, len, &err);
        GPP_EXPECT_MSG(!m, "%s decoded", c->name);
        GPP_EXPECT_MSG(strstr(err.msg, c->expect), "%s: '%s' lacks '%s'", c->name, err.msg,
                       c->expect);
        gpp_msg_destroy(&m);
        free(buf);
    }
}

static void t_embedded_nul_and_oversize(void)
{
    sample_t s;
    s_sample(&s, GPP__ENVELOPE__BODY_REGISTER);
    s.reg.host = "nodeXhost";
    size_t len;
    uint8_t *buf = s_pack_raw(&s.env, &len);
    uint8_t *x = memchr(buf, 'X', len);
    GPP_EXPECT(x);
    if (x)
        *x = 0;
    gpp_err_t err = {{0}};
    gpp_msg_t *m = gpp_msg_decode(buf, len, &err);
    GPP_EXPECT_MSG(!m, "embedded NUL accepted: host '%s'", m ? m->register_->host : "");
    GPP_EXPECT(strstr(err.msg, "embedded NUL"));
    gpp_msg_destroy(&m);
    free(buf);

    memset(&err, 0, sizeof err);
    GPP_EXPECT(!gpp_msg_decode((const uint8_t *)"", (size_t)GPP_MSG_MAX_BYTES + 1, &err));
    GPP_EXPECT(strstr(err.msg, "exceeds"));
    memset(&err, 0, sizeof err);
    GPP_EXPECT(!gpp_msg_decode(NULL, 0, &err));
    GPP_EXPECT(strstr(err.msg, "magic"));
}

/* The one precision, device-kind and optimizer conversions: every C value crosses the
 * wire and back unchanged, and every proto value but "not set" names one. */
static void t_precision(void)
{
    for (int p = 0; p < GPP_PRECISION__COUNT; p++) {
        Gpp__Precision w = gpp_msg_precision((gpp_precision_t)p);
        GPP_EXPECT(w != GPP__PRECISION__PRECISION_UNSPECIFIED);
        GPP_EXPECT(gpp_msg_precision_of(w) == (gpp_precision_t)p);
    }
    const ProtobufCEnumDescriptor *d = &gpp__precision__descriptor;
    GPP_EXPECT_MSG(d->n_values == GPP_PRECISION__COUNT + 1, "proto Precision has %u values",
                   d->n_values);
    GPP_EXPECT(gpp_msg_precision(GPP_PRECISION_BF16) == GPP__PRECISION__PRECISION_BF16);
    /* the device kind likewise */
    for (int k = 0; k < GPP_DEVICE__COUNT; k++) {
        Gpp__Backend w = gpp_msg_backend((gpp_device_kind_t)k);
        GPP_EXPECT(w != GPP__BACKEND__BACKEND_UNSPECIFIED);
        GPP_EXPECT(gpp_msg_backend_of(w) == (gpp_device_kind_t)k);
    }
    GPP_EXPECT(gpp__backend__descriptor.n_values == GPP_DEVICE__COUNT + 1);
    GPP_EXPECT(gpp_msg_backend(GPP_DEVICE_CUDA) == GPP__BACKEND__BACKEND_CUDA);
    /* and the optimizer */
    for (int k = 0; k < GPP_OPTIM__COUNT; k++)
        GPP_EXPECT(gpp_msg_optimizer_of(gpp_msg_optimizer((gpp_optim_kind_t)k)) ==
                   (gpp_optim_kind_t)k);
    GPP_EXPECT(gpp__optimizer__descriptor.n_values == GPP_OPTIM__COUNT + 1);
    GPP_EXPECT(gpp_msg_optimizer(GPP_OPTIM_SGD) == GPP__OPTIMIZER__OPTIMIZER_SGD);
}

static const gpp_test_case_t cases[] = {
    {"round_trip_every_type", t_round_trip_every_type},
    {"round_trip_fields", t_round_trip_fields},
    {"wrap", t_wrap},
    {"truncated", t_truncated},
    {"random_garbage_10k", t_random_garbage},
    {"mutations", t_mutations},
    {"bad_fields", t_bad_fields},
    {"embedded_nul_and_oversize", t_embedded_nul_and_oversize},
    {"precision", t_precision},
    {NULL, NULL},
};

/* GPP_TEST_WRITE_SEEDS=DIR: writes every type's valid sample as DIR/<type>.bin
 * (the fuzz_msg seeds, tests/fuzz/corpus/msg; regenerate them when the
 * protocol version changes) and exits. */
static int s_write_seeds(const char *dir)
{
    for (size_t i = 0; i < N_TYPES; i++) {
        sample_t s;
        s_sample(&s, ALL_TYPES[i]);
        gpp_err_t err = {{0}};
        uint8_t *buf = NULL;
        size_t len = 0;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", dir, gpp_msg_type_name(ALL_TYPES[i]));
        FILE *f = NULL;
        if (gpp_msg_encode(&s.env, &buf, &len, &err) < 0 || !(f = fopen(path, "wb")) ||
            fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
            fprintf(stderr, "%s: %s\n", path, err.msg[0] ? err.msg : strerror(errno));
            free(buf);
            return 1;
        }
        free(buf);
    }
    return 0;
}

int main(void)
{
    const char *seeds = getenv("GPP_TEST_WRITE_SEEDS");
    if (seeds)
        return s_write_seeds(seeds);
    return gpp_test_run(cases);
}
