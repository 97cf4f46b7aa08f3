/*
 * format_pdc.h - internal: the native binary model format (.pdc). The byte layout is documented at
 * the top of format_pdc.c. Files are written through pdc_file_write_atomic and read through
 * pdc_file_read (lib/core/fileio.h).
 */
#ifndef PDC_LIB_FORMAT_PDC_H
#define PDC_LIB_FORMAT_PDC_H

#include <stddef.h>
#include <stdint.h>

#include "ir/ir.h"
#include "lib/core/fileio.h"

#define PDC_FORMAT_MAGIC "PDCMODEL"   /* 8 bytes, no terminator in the file */
#define PDC_FORMAT_MAGIC_SIZE 8
#define PDC_FORMAT_VERSION 2u          /* the newest version this pdc reads */
/* The writer writes the oldest version that holds the model: 1 unless a weight has bcr sparsity or a
 * 3-D pattern window or kernel groups (sparsity records 4 and 5, new in version 2), so older pdc builds
 * read the rest. */
#define PDC_FORMAT_VERSION_V1 1u
#define PDC_FORMAT_HEADER_SIZE 24      /* magic, version, flags, payload length */
#define PDC_FORMAT_TRAILER_SIZE 4      /* CRC-32 */

/*
 * Serialises m (weights, sparsity, attributes, graph) and appends the complete file image to out,
 * which the caller set up with pdc_buf_init (if out->ctx is NULL, m->ctx is used). The same model
 * always gives the same bytes. On failure the buffer's contents are unspecified (free it).
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL), PDC_ERR_OUT_OF_MEMORY, PDC_ERR_OVERFLOW,
 *         PDC_ERR_INTERNAL (the in-memory model breaks an IR invariant; message says which)
 */
pdc_status pdc_format_save(const ir_model *m, pdc_buf *out);

/*
 * Rebuilds a model from a .pdc file image through the IR construction API, so everything the
 * builder checks (names, arity, shapes, sparsity against weights) is checked again. Nothing in the
 * bytes is trusted: every count is bounded by the bytes that remain before anything is allocated,
 * and no input makes it crash, leak or abort. On failure nothing is returned and the partial model
 * is destroyed.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL), PDC_ERR_CORRUPT (bad magic, version, checksum,
 *         truncation, malformed or inconsistent content; the message gives the offset and what was
 *         being read), PDC_ERR_UNSUPPORTED (an op this pdc does not know), PDC_ERR_SHAPE and
 *         PDC_ERR_INVALID_MODEL (the rebuilt model fails the builder's checks), PDC_ERR_OUT_OF_MEMORY
 */
pdc_status pdc_format_load(pdc_context *ctx, const void *data, size_t size, ir_model **out);

/*
 * Append a constant's sparsity description and a layer's attribute list in their .pdc encodings (the
 * layout above), for other files that store them too (trainer checkpoints). Errors name the tensor
 * or the layer they are given.
 * @retval PDC_OK, PDC_ERR_OVERFLOW, PDC_ERR_INTERNAL (the description breaks an IR invariant)
 */
pdc_status pdc_format_put_sparsity(pdc_buf *b, const ir_sparsity *s, const char *tensor);
/* Sparsity record 5 (version 2): a pattern with a 3-D window or kernel groups (record 4 is bcr). */
#define PDC_FORMAT_SPARSITY_PATTERN_V2 5u
/* 1 if s needs record 5. */
static inline int pdc_format_sparsity_pattern_v2(const ir_sparsity *s)
{
    return s->kind == IR_SPARSITY_PATTERN && (s->kd || s->go || s->gc);
}
/* 1 if s needs format version 2 (record 4 or 5). */
static inline int pdc_format_sparsity_v2(const ir_sparsity *s)
{
    return s->kind == IR_SPARSITY_BCR || pdc_format_sparsity_pattern_v2(s);
}
pdc_status pdc_format_put_attrs(pdc_buf *b, const ir_attrs *attrs, const char *layer);
/* Reads the body of a bcr sparsity description (after its kind byte) into s (kind set; free with
 * ir_sparsity_free). @retval PDC_OK, PDC_ERR_CORRUPT, PDC_ERR_OUT_OF_MEMORY */
pdc_status pdc_format_get_bcr(pdc_reader *r, ir_sparsity *s);

/* 1 if data starts with the .pdc magic (size >= 8), else 0. Never reads past size. */
int pdc_format_is_pdc(const void *data, size_t size);

#endif
