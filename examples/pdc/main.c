/*
 * main.c - the pdc command-line tool: dispatch to a command, --help and --version.
 * Built only on the public header, so it also shows that the C ABI suffices for these tasks.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char main_synopsis[] = "pdc inspect|run|convert|prune|bench|compile|predict|calibrate|plan|tune [ARGS...]   or   pdc --help | --version";

typedef struct command {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {"inspect", "print a model's layers: shapes, sparsity, weights, FLOPs, compression", cmd_inspect, cli_inspect_help},
    {"run", "compile a model for a target and run it on raw float32 files", cmd_run, cli_run_help},
    {"convert", "re-save a model as binary .pdc or as IR text .pdcir", cmd_convert, cli_convert_help},
    {"prune", "prune a model (pattern, connectivity, block, unstructured) or run a pass pipeline", cmd_prune,
     cli_prune_help},
    {"bench", "time a compiled model: median, min and max milliseconds per run", cmd_bench, cli_bench_help},
    {"compile", "compile a model ahead of time for another machine (AArch64 library, PTX)", cmd_compile,
     cli_compile_help},
    {"predict", "predict a model's run time per layer and in total (1 and N threads), optionally measured too",
     cmd_predict, cli_predict_help},
    {"calibrate", "measure this host's kernel families and write the latency profile predictions use",
     cmd_calibrate, cli_calibrate_help},
    {"plan", "choose per-layer pruning so that the predicted time meets a latency budget", cmd_plan,
     cli_plan_help},
    {"tune", "tune the cpu kernels of a model's conv layers; later compiles use the results", cmd_tune, cli_tune_help},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void print_main_help(FILE *f)
{
    fprintf(f,
            "usage: pdc COMMAND [ARGS...]\n"
            "       pdc --help | --version\n"
            "       pdc help [COMMAND]\n"
            "\n"
            "pdc compiles and runs pruned deep neural networks (library %s).\n"
            "\n"
            "Commands:\n",
            pdc_version_string());
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f,
            "\n"
            "'pdc COMMAND --help' describes a command. MODEL files are read in any of three formats:\n"
            "binary .pdc, IR text .pdcir or ONNX .onnx; the format is detected from the content (a name\n"
            "ending in .onnx is always read as ONNX). Options take values as '--opt VALUE' or\n"
            "'--opt=VALUE'. On a terminal, long steps (compiling, pruning) show a counter on stderr.\n"
            "\n"
            "Exit status: 0 success, 1 a model, input or output error (one line on stderr:\n"
            "'pdc: FILE: problem'), 2 a usage error.\n");
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static int unknown_command(const char *name)
{
    return cli_usage_error(NULL, main_synopsis, "unknown command '%s'", name);
}

int main(int argc, char **argv)
{
    if (argc < 2) return cli_usage_error(NULL, main_synopsis, "no command given");
    const char *arg = argv[1];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        print_main_help(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(arg, "--version") == 0 || strcmp(arg, "-V") == 0) {
        printf("%s\n", pdc_version_string());
        return CLI_EXIT_OK;
    }
    if (strcmp(arg, "help") == 0) {
        if (argc == 2) {
            print_main_help(stdout);
            return CLI_EXIT_OK;
        }
        if (argc > 3) return cli_usage_error(NULL, main_synopsis, "'help' takes at most one command name");
        const command *c = find_command(argv[2]);
        if (!c) return unknown_command(argv[2]);
        fputs(c->help, stdout);
        return CLI_EXIT_OK;
    }
    if (arg[0] == '-') return cli_usage_error(NULL, main_synopsis, "unknown option '%s' (a command comes first)", arg);

    const command *c = find_command(arg);
    if (!c) return unknown_command(arg);
    int rc = c->fn(argc - 1, argv + 1);
    /* A failed write to stdout (a full disk, /dev/full, a closed pipe) fails the command: ferror
     * catches writes that failed while the buffer was flushed along the way, fflush the rest. */
    int e = fflush(stdout) != 0 || ferror(stdout);
    if (e && rc == CLI_EXIT_OK) rc = cli_error("<stdout>", "write error: %s", errno ? strerror(errno) : "unknown");
    return rc;
}
