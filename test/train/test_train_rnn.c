/*
 * test_train_rnn.c - the trainer on lstm and gru (lib/train/train_rnn.c): gradients of every direction and
 * option against PyTorch's autograd (test/train/rnn_torch_reference.h, written by make_rnn_torch_reference.py)
 * and against central finite differences, a sequence classifier (lstm -> y_h -> gemm -> softmax) trained from
 * [T, N, F] batches, pruned gate weights and their optimizer state staying zero, checkpoints and ADMM with
 * recurrent weights, and bad recurrent layers refused with the layer named.
 */
#include "lib/train/train.h"

#include "test/common/builders.h"
#include "test/train/rnn_torch_reference.h"

/* ------------------------------------------------------------------ models */

/* One cell and a head reading every output: mse(y * (y_h + y_c)) for lstm, mse(y * y_h) for gru (as the
 * reference script). Inputs present as the flags say; constants uninitialised (the caller fills them). */
static pdc_model *cell_model(int lstm, const char *direction, int lbr, int bias, int states, size_t T, size_t B,
                             size_t I, size_t H)
{
    const size_t D = strcmp(direction, "bidirectional") ? 1 : 2, G = lstm ? 4 : 3;
    char ir[2048];
    int n = snprintf(ir, sizeof ir, HDR "input x : f32[%zu,%zu,%zu]\nconst w : f32[%zu,%zu,%zu] = dense<elided>\n"
                     "const r : f32[%zu,%zu,%zu] = dense<elided>\n", T, B, I, D, G * H, I, D, G * H, H);
    if (bias) n += snprintf(ir + n, sizeof ir - (size_t)n, "const b : f32[%zu,%zu] = dense<elided>\n", D, 2 * G * H);
    if (states) {
        n += snprintf(ir + n, sizeof ir - (size_t)n, "const h0 : f32[%zu,%zu,%zu] = dense<elided>\n", D, B, H);
        if (lstm) n += snprintf(ir + n, sizeof ir - (size_t)n, "const c0 : f32[%zu,%zu,%zu] = dense<elided>\n", D, B, H);
    }
    n += snprintf(ir + n, sizeof ir - (size_t)n, "layer cell = %s(x, w, r, %s, -, %s%s) -> (y, yh%s) "
                  "{hidden_size=%zu, direction=\"%s\"%s}\n", lstm ? "lstm" : "gru", bias ? "b" : "-",
                  states ? "h0" : "-", lstm ? (states ? ", c0" : ", -") : "", lstm ? ", yc" : "", H, direction,
                  lbr ? ", linear_before_reset=1" : "");
    if (lstm)
        snprintf(ir + n, sizeof ir - (size_t)n, "layer s = add(yh, yc) -> (st)\nlayer m = mul(y, st) -> (o)\noutput o\n");
    else
        snprintf(ir + n, sizeof ir - (size_t)n, "layer m = mul(y, yh) -> (o)\noutput o\n");
    return parse_model(ir);
}

/* Sequence classifier: x[T, N, F] -> lstm/gru (hidden H) -> y_h [D, N, H] -> [N, D*H] -> gemm -> softmax. */
static pdc_model *classifier_model(const char *op, const char *direction, size_t T, size_t N, size_t F, size_t H,
                                   size_t C)
{
    const size_t D = strcmp(direction, "bidirectional") ? 1 : 2, G = strcmp(op, "lstm") ? 3 : 4;
    char ir[2048];
    snprintf(ir, sizeof ir, HDR "input x : f32[%zu,%zu,%zu]\nconst w : f32[%zu,%zu,%zu] = dense<elided>\n"
             "const r : f32[%zu,%zu,%zu] = dense<elided>\nconst b : f32[%zu,%zu] = dense<elided>\n"
             "const fw : f32[%zu,%zu] = dense<elided>\nconst fb : f32[%zu] = dense<elided>\n"
             "layer cell = %s(x, w, r, b) -> (y, yh) {hidden_size=%zu, direction=\"%s\"}\n"
             "layer tp = transpose(yh) -> (yt) {perm=[1,0,2]}\nlayer flat = reshape(yt) -> (f) {shape=[0,-1]}\n"
             "layer head = gemm(f, fw, fb) -> (z) {transB=1}\nlayer sm = softmax(z) -> (p)\noutput p\n",
             T, N, F, D, G * H, F, D, G * H, H, D, 2 * G * H, C, D * H, C, op, H, direction);
    return parse_model(ir);
}

static void set_const(pdc_model *m, const char *name, const float *v)
{
    const int t = ir_model_find_tensor(m, name);
    ck_assert_int_ge(t, 0);
    memcpy(m->tensors[t].data, v, ir_tensor_numel(&m->tensors[t]) * sizeof *v);
}

/* ------------------------------------------------------------------ against PyTorch */

static void assert_close_rel(const float *got, const float *want, size_t n, const char *what, const char *c)
{
    double scale = 1e-6;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - (double)want[i]) <= 1e-3 * scale, "%s, %s[%zu]: pdc %.8g, PyTorch %.8g "
                      "(largest %.3g)", c, what, i, (double)got[i], (double)want[i], scale);
}

/* Loss and the gradient of every input and weight within 1e-3 of the largest reference value, per case. */
START_TEST(rnn_gradients_match_pytorch)
{
    const rref_case *c = &rref_cases[_i];
    pdc_model *m = cell_model(c->lstm, c->direction, c->linear_before_reset, c->b != NULL, c->h0 != NULL, RREF_T,
                              RREF_B, RREF_I, RREF_H);
    set_const(m, "w", c->w);
    set_const(m, "r", c->r);
    if (c->b) set_const(m, "b", c->b);
    if (c->h0) set_const(m, "h0", c->h0);
    if (c->c0) set_const(m, "c0", c->c0);
    pdc_trainer *t = trainer_for(m, "mse");
    pdc_model_destroy(m);
    tr_net *net = t->net;
    ck_assert_int_eq(net->batch_axis, 1);
    ck_assert_ok(ctx, tr_net_enable_input_grad(net));
    ck_assert_ok(ctx, tr_net_prepare(net, RREF_B));
    double loss;
    ck_assert_ok(ctx, tr_net_forward(net, c->x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(net, &t->opt, c->target, 1, &loss, NULL));
    ck_assert_ok(ctx, tr_net_backward(net, &t->opt));
    ck_assert_msg(fabs(loss - c->loss) <= 1e-5 * c->loss, "%s: loss %.9g, PyTorch %.9g", c->name, loss, c->loss);
    assert_close_rel(net->grad[net->input], c->x_grad, ir_tensor_numel(&net->exec->tensors[net->input]), "x", c->name);
    const struct { const char *name; const float *grad; } ws[] = {
        {"w", c->w_grad}, {"r", c->r_grad}, {"b", c->b_grad}, {"h0", c->h0_grad}, {"c0", c->c0_grad}};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        if (!ws[i].grad) continue;
        const int pi = tr_net_find_param(net, ws[i].name);
        ck_assert_int_ge(pi, 0);
        assert_close_rel(net->params[pi].grad, ws[i].grad, net->params[pi].n, ws[i].name, c->name);
    }
    pdc_trainer_destroy(t);
}
END_TEST

/* ------------------------------------------------------------------ against finite differences */

static double loss_at(pdc_trainer *t, const float *x, const float *y)
{
    double l;
    ck_assert_ok(ctx, tr_net_forward(t->net, x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(t->net, &t->opt, y, 0, &l, NULL));
    return l;
}

static void check_fd(pdc_trainer *t, float *v, const float *g, const uint8_t *mask, size_t n, const float *x,
                     const float *y, const char *what)
{
    const double h = 1e-2;
    double scale = 1e-2;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)g[i]));
    for (size_t i = 0; i < n; i++) {
        if (mask && !mask[i]) continue; /* pruned: the optimizer drops its gradient */
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

/* Every trained constant's gradient and the input's against central differences; batch N in dim 1. */
static void fd_check(pdc_model *m, const char *loss, size_t N)
{
    pdc_trainer *t = trainer_for(m, loss);
    tr_net *net = t->net;
    ck_assert_ok(ctx, tr_net_enable_input_grad(net));
    ck_assert_ok(ctx, tr_net_prepare(net, N));
    const size_t xn = ir_tensor_numel(&net->exec->tensors[net->input]);
    const size_t on = ir_tensor_numel(&net->exec->tensors[tr_net_loss_tensor(net, &t->opt)]);
    float *x = malloc(xn * sizeof *x), *y = malloc(on * sizeof *y), *g = NULL;
    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    test_fill_random(x, xn, 77);
    if (!strcmp(loss, "mse"))
        test_fill_random(y, on, 5);
    else
        for (size_t i = 0; i < N; i++) y[i] = (float)((i * 7 + 3) % (on / N));
    double l;
    ck_assert_ok(ctx, tr_net_forward(net, x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(net, &t->opt, y, 1, &l, NULL));
    ck_assert_ok(ctx, tr_net_backward(net, &t->opt));
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        g = realloc(g, p->n * sizeof *g);
        ck_assert_ptr_nonnull(g);
        memcpy(g, p->grad, p->n * sizeof *g); /* the finite differences run the forward pass again */
        check_fd(t, net->model->tensors[p->tensor].data, g, p->mask, p->n, x, y, net->model->tensors[p->tensor].name);
    }
    g = realloc(g, xn * sizeof *g);
    ck_assert_ptr_nonnull(g);
    memcpy(g, net->grad[net->input], xn * sizeof *g);
    check_fd(t, x, g, NULL, xn, x, y, "x");
    free(g);
    free(x);
    free(y);
    pdc_trainer_destroy(t);
}

typedef struct fd_case {
    int lstm, lbr, bias, states;
    const char *direction;
} fd_case;

static const fd_case fd_cases[] = {
    {1, 0, 1, 1, "forward"}, {1, 0, 0, 0, "reverse"}, {1, 0, 1, 1, "bidirectional"}, {0, 0, 1, 1, "forward"},
    {0, 1, 1, 0, "reverse"}, {0, 0, 0, 1, "bidirectional"}, {0, 1, 1, 1, "bidirectional"},
};

START_TEST(rnn_gradients_match_finite_differences)
{
    const fd_case *c = &fd_cases[_i];
    pdc_model *m = cell_model(c->lstm, c->direction, c->lbr, c->bias, c->states, 4, 3, 2, 3);
    fill_constants(m, 19, 0.6f);
    fd_check(m, "mse", 3);
    pdc_model_destroy(m);
}
END_TEST

/* The classifier from the final state, cross-entropy (the folded softmax), both ops and a bidirectional cell. */
START_TEST(classifier_gradients_match_finite_differences)
{
    static const char *const ops[][2] = {{"lstm", "forward"}, {"gru", "forward"}, {"lstm", "bidirectional"}};
    for (size_t i = 0; i < 3; i++) {
        pdc_model *m = classifier_model(ops[i][0], ops[i][1], 5, 4, 3, 4, 3);
        fill_constants(m, 23, 0.7f);
        fd_check(m, "cross_entropy", 4);
        pdc_model_destroy(m);
    }
}
END_TEST

/* lstm gate matrices pruned in blocks, gru's block column-row: the kept weights' gradients match finite
 * differences; after Adam steps every pruned weight and its optimizer state are exactly zero. */
START_TEST(pruned_gate_weights_stay_zero)
{
    for (int lstm = 1; lstm >= 0; lstm--) {
        pdc_model *m = classifier_model(lstm ? "lstm" : "gru", "bidirectional", 5, 4, 4, 8, 3);
        fill_constants(m, 29, 0.5f);
        pdc_model *dense = clone(m);
        if (lstm) {
            ck_assert_ok(ctx, transform(m, "prune-block", opt_s("block", "1x4:0.5")));
        } else {
            pdc_attrs *o = opt_s("bcr_block", "4x4");
            ck_assert_ok(ctx, pdc_attrs_set_string(o, "bcr_row_rate", "0.5"));
            ck_assert_ok(ctx, transform(m, "prune-bcr", o));
        }
        const ir_sparsity_kind kind = lstm ? IR_SPARSITY_BLOCK : IR_SPARSITY_BCR;
        ck_assert_int_eq(tensor(m, "w")->sparsity.kind, kind);
        ck_assert_int_eq(tensor(m, "r")->sparsity.kind, kind);
        fd_check(m, "cross_entropy", 4);
        pdc_trainer *t = trainer_for(m, "cross_entropy");
        ck_assert_ok(ctx, pdc_trainer_set_option(t, "optimizer", "adam"));
        ck_assert_ok(ctx, pdc_trainer_set_option(t, "batch", "4"));
        float x[5 * 4 * 4], lab[4] = {0, 1, 2, 1}, loss;
        test_fill_random(x, sizeof x / sizeof x[0], 3);
        pdc_tensor *xt, *lt;
        ck_assert_ok(ctx, pdc_tensor_create(ctx, 3, (const int64_t[]){5, 4, 4}, &xt));
        ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, (const int64_t[]){4}, &lt));
        memcpy(pdc_tensor_data(xt), x, sizeof x);
        memcpy(pdc_tensor_data(lt), lab, sizeof lab);
        for (int s = 0; s < 3; s++) ck_assert_ok(ctx, pdc_trainer_step(t, xt, lt, &loss));
        size_t pruned = 0;
        for (size_t i = 0; i < t->net->n_params; i++) {
            const tr_param *p = &t->net->params[i];
            if (!p->mask) continue;
            const float *w = t->net->model->tensors[p->tensor].data;
            for (size_t k = 0; k < p->n; k++) {
                if (p->mask[k]) continue;
                pruned++;
                ck_assert_msg(w[k] == 0.0f && p->m[k] == 0.0f && p->v[k] == 0.0f, "weight %zu: %g, state %g %g", k,
                              (double)w[k], (double)p->m[k], (double)p->v[k]);
            }
        }
        ck_assert_uint_gt(pruned, 100);
        /* a checkpoint brings the sparsity (block or bcr) back into a trainer of the dense model */
        pdc_trainer *back = trainer_for(dense, "cross_entropy");
        ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("pruned.ckpt")));
        ck_assert_ok(ctx, pdc_trainer_load(back, tmp_path("pruned.ckpt")));
        const ir_tensor *wa = tensor(t->net->model, "r"), *wb = tensor(back->net->model, "r");
        ck_assert(ir_sparsity_equal(&wa->sparsity, &wb->sparsity));
        ck_assert_mem_eq(wa->data, wb->data, ir_tensor_numel(wa) * sizeof(float));
        pdc_trainer_destroy(back);
        pdc_model_destroy(dense);
        pdc_tensor_destroy(xt);
        pdc_tensor_destroy(lt);
        pdc_trainer_destroy(t);
        pdc_model_destroy(m);
    }
}
END_TEST

/* Every kept weight's gradient and the input's (concatenated, malloc'd, *n) after one backward pass of m at
 * option sparse = mode; *sparse_params: how many parameters the trainer put on the sparse kernels. */
static float *kept_grads(pdc_model *m, const char *mode, size_t N, size_t *n, int *sparse_params)
{
    pdc_trainer *t = trainer_for(m, "cross_entropy");
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "sparse", mode));
    tr_net *net = t->net;
    ck_assert_ok(ctx, tr_net_enable_input_grad(net));
    ck_assert_ok(ctx, tr_net_prepare(net, N));
    const size_t xn = ir_tensor_numel(&net->exec->tensors[net->input]);
    const size_t on = ir_tensor_numel(&net->exec->tensors[tr_net_loss_tensor(net, &t->opt)]);
    float *x = malloc(xn * sizeof *x), *y = malloc(on * sizeof *y);
    test_fill_random(x, xn, 77);
    for (size_t i = 0; i < N; i++) y[i] = (float)((i * 7 + 3) % (on / N));
    double l;
    ck_assert_ok(ctx, tr_net_forward(net, x, &t->opt, 1));
    ck_assert_ok(ctx, tr_net_loss(net, &t->opt, y, 1, &l, NULL));
    ck_assert_ok(ctx, tr_net_backward(net, &t->opt));
    size_t total = xn;
    for (size_t i = 0; i < net->n_params; i++) total += net->params[i].n;
    float *g = malloc(total * sizeof *g);
    *n = 0;
    *sparse_params = 0;
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        *sparse_params += p->sparse;
        for (size_t k = 0; k < p->n; k++)
            if (!p->mask || p->mask[k]) g[(*n)++] = p->grad[k];
    }
    memcpy(g + *n, net->grad[net->input], xn * sizeof *g);
    *n += xn;
    free(x);
    free(y);
    pdc_trainer_destroy(t);
    return g;
}

/* BCR-pruned bidirectional lstm and gru classifiers: with w (and lstm's r) on the sparse kernels (the
 * products of all steps: dW, dR, dx over the kept weights only), every kept weight's gradient and the
 * input's match the dense products' (sparse=off) to float rounding. */
START_TEST(sparse_gate_gradients_match_dense)
{
    for (int lstm = 1; lstm >= 0; lstm--) {
        pdc_model *m = classifier_model(lstm ? "lstm" : "gru", "bidirectional", 5, 3, 12, 8, 3);
        fill_constants(m, 31, 0.5f);
        pdc_attrs *o = opt_s("bcr_block", "4x4");
        ck_assert_ok(ctx, pdc_attrs_set_string(o, "bcr_row_rate", "0.5"));
        ck_assert_ok(ctx, transform(m, "prune-bcr", o));
        size_t n1, n2;
        int sp_on, sp_off;
        float *want = kept_grads(m, "off", 3, &n1, &sp_off), *got = kept_grads(m, "on", 3, &n2, &sp_on);
        ck_assert_int_eq(sp_off, 0);
        ck_assert_int_eq(sp_on, (lstm ? 2 : 1)); /* w, and r for lstm (gru's r stays dense) */
        ck_assert_uint_eq(n1, n2);
        ck_assert_floats_near(got, want, n1, 1e-5f);
        free(want);
        free(got);
        pdc_model_destroy(m);
    }
}
END_TEST

/* ------------------------------------------------------------------ whole loop */

/* Toy task: the class is which of 3 features has the largest sum over time. Batches of [T, N, F]. */
static void toy_data(size_t T, size_t N, size_t F, uint32_t seed, float *x, float *lab)
{
    test_fill_random(x, T * N * F, seed);
    for (size_t n = 0; n < N; n++) {
        double s[3] = {0, 0, 0};
        for (size_t t = 0; t < T; t++)
            for (size_t f = 0; f < 3; f++) s[f] += x[(t * N + n) * F + f];
        lab[n] = (float)(s[0] > s[1] ? (s[0] > s[2] ? 0 : 2) : (s[1] > s[2] ? 1 : 2));
    }
}

/* An lstm classifier learns the toy task from sequence batches; evaluate over more samples than the batch
 * (chunks gathered from [T, N, F]) equals the mean of evaluating each chunk. */
START_TEST(sequence_classifier_trains)
{
    enum { T = 6, N = 64, F = 3, B = 16 };
    pdc_model *m = classifier_model("lstm", "forward", T, B, F, 16, 3);
    pdc_trainer *t = trainer_for(m, "cross_entropy");
    pdc_model_destroy(m);
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "optimizer", "adam"));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "lr", "0.02"));
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "batch", "16"));
    ck_assert_ok(ctx, pdc_trainer_init_weights(t));
    pdc_tensor *x, *lab, *xb, *lb;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 3, (const int64_t[]){T, N, F}, &x));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, (const int64_t[]){N}, &lab));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 3, (const int64_t[]){T, B, F}, &xb));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, (const int64_t[]){B}, &lb));
    toy_data(T, N, F, 9, pdc_tensor_data(x), pdc_tensor_data(lab));
    float loss0, acc0, loss, acc;
    ck_assert_ok(ctx, pdc_trainer_evaluate(t, x, lab, &loss0, &acc0));
    for (int s = 0; s < 300; s++) {
        toy_data(T, B, F, 100 + (uint32_t)s, pdc_tensor_data(xb), pdc_tensor_data(lb));
        ck_assert_ok(ctx, pdc_trainer_step(t, xb, lb, NULL));
    }
    ck_assert_ok(ctx, pdc_trainer_evaluate(t, x, lab, &loss, &acc));
    ck_assert_msg(acc >= 0.8f && loss < 0.5f * loss0, "accuracy %g (from %g), loss %g (from %g)", (double)acc,
                  (double)acc0, (double)loss, (double)loss0);
    /* the same evaluation chunk by chunk */
    double sum = 0.0, hits = 0.0;
    for (size_t at = 0; at < N; at += B) {
        for (size_t s = 0; s < T; s++) memcpy(pdc_tensor_data(xb) + s * B * F, pdc_tensor_data(x) + (s * N + at) * F, B * F * sizeof(float));
        memcpy(pdc_tensor_data(lb), pdc_tensor_data(lab) + at, B * sizeof(float));
        float l, a;
        ck_assert_ok(ctx, pdc_trainer_evaluate(t, xb, lb, &l, &a));
        sum += l * B, hits += a * B;
    }
    ck_assert_double_eq_tol(sum / N, loss, 1e-5);
    ck_assert_double_eq_tol(hits / N, acc, 1e-6);
    /* a batch whose other dims differ is refused, naming the expected shape */
    pdc_tensor *bad;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 3, (const int64_t[]){T + 1, B, F}, &bad));
    ck_assert_status(ctx, pdc_trainer_step(t, bad, lb, NULL), PDC_ERR_SHAPE);
    ck_assert_error_has(ctx, "expected 6x?x3");
    pdc_tensor_destroy(bad);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(lab);
    pdc_tensor_destroy(xb);
    pdc_tensor_destroy(lb);
    pdc_trainer_destroy(t);
}
END_TEST

/* Save after some steps, load into a fresh trainer: the recurrent weights, their Adam state and the next
 * steps' losses are bit-identical; ADMM with prune-block on the gate matrices ends with them block-sparse. */
START_TEST(checkpoint_and_admm_with_recurrent_weights)
{
    enum { T = 5, B = 8, F = 3 };
    pdc_model *m = classifier_model("gru", "bidirectional", T, B, F, 8, 3);
    fill_constants(m, 31, 0.4f);
    pdc_trainer *a = trainer_for(m, "cross_entropy"), *b = trainer_for(m, "cross_entropy");
    ck_assert_ok(ctx, pdc_trainer_set_option(a, "optimizer", "adam"));
    pdc_tensor *x, *lab;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 3, (const int64_t[]){T, B, F}, &x));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, (const int64_t[]){B}, &lab));
    for (int s = 0; s < 3; s++) {
        toy_data(T, B, F, (uint32_t)s, pdc_tensor_data(x), pdc_tensor_data(lab));
        ck_assert_ok(ctx, pdc_trainer_step(a, x, lab, NULL));
    }
    const char *path = tmp_path("rnn.ckpt");
    ck_assert_ok(ctx, pdc_trainer_save(a, path));
    ck_assert_ok(ctx, pdc_trainer_load(b, path));
    const int pa = tr_net_find_param(a->net, "r"), pb = tr_net_find_param(b->net, "r");
    const tr_param *qa = &a->net->params[pa], *qb = &b->net->params[pb];
    ck_assert_mem_eq(a->net->model->tensors[qa->tensor].data, b->net->model->tensors[qb->tensor].data, qa->n * 4);
    ck_assert_mem_eq(qa->m, qb->m, qa->n * sizeof(float));
    ck_assert_mem_eq(qa->v, qb->v, qa->n * sizeof(float));
    for (int s = 3; s < 5; s++) {
        toy_data(T, B, F, (uint32_t)s, pdc_tensor_data(x), pdc_tensor_data(lab));
        float la, lb;
        ck_assert_ok(ctx, pdc_trainer_step(a, x, lab, &la));
        ck_assert_ok(ctx, pdc_trainer_step(b, x, lab, &lb));
        ck_assert_msg(la == lb, "step %d: loss %.9g after the round trip, %.9g before", s, (double)lb, (double)la);
    }
    /* ADMM: the projection prunes the gate matrices; after admm_end they are block-sparse at the rate */
    pdc_attrs *o = opt_s("block", "1x4:0.75");
    ck_assert_ok(ctx, pdc_trainer_admm_begin(a, "prune-block", o, 1e-3));
    for (int s = 0; s < 4; s++) {
        toy_data(T, B, F, 50 + (uint32_t)s, pdc_tensor_data(x), pdc_tensor_data(lab));
        ck_assert_ok(ctx, pdc_trainer_step(a, x, lab, NULL));
        double res;
        ck_assert_ok(ctx, pdc_trainer_admm_update(a, &res));
        ck_assert(isfinite(res));
    }
    ck_assert_ok(ctx, pdc_trainer_admm_end(a));
    pdc_attrs_destroy(o);
    const tr_param *w = &a->net->params[tr_net_find_param(a->net, "w")];
    ck_assert_ptr_nonnull(w->mask);
    ck_assert_uint_eq(w->kept, w->n / 4);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(lab);
    pdc_trainer_destroy(a);
    pdc_trainer_destroy(b);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ bad input */

START_TEST(unsupported_recurrent_layers_are_refused)
{
    static const struct { const char *ir, *needle; } cases[] = {
        {HDR "input x : f32[3,2,2]\ninput sl : f32[2]\nconst w : f32[1,8,2] = dense<elided>\n"
         "const r : f32[1,8,2] = dense<elided>\nlayer rnn7 = lstm(x, w, r, -, sl) -> (y) {hidden_size=2}\noutput y\n",
         "sequence_lens"},
        {HDR "input x : f32[3,2,2]\nconst w : f32[1,6,2] = dense<elided>\nconst r : f32[1,6,2] = dense<elided>\n"
         "layer rnn7 = gru(x, w, r) -> (y) {hidden_size=2, activations=\"Relu\"}\noutput y\n",
         "activations"},
        {HDR "input x : f32[3,2,2]\nconst w : f32[1,8,2] = dense<elided>\nconst r : f32[1,8,2] = dense<elided>\n"
         "layer rnn7 = lstm(x, w, r) -> (y) {hidden_size=2, clip=1.5}\noutput y\n", "clip"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pdc_model *m;
        pdc_status st = pdc_model_parse(ctx, cases[i].ir, strlen(cases[i].ir), &m);
        if (st == PDC_OK) {
            pdc_trainer *t = NULL;
            st = pdc_trainer_create(ctx, m, &t);
            ck_assert_ptr_null(t);
            pdc_model_destroy(m);
        }
        ck_assert_int_ne(st, PDC_OK);
        ck_assert_error_has(ctx, "rnn7");
        ck_assert_error_has(ctx, cases[i].needle);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("train_rnn");
    TCase *tc = test_add_tcase(s, "core", tmpdir_setup, tmpdir_teardown, 240, NULL);
    tcase_add_loop_test(tc, rnn_gradients_match_pytorch, 0, (int)(sizeof rref_cases / sizeof rref_cases[0]));
    tcase_add_loop_test(tc, rnn_gradients_match_finite_differences, 0, (int)(sizeof fd_cases / sizeof fd_cases[0]));
    test_add_tests(tc, TEST_LIST(classifier_gradients_match_finite_differences, pruned_gate_weights_stay_zero,
                                 sparse_gate_gradients_match_dense,
                                 sequence_classifier_trains, checkpoint_and_admm_with_recurrent_weights,
                                 unsupported_recurrent_layers_are_refused));
    return test_run_suite(s);
}
