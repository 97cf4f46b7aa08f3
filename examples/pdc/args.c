/*
 * args.c - option parsing, --shape parsing and the tool's error messages.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_parser_init(cli_parser *p, int argc, char **argv, const char *cmd, const char *synopsis, const char *help,
                     const cli_opt *opts)
{
    p->argc = argc;
    p->argv = argv;
    p->next = 1;
    p->no_more_options = 0;
    p->cmd = cmd;
    p->synopsis = synopsis;
    p->help = help;
    p->opts = opts;
}

static const cli_opt *find_long(const cli_opt *opts, const char *name, size_t len)
{
    for (const cli_opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
    return NULL;
}

static const cli_opt *find_short(const cli_opt *opts, char c)
{
    for (const cli_opt *o = opts; o->name; o++)
        if (o->short_name && o->short_name == c) return o;
    return NULL;
}

int cli_next(cli_parser *p, const char **value)
{
    *value = NULL;
    if (p->next >= p->argc) return CLI_ARG_END;
    const char *arg = p->argv[p->next++];

    if (p->no_more_options || arg[0] != '-' || arg[1] == '\0') {   /* "-" alone is a positional */
        *value = arg;
        return CLI_ARG_POSITIONAL;
    }
    if (strcmp(arg, "--") == 0) {
        p->no_more_options = 1;
        return cli_next(p, value);
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return CLI_ARG_HELP;

    const cli_opt *o;
    const char *inline_value = NULL;
    if (arg[1] == '-') {
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        o = find_long(p->opts, name, len);
        if (!o) {
            cli_usage_error(p->cmd, p->synopsis, "unknown option '--%.*s'", (int)len, name);
            return CLI_ARG_BAD;
        }
        if (eq) inline_value = eq + 1;
    } else {
        o = arg[2] == '\0' ? find_short(p->opts, arg[1]) : NULL;
        if (!o) {
            cli_usage_error(p->cmd, p->synopsis, "unknown option '%s'", arg);
            return CLI_ARG_BAD;
        }
    }

    if (!o->has_arg) {
        if (inline_value) {
            cli_usage_error(p->cmd, p->synopsis, "option '--%s' takes no value", o->name);
            return CLI_ARG_BAD;
        }
        return o->id;
    }
    if (!inline_value) {
        if (p->next >= p->argc) {
            cli_usage_error(p->cmd, p->synopsis, "option '%s' needs a value", arg);
            return CLI_ARG_BAD;
        }
        inline_value = p->argv[p->next++];
    }
    *value = inline_value;
    return o->id;
}

static int takes_group(const cli_parser *p)
{
    for (const cli_opt *o = p->opts; o->name; o++)
        if (o->id == CLI_OPT_GROUP) return 1;
    return 0;
}

int cli_next_model_arg(cli_parser *p, cli_model_args *a, const char **value)
{
    char err[512];
    for (;;) {
        const char *v;
        const int id = cli_next(p, &v);
        *value = v;
        switch (id) {
        case CLI_ARG_HELP: fputs(p->help, stdout); return id;
        case CLI_ARG_POSITIONAL:
            if (!a->path) a->path = v;
            else if (takes_group(p) && a->n_more < CLI_MAX_GROUP - 1) a->more[a->n_more++] = v;
            else {
                if (takes_group(p)) cli_usage_error(p->cmd, p->synopsis, "too many models (at most %d)", CLI_MAX_GROUP);
                else cli_usage_error(p->cmd, p->synopsis, "unexpected argument '%s'", v);
                return CLI_ARG_BAD;
            }
            break;
        case CLI_OPT_GROUP: a->group = 1; break;
        case CLI_ARG_END:
            if (a->n_more && !a->group) {
                cli_usage_error(p->cmd, p->synopsis, "several models: add --group to run them as one group");
                return CLI_ARG_BAD;
            }
            return id;
        case CLI_OPT_MAX_MEMORY:
            if (cli_set_max_memory(v, err, sizeof err) != 0) {
                cli_usage_error(p->cmd, p->synopsis, "%s", err);
                return CLI_ARG_BAD;
            }
            break;
        case CLI_OPT_SHAPE:
            if (a->n_shapes == sizeof a->shapes / sizeof a->shapes[0]) {
                cli_usage_error(p->cmd, p->synopsis, "too many --shape options (at most 16)");
                return CLI_ARG_BAD;
            }
            if (cli_parse_shape(v, &a->shapes[a->n_shapes], err, sizeof err) != 0) {
                cli_usage_error(p->cmd, p->synopsis, "%s", err);
                return CLI_ARG_BAD;
            }
            a->n_shapes++;
            break;
        default: return id;
        }
    }
}

int cli_arg_exit(int id) { return id == CLI_ARG_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE; }

/* Length of the progress line now on stderr (0: none). */
static int progress_shown;

/* The progress handler on a terminal: one line on stderr, "compiling layer 12/60" or "prune-pattern:
 * layer 12/60", rewritten in place and erased when the stage ends, so the tool's other output
 * starts on a clean line. */
static void progress_clear(void)
{
    if (progress_shown) fprintf(stderr, "\r%*s\r", progress_shown, "");
    progress_shown = 0;
}

static void progress_line(void *user, const char *stage, size_t done, size_t total)
{
    (void)user;
    if (done >= total) {
        progress_clear();
        fflush(stderr);
        return;
    }
    char line[160];
    int n = !strncmp(stage, "tune ", 5)
                ? snprintf(line, sizeof line, "%s: measurement %zu/%zu", stage, done + 1, total)
            : strcmp(stage, "compile") ? snprintf(line, sizeof line, "%s: layer %zu/%zu", stage, done + 1, total)
                                       : snprintf(line, sizeof line, "compiling layer %zu/%zu", done + 1, total);
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1;
    /* pad over a longer line before it */
    fprintf(stderr, "\r%s%*s", line, progress_shown > n ? progress_shown - n : 0, "");
    if (progress_shown < n) progress_shown = n;
    fflush(stderr);
}

int cli_usage_error(const char *cmd, const char *synopsis, const char *fmt, ...)
{
    va_list ap;
    progress_clear(); /* a failed stage leaves its counter */
    va_start(ap, fmt);
    fprintf(stderr, "pdc%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: %s\nTry 'pdc%s%s --help' for more information.\n", synopsis, cmd ? " " : "",
            cmd ? cmd : "");
    return CLI_EXIT_USAGE;
}

/* Writes s to stderr on one line: control characters (newlines, tabs) become "; " or a space. */
static void put_one_line(const char *s)
{
    for (; *s; s++) {
        if (*s == '\n') {
            if (s[1] != '\0') fputs("; ", stderr);
        } else if ((unsigned char)*s < 0x20) {
            fputc(' ', stderr);
        } else {
            fputc(*s, stderr);
        }
    }
}

int cli_error(const char *file, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    progress_clear();
    fputs("pdc: ", stderr);
    if (file) {
        put_one_line(file);
        fputs(": ", stderr);
    }
    put_one_line(msg);
    fputc('\n', stderr);
    return CLI_EXIT_ERROR;
}

int cli_lib_error(const pdc_context *ctx, pdc_status st, const char *file, const char *what)
{
    const char *msg = pdc_context_last_error(ctx);
    if (!msg || !*msg) msg = pdc_status_string(st);
    if (what) return cli_error(file, "%s: %s", what, msg);
    /* Messages that already start with "FILE: " are printed as they are, not as "FILE: FILE: ...". */
    size_t n = file ? strlen(file) : 0;
    if (n && strncmp(msg, file, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') return cli_error(NULL, "%s", msg);
    return cli_error(file, "%s", msg);
}

/* ------------------------------------------------------------------ shapes */

int cli_parse_shape(const char *spec, cli_shape *out, char *err, size_t errcap)
{
    const char *eq = strrchr(spec, '=');
    if (!eq) {
        snprintf(err, errcap, "bad --shape '%s': expected NAME=DIMS, e.g. image=1x3x224x224", spec);
        return -1;
    }
    size_t name_len = (size_t)(eq - spec);
    if (name_len == 0 || name_len >= sizeof out->name) {
        snprintf(err, errcap, "bad --shape '%s': the input name is %s", spec, name_len ? "too long" : "empty");
        return -1;
    }
    memcpy(out->name, spec, name_len);
    out->name[name_len] = '\0';

    const char *s = eq + 1;
    out->rank = 0;
    if (*s == '\0') {
        snprintf(err, errcap, "bad --shape '%s': no dims after '='", spec);
        return -1;
    }
    for (;;) {
        if (*s < '0' || *s > '9') {
            snprintf(err, errcap, "bad --shape '%s': expected a positive integer at '%s'", spec, s);
            return -1;
        }
        char *end;
        errno = 0;
        long long d = strtoll(s, &end, 10);
        if (errno == ERANGE || d < 1 || d > ((long long)1 << 40)) {
            snprintf(err, errcap, "bad --shape '%s': dim %.*s is out of range (1 .. 2^40)", spec, (int)(end - s), s);
            return -1;
        }
        if (out->rank == PDC_MAX_RANK) {
            snprintf(err, errcap, "bad --shape '%s': more than %d dims", spec, PDC_MAX_RANK);
            return -1;
        }
        out->dims[out->rank++] = (int64_t)d;
        s = end;
        if (*s == '\0') break;
        if (*s != 'x' && *s != 'X' && *s != ',') {
            snprintf(err, errcap, "bad --shape '%s': unexpected '%c' (dims are separated by 'x')", spec, *s);
            return -1;
        }
        s++;
    }
    return 0;
}

const char *cli_format_shape(size_t rank, const int64_t *dims, char *buf, size_t cap)
{
    size_t used = 0;
    if (cap == 0) return buf;
    buf[0] = '\0';
    if (rank == 0) {
        snprintf(buf, cap, "scalar");
        return buf;
    }
    for (size_t i = 0; i < rank && used < cap; i++) {
        int n = dims[i] < 0 ? snprintf(buf + used, cap - used, "%s?", i ? "x" : "")
                            : snprintf(buf + used, cap - used, "%s%lld", i ? "x" : "", (long long)dims[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
    return buf;
}

int cli_shape_elems(size_t rank, const int64_t *dims, size_t *n_out)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) {
        if (dims[i] < 0) {
            *n_out = 0;
            return 0;
        }
        if (__builtin_mul_overflow(n, (size_t)dims[i], &n)) return -1;
    }
    *n_out = n;
    return 0;
}

/* ------------------------------------------------------------------ memory limit */

/* --max-memory as a byte count in decimal ("" = not given: PDC_MAX_MEMORY, else the default). */
static char max_memory_bytes[32];

/* "4096", "64K", "512M", "16G" (powers of 1024) -> bytes in decimal; -1 if malformed. */
static int parse_bytes(const char *s, char *out, size_t cap)
{
    if (!*s || *s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE) return -1;
    unsigned shift = 0;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': shift = 10; break;
        case 'm': case 'M': shift = 20; break;
        case 'g': case 'G': shift = 30; break;
        case 't': case 'T': shift = 40; break;
        default: return -1;
        }
        if (end[1] && !((end[1] == 'B' || end[1] == 'b') && !end[2]) && !((end[1] == 'i') && end[2] == 'B' && !end[3]))
            return -1;
    }
    if (shift && v > (~0ull >> shift)) return -1;
    v <<= shift;
    snprintf(out, cap, "%llu", v);
    return 0;
}

int cli_set_max_memory(const char *value, char *err, size_t errcap)
{
    char bytes[32];
    if (parse_bytes(value, bytes, sizeof bytes) != 0) {
        snprintf(err, errcap, "bad --max-memory '%.100s': expected a byte count, e.g. 512M or 8G (0 = no limit)", value);
        return -1;
    }
    snprintf(max_memory_bytes, sizeof max_memory_bytes, "%s", bytes);
    return 0;
}

/* ------------------------------------------------------------------ model loading */

int cli_context_create(pdc_context **ctx_out)
{
    const char *limit = max_memory_bytes;
    char env_bytes[32];
    if (!*limit) {
        const char *env = getenv("PDC_MAX_MEMORY");
        if (env && *env) {
            if (parse_bytes(env, env_bytes, sizeof env_bytes) != 0)
                return cli_error(NULL, "bad PDC_MAX_MEMORY '%.100s': expected a byte count, e.g. 512M or 8G (0 = no limit)",
                                 env);
            limit = env_bytes;
        } else {
            limit = CLI_DEFAULT_MAX_MEMORY;
        }
    }
    pdc_status st = pdc_context_create(ctx_out);
    if (st != PDC_OK) return cli_error(NULL, "cannot create a context: %s", pdc_status_string(st));
    st = pdc_context_set_option(*ctx_out, "max_memory", limit);
    if (st != PDC_OK) {
        int rc = cli_lib_error(*ctx_out, st, NULL, "--max-memory");
        pdc_context_destroy(*ctx_out);
        *ctx_out = NULL;
        return rc;
    }
    if (isatty(STDERR_FILENO)) pdc_context_set_progress_handler(*ctx_out, progress_line, NULL);
    return CLI_EXIT_OK;
}

static int has_input(const pdc_model *m, const char *name)
{
    size_t n = 0;
    (void)pdc_model_num_inputs(m, &n);
    for (size_t i = 0; i < n; i++) {
        const char *in;
        if (pdc_model_input_info(m, i, &in, NULL, NULL) == PDC_OK && !strcmp(in, name)) return 1;
    }
    return 0;
}

/* Loads path and applies the --shape options: all of them, or in a group (used != NULL) those whose
 * input the model has, marking them in used. */
static int load_one(pdc_context *ctx, const char *path, const cli_model_args *a, uint8_t *used, pdc_model **model_out)
{
    const cli_shape *shapes = a->shapes;
    const size_t n_shapes = a->n_shapes;
    pdc_model *model = NULL;
    /* An ONNX model's shape arithmetic may need the shapes while it is imported: pass them on too
     * (best effort: too long a list is skipped, and pdc_model_set_input_shape below reports errors). */
    char spec[4096];
    size_t used_len = 0;
    for (size_t i = 0; i < n_shapes; i++) {
        char shape[128];
        int w = snprintf(spec + used_len, sizeof spec - used_len, "%s%s=%s", i ? ";" : "", shapes[i].name,
                         cli_format_shape(shapes[i].rank, shapes[i].dims, shape, sizeof shape));
        if (w < 0 || (size_t)w >= sizeof spec - used_len || strchr(shapes[i].name, ';')) {
            used_len = 0;
            break;
        }
        used_len += (size_t)w;
    }
    if (used_len) (void)pdc_context_set_option(ctx, "onnx_input_shapes", spec);
    pdc_status st = pdc_model_load(ctx, path, &model);
    if (st != PDC_OK) return cli_lib_error(ctx, st, path, NULL);
    for (size_t i = 0; i < n_shapes; i++) {
        if (used && !has_input(model, shapes[i].name)) continue;
        if (used) used[i] = 1;
        st = pdc_model_set_input_shape(model, shapes[i].name, shapes[i].rank, shapes[i].dims);
        if (st != PDC_OK) {
            char shape[128], what[512];
            snprintf(what, sizeof what, "--shape %.256s=%s", shapes[i].name,
                     cli_format_shape(shapes[i].rank, shapes[i].dims, shape, sizeof shape));
            cli_lib_error(ctx, st, path, what);
            pdc_model_destroy(model);
            return CLI_EXIT_ERROR;
        }
    }
    *model_out = model;
    return CLI_EXIT_OK;
}

/* Sum of a layer statistic over the model (0 where unknown). */
static int64_t model_stat(const pdc_model *m, pdc_layer_stat stat)
{
    size_t n = 0;
    int64_t sum = 0, v;
    (void)pdc_model_num_layers(m, &n);
    for (size_t i = 0; i < n; i++)
        if (pdc_model_layer_stat(m, i, stat, &v) == PDC_OK) sum += v;
    return sum;
}

static size_t model_layers(const pdc_model *m)
{
    size_t n = 0;
    (void)pdc_model_num_layers(m, &n);
    return n;
}

/* Joins the loaded models (which it destroys) into their group, shared and planned as pdc_compile_group
 * does; the summary compares the group with the models planned apart. */
static int make_group(pdc_context *ctx, const cli_model_args *a, pdc_model **models, size_t n, pdc_model **model_out,
                      char *summary, size_t cap)
{
    size_t layers = 0, arena = 0, arena_group = 0;
    int64_t flops = 0, bytes = 0;
    pdc_status st = PDC_OK;
    for (size_t k = 0; k < n && !st; k++) {
        layers += model_layers(models[k]);
        flops += model_stat(models[k], PDC_STAT_EFFECTIVE_FLOPS);
        bytes += model_stat(models[k], PDC_STAT_BYTES);
        size_t b = 0;
        if (summary && pdc_model_transform(models[k], "plan", NULL) == PDC_OK &&
            pdc_model_memory_plan(models[k], &b, NULL) == PDC_OK)
            arena += b;
    }
    pdc_model *g = NULL;
    st = pdc_model_group(ctx, (const pdc_model *const *)models, n, NULL, &g);
    for (size_t k = 0; k < n; k++) pdc_model_destroy(models[k]);
    if (st == PDC_OK) st = pdc_model_transform(g, "share,schedule,plan", NULL);
    if (st != PDC_OK) {
        pdc_model_destroy(g);
        return cli_lib_error(ctx, st, a->path, "--group");
    }
    if (summary) {
        (void)pdc_model_memory_plan(g, &arena_group, NULL);
        int64_t gflops = model_stat(g, PDC_STAT_EFFECTIVE_FLOPS), gbytes = model_stat(g, PDC_STAT_BYTES);
        snprintf(summary, cap,
                 "group of %zu models: %zu layers (%zu apart; %zu computed once for all), %.4g MFLOP a run (%.4g "
                 "apart), weights read %.4g MB (%.4g apart), activation arena %.4g MB (%.4g apart)",
                 n, model_layers(g), layers, layers - model_layers(g), (double)gflops / 1e6, (double)flops / 1e6,
                 (double)gbytes / 1e6, (double)bytes / 1e6, (double)arena_group / 1e6, (double)arena / 1e6);
    }
    *model_out = g;
    return CLI_EXIT_OK;
}

int cli_load_models(pdc_context *ctx, const cli_model_args *a, pdc_model **model_out, char *summary, size_t cap)
{
    if (summary && cap) summary[0] = '\0';
    if (!a->group) return load_one(ctx, a->path, a, NULL, model_out);
    pdc_model *models[CLI_MAX_GROUP] = {0};
    uint8_t used[sizeof a->shapes / sizeof a->shapes[0]] = {0};
    size_t n = 1 + a->n_more;
    int rc = CLI_EXIT_OK;
    for (size_t k = 0; k < n && rc == CLI_EXIT_OK; k++) rc = load_one(ctx, k ? a->more[k - 1] : a->path, a, used, &models[k]);
    for (size_t i = 0; i < a->n_shapes && rc == CLI_EXIT_OK; i++)
        if (!used[i]) rc = cli_error(a->path, "--shape %s: no model of the group has an input of that name", a->shapes[i].name);
    if (rc != CLI_EXIT_OK) {
        for (size_t k = 0; k < n; k++) pdc_model_destroy(models[k]);
        return rc;
    }
    return make_group(ctx, a, models, n, model_out, summary, cap);
}

int cli_load_model(pdc_context *ctx, const cli_model_args *a, pdc_model **model_out)
{
    return cli_load_models(ctx, a, model_out, NULL, 0);
}

int cli_open_model(const cli_model_args *a, pdc_context **ctx_out, pdc_model **model_out)
{
    *ctx_out = NULL;
    *model_out = NULL;
    if (cli_context_create(ctx_out) != CLI_EXIT_OK) return CLI_EXIT_ERROR;
    return cli_load_model(*ctx_out, a, model_out);
}

int cli_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

double cli_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int cli_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cli_parse_count(const char *v, long max, long *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || !*v || *end || n < 0 || n > max) return -1;
    *out = n;
    return 0;
}

void cli_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}
