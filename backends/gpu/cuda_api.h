/*
 * cuda_api.h - the few CUDA driver API declarations pdc uses, written here so that building pdc
 * needs no cuda.h; the functions are reached through dlopen/dlsym at run time (cuda_loader.c),
 * never linked. Values and prototypes are those of the CUDA driver ABI (cuda.h, CUDA 11-13).
 *
 * The names carry a pdc_ / PDC_ prefix so that this header and cuda.h can be included together:
 * test/gpu/cuda_abi.c does, and checks every type, prototype and value here against cuda.h's
 * (make test, where /usr/local/cuda/include/cuda.h exists). Enumerated types are unsigned int, the
 * type gcc and clang give cuda.h's enums (no negative values), so the function types match exactly.
 */
#ifndef PDC_BACKENDS_GPU_CUDA_API_H
#define PDC_BACKENDS_GPU_CUDA_API_H

#include <stddef.h>

#include "lib/core/context.h"

typedef unsigned int pdc_CUresult;              /* enum cudaError_enum */
typedef int pdc_CUdevice;
typedef unsigned long long pdc_CUdeviceptr;     /* CUdeviceptr_v2: 64-bit on LP64 */
typedef struct CUctx_st *pdc_CUcontext;         /* the same opaque struct tags as cuda.h */
typedef struct CUmod_st *pdc_CUmodule;
typedef struct CUfunc_st *pdc_CUfunction;
typedef struct CUstream_st *pdc_CUstream;

enum {
    PDC_CUDA_SUCCESS = 0,
    PDC_CUDA_ERROR_INVALID_VALUE = 1,
    PDC_CUDA_ERROR_OUT_OF_MEMORY = 2,
    PDC_CUDA_ERROR_NOT_INITIALIZED = 3,
    PDC_CUDA_ERROR_STUB_LIBRARY = 34,
    PDC_CUDA_ERROR_NO_DEVICE = 100,
    PDC_CUDA_ERROR_INVALID_DEVICE = 101,
    PDC_CUDA_ERROR_INVALID_IMAGE = 200,
    PDC_CUDA_ERROR_INVALID_CONTEXT = 201,
    PDC_CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    PDC_CUDA_ERROR_INVALID_PTX = 218,
    PDC_CUDA_ERROR_JIT_COMPILER_NOT_FOUND = 221,
    PDC_CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    PDC_CUDA_ERROR_NOT_FOUND = 500,
    PDC_CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    PDC_CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    PDC_CUDA_ERROR_LAUNCH_FAILED = 719,
    PDC_CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE = 804
};
enum {
    PDC_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    PDC_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
    PDC_CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,               /* kHz */
    PDC_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    PDC_CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,        /* kHz */
    PDC_CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,  /* bits */
    PDC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    PDC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
};
enum { PDC_CU_JIT_ERROR_LOG_BUFFER = 5, PDC_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

/* The entry points' types, one per symbol (test/gpu/cuda_abi.c compares each with cuda.h's). */
typedef pdc_CUresult (*pdc_cuInit_fn)(unsigned int flags);
typedef pdc_CUresult (*pdc_cuDriverGetVersion_fn)(int *version);
typedef pdc_CUresult (*pdc_cuGetErrorName_fn)(pdc_CUresult e, const char **s);
typedef pdc_CUresult (*pdc_cuDeviceGetCount_fn)(int *n);
typedef pdc_CUresult (*pdc_cuDeviceGet_fn)(pdc_CUdevice *d, int ordinal);
typedef pdc_CUresult (*pdc_cuDeviceGetAttribute_fn)(int *v, unsigned int attrib, pdc_CUdevice d);
typedef pdc_CUresult (*pdc_cuDeviceGetName_fn)(char *name, int len, pdc_CUdevice d);
typedef pdc_CUresult (*pdc_cuDevicePrimaryCtxRetain_fn)(pdc_CUcontext *c, pdc_CUdevice d);
typedef pdc_CUresult (*pdc_cuDevicePrimaryCtxRelease_fn)(pdc_CUdevice d);
typedef pdc_CUresult (*pdc_cuCtxPushCurrent_fn)(pdc_CUcontext c);
typedef pdc_CUresult (*pdc_cuCtxPopCurrent_fn)(pdc_CUcontext *c);
typedef pdc_CUresult (*pdc_cuCtxSynchronize_fn)(void);
typedef pdc_CUresult (*pdc_cuMemAlloc_fn)(pdc_CUdeviceptr *p, size_t bytes);
typedef pdc_CUresult (*pdc_cuMemFree_fn)(pdc_CUdeviceptr p);
typedef pdc_CUresult (*pdc_cuMemcpyHtoD_fn)(pdc_CUdeviceptr dst, const void *src, size_t bytes);
typedef pdc_CUresult (*pdc_cuMemcpyDtoH_fn)(void *dst, pdc_CUdeviceptr src, size_t bytes);
typedef pdc_CUresult (*pdc_cuModuleLoadDataEx_fn)(pdc_CUmodule *m, const void *image, unsigned int n,
                                                  unsigned int *options, void **values);
typedef pdc_CUresult (*pdc_cuModuleUnload_fn)(pdc_CUmodule m);
typedef pdc_CUresult (*pdc_cuModuleGetFunction_fn)(pdc_CUfunction *f, pdc_CUmodule m, const char *name);
typedef pdc_CUresult (*pdc_cuLaunchKernel_fn)(pdc_CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                              unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
                                              pdc_CUstream s, void **params, void **extra);

/* The driver entry points. Each field is resolved from the symbol cuda.h maps its name to (without
 * per-thread default stream): cuMemAlloc -> cuMemAlloc_v2, cuCtxPushCurrent -> cuCtxPushCurrent_v2,
 * ...; the plain "cuMemAlloc" is the legacy 32-bit ABI. The list is cuda_api_symbols. */
typedef struct cuda_api {
    void *lib;
    pdc_cuInit_fn cuInit;
    pdc_cuDriverGetVersion_fn cuDriverGetVersion;
    pdc_cuGetErrorName_fn cuGetErrorName;
    pdc_cuDeviceGetCount_fn cuDeviceGetCount;
    pdc_cuDeviceGet_fn cuDeviceGet;
    pdc_cuDeviceGetAttribute_fn cuDeviceGetAttribute;
    pdc_cuDeviceGetName_fn cuDeviceGetName;
    pdc_cuDevicePrimaryCtxRetain_fn cuDevicePrimaryCtxRetain;
    pdc_cuDevicePrimaryCtxRelease_fn cuDevicePrimaryCtxRelease;   /* _v2 */
    pdc_cuCtxPushCurrent_fn cuCtxPushCurrent;                     /* _v2 */
    pdc_cuCtxPopCurrent_fn cuCtxPopCurrent;                       /* _v2 */
    pdc_cuCtxSynchronize_fn cuCtxSynchronize;
    pdc_cuMemAlloc_fn cuMemAlloc;                                 /* _v2 */
    pdc_cuMemFree_fn cuMemFree;                                   /* _v2 */
    pdc_cuMemcpyHtoD_fn cuMemcpyHtoD;                             /* _v2 */
    pdc_cuMemcpyDtoH_fn cuMemcpyDtoH;                             /* _v2 */
    pdc_cuModuleLoadDataEx_fn cuModuleLoadDataEx;
    pdc_cuModuleUnload_fn cuModuleUnload;
    pdc_cuModuleGetFunction_fn cuModuleGetFunction;
    pdc_cuLaunchKernel_fn cuLaunchKernel;
} cuda_api;

/* The symbols resolved, in cuda_api's field order, NULL-terminated. */
extern const char *const cuda_api_symbols[];

/*
 * The driver, loaded once per process: the library (PDC_CUDA_LIBRARY, else libcuda.so.1), every
 * entry point, then cuInit(0). PDC_ERR_NO_DEVICE with a message naming the library, the missing
 * symbol, or cuInit's error (name and code) and what to do; on failure the library is dlclose'd
 * again and the next call retries. After a successful cuInit the library stays loaded until the
 * process exits (the driver's threads and exit handlers live in it: unloading it is unsafe), and
 * later calls return the same table without looking at PDC_CUDA_LIBRARY again.
 */
pdc_status cuda_api_get(const pdc_context *ctx, const cuda_api **api);
/* "CUDA_ERROR_OUT_OF_MEMORY (2)" into buf (api may be NULL: pdc's own names for the codes above). */
const char *cuda_error_text(const cuda_api *api, pdc_CUresult e, char *buf, size_t cap);
/* The lowest CUDA driver version (1000 * major + 10 * minor, as cuDriverGetVersion) that loads
 * PTX of ISA "major.minor", or 0 when unknown. */
int cuda_driver_for_ptx_isa(const char *isa);

#endif
