/*
 * train_checkpoint.c - training checkpoints: everything a trainer needs to continue bit-exactly.
 *
 * Layout, version 1. Little-endian; f32 is the IEEE-754 bit pattern as a u32, f64 as a u64; str is a
 * u32 byte length and that many bytes (no NUL).
 *
 *   offset  size  field
 *   0       8     magic "PDCTRAIN"
 *   8       4     u32 format version (1)
 *   12      4     u32 flags (0; files with unknown flags are refused)
 *   16      8     u64 payload length P
 *   24      P     payload (below)
 *   24+P    4     u32 CRC-32 (IEEE 802.3, as zlib) of bytes [0, 24+P)
 *   The file is exactly 28 + P bytes.
 *
 * Payload:
 *   str         model name
 *   u32 L, then L x (str layer name, str op name)      the model's structure, checked on load
 *   u32 O, then O x (str option name, str value)       every trainer option, as pdc_trainer_get_option
 *                                                      writes it (exact: floats with 17 digits)
 *   u64         steps taken (the learning-rate schedule's position)
 *   u64 x 4     random state (xoshiro256**)
 *   u8          ADMM on; if 1: f64 rho, str pipeline, u32 A then A x (str name, u8 type 0 int | 1 ints |
 *               2 float | 3 string, value: i64 | u32 n + i64 x n | f32 | str)  the pipeline options
 *   u32 T, then T constant records, in model order:
 *     str         name
 *     u8          rank, i64 x rank dims                 checked on load against the model
 *     u8          flags: bit 0 trained by gradients (optimizer state follows), bit 1 ADMM state follows
 *     f32 x N     values (N = product of dims)
 *     u8          sparsity kind 0 none | 1 pattern | 2 block | 3 unstructured | 4 bcr | 5 pattern (3-D window
 *                 or kernel groups), then as in a .pdc file:
 *                 pattern i64 kh, i64 kw, u64 n, u64 x n masks, u64 k, i32 x k pattern ids;
 *                 block i64 bh, i64 bw, u64 n, u8 x n; unstructured u64 n, u8 x n; 4 bcr i64 bh, i64 bw, u64 n,
 *                 u8 x n*(bh+bw)
 *     bit 0:      f32 x N first moment / momentum, f32 x N second moment
 *     bit 1:      f32 x N ADMM Z, f32 x N ADMM U
 *
 * Saving writes the whole file to a temporary name, fsyncs it and renames it over the old one
 * (pdc_file_write_atomic), so a crash leaves the previous checkpoint or the new one. Loading checks the
 * header, length and CRC before it reads anything, builds the new state completely aside and swaps it
 * in only when everything succeeded, so a refused file leaves the trainer as it was.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "lib/core/crc32.h"
#include "lib/core/fileio.h"
#include "lib/format/format_pdc.h"
#include "lib/train/train.h"
#include "passes/pass_manager.h"

#define CKPT_MAGIC "PDCTRAIN"
#define CKPT_VERSION 1u
#define CKPT_HEADER 24
#define CKPT_MAX_PATTERN_DIM 64

static void put_f64(pdc_buf *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    pdc_buf_put_u64(b, u);
}

static void put_floats(pdc_buf *b, const float *v, size_t n)
{
    uint8_t *p = pdc_buf_append(b, n * 4);
    if (!p) return;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        pdc_store_u32le(p + 4 * i, u);
    }
}

pdc_status tr_checkpoint_save(const pdc_trainer *t, const char *path)
{
    const tr_net *net = t->net;
    const ir_model *m = net->model;
    pdc_buf b;
    pdc_buf_init(&b, t->ctx);
    pdc_buf_put_bytes(&b, CKPT_MAGIC, 8);
    pdc_buf_put_u32(&b, CKPT_VERSION);
    pdc_buf_put_u32(&b, 0);
    pdc_buf_put_u64(&b, 0); /* payload length, patched below */

    pdc_buf_put_string(&b, m->name);
    pdc_buf_put_u32(&b, (uint32_t)m->n_layers);
    for (size_t li = 0; li < m->n_layers; li++) {
        pdc_buf_put_string(&b, m->layers[li].name);
        pdc_buf_put_string(&b, ir_op_get_info(m->layers[li].op)->name);
    }
    size_t n_opts = 0;
    while (tr_option_names[n_opts]) n_opts++;
    pdc_buf_put_u32(&b, (uint32_t)n_opts);
    for (size_t i = 0; i < n_opts; i++) {
        char v[64];
        tr_options_get(&t->opt, tr_option_names[i], v, sizeof v);
        pdc_buf_put_string(&b, tr_option_names[i]);
        pdc_buf_put_string(&b, v);
    }
    pdc_buf_put_u64(&b, t->step);
    for (int i = 0; i < 4; i++) pdc_buf_put_u64(&b, t->rng[i]);
    pdc_buf_put_u8(&b, (uint8_t)(t->admm != 0));
    pdc_status st = PDC_OK;
    if (t->admm) {
        put_f64(&b, t->rho);
        pdc_buf_put_string(&b, t->admm_pipeline);
        st = pdc_format_put_attrs(&b, &t->admm_options, "admm options");
    }
    pdc_buf_put_u32(&b, (uint32_t)net->n_params);
    for (size_t i = 0; i < net->n_params && !st; i++) {
        const tr_param *p = &net->params[i];
        const ir_tensor *tt = &m->tensors[p->tensor];
        pdc_buf_put_string(&b, tt->name);
        pdc_buf_put_u8(&b, (uint8_t)tt->rank);
        for (int d = 0; d < tt->rank; d++) pdc_buf_put_i64(&b, tt->dims[d]);
        pdc_buf_put_u8(&b, (uint8_t)((p->trainable ? 1u : 0u) | (p->admm_z ? 2u : 0u)));
        put_floats(&b, tt->data, p->n);
        if ((st = pdc_format_put_sparsity(&b, &tt->sparsity, tt->name))) break;
        if (p->trainable) {
            put_floats(&b, p->m, p->n);
            put_floats(&b, p->v, p->n);
        }
        if (p->admm_z) {
            put_floats(&b, p->admm_z, p->n);
            put_floats(&b, p->admm_u, p->n);
        }
    }
    if (!st) st = pdc_buf_status(&b);
    if (!st) {
        pdc_buf_patch_u64(&b, 16, (uint64_t)(b.len - CKPT_HEADER));
        pdc_buf_put_u32(&b, pdc_crc32(0, b.data, b.len));
        st = pdc_buf_status(&b);
    }
    if (!st) st = pdc_file_write_atomic(t->ctx, path, b.data, b.len);
    if (st) pdc_error_prefix(t->ctx, "trainer: saving checkpoint");
    pdc_buf_free(&b);
    return st;
}

/* ------------------------------------------------------------------ loading */

typedef struct ckpt_param {
    float *values, *m, *v, *z, *u;
    ir_sparsity sparsity;
} ckpt_param;

static pdc_status get_f64(pdc_reader *r, double *v)
{
    uint64_t u;
    pdc_status st = pdc_reader_get_u64(r, &u);
    if (!st) memcpy(v, &u, sizeof *v);
    return st;
}

static pdc_status get_floats(pdc_reader *r, size_t n, float **out)
{
    const uint8_t *p;
    pdc_status st = pdc_reader_get_bytes(r, n * 4, &p);
    if (st) return st;
    float *v = pdc_alloc_aligned(r->ctx, n ? n : 1, sizeof *v);
    if (!v) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = pdc_load_u32le(p + 4 * i);
        memcpy(&v[i], &u, 4);
    }
    *out = v;
    return PDC_OK;
}

static pdc_status get_attrs(pdc_reader *r, ir_attrs *a)
{
    uint32_t n;
    pdc_status st = pdc_reader_get_u32(r, &n);
    for (uint32_t i = 0; i < n && !st; i++) {
        char *name = NULL, *s = NULL;
        uint8_t type;
        if ((st = pdc_reader_get_string(r, &name)) || (st = pdc_reader_get_u8(r, &type))) {
            pdc_free(name);
            break;
        }
        if (type == IR_ATTR_INT) {
            int64_t v;
            if (!(st = pdc_reader_get_i64(r, &v))) st = ir_attrs_set_int(r->ctx, a, name, v);
        } else if (type == IR_ATTR_INTS) {
            size_t k;
            int64_t *v = NULL;
            if (!(st = pdc_reader_get_count(r, 0, 8, &k)) && !(v = pdc_alloc(r->ctx, (k ? k : 1) * sizeof *v)))
                st = PDC_ERR_OUT_OF_MEMORY;
            for (size_t j = 0; j < k && !st; j++) st = pdc_reader_get_i64(r, &v[j]);
            if (!st) st = ir_attrs_set_ints(r->ctx, a, name, k, v);
            pdc_free(v);
        } else if (type == IR_ATTR_FLOAT) {
            float v;
            if (!(st = pdc_reader_get_f32(r, &v))) st = ir_attrs_set_float(r->ctx, a, name, v);
        } else if (type == IR_ATTR_STRING) {
            if (!(st = pdc_reader_get_string(r, &s))) st = ir_attrs_set_string(r->ctx, a, name, s);
        } else {
            st = pdc_reader_corrupt(r, "attribute '%s' has type %u", name, (unsigned)type);
        }
        pdc_free(name);
        pdc_free(s);
    }
    return st;
}

static pdc_status get_sparsity(pdc_reader *r, const ir_tensor *t, ir_sparsity *s)
{
    uint8_t kind;
    pdc_status st = pdc_reader_get_u8(r, &kind);
    if (st) return st;
    memset(s, 0, sizeof *s);
    size_t n;
    switch (kind) {
    case IR_SPARSITY_NONE: return PDC_OK;
    case IR_SPARSITY_PATTERN:
    case PDC_FORMAT_SPARSITY_PATTERN_V2: /* a 3-D window or kernel groups */
        s->kind = IR_SPARSITY_PATTERN;
        if (kind == PDC_FORMAT_SPARSITY_PATTERN_V2 && (st = pdc_reader_get_i64(r, &s->kd))) return st;
        if ((st = pdc_reader_get_i64(r, &s->kh)) || (st = pdc_reader_get_i64(r, &s->kw))) return st;
        if (kind == PDC_FORMAT_SPARSITY_PATTERN_V2 &&
            ((st = pdc_reader_get_i64(r, &s->go)) || (st = pdc_reader_get_i64(r, &s->gc))))
            return st;
        if (s->kh < 1 || s->kw < 1 || s->kh > CKPT_MAX_PATTERN_DIM || s->kw > CKPT_MAX_PATTERN_DIM || s->kd < 0 ||
            s->kd > CKPT_MAX_PATTERN_DIM || s->go < 0 || s->gc < 0)
            return pdc_reader_corrupt(r, "pattern window %" PRId64 "x%" PRId64, s->kh, s->kw);
        if ((st = pdc_reader_get_count(r, 1, 8, &n))) return st;
        if (!(s->patterns = pdc_alloc(r->ctx, (n ? n : 1) * sizeof *s->patterns))) return PDC_ERR_OUT_OF_MEMORY;
        s->n_patterns = n;
        for (size_t i = 0; i < n; i++)
            if ((st = pdc_reader_get_u64(r, &s->patterns[i]))) return st;
        if ((st = pdc_reader_get_count(r, 1, 4, &n))) return st;
        if (!(s->kernel_pattern = pdc_alloc(r->ctx, (n ? n : 1) * sizeof *s->kernel_pattern))) return PDC_ERR_OUT_OF_MEMORY;
        s->n_kernels = n;
        for (size_t i = 0; i < n; i++)
            if ((st = pdc_reader_get_i32(r, &s->kernel_pattern[i]))) return st;
        break;
    case IR_SPARSITY_BLOCK: {
        s->kind = IR_SPARSITY_BLOCK;
        const uint8_t *p;
        if ((st = pdc_reader_get_i64(r, &s->bh)) || (st = pdc_reader_get_i64(r, &s->bw))) return st;
        if (s->bh < 1 || s->bw < 1 || s->bh > INT32_MAX || s->bw > INT32_MAX)
            return pdc_reader_corrupt(r, "block shape %" PRId64 "x%" PRId64, s->bh, s->bw);
        if ((st = pdc_reader_get_count(r, 1, 1, &n)) || (st = pdc_reader_get_bytes(r, n, &p))) return st;
        if (!(s->block_mask = pdc_alloc(r->ctx, n ? n : 1))) return PDC_ERR_OUT_OF_MEMORY;
        memcpy(s->block_mask, p, n);
        s->n_blocks = n;
        break;
    }
    case IR_SPARSITY_UNSTRUCTURED: {
        s->kind = IR_SPARSITY_UNSTRUCTURED;
        const uint8_t *p;
        if ((st = pdc_reader_get_count(r, 1, 1, &n)) || (st = pdc_reader_get_bytes(r, n, &p))) return st;
        if (!(s->mask = pdc_alloc(r->ctx, n ? n : 1))) return PDC_ERR_OUT_OF_MEMORY;
        memcpy(s->mask, p, n);
        s->n_mask = n;
        break;
    }
    case IR_SPARSITY_BCR: return pdc_format_get_bcr(r, s);
    default: return pdc_reader_corrupt(r, "sparsity kind %u of constant '%s'", (unsigned)kind, t->name);
    }
    return PDC_OK;
}

/* Everything read from a file, before it replaces the trainer's state. */
typedef struct ckpt {
    tr_options opt;
    uint64_t step, rng[4];
    int admm;
    double rho;
    char *pipeline;
    ir_attrs admm_options;
    size_t n;
    ckpt_param *params;
} ckpt;

static void ckpt_free(ckpt *c)
{
    for (size_t i = 0; c->params && i < c->n; i++) {
        ckpt_param *p = &c->params[i];
        pdc_free(p->values);
        pdc_free(p->m);
        pdc_free(p->v);
        pdc_free(p->z);
        pdc_free(p->u);
        ir_sparsity_free(&p->sparsity);
    }
    pdc_free(c->params);
    pdc_free(c->pipeline);
    ir_attrs_free(&c->admm_options);
}

#define DIFFERENT(...) (pdc_error(ctx, PDC_ERR_INVALID_ARG, __VA_ARGS__), PDC_ERR_INVALID_ARG)

/* A checkpoint's numbers are validated as a model's constants are (a valid CRC only says the bytes
 * are the ones written): weights, optimizer moments and ADMM state finite unless the context
 * option allow_nonfinite is set, and Adam's second moment never negative (its square root would
 * be NaN and silently poison the weight at the next step). */
static pdc_status check_finite(const pdc_context *ctx, const char *path, const char *name, size_t n,
                               const ckpt_param *cp)
{
    const float *const arrays[5] = {cp->values, cp->m, cp->v, cp->z, cp->u};
    static const char *const what[5] = {"values", "first moment", "second moment", "ADMM Z", "ADMM U"};
    for (int a = 0; a < 5; a++) {
        if (!arrays[a]) continue;
        size_t i = ir_first_nonfinite(arrays[a], n);
        if (i < n && !ctx->allow_nonfinite)
            return pdc_error(ctx, PDC_ERR_NUMERIC,
                             "checkpoint '%s': constant '%s' %s holds %s at element %zu of %zu (non-finite values are "
                             "refused; context option allow_nonfinite=1 accepts them)",
                             path, name, what[a], ir_nonfinite_name(arrays[a][i]), i, n);
        if (a == 2)
            for (i = 0; i < n; i++)
                if (arrays[a][i] < 0.0f)
                    return pdc_error(ctx, PDC_ERR_CORRUPT,
                                     "checkpoint '%s': constant '%s' second moment is negative (%g) at element %zu",
                                     path, name, (double)arrays[a][i], i);
    }
    return PDC_OK;
}

static pdc_status parse_payload(const pdc_trainer *t, pdc_reader *r, const char *path, ckpt *c)
{
    const pdc_context *ctx = t->ctx;
    const tr_net *net = t->net;
    const ir_model *m = net->model;
    char *s = NULL, *s2 = NULL;
    uint32_t n;
    pdc_status st;
    r->what = "model name";
    if ((st = pdc_reader_get_string(r, &s))) return st;
    pdc_free(s);
    s = NULL;
    r->what = "layers";
    if ((st = pdc_reader_get_u32(r, &n))) return st;
    if (n != m->n_layers)
        return DIFFERENT("checkpoint '%s' is for another model: %u layers there, %zu here", path, n, m->n_layers);
    for (uint32_t li = 0; li < n; li++) {
        if ((st = pdc_reader_get_string(r, &s)) || (st = pdc_reader_get_string(r, &s2))) break;
        const ir_layer *l = &m->layers[li];
        if (strcmp(s, l->name) || strcmp(s2, ir_op_get_info(l->op)->name)) {
            st = DIFFERENT("checkpoint '%s' is for another model: layer %u is '%s' (%s) there, '%s' (%s) here", path, li,
                           s, s2, l->name, ir_op_get_info(l->op)->name);
            break;
        }
        pdc_free(s);
        pdc_free(s2);
        s = s2 = NULL;
    }
    pdc_free(s);
    pdc_free(s2);
    s = s2 = NULL;
    if (st) return st;
    r->what = "options";
    tr_options_default(&c->opt);
    if ((st = pdc_reader_get_u32(r, &n))) return st;
    for (uint32_t i = 0; i < n && !st; i++) {
        if ((st = pdc_reader_get_string(r, &s)) || (st = pdc_reader_get_string(r, &s2))) break;
        if ((st = tr_options_set(ctx, &c->opt, s, s2))) st = pdc_reader_corrupt(r, "option %s = \"%s\" is refused", s, s2);
        pdc_free(s);
        pdc_free(s2);
        s = s2 = NULL;
    }
    pdc_free(s);
    pdc_free(s2);
    if (st) return st;
    r->what = "training state";
    if ((st = pdc_reader_get_u64(r, &c->step))) return st;
    for (int i = 0; i < 4; i++)
        if ((st = pdc_reader_get_u64(r, &c->rng[i]))) return st;
    uint8_t admm;
    if ((st = pdc_reader_get_u8(r, &admm))) return st;
    if (admm > 1) return pdc_reader_corrupt(r, "ADMM flag %u", (unsigned)admm);
    c->admm = admm;
    if (admm) {
        r->what = "ADMM state";
        if ((st = get_f64(r, &c->rho)) || (st = pdc_reader_get_string(r, &c->pipeline)) ||
            (st = get_attrs(r, &c->admm_options)))
            return st;
        if (!(c->rho > 0.0) || !isfinite(c->rho)) return pdc_reader_corrupt(r, "ADMM rho %g", c->rho);
        /* what pdc_trainer_admm_begin accepts: pruning passes only (another pass would change the
         * model's structure at pdc_trainer_admm_end) */
        if (tr_check_prune_pipeline(ctx, c->pipeline) || pass_pipeline_check(ctx, c->pipeline)) {
            char why[256];
            snprintf(why, sizeof why, "%s", pdc_context_last_error(ctx)); /* the corrupt message replaces it */
            return pdc_reader_corrupt(r, "ADMM pipeline \"%s\" is refused (%s)", c->pipeline, why);
        }
    }
    r->what = "constants";
    if ((st = pdc_reader_get_u32(r, &n))) return st;
    if (n != net->n_params)
        return DIFFERENT("checkpoint '%s' is for another model: %u constants there, %zu here", path, n, net->n_params);
    c->params = pdc_calloc(ctx, n ? n : 1, sizeof *c->params);
    if (!c->params) return PDC_ERR_OUT_OF_MEMORY;
    c->n = n;
    for (uint32_t i = 0; i < n; i++) {
        const tr_param *p = &net->params[i];
        const ir_tensor *tt = &m->tensors[p->tensor];
        ckpt_param *cp = &c->params[i];
        r->what = "constant";
        uint8_t rank, flags;
        if ((st = pdc_reader_get_string(r, &s))) return st;
        const int same_name = !strcmp(s, tt->name);
        if (!same_name) {
            st = DIFFERENT("checkpoint '%s' is for another model: constant %u is '%s' there, '%s' here", path, i, s,
                           tt->name);
            pdc_free(s);
            return st;
        }
        pdc_free(s);
        if ((st = pdc_reader_get_u8(r, &rank))) return st;
        int64_t dims[PDC_MAX_RANK];
        if (rank > PDC_MAX_RANK) return pdc_reader_corrupt(r, "constant '%s' has rank %u", tt->name, (unsigned)rank);
        for (int d = 0; d < rank; d++)
            if ((st = pdc_reader_get_i64(r, &dims[d]))) return st;
        int same = rank == tt->rank;
        for (int d = 0; d < rank && same; d++) same = dims[d] == tt->dims[d];
        if (!same) {
            char a[128], b[128];
            ir_format_shape(rank, dims, a, sizeof a);
            ir_format_shape(tt->rank, tt->dims, b, sizeof b);
            return DIFFERENT("checkpoint '%s' is for another model: constant '%s' is %s there, %s here", path, tt->name, a,
                             b);
        }
        if ((st = pdc_reader_get_u8(r, &flags))) return st;
        if ((flags & ~3u) || ((flags & 1u) != 0) != (p->trainable != 0))
            return pdc_reader_corrupt(r, "constant '%s' has flags 0x%x", tt->name, (unsigned)flags);
        if ((flags & 2u) && !c->admm) return pdc_reader_corrupt(r, "constant '%s' has ADMM state without ADMM", tt->name);
        if ((st = get_floats(r, p->n, &cp->values))) return st;
        r->what = "sparsity";
        if ((st = get_sparsity(r, tt, &cp->sparsity))) return st;
        r->what = "optimizer state";
        if ((flags & 1u) && ((st = get_floats(r, p->n, &cp->m)) || (st = get_floats(r, p->n, &cp->v)))) return st;
        r->what = "ADMM state";
        if ((flags & 2u) && ((st = get_floats(r, p->n, &cp->z)) || (st = get_floats(r, p->n, &cp->u)))) return st;
        if ((st = check_finite(ctx, path, tt->name, p->n, cp))) return st;
    }
    if (pdc_reader_remaining(r))
        return pdc_reader_corrupt(r, "%zu bytes left after the last constant", pdc_reader_remaining(r));
    return PDC_OK;
}

pdc_status tr_checkpoint_load(pdc_trainer *t, const char *path)
{
    pdc_context *ctx = t->ctx;
    void *data;
    size_t size;
    pdc_status st = pdc_file_read(ctx, path, &data, &size);
    if (st) return st;
    const uint8_t *b = data;
    ckpt c;
    memset(&c, 0, sizeof c);
    ir_model *m = NULL;
    tr_net *net = NULL;
    if (size < CKPT_HEADER + 4 || memcmp(b, CKPT_MAGIC, 8) != 0) {
        st = pdc_error(ctx, PDC_ERR_CORRUPT, "'%s' is not a pdc training checkpoint (%s)", path,
                       size < 8 || memcmp(b, CKPT_MAGIC, 8) ? "no PDCTRAIN magic" : "shorter than its header");
        goto done;
    }
    const uint32_t version = pdc_load_u32le(b + 8), flags = pdc_load_u32le(b + 12);
    const uint64_t payload = pdc_load_u64le(b + 16);
    if (version != CKPT_VERSION) {
        st = pdc_error(ctx, PDC_ERR_CORRUPT, "checkpoint '%s' has format version %u; this pdc reads version %u", path,
                       version, CKPT_VERSION);
        goto done;
    }
    if (flags) {
        st = pdc_error(ctx, PDC_ERR_CORRUPT, "checkpoint '%s' has unknown flags 0x%x", path, flags);
        goto done;
    }
    if (payload != size - CKPT_HEADER - 4) {
        st = pdc_error(ctx, PDC_ERR_CORRUPT,
                       "checkpoint '%s' is truncated or has trailing bytes: the header announces %" PRIu64
                       " payload bytes, the file holds %zu",
                       path, payload, size - CKPT_HEADER - 4);
        goto done;
    }
    const uint32_t want = pdc_load_u32le(b + size - 4), got = pdc_crc32(0, b, size - 4);
    if (want != got) {
        st = pdc_error(ctx, PDC_ERR_CORRUPT, "checkpoint '%s' is corrupt: CRC-32 0x%08x, expected 0x%08x", path, got,
                       want);
        goto done;
    }
    pdc_reader r;
    pdc_reader_init(&r, ctx, b + CKPT_HEADER, (size_t)payload, CKPT_HEADER, "payload");
    if ((st = parse_payload(t, &r, path, &c))) {
        if (st == PDC_ERR_CORRUPT) pdc_error_prefix(ctx, "checkpoint '%s'", path);
        goto done;
    }

    /* the new model: the trainer's, with the file's values and sparsity */
    if ((st = ir_model_clone(t->net->model, &m))) goto done;
    for (size_t i = 0; i < c.n; i++) {
        ir_tensor *tt = &m->tensors[t->net->params[i].tensor];
        memcpy(tt->data, c.params[i].values, t->net->params[i].n * sizeof(float));
        if (c.params[i].sparsity.kind != IR_SPARSITY_NONE &&
            (st = ir_sparsity_validate(ctx, tt, &c.params[i].sparsity))) {
            pdc_error_prefix(ctx, "checkpoint '%s'", path);
            st = PDC_ERR_CORRUPT;
            goto done;
        }
        ir_sparsity_free(&tt->sparsity);
        tt->sparsity = c.params[i].sparsity;
        memset(&c.params[i].sparsity, 0, sizeof c.params[i].sparsity);
    }
    st = tr_net_create(ctx, m, &c.opt, &net);
    m = NULL; /* taken over */
    if (st) goto done;
    for (size_t i = 0; i < c.n; i++) {
        tr_param *p = &net->params[i];
        ckpt_param *cp = &c.params[i];
        if (cp->m) memcpy(p->m, cp->m, p->n * sizeof *p->m);
        if (cp->v) memcpy(p->v, cp->v, p->n * sizeof *p->v);
        p->admm_z = cp->z;
        p->admm_u = cp->u;
        cp->z = cp->u = NULL;
    }

    /* commit: nothing below can fail */
    tr_net_destroy(t->net);
    t->net = net;
    net = NULL;
    t->opt = c.opt;
    t->step = c.step;
    memcpy(t->rng, c.rng, sizeof t->rng);
    pdc_free(t->admm_pipeline);
    ir_attrs_free(&t->admm_options);
    t->admm = c.admm;
    t->rho = c.rho;
    t->admm_pipeline = c.pipeline;
    t->admm_options = c.admm_options;
    c.pipeline = NULL;
    memset(&c.admm_options, 0, sizeof c.admm_options);
done:
    ckpt_free(&c);
    ir_model_destroy(m);
    tr_net_destroy(net);
    pdc_free(data);
    return st;
}
