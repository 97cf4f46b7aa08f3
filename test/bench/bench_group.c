/*
 * bench_group.c - groups of models (pdc_compile_group) against the same models compiled and run one
 * after the other, at 224x224, batch 1, target "cpu":
 *   - variants: two fine-tuned variants of one pruned ResNet-18 (models.h: identical through layer3,
 *     their own layer4 and fc), one input shared;
 *   - twins: two pruned ResNet-18 with different weights everywhere (nothing shared: what the schedule
 *     gains running their layers side by side);
 *   - unrelated: ResNet-18 and VGG-16 (pruned), one input shared (nothing else in common);
 *   - mobile: pruned ResNet-18 and dense MobileNetV2 (the camera pair).
 * Per case: median wall time of one run of every model (group: one pdc_program_run; apart: each
 * program in turn), the two alternating so that both see the same machine; and the memory each way:
 * the memory a child process holds after compiling and running, less what its models hold (malloc's
 * count of live bytes: the programs' model copies, packed weights, arenas; not the JIT code).
 *
 * usage: bench_group [--out FILE] [--threads LIST] [--min-time S]
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layers.h"
#include "models.h"
#include "pdc.h"

#define N_MODELS 2

static void die(pdc_context *ctx, const char *what)
{
    fprintf(stderr, "bench_group: %s: %s\n", what, pdc_context_last_error(ctx));
    exit(1);
}

typedef struct bench_case {
    const char *name;
    const char *model[N_MODELS];
    int variant[N_MODELS];
} bench_case;

static const bench_case cases[] = {
    {"variants", {"resnet18", "resnet18"}, {0, 1}},
    {"twins", {"resnet18", "resnet18"}, {0, -1}},
    {"unrelated", {"resnet18", "vgg16"}, {0, 0}},
    {"mobile", {"resnet18", "mobilenetv2"}, {0, 0}},
};

/* The models of a case, pruned and planned as `pdc prune` leaves them. */
static void build_models(pdc_context *ctx, const bench_case *c, pdc_model **m)
{
    for (int k = 0; k < N_MODELS; k++) {
        bench_prune pr = {1, 0.5, 0.1, c->variant[k]};
        if (!(m[k] = bench_build_model(ctx, c->model[k], 224, &pr))) exit(1);
        if (pdc_model_transform(m[k], "plan", NULL) != PDC_OK) die(ctx, "plan");
    }
}

/* Tensors for program p's inputs (filled from one stream) and outputs. */
static void make_tensors(pdc_context *ctx, const pdc_program *p, size_t *n_in, pdc_tensor **in, size_t *n_out,
                         pdc_tensor **out)
{
    if (pdc_program_num_inputs(p, n_in) || pdc_program_num_outputs(p, n_out) || *n_in > 4 || *n_out > 4)
        die(ctx, "program arity");
    for (size_t io = 0; io < 2; io++) {
        size_t n = io ? *n_out : *n_in;
        for (size_t i = 0; i < n; i++) {
            size_t rank;
            int64_t dims[PDC_MAX_RANK];
            pdc_status st = io ? pdc_program_output_info(p, i, NULL, &rank, dims)
                               : pdc_program_input_info(p, i, NULL, &rank, dims);
            pdc_tensor **t = io ? &out[i] : &in[i];
            if (st || pdc_tensor_create(ctx, rank, dims, t)) die(ctx, "tensor");
            float *v = pdc_tensor_data(*t);
            for (size_t e = 0; e < pdc_tensor_size(*t); e++) v[e] = (float)(2.0 * bench_urand() - 1.0);
        }
    }
}

typedef struct runner {
    pdc_program *p;
    size_t n_in, n_out;
    pdc_tensor *in[4], *out[4];
} runner;

static void runner_init(pdc_context *ctx, runner *r, pdc_program *p)
{
    memset(r, 0, sizeof *r);
    r->p = p;
    make_tensors(ctx, p, &r->n_in, r->in, &r->n_out, r->out);
}

static void runner_run(pdc_context *ctx, const runner *r)
{
    if (pdc_program_run(r->p, r->n_in, r->in, r->n_out, r->out) != PDC_OK) die(ctx, "run");
}

static void runner_free(runner *r)
{
    for (size_t i = 0; i < r->n_in; i++) pdc_tensor_destroy(r->in[i]);
    for (size_t i = 0; i < r->n_out; i++) pdc_tensor_destroy(r->out[i]);
    pdc_program_destroy(r->p);
}

/* Bytes malloc has handed out and not taken back (heap and mmap'd chunks): what the process holds,
 * whatever the allocator keeps cached (resident memory counted freed pages the heap kept). */
static double live_mb(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (double)(mi.uordblks + mi.hblkhd) / (1024.0 * 1024.0);
}

/* MB of memory a fresh child holds after compiling the case (grouped or apart) and running it once,
 * less what it held before (its models). */
static double memory_mb(const bench_case *c, int grouped, const char *threads)
{
    int fd[2];
    if (pipe(fd)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        pdc_context *ctx;
        if (pdc_context_create(&ctx) || pdc_context_set_option(ctx, "threads", threads)) _exit(1);
        pdc_model *m[N_MODELS];
        build_models(ctx, c, m);
        double before = live_mb();
        runner r[N_MODELS];
        int n = grouped ? 1 : N_MODELS;
        for (int k = 0; k < n; k++) {
            pdc_program *p;
            pdc_status st = grouped ? pdc_compile_group(ctx, (const pdc_model *const *)m, N_MODELS, "cpu", &p)
                                    : pdc_compile(ctx, m[k], "cpu", &p);
            if (st) die(ctx, "compile");
            runner_init(ctx, &r[k], p);
        }
        for (int k = 0; k < n; k++) runner_run(ctx, &r[k]);
        double mb = live_mb() - before;
        if (write(fd[1], &mb, sizeof mb) != sizeof mb) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    double mb = -1;
    if (read(fd[0], &mb, sizeof mb) != sizeof mb) mb = -1;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return mb;
}

/* mem_g, mem_a: memory_mb of the case grouped and apart, measured before any run (see main). */
static void run_case(const bench_case *c, const char *threads, double min_time, double mem_g, double mem_a, FILE *out)
{
    pdc_context *ctx;
    if (pdc_context_create(&ctx)) exit(1);
    if (pdc_context_set_option(ctx, "threads", threads)) die(ctx, "threads");
    pdc_model *m[N_MODELS];
    build_models(ctx, c, m);
    runner apart[N_MODELS], group;
    for (int k = 0; k < N_MODELS; k++) {
        pdc_program *p;
        if (pdc_compile(ctx, m[k], "cpu", &p)) die(ctx, "compile");
        runner_init(ctx, &apart[k], p);
    }
    pdc_program *gp;
    if (pdc_compile_group(ctx, (const pdc_model *const *)m, N_MODELS, "cpu", &gp)) die(ctx, "compile group");
    runner_init(ctx, &group, gp);
    size_t layers_apart = 0, layers_group = 0, n;
    for (int k = 0; k < N_MODELS; k++)
        if (!pdc_program_num_layers(apart[k].p, &n)) layers_apart += n;
    if (!pdc_program_num_layers(gp, &n)) layers_group = n;

    double tg[2000], ta[2000], spent = 0;
    int reps = 0;
    for (int w = 0; w < 2; w++) {
        runner_run(ctx, &group);
        for (int k = 0; k < N_MODELS; k++) runner_run(ctx, &apart[k]);
    }
    while ((reps < 9 || spent < min_time) && reps < 2000) {
        double t0 = bench_now();
        runner_run(ctx, &group);
        double t1 = bench_now();
        for (int k = 0; k < N_MODELS; k++) runner_run(ctx, &apart[k]);
        double t2 = bench_now();
        tg[reps] = (t1 - t0) * 1e3;
        ta[reps] = (t2 - t1) * 1e3;
        spent += t2 - t0;
        reps++;
    }
    double mg = bench_median(tg, reps), ma = bench_median(ta, reps);
    printf("%-9s %-18s threads %-2s layers %3zu vs %3zu   run %8.2f ms vs %8.2f ms apart (%.2fx throughput, %d reps)"
           "   memory %6.1f MB vs %6.1f MB (%.2fx)\n",
           c->name, c->model[1], threads, layers_group, layers_apart, mg, ma, ma / mg, reps, mem_g, mem_a, mem_g / mem_a);
    if (out)
        fprintf(out, "%s\t%s+%s\t%s\t%zu\t%zu\t%.3f\t%.3f\t%.3f\t%d\t%.1f\t%.1f\t%.3f\n", c->name, c->model[0], c->model[1],
                threads, layers_group, layers_apart, mg, ma, ma / mg, reps, mem_g, mem_a, mem_g / mem_a);
    runner_free(&group);
    for (int k = 0; k < N_MODELS; k++) {
        runner_free(&apart[k]);
        pdc_model_destroy(m[k]);
    }
    pdc_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    const char *out_path = NULL, *threads_list = "1,2";
    double min_time = 3.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads_list = argv[++i];
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_group [--out FILE] [--threads LIST] [--min-time S]\n");
            return 2;
        }
    }
    FILE *out = NULL;
    if (out_path) {
        if (!(out = fopen(out_path, "w"))) {
            perror(out_path);
            return 1;
        }
        fprintf(out, "case\tmodels\tthreads\tlayers_group\tlayers_apart\tgroup_ms\tapart_ms\tthroughput_x\treps\t"
                     "group_mb\tapart_mb\tmemory_x\n");
    }
    enum { N_CASES = sizeof cases / sizeof cases[0], MAX_THREADS = 8 };
    char list[64], *tv[MAX_THREADS];
    int nt = 0;
    snprintf(list, sizeof list, "%s", threads_list);
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t && nt < MAX_THREADS; t = strtok_r(NULL, ",", &save))
        tv[nt++] = t;
    /* Every memory child is forked before this process runs anything: a child forked after the parent's
     * OpenMP team exists hangs in libgomp (its pool is not fork-safe). */
    double mem[MAX_THREADS][N_CASES][2];
    for (int t = 0; t < nt; t++)
        for (size_t c = 0; c < N_CASES; c++)
            for (int g = 0; g < 2; g++) mem[t][c][g] = memory_mb(&cases[c], !g, tv[t]);
    for (int t = 0; t < nt; t++)
        for (size_t c = 0; c < N_CASES; c++) run_case(&cases[c], tv[t], min_time, mem[t][c][0], mem[t][c][1], out);
    if (out && fclose(out)) {
        perror(out_path);
        return 1;
    }
    return 0;
}
