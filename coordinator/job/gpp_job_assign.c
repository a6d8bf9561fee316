/* gpp_job_assign: one Assignment per rank the plan uses, made once the
 * agents are known to fit it, and validated as the agents will
 * (gpp_job_impl.h). */
#include <stdlib.h>
#include <string.h>

#include "coordinator/job/gpp_job_impl.h"
#include "planner/gpp_sched.h"

/* The plan's action types cross the wire by a cast (here into the assignment,
 * the agent's runner back): the planner and protobuf enums must stay equal. */
_Static_assert(GPP_ACT_FWD == (int)GPP__ACTION_TYPE__ACT_FWD, "action enum: FWD");
_Static_assert(GPP_ACT_BWD == (int)GPP__ACTION_TYPE__ACT_BWD, "action enum: BWD");
_Static_assert(GPP_ACT_SEND_ACT == (int)GPP__ACTION_TYPE__ACT_SEND_ACT, "action enum: SEND_ACT");
_Static_assert(GPP_ACT_RECV_ACT == (int)GPP__ACTION_TYPE__ACT_RECV_ACT, "action enum: RECV_ACT");
_Static_assert(GPP_ACT_SEND_GRAD == (int)GPP__ACTION_TYPE__ACT_SEND_GRAD, "action enum: SEND_GRAD");
_Static_assert(GPP_ACT_RECV_GRAD == (int)GPP__ACTION_TYPE__ACT_RECV_GRAD, "action enum: RECV_GRAD");
_Static_assert(GPP_ACT_ALLREDUCE == (int)GPP__ACTION_TYPE__ACT_ALLREDUCE, "action enum: ALLREDUCE");
_Static_assert(GPP_ACT_STEP == (int)GPP__ACTION_TYPE__ACT_STEP, "action enum: STEP");
_Static_assert(GPP_ACT_BWD_IN == (int)GPP__ACTION_TYPE__ACT_BWD_INPUT, "action enum: BWD_IN");
_Static_assert(GPP_ACT_BWD_W == (int)GPP__ACTION_TYPE__ACT_BWD_WEIGHT, "action enum: BWD_W");
_Static_assert(GPP_ACT__COUNT == GPP_ACT_BWD_W + 1, "action enum: a new type needs a proto value");

void gpp_job_assign_free(Gpp__Assignment *a)
{
    if (!a)
        return;
    free(a->ops);
    for (size_t i = 0; i < a->n_actions; i++)
        free(a->actions[i]);
    free(a->actions);
    for (size_t i = 0; i < a->n_edges; i++) {
        Gpp__Edge *e = a->edges[i];
        free(e->tensors);
        for (size_t j = 0; j < e->n_replicas; j++)
            free(e->replicas[j]);
        free(e->replicas);
        free(e);
    }
    free(a->edges);
    free(a->dp_ranks);
    free(a->comm_order);
    free(a->comm);
    free(a->hyper);
    free(a);
}

/* Producer op ids of the tensors on edge from -> to (ascending, unique). */
static int s_edge_tensors(const gpp_job_t *self, int from, int to, int32_t **out)
{
    const gpp_plan_t *p = self->plan;
    const gpp_stage_t *src = &p->stages[from];
    int n = 0;
    int32_t *t = gpp_xcalloc((size_t)src->n_ops, sizeof *t);
    for (int i = 0; i < src->n_ops; i++) {
        const gpp_op_t *op = &self->g->ops[src->ops[i]];
        for (int j = 0; j < op->n_outputs; j++)
            if (p->stage_of_op[op->outputs[j]] == to) {
                t[n++] = op->id;
                break;
            }
    }
    if (n == 0 && p->chain) /* a chain edge no tensor flows on: the dependency */
        t[n++] = GPP_DEP_TENSOR;
    *out = t;
    return n;
}

static Gpp__Edge *s_edge(const gpp_job_t *self, int s, int peer, int downstream)
{
    Gpp__Edge *e = gpp_xcalloc(1, sizeof *e);
    gpp__edge__init(e);
    e->peer_stage = peer;
    e->downstream = downstream;
    int32_t *t;
    e->n_tensors = (size_t)s_edge_tensors(self, downstream ? s : peer, downstream ? peer : s, &t);
    e->tensors = t;
    const gpp_stage_t *ps = &self->plan->stages[peer];
    e->n_replicas = (size_t)ps->devices;
    e->replicas = gpp_xcalloc(e->n_replicas, sizeof *e->replicas);
    for (int r = 0; r < ps->devices; r++) {
        Gpp__PeerReplica *pr = gpp_xcalloc(1, sizeof *pr);
        gpp__peer_replica__init(pr);
        pr->replica = r;
        pr->rank = ps->first_device + r;
        pr->address = (char *)"";
        e->replicas[r] = pr;
    }
    return e;
}

static Gpp__Assignment *s_assignment(gpp_job_t *self, int s, int r)
{
    const gpp_plan_t *p = self->plan;
    const gpp_stage_t *st = &p->stages[s];
    const gpp_config_t *c = &self->cfg;
    Gpp__Assignment *a = gpp_xcalloc(1, sizeof *a);
    gpp__assignment__init(a);
    a->model = self->cfg.job.model;
    a->stage = s;
    a->n_stages = p->n_stages;
    a->replica = r;
    a->replicas = st->devices;
    a->n_ops = (size_t)st->n_ops;
    a->ops = gpp_xcalloc(a->n_ops, sizeof *a->ops);
    for (int i = 0; i < st->n_ops; i++)
        a->ops[i] = st->ops[i];
    a->micro_batch = st->micro_batch;
    a->k = st->k;
    a->batch = p->batch;
    const gpp_actions_t *acts = &st->replica[r];
    a->n_actions = (size_t)acts->n;
    a->actions = gpp_xcalloc(a->n_actions ? a->n_actions : 1, sizeof *a->actions);
    for (int i = 0; i < acts->n; i++) {
        const gpp_action_t *x = &acts->a[i];
        Gpp__Action *y = gpp_xcalloc(1, sizeof *y);
        gpp__action__init(y);
        y->type = (Gpp__ActionType)x->type;
        y->mb = x->mb;
        y->peer_stage = x->peer_stage;
        y->peer_replica = x->peer_replica;
        y->tensor = x->tensor;
        y->lo = x->lo;
        y->hi = x->hi;
        a->actions[i] = y;
    }
    a->n_edges = (size_t)(st->n_succ + st->n_pred);
    a->edges = gpp_xcalloc(a->n_edges ? a->n_edges : 1, sizeof *a->edges);
    size_t e = 0;
    for (int i = 0; i < st->n_pred; i++)
        a->edges[e++] = s_edge(self, s, st->pred[i], 0);
    for (int i = 0; i < st->n_succ; i++)
        a->edges[e++] = s_edge(self, s, st->succ[i], 1);
    a->n_dp_ranks = (size_t)st->devices;
    a->dp_ranks = gpp_xcalloc(a->n_dp_ranks, sizeof *a->dp_ranks);
    for (int i = 0; i < st->devices; i++)
        a->dp_ranks[i] = st->first_device + i;
    a->comm = gpp_xcalloc(1, sizeof *a->comm);
    gpp__comm_bootstrap__init(a->comm);
    a->comm->rdv_endpoint = self->rdv_endpoint;
    a->comm->rdv_token = self->rdv_token;
    a->comm->prefix = self->prefix;
    a->comm->world_size = self->used;
    a->comm->backend = (char *)gpp_config_comm_name(self->cfg.job.comm);
    a->comm->rank = st->first_device + r;
    a->hyper = gpp_xcalloc(1, sizeof *a->hyper);
    gpp__hyper_params__init(a->hyper);
    a->hyper->optimizer = gpp_msg_optimizer(c->job.optimizer);
    a->hyper->lr = c->job.lr;
    a->hyper->momentum = c->job.momentum;
    a->hyper->weight_decay = c->job.weight_decay;
    a->hyper->beta1 = c->job.beta1;
    a->hyper->beta2 = c->job.beta2;
    a->hyper->eps = c->job.eps;
    a->iterations = c->job.iterations;
    a->seed = c->job.seed;
    a->checkpoint_dir = self->cfg.job.checkpoint_dir;
    a->data = self->cfg.job.data;
    a->checkpoint_interval = c->job.checkpoint_interval;
    a->start_iteration = self->start;
    a->backend = gpp_msg_backend(c->job.backend);
    a->precision = gpp_msg_precision(c->job.precision);
    a->cuda_graphs = c->job.backend == GPP_DEVICE_CUDA && c->job.cuda_graphs;
    a->bf16_tensors = gpp_config_bf16_tensors(c);
    a->trace = self->trace_iteration >= 0;
    a->trace_iteration = a->trace ? self->trace_iteration - self->start : 0;
    return a;
}

int gpp_job_assign_make(gpp_job_t *self, gpp_registry_t *reg, gpp_err_t *err)
{
    const int n = gpp_registry_size(reg);
    const gpp_plan_t *p = self->plan;
    /* NCCL refuses two ranks on one GPU: with comm = nccl, one GPU each */
    for (int i = 0; self->cfg.job.comm == GPP_CONFIG_COMM_NCCL && i < n; i++)
        for (int j = i + 1; j < n; j++) {
            gpp_agent_t *a = gpp_registry_agent(reg, i), *b = gpp_registry_agent(reg, j);
            if (a->gpu >= 0 && a->gpu == b->gpu && strcmp(a->host, b->host) == 0) {
                char na[GPP_REG_HOST_MAX + 64], nb[GPP_REG_HOST_MAX + 64];
                return gpp_err_set(err,
                                   "agents %s and %s share GPU %d on host %s, but job.comm = "
                                   "\"nccl\" (NCCL refuses two ranks on one GPU); give every "
                                   "agent a GPU of its own, or set comm = \"gloo\"",
                                   gpp_agent_name(a, na, sizeof na),
                                   gpp_agent_name(b, nb, sizeof nb), a->gpu, a->host);
            }
        }
    /* every agent that gets a stage must have the memory the plan counts
       on: what it offers, and on a GPU its share of the GPU's memory */
    for (int s = 0; s < p->n_stages; s++) {
        const gpp_stage_t *st = &p->stages[s];
        for (int r = 0; r < st->devices; r++) {
            gpp_agent_t *a = gpp_registry_agent(reg, st->first_device + r);
            char who[GPP_REG_HOST_MAX + 64], need[32], has[32], tot[32], ctx[32];
            gpp_agent_name(a, who, sizeof who);
            gpp_job_size(need, sizeof need, st->mem_bytes);
            if (a->mem_bytes < st->mem_bytes)
                return gpp_err_set(err, "agent %s offers %s, but stage %d needs %s", who,
                                   gpp_job_size(has, sizeof has, a->mem_bytes), s, need);
            if (a->gpu < 0)
                continue;
            int share = gpp_job_gpu_sharers(reg, a);
            int64_t avail = a->mem_total_bytes / share;
            gpp_job_size(has, sizeof has, avail);
            gpp_job_size(tot, sizeof tot, a->mem_total_bytes);
            if (avail < st->mem_bytes)
                return gpp_err_set(err,
                                   "stage %d needs %s of device memory, but agent %s has %s: "
                                   "GPU %d (%s, %s) on host %s is shared by %d agents; give "
                                   "each agent more GPU memory (fewer agents per GPU: "
                                   "nodes.gpus), or plan for it (--plan gpp)",
                                   s, need, who, has, a->gpu, a->device_name, tot, a->host, share);
            if (avail - st->mem_bytes < GPP_CONTEXT_BYTES)
                gpp_warn("coordinator: stage %d needs %s of device memory and agent %s has %s "
                         "(GPU %d, %s, shared by %d): less than the %s the planner keeps for "
                         "the CUDA context and library workspaces is left; it may run out",
                         s, need, who, has, a->gpu, tot, share,
                         gpp_job_size(ctx, sizeof ctx, GPP_CONTEXT_BYTES));
        }
    }
    if (self->state < GPP_JOB_ASSIGNED && gpp_job_recover_keep(self, err) < 0)
        return -1;
    if (self->trace_iteration >= 0 && !self->timeline)
        self->timeline = gpp_timeline_new(p, self->trace_iteration - self->start);
    if (self->state < GPP_JOB_ASSIGNED) {
        /* the order blocking communication streams run the transfers in
           (Assignment.comm_order) */
        gpp_sched_links_t *k = gpp_sched_links_new(p, err);
        gpp_sched_order_t *o = k ? gpp_sched_order_new(p, k, err) : NULL;
        if (!o) {
            gpp_sched_links_destroy(&k);
            return gpp_err_prefix(err, "plan's communication order");
        }
        self->assign = gpp_xcalloc((size_t)n, sizeof *self->assign);
        for (int s = 0; s < p->n_stages; s++)
            for (int r = 0; r < p->stages[s].devices; r++) {
                Gpp__Assignment *a = s_assignment(self, s, r);
                int li = k->list_base[s] + r;
                a->n_comm_order = (size_t)(o->seq_base[li + 1] - o->seq_base[li]);
                a->comm_order = gpp_xcalloc(a->n_comm_order + 1, sizeof *a->comm_order);
                for (size_t j = 0; j < a->n_comm_order; j++)
                    a->comm_order[j] = o->seq[o->seq_base[li] + (int)j] - k->act_base[li];
                self->assign[p->stages[s].first_device + r] = a;
            }
        gpp_sched_order_destroy(&o);
        gpp_sched_links_destroy(&k);
        self->state = GPP_JOB_ASSIGNED;
    }
    /* validate what we are about to send, as the agents will */
    for (int r = 0; r < n; r++) {
        if (!self->assign[r])
            continue;
        gpp_msg_t m;
        gpp_msg_wrap(&m, 1, GPP_MSG_SENDER_COORD, GPP__ENVELOPE__BODY_ASSIGNMENT, self->assign[r]);
        if (gpp_msg_validate(&m, err) < 0)
            return gpp_err_prefix(err, "assignment of rank %d", r);
    }
    return 0;
}
