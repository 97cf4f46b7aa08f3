/*
 * fuzz_onnx.c - libFuzzer target: the ONNX importer, pdc_model_load_onnx_memory (lib/onnx_*.c).
 *
 * Input: the bytes of an ONNX ModelProto; the seeds are small exports from test/data/onnx and
 * graphs that exercise folding. Mutations reach the wire check (lib/onnx/onnx_wire.c), protobuf-c's
 * decoder, the graph walk, folding, op translation and sparsity recognition.
 * Properties, beyond fuzz.h's: an imported model verifies; it saves as .pdc and loads back to a
 * model that prints the same text; every layer answers the inspection calls; when its work is small
 * it compiles for "ref" and runs, twice with bit-identical outputs.
 */
#include "fuzz.h"
#include "lib/core/fileio.h"

#define RUN_MAX_WORK 4e6 /* FLOPs, roughly: keeps every input to milliseconds */

static void same_after_pdc_round_trip(pdc_context *ctx, const pdc_model *m)
{
    pdc_buf b;
    pdc_buf_init(&b, ctx);
    pdc_status st = pdc_format_save(m, &b);
    fuzz_check(st == PDC_OK, "save of an imported model: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));
    pdc_model *m2 = FUZZ_UNTOUCHED;
    st = pdc_model_load_memory(ctx, b.data, b.len, &m2);
    fuzz_check(st == PDC_OK, "the .pdc of an imported model does not load: %s: %s", pdc_status_string(st),
               pdc_context_last_error(ctx));
    char *t1 = NULL, *t2 = NULL;
    fuzz_check(pdc_model_print(m, PDC_PRINT_ELIDE_WEIGHTS, &t1) == PDC_OK, "print: %s", pdc_context_last_error(ctx));
    fuzz_check(pdc_model_print(m2, PDC_PRINT_ELIDE_WEIGHTS, &t2) == PDC_OK, "print: %s", pdc_context_last_error(ctx));
    fuzz_check(!strcmp(t1, t2), "the reloaded model prints differently\n--- imported ---\n%s--- reloaded ---\n%s", t1,
               t2);
    pdc_string_free(t1);
    pdc_string_free(t2);
    pdc_model_destroy(m2);
    pdc_buf_free(&b);
}

static double work_of(pdc_context *ctx, const pdc_model *m)
{
    size_t n = 0;
    double work = 0;
    fuzz_check(pdc_model_num_layers(m, &n) == PDC_OK, "num_layers");
    for (size_t i = 0; i < n; i++) {
        int64_t v = 0;
        pdc_status st = pdc_model_layer_stat(m, i, PDC_STAT_DENSE_FLOPS, &v);
        fuzz_check(st == PDC_OK || st == PDC_ERR_SHAPE, "layer_stat(%zu): %s: %s", i, pdc_status_string(st),
                   pdc_context_last_error(ctx));
        if (st != PDC_OK) return -1; /* symbolic shapes: not run */
        work += (double)v;
        for (int f = PDC_FIELD_NAME; f <= PDC_FIELD_SPARSITY; f++) {
            const char *text = NULL;
            fuzz_check(pdc_model_layer_string(m, i, (pdc_layer_field)f, &text) == PDC_OK && text,
                       "layer_string(%zu, %d): %s", i, f, pdc_context_last_error(ctx));
        }
    }
    return work;
}

/* Compiles and runs twice on the same (zero) inputs; the outputs must be bit-identical. */
static void run_twice(pdc_context *ctx, const pdc_model *m)
{
    pdc_program *p = FUZZ_UNTOUCHED;
    pdc_status st = pdc_compile(ctx, m, "ref", &p);
    if (st != PDC_OK) {
        fuzz_check_failure(ctx, st, p, "pdc_compile");
        return;
    }
    size_t ni = 0, no = 0;
    fuzz_check(pdc_program_num_inputs(p, &ni) == PDC_OK && pdc_program_num_outputs(p, &no) == PDC_OK, "counts");
    pdc_tensor **t = calloc(ni + 2 * no + 1, sizeof *t);
    fuzz_check(t != NULL, "out of memory");
    int ok = 1;
    for (size_t i = 0; ok && i < ni + 2 * no; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        st = i < ni ? pdc_program_input_info(p, i, NULL, &rank, dims)
                    : pdc_program_output_info(p, (i - ni) % no, NULL, &rank, dims);
        fuzz_check(st == PDC_OK, "tensor info: %s", pdc_context_last_error(ctx));
        ok = pdc_tensor_create(ctx, rank, dims, &t[i]) == PDC_OK; /* may exceed max_memory */
    }
    if (ok && pdc_program_run(p, ni, t, no, t + ni) == PDC_OK) {
        st = pdc_program_run(p, ni, t, no, t + ni + no);
        fuzz_check(st == PDC_OK, "a second run failed: %s", pdc_context_last_error(ctx));
        for (size_t k = 0; k < no; k++)
            fuzz_check(!memcmp(pdc_tensor_data(t[ni + k]), pdc_tensor_data(t[ni + no + k]),
                               pdc_tensor_size(t[ni + k]) * sizeof(float)),
                       "two runs differ in output %zu", k);
    }
    for (size_t i = 0; i < ni + 2 * no; i++) pdc_tensor_destroy(t[i]);
    free(t);
    pdc_program_destroy(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pdc_context *ctx = fuzz_context();
    uint8_t *copy = fuzz_copy(data, size);
    pdc_model *m = FUZZ_UNTOUCHED;
    pdc_status st = pdc_model_load_onnx_memory(ctx, copy, size, &m);
    if (st != PDC_OK) {
        fuzz_check_failure(ctx, st, m, "pdc_model_load_onnx_memory");
    } else {
        st = pdc_model_verify(m);
        fuzz_check(st == PDC_OK, "an imported model does not verify: %s", pdc_context_last_error(ctx));
        same_after_pdc_round_trip(ctx, m);
        double work = work_of(ctx, m);
        if (work >= 0 && work <= RUN_MAX_WORK) run_twice(ctx, m);
        pdc_model_destroy(m);
    }
    free(copy);
    pdc_context_destroy(ctx);
    return 0;
}
