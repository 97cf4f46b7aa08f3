/*
 * text_print.c - prints a model as IR text (.pdcir). The grammar is documented at the top of
 * ir/text/text_parse.c; ir_parse(ir_print(m)) prints back byte-identically (the tests check this).
 *
 * Floats print with the shortest "%.Ng", N = 6..9, that reads back exactly (N = 9 always does for
 * f32), infinities as inf / -inf, NaN as nan.
 * Float attributes always carry a '.' or an exponent (or are inf/nan) so that they read back as
 * floats, not ints.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* ---- a growable output buffer; the first failure sticks and later appends do nothing */
typedef struct sbuf {
    const pdc_context *ctx;
    char *p;
    size_t len, cap;
    pdc_status st;
} sbuf;

static int sb_reserve(sbuf *b, size_t extra)
{
    size_t need;
    if (b->st != PDC_OK) return 0;
    if (pdc_add_overflow(b->len, extra, &need) || pdc_add_overflow(need, 1, &need)) {
        b->st = pdc_error(b->ctx, PDC_ERR_OVERFLOW, "ir_print: text too large");
        return 0;
    }
    if (need <= b->cap) return 1;
    void *items = b->p;
    size_t cap = b->cap;
    pdc_status st = pdc_grow(b->ctx, &items, &cap, need, 1);
    if (st != PDC_OK) {
        b->st = st;
        return 0;
    }
    b->p = items;
    b->cap = cap;
    return 1;
}

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_putc(sbuf *b, char c) { sb_putn(b, &c, 1); }

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) {
        if (b->st == PDC_OK) b->st = pdc_error(b->ctx, PDC_ERR_INTERNAL, "ir_print: formatting failed");
        return;
    }
    if ((size_t)n < sizeof tmp) {
        sb_putn(b, tmp, (size_t)n);
        return;
    }
    if (!sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* ---- tokens */

/* Characters of a bare (unquoted) name; must match bare_char in text_parse.c. */
static int bare_char(int c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '/' || c == '@' || c == '+' || c == '-';
}

static int name_is_bare(const char *s)
{
    if (!s || !*s || strcmp(s, "-") == 0) return 0;
    for (const char *c = s; *c; c++)
        if (!bare_char((unsigned char)*c)) return 0;
    return 1;
}

static void format_float(float f, int force_float, char *buf, size_t cap)
{
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, "%s", f > 0 ? "inf" : "-inf");
        return;
    }
    /* The shortest of 6..9 significant digits that reads back as the same float: 1e-05 rather
     * than 9.99999975e-06, 0.1 rather than 0.100000001. 9 digits always suffice for f32, and the
     * result depends only on f, so printing what was parsed reproduces the text. */
    int n = 0;
    for (int prec = 6; prec <= 9; prec++) {
        n = snprintf(buf, cap, "%.*g", prec, (double)f);
        if (prec == 9 || strtof(buf, NULL) == f) break;
    }
    if (force_float && n > 0 && (size_t)n + 2 < cap && strspn(buf, "-0123456789") == (size_t)n)
        memcpy(buf + n, ".0", 3);
}

static void sb_quoted(sbuf *b, const char *s)
{
    sb_putc(b, '"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        switch (*c) {
        case '"': sb_puts(b, "\\\""); break;
        case '\\': sb_puts(b, "\\\\"); break;
        case '\n': sb_puts(b, "\\n"); break;
        case '\t': sb_puts(b, "\\t"); break;
        case '\r': sb_puts(b, "\\r"); break;
        default:
            if (*c < 0x20 || *c == 0x7f)
                sb_printf(b, "\\x%02x", (unsigned)*c);
            else
                sb_putc(b, (char)*c);
        }
    }
    sb_putc(b, '"');
}

static void sb_name(sbuf *b, const char *s)
{
    if (name_is_bare(s))
        sb_puts(b, s);
    else
        sb_quoted(b, s ? s : "");
}

static void sb_type(sbuf *b, int rank, const int64_t *dims)
{
    sb_puts(b, "f32[");
    for (int i = 0; i < rank; i++) {
        if (i) sb_putc(b, ',');
        if (dims[i] < 0)
            sb_putc(b, '?');
        else
            sb_printf(b, "%" PRId64, dims[i]);
    }
    sb_putc(b, ']');
}

static void sb_tensor_ref(sbuf *b, const ir_model *m, int t)
{
    if (t < 0 || (size_t)t >= m->n_tensors)
        sb_putc(b, '-');
    else
        sb_name(b, m->tensors[t].name);
}

static void sb_mask(sbuf *b, size_t n, const uint8_t *mask)
{
    if (!sb_reserve(b, n + 2)) return;
    b->p[b->len++] = '"';
    for (size_t i = 0; i < n; i++) b->p[b->len++] = mask[i] ? '1' : '0';
    b->p[b->len++] = '"';
    b->p[b->len] = '\0';
}

static void print_sparsity(sbuf *b, const ir_sparsity *s)
{
    switch (s->kind) {
    case IR_SPARSITY_NONE: return;
    case IR_SPARSITY_PATTERN:
        if (s->kd > 0) sb_printf(b, "  sparsity pattern %" PRId64 "x%" PRId64 "x%" PRId64, s->kd, s->kh, s->kw);
        else sb_printf(b, "  sparsity pattern %" PRId64 "x%" PRId64, s->kh, s->kw);
        if (s->go || s->gc) sb_printf(b, " groups=%" PRId64 "x%" PRId64, s->go, s->gc);
        sb_puts(b, " patterns=[");
        for (size_t i = 0; i < s->n_patterns; i++) sb_printf(b, "%s0x%" PRIx64, i ? ", " : "", s->patterns[i]);
        sb_puts(b, "] kernels=[");
        for (size_t i = 0; i < s->n_kernels; i++) sb_printf(b, "%s%" PRId32, i ? ", " : "", s->kernel_pattern[i]);
        sb_puts(b, "]\n");
        return;
    case IR_SPARSITY_BLOCK:
        sb_printf(b, "  sparsity block %" PRId64 "x%" PRId64 " mask=", s->bh, s->bw);
        sb_mask(b, s->n_blocks, s->block_mask);
        sb_putc(b, '\n');
        return;
    case IR_SPARSITY_UNSTRUCTURED:
        sb_puts(b, "  sparsity unstructured mask=");
        sb_mask(b, s->n_mask, s->mask);
        sb_putc(b, '\n');
        return;
    case IR_SPARSITY_BCR:
        sb_printf(b, "  sparsity bcr %" PRId64 "x%" PRId64 " mask=", s->bh, s->bw);
        sb_mask(b, ir_sparsity_bcr_len(s), s->bcr_keep);
        sb_putc(b, '\n');
        return;
    }
    if (b->st == PDC_OK)
        b->st = pdc_error(b->ctx, PDC_ERR_INTERNAL, "ir_print: unknown sparsity kind %d", (int)s->kind);
}

static void print_const(sbuf *b, const ir_tensor *t, uint32_t flags)
{
    sb_puts(b, "const ");
    sb_name(b, t->name);
    sb_puts(b, " : ");
    sb_type(b, t->rank, t->dims);
    if (flags & PDC_PRINT_ELIDE_WEIGHTS) {
        sb_puts(b, " = dense<elided>\n");
    } else {
        size_t n = 1;
        for (int i = 0; i < t->rank; i++) {
            if (t->dims[i] < 0 || pdc_mul_overflow(n, (size_t)t->dims[i], &n)) {
                if (b->st == PDC_OK)
                    b->st = pdc_error(b->ctx, PDC_ERR_INTERNAL, "ir_print: constant '%s' has a bad shape", t->name);
                return;
            }
        }
        sb_puts(b, " = [");
        char num[48];
        for (size_t i = 0; i < n && b->st == PDC_OK; i++) {
            format_float(t->data ? t->data[i] : 0.0f, 0, num, sizeof num);
            if (i) sb_puts(b, ", ");
            sb_puts(b, num);
        }
        sb_puts(b, "]\n");
    }
    print_sparsity(b, &t->sparsity);
}

static void print_attr(sbuf *b, const ir_attr *a)
{
    char num[48];
    sb_puts(b, a->name);
    sb_putc(b, '=');
    switch (a->type) {
    case IR_ATTR_INT: sb_printf(b, "%" PRId64, a->i); return;
    case IR_ATTR_INTS:
        sb_putc(b, '[');
        for (size_t i = 0; i < a->n; i++) sb_printf(b, "%s%" PRId64, i ? "," : "", a->ints[i]);
        sb_putc(b, ']');
        return;
    case IR_ATTR_FLOAT:
        format_float(a->f, 1, num, sizeof num);
        sb_puts(b, num);
        return;
    case IR_ATTR_STRING: sb_quoted(b, a->s ? a->s : ""); return;
    }
    if (b->st == PDC_OK)
        b->st = pdc_error(b->ctx, PDC_ERR_INTERNAL, "ir_print: attribute '%s' has unknown type %d", a->name,
                          (int)a->type);
}

static void print_layer(sbuf *b, const ir_model *m, const ir_layer *l)
{
    const ir_op_info *info = ir_op_get_info(l->op);
    if (!info) {
        if (b->st == PDC_OK)
            b->st = pdc_error(b->ctx, PDC_ERR_INTERNAL, "ir_print: layer '%s' has unknown op %d", l->name, (int)l->op);
        return;
    }
    sb_puts(b, "layer ");
    sb_name(b, l->name);
    sb_printf(b, " = %s(", info->name);
    for (size_t i = 0; i < l->n_inputs; i++) {
        if (i) sb_puts(b, ", ");
        sb_tensor_ref(b, m, l->inputs[i]);
    }
    sb_puts(b, ") -> (");
    for (size_t i = 0; i < l->n_outputs; i++) {
        if (i) sb_puts(b, ", ");
        int t = l->outputs[i];
        sb_tensor_ref(b, m, t);
        /* rank -1: not known until a symbolic input is fixed; printed without a type */
        if (t >= 0 && (size_t)t < m->n_tensors && m->tensors[t].rank >= 0) {
            sb_puts(b, " : ");
            sb_type(b, m->tensors[t].rank, m->tensors[t].dims);
        }
    }
    sb_putc(b, ')');
    if (l->attrs.n) {
        sb_puts(b, " {");
        for (size_t i = 0; i < l->attrs.n; i++) {
            if (i) sb_puts(b, ", ");
            print_attr(b, &l->attrs.items[i]);
        }
        sb_putc(b, '}');
    }
    sb_putc(b, '\n');
}

pdc_status ir_print(const ir_model *m, uint32_t flags, char **text_out)
{
    if (!m) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "ir_print: model is NULL");
    PDC_CHECK_ARG(m->ctx, text_out, "text_out");
    if (flags & ~(uint32_t)PDC_PRINT_ELIDE_WEIGHTS)
        return pdc_error(m->ctx, PDC_ERR_INVALID_ARG, "ir_print: unknown flags 0x%x", (unsigned)flags);

    sbuf b = {m->ctx, NULL, 0, 0, PDC_OK};
    sb_puts(&b, "pdcir 1\nmodel ");
    sb_quoted(&b, m->name ? m->name : "");
    sb_putc(&b, '\n');
    for (size_t i = 0; i < m->n_inputs; i++) {
        const ir_tensor *t = &m->tensors[m->inputs[i]];
        sb_puts(&b, "input ");
        sb_name(&b, t->name);
        sb_puts(&b, " : ");
        sb_type(&b, t->rank, t->dims);
        sb_putc(&b, '\n');
    }
    for (size_t i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].kind == IR_TENSOR_CONST) print_const(&b, &m->tensors[i], flags);
    for (size_t i = 0; i < m->n_layers; i++) print_layer(&b, m, &m->layers[i]);
    for (size_t i = 0; i < m->n_outputs; i++) {
        sb_puts(&b, "output ");
        sb_tensor_ref(&b, m, m->outputs[i]);
        sb_putc(&b, '\n');
    }
    if (b.st != PDC_OK) {
        pdc_free(b.p);
        return b.st;
    }
    *text_out = b.p;
    return PDC_OK;
}
