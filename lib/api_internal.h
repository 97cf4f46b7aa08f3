/* api_internal.h - helpers shared by the public API files in lib/. */
#ifndef PDC_LIB_API_INTERNAL_H
#define PDC_LIB_API_INTERNAL_H

#include "ir/ir.h"

/* Name/rank/dims of entry i of a list of tensor indices (model or program inputs/outputs). */
pdc_status pdc_tensor_info(const ir_model *m, const char *fn, const int *list, size_t n, const char *what, size_t i,
                           const char **name_out, size_t *rank_out, int64_t *dims_out);

struct pdc_tensor {
    pdc_context *ctx;
    int rank;
    int64_t dims[PDC_MAX_RANK];
    size_t numel;
    float *data;
    int owned;
};

/* What pdc_compile and pdc_model_emit require: every input shape concrete (else PDC_ERR_SHAPE naming
 * the input) and the model verified. */
pdc_status pdc_check_compilable(const pdc_model *model);
/* pdc_compile(ctx, model, "auto", ...): the target predicted fastest (lib/compile_auto.c). */
pdc_status pdc_compile_auto(pdc_context *ctx, const pdc_model *model, pdc_program **program_out);

/* A run's buffers: pdc_program_run's checks of its arguments (counts, NULLs, shapes), with its messages,
 * then the tensors' data pointers (NULL for an output not wanted and an input not needed) and, when some
 * outputs are not wanted, the layers to run. pdc_program_io_free releases them (also after a failure). */
typedef struct pdc_program_io {
    const float **in;
    float **out;
    uint8_t *live; /* per layer, 1: runs; NULL: every layer runs */
} pdc_program_io;
pdc_status pdc_program_io_get(const pdc_program *program, size_t n_inputs, pdc_tensor *const *inputs,
                              size_t n_outputs, pdc_tensor *const *outputs, pdc_program_io *io);
void pdc_program_io_free(pdc_program_io *io);

#endif
