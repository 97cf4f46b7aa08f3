/*
 * fuzz_cpu.c - libFuzzer target: differential testing of the "cpu" target (LLVM JIT, backends/cpu)
 * against the reference interpreter. A model that loads (either format; .pdc images get their length
 * and CRC fixed up, see fuzz.h) and compiles for "ref" must also compile for "cpu" - with the
 * same status if it does not - and, when its work is small, both programs run on the same inputs.
 *
 * Properties: compile for cpu succeeds whenever ref does (the cpu target falls back to the
 * reference kernel per layer), unless max_memory refuses it; its outputs agree with ref's wherever
 * ref's are finite and of moderate size (below), |cpu - ref| <= 1e-4 x max(1, max |ref|) per output (the
 * cpu tests demand 1e-5 on their models; sums in another order differ in the last bits, more so
 * with the arbitrary weights a fuzzer writes); two cpu runs are bit-identical; a failed run leaves
 * the outputs untouched.
 * The reference accumulates in double and the cpu kernels in float, so where a dot product's partial
 * sums pass FLT_MAX the cpu result is inf or NaN and the reference's may be finite (fc weights
 * [3e38, 3e38, -3e38] on inputs of 0.9 sum to 2.7e38 in double, to inf in float; a softmax after it
 * gives 0 against NaN). Both are right for their arithmetic, so a mismatch in an output counts only
 * where the values it is computed from are moderate: every constant and every activation the
 * reference computes on these inputs (a copy of the model with each one marked as an output) that
 * the output depends on, finite and within ABS_LIMIT. Then no partial sum of up to RUN_MAX_WORK
 * terms can come near FLT_MAX (attributes such as gemm's alpha are not bounded: such a finding
 * needs a look). The JIT's kernel cache is switched off (cache_dir lies under /dev/null, which no
 * one, root included, can create), so no input depends on what an earlier one compiled.
 * This build's target without "cpu" (PDC_ERR_UNSUPPORTED / UNKNOWN_TARGET) checks nothing more.
 */
#include <math.h>

#include "fuzz.h"
#include "ir/ir.h"

#define RUN_MAX_WORK 1e6   /* element operations, roughly; JIT compilation dominates anyway */
#define ABS_LIMIT 1e6f     /* ref values beyond this are not compared (overflow-prone arithmetic) */
#define REL_TOL 1e-4f
#define SENTINEL 0x7fc0beefu

static double model_work(const pdc_model *m)
{
    size_t n = 0;
    double work = 0;
    if (pdc_model_num_layers(m, &n) != PDC_OK) return INFINITY;
    for (size_t i = 0; i < n; i++) {
        int64_t v = 0;
        if (pdc_model_layer_stat(m, i, PDC_STAT_DENSE_FLOPS, &v) != PDC_OK) return INFINITY;
        work += (double)v;
    }
    return work;
}

static int fix_symbolic(pdc_model *m)
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
        if (symbolic && pdc_model_set_input_shape(m, name, rank, dims) != PDC_OK) return 0;
    }
    return 1;
}

/* Tensors for a program's inputs (which = 0, filled) or outputs (1, sentinel); 0 if one is too big. */
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
        if (!rank || elems > RUN_MAX_WORK || pdc_tensor_create(ctx, rank, dims, &t[i]) != PDC_OK) return 0;
        float *x = pdc_tensor_data(t[i]);
        uint32_t s = (uint32_t)i * 2654435761u + 1u, bits = SENTINEL;
        for (size_t k = 0; k < pdc_tensor_size(t[i]); k++) {
            if (which) {
                memcpy(&x[k], &bits, 4);
            } else {
                s ^= s << 13, s ^= s >> 17, s ^= s << 5;
                x[k] = (float)((double)s / 2147483648.0 - 1.0);
            }
        }
    }
    return 1;
}

/* The first element where cpu output `o` differs from ref's beyond the tolerance, written into
 * `why`; 0 if none. */
static int mismatch(const pdc_tensor *cpu, const pdc_tensor *ref, size_t o, char *why, size_t why_size)
{
    const float *c = pdc_tensor_data((pdc_tensor *)cpu), *r = pdc_tensor_data((pdc_tensor *)ref);
    size_t n = pdc_tensor_size(ref);
    float scale = 1.0f;
    for (size_t i = 0; i < n; i++)
        if (isfinite(r[i]) && fabsf(r[i]) < ABS_LIMIT) scale = fmaxf(scale, fabsf(r[i]));
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(r[i]) || fabsf(r[i]) >= ABS_LIMIT || fabsf(c[i] - r[i]) <= REL_TOL * scale) continue;
        snprintf(why, why_size, "output %zu element %zu of %zu: cpu %.9g, ref %.9g (|diff| > %.0e x %.3g)", o, i, n,
                 (double)c[i], (double)r[i], (double)REL_TOL, (double)scale);
        return 1;
    }
    return 0;
}

static int moderate(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) || fabsf(x[i]) >= ABS_LIMIT) return 0;
    return 1;
}

/* Marks in `on` tensor t and every tensor it is computed from. */
static void mark_sources(const pdc_model *m, int t, uint8_t *on)
{
    if (t < 0 || on[t]) return;
    on[t] = 1;
    int p = m->tensors[t].producer;
    if (p >= 0)
        for (size_t i = 0; i < m->layers[p].n_inputs; i++) mark_sources(m, m->layers[p].inputs[i], on);
}

/* Whether graph output o of model m (loaded from `image`) is computed from moderate values on inputs
 * `in` (see the top of the file). When the copy with every activation as an output cannot be built
 * or run, the answer is yes: a mismatch is then reported, not excused. */
static int moderate_values(pdc_context *ctx, const pdc_model *m, size_t o, const uint8_t *image, size_t size,
                           pdc_tensor *const *in, size_t n_in)
{
    uint8_t *on = calloc(m->n_tensors + 1, 1);
    fuzz_check(on, "calloc");
    mark_sources(m, m->outputs[o], on);
    int verdict = 1;
    for (size_t t = 0; t < m->n_tensors && verdict; t++)
        if (on[t] && m->tensors[t].kind == IR_TENSOR_CONST)
            verdict = moderate(m->tensors[t].data, ir_tensor_numel(&m->tensors[t]));
    pdc_model *probe = NULL;
    pdc_program *p = NULL;
    pdc_tensor **out = NULL;
    size_t n_out = 0;
    if (!verdict || pdc_model_load_memory(ctx, image, size, &probe) != PDC_OK || !fix_symbolic(probe)) goto done;
    for (size_t t = 0; t < probe->n_tensors; t++)
        if (probe->tensors[t].kind == IR_TENSOR_ACT && !ir_model_is_output(probe, (int)t) &&
            pdc_model_mark_output(probe, probe->tensors[t].name) != PDC_OK)
            goto done;
    if (pdc_compile(ctx, probe, "ref", &p) != PDC_OK || pdc_program_num_outputs(p, &n_out) != PDC_OK) goto done;
    out = calloc(n_out + 1, sizeof *out);
    fuzz_check(out, "calloc");
    double work = 0;
    if (make_tensors(ctx, p, 1, n_out, out, &work) && pdc_program_run(p, n_in, in, n_out, out) == PDC_OK)
        for (size_t k = 0; k < n_out && verdict; k++) /* the copy's tensors are m's, in m's order */
            if (on[probe->outputs[k]]) verdict = moderate(pdc_tensor_data(out[k]), pdc_tensor_size(out[k]));
done:
    for (size_t k = 0; out && k < n_out; k++) pdc_tensor_destroy(out[k]);
    free(out);
    pdc_program_destroy(p);
    pdc_model_destroy(probe);
    free(on);
    return verdict;
}

static void differential(pdc_context *ctx, const pdc_model *m, const uint8_t *image, size_t size,
                         const pdc_program *ref, const pdc_program *cpu, double work)
{
    size_t n_in = 0, n_out = 0;
    fuzz_check(pdc_program_num_inputs(ref, &n_in) == PDC_OK && pdc_program_num_outputs(ref, &n_out) == PDC_OK, "io");
    pdc_tensor **in = calloc(n_in + 1, sizeof *in), **out_r = calloc(n_out + 1, sizeof *out_r),
               **out_c = calloc(n_out + 1, sizeof *out_c), **out_c2 = calloc(n_out + 1, sizeof *out_c2);
    fuzz_check(in && out_r && out_c && out_c2, "calloc");
    if (make_tensors(ctx, ref, 0, n_in, in, &work) && make_tensors(ctx, ref, 1, n_out, out_r, &work) &&
        make_tensors(ctx, ref, 1, n_out, out_c, &work) && make_tensors(ctx, ref, 1, n_out, out_c2, &work) &&
        work <= RUN_MAX_WORK) {
        pdc_status sr = pdc_program_run(ref, n_in, in, n_out, out_r);
        pdc_status sc = pdc_program_run(cpu, n_in, in, n_out, out_c);
        if (sc != PDC_OK) {
            fuzz_check_failure(ctx, sc, FUZZ_UNTOUCHED, "pdc_program_run (cpu)");
            uint32_t bits = SENTINEL;
            for (size_t o = 0; o < n_out; o++)
                for (size_t i = 0; i < pdc_tensor_size(out_c[o]); i++)
                    fuzz_check(!memcmp(&pdc_tensor_data(out_c[o])[i], &bits, 4), "a failed cpu run wrote output %zu",
                               o);
        }
        fuzz_check(sr == PDC_OK || sr == sc, "ref run %s, cpu run %s: %s", pdc_status_string(sr),
                   pdc_status_string(sc), pdc_context_last_error(ctx));
        if (sr == PDC_OK && sc == PDC_OK) {
            char why[256];
            for (size_t o = 0; o < n_out; o++)
                fuzz_check(!mismatch(out_c[o], out_r[o], o, why, sizeof why) ||
                               !moderate_values(ctx, m, o, image, size, in, n_in),
                           "%s", why);
            fuzz_check(pdc_program_run(cpu, n_in, in, n_out, out_c2) == PDC_OK, "second cpu run failed: %s",
                       pdc_context_last_error(ctx));
            for (size_t o = 0; o < n_out; o++)
                fuzz_check(!memcmp(pdc_tensor_data(out_c[o]), pdc_tensor_data(out_c2[o]), 4 * pdc_tensor_size(out_c[o])),
                           "two cpu runs differ in output %zu", o);
        }
    }
    for (size_t i = 0; i < n_in; i++) pdc_tensor_destroy(in[i]);
    for (size_t o = 0; o < n_out; o++)
        pdc_tensor_destroy(out_r[o]), pdc_tensor_destroy(out_c[o]), pdc_tensor_destroy(out_c2[o]);
    free(in);
    free(out_r);
    free(out_c);
    free(out_c2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pdc_context *ctx = fuzz_context();
    if (pdc_context_set_option(ctx, "cache_dir", "/dev/null/pdc-fuzz-no-kernel-cache") != PDC_OK ||
        pdc_context_set_option(ctx, "log_level", "error") != PDC_OK)
        fuzz_fail("context options: %s", pdc_context_last_error(ctx));
    uint8_t *image = fuzz_copy(data, size);
    fuzz_fix_pdc_image(image, size);
    pdc_model *m = NULL;
    pdc_status st = pdc_model_load_memory(ctx, image, size, &m);
    if (st == PDC_OK && fix_symbolic(m)) {
        double work = model_work(m);
        pdc_program *ref = NULL, *cpu = FUZZ_UNTOUCHED;
        if (work <= RUN_MAX_WORK && pdc_compile(ctx, m, "ref", &ref) == PDC_OK) {
            st = pdc_compile(ctx, m, "cpu", &cpu);
            if (st != PDC_ERR_UNSUPPORTED && st != PDC_ERR_UNKNOWN_TARGET) {
                /* the cpu target may need more memory (packed weights) than max_memory allows */
                fuzz_check(st == PDC_OK || st == PDC_ERR_OUT_OF_MEMORY, "compiles for ref but not for cpu: %s: %s",
                           pdc_status_string(st), pdc_context_last_error(ctx));
                if (st == PDC_OK) differential(ctx, m, image, size, ref, cpu, work);
                else fuzz_check_failure(ctx, st, cpu, "pdc_compile (cpu)");
                if (st == PDC_OK) pdc_program_destroy(cpu);
            }
            pdc_program_destroy(ref);
        }
    }
    pdc_model_destroy(m);
    free(image);
    pdc_context_destroy(ctx);
    return 0;
}
