/*
 * test_onnx_ops.c - the ONNX importer on small graphs built here with the generated protobuf-c
 * structs (test/common/internals.h), each checked against hand-computed values: Gemm and MatMul as
 * fc, gemm or matmul; Clip's attributes and inputs; shape arithmetic, Slice, Range, Cast, Equal,
 * Where, reshapes and integer math folded into constants; shape ops on activations and the ops that
 * vanish (Dropout, Identity); every initializer encoding; symbolic input dims and
 * onnx_input_shapes; RNN attributes.
 */
#include <stdint.h>

#include "ir/ir.h"
#include "lib/onnx/onnx.h"
#include "test/common/internals.h"

/* Runs m on x and checks its outputs (concatenated) against want, as ck_assert_floats_near(tol) does. */
static void run_expect(const pdc_model *m, const float *x, size_t nx, const float *want, size_t nw, float tol)
{
    size_t n;
    float *got = test_run_ref(m, x, nx, 0, &n);
    ck_assert_uint_eq(n, nw);
    ck_assert_floats_near(got, want, nw, tol);
    free(got);
}

/* Loads m (must succeed), runs it on x and checks the outputs (concatenated) against want. */
static pdc_model *load_run_expect(Onnx__ModelProto *mp, const float *x, size_t nx, const float *want, size_t nw)
{
    pdc_model *m;
    ck_assert_ok(ctx, mp_load(mp, &m));
    run_expect(m, x, nx, want, nw, 1e-5f);
    return m;
}

/* The op of the layer named `name`, or NULL. */
static const char *layer_op(const pdc_model *m, const char *name)
{
    int l = ir_model_find_layer(m, name);
    return l < 0 ? NULL : ir_op_get_info(m->layers[l].op)->name;
}

/* ------------------------------------------------------------------ ops */

START_TEST(gemm_becomes_fc_or_gemm)
{
    /* x [2,3]; B [3,2] (transB = 0: transposed at import); C [2] */
    const float x[] = {1, 2, 3, -1, 0, 2};
    const float b[] = {1, 0, 0, 1, 1, 1}; /* rows k: [1 0], [0 1], [1 1] */
    /* x B = [1+3, 2+3] = [4, 5]; [-1+2, 0+2] = [1, 2]; + C [10, 20] */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2, 3));
    mp_init(mp, t_float("B", DIMS(3, 2), b, 1));
    mp_init(mp, t_float("C", DIMS(2), F(10, 20), 0));
    mp_init(mp, t_float("C2", DIMS(1, 2), F(10, 20), 0));
    mp_node(mp, "Gemm", "fc_plain", "x,B,C", "y1");
    Onnx__NodeProto *n = mp_node(mp, "Gemm", "gemm_alpha", "x,B,C", "y2");
    attr_float(n, "alpha", 2.0f);
    mp_node(mp, "Gemm", "fc_row_bias", "x,B,C2", "y3");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    mp_output(mp, "y3");
    pdc_model *m = load_run_expect(mp, x, 6, F(14, 25, 11, 22, 18, 30, 12, 24, 14, 25, 11, 22), 12);
    ck_assert_str_eq(layer_op(m, "fc_plain"), "fc");
    ck_assert_str_eq(layer_op(m, "gemm_alpha"), "gemm");
    ck_assert_str_eq(layer_op(m, "fc_row_bias"), "fc");
    /* B is read twice as fc weight and once as gemm's b: the transposed copy gets a new name */
    ck_assert_int_ge(ir_model_find_tensor(m, "B_T"), 0);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(matmul_becomes_fc_or_matmul)
{
    /* y1 = x2 [2,2] W [2,3] (an fc); y2 = x3 [2,1,2] W (a batched matmul) */
    const float w[] = {1, 2, 3, 4, 5, 6};
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x2", DIMS(2, 2));
    mp_input(mp, "x3", DIMS(2, 1, 2));
    mp_init(mp, t_float("W", DIMS(2, 3), w, 0));
    mp_node(mp, "MatMul", "mm2", "x2,W", "y1");
    mp_node(mp, "MatMul", "mm3", "x3,W", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    /* [1 0] W = [1 2 3]; [1 1] W = [5 7 9] */
    pdc_model *m = load_run_expect(mp, F(1, 0, 1, 1, 1, 0, 1, 1), 8, F(1, 2, 3, 5, 7, 9, 1, 2, 3, 5, 7, 9), 12);
    ck_assert_str_eq(layer_op(m, "mm2"), "fc");
    ck_assert_str_eq(layer_op(m, "mm3"), "matmul");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(clip_attributes_and_inputs)
{
    /* opset 9: min/max attributes; opset 11: constant inputs (max absent) */
    Onnx__ModelProto *mp = mp_new(9);
    mp_input(mp, "x", DIMS(4));
    Onnx__NodeProto *n = mp_node(mp, "Clip", "clip9", "x", "y");
    attr_float(n, "min", -1.0f);
    attr_float(n, "max", 2.0f);
    mp_output(mp, "y");
    pdc_model *m = load_run_expect(mp, F(-5, 0.5f, 3, 1), 4, F(-1, 0.5f, 2, 1), 4);
    pdc_model_destroy(m);

    mp = mp_new(11);
    mp_input(mp, "x", DIMS(4));
    mp_init(mp, t_float("lo", 0, NULL, F(0.25f), 1));
    mp_node(mp, "Clip", "clip11", "x,lo,", "y");
    mp_output(mp, "y");
    m = load_run_expect(mp, F(-5, 0.5f, 3, 1), 4, F(0.25f, 0.5f, 3, 1), 4);
    pdc_model_destroy(m);

    /* a bound computed at run time cannot become an attribute */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(4));
    mp_input(mp, "lo", DIMS(1));
    mp_node(mp, "Clip", "clip_rt", "x,lo", "y");
    mp_output(mp, "y");
    mp_refused(mp, PDC_ERR_UNSUPPORTED, "clip_rt");
    ck_assert_error_has(ctx, "min");
}
END_TEST

START_TEST(folded_shape_arithmetic)
{
    /* torch's LSTM initial state: Shape -> Gather -> Unsqueeze -> Concat -> ConstantOfShape, and an
     * Expand; y1 = x + c (c = 0.5 everywhere, shape [1,3,4]); y2 = x * e (e = 2, expanded) */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2, 3, 4));
    mp_node(mp, "Shape", "shape", "x", "s");
    mp_const(mp, "one", t_int64(NULL, 0, NULL, I64(1)));
    mp_node(mp, "Gather", "gather", "s,one", "g");
    mp_const(mp, "axes0", t_int64(NULL, DIMS(1), I64(0)));
    mp_node(mp, "Unsqueeze", "unsqueeze", "g,axes0", "u");
    mp_init(mp, t_int64("c1", DIMS(1), I64(1)));
    mp_init(mp, t_int64("c4", DIMS(1), I64(4)));
    Onnx__NodeProto *n = mp_node(mp, "Concat", "concat", "c1,u,c4", "shape3");
    attr_int(n, "axis", 0);
    n = mp_node(mp, "ConstantOfShape", "cos", "shape3", "half");
    Onnx__AttributeProto *a = attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = t_float(NULL, DIMS(1), F(0.5f), 0);
    mp_node(mp, "Add", "add", "x,half", "y1");
    mp_init(mp, t_float("two", DIMS(1), F(2.0f), 0));
    mp_node(mp, "Expand", "expand", "two,shape3", "e");
    mp_node(mp, "Mul", "mul", "x,e", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    float x[24], want[48];
    test_fill_random(x, 24, 5);
    for (int i = 0; i < 24; i++) want[i] = x[i] + 0.5f, want[24 + i] = 2 * x[i];
    pdc_model *m = load_run_expect(mp, x, 24, want, 48);
    /* only the two real layers remain */
    ck_assert_uint_eq(m->n_layers, 2);
    ck_assert_int_eq(m->tensors[ir_model_find_tensor(m, "half")].kind, IR_TENSOR_CONST);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(folded_slice_range_cast_equal_where)
{
    /* r = Range(0, 6, 1) = [0..5]; e = (r == 3); w = Where(e, 10, [1..6]) = [1 2 3 10 5 6]
     * s = Slice(r, [1], [-1], [0], [2]) = [1, 3]; y1 = x6 + w; y2 = x2 * Cast(s) */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x6", DIMS(6));
    mp_input(mp, "x2", DIMS(2));
    mp_init(mp, t_int64("r0", 0, NULL, I64(0)));
    mp_init(mp, t_int64("r6", 0, NULL, I64(6)));
    mp_init(mp, t_int64("r1", 0, NULL, I64(1)));
    mp_node(mp, "Range", "range", "r0,r6,r1", "r");
    mp_init(mp, t_int64("three", DIMS(1), I64(3)));
    mp_node(mp, "Equal", "equal", "r,three", "e");
    mp_init(mp, t_float("ten", DIMS(1), F(10), 0));
    mp_init(mp, t_float("seq", DIMS(6), F(1, 2, 3, 4, 5, 6), 1));
    mp_node(mp, "Where", "where", "e,ten,seq", "w");
    mp_node(mp, "Add", "add", "x6,w", "y1");
    mp_init(mp, t_int64("st", DIMS(1), I64(1)));
    mp_init(mp, t_int64("en", DIMS(1), I64(-1)));
    mp_init(mp, t_int64("ax", DIMS(1), I64(0)));
    mp_init(mp, t_int64("sp", DIMS(1), I64(2)));
    mp_node(mp, "Slice", "slice", "r,st,en,ax,sp", "s");
    Onnx__NodeProto *n = mp_node(mp, "Cast", "cast", "s", "sf");
    attr_int(n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mp_node(mp, "Mul", "mul", "x2,sf", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    pdc_model *m = load_run_expect(mp, F(1, 1, 1, 1, 1, 1, 2, 5), 8, F(2, 3, 4, 11, 6, 7, 2, 15), 8);
    pdc_model_destroy(m);

    /* negative steps on W = [0 1 2 3 4 5]: W[-1 :: -2] up to before the start (ends = INT64_MIN) is
     * [5 3 1]; a start far below the range clamps to 0 for a negative step: W[-100 : -200 : -1] = [0] */
    static const int64_t starts[2] = {-1, -100}, ends[2] = {INT64_MIN, -200}, steps[2] = {-2, -1};
    static const float want_rev[2][3] = {{6, 4, 2}, {1, 0, 0}};
    for (int k = 0; k < 2; k++) {
        mp = mp_new(13);
        mp_input(mp, "x", DIMS(k ? 1 : 3));
        mp_init(mp, t_float("W", DIMS(6), F(0, 1, 2, 3, 4, 5), 0));
        mp_init(mp, t_int64("st", DIMS(1), &starts[k]));
        mp_init(mp, t_int64("en", DIMS(1), &ends[k]));
        mp_init(mp, t_int64("sp", DIMS(1), &steps[k]));
        mp_node(mp, "Slice", "slice_rev", "W,st,en,,sp", "s");
        mp_node(mp, "Add", "add", "x,s", "y");
        mp_output(mp, "y");
        m = load_run_expect(mp, F(1, 1, 1), k ? 1 : 3, want_rev[k], k ? 1 : 3);
        pdc_model_destroy(m);
    }

    /* a negative step on an empty axis gives an empty slice (it read one row past the constant),
     * which the Add then refuses by name */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(1, 1000));
    mp_init(mp, t_float("E", DIMS(0, 1000), F(0), 0)); /* no elements */
    mp_init(mp, t_int64("st", DIMS(1), I64(-1)));
    mp_init(mp, t_int64("en", DIMS(1), I64(-10)));
    mp_init(mp, t_int64("ax", DIMS(1), I64(0)));
    mp_init(mp, t_int64("sp", DIMS(1), I64(-1)));
    mp_node(mp, "Slice", "slice_empty", "E,st,en,ax,sp", "s");
    mp_node(mp, "Add", "add", "x,s", "y");
    mp_output(mp, "y");
    mp_refused(mp, PDC_ERR_UNSUPPORTED, "input 's' is an empty constant");
}
END_TEST

START_TEST(folded_constant_reshapes_and_integer_math)
{
    /* W [2,3] -> Transpose -> Reshape [6] -> Unsqueeze [1,6] -> Squeeze [6]: [1 4 2 5 3 6];
     * Shape(x) = [6]; (6 * 3 - 2) / 4 = 4 -> Cast -> Sub from x; opset 9 Slice with attributes */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(6));
    mp_init(mp, t_float("W", DIMS(2, 3), F(1, 2, 3, 4, 5, 6), 0));
    mp_node(mp, "Transpose", "transpose", "W", "wt");
    mp_init(mp, t_int64("flat", DIMS(1), I64(-1)));
    mp_node(mp, "Reshape", "reshape", "wt,flat", "wf");
    mp_init(mp, t_int64("a0", DIMS(1), I64(0)));
    mp_node(mp, "Unsqueeze", "unsqueeze", "wf,a0", "wu");
    mp_node(mp, "Squeeze", "squeeze", "wu", "ws");
    mp_node(mp, "Add", "add", "x,ws", "y1");
    mp_node(mp, "Shape", "shape", "x", "s");
    mp_init(mp, t_int64("k3", 0, NULL, I64(3)));
    mp_init(mp, t_int64("k2", 0, NULL, I64(2)));
    mp_init(mp, t_int64("k4", 0, NULL, I64(4)));
    mp_node(mp, "Mul", "imul", "s,k3", "s3");
    mp_node(mp, "Sub", "isub", "s3,k2", "s16");
    mp_node(mp, "Div", "idiv", "s16,k4", "s4");
    Onnx__NodeProto *n = mp_node(mp, "Cast", "cast", "s4", "f4");
    attr_int(n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    mp_node(mp, "Sub", "sub", "x,f4", "y2");
    mp_output(mp, "y1");
    mp_output(mp, "y2");
    pdc_model *m = load_run_expect(mp, F(0, 0, 0, 1, 1, 1), 6, F(1, 4, 2, 6, 4, 7, -4, -4, -4, -3, -3, -3), 12);
    pdc_model_destroy(m);

    /* opset 9 Slice (attributes), Unsqueeze (attribute axes) and Flatten on a constant */
    mp = mp_new(9);
    mp_input(mp, "x", DIMS(1, 2));
    mp_init(mp, t_float("W", DIMS(2, 3), F(1, 2, 3, 4, 5, 6), 0));
    n = mp_node(mp, "Slice", "slice9", "W", "ws");
    attr_ints(n, "starts", 2, I64(0, 1));
    attr_ints(n, "ends", 2, I64(2, 3));
    n = mp_node(mp, "Unsqueeze", "unsq9", "ws", "wu");
    attr_ints(n, "axes", 1, I64(0));
    n = mp_node(mp, "Flatten", "flat9", "wu", "wf");
    attr_int(n, "axis", 2);
    /* wf = [[2 3], [5 6]] as [2, 2]; y = x + wf */
    mp_node(mp, "Add", "add", "x,wf", "y");
    mp_output(mp, "y");
    m = load_run_expect(mp, F(10, 20), 2, F(12, 23, 15, 26), 4);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(runtime_shape_ops_and_aliases)
{
    /* Unsqueeze / Squeeze / Reshape / Transpose / Flatten on activations; Dropout and Identity vanish;
     * the graph output is an alias (Identity) and keeps its ONNX name */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(2, 3));
    mp_init(mp, t_int64("ax", DIMS(1), I64(1)));
    mp_node(mp, "Unsqueeze", "unsq", "x,ax", "u");       /* [2,1,3] */
    mp_node(mp, "Dropout", "drop", "u", "d");
    Onnx__NodeProto *n = mp_node(mp, "Transpose", "tr", "d", "t"); /* [3,1,2] */
    attr_ints(n, "perm", 3, I64(2, 1, 0));
    mp_node(mp, "Squeeze", "sq", "t,ax", "s");          /* [3,2] */
    mp_init(mp, t_int64("shp", DIMS(2), I64(0, -1)));
    mp_node(mp, "Reshape", "rs", "s,shp", "r");         /* [3,2] */
    mp_node(mp, "Relu", "relu", "r", "rl");
    mp_node(mp, "Identity", "id", "rl", "out");
    mp_output(mp, "out");
    pdc_model *m = load_run_expect(mp, F(1, -2, 3, 4, 5, -6), 6, F(1, 4, 0, 5, 3, 0), 6);
    const char *s;
    ck_assert_ok(ctx, pdc_model_output_info(m, 0, &s, NULL, NULL));
    ck_assert_str_eq(s, "out");
    ck_assert_int_lt(ir_model_find_layer(m, "drop"), 0);
    ck_assert_int_lt(ir_model_find_layer(m, "id"), 0);
    ck_assert_str_eq(layer_op(m, "unsq"), "reshape");
    pdc_model_destroy(m);

    /* a graph input that is also the graph output (and an unnamed node, and a dead unsupported node) */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", NULL, "x", "r");
    mp_node(mp, "Resize", "dead", "x", "unused");
    mp_output(mp, "r");
    mp_output(mp, "x_out");
    mp_node(mp, "Identity", NULL, "x", "x_out");
    m = load_run_expect(mp, F(-1, 2), 2, F(0, 2, -1, 2), 4);
    ck_assert_str_eq(layer_op(m, "Relu_0"), "relu"); /* op_type + "_" + node index */
    pdc_model_destroy(m);

    /* a node named like its output (common outside PyTorch) keeps its name: separate name spaces;
     * two nodes with one name are told apart */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", "act", "x", "act");
    mp_node(mp, "Sigmoid", "act", "act", "y");
    mp_output(mp, "y");
    m = load_run_expect(mp, F(0, -1), 2, F(0.5f, 0.5f), 2);
    ck_assert_str_eq(layer_op(m, "act"), "relu");
    ck_assert_str_eq(layer_op(m, "act_1"), "sigmoid");
    pdc_model_destroy(m);

    /* Dropout of a constant with a ratio computed at run time is that constant (it was a run-time
     * value without a tensor: a crash as a graph output, an internal error as an operand) */
    for (int k = 0; k < 3; k++) {
        mp = mp_new(13);
        mp_input(mp, "x", DIMS(1, 4));
        mp_input(mp, "r", DIMS(1));
        mp_init(mp, t_float("c", DIMS(1, 4), F(1, 2, 3, 4), 0));
        mp_node(mp, "Dropout", "drop", "c,r", "d");
        if (k == 1) mp_node(mp, "Add", "add", "x,d", "y");
        if (k == 2) {
            mp_node(mp, "Shape", "shape", "d", "sh");
            mp_node(mp, "Reshape", "rs", "x,sh", "y");
        }
        mp_output(mp, k ? "y" : "d");
        if (k == 0) {
            mp_refused(mp, PDC_ERR_UNSUPPORTED, "graph output 'd' is a constant");
            continue;
        }
        ck_assert_ok(ctx, mp_load(mp, &m));
        ck_assert_str_eq(layer_op(m, k == 1 ? "add" : "rs"), k == 1 ? "add" : "reshape");
        if (k == 1) ck_assert_float_eq(tensor(m, "d")->data[3], 4.0f);
        pdc_model_destroy(m);
    }

    /* a graph output that is a graph input of the same name: refused by name (it was "output 'x'
     * must be produced by a layer" with PDC_ERR_INVALID_ARG) */
    mp = mp_new(13);
    mp_input(mp, "x", DIMS(2));
    mp_node(mp, "Relu", "relu", "x", "y");
    mp_output(mp, "y");
    mp_output(mp, "x");
    mp_refused(mp, PDC_ERR_UNSUPPORTED, "graph output 'x' is the graph input of that name");
}
END_TEST

START_TEST(initializer_encodings)
{
    /* the same values through raw_data, float_data, double_data, FLOAT16 raw, BFLOAT16 int32_data */
    const double dv[] = {0.5, -2, 3};
    const uint16_t half[] = {0x3800, 0xc000, 0x4200};   /* 0.5, -2, 3 */
    const int32_t bf[] = {0x3f00, 0xc000, 0x4040};      /* 0.5, -2, 3 */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(3));
    mp_init(mp, t_float("raw", DIMS(3), F(0.5f, -2, 3), 1));
    mp_init(mp, t_float("typed", DIMS(3), F(0.5f, -2, 3), 0));
    Onnx__TensorProto *t = t_new("dbl", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, DIMS(3));
    t->double_data = malloc(sizeof dv);
    memcpy(t->double_data, dv, sizeof dv);
    t->n_double_data = 3;
    mp_init(mp, t);
    t = t_new("half", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, DIMS(3));
    t->has_raw_data = 1;
    t->raw_data.len = sizeof half;
    t->raw_data.data = malloc(sizeof half);
    memcpy(t->raw_data.data, half, sizeof half);
    mp_init(mp, t);
    t = t_new("bf", ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16, DIMS(3));
    t->int32_data = malloc(sizeof bf);
    memcpy(t->int32_data, bf, sizeof bf);
    t->n_int32_data = 3;
    mp_init(mp, t);
    const char *names[] = {"raw", "typed", "dbl", "half", "bf"};
    char prev[16] = "x", out[16];
    for (int i = 0; i < 5; i++) {
        char ins[64];
        snprintf(out, sizeof out, "s%d", i);
        snprintf(ins, sizeof ins, "%s,%s", prev, names[i]);
        mp_node(mp, "Add", NULL, ins, i == 4 ? "y" : out);
        snprintf(prev, sizeof prev, "%s", out);
    }
    mp_output(mp, "y");
    pdc_model *m = load_run_expect(mp, F(0, 0, 0), 3, F(2.5f, -10, 15), 3);
    pdc_model_destroy(m);
}
END_TEST

/* x [N, 4] -> Reshape(x, Shape(x)): folding needs N */
static Onnx__ModelProto *shape_of_symbolic(void)
{
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(-1, 4));
    mp_node(mp, "Shape", "shape_of_x", "x", "s");
    mp_node(mp, "Reshape", "reshape", "x,s", "y");
    mp_output(mp, "y");
    return mp;
}

START_TEST(symbolic_input_dims)
{
    /* x [N, 4] -> Gemm: imports with a -1 dim; compile names the input; then the shape is fixed */
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(-1, 4));
    mp_init(mp, t_float("W", DIMS(2, 4), F(1, 1, 1, 1, 1, 0, 0, 0), 0));
    Onnx__NodeProto *n = mp_node(mp, "Gemm", "fc", "x,W", "y");
    attr_int(n, "transB", 1);
    mp_output(mp, "y");
    pdc_model *m;
    ck_assert_ok(ctx, mp_load(mp, &m));
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
    ck_assert_ok(ctx, pdc_model_input_info(m, 0, NULL, &rank, dims));
    ck_assert_uint_eq(rank, 2);
    ck_assert_int_eq(dims[0], -1);
    pdc_program *p = NULL;
    ck_assert_status(ctx, pdc_compile(ctx, m, "ref", &p), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "x");
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 2, I64(3, 4)));
    run_expect(m, F(1, 2, 3, 4, 1, 1, 1, 1, 0, 0, 0, -1), 12, F(10, 1, 4, 1, -1, 0), 6, 1e-6f);
    pdc_model_destroy(m);

    /* shape arithmetic on a symbolic dim cannot be folded: the message names node and input */
    ck_assert_status(ctx, mp_load(shape_of_symbolic(), &m), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "shape_of_x");
    ck_assert_error_has(ctx, "'x'");
    ck_assert_error_has(ctx, "symbolic");
    ck_assert_error_has(ctx, "onnx_input_shapes");
    /* ... unless the shapes are given before the import */
    char buf[64];
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", "other=5;x=2x4"));
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "onnx_input_shapes", buf, sizeof buf));
    ck_assert_str_eq(buf, "other=5;x=2x4");
    ck_assert_ok(ctx, mp_load(shape_of_symbolic(), &m));
    run_expect(m, F(1, 2, 3, 4, 5, 6, 7, 8), 8, F(1, 2, 3, 4, 5, 6, 7, 8), 8, 0);
    pdc_model_destroy(m);
    /* a shape that contradicts the declared dims, and malformed option values */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", "x=2x5"));
    ck_assert_status(ctx, mp_load(shape_of_symbolic(), &m), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "onnx_input_shapes");
    static const char *const bad[] = {"x", "x=", "=2", "x=2x", "x=0", "x=1x2x3x4x5x6x7x8x9", "x=2y3", "x=3000000000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_status(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", bad[i]), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "onnx_input_shapes");
    }
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "onnx_input_shapes", buf, sizeof buf));
    ck_assert_str_eq(buf, "x=2x5"); /* a refused value changes nothing */
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "onnx_input_shapes", ""));
}
END_TEST

START_TEST(rnn_attributes)
{
    /* GRU with sequence_lens equal to the full length and default activations spelled out */
    const int64_t T = 2, B = 1, I = 1, H = 1;
    Onnx__ModelProto *mp = mp_new(13);
    mp_input(mp, "x", DIMS(T, B, I));
    mp_init(mp, t_float("W", DIMS(1, 3 * H, I), F(0.5f, -0.5f, 1), 0));
    mp_init(mp, t_float("R", DIMS(1, 3 * H, H), F(0.1f, 0.2f, 0.3f), 0));
    Onnx__TensorProto *sl = t_new("len", ONNX__TENSOR_PROTO__DATA_TYPE__INT32, DIMS(1));
    sl->int32_data = malloc(sizeof(int32_t));
    sl->int32_data[0] = 2;
    sl->n_int32_data = 1;
    mp_init(mp, sl);
    Onnx__NodeProto *n = mp_node(mp, "GRU", "gru", "x,W,R,,len", "Y,Y_h");
    attr_int(n, "hidden_size", H);
    const char *acts[] = {"Sigmoid", "Tanh"};
    attr_strings(n, "activations", 2, acts);
    mp_output(mp, "Y_h");
    pdc_model *m;
    ck_assert_ok(ctx, mp_load(mp, &m));
    pdc_model_destroy(m);

    /* other activations, clip, layout = 1 and peepholes are refused by name */
    static const char *const refused[] = {"activation 1 is 'Relu'", "clip", "layout", "peephole"};
    for (int k = 0; k < 4; k++) {
        mp = mp_new(14);
        mp_input(mp, "x", DIMS(T, B, I));
        mp_init(mp, t_float("W", DIMS(1, 4 * H, I), F(1, 1, 1, 1), 0));
        mp_init(mp, t_float("R", DIMS(1, 4 * H, H), F(1, 1, 1, 1), 0));
        mp_init(mp, t_float("P", DIMS(1, 3 * H), F(1, 1, 1), 0));
        n = mp_node(mp, "LSTM", "lstm", k == 3 ? "x,W,R,,,,,P" : "x,W,R", "Y");
        attr_int(n, "hidden_size", H);
        const char *bad[] = {"Sigmoid", "Relu", "Tanh"};
        if (k == 0) attr_strings(n, "activations", 3, bad);
        if (k == 1) attr_float(n, "clip", 3.0f);
        if (k == 2) attr_int(n, "layout", 1);
        mp_output(mp, "Y");
        mp_refused(mp, PDC_ERR_UNSUPPORTED, "node 'lstm' (LSTM, opset 14)");
        ck_assert_error_has(ctx, refused[k]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("onnx_ops");
    test_add_tcase(s, "ops", ctx_setup, ctx_teardown, 60,
                   TEST_LIST(gemm_becomes_fc_or_gemm, matmul_becomes_fc_or_matmul, clip_attributes_and_inputs,
                             folded_shape_arithmetic, folded_slice_range_cast_equal_where,
                             folded_constant_reshapes_and_integer_math, runtime_shape_ops_and_aliases,
                             initializer_encodings, symbolic_input_dims, rnn_attributes));
    return test_run_suite(s);
}
