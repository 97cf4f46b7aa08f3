/*
 * fuzz_ir_text.c - libFuzzer target: the IR text parser, pdc_model_parse (ir/text/text_parse.c).
 *
 * Input: any bytes, taken as .pdcir text of exactly that length (not NUL-terminated).
 * Properties, beyond fuzz.h's: a model that parses prints back to text that parses again and
 * prints identically (the text form's documented round trip), and the same model saved as .pdc
 * loads back and prints identically too (the two formats describe the same models).
 */
#include "fuzz.h"
#include "ir/ir.h"

/* Printing every weight of a huge (e.g. elided) constant is slow; round-trip only smaller models. */
#define ROUND_TRIP_MAX_WEIGHTS ((size_t)1 << 16)

static size_t weight_count(const pdc_model *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].kind == IR_TENSOR_CONST) n += ir_tensor_numel(&m->tensors[i]);
    return n;
}

static void round_trip(pdc_context *ctx, const pdc_model *m)
{
    char *t1 = NULL, *t2 = NULL, *t3 = NULL;
    pdc_status st = pdc_model_print(m, 0, &t1);
    fuzz_check(st == PDC_OK, "print of a parsed model: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));

    pdc_model *m2 = FUZZ_UNTOUCHED;
    st = pdc_model_parse(ctx, t1, strlen(t1), &m2);
    fuzz_check(st == PDC_OK, "printed model does not parse: %s: %s\n--- text ---\n%s", pdc_status_string(st),
               pdc_context_last_error(ctx), t1);
    st = pdc_model_print(m2, 0, &t2);
    fuzz_check(st == PDC_OK, "print of the re-parsed model: %s", pdc_context_last_error(ctx));
    fuzz_check(!strcmp(t1, t2), "print -> parse -> print differs\n--- first ---\n%s--- second ---\n%s", t1, t2);

    pdc_buf buf;
    pdc_buf_init(&buf, ctx);
    st = pdc_format_save(m2, &buf);
    fuzz_check(st == PDC_OK, "save of a parsed model: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));
    pdc_model *m3 = FUZZ_UNTOUCHED;
    st = pdc_model_load_memory(ctx, buf.data, buf.len, &m3);
    fuzz_check(st == PDC_OK, "saved model does not load: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));
    st = pdc_model_print(m3, 0, &t3);
    fuzz_check(st == PDC_OK, "print of the loaded model: %s", pdc_context_last_error(ctx));
    fuzz_check(!strcmp(t1, t3), "text -> .pdc -> text differs\n--- text ---\n%s--- via .pdc ---\n%s", t1, t3);

    pdc_buf_free(&buf);
    pdc_model_destroy(m2);
    pdc_model_destroy(m3);
    pdc_string_free(t1);
    pdc_string_free(t2);
    pdc_string_free(t3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pdc_context *ctx = fuzz_context();
    uint8_t *text = fuzz_copy(data, size);
    pdc_model *m = FUZZ_UNTOUCHED;
    pdc_status st = pdc_model_parse(ctx, (const char *)text, size, &m);
    if (st == PDC_ERR_NUMERIC) {
        /* a NaN or infinite constant: refused by name, and accepted with allow_nonfinite (the
         * round trip below then carries the non-finite values through text and .pdc) */
        fuzz_check(strstr(pdc_context_last_error(ctx), "constant '") && m == FUZZ_UNTOUCHED,
                   "non-finite constant refused without naming it: %s", pdc_context_last_error(ctx));
        fuzz_check(pdc_context_set_option(ctx, "allow_nonfinite", "1") == PDC_OK, "allow_nonfinite");
        st = pdc_model_parse(ctx, (const char *)text, size, &m);
        fuzz_check(st == PDC_OK, "with allow_nonfinite the model still fails: %s: %s", pdc_status_string(st),
                   pdc_context_last_error(ctx));
    }
    if (st != PDC_OK) {
        fuzz_check_failure(ctx, st, m, "pdc_model_parse");
    } else {
        if (weight_count(m) <= ROUND_TRIP_MAX_WEIGHTS) round_trip(ctx, m);
        pdc_model_destroy(m);
    }
    free(text);
    pdc_context_destroy(ctx);
    return 0;
}
