/*
 * aot.c - ahead-of-time code generation for a machine other than the host (the "aarch64-linux-gnu"
 * and "nvptx" emitters, and the gpu target's PTX): target initialisation by name, a target machine
 * for a validated CPU, and verify -> optimise -> emit of a whole module into memory.
 *
 * LLVM's per-target initialisers are separate C functions, so the targets pdc emits for are listed
 * here explicitly; each is initialised once per process.
 */
#include <pthread.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "backends/llvm/llvm.h"

static pthread_once_t aarch64_once = PTHREAD_ONCE_INIT, nvptx_once = PTHREAD_ONCE_INIT;

static void init_aarch64(void)
{
    LLVMInitializeAArch64TargetInfo();
    LLVMInitializeAArch64Target();
    LLVMInitializeAArch64TargetMC();
    LLVMInitializeAArch64AsmPrinter();
}

static void init_nvptx(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

pdc_status pdc_llvm_aot_machine(const pdc_context *ctx, const char *triple, const char *cpu, const char *features,
                                LLVMRelocMode reloc, LLVMTargetMachineRef *tm_out)
{
    *tm_out = NULL;
    if (!strncmp(triple, "aarch64", 7)) pthread_once(&aarch64_once, init_aarch64);
    else if (!strncmp(triple, "nvptx64", 7)) pthread_once(&nvptx_once, init_nvptx);
    else return pdc_error(ctx, PDC_ERR_INTERNAL, "aot: no initialiser for triple '%s'", triple);
    LLVMTargetRef t = NULL;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(triple, &t, &msg)) {
        pdc_status st = pdc_error(ctx, PDC_ERR_UNSUPPORTED, "aot: this LLVM cannot generate code for '%s': %s", triple,
                                  msg ? msg : "");
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    *tm_out = LLVMCreateTargetMachine(t, triple, cpu, features ? features : "", LLVMCodeGenLevelAggressive, reloc,
                                      LLVMCodeModelDefault);
    if (!*tm_out) return pdc_error(ctx, PDC_ERR_INTERNAL, "aot: LLVM made no target machine for %s / %s", triple, cpu);
    return PDC_OK;
}

void pdc_llvm_aot_prepare(LLVMTargetMachineRef tm, LLVMModuleRef m)
{
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMSetTarget(m, triple);
    LLVMDisposeMessage(triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(m, dl);
    LLVMDisposeTargetData(dl);
}

pdc_status pdc_llvm_aot_emit(const pdc_context *ctx, LLVMTargetMachineRef tm, LLVMModuleRef m, const char *what,
                             LLVMCodeGenFileType kind, void **data_out, size_t *size_out)
{
    *data_out = NULL;
    *size_out = 0;
    char *msg = NULL;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        /* a generator bug: never hand such IR to codegen (it may abort the process) */
        pdc_status st = pdc_error(ctx, PDC_ERR_INTERNAL, "generated IR for %s does not verify: %.400s", what,
                                  msg ? msg : "");
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMErrorRef err = LLVMRunPasses(m, "default<O3>", tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (err) {
        char *e = LLVMGetErrorMessage(err);
        pdc_status st = pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM: optimising %s: %s", what, e ? e : "");
        LLVMDisposeErrorMessage(e);
        return st;
    }
    LLVMMemoryBufferRef buf = NULL;
    msg = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, kind, &msg, &buf)) {
        pdc_status st = pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM: emitting code for %s: %s", what, msg ? msg : "");
        LLVMDisposeMessage(msg);
        return st;
    }
    LLVMDisposeMessage(msg);
    size_t n = LLVMGetBufferSize(buf);
    /* one extra NUL: PTX text is handed to the driver as a C string */
    char *copy = pdc_alloc(ctx, n + 1);
    if (copy) {
        memcpy(copy, LLVMGetBufferStart(buf), n);
        copy[n] = 0;
    }
    LLVMDisposeMemoryBuffer(buf);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    *data_out = copy;
    *size_out = n;
    return PDC_OK;
}
