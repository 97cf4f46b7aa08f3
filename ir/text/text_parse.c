/*
 * text_parse.c - reads the IR text form (.pdcir) back into a model, through the ir/model.c API.
 *
 * The .pdcir grammar
 * ------------------
 * A .pdcir file is line-oriented: one statement per line (a statement never spans lines). Blank
 * lines are ignored; '#' starts a comment that runs to the end of the line (outside quoted strings).
 * Spaces, tabs and '\r' separate tokens anywhere within a line. ir_print writes exactly this form,
 * and parsing then printing again reproduces the text byte for byte.
 *
 *     pdcir 1                                       # header: must be the first statement
 *     model "tiny"                                  # optional; must follow the header (default "model")
 *     input x : f32[1,1,8,8]                        # graph input; '?' is a symbolic dim: f32[?,3,224,224]
 *     const w1 : f32[16,1,3,3] = [0.1, -0.2, ...]   # all prod(dims) weights, row-major
 *       sparsity pattern 3x3 patterns=[0x1d, 0xba] kernels=[0, 1, -1, ...]
 *     const b1 : f32[16] = dense<elided>            # weights left out: they read back as zeros
 *     const fcw : f32[10,32] = [...]
 *       sparsity block 1x4 mask="1011..."           # one '0'/'1' per block, row-major
 *     const e : f32[4] = [1, 0, 0, 2]
 *       sparsity unstructured mask="1001"           # one '0'/'1' per element
 *     layer conv1 = conv(x, w1, b1) -> (t1 : f32[1,16,8,8]) {strides=[1,1], pads=[1,1,1,1], group=1}
 *     layer lstm1 = lstm(x, w, r, -, -, h0) -> (y : f32[8,1,1,16], -, yc : f32[1,1,16]) {hidden_size=16}
 *     output t1                                     # graph output (a layer's output), in order
 *
 * Statements
 *   pdcir VERSION          version 1 only.
 *   model NAME             the model's name (printed quoted).
 *   input NAME : TYPE      dims >= 1 or '?'.
 *   const NAME : TYPE = [V, V, ...]     exactly prod(dims) values; f32[] is a scalar (one value).
 *   const NAME : TYPE = dense<elided>   zero-filled (ir_print with PDC_PRINT_ELIDE_WEIGHTS).
 *   sparsity ...           describes the const on the line just before (blank and comment lines may
 *                          come between); at most one per const. Forms:
 *                            sparsity pattern KHxKW [groups=GOxGC] patterns=[P, ...] kernels=[K, ...]
 *                              P: bitmask over the KHxKW window (printed in hex), K: pattern index
 *                              per kernel (o*(C/group)+c) or -1 for a pruned kernel; a 3-D conv's
 *                              window is KDxKHxKW (KD >= 1); groups: kernel groups of GO output x GC
 *                              input channels that share one pattern (kernel-group sparsity);
 *                            sparsity block BHxBW mask="0110..."   (blocks of the matrix view);
 *                            sparsity unstructured mask="0110..."  (one per element).
 *   layer NAME = OP(IN, ...) -> (OUT [: TYPE], ...) [{ATTR=VALUE, ...}]
 *                          OP is an op name from ir/ops/ops.def. IN names a tensor defined earlier;
 *                          OUT names a new tensor. '-' is an absent optional input or output.
 *                          ': TYPE' on an output is optional; when given it must equal the inferred
 *                          shape. ir_print leaves it out when the shape is not known yet (the
 *                          layer depends on a symbolic input). Attributes are kept in the order
 *                          written.
 *   output NAME            marks a layer output as a graph output.
 *
 * Tokens
 *   NAME    bare if it is made of [A-Za-z0-9_./@+-] and is not "-"; otherwise quoted: "onnx::Conv_12",
 *           "with space", "-". Not empty; no control characters (the model refuses them); other
 *           bytes, UTF-8 included, are written as they are.
 *   STRING  "..." with escapes \" \\ \n \t \r \xHH (not \x00); no raw line breaks.
 *   TYPE    f32[D, ...]: D an integer or '?' (symbolic; inputs and layer outputs only); f32[] is rank 0.
 *   VALUE   an integer (42, -1, 0x1f) -> int; a number with '.' or an exponent, or inf, -inf, nan
 *           -> float (ir_print always writes floats that way: 1.0, 1e-05, -inf; NaN is refused);
 *           [I, ...] -> ints ([] is an empty list); "..." -> string.
 *   V       a float: ir_print writes the shortest "%.Ng" (N = 6..9) that reads back exactly, so
 *           0.1 stays 0.1 and every f32 survives bit for bit (-0 included); also inf, -inf and
 *           nan (every NaN prints as nan). An integer such as 3 or 0x10 is accepted too.
 *
 * Errors
 *   Malformed text fails with PDC_ERR_PARSE and "line L, column C: expected ..., found ...". A
 *   declared output shape that differs from the inferred one fails with PDC_ERR_SHAPE (also with line
 *   and column). Errors reported by the model builder (bad shapes, arity, invalid sparsity) keep their
 *   status and get "line L: " in front. On any failure no model is returned.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

typedef struct parser {
    pdc_context *ctx;
    const char *s;
    size_t len, pos;
    size_t line, line_start;
    ir_model *m;
    int last_const; /* tensor index of the const a following 'sparsity' line describes, or -1 */
    /* temporaries of the current statement, freed by stmt_reset */
    char **strs;
    size_t n_strs, cap_strs;
    float *vals;
    size_t n_vals, cap_vals;
    int64_t *ints;
    size_t n_ints, cap_ints;
    ir_attrs attrs;
    ir_sparsity sp;
} parser;

/* One output of a layer statement. */
typedef struct out_decl {
    char *name; /* NULL: absent */
    size_t pos;
    int has_type, rank;
    int64_t dims[PDC_MAX_RANK];
} out_decl;

typedef struct numtok {
    size_t start, end;
    int is_float, is_hex;
    int special; /* 0, 'i' (inf) or 'n' (nan) */
    int neg;
} numtok;

#define STMT_MAX_ARGS 256

static void stmt_reset(parser *p)
{
    for (size_t i = 0; i < p->n_strs; i++) pdc_free(p->strs[i]);
    p->n_strs = 0;
    pdc_free(p->vals);
    p->vals = NULL;
    p->n_vals = p->cap_vals = 0;
    pdc_free(p->ints);
    p->ints = NULL;
    p->n_ints = p->cap_ints = 0;
    ir_attrs_free(&p->attrs);
    ir_sparsity_free(&p->sp);
}

/* ---------------------------------------------------------------- errors */

static size_t col_of(const parser *p, size_t pos) { return pos - p->line_start + 1; }

static int is_bare(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '/' || c == '@' || c == '+' || c == '-';
}

static int is_alpha(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int is_alnum(int c) { return is_alpha(c) || is_digit(c); }
static int is_hex(int c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* What is at pos, for "found ..." in messages. */
static void describe(const parser *p, size_t pos, char *buf, size_t cap)
{
    if (pos >= p->len) {
        snprintf(buf, cap, "end of input");
        return;
    }
    unsigned char c = (unsigned char)p->s[pos];
    if (c == '\n') {
        snprintf(buf, cap, "end of line");
        return;
    }
    if (c < 0x20 || c >= 0x7f) {
        snprintf(buf, cap, "byte 0x%02x", (unsigned)c);
        return;
    }
    size_t n = 1;
    if (is_bare(c))
        while (pos + n < p->len && n < 32 && is_bare((unsigned char)p->s[pos + n])) n++;
    snprintf(buf, cap, "'%.*s%s'", (int)n, p->s + pos, n == 32 ? "..." : "");
}

static pdc_status verr_at(parser *p, pdc_status st, size_t pos, const char *fmt, va_list ap)
{
    char msg[768];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return pdc_error(p->ctx, st, "line %zu, column %zu: %s", p->line, col_of(p, pos), msg);
}

static pdc_status err_at(parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static pdc_status err_at(parser *p, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pdc_status st = verr_at(p, PDC_ERR_PARSE, pos, fmt, ap);
    va_end(ap);
    return st;
}

static pdc_status err_status_at(parser *p, pdc_status status, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static pdc_status err_status_at(parser *p, pdc_status status, size_t pos, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pdc_status st = verr_at(p, status, pos, fmt, ap);
    va_end(ap);
    return st;
}

/* "expected WHAT, found ..." at the current position. */
static pdc_status expected(parser *p, const char *what)
{
    char found[64];
    describe(p, p->pos, found, sizeof found);
    return err_at(p, p->pos, "expected %s, found %s", what, found);
}

/* A failure reported by the model builder: keep its status, prefix the line. */
static pdc_status builder_error(parser *p, pdc_status st)
{
    pdc_error_prefix(p->ctx, "line %zu", p->line);
    return st;
}

/* ---------------------------------------------------------------- scanning */

static int peek(const parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c == ' ' || c == '\t' || c == '\r') {
            p->pos++;
        } else if (c == '#') {
            while (p->pos < p->len && p->s[p->pos] != '\n') p->pos++;
        } else {
            break;
        }
    }
}

static void newline(parser *p)
{
    p->pos++;
    p->line++;
    p->line_start = p->pos;
}

static void skip_blank_lines(parser *p)
{
    for (;;) {
        skip_ws(p);
        if (peek(p) != '\n') return;
        newline(p);
    }
}

static int accept(parser *p, char c)
{
    skip_ws(p);
    if (peek(p) != (unsigned char)c) return 0;
    p->pos++;
    return 1;
}

static pdc_status expect_char(parser *p, char c, const char *what)
{
    return accept(p, c) ? PDC_OK : expected(p, what);
}

static pdc_status expect_eol(parser *p)
{
    skip_ws(p);
    int c = peek(p);
    if (c < 0) return PDC_OK;
    if (c == '\n') {
        newline(p);
        return PDC_OK;
    }
    return expected(p, "end of line");
}

/* A word [A-Za-z_][A-Za-z0-9_]*; returns its length (0 if none; position unchanged). */
static size_t read_word(parser *p, size_t *start)
{
    skip_ws(p);
    *start = p->pos;
    if (!is_alpha(peek(p))) return 0;
    while (p->pos < p->len && is_alnum((unsigned char)p->s[p->pos])) p->pos++;
    return p->pos - *start;
}

static int word_is(const parser *p, size_t start, size_t n, const char *w)
{
    return strlen(w) == n && memcmp(p->s + start, w, n) == 0;
}

/* Expects the word w (a keyword). */
static pdc_status expect_word(parser *p, const char *w, const char *what)
{
    size_t start;
    size_t n = read_word(p, &start);
    if (n && word_is(p, start, n, w)) return PDC_OK;
    p->pos = start;
    return expected(p, what);
}

static pdc_status keep_str(parser *p, char *s)
{
    pdc_status st = pdc_grow(p->ctx, (void **)&p->strs, &p->cap_strs, p->n_strs + 1, sizeof *p->strs);
    if (st) {
        pdc_free(s);
        return st;
    }
    p->strs[p->n_strs++] = s;
    return PDC_OK;
}

static pdc_status copy_span(parser *p, size_t start, size_t n, char **out)
{
    char *s = pdc_alloc(p->ctx, n + 1);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    memcpy(s, p->s + start, n);
    s[n] = '\0';
    *out = s;
    return keep_str(p, s);
}

/* A quoted string at the current position (which is the opening '"'). */
static pdc_status parse_quoted(parser *p, char **out)
{
    size_t start = p->pos, i = p->pos + 1;
    /* The decoded string is never longer than the source span: find the end first. */
    size_t cap = 0;
    while (i < p->len && p->s[i] != '"' && p->s[i] != '\n') {
        if (p->s[i] == '\\' && i + 1 < p->len && p->s[i + 1] != '\n') i++;
        i++;
    }
    if (i >= p->len || p->s[i] != '"') return err_at(p, start, "unterminated string (no closing '\"' on this line)");
    cap = i - start;
    char *s = pdc_alloc(p->ctx, cap);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    pdc_status st = keep_str(p, s);
    if (st) return st;
    size_t n = 0;
    for (i = start + 1; p->s[i] != '"'; i++) {
        unsigned char c = (unsigned char)p->s[i];
        if (c == '\0') return err_at(p, i, "NUL byte in string");
        if (c != '\\') {
            s[n++] = (char)c;
            continue;
        }
        size_t esc = i++;
        switch (p->s[i]) {
        case '"': s[n++] = '"'; break;
        case '\\': s[n++] = '\\'; break;
        case 'n': s[n++] = '\n'; break;
        case 't': s[n++] = '\t'; break;
        case 'r': s[n++] = '\r'; break;
        case 'x': {
            if (i + 2 >= p->len || !is_hex((unsigned char)p->s[i + 1]) || !is_hex((unsigned char)p->s[i + 2]))
                return err_at(p, esc, "expected two hex digits after \\x in string");
            char hex[3] = {p->s[i + 1], p->s[i + 2], 0};
            unsigned long v = strtoul(hex, NULL, 16);
            if (!v) return err_at(p, esc, "\\x00 is not allowed in strings");
            s[n++] = (char)v;
            i += 2;
            break;
        }
        default: {
            char found[64];
            describe(p, i, found, sizeof found);
            return err_at(p, esc, "unknown escape in string (expected \\\" \\\\ \\n \\t \\r or \\xHH), found %s",
                          found);
        }
        }
    }
    s[n] = '\0';
    p->pos = i + 1;
    *out = s;
    return PDC_OK;
}

/* A tensor/layer/model name. With allow_dash, a bare '-' means absent (*out = NULL). */
static pdc_status parse_name(parser *p, const char *what, int allow_dash, char **out, size_t *at)
{
    skip_ws(p);
    *at = p->pos;
    int c = peek(p);
    if (c == '"') {
        pdc_status st = parse_quoted(p, out);
        if (!st && !**out) return err_at(p, *at, "expected %s, found an empty name \"\"", what);
        return st;
    }
    if (c < 0 || !is_bare(c)) return expected(p, what);
    size_t start = p->pos;
    while (p->pos < p->len && is_bare((unsigned char)p->s[p->pos])) p->pos++;
    if (p->pos - start == 1 && p->s[start] == '-') {
        if (allow_dash) {
            *out = NULL;
            return PDC_OK;
        }
        p->pos = start;
        return expected(p, what);
    }
    return copy_span(p, start, p->pos - start, out);
}

/* Scans a number token (not converted yet). */
static pdc_status scan_number(parser *p, const char *what, numtok *t)
{
    skip_ws(p);
    size_t i = p->pos;
    memset(t, 0, sizeof *t);
    t->start = i;
    if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) {
        t->neg = p->s[i] == '-';
        i++;
    }
    if (i < p->len && is_alpha((unsigned char)p->s[i])) {
        size_t w = i;
        while (i < p->len && is_alpha((unsigned char)p->s[i])) i++;
        if (i - w == 3 && !memcmp(p->s + w, "inf", 3))
            t->special = 'i';
        else if (i - w == 3 && !memcmp(p->s + w, "nan", 3))
            t->special = 'n';
        else
            return expected(p, what);
        t->is_float = 1;
    } else if (i + 1 < p->len && p->s[i] == '0' && (p->s[i + 1] == 'x' || p->s[i + 1] == 'X')) {
        i += 2;
        size_t d = i;
        while (i < p->len && is_hex((unsigned char)p->s[i])) i++;
        if (i == d) return err_at(p, t->start, "malformed number: no hex digits after 0x");
        t->is_hex = 1;
    } else {
        size_t digits = 0;
        while (i < p->len && is_digit((unsigned char)p->s[i])) i++, digits++;
        if (i < p->len && p->s[i] == '.') {
            t->is_float = 1;
            i++;
            while (i < p->len && is_digit((unsigned char)p->s[i])) i++, digits++;
        }
        if (!digits) return expected(p, what);
        if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
            t->is_float = 1;
            i++;
            if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
            size_t d = i;
            while (i < p->len && is_digit((unsigned char)p->s[i])) i++;
            if (i == d) return err_at(p, t->start, "malformed number: no digits in the exponent");
        }
    }
    if (i < p->len && (is_alnum((unsigned char)p->s[i]) || p->s[i] == '.')) {
        size_t e = i;
        while (e < p->len && e - t->start < 32 && is_bare((unsigned char)p->s[e])) e++;
        return err_at(p, t->start, "malformed number '%.*s'", (int)(e - t->start), p->s + t->start);
    }
    t->end = i;
    p->pos = i;
    return PDC_OK;
}

static pdc_status tok_int64(parser *p, const numtok *t, const char *what, int64_t *v)
{
    size_t n = t->end - t->start;
    if (t->is_float)
        return err_at(p, t->start, "expected %s, found '%.*s'", what, (int)(n < 40 ? n : 40), p->s + t->start);
    char buf[48];
    if (n >= sizeof buf) return err_at(p, t->start, "integer '%.40s...' is out of range (int64)", p->s + t->start);
    memcpy(buf, p->s + t->start, n);
    buf[n] = '\0';
    errno = 0;
    char *end;
    long long x = strtoll(buf, &end, t->is_hex ? 16 : 10);
    if (errno == ERANGE || *end) return err_at(p, t->start, "integer '%s' is out of range (int64)", buf);
    *v = (int64_t)x;
    return PDC_OK;
}

static pdc_status tok_uint64(parser *p, const numtok *t, const char *what, uint64_t *v)
{
    size_t n = t->end - t->start;
    if (t->is_float || t->neg)
        return err_at(p, t->start, "expected %s, found '%.*s'", what, (int)(n < 40 ? n : 40), p->s + t->start);
    char buf[48];
    if (n >= sizeof buf) return err_at(p, t->start, "integer '%.40s...' is out of range (uint64)", p->s + t->start);
    memcpy(buf, p->s + t->start, n);
    buf[n] = '\0';
    errno = 0;
    char *end;
    unsigned long long x = strtoull(buf, &end, t->is_hex ? 16 : 10);
    if (errno == ERANGE || *end) return err_at(p, t->start, "integer '%s' is out of range (uint64)", buf);
    *v = (uint64_t)x;
    return PDC_OK;
}

static pdc_status tok_float(parser *p, const numtok *t, float *v)
{
    if (t->special == 'n') {
        *v = t->neg ? -NAN : NAN;
        return PDC_OK;
    }
    if (t->special == 'i') {
        *v = t->neg ? -INFINITY : INFINITY;
        return PDC_OK;
    }
    size_t n = t->end - t->start;
    char buf[400];
    if (n >= sizeof buf) return err_at(p, t->start, "number '%.40s...' is too long", p->s + t->start);
    memcpy(buf, p->s + t->start, n);
    buf[n] = '\0';
    char *end;
    float x = strtof(buf, &end);
    if (*end) return err_at(p, t->start, "malformed number '%s'", buf);
    if (isinf(x)) return err_at(p, t->start, "number '%s' is out of range for f32", buf);
    *v = x;
    return PDC_OK;
}

static pdc_status parse_int64(parser *p, const char *what, int64_t *v, size_t *at)
{
    numtok t;
    pdc_status st = scan_number(p, what, &t);
    if (st) return st;
    if (at) *at = t.start;
    return tok_int64(p, &t, what, v);
}

/* A positive decimal integer made of digits only (for the "3x3" of sparsity lines). */
static pdc_status parse_digits(parser *p, const char *what, int64_t *v)
{
    size_t start = p->pos;
    int64_t x = 0;
    if (!is_digit(peek(p))) return expected(p, what);
    while (is_digit(peek(p))) {
        if (__builtin_mul_overflow(x, 10, &x) || __builtin_add_overflow(x, p->s[p->pos] - '0', &x))
            return err_at(p, start, "integer is out of range (int64)");
        p->pos++;
    }
    *v = x;
    return PDC_OK;
}

/* KHxKW */
static pdc_status parse_pair(parser *p, const char *what, int64_t *a, int64_t *b)
{
    skip_ws(p);
    pdc_status st = parse_digits(p, what, a);
    if (st) return st;
    if (peek(p) != 'x') return expected(p, "'x' (as in 3x3)");
    p->pos++;
    return parse_digits(p, what, b);
}

static void format_type(int rank, const int64_t *dims, char *buf, size_t cap)
{
    if (rank < 0) {
        snprintf(buf, cap, "unknown until the symbolic inputs are fixed (leave the type out)");
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "f32[");
    for (int i = 0; i < rank && n < cap; i++) {
        if (dims[i] < 0)
            n += (size_t)snprintf(buf + n, cap - n, "%s?", i ? "," : "");
        else
            n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, i ? "," : "", dims[i]);
    }
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* TYPE: f32[D, ...]. Symbolic '?' only if allow_symbolic; numeric dims must be >= min_dim. */
static pdc_status parse_type(parser *p, int allow_symbolic, int64_t min_dim, int *rank, int64_t *dims)
{
    size_t start;
    size_t n = read_word(p, &start);
    if (!n) return expected(p, "a type such as f32[1,3,224,224]");
    if (!word_is(p, start, n, "f32"))
        return err_at(p, start, "unsupported dtype '%.*s' (expected f32)", (int)(n < 32 ? n : 32), p->s + start);
    pdc_status st = expect_char(p, '[', "'[' after f32");
    if (st) return st;
    *rank = 0;
    if (accept(p, ']')) return PDC_OK;
    for (;;) {
        skip_ws(p);
        size_t at = p->pos;
        int64_t d;
        if (peek(p) == '?') {
            if (!allow_symbolic)
                return err_at(p, at, "symbolic dimension '?' is not allowed here (constants need concrete shapes)");
            p->pos++;
            d = -1;
        } else {
            st = parse_int64(p, "a dimension (integer or ?)", &d, &at);
            if (st) return st;
            if (d < min_dim)
                return err_at(p, at, "bad dimension %" PRId64 " (expected >= %" PRId64 "%s)", d, min_dim,
                              allow_symbolic ? " or ?" : "");
        }
        if (*rank == PDC_MAX_RANK) return err_at(p, at, "too many dimensions (at most %d)", PDC_MAX_RANK);
        dims[(*rank)++] = d;
        if (accept(p, ',')) continue;
        return expect_char(p, ']', "',' or ']'");
    }
}

/* ---------------------------------------------------------------- statements */

static pdc_status check_new_tensor(parser *p, const char *name, size_t at)
{
    if (ir_model_find_tensor(p->m, name) >= 0) return err_at(p, at, "tensor '%s' is already defined", name);
    return PDC_OK;
}

static pdc_status stmt_input(parser *p)
{
    char *name;
    size_t at;
    int rank;
    int64_t dims[PDC_MAX_RANK];
    pdc_status st = parse_name(p, "an input name", 0, &name, &at);
    if (!st) st = expect_char(p, ':', "':' and a type");
    if (!st) st = parse_type(p, 1, 1, &rank, dims);
    if (!st) st = check_new_tensor(p, name, at);
    if (st) return st;
    if (rank == 0) return err_at(p, at, "input '%s' needs at least one dimension", name);
    st = ir_model_add_input(p->m, name, rank, dims);
    return st ? builder_error(p, st) : PDC_OK;
}

static pdc_status push_val(parser *p, float v)
{
    pdc_status st = pdc_grow(p->ctx, (void **)&p->vals, &p->cap_vals, p->n_vals + 1, sizeof *p->vals);
    if (st) return st;
    p->vals[p->n_vals++] = v;
    return PDC_OK;
}

static pdc_status push_int(parser *p, int64_t v)
{
    pdc_status st = pdc_grow(p->ctx, (void **)&p->ints, &p->cap_ints, p->n_ints + 1, sizeof *p->ints);
    if (st) return st;
    p->ints[p->n_ints++] = v;
    return PDC_OK;
}

static pdc_status stmt_const(parser *p)
{
    char *name;
    size_t at;
    int rank;
    int64_t dims[PDC_MAX_RANK];
    pdc_status st = parse_name(p, "a constant name", 0, &name, &at);
    if (!st) st = expect_char(p, ':', "':' and a type");
    skip_ws(p);
    size_t type_at = p->pos;
    if (!st) st = parse_type(p, 0, 1, &rank, dims);
    if (!st) st = check_new_tensor(p, name, at);
    if (!st) st = expect_char(p, '=', "'=' and the weights");
    if (st) return st;
    size_t numel = 1;
    for (int i = 0; i < rank; i++)
        if (pdc_mul_overflow(numel, (size_t)dims[i], &numel) || numel > SIZE_MAX / sizeof(float))
            return err_at(p, type_at, "constant '%s': element count overflows", name);

    skip_ws(p);
    size_t list_at = p->pos;
    int elided = 0;
    if (peek(p) == '[') {
        p->pos++;
        if (!accept(p, ']')) {
            for (;;) {
                numtok t;
                float v = 0;
                st = scan_number(p, "a number", &t);
                if (!st) st = tok_float(p, &t, &v);
                if (!st) st = push_val(p, v);
                if (st) return st;
                if (accept(p, ',')) continue;
                st = expect_char(p, ']', "',' or ']'");
                if (st) return st;
                break;
            }
        }
        if (p->n_vals != numel)
            return err_at(p, list_at, "constant '%s': expected %zu values for its shape, got %zu", name, numel,
                          p->n_vals);
    } else {
        st = expect_word(p, "dense", "'[' and the weights, or dense<elided>");
        if (!st) st = expect_char(p, '<', "'<' (as in dense<elided>)");
        if (!st) st = expect_word(p, "elided", "'elided' (as in dense<elided>)");
        if (!st) st = expect_char(p, '>', "'>' (as in dense<elided>)");
        if (st) return st;
        elided = 1;
    }
    float *data = elided ? NULL : p->vals;
    if (!elided) {
        p->vals = NULL; /* ownership passes to the model, also on failure */
        p->n_vals = p->cap_vals = 0;
    }
    st = ir_model_add_constant_owned(p->m, name, rank, dims, data);
    if (st) return builder_error(p, st);
    p->last_const = ir_model_find_tensor(p->m, name);
    return PDC_OK;
}

/* mask="0110..." into *mask (n entries). */
static pdc_status parse_mask(parser *p, uint8_t **mask, size_t *n)
{
    pdc_status st = expect_word(p, "mask", "mask=\"...\"");
    if (!st) st = expect_char(p, '=', "'=' after mask");
    if (!st) {
        skip_ws(p);
        if (peek(p) != '"') st = expected(p, "a quoted mask of '0' and '1' characters");
    }
    if (st) return st;
    size_t start = p->pos, i = p->pos + 1;
    while (i < p->len && (p->s[i] == '0' || p->s[i] == '1')) i++;
    if (i >= p->len || p->s[i] == '\n') return err_at(p, start, "unterminated mask string");
    if (p->s[i] != '"') {
        char found[64];
        describe(p, i, found, sizeof found);
        return err_at(p, i, "expected '0', '1' or '\"' in mask, found %s", found);
    }
    size_t count = i - start - 1;
    uint8_t *m = pdc_alloc(p->ctx, count ? count : 1);
    if (!m) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < count; k++) m[k] = p->s[start + 1 + k] == '1';
    *mask = m;
    *n = count;
    p->pos = i + 1;
    return PDC_OK;
}

static pdc_status stmt_sparsity(parser *p, size_t kw_at)
{
    if (p->last_const < 0)
        return err_at(p, kw_at, "'sparsity' must directly follow the const line it describes");
    const ir_tensor *t = &p->m->tensors[p->last_const];
    if (t->sparsity.kind != IR_SPARSITY_NONE)
        return err_at(p, kw_at, "constant '%s' already has a sparsity line", t->name);
    size_t start;
    size_t n = read_word(p, &start);
    ir_sparsity *sp = &p->sp;
    pdc_status st = PDC_OK;
    if (n && word_is(p, start, n, "pattern")) {
        sp->kind = IR_SPARSITY_PATTERN;
        size_t cap_pat = 0, cap_ker = 0;
        st = parse_pair(p, "the pattern window (KHxKW or KDxKHxKW)", &sp->kh, &sp->kw);
        if (!st && peek(p) == 'x') { /* a 3-D window: the pair read was KDxKH */
            p->pos++;
            sp->kd = sp->kh;
            sp->kh = sp->kw;
            st = parse_digits(p, "the pattern window (KDxKHxKW)", &sp->kw);
            if (!st && sp->kd < 1) return err_at(p, kw_at, "pattern window depth KD must be at least 1");
        }
        if (st) return st;
        size_t gstart, gn = read_word(p, &gstart);
        if (gn && word_is(p, gstart, gn, "groups")) { /* kernel groups (RT3D KGS) */
            st = expect_char(p, '=', "'=' after groups");
            if (!st) st = parse_pair(p, "the kernel group (GOxGC)", &sp->go, &sp->gc);
            if (!st && (sp->go < 1 || sp->gc < 1)) return err_at(p, gstart, "kernel group GOxGC must be at least 1x1");
        } else {
            p->pos = gstart;
        }
        if (!st) st = expect_word(p, "patterns", "patterns=[...]");
        if (!st) st = expect_char(p, '=', "'=' after patterns");
        if (!st) st = expect_char(p, '[', "'[' and the pattern masks");
        if (st) return st;
        if (!accept(p, ']')) {
            for (;;) {
                numtok tk;
                uint64_t v = 0;
                st = scan_number(p, "a pattern mask", &tk);
                if (!st) st = tok_uint64(p, &tk, "a pattern mask (non-negative integer)", &v);
                if (!st)
                    st = pdc_grow(p->ctx, (void **)&sp->patterns, &cap_pat, sp->n_patterns + 1, sizeof *sp->patterns);
                if (st) return st;
                sp->patterns[sp->n_patterns++] = v;
                if (accept(p, ',')) continue;
                st = expect_char(p, ']', "',' or ']'");
                if (st) return st;
                break;
            }
        }
        st = expect_word(p, "kernels", "kernels=[...]");
        if (!st) st = expect_char(p, '=', "'=' after kernels");
        if (!st) st = expect_char(p, '[', "'[' and the kernel pattern ids");
        if (st) return st;
        if (!accept(p, ']')) {
            for (;;) {
                int64_t v = 0;
                size_t at;
                st = parse_int64(p, "a kernel pattern id (integer)", &v, &at);
                if (st) return st;
                if (v < INT32_MIN || v > INT32_MAX)
                    return err_at(p, at, "kernel pattern id %" PRId64 " is out of range", v);
                st = pdc_grow(p->ctx, (void **)&sp->kernel_pattern, &cap_ker, sp->n_kernels + 1,
                              sizeof *sp->kernel_pattern);
                if (st) return st;
                sp->kernel_pattern[sp->n_kernels++] = (int32_t)v;
                if (accept(p, ',')) continue;
                st = expect_char(p, ']', "',' or ']'");
                if (st) return st;
                break;
            }
        }
    } else if (n && word_is(p, start, n, "block")) {
        sp->kind = IR_SPARSITY_BLOCK;
        st = parse_pair(p, "the block shape (BHxBW)", &sp->bh, &sp->bw);
        if (!st) st = parse_mask(p, &sp->block_mask, &sp->n_blocks);
        if (st) return st;
    } else if (n && word_is(p, start, n, "bcr")) {
        /* mask="..." holds bh row flags then bw column flags per block */
        sp->kind = IR_SPARSITY_BCR;
        size_t flags = 0;
        st = parse_pair(p, "the BCR block shape (BHxBW)", &sp->bh, &sp->bw);
        if (st) return st;
        skip_ws(p);
        const size_t at = p->pos;
        if ((st = parse_mask(p, &sp->bcr_keep, &flags))) return st;
        if (sp->bh < 1 || sp->bw < 1 || flags % (size_t)(sp->bh + sp->bw))
            return err_at(p, at, "%zu BCR flags are not whole blocks of %" PRId64 " row and %" PRId64 " column flags",
                          flags, sp->bh, sp->bw);
        sp->n_blocks = flags / (size_t)(sp->bh + sp->bw);
    } else if (n && word_is(p, start, n, "unstructured")) {
        sp->kind = IR_SPARSITY_UNSTRUCTURED;
        st = parse_mask(p, &sp->mask, &sp->n_mask);
        if (st) return st;
    } else {
        p->pos = start;
        return expected(p, "a sparsity kind (pattern, block, unstructured or bcr)");
    }
    /* Trailing junk is a syntax error, reported before the builder checks the description. */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] != '\n') return expected(p, "end of line");
    st = ir_model_set_sparsity(p->m, p->last_const, sp); /* takes sp's arrays either way */
    return st ? builder_error(p, st) : PDC_OK;
}

static pdc_status parse_attrs(parser *p)
{
    if (!accept(p, '{')) return PDC_OK;
    if (accept(p, '}')) return PDC_OK;
    for (;;) {
        size_t at;
        size_t n = read_word(p, &at);
        if (!n) return expected(p, "an attribute name");
        char *name;
        pdc_status st = copy_span(p, at, n, &name);
        if (st) return st;
        if (ir_attrs_find(&p->attrs, name)) return err_at(p, at, "attribute '%s' is given twice", name);
        st = expect_char(p, '=', "'=' after the attribute name");
        if (st) return st;
        skip_ws(p);
        size_t val_at = p->pos;
        int c = peek(p);
        if (c == '"') {
            char *s;
            st = parse_quoted(p, &s);
            if (!st) st = ir_attrs_set_string(p->ctx, &p->attrs, name, s);
        } else if (c == '[') {
            p->pos++;
            p->n_ints = 0;
            if (!accept(p, ']')) {
                for (;;) {
                    int64_t v = 0;
                    st = parse_int64(p, "an integer", &v, NULL);
                    if (!st) st = push_int(p, v);
                    if (st) return st;
                    if (accept(p, ',')) continue;
                    st = expect_char(p, ']', "',' or ']'");
                    if (st) return st;
                    break;
                }
            }
            int64_t none = 0;
            st = ir_attrs_set_ints(p->ctx, &p->attrs, name, p->n_ints, p->n_ints ? p->ints : &none);
        } else {
            numtok t;
            st = scan_number(p, "an attribute value (integer, float, [integers] or \"string\")", &t);
            if (st) return st;
            if (t.is_float) {
                float f;
                st = tok_float(p, &t, &f);
                if (!st) st = ir_attrs_set_float(p->ctx, &p->attrs, name, f);
            } else {
                int64_t v = 0;
                st = tok_int64(p, &t, "an integer", &v);
                if (!st) st = ir_attrs_set_int(p->ctx, &p->attrs, name, v);
            }
        }
        if (st == PDC_ERR_PARSE) return st;
        if (st) {
            pdc_error_prefix(p->ctx, "line %zu, column %zu", p->line, col_of(p, val_at));
            return st;
        }
        if (accept(p, ',')) continue;
        return expect_char(p, '}', "',' or '}'");
    }
}

static pdc_status stmt_layer(parser *p)
{
    char *name, *ins[STMT_MAX_ARGS];
    size_t at, in_at[STMT_MAX_ARGS], n_in = 0, n_out = 0;
    out_decl outs[STMT_MAX_ARGS];
    pdc_status st = parse_name(p, "a layer name", 0, &name, &at);
    if (!st) st = expect_char(p, '=', "'=' and an op");
    if (st) return st;
    size_t op_at;
    size_t n = read_word(p, &op_at);
    if (!n) return expected(p, "an op name");
    char *opname;
    st = copy_span(p, op_at, n, &opname);
    if (st) return st;
    ir_op op;
    if (!ir_op_from_name(opname, &op)) return err_at(p, op_at, "unknown op '%s'", opname);
    st = expect_char(p, '(', "'(' and the inputs");
    if (st) return st;
    if (!accept(p, ')')) {
        for (;;) {
            if (n_in == STMT_MAX_ARGS) return err_at(p, p->pos, "too many inputs (at most %d)", STMT_MAX_ARGS);
            st = parse_name(p, "an input tensor name or '-'", 1, &ins[n_in], &in_at[n_in]);
            if (st) return st;
            n_in++;
            if (accept(p, ',')) continue;
            st = expect_char(p, ')', "',' or ')'");
            if (st) return st;
            break;
        }
    }
    skip_ws(p);
    if (p->pos + 1 < p->len && p->s[p->pos] == '-' && p->s[p->pos + 1] == '>')
        p->pos += 2;
    else
        return expected(p, "'->' and the outputs");
    st = expect_char(p, '(', "'(' and the outputs");
    if (st) return st;
    for (;;) {
        if (n_out == STMT_MAX_ARGS) return err_at(p, p->pos, "too many outputs (at most %d)", STMT_MAX_ARGS);
        out_decl *o = &outs[n_out];
        memset(o, 0, sizeof *o);
        st = parse_name(p, "an output tensor name or '-'", 1, &o->name, &o->pos);
        if (st) return st;
        if (o->name && accept(p, ':')) {
            o->has_type = 1;
            st = parse_type(p, 1, 0, &o->rank, o->dims);
            if (st) return st;
        }
        n_out++;
        if (accept(p, ',')) continue;
        st = expect_char(p, ')', "',' or ')'");
        if (st) return st;
        break;
    }
    st = parse_attrs(p);
    if (st) return st;

    if (ir_model_find_layer(p->m, name) >= 0) return err_at(p, at, "layer '%s' is already defined", name);
    for (size_t i = 0; i < n_in; i++)
        if (ins[i] && ir_model_find_tensor(p->m, ins[i]) < 0)
            return err_at(p, in_at[i], "unknown tensor '%s' (inputs must be defined on earlier lines)", ins[i]);
    const char *outnames[STMT_MAX_ARGS];
    for (size_t i = 0; i < n_out; i++) {
        outnames[i] = outs[i].name;
        if (!outs[i].name) continue;
        st = check_new_tensor(p, outs[i].name, outs[i].pos);
        if (st) return st;
        for (size_t j = 0; j < i; j++)
            if (outs[j].name && !strcmp(outs[j].name, outs[i].name))
                return err_at(p, outs[i].pos, "tensor '%s' is already defined", outs[i].name);
    }
    st = ir_model_add_layer(p->m, name, op, n_in, (const char *const *)ins, n_out, outnames, &p->attrs);
    if (st) return builder_error(p, st);
    for (size_t i = 0; i < n_out; i++) {
        if (!outs[i].has_type) continue;
        const ir_tensor *t = &p->m->tensors[ir_model_find_tensor(p->m, outs[i].name)];
        int same = t->rank == outs[i].rank;
        for (int d = 0; same && d < t->rank; d++) same = t->dims[d] == outs[i].dims[d];
        if (!same) {
            char want[160], got[160];
            format_type(outs[i].rank, outs[i].dims, want, sizeof want);
            format_type(t->rank, t->dims, got, sizeof got);
            return err_status_at(p, PDC_ERR_SHAPE, outs[i].pos,
                                 "output '%s' of layer '%s' is declared %s but its inferred shape is %s", t->name,
                                 name, want, got);
        }
    }
    return PDC_OK;
}

static pdc_status stmt_output(parser *p)
{
    char *name;
    size_t at;
    pdc_status st = parse_name(p, "a tensor name", 0, &name, &at);
    if (st) return st;
    if (ir_model_find_tensor(p->m, name) < 0) return err_at(p, at, "unknown tensor '%s'", name);
    st = ir_model_mark_output(p->m, name);
    return st ? builder_error(p, st) : PDC_OK;
}

static pdc_status parse_all(parser *p)
{
    skip_blank_lines(p);
    pdc_status st = expect_word(p, "pdcir", "the header 'pdcir 1'");
    if (st) return st;
    int64_t version;
    size_t at;
    st = parse_int64(p, "the format version (pdcir 1)", &version, &at);
    if (st) return st;
    if (version != 1) return err_at(p, at, "unsupported pdcir version %" PRId64 " (expected 1)", version);
    st = expect_eol(p);
    if (st) return st;

    /* optional model line */
    skip_blank_lines(p);
    size_t kw_at;
    size_t n = read_word(p, &kw_at);
    const char *model_name = NULL;
    size_t model_line = p->line;
    if (n && word_is(p, kw_at, n, "model")) {
        char *name;
        st = parse_name(p, "the model name", 0, &name, &at);
        if (!st) st = expect_eol(p);
        if (st) return st;
        model_name = name;
    } else {
        p->pos = kw_at;
    }
    st = ir_model_create(p->ctx, model_name, &p->m);
    if (st) {
        pdc_error_prefix(p->ctx, "line %zu", model_line);
        return st;
    }
    stmt_reset(p);

    for (;;) {
        skip_blank_lines(p);
        if (p->pos >= p->len) break;
        n = read_word(p, &kw_at);
        if (!n) return expected(p, "a statement (input, const, sparsity, layer or output)");
        int keep_const = 0;
        if (word_is(p, kw_at, n, "input")) {
            st = stmt_input(p);
        } else if (word_is(p, kw_at, n, "const")) {
            st = stmt_const(p);
            keep_const = 1;
        } else if (word_is(p, kw_at, n, "sparsity")) {
            st = stmt_sparsity(p, kw_at);
            keep_const = 1;
        } else if (word_is(p, kw_at, n, "layer")) {
            st = stmt_layer(p);
        } else if (word_is(p, kw_at, n, "output")) {
            st = stmt_output(p);
        } else if (word_is(p, kw_at, n, "model")) {
            st = err_at(p, kw_at, "the model statement must come right after the header");
        } else if (word_is(p, kw_at, n, "pdcir")) {
            st = err_at(p, kw_at, "duplicate 'pdcir' header");
        } else {
            st = err_at(p, kw_at, "unknown statement '%.*s' (expected input, const, sparsity, layer or output)",
                        (int)(n < 32 ? n : 32), p->s + kw_at);
        }
        if (!st) st = expect_eol(p);
        if (st) return st;
        if (!keep_const) p->last_const = -1;
        stmt_reset(p);
    }
    return PDC_OK;
}

pdc_status ir_parse(pdc_context *ctx, const char *text, size_t len, ir_model **out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, out, "out");
    if (!text && len) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "ir_parse: text is NULL");
    parser p;
    memset(&p, 0, sizeof p);
    p.ctx = ctx;
    p.s = text ? text : "";
    p.len = len;
    p.line = 1;
    p.last_const = -1;
    pdc_status st = parse_all(&p);
    stmt_reset(&p);
    pdc_free(p.strs);
    if (st) {
        ir_model_destroy(p.m);
        return st;
    }
    *out = p.m;
    return PDC_OK;
}
