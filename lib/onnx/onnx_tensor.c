/*
 * onnx_tensor.c - ONNX tensors and attributes: TensorProto -> host constant for every numeric
 * element type (raw_data little-endian, or the typed fields float_data, int32_data, int64_data,
 * double_data, uint64_data), with sizes checked against the shape before anything is allocated;
 * and typed access to node attributes.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/fileio.h"
#include "lib/onnx/onnx.h"

/* ------------------------------------------------------------------ element types */

int onnx_dtype_is_float(int32_t dt)
{
    return dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || dt == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
           dt == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 || dt == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
}

int onnx_dtype_is_int(int32_t dt)
{
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 1;
    default: return 0;
    }
}

const char *onnx_dtype_name(int32_t dt)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",  "INT8",      "UINT16",     "INT16",
                                        "INT32",     "INT64",  "STRING", "BOOL",      "FLOAT16",    "DOUBLE",
                                        "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
    return dt >= 0 && (size_t)dt < sizeof names / sizeof names[0] ? names[dt] : "unknown";
}

/* Bytes per element in raw_data; 0 for types pdc does not read. */
static size_t raw_size(int32_t dt)
{
    switch (dt) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return 1;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return 2;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32: return 4;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: return 8;
    default: return 0;
    }
}

static float half_to_float(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);                       /* zero and subnormals */
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man | 0x400), exp - 25);
    return sign ? -v : v;
}

static float bfloat_to_float(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* ------------------------------------------------------------------ host constants */

pdc_status onnx_const_init(const pdc_context *ctx, onnx_const *c, int32_t dtype, int rank, const int64_t *dims,
                           size_t limit)
{
    memset(c, 0, sizeof *c);
    if (!onnx_dtype_is_float(dtype) && !onnx_dtype_is_int(dtype))
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "element type %s is not supported", onnx_dtype_name(dtype));
    if (rank < 0 || rank > PDC_MAX_RANK)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "rank %d exceeds %d", rank, PDC_MAX_RANK);
    size_t n = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0 || dims[i] > IR_DIM_MAX)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "dim %d is %" PRId64 " (expected 0..%d)", i, dims[i], IR_DIM_MAX);
        if (pdc_mul_overflow(n, (size_t)dims[i], &n))
            return pdc_error(ctx, PDC_ERR_OVERFLOW, "element count overflows");
    }
    if (limit && n > limit)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "the result would have %zu elements (more than %zu)", n, limit);
    c->dtype = dtype;
    c->rank = rank;
    for (int i = 0; i < rank; i++) c->dims[i] = dims[i];
    c->n = n;
    if (onnx_dtype_is_float(dtype)) c->f = pdc_calloc(ctx, n ? n : 1, sizeof *c->f);
    else c->i = pdc_calloc(ctx, n ? n : 1, sizeof *c->i);
    if (!c->f && !c->i) return PDC_ERR_OUT_OF_MEMORY;
    return PDC_OK;
}

void onnx_const_free(onnx_const *c)
{
    if (!c->borrowed) pdc_free(c->f);
    pdc_free(c->i);
    memset(c, 0, sizeof *c);
}

pdc_status onnx_const_copy(const pdc_context *ctx, onnx_const *dst, const onnx_const *src)
{
    pdc_status st = onnx_const_init(ctx, dst, src->dtype, src->rank, src->dims, 0);
    if (st) return st;
    if (src->n && dst->f) memcpy(dst->f, src->f, src->n * sizeof *dst->f);
    if (src->n && dst->i) memcpy(dst->i, src->i, src->n * sizeof *dst->i);
    return PDC_OK;
}

double onnx_const_get_f(const onnx_const *c, size_t k) { return c->f ? (double)c->f[k] : (double)c->i[k]; }

int64_t onnx_const_get_i(const onnx_const *c, size_t k)
{
    if (c->i) return c->i[k];
    double v = (double)c->f[k];
    if (!(v >= -9.2e18 && v <= 9.2e18)) return v > 0 ? INT64_MAX : INT64_MIN; /* NaN, inf: saturate */
    return (int64_t)v;
}

const char *onnx_quote(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    if (!s) s = "";
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < cap; p++) {
        if (o >= 100) {
            snprintf(buf + o, cap - o, "...");
            return buf;
        }
        if (*p < 0x20 || *p == 0x7f) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", *p);
        else buf[o++] = (char)*p;
    }
    buf[o < cap ? o : cap - 1] = '\0';
    return buf;
}

/* ------------------------------------------------------------------ TensorProto */

static const char *external_location(const Onnx__TensorProto *t)
{
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (e && e->key && !strcmp(e->key, "location") && e->value) return e->value;
    }
    return "?";
}

/* Checks that a typed field holds n values. */
static pdc_status check_count(const pdc_context *ctx, const char *what, const char *field, size_t have, size_t n,
                              int32_t dt)
{
    if (have == n) return PDC_OK;
    if (have == 0)
        return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "%s has no data (expected %zu %s values in raw_data or %s)", what, n,
                         onnx_dtype_name(dt), field);
    return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "%s has %zu values in %s, but its shape needs %zu", what, have, field, n);
}

pdc_status onnx_tensor_decode(const pdc_context *ctx, const Onnx__TensorProto *t, const char *what, onnx_const *out)
{
    memset(out, 0, sizeof *out);
    char q[160];
    if (t->n_external_data ||
        (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL))
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED,
                         "%s keeps its data in an external file ('%s'); pdc reads self-contained .onnx files only "
                         "(save with onnx.save_model(model, path, save_as_external_data=False))",
                         what, onnx_quote(external_location(t), q, sizeof q));
    if (t->segment) return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "%s is segmented (TensorProto.segment)", what);
    int32_t dt = t->has_data_type ? t->data_type : 0;
    if (!onnx_dtype_is_float(dt) && !onnx_dtype_is_int(dt))
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "%s has element type %s (%d); pdc reads numeric tensors only", what,
                         onnx_dtype_name(dt), (int)dt);
    if (t->n_dims > PDC_MAX_RANK)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "%s has rank %zu (at most %d)", what, t->n_dims, PDC_MAX_RANK);
    int64_t dims[PDC_MAX_RANK];
    size_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        dims[i] = t->dims[i];
        if (dims[i] < 0 || dims[i] > IR_DIM_MAX)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "%s: dim %zu is %" PRId64 " (expected 0..%d)", what, i, dims[i],
                             IR_DIM_MAX);
        if (pdc_mul_overflow(n, (size_t)dims[i], &n))
            return pdc_error(ctx, PDC_ERR_OVERFLOW, "%s: element count overflows", what);
    }
    /* Sizes first, so that a lying shape never causes a large allocation. */
    size_t esize = raw_size(dt), bytes;
    int raw = t->has_raw_data && t->raw_data.len > 0;
    pdc_status st = PDC_OK;
    if (raw) {
        if (pdc_mul_overflow(n, esize, &bytes) || bytes != t->raw_data.len)
            return pdc_error(ctx, PDC_ERR_INVALID_MODEL, "%s: raw_data has %zu bytes, but its shape needs %zu (%zu x %s)",
                             what, t->raw_data.len, n * esize, n, onnx_dtype_name(dt));
    } else if (n > 0) {
        switch (dt) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: st = check_count(ctx, what, "float_data", t->n_float_data, n, dt); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: st = check_count(ctx, what, "double_data", t->n_double_data, n, dt); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: st = check_count(ctx, what, "int64_data", t->n_int64_data, n, dt); break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64: st = check_count(ctx, what, "uint64_data", t->n_uint64_data, n, dt); break;
        default: st = check_count(ctx, what, "int32_data", t->n_int32_data, n, dt); break;
        }
        if (st) return st;
    }
    st = onnx_const_init(ctx, out, dt, (int)t->n_dims, dims, 0);
    if (st) {
        pdc_error_prefix(ctx, "%s", what);
        return st;
    }
    if (n == 0) return PDC_OK;
    const uint8_t *r = t->raw_data.data;
    for (size_t k = 0; k < n; k++) {
        double fv = 0;
        int64_t iv = 0;
        uint64_t u = 0;
        if (raw) {
            const uint8_t *p = r + k * esize;
            switch (esize) {
            case 1: u = p[0]; break;
            case 2: u = (uint64_t)p[0] | (uint64_t)p[1] << 8; break;
            case 4: u = pdc_load_u32le(p); break;
            default: u = pdc_load_u64le(p); break;
            }
        }
        switch (dt) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
            if (raw) {
                uint32_t b = (uint32_t)u;
                float f;
                memcpy(&f, &b, sizeof f);
                fv = f;
            } else {
                fv = t->float_data[k];
            }
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
            if (raw) memcpy(&fv, &u, sizeof fv);
            else fv = t->double_data[k];
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
            fv = half_to_float((uint16_t)(raw ? u : (uint64_t)(uint32_t)t->int32_data[k]));
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
            fv = bfloat_to_float((uint16_t)(raw ? u : (uint64_t)(uint32_t)t->int32_data[k]));
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: iv = raw ? (int64_t)u : t->int64_data[k]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
            if (!raw) u = t->uint64_data[k];
            if (u > (uint64_t)INT64_MAX) {
                onnx_const_free(out);
                return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "%s: element %zu (%" PRIu64 ") does not fit in int64", what, k,
                                 u);
            }
            iv = (int64_t)u;
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: iv = raw ? (int64_t)(int32_t)(uint32_t)u : t->int32_data[k]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT16: iv = raw ? (int64_t)(int16_t)(uint16_t)u : t->int32_data[k]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT8: iv = raw ? (int64_t)(int8_t)(uint8_t)u : t->int32_data[k]; break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: iv = raw ? (u != 0) : (t->int32_data[k] != 0); break;
        default: iv = raw ? (int64_t)u : t->int32_data[k]; break; /* UINT8, UINT16 */
        }
        if (out->f) out->f[k] = (float)fv;
        else out->i[k] = iv;
    }
    return PDC_OK;
}

/* ------------------------------------------------------------------ attributes */

static int attr_type(const Onnx__AttributeProto *a)
{
    if (a->has_type) return (int)a->type;
    /* IR version 1 files carry no type: infer it from the field in use */
    if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    if (a->n_ints) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static const char *attr_type_name(int t)
{
    switch (t) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: return "a float";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: return "an int";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: return "a string";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: return "a tensor";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH: return "a graph";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS: return "a list of floats";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS: return "a list of ints";
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS: return "a list of strings";
    default: return "of another type";
    }
}

const Onnx__AttributeProto *onnx_attr_find(const onnx_node *n, const char *name)
{
    for (size_t i = 0; i < n->proto->n_attribute; i++) {
        const Onnx__AttributeProto *a = n->proto->attribute[i];
        if (a && a->name && !strcmp(a->name, name)) return a;
    }
    return NULL;
}

static pdc_status wrong_type(const onnx_importer *imp, const onnx_node *n, const char *name, const char *want, int got)
{
    return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute '%s' must be %s, not %s", name, want,
                           attr_type_name(got));
}

pdc_status onnx_attr_int(const onnx_importer *imp, const onnx_node *n, const char *name, int64_t dflt, int64_t *out)
{
    const Onnx__AttributeProto *a = onnx_attr_find(n, name);
    *out = dflt;
    if (!a) return PDC_OK;
    int t = attr_type(a);
    if (t != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) return wrong_type(imp, n, name, "an int", t);
    *out = a->i;
    return PDC_OK;
}

pdc_status onnx_attr_float(const onnx_importer *imp, const onnx_node *n, const char *name, float dflt, float *out)
{
    const Onnx__AttributeProto *a = onnx_attr_find(n, name);
    *out = dflt;
    if (!a) return PDC_OK;
    int t = attr_type(a);
    if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT) *out = a->f;
    else if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) *out = (float)a->i; /* some writers do this */
    else return wrong_type(imp, n, name, "a float", t);
    if (isnan(*out)) return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute '%s' is NaN", name);
    return PDC_OK;
}

pdc_status onnx_attr_ints(const onnx_importer *imp, const onnx_node *n, const char *name, size_t *count,
                          const int64_t **v, int *present)
{
    const Onnx__AttributeProto *a = onnx_attr_find(n, name);
    *count = 0;
    *v = NULL;
    if (present) *present = a != NULL;
    if (!a) return PDC_OK;
    int t = attr_type(a);
    if (t != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) return wrong_type(imp, n, name, "a list of ints", t);
    *count = a->n_ints;
    *v = a->ints;
    return PDC_OK;
}

pdc_status onnx_attr_string(const onnx_importer *imp, const onnx_node *n, const char *name, const char *dflt,
                            char *buf, size_t cap)
{
    const Onnx__AttributeProto *a = onnx_attr_find(n, name);
    if (!a) {
        snprintf(buf, cap, "%s", dflt);
        return PDC_OK;
    }
    int t = attr_type(a);
    if (t != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) return wrong_type(imp, n, name, "a string", t);
    if (a->s.len >= cap || (a->s.len && memchr(a->s.data, 0, a->s.len)))
        return onnx_node_error(imp, n, PDC_ERR_INVALID_MODEL, "attribute '%s' is not a known value (%zu bytes)", name,
                               a->s.len);
    if (a->s.len) memcpy(buf, a->s.data, a->s.len);
    buf[a->s.len] = '\0';
    return PDC_OK;
}
