/*
 * rawio.c - raw little-endian float32 files: the tool's input and output format. Bytes are
 * converted explicitly, so the files mean the same on hosts of either byte order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

int raw_read_f32(const char *path, float *dst, size_t n, const char *what)
{
    size_t want = n * 4;   /* n comes from a checked shape product; callers keep it far below SIZE_MAX/4 */
    FILE *f = fopen(path, "rb");
    if (!f) return cli_error(path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0) {
        int e = errno;
        fclose(f);
        return cli_error(path, "cannot stat: %s", strerror(e));
    }
    if (check_file(path, &sb, want, what) != CLI_EXIT_OK) {
        fclose(f);
        return CLI_EXIT_ERROR;
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

int raw_write_f32(const char *path, const float *src, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return cli_error(path, "cannot create: %s", strerror(errno));
    unsigned char buf[4096];
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done < sizeof buf / 4 ? n - done : sizeof buf / 4;
        for (size_t i = 0; i < chunk; i++) f32_to_le(src[done + i], buf + 4 * i);
        if (fwrite(buf, 4, chunk, f) != chunk) {
            int e = errno;
            fclose(f);
            return cli_error(path, "write error: %s", strerror(e));
        }
        done += chunk;
    }
    if (fclose(f) != 0) return cli_error(path, "write error: %s", strerror(errno));
    return CLI_EXIT_OK;
}

void raw_print_f32(FILE *f, const float *v, size_t n, size_t limit)
{
    size_t shown = n < limit ? n : limit;
    for (size_t i = 0; i < shown; i++) fprintf(f, "%s%.6g", i ? " " : "", (double)v[i]);
    if (n > shown) fputs(shown ? " ..." : "...", f);
    fputc('\n', f);
}
