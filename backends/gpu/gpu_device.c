/*
 * gpu_device.c - the device the gpu backend runs on, in two implementations behind one interface:
 *  - CUDA: device 0 through the driver API (cuda_loader.c), its primary context (retained once per
 *    program, pushed onto the calling thread around every compile, run and destroy and popped again,
 *    so runs may come from any thread and a caller's own current context is left as it was), plain
 *    cuMemAlloc device memory, the plan's PTX loaded with cuModuleLoadDataEx (with an error-log
 *    buffer, so the JIT's message reaches the user), cuLaunchKernel;
 *  - emulated (PDC_GPU_EMULATE=1, a testing aid): "device memory" is host memory and the module is
 *    the same kernels generated in their host flavour (every (block, thread) index in a loop) and
 *    JIT-compiled through backends/llvm. Everything above this file - planning, PTX generation,
 *    arenas, uploads, the launch list, downloads - runs unchanged, so tests check it without a GPU.
 * Error statuses: no driver / no device -> PDC_ERR_NO_DEVICE; PTX the driver cannot take ->
 * PDC_ERR_NO_DEVICE ("driver too old for PTX ISA x.y, needs CUDA a.b", or "arch newer than the
 * device"); out of device memory -> PDC_ERR_OUT_OF_MEMORY naming the bytes; failed launches and
 * copies -> PDC_ERR_INTERNAL with the CUDA error name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/gpu/cuda_api.h"
#include "backends/gpu/gpu.h"

struct gpu_device {
    pdc_context *ctx;
    int emulated;
    char arch[16];
    char name[128];
    const cuda_api *api;     /* the process's driver table (cuda_loader.c); NULL when emulated */
    pdc_CUdevice dev;
    pdc_CUcontext cu;
    int retained;
    int max_grid_x, max_block;
};

typedef void (*host_kernel)(float *act, float *wts, int32_t arg, int32_t grid, int32_t block);

struct gpu_module {
    size_t n;
    pdc_CUmodule mod;
    pdc_CUfunction *fns; /* CUDA */
    void **host;         /* emulated */
};

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

static pdc_status cu_fail(gpu_device *d, pdc_status st, pdc_CUresult r, const char *what)
{
    char e[96];
    return pdc_error(d->ctx, st, "gpu: %s failed: %s", what, cuda_error_text(d->api, r, e, sizeof e));
}

pdc_status gpu_device_open(pdc_context *ctx, gpu_device **out)
{
    *out = NULL;
    gpu_device *d = pdc_calloc(ctx, 1, sizeof *d);
    if (!d) return PDC_ERR_OUT_OF_MEMORY;
    d->ctx = ctx;
    if (env_on("PDC_GPU_EMULATE")) {
        d->emulated = 1;
        snprintf(d->name, sizeof d->name, "emulated device (host JIT, PDC_GPU_EMULATE=1)");
        *out = d;
        return PDC_OK;
    }
    pdc_status st = cuda_api_get(ctx, &d->api);
    if (st) {
        pdc_free(d);
        return st;
    }
    const cuda_api *api = d->api;
    int n = 0, major = 0, minor = 0;
    pdc_CUresult r = api->cuDeviceGetCount(&n);
    if (r != PDC_CUDA_SUCCESS || n < 1) {
        char e[96];
        st = pdc_error(ctx, PDC_ERR_NO_DEVICE, "gpu: the CUDA driver sees no device (%s): check nvidia-smi and "
                       "CUDA_VISIBLE_DEVICES, or use target \"cpu\"",
                       r != PDC_CUDA_SUCCESS ? cuda_error_text(api, r, e, sizeof e) : "0 devices");
    } else if ((r = api->cuDeviceGet(&d->dev, 0)) != PDC_CUDA_SUCCESS ||
               (r = api->cuDeviceGetAttribute(&major, PDC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev)) ||
               (r = api->cuDeviceGetAttribute(&minor, PDC_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev)) ||
               (r = api->cuDeviceGetAttribute(&d->max_grid_x, PDC_CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, d->dev)) ||
               (r = api->cuDeviceGetAttribute(&d->max_block, PDC_CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d->dev))) {
        st = cu_fail(d, PDC_ERR_NO_DEVICE, r, "querying device 0");
    } else if (d->max_block < GPU_BLOCK) {
        st = pdc_error(ctx, PDC_ERR_NO_DEVICE, "gpu: device 0 takes at most %d threads per block; pdc launches %d",
                       d->max_block, GPU_BLOCK);
    } else if ((r = api->cuDevicePrimaryCtxRetain(&d->cu, d->dev)) != PDC_CUDA_SUCCESS) {
        st = cu_fail(d, r == PDC_CUDA_ERROR_OUT_OF_MEMORY ? PDC_ERR_OUT_OF_MEMORY : PDC_ERR_NO_DEVICE, r,
                     "creating the device context (cuDevicePrimaryCtxRetain)");
    } else {
        d->retained = 1;
    }
    if (st) {
        gpu_device_close(d);
        return st;
    }
    if (api->cuDeviceGetName(d->name, (int)sizeof d->name, d->dev) != PDC_CUDA_SUCCESS)
        snprintf(d->name, sizeof d->name, "device 0");
    d->name[sizeof d->name - 1] = 0;
    snprintf(d->arch, sizeof d->arch, "sm_%d%d", major, minor);
    *out = d;
    return PDC_OK;
}

void gpu_device_close(gpu_device *d)
{
    if (!d) return;
    /* the primary context is reset when its last retainer releases it; the driver library stays */
    if (!d->emulated && d->retained) d->api->cuDevicePrimaryCtxRelease(d->dev);
    pdc_free(d);
}

int gpu_device_emulated(const gpu_device *d) { return d->emulated; }
const char *gpu_device_arch(const gpu_device *d) { return d->arch; }
const char *gpu_device_name(const gpu_device *d) { return d->name; }

pdc_status gpu_device_bind(gpu_device *d)
{
    if (d->emulated) return PDC_OK;
    pdc_CUresult r = d->api->cuCtxPushCurrent(d->cu);
    return r == PDC_CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "making the device context current (cuCtxPushCurrent)");
}

void gpu_device_unbind(gpu_device *d)
{
    pdc_CUcontext popped = NULL;
    if (!d->emulated) d->api->cuCtxPopCurrent(&popped);
}

pdc_status gpu_mem_alloc(gpu_device *d, size_t bytes, uint64_t *addr)
{
    *addr = 0;
    if (d->emulated) {
        void *p = pdc_alloc(d->ctx, bytes ? bytes : 1);
        if (!p) {
            pdc_error_prefix(d->ctx, "gpu: device memory (%zu bytes)", bytes);
            return PDC_ERR_OUT_OF_MEMORY;
        }
        *addr = (uint64_t)(uintptr_t)p;
        return PDC_OK;
    }
    pdc_CUdeviceptr p = 0;
    pdc_CUresult r = d->api->cuMemAlloc(&p, bytes ? bytes : 4);
    if (r == PDC_CUDA_ERROR_OUT_OF_MEMORY)
        return pdc_error(d->ctx, PDC_ERR_OUT_OF_MEMORY, "gpu: out of device memory allocating %zu bytes on %s", bytes,
                         d->name);
    if (r != PDC_CUDA_SUCCESS) return cu_fail(d, PDC_ERR_INTERNAL, r, "cuMemAlloc");
    *addr = p;
    return PDC_OK;
}

void gpu_mem_free(gpu_device *d, uint64_t addr)
{
    if (!addr) return;
    if (d->emulated) pdc_free((void *)(uintptr_t)addr);
    else d->api->cuMemFree(addr);
}

pdc_status gpu_mem_upload(gpu_device *d, uint64_t dst, const void *src, size_t bytes)
{
    if (!bytes) return PDC_OK;
    if (d->emulated) {
        memcpy((void *)(uintptr_t)dst, src, bytes);
        return PDC_OK;
    }
    pdc_CUresult r = d->api->cuMemcpyHtoD(dst, src, bytes);
    return r == PDC_CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "copy to the device (cuMemcpyHtoD)");
}

pdc_status gpu_mem_download(gpu_device *d, void *dst, uint64_t src, size_t bytes)
{
    if (!bytes) return PDC_OK;
    if (d->emulated) {
        memcpy(dst, (const void *)(uintptr_t)src, bytes);
        return PDC_OK;
    }
    pdc_CUresult r = d->api->cuMemcpyDtoH(dst, src, bytes);
    return r == PDC_CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "copy from the device (cuMemcpyDtoH)");
}

/* The emulated module: the plan's kernels in their host flavour, JIT'd. */
static pdc_status emit_host(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                            LLVMModuleRef m, const char *prefix)
{
    (void)t;
    return gpu_kgen_module(ctx, arg, 0, c, m, prefix);
}

static pdc_status load_emulated(gpu_device *d, const gpu_plan *p, const char *ptx, gpu_module *mod)
{
    pdc_jit *jit = NULL;
    pdc_status st = pdc_jit_get(d->ctx, &jit);
    if (st) return st;
    /* The PTX text encodes every constant of every kernel (shapes, offsets, taps), so it identifies
     * the host flavour as well: it is the cache key. */
    static const char tag[] = "pdc-gpu-emulated-v1";
    size_t n = strlen(ptx);
    char *key = pdc_alloc(d->ctx, sizeof tag + n);
    const char **syms = pdc_calloc(d->ctx, p->n_kernels ? p->n_kernels : 1, sizeof *syms);
    if (!key || !syms) {
        pdc_free(key);
        pdc_free(syms);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    memcpy(key, tag, sizeof tag);
    memcpy(key + sizeof tag, ptx, n);
    for (size_t i = 0; i < p->n_kernels; i++) syms[i] = p->kernels[i].name;
    pdc_kernel_desc desc = {key, sizeof tag + n, emit_host, (void *)p, p->n_kernels, syms};
    st = pdc_jit_kernel(jit, d->ctx, &desc, mod->host, NULL);
    pdc_free(key);
    pdc_free(syms);
    return st;
}

/* The word after `directive` in the PTX text (".version 7.8", ".target sm_90"), for messages. */
static void ptx_word(const char *ptx, const char *directive, char *buf, size_t cap)
{
    const char *v = strstr(ptx, directive);
    snprintf(buf, cap, "?");
    if (v) sscanf(v + strlen(directive), " %15s", buf);
}

/* The message for a PTX image the driver refused. */
static pdc_status ptx_refused(gpu_device *d, const char *ptx, pdc_CUresult r, const char *log)
{
    char isa[16], target[16], e[96];
    int ver = 0, cc = 0, want = 0;
    ptx_word(ptx, ".version", isa, sizeof isa);
    ptx_word(ptx, ".target", target, sizeof target);
    d->api->cuDriverGetVersion(&ver);
    cuda_error_text(d->api, r, e, sizeof e);
    int need = cuda_driver_for_ptx_isa(isa);
    sscanf(d->arch, "sm_%d", &cc);
    sscanf(target, "sm_%d", &want);
    if (r == PDC_CUDA_ERROR_JIT_COMPILER_NOT_FOUND)
        return pdc_error(d->ctx, PDC_ERR_NO_DEVICE,
                         "gpu: the driver cannot compile PTX (%s): the driver's PTX JIT (libnvidia-ptxjitcompiler) "
                         "is not installed; install the full NVIDIA driver, or use target \"cpu\"", e);
    if (want > cc && cc > 0)
        return pdc_error(d->ctx, PDC_ERR_NO_DEVICE,
                         "gpu: the driver cannot load the PTX (%s): it targets %s but device '%s' is %s; set option "
                         "gpu_arch to auto or at most %s %.300s",
                         e, target, d->name, d->arch, d->arch, log);
    if (r == PDC_CUDA_ERROR_UNSUPPORTED_PTX_VERSION || (need && ver < need))
        return pdc_error(d->ctx, PDC_ERR_NO_DEVICE,
                         "gpu: the driver cannot load the PTX (%s): driver too old for PTX ISA %s (needs CUDA %d.%d, "
                         "the driver is CUDA %d.%d); update the NVIDIA driver, or set option gpu_arch lower than %s "
                         "%.300s",
                         e, isa, need / 1000, need % 1000 / 10, ver / 1000, ver % 1000 / 10, target, log);
    return pdc_error(d->ctx, PDC_ERR_NO_DEVICE, "gpu: the driver cannot load the PTX (%s) for %s (%s, driver CUDA %d.%d): "
                     "%.300s", e, d->name, d->arch, ver / 1000, ver % 1000 / 10, log[0] ? log : "no JIT log");
}

pdc_status gpu_module_load(gpu_device *d, const gpu_plan *p, const char *ptx, gpu_module **out)
{
    *out = NULL;
    gpu_module *mod = pdc_calloc(d->ctx, 1, sizeof *mod);
    if (!mod) return PDC_ERR_OUT_OF_MEMORY;
    mod->n = p->n_kernels;
    size_t n = mod->n ? mod->n : 1;
    pdc_status st = PDC_OK;
    if (d->emulated) {
        mod->host = pdc_calloc(d->ctx, n, sizeof *mod->host);
        st = mod->host ? load_emulated(d, p, ptx, mod) : PDC_ERR_OUT_OF_MEMORY;
    } else {
        mod->fns = pdc_calloc(d->ctx, n, sizeof *mod->fns);
        /* the JIT writes its error log (NUL-terminated) here; the size option's value is the number
         * itself cast to a pointer, as cuda.h documents for scalar options */
        char log[4096] = "";
        unsigned int opts[2] = {PDC_CU_JIT_ERROR_LOG_BUFFER, PDC_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
        pdc_CUresult r = mod->fns ? d->api->cuModuleLoadDataEx(&mod->mod, ptx, 2, opts, vals) : PDC_CUDA_SUCCESS;
        log[sizeof log - 1] = 0;
        if (!mod->fns) {
            st = PDC_ERR_OUT_OF_MEMORY;
        } else if (r == PDC_CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == PDC_CUDA_ERROR_NO_BINARY_FOR_GPU ||
                   r == PDC_CUDA_ERROR_INVALID_PTX || r == PDC_CUDA_ERROR_INVALID_IMAGE ||
                   r == PDC_CUDA_ERROR_JIT_COMPILER_NOT_FOUND) {
            mod->mod = NULL;
            st = ptx_refused(d, ptx, r, log);
        } else if (r == PDC_CUDA_ERROR_OUT_OF_MEMORY) {
            mod->mod = NULL;
            st = pdc_error(d->ctx, PDC_ERR_OUT_OF_MEMORY, "gpu: out of device memory loading the module (%zu bytes of PTX)",
                           strlen(ptx));
        } else if (r != PDC_CUDA_SUCCESS) {
            char e[96];
            mod->mod = NULL;
            st = pdc_error(d->ctx, PDC_ERR_INTERNAL, "gpu: cuModuleLoadDataEx failed: %s %.300s",
                           cuda_error_text(d->api, r, e, sizeof e), log);
        }
        for (size_t i = 0; i < mod->n && !st; i++)
            if ((r = d->api->cuModuleGetFunction(&mod->fns[i], mod->mod, p->kernels[i].name)) != PDC_CUDA_SUCCESS)
                st = cu_fail(d, PDC_ERR_INTERNAL, r, p->kernels[i].name);
    }
    if (st) {
        gpu_module_unload(d, mod);
        return st;
    }
    *out = mod;
    return PDC_OK;
}

void gpu_module_unload(gpu_device *d, gpu_module *mod)
{
    if (!mod) return;
    if (mod->mod) d->api->cuModuleUnload(mod->mod);
    pdc_free(mod->fns);
    pdc_free(mod->host); /* host code belongs to the context's JIT session */
    pdc_free(mod);
}

pdc_status gpu_launch_kernel(gpu_device *d, gpu_module *mod, const gpu_plan *p, uint32_t k, uint64_t act, uint64_t wts,
                             int32_t arg)
{
    const gpu_kernel *K = &p->kernels[k];
    if (K->total <= 0) return PDC_OK;
    int64_t grid = (K->total + GPU_BLOCK - 1) / GPU_BLOCK;
    /* gridDim.x is at most 2^31 - 1 on every SM pdc targets (the device's own limit when known) */
    int64_t max_grid = !d->emulated && d->max_grid_x > 0 ? d->max_grid_x : INT32_MAX;
    if (grid > max_grid)
        return pdc_error(d->ctx, PDC_ERR_UNSUPPORTED, "gpu: kernel %s needs %lld blocks of %d threads (at most %lld)",
                         K->name, (long long)grid, GPU_BLOCK, (long long)max_grid);
    if (d->emulated) {
        ((host_kernel)mod->host[k])((float *)(uintptr_t)act, (float *)(uintptr_t)wts, arg, (int32_t)grid, GPU_BLOCK);
        return PDC_OK;
    }
    /* kernelParams: one pointer per PTX parameter, to a value of exactly its size (.u64, .u64, .u32) */
    pdc_CUdeviceptr a = act, w = wts;
    int32_t a3 = arg;
    void *params[3] = {&a, &w, &a3};
    pdc_CUresult r = d->api->cuLaunchKernel(mod->fns[k], (unsigned)grid, 1, 1, GPU_BLOCK, 1, 1, 0, NULL, params, NULL);
    return r == PDC_CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "kernel launch");
}

pdc_status gpu_device_sync(gpu_device *d)
{
    if (d->emulated) return PDC_OK;
    pdc_CUresult r = d->api->cuCtxSynchronize();
    return r == PDC_CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "running the kernels (cuCtxSynchronize)");
}
