/*
 * cuda_loader.c - the CUDA driver reached at run time with dlopen, so libpdc has no link-time CUDA
 * dependency and builds and runs on machines without a GPU; there the gpu target answers
 * PDC_ERR_NO_DEVICE. The library is PDC_CUDA_LIBRARY when set (tests point it at the toolkit's
 * stub libcuda.so, whose cuInit fails with CUDA_ERROR_STUB_LIBRARY), else libcuda.so.1.
 *
 * One table per process: a failed load is undone (dlclose) and retried by the next compile; a
 * successful one is kept until exit, because libcuda starts threads and registers exit handlers
 * that must not outlive its code (dlclose'ing an initialised driver crashes at exit or in the
 * driver's threads), and cuInit is per process anyway.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/context.h"
#include "backends/gpu/cuda_api.h"

/* cuda_api's fields in order, by the symbol cuda.h (CUDA 11-13) binds each name to. */
const char *const cuda_api_symbols[] = {
    "cuInit", "cuDriverGetVersion", "cuGetErrorName", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetAttribute",
    "cuDeviceGetName", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2", "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2", "cuCtxSynchronize", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2",
    "cuModuleLoadDataEx", "cuModuleUnload", "cuModuleGetFunction", "cuLaunchKernel", NULL};

static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_api api_loaded;   /* valid once api_loaded.lib is set; never changed afterwards */

/* Names for the codes pdc reacts to, for drivers (and the stub) whose cuGetErrorName fails. */
static const char *own_name(pdc_CUresult e)
{
    switch (e) {
    case PDC_CUDA_SUCCESS: return "CUDA_SUCCESS";
    case PDC_CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case PDC_CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case PDC_CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case PDC_CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case PDC_CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case PDC_CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case PDC_CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case PDC_CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case PDC_CUDA_ERROR_NO_BINARY_FOR_GPU: return "CUDA_ERROR_NO_BINARY_FOR_GPU";
    case PDC_CUDA_ERROR_INVALID_PTX: return "CUDA_ERROR_INVALID_PTX";
    case PDC_CUDA_ERROR_JIT_COMPILER_NOT_FOUND: return "CUDA_ERROR_JIT_COMPILER_NOT_FOUND";
    case PDC_CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
    case PDC_CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case PDC_CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case PDC_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
    case PDC_CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case PDC_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
    }
    return "CUDA error";
}

const char *cuda_error_text(const cuda_api *api, pdc_CUresult e, char *buf, size_t cap)
{
    const char *name = NULL;
    if (!api || !api->cuGetErrorName || api->cuGetErrorName(e, &name) != PDC_CUDA_SUCCESS || !name) name = own_name(e);
    snprintf(buf, cap, "%s (%u)", name, e);
    return buf;
}

int cuda_driver_for_ptx_isa(const char *isa)
{
    /* PTX ISA release history (PTX ISA manual): 6.3 came with CUDA 10.0, 6.4 10.1, 6.5 10.2; 7.x with
     * 11.x; 8.0-8.4 with 12.0-12.4, 8.5 with 12.5 and 12.6; LLVM 19 emits 6.3 (sm_75), 7.0 (sm_80),
     * 7.1 (sm_86), 7.8 (sm_89, sm_90). */
    int major = 0, minor = 0;
    if (!isa || sscanf(isa, "%d.%d", &major, &minor) != 2 || minor < 0 || minor > 9) return 0;
    if (major == 6 && minor >= 3) return 10000 + (minor - 3) * 10;
    if (major == 7) return 11000 + minor * 10;
    if (major == 8) return minor <= 5 ? 12000 + minor * 10 : 12000 + (minor + 1) * 10;
    if (major == 9) return 13000 + minor * 10;
    return 0;
}

/* Loads, resolves and initialises into *api; on failure nothing stays loaded. */
static pdc_status load(const pdc_context *ctx, cuda_api *api)
{
    memset(api, 0, sizeof *api);
    const char *path = getenv("PDC_CUDA_LIBRARY");
    if (!path || !*path) path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        return pdc_error(ctx, PDC_ERR_NO_DEVICE,
                         "gpu: cannot load the CUDA driver library '%s' (%s): install the NVIDIA driver, or set "
                         "PDC_CUDA_LIBRARY to its libcuda.so; use target \"cpu\" meanwhile",
                         path, why ? why : "not found");
    }
    /* the fields after lib, in cuda_api_symbols' order; each is a function pointer */
    char *slot = (char *)api + offsetof(cuda_api, cuInit);
    size_t n = 0;
    for (; cuda_api_symbols[n]; n++, slot += sizeof(pdc_cuInit_fn)) {
        void *sym = dlsym(lib, cuda_api_symbols[n]);
        if (!sym) {
            pdc_status st = pdc_error(ctx, PDC_ERR_NO_DEVICE,
                                      "gpu: the CUDA driver library '%s' lacks %s: the driver is too old (CUDA 11.0 "
                                      "or newer, driver 450 or newer, is needed)",
                                      path, cuda_api_symbols[n]);
            dlclose(lib);
            memset(api, 0, sizeof *api);
            return st;
        }
        memcpy(slot, &sym, sizeof sym);
    }
    api->lib = lib;
    pdc_CUresult r = api->cuInit(0);
    if (r != PDC_CUDA_SUCCESS) {
        char e[96];
        cuda_error_text(api, r, e, sizeof e);
        pdc_status st = pdc_error(ctx, PDC_ERR_NO_DEVICE,
                                  "gpu: cuInit failed with %s (library '%s')%s", e, path,
                                  r == PDC_CUDA_ERROR_STUB_LIBRARY
                                      ? ": that is the toolkit's stub library, not a driver - unset PDC_CUDA_LIBRARY "
                                        "or point it at the real libcuda.so.1"
                                      : ": check that the NVIDIA driver is loaded (nvidia-smi) and a GPU is visible");
        dlclose(lib);
        memset(api, 0, sizeof *api);
        return st;
    }
    return PDC_OK;
}

pdc_status cuda_api_get(const pdc_context *ctx, const cuda_api **api)
{
    /* the slot arithmetic in load() relies on the layout: function pointers after lib, one per symbol */
    _Static_assert(sizeof(cuda_api) == sizeof(void *) + 20 * sizeof(pdc_cuInit_fn), "cuda_api fields");
    _Static_assert(sizeof cuda_api_symbols / sizeof cuda_api_symbols[0] == 21, "cuda_api_symbols");
    *api = NULL;
    pthread_mutex_lock(&api_lock);
    pdc_status st = api_loaded.lib ? PDC_OK : load(ctx, &api_loaded);
    pthread_mutex_unlock(&api_lock);
    if (!st) *api = &api_loaded;
    return st;
}
