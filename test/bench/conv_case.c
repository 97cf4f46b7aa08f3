/*
 * conv_case.c - one benchmark layer as pdc runs it (conv_case.h).
 */
#include "conv_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PDC(ctx, x)                                                                                      \
    do {                                                                                                 \
        pdc_status s_ = (x);                                                                             \
        if (s_ != PDC_OK) {                                                                              \
            fprintf(stderr, "bench: %s:%d: %s: %s\n", __FILE__, __LINE__, #x, pdc_context_last_error(ctx)); \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static void *must_alloc(size_t n)
{
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

void conv_data_make(const layer_case *L, conv_data *d)
{
    const size_t ohw = (size_t)bench_out_h(L) * (size_t)bench_out_w(L), nk = (size_t)L->o * L->c;
    d->nx = (size_t)L->c * L->h * L->w, d->ny = (size_t)L->o * ohw, d->nw = nk * 9;
    d->x = must_alloc(d->nx * sizeof *d->x), d->b = must_alloc((size_t)L->o * sizeof *d->b);
    d->w45 = must_alloc(d->nw * sizeof *d->w45), d->w9 = must_alloc(d->nw * sizeof *d->w9);
    d->wd = must_alloc(d->nw * sizeof *d->wd);
    d->kp45 = must_alloc(nk * sizeof *d->kp45), d->kp9 = must_alloc(nk * sizeof *d->kp9);
    int32_t *kpd = must_alloc(nk * sizeof *kpd);
    for (size_t i = 0; i < d->nx; i++) d->x[i] = (float)(2 * bench_urand() - 1);
    for (int i = 0; i < L->o; i++) d->b[i] = (float)(0.1 * (2 * bench_urand() - 1));
    uint64_t seed = bench_rng_save();
    bench_pattern_weights(L->o, L->c, 0.5, d->w45, d->kp45);
    bench_rng_restore(seed); /* the same kernels, more of them removed */
    bench_pattern_weights(L->o, L->c, 0.75, d->w9, d->kp9);
    bench_rng_restore(seed);
    bench_pattern_weights(L->o, L->c, 0.0, d->wd, kpd); /* dense layer: the unpruned projected weights */
    free(kpd);
    size_t kept45 = 0, kept9 = 0;
    for (size_t k = 0; k < nk; k++) kept45 += d->kp45[k] >= 0, kept9 += d->kp9[k] >= 0;
    d->compr45 = 9.0 * (double)nk / (4.0 * (double)kept45);
    d->compr9 = 9.0 * (double)nk / (4.0 * (double)kept9);
}

void conv_data_free(conv_data *d)
{
    free(d->x), free(d->b), free(d->w45), free(d->w9), free(d->wd), free(d->kp45), free(d->kp9);
}

pdc_model *bench_conv_model(pdc_context *ctx, const layer_case *L, const float *w, const int32_t *kp, const float *b)
{
    pdc_model *m;
    PDC(ctx, pdc_model_create(ctx, L->name, &m));
    int64_t xd[4] = {1, L->c, L->h, L->w}, wd[4] = {L->o, L->c, 3, 3}, bd[1] = {L->o};
    PDC(ctx, pdc_model_add_input(m, "x", 4, xd));
    PDC(ctx, pdc_model_add_constant(m, "w", 4, wd, w));
    if (kp) PDC(ctx, pdc_model_set_sparsity_pattern(m, "w", 3, 3, 8, bench_patterns, (size_t)L->o * L->c, kp));
    PDC(ctx, pdc_model_add_constant(m, "b", 1, bd, b));
    pdc_attrs *a;
    PDC(ctx, pdc_attrs_create(ctx, &a));
    PDC(ctx, pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){1, 1, 1, 1}));
    PDC(ctx, pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){L->s, L->s}));
    const char *out = "y";
    PDC(ctx, pdc_model_add_layer(m, "conv", "conv", 3, (const char *const[]){"x", "w", "b"}, 1, &out, a));
    pdc_attrs_destroy(a);
    PDC(ctx, pdc_model_mark_output(m, "y"));
    return m;
}

void conv_prog_make(conv_prog *p, const layer_case *L, int threads, const float *x, const float *w, const int32_t *kp,
                    const float *b)
{
    memset(p, 0, sizeof *p);
    PDC(NULL, pdc_context_create(&p->ctx));
    pdc_context *ctx = p->ctx;
    char t[16];
    snprintf(t, sizeof t, "%d", threads);
    PDC(ctx, pdc_context_set_option(ctx, "threads", t));
    pdc_model *m = bench_conv_model(ctx, L, w, kp, b);
    PDC(ctx, pdc_compile(ctx, m, "cpu", &p->prog));
    pdc_model_destroy(m);
    const char *k = "";
    pdc_program_layer_kernel(p->prog, 0, NULL, &k);
    snprintf(p->kernel, sizeof p->kernel, "%s", k);
    int64_t xd[4] = {1, L->c, L->h, L->w}, yd[4] = {1, L->o, bench_out_h(L), bench_out_w(L)};
    PDC(ctx, pdc_tensor_wrap(ctx, 4, xd, (float *)x, &p->x));
    PDC(ctx, pdc_tensor_create(ctx, 4, yd, &p->y));
}

void conv_prog_run(conv_prog *p) { PDC(p->ctx, pdc_program_run(p->prog, 1, &p->x, 1, &p->y)); }

void conv_prog_free(conv_prog *p)
{
    pdc_tensor_destroy(p->x);
    pdc_tensor_destroy(p->y);
    pdc_program_destroy(p->prog);
    pdc_context_destroy(p->ctx);
}

static volatile float warm_sink;

void bench_warm(const float *p, size_t n, int th)
{
    float s = 0.0f;
#pragma omp parallel for num_threads(th) schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; i += 16) s += p[i];
    warm_sink = s;
}
