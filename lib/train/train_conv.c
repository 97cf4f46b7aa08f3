/*
 * train_conv.c - forward and backward of conv (1-D, 2-D and 3-D: the depth axis in train_conv3d.c) and fc
 * as matrix products.
 *
 * conv: the input is unrolled (im2col) into col [C*T, P], P = N*OH*OW, row (c, tap), column (n, oh, ow), row
 * stride ld (conv_geom); kept for the backward pass. In 2-D, T counts the live taps only: a tap that reads nothing
 * but padding (1x1 maps with pad 1) would have a zero row, and the products leave it out (live_taps). Per group g
 * (K = C/group*T rows of col, og filters), each a single product over all P columns of the batch:
 *   forward   Y_g = W_g col_g, then scattered into NCHW y with the bias
 *   weights   dW_g = dY_g col_g^T                   (dY gathered as [O, P])
 *   input     dcol_g = W_g^T dY_g, then col2im adds dcol into dx, a tile of images at a time (dcol stays in L2)
 * Dense products are cpu_train_sgemm (backends/backend.h: OpenBLAS, blocks fixed by the shape, so bit-identical
 * for any thread count). fc: y = x W^T + b, dW = dy^T x, dx = dy W; sparse: col = x^T [K, N], y^T = W col + b.
 *
 * Sparse weights (tr_param.sparse) replace the products by the sparse kernels: the forward and the
 * input gradient touch kept weights only (the transposed index arrays list, per col row, the filters
 * that keep it, so pruned kernels cost nothing), and the weight gradient is one dot product per kept
 * weight. Both paths give the same results up to float rounding. A sparse conv with dead taps takes the dense
 * products over its live taps (fewer multiply-adds than the sparse kernels over its kept taps).
 */
#include <string.h>

#include "lib/train/train.h"
#include "lib/train/train_conv3d.h"

#define CONV_MAX_TAPS 64 /* larger 2-D windows keep every tap */

typedef struct conv_geom {
    size_t n, c, o, group, cg, og;
    size_t h, w, oh, ow, kh, kw;
    size_t kd;    /* 3-D: the kernel depth (v3 the whole window; ohw counts output depth too); 0 for 1-D/2-D */
    tr_vol3 v3;
    ptrdiff_t sh, sw, ph, pw, dh, dw;
    size_t K, ohw, P, rows;
    size_t ld; /* row stride of col, dcol and the [O, P] matrices: P padded (see conv_geom_get) */
    /* 2-D: the taps (kr*kw + kc) that read the input somewhere, increasing; col has rows for these only (nl of kk) */
    size_t kk, nl;
    uint8_t live[CONV_MAX_TAPS];
} conv_geom;

/* Tap t' of the live ones as an index into the kh*kw window. */
static size_t tap_of(const conv_geom *g, size_t t)
{
    return g->nl == g->kk ? t : g->live[t];
}

/* Whether kernel offset k reads the input for some output position: 0 <= o*s - p + k*d < in, o < out. */
static int offset_live(size_t k, size_t out, size_t in, ptrdiff_t s, ptrdiff_t p, ptrdiff_t d)
{
    for (size_t o = 0; o < out; o++) {
        const ptrdiff_t i = (ptrdiff_t)o * s - p + (ptrdiff_t)k * d;
        if (i >= 0 && i < (ptrdiff_t)in) return 1;
    }
    return 0;
}

/* Dead taps read padding only (ResNet-18 at 32x32: layer4's 1x1 maps with pad 1 use 1 tap of 9, its stride-2 entry
 * 4): their rows of col are zeros, their weights get a zero gradient and their input gradient lands in the padding.
 * The products leave them out (the same sums without the zero terms). */
static void live_taps(conv_geom *g)
{
    g->kk = g->kh * g->kw;
    g->nl = g->kk;
    if (g->kd || g->kk > CONV_MAX_TAPS) return;
    size_t nl = 0;
    for (size_t kr = 0; kr < g->kh; kr++) {
        if (!offset_live(kr, g->oh, g->h, g->sh, g->ph, g->dh)) continue;
        for (size_t kc = 0; kc < g->kw; kc++)
            if (offset_live(kc, g->ow, g->w, g->sw, g->pw, g->dw)) g->live[nl++] = (uint8_t)(kr * g->kw + kc);
    }
    if (nl) g->nl = nl; /* no live tap at all (an output of padding only): left as it is */
}

static pdc_status conv_geom_get(const ir_model *m, const ir_layer *l, conv_geom *g)
{
    ir_window_params p;
    pdc_status st = ir_window_params_get(m, l, &p);
    if (st) return st;
    memset(g, 0, sizeof *g);
    g->n = (size_t)p.n, g->c = (size_t)p.c, g->o = (size_t)p.o, g->group = (size_t)p.group;
    g->cg = g->c / g->group, g->og = g->o / g->group;
    if (p.nsp == 1) {
        g->h = g->oh = g->kh = 1;
        g->sh = g->dh = 1;
        g->ph = 0;
        g->w = (size_t)p.in[0], g->ow = (size_t)p.out[0], g->kw = (size_t)p.k[0];
        g->sw = p.stride[0], g->pw = p.pad_begin[0], g->dw = p.dil[0];
    } else {
        const int a = p.nsp - 2; /* rows and columns are the last two axes */
        g->h = (size_t)p.in[a], g->w = (size_t)p.in[a + 1], g->oh = (size_t)p.out[a], g->ow = (size_t)p.out[a + 1];
        g->kh = (size_t)p.k[a], g->kw = (size_t)p.k[a + 1];
        g->sh = p.stride[a], g->sw = p.stride[a + 1], g->ph = p.pad_begin[a], g->pw = p.pad_begin[a + 1];
        g->dh = p.dil[a], g->dw = p.dil[a + 1];
    }
    const size_t kd = p.nsp == 3 ? (size_t)p.k[0] : 1, od = p.nsp == 3 ? (size_t)p.out[0] : 1;
    if (p.nsp == 3) {
        g->kd = kd;
        tr_vol3 *v = &g->v3;
        v->n = g->n, v->c = g->c;
        for (int i = 0; i < 3; i++) {
            v->in[i] = (size_t)p.in[i], v->out[i] = (size_t)p.out[i], v->k[i] = (size_t)p.k[i];
            v->s[i] = p.stride[i], v->pb[i] = p.pad_begin[i], v->d[i] = p.dil[i];
        }
    }
    live_taps(g);
    g->K = g->cg * kd * g->nl;
    g->ohw = od * g->oh * g->ow;
    g->P = g->n * g->ohw;
    /* whole vectors, and never a multiple of 2 KB: rows 8 KB apart (P = 2048) all fall into the same L1 set and
     * evict each other while the sparse kernels walk down a column tile */
    g->ld = (g->P + 15) / 16 * 16;
    if (g->ld % 512 == 0) g->ld += 16;
    g->v3.ld = g->ld;
    g->rows = g->c * kd * g->nl;
    return PDC_OK;
}

static int threads_for(const tr_net *net, size_t work)
{
    return work < ((size_t)1 << 17) ? 1 : net->threads;
}

/* d[0..n) = s[0..n) / d[0..n) += s[0..n): constant-length loops for the usual row widths (the compiler turns them
 * into a few vector moves), a plain loop otherwise. */
#define ROW_OP(n, body)                                                                                             \
    do {                                                                                                           \
        switch (n) {                                                                                               \
        case 4: for (size_t j = 0; j < 4; j++) body; break;                                                        \
        case 7: for (size_t j = 0; j < 7; j++) body; break;                                                        \
        case 8: for (size_t j = 0; j < 8; j++) body; break;                                                        \
        case 14: for (size_t j = 0; j < 14; j++) body; break;                                                      \
        case 16: for (size_t j = 0; j < 16; j++) body; break;                                                      \
        case 28: for (size_t j = 0; j < 28; j++) body; break;                                                      \
        case 32: for (size_t j = 0; j < 32; j++) body; break;                                                      \
        default: for (size_t j = 0; j < (n); j++) body; break;                                                     \
        }                                                                                                          \
    } while (0)

static inline void row_copy(float *restrict d, const float *restrict s, size_t n) { ROW_OP(n, d[j] = s[j]); }
static inline void row_add(float *restrict d, const float *restrict s, size_t n) { ROW_OP(n, d[j] += s[j]); }

/* The input with its padding made explicit: xp[n, c, i, j] = x[n, c, i - ph, j - pw] (0 outside), for
 * i < hp, j < wp (big enough for every tap and for the whole input). */
static size_t padded_h(const conv_geom *g)
{
    const size_t need = (g->oh - 1) * (size_t)g->sh + (g->kh - 1) * (size_t)g->dh + 1, in = g->h + (size_t)g->ph;
    return need > in ? need : in;
}

static size_t padded_w(const conv_geom *g)
{
    const size_t need = (g->ow - 1) * (size_t)g->sw + (g->kw - 1) * (size_t)g->dw + 1, in = g->w + (size_t)g->pw;
    return need > in ? need : in;
}

static size_t padded_floats(const conv_geom *g) { return g->n * g->c * padded_h(g) * padded_w(g); }

/* col[r, n*ohw + oh*ow + ow] = x[n, c, oh*sh - ph + kr*dh, ow*sw - pw + kc*dw] (0 outside the input) for
 * r = c*nl + t', (kr, kc) the live tap t'; xp: padded_floats(g) floats of scratch. */
static void im2col(const tr_net *net, const conv_geom *g, const float *x, float *col, float *xp)
{
    if (g->kd) {
        tr_im2col3d(&g->v3, x, col, threads_for(net, g->rows * g->P));
        return;
    }
    const size_t hp = padded_h(g), wp = padded_w(g), planes = g->n * g->c, ow = g->ow;
    const size_t sh = (size_t)g->sh, sw = (size_t)g->sw, dh = (size_t)g->dh, dw = (size_t)g->dw;
    const int nt = threads_for(net, g->rows * g->P);
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#pragma omp for schedule(static)
        for (size_t q = 0; q < planes; q++) {
            float *dst = xp + q * hp * wp;
            const float *src = x + q * g->h * g->w;
            memset(dst, 0, hp * wp * sizeof *dst);
            for (size_t i = 0; i < g->h; i++) {
                row_copy(dst + (i + (size_t)g->ph) * wp + (size_t)g->pw, src + i * g->w, g->w);
            }
        }
#pragma omp for schedule(static)
        for (size_t r = 0; r < g->rows; r++) {
            const size_t c = r / g->nl, t = tap_of(g, r % g->nl), kr = t / g->kw, kc = t % g->kw;
            for (size_t n = 0; n < g->n; n++) {
                const float *plane = xp + (n * g->c + c) * hp * wp + kr * dh * wp + kc * dw;
                float *d = col + r * g->ld + n * g->ohw;
                /* the row width is fixed per layer: one constant-width loop nest per common width */
#define IM2COL_ROWS(W)                                                                                             \
    for (size_t oh = 0; oh < g->oh; oh++)                                                                          \
        for (size_t j = 0; j < (W); j++) d[oh * (W) + j] = plane[oh * sh * wp + j];
                if (sw == 1 && ow == 8) {
                    IM2COL_ROWS(8)
                } else if (sw == 1 && ow == 16) {
                    IM2COL_ROWS(16)
                } else if (sw == 1) {
                    for (size_t oh = 0; oh < g->oh; oh++) row_copy(d + oh * ow, plane + oh * sh * wp, ow);
                } else {
                    for (size_t oh = 0; oh < g->oh; oh++)
                        for (size_t j = 0; j < ow; j++) d[oh * ow + j] = plane[oh * sh * wp + j * sw];
                }
#undef IM2COL_ROWS
            }
        }
    }
}

/* dx[n, c, ih, iw] (+)= the sum of dcol over every (kr, kc, oh, ow) that read it, for images [n0, n1) (dcol holds
 * their columns from 0, row stride ldc): accumulated in a padded plane (xp: padded_floats(g) floats of scratch), one
 * thread per plane (n, c), then cropped into dx. */
static void col2im_add(const tr_net *net, const conv_geom *g, const float *dcol, size_t ldc, size_t n0, size_t n1,
                       float *dx, float *xp, int accumulate)
{
    if (g->kd) { /* 3-D: the whole batch at once (conv_dx_tile_images) */
        tr_col2im3d(&g->v3, dcol, dx, accumulate, threads_for(net, g->rows * g->P));
        return;
    }
    const size_t hp = padded_h(g), wp = padded_w(g), planes = (n1 - n0) * g->c, ow = g->ow;
    dx += n0 * g->c * g->h * g->w;
    const size_t sh = (size_t)g->sh, sw = (size_t)g->sw, dh = (size_t)g->dh, dw = (size_t)g->dw;
    const int nt = threads_for(net, g->rows * g->P);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t q = 0; q < planes; q++) {
        const size_t n = q / g->c, c = q % g->c; /* n: the image within [n0, n1) */
        float *acc = xp + q * hp * wp;
        memset(acc, 0, hp * wp * sizeof *acc);
        for (size_t tl = 0; tl < g->nl; tl++) {
            const size_t t = tap_of(g, tl), kr = t / g->kw, kc = t % g->kw;
            const float *src = dcol + (c * g->nl + tl) * ldc + n * g->ohw;
            float *plane = acc + kr * dh * wp + kc * dw;
#define COL2IM_ROWS(W)                                                                                             \
    for (size_t oh = 0; oh < g->oh; oh++)                                                                          \
        for (size_t j = 0; j < (W); j++) plane[oh * sh * wp + j] += src[oh * (W) + j];
            if (sw == 1 && ow == 8) {
                COL2IM_ROWS(8)
            } else if (sw == 1 && ow == 16) {
                COL2IM_ROWS(16)
            } else if (sw == 1) {
                for (size_t oh = 0; oh < g->oh; oh++) row_add(plane + oh * sh * wp, src + oh * ow, ow);
            } else {
                for (size_t oh = 0; oh < g->oh; oh++)
                    for (size_t j = 0; j < ow; j++) plane[oh * sh * wp + j * sw] += src[oh * ow + j];
            }
#undef COL2IM_ROWS
        }
        float *dxp = dx + q * g->h * g->w;
        for (size_t i = 0; i < g->h; i++) {
            const float *sr = acc + (i + (size_t)g->ph) * wp + (size_t)g->pw;
            float *dr = dxp + i * g->w;
            if (accumulate)
                row_add(dr, sr, g->w);
            else
                row_copy(dr, sr, g->w);
        }
    }
}

/* col = x^T for fc: x [n, K] -> col [K, n]. */
static void transpose(const float *x, size_t rows, size_t cols, float *out)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) out[j * rows + i] = x[i * cols + j];
}

static pdc_status ensure_buf(tr_net *net, float **buf, size_t *cap, size_t need)
{
    if (need <= *cap && *buf) return PDC_OK;
    float *c = pdc_alloc_aligned(net->ctx, need ? need : 1, sizeof *c);
    if (!c) return PDC_ERR_OUT_OF_MEMORY;
    pdc_free(*buf);
    *buf = c;
    *cap = need;
    return PDC_OK;
}

/* Builds the layer's col operand from its input (conv: im2col, fc: transpose) into lr->col, or for a conv under
 * option recompute into the net's one shared buffer (the layer that held it rebuilds its operand when its backward
 * pass needs it). */
static pdc_status make_col(tr_net *net, size_t li, const conv_geom *g, size_t fc_n, size_t fc_k)
{
    const ir_layer *l = &net->exec->layers[li];
    tr_layer *lr = &net->layers[li];
    const float *x = net->val[l->inputs[0]];
    const size_t need = g ? g->rows * g->ld : fc_n * fc_k;
    pdc_status st;
    if (g && net->recompute) {
        if ((st = ensure_buf(net, &net->shared_col, &net->shared_col_cap, need))) return st;
        if (net->shared_col_layer >= 0) net->layers[net->shared_col_layer].col_valid = 0;
        net->shared_col_layer = (int)li;
        lr->colp = net->shared_col;
    } else {
        if ((st = ensure_buf(net, &lr->col, &lr->col_cap, need))) return st;
        lr->colp = lr->col;
    }
    if (g) {
        if ((st = tr_net_work(net, padded_floats(g)))) return st;
        im2col(net, g, x, lr->colp, net->work);
    } else {
        transpose(x, fc_n, fc_k, lr->colp);
    }
    lr->col_valid = 1;
    return PDC_OK;
}

/* The weights of the live taps as the [O, K] matrix of the products: w itself when every tap is live, else gathered
 * into wl (live_weight_floats). */
static size_t live_weight_floats(const conv_geom *g) { return g->nl == g->kk ? 0 : g->o * g->K; }

static const float *live_weights(const conv_geom *g, const float *w, float *wl)
{
    if (g->nl == g->kk) return w;
    for (size_t oc = 0; oc < g->o * g->cg; oc++)
        for (size_t t = 0; t < g->nl; t++) wl[oc * g->nl + t] = w[oc * g->kk + g->live[t]];
    return wl;
}

/* dw (+)= the live taps' gradient dwl ([O, K]); a dead tap's gradient is zero. */
static void scatter_live_grad(const conv_geom *g, const float *dwl, float *dw, int accumulate)
{
    for (size_t oc = 0; oc < g->o * g->cg; oc++) {
        float *d = dw + oc * g->kk;
        const float *s = dwl + oc * g->nl;
        if (accumulate) {
            for (size_t t = 0; t < g->nl; t++) d[g->live[t]] += s[t];
        } else {
            for (size_t t = 0; t < g->kk; t++) d[t] = 0.0f;
            for (size_t t = 0; t < g->nl; t++) d[g->live[t]] = s[t];
        }
    }
}

static const float *bias_of(const tr_net *net, const ir_layer *l)
{
    return l->n_inputs > 2 && l->inputs[2] >= 0 ? net->val[l->inputs[2]] : NULL;
}

/* ------------------------------------------------------------------ conv */

static pdc_status conv_forward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    conv_geom g;
    pdc_status st = conv_geom_get(net->exec, l, &g);
    if (st || (st = make_col(net, li, &g, 0, 0))) return st;
    const float *w = net->val[l->inputs[1]], *b = bias_of(net, l), *col = net->layers[li].colp;
    float *y = net->val[l->outputs[0]];
    const int pi = net->layers[li].w_param;
    /* Y[o, p] = W_g col_g over the whole batch at once (one product of P = N*OH*OW columns, so a layer with few
     * output pixels still makes wide products: the sparse kernel works on 64 columns at a time), then scattered
     * into NCHW with the bias */
    if ((st = tr_net_work(net, g.o * g.ld + live_weight_floats(&g)))) return st;
    float *yt = net->work;
    /* a pruned conv with dead taps takes the dense products over its live taps: ResNet-18's layer4 at 32x32 does
     * 1/9 of the dense work there, 1/2 of the sparse kernels' (which would multiply the zero rows of its kept dead
     * taps) */
    if (pi >= 0 && net->params[pi].sparse && g.nl == g.kk) {
        tr_param *wp = &net->params[pi];
        tr_csr_pack(net, wp, w);
        tk_spmm(net->isa, g.o, wp->fwd.ptr, wp->fwd.idx, wp->fwd.val, NULL, col, g.ld, yt, g.ld, g.P, 0, net->threads);
    } else {
        const float *wk = live_weights(&g, w, yt + g.o * g.ld);
        for (size_t gi = 0; gi < g.group; gi++)
            cpu_train_sgemm(0, 0, g.og, g.P, g.K, 1.0f, wk + gi * g.og * g.K, g.K, col + gi * g.K * g.ld, g.ld, 0.0f,
                            yt + gi * g.og * g.ld, g.ld, net->threads);
    }
    const size_t rows = g.n * g.o;
    const int ns = threads_for(net, rows * g.ohw * 8);
#pragma omp parallel for num_threads(ns) schedule(static) if (ns > 1)
    for (size_t q = 0; q < rows; q++) {
        const size_t n = q / g.o, o = q % g.o;
        const float bv = b ? b[o] : 0.0f, *src = yt + o * g.ld + n * g.ohw;
        float *dst = y + q * g.ohw;
        for (size_t s = 0; s < g.ohw; s++) dst[s] = src[s] + bv;
    }
    return PDC_OK;
}

/* Bias gradient: db[o] += sum over samples and positions of dy (per channel, fixed order). */
static void bias_grad(const float *dy, size_t n, size_t o, size_t sp, float *db)
{
    for (size_t c = 0; c < o; c++) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++) {
            const float *d = dy + (i * o + c) * sp;
            float part = 0.0f;
#pragma omp simd reduction(+ : part)
            for (size_t k = 0; k < sp; k++) part += d[k];
            s += (double)part;
        }
        db[c] += (float)s;
    }
}

/*
 * Input gradient of a sparse stride-1 conv without dcol and col2im: with dY stored at the padded planes' row
 * stride wp (zeros in the columns past ow), every kept weight w[o, c, kr, kc] adds w * dY[n, o] to the padded
 * plane of dX[n, c] shifted by (kr*dh, kc*dw) as ONE contiguous run of oh*wp floats (the extra columns carry
 * zeros). The transposed index arrays list, per (c, kr, kc), the filters o that keep it, in increasing o: the
 * sparse kernel sums them per tap in registers, then one add per tap goes into the plane; the order is fixed. One thread per image; work: sparse_dx_floats floats.
 */
static size_t sparse_dx_floats(const conv_geom *g)
{
    const size_t wp = padded_w(g), len = (g->oh - 1) * wp + g->ow;
    return g->n * g->c * padded_h(g) * wp + g->n * g->o * g->oh * wp + g->n * g->kh * g->kw * len;
}

static void conv_sparse_dx_direct(const tr_net *net, const conv_geom *g, const tr_csr *r, const float *dy, float *dx,
                                  int accumulate, float *work)
{
    /* each run ends at the last real output column, so it stays inside its own plane (no write can reach the
     * plane another thread owns) */
    const size_t hp = padded_h(g), wp = padded_w(g), plane = hp * wp, run = g->oh * wp, kk = g->kh * g->kw;
    const size_t len = (g->oh - 1) * wp + g->ow;
    float *dxp = work, *dyp = work + g->n * g->c * plane, *tmp = dyp + g->n * g->o * run;
    const tk_isa *isa = net->isa;
    const int nt = threads_for(net, g->rows * g->P);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t n = 0; n < g->n; n++) {
        float *dyn = dyp + n * g->o * run, *dxn = dxp + n * g->c * plane;
        for (size_t o = 0; o < g->o; o++)
            for (size_t i = 0; i < g->oh; i++) {
                float *d = dyn + o * run + i * wp;
                row_copy(d, dy + ((n * g->o + o) * g->oh + i) * g->ow, g->ow);
                for (size_t j = g->ow; j < wp; j++) d[j] = 0.0f;
            }
        memset(dxn, 0, g->c * plane * sizeof *dxn);
        float *taps = tmp + n * kk * len; /* this image's kk rows: sum over the filters keeping each tap */
        for (size_t c = 0; c < g->c; c++) {
            isa->spmm(kk, r->ptr + c * kk, r->idx, r->val, NULL, dyn, run, taps, len, 0, len, 0);
            for (size_t t = 0; t < kk; t++) {
                if (r->ptr[c * kk + t] == r->ptr[c * kk + t + 1]) continue; /* a tap no filter keeps */
                const size_t kr = t / g->kw, kc = t % g->kw;
                isa->axpy(len, 1.0f, taps + t * len, dxn + c * plane + kr * (size_t)g->dh * wp + kc * (size_t)g->dw);
            }
        }
        for (size_t c = 0; c < g->c; c++)
            for (size_t i = 0; i < g->h; i++) {
                const float *sr = dxn + c * plane + (i + (size_t)g->ph) * wp + (size_t)g->pw;
                float *dr = dx + ((n * g->c + c) * g->h + i) * g->w;
                if (accumulate)
                    row_add(dr, sr, g->w);
                else
                    row_copy(dr, sr, g->w);
            }
    }
}

/* dy [N, O, OH*OW] gathered as [O, P] rows (column n*OH*OW + s). */
static void gather_dy(const tr_net *net, const conv_geom *g, const float *dy, float *dyg)
{
    const size_t rows = g->n * g->o;
    const int nt = threads_for(net, rows * g->ohw * 8);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t q = 0; q < rows; q++) {
        const size_t o = q / g->n, n = q % g->n;
        memcpy(dyg + o * g->ld + n * g->ohw, dy + (n * g->o + o) * g->ohw, g->ohw * sizeof *dyg);
    }
}

/* Whether the direct input gradient (above) beats dcol = W^T dY over the whole batch + col2im: the direct one works
 * image by image on runs of OH*WP floats, which on small planes leave most vector lanes idle (ResNet-18 at 32x32:
 * layer4's 1x1 output is a run of 3 floats); measured, 1 thread: ResNet-18 pruned, direct on its 8x8 layers
 * 171 ms a step vs 147 ms without; the digits CNN (8x8, 16 -> 32 channels) 0.76 ms with vs 0.92 ms without. */
static int sparse_dx_direct_pays(const conv_geom *g)
{
    if (g->sh != 1 || g->sw != 1 || g->kd) return 0; /* its taps are 2-D */
    return g->ohw >= 256 || (g->ohw >= 64 && g->rows <= 256);
}

/* Images per tile of the input gradient through dcol: dcol is 9x the input for a 3x3 conv (4.7 MB in ResNet-18's
 * layer1); a tile of about 512 KB stays in L2 between the product writing it and col2im reading it, instead of
 * streaming through L3 twice. At least 256 columns per tile (narrower products lose more than the cache gains);
 * the whole batch when that leaves one tile. A function of the shape alone. */
static size_t conv_dx_tile_images(const conv_geom *g)
{
    if (g->kd) return g->n;
    const size_t per_image = g->rows * g->ohw * sizeof(float), min_nb = (256 + g->ohw - 1) / g->ohw;
    size_t nb = ((size_t)512 << 10) / per_image;
    if (nb < min_nb) nb = min_nb;
    return nb >= g->n || nb * g->ohw % 16 ? g->n : nb; /* tiles start on whole vectors */
}

/* The row stride of a tile of p columns (as conv_geom_get's ld). */
static size_t tile_ld(size_t p)
{
    size_t ld = (p + 15) / 16 * 16;
    return ld % 512 == 0 ? ld + 16 : ld;
}

/* dx (+)= the input gradient, tile by tile of images: dcol_t = W^T dY_t (dense: wk, the live taps' weights; sparse:
 * r, the transposed kept weights), then col2im of the tile. dcol: rows x tile_ld(tile columns) floats. */
static void conv_dx_by_tiles(const tr_net *net, const conv_geom *g, const float *wk, const tr_csr *r, const float *dyg,
                             float *dcol, float *xp, float *dx, int accumulate)
{
    const size_t nb = conv_dx_tile_images(g), ldt = nb == g->n ? g->ld : tile_ld(nb * g->ohw);
    for (size_t n0 = 0; n0 < g->n; n0 += nb) {
        const size_t n1 = n0 + nb < g->n ? n0 + nb : g->n, p0 = n0 * g->ohw, pc = (n1 - n0) * g->ohw;
        if (r) {
            tk_spmm(net->isa, r->rows, r->ptr, r->idx, r->val, NULL, dyg + p0, g->ld, dcol, ldt, pc, 0, net->threads);
        } else {
            for (size_t gi = 0; gi < g->group; gi++)
                cpu_train_sgemm(1, 0, g->K, pc, g->og, 1.0f, wk + gi * g->og * g->K, g->K, dyg + gi * g->og * g->ld + p0,
                                g->ld, 0.0f, dcol + gi * g->K * ldt, ldt, net->threads);
        }
        col2im_add(net, g, dcol, ldt, n0, n1, dx, xp, accumulate);
    }
}

/* Floats of dcol conv_dx_by_tiles needs. */
static size_t conv_dx_tile_floats(const conv_geom *g)
{
    const size_t nb = conv_dx_tile_images(g);
    return g->rows * (nb == g->n ? g->ld : tile_ld(nb * g->ohw));
}

/* Below this many columns (output pixels of the batch) the sparse weight gradient, one dot product of P floats per
 * kept weight, loses to the dense GEMM: 512x512x3x3 at 4.5x fewer weights, P = 32, 1 thread: 2.9 ms vs 2.1 ms;
 * at P = 128 it wins, 0.88 ms vs 1.66 ms. */
#define SPARSE_DW_MIN_P 64

static pdc_status conv_backward(tr_net *net, size_t li, const float *dy)
{
    const ir_layer *l = &net->exec->layers[li];
    conv_geom g;
    pdc_status st = conv_geom_get(net->exec, l, &g);
    if (st) return st;
    if (!net->layers[li].col_valid && (st = make_col(net, li, &g, 0, 0))) return st;
    const float *w = net->val[l->inputs[1]], *col = net->layers[li].colp;
    const int pi = net->layers[li].w_param;
    const int sparse = pi >= 0 && net->params[pi].sparse && g.nl == g.kk; /* as conv_forward */
    /* the sparse weight gradient writes kept weights only: the pruned ones' stay zero (zeroed when the index arrays
     * were built, and by every update), so the array is not cleared first */
    int acc_w = 1, acc_x = 1;
    float *dw = tr_grad_out(net, l->inputs[1], &acc_w);
    float *db = l->n_inputs > 2 ? tr_grad_acc(net, l->inputs[2]) : NULL;
    float *dx = tr_grad_out(net, l->inputs[0], &acc_x);
    const tk_isa *isa = net->isa;
    if (db) bias_grad(dy, g.n, g.o, g.ohw, db);

    if (sparse) {
        const tr_csr *f = &net->params[pi].fwd, *r = &net->params[pi].tr;
        /* dY gathered into [O, P] rows */
        if ((st = tr_net_work(net, g.o * g.ld + (dx ? conv_dx_tile_floats(&g) + padded_floats(&g) : 0)))) return st;
        float *dyg = net->work, *dcol = net->work + g.o * g.ld, *xp = dcol + conv_dx_tile_floats(&g);
        gather_dy(net, &g, dy, dyg);
        if (dw && g.P < SPARSE_DW_MIN_P) {
            /* every weight's gradient as one dense GEMM (the optimizer drops the pruned ones) */
            for (size_t gi = 0; gi < g.group; gi++)
                cpu_train_sgemm(0, 1, g.og, g.K, g.P, 1.0f, dyg + gi * g.og * g.ld, g.ld, col + gi * g.K * g.ld, g.ld,
                                acc_w ? 1.0f : 0.0f, dw + gi * g.og * g.K, g.K, net->threads);
        } else if (dw) {
            tk_spmm_dw(isa, g.o, f->ptr, f->idx, f->vidx, dyg, g.ld, col, g.ld, g.P, dw, acc_w, net->threads);
        }
        if (dx && sparse_dx_direct_pays(&g)) {
            if ((st = tr_net_work(net, sparse_dx_floats(&g)))) return st;
            conv_sparse_dx_direct(net, &g, r, dy, dx, acc_x, net->work);
        } else if (dx) {
            conv_dx_by_tiles(net, &g, NULL, r, dyg, dcol, xp, dx, acc_x);
        }
        return PDC_OK;
    }

    /* dense: dY gathered as [O, P] rows; dW_g = dY_g col_g^T and dcol_g = W_g^T dY_g, each one GEMM over the batch
     * (over the live taps: with dead ones, the weights gathered and the gradient computed aside, then scattered) */
    const size_t wlf = live_weight_floats(&g);
    const size_t dcf = dx ? conv_dx_tile_floats(&g) : 0;
    if ((st = tr_net_work(net, g.o * g.ld + (dx ? dcf + padded_floats(&g) : 0) + 2 * wlf))) return st;
    float *dyg = net->work, *dcol = dyg + g.o * g.ld, *xp = dcol + dcf;
    float *wl = xp + (dx ? padded_floats(&g) : 0), *dwl = wlf ? wl + wlf : dw;
    const float *wk = dx ? live_weights(&g, w, wl) : w;
    const int acc_l = wlf ? 0 : acc_w;
    gather_dy(net, &g, dy, dyg);
    if (dw) {
        for (size_t gi = 0; gi < g.group; gi++)
            cpu_train_sgemm(0, 1, g.og, g.K, g.P, 1.0f, dyg + gi * g.og * g.ld, g.ld, col + gi * g.K * g.ld, g.ld,
                            acc_l ? 1.0f : 0.0f, dwl + gi * g.og * g.K, g.K, net->threads);
        if (wlf) scatter_live_grad(&g, dwl, dw, acc_w);
    }
    if (dx) conv_dx_by_tiles(net, &g, wk, NULL, dyg, dcol, xp, dx, acc_x);
    return PDC_OK;
}

/* ------------------------------------------------------------------ fc */

static pdc_status fc_forward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    ir_gemm_params gp;
    pdc_status st = ir_gemm_params_get(net->exec, l, &gp);
    if (st) return st;
    const size_t n = (size_t)gp.m, k = (size_t)gp.k, o = (size_t)gp.n;
    const float *w = net->val[l->inputs[1]], *b = bias_of(net, l), *x = net->val[l->inputs[0]];
    float *y = net->val[l->outputs[0]];
    const int pi = net->layers[li].w_param;
    if (!(pi >= 0 && net->params[pi].sparse)) {
        /* dense: y[i, j] = b[j] + x[i, :] . w[j, :], dot products over K (no transpose) */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < o; j++) y[i * o + j] = b ? b[j] : 0.0f;
        cpu_train_sgemm(0, 1, n, o, k, 1.0f, x, k, w, k, 1.0f, y, o, net->threads);
        return PDC_OK;
    }
    if ((st = make_col(net, li, NULL, n, k))) return st;
    const float *col = net->layers[li].colp;
    {
        tr_param *wp = &net->params[pi];
        if ((st = tr_net_work(net, o * n))) return st;
        float *yt = net->work;
        tr_csr_pack(net, wp, w);
        tk_spmm(net->isa, o, wp->fwd.ptr, wp->fwd.idx, wp->fwd.val, b, col, n, yt, n, n, 0, net->threads);
        transpose(yt, o, n, y);
        return PDC_OK;
    }
}

static pdc_status fc_backward(tr_net *net, size_t li, const float *dy)
{
    const ir_layer *l = &net->exec->layers[li];
    ir_gemm_params gp;
    pdc_status st = ir_gemm_params_get(net->exec, l, &gp);
    if (st) return st;
    const size_t n = (size_t)gp.m, k = (size_t)gp.k, o = (size_t)gp.n;
    const int pi = net->layers[li].w_param;
    const int sparse = pi >= 0 && net->params[pi].sparse;
    if (sparse && !net->layers[li].col_valid && (st = make_col(net, li, NULL, n, k))) return st;
    const float *w = net->val[l->inputs[1]], *x = net->val[l->inputs[0]], *col = net->layers[li].colp;
    int acc_w = 1, acc_x = 1;
    float *dw = tr_grad_out(net, l->inputs[1], &acc_w); /* sparse: written at kept weights only, as in conv_backward */
    float *db = l->n_inputs > 2 ? tr_grad_acc(net, l->inputs[2]) : NULL;
    float *dx = tr_grad_out(net, l->inputs[0], &acc_x);
    if (db) bias_grad(dy, n, o, 1, db);
    if (sparse) {
        const tr_csr *f = &net->params[pi].fwd, *r = &net->params[pi].tr;
        if ((st = tr_net_work(net, o * n + (dx ? k * n : 0)))) return st;
        float *dyt = net->work, *dxt = net->work + o * n;
        transpose(dy, n, o, dyt);
        if (dw) tk_spmm_dw(net->isa, o, f->ptr, f->idx, f->vidx, dyt, n, col, n, n, dw, acc_w, net->threads);
        if (dx) {
            tk_spmm(net->isa, k, r->ptr, r->idx, r->val, NULL, dyt, n, dxt, n, n, 0, net->threads);
            for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < k; j++) dx[i * k + j] = (acc_x ? dx[i * k + j] : 0.0f) + dxt[j * n + i];
        }
        return PDC_OK;
    }
    if (dw) cpu_train_sgemm(1, 0, o, k, n, 1.0f, dy, o, x, k, acc_w ? 1.0f : 0.0f, dw, k, net->threads);
    if (dx) cpu_train_sgemm(0, 0, n, k, o, 1.0f, dy, o, w, k, acc_x ? 1.0f : 0.0f, dx, k, net->threads);
    return PDC_OK;
}

/* ------------------------------------------------------------------ entry points */

pdc_status tr_dense_forward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    pdc_status st = l->op == IR_OP_CONV ? conv_forward(net, li) : fc_forward(net, li);
    return st ? st : tr_fused_forward(net, li);
}

pdc_status tr_dense_backward(tr_net *net, size_t li)
{
    const ir_layer *l = &net->exec->layers[li];
    const float *dy = net->grad[l->outputs[0]];
    pdc_status st = tr_fused_backward(net, li, &dy);
    if (st) return st;
    return l->op == IR_OP_CONV ? conv_backward(net, li, dy) : fc_backward(net, li, dy);
}
