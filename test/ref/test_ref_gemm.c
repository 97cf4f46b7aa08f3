/*
 * test_ref_gemm.c - the reference backend's matrix products and recurrences against hand-computed
 * values: fc (bias, flattening), gemm (transposes, alpha, beta, C broadcast or full), matmul (batch
 * broadcasting, a rank-2 right operand), and LSTM/GRU (directions, initial states, linear_before_reset,
 * optional outputs) against their recurrences written out in scalar math or as a loop oracle.
 *
 * Every model is built with the public builder API, compiled for "ref" and run through
 * pdc_program_run (test/common/expect.h). Expected numbers are worked out by hand (the arithmetic is in
 * the comments) or, for the recurrent ops, by the recurrence written out right here in the test.
 */
#include <stdint.h>

#include "test/common/testutil.h"
#include "test/common/expect.h"

/* ------------------------------------------------------------------ fc, gemm, matmul */

START_TEST(fc_bias)
{
    /* x = [[1,2,3],[4,5,6]], w = [[1,0,-1],[.5,.5,.5]], b = [10,20]
     * row 0: 1-3+10 = 8, 3+20 = 23; row 1: 4-6+10 = 8, 7.5+20 = 27.5 */
    input("x", SHAPE(2, 3));
    constant("w", SHAPE(2, 3), F(1, 0, -1, 0.5f, 0.5f, 0.5f));
    constant("b", SHAPE(2), F(10, 20));
    layer("fc", NULL, "y", NAMES("x", "w", "b"));
    run1(F(1, 2, 3, 4, 5, 6), SHAPE(2, 2), F(8, 23, 8, 27.5f));
}
END_TEST

START_TEST(fc_flattens)
{
    /* x [1,2,1,2] = [1,2,3,4] flattened to [1,4]; w = [1,-1,2,-2]: 1-2+6-8 = -3 */
    input("x", SHAPE(1, 2, 1, 2));
    constant("w", SHAPE(1, 4), F(1, -1, 2, -2));
    layer("fc", NULL, "y", NAMES("x", "w"));
    run1(F(1, 2, 3, 4), SHAPE(1, 1), F(-3));
}
END_TEST

START_TEST(gemm_trans_alpha_beta)
{
    /* A stored [3,2] = [[1,2],[3,4],[5,6]], transA -> [[1,3,5],[2,4,6]]
     * B stored [2,3] = [[1,0,1],[0,1,0]], transB -> [[1,0],[0,1],[1,0]]
     * A'B' = [[6,3],[8,4]]; alpha 2 -> [[12,6],[16,8]]; C = [1,2] per row, beta .5 -> + [.5, 1] */
    input("a", SHAPE(3, 2));
    constant("b", SHAPE(2, 3), F(1, 0, 1, 0, 1, 0));
    constant("c", SHAPE(2), F(1, 2));
    pdc_attrs *a = set_int(set_int(attrs(), "transA", 1), "transB", 1);
    layer("gemm", set_float(set_float(a, "alpha", 2.0f), "beta", 0.5f), "y", NAMES("a", "b", "c"));
    run1(F(1, 2, 3, 4, 5, 6), SHAPE(2, 2), F(12.5f, 7, 16.5f, 9));
}
END_TEST

START_TEST(gemm_column_bias)
{
    /* [[1,2],[3,4]] [[5,6],[7,8]] = [[19,22],[43,50]]; C [2,1] = [1,-1] broadcasts along rows */
    input("a", SHAPE(2, 2));
    constant("b", SHAPE(2, 2), F(5, 6, 7, 8));
    constant("c", SHAPE(2, 1), F(1, -1));
    layer("gemm", NULL, "y", NAMES("a", "b", "c"));
    run1(F(1, 2, 3, 4), SHAPE(2, 2), F(20, 23, 42, 49));
}
END_TEST

START_TEST(gemm_no_bias_full_c)
{
    /* two layers: y1 = A B (no C, alpha 0.5); y2 = A B + C with C [2,2] and beta 2 */
    input("a", SHAPE(2, 2));
    constant("b", SHAPE(2, 2), F(5, 6, 7, 8));
    constant("c", SHAPE(2, 2), F(1, 2, 3, 4));
    layer("gemm", set_float(attrs(), "alpha", 0.5f), "y1", NAMES("a", "b"));
    layer("gemm", set_float(attrs(), "beta", 2.0f), "y2", NAMES("a", "b", "c"));
    run_expect(INS(F(1, 2, 3, 4)),
               OUTS({"y1", SHAPE(2, 2), F(9.5f, 11, 21.5f, 25)}, {"y2", SHAPE(2, 2), F(21, 26, 49, 58)}));
}
END_TEST

START_TEST(matmul_batch_broadcast_both)
{
    /* a [2,1,1,2]: a0 = [1,2], a1 = [3,4]; b [3,2,1]: b0 = [1,0], b1 = [0,1], b2 = [1,1]
     * y [2,3,1,1], y[i][j] = ai . bj = [[1,2,3],[3,4,7]] */
    binary_case("matmul", NULL, SHAPE(2, 1, 1, 2), F(1, 2, 3, 4), SHAPE(3, 2, 1), F(1, 0, 0, 1, 1, 1), SHAPE(2, 3, 1, 1),
                F(1, 2, 3, 3, 4, 7));
}
END_TEST

START_TEST(matmul_rank2_rhs)
{
    /* a [2,2,3] times b [3,1] = [1,2,3]^T for each batch:
     * [[1,2,3],[4,5,6]] -> 14, 32; [[1,0,0],[0,1,0]] -> 1, 2 */
    binary_case("matmul", NULL, SHAPE(2, 2, 3), F(1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0), SHAPE(3, 1), F(1, 2, 3),
                SHAPE(2, 2, 1), F(14, 32, 1, 2));
}
END_TEST

START_TEST(matmul_plain)
{
    /* [1,2;3,4] [[1,0,2],[0,1,3]] = [[1,2,8],[3,4,18]] */
    binary_case("matmul", NULL, SHAPE(2, 2), F(1, 2, 3, 4), SHAPE(2, 3), F(1, 0, 2, 0, 1, 3), SHAPE(2, 3),
                F(1, 2, 8, 3, 4, 18));
}
END_TEST

/* ------------------------------------------------------------------ lstm, gru */

static double sig(double v) { return 1.0 / (1.0 + exp(-v)); }

/* Shared H=1, I=1 weights. LSTM gates i,o,f,c; GRU gates z,r,h. */
static const float lstm_w[4] = {0.5f, -0.3f, 0.8f, 1.2f};
static const float lstm_r[4] = {0.1f, 0.2f, -0.4f, 0.6f};
static const float lstm_b[8] = {0.1f, 0.2f, 0.3f, 0.4f, 0.05f, -0.05f, 0.1f, -0.1f};
static const float gru_w[3] = {0.4f, -0.6f, 0.9f};
static const float gru_r[3] = {0.3f, 0.5f, -0.7f};
static const float gru_b[6] = {0.1f, -0.2f, 0.3f, 0.2f, 0.1f, -0.4f};

/* The H = 1, I = 1 layer op ("lstm": the lstm_* weights, or "gru": gru_*) named "y" over x = [1, -2]
 * ([2, 1, 1]): its bias if `bias`, initial states h0 (c0) where not NULL, direction (NULL: not set)
 * and linear_before_reset (< 0: not set); y, y_h (and an lstm's y_c) must be y[0..1], h (and c). */
static void rnn_h1_case(const char *op, int bias, const float *h0, const float *c0, const char *direction, int lbr,
                        const double *y, double h, double c)
{
    const int lstm = !strcmp(op, "lstm"), g = lstm ? 4 : 3;
    input("x", SHAPE(2, 1, 1));
    constant("w", SHAPE(1, g, 1), lstm ? lstm_w : gru_w);
    constant("r", SHAPE(1, g, 1), lstm ? lstm_r : gru_r);
    if (bias) constant("b", SHAPE(1, 2 * g), lstm ? lstm_b : gru_b);
    if (h0) constant("h0", SHAPE(1, 1, 1), h0);
    if (c0) constant("c0", SHAPE(1, 1, 1), c0);
    const char *ins[7] = {"x", "w", "r", bias ? "b" : "", "", h0 ? "h0" : "", c0 ? "c0" : ""};
    size_t n_in = 7;
    while (!*ins[n_in - 1]) n_in--; /* no trailing empty inputs */
    rnn_layer(op, "y", 1, direction, lbr, n_in, ins, lstm ? 3 : 2, (const char *const[]){"y", "yh", "yc"});
    run_expect(INS(F(1, -2)), lstm ? 3 : 2,
               (const expect[]){{"y", SHAPE(2, 1, 1, 1), F((float)y[0], (float)y[1])},
                                {"yh", SHAPE(1, 1, 1), F((float)h)},
                                {"yc", SHAPE(1, 1, 1), F((float)c)}});
}

START_TEST(lstm_forward_h1)
{
    /* T=2, B=1, I=1, H=1, bias, no initial state (h = c = 0). The recurrence, written out: */
    const double xs[2] = {1, -2};
    double h = 0, c = 0, y[2];
    for (int t = 0; t < 2; t++) {
        double x = xs[t];
        double i = sig(0.5 * x + 0.1 * h + 0.1 + 0.05);
        double o = sig(-0.3 * x + 0.2 * h + 0.2 - 0.05);
        double f = sig(0.8 * x - 0.4 * h + 0.3 + 0.1);
        double g = tanh(1.2 * x + 0.6 * h + 0.4 - 0.1);
        c = f * c + i * g;
        h = o * tanh(c);
        y[t] = h;
    }
    /* the same numbers from an independent (Python) evaluation */
    ck_assert_double_eq_tol(y[0], 0.246670928, 1e-8);
    ck_assert_double_eq_tol(y[1], -0.112865269, 1e-8);
    ck_assert_double_eq_tol(c, -0.165096509, 1e-8);
    rnn_h1_case("lstm", 1, NULL, NULL, NULL, -1, y, h, c);
}
END_TEST

START_TEST(lstm_reverse_initial_state)
{
    /* direction reverse, no bias, h0 = 0.3, c0 = -0.5: time runs t = 1 then t = 0; y[t] is the state
     * after consuming x[t]; y_h = y_c's partner after the last step (t = 0). */
    const double xs[2] = {1, -2};
    double h = 0.3, c = -0.5, y[2];
    for (int t = 1; t >= 0; t--) {
        double x = xs[t];
        double i = sig(0.5 * x + 0.1 * h);
        double o = sig(-0.3 * x + 0.2 * h);
        double f = sig(0.8 * x - 0.4 * h);
        double g = tanh(1.2 * x + 0.6 * h);
        c = f * c + i * g;
        h = o * tanh(c);
        y[t] = h;
    }
    ck_assert_double_eq_tol(y[0], 0.0989351464, 1e-8);
    ck_assert_double_eq_tol(y[1], -0.218482753, 1e-8);
    ck_assert_double_eq_tol(c, 0.243128548, 1e-8);
    rnn_h1_case("lstm", 0, F(0.3f), F(-0.5f), "reverse", -1, y, h, c);
}
END_TEST

/* One LSTM or GRU direction for H <= 2, I <= 2, B <= 2, written with plain loops. w, r, wb, rb are
 * that direction's slices: w[G*H][I], r[G*H][H], wb[G*H], rb[G*H] (wb/rb NULL = zero). Writes
 * y[t][d][b][k] of a [T,D,B,H] array and the final h (and c) into hT[b][k] (cT). */
static void rnn_oracle(int lstm, int lbr, int T, int D, int d, int B, int I, int H, int reverse, const float *x,
                       const float *w, const float *r, const float *wb, const float *rb, const float *h0,
                       const float *c0, float *y, float *hT, float *cT)
{
    double h[2][2] = {{0}}, c[2][2] = {{0}};
    for (int b = 0; b < B; b++)
        for (int k = 0; k < H; k++) {
            h[b][k] = h0 ? h0[b * H + k] : 0;
            c[b][k] = c0 ? c0[b * H + k] : 0;
        }
    for (int s = 0; s < T; s++) {
        int t = reverse ? T - 1 - s : s;
        for (int b = 0; b < B; b++) {
            double xw[8] = {0}, hr[8] = {0}; /* per gate row: x.W + Wb, h.R + Rb */
            int G = lstm ? 4 : 3;
            for (int j = 0; j < G * H; j++) {
                xw[j] = wb ? wb[j] : 0;
                hr[j] = rb ? rb[j] : 0;
                for (int i = 0; i < I; i++) xw[j] += x[(t * B + b) * I + i] * w[j * I + i];
                for (int k = 0; k < H; k++) hr[j] += h[b][k] * r[j * H + k];
            }
            double hn[2];
            if (lstm) {
                for (int k = 0; k < H; k++) {
                    double ig = sig(xw[k] + hr[k]);
                    double og = sig(xw[H + k] + hr[H + k]);
                    double fg = sig(xw[2 * H + k] + hr[2 * H + k]);
                    double cg = tanh(xw[3 * H + k] + hr[3 * H + k]);
                    c[b][k] = fg * c[b][k] + ig * cg;
                    hn[k] = og * tanh(c[b][k]);
                }
            } else {
                double z[2], rg[2];
                for (int k = 0; k < H; k++) {
                    z[k] = sig(xw[k] + hr[k]);
                    rg[k] = sig(xw[H + k] + hr[H + k]);
                }
                for (int k = 0; k < H; k++) {
                    int j = 2 * H + k;
                    double pre;
                    if (lbr) {
                        pre = xw[j] + rg[k] * hr[j];
                    } else {
                        pre = xw[j] + (rb ? rb[j] : 0);
                        for (int q = 0; q < H; q++) pre += rg[q] * h[b][q] * r[j * H + q];
                    }
                    hn[k] = (1 - z[k]) * tanh(pre) + z[k] * h[b][k];
                }
            }
            for (int k = 0; k < H; k++) {
                h[b][k] = hn[k];
                y[((t * D + d) * B + b) * H + k] = (float)hn[k];
            }
        }
    }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < H; k++) {
            hT[b * H + k] = (float)h[b][k];
            if (cT) cT[b * H + k] = (float)c[b][k];
        }
}

START_TEST(lstm_bidirectional_h2)
{
    /* T=2, B=2, I=2, H=2, both directions, bias, h0 and c0; outputs y and y_c (y_h absent) */
    enum { T = 2, B = 2, I = 2, H = 2, D = 2, G = 4 };
    float x[T * B * I], w[D * G * H * I], r[D * G * H * H], b[D * 2 * G * H], h0[D * B * H], c0[D * B * H];
    test_fill_random(x, T * B * I, 1);
    test_fill_random(w, D * G * H * I, 2);
    test_fill_random(r, D * G * H * H, 3);
    test_fill_random(b, D * 2 * G * H, 4);
    test_fill_random(h0, D * B * H, 5);
    test_fill_random(c0, D * B * H, 6);
    float y[T * D * B * H], yh[D * B * H], yc[D * B * H];
    for (int d = 0; d < D; d++)
        rnn_oracle(1, 0, T, D, d, B, I, H, d == 1, x, w + d * G * H * I, r + d * G * H * H, b + d * 2 * G * H,
                   b + d * 2 * G * H + G * H, h0 + d * B * H, c0 + d * B * H, y, yh + d * B * H, yc + d * B * H);
    /* y_h equals y at the last step of each direction: t = T-1 forward, t = 0 reverse */
    for (int i = 0; i < B * H; i++) {
        ck_assert_float_eq(yh[i], y[((T - 1) * D + 0) * B * H + i]);
        ck_assert_float_eq(yh[B * H + i], y[(0 * D + 1) * B * H + i]);
    }

    input("x", SHAPE(T, B, I));
    constant("w", SHAPE(D, G * H, I), w);
    constant("r", SHAPE(D, G * H, H), r);
    constant("b", SHAPE(D, 2 * G * H), b);
    constant("h0", SHAPE(D, B, H), h0);
    constant("c0", SHAPE(D, B, H), c0);
    rnn_layer("lstm", "y", H, "bidirectional", -1, NAMES("x", "w", "r", "b", "", "h0", "c0"), NAMES("y", "", "yc"));
    run_expect(INS(x), OUTS({"y", SHAPE(T, D, B, H), y}, {"yc", SHAPE(D, B, H), yc}));
}
END_TEST

static void gru_h1_case(int lbr, const float *want)
{
    /* T=2, I=1, H=1, bias, h0 = 0.5, written out:
     *   z = sig(.4x + .3h + .1 + .2), r = sig(-.6x + .5h - .2 + .1)
     *   lbr 0: h~ = tanh(.9x + (-.7)(r h) + (-.4) + .3);  lbr 1: h~ = tanh(.9x + r((-.7)h + (-.4)) + .3)
     *   h = (1-z) h~ + z h */
    const double xs[2] = {1, -2};
    double h = 0.5, y[2];
    for (int t = 0; t < 2; t++) {
        double x = xs[t];
        double z = sig(0.4 * x + 0.3 * h + 0.1 + 0.2);
        double r = sig(-0.6 * x + 0.5 * h - 0.2 + 0.1);
        double hh = lbr ? tanh(0.9 * x + r * (-0.7 * h - 0.4) + 0.3) : tanh(0.9 * x - 0.7 * (r * h) - 0.4 + 0.3);
        h = (1 - z) * hh + z * h;
        y[t] = h;
    }
    ck_assert_double_eq_tol(y[0], want[0], 1e-7);
    ck_assert_double_eq_tol(y[1], want[1], 1e-7);
    rnn_h1_case("gru", 1, F(0.5f), NULL, NULL, lbr, y, h, 0);
}

START_TEST(gru_forward_h1)
{
    gru_h1_case(0, F(0.524205016f, -0.352825571f));
}
END_TEST

START_TEST(gru_linear_before_reset)
{
    gru_h1_case(1, F(0.565923446f, -0.329154067f));
}
END_TEST

START_TEST(gru_reverse_h1)
{
    /* reverse, no bias, no h0: t = 1 first */
    const double xs[2] = {1, -2};
    double h = 0, y[2];
    for (int t = 1; t >= 0; t--) {
        double x = xs[t];
        double z = sig(0.4 * x + 0.3 * h);
        double r = sig(-0.6 * x + 0.5 * h);
        double hh = tanh(0.9 * x - 0.7 * (r * h));
        h = (1 - z) * hh + z * h;
        y[t] = h;
    }
    ck_assert_double_eq_tol(y[0], -0.012278808, 1e-8);
    ck_assert_double_eq_tol(y[1], -0.653271987, 1e-8);
    rnn_h1_case("gru", 0, NULL, NULL, "reverse", -1, y, h, 0);
}
END_TEST

static void gru_bidir_case(int lbr)
{
    enum { T = 2, B = 2, I = 2, H = 2, D = 2, G = 3 };
    float x[T * B * I], w[D * G * H * I], r[D * G * H * H], b[D * 2 * G * H], h0[D * B * H];
    test_fill_random(x, T * B * I, 11);
    test_fill_random(w, D * G * H * I, 12);
    test_fill_random(r, D * G * H * H, 13);
    test_fill_random(b, D * 2 * G * H, 14);
    test_fill_random(h0, D * B * H, 15);
    float y[T * D * B * H], yh[D * B * H];
    for (int d = 0; d < D; d++)
        rnn_oracle(0, lbr, T, D, d, B, I, H, d == 1, x, w + d * G * H * I, r + d * G * H * H, b + d * 2 * G * H,
                   b + d * 2 * G * H + G * H, h0 + d * B * H, NULL, y, yh + d * B * H, NULL);

    input("x", SHAPE(T, B, I));
    constant("w", SHAPE(D, G * H, I), w);
    constant("r", SHAPE(D, G * H, H), r);
    constant("b", SHAPE(D, 2 * G * H), b);
    constant("h0", SHAPE(D, B, H), h0);
    rnn_layer("gru", "y", H, "bidirectional", lbr, NAMES("x", "w", "r", "b", "", "h0"), NAMES("y", "yh"));
    run_expect(INS(x), OUTS({"y", SHAPE(T, D, B, H), y}, {"yh", SHAPE(D, B, H), yh}));
}

START_TEST(gru_bidirectional_h2)
{
    gru_bidir_case(0);
}
END_TEST

START_TEST(gru_bidirectional_h2_lbr)
{
    gru_bidir_case(1);
}
END_TEST

START_TEST(rnn_oracle_matches_scalar)
{
    /* the loop oracle agrees with the written-out H=1 LSTM and GRU recurrences above */
    float y[2], hT[1], cT[1];
    rnn_oracle(1, 0, 2, 1, 0, 1, 1, 1, 0, F(1, -2), lstm_w, lstm_r, lstm_b, lstm_b + 4, NULL, NULL, y, hT, cT);
    ck_assert_float_eq_tol(y[0], 0.246670928f, 1e-6f);
    ck_assert_float_eq_tol(y[1], -0.112865269f, 1e-6f);
    ck_assert_float_eq_tol(cT[0], -0.165096509f, 1e-6f);
    for (int lbr = 0; lbr < 2; lbr++) {
        rnn_oracle(0, lbr, 2, 1, 0, 1, 1, 1, 0, F(1, -2), gru_w, gru_r, gru_b, gru_b + 3, F(0.5f), NULL, y, hT, NULL);
        ck_assert_float_eq_tol(y[0], lbr ? 0.565923446f : 0.524205016f, 1e-6f);
        ck_assert_float_eq_tol(y[1], lbr ? -0.329154067f : -0.352825571f, 1e-6f);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ref_gemm");
    test_add_tcase(s, "gemm", ref_setup, mb_close, 0,
                   TEST_LIST(fc_bias, fc_flattens, gemm_trans_alpha_beta, gemm_column_bias, gemm_no_bias_full_c,
                             matmul_batch_broadcast_both, matmul_rank2_rhs, matmul_plain));
    test_add_tcase(s, "rnn", ref_setup, mb_close, 0,
                   TEST_LIST(rnn_oracle_matches_scalar, lstm_forward_h1, lstm_reverse_initial_state,
                             lstm_bidirectional_h2, gru_forward_h1, gru_linear_before_reset, gru_reverse_h1,
                             gru_bidirectional_h2, gru_bidirectional_h2_lbr));
    return test_run_suite(s);
}
