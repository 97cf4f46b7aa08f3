/*
 * test_cpu_bcr.c - the "cpu" target's products by BCR-pruned weights (prune-bcr; backends/cpu/bcr.c and
 * bcr_fc.c) against the reference backend: fc, matmul by a constant and gemm (both layouts of B, alpha,
 * beta and C) at several batches and block shapes, with biases, fused activations and a fused epilogue;
 * 1x1 convs (bias, activation, a batchnorm and a residual fused); and the products split over the
 * threads: bit-identical at 1 and 2 threads (fc, lstm, gru, 1x1 conv).
 */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdlib.h>

#include "ir/ir.h"

#include "test/common/builders.h"

static pdc_attrs *bcr_options(const char *block, float col, float row)
{
    pdc_attrs *o = opt_s("bcr_block", block);
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "bcr_col_rate", col));
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "bcr_row_rate", row));
    return o;
}

/* Outputs of m (one input, one output) on target at `threads` threads, input from seed (malloc'd, *n). */
static float *run_at(const pdc_model *m, const char *target, const char *threads, uint32_t seed, size_t *n)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", threads));
    return run_first_output(m, target, seed, n);
}

/* Asserts that layer `name` of m compiled for cpu runs a kernel whose text has `want`. */
static void assert_kernel(const pdc_model *m, const char *name, const char *want)
{
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &p));
    size_t n;
    ck_assert_ok(ctx, pdc_program_num_layers(p, &n));
    const char *got = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *ln, *k;
        ck_assert_ok(ctx, pdc_program_layer_kernel(p, i, &ln, &k));
        if (!strcmp(ln, name)) got = k;
    }
    ck_assert_msg(got && strstr(got, want), "layer %s: kernel '%s', want '%s'", name, got ? got : "(none)", want);
    pdc_program_destroy(p);
}

/* m on cpu against ref (tolerance relative to the largest output). */
static void assert_matches_ref(const pdc_model *m, uint32_t seed, const char *what)
{
    size_t n1, n2;
    float *want = run_at(m, "ref", "1", seed, &n1), *got = run_at(m, "cpu", "1", seed, &n2);
    ck_assert_uint_eq(n1, n2);
    float scale = 1.0f;
    for (size_t i = 0; i < n1; i++) scale = fmaxf(scale, fabsf(want[i]));
    for (size_t i = 0; i < n1; i++)
        ck_assert_msg(fabsf(got[i] - want[i]) <= 2e-5f * scale, "%s: element %zu: got %.9g, want %.9g", what, i,
                      (double)got[i], (double)want[i]);
    free(want);
    free(got);
}

/* fc, matmul and gemm by BCR-pruned constants: 37 outputs and 45 inputs (edge blocks both ways) at batch 1,
 * 3, 9 and 17 (whole 8-sample tiles and the rest), 8- and 16-row blocks (the vector forms) and 4- and
 * 5-row ones (the generic loop); fc with a bias and a relu of its own or a fused add + sigmoid epilogue;
 * matmul x [2, B, 45] by [45, 37] (B transposed at compile time); gemm transB = 0 with alpha 0.5, beta 2
 * and C [37], and transB = 1 with C [1, 37] and alpha 1. */
START_TEST(bcr_linear_layers_match_ref)
{
    static const char *const blocks[] = {"8x8", "16x8", "4x4", "5x3"};
    static const int64_t batches[] = {1, 3, 9, 17};
    const int64_t K = 45, O = 37;
    for (int kind = 0; kind < 4; kind++)
        for (size_t q = 0; q < 4; q++) {
            const int64_t B = batches[q];
            pdc_model *m = new_model("lin");
            const char *name = "y";
            if (kind == 2) {
                add_input(m, "x", 3, (int64_t[]){2, B, K});
                add_random(m, "w", 2, (int64_t[]){K, O}, 41, -0.5f, 0.5f);
                add_layer(m, "y", "matmul", "x,w", "y", NULL);
            } else {
                add_input(m, "x", 2, (int64_t[]){B, K});
                if (kind == 3 && q % 2 == 0) {
                    add_random(m, "w", 2, (int64_t[]){K, O}, 42, -0.5f, 0.5f);
                    add_random(m, "c", 1, (int64_t[]){O}, 43, -0.5f, 0.5f);
                    pdc_attrs *a = opt_f("alpha", 0.5f);
                    ck_assert_ok(ctx, pdc_attrs_set_float(a, "beta", 2.0f));
                    add_layer(m, "y", "gemm", "x,w,c", "y", a);
                } else if (kind == 3) {
                    add_random(m, "w", 2, (int64_t[]){O, K}, 44, -0.5f, 0.5f);
                    add_random(m, "c", 2, (int64_t[]){1, O}, 45, -0.5f, 0.5f);
                    add_layer(m, "y", "gemm", "x,w,c", "y", opt_i("transB", 1));
                } else {
                    add_random(m, "w", 2, (int64_t[]){O, K}, 46, -0.5f, 0.5f);
                    add_random(m, "b", 1, (int64_t[]){O}, 47, -0.5f, 0.5f);
                    add_layer(m, "y", "fc", "x,w,b", kind == 0 ? "y" : "f", kind == 0 ? opt_s("activation", "relu") : NULL);
                    if (kind == 1) { /* fc -> add a constant row -> sigmoid: one kernel */
                        add_random(m, "e", 1, (int64_t[]){O}, 48, -0.5f, 0.5f);
                        add_layer(m, "add", "add", "f,e", "s", NULL);
                        add_layer(m, "sig", "sigmoid", "s", "z", NULL);
                    }
                }
            }
            add_output(m, kind == 1 ? "z" : "y");
            ck_assert_ok(ctx, transform(m, "prune-bcr", bcr_options(blocks[q], 0.5f, 0.25f)));
            static const char *const want[] = {"bcr fc", "bcr fc", "bcr matmul", "bcr gemm"};
            assert_kernel(m, name, want[kind]);
            char what[64];
            snprintf(what, sizeof what, "%s batch %lld blocks %s", want[kind], (long long)B, blocks[q]);
            assert_matches_ref(m, (uint32_t)(kind * 4 + q + 1), what);
            if (kind == 1) assert_kernel(m, "sig", "fused");
            pdc_model_destroy(m);
        }
}
END_TEST

/* 1x1 convs by BCR-pruned weights (prune-bcr with block_convs=1): x [2, 20, 5, 7] (35 pixels: two vectors
 * and a tail) to 37 filters in 8x8, 16x4, 4x4 blocks with a bias and a relu of its own; 24 to 24 filters
 * with a batchnorm folded in and a residual add + relu fused (conv -> batchnorm -> add x -> relu, one
 * kernel); a strided 1x1 conv is not taken (the rows kernel runs it) - all against ref. */
START_TEST(bcr_pointwise_convs_match_ref)
{
    static const char *const blocks[] = {"8x8", "16x4", "4x4"};
    for (int c = 0; c < 5; c++) {
        const int fused = c == 3, strided = c == 4;
        const int64_t C = fused ? 24 : 20, O = fused ? 24 : 37;
        pdc_model *m = new_model("pw");
        add_input(m, "x", 4, (int64_t[]){2, C, 5, 7});
        add_random(m, "w", 4, (int64_t[]){O, C, 1, 1}, (uint32_t)(61 + c), -0.5f, 0.5f);
        add_random(m, "b", 1, (int64_t[]){O}, 66, -0.5f, 0.5f);
        pdc_attrs *a = fused ? NULL : opt_s("activation", "relu");
        if (strided) ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 2, (int64_t[]){2, 2}));
        add_layer(m, "pw", "conv", "x,w,b", fused ? "c" : "y", a);
        if (fused) {
            add_random(m, "g", 1, (int64_t[]){O}, 67, 0.5f, 1.5f);
            add_random(m, "t", 1, (int64_t[]){O}, 68, -0.5f, 0.5f);
            add_random(m, "mu", 1, (int64_t[]){O}, 69, -0.5f, 0.5f);
            add_random(m, "var", 1, (int64_t[]){O}, 70, 0.5f, 1.5f);
            add_layer(m, "bn", "batchnorm", "c,g,t,mu,var", "n", NULL);
            add_layer(m, "add", "add", "n,x", "s", NULL);
            add_layer(m, "relu", "relu", "s", "y", NULL);
        }
        add_output(m, "y");
        pdc_attrs *o = bcr_options(blocks[c % 3], 0.5f, 0.25f);
        ck_assert_ok(ctx, pdc_attrs_set_int(o, "block_convs", 1));
        ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1)); /* the conv reads the graph input */
        ck_assert_ok(ctx, transform(m, "prune-bcr", o));
        ck_assert_int_eq(tensor(m, "w")->sparsity.kind, IR_SPARSITY_BCR);
        if (strided) {
            pdc_program *p;
            ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &p));
            size_t n;
            ck_assert_ok(ctx, pdc_program_num_layers(p, &n));
            for (size_t i = 0; i < n; i++) {
                const char *ln, *k;
                ck_assert_ok(ctx, pdc_program_layer_kernel(p, i, &ln, &k));
                ck_assert_msg(strncmp(k, "bcr", 3) != 0, "strided 1x1 conv on the BCR kernel: %s", k);
            }
            pdc_program_destroy(p);
        } else {
            assert_kernel(m, "pw", "bcr conv 1x1");
        }
        if (fused) {
            assert_kernel(m, "pw", "in the epilogue");
            assert_kernel(m, "relu", "fused");
        }
        char what[64];
        snprintf(what, sizeof what, "1x1 conv case %d, blocks %s", c, blocks[c % 3]);
        assert_matches_ref(m, (uint32_t)(c + 30), what);
        pdc_model_destroy(m);
    }
}
END_TEST

/* Products of 64K multiply-adds or more are split over the threads by block-rows: an fc 512 x 512 at
 * batch 4 (16x16 blocks keeping a quarter of the columns), a bidirectional lstm and a gru with hidden 128
 * at batch 2 (every gate product over the threads) and a 1x1 conv 256 -> 256 on 9x9 give the same bits at
 * 1 and 2 threads, and match ref. */
START_TEST(bcr_products_split_over_threads)
{
    for (int c = 0; c < 4; c++) {
        pdc_model *m = new_model("thr");
        if (c == 3) {
            add_input(m, "x", 4, (int64_t[]){1, 256, 9, 9});
            add_random(m, "w", 4, (int64_t[]){256, 256, 1, 1}, 54, -0.2f, 0.2f);
            add_layer(m, "y", "conv", "x,w", "y", NULL);
        } else if (c == 0) {
            add_input(m, "x", 2, (int64_t[]){4, 512});
            add_random(m, "w", 2, (int64_t[]){512, 512}, 51, -0.2f, 0.2f);
            add_layer(m, "y", "fc", "x,w", "y", NULL);
        } else {
            const int64_t H = 128, G = c == 1 ? 4 : 3, D = c == 1 ? 2 : 1;
            add_input(m, "x", 3, (int64_t[]){3, 2, 96});
            add_random(m, "w", 3, (int64_t[]){D, G * H, 96}, 52, -0.3f, 0.3f);
            add_random(m, "r", 3, (int64_t[]){D, G * H, H}, 53, -0.3f, 0.3f);
            pdc_attrs *a = opt_i("hidden_size", H);
            if (c == 1) ck_assert_ok(ctx, pdc_attrs_set_string(a, "direction", "bidirectional"));
            add_layer(m, "y", c == 1 ? "lstm" : "gru", "x,w,r", "y", a);
        }
        add_output(m, "y");
        pdc_attrs *o = bcr_options("16x16", 0.75f, 0.0f);
        ck_assert_ok(ctx, pdc_attrs_set_int(o, "block_convs", 1));
        ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1)); /* the conv reads the graph input */
        ck_assert_ok(ctx, transform(m, "prune-bcr", o));
        assert_kernel(m, "y", c == 0 ? "bcr fc" : c == 3 ? "bcr conv 1x1" : "w bcr");
        size_t n0, n1, n2;
        float *want = run_at(m, "ref", "1", 9, &n0), *one = run_at(m, "cpu", "1", 9, &n1), *two = run_at(m, "cpu", "2", 9, &n2);
        ck_assert_uint_eq(n1, n2);
        ck_assert_floats_near(one, want, n0, 2e-5f);
        ck_assert_msg(!memcmp(one, two, n1 * sizeof *one), "case %d: 2 threads differ from 1", c);
        free(want);
        free(one);
        free(two);
        pdc_model_destroy(m);
    }
}
END_TEST

/* PDC_OMP_STATIC: the team is what the threads option says whatever else the host runs. */
static void static_teams_setup(void)
{
    setenv("PDC_OMP_STATIC", "1", 1);
    tmpdir_setup();
}

static void static_teams_teardown(void)
{
    tmpdir_teardown();
    unsetenv("PDC_OMP_STATIC");
}

int main(void)
{
    return run_tests("cpu_bcr", static_teams_setup, static_teams_teardown, 120,
                     TEST_LIST(bcr_linear_layers_match_ref, bcr_pointwise_convs_match_ref, bcr_products_split_over_threads));
}
