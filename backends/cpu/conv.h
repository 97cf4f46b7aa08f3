/*
 * conv.h - internal to the cpu target's convolution families: the 2-D view of a conv layer, the
 * packed input layout both generators read, and the dense family's planner.
 *
 * Packed input: channel c's planes start at c * ps floats; a column stride sx splits every padded
 * input row into sx phase planes (phase ph holds padded columns sx*j + ph; flat layouts below split
 * the rows into sy phases too), each hq rows of wq floats
 * (wq a multiple of 16), pstride floats apart. Tap (ky, kx) of output (y, x) then reads phase
 * (kx*dx) % sx, row y*sy + ky*dy, column x + (kx*dx) / sx: constant offsets from the tile origin.
 */
#ifndef PDC_BACKENDS_CPU_CONV_H
#define PDC_BACKENDS_CPU_CONV_H

#include "backends/cpu/cpu.h"

/* A conv layer as 2-D (1-D convs have h = kh = 1). */
typedef struct conv_geom {
    int64_t n, c, h, w, o, group, cg;
    int64_t kh, kw, sy, sx, dy, dx, pt, pl;
    int64_t oh, ow;
    /* packing */
    int64_t nph, hq, wq, ps;     /* phases (sx; flat: sx*sy), rows and row stride of a phase plane, channel stride */
    int64_t pstride;             /* floats from one phase plane to the next (>= hq * wq) */
    int flat;                    /* small planes: output rows laid end to end, see cpu_conv_layout_flat */
    /* tiling: ty rows x tx vectors; nvx vectors cover a row */
    int64_t nvx, tx, ty, ntx, nty;
} conv_geom;

/* Reads the layer into g (not the layout); PDC_ERR_UNSUPPORTED with a reason for what is not JIT'd. */
pdc_status cpu_conv_geometry(const ir_model *m, const ir_layer *l, conv_geom *g, char *why, size_t why_cap);
/* Tiles of ty rows x tx vectors (clamped to the output) and the packed layout they read. */
void cpu_conv_layout(conv_geom *g, int vec, int64_t tx, int64_t ty);
/*
 * Small planes: rows are split into sy phases as columns are into sx (sx*sy phase planes, plane
 * (ky*dy % sy)*sx + kx*dx % sx), so output pixel (y, x) is flat index y * wq + x in every plane, with
 * wq = ow + the widest column offset, and tap (ky, kx) reads flat index p + cpu_conv_flat_offset -
 * every tap one constant offset over the whole plane, so vectors run over rows end to end (a 7x7
 * plane fills 4 vectors of 16 lanes instead of 7). Returns 0 if the layer does not fit (a row wider
 * than half a vector, or the plane needs more than max_vectors vectors).
 */
int cpu_conv_layout_flat(conv_geom *g, int vec, int max_vectors);
static inline int64_t cpu_conv_flat_offset(int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t wq, int64_t pstride,
                                           int64_t ky, int64_t kx)
{
    return (ky * dy % sy * sx + kx * dx % sx) * pstride + ky * dy / sy * wq + kx * dx / sx;
}
/* Packs channels [c0, c1) of one image x into xp (layout above). */
void cpu_conv_pack(const conv_geom *g, const float *x, float *xp, int64_t c0, int64_t c1);

/*
 * Dense convolution with several filters per register tile (conv_dense.c): PDC_ERR_UNSUPPORTED if
 * the layer does not suit it (fewer than two filters per group, a window over 64 taps).
 */
pdc_status cpu_plan_conv_dense(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g0,
                               const ir_fused_params *fp, cpu_layer *L);

#endif
