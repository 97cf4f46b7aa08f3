/*
 * dnnl_conv.c - the oneDNN convolution of the layer benchmarks (dnnl_conv.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_conv.h"

#define DN(x)                                                                                                   \
    do {                                                                                                        \
        dnnl_status_t s_ = (x);                                                                                 \
        if (s_ != dnnl_success) {                                                                               \
            fprintf(stderr, "bench: %s:%d: oneDNN call failed (%d): %s\n", __FILE__, __LINE__, (int)s_, #x);   \
            exit(1);                                                                                            \
        }                                                                                                       \
    } while (0)

/* a (layout from) into b (layout to), waiting for it */
static void reorder(dconv *d, const dnnl_memory_desc_t *from, dnnl_memory_t a, const dnnl_memory_desc_t *to,
                    dnnl_memory_t b)
{
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    DN(dnnl_reorder_primitive_desc_create(&rpd, from, d->eng, to, d->eng, NULL));
    DN(dnnl_primitive_create(&r, rpd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    DN(dnnl_primitive_execute(r, d->str, 2, args));
    DN(dnnl_stream_wait(d->str));
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
}

void dconv_run(dconv *d)
{
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, d->src}, {DNNL_ARG_WEIGHTS, d->wei}, {DNNL_ARG_BIAS, d->bia},
                               {DNNL_ARG_DST, d->dst}};
    DN(dnnl_primitive_execute(d->prim, d->str, 4, args));
    DN(dnnl_stream_wait(d->str));
}

int dconv_make(dconv *d, int spatial, const int64_t *extent, int64_t c, int64_t o, int64_t s, int wino,
               const float *x, const float *w, const float *b, float *y)
{
    memset(d, 0, sizeof *d);
    DN(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    DN(dnnl_stream_create(&d->str, d->eng, dnnl_stream_default_flags));
    const int rank = 2 + spatial;
    dnnl_dims_t sd = {1, c}, wd = {o, c}, bd = {o}, dd = {1, o}, st, pad;
    for (int i = 0; i < spatial; i++) {
        sd[2 + i] = extent[i];
        wd[2 + i] = 3;
        dd[2 + i] = (extent[i] + 2 - 3) / s + 1;
        st[i] = s;
        pad[i] = 1;
    }
    const dnnl_format_tag_t data_tag = spatial == 3 ? dnnl_ncdhw : dnnl_nchw, w_tag = spatial == 3 ? dnnl_oidhw
                                                                                                   : dnnl_oihw;
    dnnl_memory_desc_t smd, wmd, bmd, dmd, usmd, uwmd, udmd;
    DN(dnnl_memory_desc_init_by_tag(&smd, rank, sd, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&wmd, rank, wd, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&bmd, 1, bd, dnnl_f32, dnnl_x));
    DN(dnnl_memory_desc_init_by_tag(&dmd, rank, dd, dnnl_f32, dnnl_format_tag_any));
    DN(dnnl_memory_desc_init_by_tag(&usmd, rank, sd, dnnl_f32, data_tag));
    DN(dnnl_memory_desc_init_by_tag(&uwmd, rank, wd, dnnl_f32, w_tag));
    DN(dnnl_memory_desc_init_by_tag(&udmd, rank, dd, dnnl_f32, data_tag));
    dnnl_convolution_desc_t cd;
    DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_inference,
                                          wino ? dnnl_convolution_winograd : dnnl_convolution_direct, &smd, &wmd,
                                          &bmd, &dmd, st, pad, pad));
    dnnl_primitive_desc_t pd;
    const dnnl_status_t made = dnnl_primitive_desc_create(&pd, &cd, NULL, d->eng, NULL);
    if (made != dnnl_success && wino) {
        dnnl_stream_destroy(d->str);
        dnnl_engine_destroy(d->eng);
        memset(d, 0, sizeof *d);
        return -1;
    }
    DN(made);
    const dnnl_memory_desc_t *psmd = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *pwmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *pdmd = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    DN(dnnl_primitive_create(&d->prim, pd));
    DN(dnnl_memory_create(&d->src, psmd, d->eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&d->wei, pwmd, d->eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&d->bia, &bmd, d->eng, DNNL_MEMORY_ALLOCATE));
    DN(dnnl_memory_create(&d->dst, pdmd, d->eng, DNNL_MEMORY_ALLOCATE));
    void *bp;
    DN(dnnl_memory_get_data_handle(d->bia, &bp));
    memcpy(bp, b, (size_t)o * sizeof *b);
    dnnl_memory_t us, uw, ud;
    DN(dnnl_memory_create(&us, &usmd, d->eng, (void *)(uintptr_t)x));
    DN(dnnl_memory_create(&uw, &uwmd, d->eng, (void *)(uintptr_t)w));
    DN(dnnl_memory_create(&ud, &udmd, d->eng, y));
    reorder(d, &usmd, us, psmd, d->src);
    reorder(d, &uwmd, uw, pwmd, d->wei);
    dconv_run(d);
    reorder(d, pdmd, d->dst, &udmd, ud);
    dnnl_memory_destroy(us);
    dnnl_memory_destroy(uw);
    dnnl_memory_destroy(ud);
    dnnl_primitive_desc_destroy(pd);
    return 0;
}

void dconv_free(dconv *d)
{
    if (!d->prim) return;
    dnnl_primitive_destroy(d->prim);
    dnnl_memory_destroy(d->src);
    dnnl_memory_destroy(d->wei);
    dnnl_memory_destroy(d->bia);
    dnnl_memory_destroy(d->dst);
    dnnl_stream_destroy(d->str);
    dnnl_engine_destroy(d->eng);
}
