/*
 * test_limits.c - resource limits: sizes and counts that would overflow, allocations above the
 * context option "max_memory" or above what the machine has, and graph depth. Every case must be
 * refused with a clear status and a message naming what was too large - never a crash, a wrapped
 * size, an abort or a process killed for memory - and a deep graph must go through every stage
 * on a small stack (nothing recurses per layer).
 */
#include <pthread.h>
#include <unistd.h>

#include "lib/core/crc32.h"
#include "lib/core/fileio.h"
#include "lib/format/format_pdc.h"
#include "test/common/builders.h"

/* Under ASan a request beyond its 1 TiB limit aborts by default; a plain malloc returns NULL,
 * which is what this suite checks pdc survives. Harmless in other builds. */
const char *__asan_default_options(void) __attribute__((visibility("default"), used));
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* Parses text; asserts status and that the message contains each of up to two fragments. */
static void parse_fails(const char *text, pdc_status want, const char *frag1, const char *frag2)
{
    pdc_model *m = SENTINEL_PTR;
    ck_assert_status(ctx, pdc_model_parse(ctx, text, strlen(text), &m), want);
    ck_assert_ptr_eq(m, SENTINEL_PTR);
    if (frag1) ck_assert_error_has(ctx, frag1);
    if (frag2) ck_assert_error_has(ctx, frag2);
}

/* The .pdc image of the model in text, into b (pdc_buf_free it). */
static void pdc_image(const char *text, pdc_buf *b)
{
    pdc_model *m = parse_model(text);
    pdc_buf_init(b, ctx);
    ck_assert_ok(ctx, pdc_format_save(m, b));
    pdc_model_destroy(m);
}

/* ------------------------------------------------------------------ overflow */

START_TEST(sizes_that_overflow_are_refused)
{
    pdc_tensor *t = SENTINEL_PTR;
    const int64_t cube[] = {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
    ck_assert_status(ctx, pdc_tensor_create(ctx, 3, cube, &t), PDC_ERR_OVERFLOW);
    ck_assert_error_has(ctx, "tensor: element count overflows");
    ck_assert_ptr_eq(t, SENTINEL_PTR);
    const int64_t bytes_wrap[] = {(int64_t)1 << 62}; /* 2^62 elements fit in size_t, 2^64 bytes do not */
    ck_assert_status(ctx, pdc_tensor_create(ctx, 1, bytes_wrap, &t), PDC_ERR_OVERFLOW);
    ck_assert_ptr_eq(t, SENTINEL_PTR);

    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_create(ctx, "limits", &m));
    const int64_t huge[] = {(int64_t)1 << 40, (int64_t)1 << 40};
    float one = 1.0f;
    ck_assert_status(ctx, pdc_model_add_constant(m, "w", 2, huge, &one), PDC_ERR_OVERFLOW);
    ck_assert_error_has(ctx, "constant 'w': element count overflows");
    const int64_t too_big_dim[] = {1, (int64_t)1 << 31};
    ck_assert_status(ctx, pdc_model_add_input(m, "x", 2, too_big_dim), PDC_ERR_OVERFLOW);
    ck_assert_error_has(ctx, "dim 1 is 2147483648 (at most 2147483647)");
    size_t n = 1;
    ck_assert_ok(ctx, pdc_model_num_inputs(m, &n));
    ck_assert_uint_eq(n, 0);
    pdc_model_destroy(m);

    parse_fails("pdcir 1\ninput x : f32[2147483647,2147483647,2147483647]\n", PDC_ERR_OVERFLOW, "line 2:",
                "input 'x': element count overflows");
    parse_fails("pdcir 1\ninput x : f32[1,9223372036854775807]\n", PDC_ERR_OVERFLOW, "line 2:",
                "dim 1 is 9223372036854775807 (at most 2147483647)");
    parse_fails("pdcir 1\ninput x : f32[1,1,2147483647,2147483647]\nconst w : f32[64,1,3,3] = dense<elided>\n"
                "layer c = conv(x, w) -> (y) {pads=[1,1,1,1]}\n",
                PDC_ERR_OVERFLOW, "line 4:", "output 'y' would be too large");
    parse_fails("pdcir 1\ninput x : f32[2,3]\nlayer r = reshape(x) -> (y) {shape=[1,1,1,1,1,1,1,1,6]}\n",
                PDC_ERR_INVALID_MODEL, "line 3:", "shape has 9 dims, expected 1..8");
}
END_TEST

/* FLOP statistics of valid models with huge shapes exceed int64 (ir/stats.c used to overflow a
 * signed product there: undefined behaviour, found by reading the fuzz_run inspection path). */
START_TEST(statistics_that_overflow_say_so)
{
    pdc_model *m = parse_model("pdcir 1\ninput x : f32[1,16384,8388608,8388608]\n"
                               "const w : f32[1,16384,3,3] = dense<elided>\n"
                               "layer c = conv(x, w) -> (y) {pads=[1,1,1,1]}\noutput y\n");
    int64_t v = -1;
    ck_assert_status(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_DENSE_FLOPS, &v), PDC_ERR_OVERFLOW);
    ck_assert_error_has(ctx, "layer 'c': its FLOP count does not fit in 64 bits");
    ck_assert_int_eq(v, -1);
    ck_assert_status(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_EFFECTIVE_FLOPS, &v), PDC_ERR_OVERFLOW);
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_WEIGHTS, &v));
    ck_assert_int_eq(v, 16384 * 9);
    pdc_model_destroy(m);

    m = parse_model("pdcir 1\ninput a : f32[1,2147483647,4096]\ninput b : f32[1,4096,2147483647]\n"
                    "layer mm = matmul(a, b) -> (y)\noutput y\n");
    ck_assert_status(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_DENSE_FLOPS, &v), PDC_ERR_OVERFLOW);
    ck_assert_error_has(ctx, "layer 'mm'");
    pdc_model_destroy(m);

    /* Large but representable counts are still exact. */
    m = parse_model("pdcir 1\ninput x : f32[1,1,1073741824,1073741824]\n"
                    "layer p = maxpool(x) -> (y) {kernel_shape=[1073741824, 1073741824]}\noutput y\n");
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_DENSE_FLOPS, &v));
    ck_assert_int_eq(v, (int64_t)1 << 60);
    pdc_model_destroy(m);
}
END_TEST

/* A .pdc whose counts claim more than the file holds is refused before anything is allocated. */
START_TEST(binary_counts_beyond_the_file_are_refused)
{
    pdc_buf b;
    pdc_image("pdcir 1\nmodel \"m\"\ninput x : f32[4]\nconst w : f32[4] = [1, 2, 3, 4]\nlayer a = add(x, w) -> (y)\n"
              "output y\n", &b);
    /* payload: str "m" (4 + 1 bytes), then the u32 tensor count at file offset 29 */
    const size_t count_at = PDC_FORMAT_HEADER_SIZE + 5;
    ck_assert_uint_eq(pdc_load_u32le(b.data + count_at), 3);
    static const uint32_t lies[] = {0xffffffffu, 1000000u};
    for (size_t i = 0; i < 2; i++) {
        pdc_store_u32le(b.data + count_at, lies[i]);
        pdc_store_u32le(b.data + b.len - 4, pdc_crc32(0, b.data, b.len - 4));
        pdc_model *out = SENTINEL_PTR;
        ck_assert_status(ctx, pdc_model_load_memory(ctx, b.data, b.len, &out), PDC_ERR_CORRUPT);
        ck_assert_ptr_eq(out, SENTINEL_PTR);
        char want[64];
        snprintf(want, sizeof want, "count %u needs at least", (unsigned)lies[i]);
        ck_assert_error_has(ctx, want);
        ck_assert_error_has(ctx, "tensor count");
    }
    pdc_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------------ max_memory and real exhaustion */

START_TEST(max_memory_refuses_large_allocations)
{
    assert_context_option("max_memory", "0");
    ck_assert_status(ctx, pdc_context_set_option(ctx, "max_memory", "-5"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option max_memory: expected a byte count, got \"-5\"");
    ck_assert_status(ctx, pdc_context_set_option(ctx, "max_memory", "12abc"), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_context_set_option(ctx, "max_memory", "99999999999999999999999"), PDC_ERR_INVALID_ARG);

    /* Built before the limit: a model whose one activation needs 400 kB, and its tensors. */
    pdc_model *m = parse_model("pdcir 1\ninput x : f32[1,100000]\nlayer r = relu(x) -> (y)\n"
                               "layer s = sigmoid(y) -> (z)\noutput z\n");
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    const int64_t d[] = {1, 100000};
    pdc_tensor *x, *z;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 2, d, &x));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 2, d, &z));
    memset(pdc_tensor_data(z), 0xab, 400000);

    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "100000"));
    assert_context_option("max_memory", "100000");

    pdc_tensor *t = SENTINEL_PTR;
    const int64_t big[] = {25001}, ok[] = {25000};
    ck_assert_status(ctx, pdc_tensor_create(ctx, 1, big, &t), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, "allocation of 100004 bytes exceeds max_memory (100000 bytes)");
    ck_assert_ptr_eq(t, SENTINEL_PTR);
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, ok, &t));
    pdc_tensor_destroy(t);

    /* A 40-byte text line asking for 4 MB of zeros (dense<elided>) is refused by the limit. */
    parse_fails("pdcir 1\nconst w : f32[1000,1000] = dense<elided>\n", PDC_ERR_OUT_OF_MEMORY, "line 2:",
                "allocation of 4000000 bytes exceeds max_memory (100000 bytes)");

    /* The run's activation arena is above the limit: refused, outputs untouched. */
    ck_assert_status(ctx, pdc_program_run(p, 1, &x, 1, &z), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, "exceeds max_memory (100000 bytes)");
    const uint8_t *zb = (const uint8_t *)pdc_tensor_data(z);
    for (size_t i = 0; i < 400000; i++) ck_assert_uint_eq(zb[i], 0xab);

    /* Compiled under the limit, the arena is refused at compile time, before any kernel is built:
     * ref and cpu alike, with the arena's size in the message. */
    static const char *const targets[] = {"ref", "cpu"};
    for (int k = 0; k < 2; k++) {
        pdc_program *q = SENTINEL_PTR;
        ck_assert_status(ctx, pdc_compile(ctx, m, targets[k], &q), PDC_ERR_OUT_OF_MEMORY);
        ck_assert_error_has(ctx, k ? "cpu: activation memory of " : "ref: activation memory of ");
        ck_assert_error_has(ctx, "bytes exceeds max_memory (100000 bytes)");
        ck_assert_ptr_eq(q, SENTINEL_PTR);
    }
    /* A 129-byte conv whose pads make a 16 GB output: refused at compile time, nothing allocated. */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "4294967296"));
    pdc_model *pads = parse_model("pdcir 1\ninput x : f32[1,1,1,1]\nconst w : f32[1,1,1,1] = [1.0]\n"
                                  "layer c = conv(x, w) -> (y) {pads=[32000, 32000, 32000, 32000]}\noutput y\n");
    for (int k = 0; k < 2; k++) {
        pdc_program *q = SENTINEL_PTR;
        ck_assert_status(ctx, pdc_compile(ctx, pads, targets[k], &q), PDC_ERR_OUT_OF_MEMORY);
        ck_assert_error_has(ctx, "activation memory of 16384512064 bytes exceeds max_memory (4294967296 bytes)");
    }
    pdc_model_destroy(pads);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "100000"));

    /* The same model as a .pdc image (its constant-free payload is small) still loads, but one with
     * a 400 kB constant does not. */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "0"));
    pdc_buf b;
    pdc_image("pdcir 1\ninput x : f32[100000]\nconst w : f32[100000] = dense<elided>\nlayer a = add(x, w) -> (y)\n"
              "output y\n", &b);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "100000"));
    pdc_model *out = SENTINEL_PTR;
    ck_assert_status(ctx, pdc_model_load_memory(ctx, b.data, b.len, &out), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, "allocation of 400000 bytes exceeds max_memory (100000 bytes)");
    ck_assert_ptr_eq(out, SENTINEL_PTR);
    pdc_buf_free(&b);

    /* A "file" that never ends is not a regular file: refused before anything is read. */
    ck_assert_status(ctx, pdc_model_load(ctx, "/dev/zero", &out), PDC_ERR_IO);
    ck_assert_error_has(ctx, "cannot read '/dev/zero': a character device, not a regular file");
    ck_assert_ptr_eq(out, SENTINEL_PTR);

    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "0"));
    ck_assert_ok(ctx, pdc_program_run(p, 1, &x, 1, &z));
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(z);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

/* Without a limit, requests no machine can satisfy (about 2^62 bytes; valgrind flags sizes of 2^63
 * and more as "fishy") fail as PDC_ERR_OUT_OF_MEMORY: malloc returns NULL, nothing is touched. */
START_TEST(impossible_allocations_fail_cleanly)
{
    pdc_tensor *t = SENTINEL_PTR;
    const int64_t d[] = {(int64_t)1 << 40, (int64_t)1 << 20};
    ck_assert_status(ctx, pdc_tensor_create(ctx, 2, d, &t), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, "out of memory allocating 4611686018427387904 bytes");
    ck_assert_ptr_eq(t, SENTINEL_PTR);
    parse_fails("pdcir 1\nconst w : f32[2147483647,536870912] = dense<elided>\n", PDC_ERR_OUT_OF_MEMORY, "line 2:",
                "out of memory allocating 4611686016279904256 bytes");
}
END_TEST

/* ------------------------------------------------------------------ depth */

#define DEEP_LAYERS 3000
#define SMALL_STACK (256 * 1024) /* with room for sanitizer redzones */

typedef struct deep_job {
    char *text;
    const char *failed; /* NULL, or the stage that failed */
    char message[512];
    float out[4];
} deep_job;

/* Everything a caller does with a model, on a thread with a small stack. Uses no ck_assert
 * (assertions from a second thread are not safe in Check). */
static void *deep_main(void *arg)
{
    deep_job *j = arg;
    pdc_context *c = NULL;
    pdc_model *m = NULL, *back = NULL;
    pdc_program *p = NULL;
    pdc_tensor *x = NULL, *y = NULL;
    char *printed = NULL;
    pdc_buf b = {0};
    const int64_t d[] = {1, 4};
    j->failed = "context";
    if (pdc_context_create(&c)) return NULL;
    pdc_buf_init(&b, c);
#define STAGE(name, call)                                                              \
    do {                                                                               \
        j->failed = name;                                                              \
        if ((call) != PDC_OK) {                                                        \
            snprintf(j->message, sizeof j->message, "%s", pdc_context_last_error(c)); \
            goto out;                                                                  \
        }                                                                              \
    } while (0)
    STAGE("parse", pdc_model_parse(c, j->text, strlen(j->text), &m));
    STAGE("verify", pdc_model_verify(m));
    STAGE("print", pdc_model_print(m, 0, &printed));
    STAGE("save", pdc_format_save(m, &b));
    STAGE("load", pdc_model_load_memory(c, b.data, b.len, &back));
    STAGE("transform", pdc_model_transform(back, "canonicalize,plan", NULL));
    STAGE("compile", pdc_compile(c, back, "ref", &p));
    STAGE("tensors", pdc_tensor_create(c, 2, d, &x));
    STAGE("tensors", pdc_tensor_create(c, 2, d, &y));
    for (int i = 0; i < 4; i++) pdc_tensor_data(x)[i] = (float)i - 1.5f;
    STAGE("run", pdc_program_run(p, 1, &x, 1, &y));
    memcpy(j->out, pdc_tensor_data(y), sizeof j->out);
    j->failed = NULL;
#undef STAGE
out:
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_program_destroy(p);
    pdc_string_free(printed);
    pdc_buf_free(&b);
    pdc_model_destroy(back);
    pdc_model_destroy(m);
    pdc_context_destroy(c);
    return NULL;
}

START_TEST(deep_graph_runs_on_a_small_stack)
{
    /* x -> relu -> tanh -> relu -> tanh ... (DEEP_LAYERS layers) -> y */
    size_t cap = 64 + (size_t)DEEP_LAYERS * 64, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    len += (size_t)snprintf(text + len, cap - len, "pdcir 1\ninput x : f32[1,4]\n");
    for (int i = 0; i < DEEP_LAYERS; i++) {
        char in[16] = "x";
        if (i) snprintf(in, sizeof in, "t%d", i - 1);
        len += (size_t)snprintf(text + len, cap - len, "layer l%d = %s(%s) -> (t%d)\n", i, i % 2 ? "tanh" : "relu",
                                in, i);
    }
    len += (size_t)snprintf(text + len, cap - len, "output t%d\n", DEEP_LAYERS - 1);
    ck_assert_uint_lt(len, cap);

    deep_job job = {.text = text};
    pthread_attr_t attr;
    pthread_t tid;
    ck_assert_int_eq(pthread_attr_init(&attr), 0);
    ck_assert_int_eq(pthread_attr_setstacksize(&attr, SMALL_STACK), 0);
    ck_assert_int_eq(pthread_create(&tid, &attr, deep_main, &job), 0);
    ck_assert_int_eq(pthread_join(tid, NULL), 0);
    pthread_attr_destroy(&attr);
    ck_assert_msg(job.failed == NULL, "deep graph: %s failed: %s", job.failed, job.message);
    /* relu then tanh, repeated: negatives become 0, positives converge to the fixed point of tanh */
    ck_assert_float_eq(job.out[0], 0.0f);
    ck_assert_float_eq(job.out[1], 0.0f);
    ck_assert(job.out[2] > 0.0f && job.out[2] < 0.1f);
    ck_assert(job.out[3] > 0.0f && job.out[3] < 0.1f);
    free(text);
}
END_TEST

int main(void)
{
    return run_tests("limits", ctx_setup, ctx_teardown, 120,
                     TEST_LIST(sizes_that_overflow_are_refused, statistics_that_overflow_say_so,
                               binary_counts_beyond_the_file_are_refused, max_memory_refuses_large_allocations,
                               impossible_allocations_fail_cleanly, deep_graph_runs_on_a_small_stack));
}
