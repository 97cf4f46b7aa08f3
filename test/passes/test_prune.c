/*
 * test_prune.c - the pruning projections (passes/project.c) and the prune-* passes, checked by
 * their properties: pattern sets and projections against brute force, the documented tie-breaks on
 * constructed ties, exact connectivity/block/unstructured counts with the smallest norms removed,
 * and a status and message for every bad argument of the public projections.
 */
#include "ir/ir.h"
#include "passes/project.h"

#include "test/common/builders.h"

/* ------------------------------------------------------------------ pattern properties */

START_TEST(prune_pattern_properties)
{
    pdc_model *m = conv_model(), *before = clone(m);
    ck_assert_ok(ctx, transform(m, "prune-pattern", opt_everything()));
    check_pattern_weight(weight_of(m, "a"), 8, 4);
    check_pattern_weight(weight_of(m, "b"), 8, 4);
    check_pattern_weight(weight_of(m, "c"), 8, 4);
    /* 1x1 conv and fc are not pattern-eligible: untouched */
    ck_assert_int_eq(weight_of(m, "d")->sparsity.kind, IR_SPARSITY_NONE);
    ck_assert_int_eq(weight_of(m, "fc")->sparsity.kind, IR_SPARSITY_NONE);
    for (size_t k = 0; k < weight_of(m, "b")->sparsity.n_kernels; k++)
        ck_assert_int_ge(weight_of(m, "b")->sparsity.kernel_pattern[k], 0);
    /* other options */
    pdc_model *m2 = clone(before);
    pdc_attrs *o = opt_everything();
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "patterns", 3));
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "pattern_size", "6")); /* numbers may come as strings */
    ck_assert_ok(ctx, transform(m2, "prune-pattern", o));
    check_pattern_weight(weight_of(m2, "a"), 3, 6);
    check_pattern_weight(weight_of(m2, "c"), 3, 6);
    pdc_model_destroy(m2);
    pdc_model_destroy(before);
    pdc_model_destroy(m);
}
END_TEST

/* Independent natural pattern: positions other than the centre by |w| descending, ties by position. */
static uint64_t brute_natural(const float *k, unsigned win, unsigned centre, unsigned n)
{
    unsigned order[64], cnt = 0;
    for (unsigned p = 0; p < win; p++)
        if (p != centre) order[cnt++] = p;
    for (unsigned i = 1; i < cnt; i++) /* insertion sort: stable */
        for (unsigned j = i; j > 0 && fabsf(k[order[j]]) > fabsf(k[order[j - 1]]); j--) {
            unsigned t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    uint64_t mask = UINT64_C(1) << centre;
    for (unsigned i = 0; i + 1 < n; i++) mask |= UINT64_C(1) << order[i];
    return mask;
}

static double norm_on(const float *k, unsigned win, uint64_t mask)
{
    double s = 0;
    for (unsigned p = 0; p < win; p++)
        if (mask >> p & 1u) s += (double)k[p] * k[p];
    return s;
}

/* Brute force over a 3x3 layer: the set and every kernel's projection. */
static void brute_force_check(int64_t o, int64_t c, size_t k, unsigned n, uint32_t seed)
{
    const unsigned win = 9, centre = 4;
    size_t kernels = (size_t)(o * c), total = kernels * win;
    float *w = malloc(total * sizeof *w), *orig = malloc(total * sizeof *w);
    test_fill_random(orig, total, seed);
    /* quantise so that equal magnitudes and equal counts actually happen */
    for (size_t i = 0; i < total; i++) orig[i] = (float)((int)(orig[i] * 4.0f)) / 4.0f;
    memcpy(w, orig, total * sizeof *w);
    uint64_t *pat = calloc(k, sizeof *pat);
    int32_t *kp = calloc(kernels, sizeof *kp);
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, w, o, c, 3, 3, k, n, 0, pat, kp));

    /* expected set: by count (desc), then mask (asc), then padding with the smallest unused masks */
    size_t count[512] = {0};
    for (size_t kk = 0; kk < kernels; kk++) count[brute_natural(orig + kk * win, win, centre, n)]++;
    uint64_t want[64];
    size_t have = 0;
    int used[512] = {0};
    while (have < k) {
        int best = -1;
        for (int mask = 0; mask < 512; mask++)
            if (!used[mask] && count[mask] && (best < 0 || count[mask] > count[best])) best = mask;
        if (best < 0) break;
        used[best] = 1;
        want[have++] = (uint64_t)best;
    }
    for (int mask = 0; mask < 512 && have < k; mask++)
        if (!used[mask] && popcount64((uint64_t)mask) == (int)n && (mask >> centre & 1)) want[have++] = (uint64_t)mask;
    for (size_t i = 0; i < k; i++) ck_assert_msg(pat[i] == want[i], "pattern %zu: got 0x%llx, want 0x%llx", i,
                                                 (unsigned long long)pat[i], (unsigned long long)want[i]);
    /* every kernel: the first pattern of the set with the largest kept norm, weights masked */
    for (size_t kk = 0; kk < kernels; kk++) {
        const float *ko = orig + kk * win;
        size_t best = 0;
        for (size_t i = 1; i < k; i++)
            if (norm_on(ko, win, pat[i]) > norm_on(ko, win, pat[best])) best = i;
        ck_assert_int_eq(kp[kk], (int32_t)best);
        for (unsigned q = 0; q < win; q++)
            ck_assert(w[kk * win + q] == ((pat[best] >> q & 1u) ? ko[q] : 0.0f));
    }

    /* With the set = all C(8, n-1) patterns, the projection is the global optimum (brute force). */
    uint64_t all[128];
    size_t n_all = 0;
    for (int mask = 0; mask < 512; mask++)
        if (popcount64((uint64_t)mask) == (int)n && (mask >> centre & 1)) all[n_all++] = (uint64_t)mask;
    ck_assert_uint_eq(n_all, (size_t)project_binomial(8, n - 1));
    memcpy(w, orig, total * sizeof *w);
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, w, o, c, 3, 3, n_all, 0, PDC_PROJECT_GIVEN_PATTERNS, all, kp));
    for (size_t kk = 0; kk < kernels; kk++) {
        double got = norm_on(orig + kk * win, win, all[kp[kk]]), best = 0;
        for (size_t i = 0; i < n_all; i++) {
            double v = norm_on(orig + kk * win, win, all[i]);
            if (v > best) best = v;
        }
        ck_assert(got == best);
    }
    free(w);
    free(orig);
    free(pat);
    free(kp);
}

START_TEST(pattern_projection_matches_brute_force)
{
    brute_force_check(6, 5, 8, 4, 1);
    brute_force_check(4, 3, 4, 3, 2);
    brute_force_check(3, 2, 8, 2, 3);   /* 8 = C(8,1): every pattern of 2 entries */
    brute_force_check(2, 2, 20, 5, 4);  /* more patterns than kernels: padding */
    brute_force_check(5, 5, 1, 9, 5);   /* the full window */
    brute_force_check(5, 5, 1, 1, 6);   /* the centre alone */
}
END_TEST

START_TEST(pattern_tie_breaks)
{
    uint64_t pat[4];
    int32_t kp[4];
    /* natural pattern: equal magnitudes -> lower positions: centre 4 + 0, 1, 2 */
    float k1[9] = {1, -1, 1, 1, 1, -1, 1, 1, 1};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, k1, 1, 1, 3, 3, 1, 4, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x17);
    ck_assert_int_eq(kp[0], 0);
    float k1b[9] = {2, 0, 0, 0, 0, 0, 0, 0, -2};   /* |w[0]| == |w[8]|: position 0 wins */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, k1b, 1, 1, 3, 3, 1, 2, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x11);
    ck_assert(k1b[8] == 0.0f && k1b[0] == 2.0f);

    /* pattern set: equal counts -> smaller bitmask first; higher count first */
    float two[2 * 9] = {5, 5, 0, 0, 0, 0, 0, 0, 0, /* natural {0,1,4} = 0x13 */
                        0, 0, 0, 0, 0, 0, 0, 5, 5}; /* natural {4,7,8} = 0x190 */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, two, 2, 1, 3, 3, 2, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x13);
    ck_assert_uint_eq(pat[1], 0x190);
    float three[3 * 9] = {5, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 0, 0, 0, 0, 0, 0, 0, 6, 6};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, three, 3, 1, 3, 3, 2, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x190);
    ck_assert_uint_eq(pat[1], 0x13);
    ck_assert_int_eq(kp[0], 1);
    ck_assert_int_eq(kp[1], 0);

    /* padding: the smallest unused masks of 3 entries containing the centre: 0x13, 0x15 */
    float one[9] = {0, 0, 0, 0, 1, 0, 0, 7, 7};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, one, 1, 1, 3, 3, 3, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x190);
    ck_assert_uint_eq(pat[1], 0x13);
    ck_assert_uint_eq(pat[2], 0x15);
    float one_b[9] = {9, 9, 0, 0, 1, 0, 0, 0, 0}; /* natural 0x13 first, then padding skips it */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, one_b, 1, 1, 3, 3, 3, 3, 0, pat, kp));
    ck_assert_uint_eq(pat[0], 0x13);
    ck_assert_uint_eq(pat[1], 0x15);
    ck_assert_uint_eq(pat[2], 0x16);

    /* projection: equal kept norms -> the earlier pattern of the set */
    float tie[9] = {0, 1, 1, 0, 1, 0, 0, 0, 0};
    uint64_t given[2] = {0x13, 0x15}; /* {0,1,4} and {0,2,4} both keep 2 */
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, tie, 1, 1, 3, 3, 2, 0, PDC_PROJECT_GIVEN_PATTERNS, given, kp));
    ck_assert_int_eq(kp[0], 0);
    ck_assert(tie[1] == 1.0f && tie[2] == 0.0f);
    float tie2[9] = {0, 1, 1, 0, 1, 0, 0, 0, 0};
    uint64_t given2[2] = {0x15, 0x13};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, tie2, 1, 1, 3, 3, 2, 0, PDC_PROJECT_GIVEN_PATTERNS, given2, kp));
    ck_assert_int_eq(kp[0], 0);
    ck_assert(tie2[1] == 0.0f && tie2[2] == 1.0f);

    /* KEEP_PRUNED: a kernel at -1 stays removed and does not vote */
    float kept[2 * 9] = {0, 0, 0, 0, 1, 0, 0, 7, 7, 9, 9, 9, 9, 9, 9, 9, 9, 9};
    int32_t kin[2] = {0, -1};
    ck_assert_ok(ctx, pdc_prune_project_pattern(ctx, kept, 2, 1, 3, 3, 1, 3, PDC_PROJECT_KEEP_PRUNED, pat, kin));
    ck_assert_uint_eq(pat[0], 0x190);
    ck_assert_int_eq(kin[1], -1);
    for (int i = 9; i < 18; i++) ck_assert(kept[i] == 0.0f);
}
END_TEST

/* ------------------------------------------------------------------ connectivity, block, unstructured */

static double kernel_norm(const float *w, size_t win) { return norm_on(w, (unsigned)win, ~UINT64_C(0)); }

START_TEST(connectivity_rate_is_exact)
{
    pdc_model *m = conv_model();
    pdc_attrs *o = opt_everything();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "connectivity", "0.5, b = 0.7,c=0.3"));
    ck_assert_ok(ctx, transform(m, "prune-pattern,prune-connectivity", o));
    struct { const char *layer; size_t removed; } want[] = {{"a", 12}, {"b", 33}, {"c", 12}}; /* floor(.5*24), floor(.7*48), floor(.3*40) */
    for (size_t i = 0; i < 3; i++) {
        const ir_tensor *w = weight_of(m, want[i].layer);
        check_pattern_weight(w, 8, 4);
        size_t removed = 0, win = (size_t)(w->dims[2] * w->dims[3]);
        double max_removed = 0, min_kept = INFINITY;
        for (size_t k = 0; k < w->sparsity.n_kernels; k++) {
            if (w->sparsity.kernel_pattern[k] < 0) removed++;
            double nk = kernel_norm(w->data + k * win, win);
            if (w->sparsity.kernel_pattern[k] >= 0 && nk < min_kept) min_kept = nk;
        }
        ck_assert_uint_eq(removed, want[i].removed);
        (void)max_removed;
        ck_assert(min_kept > 0);
    }
    pdc_model_destroy(m);

    /* the smallest norms (after pattern projection) go, lower index first on equal norms */
    float w[6] = {3, 1, -1, 2, 1, 5};
    uint8_t keep[6];
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, w, 2, 3, 1, 0.5, keep));
    uint8_t want_keep[6] = {1, 0, 0, 1, 0, 1};
    ck_assert_mem_eq(keep, want_keep, 6);
    ck_assert(w[1] == 0 && w[2] == 0 && w[4] == 0 && w[0] == 3 && w[3] == 2 && w[5] == 5);
    float eq[6] = {1, -1, 1, 1, -1, 1};
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, eq, 3, 2, 1, 0.7, keep)); /* floor(4.2) = 4 */
    uint8_t want_eq[6] = {0, 0, 0, 0, 1, 1};
    ck_assert_mem_eq(keep, want_eq, 6);
    /* projecting again changes nothing (removed kernels are the zero ones) */
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, eq, 3, 2, 1, 0.7, keep));
    ck_assert_mem_eq(keep, want_eq, 6);
    /* rate 0 keeps all */
    float z[4] = {1, 2, 3, 4};
    ck_assert_ok(ctx, pdc_prune_project_connectivity(ctx, z, 1, 4, 1, 0.0, keep));
    for (int i = 0; i < 4; i++) ck_assert_int_eq(keep[i], 1);
}
END_TEST

START_TEST(connectivity_on_dense_conv_and_removed_norms_are_smallest)
{
    pdc_model *m = conv_model();
    pdc_model *ref = clone(m);
    ck_assert_ok(ctx, transform(m, "prune-connectivity", NULL));
    const ir_tensor *w = weight_of(m, "b"), *w0 = weight_of(ref, "b");
    ck_assert_int_eq(w->sparsity.kind, IR_SPARSITY_PATTERN);
    ck_assert_uint_eq(w->sparsity.n_patterns, 1);
    ck_assert_uint_eq(w->sparsity.patterns[0], 0x1ff);
    size_t win = 9, removed = 0;
    double max_removed = -1, min_kept = INFINITY;
    for (size_t k = 0; k < w->sparsity.n_kernels; k++) {
        double nk = kernel_norm(w0->data + k * win, win);
        if (w->sparsity.kernel_pattern[k] < 0) {
            removed++;
            if (nk > max_removed) max_removed = nk;
        } else {
            if (nk < min_kept) min_kept = nk;
            ck_assert_mem_eq(w->data + k * win, w0->data + k * win, win * sizeof(float));
        }
    }
    ck_assert_uint_eq(removed, 24);
    ck_assert(max_removed <= min_kept);
    pdc_model_destroy(ref);
    pdc_model_destroy(m);
}
END_TEST

/* A model for block pruning: fc, matmul with a constant [K,N], gemm transB=1, 1x1 conv, lstm. */
static pdc_model *block_model(void)
{
    pdc_model *m = new_model("blocks");
    add_input(m, "x", 2, (int64_t[]){2, 18});
    add_random(m, "fw", 2, (int64_t[]){10, 18}, 21, -1, 1);
    add_random(m, "mb", 2, (int64_t[]){10, 7}, 22, -1, 1);   /* matmul [in 10, out 7] */
    add_random(m, "gb", 2, (int64_t[]){9, 7}, 23, -1, 1);    /* gemm transB=1 [out 9, in 7] */
    add_random(m, "cw", 4, (int64_t[]){6, 9, 1, 1}, 24, -1, 1);
    add_random(m, "lw", 3, (int64_t[]){1, 16, 6}, 25, -1, 1);
    add_random(m, "lr", 3, (int64_t[]){1, 16, 4}, 26, -1, 1);
    add_layer(m, "fc", "fc", "x,fw", "h1", NULL);
    add_layer(m, "mm", "matmul", "h1,mb", "h2", NULL);
    add_layer(m, "gemm", "gemm", "h2,gb", "h3", opt_i("transB", 1));
    add_layer(m, "r", "reshape", "h3", "h4", opt_ints("shape", 4, (int64_t[]){2, 9, 1, 1}));
    add_layer(m, "pw", "conv", "h4,cw", "h5", NULL);
    add_layer(m, "r2", "reshape", "h5", "h6", opt_ints("shape", 3, (int64_t[]){2, 1, 6}));
    add_layer(m, "lstm", "lstm", "h6,lw,lr", "y", opt_i("hidden_size", 4));
    add_output(m, "y");
    return m;
}

/* Whole blocks: every element of a removed block is zero; floor(rate x blocks) removed; the removed
 * blocks have the smallest norms of the [out, in] matrix `orig` (rows x cols). */
static void check_blocks(const float *now, const float *orig, int64_t rows, int64_t cols, int64_t bh, int64_t bw,
                         const uint8_t *keep, size_t want_removed)
{
    size_t nbc = (size_t)((cols + bw - 1) / bw), nb = (size_t)((rows + bh - 1) / bh) * nbc, removed = 0;
    double max_removed = -1, min_kept = INFINITY;
    for (size_t b = 0; b < nb; b++) {
        double s = 0;
        int64_t r0 = (int64_t)(b / nbc) * bh, c0 = (int64_t)(b % nbc) * bw;
        for (int64_t r = r0; r < r0 + bh && r < rows; r++)
            for (int64_t c = c0; c < c0 + bw && c < cols; c++) {
                s += (double)orig[r * cols + c] * orig[r * cols + c];
                ck_assert(now[r * cols + c] == (keep[b] ? orig[r * cols + c] : 0.0f));
            }
        if (!keep[b]) {
            removed++;
            if (s > max_removed) max_removed = s;
        } else if (s < min_kept) {
            min_kept = s;
        }
    }
    ck_assert_uint_eq(removed, want_removed);
    ck_assert(max_removed <= min_kept);
}

START_TEST(block_masks_are_whole_blocks)
{
    pdc_model *m = block_model(), *orig = clone(m);
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_string(o, "block", "1x4:0.8"));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "block_convs", 1)); /* the 1x1 conv too */
    ck_assert_ok(ctx, transform(m, "prune-block", o));
    /* fc [10, 18] in 1x4 blocks: 10 x 5 = 50 blocks, 40 removed */
    const ir_tensor *fw = tensor(m, "fw");
    ck_assert_int_eq(fw->sparsity.kind, IR_SPARSITY_BLOCK);
    ck_assert_int_eq(fw->sparsity.bh, 1);
    ck_assert_int_eq(fw->sparsity.bw, 4);
    check_blocks(fw->data, tensor(orig, "fw")->data, 10, 18, 1, 4, fw->sparsity.block_mask, 40);
    /* gemm transB=1 [9, 7]: 9 x 2 = 18 blocks, floor(14.4) = 14 removed */
    const ir_tensor *gb = tensor(m, "gb");
    check_blocks(gb->data, tensor(orig, "gb")->data, 9, 7, 1, 4, gb->sparsity.block_mask, 14);
    /* 1x1 conv [6, 9]: 6 x 3 = 18 blocks */
    const ir_tensor *cw = tensor(m, "cw");
    check_blocks(cw->data, tensor(orig, "cw")->data, 6, 9, 1, 4, cw->sparsity.block_mask, 14);
    /* lstm gates: w [16, 6] -> 16 x 2 blocks, r [16, 4] -> 16 x 1 */
    check_blocks(tensor(m, "lw")->data, tensor(orig, "lw")->data, 16, 6, 1, 4, tensor(m, "lw")->sparsity.block_mask, 25);
    check_blocks(tensor(m, "lr")->data, tensor(orig, "lr")->data, 16, 4, 1, 4, tensor(m, "lr")->sparsity.block_mask, 12);
    /* matmul b [10 in, 7 out]: chosen on the [7, 10] transpose in 1x4 blocks (7 x 3 = 21, 16 removed);
     * the IR describes the stored [10, 7] layout in 4x1 blocks */
    const ir_tensor *mb = tensor(m, "mb"), *mb0 = tensor(orig, "mb");
    ck_assert_int_eq(mb->sparsity.bh, 4);
    ck_assert_int_eq(mb->sparsity.bw, 1);
    float tn[70], to[70];
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 7; j++) tn[j * 10 + i] = mb->data[i * 7 + j], to[j * 10 + i] = mb0->data[i * 7 + j];
    uint8_t keep_t[21];
    for (int bj = 0; bj < 7; bj++)   /* [out,in] block (bj, bi) = stored block (bi, bj) */
        for (int bi = 0; bi < 3; bi++) keep_t[bj * 3 + bi] = mb->sparsity.block_mask[bi * 7 + bj];
    check_blocks(tn, to, 7, 10, 1, 4, keep_t, 16);
    /* the public projection on the transpose gives the same */
    uint8_t keep_p[21];
    ck_assert_ok(ctx, pdc_prune_project_block(ctx, to, 7, 10, 1, 4, 0.8, keep_p));
    ck_assert_mem_eq(keep_p, keep_t, 21);
    ck_assert_mem_eq(to, tn, sizeof tn);
    pdc_model_destroy(orig);
    pdc_model_destroy(m);

    /* ties: equal block norms -> the lower block index goes first */
    float a[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0.5f, 0, 0, 0, 0, -1};
    uint8_t keep[4];
    ck_assert_ok(ctx, pdc_prune_project_block(ctx, a, 2, 8, 1, 4, 0.5, keep));
    uint8_t want[4] = {0, 1, 0, 1};
    ck_assert_mem_eq(keep, want, 4);
    /* 2x2 blocks over a 3x3 matrix: partial edge blocks count */
    float b[9] = {1, 1, 9, 1, 1, 9, 9, 9, 9};
    ck_assert_ok(ctx, pdc_prune_project_block(ctx, b, 3, 3, 2, 2, 0.25, keep));
    uint8_t want_b[4] = {0, 1, 1, 1};
    ck_assert_mem_eq(keep, want_b, 4);
}
END_TEST

START_TEST(unstructured_removes_the_smallest)
{
    pdc_model *m = block_model(), *orig = clone(m);
    pdc_attrs *o = attrs_new();
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "unstructured_rate", 0.75f));
    ck_assert_ok(ctx, transform(m, "prune-unstructured", o));
    const char *names[] = {"fw", "mb", "gb", "cw", "lw", "lr"};
    for (size_t i = 0; i < 6; i++) {
        const ir_tensor *t = tensor(m, names[i]), *t0 = tensor(orig, names[i]);
        size_t n = ir_tensor_numel(t), removed = 0;
        ck_assert_int_eq(t->sparsity.kind, IR_SPARSITY_UNSTRUCTURED);
        float max_removed = -1, min_kept = INFINITY;
        for (size_t k = 0; k < n; k++) {
            if (!t->sparsity.mask[k]) {
                removed++;
                ck_assert(t->data[k] == 0.0f);
                max_removed = fmaxf(max_removed, fabsf(t0->data[k]));
            } else {
                min_kept = fminf(min_kept, fabsf(t0->data[k]));
            }
        }
        ck_assert_uint_eq(removed, (size_t)floor(0.75f * (double)n));
        ck_assert(max_removed <= min_kept);
    }
    pdc_model_destroy(orig);
    pdc_model_destroy(m);
    float w[5] = {-2, 1, -1, 3, 1};
    uint8_t keep[5];
    ck_assert_ok(ctx, pdc_prune_project_unstructured(ctx, w, 5, 0.5, keep)); /* floor(2.5) = 2: indices 1, 2 */
    uint8_t want[5] = {1, 0, 0, 1, 1};
    ck_assert_mem_eq(keep, want, 5);
}
END_TEST

START_TEST(projection_bad_input)
{
    float w[18] = {0}, keep_before[18];
    for (int i = 0; i < 18; i++) w[i] = (float)i;
    memcpy(keep_before, w, sizeof w);
    uint64_t pat[4] = {0};
    int32_t kp[2];
    uint8_t keep[8];
    ck_assert_int_eq(pdc_prune_project_pattern(NULL, w, 2, 1, 3, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_str_eq(pdc_context_last_error(NULL), "pdc_prune_project_pattern: ctx is NULL");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, NULL, 2, 1, 3, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pdc_prune_project_pattern: weights is NULL");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 0, 1, 3, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "out_channels is 0");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 1, 1, 2, 3, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "the 2x3 window has no centre");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 1, 1, 9, 9, 1, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "81 entries (at most 64)");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 0, 4, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "at least 1");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 1, 4, 0x8, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unknown flag bits 0x8");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 1, 4, PDC_PROJECT_KEEP_PRUNED, pat, NULL),
                     PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "needs kernel_pattern");
    uint64_t bad[1] = {0x200};
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 1, 0, PDC_PROJECT_GIVEN_PATTERNS, bad, kp),
                     PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pattern 0 (0x200) is empty or outside the 3x3 window");
    ck_assert_status(ctx, pdc_prune_project_pattern(ctx, w, 2, 1, 3, 3, 2, 1, 0, pat, kp), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "2 patterns requested, but only 1 patterns of 1 entries");
    ck_assert_status(ctx, pdc_prune_project_connectivity(ctx, w, 2, 1, 9, 1.0, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "pdc_prune_project_connectivity: connectivity rate 1 is outside [0, 1)");
    ck_assert_status(ctx, pdc_prune_project_connectivity(ctx, w, 2, 1, 9, NAN, keep), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_prune_project_connectivity(ctx, w, 2, -1, 9, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "in_channels is -1");
    ck_assert_status(ctx, pdc_prune_project_block(ctx, w, 2, 9, 0, 4, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "block rows is 0");
    ck_assert_status(ctx, pdc_prune_project_block(ctx, w, 2, 9, 1, 4, -0.1, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "block rate -0.1 is outside [0, 1)");
    ck_assert_status(ctx, pdc_prune_project_block(ctx, NULL, 2, 9, 1, 4, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_status(ctx, pdc_prune_project_unstructured(ctx, w, 0, 0.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "n must be at least 1");
    ck_assert_status(ctx, pdc_prune_project_unstructured(ctx, w, 18, 1.5, keep), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "unstructured rate 1.5 is outside [0, 1)");
    /* a failed call changed nothing */
    ck_assert_mem_eq(w, keep_before, sizeof w);
}
END_TEST

int main(void)
{
    return run_tests("prune", ctx_setup, ctx_teardown, 60,
                     TEST_LIST(prune_pattern_properties, pattern_projection_matches_brute_force, pattern_tie_breaks,
                               connectivity_rate_is_exact, connectivity_on_dense_conv_and_removed_norms_are_smallest,
                               block_masks_are_whole_blocks, unstructured_removes_the_smallest, projection_bad_input));
}
