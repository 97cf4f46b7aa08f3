/*
 * dnnl_conv.h - the oneDNN convolution the layer benchmarks compare pdc with (bench_conv: 2-D, direct and
 * Winograd; bench_conv3d: 3-D, direct): batch 1, a 3x3 (3x3x3) kernel, pads 1, one stride in every spatial
 * dimension, f32 in oneDNN's preferred layouts (the inputs reordered once, outside the timed runs).
 */
#ifndef PDC_TEST_BENCH_DNNL_CONV_H
#define PDC_TEST_BENCH_DNNL_CONV_H

#include <stdint.h>

#include <oneapi/dnnl/dnnl.h>

typedef struct dconv {
    dnnl_engine_t eng;
    dnnl_stream_t str;
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, bia, dst;
} dconv;

/* The convolution of x (NCHW, or NCDHW with spatial 3; extent: the input's spatial sizes) with w (OIHW or OIDHW)
 * and b, c -> o channels, stride s; wino: Winograd instead of direct. Runs it once, its output (NCHW or NCDHW) into
 * y. -1 when oneDNN has no Winograd for the shape (d then holds nothing); any other failure ends the process. */
int dconv_make(dconv *d, int spatial, const int64_t *extent, int64_t c, int64_t o, int64_t s, int wino,
               const float *x, const float *w, const float *b, float *y);
/* One timed run: d's src, wei and bia into its dst. */
void dconv_run(dconv *d);
void dconv_free(dconv *d);

#endif
