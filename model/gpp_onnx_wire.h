/* gpp_onnx_wire: bounds the nesting of an ONNX file on the wire, before
 * protobuf-c decodes it.
 *
 * onnx.proto is recursive: AttributeProto.g / .graphs hold GraphProtos whose
 * nodes hold attributes again (If, Loop, Scan), and TypeProto nests through
 * sequence_type, map_type and optional_type. protobuf-c's unpack recurses
 * once per nested message with no limit, so a hostile file of a few MB
 * nesting a million levels would overflow the stack. This pre-scan walks the
 * wire format by the decoder's own descriptors (every message-typed field of
 * the generated onnx.proto, whatever its version), recursing at most
 * GPP_ONNX_WIRE_DEPTH levels itself, and refuses a file that nests deeper,
 * naming the path.
 * A malformed wire (a truncated field, a length past the end, a group) is
 * refused too, as the decoder would. */
#ifndef GPP_ONNX_WIRE_H
#define GPP_ONNX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/gpp_err.h"

/* Deepest message nesting accepted below ModelProto: protobuf's own default
 * recursion limit (C++ io::CodedInputStream, kDefaultRecursionLimit = 100,
 * google/protobuf/io/coded_stream.h), so gpp decodes what the reference
 * decoder decodes. protobuf-c's unpack takes about 0.95 KiB of stack per
 * level (measured: a 1 MiB stack overflows at about 1,100 levels; protobuf-c
 * 1.4.1, Debian 12), so 100 levels need about 100 KiB. */
#define GPP_ONNX_WIRE_DEPTH 100

/* 0 when buf[0, len) is a well-formed ModelProto wire nesting at most
 * GPP_ONNX_WIRE_DEPTH messages deep; -1 + "ORIGIN: ..." (the path to the
 * deepest message, e.g. graph.node[3].attribute[0].g.node[0]..., or the byte
 * offset of the malformed field) otherwise. */
int gpp_onnx_wire_check(const uint8_t *buf, size_t len, const char *origin, gpp_err_t *err);

#endif
