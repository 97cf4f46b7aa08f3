/*
 * test_train_step.c - training itself: optimizers and learning-rate schedules learn a separable toy
 * problem, options are checked and read back, results are bit-identical for 1 and 2 threads and the
 * same with the reference and cpu-target forward kernels; bad labels, shapes, NaN/Inf and models the
 * trainer cannot take are refused and change nothing; mse, evaluate and batchnorm statistics.
 */
#include "lib/train/train.h"

#include "test/common/builders.h"

/* ------------------------------------------------------------------ training behaviour */

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
    assert_trainer_option(t, "lr", "0.01");
    assert_trainer_option(t, "optimizer", "adam");
    set_trainer_options(t, (const char *const[]){"lr", "0.1", "lr_schedule", "step", "lr_step", "10", "lr_gamma", "0.5",
                                                 NULL});
    tr_options o = t->opt;
    ck_assert(fabs(tr_lr_at(&o, 9) - 0.1) < 1e-15 && fabs(tr_lr_at(&o, 10) - 0.05) < 1e-15 &&
              fabs(tr_lr_at(&o, 25) - 0.025) < 1e-15);
    o.schedule = TR_SCHED_COSINE;
    o.lr_total_steps = 100;
    o.lr_min = 0.01;
    ck_assert(fabs(tr_lr_at(&o, 0) - 0.1) < 1e-15 && fabs(tr_lr_at(&o, 50) - 0.055) < 1e-12 &&
              fabs(tr_lr_at(&o, 100) - 0.01) < 1e-15 && fabs(tr_lr_at(&o, 1000) - 0.01) < 1e-15);
    assert_trainer_option(t, "current_lr", "0.10000000000000001");
    assert_trainer_option(t, "step", "0");
    /* refused values change nothing and say what is accepted */
    ck_assert_status(ctx, pdc_trainer_set_option(t, "lr", "-1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "lr");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "lr", "nan"), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_trainer_set_option(t, "optimizer", "rmsprop"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "sgd, adam or adamw");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "batch", "0"), PDC_ERR_INVALID_ARG);
    /* "seed" takes any 64-bit unsigned integer (the largest was refused), nothing beyond */
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "seed", "18446744073709551615"));
    assert_trainer_option(t, "seed", "18446744073709551615");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "seed", "18446744073709551616"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "expected an integer >= 0");
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "seed", "42"));
    ck_assert_status(ctx, pdc_trainer_set_option(t, "no_such", "1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "no_such");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "step", "3"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "read-only");
    ck_assert_status(ctx, pdc_trainer_get_option(t, "lr", buf, 2), PDC_ERR_INVALID_ARG);
    assert_trainer_option(t, "lr", "0.10000000000000001");
    /* loss and optimizer are fixed once training started */
    toy d = make_toy(8, 3);
    float loss;
    train_toy(t, &d, 1, &loss);
    ck_assert_status(ctx, pdc_trainer_set_option(t, "optimizer", "sgd"), PDC_ERR_INVALID_STATE);
    ck_assert_status(ctx, pdc_trainer_set_option(t, "loss", "mse"), PDC_ERR_INVALID_STATE);
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "optimizer", "adam")); /* unchanged: fine */
    assert_trainer_option(t, "step", "1");
    free_toy(&d);
    pdc_trainer_destroy(t);
}
END_TEST

START_TEST(deterministic_for_any_number_of_threads)
{
    toy d = make_toy(40, 4);
    static const char *const one[] = {"threads", "1", NULL}, *const two[] = {"threads", "2", NULL};
    pdc_trainer *a = toy_trainer(one), *b = toy_trainer(two), *c = toy_trainer(one);
    float la, lb, lc;
    train_toy(a, &d, 2, &la);
    train_toy(b, &d, 2, &lb);
    train_toy(c, &d, 2, &lc);
    ck_assert_msg(same_weights(a, b), "1 and 2 threads differ");
    ck_assert_msg(same_weights(a, c), "two runs differ");
    ck_assert(la == lb && la == lc);
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
    assert_weights_near(b, a, 1e-4f);
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
    for (int i = 0; i < 2; i++) {
        pdc_model *m = parse_model(net);
        fill_constants(m, 5, 0.3f);
        ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t[i]));
        pdc_model_destroy(m);
        ck_assert_ok(ctx, pdc_trainer_set_option(t[i], "batch", "8"));
        ck_assert_ok(ctx, pdc_trainer_set_option(t[i], "kernels", i ? "cpu" : "native"));
        train_toy(t[i], &d, 2, &loss[i]);
    }
    ck_assert_msg(same_weights(t[0], t[1]) && loss[0] == loss[1],
                  "kernels=cpu and kernels=native differ (loss %.9g vs %.9g)", (double)loss[0], (double)loss[1]);
    for (int i = 0; i < 2; i++) pdc_trainer_destroy(t[i]);
    free_toy(&d);
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
    /* (relu keeps a NaN input, so it reaches the loss) */
    x[5] = NAN;
    ck_assert_status(ctx, pdc_trainer_step(t, tx, ty, &loss), PDC_ERR_NUMERIC);
    ck_assert_error_has(ctx, "step 2:");
    ck_assert_error_has(ctx, "the loss is NaN (weights unchanged)");
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
    pdc_model *m = parse_model(HDR "input x : f32[1,3]\nconst w : f32[2,3] = dense<elided>\n"
                                   "layer f = fc(x, w) -> (y)\noutput y\n");
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
    /* recurrent layers (test_train_rnn) and 3-D convs and pools (test_train_grad) train now */
    pdc_trainer *t;
    pdc_model *m = parse_model(HDR "input x : f32[2,3]\ninput x2 : f32[2,3]\nlayer a = add(x, x2) -> (y)\noutput y\n");
    ck_assert_status(ctx, pdc_trainer_create(ctx, m, &t), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "1 input");
    pdc_model_destroy(m);
}
END_TEST

/* Layers wide enough that conv and fc split their GEMMs (cpu_train_sgemm: several blocks of output columns or rows)
 * and the sparse kernels over both threads: dense, then pattern + connectivity pruned on the sparse kernels. */
static pdc_trainer *wide_trainer_opts(const char *threads, int pruned, const char *const *opts)
{
    pdc_model *m = parse_model(HDR "input x : f32[8,16,16,16]\nconst w1 : f32[64,16,3,3] = dense<elided>\n"
                                   "const b1 : f32[64] = dense<elided>\nconst w2 : f32[32,64,3,3] = dense<elided>\n"
                                   "const w3 : f32[96,32,1,1] = dense<elided>\nconst fw : f32[10,96] = dense<elided>\n"
                                   "const fb : f32[10] = dense<elided>\n"
                                   "layer c1 = conv(x, w1, b1) -> (a) {pads=[1,1,1,1], activation=\"relu\"}\n"
                                   "layer c2 = conv(a, w2) -> (b) {pads=[1,1,1,1], strides=[2,2]}\n"
                                   "layer r2 = relu(b) -> (c)\nlayer c3 = conv(c, w3) -> (d)\n"
                                   "layer g = global_avgpool(d) -> (e)\nlayer f = flatten(e) -> (h)\n"
                                   "layer fc = fc(h, fw, fb) -> (y)\noutput y\n");
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    set_trainer_options(t, (const char *const[]){"batch", "8", "seed", "7", "optimizer", "sgd", "lr", "0.05",
                                                 "momentum", "0.9", "threads", threads, NULL});
    set_trainer_options(t, opts);
    ck_assert_ok(ctx, pdc_trainer_init_weights(t));
    if (pruned) {
        pdc_attrs *a;
        ck_assert_ok(ctx, pdc_attrs_create(ctx, &a));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "patterns", 8));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "pattern_size", 4));
        ck_assert_ok(ctx, pdc_attrs_set_float(a, "connectivity", 0.5f));
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "include_stem", 1));
        ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity", a));
        pdc_attrs_destroy(a);
        ck_assert_ok(ctx, pdc_trainer_set_option(t, "sparse", "on"));
    }
    static float x[8 * 16 * 16 * 16], y[8];
    uint32_t r = 99;
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < 8; i++) y[i] = (float)(i % 10);
    const int64_t xd[4] = {8, 16, 16, 16}, yd[1] = {8};
    pdc_tensor *tx, *ty;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, x, &tx));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, y, &ty));
    float loss;
    for (int i = 0; i < 3; i++) ck_assert_ok(ctx, pdc_trainer_step(t, tx, ty, &loss));
    ck_assert(isfinite(loss));
    pdc_tensor_destroy(tx);
    pdc_tensor_destroy(ty);
    return t;
}

static pdc_trainer *wide_trainer(const char *threads, int pruned) { return wide_trainer_opts(threads, pruned, NULL); }

START_TEST(deterministic_for_any_number_of_threads_on_wide_layers)
{
    for (int pruned = 0; pruned < 2; pruned++) {
        pdc_trainer *a = wide_trainer("1", pruned), *b = wide_trainer("2", pruned), *c = wide_trainer("3", pruned);
        ck_assert_msg(same_weights(a, b), "%s: 1 and 2 threads differ", pruned ? "pruned" : "dense");
        ck_assert_msg(same_weights(a, c), "%s: 1 and 3 threads differ", pruned ? "pruned" : "dense");
        pdc_trainer_destroy(a);
        pdc_trainer_destroy(b);
        pdc_trainer_destroy(c);
    }
}
END_TEST

/* Option recompute: conv operands rebuilt in the backward pass from one shared buffer give the same weights bit for
 * bit, dense and on the sparse kernels; the option reads back. */
START_TEST(recompute_trains_the_same)
{
    static const char *const rec[] = {"recompute", "1", NULL};
    for (int pruned = 0; pruned < 2; pruned++) {
        pdc_trainer *a = wide_trainer("2", pruned), *b = wide_trainer_opts("2", pruned, rec);
        assert_trainer_option(b, "recompute", "1");
        ck_assert_msg(same_weights(a, b), "%s: recompute=1 differs", pruned ? "pruned" : "dense");
        ck_assert_ptr_nonnull(b->net->shared_col);
        ck_assert_ptr_null(a->net->shared_col);
        pdc_trainer_destroy(a);
        pdc_trainer_destroy(b);
    }
    pdc_trainer *t = toy_trainer(NULL);
    ck_assert_status(ctx, pdc_trainer_set_option(t, "recompute", "2"), PDC_ERR_INVALID_ARG);
    assert_trainer_option(t, "recompute", "0");
    pdc_trainer_destroy(t);
}
END_TEST

/* Buffers are planned once per batch shape: once a step ran, further steps at that batch allocate nothing (the
 * first allocation would fail: option fail_alloc_after), dense and on the sparse kernels. */
START_TEST(steps_after_the_first_allocate_nothing)
{
    for (int pruned = 0; pruned < 2; pruned++) {
        pdc_trainer *t = wide_trainer("2", pruned);
        static float x[8 * 16 * 16 * 16], y[8];
        for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = (float)(i % 7) * 0.1f - 0.3f;
        for (int i = 0; i < 8; i++) y[i] = (float)(i % 10);
        const int64_t xd[4] = {8, 16, 16, 16}, yd[1] = {8};
        pdc_tensor *tx, *ty;
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, x, &tx));
        ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, y, &ty));
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", "1"));
        float loss;
        for (int i = 0; i < 3; i++) ck_assert_ok(ctx, pdc_trainer_step(t, tx, ty, &loss));
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", "0"));
        pdc_tensor_destroy(tx);
        pdc_tensor_destroy(ty);
        pdc_trainer_destroy(t);
    }
}
END_TEST

START_TEST(mse_evaluate_and_batchnorm_running_statistics)
{
    pdc_model *m = parse_model(HDR "input x : f32[1,3]\nconst s : f32[3] = dense<elided>\n"
                                   "const b : f32[3] = dense<elided>\nconst mean : f32[3] = dense<elided>\n"
                                   "const var : f32[3] = dense<elided>\n"
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

int main(void)
{
    return run_tests("train_step", tmpdir_setup, tmpdir_teardown, 120,
                     TEST_LIST(optimizers_learn_a_separable_problem, lr_schedules_and_options,
                               deterministic_for_any_number_of_threads, deterministic_for_any_number_of_threads_on_wide_layers,
                               steps_after_the_first_allocate_nothing, recompute_trains_the_same,
                               reference_forward_kernels_train_the_same,
                               cpu_backend_forward_kernels_train_the_same, bad_input_is_refused_and_changes_nothing,
                               unsupported_models_are_refused_with_the_layer,
                               mse_evaluate_and_batchnorm_running_statistics));
}
