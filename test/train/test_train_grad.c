/*
 * test_train_grad.c - the trainer's gradients (lib/train): every op's against central finite
 * differences of the loss, per op and for whole small nets, dense and through the sparse kernels of
 * a net pruned by the passes; a ResNet/MobileNet-like net's loss and gradients against PyTorch's
 * (test/train/torch_reference.h, written by make_torch_reference.py), dense and through the sparse
 * kernels; and the trainer's kernels for every instruction set this CPU runs against the portable ones.
 */
#include "lib/train/train.h"

#include "test/common/builders.h"
#include "test/train/torch_reference.h"

/* ------------------------------------------------------------------ gradient checks */

/* Labels for the last forward pass's loss tensor: class indices (cross-entropy) or targets (mse). */
static float *make_labels(const pdc_trainer *t, size_t n, uint32_t seed)
{
    const tr_net *net = t->net;
    const int lt = tr_net_loss_tensor(net, &t->opt);
    const size_t all = ir_tensor_numel(&net->exec->tensors[lt]), per = all / n;
    float *y = malloc(all * sizeof *y);
    ck_assert_ptr_nonnull(y);
    if (t->opt.loss == TR_LOSS_CROSS_ENTROPY) {
        for (size_t i = 0; i < n; i++) y[i] = (float)((i * 7 + seed) % per);
    } else {
        test_fill_random(y, all, seed);
    }
    return y;
}

static double loss_at(pdc_trainer *t, const float *x, const float *y)
{
    double l;
    ck_assert_ok(ctx, tr_net_forward(t->net, x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(t->net, &t->opt, y, 0, &l, NULL));
    return l;
}

/* Compares an analytic gradient with central differences of the loss, element by element. */
static void check_fd(pdc_trainer *t, float *v, const float *g, size_t n, const float *x, const float *y, double h,
                     const char *what)
{
    double scale = 1e-2;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)g[i]));
    for (size_t i = 0; i < n; i++) {
        const float keep = v[i];
        v[i] = (float)((double)keep + h);
        const double lp = loss_at(t, x, y);
        v[i] = (float)((double)keep - h);
        const double lm = loss_at(t, x, y);
        v[i] = keep;
        const double fd = (lp - lm) / (2.0 * h), an = (double)g[i];
        ck_assert_msg(fabs(fd - an) <= 3e-3 * scale + 3e-2 * fabs(an),
                      "%s[%zu]: analytic gradient %.6g, finite differences %.6g (scale %.3g)", what, i, an, fd, scale);
    }
}

/*
 * Gradient check of the model in `ir` (constants random, batch = the input's declared dim 0): the
 * gradient of every trained constant and of the input against central differences with step h.
 * x_margin > 0 keeps every input at least that far from 0 (for kinks at 0).
 */
static void grad_check_model(pdc_model *m, const char *loss, const char *sparse, double h, float x_margin)
{
    pdc_trainer *t = trainer_for(m, loss);
    if (sparse) ck_assert_ok(ctx, pdc_trainer_set_option(t, "sparse", sparse));
    tr_net *net = t->net;
    ck_assert_ok(ctx, tr_net_enable_input_grad(net));
    const ir_tensor *in = &net->model->tensors[net->input];
    const size_t n = (size_t)in->dims[0], xn = ir_tensor_numel(in);
    ck_assert_ok(ctx, tr_net_prepare(net, n));
    float *x = malloc(xn * sizeof *x);
    ck_assert_ptr_nonnull(x);
    test_fill_random(x, xn, 77);
    for (size_t i = 0; i < xn && x_margin > 0; i++) x[i] = x[i] >= 0 ? x[i] + x_margin : x[i] - x_margin;
    float *y = make_labels(t, n, 5);
    double l;
    ck_assert_ok(ctx, tr_net_forward(net, x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(net, &t->opt, y, 1, &l, NULL));
    ck_assert_ok(ctx, tr_net_backward(net, &t->opt));
    ck_assert_msg(isfinite(l), "loss %g", l);
    /* copies: the finite differences run the forward pass again */
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        float *g = malloc(p->n * sizeof *g);
        ck_assert_ptr_nonnull(g);
        memcpy(g, p->grad, p->n * sizeof *g);
        if (p->mask) /* pruned weights: no gradient is kept (the optimizer zeroes it); check the kept ones */
            for (size_t k = 0; k < p->n; k++)
                if (!p->mask[k]) g[k] = 0.0f;
        float *w = net->model->tensors[p->tensor].data;
        /* finite differences of pruned weights are meaningless for training: pin them */
        if (p->mask) {
            float *gk = malloc(p->n * sizeof *gk);
            ck_assert_ptr_nonnull(gk);
            size_t kept = 0;
            for (size_t k = 0; k < p->n; k++)
                if (p->mask[k]) gk[kept++] = g[k];
            /* check kept elements one by one */
            for (size_t k = 0, j = 0; k < p->n; k++) {
                if (!p->mask[k]) continue;
                check_fd(t, w + k, gk + j++, 1, x, y, h, net->model->tensors[p->tensor].name);
            }
            free(gk);
        } else {
            check_fd(t, w, g, p->n, x, y, h, net->model->tensors[p->tensor].name);
        }
        free(g);
    }
    float *gx = malloc(xn * sizeof *gx);
    ck_assert_ptr_nonnull(gx);
    memcpy(gx, net->grad[net->input], xn * sizeof *gx);
    check_fd(t, x, gx, xn, x, y, h, "input");
    free(gx);
    free(x);
    free(y);
    pdc_trainer_destroy(t);
}

static void grad_check(const char *ir, const char *loss, double h, float x_margin)
{
    pdc_model *m = parse_model(ir);
    fill_constants(m, 11, 0.5f);
    grad_check_model(m, loss, NULL, h, x_margin);
    pdc_model_destroy(m);
}

/* ------------------------------------------------------------------ per-op gradients */

typedef struct op_case {
    const char *name, *ir, *loss;
    double h;
    float margin;
} op_case;

static const op_case op_cases[] = {
    {"conv 3x3 pad 1 + bias", CONV3X3_IR, "mse", 1e-2, 0},
    {"conv stride 2 dilation 2 no bias", HDR "input x : f32[2,2,7,6]\nconst w : f32[3,2,3,2] = dense<elided>\n"
     "layer c = conv(x, w) -> (y) {strides=[2,1], dilations=[2,2], pads=[1,0,2,1]}\noutput y\n", "mse", 1e-2, 0},
    {"conv groups 2", HDR "input x : f32[2,4,5,5]\nconst w : f32[6,2,3,3] = dense<elided>\n"
     "const b : f32[6] = dense<elided>\nlayer c = conv(x, w, b) -> (y) {pads=[1,1,1,1], group=2}\noutput y\n", "mse",
     1e-2, 0},
    {"conv 1-D", HDR "input x : f32[2,3,9]\nconst w : f32[2,3,3] = dense<elided>\n"
     "const b : f32[2] = dense<elided>\nlayer c = conv(x, w, b) -> (y) {pads=[1,1], strides=[2]}\noutput y\n", "mse",
     1e-2, 0},
    {"conv + fused tanh", HDR "input x : f32[2,2,4,4]\nconst w : f32[3,2,3,3] = dense<elided>\n"
     "const b : f32[3] = dense<elided>\nlayer c = conv(x, w, b) -> (y) {pads=[1,1,1,1], activation=\"tanh\"}\noutput y\n",
     "mse", 1e-2, 0},
    {"conv 3-D pad 1 + bias", HDR "input x : f32[2,2,3,4,3]\nconst w : f32[3,2,3,3,3] = dense<elided>\n"
     "const b : f32[3] = dense<elided>\nlayer c = conv(x, w, b) -> (y) {pads=[1,1,1,1,1,1]}\noutput y\n", "mse", 1e-2,
     0},
    {"conv 3-D strides dilations uneven pads, no bias", HDR "input x : f32[1,2,5,6,4]\n"
     "const w : f32[2,2,2,3,2] = dense<elided>\nlayer c = conv(x, w) -> (y) {strides=[2,1,2], dilations=[2,1,1], "
     "pads=[1,0,1,0,2,1]}\noutput y\n", "mse", 1e-2, 0},
    {"conv 3-D groups 2", HDR "input x : f32[2,4,3,3,3]\nconst w : f32[4,2,3,1,3] = dense<elided>\n"
     "layer c = conv(x, w) -> (y) {pads=[1,0,1,1,0,1], group=2}\noutput y\n", "mse", 1e-2, 0},
    {"maxpool 3-D", HDR "input x : f32[2,2,4,5,5]\n"
     "layer p = maxpool(x) -> (y) {kernel_shape=[2,2,2], strides=[2,2,2], pads=[0,0,0,0,1,1]}\noutput y\n", "mse",
     1e-4, 0},
    {"avgpool 3-D count_include_pad", HDR "input x : f32[2,2,3,4,4]\n"
     "layer p = avgpool(x) -> (y) {kernel_shape=[3,3,3], strides=[1,2,2], pads=[1,1,1,1,1,1], "
     "count_include_pad=1}\noutput y\n", "mse", 1e-2, 0},
    {"fc of a 4-D input", HDR "input x : f32[3,2,2,3]\nconst w : f32[5,12] = dense<elided>\n"
     "const b : f32[5] = dense<elided>\nlayer f = fc(x, w, b) -> (y)\noutput y\n", "mse", 1e-2, 0},
    {"fc + fused sigmoid, cross-entropy", HDR "input x : f32[4,6]\nconst w : f32[3,6] = dense<elided>\n"
     "layer f = fc(x, w) -> (y) {activation=\"sigmoid\"}\noutput y\n", "cross_entropy", 1e-2, 0},
    {"gemm transB alpha beta, then gemm", HDR "input x : f32[4,3]\nconst w : f32[5,3] = dense<elided>\n"
     "const c : f32[5] = dense<elided>\nconst w2 : f32[5,2] = dense<elided>\nconst c2 : f32[2] = dense<elided>\n"
     "layer g = gemm(x, w, c) -> (z) {transB=1, alpha=0.7, beta=1.5}\n"
     "layer g2 = gemm(z, w2, c2) -> (y) {activation=\"leaky_relu\", act_alpha=0.3}\noutput y\n", "mse", 1e-3, 0},
    {"matmul broadcast", HDR "input x : f32[2,3,4]\nconst w : f32[4,2] = dense<elided>\n"
     "layer g = matmul(x, w) -> (y)\noutput y\n", "mse", 1e-2, 0},
    {"batchnorm (batch statistics)", HDR "input x : f32[4,3,2,2]\nconst s : f32[3] = dense<elided>\n"
     "const b : f32[3] = dense<elided>\nconst mean : f32[3] = dense<elided>\nconst var : f32[3] = dense<elided>\n"
     "layer n = batchnorm(x, s, b, mean, var) -> (y)\noutput y\n", "mse", 1e-2, 0},
    {"relu", HDR "input x : f32[3,7]\nlayer a = relu(x) -> (y)\noutput y\n", "mse", 1e-3, 0.05f},
    {"clip", HDR "input x : f32[3,7]\nlayer a = clip(x) -> (y) {min=-0.5, max=0.55}\noutput y\n", "mse", 1e-3, 0.02f},
    {"leaky_relu", HDR "input x : f32[3,7]\nlayer a = leaky_relu(x) -> (y) {alpha=0.2}\noutput y\n", "mse", 1e-3, 0.05f},
    {"sigmoid", HDR "input x : f32[3,7]\nlayer a = sigmoid(x) -> (y)\noutput y\n", "mse", 1e-2, 0},
    {"tanh", HDR "input x : f32[3,7]\nlayer a = tanh(x) -> (y)\noutput y\n", "mse", 1e-2, 0},
    {"hardswish", HDR "input x : f32[3,7]\nconst k : f32[1] = dense<elided>\nlayer m = mul(x, k) -> (z)\n"
     "layer a = hardswish(z) -> (y)\noutput y\n", "mse", 1e-3, 0.05f},
    {"hardsigmoid", HDR "input x : f32[3,7]\nlayer a = hardsigmoid(x) -> (y) {alpha=0.5, beta=0.4}\noutput y\n", "mse",
     1e-3, 0.05f},
    {"add sub mul div broadcast", HDR "input x : f32[2,3,4]\nconst a : f32[3,1] = dense<elided>\n"
     "const b : f32[4] = dense<elided>\nconst c : f32[1,3,4] = dense<elided>\nlayer l1 = add(x, a) -> (y1)\n"
     "layer l2 = sub(b, y1) -> (y2)\nlayer l3 = mul(y2, c) -> (y3)\nlayer l4 = div(y3, k) -> (y)\n"
     "output y\n", "mse", 1e-2, 0},
    {"concat and three uses of one tensor", HDR "input x : f32[2,3,2]\nconst a : f32[3,2] = dense<elided>\n"
     "layer m = mul(x, a) -> (u)\nlayer c = concat(x, u, x) -> (y) {axis=1}\noutput y\n", "mse", 1e-2, 0},
    {"maxpool", HDR "input x : f32[2,2,5,5]\nlayer p = maxpool(x) -> (y) {kernel_shape=[2,2], strides=[2,2], pads=[0,0,1,1]}\n"
     "output y\n", "mse", 1e-3, 0},
    /* ResNet's 3x3/2 pooling: border windows through the checked path, interior ones through the unchecked one */
    {"maxpool 3x3 stride 2 pad 1", HDR "input x : f32[2,2,9,8]\n"
     "layer p = maxpool(x) -> (y) {kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]}\noutput y\n", "mse", 1e-3, 0},
    {"maxpool dilated", HDR "input x : f32[1,2,7,6]\n"
     "layer p = maxpool(x) -> (y) {kernel_shape=[2,3], dilations=[2,1], pads=[1,0,1,2]}\noutput y\n", "mse", 1e-3, 0},
    {"avgpool count_include_pad", HDR "input x : f32[2,2,5,5]\n"
     "layer p = avgpool(x) -> (y) {kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1], count_include_pad=1}\noutput y\n",
     "mse", 1e-2, 0},
    {"avgpool", HDR "input x : f32[2,2,5,4]\nlayer p = avgpool(x) -> (y) {kernel_shape=[2,3], pads=[1,1,0,1]}\noutput y\n",
     "mse", 1e-2, 0},
    {"global_avgpool", HDR "input x : f32[2,3,3,2]\nlayer p = global_avgpool(x) -> (y)\noutput y\n", "mse", 1e-2, 0},
    {"flatten reshape transpose", HDR "input x : f32[2,3,4]\nlayer f = flatten(x) -> (a)\n"
     "layer r = reshape(a) -> (b) {shape=[0,4,3]}\nlayer t = transpose(b) -> (y) {perm=[2,0,1]}\noutput y\n", "mse",
     1e-2, 0},
    {"softmax (not folded: mse)", HDR "input x : f32[3,5]\nlayer s = softmax(x) -> (y) {axis=1}\noutput y\n", "mse",
     1e-2, 0},
    {"softmax axis 0", HDR "input x : f32[3,2,4]\nlayer s = softmax(x) -> (y) {axis=1}\noutput y\n", "mse", 1e-2, 0},
    {"softmax folded into cross-entropy", HDR "input x : f32[4,6]\nconst w : f32[5,6] = dense<elided>\n"
     "const b : f32[5] = dense<elided>\nlayer f = fc(x, w, b) -> (z)\nlayer s = softmax(z) -> (y)\noutput y\n",
     "cross_entropy", 1e-2, 0},
};
#define N_OP_CASES (sizeof op_cases / sizeof op_cases[0])

START_TEST(op_gradients_match_finite_differences)
{
    const op_case *c = &op_cases[_i];
    char ir[2048];
    /* the div case divides by a constant k; cases that use k declare it here */
    if (strstr(c->ir, ", k)") && !strstr(c->ir, "const k")) {
        const char *at = strstr(c->ir, "input ");
        const char *nl = strchr(at, '\n') + 1;
        snprintf(ir, sizeof ir, "%.*sconst k : f32[1] = dense<elided>\n%s", (int)(nl - c->ir), c->ir, nl);
    } else {
        snprintf(ir, sizeof ir, "%s", c->ir);
    }
    pdc_model *m = parse_model(ir);
    fill_constants(m, 11, 0.5f);
    const int k = ir_model_find_tensor(m, "k");
    if (k >= 0) m->tensors[k].data[0] = strstr(c->name, "hardswish") ? 5.0f : 1.7f; /* away from 0 */
    grad_check_model(m, c->loss, NULL, c->h, c->margin);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ whole nets */

static const char *small_cnn =
    HDR "input x : f32[3,2,6,6]\n"
    "const c1w : f32[4,2,3,3] = dense<elided>\nconst c1b : f32[4] = dense<elided>\n"
    "const s : f32[4] = dense<elided>\nconst bb : f32[4] = dense<elided>\n"
    "const mean : f32[4] = dense<elided>\nconst var : f32[4] = dense<elided>\n"
    "const c2w : f32[6,4,3,3] = dense<elided>\nconst c2b : f32[6] = dense<elided>\n"
    "const fw : f32[5,24] = dense<elided>\nconst fb : f32[5] = dense<elided>\n"
    "layer conv1 = conv(x, c1w, c1b) -> (a) {pads=[1,1,1,1]}\n"
    "layer bn = batchnorm(a, s, bb, mean, var) -> (b)\n"
    "layer act = tanh(b) -> (c)\n"
    "layer conv2 = conv(c, c2w, c2b) -> (d) {pads=[1,1,1,1], activation=\"sigmoid\"}\n"
    "layer res = add(d, d) -> (e)\n"
    "layer pool = avgpool(e) -> (f) {kernel_shape=[3,3], strides=[3,3]}\n"
    "layer flat = flatten(f) -> (g)\n"
    "layer fc = fc(g, fw, fb) -> (z)\nlayer sm = softmax(z) -> (y)\noutput y\n";

START_TEST(whole_net_gradients_match_finite_differences)
{
    grad_check(small_cnn, "cross_entropy", 1e-2, 0);
    grad_check(small_cnn, "mse", 1e-2, 0);
}
END_TEST

/* The digits-like CNN, pruned by the passes (pattern + connectivity on the convs, blocks on the fc): the
 * sparse kernels' gradients of every kept weight against finite differences. */
static const char *prunable_cnn =
    HDR "input x : f32[2,1,6,6]\n"
    "const c1w : f32[8,1,3,3] = dense<elided>\nconst c1b : f32[8] = dense<elided>\n"
    "const c2w : f32[8,8,3,3] = dense<elided>\nconst c2b : f32[8] = dense<elided>\n"
    "const fw : f32[4,288] = dense<elided>\nconst fb : f32[4] = dense<elided>\n"
    "layer conv1 = conv(x, c1w, c1b) -> (a) {pads=[1,1,1,1]}\nlayer r1 = tanh(a) -> (b)\n"
    "layer conv2 = conv(b, c2w, c2b) -> (c) {pads=[1,1,1,1]}\nlayer r2 = tanh(c) -> (d)\n"
    "layer flat = flatten(d) -> (e)\nlayer fc = fc(e, fw, fb) -> (z)\nlayer sm = softmax(z) -> (y)\noutput y\n";

static void prune_model(pdc_model *m, int with_fc)
{
    pdc_attrs *a;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "patterns", 4));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "pattern_size", 4));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "connectivity", 0.5f));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "block_rate", 0.75f));
    ck_assert_ok(ctx, pdc_model_transform(m, with_fc ? "prune-pattern,prune-connectivity,prune-block"
                                                     : "prune-pattern,prune-connectivity", a));
    pdc_attrs_destroy(a);
}

START_TEST(sparse_kernel_gradients_match_finite_differences)
{
    static const char *const modes[] = {"on", "off"};
    for (int i = 0; i < 2; i++) {
        pdc_model *m = parse_model(prunable_cnn);
        fill_constants(m, 3, 0.5f);
        prune_model(m, 1);
        grad_check_model(m, "cross_entropy", modes[i], 1e-2, 0);
        pdc_model_destroy(m);
    }
}
END_TEST

/* Taps that read padding only (a 3x3 stride-2 conv from 2x2 to 1x1 keeps 4 of its 9 taps, a 3x3 conv on 1x1 maps 1,
 * depthwise as well):
 * the products leave them out. Dense, and pruned on the sparse and the dense kernels: every (kept) weight's and the
 * input's gradient against finite differences; a dead tap's weight gradient is exactly zero. */
static const char *dead_tap_cnn =
    HDR "input x : f32[3,4,2,2]\n"
    "const c1w : f32[8,4,3,3] = dense<elided>\nconst c1b : f32[8] = dense<elided>\n"
    "const c2w : f32[8,8,3,3] = dense<elided>\nconst c3w : f32[8,1,3,3] = dense<elided>\n"
    "const fw : f32[3,8] = dense<elided>\nconst fb : f32[3] = dense<elided>\n"
    "layer conv1 = conv(x, c1w, c1b) -> (a) {pads=[1,1,1,1], strides=[2,2]}\nlayer r1 = tanh(a) -> (b)\n"
    "layer conv2 = conv(b, c2w) -> (c) {pads=[1,1,1,1]}\nlayer r2 = tanh(c) -> (d)\n"
    "layer conv3 = conv(d, c3w) -> (f) {pads=[1,1,1,1], group=8}\nlayer r3 = tanh(f) -> (h)\n"
    "layer flat = flatten(h) -> (e)\nlayer fc = fc(e, fw, fb) -> (z)\nlayer sm = softmax(z) -> (y)\noutput y\n";

/* The loss of m on kernels (trainer option) and sparse (NULL: default). */
static double loss_on(pdc_model *m, const char *kernels, const char *sparse)
{
    pdc_trainer *t = trainer_for(m, "cross_entropy");
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "kernels", kernels));
    if (sparse) ck_assert_ok(ctx, pdc_trainer_set_option(t, "sparse", sparse));
    ck_assert_ok(ctx, tr_net_prepare(t->net, 3));
    float x[3 * 4 * 2 * 2];
    test_fill_random(x, sizeof x / sizeof *x, 4);
    float *y = make_labels(t, 3, 2);
    const double l = loss_at(t, x, y);
    free(y);
    pdc_trainer_destroy(t);
    return l;
}

START_TEST(dead_tap_gradients_match_finite_differences)
{
    static const char *const modes[] = {NULL, "on", "off"};
    for (int i = 0; i < 3; i++) {
        pdc_model *m = parse_model(dead_tap_cnn);
        fill_constants(m, 9, 0.5f);
        if (modes[i]) prune_model(m, 0);
        /* the forward pass against the reference interpreter's (finite differences only check self-consistency) */
        const double want = loss_on(m, "ref", modes[i]), got = loss_on(m, "native", modes[i]);
        ck_assert_msg(fabs(got - want) <= 1e-5 * fabs(want), "sparse=%s: loss %.9g, the reference %.9g",
                      modes[i] ? modes[i] : "auto", got, want);
        grad_check_model(m, "cross_entropy", modes[i], 1e-2, 0);
        pdc_model_destroy(m);
    }
    /* the dead taps' gradient after a backward pass: conv1 keeps taps (1,1) (1,2) (2,1) (2,2), conv2 and conv3 the centre */
    pdc_model *m = parse_model(dead_tap_cnn);
    fill_constants(m, 9, 0.5f);
    pdc_trainer *t = trainer_for(m, "cross_entropy");
    tr_net *net = t->net;
    ck_assert_ok(ctx, tr_net_prepare(net, 3));
    float x[3 * 4 * 2 * 2];
    test_fill_random(x, sizeof x / sizeof *x, 4);
    float *y = make_labels(t, 3, 2);
    double l;
    ck_assert_ok(ctx, tr_net_forward(net, x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(net, &t->opt, y, 1, &l, NULL));
    ck_assert_ok(ctx, tr_net_backward(net, &t->opt));
    size_t seen = 0;
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        const char *name = net->model->tensors[p->tensor].name;
        const int c1 = !strcmp(name, "c1w");
        if (!c1 && strcmp(name, "c2w") && strcmp(name, "c3w")) continue;
        seen++;
        size_t live = 0;
        for (size_t k = 0; k < p->n; k++) {
            const size_t kr = k % 9 / 3, kc = k % 3;
            const int is_live = c1 ? kr >= 1 && kc >= 1 : kr == 1 && kc == 1;
            if (is_live) {
                live += p->grad[k] != 0.0f;
                continue;
            }
            ck_assert_msg(p->grad[k] == 0.0f, "%s[%zu] (a dead tap) has gradient %g", name, k, (double)p->grad[k]);
        }
        ck_assert_msg(2 * live > (c1 ? 4 : 1) * p->n / 9, "%s: %zu nonzero gradients on live taps", name, live);
    }
    ck_assert_uint_eq(seen, 3);
    free(y);
    pdc_trainer_destroy(t);
    pdc_model_destroy(m);
}
END_TEST

/* A conv whose input gradient is computed a tile of images at a time (dcol of one 16x16 image with 64 channels is
 * 590 KB, over the 512 KB tile: three tiles of one image), dense and pruned (sparse kernels on and off): the input
 * gradient against its definition from the conv output's gradient, sampled weight gradients against finite
 * differences, both bit-identical on 1 and 2 threads. */
static const char *tiled_dx_cnn =
    HDR "input x : f32[3,64,16,16]\n"
    "const cw : f32[4,64,3,3] = dense<elided>\nconst cb : f32[4] = dense<elided>\n"
    "const fw : f32[3,4] = dense<elided>\nconst fb : f32[3] = dense<elided>\n"
    "layer conv = conv(x, cw, cb) -> (a) {pads=[1,1,1,1]}\nlayer t = tanh(a) -> (b)\n"
    "layer gap = global_avgpool(b) -> (c)\nlayer flat = flatten(c) -> (e)\nlayer fc = fc(e, fw, fb) -> (z)\n"
    "layer sm = softmax(z) -> (y)\noutput y\n";

#define TILED_XN (3 * 64 * 16 * 16)
#define TILED_WN (4 * 64 * 3 * 3)

/* The tiled net's trainer on `threads` threads after one forward and backward pass on x: its labels in *y (the
 * caller frees them), the input gradient in gx, the conv weights' in gw (copied at once: the finite differences run
 * the forward pass again). */
static pdc_trainer *tiled_dx_grad(pdc_model *m, const char *sparse, const char *threads, const float *x, float **y,
                                  float *gx, float *gw)
{
    pdc_trainer *t = trainer_for(m, "cross_entropy");
    if (sparse) ck_assert_ok(ctx, pdc_trainer_set_option(t, "sparse", sparse));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "threads", threads));
    tr_net *net = t->net;
    ck_assert_ok(ctx, tr_net_enable_input_grad(net));
    ck_assert_ok(ctx, tr_net_prepare(net, 3));
    *y = make_labels(t, 3, 8); /* sized by the prepared loss tensor */
    double l;
    ck_assert_ok(ctx, tr_net_forward(net, x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(net, &t->opt, *y, 1, &l, NULL));
    ck_assert_ok(ctx, tr_net_backward(net, &t->opt));
    memcpy(gx, net->grad[net->input], TILED_XN * sizeof *gx);
    const tr_param *p = NULL;
    for (size_t i = 0; i < net->n_params && !p; i++)
        if (!strcmp(net->model->tensors[net->params[i].tensor].name, "cw")) p = &net->params[i];
    ck_assert(p && p->n == TILED_WN);
    for (size_t k = 0; k < TILED_WN; k++) gw[k] = p->mask && !p->mask[k] ? 0.0f : p->grad[k];
    return t;
}

START_TEST(tiled_input_gradient_is_right)
{
    static const char *const modes[] = {NULL, "on", "off"};
    for (int i = 0; i < 3; i++) {
        pdc_model *m = parse_model(tiled_dx_cnn);
        /* a fan-in of 576: larger weights saturate tanh, and the gradients drown in the float rounding of the
         * finite differences */
        fill_constants(m, 13, 0.05f);
        if (modes[i]) prune_model(m, 0);
        const char *mode = modes[i] ? modes[i] : "auto";
        static float x[TILED_XN], gx[TILED_XN], gx2[TILED_XN], gw[TILED_WN], gw2[TILED_WN];
        test_fill_random(x, TILED_XN, 21);
        float *y, *y2;
        pdc_trainer_destroy(tiled_dx_grad(m, modes[i], "2", x, &y2, gx2, gw2));
        free(y2);
        pdc_trainer *t = tiled_dx_grad(m, modes[i], "1", x, &y, gx, gw);
        /* the same bits on 2 threads */
        ck_assert_msg(!memcmp(gx, gx2, sizeof gx), "sparse=%s: the input gradient differs on 2 threads", mode);
        ck_assert_msg(!memcmp(gw, gw2, sizeof gw), "sparse=%s: the weight gradient differs on 2 threads", mode);
        const ir_tensor *wt = NULL;
        int ta = -1;
        for (size_t k = 0; k < t->net->model->n_tensors; k++) {
            if (!strcmp(t->net->model->tensors[k].name, "cw")) wt = &t->net->model->tensors[k];
            if (!strcmp(t->net->model->tensors[k].name, "a")) ta = (int)k;
        }
        ck_assert(wt && ta >= 0 && t->net->grad[ta]);
        /* every input's gradient against its definition from the conv output's, dx[n,c,i,j] = sum over o and taps of
         * w[o,c,kr,kc] dy[n,o,i-kr+1,j-kc+1] (the input gradients here are too small for finite differences) */
        const float *dy = t->net->grad[ta];
        double dmax = 0.0, emax = 0.0;
        for (size_t q = 0; q < TILED_XN; q++) {
            const int n = (int)(q / (64 * 256)), c = (int)(q / 256 % 64), r = (int)(q / 16 % 16), j = (int)(q % 16);
            double want = 0.0;
            for (int o = 0; o < 4; o++)
                for (int kr = 0; kr < 3; kr++)
                    for (int kc = 0; kc < 3; kc++) {
                        const int oi = r - kr + 1, oj = j - kc + 1;
                        if (oi < 0 || oi >= 16 || oj < 0 || oj >= 16) continue;
                        want += (double)wt->data[((o * 64 + c) * 3 + kr) * 3 + kc] * dy[((n * 4 + o) * 16 + oi) * 16 + oj];
                    }
            dmax = fmax(dmax, fabs(want));
            emax = fmax(emax, fabs(want - gx[q]));
        }
        ck_assert_msg(dmax > 0.0 && emax <= 1e-5 * dmax, "sparse=%s: input gradient off by %g (largest %g)", mode, emax,
                      dmax);
        for (size_t k = 3; k < TILED_WN; k += 97)
            if (gw[k] != 0.0f) check_fd(t, wt->data + k, gw + k, 1, x, y, 1e-2, "cw");
        free(y);
        pdc_trainer_destroy(t);
        pdc_model_destroy(m);
    }
}
END_TEST

/* A small 3-D CNN pruned by prune-kgs (4x4 kernel groups, 9 of 27 positions) and prune-connectivity: every
 * kept weight's gradient against finite differences, on the sparse kernels and on the dense ones. */
START_TEST(kgs_gradients_match_finite_differences)
{
    static const char *const modes[] = {"on", "off"};
    for (int i = 0; i < 2; i++) {
        pdc_model *m = parse_model(HDR "input x : f32[2,4,3,4,4]\n"
                                       "const w1 : f32[8,4,3,3,3] = dense<elided>\nconst b1 : f32[8] = dense<elided>\n"
                                       "const w2 : f32[4,8,3,3,3] = dense<elided>\n"
                                       "layer c1 = conv(x, w1, b1) -> (a) {pads=[1,1,1,1,1,1]}\nlayer t = tanh(a) -> (b)\n"
                                       "layer c2 = conv(b, w2) -> (c) {pads=[1,1,1,1,1,1], strides=[1,2,2]}\n"
                                       "layer p = avgpool(c) -> (y) {kernel_shape=[1,2,2]}\noutput y\n");
        fill_constants(m, 5, 0.5f);
        pdc_attrs *a;
        ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "include_stem", 1));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "kgs_keep", 9));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "pattern_kernels", "3x3x3"));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "connectivity", 0.25f));
        ck_assert_ok(ctx, pdc_model_transform(m, "prune-kgs,prune-connectivity", a));
        pdc_attrs_destroy(a);
        grad_check_model(m, "mse", modes[i], 1e-2, 0);
        pdc_model_destroy(m);
    }
}
END_TEST

/* make_torch_reference.py's net, layer for layer (names as its parameters). */
static const char *torch_ref_net =
    HDR "input x : f32[4,3,8,8]\n"
    "const c1w : f32[8,3,3,3] = dense<elided>\nconst bn1s : f32[8] = dense<elided>\nconst bn1b : f32[8] = dense<elided>\n"
    "const bn1m : f32[8] = dense<elided>\nconst bn1v : f32[8] = dense<elided>\n"
    "const c2w : f32[8,8,3,3] = dense<elided>\nconst bn2s : f32[8] = dense<elided>\nconst bn2b : f32[8] = dense<elided>\n"
    "const bn2m : f32[8] = dense<elided>\nconst bn2v : f32[8] = dense<elided>\n"
    "const dsw : f32[8,8,1,1] = dense<elided>\nconst bn3s : f32[8] = dense<elided>\nconst bn3b : f32[8] = dense<elided>\n"
    "const bn3m : f32[8] = dense<elided>\nconst bn3v : f32[8] = dense<elided>\n"
    "const dww : f32[8,1,3,3] = dense<elided>\nconst dwb : f32[8] = dense<elided>\n"
    "const fw : f32[4,8] = dense<elided>\nconst fb : f32[4] = dense<elided>\n"
    "layer conv1 = conv(x, c1w) -> (a0) {pads=[1,1,1,1]}\n"
    "layer bn1 = batchnorm(a0, bn1s, bn1b, bn1m, bn1v) -> (a1)\nlayer r1 = relu(a1) -> (a)\n"
    "layer conv2 = conv(a, c2w) -> (b0) {pads=[1,1,1,1], strides=[2,2]}\n"
    "layer bn2 = batchnorm(b0, bn2s, bn2b, bn2m, bn2v) -> (b)\n"
    "layer down = conv(a, dsw) -> (s0) {strides=[2,2]}\n"
    "layer bn3 = batchnorm(s0, bn3s, bn3b, bn3m, bn3v) -> (sc)\n"
    "layer add = add(b, sc) -> (r0)\nlayer r2 = relu(r0) -> (r)\n"
    "layer dw = conv(r, dww, dwb) -> (d0) {pads=[1,1,1,1], group=8}\n"
    "layer r6 = clip(d0) -> (d) {min=0.0, max=6.0}\n"
    "layer pool = maxpool(d) -> (m) {kernel_shape=[2,2], strides=[2,2]}\n"
    "layer gap = global_avgpool(m) -> (gp)\nlayer flat = flatten(gp) -> (f)\n"
    "layer fc = fc(f, fw, fb) -> (z)\nlayer sm = softmax(z) -> (y)\noutput y\n";

/* got within a relative 1e-4 of the largest reference value (plus 1e-3 of its own) of want, element by element */
static void assert_close_to_torch(const float *got, const float *want, size_t n, const char *what, const char *mode)
{
    double scale = 1e-6;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - (double)want[i]) <= 1e-4 * scale + 1e-3 * fabs((double)want[i]),
                      "%s, %s[%zu]: pdc %.8g, PyTorch %.8g (largest %.3g)", mode, what, i, (double)got[i],
                      (double)want[i], scale);
}

/* Loss, every parameter's gradient and the input's against PyTorch (float64): dense kernels with conv2's zeros
 * as plain weights, then conv2 declared pattern-sparse on the sparse kernels (kept weights' gradients compared,
 * pruned ones zero) and on the dense ones (sparse=off). */
START_TEST(gradients_match_pytorch)
{
    static const char *const modes[] = {"dense", "sparse=on", "sparse=off"};
    for (int mode = 0; mode < 3; mode++) {
        pdc_model *m = parse_model(torch_ref_net);
        for (size_t i = 0; i < sizeof tref_params / sizeof tref_params[0]; i++) {
            const int ti = ir_model_find_tensor(m, tref_params[i].name);
            ck_assert_int_ge(ti, 0);
            ck_assert_uint_eq(ir_tensor_numel(&m->tensors[ti]), tref_params[i].n);
            memcpy(m->tensors[ti].data, tref_params[i].value, tref_params[i].n * sizeof(float));
        }
        for (int b = 1; b <= 3; b++) { /* running statistics: not read while training */
            char name[8];
            snprintf(name, sizeof name, "bn%dv", b);
            float *v = m->tensors[ir_model_find_tensor(m, name)].data;
            for (int c = 0; c < 8; c++) v[c] = 1.0f;
        }
        if (mode)
            ck_assert_ok(ctx, pdc_model_set_sparsity_pattern(m, "c2w", 3, 3, 8, tref_patterns, 64, tref_c2w_kernel_pattern));
        pdc_trainer *t = trainer_for(m, "cross_entropy");
        pdc_model_destroy(m);
        if (mode) ck_assert_ok(ctx, pdc_trainer_set_option(t, "sparse", mode == 1 ? "on" : "off"));
        tr_net *net = t->net;
        ck_assert_ok(ctx, tr_net_enable_input_grad(net));
        ck_assert_ok(ctx, tr_net_prepare(net, 4));
        const int c2 = tr_net_find_param(net, "c2w");
        ck_assert_int_ge(c2, 0);
        ck_assert_int_eq(net->params[c2].sparse, mode == 1);
        double loss;
        ck_assert_ok(ctx, tr_net_forward(net, tref_x, &t->opt, 1));
        ck_assert_ok(ctx, tr_net_loss(net, &t->opt, tref_labels, 1, &loss, NULL));
        ck_assert_ok(ctx, tr_net_backward(net, &t->opt));
        ck_assert_msg(fabs(loss - tref_loss) <= 1e-5 * fabs(tref_loss), "%s: loss %.9g, PyTorch %.9g", modes[mode], loss,
                      tref_loss);
        for (size_t i = 0; i < sizeof tref_params / sizeof tref_params[0]; i++) {
            const tref_param *r = &tref_params[i];
            const tr_param *p = &net->params[tr_net_find_param(net, r->name)];
            float *want = malloc(r->n * sizeof *want);
            ck_assert_ptr_nonnull(want);
            memcpy(want, r->grad, r->n * sizeof *want);
            if (mode == 1 && p->mask) /* the sparse kernels compute kept weights' gradients only */
                for (size_t k = 0; k < r->n; k++)
                    if (!p->mask[k]) want[k] = 0.0f;
            assert_close_to_torch(p->grad, want, r->n, r->name, modes[mode]);
            free(want);
        }
        assert_close_to_torch(net->grad[net->input], tref_x_grad, sizeof tref_x / sizeof tref_x[0], "x", modes[mode]);
        pdc_trainer_destroy(t);
    }
}
END_TEST

/* Kernels of every instruction set this CPU runs agree with the portable ones. */
START_TEST(kernels_agree_across_instruction_sets)
{
    static const char *const names[] = {"avx2", "avx512"};
    const tk_isa *g = tk_isa_named("generic");
    /* a 13 x 19 weight with every third entry kept, times X [19, 37] (ldx 40): spmm and spmm_dw */
    enum { M = 13, N = 37, K = 19, LD = 40 };
    float w[M * K], x[K * LD], y0[M * LD], y1[M * LD], b[M], dw0[M * K], dw1[M * K];
    int32_t ptr[M + 1], idx[M * K], vidx[M * K];
    test_fill_random(w, M * K, 1);
    test_fill_random(x, K * LD, 2);
    test_fill_random(b, M, 3);
    size_t nnz = 0;
    for (int r = 0; r < M; r++) {
        ptr[r] = (int32_t)nnz;
        for (int q = 0; q < K; q++)
            if ((r + q) % 3 == 0) idx[nnz] = q, vidx[nnz] = r * K + q, nnz++;
    }
    ptr[M] = (int32_t)nnz;
    float wk[M * K]; /* the kept values in entry order, as spmm reads them */
    for (size_t e = 0; e < nnz; e++) wk[e] = w[vidx[e]];
    for (int i = 0; i < 2; i++) {
        const tk_isa *isa = tk_isa_named(names[i]);
        if (!isa) continue;
        g->spmm(M, ptr, idx, wk, b, x, LD, y0, LD, 0, N, 0);
        isa->spmm(M, ptr, idx, wk, b, x, LD, y1, LD, 0, N, 0);
        for (int r = 0; r < M; r++) ck_assert_floats_near(y1 + r * LD, y0 + r * LD, N, 1e-5f);
        memset(dw0, 0, sizeof dw0);
        memset(dw1, 0, sizeof dw1);
        g->spmm_dw(0, M, ptr, idx, vidx, y0, LD, x, LD, N, dw0, 1);
        isa->spmm_dw(0, M, ptr, idx, vidx, y0, LD, x, LD, N, dw1, 1);
        ck_assert_floats_near(dw1, dw0, M * K, 1e-4f);
        /* Adam: the same bits */
        float w0[21], w1[21], m0[21] = {0}, m1[21] = {0}, v0[21] = {0}, v1[21] = {0}, gr[21];
        test_fill_random(w0, 21, 3);
        memcpy(w1, w0, sizeof w0);
        test_fill_random(gr, 21, 4);
        g->adam(21, w0, gr, m0, v0, 0.9f, 0.999f, 0.01f, 0.03f, 1e-8f);
        isa->adam(21, w1, gr, m1, v1, 0.9f, 0.999f, 0.01f, 0.03f, 1e-8f);
        ck_assert(memcmp(w0, w1, sizeof w0) == 0 && memcmp(v0, v1, sizeof v0) == 0);
    }
}
END_TEST

/* The weight-gradient kernels sum kept weights of one row several at a time (each dY vector loaded once for all of
 * them): every weight's gradient must be the bits of its dot product computed alone, at widths through the wide loop
 * and the tail (P = 200: three 64-column steps and 8 columns; P = 37: the tail only), for rows of 0 to 9 kept weights
 * (groups of four and every remainder). */
START_TEST(weight_gradient_grouping_keeps_the_bits)
{
    static const char *const names[] = {"generic", "avx2", "avx512"};
    enum { M = 10, K = 23, LD = 208 };
    static const size_t widths[] = {200, 37};
    float x[K * LD], dy[M * LD], dw_all[M * K], dw_one[M * K];
    int32_t ptr[M + 1], idx[M * K], vidx[M * K];
    test_fill_random(x, K * LD, 5);
    test_fill_random(dy, M * LD, 6);
    size_t nnz = 0;
    for (int r = 0; r < M; r++) { /* row r keeps r entries (row 9 nine), spread over the 23 rows of X */
        ptr[r] = (int32_t)nnz;
        for (int q = 0; q < r; q++) idx[nnz] = (q * 5 + r) % K, vidx[nnz] = r * K + idx[nnz], nnz++;
        for (int32_t a = ptr[r] + 1; a < (int32_t)nnz; a++) /* ascending, as tr_csr keeps them */
            for (int32_t b = a; b > ptr[r] && idx[b - 1] > idx[b]; b--) {
                int32_t t = idx[b]; idx[b] = idx[b - 1], idx[b - 1] = t;
                t = vidx[b], vidx[b] = vidx[b - 1], vidx[b - 1] = t;
            }
    }
    ptr[M] = (int32_t)nnz;
    int ran = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const tk_isa *isa = tk_isa_named(names[i]);
        if (!isa) continue;
        for (size_t wi = 0; wi < 2; wi++) {
            const size_t p = widths[wi];
            memset(dw_all, 0, sizeof dw_all);
            memset(dw_one, 0, sizeof dw_one);
            isa->spmm_dw(0, M, ptr, idx, vidx, dy, LD, x, LD, p, dw_all, 1);
            for (int r = 0; r < M; r++)
                for (int32_t e = ptr[r]; e < ptr[r + 1]; e++) {
                    const int32_t one_ptr[2] = {0, 1};
                    isa->spmm_dw(0, 1, one_ptr, idx + e, vidx + e, dy + (size_t)r * LD, LD, x, LD, p, dw_one, 1);
                }
            ck_assert_msg(memcmp(dw_all, dw_one, sizeof dw_all) == 0, "%s, P = %zu: grouped sums differ", names[i], p);
            ran++;
        }
    }
    ck_assert_int_ge(ran, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train_grad");
    TCase *tc = test_add_tcase(s, "core", ctx_setup, ctx_teardown, 120, NULL);
    tcase_add_loop_test(tc, op_gradients_match_finite_differences, 0, (int)N_OP_CASES);
    test_add_tests(tc, TEST_LIST(whole_net_gradients_match_finite_differences,
                                 sparse_kernel_gradients_match_finite_differences, dead_tap_gradients_match_finite_differences,
                                 tiled_input_gradient_is_right,
                                 kgs_gradients_match_finite_differences, gradients_match_pytorch,
                                 kernels_agree_across_instruction_sets, weight_gradient_grouping_keeps_the_bits));
    return test_run_suite(s);
}
