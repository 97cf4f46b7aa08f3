/*
 * test_train_reduce.c - the data-parallel step in one process (lib/train/train_reduce.c): option micro_batch
 * gives the gradient of the whole batch; a gradient reducer receives the kept entries only, packed, one
 * part per micro-batch; two trainers with half the batch each, joined by a reducer that sums their parts
 * with the trainer's tree, end bit-identical to one trainer with the whole batch (batchnorm and pruned
 * weights included); a reducer's failure fails the step with its message and changes nothing; a process
 * without samples takes part in the step.
 */
#include "lib/train/train.h"

#include "test/common/builders.h"

/* conv -> batchnorm -> relu -> conv -> relu -> flatten -> fc, input [N,2,4,4] */
static const char bn_cnn[] =
    HDR "input x : f32[1,2,4,4]\nconst c1w : f32[8,2,3,3] = dense<elided>\nconst s : f32[8] = dense<elided>\n"
    "const b : f32[8] = dense<elided>\nconst mean : f32[8] = dense<elided>\nconst var : f32[8] = dense<elided>\n"
    "const c2w : f32[8,8,3,3] = dense<elided>\nconst c2b : f32[8] = dense<elided>\n"
    "const fw : f32[4,128] = dense<elided>\nconst fb : f32[4] = dense<elided>\n"
    "layer conv1 = conv(x, c1w) -> (a) {pads=[1,1,1,1]}\nlayer bn = batchnorm(a, s, b, mean, var) -> (an)\n"
    "layer r1 = relu(an) -> (bb)\nlayer conv2 = conv(bb, c2w, c2b) -> (c) {pads=[1,1,1,1]}\nlayer r2 = relu(c) -> (d)\n"
    "layer flat = flatten(d) -> (e)\nlayer fc = fc(e, fw, fb) -> (z)\noutput z\n";

enum { BATCH = 16, IN = 32 };
static float data_x[BATCH * IN], data_y[BATCH];

static void make_data(void)
{
    uint32_t r = 5;
    for (size_t i = 0; i < BATCH * IN; i++) {
        r = r * 1664525u + 1013904223u;
        data_x[i] = (float)(r >> 8) / 16777216.0f - 0.5f;
    }
    for (int i = 0; i < BATCH; i++) data_y[i] = (float)(i % 4);
}

/* A trainer of bn_cnn (Adam, seed 3, 1 thread) with micro_batch `micro`; conv2 pattern-pruned if pruned. */
static pdc_trainer *bn_trainer(const char *micro, int pruned)
{
    pdc_model *m = parse_model(bn_cnn);
    pdc_trainer *t;
    ck_assert_ok(ctx, pdc_trainer_create(ctx, m, &t));
    pdc_model_destroy(m);
    set_trainer_options(t, (const char *const[]){"batch", "16", "seed", "3", "lr", "0.01", "threads", "1",
                                                 "micro_batch", micro, NULL});
    ck_assert_ok(ctx, pdc_trainer_init_weights(t));
    if (pruned) {
        pdc_attrs *a = opt_i("patterns", 4);
        ck_assert_ok(ctx, pdc_attrs_set_int(a, "pattern_size", 4));
        ck_assert_ok(ctx, pdc_attrs_set_string(a, "layers", "conv2"));
        ck_assert_ok(ctx, pdc_trainer_prune(t, "prune-pattern", a));
        pdc_attrs_destroy(a);
    }
    return t;
}

/* One step on samples [from, from + n) of the data (n = 0: no samples, inputs and labels NULL). */
static pdc_status step_on(pdc_trainer *t, size_t from, size_t n)
{
    if (!n) return pdc_trainer_step(t, NULL, NULL, NULL);
    const int64_t xd[4] = {(int64_t)n, 2, 4, 4}, yd[1] = {(int64_t)n};
    pdc_tensor *x, *y;
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 4, xd, data_x + from * IN, &x));
    ck_assert_ok(ctx, pdc_tensor_wrap(ctx, 1, yd, data_y + from, &y));
    float loss;
    const pdc_status st = pdc_trainer_step(t, x, y, &loss);
    pdc_tensor_destroy(x);
    pdc_tensor_destroy(y);
    return st;
}

/* ------------------------------------------------------------------ reducers */

/* Records what the trainer hands over, then fails (the step changes nothing) or sums with a stored peer. */
typedef struct capture {
    float *parts;         /* copy of the last call's parts */
    size_t n, count;
    double samples;
    int fail;             /* 1: answer PDC_ERR_IO "peer vanished" */
    const struct capture *peer; /* non-NULL: add the peer's parts after ours (ours first), tree as the trainer */
    int peer_first;       /* 1: the peer's parts come first */
} capture;

/* pdc.h's pairwise order written out again, independently of the trainer's, as the oracle */
static void tree(float *p, size_t n, size_t a, size_t count)
{
    if (count < 2) return;
    size_t h = 1;
    while (h * 2 < count) h *= 2;
    tree(p, n, a, h);
    tree(p, n, a + h, count - h);
    for (size_t k = 0; k < n; k++) p[a * n + k] += p[(a + h) * n + k];
}

static pdc_status capture_reducer(void *user, float *g, size_t n, size_t parts, double *samples, char *msg,
                                  size_t cap)
{
    capture *c = user;
    free(c->parts);
    c->parts = malloc((parts ? parts : 1) * n * sizeof *c->parts);
    memcpy(c->parts, g, parts * n * sizeof *g);
    c->n = n;
    c->count = parts;
    c->samples = *samples;
    if (c->fail) {
        snprintf(msg, cap, "peer vanished");
        return PDC_ERR_IO;
    }
    if (c->peer) {
        const capture *p = c->peer;
        ck_assert_uint_eq(p->n, n);
        const size_t all = parts + p->count;
        float *buf = malloc(all * n * sizeof *buf);
        const capture *first = c->peer_first ? p : c, *second = c->peer_first ? c : p;
        memcpy(buf, first->parts, first->count * n * sizeof *buf);
        memcpy(buf + first->count * n, second->parts, second->count * n * sizeof *buf);
        tree(buf, n, 0, all);
        if (all) memcpy(g, buf, n * sizeof *g);
        else memset(g, 0, n * sizeof *g);
        free(buf);
        *samples += p->samples;
    }
    return PDC_OK;
}

/* a and b have the same trained weights bit for bit (batchnorm running statistics aside) */
static int same_trained(const pdc_trainer *a, const pdc_trainer *b)
{
    for (size_t i = 0; i < a->net->n_params; i++) {
        const tr_param *pa = &a->net->params[i], *pb = &b->net->params[i];
        if (!pa->trainable) continue;
        if (memcmp(a->net->model->tensors[pa->tensor].data, b->net->model->tensors[pb->tensor].data,
                   pa->n * sizeof(float)))
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ tests */

/* micro_batch: the same gradient as the whole batch up to rounding; a reducer gets one part per micro-batch
 * of the kept entries only; pruned entries stay zero. */
START_TEST(micro_batches_and_the_packed_kept_gradients)
{
    make_data();
    for (int pruned = 0; pruned < 2; pruned++) {
        pdc_trainer *whole = bn_trainer("0", pruned), *micro = bn_trainer("4", pruned);
        assert_trainer_option(micro, "micro_batch", "4");
        /* batchnorm normalises each micro-batch by itself: on a batch of one micro-batch, the sum of the
         * samples' gradients divided by their number is the mean's gradient up to rounding */
        ck_assert_ok(ctx, step_on(whole, 0, 4));
        ck_assert_ok(ctx, step_on(micro, 0, 4));
        assert_weights_near(micro, whole, 1e-6f);
        /* the reducer's view: 16 samples = 4 parts of the kept entries */
        capture c = {0};
        ck_assert_ok(ctx, pdc_trainer_set_reducer(micro, capture_reducer, NULL, &c));
        ck_assert_ok(ctx, step_on(micro, 0, 16));
        size_t nw, kept_total = 0, all_total = 0;
        ck_assert_ok(ctx, pdc_trainer_num_weights(micro, &nw));
        for (size_t i = 0; i < nw; i++) {
            size_t kept;
            int trainable;
            ck_assert_ok(ctx, pdc_trainer_weight_info(micro, i, NULL, NULL, NULL, &kept, &trainable));
            if (!trainable) continue;
            kept_total += kept;
            all_total += micro->net->params[i].n;
        }
        ck_assert_uint_eq(c.n, kept_total);
        ck_assert_uint_eq(c.count, 4);
        ck_assert(c.samples == 16.0);
        if (pruned) ck_assert_uint_lt(kept_total, all_total);
        else ck_assert_uint_eq(kept_total, all_total);
        assert_pruned_zero(micro);
        free(c.parts);
        pdc_trainer_destroy(whole);
        pdc_trainer_destroy(micro);
    }
}
END_TEST

/* Two "processes" of 8 samples each, their parts summed in global order by the trainer's tree, give the
 * bits of one trainer stepping on all 16 with the same micro_batch: over several steps, batchnorm and
 * pruned weights included, and for micro-batches of 8 (one part each) and of 4 (two each). (Batchnorm's
 * running statistics follow each process's last micro-batch: per process, not compared.) */
START_TEST(two_halves_are_bit_identical_to_the_whole_batch)
{
    make_data();
    static const char *const micros[] = {"8", "4"};
    for (int pruned = 0; pruned < 2; pruned++)
        for (int mi = 0; mi < 2; mi++) {
            pdc_trainer *whole = bn_trainer(micros[mi], pruned), *r0 = bn_trainer(micros[mi], pruned),
                        *r1 = bn_trainer(micros[mi], pruned);
            capture c0 = {0}, c1 = {0};
            c1.peer = &c0;
            c1.peer_first = 1;
            for (int s = 0; s < 4; s++) {
                ck_assert_ok(ctx, step_on(whole, 0, 16));
                /* process 0's parts, captured by a failed step (which changes nothing) */
                c0.fail = 1;
                c0.peer = NULL;
                ck_assert_ok(ctx, pdc_trainer_set_reducer(r0, capture_reducer, NULL, &c0));
                ck_assert_status(ctx, step_on(r0, 0, 8), PDC_ERR_IO);
                /* process 1 sums process 0's parts then its own; then process 0 the same way round */
                ck_assert_ok(ctx, pdc_trainer_set_reducer(r1, capture_reducer, NULL, &c1));
                ck_assert_ok(ctx, step_on(r1, 8, 8));
                c0.fail = 0;
                c0.peer = &c1;
                ck_assert_ok(ctx, step_on(r0, 0, 8));
            }
            ck_assert_msg(same_trained(whole, r0) && same_trained(whole, r1), "pruned %d micro %s: not bit-identical",
                          pruned, micros[mi]);
            assert_trainer_option(r0, "step", "4");
            free(c0.parts);
            free(c1.parts);
            pdc_trainer_destroy(whole);
            pdc_trainer_destroy(r0);
            pdc_trainer_destroy(r1);
        }
}
END_TEST

/* A failing reducer fails the step with its status and message, the step number, and changes nothing; a
 * process without samples (NULL inputs and labels) takes part with no parts and gets the others' gradient;
 * without a reducer NULL inputs are refused; bad micro_batch values are refused. */
START_TEST(reducer_failures_empty_processes_and_bad_options)
{
    make_data();
    pdc_trainer *t = bn_trainer("0", 0), *ref = bn_trainer("0", 0);
    capture c = {0};
    c.fail = 1;
    ck_assert_ok(ctx, pdc_trainer_set_reducer(t, capture_reducer, NULL, &c));
    ck_assert_status(ctx, step_on(t, 0, 16), PDC_ERR_IO);
    ck_assert_error_has(ctx, "trainer: step 1: gradient reduction: peer vanished");
    ck_assert(same_weights(t, ref));
    assert_trainer_option(t, "step", "0");
    /* an empty process: no parts, and the peer's gradient is used as is */
    capture peer = {0};
    peer.fail = 1;
    pdc_trainer *p = bn_trainer("0", 0);
    ck_assert_ok(ctx, pdc_trainer_set_reducer(p, capture_reducer, NULL, &peer));
    ck_assert_status(ctx, step_on(p, 0, 16), PDC_ERR_IO);
    c.fail = 0;
    c.peer = &peer;
    ck_assert_ok(ctx, step_on(t, 0, 0));
    ck_assert_uint_eq(c.count, 0);
    ck_assert(c.samples == 0.0);
    /* the same update as a lone trainer on the 16 samples with a reducer-free micro step */
    pdc_trainer *lone = bn_trainer("16", 0);
    ck_assert_ok(ctx, step_on(lone, 0, 16));
    ck_assert(same_trained(t, lone));
    /* a step where nobody has samples is refused */
    peer.count = 0;
    peer.samples = 0.0;
    ck_assert_status(ctx, step_on(t, 0, 0), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "no process had samples");
    /* without a reducer */
    ck_assert_ok(ctx, pdc_trainer_set_reducer(t, NULL, NULL, NULL));
    ck_assert_status(ctx, step_on(t, 0, 0), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "inputs");
    ck_assert_status(ctx, pdc_trainer_set_option(t, "micro_batch", "65537"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "micro_batch");
    ck_assert_status(ctx, pdc_trainer_set_reducer(NULL, capture_reducer, NULL, NULL), PDC_ERR_INVALID_ARG);
    free(c.parts);
    free(peer.parts);
    pdc_trainer_destroy(t);
    pdc_trainer_destroy(ref);
    pdc_trainer_destroy(p);
    pdc_trainer_destroy(lone);
}
END_TEST

/* Buckets: what a bucket function saw, range by range. */
typedef struct buckets {
    size_t off[16], n[16], count;
    float *copy;          /* the values handed over, at their offsets */
    int fail_at;          /* > 0: answer PDC_ERR_IO at this call */
} buckets;

static pdc_status bucket_fn(void *user, float *g, size_t offset, size_t n, char *msg, size_t cap)
{
    buckets *b = user;
    ck_assert_uint_lt(b->count, 16);
    b->off[b->count] = offset;
    b->n[b->count] = n;
    memcpy(b->copy + offset, g + offset, n * sizeof *g);
    if (++b->count == (size_t)b->fail_at) {
        snprintf(msg, cap, "bucket %zu refused", b->count);
        return PDC_ERR_IO;
    }
    return PDC_OK;
}

static pdc_status identity_reducer(void *user, float *g, size_t n, size_t parts, double *samples, char *msg,
                                   size_t cap)
{
    const buckets *b = user;
    (void)samples, (void)msg, (void)cap;
    ck_assert_uint_le(parts, 1);
    ck_assert_mem_eq(g, b->copy, n * sizeof *g); /* what the buckets saw is the whole gradient */
    return PDC_OK;
}

/* With one part, every trainable weight's packed range is handed over once, the last layer's first (fc, then
 * conv2, then batchnorm's scale and bias, then conv1), before the reducer; the training is unchanged; a
 * process without samples hands over zeros in the same order; a bucket's failure fails the step. */
START_TEST(buckets_hand_over_each_weight_once_last_layers_first)
{
    make_data();
    for (int pruned = 0; pruned < 2; pruned++) {
        pdc_trainer *t = bn_trainer("0", pruned), *ref = bn_trainer("0", pruned);
        buckets b = {.copy = calloc(2000, sizeof(float))};
        ck_assert_ok(ctx, pdc_trainer_set_reducer(t, identity_reducer, bucket_fn, &b));
        ck_assert_ok(ctx, step_on(t, 0, 16));
        ck_assert_ok(ctx, pdc_trainer_set_reducer(ref, identity_reducer, NULL, &b));
        ck_assert_ok(ctx, step_on(ref, 0, 16));
        ck_assert(same_weights(t, ref));
        /* params in model order: c1w s b (mean var: statistics) c2w c2b fw fb; handed: fw fb c2w c2b s b c1w */
        static const int want[7] = {7, 8, 5, 6, 1, 2, 0};
        ck_assert_uint_eq(b.count, 7);
        for (size_t k = 0; k < 7; k++) {
            ck_assert_uint_eq(b.off[k], t->bucket_off[want[k]]);
            ck_assert_uint_eq(b.n[k], t->net->params[want[k]].kept);
        }
        /* a process without samples: zeros, the same ranges in the same order */
        buckets e = {.copy = calloc(2000, sizeof(float))};
        ck_assert_ok(ctx, pdc_trainer_set_reducer(t, identity_reducer, bucket_fn, &e));
        ck_assert_status(ctx, step_on(t, 0, 0), PDC_ERR_INVALID_ARG); /* nobody had samples */
        ck_assert_uint_eq(e.count, 7);
        for (size_t k = 0; k < 7; k++) ck_assert_uint_eq(e.off[k], b.off[k]);
        for (size_t k = 0; k < 2000; k++) ck_assert(e.copy[k] == 0.0f);
        /* a failing bucket */
        buckets f = {.copy = calloc(2000, sizeof(float)), .fail_at = 2};
        ck_assert_ok(ctx, pdc_trainer_set_reducer(t, identity_reducer, bucket_fn, &f));
        ck_assert_status(ctx, step_on(t, 0, 16), PDC_ERR_IO);
        ck_assert_error_has(ctx, "trainer: step 2: gradient reduction: bucket 2 refused");
        ck_assert_uint_eq(f.count, 2);
        ck_assert(same_weights(t, ref));
        free(b.copy);
        free(e.copy);
        free(f.copy);
        pdc_trainer_destroy(t);
        pdc_trainer_destroy(ref);
    }
}
END_TEST

/* A batchnorm sync standing for two processes with the same batch: it doubles every sum (the count too). */
typedef struct twin {
    size_t calls, sizes[8];
    int fail;
} twin;

static pdc_status twin_sync(void *user, double *sums, size_t n, char *msg, size_t cap)
{
    twin *w = user;
    if (w->calls < 8) w->sizes[w->calls] = n;
    w->calls++;
    if (w->fail) {
        snprintf(msg, cap, "peer gone");
        return PDC_ERR_IO;
    }
    for (size_t i = 0; i < n; i++) sums[i] *= 2.0;
    return PDC_OK;
}

/* With a batchnorm sync, the trainer syncs per batchnorm layer the channel sums and count (C + 1) and the
 * squared deviations (C) forward, the two gradient sums (2C) backward; statistics of a twin batch are the
 * batch's own, so the weights are bit-identical to a trainer without sync; a failing sync fails the step
 * naming the layer; micro-batches are refused; a process without samples syncs zeros in the same sizes. */
START_TEST(batchnorm_sync_sums_the_statistics)
{
    make_data();
    /* ref: the same step path (one micro-batch of 16) without a sync; running variances differ (unbiased
     * over twice the count), the trained weights do not */
    pdc_trainer *t = bn_trainer("0", 1), *ref = bn_trainer("16", 1);
    twin w = {0};
    ck_assert_ok(ctx, pdc_trainer_set_batchnorm_sync(t, twin_sync, &w));
    ck_assert_ok(ctx, step_on(t, 0, 16));
    ck_assert_ok(ctx, step_on(ref, 0, 16));
    ck_assert(same_trained(t, ref));
    ck_assert_uint_eq(w.calls, 3);
    ck_assert_uint_eq(w.sizes[0], 9);
    ck_assert_uint_eq(w.sizes[1], 8);
    ck_assert_uint_eq(w.sizes[2], 16);
    /* failure */
    w.fail = 1;
    ck_assert_status(ctx, step_on(t, 0, 16), PDC_ERR_IO);
    ck_assert_error_has(ctx, "layer 'bn' (batchnorm): synchronising batch statistics: peer gone");
    ck_assert(same_trained(t, ref));
    w.fail = 0;
    /* micro-batches */
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "micro_batch", "8"));
    ck_assert_status(ctx, step_on(t, 0, 16), PDC_ERR_INVALID_STATE);
    ck_assert_error_has(ctx, "synchronised batchnorm needs one forward pass per step");
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "micro_batch", "0"));
    /* no samples: the same syncs (the peer's gradient comes from the reducer) */
    capture peer = {0};
    peer.fail = 1;
    pdc_trainer *p = bn_trainer("0", 1);
    ck_assert_ok(ctx, pdc_trainer_set_reducer(p, capture_reducer, NULL, &peer));
    ck_assert_status(ctx, step_on(p, 0, 16), PDC_ERR_IO);
    capture c = {0};
    c.peer = &peer;
    ck_assert_ok(ctx, pdc_trainer_set_reducer(t, capture_reducer, NULL, &c));
    w.calls = 0;
    ck_assert_ok(ctx, step_on(t, 0, 0));
    ck_assert_uint_eq(w.calls, 3);
    ck_assert_uint_eq(w.sizes[0], 9);
    ck_assert_uint_eq(w.sizes[1], 8);
    ck_assert_uint_eq(w.sizes[2], 16);
    ck_assert_ok(ctx, pdc_trainer_set_batchnorm_sync(t, NULL, NULL));
    ck_assert_status(ctx, pdc_trainer_set_batchnorm_sync(NULL, twin_sync, NULL), PDC_ERR_INVALID_ARG);
    free(c.parts);
    free(peer.parts);
    pdc_trainer_destroy(t);
    pdc_trainer_destroy(ref);
    pdc_trainer_destroy(p);
}
END_TEST

int main(void)
{
    return run_tests("train_reduce", tmpdir_setup, tmpdir_teardown, 120,
                     TEST_LIST(micro_batches_and_the_packed_kept_gradients,
                               two_halves_are_bit_identical_to_the_whole_batch,
                               reducer_failures_empty_processes_and_bad_options,
                               buckets_hand_over_each_weight_once_last_layers_first,
                               batchnorm_sync_sums_the_statistics));
}
