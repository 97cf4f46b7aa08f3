/*
 * models.h - the benchmark networks built with pdc's public builder API: ResNet-18, ResNet-50 and
 * VGG-16 at batch 1, batchnorm folded into the convolutions (conv + bias + relu), random
 * He-uniform weights (the benchmarks time, they do not classify).
 *
 * Pruning (when prune != 0): every 3x3 convolution with more than 3 input channels is projected onto
 * 8 four-entry patterns (centre kept) and loses the weakest `connectivity` fraction of its kernels
 * (0.5: 4.5x fewer weights, 0.75: 9x); the fully connected layers of VGG-16 keep 1x4 blocks with a
 * density of `fc_density`. Other layers (the 7x7 stem, 1x1 convolutions, ResNet's fc) stay dense.
 */
#ifndef PDC_TEST_BENCH_MODELS_H
#define PDC_TEST_BENCH_MODELS_H

#include "pdc.h"

typedef struct bench_prune {
    int prune;              /* 0: dense model */
    double connectivity;    /* fraction of 3x3 kernels removed */
    double fc_density;      /* VGG-16 fc: fraction of 1x4 blocks kept */
    int variant;            /* 0: the base weights; k > 0: fine-tuned variant k - ResNet's last stage and fc
                             * get other weights, everything before them is the base model's; k < 0:
                             * other weights everywhere (an unrelated model of the same shape) */
} bench_prune;

/* Builds the network into a new model; prints the error and returns NULL on failure.
 * name: "resnet18", "resnet50", "vgg16" or "mobilenetv2" (never pruned here); input "image" [1, 3, hw, hw],
 * output "logits" [1, 1000]; or "lstm": two stacked LSTMs (256 -> 512 -> 512) over hw steps at batch 1
 * and an fc to 256, input "image" [hw, 1, 256], output "logits" [hw, 256]. */
pdc_model *bench_build_model(pdc_context *ctx, const char *name, int hw, const bench_prune *pr);

#endif
