/*
 * target.c - LLVM native-target initialisation and the host description kernels are built for:
 * CPU name and feature string from LLVM at run time, optional narrowing through PDC_CPU /
 * PDC_CPU_FEATURES (for tests), validated here because LLVM only prints a warning for an unknown
 * name and carries on, and the vector ISA that follows from the features.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/ErrorHandling.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include "backends/llvm/llvm.h"

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_failed;

/* LLVM aborts after a fatal error whatever the handler does; the handler only makes the last
 * words readable. Our modules are verified first, so this is not expected to run. */
static void fatal_handler(const char *reason)
{
    (void)reason; /* LLVM has already printed "LLVM ERROR: <reason>" */
}

static void init_native(void)
{
    /* the asm parser: kernels may carry inline asm for an instruction LLVM would not pick */
    if (LLVMInitializeNativeTarget() || LLVMInitializeNativeAsmPrinter() || LLVMInitializeNativeAsmParser()) {
        init_failed = 1;
        return;
    }
    LLVMInstallFatalErrorHandler(fatal_handler);
}

pdc_status pdc_llvm_init(const pdc_context *ctx)
{
    if (pthread_once(&init_once, init_native) != 0 || init_failed)
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "LLVM has no native target for this host");
    return PDC_OK;
}

const char *pdc_isa_name(pdc_isa isa)
{
    switch (isa) {
    case PDC_ISA_AVX512: return "avx512";
    case PDC_ISA_AVX2: return "avx2";
    case PDC_ISA_SSE: return "sse";
    case PDC_ISA_NEON: return "neon";
    }
    return "?";
}

/* CPU names accepted in PDC_CPU besides the host's own: generic x86-64 levels and common cores.
 * The name only tunes scheduling; instructions come from the feature string. */
static const char *const known_cpus[] = {
    "generic",     "x86-64",         "x86-64-v2", "x86-64-v3",      "x86-64-v4",  "haswell",
    "broadwell",   "skylake",        "skylake-avx512", "cascadelake", "icelake-server", "sapphirerapids",
    "znver2",      "znver3",         "znver4",    "znver5",
};

/* State of feature `name` (len bytes) in a "+a,-b,..." list: 1 on, 0 off, -1 not listed. The
 * last entry wins, as in LLVM. */
static int feature_state(const char *list, const char *name, size_t len)
{
    int state = -1;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n == len + 1 && (p[0] == '+' || p[0] == '-') && !memcmp(p + 1, name, len)) state = p[0] == '+';
        p += n;
        if (*p == ',') p++;
    }
    return state;
}

static int has_feature(const char *list, const char *name) { return feature_state(list, name, strlen(name)) == 1; }

/* Appends PDC_CPU_FEATURES to the host list after checking every entry. */
static pdc_status apply_feature_override(const pdc_context *ctx, const char *host, const char *ov, char **out)
{
    size_t hl = strlen(host), ol = strlen(ov);
    for (const char *p = ov; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n < 2 || (p[0] != '+' && p[0] != '-'))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                             "PDC_CPU_FEATURES: entry '%.*s' must be +name or -name (comma-separated)", (int)n, p);
        int st = feature_state(host, p + 1, n - 1);
        if (st < 0)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "PDC_CPU_FEATURES: '%.*s' is not a feature LLVM knows for this host",
                             (int)(n - 1), p + 1);
        if (p[0] == '+' && st == 0)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                             "PDC_CPU_FEATURES: cannot enable '%.*s': this CPU does not have it (only '-' narrows)",
                             (int)(n - 1), p + 1);
        p += n;
        if (*p == ',') p++;
    }
    char *s = pdc_alloc(ctx, hl + 1 + ol + 1);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    memcpy(s, host, hl);
    size_t k = hl;
    if (ol) {
        if (k) s[k++] = ',';
        memcpy(s + k, ov, ol);
        k += ol;
    }
    s[k] = 0;
    *out = s;
    return PDC_OK;
}

pdc_status pdc_llvm_host_target(const pdc_context *ctx, pdc_llvm_target *t)
{
    memset(t, 0, sizeof *t);
    pdc_status st = pdc_llvm_init(ctx);
    if (st) return st;
    char *triple = LLVMGetDefaultTargetTriple();
    char *cpu = LLVMGetHostCPUName();
    char *feat = LLVMGetHostCPUFeatures();
    if (!triple || !cpu || !feat) {
        st = pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM could not describe the host CPU");
        goto done;
    }
    if (strlen(triple) >= sizeof t->triple || strlen(cpu) >= sizeof t->cpu) {
        st = pdc_error(ctx, PDC_ERR_INTERNAL, "host triple or CPU name too long: '%s' '%s'", triple, cpu);
        goto done;
    }
    strcpy(t->triple, triple);
    strcpy(t->cpu, cpu);
    const char *want_cpu = getenv("PDC_CPU");
    if (want_cpu && *want_cpu) {
        int ok = !strcmp(want_cpu, cpu);
        for (size_t i = 0; !ok && i < sizeof known_cpus / sizeof known_cpus[0]; i++) ok = !strcmp(want_cpu, known_cpus[i]);
        if (!ok || strlen(want_cpu) >= sizeof t->cpu) {
            st = pdc_error(ctx, PDC_ERR_INVALID_ARG,
                           "PDC_CPU: '%s' is not a known CPU (use the host's '%s', generic, x86-64[-v2|-v3|-v4], "
                           "haswell, skylake-avx512, znver4, ...)",
                           want_cpu, cpu);
            goto done;
        }
        strcpy(t->cpu, want_cpu);
    }
    const char *ov = getenv("PDC_CPU_FEATURES");
    if ((st = apply_feature_override(ctx, feat, ov ? ov : "", &t->features))) goto done;
    if (has_feature(t->features, "avx512f") && has_feature(t->features, "avx2") && has_feature(t->features, "fma") &&
        feature_state(t->features, "evex512", 7) != 0) {
        t->isa = PDC_ISA_AVX512;
        t->vec = 16;
        t->n_vregs = 32;
    } else if (has_feature(t->features, "avx2") && has_feature(t->features, "fma")) {
        t->isa = PDC_ISA_AVX2;
        t->vec = 8;
        t->n_vregs = 16;
    } else {
        t->isa = PDC_ISA_SSE;
        t->vec = 4;
        t->n_vregs = 16;
    }
done:
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    if (st) pdc_llvm_target_free(t);
    return st;
}

void pdc_llvm_target_free(pdc_llvm_target *t)
{
    if (!t) return;
    pdc_free(t->features);
    t->features = NULL;
}
