/*
 * gpu_backend.c - the "gpu" target: compile = open the device (CUDA driver device 0, or the emulated
 * device with PDC_GPU_EMULATE=1), pick the arch (option gpu_arch; "auto" = the device's compute
 * capability capped to the highest listed SM not above it), plan the model, generate one PTX module
 * with every kernel, load it, allocate the weights arena (uploaded once) and one activation arena
 * in device memory. run = upload the inputs into their arena slots, launch the list in order,
 * synchronise, download the outputs into host staging, and only then copy them to the caller's
 * buffers, so a failed run leaves them untouched.
 *
 * Thread safety: the program owns one activation arena on the device, so runs of one program are
 * serialised by a mutex (several threads may call run; they take turns). Programs are independent.
 * Compile, run and destroy each push the device's primary context onto the calling thread and pop
 * it at the end, so any thread may run a program compiled on another.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backends/gpu/gpu.h"

typedef struct gpu_state {
    gpu_plan *plan;
    gpu_device *dev;
    gpu_module *mod;
    char *ptx;
    size_t ptx_len;
    char arch[16];
    uint64_t act, wts;        /* device arenas */
    pthread_mutex_t lock;
    int lock_ok;
} gpu_state;

static void gpu_destroy(pdc_program *prog)
{
    gpu_state *s = prog->state;
    if (!s) return;
    if (s->dev) {
        /* module and memory belong to the context: free them with it current, then release it */
        int bound = gpu_device_bind(s->dev) == PDC_OK;
        gpu_module_unload(s->dev, s->mod);
        gpu_mem_free(s->dev, s->act);
        gpu_mem_free(s->dev, s->wts);
        if (bound) gpu_device_unbind(s->dev);
        gpu_device_close(s->dev);
    }
    gpu_plan_destroy(s->plan);
    pdc_free(s->ptx);
    if (s->lock_ok) pthread_mutex_destroy(&s->lock);
    pdc_free(s);
    prog->state = NULL;
}

/* The SM to generate for: the option, or the device's capped to the list. */
static pdc_status pick_arch(gpu_state *s, const pdc_context *ctx)
{
    const char *want = ctx->gpu_arch[0] ? ctx->gpu_arch : "auto";
    if (strcmp(want, "auto")) {
        if (!gpu_arch_valid(want)) {
            char list[128];
            gpu_arch_list(list, sizeof list);
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "gpu: option gpu_arch '%s' is not valid (valid: auto, %s)", want,
                             list);
        }
        snprintf(s->arch, sizeof s->arch, "%s", want);
        return PDC_OK;
    }
    const char *dev = gpu_device_arch(s->dev);
    int cc = 0;
    if (!dev[0] || sscanf(dev, "sm_%d", &cc) != 1) {
        snprintf(s->arch, sizeof s->arch, "%s", GPU_DEFAULT_ARCH);
        return PDC_OK;
    }
    s->arch[0] = 0;
    for (size_t i = 0; gpu_archs[i]; i++) {
        int v = 0;
        if (sscanf(gpu_archs[i], "sm_%d", &v) == 1 && v <= cc) snprintf(s->arch, sizeof s->arch, "%s", gpu_archs[i]);
    }
    if (!s->arch[0])
        return pdc_error(ctx, PDC_ERR_NO_DEVICE, "gpu: device '%s' is %s; pdc generates code for %s and newer",
                         gpu_device_name(s->dev), dev, gpu_archs[0]);
    return PDC_OK;
}

static pdc_status gpu_compile(pdc_program *prog)
{
    pdc_context *ctx = prog->ctx;
    prog->state = NULL;
    gpu_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    prog->state = s;
    if (pthread_mutex_init(&s->lock, NULL)) return pdc_error(ctx, PDC_ERR_INTERNAL, "gpu: cannot create a mutex");
    s->lock_ok = 1;
    pdc_status st = gpu_device_open(ctx, &s->dev);
    if (!st) st = pick_arch(s, ctx);
    if (!st) st = gpu_plan_create(ctx, prog->model, &s->plan);
    if (!st) st = gpu_kgen_ptx(ctx, s->plan, s->arch, &s->ptx, &s->ptx_len);
    int bound = 0;
    if (!st) bound = !(st = gpu_device_bind(s->dev));
    if (!st) st = gpu_module_load(s->dev, s->plan, s->ptx, &s->mod);
    if (!st) st = gpu_mem_alloc(s->dev, s->plan->wts_words * sizeof(float), &s->wts);
    if (!st) st = gpu_mem_alloc(s->dev, s->plan->act_words * sizeof(float), &s->act);
    if (!st) st = gpu_mem_upload(s->dev, s->wts, s->plan->wts, s->plan->wts_words * sizeof(float));
    if (bound) gpu_device_unbind(s->dev);
    if (st) return st; /* pdc_compile destroys the half-built state */
    /* the host copy of the weights is on the device now */
    pdc_free(s->plan->wts);
    s->plan->wts = NULL;
    s->plan->wts_cap = 0;
    return PDC_OK;
}

/* Launches only the kernels of layers in live (NULL: all); downloads only the outputs wanted. */
static pdc_status run_locked(const pdc_program *prog, gpu_state *s, const float *const *inputs, float *const *outputs,
                             const uint8_t *live, float *staging)
{
    const ir_model *m = prog->model;
    pdc_status st = gpu_device_bind(s->dev);
    if (st) return st;
    for (size_t i = 0; i < m->n_inputs && !st; i++) {
        int t = m->inputs[i];
        if (!inputs[i]) continue; /* no layer that runs reads it */
        st = gpu_mem_upload(s->dev, s->act + (uint64_t)s->plan->tref[t].off * 4, inputs[i],
                            ir_tensor_numel(&m->tensors[t]) * sizeof(float));
    }
    for (size_t i = 0; i < s->plan->n_launches && !st; i++) {
        const gpu_launch *L = &s->plan->launches[i];
        if (live && !live[s->plan->kernels[L->kernel].layer]) continue;
        st = gpu_launch_kernel(s->dev, s->mod, s->plan, L->kernel, s->act, s->wts, L->arg);
        if (st) pdc_error_prefix(prog->ctx, "layer '%s'", m->layers[s->plan->kernels[L->kernel].layer].name);
    }
    if (!st) st = gpu_device_sync(s->dev);
    size_t at = 0;
    for (size_t i = 0; i < m->n_outputs && !st; i++) {
        int t = m->outputs[i];
        size_t n = ir_tensor_numel(&m->tensors[t]);
        gpu_ref r = s->plan->tref[t];
        if (!outputs[i]) {
            at += n;
            continue;
        }
        if (r.wts) memset(staging + at, 0, n * sizeof(float)); /* never: outputs are activations */
        else st = gpu_mem_download(s->dev, staging + at, s->act + (uint64_t)r.off * 4, n * sizeof(float));
        at += n;
    }
    gpu_device_unbind(s->dev);
    return st;
}

static pdc_status gpu_run(const pdc_program *prog, const float *const *inputs, float *const *outputs,
                          const uint8_t *live)
{
    gpu_state *s = prog->state;
    const ir_model *m = prog->model;
    if (!s || !s->mod) return pdc_error(prog->ctx, PDC_ERR_INVALID_STATE, "gpu: program was not compiled");
    size_t total = 0;
    for (size_t i = 0; i < m->n_outputs; i++) total += ir_tensor_numel(&m->tensors[m->outputs[i]]);
    float *staging = pdc_alloc(prog->ctx, (total ? total : 1) * sizeof(float));
    if (!staging) return PDC_ERR_OUT_OF_MEMORY;
    pthread_mutex_lock(&s->lock);
    pdc_status st = run_locked(prog, s, inputs, outputs, live, staging);
    pthread_mutex_unlock(&s->lock);
    if (!st) {
        size_t at = 0;
        for (size_t i = 0; i < m->n_outputs; i++) {
            size_t n = ir_tensor_numel(&m->tensors[m->outputs[i]]);
            if (outputs[i]) memcpy(outputs[i], staging + at, n * sizeof(float));
            at += n;
        }
    } else {
        pdc_error_prefix(prog->ctx, "gpu");
    }
    pdc_free(staging);
    return st;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

pdc_status gpu_program_time_launches(const pdc_program *prog, int reps, double *secs)
{
    if (!prog || prog->backend != &pdc_backend_gpu || !prog->state || reps < 1 || !secs)
        return pdc_error(prog ? prog->ctx : NULL, PDC_ERR_INVALID_ARG,
                         "gpu: timing needs a program compiled for \"gpu\" and reps >= 1");
    gpu_state *s = prog->state;
    pthread_mutex_lock(&s->lock);
    pdc_status st = gpu_device_bind(s->dev);
    int bound = !st;
    for (int r = 0; r < reps && !st; r++) {
        double t0 = now_s();
        for (size_t i = 0; i < s->plan->n_launches && !st; i++) {
            const gpu_launch *L = &s->plan->launches[i];
            st = gpu_launch_kernel(s->dev, s->mod, s->plan, L->kernel, s->act, s->wts, L->arg);
        }
        if (!st) st = gpu_device_sync(s->dev);
        secs[r] = now_s() - t0;
    }
    if (bound) gpu_device_unbind(s->dev);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static const char *gpu_layer_info(const pdc_program *prog, size_t i)
{
    const gpu_state *s = prog->state;
    return s && s->plan && i < prog->model->n_layers ? s->plan->info[i] : "";
}

const pdc_backend pdc_backend_gpu = {"gpu", "NVIDIA GPU: PTX kernels via the CUDA driver API (dlopen'd)", gpu_compile,
                                     gpu_run, gpu_destroy, gpu_layer_info};

int pdc_gpu_arch_valid(const char *arch, char *list, size_t cap)
{
    gpu_arch_list(list, cap);
    return !strcmp(arch, "auto") || gpu_arch_valid(arch);
}
