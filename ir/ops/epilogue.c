/*
 * epilogue.c - which layers after a conv, an fc or a matmul its epilogue may compute (epilogue.h).
 */
#include <math.h>
#include <string.h>

#include "ir/ops/batchnorm.h"
#include "ir/ops/epilogue.h"

static int same_shape(const ir_tensor *a, const ir_tensor *b)
{
    if (a->rank != b->rank) return 0;
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return 0;
    return 1;
}

/* t has one reader and is not a graph output: what reads it may take over writing its value. */
static int private_to_next(const ir_model *m, int t)
{
    return t >= 0 && !ir_model_is_output(m, t) && ir_model_tensor_uses(m, t) == 1; /* a layer's input slot */
}

/* 1 and *p if layer li (if any) is an activation (relu, clip, leaky_relu, sigmoid, tanh,
 * hardswish) of tensor x alone; its attributes with the reference kernels' defaults. */
static int activation_of(const ir_model *m, size_t li, int x, ir_fused_params *p)
{
    if (li >= m->n_layers) return 0;
    const ir_layer *u = &m->layers[li];
    if (u->n_inputs != 1 || u->inputs[0] != x || u->n_outputs != 1 || u->outputs[0] < 0) return 0;
    return ir_act_layer_params(u, p);
}

/* 1 if layer li (if any) is a foldable batchnorm of tensor x, and conv c's weights and bias, which
 * the batchnorm is folded into, are constants. */
static int batchnorm_of(const ir_model *m, size_t li, int x, const ir_layer *c)
{
    if (li >= m->n_layers) return 0;
    const ir_layer *b = &m->layers[li];
    if (b->op != IR_OP_BATCHNORM || b->inputs[0] != x || b->outputs[0] < 0 || !ir_batchnorm_foldable(m, b)) return 0;
    for (size_t i = 1; i < c->n_inputs && i < 3; i++)
        if (c->inputs[i] >= 0 && m->tensors[c->inputs[i]].kind != IR_TENSOR_CONST) return 0;
    return c->n_inputs > 1 && c->inputs[1] >= 0;
}

/* 1 and *res if layer li (if any) adds tensor x and another operand of its shape made before layer
 * conv; its output has that shape too. */
static int residual_add_of(const ir_model *m, size_t li, int x, size_t conv, int *res)
{
    if (li >= m->n_layers) return 0;
    const ir_layer *a = &m->layers[li];
    if (a->op != IR_OP_ADD || a->n_inputs != 2 || a->n_outputs != 1 || a->outputs[0] < 0) return 0;
    if ((a->inputs[0] == x) == (a->inputs[1] == x)) return 0; /* x on exactly one side */
    int r = a->inputs[0] == x ? a->inputs[1] : a->inputs[0];
    if (r < 0 || !same_shape(&m->tensors[r], &m->tensors[x]) || !same_shape(&m->tensors[a->outputs[0]], &m->tensors[x]))
        return 0;
    /* the other operand exists when the conv runs (with the add right after the conv, only a
     * malformed order could break this: checked all the same) */
    if (m->tensors[r].producer >= (int)conv) return 0;
    *res = r;
    return 1;
}

/* 1 and *bias if layer li (if any) adds tensor x and a constant along x's last axis ([N] or
 * [1, ..., 1, N]: a bias, as PyTorch exports nn.Linear on a 3-D input: MatMul, then Add); its
 * output has x's shape. */
static int bias_add_of(const ir_model *m, size_t li, int x, int *bias)
{
    if (li >= m->n_layers) return 0;
    const ir_layer *a = &m->layers[li];
    if (a->op != IR_OP_ADD || a->n_inputs != 2 || a->n_outputs != 1 || a->outputs[0] < 0) return 0;
    if ((a->inputs[0] == x) == (a->inputs[1] == x)) return 0; /* x on exactly one side */
    int c = a->inputs[0] == x ? a->inputs[1] : a->inputs[0];
    if (c < 0) return 0;
    const ir_tensor *ct = &m->tensors[c], *xt = &m->tensors[x];
    if (ct->kind != IR_TENSOR_CONST || !ct->data || ct->rank < 1 || ct->rank > xt->rank ||
        ct->dims[ct->rank - 1] != xt->dims[xt->rank - 1] || !same_shape(&m->tensors[a->outputs[0]], xt))
        return 0;
    for (int d = 0; d + 1 < ct->rank; d++)
        if (ct->dims[d] != 1) return 0;
    *bias = c;
    return 1;
}

int ir_layer_epilogue(const ir_model *m, size_t li, ir_epilogue *e)
{
    if (li + 1 >= m->n_layers) return 0;
    const ir_layer *c = &m->layers[li];
    int conv = c->op == IR_OP_CONV, product = c->op == IR_OP_FC || c->op == IR_OP_MATMUL;
    if ((!conv && !product) || c->n_outputs != 1 || c->outputs[0] < 0 || ir_attrs_find(&c->attrs, "activation"))
        return 0;
    memset(e, 0, sizeof *e); /* act IR_ACT_NONE */
    e->bn = e->residual = e->bias = -1;
    /* t: the value so far, which only layer `next` may read */
    int t = c->outputs[0];
    size_t next = li + 1;
    if (conv && private_to_next(m, t) && batchnorm_of(m, next, t, c)) {
        e->bn = (int)next;
        t = m->layers[next++].outputs[0];
    }
    if (conv && private_to_next(m, t) && residual_add_of(m, next, t, li, &e->residual)) t = m->layers[next++].outputs[0];
    if (product && private_to_next(m, t) && bias_add_of(m, next, t, &e->bias)) t = m->layers[next++].outputs[0];
    if (private_to_next(m, t) && activation_of(m, next, t, &e->act)) t = m->layers[next++].outputs[0];
    e->out = t;
    e->n_layers = (int)(next - li - 1);
    return e->n_layers > 0;
}
