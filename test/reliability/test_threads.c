/*
 * test_threads.c - concurrency and determinism.
 *
 * pdc.h promises that one compiled program may run from many threads at once (each with its own
 * output tensors; inputs may be shared), that its context stays usable by one other thread
 * meanwhile, that errors are reported per thread, and that different contexts are independent.
 * These tests run one program from THREADS threads released together by a barrier, each on its
 * own inputs, and require every output to be bit-identical to the same run made sequentially
 * beforehand; they do it for every target this build compiles ("ref", and "cpu" once it exists: a
 * target that pdc_compile refuses as unknown or unavailable is skipped with a message), and a group
 * whose scheduled chains run side by side. `make test-tsan` runs this suite under ThreadSanitizer,
 * which must report nothing.
 *
 * Determinism: the same model and options give byte-identical outputs run after run, from a
 * fresh context, from the .pdc and the text form of the model, and whatever the "threads" option
 * says (no backend in this build changes its arithmetic with the thread count; a test here
 * fails if one starts to).
 */
#include <omp.h>
#include <pthread.h>
#include <unistd.h>

#include "test/common/builders.h"

#define THREADS 8
#define RUNS 25 /* per thread */

static const char *const targets[] = {"ref", "cpu"};
#define N_TARGETS (sizeof targets / sizeof targets[0])

/* Under make test-tsan (clang + ThreadSanitizer, the OpenMP runtime's synchronisation made visible by
 * LLVM's archer tool) every context keeps its default threads: TSan checks the runs on different user
 * threads and the cpu backend's OpenMP regions and lanes alike. */
static pdc_context *new_context(void)
{
    pdc_context *c = NULL;
    return pdc_context_create(&c) == PDC_OK ? c : NULL;
}

static void setup(void) { ck_assert_ptr_nonnull(ctx = new_context()); }

/* ------------------------------------------------------------------ the model */

static void add_const(pdc_context *c, pdc_model *m, const char *name, size_t rank, const int64_t *dims, uint32_t seed)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *w = malloc(n * sizeof *w);
    ck_assert_ptr_nonnull(w);
    test_fill_random(w, n, seed);
    ck_assert_ok(c, pdc_model_add_constant(m, name, rank, dims, w));
    free(w);
}

static void layer(pdc_context *c, pdc_model *m, const char *name, const char *op, size_t ni, const char *const *in,
                  const char *out, pdc_attrs *a)
{
    ck_assert_ok(c, pdc_model_add_layer(m, name, op, ni, in, 1, &out, a));
    pdc_attrs_destroy(a);
}

static pdc_attrs *attrs(pdc_context *c)
{
    pdc_attrs *a;
    ck_assert_ok(c, pdc_attrs_create(c, &a));
    return a;
}

/*
 * image [1,3,32,32] -> conv 8 (3x3, pad 1, pattern-sparse) -> relu -> maxpool 2 -> conv 8 (3x3)
 *   -> global_avgpool -> flatten -> fc 10 -> softmax = probs
 * seq [6,1,4] -> lstm (hidden 8) = states
 * Heavy enough (about 0.7 MFLOP per run) that runs on different threads overlap.
 */
static pdc_model *build_model_seeded(pdc_context *c, uint32_t base)
{
    pdc_model *m;
    ck_assert_ok(c, pdc_model_create(c, "threads", &m));
    const int64_t dimg[] = {1, 3, 32, 32}, dseq[] = {6, 1, 4}, dw1[] = {8, 3, 3, 3}, db[] = {8}, dw2[] = {8, 8, 3, 3},
                  dfw[] = {10, 8}, dfb[] = {10}, dlw[] = {1, 32, 4}, dlr[] = {1, 32, 8}, dlb[] = {1, 64};
    ck_assert_ok(c, pdc_model_add_input(m, "image", 4, dimg));
    ck_assert_ok(c, pdc_model_add_input(m, "seq", 3, dseq));

    float w1[8 * 3 * 9];
    uint64_t pat[4];
    int32_t kp[24];
    test_fill_random(w1, 216, 1 + base);
    ck_assert_ok(c, pdc_prune_project_pattern(c, w1, 8, 3, 3, 3, 4, 4, 0, pat, kp));
    ck_assert_ok(c, pdc_model_add_constant(m, "w1", 4, dw1, w1));
    ck_assert_ok(c, pdc_model_set_sparsity_pattern(m, "w1", 3, 3, 4, pat, 24, kp));
    add_const(c, m, "b1", 1, db, 2 + base);
    add_const(c, m, "w2", 4, dw2, 3 + base);
    add_const(c, m, "fw", 2, dfw, 4 + base);
    add_const(c, m, "fb", 1, dfb, 5 + base);
    add_const(c, m, "lw", 3, dlw, 6 + base);
    add_const(c, m, "lr", 3, dlr, 7 + base);
    add_const(c, m, "lb", 2, dlb, 8 + base);

    const int64_t pads[] = {1, 1, 1, 1}, two[] = {2, 2};
    pdc_attrs *a = attrs(c);
    ck_assert_ok(c, pdc_attrs_set_ints(a, "pads", 4, pads));
    layer(c, m, "conv1", "conv", 3, (const char *const[]){"image", "w1", "b1"}, "c1", a);
    layer(c, m, "relu", "relu", 1, (const char *const[]){"c1"}, "r1", NULL);
    a = attrs(c);
    ck_assert_ok(c, pdc_attrs_set_ints(a, "kernel_shape", 2, two));
    ck_assert_ok(c, pdc_attrs_set_ints(a, "strides", 2, two));
    layer(c, m, "pool", "maxpool", 1, (const char *const[]){"r1"}, "p1", a);
    a = attrs(c);
    ck_assert_ok(c, pdc_attrs_set_ints(a, "pads", 4, pads));
    layer(c, m, "conv2", "conv", 2, (const char *const[]){"p1", "w2"}, "c2", a);
    layer(c, m, "gap", "global_avgpool", 1, (const char *const[]){"c2"}, "g", NULL);
    layer(c, m, "flat", "flatten", 1, (const char *const[]){"g"}, "f", NULL);
    layer(c, m, "fc", "fc", 3, (const char *const[]){"f", "fw", "fb"}, "y", NULL);
    layer(c, m, "softmax", "softmax", 1, (const char *const[]){"y"}, "probs", NULL);
    a = attrs(c);
    ck_assert_ok(c, pdc_attrs_set_int(a, "hidden_size", 8));
    layer(c, m, "lstm", "lstm", 4, (const char *const[]){"seq", "lw", "lr", "lb"}, "states", a);
    ck_assert_ok(c, pdc_model_mark_output(m, "probs"));
    ck_assert_ok(c, pdc_model_mark_output(m, "states"));
    return m;
}

static pdc_model *build_model(pdc_context *c) { return build_model_seeded(c, 0); }

/* ------------------------------------------------------------------ runs */

/* Tensors of one run: inputs filled from `seed`, outputs zeroed. */
typedef struct run_io {
    pdc_tensor *in[2], *out[2];
} run_io;

static void io_create(pdc_context *c, const pdc_program *p, run_io *io, uint32_t seed)
{
    for (size_t k = 0; k < 2; k++) {
        io->in[k] = io_tensor(c, p, 0, k);
        test_fill_random(pdc_tensor_data(io->in[k]), pdc_tensor_size(io->in[k]), seed * 2 + (uint32_t)k);
        io->out[k] = io_tensor(c, p, 1, k);
    }
}

static void io_destroy(run_io *io)
{
    for (size_t k = 0; k < 2; k++) pdc_tensor_destroy(io->in[k]), pdc_tensor_destroy(io->out[k]);
}

static int same_outputs(const run_io *a, const run_io *b)
{
    for (size_t k = 0; k < 2; k++)
        if (pdc_tensor_size(a->out[k]) != pdc_tensor_size(b->out[k]) ||
            memcmp(pdc_tensor_data(a->out[k]), pdc_tensor_data(b->out[k]), 4 * pdc_tensor_size(a->out[k])))
            return 0;
    return 1;
}

/* Compiles m for target; NULL (and a message on stdout) if this build does not have the target. */
static pdc_program *compile_or_skip(pdc_context *c, const pdc_model *m, const char *target, const char *test)
{
    pdc_program *p = NULL;
    pdc_status st = pdc_compile(c, m, target, &p);
    if (st == PDC_ERR_UNKNOWN_TARGET || st == PDC_ERR_UNSUPPORTED || st == PDC_ERR_NO_DEVICE) {
        printf("threads: %s: target '%s' skipped: %s\n", test, target, pdc_context_last_error(c));
        return NULL;
    }
    ck_assert_msg(st == PDC_OK, "compile for %s: %s: %s", target, pdc_status_string(st), pdc_context_last_error(c));
    return p;
}

typedef struct worker {
    const pdc_program *prog;
    pthread_barrier_t *start;
    run_io *io;          /* RUNS entries */
    size_t n_io;
    pdc_status status;   /* first failure */
    char message[256];
    /* for the error test: a run that must fail, and the text its message must contain */
    run_io *bad;
    const char *want_in_message;
    int message_ok;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    w->status = PDC_OK;
    w->message_ok = 1;
    for (size_t r = 0; r < w->n_io; r++) {
        run_io *io = &w->io[r];
        pdc_status st = pdc_program_run(w->prog, 2, io->in, 2, io->out);
        if (st != PDC_OK && w->status == PDC_OK) {
            w->status = st;
            snprintf(w->message, sizeof w->message, "%s", pdc_context_last_error(ctx));
        }
        if (w->bad) {
            /* Interleave a failing run: its message, read on this thread, names this thread's shape. */
            st = pdc_program_run(w->prog, 2, w->bad->in, 2, w->bad->out);
            if (st != PDC_ERR_SHAPE || !strstr(pdc_context_last_error(ctx), w->want_in_message)) w->message_ok = 0;
        }
    }
    return NULL;
}

/* Runs every thread's io list at once; returns after all joined. */
static void run_threads(worker *w, size_t n)
{
    pthread_t tid[THREADS];
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, (unsigned)n), 0);
    for (size_t t = 0; t < n; t++) {
        w[t].start = &start;
        ck_assert_int_eq(pthread_create(&tid[t], NULL, worker_main, &w[t]), 0);
    }
    for (size_t t = 0; t < n; t++) ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
    pthread_barrier_destroy(&start);
}

START_TEST(concurrent_runs_match_sequential_runs)
{
    pdc_model *m = build_model(ctx);
    for (size_t ti = 0; ti < N_TARGETS; ti++) {
        pdc_program *p = compile_or_skip(ctx, m, targets[ti], "concurrent runs");
        if (!p) continue;
        /* Sequential reference runs, then the same inputs again, all threads at once. */
        static run_io seq[THREADS][RUNS], con[THREADS][RUNS];
        for (size_t t = 0; t < THREADS; t++) {
            for (size_t r = 0; r < RUNS; r++) {
                uint32_t seed = (uint32_t)(t * RUNS + r + 1);
                io_create(ctx, p, &seq[t][r], seed);
                io_create(ctx, p, &con[t][r], seed);
                ck_assert_ok(ctx, pdc_program_run(p, 2, seq[t][r].in, 2, seq[t][r].out));
            }
        }
        worker w[THREADS];
        memset(w, 0, sizeof w);
        for (size_t t = 0; t < THREADS; t++) w[t].prog = p, w[t].io = con[t], w[t].n_io = RUNS;
        run_threads(w, THREADS);
        size_t differ = 0;
        for (size_t t = 0; t < THREADS; t++) {
            ck_assert_msg(w[t].status == PDC_OK, "%s: thread %zu: %s: %s", targets[ti], t,
                          pdc_status_string(w[t].status), w[t].message);
            for (size_t r = 0; r < RUNS; r++) differ += !same_outputs(&seq[t][r], &con[t][r]);
        }
        ck_assert_msg(differ == 0, "%s: %zu of %d concurrent runs differ from the sequential ones", targets[ti], differ,
                      THREADS * RUNS);
        /* Different inputs really gave different outputs (the comparison is not vacuous). */
        ck_assert(!same_outputs(&seq[0][0], &seq[1][0]));
        printf("threads: %s: %d threads x %d runs, all bit-identical to sequential runs\n", targets[ti], THREADS, RUNS);
        for (size_t t = 0; t < THREADS; t++)
            for (size_t r = 0; r < RUNS; r++) io_destroy(&seq[t][r]), io_destroy(&con[t][r]);
        pdc_program_destroy(p);
    }
    pdc_model_destroy(m);
}
END_TEST

START_TEST(errors_are_reported_per_thread)
{
    pdc_model *m = build_model(ctx);
    pdc_program *p = compile_or_skip(ctx, m, "ref", "per-thread errors");
    ck_assert_ptr_nonnull(p);
    static run_io good[THREADS][4], bad[THREADS];
    char want[THREADS][64];
    worker w[THREADS];
    memset(w, 0, sizeof w);
    for (size_t t = 0; t < THREADS; t++) {
        for (size_t r = 0; r < 4; r++) io_create(ctx, p, &good[t][r], (uint32_t)(100 + t * 4 + r));
        /* Thread t's bad run: its image input has 32 + t + 1 columns. */
        const int64_t dims[] = {1, 3, 32, 33 + (int64_t)t}, sdims[] = {6, 1, 4};
        ck_assert_ok(ctx, pdc_tensor_create(ctx, 4, dims, &bad[t].in[0]));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, 3, sdims, &bad[t].in[1]));
        bad[t].out[0] = good[t][0].out[0];
        bad[t].out[1] = good[t][0].out[1];
        snprintf(want[t], sizeof want[t], "got 1x3x32x%d", 33 + (int)t);
        w[t] = (worker){.prog = p, .io = good[t], .n_io = 4, .bad = &bad[t], .want_in_message = want[t]};
    }
    run_threads(w, THREADS);
    for (size_t t = 0; t < THREADS; t++) {
        ck_assert_msg(w[t].status == PDC_OK, "thread %zu: %s", t, w[t].message);
        ck_assert_msg(w[t].message_ok, "thread %zu did not see its own error message (\"%s\")", t, want[t]);
        for (size_t r = 0; r < 4; r++) io_destroy(&good[t][r]);
        pdc_tensor_destroy(bad[t].in[0]);
        pdc_tensor_destroy(bad[t].in[1]);
    }
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

/* Concurrent runs share one set of input tensors (they are only read), and meanwhile the main
 * thread uses the program's context: it parses, compiles and runs another model, creates tensors
 * and asks the running program for its info - what pdc.h allows while runs are in flight. */
START_TEST(shared_inputs_and_context_use_during_runs)
{
    pdc_model *m = build_model(ctx);
    for (size_t ti = 0; ti < N_TARGETS; ti++) {
        pdc_program *p = compile_or_skip(ctx, m, targets[ti], "shared inputs");
        if (!p) continue;
        run_io want;
        io_create(ctx, p, &want, 77);
        ck_assert_ok(ctx, pdc_program_run(p, 2, want.in, 2, want.out));
        static run_io io[THREADS][RUNS];
        for (size_t t = 0; t < THREADS; t++) {
            for (size_t r = 0; r < RUNS; r++) {
                io_create(ctx, p, &io[t][r], 1000 + (uint32_t)(t * RUNS + r));
                for (size_t k = 0; k < 2; k++) {
                    pdc_tensor_destroy(io[t][r].in[k]);
                    io[t][r].in[k] = want.in[k]; /* shared by every run */
                }
            }
        }
        worker w[THREADS];
        memset(w, 0, sizeof w);
        pthread_t tid[THREADS];
        pthread_barrier_t start;
        ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS + 1), 0);
        for (size_t t = 0; t < THREADS; t++) {
            w[t] = (worker){.prog = p, .start = &start, .io = io[t], .n_io = RUNS};
            ck_assert_int_eq(pthread_create(&tid[t], NULL, worker_main, &w[t]), 0);
        }
        pthread_barrier_wait(&start);
        /* the main thread's own work on the same context, while the workers run */
        pdc_model *m2 = NULL;
        pdc_program *p2 = NULL;
        pdc_tensor *x2 = NULL, *y2 = NULL;
        static const char text[] = "pdcir 1\ninput x : f32[2,3]\nlayer r = relu(x) -> (y)\noutput y\n";
        const int64_t d2[] = {2, 3};
        ck_assert_ok(ctx, pdc_model_parse(ctx, text, strlen(text), &m2));
        ck_assert_ok(ctx, pdc_compile(ctx, m2, targets[ti], &p2));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, 2, d2, &x2));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, 2, d2, &y2));
        for (int i = 0; i < 6; i++) pdc_tensor_data(x2)[i] = (float)i - 2.5f;
        ck_assert_ok(ctx, pdc_program_run(p2, 1, &x2, 1, &y2));
        ck_assert_float_eq(pdc_tensor_data(y2)[0], 0.0f);
        ck_assert_float_eq(pdc_tensor_data(y2)[5], 2.5f);
        size_t n_in = 0, rank = 0;
        const char *name = NULL;
        ck_assert_ok(ctx, pdc_program_num_inputs(p, &n_in));
        ck_assert_ok(ctx, pdc_program_input_info(p, 1, &name, &rank, NULL));
        ck_assert_uint_eq(n_in, 2);
        ck_assert_str_eq(name, "seq");
        ck_assert_str_eq(pdc_program_target(p), targets[ti]);
        for (size_t t = 0; t < THREADS; t++) ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
        pthread_barrier_destroy(&start);
        size_t differ = 0;
        for (size_t t = 0; t < THREADS; t++) {
            ck_assert_msg(w[t].status == PDC_OK, "%s: thread %zu: %s", targets[ti], t, w[t].message);
            for (size_t r = 0; r < RUNS; r++) {
                differ += !same_outputs(&io[t][r], &want);
                for (size_t k = 0; k < 2; k++) pdc_tensor_destroy(io[t][r].out[k]);
            }
        }
        ck_assert_msg(differ == 0, "%s: %zu runs on shared inputs differ", targets[ti], differ);
        pdc_tensor_destroy(x2);
        pdc_tensor_destroy(y2);
        pdc_program_destroy(p2);
        pdc_model_destroy(m2);
        io_destroy(&want);
        pdc_program_destroy(p);
    }
    pdc_model_destroy(m);
}
END_TEST

/* fail_alloc_after counts allocations from all threads: exactly one concurrent run fails. */
START_TEST(injected_failure_hits_exactly_one_concurrent_run)
{
    pdc_model *m = build_model(ctx);
    pdc_program *p = compile_or_skip(ctx, m, "ref", "injected failure");
    ck_assert_ptr_nonnull(p);
    static run_io io[THREADS], want[THREADS];
    for (size_t t = 0; t < THREADS; t++) {
        io_create(ctx, p, &io[t], (uint32_t)(200 + t));
        io_create(ctx, p, &want[t], (uint32_t)(200 + t));
        ck_assert_ok(ctx, pdc_program_run(p, 2, want[t].in, 2, want[t].out));
        for (size_t k = 0; k < 2; k++) memset(pdc_tensor_data(io[t].out[k]), 0xab, 4 * pdc_tensor_size(io[t].out[k]));
    }
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", "7"));
    worker w[THREADS];
    memset(w, 0, sizeof w);
    for (size_t t = 0; t < THREADS; t++) w[t] = (worker){.prog = p, .io = &io[t], .n_io = 1};
    run_threads(w, THREADS);
    char left[32];
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "fail_alloc_after", left, sizeof left));
    ck_assert_str_eq(left, "0");
    size_t failed = 0;
    for (size_t t = 0; t < THREADS; t++) {
        if (w[t].status == PDC_OK) {
            ck_assert(same_outputs(&io[t], &want[t]));
            continue;
        }
        failed++;
        ck_assert_int_eq(w[t].status, PDC_ERR_OUT_OF_MEMORY);
        ck_assert_msg(strstr(w[t].message, "injected failure"), "message: %s", w[t].message);
        for (size_t k = 0; k < 2; k++) {
            const uint8_t *b = (const uint8_t *)pdc_tensor_data(io[t].out[k]);
            for (size_t i = 0; i < 4 * pdc_tensor_size(io[t].out[k]); i++) ck_assert_uint_eq(b[i], 0xab);
        }
    }
    ck_assert_uint_eq(failed, 1);
    for (size_t t = 0; t < THREADS; t++) io_destroy(&io[t]), io_destroy(&want[t]);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

/* Contexts are independent: each thread builds, compiles and runs in its own context at once. */
typedef struct ctx_worker {
    pthread_barrier_t *start;
    float probs[10];
    int ok;
} ctx_worker;

static void *ctx_worker_main(void *arg)
{
    ctx_worker *w = arg;
    pthread_barrier_wait(w->start);
    pdc_context *c = NULL;
    pdc_model *m = NULL;
    pdc_program *p = NULL;
    char *text = NULL;
    w->ok = 0;
    if (!(c = new_context())) return NULL;
    /* build, print, parse back, compile: exercises every layer of the library at once */
    pdc_model *built = build_model(c);
    if (pdc_model_print(built, 0, &text) == PDC_OK && pdc_model_parse(c, text, strlen(text), &m) == PDC_OK &&
        pdc_compile(c, m, "ref", &p) == PDC_OK) {
        run_io io;
        io_create(c, p, &io, 7);
        if (pdc_program_run(p, 2, io.in, 2, io.out) == PDC_OK) {
            memcpy(w->probs, pdc_tensor_data(io.out[0]), sizeof w->probs);
            w->ok = 1;
        }
        io_destroy(&io);
    }
    pdc_string_free(text);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
    pdc_model_destroy(built);
    pdc_context_destroy(c);
    return NULL;
}

START_TEST(independent_contexts_in_parallel)
{
    ctx_worker w[THREADS];
    pthread_t tid[THREADS];
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
    for (size_t t = 0; t < THREADS; t++) {
        w[t].start = &start;
        ck_assert_int_eq(pthread_create(&tid[t], NULL, ctx_worker_main, &w[t]), 0);
    }
    for (size_t t = 0; t < THREADS; t++) ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
    pthread_barrier_destroy(&start);
    for (size_t t = 0; t < THREADS; t++) {
        ck_assert_msg(w[t].ok, "thread %zu failed", t);
        ck_assert_mem_eq(w[t].probs, w[0].probs, sizeof w[0].probs);
    }
}
END_TEST

/* ------------------------------------------------------------------ determinism */

/* Outputs of one run of m on seed's inputs in a fresh context with option threads = `threads`. */
static void run_fresh(const char *model_text, const void *image, size_t image_size, const char *target,
                      const char *threads, run_io *keep_out, int *skipped)
{
    pdc_context *c = new_context();
    ck_assert_ptr_nonnull(c);
    ck_assert_ok(c, pdc_context_set_option(c, "threads", threads));
    pdc_model *m;
    if (model_text) ck_assert_ok(c, pdc_model_parse(c, model_text, strlen(model_text), &m));
    else ck_assert_ok(c, pdc_model_load_memory(c, image, image_size, &m));
    pdc_program *p = compile_or_skip(c, m, target, "determinism");
    *skipped = p == NULL;
    if (p) {
        run_io io;
        io_create(c, p, &io, 42);
        ck_assert_ok(c, pdc_program_run(p, 2, io.in, 2, io.out));
        for (size_t k = 0; k < 2; k++) memcpy(pdc_tensor_data(keep_out->out[k]), pdc_tensor_data(io.out[k]),
                                              4 * pdc_tensor_size(io.out[k]));
        io_destroy(&io);
    }
    pdc_program_destroy(p);
    pdc_model_destroy(m);
    pdc_context_destroy(c);
}

START_TEST(same_model_and_options_give_identical_bytes)
{
    pdc_model *m = build_model(ctx);
    char *text;
    ck_assert_ok(ctx, pdc_model_print(m, 0, &text));
    char path[] = "/tmp/pdc_test_threads_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_ok(ctx, pdc_model_save(m, path));
    size_t image_size;
    void *image = test_read_file(path, &image_size);
    unlink(path);

    pdc_program *p = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &p));
    run_io want, got;
    io_create(ctx, p, &want, 1);
    io_create(ctx, p, &got, 1);
    static const char *const thread_options[] = {"1", "0", "2", "8"};
    for (size_t ti = 0; ti < N_TARGETS; ti++) {
        int first = 1, runs = 0;
        for (size_t o = 0; o < 4; o++) {
            for (int from_text = 0; from_text <= 1; from_text++) {
                for (int rep = 0; rep < 3; rep++) {
                    int skipped;
                    run_fresh(from_text ? text : NULL, image, image_size, targets[ti], thread_options[o],
                              first ? &want : &got, &skipped);
                    if (skipped) goto next_target;
                    if (!first)
                        ck_assert_msg(same_outputs(&want, &got),
                                      "%s: threads=%s, %s, repetition %d: outputs differ from the first run",
                                      targets[ti], thread_options[o], from_text ? "text model" : ".pdc model", rep);
                    first = 0;
                    runs++;
                }
            }
        }
        printf("threads: %s: %d runs (threads = 1, 0, 2, 8; .pdc and text; fresh contexts) byte-identical\n",
               targets[ti], runs);
    next_target:;
    }
    io_destroy(&want);
    io_destroy(&got);
    pdc_program_destroy(p);
    free(image);
    pdc_string_free(text);
    pdc_model_destroy(m);
}
END_TEST

/* A group of two models of that shape with other weights: the schedule pairs their chains and the cpu
 * target runs each pair side by side (PDC_CPU_LANES=1: whatever the latency model predicts) on 3
 * threads: from the test's thread with nested teams allowed (one lane of 2 threads, a team of its
 * own, and one of 1), then from THREADS user threads at once without (two lanes of 1). Not nested
 * teams from several user threads: there archer reports the nested workers' reads as racing with the
 * next user thread's writes to a workspace handed over through an atomic exchange, which this
 * 45-line race-free program (OpenMP's join and C11 acquire/release order them) reproduces alike:
 * user threads that take a buffer from an atomic slot, run a region of 3 threads on it, then an
 * outer region of 2 whose thread 0 writes it and forks a nested team of 2 that reads it, and put it
 * back with a compare-exchange. Every output equals the model's
 * compiled alone, in sequential runs and in runs from THREADS user threads at once; under make test-tsan
 * (clang, with the OpenMP runtime's synchronisation made visible to TSan by archer) this is the DAG
 * scheduler's race check. */
typedef struct group_worker {
    const pdc_program *prog;
    pdc_tensor *const *in;
    pthread_barrier_t *start;
    float *const *want;
    size_t n_out, mismatches;
    pdc_status status;
} group_worker;

static void *group_worker_main(void *arg)
{
    group_worker *w = arg;
    pdc_tensor *out[4];
    for (size_t k = 0; k < w->n_out; k++) out[k] = io_tensor(ctx, w->prog, 1, k);
    pthread_barrier_wait(w->start);
    for (int r = 0; r < RUNS && !w->status; r++) {
        w->status = pdc_program_run(w->prog, 2, w->in, w->n_out, out);
        for (size_t k = 0; k < w->n_out && !w->status; k++)
            w->mismatches += memcmp(pdc_tensor_data(out[k]), w->want[k], 4 * pdc_tensor_size(out[k])) != 0;
    }
    for (size_t k = 0; k < w->n_out; k++) pdc_tensor_destroy(out[k]);
    return NULL;
}

START_TEST(scheduled_group_lanes_match_models_alone)
{
    setenv("PDC_OMP_STATIC", "1", 1); /* a team of the option's 3 threads, however busy the machine */
    setenv("PDC_CPU_LANES", "1", 1);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "3"));
    pdc_model *m[2] = {build_model_seeded(ctx, 0), build_model_seeded(ctx, 50)};
    pdc_program *g = NULL;
    pdc_status st = pdc_compile_group(ctx, (const pdc_model *const *)m, 2, "cpu", &g);
    if (st == PDC_ERR_UNKNOWN_TARGET || st == PDC_ERR_UNSUPPORTED) {
        printf("threads: group lanes: target 'cpu' skipped: %s\n", pdc_context_last_error(ctx));
        goto done;
    }
    ck_assert_ok(ctx, st);
    size_t nl, lanes = 0, n_in, n_out;
    ck_assert_ok(ctx, pdc_program_num_layers(g, &nl));
    for (size_t li = 0; li < nl; li++) {
        const char *k;
        ck_assert_ok(ctx, pdc_program_layer_kernel(g, li, NULL, &k));
        lanes += strstr(k, "of 2 in its step") != NULL;
    }
    ck_assert_msg(lanes >= 4, "%zu layers run side by side", lanes);
    ck_assert_ok(ctx, pdc_program_num_inputs(g, &n_in));
    ck_assert_ok(ctx, pdc_program_num_outputs(g, &n_out));
    ck_assert_uint_eq(n_in, 2);
    ck_assert_uint_eq(n_out, 4);
    /* the group's inputs (shared by name: image, seq), and what each model alone makes of them */
    pdc_tensor *in[2];
    float *want[4];
    for (size_t i = 0; i < 2; i++) {
        in[i] = io_tensor(ctx, g, 0, i);
        test_fill_random(pdc_tensor_data(in[i]), pdc_tensor_size(in[i]), 77 + (uint32_t)i);
    }
    for (size_t k = 0; k < 2; k++) {
        pdc_program *alone = compile_or_skip(ctx, m[k], "cpu", "group lanes");
        ck_assert_ptr_nonnull(alone);
        run_io io;
        for (size_t i = 0; i < 2; i++) {
            const char *name;
            size_t gi;
            ck_assert_ok(ctx, pdc_program_input_info(alone, i, &name, NULL, NULL));
            ck_assert_ok(ctx, pdc_program_find_input(g, name, &gi));
            io.in[i] = in[gi];
            io.out[i] = io_tensor(ctx, alone, 1, i);
        }
        ck_assert_ok(ctx, pdc_program_run(alone, 2, io.in, 2, io.out));
        for (size_t o = 0; o < 2; o++) {
            const char *name;
            char gname[64];
            size_t go;
            ck_assert_ok(ctx, pdc_program_output_info(alone, o, &name, NULL, NULL));
            snprintf(gname, sizeof gname, "%zu/%s", k, name);
            ck_assert_ok(ctx, pdc_program_find_output(g, gname, &go));
            want[go] = malloc(4 * pdc_tensor_size(io.out[o]));
            ck_assert_ptr_nonnull(want[go]);
            memcpy(want[go], pdc_tensor_data(io.out[o]), 4 * pdc_tensor_size(io.out[o]));
            pdc_tensor_destroy(io.out[o]);
        }
        pdc_program_destroy(alone);
    }
    ck_assert(memcmp(want[0], want[2], 40) || memcmp(want[1], want[3], 40)); /* the models differ */
    int levels = omp_get_max_active_levels();
    omp_set_max_active_levels(2); /* this thread's runs: a lane of 2 threads is a nested team */
    group_worker nested = {g, in, NULL, want, n_out, 0, PDC_OK};
    pdc_tensor *nout[4];
    for (size_t k = 0; k < n_out; k++) nout[k] = io_tensor(ctx, g, 1, k);
    for (int r = 0; r < RUNS && !nested.status; r++) {
        nested.status = pdc_program_run(g, 2, in, n_out, nout);
        for (size_t k = 0; k < n_out && !nested.status; k++)
            nested.mismatches += memcmp(pdc_tensor_data(nout[k]), want[k], 4 * pdc_tensor_size(nout[k])) != 0;
    }
    for (size_t k = 0; k < n_out; k++) pdc_tensor_destroy(nout[k]);
    omp_set_max_active_levels(levels);
    ck_assert_msg(nested.status == PDC_OK, "nested: %s", pdc_status_string(nested.status));
    ck_assert_msg(nested.mismatches == 0, "nested: %zu outputs differ from the models alone", nested.mismatches);
    group_worker w[THREADS];
    pthread_t tid[THREADS];
    pthread_barrier_t start;
    ck_assert_int_eq(pthread_barrier_init(&start, NULL, THREADS), 0);
    for (size_t t = 0; t < THREADS; t++) {
        w[t] = (group_worker){g, in, &start, want, n_out, 0, PDC_OK};
        ck_assert_int_eq(pthread_create(&tid[t], NULL, group_worker_main, &w[t]), 0);
    }
    for (size_t t = 0; t < THREADS; t++) ck_assert_int_eq(pthread_join(tid[t], NULL), 0);
    pthread_barrier_destroy(&start);
    for (size_t t = 0; t < THREADS; t++) {
        ck_assert_msg(w[t].status == PDC_OK, "thread %zu: %s", t, pdc_status_string(w[t].status));
        ck_assert_msg(w[t].mismatches == 0, "thread %zu: %zu outputs differ from the models alone", t, w[t].mismatches);
    }
    printf("threads: group of 2 models, %zu layers side by side: %d threads x %d runs equal the models alone\n", lanes,
           THREADS, RUNS);
    for (size_t i = 0; i < 2; i++) pdc_tensor_destroy(in[i]);
    for (size_t k = 0; k < 4; k++) free(want[k]);
    pdc_program_destroy(g);
done:
    unsetenv("PDC_OMP_STATIC");
    unsetenv("PDC_CPU_LANES");
    pdc_model_destroy(m[0]);
    pdc_model_destroy(m[1]);
}
END_TEST

int main(void)
{
    return run_tests("threads", setup, ctx_teardown, 120,
                     TEST_LIST(concurrent_runs_match_sequential_runs, errors_are_reported_per_thread,
                               shared_inputs_and_context_use_during_runs,
                               injected_failure_hits_exactly_one_concurrent_run, independent_contexts_in_parallel,
                               same_model_and_options_give_identical_bytes, scheduled_group_lanes_match_models_alone));
}
