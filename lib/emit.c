/*
 * emit.c - pdc_model_emit: ahead-of-time code for another machine. Validates the target and its
 * options against the emitter's lists (LLVM accepts unknown CPU names with only a warning, so we
 * never pass one through), hands the emitter a private verified copy of the model, and writes the
 * files it returns all-or-nothing: each to a temporary name in dir, then every one renamed (a
 * rename failing after an earlier one succeeded - same directory, so hardly ever - leaves the
 * earlier files in place, each whole). A directory it created is removed again on failure (but
 * for that rename case, where it is no longer empty).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "lib/api_internal.h"
#include "lib/core/fileio.h"

extern const pdc_emitter pdc_emitter_aarch64;
extern const pdc_emitter pdc_emitter_nvptx;

static const pdc_emitter *const emitters[] = {&pdc_emitter_aarch64, &pdc_emitter_nvptx};
#define N_EMITTERS (sizeof emitters / sizeof emitters[0])

pdc_status pdc_emit_add(const pdc_context *ctx, pdc_emit_out *out, const char *name, void *data, size_t size)
{
    if (pdc_grow(ctx, (void **)&out->files, &out->cap, out->n_files + 1, sizeof *out->files)) {
        pdc_free(data);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    char *nm = pdc_strdup(ctx, name);
    if (!nm) {
        pdc_free(data);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    out->files[out->n_files++] = (pdc_emit_file){nm, data, size};
    return PDC_OK;
}

static void emit_out_free(pdc_emit_out *out)
{
    for (size_t i = 0; i < out->n_files; i++) {
        pdc_free(out->files[i].name);
        pdc_free(out->files[i].data);
    }
    pdc_free(out->files);
}

static int is_identifier(const char *s)
{
    if (!s || !*s || strlen(s) > 64) return 0;
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_')) return 0;
    return 1;
}

static void join_list(const char *const *list, char *buf, size_t cap)
{
    buf[0] = 0;
    for (size_t i = 0; list && list[i]; i++) {
        if (i) strncat(buf, ", ", cap - strlen(buf) - 1);
        strncat(buf, list[i], cap - strlen(buf) - 1);
    }
}

/* The value of string option `key`, checked against `allowed` (NULL list: option not accepted). */
static pdc_status list_option(const pdc_context *ctx, const pdc_attrs *o, const pdc_emitter *e, const char *key,
                              const char *const *allowed, const char **value)
{
    *value = NULL;
    if (!o) return PDC_OK;
    const ir_attr *a = ir_attrs_find(&o->list, key);
    if (!a) return PDC_OK;
    const char *v = ir_attr_string(&o->list, key, NULL);
    if (!allowed)
        return pdc_error(ctx, PDC_ERR_INVALID_ARG, "emit: target '%s' takes no '%s' option", e->target, key);
    char known[512];
    join_list(allowed, known, sizeof known);
    if (!v) return pdc_error(ctx, PDC_ERR_INVALID_ARG, "emit: option '%s' must be a string (one of: %s)", key, known);
    for (size_t i = 0; allowed[i]; i++)
        if (!strcmp(allowed[i], v)) {
            *value = allowed[i];
            return PDC_OK;
        }
    return pdc_error(ctx, PDC_ERR_INVALID_ARG, "emit: unknown %s '%s' for target '%s' (known: %s)", key, v, e->target,
                     known);
}

static pdc_status check_options(const pdc_context *ctx, const pdc_attrs *o, const pdc_emitter *e, pdc_emit_options *opt)
{
    static const char *const known_keys[] = {"name", "cpu", "arch"};
    for (size_t i = 0; o && i < o->list.n; i++) {
        size_t k = 0;
        while (k < 3 && strcmp(o->list.items[i].name, known_keys[k])) k++; /* 3 = known_keys' size */
        if (k == 3)
            return pdc_error(ctx, PDC_ERR_INVALID_ARG, "emit: unknown option '%s' (known: name, cpu, arch)",
                             o->list.items[i].name);
    }
    opt->name = o ? ir_attr_string(&o->list, "name", "model") : "model";
    if (!is_identifier(opt->name))
        return pdc_error(ctx, PDC_ERR_INVALID_ARG,
                         "emit: name '%s' is not a C identifier of at most 64 characters (letters, digits, _)",
                         opt->name ? opt->name : "(not a string)");
    pdc_status st = list_option(ctx, o, e, "cpu", e->cpus, &opt->cpu);
    if (!st) st = list_option(ctx, o, e, "arch", e->archs, &opt->arch);
    return st;
}

/* Checked before the (slow) code generation: dir is a writable directory, or missing with a writable
 * parent (it is made only when the files are written, so a failed emit leaves nothing behind). */
static pdc_status check_dir(const pdc_context *ctx, const char *dir, int *missing)
{
    struct stat sb;
    *missing = 0;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return pdc_error(ctx, PDC_ERR_IO, "emit: '%s' exists and is not a directory", dir);
        if (access(dir, W_OK | X_OK) != 0)
            return pdc_error(ctx, PDC_ERR_IO, "emit: directory '%s' is not writable: %s", dir, strerror(errno));
        return PDC_OK;
    }
    if (errno != ENOENT) return pdc_error(ctx, PDC_ERR_IO, "emit: cannot use directory '%s': %s", dir, strerror(errno));
    /* the parent: everything before the last '/', or "." */
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    const char *slash = NULL;
    for (size_t i = 0; i < n; i++)
        if (dir[i] == '/') slash = dir + i;
    char parent[4096];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else snprintf(parent, sizeof parent, "%.*s", slash == dir ? 1 : (int)(slash - dir), dir);
    if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return pdc_error(ctx, PDC_ERR_IO, "emit: cannot create directory '%s': its parent '%s' is not a directory", dir,
                         parent);
    if (access(parent, W_OK | X_OK) != 0)
        return pdc_error(ctx, PDC_ERR_IO, "emit: cannot create directory '%s': '%s' is not writable: %s", dir, parent,
                         strerror(errno));
    *missing = 1;
    return PDC_OK;
}

/* Every file to a temporary name, then every one renamed; on failure the temporaries are removed.
 * Both names of every file are made first, so nothing can fail between the renames but rename. */
static pdc_status write_all(const pdc_context *ctx, const char *dir, const pdc_emit_out *out)
{
    pdc_status st = PDC_OK;
    size_t n = out->n_files, written = 0;
    char **tmp = pdc_calloc(ctx, n ? n : 1, sizeof *tmp), **final = pdc_calloc(ctx, n ? n : 1, sizeof *final);
    if (!tmp || !final) st = PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n && !st; i++) {
        size_t len = strlen(dir) + strlen(out->files[i].name) + 2;
        if (!(final[i] = pdc_alloc(ctx, len))) {
            st = PDC_ERR_OUT_OF_MEMORY;
            break;
        }
        snprintf(final[i], len, "%s/%s", dir, out->files[i].name);
        /* as every save: only a regular file (or nothing) is replaced, checked before anything is written */
        struct stat sb;
        if (lstat(final[i], &sb) == 0 && !S_ISREG(sb.st_mode))
            st = pdc_error(ctx, PDC_ERR_IO, "emit: cannot write '%s': it is %s; only a regular file is replaced",
                           final[i], pdc_file_type_name((unsigned)sb.st_mode));
    }
    for (; written < n && !st; written++) {
        const pdc_emit_file *f = &out->files[written];
        size_t len = strlen(dir) + strlen(f->name) + 32;
        tmp[written] = pdc_alloc(ctx, len);
        if (!tmp[written]) {
            st = PDC_ERR_OUT_OF_MEMORY;
            break;
        }
        snprintf(tmp[written], len, "%s/.%s.tmp.XXXXXX", dir, f->name);
        int fd = mkstemp(tmp[written]);
        if (fd < 0) {
            st = pdc_error(ctx, PDC_ERR_IO, "emit: cannot create a file in '%s': %s", dir, strerror(errno));
            pdc_free(tmp[written]);
            tmp[written] = NULL;
            break;
        }
        const char *p = f->data;
        size_t left = f->size;
        while (left && !st) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) st = pdc_error(ctx, PDC_ERR_IO, "emit: cannot write '%s/%s': %s", dir, f->name, strerror(errno));
            else p += w, left -= (size_t)w;
        }
        if (!st && fchmod(fd, 0644) != 0)
            st = pdc_error(ctx, PDC_ERR_IO, "emit: cannot set the mode of '%s/%s': %s", dir, f->name, strerror(errno));
        if (close(fd) != 0 && !st)
            st = pdc_error(ctx, PDC_ERR_IO, "emit: cannot write '%s/%s': %s", dir, f->name, strerror(errno));
    }
    for (size_t i = 0; i < n && !st; i++) {
        if (rename(tmp[i], final[i]) != 0)
            st = pdc_error(ctx, PDC_ERR_IO, "emit: cannot rename to '%s': %s", final[i], strerror(errno));
        else {
            pdc_free(tmp[i]);
            tmp[i] = NULL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (tmp && tmp[i]) unlink(tmp[i]);
        if (tmp) pdc_free(tmp[i]);
        if (final) pdc_free(final[i]);
    }
    pdc_free(tmp);
    pdc_free(final);
    return st;
}

PDC_API pdc_status pdc_model_emit(pdc_context *ctx, const pdc_model *model, const char *target,
                                  const pdc_attrs *options, const char *dir)
{
    PDC_CHECK_ARG(ctx, ctx, "ctx");
    PDC_CHECK_ARG(ctx, model, "model");
    PDC_CHECK_ARG(ctx, target, "target");
    PDC_CHECK_ARG(ctx, dir, "dir");
    const pdc_emitter *e = NULL;
    for (size_t i = 0; i < N_EMITTERS && !e; i++)
        if (!strcmp(emitters[i]->target, target)) e = emitters[i];
    if (!e) {
        char known[256] = "";
        for (size_t i = 0; i < N_EMITTERS; i++) {
            if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
            strncat(known, emitters[i]->target, sizeof known - strlen(known) - 1);
        }
        return pdc_error(ctx, PDC_ERR_UNKNOWN_TARGET, "emit: unknown target '%s' (known: %s)", target, known);
    }
    pdc_emit_options opt = {0};
    pdc_status st = check_options(ctx, options, e, &opt);
    int missing = 0;
    if (!st) st = pdc_check_compilable(model);
    if (!st) st = check_dir(ctx, dir, &missing);
    if (st) return st;
    ir_model *copy = NULL;
    if ((st = ir_model_clone(model, &copy))) return st;
    pdc_emit_out out = {0};
    st = e->emit(ctx, copy, &opt, &out);
    int created = 0;
    if (!st && missing) {
        if (mkdir(dir, 0777) != 0)
            st = pdc_error(ctx, PDC_ERR_IO, "emit: cannot create directory '%s': %s", dir, strerror(errno));
        else
            created = 1;
    }
    if (!st) st = write_all(ctx, dir, &out);
    if (st && created) rmdir(dir); /* ours, and empty unless a late rename failed (then it stays) */
    emit_out_free(&out);
    ir_model_destroy(copy);
    return st;
}
