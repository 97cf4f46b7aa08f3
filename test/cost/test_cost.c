/*
 * test_cost.c - the latency model (lib/cost): layer facts and the model's arithmetic on synthetic
 * profiles, computed by hand; the profile file (round trip, checksum, version, another host, missing
 * -> defaults with a note); the fit on synthetic measurements; the planner's knapsack against an
 * exhaustive search, pdc_trainer_plan's calibration-set losses against magnitude's, and pdc_model_plan /
 * pdc_model_predict / pdc_program_run_timed on bad input.
 * No test times anything.
 */
#include <unistd.h>

#include "ir/ir.h"
#include "lib/core/crc32.h"
#include "lib/cost/plan.h"

#include "test/common/builders.h"


/* A profile whose every constant is distinct and easy to compute with. */
static void synthetic_profile(cost_profile *p)
{
    cost_profile_defaults(p);
    for (int f = 0; f < COST_N_FAMILIES; f++)
        p->f[f] = (cost_coef){0.001 * (f + 1), 0.01 * (f + 1), 0.002 * (f + 1), 0.003 * (f + 1), 0.5, 0.02 * (f + 1), 0.25};
    p->llc_bytes = 1 << 20;
    p->threads = 2;
    p->calibrated = 1;
}

static double hand_ms(const cost_profile *p, cost_family f, double flops, double wb, double ab, int threads)
{
    const cost_coef *c = &p->f[f];
    double t1 = c->c0_ms + 1e-6 * (c->flop_ns * flops + c->wbyte_ns * wb + c->abyte_ns * ab);
    return t1 * ((1 - c->parallel) + c->parallel / threads);
}

START_TEST(facts_and_arithmetic_by_hand)
{
    pdc_model *m = small_conv_fc_model();
    cost_layer f[5];
    memset(f, 0, sizeof f);
    ck_assert_ok(ctx, cost_model_facts(m, f));
    /* c1: dense 3x3, 2 x 256 outputs x 2304 weights; weights and bias; input and output */
    ck_assert_int_eq(f[0].family, COST_CONV_DENSE);
    ck_assert_double_eq(f[0].flops, 2.0 * 256 * 2304);
    ck_assert_double_eq(f[0].wbytes, 4.0 * (2304 + 16));
    ck_assert_double_eq(f[0].abytes, 4.0 * (4096 + 4096));
    ck_assert_int_eq(f[0].fused, 0);
    ck_assert_int_eq(f[1].fused, 1); /* the relu runs in c1's epilogue */
    /* c2: strided but dense; its own relu counts one op per output */
    ck_assert_int_eq(f[2].family, COST_CONV_DENSE);
    ck_assert_double_eq(f[2].flops, 2.0 * 64 * 4608 + 2048);
    ck_assert_double_eq(f[2].wbytes, 4.0 * (4608 + 32));
    ck_assert_double_eq(f[2].abytes, 4.0 * (4096 + 2048));
    ck_assert_int_eq(f[3].family, COST_SHAPE);
    ck_assert_double_eq(f[3].abytes, 4.0 * (2048 + 2048));
    ck_assert_int_eq(f[4].family, COST_FC_DENSE);
    ck_assert_double_eq(f[4].flops, 2.0 * 20480);
    ck_assert_double_eq(f[4].wbytes, 4.0 * 20490);
    double total_w = 4.0 * (2320 + 4640 + 20490);
    for (int i = 0; i < 5; i++) ck_assert_double_eq(f[i].model_wbytes, total_w);

    cost_profile p;
    synthetic_profile(&p);
    double want[5] = {hand_ms(&p, COST_CONV_DENSE, 2.0 * 256 * 2304, 4.0 * 2320, 4.0 * 8192, 1), 0,
                      hand_ms(&p, COST_CONV_DENSE, 2.0 * 64 * 4608 + 2048, 4.0 * 4640, 4.0 * 6144, 1),
                      hand_ms(&p, COST_SHAPE, 0, 0, 4.0 * 4096, 1),
                      hand_ms(&p, COST_FC_DENSE, 2.0 * 20480, 4.0 * 20490, 4.0 * 2058, 1)};
    double total = 0, per[5], sum = 0;
    ck_assert_ok(ctx, cost_predict_model(ctx, m, &p, 1, &total, per));
    for (int i = 0; i < 5; i++) {
        ck_assert_double_eq_tol(per[i], want[i], 1e-12);
        sum += want[i];
    }
    ck_assert_double_eq_tol(total, sum, 1e-12);
    /* c1 by hand: 0.003 + 1e-6 (0.03 x 1179648 + 0.006 x 9280 + 0.009 x 32768) = 0.0387363 ms */
    ck_assert_double_eq_tol(per[0], 0.003 + 1e-6 * (0.03 * 1179648 + 0.006 * 9280 + 0.009 * 32768), 1e-12);
    /* 2 threads with p = 0.5: three quarters of the 1-thread time, layer by layer */
    double total2 = 0, per2[5];
    ck_assert_ok(ctx, cost_predict_model(ctx, m, &p, 2, &total2, per2));
    for (int i = 0; i < 5; i++) ck_assert_double_eq_tol(per2[i], 0.75 * per[i], 1e-12);
    /* an fc whose weights (or the model's) do not fit in the last-level cache pays dram_ns per weight byte */
    cost_layer big = f[4];
    big.model_wbytes = 0.3 * (1 << 20); /* with the others' weights, more than a quarter of the cache */
    ck_assert_int_eq(cost_layer_dram(&p, &f[4]), 0);
    ck_assert_int_eq(cost_layer_dram(&p, &big), 1);
    cost_layer alone = big;
    alone.model_wbytes = alone.wbytes = 0.9 * (1 << 20); /* alone, what fits stays */
    ck_assert_int_eq(cost_layer_dram(&p, &alone), 0);
    alone.model_wbytes = alone.wbytes = 1.1 * (1 << 20);
    ck_assert_int_eq(cost_layer_dram(&p, &alone), 1);
    const cost_coef *c = &p.f[COST_FC_DENSE];
    ck_assert_double_eq_tol(cost_layer_ms(&p, &big, 1),
                            c->c0_ms + 1e-6 * (c->flop_ns * big.flops + c->dram_ns * big.wbytes + c->abyte_ns * big.abytes),
                            1e-12);
    /* on 2 threads the stream from memory scales by its own share (0.25), the rest by p (0.5) */
    const double rest = c->c0_ms + 1e-6 * (c->flop_ns * big.flops + c->abyte_ns * big.abytes), dram = 1e-6 * c->dram_ns * big.wbytes;
    ck_assert_double_eq_tol(cost_layer_ms(&p, &big, 2), rest * 0.75 + dram * 0.875, 1e-12);
    cost_layer rnn = big; /* an rnn's gate matrices stay in cache between steps when they alone fit */
    rnn.family = COST_RNN;
    ck_assert_int_eq(cost_layer_dram(&p, &rnn), 0);
    rnn.wbytes = 1.1 * (1 << 20);
    ck_assert_int_eq(cost_layer_dram(&p, &rnn), 1);
    big.family = COST_CONV_DENSE; /* convs reuse their weights: never */
    ck_assert_int_eq(cost_layer_dram(&p, &big), 0);
    /* pruning c2 with patterns changes its family and FLOPs */
    pdc_attrs *o = opt_f("connectivity", 0.5f);
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-pattern,prune-connectivity", o));
    pdc_attrs_destroy(o);
    ck_assert_ok(ctx, cost_model_facts(m, f));
    ck_assert_int_eq(f[2].family, COST_CONV_SPARSE_S);
    ck_assert_double_eq(f[2].flops, 2.0 * 64 * (256 * 4) + 2048); /* 256 of 512 kernels kept, 4 taps each */
    pdc_model_destroy(m);
}
END_TEST

/* The families of the kernels added since the model was first fitted: BCR fc / 1x1 conv / lstm
 * (bcr_fc.c, conv_bcr.c, rnn.c through bcr.c), the direct 3x3 depthwise kernel (conv_dw.c, AVX-512
 * hosts), and grouped convs it does not take; then the model's arithmetic on them by hand. */
START_TEST(new_kernel_families)
{
    pdc_model *m = new_model("families");
    add_input(m, "x", 4, (const int64_t[]){1, 16, 8, 8});
    add_random(m, "w1", 4, (const int64_t[]){32, 16, 1, 1}, 1, -0.5f, 0.5f);
    add_random(m, "w2", 4, (const int64_t[]){32, 1, 3, 3}, 2, -0.5f, 0.5f);
    add_random(m, "w3", 4, (const int64_t[]){32, 1, 5, 5}, 3, -0.5f, 0.5f);
    add_random(m, "w4", 4, (const int64_t[]){32, 4, 3, 3}, 4, -0.5f, 0.5f);
    add_random(m, "w5", 2, (const int64_t[]){16, 2048}, 5, -0.5f, 0.5f);
    add_layer(m, "c1", "conv", "x,w1", "y1", NULL);
    pdc_attrs *a = pads(1);
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", 32));
    add_layer(m, "dw3", "conv", "y1,w2", "y2", a);
    a = pads(2);
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", 32));
    add_layer(m, "dw5", "conv", "y2,w3", "y3", a);
    a = pads(1);
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", 8));
    add_layer(m, "g8", "conv", "y3,w4", "y4", a);
    add_layer(m, "flat", "flatten", "y4", "f", NULL);
    add_layer(m, "fc", "fc", "f,w5", "out", NULL);
    add_output(m, "out");
    cost_layer f[6];
    memset(f, 0, sizeof f);
    ck_assert_ok(ctx, cost_model_facts(m, f));
    const cost_family dw3 = __builtin_cpu_supports("avx512f") ? COST_CONV_DW3 : COST_CONV_DW;
    const cost_family dense[6] = {COST_CONV_1X1, dw3, COST_CONV_DW, COST_CONV_DW, COST_SHAPE, COST_FC_DENSE};
    for (int i = 0; i < 6; i++) ck_assert_str_eq(cost_family_name(f[i].family), cost_family_name(dense[i]));
    /* prune-bcr (8x8 blocks, half the columns) on the 1x1 conv (block_convs, include_stem) and the fc */
    pdc_attrs *o = opt_i("block_convs", 1);
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1));
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-bcr", o));
    pdc_attrs_destroy(o);
    ck_assert_ok(ctx, cost_model_facts(m, f));
    ck_assert_str_eq(cost_family_name(f[0].family), "conv_bcr");
    ck_assert_str_eq(cost_family_name(f[5].family), "fc_bcr");
    ck_assert_double_eq(f[0].wbytes, 4.0 * 32 * 8);     /* 8 of 16 columns of every 8x8 block */
    ck_assert_double_eq(f[5].wbytes, 4.0 * 16 * 1024);  /* 1024 of 2048 */
    cost_profile p;
    synthetic_profile(&p);
    double per[6], total = 0;
    ck_assert_ok(ctx, cost_predict_model(ctx, m, &p, 2, &total, per));
    /* conv_bcr: c0 + FLOPs + activation bytes (64 outputs x 32 filters x 8 kept inputs); fc_bcr streams
     * its 64 KiB from cache: c0 + FLOPs + weight and activation bytes; both at 3/4 of 1 thread on 2 (p = 0.5) */
    ck_assert_double_eq_tol(per[0], hand_ms(&p, COST_CONV_BCR, 2.0 * 64 * 256, 4.0 * 256, 4.0 * (1024 + 2048), 2), 1e-12);
    ck_assert_double_eq_tol(per[5], hand_ms(&p, COST_FC_BCR, 2.0 * 16 * 1024, 4.0 * 16 * 1024, 4.0 * (2048 + 16), 2), 1e-12);
    pdc_model_destroy(m);

    /* an LSTM with BCR gate matrices */
    m = new_model("lstm");
    add_input(m, "x", 3, (const int64_t[]){4, 1, 16});
    add_random(m, "w", 3, (const int64_t[]){1, 128, 16}, 1, -0.2f, 0.2f);
    add_random(m, "r", 3, (const int64_t[]){1, 128, 32}, 2, -0.2f, 0.2f);
    add_layer(m, "l", "lstm", "x,w,r", "y", opt_i("hidden_size", 32));
    add_output(m, "y");
    ck_assert_ok(ctx, cost_model_facts(m, f));
    ck_assert_str_eq(cost_family_name(f[0].family), "rnn");
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-bcr", NULL));
    ck_assert_ok(ctx, cost_model_facts(m, f));
    ck_assert_str_eq(cost_family_name(f[0].family), "rnn_bcr");
    pdc_model_destroy(m);

    /* Winograd takes dense 3x3 stride-1 convs from 14x14 planes, 32 input channels and 8-filter multiples
     * (conv_wino.c) on AVX-512; the others stay direct */
    m = new_model("wino");
    add_input(m, "x", 4, (const int64_t[]){1, 32, 14, 14});
    add_random(m, "wa", 4, (const int64_t[]){32, 32, 3, 3}, 6, -0.5f, 0.5f);
    add_random(m, "wb", 4, (const int64_t[]){36, 32, 3, 3}, 7, -0.5f, 0.5f);
    add_random(m, "wc", 4, (const int64_t[]){16, 36, 3, 3}, 8, -0.5f, 0.5f);
    add_random(m, "wd", 4, (const int64_t[]){16, 16, 3, 3}, 9, -0.5f, 0.5f);
    add_layer(m, "wa", "conv", "x,wa", "ya", pads(1));    /* 32 -> 32 at 14x14: Winograd */
    add_layer(m, "wb", "conv", "ya,wb", "yb", pads(1));   /* 36 filters: not a multiple of 8 */
    add_layer(m, "wc", "conv", "yb,wc", "yc", NULL);      /* 12x12 output planes */
    add_layer(m, "wd", "conv", "yc,wd", "yd", pads(1));   /* 16 input channels */
    add_output(m, "yd");
    ck_assert_ok(ctx, cost_model_facts(m, f));
    ck_assert_str_eq(cost_family_name(f[0].family), __builtin_cpu_supports("avx512f") ? "conv_wino" : "conv_dense");
    for (int i = 1; i < 4; i++) ck_assert_str_eq(cost_family_name(f[i].family), "conv_dense");
    /* the same choice as the cpu target's */
    pdc_program *prog;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &prog));
    for (size_t i = 0; i < 4; i++) {
        const char *info = NULL;
        ck_assert_ok(ctx, pdc_program_layer_kernel(prog, i, NULL, &info));
        ck_assert_msg(!strstr(info, "Winograd") == (f[i].family != COST_CONV_WINO), "layer %zu: '%s'", i, info);
    }
    pdc_program_destroy(prog);
    setenv("PDC_CONV_WINO", "0", 1); /* forced off: direct everywhere */
    ck_assert_ok(ctx, cost_model_facts(m, f));
    ck_assert_str_eq(cost_family_name(f[0].family), "conv_dense");
    setenv("PDC_CONV_WINO", "1", 1); /* forced on: the size rules go, the 8-filter rule stays */
    ck_assert_ok(ctx, cost_model_facts(m, f));
    const char *on = __builtin_cpu_supports("avx512f") ? "conv_wino" : "conv_dense";
    ck_assert_str_eq(cost_family_name(f[0].family), on);
    ck_assert_str_eq(cost_family_name(f[1].family), "conv_dense");
    ck_assert_str_eq(cost_family_name(f[2].family), on);
    ck_assert_str_eq(cost_family_name(f[3].family), on);
    unsetenv("PDC_CONV_WINO");
    pdc_model_destroy(m);
}
END_TEST

/* x [1,4,2,6,6] -> c1 3x3x3 pad 1 (8 out, bias) -> c2 3x3x3 pad 1 stride 1x2x2 (8 out; KGS-pruned below)
 * -> c3 3x1x1 pad 1x0x0 -> c4 3x3x3 pad 1, 2 groups -> p 3-D max pool 2x2x2 */
static pdc_model *model3d(void)
{
    pdc_model *m = new_model("clip");
    add_input(m, "x", 5, (const int64_t[]){1, 4, 2, 6, 6});
    add_random(m, "w1", 5, (const int64_t[]){8, 4, 3, 3, 3}, 11, -0.5f, 0.5f);
    add_random(m, "b1", 1, (const int64_t[]){8}, 12, -0.1f, 0.1f);
    add_random(m, "w2", 5, (const int64_t[]){8, 8, 3, 3, 3}, 13, -0.5f, 0.5f);
    add_random(m, "w3", 5, (const int64_t[]){8, 8, 3, 1, 1}, 14, -0.5f, 0.5f);
    add_random(m, "w4", 5, (const int64_t[]){8, 4, 3, 3, 3}, 15, -0.5f, 0.5f);
    const int64_t p1[6] = {1, 1, 1, 1, 1, 1};
    add_layer(m, "c1", "conv", "x,w1,b1", "y1", opt_ints("pads", 6, p1));
    pdc_attrs *a = opt_ints("pads", 6, p1);
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 3, (const int64_t[]){1, 2, 2}));
    add_layer(m, "c2", "conv", "y1,w2", "y2", a);
    add_layer(m, "c3", "conv", "y2,w3", "y3", opt_ints("pads", 6, (const int64_t[]){1, 0, 0, 1, 0, 0}));
    a = opt_ints("pads", 6, p1);
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "group", 2));
    add_layer(m, "c4", "conv", "y3,w4", "y4", a);
    add_layer(m, "p", "maxpool", "y4", "y5", opt_ints("kernel_shape", 3, (const int64_t[]){2, 2, 2}));
    add_output(m, "y5");
    return m;
}

/* 3-D convs as the cpu target runs them (backends/cpu/conv3d.c): the 2-D family of the per-plane
 * weight, one call (c0) per output depth plane, the FLOPs and bytes of the depth taps inside the
 * input (a clip 2 deep: plane 0 runs taps 1-2, plane 1 taps 0-1; the image transposed once, each
 * plane copied out), by hand; a deep clip runs every tap. */
START_TEST(conv3d_facts_by_hand)
{
    pdc_model *m = model3d();
    /* c2, c3, c4 keep 14 of 27 (2 of 3) positions a group; c1 is the stem */
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-kgs", NULL));
    cost_layer f[5];
    memset(f, 0, sizeof f);
    ck_assert_ok(ctx, cost_model_facts(m, f));
    ck_assert_int_eq(f[0].family, COST_CONV_DENSE);
    ck_assert_int_eq(f[1].family, COST_CONV_SPARSE_S);
    ck_assert_int_eq(f[2].family, COST_CONV_1X1);
    ck_assert_int_eq(f[3].family, COST_CONV_DW);
    ck_assert_int_eq(f[4].family, COST_POOL);
    /* c1: 2 planes x 2 of 3 depth slices x 8x4x9 weights, 36 outputs a plane */
    ck_assert_double_eq(f[0].runs, 2);
    ck_assert_double_eq(f[0].flops, 2.0 * 36 * (2 * 2 * 288));
    ck_assert_double_eq(f[0].wbytes, 4.0 * (864 + 8));
    /* planes read (2 x 4 channels x 2 taps x 36), written (2 x 8 x 36) and copied out, image transposed (4 x 2 x 36) */
    ck_assert_double_eq(f[0].abytes, 4.0 * (2 * 4 * 2 * 36 + 2 * 2 * 8 * 36 + 4 * 2 * 36));
    /* c2, KGS: the kept weights of its depth slices, counted element by element; 9 outputs a plane */
    const ir_model *im = m;
    const ir_tensor *w2 = &im->tensors[ir_model_find_tensor(im, "w2")];
    ck_assert_int_ne(w2->sparsity.kind, IR_SPARSITY_NONE);
    double at[3] = {0, 0, 0};
    for (size_t i = 0; i < 8 * 8 * 27; i++) at[i % 27 / 9] += ir_sparsity_keeps(w2, i);
    ck_assert_double_eq(f[1].runs, 2);
    ck_assert_double_eq(f[1].flops, 2.0 * 9 * (at[1] + at[2] + at[0] + at[1]));
    ck_assert_double_lt(f[1].flops, 2.0 * 9 * 2 * (8 * 8 * 27)); /* below dense over every tap */
    /* c3: 3x1x1 over depth 2 -> 2 planes of the 1x1 family, 2 of 3 taps each, dense (the masks of a
     * 1x1 plane window are not carried: its zeros are computed) */
    ck_assert_int_ne(im->tensors[ir_model_find_tensor(im, "w3")].sparsity.kind, IR_SPARSITY_NONE);
    ck_assert_double_eq(f[2].flops, 2.0 * 9 * (2 * 2 * 64));
    cost_profile p;
    synthetic_profile(&p);
    double per[5], total;
    ck_assert_ok(ctx, cost_predict_model(ctx, m, &p, 1, &total, per));
    const cost_coef *c = &p.f[COST_CONV_DENSE];
    ck_assert_double_eq_tol(per[0], 2 * c->c0_ms + 1e-6 * (c->flop_ns * f[0].flops + c->wbyte_ns * f[0].wbytes +
                                                          c->abyte_ns * f[0].abytes), 1e-12);
    /* against the 2-D conv of one plane: the same family, per-call cost and per-FLOP rate */
    cost_layer one = f[0];
    one.runs = 1;
    ck_assert_double_eq_tol(cost_layer_ms(&p, &f[0], 1) - cost_layer_ms(&p, &one, 1), c->c0_ms, 1e-12);
    pdc_model_destroy(m);

    /* a clip 17 deep wastes 2 of 51 taps at its edges (< 1/16): every plane runs the whole window,
     * as ir_layer_stats counts it */
    m = new_model("deep");
    add_input(m, "x", 5, (const int64_t[]){1, 4, 17, 5, 5});
    add_random(m, "w", 5, (const int64_t[]){4, 4, 3, 3, 3}, 21, -0.5f, 0.5f);
    add_layer(m, "c", "conv", "x,w", "y", opt_ints("pads", 6, (const int64_t[]){1, 1, 1, 1, 1, 1}));
    add_output(m, "y");
    ck_assert_ok(ctx, cost_model_facts(m, f));
    int64_t eff = 0;
    ck_assert_ok(ctx, pdc_model_layer_stat(m, 0, PDC_STAT_EFFECTIVE_FLOPS, &eff));
    ck_assert_double_eq(f[0].flops, (double)eff);
    ck_assert_double_eq(f[0].flops, 2.0 * 17 * 25 * 432);
    ck_assert_double_eq(f[0].runs, 17);
    pdc_model_destroy(m);
}
END_TEST

static void use_tmp_cache(void) { ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", tmpdir)); }

static char note_text[1024];
static int note_count;
static void on_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)layer;
    if (kind != PDC_NOTE_PREDICT_DEFAULTS) return;
    ck_assert_str_eq(pass, "predict");
    snprintf(note_text, sizeof note_text, "%s", text);
    note_count++;
}

START_TEST(profile_round_trip_and_refusals)
{
    cost_profile p, q;
    synthetic_profile(&p);
    snprintf(p.key, sizeof p.key, "Some CPU; znver9; avx512; LLVM 19.1.7");
    char *text;
    size_t len;
    ck_assert_ok(ctx, cost_profile_format(ctx, &p, &text, &len));
    ck_assert_ok(ctx, cost_profile_parse(ctx, text, len, p.key, &q));
    ck_assert_str_eq(q.key, p.key);
    ck_assert_int_eq(q.threads, 2);
    ck_assert_double_eq(q.llc_bytes, 1 << 20);
    for (int f = 0; f < COST_N_FAMILIES; f++) {
        ck_assert_double_eq_tol(q.f[f].flop_ns, p.f[f].flop_ns, 1e-15);
        ck_assert_double_eq_tol(q.f[f].parallel, p.f[f].parallel, 1e-12);
        ck_assert_double_eq_tol(q.f[f].dram_ns, p.f[f].dram_ns, 1e-15);
        ck_assert_double_eq_tol(q.f[f].dram_parallel, p.f[f].dram_parallel, 1e-12);
    }
    /* another host */
    ck_assert_status(ctx, cost_profile_parse(ctx, text, len, "Other CPU; x; avx2; LLVM 19.1.7", &q), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "made on another host ('Some CPU; znver9; avx512; LLVM 19.1.7')");
    /* one changed digit: the checksum */
    char *bad = strdup(text);
    char *d = strstr(bad, "family conv_dense ") + strlen("family conv_dense ");
    *d = *d == '9' ? '8' : '9';
    ck_assert_status(ctx, cost_profile_parse(ctx, bad, len, NULL, &q), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "checksum mismatch");
    /* truncated */
    ck_assert_status(ctx, cost_profile_parse(ctx, text, len / 2, NULL, &q), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "no crc32 line");
    ck_assert_status(ctx, cost_profile_parse(ctx, "hello", 5, NULL, &q), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "not a pdc latency profile");
    free(bad);
    pdc_free(text);
    /* another version, with a valid checksum */
    cost_profile_defaults(&p);
    ck_assert_ok(ctx, cost_profile_format(ctx, &p, &text, &len));
    for (char v = '2'; v <= '4'; v += 2) { /* version 2 (before conv_wino), 4 */
        char *other = strdup(text), want[64];
        other[strlen("pdc-latency-profile ")] = v;
        char *crc = strstr(other, "crc32 ");
        snprintf(crc, 16, "crc32 %08x\n", pdc_crc32(0, other, (size_t)(crc - other)));
        ck_assert_status(ctx, cost_profile_parse(ctx, other, strlen(other), NULL, &q), PDC_ERR_UNSUPPORTED);
        snprintf(want, sizeof want, "format version %c, this pdc reads version 3", v);
        ck_assert_error_has(ctx, want);
        free(other);
    }
    pdc_free(text);
}
END_TEST

START_TEST(predict_uses_profile_or_says_defaults)
{
    use_tmp_cache();
    pdc_context_set_note_handler(ctx, on_note, NULL);
    pdc_model *m = small_conv_fc_model();
    pdc_attrs *one = opt_i("threads", 1);
    double dflt = 0, per[5];
    /* no profile: defaults, and a note that says where calibrate writes one */
    note_count = 0;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", one, &dflt, per));
    ck_assert_int_eq(note_count, 1);
    ck_assert_ptr_nonnull(strstr(note_text, "no latency profile for this host"));
    ck_assert_ptr_nonnull(strstr(note_text, tmpdir));
    cost_profile d;
    cost_profile_defaults(&d);
    double want = 0;
    ck_assert_ok(ctx, cost_predict_model(ctx, m, &d, 1, &want, NULL));
    ck_assert_double_eq_tol(dflt, want, 1e-12);
    /* this host's profile in cache_dir is used, with no note */
    cost_profile p;
    synthetic_profile(&p);
    char path[PDC_PATH_MAX + 64];
    ck_assert_ok(ctx, cost_host_key(ctx, p.key, sizeof p.key));
    cost_profile_path(ctx, p.key, path, sizeof path);
    ck_assert_ok(ctx, cost_profile_save(ctx, &p, path));
    note_count = 0;
    double got = 0;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, NULL, one, &got, per));
    ck_assert_int_eq(note_count, 0);
    ck_assert_ok(ctx, cost_predict_model(ctx, m, &p, 1, &want, NULL));
    ck_assert_double_eq_tol(got, want, 1e-12);
    /* a profile from another CPU, given as a file: refused, defaults used, the note says so */
    snprintf(p.key, sizeof p.key, "Another CPU; zen1; avx2; LLVM 19.1.7");
    ck_assert_ok(ctx, cost_profile_save(ctx, &p, tmp_path("other.txt")));
    pdc_attrs *o = opt_s("profile", tmp_path("other.txt"));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "threads", 1));
    note_count = 0;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", o, &got, per));
    ck_assert_int_eq(note_count, 1);
    ck_assert_ptr_nonnull(strstr(note_text, "made on another host ('Another CPU; zen1; avx2; LLVM 19.1.7')"));
    ck_assert_ptr_nonnull(strstr(note_text, "default constants"));
    ck_assert_double_eq_tol(got, dflt, 1e-12);
    pdc_attrs_destroy(o);
    /* a damaged profile in cache_dir: refused the same way */
    write_file(path, "pdc-latency-profile 1\nkey x\n", 28);
    note_count = 0;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", one, &got, per));
    ck_assert_ptr_nonnull(strstr(note_text, "no crc32 line"));
    ck_assert_double_eq_tol(got, dflt, 1e-12);
    /* missing file given explicitly */
    o = opt_s("profile", tmp_path("absent.txt"));
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", o, &got, NULL));
    ck_assert_ptr_nonnull(strstr(note_text, "absent.txt"));
    pdc_attrs_destroy(o);
    pdc_attrs_destroy(one);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(predict_bad_input)
{
    pdc_model *m = small_conv_fc_model();
    double t = 7;
    ck_assert_status(ctx, pdc_model_predict(ctx, m, "ref", NULL, &t, NULL), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "target 'ref' has no latency model");
    ck_assert_status(ctx, pdc_model_predict(ctx, m, "tpu", NULL, &t, NULL), PDC_ERR_UNKNOWN_TARGET);
    pdc_attrs *o = opt_i("fast", 1);
    ck_assert_status(ctx, pdc_model_predict(ctx, m, "cpu", o, &t, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown option 'fast'");
    pdc_attrs_destroy(o);
    o = opt_i("threads", -2);
    ck_assert_status(ctx, pdc_model_predict(ctx, m, "cpu", o, &t, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option threads: -2 is outside 0..4096");
    pdc_attrs_destroy(o);
    ck_assert_status(ctx, pdc_model_predict(ctx, m, "cpu", NULL, NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_double_eq(t, 7); /* failed calls change nothing */
    pdc_model_destroy(m);
    /* a symbolic batch */
    m = new_model("sym");
    add_input(m, "x", 2, (const int64_t[]){-1, 4});
    add_layer(m, "r", "relu", "x", "y", NULL);
    add_output(m, "y");
    ck_assert_status(ctx, pdc_model_predict(ctx, m, "cpu", NULL, &t, NULL), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "layer 'r': output shape unknown");
    pdc_model_destroy(m);
}
END_TEST

/* samples generated from known constants: the fit gives them back, twice the same */
START_TEST(fit_recovers_constants)
{
    /* fc families: fixed cost, FLOPs and weight bytes (activation bytes not fitted) */
    cost_coef truth = {0.01, 0.02, 0.004, 0.0, 0.8, 0.05, 0.4};
    cost_sample s[8];
    for (int i = 0; i < 8; i++) {
        /* half of them beyond the 1 MiB cache */
        double wb = i % 2 ? 1e5 * (i + 1) : 2e6 * (i + 1);
        s[i].l = (cost_layer){COST_FC_DENSE, 0, 1e6 * (i + 1) * (i % 3 + 1), wb, 2e5 * (i % 2 + 1), wb, 1};
        s[i].t1_ms = truth.c0_ms + 1e-6 * (truth.flop_ns * s[i].l.flops + (i % 2 ? truth.wbyte_ns : truth.dram_ns) * wb);
        /* those streaming from memory scale by dram_parallel (0.4), the others by p (0.8) */
        const double share = i % 2 ? truth.parallel : truth.dram_parallel;
        s[i].tn_ms = s[i].t1_ms * ((1 - share) + share / 2);
    }
    /* a sample of another family does not count */
    cost_sample all[9];
    memcpy(all, s, sizeof s);
    all[8] = (cost_sample){{COST_POOL, 0, 1, 1, 1, 1, 1}, 1000, 1000};
    cost_coef c = {0}, c2 = {0};
    cost_fit_family(all, 9, COST_FC_DENSE, 2, 1 << 20, &c);
    ck_assert_double_eq_tol(c.c0_ms, truth.c0_ms, 1e-9);
    ck_assert_double_eq_tol(c.flop_ns, truth.flop_ns, 1e-9);
    ck_assert_double_eq_tol(c.wbyte_ns, truth.wbyte_ns, 1e-9);
    ck_assert_double_eq_tol(c.dram_ns, truth.dram_ns, 1e-9);
    ck_assert_double_eq(c.abyte_ns, 0);
    ck_assert_double_eq_tol(c.parallel, truth.parallel, 1e-9);
    ck_assert_double_eq_tol(c.dram_parallel, truth.dram_parallel, 1e-9);
    cost_fit_family(all, 9, COST_FC_DENSE, 2, 1 << 20, &c2);
    ck_assert_mem_eq(&c, &c2, sizeof c);
    /* conv families: fixed cost, FLOPs and activation bytes */
    cost_coef tc = {0.02, 0.01, 0.0, 0.003, 0.9, 0.0, 0.0};
    for (int i = 0; i < 8; i++) {
        s[i].l.family = COST_CONV_DENSE;
        s[i].t1_ms = tc.c0_ms + 1e-6 * (tc.flop_ns * s[i].l.flops + tc.abyte_ns * s[i].l.abytes);
        s[i].tn_ms = s[i].t1_ms * ((1 - tc.parallel) + tc.parallel / 4);
    }
    c.dram_parallel = 0.123;
    cost_fit_family(s, 8, COST_CONV_DENSE, 4, 1 << 20, &c);
    ck_assert_double_eq_tol(c.c0_ms, tc.c0_ms, 1e-9);
    ck_assert_double_eq_tol(c.flop_ns, tc.flop_ns, 1e-9);
    ck_assert_double_eq(c.wbyte_ns, 0);
    ck_assert_double_eq_tol(c.abyte_ns, tc.abyte_ns, 1e-9);
    ck_assert_double_eq_tol(c.parallel, tc.parallel, 1e-9);
    ck_assert_double_eq(c.dram_parallel, 0.123); /* none from memory: as it was */
    /* pattern convs: fixed cost, FLOPs and weight bytes (the per-kept-kernel cost), no activation term */
    cost_coef tp = {0.01, 0.012, 0.1, 0.0, 0.95, 0.0, 0.0};
    for (int i = 0; i < 8; i++) {
        s[i].l.family = i % 2 ? COST_CONV_SPARSE : COST_CONV_SPARSE_S;
        s[i].t1_ms = tp.c0_ms + 1e-6 * (tp.flop_ns * s[i].l.flops + tp.wbyte_ns * s[i].l.wbytes) + 1e-9 * s[i].l.abytes;
        s[i].tn_ms = 0;
    }
    for (int f = COST_CONV_SPARSE; f <= COST_CONV_SPARSE_S; f++) {
        cost_coef cp = {0};
        cost_fit_family(s, 8, (cost_family)f, 1, 1 << 20, &cp);
        ck_assert_double_eq(cp.abyte_ns, 0);
        ck_assert_double_eq_tol(cp.wbyte_ns, tp.wbyte_ns, 0.002); /* the activation bytes' share goes elsewhere */
        ck_assert_double_eq_tol(cp.flop_ns, tp.flop_ns, 0.002);
    }
    /* no samples: the constants stay */
    cost_coef keep = {1, 2, 3, 4, 0.5, 6, 0.25}, k2 = keep;
    cost_fit_family(all, 9, COST_RNN, 2, 1 << 20, &k2);
    ck_assert_mem_eq(&keep, &k2, sizeof keep);
    /* a term that would come out negative is dropped, the rest stays >= 0 */
    for (int i = 0; i < 8; i++) s[i].t1_ms = 0.5 - 1e-9 * s[i].l.flops * 0.01;
    cost_fit_family(s, 8, COST_CONV_SPARSE, 1, 1 << 20, &c);
    ck_assert(c.c0_ms >= 0 && c.flop_ns >= 0 && c.wbyte_ns >= 0 && c.abyte_ns >= 0);
    ck_assert_double_eq(c.flop_ns, 0);
}
END_TEST

/* The knapsack against every combination, on instances whose times are whole steps of the budget. */
START_TEST(planner_matches_exhaustive_search)
{
    uint32_t seed = 12345;
    for (int inst = 0; inst < 40; inst++) {
        size_t n = 2 + (size_t)(inst % 4), nc[5];
        double tv[5][4], lv[5][4];
        const double *tm[5], *ls[5];
        double budget = 10.0, step = budget / 40; /* 100 of the solver's steps */
        for (size_t l = 0; l < n; l++) {
            nc[l] = 2 + (l + (size_t)inst) % 3;
            for (size_t c = 0; c < nc[l]; c++) {
                seed = seed * 1664525u + 1013904223u;
                tv[l][c] = step * (double)(1 + (seed >> 8) % 12);
                seed = seed * 1664525u + 1013904223u;
                lv[l][c] = c == 0 ? 0 : (double)((seed >> 8) % 1000) / 1000.0;
            }
            tm[l] = tv[l];
            ls[l] = lv[l];
        }
        size_t choice[5];
        int feasible;
        ck_assert_ok(ctx, cost_plan_solve(ctx, n, nc, tm, ls, budget, choice, &feasible));
        /* exhaustive */
        double best = INFINITY;
        size_t idx[5] = {0};
        for (;;) {
            double t = 0, lo = 0;
            for (size_t l = 0; l < n; l++) t += tv[l][idx[l]], lo += lv[l][idx[l]];
            if (t <= budget + 1e-9 && lo < best) best = lo;
            size_t l = 0;
            while (l < n && ++idx[l] == nc[l]) idx[l++] = 0;
            if (l == n) break;
        }
        if (isinf(best)) {
            ck_assert_int_eq(feasible, 0);
            continue;
        }
        ck_assert_int_eq(feasible, 1);
        double t = 0, lo = 0;
        for (size_t l = 0; l < n; l++) t += tv[l][choice[l]], lo += lv[l][choice[l]];
        ck_assert_msg(t <= budget + 1e-9, "instance %d: plan takes %g > %g", inst, t, budget);
        ck_assert_msg(fabs(lo - best) < 1e-12, "instance %d: plan loses %g, the best %g", inst, lo, best);
    }
    /* infeasible: each layer's fastest choice */
    double t0[2] = {5, 3}, t1[2] = {6, 4}, l0[2] = {0, 1}, l1[2] = {0, 1};
    const double *tm[2] = {t0, t1}, *ls[2] = {l0, l1};
    size_t nc[2] = {2, 2}, choice[2] = {9, 9};
    int feasible = 1;
    ck_assert_ok(ctx, cost_plan_solve(ctx, 2, nc, tm, ls, 6.5, choice, &feasible));
    ck_assert_int_eq(feasible, 0);
    ck_assert_uint_eq(choice[0], 1);
    ck_assert_uint_eq(choice[1], 1);
}
END_TEST

START_TEST(plan_meets_budget_and_rejects_bad_ones)
{
    use_tmp_cache(); /* the defaults: deterministic */
    pdc_model *m = small_conv_fc_model();
    pdc_attrs *one = opt_i("threads", 1);
    double dense = 0, pred = 0;
    char *plan = NULL;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", one, &dense, NULL));
    /* bad budgets */
    ck_assert_status(ctx, pdc_model_plan(ctx, m, "cpu", 0, one, &plan, &pred), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "the latency budget must be a positive number of ms, got 0");
    ck_assert_status(ctx, pdc_model_plan(ctx, m, "cpu", -3, one, &plan, &pred), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "got -3");
    ck_assert_status(ctx, pdc_model_plan(ctx, m, "cpu", NAN, one, &plan, &pred), PDC_ERR_INVALID_ARG);
    ck_assert_ptr_null(plan);
    /* a budget the dense model meets: nothing to prune */
    ck_assert_ok(ctx, pdc_model_plan(ctx, m, "cpu", dense * 1.01, one, &plan, &pred));
    ck_assert_str_eq(plan, "");
    ck_assert_double_eq_tol(pred, dense, 1e-12);
    pdc_string_free(plan);
    /* infeasible: the fastest plan, its time above the budget */
    double fastest = 0;
    ck_assert_ok(ctx, pdc_model_plan(ctx, m, "cpu", dense * 0.01, one, &plan, &fastest));
    ck_assert_double_gt(fastest, dense * 0.01);
    ck_assert_double_lt(fastest, dense);
    ck_assert_ptr_nonnull(strstr(plan, "c2=0.875"));
    ck_assert_ptr_nonnull(strstr(plan, "fc=0.9375"));
    pdc_string_free(plan);
    /* halfway between: c2 (not the stem c1) and fc are the candidates; the plan meets it by prediction */
    double budget = 0.5 * (fastest + dense);
    ck_assert_ok(ctx, pdc_model_plan(ctx, m, "cpu", budget, one, &plan, &pred));
    ck_assert_double_le(pred, budget);
    ck_assert_ptr_null(strstr(plan, "c1"));
    ck_assert_ptr_nonnull(strstr(plan, "layers="));
    /* the plan is pdc_model_transform's pipeline with its options; applied, it gives that prediction */
    ck_assert_ok(ctx, pdc_model_transform(m, plan, NULL));
    double after = 0;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", one, &after, NULL));
    ck_assert_double_eq_tol(after, pred, 1e-9 * pred);
    pdc_string_free(plan);
    pdc_attrs_destroy(one);
    pdc_model_destroy(m);
}
END_TEST

/* Two fc layers whose magnitudes and usefulness disagree, [N,256] -> fc_a + fc_b -> logits [N,16]:
 * only features 0..15 are non-zero in the data, and the labels are the argmax of fc_b's weights on them.
 * fc_b: those weights small (0.3 scale), 64 huge blocks (100) and the rest 2.0 on the features that are
 * always 0; fc_a: 0 on features 0..15, 1.0 elsewhere. By magnitude pruning fc_b is nearly free (its huge
 * blocks survive); on the data it destroys the signal, while fc_a contributes nothing. */
static pdc_model *disagreeing_model(float **x, float **y, size_t n)
{
    enum { C = 16, F = 256, S = 16 };
    pdc_model *m = new_model("disagree");
    add_input(m, "x", 2, (const int64_t[]){1, F});
    float *wa = calloc(C * F, sizeof *wa), *wb = calloc(C * F, sizeof *wb), sig[C * S];
    ck_assert(wa && wb);
    test_fill_random(sig, C * S, 11);
    for (size_t r = 0; r < C; r++)
        for (size_t c = 0; c < F; c++) {
            wa[r * F + c] = c < S ? 0.0f : 1.0f;
            wb[r * F + c] = c < S ? 0.3f * sig[r * S + c] : c < S + 16 ? 100.0f : 2.0f;
        }
    add_values(m, "wa", 2, (const int64_t[]){C, F}, wa);
    add_values(m, "wb", 2, (const int64_t[]){C, F}, wb);
    add_layer(m, "fc_a", "fc", "x,wa", "ya", NULL);
    add_layer(m, "fc_b", "fc", "x,wb", "yb", NULL);
    add_layer(m, "sum", "add", "ya,yb", "logits", NULL);
    add_output(m, "logits");
    *x = calloc(n * F, sizeof **x);
    *y = calloc(n, sizeof **y);
    ck_assert(*x && *y);
    for (size_t i = 0; i < n; i++) {
        test_fill_random(*x + i * F, S, 100 + (uint32_t)i);
        size_t best = 0;
        double bv = -1e30;
        for (size_t r = 0; r < C; r++) {
            double v = 0;
            for (size_t c = 0; c < S; c++) v += (double)sig[r * S + c] * (*x)[i * F + c];
            if (v > bv) bv = v, best = r;
        }
        (*y)[i] = (float)best;
    }
    free(wa);
    free(wb);
    return m;
}

START_TEST(trainer_plan_measures_on_calibration_set)
{
    use_tmp_cache();
    const size_t n = 64;
    float *xv, *yv;
    pdc_model *m = disagreeing_model(&xv, &yv, n);
    pdc_attrs *one = opt_i("threads", 1);
    double dense = 0, ms[3], pred = 0;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", one, &dense, ms));
    double budget = dense - 0.3 * ms[0]; /* one of the two must be pruned */
    char *plan = NULL;
    ck_assert_ok(ctx, pdc_model_plan(ctx, m, "cpu", budget, one, &plan, &pred));
    ck_assert_msg(strstr(plan, "fc_b=") && !strstr(plan, "fc_a="), "by magnitude: %s", plan);
    pdc_string_free(plan);

    pdc_trainer *tr;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &tr));
    pdc_tensor *x, *y;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (const int64_t[]){(int64_t)n, 256}, xv, &x));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, (const int64_t[]){(int64_t)n}, yv, &y));
    float loss0, acc0, loss1, acc1;
    ck_assert_ok(ctx, pdc_trainer_evaluate(tr, x, y, &loss0, &acc0));
    ck_assert_float_eq(acc0, 1.0f); /* the labels are what fc_b computes */
    ck_assert_ok(ctx, pdc_trainer_plan(tr, "cpu", budget, one, x, y, &plan, &pred));
    ck_assert_msg(strstr(plan, "fc_a=") && !strstr(plan, "fc_b="), "on the calibration set: %s", plan);
    ck_assert_double_le(pred, budget);
    /* the trial prunings left the trainer's weights as they were */
    ck_assert_ok(ctx, pdc_trainer_evaluate(tr, x, y, &loss1, &acc1));
    ck_assert_float_eq(loss0, loss1);
    /* the plan applies as pdc_trainer_prune's pipeline; the accuracy stays */
    ck_assert_ok(ctx, pdc_trainer_prune(tr, plan, NULL));
    ck_assert_ok(ctx, pdc_trainer_evaluate(tr, x, y, NULL, &acc1));
    ck_assert_float_eq(acc1, 1.0f);
    pdc_string_free(plan);
    /* bad input: NULL set, labels of another length */
    plan = NULL;
    ck_assert_status(ctx, pdc_trainer_plan(tr, "cpu", budget, one, NULL, y, &plan, &pred), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "inputs is NULL");
    pdc_tensor *short_y;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, (const int64_t[]){(int64_t)n - 1}, yv, &short_y));
    ck_assert_status(ctx, pdc_trainer_plan(tr, "cpu", budget, one, x, short_y, &plan, &pred), PDC_ERR_SHAPE);
    ck_assert_ptr_null(plan);
    ck_assert_status(ctx, pdc_trainer_plan(NULL, "cpu", budget, one, x, y, &plan, &pred), PDC_ERR_INVALID_ARG);
    pdc_tensor_destroy(short_y);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_trainer_destroy(tr);
    pdc_attrs_destroy(one);
    pdc_model_destroy(m);
    free(xv);
    free(yv);
}
END_TEST

START_TEST(run_timed_per_layer)
{
    pdc_model *m = small_conv_fc_model();
    pdc_program *ref = NULL, *cpu = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "ref", &ref));
    pdc_tensor *x, *y;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 4, (const int64_t[]){1, 16, 16, 16}, &x));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 2, (const int64_t[]){1, 10}, &y));
    double ms[5] = {-1, -1, -1, -1, -1};
    ck_assert_status(ctx, pdc_program_run_timed(ref, 1, &x, 1, &y, ms), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "need the 'cpu' target, this program is 'ref'");
    ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &cpu));
    ck_assert_status(ctx, pdc_program_run_timed(cpu, 1, &x, 1, &y, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_program_run_timed(cpu, 1, &x, 0, NULL, ms), PDC_ERR_INVALID_ARG);
    ck_assert_ok(ctx, pdc_program_run_timed(cpu, 1, &x, 1, &y, ms));
    for (int i = 0; i < 5; i++) ck_assert(ms[i] >= 0);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_program_destroy(ref);
    pdc_program_destroy(cpu);
    pdc_model_destroy(m);
}
END_TEST

static char chosen[1024];
static void on_choice(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)layer;
    if (kind != PDC_NOTE_TARGET_CHOSEN) return;
    ck_assert_str_eq(pass, "compile");
    snprintf(chosen, sizeof chosen, "%s", text);
}

START_TEST(auto_target_chooses_cpu_and_says_why)
{
    use_tmp_cache();
    pdc_model *m = small_conv_fc_model();
    pdc_program *p = NULL;
    pdc_context_set_note_handler(ctx, on_choice, NULL);
    chosen[0] = 0;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "auto", &p));
    ck_assert_str_eq(pdc_program_target(p), "cpu");
    ck_assert_msg(!strncmp(chosen, "chose cpu: predicted ", 21), "note: %s", chosen);
    ck_assert_ptr_nonnull(strstr(chosen, "(default constants)"));
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    return run_tests("cost", tmpdir_setup, tmpdir_teardown, 120,
                     TEST_LIST(facts_and_arithmetic_by_hand, new_kernel_families, conv3d_facts_by_hand, profile_round_trip_and_refusals,
                               predict_uses_profile_or_says_defaults, predict_bad_input, fit_recovers_constants,
                               planner_matches_exhaustive_search, plan_meets_budget_and_rejects_bad_ones,
                               run_timed_per_layer, auto_target_chooses_cpu_and_says_why,
                               trainer_plan_measures_on_calibration_set));
}
