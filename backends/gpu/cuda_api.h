/*
 * cuda_api.h - the few CUDA driver API declarations pdc uses, written here so that building pdc
 * needs no cuda.h; the functions are reached through dlopen/dlsym at run time (cuda_loader.c),
 * never linked. Values are those of the CUDA driver ABI (cuda.h, CUDA 11-13).
 */
#ifndef PDC_BACKENDS_GPU_CUDA_API_H
#define PDC_BACKENDS_GPU_CUDA_API_H

#include <stddef.h>

#include "lib/context.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_STUB_LIBRARY = 34,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
};
enum { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76 };
enum { CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6 };

/* The driver entry points, by their versioned symbol names (a plain "cuMemAlloc" is the legacy
 * 32-bit ABI). */
typedef struct cuda_api {
    void *lib;
    CUresult (*cuInit)(unsigned flags);
    CUresult (*cuDriverGetVersion)(int *version);
    CUresult (*cuGetErrorName)(CUresult e, const char **s);
    CUresult (*cuGetErrorString)(CUresult e, const char **s);
    CUresult (*cuDeviceGetCount)(int *n);
    CUresult (*cuDeviceGet)(CUdevice *d, int ordinal);
    CUresult (*cuDeviceGetAttribute)(int *v, int attrib, CUdevice d);
    CUresult (*cuDeviceGetName)(char *name, int len, CUdevice d);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *c, CUdevice d);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice d);                     /* _v2 */
    CUresult (*cuCtxSetCurrent)(CUcontext c);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t bytes);                    /* _v2 */
    CUresult (*cuMemFree)(CUdeviceptr p);                                    /* _v2 */
    CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes); /* _v2 */
    CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);      /* _v2 */
    CUresult (*cuModuleLoadDataEx)(CUmodule *m, const void *image, unsigned n, int *options, void **values);
    CUresult (*cuModuleUnload)(CUmodule m);
    CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
    CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream s, void **params, void **extra);
} cuda_api;

/*
 * Loads the driver library (PDC_CUDA_LIBRARY, else libcuda.so.1), resolves every entry point and
 * calls cuInit(0). PDC_ERR_NO_DEVICE with a message naming the library, the missing symbol, or
 * cuInit's error (name and code) and what to do. On failure nothing stays loaded.
 */
pdc_status cuda_api_load(const pdc_context *ctx, cuda_api *api);
void cuda_api_unload(cuda_api *api);
/* "CUDA_ERROR_OUT_OF_MEMORY (2)" into buf. */
const char *cuda_error_text(const cuda_api *api, CUresult e, char *buf, size_t cap);

#endif
