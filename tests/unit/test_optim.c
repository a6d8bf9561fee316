/* test_optim: SGD with momentum and AdamW against hand-computed steps, and
 * the sparse (embedding table) steps against their dense meaning.
 *
 * Hand values (lr 0.1, weight decay 0.01; p0 = [1, -2]):
 *   SGD momentum 0.9, g1 = [0.5, 0.25], g2 = [0.5, -1]:
 *     step 1: g' = g + wd p = [0.51, 0.23], v = g', p = [0.949, -2.023]
 *     step 2: g' = [0.50949, -1.02023], v = 0.9 v + g' = [0.96849, -0.81323],
 *             p = [0.852151, -1.941677]
 *   AdamW betas (0.9, 0.999), eps 1e-8, g1 = [0.5, 0.25], g2 = [-0.25, 1]:
 *     step 1: p *= 0.999; m = [0.05, 0.025]; v = [2.5e-4, 6.25e-5];
 *             m^ / sqrt(v^) = [1, 1] -> p = [0.899, -2.098]
 *     step 2: p *= 0.999; m = [0.02, 0.1225]; v = [3.1225e-4, 1.0624375e-3];
 *             bias corrections 0.19, 0.001999 -> p = [0.8714673, -2.1843396]
 * Tolerance 1e-6 absolute (fp32 arithmetic on values of order 1). */
#include <math.h>
#include <string.h>

#include "kernels/gpp_backend.h"
#include "kernels/gpp_ops.h"
#include "kernels/gpp_optim.h"
#include "kernels/gpp_sparse.h"
#include "tests/gpp_test.h"

static gpp_backend_t *s_be;
static gpp_stream_t *s_st;

static const gpp_optim_hp_t s_sgd = {
    .kind = GPP_OPTIM_SGD, .lr = 0.1f, .weight_decay = 0.01f, .momentum = 0.9f};
static const gpp_optim_hp_t s_adamw = {.kind = GPP_OPTIM_ADAMW,
                                       .lr = 0.1f,
                                       .weight_decay = 0.01f,
                                       .beta1 = 0.9f,
                                       .beta2 = 0.999f,
                                       .eps = 1e-8f};

static double s_maxdiff(const float *a, const float *b, int n)
{
    double d = 0;
    for (int i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

/* Two dense steps from p0 = [1, -2]; checks p after each against want. */
static void s_two_steps(const char *name, const gpp_optim_hp_t *hp, const float g[2][2],
                        const float want[2][2], const float want_buf0[2])
{
    gpp_err_t err;
    float p[2] = {1, -2};
    float gr[2];
    gpp_tensor_t pt = gpp_tensor(p, GPP_DTYPE_F32, 1, 1, 2);
    gpp_tensor_t gt = gpp_tensor(gr, GPP_DTYPE_F32, 1, 1, 2);
    gpp_optim_state_t *st = gpp_optim_state_new(s_st, hp->kind, 2, &err);
    GPP_EXPECT(st != NULL);
    GPP_EXPECT(gpp_optim_state_buf(st, 0)[0] == 0.0f && gpp_optim_state_buf(st, 0)[1] == 0.0f);
    for (int step = 1; step <= 2; step++) {
        memcpy(gr, g[step - 1], sizeof gr);
        GPP_EXPECT(gpp_optim_step(s_st, st, hp, step, &pt, &gt, &err) == 0);
        double d = s_maxdiff(p, want[step - 1], 2);
        printf("  %-14s step %d: p = [%.7f, %.7f], max abs diff vs hand %.3g (tol 1e-6)\n", name,
               step, p[0], p[1], d);
        GPP_EXPECT(d <= 1e-6);
    }
    GPP_EXPECT(s_maxdiff(gpp_optim_state_buf(st, 0), want_buf0, 2) <= 1e-6);
    gpp_optim_state_destroy(&st);
    GPP_EXPECT(st == NULL);
}

static void t_sgd_momentum(void)
{
    const float g[2][2] = {{0.5f, 0.25f}, {0.5f, -1.0f}};
    const float want[2][2] = {{0.949f, -2.023f}, {0.852151f, -1.941677f}};
    const float v[2] = {0.96849f, -0.81323f};
    s_two_steps("sgd momentum", &s_sgd, g, want, v);
}

static void t_sgd_plain(void)
{
    /* momentum 0, no decay: p -= lr g; the momentum buffer stays zero */
    gpp_optim_hp_t hp = {.kind = GPP_OPTIM_SGD, .lr = 0.1f};
    const float g[2][2] = {{0.5f, 0.25f}, {0.5f, -1.0f}};
    const float want[2][2] = {{0.95f, -2.025f}, {0.9f, -1.925f}};
    const float v[2] = {0, 0};
    s_two_steps("sgd plain", &hp, g, want, v);
}

static void t_adamw(void)
{
    const float g[2][2] = {{0.5f, 0.25f}, {-0.25f, 1.0f}};
    const float want[2][2] = {{0.899f, -2.098f}, {0.8714673f, -2.1843396f}};
    const float m[2] = {0.02f, 0.1225f};
    s_two_steps("adamw", &s_adamw, g, want, m);
}

static void t_state_accessors(void)
{
    gpp_err_t err;
    gpp_optim_state_t *a = gpp_optim_state_new(s_st, GPP_OPTIM_ADAMW, 10, &err);
    gpp_optim_state_t *s = gpp_optim_state_new(s_st, GPP_OPTIM_SGD, 10, &err);
    GPP_EXPECT(a && s);
    GPP_EXPECT(gpp_optim_state_nbufs(a) == 2 && gpp_optim_state_nbufs(s) == 1);
    GPP_EXPECT(gpp_optim_state_numel(a) == 10 && gpp_optim_state_kind(a) == GPP_OPTIM_ADAMW);
    GPP_EXPECT(gpp_optim_state_buf(a, 1)[9] == 0.0f);
    gpp_optim_state_destroy(&a);
    gpp_optim_state_destroy(&s);
    gpp_optim_state_destroy(&s); /* NULL is fine */
}

/* A 6 x 2 table with a sparse gradient on rows {1, 3} (step 1) and {1}
 * (step 2), next to the same table stepped densely with the scattered
 * gradient. */
typedef struct {
    float init[12], table[12], dense[12], gdense[12];
    gpp_tensor_t tt, dt, gt;
    gpp_sparse_grad_t *g;
    gpp_optim_state_t *ss, *sd;
} sparse_case_t;

static void s_sparse_setup(sparse_case_t *c, gpp_optim_kind_t kind)
{
    gpp_err_t err;
    for (int i = 0; i < 12; i++)
        c->init[i] = c->table[i] = c->dense[i] = 0.1f * (float)(i + 1) * (i % 2 ? -1.0f : 1.0f);
    c->tt = gpp_tensor(c->table, GPP_DTYPE_F32, 1, 6, 2);
    c->dt = gpp_tensor(c->dense, GPP_DTYPE_F32, 1, 6, 2);
    c->gt = gpp_tensor(c->gdense, GPP_DTYPE_F32, 1, 6, 2);
    c->g = gpp_sparse_grad_new(s_st, 6, 2, 0, &err);
    c->ss = gpp_optim_state_new(s_st, kind, 12, &err);
    c->sd = gpp_optim_state_new(s_st, kind, 12, &err);
    GPP_EXPECT(c->g && c->ss && c->sd);
}

static void s_sparse_grad(sparse_case_t *c, int step)
{
    gpp_err_t err;
    const int32_t rows[2] = {1, 3};
    const float vals[4] = {0.5f, -0.25f, 1.0f, 0.75f};
    GPP_EXPECT(gpp_sparse_grad_clear(s_st, c->g, &err) == 0);
    GPP_EXPECT(gpp_sparse_grad_add(s_st, c->g, step == 1 ? 2 : 1, rows, vals, &err) == 0);
    memset(c->gdense, 0, sizeof c->gdense);
    for (int k = 0; k < (step == 1 ? 2 : 1); k++)
        for (int j = 0; j < 2; j++)
            c->gdense[rows[k] * 2 + j] = vals[k * 2 + j];
}

static void s_sparse_teardown(sparse_case_t *c)
{
    gpp_sparse_grad_destroy(&c->g);
    gpp_optim_state_destroy(&c->ss);
    gpp_optim_state_destroy(&c->sd);
}

static void t_sgd_sparse_exact(void)
{
    /* with momentum and decay every row moves; the sparse step must equal
     * the dense step bit for bit */
    gpp_err_t err;
    sparse_case_t c;
    s_sparse_setup(&c, GPP_OPTIM_SGD);
    for (int step = 1; step <= 3; step++) {
        s_sparse_grad(&c, step < 3 ? step : 2);
        GPP_EXPECT(gpp_optim_step_sparse(s_st, c.ss, &s_sgd, step, &c.tt, c.g, &err) == 0);
        GPP_EXPECT(gpp_optim_step(s_st, c.sd, &s_sgd, step, &c.dt, &c.gt, &err) == 0);
    }
    double d = s_maxdiff(c.table, c.dense, 12);
    printf("  sgd sparse vs dense (momentum, decay), 3 steps: max abs diff %.3g (want 0)\n", d);
    GPP_EXPECT(memcmp(c.table, c.dense, sizeof c.table) == 0);
    GPP_EXPECT(memcmp(gpp_optim_state_buf(c.ss, 0), gpp_optim_state_buf(c.sd, 0),
                      12 * sizeof(float)) == 0);
    s_sparse_teardown(&c);

    /* plain SGD: only touched rows move, by exactly -lr g */
    gpp_optim_hp_t plain = {.kind = GPP_OPTIM_SGD, .lr = 0.1f};
    s_sparse_setup(&c, GPP_OPTIM_SGD);
    s_sparse_grad(&c, 1);
    GPP_EXPECT(gpp_optim_step_sparse(s_st, c.ss, &plain, 1, &c.tt, c.g, &err) == 0);
    GPP_EXPECT(gpp_optim_step(s_st, c.sd, &plain, 1, &c.dt, &c.gt, &err) == 0);
    GPP_EXPECT(memcmp(c.table, c.dense, sizeof c.table) == 0);
    GPP_EXPECT(c.table[0] == c.init[0] && c.table[11] == c.init[11]);
    s_sparse_teardown(&c);
}

static void t_adamw_sparse_lazy(void)
{
    gpp_err_t err;
    sparse_case_t c;
    s_sparse_setup(&c, GPP_OPTIM_ADAMW);
    float after1[12] = {0};
    for (int step = 1; step <= 2; step++) {
        s_sparse_grad(&c, step);
        GPP_EXPECT(gpp_optim_step_sparse(s_st, c.ss, &s_adamw, step, &c.tt, c.g, &err) == 0);
        GPP_EXPECT(gpp_optim_step(s_st, c.sd, &s_adamw, step, &c.dt, &c.gt, &err) == 0);
        if (step == 1)
            memcpy(after1, c.table, sizeof after1);
    }
    /* row 1, touched at both steps: the dense rule exactly */
    double d1 = s_maxdiff(c.table + 2, c.dense + 2, 2);
    /* row 3, touched at step 1 only: frozen at step 2 (lazy) */
    double d3 = s_maxdiff(c.table + 6, after1 + 6, 2);
    printf("  adamw sparse: touched row vs dense max abs diff %.3g (want 0); row skipped at "
           "step 2 moved by %.3g (lazy: want 0)\n",
           d1, d3);
    GPP_EXPECT(d1 == 0.0 && d3 == 0.0);
    /* dense AdamW does move row 3 at step 2 (momentum and decay) */
    GPP_EXPECT(c.dense[6] != after1[6]);
    /* never-touched rows keep value and zero state */
    GPP_EXPECT(c.table[0] == c.init[0] && c.table[11] == c.init[11]);
    GPP_EXPECT(gpp_optim_state_buf(c.ss, 0)[0] == 0.0f && gpp_optim_state_buf(c.ss, 1)[11] == 0.0f);
    s_sparse_teardown(&c);
}

static const gpp_test_case_t cases[] = {
    {"sgd_momentum", t_sgd_momentum},
    {"sgd_plain", t_sgd_plain},
    {"adamw", t_adamw},
    {"state_accessors", t_state_accessors},
    {"sgd_sparse_exact", t_sgd_sparse_exact},
    {"adamw_sparse_lazy", t_adamw_sparse_lazy},
    {NULL, NULL},
};

int main(void)
{
    gpp_err_t err;
    gpp_backend_cfg_t cfg = {.kind = GPP_DEVICE_CPU, .cpu_threads = 1};
    s_be = gpp_backend_new(&cfg, &err);
    s_st = s_be ? gpp_stream_new(s_be, &err) : NULL;
    if (!s_st) {
        fprintf(stderr, "test_optim: %s\n", err.msg);
        return 1;
    }
    int rc = gpp_test_run(cases);
    gpp_stream_destroy(&s_st);
    gpp_backend_destroy(&s_be);
    return rc;
}
