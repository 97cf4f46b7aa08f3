/*
 * gpu_device.c - the device the gpu backend runs on, in two implementations behind one interface:
 *  - CUDA: device 0 through the driver API (cuda_loader.c), its primary context, plain cuMemAlloc
 *    device memory, the plan's PTX loaded with cuModuleLoadDataEx, cuLaunchKernel;
 *  - emulated (PDC_GPU_EMULATE=1, a testing aid): "device memory" is host memory and the module is
 *    the same kernels generated in their host flavour (every (block, thread) index in a loop) and
 *    JIT-compiled through backends/llvm. Everything above this file - planning, PTX generation,
 *    arenas, uploads, the launch list, downloads - runs unchanged, so tests check it without a GPU.
 * Error statuses: no driver / no device -> PDC_ERR_NO_DEVICE; PTX the driver cannot take ->
 * PDC_ERR_NO_DEVICE "driver too old for PTX ISA x.y"; out of device memory -> PDC_ERR_OUT_OF_MEMORY
 * naming the bytes; failed launches and copies -> PDC_ERR_INTERNAL with the CUDA error name.
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
    cuda_api api;
    CUdevice dev;
    CUcontext cu;
    int retained;
};

typedef void (*host_kernel)(float *act, float *wts, int32_t arg, int32_t grid, int32_t block);

struct gpu_module {
    size_t n;
    CUmodule mod;
    CUfunction *fns;     /* CUDA */
    void **host;         /* emulated */
};

static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

static pdc_status cu_fail(gpu_device *d, pdc_status st, CUresult r, const char *what)
{
    char e[96];
    return pdc_error(d->ctx, st, "gpu: %s failed: %s", what, cuda_error_text(&d->api, r, e, sizeof e));
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
    pdc_status st = cuda_api_load(ctx, &d->api);
    if (st) {
        pdc_free(d);
        return st;
    }
    int n = 0, major = 0, minor = 0;
    CUresult r = d->api.cuDeviceGetCount(&n);
    if (r != CUDA_SUCCESS || n < 1) {
        char e[96];
        st = pdc_error(ctx, PDC_ERR_NO_DEVICE, "gpu: the CUDA driver sees no device (%s): check nvidia-smi and "
                       "CUDA_VISIBLE_DEVICES, or use target \"cpu\"",
                       r != CUDA_SUCCESS ? cuda_error_text(&d->api, r, e, sizeof e) : "0 devices");
    } else if ((r = d->api.cuDeviceGet(&d->dev, 0)) != CUDA_SUCCESS ||
               (r = d->api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev)) ||
               (r = d->api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev))) {
        st = cu_fail(d, PDC_ERR_NO_DEVICE, r, "querying device 0");
    } else if ((r = d->api.cuDevicePrimaryCtxRetain(&d->cu, d->dev)) != CUDA_SUCCESS) {
        st = cu_fail(d, r == CUDA_ERROR_OUT_OF_MEMORY ? PDC_ERR_OUT_OF_MEMORY : PDC_ERR_NO_DEVICE, r,
                     "creating the device context (cuDevicePrimaryCtxRetain)");
    } else {
        d->retained = 1;
        if ((r = d->api.cuCtxSetCurrent(d->cu)) != CUDA_SUCCESS) st = cu_fail(d, PDC_ERR_NO_DEVICE, r, "cuCtxSetCurrent");
    }
    if (st) {
        gpu_device_close(d);
        return st;
    }
    if (d->api.cuDeviceGetName(d->name, (int)sizeof d->name, d->dev) != CUDA_SUCCESS) snprintf(d->name, sizeof d->name, "device 0");
    snprintf(d->arch, sizeof d->arch, "sm_%d%d", major, minor);
    *out = d;
    return PDC_OK;
}

void gpu_device_close(gpu_device *d)
{
    if (!d) return;
    if (!d->emulated) {
        if (d->retained) d->api.cuDevicePrimaryCtxRelease(d->dev);
        cuda_api_unload(&d->api);
    }
    pdc_free(d);
}

int gpu_device_emulated(const gpu_device *d) { return d->emulated; }
const char *gpu_device_arch(const gpu_device *d) { return d->arch; }
const char *gpu_device_name(const gpu_device *d) { return d->name; }

pdc_status gpu_device_bind(gpu_device *d)
{
    if (d->emulated) return PDC_OK;
    CUresult r = d->api.cuCtxSetCurrent(d->cu);
    return r == CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "cuCtxSetCurrent");
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
    CUdeviceptr p = 0;
    CUresult r = d->api.cuMemAlloc(&p, bytes ? bytes : 4);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return pdc_error(d->ctx, PDC_ERR_OUT_OF_MEMORY, "gpu: out of device memory allocating %zu bytes on %s", bytes,
                         d->name);
    if (r != CUDA_SUCCESS) return cu_fail(d, PDC_ERR_INTERNAL, r, "cuMemAlloc");
    *addr = p;
    return PDC_OK;
}

void gpu_mem_free(gpu_device *d, uint64_t addr)
{
    if (!addr) return;
    if (d->emulated) pdc_free((void *)(uintptr_t)addr);
    else d->api.cuMemFree(addr);
}

pdc_status gpu_mem_upload(gpu_device *d, uint64_t dst, const void *src, size_t bytes)
{
    if (!bytes) return PDC_OK;
    if (d->emulated) {
        memcpy((void *)(uintptr_t)dst, src, bytes);
        return PDC_OK;
    }
    CUresult r = d->api.cuMemcpyHtoD(dst, src, bytes);
    return r == CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "copy to the device (cuMemcpyHtoD)");
}

pdc_status gpu_mem_download(gpu_device *d, void *dst, uint64_t src, size_t bytes)
{
    if (!bytes) return PDC_OK;
    if (d->emulated) {
        memcpy(dst, (const void *)(uintptr_t)src, bytes);
        return PDC_OK;
    }
    CUresult r = d->api.cuMemcpyDtoH(dst, src, bytes);
    return r == CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "copy from the device (cuMemcpyDtoH)");
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

/* ".version 7.8" of the PTX text, for messages. */
static void ptx_isa(const char *ptx, char *buf, size_t cap)
{
    const char *v = strstr(ptx, ".version ");
    snprintf(buf, cap, "?");
    if (v) sscanf(v + 9, "%15s", buf);
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
        char log[2048] = "";
        int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
        void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
        CUresult r = mod->fns ? d->api.cuModuleLoadDataEx(&mod->mod, ptx, 2, opts, vals) : CUDA_SUCCESS;
        if (!mod->fns) {
            st = PDC_ERR_OUT_OF_MEMORY;
        } else if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
                   r == CUDA_ERROR_INVALID_PTX) {
            char isa[16], e[96];
            int ver = 0;
            ptx_isa(ptx, isa, sizeof isa);
            d->api.cuDriverGetVersion(&ver);
            st = pdc_error(d->ctx, PDC_ERR_NO_DEVICE,
                           "gpu: the driver cannot load the PTX (%s): driver too old for PTX ISA %s (driver CUDA "
                           "%d.%d; update the driver, or set option gpu_arch lower than %s) %.300s",
                           cuda_error_text(&d->api, r, e, sizeof e), isa, ver / 1000, ver % 1000 / 10, d->arch, log);
        } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            st = pdc_error(d->ctx, PDC_ERR_OUT_OF_MEMORY, "gpu: out of device memory loading the module (%zu bytes of PTX)",
                           strlen(ptx));
        } else if (r != CUDA_SUCCESS) {
            char e[96];
            st = pdc_error(d->ctx, PDC_ERR_INTERNAL, "gpu: cuModuleLoadDataEx failed: %s %.300s",
                           cuda_error_text(&d->api, r, e, sizeof e), log);
        }
        for (size_t i = 0; i < mod->n && !st; i++)
            if ((r = d->api.cuModuleGetFunction(&mod->fns[i], mod->mod, p->kernels[i].name)) != CUDA_SUCCESS)
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
    if (mod->mod) d->api.cuModuleUnload(mod->mod);
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
    if (grid > INT32_MAX)
        return pdc_error(d->ctx, PDC_ERR_UNSUPPORTED, "gpu: kernel %s needs %lld blocks (at most %d)", K->name,
                         (long long)grid, INT32_MAX);
    if (d->emulated) {
        ((host_kernel)mod->host[k])((float *)(uintptr_t)act, (float *)(uintptr_t)wts, arg, (int32_t)grid, GPU_BLOCK);
        return PDC_OK;
    }
    CUdeviceptr a = act, w = wts;
    void *params[3] = {&a, &w, &arg};
    CUresult r = d->api.cuLaunchKernel(mod->fns[k], (unsigned)grid, 1, 1, GPU_BLOCK, 1, 1, 0, NULL, params, NULL);
    return r == CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "kernel launch");
}

pdc_status gpu_device_sync(gpu_device *d)
{
    if (d->emulated) return PDC_OK;
    CUresult r = d->api.cuCtxSynchronize();
    return r == CUDA_SUCCESS ? PDC_OK : cu_fail(d, PDC_ERR_INTERNAL, r, "running the kernels (cuCtxSynchronize)");
}
