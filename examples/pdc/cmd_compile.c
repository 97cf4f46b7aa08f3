/*
 * cmd_compile.c - `pdc compile`: ahead-of-time code for another machine (pdc_model_emit): an
 * AArch64 static library and header, or PTX text. Lists the files written with their sizes.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

const char cli_compile_synopsis[] =
    "pdc compile MODEL --target aarch64-linux-gnu|nvptx [--cpu CPU] [--arch SM] [--name NAME] "
    "[--shape NAME=DIMS]... -o DIR";
const char cli_compile_help[] =
    "usage: pdc compile MODEL --target aarch64-linux-gnu|nvptx [--cpu CPU] [--arch SM] [--name NAME]\n"
    "                   [--shape NAME=DIMS]... -o DIR\n"
    "\n"
    "Compiles MODEL (.pdc, .pdcir or .onnx) ahead of time for another machine and writes the result\n"
    "into DIR (created if missing). Nothing is left half-written: on an error DIR gets no new files.\n"
    "\n"
    "  aarch64-linux-gnu  NAME.h and libNAME.a: AArch64 code (NEON), packed weights and runtime; link it\n"
    "                     into a program for the device with aarch64-linux-gnu-gcc (needs only libc)\n"
    "  nvptx              NAME.ptx (PTX text, one .entry per kernel) and NAME.launch.txt (launch order\n"
    "                     and grid sizes), for inspection or use with the CUDA driver API\n"
    "\n"
    "Options:\n"
    "  -t, --target T     aarch64-linux-gnu or nvptx (required)\n"
    "  --cpu CPU          aarch64: generic (default), cortex-a53, cortex-a55, cortex-a72, cortex-a76,\n"
    "                     neoverse-n1\n"
    "  --arch SM          nvptx: sm_75, sm_80 (default), sm_86, sm_89, sm_90\n"
    "  --name NAME        C identifier naming the files and symbols (default: model)\n"
    "  --shape NAME=DIMS  fix the shape of graph input NAME first; may be repeated\n"
    "  -o, --output DIR   the directory to write (required)\n"
    CLI_MAX_MEMORY_HELP
    "  -h, --help         show this help\n";

enum { OPT_OUTPUT = 1, OPT_TARGET, OPT_CPU, OPT_ARCH, OPT_NAME };
static const cli_opt compile_opts[] = {{"output", 'o', 1, OPT_OUTPUT}, {"target", 't', 1, OPT_TARGET},
                                       {"cpu", 0, 1, OPT_CPU},         {"arch", 0, 1, OPT_ARCH},
                                       {"name", 0, 1, OPT_NAME},       {"shape", 0, 1, CLI_OPT_SHAPE}, {"max-memory", 0, 1, CLI_OPT_MAX_MEMORY},
                                       {NULL, 0, 0, 0}};

#define USAGE(...) cli_usage_error("compile", cli_compile_synopsis, __VA_ARGS__)

/* Files NAME.* and libNAME.* in dir, with their sizes. */
static void list_outputs(const char *dir, const char *name)
{
    DIR *d = opendir(dir);
    if (!d) return;
    size_t n = strlen(name);
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *f = e->d_name;
        const char *rest = !strncmp(f, "lib", 3) && !strncmp(f + 3, name, n) ? f + 3 + n : !strncmp(f, name, n) ? f + n : NULL;
        if (!rest || *rest != '.') continue;
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, f);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) printf("  %-32s %10lld bytes\n", path, (long long)sb.st_size);
    }
    closedir(d);
}

int cmd_compile(int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "compile", cli_compile_synopsis, cli_compile_help, compile_opts);
    cli_model_args a = {0};
    const char *dir = NULL, *target = NULL, *cpu = NULL, *arch = NULL, *name = NULL, *v;
    int id;
    while ((id = cli_next_model_arg(&p, &a, &v)) > 0) {
        switch (id) {
        case OPT_OUTPUT: dir = v; break;
        case OPT_TARGET: target = v; break;
        case OPT_CPU: cpu = v; break;
        case OPT_ARCH: arch = v; break;
        case OPT_NAME: name = v; break;
        default: return USAGE("internal: unhandled option");
        }
    }
    if (id != CLI_ARG_END) return cli_arg_exit(id);
    const char *model_path = a.path;
    if (!model_path) return USAGE("missing MODEL");
    if (!target) return USAGE("missing --target (aarch64-linux-gnu or nvptx)");
    if (!dir) return USAGE("missing -o DIR");

    pdc_context *ctx;
    pdc_model *model;
    pdc_attrs *opts = NULL;
    int rc = cli_open_model(&a, &ctx, &model);
    if (rc == CLI_EXIT_OK) {
        pdc_status st = pdc_attrs_create(ctx, &opts);
        if (!st && cpu) st = pdc_attrs_set_string(opts, "cpu", cpu);
        if (!st && arch) st = pdc_attrs_set_string(opts, "arch", arch);
        if (!st && name) st = pdc_attrs_set_string(opts, "name", name);
        if (!st) st = pdc_model_emit(ctx, model, target, opts, dir);
        if (st) {
            rc = cli_lib_error(ctx, st, model_path, NULL);
        } else {
            printf("%s: compiled for %s into %s/\n", model_path, target, dir);
            list_outputs(dir, name ? name : "model");
        }
    }
    pdc_attrs_destroy(opts);
    pdc_model_destroy(model);
    pdc_context_destroy(ctx);
    return rc;
}
