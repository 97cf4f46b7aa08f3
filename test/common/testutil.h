/*
 * testutil.h - shared helpers for the Check suites: a runner main, tcases built from lists of tests,
 * float comparison, pseudo-random data, whole files read back, and a status assertion that prints the
 * context's message when it fails.
 */
#ifndef PDC_TEST_TESTUTIL_H
#define PDC_TEST_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"

/* Asserts a call returned `expected`; on mismatch shows the context's last error. */
#define ck_assert_status(ctx, call, expected)                                                          \
    do {                                                                                              \
        pdc_status st__ = (call);                                                                     \
        ck_assert_msg(st__ == (expected), "%s returned %s, expected %s: %s", #call,                   \
                      pdc_status_string(st__), pdc_status_string(expected), pdc_context_last_error(ctx)); \
    } while (0)
#define ck_assert_ok(ctx, call) ck_assert_status(ctx, call, PDC_OK)

/* Asserts the context's last error contains `needle`. */
#define ck_assert_error_has(ctx, needle)                                                              \
    ck_assert_msg(strstr(pdc_context_last_error(ctx), (needle)) != NULL,                              \
                  "error message \"%s\" lacks \"%s\"", pdc_context_last_error(ctx), (needle))

/* Max |a-b| <= tol * max(1, max|b|) over n floats; reports the worst index. */
static inline void ck_assert_floats_near(const float *got, const float *want, size_t n, float tol)
{
    float scale = 1.0f, worst = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) scale = fmaxf(scale, fabsf(want[i]));
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= worst)) { worst = d; at = i; }   /* NaN-safe: NaN is always worse */
    }
    ck_assert_msg(worst <= tol * scale, "element %zu: got %.9g, want %.9g (|diff| %.3g > %.3g)", at,
                  (double)got[at], (double)want[at], (double)worst, (double)(tol * scale));
}

/* A target's output against the reference: max |got - want| <= tol * max |want| (exact when want is
 * all zeros); the message names the worst element, as `who` (the target) got it, and `what`. */
static inline void test_assert_close(const float *got, const float *want, size_t n, float tol, const char *who,
                                     const char *what)
{
    float scale = 0.0f, worst = 0.0f;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) scale = fmaxf(scale, fabsf(want[i]));
    for (size_t i = 0; i < n; i++) {
        float d = fabsf(got[i] - want[i]);
        if (!(d <= worst)) {
            worst = d;
            at = i;
        }
    }
    ck_assert_msg(worst <= tol * scale, "%s: element %zu of %zu: %s %.9g, ref %.9g (|diff| %.3g > %g x %.3g)", what, at,
                  n, who, (double)got[at], (double)want[at], (double)worst, (double)tol, (double)scale);
}

/* Deterministic pseudo-random floats in [-1, 1). */
static inline void test_fill_random(float *x, size_t n, uint32_t seed)
{
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 17; s ^= s << 5;
        x[i] = (float)((double)s / 2147483648.0 - 1.0);
    }
}

/* Runs one suite; exit status says whether all passed. Tests fork (CK_FORK=no for gdb/valgrind). */
static inline int test_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* A NULL-terminated list of tests for test_add_tcase: TEST_LIST(a, b, c). */
#define TEST_LIST(...) ((const TTest *const[]){__VA_ARGS__, NULL})

/* Adds the tests of a TEST_LIST (or NULL: none) to tc, in order. */
static inline void test_add_tests(TCase *tc, const TTest *const *tests)
{
    for (size_t i = 0; tests && tests[i]; i++) tcase_add_test(tc, tests[i]);
}

/* A tcase `name` added to s, with the checked fixture setup/teardown (if either is not NULL), a timeout
 * in seconds (0: Check's default) and the tests of a TEST_LIST (or NULL: none yet). */
static inline TCase *test_add_tcase(Suite *s, const char *name, SFun setup, SFun teardown, double timeout,
                                    const TTest *const *tests)
{
    TCase *tc = tcase_create(name);
    if (setup || teardown) tcase_add_checked_fixture(tc, setup, teardown);
    if (timeout > 0) tcase_set_timeout(tc, timeout);
    suite_add_tcase(s, tc);
    test_add_tests(tc, tests);
    return tc;
}

/* The whole file at path, NUL-terminated (malloc'd, the caller frees it; *len its size if len is not
 * NULL). Asserts that it can be read. */
/* A new private directory "$TMPDIR/pdc-test-NAME-XXXXXX" (TMPDIR default /tmp) into buf; NULL if it
 * cannot be made (mkdtemp's errno). */
static inline char *test_make_temp_dir(char *buf, size_t cap, const char *name)
{
    const char *root = getenv("TMPDIR");
    int n = snprintf(buf, cap, "%s/pdc-test-%s-XXXXXX", root && *root ? root : "/tmp", name);
    return n > 0 && (size_t)n < cap ? mkdtemp(buf) : NULL;
}

static inline char *test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char *text = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? 2 * cap : 8192;
            text = realloc(text, cap + 1);
            ck_assert_ptr_nonnull(text);
        }
        size_t got = fread(text + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    ck_assert_msg(!ferror(f), "error reading %s", path);
    fclose(f);
    text[n] = 0;
    if (len) *len = n;
    return text;
}

/* Path of a file in test/data (PDC_TEST_DATA overrides the directory). */
static inline const char *test_data_path(const char *name)
{
    static char buf[1024];
    const char *dir = getenv("PDC_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "test/data", name);
    return buf;
}

#endif
