/* shape_list.c - "NAME=D1xD2x...;..." lists of input shapes (see shape_list.h). */
#include "lib/shape_list.h"

#include <stdio.h>
#include <string.h>

#include "pdc.h"

#define DIM_MAX 2147483647LL

/* Parses the entry [s, e): name [s, eq) and dims after it. 1 on success. */
static int parse_entry(const char *s, const char *e, const char **eq_out, int *rank, int64_t *dims, char *err,
                       size_t cap)
{
    const char *eq = NULL;
    for (const char *p = s; p < e; p++)
        if (*p == '=') eq = p;
    if (!eq || eq == s) {
        snprintf(err, cap, "entry \"%.*s\": expected NAME=DIMS, e.g. x=1x3x224x224", (int)(e - s), s);
        return 0;
    }
    int r = 0;
    const char *p = eq + 1;
    for (;;) {
        long long v = 0;
        const char *d = p;
        while (p < e && *p >= '0' && *p <= '9' && v <= DIM_MAX) v = v * 10 + (*p++ - '0');
        if (p == d || v < 1 || v > DIM_MAX || r == PDC_MAX_RANK) {
            snprintf(err, cap, "entry \"%.*s\": dims must be 1..%d numbers in 1..%lld joined by 'x'", (int)(e - s), s,
                     PDC_MAX_RANK, DIM_MAX);
            return 0;
        }
        dims[r++] = v;
        if (p == e) break;
        if (*p++ != 'x' || p == e) {
            snprintf(err, cap, "entry \"%.*s\": dims must be joined by 'x'", (int)(e - s), s);
            return 0;
        }
    }
    *eq_out = eq;
    *rank = r;
    return 1;
}

int pdc_shape_list_valid(const char *spec, char *err, size_t cap)
{
    for (const char *s = spec; *s;) {
        const char *e = strchr(s, ';'), *eq;
        if (!e) e = s + strlen(s);
        int rank;
        int64_t dims[PDC_MAX_RANK];
        if (!parse_entry(s, e, &eq, &rank, dims, err, cap)) return 0;
        s = *e ? e + 1 : e;
    }
    return 1;
}

int pdc_shape_list_find(const char *spec, const char *name, int *rank, int64_t *dims)
{
    int found = 0;
    char err[8];
    size_t n = strlen(name);
    for (const char *s = spec; spec && *s;) {
        const char *e = strchr(s, ';'), *eq;
        if (!e) e = s + strlen(s);
        int r;
        int64_t d[PDC_MAX_RANK];
        if (parse_entry(s, e, &eq, &r, d, err, sizeof err) && (size_t)(eq - s) == n && !memcmp(s, name, n)) {
            *rank = r;
            memcpy(dims, d, (size_t)r * sizeof *d);
            found = 1;
        }
        s = *e ? e + 1 : e;
    }
    return found;
}
