/*
 * train_rnn_bench.c - training step time of an LSTM classifier with pdc's public API only: x [32 steps, 8, 512]
 * -> lstm (hidden 512, bias) -> y_h -> fc 512->10 -> softmax cross-entropy, Adam, batch 8. Run by
 * test/bench/train/train_rnn_torch.py (`make bench-train-rnn`), which times PyTorch's masked training of the
 * same net and batch and prints both.
 *
 * Configurations: dense; bcr: the gate matrices pruned to 4x fewer weights with prune-bcr (16x16 blocks keeping
 * 4 of their 16 columns), pruned weights and their Adam state kept at zero by the trainer.
 *
 * --sparse MODE sets the trainer's option sparse (on puts the pruned w and r on the sparse kernels for their
 * all-steps gradient products; auto, the default, and off keep lstm/gru products dense).
 *
 * usage: train_rnn_bench [--threads N] [--steps N] [--repeats R] [--configs dense,bcr] [--sparse auto|on|off]
 * Output, one line per configuration:
 *   pdc model=lstm config=NAME threads=T batch=8 sparse=MODE step_ms_min=X step_ms_median=Y
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_nets.h"

enum { T = 32, N = 8, F = 512, H = 512, C = 10 };

static pdc_context *ctx;

void bench_die(pdc_status st, const char *what)
{
    fprintf(stderr, "train_rnn_bench: %s: %s (%s)\n", what, pdc_context_last_error(ctx), pdc_status_string(st));
    exit(1);
}

static pdc_model *build(void)
{
    static float zeros[4 * H * H];
    pdc_model *m;
    pdc_attrs *la, *ra;
    TRY(pdc_model_create(ctx, "lstm_classifier", &m), "model");
    TRY(pdc_model_add_input(m, "x", 3, (const int64_t[]){T, N, F}), "input");
    TRY(pdc_model_add_constant(m, "w", 3, (const int64_t[]){1, 4 * H, F}, zeros), "w");
    TRY(pdc_model_add_constant(m, "r", 3, (const int64_t[]){1, 4 * H, H}, zeros), "r");
    TRY(pdc_model_add_constant(m, "b", 2, (const int64_t[]){1, 8 * H}, zeros), "b");
    TRY(pdc_model_add_constant(m, "fw", 2, (const int64_t[]){C, H}, zeros), "fw");
    TRY(pdc_model_add_constant(m, "fb", 1, (const int64_t[]){C}, zeros), "fb");
    TRY(pdc_attrs_create(ctx, &la), "attrs");
    TRY(pdc_attrs_create(ctx, &ra), "attrs");
    TRY(pdc_attrs_set_int(la, "hidden_size", H), "hidden_size");
    TRY(pdc_attrs_set_ints(ra, "shape", 2, (const int64_t[]){-1, H}), "shape");
    TRY(pdc_model_add_layer(m, "lstm", "lstm", 4, (const char *const[]){"x", "w", "r", "b"}, 2,
                            (const char *const[]){"y", "yh"}, la), "lstm");
    TRY(pdc_model_add_layer(m, "last", "reshape", 1, (const char *const[]){"yh"}, 1, (const char *const[]){"h"}, ra),
        "reshape");
    TRY(pdc_model_add_layer(m, "fc", "fc", 3, (const char *const[]){"h", "fw", "fb"}, 1, (const char *const[]){"z"},
                            NULL), "fc");
    TRY(pdc_model_add_layer(m, "sm", "softmax", 1, (const char *const[]){"z"}, 1, (const char *const[]){"p"}, NULL),
        "softmax");
    TRY(pdc_model_mark_output(m, "p"), "output");
    pdc_attrs_destroy(la);
    pdc_attrs_destroy(ra);
    return m;
}

int main(int argc, char **argv)
{
    const char *threads = "1", *configs = "dense,bcr", *sparse = "auto";
    int steps = 5, repeats = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
        else if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--configs")) configs = argv[i + 1];
        else if (!strcmp(argv[i], "--sparse")) sparse = argv[i + 1];
        else {
            fprintf(stderr, "usage: train_rnn_bench [--threads N] [--steps N] [--repeats R] [--configs dense,bcr] "
                            "[--sparse auto|on|off]\n");
            return 2;
        }
    }
    if (steps < 1 || repeats < 1 || pdc_context_create(&ctx) != PDC_OK) return 2;
    pdc_model *m = build();
    pdc_tensor *x, *y;
    TRY(pdc_tensor_create(ctx, 3, (const int64_t[]){T, N, F}, &x), "x");
    TRY(pdc_tensor_create(ctx, 1, (const int64_t[]){N}, &y), "y");
    float *xv = pdc_tensor_data(x), *yv = pdc_tensor_data(y);
    srand(1);
    for (size_t i = 0; i < (size_t)T * N * F; i++) xv[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    for (int i = 0; i < N; i++) yv[i] = (float)(i % C);
    for (int bcr = 0; bcr < 2; bcr++) {
        const char *name = bcr ? "bcr" : "dense";
        if (!strstr(configs, name)) continue;
        pdc_trainer *t;
        TRY(pdc_trainer_create(ctx, m, &t), "trainer");
        TRY(pdc_trainer_set_option(t, "optimizer", "adam"), "adam");
        TRY(pdc_trainer_set_option(t, "batch", "8"), "batch");
        TRY(pdc_trainer_set_option(t, "threads", threads), "threads");
        TRY(pdc_trainer_set_option(t, "sparse", sparse), "sparse");
        TRY(pdc_trainer_init_weights(t), "init");
        if (bcr) {
            pdc_attrs *a;
            TRY(pdc_attrs_create(ctx, &a), "attrs");
            TRY(pdc_attrs_set_string(a, "bcr_block", "16x16"), "bcr_block");
            TRY(pdc_attrs_set_float(a, "bcr_col_rate", 0.75f), "bcr_col_rate");
            TRY(pdc_attrs_set_string(a, "layers", "lstm"), "layers");
            TRY(pdc_trainer_prune(t, "prune-bcr", a), "prune");
            pdc_attrs_destroy(a);
        }
        for (int w = 0; w < 2; w++) TRY(pdc_trainer_step(t, x, y, NULL), "step");
        double *ms = malloc((size_t)repeats * sizeof *ms);
        for (int r = 0; r < repeats; r++) {
            const double t0 = clock_s(CLOCK_MONOTONIC);
            for (int s = 0; s < steps; s++) TRY(pdc_trainer_step(t, x, y, NULL), "step");
            ms[r] = (clock_s(CLOCK_MONOTONIC) - t0) * 1e3 / steps;
        }
        qsort(ms, (size_t)repeats, sizeof *ms, cmp_double);
        printf("pdc model=lstm config=%s threads=%s batch=%d sparse=%s step_ms_min=%.3f step_ms_median=%.3f\n", name,
               threads, N, sparse, ms[0], ms[repeats / 2]);
        fflush(stdout);
        free(ms);
        pdc_trainer_destroy(t);
    }
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    return 0;
}
