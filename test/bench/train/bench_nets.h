/*
 * bench_nets.h - what the training benchmarks (train_bench.c, train_rnn_bench.c, test/bench/mpi/bench_mpi.c)
 * share: the error macro, the step-time clock and sort, and torchvision's ResNet-18, VGG-16 and MobileNetV2 for
 * 3x32x32 inputs and 10 classes (bench_nets.c), built with pdc's public API only, weights zero (the trainer
 * draws them).
 */
#ifndef PDC_BENCH_NETS_H
#define PDC_BENCH_NETS_H

#include <time.h>

#include "pdc.h"

/* Defined by each benchmark: says what failed (with its context's last error) and ends the run. */
_Noreturn void bench_die(pdc_status st, const char *what);

#define TRY(call, what)                                                                                          \
    do {                                                                                                         \
        pdc_status st_ = (call);                                                                                 \
        if (st_) bench_die(st_, what);                                                                           \
    } while (0)

static inline double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* qsort order of doubles (medians of step times) */
static inline int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The model's input is "image" [1, 3, 32, 32], its output "logits" [1, 10]. */
pdc_model *bench_resnet18(pdc_context *ctx);
pdc_model *bench_vgg16(pdc_context *ctx);
pdc_model *bench_mobilenetv2(pdc_context *ctx);

#endif
