/*
 * cpu_backend.c - the "cpu" target: per layer, a kernel from one of the families (JIT'd pattern-
 * sparse and dense convolution, BLAS or JIT'd block-sparse GEMM, vectorised elementwise and
 * pooling loops) or, where none applies, the reference kernel; the reason is kept for inspection.
 *
 * Memory: activations live in one arena laid out at compile time (the plan pass's arena_offsets
 * when the model carries them, else one slot per activation) followed by the largest scratch any
 * layer needs, and a block of private scratch per thread (packed inputs, accumulators), each an
 * allocation of its own. A run borrows a cached workspace (one slot, taken and returned with
 * atomic exchanges) or allocates its own, so concurrent runs never share memory and the common
 * single-caller case does not allocate after the first run.
 *
 * Why the threads' private scratch is not a slice of the arena: as adjacent slices, the
 * channel-major kernel's accumulators (conv_cmajor.c) ran its layers at 0.9-1.4x of one thread at
 * two, in stretches of minutes on the project's VM, whatever the offset between them (64 bytes to
 * 1 MiB tried); in the same stretch, as separate allocations (thread-local, malloc'd by one thread
 * or by each, 2 MiB-aligned) they ran at 1.5-1.9x. The cause was not found (no hardware counters
 * in the VM); the packed inputs scaled a little better as well.
 *
 * Graph outputs are written straight into the caller's buffers where that is safe: every layer has
 * a JIT kernel (these cannot fail once a run has started, so a failed run still leaves the
 * caller's outputs unchanged) and the buffer overlaps no input and no other output. Otherwise the
 * output is computed in the arena and copied at the end (a 6.4 MB conv output copied after the
 * layer took 0.1-0.3 ms of a 2.3 ms 2-thread run, and a copy does not get faster with threads).
 */
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu.h"
#include "backends/ref/ref.h"
#include "ir/arena.h"

#define CPU_ALIGN_FLOATS 16

typedef struct cpu_state {
    size_t n_layers;
    cpu_layer *layers;
    size_t n_tensors;
    size_t *numel;          /* per tensor */
    size_t *offset;         /* per tensor: float offset in the arena, CPU_NO_SLOT if not an activation */
    size_t *input_slot;     /* per tensor: index into model->inputs, CPU_NO_SLOT if none */
    size_t arena_floats;    /* activations */
    size_t scratch_floats;  /* largest per-layer scratch */
    size_t thread_floats;   /* largest per-layer private scratch of a thread */
    int threads;
    int infallible;         /* every layer has a kernel that cannot fail at run time (no ref fallback) */
    size_t *chain;          /* scheduled models (schedule pass): per layer its chain's lane in its step,
                             * and the step's number of chains in chains[]; NULL when not scheduled */
    size_t *chains;
    pdc_layer_cost *cost;   /* scheduled models: per layer its predicted time (lanes.c weighs a step's chains) */
    int side_by_side;       /* some step has 2 or more chains: the scratch is there once per thread */
    _Atomic(struct cpu_work *) spare; /* one cached workspace, NULL when lent out or not yet made */
} cpu_state;

/* A run's memory: the arena (activations, then the shared scratch) and each thread's own block. */
typedef struct cpu_work {
    float *arena;
    cpu_share *shares; /* per thread, cpu_exec.shares */
    int n_own;
    float *own[]; /* per thread: thread_floats, NULL if 0 */
} cpu_work;

static void work_free(cpu_work *w)
{
    if (!w) return;
    pdc_free(w->arena);
    pdc_free(w->shares);
    for (int t = 0; t < w->n_own; t++) pdc_free(w->own[t]);
    pdc_free(w);
}

static cpu_work *work_new(pdc_context *ctx, const cpu_state *s)
{
    size_t total = s->arena_floats + s->scratch_floats * (s->side_by_side ? (size_t)s->threads : 1);
    int blocks = s->thread_floats ? s->threads : 0; /* the pointers are there either way */
    cpu_work *w = pdc_calloc(ctx, 1, sizeof *w + (size_t)s->threads * sizeof w->own[0]);
    if (!w) return NULL;
    w->arena = pdc_alloc_aligned(ctx, total ? total : 1, sizeof(float));
    w->shares = pdc_alloc_aligned(ctx, (size_t)s->threads, sizeof *w->shares);
    for (; w->arena && w->shares && w->n_own < blocks; w->n_own++)
        if (!(w->own[w->n_own] = pdc_alloc_aligned(ctx, s->thread_floats, sizeof(float)))) break;
    if (!w->arena || !w->shares || w->n_own < blocks) {
        work_free(w);
        return NULL;
    }
    return w;
}

static const cpu_plan_fn planners[] = {cpu_plan_conv,     cpu_plan_conv3d, cpu_plan_gemm,  cpu_plan_eltwise,
                                       cpu_plan_pool,     cpu_plan_rnn,    cpu_plan_softmax, cpu_plan_shape};
#define N_PLANNERS (sizeof planners / sizeof planners[0])

static void cpu_destroy(pdc_program *prog)
{
    cpu_state *s = prog->state;
    if (!s) return;
    for (size_t i = 0; i < s->n_layers; i++)
        if (s->layers[i].free_state) s->layers[i].free_state(s->layers[i].state);
    pdc_free(s->layers);
    pdc_free(s->numel);
    pdc_free(s->offset);
    pdc_free(s->input_slot);
    pdc_free(s->chain);
    pdc_free(s->chains);
    pdc_free(s->cost);
    work_free(atomic_load(&s->spare));
    pdc_free(s);
    prog->state = NULL;
}

/* Activation memory: one slot per activation, or the model's plan (its end rounded up to a slot, where
 * the scratch memory starts). */
static pdc_status plan_memory(const pdc_program *prog, cpu_state *s)
{
    int planned;
    pdc_status st = ir_arena_layout(prog->ctx, prog->model, "cpu", CPU_ALIGN_FLOATS, s->numel, s->offset,
                                    s->input_slot, &s->arena_floats, &planned);
    if (!st && planned) s->arena_floats = (s->arena_floats + CPU_ALIGN_FLOATS - 1) / CPU_ALIGN_FLOATS * CPU_ALIGN_FLOATS;
    return st;
}

/* A layer a conv's, fc's or matmul's epilogue computes (cpu_fuse.c). */
static pdc_status run_fused(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                            const cpu_exec *x)
{
    (void)L, (void)m, (void)l, (void)buf, (void)x;
    return PDC_OK;
}

/* The first layer after layer a's step. */
static size_t step_end(const ir_model *m, size_t a)
{
    int64_t step = ir_attr_int(&m->layers[a].attrs, IR_STEP_ATTR, 0);
    size_t b = a + 1;
    while (b < m->n_layers && ir_attr_int(&m->layers[b].attrs, IR_STEP_ATTR, 0) == step) b++;
    return b;
}

/* Without the latency model (lib/cost), a layer's time is taken from its FLOPs: 10 GFLOP/s a core and
 * nine tenths of it dividing over threads (roughly what the model's defaults give a dense conv). */
#define FLOP_MS 1e-7
#define FLOP_PARALLEL 0.9

static pdc_layer_cost flops_cost(const ir_model *m, size_t li)
{
    ir_layer_stats st;
    ir_layer_stats_compute(m, li, &st);
    const ir_layer *l = &m->layers[li];
    double out = 0;
    for (size_t i = 0; i < l->n_outputs; i++)
        if (l->outputs[i] >= 0) out += (double)ir_tensor_numel(&m->tensors[l->outputs[i]]);
    double t1 = FLOP_MS * ((double)st.effective_flops + 4.0 * out); /* 4: a memory-bound layer's share */
    return (pdc_layer_cost){t1 * (1.0 - FLOP_PARALLEL), t1 * FLOP_PARALLEL};
}

/* Lanes for a scheduled model (ir/arena.h): each step's chains numbered in order of their first layer,
 * each layer's predicted time (the program's, from the latency model, else from its FLOPs; 0 for a
 * layer run in another's epilogue). Only where every layer has a JIT kernel: those cannot fail, so a
 * lane never has an error to report. */
static pdc_status plan_lanes(const pdc_program *prog, cpu_state *s)
{
    const ir_model *m = prog->model;
    size_t n = m->n_layers;
    s->chain = pdc_calloc(m->ctx, n, sizeof *s->chain);
    s->chains = pdc_calloc(m->ctx, n, sizeof *s->chains);
    s->cost = pdc_calloc(m->ctx, n, sizeof *s->cost);
    if (!s->chain || !s->chains || !s->cost) return PDC_ERR_OUT_OF_MEMORY;
    for (size_t li = 0; li < n; li++)
        if (s->layers[li].run != run_fused) s->cost[li] = prog->cost ? prog->cost[li] : flops_cost(m, li);
    pdc_status st = ir_schedule_chains(m, s->chain); /* chain[li]: the chain's first layer */
    for (size_t a = 0, b; a < n && !st; a = b) {
        b = step_end(m, a);
        size_t k = 0;
        for (size_t li = a; li < b; li++) {
            if (s->chain[li] == li) s->chains[li] = k++; /* a chain's first layer numbers its lane */
            s->chain[li] = s->chains[s->chain[li]];
        }
        for (size_t li = a; li < b; li++) {
            s->chains[li] = k;
            size_t len = strlen(s->layers[li].info);
            if (k > 1)
                snprintf(s->layers[li].info + len, sizeof s->layers[li].info - len,
                         "; chain %zu of %zu in its step (side by side where predicted faster)", s->chain[li] + 1, k);
        }
        if (k > 1) s->side_by_side = 1;
    }
    return st;
}

/* How the step of layers [a, b) with k chains runs on x's threads (lanes.c): the number of lanes (0:
 * layer after layer), lane_of[c] and lane_threads[j] as cpu_lanes_plan gives them. */
static int plan_step(const cpu_state *s, size_t a, size_t b, size_t k, const uint8_t *live, const cpu_exec *x,
                     int force, size_t *lane_of, int *lane_threads, double *predicted)
{
    if (k > CPU_LANES_MAX || x->threads < 2) return 0;
    pdc_layer_cost chains[CPU_LANES_MAX] = {{0, 0}};
    for (size_t li = a; li < b; li++)
        if (!live || live[li]) {
            chains[s->chain[li]].serial_ms += s->cost[li].serial_ms;
            chains[s->chain[li]].parallel_ms += s->cost[li].parallel_ms;
        }
    /* a lane of several threads is a nested parallel region: with OpenMP's max-active-levels at 1 (its
     * default) it would get one thread, so lanes are planned with one thread each then */
    int most = omp_get_max_active_levels() >= 2 ? x->threads : 1;
    return cpu_lanes_plan(chains, k, x->threads, most, force, lane_of, lane_threads, predicted);
}

/* What layer L runs on: x, less the threads beyond its tuned count (the first ones: their private
 * blocks and share slots). */
static cpu_exec layer_exec(const cpu_layer *L, const cpu_exec *x)
{
    cpu_exec lx = *x;
    if (L->threads > 0 && L->threads < lx.threads) lx.threads = L->threads;
    return lx;
}

/* Layers [a, b) of one step side by side in nl lanes (the CPU_LANE_WHOLE chains already run): lane j
 * runs the chains c with lane_of[c] == j, in list order, on lane_threads[j] threads with its own
 * scratch, and its own slice of the threads' private blocks and share slots. */
static void run_lanes(const ir_model *m, const cpu_state *s, size_t a, size_t b, int nl, const size_t *lane_of,
                      const int *lane_threads, float *const *buf, const uint8_t *live, const cpu_exec *x)
{
    int first[CPU_LANES_MAX + 1];
    first[0] = 0;
    for (int j = 0; j < nl; j++) first[j + 1] = first[j] + lane_threads[j];
#pragma omp parallel num_threads(nl)
    for (int j = omp_get_thread_num(); j < nl; j += omp_get_num_threads()) { /* a smaller team takes every lane */
        const cpu_exec lane = {lane_threads[j], x->scratch + (size_t)j * s->scratch_floats, x->own + first[j],
                               x->shares + first[j]};
        for (size_t li = a; li < b; li++)
            if (lane_of[s->chain[li]] == (size_t)j && (!live || live[li])) {
                const cpu_exec lx = layer_exec(&s->layers[li], &lane);
                (void)s->layers[li].run(&s->layers[li], m, &m->layers[li], buf, &lx);
            }
    }
}

static pdc_status cpu_compile_prog(pdc_program *prog)
{
    const ir_model *m = prog->model;
    pdc_context *ctx = prog->ctx;
    prog->state = NULL;
    cpu_state *s = pdc_calloc(ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    prog->state = s;
    size_t nt = m->n_tensors ? m->n_tensors : 1, nl = m->n_layers ? m->n_layers : 1;
    s->n_tensors = m->n_tensors;
    s->numel = pdc_calloc(ctx, nt, sizeof *s->numel);
    s->offset = pdc_calloc(ctx, nt, sizeof *s->offset);
    s->input_slot = pdc_calloc(ctx, nt, sizeof *s->input_slot);
    s->layers = pdc_calloc(ctx, nl, sizeof *s->layers);
    pdc_status st = PDC_OK;
    if (!s->numel || !s->offset || !s->input_slot || !s->layers) st = PDC_ERR_OUT_OF_MEMORY;
    if (!st) st = plan_memory(prog, s);

    cpu_compile cc = {ctx, NULL, NULL, cpu_threads_for(ctx->threads), NULL, NULL, NULL, NULL};
    s->threads = cc.threads;
    if (!st) st = pdc_jit_get(ctx, &cc.jit);
    if (!st) cc.target = pdc_jit_target(cc.jit);

    /* PDC_CPU_FUSE=0: no epilogue fusion (a tuning aid) */
    const char *fe = getenv("PDC_CPU_FUSE");
    int fuse = !(fe && *fe == '0');
    long *fused_into = st ? NULL : pdc_alloc(ctx, nl * sizeof *fused_into); /* layer whose epilogue runs this one */
    if (!st && !fused_into) st = PDC_ERR_OUT_OF_MEMORY;
    for (size_t li = 0; li < m->n_layers && !st; li++) fused_into[li] = -1;
    for (size_t li = 0; li < m->n_layers && !st; li++) {
        const ir_layer *l = &m->layers[li];
        cpu_layer *L = &s->layers[li];
        s->n_layers = li + 1;
        if (li) pdc_progress(ctx, "compile", li, m->n_layers); /* pdc_compile reports 0 and the end */
        if (fused_into[li] >= 0) {
            L->run = run_fused;
            snprintf(L->info, sizeof L->info, "fused into the epilogue of %s", m->layers[fused_into[li]].name);
            continue;
        }
        ir_epilogue epi;
        cc.fuse = fuse && cpu_fuse_epilogue(m, li, s->offset, s->numel, &epi) ? &epi : NULL;
        float *fold_w = NULL, *fold_b = NULL;
        if (cc.fuse && epi.bn >= 0) {
            st = cpu_fuse_fold_batchnorm(ctx, m, li, &epi, &fold_w, &fold_b);
            if (st == PDC_ERR_UNSUPPORTED) { /* a folded value overflows a float: run unfused */
                cc.fuse = NULL;
                st = PDC_OK;
            }
            if (st) {
                pdc_error_prefix(ctx, "cpu: layer '%s' (%s)", l->name, ir_op_get_info(l->op)->name);
                break;
            }
        }
        cc.fold_w = fold_w;
        cc.fold_b = fold_b;
        cc.knobs = prog->knobs ? &prog->knobs[li] : NULL;
        /* a tuned thread count: the layer is planned (bands, work items) for the threads it runs on */
        const int team = cc.threads, own = cc.knobs && cc.knobs->threads > 0 && cc.knobs->threads < team;
        if (own) cc.threads = cc.knobs->threads;
        char why[160] = "";
        pdc_status ps = PDC_ERR_UNSUPPORTED;
        for (size_t k = 0; k < N_PLANNERS && ps == PDC_ERR_UNSUPPORTED; k++) {
            char reason[160] = "";
            ps = planners[k](&cc, m, l, L, reason, sizeof reason);
            if (ps == PDC_ERR_UNSUPPORTED && reason[0] && !why[0]) snprintf(why, sizeof why, "%s", reason);
        }
        cc.fuse = NULL;
        cc.fold_w = cc.fold_b = NULL;
        cc.threads = team;
        pdc_free(fold_w);
        pdc_free(fold_b);
        if (ps == PDC_OK && L->fused) {
            /* " + add 's' + relu 'y' in the epilogue" */
            for (int k = 1; k <= L->epi.n_layers; k++) {
                const ir_layer *f = &m->layers[li + k];
                fused_into[li + k] = (long)li;
                size_t n = strlen(L->info);
                snprintf(L->info + n, sizeof L->info - n, " + %s '%s'", ir_op_get_info(f->op)->name, f->name);
            }
            size_t n = strlen(L->info);
            snprintf(L->info + n, sizeof L->info - n, " in the epilogue");
        }
        if (ps == PDC_OK && own) {
            L->threads = cc.knobs->threads;
            size_t n = strlen(L->info);
            snprintf(L->info + n, sizeof L->info - n, "; on %d of %d threads (tuned)", L->threads, team);
        }
        if (ps == PDC_ERR_UNSUPPORTED) {
            memset(L, 0, sizeof *L);
            snprintf(L->info, sizeof L->info, "ref fallback: %s", why[0] ? why : "no cpu kernel for this op");
        } else if (ps) {
            pdc_error_prefix(ctx, "cpu: layer '%s' (%s)", l->name, ir_op_get_info(l->op)->name);
            st = ps;
        } else {
            if (L->scratch_floats > s->scratch_floats)
                s->scratch_floats = (L->scratch_floats + CPU_ALIGN_FLOATS - 1) / CPU_ALIGN_FLOATS * CPU_ALIGN_FLOATS;
            if (L->thread_floats > s->thread_floats) s->thread_floats = L->thread_floats;
        }
    }
    pdc_free(fused_into);
    s->infallible = 1;
    for (size_t li = 0; li < s->n_layers; li++)
        if (!s->layers[li].run) s->infallible = 0;
    /* option schedule "sequential": a scheduled model's layers one after the other, as listed */
    if (!st && s->infallible && s->threads > 1 && !ctx->sequential && ir_model_scheduled(m)) st = plan_lanes(prog, s);
    if (st) cpu_destroy(prog);
    return st;
}

static int spans_overlap(const float *a, size_t na, const float *b, size_t nb)
{
    return (uintptr_t)a < (uintptr_t)(b + nb) && (uintptr_t)b < (uintptr_t)(a + na);
}

/* Whether graph output i may be written by its producer straight into the caller's buffer: it is
 * wanted (not NULL), produced by a layer (not a graph input or constant), is the first output naming
 * that tensor, and its buffer overlaps no input (a layer would overwrite data later layers read) and
 * no other output. */
static int output_writable_in_place(const ir_model *m, const cpu_state *s, const float *const *inputs,
                                    float *const *outputs, size_t i)
{
    int t = m->outputs[i];
    if (!outputs[i] || s->offset[t] == CPU_NO_SLOT || s->input_slot[t] != CPU_NO_SLOT) return 0;
    size_t n = s->numel[t];
    for (size_t j = 0; j < m->n_inputs; j++)
        if (inputs[j] && spans_overlap(outputs[i], n, inputs[j], s->numel[m->inputs[j]])) return 0;
    for (size_t j = 0; j < m->n_outputs; j++)
        if (j != i && outputs[j] &&
            (m->outputs[j] == t ? j < i : spans_overlap(outputs[i], n, outputs[j], s->numel[m->outputs[j]])))
            return 0;
    return 1;
}

static double thread_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One run of the layers in live (NULL: all); with layer_ms (one slot per layer) each layer's wall time
 * in ms is written there (a layer fused into another's epilogue gets its own do-nothing time, close to
 * 0; one that does not run 0). */
static pdc_status cpu_run_timed(const pdc_program *prog, const float *const *inputs, float *const *outputs,
                                const uint8_t *live, double *layer_ms)
{
    const ir_model *m = prog->model;
    cpu_state *s = prog->state;
    pdc_context *ctx = prog->ctx;
    if (!s) return pdc_error(ctx, PDC_ERR_INVALID_STATE, "cpu: program was not compiled");

    cpu_work *work = atomic_exchange(&s->spare, NULL);
    if (!work) work = work_new(ctx, s);
    float **buf = work ? pdc_calloc(ctx, s->n_tensors ? s->n_tensors : 1, sizeof *buf) : NULL;
    if (!buf) {
        work_free(work);
        pdc_error_prefix(ctx, "cpu: activation memory (%zu bytes, and %d x %zu bytes of thread scratch)",
                         (s->arena_floats + s->scratch_floats) * sizeof(float), s->thread_floats ? s->threads : 0,
                         s->thread_floats * sizeof(float));
        return PDC_ERR_OUT_OF_MEMORY;
    }
    float *arena = work->arena;
    for (size_t t = 0; t < s->n_tensors; t++) {
        const ir_tensor *tt = &m->tensors[t];
        if (tt->kind == IR_TENSOR_CONST) buf[t] = tt->data;
        else if (tt->kind == IR_TENSOR_INPUT && s->input_slot[t] != CPU_NO_SLOT)
            buf[t] = (float *)(uintptr_t)inputs[s->input_slot[t]]; /* kernels never write inputs */
        else if (s->offset[t] != CPU_NO_SLOT) buf[t] = arena + s->offset[t];
        else buf[t] = NULL;
    }
    const int check = ctx->check_finite;
    if (s->infallible && !check) /* with check_finite a run may fail late: outputs stay untouched */
        for (size_t i = 0; i < m->n_outputs; i++)
            if (output_writable_in_place(m, s, inputs, outputs, i)) buf[m->outputs[i]] = outputs[i];
    cpu_exec x = {cpu_team_size(s->threads), arena + s->arena_floats, work->own, work->shares};
    pdc_status st = PDC_OK;
    /* PDC_CPU_PROFILE=1: per-layer wall time of each run on stderr (a tuning aid) */
    const char *prof = getenv("PDC_CPU_PROFILE");
    /* PDC_CPU_LANES=0: a scheduled step never side by side, 1: always where it has 2+ chains (aids to
     * measure the prediction against, and for tests) */
    const char *le = s->chain ? getenv("PDC_CPU_LANES") : NULL;
    const char lanes_env = le ? *le : 0;
    int profile = prof && *prof == '1';
    /* PDC_LAYER_CLOCK=thread-cpu: layer_ms in CPU time of the calling thread, not wall time (a
     * measuring aid on a machine other processes load: a 1-thread run then reads about what it would
     * take on an idle machine; a multi-thread run's other threads are not counted) */
    const char *lc = layer_ms ? getenv("PDC_LAYER_CLOCK") : NULL;
    int cpu_clock = lc && !strcmp(lc, "thread-cpu");
    size_t planned_to = 0; /* layers before it belong to steps already planned */
    for (size_t li = 0; li < m->n_layers && st == PDC_OK; li++) {
        const ir_layer *l = &m->layers[li];
        const cpu_layer *L = &s->layers[li];
        if (live && !live[li]) {
            if (layer_ms) layer_ms[li] = 0;
            continue;
        }
        double t0 = profile || layer_ms ? omp_get_wtime() : 0.0, c0 = cpu_clock ? thread_cpu_s() : 0.0;
        /* a step's chains side by side where predicted faster, unless each layer is checked
         * (check_finite) or timed (layer_ms) on its own */
        if (s->chain && !check && !layer_ms && li >= planned_to && s->chains[li] > 1) {
            size_t b = step_end(m, li), lane_of[CPU_LANES_MAX];
            int lane_threads[CPU_LANES_MAX];
            double predicted[2] = {0, 0};
            int nl = lanes_env == '0' ? 0 : plan_step(s, li, b, s->chains[li], live, &x, lanes_env == '1', lane_of,
                                                      lane_threads, predicted);
            planned_to = b; /* 0 lanes: this step's layers run one after the other below */
            if (profile && !nl)
                fprintf(stderr, "pdc-profile step of %zu chains layer after layer (predicted %.3f ms, %.3f side by side)\n",
                        s->chains[li], predicted[0], predicted[1]);
            if (nl > 0) {
                for (size_t k = li; k < b; k++) /* the chains run on every thread first, layer after layer */
                    if (lane_of[s->chain[k]] == CPU_LANE_WHOLE && (!live || live[k])) {
                        const cpu_exec lx = layer_exec(&s->layers[k], &x);
                        (void)s->layers[k].run(&s->layers[k], m, &m->layers[k], buf, &lx);
                    }
                run_lanes(m, s, li, b, nl, lane_of, lane_threads, buf, live, &x);
                if (profile) {
                    char split[96] = "";
                    for (int j = 0, n = 0; j < nl && n >= 0 && (size_t)n < sizeof split; j++)
                        n += snprintf(split + n, sizeof split - (size_t)n, "%s%d", j ? "+" : "", lane_threads[j]);
                    size_t whole = 0;
                    for (size_t c = 0; c < s->chains[li]; c++) whole += lane_of[c] == CPU_LANE_WHOLE;
                    fprintf(stderr,
                            "pdc-profile %3zu %-24s %9.3f ms  %zu layers, %zu chains: %zu on every thread, then %d "
                            "lanes of %s threads (predicted %.3f ms, %.3f layer after layer)\n",
                            li, l->name, (omp_get_wtime() - t0) * 1e3, b - li, s->chains[li], whole, nl, split,
                            predicted[1], predicted[0]);
                }
                li = b - 1;
                continue;
            }
        }
        const cpu_exec lx = layer_exec(L, &x);
        st = L->run ? L->run(L, m, l, buf, &lx) : ref_run_layer(m, l, buf);
        /* option check_finite: a layer with a fused epilogue writes only the epilogue's output (its
         * own and the taken layers' are never written), checked here under this layer's name */
        if (st == PDC_OK && check && L->run != run_fused) {
            if (L->fused) {
                st = ir_check_layer_output(m, l, L->epi.out, buf[L->epi.out], s->numel[L->epi.out]);
            } else {
                for (size_t k = 0; k < l->n_outputs && st == PDC_OK; k++)
                    if (l->outputs[k] >= 0 && buf[l->outputs[k]])
                        st = ir_check_layer_output(m, l, l->outputs[k], buf[l->outputs[k]], s->numel[l->outputs[k]]);
            }
        }
        if (st != PDC_OK) pdc_error_prefix(ctx, "cpu");
        if (layer_ms) layer_ms[li] = ((cpu_clock ? thread_cpu_s() - c0 : omp_get_wtime() - t0)) * 1e3;
        if (profile)
            fprintf(stderr, "pdc-profile %3zu %-24s %9.3f ms  %s\n", li, l->name, (omp_get_wtime() - t0) * 1e3,
                    L->info);
    }
    for (size_t i = 0; i < m->n_outputs && st == PDC_OK; i++)
        if (outputs[i] && !buf[m->outputs[i]])
            st = pdc_error(ctx, PDC_ERR_INTERNAL, "cpu: graph output '%s' has no buffer", m->tensors[m->outputs[i]].name);
    if (st == PDC_OK)
        for (size_t i = 0; i < m->n_outputs; i++) {
            /* outputs are written only when the run succeeded: a copy over the team (a conv's 6.4 MB
             * output took a tenth of its run on one thread); skipped where written in place */
            int t = m->outputs[i];
            if (outputs[i]) cpu_copy_floats(outputs[i], buf[t], s->numel[t], x.threads);
        }
    pdc_free(buf);
    cpu_work *expected = NULL;
    if (!atomic_compare_exchange_strong(&s->spare, &expected, work)) work_free(work);
    return st;
}

static pdc_status cpu_run(const pdc_program *prog, const float *const *inputs, float *const *outputs,
                          const uint8_t *live)
{
    return cpu_run_timed(prog, inputs, outputs, live, NULL);
}

pdc_status pdc_cpu_run_timed(const pdc_program *prog, const float *const *inputs, float *const *outputs,
                             const uint8_t *live, double *layer_ms)
{
    return cpu_run_timed(prog, inputs, outputs, live, layer_ms);
}

int pdc_cpu_team_size(int threads) { return cpu_team_size(threads); }

pdc_status pdc_cpu_host_key(pdc_context *ctx, char *buf, size_t cap)
{
    pdc_jit *jit = NULL;
    pdc_status st = pdc_jit_get(ctx, &jit);
    if (st) return st;
    const pdc_llvm_target *t = pdc_jit_target(jit);
    unsigned major = 0, minor = 0, patch = 0;
    LLVMGetVersion(&major, &minor, &patch);
    char model[128] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
                const char *v = strchr(line, ':') + 1;
                while (*v == ' ' || *v == '\t') v++;
                snprintf(model, sizeof model, "%s", v);
                model[strcspn(model, "\r\n")] = 0;
                break;
            }
        fclose(f);
    }
    snprintf(buf, cap, "%s; %s; %s; LLVM %u.%u.%u", model, t->cpu, pdc_isa_name(t->isa), major, minor, patch);
    return PDC_OK;
}

static const char *cpu_layer_info(const pdc_program *prog, size_t li)
{
    const cpu_state *s = prog->state;
    return s && li < s->n_layers ? s->layers[li].info : "";
}

size_t pdc_cpu_program_threads(const pdc_program *prog)
{
    const cpu_state *s = prog->state;
    return s && s->threads > 0 ? (size_t)s->threads : 1;
}

const pdc_backend pdc_backend_cpu = {"cpu", "LLVM-JIT pattern-specialised kernels for this CPU (AVX-512/AVX2)",
                                     cpu_compile_prog, cpu_run, cpu_destroy, cpu_layer_info};
