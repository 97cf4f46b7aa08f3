/*
 * fuzz_pdc_load.c - libFuzzer target: the .pdc binary loader, pdc_model_load_memory
 * (lib/format/format_pdc.c) on binary input.
 *
 * Input: a .pdc file image. If it starts with the magic, its payload length and CRC-32 are fixed
 * up first (fuzz_fix_pdc_image), so mutations reach the payload parser instead of stopping at the
 * checksum. Inputs without the magic go to the same entry point (and so to the text parser),
 * which must refuse them cleanly too.
 * Properties, beyond fuzz.h's: a model that loads saves to bytes that load again and save
 * identically (save -> load -> save is byte-identical for builder-made models, and a loaded
 * model is builder-made), and it prints the same text before and after.
 */
#include "fuzz.h"

static void round_trip(pdc_context *ctx, const pdc_model *m)
{
    pdc_buf b1, b2;
    pdc_buf_init(&b1, ctx);
    pdc_buf_init(&b2, ctx);
    pdc_status st = pdc_format_save(m, &b1);
    fuzz_check(st == PDC_OK, "save of a loaded model: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));
    pdc_model *m2 = FUZZ_UNTOUCHED;
    st = pdc_model_load_memory(ctx, b1.data, b1.len, &m2);
    fuzz_check(st == PDC_OK, "re-saved model does not load: %s: %s", pdc_status_string(st),
               pdc_context_last_error(ctx));
    st = pdc_format_save(m2, &b2);
    fuzz_check(st == PDC_OK, "second save: %s", pdc_context_last_error(ctx));
    fuzz_check(b1.len == b2.len && !memcmp(b1.data, b2.data, b1.len),
               "save -> load -> save is not byte-identical (%zu vs %zu bytes)", b1.len, b2.len);

    char *t1 = NULL, *t2 = NULL;
    fuzz_check(pdc_model_print(m, PDC_PRINT_ELIDE_WEIGHTS, &t1) == PDC_OK, "print: %s", pdc_context_last_error(ctx));
    fuzz_check(pdc_model_print(m2, PDC_PRINT_ELIDE_WEIGHTS, &t2) == PDC_OK, "print: %s", pdc_context_last_error(ctx));
    fuzz_check(!strcmp(t1, t2), "the reloaded model prints differently\n--- loaded ---\n%s--- reloaded ---\n%s", t1,
               t2);
    pdc_string_free(t1);
    pdc_string_free(t2);
    pdc_model_destroy(m2);
    pdc_buf_free(&b1);
    pdc_buf_free(&b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pdc_context *ctx = fuzz_context();
    uint8_t *image = fuzz_copy(data, size);
    fuzz_fix_pdc_image(image, size);
    pdc_model *m = FUZZ_UNTOUCHED;
    pdc_status st = pdc_model_load_memory(ctx, image, size, &m);
    if (st != PDC_OK) {
        fuzz_check_failure(ctx, st, m, "pdc_model_load_memory");
    } else {
        round_trip(ctx, m);
        pdc_model_destroy(m);
    }
    free(image);
    pdc_context_destroy(ctx);
    return 0;
}
