/*
 * arm_graph.c - the whole-model AArch64 module: memory layout, constants, one internal function
 * per layer, the public entry points, and the object file.
 *
 * Memory: one internal zero-initialised arena holds the activations (at the offsets of the model's
 * memory plan when it has one, else one after another), then copies of the graph inputs, then a
 * scratch area every layer may reuse (conv input packing, recurrent state); its size is known only
 * after every layer is built, so layers address a placeholder global that is replaced at the end.
 * Constants are internal read-only byte arrays (16-byte aligned), embedded only when some layer
 * reads them: a conv embeds its packed kept weights, never the dense tensor.
 *
 * Public symbols, nothing else (so several models link into one program):
 *   int NAME_run(const float *input, float *output)                    one input, one output
 *   int NAME_run(const float *const *inputs, float *const *outputs)    otherwise (model order)
 *   const char NAME_version[]     "pdc <version> aarch64-linux-gnu cpu=<cpu> model=<name>"
 * NAME_run copies the inputs in, runs the layers in order, copies the outputs out, returns 0. The
 * arena is static: one call at a time (not reentrant).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "backends/arm/arm.h"
#include "ir/arena.h"

#define ARM_ALIGN_FLOATS 16
/* Activations plus constants the module may hold: the small code model reaches its data with ADRP
 * (+-4 GiB from the code), so pdc keeps the whole image well inside that. */
#define ARM_MAX_DATA_BYTES ((uint64_t)2 << 30)

static pdc_status too_large(arm_gen *G, uint64_t arena_floats, uint64_t const_bytes)
{
    return pdc_error(G->ctx, PDC_ERR_UNSUPPORTED,
                     "emit: the model needs %" PRIu64 " bytes of activations and %" PRIu64 " bytes of constants; "
                     "an AArch64 library holds at most %" PRIu64 " bytes of them (small code model)",
                     arena_floats * 4, const_bytes, (uint64_t)ARM_MAX_DATA_BYTES);
}

LLVMValueRef arm_arena_at(arm_gen *G, size_t off)
{
    return pdc_irb_gepc(&G->irb, G->irb.f32, G->arena, (int64_t)off);
}

LLVMValueRef arm_const_bytes(arm_gen *G, const void *data, size_t n, const char *what)
{
    char name[64];
    snprintf(name, sizeof name, "c%zu.L%zu.%s", G->n_globals++, G->li, what);
    LLVMValueRef init = LLVMConstStringInContext2(G->irb.c, n ? data : "", n ? n : 1, 1);
    LLVMValueRef gv = LLVMAddGlobal(G->irb.m, LLVMTypeOf(init), name);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
    LLVMSetLinkage(gv, LLVMInternalLinkage);
    LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
    LLVMSetAlignment(gv, 16);
    G->const_bytes += n;
    return gv;
}

pdc_status arm_tensor_ptr(arm_gen *G, int t, LLVMValueRef *out)
{
    *out = NULL;
    if (t < 0 || (size_t)t >= G->m->n_tensors)
        return pdc_error(G->ctx, PDC_ERR_INTERNAL, "emit: layer %zu reads an absent tensor", G->li);
    if (G->off[t] != ARM_NO_SLOT) {
        *out = arm_arena_at(G, G->off[t]);
        return PDC_OK;
    }
    const ir_tensor *tt = &G->m->tensors[t];
    if (tt->kind != IR_TENSOR_CONST || !tt->data)
        return pdc_error(G->ctx, PDC_ERR_INTERNAL, "emit: tensor '%s' has no storage", tt->name);
    if (!G->cglob[t]) G->cglob[t] = arm_const_bytes(G, tt->data, ir_tensor_numel(tt) * sizeof(float), "const");
    *out = G->cglob[t];
    return PDC_OK;
}

LLVMValueRef arm_scratch(arm_gen *G, size_t n)
{
    if (n > G->scratch_floats) G->scratch_floats = n;
    return arm_arena_at(G, G->scratch_off);
}

/* Arena offsets: the plan's, or packed one after another; then the graph inputs. */
static pdc_status layout(arm_gen *G)
{
    const ir_model *m = G->m;
    int planned = 0;
    size_t planned_bytes = 0;
    pdc_status st = ir_arena_get(m, &planned, G->off, &planned_bytes, NULL);
    if (st) return st;
    size_t total = 0;
    if (planned) {
        for (size_t t = 0; t < m->n_tensors; t++)
            if (G->off[t] != SIZE_MAX) G->off[t] /= sizeof(float);
        total = (planned_bytes / sizeof(float) + ARM_ALIGN_FLOATS - 1) / ARM_ALIGN_FLOATS * ARM_ALIGN_FLOATS;
    }
    for (size_t t = 0; t < m->n_tensors; t++) {
        const ir_tensor *tt = &m->tensors[t];
        size_t n = ir_tensor_numel(tt);
        if (!n && tt->kind != IR_TENSOR_CONST)
            return pdc_error(G->ctx, PDC_ERR_UNSUPPORTED, "emit: tensor '%s' is empty or has a symbolic shape",
                             tt->name);
        /* every later size (slots, byte counts of copies, loop bounds) fits once this holds */
        if (tt->kind != IR_TENSOR_CONST && (n > ARM_MAX_DATA_BYTES / 4 || total > ARM_MAX_DATA_BYTES / 4))
            return too_large(G, (uint64_t)total + n, 0);
        if (!planned) G->off[t] = ARM_NO_SLOT;
        if (tt->kind == IR_TENSOR_CONST) {
            G->off[t] = ARM_NO_SLOT;
            continue;
        }
        if ((tt->kind == IR_TENSOR_ACT && !planned) || tt->kind == IR_TENSOR_INPUT) {
            G->off[t] = total;
            total += (n + ARM_ALIGN_FLOATS - 1) / ARM_ALIGN_FLOATS * ARM_ALIGN_FLOATS;
        }
    }
    if (total > ARM_MAX_DATA_BYTES / 4) return too_large(G, total, 0);
    G->scratch_off = total;
    return PDC_OK;
}

static LLVMValueRef internal_fn(arm_gen *G, const char *name)
{
    LLVMValueRef f = pdc_irb_function(&G->irb, "layer", name, 0, NULL);
    LLVMSetLinkage(f, LLVMInternalLinkage);
    return f;
}

static pdc_status emit_layer(arm_gen *G, size_t li, LLVMValueRef *fn_out)
{
    const ir_layer *l = &G->m->layers[li];
    char name[32];
    snprintf(name, sizeof name, "%zu", li);
    G->li = li;
    G->fn = *fn_out = internal_fn(G, name);
    LLVMPositionBuilderAtEnd(G->irb.b, LLVMAppendBasicBlockInContext(G->irb.c, G->fn, "entry"));
    pdc_status st;
    if (l->op == IR_OP_CONV) {
        st = arm_emit_conv(G, l);
    } else {
        st = arm_emit_op(G, l);
        ir_fused_params fp;
        if (!st) st = ir_fused_params_get(G->m, l, &fp);
        if (!st && fp.act != IR_ACT_NONE) {
            LLVMValueRef y;
            if (!(st = arm_tensor_ptr(G, l->outputs[0], &y)))
                arm_act_inplace(G, &fp, y, (int64_t)ir_tensor_numel(&G->m->tensors[l->outputs[0]]));
        }
    }
    if (st) return st;
    LLVMBuildRetVoid(G->irb.b);
    return PDC_OK;
}

/* NAME_run: inputs in, layers, outputs out, return 0. */
static pdc_status emit_run(arm_gen *G, const char *name, LLVMValueRef *layer_fns)
{
    const ir_model *m = G->m;
    LLVMBuilderRef B = G->irb.b;
    char full[96];
    snprintf(full, sizeof full, "%s_run", name);
    LLVMTypeRef params[2] = {G->irb.ptr, G->irb.ptr};
    LLVMValueRef f = LLVMAddFunction(G->irb.m, full, LLVMFunctionType(G->irb.i32, params, 2, 0));
    /* LLVM renames a clashing name silently: the library would then lack NAME_run */
    size_t len = 0;
    if (strcmp(LLVMGetValueName2(f, &len), full))
        return pdc_error(G->ctx, PDC_ERR_INTERNAL, "emit: '%s' clashes with a symbol of the module", full);
    G->fn = f;
    LLVMPositionBuilderAtEnd(B, LLVMAppendBasicBlockInContext(G->irb.c, f, "entry"));
    const int single = m->n_inputs == 1 && m->n_outputs == 1;
    pdc_status st;
    for (size_t i = 0; i < m->n_inputs; i++) {
        LLVMValueRef src = LLVMGetParam(f, 0), dst;
        if (!single) {
            src = LLVMBuildLoad2(B, G->irb.ptr, pdc_irb_gepc(&G->irb, G->irb.ptr, src, (int64_t)i), "");
        }
        if ((st = arm_tensor_ptr(G, m->inputs[i], &dst))) return st;
        LLVMBuildMemCpy(B, dst, 16, src, 4, arm_i64(G, (int64_t)(ir_tensor_numel(&m->tensors[m->inputs[i]]) * 4)));
    }
    LLVMTypeRef vt = LLVMFunctionType(G->void_t, NULL, 0, 0);
    for (size_t li = 0; li < m->n_layers; li++) LLVMBuildCall2(B, vt, layer_fns[li], NULL, 0, "");
    for (size_t i = 0; i < m->n_outputs; i++) {
        LLVMValueRef dst = LLVMGetParam(f, 1), src;
        if (!single) dst = LLVMBuildLoad2(B, G->irb.ptr, pdc_irb_gepc(&G->irb, G->irb.ptr, dst, (int64_t)i), "");
        if ((st = arm_tensor_ptr(G, m->outputs[i], &src))) return st;
        LLVMBuildMemCpy(B, dst, 4, src, 4, arm_i64(G, (int64_t)(ir_tensor_numel(&m->tensors[m->outputs[i]]) * 4)));
    }
    LLVMBuildRet(B, LLVMConstInt(G->irb.i32, 0, 0));
    return PDC_OK;
}

static void emit_version(arm_gen *G, const char *name, const char *cpu)
{
    char full[96], text[512];
    snprintf(full, sizeof full, "%s_version", name);
    snprintf(text, sizeof text, "pdc %s aarch64-linux-gnu cpu=%s model=%s", pdc_version_string(), cpu, name);
    LLVMValueRef init = LLVMConstStringInContext2(G->irb.c, text, strlen(text), 0);
    LLVMValueRef gv = LLVMAddGlobal(G->irb.m, LLVMTypeOf(init), full);
    LLVMSetInitializer(gv, init);
    LLVMSetGlobalConstant(gv, 1);
}

pdc_status arm_build_object(pdc_context *ctx, const ir_model *m, const char *name, const char *cpu, void **obj,
                            size_t *obj_size, size_t *const_bytes)
{
    *obj = NULL;
    *obj_size = 0;
    LLVMTargetMachineRef tm = NULL;
    pdc_status st = pdc_llvm_aot_machine(ctx, "aarch64-unknown-linux-gnu", cpu, "+neon", LLVMRelocPIC, &tm);
    if (st) return st;
    arm_gen G;
    memset(&G, 0, sizeof G);
    G.ctx = ctx;
    G.m = m;
    snprintf(G.t.triple, sizeof G.t.triple, "aarch64-unknown-linux-gnu");
    snprintf(G.t.cpu, sizeof G.t.cpu, "%s", cpu);
    G.t.isa = PDC_ISA_NEON;
    G.t.vec = 4;
    G.t.n_vregs = 32;
    size_t nt = m->n_tensors ? m->n_tensors : 1;
    G.off = pdc_alloc(ctx, nt * sizeof *G.off);
    G.cglob = pdc_calloc(ctx, nt, sizeof *G.cglob);
    LLVMValueRef *fns = pdc_calloc(ctx, m->n_layers ? m->n_layers : 1, sizeof *fns);
    LLVMContextRef c = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext(name, c);
    pdc_llvm_aot_prepare(tm, mod);
    pdc_irb_init(&G.irb, c, mod, 4);
    G.void_t = LLVMVoidTypeInContext(c);
    if (!G.off || !G.cglob || !fns) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = layout(&G);
    if (!st) {
        G.arena = LLVMAddGlobal(mod, LLVMArrayType2(G.irb.f32, 1), "arena.placeholder");
        LLVMSetLinkage(G.arena, LLVMInternalLinkage);
        LLVMSetInitializer(G.arena, LLVMConstNull(LLVMArrayType2(G.irb.f32, 1)));
    }
    for (size_t li = 0; !st && li < m->n_layers; li++) st = emit_layer(&G, li, &fns[li]);
    if (!st) st = emit_run(&G, name, fns);
    if (!st && ((uint64_t)G.scratch_off + G.scratch_floats + G.const_bytes / 4 > ARM_MAX_DATA_BYTES / 4))
        st = too_large(&G, (uint64_t)G.scratch_off + G.scratch_floats, G.const_bytes);
    if (!st) {
        emit_version(&G, name, cpu);
        uint64_t total = G.scratch_off + G.scratch_floats;
        LLVMTypeRef at = LLVMArrayType2(G.irb.f32, total ? total : 1);
        LLVMValueRef arena = LLVMAddGlobal(mod, at, "arena");
        LLVMSetLinkage(arena, LLVMInternalLinkage);
        LLVMSetInitializer(arena, LLVMConstNull(at));
        LLVMSetAlignment(arena, 64);
        LLVMReplaceAllUsesWith(G.arena, arena);
        LLVMDeleteGlobal(G.arena);
        char what[96];
        snprintf(what, sizeof what, "model '%s' (aarch64)", name);
        st = pdc_llvm_aot_emit(ctx, tm, mod, what, LLVMObjectFile, obj, obj_size);
    }
    if (const_bytes) *const_bytes = G.const_bytes;
    pdc_irb_dispose(&G.irb);
    LLVMDisposeModule(mod);
    LLVMContextDispose(c);
    LLVMDisposeTargetMachine(tm);
    pdc_free(G.off);
    pdc_free(G.cglob);
    pdc_free(fns);
    return st;
}
