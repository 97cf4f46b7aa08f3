/*
 * cmd_prune.c - `pdc prune`: run pruning passes (or any pass pipeline) over a model with
 * pdc_model_transform and save the result; prints what the pruning did (weights kept, compression,
 * FLOP reduction) and, when the plan pass ran, the activation arena.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char cli_prune_synopsis[] =
    "pdc prune MODEL -o OUT.pdc|OUT.pdcir|OUT.onnx [--patterns K] [--pattern-size N] [--connectivity RATE] "
    "[--block RxC[:RATE]] [--unstructured RATE] [--layers NAME,...|--skip NAME,...] [--passes LIST] "
    "[--print-after PASS|all]";
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
    "Options:\n"
    "  -o, --output OUT         the file to write (required)\n"
    "  --patterns K             patterns per conv layer (default 8)\n"
    "  --pattern-size N         kept entries per pattern, centre included (default 4)\n"
    "  --connectivity RATE      share of each conv's kernels removed (default 0.5); per layer as\n"
    "                           RATE,LAYER=RATE,... e.g. 0.5,conv2=0.7\n"
    "  --block RxC[:RATE]       block pruning of fc / matmul / gemm / 1x1 conv / lstm / gru weights in\n"
    "                           RxC blocks of the [out, in] matrix, e.g. 1x4:0.8 (rate default 0.5)\n"
    "  --block-rate RATE        share of blocks removed (also RATE,LAYER=RATE,...)\n"
    "  --unstructured RATE      magnitude pruning of the weights still dense (also per layer)\n"
    "  --layers NAME,...        prune only these layers\n"
    "  --skip NAME,...          prune all eligible layers but these\n"
    "  --passes LIST            run this pass pipeline instead, e.g.\n"
    "                           canonicalize,prune-pattern,prune-connectivity,reorder,plan\n"
    "                           (passes: canonicalize, prune-pattern, prune-connectivity, prune-block,\n"
    "                           prune-unstructured, reorder, plan)\n"
    "  --print-after PASS|all   print the IR text (weights elided) to stderr after that pass\n"
    "  --shape NAME=DIMS        fix the shape of graph input NAME first; may be repeated\n"
    "  -h, --help               show this help\n"
    "\n"
    "Rates are in [0, 1). A bad option value, an unknown pass or a layer that is not in the model\n"
    "exits with status 2 and says which.\n";

enum {
    OPT_OUTPUT = 1, OPT_PATTERNS, OPT_PATTERN_SIZE, OPT_CONNECTIVITY, OPT_BLOCK, OPT_BLOCK_RATE, OPT_UNSTRUCTURED,
    OPT_LAYERS, OPT_SKIP, OPT_PASSES, OPT_PRINT_AFTER, OPT_SHAPE
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
                                     {"shape", 0, 1, OPT_SHAPE},
                                     {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("prune", cli_prune_synopsis, __VA_ARGS__)

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

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

static void print_summary(const char *out_path, const pdc_model *m)
{
    int k1, k2, k3, k4;
    int64_t w = total_stat(m, PDC_STAT_WEIGHTS, &k1), kept = total_stat(m, PDC_STAT_KEPT_WEIGHTS, &k2);
    int64_t dense = total_stat(m, PDC_STAT_DENSE_FLOPS, &k3), eff = total_stat(m, PDC_STAT_EFFECTIVE_FLOPS, &k4);
    printf("wrote %s\n", out_path);
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
    cli_parser_init(&p, argc, argv, "prune", cli_prune_synopsis, prune_opts);
    const char *model_path = NULL, *out_path = NULL, *passes = NULL;
    /* option name and value for pdc_model_transform, in command-line order */
    const char *names[32], *values[32];
    size_t n_opts = 0;
    int pattern_opts = 0, block = 0, unstructured = 0;
    cli_shape shapes[16];
    size_t n_shapes = 0;
    char err[512];

    for (;;) {
        const char *v;
        int id = cli_next(&p, &v);
        if (id == CLI_ARG_END) break;
        if (id == CLI_ARG_BAD) return CLI_EXIT_USAGE;
        if (id == CLI_ARG_HELP) {
            fputs(cli_prune_help, stdout);
            return CLI_EXIT_OK;
        }
        const char *name = NULL;
        switch (id) {
        case CLI_ARG_POSITIONAL:
            if (model_path) return USAGE("unexpected argument '%s'", v);
            model_path = v;
            break;
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
        case OPT_SHAPE:
            if (n_shapes == sizeof shapes / sizeof shapes[0]) return USAGE("too many --shape options (at most 16)");
            if (cli_parse_shape(v, &shapes[n_shapes], err, sizeof err) != 0) return USAGE("%s", err);
            n_shapes++;
            break;
        default: return USAGE("internal: unhandled option");
        }
        if (name) {
            for (size_t i = 0; i < n_opts; i++)
                if (!strcmp(names[i], name)) return USAGE("option for '%s' given twice", name);
            names[n_opts] = name;
            values[n_opts++] = v;
        }
    }
    if (!model_path) return USAGE("missing MODEL");
    if (!out_path) return USAGE("missing -o OUT");
    int text = ends_with(out_path, ".pdcir"), onnx = ends_with(out_path, ".onnx");
    if (!text && !onnx && !ends_with(out_path, ".pdc"))
        return USAGE("cannot tell the format of '%s': OUT must end in .pdc (binary), .pdcir (text) or .onnx",
                     out_path);

    char pipeline[256] = "";
    if (!passes) {
        if (pattern_opts || (!block && !unstructured)) strcat(pipeline, "prune-pattern,prune-connectivity,");
        if (block) strcat(pipeline, "prune-block,");
        if (unstructured) strcat(pipeline, "prune-unstructured,");
        pipeline[strlen(pipeline) - 1] = '\0';
        passes = pipeline;
    }

    pdc_context *ctx = NULL;
    if (cli_context_create(&ctx) != CLI_EXIT_OK) return CLI_EXIT_ERROR;
    pdc_model *model = NULL;
    pdc_attrs *opts = NULL;
    int rc = cli_load_model(ctx, model_path, shapes, n_shapes, &model);
    pdc_status st = PDC_OK;
    if (rc == CLI_EXIT_OK) {
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
        else print_summary(out_path, model);
    }
    pdc_attrs_destroy(opts);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
