/*
 * cost.c - the latency model's arithmetic, the layer facts, and the profile file (cost.h).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/backend.h"
#include "backends/cpu/conv3d_taps.h"
#include "ir/ops/epilogue.h"
#include "ir/ops/params.h"
#include "lib/core/crc32.h"
#include "lib/core/fileio.h"
#include "lib/cost/cost.h"

static const char *const family_names[COST_N_FAMILIES] = {
    "conv_sparse", "conv_sparse_strided", "conv_dense", "conv_1x1", "conv_grouped", "fc_sparse", "fc_dense",
    "rnn",         "eltwise",             "pool",       "softmax",  "shape",        "ref",
    "rnn_sparse",  "conv_block",          "fc_bcr",     "conv_bcr", "rnn_bcr",  "conv_dw3x3", "conv_wino"};

const char *cost_family_name(cost_family f) { return (unsigned)f < COST_N_FAMILIES ? family_names[f] : "?"; }

int cost_family_from_name(const char *name, cost_family *f)
{
    for (int i = 0; i < COST_N_FAMILIES; i++)
        if (!strcmp(name, family_names[i])) {
            *f = (cost_family)i;
            return 1;
        }
    return 0;
}

/* Defaults: `pdc calibrate` on the development machine (AMD EPYC, AVX-512, 32 MiB L3, LLVM 19), 1-thread
 * constants rounded; the parallel shares are estimates (that machine was too loaded to measure thread
 * scaling), the weight stream's from memory (0.4) from VGG-16's 411 MB fc, which two threads ran 1.26x
 * faster than one. They describe that machine; any other one should calibrate. */
void cost_profile_defaults(cost_profile *p)
{
    memset(p, 0, sizeof *p);
    p->threads = 2;
    p->llc_bytes = cost_host_llc_bytes();
    /*                                      c0 ms  ns/FLOP  ns/weight B  ns/act B  parallel  ns/weight B from memory, its parallel share */
    p->f[COST_CONV_SPARSE] = (cost_coef){0.0, 0.0117, 0.108, 0.0, 0.95, 0.0, 0.95};
    p->f[COST_CONV_SPARSE_S] = (cost_coef){0.014, 0.0108, 0.0435, 0.0, 0.95, 0.0, 0.95};
    p->f[COST_CONV_DENSE] = (cost_coef){0.036, 0.0100, 0.0, 0.072, 0.95, 0.0, 0.95};
    p->f[COST_CONV_1X1] = (cost_coef){0.0, 0.0120, 0.0, 0.059, 0.95, 0.0, 0.95};
    p->f[COST_CONV_DW] = (cost_coef){0.054, 0.0045, 0.0, 0.078, 0.90, 0.0, 0.90};
    p->f[COST_FC_SPARSE] = (cost_coef){0.0, 0.0, 0.052, 0.0, 0.90, 0.127, 0.40};
    p->f[COST_FC_DENSE] = (cost_coef){0.0046, 0.024, 0.0, 0.0, 0.90, 0.042, 0.40};
    p->f[COST_RNN] = (cost_coef){0.068, 0.0234, 0.0, 0.0, 0.80, 0.226, 0.40};
    p->f[COST_ELTWISE] = (cost_coef){0.0005, 0.0, 0.0, 0.011, 0.90, 0.0, 0.90};
    p->f[COST_POOL] = (cost_coef){0.013, 0.0, 0.0, 0.039, 0.90, 0.0, 0.90};
    p->f[COST_SOFTMAX] = (cost_coef){0.0009, 0.324, 0.0, 0.0, 0.50, 0.0, 0.50};
    p->f[COST_SHAPE] = (cost_coef){0.0009, 0.0, 0.0, 0.0086, 0.80, 0.0, 0.80};
    p->f[COST_REF] = (cost_coef){0.002, 1.0, 0.0, 0.2, 0.0, 0.0, 0.0};
    p->f[COST_RNN_SPARSE] = (cost_coef){0.015, 0.052, 0.0, 0.0, 0.50, 0.0, 0.50};
    p->f[COST_CONV_BLOCK] = (cost_coef){0.036, 0.028, 0.0, 0.011, 0.95, 0.0, 0.95};
    p->f[COST_FC_BCR] = (cost_coef){0.0, 0.0, 0.028, 0.0, 0.90, 0.132, 0.40};
    p->f[COST_CONV_BCR] = (cost_coef){0.026, 0.0178, 0.0, 0.0, 0.95, 0.0, 0.95};
    p->f[COST_RNN_BCR] = (cost_coef){0.0, 0.048, 0.0, 0.0, 0.50, 0.0, 0.50};
    p->f[COST_CONV_DW3] = (cost_coef){0.011, 0.035, 0.0, 0.008, 0.90, 0.0, 0.90};
    /* Winograd: ResNet-18's 64@56 in 1.3-1.4 ms for 231 M direct FLOPs (conv_wino.c) */
    p->f[COST_CONV_WINO] = (cost_coef){0.036, 0.0058, 0.0, 0.072, 0.95, 0.0, 0.95};
}

static int64_t numel_of(const ir_tensor *t) { return (int64_t)ir_tensor_numel(t); }

#define COST_MAX_DEPTH 64 /* 3-D kernels up to this deep get their work counted plane by plane */

/* A 3-D conv runs as 2-D convs, one per output depth plane (backends/cpu/conv3d.c), with the 2-D
 * family its per-plane weight [O, C/g*KD, KH, KW] gets: its sparsity (any kind) as per-kernel masks
 * that the pattern generator takes, except over a 1x1 plane window, which runs dense. */
static cost_family conv3d_family(const ir_tensor *w, const ir_window_params *p)
{
    if (w->kind != IR_TENSOR_CONST) return COST_REF;
    if (p->group > 1) return COST_CONV_DW;
    if (p->k[1] * p->k[2] == 1) return COST_CONV_1X1;
    if (w->sparsity.kind != IR_SPARSITY_NONE) return p->stride[1] > 1 || p->stride[2] > 1 ? COST_CONV_SPARSE_S : COST_CONV_SPARSE;
    return COST_CONV_DENSE;
}

/* The work of 3-D conv l as its per-plane 2-D kernels do it: each output depth plane runs the depth
 * taps cpu_conv3d_plane_taps gives (those inside the input where the planes are split by them, else
 * the whole window over zero planes), reads C*taps input planes and writes O planes, and costs a
 * call (c->runs); the image is transposed once before and each plane copied out after. In c->flops
 * ir_layer_stats' count (every output times every kept weight) gives way to that. */
static void conv3d_facts(const ir_model *m, const ir_layer *l, const ir_window_params *p, cost_layer *c)
{
    const ir_tensor *w = &m->tensors[l->inputs[1]];
    const int64_t cg = p->c / p->group, kd = p->k[0], win = p->k[1] * p->k[2], win3 = kd * win;
    if (kd > COST_MAX_DEPTH) return; /* no such network: ir_layer_stats' counts stand */
    double kept_at[COST_MAX_DEPTH] = {0}; /* kept weights of each depth slice */
    uint8_t keep[4096];
    const int masked = w->sparsity.kind != IR_SPARSITY_NONE && win > 1; /* a 1x1 plane window runs dense */
    if (masked && win3 > (int64_t)sizeof keep) { /* a huge window: the kept weights spread evenly */
        for (int64_t k = 0; k < kd; k++) kept_at[k] = (double)ir_sparsity_kept(w) / (double)kd;
    } else {
        for (int64_t q = 0; q < p->o * cg; q++) { /* kernel by kernel */
            if (masked) ir_sparsity_mask_range(w, &w->sparsity, (size_t)(q * win3), (size_t)win3, keep);
            for (int64_t k = 0; k < kd; k++)
                for (int64_t i = 0; i < win; i++) kept_at[k] += masked ? keep[k * win + i] : 1;
        }
    }
    const double oplane = (double)(p->out[1] * p->out[2]), plane = (double)(p->in[1] * p->in[2]);
    const int split = cpu_conv3d_split(p);
    double run_kept = 0, run_in = 0;
    for (int64_t od = 0; od < p->out[0]; od++) {
        int64_t k0, k1;
        cpu_conv3d_plane_taps(p, split, od, &k0, &k1);
        for (int64_t k = k0; k < k1; k++) run_kept += kept_at[k];
        run_in += (double)(p->c * (k1 - k0)) * plane;
    }
    const double n = (double)p->n, od_n = (double)p->out[0];
    c->flops += 2.0 * n * oplane * (run_kept - od_n * (double)ir_sparsity_kept(w)); /* the kernels' for the stats' */
    c->abytes = 4.0 * n * (run_in + 2.0 * od_n * (double)p->o * oplane + (double)(p->c * p->in[0]) * plane);
    c->runs = n * od_n;
}

/* Whether conv/conv_dw.c's direct kernel takes a grouped conv: dense, depthwise (groups = channels =
 * filters), 3x3, undilated, stride 1 or 2 alike, padding <= 2, on an AVX-512 host (as the cpu target
 * plans it; the profile is keyed by the ISA). */
static int dw3_direct(const ir_tensor *w, const ir_window_params *p)
{
#if defined(__x86_64__) || defined(__i386__)
    if (!__builtin_cpu_supports("avx512f")) return 0;
#else
    return 0;
#endif
    if (w->kind != IR_TENSOR_CONST || w->sparsity.kind != IR_SPARSITY_NONE || p->nsp != 2) return 0;
    if (p->group != p->c || p->o != p->c || p->k[0] != 3 || p->k[1] != 3 || p->dil[0] != 1 || p->dil[1] != 1) return 0;
    if (p->stride[0] != p->stride[1] || (p->stride[0] != 1 && p->stride[0] != 2)) return 0;
    return p->pad_begin[0] <= 2 && p->pad_begin[1] <= 2;
}

/* 1 if the cpu target computes conv p (weight w) by Winograd (conv/conv_wino.c's rules: dense, one group,
 * 3x3, stride and dilation 1, padding <= 2, filters a multiple of 8, output planes from 14x14 and 32 input
 * channels up unless PDC_CONV_WINO=1, never with PDC_CONV_WINO=0, on an AVX-512 host). */
static int wino_direct(const ir_tensor *w, const ir_window_params *p)
{
#if defined(__x86_64__)
    if (!__builtin_cpu_supports("avx512f")) return 0;
#else
    return 0;
#endif
    if (w->kind != IR_TENSOR_CONST || w->sparsity.kind != IR_SPARSITY_NONE || p->nsp != 2 || p->group != 1) return 0;
    if (p->k[0] != 3 || p->k[1] != 3 || p->stride[0] != 1 || p->stride[1] != 1 || p->dil[0] != 1 || p->dil[1] != 1)
        return 0;
    if (p->pad_begin[0] > 2 || p->pad_begin[1] > 2 || p->o % 8) return 0;
    const char *force = getenv("PDC_CONV_WINO");
    if (force && *force == '0') return 0;
    return (force && *force == '1') || (p->out[0] >= 14 && p->out[1] >= 14 && p->c >= 32);
}

cost_family cost_family_of(const ir_model *m, size_t li)
{
    const ir_layer *l = &m->layers[li];
    switch (l->op) {
    case IR_OP_CONV: {
        ir_window_params p;
        if (l->n_inputs < 2 || l->inputs[1] < 0 || ir_window_params_get(m, l, &p)) return COST_REF;
        const ir_tensor *w = &m->tensors[l->inputs[1]];
        if (p.nsp == 3) return conv3d_family(w, &p);
        if (w->kind == IR_TENSOR_CONST && w->sparsity.kind == IR_SPARSITY_BCR)
            return p.nsp == 2 && p.k[0] * p.k[1] == 1 && p.group == 1 && p.stride[0] == 1 && p.stride[1] == 1 &&
                           !p.pad_begin[0] && !p.pad_begin[1] && !p.pad_end[0] && !p.pad_end[1]
                       ? COST_CONV_BCR
                       : COST_CONV_BLOCK;
        if (p.group > 1) return dw3_direct(w, &p) ? COST_CONV_DW3 : COST_CONV_DW;
        int strided = 0;
        int64_t taps = 1;
        for (int i = 0; i < p.nsp; i++) {
            strided |= p.stride[i] > 1;
            taps *= p.k[i];
        }
        if (w->kind == IR_TENSOR_CONST && w->sparsity.kind == IR_SPARSITY_PATTERN)
            return strided ? COST_CONV_SPARSE_S : COST_CONV_SPARSE;
        if (w->kind == IR_TENSOR_CONST && w->sparsity.kind != IR_SPARSITY_NONE) return COST_CONV_BLOCK;
        return taps == 1 ? COST_CONV_1X1 : wino_direct(w, &p) ? COST_CONV_WINO : COST_CONV_DENSE;
    }
    case IR_OP_FC:
    case IR_OP_GEMM:
    case IR_OP_MATMUL: {
        if (l->n_inputs < 2 || l->inputs[1] < 0) return COST_FC_DENSE;
        const ir_tensor *w = &m->tensors[l->inputs[1]];
        if (w->kind == IR_TENSOR_CONST && w->sparsity.kind == IR_SPARSITY_BCR) return COST_FC_BCR;
        if (w->kind == IR_TENSOR_CONST && w->sparsity.kind != IR_SPARSITY_NONE && l->op != IR_OP_GEMM) {
            size_t n = ir_tensor_numel(w), kept = ir_sparsity_kept(w);
            if (n && 2 * kept <= n) return COST_FC_SPARSE;
        }
        return COST_FC_DENSE;
    }
    case IR_OP_LSTM:
    case IR_OP_GRU: {
        const ir_tensor *w = l->n_inputs > 1 && l->inputs[1] >= 0 ? &m->tensors[l->inputs[1]] : NULL;
        if (w && w->kind == IR_TENSOR_CONST && w->sparsity.kind == IR_SPARSITY_BCR) return COST_RNN_BCR;
        if (w && w->kind == IR_TENSOR_CONST && w->sparsity.kind != IR_SPARSITY_NONE) {
            size_t n = ir_tensor_numel(w), kept = ir_sparsity_kept(w);
            if (n && 2 * kept <= n) return COST_RNN_SPARSE;
        }
        return COST_RNN;
    }
    IR_CASE_ACTIVATION:
    case IR_OP_ADD:
    case IR_OP_SUB:
    case IR_OP_MUL:
    case IR_OP_DIV:
    case IR_OP_BATCHNORM: return COST_ELTWISE;
    case IR_OP_MAXPOOL:
    case IR_OP_AVGPOOL:
    case IR_OP_GLOBAL_AVGPOOL: return COST_POOL;
    case IR_OP_SOFTMAX: return COST_SOFTMAX;
    case IR_OP_CONCAT:
    case IR_OP_TRANSPOSE:
    case IR_OP_FLATTEN:
    case IR_OP_RESHAPE: return COST_SHAPE;
    default: return COST_REF;
    }
}

pdc_status cost_model_facts(const ir_model *m, cost_layer *out)
{
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        for (size_t i = 0; i < l->n_outputs; i++)
            if (l->outputs[i] >= 0 && m->tensors[l->outputs[i]].rank < 0)
                return pdc_error(m->ctx, PDC_ERR_SHAPE,
                                 "layer '%s': output shape unknown (fix the symbolic input dims first)", l->name);
    }
    double total_w = 0;
    for (size_t li = 0; li < m->n_layers; li++) {
        const ir_layer *l = &m->layers[li];
        cost_layer *c = &out[li];
        if (c->fused != 1) c->fused = 0;
        c->family = cost_family_of(m, li);
        ir_layer_stats st;
        ir_layer_stats_compute(m, li, &st);
        c->flops = (double)st.effective_flops;
        c->wbytes = (double)st.kept_weights * 4.0;
        double a = 0;
        for (size_t i = 0; i < l->n_inputs; i++)
            if (l->inputs[i] >= 0 && m->tensors[l->inputs[i]].kind != IR_TENSOR_CONST)
                a += (double)numel_of(&m->tensors[l->inputs[i]]);
        for (size_t i = 0; i < l->n_outputs; i++)
            if (l->outputs[i] >= 0) a += (double)numel_of(&m->tensors[l->outputs[i]]);
        c->abytes = a * 4.0;
        c->runs = 1;
        ir_window_params p;
        if (l->op == IR_OP_CONV && c->family != COST_REF && !ir_window_params_get(m, l, &p) && p.nsp == 3)
            conv3d_facts(m, l, &p, c);
        total_w += c->wbytes;
        /* the layers this one's epilogue computes (as the cpu target fuses them) */
        ir_epilogue e;
        if ((l->op == IR_OP_CONV || l->op == IR_OP_FC || l->op == IR_OP_MATMUL) && c->family != COST_REF &&
            ir_layer_epilogue(m, li, &e))
            for (int k = 1; k <= e.n_layers && li + (size_t)k < m->n_layers; k++) out[li + (size_t)k].fused = 1;
    }
    for (size_t li = 0; li < m->n_layers; li++) out[li].model_wbytes = total_w;
    return PDC_OK;
}

static int streams(cost_family f)
{
    return f == COST_FC_SPARSE || f == COST_FC_DENSE || f == COST_RNN || f == COST_RNN_SPARSE || f == COST_FC_BCR ||
           f == COST_RNN_BCR;
}

double cost_host_llc_bytes(void)
{
    double best = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(buf, sizeof buf, f)) {
            char *e = NULL;
            double v = strtod(buf, &e);
            if (e && (*e == 'K' || *e == 'k')) v *= 1024;
            else if (e && (*e == 'M' || *e == 'm')) v *= 1024 * 1024;
            if (v > best) best = v;
        }
        fclose(f);
    }
    return best > 0 ? best : 32.0 * 1024 * 1024;
}

int cost_layer_dram(const cost_profile *p, const cost_layer *l)
{
    double llc = p->llc_bytes > 0 ? p->llc_bytes : 32.0 * 1024 * 1024;
    /* a layer alone keeps weights that fit; in a model, the other layers' weights and the activations
     * share the cache: seen on MobileNetV2 (14 MB of weights, 32 MiB L3), whose 5 MB fc streams at
     * DRAM speed in the network and 60 GB/s alone */
    int others = l->model_wbytes > l->wbytes;
    /* an lstm / gru reads its gate matrices once per step: from the second step on they come from the
     * cache if they fit, whatever the rest of the model (seen: the benchmark's 512-unit LSTM, 8 MB of
     * 15, predicted 30% over with the model's weights deciding) */
    const int recurrent = l->family == COST_RNN || l->family == COST_RNN_SPARSE || l->family == COST_RNN_BCR;
    return streams(l->family) && (l->wbytes > llc || (!recurrent && others && l->model_wbytes > 0.25 * llc));
}

double cost_layer_ms(const cost_profile *p, const cost_layer *l, int threads)
{
    if (l->fused) return 0.0;
    const cost_coef *c = &p->f[l->family];
    const int dram = cost_layer_dram(p, l);
    double t1 = c->c0_ms * (l->runs > 1 ? l->runs : 1) +
                1e-6 * (c->flop_ns * l->flops + (dram ? 0 : c->wbyte_ns * l->wbytes) + c->abyte_ns * l->abytes);
    double td = dram ? 1e-6 * c->dram_ns * l->wbytes : 0; /* the stream from memory scales on its own */
    if (threads < 1) threads = 1;
    return t1 * ((1.0 - c->parallel) + c->parallel / (double)threads) +
           td * ((1.0 - c->dram_parallel) + c->dram_parallel / (double)threads);
}

/* ------------------------------------------------------------------ profiles */

pdc_status cost_host_key(pdc_context *ctx, char *key, size_t cap)
{
    key[0] = 0;
    pdc_status st = pdc_cpu_host_key(ctx, key, cap);
    if (st) return st;
    for (char *s = key; *s; s++)
        if (*s == '\n' || *s == '\r') *s = ' ';
    return PDC_OK;
}

void cost_profile_path(const pdc_context *ctx, const char *key, char *path, size_t cap)
{
    int n = snprintf(path, cap, "%s/profiles/latency-%08x.txt", ctx->cache_dir, pdc_crc32(0, key, strlen(key)));
    if (n < 0 || (size_t)n >= cap) path[0] = 0; /* cache_dir is at most PDC_PATH_MAX - 1 bytes: callers pass more */
}

pdc_status cost_profile_format(const pdc_context *ctx, const cost_profile *p, char **text_out, size_t *len_out)
{
    size_t cap = 4096;
    char *t = pdc_alloc(ctx, cap);
    if (!t) return PDC_ERR_OUT_OF_MEMORY;
    int n = snprintf(t, cap, "pdc-latency-profile %d\nkey %s\nthreads %d\ncache %.0f\n", COST_PROFILE_VERSION, p->key,
                     p->threads, p->llc_bytes);
    for (int f = 0; f < COST_N_FAMILIES; f++) {
        const cost_coef *c = &p->f[f];
        n += snprintf(t + n, cap - (size_t)n, "family %s %.9g %.9g %.9g %.9g %.6g %.9g %.6g\n", family_names[f], c->c0_ms,
                      c->flop_ns, c->wbyte_ns, c->abyte_ns, c->parallel, c->dram_ns, c->dram_parallel);
    }
    n += snprintf(t + n, cap - (size_t)n, "crc32 %08x\n", pdc_crc32(0, t, (size_t)n));
    *text_out = t;
    *len_out = (size_t)n;
    return PDC_OK;
}

static pdc_status corrupt(const pdc_context *ctx, int line, const char *what)
{
    return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: line %d: %s", line, what);
}

pdc_status cost_profile_parse(const pdc_context *ctx, const char *text, size_t len, const char *expected_key,
                              cost_profile *out)
{
    cost_profile p;
    cost_profile_defaults(&p);
    p.calibrated = 1;
    p.threads = 0;
    /* the CRC line is the last one and covers everything before it */
    const char *crc_at = NULL;
    for (size_t i = 0; i + 6 <= len; i++)
        if ((i == 0 || text[i - 1] == '\n') && !memcmp(text + i, "crc32 ", 6)) crc_at = text + i;
    if (len < 20 || memcmp(text, "pdc-latency-profile ", 20))
        return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: not a pdc latency profile (no 'pdc-latency-profile' line)");
    if (!crc_at) return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: no crc32 line (truncated?)");
    unsigned want = 0;
    char tail[32] = {0};
    size_t tail_len = len - (size_t)(crc_at - text);
    if (tail_len >= sizeof tail) return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: text after the crc32 line");
    memcpy(tail, crc_at, tail_len);
    char extra = 0;
    if (sscanf(tail, "crc32 %8x %c", &want, &extra) != 1)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: bad crc32 line");
    uint32_t got = pdc_crc32(0, text, (size_t)(crc_at - text));
    if (got != want)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: checksum mismatch (file says %08x, content has %08x)",
                         want, got);
    int version = 0, line = 0, seen[COST_N_FAMILIES] = {0}, have_key = 0, have_cache = 0;
    const char *s = text, *end = crc_at;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) nl = end;
        char buf[512];
        size_t n = (size_t)(nl - s);
        line++;
        if (n >= sizeof buf) return corrupt(ctx, line, "line too long");
        memcpy(buf, s, n);
        buf[n] = 0;
        s = nl + 1;
        if (line == 1) {
            if (sscanf(buf, "pdc-latency-profile %d", &version) != 1) return corrupt(ctx, line, "bad header");
            if (version != COST_PROFILE_VERSION)
                return pdc_error(ctx, PDC_ERR_UNSUPPORTED,
                                 "latency profile: format version %d, this pdc reads version %d (run pdc calibrate again)",
                                 version, COST_PROFILE_VERSION);
            continue;
        }
        if (!strncmp(buf, "key ", 4)) {
            if (n - 4 >= sizeof p.key) return corrupt(ctx, line, "key too long");
            memcpy(p.key, buf + 4, n - 4 + 1);
            have_key = 1;
        } else if (!strncmp(buf, "threads ", 8)) {
            char *e = NULL;
            long v = strtol(buf + 8, &e, 10);
            if (*e || v < 1 || v > 4096) return corrupt(ctx, line, "threads must be 1..4096");
            p.threads = (int)v;
        } else if (!strncmp(buf, "cache ", 6)) {
            char *e = NULL;
            double v = strtod(buf + 6, &e);
            if (*e || !(v >= 1024 && v <= 1e12)) return corrupt(ctx, line, "cache must be 1024..1e12 bytes");
            p.llc_bytes = v;
            have_cache = 1;
        } else if (!strncmp(buf, "family ", 7)) {
            char name[64];
            cost_coef c;
            int used = 0;
            if (sscanf(buf + 7, "%63s %lf %lf %lf %lf %lf %lf %lf%n", name, &c.c0_ms, &c.flop_ns, &c.wbyte_ns, &c.abyte_ns,
                       &c.parallel, &c.dram_ns, &c.dram_parallel, &used) != 8 || buf[7 + used])
                return corrupt(ctx, line, "a family line is 'family NAME C0_MS FLOP_NS WBYTE_NS ABYTE_NS PARALLEL "
                                          "DRAM_NS DRAM_PARALLEL'");
            cost_family f;
            if (!cost_family_from_name(name, &f)) return corrupt(ctx, line, "unknown kernel family");
            double v[5] = {c.c0_ms, c.flop_ns, c.wbyte_ns, c.abyte_ns, c.dram_ns};
            for (int i = 0; i < 5; i++)
                if (!isfinite(v[i]) || v[i] < 0 || v[i] > 1e6) return corrupt(ctx, line, "a constant is negative or not finite");
            if (!(c.parallel >= 0 && c.parallel <= 1) || !(c.dram_parallel >= 0 && c.dram_parallel <= 1))
                return corrupt(ctx, line, "parallel share outside [0, 1]");
            if (seen[f]++) return corrupt(ctx, line, "family given twice");
            p.f[f] = c;
        } else {
            return corrupt(ctx, line, "unknown line");
        }
    }
    if (!have_key || !p.threads || !have_cache)
        return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: no key, threads or cache line");
    for (int f = 0; f < COST_N_FAMILIES; f++)
        if (!seen[f])
            return pdc_error(ctx, PDC_ERR_CORRUPT, "latency profile: family %s missing", family_names[f]);
    if (expected_key && strcmp(expected_key, p.key))
        return pdc_error(ctx, PDC_ERR_UNSUPPORTED, "latency profile: made on another host ('%s'), this is '%s'", p.key,
                         expected_key);
    *out = p;
    return PDC_OK;
}

pdc_status cost_profile_load(const pdc_context *ctx, const char *path, const char *expected_key, cost_profile *p)
{
    void *data = NULL;
    size_t size = 0;
    pdc_status st = pdc_file_read(ctx, path, &data, &size);
    if (st) return st;
    st = cost_profile_parse(ctx, data, size, expected_key, p);
    pdc_free(data);
    if (st) pdc_error_prefix(ctx, "%s", path);
    return st;
}

static int mkdir_p(const char *dir)
{
    char tmp[PDC_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *s = tmp + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            *s = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

pdc_status cost_profile_save(const pdc_context *ctx, const cost_profile *p, const char *path)
{
    char dir[PDC_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        if (mkdir_p(dir))
            return pdc_error(ctx, PDC_ERR_IO, "%s: cannot create the folder: %s", dir, strerror(errno));
    }
    char *text = NULL;
    size_t len = 0;
    pdc_status st = cost_profile_format(ctx, p, &text, &len);
    if (st) return st;
    st = pdc_file_write_atomic(ctx, path, text, len);
    pdc_free(text);
    return st;
}

pdc_status cost_profile_for_host(pdc_context *ctx, const char *profile_path, cost_profile *p, char *why, size_t why_cap)
{
    cost_profile_defaults(p);
    why[0] = 0;
    char key[COST_KEY_MAX], path[PDC_PATH_MAX + 64];
    pdc_status st = cost_host_key(ctx, key, sizeof key);
    if (st == PDC_ERR_OUT_OF_MEMORY) return st;
    if (st) {
        snprintf(why, why_cap, "host unknown (%s): default constants", pdc_context_last_error(ctx));
        return PDC_OK;
    }
    if (profile_path) snprintf(path, sizeof path, "%s", profile_path);
    else cost_profile_path(ctx, key, path, sizeof path);
    if (!profile_path && access(path, F_OK)) {
        snprintf(why, why_cap, "no latency profile for this host (%s; pdc calibrate writes %s): default constants", key,
                 path);
        return PDC_OK;
    }
    cost_profile q;
    st = cost_profile_load(ctx, path, key, &q);
    if (st == PDC_OK) {
        *p = q;
        return PDC_OK;
    }
    if (st == PDC_ERR_OUT_OF_MEMORY) return st;
    snprintf(why, why_cap, "%s: profile refused, default constants", pdc_context_last_error(ctx));
    return PDC_OK;
}

/* ------------------------------------------------------------------ fitting */

/* Solves the k x k system a x = b (row-major, k <= 5) by Gaussian elimination with partial
 * pivoting; 0 if singular. */
static int solve(double a[5][5], double b[5], int k, double x[5])
{
    for (int c = 0; c < k; c++) {
        int piv = c;
        for (int r = c + 1; r < k; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
        if (fabs(a[piv][c]) < 1e-300) return 0;
        if (piv != c) {
            for (int j = 0; j < k; j++) {
                double t = a[c][j];
                a[c][j] = a[piv][j];
                a[piv][j] = t;
            }
            double t = b[c];
            b[c] = b[piv];
            b[piv] = t;
        }
        for (int r = c + 1; r < k; r++) {
            double f = a[r][c] / a[c][c];
            for (int j = c; j < k; j++) a[r][j] -= f * a[c][j];
            b[r] -= f * b[c];
        }
    }
    for (int r = k - 1; r >= 0; r--) {
        double s = b[r];
        for (int j = r + 1; j < k; j++) s -= a[r][j] * x[j];
        x[r] = s / a[r][r];
    }
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median over family f's samples that stream from memory (dram 1) or not (0) of
 * (1 - tN/t1) / (1 - 1/threads), clamped to [0, 1]; 0 if there is no such sample. */
static int median_share(const cost_sample *s, size_t n, cost_family f, int threads, const cost_profile *where,
                        int dram, double *out)
{
    double *p = malloc((n ? n : 1) * sizeof *p);
    size_t q = 0;
    for (size_t i = 0; p && i < n; i++) {
        if (s[i].l.family != f || s[i].t1_ms <= 0 || s[i].tn_ms <= 0 || cost_layer_dram(where, &s[i].l) != dram) continue;
        double v = (1.0 - s[i].tn_ms / s[i].t1_ms) / (1.0 - 1.0 / threads);
        p[q++] = v < 0 ? 0 : v > 1 ? 1 : v;
    }
    if (q) {
        qsort(p, q, sizeof *p, cmp_double);
        *out = q % 2 ? p[q / 2] : 0.5 * (p[q / 2 - 1] + p[q / 2]);
    }
    free(p);
    return q > 0;
}

void cost_fit_family(const cost_sample *s, size_t n, cost_family f, int threads, double llc_bytes, cost_coef *c)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) m += s[i].l.family == f && s[i].t1_ms > 0;
    if (!m) return;
    cost_profile where = {.llc_bytes = llc_bytes};
    /* features in ms per unit: 1, flops, weight bytes from cache, weight bytes from memory, activation
     * bytes (ns -> ms). Weight bytes count where a kernel streams its weights once per run (fc, rnn:
     * memory-bound at batch 1); a conv reuses each weight over the whole plane, activation bytes count
     * instead. Fewer terms than samples allow keeps the fit from trading one for another (seen: dense
     * convs of 9 MB weights predicted at twice their time). Pattern convs pay per kept kernel too (its
     * offsets and loop, whatever the plane): a weight-byte term instead of the activation bytes, without
     * which ResNet-18's 512-channel 7x7 pattern convs came out 20-30% under. */
    int st = streams(f), pattern = f == COST_CONV_SPARSE || f == COST_CONV_SPARSE_S;
    int active[5] = {1, 1, st || pattern, st, !st && !pattern};
    double x[5] = {0};
    for (int round = 0; round < 5; round++) {
        int idx[5], k = 0;
        for (int j = 0; j < 5; j++)
            if (active[j]) idx[k++] = j;
        if (!k) break;
        double A[5][5] = {{0}}, B[5] = {0}, sol[5] = {0};
        for (size_t i = 0; i < n; i++) {
            if (s[i].l.family != f || s[i].t1_ms <= 0) continue;
            int dram = cost_layer_dram(&where, &s[i].l);
            double feat[5] = {1.0, 1e-6 * s[i].l.flops, dram ? 0 : 1e-6 * s[i].l.wbytes, dram ? 1e-6 * s[i].l.wbytes : 0,
                              1e-6 * s[i].l.abytes};
            double w = 1.0 / (s[i].t1_ms * s[i].t1_ms); /* relative error */
            for (int a = 0; a < k; a++) {
                for (int b = 0; b < k; b++) A[a][b] += w * feat[idx[a]] * feat[idx[b]];
                B[a] += w * feat[idx[a]] * s[i].t1_ms;
            }
        }
        /* a feature that is zero in every sample cannot be fitted: drop it */
        int dropped = 0;
        for (int a = 0; a < k && !dropped; a++)
            if (A[a][a] <= 0) {
                active[idx[a]] = 0;
                dropped = 1;
            }
        if (dropped) continue;
        if ((size_t)k > m || !solve(A, B, k, sol)) {
            /* too few samples or collinear: drop the last active feature and retry */
            active[idx[k - 1]] = 0;
            continue;
        }
        int worst = -1;
        for (int a = 0; a < k; a++)
            if (sol[a] < 0 && (worst < 0 || sol[a] < sol[worst])) worst = a;
        if (worst >= 0) {
            active[idx[worst]] = 0;
            continue;
        }
        memset(x, 0, sizeof x);
        for (int a = 0; a < k; a++) x[idx[a]] = sol[a];
        break;
    }
    c->c0_ms = x[0];
    c->flop_ns = x[1];
    c->wbyte_ns = x[2];
    c->dram_ns = x[3];
    c->abyte_ns = x[4];
    if (st && c->dram_ns == 0 && !active[3]) c->dram_ns = c->wbyte_ns; /* no sample beyond the cache */
    if (threads > 1) {
        /* the samples in cache give p, those streaming from memory dram_parallel */
        double share[2];
        int have[2];
        for (int d = 0; d < 2; d++) have[d] = median_share(s, n, f, threads, &where, d, &share[d]);
        if (have[0] || have[1]) c->parallel = have[0] ? share[0] : share[1];
        if (have[1]) c->dram_parallel = share[1]; /* else the default: memory's, not the family's */
    }
}
