/*
 * fused.c - the attributes that passes attach to weighted layers (documented in ir/ops/ops.def, "Pass
 * attributes"): a fused activation on conv/fc/gemm (canonicalize) and the output-channel
 * permutation of a conv (reorder). Decoded and checked here, so shape inference (and with it the
 * builder, both file readers and the verifier) rejects a malformed one with a message naming the
 * layer, and every backend reads them the same way.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "ir/ops/params.h"

#define LAYER_ERR(m, l, status, fmt, ...)                                                              \
    pdc_error((m)->ctx, (status), "layer '%s' (%s): " fmt, (l)->name, ir_op_get_info((l)->op)->name, \
              __VA_ARGS__)

static const char *const act_names[] = {
    [IR_ACT_NONE] = "none",         [IR_ACT_RELU] = "relu", [IR_ACT_CLIP] = "clip",
    [IR_ACT_LEAKY_RELU] = "leaky_relu", [IR_ACT_SIGMOID] = "sigmoid", [IR_ACT_TANH] = "tanh",
    [IR_ACT_HARDSWISH] = "hardswish",
};
#define N_ACTS (sizeof act_names / sizeof act_names[0])

const char *ir_act_name(ir_act_kind act) { return (unsigned)act < N_ACTS ? act_names[act] : "?"; }

int ir_act_from_op(ir_op op, ir_act_kind *act)
{
    switch (op) {
    case IR_OP_RELU: *act = IR_ACT_RELU; return 1;
    case IR_OP_CLIP: *act = IR_ACT_CLIP; return 1;
    case IR_OP_LEAKY_RELU: *act = IR_ACT_LEAKY_RELU; return 1;
    case IR_OP_SIGMOID: *act = IR_ACT_SIGMOID; return 1;
    case IR_OP_TANH: *act = IR_ACT_TANH; return 1;
    case IR_OP_HARDSWISH: *act = IR_ACT_HARDSWISH; return 1;
    default: return 0;
    }
}

int ir_act_layer_params(const ir_layer *l, ir_fused_params *p)
{
    memset(p, 0, sizeof *p);
    if (!ir_act_from_op(l->op, &p->act)) return 0;
    p->act_min = ir_attr_float(&l->attrs, "min", -INFINITY);
    p->act_max = ir_attr_float(&l->attrs, "max", INFINITY);
    p->act_alpha = ir_attr_float(&l->attrs, "alpha", 0.01f);
    return 1;
}

static int takes_activation(ir_op op) { return op == IR_OP_CONV || op == IR_OP_FC || op == IR_OP_GEMM; }

/* A float attribute (an int is accepted, as ir_attr_float does); absent -> dflt. */
static pdc_status float_attr(const ir_model *m, const ir_layer *l, const char *name, float dflt, float *out)
{
    const ir_attr *at = ir_attrs_find(&l->attrs, name);
    *out = dflt;
    if (!at) return PDC_OK;
    if (at->type != IR_ATTR_FLOAT && at->type != IR_ATTR_INT)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s must be a float", name);
    *out = at->type == IR_ATTR_FLOAT ? at->f : (float)at->i;
    if (isnan(*out)) return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s is NaN", name);
    return PDC_OK;
}

static pdc_status get_activation(const ir_model *m, const ir_layer *l, ir_fused_params *p)
{
    const ir_attr *at = ir_attrs_find(&l->attrs, "activation");
    const char *only = NULL; /* an act_* attribute present without its activation */
    if (!at) {
        if (ir_attrs_find(&l->attrs, "act_min")) only = "act_min";
        else if (ir_attrs_find(&l->attrs, "act_max")) only = "act_max";
        else if (ir_attrs_find(&l->attrs, "act_alpha")) only = "act_alpha";
        if (only) return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute %s needs attribute activation", only);
        return PDC_OK;
    }
    if (!takes_activation(l->op))
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute activation is only allowed on %s", "conv, fc and gemm");
    if (at->type != IR_ATTR_STRING)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute activation must be a string (%s)",
                         "relu, clip, leaky_relu, sigmoid, tanh or hardswish");
    p->act = IR_ACT_NONE;
    for (size_t i = 1; i < N_ACTS; i++)
        if (!strcmp(at->s, act_names[i])) p->act = (ir_act_kind)i;
    if (p->act == IR_ACT_NONE)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL,
                         "activation \"%s\" is unknown (expected relu, clip, leaky_relu, sigmoid, tanh or hardswish)",
                         at->s);
    pdc_status st;
    if ((st = float_attr(m, l, "act_min", -INFINITY, &p->act_min)) ||
        (st = float_attr(m, l, "act_max", INFINITY, &p->act_max)) ||
        (st = float_attr(m, l, "act_alpha", 0.01f, &p->act_alpha)))
        return st;
    if (p->act != IR_ACT_CLIP && (ir_attrs_find(&l->attrs, "act_min") || ir_attrs_find(&l->attrs, "act_max")))
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attributes act_min/act_max belong to activation clip, not %s",
                         at->s);
    if (p->act != IR_ACT_LEAKY_RELU && ir_attrs_find(&l->attrs, "act_alpha"))
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute act_alpha belongs to activation leaky_relu, not %s",
                         at->s);
    if (p->act_min > p->act_max)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "act_min %g is greater than act_max %g", (double)p->act_min,
                         (double)p->act_max);
    return PDC_OK;
}

static pdc_status get_out_perm(const ir_model *m, const ir_layer *l, ir_fused_params *p)
{
    const ir_attr *at = ir_attrs_find(&l->attrs, "out_perm");
    if (!at) return PDC_OK;
    if (l->op != IR_OP_CONV)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute out_perm is only allowed on %s", "conv");
    if (at->type != IR_ATTR_INTS)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute out_perm must be a list of ints (%s)",
                         "one output channel per stored filter");
    int64_t group = ir_attr_int(&l->attrs, "group", 1);
    if (group != 1)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute out_perm needs group 1 (group is %" PRId64 ")", group);
    const ir_tensor *w = l->n_inputs > 1 && l->inputs[1] >= 0 ? &m->tensors[l->inputs[1]] : NULL;
    if (!w || w->rank < 1) return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "attribute out_perm needs a %s", "weight");
    int64_t o = w->dims[0];
    if ((int64_t)at->n != o)
        return LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "out_perm has %zu entries, expected %" PRId64 " (output channels)",
                         at->n, o);
    /* A permutation of 0..o-1: every value in range and seen once. */
    uint8_t *seen = pdc_calloc(m->ctx, at->n ? at->n : 1, 1);
    if (!seen) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = PDC_OK;
    for (size_t j = 0; j < at->n && !st; j++) {
        int64_t v = at->ints[j];
        if (v < 0 || v >= o || seen[v]++)
            st = LAYER_ERR(m, l, PDC_ERR_INVALID_MODEL, "out_perm is not a permutation of 0..%" PRId64
                           " (entry %zu is %" PRId64 ")", o - 1, j, v);
    }
    pdc_free(seen);
    if (st) return st;
    p->out_perm = at->ints;
    p->n_perm = at->n;
    return PDC_OK;
}

pdc_status ir_fused_params_get(const ir_model *m, const ir_layer *l, ir_fused_params *p)
{
    memset(p, 0, sizeof *p);
    p->act_min = -INFINITY;
    p->act_max = INFINITY;
    p->act_alpha = 0.01f;
    pdc_status st = get_activation(m, l, p);
    return st ? st : get_out_perm(m, l, p);
}

static float sigmoid_f(float x)
{
    /* the formula of backends/ref/elementwise.c, so a fused sigmoid gives the same bits */
    if (x >= 0.0f) return (float)(1.0 / (1.0 + exp(-(double)x)));
    double e = exp((double)x);
    return (float)(e / (1.0 + e));
}

float ir_act_apply(const ir_fused_params *p, float x)
{
    switch (p->act) {
    case IR_ACT_NONE: return x;
    case IR_ACT_RELU: return x <= 0.0f ? 0.0f : x; /* NaN stays NaN */
    case IR_ACT_CLIP: return x < p->act_min ? p->act_min : (x > p->act_max ? p->act_max : x);
    case IR_ACT_LEAKY_RELU: return x >= 0.0f ? x : p->act_alpha * x;
    case IR_ACT_SIGMOID: return sigmoid_f(x);
    case IR_ACT_TANH: return tanhf(x);
    case IR_ACT_HARDSWISH: {
        float t = x + 3.0f;
        t = t < 0.0f ? 0.0f : (t > 6.0f ? 6.0f : t);
        return x * t / 6.0f;
    }
    }
    return x;
}
