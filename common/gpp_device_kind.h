/* gpp_device_kind: the kind of device a job's agents compute on — one enum
 * and one spelling for the config ([job] backend), the kernels' backends,
 * the wire and the command lines (gpp-train, gpp-agent --backend).
 *
 * On the wire (proto Backend) the value is the enum + 1, 0 meaning "not
 * set": proto/gpp_msg.h converts both ways. */
#ifndef GPP_DEVICE_KIND_H
#define GPP_DEVICE_KIND_H

typedef enum {
    GPP_DEVICE_CPU = 0,
    GPP_DEVICE_CUDA = 1, /* gpp_backend_new fails with a message when this gpp was built
                            without CUDA or no usable GPU exists */
    GPP_DEVICE__COUNT
} gpp_device_kind_t;

/* The spellings, indexed by the enum, NULL-terminated (the config's word
 * list): "cpu", "cuda". */
extern const char *const gpp_device_kind_names[GPP_DEVICE__COUNT + 1];
/* The same list for messages. */
#define GPP_DEVICE_KIND_CHOICES "cpu or cuda"

/* k's spelling; k must be one of the enum's values (asserted; "invalid"
 * without assertions). */
const char *gpp_device_kind_name(gpp_device_kind_t k);
/* s's value into *out: 0, or -1 (out untouched) when s is none of them. */
int gpp_device_kind_parse(const char *s, gpp_device_kind_t *out);

#endif
