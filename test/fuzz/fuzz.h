/*
 * fuzz.h - shared helpers of the libFuzzer targets in test/fuzz/fuzz_*.c.
 *
 * Each target defines LLVMFuzzerTestOneInput. It is built twice:
 *  - by `make fuzz` with clang-19 -fsanitize=fuzzer,address,undefined (libFuzzer supplies main), and
 *  - by `make test-fuzz-regressions` with the normal compiler and flags (SANITIZE=... included),
 *    linked with test/fuzz/replay.c, whose main() feeds it every file of its corpus and regression
 *    folders; so every crash ever found stays a test without needing clang.
 * A target fails by calling fuzz_fail(), which prints the broken property and aborts: libFuzzer
 * records the input as a crash, and the replay driver exits non-zero.
 *
 * Properties every target checks on every input: no crash, no sanitizer report, no leak; a failed
 * call returns a documented status (never PDC_ERR_INTERNAL), has a non-empty message, and leaves
 * its out-parameter untouched.
 */
#ifndef PDC_TEST_FUZZ_H
#define PDC_TEST_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/crc32.h"
#include "lib/format/format_pdc.h"
#include "pdc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Largest single allocation a fuzzed model may make: a caller that loads untrusted models sets
 * max_memory, and this keeps libFuzzer's malloc limit (2 GiB) out of the way. */
#define FUZZ_MAX_MEMORY "67108864"

#define fuzz_fail(...)                                                       \
    do {                                                                     \
        fprintf(stderr, "fuzz: %s:%d: property broken: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                        \
        fputc('\n', stderr);                                                 \
        abort();                                                             \
    } while (0)

#define fuzz_check(cond, ...)                  \
    do {                                       \
        if (!(cond)) fuzz_fail(__VA_ARGS__);   \
    } while (0)

/* A placeholder an out-parameter holds before a call; a failed call must leave it there. */
#define FUZZ_UNTOUCHED ((void *)(uintptr_t)0x5a5a5a5a)

static inline pdc_context *fuzz_context(void)
{
    pdc_context *ctx = NULL;
    if (pdc_context_create(&ctx) != PDC_OK) fuzz_fail("pdc_context_create failed");
    if (pdc_context_set_option(ctx, "max_memory", FUZZ_MAX_MEMORY) != PDC_OK) fuzz_fail("set max_memory");
    return ctx;
}

/* A heap copy of exactly `size` bytes (at least one byte allocated), so that any read past the
 * end of the input is caught by ASan instead of landing in libFuzzer's larger buffer. */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    if (!p) fuzz_fail("out of memory copying the input");
    if (size) memcpy(p, data, size);
    return p;
}

/* Checks a failed call: documented status, message present, out-parameter untouched. */
static inline void fuzz_check_failure(const pdc_context *ctx, pdc_status st, const void *out, const char *call)
{
    fuzz_check(st != PDC_ERR_INTERNAL, "%s returned PDC_ERR_INTERNAL: %s", call, pdc_context_last_error(ctx));
    fuzz_check(st > PDC_OK && st <= PDC_ERR_NUMERIC, "%s returned status %d", call, (int)st);
    fuzz_check(pdc_context_last_error(ctx)[0] != '\0', "%s failed with %s and no message", call,
               pdc_status_string(st));
    fuzz_check(out == FUZZ_UNTOUCHED, "%s failed with %s but wrote its out-parameter", call, pdc_status_string(st));
}

/*
 * Makes a .pdc image pass the header checks that random mutation almost never satisfies: if the
 * input starts with the magic and holds a header and trailer, the payload length is set to what
 * the input holds and the trailing CRC-32 is recomputed. So the fuzzer explores the payload; the
 * header, length and checksum checks themselves are covered by test/format/test_format_roundtrip.c.
 */
static inline void fuzz_fix_pdc_image(uint8_t *p, size_t size)
{
    if (size < PDC_FORMAT_HEADER_SIZE + PDC_FORMAT_TRAILER_SIZE || !pdc_format_is_pdc(p, size)) return;
    pdc_store_u64le(p + 16, (uint64_t)(size - PDC_FORMAT_HEADER_SIZE - PDC_FORMAT_TRAILER_SIZE));
    pdc_store_u32le(p + size - 4, pdc_crc32(0, p, size - 4));
}

#endif
