/*
 * bench_call.c - the C side of `make bench-python`: the time of one pdc_program_run call on a model, for
 * test/bench/bench_python.py to subtract from the Python call's time. Public API only.
 *
 * usage: bench_call MODEL [TARGET [THREADS [N]]]   (defaults: cpu, 1, 20000 runs per sample)
 * The input holds sin(0.37 i). Prints one line of key=value fields (microseconds of process CPU time, the
 * fastest of 15 samples of N runs each):
 *   run_us=   pdc_program_run on tensors wrapped once
 *   call_us=  what the bindings do per call: wrap input and output, run, destroy both
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "pdc.h"

#define SAMPLES 15

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: other processes' load does not count */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int die(pdc_context *ctx, const char *what)
{
    fprintf(stderr, "bench_call: %s: %s\n", what, pdc_context_last_error(ctx));
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_call MODEL [TARGET [THREADS [N]]]\n");
        return 2;
    }
    const char *target = argc > 2 ? argv[2] : "cpu", *threads = argc > 3 ? argv[3] : "1";
    const long n = argc > 4 ? atol(argv[4]) : 20000;
    pdc_context *ctx;
    pdc_model *m;
    pdc_program *p;
    if (pdc_context_create(&ctx)) return 1;
    if (pdc_context_set_option(ctx, "threads", threads)) return die(ctx, "threads");
    if (pdc_model_load(ctx, argv[1], &m)) return die(ctx, argv[1]);
    if (pdc_compile(ctx, m, target, &p)) return die(ctx, "compile");
    size_t in_rank, out_rank, n_in, n_out;
    int64_t in_dims[PDC_MAX_RANK], out_dims[PDC_MAX_RANK];
    if (pdc_program_num_inputs(p, &n_in) || pdc_program_num_outputs(p, &n_out) || n_in != 1 || n_out != 1) {
        fprintf(stderr, "bench_call: the model must have one input and one output\n");
        return 1;
    }
    pdc_program_input_info(p, 0, NULL, &in_rank, in_dims);
    pdc_program_output_info(p, 0, NULL, &out_rank, out_dims);
    pdc_tensor *x, *y;
    if (pdc_tensor_create(ctx, in_rank, in_dims, &x) || pdc_tensor_create(ctx, out_rank, out_dims, &y))
        return die(ctx, "tensor");
    float *xd = pdc_tensor_data(x), *yd = pdc_tensor_data(y);
    for (size_t i = 0; i < pdc_tensor_size(x); i++) xd[i] = sinf(0.37f * (float)i); /* as bench_python.py's input */
    double run[SAMPLES], call[SAMPLES];
    for (int s = 0; s < SAMPLES; s++) {
        double t0 = now();
        for (long i = 0; i < n; i++)
            if (pdc_program_run(p, 1, &x, 1, &y)) return die(ctx, "run");
        run[s] = (now() - t0) / (double)n * 1e6;
        t0 = now();
        for (long i = 0; i < n; i++) {
            pdc_tensor *wx, *wy;
            if (pdc_tensor_wrap(ctx, in_rank, in_dims, xd, &wx) || pdc_tensor_wrap(ctx, out_rank, out_dims, yd, &wy))
                return die(ctx, "wrap");
            if (pdc_program_run(p, 1, &wx, 1, &wy)) return die(ctx, "run");
            pdc_tensor_destroy(wx);
            pdc_tensor_destroy(wy);
        }
        call[s] = (now() - t0) / (double)n * 1e6;
    }
    qsort(run, SAMPLES, sizeof *run, cmp);
    qsort(call, SAMPLES, sizeof *call, cmp);
    printf("run_us=%.3f call_us=%.3f\n", run[0], call[0]);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    return 0;
}
