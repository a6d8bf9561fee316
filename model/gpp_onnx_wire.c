/* gpp_onnx_wire: the nesting bound of an ONNX file (see gpp_onnx_wire.h).
 * Protobuf's wire format is a sequence of (key, value) fields, the key a
 * varint field_number << 3 | wire_type; a nested message is a
 * length-delimited field (wire type 2) whose bytes are again such a
 * sequence. The descriptor protoc-c generated for the message says which
 * field numbers are messages; everything else is skipped by its wire type,
 * as protobuf-c itself does with unknown fields. */
#include "model/gpp_onnx_wire.h"

#include <stdio.h>
#include <string.h>

#include "model/onnx.pb-c.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

typedef struct {
    const uint8_t *buf;
    /* on refusal: the field entered at each depth (0 = ModelProto's field) */
    const ProtobufCFieldDescriptor *field[GPP_ONNX_WIRE_DEPTH + 1];
    size_t index[GPP_ONNX_WIRE_DEPTH + 1]; /* its occurrence in the parent (repeated) */
    int deepest;                           /* depth of the refused field; -1: a bad wire */
    size_t bad_at;                         /* a bad wire: the field's byte offset */
} wire_t;

/* A varint at buf[*at, end) (at most 10 bytes) into *v: 0, or -1. */
static int s_varint(const uint8_t *buf, size_t end, size_t *at, uint64_t *v)
{
    *v = 0;
    for (int k = 0; k < 10 && *at < end; k++) {
        uint8_t b = buf[(*at)++];
        *v |= (uint64_t)(b & 0x7f) << (7 * k);
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* The field whose key starts at buf[*at, end): its number and wire type,
 * and for wire type 2 its payload [*pay, *at) after the call; *at moves past
 * the field. 0, or -1 (malformed, or a group, which protobuf-c refuses). */
static int s_field(const uint8_t *buf, size_t end, size_t *at, uint64_t *num, int *wt, size_t *pay)
{
    uint64_t key, n;
    if (s_varint(buf, end, at, &key) < 0 || (key >> 3) == 0)
        return -1;
    *num = key >> 3, *wt = (int)(key & 7);
    switch (*wt) {
    case WT_VARINT:
        return s_varint(buf, end, at, &n);
    case WT_I64:
    case WT_I32: {
        size_t w = *wt == WT_I64 ? 8 : 4;
        if (end - *at < w)
            return -1;
        *at += w;
        return 0;
    }
    case WT_LEN:
        if (s_varint(buf, end, at, &n) < 0 || n > end - *at)
            return -1;
        *pay = *at;
        *at += (size_t)n;
        return 0;
    default:
        return -1;
    }
}

/* The occurrences of field `num` in the message at buf[start, until) (the
 * index of the one at `until`; computed on refusal only). */
static size_t s_count(const uint8_t *buf, size_t start, size_t until, uint64_t num)
{
    size_t at = start, n = 0, pay;
    uint64_t f;
    int wt;
    while (at < until && s_field(buf, until, &at, &f, &wt, &pay) == 0)
        n += f == num;
    return n;
}

/* Walks the message of type d in buf[start, end), `depth` messages below
 * the root: 0, or -1 with w's path filled from `depth` down. */
static int s_walk(wire_t *w, const ProtobufCMessageDescriptor *d, size_t start, size_t end,
                  int depth)
{
    size_t at = start;
    while (at < end) {
        size_t key_at = at, pay = 0;
        uint64_t num;
        int wt;
        if (s_field(w->buf, end, &at, &num, &wt, &pay) < 0) {
            w->deepest = -1, w->bad_at = key_at;
            return -1;
        }
        const ProtobufCFieldDescriptor *f =
            wt == WT_LEN && num <= UINT32_MAX
                ? protobuf_c_message_descriptor_get_field(d, (unsigned)num)
                : NULL;
        if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        if (depth == GPP_ONNX_WIRE_DEPTH) /* entering it would be one level too deep */
            w->deepest = depth;
        else if (s_walk(w, f->descriptor, pay, at, depth + 1) == 0)
            continue;
        if (w->deepest >= 0) {
            w->field[depth] = f;
            w->index[depth] = s_count(w->buf, start, key_at, num);
        }
        return -1;
    }
    return 0;
}

/* "graph.node[3].attribute[0].g" for depths [0, n), the middle elided to
 * fit out[cap]. */
static void s_path(const wire_t *w, int n, char *out, size_t cap)
{
    size_t at = 0;
    int tail = n > 3 ? n - 3 : n; /* the last components are always shown */
    out[0] = 0;
    for (int k = 0; k < n && at < cap; k++) {
        int r;
        if (k < tail && at > cap / 2) { /* elide up to the tail */
            r = snprintf(out + at, cap - at, ".(%d more)", tail - k);
            k = tail - 1;
        } else if (w->field[k]->label == PROTOBUF_C_LABEL_REPEATED)
            r = snprintf(out + at, cap - at, "%s%s[%zu]", k ? "." : "", w->field[k]->name,
                         w->index[k]);
        else
            r = snprintf(out + at, cap - at, "%s%s", k ? "." : "", w->field[k]->name);
        at += r > 0 ? (size_t)r : 0;
    }
}

int gpp_onnx_wire_check(const uint8_t *buf, size_t len, const char *origin, gpp_err_t *err)
{
    wire_t w = {.buf = buf};
    if (s_walk(&w, &onnx__model_proto__descriptor, 0, len, 0) == 0)
        return 0;
    if (w.deepest < 0)
        return gpp_err_set(err,
                           "%s: not a valid ONNX file: malformed protobuf field at byte %zu "
                           "(truncated or corrupt; re-export it)",
                           origin, w.bad_at);
    char path[256];
    s_path(&w, w.deepest + 1, path, sizeof path);
    return gpp_err_set(err,
                       "%s: %s: messages nested more than %d deep (sub-graphs within "
                       "sub-graphs, or types within types); refused before decoding. gpp "
                       "imports flat graphs: export without If/Loop/Scan",
                       origin, path, GPP_ONNX_WIRE_DEPTH);
}
