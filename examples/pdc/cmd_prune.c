/*
 * cmd_prune.c - `pdc prune`: run pruning passes (or any pass pipeline) over a model with
 * pdc_model_transform and save the result; prints, per layer, what the pruning did and which layers
 * the safe defaults left alone (from the library's notes, pdc_context_set_note_handler), then the
 * weights kept, compression, FLOP reduction and, when the plan pass ran, the activation arena.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cli_prune_synopsis[] =
    "pdc prune MODEL -o OUT.pdc|OUT.pdcir|OUT.onnx [--patterns K] [--pattern-size N] [--connectivity RATE] "
    "[--block RxC[:RATE]] [--unstructured RATE] [--layers NAME,...|--skip NAME,...] [--include-stem] "
    "[--pattern-kernels LIST] [--block-convs] [--passes LIST] [--print-after PASS|all]";
const char cli_prune_help[] =
    "usage: pdc prune MODEL -o OUT.pdc|OUT.pdcir|OUT.onnx [OPTIONS]\n"
    "\n"
    "Prunes MODEL (.pdc, .pdcir or .onnx) and saves it in the format named by OUT's extension: .pdc\n"
    "binary, .pdcir text, or .onnx - the same graph with the same initializer names and the pruned\n"
    "weights (zeros), to fine-tune or evaluate in another framework. Without --passes the pipeline follows the options: pattern pruning\n"
    "(prune-pattern,prune-connectivity) unless only --block / --unstructured are given, then\n"
    "prune-block for --block and prune-unstructured for --unstructured. Pruning is deterministic:\n"
    "the same input and options give a byte-identical file.\n"
    "\n"
    "Safe defaults: the stem (a conv that reads the graph input, directly or through layers without\n"
    "weights) stays dense, pattern and connectivity pruning take 3x3 convs only, and block pruning\n"
    "takes no 1x1 convs; --include-stem, --pattern-kernels and --block-convs change that, and a layer\n"
    "named in --layers is pruned whatever they say. pdc prune prints each layer it pruned (how, and\n"
    "the share of its weights kept) and each layer a default left alone, with the option that prunes it.\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT         the file to write (required)\n"
    "  --patterns K             patterns per conv layer (default 8)\n"
    "  --pattern-size N         kept entries per pattern, centre included (default 4)\n"
    "  --connectivity RATE      share of each conv's kernels removed (default 0.5); per layer as\n"
    "                           RATE,LAYER=RATE,... e.g. 0.5,conv2=0.7\n"
    "  --block RxC[:RATE]       block pruning of fc / matmul / gemm / lstm / gru weights (and 1x1 convs\n"
    "                           with --block-convs) in RxC blocks of the [out, in] matrix, e.g. 1x4:0.8\n"
    "                           (rate default 0.5)\n"
    "  --block-rate RATE        share of blocks removed (also RATE,LAYER=RATE,...)\n"
    "  --unstructured RATE      magnitude pruning of the weights still dense (also per layer)\n"
    "  --layers NAME,...        prune only these layers (the defaults below do not apply to them)\n"
    "  --skip NAME,...          prune all eligible layers but these\n"
    "  --include-stem           prune the stem too (default: left dense)\n"
    "  --pattern-kernels LIST   conv kernel sizes pattern and connectivity pruning take, e.g.\n"
    "                           3x3,5x5,7x7,3x3x3, or all (default 3x3)\n"
    "  --block-convs            block pruning takes 1x1 convs too\n"
    "  --passes LIST            run this pass pipeline instead, e.g.\n"
    "                           canonicalize,prune-pattern,prune-connectivity,reorder,plan\n"
    "                           (passes: canonicalize, prune-pattern, prune-connectivity, prune-kgs,\n"
    "                           prune-block, prune-bcr, prune-unstructured, reorder, share, schedule, plan)\n"
    "  --print-after PASS|all   print the IR text (weights elided) to stderr after that pass\n"
    "  --shape NAME=DIMS        fix the shape of graph input NAME first; may be repeated\n"
    "  --max-memory BYTES       the largest single allocation (suffix K, M, G; 0 = no limit; default 4G,\n"
    "                           or $PDC_MAX_MEMORY): larger tensors and files are refused up front\n"
    "  -h, --help               show this help\n"
    "\n"
    "Rates are in [0, 1). A bad option value, an unknown pass or a layer that is not in the model\n"
    "exits with status 2 and says which. On a terminal, a counter on stderr shows the passes'\n"
    "progress through the layers.\n";

enum {
    OPT_OUTPUT = 1, OPT_PATTERNS, OPT_PATTERN_SIZE, OPT_CONNECTIVITY, OPT_BLOCK, OPT_BLOCK_RATE, OPT_UNSTRUCTURED,
    OPT_LAYERS, OPT_SKIP, OPT_PASSES, OPT_PRINT_AFTER, OPT_INCLUDE_STEM, OPT_PATTERN_KERNELS,
    OPT_BLOCK_CONVS
};
static const cli_opt prune_opts[] = {{"output", 'o', 1, OPT_OUTPUT},
                                     {"patterns", 0, 1, OPT_PATTERNS},
                                     {"pattern-size", 0, 1, OPT_PATTERN_SIZE},
                                     {"connectivity", 0, 1, OPT_CONNECTIVITY},
                                     {"block", 0, 1, OPT_BLOCK},
                                     {"block-rate", 0, 1, OPT_BLOCK_RATE},
                                     {"unstructured", 0, 1, OPT_UNSTRUCTURED},
                                     {"layers", 0, 1, OPT_LAYERS},
                                     {"skip", 0, 1, OPT_SKIP},
                                     {"passes", 0, 1, OPT_PASSES},
                                     {"print-after", 0, 1, OPT_PRINT_AFTER},
                                     {"shape", 0, 1, CLI_OPT_SHAPE}, {"max-memory", 0, 1, CLI_OPT_MAX_MEMORY},
                                     {"include-stem", 0, 0, OPT_INCLUDE_STEM},
                                     {"pattern-kernels", 0, 1, OPT_PATTERN_KERNELS},
                                     {"block-convs", 0, 0, OPT_BLOCK_CONVS},
                                     {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("prune", cli_prune_synopsis, __VA_ARGS__)

/* Model totals of a statistic (0 if a layer does not know it, e.g. FLOPs with symbolic shapes). */
static int64_t total_stat(const pdc_model *m, pdc_layer_stat stat, int *known)
{
    size_t n = 0;
    int64_t sum = 0;
    *known = pdc_model_num_layers(m, &n) == PDC_OK;
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (pdc_model_layer_stat(m, i, stat, &v) != PDC_OK) *known = 0;
        else sum += v;
    }
    return sum;
}

/* ------------------------------------------------------------------ what each layer got */

/* One note of the passes (pdc_note_handler), copied. */
typedef struct prune_note {
    pdc_note_kind kind;
    char *layer, *text;
} prune_note;

typedef struct prune_notes {
    prune_note *items;
    size_t n, cap;
    int failed; /* out of memory: the per-layer report is left out */
} prune_notes;

static void on_note(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    prune_notes *ns = user;
    (void)pass;
    if (ns->failed) return;
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? 2 * ns->cap : 64;
        prune_note *items = realloc(ns->items, cap * sizeof *items);
        if (!items) {
            ns->failed = 1;
            return;
        }
        ns->items = items;
        ns->cap = cap;
    }
    prune_note *e = &ns->items[ns->n];
    e->kind = kind;
    e->layer = strdup(layer);
    e->text = strdup(text);
    if (!e->layer || !e->text) {
        free(e->layer);
        free(e->text);
        ns->failed = 1;
        return;
    }
    ns->n++;
}

static void notes_free(prune_notes *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        free(ns->items[i].layer);
        free(ns->items[i].text);
    }
    free(ns->items);
}

/* Appends "sep" + text to buf unless buf already holds text. */
static void append_once(char *buf, size_t cap, const char *sep, const char *text)
{
    size_t n = strlen(buf);
    if (strstr(buf, text)) return;
    snprintf(buf + n, cap - n, "%s%s", n ? sep : "", text);
}

/* Why a default left a layer alone, with the pdc prune flag that prunes it. */
static void skip_reason(const prune_note *e, const char *pattern_kernels, char *buf, size_t cap)
{
    char size[32];
    switch (e->kind) {
    case PDC_NOTE_SKIPPED_STEM: snprintf(buf, cap, "stem: reads the graph input; --include-stem prunes it"); return;
    case PDC_NOTE_SKIPPED_BLOCK_CONV: snprintf(buf, cap, "1x1 conv: --block-convs prunes it"); return;
    case PDC_NOTE_SKIPPED_KERNEL:
        /* the text starts with the size, "KHxKW kernels: " or "KDxKHxKW kernels: " (pdc.h) */
        if (sscanf(e->text, "%31[0-9x] kernels", size) == 1) {
            snprintf(buf, cap, "%s kernels: --pattern-kernels %s,%s prunes them", size, pattern_kernels, size);
            return;
        }
        break;
    default: break;
    }
    snprintf(buf, cap, "%s", e->text);
}

/* One line per layer the passes pruned (how; kept/weights) and per layer a default left alone (why). */
static void print_layers(const pdc_model *m, const prune_notes *ns, const char *pattern_kernels)
{
    size_t n_layers = 0;
    if (ns->failed || !ns->n || pdc_model_num_layers(m, &n_layers) != PDC_OK) return;
    char (*what)[512] = calloc(n_layers ? n_layers : 1, sizeof *what);
    char (*why)[512] = calloc(n_layers ? n_layers : 1, sizeof *why);
    char **names = calloc(n_layers ? n_layers : 1, sizeof *names);
    int width = 0, pruned = 0, skipped = 0;
    for (size_t i = 0; what && why && names && i < n_layers; i++) {
        const char *name = NULL;
        if (pdc_model_layer_string(m, i, PDC_FIELD_NAME, &name) != PDC_OK || !(names[i] = strdup(name))) continue;
        for (size_t k = 0; k < ns->n; k++) {
            const prune_note *e = &ns->items[k];
            if (strcmp(e->layer, names[i])) continue;
            if (e->kind == PDC_NOTE_PRUNED) {
                append_once(what[i], sizeof what[i], " + ", e->text);
            } else {
                char reason[256];
                skip_reason(e, pattern_kernels, reason, sizeof reason);
                append_once(why[i], sizeof why[i], "; ", reason);
            }
        }
        if (what[i][0]) pruned++;
        else if (why[i][0]) skipped++;
        if ((what[i][0] || why[i][0]) && (int)strlen(names[i]) > width) width = (int)strlen(names[i]);
    }
    int wwidth = 0;
    for (size_t i = 0; what && names && i < n_layers; i++)
        if (names[i] && (int)strlen(what[i]) > wwidth) wwidth = (int)strlen(what[i]);
    if (pruned) printf("pruned %d layer%s:\n", pruned, pruned == 1 ? "" : "s");
    for (size_t i = 0; pruned && i < n_layers; i++) {
        if (!names[i] || !what[i][0]) continue;
        int64_t w = 0, kept = 0;
        printf("  %-*s  %-*s", width, names[i], wwidth, what[i]);
        if (pdc_model_layer_stat(m, i, PDC_STAT_WEIGHTS, &w) == PDC_OK &&
            pdc_model_layer_stat(m, i, PDC_STAT_KEPT_WEIGHTS, &kept) == PDC_OK && w > 0)
            printf("  kept %" PRId64 "/%" PRId64 " (%.1f%%)", kept, w, 100.0 * (double)kept / (double)w);
        printf("\n");
    }
    if (skipped) printf("left alone by the defaults (%d layer%s):\n", skipped, skipped == 1 ? "" : "s");
    for (size_t i = 0; skipped && i < n_layers; i++)
        if (names[i] && !what[i][0] && why[i][0]) printf("  %-*s  %s\n", width, names[i], why[i]);
    for (size_t i = 0; names && i < n_layers; i++) free(names[i]);
    free(names);
    free(what);
    free(why);
}

static void print_summary(const pdc_model *m)
{
    int k1, k2, k3, k4;
    int64_t w = total_stat(m, PDC_STAT_WEIGHTS, &k1), kept = total_stat(m, PDC_STAT_KEPT_WEIGHTS, &k2);
    int64_t dense = total_stat(m, PDC_STAT_DENSE_FLOPS, &k3), eff = total_stat(m, PDC_STAT_EFFECTIVE_FLOPS, &k4);
    if (k1 && k2)
        printf("weights: %" PRId64 " of %" PRId64 " kept (compression %.2fx)\n", kept, w,
               kept ? (double)w / (double)kept : 0.0);
    if (k3 && k4)
        printf("FLOPs: %.3f M effective of %.3f M dense (reduction %.2fx)\n", (double)eff / 1e6, (double)dense / 1e6,
               eff ? (double)dense / (double)eff : 0.0);
    size_t arena, total;
    if (pdc_model_memory_plan(m, &arena, &total) == PDC_OK)
        printf("memory plan: activation arena %zu bytes (activations %zu bytes unplanned)\n", arena, total);
}

int cmd_prune(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "prune", cli_prune_synopsis, cli_prune_help, prune_opts);
    cli_model_args a = {0};
    const char *out_path = NULL, *passes = NULL, *v;
    /* option name and value for pdc_model_transform, in command-line order */
    const char *names[32], *values[32];
    size_t n_opts = 0;
    int pattern_opts = 0, block = 0, block_convs = 0, unstructured = 0;
    const char *pattern_kernels = "3x3"; /* for the hint on layers the default kernel sizes left alone */
    int id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0) {
        const char *name = NULL;
        switch (id) {
        case OPT_OUTPUT:
            if (out_path) return USAGE("more than one -o OUT");
            out_path = v;
            break;
        case OPT_PASSES:
            if (passes) return USAGE("more than one --passes");
            passes = v;
            break;
        case OPT_PATTERNS: name = "patterns", pattern_opts = 1; break;
        case OPT_PATTERN_SIZE: name = "pattern_size", pattern_opts = 1; break;
        case OPT_CONNECTIVITY: name = "connectivity", pattern_opts = 1; break;
        case OPT_BLOCK: name = "block", block = 1; break;
        case OPT_BLOCK_RATE: name = "block_rate", block = 1; break;
        case OPT_UNSTRUCTURED: name = "unstructured_rate", unstructured = 1; break;
        case OPT_LAYERS: name = "layers"; break;
        case OPT_SKIP: name = "skip"; break;
        case OPT_PRINT_AFTER: name = "print_after"; break;
        case OPT_INCLUDE_STEM: name = "include_stem", v = "1"; break;
        case OPT_PATTERN_KERNELS: name = "pattern_kernels", pattern_opts = 1, pattern_kernels = v; break;
        case OPT_BLOCK_CONVS: name = "block_convs", v = "1", block_convs = 1; break;
        default: return USAGE("internal: unhandled option");
        }
        if (name) {
            for (size_t i = 0; i < n_opts; i++)
                if (!strcmp(names[i], name)) return USAGE("option for '%s' given twice", name);
            names[n_opts] = name;
            values[n_opts++] = v;
        }
    }
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    const char *model_path = a.path;
    if (!model_path) return USAGE("missing MODEL");
    if (!out_path) return USAGE("missing -o OUT");
    int text = cli_ends_with(out_path, ".pdcir"), onnx = cli_ends_with(out_path, ".onnx");
    if (!text && !onnx && !cli_ends_with(out_path, ".pdc"))
        return USAGE("cannot tell the format of '%s': OUT must end in .pdc (binary), .pdcir (text) or .onnx",
                     out_path);

    if (block_convs && !block && !passes)
        return USAGE("--block-convs lets --block take 1x1 convs: give --block RxC[:RATE] too");
    char pipeline[256] = "";
    if (!passes) {
        if (pattern_opts || (!block && !unstructured)) strcat(pipeline, "prune-pattern,prune-connectivity,");
        if (block) strcat(pipeline, "prune-block,");
        if (unstructured) strcat(pipeline, "prune-unstructured,");
        pipeline[strlen(pipeline) - 1] = '\0';
        passes = pipeline;
    }

    pdc_context *ctx;
    pdc_model *model;
    pdc_attrs *opts = NULL;
    prune_notes notes = {NULL, 0, 0, 0};
    int rc = cli_open_model(&a, &ctx, &model); /* loading gives no notes: the handler comes after */
    pdc_status st = PDC_OK;
    if (rc == CLI_EXIT_OK) {
        pdc_context_set_note_handler(ctx, on_note, &notes);
        st = pdc_attrs_create(ctx, &opts);
        for (size_t i = 0; i < n_opts && st == PDC_OK; i++) st = pdc_attrs_set_string(opts, names[i], values[i]);
        if (st != PDC_OK) rc = cli_lib_error(ctx, st, model_path, NULL);
    }
    if (rc == CLI_EXIT_OK) {
        st = pdc_model_transform(model, passes, opts);
        if (st == PDC_ERR_INVALID_ARG || st == PDC_ERR_NOT_FOUND)
            rc = USAGE("%s", pdc_context_last_error(ctx)); /* the options did not fit the model */
        else if (st != PDC_OK)
            rc = cli_lib_error(ctx, st, model_path, NULL);
    }
    if (rc == CLI_EXIT_OK) {
        st = text ? pdc_model_save_text(model, out_path, 0)
                  : onnx ? pdc_model_save_onnx(model, out_path) : pdc_model_save(model, out_path);
        if (st != PDC_OK) rc = cli_lib_error(ctx, st, out_path, NULL);
        else {
            printf("wrote %s\n", out_path);
            print_layers(model, &notes, pattern_kernels);
            print_summary(model);
        }
    }
    notes_free(&notes);
    pdc_attrs_destroy(opts);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
