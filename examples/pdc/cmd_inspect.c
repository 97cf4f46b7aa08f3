/*
 * cmd_inspect.c - `pdc inspect`: one row per layer (shapes, sparsity, weights, FLOPs), totals, the
 * compression and FLOP reduction the sparsity gives, and the graph's inputs and outputs.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void print_pattern_sets(const pdc_model *model, size_t n_layers);

const char cli_inspect_synopsis[] = "pdc inspect MODEL [MODEL... --group] [--shape NAME=DIMS]... [--target T]";
const char cli_inspect_help[] =
    "usage: pdc inspect MODEL [MODEL... --group] [--shape NAME=DIMS]... [--target T]\n"
    "\n"
    "Prints the graph inputs and outputs, then one row per layer: index, name, op, shape of its first\n"
    "input and first output, sparsity, weights, kept weights, dense and effective MFLOPs (one run,\n"
    "multiply-add = 2 FLOPs), then the totals, the compression (total / kept weights) and the FLOP\n"
    "reduction (dense / effective FLOPs).\n"
    "With --target it then compiles the model for target T and lists, per layer, the kernel the\n"
    "target chose and why (e.g. \"jit pattern-sparse conv 3x3, 8 patterns, ...\" or \"ref fallback: ...\").\n"
    "With --group it inspects the group of the models as `pdc run --group` compiles it (model k's layers\n"
    "named \"k/NAME\") and first says what the group shares: layers computed once, weights, memory.\n"
    "\n"
    "Options:\n"
    "  --shape NAME=DIMS  fix the shape of graph input NAME, e.g. --shape image=1x3x224x224\n"
    "                     (needed when the model has symbolic dims); may be repeated\n"
    "  --target T         also compile for target T (ref, cpu, gpu or auto) and show each layer's kernel;\n"
    "                     auto says which target it chose and why\n"
    "                     \"6 of 8 patterns used\": the kernel needs only 6 patterns of the layer's set\n"
    "  --group            the models given are one group (pdc_compile_group)\n"
    CLI_MAX_MEMORY_HELP
    "  -h, --help         show this help\n";

enum { OPT_TARGET = 1 };
static const cli_opt inspect_opts[] = {{"shape", 0, 1, CLI_OPT_SHAPE}, {"max-memory", 0, 1, CLI_OPT_MAX_MEMORY},
                                       {"target", 0, 1, OPT_TARGET}, {"group", 0, 0, CLI_OPT_GROUP}, {NULL, 0, 0, 0}};

enum { COL_IDX, COL_NAME, COL_OP, COL_IN, COL_OUT, COL_SPARSITY, COL_W, COL_KEPT, COL_DFLOP, COL_EFLOP, N_COLS };
static const char *const col_title[N_COLS] = {"#",      "name",    "op",   "input",        "output",
                                              "sparsity", "weights", "kept", "dense MFLOPs", "eff. MFLOPs"};
static const int col_right[N_COLS] = {1, 0, 0, 0, 0, 0, 1, 1, 1, 1};

typedef struct row {
    const char *text[N_COLS];
    char num[N_COLS][40];   /* storage for the numeric columns */
    char *owned[5];         /* copies of the layer's text fields */
} row;

static const char *fmt_count(char *buf, size_t cap, int ok, int64_t v)
{
    if (!ok) snprintf(buf, cap, "?");
    else snprintf(buf, cap, "%" PRId64, v);
    return buf;
}

static const char *fmt_mflops(char *buf, size_t cap, int ok, int64_t v)
{
    if (!ok) snprintf(buf, cap, "?");
    else snprintf(buf, cap, "%.3f", (double)v / 1e6);
    return buf;
}

static void print_row(const row *r, const size_t *width)
{
    for (int c = 0; c < N_COLS; c++) {
        const char *t = r->text[c];
        int w = (int)width[c];
        if (c == N_COLS - 1 && !col_right[c]) printf("%s", t);
        else if (col_right[c]) printf("%*s", w, t);
        else printf("%-*s", w, t);
        printf(c == N_COLS - 1 ? "\n" : "  ");
    }
}

/* 1 if some graph input has a symbolic dim. */
static int has_symbolic_input(const pdc_model *model)
{
    size_t n = 0;
    if (pdc_model_num_inputs(model, &n) != PDC_OK) return 0;
    for (size_t i = 0; i < n; i++) {
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        if (pdc_model_input_info(model, i, NULL, &rank, dims) != PDC_OK) continue;
        for (size_t d = 0; d < rank; d++)
            if (dims[d] < 0) return 1;
    }
    return 0;
}

static void print_io(const pdc_model *model, int outputs, int symbolic)
{
    size_t n = 0;
    pdc_status st = outputs ? pdc_model_num_outputs(model, &n) : pdc_model_num_inputs(model, &n);
    printf("%s:\n", outputs ? "outputs" : "inputs");
    if (st != PDC_OK) {
        printf("  ?\n");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL;
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        char shape[160];
        st = outputs ? pdc_model_output_info(model, i, &name, &rank, dims)
                     : pdc_model_input_info(model, i, &name, &rank, dims);
        if (st != PDC_OK) printf("  %zu: ?\n", i);
        /* An output not yet inferred (it depends on a symbolic input) reads as rank 0. */
        else if (outputs && rank == 0 && symbolic) printf("  %-16s unknown until the symbolic inputs are fixed\n", name);
        else printf("  %-16s %s  f32\n", name, cli_format_shape(rank, dims, shape, sizeof shape));
    }
}

static double ratio(int64_t num, int64_t den) { return den > 0 ? (double)num / (double)den : 0.0; }

static int inspect_model(pdc_context *ctx, const char *path, const pdc_model *model)
{
    size_t n_layers = 0;
    pdc_status st = pdc_model_num_layers(model, &n_layers);
    if (st != PDC_OK) return cli_lib_error(ctx, st, path, NULL);

    row *rows = calloc(n_layers + 2, sizeof *rows);   /* header, layers, total */
    if (!rows) return cli_error(path, "out of memory for %zu layers", n_layers);

    int64_t tot[4] = {0, 0, 0, 0};   /* weights, kept, dense flops, effective flops */
    int tot_ok[4] = {1, 1, 1, 1};
    static const pdc_layer_stat stats[4] = {PDC_STAT_WEIGHTS, PDC_STAT_KEPT_WEIGHTS, PDC_STAT_DENSE_FLOPS,
                                            PDC_STAT_EFFECTIVE_FLOPS};
    static const pdc_layer_field fields[5] = {PDC_FIELD_NAME, PDC_FIELD_OP, PDC_FIELD_INPUT_SHAPE,
                                              PDC_FIELD_OUTPUT_SHAPE, PDC_FIELD_SPARSITY};

    for (int c = 0; c < N_COLS; c++) rows[0].text[c] = col_title[c];
    for (size_t i = 0; i < n_layers; i++) {
        row *r = &rows[i + 1];
        snprintf(r->num[COL_IDX], sizeof r->num[COL_IDX], "%zu", i);
        r->text[COL_IDX] = r->num[COL_IDX];
        for (int f = 0; f < 5; f++) {
            /* Copied at once: the borrowed text need not outlive the next call on the model. */
            const char *s = NULL;
            if (pdc_model_layer_string(model, i, fields[f], &s) != PDC_OK || !s) s = "?";
            r->owned[f] = strdup(s);
            r->text[COL_NAME + f] = r->owned[f] ? r->owned[f] : "?";
        }
        for (int s = 0; s < 4; s++) {
            int64_t v = 0;
            int ok = pdc_model_layer_stat(model, i, stats[s], &v) == PDC_OK;
            if (ok) tot[s] += v;
            else tot_ok[s] = 0;
            int col = COL_W + s;
            r->text[col] = s < 2 ? fmt_count(r->num[col], sizeof r->num[col], ok, v)
                                 : fmt_mflops(r->num[col], sizeof r->num[col], ok, v);
        }
    }
    row *t = &rows[n_layers + 1];
    for (int c = 0; c < N_COLS; c++) t->text[c] = "";
    t->text[COL_NAME] = "total";
    for (int s = 0; s < 4; s++) {
        int col = COL_W + s;
        /* A total over layers with unknown statistics is a lower bound: mark it with ">=". */
        char v[32];
        if (s < 2) fmt_count(v, sizeof v, 1, tot[s]);
        else fmt_mflops(v, sizeof v, 1, tot[s]);
        snprintf(t->num[col], sizeof t->num[col], "%s%s", tot_ok[s] ? "" : ">=", v);
        t->text[col] = t->num[col];
    }

    size_t width[N_COLS] = {0};
    for (size_t i = 0; i < n_layers + 2; i++)
        for (int c = 0; c < N_COLS; c++) {
            size_t len = strlen(rows[i].text[c]);
            if (len > width[c]) width[c] = len;
        }

    int symbolic = has_symbolic_input(model);
    printf("model: %s (%zu layer%s)\n", path, n_layers, n_layers == 1 ? "" : "s");
    print_io(model, 0, symbolic);
    print_io(model, 1, symbolic);
    printf("\n");
    print_row(&rows[0], width);
    size_t line = 0;
    for (int c = 0; c < N_COLS; c++) line += width[c] + (c ? 2 : 0);
    for (size_t i = 0; i < line; i++) putchar('-');
    putchar('\n');
    for (size_t i = 1; i <= n_layers; i++) print_row(&rows[i], width);
    for (size_t i = 0; i < line; i++) putchar('-');
    putchar('\n');
    print_row(t, width);
    printf("\n");

    if (tot[0] == 0) printf("compression: n/a (no weights)");
    else if (tot[1] == 0) printf("compression: all weights pruned (0/%" PRId64 " kept)", tot[0]);
    else printf("compression: %.2fx (%" PRId64 "/%" PRId64 " weights kept)", ratio(tot[0], tot[1]), tot[1], tot[0]);
    if (tot[2] == 0 || tot[3] == 0) printf(", FLOP reduction: n/a\n");
    else if (tot[2] < 1000000)
        printf(", FLOP reduction: %.2fx (%" PRId64 " -> %" PRId64 " FLOPs)\n", ratio(tot[2], tot[3]), tot[2], tot[3]);
    else
        printf(", FLOP reduction: %.2fx (%.3f -> %.3f MFLOPs)\n", ratio(tot[2], tot[3]), (double)tot[2] / 1e6,
               (double)tot[3] / 1e6);
    if (!tot_ok[0] || !tot_ok[1] || !tot_ok[2] || !tot_ok[3])
        printf("note: '?' marks statistics pdc could not compute\n");
    print_pattern_sets(model, n_layers);
    if (symbolic)
        printf("note: the model has symbolic input dims; layers whose shapes depend on them show no\n"
               "      statistics. Fix the dims with --shape NAME=DIMS.\n");

    for (size_t i = 0; i < n_layers + 2; i++)
        for (int f = 0; f < 5; f++) free(rows[i].owned[f]);
    free(rows);
    return CLI_EXIT_OK;
}

/* Prints each pattern-sparse layer's pattern set: the bitmasks (bit p = row*kw + col; for a 3-D
 * window (depth*kh + row)*kw + col) and, for windows up to 5x5 (5x5x5), the patterns drawn side by
 * side ('#' kept, '.' pruned; a 3-D pattern as its depth slices joined by '|'). */
static void print_pattern_sets(const pdc_model *model, size_t n_layers)
{
    int header = 0;
    for (size_t i = 0; i < n_layers; i++) {
        const char *pats = NULL, *name = NULL;
        if (pdc_model_layer_string(model, i, PDC_FIELD_PATTERNS, &pats) != PDC_OK || !pats || !*pats) continue;
        char *copy = strdup(pats);
        if (!copy || pdc_model_layer_string(model, i, PDC_FIELD_NAME, &name) != PDC_OK) {
            free(copy);
            continue;
        }
        if (!header++) printf("\npattern sets (bit p = row*kw + col):\n");
        printf("  %s: %s\n", name, copy);
        int kd = 1, kh = 0, kw = 0, off = 0;
        unsigned long long mask[64];
        int n = 0;
        if (sscanf(copy, "%dx%dx%d%n", &kd, &kh, &kw, &off) != 3) {
            kd = 1;
            if (sscanf(copy, "%dx%d%n", &kh, &kw, &off) != 2) kh = 0;
        }
        if (kd > 0 && kd <= 5 && kh > 0 && kw > 0 && kh <= 5 && kw <= 5 && !strchr(copy, ';')) {
            const char *q = copy + off;
            int used;
            while (n < 64 && sscanf(q, " 0x%llx%n", &mask[n], &used) == 1) {
                q += used;
                n++;
            }
            for (int r = 0; r < kh; r++) {
                printf("   ");
                for (int k = 0; k < n; k++) {
                    printf("  ");
                    for (int d = 0; d < kd; d++) {
                        if (d) putchar('|');
                        for (int c = 0; c < kw; c++) putchar(mask[k] >> ((d * kh + r) * kw + c) & 1 ? '#' : '.');
                    }
                }
                putchar('\n');
            }
        }
        free(copy);
    }
}

/* Number of patterns in layer i's (first) pattern set, from its PDC_FIELD_PATTERNS text "3x3 0x1b 0x36 ...";
 * 0 if it has none. */
static size_t pattern_set_size(const pdc_model *model, size_t i)
{
    const char *pats = NULL;
    if (pdc_model_layer_string(model, i, PDC_FIELD_PATTERNS, &pats) != PDC_OK || !pats) return 0;
    size_t n = 0;
    for (const char *q = pats; *q && *q != ';'; q++) n += q[0] == '0' && q[1] == 'x';
    return n;
}

/* The kernel description, with "N patterns" said as "N of M patterns used" when the kernel uses fewer
 * patterns than the layer's set above lists (kernels no filter keeps after connectivity pruning). */
static void describe_kernel(const char *kernel, size_t set_size, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", kernel);
    if (!set_size) return;
    const char *at = kernel, *num = NULL;
    while ((at = strstr(at, " pattern"))) { /* the first " pattern" after a number */
        num = at;
        while (num > kernel && num[-1] >= '0' && num[-1] <= '9') num--;
        if (num < at && (num == kernel || num[-1] == ' ')) break;
        at++;
    }
    if (!at) return;
    size_t used = (size_t)strtoull(num, NULL, 10);
    const char *rest = at + strlen(" pattern");
    if (*rest == 's') rest++;
    if (used >= set_size) return; /* more: a 3-D set's kernel counts its 2-D depth slices */
    snprintf(buf, cap, "%.*s%zu of %zu patterns used%s", (int)(num - kernel), kernel, used, set_size, rest);
}

/* The PDC_NOTE_TARGET_CHOSEN text of a compile for target "auto". */
static char chosen[1024];
static void keep_choice(void *user, pdc_note_kind kind, const char *pass, const char *layer, const char *text)
{
    (void)user;
    (void)pass;
    (void)layer;
    if (kind == PDC_NOTE_TARGET_CHOSEN) snprintf(chosen, sizeof chosen, "%s", text);
}

/* Compiles the model for target and prints the kernel of every layer (and, for "auto", the target
 * chosen and why). */
static int print_kernels(pdc_context *ctx, const char *path, const pdc_model *model, const char *target)
{
    pdc_program *prog = NULL;
    pdc_context_set_note_handler(ctx, keep_choice, NULL);
    pdc_status st = pdc_compile(ctx, model, target, &prog);
    pdc_context_set_note_handler(ctx, NULL, NULL);
    if (st != PDC_OK) return cli_lib_error(ctx, st, path, "compile");
    if (chosen[0]) printf("\ntarget %s %s\n", target, chosen);
    size_t n = 0, width = 4;
    pdc_program_num_layers(prog, &n);
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL;
        if (pdc_program_layer_kernel(prog, i, &name, NULL) == PDC_OK && strlen(name) > width) width = strlen(name);
    }
    printf("\nkernels (target %s):\n", target);
    for (size_t i = 0; i < n; i++) {
        const char *name = "?", *kernel = "?";
        char text[1024];
        pdc_program_layer_kernel(prog, i, &name, &kernel);
        describe_kernel(kernel, pattern_set_size(model, i), text, sizeof text);
        printf("  %3zu  %-*s  %s\n", i, (int)width, name, text);
    }
    pdc_program_destroy(prog);
    return CLI_EXIT_OK;
}

int cmd_inspect(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "inspect", cli_inspect_synopsis, cli_inspect_help, inspect_opts);
    cli_model_args a = {0};
    const char *target = NULL, *v;
    int id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0)
        if (id == OPT_TARGET) target = v;
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    const char *model_path = a.path;
    if (!model_path) return cli_usage_error("inspect", cli_inspect_synopsis, "missing MODEL");

    pdc_context *ctx = NULL;
    pdc_model *model = NULL;
    char summary[512];
    int rc = cli_context_create(&ctx);
    if (rc == CLI_EXIT_OK) rc = cli_load_models(ctx, &a, &model, summary, sizeof summary);
    if (rc == CLI_EXIT_OK && summary[0]) printf("%s\n\n", summary);
    if (rc == CLI_EXIT_OK) rc = inspect_model(ctx, model_path, model);
    if (rc == CLI_EXIT_OK && target) rc = print_kernels(ctx, model_path, model, target);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
