/*
 * objcache.c - the on-disk kernel object cache and the 128-bit key hash.
 *
 * Entry cache_dir/kernels/<hash>.o, format version 2:
 *   "PDCKOBJ\0" | u32 version | u32 key length | u64 object length | SHA-256 of key+object (32 bytes) |
 *   key bytes | object bytes                                      (little-endian)
 * The full key is stored and compared, so a hash collision is a miss, never wrong code. The object
 * is loaded only if the SHA-256 (OpenSSL libcrypto, lib/core/sha256.h) of the key and object matches:
 * a CRC-32 could be recomputed after editing the object, and the edited code ran (SIGILL). An entry is
 * a miss - rebuilt and replaced by the caller - when it is missing, short, foreign, of another version,
 * damaged, not a regular file (a symlink, FIFO or device: opened O_NOFOLLOW|O_NONBLOCK and checked
 * with fstat before reading), not owned by this user, writable by others or larger than
 * OBJ_MAX_BYTES. The cache directory and its kernels/ folder are created 0700; a cache directory
 * (or kernels/) not owned by this user or writable by group or others is refused with a warning and
 * the kernels are built without a cache: anyone who can write there could plant code we would run.
 * Writes go to a temporary file renamed into place, so readers never see half an entry (no fsync: a
 * cache entry lost to a crash is only rebuilt).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/llvm/llvm.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"

#define OBJ_MAGIC "PDCKOBJ"
#define OBJ_VERSION 2u
#define OBJ_HEADER (24u + PDC_SHA256_BYTES)
/* No kernel object comes near this; a larger entry is not read. */
#define OBJ_MAX_BYTES ((size_t)256 << 20)

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

/* mkdir -p (0700 for the folders it creates) for the directory part of path. */
static int make_parents(char *path)
{
    char *last = strrchr(path, '/');
    if (!last || last == path) return 0;
    *last = 0;
    int rc = 0;
    for (char *p = path + 1; *p && !rc; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0700) && errno != EEXIST) rc = -1;
        *p = '/';
    }
    if (!rc && mkdir(path, 0700) && errno != EEXIST) rc = -1;
    *last = '/';
    return rc;
}

/* 1 if dir is a directory of ours that no one else can write (followed if a symlink: what counts
 * is who can write where it leads), or cannot be looked at (missing: created 0700 when the first
 * entry is stored; unreachable: storing fails and says so); else 0 with why. */
static int dir_is_private(const char *dir, char *why, size_t cap)
{
    struct stat st;
    if (stat(dir, &st) != 0) return 1;
    if (!S_ISDIR(st.st_mode)) snprintf(why, cap, "it is %s, not a directory", pdc_file_type_name((unsigned)st.st_mode));
    else if (st.st_uid != geteuid()) snprintf(why, cap, "it is owned by uid %u, not by this user", (unsigned)st.st_uid);
    else if (st.st_mode & 022) snprintf(why, cap, "it is writable by %s (mode %03o)", st.st_mode & 002 ? "others" : "its group",
                                        (unsigned)(st.st_mode & 0777));
    else return 1;
    return 0;
}

int pdc_objcache_usable(const pdc_context *ctx, const char *dir)
{
    if (!dir || !*dir) return 0;
    char kdir[PDC_PATH_MAX + 16], why[160] = "";
    const char *bad = NULL;
    if (!dir_is_private(dir, why, sizeof why)) bad = dir;
    else if (snprintf(kdir, sizeof kdir, "%s/kernels", dir) < (int)sizeof kdir && !dir_is_private(kdir, why, sizeof why))
        bad = kdir;
    if (!bad) return 1;
    pdc_log(ctx, PDC_LOG_WARN, "kernel cache: not using '%s': %s; kernels are built without a cache (use a private "
                               "cache_dir)", bad, why);
    return 0;
}

/* Reads an entry: a regular file of ours that others cannot write, at most OBJ_MAX_BYTES. */
static int read_entry(const char *path, uint8_t **data_out, size_t *size_out, char *why, size_t cap)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, cap, "%s", errno == ELOOP ? "it is a symbolic link" : strerror(errno));
        return -1;
    }
    struct stat st;
    int ok = fstat(fd, &st) == 0;
    if (!ok) snprintf(why, cap, "%s", strerror(errno));
    else if (!S_ISREG(st.st_mode)) snprintf(why, cap, "it is %s", pdc_file_type_name((unsigned)st.st_mode));
    else if (st.st_uid != geteuid()) snprintf(why, cap, "it is owned by uid %u", (unsigned)st.st_uid);
    else if (st.st_mode & 022) snprintf(why, cap, "it is writable by group or others");
    else if ((uint64_t)st.st_size > OBJ_MAX_BYTES) snprintf(why, cap, "%lld bytes", (long long)st.st_size);
    ok = ok && why[0] == 0;
    uint8_t *data = ok ? malloc((size_t)st.st_size + 1) : NULL;
    size_t len = 0;
    while (data && len < (size_t)st.st_size) {
        ssize_t got = read(fd, data + len, (size_t)st.st_size - len);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) break;
        len += (size_t)got;
    }
    close(fd);
    if (!data || len != (size_t)st.st_size) {
        if (!why[0]) snprintf(why, cap, "cannot read it");
        free(data);
        return -1;
    }
    *data_out = data;
    *size_out = len;
    return 0;
}

/* ------------------------------------------------------------------ load / store */

pdc_status pdc_objcache_load(const pdc_context *ctx, const char *dir, pdc_hash128 h, const void *key, size_t key_len,
                             void **obj_out, size_t *obj_len_out)
{
    char path[PDC_PATH_MAX + 64], why[160] = "";
    if (!dir || !*dir || !entry_path(dir, h, path, sizeof path)) return PDC_ERR_NOT_FOUND;
    uint8_t *p = NULL;
    size_t size = 0;
    if (read_entry(path, &p, &size, why, sizeof why) != 0) {
        if (strcmp(why, strerror(ENOENT)))
            pdc_log(ctx, PDC_LOG_INFO, "kernel cache: ignoring entry %s: %s (it will be rebuilt)", path, why);
        return PDC_ERR_NOT_FOUND;
    }
    pdc_status st = PDC_ERR_NOT_FOUND;
    if (size >= OBJ_HEADER && !memcmp(p, OBJ_MAGIC, 8) && pdc_load_u32le(p + 8) == OBJ_VERSION &&
        pdc_load_u32le(p + 12) == key_len) {
        uint64_t olen = pdc_load_u64le(p + 16);
        uint8_t sum[PDC_SHA256_BYTES];
        if (olen > 0 && size - OBJ_HEADER >= key_len && olen == size - OBJ_HEADER - key_len &&
            !memcmp(p + OBJ_HEADER, key, key_len) &&
            pdc_sha256(p + OBJ_HEADER, key_len + olen, NULL, 0, sum) == 0 && !memcmp(sum, p + 24, sizeof sum)) {
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
    free(p);
    return st;
}

void pdc_objcache_remove(const pdc_context *ctx, const char *dir, pdc_hash128 h)
{
    char path[PDC_PATH_MAX + 64];
    if (!dir || !*dir || !entry_path(dir, h, path, sizeof path)) return;
    if (unlink(path) == 0) pdc_log(ctx, PDC_LOG_INFO, "kernel cache: removed unloadable entry %s", path);
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
    uint8_t head[OBJ_HEADER];
    memcpy(head, OBJ_MAGIC, 8);
    pdc_store_u32le(head + 8, OBJ_VERSION);
    pdc_store_u32le(head + 12, (uint32_t)key_len);
    pdc_store_u64le(head + 16, obj_len);
    if (pdc_sha256(key, key_len, obj, obj_len, head + 24) != 0) {
        pdc_log(ctx, PDC_LOG_INFO, "kernel cache: SHA-256 failed; %s not written", path);
        return;
    }
    int fd = mkstemp(tmp); /* mode 0600 */
    if (fd < 0) {
        pdc_log(ctx, PDC_LOG_INFO, "kernel cache: cannot create %s: %s", tmp, strerror(errno));
        return;
    }
    FILE *f = fdopen(fd, "wb");
    int ok = f != NULL;
    if (!f) close(fd);
    if (ok) ok = fwrite(head, 1, sizeof head, f) == sizeof head && fwrite(key, 1, key_len, f) == key_len &&
                 fwrite(obj, 1, obj_len, f) == obj_len;
    if (f && fclose(f) != 0) ok = 0;
    /* rename replaces whatever was at path - a damaged entry, or a symlink or FIFO put there */
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) {
        pdc_log(ctx, PDC_LOG_INFO, "kernel cache: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}
