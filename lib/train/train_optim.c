/*
 * train_optim.c - optimizers (SGD with momentum and Nesterov, Adam, AdamW; the update rules and their
 * order of operations follow PyTorch 1.13's torch.optim, single-tensor path), learning-rate schedules,
 * the ADMM proximal term, and the trainer's random numbers.
 */
#include <math.h>
#include <string.h>

#include "lib/train/train.h"

double tr_lr_at(const tr_options *opt, uint64_t step)
{
    switch (opt->schedule) {
    case TR_SCHED_STEP: return opt->lr * pow(opt->lr_gamma, (double)(step / opt->lr_step));
    case TR_SCHED_COSINE: {
        const uint64_t t = step < opt->lr_total_steps ? step : opt->lr_total_steps;
        const double c = 0.5 * (1.0 + cos(3.14159265358979323846 * (double)t / (double)opt->lr_total_steps));
        return opt->lr_min + (opt->lr - opt->lr_min) * c;
    }
    default: return opt->lr;
    }
}

/* Elements per piece when a weight's elementwise passes are split over the threads: every element's arithmetic is
 * the same whichever thread runs it, so the split changes no result. */
#define OPT_PIECE 16384

static int pieces_threads(const tr_net *net, size_t n)
{
    return n >= 4 * OPT_PIECE ? net->threads : 1;
}

int tr_grads_finite(const tr_net *net, const char **bad_name)
{
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        const float *g = p->grad;
        const size_t n = p->n, np = (n + OPT_PIECE - 1) / OPT_PIECE;
        int bad = 0;
        const int nt = pieces_threads(net, n);
        /* NaN or Inf anywhere makes acc NaN, in whatever order it is summed (so in vector lanes and pieces: one
         * serial chain of adds cost ~15 ms per step on ResNet-18's 11M weights) */
#pragma omp parallel for num_threads(nt) schedule(static) reduction(| : bad) if (nt > 1)
        for (size_t q = 0; q < np; q++) {
            const size_t k1 = q + 1 < np ? (q + 1) * OPT_PIECE : n;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (size_t k = q * OPT_PIECE; k < k1; k++) acc += g[k] * 0.0f;
            bad |= acc != acc;
        }
        if (bad) {
            *bad_name = net->model->tensors[p->tensor].name;
            return 0;
        }
    }
    return 1;
}

typedef struct opt_consts {
    float lr, wd, b1, b2, eps, mom, step_size, bc2_sqrt, r;
} opt_consts;

/* The update of elements [0, n) of one parameter (pointers already offset to the piece). */
static void update_piece(const tr_net *net, const tr_options *opt, const opt_consts *c, size_t n, float *w, float *g,
                         float *m, float *v, const uint8_t *mk, const float *z, float *u)
{
    const float lr = c->lr, wd = c->wd, mom = c->mom, r = c->r;
    if (mk && !z && opt->optimizer == TR_OPT_SGD && wd == 0.0f && mom == 0.0f) {
        /* plain SGD on a pruned weight (masked retraining as the issue #38 benchmark runs it): the gradient's
         * masking, the update and the weight's masking below in one pass, the same values (three passes of selects
         * on the mask made the update of a pruned ResNet-18 twice that of the dense one) */
        /* the selects as AND with an all-ones/all-zero mask on the bit patterns (kept: the value; pruned: +0.0f, as
         * the selects give): with float selects around the multiply, GCC (trapping math) kept a branch per element,
         * mispredicted on a pattern mask, and the update took 2.6x as long as the three passes */
#pragma omp simd
        for (size_t k = 0; k < n; k++) {
            const uint32_t keep = (uint32_t)0 - (uint32_t)(mk[k] != 0);
            uint32_t gb, wb;
            float gk, wk;
            memcpy(&gb, g + k, sizeof gb);
            gb &= keep;
            memcpy(&gk, &gb, sizeof gk);
            wk = w[k] - lr * gk;
            memcpy(&wb, &wk, sizeof wb);
            wb &= keep;
            memcpy(g + k, &gb, sizeof gb);
            memcpy(w + k, &wb, sizeof wb);
        }
        return;
    }
    /* Pruned weights get a zero gradient (the dense kernels compute one); with a zero weight and zero state
     * every rule below then leaves them exactly zero. */
    if (mk) {
#pragma omp simd
        for (size_t k = 0; k < n; k++) {
            const float gk = g[k]; /* loaded unconditionally: a select, not a branch */
            g[k] = mk[k] ? gk : 0.0f;
        }
    }
    if (z) { /* ADMM W-step: the gradient of rho/2 ||W - Z + U||^2 */
#pragma omp simd
        for (size_t k = 0; k < n; k++) g[k] += r * (w[k] - z[k] + u[k]);
    }
    switch (opt->optimizer) {
    case TR_OPT_SGD:
        if (wd != 0.0f)
#pragma omp simd
            for (size_t k = 0; k < n; k++) g[k] += wd * w[k];
        if (mom != 0.0f) {
#pragma omp simd
            for (size_t k = 0; k < n; k++) m[k] = mom * m[k] + g[k];
            if (opt->nesterov)
#pragma omp simd
                for (size_t k = 0; k < n; k++) g[k] += mom * m[k];
            else
                memcpy(g, m, n * sizeof *g);
        }
#pragma omp simd
        for (size_t k = 0; k < n; k++) w[k] -= lr * g[k];
        break;
    case TR_OPT_ADAMW:
        if (wd != 0.0f) {
            const float keep = 1.0f - lr * wd;
#pragma omp simd
            for (size_t k = 0; k < n; k++) w[k] *= keep;
        }
        /* fall through */
    default: /* Adam */
        if (opt->optimizer == TR_OPT_ADAM && wd != 0.0f)
#pragma omp simd
            for (size_t k = 0; k < n; k++) g[k] += wd * w[k];
        net->isa->adam(n, w, g, m, v, c->b1, c->b2, c->step_size, c->bc2_sqrt, c->eps);
        break;
    }
    if (mk) {
        /* pruned weights and the state this update wrote back to exactly zero (what tr_net_apply_masks does for
         * every state, here only for the arrays this optimizer touched: each is a pass over the weights) */
        const int adam = opt->optimizer != TR_OPT_SGD;
        float *state[4] = {w, adam || mom != 0.0f ? m : NULL, adam ? v : NULL, u};
        for (int s = 0; s < 4; s++) {
            float *a = state[s];
            if (!a) continue;
#pragma omp simd
            for (size_t k = 0; k < n; k++) {
                const float x = a[k];
                a[k] = mk[k] ? x : 0.0f;
            }
        }
    }
}

void tr_optimizer_update(tr_net *net, const tr_options *opt, uint64_t step, double rho)
{
    const double t = (double)(step + 1);
    const double bc1 = 1.0 - pow(opt->beta1, t), bc2 = 1.0 - pow(opt->beta2, t);
    const float lr = (float)tr_lr_at(opt, step);
    const opt_consts c = {lr, (float)opt->weight_decay, (float)opt->beta1, (float)opt->beta2, (float)opt->eps,
                          (float)opt->momentum, (float)((double)lr / bc1), (float)sqrt(bc2), (float)rho};
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        float *w = net->model->tensors[p->tensor].data;
        const size_t n = p->n, np = (n + OPT_PIECE - 1) / OPT_PIECE;
        const int nt = pieces_threads(net, n);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
        for (size_t q = 0; q < np; q++) {
            const size_t k0 = q * OPT_PIECE, len = (q + 1 < np ? (q + 1) * OPT_PIECE : n) - k0;
            update_piece(net, opt, &c, len, w + k0, p->grad + k0, p->m ? p->m + k0 : NULL, p->v ? p->v + k0 : NULL,
                         p->mask ? p->mask + k0 : NULL, p->admm_z ? p->admm_z + k0 : NULL,
                         p->admm_z && p->admm_u ? p->admm_u + k0 : NULL);
        }
    }
}

/* ------------------------------------------------------------------ random numbers */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void tr_rng_seed(uint64_t s[4], uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t tr_rng_next(uint64_t s[4])
{
    const uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t tr_rng_below(uint64_t s[4], uint64_t bound)
{
    /* rejection: accept x below the largest multiple of bound */
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t x;
    do x = tr_rng_next(s);
    while (x >= limit);
    return x % bound;
}

float tr_rng_symmetric(uint64_t s[4])
{
    return (float)((double)(tr_rng_next(s) >> 40) * (2.0 / 16777216.0) - 1.0);
}
