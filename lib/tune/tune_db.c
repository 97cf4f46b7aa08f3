/*
 * tune_db.c - the tuning database: layer signatures, the entry's text form, and its files under
 * cache_dir/tune (format in tune.h).
 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/core/context.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"
#include "lib/tune/tune.h"

#include "generator_id.h" /* PDC_GENERATOR_ID: a hash of the kernel generators' sources (Makefile) */

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* Appends to key at *len (stops quietly at cap; the caller checks). */
static void kput(char *key, size_t cap, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void kput(char *key, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(key + *len, cap - *len, fmt, ap);
    va_end(ap);
    *len = n < 0 ? cap : *len + (size_t)n;
}

static void kdims(char *key, size_t cap, size_t *len, const char *what, const ir_tensor *t)
{
    kput(key, cap, len, " %s=", what);
    for (int d = 0; d < t->rank; d++) kput(key, cap, len, "%s%" PRId64, d ? "x" : "", t->dims[d]);
}

pdc_status tune_layer_key(pdc_context *ctx, const ir_model *m, size_t li, int threads, const char *host, char *key,
                          size_t cap)
{
    key[0] = 0;
    const ir_layer *l = &m->layers[li];
    if ((l->op != IR_OP_CONV && l->op != IR_OP_FC) || l->n_inputs < 2 || l->inputs[0] < 0 || l->inputs[1] < 0 ||
        m->tensors[l->inputs[1]].kind != IR_TENSOR_CONST)
        return PDC_ERR_UNSUPPORTED;
    const ir_tensor *x = &m->tensors[l->inputs[0]], *w = &m->tensors[l->inputs[1]];
    size_t len = 0;
    kput(key, cap, &len, "%s", ir_op_get_info(l->op)->name);
    kdims(key, cap, &len, "x", x);
    kdims(key, cap, &len, "w", w);
    kput(key, cap, &len, " bias=%d", l->n_inputs > 2 && l->inputs[2] >= 0);
    for (size_t i = 0; i < l->attrs.n; i++) {
        const ir_attr *a = &l->attrs.items[i];
        kput(key, cap, &len, " %s=", a->name);
        if (a->type == IR_ATTR_INT) kput(key, cap, &len, "%" PRId64, a->i);
        else if (a->type == IR_ATTR_FLOAT) kput(key, cap, &len, "%.9g", (double)a->f);
        else if (a->type == IR_ATTR_STRING) kput(key, cap, &len, "%s", a->s);
        else
            for (size_t j = 0; j < a->n; j++) kput(key, cap, &len, "%s%" PRId64, j ? "," : "", a->ints[j]);
    }
    /* which weights are kept: what the generated code is specialised on */
    uint8_t digest[PDC_SHA256_BYTES];
    if (w->sparsity.kind == IR_SPARSITY_NONE) {
        kput(key, cap, &len, " kept=dense");
    } else if (w->sparsity.kind == IR_SPARSITY_PATTERN) {
        /* the pattern set and each kernel's pattern: a tenth of the weights' bytes to hash */
        const ir_sparsity *s = &w->sparsity;
        if (pdc_sha256(s->patterns, s->n_patterns * sizeof *s->patterns, s->kernel_pattern,
                       s->n_kernels * sizeof *s->kernel_pattern, digest))
            return pdc_error(ctx, PDC_ERR_INTERNAL, "tune: SHA-256 of layer '%s''s patterns failed", l->name);
        char h[2 * 16 + 1];
        hex(digest, 16, h);
        kput(key, cap, &len, " kept=p%" PRId64 "x%" PRId64 ":%s", s->kh, s->kw, h);
    } else {
        size_t n = 1;
        for (int d = 0; d < w->rank; d++) n *= (size_t)w->dims[d];
        uint8_t *keep = pdc_alloc(ctx, n);
        if (!keep) return PDC_ERR_OUT_OF_MEMORY;
        ir_sparsity_mask_range(w, &w->sparsity, 0, n, keep);
        int bad = pdc_sha256(keep, n, NULL, 0, digest);
        pdc_free(keep);
        if (bad) return pdc_error(ctx, PDC_ERR_INTERNAL, "tune: SHA-256 of layer '%s''s weight mask failed", l->name);
        char h[2 * 16 + 1];
        hex(digest, 16, h);
        kput(key, cap, &len, " kept=%s", h);
    }
    /* the generators' hash too: a build whose kernels changed measures again */
    kput(key, cap, &len, " | %s | threads=%d | pdc %d.%d.%d | gen %s", host, threads, PDC_VERSION_MAJOR, PDC_VERSION_MINOR,
         PDC_VERSION_PATCH, PDC_GENERATOR_ID);
    if (len >= cap) return pdc_error(ctx, PDC_ERR_OVERFLOW, "tune: layer '%s''s signature exceeds %zu bytes", l->name, cap - 1);
    for (char *c = key; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    return PDC_OK;
}

pdc_status tune_entry_format(const pdc_context *ctx, const char *key, const tune_entry *e, char **text_out,
                             size_t *len_out)
{
    size_t cap = strlen(key) + 256;
    char *t = pdc_alloc(ctx, cap);
    if (!t) return PDC_ERR_OUT_OF_MEMORY;
    const pdc_layer_knobs *k = &e->knobs;
    int n = snprintf(t, cap, "pdc-tune %d\nkey %s\nknobs %d %d %d %d %d %d\nms %.6f %.6f\n", TUNE_DB_VERSION, key,
                     (int)k->family, (int)k->tile_y, (int)k->tile_x, (int)k->chunk, (int)k->whole, (int)k->threads,
                     e->tuned_ms,
                     e->default_ms);
    uint8_t d[PDC_SHA256_BYTES];
    if (n < 0 || (size_t)n + 80 > cap || pdc_sha256(t, (size_t)n, NULL, 0, d)) {
        pdc_free(t);
        return pdc_error(ctx, PDC_ERR_INTERNAL, "tune: formatting a database entry failed");
    }
    memcpy(t + n, "sha256 ", 7);
    hex(d, sizeof d, t + n + 7);
    n += 7 + 2 * PDC_SHA256_BYTES;
    t[n++] = '\n';
    t[n] = 0;
    *text_out = t;
    *len_out = (size_t)n;
    return PDC_OK;
}

/* The next line of text[*pos..len) into line (without '\n'); 0 if none or too long. */
static int next_line(const char *text, size_t len, size_t *pos, char *line, size_t cap)
{
    if (*pos >= len) return 0;
    const char *nl = memchr(text + *pos, '\n', len - *pos);
    if (!nl) return 0;
    size_t n = (size_t)(nl - (text + *pos));
    if (n >= cap) return 0;
    memcpy(line, text + *pos, n);
    line[n] = 0;
    *pos += n + 1;
    return 1;
}

pdc_status tune_entry_parse(const char *text, size_t len, const char *key, tune_entry *e, char *why, size_t cap)
{
    char line[TUNE_KEY_MAX + 16];
    size_t pos = 0;
    int version = 0, used = 0;
    if (!next_line(text, len, &pos, line, sizeof line) || sscanf(line, "pdc-tune %d%n", &version, &used) != 1 ||
        line[used]) {
        snprintf(why, cap, "not a pdc tuning entry");
        return PDC_ERR_CORRUPT;
    }
    if (version != TUNE_DB_VERSION) {
        snprintf(why, cap, "format version %d, this pdc reads %d", version, TUNE_DB_VERSION);
        return PDC_ERR_UNSUPPORTED;
    }
    /* the checksum covers everything before its line */
    size_t body = pos;
    char entry_key[TUNE_KEY_MAX + 16], knobs[TUNE_KEY_MAX + 16]; /* the knobs line: named if a knob is out of range */
    tune_entry t;
    memset(&t, 0, sizeof t);
    int f = 0, ty = 0, tx = 0, ch = 0, wh = 0, th = 0;
    if (!next_line(text, len, &pos, entry_key, sizeof entry_key) || strncmp(entry_key, "key ", 4) ||
        !next_line(text, len, &pos, knobs, sizeof knobs) ||
        sscanf(knobs, "knobs %d %d %d %d %d %d%n", &f, &ty, &tx, &ch, &wh, &th, &used) != 6 || knobs[used] ||
        !next_line(text, len, &pos, line, sizeof line) ||
        sscanf(line, "ms %lf %lf%n", &t.tuned_ms, &t.default_ms, &used) != 2 || line[used]) {
        snprintf(why, cap, "malformed entry (line %s)", pos >= len ? "missing" : "unreadable");
        return PDC_ERR_CORRUPT;
    }
    body = pos;
    char sum[80], want[2 * PDC_SHA256_BYTES + 1];
    uint8_t d[PDC_SHA256_BYTES];
    if (!next_line(text, len, &pos, sum, sizeof sum) || strncmp(sum, "sha256 ", 7) || pos != len ||
        pdc_sha256(text, body, NULL, 0, d)) {
        snprintf(why, cap, "malformed entry (checksum line)");
        return PDC_ERR_CORRUPT;
    }
    hex(d, sizeof d, want);
    if (strcmp(sum + 7, want)) {
        snprintf(why, cap, "checksum mismatch: the entry is damaged");
        return PDC_ERR_CORRUPT;
    }
    if (f < 0 || f >= PDC_KNOB_FAMILIES || ty < 0 || ty > 64 || tx < 0 || tx > 64 || ch < 0 || ch > 4096 || wh < 0 ||
        wh > 1 || th < 0 || th > TUNE_THREADS_MAX) {
        snprintf(why, cap, "a value is out of range (%s)", knobs);
        return PDC_ERR_CORRUPT;
    }
    if (!(t.tuned_ms >= 0) || !(t.default_ms >= 0)) {
        snprintf(why, cap, "a value is out of range (%s)", line);
        return PDC_ERR_CORRUPT;
    }
    if (strcmp(entry_key + 4, key)) {
        snprintf(why, cap, "the entry is for another layer or host (key '%.200s')", entry_key + 4);
        return PDC_ERR_NOT_FOUND;
    }
    t.knobs.family = f;
    t.knobs.tile_y = ty;
    t.knobs.tile_x = tx;
    t.knobs.chunk = ch;
    t.knobs.whole = wh;
    t.knobs.threads = th;
    *e = t;
    return PDC_OK;
}

void tune_db_path(const pdc_context *ctx, const char *key, char *path, size_t cap)
{
    uint8_t d[PDC_SHA256_BYTES];
    char h[33];
    path[0] = 0;
    if (pdc_sha256(key, strlen(key), NULL, 0, d)) return;
    hex(d, 16, h);
    int n = snprintf(path, cap, "%s/tune/%s.txt", ctx->cache_dir, h);
    if (n < 0 || (size_t)n >= cap) path[0] = 0;
}

int tune_db_empty(const pdc_context *ctx)
{
    char dir[PDC_PATH_MAX + 16];
    int n = snprintf(dir, sizeof dir, "%s/tune", ctx->cache_dir);
    if (n < 0 || (size_t)n >= sizeof dir) return 0; /* cannot tell: look entries up as usual */
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT || errno == ENOTDIR;
    int empty = 1;
    for (struct dirent *e; empty && (e = readdir(d));) empty = e->d_name[0] == '.';
    closedir(d);
    return empty;
}

int tune_db_get(pdc_context *ctx, const char *key, tune_entry *e)
{
    char path[PDC_PATH_MAX + 64];
    tune_db_path(ctx, key, path, sizeof path);
    struct stat sb;
    if (!path[0] || stat(path, &sb)) return 0;
    void *data = NULL;
    size_t len = 0;
    char why[300] = "";
    pdc_status st = pdc_file_read(ctx, path, &data, &len);
    if (st) snprintf(why, sizeof why, "unreadable: %s", pdc_context_last_error(ctx));
    else st = tune_entry_parse(data, len, key, e, why, sizeof why);
    pdc_free(data);
    if (!st) return 1;
    pdc_note(ctx, PDC_NOTE_TUNE_IGNORED, "tune", "", "ignored tuning entry %s: %s", path, why);
    pdc_log(ctx, PDC_LOG_WARN, "tune: ignored tuning entry %s: %s", path, why);
    return 0;
}

/* mkdir -p with 0700 for what it creates. */
static int make_dirs(char *dir)
{
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int bad = mkdir(dir, 0700) && errno != EEXIST;
        *p = '/';
        if (bad) return -1;
    }
    return mkdir(dir, 0700) && errno != EEXIST ? -1 : 0;
}

pdc_status tune_db_put(pdc_context *ctx, const char *key, const tune_entry *e)
{
    char path[PDC_PATH_MAX + 64], dir[PDC_PATH_MAX + 64];
    tune_db_path(ctx, key, path, sizeof path);
    if (!path[0]) return pdc_error(ctx, PDC_ERR_IO, "tune: the cache_dir path is too long for the tuning database");
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    if (make_dirs(dir)) return pdc_error(ctx, PDC_ERR_IO, "tune: cannot create '%s': %s", dir, strerror(errno));
    char *text = NULL;
    size_t len = 0;
    pdc_status st = tune_entry_format(ctx, key, e, &text, &len);
    if (!st) st = pdc_file_write_atomic(ctx, path, text, len);
    pdc_free(text);
    return st;
}
