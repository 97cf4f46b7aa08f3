/*
 * test_cpu_runtime.c - the "cpu" target's runtime: graph outputs written into the caller's buffers or
 * copied, results bit-identical at 1 and 2 threads, the team-size rule and /proc/loadavg parsing, the
 * work shares (each item once, in order, stolen from the back), and the kernel cache (reuse, damaged
 * entries rebuilt, an unwritable directory, identical layers sharing a kernel).
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/conv/conv.h"
#include "backends/llvm/llvm.h"
#include "lib/core/crc32.h"
#include "lib/core/sha256.h"
#include "test/common/testutil.h"
#include "test/common/cpu_cases.h"

/* ------------------------------------------------------------------ outputs, threads, work shares */

/* Graph outputs go straight into the caller's buffers where that is safe, else through the arena:
 * an output a later layer reads (c), an output passed in the input's own tensor while a later
 * layer still reads the input (r = c + x would read c instead of x), a program with a
 * reference-kernel layer (which could fail mid-run, and a failed run must leave outputs alone). */
START_TEST(outputs_in_callers_buffers_or_copied)
{
    for (int fallback = 0; fallback < 2; fallback++) {
        input("x", DIMS(1, 8, 20, 20));
        constant_rand("w", DIMS(8, 8, 3, 3), 0.3f, 7);
        layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c", NAMES("x", "w"));
        layer("add", NULL, "r", NAMES("c", "x"));
        if (fallback) { /* q = a batchnorm of r by r's own channel means, statistics computed at run time,
                         * which the cpu target leaves to the reference */
            const float var[8] = {0.5f, 1.0f, 1.5f, 2.0f, 0.7f, 0.9f, 1.1f, 1.3f};
            layer("global_avgpool", NULL, "m1", NAMES("r"));
            layer("reshape", set_ints(attrs(), "shape", DIMS(8)), "mu", NAMES("m1"));
            constant_rand("g", DIMS(8), 1.0f, 8);
            constant_rand("be", DIMS(8), 0.5f, 9);
            constant("va", DIMS(8), var);
            layer("batchnorm", NULL, "q", NAMES("r", "g", "be", "mu", "va"));
        }
        output("c");
        output(fallback ? "q" : "r");
        pdc_program *pc = check_matches_ref(fallback ? "with a ref layer" : "all jit", 3);
        ck_assert_kernel(pc, fallback ? "q" : "r", fallback ? "ref fallback: batchnorm statistics" : "jit elementwise");
        pdc_program *pr = NULL;
        ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
        size_t n = 8 * 20 * 20;
        pdc_tensor *x, *c, *r, *r2;
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &x));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &c));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &r));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(1, 8, 20, 20), &r2));
        test_fill_random(pdc_tensor_data(x), n, 11);
        ck_assert_ok(ctx, pdc_program_run(pr, 1, &x, 2, (pdc_tensor *[]){c, r}));
        /* the input's tensor as output 0: the conv's result may land in it only after the run */
        ck_assert_ok(ctx, pdc_program_run(pc, 1, &x, 2, (pdc_tensor *[]){x, r2}));
        assert_close(pdc_tensor_data(x), pdc_tensor_data(c), n, "output 0 in the input's tensor");
        assert_close(pdc_tensor_data(r2), pdc_tensor_data(r), n, "output 1 beside it");
        pdc_tensor_destroy(x), pdc_tensor_destroy(c), pdc_tensor_destroy(r), pdc_tensor_destroy(r2);
        pdc_program_destroy(pr);
        pdc_program_destroy(pc);
        fresh_model("second");
    }
}
END_TEST

START_TEST(results_do_not_depend_on_threads)
{
    input("x", DIMS(1, 24, 30, 30));
    constant_rand("w", DIMS(40, 24, 3, 3), 0.3f, 1);
    layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c", NAMES("x", "w"));
    constant_rand("w1", DIMS(32, 40, 1, 1), 0.3f, 2);
    layer("conv", NULL, "c1", NAMES("c", "w1"));
    layer("flatten", NULL, "f", NAMES("c1"));
    constant_rand("w2", DIMS(300, 28800), 0.01f, 3);
    layer("fc", NULL, "y", NAMES("f", "w2"));
    output("y");
    check_thread_invariance("conv, 1x1 conv, fc");
}
END_TEST

START_TEST(team_size_rule_and_loadavg_parsing)
{
    /* the runnable count of /proc/loadavg, and the team: at most `threads`, at most the cores other
     * processes leave free, never below one */
    ck_assert_int_eq(cpu_loadavg_running("0.31 0.71 0.77 2/150 12345\n"), 2);
    ck_assert_int_eq(cpu_loadavg_running("1.00 1.00 1.00 17/903 1"), 17);
    ck_assert_int_eq(cpu_loadavg_running("0.31 0.71 0.77"), -1);
    ck_assert_int_eq(cpu_loadavg_running("garbage"), -1);
    ck_assert_int_eq(cpu_loadavg_running("0,31 0,71 0,77 3/150 12345"), 3); /* any decimal point */
    ck_assert_int_eq(cpu_loadavg_running(NULL), -1);
    ck_assert_int_eq(cpu_team_for(2, 2, 0), 2);
    ck_assert_int_eq(cpu_team_for(2, 2, 1), 1);
    ck_assert_int_eq(cpu_team_for(2, 2, 5), 1);
    ck_assert_int_eq(cpu_team_for(4, 16, 3), 4);
    ck_assert_int_eq(cpu_team_for(8, 16, 10), 6);
    ck_assert_int_eq(cpu_team_for(2, 2, -1), 2);
    /* on this machine: within [1, threads] */
    int n = cpu_team_size(2);
    ck_assert(n >= 1 && n <= 2);
    ck_assert_int_eq(cpu_team_size(1), 1);
}
END_TEST

/* The next item of cpu_share_next where every run is 1 long. */
static int64_t next1(cpu_share *sh, int t, int nt)
{
    int64_t count = 0, it = cpu_share_next(sh, t, nt, &count);
    if (it >= 0) ck_assert_int_eq(count, 1);
    return it;
}

START_TEST(work_shares_each_item_once)
{
    /* one thread at a time, so the order is known: thread t's own share front to back (in runs of
     * a sixteenth of it, at least 1), then the back of the next threads' shares, one at a time */
    enum { MAXT = 8, N = 4000 };
    cpu_share *sh = aligned_alloc(64, MAXT * sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    cpu_share_split(sh, 3, 10, 1); /* [0,3) [3,6) [6,10) */
    static const int64_t want0[] = {0, 1, 2, 5, 4, 3, 9, 8, 7, 6, -1};
    for (int i = 0; i < 11; i++) ck_assert_int_eq(next1(sh, 0, 3), want0[i]);
    ck_assert_int_eq(next1(sh, 1, 3), -1);
    ck_assert_int_eq(next1(sh, 2, 3), -1);
    cpu_share_split(sh, 2, 7, 3); /* 7 units of 3 items: [0,9) [9,21) */
    ck_assert(cpu_share_owns(0, 2, 7, 2) && !cpu_share_owns(0, 2, 7, 3));
    ck_assert(cpu_share_owns(1, 2, 7, 3) && cpu_share_owns(1, 2, 7, 6) && !cpu_share_owns(1, 2, 7, 2));
    for (int64_t i = 0; i < 9; i++) ck_assert_int_eq(next1(sh, 0, 2), i);
    ck_assert_int_eq(next1(sh, 1, 2), 9);
    ck_assert_int_eq(next1(sh, 0, 2), 20); /* the back of thread 1's */
    /* shares of 40: runs of 2 (a sixteenth) from the front while 16 or more are left, then 1; a
     * thief takes 1 */
    cpu_share_split(sh, 2, 80, 1);
    int64_t cnt = 0;
    ck_assert_int_eq(cpu_share_next(sh, 0, 2, &cnt), 0);
    ck_assert_int_eq(cnt, 2);
    for (int64_t want = 40; want < 80; want += cnt) {
        ck_assert_int_eq(cpu_share_next(sh, 1, 2, &cnt), want);
        ck_assert_int_eq(cnt, 80 - want >= 16 ? 2 : 1);
    }
    ck_assert_int_eq(cpu_share_next(sh, 1, 2, &cnt), 39); /* thread 1's done: the back of thread 0's */
    ck_assert_int_eq(cnt, 1);
    ck_assert_int_eq(cpu_share_next(sh, 0, 2, &cnt), 2);
    ck_assert_int_eq(cnt, 2);
    cpu_share_split(sh, 3, 2, 1); /* fewer items than threads: [0,0) [0,1) [1,2) */
    ck_assert_int_eq(next1(sh, 0, 3), 0); /* the back of thread 1's */
    ck_assert_int_eq(next1(sh, 2, 3), 1);
    ck_assert_int_eq(next1(sh, 1, 3), -1);
    ck_assert_int_eq(next1(sh, 2, 3), -1);

    /* real teams of 1, 2, 3 and 8 threads over a split for 8: every item exactly once, a thread's own
     * items in increasing order, a thread that starts only after the others have finished finds its
     * whole share taken by them, and the shares of threads the team lacks are taken too */
    static const int teams[] = {1, 2, 3, 8};
    static const int64_t counts[] = {0, 1, 7, N};
    for (size_t ti = 0; ti < sizeof teams / sizeof teams[0]; ti++)
        for (size_t ni = 0; ni < sizeof counts / sizeof counts[0]; ni++) {
            int64_t n = counts[ni];
            static _Atomic int taken[N];
            static int64_t by[N];
            for (int64_t i = 0; i < n; i++) {
                atomic_store(&taken[i], 0);
                by[i] = -1;
            }
            int team = teams[ti], split = MAXT;
            _Atomic int ordered = 1, finished = 0, got = 0, outside = 0;
            cpu_share_split(sh, split, n, 1);
#pragma omp parallel num_threads(team)
            {
                int me = omp_get_thread_num(), nt = omp_get_num_threads();
                if (me == 0) /* held back until the others ran out of work */
                    while (atomic_load(&finished) < nt - 1) nanosleep(&(struct timespec){0, 100000}, NULL);
                int64_t last = -1, lo = n * me / split, hi = n * (me + 1) / split;
                for (int64_t it, run; (it = cpu_share_next(sh, me, split, &run)) >= 0;)
                    for (const int64_t end = it + run; it < end; it++) {
                        if (it >= n || run < 1) {
                            outside = 1;
                            break;
                        }
                        atomic_fetch_add(&taken[it], 1);
                        by[it] = me;
                        if (it >= lo && it < hi) {
                            if (it <= last) ordered = 0;
                            last = it;
                        }
                    }
                if (me > 0) atomic_fetch_add(&finished, 1);
                if (me == 0) got = nt;
            }
            ck_assert_msg(!outside, "team %d, %" PRId64 " items: an item past the end", got, n);
            for (int64_t i = 0; i < n; i++) {
                ck_assert_msg(taken[i] == 1, "team %d, %" PRId64 " items: item %" PRId64 " taken %d times", got, n,
                              i, (int)taken[i]);
                if (got > 1) ck_assert_msg(by[i] != 0, "team %d: item %" PRId64 " left to thread 0", got, i);
            }
            ck_assert_msg(ordered, "team %d: a thread's own items out of order", got);
        }
    free(sh);
}
END_TEST

/* ------------------------------------------------------------------ kernel cache */

/* A model with a few distinct kernels: a conv, an fc with block sparsity, an activation (after the
 * flatten, so that it is not fused into the conv). */
static void cache_model(void)
{
    input("x", DIMS(1, 5, 9, 11));
    constant_rand("w", DIMS(6, 5, 3, 3), 0.5f, 1);
    layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c", NAMES("x", "w"));
    layer("flatten", NULL, "f", NAMES("c"));
    layer("leaky_relu", NULL, "r", NAMES("f"));
    uint8_t mask[7 * 594];
    for (int i = 0; i < 7 * 594; i++) mask[i] = i % 5 == 0;
    constant_masked("w2", DIMS(7, 594), mask, 2);
    layer("fc", NULL, "y", NAMES("r", "w2"));
    output("y");
}

/* A fresh context (and model) using cache directory dir; returns the JIT statistics after compiling. */
static void compile_in_fresh_context(const char *dir, size_t *built, size_t *cached)
{
    pdc_model_destroy(mdl);
    pdc_context_destroy(ctx);
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", dir));
    ck_assert_ok(ctx, pdc_model_create(ctx, "cache", &mdl));
    cache_model();
    pdc_program_destroy(check_matches_ref("cache model", 3));
    pdc_jit_stats(ctx->jit, built, cached, NULL);
}

static int count_entries(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels", dir);
    DIR *d = opendir(path);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".o") && !strstr(e->d_name, ".tmp")) n++;
    closedir(d);
    return n;
}

/* Damages every cache entry in a different way (by index): truncated, a flipped byte in the object,
 * a foreign header, empty. */
static void damage_entries(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels", dir);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int i = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".o")) continue;
        char f[2048];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        struct stat sb;
        ck_assert_int_eq(stat(f, &sb), 0);
        FILE *fp = fopen(f, "r+b");
        ck_assert_ptr_nonnull(fp);
        switch (i++ % 4) {
        case 0: ck_assert_int_eq(ftruncate(fileno(fp), sb.st_size / 2), 0); break;
        case 1: {
            fseek(fp, sb.st_size - 100, SEEK_SET);
            int ch = fgetc(fp);
            fseek(fp, sb.st_size - 100, SEEK_SET);
            fputc(ch ^ 0x5a, fp);
            break;
        }
        case 2: fwrite("NOTANOBJECT!", 1, 12, fp); break;
        default: ck_assert_int_eq(ftruncate(fileno(fp), 0), 0); break;
        }
        fclose(fp);
    }
    closedir(d);
}

START_TEST(cache_second_compile_loads_objects)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/fresh", cache_dir);
    size_t built, cached;
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_ge(built, 3);
    ck_assert_uint_eq(cached, 0);
    int n = count_entries(dir);
    ck_assert_int_eq(n, (int)built);
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_eq(built, 0);
    ck_assert_uint_eq(cached, (size_t)n);
}
END_TEST

START_TEST(cache_damaged_entries_are_rebuilt)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/damaged", cache_dir);
    size_t built, cached;
    compile_in_fresh_context(dir, &built, &cached);
    size_t n = built;
    damage_entries(dir);
    /* every damaged entry is a miss: rebuilt, results still right, entries rewritten */
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_eq(built, n);
    ck_assert_uint_eq(cached, 0);
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_eq(built, 0);
    ck_assert_uint_eq(cached, n);
}
END_TEST

START_TEST(cache_unwritable_dir_still_compiles)
{
    char file[512], dir[600];
    snprintf(file, sizeof file, "%s/plainfile", cache_dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(dir, sizeof dir, "%s/sub", file); /* a directory under a regular file cannot exist */
    size_t built, cached;
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_ge(built, 3);
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_ge(built, 3); /* nothing could be cached */
}
END_TEST

/* Calls f(arg, path of entry i) for every entry of dir's cache. */
static void each_entry(const char *dir, void (*f)(const char *path, int i))
{
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels", dir);
    DIR *d = opendir(path);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int i = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".o") || strstr(e->d_name, ".tmp")) continue;
        char full[2048];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        f(full, i++);
    }
    closedir(d);
}

static void put_file(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Flips object bytes and writes the CRC-32 of the changed key+object where version 1 kept its CRC
 * (bytes 24..27): what made the old format run edited code (SIGILL). */
static void tamper(const char *path, int i)
{
    (void)i;
    size_t n;
    uint8_t *b = (uint8_t *)test_read_file(path, &n);
    ck_assert_uint_gt(n, 200);
    for (size_t k = n - 64; k < n - 32; k++) b[k] = 0x0f; /* ud2 ud2 ...: SIGILL if ever executed */
    uint32_t crc = pdc_crc32(0, b + 56, n - 56);
    memcpy(b + 24, &crc, 4);
    put_file(path, b, n);
    free(b);
}

/* A valid entry (right key, right SHA-256) whose object is not an object file. */
static void unloadable(const char *path, int i)
{
    (void)i;
    size_t n;
    uint8_t *b = (uint8_t *)test_read_file(path, &n);
    const uint32_t key_len = (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
    for (size_t k = 56 + key_len; k < n; k++) b[k] = (uint8_t)(k * 7);
    ck_assert_int_eq(pdc_sha256(b + 56, n - 56, NULL, 0, b + 24), 0);
    put_file(path, b, n);
    free(b);
}

/* Entries replaced by a symlink to /dev/zero, a FIFO, a symlink to a good copy, a group-writable copy. */
static void not_a_file(const char *path, int i)
{
    char copy[2100];
    snprintf(copy, sizeof copy, "%s.copy", path);
    switch (i % 4) {
    case 0: ck_assert_int_eq(unlink(path), 0); ck_assert_int_eq(symlink("/dev/zero", path), 0); break;
    case 1: ck_assert_int_eq(unlink(path), 0); ck_assert_int_eq(mkfifo(path, 0600), 0); break;
    case 2: ck_assert_int_eq(rename(path, copy), 0); ck_assert_int_eq(symlink(copy, path), 0); break;
    default: ck_assert_int_eq(chmod(path, 0664), 0); break;
    }
}

/* Every entry of dir is a regular file of mode 0600 (rewritten). */
static void assert_entries_regular(const char *path, int i)
{
    (void)i;
    struct stat st;
    ck_assert_int_eq(lstat(path, &st), 0);
    ck_assert_msg(S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600, "%s: mode 0%o", path, (unsigned)st.st_mode);
}

START_TEST(cache_tampered_or_unloadable_entries_are_rebuilt)
{
    void (*const spoil[])(const char *, int) = {tamper, unloadable, not_a_file};
    for (int k = 0; k < 3; k++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/spoiled%d", cache_dir, k);
        size_t built, cached;
        compile_in_fresh_context(dir, &built, &cached);
        const size_t n = built;
        each_entry(dir, spoil[k]);
        /* never executed (the results match ref), rebuilt and replaced, then cached again */
        alarm(120); /* a FIFO entry must not block */
        compile_in_fresh_context(dir, &built, &cached);
        alarm(0);
        ck_assert_uint_eq(built, n);
        ck_assert_uint_eq(cached, 0);
        each_entry(dir, assert_entries_regular);
        compile_in_fresh_context(dir, &built, &cached);
        ck_assert_uint_eq(built, 0);
        ck_assert_uint_eq(cached, n);
    }
}
END_TEST

START_TEST(cache_dir_is_private_or_refused)
{
    char dir[512], kdir[600];
    snprintf(dir, sizeof dir, "%s/private/pdc", cache_dir);
    size_t built, cached;
    compile_in_fresh_context(dir, &built, &cached);
    const size_t n = built;
    struct stat st;
    snprintf(kdir, sizeof kdir, "%s/kernels", dir);
    ck_assert_int_eq(stat(dir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0700);
    ck_assert_int_eq(stat(kdir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0700);
    /* writable by others: refused with a warning on stderr, kernels built without it, nothing read */
    static const char *const what[] = {"writable by others (mode 777)", "writable by its group (mode 770)"};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(chmod(k ? kdir : dir, k ? 0770 : 0777), 0);
        char log[600];
        snprintf(log, sizeof log, "%s/stderr.txt", cache_dir);
        fflush(stderr);
        int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        ck_assert_int_ge(fd, 0);
        dup2(fd, 2);
        compile_in_fresh_context(dir, &built, &cached);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        close(fd);
        ck_assert_uint_eq(built, n);
        ck_assert_uint_eq(cached, 0);
        size_t len;
        char *text = test_read_file(log, &len);
        ck_assert_msg(strstr(text, "kernel cache: not using '") && strstr(text, what[k]) &&
                          strstr(text, "kernels are built without a cache"),
                      "warning: %s", text);
        free(text);
        ck_assert_int_eq(chmod(k ? kdir : dir, 0700), 0);
    }
    compile_in_fresh_context(dir, &built, &cached);
    ck_assert_uint_eq(cached, n);
    /* entries of another user are not trusted (as root, chown can make one) */
    if (geteuid() == 0) {
        int chowned = 0;
        DIR *d = opendir(kdir);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strstr(e->d_name, ".o")) continue;
            char f[1200];
            snprintf(f, sizeof f, "%s/%s", kdir, e->d_name);
            ck_assert_int_eq(chown(f, 12345, 12345), 0);
            chowned++;
        }
        closedir(d);
        compile_in_fresh_context(dir, &built, &cached);
        ck_assert_uint_eq(built, (size_t)chowned);
        ck_assert_uint_eq(cached, 0);
    }
}
END_TEST

START_TEST(identical_layers_share_kernels)
{
    /* two convs of the same shape and pattern set compile one kernel */
    input("x", DIMS(1, 4, 10, 10));
    constant_rand("w1", DIMS(4, 4, 3, 3), 0.5f, 1);
    constant_rand("w2", DIMS(4, 4, 3, 3), 0.5f, 2);
    layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c1", NAMES("x", "w1"));
    layer("conv", set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "c2", NAMES("c1", "w2"));
    output("c2");
    pdc_program_destroy(check_matches_ref("two convs", 1));
    size_t shared = 0;
    pdc_jit_stats(ctx->jit, NULL, NULL, &shared);
    ck_assert_uint_ge(shared, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu_runtime");
    bc_add_some_cases(s, bc_setup, bc_teardown, 0);
    test_add_tcase(s, "threads", bc_setup, bc_teardown, 300,
                   TEST_LIST(outputs_in_callers_buffers_or_copied, results_do_not_depend_on_threads));
    test_add_tcase(s, "shares", bc_setup, bc_teardown, 120,
                   TEST_LIST(team_size_rule_and_loadavg_parsing, work_shares_each_item_once));
    test_add_tcase(s, "cache", bc_setup, bc_teardown, 300,
                   TEST_LIST(cache_second_compile_loads_objects, cache_damaged_entries_are_rebuilt,
                             cache_unwritable_dir_still_compiles, cache_tampered_or_unloadable_entries_are_rebuilt,
                             cache_dir_is_private_or_refused, identical_layers_share_kernels));
    return cpu_run(s);
}
