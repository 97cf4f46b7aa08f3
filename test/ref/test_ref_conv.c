/*
 * test_ref_conv.c - the reference backend's windowed ops against hand-computed values: convolutions
 * (1-D, 2-D, 3-D; strides, pads, dilation, groups, depthwise, bias) and pooling (max, average, global;
 * ceil_mode, padding, count_include_pad, dilation, 3-D).
 *
 * Every model is built with the public builder API, compiled for "ref" and run through
 * pdc_program_run (test/common/expect.h). Expected numbers are worked out by hand (the arithmetic is in
 * the comments).
 */
#include <stdint.h>

#include "test/common/testutil.h"
#include "test/common/expect.h"

/* ------------------------------------------------------------------ conv */

/* y = conv(x, w[, b]) with attrs a (may be NULL): x of shape xs, w of shape ws, b (NULL: none) of
 * shape [O], y of shape ys. */
static void conv_case(pdc_attrs *a, size_t xr, const int64_t *xd, const float *x, size_t wr, const int64_t *wd,
                      const float *w, const float *b, size_t yr, const int64_t *yd, const float *want)
{
    input("x", xr, xd);
    constant("w", wr, wd, w);
    if (b) {
        constant("b", SHAPE(wd[0]), b);
        layer("conv", a, "y", NAMES("x", "w", "b"));
    } else {
        layer("conv", a, "y", NAMES("x", "w"));
    }
    run1(x, yr, yd, want);
}

START_TEST(conv2d_basic)
{
    /* x = [[1,2,3],[4,5,6],[7,8,9]], w = [[1,2],[3,4]] (no flip: cross-correlation)
     * y00 = 1+4+12+20 = 37, y01 = 2+6+15+24 = 47, y10 = 4+10+21+32 = 67, y11 = 5+12+24+36 = 77 */
    conv_case(NULL, SHAPE(1, 1, 3, 3), seq, SHAPE(1, 1, 2, 2), F(1, 2, 3, 4), NULL, SHAPE(1, 1, 2, 2), F(37, 47, 67, 77));
}
END_TEST

START_TEST(conv2d_stride_pad_bias)
{
    /* x = 4x4 of 1..16, 3x3 kernels, stride 2, pad 1 -> 2x2 windows at rows/cols {-1..1} and {1..3}.
     * channel 0: all-ones kernel, bias 0.5:  {1,2,5,6}=14, {2,3,4,6,7,8}=30, {5,6,9,10,13,14}=57,
     *            {6,7,8,10,11,12,14,15,16}=99
     * channel 1: +1 at the top-left tap, -1 at the bottom-right tap, bias -1:
     *            0-6, 0-8, 0-14, 6-16  (top-left taps at (-1,-1), (-1,1), (1,-1) are padding) */
    conv_case(set_ints(set_ints(attrs(), "strides", SHAPE(2, 2)), "pads", SHAPE(1, 1, 1, 1)), SHAPE(1, 1, 4, 4), seq,
              SHAPE(2, 1, 3, 3), F(1, 1, 1, 1, 1, 1, 1, 1, 1, /**/ 1, 0, 0, 0, 0, 0, 0, 0, -1), F(0.5f, -1),
              SHAPE(1, 2, 2, 2), F(14.5f, 30.5f, 57.5f, 99.5f, -7, -9, -15, -11));
}
END_TEST

START_TEST(conv2d_asymmetric_pads)
{
    /* pads = [top 1, left 0, bottom 0, right 1], 1x1 kernel of 2: the 2x2 input lands at rows 1..2,
     * cols 0..1 of a 3x3 output */
    conv_case(set_ints(attrs(), "pads", SHAPE(1, 0, 0, 1)), SHAPE(1, 1, 2, 2), F(1, 2, 3, 4), SHAPE(1, 1, 1, 1), F(2),
              NULL, SHAPE(1, 1, 3, 3), F(0, 0, 0, 2, 4, 0, 6, 8, 0));
}
END_TEST

START_TEST(conv2d_dilation)
{
    /* x[r][c] = 4r+c+1, w = [[1,2],[3,4]] with dilation 2 taps (0,0),(0,2),(2,0),(2,2):
     * y = 1*x + 2*(x+2) + 3*(x+8) + 4*(x+10) = 10x + 68 for x = x[i][j], i,j in {0,1} */
    conv_case(set_ints(attrs(), "dilations", SHAPE(2, 2)), SHAPE(1, 1, 4, 4), seq, SHAPE(1, 1, 2, 2), F(1, 2, 3, 4),
              NULL, SHAPE(1, 1, 2, 2), F(78, 88, 118, 128));
}
END_TEST

START_TEST(conv2d_groups)
{
    /* 4 channels [1,2,3,4], group 2: outputs 0,1 see channels {1,2}, outputs 2,3 see {3,4}
     * w rows: [1,1] -> 3, [1,-1] -> -1, [2,0] -> 6, [0,3] -> 12 */
    conv_case(set_int(attrs(), "group", 2), SHAPE(1, 4, 1, 1), F(1, 2, 3, 4), SHAPE(4, 2, 1, 1),
              F(1, 1, 1, -1, 2, 0, 0, 3), NULL, SHAPE(1, 4, 1, 1), F(3, -1, 6, 12));
}
END_TEST

START_TEST(conv2d_depthwise)
{
    /* channel 0 = 1..9 with an all-ones 2x2 kernel: 2x2 window sums 12, 16, 24, 28
     * channel 1 = all ones with kernel [1,2,3,4] and bias 1: 10 + 1 = 11 everywhere */
    conv_case(set_int(attrs(), "group", 2), SHAPE(1, 2, 3, 3), F(1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1),
              SHAPE(2, 1, 2, 2), F(1, 1, 1, 1, 1, 2, 3, 4), F(0, 1), SHAPE(1, 2, 2, 2), F(12, 16, 24, 28, 11, 11, 11, 11));
}
END_TEST

START_TEST(conv2d_depthwise_multiplier)
{
    /* group = C = 2, O = 4: outputs 0,1 read channel 0 (=1), outputs 2,3 read channel 1 (=10) */
    conv_case(set_int(attrs(), "group", 2), SHAPE(1, 2, 1, 1), F(1, 10), SHAPE(4, 1, 1, 1), F(1, 2, 3, 4), NULL,
              SHAPE(1, 4, 1, 1), F(1, 2, 30, 40));
}
END_TEST

START_TEST(conv1d)
{
    /* w = [1,0,-1], stride 2, pad 1: windows start at -1, 1, 3: y = x[s] - x[s+2]
     * batch 0 = 1..5: (0-2, 2-4, 4-0); batch 1 = 5..1: (0-4, 4-2, 2-0) */
    conv_case(set_ints(set_ints(attrs(), "strides", SHAPE(2)), "pads", SHAPE(1, 1)), SHAPE(2, 1, 5),
              F(1, 2, 3, 4, 5, 5, 4, 3, 2, 1), SHAPE(1, 1, 3), F(1, 0, -1), NULL, SHAPE(2, 1, 3), F(-2, -2, 4, -4, 2, 2));
}
END_TEST

START_TEST(conv1d_channels_bias)
{
    /* 2 in channels, kernel 2: y[t] = x0[t] + x0[t+1] - x1[t] + b; x0 = [1,2,3], x1 = [10,20,30], b = 100
     * -> 1+2-10+100 = 93, 2+3-20+100 = 85 */
    conv_case(NULL, SHAPE(1, 2, 3), F(1, 2, 3, 10, 20, 30), SHAPE(1, 2, 2), F(1, 1, -1, 0), F(100), SHAPE(1, 1, 2),
              F(93, 85));
}
END_TEST

START_TEST(conv3d)
{
    /* x[d][h][w] = 4d+2h+w+1 (3x2x2), kernel 2x1x1 = [1, 10]: y = x + 10*(x+4) = 11x + 40 */
    conv_case(NULL, SHAPE(1, 1, 3, 2, 2), seq, SHAPE(1, 1, 2, 1, 1), F(1, 10), NULL, SHAPE(1, 1, 2, 2, 2),
              F(51, 62, 73, 84, 95, 106, 117, 128));
}
END_TEST

START_TEST(conv3d_stride_pad)
{
    /* 2x2x2 input, all-ones 2x2x2 kernel, pad 1 everywhere, stride 2: windows {-1,0} and {1,2} per dim
     * each contain exactly one input element, so y = x; channel 1 doubles via weight 2, bias 1 */
    conv_case(set_ints(set_ints(attrs(), "strides", SHAPE(2, 2, 2)), "pads", SHAPE(1, 1, 1, 1, 1, 1)),
              SHAPE(1, 1, 2, 2, 2), F(1, 2, 3, 4, 5, 6, 7, 8), SHAPE(2, 1, 2, 2, 2),
              F(1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2), F(0, 1), SHAPE(1, 2, 2, 2, 2),
              F(1, 2, 3, 4, 5, 6, 7, 8, 3, 5, 7, 9, 11, 13, 15, 17));
}
END_TEST

/* ------------------------------------------------------------------ pooling */

/* Pool attributes: kernel_shape k, strides s and pads p where given (a count of 0: not set), and
 * ceil_mode if ceil. */
static pdc_attrs *pool_attrs(size_t nk, const int64_t *k, size_t ns, const int64_t *s, size_t np, const int64_t *p,
                             int ceil)
{
    pdc_attrs *a = set_ints(attrs(), "kernel_shape", nk, k);
    if (ns) set_ints(a, "strides", ns, s);
    if (np) set_ints(a, "pads", np, p);
    if (ceil) set_int(a, "ceil_mode", 1);
    return a;
}

START_TEST(maxpool_basic)
{
    /* 4x4 of 1..16, 2x2 stride 2: maxima are the bottom-right elements 6, 8, 14, 16 */
    op1_case("maxpool", pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL, 0), SHAPE(1, 1, 4, 4), seq, SHAPE(1, 1, 2, 2),
             F(6, 8, 14, 16));
}
END_TEST

START_TEST(maxpool_padding_never_wins)
{
    /* x = -(1..16), 3x3 stride 2 pad 1: windows {1,2,5,6}, {2,3,4,6,7,8}, {5,6,9,10,13,14}, {6..16}
     * negated maxima -1, -2, -5, -6 (a zero pad would win if padding counted) */
    float x[16];
    for (int i = 0; i < 16; i++) x[i] = -(float)(i + 1);
    op1_case("maxpool", pool_attrs(SHAPE(3, 3), SHAPE(2, 2), SHAPE(1, 1, 1, 1), 0), SHAPE(1, 1, 4, 4), x,
             SHAPE(1, 1, 2, 2), F(-1, -2, -5, -6));
}
END_TEST

START_TEST(maxpool_ceil_mode)
{
    /* 5x5, 2x2 stride 2: floor -> 2x2 (rows {0,1},{2,3}); ceil -> 3x3 adding the partial window {4}
     * max = x[last row][last col] of each window, rows/cols {1,3,4}: 5r+c+1 */
    input("x", SHAPE(1, 1, 5, 5));
    layer("maxpool", pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL, 1), "yc", NAMES("x"));
    layer("maxpool", pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL, 0), "yf", NAMES("x"));
    run_expect(INS(seq), OUTS({"yc", SHAPE(1, 1, 3, 3), F(7, 9, 10, 17, 19, 20, 22, 24, 25)},
                              {"yf", SHAPE(1, 1, 2, 2), F(7, 9, 17, 19)}));
}
END_TEST

START_TEST(maxpool_dilation)
{
    /* 2x2 kernel, dilation 2 on 4x4 1..16: taps (i,j),(i,j+2),(i+2,j),(i+2,j+2); max is x[i+2][j+2] */
    op1_case("maxpool", set_ints(set_ints(attrs(), "kernel_shape", SHAPE(2, 2)), "dilations", SHAPE(2, 2)),
             SHAPE(1, 1, 4, 4), seq, SHAPE(1, 1, 2, 2), F(11, 12, 15, 16));
}
END_TEST

START_TEST(avgpool_ceil_mode)
{
    /* 5x5, 2x2 stride 2, ceil: window rows {0,1},{2,3},{4} (mean .5, 2.5, 4), cols likewise;
     * mean of 5r+c+1 = 5*mean(r) + mean(c) + 1. The partial windows average only what they cover, also
     * with count_include_pad = 1 (no padding there: the divisor stops at the padded input's edge). */
    input("x", SHAPE(1, 1, 5, 5));
    layer("avgpool", pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL, 1), "y0", NAMES("x"));
    pdc_attrs *a = pool_attrs(SHAPE(2, 2), SHAPE(2, 2), 0, NULL, 1);
    layer("avgpool", set_int(a, "count_include_pad", 1), "y1", NAMES("x"));
    const float *want = F(4, 6, 7.5f, 14, 16, 17.5f, 21.5f, 23.5f, 25);
    run_expect(INS(seq), OUTS({"y0", SHAPE(1, 1, 3, 3), want}, {"y1", SHAPE(1, 1, 3, 3), want}));
}
END_TEST

START_TEST(avgpool_padding_count_include_pad)
{
    /* 3x3 of 1..9, 3x3 kernel, stride 1, pad 1. Window sums: 12 21 16 / 27 45 33 / 24 39 28 over
     * 4 6 4 / 6 9 6 / 4 6 4 real elements. count_include_pad 0 divides by those, 1 divides by 9. */
    input("x", SHAPE(1, 1, 3, 3));
    layer("avgpool", pool_attrs(SHAPE(3, 3), 0, NULL, SHAPE(1, 1, 1, 1), 0), "y0", NAMES("x"));
    layer("avgpool", set_int(pool_attrs(SHAPE(3, 3), 0, NULL, SHAPE(1, 1, 1, 1), 0), "count_include_pad", 1), "y1",
          NAMES("x"));
    run_expect(INS(seq), OUTS({"y0", SHAPE(1, 1, 3, 3), F(3, 3.5f, 4, 4.5f, 5, 5.5f, 6, 6.5f, 7)},
                              {"y1", SHAPE(1, 1, 3, 3),
                               F(12 / 9.0f, 21 / 9.0f, 16 / 9.0f, 27 / 9.0f, 45 / 9.0f, 33 / 9.0f, 24 / 9.0f,
                                 39 / 9.0f, 28 / 9.0f)}));
}
END_TEST

START_TEST(pool_ceil_mode_with_pads)
{
    /* x = [1,2,3,4] as 1x4, kernel 1x3, stride 2, pads 1 left and right, ceil_mode: output width
     * ceil((4+2-3)/2)+1 = 3, windows at -1..1, 1..3, 3..5 (column 5 is past the right pad).
     *   max: 2, 4, 4
     *   avg, count_include_pad 0: (1+2)/2, (2+3+4)/3, 4/1
     *   avg, count_include_pad 1: (0+1+2)/3, 3, (4+0)/2 (the tap past the padding is not counted) */
    input("x", SHAPE(1, 1, 1, 4));
    const char *ops[3] = {"maxpool", "avgpool", "avgpool"};
    const char *outs[3] = {"ymax", "yavg0", "yavg1"};
    for (int i = 0; i < 3; i++) {
        pdc_attrs *a = pool_attrs(SHAPE(1, 3), SHAPE(1, 2), SHAPE(0, 1, 0, 1), 1);
        if (i == 2) set_int(a, "count_include_pad", 1);
        layer(ops[i], a, outs[i], NAMES("x"));
    }
    run_expect(INS(F(1, 2, 3, 4)), OUTS({"ymax", SHAPE(1, 1, 1, 3), F(2, 4, 4)},
                                        {"yavg0", SHAPE(1, 1, 1, 3), F(1.5f, 3, 4)},
                                        {"yavg1", SHAPE(1, 1, 1, 3), F(1, 3, 2)}));
}
END_TEST

START_TEST(pool_3d)
{
    /* two channels of 2x2x2: 1..8 and 10..80; one 2x2x2 window each: max 8, 80; mean 4.5, 45 */
    input("x", SHAPE(1, 2, 2, 2, 2));
    layer("maxpool", set_ints(attrs(), "kernel_shape", SHAPE(2, 2, 2)), "ymax", NAMES("x"));
    layer("avgpool", set_ints(attrs(), "kernel_shape", SHAPE(2, 2, 2)), "yavg", NAMES("x"));
    run_expect(INS(F(1, 2, 3, 4, 5, 6, 7, 8, 10, 20, 30, 40, 50, 60, 70, 80)),
               OUTS({"ymax", SHAPE(1, 2, 1, 1, 1), F(8, 80)}, {"yavg", SHAPE(1, 2, 1, 1, 1), F(4.5f, 45)}));
}
END_TEST

START_TEST(pool_3d_stride)
{
    /* 1x1x2x2x4: kernel 1x2x2 stride 1x2x2 -> 2x1x2; x[d][h][w] = 8d+4h+w+1
     * windows over (h 0..1, w {0,1} or {2,3}): max = x[d][1][2j+1], mean = x[d][0][2j] + 2.5 */
    input("x", SHAPE(1, 1, 2, 2, 4));
    layer("maxpool", pool_attrs(SHAPE(1, 2, 2), SHAPE(1, 2, 2), 0, NULL, 0), "ymax", NAMES("x"));
    layer("avgpool", pool_attrs(SHAPE(1, 2, 2), SHAPE(1, 2, 2), 0, NULL, 0), "yavg", NAMES("x"));
    run_expect(INS(seq), OUTS({"ymax", SHAPE(1, 1, 2, 1, 2), F(6, 8, 14, 16)},
                              {"yavg", SHAPE(1, 1, 2, 1, 2), F(3.5f, 5.5f, 11.5f, 13.5f)}));
}
END_TEST

START_TEST(global_avgpool_2d_3d)
{
    input("x", SHAPE(1, 2, 2, 2));
    input("z", SHAPE(2, 1, 2, 1, 2));
    layer("global_avgpool", NULL, "y", NAMES("x"));
    layer("global_avgpool", NULL, "w", NAMES("z"));
    run_expect(INS(F(1, 2, 3, 4, 10, 20, 30, 40), F(1, 2, 3, 6, -1, -1, -1, 3)),
               OUTS({"y", SHAPE(1, 2, 1, 1), F(2.5f, 25)}, {"w", SHAPE(2, 1, 1, 1, 1), F(3, 0)}));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ref_conv");
    test_add_tcase(s, "conv", ref_setup, mb_close, 0,
                   TEST_LIST(conv2d_basic, conv2d_stride_pad_bias, conv2d_asymmetric_pads, conv2d_dilation,
                             conv2d_groups, conv2d_depthwise, conv2d_depthwise_multiplier, conv1d, conv1d_channels_bias,
                             conv3d, conv3d_stride_pad));
    test_add_tcase(s, "pool", ref_setup, mb_close, 0,
                   TEST_LIST(maxpool_basic, maxpool_padding_never_wins, maxpool_ceil_mode, maxpool_dilation,
                             avgpool_ceil_mode, avgpool_padding_count_include_pad, pool_ceil_mode_with_pads, pool_3d,
                             pool_3d_stride, global_avgpool_2d_3d));
    return test_run_suite(s);
}
