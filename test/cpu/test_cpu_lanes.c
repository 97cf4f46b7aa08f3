/*
 * test_cpu_lanes.c - how the cpu target divides a scheduled step's threads among its chains by
 * predicted cost (backends/cpu/lanes.c): known plans (equal chains side by side, unequal ones layer
 * after layer, the threads dealt to the slower lane, more chains than threads packed longest first, a
 * chain that scales on every thread before the others side by side),
 * and scheduled models run side by side in 2 to 4 lanes, with and without nested thread teams, bit
 * for bit as the unscheduled model; the context option schedule (dag, sequential).
 */
#include <omp.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "ir/arena.h"
#include "ir/ir.h"

#include "test/common/builders.h"

/* A chain of t1 ms on one thread of which the share p divides over threads. */
static pdc_layer_cost chain(double t1, double p) { return (pdc_layer_cost){t1 * (1.0 - p), t1 * p}; }

START_TEST(plans_follow_predicted_cost)
{
    size_t lane_of[8];
    int threads[8];
    double pr[2];
    /* equal chains that scale poorly: each on a thread of its own (1.0 ms against 2 x 0.65) */
    pdc_layer_cost eq[2] = {chain(1, 0.7), chain(1, 0.7)};
    ck_assert_int_eq(cpu_lanes_plan(eq, 2, 2, 2, 0, lane_of, threads, pr), 2);
    ck_assert_uint_eq(lane_of[0], 0);
    ck_assert_uint_eq(lane_of[1], 1);
    ck_assert_int_eq(threads[0], 1);
    ck_assert_int_eq(threads[1], 1);
    ck_assert_double_eq_tol(pr[0], 1.3, 1e-12);
    ck_assert_double_eq_tol(pr[1], 1.0, 1e-12);
    /* equal chains that scale almost perfectly: 1.0 against 1.005 is not the 1% side by side must win by */
    pdc_layer_cost good[2] = {chain(1, 0.995), chain(1, 0.995)};
    ck_assert_int_eq(cpu_lanes_plan(good, 2, 2, 2, 0, lane_of, threads, pr), 0);
    ck_assert_double_eq_tol(pr[0], 1.005, 1e-12);
    ck_assert_double_eq_tol(pr[1], 1.0, 1e-12);
    /* ... at 97% parallel (a pruned conv on this host) 1.0 against 1.03 is */
    pdc_layer_cost conv[2] = {chain(1, 0.97), chain(1, 0.97)};
    ck_assert_int_eq(cpu_lanes_plan(conv, 2, 2, 2, 0, lane_of, threads, pr), 2);
    /* unequal chains (1 and 3 ms): the short one's thread would idle for 2 ms */
    pdc_layer_cost uneq[2] = {chain(1, 0.7), chain(3, 0.7)};
    ck_assert_int_eq(cpu_lanes_plan(uneq, 2, 2, 2, 0, lane_of, threads, pr), 0);
    ck_assert_double_eq_tol(pr[0], 2.6, 1e-12);
    ck_assert_double_eq_tol(pr[1], 3.0, 1e-12);
    /* ... unless forced */
    ck_assert_int_eq(cpu_lanes_plan(uneq, 2, 2, 2, 1, lane_of, threads, pr), 2);
    /* 4 threads: the longer chain gets 3 (1 + 1.5/3 = 1.5 + ... = 2.0 ms) and the shorter 1 (1.0 ms),
     * against 2.5 ms layer after layer */
    pdc_layer_cost big[2] = {chain(1, 0.5), chain(3, 0.5)};
    ck_assert_int_eq(cpu_lanes_plan(big, 2, 4, 4, 0, lane_of, threads, pr), 2);
    ck_assert_uint_ne(lane_of[0], lane_of[1]);
    ck_assert_int_eq(threads[lane_of[0]], 1);
    ck_assert_int_eq(threads[lane_of[1]], 3);
    ck_assert_double_eq_tol(pr[0], 2.5, 1e-12);
    ck_assert_double_eq_tol(pr[1], 2.0, 1e-12);
    /* without nested teams a lane has one thread: 3.0 ms side by side does not beat 2.5 */
    ck_assert_int_eq(cpu_lanes_plan(big, 2, 4, 1, 0, lane_of, threads, pr), 0);
    ck_assert_double_eq_tol(pr[1], 3.0, 1e-12);
    /* more chains than threads (4, 3, 2, 1 ms, serial): longest first onto the least loaded lane,
     * 4+1 and 3+2, 5 ms against 10 */
    pdc_layer_cost four[4] = {chain(4, 0), chain(3, 0), chain(2, 0), chain(1, 0)};
    ck_assert_int_eq(cpu_lanes_plan(four, 4, 2, 2, 0, lane_of, threads, pr), 2);
    ck_assert_uint_eq(lane_of[0], 0);
    ck_assert_uint_eq(lane_of[1], 1);
    ck_assert_uint_eq(lane_of[2], 1);
    ck_assert_uint_eq(lane_of[3], 0);
    ck_assert_double_eq_tol(pr[0], 10.0, 1e-12);
    ck_assert_double_eq_tol(pr[1], 5.0, 1e-12);
    /* mixed: a chain that scales (2 ms, all parallel) on both threads first (1 ms), then two serial
     * ones (0.5 ms each) side by side: 1.5 ms, against 2 ms layer after layer and 2 ms all side by side */
    pdc_layer_cost mix[3] = {chain(0.5, 0), chain(2, 1), chain(0.5, 0)};
    ck_assert_int_eq(cpu_lanes_plan(mix, 3, 2, 2, 0, lane_of, threads, pr), 2);
    ck_assert_uint_eq(lane_of[1], CPU_LANE_WHOLE);
    ck_assert_uint_ne(lane_of[0], lane_of[2]);
    ck_assert(lane_of[0] < 2 && lane_of[2] < 2);
    ck_assert_double_eq_tol(pr[0], 2.0, 1e-12);
    ck_assert_double_eq_tol(pr[1], 1.5, 1e-12);
    /* forced: all three side by side */
    ck_assert_int_eq(cpu_lanes_plan(mix, 3, 2, 2, 1, lane_of, threads, pr), 2);
    ck_assert_uint_ne(lane_of[1], CPU_LANE_WHOLE);
    /* nothing to divide: one chain, or one thread */
    ck_assert_int_eq(cpu_lanes_plan(eq, 1, 2, 2, 1, lane_of, threads, pr), 0);
    ck_assert_int_eq(cpu_lanes_plan(eq, 2, 1, 1, 1, lane_of, threads, pr), 0);
}
END_TEST

/* Three branches on input x (conv 3x3 + bias -> relu -> conv 3x3 -> relu), c[i] channels each, summed,
 * then global average pool, flatten, fc. */
static pdc_model *three_branches(const int64_t *c)
{
    pdc_model *m = new_model("branches");
    add_input(m, "x", 4, (const int64_t[]){1, 8, 12, 12});
    add_random(m, "wf", 2, (const int64_t[]){5, 8}, 10, -0.5f, 0.5f);
    const char *br[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        char w1[8], b1[8], w2[8], ins[64], y1[8], z1[8], y2[8], z2[8], n1[8], r1[8], n2[8], r2[8];
        snprintf(w1, sizeof w1, "w%s1", br[i]);
        snprintf(b1, sizeof b1, "b%s1", br[i]);
        snprintf(w2, sizeof w2, "w%s2", br[i]);
        add_random(m, w1, 4, (const int64_t[]){c[i], 8, 3, 3}, (uint32_t)(3 * i + 1), -0.3f, 0.3f);
        add_random(m, b1, 1, (const int64_t[]){c[i]}, (uint32_t)(3 * i + 2), -0.1f, 0.1f);
        add_random(m, w2, 4, (const int64_t[]){8, c[i], 3, 3}, (uint32_t)(3 * i + 3), -0.3f, 0.3f);
        snprintf(y1, sizeof y1, "y%s1", br[i]);
        snprintf(z1, sizeof z1, "z%s1", br[i]);
        snprintf(y2, sizeof y2, "y%s2", br[i]);
        snprintf(z2, sizeof z2, "z%s2", br[i]);
        snprintf(n1, sizeof n1, "%s1", br[i]);
        snprintf(r1, sizeof r1, "r%s1", br[i]);
        snprintf(n2, sizeof n2, "%s2", br[i]);
        snprintf(r2, sizeof r2, "r%s2", br[i]);
        snprintf(ins, sizeof ins, "x,%s,%s", w1, b1);
        add_layer(m, n1, "conv", ins, y1, pads(1));
        add_layer(m, r1, "relu", y1, z1, NULL);
        snprintf(ins, sizeof ins, "%s,%s", z1, w2);
        add_layer(m, n2, "conv", ins, y2, pads(1));
        add_layer(m, r2, "relu", y2, z2, NULL);
    }
    add_layer(m, "sab", "add", "za2,zb2", "sab", NULL);
    add_layer(m, "s", "add", "sab,zc2", "s", NULL);
    add_layer(m, "pool", "global_avgpool", "s", "p", NULL);
    add_layer(m, "flat", "flatten", "p", "f", NULL);
    add_layer(m, "fc", "fc", "f,wf", "y", NULL);
    add_output(m, "y");
    return m;
}

START_TEST(lanes_run_bit_for_bit)
{
    /* branches of 8, 8 and 12 channels, each step's three convs side by side (lanes 3) */
    pdc_model *plain = three_branches((const int64_t[]){8, 8, 12}), *sched = clone(plain);
    ck_assert_ok(ctx, transform(plain, "plan", NULL));
    ck_assert_ok(ctx, transform(sched, "schedule,plan", opt_i("lanes", 3)));
    setenv("PDC_OMP_STATIC", "1", 1); /* every run takes the threads asked for, however busy the machine */
    size_t n0, n;
    float *y0 = run_cpu_thrice(plain, "1", "a1", 0, &n0);
    const char *modes[] = {"1", "0", ""}; /* PDC_CPU_LANES: forced, never, by prediction */
    const char *threads[] = {"2", "3", "4"};
    int saved = omp_get_max_active_levels();
    for (int nested = 0; nested < 2; nested++) {
        omp_set_max_active_levels(nested ? 2 : 1); /* 2: a lane of several threads is a team of its own */
        for (size_t mo = 0; mo < 3; mo++)
            for (size_t t = 0; t < 3; t++) {
                setenv("PDC_CPU_LANES", modes[mo], 1);
                float *y = run_cpu_thrice(sched, threads[t], "a1", 3, &n);
                ck_assert_uint_eq(n, n0);
                ck_assert_msg(!memcmp(y0, y, n0 * sizeof *y0), "lanes %s, %s threads, nested %d", modes[mo],
                              threads[t], nested);
                free(y);
            }
    }
    omp_set_max_active_levels(saved);
    unsetenv("PDC_CPU_LANES");
    free(y0);
    pdc_model_destroy(plain);
    pdc_model_destroy(sched);
}
END_TEST

/* Layers of program p whose kernel says they are one of a step's chains. */
static size_t chain_layers(const pdc_program *p)
{
    size_t nl, n = 0;
    ck_assert_ok(ctx, pdc_program_num_layers(p, &nl));
    for (size_t li = 0; li < nl; li++) {
        const char *k;
        ck_assert_ok(ctx, pdc_program_layer_kernel(p, li, NULL, &k));
        n += strstr(k, " in its step") != NULL;
    }
    return n;
}

START_TEST(option_schedule_sequential)
{
    char v[32];
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "schedule", v, sizeof v));
    ck_assert_str_eq(v, "dag");
    ck_assert_status(ctx, pdc_context_set_option(ctx, "schedule", "parallel"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option schedule: expected dag or sequential, got \"parallel\"");
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "threads", "2"));
    pdc_model *m[2] = {three_branches((const int64_t[]){8, 8, 12}), three_branches((const int64_t[]){8, 8, 12})};
    ck_assert_ok(ctx, transform(m[0], "plan", NULL));
    ck_assert_ok(ctx, transform(m[1], "plan", NULL));
    /* dag: a group's models side by side in steps; sequential: one layer after another, same outputs */
    pdc_program *g[2];
    float *y[2];
    for (int seq = 0; seq < 2; seq++) {
        ck_assert_ok(ctx, pdc_context_set_option(ctx, "schedule", seq ? "sequential" : "dag"));
        ck_assert_ok(ctx, pdc_compile_group(ctx, (const pdc_model *const *)m, 2, "cpu", &g[seq]));
        if (seq) ck_assert_uint_eq(chain_layers(g[seq]), 0);
        else ck_assert_uint_gt(chain_layers(g[seq]), 0);
        pdc_tensor *in = io_tensor(ctx, g[seq], 0, 0), *out[2] = {io_tensor(ctx, g[seq], 1, 0), io_tensor(ctx, g[seq], 1, 1)};
        test_fill_random(pdc_tensor_data(in), pdc_tensor_size(in), 5);
        ck_assert_ok(ctx, pdc_program_run(g[seq], 1, &in, 2, out));
        size_t n = pdc_tensor_size(out[0]);
        y[seq] = malloc(8 * n);
        memcpy(y[seq], pdc_tensor_data(out[0]), 4 * n);
        memcpy(y[seq] + n, pdc_tensor_data(out[1]), 4 * n);
        ck_assert(!memcmp(y[0], y[seq], 8 * n));
        pdc_tensor_destroy(in);
        pdc_tensor_destroy(out[0]);
        pdc_tensor_destroy(out[1]);
    }
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "schedule", v, sizeof v));
    ck_assert_str_eq(v, "sequential");
    /* a model scheduled by hand runs layer after layer too */
    pdc_model *sched = clone(m[0]);
    ck_assert_ok(ctx, transform(sched, "schedule,plan", opt_i("lanes", 3)));
    pdc_program *p;
    ck_assert_ok(ctx, pdc_compile(ctx, sched, "cpu", &p));
    ck_assert_uint_eq(chain_layers(p), 0);
    pdc_program_destroy(p);
    pdc_model_destroy(sched);
    for (int k = 0; k < 2; k++) {
        free(y[k]);
        pdc_program_destroy(g[k]);
        pdc_model_destroy(m[k]);
    }
}
END_TEST

int main(void)
{
    return run_tests("cpu_lanes", ctx_setup, ctx_teardown, 120, TEST_LIST(plans_follow_predicted_cost, lanes_run_bit_for_bit, option_schedule_sequential));
}
