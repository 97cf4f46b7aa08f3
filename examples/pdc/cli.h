/*
 * cli.h - internal to the pdc command-line tool: option parsing, messages and raw-file I/O shared
 * by the commands. The tool is built only on the public header include/pdc.h.
 *
 * Exit status of every command: CLI_EXIT_OK, CLI_EXIT_ERROR (a model, input or output problem; one
 * line on stderr "pdc: FILE: message"), CLI_EXIT_USAGE (bad command line; a short hint on stderr).
 */
#ifndef PDC_EXAMPLES_CLI_H
#define PDC_EXAMPLES_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pdc.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_ERROR = 1, CLI_EXIT_USAGE = 2 };

/* ------------------------------------------------------------------ commands (cmd_*.c) */

/* argv[0] is the command name; the rest are its arguments. Each returns an exit status. */
int cmd_inspect(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_tune(int argc, char **argv);

/* The commands' one-line synopses and full help texts (printed by --help and usage errors). */
extern const char cli_inspect_synopsis[], cli_inspect_help[];
extern const char cli_run_synopsis[], cli_run_help[];
extern const char cli_convert_synopsis[], cli_convert_help[];
extern const char cli_prune_synopsis[], cli_prune_help[];
extern const char cli_bench_synopsis[], cli_bench_help[];
extern const char cli_compile_synopsis[], cli_compile_help[];
extern const char cli_predict_synopsis[], cli_predict_help[];
extern const char cli_calibrate_synopsis[], cli_calibrate_help[];
extern const char cli_plan_synopsis[], cli_plan_help[];
extern const char cli_tune_synopsis[], cli_tune_help[];

/* ------------------------------------------------------------------ option parsing (args.c) */

/* A --shape NAME=DIMS option, parsed. */
typedef struct cli_shape {
    char name[256];
    size_t rank;
    int64_t dims[PDC_MAX_RANK];
} cli_shape;

/* One option a command accepts: "--name" (and "-c" when short_name != 0); has_arg: takes a value,
 * given as "--name VALUE", "--name=VALUE" or "-c VALUE". id > 0 is what cli_next returns. */
typedef struct cli_opt {
    const char *name;
    char short_name;
    int has_arg;
    int id;
} cli_opt;

enum {
    CLI_ARG_END = -1,        /* no arguments left */
    CLI_ARG_BAD = -2,        /* a usage error, already reported */
    CLI_ARG_POSITIONAL = 0,  /* *value is a non-option argument */
    CLI_ARG_HELP = -3        /* --help or -h */
};

typedef struct cli_parser {
    int argc;
    char **argv;
    int next;                /* index of the next argument */
    int no_more_options;     /* after "--" */
    const char *cmd;         /* command name, for messages */
    const char *synopsis;    /* usage line, for messages */
    const char *help;        /* full help text, for --help */
    const cli_opt *opts;     /* terminated by an entry with name == NULL */
} cli_parser;

/* Starts parsing argv[1..] of command `cmd`. */
void cli_parser_init(cli_parser *p, int argc, char **argv, const char *cmd, const char *synopsis, const char *help,
                     const cli_opt *opts);
/* The next option id, CLI_ARG_POSITIONAL (value in *value), CLI_ARG_HELP, CLI_ARG_END or CLI_ARG_BAD. */
int cli_next(cli_parser *p, const char **value);

/* The option ids of --shape NAME=DIMS, --max-memory and --group in the option tables of the commands that
 * read a model (--group only where groups make sense: run, bench, inspect). */
enum { CLI_OPT_SHAPE = 100, CLI_OPT_MAX_MEMORY = 101, CLI_OPT_GROUP = 102 };

/* The default of --max-memory (and PDC_MAX_MEMORY): no single allocation above 4 GiB. */
#define CLI_DEFAULT_MAX_MEMORY "4294967296"
/* The help text's line for --max-memory. */
#define CLI_MAX_MEMORY_HELP                                                                                     \
    "  --max-memory BYTES the largest single allocation (suffix K, M, G; 0 = no limit; default 4G, or\n"       \
    "                     $PDC_MAX_MEMORY): larger tensors, arenas and files are refused up front\n"

#define CLI_MAX_GROUP 16

/* What every command that reads a model takes: MODEL and the --shape options; with --group, several
 * models, joined into one (cli_load_model). */
typedef struct cli_model_args {
    const char *path;        /* MODEL, the first positional argument */
    const char *more[CLI_MAX_GROUP - 1]; /* the other models of a group */
    size_t n_more;
    int group;               /* --group */
    cli_shape shapes[16];    /* --shape NAME=DIMS, in command-line order */
    size_t n_shapes;
} cli_model_args;

/* cli_next for a command that reads a model: MODEL and --shape go into *a, --help prints the
 * command's help; with --group in the command's table, further MODELs and --group too (several
 * models without --group are a usage error). Returns the next other option id (> 0, its value in
 * *value), CLI_ARG_END when the arguments are done, else CLI_ARG_HELP or CLI_ARG_BAD (already
 * printed), for which the command returns cli_arg_exit(id). */
int cli_next_model_arg(cli_parser *p, cli_model_args *a, const char **value);
/* The exit status after cli_next_model_arg returned CLI_ARG_HELP (CLI_EXIT_OK) or CLI_ARG_BAD (CLI_EXIT_USAGE). */
int cli_arg_exit(int id);

/* Prints "pdc CMD: message", the synopsis and a pointer to --help on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *synopsis, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prints one line "pdc: FILE: message" on stderr (newlines in message become "; "); returns CLI_EXIT_ERROR. */
int cli_error(const char *file, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* cli_error(file, "[what: ]<last error of ctx>"), falling back to the status name if the message is empty. */
int cli_lib_error(const pdc_context *ctx, pdc_status st, const char *file, const char *what);

/* ------------------------------------------------------------------ shapes (args.c) */

/* Parses "NAME=D1xD2x..." (dims >= 1, also "NAME=D1,D2,..."). Returns 0, or -1 with a reason in err. */
int cli_parse_shape(const char *spec, cli_shape *out, char *err, size_t errcap);
/* Formats dims as "1x3x224x224" ("?" for symbolic dims, "scalar" for rank 0) into buf. */
const char *cli_format_shape(size_t rank, const int64_t *dims, char *buf, size_t cap);
/* Number of elements (symbolic dims count as 0); returns -1 on overflow. */
int cli_shape_elems(size_t rank, const int64_t *dims, size_t *n_out);

/* Loads MODEL and applies the --shape options; on failure prints the error and returns CLI_EXIT_ERROR.
 * With --group, loads every model (each --shape applies to the models with that input; some model must
 * have it) and returns their group (pdc_model_group) after the passes "share,plan" - what
 * pdc_compile_group compiles - and, if summary is not NULL, one line saying what the group shares. */
int cli_load_models(pdc_context *ctx, const cli_model_args *a, pdc_model **model_out, char *summary, size_t cap);
/* cli_load_models without a summary. */
int cli_load_model(pdc_context *ctx, const cli_model_args *a, pdc_model **model_out);
/* Creates a context; on failure prints the error and returns CLI_EXIT_ERROR. When stderr is a terminal
 * the context reports progress there (pdc_context_set_progress_handler): one line, "compiling layer
 * 12/60" or "prune-pattern: layer 12/60", rewritten in place and erased at the end of each stage (and
 * by cli_error / cli_usage_error). Otherwise nothing is printed. */
/* Sets the max_memory of every context cli_context_create makes from --max-memory VALUE (bytes, or
 * with suffix K/M/G/T); -1 with a message in err if VALUE is malformed. */
int cli_set_max_memory(const char *value, char *err, size_t errcap);
int cli_context_create(pdc_context **ctx_out);
/* cli_context_create, then cli_load_model. On failure (printed, CLI_EXIT_ERROR) *ctx_out is the
 * context or NULL and *model_out NULL; the caller destroys both in any case. */
int cli_open_model(const cli_model_args *a, pdc_context **ctx_out, pdc_model **model_out);
/* 1 if s ends in suffix and has something before it. */
int cli_ends_with(const char *s, const char *suffix);

/* ------------------------------------------------------------------ small helpers (args.c) */

/* Monotonic milliseconds. */
double cli_now_ms(void);
/* qsort comparison of doubles, ascending. */
int cli_cmp_double(const void *a, const void *b);
/* A non-negative integer option value, at most max, into *out. Returns 0, or -1 if v is not one. */
int cli_parse_count(const char *v, long max, long *out);
/* Prints s on stdout as a JSON string (quotes and escapes). */
void cli_json_string(const char *s);

/* ------------------------------------------------------------------ raw little-endian f32 files (rawio.c) */

/* Reads exactly n floats from path. A size mismatch reports "expected B bytes (what), got G bytes".
 * Returns CLI_EXIT_OK or CLI_EXIT_ERROR (already reported). */
int raw_read_f32(const char *path, float *dst, size_t n, const char *what);
/* The same checks as raw_read_f32 without reading: path is a regular file of exactly n floats, else the
 * same message. Returns CLI_EXIT_OK or CLI_EXIT_ERROR (already reported). */
int raw_check_f32(const char *path, size_t n, const char *what);
/* The number of floats in path: a non-empty regular file whose size is a multiple of 4, else an error
 * naming `what`. Returns CLI_EXIT_OK or CLI_EXIT_ERROR (already reported). */
int raw_count_f32(const char *path, size_t *n, const char *what);
/* Writes n floats to path (truncating). Returns CLI_EXIT_OK or CLI_EXIT_ERROR (already reported). */
int raw_write_f32(const char *path, const float *src, size_t n);
/* Prints up to `limit` values as "%.6g" separated by spaces, then " ..." if there are more, and a newline. */
void raw_print_f32(FILE *f, const float *v, size_t n, size_t limit);

#endif
