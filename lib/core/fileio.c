/*
 * fileio.c - whole-file reading, atomic writing, and the little-endian buffer and bounded reader
 * used by the binary formats. See fileio.h.
 */
#include "lib/core/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

const char *pdc_file_type_name(unsigned mode)
{
    mode_t m = (mode_t)mode;
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* ------------------------------------------------------------------ reading */

pdc_status pdc_file_read(const pdc_context *ctx, const char *path, void **data_out, size_t *size_out)
{
    PDC_CHECK_ARG(ctx, path, "path");
    PDC_CHECK_ARG(ctx, data_out, "data_out");
    PDC_CHECK_ARG(ctx, size_out, "size_out");
    if (!*path) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_file_read: path is empty");

    int fd;
    do {
        /* O_NONBLOCK: opening a FIFO must not wait for a writer before the type check below */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return pdc_error(ctx, PDC_ERR_IO, "cannot open '%s': %s", path, strerror(errno));

    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return pdc_error(ctx, PDC_ERR_IO, "cannot read '%s': %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return pdc_error(ctx, PDC_ERR_IO, "cannot read '%s': %s", path, strerror(EISDIR));
    }
    /* Pipes, devices and sockets can be endless (/dev/zero) or block forever (a FIFO): refused. */
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return pdc_error(ctx, PDC_ERR_IO, "cannot read '%s': %s, not a regular file", path,
                         pdc_file_type_name((unsigned)st.st_mode));
    }
    if ((uint64_t)st.st_size > (uint64_t)PDC_FILE_MAX_SIZE) {
        close(fd);
        return pdc_error(ctx, PDC_ERR_IO, "cannot read '%s': file is too large (%lld bytes, limit %zu)", path,
                         (long long)st.st_size, PDC_FILE_MAX_SIZE);
    }
    /* One spare byte: the read that sees end of file lands there, and it holds the NUL. */
    size_t cap = (size_t)st.st_size + 1;
    uint8_t *buf = pdc_alloc(ctx, cap);
    if (!buf) {
        close(fd);
        pdc_error_prefix(ctx, "reading '%s'", path);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    size_t len = 0;
    for (;;) {
        if (len == cap) {
            /* The file grew while it was read: double, up to the limit + 1. */
            if (len > PDC_FILE_MAX_SIZE) {
                close(fd);
                pdc_free(buf);
                return pdc_error(ctx, PDC_ERR_IO, "cannot read '%s': file is too large (limit %zu bytes)", path,
                                 PDC_FILE_MAX_SIZE);
            }
            size_t need = cap < PDC_FILE_MAX_SIZE / 2 ? cap * 2 : PDC_FILE_MAX_SIZE + 1;
            void *items = buf;
            pdc_status st2 = pdc_grow(ctx, &items, &cap, need, 1);
            if (st2 != PDC_OK) {
                close(fd);
                pdc_free(buf);
                pdc_error_prefix(ctx, "reading '%s'", path);
                return st2;
            }
            buf = items;
        }
        size_t want = cap - len;
        if (want > ((size_t)1 << 30)) want = (size_t)1 << 30; /* keep each read(2) modest */
        ssize_t got = read(fd, buf + len, want);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            int e = errno;
            close(fd);
            pdc_free(buf);
            return pdc_error(ctx, PDC_ERR_IO, "cannot read '%s': %s", path, strerror(e));
        }
        if (got == 0) break;
        len += (size_t)got;
    }
    close(fd);
    if (len == cap) {
        /* Filled exactly (non-regular file): one more byte for the terminator. */
        void *items = buf;
        pdc_status st2 = pdc_grow(ctx, &items, &cap, len + 1, 1);
        if (st2 != PDC_OK) {
            pdc_free(buf);
            pdc_error_prefix(ctx, "reading '%s'", path);
            return st2;
        }
        buf = items;
    }
    buf[len] = 0;
    *data_out = buf;
    *size_out = len;
    return PDC_OK;
}

/* ------------------------------------------------------------------ atomic writing */

/* The process umask, read without changing it (umask(2) can only be read by setting it, which would
 * race with other threads creating files). Falls back to 022. */
static mode_t current_umask(void)
{
    mode_t mask = 022;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return mask;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "Umask:", 6) == 0) {
            char *end = NULL;
            unsigned long v = strtoul(line + 6, &end, 8);
            if (end != line + 6 && v <= 0777) mask = (mode_t)v;
            break;
        }
    }
    fclose(f);
    return mask;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? (size_t)1 << 30 : n;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* fsyncs the directory holding path, so the rename itself is durable. Filesystems that cannot
 * fsync a directory (EINVAL, ENOTSUP) are not an error. */
static int fsync_parent_dir(const char *path)
{
    char dir[PDC_PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        strcpy(dir, ".");
    } else if (slash == path) {
        strcpy(dir, "/");
    } else {
        size_t n = (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    int fd;
    do {
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && (e == EINVAL || e == ENOTSUP || e == EROFS)) rc = 0;
    errno = e;
    return rc;
}

/* 1 if name is base + ".tmp." + 6 characters of mkstemp's alphabet: a temporary file of ours. */
static int is_our_temp(const char *name, const char *base)
{
    size_t bl = strlen(base);
    if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".tmp.", 5) != 0) return 0;
    const char *x = name + bl + 5;
    if (strlen(x) != 6) return 0;
    for (int i = 0; i < 6; i++)
        if (!((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') || (x[i] >= '0' && x[i] <= '9')))
            return 0;
    return 1;
}

void pdc_file_remove_stale_temps(const char *path)
{
    char dir[PDC_PATH_MAX];
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    if (!*base || strlen(path) >= sizeof dir) return;
    if (!slash) strcpy(dir, ".");
    else if (slash == path) strcpy(dir, "/");
    else {
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = 0;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    const time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_our_temp(e->d_name, base)) continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        /* only our own regular files, old enough that no save still writes them */
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || now - st.st_mtime < PDC_STALE_TEMP_SECONDS) continue;
        (void)unlinkat(dfd, e->d_name, 0);
    }
    closedir(d);
}

pdc_status pdc_file_write_atomic(const pdc_context *ctx, const char *path, const void *data, size_t size)
{
    PDC_CHECK_ARG(ctx, path, "path");
    if (!data && size > 0) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_file_write_atomic: data is NULL");
    if (!*path) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pdc_file_write_atomic: path is empty");
    static const char suffix[] = ".tmp.XXXXXX";
    size_t plen = strlen(path);
    if (plen + sizeof suffix > PDC_PATH_MAX)
        return pdc_error(ctx, PDC_ERR_IO, "cannot write '%.200s...': path is too long", path);
    char tmp[PDC_PATH_MAX];
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, suffix, sizeof suffix);

    /* A replaced file keeps its permissions; a new one gets what open(path, O_CREAT, 0666) would.
     * Only a regular file is replaced: a rename over a device node, a FIFO or a symbolic link would
     * swap the node itself for our file (lstat: the link, not its target, is what gets replaced). */
    struct stat st;
    mode_t mode;
    if (lstat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return pdc_error(ctx, PDC_ERR_IO, "cannot write '%s': %s", path, strerror(EISDIR));
        if (!S_ISREG(st.st_mode))
            return pdc_error(ctx, PDC_ERR_IO, "cannot write '%s': it is %s; only a regular file is replaced", path,
                             pdc_file_type_name((unsigned)st.st_mode));
        mode = st.st_mode & 07777;
    } else if (errno == ENOENT) {
        mode = 0666 & ~current_umask();
    } else {
        return pdc_error(ctx, PDC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    pdc_file_remove_stale_temps(path);

    int fd = mkstemp(tmp);
    if (fd < 0) return pdc_error(ctx, PDC_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    const char *step = "write";
    int e = 0;
    if (fchmod(fd, mode) != 0) {
        step = "chmod";
        e = errno;
    } else if (write_all(fd, data, size) != 0) {
        e = errno;
    } else if (fsync(fd) != 0) {
        step = "fsync";
        e = errno;
    }
    if (close(fd) != 0 && !e) {
        step = "close";
        e = errno;
    }
    if (!e && rename(tmp, path) != 0) {
        step = "rename";
        e = errno;
    }
    if (e) {
        unlink(tmp);
        return pdc_error(ctx, PDC_ERR_IO, "cannot write '%s': %s failed: %s", path, step, strerror(e));
    }
    if (fsync_parent_dir(path) != 0)
        return pdc_error(ctx, PDC_ERR_IO, "wrote '%s' but could not sync its directory: %s", path, strerror(errno));
    return PDC_OK;
}

/* ------------------------------------------------------------------ output buffer */

void pdc_buf_init(pdc_buf *b, const pdc_context *ctx)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
    b->ctx = ctx;
}

void pdc_buf_free(pdc_buf *b)
{
    if (!b) return;
    pdc_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

pdc_status pdc_buf_status(const pdc_buf *b) { return b->failed ? (pdc_status)b->failed : PDC_OK; }

uint8_t *pdc_buf_append(pdc_buf *b, size_t n)
{
    if (b->failed) return NULL;
    size_t need;
    if (pdc_add_overflow(b->len, n, &need)) {
        b->failed = pdc_error(b->ctx, PDC_ERR_OVERFLOW, "output buffer size overflows");
        return NULL;
    }
    if (need > b->cap) {
        void *items = b->data;
        size_t cap = b->cap;
        if (need < 256) need = 256;
        pdc_status st = pdc_grow(b->ctx, &items, &cap, need, 1);
        if (st != PDC_OK) {
            b->failed = st;
            return NULL;
        }
        b->data = items;
        b->cap = cap;
    }
    uint8_t *p = b->data + b->len;
    b->len += n;
    return p;
}

void pdc_buf_put_u8(pdc_buf *b, uint8_t v)
{
    uint8_t *p = pdc_buf_append(b, 1);
    if (p) *p = v;
}

void pdc_buf_put_u32(pdc_buf *b, uint32_t v)
{
    uint8_t *p = pdc_buf_append(b, 4);
    if (p) pdc_store_u32le(p, v);
}

void pdc_buf_put_i32(pdc_buf *b, int32_t v) { pdc_buf_put_u32(b, (uint32_t)v); }

void pdc_buf_put_u64(pdc_buf *b, uint64_t v)
{
    uint8_t *p = pdc_buf_append(b, 8);
    if (p) pdc_store_u64le(p, v);
}

void pdc_buf_put_i64(pdc_buf *b, int64_t v) { pdc_buf_put_u64(b, (uint64_t)v); }

void pdc_buf_put_f32(pdc_buf *b, float v)
{
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    pdc_buf_put_u32(b, bits);
}

void pdc_buf_put_bytes(pdc_buf *b, const void *src, size_t n)
{
    if (n == 0) return;
    uint8_t *p = pdc_buf_append(b, n);
    if (p) memcpy(p, src, n);
}

void pdc_buf_put_string(pdc_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > UINT32_MAX) {
        if (!b->failed) b->failed = pdc_error(b->ctx, PDC_ERR_OVERFLOW, "string of %zu bytes is too long to save", n);
        return;
    }
    pdc_buf_put_u32(b, (uint32_t)n);
    pdc_buf_put_bytes(b, s, n);
}

void pdc_buf_patch_u32(pdc_buf *b, size_t at, uint32_t v)
{
    if (!b->failed && at <= b->len && b->len - at >= 4) pdc_store_u32le(b->data + at, v);
}

void pdc_buf_patch_u64(pdc_buf *b, size_t at, uint64_t v)
{
    if (!b->failed && at <= b->len && b->len - at >= 8) pdc_store_u64le(b->data + at, v);
}

/* ------------------------------------------------------------------ bounded reader */

void pdc_reader_init(pdc_reader *r, const pdc_context *ctx, const void *data, size_t len, size_t base,
                     const char *what)
{
    r->data = data;
    r->len = data ? len : 0;
    r->pos = 0;
    r->base = base;
    r->ctx = ctx;
    r->what = what ? what : "data";
}

pdc_status pdc_reader_corrupt(const pdc_reader *r, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return pdc_error(r->ctx, PDC_ERR_CORRUPT, "offset %zu while reading %s: %s", pdc_reader_offset(r),
                     r->what ? r->what : "data", msg);
}

static pdc_status reader_need(const pdc_reader *r, size_t n)
{
    if (n <= r->len - r->pos) return PDC_OK;
    return pdc_error(r->ctx, PDC_ERR_CORRUPT, "truncated at offset %zu while reading %s (%zu bytes needed, %zu left)",
                     pdc_reader_offset(r), r->what ? r->what : "data", n, r->len - r->pos);
}

pdc_status pdc_reader_get_bytes(pdc_reader *r, size_t n, const uint8_t **p)
{
    pdc_status st = reader_need(r, n);
    if (st != PDC_OK) return st;
    *p = r->data + r->pos;
    r->pos += n;
    return PDC_OK;
}

pdc_status pdc_reader_get_u8(pdc_reader *r, uint8_t *v)
{
    const uint8_t *p;
    pdc_status st = pdc_reader_get_bytes(r, 1, &p);
    if (st == PDC_OK) *v = *p;
    return st;
}

pdc_status pdc_reader_get_u32(pdc_reader *r, uint32_t *v)
{
    const uint8_t *p;
    pdc_status st = pdc_reader_get_bytes(r, 4, &p);
    if (st == PDC_OK) *v = pdc_load_u32le(p);
    return st;
}

pdc_status pdc_reader_get_i32(pdc_reader *r, int32_t *v)
{
    uint32_t u;
    pdc_status st = pdc_reader_get_u32(r, &u);
    if (st == PDC_OK) *v = (int32_t)u; /* two's complement (implementation-defined, gcc/clang: modular) */
    return st;
}

pdc_status pdc_reader_get_u64(pdc_reader *r, uint64_t *v)
{
    const uint8_t *p;
    pdc_status st = pdc_reader_get_bytes(r, 8, &p);
    if (st == PDC_OK) *v = pdc_load_u64le(p);
    return st;
}

pdc_status pdc_reader_get_i64(pdc_reader *r, int64_t *v)
{
    uint64_t u;
    pdc_status st = pdc_reader_get_u64(r, &u);
    if (st == PDC_OK) *v = (int64_t)u;
    return st;
}

pdc_status pdc_reader_get_f32(pdc_reader *r, float *v)
{
    uint32_t u;
    pdc_status st = pdc_reader_get_u32(r, &u);
    if (st == PDC_OK) memcpy(v, &u, sizeof *v);
    return st;
}

pdc_status pdc_reader_get_count(pdc_reader *r, int wide, size_t min_item_size, size_t *n)
{
    size_t start = r->pos;
    uint64_t c;
    pdc_status st;
    if (wide) {
        st = pdc_reader_get_u64(r, &c);
    } else {
        uint32_t c32;
        st = pdc_reader_get_u32(r, &c32);
        c = c32;
    }
    if (st != PDC_OK) return st;
    if (min_item_size == 0) min_item_size = 1;
    size_t left = r->len - r->pos;
    if (c > (uint64_t)(left / min_item_size)) {
        r->pos = start;
        return pdc_reader_corrupt(r, "count %llu needs at least %llu bytes, only %zu remain",
                                  (unsigned long long)c,
                                  c > UINT64_MAX / min_item_size ? (unsigned long long)UINT64_MAX
                                                                 : (unsigned long long)(c * min_item_size),
                                  left);
    }
    *n = (size_t)c;
    return PDC_OK;
}

pdc_status pdc_reader_get_string(pdc_reader *r, char **s)
{
    size_t start = r->pos;
    size_t n;
    pdc_status st = pdc_reader_get_count(r, 0, 1, &n);
    if (st != PDC_OK) return st;
    const uint8_t *p = r->data + r->pos;
    if (memchr(p, 0, n)) {
        r->pos = start;
        return pdc_reader_corrupt(r, "string contains a NUL byte");
    }
    char *out = pdc_alloc(r->ctx, n + 1);
    if (!out) {
        r->pos = start;
        return PDC_ERR_OUT_OF_MEMORY;
    }
    memcpy(out, p, n);
    out[n] = 0;
    r->pos += n;
    *s = out;
    return PDC_OK;
}
