/*
 * ptx_emit.c - the "nvptx" emitter (pdc compile --target nvptx --arch sm_XY): the gpu target's
 * plan and PTX for inspection or for loading by other tools. Files:
 *   NAME.ptx          every kernel of the model, .target = the arch
 *   NAME.launch.txt   the arenas, where each graph input/output lives, and each launch in order
 *                     (kernel, grid, block, arg, layer: tensors read -> written)
 *   NAME.weights.bin  the weights arena to upload (raw little-endian 4-byte words)
 */
#include <stdio.h>
#include <string.h>

#include "backends/gpu/gpu.h"

static pdc_status ptx_emit(pdc_context *ctx, const ir_model *m, const pdc_emit_options *opt, pdc_emit_out *out)
{
    const char *arch = opt->arch ? opt->arch : GPU_DEFAULT_ARCH;
    gpu_plan *p = NULL;
    char *ptx = NULL, *launch = NULL;
    size_t ptx_len = 0, launch_len = 0;
    char name[512];
    pdc_status st = gpu_plan_create(ctx, m, &p);
    if (!st) st = gpu_kgen_ptx(ctx, p, arch, &ptx, &ptx_len);
    if (!st) st = gpu_plan_launch_text(p, m, arch, &launch, &launch_len);
    if (!st) {
        snprintf(name, sizeof name, "%s.ptx", opt->name);
        st = pdc_emit_add(ctx, out, name, ptx, ptx_len);
        ptx = NULL;
    }
    if (!st) {
        snprintf(name, sizeof name, "%s.launch.txt", opt->name);
        st = pdc_emit_add(ctx, out, name, launch, launch_len);
        launch = NULL;
    }
    if (!st) {
        snprintf(name, sizeof name, "%s.weights.bin", opt->name);
        size_t n = p->wts_words * sizeof(float);
        st = pdc_emit_add(ctx, out, name, p->wts, n);
        p->wts = NULL; /* taken over by out */
    }
    pdc_free(ptx);
    pdc_free(launch);
    gpu_plan_destroy(p);
    return st;
}

const pdc_emitter pdc_emitter_nvptx = {"nvptx", "NVIDIA PTX: NAME.ptx + NAME.launch.txt + NAME.weights.bin", NULL,
                                       gpu_archs, ptx_emit};
