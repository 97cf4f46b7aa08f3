/*
 * test_onnx_export.c - the ONNX writer (pdc_model_save_onnx): every op, and pruned, canonicalized and
 * reordered models, written and read back with the ONNX importer give the same reference outputs and
 * the same initializer names and weights; export is deterministic; what ONNX cannot say is refused.
 */
#include <unistd.h>

#include "ir/ir.h"
#include "test/common/internals.h"

static char path[64];

static void setup(void)
{
    tmpdir_setup();
    snprintf(path, sizeof path, "%s", tmp_path("model.onnx"));
}

/* ------------------------------------------------------------------ building */

/* Attribute setters that return a, so that they chain: ival(opt_ints("pads", 4, p), "group", 2). */
static pdc_attrs *ints(pdc_attrs *a, const char *name, size_t n, const int64_t *v)
{
    ck_assert_ok(ctx, pdc_attrs_set_ints(a, name, n, v));
    return a;
}

static pdc_attrs *ival(pdc_attrs *a, const char *name, int64_t v)
{
    ck_assert_ok(ctx, pdc_attrs_set_int(a, name, v));
    return a;
}

static pdc_attrs *fval(pdc_attrs *a, const char *name, float v)
{
    ck_assert_ok(ctx, pdc_attrs_set_float(a, name, v));
    return a;
}

/* Writes m as ONNX, reads it back, and checks the outputs agree; returns the model read back. */
static pdc_model *round_trip(const pdc_model *m, float tol)
{
    ck_assert_ok(ctx, pdc_model_save_onnx(m, path));
    pdc_model *back;
    ck_assert_ok(ctx, pdc_model_load(ctx, path, &back));
    for (uint32_t seed = 1; seed <= 2; seed++) {
        size_t na, nb;
        float *ya = test_run_ref(m, NULL, 0, seed * 17u, &na), *yb = test_run_ref(back, NULL, 0, seed * 17u, &nb);
        ck_assert_uint_eq(na, nb);
        ck_assert_floats_near(yb, ya, na, tol);
        free(ya);
        free(yb);
    }
    return back;
}

/* ------------------------------------------------------------------ tests */

START_TEST(every_op_round_trips)
{
    pdc_model *m = new_model("all_ops");
    add_input(m, "x", DIMS(1, 3, 6, 6));
    add_input(m, "s", DIMS(4, 1, 5));
    add_random(m, "cw", 4, (int64_t[]){4, 3, 3, 3}, 1, -0.5f, 0.5f);
    add_random(m, "cb", 1, (int64_t[]){4}, 2, -0.1f, 0.1f);
    const char *bn[] = {"g", "be", "mu", "var"};
    for (int i = 0; i < 4; i++) add_random(m, bn[i], 1, (int64_t[]){4}, 3 + (uint32_t)i, i == 3 ? 0.5f : -0.5f, 1.5f);
    add_random(m, "dw", 4, (int64_t[]){4, 1, 3, 3}, 8, -0.5f, 0.5f);
    add_random(m, "k", 4, (int64_t[]){1, 4, 1, 1}, 9, 0.5f, 1.5f);
    add_random(m, "fw", 2, (int64_t[]){5, 32}, 10, -0.5f, 0.5f);
    add_random(m, "gw", 2, (int64_t[]){4, 6}, 11, -0.5f, 0.5f);
    add_random(m, "gc", 1, (int64_t[]){6}, 12, -0.5f, 0.5f);
    add_random(m, "mw", 2, (int64_t[]){6, 5}, 13, -0.5f, 0.5f);
    add_random(m, "lw", 3, (int64_t[]){2, 12, 5}, 14, -0.5f, 0.5f);
    add_random(m, "lr", 3, (int64_t[]){2, 12, 3}, 15, -0.5f, 0.5f);
    add_random(m, "lb", 2, (int64_t[]){2, 24}, 16, -0.1f, 0.1f);
    add_random(m, "uw", 3, (int64_t[]){1, 9, 6}, 17, -0.5f, 0.5f);
    add_random(m, "ur", 3, (int64_t[]){1, 9, 3}, 18, -0.5f, 0.5f);
    /* image path: x [1,3,6,6] */
    add_layer(m, "conv", "conv", "x,cw,cb", "c", pads(1));
    add_layer(m, "bn", "batchnorm", "c,g,be,mu,var", "n", opt_f("epsilon", 1e-3f));
    add_layer(m, "clip", "clip", "n", "cl", opt_f("min", 0.0f));
    add_layer(m, "dw", "conv", "cl,dw", "d",
              ival(ints(pads(1), "strides", 2, (int64_t[]){2, 2}), "group", 4));
    add_layer(m, "leaky", "leaky_relu", "d", "lk", opt_f("alpha", 0.2f));     /* [1,4,3,3] */
    add_layer(m, "hs", "hardswish", "lk", "h", NULL);
    add_layer(m, "hsig", "hardsigmoid", "h", "hg", fval(opt_f("alpha", 0.3f), "beta", 0.4f));
    add_layer(m, "mulk", "mul", "hg,k", "mk", NULL);
    add_layer(m, "subk", "sub", "mk,k", "sk", NULL);
    add_layer(m, "divk", "div", "sk,k", "dk", NULL);
    add_layer(m, "mp", "maxpool", "dk", "p1", opt_ints("kernel_shape", 2, (int64_t[]){2, 2}));   /* [1,4,2,2] */
    add_layer(m, "ap", "avgpool", "dk", "p2",
              ival(ival(opt_ints("kernel_shape", 2, (int64_t[]){2, 2}), "ceil_mode", 1), "count_include_pad", 1));
    add_layer(m, "cat", "concat", "p1,p2", "cc", opt_i("axis", 1));          /* [1,8,2,2] */
    add_layer(m, "fc", "fc", "cc,fw", "f", NULL);                                /* [1,5] */
    add_layer(m, "gap", "global_avgpool", "dk", "p3", NULL);                     /* [1,4,1,1] */
    add_layer(m, "flat", "flatten", "p3", "fl", NULL);                           /* [1,4] */
    add_layer(m, "gemm", "gemm", "fl,gw,gc", "gm", fval(opt_f("alpha", 0.5f), "beta", 2.0f)); /* [1,6] */
    add_layer(m, "relu", "relu", "gm", "r", NULL);
    add_layer(m, "mm", "matmul", "r,mw", "mmo", NULL);                           /* [1,5] */
    add_layer(m, "add", "add", "mmo,f", "a", NULL);
    add_layer(m, "tanh", "tanh", "a", "t", NULL);
    add_layer(m, "sig", "sigmoid", "t", "sg", NULL);
    add_layer(m, "rs", "reshape", "sg", "rso", opt_ints("shape", 2, (int64_t[]){5, -1}));
    add_layer(m, "tr", "transpose", "rso", "tro", NULL);                        /* [1,5] */
    add_layer(m, "sm", "softmax", "tro", "out1", NULL);
    /* sequence path: s [4,1,5] */
    pdc_attrs *la = opt_i("hidden_size", 3);
    ck_assert_ok(ctx, pdc_attrs_set_string(la, "direction", "bidirectional"));
    add_layer(m, "lstm", "lstm", "s,lw,lr,lb", "ly,lh", la);                     /* y [4,2,1,3] */
    add_layer(m, "rs2", "reshape", "ly", "ly2", opt_ints("shape", 3, (int64_t[]){4, 1, 6}));
    add_layer(m, "gru", "gru", "ly2,uw,ur", "gy,gh", ival(opt_i("hidden_size", 3), "linear_before_reset", 1));
    add_output(m, "out1");
    add_output(m, "gy");
    add_output(m, "lh");
    pdc_model *back = round_trip(m, 1e-5f);
    /* the initializers kept their names and values */
    /* (matmul and gemm operands may come back transposed as fc weights, under new names) */
    const char *names[] = {"cw", "cb", "dw", "fw", "lw", "lr", "lb", "uw", "ur"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        int a = ir_model_find_tensor(m, names[i]), b = ir_model_find_tensor(back, names[i]);
        ck_assert_msg(b >= 0, "initializer '%s' is missing", names[i]);
        ck_assert_mem_eq(back->tensors[b].data, m->tensors[a].data, ir_tensor_numel(&m->tensors[a]) * sizeof(float));
    }
    pdc_model_destroy(back);
    pdc_model_destroy(m);
}
END_TEST

/* x[1,3,8,8] -> conv1 (8, bias) -> bn -> relu -> conv2 (16) -> clip 0..6 -> flatten -> fc (10) -> leaky */
static pdc_model *cnn(void)
{
    pdc_model *m = new_model("cnn");
    add_input(m, "input", DIMS(1, 3, 8, 8));
    add_random(m, "conv1.weight", 4, (int64_t[]){8, 3, 3, 3}, 31, -0.5f, 0.5f);
    add_random(m, "conv1.bias", 1, (int64_t[]){8}, 32, -0.1f, 0.1f);
    const char *bn[] = {"bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"};
    for (int i = 0; i < 4; i++) add_random(m, bn[i], 1, (int64_t[]){8}, 33 + (uint32_t)i, i == 3 ? 0.5f : -0.2f, 1.5f);
    add_random(m, "conv2.weight", 4, (int64_t[]){16, 8, 3, 3}, 37, -0.3f, 0.3f);
    add_random(m, "fc.weight", 2, (int64_t[]){10, 1024}, 38, -0.1f, 0.1f);
    add_random(m, "fc.bias", 1, (int64_t[]){10}, 39, -0.1f, 0.1f);
    add_layer(m, "conv1", "conv", "input,conv1.weight,conv1.bias", "c1", pads(1));
    add_layer(m, "bn1", "batchnorm", "c1,bn1.weight,bn1.bias,bn1.running_mean,bn1.running_var", "b1", NULL);
    add_layer(m, "relu1", "relu", "b1", "r1", NULL);
    add_layer(m, "conv2", "conv", "r1,conv2.weight", "c2", pads(1));
    add_layer(m, "relu6", "clip", "c2", "r2", fval(opt_f("min", 0), "max", 6));
    add_layer(m, "flatten", "flatten", "r2", "f", NULL);
    add_layer(m, "fc", "fc", "f,fc.weight,fc.bias", "logits", NULL);
    add_layer(m, "act", "leaky_relu", "logits", "out", NULL);
    add_output(m, "out");
    return m;
}

START_TEST(pruned_model_round_trips_with_names_and_zeros)
{
    pdc_model *m = cnn();
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "1x4:0.75"));
    ck_assert_ok(ctx, pdc_model_transform(m, "prune-pattern,prune-connectivity,prune-block", o));
    pdc_attrs_destroy(o);
    pdc_model *back = round_trip(m, 1e-6f);
    /* same graph: the same layers in the same order, the same initializer names and pruned weights */
    ck_assert_uint_eq(back->n_layers, m->n_layers);
    for (size_t i = 0; i < m->n_layers; i++) ck_assert_str_eq(back->layers[i].name, m->layers[i].name);
    const char *w[] = {"conv1.weight", "conv2.weight", "fc.weight", "fc.bias"};
    for (size_t i = 0; i < 4; i++) {
        const ir_tensor *a = &m->tensors[ir_model_find_tensor(m, w[i])];
        int b = ir_model_find_tensor(back, w[i]);
        ck_assert_msg(b >= 0, "initializer '%s' is missing", w[i]);
        ck_assert_mem_eq(back->tensors[b].data, a->data, ir_tensor_numel(a) * sizeof(float));
    }
    /* the importer finds the sparsity again from the zeros */
    const ir_tensor *c2 = &back->tensors[ir_model_find_tensor(back, "conv2.weight")];
    ck_assert_int_eq(c2->sparsity.kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(ir_sparsity_kept(c2), ir_sparsity_kept(&m->tensors[ir_model_find_tensor(m, "conv2.weight")]));
    pdc_model_destroy(back);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(fused_and_reordered_model_round_trips)
{
    pdc_model *m = cnn();
    ck_assert_ok(ctx, pdc_model_transform(m, "canonicalize,prune-pattern,prune-connectivity,reorder,plan", NULL));
    const ir_layer *c2 = &m->layers[ir_model_find_layer(m, "conv2")];
    size_t np;
    const int64_t *perm = ir_attr_ints(&c2->attrs, "out_perm", &np);
    ck_assert_ptr_nonnull(perm);
    ck_assert_ptr_nonnull(ir_attr_string(&c2->attrs, "activation", NULL));
    pdc_model *back = round_trip(m, 1e-5f);
    /* conv2's weight went out in the original filter order */
    const ir_tensor *ws = &m->tensors[c2->inputs[1]], *wb = &back->tensors[ir_model_find_tensor(back, ws->name)];
    size_t row = ir_tensor_numel(ws) / np;
    for (size_t j = 0; j < np; j++)
        ck_assert_mem_eq(wb->data + (size_t)perm[j] * row, ws->data + j * row, row * sizeof(float));
    /* the fused activations came back as layers of their own */
    ck_assert_int_ge(ir_model_find_layer(back, "conv2/act"), 0);
    ck_assert_int_eq(ir_model_find_layer(back, "bn1"), -1);
    pdc_model_destroy(back);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(export_is_deterministic_and_refuses_what_onnx_cannot_say)
{
    pdc_model *m = cnn();
    ck_assert_ok(ctx, pdc_model_save_onnx(m, path));
    size_t na, nb;
    char *a = test_read_file(path, &na);
    ck_assert_ok(ctx, pdc_model_save_onnx(m, path));
    char *b = test_read_file(path, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(a, b, na);
    free(a);
    free(b);
    pdc_model_destroy(m);

    m = new_model("dil");
    add_input(m, "x", DIMS(1, 1, 6, 6));
    add_layer(m, "ap", "avgpool", "x", "y",
              ints(opt_ints("kernel_shape", 2, (int64_t[]){2, 2}), "dilations", 2, (int64_t[]){2, 2}));
    add_output(m, "y");
    unlink(path);
    ck_assert_status(ctx, pdc_model_save_onnx(m, path), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "layer 'ap': avgpool with dilations needs opset 19");
    ck_assert_int_ne(access(path, F_OK), 0); /* nothing written */
    ck_assert_status(ctx, pdc_model_save_onnx(m, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_int_eq(pdc_model_save_onnx(NULL, path), PDC_ERR_INVALID_ARG);
    pdc_model_destroy(m);
    m = cnn();
    ck_assert_status(ctx, pdc_model_save_onnx(m, "/nonexistent-dir/m.onnx"), PDC_ERR_IO);
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    return run_tests("onnx_export", setup, tmpdir_teardown, 0,
                     TEST_LIST(every_op_round_trips, pruned_model_round_trips_with_names_and_zeros,
                               fused_and_reordered_model_round_trips,
                               export_is_deterministic_and_refuses_what_onnx_cannot_say));
}
