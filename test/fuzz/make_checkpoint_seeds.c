/*
 * make_checkpoint_seeds.c - writes the seed corpus of fuzz_checkpoint.c: checkpoints of a trainer
 * of checkpoint_model.h in the states a checkpoint can hold. Not part of any build target; after
 * changing the model or the checkpoint format, rebuild the seeds with (the link line is LDLIBS of
 * the Makefile):
 *   cc -std=c11 -I. -Iinclude test/fuzz/make_checkpoint_seeds.c build/libpdc.a -lm -fopenmp \
 *     -lprotobuf-c $(llvm-config-19 --libfiles) $(pkg-config --libs openblas) -o /tmp/seeds
 *   /tmp/seeds test/fuzz/corpus/checkpoint
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pdc.h"
#include "test/fuzz/checkpoint_model.h"

static pdc_context *ctx;

static void ok(pdc_status st, const char *what)
{
    if (st == PDC_OK) return;
    fprintf(stderr, "make_checkpoint_seeds: %s: %s: %s\n", what, pdc_status_string(st), pdc_context_last_error(ctx));
    exit(1);
}

static void save(pdc_trainer *t, const char *dir, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ok(pdc_trainer_save(t, path), path);
    printf("%s\n", path);
}

/* Two steps on a fixed batch of 4 samples. */
static void steps(pdc_trainer *t)
{
    const int64_t dx[] = {4, 1, 4, 4}, dl[] = {4};
    pdc_tensor *x, *l;
    ok(pdc_tensor_create(ctx, 4, dx, &x), "tensor");
    ok(pdc_tensor_create(ctx, 1, dl, &l), "tensor");
    for (int i = 0; i < 64; i++) pdc_tensor_data(x)[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < 4; i++) pdc_tensor_data(l)[i] = (float)(i % 3);
    for (int k = 0; k < 2; k++) ok(pdc_trainer_step(t, x, l, NULL), "step");
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(l);
}

static pdc_trainer *fresh(const pdc_model *m, const char *optimizer)
{
    pdc_trainer *t;
    ok(pdc_trainer_create(ctx, m, &t), "trainer");
    ok(pdc_trainer_set_option(t, "optimizer", optimizer), "optimizer");
    ok(pdc_trainer_set_option(t, "batch", "4"), "batch");
    ok(pdc_trainer_set_option(t, "seed", "7"), "seed");
    ok(pdc_trainer_init_weights(t), "init");
    return t;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    ok(pdc_context_create(&ctx), "context");
    pdc_model *m;
    ok(pdc_model_parse(ctx, fuzz_checkpoint_model, strlen(fuzz_checkpoint_model), &m), "model");

    pdc_trainer *t = fresh(m, "adam");
    save(t, argv[1], "adam-initial.ckpt");
    steps(t);
    save(t, argv[1], "adam-2-steps.ckpt");
    pdc_trainer_destroy(t);

    t = fresh(m, "sgd");
    ok(pdc_trainer_set_option(t, "momentum", "0.9"), "momentum");
    ok(pdc_trainer_set_option(t, "lr_schedule", "cosine"), "schedule");
    steps(t);
    save(t, argv[1], "sgd-momentum-cosine.ckpt");
    pdc_trainer_destroy(t);

    /* pruned: pattern sparsity on the conv, unstructured on the fc */
    pdc_attrs *o;
    ok(pdc_attrs_create(ctx, &o), "attrs");
    ok(pdc_attrs_set_int(o, "patterns", 2), "patterns");
    t = fresh(m, "adamw");
    ok(pdc_trainer_prune(t, "prune-pattern,prune-unstructured", o), "prune");
    steps(t);
    save(t, argv[1], "pruned-pattern-unstructured.ckpt");
    pdc_trainer_destroy(t);

    /* ADMM in progress, towards block sparsity of the fc */
    t = fresh(m, "adam");
    ok(pdc_trainer_admm_begin(t, "prune-block", NULL, 0.01f), "admm");
    steps(t);
    double residual;
    ok(pdc_trainer_admm_update(t, &residual), "admm update");
    save(t, argv[1], "admm-block.ckpt");
    pdc_trainer_destroy(t);

    pdc_attrs_destroy(o);
    pdc_model_destroy(m);
    pdc_context_destroy(ctx);
    return 0;
}
