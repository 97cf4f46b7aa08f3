/*
 * train_conv3d.h - internal to lib/train: the depth axis of the trainer's conv (train_conv.c). A 3-D conv's
 * col operand is [C*KD*KH*KW, P], P = N*OD*OH*OW, row ((c*kd + kz)*kh + ky)*kw + kx, column
 * n*OD*OH*OW + (z*OH + y)*OW + x - the 2-D layout with the depth tap and the output depth added, so the
 * products of train_conv.c serve 3-D convs unchanged; only the unrolling differs (train_conv3d.c).
 */
#ifndef PDC_LIB_TRAIN_CONV3D_H
#define PDC_LIB_TRAIN_CONV3D_H

#include <stddef.h>

/* A 3-D conv's window: sizes [depth, rows, columns] of input, output and kernel; strides, pads (begin),
 * dilations; ld: the row stride of col. */
typedef struct tr_vol3 {
    size_t n, c;
    size_t in[3], out[3], k[3];
    ptrdiff_t s[3], pb[3], d[3];
    size_t ld;
} tr_vol3;

/* col[r][n*OD*OH*OW + s] = x[n, c, in position of tap r at output s] (0 outside the input), nt threads
 * (over rows r). */
void tr_im2col3d(const tr_vol3 *v, const float *x, float *col, int nt);
/* dx[n, c] (+)= the sum of dcol over every (tap, output) that read it (accumulate 0: dx is overwritten);
 * one thread per plane (n, c), taps and outputs in a fixed order, so results do not depend on nt. */
void tr_col2im3d(const tr_vol3 *v, const float *dcol, float *dx, int accumulate, int nt);

#endif
