/*
 * test_oom.c - failure injection. The context option "fail_alloc_after" = N makes the N-th
 * allocation from then on fail (lib/core/context.c, the allocation choke point). Each test here walks
 * N = 1, 2, 3, ... through one public call (or a sequence of builder calls) until the call
 * completes without reaching its N-th allocation, and checks at every N that:
 *  - the call returns PDC_ERR_OUT_OF_MEMORY with "injected failure" in the message,
 *  - its out-parameter and the caller's data (output tensors, an existing file, the model being
 *    changed: its full text form) are exactly as before, and no temporary file is left behind,
 *  - nothing leaks: the suite runs under ASan/LSan (make test SANITIZE=address,undefined) and
 *    valgrind (make test-valgrind) in CI.
 * Every walk prints "oom: WHAT: K injected failures survived" (K = allocations the call makes).
 */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/common/builders.h"

/* ------------------------------------------------------------------ the injection knob */

static void set_fail(size_t n)
{
    char v[32];
    snprintf(v, sizeof v, "%zu", n);
    ck_assert_ok(ctx, pdc_context_set_option(ctx, "fail_alloc_after", v));
}

static size_t fail_left(void)
{
    char v[32];
    ck_assert_ok(ctx, pdc_context_get_option(ctx, "fail_alloc_after", v, sizeof v));
    return (size_t)strtoull(v, NULL, 10);
}

/* Outcome of one call at countdown n: 1 if the injected failure happened (and was reported
 * correctly), 0 if the call completed without reaching its n-th allocation. */
static int injected(const char *what, size_t n, pdc_status st)
{
    int fired = fail_left() == 0;
    set_fail(0);
    if (!fired) {
        ck_assert_msg(st == PDC_OK, "%s: no allocation failed but it returned %s: %s", what, pdc_status_string(st),
                      pdc_context_last_error(ctx));
        return 0;
    }
    ck_assert_msg(st == PDC_ERR_OUT_OF_MEMORY, "%s: allocation %zu failed but it returned %s: %s", what, n,
                  pdc_status_string(st), pdc_context_last_error(ctx));
    ck_assert_msg(strstr(pdc_context_last_error(ctx), "injected failure") != NULL,
                  "%s: allocation %zu: message \"%s\" does not report the failed allocation", what, n,
                  pdc_context_last_error(ctx));
    return 1;
}

static void report(const char *what, size_t survived)
{
    ck_assert_msg(survived > 0, "%s: made no allocation at all", what);
    printf("oom: %s: %zu injected failures survived\n", what, survived);
}

/* ------------------------------------------------------------------ the model under test */

/* The full IR text (weights included), printed with injection paused: the remaining countdown
 * is read, switched off for the print and set back, so the walk is not disturbed. */
static char *text_of(const pdc_model *m)
{
    size_t left = fail_left();
    set_fail(0);
    char *t = NULL;
    ck_assert_ok(ctx, pdc_model_print(m, 0, &t));
    if (left) set_fail(left);
    return t;
}

static void fill_weights(float *w, size_t n, uint32_t seed) { test_fill_random(w, n, seed); }


/*
 * One builder step: on failure, the model must print exactly as before the call, and the status
 * goes back to the caller. `before` is taken with injection paused.
 */
#define STEP(m, call)                                                                                   \
    do {                                                                                                \
        char *before_ = text_of(m);                                                                     \
        pdc_status st_ = (call);                                                                        \
        if (st_ != PDC_OK) {                                                                            \
            size_t left_ = fail_left();                                                                 \
            set_fail(0);                                                                                \
            char *after_ = text_of(m);                                                                  \
            ck_assert_msg(!strcmp(before_, after_), "%s failed (%s) but changed the model", #call,   \
                          pdc_status_string(st_));                                                      \
            pdc_string_free(after_);                                                                    \
            set_fail(left_);                                                                            \
        }                                                                                               \
        pdc_string_free(before_);                                                                       \
        if (st_ != PDC_OK) return st_;                                                                  \
    } while (0)

/*
 * Builds the test model through the public builder (every sparsity kind, a symbolic input, an
 * LSTM and a GRU, pass-foldable batchnorm), into *m (created here). Returns the first failure.
 * x [?,2,6,6] -> conv (pattern + connectivity sparse, 3x3, pad 1) -> batchnorm -> relu -> maxpool
 *   -> flatten -> fc (block 1x4) -> softmax = probs
 * s [3,1,2] -> lstm, gru -> add -> mul by a constant (unstructured) = seq
 */
static pdc_status build_model(pdc_model *m)
{
    float w1[4 * 2 * 9], bn[4][4], fw[5 * 36], fb[5], lw[12 * 2], lr[12 * 3], lb[24], gw[9 * 2], gr[9 * 3], e[3];
    uint64_t pat[2];
    int32_t kp[8];
    uint8_t ck[8], bk[5 * 9], um[3] = {1, 0, 1};
    fill_weights(w1, 72, 1);
    fill_weights(fw, 180, 2);
    fill_weights(fb, 5, 3);
    fill_weights(lw, 24, 4);
    fill_weights(lr, 36, 5);
    fill_weights(lb, 24, 6);
    fill_weights(gw, 18, 7);
    fill_weights(gr, 27, 8);
    e[0] = 0.5f, e[1] = 0.0f, e[2] = -2.0f;
    for (int i = 0; i < 4; i++) bn[0][i] = 1.0f + 0.1f * (float)i, bn[1][i] = 0.1f, bn[2][i] = -0.2f, bn[3][i] = 2.0f;
    /* Sparse weights come from the projections (injection is paused for them: they are tested below). */
    size_t left = fail_left();
    set_fail(0);
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, w1, 4, 2, 3, 3, 2, 4, 0, pat, kp));
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, w1, 4, 2, 9, 0.25, ck));
    for (int k = 0; k < 8; k++)
        if (!ck[k]) kp[k] = -1;
    ck_assert_ok(ctx, pdc_prune_project_block(ctx, fw, 5, 36, 1, 4, 0.5, bk));
    if (left) set_fail(left);

    const int64_t dx[] = {-1, 2, 6, 6}, ds[] = {3, 1, 2}, dw1[] = {4, 2, 3, 3}, d4[] = {4}, dfw[] = {5, 36},
                  d5[] = {5}, dlw[] = {1, 12, 2}, dlr[] = {1, 12, 3}, dlb[] = {1, 24}, dgw[] = {1, 9, 2},
                  dgr[] = {1, 9, 3}, d3[] = {3};
    STEP(m, pdc_model_add_input(m, "x", 4, dx));
    STEP(m, pdc_model_add_input(m, "s", 3, ds));
    STEP(m, pdc_model_add_constant(m, "w1", 4, dw1, w1));
    STEP(m, pdc_model_set_sparsity_pattern(m, "w1", 3, 3, 2, pat, 8, kp));
    static const char *const bn_names[] = {"bn.scale", "bn.bias", "bn.mean", "bn.var"};
    for (int i = 0; i < 4; i++) STEP(m, pdc_model_add_constant(m, bn_names[i], 1, d4, bn[i]));
    STEP(m, pdc_model_add_constant(m, "fw", 2, dfw, fw));
    STEP(m, pdc_model_set_sparsity_block(m, "fw", 1, 4, 45, bk));
    STEP(m, pdc_model_add_constant(m, "fb", 1, d5, fb));
    STEP(m, pdc_model_add_constant(m, "lw", 3, dlw, lw));
    STEP(m, pdc_model_add_constant(m, "lr", 3, dlr, lr));
    STEP(m, pdc_model_add_constant(m, "lb", 2, dlb, lb));
    STEP(m, pdc_model_add_constant(m, "gw", 3, dgw, gw));
    STEP(m, pdc_model_add_constant(m, "gr", 3, dgr, gr));
    STEP(m, pdc_model_add_constant(m, "e", 1, d3, e));
    STEP(m, pdc_model_set_sparsity_unstructured(m, "e", 3, um));

    pdc_attrs *a = NULL;
    pdc_status st = pdc_attrs_create(ctx, &a);
    if (st) return st;
    const int64_t pads[] = {1, 1, 1, 1}, two[] = {2, 2};
    if ((st = pdc_attrs_set_ints(a, "pads", 4, pads)) || (st = pdc_attrs_set_int(a, "group", 1))) {
        pdc_attrs_destroy(a);
        return st;
    }
#define LAYER(name, op, ni, in, no, out, attrs)                                                        \
    do {                                                                                              \
        const char *const i_[] = in, *const o_[] = out;                                               \
        char *before_ = text_of(m);                                                                   \
        pdc_status s_ = pdc_model_add_layer(m, name, op, ni, i_, no, o_, attrs);                      \
        if (s_ != PDC_OK) {                                                                           \
            char *after_ = text_of(m);                                                                \
            ck_assert_msg(!strcmp(before_, after_), "add_layer %s failed (%s) but changed the model", \
                          name, pdc_status_string(s_));                                               \
            pdc_string_free(after_);                                                                  \
        }                                                                                             \
        pdc_string_free(before_);                                                                     \
        if (s_ != PDC_OK) {                                                                           \
            pdc_attrs_destroy(a);                                                                     \
            return s_;                                                                                \
        }                                                                                             \
    } while (0)
#define L(...) {__VA_ARGS__}
    LAYER("conv", "conv", 2, L("x", "w1"), 1, L("c"), a);
    pdc_attrs_destroy(a);
    a = NULL;
    LAYER("bn", "batchnorm", 5, L("c", "bn.scale", "bn.bias", "bn.mean", "bn.var"), 1, L("n"), NULL);
    LAYER("relu", "relu", 1, L("n"), 1, L("r"), NULL);
    if ((st = pdc_attrs_create(ctx, &a))) return st;
    if ((st = pdc_attrs_set_ints(a, "kernel_shape", 2, two)) || (st = pdc_attrs_set_ints(a, "strides", 2, two))) {
        pdc_attrs_destroy(a);
        return st;
    }
    LAYER("pool", "maxpool", 1, L("r"), 1, L("p"), a);
    pdc_attrs_destroy(a);
    a = NULL;
    LAYER("flat", "flatten", 1, L("p"), 1, L("f"), NULL);
    LAYER("fc", "fc", 3, L("f", "fw", "fb"), 1, L("y"), NULL);
    LAYER("softmax", "softmax", 1, L("y"), 1, L("probs"), NULL);
    if ((st = pdc_attrs_create(ctx, &a))) return st;
    if ((st = pdc_attrs_set_int(a, "hidden_size", 3)) || (st = pdc_attrs_set_string(a, "direction", "forward"))) {
        pdc_attrs_destroy(a);
        return st;
    }
    LAYER("lstm", "lstm", 4, L("s", "lw", "lr", "lb"), 1, L("ly"), a);
    LAYER("gru", "gru", 3, L("s", "gw", "gr"), 1, L("gy"), a);
    pdc_attrs_destroy(a);
    a = NULL;
    LAYER("add", "add", 2, L("ly", "gy"), 1, L("sum"), NULL);
    LAYER("scale", "mul", 2, L("sum", "e"), 1, L("seq"), NULL);
#undef LAYER
#undef L
    STEP(m, pdc_model_mark_output(m, "probs"));
    STEP(m, pdc_model_mark_output(m, "seq"));
    return PDC_OK;
}

/* The test model, built without injection. */
static pdc_model *oom_model(void)
{
    pdc_model *m = new_model("oom");
    ck_assert_ok(ctx, build_model(m));
    return m;
}

/* The model's .pdc image and IR text, made without injection. */
static void model_bytes(const pdc_model *m, void **pdc_out, size_t *pdc_size, char **text_out)
{
    ck_assert_ok(ctx, pdc_model_save(m, tmp_path("image.pdc")));
    *pdc_out = test_read_file(tmp_path("image.pdc"), pdc_size);
    unlink(tmp_path("image.pdc"));
    ck_assert_ok(ctx, pdc_model_print(m, 0, text_out));
}

/* ------------------------------------------------------------------ walks */

START_TEST(builder_calls)
{
    size_t n = 1;
    for (;; n++) {
        pdc_model *m = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_model_create(ctx, "oom", &m);
        if (st == PDC_OK) {
            st = build_model(m);
        } else {
            ck_assert_ptr_eq(m, SENTINEL_PTR);
            m = NULL;
        }
        int fired = injected("builder", n, st);
        if (!fired) ck_assert_ok(ctx, pdc_model_verify(m));
        pdc_model_destroy(m);
        if (!fired) break;
    }
    report("model builder (create, inputs, constants, sparsity, layers, outputs)", n - 1);
}
END_TEST

START_TEST(attrs_calls)
{
    size_t n = 1;
    const int64_t v[] = {1, 2, 3};
    for (;; n++) {
        pdc_attrs *a = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_attrs_create(ctx, &a);
        if (st != PDC_OK) {
            ck_assert_ptr_eq(a, SENTINEL_PTR);
            a = NULL;
        }
        if (!st) st = pdc_attrs_set_int(a, "i", 1);
        if (!st) st = pdc_attrs_set_ints(a, "v", 3, v);
        if (!st) st = pdc_attrs_set_float(a, "f", 0.5f);
        if (!st) st = pdc_attrs_set_string(a, "s", "text");
        if (!st) st = pdc_attrs_set_string(a, "s", "replaced");
        int fired = injected("attrs", n, st);
        pdc_attrs_destroy(a);
        if (!fired) break;
    }
    report("attribute sets", n - 1);
}
END_TEST

/* Walks one loader: data/size to pdc_model_load_memory or, with a path, pdc_model_load. */
static void walk_load(const char *what, const void *data, size_t size, const char *path, const char *want_text)
{
    size_t n = 1;
    for (;; n++) {
        pdc_model *m = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = path ? pdc_model_load(ctx, path, &m) : pdc_model_load_memory(ctx, data, size, &m);
        if (!injected(what, n, st)) {
            char *t = text_of(m);
            ck_assert_str_eq(t, want_text);
            pdc_string_free(t);
            pdc_model_destroy(m);
            break;
        }
        ck_assert_msg(m == SENTINEL_PTR, "%s: failed load wrote model_out", what);
    }
    report(what, n - 1);
}

START_TEST(load_text_and_binary)
{
    pdc_model *m = oom_model();
    void *image;
    size_t image_size;
    char *text;
    model_bytes(m, &image, &image_size, &text);
    walk_load("pdc_model_load_memory (.pdc)", image, image_size, NULL, text);
    walk_load("pdc_model_load_memory (.pdcir)", text, strlen(text), NULL, text);

    size_t n = 1;
    for (;; n++) {
        pdc_model *p = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_model_parse(ctx, text, strlen(text), &p);
        if (!injected("pdc_model_parse", n, st)) {
            pdc_model_destroy(p);
            break;
        }
        ck_assert_ptr_eq(p, SENTINEL_PTR);
    }
    report("pdc_model_parse", n - 1);

    ck_assert_ok(ctx, pdc_model_save(m, tmp_path("m.pdc")));
    ck_assert_ok(ctx, pdc_model_save_text(m, tmp_path("m.pdcir"), 0));
    walk_load("pdc_model_load (.pdc file)", NULL, 0, tmp_path("m.pdc"), text);
    walk_load("pdc_model_load (.pdcir file)", NULL, 0, tmp_path("m.pdcir"), text);
    free(image);
    pdc_string_free(text);
    pdc_model_destroy(m);
}
END_TEST

static size_t dir_entries(void)
{
    size_t n = 0;
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static char *read_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

START_TEST(save_print_and_inspect)
{
    pdc_model *m = oom_model();
    /* An existing file must survive every failed save unchanged, and no temporary may be left. */
    const char *old = "previous contents\n";
    for (int binary = 0; binary <= 1; binary++) {
        const char *path = tmp_path(binary ? "out.pdc" : "out.pdcir");
        FILE *f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        fputs(old, f);
        fclose(f);
        size_t entries = dir_entries(), n = 1;
        for (;; n++) {
            set_fail(n);
            pdc_status st = binary ? pdc_model_save(m, path) : pdc_model_save_text(m, path, 0);
            int fired = injected(binary ? "pdc_model_save" : "pdc_model_save_text", n, st);
            ck_assert_uint_eq(dir_entries(), entries);
            if (!fired) break;
            ck_assert_str_eq(read_text_file(path), old);
        }
        ck_assert_str_ne(read_text_file(path), old);
        report(binary ? "pdc_model_save" : "pdc_model_save_text", n - 1);
    }

    size_t n = 1;
    for (;; n++) {
        char *t = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_model_print(m, PDC_PRINT_ELIDE_WEIGHTS, &t);
        if (!injected("pdc_model_print", n, st)) {
            pdc_string_free(t);
            break;
        }
        ck_assert_ptr_eq(t, SENTINEL_PTR);
    }
    report("pdc_model_print", n - 1);

    size_t layers = 0, calls = 0;
    ck_assert_ok(ctx, pdc_model_num_layers(m, &layers));
    for (size_t i = 0; i < layers; i++) {
        for (int field = PDC_FIELD_NAME; field <= PDC_FIELD_SPARSITY; field++) {
            for (n = 1;; n++) {
                const char *t = SENTINEL_PTR;
                set_fail(n);
                pdc_status st = pdc_model_layer_string(m, i, (pdc_layer_field)field, &t);
                if (!injected("pdc_model_layer_string", n, st)) break;
                ck_assert_ptr_eq(t, SENTINEL_PTR);
                calls++;
            }
        }
    }
    report("pdc_model_layer_string (every layer and field)", calls);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(emit_calls)
{
    /* emitting PTX into a directory that does not exist yet: every failure leaves nothing behind
     * (the directory it made was left on a failed write) */
    pdc_model *m = oom_model();
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 4, (const int64_t[]){1, 2, 6, 6}));
    const char *dir = tmp_path("ptx");
    size_t entries = dir_entries(), n = 1;
    for (;; n++) {
        set_fail(n);
        pdc_status st = pdc_model_emit(ctx, m, "nvptx", NULL, dir);
        if (!injected("pdc_model_emit", n, st)) break;
        ck_assert_uint_eq(dir_entries(), entries);
    }
    report("pdc_model_emit", n - 1);
    ck_assert_uint_eq(dir_entries(), entries + 1);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    char sub[512], path[1024];
    snprintf(sub, sizeof sub, "%s", dir);
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%.256s", sub, e->d_name);
            ck_assert_int_eq(unlink(path), 0);
        }
    closedir(d);
    ck_assert_int_eq(rmdir(sub), 0);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(transform_passes)
{
    static const char pipeline[] = "canonicalize,prune-pattern,prune-connectivity,prune-block,prune-unstructured,reorder,plan";
    pdc_model *m = oom_model();
    const int64_t dx[] = {2, 2, 6, 6};
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 4, dx));
    char *before = text_of(m);
    pdc_attrs *opt;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &opt));
    ck_assert_ok(ctx, pdc_attrs_set_int(opt, "patterns", 2));
    ck_assert_ok(ctx, pdc_attrs_set_string(opt, "block", "1x4:0.5"));
    ck_assert_ok(ctx, pdc_attrs_set_int(opt, "include_stem", 1)); /* the model's one conv reads x */
    size_t n = 1;
    for (;; n++) {
        set_fail(n);
        pdc_status st = pdc_model_transform(m, pipeline, opt);
        if (!injected("pdc_model_transform", n, st)) break;
        char *now = text_of(m);
        ck_assert_msg(!strcmp(now, before), "pdc_model_transform failed at allocation %zu but changed the model", n);
        pdc_string_free(now);
    }
    report("pdc_model_transform (all passes)", n - 1);
    size_t arena = 0;
    ck_assert_ok(ctx, pdc_model_memory_plan(m, &arena, NULL));
    ck_assert_uint_gt(arena, 0);
    pdc_attrs_destroy(opt);
    pdc_string_free(before);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(prune_projections)
{
    float w[4 * 2 * 9], copy[4 * 2 * 9];
    uint64_t pat[2] = {0, 0};
    int32_t kp[8];
    uint8_t keep[72];
    size_t n, total = 0;
    for (int which = 0; which < 4; which++) {
        for (n = 1;; n++) {
            test_fill_random(w, 72, 9);
            memcpy(copy, w, sizeof w);
            set_fail(n);
            pdc_status st = which == 0   ? pdc_prune_project_pattern(ctx, w, 4, 2, 3, 3, 2, 4, 0, pat, kp)
                            : which == 1 ? pdc_prune_project_connectivity(ctx, w, 4, 2, 9, 0.5, keep)
                            : which == 2 ? pdc_prune_project_block(ctx, w, 8, 9, 2, 3, 0.5, keep)
                                         : pdc_prune_project_unstructured(ctx, w, 72, 0.5, keep);
            if (!injected("pdc_prune_project_*", n, st)) break;
            ck_assert_msg(!memcmp(w, copy, sizeof w), "projection %d failed but changed the weights", which);
            total++;
        }
    }
    printf("oom: pdc_prune_project_* (4 projections): %zu injected failures survived\n", total);
}
END_TEST

/* Walks compile and run for every target of this build ("cpu" is skipped where unavailable). */
static const char *const targets[] = {"ref", "cpu"};

START_TEST(compile_and_run)
{
    const char *target = targets[_i];
    pdc_model *m = oom_model();
    const int64_t dx[] = {2, 2, 6, 6};
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 4, dx));
    size_t n = 1;
    pdc_program *p = NULL;
    pdc_status first = pdc_compile(ctx, m, target, &p);
    if (first == PDC_ERR_UNSUPPORTED || first == PDC_ERR_UNKNOWN_TARGET || first == PDC_ERR_NO_DEVICE) {
        printf("oom: target '%s' skipped: %s\n", target, pdc_context_last_error(ctx));
        pdc_model_destroy(m);
        return;
    }
    ck_assert_ok(ctx, first);
    pdc_program_destroy(p);
    char what[64];
    snprintf(what, sizeof what, "pdc_compile (%s)", target);
    for (;; n++) {
        p = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_compile(ctx, m, target, &p);
        if (!injected(what, n, st)) break;
        ck_assert_ptr_eq(p, SENTINEL_PTR);
    }
    report(what, n - 1);

    pdc_tensor *in[2], *out[2];
    const int64_t ds[] = {3, 1, 2}, dp[] = {2, 5}, dq[] = {3, 1, 1, 3};
    for (n = 1;; n++) {
        in[0] = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_tensor_create(ctx, 4, dx, &in[0]);
        if (!injected("pdc_tensor_create", n, st)) break;
        ck_assert_ptr_eq(in[0], SENTINEL_PTR);
    }
    report("pdc_tensor_create", n - 1);
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 3, ds, &in[1]));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 2, dp, &out[0]));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 4, dq, &out[1]));
    test_fill_random(pdc_tensor_data(in[0]), pdc_tensor_size(in[0]), 11);
    test_fill_random(pdc_tensor_data(in[1]), pdc_tensor_size(in[1]), 12);

    /* The reference result, then the walk: a failed run leaves the outputs as they were. */
    ck_assert_ok(ctx, pdc_program_run(p, 2, in, 2, out));
    float want0[10], want1[9];
    memcpy(want0, pdc_tensor_data(out[0]), sizeof want0);
    memcpy(want1, pdc_tensor_data(out[1]), sizeof want1);
    snprintf(what, sizeof what, "pdc_program_run (%s)", target);
    for (n = 1;; n++) {
        for (int k = 0; k < 2; k++) memset(pdc_tensor_data(out[k]), 0xab, 4 * pdc_tensor_size(out[k]));
        set_fail(n);
        pdc_status st = pdc_program_run(p, 2, in, 2, out);
        if (!injected(what, n, st)) break;
        for (int k = 0; k < 2; k++) {
            const uint8_t *b = (const uint8_t *)pdc_tensor_data(out[k]);
            for (size_t i = 0; i < 4 * pdc_tensor_size(out[k]); i++)
                ck_assert_msg(b[i] == 0xab, "run failed at allocation %zu but wrote output %d", n, k);
        }
    }
    snprintf(what, sizeof what, "pdc_program_run (%s)", target);
    report(what, n - 1);
    ck_assert_mem_eq(pdc_tensor_data(out[0]), want0, sizeof want0);
    ck_assert_mem_eq(pdc_tensor_data(out[1]), want1, sizeof want1);
    for (int k = 0; k < 2; k++) pdc_tensor_destroy(in[k]), pdc_tensor_destroy(out[k]);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

/* ------------------------------------------------------------------ training */

static const char train_model[] = "pdcir 1\n"
                                  "input x : f32[1,1,4,4]\n"
                                  "const w1 : f32[2,1,3,3] = dense<elided>\n"
                                  "const b1 : f32[2] = dense<elided>\n"
                                  "const fw : f32[3,32] = dense<elided>\n"
                                  "layer conv = conv(x, w1, b1) -> (c) {pads=[1, 1, 1, 1]}\n"
                                  "layer relu = relu(c) -> (r)\n"
                                  "layer flat = flatten(r) -> (f)\n"
                                  "layer fc = fc(f, fw, -) -> (y)\n"
                                  "layer softmax = softmax(y) -> (p)\n"
                                  "output p\n";

/* The trainer's complete state: its checkpoint bytes, saved with injection paused. */
static char *trainer_state(const pdc_trainer *t, size_t *len)
{
    size_t left = fail_left();
    set_fail(0);
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("state.ckpt")));
    char *buf = test_read_file(tmp_path("state.ckpt"), len);
    if (left) set_fail(left);
    return buf;
}

static void assert_trainer_unchanged(const pdc_trainer *t, const char *before, size_t len, const char *what, size_t n)
{
    size_t now_len;
    char *now = trainer_state(t, &now_len);
    ck_assert_msg(now_len == len && !memcmp(now, before, len), "%s failed at allocation %zu but changed the trainer",
                  what, n);
    free(now);
}

START_TEST(trainer_calls)
{
    pdc_model *m = NULL;
    ck_assert_ok(ctx, pdc_model_parse(ctx, train_model, strlen(train_model), &m));
    size_t n, total = 0;
    pdc_trainer *t = NULL;
    for (n = 1;; n++) {
        t = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_trainer_create(ctx, m, &t);
        if (!injected("pdc_trainer_create", n, st)) break;
        ck_assert_ptr_eq(t, SENTINEL_PTR);
    }
    report("pdc_trainer_create", n - 1);
    total += n - 1;
    ck_assert_ok(ctx, pdc_trainer_set_option(t, "batch", "4"));
    ck_assert_ok(ctx, pdc_trainer_init_weights(t));

    const int64_t dx[] = {4, 1, 4, 4}, dl[] = {4};
    pdc_tensor *x, *l;
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 4, dx, &x));
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, dl, &l));
    test_fill_random(pdc_tensor_data(x), 64, 3);
    for (int i = 0; i < 4; i++) pdc_tensor_data(l)[i] = (float)(i % 3);

    size_t len;
    char *before = trainer_state(t, &len);
    for (n = 1;; n++) {
        float loss = -1.0f;
        set_fail(n);
        pdc_status st = pdc_trainer_step(t, x, l, &loss);
        if (!injected("pdc_trainer_step", n, st)) break;
        ck_assert_float_eq(loss, -1.0f);
        assert_trainer_unchanged(t, before, len, "pdc_trainer_step", n);
    }
    report("pdc_trainer_step", n - 1);
    total += n - 1;
    free(before);

    for (n = 1;; n++) {
        float loss = -1.0f, acc = -1.0f;
        set_fail(n);
        pdc_status st = pdc_trainer_evaluate(t, x, l, &loss, &acc);
        if (!injected("pdc_trainer_evaluate", n, st)) break;
        ck_assert(loss == -1.0f && acc == -1.0f);
    }
    /* evaluate reuses the trainer's buffers: it may make no allocation at all */
    printf("oom: pdc_trainer_evaluate: %zu injected failures survived\n", n - 1);
    total += n - 1;

    /* save over an existing checkpoint: it survives every failure */
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("t.ckpt")));
    before = trainer_state(t, &len);
    ck_assert_ok(ctx, pdc_trainer_step(t, x, l, NULL)); /* now differs from t.ckpt */
    for (n = 1;; n++) {
        set_fail(n);
        pdc_status st = pdc_trainer_save(t, tmp_path("t.ckpt"));
        if (!injected("pdc_trainer_save", n, st)) break;
        FILE *f = fopen(tmp_path("t.ckpt"), "rb");
        char *disk = malloc(len + 1);
        size_t got = fread(disk, 1, len + 1, f);
        fclose(f);
        ck_assert_msg(got == len && !memcmp(disk, before, len), "failed save changed the file on disk");
        free(disk);
    }
    report("pdc_trainer_save", n - 1);
    total += n - 1;
    free(before);

    /* load the step-1 checkpoint back (state.ckpt of before): trainer unchanged on failure */
    ck_assert_ok(ctx, pdc_trainer_save(t, tmp_path("now.ckpt")));
    before = trainer_state(t, &len);
    ck_assert_ok(ctx, pdc_trainer_step(t, x, l, NULL));
    free(before);
    before = trainer_state(t, &len);
    for (n = 1;; n++) {
        set_fail(n);
        pdc_status st = pdc_trainer_load(t, tmp_path("now.ckpt"));
        if (!injected("pdc_trainer_load", n, st)) break;
        assert_trainer_unchanged(t, before, len, "pdc_trainer_load", n);
    }
    report("pdc_trainer_load", n - 1);
    total += n - 1;
    free(before);

    pdc_attrs *o;
    ck_assert_ok(ctx, pdc_attrs_create(ctx, &o));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "patterns", 2));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1));
    before = trainer_state(t, &len);
    for (n = 1;; n++) {
        set_fail(n);
        pdc_status st = pdc_trainer_prune(t, "prune-pattern,prune-unstructured", o);
        if (!injected("pdc_trainer_prune", n, st)) break;
        assert_trainer_unchanged(t, before, len, "pdc_trainer_prune", n);
    }
    report("pdc_trainer_prune", n - 1);
    total += n - 1;
    free(before);
    pdc_attrs_destroy(o);

    for (n = 1;; n++) {
        pdc_model *e = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_trainer_export(t, &e);
        if (!injected("pdc_trainer_export", n, st)) {
            pdc_model_destroy(e);
            break;
        }
        ck_assert_ptr_eq(e, SENTINEL_PTR);
    }
    report("pdc_trainer_export", n - 1);
    total += n - 1;
    printf("oom: training (create, step, evaluate, save, load, prune, export): %zu injected failures survived\n",
           total);

    pdc_tensor_destroy(x);
    pdc_tensor_destroy(l);
    pdc_trainer_destroy(t);
    pdc_model_destroy(m);
}
END_TEST

/* The knob itself: counting, one-shot, off, and its option errors. */
START_TEST(option_semantics)
{
    ck_assert_uint_eq(fail_left(), 0);
    const int64_t d[] = {4};
    pdc_tensor *t = NULL;
    set_fail(3);
    ck_assert_uint_eq(fail_left(), 3);
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, d, &t)); /* two allocations: struct and data */
    ck_assert_uint_eq(fail_left(), 1);
    pdc_tensor_destroy(t);
    t = SENTINEL_PTR;
    ck_assert_status(ctx, pdc_tensor_create(ctx, 1, d, &t), PDC_ERR_OUT_OF_MEMORY);
    ck_assert_error_has(ctx, "injected failure");
    ck_assert_ptr_eq(t, SENTINEL_PTR);
    ck_assert_uint_eq(fail_left(), 0);
    ck_assert_ok(ctx, pdc_tensor_create(ctx, 1, d, &t)); /* only that one allocation failed */
    pdc_tensor_destroy(t);
    ck_assert_status(ctx, pdc_context_set_option(ctx, "fail_alloc_after", "-1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option fail_alloc_after: expected an allocation count (0 = off), got \"-1\"");
    ck_assert_status(ctx, pdc_context_set_option(ctx, "fail_alloc_after", "x"), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_context_set_option(ctx, "no_such_option", "1"), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "fail_alloc_after");
    /* Another context is not affected. */
    pdc_context *other;
    ck_assert_ok(ctx, pdc_context_create(&other));
    set_fail(1);
    ck_assert_ok(other, pdc_tensor_create(other, 1, d, &t));
    pdc_tensor_destroy(t);
    ck_assert_uint_eq(fail_left(), 1);
    set_fail(0);
    pdc_context_destroy(other);
}
END_TEST

/* A group of the model twice (pdc_compile_group: group, share, schedule, plan, compile), then its runs:
 * a failed run leaves every output as it was. */
START_TEST(group_compile_and_run)
{
    pdc_model *m = oom_model();
    const int64_t dx[] = {2, 2, 6, 6};
    ck_assert_ok(ctx, pdc_model_set_input_shape(m, "x", 4, dx));
    const pdc_model *const models[2] = {m, m};
    pdc_program *p = NULL;
    /* once first, as compile_and_run does: the kernels are then in the context's JIT, and the walk
     * covers the group's own allocations, not the reading of the disk cache (a miss when it fails) */
    ck_assert_ok(ctx, pdc_compile_group(ctx, models, 2, "cpu", &p));
    pdc_program_destroy(p);
    size_t n;
    for (n = 1;; n++) {
        p = SENTINEL_PTR;
        set_fail(n);
        pdc_status st = pdc_compile_group(ctx, models, 2, "cpu", &p);
        if (!injected("pdc_compile_group (cpu)", n, st)) break;
        ck_assert_ptr_eq(p, SENTINEL_PTR);
    }
    report("pdc_compile_group (cpu)", n - 1);
    size_t ni, no;
    ck_assert_ok(ctx, pdc_program_num_inputs(p, &ni));
    ck_assert_ok(ctx, pdc_program_num_outputs(p, &no));
    ck_assert_uint_eq(ni, 2);
    ck_assert_uint_eq(no, 4);
    pdc_tensor *in[2], *out[4];
    for (size_t i = 0; i < ni; i++) {
        in[i] = io_tensor(ctx, p, 0, i);
        test_fill_random(pdc_tensor_data(in[i]), pdc_tensor_size(in[i]), 21 + (uint32_t)i);
    }
    for (size_t i = 0; i < no; i++) out[i] = io_tensor(ctx, p, 1, i);
    for (n = 1;; n++) {
        for (size_t k = 0; k < no; k++) memset(pdc_tensor_data(out[k]), 0xab, 4 * pdc_tensor_size(out[k]));
        set_fail(n);
        pdc_status st = pdc_program_run(p, ni, in, no, out);
        if (!injected("pdc_program_run (cpu group)", n, st)) break;
        for (size_t k = 0; k < no; k++) {
            const uint8_t *b = (const uint8_t *)pdc_tensor_data(out[k]);
            for (size_t i = 0; i < 4 * pdc_tensor_size(out[k]); i++)
                ck_assert_msg(b[i] == 0xab, "group run failed at allocation %zu but wrote output %zu", n, k);
        }
    }
    report("pdc_program_run (cpu group)", n - 1);
    for (size_t i = 0; i < ni; i++) pdc_tensor_destroy(in[i]);
    for (size_t i = 0; i < no; i++) pdc_tensor_destroy(out[i]);
    pdc_program_destroy(p);
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("oom");
    TCase *tc = test_add_tcase(s, "core", tmpdir_setup, tmpdir_teardown, 300,
                               TEST_LIST(option_semantics, builder_calls, attrs_calls, load_text_and_binary,
                                         save_print_and_inspect, emit_calls, transform_passes, prune_projections));
    tcase_add_loop_test(tc, compile_and_run, 0, (int)(sizeof targets / sizeof targets[0]));
    tcase_add_test(tc, trainer_calls);
    tcase_add_test(tc, group_compile_and_run);
    return test_run_suite(s);
}
