/*
 * gpu_bench.c - pdc's "gpu" target against cuDNN on the 3x3 layers of VGG-16 and ResNet, batch 1,
 * fp32, NCHW, in one process, methods interleaved repetition by repetition (make bench-gpu).
 *
 *   pdc      the layer pattern-pruned exactly as test/bench/bench_conv.c does it (8 patterns of 4
 *            entries, centre kept; 50% or 75% of kernels removed: 4.5x or 9x fewer weights), and the
 *            same layer dense (compression 1), compiled for "gpu". Two times each:
 *              run   = pdc_program_run: input upload, every launch, cuCtxSynchronize, output download
 *                      and the copy to the caller's tensor (what a user sees);
 *              kern  = device execution only: the program's launch list + cuCtxSynchronize, no copies
 *                      (gpu_program_time_launches, an internal hook: this program links libpdc.a).
 *   cuDNN    the 4.5x layer's weights (pruned kernels zero-filled) as a dense conv:
 *            cudnnConvolutionForward with the fastest algorithm cudnnFindConvolutionForwardAlgorithm
 *            reports (its workspace allocated), then cudnnAddTensor for the bias, + sync; data already
 *            on the device (the counterpart of pdc's "kern"). Math type FMA: true fp32, no TF32
 *            (--tf32 allows TF32 tensor cores, cuDNN's default on Ampere and newer).
 *
 * Every time is wall clock (CLOCK_MONOTONIC) around the work and its synchronisation, median of at
 * least 15 repetitions and --min-time seconds per method after warm-up. pdc's 4.5x output is
 * checked against the same layer on "cpu" (1e-4) and cuDNN's (max |diff| <= 1e-3 x max |cuDNN|;
 * cuDNN may pick FFT or Winograd). Then whole models: the ONNX test
 * models resnet_small and vgg_small, and ResNet-18 / VGG-16 (224x224, dense and pruned, built by
 * models.c) on "gpu" (run and kern) and "cpu" (run, all cores).
 *
 * Writes test/bench/results_gpu.tsv (--out) and prints tables. Without a usable GPU (no driver, no
 * device, the stub library) it prints "gpu_bench: no GPU: skipped (...)" and exits 0; where the
 * CUDA runtime cuDNN needs refuses the driver (a toolkit newer than the driver) but pdc runs, pdc
 * alone is timed and the cuDNN columns read nan.
 * --emulated runs the pdc half on the emulated device (PDC_GPU_EMULATE=1, host JIT; cuDNN and
 * the big models are left out, no TSV unless --out) to check the harness on a machine without a GPU.
 *
 * usage: gpu_bench [--out FILE] [--min-time S] [--cases SUBSTRING] [--no-models] [--tf32] [--emulated]
 */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "conv_case.h"
#include "layers.h"
#include "pdc.h"
#include "backends/gpu/gpu.h"
#include "models.h"

#define CU(x)                                                                                         \
    do {                                                                                              \
        cudaError_t e_ = (x);                                                                         \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "gpu_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)
#define DNN(x)                                                                                        \
    do {                                                                                              \
        cudnnStatus_t s_ = (x);                                                                       \
        if (s_ != CUDNN_STATUS_SUCCESS) {                                                             \
            fprintf(stderr, "gpu_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudnnGetErrorString(s_)); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)
#define PDC(ctx, x)                                                                                   \
    do {                                                                                              \
        pdc_status s_ = (x);                                                                          \
        if (s_ != PDC_OK) {                                                                           \
            fprintf(stderr, "gpu_bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, pdc_context_last_error(ctx)); \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

/* ------------------------------------------------------------------ pdc */

typedef struct pdc_case {
    pdc_context *ctx;
    pdc_program *prog;
    pdc_tensor **x, **y;
    size_t nx, ny;
    char kernel[200];
} pdc_case;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "gpu_bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* Compiles model m (taken over) for target and creates its input/output tensors (inputs filled
 * from `in` when given, else pseudo-random). */
static void pdc_case_make(pdc_case *p, pdc_context *ctx, pdc_model *m, const char *target, const float *in)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    PDC(ctx, pdc_compile(ctx, m, target, &p->prog));
    const char *k = "";
    if (pdc_program_layer_kernel(p->prog, 0, NULL, &k) == PDC_OK) snprintf(p->kernel, sizeof p->kernel, "%s", k);
    PDC(ctx, pdc_program_num_inputs(p->prog, &p->nx));
    PDC(ctx, pdc_program_num_outputs(p->prog, &p->ny));
    p->x = xmalloc(p->nx * sizeof *p->x);
    p->y = xmalloc(p->ny * sizeof *p->y);
    size_t at = 0;
    for (size_t i = 0; i < p->nx; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        PDC(ctx, pdc_program_input_info(p->prog, i, NULL, &rank, dims));
        PDC(ctx, pdc_tensor_create(ctx, rank, dims, &p->x[i]));
        float *d = pdc_tensor_data(p->x[i]);
        size_t n = pdc_tensor_size(p->x[i]);
        for (size_t j = 0; j < n; j++) d[j] = in ? in[at + j] : (float)(2 * bench_urand() - 1);
        at += n;
    }
    for (size_t i = 0; i < p->ny; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        PDC(ctx, pdc_program_output_info(p->prog, i, NULL, &rank, dims));
        PDC(ctx, pdc_tensor_create(ctx, rank, dims, &p->y[i]));
    }
    pdc_model_destroy(m);
}

static void pdc_case_run(pdc_case *p)
{
    PDC(p->ctx, pdc_program_run(p->prog, p->nx, (pdc_tensor *const *)p->x, p->ny, p->y));
}

/* One repetition of device execution only (the program must have run once). */
static double pdc_case_kern(pdc_case *p)
{
    double s = 0;
    PDC(p->ctx, gpu_program_time_launches(p->prog, 1, &s));
    return s;
}

static void pdc_case_free(pdc_case *p)
{
    for (size_t i = 0; i < p->nx; i++) pdc_tensor_destroy(p->x[i]);
    for (size_t i = 0; i < p->ny; i++) pdc_tensor_destroy(p->y[i]);
    free(p->x);
    free(p->y);
    pdc_program_destroy(p->prog);
}

/* ------------------------------------------------------------------ cuDNN */

typedef struct dnn_case {
    cudnnTensorDescriptor_t xd, yd, bd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    float *x, *w, *b, *y;
    void *ws;
    size_t ws_size;
} dnn_case;

static const char *algo_name(cudnnConvolutionFwdAlgo_t a)
{
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "implicit_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "implicit_precomp_gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "gemm";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "direct";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "fft";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "fft_tiling";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "winograd";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "winograd_nonfused";
    default: return "?";
    }
}

static void dnn_make(dnn_case *d, cudnnHandle_t h, const layer_case *L, const float *x, const float *w, const float *b,
                     int tf32)
{
    memset(d, 0, sizeof *d);
    size_t nx = (size_t)L->c * L->h * L->w, ny = (size_t)L->o * L->h * L->w, nw = (size_t)L->o * L->c * 9;
    DNN(cudnnCreateTensorDescriptor(&d->xd));
    DNN(cudnnCreateTensorDescriptor(&d->yd));
    DNN(cudnnCreateTensorDescriptor(&d->bd));
    DNN(cudnnCreateFilterDescriptor(&d->wd));
    DNN(cudnnCreateConvolutionDescriptor(&d->cd));
    DNN(cudnnSetTensor4dDescriptor(d->xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, L->c, L->h, L->w));
    DNN(cudnnSetTensor4dDescriptor(d->yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, L->o, L->h, L->w));
    DNN(cudnnSetTensor4dDescriptor(d->bd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, L->o, 1, 1));
    DNN(cudnnSetFilter4dDescriptor(d->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, L->o, L->c, 3, 3));
    DNN(cudnnSetConvolution2dDescriptor(d->cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionMathType(d->cd, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    int n, c, hh, ww;
    DNN(cudnnGetConvolution2dForwardOutputDim(d->cd, d->xd, d->wd, &n, &c, &hh, &ww));
    if (n != 1 || c != L->o || hh != L->h || ww != L->w) {
        fprintf(stderr, "gpu_bench: %s: cuDNN output %dx%dx%dx%d\n", L->name, n, c, hh, ww);
        exit(1);
    }
    CU(cudaMalloc((void **)&d->x, nx * sizeof(float)));
    CU(cudaMalloc((void **)&d->w, nw * sizeof(float)));
    CU(cudaMalloc((void **)&d->b, (size_t)L->o * sizeof(float)));
    CU(cudaMalloc((void **)&d->y, ny * sizeof(float)));
    CU(cudaMemcpy(d->x, x, nx * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d->w, w, nw * sizeof(float), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(d->b, b, (size_t)L->o * sizeof(float), cudaMemcpyHostToDevice));
    /* cuDNN times every algorithm itself; the fastest that succeeded and whose workspace fits */
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int got = 0;
    DNN(cudnnFindConvolutionForwardAlgorithm(h, d->xd, d->wd, d->cd, d->yd, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got,
                                             perf));
    int pick = -1;
    for (int i = 0; i < got && pick < 0; i++) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (perf[i].memory && cudaMalloc(&d->ws, perf[i].memory) != cudaSuccess) {
            cudaGetLastError();
            d->ws = NULL;
            continue;
        }
        pick = i;
    }
    if (pick < 0) {
        fprintf(stderr, "gpu_bench: %s: cuDNN found no usable algorithm\n", L->name);
        exit(1);
    }
    d->algo = perf[pick].algo;
    d->ws_size = perf[pick].memory;
}

static void dnn_run(cudnnHandle_t h, dnn_case *d)
{
    const float one = 1.0f, zero = 0.0f;
    DNN(cudnnConvolutionForward(h, &one, d->xd, d->x, d->wd, d->w, d->cd, d->algo, d->ws, d->ws_size, &zero, d->yd,
                                d->y));
    DNN(cudnnAddTensor(h, &one, d->bd, d->b, &one, d->yd, d->y));
    CU(cudaDeviceSynchronize());
}

static void dnn_free(dnn_case *d)
{
    cudaFree(d->x), cudaFree(d->w), cudaFree(d->b), cudaFree(d->y), cudaFree(d->ws);
    cudnnDestroyTensorDescriptor(d->xd), cudnnDestroyTensorDescriptor(d->yd), cudnnDestroyTensorDescriptor(d->bd);
    cudnnDestroyFilterDescriptor(d->wd);
    cudnnDestroyConvolutionDescriptor(d->cd);
}

/* ------------------------------------------------------------------ main */

static double max_rel_err(const float *a, const float *b, size_t n)
{
    double s = 0, e = 0;
    for (size_t i = 0; i < n; i++) s = fmax(s, fabs((double)b[i]));
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - (double)b[i]));
    return s > 0 ? e / s : e;
}

/* A usable device for pdc: compiling a one-layer model for "gpu" works. *why gets the reason. */
static int pdc_gpu_usable(char *why, size_t cap)
{
    pdc_context *ctx;
    if (pdc_context_create(&ctx)) return snprintf(why, cap, "pdc_context_create failed"), 0;
    pdc_model *m;
    const int64_t d[2] = {1, 4};
    int ok = 0;
    if (!pdc_model_create(ctx, "probe", &m)) {
        const char *in[] = {"x"}, *out[] = {"y"};
        pdc_program *p = NULL;
        if (!pdc_model_add_input(m, "x", 2, d) && !pdc_model_add_layer(m, "r", "relu", 1, in, 1, out, NULL) &&
            !pdc_model_mark_output(m, "y")) {
            ok = pdc_compile(ctx, m, "gpu", &p) == PDC_OK;
            if (!ok) snprintf(why, cap, "%s", pdc_context_last_error(ctx));
        }
        pdc_program_destroy(p);
        pdc_model_destroy(m);
    }
    pdc_context_destroy(ctx);
    return ok;
}

enum { M_RUN45, M_KERN45, M_RUN9, M_KERN9, M_RUN1, M_KERN1, M_DNN, N_METHODS };
#define MAXR 2000

/* Interleaved repetitions of the methods with fn[m] != NULL until each has min_time of samples
 * (at least 15); medians in ms into med[]. */
typedef double (*timed_fn)(void *arg);
static void time_methods(int nm, timed_fn *fn, void **arg, double min_time, double *med)
{
    static double samples[N_METHODS + 4][MAXR];
    double spent[N_METHODS + 4] = {0};
    int nr = 0;
    for (int m = 0; m < nm; m++)
        if (fn[m]) fn[m](arg[m]), fn[m](arg[m]); /* warm-up */
    for (;;) {
        int done = nr >= 15;
        for (int m = 0; m < nm; m++)
            if (fn[m] && spent[m] < min_time) done = 0;
        if (done || nr == MAXR) break;
        for (int m = 0; m < nm; m++) {
            if (!fn[m]) continue;
            double dt = fn[m](arg[m]);
            samples[m][nr] = dt;
            spent[m] += dt;
        }
        nr++;
    }
    for (int m = 0; m < nm; m++) med[m] = fn[m] ? bench_median(samples[m], nr) * 1e3 : NAN;
}

static double t_run(void *a)
{
    double t0 = bench_now();
    pdc_case_run(a);
    return bench_now() - t0;
}
static double t_kern(void *a) { return pdc_case_kern(a); }
static cudnnHandle_t dnn_handle;
static double t_dnn(void *a)
{
    double t0 = bench_now();
    dnn_run(dnn_handle, a);
    return bench_now() - t0;
}

/* Whole model: gpu run, gpu kern and cpu run medians (ms). */
static void bench_model(FILE *tsv, const char *name, pdc_model *(*build)(pdc_context *, const char *, const float **),
                        double min_time, int with_cpu)
{
    pdc_context *cg, *cc;
    PDC(NULL, pdc_context_create(&cg));
    PDC(NULL, pdc_context_create(&cc));
    const float *in = NULL;
    pdc_model *mg = build(cg, name, &in), *mc = with_cpu ? build(cc, name, &in) : NULL;
    if (!mg || (with_cpu && !mc)) {
        fprintf(stderr, "gpu_bench: %s: cannot build the model\n", name);
        exit(1);
    }
    pdc_case g, c;
    double t0 = bench_now();
    pdc_case_make(&g, cg, mg, "gpu", in);
    double compile_g = bench_now() - t0;
    if (with_cpu) pdc_case_make(&c, cc, mc, "cpu", in);
    timed_fn fn[3] = {t_run, t_kern, with_cpu ? t_run : NULL};
    void *arg[3] = {&g, &g, &c};
    double med[3];
    time_methods(3, fn, arg, min_time, med);
    double err = 0;
    if (with_cpu)
        for (size_t i = 0; i < g.ny; i++)
            err = fmax(err, max_rel_err(pdc_tensor_data(g.y[i]), pdc_tensor_data(c.y[i]), pdc_tensor_size(g.y[i])));
    printf("%-24s %10.3f %10.3f %10.3f %8.2f %9.1e %8.2f\n", name, med[0], med[1], med[2], med[2] / med[0], err,
           compile_g);
    if (tsv)
        fprintf(tsv, "model\t%s\t\t%.4f\t%.4f\t\t%.4f\t\t\t\t\t%.3g\t%.3f\t\n", name, med[0], med[1], med[2], err,
                compile_g);
    fflush(stdout);
    pdc_case_free(&g);
    if (with_cpu) pdc_case_free(&c);
    free((void *)in);
    pdc_context_destroy(cg);
    pdc_context_destroy(cc);
}

static const char *data_dir(void)
{
    const char *d = getenv("PDC_TEST_DATA");
    return d && *d ? d : "test/data";
}

/* "onnx:NAME" from test/data/onnx (its NAME.in.bin as input), or models.c's "resnet18[-pruned]" /
 * "vgg16[-pruned]" at 224x224. */
static pdc_model *build_named(pdc_context *ctx, const char *name, const float **in)
{
    pdc_model *m = NULL;
    if (!strncmp(name, "onnx:", 5)) {
        char path[512];
        snprintf(path, sizeof path, "%s/onnx/%s.onnx", data_dir(), name + 5);
        if (pdc_model_load(ctx, path, &m)) {
            fprintf(stderr, "gpu_bench: %s: %s\n", path, pdc_context_last_error(ctx));
            return NULL;
        }
        snprintf(path, sizeof path, "%s/onnx/%s.in.bin", data_dir(), name + 5);
        FILE *f = fopen(path, "rb");
        if (f && !*in) {
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            float *buf = xmalloc((size_t)n);
            if (fread(buf, 1, (size_t)n, f) != (size_t)n) memset(buf, 0, (size_t)n);
            *in = buf;
        }
        if (f) fclose(f);
        return m;
    }
    char base[32];
    snprintf(base, sizeof base, "%s", name);
    char *dash = strchr(base, '-');
    bench_prune pr = {0, 0.5, 0.1, 0};
    if (dash) *dash = 0, pr.prune = 1;
    return bench_build_model(ctx, base, 224, &pr);
}

int main(int argc, char **argv)
{
    const char *out_path = "test/bench/results_gpu.tsv", *filter = NULL;
    double min_time = 0.5;
    int models = 1, tf32 = 0, emulated = 0, out_given = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i], out_given = 1;
        else if (!strcmp(argv[i], "--cases") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-models")) models = 0;
        else if (!strcmp(argv[i], "--tf32")) tf32 = 1;
        else if (!strcmp(argv[i], "--emulated")) emulated = 1;
        else {
            fprintf(stderr, "usage: gpu_bench [--out FILE] [--min-time S] [--cases SUBSTRING] [--no-models] [--tf32] "
                            "[--emulated]\n");
            return 2;
        }
    }
    if (emulated) setenv("PDC_GPU_EMULATE", "1", 1);
    else unsetenv("PDC_GPU_EMULATE"); /* a real device, or nothing */
    /* the CUDA runtime (cuDNN's) may refuse a driver older than the toolkit while pdc, which needs
     * only CUDA 11 of the driver, still runs: then pdc is timed and cuDNN left out */
    char why[1024] = "", rt_why[256] = "";
    int have_dnn = 0, ndev = 0;
    if (!emulated) {
        cudaError_t e = cudaGetDeviceCount(&ndev);
        if (e != cudaSuccess || ndev < 1)
            snprintf(rt_why, sizeof rt_why, "CUDA runtime %d.%d: %s", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10,
                     e != cudaSuccess ? cudaGetErrorString(e) : "no device");
        else have_dnn = 1;
    }
    if (!pdc_gpu_usable(why, sizeof why)) {
        printf("gpu_bench: no GPU: skipped (pdc: %s%s%s)\n", why, rt_why[0] ? "; " : "", rt_why);
        return 0;
    }
    if (have_dnn) {
        struct cudaDeviceProp prop;
        int drv = 0, rt = 0;
        CU(cudaGetDeviceProperties(&prop, 0));
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        cudnnStatus_t ds = cudnnCreate(&dnn_handle);
        if (ds != CUDNN_STATUS_SUCCESS) {
            snprintf(rt_why, sizeof rt_why, "cudnnCreate: %s", cudnnGetErrorString(ds));
            have_dnn = 0;
        }
        printf("device: %s (sm_%d%d, %d SMs), driver CUDA %d.%d, runtime %d.%d, cuDNN %zu; math %s\n", prop.name,
               prop.major, prop.minor, prop.multiProcessorCount, drv / 1000, drv % 1000 / 10, rt / 1000,
               rt % 1000 / 10, cudnnGetVersion(), tf32 ? "TF32 allowed" : "fp32 FMA (no TF32)");
    }
    if (emulated) {
        printf("device: emulated (PDC_GPU_EMULATE=1, host JIT): harness check only, cuDNN and the 224x224 models "
               "left out\n");
        if (!out_given) out_path = NULL;
    } else if (!have_dnn) {
        printf("gpu_bench: cuDNN left out (%s): pdc alone is timed\n", rt_why);
    }
    FILE *tsv = out_path ? fopen(out_path, "w") : NULL;
    if (out_path && !tsv) {
        perror(out_path);
        return 1;
    }
    if (tsv)
        fprintf(tsv, "kind\tcase\tcompression\tpdc_run_ms\tpdc_kern_ms\tcudnn_ms\tcpu_run_ms\tcudnn_algo\tx_cudnn_kern"
                     "\tx_cudnn_run\tpdc_kept_gflops\tmax_rel_err\tcompile_s\tpdc_kernel\n");
    printf("per layer, median ms: run = pdc_program_run incl. copies; kern = pdc device execution only; cudnn = "
           "conv + bias on the device; x = cudnn / pdc\n");
    printf("%-20s %6s %9s %9s %9s %7s %7s %8s  %s\n", "case", "compr", "run", "kern", "cudnn", "x_kern", "x_run",
           "kGF/s", "cudnn algo");

    for (size_t ci = 0; ci < bench_n_layers; ci++) {
        const layer_case *L = &bench_layers[ci];
        if (filter && !strstr(L->name, filter)) continue;
        if (L->s != 1) continue; /* the stride-2 cases are the cpu benchmark's (no stride here yet) */
        conv_data cd;
        conv_data_make(L, &cd);
        const size_t ny = cd.ny;
        const float *x = cd.x, *b = cd.b, *w45 = cd.w45, *w9 = cd.w9, *wd = cd.wd;
        const int32_t *kp45 = cd.kp45, *kp9 = cd.kp9;
        const double compr45 = cd.compr45, compr9 = cd.compr9;
        float *ydnn = xmalloc(ny * sizeof *ydnn);
        double dense_flops = 2.0 * L->o * L->c * 9.0 * L->h * L->w;

        pdc_context *ctx;
        PDC(NULL, pdc_context_create(&ctx));
        pdc_case p45, p9, p1;
        pdc_case_make(&p45, ctx, bench_conv_model(ctx, L, w45, kp45, b), "gpu", x);
        pdc_case_make(&p9, ctx, bench_conv_model(ctx, L, w9, kp9, b), "gpu", x);
        pdc_case_make(&p1, ctx, bench_conv_model(ctx, L, wd, NULL, b), "gpu", x);
        /* correctness: the 4.5x layer on "gpu" against "cpu", and against cuDNN on the same weights */
        pdc_case pc;
        pdc_case_make(&pc, ctx, bench_conv_model(ctx, L, w45, kp45, b), "cpu", x);
        pdc_case_run(&pc);
        pdc_case_run(&p45);
        double err = max_rel_err(pdc_tensor_data(p45.y[0]), pdc_tensor_data(pc.y[0]), ny);
        pdc_case_free(&pc);
        if (err > 1e-4) {
            fprintf(stderr, "gpu_bench: %s: pdc gpu differs from pdc cpu (max rel err %.3g)\n", L->name, err);
            return 1;
        }
        dnn_case d;
        memset(&d, 0, sizeof d);
        if (have_dnn) {
            dnn_make(&d, dnn_handle, L, x, w45, b, tf32);
            dnn_run(dnn_handle, &d);
            CU(cudaMemcpy(ydnn, d.y, ny * sizeof(float), cudaMemcpyDeviceToHost));
            err = max_rel_err(pdc_tensor_data(p45.y[0]), ydnn, ny);
            if (err > 1e-3) {
                fprintf(stderr, "gpu_bench: %s: pdc differs from cuDNN (max rel err %.3g)\n", L->name, err);
                return 1;
            }
        }
        timed_fn fn[N_METHODS] = {t_run, t_kern, t_run, t_kern, t_run, t_kern, have_dnn ? t_dnn : NULL};
        void *arg[N_METHODS] = {&p45, &p45, &p9, &p9, &p1, &p1, &d};
        double med[N_METHODS];
        time_methods(N_METHODS, fn, arg, min_time, med);
        const struct {
            int run;
            double compr;
            pdc_case *p;
        } rows[3] = {{M_RUN45, compr45, &p45}, {M_RUN9, compr9, &p9}, {M_RUN1, 1.0, &p1}};
        for (int r = 0; r < 3; r++) {
            double run = med[rows[r].run], kern = med[rows[r].run + 1];
            double kgf = dense_flops / rows[r].compr / (kern * 1e-3) / 1e9;
            const char *algo = have_dnn ? algo_name(d.algo) : "-";
            printf("%-20s %6.2f %9.3f %9.3f %9.3f %7.2f %7.2f %8.0f  %s\n", L->name, rows[r].compr, run, kern,
                   med[M_DNN], med[M_DNN] / kern, med[M_DNN] / run, kgf, algo);
            if (tsv)
                fprintf(tsv, "layer\t%s\t%.2f\t%.4f\t%.4f\t%.4f\t\t%s\t%.3f\t%.3f\t%.1f\t%.3g\t\t%s\n", L->name,
                        rows[r].compr, run, kern, med[M_DNN], algo, med[M_DNN] / kern, med[M_DNN] / run, kgf, err,
                        rows[r].p->kernel);
        }
        fflush(stdout);
        if (tsv) fflush(tsv);
        if (have_dnn) dnn_free(&d);
        pdc_case_free(&p45);
        pdc_case_free(&p9);
        pdc_case_free(&p1);
        pdc_context_destroy(ctx);
        conv_data_free(&cd);
        free(ydnn);
    }

    if (models) {
        printf("\nwhole models, median ms: gpu run (incl. copies), gpu kern (device only), cpu run (all cores); "
               "x = cpu / gpu run; err = max |gpu - cpu| / max |cpu|; compile = gpu compile s\n");
        printf("%-24s %10s %10s %10s %8s %9s %8s\n", "model", "gpu run", "gpu kern", "cpu run", "x", "err", "compile");
        static const char *const small[] = {"onnx:resnet_small", "onnx:vgg_small"};
        static const char *const big[] = {"resnet18", "resnet18-pruned", "vgg16", "vgg16-pruned"};
        for (size_t i = 0; i < 2; i++)
            if (!filter || strstr(small[i], filter)) bench_model(tsv, small[i], build_named, min_time, 1);
        for (size_t i = 0; i < 4 && !emulated; i++)
            if (!filter || strstr(big[i], filter)) bench_model(tsv, big[i], build_named, min_time, 1);
    }
    if (have_dnn) cudnnDestroy(dnn_handle);
    if (tsv) {
        fclose(tsv);
        printf("wrote %s\n", out_path);
    }
    return 0;
}
