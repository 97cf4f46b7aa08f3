/*
 * testutil.h - shared helpers for the Check suites: a runner main, float comparison, a
 * context fixture, and a status assertion that prints the context's message when it fails.
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

/* Path of a file in test/data (PDC_TEST_DATA overrides the directory). */
static inline const char *test_data_path(const char *name)
{
    static char buf[1024];
    const char *dir = getenv("PDC_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "test/data", name);
    return buf;
}

#endif
