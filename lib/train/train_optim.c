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

int tr_grads_finite(const tr_net *net, const char **bad_name)
{
    for (size_t i = 0; i < net->n_params; i++) {
        const tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        float acc = 0.0f;
        const float *g = p->grad;
        /* NaN or Inf anywhere makes acc NaN, in whatever order it is summed (so in vector lanes: one serial chain of
         * adds cost ~15 ms per step on ResNet-18's 11M weights) */
#pragma omp simd reduction(+ : acc)
        for (size_t k = 0; k < p->n; k++) acc += g[k] * 0.0f;
        if (acc != acc) {
            *bad_name = net->model->tensors[p->tensor].name;
            return 0;
        }
    }
    return 1;
}

void tr_optimizer_update(tr_net *net, const tr_options *opt, uint64_t step, double rho)
{
    const float lr = (float)tr_lr_at(opt, step), wd = (float)opt->weight_decay;
    const float b1 = (float)opt->beta1, b2 = (float)opt->beta2, eps = (float)opt->eps, mom = (float)opt->momentum;
    const double t = (double)(step + 1);
    const double bc1 = 1.0 - pow(opt->beta1, t), bc2 = 1.0 - pow(opt->beta2, t);
    const float step_size = (float)((double)lr / bc1), bc2_sqrt = (float)sqrt(bc2), r = (float)rho;
    for (size_t i = 0; i < net->n_params; i++) {
        tr_param *p = &net->params[i];
        if (!p->trainable) continue;
        float *w = net->model->tensors[p->tensor].data, *g = p->grad, *m = p->m, *v = p->v;
        const size_t n = p->n;
        /* Pruned weights get a zero gradient (the dense kernels compute one); with a zero weight and zero state
         * every rule below then leaves them exactly zero. */
        if (p->mask) {
            const uint8_t *mk = p->mask;
#pragma omp simd
            for (size_t k = 0; k < n; k++) {
                const float gk = g[k]; /* loaded unconditionally: a select, not a branch */
                g[k] = mk[k] ? gk : 0.0f;
            }
        }
        if (p->admm_z) { /* ADMM W-step: the gradient of rho/2 ||W - Z + U||^2 */
            const float *z = p->admm_z, *u = p->admm_u;
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
            net->isa->adam(n, w, g, m, v, b1, b2, step_size, bc2_sqrt, eps);
            break;
        }
        if (p->mask) {
            /* pruned weights and the state this update wrote back to exactly zero (what tr_net_apply_masks does for
             * every state, here only for the arrays this optimizer touched: each is a pass over the weights) */
            const int adam = opt->optimizer != TR_OPT_SGD;
            float *state[4] = {w, adam || mom != 0.0f ? m : NULL, adam ? v : NULL, p->admm_u};
            const uint8_t *mk = p->mask;
            for (int s = 0; s < 4; s++) {
                float *a = state[s];
                if (!a) continue;
#pragma omp simd
                for (size_t k = 0; k < n; k++) {
                    const float x = a[k]; /* loaded unconditionally: a select, not a branch */
                    a[k] = mk[k] ? x : 0.0f;
                }
            }
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
