/* gpp_optim_kind: the optimizer a job trains with — one enum and one
 * spelling for the config ([job] optimizer), the kernels' optimizer steps,
 * checkpoint files (a u32 of this enum), the wire and the command lines.
 *
 * On the wire (proto Optimizer) the value is the enum + 1, 0 meaning "not
 * set": proto/gpp_msg.h converts both ways. */
#ifndef GPP_OPTIM_KIND_H
#define GPP_OPTIM_KIND_H

typedef enum {
    GPP_OPTIM_SGD = 0,   /* with momentum and L2 weight decay, PyTorch semantics */
    GPP_OPTIM_ADAMW = 1, /* decoupled weight decay, bias-corrected */
    GPP_OPTIM__COUNT
} gpp_optim_kind_t;

/* The spellings, indexed by the enum, NULL-terminated (the config's word
 * list): "sgd", "adamw". */
extern const char *const gpp_optim_kind_names[GPP_OPTIM__COUNT + 1];
/* The same list for messages. */
#define GPP_OPTIM_KIND_CHOICES "sgd or adamw"

/* k's spelling, or "unknown" for a value outside the enum (a checkpoint's). */
const char *gpp_optim_kind_name(gpp_optim_kind_t k);
/* s's value into *out: 0, or -1 (out untouched) when s is none of them. */
int gpp_optim_kind_parse(const char *s, gpp_optim_kind_t *out);

#endif
