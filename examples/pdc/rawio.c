/*
 * rawio.c - raw little-endian float32 files: the tool's input and output format. Bytes are
 * converted explicitly, so the files mean the same on hosts of either byte order.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static float f32_from_le(const unsigned char *b)
{
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void f32_to_le(float f, unsigned char *b)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    b[0] = (unsigned char)u;
    b[1] = (unsigned char)(u >> 8);
    b[2] = (unsigned char)(u >> 16);
    b[3] = (unsigned char)(u >> 24);
}

/* The file described by sb must be a regular file of exactly want bytes. */
static int check_file(const char *path, const struct stat *sb, size_t want, const char *what)
{
    if (!S_ISREG(sb->st_mode))
        return cli_error(path, "not a regular file (expected %zu bytes of raw little-endian f32, %s)", want, what);
    if ((unsigned long long)sb->st_size != (unsigned long long)want)
        return cli_error(path, "wrong size: expected %zu bytes (%s), got %lld bytes", want, what,
                         (long long)sb->st_size);
    return CLI_EXIT_OK;
}

int raw_check_f32(const char *path, size_t n, const char *what)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return cli_error(path, "cannot open: %s", strerror(errno));
    return check_file(path, &sb, n * 4, what);
}

int raw_count_f32(const char *path, size_t *n, const char *what)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return cli_error(path, "cannot open: %s", strerror(errno));
    if (!S_ISREG(sb.st_mode) || sb.st_size <= 0 || sb.st_size % 4)
        return cli_error(path, "expected a non-empty regular file of raw little-endian f32 (%s), got %lld bytes", what,
                         (long long)sb.st_size);
    *n = (size_t)sb.st_size / 4;
    return CLI_EXIT_OK;
}

int raw_read_f32(const char *path, float *dst, size_t n, const char *what)
{
    size_t want = n * 4;   /* n comes from a checked shape product; callers keep it far below SIZE_MAX/4 */
    /* O_NONBLOCK: a FIFO must not block the open before fstat shows it is not a regular file */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return cli_error(path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return cli_error(path, "cannot stat: %s", strerror(e));
    }
    if (check_file(path, &sb, want, what) != CLI_EXIT_OK) {
        close(fd);
        return CLI_EXIT_ERROR;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return cli_error(path, "cannot open: %s", strerror(e));
    }

    unsigned char buf[4096];
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done < sizeof buf / 4 ? n - done : sizeof buf / 4;
        size_t got = fread(buf, 4, chunk, f);
        if (got != chunk) {
            int e = ferror(f) ? errno : 0;
            fclose(f);
            if (e) return cli_error(path, "read error: %s", strerror(e));
            return cli_error(path, "file shrank while reading: expected %zu bytes (%s), got %zu bytes", want, what,
                             (done + got) * 4);
        }
        for (size_t i = 0; i < chunk; i++) dst[done + i] = f32_from_le(buf + 4 * i);
        done += chunk;
    }
    fclose(f);
    return CLI_EXIT_OK;
}

/* Writes n floats to path atomically: to "path.tmp.XXXXXX" in the same folder, then renamed over
 * path, so a failed or killed run leaves the old file (or none). Only a regular file (or nothing)
 * at path is replaced: a FIFO, device or symbolic link there is refused. */
int raw_write_f32(const char *path, const float *src, size_t n)
{
    struct stat sb;
    mode_t mode;
    if (lstat(path, &sb) == 0) {
        if (!S_ISREG(sb.st_mode)) return cli_error(path, "cannot write: not a regular file (only one is replaced)");
        mode = sb.st_mode & 07777;
    } else if (errno == ENOENT) {
        mode_t mask = umask(0);   /* the tool is single-threaded here */
        umask(mask);
        mode = 0666 & ~mask;
    } else {
        return cli_error(path, "cannot write: %s", strerror(errno));
    }
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof ".tmp.XXXXXX");
    if (!tmp) return cli_error(path, "out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return cli_error(path, "cannot create: %s", strerror(e));
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return cli_error(path, "cannot create: %s", strerror(e));
    }
    unsigned char buf[4096];
    size_t done = 0;
    int e = fchmod(fd, mode) != 0 ? errno : 0;
    while (!e && done < n) {
        size_t chunk = n - done < sizeof buf / 4 ? n - done : sizeof buf / 4;
        for (size_t i = 0; i < chunk; i++) f32_to_le(src[done + i], buf + 4 * i);
        if (fwrite(buf, 4, chunk, f) != chunk) e = errno ? errno : EIO;
        done += chunk;
    }
    if (!e && (fflush(f) != 0 || fsync(fd) != 0)) e = errno;
    if (fclose(f) != 0 && !e) e = errno;
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) unlink(tmp);
    free(tmp);
    if (e) return cli_error(path, "write error: %s", strerror(e));
    return CLI_EXIT_OK;
}

void raw_print_f32(FILE *f, const float *v, size_t n, size_t limit)
{
    size_t shown = n < limit ? n : limit;
    for (size_t i = 0; i < shown; i++) fprintf(f, "%s%.6g", i ? " " : "", (double)v[i]);
    if (n > shown) fputs(shown ? " ..." : "...", f);
    fputc('\n', f);
}
