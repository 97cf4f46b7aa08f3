/* ptx_emit.c - placeholder until the NVPTX emitter lands (this session). */
#include "backends/backend.h"

static pdc_status ptx_emit(pdc_context *ctx, const ir_model *m, const pdc_emit_options *opt, pdc_emit_out *out)
{
    (void)m, (void)opt, (void)out;
    return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "emit: target 'nvptx' is not implemented yet");
}

static const char *const ptx_archs[] = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", NULL};
const pdc_emitter pdc_emitter_nvptx = {"nvptx", "NVIDIA PTX: NAME.ptx + NAME.launch.txt", NULL, ptx_archs, ptx_emit};
