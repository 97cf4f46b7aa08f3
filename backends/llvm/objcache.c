/*
 * objcache.c - the on-disk kernel object cache and the 128-bit key hash.
 *
 * Entry cache_dir/kernels/<hash>.o:
 *   "PDCKOBJ\0" | u32 version | u32 key length | u64 object length | u32 CRC-32 of key+object |
 *   key bytes | object bytes                                      (little-endian)
 * The full key is stored and compared, so a hash collision is a miss, never wrong code. A missing,
 * short, foreign or damaged entry is a miss; the caller rebuilds and rewrites it. Writes go to a
 * temporary file renamed into place, so readers never see half an entry (no fsync: a cache entry
 * lost to a crash is only rebuilt).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/llvm/llvm.h"
#include "lib/core/crc32.h"
#include "lib/core/fileio.h"

#define OBJ_MAGIC "PDCKOBJ"
#define OBJ_VERSION 1u
#define OBJ_HEADER 28u

/* ------------------------------------------------------------------ hash */

/* Two FNV-1a-style 64-bit lanes with different bases and a final avalanche (splitmix64). */
void pdc_hash128_init(pdc_hash128 *h)
{
    h->lo = 0xcbf29ce484222325ull;
    h->hi = 0x84222325cbf29ce4ull;
}

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void pdc_hash128_update(pdc_hash128 *h, const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t a = h->lo, b = h->hi;
    for (size_t i = 0; i < n; i++) {
        a = (a ^ p[i]) * 0x100000001b3ull;
        b = (b ^ p[i]) * 0x00000100000001b3ull ^ (b >> 29);
    }
    h->lo = mix64(a ^ n);
    h->hi = mix64(b + 0x9e3779b97f4a7c15ull * (n + 1));
}

/* ------------------------------------------------------------------ paths */

static int entry_path(const char *dir, pdc_hash128 h, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s/kernels/%016" PRIx64 "%016" PRIx64 ".o", dir, h.hi, h.lo);
    return n > 0 && (size_t)n < cap;
}

/* mkdir -p for the directory part of path (everything before the last '/'). */
static int make_parents(char *path)
{
    char *last = strrchr(path, '/');
    if (!last || last == path) return 0;
    *last = 0;
    int rc = 0;
    for (char *p = path + 1; *p && !rc; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) && errno != EEXIST) rc = -1;
        *p = '/';
    }
    if (!rc && mkdir(path, 0777) && errno != EEXIST) rc = -1;
    *last = '/';
    return rc;
}

/* ------------------------------------------------------------------ load / store */

pdc_status pdc_objcache_load(const pdc_context *ctx, const char *dir, pdc_hash128 h, const void *key, size_t key_len,
                             void **obj_out, size_t *obj_len_out)
{
    char path[PDC_PATH_MAX + 64];
    if (!dir || !*dir || !entry_path(dir, h, path, sizeof path)) return PDC_ERR_NOT_FOUND;
    if (access(path, R_OK) != 0) return PDC_ERR_NOT_FOUND;
    void *data = NULL;
    size_t size = 0;
    /* pdc_file_read records an error message; a miss is not an error for our caller, so the
     * message is simply left behind (callers report only their own failures). */
    if (pdc_file_read(ctx, path, &data, &size) != PDC_OK) return PDC_ERR_NOT_FOUND;
    const uint8_t *p = data;
    pdc_status st = PDC_ERR_NOT_FOUND;
    if (size >= OBJ_HEADER && !memcmp(p, OBJ_MAGIC, 8) && pdc_load_u32le(p + 8) == OBJ_VERSION &&
        pdc_load_u32le(p + 12) == key_len) {
        uint64_t olen = pdc_load_u64le(p + 16);
        uint32_t crc = pdc_load_u32le(p + 24);
        if (olen > 0 && size - OBJ_HEADER >= key_len && olen == size - OBJ_HEADER - key_len &&
            !memcmp(p + OBJ_HEADER, key, key_len) && pdc_crc32(0, p + OBJ_HEADER, key_len + olen) == crc) {
            void *obj = pdc_alloc(ctx, olen);
            if (obj) {
                memcpy(obj, p + OBJ_HEADER + key_len, olen);
                *obj_out = obj;
                *obj_len_out = olen;
                st = PDC_OK;
            }
        }
    }
    if (st) pdc_log(ctx, PDC_LOG_INFO, "kernel cache: ignoring invalid entry %s (it will be rebuilt)", path);
    pdc_free(data);
    return st;
}

void pdc_objcache_store(const pdc_context *ctx, const char *dir, pdc_hash128 h, const void *key, size_t key_len,
                        const void *obj, size_t obj_len)
{
    char path[PDC_PATH_MAX + 64], tmp[PDC_PATH_MAX + 96];
    if (!dir || !*dir || !entry_path(dir, h, path, sizeof path)) return;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) return;
    if (make_parents(path)) {
        pdc_log(ctx, PDC_LOG_INFO, "kernel cache: cannot create the directory of %s: %s", path, strerror(errno));
        return;
    }
    int fd = mkstemp(tmp);
    if (fd < 0) {
        pdc_log(ctx, PDC_LOG_INFO, "kernel cache: cannot create %s: %s", tmp, strerror(errno));
        return;
    }
    uint8_t head[OBJ_HEADER];
    memcpy(head, OBJ_MAGIC, 8);
    pdc_store_u32le(head + 8, OBJ_VERSION);
    pdc_store_u32le(head + 12, (uint32_t)key_len);
    pdc_store_u64le(head + 16, obj_len);
    pdc_store_u32le(head + 24, pdc_crc32(pdc_crc32(0, key, key_len), obj, obj_len));
    FILE *f = fdopen(fd, "wb");
    int ok = f != NULL;
    if (!f) close(fd);
    if (ok) ok = fwrite(head, 1, sizeof head, f) == sizeof head && fwrite(key, 1, key_len, f) == key_len &&
                 fwrite(obj, 1, obj_len, f) == obj_len;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) {
        pdc_log(ctx, PDC_LOG_INFO, "kernel cache: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}
