/*
 * test_train_prune.c - pruning in the training loop: masked retraining keeps pruned weights and their
 * optimizer state at zero (sparse and dense kernels alike, training the same), ADMM's Z-step is the
 * passes' projection (pdc_prune_project_*) and its residual falls, the passes' safe defaults hold in
 * the trainer, and the trained model exports, compiles, runs and saves.
 */
#include "lib/train/train.h"

#include "test/common/builders.h"

/* ------------------------------------------------------------------ pruning in the loop */

/* ADMM targets exactly the weights named in `want` (comma-separated). */
static void assert_admm_targets(const pdc_trainer *t, const char *want)
{
    const tr_net *net = t->net;
    char list[256], item[128];
    snprintf(list, sizeof list, ",%s,", want);
    for (size_t i = 0; i < net->n_params; i++) {
        const char *name = net->model->tensors[net->params[i].tensor].name;
        snprintf(item, sizeof item, ",%s,", name);
        ck_assert_msg((net->params[i].admm_z != NULL) == (strstr(list, item) != NULL), "%s", name);
    }
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
        set_trainer_options(t, extra);
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

/* Plain SGD on a pruned net (one fused pass per weight): after a step, every kept weight is exactly w - lr g and every
 * pruned weight and its gradient exactly 0; with weight decay 0 given explicitly the step is the same. */
START_TEST(plain_sgd_on_pruned_weights_is_w_minus_lr_g)
{
    toy d = make_toy(8, 9);
    static const char *const sgd[] = {"optimizer", "sgd", "lr", "0.05", NULL};
    pdc_trainer *t = toy_trainer(sgd);
    float loss;
    train_toy(t, &d, 1, &loss); /* a dense step first: nonzero gradients at every position */
    pdc_attrs *o = prune_options(1);
    ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern,prune-connectivity,prune-block", o));
    pdc_attrs_destroy(o);
    const tr_net *net = t->net;
    size_t total = 0;
    for (size_t i = 0; i < net->n_params; i++) total += net->params[i].n;
    float *before = malloc(total * sizeof *before);
    ck_assert_ptr_nonnull(before);
    for (size_t i = 0, at = 0; i < net->n_params; at += net->params[i].n, i++)
        memcpy(before + at, net->model->tensors[net->params[i].tensor].data, net->params[i].n * sizeof *before);
    train_toy(t, &d, 1, &loss); /* 8 samples: one step */
    int masked = 0;
    for (size_t i = 0, at = 0; i < net->n_params; at += net->params[i].n, i++) {
        const tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        const float *w = net->model->tensors[p->tensor].data;
        masked += p->mask != NULL;
        for (size_t k = 0; k < p->n; k++) {
            const int kept = !p->mask || p->mask[k];
            const float want = kept ? before[at + k] - 0.05f * p->grad[k] : 0.0f;
            ck_assert_msg(w[k] == want, "param %zu element %zu: %g, want %g", i, k, (double)w[k], (double)want);
            if (!kept) ck_assert_msg(p->grad[k] == 0.0f, "param %zu element %zu: pruned gradient %g", i, k, (double)p->grad[k]);
        }
    }
    ck_assert_int_ge(masked, 3); /* both convs and the fc */
    free(before);
    pdc_trainer_destroy(t);
    free_toy(&d);
}
END_TEST

/* Sparse kernels and dense kernels on the same pruned net train the same, up to rounding; so do the sparse backward
 * products after the reference backend's forward kernels (kernels=ref: the kept weights the sparse backward reads are
 * packed after that forward pass as after the trainer's own). */
START_TEST(sparse_and_dense_kernels_train_the_same)
{
    toy d = make_toy(24, 7);
    static const char *const on[] = {"sparse", "on", NULL}, *const off[] = {"sparse", "off", NULL};
    static const char *const on_ref[] = {"sparse", "on", "kernels", "ref", NULL};
    pdc_trainer *a = toy_trainer(on), *b = toy_trainer(off), *c = toy_trainer(on_ref);
    pdc_attrs *o = prune_options(1);
    ck_assert_ok(ctx, pdc_trainer_prune(a, "prune-pattern,prune-connectivity,prune-block", o));
    ck_assert_ok(ctx, pdc_trainer_prune(b, "prune-pattern,prune-connectivity,prune-block", o));
    ck_assert_ok(ctx, pdc_trainer_prune(c, "prune-pattern,prune-connectivity,prune-block", o));
    pdc_attrs_destroy(o);
    ck_assert(c->net->params[2].sparse);
    float la, lb, lc;
    train_toy(a, &d, 2, &la);
    train_toy(b, &d, 2, &lb);
    train_toy(c, &d, 2, &lc);
    assert_weights_near(a, b, 1e-4f);
    assert_weights_near(c, b, 1e-4f);
    pdc_trainer_destroy(a);
    pdc_trainer_destroy(b);
    pdc_trainer_destroy(c);
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
    assert_admm_targets(t, "c1w,c2w");
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
    assert_admm_targets(t, "c2w");
    ck_assert_ok(ctx, pdc_trainer_admm_end(t));
    pdc_trainer_destroy(t);
    /* with the option: conv1 too */
    t = toy_trainer(NULL);
    ck_assert_ok(ctx, pdc_trainer_admm_begin(t, "prune-pattern,prune-connectivity", a, 1.0f));
    assert_admm_targets(t, "c1w,c2w");
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

int main(void)
{
    return run_tests("train_prune", tmpdir_setup, tmpdir_teardown, 120,
                     TEST_LIST(masked_retraining_keeps_pruned_weights_and_state_zero,
                               plain_sgd_on_pruned_weights_is_w_minus_lr_g, sparse_and_dense_kernels_train_the_same,
                               admm_z_step_is_the_pass_projection,
                               trainer_pruning_keeps_the_stem_dense_by_default,
                               exported_model_compiles_runs_and_saves));
}
