/* gpp_onnx_attn: the ONNX importer's self-attention patterns (see
 * gpp_onnx_imp.h): a hand-written attention's MatMul/Softmax/MatMul with the
 * heads' Reshape/Transpose, and nn.MultiheadAttention's packed export, each
 * matched around its Softmax before the walk and emitted as one gpp
 * attention op; and why a Softmax in no pattern is refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gpp_onnx_imp.h"

/* The first node that outputs `name`, or -1 (the patterns walk back
 * through producers many times: indexed by s_import). */
int gpp_onnx_producer(const imp_t *im, const char *name)
{
    if (!im->phash) /* before s_import indexed the nodes */
        return -1;
    for (size_t h = gpp_onnx_fnv(name) & im->pmask;; h = (h + 1) & im->pmask) {
        int i = im->phash[h] - 1;
        if (i < 0)
            return -1;
        for (size_t k = 0; k < im->gr->node[i]->n_output; k++)
            if (!strcmp(im->gr->node[i]->output[k], name))
                return i;
    }
}

int gpp_onnx_is(const imp_t *im, int node, const char *op)
{
    return node >= 0 && im->gr->node[node]->op_type && !strcmp(im->gr->node[node]->op_type, op);
}

/* An initializer's or a Constant node's tensor, or NULL. */
static const tensor_t *s_const_t(imp_t *im, const char *name)
{
    const val_t *v = gpp_onnx_find(im, name);
    if (v)
        return v->kind == V_CONST ? v->t : NULL;
    int p = gpp_onnx_producer(im, name);
    const attr_t *a =
        gpp_onnx_is(im, p, "Constant") ? gpp_onnx_attr(im->gr->node[p], "value") : NULL;
    return a ? a->t : NULL;
}

static int s_single(const imp_t *im, const char *name)
{
    int c;
    return gpp_onnx_uses(im, name, &c) == 1;
}

/* Value `name` as x W (+ b), W a 2-d constant: 0 and the nodes, or -1. */
static int s_att_proj(imp_t *im, const char *name, const char **x, const tensor_t **w,
                      const tensor_t **b, int *nodes, int *nn)
{
    int p = gpp_onnx_producer(im, name);
    *b = NULL;
    if (gpp_onnx_is(im, p, "Add") && im->gr->node[p]->n_input == 2) {
        const node_t *a = im->gr->node[p];
        int k = s_const_t(im, a->input[0]) ? 0 : 1;
        *b = s_const_t(im, a->input[k]);
        nodes[(*nn)++] = p;
        if (!*b || !s_single(im, a->input[!k]))
            return -1;
        p = gpp_onnx_producer(im, a->input[!k]);
    }
    if (!gpp_onnx_is(im, p, "MatMul") || im->gr->node[p]->n_input != 2)
        return -1;
    *w = s_const_t(im, im->gr->node[p]->input[1]);
    *x = im->gr->node[p]->input[0];
    nodes[(*nn)++] = p;
    return *w && (*w)->n_dims == 2 ? 0 : -1;
}

/* Back from `name` through Transposes (composed) to a Reshape of a
 * projection: 0 when the composite permutation is `perm`. */
static int s_att_heads(imp_t *im, const char *name, const int64_t perm[4], struct att *a, int k,
                       int *nodes, int *nn)
{
    int64_t c[4] = {0, 1, 2, 3};
    int p;
    while (*nn < 56 && s_single(im, name) &&
           gpp_onnx_is(im, p = gpp_onnx_producer(im, name), "Transpose")) {
        const attr_t *pa = gpp_onnx_attr(im->gr->node[p], "perm");
        if (!pa || pa->n_ints != 4 || im->gr->node[p]->n_input < 1)
            return -1;
        for (int j = 0; j < 4; j++) {
            if (c[j] < 0 || c[j] > 3 || pa->ints[c[j]] < 0 || pa->ints[c[j]] > 3)
                return -1;
            c[j] = pa->ints[c[j]];
        }
        nodes[(*nn)++] = p;
        name = im->gr->node[p]->input[0];
    }
    p = gpp_onnx_producer(im, name);
    if (memcmp(c, perm, sizeof c) || !s_single(im, name) || !gpp_onnx_is(im, p, "Reshape") ||
        im->gr->node[p]->n_input != 2 || !s_single(im, im->gr->node[p]->input[0]))
        return -1;
    a->reshape[k] = p;
    nodes[(*nn)++] = p;
    const char *x;
    if (s_att_proj(im, im->gr->node[p]->input[0], &x, &a->w[k], &a->b[k], nodes, nn) < 0 ||
        (a->x && strcmp(a->x, x)))
        return -1;
    a->x = x;
    return 0;
}

/* The single consumer of `name` with op type `op` reading it as input k. */
static int s_att_next(imp_t *im, const char *name, const char *op, int k)
{
    int c = gpp_onnx_next(im, name, op);
    return c >= 0 && (int)im->gr->node[c]->n_input > k && !strcmp(im->gr->node[c]->input[k], name)
               ? c
               : -1;
}

/* Below this an additive mask entry drops its score as -inf does: exp()
 * of a score 1e4 under the row's largest is 0 in fp32 (its smallest
 * subnormal is e^-103.3), and 1e4 is the "large negative" of BERT-era code
 * ((1 - mask) * -10000.0, Hugging Face's get_extended_attention_mask). */
#define MASK_NEG (-1e4)

/* t as a causal mask: fp32 [.., S, S], leading dims 1, 0 on and below the
 * diagonal and -inf (or at most MASK_NEG) above. S, or 0 when it is not
 * one (the caller then leaves the Softmax to s_softmax's refusal). */
static int64_t s_causal_mask(imp_t *im, const tensor_t *t)
{
    int64_t n, S = t->n_dims >= 2 ? t->dims[t->n_dims - 1] : 0, bad = 0;
    for (size_t k = 0; k + 2 < t->n_dims; k++)
        bad |= t->dims[k] != 1;
    if (bad || S < 1 || S > 65536 || t->dims[t->n_dims - 2] != S)
        return 0;
    gpp_err_t e = {{0}}, *keep = im->err;
    im->err = &e; /* not a float tensor of S x S: not a mask gpp maps */
    bad = gpp_onnx_tensor_check(im, -1, t, 1, &n) < 0 || n != S * S;
    im->err = keep;
    for (int64_t i = 0; i < S && !bad; i++)
        for (int64_t j = 0; j < S && !bad; j++) {
            float v; /* gpp_onnx_floats refuses -inf: read it here */
            if (t->has_raw_data) {
                const uint8_t *p = t->raw_data.data + 4 * (i * S + j);
                uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24;
                memcpy(&v, &u, sizeof v);
            } else
                v = t->float_data[i * S + j];
            bad = j <= i ? v != 0.0f : !(v <= MASK_NEG);
        }
    return bad ? 0 : S;
}

/* The scores a Softmax reads, `name`, as Add(scores, causal mask): the
 * scores' name, a->mask and *node (the Add) set; else `name`, *node -1. */
static const char *s_att_mask(imp_t *im, const char *name, struct att *a, int *node)
{
    int p = gpp_onnx_producer(im, name);
    *node = -1;
    if (!gpp_onnx_is(im, p, "Add") || im->gr->node[p]->n_input != 2)
        return name;
    const node_t *ad = im->gr->node[p];
    for (int k = 0; k < 2; k++) {
        const tensor_t *t = s_const_t(im, ad->input[k]);
        if (t && !s_const_t(im, ad->input[!k]) && (a->mask_s = s_causal_mask(im, t)) > 0) {
            a->mask = t, *node = p;
            return ad->input[!k];
        }
    }
    return name;
}

/* Matches the pattern ending in Softmax node sm: 1 (recorded), 0 (not it). */
int gpp_onnx_att_match(imp_t *im, int sm, struct att *a)
{
    static const int64_t pq[4] = {0, 2, 1, 3}, pk[4] = {0, 2, 3, 1};
    const node_t *n = im->gr->node[sm];
    int nodes[64], nn = 0, p, cm, r, om, emit;
    int64_t axis = -1, c[4] = {0, 1, 2, 3};
    const attr_t *ax = gpp_onnx_attr(n, "axis");
    memset(a, 0, sizeof *a);
    if (ax)
        axis = ax->i;
    if ((axis != -1 && axis != 3) || n->n_input != 1 || n->n_output != 1 ||
        !s_single(im, n->input[0]))
        return 0;
    nodes[nn++] = sm;
    const char *scores = s_att_mask(im, n->input[0], a, &p); /* + a causal mask */
    if (p >= 0 && !s_single(im, scores))
        return 0;
    if (p >= 0)
        nodes[nn++] = p;
    p = gpp_onnx_producer(im, scores); /* Div or Mul by the scale */
    if (!(gpp_onnx_is(im, p, "Div") || gpp_onnx_is(im, p, "Mul")) ||
        im->gr->node[p]->n_input != 2 || !(a->scale_t = s_const_t(im, im->gr->node[p]->input[1])) ||
        !s_single(im, im->gr->node[p]->input[0]))
        return 0;
    a->mul = gpp_onnx_is(im, p, "Mul");
    nodes[nn++] = p;
    p = gpp_onnx_producer(im, im->gr->node[p]->input[0]); /* MatMul(q, k) */
    if (!gpp_onnx_is(im, p, "MatMul") || im->gr->node[p]->n_input != 2)
        return 0;
    nodes[nn++] = p;
    if (s_att_heads(im, im->gr->node[p]->input[0], pq, a, 0, nodes, &nn) < 0 ||
        s_att_heads(im, im->gr->node[p]->input[1], pk, a, 1, nodes, &nn) < 0)
        return 0;
    if ((cm = s_att_next(im, n->output[0], "MatMul", 0)) < 0 || im->gr->node[cm]->n_input != 2 ||
        s_att_heads(im, im->gr->node[cm]->input[1], pq, a, 2, nodes, &nn) < 0)
        return 0;
    nodes[nn++] = cm;
    const char *v = im->gr->node[cm]->output[0];
    while ((p = s_att_next(im, v, "Transpose", 0)) >= 0) { /* forward: compose */
        const attr_t *pa = gpp_onnx_attr(im->gr->node[p], "perm");
        int64_t t[4];
        if (!pa || pa->n_ints != 4 || nn > 60)
            return 0;
        for (int j = 0; j < 4; j++)
            t[j] = pa->ints[j] >= 0 && pa->ints[j] <= 3 ? c[pa->ints[j]] : -1;
        memcpy(c, t, sizeof c);
        nodes[nn++] = p;
        v = im->gr->node[p]->output[0];
    }
    if (memcmp(c, pq, sizeof c) || (r = s_att_next(im, v, "Reshape", 0)) < 0)
        return 0;
    a->reshape[3] = r;
    nodes[nn++] = r;
    if ((om = s_att_next(im, im->gr->node[r]->output[0], "MatMul", 0)) < 0 ||
        im->gr->node[om]->n_input != 2 || !(a->w[3] = s_const_t(im, im->gr->node[om]->input[1])) ||
        a->w[3]->n_dims != 2)
        return 0;
    emit = om;
    int ad = gpp_onnx_next(im, im->gr->node[om]->output[0], "Add");
    const char *bo = ad >= 0 ? gpp_onnx_other(im->gr->node[ad], im->gr->node[om]->output[0]) : NULL;
    if (bo && (a->b[3] = s_const_t(im, bo))) {
        nodes[nn++] = om;
        emit = ad;
    }
    a->out = im->gr->node[emit]->output[0];
    a->softmax = sm;
    for (int k = 0; k < nn; k++)
        im->done[nodes[k]] = 1;
    im->done[emit] = 0;
    return 1;
}

/* ---- nn.MultiheadAttention ----
 * torch (1.13; batch_first=True, q = k = v = x, no mask, eval mode) exports
 * its self-attention time-first with one packed in-projection:
 *   t = Transpose(x, 1 0 2)                                  [S, N, E]
 *   p = MatMul(t, W_in^T) (+ b_in)                           [S, N, 3E]
 *   q, k, v = Slice(p) on the last axis, E wide each
 *   q = Transpose(Reshape(q, [S, N H, D]), 1 0 2) / sqrt(D)  [N H, S, D]
 *   k = Transpose(Reshape(k, [S, N H, D]), 1 2 0)            [N H, D, S]
 *   v = Transpose(Reshape(v, [S, N H, D]), 1 0 2)            [N H, S, D]
 *   c = Reshape(Transpose(MatMul(Softmax(MatMul(q, k)), v), 1 0 2), [S N, E])
 *   y = Transpose(Reshape(Gemm(c, W_o, b_o), [S, N, E]), 1 0 2)   [N, S, E]
 * (the scale may also follow MatMul(q, k); the output projection may be a
 * MatMul (+ Add)). The reshapes' shapes and the slices' bounds are computed
 * by Shape arithmetic on the pattern's own tensors: the matcher takes those
 * nodes in, and s_mha_check evaluates them at two batch sizes when the
 * input's shape is known. */
enum { MHA_X, MHA_T, MHA_P, MHA_C }; /* [N,S,E], [S,N,E], [S,N,3E], [S N,E] */
#define MHA_NODES 512

typedef struct {
    imp_t *im;
    const struct att *a;
    int nodes[MHA_NODES], nn;
    int64_t N, S, E; /* s_mha_ints: the sizes it evaluates at */
    int steps;       /* s_mha_ints: nodes evaluated, bounded (a DAG has many paths) */
} mha_t;

static int s_mha_add(mha_t *m, int node)
{
    for (int k = 0; k < m->nn; k++)
        if (m->nodes[k] == node)
            return 0;
    if (m->nn == MHA_NODES)
        return -1;
    m->nodes[m->nn++] = node;
    return 0;
}

static int s_mha_tensor(const struct att *a, const char *name)
{
    for (int k = 0; k < a->ntn; k++)
        if (!strcmp(a->tn[k], name))
            return a->tk[k];
    return -1;
}

/* The one reader of `name` that is not a Shape (the export reads the
 * pattern's tensors' shapes); *k: the input it reads it as. -1: none, or
 * several, or a graph output. */
static int s_mha_reader(const imp_t *im, const char *name, int *k)
{
    int c = -1;
    for (size_t i = 0; i < im->gr->n_node; i++)
        for (size_t j = 0; j < im->gr->node[i]->n_input; j++)
            if (!strcmp(im->gr->node[i]->input[j], name) && !gpp_onnx_is(im, (int)i, "Shape")) {
                if (c >= 0)
                    return -1;
                c = (int)i, *k = (int)j;
            }
    for (size_t i = 0; i < im->gr->n_output; i++)
        if (!strcmp(im->gr->output[i]->name ? im->gr->output[i]->name : "", name))
            return -1;
    return c;
}

/* That reader, if it has op type `op` and reads `name` as its input 0. */
static int s_mha_next(const imp_t *im, const char *name, const char *op)
{
    int k = -1, c = s_mha_reader(im, name, &k);
    return gpp_onnx_is(im, c, op) && k == 0 && im->gr->node[c]->n_output >= 1 ? c : -1;
}

static int s_mha_perm(const imp_t *im, int node, const int64_t *perm)
{
    const attr_t *pa =
        gpp_onnx_is(im, node, "Transpose") ? gpp_onnx_attr(im->gr->node[node], "perm") : NULL;
    return pa && im->gr->node[node]->n_input == 1 && pa->n_ints == 3 && pa->ints[0] == perm[0] &&
           pa->ints[1] == perm[1] && pa->ints[2] == perm[2];
}

/* `name` = Transpose(Reshape(Slice(p)), perm): the Slice (added with the
 * others to m) or -1. */
static int s_mha_heads(mha_t *m, const char *name, const int64_t *perm, int reader, int *reshape)
{
    const imp_t *im = m->im;
    int t = gpp_onnx_producer(im, name), r, sl, k;
    if (!s_mha_perm(im, t, perm) || s_mha_reader(im, name, &k) != reader)
        return -1;
    r = gpp_onnx_producer(im, im->gr->node[t]->input[0]);
    if (!gpp_onnx_is(im, r, "Reshape") || im->gr->node[r]->n_input != 2 ||
        s_mha_next(im, im->gr->node[r]->output[0], "Transpose") != t)
        return -1;
    sl = gpp_onnx_producer(im, im->gr->node[r]->input[0]);
    if (!gpp_onnx_is(im, sl, "Slice") || im->gr->node[sl]->n_input < 3 ||
        s_mha_next(im, im->gr->node[sl]->output[0], "Reshape") != r)
        return -1;
    *reshape = r;
    return s_mha_add(m, t) < 0 || s_mha_add(m, r) < 0 || s_mha_add(m, sl) < 0 ? -1 : sl;
}

/* Takes in the integer nodes computing `name` (a shape, a slice bound):
 * constants, Shape of the pattern's tensors and arithmetic on them. */
static int s_mha_collect(mha_t *m, const struct att *a, const char *name, int depth)
{
    static const char *ops[] = {"Constant", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast",
                                "Identity", "Add",    "Sub",       "Mul",     "Div"};
    int p = gpp_onnx_producer(m->im, name);
    if (p < 0)
        return s_const_t(m->im, name) ? 0 : -1;
    for (int k = 0; k < m->nn; k++)
        if (m->nodes[k] == p)
            return 0;
    if (depth > 32 || s_mha_add(m, p) < 0)
        return -1;
    if (gpp_onnx_is(m->im, p, "Shape"))
        return m->im->gr->node[p]->n_input == 1 &&
                       s_mha_tensor(a, m->im->gr->node[p]->input[0]) >= 0
                   ? 0
                   : -1;
    size_t k = 0;
    while (k < sizeof ops / sizeof ops[0] && !gpp_onnx_is(m->im, p, ops[k]))
        k++;
    if (k == sizeof ops / sizeof ops[0])
        return -1;
    for (k = 0; k < m->im->gr->node[p]->n_input; k++)
        if (m->im->gr->node[p]->input[k][0] &&
            s_mha_collect(m, a, m->im->gr->node[p]->input[k], depth + 1) < 0)
            return -1;
    return 0;
}

/* Matches nn.MultiheadAttention's export around Softmax node sm: 1
 * (recorded in a, its nodes marked done), 0 (not it). */
int gpp_onnx_mha_match(imp_t *im, int sm, struct att *a)
{
    static const int64_t p102[3] = {1, 0, 2}, p120[3] = {1, 2, 0};
    mha_t m;
    const node_t *n = im->gr->node[sm];
    const attr_t *ax = gpp_onnx_attr(n, "axis");
    int p, mm, sc = -1, cm, r[3], sl[3], t, xt, r3, o, r4, y, proj;
    memset(a, 0, sizeof *a);
    memset(&m, 0, sizeof m);
    m.im = im;
    if ((ax && ax->i != -1 && ax->i != 2) || n->n_input != 1 || n->n_output != 1 ||
        s_mha_next(im, n->input[0], "Softmax") != sm)
        return 0;
    /* attn_mask: Add(Mul(scores, 1), mask), torch's baddbmm(mask, q, k^T) */
    int mk, one = -1;
    const char *scores = s_att_mask(im, n->input[0], a, &mk);
    if (mk >= 0 && s_mha_next(im, scores, "Add") != mk)
        return 0;
    p = gpp_onnx_producer(im, scores);
    if (mk >= 0 && gpp_onnx_is(im, p, "Mul") && im->gr->node[p]->n_input == 2 &&
        s_mha_next(im, im->gr->node[p]->input[0], "Mul") == p) {
        const tensor_t *t = s_const_t(im, im->gr->node[p]->input[1]);
        int64_t tn;
        gpp_err_t e = {{0}}, *keep = im->err;
        im->err = &e;
        float *f = t && gpp_onnx_tensor_check(im, -1, t, 1, &tn) == 0 && tn == 1
                       ? gpp_onnx_floats(im, -1, t, 1)
                       : NULL;
        im->err = keep;
        if (f && f[0] == 1.0f)
            one = p, p = gpp_onnx_producer(im, im->gr->node[p]->input[0]);
        free(f);
    }
    if ((gpp_onnx_is(im, p, "Div") || gpp_onnx_is(im, p, "Mul")) && im->gr->node[p]->n_input == 2 &&
        s_const_t(im, im->gr->node[p]->input[1]) &&
        s_mha_next(im, im->gr->node[p]->input[0], im->gr->node[p]->op_type) == p)
        sc = p, p = gpp_onnx_producer(im, im->gr->node[p]->input[0]);
    if (!gpp_onnx_is(im, p, "MatMul") || im->gr->node[p]->n_input != 2)
        return 0;
    mm = p;
    const char *qn = im->gr->node[mm]->input[0];
    p = gpp_onnx_producer(im, qn);
    if (sc < 0 && (gpp_onnx_is(im, p, "Div") || gpp_onnx_is(im, p, "Mul")) &&
        im->gr->node[p]->n_input == 2 && s_const_t(im, im->gr->node[p]->input[1]) &&
        s_mha_next(im, qn, "MatMul") == mm)
        sc = p, qn = im->gr->node[p]->input[0];
    if (sc < 0)
        return 0;
    a->scale_t = s_const_t(im, im->gr->node[sc]->input[1]);
    a->mul = gpp_onnx_is(im, sc, "Mul");
    if ((cm = s_mha_next(im, n->output[0], "MatMul")) < 0 || im->gr->node[cm]->n_input != 2 ||
        (sl[0] = s_mha_heads(&m, qn, p102,
                             sc == gpp_onnx_producer(im, im->gr->node[mm]->input[0]) ? sc : mm,
                             &r[0])) < 0 ||
        (sl[1] = s_mha_heads(&m, im->gr->node[mm]->input[1], p120, mm, &r[1])) < 0 ||
        (sl[2] = s_mha_heads(&m, im->gr->node[cm]->input[1], p102, cm, &r[2])) < 0)
        return 0;
    /* the packed projection, p = MatMul(Transpose(x), W) (+ b) */
    const char *pn = im->gr->node[sl[0]]->input[0];
    if (strcmp(pn, im->gr->node[sl[1]]->input[0]) || strcmp(pn, im->gr->node[sl[2]]->input[0]))
        return 0;
    a->tn[a->ntn] = pn, a->tk[a->ntn++] = MHA_P;
    proj = gpp_onnx_producer(im, pn);
    if (gpp_onnx_is(im, proj, "Add") && im->gr->node[proj]->n_input == 2) {
        const node_t *ad = im->gr->node[proj];
        int k = s_const_t(im, ad->input[0]) ? 0 : 1, j;
        if (!(a->b[0] = s_const_t(im, ad->input[k])) || s_mha_reader(im, ad->input[!k], &j) != proj)
            return 0;
        s_mha_add(&m, proj);
        a->tn[a->ntn] = ad->input[!k], a->tk[a->ntn++] = MHA_P;
        proj = gpp_onnx_producer(im, ad->input[!k]);
    }
    if (!gpp_onnx_is(im, proj, "MatMul") || im->gr->node[proj]->n_input != 2 ||
        !(a->w[0] = s_const_t(im, im->gr->node[proj]->input[1])))
        return 0;
    xt = gpp_onnx_producer(im, im->gr->node[proj]->input[0]);
    if (!s_mha_perm(im, xt, p102) || s_mha_next(im, im->gr->node[xt]->output[0], "MatMul") != proj)
        return 0;
    a->x = im->gr->node[xt]->input[0];
    a->tn[a->ntn] = a->x, a->tk[a->ntn++] = MHA_X;
    a->tn[a->ntn] = im->gr->node[xt]->output[0], a->tk[a->ntn++] = MHA_T;
    for (int k = 0; k < 3; k++) {
        a->w[k] = a->w[0], a->b[k] = a->b[0], a->slice[k] = sl[k], a->reshape[k] = r[k];
        a->tn[a->ntn] = im->gr->node[sl[k]]->output[0], a->tk[a->ntn++] = MHA_T;
    }
    /* the context back to [N, S, E] through the output projection */
    if ((t = s_mha_next(im, im->gr->node[cm]->output[0], "Transpose")) < 0 ||
        !s_mha_perm(im, t, p102) ||
        (r3 = s_mha_next(im, im->gr->node[t]->output[0], "Reshape")) < 0 ||
        im->gr->node[r3]->n_input != 2)
        return 0;
    const char *cn = im->gr->node[r3]->output[0];
    if ((o = s_mha_next(im, cn, "Gemm")) >= 0) {
        int64_t ta, tb;
        double al, be;
        gpp_err_t e = {{0}}, *keep = im->err;
        im->err = &e;
        int bad = gpp_onnx_attr_int(im, o, "transA", 0, &ta) < 0 ||
                  gpp_onnx_attr_int(im, o, "transB", 0, &tb) < 0 ||
                  gpp_onnx_attr_float(im, o, "alpha", 1.0, &al) < 0 ||
                  gpp_onnx_attr_float(im, o, "beta", 1.0, &be) < 0 || ta || al != 1.0 || be != 1.0;
        im->err = keep;
        const node_t *g = im->gr->node[o];
        if (bad || g->n_input < 2 || !(a->w[3] = s_const_t(im, g->input[1])) ||
            (g->n_input > 2 && g->input[2][0] && !(a->b[3] = s_const_t(im, g->input[2]))))
            return 0;
        a->outin = tb != 0;
    } else if ((o = s_mha_next(im, cn, "MatMul")) >= 0) {
        if (im->gr->node[o]->n_input != 2 || !(a->w[3] = s_const_t(im, im->gr->node[o]->input[1])))
            return 0;
        int k, ad = s_mha_reader(im, im->gr->node[o]->output[0], &k);
        ad = gpp_onnx_is(im, ad, "Add") ? ad : -1;
        const char *bo =
            ad >= 0 ? gpp_onnx_other(im->gr->node[ad], im->gr->node[o]->output[0]) : NULL;
        if (bo && (a->b[3] = s_const_t(im, bo))) {
            s_mha_add(&m, o);
            a->tn[a->ntn] = im->gr->node[o]->output[0], a->tk[a->ntn++] = MHA_C;
            o = ad;
        }
    } else
        return 0;
    a->tn[a->ntn] = im->gr->node[o]->output[0], a->tk[a->ntn++] = MHA_C;
    if ((r4 = s_mha_next(im, im->gr->node[o]->output[0], "Reshape")) < 0 ||
        im->gr->node[r4]->n_input != 2 ||
        (y = s_mha_next(im, im->gr->node[r4]->output[0], "Transpose")) < 0 ||
        !s_mha_perm(im, y, p102))
        return 0;
    a->reshape[3] = r3, a->reshape_out = r4, a->packed = 1, a->softmax = sm;
    a->out = im->gr->node[y]->output[0];
    int core[] = {sm, sc, mm, cm, t, r3, o, r4, y, xt, proj, mk, one};
    for (size_t k = 0; k < sizeof core / sizeof core[0]; k++)
        if (core[k] >= 0 && s_mha_add(&m, core[k]) < 0)
            return 0;
    for (int k = 0; k < 3; k++) /* slice bounds and reshape shapes */
        for (size_t j = 1; j < im->gr->node[sl[k]]->n_input; j++)
            if (im->gr->node[sl[k]]->input[j][0] &&
                s_mha_collect(&m, a, im->gr->node[sl[k]]->input[j], 0) < 0)
                return 0;
    int rs[5] = {r[0], r[1], r[2], r3, r4};
    for (int k = 0; k < 5; k++)
        if (s_mha_collect(&m, a, im->gr->node[rs[k]]->input[1], 0) < 0)
            return 0;
    /* closed: every value the pattern defines is read inside it only */
    unsigned char *in = gpp_xcalloc(im->gr->n_node + 1, 1);
    int open = 0;
    for (int k = 0; k < m.nn; k++)
        in[m.nodes[k]] = 1;
    for (int k = 0; k < m.nn && !open; k++) {
        const node_t *d = im->gr->node[m.nodes[k]];
        for (size_t j = 0; j < d->n_output && m.nodes[k] != y && !open; j++) {
            for (size_t i = 0; i < im->gr->n_node && !open; i++)
                for (size_t q = 0; q < im->gr->node[i]->n_input && !in[i] && !open; q++)
                    open = !strcmp(im->gr->node[i]->input[q], d->output[j]);
            for (size_t i = 0; i < im->gr->n_output && !open; i++)
                open =
                    !strcmp(im->gr->output[i]->name ? im->gr->output[i]->name : "", d->output[j]);
        }
    }
    free(in);
    if (open)
        return 0;
    for (int k = 0; k < m.nn; k++)
        im->done[m.nodes[k]] = 1;
    im->done[y] = 0;
    return 1;
}

/* Integer vector `name` at batch size m->N (m->S, m->E the input's sizes):
 * its count (*scalar: 0-d), or -1 when gpp cannot evaluate it. */
static int s_mha_ints(mha_t *m, const char *name, int64_t *out, int *scalar, int depth)
{
    imp_t *im = m->im;
    int p = gpp_onnx_producer(im, name), na, nb, sa, sb;
    int64_t a[SV_MAX], b[SV_MAX];
    const tensor_t *c = p < 0 || gpp_onnx_is(im, p, "Constant") ? s_const_t(im, name) : NULL;
    *scalar = 0;
    if (c) {
        int64_t n;
        gpp_err_t e = {{0}}, *keep = im->err;
        im->err = &e; /* not integers: not gpp's to evaluate */
        int bad = gpp_onnx_tensor_check(im, -1, c, 0, &n) < 0 || n > SV_MAX || c->n_dims > 1;
        im->err = keep;
        if (bad)
            return -1;
        for (int64_t k = 0; k < n; k++)
            out[k] = gpp_onnx_int_at(c, k);
        *scalar = c->n_dims == 0;
        return (int)n;
    }
    if (p < 0 || depth > 32 || ++m->steps > 100000 || im->gr->node[p]->n_input < 1)
        return -1;
    const node_t *nd = im->gr->node[p];
    if (gpp_onnx_is(im, p, "Shape")) {
        int64_t d[4][3] = {
            {m->N, m->S, m->E}, {m->S, m->N, m->E}, {m->S, m->N, 3 * m->E}, {m->S * m->N, m->E}};
        int kind = s_mha_tensor(m->a, nd->input[0]), r = kind == MHA_C ? 2 : 3;
        const attr_t *st = gpp_onnx_attr(nd, "start"), *en = gpp_onnx_attr(nd, "end");
        int64_t b0 = st ? st->i : 0, e0 = en ? en->i : r;
        b0 = b0 < 0 ? b0 + r : b0, e0 = e0 < 0 ? e0 + r : e0;
        if (kind < 0 || b0 < 0 || e0 > r)
            return -1;
        for (int64_t k = b0; k < e0; k++)
            out[k - b0] = d[kind][k];
        return (int)(e0 > b0 ? e0 - b0 : 0);
    }
    const attr_t *to = gpp_onnx_is(im, p, "Cast") ? gpp_onnx_attr(nd, "to") : NULL;
    if ((na = s_mha_ints(m, nd->input[0], a, &sa, depth + 1)) < 0 ||
        (to && to->i != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 &&
         to->i != ONNX__TENSOR_PROTO__DATA_TYPE__INT32)) /* integers stay integers */
        return -1;
    if (gpp_onnx_is(im, p, "Cast") || gpp_onnx_is(im, p, "Identity") ||
        gpp_onnx_is(im, p, "Unsqueeze") ||
        gpp_onnx_is(im, p, "Squeeze")) { /* the latter two between a scalar and one element */
        if ((gpp_onnx_is(im, p, "Unsqueeze") && !sa) || (gpp_onnx_is(im, p, "Squeeze") && na != 1))
            return -1;
        memcpy(out, a, (size_t)na * sizeof *a);
        *scalar = gpp_onnx_is(im, p, "Squeeze") || (sa && !gpp_onnx_is(im, p, "Unsqueeze"));
        return na;
    }
    if (gpp_onnx_is(im, p, "Concat")) {
        int n = 0;
        for (size_t k = 0; k < nd->n_input; k++) {
            if ((nb = s_mha_ints(m, nd->input[k], b, &sb, depth + 1)) < 0 || n + nb > SV_MAX)
                return -1;
            memcpy(out + n, b, (size_t)nb * sizeof *b);
            n += nb;
        }
        return n;
    }
    if (nd->n_input != 2 || (nb = s_mha_ints(m, nd->input[1], b, &sb, depth + 1)) < 0)
        return -1;
    if (gpp_onnx_is(im, p, "Gather")) { /* axis 0 of a vector */
        const attr_t *ax = gpp_onnx_attr(nd, "axis");
        if (sa || (ax && ax->i))
            return -1;
        for (int k = 0; k < nb; k++) {
            int64_t j = b[k] < 0 ? b[k] + na : b[k];
            if (j < 0 || j >= na)
                return -1;
            out[k] = a[j];
        }
        *scalar = sb;
        return nb;
    }
    int n = na > nb ? na : nb; /* Add, Sub, Mul, Div; one side may broadcast */
    if ((na != nb && na != 1 && nb != 1) || n == 0)
        return -1;
    for (int k = 0; k < n; k++) {
        int64_t x = a[na == 1 ? 0 : k], y = b[nb == 1 ? 0 : k];
        if ((gpp_onnx_is(im, p, "Div") && y == 0) || x < -INT32_MAX || x > INT32_MAX ||
            y < -INT32_MAX || y > INT32_MAX) /* sizes: no product overflows */
            return -1;
        out[k] = gpp_onnx_is(im, p, "Add")   ? x + y
                 : gpp_onnx_is(im, p, "Sub") ? x - y
                 : gpp_onnx_is(im, p, "Mul") ? x * y
                                             : x / y;
    }
    *scalar = sa && sb;
    return n;
}

/* Reshape node r's shape for an input of dims in[nin] at m's batch size,
 * 0 (copy) and -1 (infer) resolved: its rank, or -1. */
static int s_mha_target(mha_t *m, int r, const int64_t *in, int nin, int64_t *t)
{
    int sc, nt = s_mha_ints(m, m->im->gr->node[r]->input[1], t, &sc, 0), infer = -1;
    int64_t all = 1, known = 1;
    const attr_t *z = gpp_onnx_attr(m->im->gr->node[r], "allowzero");
    for (int k = 0; k < nin; k++)
        all *= in[k];
    for (int k = 0; k < nt; k++) {
        if (t[k] == 0 && !(z && z->i) && k < nin)
            t[k] = in[k];
        if (t[k] == -1 && infer < 0)
            infer = k;
        else if (t[k] < 1 || known > DIM_MAX / t[k])
            return -1;
        else
            known *= t[k];
    }
    if (infer >= 0) {
        if (all % known)
            return -1;
        t[infer] = all / known;
    }
    return nt; /* a count that differs from the input's fails the caller's comparison */
}

/* The packed pattern's slices and reshapes for an input [N, S, E], at two
 * batch sizes: sets a->off and a->heads, or -1 + message. */
static int s_mha_check(imp_t *im, struct att *a, int64_t S, int64_t E)
{
    mha_t m = {.im = im, .a = a, .S = S, .E = E};
    static const char *qkv[] = {"Q", "K", "V"};
    int64_t t[SV_MAX], v[4][SV_MAX] = {{0}}, H = 0;
    char b1[96], b2[96];
    if (E > INT32_MAX / 8 || S > INT32_MAX / 8) /* the sizes below stay in s_mha_ints' range */
        return gpp_onnx_fail(im, a->softmax,
                             "nn.MultiheadAttention over [N, %lld, %lld]: too large", (long long)S,
                             (long long)E);
    for (m.N = 5; m.N <= 7; m.N += 2) { /* primes: a batch size no other size can mimic */
        for (int k = 0; k < 3; k++) {
            const node_t *sl = im->gr->node[a->slice[k]];
            int sc, got[4];
            v[2][0] = 0, v[3][0] = 1; /* axes, steps absent: axis 0 (ONNX's), step 1 */
            for (int j = 0; j < 4; j++)
                got[j] = (size_t)j + 1 < sl->n_input && sl->input[j + 1][0]
                             ? s_mha_ints(&m, sl->input[j + 1], v[j], &sc, 0)
                         : j >= 2 ? 1
                                  : -1;
            int64_t st = v[0][0] < 0 ? v[0][0] + 3 * E : v[0][0],
                    en = v[1][0] < 0 ? v[1][0] + 3 * E : v[1][0];
            st = st < 0 ? 0 : st > 3 * E ? 3 * E : st, en = en < 0 ? 0 : en > 3 * E ? 3 * E : en;
            if (got[0] != 1 || got[1] != 1 || got[2] != 1 || got[3] != 1 ||
                (v[2][0] != -1 && v[2][0] != 2) || v[3][0] != 1 || en - st != E ||
                (m.N > 5 && st != a->off[k]))
                return gpp_onnx_fail(im, a->slice[k],
                                     "nn.MultiheadAttention: the %s slice of the packed projection "
                                     "must be %lld features of the last axis (one third of [S, N, "
                                     "%lld]), step 1",
                                     qkv[k], (long long)E, (long long)(3 * E));
            a->off[k] = st;
        }
        for (int k = 0; k < 5; k++) { /* Q, K, V to heads, the context back, the output */
            int r = k < 3 ? a->reshape[k] : k == 3 ? a->reshape[3] : a->reshape_out;
            int64_t D = H ? E / H : 0, in[3] = {S, m.N, E}, want[3] = {S, m.N * H, D};
            int nin = k == 4 ? 2 : 3, wn = k == 3 ? 2 : 3;
            if (k == 3)
                in[1] = m.N * H, in[2] = D, want[0] = S * m.N, want[1] = E;
            if (k == 4)
                in[0] = S * m.N, in[1] = E, want[1] = m.N, want[2] = E;
            int nt = s_mha_target(&m, r, in, nin, t);
            if (k == 0 && !H && nt == 3 && E % t[2] == 0) { /* the head size D says H */
                H = E / t[2], want[1] = m.N * H, want[2] = t[2];
            }
            if (nt != wn || memcmp(t, want, (size_t)wn * sizeof *t) || !H)
                return gpp_onnx_fail(
                    im, r,
                    "nn.MultiheadAttention: reshape to %s at batch %lld, expected %s "
                    "(torch's time-first layout, heads dividing %lld features)",
                    nt < 0 ? "a shape gpp cannot evaluate" : gpp_onnx_dimstr(t, nt, b1, sizeof b1),
                    (long long)m.N, gpp_onnx_dimstr(want, wn, b2, sizeof b2), (long long)E);
        }
    }
    a->heads = H;
    return 0;
}

/* One gpp attention op for pattern a, at its last node i. */
int gpp_onnx_attention(imp_t *im, int i, struct att *a)
{
    const val_t *x = gpp_onnx_val(im, i, a->x, V_OP);
    int64_t d[4], t[SV_MAX], S, E, H = 0, D = 0;
    if (!x)
        return -1;
    if (x->rank != 3)
        return gpp_onnx_fail(im, i,
                             "attention over '%s': gpp's attention reads [batch, sequence, "
                             "features], '%s' has rank %d",
                             a->x, a->x, x->rank);
    gpp_onnx_dims(im, x, d);
    S = d[1], E = d[2];
    if (a->mask && a->mask_s != S)
        return gpp_onnx_fail(im, a->softmax,
                             "the causal mask '%s' is [%lld, %lld]; the sequence '%s' has %lld "
                             "rows: export the mask for that length",
                             a->mask->name ? a->mask->name : "", (long long)a->mask_s,
                             (long long)a->mask_s, a->x, (long long)S);
    for (int k = 0; k < 4; k++) {
        int64_t wc = a->packed && k < 3 ? 3 * E : E; /* the [in, out] form's columns */
        if (a->w[k]->n_dims != 2 || a->w[k]->dims[0] != (k == 3 && a->outin ? wc : E) ||
            a->w[k]->dims[1] != (k == 3 && a->outin ? E : wc))
            return gpp_onnx_fail(im, i,
                                 "attention weight '%s' must be [%lld, %lld] (features to "
                                 "features%s)",
                                 a->w[k]->name, (long long)E, (long long)wc,
                                 wc > E ? ", Q K V packed" : "");
        if (k == 3 || a->packed)
            break;
        int nt = gpp_onnx_reshape_target(im, a->reshape[k], d, 3, t);
        if (nt < 0)
            return -1;
        if (nt != 4 || t[1] != S || t[2] * t[3] != E || (H && t[2] != H))
            return gpp_onnx_fail(im, a->reshape[k],
                                 "attention heads: reshape to %s, expected [N, %lld, "
                                 "heads, %lld / heads] alike for Q, K and V",
                                 gpp_onnx_dimstr(t, nt, (char[96]){0}, 96), (long long)S,
                                 (long long)E);
        H = t[2], D = t[3];
    }
    if (a->packed) {
        if (s_mha_check(im, a, S, E) < 0)
            return -1;
        for (int k = 1; k < 4; k++)
            if (a->w[k]->n_dims != 2 ||
                a->w[k]->dims[0] != (k == 3 && a->outin ? E : a->w[0]->dims[0]) ||
                a->w[k]->dims[1] != (k == 3 ? E : a->w[0]->dims[1]))
                return gpp_onnx_fail(im, i, "attention weight '%s' must be [%lld, %lld]",
                                     a->w[k]->name, (long long)E, (long long)(k == 3 ? E : 3 * E));
        H = a->heads, D = E / H;
    } else {
        int64_t dh[4] = {BATCH, S, H, D};
        int nt = gpp_onnx_reshape_target(im, a->reshape[3], dh, 4, t);
        if (nt < 0)
            return -1;
        if (nt != 3 || t[1] != S || t[2] != E)
            return gpp_onnx_fail(
                im, a->reshape[3], "attention context: reshape to %s, expected [N, %lld, %lld]",
                gpp_onnx_dimstr(t, nt, (char[96]){0}, 96), (long long)S, (long long)E);
    }
    int64_t sn;
    float *sc = gpp_onnx_tensor_check(im, a->softmax, a->scale_t, 1, &sn) == 0 && sn == 1
                    ? gpp_onnx_floats(im, a->softmax, a->scale_t, 1)
                    : NULL;
    if (!sc)
        return gpp_onnx_fail(im, a->softmax, "the attention scores' scale must be one float");
    double want = sqrt((double)D), got = a->mul ? 1.0 / sc[0] : sc[0];
    free(sc);
    if (fabs(got / want - 1.0) > 1e-5)
        return gpp_onnx_fail(im, a->softmax,
                             "attention scale: the scores are divided by %g; gpp's "
                             "attention divides by sqrt(%lld) = %g",
                             got, (long long)D, want);
    float *w[4] = {NULL}, *b[4] = {NULL}, *qkv = gpp_xcalloc((size_t)(3 * E * E), sizeof *qkv),
          *bqkv = gpp_xcalloc((size_t)(3 * E), sizeof *bqkv),
          *wo = gpp_xcalloc((size_t)(E * E), sizeof *wo), *bo = gpp_xcalloc((size_t)E, sizeof *bo);
    int rc = 0;
    for (int k = 0; k < 4 && rc == 0; k++) {
        int64_t wc = a->packed && k < 3 ? 3 * E : E, off = a->off[k];
        if (!(w[k] = gpp_onnx_floats(im, i, a->w[k], E * wc)) ||
            (a->b[k] && !(b[k] = gpp_onnx_floats(im, i, a->b[k], wc))))
            rc = -1;
        for (int64_t o = 0; rc == 0 && o < E; o++) { /* W^T [in, out] -> gpp's [out, in] */
            float *dst = k < 3 ? qkv + (k * E + o) * E : wo + o * E;
            for (int64_t in = 0; in < E; in++)
                dst[in] = k == 3 && a->outin ? w[k][o * E + in] : w[k][in * wc + off + o];
            (k < 3 ? bqkv + k * E : bo)[o] = b[k] ? b[k][off + o] : 0.0f;
        }
    }
    for (int k = 0; k < 4; k++)
        free(w[k]), free(b[k]);
    if (rc < 0) {
        free(qkv), free(bqkv), free(wo), free(bo);
        return -1;
    }
    char name[GPP_NAME_LEN];
    const char *base = a->b[3] && a->b[3]->name ? a->b[3]->name
                       : a->w[3]->name          ? a->w[3]->name
                                                : "attention";
    char nb[GPP_NAME_LEN]; /* nn.MultiheadAttention's "mha.out_proj.bias" -> "mha" */
    gpp_onnx_opname(im, base, 1, name);
    size_t nl = strlen(name);
    if (a->packed && nl > 9 && !strcmp(name + nl - 9, ".out_proj")) {
        snprintf(nb, sizeof nb, "%.*s", (int)(nl - 9), name);
        gpp_onnx_opname(im, nb, 0, name);
    }
    int id = gpp_graph_attention(im->g, name, x->op, (int)H);
    im->g->ops[id].causal = a->mask != NULL;
    gpp_onnx_weight(im, id, 0, qkv);
    gpp_onnx_weight(im, id, 1, bqkv);
    gpp_onnx_weight(im, id, 2, wo);
    gpp_onnx_weight(im, id, 3, bo);
    return gpp_onnx_out_op(im, i, a->out, id, 3);
}

/* The hint for an op gpp does not map. */
const char *gpp_onnx_hint(const char *op)
{
    static const struct {
        const char *op, *hint;
    } h[] = {
        {"Softmax", "for a classifier drop the final Softmax and train with loss=ce (it applies "
                    "log-softmax); gpp's softmax exists only inside its attention op, which gpp "
                    "maps from MatMul(Q, K^T) / sqrt(d) -> Softmax -> MatMul(V) with the heads' "
                    "Reshape/Transpose around it, and from nn.MultiheadAttention(batch_first="
                    "True) self-attention (q = k = v, eval mode), with no mask or a causal one"},
        {"LogSoftmax", "drop it and train with loss=ce"},
        {"Split", "gpp splits the features (the last axis) only"},
        {"Dropout", "gpp has no dropout: export in eval mode (model.eval()), which leaves it out"},
        {"Transpose", "gpp keeps each sample a [rows, cols] matrix: no transposes but the "
                      "heads' inside the self-attention pattern (docs/graph-format.md: "
                      "MatMul(Q, K^T) / sqrt(d) -> Softmax -> MatMul(V), Q K V from one input)"},
        {"Sigmoid", "use Relu or Gelu"},
        {"Tanh", "use Relu or Gelu"},
        {"Mul",
         "elementwise products are not gpp ops (only inside the Erf and tanh forms of Gelu)"},
        {"ReduceMean", "gpp maps it only inside a LayerNorm written out (ReduceMean over the "
                       "last axis -> Sub -> Pow(2) -> ReduceMean -> Add(1e-5) -> Sqrt -> Div -> "
                       "Mul(weight) [-> Add(bias)], as torch exports nn.LayerNorm below opset "
                       "17), or use LayerNormalization (opset 17)"},
        {"Pow", "powers are not gpp ops (only inside the tanh form of Gelu and a LayerNorm "
                "written out)"},
        {"Sub", "fold constants into the weights"},
        {"Div", "fold constants into the weights"},
        {"BatchNormalization", "use LayerNormalization"},
        {"Conv", "gpp has dense layers only (Gemm / MatMul)"},
        {"Attention", "not imported yet; gpp-graph/1 JSON has an attention op"},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        if (!strcmp(op, h[i].op))
            return h[i].hint;
    return "express it with those";
}

/* A Softmax in no attention pattern: why, where an attention's variant
 * gpp lacks shows around it. */
int gpp_onnx_softmax(imp_t *im, int i)
{
    const node_t *n = im->gr->node[i];
    int p = n->n_input ? gpp_onnx_producer(im, n->input[0]) : -1, k,
        r = n->n_output ? s_mha_reader(im, n->output[0], &k) : -1;
    const char *why = "";
    if (gpp_onnx_is(im, p, "Add") || gpp_onnx_is(im, p, "Where") || gpp_onnx_is(im, p, "Sub"))
        why = " after an attention mask (the scores pass through Add/Where first: attn_mask, "
              "key_padding_mask or is_causal); gpp's attention has no mask but a causal one, "
              "a constant added to the scores: 0 on and below the diagonal, -inf (or at most "
              "-1e4) above, e.g. torch.triu(torch.full((S, S), float('-inf')), 1)";
    else if (gpp_onnx_is(im, r, "Dropout"))
        why = " before Dropout (a model exported in training mode): export with model.eval(), "
              "gpp's attention has no dropout";
    return gpp_onnx_fail(im, i, "unsupported op Softmax%s; %s", why, gpp_onnx_hint("Softmax"));
}
