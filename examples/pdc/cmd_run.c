/*
 * cmd_run.c - `pdc run`: compile a model for a target, feed it raw little-endian float32 files and
 * write or print its outputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_FILES 64
#define PRINT_LIMIT 20

const char cli_run_synopsis[] =
    "pdc run MODEL [MODEL... --group] [--target ref|cpu|gpu] --input IN.bin [--input IN2.bin]... [--output OUT.bin]... [--print] "
    "[--shape NAME=DIMS]... [--threads N]";
const char cli_run_help[] =
    "usage: pdc run MODEL [MODEL... --group] [--target ref|cpu|gpu] --input IN.bin [--input IN2.bin]...\n"
    "               [--output OUT.bin]... [--print] [--shape NAME=DIMS]... [--threads N]\n"
    "\n"
    "Compiles MODEL for a target and runs it once. Inputs and outputs are raw little-endian float32\n"
    "files holding exactly the tensor's elements in row-major order (a [1,1,8,8] input is 256 bytes);\n"
    "their number and sizes are checked against the model before it is compiled.\n"
    "With --group the models run as one group (pdc_compile_group): inputs of the same name are one\n"
    "input (`pdc inspect A B --group` lists them), outputs are every model's in turn, named \"k/NAME\".\n"
    "\n"
    "Options:\n"
    "  -t, --target NAME  the target to compile for: ref (the reference interpreter, the default), cpu\n"
    "                     (kernels JIT-compiled for this CPU) or gpu (NVIDIA, through the CUDA driver);\n"
    "                     auto picks cpu (the target with a latency model), else gpu, else ref\n"
    "  -i, --input FILE   one per graph input, in the order `pdc inspect` lists them\n"
    "  -o, --output FILE  where to write the outputs, in order; with fewer --output files than graph\n"
    "                     outputs only the first ones are written; with none the first output's\n"
    "                     values are printed (at most 20, then \"...\")\n"
    "  --print            print every output's values (at most 20 each) even when writing files\n"
    "  --shape NAME=DIMS  fix the shape of graph input NAME, e.g. --shape image=4x1x8x8; may be repeated\n"
    "  --threads N        worker threads (0 = all cores, the default)\n"
    "  --group            the models given are one group\n"
    "  --check-finite     fail the run at the first layer whose output holds a NaN or an infinity,\n"
    "                     naming it (targets ref and cpu)\n"
    CLI_MAX_MEMORY_HELP
    "  -h, --help         show this help\n";

enum { OPT_TARGET = 1, OPT_INPUT, OPT_OUTPUT, OPT_PRINT, OPT_THREADS, OPT_CHECK_FINITE };
static const cli_opt run_opts[] = {{"target", 't', 1, OPT_TARGET}, {"input", 'i', 1, OPT_INPUT},
                                   {"output", 'o', 1, OPT_OUTPUT}, {"print", 0, 0, OPT_PRINT},
                                   {"shape", 0, 1, CLI_OPT_SHAPE}, {"max-memory", 0, 1, CLI_OPT_MAX_MEMORY},
                                   {"threads", 0, 1, OPT_THREADS}, {"group", 0, 0, CLI_OPT_GROUP},
                                   {"check-finite", 0, 0, OPT_CHECK_FINITE}, {NULL, 0, 0, 0}};

typedef struct run_args {
    cli_model_args m;           /* MODEL and --shape */
    const char *target;
    const char *inputs[MAX_FILES];
    size_t n_inputs;
    const char *outputs[MAX_FILES];
    size_t n_outputs;
    int print;
    int check_finite;
    const char *threads;
} run_args;

#define USAGE(...) cli_usage_error("run", cli_run_synopsis, __VA_ARGS__)

static int parse_args(int argc, char **argv, run_args *a)
{
    cli_parser p;
    cli_parser_init(&p, argc, argv, "run", cli_run_synopsis, cli_run_help, run_opts);
    a->target = "ref";
    for (;;) {
        const char *v;
        int id = cli_next_model_arg(&p, &a->m, &v);
        switch (id) {
        case CLI_ARG_END:
            if (!a->m.path) return USAGE("missing MODEL");
            if (a->n_inputs == 0) return USAGE("missing --input FILE");
            return -1;   /* parsed */
        case CLI_ARG_BAD:
        case CLI_ARG_HELP: return cli_arg_exit(id);
        case OPT_TARGET:
            if (!*v) return USAGE("empty --target");
            a->target = v;
            break;
        case OPT_INPUT:
            if (a->n_inputs == MAX_FILES) return USAGE("too many --input files (at most 64)");
            a->inputs[a->n_inputs++] = v;
            break;
        case OPT_OUTPUT:
            if (a->n_outputs == MAX_FILES) return USAGE("too many --output files (at most 64)");
            a->outputs[a->n_outputs++] = v;
            break;
        case OPT_PRINT: a->print = 1; break;
        case OPT_CHECK_FINITE: a->check_finite = 1; break;
        case OPT_THREADS:
            if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 6)
                return USAGE("bad --threads '%s': expected a count (0 = all cores)", v);
            a->threads = v;
            break;
        default: return USAGE("internal: unhandled option");
        }
    }
}

/* "name 1x1x8x8, name2 4x3" for messages about a program's inputs or outputs. */
static void describe_io(const pdc_program *prog, int outputs, size_t n, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++) {
        const char *name = "?";
        size_t rank = 0;
        int64_t dims[PDC_MAX_RANK];
        char shape[160];
        if (outputs) pdc_program_output_info(prog, i, &name, &rank, dims);
        else pdc_program_input_info(prog, i, &name, &rank, dims);
        int k = snprintf(buf + used, cap - used, "%s'%s' %s", i ? ", " : "", name,
                         cli_format_shape(rank, dims, shape, sizeof shape));
        if (k < 0) break;
        used += (size_t)k;
    }
}

/* Before anything is compiled or allocated: one --input file per graph input, each of exactly its
 * input's size. Inputs with symbolic dims are left to pdc_compile, which names them. */
static int check_inputs(pdc_context *ctx, const run_args *a, const pdc_model *model)
{
    size_t n_in = 0;
    pdc_status st = pdc_model_num_inputs(model, &n_in);
    if (st != PDC_OK) return cli_lib_error(ctx, st, a->m.path, NULL);
    if (a->n_inputs != n_in) {
        char list[1024];
        size_t used = 0;
        list[0] = '\0';
        for (size_t i = 0; i < n_in && used < sizeof list; i++) {
            const char *name = "?";
            size_t rank = 0;
            int64_t dims[PDC_MAX_RANK];
            char shape[160];
            pdc_model_input_info(model, i, &name, &rank, dims);
            int k = snprintf(list + used, sizeof list - used, "%s'%s' %s", i ? ", " : "", name,
                             cli_format_shape(rank, dims, shape, sizeof shape));
            if (k < 0) break;
            used += (size_t)k;
        }
        return cli_error(a->m.path, "the model has %zu input%s (%s), got %zu --input file%s", n_in, n_in == 1 ? "" : "s",
                         list, a->n_inputs, a->n_inputs == 1 ? "" : "s");
    }
    for (size_t i = 0; i < n_in; i++) {
        const char *name = "?";
        size_t rank = 0, n = 0;
        int64_t dims[PDC_MAX_RANK];
        char shape[160], what[512];
        if ((st = pdc_model_input_info(model, i, &name, &rank, dims)) != PDC_OK)
            return cli_lib_error(ctx, st, a->m.path, NULL);
        if (cli_shape_elems(rank, dims, &n) != 0 || n > ((size_t)1 << 40))
            return cli_error(a->m.path, "input '%s' is too large (%s)", name, cli_format_shape(rank, dims, shape, sizeof shape));
        if (n == 0) continue; /* symbolic */
        snprintf(what, sizeof what, "input '%s' %s f32", name, cli_format_shape(rank, dims, shape, sizeof shape));
        int rc = raw_check_f32(a->inputs[i], n, what);
        if (rc != CLI_EXIT_OK) return rc;
    }
    return CLI_EXIT_OK;
}

/* Creates a tensor for input or output i of prog; *name_out, *shape_out describe it for messages. */
static int make_tensor(pdc_context *ctx, const pdc_program *prog, int output, size_t i, const char *model_path,
                       pdc_tensor **t_out, const char **name_out, char *shape, size_t shape_cap)
{
    size_t rank = 0, n = 0;
    int64_t dims[PDC_MAX_RANK];
    pdc_status st = output ? pdc_program_output_info(prog, i, name_out, &rank, dims)
                           : pdc_program_input_info(prog, i, name_out, &rank, dims);
    if (st != PDC_OK) return cli_lib_error(ctx, st, model_path, NULL);
    cli_format_shape(rank, dims, shape, shape_cap);
    if (cli_shape_elems(rank, dims, &n) != 0 || n > ((size_t)1 << 40))
        return cli_error(model_path, "%s '%s' is too large (%s)", output ? "output" : "input", *name_out, shape);
    st = pdc_tensor_create(ctx, rank, dims, t_out);
    if (st != PDC_OK) return cli_lib_error(ctx, st, model_path, NULL);
    return CLI_EXIT_OK;
}

static void print_values(pdc_tensor *t, const char *name, const char *shape)
{
    printf("%s [%s]: ", name, shape);
    raw_print_f32(stdout, pdc_tensor_data(t), pdc_tensor_size(t), PRINT_LIMIT);
}

static int run_program(pdc_context *ctx, const run_args *a, const pdc_program *prog)
{
    size_t n_in = 0, n_out = 0;
    pdc_status st = pdc_program_num_inputs(prog, &n_in);
    if (st == PDC_OK) st = pdc_program_num_outputs(prog, &n_out);
    if (st != PDC_OK) return cli_lib_error(ctx, st, a->m.path, NULL);
    if (n_in > MAX_FILES || n_out > MAX_FILES)
        return cli_error(a->m.path, "the model has %zu inputs and %zu outputs; pdc run handles at most %d of each",
                         n_in, n_out, MAX_FILES);

    char list[1024];
    if (a->n_inputs != n_in) {
        describe_io(prog, 0, n_in, list, sizeof list);
        return cli_error(a->m.path, "the model has %zu input%s (%s), got %zu --input file%s", n_in,
                         n_in == 1 ? "" : "s", list, a->n_inputs, a->n_inputs == 1 ? "" : "s");
    }
    if (a->n_outputs > n_out) {
        describe_io(prog, 1, n_out, list, sizeof list);
        return cli_error(a->m.path, "the model has %zu output%s (%s), got %zu --output files", n_out,
                         n_out == 1 ? "" : "s", list, a->n_outputs);
    }

    pdc_tensor *in[MAX_FILES] = {0}, *out[MAX_FILES] = {0};
    const char *in_name[MAX_FILES], *out_name[MAX_FILES];
    char in_shape[MAX_FILES][64], out_shape[MAX_FILES][64];
    int rc = CLI_EXIT_OK;

    /* Every input file's type and size before any tensor is allocated (shapes fixed by pdc_compile
     * are known only now, so check_inputs could not check them all). */
    for (size_t i = 0; i < n_in; i++) {
        const char *name = "?";
        size_t rank = 0, n = 0;
        int64_t dims[PDC_MAX_RANK];
        char shape[160], what[512];
        if ((st = pdc_program_input_info(prog, i, &name, &rank, dims)) != PDC_OK)
            return cli_lib_error(ctx, st, a->m.path, NULL);
        cli_format_shape(rank, dims, shape, sizeof shape);
        if (cli_shape_elems(rank, dims, &n) != 0 || n > ((size_t)1 << 40))
            return cli_error(a->m.path, "input '%s' is too large (%s)", name, shape);
        snprintf(what, sizeof what, "input '%.200s' %s f32", name, shape);
        if ((rc = raw_check_f32(a->inputs[i], n, what)) != CLI_EXIT_OK) return rc;
    }
    for (size_t i = 0; i < n_in && rc == CLI_EXIT_OK; i++) {
        rc = make_tensor(ctx, prog, 0, i, a->m.path, &in[i], &in_name[i], in_shape[i], sizeof in_shape[i]);
        if (rc != CLI_EXIT_OK) break;
        char what[256];
        snprintf(what, sizeof what, "input '%s' %s f32", in_name[i], in_shape[i]);
        rc = raw_read_f32(a->inputs[i], pdc_tensor_data(in[i]), pdc_tensor_size(in[i]), what);
    }
    for (size_t i = 0; i < n_out && rc == CLI_EXIT_OK; i++)
        rc = make_tensor(ctx, prog, 1, i, a->m.path, &out[i], &out_name[i], out_shape[i], sizeof out_shape[i]);

    if (rc == CLI_EXIT_OK) {
        st = pdc_program_run(prog, n_in, in, n_out, out);
        if (st != PDC_OK) rc = cli_lib_error(ctx, st, a->m.path, "run");
    }
    for (size_t i = 0; i < a->n_outputs && rc == CLI_EXIT_OK; i++)
        rc = raw_write_f32(a->outputs[i], pdc_tensor_data(out[i]), pdc_tensor_size(out[i]));
    if (rc == CLI_EXIT_OK) {
        if (a->print)
            for (size_t i = 0; i < n_out; i++) print_values(out[i], out_name[i], out_shape[i]);
        else if (a->n_outputs == 0 && n_out > 0)
            print_values(out[0], out_name[0], out_shape[0]);
    }

    for (size_t i = 0; i < n_in; i++) pdc_tensor_destroy(in[i]);
    for (size_t i = 0; i < n_out; i++) pdc_tensor_destroy(out[i]);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    run_args *a = calloc(1, sizeof *a);
    if (!a) return cli_error(NULL, "out of memory");
    int rc = parse_args(argc, argv, a);
    if (rc >= 0) {
        free(a);
        return rc;
    }

    pdc_context *ctx = NULL;
    pdc_model *model = NULL;
    pdc_program *prog = NULL;
    rc = cli_context_create(&ctx);
    if (rc == CLI_EXIT_OK && a->threads) {
        pdc_status st = pdc_context_set_option(ctx, "threads", a->threads);
        if (st != PDC_OK) rc = cli_lib_error(ctx, st, NULL, "--threads");
    }
    if (rc == CLI_EXIT_OK && a->check_finite) {
        pdc_status st = pdc_context_set_option(ctx, "check_finite", "1");
        if (st != PDC_OK) rc = cli_lib_error(ctx, st, NULL, "--check-finite");
    }
    if (rc == CLI_EXIT_OK) rc = cli_load_model(ctx, &a->m, &model);
    if (rc == CLI_EXIT_OK) rc = check_inputs(ctx, a, model);
    if (rc == CLI_EXIT_OK) {
        pdc_status st = pdc_compile(ctx, model, a->target, &prog);
        if (st != PDC_OK) {
            char what[256];
            snprintf(what, sizeof what, "cannot compile for target '%s'", a->target);
            rc = cli_lib_error(ctx, st, a->m.path, what);
        }
    }
    pdc_model_destroy(model);   /* the program does not need it */
    if (rc == CLI_EXIT_OK) rc = run_program(ctx, a, prog);

    pdc_program_destroy(prog);
    pdc_context_destroy(ctx);
    free(a);
    return rc;
}
