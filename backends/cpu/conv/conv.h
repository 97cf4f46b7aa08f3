/*
 * conv.h - internal to the cpu target's convolution families: the 2-D view of a conv layer, the
 * packed input layout both generators read, the dense family's planner, and the pattern family's
 * planner split from its JIT so the AArch64 emitter (backends/arm) retargets it.
 *
 * Packed input: channel c's planes start at c * ps floats; a column stride sx splits every padded
 * input row into sx phase planes (phase ph holds padded columns sx*j + ph; flat layouts below split
 * the rows into sy phases too), each hq rows of wq floats (wq a multiple of 16, just enough for the
 * columns valid outputs read; a band buffer holds band_rows of them), pstride floats apart. A plane
 * starts with `lead` zeros, which shift every row by lead floats from alignment. Tap (ky, kx) of
 * output (y, x) then reads phase (kx*dx) % sx, row y*sy + ky*dy, column lead + x + (kx*dx) / sx:
 * constant offsets from the tile origin. Lanes of outputs past ow read on into the next row; zeros
 * after the last row keep every such read inside the plane. The stride of an axis with one tap is
 * taken by the packing (py, px), so the kernels see stride 1 there. Flat planes (below) overlap: a
 * plane's last rows, padding, lie in the next plane's lead, and the reads of discarded lanes run on
 * into the next plane; the last plane's run past c * ps into `tail` floats of zeros.
 */
#ifndef PDC_BACKENDS_CPU_CONV_H
#define PDC_BACKENDS_CPU_CONV_H

#include "backends/cpu/cpu.h"

/* A conv layer as 2-D (1-D convs have h = kh = 1). */
typedef struct conv_geom {
    int64_t n, c, h, w, o, group, cg;
    int64_t kh, kw, sy, sx, dy, dx, pt, pl;
    int64_t py, px;              /* image rows/columns per padded row/column: the stride of a one-tap axis */
    int64_t oh, ow;
    /* packing */
    int64_t nph, hq, wq, ps;     /* phases (sx; flat: sx*sy), padded rows and row stride of a phase plane, channel stride */
    int64_t pstride;             /* floats from one phase plane to the next (>= lead + band_rows * wq but
                                  * for flat planes, which overlap) */
    int64_t tail;                /* floats of zeros after the last channel (c * ps): flat planes' reads */
    int flat;                    /* small planes: output rows laid end to end, see cpu_conv_layout_flat */
    int64_t lead;                /* zeros before a plane's rows: moves the most read column (flat: offset) to alignment */
    /* tiling: ty rows x tx vectors; nvx vectors cover a row */
    int64_t nvx, tx, ty, ntx, nty;
    /* row bands (cpu_conv_band): when the packed input outgrows L2, each band of row tiles
     * (cpu_conv_band_tiles) is packed into a per-thread buffer of band_rows rows and computed while
     * it is in L2; nband 1: the whole input is packed (band_rows = hq) before any tile runs.
     * band_groups: the threads whose contiguous shares of the bands get even row tiles */
    int64_t nband, band_rows, band_groups;
    int in_place;                /* the packed layout is the input's own (cpu_conv_input_in_place): tiles read
                                  * the input where it lies, nothing is packed */
} conv_geom;

/* The activation a conv kernel applies inline (an ir_act_kind; IR_ACT_NONE: none) and its parameters. */
typedef struct conv_act {
    int32_t act;
    float act_min, act_max, act_alpha;
} conv_act;

#define CONV_MAX_PATTERNS 32
#define CONV_MAX_TAPS 64          /* kh * kw: patterns are uint64 masks */
#define CONV_FILTER_CHUNK 16      /* filters per work item (half of it where threads share pieces) */
#define CONV_BAND_BYTES (512 << 10) /* packed input per row band: half of a 1 MiB L2 */
#define CONV_WEIGHT_PREFETCH_FLOATS 2048 /* software prefetch distance in the weight stream (8 KiB) */
#define CONV_PREFETCH_VECTORS 16   /* input prefetch: as many kernels ahead as compute this many vectors */
#define CONV_FLAT_MAX_LINES 4096   /* flat planes in shift mode: 16-float lines per packed channel */
#define CONV_FLAT_LINE_COST 4      /* flat planes: a cache line read costs about 4 lane shuffles */
#define CONV_MAX_VARIANTS 4
#define CONV_SHIFT_MAX_VECTORS 40 /* shift mode: aligned vectors of one packed row the generator tracks */

/* The window and packed layout a generated conv kernel depends on: part of every conv family's
 * kernel key (which is hashed: zeroed before cpu_conv_key_window fills this). */
typedef struct conv_kwin {
    int32_t kh, kw, sy, sx, dy, dx;
    int32_t flat;                /* small planes laid flat (cpu_conv_layout_flat) */
    int64_t cg, hq, wq, ps, pstride, tail, ow, oh, ohw;
} conv_kwin;
void cpu_conv_key_window(const conv_geom *g, conv_kwin *w);

/* Everything the generated code depends on (hashed: zero it before filling). */
typedef struct conv_key {
    char tag[8];                 /* "convN": bump N when the generated code changes */
    int32_t vec, n_vregs;
    int32_t n_pat;
    conv_kwin w;
    conv_act act;                /* inline activation (cpu_conv_inline_act) */
    int32_t residual;            /* a residual tensor (rt) added before the activation (ir_epilogue) */
    int32_t ksets;               /* partial accumulator sets per output vector (flat planes) */
    int32_t shift;               /* rows read as aligned vectors, other columns shuffled out of them */
    int64_t lead;
    int32_t n_var;
    int32_t var_ty[CONV_MAX_VARIANTS], var_tx[CONV_MAX_VARIANTS], var_last[CONV_MAX_VARIANTS]; /* last: lanes of the final vector */
    uint64_t pat[CONV_MAX_PATTERNS];
} conv_key;

/*
 * A pattern conv planned for one target description (vec, n_vregs): the JIT (cpu) and the AArch64
 * emitter (backends/arm) share it. Tile variant v is a function
 *   void tile<v>(const float *xt, const int64_t *meta, const int32_t *cidx, const float *wpk,
 *                const float *bias, const int64_t *ochan, float *yt, const float *rt, int64_t k0, int64_t k1)
 * computing executed filters [k0, k1) of the tile whose packed input starts at xt (the tile's first
 * packed row, column x0, in the buffer holding it) and whose output starts at yt (y0*ow + x0 of the
 * image); with key.residual, rt is the residual at the same place (else unused).
 */
typedef struct cpu_conv_plan {
    conv_geom g;
    ir_fused_params fp;          /* the layer's fused activation and out_perm */
    /* after cpu_conv_plan_init */
    const float *w, *b;          /* the weights and bias (NULL: none) packed: the model's, or those a
                                  * planner sets (cpu_conv_operands); read while planning only
                                  * (cpu_conv_plan_pack, the channel-major family's packing) */
    uint64_t *kmask;             /* per kernel o*cg+c: kept taps (0 = pruned) */
    uint64_t pats[CONV_MAX_PATTERNS + 1], full;
    size_t n_pat;
    int as_dense;                /* too many distinct masks: kernels run over the full window */
    int all_dense;               /* every kernel dense (the cpu target may take conv_dense.c instead) */
    /* after cpu_conv_plan_pack */
    conv_key key;
    int ksets;
    int64_t *meta;               /* per executed filter: 2*n_pat+1 entries (list starts..end, weight starts) */
    int32_t *cidx;               /* input channel of every kept kernel, in execution order */
    float *wpk;                  /* kept weights in execution order */
    float *bias;                 /* per executed filter */
    int64_t *ochan;              /* per executed filter: output channel */
    size_t n_meta, n_cidx, n_wpk; /* entries of meta, cidx, wpk (bias, ochan: g.o) */
    int var_of[2][2];            /* [last row tile][last column tile] -> variant */
    int64_t kept_kernels, kept_taps;
    int64_t chunk;               /* filters per work item */
    pdc_layer_knobs knobs;       /* tuned tile, chunk and packing (0s: the heuristics'; the cpu target
                                  * sets them before cpu_conv_plan_pack) */
} cpu_conv_plan;

/* Stage 1: geometry, fused params, per-kernel masks and the pattern set. PDC_ERR_UNSUPPORTED with
 * a reason in why (nothing on ctx) for what the generator does not take. Release P either way. */
pdc_status cpu_conv_plan_init(pdc_context *ctx, const ir_model *m, const ir_layer *l, cpu_conv_plan *P, char *why,
                              size_t why_cap);
/* Stage 2, for target t: tiling, the code key, filter order and the packed arrays. band_bytes > 0:
 * row bands of at most about that many packed bytes when the whole input is larger, for `threads`
 * threads (the caller packs band by band, cpu_conv_pack's r0/r1); 0: never banded. */
pdc_status cpu_conv_plan_pack(pdc_context *ctx, const pdc_llvm_target *t,
                              int64_t band_bytes, int threads, cpu_conv_plan *P);
void cpu_conv_plan_release(cpu_conv_plan *P);
/* The most kept taps of P's patterns, and the accumulator vectors a row tile of the pattern kernel
 * may hold with that many (shift: AVX-512's aligned rows + lane shifts), as cpu_conv_plan_pack
 * chooses them; the tuner's tiles stay within it (conv_knobs.c). */
int cpu_conv_max_taps(const cpu_conv_plan *P);
int cpu_conv_row_budget(const pdc_llvm_target *t, int max_taps, int shift);
/* One line for pdc_program_layer_kernel. */
void cpu_conv_plan_info(const cpu_conv_plan *P, const pdc_llvm_target *t, char *buf, size_t cap);
/* The same with the kernel's tiling described by `tile` (for the other pattern families). */
void cpu_conv_plan_describe(const cpu_conv_plan *P, const pdc_llvm_target *t, const char *tile, char *buf, size_t cap);
/* Emits the tile variants of key arg (a conv_key *) as "<prefix>_tile<v>" into m (a pdc_kernel_emit_fn). */
pdc_status cpu_conv_emit_tiles(void *arg, const pdc_context *ctx, const pdc_llvm_target *t, LLVMContextRef c,
                               LLVMModuleRef m, const char *prefix);

/* Reads the layer into g (not the layout); PDC_ERR_UNSUPPORTED with a reason for what is not JIT'd. */
pdc_status cpu_conv_geometry(const ir_model *m, const ir_layer *l, conv_geom *g, char *why, size_t why_cap);
/* Tiles of ty rows x tx vectors (clamped to the output) and the packed layout they read. */
void cpu_conv_layout(conv_geom *g, int vec, int64_t tx, int64_t ty);
/*
 * Small planes: rows are split into sy phases as columns are into sx (sx*sy phase planes, plane
 * (ky*dy % sy)*sx + kx*dx % sx), so output pixel (y, x) is flat index y * wq + x in every plane, with
 * wq = ow + the widest column offset (less where rows can share their zero padding: at column
 * stride 1 a 7x7 "same" plane has rows of 8), and tap (ky, kx) reads flat index p + cpu_conv_flat_offset -
 * every tap one constant offset over the whole plane, so vectors run over rows end to end (a 7x7
 * plane fills 4 vectors of 16 lanes instead of 7). Returns 0 if the layer does not fit (a row wider
 * than half a vector, or the plane needs more than max_vectors vectors).
 */
int cpu_conv_layout_flat(conv_geom *g, int vec, int max_vectors);
/* A flat layout's planes for tiles of `lanes` lanes with g->lead zeros before the rows: pstride, ps
 * and tail (cpu_conv_layout_flat lays them out with no lead; the planners again with theirs). */
void cpu_conv_flat_planes(conv_geom *g, int64_t lanes);
static inline int64_t cpu_conv_flat_offset(int64_t sy, int64_t sx, int64_t dy, int64_t dx, int64_t wq, int64_t pstride,
                                           int64_t ky, int64_t kx)
{
    return (ky * dy % sy * sx + kx * dx % sx) * pstride + ky * dy / sy * wq + kx * dx / sx;
}
/* Packs channels [c0, c1) of one image x into xp (layout above): padded rows [r0, r1) of every
 * phase plane become the buffer's rows 0.. (the whole input: 0, hq; a band: its rows). Writes every
 * float of those channels' c * ps.. (c + 1) * ps, zeros included, and with the last channel the
 * tail. A flat plane's rows may run up to `lead` floats into the next plane's lead, or past c1 * ps:
 * only zeros, which that plane writes too, so the order does not matter (flat layouts are packed
 * whole, by one thread into its own buffer). */
void cpu_conv_pack(const conv_geom *g, const float *x, float *xp, int64_t c0, int64_t c1, int64_t r0, int64_t r1);
/* The same without the AVX-512 packer cpu_conv_pack takes where the host has it (for tests). */
void cpu_conv_pack_portable(const conv_geom *g, const float *x, float *xp, int64_t c0, int64_t c1, int64_t r0,
                            int64_t r1);
/* Zeros that end every phase plane of the whole input (its last rows and columns, padding): how
 * far a flat plane may reach into the next one's lead. */
int64_t cpu_conv_plane_zero_tail(const conv_geom *g);
/* Epilogue pieces the conv generators emit: the activation (pdc_irb_act), and the store of flat
 * vector v holding pixels p0.. of a flat plane (row stride wq) into output channel yk (rows of ow),
 * one masked store per output row it touches, after adding the same pixels of residual channel rk
 * (unless NULL) and the activation. */
LLVMValueRef cpu_conv_emit_act(pdc_irb *irb, const conv_act *a, LLVMValueRef v);
/* The activation of fp as a kernel key holds it (every activation is applied inline). */
conv_act cpu_conv_inline_act(const ir_fused_params *fp);
void cpu_conv_emit_flat_store(pdc_irb *irb, LLVMValueRef v, LLVMValueRef yk, LLVMValueRef rk, const conv_act *a,
                              int64_t p0, int64_t wq, int64_t ow, int64_t rows);
/* The weights and bias (NULL: none) conv l's kernels compute with: the model's constants, or with
 * the batchnorm of the epilogue offered folded in. */
static inline void cpu_conv_operands(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const float **w,
                                     const float **b)
{
    if (cc->fuse && cc->fuse->bn >= 0) {
        *w = cc->fold_w;
        *b = cc->fold_b;
        return;
    }
    *w = m->tensors[l->inputs[1]].data;
    *b = l->n_inputs > 2 && l->inputs[2] >= 0 ? m->tensors[l->inputs[2]].data : NULL;
}
static inline const float *cpu_conv_residual(const cpu_layer *L, float *const *buf)
{
    return L->fused && L->epi.residual >= 0 ? buf[L->epi.residual] : NULL;
}
/* The store of vector v to yk + off (n lanes valid), after adding the residual's at rk + off (unless
 * rk is NULL) and the activation. */
void cpu_conv_emit_row_store(pdc_irb *irb, LLVMValueRef v, LLVMValueRef yk, LLVMValueRef rk, const conv_act *a,
                             int64_t off, int n);
/* One tile's share of a layer: filters (or filter groups) of chunk ch in row tile tyi, column tile
 * txi; xr points at the packed input of the tile's first row (column 0), yn at the image's output,
 * rn at the image's residual (NULL without one). */
typedef void (*cpu_conv_tile_fn)(const void *arg, const float *xr, float *yn, const float *rn, int64_t tyi, int64_t txi,
                                 int64_t ch);
/* Runs one image on x->threads threads: thread t packs xn into x->own[t] (whole, or a band at a time
 * when g->nband > 1) and calls tile for (tile, chunk) pieces of what it packed. Packed whole, the
 * pieces go chunk by chunk (each chunk over every tile) in contiguous shares (x->shares, shares.c),
 * and any thread may run any piece. */
void cpu_conv_run_image(const conv_geom *g, int64_t nchunk, const float *xn, float *yn, const float *rn,
                        const cpu_exec *x, cpu_conv_tile_fn tile, const void *arg);
/* Runs a conv layer over every image of the batch (cpu_conv_run_image with nchunk chunks, into the
 * layer's output or its epilogue's: cpu_layer_out). */
pdc_status cpu_conv_run_layer(const cpu_layer *L, const ir_layer *l, float *const *buf, const cpu_exec *x,
                              const conv_geom *g, int64_t nchunk, cpu_conv_tile_fn tile, const void *arg);
/* Tile variants, one per distinct (rows, columns, last) of [last row tile?][last column tile?]
 * among those that occur: rows[r] / cols[c] / lasts[c] give the sizes of a full (0) or last (1)
 * tile (lasts and var_last may be NULL: no third size). Fills var_* and var_of (-1 where a
 * combination does not occur); returns the count. */
int cpu_conv_tile_variants(const conv_geom *g, const int32_t rows[2], const int32_t cols[2], const int32_t lasts[2],
                           int32_t *var_ty, int32_t *var_tx, int32_t *var_last, int var_of[2][2]);
/* The same for row-vectorised tiles (the pattern and dense families): ty rows x tx vectors of vec
 * lanes, the last vector of a row partial; flat planes one row of vectors. */
int cpu_conv_row_variants(const conv_geom *g, int vec, int32_t *var_ty, int32_t *var_tx, int32_t *var_last,
                          int var_of[2][2]);
/* The dense families' weights: layer wt [o][cg][taps] packed [block][channel][tap][bsz] (bsz filters
 * a block, in stored order), the bias (0 without bt) and each block's first input channel. */
typedef struct conv_blocks {
    float *wpk, *bias;
    int64_t *cbase;
    int64_t n;                   /* blocks */
} conv_blocks;
/* Allocates and packs b (PDC_ERR_OUT_OF_MEMORY: release b all the same). */
pdc_status cpu_conv_blocks_make(pdc_context *ctx, const conv_geom *g, const float *w, const float *bias,
                                int64_t bsz, conv_blocks *b);
void cpu_conv_blocks_release(conv_blocks *b);
/* Prefetch of the weight stream of a channel loop: the `per` floats of one channel, whole channels
 * CONV_WEIGHT_PREFETCH_FLOATS ahead of wc (read once per tile, from memory when a layer's weights
 * outgrow the caches, sooner than the hardware prefetcher would). */
void cpu_conv_emit_weight_prefetch(pdc_irb *irb, LLVMValueRef wc, int64_t per);
/* ", packed in row bands" when g is banded, else "" (for the kernel description). */
const char *cpu_conv_band_info(const conv_geom *g);
/* Whether the packed layout of g (after cpu_conv_layout) is the input's own: one phase, no padding,
 * no lead, rows of whole vectors back to back and nothing read past the plane - then g->in_place may be
 * set and no band chosen (1x1 convs at stride 1 over planes of whole vectors: a packing pass would only
 * copy the input, per thread). */
int cpu_conv_input_in_place(const conv_geom *g);
/* Private scratch cpu_conv_run_image needs per thread (a packed input, or band), a multiple of 16. */
size_t cpu_conv_thread_floats(const conv_geom *g);
/* Splits the tiles into row bands of about band_bytes packed bytes or less (at least one row tile a
 * band; none if there are fewer than two row tiles per thread), as many as a multiple of `threads`
 * (then band_groups = threads) or else one row tile each (band_groups 1), setting nband,
 * band_groups, band_rows and the band buffer's pstride/ps. An input that fits gets a band per
 * thread if its row tiles split evenly over two or more threads, else none. */
void cpu_conv_band(conv_geom *g, int vec, int64_t band_bytes, int threads);
/* Row tiles [t0, t1) of band b. */
void cpu_conv_band_tiles(const conv_geom *g, int64_t b, int64_t *t0, int64_t *t1);
/* The row tiles [t0, t1) of the band holding row tile tyi (< nty). */
void cpu_conv_band_of(const conv_geom *g, int64_t tyi, int64_t *t0, int64_t *t1);

/*
 * Dense 3x3 depthwise convolution reading the input in place (conv_dw.c, AVX-512 hosts): stride 1 or 2,
 * pads up to 2, activation none/relu/clip/leaky relu; PDC_ERR_UNSUPPORTED for anything else.
 */
pdc_status cpu_plan_conv_depthwise(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g,
                                   const ir_fused_params *fp, cpu_layer *L);
/*
 * Dense 3x3 stride-1 convolution by Winograd F(4x4, 3x3) (conv_wino.c, AVX-512 hosts): output planes
 * from 14x14, one group, activation none/relu/clip/leaky relu; PDC_ERR_UNSUPPORTED for anything else.
 */
pdc_status cpu_plan_conv_wino(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g,
                              const ir_fused_params *fp, cpu_layer *L);
/*
 * Dense convolution with several filters per register tile (conv_dense.c): PDC_ERR_UNSUPPORTED if
 * the layer does not suit it (fewer than two filters per group, a window over 64 taps).
 */
pdc_status cpu_plan_conv_dense(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g0,
                               const ir_fused_params *fp, cpu_layer *L);
/*
 * Dense convolution vectorised over output channels (conv_ocvec.c): PDC_ERR_UNSUPPORTED unless
 * every group has whole vectors of filters and rows would leave lanes idle (14, 28, 56 wide...).
 */
pdc_status cpu_plan_conv_ocvec(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g0,
                               const ir_fused_params *fp, cpu_layer *L);
/*
 * Pattern-sparse convolution in channel-major order (conv_cmajor.c), for plan P after
 * cpu_conv_plan_init: PDC_ERR_UNSUPPORTED unless the layer is strided (PDC_CONV_CMAJOR=1/0 forces)
 * and the patterns' union leaves registers for a tile.
 */
pdc_status cpu_plan_conv_cmajor(const cpu_compile *cc, const cpu_conv_plan *P, cpu_layer *L);
/* A 1x1 conv (stride 1, no padding, one group, no out_perm) with BCR-pruned weights (conv_bcr.c), on
 * bcr.c's planes product; PDC_ERR_UNSUPPORTED (nothing on ctx) for any other conv. */
pdc_status cpu_plan_conv_bcr(const cpu_compile *cc, const ir_model *m, const ir_layer *l, const conv_geom *g,
                             const ir_fused_params *fp, cpu_layer *L);

#endif
