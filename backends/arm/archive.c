/*
 * archive.c - a GNU ar archive (libNAME.a) written directly: no ar on the machine that emits.
 *
 * Layout: "!<arch>\n", a "/" member holding the symbol index (big-endian u32 count, one big-endian
 * u32 per symbol: the file offset of the member defining it, then the NUL-terminated names) - GNU
 * ld resolves archive members only through this index - and the object member itself. Every member
 * starts on an even offset (a "\n" pads odd sizes). Dates, owners are 0 so the output is
 * reproducible.
 */
#include <stdio.h>
#include <string.h>

#include "backends/arm/arm.h"

#define AR_HDR 60

static void put_header(char *p, const char *name, size_t size, const char *mode)
{
    char h[AR_HDR + 1];
    snprintf(h, sizeof h, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name, "0", "0", "0", mode, size);
    memcpy(p, h, AR_HDR);
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

pdc_status arm_archive(pdc_context *ctx, const char *member, const void *obj, size_t obj_size,
                       const char *const *syms, size_t n_syms, void **out, size_t *out_size)
{
    *out = NULL;
    *out_size = 0;
    if (strlen(member) > 15)
        return pdc_error(ctx, PDC_ERR_INTERNAL, "emit: archive member name '%s' is too long", member);
    size_t names = 0;
    for (size_t i = 0; i < n_syms; i++) names += strlen(syms[i]) + 1;
    size_t idx_size = 4 + 4 * n_syms + names;
    size_t idx_padded = idx_size + (idx_size & 1);
    size_t obj_at = 8 + AR_HDR + idx_padded;
    size_t total = obj_at + AR_HDR + obj_size + (obj_size & 1);
    /* the index holds 32-bit offsets; a member header has 10 digits for the size */
    if (obj_at > UINT32_MAX || obj_size > (size_t)9999999999ULL)
        return pdc_error(ctx, PDC_ERR_OVERFLOW, "emit: object of %zu bytes is too large for an ar archive", obj_size);
    char *a = pdc_calloc(ctx, 1, total);
    if (!a) return PDC_ERR_OUT_OF_MEMORY;
    memcpy(a, "!<arch>\n", 8);
    put_header(a + 8, "/", idx_size, "0");
    unsigned char *p = (unsigned char *)a + 8 + AR_HDR;
    put_be32(p, (uint32_t)n_syms);
    for (size_t i = 0; i < n_syms; i++) put_be32(p + 4 + 4 * i, (uint32_t)obj_at);
    char *s = (char *)p + 4 + 4 * n_syms;
    for (size_t i = 0; i < n_syms; i++) {
        size_t n = strlen(syms[i]) + 1;
        memcpy(s, syms[i], n);
        s += n;
    }
    if (idx_size & 1) a[8 + AR_HDR + idx_size] = '\n';
    char mname[17];
    snprintf(mname, sizeof mname, "%s/", member);
    put_header(a + obj_at, mname, obj_size, "644");
    memcpy(a + obj_at + AR_HDR, obj, obj_size);
    if (obj_size & 1) a[obj_at + AR_HDR + obj_size] = '\n';
    *out = a;
    *out_size = total;
    return PDC_OK;
}
