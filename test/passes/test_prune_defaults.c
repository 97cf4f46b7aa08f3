/*
 * test_prune_defaults.c - the pruning passes' safe defaults: the stem (a conv reading a graph input,
 * also through layers without weights), kernels other than 3x3 and 1x1 convs stay dense unless an
 * option opts them in; every layer a default leaves alone is named in a note with the reason and the
 * option; a layer list overrides the defaults; the passes report their progress layer by layer.
 */
#include "ir/ir.h"
#include "passes/passes.h"

#include "test/common/builders.h"

/* x[1,3,12,12] -> sub (mean) -> mul (scale) -> conv7x7 stem (3->8, pad 3) -> relu r0 -> conv3x3 b (pad 1)
 *   and r0 -> conv1x1 down; b + down -> conv5x5 c (8->4, pad 2) -> flatten -> fc (576->10) -> y.
 * Also x -> conv3x3 side (3->4, pad 1) -> ys: a second stem, reading the graph input directly. */
static pdc_model *stem_model(void)
{
    pdc_model *m = new_model("stems");
    add_input(m, "x", 4, (int64_t[]){1, 3, 12, 12});
    add_values(m, "mean", 4, (int64_t[]){1, 3, 1, 1}, (float[]){0.485f, 0.456f, 0.406f});
    add_values(m, "scale", 4, (int64_t[]){1, 3, 1, 1}, (float[]){4.37f, 4.46f, 4.44f});
    add_random(m, "ws", 4, (int64_t[]){8, 3, 7, 7}, 81, -1, 1);
    add_random(m, "wb", 4, (int64_t[]){8, 8, 3, 3}, 82, -1, 1);
    add_random(m, "wd", 4, (int64_t[]){8, 8, 1, 1}, 83, -1, 1);
    add_random(m, "wc", 4, (int64_t[]){4, 8, 5, 5}, 84, -1, 1);
    add_random(m, "fw", 2, (int64_t[]){10, 576}, 85, -0.1f, 0.1f);
    add_random(m, "wside", 4, (int64_t[]){4, 3, 3, 3}, 86, -1, 1);
    add_layer(m, "norm_sub", "sub", "x,mean", "xs", NULL);
    add_layer(m, "norm_mul", "mul", "xs,scale", "xn", NULL);
    add_layer(m, "stem", "conv", "xn,ws", "s", pads(3));
    add_layer(m, "r0", "relu", "s", "r", NULL);
    add_layer(m, "b", "conv", "r,wb", "yb", pads(1));
    add_layer(m, "down", "conv", "r,wd", "yd", NULL);
    add_layer(m, "sum", "add", "yb,yd", "z", NULL);
    add_layer(m, "c", "conv", "z,wc", "yc", pads(2));
    add_layer(m, "flat", "flatten", "yc", "f", NULL);
    add_layer(m, "fc", "fc", "f,fw", "y", NULL);
    add_layer(m, "side", "conv", "x,wside", "ys", pads(1));
    add_output(m, "y");
    add_output(m, "ys");
    return m;
}

/* The notes the passes give, one line each: "pass|kind|layer|text". */
typedef struct note_log {
    char text[8192];
    size_t n;
} note_log;

static void log_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    note_log *l = user;
    size_t len = strlen(l->text);
    snprintf(l->text + len, sizeof l->text - len, "%s|%d|%s|%s\n", pass, (int)kind, layer, text);
    l->n++;
}

/* A progress handler appending "stage done/total, " to the string user points to (4096 bytes). */
static void progress_log(void *user, const char *stage, size_t done, size_t total)
{
    char *log = user;
    size_t len = strlen(log);
    snprintf(log + len, 4096 - len, "%s %zu/%zu, ", stage, done, total);
}

/* Runs pipeline on a new stem_model with options o (destroyed); the notes go to *log. */
static pdc_model *stem_model_pruned(const char *pipeline, pdc_attrs *o, note_log *log)
{
    pdc_model *m = stem_model();
    memset(log, 0, sizeof *log);
    ck_assert_ok(ctx, pdc_context_set_note_handler(ctx, log_note, log));
    ck_assert_ok(ctx, transform(m, pipeline, o));
    ck_assert_ok(ctx, pdc_context_set_note_handler(ctx, NULL, NULL));
    return m;
}

/* The sparsity kinds of the weights of stem, side, b, down, c, fc, as one string ("N" none, "P"
 * pattern, "B" block, "U" unstructured). */
static const char *kinds(const pdc_model *m)
{
    static char buf[8];
    const char *layers[] = {"stem", "side", "b", "down", "c", "fc"};
    for (size_t i = 0; i < 6; i++) buf[i] = "NPBU"[weight_of(m, layers[i])->sparsity.kind];
    buf[6] = '\0';
    return buf;
}

START_TEST(defaults_leave_the_stem_big_kernels_and_1x1_convs_dense)
{
    note_log log;
    static const char pipeline[] = "prune-pattern,prune-connectivity,prune-block";
    /* the defaults: only the 3x3 conv b (patterns) and the fc (blocks) */
    pdc_model *m = stem_model_pruned(pipeline, NULL, &log);
    ck_assert_str_eq(kinds(m), "NNPNNB");
    check_pattern_weight(weight_of(m, "b"), 8, 4);
    /* every layer a default left alone is named, with the reason and the option; then what was pruned */
    ck_assert_str_eq(log.text,
                     "prune-pattern|2|stem|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-pattern|1|b|pattern 8x4\n"
                     "prune-pattern|3|c|5x5 kernels: not in option pattern_kernels \"3x3\"\n"
                     "prune-pattern|2|side|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-connectivity|2|stem|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-connectivity|1|b|connectivity 50%\n"
                     "prune-connectivity|3|c|5x5 kernels: not in option pattern_kernels \"3x3\"\n"
                     "prune-connectivity|2|side|stem: reads a graph input (option include_stem=1 prunes it)\n"
                     "prune-block|4|down|1x1 conv: option block_convs=1 prunes it\n"
                     "prune-block|1|fc|block 1x4 50%\n");
    pdc_model_destroy(m);

    /* every opt-in: every conv pruned, no note about a default */
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "include_stem", 1));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "pattern_kernels", " 3x3, 5x5,7x7 "));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block_convs", "1"));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "1x4:0.75"));
    m = stem_model_pruned(pipeline, o, &log);
    ck_assert_str_eq(kinds(m), "PPPBPB");
    check_pattern_weight(weight_of(m, "stem"), 8, 4);
    check_pattern_weight(weight_of(m, "c"), 8, 4);
    ck_assert_ptr_null(strstr(log.text, "|2|"));
    ck_assert_ptr_null(strstr(log.text, "|3|"));
    ck_assert_ptr_null(strstr(log.text, "|4|"));
    ck_assert_ptr_nonnull(strstr(log.text, "prune-pattern|1|stem|pattern 8x4\n"));
    ck_assert_ptr_nonnull(strstr(log.text, "prune-block|1|down|block 1x4 75%\n"));
    ck_assert_uint_eq(log.n, 4 + 4 + 2); /* stem, side, b, c twice; down and fc */
    pdc_model_destroy(m);

    /* one opt-in at a time */
    m = stem_model_pruned(pipeline, opt_i("include_stem", 1), &log);
    ck_assert_str_eq(kinds(m), "NPPNNB"); /* side (3x3) now; the 7x7 stem still not: its kernel size */
    ck_assert_ptr_nonnull(strstr(log.text, "prune-pattern|3|stem|7x7 kernels: not in option pattern_kernels \"3x3\"\n"));
    pdc_model_destroy(m);
    m = stem_model_pruned(pipeline, opt_s("pattern_kernels", "5x5"), &log);
    ck_assert_str_eq(kinds(m), "NNNNPB"); /* only c: 3x3 is no longer listed, the stems stay dense */
    ck_assert_ptr_nonnull(strstr(log.text, "prune-pattern|3|b|3x3 kernels: not in option pattern_kernels \"5x5\"\n"));
    pdc_model_destroy(m);
    m = stem_model_pruned(pipeline, opt_s("pattern_kernels", "all"), &log);
    ck_assert_str_eq(kinds(m), "NNPNPB");
    pdc_model_destroy(m);
    m = stem_model_pruned(pipeline, opt_i("block_convs", 1), &log);
    ck_assert_str_eq(kinds(m), "NNPBNB");
    pdc_model_destroy(m);

    /* unstructured: the stems are left alone, everything else taken */
    m = stem_model_pruned("prune-unstructured", NULL, &log);
    ck_assert_str_eq(kinds(m), "NNUUUU");
    ck_assert_ptr_nonnull(strstr(log.text, "prune-unstructured|2|side|stem: reads a graph input"));
    ck_assert_ptr_nonnull(strstr(log.text, "prune-unstructured|1|down|unstructured 50%\n"));
    pdc_model_destroy(m);
    m = stem_model_pruned("prune-unstructured", opt_i("include_stem", 1), &log);
    ck_assert_str_eq(kinds(m), "UUUUUU");
    pdc_model_destroy(m);
}
END_TEST

START_TEST(listed_layers_override_the_defaults)
{
    /* a layer named in layers is pruned by each pass that can prune it, whatever the defaults say */
    note_log log;
    pdc_model *m = stem_model_pruned("prune-pattern,prune-connectivity,prune-block", opt_s("layers", "stem,down"), &log);
    ck_assert_str_eq(kinds(m), "PNNBNN");
    ck_assert_str_eq(log.text, "prune-pattern|1|stem|pattern 8x4\n"
                               "prune-connectivity|1|stem|connectivity 50%\n"
                               "prune-block|1|down|block 1x4 50%\n");
    pdc_model_destroy(m);
    m = stem_model_pruned("prune-unstructured", opt_s("layers", "side"), &log);
    ck_assert_str_eq(kinds(m), "NUNNNN");
    pdc_model_destroy(m);
    /* skip still excludes; the defaults apply to the rest */
    m = stem_model_pruned("prune-pattern", opt_s("skip", "b"), &log);
    ck_assert_str_eq(kinds(m), "NNNNNN");
    ck_assert_ptr_null(strstr(log.text, "|b|"));
    pdc_model_destroy(m);
}
END_TEST

START_TEST(stems_are_found_through_layers_without_weights)
{
    pdc_model *m = stem_model();
    uint8_t *stems;
    ck_assert_ok(ctx, pass_find_stems(m, &stems));
    for (size_t li = 0; li < m->n_layers; li++) {
        const char *name = m->layers[li].name;
        int want = !strcmp(name, "stem") || !strcmp(name, "side");
        ck_assert_msg(stems[li] == want, "layer '%s': stem %d, expected %d", name, stems[li], want);
    }
    pdc_free(stems);
    pdc_model_destroy(m);
    /* a conv after a pooling, a reshape and a concat with a conv's output still sees the raw input;
     * one after a matmul by a constant does not */
    m = new_model("paths");
    add_input(m, "x", 4, (int64_t[]){1, 2, 8, 8});
    add_random(m, "w1", 4, (int64_t[]){2, 2, 3, 3}, 91, -1, 1);
    add_random(m, "w2", 4, (int64_t[]){2, 4, 3, 3}, 92, -1, 1);
    add_random(m, "mw", 2, (int64_t[]){8, 8}, 93, -1, 1);
    add_random(m, "w3", 4, (int64_t[]){2, 2, 3, 3}, 94, -1, 1);
    add_layer(m, "pool", "maxpool", "x", "p", opt_ints("kernel_shape", 2, (int64_t[]){1, 1}));
    add_layer(m, "c1", "conv", "p,w1", "y1", pads(1));
    add_layer(m, "cat", "concat", "p,y1", "q", opt_i("axis", 1));
    add_layer(m, "c2", "conv", "q,w2", "y2", pads(1));
    add_layer(m, "mm", "matmul", "x,mw", "u", NULL);
    add_layer(m, "c3", "conv", "u,w3", "y3", pads(1));
    add_output(m, "y2");
    add_output(m, "y3");
    ck_assert_ok(ctx, pass_find_stems(m, &stems));
    ck_assert_int_eq(stems[ir_model_find_layer(m, "c1")], 1);
    ck_assert_int_eq(stems[ir_model_find_layer(m, "c2")], 1);
    ck_assert_int_eq(stems[ir_model_find_layer(m, "c3")], 0);
    ck_assert_int_eq(stems[ir_model_find_layer(m, "pool")], 0); /* only convs are stems */
    pdc_free(stems);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(passes_report_progress_through_the_layers)
{
    typedef struct { char log[4096]; } plog;
    plog *pl = calloc(1, sizeof *pl);
    pdc_model *m = stem_model();
    ck_assert_ok(ctx, pdc_context_set_progress_handler(ctx, progress_log, pl->log));
    ck_assert_ok(ctx, transform(m, "prune-pattern,plan", NULL));
    ck_assert_ok(ctx, pdc_context_set_progress_handler(ctx, NULL, NULL));
    /* 11 layers: each pruning pass counts through them, the manager gives the start and the end */
    ck_assert_str_eq(pl->log, "prune-pattern 0/11, prune-pattern 1/11, prune-pattern 2/11, prune-pattern 3/11, "
                              "prune-pattern 4/11, prune-pattern 5/11, prune-pattern 6/11, prune-pattern 7/11, "
                              "prune-pattern 8/11, prune-pattern 9/11, prune-pattern 10/11, prune-pattern 11/11, "
                              "plan 0/11, plan 11/11, ");
    /* removed: nothing more is reported */
    pl->log[0] = '\0';
    ck_assert_ok(ctx, transform(m, "plan", NULL));
    ck_assert_str_eq(pl->log, "");
    pdc_model_destroy(m);
    free(pl);
}
END_TEST

int main(void)
{
    return run_tests("prune_defaults", ctx_setup, ctx_teardown, 60,
                     TEST_LIST(defaults_leave_the_stem_big_kernels_and_1x1_convs_dense,
                               listed_layers_override_the_defaults, stems_are_found_through_layers_without_weights,
                               passes_report_progress_through_the_layers));
}
