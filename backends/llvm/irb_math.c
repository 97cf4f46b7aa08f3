/*
 * irb_math.c - exp, sigmoid and tanh as straight-line IR over floats or float vectors, for kernels
 * that cannot call libm (a JIT'd loop calling expf per lane runs scalar). All rest on one exp:
 * x = n ln2 + r with |r| <= ln2/2, e^r by its Taylor series, 2^n written into the exponent bits.
 * About 2 ulp against the reference kernel's double-precision formulas; NaN stays NaN. Integer
 * tricks use only adds, shifts and bitcasts, so no value (NaN included) reaches a poison-producing
 * fptosi. pdc_irb_act puts them beside the other activations, for every kernel that applies one.
 */
#include "backends/llvm/llvm.h"
#include "ir/ops/params.h"

/* The integer type with v's shape (i32 or <vec x i32>). */
static LLVMTypeRef int_like(pdc_irb *irb, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMVectorType(irb->i32, LLVMGetVectorSize(t)) : irb->i32;
}

static LLVMValueRef ci(LLVMTypeRef t, int32_t v)
{
    LLVMTypeRef e = LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t) : t;
    LLVMValueRef s = LLVMConstInt(e, (unsigned long long)(int64_t)v, 1);
    if (e == t) return s;
    LLVMValueRef lanes[64];
    unsigned n = LLVMGetVectorSize(t);
    for (unsigned i = 0; i < n; i++) lanes[i] = s;
    return LLVMConstVector(lanes, n);
}

/* v < lo ? lo : v, then > hi ? hi : v (a NaN compares false and passes through). */
static LLVMValueRef clamp(pdc_irb *irb, LLVMValueRef v, float lo, float hi)
{
    LLVMBuilderRef B = irb->b;
    LLVMValueRef l = pdc_irb_f32_like(irb, v, lo), h = pdc_irb_f32_like(irb, v, hi);
    v = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, v, l, ""), l, v, "");
    return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, v, h, ""), h, v, "");
}

/* Horner: c[0] + x (c[1] + x (... c[n-1])). */
static LLVMValueRef poly(pdc_irb *irb, LLVMValueRef x, const float *c, int n)
{
    LLVMValueRef p = pdc_irb_f32_like(irb, x, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) p = pdc_irb_fma(irb, p, x, pdc_irb_f32_like(irb, x, c[i]));
    return p;
}

LLVMValueRef pdc_irb_exp(pdc_irb *irb, LLVMValueRef x)
{
    LLVMBuilderRef B = irb->b;
    static const float taylor[8] = {1.0f, 1.0f, 1.0f / 2, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer, kept in the low mantissa bits */
    x = clamp(irb, x, -87.3f, 88.3f);
    LLVMValueRef t = pdc_irb_fma(irb, x, pdc_irb_f32_like(irb, x, 1.44269504f), pdc_irb_f32_like(irb, x, magic));
    LLVMValueRef n = LLVMBuildFSub(B, t, pdc_irb_f32_like(irb, x, magic), "");
    /* r = x - n ln2 in two steps (Cody-Waite): n * 0.693359375 is exact for |n| < 2^15 */
    LLVMValueRef r = pdc_irb_fma(irb, n, pdc_irb_f32_like(irb, x, -0.693359375f), x);
    r = pdc_irb_fma(irb, n, pdc_irb_f32_like(irb, x, 2.12194440e-4f), r);
    LLVMValueRef er = poly(irb, r, taylor, 8); /* |r|^8/8! < 6e-9 */
    /* t's bits are 0x4b400000 + n; shifted left by 23 only n << 23 is left, and + 127 << 23 makes 2^n */
    LLVMTypeRef it = int_like(irb, x);
    LLVMValueRef bits = LLVMBuildShl(B, LLVMBuildBitCast(B, t, it, ""), ci(it, 23), "");
    bits = LLVMBuildAdd(B, bits, ci(it, 127 << 23), "");
    return LLVMBuildFMul(B, er, LLVMBuildBitCast(B, bits, LLVMTypeOf(x), ""), "");
}

static LLVMValueRef sigmoid_ir(pdc_irb *irb, LLVMValueRef x)
{
    LLVMBuilderRef B = irb->b;
    LLVMValueRef one = pdc_irb_f32_like(irb, x, 1.0f);
    return LLVMBuildFDiv(B, one, LLVMBuildFAdd(B, one, pdc_irb_exp(irb, LLVMBuildFNeg(B, x, "")), ""), "");
}

static LLVMValueRef tanh_ir(pdc_irb *irb, LLVMValueRef x)
{
    LLVMBuilderRef B = irb->b;
    /* odd Taylor series below 0.5 (1 - 2/(e^2a + 1) loses bits to cancellation near 0; the first
     * term left out, 929569/638512875 a^15, is below 4.5e-8 there), that formula above */
    static const float series[7] = {1.0f, -1.0f / 3, 2.0f / 15, -17.0f / 315, 62.0f / 2835, -1382.0f / 155925,
                                    21844.0f / 6081075};
    LLVMTypeRef it = int_like(irb, x);
    LLVMValueRef xi = LLVMBuildBitCast(B, x, it, "");
    LLVMValueRef sign = LLVMBuildAnd(B, xi, ci(it, INT32_MIN), "");
    LLVMValueRef a = LLVMBuildBitCast(B, LLVMBuildAnd(B, xi, ci(it, INT32_MAX), ""), LLVMTypeOf(x), "");
    LLVMValueRef small = LLVMBuildFMul(B, a, poly(irb, LLVMBuildFMul(B, a, a, ""), series, 7), "");
    LLVMValueRef one = pdc_irb_f32_like(irb, x, 1.0f), two = pdc_irb_f32_like(irb, x, 2.0f);
    LLVMValueRef e = pdc_irb_exp(irb, LLVMBuildFMul(B, two, a, ""));
    LLVMValueRef large = LLVMBuildFSub(B, one, LLVMBuildFDiv(B, two, LLVMBuildFAdd(B, e, one, ""), ""), "");
    LLVMValueRef below = LLVMBuildFCmp(B, LLVMRealOLT, a, pdc_irb_f32_like(irb, x, 0.5f), "");
    LLVMValueRef v = LLVMBuildSelect(B, below, small, large, "");
    /* the sign bit of x back on |tanh| (a NaN keeps its own) */
    LLVMValueRef vi = LLVMBuildOr(B, LLVMBuildBitCast(B, v, it, ""), sign, "");
    return LLVMBuildBitCast(B, vi, LLVMTypeOf(x), "");
}

LLVMValueRef pdc_irb_act(pdc_irb *irb, const ir_fused_params *p, LLVMValueRef v)
{
    LLVMBuilderRef B = irb->b;
    LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(v));
    switch (p->act) {
    case IR_ACT_NONE: return v;
    /* v <= 0 ? 0 : v: a NaN compares false and passes through (as ONNX Runtime; maxnum would drop it) */
    case IR_ACT_RELU: return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLE, v, zero, ""), zero, v, "");
    case IR_ACT_CLIP: return clamp(irb, v, p->act_min, p->act_max);
    case IR_ACT_LEAKY_RELU: {
        LLVMValueRef neg = LLVMBuildFMul(B, pdc_irb_f32_like(irb, v, p->act_alpha), v, "");
        return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGE, v, zero, ""), v, neg, "");
    }
    case IR_ACT_SIGMOID: return sigmoid_ir(irb, v);
    case IR_ACT_TANH: return tanh_ir(irb, v);
    case IR_ACT_HARDSWISH: {
        /* x * clamp(x + 3, 0, 6) / 6, multiplied, then divided, in the reference's order */
        LLVMValueRef t = clamp(irb, LLVMBuildFAdd(B, v, pdc_irb_f32_like(irb, v, 3.0f), ""), 0.0f, 6.0f);
        return LLVMBuildFDiv(B, LLVMBuildFMul(B, v, t, ""), pdc_irb_f32_like(irb, v, 6.0f), "");
    }
    }
    return v;
}
