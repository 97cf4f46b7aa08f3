/*
 * jit.c - one ORC LLJIT session per pdc_context and the kernel pipeline: registry (kernels this
 * session has linked, by hash), disk object cache, or build -> verify -> passes -> object -> link.
 *
 * Everything is linked as object files emitted by our own TargetMachine, whether just built or read
 * from the cache, so a cached kernel is byte-for-byte the code a fresh compile would link.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Object.h>
#include <llvm-c/Orc.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h>

#include "backends/llvm/llvm.h"
#include "generator_id.h" /* PDC_GENERATOR_ID: a hash of the generators' sources (Makefile) */

/* Bump when the meaning of a key or the code generators change in a way keys do not capture. */
#define PDC_JIT_FORMAT 3
/* The pipeline run on every kernel module: generators emit explicit vector code, so O2 is as fast
 * as O3 here and compiles sooner. */
#define PDC_JIT_PIPELINE "default<O2>"

typedef struct jit_entry {
    pdc_hash128 h;
    void *key;          /* full key bytes, compared on a hash match */
    size_t key_len;
} jit_entry;

struct pdc_jit {
    pdc_llvm_target target;
    LLVMOrcLLJITRef lljit;
    LLVMOrcJITDylibRef jd;
    LLVMTargetMachineRef tm;   /* ours: passes and object emission (the JIT owns its own copy) */
    char *key_prefix;          /* format, LLVM version, triple, CPU, features, pipeline */
    size_t key_prefix_len;
    jit_entry *entries;
    size_t n_entries, cap_entries;
    size_t n_built, n_cached, n_shared;
    char cache_checked[PDC_PATH_MAX]; /* the cache_dir last checked by pdc_objcache_usable ("" = none) */
    int cache_ok;                     /* its answer */
};

const pdc_llvm_target *pdc_jit_target(const pdc_jit *jit) { return &jit->target; }

void pdc_jit_stats(const pdc_jit *jit, size_t *built, size_t *cached, size_t *shared)
{
    if (built) *built = jit ? jit->n_built : 0;
    if (cached) *cached = jit ? jit->n_cached : 0;
    if (shared) *shared = jit ? jit->n_shared : 0;
}

/* Consumes err; records its message on ctx. */
static pdc_status llvm_error(const pdc_context *ctx, LLVMErrorRef err, const char *what)
{
    char *msg = LLVMGetErrorMessage(err);
    pdc_status st = pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM: %s: %s", what, msg ? msg : "(no message)");
    LLVMDisposeErrorMessage(msg);
    return st;
}

static void jit_destroy(void *p)
{
    pdc_jit *jit = p;
    if (!jit) return;
    if (jit->lljit) {
        LLVMErrorRef err = LLVMOrcDisposeLLJIT(jit->lljit);
        if (err) LLVMConsumeError(err);
    }
    if (jit->tm) LLVMDisposeTargetMachine(jit->tm);
    for (size_t i = 0; i < jit->n_entries; i++) pdc_free(jit->entries[i].key);
    pdc_free(jit->entries);
    pdc_free(jit->key_prefix);
    pdc_llvm_target_free(&jit->target);
    pdc_free(jit);
}

static LLVMTargetMachineRef make_tm(const pdc_context *ctx, const pdc_llvm_target *t, pdc_status *st)
{
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(t->triple, &target, &msg)) {
        *st = pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM: no target for '%s': %s", t->triple, msg ? msg : "");
        LLVMDisposeMessage(msg);
        return NULL;
    }
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, t->triple, t->cpu, t->features, LLVMCodeGenLevelAggressive,
                                                      LLVMRelocPIC, LLVMCodeModelSmall);
    if (!tm) *st = pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM: cannot create a target machine for %s", t->cpu);
    return tm;
}

static pdc_status jit_create(pdc_context *ctx, pdc_jit **out)
{
    pdc_jit *jit = pdc_calloc(ctx, 1, sizeof *jit);
    if (!jit) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = pdc_llvm_host_target(ctx, &jit->target);
    if (st) {
        pdc_free(jit);
        return st;
    }
    LLVMTargetMachineRef jtm = NULL;
    if (!(jit->tm = make_tm(ctx, &jit->target, &st)) || !(jtm = make_tm(ctx, &jit->target, &st))) goto fail;
    LLVMOrcJITTargetMachineBuilderRef jtmb = LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jtm); /* owns jtm */
    LLVMOrcLLJITBuilderRef jb = LLVMOrcCreateLLJITBuilder();
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(jb, jtmb);
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&jit->lljit, jb); /* consumes jb */
    if (err) {
        jit->lljit = NULL;
        st = llvm_error(ctx, err, "creating the JIT");
        goto fail;
    }
    jit->jd = LLVMOrcLLJITGetMainJITDylib(jit->lljit);
    /* Generated code may call libm/libc (LLVM can turn loops into memset); resolve those from the
     * process. Without a generator every symbol of a module referring to them fails to link. */
    LLVMOrcDefinitionGeneratorRef gen = NULL;
    err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(jit->lljit), NULL, NULL);
    if (err) {
        st = llvm_error(ctx, err, "process symbol generator");
        goto fail;
    }
    LLVMOrcJITDylibAddGenerator(jit->jd, gen);

    char head[256];
    int n = snprintf(head, sizeof head, "pdc-jit %d|gen %s|llvm %s|%s|%s|%s|", PDC_JIT_FORMAT, PDC_GENERATOR_ID,
                     LLVM_VERSION_STRING, jit->target.triple, jit->target.cpu, PDC_JIT_PIPELINE);
    size_t fl = strlen(jit->target.features);
    if (n < 0 || (size_t)n >= sizeof head) {
        st = pdc_error(ctx, PDC_ERR_INTERNAL, "JIT key header too long");
        goto fail;
    }
    jit->key_prefix = pdc_alloc(ctx, (size_t)n + fl + 1);
    if (!jit->key_prefix) {
        st = PDC_ERR_OUT_OF_MEMORY;
        goto fail;
    }
    memcpy(jit->key_prefix, head, (size_t)n);
    memcpy(jit->key_prefix + n, jit->target.features, fl + 1);
    jit->key_prefix_len = (size_t)n + fl;
    *out = jit;
    return PDC_OK;
fail:
    jit_destroy(jit);
    return st;
}

pdc_status pdc_jit_get(pdc_context *ctx, pdc_jit **jit_out)
{
    if (!ctx->jit) {
        pdc_jit *jit = NULL;
        pdc_status st = jit_create(ctx, &jit);
        if (st) return st;
        ctx->jit = jit;
        ctx->jit_destroy = jit_destroy;
    }
    *jit_out = ctx->jit;
    return PDC_OK;
}

/* "pdck_" + 32 hex digits */
static void symbol_prefix(pdc_hash128 h, char *buf, size_t cap)
{
    snprintf(buf, cap, "pdck_%016" PRIx64 "%016" PRIx64, h.hi, h.lo);
}

static pdc_status lookup_all(pdc_jit *jit, const pdc_context *ctx, const char *prefix, const pdc_kernel_desc *d,
                             void **addrs)
{
    for (size_t i = 0; i < d->n_syms; i++) {
        char name[256];
        if (snprintf(name, sizeof name, "%s_%s", prefix, d->syms[i]) >= (int)sizeof name)
            return pdc_error(ctx, PDC_ERR_INTERNAL, "kernel symbol name too long: %s", d->syms[i]);
        LLVMOrcExecutorAddress a = 0;
        LLVMErrorRef err = LLVMOrcLLJITLookup(jit->lljit, &a, name);
        if (err) return llvm_error(ctx, err, name);
        if (!a) return pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM: symbol %s resolved to address 0", name);
        addrs[i] = (void *)(uintptr_t)a;
    }
    return PDC_OK;
}

static pdc_status add_object(pdc_jit *jit, const pdc_context *ctx, const void *obj, size_t len, const char *name)
{
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj, len, name);
    if (!buf) return pdc_error(ctx, PDC_ERR_OUT_OF_MEMORY, "LLVM: cannot copy a %zu-byte object", len);
    LLVMErrorRef err = LLVMOrcLLJITAddObjectFile(jit->lljit, jit->jd, buf); /* takes buf */
    return err ? llvm_error(ctx, err, "adding an object file") : PDC_OK;
}

/* 1 if obj parses as an object file of this host's kind and defines every symbol of d: checked before
 * a cached object is handed to the JIT, whose linker would otherwise fail at the first lookup (a
 * symbol it promised but cannot materialise stays broken for the session). */
static int object_is_loadable(pdc_jit *jit, const void *obj, size_t len, const char *prefix, const pdc_kernel_desc *d)
{
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(obj, len, "cached", 0);
    char *msg = NULL;
    LLVMBinaryRef bin = buf ? LLVMCreateBinary(buf, NULL, &msg) : NULL;
    LLVMDisposeMessage(msg);
    int ok = bin && LLVMBinaryGetType(bin) == LLVMBinaryTypeELF64L;
    size_t found = 0;
    if (ok) {
        char gp = LLVMOrcLLJITGetGlobalPrefix(jit->lljit);
        LLVMSymbolIteratorRef it = LLVMObjectFileCopySymbolIterator(bin);
        for (; it && !LLVMObjectFileIsSymbolIteratorAtEnd(bin, it); LLVMMoveToNextSymbol(it)) {
            const char *name = LLVMGetSymbolName(it);
            if (!name) continue;
            if (gp && *name++ != gp) continue;
            size_t pl = strlen(prefix);
            if (strncmp(name, prefix, pl) || name[pl] != '_') continue;
            for (size_t i = 0; i < d->n_syms; i++)
                if (!strcmp(name + pl + 1, d->syms[i])) found++;
        }
        if (it) LLVMDisposeSymbolIterator(it);
        ok = found >= d->n_syms;
    }
    if (bin) LLVMDisposeBinary(bin);
    if (buf) LLVMDisposeMemoryBuffer(buf);
    return ok;
}

/* Builds, verifies, optimises and emits the module; *obj_out is an LLVM memory buffer. */
static pdc_status build_object(pdc_jit *jit, const pdc_context *ctx, const pdc_kernel_desc *d, const char *prefix,
                               LLVMMemoryBufferRef *obj_out)
{
    LLVMContextRef c = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext(prefix, c);
    LLVMSetTarget(m, LLVMOrcLLJITGetTripleString(jit->lljit));
    LLVMSetDataLayout(m, LLVMOrcLLJITGetDataLayoutStr(jit->lljit));
    pdc_status st = d->emit(d->arg, ctx, &jit->target, c, m, prefix);
    char *msg = NULL;
    if (!st && LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        /* A bug in a generator: never hand such IR to codegen (it may abort the process). */
        st = pdc_error(ctx, PDC_ERR_INTERNAL, "generated IR for %s does not verify: %.400s", prefix, msg ? msg : "");
    }
    LLVMDisposeMessage(msg);
    const char *dump = getenv("PDC_JIT_DUMP"); /* debugging: a directory to write IR and objects into */
    char dpath[PDC_PATH_MAX];
    if (!st && dump && *dump && snprintf(dpath, sizeof dpath, "%s/%s.ll", dump, prefix) < (int)sizeof dpath) {
        char *err = NULL;
        if (LLVMPrintModuleToFile(m, dpath, &err)) pdc_log(ctx, PDC_LOG_WARN, "PDC_JIT_DUMP: %s", err ? err : dpath);
        LLVMDisposeMessage(err);
    }
    if (!st) {
        LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
        LLVMErrorRef err = LLVMRunPasses(m, PDC_JIT_PIPELINE, jit->tm, opts);
        LLVMDisposePassBuilderOptions(opts);
        if (err) st = llvm_error(ctx, err, "running passes");
    }
    if (!st && dump && *dump && snprintf(dpath, sizeof dpath, "%s/%s.s", dump, prefix) < (int)sizeof dpath) {
        LLVMModuleRef mc = LLVMCloneModule(m); /* codegen changes the module it is given */
        char *err = NULL;
        if (LLVMTargetMachineEmitToFile(jit->tm, mc, dpath, LLVMAssemblyFile, &err))
            pdc_log(ctx, PDC_LOG_WARN, "PDC_JIT_DUMP: %s", err ? err : dpath);
        LLVMDisposeMessage(err);
        LLVMDisposeModule(mc);
    }
    if (!st) {
        msg = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(jit->tm, m, LLVMObjectFile, &msg, obj_out)) {
            st = pdc_error(ctx, PDC_ERR_INTERNAL, "LLVM: emitting code for %s: %s", prefix, msg ? msg : "");
            *obj_out = NULL;
        }
        LLVMDisposeMessage(msg);
    }
    LLVMDisposeModule(m);
    LLVMContextDispose(c);
    return st;
}

pdc_status pdc_jit_kernel(pdc_jit *jit, const pdc_context *ctx, const pdc_kernel_desc *d, void **addrs,
                          pdc_kernel_origin *origin_out)
{
    /* The full key: what the code depends on besides the generator's own description. */
    size_t klen = jit->key_prefix_len + 1 + d->key_len;
    uint8_t *key = pdc_alloc(ctx, klen);
    if (!key) return PDC_ERR_OUT_OF_MEMORY;
    memcpy(key, jit->key_prefix, jit->key_prefix_len);
    key[jit->key_prefix_len] = 0;
    memcpy(key + jit->key_prefix_len + 1, d->key, d->key_len);
    pdc_hash128 h;
    pdc_hash128_init(&h);
    pdc_hash128_update(&h, key, klen);
    char prefix[64];
    symbol_prefix(h, prefix, sizeof prefix);

    pdc_status st;
    for (size_t i = 0; i < jit->n_entries; i++) {
        const jit_entry *e = &jit->entries[i];
        if (e->h.lo == h.lo && e->h.hi == h.hi) {
            if (e->key_len != klen || memcmp(e->key, key, klen)) {
                pdc_free(key);
                return pdc_error(ctx, PDC_ERR_INTERNAL, "JIT: 128-bit kernel hash collision (%s)", prefix);
            }
            pdc_free(key);
            st = lookup_all(jit, ctx, prefix, d, addrs);
            if (!st) {
                jit->n_shared++;
                if (origin_out) *origin_out = PDC_KERNEL_SHARED;
            }
            return st;
        }
    }
    if ((st = pdc_grow(ctx, (void **)&jit->entries, &jit->cap_entries, jit->n_entries + 1, sizeof *jit->entries))) {
        pdc_free(key);
        return st;
    }

    pdc_kernel_origin origin = PDC_KERNEL_CACHED;
    void *obj = NULL;
    size_t obj_len = 0;
    LLVMMemoryBufferRef built = NULL;
    /* the cache directory is checked once per session and cache_dir (a warning if refused) */
    if (strcmp(jit->cache_checked, ctx->cache_dir)) {
        jit->cache_ok = pdc_objcache_usable(ctx, ctx->cache_dir);
        snprintf(jit->cache_checked, sizeof jit->cache_checked, "%s", ctx->cache_dir);
    }
    const char *dir = jit->cache_ok ? ctx->cache_dir : NULL;
    int added = 0;
    if (pdc_objcache_load(ctx, dir, h, key, klen, &obj, &obj_len) == PDC_OK) {
        /* a valid entry whose object cannot be loaded is a miss too: rebuilt and replaced */
        added = object_is_loadable(jit, obj, obj_len, prefix, d) && add_object(jit, ctx, obj, obj_len, prefix) == PDC_OK;
        if (!added) pdc_log(ctx, PDC_LOG_INFO, "kernel cache: entry for %s is not a loadable object; rebuilding it", prefix);
        pdc_free(obj);
    }
    if (!added) {
        origin = PDC_KERNEL_BUILT;
        if ((st = build_object(jit, ctx, d, prefix, &built))) {
            pdc_free(key);
            return st;
        }
        obj = (void *)(uintptr_t)LLVMGetBufferStart(built);
        obj_len = LLVMGetBufferSize(built);
        pdc_objcache_store(ctx, dir, h, key, klen, obj, obj_len);
        st = add_object(jit, ctx, obj, obj_len, prefix);
        LLVMDisposeMemoryBuffer(built);
    }
    if (st) {
        pdc_free(key);
        return st;
    }
    /* The object's symbols are defined now; record it before looking up, so that a failed lookup
     * never leads to adding the same definitions twice. */
    jit_entry *e = &jit->entries[jit->n_entries++];
    e->h = h;
    e->key = key;
    e->key_len = klen;
    if ((st = lookup_all(jit, ctx, prefix, d, addrs))) {
        /* a cached object that parsed but does not link: this session cannot take it back, but the
         * next compile must not meet it again */
        if (origin == PDC_KERNEL_CACHED) pdc_objcache_remove(ctx, dir, h);
        return st;
    }
    if (origin == PDC_KERNEL_BUILT) jit->n_built++;
    else jit->n_cached++;
    if (origin_out) *origin_out = origin;
    return PDC_OK;
}
