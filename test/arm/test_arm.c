/*
 * test_arm.c - the "aarch64-linux-gnu" emitter, run for real: every model is emitted into a fresh
 * temporary directory, test/arm/driver.c is linked against the emitted libNAME.a with
 * aarch64-linux-gnu-gcc and run under qemu-aarch64 on pseudo-random inputs, and every output must
 * match the "ref" target on the host: max |arm - ref| <= 1e-4 x max |ref|.
 *
 * Models: the ONNX test models (dense, pattern-pruned with BN kept or folded, reordered, planned,
 * block-pruned), hand-built models covering every op and conv variant (strides, dilation, groups,
 * asymmetric pads, 1-D, fused activations, out_perm), the arrays-of-pointers ABI of multi-input /
 * multi-output models, two models linked into one program, the NEON code of a pruned conv
 * (objdump: fmla on .4s registers), and the failures (unknown cpu / target, unwritable directory,
 * an op the emitter cannot emit) leaving no files behind. Without the cross tools the qemu part is
 * skipped with a message (emission is still checked); CI installs them. PDC_TEST_QUICK=1 (valgrind)
 * emits only the small models.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <ftw.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "test/common/testutil.h"
#include "test/common/model_builder.h"

#define TARGET "aarch64-linux-gnu"
#define QEMU "qemu-aarch64 -L /usr/aarch64-linux-gnu"

static char tmp[256];     /* this test's directory */
static int have_cross = -1;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

/* Under valgrind (PDC_TEST_QUICK=1 in make test-valgrind) LLVM's O3 is ~500x slower: only the small
 * models are emitted there. */
static int quick(void) { return getenv("PDC_TEST_QUICK") != NULL || RUNNING_ON_VALGRIND; }

static int cross_tools(void)
{
    if (have_cross < 0) {
        have_cross = system("command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1 "
                            "&& test -d /usr/aarch64-linux-gnu") == 0;
        if (!have_cross)
            fprintf(stderr, "test_arm: aarch64-linux-gnu-gcc or qemu-aarch64 not found: emitted code is not run "
                            "(install gcc-aarch64-linux-gnu and qemu-user)\n");
    }
    return have_cross;
}

static void setup(void)
{
    mb_open("arm_test");
    ck_assert_ptr_nonnull(test_make_temp_dir(tmp, sizeof tmp, "arm"));
}

static void teardown(void)
{
    mb_close();
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ------------------------------------------------------------------ builder helpers */

/* constant_pruned's masks: a fixed LCG from the constant's seed. */
static uint32_t draw_lcg(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

/* kind 1 bh x bw blocks, 2 unstructured; keep_pct of the blocks (elements) kept. */
static void constant_pruned(const char *name, size_t rank, const int64_t *dims, int kind, int64_t bh, int64_t bw,
                            int keep_pct, uint32_t seed)
{
    constant_pruned_by(name, rank, dims, kind, bh, bw, keep_pct, seed, draw_lcg);
}

/* A 2-D conv's attributes: strides, dilations, pads, groups and a fused activation (NULL: none). */
static pdc_attrs *conv_attrs(int64_t sy, int64_t sx, int64_t dy, int64_t dx, const int64_t pads[4], int64_t group,
                             const char *act)
{
    pdc_attrs *a = set_ints(set_ints(attrs(), "strides", DIMS(sy, sx)), "dilations", DIMS(dy, dx));
    set_int(set_ints(a, "pads", 4, pads), "group", group);
    return act ? set_string(a, "activation", act) : a;
}

static void load_onnx(const char *name)
{
    char file[64];
    snprintf(file, sizeof file, "onnx/%s.onnx", name);
    pdc_model_destroy(mdl);
    mdl = NULL;
    ck_assert_ok(ctx, pdc_model_load(ctx, test_data_path(file), &mdl));
}

/* The test models' convs read the graph input (stems) and some are 5x5: opt them in, so the emitted
 * code under test is the pruned one. */
static void transform(const char *pipeline)
{
    if (!pipeline || !*pipeline) return;
    pdc_attrs *opt = set_string(set_int(attrs(), "include_stem", 1), "pattern_kernels", "all");
    ck_assert_ok(ctx, pdc_model_transform(mdl, pipeline, opt));
    pdc_attrs_destroy(opt);
}

/* ------------------------------------------------------------------ emit, build, run, compare */

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(p, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static float *read_floats(const char *path, size_t n)
{
    float *p = calloc(n + 1, sizeof *p);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no output file %s", path);
    ck_assert_uint_eq(fread(p, sizeof *p, n, f), n);
    fclose(f);
    return p;
}

static void emit_as(const char *name, const char *cpu, const char *dir)
{
    pdc_attrs *o = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "name", name));
    if (cpu) ck_assert_ok(ctx, pdc_attrs_set_string(o, "cpu", cpu));
    ck_assert_ok(ctx, pdc_model_emit(ctx, mdl, TARGET, o, dir));
    pdc_attrs_destroy(o);
    char path[512];
    snprintf(path, sizeof path, "%s/%s.h", dir, name);
    ck_assert_msg(access(path, R_OK) == 0, "%s missing", path);
    snprintf(path, sizeof path, "%s/lib%s.a", dir, name);
    ck_assert_msg(access(path, R_OK) == 0, "%s missing", path);
}

static int sh(const char *cmd) { return system(cmd); }

/* Writes the C source text to tmp/name; its path in path. */
static void tmp_source(char *path, size_t cap, const char *name, const char *text)
{
    snprintf(path, cap, "%s/%s", tmp, name);
    write_file(path, text, strlen(text));
}

/* Links the driver against dir/libNAME.a into dir/run_NAME. */
static void build_driver(const char *name, const char *dir)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "aarch64-linux-gnu-gcc -O2 -Wall -Werror -I %s -DPDC_MODEL=%s '-DPDC_HEADER=\"%s.h\"' test/arm/driver.c "
             "%s/lib%s.a -lm -o %s/run_%s",
             dir, name, name, dir, name, dir, name);
    ck_assert_msg(sh(cmd) == 0, "cross link failed: %s", cmd);
}

/* Emits mdl as `name`, runs it under qemu and compares every output with the ref target. */
static void check_arm_matches_ref(const char *name, const char *cpu, const char *what, uint32_t seed)
{
    emit_as(name, cpu, tmp);
    if (!cross_tools()) return;
    pdc_program *pr = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    size_t n_in, n_out;
    pdc_tensor **tin, **tout;
    program_tensors(pr, seed, &n_in, &tin, &n_out, &tout);
    char cmd[4096];
    int at = snprintf(cmd, sizeof cmd, QEMU " %s/run_%s", tmp, name);
    for (size_t i = 0; i < n_in; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/in%zu.bin", tmp, i);
        write_file(path, pdc_tensor_data(tin[i]), pdc_tensor_size(tin[i]) * sizeof(float));
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, " %s", path);
    }
    at += snprintf(cmd + at, sizeof cmd - (size_t)at, " --");
    for (size_t i = 0; i < n_out; i++)
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, " %s/out%zu.bin:%zu", tmp, i, pdc_tensor_size(tout[i]));
    snprintf(cmd + at, sizeof cmd - (size_t)at, " 2>/dev/null");
    ck_assert_ok(ctx, pdc_program_run(pr, n_in, tin, n_out, tout));
    build_driver(name, tmp);
    ck_assert_msg(sh(cmd) == 0, "%s: qemu run failed: %s", what, cmd);
    for (size_t i = 0; i < n_out; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/out%zu.bin", tmp, i);
        size_t n = pdc_tensor_size(tout[i]);
        float *got = read_floats(path, n);
        char msg[256];
        snprintf(msg, sizeof msg, "%s, output %zu", what, i);
        test_assert_close(got, pdc_tensor_data(tout[i]), n, 1e-4f, "arm", msg);
        free(got);
    }
    free_tensors(tin, n_in);
    free_tensors(tout, n_out);
    pdc_program_destroy(pr);
}

/* 'N', '+', '-' or 'f' per element. */
static void classify(const float *v, size_t n, char *c)
{
    for (size_t i = 0; i < n; i++) c[i] = v[i] != v[i] ? 'N' : v[i] > 3.4e38f ? '+' : v[i] < -3.4e38f ? '-' : 'f';
    c[n] = 0;
}

/* Emits mdl (one input, one output) as `name`, runs it under qemu on input x and checks that each
 * output element is NaN, +Inf, -Inf or finite exactly where the ref target's is
 * (docs/reliability.md, "Non-finite values"). */
static void check_arm_classifies_like_ref(const char *name, const char *what, const float *x, size_t n)
{
    emit_as(name, NULL, tmp);
    if (!cross_tools()) return;
    pdc_program *pr = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    size_t n_in, n_out;
    pdc_tensor **tin, **tout;
    program_tensors(pr, 1, &n_in, &tin, &n_out, &tout);
    ck_assert_uint_eq(n_in, 1);
    ck_assert_uint_eq(n_out, 1);
    ck_assert_uint_eq(pdc_tensor_size(tin[0]), n);
    memcpy(pdc_tensor_data(tin[0]), x, n * sizeof *x);
    ck_assert_ok(ctx, pdc_program_run(pr, n_in, tin, n_out, tout));
    char path[512], cmd[2048];
    snprintf(path, sizeof path, "%s/nf_in.bin", tmp);
    write_file(path, x, n * sizeof *x);
    size_t no = pdc_tensor_size(tout[0]);
    build_driver(name, tmp);
    snprintf(cmd, sizeof cmd, QEMU " %s/run_%s %s -- %s/nf_out.bin:%zu 2>/dev/null", tmp, name, path, tmp, no);
    ck_assert_msg(sh(cmd) == 0, "%s: qemu run failed: %s", what, cmd);
    snprintf(path, sizeof path, "%s/nf_out.bin", tmp);
    float *got = read_floats(path, no);
    char *ca = malloc(no + 1), *cr = malloc(no + 1);
    classify(got, no, ca);
    classify(pdc_tensor_data(tout[0]), no, cr);
    ck_assert_msg(!strcmp(ca, cr), "%s: arm classifies\n%s\nref\n%s", what, ca, cr);
    free(ca);
    free(cr);
    free(got);
    free_tensors(tin, n_in);
    free_tensors(tout, n_out);
    pdc_program_destroy(pr);
}

START_TEST(nonfinite_inputs_classified_like_ref)
{
    /* all-NaN and single-Inf images through the pruned ResNet (BN folded, reordered, planned) and
     * the pattern CNN: relu and max pool keep NaN, pruned weights are never multiplied */
    static const char *const models[] = {"resnet_small", "pattern_cnn"};
    for (int k = 0; k < 2; k++) {
        char file[64];
        snprintf(file, sizeof file, "onnx/%s.onnx", models[k]);
        if (access(test_data_path(file), R_OK) != 0) continue;
        load_onnx(models[k]);
        transform("canonicalize,prune-pattern,prune-connectivity,reorder,plan");
        pdc_program *pr = NULL;
        ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
        size_t n_in, n_out;
        pdc_tensor **tin, **tout;
        program_tensors(pr, 1, &n_in, &tin, &n_out, &tout);
        size_t n = pdc_tensor_size(tin[0]);
        free_tensors(tin, n_in);
        free_tensors(tout, n_out);
        pdc_program_destroy(pr);
        float *x = malloc(n * sizeof *x);
        char what[128];
        for (size_t i = 0; i < n; i++) x[i] = __builtin_nanf("");
        snprintf(what, sizeof what, "%s, all-NaN input", models[k]);
        check_arm_classifies_like_ref(models[k], what, x, n);
        test_fill_random(x, n, 7);
        x[n / 3] = __builtin_inff();
        snprintf(what, sizeof what, "%s, one +Inf pixel", models[k]);
        check_arm_classifies_like_ref(models[k], what, x, n);
        free(x);
    }
}
END_TEST

/* ------------------------------------------------------------------ the ONNX test models */

static const struct {
    const char *model, *pipeline;
} onnx_cases[] = {
    {"resnet_small", ""},                                                        /* dense, BN emitted */
    {"resnet_small", "prune-pattern,prune-connectivity"},                        /* pattern-pruned, BN kept */
    {"resnet_small", "canonicalize,prune-pattern,prune-connectivity,reorder,plan"}, /* BN folded, out_perm, plan */
    {"mobilenetv2_small", ""},
    {"mobilenetv2_small", "canonicalize,prune-pattern,prune-connectivity,reorder,plan"},
    {"lstm", ""},
    {"lstm", "prune-block"},
    {"gru", "plan"},
    {"pattern_cnn", ""},
    {"block_fc", "canonicalize,prune-block,plan"},
    {"softmax_v11", ""},
};

START_TEST(onnx_models_match_ref)
{
    char file[64];
    snprintf(file, sizeof file, "onnx/%s.onnx", onnx_cases[_i].model);
    if (access(test_data_path(file), R_OK) != 0) {
        fprintf(stderr, "test_arm: %s not found, skipped\n", test_data_path(file));
        return;
    }
    if (quick() && strcmp(onnx_cases[_i].model, "softmax_v11") && strcmp(onnx_cases[_i].model, "block_fc")) {
        fprintf(stderr, "test_arm: %s skipped in quick mode\n", onnx_cases[_i].model);
        return;
    }
    load_onnx(onnx_cases[_i].model);
    transform(onnx_cases[_i].pipeline);
    char what[160];
    snprintf(what, sizeof what, "%s [%s]", onnx_cases[_i].model, onnx_cases[_i].pipeline);
    check_arm_matches_ref(onnx_cases[_i].model, _i % 2 ? "cortex-a76" : NULL, what, 100u + (uint32_t)_i);
}
END_TEST

/* ------------------------------------------------------------------ conv variants */

/* Several convs over one input, each a separate output (so also the multi-output ABI). */
static void conv_zoo(void)
{
    input("x", DIMS(2, 6, 13, 11));
    static const int64_t p0[4] = {0, 0, 0, 0}, p1[4] = {1, 1, 1, 1}, pa[4] = {1, 0, 2, 1}, p2[4] = {2, 2, 2, 2};
    constant_rand("w1", DIMS(9, 6, 3, 3), 0.5f, 1);
    constant_rand("b1", DIMS(9), 0.5f, 2);
    pdc_attrs *a = conv_attrs(2, 2, 1, 1, pa, 1, "leaky_relu"); /* stride 2, asymmetric pads */
    layer("conv", set_float(a, "act_alpha", 0.2f), "s2", NAMES("x", "w1", "b1"));
    constant_rand("w2", DIMS(7, 6, 3, 3), 0.5f, 3);
    a = conv_attrs(1, 1, 2, 2, p2, 1, "clip"); /* dilation 2 */
    layer("conv", set_float(set_float(a, "act_min", -0.3f), "act_max", 0.4f), "dil", NAMES("x", "w2"));
    constant_rand("w3", DIMS(8, 3, 3, 3), 0.5f, 4);
    layer("conv", conv_attrs(1, 2, 1, 1, p1, 2, "sigmoid"), "grp", NAMES("x", "w3")); /* groups 2, column stride 2 */
    constant_rand("w4", DIMS(6, 1, 3, 3), 0.5f, 5);
    constant_rand("b4", DIMS(6), 0.5f, 6);
    layer("conv", conv_attrs(2, 1, 1, 1, p1, 6, "hardswish"), "dw", NAMES("x", "w4", "b4")); /* depthwise, row st. 2 */
    constant_rand("w5", DIMS(5, 6, 1, 1), 0.5f, 7);
    layer("conv", conv_attrs(1, 1, 1, 1, p0, 1, "tanh"), "pw", NAMES("x", "w5")); /* 1x1 */
    constant_rand("w6", DIMS(4, 6, 5, 5), 0.3f, 8);
    layer("conv", conv_attrs(1, 1, 1, 1, p2, 1, "relu"), "k5", NAMES("x", "w6")); /* 5x5 */
    /* 1-D conv */
    input("s", DIMS(1, 4, 23));
    constant_rand("w7", DIMS(5, 4, 3), 0.5f, 9);
    layer("conv", set_ints(set_ints(attrs(), "pads", DIMS(2, 0)), "strides", DIMS(2)), "c1d", NAMES("s", "w7"));
    const char *outs[] = {"s2", "dil", "grp", "dw", "pw", "k5", "c1d"};
    for (size_t i = 0; i < 7; i++) output(outs[i]);
}

START_TEST(conv_variants_dense)
{
    conv_zoo();
    check_arm_matches_ref("convs", NULL, "conv variants, dense", 11);
}
END_TEST

START_TEST(conv_variants_pruned_reordered)
{
    if (quick()) return; /* the dense variant covers the same code paths */
    conv_zoo();
    transform("prune-pattern,prune-connectivity,reorder,plan");
    check_arm_matches_ref("convs_p", "cortex-a55", "conv variants, pattern-pruned + reorder (out_perm) + plan", 12);
}
END_TEST

/* 3-D convs (dense: strides, dilation, uneven pads, groups, bias, activation; then KGS- and
 * connectivity-pruned) and 3-D pooling over one clip input, each a separate output. */
static void conv3d_zoo(void)
{
    input("x", DIMS(2, 4, 5, 7, 6));
    constant_rand("w1", DIMS(6, 4, 3, 3, 3), 0.5f, 21);
    constant_rand("b1", DIMS(6), 0.5f, 22);
    layer("conv", set_string(set_ints(attrs(), "pads", 6, (int64_t[]){1, 1, 1, 1, 1, 1}), "activation", "relu"),
          "c1", NAMES("x", "w1", "b1"));
    constant_rand("w2", DIMS(5, 4, 2, 3, 1), 0.5f, 23);
    pdc_attrs *a = set_ints(attrs(), "strides", 3, (int64_t[]){2, 1, 2});
    set_ints(a, "dilations", 3, (int64_t[]){1, 2, 1});
    layer("conv", set_ints(a, "pads", 6, (int64_t[]){0, 1, 0, 1, 2, 0}), "c2", NAMES("x", "w2"));
    constant_rand("w3", DIMS(4, 2, 3, 1, 3), 0.5f, 24);
    layer("conv", set_int(set_ints(attrs(), "pads", 6, (int64_t[]){1, 0, 1, 1, 0, 1}), "group", 2), "c3",
          NAMES("x", "w3"));
    layer("maxpool", set_ints(set_ints(attrs(), "kernel_shape", 3, (int64_t[]){2, 2, 2}), "strides", 3,
                              (int64_t[]){2, 2, 2}), "mp", NAMES("c1"));
    layer("avgpool", set_ints(attrs(), "kernel_shape", 3, (int64_t[]){3, 3, 3}), "ap", NAMES("c1"));
    const char *outs[] = {"c2", "c3", "mp", "ap"};
    for (size_t i = 0; i < 4; i++) output(outs[i]);
}

START_TEST(conv3d_matches_ref)
{
    conv3d_zoo();
    check_arm_matches_ref("conv3d", NULL, "3-D convs and pools, dense", 31);
    if (quick()) return;
    fresh_model("conv3d_kgs");
    conv3d_zoo();
    pdc_attrs *opt = set_string(set_int(attrs(), "include_stem", 1), "pattern_kernels", "all");
    set_string(set_string(opt, "kgs_rate", "0.6"), "kgs_group", "2x2");
    ck_assert_ok(ctx, pdc_model_transform(mdl, "prune-kgs,prune-connectivity", opt));
    pdc_attrs_destroy(opt);
    check_arm_matches_ref("conv3d_kgs", "cortex-a55", "3-D convs KGS + connectivity pruned", 32);
}
END_TEST

/* The depth split (backends/cpu/conv3d_taps.h) on ARM: a clip 1 deep runs 1 of 3 depth taps; with depth
 * pads of 3 the edge planes read no input plane (the full window over zeros: the bias) and the others
 * 1 or 2 taps, a 2-D conv per range; dense, then KGS-pruned. */
static void depth_split_zoo(void)
{
    input("x1", DIMS(1, 4, 1, 5, 5));
    constant_rand("w1", DIMS(6, 4, 3, 3, 3), 0.5f, 41);
    constant_rand("b1", DIMS(6), 0.5f, 42);
    layer("conv", set_ints(attrs(), "pads", 6, (int64_t[]){1, 1, 1, 1, 1, 1}), "c1", NAMES("x1", "w1", "b1"));
    input("x2", DIMS(1, 3, 2, 5, 4));
    constant_rand("w2", DIMS(4, 3, 2, 3, 3), 0.5f, 43);
    constant_rand("b2", DIMS(4), 0.5f, 44);
    layer("conv", set_ints(attrs(), "pads", 6, (int64_t[]){3, 1, 0, 3, 1, 1}), "c2", NAMES("x2", "w2", "b2"));
    output("c1");
    output("c2");
}

static int symbols(const char *name, const char *re);

/* c2's 7 planes run 3 ranges of taps: [0, 2) (no tap inside, and od 3), [1, 2) (od 2), [0, 1) (od 4);
 * a 2-D conv (its packed weights "cN.L1.wpk") each. Unsplit, there would be one. */
static void assert_c2_ranges(const char *name)
{
    const int n = symbols(name, " r c[0-9]+\\.L1\\.wpk$");
    if (n >= 0) ck_assert_msg(n == 3, "%s: c2 has %d 2-D convs, expected 3 (one per range of depth taps)", name, n);
}

START_TEST(conv3d_depth_split_matches_ref)
{
    depth_split_zoo();
    check_arm_matches_ref("conv3d_split", NULL, "3-D convs split by depth taps, dense", 33);
    assert_c2_ranges("conv3d_split");
    fresh_model("conv3d_split_kgs");
    depth_split_zoo();
    pdc_attrs *opt = set_string(set_int(attrs(), "include_stem", 1), "kgs_rate", "0.6");
    set_string(opt, "kgs_group", "2x2");
    ck_assert_ok(ctx, pdc_model_transform(mdl, "prune-kgs", opt));
    pdc_attrs_destroy(opt);
    check_arm_matches_ref("conv3d_split_kgs", NULL, "3-D convs split by depth taps, KGS", 34);
    assert_c2_ranges("conv3d_split_kgs");
}
END_TEST

/* ------------------------------------------------------------------ every other op */

/* Symbols of tmp/libNAME.a whose nm line matches the extended regex re, or -1 without the cross nm. */
static int symbols(const char *name, const char *re)
{
    if (system("command -v aarch64-linux-gnu-nm >/dev/null 2>&1") != 0) return -1;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-nm %s/lib%s.a | grep -c -E '%s' > %s/count.txt", tmp, name, re, tmp);
    (void)sh(cmd);
    snprintf(cmd, sizeof cmd, "%s/count.txt", tmp);
    FILE *f = fopen(cmd, "r");
    int n = -1;
    if (f && fscanf(f, "%d", &n) != 1) n = -1;
    if (f) fclose(f);
    return n;
}

START_TEST(other_ops_match_ref)
{
    /* two inputs, many outputs: the arrays-of-pointers ABI */
    input("x", DIMS(2, 5, 9, 7));
    input("v", DIMS(5, 1, 7));
    constant_rand("scale", DIMS(5), 1.0f, 1);
    constant_rand("bias", DIMS(5), 1.0f, 2);
    constant_rand("mean", DIMS(5), 0.5f, 3);
    float var[5] = {0.5f, 1.0f, 2.0f, 0.1f, 3.0f};
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, "var", 1, (const int64_t[]){5}, var));
    layer("batchnorm", NULL, "bn", NAMES("x", "scale", "bias", "mean", "var"));
    layer("clip", set_float(set_float(attrs(), "min", -0.5f), "max", 0.7f), "cl", NAMES("bn"));
    layer("relu", NULL, "re", NAMES("bn"));
    layer("leaky_relu", set_float(attrs(), "alpha", 0.3f), "lr", NAMES("bn"));
    layer("sigmoid", NULL, "sg", NAMES("bn"));
    layer("tanh", NULL, "th", NAMES("sg"));
    layer("hardswish", NULL, "hs", NAMES("bn"));
    layer("hardsigmoid", set_float(set_float(attrs(), "alpha", 0.3f), "beta", 0.4f), "hsg", NAMES("bn"));
    /* broadcasting binaries */
    layer("add", NULL, "ad", NAMES("cl", "v")); /* [2,5,9,7] + [5,1,7] */
    layer("sub", NULL, "sb", NAMES("re", "lr"));
    constant_rand("cc", DIMS(5, 1, 1), 1.0f, 4);
    layer("mul", NULL, "ml", NAMES("cc", "th"));
    layer("div", NULL, "dv", NAMES("hs", "sg"));
    layer("concat", set_int(attrs(), "axis", 1), "cat", NAMES("sb", "ml", "dv"));
    layer("transpose", set_ints(attrs(), "perm", DIMS(0, 3, 1, 2)), "tr", NAMES("cat"));
    /* pools: max with ceil_mode and pads, avg counting pads, global */
    pdc_attrs *a = set_ints(set_ints(attrs(), "kernel_shape", DIMS(3, 3)), "strides", DIMS(2, 2));
    layer("maxpool", set_int(set_ints(a, "pads", DIMS(1, 0, 1, 1)), "ceil_mode", 1), "mp", NAMES("hsg"));
    a = set_ints(set_ints(attrs(), "kernel_shape", DIMS(2, 3)), "pads", DIMS(1, 1, 0, 1));
    layer("avgpool", set_int(a, "count_include_pad", 1), "ap", NAMES("ad"));
    layer("global_avgpool", NULL, "gp", NAMES("tr"));
    layer("flatten", set_int(attrs(), "axis", 1), "fl", NAMES("mp"));
    /* fc with fused activation, gemm with transA / alpha / beta / C, softmax along a middle axis */
    constant_rand("fw", DIMS(11, 5 * 5 * 4), 0.3f, 5);
    constant_rand("fb", DIMS(11), 0.3f, 6);
    layer("fc", set_string(attrs(), "activation", "relu"), "fc", NAMES("fl", "fw", "fb"));
    layer("reshape", set_ints(attrs(), "shape", DIMS(11, 2)), "rs", NAMES("fc"));
    constant_rand("gb", DIMS(11, 6), 1.0f, 7);
    constant_rand("gc", DIMS(6), 1.0f, 8);
    a = set_float(set_float(set_int(attrs(), "transA", 1), "alpha", 0.75f), "beta", -1.5f);
    layer("gemm", a, "gm", NAMES("rs", "gb", "gc"));
    layer("softmax", set_int(attrs(), "axis", 1), "sm", NAMES("ap"));
    /* batched matmul, the right operand broadcast over the batch dims */
    constant_rand("mb", DIMS(7, 4), 1.0f, 9);
    layer("matmul", NULL, "mm", NAMES("x", "mb"));
    const char *outs[] = {"gm", "sm", "mm", "gp", "cat", "hsg"};
    for (size_t i = 0; i < 6; i++) output(outs[i]);
    check_arm_matches_ref("ops", NULL, "every other op", 21);
    /* sigmoid, tanh and softmax's exp are straight-line IR: the library needs nothing from libm,
     * nothing at all beyond libc's memcpy/memset */
    int undefined = symbols("ops", " U ");
    if (undefined >= 0) ck_assert_int_eq(undefined, symbols("ops", " U (memcpy|memset)$"));
}
END_TEST

START_TEST(rnn_cells_match_ref)
{
    /* bidirectional LSTM with initial states and all three outputs; reverse GRU with
     * linear_before_reset; batch 2 */
    const int64_t T = 5, B = 2, I = 7, H = 6;
    input("x", DIMS(T, B, I));
    input("h0", DIMS(2, B, H));
    input("c0", DIMS(2, B, H));
    constant_rand("w", DIMS(2, 4 * H, I), 0.5f, 1);
    constant_rand("r", DIMS(2, 4 * H, H), 0.5f, 2);
    constant_rand("b", DIMS(2, 8 * H), 0.5f, 3);
    rnn_layer("lstm", "lstm", H, "bidirectional", -1, NAMES("x", "w", "r", "b", "", "h0", "c0"),
              NAMES("y", "yh", "yc"));
    constant_rand("gw", DIMS(1, 3 * H, I), 0.5f, 4);
    constant_rand("gr", DIMS(1, 3 * H, H), 0.5f, 5);
    constant_rand("gb", DIMS(1, 6 * H), 0.5f, 6);
    rnn_layer("gru", "gru", H, "reverse", 1, NAMES("x", "gw", "gr", "gb"), NAMES("gy", "gyh"));
    constant_rand("hw", DIMS(1, 3 * H, I), 0.5f, 7);
    constant_rand("hr", DIMS(1, 3 * H, H), 0.5f, 8);
    rnn_layer("gru", "gru2", H, NULL, -1, NAMES("x", "hw", "hr"), NAMES("hy"));
    const char *outs[] = {"y", "yh", "yc", "gy", "gyh", "hy"};
    for (size_t i = 0; i < 6; i++) output(outs[i]);
    check_arm_matches_ref("rnn", NULL, "lstm + gru", 31);
}
END_TEST

/* ------------------------------------------------------------------ block-sparse fc, gemm, rnn */

START_TEST(sparse_fc_gemm_match_ref)
{
    /* batch 3; K = 37 and N = 22 or 13, so edge blocks in both directions and a zero-padded copy of
     * every input row; block shapes 4x4, 1x8, 3x2, 8x1, unstructured; gemm with transB, alpha, beta
     * and a broadcast C; a fused activation; one fc too dense to gain (dense loops, still right) */
    input("x", DIMS(3, 37));
    constant_pruned("w44", DIMS(22, 37), 1, 4, 4, 35, 1);
    constant_rand("b44", DIMS(22), 0.5f, 2);
    layer("fc", set_string(attrs(), "activation", "relu"), "f44", NAMES("x", "w44", "b44"));
    constant_pruned("w18", DIMS(13, 37), 1, 1, 8, 30, 3);
    layer("fc", NULL, "f18", NAMES("x", "w18"));
    constant_pruned("w32", DIMS(13, 37), 1, 3, 2, 40, 4);
    constant_rand("b32", DIMS(13), 0.5f, 5);
    layer("fc", NULL, "f32", NAMES("x", "w32", "b32"));
    constant_pruned("w81", DIMS(22, 37), 1, 8, 1, 25, 6);
    layer("fc", NULL, "f81", NAMES("x", "w81"));
    constant_pruned("wu", DIMS(22, 37), 2, 1, 1, 20, 7);
    constant_rand("bu", DIMS(22), 0.5f, 8);
    layer("fc", NULL, "fu", NAMES("x", "wu", "bu"));
    constant_pruned("gw", DIMS(13, 37), 1, 2, 4, 30, 9);
    constant_rand("gc", DIMS(13), 1.0f, 10);
    layer("gemm", set_float(set_float(set_int(attrs(), "transB", 1), "alpha", 0.75f), "beta", -1.5f), "gm",
          NAMES("x", "gw", "gc"));
    constant_pruned("wd", DIMS(13, 37), 1, 4, 4, 90, 11);
    layer("fc", NULL, "fd", NAMES("x", "wd"));
    const char *outs[] = {"f44", "f18", "f32", "f81", "fu", "gm", "fd"};
    for (size_t i = 0; i < 7; i++) output(outs[i]);
    check_arm_matches_ref("sp", NULL, "block-sparse fc/gemm", 41);
    /* the packed blocks are there (small kernels may be inlined, so their symbols are not counted),
     * and nothing but sp_run and sp_version is global */
    int n = symbols("sp", " r .*bsr_w$");
    if (n >= 0) ck_assert_int_ge(n, 1);
    if (n >= 0) ck_assert_int_eq(symbols("sp", "^[0-9a-f]+ [A-Z] "), 2);
}
END_TEST

static long file_size(const char *path)
{
    struct stat sb;
    ck_assert_msg(stat(path, &sb) == 0, "%s missing", path);
    return (long)sb.st_size;
}

START_TEST(sparse_matmul_matches_ref)
{
    /* a linear layer on a rank-3 input, x [2, 5, 37] by a pruned constant [37, N]: its 10 rows on
     * the block-sparse kernel through the transposed weights (stored blocks 8x1 and 2x4, and
     * unstructured; edge blocks both ways, N = 22 or 13), and one too dense to gain (dense loops) */
    input("x", DIMS(2, 5, 37));
    constant_pruned("w81", DIMS(37, 22), 1, 8, 1, 30, 1);
    layer("matmul", NULL, "m81", NAMES("x", "w81"));
    constant_pruned("w24", DIMS(37, 13), 1, 2, 4, 30, 2);
    layer("matmul", NULL, "m24", NAMES("x", "w24"));
    constant_pruned("wu", DIMS(37, 22), 2, 1, 1, 25, 3);
    layer("matmul", NULL, "mu", NAMES("x", "wu"));
    constant_pruned("wd", DIMS(37, 13), 1, 4, 4, 90, 4);
    layer("matmul", NULL, "md", NAMES("x", "wd"));
    const char *outs[] = {"m81", "m24", "mu", "md"};
    for (size_t i = 0; i < 4; i++) output(outs[i]);
    check_arm_matches_ref("spmm", NULL, "block-sparse matmul", 71);
    /* the sparse path stores only the kept blocks: x [1, 3, 256] by [256, 128] with 90% of its
     * 4x4 blocks pruned takes well under a fifth of the dense weights' 128 KiB (the dense loops
     * keep the whole transpose) */
    fresh_model("mm");
    input("x", DIMS(1, 3, 256));
    constant_pruned("w", DIMS(256, 128), 1, 4, 4, 10, 5);
    layer("matmul", NULL, "y", NAMES("x", "w"));
    output("y");
    emit_as("mmp", NULL, tmp);
    char path[512];
    snprintf(path, sizeof path, "%s/libmmp.a", tmp);
    long size = file_size(path);
    ck_assert_msg(size * 5 < 256 * 128 * 4, "pruned matmul library %ld bytes: zeros stored?", size);
    check_arm_matches_ref("mmp", NULL, "90%-pruned matmul", 72);
}
END_TEST

START_TEST(sparse_rnn_match_ref)
{
    /* H = 6, I = 7 with 4-wide blocks: the input and the state are read through zero-padded copies;
     * bidirectional block-pruned LSTM (w, r), reverse GRU with block-pruned w, r and
     * linear_before_reset, forward GRU with unstructured r and dense w */
    if (quick()) return; /* sparse_fc_gemm_match_ref covers the kernel there */
    const int64_t T = 4, B = 2, I = 7, H = 6;
    input("x", DIMS(T, B, I));
    input("h0", DIMS(2, B, H));
    input("c0", DIMS(2, B, H));
    constant_pruned("w", DIMS(2, 4 * H, I), 1, 4, 4, 35, 1);
    constant_pruned("r", DIMS(2, 4 * H, H), 1, 2, 4, 35, 2);
    constant_rand("b", DIMS(2, 8 * H), 0.5f, 3);
    rnn_layer("lstm", "lstm", H, "bidirectional", -1, NAMES("x", "w", "r", "b", "", "h0", "c0"),
              NAMES("y", "yh", "yc"));
    constant_pruned("gw", DIMS(1, 3 * H, I), 1, 2, 4, 35, 4);
    constant_pruned("gr", DIMS(1, 3 * H, H), 1, 2, 4, 40, 5);
    constant_rand("gb", DIMS(1, 6 * H), 0.5f, 6);
    rnn_layer("gru", "gru", H, "reverse", 1, NAMES("x", "gw", "gr", "gb"), NAMES("gy", "gyh"));
    constant_rand("hw", DIMS(1, 3 * H, I), 0.5f, 7);
    constant_pruned("hr", DIMS(1, 3 * H, H), 2, 1, 1, 30, 8);
    constant_rand("hb", DIMS(1, 6 * H), 0.5f, 9);
    rnn_layer("gru", "gru2", H, NULL, -1, NAMES("x", "hw", "hr", "hb"), NAMES("hy"));
    const char *outs[] = {"y", "yh", "yc", "gy", "gyh", "hy"};
    for (size_t i = 0; i < 6; i++) output(outs[i]);
    check_arm_matches_ref("sprnn", NULL, "block-sparse lstm + gru", 51);
    int n = symbols("sprnn", " r .*bsr_w$");
    if (n >= 0) ck_assert_int_ge(n, 1);
}
END_TEST

/* prune-bcr on the model's weights with blocks `block` and half the rows of each kept block pruned */
static void prune_bcr(const char *block)
{
    pdc_attrs *a;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "bcr_block", block));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "bcr_row_rate", 0.5f));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "block_convs", 1));  /* 1x1 convs too, */
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "include_stem", 1)); /* also one that reads the graph input */
    ck_assert_ok(ctx, pdc_model_transform(mdl, "prune-bcr", a));
    pdc_attrs_destroy(a);
}

/* Block column-row pruned (prune-bcr) lstm and gru through the BCR kernel (arm_bcr.c), against ref: every
 * direction, GRU with and without linear_before_reset, initial states, one NEON vector of rows (4), two
 * (8) and four (16), edge block-rows (GRU's h gate of 12 rows in 8-row blocks, of 8 in 16-row blocks) and
 * edge column blocks (10 inputs in 8-wide blocks); no dense copy of a gate matrix is in the library. */
START_TEST(bcr_rnn_match_ref)
{
    static const struct {
        const char *block;
        int64_t I, H;
        const char *lstm_dir, *gru_dir;
        int lbr;
    } cases[] = {{"8x8", 16, 8, "bidirectional", "reverse", 1},
                 {"8x8", 10, 12, NULL, "bidirectional", 0},
                 {"16x4", 16, 8, "reverse", NULL, -1},
                 {"4x8", 10, 8, "bidirectional", NULL, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        if (c > 0 && quick()) return;
        const int64_t T = 4, B = 2, I = cases[c].I, H = cases[c].H;
        const int64_t ld = cases[c].lstm_dir && !strcmp(cases[c].lstm_dir, "bidirectional") ? 2 : 1;
        const int64_t gd = cases[c].gru_dir && !strcmp(cases[c].gru_dir, "bidirectional") ? 2 : 1;
        char name[32];
        snprintf(name, sizeof name, "bcrrnn%zu", c);
        fresh_model(name);
        input("x", DIMS(T, B, I));
        input("h0", DIMS(ld, B, H));
        input("c0", DIMS(ld, B, H));
        constant_rand("w", DIMS(ld, 4 * H, I), 0.5f, 1);
        constant_rand("r", DIMS(ld, 4 * H, H), 0.5f, 2);
        constant_rand("b", DIMS(ld, 8 * H), 0.5f, 3);
        rnn_layer("lstm", "lstm", H, cases[c].lstm_dir, -1, NAMES("x", "w", "r", "b", "", "h0", "c0"),
                  NAMES("y", "yh", "yc"));
        constant_rand("gw", DIMS(gd, 3 * H, I), 0.5f, 4);
        constant_rand("gr", DIMS(gd, 3 * H, H), 0.5f, 5);
        constant_rand("gb", DIMS(gd, 6 * H), 0.5f, 6);
        rnn_layer("gru", "gru", H, cases[c].gru_dir, cases[c].lbr, NAMES("x", "gw", "gr", "gb"), NAMES("gy", "gyh"));
        const char *outs[] = {"y", "yh", "yc", "gy", "gyh"};
        for (size_t i = 0; i < 5; i++) output(outs[i]);
        prune_bcr(cases[c].block);
        char what[64];
        snprintf(what, sizeof what, "BCR-pruned lstm + gru, %s blocks", cases[c].block);
        check_arm_matches_ref(name, NULL, what, (uint32_t)(61 + c));
        /* no dense (transposed) gate matrix in the library: every one went through the BCR kernel */
        int n = symbols(name, " r c[0-9]+\\.L[0-9]+\\.(w|r|rh)$");
        if (n >= 0) ck_assert_int_eq(n, 0);
    }
}
END_TEST

/* BCR-pruned fc (bias, relu), gemm (transB, alpha, beta, C) and matmul by a constant [K, N] (transposed at
 * emit time) through the BCR kernel, against ref: 45 inputs and 37 outputs (edge blocks both ways), batch 3,
 * blocks 8x8, 4x4 and 16x8; no dense copy of the weights is in the library. */
START_TEST(bcr_fc_gemm_matmul_match_ref)
{
    static const char *const blocks[] = {"8x8", "4x4", "16x8"};
    for (size_t c = 0; c < 3; c++) {
        if (c > 0 && quick()) return;
        char name[32];
        snprintf(name, sizeof name, "bcrfc%zu", c);
        fresh_model(name);
        input("x", DIMS(3, 45));
        constant_rand("fw", DIMS(37, 45), 0.5f, 1);
        constant_rand("fb", DIMS(37), 0.5f, 2);
        layer("fc", set_string(attrs(), "activation", "relu"), "f", NAMES("x", "fw", "fb"));
        constant_rand("gw", DIMS(37, 45), 0.5f, 3);
        constant_rand("gc", DIMS(37), 1.0f, 4);
        layer("gemm", set_float(set_float(set_int(attrs(), "transB", 1), "alpha", 0.75f), "beta", -1.5f), "g",
              NAMES("x", "gw", "gc"));
        constant_rand("mw", DIMS(45, 37), 0.5f, 5);
        layer("matmul", NULL, "mm", NAMES("x", "mw"));
        const char *outs[] = {"f", "g", "mm"};
        for (size_t i = 0; i < 3; i++) output(outs[i]);
        prune_bcr(blocks[c]);
        char what[64];
        snprintf(what, sizeof what, "BCR-pruned fc, gemm, matmul, %s blocks", blocks[c]);
        check_arm_matches_ref(name, NULL, what, (uint32_t)(81 + c));
        /* no transposed dense copy (fc, gemm), and the read-only data well under the three dense matrices
         * (the packed kept columns hold half the weights here: rows pruned inside them stay as zeros) */
        int n = symbols(name, " r c[0-9]+\\.L[0-9]+\\.wT$");
        if (n >= 0) ck_assert_int_eq(n, 0);
        if (system("command -v aarch64-linux-gnu-size >/dev/null 2>&1") == 0) {
            char cmd[1024];
            snprintf(cmd, sizeof cmd,
                     "aarch64-linux-gnu-size -A %s/lib%s.a | awk '$1 ~ /^\\.rodata/ { s += $2 } END { exit !(s < 3 * 45 * 37 * 4 * 0.75) }'",
                     tmp, name);
            ck_assert_msg(sh(cmd) == 0, "BCR fc/gemm/matmul: .rodata not under 75%% of the dense weights: %s", cmd);
        }
    }
}
END_TEST

/* BCR-pruned 1x1 convs on the planes product, against ref: x [2, 20, 5, 7] to 37 filters (an edge block-row)
 * with a bias and a relu, then 37 to 24 without; blocks 8x8 and 16x4; a strided 1x1 conv in the same model
 * stays on the conv generator. */
START_TEST(bcr_pointwise_conv_matches_ref)
{
    static const char *const blocks[] = {"8x8", "16x4"};
    for (size_t c = 0; c < 2; c++) {
        if (c > 0 && quick()) return;
        char name[32];
        snprintf(name, sizeof name, "bcrpw%zu", c);
        fresh_model(name);
        input("x", DIMS(2, 20, 5, 7));
        constant_rand("w1", DIMS(37, 20, 1, 1), 0.5f, 1);
        constant_rand("b1", DIMS(37), 0.5f, 2);
        layer("conv", set_string(attrs(), "activation", "relu"), "c1", NAMES("x", "w1", "b1"));
        constant_rand("w2", DIMS(24, 37, 1, 1), 0.5f, 3);
        layer("conv", NULL, "c2", NAMES("c1", "w2"));
        constant_rand("w3", DIMS(16, 37, 1, 1), 0.5f, 4);
        layer("conv", set_ints(attrs(), "strides", DIMS(2, 2)), "c3", NAMES("c1", "w3"));
        output("c2");
        output("c3");
        prune_bcr(blocks[c]);
        char what[64];
        snprintf(what, sizeof what, "BCR-pruned 1x1 convs, %s blocks", blocks[c]);
        check_arm_matches_ref(name, NULL, what, (uint32_t)(91 + c));
        int n = symbols(name, " r .*bcr_w$");
        if (n >= 0) ck_assert_int_ge(n, 1);
    }
}
END_TEST

START_TEST(sparse_fc_stores_no_zeros)
{
    /* 90% of the 4x4 blocks of a 128x256 fc pruned: the library holds the kept blocks (and their
     * indices), not the zeros, so it is far smaller than the dense one (128 KiB of weights) */
    input("x", DIMS(1, 256));
    constant_rand("w", DIMS(128, 256), 0.5f, 1);
    layer("fc", NULL, "y", NAMES("x", "w"));
    output("y");
    emit_as("fcd", NULL, tmp);
    fresh_model("pruned");
    input("x", DIMS(1, 256));
    constant_pruned("w", DIMS(128, 256), 1, 4, 4, 10, 1);
    layer("fc", NULL, "y", NAMES("x", "w"));
    output("y");
    emit_as("fcp", NULL, tmp);
    char pd[512], pp[512];
    snprintf(pd, sizeof pd, "%s/libfcd.a", tmp);
    snprintf(pp, sizeof pp, "%s/libfcp.a", tmp);
    long dense = file_size(pd), pruned = file_size(pp);
    ck_assert_msg(dense > 128 * 256 * 4, "dense library %ld bytes, expected the weights in it", dense);
    ck_assert_msg(pruned * 4 < dense, "pruned library %ld bytes, dense %ld: zeros stored?", pruned, dense);
    if (system("command -v aarch64-linux-gnu-size >/dev/null 2>&1") == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "aarch64-linux-gnu-size -A %s | awk '$1 ~ /^\\.rodata/ { s += $2 } END { exit !(s < 128 * 256 * 4 * 0.2) }'",
                 pp);
        ck_assert_msg(sh(cmd) == 0, "pruned fc's .rodata is not under 20%% of the dense weights: %s", cmd);
    }
    check_arm_matches_ref("fcp", NULL, "90%-pruned fc", 61);
    if (!cross_tools()) return;
    /* the same pruned model twice in one program, the second named like the 4x4 kernel's prefix
     * (bsr4x4): the kernels and packed arrays are local and named apart from any NAME_run */
    emit_as("bsr4x4", "cortex-a55", tmp);
    static const char prog[] =
        "#include <string.h>\n#include \"fcp.h\"\n#include \"bsr4x4.h\"\n"
        "int main(void) {\n"
        "  static float x[fcp_INPUT0_SIZE], y1[fcp_OUTPUT0_SIZE], y2[bsr4x4_OUTPUT0_SIZE];\n"
        "  for (int i = 0; i < fcp_INPUT0_SIZE; i++) x[i] = (float)(i % 7) - 3.0f;\n"
        "  if (fcp_run(x, y1) || bsr4x4_run(x, y2)) return 3;\n"
        "  return memcmp(y1, y2, sizeof y1) != 0; }\n";
    char path[512], cmd[2048];
    tmp_source(path, sizeof path, "two.c", prog);
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-gcc -O2 -Wall -Werror -I %s %s/two.c %s/libfcp.a %s/libbsr4x4.a -lm -o %s/two",
             tmp, tmp, tmp, tmp, tmp);
    ck_assert_msg(sh(cmd) == 0, "linking two block-sparse models failed: %s", cmd);
    snprintf(cmd, sizeof cmd, QEMU " %s/two", tmp);
    ck_assert_msg(sh(cmd) == 0, "two block-sparse models disagree: %s", cmd);
}
END_TEST

/* ------------------------------------------------------------------ linking, code, header */

static void small_cnn(const char *wname, uint32_t seed)
{
    input("x", DIMS(1, 8, 12, 12));
    constant_rand(wname, DIMS(16, 8, 3, 3), 0.5f, seed);
    pdc_attrs *a = conv_attrs(1, 1, 1, 1, (const int64_t[]){1, 1, 1, 1}, 1, NULL);
    layer("conv", a, "y", NAMES("x", wname));
    output("y");
}

START_TEST(two_models_link_into_one_program)
{
    /* two pruned convs emitted as m1 and m2 into one directory, linked together: every internal
     * symbol is local, so nothing clashes; each must still match its own reference */
    small_cnn("w", 1);
    transform("prune-pattern,prune-connectivity");
    emit_as("m1", NULL, tmp);
    pdc_model *first = mdl;
    ck_assert_ok(ctx, pdc_model_create(ctx, "second", &mdl));
    small_cnn("w", 2);
    emit_as("m2", "cortex-a76", tmp);
    if (!cross_tools()) {
        pdc_model_destroy(first);
        return;
    }
    float in[8 * 12 * 12], want1[16 * 12 * 12], want2[16 * 12 * 12];
    test_fill_random(in, 8 * 12 * 12, 5);
    pdc_model *models[2] = {first, mdl};
    float *wants[2] = {want1, want2};
    for (int q = 0; q < 2; q++) {
        pdc_program *p = NULL;
        pdc_tensor *ti = NULL, *to = NULL;
        ck_assert_ok(ctx, pdc_compile(ctx, models[q], "ref", &p));
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (const int64_t[]){1, 8, 12, 12}, in, &ti));
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, (const int64_t[]){1, 16, 12, 12}, wants[q], &to));
        ck_assert_ok(ctx, pdc_program_run(p, 1, &ti, 1, &to));
        pdc_tensor_destroy(ti);
        pdc_tensor_destroy(to);
        pdc_program_destroy(p);
    }
    pdc_model_destroy(first);
    char path[512], cmd[2048];
    snprintf(path, sizeof path, "%s/in.bin", tmp);
    write_file(path, in, sizeof in);
    static const char prog[] =
        "#include <stdio.h>\n#include <string.h>\n#include \"m1.h\"\n#include \"m2.h\"\n"
        "int main(int argc, char **argv) {\n"
        "  static float x[m1_INPUT0_SIZE], y1[m1_OUTPUT0_SIZE], y2[m2_OUTPUT0_SIZE];\n"
        "  FILE *f = fopen(argv[1], \"rb\"); if (!f || fread(x, sizeof x, 1, f) != 1) return 2; fclose(f);\n"
        "  if (m1_run(x, y1) || m2_run(x, y2)) return 3;\n"
        "  if (!strstr(m1_version, \"model=m1\") || !strstr(m2_version, \"cpu=cortex-a76\")) return 4;\n"
        "  f = fopen(argv[2], \"wb\"); fwrite(y1, sizeof y1, 1, f); fwrite(y2, sizeof y2, 1, f); fclose(f);\n"
        "  (void)argc; return 0; }\n";
    tmp_source(path, sizeof path, "two.c", prog);
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-gcc -O2 -Wall -Werror -I %s %s/two.c %s/libm1.a %s/libm2.a -lm -o %s/two",
             tmp, tmp, tmp, tmp, tmp);
    ck_assert_msg(sh(cmd) == 0, "linking two models failed: %s", cmd);
    snprintf(cmd, sizeof cmd, QEMU " %s/two %s/in.bin %s/out.bin", tmp, tmp, tmp);
    ck_assert_msg(sh(cmd) == 0, "two-model program failed: %s", cmd);
    snprintf(path, sizeof path, "%s/out.bin", tmp);
    float *got = read_floats(path, 2 * 16 * 12 * 12);
    ck_assert_floats_near(got, want1, 16 * 12 * 12, 1e-4f);
    ck_assert_floats_near(got + 16 * 12 * 12, want2, 16 * 12 * 12, 1e-4f);
    free(got);
}
END_TEST

START_TEST(archive_and_code)
{
    /* the archive: a symbol index that lists exactly NAME_run and NAME_version, NEON fmla on .4s
     * registers in the pruned conv's code, and a header that compiles as C with its macros */
    small_cnn("w", 3);
    transform("prune-pattern,prune-connectivity");
    emit_as("net", NULL, tmp);
    char hpath[512];
    snprintf(hpath, sizeof hpath, "%s/net.h", tmp);
    char *text = test_read_file(hpath, NULL);
    ck_assert_ptr_nonnull(strstr(text, "#define net_NUM_INPUTS 1"));
    ck_assert_ptr_nonnull(strstr(text, "#define net_INPUT0_DIMS {1, 8, 12, 12}"));
    ck_assert_ptr_nonnull(strstr(text, "#define net_OUTPUT0_SIZE 2304"));
    ck_assert_ptr_nonnull(strstr(text, "#define net_INPUT0_NAME \"x\""));
    ck_assert_ptr_nonnull(strstr(text, "int net_run(const float *input, float *output);"));
    ck_assert_ptr_nonnull(strstr(text, "extern const char net_version[];"));
    free(text);
    char cmd[1024];
    if (system("command -v aarch64-linux-gnu-nm >/dev/null 2>&1") != 0) return;
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-nm -s %s/libnet.a | grep -c -E '^(net_run|net_version) in model.o' | grep -qx 2",
             tmp);
    ck_assert_msg(sh(cmd) == 0, "archive index lacks net_run/net_version: %s", cmd);
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-nm -g --defined-only %s/libnet.a | grep -c ' [A-Z] ' | grep -qx 2", tmp);
    ck_assert_msg(sh(cmd) == 0, "more than two global symbols: %s", cmd);
    snprintf(cmd, sizeof cmd,
             "aarch64-linux-gnu-objdump -d %s/libnet.a | grep -E 'fmla\\s+v[0-9]+\\.4s' | wc -l | awk '{exit !($1 >= 16)}'",
             tmp);
    ck_assert_msg(sh(cmd) == 0, "no NEON fmla .4s in the pruned conv's code: %s", cmd);
    snprintf(cmd, sizeof cmd, "gcc -std=c99 -Wall -Werror -fsyntax-only -x c %s", hpath);
    ck_assert_msg(sh(cmd) == 0, "header does not compile: %s", cmd);
}
END_TEST

/* ------------------------------------------------------------------ odd models */

START_TEST(odd_names_and_no_inputs)
{
    /* tensor names with quotes, backslashes, comment marks, trigraphs, '%' and UTF-8: NAME.h keeps
     * them as escaped string literals (checked by a host program that compares them byte for byte) */
    static const char in_name[] = "in \"q\" \\ */ ?\?/ x", out_name[] = "out%s '\xc3\xa9' /* ?\?= */";
    input(in_name, DIMS(2, 3));
    const char *outs[1] = {out_name};
    ck_assert_ok(ctx, pdc_model_add_layer(mdl, "r", "relu", NAMES(in_name), 1, outs, NULL));
    output(out_name);
    emit_as("odd", NULL, tmp);
    static const char prog[] =
        "#include <string.h>\n#include \"odd.h\"\n"
        "int main(void) {\n"
        "  static const char want_in[] = \"in \\\"q\\\" \\\\ */ ?\\?/ x\", want_out[] = \"out%s '\\xc3\\xa9' /* ?\\?= */\";\n"
        "  static const int dims[] = odd_INPUT0_DIMS;\n"
        "  return strcmp(odd_INPUT0_NAME, want_in) || strcmp(odd_OUTPUT0_NAME, want_out) || dims[1] != 3; }\n";
    char path[512], cmd[2048];
    tmp_source(path, sizeof path, "names.c", prog);
    snprintf(cmd, sizeof cmd, "gcc -std=c99 -trigraphs -Wall -Wextra -Werror -I %s %s -o %s/names && %s/names", tmp, path,
             tmp, tmp);
    ck_assert_msg(sh(cmd) == 0, "NAME.h does not keep odd tensor names: %s", cmd);
    check_arm_matches_ref("odd", NULL, "odd names", 71);
    /* no graph input at all: a constant through two layers (the arrays ABI with no inputs) */
    fresh_model("noin");
    constant_rand("c", DIMS(3, 5), 1.0f, 1);
    layer("relu", NULL, "r", NAMES("c"));
    layer("sigmoid", NULL, "s", NAMES("r"));
    output("s");
    emit_as("noin", NULL, tmp);
    if (!cross_tools()) return;
    pdc_program *p = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &p));
    float want[15];
    pdc_tensor *to = NULL;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, (const int64_t[]){3, 5}, want, &to));
    ck_assert_ok(ctx, pdc_program_run(p, 0, NULL, 1, &to));
    pdc_tensor_destroy(to);
    pdc_program_destroy(p);
    static const char prog2[] =
        "#include <stdio.h>\n#include \"noin.h\"\n"
        "int main(int argc, char **argv) {\n"
        "  static float y[noin_OUTPUT0_SIZE]; float *outs[1] = {y};\n"
        "  if (noin_NUM_INPUTS != 0 || noin_run(NULL, outs)) return 3;\n"
        "  FILE *f = fopen(argv[1], \"wb\"); fwrite(y, sizeof y, 1, f); fclose(f); (void)argc; return 0; }\n";
    tmp_source(path, sizeof path, "noin.c", prog2);
    snprintf(cmd, sizeof cmd, "aarch64-linux-gnu-gcc -O2 -Wall -Werror -I %s %s %s/libnoin.a -lm -o %s/noin", tmp, path, tmp,
             tmp);
    ck_assert_msg(sh(cmd) == 0, "no-input model does not link: %s", cmd);
    snprintf(cmd, sizeof cmd, QEMU " %s/noin %s/noin.bin", tmp, tmp);
    ck_assert_msg(sh(cmd) == 0, "no-input model failed: %s", cmd);
    snprintf(path, sizeof path, "%s/noin.bin", tmp);
    float *got = read_floats(path, 15);
    ck_assert_floats_near(got, want, 15, 1e-5f);
    free(got);
}
END_TEST

/* ------------------------------------------------------------------ failures leave nothing behind */

static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static pdc_status emit_opts(const char *target, const char *cpu, const char *dir)
{
    pdc_attrs *o = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "name", "bad"));
    if (cpu) ck_assert_ok(ctx, pdc_attrs_set_string(o, "cpu", cpu));
    pdc_status st = pdc_model_emit(ctx, mdl, target, o, dir);
    pdc_attrs_destroy(o);
    return st;
}

START_TEST(bad_input_fails_cleanly)
{
    small_cnn("w", 4);
    ck_assert_status(ctx, emit_opts(TARGET, "cortex-a99", tmp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown cpu 'cortex-a99'");
    ck_assert_error_has(ctx, "cortex-a76");
    ck_assert_error_has(ctx, "cortex-a55");
    ck_assert_status(ctx, emit_opts("aarch64-apple-darwin", NULL, tmp), PDC_ERR_UNKNOWN_TARGET);
    ck_assert_error_has(ctx, "aarch64-linux-gnu");
    /* unwritable: a directory under a regular file (fails for root too) */
    char file[512], dir[600];
    snprintf(file, sizeof file, "%s/plain", tmp);
    write_file(file, "x", 1);
    snprintf(dir, sizeof dir, "%s/out", file);
    ck_assert_status(ctx, emit_opts(TARGET, NULL, dir), PDC_ERR_IO);
    ck_assert_error_has(ctx, file);
    if (geteuid() != 0) { /* root ignores permissions */
        char ro[600];
        snprintf(ro, sizeof ro, "%s/ro", tmp);
        ck_assert_int_eq(mkdir(ro, 0555), 0);
        ck_assert_status(ctx, emit_opts(TARGET, NULL, ro), PDC_ERR_IO);
        ck_assert_error_has(ctx, "not writable");
        ck_assert_int_eq(dir_entries(ro), 0);
        chmod(ro, 0755);
        rmdir(ro);
    }
    ck_assert_int_eq(dir_entries(tmp), 1); /* only "plain" */
    /* a FIFO where the header goes: refused before anything is written, left in place */
    char fdir[600], fifo[700];
    snprintf(fdir, sizeof fdir, "%s/fifo", tmp);
    ck_assert_int_eq(mkdir(fdir, 0755), 0);
    snprintf(fifo, sizeof fifo, "%s/bad.h", fdir);
    ck_assert_int_eq(mkfifo(fifo, 0644), 0);
    ck_assert_status(ctx, emit_opts(TARGET, NULL, fdir), PDC_ERR_IO);
    ck_assert_error_has(ctx, "it is a FIFO; only a regular file is replaced");
    ck_assert_int_eq(dir_entries(fdir), 1);
    unlink(fifo);
    rmdir(fdir);
    /* a layer the emitter cannot emit: a 3-D convolution whose weights are an input */
    fresh_model("vol");
    input("v", DIMS(1, 2, 4, 5, 6));
    input("w3", DIMS(3, 2, 3, 3, 3));
    layer("conv", NULL, "vy", NAMES("v", "w3"));
    output("vy");
    char sub[600];
    snprintf(sub, sizeof sub, "%s/new", tmp);
    ck_assert_status(ctx, emit_opts(TARGET, NULL, sub), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "layer 'vy' (op conv)");
    ck_assert_error_has(ctx, "3-D conv with a weight or bias computed at run time");
    ck_assert_int_eq(access(sub, F_OK), -1); /* the directory was not even made */
    ck_assert_status(ctx, emit_opts(TARGET, NULL, tmp), PDC_ERR_UNSUPPORTED);
    ck_assert_int_eq(dir_entries(tmp), 1);
    /* activations beyond what the small code model addresses (2.4 GB): refused before codegen; the
     * shapes alone are checked, nothing that large is allocated */
    fresh_model("huge");
    input("h", DIMS(2, 300000000));
    layer("relu", NULL, "hy", NAMES("h"));
    output("hy");
    ck_assert_status(ctx, emit_opts(TARGET, NULL, tmp), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "bytes of activations");
    ck_assert_error_has(ctx, "small code model");
    ck_assert_int_eq(dir_entries(tmp), 1);
    /* no layers, so no outputs: the model check refuses it */
    fresh_model("empty");
    input("e", DIMS(1, 4));
    ck_assert_status(ctx, emit_opts(TARGET, NULL, tmp), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "no outputs");
    ck_assert_int_eq(dir_entries(tmp), 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arm");
    TCase *tc = test_add_tcase(s, "core", setup, teardown, 300, NULL);
    tcase_add_loop_test(tc, onnx_models_match_ref, 0, (int)(sizeof onnx_cases / sizeof onnx_cases[0]));
    test_add_tests(tc, TEST_LIST(nonfinite_inputs_classified_like_ref, conv_variants_dense, conv_variants_pruned_reordered, conv3d_matches_ref,
                                 conv3d_depth_split_matches_ref, other_ops_match_ref,
                                 rnn_cells_match_ref, sparse_fc_gemm_match_ref, sparse_matmul_matches_ref,
                                 sparse_rnn_match_ref, bcr_rnn_match_ref, bcr_fc_gemm_matmul_match_ref, bcr_pointwise_conv_matches_ref,
                                 sparse_fc_stores_no_zeros, two_models_link_into_one_program,
                                 archive_and_code, odd_names_and_no_inputs, bad_input_fails_cleanly));
    return test_run_suite(s);
}
