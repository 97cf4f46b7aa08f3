/* arm_emit.c - placeholder until the AArch64 emitter lands (this session). */
#include "backends/backend.h"

static pdc_status arm_emit(pdc_context *ctx, const ir_model *m, const pdc_emit_options *opt, pdc_emit_out *out)
{
    (void)m, (void)opt, (void)out;
    return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "emit: target 'aarch64-linux-gnu' is not implemented yet");
}

static const char *const arm_cpus[] = {"generic", "cortex-a53", "cortex-a55", "cortex-a72", "cortex-a76", "neoverse-n1", NULL};
const pdc_emitter pdc_emitter_aarch64 = {"aarch64-linux-gnu", "AArch64 Linux (NEON): NAME.h + libNAME.a", arm_cpus,
                                         NULL, arm_emit};
