/*
 * onnx_wire.c - a structural check of serialised ONNX bytes before protobuf-c decodes them.
 *
 * Why: protobuf-c unpacks nested messages recursively with no depth limit, and ONNX's schema is
 * recursive (GraphProto -> NodeProto -> AttributeProto -> GraphProto, TypeProto -> Sequence ->
 * TypeProto). A 60 KB file nesting 10,000 TypeProtos overflows the stack inside
 * onnx__type_proto__unpack (verified: SIGSEGV). So the bytes are walked once, iteratively, against
 * the generated descriptors: tags, wire types and lengths must be valid and message nesting at most
 * ONNX_MAX_DEPTH. Values are not decoded here (that is protobuf-c's job); the walk only gives the
 * decoder bytes it can handle and gives the user an offset and a field name when they are broken.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/onnx/onnx.h"

int onnx_sniff(const void *data, size_t size)
{
    const uint8_t *p = data;
    if (!data || size < 2) return 0;
    /* ModelProto fields 1 ir_version (varint, tag 0x08), 2 producer_name (0x12), 3 producer_version
     * (0x1a): every exporter writes one of them first. Each is a control byte that the text form
     * (.pdcir) never starts with, and the .pdc magic is checked before this. */
    return p[0] == 0x08 || p[0] == 0x12 || p[0] == 0x1a;
}

typedef struct wire_frame {
    const ProtobufCMessageDescriptor *desc;
    size_t end;                       /* offset one past the message's last byte */
    const char *field;                /* the field of the parent that holds it (NULL for the root) */
} wire_frame;

/* Reads a varint of at most 10 bytes; 0 on truncation or overlong encoding. */
static int get_varint(const uint8_t *d, size_t end, size_t *pos, uint64_t *v)
{
    uint64_t x = 0;
    for (int i = 0; i < 10; i++) {
        if (*pos >= end) return 0;
        uint8_t b = d[(*pos)++];
        if (i == 9 && b > 1) return 0; /* more than 64 bits */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 1;
        }
    }
    return 0;
}

/* The wire type a (non-packed) field of this type uses. */
static int natural_wire_type(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE: return 1;
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT: return 5;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE: return 2;
    default: return 0;
    }
}

static pdc_status corrupt(const pdc_context *ctx, size_t at, const wire_frame *f, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "ONNX: offset N, in GraphProto (field graph): <what>" */
static pdc_status corrupt(const pdc_context *ctx, size_t at, const wire_frame *f, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (f->field)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "ONNX: offset %zu, in %s (field %s): %s", at, f->desc->short_name,
                         f->field, what);
    return pdc_error(ctx, PDC_ERR_CORRUPT, "ONNX: offset %zu, in %s: %s", at, f->desc->short_name, what);
}

pdc_status onnx_wire_check(const pdc_context *ctx, const uint8_t *data, size_t size)
{
    wire_frame stack[ONNX_MAX_DEPTH + 1];
    int top = 0;
    stack[0] = (wire_frame){&onnx__model_proto__descriptor, size, NULL};
    size_t pos = 0;
    if (size == 0) return pdc_error(ctx, PDC_ERR_CORRUPT, "ONNX: the data is empty");
    for (;;) {
        while (pos == stack[top].end && top > 0) top--;
        if (pos == stack[top].end) return PDC_OK; /* top == 0: the whole model was read */
        const wire_frame *f = &stack[top];
        size_t at = pos;
        uint64_t tag, v;
        if (!get_varint(data, f->end, &pos, &tag))
            return corrupt(ctx, at, f, "truncated or overlong field tag");
        uint64_t number = tag >> 3;
        int wt = (int)(tag & 7);
        if (number == 0 || number > 536870911u)
            return corrupt(ctx, at, f, "invalid field number %" PRIu64, number);
        const ProtobufCFieldDescriptor *fd =
            protobuf_c_message_descriptor_get_field(f->desc, (unsigned)number);
        if (fd) {
            int want = natural_wire_type(fd->type);
            int packed_ok = fd->label == PROTOBUF_C_LABEL_REPEATED && want != 2 && wt == 2;
            if (wt != want && !packed_ok)
                return corrupt(ctx, at, f, "field %" PRIu64 " (%s) has wire type %d, expected %d", number, fd->name, wt,
                               want);
        }
        switch (wt) {
        case 0:
            if (!get_varint(data, f->end, &pos, &v))
                return corrupt(ctx, at, f, "truncated varint value of field %" PRIu64 " (%s)", number,
                               fd ? fd->name : "unknown");
            break;
        case 1:
        case 5: {
            size_t w = wt == 1 ? 8 : 4;
            if (f->end - pos < w)
                return corrupt(ctx, at, f, "truncated fixed-size value of field %" PRIu64 " (%s)", number,
                               fd ? fd->name : "unknown");
            pos += w;
            break;
        }
        case 2: {
            if (!get_varint(data, f->end, &pos, &v))
                return corrupt(ctx, at, f, "truncated length of field %" PRIu64 " (%s)", number,
                               fd ? fd->name : "unknown");
            if (v > f->end - pos)
                return corrupt(ctx, at, f, "field %" PRIu64 " (%s) claims %" PRIu64 " bytes but only %zu remain", number,
                               fd ? fd->name : "unknown", v, f->end - pos);
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (top == ONNX_MAX_DEPTH)
                    return corrupt(ctx, at, f, "messages nest deeper than %d levels", ONNX_MAX_DEPTH);
                stack[top + 1] = (wire_frame){fd->descriptor, pos + (size_t)v, fd->name};
                top++;
            } else {
                pos += (size_t)v;
            }
            break;
        }
        default:
            return corrupt(ctx, at, f, "unsupported wire type %d in field %" PRIu64 " (groups are not used by ONNX)", wt,
                           number);
        }
    }
}
