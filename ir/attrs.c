/* attrs.c - the ordered attribute list of a layer, and the public pdc_attrs handle over it. */
#include <math.h>
#include <string.h>

#include "ir/ir.h"

int ir_attr_name_valid(const char *name)
{
    if (!name || !(*name == '_' || (*name >= 'a' && *name <= 'z') || (*name >= 'A' && *name <= 'Z'))) return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return 0;
    }
    return 1;
}

const ir_attr *ir_attrs_find(const ir_attrs *a, const char *name)
{
    for (size_t i = 0; a && i < a->n; i++)
        if (!strcmp(a->items[i].name, name)) return &a->items[i];
    return NULL;
}

static void attr_clear_value(ir_attr *at)
{
    pdc_free(at->s);
    pdc_free(at->ints);
    at->s = NULL;
    at->ints = NULL;
    at->n = 0;
    at->i = 0;
    at->f = 0;
}

static pdc_status attr_find_or_add(const pdc_context *ctx, ir_attrs *a, const char *name, ir_attr **out)
{
    if (!ir_attr_name_valid(name))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "invalid attribute name \"%s\" (expected [A-Za-z_][A-Za-z0-9_]*)",
                         name ? name : "(null)");
    for (size_t i = 0; i < a->n; i++) {
        if (!strcmp(a->items[i].name, name)) {
            *out = &a->items[i];
            return PDC_OK;
        }
    }
    pdc_status st = pdc_grow(ctx, (void **)&a->items, &a->cap, a->n + 1, sizeof *a->items);
    if (st) return st;
    char *copy = pdc_strdup(ctx, name);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    ir_attr *at = &a->items[a->n++];
    memset(at, 0, sizeof *at);
    at->name = copy;
    *out = at;
    return PDC_OK;
}

/* Returns the slot for `name` (existing or new, after validating the name) with its old value cleared
 * and the given type. The value is filled by the caller, who allocates first (`owned`, freed here
 * on failure) so that a failure changes nothing. */
static pdc_status attr_slot(const pdc_context *ctx, ir_attrs *a, const char *name, ir_attr_type type, void *owned,
                            ir_attr **out)
{
    pdc_status st = attr_find_or_add(ctx, a, name, out);
    if (st) {
        pdc_free(owned);
        return st;
    }
    attr_clear_value(*out);
    (*out)->type = type;
    return PDC_OK;
}

pdc_status ir_attrs_set_int(const pdc_context *ctx, ir_attrs *a, const char *name, int64_t v)
{
    ir_attr *at;
    pdc_status st = attr_slot(ctx, a, name, IR_ATTR_INT, NULL, &at);
    if (st) return st;
    at->i = v;
    return PDC_OK;
}

pdc_status ir_attrs_set_ints(const pdc_context *ctx, ir_attrs *a, const char *name, size_t n, const int64_t *v)
{
    if (n && !v) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "attribute %s: values is NULL", name ? name : "(null)");
    int64_t *copy = pdc_calloc(ctx, n ? n : 1, sizeof *copy);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    if (n) memcpy(copy, v, n * sizeof *copy);
    ir_attr *at;
    pdc_status st = attr_slot(ctx, a, name, IR_ATTR_INTS, copy, &at);
    if (st) return st;
    at->n = n;
    at->ints = copy;
    return PDC_OK;
}

pdc_status ir_attrs_set_float(const pdc_context *ctx, ir_attrs *a, const char *name, float v)
{
    if (isnan(v)) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "attribute %s: value is NaN", name ? name : "(null)");
    ir_attr *at;
    pdc_status st = attr_slot(ctx, a, name, IR_ATTR_FLOAT, NULL, &at);
    if (st) return st;
    at->f = v;
    return PDC_OK;
}

pdc_status ir_attrs_set_string(const pdc_context *ctx, ir_attrs *a, const char *name, const char *v)
{
    if (!v) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "attribute %s: value is NULL", name ? name : "(null)");
    char *copy = pdc_strdup(ctx, v);
    if (!copy) return PDC_ERR_OUT_OF_MEMORY;
    ir_attr *at;
    pdc_status st = attr_slot(ctx, a, name, IR_ATTR_STRING, copy, &at);
    if (st) return st;
    at->s = copy;
    return PDC_OK;
}

void ir_attrs_remove(ir_attrs *a, const char *name)
{
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->items[i].name, name)) continue;
        attr_clear_value(&a->items[i]);
        pdc_free(a->items[i].name);
        memmove(&a->items[i], &a->items[i + 1], (a->n - i - 1) * sizeof a->items[i]);
        a->n--;
        return;
    }
}

int ir_attrs_equal(const ir_attrs *a, const ir_attrs *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const ir_attr *x = &a->items[i], *y = ir_attrs_find(b, x->name);
        if (!y || x->type != y->type) return 0;
        switch (x->type) {
        case IR_ATTR_INT: if (x->i != y->i) return 0; break;
        case IR_ATTR_FLOAT: if (memcmp(&x->f, &y->f, sizeof x->f)) return 0; break;
        case IR_ATTR_STRING: if (strcmp(x->s, y->s)) return 0; break;
        case IR_ATTR_INTS:
            if (x->n != y->n || (x->n && memcmp(x->ints, y->ints, x->n * sizeof *x->ints))) return 0;
            break;
        }
    }
    return 1;
}

void ir_attrs_free(ir_attrs *a)
{
    for (size_t i = 0; i < a->n; i++) {
        attr_clear_value(&a->items[i]);
        pdc_free(a->items[i].name);
    }
    pdc_free(a->items);
    memset(a, 0, sizeof *a);
}

pdc_status ir_attrs_copy(const pdc_context *ctx, ir_attrs *dst, const ir_attrs *src)
{
    ir_attrs tmp = {0};
    pdc_status st = PDC_OK;
    for (size_t i = 0; src && i < src->n && !st; i++) {
        const ir_attr *at = &src->items[i];
        switch (at->type) {
        case IR_ATTR_INT: st = ir_attrs_set_int(ctx, &tmp, at->name, at->i); break;
        case IR_ATTR_INTS: st = ir_attrs_set_ints(ctx, &tmp, at->name, at->n, at->ints); break;
        case IR_ATTR_FLOAT: st = ir_attrs_set_float(ctx, &tmp, at->name, at->f); break;
        case IR_ATTR_STRING: st = ir_attrs_set_string(ctx, &tmp, at->name, at->s); break;
        }
    }
    if (st) {
        ir_attrs_free(&tmp);
        return st;
    }
    *dst = tmp;
    return PDC_OK;
}

int64_t ir_attr_int(const ir_attrs *a, const char *name, int64_t dflt)
{
    const ir_attr *at = ir_attrs_find(a, name);
    return at && at->type == IR_ATTR_INT ? at->i : dflt;
}

float ir_attr_float(const ir_attrs *a, const char *name, float dflt)
{
    const ir_attr *at = ir_attrs_find(a, name);
    if (!at) return dflt;
    if (at->type == IR_ATTR_FLOAT) return at->f;
    if (at->type == IR_ATTR_INT) return (float)at->i; /* "alpha=1" means 1.0 */
    return dflt;
}

const char *ir_attr_string(const ir_attrs *a, const char *name, const char *dflt)
{
    const ir_attr *at = ir_attrs_find(a, name);
    return at && at->type == IR_ATTR_STRING ? at->s : dflt;
}

const int64_t *ir_attr_ints(const ir_attrs *a, const char *name, size_t *n)
{
    const ir_attr *at = ir_attrs_find(a, name);
    if (at && at->type == IR_ATTR_INTS) {
        *n = at->n;
        return at->ints;
    }
    *n = 0;
    return NULL;
}

/* ---------------------------------------------------------------- public handle */

PDC_API pdc_status pdc_attrs_create(pdc_context *ctx, pdc_attrs **attrs_out)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, attrs_out, "attrs_out");
    pdc_attrs *a = pdc_calloc(ctx, 1, sizeof *a);
    if (!a) return PDC_ERR_OUT_OF_MEMORY;
    a->ctx = ctx;
    pdc_object_created(ctx);
    *attrs_out = a;
    return PDC_OK;
}

PDC_API void pdc_attrs_destroy(pdc_attrs *attrs)
{
    if (!attrs) return;
    pdc_object_destroyed(attrs->ctx);
    ir_attrs_free(&attrs->list);
    pdc_free(attrs);
}

#define ATTRS_CHECK(attrs)                                                                       \
    do {                                                                                         \
        if (!(attrs)) return pdc_error(NULL, PDC_ERR_INVALID_ARG, "%s: attrs is NULL", __func__); \
    } while (0)

PDC_API pdc_status pdc_attrs_set_int(pdc_attrs *attrs, const char *name, int64_t value)
{
    ATTRS_CHECK(attrs);
    return ir_attrs_set_int(attrs->ctx, &attrs->list, name, value);
}

PDC_API pdc_status pdc_attrs_set_ints(pdc_attrs *attrs, const char *name, size_t n, const int64_t *values)
{
    ATTRS_CHECK(attrs);
    return ir_attrs_set_ints(attrs->ctx, &attrs->list, name, n, values);
}

PDC_API pdc_status pdc_attrs_set_float(pdc_attrs *attrs, const char *name, float value)
{
    ATTRS_CHECK(attrs);
    return ir_attrs_set_float(attrs->ctx, &attrs->list, name, value);
}

PDC_API pdc_status pdc_attrs_set_string(pdc_attrs *attrs, const char *name, const char *value)
{
    ATTRS_CHECK(attrs);
    return ir_attrs_set_string(attrs->ctx, &attrs->list, name, value);
}
