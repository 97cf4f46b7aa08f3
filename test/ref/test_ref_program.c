/*
 * test_ref_program.c - the reference backend's whole programs: a chain of layers with an intermediate
 * as a second graph output, a failed run (wrong input shape, activation memory over max_memory) that
 * leaves the output untouched, and concurrent runs of one program from several threads.
 *
 * Every model is built with the public builder API, compiled for "ref" and run through
 * pdc_program_run (test/common/expect.h). Expected numbers are worked out by hand (the arithmetic is in
 * the comments).
 */
#include <pthread.h>
#include <stdint.h>

#include "test/common/testutil.h"
#include "test/common/expect.h"

START_TEST(chain_of_layers)
{
    /* x = [1,-2,3,-4] -> conv 1x1 (w -1) -> [-1,2,-3,4] -> relu -> [0,2,0,4] -> global_avgpool -> 1.5
     * -> flatten [1,1] -> fc w [[1],[-1]] -> [1.5,-1.5] -> softmax -> [sig(3), sig(-3)];
     * the relu activation is a second graph output */
    input("x", SHAPE(1, 1, 2, 2));
    constant("w", SHAPE(1, 1, 1, 1), F(-1));
    constant("fw", SHAPE(2, 1), F(1, -1));
    layer("conv", NULL, "c", NAMES("x", "w"));
    layer("relu", NULL, "r", NAMES("c"));
    layer("global_avgpool", NULL, "g", NAMES("r"));
    layer("flatten", NULL, "f", NAMES("g"));
    layer("fc", NULL, "l", NAMES("f", "fw"));
    layer("softmax", NULL, "p", NAMES("l"));
    float s3 = (float)(1.0 / (1.0 + exp(-3.0))); /* sig(3) */
    run_expect(INS(F(1, -2, 3, -4)), OUTS({"p", SHAPE(1, 2), F(s3, 1 - s3)}, {"r", SHAPE(1, 1, 2, 2), F(0, 2, 0, 4)}));
}
END_TEST

START_TEST(failed_run_leaves_output_untouched)
{
    relu_model(1, 4);
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    float xb[4] = {-1, 2, -3, 4}, yb[4] = {42, 42, 42, 42};
    pdc_tensor *tx = NULL, *ty = NULL;
    /* wrong input shape [1,3] */
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 3), xb, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 4), yb, &ty));
    ck_assert_status(ctx, pdc_program_run(prog, 1, &tx, 1, &ty), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "'x'");
    for (int i = 0; i < 4; i++) ck_assert_float_eq(yb[i], 42);
    pdc_tensor_destroy(tx);
    /* the right shape then works */
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 4), xb, &tx));
    ck_assert_ok(ctx, pdc_program_run(prog, 1, &tx, 1, &ty));
    ck_assert_floats_near(yb, F(0, 2, 0, 4), 4, TOL);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(prog);
}
END_TEST

START_TEST(out_of_memory_run_leaves_output_untouched)
{
    /* two 64 KiB activations; with max_memory 4 KiB the run's arena cannot be had */
    enum { N = 16384 };
    input("x", SHAPE(1, N));
    constant("two", SHAPE(1), F(2));
    layer("relu", NULL, "h", NAMES("x"));
    layer("mul", NULL, "y", NAMES("h", "two"));
    output("y");
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    float *xb = malloc(N * sizeof *xb), *yb = malloc(N * sizeof *yb);
    ck_assert_ptr_nonnull(xb);
    ck_assert_ptr_nonnull(yb);
    for (int i = 0; i < N; i++) {
        xb[i] = (float)(i % 7) - 3;
        yb[i] = 42;
    }
    pdc_tensor *tx = NULL, *ty = NULL;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, N), xb, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, N), yb, &ty));
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "4096"));
    ck_assert_status(ctx, pdc_program_run(prog, 1, &tx, 1, &ty), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, "ref: activation memory");
    for (int i = 0; i < N; i++) ck_assert_float_eq(yb[i], 42);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "max_memory", "0"));
    ck_assert_ok(ctx, pdc_program_run(prog, 1, &tx, 1, &ty));
    for (int i = 0; i < N; i++) ck_assert_float_eq(yb[i], xb[i] > 0 ? 2 * xb[i] : 0);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_program_destroy(prog);
    free(xb);
    free(yb);
}
END_TEST

typedef struct thread_job {
    const pdc_program *prog;
    pdc_tensor *x, *y;
    int ok;
} thread_job;

static void *thread_main(void *arg)
{
    thread_job *j = arg;
    j->ok = 1;
    for (int it = 0; it < 200 && j->ok; it++)
        if (pdc_program_run(j->prog, 1, &j->x, 1, &j->y) != PDC_OK) j->ok = 0;
    return NULL;
}

START_TEST(concurrent_runs)
{
    /* y = relu(x) * 2 + 1 from 4 threads at once, each with its own tensors */
    input("x", SHAPE(1, 64));
    constant("two", SHAPE(1), F(2));
    constant("one", SHAPE(1), F(1));
    layer("relu", NULL, "r", NAMES("x"));
    layer("mul", NULL, "m", NAMES("r", "two"));
    layer("add", NULL, "y", NAMES("m", "one"));
    output("y");
    pdc_program *prog = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &prog));
    enum { NT = 4 };
    static float xb[NT][64], yb[NT][64];
    thread_job jobs[NT];
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) {
        for (int i = 0; i < 64; i++) xb[t][i] = (float)(i - 32) * (float)(t + 1);
        jobs[t] = (thread_job){prog, NULL, NULL, 0};
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 64), xb[t], &jobs[t].x));
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, SHAPE(1, 64), yb[t], &jobs[t].y));
    }
    for (int t = 0; t < NT; t++) ck_assert_int_eq(pthread_create(&th[t], NULL, thread_main, &jobs[t]), 0);
    for (int t = 0; t < NT; t++) ck_assert_int_eq(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < NT; t++) {
        ck_assert(jobs[t].ok);
        float want[64];
        for (int i = 0; i < 64; i++) want[i] = (xb[t][i] > 0 ? xb[t][i] : 0) * 2 + 1;
        ck_assert_floats_near(yb[t], want, 64, TOL);
        pdc_tensor_destroy(jobs[t].x);
        pdc_tensor_destroy(jobs[t].y);
    }
    pdc_program_destroy(prog);
}
END_TEST


int main(void)
{
    Suite *s = suite_create("ref_program");
    test_add_tcase(s, "program", ref_setup, mb_close, 0,
                   TEST_LIST(chain_of_layers, failed_run_leaves_output_untouched,
                             out_of_memory_run_leaves_output_untouched, concurrent_runs));
    return test_run_suite(s);
}
