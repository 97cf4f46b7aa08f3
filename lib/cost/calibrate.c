/*
 * calibrate.c - the micro-benchmarks `pdc calibrate` runs (cost.h): one-layer models of every
 * kernel family at the sizes real networks give them (ResNet/VGG/MobileNet convs, fc and LSTM
 * products, pooling and elementwise layers), compiled for the cpu target with 1 and N threads and
 * timed layer by layer (the median of several runs); then each family's constants are fitted.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "lib/cost/cost.h"

typedef struct cal_case {
    cost_family family;
    const char *op;  /* conv, fc, lstm (conv_bcr, fc_bcr, lstm_bcr: BCR-pruned), relu, add, maxpool,
                      * global_avgpool, softmax, flatten */
    int c, o, hw, k, stride, group;
    double rate;     /* conv: connectivity pruned (with 8x4 patterns), < 0: dense; fc: block 1x4 rate, < 0 dense;
                      * *_bcr: bcr_col_rate of 8x8 blocks */
} cal_case;

/* The cases, family by family: sizes spread over what ResNet-18/50, VGG-16 and MobileNetV2 at 224x224
 * and an LSTM give each family. */
static const cal_case cases[] = {
    {COST_CONV_SPARSE, "conv", 64, 64, 56, 3, 1, 1, 0.0},      {COST_CONV_SPARSE, "conv", 64, 64, 56, 3, 1, 1, 0.5},
    {COST_CONV_SPARSE, "conv", 128, 128, 28, 3, 1, 1, 0.0},    {COST_CONV_SPARSE, "conv", 128, 128, 28, 3, 1, 1, 0.75},
    {COST_CONV_SPARSE, "conv", 256, 256, 14, 3, 1, 1, 0.5},    {COST_CONV_SPARSE, "conv", 512, 512, 7, 3, 1, 1, 0.0},
    {COST_CONV_SPARSE, "conv", 512, 512, 7, 3, 1, 1, 0.75},    {COST_CONV_SPARSE, "conv", 64, 64, 112, 3, 1, 1, 0.5},
    {COST_CONV_SPARSE_S, "conv", 64, 128, 56, 3, 2, 1, 0.0},   {COST_CONV_SPARSE_S, "conv", 128, 256, 28, 3, 2, 1, 0.5},
    {COST_CONV_SPARSE_S, "conv", 256, 512, 14, 3, 2, 1, 0.0},  {COST_CONV_SPARSE_S, "conv", 256, 512, 14, 3, 2, 1, 0.75},
    {COST_CONV_WINO, "conv", 64, 64, 56, 3, 1, 1, -1},         {COST_CONV_WINO, "conv", 128, 128, 28, 3, 1, 1, -1},
    {COST_CONV_WINO, "conv", 256, 256, 14, 3, 1, 1, -1},       {COST_CONV_DENSE, "conv", 512, 512, 7, 3, 1, 1, -1},
    {COST_CONV_DENSE, "conv", 3, 64, 224, 7, 2, 1, -1},        {COST_CONV_DENSE, "conv", 128, 256, 28, 3, 2, 1, -1},
    {COST_CONV_WINO, "conv", 64, 64, 112, 3, 1, 1, -1},        {COST_CONV_WINO, "conv", 512, 512, 14, 3, 1, 1, -1},
    {COST_CONV_DENSE, "conv", 3, 64, 224, 3, 1, 1, -1},        {COST_CONV_DENSE, "conv", 256, 256, 7, 3, 1, 1, -1},
    {COST_CONV_WINO, "conv", 256, 256, 56, 3, 1, 1, -1},       {COST_CONV_WINO, "conv", 512, 512, 28, 3, 1, 1, -1},
    {COST_CONV_1X1, "conv", 64, 256, 56, 1, 1, 1, -1},         {COST_CONV_1X1, "conv", 256, 64, 56, 1, 1, 1, -1},
    {COST_CONV_1X1, "conv", 128, 512, 28, 1, 1, 1, -1},        {COST_CONV_1X1, "conv", 512, 128, 14, 1, 1, 1, -1},
    {COST_CONV_1X1, "conv", 64, 128, 56, 1, 2, 1, -1},         {COST_CONV_1X1, "conv", 320, 1280, 7, 1, 1, 1, -1},
    {COST_CONV_DW3, "conv", 32, 32, 112, 3, 1, 32, -1},        {COST_CONV_DW3, "conv", 96, 96, 112, 3, 2, 96, -1},
    {COST_CONV_DW3, "conv", 144, 144, 56, 3, 1, 144, -1},      {COST_CONV_DW3, "conv", 384, 384, 14, 3, 1, 384, -1},
    {COST_CONV_DW3, "conv", 960, 960, 7, 3, 1, 960, -1},
    {COST_FC_SPARSE, "fc", 4096, 4096, 1, 0, 0, 0, 0.5},       {COST_FC_SPARSE, "fc", 4096, 4096, 1, 0, 0, 0, 0.8},
    {COST_FC_SPARSE, "fc", 4096, 1000, 1, 0, 0, 0, 0.9},       {COST_FC_SPARSE, "fc", 1024, 1024, 1, 0, 0, 0, 0.5},
    {COST_FC_DENSE, "fc", 512, 1000, 1, 0, 0, 0, -1},          {COST_FC_DENSE, "fc", 4096, 4096, 1, 0, 0, 0, -1},
    {COST_FC_DENSE, "fc", 2048, 1000, 1, 0, 0, 0, -1},         {COST_FC_DENSE, "fc", 1280, 1000, 1, 0, 0, 0, -1},
    {COST_RNN, "lstm", 128, 256, 16, 0, 0, 0, -1},             {COST_RNN, "lstm", 256, 512, 16, 0, 0, 0, -1},
    {COST_RNN, "lstm", 64, 128, 32, 0, 0, 0, -1},              {COST_RNN, "lstm", 512, 512, 64, 0, 0, 0, -1},
    {COST_RNN_SPARSE, "lstm", 256, 512, 64, 0, 0, 0, 0.8},     {COST_RNN_SPARSE, "lstm", 512, 512, 32, 0, 0, 0, 0.5},
    {COST_RNN_SPARSE, "lstm", 128, 256, 16, 0, 0, 0, 0.8},     {COST_RNN, "lstm", 1536, 1536, 8, 0, 0, 0, -1},
    {COST_FC_DENSE, "fc", 12544, 4096, 1, 0, 0, 0, -1},        {COST_FC_SPARSE, "fc", 12544, 4096, 1, 0, 0, 0, 0.8},
    {COST_CONV_1X1, "conv", 16, 96, 112, 1, 1, 1, -1},         {COST_CONV_1X1, "conv", 144, 24, 56, 1, 1, 1, -1},
    {COST_CONV_1X1, "conv", 32, 16, 112, 1, 1, 1, -1},         {COST_CONV_DW3, "conv", 144, 144, 56, 3, 2, 144, -1},
    {COST_CONV_BLOCK, "conv", 16, 96, 112, 1, 1, 1, 0.5},      {COST_CONV_BLOCK, "conv", 144, 24, 56, 1, 1, 1, 0.5},
    {COST_CONV_BLOCK, "conv", 64, 256, 56, 1, 1, 1, 0.75},     {COST_CONV_BLOCK, "conv", 320, 1280, 7, 1, 1, 1, 0.5},
    {COST_CONV_BLOCK, "conv", 576, 96, 14, 1, 1, 1, 0.5},      {COST_CONV_BLOCK, "conv", 32, 192, 28, 1, 1, 1, 0.75},
    {COST_CONV_BLOCK, "conv", 96, 576, 14, 1, 1, 1, 0.5},      {COST_CONV_BLOCK, "conv", 160, 960, 7, 1, 1, 1, 0.5},
    {COST_CONV_BLOCK, "conv", 24, 144, 56, 1, 1, 1, 0.5},      {COST_CONV_BLOCK, "conv", 64, 384, 14, 1, 1, 1, 0.5},
    {COST_ELTWISE, "relu", 64, 64, 112, 0, 0, 0, -1},          {COST_ELTWISE, "add", 64, 64, 56, 0, 0, 0, -1},
    {COST_ELTWISE, "add", 256, 256, 14, 0, 0, 0, -1},          {COST_ELTWISE, "relu", 512, 512, 7, 0, 0, 0, -1},
    {COST_POOL, "maxpool", 64, 64, 112, 3, 2, 0, -1},          {COST_POOL, "maxpool", 128, 128, 56, 2, 2, 0, -1},
    {COST_POOL, "global_avgpool", 512, 512, 7, 0, 0, 0, -1},   {COST_POOL, "global_avgpool", 1280, 1280, 7, 0, 0, 0, -1},
    {COST_SOFTMAX, "softmax", 1000, 1000, 1, 0, 0, 0, -1},     {COST_SOFTMAX, "softmax", 10, 10, 1, 0, 0, 0, -1},
    {COST_SHAPE, "flatten", 512, 512, 7, 0, 0, 0, -1},         {COST_SHAPE, "flatten", 256, 256, 6, 0, 0, 0, -1},
    /* grouped convs the depthwise kernel does not take: ResNeXt's 32 groups, a 5x5 depthwise */
    {COST_CONV_DW, "conv", 128, 128, 28, 3, 1, 32, -1},        {COST_CONV_DW, "conv", 256, 256, 14, 3, 1, 32, -1},
    {COST_CONV_DW, "conv", 240, 240, 14, 5, 1, 240, -1},       {COST_CONV_DW, "conv", 672, 672, 7, 5, 1, 672, -1},
    /* BCR (8x8 blocks, half or three quarters of each block's columns removed) */
    {COST_FC_BCR, "fc_bcr", 4096, 4096, 1, 0, 0, 0, 0.5},      {COST_FC_BCR, "fc_bcr", 4096, 4096, 1, 0, 0, 0, 0.75},
    {COST_FC_BCR, "fc_bcr", 4096, 1000, 1, 0, 0, 0, 0.75},     {COST_FC_BCR, "fc_bcr", 1024, 1024, 1, 0, 0, 0, 0.5},
    {COST_FC_BCR, "fc_bcr", 512, 1000, 1, 0, 0, 0, 0.5},       {COST_FC_BCR, "fc_bcr", 12544, 4096, 1, 0, 0, 0, 0.75},
    {COST_CONV_BCR, "conv_bcr", 64, 256, 56, 1, 1, 1, 0.5},    {COST_CONV_BCR, "conv_bcr", 256, 64, 56, 1, 1, 1, 0.75},
    {COST_CONV_BCR, "conv_bcr", 128, 512, 28, 1, 1, 1, 0.5},   {COST_CONV_BCR, "conv_bcr", 320, 1280, 7, 1, 1, 1, 0.5},
    {COST_CONV_BCR, "conv_bcr", 144, 24, 56, 1, 1, 1, 0.5},    {COST_CONV_BCR, "conv_bcr", 576, 96, 14, 1, 1, 1, 0.75},
    {COST_RNN_BCR, "lstm_bcr", 256, 512, 64, 0, 0, 0, 0.75},   {COST_RNN_BCR, "lstm_bcr", 512, 512, 32, 0, 0, 0, 0.5},
    {COST_RNN_BCR, "lstm_bcr", 128, 256, 16, 0, 0, 0, 0.75},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static pdc_status add_random(pdc_model *m, const char *name, size_t rank, const int64_t *dims, double scale,
                             uint64_t *rng)
{
    size_t n = 1;
    for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
    float *w = pdc_alloc(m->ctx, n * sizeof *w);
    if (!w) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) w[i] = (float)(((double)(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) * 2 - 1) * scale);
    pdc_status st = pdc_model_add_constant(m, name, rank, dims, w);
    pdc_free(w);
    return st;
}

static int is_op(const cal_case *c, const char *op) { return !strcmp(c->op, op); }

/* The one-layer model of case c, pruned as it says. */
static pdc_status build_case(pdc_context *ctx, const cal_case *c, pdc_model **out)
{
    pdc_model *m = NULL;
    pdc_attrs *a = NULL, *opt = NULL;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    pdc_status st = pdc_model_create(ctx, "calibrate", &m);
    if (!st) st = pdc_attrs_create(ctx, &a);
    const char *y = "y";
    const char *pipeline = NULL;
    const int bcr = is_op(c, "conv_bcr") || is_op(c, "fc_bcr") || is_op(c, "lstm_bcr");
    if (st) goto done;
    if ((is_op(c, "conv") || is_op(c, "conv_bcr"))) {
        int64_t xd[4] = {1, c->c, c->hw, c->hw}, wd[4] = {c->o, c->c / c->group, c->k, c->k}, bd[1] = {c->o};
        int64_t p = c->k / 2;
        if (!(st = pdc_model_add_input(m, "x", 4, xd)) && !(st = add_random(m, "w", 4, wd, sqrt(6.0 / (c->c * c->k * c->k)), &rng)) &&
            !(st = add_random(m, "b", 1, bd, 0.05, &rng)) &&
            !(st = pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){p, p, p, p})) &&
            !(st = pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){c->stride, c->stride})) &&
            !(st = pdc_attrs_set_int(a, "group", c->group)) && !(st = pdc_attrs_set_string(a, "activation", "relu")))
            st = pdc_model_add_layer(m, "l", "conv", 3, (const char *const[]){"x", "w", "b"}, 1, &y, a);
        if (c->rate >= 0) pipeline = bcr ? "prune-bcr" : c->k == 1 ? "prune-block" : "prune-pattern,prune-connectivity";
    } else if ((is_op(c, "fc") || is_op(c, "fc_bcr"))) {
        int64_t xd[2] = {1, c->c}, wd[2] = {c->o, c->c}, bd[1] = {c->o};
        if (!(st = pdc_model_add_input(m, "x", 2, xd)) && !(st = add_random(m, "w", 2, wd, sqrt(3.0 / c->c), &rng)) &&
            !(st = add_random(m, "b", 1, bd, 0.05, &rng)))
            st = pdc_model_add_layer(m, "l", "fc", 3, (const char *const[]){"x", "w", "b"}, 1, &y, NULL);
        if (c->rate >= 0) pipeline = bcr ? "prune-bcr" : "prune-block";
    } else if ((is_op(c, "lstm") || is_op(c, "lstm_bcr"))) {
        if (c->rate >= 0) pipeline = bcr ? "prune-bcr" : "prune-block";
        int64_t xd[3] = {c->hw, 1, c->c}, wd[3] = {1, 4 * c->o, c->c}, rd[3] = {1, 4 * c->o, c->o};
        if (!(st = pdc_model_add_input(m, "x", 3, xd)) && !(st = add_random(m, "w", 3, wd, 0.1, &rng)) &&
            !(st = add_random(m, "r", 3, rd, 0.1, &rng)) && !(st = pdc_attrs_set_int(a, "hidden_size", c->o)))
            st = pdc_model_add_layer(m, "l", "lstm", 3, (const char *const[]){"x", "w", "r"}, 1, &y, a);
    } else {
        int64_t xd[4] = {1, c->c, c->hw, c->hw};
        size_t rank = !strcmp(c->op, "softmax") ? 2 : 4;
        if ((st = pdc_model_add_input(m, "x", rank, xd))) goto done;
        if (!strcmp(c->op, "add")) {
            if (!(st = pdc_model_add_input(m, "x2", rank, xd)))
                st = pdc_model_add_layer(m, "l", "add", 2, (const char *const[]){"x", "x2"}, 1, &y, NULL);
        } else if (!strcmp(c->op, "maxpool")) {
            int64_t p = c->k == 3 ? 1 : 0;
            if (!(st = pdc_attrs_set_ints(a, "kernel_shape", 2, (const int64_t[]){c->k, c->k})) &&
                !(st = pdc_attrs_set_ints(a, "strides", 2, (const int64_t[]){c->stride, c->stride})) &&
                !(st = pdc_attrs_set_ints(a, "pads", 4, (const int64_t[]){p, p, p, p})))
                st = pdc_model_add_layer(m, "l", "maxpool", 1, (const char *const[]){"x"}, 1, &y, a);
        } else {
            st = pdc_model_add_layer(m, "l", c->op, 1, (const char *const[]){"x"}, 1, &y, NULL);
        }
    }
    if (!st) st = pdc_model_mark_output(m, "y");
    if (!st && pipeline) {
        if (!(st = pdc_attrs_create(ctx, &opt)) && !(st = pdc_attrs_set_int(opt, "include_stem", 1))) {
            if (bcr) {
                if (!(st = pdc_attrs_set_float(opt, "bcr_col_rate", (float)c->rate)) && !strcmp(c->op, "conv_bcr"))
                    st = pdc_attrs_set_int(opt, "block_convs", 1);
            } else if (!strcmp(c->op, "conv") && c->k == 1) {
                if (!(st = pdc_attrs_set_int(opt, "block_convs", 1)) && !(st = pdc_attrs_set_string(opt, "block", "1x4")))
                    st = pdc_attrs_set_float(opt, "block_rate", (float)c->rate);
            } else if (!strcmp(c->op, "conv")) st = pdc_attrs_set_float(opt, "connectivity", (float)c->rate);
            else if (!(st = pdc_attrs_set_string(opt, "block", "1x4"))) st = pdc_attrs_set_float(opt, "block_rate", (float)c->rate);
        }
        if (!st) st = pdc_model_transform(m, pipeline, opt);
    }
done:
    pdc_attrs_destroy(a);
    pdc_attrs_destroy(opt);
    if (st) {
        pdc_model_destroy(m);
        return st;
    }
    *out = m;
    return PDC_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median time of layer 0 of m compiled with `threads` threads: at least 5 runs and ~budget_s. */
static pdc_status time_case(pdc_context *ctx, const pdc_model *m, int threads, double budget_s, float *flush,
                            size_t flush_n, double *ms)
{
    int saved = ctx->threads;
    ctx->threads = threads;
    pdc_program *prog = NULL;
    pdc_status st = pdc_compile(ctx, m, "cpu", &prog);
    ctx->threads = saved;
    if (st) return st;
    size_t n_in = prog->model->n_inputs;
    const ir_model *pm = prog->model;
    float *in[2] = {NULL, NULL}, *out = NULL;
    size_t in_n = n_in ? ir_tensor_numel(&pm->tensors[pm->inputs[0]]) : 0;
    double times[64];
    int runs = 0;
    for (size_t i = 0; i < n_in && i < 2; i++) {
        size_t n = ir_tensor_numel(&pm->tensors[pm->inputs[i]]);
        in[i] = pdc_alloc_aligned(ctx, n, sizeof(float));
        if (!in[i]) st = PDC_ERR_OUT_OF_MEMORY;
        for (size_t j = 0; in[i] && j < n; j++) in[i][j] = (float)((j * 7919 % 2003) / 1001.5 - 1.0);
    }
    if (!st) {
        out = pdc_alloc_aligned(ctx, ir_tensor_numel(&pm->tensors[pm->outputs[0]]), sizeof(float));
        if (!out) st = PDC_ERR_OUT_OF_MEMORY;
    }
    double *layer = st ? NULL : pdc_calloc(ctx, pm->n_layers, sizeof *layer);
    if (!st && !layer) st = PDC_ERR_OUT_OF_MEMORY;
    double t0 = omp_get_wtime();
    int short_team = 0;
    for (int w = 0; !st && w < 2; w++) st = pdc_cpu_run_timed(prog, (const float *const *)in, &out, NULL, layer);
    while (!st && runs < 64 && (runs < 5 || omp_get_wtime() - t0 < budget_s)) {
        short_team |= pdc_cpu_team_size(threads) < threads;
        if (flush) { /* as in a network: the input just written by the layer before, the rest out of cache */
            for (size_t k = 0; k < flush_n; k += 16) flush[k] += 1.0f;
            float sink = 0;
            for (size_t k = 0; k < in_n; k += 16) sink += in[0][k];
            flush[0] += sink * 0.0f;
        }
        st = pdc_cpu_run_timed(prog, (const float *const *)in, &out, NULL, layer);
        times[runs++] = layer[0];
    }
    /* a run that had fewer threads than asked (other processes kept cores busy) measures no scaling */
    if (!st && short_team) *ms = -1;
    if (!st && !short_team) {
        qsort(times, (size_t)runs, sizeof *times, cmp_double);
        *ms = runs % 2 ? times[runs / 2] : 0.5 * (times[runs / 2 - 1] + times[runs / 2]);
    }
    pdc_free(layer);
    pdc_free(out);
    pdc_free(in[0]);
    pdc_free(in[1]);
    pdc_program_destroy(prog);
    return st;
}

pdc_status cost_calibrate(pdc_context *ctx, int threads, double budget_s, cost_profile *p)
{
    cost_profile q;
    cost_profile_defaults(&q);
    pdc_status st = cost_host_key(ctx, q.key, sizeof q.key);
    if (st) return st;
    if (threads < 1) threads = 1;
    q.threads = threads;
    q.calibrated = 1;
    cost_sample *s = pdc_calloc(ctx, N_CASES, sizeof *s);
    size_t flush_n = (size_t)(2 * q.llc_bytes / sizeof(float));
    float *flush = s ? pdc_calloc(ctx, flush_n, sizeof *flush) : NULL;
    if (!s || !flush) {
        pdc_free(s);
        return PDC_ERR_OUT_OF_MEMORY;
    }
    /* time per measurement: the budget over the cases, halved for compiling */
    double per = budget_s / (double)(N_CASES * (threads > 1 ? 2 : 1)) * 0.5;
    size_t busy = 0;
    if (per < 0.02) per = 0.02;
    for (size_t i = 0; i < N_CASES && !st; i++) {
        pdc_progress(ctx, "calibrate", i, N_CASES);
        pdc_model *m = NULL;
        if ((st = build_case(ctx, &cases[i], &m))) break;
        cost_layer facts[1];
        memset(facts, 0, sizeof facts);
        st = cost_model_facts(m, facts);
        s[i].l = facts[0];
        s[i].l.fused = 0;
        /* memory-bound activation families (1x1, depthwise, block-sparse 1x1) run as in a network: the
         * cache flushed, then the input read again */
        const cost_family cf = cases[i].family;
        int cold = cf == COST_CONV_1X1 || cf == COST_CONV_DW || cf == COST_CONV_BLOCK || cf == COST_CONV_BCR || cf == COST_CONV_DW3;
        if (!st) st = time_case(ctx, m, 1, per, cold ? flush : NULL, flush_n, &s[i].t1_ms);
        if (!st && threads > 1) st = time_case(ctx, m, threads, per, cold ? flush : NULL, flush_n, &s[i].tn_ms);
        if (!st && s[i].tn_ms < 0) {
            s[i].tn_ms = 0; /* not counted in the thread scaling: the family keeps its default p */
            busy++;
        }
        /* without AVX-512 the 3x3 depthwise cases are grouped convs like the others, the Winograd ones direct */
        if (!st && s[i].l.family != cf && !(cf == COST_CONV_DW3 && s[i].l.family == COST_CONV_DW) &&
            !(cf == COST_CONV_WINO && s[i].l.family == COST_CONV_DENSE))
            st = pdc_error(ctx, PDC_ERR_INTERNAL, "calibrate: case %zu (%s) is in family %s, expected %s", i, cases[i].op,
                           cost_family_name(s[i].l.family), cost_family_name(cases[i].family));
        pdc_model_destroy(m);
        if (st) pdc_error_prefix(ctx, "calibrate: case %zu (%s)", i, cases[i].op);
    }
    pdc_progress(ctx, "calibrate", N_CASES, N_CASES);
    if (!st && busy)
        pdc_log(ctx, PDC_LOG_WARN,
                "calibrate: other processes kept cores busy during %zu of %zu %d-thread measurements: those do not "
                "count in the thread scaling (families without any keep the default); calibrate on a quiet machine",
                busy, N_CASES, threads);
    /* PDC_CALIBRATE_DUMP=1: every case's facts and times on stderr (a tuning aid) */
    const char *dump = getenv("PDC_CALIBRATE_DUMP");
    for (size_t i = 0; !st && dump && *dump == '1' && i < N_CASES; i++)
        fprintf(stderr, "pdc-calibrate %2zu %-20s %-14s c=%d o=%d hw=%d k=%d s=%d rate=%g  MFLOP=%.3f wKB=%.1f aKB=%.1f  t1=%.4f tN=%.4f ms\n",
                i, cost_family_name(s[i].l.family), cases[i].op, cases[i].c, cases[i].o, cases[i].hw, cases[i].k,
                cases[i].stride, cases[i].rate, s[i].l.flops * 1e-6, s[i].l.wbytes / 1024, s[i].l.abytes / 1024,
                s[i].t1_ms, s[i].tn_ms);
    if (!st) {
        for (int f = 0; f < COST_N_FAMILIES; f++) cost_fit_family(s, N_CASES, (cost_family)f, threads, q.llc_bytes, &q.f[f]);
        *p = q;
    }
    pdc_free(s);
    pdc_free(flush);
    return st;
}
