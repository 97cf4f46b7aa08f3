/*
 * test_schedule.c - the schedule pass and scheduled models: independent branches of similar cost share
 * a step (at most `lanes` of them), a conv keeps its epilogue layers in its chain, a plan made after
 * the schedule never gives concurrent chains the same bytes, the verifier refuses broken schedules, and
 * the cpu target runs scheduled models bit for bit as the unscheduled ones at 1 and 2 threads.
 */
#include "ir/arena.h"
#include "ir/ir.h"
#include "passes/pass_manager.h"

#include "test/common/builders.h"

/* Two branches on input x: each conv3x3 (+bias) -> relu -> conv3x3 -> add(its input's relu) -> relu,
 * and a shared tail: add of both, global average pool, flatten, fc. `small` makes branch b 8x
 * cheaper (fewer channels), so it should not share steps with branch a. */
static pdc_model *two_branches(int small)
{
    pdc_model *m = new_model("branches");
    int64_t cb = small ? 2 : 8;
    add_input(m, "x", 4, (const int64_t[]){1, 8, 12, 12});
    add_random(m, "wa1", 4, (const int64_t[]){8, 8, 3, 3}, 1, -0.3f, 0.3f);
    add_random(m, "ba1", 1, (const int64_t[]){8}, 2, -0.1f, 0.1f);
    add_random(m, "wa2", 4, (const int64_t[]){8, 8, 3, 3}, 3, -0.3f, 0.3f);
    add_random(m, "wb1", 4, (const int64_t[]){cb, 8, 3, 3}, 4, -0.3f, 0.3f);
    add_random(m, "wb2", 4, (const int64_t[]){8, cb, 3, 3}, 5, -0.3f, 0.3f);
    add_random(m, "wf", 2, (const int64_t[]){5, 8}, 6, -0.5f, 0.5f);
    add_layer(m, "a1", "conv", "x,wa1,ba1", "ya1", pads(1));
    add_layer(m, "ra1", "relu", "ya1", "za1", NULL);
    add_layer(m, "b1", "conv", "x,wb1", "yb1", pads(1));
    add_layer(m, "rb1", "relu", "yb1", "zb1", NULL);
    add_layer(m, "a2", "conv", "za1,wa2", "ya2", pads(1));
    add_layer(m, "aa", "add", "ya2,za1", "sa", NULL);
    add_layer(m, "ra2", "relu", "sa", "za2", NULL);
    add_layer(m, "b2", "conv", "zb1,wb2", "yb2", pads(1));
    add_layer(m, "rb2", "relu", "yb2", "zb2", NULL);
    add_layer(m, "ab", "add", "za2,zb2", "s", NULL);
    add_layer(m, "pool", "global_avgpool", "s", "p", NULL);
    add_layer(m, "flat", "flatten", "p", "f", NULL);
    add_layer(m, "fc", "fc", "f,wf", "y", NULL);
    add_output(m, "y");
    return m;
}

static int64_t step_of(const pdc_model *m, const char *layer)
{
    return ir_attr_int(&layer_named(m, layer)->attrs, IR_STEP_ATTR, -1);
}

START_TEST(equal_branches_share_steps)
{
    pdc_model *m = two_branches(0), *before = clone(m);
    ck_assert_ok(ctx, transform(m, "schedule", NULL));
    ck_assert_int_eq(ir_model_scheduled(m), 1);
    ck_assert_uint_eq(m->n_layers, before->n_layers);
    /* a1 (with its relu) and b1 run side by side, then a2 (+add, relu) and b2 (+relu) */
    ck_assert_int_eq(step_of(m, "a1"), step_of(m, "b1"));
    ck_assert_int_eq(step_of(m, "ra1"), step_of(m, "a1"));
    ck_assert_int_eq(step_of(m, "a2"), step_of(m, "b2"));
    ck_assert_int_eq(step_of(m, "aa"), step_of(m, "a2"));
    ck_assert_int_eq(step_of(m, "ra2"), step_of(m, "a2"));
    ck_assert_int_gt(step_of(m, "a2"), step_of(m, "a1"));
    ck_assert_int_gt(step_of(m, "ab"), step_of(m, "a2"));
    /* chains: a unit's layers in one chain, the branches in two */
    size_t chain[16];
    ck_assert_ok(ctx, ir_schedule_chains(m, chain));
    int ia1 = ir_model_find_layer(m, "a1"), ira1 = ir_model_find_layer(m, "ra1"), ib1 = ir_model_find_layer(m, "b1");
    ck_assert_uint_eq(chain[ira1], chain[ia1]);
    ck_assert_uint_ne(chain[ib1], chain[ia1]);
    assert_same_outputs(before, m, 0);
    /* lanes=1: one unit a step */
    pdc_model *one = clone(before);
    ck_assert_ok(ctx, transform(one, "schedule", opt_i("lanes", 1)));
    ck_assert_int_ne(step_of(one, "a1"), step_of(one, "b1"));
    ck_assert_status(ctx, transform(one, "schedule", opt_i("lanes", 0)), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "lanes");
    pdc_model_destroy(one);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(unequal_branches_do_not)
{
    pdc_model *m = two_branches(1);
    ck_assert_ok(ctx, transform(m, "schedule", NULL));
    /* b1 costs a quarter of a1: side by side, the 2-thread a1 would wait for nothing better */
    ck_assert_int_ne(step_of(m, "a1"), step_of(m, "b1"));
    /* pair_ratio 4 (or 0, any ratio): they share a step; the cpu target then decides by predicted cost */
    ck_assert_ok(ctx, transform(m, "schedule", opt_i("pair_ratio", 4)));
    ck_assert_int_eq(step_of(m, "a1"), step_of(m, "b1"));
    ck_assert_ok(ctx, transform(m, "schedule", opt_i("pair_ratio", 0)));
    ck_assert_int_eq(step_of(m, "a1"), step_of(m, "b1"));
    ck_assert_ok(ctx, transform(m, "schedule", opt_i("pair_ratio", 3)));
    ck_assert_int_ne(step_of(m, "a1"), step_of(m, "b1"));
    ck_assert_status(ctx, transform(m, "schedule", opt_i("pair_ratio", -1)), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pair_ratio");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(plan_after_schedule_keeps_chains_apart)
{
    pdc_model *m = two_branches(0);
    ck_assert_ok(ctx, transform(m, "schedule,plan", NULL));
    size_t nt = m->n_tensors, *def = calloc(nt, sizeof *def), *last = calloc(nt, sizeof *last),
           *off = calloc(nt, sizeof *off);
    int present;
    ir_liveness(m, def, last);
    ck_assert_ok(ctx, ir_arena_get(m, &present, off, NULL, NULL));
    ck_assert_int_eq(present, 1);
    /* liveness in steps: b1's output (step of a1) is live while a1 writes its own */
    int ya1 = ir_model_find_tensor(m, "ya1"), yb1 = ir_model_find_tensor(m, "yb1");
    ck_assert_uint_eq(def[ya1], def[yb1]);
    size_t ea = off[ya1] + ir_tensor_numel(&m->tensors[ya1]) * 4, eb = off[yb1] + ir_tensor_numel(&m->tensors[yb1]) * 4;
    ck_assert(off[ya1] >= eb || off[yb1] >= ea);
    free(def);
    free(last);
    free(off);
    /* the schedule and the plan survive the text form */
    char *t = model_text(m);
    pdc_model *back = parse_model(t);
    ck_assert_int_eq(ir_model_scheduled(back), 1);
    ck_assert_int_eq(step_of(back, "b2"), step_of(m, "b2"));
    free(t);
    pdc_model_destroy(back);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(verifier_refuses_broken_schedules)
{
    pdc_model *m = two_branches(0);
    ck_assert_ok(ctx, transform(m, "schedule", NULL));
    ir_layer *fc = (ir_layer *)layer_named(m, "fc");
    /* a layer without a step */
    ir_attrs_remove(&fc->attrs, IR_STEP_ATTR);
    ck_assert_status(ctx, pdc_model_verify(m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "a schedule covers every layer");
    /* a step going back */
    ck_assert_ok(ctx, ir_attrs_set_int(ctx, &fc->attrs, IR_STEP_ATTR, 0));
    ck_assert_status(ctx, pdc_model_verify(m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "layer 'fc': step 0 is out of order");
    /* the pass again mends it */
    ck_assert_ok(ctx, transform(m, "schedule", NULL));
    ck_assert_ok(ctx, pdc_model_verify(m));
    /* a layer reading two chains of its own step: ab joins a's and b's */
    int64_t s = step_of(m, "a2");
    for (size_t li = 0; li < m->n_layers; li++)
        if (ir_attr_int(&m->layers[li].attrs, IR_STEP_ATTR, 0) > s)
            ck_assert_ok(ctx, ir_attrs_set_int(ctx, &m->layers[li].attrs, IR_STEP_ATTR, s));
    ck_assert_status(ctx, pdc_model_verify(m), PDC_ERR_INVALID_MODEL);
    ck_assert_error_has(ctx, "layer 'ab' reads two chains of its step");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(cpu_runs_scheduled_models_bit_for_bit)
{
    pdc_model *plain = two_branches(0), *sched = clone(plain);
    ck_assert_ok(ctx, transform(plain, "plan", NULL));
    ck_assert_ok(ctx, transform(sched, "schedule,plan", NULL));
    size_t n0, n1, n2, n3;
    setenv("PDC_OMP_STATIC", "1", 1); /* every run takes the threads asked for, however busy the machine */
    float *y0 = run_cpu_thrice(plain, "1", "b1", 0, &n0), *y1 = run_cpu_thrice(plain, "2", "b1", 0, &n1);
    float *y2 = run_cpu_thrice(sched, "1", "b1", 0, &n2), *y3 = run_cpu_thrice(sched, "2", "b1", 2, &n3);
    ck_assert_uint_eq(n0, n3);
    ck_assert(!memcmp(y0, y1, n0 * sizeof *y0));
    ck_assert(!memcmp(y0, y2, n0 * sizeof *y0));
    ck_assert(!memcmp(y0, y3, n0 * sizeof *y0));
    free(y0);
    free(y1);
    free(y2);
    free(y3);
    pdc_model_destroy(plain);
    pdc_model_destroy(sched);
}
END_TEST

int main(void)
{
    return run_tests("schedule", ctx_setup, ctx_teardown, 60,
                     TEST_LIST(equal_branches_share_steps, unequal_branches_do_not, plan_after_schedule_keeps_chains_apart,
                               verifier_refuses_broken_schedules, cpu_runs_scheduled_models_bit_for_bit));
}
