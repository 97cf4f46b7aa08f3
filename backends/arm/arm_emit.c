/*
 * arm_emit.c - the "aarch64-linux-gnu" emitter of pdc_model_emit: NAME.h and libNAME.a (AArch64
 * NEON object code of the whole model, its packed weights and its arena; depends on libc only). arm_graph.c builds the module, archive.c wraps the object, arm_header.c writes the header.
 */
#include <stdio.h>

#include "backends/arm/arm.h"

static pdc_status arm_emit(pdc_context *ctx, const ir_model *m, const pdc_emit_options *opt, pdc_emit_out *out)
{
    const char *cpu = opt->cpu ? opt->cpu : "generic";
    void *obj = NULL, *ar = NULL;
    size_t obj_size = 0, ar_size = 0, hsize = 0;
    char *hdr = NULL;
    pdc_status st = arm_build_object(ctx, m, opt->name, cpu, &obj, &obj_size, NULL);
    if (!st) {
        char run[96], ver[96];
        snprintf(run, sizeof run, "%s_run", opt->name);
        snprintf(ver, sizeof ver, "%s_version", opt->name);
        const char *const syms[2] = {run, ver};
        st = arm_archive(ctx, "model.o", obj, obj_size, syms, 2, &ar, &ar_size);
    }
    pdc_free(obj);
    if (!st) st = arm_header(ctx, m, opt->name, cpu, &hdr, &hsize);
    char fname[96];
    if (!st) {
        snprintf(fname, sizeof fname, "%s.h", opt->name);
        st = pdc_emit_add(ctx, out, fname, hdr, hsize);
        hdr = NULL;
    } else {
        pdc_free(hdr);
    }
    if (!st) {
        snprintf(fname, sizeof fname, "lib%s.a", opt->name);
        st = pdc_emit_add(ctx, out, fname, ar, ar_size);
        ar = NULL;
    }
    pdc_free(ar);
    return st;
}

static const char *const arm_cpus[] = {"generic", "cortex-a53", "cortex-a55", "cortex-a72", "cortex-a76", "neoverse-n1", NULL};
const pdc_emitter pdc_emitter_aarch64 = {"aarch64-linux-gnu", "AArch64 Linux (NEON): NAME.h + libNAME.a", arm_cpus,
                                         NULL, arm_emit};
