/*
 * cmd_convert.c - `pdc convert`: re-save a model as binary .pdc or as IR text .pdcir, chosen by the
 * output file's extension.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char cli_convert_synopsis[] = "pdc convert MODEL -o OUT.pdc|OUT.pdcir|OUT.onnx|- [--elide-weights] [--shape NAME=DIMS]...";
const char cli_convert_help[] =
    "usage: pdc convert MODEL -o OUT.pdc|OUT.pdcir|OUT.onnx|- [--elide-weights] [--shape NAME=DIMS]...\n"
    "\n"
    "Loads MODEL (.pdc, .pdcir or .onnx) and saves it in the format named by OUT's extension: .pdc is\n"
    "the binary format (weights and sparsity kept, checksummed), .pdcir the IR text form, .onnx an\n"
    "ONNX model (weights as they are, pruned ones zero); '-' prints the text form to stdout. Files\n"
    "are written atomically (a failure leaves no partial file).\n"
    "\n"
    "Options:\n"
    "  -o, --output OUT   the file to write (required)\n"
    "  --elide-weights    text form only: write constants as dense<elided> (they read back as zeros)\n"
    "  --shape NAME=DIMS  fix the shape of graph input NAME before saving; may be repeated\n"
    "  -h, --help         show this help\n";

enum { OPT_OUTPUT = 1, OPT_ELIDE, OPT_SHAPE };
static const cli_opt convert_opts[] = {{"output", 'o', 1, OPT_OUTPUT},
                                       {"elide-weights", 0, 0, OPT_ELIDE},
                                       {"shape", 0, 1, OPT_SHAPE},
                                       {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("convert", cli_convert_synopsis, __VA_ARGS__)

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

enum { FMT_BINARY, FMT_TEXT, FMT_ONNX, FMT_STDOUT };

int cmd_convert(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "convert", cli_convert_synopsis, convert_opts);
    const char *model_path = NULL, *out_path = NULL;
    int elide = 0;
    cli_shape shapes[16];
    size_t n_shapes = 0;
    char err[512];

    for (;;) {
        const char *v;
        int id = cli_next(&p, &v);
        if (id == CLI_ARG_END) break;
        if (id == CLI_ARG_BAD) return CLI_EXIT_USAGE;
        if (id == CLI_ARG_HELP) {
            fputs(cli_convert_help, stdout);
            return CLI_EXIT_OK;
        }
        switch (id) {
        case CLI_ARG_POSITIONAL:
            if (model_path) return USAGE("unexpected argument '%s'", v);
            model_path = v;
            break;
        case OPT_OUTPUT:
            if (out_path) return USAGE("more than one -o OUT");
            out_path = v;
            break;
        case OPT_ELIDE: elide = 1; break;
        case OPT_SHAPE:
            if (n_shapes == sizeof shapes / sizeof shapes[0]) return USAGE("too many --shape options (at most 16)");
            if (cli_parse_shape(v, &shapes[n_shapes], err, sizeof err) != 0) return USAGE("%s", err);
            n_shapes++;
            break;
        default: return USAGE("internal: unhandled option");
        }
    }
    if (!model_path) return USAGE("missing MODEL");
    if (!out_path) return USAGE("missing -o OUT");

    int fmt;
    if (strcmp(out_path, "-") == 0) fmt = FMT_STDOUT;
    else if (ends_with(out_path, ".pdcir")) fmt = FMT_TEXT;
    else if (ends_with(out_path, ".pdc")) fmt = FMT_BINARY;
    else if (ends_with(out_path, ".onnx")) fmt = FMT_ONNX;
    else return USAGE("cannot tell the format of '%s': OUT must end in .pdc (binary), .pdcir (text) or .onnx, "
                      "or be '-'", out_path);
    if (elide && (fmt == FMT_BINARY || fmt == FMT_ONNX))
        return USAGE("--elide-weights applies only to text output (.pdcir or -)");

    pdc_context *ctx = NULL;
    if (cli_context_create(&ctx) != CLI_EXIT_OK) return CLI_EXIT_ERROR;
    pdc_model *model = NULL;
    int rc = cli_load_model(ctx, model_path, shapes, n_shapes, &model);
    if (rc == CLI_EXIT_OK) {
        uint32_t flags = elide ? PDC_PRINT_ELIDE_WEIGHTS : 0u;
        pdc_status st;
        if (fmt == FMT_STDOUT) {
            char *text = NULL;
            st = pdc_model_print(model, flags, &text);
            if (st == PDC_OK) {
                fputs(text, stdout);
                pdc_string_free(text);
            }
        } else if (fmt == FMT_TEXT) {
            st = pdc_model_save_text(model, out_path, flags);
        } else if (fmt == FMT_ONNX) {
            st = pdc_model_save_onnx(model, out_path);
        } else {
            st = pdc_model_save(model, out_path);
        }
        if (st != PDC_OK) rc = cli_lib_error(ctx, st, fmt == FMT_STDOUT ? model_path : out_path, NULL);
    }
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
