/*
 * test_prune_bcr.c - block column-row sparsity (IR_SPARSITY_BCR) and the prune-bcr pass: the structure and
 * the documented choice (column then row norms, ties to the lower index) on every layer kind it takes, the
 * text form and the .pdc round trip, programs on the ref and cpu targets computing what the dense weights
 * compute, recognition at ONNX import from exported zeros, and bad options.
 */
#include <math.h>

#include "ir/ir.h"
#include "lib/core/crc32.h"
#include "lib/core/fileio.h"

#include "test/common/builders.h"

/* The layers prune-bcr takes: fc, matmul with a constant [K, N], gemm transB = 1, 1x1 conv, lstm, gru. */
static pdc_model *bcr_model(void)
{
    pdc_model *m = new_model("bcr");
    add_input(m, "x", 2, (int64_t[]){2, 20});
    add_random(m, "fw", 2, (int64_t[]){12, 20}, 21, -1, 1);
    add_random(m, "mb", 2, (int64_t[]){12, 10}, 22, -1, 1); /* matmul [in 12, out 10] */
    add_random(m, "gb", 2, (int64_t[]){8, 10}, 23, -1, 1);  /* gemm transB=1 [out 8, in 10] */
    add_random(m, "cw", 4, (int64_t[]){8, 8, 1, 1}, 24, -1, 1);
    add_random(m, "lw", 3, (int64_t[]){1, 16, 8}, 25, -1, 1);
    add_random(m, "lr", 3, (int64_t[]){1, 16, 4}, 26, -1, 1);
    add_random(m, "gw", 3, (int64_t[]){2, 12, 4}, 27, -1, 1);
    add_random(m, "gr", 3, (int64_t[]){2, 12, 4}, 28, -1, 1);
    add_layer(m, "fc", "fc", "x,fw", "h1", NULL);
    add_layer(m, "mm", "matmul", "h1,mb", "h2", NULL);
    add_layer(m, "gemm", "gemm", "h2,gb", "h3", opt_i("transB", 1));
    add_layer(m, "r", "reshape", "h3", "h4", opt_ints("shape", 4, (int64_t[]){2, 8, 1, 1}));
    add_layer(m, "pw", "conv", "h4,cw", "h5", NULL);
    add_layer(m, "r2", "reshape", "h5", "h6", opt_ints("shape", 3, (int64_t[]){2, 1, 8}));
    add_layer(m, "lstm", "lstm", "h6,lw,lr", "y", opt_i("hidden_size", 4));
    add_layer(m, "r3", "reshape", "y", "y2", opt_ints("shape", 3, (int64_t[]){2, 1, 4}));
    pdc_attrs *a = opt_i("hidden_size", 4);
    ck_assert_ok(ctx, pdc_attrs_set_string(a, "direction", "bidirectional"));
    add_layer(m, "gru", "gru", "y2,gw,gr", "z", a);
    add_output(m, "z");
    return m;
}

static pdc_attrs *bcr_options(const char *block, float col, float row)
{
    pdc_attrs *o = opt_s("bcr_block", block);
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "bcr_col_rate", col));
    ck_assert_ok(ctx, pdc_attrs_set_float(o, "bcr_row_rate", row));
    ck_assert_ok(ctx, pdc_attrs_set_int(o, "block_convs", 1));
    return o;
}

/*
 * The [out, in] matrix `now` (rows x cols, pruned from `orig`) in bh x bw blocks: in every block exactly
 * w' - floor(col x w') columns and h' - floor(row x h') rows are kept, they are the documented choice on
 * orig (column norms, then row norms over the kept columns, ties to the lower index), everything else is 0
 * and kept entries unchanged; keeps(r, c) (the IR description) agrees.
 */
static void check_bcr(const float *now, const float *orig, int64_t rows, int64_t cols, int64_t bh, int64_t bw,
                      double col, double row, const ir_tensor *t, int transposed)
{
    for (int64_t r0 = 0; r0 < rows; r0 += bh)
        for (int64_t c0 = 0; c0 < cols; c0 += bw) {
            const int64_t h = rows - r0 < bh ? rows - r0 : bh, w = cols - c0 < bw ? cols - c0 : bw;
            int ck[64] = {0}, rk[64] = {0};
            double cn[64], rn[64];
            for (int64_t j = 0; j < w; j++) {
                cn[j] = 0;
                for (int64_t i = 0; i < h; i++) cn[j] += (double)orig[(r0 + i) * cols + c0 + j] * orig[(r0 + i) * cols + c0 + j];
            }
            const int64_t kc = w - (int64_t)floor(col * (double)w), kr = h - (int64_t)floor(row * (double)h);
            for (int64_t j = 0; j < w; j++) { /* rank: columns with a larger norm, or equal and a lower index */
                int64_t better = 0;
                for (int64_t q = 0; q < w; q++) better += cn[q] > cn[j] || (cn[q] == cn[j] && q < j);
                ck[j] = better < kc;
            }
            for (int64_t i = 0; i < h; i++) {
                rn[i] = 0;
                for (int64_t j = 0; j < w; j++)
                    if (ck[j]) rn[i] += (double)orig[(r0 + i) * cols + c0 + j] * orig[(r0 + i) * cols + c0 + j];
            }
            for (int64_t i = 0; i < h; i++) {
                int64_t better = 0;
                for (int64_t q = 0; q < h; q++) better += rn[q] > rn[i] || (rn[q] == rn[i] && q < i);
                rk[i] = better < kr;
            }
            for (int64_t i = 0; i < h; i++)
                for (int64_t j = 0; j < w; j++) {
                    const int64_t r = r0 + i, c = c0 + j;
                    const int kept = rk[i] && ck[j];
                    ck_assert_float_eq(now[r * cols + c], kept ? orig[r * cols + c] : 0.0f);
                    const size_t at = transposed ? (size_t)(c * rows + r) : (size_t)(r * cols + c);
                    ck_assert_int_eq(ir_sparsity_keeps(t, at), kept);
                }
        }
}

/* [out, in] view of a stored [in, out] matrix. */
static float *transposed_copy(const float *a, int64_t in, int64_t out)
{
    float *t = malloc((size_t)(in * out) * sizeof *t);
    for (int64_t i = 0; i < in; i++)
        for (int64_t o = 0; o < out; o++) t[o * in + i] = a[i * out + o];
    return t;
}

START_TEST(bcr_blocks_keep_whole_rows_and_columns)
{
    pdc_model *m = bcr_model(), *orig = clone(m);
    ck_assert_ok(ctx, transform(m, "prune-bcr", bcr_options("4x8", 0.5f, 0.25f)));
    static const char *const names[] = {"fw", "gb", "cw", "lw", "lr", "gw", "gr"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const ir_tensor *t = tensor(m, names[i]);
        ck_assert_int_eq(t->sparsity.kind, IR_SPARSITY_BCR);
        ck_assert_int_eq(t->sparsity.bh, 4);
        ck_assert_int_eq(t->sparsity.bw, 8);
        int64_t rows, cols;
        ir_weight_matrix_view(t, &rows, &cols);
        check_bcr(t->data, tensor(orig, names[i])->data, rows, cols, 4, 8, 0.5, 0.25, t, 0);
    }
    /* fc [12, 20] in 4x8 blocks: full blocks keep 3 rows x 4 columns, the 4-wide edge blocks 3 x 2 */
    ck_assert_uint_eq(ir_sparsity_kept(tensor(m, "fw")), 3 * (3 * 4 + 3 * 4 + 3 * 2));
    /* matmul [in 12, out 10]: chosen on the [10, 12] transpose; the IR describes the stored layout in 8x4 blocks */
    const ir_tensor *mb = tensor(m, "mb");
    ck_assert_int_eq(mb->sparsity.kind, IR_SPARSITY_BCR);
    ck_assert_int_eq(mb->sparsity.bh, 8);
    ck_assert_int_eq(mb->sparsity.bw, 4);
    float *now = transposed_copy(mb->data, 12, 10), *was = transposed_copy(tensor(orig, "mb")->data, 12, 10);
    check_bcr(now, was, 10, 12, 4, 8, 0.5, 0.25, mb, 1);
    free(now);
    free(was);
    /* ties: a block of equal weights keeps its first columns and rows */
    pdc_model *e = new_model("ties");
    add_input(e, "x", 2, (int64_t[]){1, 8});
    float ones[4 * 8];
    for (int i = 0; i < 32; i++) ones[i] = 1.0f;
    add_values(e, "w", 2, (int64_t[]){4, 8}, ones);
    add_layer(e, "fc", "fc", "x,w", "y", NULL);
    add_output(e, "y");
    ck_assert_ok(ctx, transform(e, "prune-bcr", bcr_options("4x8", 0.75f, 0.5f)));
    const ir_tensor *w = tensor(e, "w");
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 8; c++) ck_assert_float_eq(w->data[r * 8 + c], r < 2 && c < 2 ? 1.0f : 0.0f);
    pdc_model_destroy(e);
    pdc_model_destroy(orig);
    pdc_model_destroy(m);
}
END_TEST

/* Text and .pdc round trips keep the description; a .pdc with BCR is version 2, one without stays version 1. */
START_TEST(bcr_round_trips)
{
    pdc_model *m = bcr_model();
    ck_assert_ok(ctx, pdc_model_save(m, tmp_path("dense.pdc")));
    ck_assert_ok(ctx, transform(m, "prune-bcr", bcr_options("4x4", 0.5f, 0.5f)));
    char *text = model_text(m);
    ck_assert_ptr_nonnull(strstr(text, "sparsity bcr 4x4 mask=\""));
    pdc_model *back = parse_model(text);
    ck_assert_ok(ctx, pdc_model_save(m, tmp_path("bcr.pdc")));
    pdc_model *loaded;
    ck_assert_ok(ctx, pdc_model_load(ctx, tmp_path("bcr.pdc"), &loaded));
    size_t bcr = 0;
    for (size_t t = 0; t < m->n_tensors; t++) {
        const ir_tensor *a = &m->tensors[t];
        bcr += a->sparsity.kind == IR_SPARSITY_BCR;
        ck_assert_msg(ir_sparsity_equal(&a->sparsity, &tensor(back, a->name)->sparsity), "text: %s", a->name);
        ck_assert_msg(ir_sparsity_equal(&a->sparsity, &tensor(loaded, a->name)->sparsity), ".pdc: %s", a->name);
    }
    ck_assert_uint_eq(bcr, 8);
    size_t n;
    char *b = test_read_file(tmp_path("bcr.pdc"), &n);
    ck_assert_int_eq(b[8], 2);
    /* the same bytes claiming version 1, which has no kind 4 */
    pdc_model *v1;
    pdc_store_u32le((uint8_t *)b + 8, 1);
    pdc_store_u32le((uint8_t *)b + n - 4, pdc_crc32(0, b, n - 4));
    ck_assert_status(ctx, pdc_model_load_memory(ctx, b, n, &v1), PDC_ERR_CORRUPT);
    ck_assert_error_has(ctx, "unknown sparsity kind 4");
    free(b);
    b = test_read_file(tmp_path("dense.pdc"), &n);
    ck_assert_int_eq(b[8], 1);
    free(b);
    /* a description whose flags are not whole blocks, and one keeping a row past the edge */
    static const char bad[] = "pdcir 1\nmodel \"g\"\ninput x : f32[1,3]\nconst w : f32[2,3] = dense<elided>\n"
                              "  sparsity bcr 2x2 mask=\"11011\"\nlayer f = fc(x, w) -> (y)\noutput y\n";
    pdc_model *bm;
    ck_assert_status(ctx, pdc_model_parse(ctx, bad, strlen(bad), &bm), PDC_ERR_PARSE);
    ck_assert_error_has(ctx, "not whole blocks");
    static const char edge[] = "pdcir 1\nmodel \"g\"\ninput x : f32[1,3]\nconst w : f32[2,3] = dense<elided>\n"
                               "  sparsity bcr 2x2 mask=\"11111111\"\nlayer f = fc(x, w) -> (y)\noutput y\n";
    ck_assert_int_ne(pdc_model_parse(ctx, edge, strlen(edge), &bm), PDC_OK);
    ck_assert_error_has(ctx, "past the matrix edge");
    free(text);
    pdc_model_destroy(back);
    pdc_model_destroy(loaded);
    pdc_model_destroy(m);
}
END_TEST

/* The kernel line of layer `name` in p. */
static const char *kernel_of(const pdc_program *p, const char *name)
{
    size_t n;
    ck_assert_ok(ctx, pdc_program_num_layers(p, &n));
    for (size_t i = 0; i < n; i++) {
        const char *ln, *k;
        ck_assert_ok(ctx, pdc_program_layer_kernel(p, i, &ln, &k));
        if (!strcmp(ln, name)) return k;
    }
    ck_abort_msg("no layer %s", name);
    return NULL;
}

/* The pruned model computes what its weights do as dense ones, on ref and (where built) cpu, whose fc, matmul,
 * gemm, lstm and gru take the BCR products (bcr.c). */
START_TEST(bcr_models_run_like_their_dense_weights)
{
    pdc_model *m = bcr_model();
    ck_assert_ok(ctx, transform(m, "prune-bcr", bcr_options("4x4", 0.5f, 0.25f)));
    pdc_model *dense = clone(m);
    for (size_t t = 0; t < dense->n_tensors; t++) ir_sparsity_free(&dense->tensors[t].sparsity);
    size_t n1, n2;
    float *want = run_first_output(dense, "ref", 5, &n1);
    static const char *const targets[] = {"ref", "cpu"};
    for (int i = 0; i < 2; i++) {
        pdc_program *p;
        pdc_status st = pdc_compile(ctx, m, targets[i], &p);
        if (st == PDC_ERR_UNSUPPORTED || st == PDC_ERR_UNKNOWN_TARGET) continue; /* a build without cpu */
        ck_assert_ok(ctx, st);
        if (i == 1) {
            ck_assert_msg(strstr(kernel_of(p, "lstm"), "w bcr") && strstr(kernel_of(p, "lstm"), "r bcr"), "lstm: %s",
                          kernel_of(p, "lstm"));
            ck_assert_msg(strstr(kernel_of(p, "gru"), "w bcr") && strstr(kernel_of(p, "gru"), "r bcr"), "gru: %s",
                          kernel_of(p, "gru"));
            ck_assert_msg(strstr(kernel_of(p, "fc"), "bcr fc"), "fc: %s", kernel_of(p, "fc"));
            ck_assert_msg(strstr(kernel_of(p, "mm"), "bcr matmul"), "mm: %s", kernel_of(p, "mm"));
            ck_assert_msg(strstr(kernel_of(p, "gemm"), "bcr gemm"), "gemm: %s", kernel_of(p, "gemm"));
        }
        pdc_program_destroy(p);
        float *got = run_first_output(m, targets[i], 5, &n2);
        ck_assert_uint_eq(n1, n2);
        ck_assert_floats_near(got, want, n1, 1e-5f);
        free(got);
    }
    free(want);
    pdc_model_destroy(dense);
    pdc_model_destroy(m);
}
END_TEST

/* lstm and gru on the cpu target's BCR products against ref: every direction, gru's linear_before_reset both
 * ways, batch 1 and 3 (the input projection's 5 and 15 rows: whole sample tiles and the rest), 8x8 and 16x8
 * blocks, edge blocks (input 12 in 8-wide blocks), bias and initial states. */
START_TEST(bcr_rnn_kernels_match_ref)
{
    static const char *const dirs[] = {"forward", "reverse", "bidirectional"};
    for (int lstm = 0; lstm < 2; lstm++)
        for (int di = 0; di < 3; di++)
            for (int64_t batch = 1; batch <= 3; batch += 2) {
                const int64_t T = 5, I = 12, H = 16, D = di == 2 ? 2 : 1, G = lstm ? 4 : 3;
                pdc_model *m = new_model("rnn");
                add_input(m, "x", 3, (int64_t[]){T, batch, I});
                add_random(m, "w", 3, (int64_t[]){D, G * H, I}, 31, -0.5f, 0.5f);
                add_random(m, "r", 3, (int64_t[]){D, G * H, H}, 32, -0.5f, 0.5f);
                add_random(m, "b", 2, (int64_t[]){D, 2 * G * H}, 33, -0.5f, 0.5f);
                add_random(m, "h0", 3, (int64_t[]){D, batch, H}, 34, -0.5f, 0.5f);
                pdc_attrs *a = opt_i("hidden_size", H);
                ck_assert_ok(ctx, pdc_attrs_set_string(a, "direction", dirs[di]));
                if (!lstm) ck_assert_ok(ctx, pdc_attrs_set_int(a, "linear_before_reset", batch == 1));
                add_layer(m, "cell", lstm ? "lstm" : "gru", "x,w,r,b,-,h0", "y", a);
                add_output(m, "y");
                /* 8- and 16-row blocks (the kernel's vector forms), some rows pruned or none */
                ck_assert_ok(ctx, transform(m, "prune-bcr", batch == 1 ? bcr_options("8x8", 0.5f, 0.5f)
                                                                       : bcr_options("16x8", 0.75f, 0.0f)));
                size_t n1, n2;
                float *want = run_first_output(m, "ref", 7, &n1), *got = run_first_output(m, "cpu", 7, &n2);
                ck_assert_uint_eq(n1, n2);
                ck_assert_floats_near(got, want, n1, 2e-5f);
                pdc_program *p;
                ck_assert_ok(ctx, pdc_compile(ctx, m, "cpu", &p));
                ck_assert_msg(strstr(kernel_of(p, "cell"), "w bcr (") && strstr(kernel_of(p, "cell"), "r bcr"),
                              "%s", kernel_of(p, "cell"));
                pdc_program_destroy(p);
                free(want);
                free(got);
                pdc_model_destroy(m);
            }
}
END_TEST

/* Exported as plain ONNX zeros and imported again: recognised as BCR keeping the same weights (the same
 * description where the pass's blocks fit the matrix; lr [16, 4] in 8x8 blocks is 8x4 blocks to the importer). */
START_TEST(bcr_recognised_at_onnx_import)
{
    pdc_model *m = bcr_model();
    ck_assert_ok(ctx, transform(m, "prune-bcr", bcr_options("8x8", 0.5f, 0.25f)));
    ck_assert_ok(ctx, pdc_model_save_onnx(m, tmp_path("bcr.onnx")));
    pdc_model *back;
    ck_assert_ok(ctx, pdc_model_load_onnx(ctx, tmp_path("bcr.onnx"), &back));
    static const char *const names[] = {"fw", "lw", "lr"};
    for (size_t i = 0; i < 3; i++) {
        const ir_tensor *a = tensor(m, names[i]), *b = tensor(back, names[i]);
        ck_assert_msg(b->sparsity.kind == IR_SPARSITY_BCR, "%s imported as kind %d", names[i], (int)b->sparsity.kind);
        for (size_t k = 0; k < ir_tensor_numel(a); k++) ck_assert_int_eq(ir_sparsity_keeps(b, k), ir_sparsity_keeps(a, k));
        if (i < 2) ck_assert_msg(ir_sparsity_equal(&a->sparsity, &b->sparsity), "%s: another description", names[i]);
    }
    /* block-pruned weights stay block-sparse */
    pdc_model *k = bcr_model();
    ck_assert_ok(ctx, transform(k, "prune-block", opt_s("block", "1x4:0.5")));
    ck_assert_ok(ctx, pdc_model_save_onnx(k, tmp_path("block.onnx")));
    pdc_model *kb;
    ck_assert_ok(ctx, pdc_model_load_onnx(ctx, tmp_path("block.onnx"), &kb));
    ck_assert_int_eq(tensor(kb, "fw")->sparsity.kind, IR_SPARSITY_BLOCK);
    pdc_model_destroy(kb);
    pdc_model_destroy(k);
    pdc_model_destroy(back);
    pdc_model_destroy(m);
}
END_TEST

START_TEST(bcr_bad_options)
{
    pdc_model *m = bcr_model();
    ck_assert_status(ctx, transform(m, "prune-bcr", opt_s("bcr_block", "0x4")), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "option bcr_block: \"0x4\" is not a block shape ROWSxCOLS");
    ck_assert_status(ctx, transform(m, "prune-bcr", opt_s("bcr_block", "4x4:0.5")), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "bcr_block");
    ck_assert_status(ctx, transform(m, "prune-bcr", opt_f("bcr_col_rate", 1.0f)), PDC_ERR_INVALID_ARG);
    ck_assert_error_has(ctx, "bcr_col_rate");
    ck_assert_status(ctx, transform(m, "prune-bcr", opt_s("bcr_row_rate", "0.5,nosuch=0.2")), PDC_ERR_NOT_FOUND);
    ck_assert_error_has(ctx, "nosuch");
    ck_assert_int_eq(tensor(m, "fw")->sparsity.kind, IR_SPARSITY_NONE); /* nothing changed */
    pdc_model_destroy(m);
}
END_TEST

int main(void)
{
    return run_tests("prune_bcr", tmpdir_setup, tmpdir_teardown, 120,
                     TEST_LIST(bcr_blocks_keep_whole_rows_and_columns, bcr_round_trips,
                               bcr_models_run_like_their_dense_weights, bcr_rnn_kernels_match_ref, bcr_recognised_at_onnx_import, bcr_bad_options));
}
