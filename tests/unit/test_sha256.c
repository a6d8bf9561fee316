/* test_sha256: SHA-256 against the example vectors of FIPS 180-4's
 * companion (NIST CSRC "Examples with intermediate values": "abc", the
 * 448-bit message) plus the empty message and one million 'a' (FIPS 180-2
 * appendix B.3); streaming in every split equals one call. Then the weights
 * digest (gpp_ckpt.h): two identical trainings give the same digest, another
 * seed another one, and the model split into two stages gives the whole
 * model's digest (per-op digests combined in op order). */
#include <stdlib.h>
#include <string.h>

#include "agent/exec/gpp_exec_ckpt.h"
#include "ckpt/gpp_ckpt_set.h"
#include "common/gpp_sha256.h"
#include "tests/gpp_test.h"
#include "tests/gpp_fixtures.h"

static void s_expect(const void *msg, size_t len, const char *want)
{
    unsigned char d[GPP_SHA256_BYTES];
    char hex[GPP_SHA256_HEX];
    gpp_sha256(msg, len, d);
    gpp_sha256_hex(d, hex);
    GPP_EXPECT_MSG(strcmp(hex, want) == 0, "%zu bytes: %s, want %s", len, hex, want);
}

static void t_vectors(void)
{
    s_expect("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    s_expect("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    s_expect(m448, strlen(m448),
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    s_expect(a, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* Every length around the padding boundaries, fed in two pieces split at
 * every point, equals the one-call digest. */
static void t_streaming(void)
{
    unsigned char msg[130], one[32], two[32];
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)(i * 37 + 11);
    int bad = 0;
    for (size_t len = 0; len <= sizeof msg; len++) {
        gpp_sha256(msg, len, one);
        for (size_t cut = 0; cut <= len; cut++) {
            gpp_sha256_t s;
            gpp_sha256_init(&s);
            gpp_sha256_update(&s, msg, cut);
            gpp_sha256_update(&s, msg + cut, len - cut);
            gpp_sha256_final(&s, two);
            bad += memcmp(one, two, 32) != 0;
        }
    }
    GPP_EXPECT_MSG(bad == 0, "%d splits differ", bad);
}

#define DLRM                                                                                       \
    "dlrm:dense_branches=1,sparse_branches=2,dense_in=8,hidden=16,dense_layers=1,rows=50,dim=4,"   \
    "bag=3,top_layers=1"

/* The weights digest of `n` executors holding the model's ops between them. */
static void s_digest(gpp_exec_t **ex, int n, int n_ops, char hex[GPP_SHA256_HEX])
{
    unsigned char(*d)[GPP_SHA256_BYTES] = calloc((size_t)n_ops, sizeof *d), out[32];
    int *has = calloc((size_t)n_ops, sizeof *has);
    gpp_err_t err = {{0}};
    for (int i = 0; i < n; i++)
        GPP_EXPECT_MSG(gpp_exec_ckpt_op_digests(ex[i], d, has, &err) == 0, "%s", err.msg);
    gpp_ckpt_weights_digest(n_ops, (const unsigned char(*)[GPP_SHA256_BYTES])d, has, out);
    gpp_sha256_hex(out, hex);
    free(d);
    free(has);
}

/* Trains the whole model 3 iterations from seed; its digest. */
static void s_trained(uint64_t seed, char hex[GPP_SHA256_HEX])
{
    gpp_fixture_exec_t f;
    hex[0] = '\0';
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
        return;
    gpp_err_t err = {{0}};
    gpp_exec_cfg_t c = {.seed = seed, .batch = 8};
    c.optim = (gpp_optim_hp_t){.kind = GPP_OPTIM_SGD, .lr = 0.05f, .momentum = 0.9f};
    gpp_exec_t *ex = gpp_exec_new(f.g, f.g->n_ops, f.all, f.be, f.data, &c, &err);
    GPP_EXPECT_MSG(ex, "%s", err.msg);
    for (int it = 0; ex && it < 3; it++) {
        GPP_EXPECT(gpp_exec_begin(ex, 0, it * 8, 8, &err) == 0 &&
                   gpp_exec_forward(ex, 0, &err) == 0 && gpp_exec_backward(ex, 0, &err) == 0 &&
                   gpp_exec_step(ex, &err) == 0);
    }
    if (ex)
        s_digest(&ex, 1, f.g->n_ops, hex);
    gpp_exec_destroy(&ex);
    gpp_fixture_exec_close(&f);
}

static void t_weights_digest(void)
{
    char a[GPP_SHA256_HEX], b[GPP_SHA256_HEX], c[GPP_SHA256_HEX];
    s_trained(5, a);
    s_trained(5, b);
    s_trained(6, c);
    printf("  seed 5: %s\n  seed 5: %s\n  seed 6: %s\n", a, b, c);
    GPP_EXPECT(a[0] && strcmp(a, b) == 0);
    GPP_EXPECT(strcmp(a, c) != 0);
}

/* The same initial weights held by one executor or split over two stages. */
static void t_stages_combine(void)
{
    gpp_fixture_exec_t f;
    if (gpp_fixture_exec_open(&f, DLRM, 3) < 0)
        return;
    gpp_err_t err = {{0}};
    gpp_exec_cfg_t c = {.seed = 9, .batch = 8};
    c.optim = (gpp_optim_hp_t){.kind = GPP_OPTIM_SGD, .lr = 0.05f};
    int half = f.g->n_ops / 2;
    gpp_exec_t *whole = gpp_exec_new(f.g, f.g->n_ops, f.all, f.be, f.data, &c, &err);
    /* the second stage listed first: digests go by op, not by stage */
    gpp_exec_t *parts[2] = {
        gpp_exec_new(f.g, f.g->n_ops - half, f.all + half, f.be, f.data, &c, &err),
        gpp_exec_new(f.g, half, f.all, f.be, f.data, &c, &err)};
    GPP_EXPECT_MSG(whole && parts[0] && parts[1], "%s", err.msg);
    if (whole && parts[0] && parts[1]) {
        char a[GPP_SHA256_HEX], b[GPP_SHA256_HEX];
        s_digest(&whole, 1, f.g->n_ops, a);
        s_digest(parts, 2, f.g->n_ops, b);
        GPP_EXPECT_MSG(strcmp(a, b) == 0, "whole %s, two stages %s", a, b);
    }
    gpp_exec_destroy(&whole);
    gpp_exec_destroy(&parts[0]);
    gpp_exec_destroy(&parts[1]);
    gpp_fixture_exec_close(&f);
}

static const gpp_test_case_t cases[] = {{"vectors", t_vectors},
                                        {"streaming", t_streaming},
                                        {"weights_digest", t_weights_digest},
                                        {"stages_combine", t_stages_combine},
                                        {NULL, NULL}};

int main(void)
{
    return gpp_test_run(cases);
}
