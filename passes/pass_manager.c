/*
 * pass_manager.c - the pass table, pipeline parsing, options, and the runner: each pass, then the
 * verifier, then the optional IR print (see pass_manager.h).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static const pass_info table[] = {
    {"canonicalize", "a verified model (any ops)",
     "same outputs (up to float rounding); no batchnorm right after a conv/fc it could fold into; constant "
     "bias adds and activations after conv/fc/gemm fused into them (attribute activation); no identity layers, "
     "no layer whose inputs are all constants, no dead layers, no unused constants; no memory plan",
     NULL, pass_canonicalize},
    {"prune-pattern", "conv weights that are constants",
     "each eligible conv's weight has pattern sparsity: K patterns of n entries, each containing the centre, "
     "every kernel on the pattern of the set that keeps the most of its norm",
     "2-D convs with group 1, a constant weight, an odd kernel of at least 3x3 (at most 64 entries) whose size "
     "option pattern_kernels lists (default 3x3), dense or pattern-sparse; not the stem (a conv reading a graph "
     "input) unless include_stem=1", pass_prune_pattern},
    {"prune-connectivity", "conv weights that are constants (usually after prune-pattern)",
     "floor(rate x kernels) whole kernels of each eligible conv removed (pattern id -1), the smallest norms first",
     "2-D convs with group 1, a constant weight, an odd kernel of at least 3x3 whose size option pattern_kernels "
     "lists (default 3x3), dense or pattern-sparse; not the stem unless include_stem=1",
     pass_prune_connectivity},
    {"prune-kgs", "3-D conv weights that are constants",
     "each eligible 3-D conv's weight has kernel-group sparsity: its kernel grid cut into kgs_group tiles, each "
     "tile keeping the same kgs_keep window positions (or all but floor(kgs_rate x window)), those of largest "
     "group norm",
     "3-D convs with a constant weight whose window has 2..64 entries, dense or pattern-sparse; not the stem "
     "unless include_stem=1", pass_prune_kgs},
    {"prune-block", "weights that are constants",
     "each eligible weight matrix has block sparsity with floor(rate x blocks) blocks removed, the smallest norms "
     "first, blocks numbered row-major in the [out, in] layout",
     "fc weights, constant right operands of gemm and matmul (2-D), lstm/gru gate matrices, and 1x1 conv weights "
     "with block_convs=1; dense or block-sparse; not the stem unless include_stem=1", pass_prune_block},
    {"prune-bcr", "weights that are constants",
     "each eligible weight matrix has BCR sparsity: cut into bcr_block blocks, every block keeps the same number of "
     "whole columns (floor(bcr_col_rate x columns) removed, smallest norms first) and of whole rows among them "
     "(floor(bcr_row_rate x rows) removed)",
     "the layers prune-block takes, dense or BCR-sparse; not the stem unless include_stem=1", pass_prune_bcr},
    {"prune-unstructured", "weights that are constants",
     "each eligible weight has unstructured sparsity with floor(rate x weights) of its smallest weights removed",
     "the weights of conv, fc, gemm, matmul, lstm and gru that are dense or unstructured-sparse; not the stem "
     "unless include_stem=1", pass_prune_unstructured},
    {"reorder", "pattern-sparse conv weights (after prune-pattern / prune-connectivity)",
     "filters of each pattern-pruned conv sorted by kept kernels (most first), then pattern mix; the permutation "
     "in attribute out_perm; same outputs",
     "2-D convs with group 1 whose weight is pattern-sparse and whose weight and bias no other layer reads",
     pass_reorder},
    {"share", "a verified model (any ops; usually a group of models, pdc_model_group)",
     "same outputs, bit for bit; constants with identical contents (shape, bits, sparsity) stored once; a layer "
     "with the same op, attributes and inputs as an earlier one computed once (unless it writes a graph output); "
     "no memory plan if anything was shared",
     NULL, pass_share},
    {"schedule", "concrete shapes (no symbolic input dims)",
     "attribute step on every layer (ir/arena.h): the layers in an order where layers of one step are independent "
     "chains of at most `lanes` per step, paired only when their FLOPs are within `pair_ratio` (default 2; 0: any) of each other; a conv's or "
     "fc's epilogue layers stay with it; no memory plan (run plan after it)",
     NULL, pass_schedule},
    {"plan", "concrete shapes (no symbolic input dims)",
     "attribute arena_offsets on every layer: activations in one arena, overlapping only when never live at the "
     "same time", NULL, pass_plan},
};
#define N_PASSES (sizeof table / sizeof table[0])

const pass_info *pass_table(size_t *n)
{
    *n = N_PASSES;
    return table;
}

const pass_info *pass_find(const char *name)
{
    for (size_t i = 0; i < N_PASSES; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

static void known_passes(char *buf, size_t cap)
{
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_PASSES && pos < cap; i++) {
        int w = snprintf(buf + pos, cap - pos, "%s%s", i ? ", " : "", table[i].name);
        if (w < 0) break;
        pos += (size_t)w;
    }
}

/* ------------------------------------------------------------------ comma lists */

/* The next comma-separated item of *s (spaces around it trimmed) into [*b, *e); advances *s.
 * Returns 0 at the end of the text. */
static int next_item(const char **s, const char **b, const char **e)
{
    const char *p = *s;
    if (!p) return 0;
    const char *comma = strchr(p, ',');
    const char *end = comma ? comma : p + strlen(p);
    *s = comma ? comma + 1 : NULL;
    while (p < end && isspace((unsigned char)*p)) p++;
    while (end > p && isspace((unsigned char)end[-1])) end--;
    *b = p;
    *e = end;
    return 1;
}

/* ------------------------------------------------------------------ pipeline texts */

const char *pass_pipeline_options(const char *pipeline)
{
    const char *w = pipeline;
    for (;;) {
        while (*w && isspace((unsigned char)*w)) w++;
        const char *end = w;
        while (*end && !isspace((unsigned char)*end)) end++;
        if (w == end || memchr(w, '=', (size_t)(end - w))) return w;
        w = end;
    }
}

/* The passes of a pipeline text (before its options), a copy owned by the caller (pdc_free). */
static char *passes_of(const pdc_context *ctx, const char *pipeline)
{
    size_t n = (size_t)(pass_pipeline_options(pipeline) - pipeline);
    char *p = pdc_alloc(ctx, n + 1);
    if (!p) return NULL;
    memcpy(p, pipeline, n);
    p[n] = 0;
    return p;
}

pdc_status pass_pipeline_split(const pdc_context *ctx, const char *pipeline, char **passes_out, ir_attrs *options)
{
    char *passes = passes_of(ctx, pipeline);
    pdc_status st = passes ? PDC_OK : PDC_ERR_OUT_OF_MEMORY;
    for (const char *w = pass_pipeline_options(pipeline); !st && *w;) {
        size_t n = strcspn(w, " \t\n\r\v\f");
        const char *eq = memchr(w, '=', n);
        char *word = eq && eq > w ? pdc_alloc(ctx, n + 1) : NULL;
        if (!eq || eq == w)
            st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "pipeline \"%s\": '%.*s' is not an option NAME=VALUE", pipeline,
                           (int)n, w);
        else if (!word)
            st = PDC_ERR_OUT_OF_MEMORY;
        if (!st) {
            memcpy(word, w, n);
            word[n] = 0;
            word[eq - w] = 0; /* word: the name, word + (eq - w) + 1: the value */
            if (ir_attrs_find(options, word))
                st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s is given twice: in the pipeline \"%s\" and in the options",
                               word, pipeline);
            else
                st = ir_attrs_set_string(ctx, options, word, word + (eq - w) + 1);
        }
        pdc_free(word);
        w += n;
        while (*w && isspace((unsigned char)*w)) w++;
    }
    if (st) {
        pdc_free(passes);
        return st;
    }
    *passes_out = passes;
    return PDC_OK;
}

/* The passes part of pipeline: non-empty, comma-separated known names. */
static pdc_status check_passes(const pdc_context *ctx, const char *pipeline, const char *passes)
{
    const char *s = passes, *b, *e;
    size_t i = 0;
    char known[512];
    while (next_item(&s, &b, &e)) {
        known_passes(known, sizeof known);
        if (b == e)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pipeline \"%s\": pass %zu is empty (known passes: %s)", pipeline,
                             i + 1, known);
        int found = 0;
        for (size_t k = 0; k < N_PASSES && !found; k++)
            found = strlen(table[k].name) == (size_t)(e - b) && !memcmp(table[k].name, b, (size_t)(e - b));
        if (!found)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "unknown pass '%.*s' in pipeline \"%s\" (known passes: %s)",
                             (int)(e - b), b, pipeline, known);
        i++;
    }
    return PDC_OK;
}

pdc_status pass_pipeline_check(const pdc_context *ctx, const char *pipeline)
{
    if (!pipeline) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "pipeline is NULL");
    ir_attrs inline_options = {0, 0, NULL};
    char *passes;
    pdc_status st = pass_pipeline_split(ctx, pipeline, &passes, &inline_options); /* checks the options' form */
    ir_attrs_free(&inline_options);
    if (st) return st;
    st = check_passes(ctx, pipeline, passes);
    pdc_free(passes);
    return st;
}

/* ------------------------------------------------------------------ options */

void pass_options_init(pass_options *opt, const pdc_context *ctx)
{
    memset(opt, 0, sizeof *opt);
    opt->verify = ctx ? ctx->verify : 1;
    opt->patterns = 8;
    opt->pattern_size = 4;
    opt->connectivity.global = 0.5;
    opt->kgs_go = opt->kgs_gc = 4;
    opt->kgs_rate.global = 0.5;
    opt->block_h = 1;
    opt->block_w = 4;
    opt->block_rate.global = 0.5;
    opt->bcr_h = opt->bcr_w = 8;
    opt->bcr_col_rate.global = 0.5;
    opt->unstructured.global = 0.5;
    opt->n_pattern_kernels = 1;
    opt->pattern_kernels[0][1] = opt->pattern_kernels[0][2] = 3;
    snprintf(opt->pattern_kernels_text, sizeof opt->pattern_kernels_text, "3x3");
    opt->print_flags = PDC_PRINT_ELIDE_WEIGHTS;
    opt->lanes = 2;
    opt->pair_ratio = 2;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) pdc_free(names[i]);
    pdc_free(names);
}

static void free_rates(pass_rates *r)
{
    for (size_t i = 0; i < r->n; i++) pdc_free(r->items[i].layer);
    pdc_free(r->items);
    r->items = NULL;
    r->n = 0;
}

void pass_options_free(pass_options *opt)
{
    free_names(opt->layers, opt->n_layers);
    free_names(opt->skip, opt->n_skip);
    pdc_free(opt->layer_hits);
    free_rates(&opt->connectivity);
    free_rates(&opt->kgs_rate);
    free_rates(&opt->block_rate);
    free_rates(&opt->bcr_col_rate);
    free_rates(&opt->bcr_row_rate);
    free_rates(&opt->unstructured);
    pdc_free(opt->print_after);
    memset(opt, 0, sizeof *opt);
}

static const char known_options[] =
    "patterns, pattern_size, connectivity, block, block_rate, bcr_block, bcr_col_rate, bcr_row_rate, "
    "unstructured_rate, layers, skip, include_stem, pattern_kernels, block_convs, lanes, pair_ratio, print_after, print_file, "
    "print_weights, kgs_group, kgs_keep, kgs_rate, kgs_masks";

/* An attribute as text (strings as they are, numbers formatted), for uniform parsing. */
static const char *attr_text(const ir_attr *a, char *buf, size_t cap)
{
    switch (a->type) {
    case IR_ATTR_STRING: return a->s;
    case IR_ATTR_INT: snprintf(buf, cap, "%" PRId64, a->i); return buf;
    case IR_ATTR_FLOAT: snprintf(buf, cap, "%.17g", (double)a->f); return buf;
    case IR_ATTR_INTS: break;
    }
    return NULL;
}

static pdc_status int_option(const pdc_context *ctx, const ir_attr *a, int64_t lo, int64_t hi, int64_t *out)
{
    char buf[64];
    const char *t = attr_text(a, buf, sizeof buf);
    char *end;
    errno = 0;
    long long v = t ? strtoll(t, &end, 10) : 0;
    if (!t || a->type == IR_ATTR_FLOAT || end == t || *end || errno || v < lo || v > hi)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected an integer in %" PRId64 "..%" PRId64 ", got %s%s%s",
                         a->name, lo, hi, t ? "\"" : "", t ? t : "a list", t ? "\"" : "");
    *out = v;
    return PDC_OK;
}

static pdc_status parse_rate(const pdc_context *ctx, const char *option, const char *b, const char *e, double *out)
{
    char buf[64];
    size_t n = (size_t)(e - b);
    if (n == 0 || n >= sizeof buf)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected a rate in [0, 1), got \"%.*s\"", option, (int)n, b);
    memcpy(buf, b, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || *end || errno)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected a rate in [0, 1), got \"%s\"", option, buf);
    if (!(v >= 0.0 && v < 1.0))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: rate %s is outside [0, 1)", option, buf);
    *out = v;
    return PDC_OK;
}

static char *dup_range(const pdc_context *ctx, const char *b, const char *e)
{
    char *s = pdc_alloc(ctx, (size_t)(e - b) + 1);
    if (s) {
        memcpy(s, b, (size_t)(e - b));
        s[e - b] = '\0';
    }
    return s;
}

/* "RATE", "LAYER=RATE" entries, comma-separated; a float attribute is one global rate. */
static pdc_status rates_option(const pdc_context *ctx, const ir_attr *a, pass_rates *out)
{
    if (a->type == IR_ATTR_FLOAT || a->type == IR_ATTR_INT) {
        double v = a->type == IR_ATTR_FLOAT ? (double)a->f : (double)a->i;
        if (!(v >= 0.0 && v < 1.0))
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: rate %g is outside [0, 1)", a->name, v);
        free_rates(out);
        out->global = v;
        return PDC_OK;
    }
    if (a->type != IR_ATTR_STRING)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected a rate or a string \"RATE,LAYER=RATE,...\"",
                         a->name);
    pass_rates r = {out->global, 0, NULL};
    size_t cap = 0, globals = 0;
    pdc_status st = PDC_OK;
    const char *s = a->s, *b, *e;
    while (!st && next_item(&s, &b, &e)) {
        const char *eq = NULL;
        for (const char *p = b; p < e; p++)
            if (*p == '=') eq = p; /* the last '=': layer names may contain one */
        if (!eq) {
            if (globals++)
                st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: \"%s\" gives more than one global rate", a->name,
                               a->s);
            else st = parse_rate(ctx, a->name, b, e, &r.global);
            continue;
        }
        const char *ne = eq;
        while (ne > b && isspace((unsigned char)ne[-1])) ne--;
        const char *rb = eq + 1;
        while (rb < e && isspace((unsigned char)*rb)) rb++;
        double v = 0;
        if (ne == b) {
            st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: entry \"%.*s\" has no layer name before '='", a->name,
                           (int)(e - b), b);
            break;
        }
        if ((st = parse_rate(ctx, a->name, rb, e, &v))) break;
        if ((st = pdc_grow(ctx, (void **)&r.items, &cap, r.n + 1, sizeof *r.items))) break;
        char *name = dup_range(ctx, b, ne);
        if (!name) {
            st = PDC_ERR_OUT_OF_MEMORY;
            break;
        }
        for (size_t i = 0; i < r.n && !st; i++)
            if (!strcmp(r.items[i].layer, name))
                st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: layer '%s' is given twice", a->name, name);
        if (st) {
            pdc_free(name);
            break;
        }
        r.items[r.n++] = (pass_rate){name, v};
    }
    if (!st && !globals && !r.n)
        st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected a rate in [0, 1), got \"%s\"", a->name, a->s);
    if (st) {
        free_rates(&r);
        return st;
    }
    free_rates(out);
    *out = r;
    return PDC_OK;
}

static pdc_status names_option(const pdc_context *ctx, const ir_attr *a, char ***names, size_t *n)
{
    if (a->type != IR_ATTR_STRING)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected a string of comma-separated layer names", a->name);
    char **list = NULL;
    size_t cnt = 0, cap = 0;
    pdc_status st = PDC_OK;
    const char *s = a->s, *b, *e;
    while (!st && next_item(&s, &b, &e)) {
        if (b == e) {
            st = pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: \"%s\" has an empty layer name", a->name, a->s);
            break;
        }
        if ((st = pdc_grow(ctx, (void **)&list, &cap, cnt + 1, sizeof *list))) break;
        if (!(list[cnt] = dup_range(ctx, b, e))) st = PDC_ERR_OUT_OF_MEMORY;
        else cnt++;
    }
    if (st) {
        free_names(list, cnt);
        return st;
    }
    free_names(*names, *n);
    *names = list;
    *n = cnt;
    return PDC_OK;
}

/* "RxC" or "RxC:RATE" (option block; bcr_block takes no rate: *rate_out NULL) */
static pdc_status block_option(const pdc_context *ctx, const char *name, const ir_attr *a, int64_t *h, int64_t *w,
                               pass_rates *rate_out)
{
    const char *form = rate_out ? "ROWSxCOLS[:RATE]" : "ROWSxCOLS";
    if (a->type != IR_ATTR_STRING)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option %s: expected a string %s, e.g. \"1x4\"", name, form);
    const char *s = a->s;
    char *end;
    errno = 0;
    long long r = isdigit((unsigned char)*s) ? strtoll(s, &end, 10) : 0;
    long long c = 0;
    if (r >= 1 && r <= IR_DIM_MAX && !errno && *end == 'x' && isdigit((unsigned char)end[1])) {
        const char *cs = end + 1;
        c = strtoll(cs, &end, 10);
    } else {
        r = 0;
    }
    if (!r || errno || c < 1 || c > IR_DIM_MAX || (*end && (*end != ':' || !rate_out)))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "option %s: \"%s\" is not a block shape %s with dims in 1..%d (e.g. \"1x4\"%s)", name, s, form,
                         IR_DIM_MAX, rate_out ? ", \"4x4:0.8\"" : "");
    if (*end == ':') {
        double v;
        pdc_status st = parse_rate(ctx, name, end + 1, end + strlen(end), &v);
        if (st) return st;
        free_rates(rate_out);
        rate_out->global = v;
    }
    *h = r;
    *w = c;
    return PDC_OK;
}

/* "KHxKW,KDxKHxKW,..." (odd sizes, at least 3x3 / 3x3x3, at most 64 entries) or "all". */
static pdc_status pattern_kernels_option(const pdc_context *ctx, pass_options *opt, const ir_attr *a)
{
    static const char want[] =
        "expected \"all\" or kernel sizes KHxKW or KDxKHxKW separated by commas, e.g. \"3x3,5x5,3x3x3\"";
    if (a->type != IR_ATTR_STRING) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option pattern_kernels: %s", want);
    const char *s = a->s, *b, *e;
    if (next_item(&s, &b, &e) && !s && e - b == 3 && !memcmp(b, "all", 3)) {
        opt->pattern_kernels_all = 1;
        opt->n_pattern_kernels = 0;
        snprintf(opt->pattern_kernels_text, sizeof opt->pattern_kernels_text, "all");
        return PDC_OK;
    }
    int64_t sizes[PASS_MAX_KERNEL_SIZES][3] = {{0}};
    size_t n = 0;
    char text[sizeof opt->pattern_kernels_text] = "";
    size_t len = 0;
    s = a->s;
    while (next_item(&s, &b, &e)) {
        /* 2 or 3 runs of digits joined by 'x', nothing else; values past 99 are simply too large */
        const char *p = b;
        int64_t k[3] = {0, 0, 0};
        int parts = 0, ok = 1;
        while (ok && parts < 3) {
            int digits = 0;
            for (; p < e && isdigit((unsigned char)*p); p++, digits++)
                k[parts] = digits < 3 ? k[parts] * 10 + (*p - '0') : 1000;
            ok = digits > 0;
            parts += ok;
            if (!ok || p == e || *p != 'x') break;
            p++;
        }
        if (!ok || parts < 2 || p != e)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option pattern_kernels: \"%.*s\" in \"%s\" is not a kernel "
                             "size (%s)", (int)(e - b), b, a->s, want);
        int64_t kd = parts == 3 ? k[0] : 0, kh = k[parts - 2], kw = k[parts - 1];
        if (kh < 3 || kw < 3 || kh % 2 == 0 || kw % 2 == 0 || (parts == 3 && (kd < 3 || kd % 2 == 0)) ||
            (kd ? kd : 1) * kh * kw > IR_MAX_PATTERN_WINDOW)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option pattern_kernels: %.*s in \"%s\" cannot be "
                             "pattern-pruned (kernel sizes must be odd, at least 3x3 and at most %d entries)",
                             (int)(e - b), b, a->s, IR_MAX_PATTERN_WINDOW);
        int dup = 0;
        for (size_t i = 0; i < n; i++) dup |= sizes[i][0] == kd && sizes[i][1] == kh && sizes[i][2] == kw;
        if (dup) continue;
        if (n == PASS_MAX_KERNEL_SIZES)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option pattern_kernels: more than %d sizes in \"%s\"",
                             PASS_MAX_KERNEL_SIZES, a->s);
        sizes[n][0] = kd;
        sizes[n][1] = kh;
        sizes[n++][2] = kw;
        if (kd) len += (size_t)snprintf(text + len, sizeof text - len, "%s%" PRId64 "x", len ? "," : "", kd);
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%" PRId64 "x%" PRId64, len && !kd ? "," : "", kh, kw);
    }
    memcpy(opt->pattern_kernels, sizes, sizeof sizes);
    opt->n_pattern_kernels = n;
    opt->pattern_kernels_all = 0;
    memcpy(opt->pattern_kernels_text, text, sizeof text);
    return PDC_OK;
}

/* "GOxGC": the kernel group of prune-kgs. */
static pdc_status kgs_group_option(const pdc_context *ctx, pass_options *opt, const ir_attr *a)
{
    long long go = 0, gc = 0;
    const char *s = a->type == IR_ATTR_STRING ? a->s : "";
    char *end = NULL;
    errno = 0;
    if (isdigit((unsigned char)*s)) go = strtoll(s, &end, 10);
    if (go >= 1 && !errno && *end == 'x' && isdigit((unsigned char)end[1])) gc = strtoll(end + 1, &end, 10);
    if (go < 1 || gc < 1 || errno || go > IR_DIM_MAX || gc > IR_DIM_MAX || *end)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "option kgs_group: %s%s%s is not a kernel group OUTxIN with sides in 1..%d (e.g. \"4x4\")",
                         a->type == IR_ATTR_STRING ? "\"" : "", a->type == IR_ATTR_STRING ? a->s : "a number",
                         a->type == IR_ATTR_STRING ? "\"" : "", IR_DIM_MAX);
    opt->kgs_go = go;
    opt->kgs_gc = gc;
    return PDC_OK;
}

pdc_status pass_options_set(const pdc_context *ctx, pass_options *opt, const ir_attr *a)
{
    const char *n = a->name;
    pdc_status st;
    int64_t v;
    if (!strcmp(n, "patterns")) {
        if ((st = int_option(ctx, a, 1, INT32_MAX, &v))) return st;
        opt->patterns = (size_t)v;
    } else if (!strcmp(n, "pattern_size")) {
        if ((st = int_option(ctx, a, 1, IR_MAX_PATTERN_WINDOW, &v))) return st;
        opt->pattern_size = (size_t)v;
    } else if (!strcmp(n, "connectivity")) {
        return rates_option(ctx, a, &opt->connectivity);
    } else if (!strcmp(n, "kgs_group")) {
        return kgs_group_option(ctx, opt, a);
    } else if (!strcmp(n, "kgs_keep")) {
        if ((st = int_option(ctx, a, 0, IR_MAX_PATTERN_WINDOW, &v))) return st;
        opt->kgs_keep = (size_t)v;
    } else if (!strcmp(n, "kgs_masks")) {
        if ((st = int_option(ctx, a, 0, IR_MAX_PATTERN_WINDOW, &v))) return st;
        opt->kgs_masks = (size_t)v;
    } else if (!strcmp(n, "kgs_rate")) {
        return rates_option(ctx, a, &opt->kgs_rate);
    } else if (!strcmp(n, "block")) {
        return block_option(ctx, "block", a, &opt->block_h, &opt->block_w, &opt->block_rate);
    } else if (!strcmp(n, "block_rate")) {
        return rates_option(ctx, a, &opt->block_rate);
    } else if (!strcmp(n, "bcr_block")) {
        return block_option(ctx, "bcr_block", a, &opt->bcr_h, &opt->bcr_w, NULL);
    } else if (!strcmp(n, "bcr_col_rate")) {
        return rates_option(ctx, a, &opt->bcr_col_rate);
    } else if (!strcmp(n, "bcr_row_rate")) {
        return rates_option(ctx, a, &opt->bcr_row_rate);
    } else if (!strcmp(n, "unstructured_rate")) {
        return rates_option(ctx, a, &opt->unstructured);
    } else if (!strcmp(n, "layers")) {
        if ((st = names_option(ctx, a, &opt->layers, &opt->n_layers))) return st;
        pdc_free(opt->layer_hits);
        opt->layer_hits = pdc_calloc(ctx, opt->n_layers ? opt->n_layers : 1, sizeof *opt->layer_hits);
        if (!opt->layer_hits) return PDC_ERR_OUT_OF_MEMORY;
    } else if (!strcmp(n, "skip")) {
        return names_option(ctx, a, &opt->skip, &opt->n_skip);
    } else if (!strcmp(n, "include_stem")) {
        if ((st = int_option(ctx, a, 0, 1, &v))) return st;
        opt->include_stem = (int)v;
    } else if (!strcmp(n, "pattern_kernels")) {
        return pattern_kernels_option(ctx, opt, a);
    } else if (!strcmp(n, "block_convs")) {
        if ((st = int_option(ctx, a, 0, 1, &v))) return st;
        opt->block_convs = (int)v;
    } else if (!strcmp(n, "lanes")) {
        if ((st = int_option(ctx, a, 1, 64, &v))) return st;
        opt->lanes = (int)v;
    } else if (!strcmp(n, "pair_ratio")) {
        if ((st = int_option(ctx, a, 0, 1000000, &v))) return st;
        opt->pair_ratio = (int)v;
    } else if (!strcmp(n, "print_after")) {
        if (a->type != IR_ATTR_STRING || (strcmp(a->s, "all") && !pass_find(a->s))) {
            char known[512];
            known_passes(known, sizeof known);
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option print_after: expected \"all\" or a pass name (%s), got %s%s%s",
                             known, a->type == IR_ATTR_STRING ? "\"" : "",
                             a->type == IR_ATTR_STRING ? a->s : "a number", a->type == IR_ATTR_STRING ? "\"" : "");
        }
        char *copy = pdc_strdup(ctx, a->s);
        if (!copy) return PDC_ERR_OUT_OF_MEMORY;
        pdc_free(opt->print_after);
        opt->print_after = copy;
    } else if (!strcmp(n, "print_weights")) {
        if ((st = int_option(ctx, a, 0, 1, &v))) return st;
        opt->print_flags = v ? 0 : PDC_PRINT_ELIDE_WEIGHTS;
    } else if (!strcmp(n, "print_file")) {
        /* opened by the caller (lib/api_passes.c); only the type is checked here */
        if (a->type != IR_ATTR_STRING || !*a->s)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "option print_file: expected a file name");
    } else {
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "unknown option '%s' (known options: %s)", n, known_options);
    }
    return PDC_OK;
}

pdc_status pass_options_set_all(const pdc_context *ctx, pass_options *opt, const ir_attrs *attrs)
{
    for (size_t i = 0; attrs && i < attrs->n; i++) {
        pdc_status st = pass_options_set(ctx, opt, &attrs->items[i]);
        if (st) return st;
    }
    if (opt->layers && opt->skip)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "options layers and skip exclude each other (give one of them)");
    return PDC_OK;
}

static pdc_status check_layer_exists(const ir_model *m, const char *option, const char *name)
{
    if (ir_model_find_layer(m, name) >= 0) return PDC_OK;
    return pdc_error(m->ctx, PDC_ERR_NOT_FOUND, "option %s: model '%s' has no layer '%s'", option, m->name, name);
}

pdc_status pass_options_check_model(const ir_model *m, const pass_options *opt)
{
    pdc_status st;
    for (size_t i = 0; i < opt->n_layers; i++)
        if ((st = check_layer_exists(m, "layers", opt->layers[i]))) return st;
    for (size_t i = 0; i < opt->n_skip; i++)
        if ((st = check_layer_exists(m, "skip", opt->skip[i]))) return st;
    const pass_rates *rates[] = {&opt->connectivity, &opt->block_rate, &opt->unstructured, &opt->bcr_col_rate,
                                 &opt->bcr_row_rate, &opt->kgs_rate};
    const char *names[] = {"connectivity", "block_rate", "unstructured_rate", "bcr_col_rate", "bcr_row_rate", "kgs_rate"};
    for (size_t k = 0; k < sizeof rates / sizeof rates[0]; k++)
        for (size_t i = 0; i < rates[k]->n; i++)
            if ((st = check_layer_exists(m, names[k], rates[k]->items[i].layer))) return st;
    return PDC_OK;
}

/* ------------------------------------------------------------------ running */

static pdc_status print_ir(const ir_model *m, const pass_options *opt, const char *pass)
{
    char *text;
    pdc_status st = ir_print(m, opt->print_flags, &text);
    if (st) return st;
    FILE *f = opt->print_to ? opt->print_to : stderr;
    int bad = fprintf(f, "# IR after pass '%s'\n%s", pass, text) < 0 || fflush(f) != 0;
    pdc_free(text);
    if (bad) return pdc_error(m->ctx, PDC_ERR_IO, "print_after: writing the IR after pass '%s' failed", pass);
    return PDC_OK;
}

/* After the pipeline: every layer in `layers` must have been changed by some pass. */
static pdc_status check_hits(const ir_model *m, const char *pipeline, const pass_options *opt)
{
    for (size_t i = 0; i < opt->n_layers; i++) {
        if (opt->layer_hits[i]) continue;
        char hint[1024];
        size_t pos = 0;
        hint[0] = '\0';
        const char *s = pipeline, *b, *e;
        while (next_item(&s, &b, &e) && pos < sizeof hint) {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(e - b), b);
            const pass_info *p = pass_find(name);
            if (!p || !p->applies_to || strstr(hint, p->name)) continue;
            int w = snprintf(hint + pos, sizeof hint - pos, "; %s takes %s", p->name, p->applies_to);
            if (w < 0) break;
            pos += (size_t)w;
        }
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "option layers: layer '%s' is not changed by any pass of pipeline "
                         "\"%s\"%s", opt->layers[i], pipeline,
                         pos ? hint : " (only the prune-* passes and reorder take a layer list)");
    }
    return PDC_OK;
}

static pdc_status run_passes(ir_model *m, const char *pipeline, pass_options *opt);

pdc_status pass_pipeline_run_inplace(ir_model *m, const char *pipeline, pass_options *opt)
{
    pdc_status st = pass_pipeline_check(m->ctx, pipeline);
    if (st) return st;
    char *passes = passes_of(m->ctx, pipeline); /* the options were merged into opt by the caller */
    if (!passes) return PDC_ERR_OUT_OF_MEMORY;
    st = run_passes(m, passes, opt);
    pdc_free(passes);
    return st;
}

static pdc_status run_passes(ir_model *m, const char *pipeline, pass_options *opt)
{
    pdc_status st;
    for (size_t i = 0; i < opt->n_layers; i++) opt->layer_hits[i] = 0;
    const char *s = pipeline, *b, *e;
    while (next_item(&s, &b, &e)) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(e - b), b);
        const pass_info *p = pass_find(name);
        pdc_log(m->ctx, PDC_LOG_DEBUG, "pass %s", p->name);
        pdc_progress(m->ctx, p->name, 0, m->n_layers);
        st = p->fn(m, opt);
        if (st) {
            pdc_error_prefix(m->ctx, "pass '%s'", p->name);
            return st;
        }
        if (opt->verify && (st = ir_verify(m))) {
            pdc_error_prefix(m->ctx, "verifier after pass '%s'", p->name);
            return st;
        }
        if (opt->print_after && (!strcmp(opt->print_after, "all") || !strcmp(opt->print_after, p->name)) &&
            (st = print_ir(m, opt, p->name)))
            return st;
        pdc_progress(m->ctx, p->name, m->n_layers, m->n_layers);
    }
    return check_hits(m, pipeline, opt);
}

pdc_status pass_pipeline_run(ir_model *m, const char *pipeline, pass_options *opt)
{
    pdc_status st = pass_pipeline_check(m->ctx, pipeline);
    if (st) return st;
    if ((st = pass_options_check_model(m, opt))) return st;
    ir_model *work;
    if ((st = ir_model_clone(m, &work))) return st;
    st = pass_pipeline_run_inplace(work, pipeline, opt);
    if (!st) {
        /* The caller's handle is the struct itself: swap contents, then free the old ones. */
        ir_model old = *m;
        *m = *work;
        *work = old;
    }
    ir_model_destroy(work);
    return st;
}
