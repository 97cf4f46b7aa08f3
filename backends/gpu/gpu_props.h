/*
 * gpu_props.h - what the latency model needs to know of the gpu target's device (device 0), read
 * through the CUDA driver at run time (gpu_props.c); lib/cost/gpu_cost.c turns it into a roofline.
 */
#ifndef PDC_BACKENDS_GPU_PROPS_H
#define PDC_BACKENDS_GPU_PROPS_H

#include "backends/backend.h"

typedef struct gpu_props {
    char name[128];
    int emulated;          /* 1: PDC_GPU_EMULATE=1's device (attributes from PDC_GPU_EMULATE_PROPS) */
    int sms;               /* multiprocessors */
    int cc_major, cc_minor;
    double clock_khz;      /* SM clock */
    double mem_clock_khz;  /* memory clock (the driver's figure: data moves twice per cycle) */
    int bus_bits;          /* global memory bus width */
} gpu_props;

/* FP32 lanes per SM for a compute capability (64 on sm_70/75/80, 128 on sm_86/89/90 and newer). */
int gpu_props_fp32_lanes(const gpu_props *p);
/* Peak FP32 FLOP/s (an FMA counts 2) and memory bandwidth in bytes/s. */
double gpu_props_peak_flops(const gpu_props *p);
double gpu_props_bandwidth(const gpu_props *p);

/* Device 0's properties. PDC_ERR_NO_DEVICE (with the driver's reason) when there is no driver or
 * device. With PDC_GPU_EMULATE=1 the emulated device reports an A100-like device (108 SMs, 1410 MHz,
 * 1215 MHz x 5120-bit memory, sm_80), or what PDC_GPU_EMULATE_PROPS says
 * ("sms=N,clock_mhz=F,mem_clock_mhz=F,bus_bits=N,sm=XY", any subset; PDC_ERR_INVALID_ARG naming a bad
 * key or value): a testing aid, so the choice between targets is testable without a GPU. */
pdc_status gpu_props_query(pdc_context *ctx, gpu_props *out);

#endif
