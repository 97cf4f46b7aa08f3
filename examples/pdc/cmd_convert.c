/*
 * cmd_convert.c - `pdc convert`: re-save a model as binary .pdc or as IR text .pdcir, chosen by the
 * output file's extension.
 */
#include <errno.h>
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
    CLI_MAX_MEMORY_HELP
    "  -h, --help         show this help\n";

enum { OPT_OUTPUT = 1, OPT_ELIDE };
static const cli_opt convert_opts[] = {{"output", 'o', 1, OPT_OUTPUT},
                                       {"elide-weights", 0, 0, OPT_ELIDE},
                                       {"shape", 0, 1, CLI_OPT_SHAPE}, {"max-memory", 0, 1, CLI_OPT_MAX_MEMORY},
                                       {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("convert", cli_convert_synopsis, __VA_ARGS__)

enum { FMT_BINARY, FMT_TEXT, FMT_ONNX, FMT_STDOUT };

int cmd_convert(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "convert", cli_convert_synopsis, cli_convert_help, convert_opts);
    cli_model_args a = {0};
    const char *out_path = NULL, *v;
    int elide = 0, id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0) {
        switch (id) {
        case OPT_OUTPUT:
            if (out_path) return USAGE("more than one -o OUT");
            out_path = v;
            break;
        case OPT_ELIDE: elide = 1; break;
        default: return USAGE("internal: unhandled option");
        }
    }
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    const char *model_path = a.path;
    if (!model_path) return USAGE("missing MODEL");
    if (!out_path) return USAGE("missing -o OUT");

    int fmt;
    if (strcmp(out_path, "-") == 0) fmt = FMT_STDOUT;
    else if (cli_ends_with(out_path, ".pdcir")) fmt = FMT_TEXT;
    else if (cli_ends_with(out_path, ".pdc")) fmt = FMT_BINARY;
    else if (cli_ends_with(out_path, ".onnx")) fmt = FMT_ONNX;
    else return USAGE("cannot tell the format of '%s': OUT must end in .pdc (binary), .pdcir (text) or .onnx, "
                      "or be '-'", out_path);
    if (elide && (fmt == FMT_BINARY || fmt == FMT_ONNX))
        return USAGE("--elide-weights applies only to text output (.pdcir or -)");

    pdc_context *ctx;
    pdc_model *model;
    int rc = cli_open_model(&a, &ctx, &model);
    if (rc == CLI_EXIT_OK) {
        uint32_t flags = elide ? PDC_PRINT_ELIDE_WEIGHTS : 0u;
        pdc_status st;
        if (fmt == FMT_STDOUT) {
            char *text = NULL;
            st = pdc_model_print(model, flags, &text);
            if (st == PDC_OK) {
                int bad = fputs(text, stdout) < 0 || fflush(stdout) != 0;
                int e = errno;
                pdc_string_free(text);
                if (bad) {
                    pdc_model_destroy(model);
                    pdc_context_destroy(ctx);
                    return cli_error("<stdout>", "write error: %s", strerror(e));
                }
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
