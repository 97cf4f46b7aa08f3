/*
 * test_gpu.c - the "gpu" target (and the "nvptx" emitter) against the reference backend.
 *
 * (a) The shared cases of test/common/backend_cases.h, with the gpu's kernel choices, plus the gpu's
 *     shared-memory tiled convs and gemms: every model is built with the public API, compiled for
 *     "ref" and for "gpu" on the emulated device (PDC_GPU_EMULATE=1, set in main: the same plan, PTX
 *     generation, arenas, uploads and launch list, with the kernels' host flavour JIT'd), run on the
 *     same pseudo-random inputs, and every output must match: max |gpu - ref| <= 1e-4 x max |ref|.
 *     Shapes are drawn at random from fixed seeds (strides, pads, dilations, groups, sparsity kinds,
 *     fused activations, out_perm), plus the ONNX test models.
 * (b) The PTX of every op kind and of the test models passes ptxas -arch=sm_80 and -arch=sm_90
 *     (/usr/local/cuda/bin/ptxas or $PDC_PTXAS; skipped with a message where absent).
 * (c) Loader errors: a missing driver library, the toolkit's stub libcuda.so (it exports every
 *     symbol pdc resolves; cuInit fails with CUDA_ERROR_STUB_LIBRARY and the library is unloaded
 *     again), bad gpu_arch values, pdc_model_emit "nvptx", the PTX ISA per arch and the driver it
 *     needs.
 * (d) With PDC_TEST_GPU=1 (make test-gpu) the emulation is off and every test of (a) runs on the
 *     real device; without a usable device those tests then fail instead of being skipped.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <dlfcn.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <sys/wait.h>

#include "test/common/testutil.h"
#include "test/common/backend_cases.h"
#include "backends/gpu/cuda_api.h"

static int real_gpu; /* make test-gpu: PDC_TEST_GPU=1 */

static void setup(void)
{
    /* the loader tests change these; with CK_FORK=no (make test-valgrind) they must not leak into
     * the next test */
    if (!real_gpu) {
        setenv("PDC_GPU_EMULATE", "1", 1);
        unsetenv("PDC_CUDA_LIBRARY");
    }
    bc_setup();
}

/* PTX through ptxas (defined below). */
static char *emit_ptx(const char *arch, const char *dir);
static void check_ptxas(const char *what);

/* The gpu's kernels for each shared case of backend_cases.h, whatever its variant. */
static const bc_kernel gpu_kernels[][5] = {
    [BC_UNARY] = {{"y0", "ptx elementwise relu"}, {"y5", "ptx elementwise sigmoid"}},
    [BC_BINARY] = {{"y", "ptx elementwise"}},
    [BC_CONST_OPERAND] = {{"y", "broadcasting"}},
    [BC_BATCHNORM] = {{"y", "ptx batchnorm"}},
    [BC_CONV_RANDOM] = {{"y", "ptx "}},
    [BC_CONV_PATTERN] = {{"y", "ptx pattern-sparse conv 3x3, 8 patterns"}},
    [BC_GEMM] = {{"y", "ptx dense"}},
    [BC_MATMUL] = {{"y", "ptx dense"}},
    [BC_MATMUL_CONST] = {{"y", "ptx dense"}},
    [BC_RNN] = {{"rnn", "launches per step"}},
    [BC_POOL] = {{"y", "ptx "}, {"g", "ptx global average pool"}},
    /* every op has a gpu kernel */
    [BC_EVERY_OP] = {{"s", "ptx softmax"}, {"t", "ptx transpose"}, {"c", "ptx concat"}, {"r", "ptx copy"}},
    [BC_SOFTMAX] = {{"y", "ptx softmax"}},
    [BC_MOVE] = {{"t", "ptx transpose"}, {"c", "ptx concat"}, {"r", "ptx copy"}},
};

/* The gpu's kernel for each shared case of backend_cases.h. */
static void bc_expect_kernels(bc_case which, const pdc_program *p, int variant)
{
    bc_assert_kernels(p, gpu_kernels[which]);
    if (which == BC_FC) ck_assert_kernel(p, "y", variant == 0 || variant == 3 ? "ptx dense fc" : "ptx block-sparse fc");
}

/* ------------------------------------------------------------------ shared-memory tiles */

/* Dense 2-D convs with >= 256 output pixels take the shared-memory tiled kernel: input tile + halo
 * and 8 filters' weights staged per step of input channels, phases separated by barriers (run phase
 * by phase over the block on the emulated device). Strides, dilation, asymmetric pads, 1x1 and 5x5,
 * channel counts off the step and group sizes, batch 2, bias, activation, out_perm; PTX via ptxas. */
START_TEST(tiled_conv_matches_ref)
{
    static const struct {
        int64_t n, c, o, h, w, kh, kw, s, d, pt, pl, pb, pr;
        int bias, perm;
    } cs[] = {{2, 5, 13, 20, 20, 3, 3, 1, 1, 1, 1, 1, 1, 1, 0}, {1, 17, 8, 33, 35, 5, 5, 2, 1, 2, 2, 2, 2, 0, 1},
              {1, 3, 9, 24, 12, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0},  {1, 12, 16, 18, 30, 3, 3, 1, 2, 2, 1, 2, 3, 1, 1},
              {1, 9, 7, 16, 16, 3, 3, 1, 1, 0, 1, 2, 1, 0, 0}};
    for (size_t q = 0; q < sizeof cs / sizeof cs[0]; q++) {
        fresh_model("tconv");
        input("x", DIMS(cs[q].n, cs[q].c, cs[q].h, cs[q].w));
        constant_rand("w", DIMS(cs[q].o, cs[q].c, cs[q].kh, cs[q].kw), 0.5f, 11 + (uint32_t)q);
        if (cs[q].bias) constant_rand("b", DIMS(cs[q].o), 0.5f, 3);
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){cs[q].s, cs[q].s}));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "dilations", 2, (const int64_t[]){cs[q].d, cs[q].d}));
        ck_assert_ok(ctx, pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){cs[q].pt, cs[q].pl, cs[q].pb, cs[q].pr}));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", q % 2 ? "relu" : "sigmoid"));
        if (cs[q].perm) {
            int64_t pv[32];
            for (int64_t i = 0; i < cs[q].o; i++) pv[i] = (i * 5 + 3) % cs[q].o;
            ck_assert_ok(ctx, pdc_attrs_set_ints(a, "out_perm", (size_t)cs[q].o, pv));
        }
        if (cs[q].bias) layer("conv", a, "y", NAMES("x", "w", "b"));
        else layer("conv", a, "y", NAMES("x", "w"));
        output("y");
        char what[96];
        snprintf(what, sizeof what, "tiled conv case %zu", q);
        check_kernels(what, 40 + (uint32_t)q, BC_KERNELS({"y", "shared-memory tiles"}));
        if (q == 1) check_ptxas("tiled conv 5x5 stride 2");
    }
}
END_TEST

/* Dense fc / gemm / matmul with M, N >= 16 take the shared-memory tiled kernel (16x16 tiles, phases
 * separated by barriers; the emulated device runs each phase for the whole block before the next):
 * sizes around and off the tile multiples, transposes, broadcast batches, and its PTX through ptxas. */
START_TEST(tiled_gemm_matches_ref)
{
    static const struct {
        int64_t m, k, n;
        int ta, tb;
    } g[] = {{16, 16, 16, 0, 0}, {17, 33, 31, 0, 1}, {40, 7, 16, 1, 0}, {64, 90, 50, 1, 1}, {31, 1, 47, 0, 0}};
    for (size_t c = 0; c < sizeof g / sizeof g[0]; c++) {
        fresh_model("tiled");
        if (g[c].ta) input("a", DIMS(g[c].k, g[c].m));
        else input("a", DIMS(g[c].m, g[c].k));
        if (g[c].tb) constant_rand("b", DIMS(g[c].n, g[c].k), 1.0f, 5);
        else input("b", DIMS(g[c].k, g[c].n));
        constant_rand("c", DIMS(g[c].n), 1.0f, 6);
        pdc_attrs *a = attrs();
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "transA", g[c].ta));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "transB", g[c].tb));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "alpha", 0.5f));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "activation", "relu"));
        layer("gemm", a, "y", NAMES("a", "b", "c"));
        output("y");
        char what[96];
        snprintf(what, sizeof what, "tiled gemm %lldx%lldx%lld ta%d tb%d", (long long)g[c].m, (long long)g[c].k,
                 (long long)g[c].n, g[c].ta, g[c].tb);
        check_kernels(what, (uint32_t)c, BC_KERNELS({"y", "shared-memory tiles 16x16"}));
    }
    /* fc at batch 20 (tiled) and batch 3 (thread per output) */
    for (int n = 3; n <= 20; n += 17) {
        fresh_model("fc");
        input("x", DIMS(n, 75));
        constant_rand("w", DIMS(37, 75), 0.5f, 7);
        constant_rand("bias", DIMS(37), 0.5f, 8);
        layer("fc", NULL, "y", NAMES("x", "w", "bias"));
        output("y");
        check_kernels(n == 20 ? "tiled fc" : "small fc", 9,
                      BC_KERNELS({"y", n == 20 ? "shared-memory tiles" : "thread per output"}));
    }
    /* matmul with broadcast batch dims: a block per (batch, tile) */
    fresh_model("mm");
    matmul_model(DIMS(2, 1, 37, 45), DIMS(3, 45, 33));
    check_kernels("tiled matmul [2,1,37,45] x [3,45,33]", 10, BC_KERNELS({"y", "shared-memory tiles"}));
    /* the PTX: shared arrays, bar.sync, accepted by ptxas */
    char dir[300];
    snprintf(dir, sizeof dir, "%s/tiled-XXXXXX", cache_dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *ptx = emit_ptx("sm_80", dir);
    ck_assert_msg(strstr(ptx, ".shared .align 16 .b8 L0_matmul_smem0[1088]") != NULL, "no shared tile in the PTX");
    const char *bar = strstr(ptx, "bar");
    ck_assert_msg(bar != NULL && strstr(ptx, "bar.sync") != NULL, "no barrier in the PTX: %.60s", bar ? bar : "-");
    free(ptx);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    check_ptxas("tiled matmul");
}
END_TEST

/* ------------------------------------------------------------------ PTX through ptxas */

static const char *ptxas_path(void)
{
    const char *p = getenv("PDC_PTXAS");
    if (p && *p) return access(p, X_OK) == 0 ? p : NULL;
    return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : NULL;
}

/* pdc_model_emit "nvptx" for arch into a temp dir; returns the PTX text (malloc'd). */
static char *emit_ptx(const char *arch, const char *dir)
{
    pdc_attrs *o = set_string(set_string(attrs(), "arch", arch), "name", "m");
    ck_assert_ok(ctx, pdc_model_emit(ctx, mdl, "nvptx", o, dir));
    pdc_attrs_destroy(o);
    char path[512];
    snprintf(path, sizeof path, "%s/m.ptx", dir);
    return test_read_file(path, NULL);
}

/* The current model's PTX for sm_80 and sm_90 passes ptxas for that arch. */
static void check_ptxas(const char *what)
{
    const char *ptxas = ptxas_path();
    static const char *const archs[] = {"sm_80", "sm_90"};
    for (int i = 0; i < 2; i++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/ptx-XXXXXX", cache_dir);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char *ptx = emit_ptx(archs[i], dir);
        char target[32];
        snprintf(target, sizeof target, ".target %s", archs[i]);
        ck_assert_msg(strstr(ptx, target) != NULL, "%s: PTX lacks %s", what, target);
        ck_assert_msg(strstr(ptx, ".visible .entry") != NULL, "%s: PTX has no kernel entry", what);
        free(ptx);
        if (ptxas) {
            char cmd[2048], out[512];
            snprintf(out, sizeof out, "%s/m.cubin", dir);
            snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s/m.ptx' -o '%s' 2>'%s/ptxas.log'", ptxas, archs[i], dir, out, dir);
            int rc = system(cmd);
            char log[2048] = "";
            snprintf(cmd, sizeof cmd, "%s/ptxas.log", dir);
            FILE *f = fopen(cmd, "r");
            if (f) {
                size_t n = fread(log, 1, sizeof log - 1, f);
                log[n] = 0;
                fclose(f);
            }
            ck_assert_msg(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "%s: ptxas -arch=%s rejected the PTX: %s",
                          what, archs[i], log);
        }
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
}

START_TEST(ptx_of_every_op_passes_ptxas)
{
    if (!ptxas_path()) fprintf(stderr, "test_gpu: ptxas not found (/usr/local/cuda/bin/ptxas, $PDC_PTXAS): PTX is "
                                       "generated and checked for .target, not assembled\n");
    /* one model with every op kind: pattern-sparse, dense, depthwise and 3-D conv, fc dense and
     * block-sparse, gemm, matmul, pools, batchnorm, activations, binaries, softmax, shapes, rnns */
    input("x", DIMS(1, 4, 8, 8));
    int32_t kp[8 * 4];
    static const uint64_t pats[2] = {0x1b, 0x1b0};
    for (int k = 0; k < 32; k++) kp[k] = k % 5 == 0 ? -1 : k % 2;
    constant_patterned("wp", 8, 4, 3, 2, pats, kp, 3);
    layer("conv", set_string(set_ints(attrs(), "pads", DIMS(1, 1, 1, 1)), "activation", "relu"), "c1", NAMES("x", "wp"));
    constant_rand("wd", DIMS(8, 1, 3, 3), 0.5f, 4);
    layer("conv", set_ints(set_int(attrs(), "group", 8), "strides", DIMS(2, 2)), "c2", NAMES("c1", "wd"));
    constant_rand("s", DIMS(8), 0.5f, 5);
    constant_rand("bb", DIMS(8), 0.5f, 6);
    constant_rand("mu", DIMS(8), 0.1f, 7);
    float var[8] = {1, 2, 1, 0.5f, 1, 1, 3, 1};
    ck_assert_ok(ctx, pdc_model_add_constant(mdl, "var", DIMS(8), var));
    layer("batchnorm", NULL, "bn", NAMES("c2", "s", "bb", "mu", "var"));
    layer("maxpool", set_ints(attrs(), "kernel_shape", DIMS(2, 2)), "mp", NAMES("bn"));
    layer("avgpool", set_ints(attrs(), "kernel_shape", DIMS(2, 2)), "ap", NAMES("bn"));
    layer("add", NULL, "ad", NAMES("mp", "ap"));
    layer("sigmoid", NULL, "sg", NAMES("ad"));
    layer("tanh", NULL, "th", NAMES("sg"));
    layer("global_avgpool", NULL, "gp", NAMES("th"));
    layer("flatten", NULL, "fl", NAMES("gp"));
    constant_pruned("wf", DIMS(12, 8), 1, 4, 4, 50, 8);
    layer("fc", NULL, "fc", NAMES("fl", "wf"));
    layer("softmax", NULL, "sm", NAMES("fc"));
    output("sm");
    /* a 3-D conv and an lstm, a gru and a matmul on a second input */
    input("v", DIMS(1, 2, 3, 4, 5));
    constant_rand("w3", DIMS(3, 2, 2, 2, 2), 0.5f, 9);
    layer("conv", NULL, "c3", NAMES("v", "w3"));
    output("c3");
    input("seq", DIMS(3, 1, 5));
    constant_rand("lw", DIMS(1, 16, 5), 0.5f, 10);
    constant_rand("lr", DIMS(1, 16, 4), 0.5f, 11);
    layer("lstm", set_int(attrs(), "hidden_size", 4), "ls", NAMES("seq", "lw", "lr"));
    output("ls");
    constant_rand("gw", DIMS(1, 12, 5), 0.5f, 12);
    constant_rand("grr", DIMS(1, 12, 4), 0.5f, 13);
    layer("gru", set_int(attrs(), "hidden_size", 4), "gr", NAMES("seq", "gw", "grr"));
    output("gr");
    constant_rand("mm", DIMS(5, 3), 0.5f, 14);
    layer("matmul", NULL, "mt", NAMES("seq", "mm"));
    layer("hardswish", NULL, "hs", NAMES("mt"));
    output("hs");
    check_ptxas("every op");
    pdc_program_destroy(check_matches_ref("every op", 21));
}
END_TEST

START_TEST(ptx_of_onnx_models_passes_ptxas)
{
    static const char *const names[] = {"resnet_small", "mobilenetv2_small", "vgg_small", "pattern_cnn", "lstm",
                                        "gru", "block_fc", "softmax_v11"};
    int found = 0;
    for (size_t q = 0; q < sizeof names / sizeof names[0]; q++) {
        char file[256];
        snprintf(file, sizeof file, "onnx/%s.onnx", names[q]);
        if (access(test_data_path(file), R_OK) != 0) continue;
        found = 1;
        pdc_model_destroy(mdl);
        mdl = NULL;
        ck_assert_ok(ctx, pdc_model_load(ctx, test_data_path(file), &mdl));
        check_ptxas(names[q]);
    }
    if (!found) fprintf(stderr, "test_gpu: no ONNX test models under %s, skipped\n", test_data_path("onnx"));
}
END_TEST

/* ------------------------------------------------------------------ driver loading and options */

START_TEST(missing_driver_library_is_no_device)
{
    if (getenv("PDC_TEST_GPU")) return; /* the real device is wanted in that mode */
    relu_model(2, 3);
    unsetenv("PDC_GPU_EMULATE");
    setenv("PDC_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "gpu", &p), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "/nonexistent/libcuda.so.1");
    ck_assert_error_has(ctx, "NVIDIA driver");
    ck_assert_ptr_null(p);
    /* the cpu target is unaffected */
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &p));
    pdc_program_destroy(p);
}
END_TEST

START_TEST(stub_driver_is_no_device)
{
    const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (getenv("PDC_TEST_GPU")) return;
    if (access(stub, R_OK) != 0) {
        fprintf(stderr, "test_gpu: %s absent, stub-driver test skipped\n", stub);
        return;
    }
    /* the stub exports every symbol pdc resolves (a missing one would fail before cuInit) */
    void *h = dlopen(stub, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "dlopen %s: %s", stub, dlerror());
    size_t n = 0;
    for (; cuda_api_symbols[n]; n++)
        ck_assert_msg(dlsym(h, cuda_api_symbols[n]) != NULL, "the stub lacks %s", cuda_api_symbols[n]);
    ck_assert_uint_eq(n, 20);
    dlclose(h);
    ck_assert_msg(dlopen(stub, RTLD_NOW | RTLD_NOLOAD) == NULL, "the stub is still loaded before the test");

    relu_model(2, 3);
    unsetenv("PDC_GPU_EMULATE");
    setenv("PDC_CUDA_LIBRARY", stub, 1);
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "gpu", &p), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "cuInit failed with CUDA_ERROR_STUB_LIBRARY (34)");
    ck_assert_error_has(ctx, "stub library");
    ck_assert_ptr_null(p);
    /* the failed cuInit left no handle: the library is unloaded again */
    h = dlopen(stub, RTLD_NOW | RTLD_NOLOAD);
    if (h) dlclose(h);
    ck_assert_msg(h == NULL, "the stub library stayed loaded after the failed cuInit");
    /* twice: nothing stays half-loaded, the load is retried and fails the same way */
    ck_assert_status(ctx, pdc_compile(ctx, mdl, "gpu", &p), PDC_ERR_NO_DEVICE);
    ck_assert_error_has(ctx, "CUDA_ERROR_STUB_LIBRARY");
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "cpu", &p));
    pdc_program_destroy(p);
}
END_TEST

/* The PTX ISA LLVM emits per arch, and the driver each needs (docs/backends.md, "GPU backend": minimum driver). */
START_TEST(ptx_isa_and_minimum_driver)
{
    static const struct {
        const char *arch, *isa;
        int driver;
    } want[] = {{"sm_75", "6.3", 10000}, {"sm_80", "7.0", 11000}, {"sm_86", "7.1", 11010},
                {"sm_89", "7.8", 11080}, {"sm_90", "7.8", 11080}};
    relu_model(2, 3);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/isa-XXXXXX", cache_dir);
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char *ptx = emit_ptx(want[i].arch, dir);
        char line[64];
        snprintf(line, sizeof line, ".version %s\n.target %s\n.address_size 64", want[i].isa, want[i].arch);
        ck_assert_msg(strstr(ptx, line) != NULL, "%s: expected '%s' in the PTX header", want[i].arch, line);
        /* 64-bit index arithmetic: the global index is widened before the multiply-add */
        ck_assert_msg(strstr(ptx, "mul.wide.u32") != NULL || strstr(ptx, "mad.wide.u32") != NULL,
                      "%s: no 64-bit index arithmetic", want[i].arch);
        free(ptx);
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        ck_assert_int_eq(cuda_driver_for_ptx_isa(want[i].isa), want[i].driver);
    }
    ck_assert_int_eq(cuda_driver_for_ptx_isa("8.5"), 12050);
    ck_assert_int_eq(cuda_driver_for_ptx_isa("8.6"), 12070);
    ck_assert_int_eq(cuda_driver_for_ptx_isa("9.0"), 13000);
    ck_assert_int_eq(cuda_driver_for_ptx_isa("x"), 0);
    char buf[96];
    ck_assert_str_eq(cuda_error_text(NULL, 222, buf, sizeof buf), "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)");
    ck_assert_str_eq(cuda_error_text(NULL, 9999, buf, sizeof buf), "CUDA error (9999)");
}
END_TEST

START_TEST(gpu_arch_option)
{
    char buf[32];
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "gpu_arch", buf, sizeof buf));
    ck_assert_str_eq(buf, "auto");
    static const char *const bad[] = {"sm_70", "sm_95", "", "SM_80", "sm_80 ", "compute_80"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_status(ctx, pdc_context_set_option(ctx, "gpu_arch", bad[i]), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "sm_75, sm_80, sm_86, sm_89, sm_90");
    }
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "gpu_arch", buf, sizeof buf));
    ck_assert_str_eq(buf, "auto");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "gpu_arch", "sm_90"));
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "gpu_arch", buf, sizeof buf));
    ck_assert_str_eq(buf, "sm_90");
    if (!getenv("PDC_TEST_GPU")) {
        /* an explicit arch is used as given: on the emulated device sm_90 compiles and runs */
        relu_model(2, 3);
        pdc_program_destroy(check_matches_ref("relu for sm_90", 2));
    }
}
END_TEST

START_TEST(nvptx_emit_files)
{
    relu_model(2, 3);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/emit-XXXXXX", cache_dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char *ptx = emit_ptx("sm_90", dir);
    ck_assert_ptr_nonnull(strstr(ptx, ".target sm_90"));
    ck_assert_ptr_nonnull(strstr(ptx, ".entry L0_relu"));
    free(ptx);
    char path[512];
    snprintf(path, sizeof path, "%s/m.launch.txt", dir);
    char *text = test_read_file(path, NULL);
    ck_assert_msg(strstr(text, "launch L0_relu 1 256 0 y: x -> y") != NULL, "launch list: %s", text);
    free(text);
    /* a bad arch is refused with the list, nothing written */
    pdc_attrs *o = attrs();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "arch", "sm_95"));
    char dir2[320];
    snprintf(dir2, sizeof dir2, "%s/bad", dir);
    ck_assert_status(ctx, pdc_model_emit(ctx, mdl, "nvptx", o, dir2), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "sm_90");
    ck_assert_int_ne(access(dir2, F_OK), 0);
    pdc_attrs_destroy(o);
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

/* A program compiled on this thread runs on others (each run makes the device context current on
 * its own thread: on a real GPU, make test-gpu, this is what it checks). */
typedef struct thread_run {
    pdc_program *prog;
    pdc_tensor *x, *y;
    pdc_status st;
} thread_run;

static void *run_in_thread(void *arg)
{
    thread_run *t = arg;
    t->st = pdc_program_run(t->prog, 1, &t->x, 1, &t->y);
    return NULL;
}

START_TEST(run_from_other_threads)
{
    input("x", DIMS(2, 40));
    constant_rand("w", DIMS(24, 40), 0.5f, 3);
    layer("fc", NULL, "h", NAMES("x", "w"));
    layer("relu", NULL, "y", NAMES("h"));
    output("y");
    pdc_program *pr = NULL, *pg = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "ref", &pr));
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "gpu", &pg));
    thread_run t[3];
    pdc_tensor *want = NULL;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 24), &want));
    for (int i = 0; i < 3; i++) {
        t[i].prog = pg;
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 40), &t[i].x));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 24), &t[i].y));
        test_fill_random(pdc_tensor_data(t[i].x), 80, 100u + (uint32_t)i);
    }
    pthread_t th[3];
    for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, run_in_thread, &t[i]), 0);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(t[i].st == PDC_OK, "run on thread %d: %s", i, pdc_context_last_error(ctx));
        ck_assert_ok(ctx, pdc_program_run(pr, 1, &t[i].x, 1, &want));
        assert_close(pdc_tensor_data(t[i].y), pdc_tensor_data(want), 48, "run on another thread");
        pdc_tensor_destroy(t[i].x);
        pdc_tensor_destroy(t[i].y);
    }
    pdc_tensor_destroy(want);
    pdc_program_destroy(pg); /* destroyed on this thread, after runs on others */
    pdc_program_destroy(pr);
}
END_TEST

START_TEST(failed_run_leaves_outputs)
{
    /* shape errors are caught before the device is touched; the output keeps its bytes */
    relu_model(2, 3);
    pdc_program *p = NULL;
    ck_assert_ok(ctx, pdc_compile(ctx, mdl, "gpu", &p));
    pdc_tensor *x = NULL, *y = NULL;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 4), &x));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, DIMS(2, 3), &y));
    float *yd = pdc_tensor_data(y);
    for (int i = 0; i < 6; i++) yd[i] = 42.0f;
    ck_assert_status(ctx, pdc_program_run(p, 1, &x, 1, &y), PDC_ERR_SHAPE);
    for (int i = 0; i < 6; i++) ck_assert_float_eq(yd[i], 42.0f);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_program_destroy(p);
}
END_TEST

static Suite *gpu_suite(void)
{
    Suite *s = suite_create("gpu");
    bc_tcases t = bc_add_cases(s, setup, bc_teardown);
    tcase_add_test(t.conv, tiled_conv_matches_ref);
    tcase_add_test(t.gemm, tiled_gemm_matches_ref);
    test_add_tests(t.api, TEST_LIST(missing_driver_library_is_no_device, stub_driver_is_no_device,
                                    ptx_isa_and_minimum_driver, gpu_arch_option, nvptx_emit_files,
                                    failed_run_leaves_outputs, run_from_other_threads));
    test_add_tcase(s, "ptx", setup, bc_teardown, 300,
                   TEST_LIST(ptx_of_every_op_passes_ptxas, ptx_of_onnx_models_passes_ptxas));
    return s;
}

int main(void)
{
    /* (a) runs on the emulated device unless make test-gpu asks for the real one */
    real_gpu = getenv("PDC_TEST_GPU") && strcmp(getenv("PDC_TEST_GPU"), "0");
    if (real_gpu) unsetenv("PDC_GPU_EMULATE");
    else {
        unsetenv("PDC_TEST_GPU");
        setenv("PDC_GPU_EMULATE", "1", 1);
    }
    return bc_main("gpu", 1e-4f, gpu_suite());
}
