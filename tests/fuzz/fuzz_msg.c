/* fuzz_msg: control-plane frames (gpp_msg_decode), the one decoder of every
 * message the coordinator and the agents accept (every Envelope body type).
 * An accepted message must encode again and decode to the same bytes. */
#include "proto/gpp_msg.h"
#include "tests/fuzz/gpp_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gpp_err_t err = {{0}};
    gpp_msg_t *m = gpp_msg_decode(data, size, &err);
    if (!m) {
        gpp_fuzz_check(err.msg[0] != '\0', "a refusal without a reason");
        return 0;
    }
    (void)gpp_msg_type_name(m->body_case);
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    gpp_fuzz_check(gpp_msg_encode(m, &a, &alen, &err) == 0, "%s", err.msg);
    gpp_msg_t *m2 = gpp_msg_decode(a, alen, &err);
    gpp_fuzz_check(m2 != NULL, "%s", err.msg);
    gpp_fuzz_check(gpp_msg_encode(m2, &b, &blen, &err) == 0, "%s", err.msg);
    gpp_fuzz_check(alen == blen && memcmp(a, b, alen) == 0, "re-encoding changed the bytes");
    free(a);
    free(b);
    gpp_msg_destroy(&m2);
    gpp_msg_destroy(&m);
    return 0;
}
