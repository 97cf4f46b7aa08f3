/*
 * fuzz_cpu_gen.c - libFuzzer target: structure-aware differential testing of the "cpu" target on
 * models made by the generator in model_gen.h (the input bytes are its choices, so every input is a
 * valid model and mutations explore shapes and attributes rather than syntax).
 *
 * Properties: the model compiles for ref and for cpu; outputs agree, |cpu - ref| <= 1e-4 x max(1,
 * max |ref|) (the cpu suite demands 1e-5 on its models; weights here are scaled by 1/sqrt(fan-in) so
 * sums stay moderate); two cpu runs are bit-identical, and so is a run of the same model compiled in
 * a context with threads = 1. The kernel cache is off (cache_dir under /dev/null).
 * Seeds: test/fuzz/corpus/cpu_gen/, one per op family.
 */
#include "test/fuzz/model_gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pdc_context *ctx = cpu_context("0");
    bytes b;
    gen g;
    generate(ctx, data, size, &g, &b);
    pdc_program *ref = compile(ctx, g.m, "ref"), *cpu = compile(ctx, g.m, "cpu");
    fuzz_check(ref != NULL, "ref refused a generated model");
    if (cpu) {
        size_t n_out = 0, n_out2 = 0, n_out3 = 0, n_out4 = 0;
        pdc_tensor *in[2] = {NULL, NULL};
        size_t n_in = make_inputs(&g, ref, in, 2);
        pdc_tensor **yr = run(ctx, ref, in, &n_out), **yc = run(ctx, cpu, in, &n_out2), **yc2 = run(ctx, cpu, in, &n_out3);
        check_close("cpu", yc, yr, n_out);
        for (size_t o = 0; o < n_out; o++)
            fuzz_check(!memcmp(pdc_tensor_data(yc[o]), pdc_tensor_data(yc2[o]), 4 * pdc_tensor_size(yc[o])),
                       "two cpu runs differ");
        /* the same model in a context with one thread gives the same bits */
        pdc_context *one = cpu_context("1");
        pdc_program *cpu1 = compile(one, g.m, "cpu");
        fuzz_check(cpu1 != NULL, "cpu compile with threads = 1");
        pdc_tensor **y1 = run(one, cpu1, in, &n_out4);
        for (size_t o = 0; o < n_out; o++)
            fuzz_check(!memcmp(pdc_tensor_data(yc[o]), pdc_tensor_data(y1[o]), 4 * pdc_tensor_size(yc[o])),
                       "cpu outputs depend on the thread count");
        free_outputs(y1, n_out4);
        pdc_program_destroy(cpu1);
        pdc_context_destroy(one);
        free_outputs(yr, n_out);
        free_outputs(yc, n_out2);
        free_outputs(yc2, n_out3);
        free_inputs(in, n_in);
        pdc_program_destroy(cpu);
    }
    pdc_program_destroy(ref);
    pdc_model_destroy(g.m);
    pdc_context_destroy(ctx);
    return 0;
}
