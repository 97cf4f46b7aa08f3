/*
 * cuda_abi.c - compile-time check of backends/gpu/cuda_api.h against the toolkit's cuda.h: every
 * type, every entry point's prototype (as the symbol cuda_loader.c dlsym's: cuda.h #defines
 * cuMemAlloc to cuMemAlloc_v2 and so on, so &cuMemAlloc here is the _v2 function) and every enum
 * value pdc uses (all _Static_assert: a mismatch does not compile), then at run time that the
 * symbol names cuda_loader.c dlsym's (cuda_api_symbols) are the ones cuda.h binds each name to.
 * Built and run by `make test-gpu-abi` (part of make test) when /usr/local/cuda/include/cuda.h
 * exists; test_gpu checks that the stub libcuda.so exports each of those symbols.
 */
#include <stdio.h>
#include <string.h>

#include "backends/gpu/cuda_api.h"

#include <cuda.h>

#if CUDA_VERSION < 11000
#error "cuda.h older than CUDA 11: the _v2 names checked here differ"
#endif

#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " differs from " #b)
#define FN(name) SAME(__typeof__(&name), pdc_##name##_fn)
#define VAL(name) _Static_assert((long long)name == (long long)PDC_##name, #name " differs")

SAME(pdc_CUresult, CUresult);
SAME(pdc_CUdevice, CUdevice);
SAME(pdc_CUdeviceptr, CUdeviceptr);
SAME(pdc_CUcontext, CUcontext);
SAME(pdc_CUmodule, CUmodule);
SAME(pdc_CUfunction, CUfunction);
SAME(pdc_CUstream, CUstream);
_Static_assert(sizeof(pdc_CUdeviceptr) == 8, "64-bit device pointers");

FN(cuInit);
FN(cuDriverGetVersion);
FN(cuGetErrorName);
FN(cuDeviceGetCount);
FN(cuDeviceGet);
FN(cuDeviceGetAttribute);
FN(cuDeviceGetName);
FN(cuDevicePrimaryCtxRetain);
FN(cuDevicePrimaryCtxRelease);
FN(cuCtxPushCurrent);
FN(cuCtxPopCurrent);
FN(cuCtxSynchronize);
FN(cuMemAlloc);
FN(cuMemFree);
FN(cuMemcpyHtoD);
FN(cuMemcpyDtoH);
FN(cuModuleLoadDataEx);
FN(cuModuleUnload);
FN(cuModuleGetFunction);
FN(cuLaunchKernel);

/* the versioned symbols cuda_loader.c resolves are the ones cuda.h binds the names to */
#define STR2(x) #x
#define STR(x) STR2(x)
static const char *const bound_to[] = {
    STR(cuInit), STR(cuDriverGetVersion), STR(cuGetErrorName), STR(cuDeviceGetCount), STR(cuDeviceGet),
    STR(cuDeviceGetAttribute), STR(cuDeviceGetName), STR(cuDevicePrimaryCtxRetain), STR(cuDevicePrimaryCtxRelease),
    STR(cuCtxPushCurrent), STR(cuCtxPopCurrent), STR(cuCtxSynchronize), STR(cuMemAlloc), STR(cuMemFree),
    STR(cuMemcpyHtoD), STR(cuMemcpyDtoH), STR(cuModuleLoadDataEx), STR(cuModuleUnload), STR(cuModuleGetFunction),
    STR(cuLaunchKernel)};
_Static_assert(sizeof bound_to / sizeof bound_to[0] == 20, "one per cuda_api field");

VAL(CUDA_SUCCESS);
VAL(CUDA_ERROR_INVALID_VALUE);
VAL(CUDA_ERROR_OUT_OF_MEMORY);
VAL(CUDA_ERROR_NOT_INITIALIZED);
VAL(CUDA_ERROR_STUB_LIBRARY);
VAL(CUDA_ERROR_NO_DEVICE);
VAL(CUDA_ERROR_INVALID_DEVICE);
VAL(CUDA_ERROR_INVALID_IMAGE);
VAL(CUDA_ERROR_INVALID_CONTEXT);
VAL(CUDA_ERROR_NO_BINARY_FOR_GPU);
VAL(CUDA_ERROR_INVALID_PTX);
VAL(CUDA_ERROR_JIT_COMPILER_NOT_FOUND);
VAL(CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
VAL(CUDA_ERROR_NOT_FOUND);
VAL(CUDA_ERROR_ILLEGAL_ADDRESS);
VAL(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
VAL(CUDA_ERROR_LAUNCH_FAILED);
VAL(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE);
VAL(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
VAL(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
VAL(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
VAL(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
VAL(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
VAL(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
VAL(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
VAL(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
VAL(CU_JIT_ERROR_LOG_BUFFER);
VAL(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);

int main(void)
{
    size_t n = 0, bad = 0;
    for (; cuda_api_symbols[n]; n++)
        if (n >= sizeof bound_to / sizeof bound_to[0] || strcmp(cuda_api_symbols[n], bound_to[n])) {
            fprintf(stderr, "cuda_abi: pdc resolves %s, cuda.h binds field %zu to %s\n", cuda_api_symbols[n], n,
                    n < sizeof bound_to / sizeof bound_to[0] ? bound_to[n] : "(nothing)");
            bad++;
        }
    if (n != sizeof bound_to / sizeof bound_to[0]) bad++;
    printf("cuda abi (cuda.h %d.%d): %zu types/prototypes/values checked at compile time, %zu symbol names: %s\n",
           CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, (size_t)7 + 20 + 28, n, bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
