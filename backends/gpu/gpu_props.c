/*
 * gpu_props.c - device 0's attributes for the latency model (gpu_props.h): through the CUDA driver
 * (cuda_loader.c), or the emulated device's stated ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/gpu/cuda_api.h"
#include "backends/gpu/gpu_props.h"

int gpu_props_fp32_lanes(const gpu_props *p)
{
    /* CUDA C programming guide, "arithmetic instructions": 64 FP32 results per clock per SM on
     * 7.x and 8.0, 128 on 8.6, 8.7, 8.9 and 9.0 */
    if (p->cc_major >= 9 || (p->cc_major == 8 && p->cc_minor >= 6)) return 128;
    return 64;
}

double gpu_props_peak_flops(const gpu_props *p)
{
    return 2.0 * (double)p->sms * (double)gpu_props_fp32_lanes(p) * p->clock_khz * 1e3;
}

double gpu_props_bandwidth(const gpu_props *p) { return 2.0 * p->mem_clock_khz * 1e3 * (double)p->bus_bits / 8.0; }

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

/* "key=value,..." of PDC_GPU_EMULATE_PROPS over the A100-like defaults. */
static pdc_status emulated_props(pdc_context *ctx, gpu_props *p)
{
    *p = (gpu_props){.emulated = 1, .sms = 108, .cc_major = 8, .cc_minor = 0, .clock_khz = 1410e3,
                     .mem_clock_khz = 1215e3, .bus_bits = 5120};
    snprintf(p->name, sizeof p->name, "emulated device (PDC_GPU_EMULATE=1)");
    const char *s = getenv("PDC_GPU_EMULATE_PROPS");
    while (s && *s) {
        char key[32];
        double v = 0;
        int used = 0;
        if (sscanf(s, "%31[a-z_]=%lf%n", key, &v, &used) != 2 || v <= 0 || v > 1e7)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                             "PDC_GPU_EMULATE_PROPS: expected key=positive number at \"%s\" (keys: sms, clock_mhz, "
                             "mem_clock_mhz, bus_bits, sm)", s);
        if (!strcmp(key, "sms")) p->sms = (int)v;
        else if (!strcmp(key, "clock_mhz")) p->clock_khz = v * 1e3;
        else if (!strcmp(key, "mem_clock_mhz")) p->mem_clock_khz = v * 1e3;
        else if (!strcmp(key, "bus_bits")) p->bus_bits = (int)v;
        else if (!strcmp(key, "sm")) {
            p->cc_major = (int)v / 10;
            p->cc_minor = (int)v % 10;
        } else
            return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                             "PDC_GPU_EMULATE_PROPS: unknown key '%s' (sms, clock_mhz, mem_clock_mhz, bus_bits, sm)", key);
        s += used;
        if (*s == ',') s++;
    }
    if (p->sms < 1 || p->bus_bits < 1)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "PDC_GPU_EMULATE_PROPS: sms and bus_bits must be at least 1");
    return PDC_OK;
}

pdc_status gpu_props_query(pdc_context *ctx, gpu_props *out)
{
    memset(out, 0, sizeof *out);
    if (env_on("PDC_GPU_EMULATE")) return emulated_props(ctx, out);
    const cuda_api *api = NULL;
    pdc_status st = cuda_api_get(ctx, &api);
    if (st) return st;
    int n = 0, clock = 0, mem_clock = 0;
    pdc_CUdevice dev = 0;
    pdc_CUresult r = api->cuDeviceGetCount(&n);
    if (r == PDC_CUDA_SUCCESS && n < 1) return pdc_error(ctx, PDC_ERR_NO_DEVICE, "gpu: the CUDA driver sees no device");
    if (r || (r = api->cuDeviceGet(&dev, 0)) ||
        (r = api->cuDeviceGetAttribute(&out->sms, PDC_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)) ||
        (r = api->cuDeviceGetAttribute(&clock, PDC_CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev)) ||
        (r = api->cuDeviceGetAttribute(&mem_clock, PDC_CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev)) ||
        (r = api->cuDeviceGetAttribute(&out->bus_bits, PDC_CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, dev)) ||
        (r = api->cuDeviceGetAttribute(&out->cc_major, PDC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)) ||
        (r = api->cuDeviceGetAttribute(&out->cc_minor, PDC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))) {
        char e[96];
        return pdc_error(ctx, PDC_ERR_NO_DEVICE, "gpu: querying device 0's attributes failed: %s",
                         cuda_error_text(api, r, e, sizeof e));
    }
    out->clock_khz = clock;
    out->mem_clock_khz = mem_clock;
    if (api->cuDeviceGetName(out->name, (int)sizeof out->name, dev) != PDC_CUDA_SUCCESS)
        snprintf(out->name, sizeof out->name, "device 0");
    out->name[sizeof out->name - 1] = 0;
    if (out->sms < 1 || clock < 1 || mem_clock < 1 || out->bus_bits < 1)
        return pdc_error(ctx, PDC_ERR_NO_DEVICE,
                         "gpu: device 0 ('%s') reports no SM count, clock or memory bus (%d SMs, %d kHz, %d kHz x %d bits)",
                         out->name, out->sms, clock, mem_clock, out->bus_bits);
    return PDC_OK;
}
