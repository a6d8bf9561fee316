/* gpp_precision: the matrix-product precision of a job — one enum and one
 * spelling for the config, the kernels, the planner, the wire and the
 * command lines.
 *
 * CUDA only: fp32 computes in fp32; tf32 and bf16 round each product's
 * operands to TF32 or bfloat16 on the tensor cores and accumulate in fp32
 * (weights and optimizer state stay fp32). The CPU backend computes fp32
 * whatever is set. On the wire (proto Precision) the value is the enum + 1,
 * 0 meaning "not set": proto/gpp_msg.h converts both ways. */
#ifndef GPP_PRECISION_H
#define GPP_PRECISION_H

typedef enum {
    GPP_PRECISION_FP32 = 0,
    GPP_PRECISION_TF32 = 1,
    GPP_PRECISION_BF16 = 2,
    GPP_PRECISION__COUNT
} gpp_precision_t;

/* The spellings, indexed by the enum, NULL-terminated (the config's word
 * list): "fp32", "tf32", "bf16". */
extern const char *const gpp_precision_names[GPP_PRECISION__COUNT + 1];
/* The same list for messages. */
#define GPP_PRECISION_CHOICES "fp32, tf32 or bf16"

/* p's spelling; p must be one of the enum's values (asserted; "invalid"
 * without assertions). */
const char *gpp_precision_name(gpp_precision_t p);
/* s's value into *out: 0, or -1 (out untouched) when s is none of them. */
int gpp_precision_parse(const char *s, gpp_precision_t *out);

#endif
