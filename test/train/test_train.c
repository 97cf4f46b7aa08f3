/*
 * test_train.c - the trainer (include/pdc.h "Training"): gradients of every op against finite
 * differences, per op and for whole small nets (dense and sparse kernels); optimizers and schedules;
 * masked retraining and ADMM through the pruning passes; determinism; checkpoints (resume bit-exactly,
 * corrupt and truncated files refused, a process killed while saving); bad input; export and compile.
 *
 * PDC_TEST_QUICK=1 shrinks the longer tests (fewer steps, fewer kill rounds) for valgrind.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/crc32.h"
#include "lib/train/train.h"
#include "test/common/testutil.h"

static pdc_context *ctx;
static char tmpdir[256];

static void setup(void)
{
    ck_assert_int_eq(pdc_context_create(&ctx), PDC_OK);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pdc_test_train.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    pdc_context_destroy(ctx);
}

static int quick(void)
{
    const char *q = getenv("PDC_TEST_QUICK");
    return q && *q && strcmp(q, "0");
}

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int at;
    at = (at + 1) % 4;
    snprintf(buf[at], sizeof buf[at], "%s/%s", tmpdir, name);
    return buf[at];
}

static pdc_model *parse(const char *text)
{
    pdc_model *m;
    ck_assert_ok(ctx, pdc_model_parse(ctx, text, strlen(text), &m));
    return m;
}

/* Fills every constant of m with deterministic values in [-scale, scale) (batchnorm var: positive). */
static void fill_constants(pdc_model *m, uint32_t seed, float scale)
{
    for (size_t t = 0; t < m->n_tensors; t++) {
        ir_tensor *tt = &m->tensors[t];
        if (tt->kind != IR_TENSOR_CONST) continue;
        const size_t n = ir_tensor_numel(tt);
        test_fill_random(tt->data, n, seed + (uint32_t)t);
        for (size_t i = 0; i < n; i++) tt->data[i] *= scale;
        if (strstr(tt->name, "var"))
            for (size_t i = 0; i < n; i++) tt->data[i] = 1.0f + fabsf(tt->data[i]);
    }
}

static pdc_trainer *trainer_for(pdc_model *m, const char *loss)
{
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "loss", loss));
    return t;
}

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
    pdc_model *m = parse(ir);
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

#define HDR "pdcir 1\nmodel \"g\"\n"
static const op_case op_cases[] = {
    {"conv 3x3 pad 1 + bias", HDR "input x : f32[2,3,5,5]\nconst w : f32[4,3,3,3] = dense<elided>\n"
     "const b : f32[4] = dense<elided>\nlayer c = conv(x, w, b) -> (y) {pads=[1,1,1,1]}\noutput y\n", "mse", 1e-2, 0},
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
    pdc_model *m = parse(ir);
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
        pdc_model *m = parse(prunable_cnn);
        fill_constants(m, 3, 0.5f);
        prune_model(m, 1);
        grad_check_model(m, "cross_entropy", modes[i], 1e-2, 0);
        pdc_model_destroy(m);
    }
}
END_TEST

/* ------------------------------------------------------------------ training behaviour */

/* A tiny separable problem: 4 classes of 2x4x4 images, class c brightest in quadrant c. */
typedef struct toy {
    size_t n;
    float *x, *y;
} toy;

static toy make_toy(size_t n, uint32_t seed)
{
    toy d = {n, malloc(n * 32 * sizeof(float)), malloc(n * sizeof(float))};
    ck_assert_ptr_nonnull(d.x);
    ck_assert_ptr_nonnull(d.y);
    test_fill_random(d.x, n * 32, seed);
    for (size_t i = 0; i < n; i++) {
        const size_t c = (i * 5 + seed) % 4;
        d.y[i] = (float)c;
        for (size_t ch = 0; ch < 2; ch++)
            for (size_t r = 0; r < 2; r++)
                for (size_t q = 0; q < 2; q++)
                    d.x[i * 32 + ch * 16 + ((c / 2) * 2 + r) * 4 + (c % 2) * 2 + q] += 1.5f;
    }
    return d;
}

static void free_toy(toy *d)
{
    free(d->x);
    free(d->y);
}

static const char *toy_cnn =
    HDR "input x : f32[1,2,4,4]\n"
    "const c1w : f32[8,2,3,3] = dense<elided>\nconst c1b : f32[8] = dense<elided>\n"
    "const c2w : f32[8,8,3,3] = dense<elided>\nconst c2b : f32[8] = dense<elided>\n"
    "const fw : f32[4,128] = dense<elided>\nconst fb : f32[4] = dense<elided>\n"
    "layer conv1 = conv(x, c1w, c1b) -> (a) {pads=[1,1,1,1]}\nlayer r1 = relu(a) -> (b)\n"
    "layer conv2 = conv(b, c2w, c2b) -> (c) {pads=[1,1,1,1]}\nlayer r2 = relu(c) -> (d)\n"
    "layer flat = flatten(d) -> (e)\nlayer fc = fc(e, fw, fb) -> (z)\nlayer sm = softmax(z) -> (y)\noutput y\n";

static pdc_trainer *toy_trainer(const char *const *opts)
{
    pdc_model *m = parse(toy_cnn);
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "batch", "8"));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "seed", "42"));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "lr", "0.01"));
    for (size_t i = 0; opts && opts[i]; i += 2) ck_assert_ok(ctx, pdc_trainer_set_option(t, opts[i], opts[i + 1]));
    ck_assert_ok(ctx, pdc_trainer_init_weights(t));
    return t;
}

/* Runs `epochs` epochs of shuffled batches of 8 (the last one partial). */
static void train_toy(pdc_trainer *t, const toy *d, int epochs, float *last_loss)
{
    size_t *perm = malloc(d->n * sizeof *perm);
    float bx[8 * 32], by[8];
    ck_assert_ptr_nonnull(perm);
    for (int e = 0; e < epochs; e++) {
        ck_assert_ok(ctx, pdc_trainer_shuffle(t, d->n, perm));
        for (size_t at = 0; at < d->n; at += 8) {
            const size_t nb = d->n - at < 8 ? d->n - at : 8;
            for (size_t i = 0; i < nb; i++) {
                memcpy(bx + i * 32, d->x + perm[at + i] * 32, 32 * sizeof(float));
                by[i] = d->y[perm[at + i]];
            }
            const int64_t xd[4] = {(int64_t)nb, 2, 4, 4}, yd[1] = {(int64_t)nb};
            pdc_tensor *x, *y;
            ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, bx, &x));
            ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, by, &y));
            ck_assert_ok(ctx, pdc_trainer_step(t, x, y, last_loss));
            pdc_tensor_destroy(x);
            pdc_tensor_destroy(y);
        }
    }
    free(perm);
}

static float toy_accuracy(pdc_trainer *t, const toy *d)
{
    const int64_t xd[4] = {(int64_t)d->n, 2, 4, 4}, yd[1] = {(int64_t)d->n};
    pdc_tensor *x, *y;
    float loss, acc;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, d->x, &x));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, d->y, &y));
    ck_assert_ok(ctx, pdc_trainer_evaluate(t, x, y, &loss, &acc));
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    return acc;
}

START_TEST(optimizers_learn_a_separable_problem)
{
    static const char *const adam[] = {"optimizer", "adam", "lr", "0.01", NULL};
    static const char *const sgd[] = {"optimizer", "sgd", "lr", "0.05", "momentum", "0.9", "weight_decay", "1e-4", NULL};
    static const char *const nesterov[] = {"optimizer", "sgd", "lr", "0.05", "momentum", "0.9", "nesterov", "1",
                                           "lr_schedule", "cosine", "lr_total_steps", "60", NULL};
    static const char *const adamw[] = {"optimizer", "adamw", "lr", "0.01", "weight_decay", "0.01", "lr_schedule",
                                        "step", "lr_step", "30", "lr_gamma", "0.5", NULL};
    static const char *const *const all[] = {adam, sgd, nesterov, adamw};
    toy d = make_toy(60, 1), v = make_toy(40, 2);
    for (size_t i = 0; i < 4; i++) {
        pdc_trainer *t = toy_trainer(all[i]);
        const float before = toy_accuracy(t, &v);
        float loss;
        train_toy(t, &d, 8, &loss);
        const float after = toy_accuracy(t, &v);
        ck_assert_msg(after >= 0.9f && after > before, "%s: accuracy %.3f -> %.3f", all[i][1], (double)before,
                      (double)after);
        pdc_trainer_destroy(t);
    }
    free_toy(&d);
    free_toy(&v);
}
END_TEST

START_TEST(lr_schedules_and_options)
{
    pdc_trainer *t = toy_trainer(NULL);
    char buf[64];
    ck_assert_ok(ctx, pdc_trainer_get_option(t, "lr", buf, sizeof buf));
    ck_assert_str_eq(buf, "0.01");
    ck_assert_ok(ctx, pdc_trainer_get_option(t, "optimizer", buf, sizeof buf));
    ck_assert_str_eq(buf, "adam");
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "lr", "0.1"));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "lr_schedule", "step"));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "lr_step", "10"));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "lr_gamma", "0.5"));
    tr_options o = t->opt;
    ck_assert(fabs(tr_lr_at(&o, 9) - 0.1) < 1e-15 && fabs(tr_lr_at(&o, 10) - 0.05) < 1e-15 &&
              fabs(tr_lr_at(&o, 25) - 0.025) < 1e-15);
    o.schedule = TR_SCHED_COSINE;
    o.lr_total_steps = 100;
    o.lr_min = 0.01;
    ck_assert(fabs(tr_lr_at(&o, 0) - 0.1) < 1e-15 && fabs(tr_lr_at(&o, 50) - 0.055) < 1e-12 &&
              fabs(tr_lr_at(&o, 100) - 0.01) < 1e-15 && fabs(tr_lr_at(&o, 1000) - 0.01) < 1e-15);
    ck_assert_ok(ctx, pdc_trainer_get_option(t, "current_lr", buf, sizeof buf));
    ck_assert_str_eq(buf, "0.10000000000000001");
    ck_assert_ok(ctx, pdc_trainer_get_option(t, "step", buf, sizeof buf));
    ck_assert_str_eq(buf, "0");
    /* refused values change nothing and say what is accepted */
    ck_assert_status(ctx, pdc_trainer_set_option(t, "lr", "-1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "lr");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "lr", "nan"), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_trainer_set_option(t, "optimizer", "rmsprop"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "sgd, adam or adamw");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "batch", "0"), PDC_ERR_INVALID_ARG);
    /* "seed" takes any 64-bit unsigned integer (the largest was refused), nothing beyond */
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "seed", "18446744073709551615"));
    ck_assert_ok(ctx, pdc_trainer_get_option(t, "seed", buf, sizeof buf));
    ck_assert_str_eq(buf, "18446744073709551615");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "seed", "18446744073709551616"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "expected an integer >= 0");
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "seed", "42"));
    ck_assert_status(ctx, pdc_trainer_set_option(t, "no_such", "1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "no_such");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "step", "3"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "read-only");
    ck_assert_status(ctx, pdc_trainer_get_option(t, "lr", buf, 2), PDC_ERR_INVALID_ARG);
    ck_assert_ok(ctx, pdc_trainer_get_option(t, "lr", buf, sizeof buf));
    ck_assert_str_eq(buf, "0.10000000000000001");
    /* loss and optimizer are fixed once training started */
    toy d = make_toy(8, 3);
    float loss;
    train_toy(t, &d, 1, &loss);
    ck_assert_status(ctx, pdc_trainer_set_option(t, "optimizer", "sgd"), PDC_ERR_INVALID_STATE);
    ck_assert_status(ctx, pdc_trainer_set_option(t, "loss", "mse"), PDC_ERR_INVALID_STATE);
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "optimizer", "adam")); /* unchanged: fine */
    ck_assert_ok(ctx, pdc_trainer_get_option(t, "step", buf, sizeof buf));
    ck_assert_str_eq(buf, "1");
    free_toy(&d);
    pdc_trainer_destroy(t);
}
END_TEST

/* Every weight of a trainer, in order, into one array (caller frees). */
static float *all_weights(const pdc_trainer *t, size_t *n_out)
{
    size_t nw, total = 0;
    ck_assert_ok(ctx, pdc_trainer_num_weights(t, &nw));
    for (size_t i = 0; i < nw; i++) total += t->net->params[i].n;
    float *w = malloc(total * sizeof *w), *at = w;
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < nw; i++) {
        const char *name;
        ck_assert_ok(ctx, pdc_trainer_weight_info(t, i, &name, NULL, NULL, NULL, NULL));
        ck_assert_ok(ctx, pdc_trainer_get_weights(t, name, at, t->net->params[i].n));
        at += t->net->params[i].n;
    }
    *n_out = total;
    return w;
}

START_TEST(deterministic_for_any_number_of_threads)
{
    toy d = make_toy(40, 4);
    static const char *const one[] = {"threads", "1", NULL}, *const two[] = {"threads", "2", NULL};
    pdc_trainer *a = toy_trainer(one), *b = toy_trainer(two), *c = toy_trainer(one);
    float la, lb, lc;
    train_toy(a, &d, 2, &la);
    train_toy(b, &d, 2, &lb);
    train_toy(c, &d, 2, &lc);
    size_t na, nb, nc;
    float *wa = all_weights(a, &na), *wb = all_weights(b, &nb), *wc = all_weights(c, &nc);
    ck_assert_uint_eq(na, nb);
    ck_assert_msg(memcmp(wa, wb, na * sizeof *wa) == 0, "1 and 2 threads differ");
    ck_assert_msg(memcmp(wa, wc, na * sizeof *wa) == 0, "two runs differ");
    ck_assert(la == lb && la == lc);
    free(wa);
    free(wb);
    free(wc);
    pdc_trainer_destroy(a);
    pdc_trainer_destroy(b);
    pdc_trainer_destroy(c);
    free_toy(&d);
}
END_TEST

/* The reference backend's forward kernels (option kernels=ref) and the trainer's own give the same training,
 * up to float rounding (the reference accumulates in double). */
START_TEST(reference_forward_kernels_train_the_same)
{
    toy d = make_toy(24, 5);
    static const char *const ref[] = {"kernels", "ref", NULL};
    pdc_trainer *a = toy_trainer(NULL), *b = toy_trainer(ref);
    float la, lb;
    train_toy(a, &d, 2, &la);
    train_toy(b, &d, 2, &lb);
    ck_assert_msg(fabsf(la - lb) <= 1e-4f * fmaxf(1.0f, fabsf(la)), "loss %g vs %g", (double)la, (double)lb);
    size_t na, nb;
    float *wa = all_weights(a, &na), *wb = all_weights(b, &nb);
    ck_assert_floats_near(wb, wa, na, 1e-4f);
    free(wa);
    free(wb);
    pdc_trainer_destroy(a);
    pdc_trainer_destroy(b);
    free_toy(&d);
}
END_TEST

/* The cpu target's elementwise kernels (option kernels=cpu) compute what the reference kernels compute, bit for
 * bit: training gives the same weights as kernels=native. */
START_TEST(cpu_backend_forward_kernels_train_the_same)
{
    static const char *const net =
        HDR "input x : f32[1,2,4,4]\nconst c1w : f32[8,2,3,3] = dense<elided>\nconst c1b : f32[8] = dense<elided>\n"
        "const k : f32[8,1,1] = dense<elided>\nconst fw : f32[4,128] = dense<elided>\nconst fb : f32[4] = dense<elided>\n"
        "layer conv1 = conv(x, c1w, c1b) -> (a) {pads=[1,1,1,1]}\nlayer r1 = relu(a) -> (b)\n"
        "layer m = mul(b, k) -> (c)\nlayer s = add(c, a) -> (d)\nlayer lr = leaky_relu(d) -> (e) {alpha=0.1}\n"
        "layer cl = clip(e) -> (f) {min=-1.0, max=2.0}\nlayer flat = flatten(f) -> (g)\n"
        "layer fc = fc(g, fw, fb) -> (z)\nlayer sm = softmax(z) -> (y)\noutput y\n";
    toy d = make_toy(24, 14);
    pdc_trainer *t[2];
    float loss[2];
    size_t n[2];
    float *w[2];
    for (int i = 0; i < 2; i++) {
        pdc_model *m = parse(net);
        fill_constants(m, 5, 0.3f);
        ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t[i]));
        pdc_model_destroy(m);
        ck_assert_ok(ctx, pdc_trainer_set_option(t[i], "batch", "8"));
        ck_assert_ok(ctx, pdc_trainer_set_option(t[i], "kernels", i ? "cpu" : "native"));
        train_toy(t[i], &d, 2, &loss[i]);
        w[i] = all_weights(t[i], &n[i]);
    }
    ck_assert_msg(n[0] == n[1] && memcmp(w[0], w[1], n[0] * sizeof *w[0]) == 0 && loss[0] == loss[1],
                  "kernels=cpu and kernels=native differ (loss %.9g vs %.9g)", (double)loss[0], (double)loss[1]);
    for (int i = 0; i < 2; i++) {
        free(w[i]);
        pdc_trainer_destroy(t[i]);
    }
    free_toy(&d);
}
END_TEST

/* ------------------------------------------------------------------ pruning in the loop */

static void assert_pruned_zero(const pdc_trainer *t)
{
    const tr_net *net = t->net;
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        if (!p->mask) continue;
        const float *w = net->model->tensors[p->tensor].data;
        for (size_t k = 0; k < p->n; k++) {
            if (p->mask[k]) continue;
            ck_assert_msg(w[k] == 0.0f && (!p->m || p->m[k] == 0.0f) && (!p->v || p->v[k] == 0.0f),
                          "%s[%zu] is pruned but weight %g, state %g %g", net->model->tensors[p->tensor].name, k,
                          (double)w[k], p->m ? (double)p->m[k] : 0.0, p->v ? (double)p->v[k] : 0.0);
        }
    }
}

static pdc_attrs *prune_options(int with_fc)
{
    pdc_attrs *a;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "patterns", 4));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "pattern_size", 4));
    ck_assert_ok(ctx, pdc_attrs_set_float(a, "connectivity", 0.5f));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "block", "1x4:0.75"));
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "layers", with_fc ? "conv1,conv2,fc" : "conv1,conv2"));
    return a;
}

START_TEST(masked_retraining_keeps_pruned_weights_and_state_zero)
{
    static const char *const modes[][7] = {{"sparse", "on", "optimizer", "adam", NULL},
                                           {"sparse", "off", "optimizer", "adam", NULL},
                                           {"sparse", "auto", "optimizer", "sgd", "lr", "0.05", NULL}};
    toy d = make_toy(40, 6);
    for (int mi = 0; mi < 3; mi++) {
        static const char *const extra[] = {"momentum", "0.9", "weight_decay", "0.001", NULL};
        pdc_trainer *t = toy_trainer(modes[mi]);
        for (size_t i = 0; extra[i]; i += 2) ck_assert_ok(ctx, pdc_trainer_set_option(t, extra[i], extra[i + 1]));
        float loss;
        train_toy(t, &d, 2, &loss);
        if (getenv("PDC_TEST_DEBUG")) fprintf(stderr, "mode %d: dense accuracy %.3f\n", mi, (double)toy_accuracy(t, &d));
        pdc_attrs *a = prune_options(1);
        /* only pruning passes */
        ck_assert_status(ctx, pdc_trainer_prune(t, "prune-pattern,reorder", a), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "reorder");
        ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity,prune-block", a));
        pdc_attrs_destroy(a);
        size_t kept;
        int64_t dims[PDC_MAX_RANK];
        const char *name;
        ck_assert_ok(ctx, pdc_trainer_weight_info(t, 2, &name, NULL, dims, &kept, NULL));
        ck_assert_str_eq(name, "c2w");
        ck_assert_uint_eq(kept, 8 * 8 * 4 / 2); /* 4 of 9 entries, half of the kernels */
        ck_assert_int_eq(t->net->params[2].sparse, mi != 1);
        assert_pruned_zero(t);
        if (getenv("PDC_TEST_DEBUG")) fprintf(stderr, "mode %d: pruned accuracy %.3f\n", mi, (double)toy_accuracy(t, &d));
        train_toy(t, &d, 4, &loss);
        if (getenv("PDC_TEST_DEBUG")) fprintf(stderr, "mode %d: retrained accuracy %.3f loss %g\n", mi, (double)toy_accuracy(t, &d), (double)loss);
        assert_pruned_zero(t);
        ck_assert_msg(toy_accuracy(t, &d) >= 0.9f, "pruned and retrained accuracy %.3f", (double)toy_accuracy(t, &d));
        /* writing a nonzero into a pruned position is refused */
        float w[8 * 8 * 9];
        ck_assert_ok(ctx, pdc_trainer_get_weights(t, "conv2", w, 8 * 8 * 9));
        size_t k = 0;
        while (t->net->params[2].mask[k]) k++;
        w[k] = 1.0f;
        ck_assert_status(ctx, pdc_trainer_set_weights(t, "c2w", w, 8 * 8 * 9), PDC_ERR_INVALID_ARG);
        ck_assert_error_has(ctx, "pruned");
        w[k] = 0.0f;
        ck_assert_ok(ctx, pdc_trainer_set_weights(t, "c2w", w, 8 * 8 * 9));
        pdc_trainer_destroy(t);
    }
    free_toy(&d);
}
END_TEST

/* Sparse kernels and dense kernels on the same pruned net train the same, up to rounding. */
START_TEST(sparse_and_dense_kernels_train_the_same)
{
    toy d = make_toy(24, 7);
    static const char *const on[] = {"sparse", "on", NULL}, *const off[] = {"sparse", "off", NULL};
    pdc_trainer *a = toy_trainer(on), *b = toy_trainer(off);
    pdc_attrs *o = prune_options(1);
    ck_assert_ok(ctx, pdc_trainer_prune(a, "prune-pattern,prune-connectivity,prune-block", o));
    ck_assert_ok(ctx, pdc_trainer_prune(b, "prune-pattern,prune-connectivity,prune-block", o));
    pdc_attrs_destroy(o);
    float la, lb;
    train_toy(a, &d, 2, &la);
    train_toy(b, &d, 2, &lb);
    size_t na, nb;
    float *wa = all_weights(a, &na), *wb = all_weights(b, &nb);
    ck_assert_floats_near(wa, wb, na, 1e-4f);
    free(wa);
    free(wb);
    pdc_trainer_destroy(a);
    pdc_trainer_destroy(b);
    free_toy(&d);
}
END_TEST

START_TEST(admm_z_step_is_the_pass_projection)
{
    toy d = make_toy(40, 8);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 2, &loss);
    pdc_attrs *a = prune_options(0);
    ck_assert_status(ctx, pdc_trainer_admm_update(t, NULL), PDC_ERR_INVALID_STATE);
    ck_assert_status(ctx, pdc_trainer_admm_begin(t, "prune-pattern,prune-connectivity", a, 0.0f), PDC_ERR_INVALID_ARG);
    ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-pattern,prune-connectivity", a, 1.0f));
    ck_assert_status(ctx, pdc_trainer_admm_begin(t, "prune-pattern", a, 1.0f), PDC_ERR_INVALID_STATE);
    /* targets: the conv weights (not biases, not the fc) */
    const tr_net *net = t->net;
    for (size_t i = 0; i < net->n_params; i++) {
        const char *name = net->model->tensors[net->params[i].tensor].name;
        ck_assert_msg((net->params[i].admm_z != NULL) == (!strcmp(name, "c1w") || !strcmp(name, "c2w")), "%s", name);
    }
    double r1 = 0.0, r2 = 0.0;
    train_toy(t, &d, 2, &loss);
    ck_assert_ok(ctx, pdc_trainer_admm_update(t, &r1));
    /* Z = the public projections (pattern, then connectivity) of W + U, U = U + W - Z */
    const tr_param *p = &t->net->params[2];
    const float *w = t->net->model->tensors[p->tensor].data;
    float *u_before = malloc(p->n * sizeof *u_before), *z = malloc(p->n * sizeof *z);
    ck_assert_ptr_nonnull(u_before);
    ck_assert_ptr_nonnull(z);
    for (size_t k = 0; k < p->n; k++) u_before[k] = p->admm_u[k] - (w[k] - p->admm_z[k]);
    for (size_t k = 0; k < p->n; k++) z[k] = w[k] + u_before[k];
    uint64_t patterns[4];
    int32_t kp[64];
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, z, 8, 8, 3, 3, 4, 4, 0, patterns, kp));
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, z, 8, 8, 9, 0.5, NULL));
    for (size_t k = 0; k < p->n; k++)
        ck_assert_msg(z[k] == p->admm_z[k], "Z[%zu] %g, projection %g", k, (double)p->admm_z[k], (double)z[k]);
    free(u_before);
    free(z);
    for (int e = 0; e < 3; e++) {
        train_toy(t, &d, 2, &loss);
        ck_assert_ok(ctx, pdc_trainer_admm_update(t, &r2));
    }
    ck_assert_msg(r2 < r1, "ADMM residual did not fall: %g -> %g", r1, r2);
    ck_assert_ok(ctx, pdc_trainer_admm_end(t));
    ck_assert_status(ctx, pdc_trainer_admm_end(t), PDC_ERR_INVALID_STATE);
    ck_assert_ptr_null(t->net->params[2].admm_z);
    ck_assert_uint_eq(t->net->params[2].kept, 8 * 8 * 4 / 2);
    train_toy(t, &d, 2, &loss);
    assert_pruned_zero(t);
    ck_assert_msg(toy_accuracy(t, &d) >= 0.9f, "accuracy %.3f", (double)toy_accuracy(t, &d));
    pdc_attrs_destroy(a);
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

/* The passes' safe defaults hold in the trainer too: conv1 reads the graph input, so pdc_trainer_prune and
 * ADMM leave it dense unless include_stem (or layers) says otherwise. */
START_TEST(trainer_pruning_keeps_the_stem_dense_by_default)
{
    toy d = make_toy(16, 10);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity", NULL));
    size_t kept;
    const char *name;
    ck_assert_ok(ctx, pdc_trainer_weight_info(t, 0, &name, NULL, NULL, &kept, NULL));
    ck_assert_str_eq(name, "c1w");
    ck_assert_uint_eq(kept, 8 * 2 * 9); /* dense */
    ck_assert_ok(ctx, pdc_trainer_weight_info(t, 2, &name, NULL, NULL, &kept, NULL));
    ck_assert_str_eq(name, "c2w");
    ck_assert_uint_eq(kept, 8 * 8 * 4 / 2); /* 4 of 9 entries, half of the kernels */
    train_toy(t, &d, 1, &loss);
    assert_pruned_zero(t);
    /* opted in: the stem is pruned as well */
    pdc_attrs *a;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
    ck_assert_ok(ctx, pdc_attrs_set_int(a, "include_stem", 1));
    ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity", a));
    ck_assert_ok(ctx, pdc_trainer_weight_info(t, 0, NULL, NULL, NULL, &kept, NULL));
    ck_assert_uint_eq(kept, 8 * 2 * 4 / 2);
    pdc_trainer_destroy(t);
    /* ADMM: the defaults pick the targets, conv2's weight only */
    t = toy_trainer(NULL);
    ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-pattern,prune-connectivity", NULL, 1.0f));
    const tr_net *net = t->net;
    for (size_t i = 0; i < net->n_params; i++) {
        const char *pn = net->model->tensors[net->params[i].tensor].name;
        ck_assert_msg((net->params[i].admm_z != NULL) == !strcmp(pn, "c2w"), "%s", pn);
    }
    ck_assert_ok(ctx, pdc_trainer_admm_end(t));
    pdc_trainer_destroy(t);
    /* with the option: conv1 too */
    t = toy_trainer(NULL);
    ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-pattern,prune-connectivity", a, 1.0f));
    net = t->net;
    for (size_t i = 0; i < net->n_params; i++) {
        const char *pn = net->model->tensors[net->params[i].tensor].name;
        ck_assert_msg((net->params[i].admm_z != NULL) == (!strcmp(pn, "c1w") || !strcmp(pn, "c2w")), "%s", pn);
    }
    pdc_attrs_destroy(a);
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

/* After training the model compiles and runs like any other, and saves as .pdc. */
START_TEST(exported_model_compiles_runs_and_saves)
{
    toy d = make_toy(16, 9);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 1, &loss);
    pdc_attrs *a = prune_options(1);
    ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity,prune-block", a));
    pdc_attrs_destroy(a);
    train_toy(t, &d, 1, &loss);
    pdc_model *m;
    ck_assert_ok(ctx, pdc_trainer_export(t, &m));
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
    ck_assert_ok(ctx, pdc_model_input_info(m, 0, NULL, &rank, dims));
    ck_assert_int_eq(dims[0], 1); /* shaped as the model the trainer was made from */
    const char *sp;
    ck_assert_ok(ctx, pdc_model_layer_string(m, 2, PDC_FIELD_SPARSITY, &sp));
    ck_assert_msg(strstr(sp, "pattern") != NULL, "conv2 sparsity: %s", sp);
    ck_assert_ok(ctx, pdc_model_save(m, tmp_path("trained.pdc")));
    pdc_model *back;
    ck_assert_ok(ctx, pdc_model_load(ctx, tmp_path("trained.pdc"), &back));
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, back, "ref", &p));
    /* the program's probabilities are the softmax of the trainer's logits */
    float probs[4];
    const int64_t xd[4] = {1, 2, 4, 4}, yd[2] = {1, 4};
    pdc_tensor *x, *y;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, d.x, &x));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, yd, probs, &y));
    ck_assert_ok(ctx, pdc_program_run(p, 1, &x, 1, &y));
    ck_assert_ok(ctx, tr_net_prepare(t->net, 1));
    ck_assert_ok(ctx, tr_net_forward(t->net, d.x, &t->opt, 0));
    const float *z = t->net->val[tr_net_loss_tensor(t->net, &t->opt)];
    double s = 0.0, mx = z[0];
    for (int i = 1; i < 4; i++) mx = fmax(mx, z[i]);
    for (int i = 0; i < 4; i++) s += exp(z[i] - mx);
    float want[4];
    for (int i = 0; i < 4; i++) want[i] = (float)(exp(z[i] - mx) / s);
    ck_assert_floats_near(probs, want, 4, 1e-5f);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    pdc_program_destroy(p);
    pdc_model_destroy(back);
    pdc_model_destroy(m);
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

/* ------------------------------------------------------------------ checkpoints */

static int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

START_TEST(resume_is_bit_exact)
{
    /* N steps + save + load into a fresh trainer + N steps == 2N steps: the same checkpoint bytes (weights,
     * masks, optimizer, step, schedule, random state), through pruning and ADMM */
    static const char *const sched[] = {"lr_schedule", "cosine", "lr_total_steps", "40", "weight_decay", "0.001", NULL};
    toy d = make_toy(24, 10);
    pdc_attrs *a = prune_options(0), *fc;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &fc));
    ck_assert_ok(ctx, pdc_attrs_set_string(fc, "block", "1x4:0.75"));
    pdc_trainer *full = toy_trainer(sched), *half = toy_trainer(sched);
    float loss;
    for (int i = 0; i < 2; i++) {
        pdc_trainer *t = i ? half : full;
        train_toy(t, &d, 1, &loss);
        ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity", a));
        ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-block", fc, 0.01f));
        train_toy(t, &d, 1, &loss);
        ck_assert_ok(ctx, pdc_trainer_admm_update(t, NULL));
    }
    /* full: N more steps */
    train_toy(full, &d, 2, &loss);
    ck_assert_ok(ctx, pdc_trainer_admm_update(full, NULL));
    ck_assert_ok(ctx, pdc_trainer_save(full, tmp_path("full.ckpt")));
    /* half: save, load into a new trainer with other options, N steps */
    ck_assert_ok(ctx, pdc_trainer_save(half, tmp_path("half.ckpt")));
    pdc_trainer_destroy(half);
    static const char *const other[] = {"lr", "0.5", "optimizer", "sgd", NULL};
    pdc_trainer *resumed = toy_trainer(other);
    ck_assert_ok(ctx, pdc_trainer_load(resumed, tmp_path("half.ckpt")));
    char buf[64];
    ck_assert_ok(ctx, pdc_trainer_get_option(resumed, "optimizer", buf, sizeof buf));
    ck_assert_str_eq(buf, "adam");
    train_toy(resumed, &d, 2, &loss);
    ck_assert_ok(ctx, pdc_trainer_admm_update(resumed, NULL));
    ck_assert_ok(ctx, pdc_trainer_save(resumed, tmp_path("resumed.ckpt")));
    ck_assert_msg(files_equal(tmp_path("full.ckpt"), tmp_path("resumed.ckpt")), "resumed training differs");
    size_t na, nb;
    float *wa = all_weights(full, &na), *wb = all_weights(resumed, &nb);
    ck_assert(na == nb && memcmp(wa, wb, na * sizeof *wa) == 0);
    free(wa);
    free(wb);
    /* and both end the same way */
    ck_assert_ok(ctx, pdc_trainer_admm_end(full));
    ck_assert_ok(ctx, pdc_trainer_admm_end(resumed));
    assert_pruned_zero(resumed);
    pdc_attrs_destroy(a);
    pdc_attrs_destroy(fc);
    pdc_trainer_destroy(full);
    pdc_trainer_destroy(resumed);
    free_toy(&d);
}
END_TEST

static void *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *b = malloc(*n ? *n : 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void write_all(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* Loading the n bytes b as a checkpoint is refused as corrupt with msg, and changes nothing: saving
 * again gives the bytes of the checkpoint `state` (saved from t before). */
static void load_refused(pdc_trainer *t, const uint8_t *b, size_t n, const char *what, const char *msg,
                         const char *state)
{
    write_all(tmp_path("bad.ckpt"), b, n);
    ck_assert_status(ctx, pdc_trainer_load(t, tmp_path("bad.ckpt")), PDC_ERR_CORRUPT);
    ck_assert_msg(strstr(pdc_context_last_error(ctx), msg) != NULL, "%s: message \"%s\" lacks \"%s\"", what,
                  pdc_context_last_error(ctx), msg);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("again.ckpt")));
    ck_assert_msg(files_equal(tmp_path(state), tmp_path("again.ckpt")), "%s changed the trainer", what);
}

START_TEST(corrupt_and_truncated_checkpoints_are_refused)
{
    toy d = make_toy(16, 11);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("good.ckpt")));
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("now.ckpt")));
    size_t n;
    uint8_t *b = read_all(tmp_path("good.ckpt"), &n);
    struct {
        const char *what;
        size_t len, flip;
        const char *msg;
    } cases[] = {
        {"flipped byte", n, n / 2, "CRC-32"},       {"flipped CRC", n, n - 1, "CRC-32"},
        {"truncated", n - 100, (size_t)-1, "truncated"}, {"header only", 20, (size_t)-1, "not a pdc training checkpoint"},
        {"bad magic", n, 0, "magic"},               {"newer version", n, 8, "version"},
        {"empty", 0, (size_t)-1, "not a pdc training checkpoint"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *c = malloc(n);
        ck_assert_ptr_nonnull(c);
        memcpy(c, b, n);
        if (cases[i].flip != (size_t)-1) c[cases[i].flip] ^= 0x5a;
        load_refused(t, c, cases[i].len, cases[i].what, cases[i].msg, "now.ckpt");
        free(c);
    }
    /* the previous good checkpoint still loads */
    ck_assert_ok(ctx, pdc_trainer_load(t, tmp_path("good.ckpt")));
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("again.ckpt")));
    ck_assert(files_equal(tmp_path("good.ckpt"), tmp_path("again.ckpt")));
    ck_assert_status(ctx, pdc_trainer_load(t, tmp_path("missing.ckpt")), PDC_ERR_IO);
    ck_assert_error_has(ctx, "missing.ckpt");
    free(b);
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

START_TEST(checkpoint_admm_state_is_checked)
{
    /* a checkpoint with a right CRC-32 but ADMM state pdc_trainer_admm_begin refuses: a pass that
     * is not a pruning pass (admm_end would restructure the model: 9 layers became 6), an unknown
     * pass, rho = inf. Each is refused as corrupt and leaves the trainer as it was. */
    pdc_trainer *t = toy_trainer(NULL);
    ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-unstructured", NULL, 0.25f));
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("admm.ckpt")));
    size_t n;
    uint8_t *b = read_all(tmp_path("admm.ckpt"), &n);
    static const char pipe[] = "prune-unstructured";
    const size_t len = sizeof pipe - 1;
    size_t at = 0;
    while (at + len <= n && memcmp(b + at, pipe, len)) at++;
    ck_assert_uint_lt(at + len, n); /* the pipeline, after its u32 length and the f64 rho */
    static const uint8_t inf_le[8] = {0, 0, 0, 0, 0, 0, 0xf0, 0x7f};
    struct {
        const char *what;
        size_t off;
        const void *bytes;
        size_t nb;
        const char *msg;
    } cases[] = {
        {"not a pruning pass", at, "canonicalize      ", len, "is refused (trainer: pass 'canonicalize' is not a pruning pass"},
        {"unknown pass", at, "prune-nothing-else", len, "ADMM pipeline \"prune-nothing-else\" is refused"},
        {"rho inf", at - 12, inf_le, 8, "ADMM rho inf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *c = malloc(n);
        ck_assert_ptr_nonnull(c);
        memcpy(c, b, n);
        memcpy(c + cases[i].off, cases[i].bytes, cases[i].nb);
        uint32_t crc = pdc_crc32(0, c, n - 4);
        for (int k = 0; k < 4; k++) c[n - 4 + (size_t)k] = (uint8_t)(crc >> (8 * k));
        load_refused(t, c, n, cases[i].what, cases[i].msg, "admm.ckpt");
        free(c);
    }
    free(b);
    pdc_trainer_destroy(t);
}
END_TEST

START_TEST(checkpoint_of_another_model_is_refused)
{
    pdc_trainer *t = toy_trainer(NULL);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("toy.ckpt")));
    /* same layers, one constant of another shape */
    char ir[2048];
    snprintf(ir, sizeof ir, "%s", toy_cnn);
    char *at = strstr(ir, "c2w : f32[8,8,3,3]");
    ck_assert_ptr_nonnull(at);
    memcpy(at, "c2w : f32[8,8,1,1]", 18);
    at = strstr(ir, "{pads=[1,1,1,1]}\nlayer r2");
    memcpy(at, "{pads=[0,0,0,0]}", 16);
    pdc_model *m = parse(ir);
    pdc_trainer *u;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &u));
    pdc_model_destroy(m);
    ck_assert_status(ctx, pdc_trainer_load(u, tmp_path("toy.ckpt")), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "another model");
    ck_assert_error_has(ctx, "c2w");
    pdc_trainer_destroy(u);
    /* another structure entirely */
    m = parse(op_cases[0].ir);
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &u));
    pdc_model_destroy(m);
    ck_assert_status(ctx, pdc_trainer_load(u, tmp_path("toy.ckpt")), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "layers");
    pdc_trainer_destroy(u);
    pdc_trainer_destroy(t);
}
END_TEST

START_TEST(unwritable_checkpoint_path_loses_nothing)
{
    toy d = make_toy(8, 12);
    pdc_trainer *t = toy_trainer(NULL);
    float loss;
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("keep.ckpt")));
    ck_assert_status(ctx, pdc_trainer_save(t, tmp_path("no/such/dir/x.ckpt")), PDC_ERR_IO);
    ck_assert_error_has(ctx, "no/such/dir");
    /* a path that is a directory */
    ck_assert_int_eq(mkdir(tmp_path("adir"), 0700), 0);
    ck_assert_status(ctx, pdc_trainer_save(t, tmp_path("adir")), PDC_ERR_IO);
    /* the trainer and the earlier checkpoint are intact */
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("again.ckpt")));
    ck_assert(files_equal(tmp_path("keep.ckpt"), tmp_path("again.ckpt")));
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_load(t, tmp_path("keep.ckpt")));
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

/* 1 if a file in dir has a name starting with prefix. */
static int dir_has_prefix(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    const size_t n = strlen(prefix);
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) found = !strncmp(e->d_name, prefix, n);
    closedir(d);
    return found;
}

/* A big model, so that writing a checkpoint takes a while. */
static const char *big_model =
    HDR "input x : f32[1,2048]\nconst w : f32[1024,2048] = dense<elided>\nconst b : f32[1024] = dense<elided>\n"
    "layer f = fc(x, w, b) -> (y)\noutput y\n";

/* Loads path into a fresh trainer and returns the first bias value (each save in the child writes its round
 * number there), or -1 if the file is refused. */
static float saved_round(const char *path)
{
    pdc_model *m = parse(big_model);
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    float r = -1.0f;
    if (pdc_trainer_load(t, path) == PDC_OK) r = t->net->model->tensors[t->net->params[1].tensor].data[0];
    pdc_trainer_destroy(t);
    return r;
}

START_TEST(killed_while_saving_leaves_the_last_good_checkpoint)
{
    const char *path = tmp_path("big.ckpt");
    {
        pdc_model *m = parse(big_model);
        pdc_trainer *t;
        ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
        pdc_model_destroy(m);
        ck_assert_ok(ctx, pdc_trainer_save(t, path)); /* round 0 */
        pdc_trainer_destroy(t);
    }
    const int rounds = quick() ? 4 : 12;
    int mid_write = 0;
    srand(1234);
    for (int round = 1; round <= rounds; round++) {
        const float before = saved_round(path);
        ck_assert_msg(before >= 0.0f, "round %d: the checkpoint does not load: %s", round, pdc_context_last_error(ctx));
        fflush(NULL);
        const pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) { /* child: save rounds forever, each with its round number in b[0] */
            pdc_model *m = parse(big_model);
            pdc_trainer *t;
            if (pdc_trainer_create(ctx, m, &t)) _exit(3);
            for (int k = 1;; k++) {
                float *b = t->net->model->tensors[t->net->params[1].tensor].data;
                b[0] = before + (float)k;
                if (pdc_trainer_save(t, path)) _exit(4);
            }
        }
        /* parent: odd rounds kill as soon as a temporary file shows up (mid-write for sure), even rounds
         * after a random delay (anywhere: before, during or between saves) */
        if (round % 2) {
            char tmpname[600];
            snprintf(tmpname, sizeof tmpname, "%s.tmp.", path);
            const char *base = strrchr(tmpname, '/') + 1;
            int seen = 0;
            for (int spin = 0; spin < 200000 && !seen; spin++) {
                seen = dir_has_prefix(tmpdir, base);
                if (!seen) {
                    struct timespec ts = {0, 20000};
                    nanosleep(&ts, NULL);
                }
            }
            if (seen) mid_write++;
        } else {
            struct timespec ts = {0, (long)(rand() % 30000) * 1000L};
            nanosleep(&ts, NULL);
        }
        kill(pid, SIGKILL);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status), "child exited with %d", WEXITSTATUS(status));
        const float after = saved_round(path);
        ck_assert_msg(after >= before && after == floorf(after), "round %d: checkpoint holds %g after the kill (before: %g): %s",
                      round, (double)after, (double)before, pdc_context_last_error(ctx));
    }
    ck_assert_msg(mid_write > 0, "no kill landed while a checkpoint was being written");
}
END_TEST

/* ------------------------------------------------------------------ bad input */

START_TEST(bad_input_is_refused_and_changes_nothing)
{
    toy d = make_toy(8, 13);
    pdc_trainer *t = toy_trainer(NULL);
    float loss = 123.0f;
    train_toy(t, &d, 1, &loss);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("before.ckpt")));
    float x[16 * 32], y[16];
    memcpy(x, d.x, 8 * 32 * sizeof(float));
    memcpy(x + 8 * 32, d.x, 8 * 32 * sizeof(float));
    memcpy(y, d.y, 8 * sizeof(float));
    memcpy(y + 8, d.y, 8 * sizeof(float));
    pdc_tensor *tx, *ty;
    const int64_t xd[4] = {4, 2, 4, 4}, yd[1] = {4};
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, y, &ty));
    float keep = loss;
    /* labels out of range / not integers */
    y[2] = 4.0f;
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "sample 2");
    ck_assert_error_has(ctx, "0..3");
    y[2] = -1.0f;
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_INVALID_ARG);
    y[2] = 1.5f;
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_INVALID_ARG);
    y[2] = NAN;
    ck_assert_status(ctx, pdc_trainer_evaluate(t, tx, ty, &loss, NULL), PDC_ERR_INVALID_ARG);
    y[2] = d.y[2];
    ck_assert(loss == keep);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    /* batch shape mismatches */
    const int64_t bad_x[4] = {4, 2, 4, 5}, bad_rank[3] = {4, 2, 16}, big[4] = {16, 2, 4, 4}, yd3[1] = {3}, y16[1] = {16};
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, bad_x, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, y, &ty));
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "4x2x4x5");
    ck_assert_error_has(ctx, "?x2x4x4");
    pdc_tensor_destroy(tx);
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 3, bad_rank, x, &tx));
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_SHAPE);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd3, y, &ty));
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "labels");
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, big, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, y16, y, &ty));
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "batch");
    ck_assert_ok(ctx, pdc_trainer_evaluate(t, tx, ty, &loss, NULL)); /* evaluate takes any N */
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    /* NaN / Inf in the loss: PDC_ERR_NUMERIC naming the step, weights unchanged */
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, y, &ty));
    /* (relu turns a NaN input into 0 on its way, so the NaN shows in the first conv's weight gradient) */
    x[5] = NAN;
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_NUMERIC);
    ck_assert_error_has(ctx, "step 2:");
    ck_assert_error_has(ctx, "NaN or infinite");
    x[5] = INFINITY;
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_NUMERIC);
    ck_assert_error_has(ctx, "step 2:");
    x[5] = d.x[5];
    ck_assert_str_eq(pdc_status_string(PDC_ERR_NUMERIC), "PDC_ERR_NUMERIC");
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("after.ckpt")));
    ck_assert_msg(files_equal(tmp_path("before.ckpt"), tmp_path("after.ckpt")), "a refused step changed the trainer");
    ck_assert_ok(ctx, pdc_trainer_step(t, tx, ty, &loss));
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    /* NULLs and unknown names */
    ck_assert_status(ctx, pdc_trainer_step(t, NULL, NULL, NULL), PDC_ERR_INVALID_ARG);
    ck_assert_int_eq(pdc_trainer_step(NULL, NULL, NULL, NULL), PDC_ERR_INVALID_ARG);
    float w[4];
    ck_assert_status(ctx, pdc_trainer_get_weights(t, "nope", w, 4), PDC_ERR_NOT_FOUND);
    ck_assert_status(ctx, pdc_trainer_get_weights(t, "fb", w, 3), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "4 elements");
    ck_assert_ok(ctx, pdc_trainer_get_weights(t, "fb", w, 4));
    w[0] = NAN;
    ck_assert_status(ctx, pdc_trainer_set_weights(t, "fb", w, 4), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_trainer_weight_info(t, 99, NULL, NULL, NULL, NULL, NULL), PDC_ERR_NOT_FOUND);
    pdc_trainer_destroy(NULL);
    pdc_trainer_destroy(t);
    free_toy(&d);
    /* a loss that is itself infinite (mse of an fc whose input holds an infinity) */
    pdc_model *m = parse(HDR "input x : f32[1,3]\nconst w : f32[2,3] = dense<elided>\nlayer f = fc(x, w) -> (y)\noutput y\n");
    fill_constants(m, 1, 1.0f);
    t = trainer_for(m, "mse");
    pdc_model_destroy(m);
    float fx[3] = {1.0f, INFINITY, 2.0f}, fy[2] = {0.0f, 0.0f};
    const int64_t fxd[2] = {1, 3}, fyd[2] = {1, 2};
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, fxd, fx, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, fyd, fy, &ty));
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_NUMERIC);
    ck_assert_error_has(ctx, "step 1: the loss is");
    fx[1] = 0.5f;
    ck_assert_ok(ctx, pdc_trainer_step(t, tx, ty, &loss));
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_trainer_destroy(t);
}
END_TEST

START_TEST(unsupported_models_are_refused_with_the_layer)
{
    pdc_model *m = parse(HDR "input x : f32[2,3,4]\nconst w : f32[1,8,4] = dense<elided>\nconst r : f32[1,8,2] = dense<elided>\n"
                             "layer l = lstm(x, w, r) -> (y) {hidden_size=2}\noutput y\n");
    pdc_trainer *t;
    ck_assert_status(ctx, pdc_trainer_create(ctx, m, &t), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "'l'");
    ck_assert_error_has(ctx, "lstm");
    pdc_model_destroy(m);
    m = parse(HDR "input x : f32[1,1,3,3,3]\nconst w : f32[1,1,2,2,2] = dense<elided>\n"
                  "layer c = conv(x, w) -> (y)\noutput y\n");
    ck_assert_status(ctx, pdc_trainer_create(ctx, m, &t), PDC_ERR_UNSUPPORTED);
    ck_assert_error_has(ctx, "3-D");
    pdc_model_destroy(m);
    m = parse(HDR "input x : f32[2,3]\ninput x2 : f32[2,3]\nlayer a = add(x, x2) -> (y)\noutput y\n");
    ck_assert_status(ctx, pdc_trainer_create(ctx, m, &t), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "1 input");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(mse_evaluate_and_batchnorm_running_statistics)
{
    pdc_model *m = parse(HDR "input x : f32[1,3]\nconst s : f32[3] = dense<elided>\nconst b : f32[3] = dense<elided>\n"
                             "const mean : f32[3] = dense<elided>\nconst var : f32[3] = dense<elided>\n"
                             "layer n = batchnorm(x, s, b, mean, var) -> (y)\noutput y\n");
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "loss", "mse"));
    ck_assert_ok(ctx, pdc_trainer_init_weights(t));
    float x[6] = {1, 2, 3, 3, 4, 5}, y[6] = {0, 0, 1, 0, 1, 0};
    const int64_t d2[2] = {2, 3};
    pdc_tensor *tx, *ty;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, d2, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 2, d2, y, &ty));
    float loss, acc;
    ck_assert_ok(ctx, pdc_trainer_step(t, tx, ty, &loss));
    /* batch statistics: x normalised per channel to -1, +1 (eps 1e-5), scale 1, bias 0 */
    const float want = (float)((1 + 1 + 4 + 1 + 0 + 1) / 6.0);
    ck_assert_msg(fabsf(loss - want) < 1e-4f, "loss %g, want %g", (double)loss, (double)want);
    /* running statistics moved 10% towards mean 2,3,4 and unbiased var 2,2,2 */
    float mean[3], var[3];
    ck_assert_ok(ctx, pdc_trainer_get_weights(t, "mean", mean, 3));
    ck_assert_ok(ctx, pdc_trainer_get_weights(t, "var", var, 3));
    const float wm[3] = {0.2f, 0.3f, 0.4f}, wv[3] = {1.1f, 1.1f, 1.1f};
    ck_assert_floats_near(mean, wm, 3, 1e-6f);
    ck_assert_floats_near(var, wv, 3, 1e-6f);
    int trainable;
    ck_assert_ok(ctx, pdc_trainer_weight_info(t, 2, NULL, NULL, NULL, NULL, &trainable));
    ck_assert_int_eq(trainable, 0);
    /* evaluate: running statistics; accuracy = argmax agreement */
    ck_assert_ok(ctx, pdc_trainer_evaluate(t, tx, ty, &loss, &acc));
    ck_assert(acc >= 0.0f && acc <= 1.0f);
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    pdc_trainer_destroy(t);
}
END_TEST

/* Kernels of every instruction set this CPU runs agree with the portable ones. */
START_TEST(kernels_agree_across_instruction_sets)
{
    static const char *const names[] = {"avx2", "avx512"};
    const tk_isa *g = tk_isa_named("generic");
    enum { M = 13, N = 37, K = 19 };
    float a[M * K], b[K * N], c0[M * N], c1[M * N];
    test_fill_random(a, M * K, 1);
    test_fill_random(b, K * N, 2);
    float *work = malloc(tk_gemm_work(g, M, N, K, 2) * sizeof(float) * 4);
    ck_assert_ptr_nonnull(work);
    for (int i = 0; i < 2; i++) {
        const tk_isa *isa = tk_isa_named(names[i]);
        if (!isa) continue;
        free(work);
        work = malloc(tk_gemm_work(isa, M, N, K, 2) * sizeof(float) * 4);
        ck_assert_ptr_nonnull(work);
        tk_gemm(g, M, N, K, a, K, 1, b, N, c0, N, 1, 0, work, 1);
        tk_gemm(isa, M, N, K, a, K, 1, b, N, c1, N, 1, 0, work, 2);
        ck_assert_floats_near(c1, c0, M * N, 1e-5f);
        /* dot-product form: A (M x K) times B^T with B = N x K */
        float bt[N * K], d0[M * N], d1[M * N];
        for (int r = 0; r < N; r++)
            for (int q = 0; q < K; q++) bt[r * K + q] = b[q * N + r];
        tk_gemm_nt(g, M, N, K, a, K, bt, K, d0, N, 1, 0, 1);
        tk_gemm_nt(isa, M, N, K, a, K, bt, K, d1, 1, M, 0, 2); /* transposed store */
        for (int r = 0; r < M; r++)
            for (int q = 0; q < N; q++)
                ck_assert_msg(fabsf(d1[q * M + r] - c0[r * N + q]) <= 1e-5f && fabsf(d0[r * N + q] - c0[r * N + q]) <= 1e-5f,
                              "%s gemm_nt (%d,%d): %g %g, want %g", names[i], r, q, (double)d1[q * M + r],
                              (double)d0[r * N + q], (double)c0[r * N + q]);
        /* Adam: the same bits */
        float w0[21], w1[21], m0[21] = {0}, m1[21] = {0}, v0[21] = {0}, v1[21] = {0}, gr[21];
        test_fill_random(w0, 21, 3);
        memcpy(w1, w0, sizeof w0);
        test_fill_random(gr, 21, 4);
        g->adam(21, w0, gr, m0, v0, 0.9f, 0.999f, 0.01f, 0.03f, 1e-8f);
        isa->adam(21, w1, gr, m1, v1, 0.9f, 0.999f, 0.01f, 0.03f, 1e-8f);
        ck_assert(memcmp(w0, w1, sizeof w0) == 0 && memcmp(v0, v1, sizeof v0) == 0);
    }
    free(work);
}
END_TEST

static Suite *train_suite(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, op_gradients_match_finite_differences, 0, (int)N_OP_CASES);
    tcase_add_test(tc, whole_net_gradients_match_finite_differences);
    tcase_add_test(tc, sparse_kernel_gradients_match_finite_differences);
    tcase_add_test(tc, optimizers_learn_a_separable_problem);
    tcase_add_test(tc, lr_schedules_and_options);
    tcase_add_test(tc, deterministic_for_any_number_of_threads);
    tcase_add_test(tc, reference_forward_kernels_train_the_same);
    tcase_add_test(tc, cpu_backend_forward_kernels_train_the_same);
    tcase_add_test(tc, masked_retraining_keeps_pruned_weights_and_state_zero);
    tcase_add_test(tc, sparse_and_dense_kernels_train_the_same);
    tcase_add_test(tc, admm_z_step_is_the_pass_projection);
    tcase_add_test(tc, trainer_pruning_keeps_the_stem_dense_by_default);
    tcase_add_test(tc, exported_model_compiles_runs_and_saves);
    tcase_add_test(tc, resume_is_bit_exact);
    tcase_add_test(tc, corrupt_and_truncated_checkpoints_are_refused);
    tcase_add_test(tc, checkpoint_admm_state_is_checked);
    tcase_add_test(tc, checkpoint_of_another_model_is_refused);
    tcase_add_test(tc, unwritable_checkpoint_path_loses_nothing);
    tcase_add_test(tc, killed_while_saving_leaves_the_last_good_checkpoint);
    tcase_add_test(tc, bad_input_is_refused_and_changes_nothing);
    tcase_add_test(tc, unsupported_models_are_refused_with_the_layer);
    tcase_add_test(tc, mse_evaluate_and_batchnorm_running_statistics);
    tcase_add_test(tc, kernels_agree_across_instruction_sets);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(train_suite()); }
