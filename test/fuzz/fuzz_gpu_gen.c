/*
 * fuzz_gpu_gen.c - libFuzzer target: differential testing of the "gpu" target's kernel generators
 * without a GPU, on models made by the generator in model_gen.h. The gpu target runs on its emulated
 * device (PDC_GPU_EMULATE=1: the PTX kernels' bodies JIT'd for the host and run over every (block,
 * thread) index, tiled kernels phase by phase between barriers), so plan, arenas, launch list and
 * kernel code are what a GPU would run.
 *
 * Properties: the model compiles for ref and for gpu; outputs agree, |gpu - ref| <= 1e-4 x max(1,
 * max |ref|); two gpu runs are bit-identical. Seeds: test/fuzz/corpus/gpu_gen/ (the cpu_gen seeds:
 * the same generator).
 */
#include "test/fuzz/model_gen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setenv("PDC_GPU_EMULATE", "1", 1);
    pdc_context *ctx = cpu_context("1");
    bytes b;
    gen g;
    generate(ctx, data, size, &g, &b);
    pdc_program *ref = compile(ctx, g.m, "ref"), *gpu = compile(ctx, g.m, "gpu");
    fuzz_check(ref != NULL, "ref refused a generated model");
    fuzz_check(gpu != NULL, "gpu (emulated) refused a generated model");
    size_t n_out = 0, n_out2 = 0, n_out3 = 0;
    pdc_tensor *in[2] = {NULL, NULL};
    size_t n_in = make_inputs(&g, ref, in, 2);
    pdc_tensor **yr = run(ctx, ref, in, &n_out), **yg = run(ctx, gpu, in, &n_out2), **yg2 = run(ctx, gpu, in, &n_out3);
    check_close("gpu", yg, yr, n_out);
    for (size_t o = 0; o < n_out; o++)
        fuzz_check(!memcmp(pdc_tensor_data(yg[o]), pdc_tensor_data(yg2[o]), 4 * pdc_tensor_size(yg[o])),
                   "two gpu runs differ");
    free_outputs(yr, n_out);
    free_outputs(yg, n_out2);
    free_outputs(yg2, n_out3);
    free_inputs(in, n_in);
    pdc_program_destroy(gpu);
    pdc_program_destroy(ref);
    pdc_model_destroy(g.m);
    pdc_context_destroy(ctx);
    return 0;
}
