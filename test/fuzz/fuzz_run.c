/*
 * fuzz_run.c - libFuzzer target: a model that loads must also inspect, compile and run without
 * crashing. pdc_model_load_memory (either format; a .pdc image gets its length and CRC fixed up,
 * see fuzz.h), then every inspection call of the CLI's `inspect` (statistics and text fields of
 * every layer), symbolic inputs fixed to 2, pdc_compile for "ref", and pdc_program_run; and a pass
 * pipeline (chosen by a hash of the input) on a copy of the model.
 *
 * Properties, beyond fuzz.h's: inspection calls succeed (FLOP statistics may answer
 * PDC_ERR_SHAPE while shapes are symbolic, PDC_ERR_OVERFLOW beyond int64); a failed run leaves
 * the output tensors untouched; two runs on the same inputs give bit-identical outputs; a run
 * with a wrongly shaped input fails with PDC_ERR_SHAPE. A failed pipeline leaves the model as it
 * was (same .pdc bytes); a successful one verifies, and one that only canonicalizes, reorders and
 * plans gives the same outputs up to rounding (1e-3 x max(1, max |out|)). With the context option
 * check_finite a run gives the same bits when it succeeds, and fails with PDC_ERR_NUMERIC naming a
 * layer, outputs untouched, whenever an output is not finite. Models whose estimated
 * work exceeds RUN_MAX_WORK are compiled but not run, so that every input takes milliseconds.
 */
#include <math.h>

#include "fuzz.h"

#define RUN_MAX_WORK 4e6 /* element operations, roughly */
#define SENTINEL 0x7fc0dead  /* a NaN payload no kernel produces */

static void inspect(pdc_context *ctx, const pdc_model *m, double *work)
{
    size_t n_layers = 0;
    fuzz_check(pdc_model_num_layers(m, &n_layers) == PDC_OK, "num_layers");
    for (size_t i = 0; i < n_layers; i++) {
        for (int s = PDC_STAT_WEIGHTS; s <= PDC_STAT_BYTES; s++) {
            int64_t v = -1;
            pdc_status st = pdc_model_layer_stat(m, i, (pdc_layer_stat)s, &v);
            int flops = s == PDC_STAT_DENSE_FLOPS || s == PDC_STAT_EFFECTIVE_FLOPS;
            fuzz_check(st == PDC_OK || (flops && (st == PDC_ERR_SHAPE || st == PDC_ERR_OVERFLOW)),
                       "layer_stat(%zu, %d): %s: %s", i, s,
                       pdc_status_string(st), pdc_context_last_error(ctx));
            fuzz_check(st != PDC_OK || v >= 0, "layer_stat(%zu, %d) = %lld", i, s, (long long)v);
            if (st == PDC_OK && s == PDC_STAT_DENSE_FLOPS) *work += (double)v;
        }
        for (int f = PDC_FIELD_NAME; f <= PDC_FIELD_SPARSITY; f++) {
            const char *text = NULL;
            pdc_status st = pdc_model_layer_string(m, i, (pdc_layer_field)f, &text);
            fuzz_check(st == PDC_OK && text, "layer_string(%zu, %d): %s: %s", i, f, pdc_status_string(st),
                       pdc_context_last_error(ctx));
        }
    }
}

/* Fixes every symbolic dim of every input to 2. A refusal is fine (checked like any failure). */
static int fix_symbolic(pdc_context *ctx, pdc_model *m)
{
    size_t n = 0;
    fuzz_check(pdc_model_num_inputs(m, &n) == PDC_OK, "num_inputs");
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL;
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        fuzz_check(pdc_model_input_info(m, i, &name, &rank, dims) == PDC_OK, "input_info");
        int symbolic = 0;
        for (size_t k = 0; k < rank; k++)
            if (dims[k] < 0) dims[k] = 2, symbolic = 1;
        if (!symbolic) continue;
        pdc_status st = pdc_model_set_input_shape(m, name, rank, dims);
        if (st != PDC_OK) {
            fuzz_check_failure(ctx, st, FUZZ_UNTOUCHED, "pdc_model_set_input_shape");
            return 0;
        }
    }
    return 1;
}

static void fill(pdc_tensor *t, uint32_t seed)
{
    float *x = pdc_tensor_data(t);
    uint32_t s = seed * 2654435761u + 1u;
    for (size_t i = 0; i < pdc_tensor_size(t); i++) {
        s ^= s << 13, s ^= s >> 17, s ^= s << 5;
        x[i] = (float)((double)s / 2147483648.0 - 1.0);
    }
}

static void fill_sentinel(pdc_tensor *t)
{
    uint32_t bits = SENTINEL;
    float *x = pdc_tensor_data(t);
    for (size_t i = 0; i < pdc_tensor_size(t); i++) memcpy(&x[i], &bits, 4);
}

static int is_sentinel(pdc_tensor *t)
{
    uint32_t bits = SENTINEL;
    const float *x = pdc_tensor_data(t);
    for (size_t i = 0; i < pdc_tensor_size(t); i++)
        if (memcmp(&x[i], &bits, 4)) return 0;
    return 1;
}

/* Creates the tensors for inputs (which = 0) or outputs (1); 0 if one is refused (too large). */
static int make_tensors(pdc_context *ctx, const pdc_program *p, int which, size_t n, pdc_tensor **t, double *work)
{
    for (size_t i = 0; i < n; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        pdc_status st = which ? pdc_program_output_info(p, i, NULL, &rank, dims)
                              : pdc_program_input_info(p, i, NULL, &rank, dims);
        fuzz_check(st == PDC_OK, "program io info: %s", pdc_context_last_error(ctx));
        double elems = 1;
        for (size_t k = 0; k < rank; k++) elems *= (double)dims[k];
        *work += elems;
        if (elems > RUN_MAX_WORK) return 0;
        t[i] = FUZZ_UNTOUCHED;
        st = pdc_tensor_create(ctx, rank ? rank : 1, rank ? dims : (const int64_t[]){1}, &t[i]);
        if (st != PDC_OK) {
            fuzz_check_failure(ctx, st, t[i], "pdc_tensor_create");
            t[i] = NULL;
            return 0;
        }
    }
    return 1;
}

/* |got - want| <= 1e-3 x max(1, max |want|) wherever want is finite and below 1e6 (folding a batchnorm
 * or a bias reassociates sums; anything else is a bug). */
static void compare_close(const pdc_tensor *got, const pdc_tensor *want, size_t o, const char *what)
{
    const float *g = pdc_tensor_data((pdc_tensor *)got), *w = pdc_tensor_data((pdc_tensor *)want);
    size_t n = pdc_tensor_size(want);
    float scale = 1.0f;
    for (size_t i = 0; i < n; i++)
        if (isfinite(w[i]) && fabsf(w[i]) < 1e6f) scale = fmaxf(scale, fabsf(w[i]));
    for (size_t i = 0; i < n; i++)
        if (isfinite(w[i]) && fabsf(w[i]) < 1e6f)
            fuzz_check(fabsf(g[i] - w[i]) <= 1e-3f * scale, "%s: output %zu element %zu: %.9g, before %.9g", what, o,
                       i, (double)g[i], (double)w[i]);
}

/* Runs p (and then p2, a transformed copy whose outputs must stay close to p's, if not NULL). */
static void run(pdc_context *ctx, const pdc_program *p, double work, const pdc_program *p2, const char *pipeline)
{
    size_t n_in = 0, n_out = 0;
    fuzz_check(pdc_program_num_inputs(p, &n_in) == PDC_OK && pdc_program_num_outputs(p, &n_out) == PDC_OK, "num io");
    pdc_tensor **in = calloc(n_in + 1, sizeof *in), **out = calloc(n_out + 1, sizeof *out),
               **out2 = calloc(n_out + 1, sizeof *out2);
    fuzz_check(in && out && out2, "calloc");
    if (make_tensors(ctx, p, 0, n_in, in, &work) && make_tensors(ctx, p, 1, n_out, out, &work) &&
        make_tensors(ctx, p, 1, n_out, out2, &work) && work <= RUN_MAX_WORK) {
        for (size_t i = 0; i < n_in; i++) fill(in[i], (uint32_t)i);
        for (size_t i = 0; i < n_out; i++) fill_sentinel(out[i]), fill_sentinel(out2[i]);
        pdc_status st = pdc_program_run(p, n_in, in, n_out, out);
        if (st != PDC_OK) {
            fuzz_check_failure(ctx, st, FUZZ_UNTOUCHED, "pdc_program_run");
            for (size_t i = 0; i < n_out; i++)
                fuzz_check(is_sentinel(out[i]), "failed run (%s) wrote output %zu", pdc_status_string(st), i);
        } else {
            st = pdc_program_run(p, n_in, in, n_out, out2);
            fuzz_check(st == PDC_OK, "second run failed: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));
            for (size_t i = 0; i < n_out; i++)
                fuzz_check(!memcmp(pdc_tensor_data(out[i]), pdc_tensor_data(out2[i]), 4 * pdc_tensor_size(out[i])),
                           "two runs differ in output %zu", i);
            if (p2) {
                st = pdc_program_run(p2, n_in, in, n_out, out2);
                fuzz_check(st == PDC_OK, "the model after '%s' does not run: %s: %s", pipeline, pdc_status_string(st),
                           pdc_context_last_error(ctx));
                for (size_t i = 0; i < n_out; i++) compare_close(out2[i], out[i], i, pipeline);
            }
            /* check_finite: passes with the same bits, or names the first non-finite layer */
            int nonfinite = 0;
            for (size_t i = 0; i < n_out; i++) {
                const float *v = pdc_tensor_data(out[i]);
                for (size_t k = 0; k < pdc_tensor_size(out[i]); k++) nonfinite |= !isfinite(v[k]);
                fill_sentinel(out2[i]);
            }
            fuzz_check(pdc_context_set_option(ctx, "check_finite", "1") == PDC_OK, "check_finite");
            st = pdc_program_run(p, n_in, in, n_out, out2);
            pdc_context_set_option(ctx, "check_finite", "0");
            if (st == PDC_OK) {
                fuzz_check(!nonfinite, "check_finite passed a run with a non-finite output");
                for (size_t i = 0; i < n_out; i++)
                    fuzz_check(!memcmp(pdc_tensor_data(out[i]), pdc_tensor_data(out2[i]), 4 * pdc_tensor_size(out[i])),
                               "check_finite changed output %zu", i);
            } else {
                fuzz_check(st == PDC_ERR_NUMERIC && strstr(pdc_context_last_error(ctx), "check_finite: layer '"),
                           "check_finite run: %s: %s", pdc_status_string(st), pdc_context_last_error(ctx));
                for (size_t i = 0; i < n_out; i++)
                    fuzz_check(is_sentinel(out2[i]), "a run failed by check_finite wrote output %zu", i);
            }
        }
        if (n_in) {
            /* The same run with input 0 one element longer in its last dim must be refused. */
            size_t rank = 0;
            int64_t dims[PDC_MAX_RANK];
            pdc_tensor_shape(in[0], &rank, dims);
            dims[rank - 1]++;
            pdc_tensor *bad = NULL, *keep = in[0];
            if (pdc_tensor_create(ctx, rank, dims, &bad) == PDC_OK) {
                in[0] = bad;
                st = pdc_program_run(p, n_in, in, n_out, out2);
                fuzz_check(st == PDC_ERR_SHAPE, "a run with a wrongly shaped input returned %s",
                           pdc_status_string(st));
                in[0] = keep;
                pdc_tensor_destroy(bad);
            }
        }
    }
    for (size_t i = 0; i < n_in; i++) pdc_tensor_destroy(in[i]);
    for (size_t i = 0; i < n_out; i++) pdc_tensor_destroy(out[i]), pdc_tensor_destroy(out2[i]);
    free(in);
    free(out);
    free(out2);
}

/* A copy of m through the .pdc format (exact). */
static pdc_model *copy(pdc_context *ctx, const pdc_model *m, pdc_buf *bytes)
{
    pdc_buf_init(bytes, ctx);
    fuzz_check(pdc_format_save(m, bytes) == PDC_OK, "save: %s", pdc_context_last_error(ctx));
    pdc_model *c = NULL;
    fuzz_check(pdc_model_load_memory(ctx, bytes->data, bytes->len, &c) == PDC_OK, "reload: %s",
               pdc_context_last_error(ctx));
    return c;
}

/* Pipelines tried on a copy of each model; the first four must leave outputs unchanged. */
static const char *const pipelines[] = {
    "canonicalize", "canonicalize,plan", "plan", "canonicalize,reorder,plan",
    "prune-unstructured,canonicalize,plan", "prune-pattern,prune-connectivity,prune-block,reorder,plan"};
#define N_PRESERVING 4

/*
 * Runs a pass pipeline (chosen by the input's bytes) on a copy of m. A refusal must be a documented
 * status with a message that leaves the copy exactly as it was; a success must verify. Returns the
 * transformed copy when it succeeded, NULL otherwise.
 */
static pdc_model *transform(pdc_context *ctx, const pdc_model *m, uint32_t choice, size_t *which)
{
    pdc_buf before, after;
    pdc_model *t = copy(ctx, m, &before);
    *which = choice % (sizeof pipelines / sizeof pipelines[0]);
    pdc_status st = pdc_model_transform(t, pipelines[*which], NULL);
    if (st != PDC_OK) {
        fuzz_check_failure(ctx, st, FUZZ_UNTOUCHED, pipelines[*which]);
        pdc_buf_init(&after, ctx);
        fuzz_check(pdc_format_save(t, &after) == PDC_OK, "save after a failed transform");
        fuzz_check(after.len == before.len && !memcmp(after.data, before.data, after.len),
                   "a failed '%s' changed the model", pipelines[*which]);
        pdc_buf_free(&after);
        pdc_model_destroy(t);
        t = NULL;
    } else {
        st = pdc_model_verify(t);
        fuzz_check(st == PDC_OK, "the model after '%s' does not verify: %s", pipelines[*which],
                   pdc_context_last_error(ctx));
    }
    pdc_buf_free(&before);
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pdc_context *ctx = fuzz_context();
    uint8_t *image = fuzz_copy(data, size);
    fuzz_fix_pdc_image(image, size);
    pdc_model *m = FUZZ_UNTOUCHED;
    pdc_status st = pdc_model_load_memory(ctx, image, size, &m);
    free(image);
    if (st != PDC_OK) {
        fuzz_check_failure(ctx, st, m, "pdc_model_load_memory");
        pdc_context_destroy(ctx);
        return 0;
    }
    double work = 0;
    inspect(ctx, m, &work);
    if (fix_symbolic(ctx, m)) {
        work = 0;
        inspect(ctx, m, &work);
        pdc_program *p = FUZZ_UNTOUCHED;
        st = pdc_compile(ctx, m, "ref", &p);
        if (st != PDC_OK) {
            fuzz_check_failure(ctx, st, p, "pdc_compile");
        } else {
            uint32_t h = 2166136261u;
            for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
            size_t which = 0;
            pdc_model *t = work <= RUN_MAX_WORK ? transform(ctx, m, h, &which) : NULL;
            pdc_program *p2 = NULL;
            if (t && which < N_PRESERVING) {
                st = pdc_compile(ctx, t, "ref", &p2);
                fuzz_check(st == PDC_OK, "the model after '%s' does not compile: %s: %s", pipelines[which],
                           pdc_status_string(st), pdc_context_last_error(ctx));
            }
            pdc_model_destroy(t);
            pdc_model_destroy(m); /* the programs must not need the models */
            m = NULL;
            run(ctx, p, work, p2, pipelines[which]);
            pdc_program_destroy(p2);
            pdc_program_destroy(p);
        }
    }
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    return 0;
}
