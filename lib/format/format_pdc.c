/*
 * format_pdc.c - the native binary model format, ".pdc".
 *
 * Layout, versions 1 and 2 (2 = 1 plus sparsity records 4, bcr, and 5, a pattern with a 3-D window or
 * kernel groups; a file is version 2 only when a constant needs one of them). All integers are
 * little-endian; f32 is the IEEE-754 bit pattern stored as a u32; str is a u32 byte length followed by
 * that many bytes (UTF-8, no NUL inside, no terminator); a tensor reference is an i32 index into the
 * tensor table (0-based), -1 meaning "absent".
 *
 *   offset  size  field
 *   0       8     magic "PDCMODEL"
 *   8       4     u32 format version (1, or 2 when a sparsity record 4 or 5 is present)
 *   12      4     u32 flags (0; files with unknown flags are refused)
 *   16      8     u64 payload length P
 *   24      P     payload (below)
 *   24+P    4     u32 CRC-32 (IEEE 802.3, as zlib's crc32) of bytes [0, 24+P): header and payload
 *   The file is exactly 28 + P bytes.
 *
 * Payload:
 *   str         model name
 *   u32         number of tensors T, then T tensor records:
 *     str         name
 *     u8          kind: 0 graph input, 1 constant, 2 activation (produced by a layer)
 *     u8          rank (0..8; 255 = unknown, for activations computed from symbolic inputs)
 *     i64 x rank  dims (-1 = symbolic, inputs only; none when the rank is unknown)
 *     -- constants only --
 *     u64         element count N (must equal the product of dims)
 *     f32 x N     data, row-major
 *     u8          sparsity kind: 0 none, 1 pattern, 2 block, 3 unstructured, 4 bcr (version 2), 5 pattern
 *                 with a 3-D window or kernel groups (version 2)
 *       pattern:      i64 kh, i64 kw, u64 n_patterns, u64 x n_patterns bitmasks over the kh*kw window,
 *                     u64 n_kernels, i32 x n_kernels pattern ids (-1 = kernel pruned)
 *       5:            i64 kd (0: 2-D window), i64 kh, i64 kw, i64 go, i64 gc (kernel group, 0x0: none),
 *                     then as pattern from u64 n_patterns on
 *       block:        i64 bh, i64 bw, u64 n_blocks, u8 x n_blocks mask (nonzero = block kept)
 *       unstructured: u64 n, u8 x n mask (nonzero = element kept)
 *       bcr:          i64 bh, i64 bw, u64 n_blocks, u8 x n_blocks*(bh+bw): per block its bh row flags, then its
 *                     bw column flags (nonzero = kept)
 *   u32         number of layers L, then L layer records (in topological order):
 *     str         name
 *     str         op name ("conv", "fc", "lstm", ...; a name, not a number, so renumbering ops
 *                 in ops.def can never change what an existing file means)
 *     u32 n, i32 x n   inputs (tensor references; -1 = absent optional input)
 *     u32 n, i32 x n   outputs (tensor references; -1 = absent optional output)
 *     u32         number of attributes, then per attribute:
 *       str         name
 *       u8          type: 0 int, 1 ints, 2 float, 3 string
 *       value       int: i64 | ints: u32 n, i64 x n | float: f32 | string: str
 *   u32 n, i32 x n   graph inputs (tensor references, in order)
 *   u32 n, i32 x n   graph outputs (tensor references, in order)
 *
 * Activation dims are informative: loading re-infers them and refuses a file whose stored dims
 * disagree. Loading rebuilds the model through the IR construction API (ir/model.c), so a file
 * can only ever produce a model the builder would accept. The writer emits tensors in the model's
 * order; for models made by the builder, save -> load -> save is byte-identical.
 *
 * Compatibility: a reader refuses versions newer than its own; a new version is needed for any
 * change to the payload, and older versions stay readable.
 */
#include "lib/format/format_pdc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/core/crc32.h"

/* Largest block dimension accepted from a file: keeps the block-count arithmetic in 64 bits. */
#define PDC_FORMAT_MAX_BLOCK_DIM ((int64_t)1 << 40)
/* Rank byte of an activation whose shape is unknown (ir_tensor.rank == -1). */
#define PDC_FORMAT_RANK_UNKNOWN 255

int pdc_format_is_pdc(const void *data, size_t size)
{
    return data && size >= PDC_FORMAT_MAGIC_SIZE && memcmp(data, PDC_FORMAT_MAGIC, PDC_FORMAT_MAGIC_SIZE) == 0;
}

/* Elements of a concrete shape; 0 on overflow or a dim < 1 (rank 0 -> 1 element). */
static int shape_numel(int rank, const int64_t *dims, size_t *n)
{
    size_t p = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 1 || (uint64_t)dims[i] > SIZE_MAX || pdc_mul_overflow(p, (size_t)dims[i], &p)) return 0;
    }
    *n = p;
    return 1;
}

/* ================================================================== writing */

pdc_status pdc_format_put_sparsity(pdc_buf *b, const ir_sparsity *s, const char *tensor)
{
    const pdc_context *ctx = b->ctx;
    const int v2 = pdc_format_sparsity_pattern_v2(s);
    pdc_buf_put_u8(b, v2 ? PDC_FORMAT_SPARSITY_PATTERN_V2 : (uint8_t)s->kind);
    switch (s->kind) {
    case IR_SPARSITY_NONE: break;
    case IR_SPARSITY_PATTERN:
        if ((s->n_patterns && !s->patterns) || (s->n_kernels && !s->kernel_pattern))
            return pdc_error(ctx, PDC_ERR_INTERNAL, "save: constant '%s': pattern arrays missing", tensor);
        if (v2) pdc_buf_put_i64(b, s->kd);
        pdc_buf_put_i64(b, s->kh);
        pdc_buf_put_i64(b, s->kw);
        if (v2) {
            pdc_buf_put_i64(b, s->go);
            pdc_buf_put_i64(b, s->gc);
        }
        pdc_buf_put_u64(b, s->n_patterns);
        for (size_t k = 0; k < s->n_patterns; k++) pdc_buf_put_u64(b, s->patterns[k]);
        pdc_buf_put_u64(b, s->n_kernels);
        for (size_t k = 0; k < s->n_kernels; k++) pdc_buf_put_i32(b, s->kernel_pattern[k]);
        break;
    case IR_SPARSITY_BLOCK:
        if (s->n_blocks && !s->block_mask)
            return pdc_error(ctx, PDC_ERR_INTERNAL, "save: constant '%s': block mask missing", tensor);
        pdc_buf_put_i64(b, s->bh);
        pdc_buf_put_i64(b, s->bw);
        pdc_buf_put_u64(b, s->n_blocks);
        pdc_buf_put_bytes(b, s->block_mask, s->n_blocks);
        break;
    case IR_SPARSITY_UNSTRUCTURED:
        if (s->n_mask && !s->mask)
            return pdc_error(ctx, PDC_ERR_INTERNAL, "save: constant '%s': mask missing", tensor);
        pdc_buf_put_u64(b, s->n_mask);
        pdc_buf_put_bytes(b, s->mask, s->n_mask);
        break;
    case IR_SPARSITY_BCR:
        if (s->n_blocks && !s->bcr_keep)
            return pdc_error(ctx, PDC_ERR_INTERNAL, "save: constant '%s': BCR flags missing", tensor);
        pdc_buf_put_i64(b, s->bh);
        pdc_buf_put_i64(b, s->bw);
        pdc_buf_put_u64(b, s->n_blocks);
        pdc_buf_put_bytes(b, s->bcr_keep, ir_sparsity_bcr_len(s));
        break;
    default:
        return pdc_error(ctx, PDC_ERR_INTERNAL, "save: constant '%s' has sparsity kind %d", tensor, (int)s->kind);
    }
    return PDC_OK;
}

static pdc_status save_tensor(const ir_model *m, size_t i, pdc_buf *b)
{
    const pdc_context *ctx = b->ctx;
    const ir_tensor *t = &m->tensors[i];
    int unknown = t->rank == -1 && t->kind == IR_TENSOR_ACT;
    if ((!unknown && (t->rank < 0 || t->rank > PDC_MAX_RANK)) || (unsigned)t->kind > IR_TENSOR_ACT)
        return pdc_error(ctx, PDC_ERR_INTERNAL, "save: tensor '%s' has rank %d, kind %d", t->name, t->rank, (int)t->kind);
    pdc_buf_put_string(b, t->name);
    pdc_buf_put_u8(b, (uint8_t)t->kind);
    pdc_buf_put_u8(b, unknown ? PDC_FORMAT_RANK_UNKNOWN : (uint8_t)t->rank);
    for (int d = 0; d < t->rank; d++) pdc_buf_put_i64(b, t->dims[d]);
    if (t->kind != IR_TENSOR_CONST) return PDC_OK;

    size_t n;
    if (!shape_numel(t->rank, t->dims, &n) || n > SIZE_MAX / 4)
        return pdc_error(ctx, PDC_ERR_INTERNAL, "save: constant '%s' has an invalid shape", t->name);
    if (!t->data && n) return pdc_error(ctx, PDC_ERR_INTERNAL, "save: constant '%s' has no data", t->name);
    pdc_buf_put_u64(b, (uint64_t)n);
    uint8_t *p = pdc_buf_append(b, n * 4);
    if (p) {
        for (size_t k = 0; k < n; k++) {
            uint32_t bits;
            memcpy(&bits, &t->data[k], 4);
            pdc_store_u32le(p + 4 * k, bits);
        }
    }

    return pdc_format_put_sparsity(b, &t->sparsity, t->name);
}

static pdc_status put_refs(const ir_model *m, pdc_buf *b, size_t n, const int *refs, const char *what,
                           const char *owner)
{
    if (n > UINT32_MAX) return pdc_error(b->ctx, PDC_ERR_OVERFLOW, "save: too many %s", what);
    pdc_buf_put_u32(b, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        if (refs[k] < -1 || (refs[k] >= 0 && (size_t)refs[k] >= m->n_tensors))
            return pdc_error(b->ctx, PDC_ERR_INTERNAL, "save: %s%s%s %zu refers to tensor %d of %zu", owner,
                             *owner ? " " : "", what, k, refs[k], m->n_tensors);
        pdc_buf_put_i32(b, (int32_t)refs[k]);
    }
    return PDC_OK;
}

pdc_status pdc_format_put_attrs(pdc_buf *b, const ir_attrs *attrs, const char *layer)
{
    if (attrs->n > UINT32_MAX) return pdc_error(b->ctx, PDC_ERR_OVERFLOW, "save: too many attributes");
    pdc_buf_put_u32(b, (uint32_t)attrs->n);
    for (size_t k = 0; k < attrs->n; k++) {
        const ir_attr *a = &attrs->items[k];
        pdc_buf_put_string(b, a->name);
        pdc_buf_put_u8(b, (uint8_t)a->type);
        switch (a->type) {
        case IR_ATTR_INT: pdc_buf_put_i64(b, a->i); break;
        case IR_ATTR_INTS:
            if (a->n > UINT32_MAX) return pdc_error(b->ctx, PDC_ERR_OVERFLOW, "save: attribute list too long");
            pdc_buf_put_u32(b, (uint32_t)a->n);
            for (size_t j = 0; j < a->n; j++) pdc_buf_put_i64(b, a->ints[j]);
            break;
        case IR_ATTR_FLOAT: pdc_buf_put_f32(b, a->f); break;
        case IR_ATTR_STRING: pdc_buf_put_string(b, a->s); break;
        default:
            return pdc_error(b->ctx, PDC_ERR_INTERNAL, "save: layer '%s': attribute '%s' has type %d", layer, a->name,
                             (int)a->type);
        }
    }
    return PDC_OK;
}

static pdc_status save_layer(const ir_model *m, size_t li, pdc_buf *b)
{
    const ir_layer *l = &m->layers[li];
    const ir_op_info *info = ir_op_get_info(l->op);
    if (!info) return pdc_error(b->ctx, PDC_ERR_INTERNAL, "save: layer '%s' has op id %d", l->name, (int)l->op);
    pdc_buf_put_string(b, l->name);
    pdc_buf_put_string(b, info->name);
    char owner[128];
    snprintf(owner, sizeof owner, "layer '%.100s'", l->name);
    pdc_status st = put_refs(m, b, l->n_inputs, l->inputs, "input", owner);
    if (!st) st = put_refs(m, b, l->n_outputs, l->outputs, "output", owner);
    if (st) return st;
    return pdc_format_put_attrs(b, &l->attrs, l->name);
}

pdc_status pdc_format_save(const ir_model *m, pdc_buf *out)
{
    if (!out) return pdc_error(m ? m->ctx : NULL, PDC_ERR_INVALID_ARG, "pdc_format_save: out is NULL");
    if (!m) return pdc_error(out->ctx, PDC_ERR_INVALID_ARG, "pdc_format_save: model is NULL");
    if (!out->ctx) out->ctx = m->ctx;
    if (out->failed) return pdc_buf_status(out);
    if (m->n_tensors > INT32_MAX || m->n_layers > UINT32_MAX)
        return pdc_error(out->ctx, PDC_ERR_OVERFLOW, "save: model has too many tensors or layers");

    size_t start = out->len;
    pdc_buf_put_bytes(out, PDC_FORMAT_MAGIC, PDC_FORMAT_MAGIC_SIZE);
    uint32_t version = PDC_FORMAT_VERSION_V1;
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].kind == IR_TENSOR_CONST && pdc_format_sparsity_v2(&m->tensors[i].sparsity))
            version = PDC_FORMAT_VERSION;
    pdc_buf_put_u32(out, version);
    pdc_buf_put_u32(out, 0); /* flags */
    pdc_buf_put_u64(out, 0); /* payload length, patched below */
    size_t payload = out->len;

    pdc_status st = PDC_OK;
    pdc_buf_put_string(out, m->name);
    pdc_buf_put_u32(out, (uint32_t)m->n_tensors);
    for (size_t i = 0; i < m->n_tensors && !st; i++) st = save_tensor(m, i, out);
    if (!st) pdc_buf_put_u32(out, (uint32_t)m->n_layers);
    for (size_t i = 0; i < m->n_layers && !st; i++) st = save_layer(m, i, out);
    if (!st) st = put_refs(m, out, m->n_inputs, m->inputs, "graph input", "");
    if (!st) st = put_refs(m, out, m->n_outputs, m->outputs, "graph output", "");
    if (st) return st;
    if ((st = pdc_buf_status(out))) return st;

    pdc_buf_patch_u64(out, payload - 8, (uint64_t)(out->len - payload));
    uint32_t crc = pdc_crc32(0, out->data + start, out->len - start);
    pdc_buf_put_u32(out, crc);
    return pdc_buf_status(out);
}

/* ================================================================== reading */

typedef struct ftensor {
    char *name;
    ir_tensor_kind kind;
    int rank;
    int64_t dims[PDC_MAX_RANK];
    float *data;      /* constants: owned until handed to the model */
    ir_sparsity sp;   /* constants: owned until handed to the model */
    int producer;     /* activations: index of the producing layer in the file, -1 until seen */
    int index;        /* index in the rebuilt model, -1 until created */
} ftensor;

typedef struct flayer {
    char *name;
    ir_op op;
    size_t n_in, n_out;
    int32_t *in, *out;
    ir_attrs attrs;
} flayer;

typedef struct loader {
    pdc_context *ctx;
    pdc_reader r;
    char what[160];   /* r.what points here */
    char *name;
    size_t n_tensors;
    ftensor *tensors;
    size_t n_layers;
    flayer *layers;
    size_t n_in, n_out;
    int32_t *in, *out;
    ir_model *m;
    size_t next_layer; /* rebuild: first file layer not yet added to m */
    uint32_t version;  /* of the file: records 4 and 5 only from 2 on */
} loader;

static void loader_free(loader *L)
{
    pdc_free(L->name);
    for (size_t i = 0; i < L->n_tensors; i++) {
        pdc_free(L->tensors[i].name);
        pdc_free(L->tensors[i].data);
        ir_sparsity_free(&L->tensors[i].sp);
    }
    pdc_free(L->tensors);
    for (size_t i = 0; i < L->n_layers; i++) {
        pdc_free(L->layers[i].name);
        pdc_free(L->layers[i].in);
        pdc_free(L->layers[i].out);
        ir_attrs_free(&L->layers[i].attrs);
    }
    pdc_free(L->layers);
    pdc_free(L->in);
    pdc_free(L->out);
    ir_model_destroy(L->m);
}

/* Sets what the reader is reading, for messages. */
static void reading(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reading(loader *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->what, sizeof L->what, fmt, ap);
    va_end(ap);
    L->r.what = L->what;
}

/* Reads a u32 count and n i32 tensor references (each -1 or a valid index) into a new array. */
static pdc_status read_refs(loader *L, size_t *n_out, int32_t **refs_out)
{
    size_t n;
    pdc_status st = pdc_reader_get_count(&L->r, 0, 4, &n);
    if (st) return st;
    int32_t *refs = pdc_calloc(L->ctx, n ? n : 1, sizeof *refs);
    if (!refs) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < n; k++) {
        int32_t v;
        pdc_reader_get_i32(&L->r, &v); /* cannot fail: the count was checked against the bytes left */
        if (v < -1 || (v >= 0 && (size_t)v >= L->n_tensors)) {
            L->r.pos -= 4;
            pdc_free(refs);
            return pdc_reader_corrupt(&L->r, "tensor reference %" PRId32 " is outside -1..%lld", v,
                                      (long long)L->n_tensors - 1);
        }
        refs[k] = v;
    }
    *n_out = n;
    *refs_out = refs;
    return PDC_OK;
}

pdc_status pdc_format_get_bcr(pdc_reader *r, ir_sparsity *s)
{
    pdc_status st;
    size_t n;
    const uint8_t *p;
    s->kind = IR_SPARSITY_BCR;
    if ((st = pdc_reader_get_i64(r, &s->bh)) || (st = pdc_reader_get_i64(r, &s->bw))) return st;
    if (s->bh < 1 || s->bw < 1 || s->bh > PDC_FORMAT_MAX_BLOCK_DIM || s->bw > PDC_FORMAT_MAX_BLOCK_DIM) {
        r->pos -= 16;
        return pdc_reader_corrupt(r, "BCR block shape %" PRId64 "x%" PRId64 " is outside 1..2^40", s->bh, s->bw);
    }
    /* the flags follow: n_blocks * (bh + bw) bytes, which the reader bounds by what is left */
    if ((st = pdc_reader_get_count(r, 1, (size_t)(s->bh + s->bw), &n))) return st;
    const size_t len = n * (size_t)(s->bh + s->bw);
    if ((st = pdc_reader_get_bytes(r, len, &p))) return st;
    if (!(s->bcr_keep = pdc_alloc(r->ctx, len ? len : 1))) return PDC_ERR_OUT_OF_MEMORY;
    s->n_blocks = n;
    if (len) memcpy(s->bcr_keep, p, len);
    return PDC_OK;
}

static pdc_status read_sparsity(loader *L, ftensor *t)
{
    pdc_reader *r = &L->r;
    ir_sparsity *s = &t->sp;
    uint8_t kind;
    reading(L, "sparsity of tensor '%.100s'", t->name);
    pdc_status st = pdc_reader_get_u8(r, &kind);
    if (st) return st;
    const int v2 = kind == PDC_FORMAT_SPARSITY_PATTERN_V2 && L->version >= 2;
    if ((kind > IR_SPARSITY_UNSTRUCTURED && L->version < 2) || (kind > IR_SPARSITY_BCR && !v2)) {
        r->pos--;
        return pdc_reader_corrupt(r, "unknown sparsity kind %u", (unsigned)kind);
    }
    s->kind = v2 ? IR_SPARSITY_PATTERN : (ir_sparsity_kind)kind;
    size_t n;
    const uint8_t *p;
    switch (s->kind) {
    case IR_SPARSITY_NONE: return PDC_OK;
    case IR_SPARSITY_PATTERN:
        if (v2 && (st = pdc_reader_get_i64(r, &s->kd))) return st;
        if ((st = pdc_reader_get_i64(r, &s->kh)) || (st = pdc_reader_get_i64(r, &s->kw))) return st;
        if (v2 && ((st = pdc_reader_get_i64(r, &s->go)) || (st = pdc_reader_get_i64(r, &s->gc)))) return st;
        if ((st = pdc_reader_get_count(r, 1, 8, &n))) return st;
        if (!(s->patterns = pdc_calloc(L->ctx, n ? n : 1, sizeof *s->patterns))) return PDC_ERR_OUT_OF_MEMORY;
        s->n_patterns = n;
        for (size_t k = 0; k < n; k++) pdc_reader_get_u64(r, &s->patterns[k]);
        if ((st = pdc_reader_get_count(r, 1, 4, &n))) return st;
        if (!(s->kernel_pattern = pdc_calloc(L->ctx, n ? n : 1, sizeof *s->kernel_pattern)))
            return PDC_ERR_OUT_OF_MEMORY;
        s->n_kernels = n;
        for (size_t k = 0; k < n; k++) pdc_reader_get_i32(r, &s->kernel_pattern[k]);
        return PDC_OK;
    case IR_SPARSITY_BLOCK:
        if ((st = pdc_reader_get_i64(r, &s->bh)) || (st = pdc_reader_get_i64(r, &s->bw))) return st;
        if (s->bh < 1 || s->bw < 1 || s->bh > PDC_FORMAT_MAX_BLOCK_DIM || s->bw > PDC_FORMAT_MAX_BLOCK_DIM) {
            r->pos -= 16;
            return pdc_reader_corrupt(r, "block shape %" PRId64 "x%" PRId64 " is outside 1..2^40", s->bh, s->bw);
        }
        if ((st = pdc_reader_get_count(r, 1, 1, &n))) return st;
        if (!(s->block_mask = pdc_alloc(L->ctx, n ? n : 1))) return PDC_ERR_OUT_OF_MEMORY;
        s->n_blocks = n;
        pdc_reader_get_bytes(r, n, &p);
        if (n) memcpy(s->block_mask, p, n);
        return PDC_OK;
    case IR_SPARSITY_UNSTRUCTURED:
        if ((st = pdc_reader_get_count(r, 1, 1, &n))) return st;
        if (!(s->mask = pdc_alloc(L->ctx, n ? n : 1))) return PDC_ERR_OUT_OF_MEMORY;
        s->n_mask = n;
        pdc_reader_get_bytes(r, n, &p);
        if (n) memcpy(s->mask, p, n);
        return PDC_OK;
    case IR_SPARSITY_BCR:
        return pdc_format_get_bcr(r, s);
    }
    return PDC_OK;
}

static pdc_status read_tensor(loader *L, size_t i)
{
    pdc_reader *r = &L->r;
    ftensor *t = &L->tensors[i];
    pdc_status st;
    reading(L, "name of tensor %zu", i);
    if ((st = pdc_reader_get_string(r, &t->name))) return st;
    reading(L, "tensor '%.100s'", t->name);
    uint8_t kind, rank;
    if ((st = pdc_reader_get_u8(r, &kind))) return st;
    if (kind > IR_TENSOR_ACT) {
        r->pos--;
        return pdc_reader_corrupt(r, "unknown tensor kind %u", (unsigned)kind);
    }
    if ((st = pdc_reader_get_u8(r, &rank))) return st;
    t->kind = (ir_tensor_kind)kind;
    if (rank == PDC_FORMAT_RANK_UNKNOWN && t->kind == IR_TENSOR_ACT) {
        t->rank = -1;
        return PDC_OK;
    }
    if (rank > PDC_MAX_RANK) {
        r->pos--;
        return pdc_reader_corrupt(r, "rank %u exceeds %d", (unsigned)rank, PDC_MAX_RANK);
    }
    t->rank = rank;
    for (int d = 0; d < t->rank; d++)
        if ((st = pdc_reader_get_i64(r, &t->dims[d]))) return st;
    if (t->kind != IR_TENSOR_CONST) return PDC_OK;

    size_t numel, n;
    if (!shape_numel(t->rank, t->dims, &numel)) return pdc_reader_corrupt(r, "constant has an invalid shape");
    reading(L, "data of tensor '%.100s'", t->name);
    if ((st = pdc_reader_get_count(r, 1, 4, &n))) return st;
    if (n != numel) {
        r->pos -= 8;
        return pdc_reader_corrupt(r, "%zu elements stored for a shape of %zu", n, numel);
    }
    if (!(t->data = pdc_alloc(L->ctx, n * 4))) return PDC_ERR_OUT_OF_MEMORY;
    const uint8_t *p;
    pdc_reader_get_bytes(r, n * 4, &p);
    for (size_t k = 0; k < n; k++) {
        uint32_t bits = pdc_load_u32le(p + 4 * k);
        memcpy(&t->data[k], &bits, 4);
    }
    return read_sparsity(L, t);
}

static pdc_status read_attr(loader *L, flayer *l, size_t k)
{
    pdc_reader *r = &L->r;
    pdc_status st;
    char *name = NULL, *s = NULL;
    int64_t *ints = NULL;
    reading(L, "name of attribute %zu of layer '%.100s'", k, l->name);
    if ((st = pdc_reader_get_string(r, &name))) return st;
    reading(L, "attribute '%.50s' of layer '%.100s'", name, l->name);
    size_t at = r->pos;
    uint8_t type;
    if ((st = pdc_reader_get_u8(r, &type))) goto done;
    if (ir_attrs_find(&l->attrs, name)) {
        r->pos = at;
        st = pdc_reader_corrupt(r, "duplicate attribute");
        goto done;
    }
    switch (type) {
    case IR_ATTR_INT: {
        int64_t v;
        if (!(st = pdc_reader_get_i64(r, &v))) st = ir_attrs_set_int(L->ctx, &l->attrs, name, v);
        break;
    }
    case IR_ATTR_INTS: {
        size_t n;
        if ((st = pdc_reader_get_count(r, 0, 8, &n))) break;
        if (!(ints = pdc_calloc(L->ctx, n ? n : 1, sizeof *ints))) {
            st = PDC_ERR_OUT_OF_MEMORY;
            break;
        }
        for (size_t j = 0; j < n; j++) pdc_reader_get_i64(r, &ints[j]);
        st = ir_attrs_set_ints(L->ctx, &l->attrs, name, n, ints);
        break;
    }
    case IR_ATTR_FLOAT: {
        float v;
        if (!(st = pdc_reader_get_f32(r, &v))) st = ir_attrs_set_float(L->ctx, &l->attrs, name, v);
        break;
    }
    case IR_ATTR_STRING:
        if (!(st = pdc_reader_get_string(r, &s))) st = ir_attrs_set_string(L->ctx, &l->attrs, name, s);
        break;
    default:
        r->pos = at;
        st = pdc_reader_corrupt(r, "unknown attribute type %u", (unsigned)type);
        break;
    }
    if (st && st != PDC_ERR_CORRUPT && st != PDC_ERR_OUT_OF_MEMORY) {
        /* The attribute setters refuse bad names and NaN floats: in a file, that is corruption. */
        pdc_error_prefix(L->ctx, "offset %zu", pdc_reader_offset(r));
        st = PDC_ERR_CORRUPT;
    }
done:
    pdc_free(name);
    pdc_free(s);
    pdc_free(ints);
    return st;
}

static pdc_status read_layer(loader *L, size_t li)
{
    pdc_reader *r = &L->r;
    flayer *l = &L->layers[li];
    pdc_status st;
    char *op = NULL;
    reading(L, "name of layer %zu", li);
    if ((st = pdc_reader_get_string(r, &l->name))) return st;
    reading(L, "op of layer '%.100s'", l->name);
    size_t at = r->pos;
    if ((st = pdc_reader_get_string(r, &op))) return st;
    int known = ir_op_from_name(op, &l->op);
    if (!known) {
        st = pdc_error(L->ctx, PDC_ERR_UNSUPPORTED, "offset %zu: layer '%.100s' has op '%.100s', which this pdc does not know",
                       r->base + at, l->name, op);
    }
    pdc_free(op);
    if (st) return st;

    reading(L, "inputs of layer '%.100s'", l->name);
    if ((st = read_refs(L, &l->n_in, &l->in))) return st;
    reading(L, "outputs of layer '%.100s'", l->name);
    at = r->pos;
    if ((st = read_refs(L, &l->n_out, &l->out))) return st;
    for (size_t k = 0; k < l->n_out; k++) {
        int32_t o = l->out[k];
        if (o < 0) continue;
        ftensor *t = &L->tensors[o];
        r->pos = at + 4 + 4 * k; /* for the message */
        if (t->kind != IR_TENSOR_ACT)
            return pdc_reader_corrupt(r, "output '%.100s' is not an activation tensor", t->name);
        if (t->producer >= 0)
            return pdc_reader_corrupt(r, "tensor '%.100s' is already produced by layer '%.100s'", t->name,
                                      L->layers[t->producer].name);
        t->producer = (int)li;
    }
    r->pos = at + 4 + 4 * l->n_out;

    reading(L, "attributes of layer '%.100s'", l->name);
    size_t n_attrs;
    if ((st = pdc_reader_get_count(r, 0, 5, &n_attrs))) return st;
    for (size_t k = 0; k < n_attrs; k++)
        if ((st = read_attr(L, l, k))) return st;
    return PDC_OK;
}

static pdc_status read_payload(loader *L)
{
    pdc_reader *r = &L->r;
    pdc_status st;
    reading(L, "model name");
    if ((st = pdc_reader_get_string(r, &L->name))) return st;

    reading(L, "tensor count");
    size_t n;
    if ((st = pdc_reader_get_count(r, 0, 6, &n))) return st; /* a tensor takes >= 6 bytes */
    if (n > INT32_MAX) return pdc_reader_corrupt(r, "%zu tensors are too many", n);
    if (!(L->tensors = pdc_calloc(L->ctx, n ? n : 1, sizeof *L->tensors))) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        L->tensors[i].producer = -1;
        L->tensors[i].index = -1;
    }
    L->n_tensors = n;
    for (size_t i = 0; i < n; i++)
        if ((st = read_tensor(L, i))) return st;

    reading(L, "layer count");
    if ((st = pdc_reader_get_count(r, 0, 20, &n))) return st; /* a layer takes >= 20 bytes */
    if (!(L->layers = pdc_calloc(L->ctx, n ? n : 1, sizeof *L->layers))) return PDC_ERR_OUT_OF_MEMORY;
    L->n_layers = n;
    for (size_t i = 0; i < n; i++)
        if ((st = read_layer(L, i))) return st;

    reading(L, "graph inputs");
    if ((st = read_refs(L, &L->n_in, &L->in))) return st;
    reading(L, "graph outputs");
    if ((st = read_refs(L, &L->n_out, &L->out))) return st;
    reading(L, "end of payload");
    if (pdc_reader_remaining(r))
        return pdc_reader_corrupt(r, "%zu unexpected bytes after the graph outputs", pdc_reader_remaining(r));
    for (size_t i = 0; i < L->n_tensors; i++)
        if (L->tensors[i].kind == IR_TENSOR_ACT && L->tensors[i].producer < 0)
            return pdc_error(L->ctx, PDC_ERR_CORRUPT, "activation tensor '%.100s' is not produced by any layer",
                             L->tensors[i].name);
    return PDC_OK;
}

/* ------------------------------------------------------------------ rebuilding through the IR API */

/* A builder refusal while loading means the file describes an invalid model. Statuses that describe
 * bad arguments become PDC_ERR_CORRUPT; model-level ones (shape, invalid model, unsupported, out of
 * memory) are kept. */
static pdc_status rebuild_error(loader *L, pdc_status st)
{
    if (st == PDC_ERR_OUT_OF_MEMORY) return st;
    pdc_error_prefix(L->ctx, "invalid model in .pdc file");
    if (st == PDC_ERR_SHAPE || st == PDC_ERR_INVALID_MODEL || st == PDC_ERR_UNSUPPORTED) return st;
    return PDC_ERR_CORRUPT;
}

static pdc_status add_layers_through(loader *L, size_t last);

/* Creates file tensor i in the model if it is not there yet. Inputs and constants are added
 * directly; an activation is created by adding the layers up to and including its producer. */
static pdc_status ensure_tensor(loader *L, size_t i)
{
    ftensor *t = &L->tensors[i];
    if (t->index >= 0) return PDC_OK;
    pdc_status st;
    switch (t->kind) {
    case IR_TENSOR_INPUT:
        st = ir_model_add_input(L->m, t->name, t->rank, t->dims);
        break;
    case IR_TENSOR_CONST:
        st = ir_model_add_constant_owned(L->m, t->name, t->rank, t->dims, t->data);
        t->data = NULL; /* the model owns it now, also on failure */
        if (!st && t->sp.kind != IR_SPARSITY_NONE)
            st = ir_model_set_sparsity(L->m, (int)L->m->n_tensors - 1, &t->sp);
        ir_sparsity_free(&t->sp); /* taken (or freed) by the model; clears it */
        break;
    default:
        return add_layers_through(L, (size_t)t->producer);
    }
    if (st) return rebuild_error(L, st);
    t->index = (int)L->m->n_tensors - 1;
    return PDC_OK;
}

static int same_shape(int ra, const int64_t *a, int rb, const int64_t *b)
{
    if (ra != rb) return 0;
    for (int d = 0; d < ra; d++)
        if (a[d] != b[d]) return 0;
    return 1;
}

/* Adds the file's layers next_layer..last, in order. */
static pdc_status add_layers_through(loader *L, size_t last)
{
    while (L->next_layer <= last) {
        size_t li = L->next_layer;
        flayer *l = &L->layers[li];
        /* Names of inputs then outputs; NULL for absent ones. Counts are bounded by the file size. */
        const char **names = pdc_calloc(L->ctx, l->n_in + l->n_out + 1, sizeof *names);
        if (!names) return PDC_ERR_OUT_OF_MEMORY;
        pdc_status st = PDC_OK;
        for (size_t k = 0; k < l->n_in && !st; k++) {
            if (l->in[k] < 0) continue;
            ftensor *t = &L->tensors[l->in[k]];
            if (t->kind == IR_TENSOR_ACT && (size_t)t->producer >= li)
                st = pdc_error(L->ctx, PDC_ERR_CORRUPT,
                               "invalid model in .pdc file: layer '%.100s' reads tensor '%.100s' before it is produced",
                               l->name, t->name);
            else
                st = ensure_tensor(L, (size_t)l->in[k]);
            names[k] = t->name;
        }
        for (size_t k = 0; k < l->n_out; k++)
            names[l->n_in + k] = l->out[k] >= 0 ? L->tensors[l->out[k]].name : NULL;
        size_t before = L->m->n_tensors;
        if (!st) {
            st = ir_model_add_layer(L->m, l->name, l->op, l->n_in, names, l->n_out, names + l->n_in, &l->attrs);
            if (st) st = rebuild_error(L, st);
        }
        pdc_free(names);
        if (st) return st;
        L->next_layer++;
        /* The builder appends the present outputs in order. */
        size_t idx = before;
        for (size_t k = 0; k < l->n_out; k++) {
            if (l->out[k] < 0) continue;
            ftensor *t = &L->tensors[l->out[k]];
            if (idx >= L->m->n_tensors || strcmp(L->m->tensors[idx].name, t->name))
                return pdc_error(L->ctx, PDC_ERR_INTERNAL, "load: layer '%s' output '%s' not where expected", l->name,
                                 t->name);
            const ir_tensor *mt = &L->m->tensors[idx];
            if (!same_shape(t->rank, t->dims, mt->rank, mt->dims)) {
                char want[128], got[128];
                ir_format_shape(t->rank, t->dims, want, sizeof want);
                ir_format_shape(mt->rank, mt->dims, got, sizeof got);
                return pdc_error(L->ctx, PDC_ERR_CORRUPT,
                                 "invalid model in .pdc file: tensor '%.100s' is stored as %s but layer '%.100s' "
                                 "produces %s",
                                 t->name, want, l->name, got);
            }
            t->index = (int)idx++;
        }
    }
    return PDC_OK;
}

static pdc_status rebuild(loader *L)
{
    pdc_status st = ir_model_create(L->ctx, L->name, &L->m);
    if (st) return rebuild_error(L, st);
    for (size_t i = 0; i < L->n_tensors; i++)
        if ((st = ensure_tensor(L, i))) return st;
    if (L->n_layers && (st = add_layers_through(L, L->n_layers - 1))) return st;

    /* Graph inputs are the input tensors, in the order they were added. */
    int same = L->m->n_inputs == L->n_in;
    for (size_t k = 0; same && k < L->n_in; k++)
        same = L->in[k] >= 0 && L->m->inputs[k] == L->tensors[L->in[k]].index;
    if (!same)
        return pdc_error(L->ctx, PDC_ERR_CORRUPT,
                         "invalid model in .pdc file: the graph inputs are not the input tensors in order");
    for (size_t k = 0; k < L->n_out; k++) {
        if (L->out[k] < 0)
            return pdc_error(L->ctx, PDC_ERR_CORRUPT, "invalid model in .pdc file: graph output %zu is absent", k);
        if ((st = ir_model_mark_output(L->m, L->tensors[L->out[k]].name))) return rebuild_error(L, st);
    }
    return PDC_OK;
}

pdc_status pdc_format_load(pdc_context *ctx, const void *data, size_t size, ir_model **out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, out, "out");
    if (!data && size) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_format_load: data is NULL");
    const uint8_t *p = data;

    /* Header, checked in the order that gives the most useful message. */
    size_t head = size < PDC_FORMAT_MAGIC_SIZE ? size : PDC_FORMAT_MAGIC_SIZE;
    if (head && memcmp(p, PDC_FORMAT_MAGIC, head) != 0)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "not a .pdc file (bad magic)");
    if (size < PDC_FORMAT_HEADER_SIZE)
        return pdc_error(ctx, PDC_ERR_CORRUPT,
                         size ? "truncated at offset %zu while reading the .pdc header (%d bytes)"
                              : "truncated at offset %zu: empty file, expected a %d-byte .pdc header",
                         size, PDC_FORMAT_HEADER_SIZE);
    uint32_t version = pdc_load_u32le(p + 8), flags = pdc_load_u32le(p + 12);
    uint64_t plen = pdc_load_u64le(p + 16);
    if (version > PDC_FORMAT_VERSION)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "format version %" PRIu32 " is newer than this pdc supports (%u)", version,
                         PDC_FORMAT_VERSION);
    if (version == 0) return pdc_error(ctx, PDC_ERR_CORRUPT, "format version 0 is invalid");
    size_t avail = size - PDC_FORMAT_HEADER_SIZE;
    if (avail < PDC_FORMAT_TRAILER_SIZE || plen > (uint64_t)(avail - PDC_FORMAT_TRAILER_SIZE))
        return pdc_error(ctx, PDC_ERR_CORRUPT,
                         "truncated at offset %zu: the header declares a %" PRIu64
                         "-byte payload, the file needs %" PRIu64 " bytes",
                         size, plen,
                         plen > UINT64_MAX - 28 ? UINT64_MAX : plen + PDC_FORMAT_HEADER_SIZE + PDC_FORMAT_TRAILER_SIZE);
    size_t total = PDC_FORMAT_HEADER_SIZE + (size_t)plen + PDC_FORMAT_TRAILER_SIZE;
    if (size > total)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "%zu unexpected bytes after the end of the .pdc data at offset %zu",
                         size - total, total);
    uint32_t stored = pdc_load_u32le(p + total - 4);
    uint32_t crc = pdc_crc32(0, p, total - 4);
    if (crc != stored)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "checksum mismatch: file is corrupt (stored %08" PRIx32 ", computed %08" PRIx32 ")",
                         stored, crc);
    if (flags) return pdc_error(ctx, PDC_ERR_CORRUPT, "unknown flags 0x%" PRIx32 " in the .pdc header", flags);

    loader L;
    memset(&L, 0, sizeof L);
    L.ctx = ctx;
    L.version = version;
    pdc_reader_init(&L.r, ctx, p + PDC_FORMAT_HEADER_SIZE, (size_t)plen, PDC_FORMAT_HEADER_SIZE, "payload");
    pdc_status st = read_payload(&L);
    if (!st) st = rebuild(&L);
    if (!st) {
        *out = L.m;
        L.m = NULL;
    }
    loader_free(&L);
    return st;
}
