/*
 * test_gpu_cost.c - the gpu target's analytic latency model (lib/cost/gpu_cost.c) and target "auto"
 * weighing cpu against gpu (lib/compile_auto.c), on the emulated device (PDC_GPU_EMULATE=1) whose
 * attributes PDC_GPU_EMULATE_PROPS states: the roofline computed by hand, the kernel kinds and launch
 * counts, the choice and its note both ways, a bad attribute string, no driver at all. No test times
 * anything.
 */
#include <stdlib.h>

#include "backends/gpu/gpu_props.h"
#include "ir/ir.h"
#include "lib/cost/gpu_cost.h"

#include "test/common/builders.h"


/* A heavier one: x [1,64,56,56] -> 3x3 conv 64 -> 3x3 conv 64 (ResNet-18's first stage) */
static pdc_model *stage_model(void)
{
    pdc_model *m = new_model("stage");
    add_input(m, "x", 4, (const int64_t[]){1, 64, 56, 56});
    add_random(m, "w1", 4, (const int64_t[]){64, 64, 3, 3}, 1, -0.1f, 0.1f);
    add_random(m, "w2", 4, (const int64_t[]){64, 64, 3, 3}, 2, -0.1f, 0.1f);
    add_layer(m, "c1", "conv", "x,w1", "y1", pads(1));
    add_layer(m, "c2", "conv", "y1,w2", "y2", pads(1));
    add_output(m, "y2");
    return m;
}

static void emulate(const char *props)
{
    setenv("PDC_GPU_EMULATE", "1", 1);
    if (props) setenv("PDC_GPU_EMULATE_PROPS", props, 1);
    else unsetenv("PDC_GPU_EMULATE_PROPS");
}

static void no_emulation(void)
{
    unsetenv("PDC_GPU_EMULATE");
    unsetenv("PDC_GPU_EMULATE_PROPS");
}

/* launches x 5 us + the larger of FLOPs at the kind's share of peak and bytes at its share of the bandwidth, ms */
static double roof_ms(double launches, cost_gpu_kind k, double flops, double bytes, double peak, double bw)
{
    double c = flops / (peak * cost_gpu_coefs[k].flop_eff), b = bytes / (bw * cost_gpu_coefs[k].byte_eff);
    return launches * 5e-3 + 1e3 * (c > b ? c : b);
}

START_TEST(roofline_by_hand)
{
    /* 10 SMs of sm_86 (128 FP32 lanes) at 1 GHz: 2.56 TFLOP/s; 1 GHz x 256 bits, twice a cycle: 64 GB/s */
    emulate("sms=10,clock_mhz=1000,mem_clock_mhz=1000,bus_bits=256,sm=86");
    gpu_props g;
    ck_assert_ok(ctx, gpu_props_query(ctx, &g));
    ck_assert_int_eq(g.emulated, 1);
    ck_assert_int_eq(gpu_props_fp32_lanes(&g), 128);
    const double peak = 2.56e12, bw = 64e9;
    ck_assert_double_eq_tol(gpu_props_peak_flops(&g), peak, 1);
    ck_assert_double_eq_tol(gpu_props_bandwidth(&g), bw, 1);

    pdc_model *m = small_conv_fc_model();
    double launches = 0;
    const cost_gpu_kind kinds[5] = {COST_GPU_CONV_TILED, COST_GPU_MEMORY, COST_GPU_CONV_DIRECT, COST_GPU_MEMORY,
                                    COST_GPU_GEMV};
    for (size_t i = 0; i < 5; i++) {
        ck_assert_int_eq(cost_gpu_kind_of(m, i, &launches), kinds[i]);
        ck_assert_double_eq(launches, 1);
    }
    /* c1: 256 outputs of 16 x 3x3 taps (compute-bound here); r1: reads and writes 4096 floats; c2: 64
     * outputs, so a thread per output; flatten: 2048 in, 2048 out; fc: a batch-1 row per thread,
     * bound by its 20490 weights */
    const double want[5] = {roof_ms(1, kinds[0], 2.0 * 256 * 2304, 4.0 * (2320 + 8192), peak, bw),
                            roof_ms(1, kinds[1], 4096, 4.0 * 8192, peak, bw),
                            roof_ms(1, kinds[2], 2.0 * 64 * 4608 + 2048, 4.0 * (4640 + 6144), peak, bw),
                            roof_ms(1, kinds[3], 0, 4.0 * 4096, peak, bw),
                            roof_ms(1, kinds[4], 2.0 * 20480, 4.0 * (20490 + 2058), peak, bw)};
    /* c1 on the compute roof: 1179648 / (2.56e12 x 0.35) s + 5 us */
    ck_assert_double_eq_tol(want[0], 5e-3 + 1e3 * 1179648 / (2.56e12 * 0.35), 1e-12);
    /* fc on the memory roof: 90192 B / (64e9 x 0.3) + 5 us */
    ck_assert_double_eq_tol(want[4], 5e-3 + 1e3 * 90192 / (64e9 * 0.3), 1e-12);
    double per[5], total = 0, copies = 0, sum = 0;
    ck_assert_ok(ctx, cost_gpu_predict_model(m, &g, &total, per, &copies));
    for (int i = 0; i < 5; i++) {
        ck_assert_double_eq_tol(per[i], want[i], 1e-9);
        sum += per[i];
    }
    /* 20 us a run and the input (4096 floats) and output (10) over 12 GB/s */
    ck_assert_double_eq_tol(copies, 20e-3 + 1e3 * 4.0 * 4106 / 12e9, 1e-12);
    ck_assert_double_eq_tol(total, sum + copies, 1e-12);
    /* the same through the public API, target "gpu" */
    double api_total = 0, api_per[5];
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "gpu", NULL, &api_total, api_per));
    ck_assert_double_eq_tol(api_total, total, 1e-12);
    for (int i = 0; i < 5; i++) ck_assert_double_eq_tol(api_per[i], per[i], 1e-12);
    /* sm_80 has 64 lanes: half the compute roof */
    emulate("sms=10,clock_mhz=1000,mem_clock_mhz=1000,bus_bits=256,sm=80");
    ck_assert_ok(ctx, gpu_props_query(ctx, &g));
    ck_assert_double_eq_tol(gpu_props_peak_flops(&g), peak / 2, 1);
    pdc_model_destroy(m);
    no_emulation();
}
END_TEST

START_TEST(rnn_launches_per_step)
{
    emulate(NULL);
    /* LSTM over 7 steps, both directions: an init launch, then gates and cell per step and direction;
     * a GRU adds the reset-gated kernel: 3 a step */
    for (int gru = 0; gru < 2; gru++) {
        pdc_model *m = new_model("rnn");
        const int64_t G = gru ? 3 : 4;
        add_input(m, "x", 3, (const int64_t[]){7, 1, 8});
        add_random(m, "w", 3, (const int64_t[]){2, G * 16, 8}, 1, -0.2f, 0.2f);
        add_random(m, "r", 3, (const int64_t[]){2, G * 16, 16}, 2, -0.2f, 0.2f);
        pdc_attrs *a = opt_i("hidden_size", 16);
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "direction", "bidirectional"));
        add_layer(m, "rnn", gru ? "gru" : "lstm", "x,w,r", "y", a);
        add_output(m, "y");
        double launches = 0;
        ck_assert_int_eq(cost_gpu_kind_of(m, 0, &launches), COST_GPU_RNN);
        ck_assert_double_eq(launches, 1 + 7 * 2 * (gru ? 3 : 2));
        pdc_model_destroy(m);
    }
    no_emulation();
}
END_TEST

static char chosen[2048];
static void on_choice(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)pass;
    (void)layer;
    if (kind == PDC_NOTE_TARGET_CHOSEN) snprintf(chosen, sizeof chosen, "%s", text);
}

/* Compiles m with "auto" and checks the target against the two predictions. */
static void check_auto(pdc_model *m, const char *want_target)
{
    double cpu_ms = 0, gpu_ms = 0;
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "cpu", NULL, &cpu_ms, NULL));
    ck_assert_ok(ctx, pdc_model_predict(ctx, m, "gpu", NULL, &gpu_ms, NULL));
    ck_assert_msg(!strcmp(want_target, "gpu") ? gpu_ms < cpu_ms : cpu_ms <= gpu_ms, "cpu %g ms, gpu %g ms", cpu_ms,
                  gpu_ms);
    pdc_program *p = NULL;
    chosen[0] = 0;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "auto", &p));
    ck_assert_str_eq(pdc_program_target(p), want_target);
    char head[64], cpu_txt[64], gpu_txt[64];
    snprintf(head, sizeof head, "chose %s: predicted ", want_target);
    snprintf(cpu_txt, sizeof cpu_txt, "predicted %.3f ms on ", cpu_ms);
    snprintf(gpu_txt, sizeof gpu_txt, "predicted %.3f ms on 'emulated device", gpu_ms);
    ck_assert_msg(!strncmp(chosen, head, strlen(head)), "note: %s", chosen);
    ck_assert_msg(strstr(chosen, cpu_txt) && strstr(chosen, gpu_txt), "note: %s", chosen);
    ck_assert_msg(strstr(chosen, "unvalidated on real hardware"), "note: %s", chosen);
    pdc_program_destroy(p);
}

START_TEST(auto_weighs_cpu_against_gpu)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", tmpdir)); /* no profile: default constants */
    pdc_context_set_note_handler(ctx, on_choice, NULL);
    pdc_model *m = stage_model();
    /* an A100-like device: 231 MFLOP a conv runs in tens of microseconds there, milliseconds here */
    emulate(NULL);
    check_auto(m, "gpu");
    ck_assert_ptr_nonnull(strstr(chosen, "108 SMs sm_80 at 1410 MHz"));
    /* a device of 1 SM at 100 MHz (12.8 GFLOP/s) loses to the cpu */
    emulate("sms=1,clock_mhz=100,mem_clock_mhz=100,bus_bits=64");
    check_auto(m, "cpu");
    pdc_model_destroy(m);
    no_emulation();
}
END_TEST

START_TEST(auto_without_device_or_with_bad_attributes)
{
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "cache_dir", tmpdir));
    pdc_context_set_note_handler(ctx, on_choice, NULL);
    pdc_model *m = small_conv_fc_model();
    pdc_program *p = NULL;
    /* a bad attribute string is an error naming the key, for auto and for predict */
    emulate("sms=4,warp_mhz=3");
    ck_assert_int_eq(pdc_compile(ctx, m, "auto", &p), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "PDC_GPU_EMULATE_PROPS: unknown key 'warp_mhz'");
    ck_assert_ptr_null(p);
    double total = 0;
    emulate("sms=0");
    ck_assert_int_eq(pdc_model_predict(ctx, m, "gpu", NULL, &total, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "expected key=positive number at \"sms=0\"");
    /* no driver: cpu, and the note says why gpu was not weighed; predict for gpu says there is none */
    no_emulation();
    setenv("PDC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    chosen[0] = 0;
    ck_assert_ok(ctx, pdc_compile(ctx, m, "auto", &p));
    ck_assert_str_eq(pdc_program_target(p), "cpu");
    ck_assert_msg(strstr(chosen, "chose cpu: predicted ") == chosen, "note: %s", chosen);
    ck_assert_msg(strstr(chosen, "gpu not weighed (gpu: cannot load the CUDA driver library '/nonexistent/libcuda.so.1'"),
                  "note: %s", chosen);
    pdc_program_destroy(p);
    ck_assert_int_eq(pdc_model_predict(ctx, m, "gpu", NULL, &total, NULL), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "cannot load the CUDA driver library");
    /* calibrate and plan have no gpu model */
    char *path = NULL;
    ck_assert_int_eq(pdc_calibrate(ctx, "gpu", NULL, &path), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "target 'gpu' has no calibrated latency model");
    unsetenv("PDC_CUDA_LIBRARY");
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    return run_tests("gpu_cost", tmpdir_setup, tmpdir_teardown, 120,
                     TEST_LIST(roofline_by_hand, rnn_launches_per_step, auto_weighs_cpu_against_gpu,
                               auto_without_device_or_with_bad_attributes));
}
