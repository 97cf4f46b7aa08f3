/*
 * fileio.h - internal: whole-file reading, atomic file writing, and the little-endian byte
 * buffer / bounded reader that binary formats (.pdc models, training checkpoints) are built on.
 *
 * Byte order: every multi-byte value is little-endian, assembled byte by byte (never a memcpy of a
 * host integer), so files are identical across hosts. Floats travel as their IEEE-754 bit
 * pattern (u32), which preserves every value exactly, NaN payloads and -0 included.
 */
#ifndef PDC_LIB_FILEIO_H
#define PDC_LIB_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/context.h"

/* Files larger than this are refused by pdc_file_read (a sanity limit, not a format limit). */
#define PDC_FILE_MAX_SIZE ((size_t)1 << 36) /* 64 GiB */

/*
 * Reads the whole file at `path` into a new buffer (free with pdc_free). The buffer has one extra
 * byte, set to 0, after the data, so text can be parsed in place; *size_out excludes it. Works on
 * regular files only: the file is opened with O_NONBLOCK (a FIFO does not block the open) and
 * checked with fstat before anything is read or allocated; pipes, devices and sockets are refused.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL), PDC_ERR_IO (cannot open or read, is a directory or not
 *         a regular file, or larger than PDC_FILE_MAX_SIZE; the message names the path and the
 *         reason), PDC_ERR_OUT_OF_MEMORY (also: larger than max_memory),
 *         PDC_ERR_OUT_OF_MEMORY. Out-parameters are written only on success.
 */
pdc_status pdc_file_read(const pdc_context *ctx, const char *path, void **data_out, size_t *size_out);

/*
 * Replaces the file at `path` with `size` bytes of `data`, atomically: the bytes go to a new file
 * "path.tmp.XXXXXX" (mkstemp) in the same directory, which is fsync'd and renamed over `path`; then
 * the directory is fsync'd. On any failure before the rename the temporary file is removed and an
 * existing file at `path` is untouched. A replaced file keeps its permission bits; a new one gets
 * 0666 less the umask, as open(2) would give. Only a regular file (or nothing) at `path` is
 * replaced: a directory, symbolic link, FIFO, device or socket there is refused (PDC_ERR_IO, the
 * message names what it is). Stale temporary files of earlier saves to the same path that were
 * killed ("path.tmp.XXXXXX", ours, regular, untouched for PDC_STALE_TEMP_SECONDS) are removed first.
 * @retval PDC_OK, PDC_ERR_INVALID_ARG (NULL path, or data NULL with size > 0), PDC_ERR_IO (the
 *         message names the path and strerror)
 */
pdc_status pdc_file_write_atomic(const pdc_context *ctx, const char *path, const void *data, size_t size);

/* A temporary file of a save is stale when it has not changed for this long (a killed save). */
#define PDC_STALE_TEMP_SECONDS 300
/* Removes stale "path.tmp.XXXXXX" files (see pdc_file_write_atomic); best effort, no errors. */
void pdc_file_remove_stale_temps(const char *path);
/* "a regular file", "a FIFO", "a symbolic link", ... for a st_mode. */
const char *pdc_file_type_name(unsigned mode);

/* ------------------------------------------------------------------ growable output buffer */

/*
 * Writers append to a pdc_buf without checking each call: the first failed allocation records its
 * status in `failed` (the message is already on ctx) and later puts do nothing. Check once at the
 * end with pdc_buf_status.
 */
typedef struct pdc_buf {
    uint8_t *data;
    size_t len, cap;
    int failed;              /* 0, or the pdc_status of the first failure */
    const pdc_context *ctx;  /* for allocation and error messages */
} pdc_buf;

void pdc_buf_init(pdc_buf *b, const pdc_context *ctx);
/* Frees the data and resets the buffer to empty (ctx kept). */
void pdc_buf_free(pdc_buf *b);
/* PDC_OK, or the status of the first failed put. */
pdc_status pdc_buf_status(const pdc_buf *b);
/* Makes room for n more bytes and returns a pointer to them (len advanced), or NULL after failure. */
uint8_t *pdc_buf_append(pdc_buf *b, size_t n);
void pdc_buf_put_u8(pdc_buf *b, uint8_t v);
void pdc_buf_put_u32(pdc_buf *b, uint32_t v);
void pdc_buf_put_i32(pdc_buf *b, int32_t v);
void pdc_buf_put_u64(pdc_buf *b, uint64_t v);
void pdc_buf_put_i64(pdc_buf *b, int64_t v);
void pdc_buf_put_f32(pdc_buf *b, float v);
void pdc_buf_put_bytes(pdc_buf *b, const void *p, size_t n);
/* u32 byte length, then the bytes (no terminator). NULL is written as "". Fails (PDC_ERR_OVERFLOW)
 * for strings of 4 GiB or more. */
void pdc_buf_put_string(pdc_buf *b, const char *s);
/* Overwrites 4 / 8 bytes at offset `at` (< len) - for lengths and checksums known only later. */
void pdc_buf_patch_u32(pdc_buf *b, size_t at, uint32_t v);
void pdc_buf_patch_u64(pdc_buf *b, size_t at, uint64_t v);

/* Explicit little-endian encoding into / decoding from raw bytes. */
static inline void pdc_store_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline void pdc_store_u64le(uint8_t *p, uint64_t v)
{
    pdc_store_u32le(p, (uint32_t)v);
    pdc_store_u32le(p + 4, (uint32_t)(v >> 32));
}
static inline uint32_t pdc_load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t pdc_load_u64le(const uint8_t *p)
{
    return (uint64_t)pdc_load_u32le(p) | (uint64_t)pdc_load_u32le(p + 4) << 32;
}

/* ------------------------------------------------------------------ bounded reader */

/*
 * Reads values from a byte range without ever reading past its end. Every get_* returns PDC_OK or
 * PDC_ERR_CORRUPT with the message "truncated at offset N while reading <what>", where N is
 * base + pos (an offset in the file, when the range starts `base` bytes into it) and `what` is
 * whatever the caller last stored in r->what ("tensor name", "layer 3 attributes", ...). On
 * failure the out-parameter and pos are unchanged.
 */
typedef struct pdc_reader {
    const uint8_t *data;
    size_t len, pos;
    size_t base;             /* offset of data[0] in the file, for messages */
    const pdc_context *ctx;
    const char *what;        /* what is being read, for messages; never NULL */
} pdc_reader;

void pdc_reader_init(pdc_reader *r, const pdc_context *ctx, const void *data, size_t len, size_t base,
                     const char *what);
static inline size_t pdc_reader_remaining(const pdc_reader *r) { return r->len - r->pos; }
/* The current offset in the file (base + pos). */
static inline size_t pdc_reader_offset(const pdc_reader *r) { return r->base + r->pos; }
/* Records PDC_ERR_CORRUPT "offset N while reading <what>: <message>" and returns it. */
pdc_status pdc_reader_corrupt(const pdc_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

pdc_status pdc_reader_get_u8(pdc_reader *r, uint8_t *v);
pdc_status pdc_reader_get_u32(pdc_reader *r, uint32_t *v);
pdc_status pdc_reader_get_i32(pdc_reader *r, int32_t *v);
pdc_status pdc_reader_get_u64(pdc_reader *r, uint64_t *v);
pdc_status pdc_reader_get_i64(pdc_reader *r, int64_t *v);
pdc_status pdc_reader_get_f32(pdc_reader *r, float *v);
/* Borrows the next n bytes (*p points into the reader's data). */
pdc_status pdc_reader_get_bytes(pdc_reader *r, size_t n, const uint8_t **p);
/*
 * Reads a count (u32 if wide == 0, else u64) of items of at least `min_item_size` bytes each
 * (>= 1) and checks, before anything is allocated for them, that that many items can fit in the
 * bytes that remain: a corrupt count fails here ("count N needs at least M bytes, only K remain")
 * instead of asking for a huge allocation.
 */
pdc_status pdc_reader_get_count(pdc_reader *r, int wide, size_t min_item_size, size_t *n);
/* u32 length + bytes, as written by pdc_buf_put_string, into a new NUL-terminated string (free with
 * pdc_free). A string containing a NUL byte is corrupt. */
pdc_status pdc_reader_get_string(pdc_reader *r, char **s);

#endif
