/*
 * compile_auto.c - pdc_compile(ctx, model, "auto", ...): the target predicted fastest. cpu by its
 * calibrated model (lib/cost/cost.h), gpu, when device 0 answers, by the roofline of its attributes
 * (lib/cost/gpu_cost.h); the faster is compiled first, the other where it does not compile (an op
 * it cannot take, max_memory exceeded), ref only where neither does. A PDC_NOTE_TARGET_CHOSEN note
 * says what was chosen and why (pdc inspect --target auto prints it).
 */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "backends/gpu/gpu_props.h"
#include "lib/api_internal.h"
#include "lib/cost/cost.h"
#include "lib/cost/gpu_cost.h"

pdc_status pdc_compile_auto(pdc_context *ctx, const pdc_model *model, pdc_program **program_out)
{
    pdc_status st = pdc_check_compilable(model);
    if (st) return st;
    cost_profile prof;
    char why[1024], cpu_txt[256], gpu_txt[512], cpu_why[600] = "", gpu_why[600] = "";
    double cpu_ms = 0, gpu_ms = 0;
    int threads = ctx->threads > 0 ? ctx->threads : omp_get_num_procs();
    if (threads < 1) threads = 1;
    if ((st = cost_profile_for_host(ctx, NULL, &prof, why, sizeof why))) return st;
    if ((st = cost_predict_model(ctx, model, &prof, threads, &cpu_ms, NULL))) return st;
    snprintf(cpu_txt, sizeof cpu_txt, "predicted %.3f ms on %d thread%s (%s)", cpu_ms, threads, threads == 1 ? "" : "s",
             why[0] ? "default constants" : "calibrated profile");
    gpu_props g;
    st = gpu_props_query(ctx, &g);
    if (st == PDC_ERR_INVALID_ARG || st == PDC_ERR_OUT_OF_MEMORY) return st; /* a bad PDC_GPU_EMULATE_PROPS */
    const int have_gpu = st == PDC_OK;
    if (have_gpu) {
        if ((st = cost_gpu_predict_model(model, &g, &gpu_ms, NULL, NULL))) return st;
        snprintf(gpu_txt, sizeof gpu_txt,
                 "predicted %.3f ms on '%s' (roofline: %d SMs sm_%d%d at %.0f MHz, %.0f GFLOP/s, %.0f GB/s; "
                 "efficiencies stated, unvalidated on real hardware)",
                 gpu_ms, g.name, g.sms, g.cc_major, g.cc_minor, g.clock_khz / 1e3, gpu_props_peak_flops(&g) / 1e9,
                 gpu_props_bandwidth(&g) / 1e9);
    } else {
        snprintf(gpu_why, sizeof gpu_why, "%s", pdc_context_last_error(ctx));
    }

    if (have_gpu && gpu_ms < cpu_ms) {
        st = pdc_compile(ctx, model, "gpu", program_out);
        if (st == PDC_OK) {
            pdc_note(ctx, PDC_NOTE_TARGET_CHOSEN, "compile", "", "chose gpu: %s; cpu %s", gpu_txt, cpu_txt);
            return PDC_OK;
        }
        if (st == PDC_ERR_INVALID_MODEL || st == PDC_ERR_SHAPE) return st;
        snprintf(gpu_why, sizeof gpu_why, "%s", pdc_context_last_error(ctx));
        st = pdc_compile(ctx, model, "cpu", program_out);
        if (st == PDC_OK) {
            pdc_note(ctx, PDC_NOTE_TARGET_CHOSEN, "compile", "", "chose cpu: %s; gpu %s but did not compile (%s)",
                     cpu_txt, gpu_txt, gpu_why);
            return PDC_OK;
        }
        snprintf(cpu_why, sizeof cpu_why, "%s", pdc_context_last_error(ctx));
    } else {
        st = pdc_compile(ctx, model, "cpu", program_out);
        if (st == PDC_OK) {
            if (have_gpu) pdc_note(ctx, PDC_NOTE_TARGET_CHOSEN, "compile", "", "chose cpu: %s; gpu %s", cpu_txt, gpu_txt);
            else
                pdc_note(ctx, PDC_NOTE_TARGET_CHOSEN, "compile", "",
                         "chose cpu: %s; gpu not weighed (%s); ref only where nothing else compiles", cpu_txt, gpu_why);
            return PDC_OK;
        }
        if (st == PDC_ERR_INVALID_MODEL || st == PDC_ERR_SHAPE) return st;
        snprintf(cpu_why, sizeof cpu_why, "%s", pdc_context_last_error(ctx));
        if (have_gpu) {
            st = pdc_compile(ctx, model, "gpu", program_out);
            if (st == PDC_OK) {
                pdc_note(ctx, PDC_NOTE_TARGET_CHOSEN, "compile", "", "chose gpu: cpu did not compile (%s); gpu %s",
                         cpu_why, gpu_txt);
                return PDC_OK;
            }
            snprintf(gpu_why, sizeof gpu_why, "%s", pdc_context_last_error(ctx));
        }
    }
    st = pdc_compile(ctx, model, "ref", program_out);
    if (st == PDC_OK)
        pdc_note(ctx, PDC_NOTE_TARGET_CHOSEN, "compile", "", "chose ref: cpu did not compile (%s); gpu did not (%s)",
                 cpu_why, gpu_why);
    return st;
}
