/*
 * train_conv3d.c - the depth axis of the trainer's conv: im2col and col2im for 3-D windows (layout in
 * train_conv3d.h). Bounds are checked per tap row instead of padding the volume first: 3-D inputs are
 * large and a padded copy would double the scratch.
 */
#include <string.h>

#include "lib/train/train_conv3d.h"

void tr_im2col3d(const tr_vol3 *v, const float *x, float *col, int nt)
{
    const size_t kvol = v->k[0] * v->k[1] * v->k[2], rows = v->c * kvol;
    const size_t osp = v->out[0] * v->out[1] * v->out[2], isp = v->in[0] * v->in[1] * v->in[2];
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t r = 0; r < rows; r++) {
        const size_t c = r / kvol, kz = r / (v->k[1] * v->k[2]) % v->k[0], ky = r / v->k[2] % v->k[1],
                     kx = r % v->k[2];
        for (size_t n = 0; n < v->n; n++) {
            const float *xc = x + (n * v->c + c) * isp;
            float *dst = col + r * v->ld + n * osp;
            for (size_t z = 0; z < v->out[0]; z++) {
                const ptrdiff_t iz = (ptrdiff_t)z * v->s[0] - v->pb[0] + (ptrdiff_t)kz * v->d[0];
                for (size_t y = 0; y < v->out[1]; y++) {
                    const ptrdiff_t iy = (ptrdiff_t)y * v->s[1] - v->pb[1] + (ptrdiff_t)ky * v->d[1];
                    float *drow = dst + (z * v->out[1] + y) * v->out[2];
                    if (iz < 0 || iz >= (ptrdiff_t)v->in[0] || iy < 0 || iy >= (ptrdiff_t)v->in[1]) {
                        memset(drow, 0, v->out[2] * sizeof *drow);
                        continue;
                    }
                    const float *srow = xc + ((size_t)iz * v->in[1] + (size_t)iy) * v->in[2];
                    for (size_t xo = 0; xo < v->out[2]; xo++) {
                        const ptrdiff_t ix = (ptrdiff_t)xo * v->s[2] - v->pb[2] + (ptrdiff_t)kx * v->d[2];
                        drow[xo] = ix >= 0 && ix < (ptrdiff_t)v->in[2] ? srow[ix] : 0.0f;
                    }
                }
            }
        }
    }
}

void tr_col2im3d(const tr_vol3 *v, const float *dcol, float *dx, int accumulate, int nt)
{
    const size_t kvol = v->k[0] * v->k[1] * v->k[2], planes = v->n * v->c;
    const size_t osp = v->out[0] * v->out[1] * v->out[2], isp = v->in[0] * v->in[1] * v->in[2];
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (size_t q = 0; q < planes; q++) {
        const size_t n = q / v->c, c = q % v->c;
        float *dxc = dx + q * isp;
        if (!accumulate) memset(dxc, 0, isp * sizeof *dxc);
        for (size_t t = 0; t < kvol; t++) {
            const size_t kz = t / (v->k[1] * v->k[2]), ky = t / v->k[2] % v->k[1], kx = t % v->k[2];
            const float *src = dcol + (c * kvol + t) * v->ld + n * osp;
            for (size_t z = 0; z < v->out[0]; z++) {
                const ptrdiff_t iz = (ptrdiff_t)z * v->s[0] - v->pb[0] + (ptrdiff_t)kz * v->d[0];
                if (iz < 0 || iz >= (ptrdiff_t)v->in[0]) continue;
                for (size_t y = 0; y < v->out[1]; y++) {
                    const ptrdiff_t iy = (ptrdiff_t)y * v->s[1] - v->pb[1] + (ptrdiff_t)ky * v->d[1];
                    if (iy < 0 || iy >= (ptrdiff_t)v->in[1]) continue;
                    const float *srow = src + (z * v->out[1] + y) * v->out[2];
                    float *drow = dxc + ((size_t)iz * v->in[1] + (size_t)iy) * v->in[2];
                    for (size_t xo = 0; xo < v->out[2]; xo++) {
                        const ptrdiff_t ix = (ptrdiff_t)xo * v->s[2] - v->pb[2] + (ptrdiff_t)kx * v->d[2];
                        if (ix >= 0 && ix < (ptrdiff_t)v->in[2]) drow[ix] += srow[xo];
                    }
                }
            }
        }
    }
}
