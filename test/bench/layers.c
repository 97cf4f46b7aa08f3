/*
 * layers.c - the layer list, pruning, random stream and timing the layer benchmarks share (layers.h).
 */
#include "layers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const layer_case bench_layers[] = {
    {"vgg16.conv1_2", 64, 64, 224, 224, 1},     {"vgg16.conv2_1", 64, 128, 112, 112, 1},
    {"vgg16.conv2_2", 128, 128, 112, 112, 1},   {"vgg16.conv3_1", 128, 256, 56, 56, 1},
    {"vgg16.conv3_2+3_3", 256, 256, 56, 56, 1}, {"vgg16.conv4_1", 256, 512, 28, 28, 1},
    {"vgg16.conv4_2+4_3", 512, 512, 28, 28, 1}, {"vgg16.conv5_1+5_2", 512, 512, 14, 14, 1},
    {"resnet50.64@56", 64, 64, 56, 56, 1},      {"resnet50.128@28", 128, 128, 28, 28, 1},
    {"resnet50.256@14", 256, 256, 14, 14, 1},   {"resnet50.512@7", 512, 512, 7, 7, 1},
    {"resnet18.64>128/2", 64, 128, 56, 56, 2},  {"resnet18.128>256/2", 128, 256, 28, 28, 2},
    {"resnet18.256>512/2", 256, 512, 14, 14, 2},
};
const size_t bench_n_layers = sizeof bench_layers / sizeof bench_layers[0];

const uint64_t bench_patterns[8] = {0x1b, 0x36, 0xd8, 0x1b0, 0x3a, 0xb2, 0xb8, 0x9a};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
double bench_urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

int bench_out_h(const layer_case *L) { return (L->h - 1) / L->s + 1; } /* (h + 2 - 3) / s + 1 */
int bench_out_w(const layer_case *L) { return (L->w - 1) / L->s + 1; }

uint64_t bench_rng_save(void) { return rng; }
void bench_rng_restore(uint64_t state) { rng = state; }

void bench_shuffle(int *v, int n, uint64_t *state)
{
    for (int i = 0; i < n; i++) v[i] = i;
    for (int i = n - 1; i > 0; i--) {
        uint64_t x = *state;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        *state = x;
        int j = (int)(x % (uint64_t)(i + 1)), t = v[i];
        v[i] = v[j], v[j] = t;
    }
}

float *bench_random_floats(size_t n, float scale)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) v[i] = scale * (float)(2.0 * bench_urand() - 1.0);
    return v;
}

static void run_or_exit(const pdc_program *p, pdc_tensor *x, pdc_tensor *y)
{
    pdc_status st = pdc_program_run(p, 1, &x, 1, &y);
    if (st == PDC_OK) return;
    fprintf(stderr, "bench: program run failed: %s\n", pdc_status_string(st));
    exit(1);
}

double bench_time_program(const pdc_program *p, pdc_tensor *x, pdc_tensor *y, double min_time)
{
    enum { MAX = 4000 };
    static double t[MAX];
    int n = 0;
    double spent = 0;
    for (int w = 0; w < 3; w++) run_or_exit(p, x, y);
    while ((n < 11 || spent < min_time) && n < MAX) {
        const double t0 = bench_now();
        run_or_exit(p, x, y);
        t[n] = (bench_now() - t0) * 1e3;
        spent += t[n] / 1e3;
        n++;
    }
    return bench_median(t, n);
}

double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n)
{
    if (n < 1) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_pattern_weights(int o, int c, double prune, float *w, int32_t *kp)
{
    size_t nk = (size_t)o * (size_t)c;
    double bound = sqrt(6.0 / (9.0 * c));
    double *score = malloc(nk * sizeof *score), *sorted = malloc(nk * sizeof *sorted);
    if (!score || !sorted) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (size_t k = 0; k < nk; k++) {
        float *kw = w + 9 * k;
        for (int i = 0; i < 9; i++) kw[i] = (float)((2.0 * bench_urand() - 1.0) * bound);
        double best = -1;
        int bp = 0;
        for (int p = 0; p < 8; p++) {
            double e = 0;
            for (int i = 0; i < 9; i++)
                if (bench_patterns[p] >> i & 1) e += (double)kw[i] * kw[i];
            if (e > best) best = e, bp = p;
        }
        kp[k] = bp;
        score[k] = best;
        for (int i = 0; i < 9; i++)
            if (!(bench_patterns[bp] >> i & 1)) kw[i] = 0.0f;
    }
    /* threshold at the prune quantile of kernel energy */
    memcpy(sorted, score, nk * sizeof *sorted);
    qsort(sorted, nk, sizeof *sorted, cmpd);
    size_t drop = (size_t)(prune * (double)nk);
    double thr = drop ? sorted[drop - 1] : -1.0;
    size_t dropped = 0;
    for (size_t k = 0; k < nk && drop; k++)
        if (score[k] <= thr && dropped < drop) {
            kp[k] = -1;
            memset(w + 9 * k, 0, 9 * sizeof *w);
            dropped++;
        }
    free(sorted);
    free(score);
}
