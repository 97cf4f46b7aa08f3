/*
 * onnx_check.c - loads ONNX models with the public API, runs them on the reference backend and
 * compares with the framework's outputs: `onnx_check [--target T]... DIR NAME...` reads DIR/NAME.onnx,
 * NAME.in.bin (the inputs, raw f32 LE, concatenated in input order) and NAME.out.bin (the expected
 * outputs, concatenated), runs them on each target T (default ref only) and prints load / compile / run
 * times and the max abs error against 1e-4 x max|ref|. Used by `make test-onnx-full` and
 * `make test-onnx-video` on full-size torchvision models, which are too big to commit (the small
 * committed models are tested by test_onnx_models.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pdc.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *read_floats(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *p = malloc(len > 0 ? (size_t)len : 1);
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len / sizeof(float);
    return p;
}

static int check(pdc_context *ctx, const char *dir, const char *name, const char *target)
{
    char path[4096];
    size_t n_in_f, n_out_f;
    snprintf(path, sizeof path, "%s/%s.in.bin", dir, name);
    float *in = read_floats(path, &n_in_f);
    snprintf(path, sizeof path, "%s/%s.out.bin", dir, name);
    float *want = read_floats(path, &n_out_f);
    snprintf(path, sizeof path, "%s/%s.onnx", dir, name);
    if (!in || !want) {
        printf("%-16s FAIL: cannot read %s/%s.{in,out}.bin\n", name, dir, name);
        free(in);
        free(want);
        return 1;
    }
    pdc_model *m = NULL;
    pdc_program *p = NULL;
    double t0 = now();
    pdc_status st = pdc_model_load_onnx(ctx, path, &m);
    double t1 = now();
    if (!st) st = pdc_compile(ctx, m, target, &p);
    double t2 = now(), t3 = t2;
    size_t ni = 0, no = 0, used_in = 0, used_out = 0;
    pdc_tensor *ti[8] = {0}, *to[8] = {0};
    float *got = NULL;
    if (!st) st = pdc_program_num_inputs(p, &ni);
    if (!st) st = pdc_program_num_outputs(p, &no);
    if (!st && (ni > 8 || no > 8)) st = PDC_ERR_UNSUPPORTED;
    for (size_t i = 0; !st && i < ni; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        st = pdc_program_input_info(p, i, NULL, &rank, dims);
        if (!st) st = pdc_tensor_create(ctx, rank, dims, &ti[i]);
        if (!st && used_in + pdc_tensor_size(ti[i]) > n_in_f) st = PDC_ERR_SHAPE;
        if (!st) memcpy(pdc_tensor_data(ti[i]), in + used_in, pdc_tensor_size(ti[i]) * sizeof(float));
        if (!st) used_in += pdc_tensor_size(ti[i]);
    }
    for (size_t i = 0; !st && i < no; i++) {
        size_t rank;
        int64_t dims[PDC_MAX_RANK];
        st = pdc_program_output_info(p, i, NULL, &rank, dims);
        if (!st) st = pdc_tensor_create(ctx, rank, dims, &to[i]);
        if (!st) used_out += pdc_tensor_size(to[i]);
    }
    if (!st && (used_in != n_in_f || used_out != n_out_f)) st = PDC_ERR_SHAPE;
    if (!st) {
        t2 = now();
        st = pdc_program_run(p, ni, ti, no, to);
        t3 = now();
    }
    int rc = 1;
    if (st) {
        printf("%-16s %-4s FAIL: %s: %s\n", name, target, pdc_status_string(st), pdc_context_last_error(ctx));
    } else {
        got = malloc(used_out * sizeof *got);
        for (size_t i = 0, at = 0; got && i < no; at += pdc_tensor_size(to[i]), i++)
            memcpy(got + at, pdc_tensor_data(to[i]), pdc_tensor_size(to[i]) * sizeof(float));
        double scale = 0, err = 0;
        for (size_t i = 0; got && i < used_out; i++) {
            scale = fmax(scale, fabs((double)want[i]));
            double d = fabs((double)got[i] - (double)want[i]);
            if (!(d <= err)) err = d;
        }
        rc = !got || !(err <= 1e-4 * scale);
        printf("%-16s %-4s %s  max|err| %.3g  (%.2g x max|ref| %.3g)  load %.2f s  compile %.2f s  run %.2f s\n", name,
               target, rc ? "FAIL" : "ok  ", err, scale > 0 ? err / scale : err, scale, t1 - t0, t2 - t1, t3 - t2);
    }
    for (size_t i = 0; i < 8; i++) {
        pdc_tensor_destroy(ti[i]);
        pdc_tensor_destroy(to[i]);
    }
    free(got);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
    free(in);
    free(want);
    return rc;
}

int main(int argc, char **argv)
{
    const char *targets[8];
    int nt = 0, a = 1;
    for (; a + 1 < argc && !strcmp(argv[a], "--target") && nt < 8; a += 2) targets[nt++] = argv[a + 1];
    if (argc - a < 2) {
        fprintf(stderr, "usage: %s [--target T]... DIR NAME...\n", argv[0]);
        return 2;
    }
    if (!nt) targets[nt++] = "ref";
    pdc_context *ctx;
    if (pdc_context_create(&ctx)) return 2;
    int failed = 0;
    for (int i = a + 1; i < argc; i++)
        for (int t = 0; t < nt; t++) failed += check(ctx, argv[a], argv[i], targets[t]);
    pdc_context_destroy(ctx);
    printf("onnx-check: %d passed, %d failed\n", (argc - a - 1) * nt - failed, failed);
    return failed ? 1 : 0;
}
