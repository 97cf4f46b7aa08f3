/*
 * cuda_loader.c - the CUDA driver reached at run time with dlopen, so libpdc has no link-time CUDA
 * dependency and builds and runs on machines without a GPU; there the gpu target answers
 * PDC_ERR_NO_DEVICE. The library is PDC_CUDA_LIBRARY when set (tests point it at the toolkit's
 * stub libcuda.so, whose cuInit fails with CUDA_ERROR_STUB_LIBRARY), else libcuda.so.1.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/context.h"
#include "backends/gpu/cuda_api.h"

const char *cuda_error_text(const cuda_api *api, CUresult e, char *buf, size_t cap)
{
    const char *name = NULL;
    if (!api->cuGetErrorName || api->cuGetErrorName(e, &name) != CUDA_SUCCESS || !name) name = "CUDA error";
    snprintf(buf, cap, "%s (%d)", name, e);
    return buf;
}

void cuda_api_unload(cuda_api *api)
{
    if (api->lib) dlclose(api->lib);
    memset(api, 0, sizeof *api);
}

pdc_status cuda_api_load(const pdc_context *ctx, cuda_api *api)
{
    memset(api, 0, sizeof *api);
    const char *path = getenv("PDC_CUDA_LIBRARY");
    if (!path || !*path) path = "libcuda.so.1";
    api->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api->lib) {
        const char *why = dlerror();
        return pdc_error(ctx, PDC_ERR_NO_DEVICE,
                         "gpu: cannot load the CUDA driver library '%s' (%s): install the NVIDIA driver, or set "
                         "PDC_CUDA_LIBRARY to its libcuda.so; use target \"cpu\" meanwhile",
                         path, why ? why : "not found");
    }
    struct {
        const char *sym;
        void **slot;
    } syms[] = {
#define S(field, name) {name, (void **)&api->field}
        S(cuInit, "cuInit"), S(cuDriverGetVersion, "cuDriverGetVersion"), S(cuGetErrorName, "cuGetErrorName"),
        S(cuGetErrorString, "cuGetErrorString"), S(cuDeviceGetCount, "cuDeviceGetCount"),
        S(cuDeviceGet, "cuDeviceGet"), S(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
        S(cuDeviceGetName, "cuDeviceGetName"), S(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
        S(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"), S(cuCtxSetCurrent, "cuCtxSetCurrent"),
        S(cuCtxSynchronize, "cuCtxSynchronize"), S(cuMemAlloc, "cuMemAlloc_v2"), S(cuMemFree, "cuMemFree_v2"),
        S(cuMemcpyHtoD, "cuMemcpyHtoD_v2"), S(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
        S(cuModuleLoadDataEx, "cuModuleLoadDataEx"), S(cuModuleUnload, "cuModuleUnload"),
        S(cuModuleGetFunction, "cuModuleGetFunction"), S(cuLaunchKernel, "cuLaunchKernel"),
#undef S
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        *syms[i].slot = dlsym(api->lib, syms[i].sym);
        if (!*syms[i].slot) {
            pdc_status st = pdc_error(ctx, PDC_ERR_NO_DEVICE,
                                      "gpu: the CUDA driver library '%s' lacks %s: the driver is too old (CUDA 11 "
                                      "or newer is needed)",
                                      path, syms[i].sym);
            cuda_api_unload(api);
            return st;
        }
    }
    CUresult r = api->cuInit(0);
    if (r != CUDA_SUCCESS) {
        char e[96];
        cuda_error_text(api, r, e, sizeof e);
        pdc_status st = pdc_error(ctx, PDC_ERR_NO_DEVICE,
                                  "gpu: cuInit failed with %s (library '%s')%s", e, path,
                                  r == CUDA_ERROR_STUB_LIBRARY
                                      ? ": that is the toolkit's stub library, not a driver - unset PDC_CUDA_LIBRARY "
                                        "or point it at the real libcuda.so.1"
                                      : ": check that the NVIDIA driver is loaded (nvidia-smi) and a GPU is visible");
        cuda_api_unload(api);
        return st;
    }
    return PDC_OK;
}
