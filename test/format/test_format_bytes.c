/*
 * test_format_bytes.c - what the .pdc format is written with: CRC-32 (known values, every length and
 * alignment against a bitwise one, any split), the little-endian byte buffer and the bounded reader
 * (offsets in messages, counts refused before allocating, strings, sticky failure), and the
 * whole-file helpers: atomic writes (modes kept, no temp file left, the old file kept when a write
 * fails), reading (errors with path and errno text, directories, max_memory, pipes).
 */
#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"
#include "lib/core/crc32.h"
#include "lib/core/fileio.h"
#include "lib/format/format_pdc.h"
#include "test/common/internals.h"

/* ================================================================== CRC-32 */

START_TEST(test_crc32_known)
{
    ck_assert_uint_eq(pdc_crc32(0, "123456789", 9), 0xCBF43926u);
    ck_assert_uint_eq(pdc_crc32(0, NULL, 0), 0);
    ck_assert_uint_eq(pdc_crc32(0, "a", 1), 0xE8B7BE43u);
    ck_assert_uint_eq(pdc_crc32(0, "The quick brown fox jumps over the lazy dog", 43), 0x414FA339u);
    /* pieces: any split gives the same CRC; every length and alignment matches the bitwise form */
    uint8_t buf[300];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 131u + 7u);
    for (size_t off = 0; off < 9; off++) {
        for (size_t n = 0; off + n <= sizeof buf; n += 1 + n / 8) {
            uint32_t want = crc_bitwise(buf + off, n);
            ck_assert_uint_eq(pdc_crc32(0, buf + off, n), want);
            size_t cut = n / 3;
            ck_assert_uint_eq(pdc_crc32(pdc_crc32(0, buf + off, cut), buf + off + cut, n - cut), want);
        }
    }
}
END_TEST

/* ================================================================== buffer and reader */

START_TEST(test_buf_little_endian)
{
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    pdc_buf_put_u8(&b, 0xAB);
    pdc_buf_put_u32(&b, 0x01020304u);
    pdc_buf_put_u64(&b, 0x1122334455667788ull);
    pdc_buf_put_i64(&b, -2);
    pdc_buf_put_f32(&b, 1.0f);
    pdc_buf_put_string(&b, "hi");
    pdc_buf_put_i32(&b, -1);
    ck_assert_int_eq(pdc_buf_status(&b), PDC_OK);
    static const uint8_t want[] = {0xAB, 4, 3, 2, 1, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
                                   0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0x80, 0x3F,
                                   2, 0, 0, 0, 'h', 'i', 0xFF, 0xFF, 0xFF, 0xFF};
    ck_assert_uint_eq(b.len, sizeof want);
    ck_assert_mem_eq(b.data, want, sizeof want);
    pdc_buf_patch_u32(&b, 1, 0xDEADBEEFu);
    ck_assert_uint_eq(pdc_load_u32le(b.data + 1), 0xDEADBEEFu);

    pdc_reader r;
    pdc_reader_init(&r, ctx, b.data, b.len, 100, "test record");
    uint8_t u8;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    int32_t i32;
    float f;
    char *s;
    ck_assert_ok(ctx, pdc_reader_get_u8(&r, &u8));
    ck_assert_ok(ctx, pdc_reader_get_u32(&r, &u32));
    ck_assert_ok(ctx, pdc_reader_get_u64(&r, &u64));
    ck_assert_ok(ctx, pdc_reader_get_i64(&r, &i64));
    ck_assert_ok(ctx, pdc_reader_get_f32(&r, &f));
    ck_assert_ok(ctx, pdc_reader_get_string(&r, &s));
    ck_assert_ok(ctx, pdc_reader_get_i32(&r, &i32));
    ck_assert_uint_eq(u8, 0xAB);
    ck_assert_uint_eq(u32, 0xDEADBEEFu);
    ck_assert_uint_eq(u64, 0x1122334455667788ull);
    ck_assert_int_eq(i64, -2);
    ck_assert(f == 1.0f);
    ck_assert_str_eq(s, "hi");
    ck_assert_int_eq(i32, -1);
    pdc_free(s);
    ck_assert_uint_eq(pdc_reader_remaining(&r), 0);

    /* reading past the end fails, names the file offset and what, and moves nothing */
    ck_assert_status(ctx, pdc_reader_get_u8(&r, &u8), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "truncated at offset 135 while reading test record");
    r.pos = b.len - 3;
    u32 = 7;
    ck_assert_status(ctx, pdc_reader_get_u32(&r, &u32), PDC_ERR_CORRUPT);
    ck_assert_uint_eq(u32, 7);
    ck_assert_uint_eq(r.pos, b.len - 3);
    pdc_buf_free(&b);
}
END_TEST

START_TEST(test_reader_counts_and_strings)
{
    /* a count that cannot fit in the remaining bytes fails before any allocation */
    uint8_t d[16] = {0xFF, 0xFF, 0xFF, 0x7F, 1, 2, 3, 4};
    pdc_reader r;
    size_t n = 123;
    pdc_reader_init(&r, ctx, d, sizeof d, 0, "a list");
    ck_assert_status(ctx, pdc_reader_get_count(&r, 0, 4, &n), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "a list");
    ck_assert_uint_eq(n, 123);
    ck_assert_uint_eq(r.pos, 0);
    /* u64 count near 2^64 with a large item size: no overflow in the check */
    uint8_t d2[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    pdc_reader_init(&r, ctx, d2, sizeof d2, 0, "big");
    ck_assert_status(ctx, pdc_reader_get_count(&r, 1, 1u << 20, &n), PDC_ERR_CORRUPT);
    /* exact fit is fine */
    uint8_t d3[12] = {2, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
    pdc_reader_init(&r, ctx, d3, sizeof d3, 0, "fit");
    ck_assert_ok(ctx, pdc_reader_get_count(&r, 0, 4, &n));
    ck_assert_uint_eq(n, 2);
    /* strings: huge length, embedded NUL */
    char *s = NULL;
    uint8_t s1[8] = {0xFF, 0xFF, 0xFF, 0xFF, 'a', 'b', 'c', 'd'};
    pdc_reader_init(&r, ctx, s1, sizeof s1, 0, "name");
    ck_assert_status(ctx, pdc_reader_get_string(&r, &s), PDC_ERR_CORRUPT);
    ck_assert_ptr_null(s);
    uint8_t s2[7] = {3, 0, 0, 0, 'a', 0, 'c'};
    pdc_reader_init(&r, ctx, s2, sizeof s2, 0, "name");
    ck_assert_status(ctx, pdc_reader_get_string(&r, &s), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "NUL");
    ck_assert_ptr_null(s);
    uint8_t s3[4] = {0, 0, 0, 0};
    pdc_reader_init(&r, ctx, s3, sizeof s3, 0, "name");
    ck_assert_ok(ctx, pdc_reader_get_string(&r, &s));
    ck_assert_str_eq(s, "");
    pdc_free(s);
}
END_TEST

START_TEST(test_buf_failure_is_sticky)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "1000"));
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    pdc_buf_put_u32(&b, 1);
    uint8_t big[2000] = {0};
    pdc_buf_put_bytes(&b, big, sizeof big);
    ck_assert_int_eq(pdc_buf_status(&b), PDC_ERR_OUT_OF_MEMORY);
    size_t len = b.len;
    pdc_buf_put_u64(&b, 5); /* no-op after failure */
    ck_assert_uint_eq(b.len, len);
    ck_assert_int_eq(pdc_buf_status(&b), PDC_ERR_OUT_OF_MEMORY);
    pdc_buf_free(&b);
}
END_TEST

/* ================================================================== file helpers */

static int count_temp_files(void)
{
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

START_TEST(test_file_roundtrip)
{
    const char *path = tmp_path("a.bin");
    uint8_t data[5000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 31u);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, data, sizeof data));
    void *got = NULL;
    size_t size = 0;
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, sizeof data);
    ck_assert_mem_eq(got, data, size);
    ck_assert_uint_eq(((uint8_t *)got)[size], 0); /* terminator */
    pdc_free(got);
    /* replace with shorter content; empty file */
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "xyz", 3));
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, 3);
    ck_assert_str_eq(got, "xyz");
    pdc_free(got);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, NULL, 0));
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, 0);
    pdc_free(got);
    ck_assert_int_eq(count_temp_files(), 0);
    /* a relative path (directory ".") */
    char cwd[512];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_eq(chdir(tmpdir), 0);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, "rel.bin", "r", 1));
    ck_assert_int_eq(chdir(cwd), 0);
    ck_assert_ok(ctx, pdc_file_read(ctx, tmp_path("rel.bin"), &got, &size));
    ck_assert_uint_eq(size, 1);
    pdc_free(got);
}
END_TEST

START_TEST(test_file_permissions)
{
    mode_t old = umask(027);
    const char *path = tmp_path("perm.bin");
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "a", 1));
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0640);
    /* a replaced file keeps its mode */
    ck_assert_int_eq(chmod(path, 0604), 0);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "bb", 2));
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0604);
    ck_assert_int_eq(st.st_size, 2);
    umask(old);
}
END_TEST

START_TEST(test_file_errors)
{
    void *got = (void *)1;
    size_t size = 99;
    char path[600];
    snprintf(path, sizeof path, "%s/no/such/dir/model.pdc", tmpdir);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, path, "abc", 3), PDC_ERR_IO);
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, strerror(ENOENT));
    ck_assert_status(ctx, pdc_file_read(ctx, path, &got, &size), PDC_ERR_IO);
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, strerror(ENOENT));
    ck_assert_ptr_eq(got, (void *)1);
    ck_assert_uint_eq(size, 99);
    /* directories are refused both ways */
    ck_assert_status(ctx, pdc_file_read(ctx, tmpdir, &got, &size), PDC_ERR_IO);
    ck_assert_error_has(ctx, tmpdir);
    ck_assert_error_has(ctx, strerror(EISDIR));
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, tmpdir, "abc", 3), PDC_ERR_IO);
    ck_assert_error_has(ctx, tmpdir);
    ck_assert_status(ctx, pdc_file_read(ctx, NULL, &got, &size), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, NULL, "abc", 3), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, tmp_path("x"), NULL, 3), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_file_read(ctx, "", &got, &size), PDC_ERR_INVALID_ARG);
    ck_assert_int_eq(count_temp_files(), 0);
    /* a file larger than max_memory is refused with the path in the message */
    const char *big = tmp_path("big.bin");
    uint8_t data[4096] = {0};
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, big, data, sizeof data));
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "1000"));
    ck_assert_status(ctx, pdc_file_read(ctx, big, &got, &size), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, big);
}
END_TEST

START_TEST(test_failed_write_keeps_old_file)
{
    const char *path = tmp_path("keep.pdc");
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "original", 8));
    /* Make the write itself fail: a file size limit below the new content (works as root too). */
    struct rlimit old, lim;
    ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    static uint8_t data[8192];
    memset(data, 'n', sizeof data);
    pdc_status st = pdc_file_write_atomic(ctx, path, data, sizeof data);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    ck_assert_msg(st == PDC_ERR_IO, "got %s", pdc_status_string(st));
    ck_assert_error_has(ctx, path);
    ck_assert_error_has(ctx, strerror(EFBIG));
    void *got;
    size_t size;
    ck_assert_ok(ctx, pdc_file_read(ctx, path, &got, &size));
    ck_assert_uint_eq(size, 8);
    ck_assert_mem_eq(got, "original", 8);
    pdc_free(got);
    ck_assert_int_eq(count_temp_files(), 0);
}
END_TEST

START_TEST(test_read_refuses_non_regular_files)
{
    /* pipes, FIFOs and devices are refused before anything is read or allocated: /dev/zero never
     * ends, a FIFO without a writer would block the open (it is opened with O_NONBLOCK) */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(write(fds[1], "abc", 3), 3);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fds[0]);
    void *got = SENTINEL_PTR;
    size_t size = 99;
    ck_assert_status(ctx, pdc_file_read(ctx, path, &got, &size), PDC_ERR_IO);
    ck_assert_error_has(ctx, "a FIFO, not a regular file");
    close(fds[0]);
    close(fds[1]);
    ck_assert_status(ctx, pdc_file_read(ctx, "/dev/zero", &got, &size), PDC_ERR_IO);
    ck_assert_error_has(ctx, "cannot read '/dev/zero': a character device, not a regular file");
    const char *fifo = tmp_path("fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_status(ctx, pdc_file_read(ctx, fifo, &got, &size), PDC_ERR_IO);
    ck_assert_error_has(ctx, "a FIFO, not a regular file");
    ck_assert_ptr_eq(got, SENTINEL_PTR);
    ck_assert_uint_eq(size, 99);
}
END_TEST

START_TEST(test_write_replaces_only_regular_files)
{
    /* a FIFO, a device or a symbolic link at the target is refused and left in place */
    const char *fifo = tmp_path("out.fifo");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, fifo, "abc", 3), PDC_ERR_IO);
    ck_assert_error_has(ctx, "it is a FIFO; only a regular file is replaced");
    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    const char *target = tmp_path("target.bin"), *link = tmp_path("link.bin");
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, target, "t", 1));
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, link, "abc", 3), PDC_ERR_IO);
    ck_assert_error_has(ctx, "it is a symbolic link; only a regular file is replaced");
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    const char *dev = tmp_path("null");
    ck_assert_int_eq(symlink("/dev/null", dev), 0);
    ck_assert_status(ctx, pdc_file_write_atomic(ctx, "/dev/null", "abc", 3), PDC_ERR_IO);
    ck_assert_error_has(ctx, "cannot write '/dev/null': it is a character device");
    ck_assert_int_eq(count_temp_files(), 0);
}
END_TEST

START_TEST(test_write_removes_stale_temps)
{
    /* temp files of killed saves ("PATH.tmp.XXXXXX", ours, untouched for 5 minutes) go on the next save;
     * recent ones (a save in progress) and other names stay */
    const char *path = tmp_path("ck.pdc");
    char stale[600], fresh[600], other[600];
    snprintf(stale, sizeof stale, "%s.tmp.AbC123", path);
    snprintf(fresh, sizeof fresh, "%s.tmp.XyZ789", path);
    snprintf(other, sizeof other, "%s.tmp.notours", path);
    write_file(stale, "s", 1);
    write_file(fresh, "f", 1);
    write_file(other, "o", 1);
    struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, stale, old, 0), 0);
    ck_assert_int_eq(utimensat(AT_FDCWD, other, old, 0), 0);
    ck_assert_ok(ctx, pdc_file_write_atomic(ctx, path, "new", 3));
    ck_assert_int_eq(access(stale, F_OK), -1);
    ck_assert_int_eq(access(fresh, F_OK), 0);
    ck_assert_int_eq(access(other, F_OK), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("format_bytes");
    test_add_tcase(s, "crc_buf", ctx_setup, ctx_teardown, 0,
                   TEST_LIST(test_crc32_known, test_buf_little_endian, test_reader_counts_and_strings,
                             test_buf_failure_is_sticky));
    test_add_tcase(s, "files", tmpdir_setup, tmpdir_teardown, 0,
                   TEST_LIST(test_file_roundtrip, test_file_permissions, test_file_errors,
                             test_failed_write_keeps_old_file, test_read_refuses_non_regular_files,
                             test_write_replaces_only_regular_files, test_write_removes_stale_temps));
    return test_run_suite(s);
}
