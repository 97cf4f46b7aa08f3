/*
 * test_cpu_gemm.c - the "cpu" target's fc, gemm, matmul and LSTM/GRU against the reference backend: the
 * shared cases of test/common/backend_cases.h (random fc of every sparsity kind, gemm, broadcast and
 * constant matmuls, LSTM/GRU) with the cpu's kernel choices, and the cpu's own: activations applied per
 * thread's block, dense fc and LSTM at small batches on the packed kernel, constant matmuls on the
 * sparse kernels, batched matmuls and recurrent products split over the threads (bit-identical at 1
 * and 2 threads), block-sparse gates on the JIT kernel.
 */
#define _XOPEN_SOURCE 700
#include <stdint.h>
#include <stdlib.h>

#include "test/common/testutil.h"
#include "test/common/cpu_cases.h"

/* ------------------------------------------------------------------ products */

START_TEST(gemm_activation_per_block)
{
    /* a fused activation runs on each thread's block right after its product: blocks of rows
     * (200x300 by 300x8), of columns (8x300 by 300x200, each row of a block a separate run), and
     * a block-sparse fc's block-rows (o 300 in 2x4 blocks), all with several blocks, at 2 threads */
    static const struct {
        int64_t m, k, n;
        const char *act;
    } cases[] = {{200, 300, 8, "tanh"}, {8, 300, 200, "hardswish"}, {3, 300, 300, "sigmoid"}};
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
    for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
        fresh_model("gemm_act");
        input("a", DIMS(cases[q].m, cases[q].k));
        pdc_attrs *a = set_string(attrs(), "activation", cases[q].act);
        if (q < 2) {
            constant_rand("b", DIMS(cases[q].n, cases[q].k), 0.2f, (uint32_t)q + 3);
            layer("gemm", set_int(a, "transB", 1), "y", NAMES("a", "b"));
        } else {
            constant_pruned("w", DIMS(cases[q].n, cases[q].k), 1, 2, 4, 30, 9);
            layer("fc", a, "y", NAMES("a", "w"));
        }
        output("y");
        char desc[64];
        snprintf(desc, sizeof desc, "%s %lldx%lldx%lld", cases[q].act, (long long)cases[q].m, (long long)cases[q].k,
                 (long long)cases[q].n);
        check_kernels(desc, (uint32_t)q + 5, BC_KERNELS({"y", q < 2 ? "blas sgemm" : "jit block-sparse fc"}));
    }
}
END_TEST

START_TEST(dense_small_batches_packed)
{
    /* dense fc: batch 1 on sgemv; 2, 9 and 32 on the lanes kernel (one group, groups of the vector
     * width and a partial one); 33 on sgemm; 300 outputs (several chunks of block-rows and a partial
     * 8x8 block) and a fused tanh, at 2 threads against ref, then bit-identical at 1 and 2 */
    static const int64_t batches[] = {1, 2, 9, 32, 33};
    for (size_t q = 0; q < sizeof batches / sizeof batches[0]; q++) {
        fresh_model("fc");
        input("x", DIMS(batches[q], 203));
        constant_rand("w", DIMS(300, 203), 0.2f, (uint32_t)q + 1);
        constant_rand("b", DIMS(300), 0.5f, (uint32_t)q + 7);
        layer("fc", set_string(attrs(), "activation", "tanh"), "y", NAMES("x", "w", "b"));
        output("y");
        char what[48], want[48];
        snprintf(what, sizeof what, "dense fc at batch %lld", (long long)batches[q]);
        snprintf(want, sizeof want, "jit dense fc for batch %lld,", (long long)batches[q]);
        const char *kernel = batches[q] == 1 ? "blas sgemm/sgemv" : batches[q] == 33 ? "blas sgemm 33x" : want;
        check_two_threads(what, (uint32_t)q, BC_KERNELS({"y", kernel}));
    }
    /* a bidirectional LSTM, hidden 64 (gate slices on 8x8 blocks), batch 4 over 3 steps: the recurrent
     * product of the batch (64K multiply-adds: split over the threads) and the input projection of
     * the 12 rows on the lanes kernel */
    fresh_model("lstm");
    input("x", DIMS(3, 4, 40));
    constant_rand("w", DIMS(2, 256, 40), 0.2f, 11);
    constant_rand("r", DIMS(2, 256, 64), 0.15f, 12);
    constant_rand("b", DIMS(2, 512), 0.3f, 13);
    rnn_layer("lstm", "y", 64, "bidirectional", -1, NAMES("x", "w", "r", "b"), NAMES("y"));
    output("y");
    check_two_threads("dense lstm at batch 4", 3, BC_KERNELS({"y", "w jit dense for 12 rows, r jit dense for 4 rows"}));
}
END_TEST

START_TEST(matmul_const_weights_on_sparse_kernels)
{
    /* a transformer's linear layers: x [2, 24, 256] (48 rows: groups of samples per vector lane over
     * several chunks of block-rows) by a constant [256, 300] pruned in 16x4 blocks of its stored
     * layout, and x [3, 5, 40] (15 rows) by a dense [40, 64]; at 2 threads against ref, then
     * bit-identical at 1 and 2 */
    for (int q = 0; q < 2; q++) {
        fresh_model("matmul");
        if (q == 0) {
            input("x", DIMS(2, 24, 256));
            constant_pruned("w", DIMS(256, 300), 1, 16, 4, 25, 17);
        } else {
            input("x", DIMS(3, 5, 40));
            constant_rand("w", DIMS(40, 64), 0.2f, 18);
        }
        layer("matmul", NULL, "y", NAMES("x", "w"));
        output("y");
        check_two_threads(q ? "dense matmul of 15 rows" : "block-sparse matmul of 48 rows", (uint32_t)q + 40,
                          BC_KERNELS({"y", q ? "jit dense matmul for 15 rows, weights packed in 8x8 blocks"
                                             : "jit block-sparse matmul, blocks 4x16 of the transposed weights"},
                                     {"y", "samples per weight load"}));
    }
}
END_TEST

START_TEST(matmul_batches_split_over_threads)
{
    /* attention's q k^T: a product per (batch, head), here a [2, 3, 70, 48] by b [3, 48, 90] broadcast
     * over the first dim, six products of two column chunks each shared by the threads in one
     * region; at 2 threads against ref, then bit-identical at 1 and 2 */
    matmul_model(DIMS(2, 3, 70, 48), DIMS(3, 48, 90));
    check_two_threads("batched matmul", 51, BC_KERNELS({"y", "blas sgemm 70x90x48, batched"}));
}
END_TEST

/* ------------------------------------------------------------------ lstm, gru */

/* An LSTM/GRU's products are split over the threads from 64K multiply-adds (rnn.c RNN_PAR_MIN),
 * the recurrent one by rows of r: hidden 128 (LSTM: 512 x 128) and 192 (GRU's z and r: 384 x 192)
 * at batch 1 (sgemv) and 3 (sgemm), against the reference at 2 threads, and bit-identical at 1 and
 * 2 (PDC_OMP_STATIC, set by the tcase: the team is what the option says, whatever else the host runs). */
START_TEST(rnn_recurrent_rows_split_over_threads)
{
    /* 64K weights or more: a dense LSTM 128 and GRU 192 at batch 1 (recurrent rows split for sgemv,
     * the input projections of 3 steps on the lanes kernel), an LSTM 256 with 4x4 blocks (40% kept,
     * 105K weights; its rows split by the block-sparse product), a dense LSTM 128 at batch 33 (both
     * products on OpenBLAS sgemm, in chunks of columns) */
    for (int q = 0; q < 4; q++) {
        const int lstm = q != 1, sparse = q == 2;
        const char *desc = q == 0 ? "lstm 128" : q == 1 ? "gru 192" : q == 2 ? "lstm 256 4x4 blocks" : "lstm 128 batch 33";
        fresh_model("rnn_threads");
        const int64_t H = q == 0 || q == 3 ? 128 : q == 1 ? 192 : 256, G = lstm ? 4 : 3, I = 24;
        input("x", DIMS(3, q == 3 ? 33 : 1, I));
        constant_rand("w", DIMS(1, G * H, I), 0.3f, 5);
        if (sparse) constant_pruned("r", DIMS(1, G * H, H), 1, 4, 4, 40, 6);
        else constant_rand("r", DIMS(1, G * H, H), 0.15f, 6);
        constant_rand("b", DIMS(1, 2 * G * H), 0.3f, 7);
        rnn_layer(lstm ? "lstm" : "gru", "rnn", H, NULL, -1, NAMES("x", "w", "r", "b"), NAMES("y"));
        output("y");
        const char *kernel = sparse ? "r jit block-sparse" : q == 3 ? "OpenBLAS GEMMs" : "w jit dense for 3 rows, r OpenBLAS";
        check_two_threads(desc, 11, BC_KERNELS({"rnn", kernel}));
    }
}
END_TEST

START_TEST(rnn_block_sparse_uses_jit)
{
    /* block-pruned bidirectional LSTM and unstructured GRU: every gate product on the sparse kernel */
    rng = 4242u;
    for (int c = 0; c < 2; c++) {
        fresh_model("rnn");
        int lstm = c == 0;
        int64_t T = 3, B = 2, I = 13, H = 8, G = lstm ? 4 : 3, D = lstm ? 2 : 1;
        input("x", DIMS(T, B, I));
        constant_pruned("w", DIMS(D, G * H, I), lstm ? 1 : 2, 4, 4, 25, rnd());
        constant_pruned("r", DIMS(D, G * H, H), lstm ? 1 : 2, 4, 4, 25, rnd());
        constant_rand("b", DIMS(D, 2 * G * H), 0.5f, rnd());
        rnn_layer(lstm ? "lstm" : "gru", "rnn", H, lstm ? "bidirectional" : "forward", -1, NAMES("x", "w", "r", "b"),
                  lstm ? 3 : 2, (const char *const[]){"y", "yh", "yc"});
        output("y");
        output("yh");
        if (lstm) output("yc");
        check_kernels(lstm ? "block-sparse lstm" : "unstructured gru", (uint32_t)c,
                      BC_KERNELS({"rnn", "w jit block-sparse"}, {"rnn", "r jit block-sparse"}));
    }
}
END_TEST

START_TEST(rnn_cell_loop_every_width)
{
    /* the gates and state update in one JIT'd loop (rnn_cell.c), per row whole vectors of units and a
     * masked rest: hidden 37 (on AVX-512 2 vectors and 5 units, on AVX2 4 and 5, on SSE 9 and 1), batch 3,
     * every direction, initial states and every output, GRU with and without linear_before_reset, on
     * the host's ISA and each narrower one, against ref */
    static const struct {
        int lstm, lbr;
        const char *dir;
    } cases[] = {{1, -1, "forward"}, {1, -1, "reverse"}, {1, -1, "bidirectional"}, {0, 0, "forward"},
                 {0, 1, "reverse"},  {0, 0, "bidirectional"}, {0, 1, "bidirectional"}};
    static const char *const narrow[] = {NULL, "-avx512f", "-avx512f,-avx2"}, *const isas[] = {"avx512", "avx2", "sse"};
    int first = 0;
    while (first < 2 && strcmp(isas[first], expected_isa())) first++;
    for (int round = first; round < 3; round++) {
        if (round > first) reopen_context(narrow[round]);
        for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
            const int64_t T = 4, B = 3, I = 11, H = 37, G = cases[q].lstm ? 4 : 3, D = q == 2 || q >= 5 ? 2 : 1;
            fresh_model("rnn_cell");
            input("x", DIMS(T, B, I));
            constant_rand("w", DIMS(D, G * H, I), 0.4f, (uint32_t)q + 1);
            constant_rand("r", DIMS(D, G * H, H), 0.3f, (uint32_t)q + 2);
            constant_rand("b", DIMS(D, 2 * G * H), 0.5f, (uint32_t)q + 3);
            input("h0", DIMS(D, B, H));
            if (cases[q].lstm) input("c0", DIMS(D, B, H));
            const char *ins[7] = {"x", "w", "r", "b", "", "h0", "c0"}, *outs[3] = {"y", "yh", "yc"};
            rnn_layer(cases[q].lstm ? "lstm" : "gru", "rnn", H, cases[q].dir, cases[q].lbr, cases[q].lstm ? 7 : 6, ins,
                      cases[q].lstm ? 3 : 2, outs);
            output("y");
            output("yh");
            if (cases[q].lstm) output("yc");
            char desc[80];
            snprintf(desc, sizeof desc, "%s %s lbr %d (%s)", cases[q].lstm ? "lstm" : "gru", cases[q].dir, cases[q].lbr,
                     isas[round]);
            check_kernels(desc, (uint32_t)q + 20, BC_KERNELS({"rnn", cases[q].lstm ? "lstm: " : "gru: "}));
        }
    }
    if (first < 2) reopen_context(NULL);
}
END_TEST

/* The tests at 2 threads: PDC_OMP_STATIC, so that the team is what the option says whatever else the
 * host runs. */
static void static_teams_setup(void)
{
    bc_setup();
    env_flag("PDC_OMP_STATIC", 1);
}

static void static_teams_teardown(void)
{
    unsetenv("PDC_OMP_STATIC");
    bc_teardown();
}

int main(void)
{
    Suite *s = suite_create("cpu_gemm");
    bc_tcases t = bc_add_some_cases(s, bc_setup, bc_teardown, BC_TC_GEMM);
    tcase_add_test(t.gemm, rnn_block_sparse_uses_jit);
    tcase_add_test(t.gemm, rnn_cell_loop_every_width);
    test_add_tcase(s, "threads", static_teams_setup, static_teams_teardown, 300,
                   TEST_LIST(gemm_activation_per_block, dense_small_batches_packed,
                             matmul_const_weights_on_sparse_kernels, matmul_batches_split_over_threads,
                             rnn_recurrent_rows_split_over_threads));
    return cpu_run(s);
}
