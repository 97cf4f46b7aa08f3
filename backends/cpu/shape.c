/*
 * shape.c - data movement on the cpu target: flatten and reshape (a copy: row-major data does not
 * change), concat (each output row is the inputs' runs side by side) and transpose (dims that stay
 * neighbours merged first; then whole runs copied where the last dim keeps its place, else 2-D tiles
 * turned over). No arithmetic, so nothing for a JIT to specialise: plain C over pieces of the output
 * that the threads take in turn once the layer is large enough to gain from them.
 */
#include <stdio.h>
#include <string.h>

#include "backends/cpu/cpu.h"

#define MOVE_PIECE 16384     /* output floats a thread takes at a time */
#define MOVE_PAR_MIN 65536   /* output floats below which one thread does the layer */
#define MOVE_TILE 16         /* side of a transposed tile */

typedef enum move_kind { MOVE_COPY, MOVE_CONCAT, MOVE_RUNS, MOVE_TILES } move_kind;

typedef struct move_state {
    move_kind kind;
    int64_t total;                     /* output floats */
    /* concat: output rows of `row` floats; input j fills [at[j], at[j] + len[j]) of each */
    int64_t row;
    size_t n_in;
    int64_t at[64], len[64];
    /* transpose, dims merged: output dims[r] (the last moves fastest), input stride per dim */
    int r;
    int64_t dims[PDC_MAX_RANK], xs[PDC_MAX_RANK];
    int b;                             /* tiles: the output dim the input's last dim became */
    int64_t plane_dims[PDC_MAX_RANK];  /* tiles: dims with dims[b] = 1, to count planes */
} move_state;

static void move_free(void *p) { pdc_free(p); }

static int move_threads(const move_state *s, const cpu_exec *x) { return s->total >= MOVE_PAR_MIN ? x->threads : 1; }

static pdc_status copy_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const move_state *s = L->state;
    cpu_copy_floats(buf[l->outputs[0]], buf[l->inputs[0]], (size_t)s->total, move_threads(s, x));
    return PDC_OK;
}

static pdc_status concat_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                             const cpu_exec *x)
{
    (void)m;
    const move_state *s = L->state;
    float *out = buf[l->outputs[0]];
    int64_t pieces = (s->total + MOVE_PIECE - 1) / MOVE_PIECE;
    int nt = move_threads(s, x);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t p = 0; p < pieces; p++) {
        /* output elements [e, end): runs of one input each */
        int64_t e = p * MOVE_PIECE, end = s->total - e < MOVE_PIECE ? s->total : e + MOVE_PIECE;
        int64_t o = e / s->row, q = e % s->row;
        size_t j = 0;
        while (q >= s->at[j] + s->len[j]) j++;
        while (e < end) {
            int64_t n = s->at[j] + s->len[j] - q;
            if (n > end - e) n = end - e;
            memcpy(out + e, buf[l->inputs[j]] + o * s->len[j] + (q - s->at[j]), (size_t)n * sizeof(float));
            e += n;
            q += n;
            if (q == s->at[j] + s->len[j] && ++j == s->n_in) {
                j = 0;
                q = 0;
                o++;
            }
        }
    }
    return PDC_OK;
}

/* The input offset of output element index idx (dims [0, nd) of s), idx[d] < dims[d]. */
static int64_t input_offset(const move_state *s, int nd, const int64_t *idx)
{
    int64_t off = 0;
    for (int d = 0; d < nd; d++) off += idx[d] * s->xs[d];
    return off;
}

/* idx = the digits of flat index f over dims[0, nd) (the last fastest). */
static void unflatten(const int64_t *dims, int nd, int64_t f, int64_t *idx)
{
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = f % dims[d];
        f /= dims[d];
    }
}

/* Output runs (the last dim, contiguous in the input too) copied whole, pieces of runs per thread. */
static pdc_status runs_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                           const cpu_exec *x)
{
    (void)m;
    const move_state *s = L->state;
    const float *in = buf[l->inputs[0]];
    float *out = buf[l->outputs[0]];
    const int r = s->r;
    const int64_t run = s->dims[r - 1], runs = s->total / run;
    const int64_t per = run >= MOVE_PIECE ? 1 : MOVE_PIECE / run, pieces = (runs + per - 1) / per;
    int nt = move_threads(s, x);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
    for (int64_t p = 0; p < pieces; p++) {
        int64_t idx[PDC_MAX_RANK];
        int64_t k0 = p * per, k1 = runs - k0 < per ? runs : k0 + per;
        unflatten(s->dims, r - 1, k0, idx);
        int64_t off = input_offset(s, r - 1, idx);
        for (int64_t k = k0; k < k1; k++) {
            memcpy(out + k * run, in + off, (size_t)run * sizeof(float));
            for (int d = r - 2; d >= 0; d--) { /* next run: odometer over the leading dims */
                off += s->xs[d];
                if (++idx[d] < s->dims[d]) break;
                off -= s->xs[d] * idx[d];
                idx[d] = 0;
            }
        }
    }
    return PDC_OK;
}

/* y[i * ys + j] = x[j * xs + i] for i < ni, j < nj, in tiles. */
PDC_ISA_CLONES __attribute__((optimize("O3")))
static void transpose_2d(float *restrict y, int64_t ys, const float *restrict x, int64_t xs, int64_t ni, int64_t nj)
{
    for (int64_t i0 = 0; i0 < ni; i0 += MOVE_TILE) {
        int64_t i1 = ni - i0 < MOVE_TILE ? ni : i0 + MOVE_TILE;
        for (int64_t j0 = 0; j0 < nj; j0 += MOVE_TILE) {
            int64_t j1 = nj - j0 < MOVE_TILE ? nj : j0 + MOVE_TILE;
            for (int64_t i = i0; i < i1; i++)
                for (int64_t j = j0; j < j1; j++) y[i * ys + j] = x[j * xs + i];
        }
    }
}

/* The input's last dim moved to output dim b: for every index of the other dims but the last, a
 * 2-D transpose of (dim b) x (the last dim), MOVE_TILE rows of dim b per work item. */
static pdc_status tiles_run(const cpu_layer *L, const ir_model *m, const ir_layer *l, float *const *buf,
                            const cpu_exec *x)
{
    (void)m;
    const move_state *s = L->state;
    const float *in = buf[l->inputs[0]];
    float *out = buf[l->outputs[0]];
    const int r = s->r, b = s->b;
    int64_t ys = 1; /* output stride of dim b */
    for (int d = b + 1; d < r; d++) ys *= s->dims[d];
    const int64_t ni = s->dims[b], nj = s->dims[r - 1], blocks = (ni + MOVE_TILE - 1) / MOVE_TILE;
    const int64_t planes = s->total / (ni * nj), items = planes * blocks;
    int nt = move_threads(s, x);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 4) if (nt > 1)
    for (int64_t it = 0; it < items; it++) {
        /* plane: an index over the output dims but b and the last; its digits with dim b at 0 */
        int64_t idx[PDC_MAX_RANK], i0 = it % blocks * MOVE_TILE;
        unflatten(s->plane_dims, r - 1, it / blocks, idx);
        int64_t yo = 0;
        for (int d = 0; d < r - 1; d++) yo = (yo + idx[d]) * s->dims[d + 1];
        int64_t n = ni - i0 < MOVE_TILE ? ni - i0 : MOVE_TILE;
        transpose_2d(out + yo + i0 * ys, ys, in + input_offset(s, r - 1, idx) + i0, s->xs[r - 1], n, nj);
    }
    return PDC_OK;
}

/* Transpose: merge output dims that are neighbours in the input too, drop dims of 1, choose the mode. */
static void plan_transpose(const ir_model *m, const ir_layer *l, move_state *s)
{
    const ir_tensor *tx = &m->tensors[l->inputs[0]];
    const int rank = tx->rank;
    size_t np = 0;
    const int64_t *pa = ir_attr_ints(&l->attrs, "perm", &np);
    int64_t xst[PDC_MAX_RANK], stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        xst[d] = stride;
        stride *= tx->dims[d];
    }
    s->r = 0;
    for (int i = 0; i < rank; i++) {
        int p = (int)(pa && np == (size_t)rank ? pa[i] : rank - 1 - i);
        int64_t n = tx->dims[p];
        if (n == 1) continue;
        if (s->r > 0 && s->xs[s->r - 1] == xst[p] * n) { /* follows the previous dim in the input too */
            s->dims[s->r - 1] *= n;
            s->xs[s->r - 1] = xst[p];
            continue;
        }
        s->dims[s->r] = n;
        s->xs[s->r] = xst[p];
        s->r++;
    }
    if (s->r == 0) { /* one element */
        s->dims[0] = 1;
        s->xs[0] = 1;
        s->r = 1;
    }
    s->kind = s->xs[s->r - 1] == 1 ? MOVE_RUNS : MOVE_TILES;
    for (int d = 0; d < s->r; d++)
        if (s->xs[d] == 1) s->b = d;
    memcpy(s->plane_dims, s->dims, sizeof s->dims);
    s->plane_dims[s->b] = 1;
}

pdc_status cpu_plan_shape(const cpu_compile *cc, const ir_model *m, const ir_layer *l, cpu_layer *L, char *why,
                          size_t why_cap)
{
    if (l->op != IR_OP_FLATTEN && l->op != IR_OP_RESHAPE && l->op != IR_OP_CONCAT && l->op != IR_OP_TRANSPOSE)
        return PDC_ERR_UNSUPPORTED;
    if (l->outputs[0] < 0) return PDC_ERR_UNSUPPORTED;
    for (size_t j = 0; j < l->n_inputs; j++)
        if (l->inputs[j] < 0) return PDC_ERR_UNSUPPORTED;
    const ir_tensor *ty = &m->tensors[l->outputs[0]];
    move_state *s = pdc_calloc(cc->ctx, 1, sizeof *s);
    if (!s) return PDC_ERR_OUT_OF_MEMORY;
    s->total = (int64_t)ir_tensor_numel(ty);
    cpu_run_fn run = copy_run;
    if (l->op == IR_OP_TRANSPOSE && m->tensors[l->inputs[0]].rank < 1) {
        pdc_free(s);
        snprintf(why, why_cap, "transpose of a scalar");
        return PDC_ERR_UNSUPPORTED;
    }
    if (l->op == IR_OP_CONCAT) {
        int64_t axis = ir_attr_int(&l->attrs, "axis", 0);
        if (axis < 0) axis += ty->rank;
        if (axis < 0 || axis >= ty->rank || l->n_inputs > sizeof s->at / sizeof s->at[0]) {
            pdc_free(s);
            snprintf(why, why_cap, "axis out of range or more than %zu inputs", sizeof s->at / sizeof s->at[0]);
            return PDC_ERR_UNSUPPORTED;
        }
        int64_t inner = 1;
        for (int i = (int)axis + 1; i < ty->rank; i++) inner *= ty->dims[i];
        s->kind = MOVE_CONCAT;
        s->n_in = l->n_inputs;
        for (size_t j = 0; j < l->n_inputs; j++) {
            s->at[j] = s->row;
            s->len[j] = m->tensors[l->inputs[j]].dims[axis] * inner;
            s->row += s->len[j];
        }
        run = concat_run;
        snprintf(L->info, sizeof L->info, "concat of %zu inputs along axis %lld, copied in runs", s->n_in,
                 (long long)axis);
    } else if (l->op == IR_OP_TRANSPOSE) {
        plan_transpose(m, l, s);
        if (s->r == 1) s->kind = MOVE_COPY;
        run = s->kind == MOVE_COPY ? copy_run : s->kind == MOVE_RUNS ? runs_run : tiles_run;
        if (s->kind == MOVE_COPY)
            snprintf(L->info, sizeof L->info, "transpose that keeps the order: a copy");
        else if (s->kind == MOVE_RUNS)
            snprintf(L->info, sizeof L->info, "transpose as %d merged dims, copied in runs of %lld floats", s->r,
                     (long long)s->dims[s->r - 1]);
        else
            snprintf(L->info, sizeof L->info, "transpose as %d merged dims, %lld x %lld planes in %dx%d tiles", s->r,
                     (long long)s->dims[s->b], (long long)s->dims[s->r - 1], MOVE_TILE, MOVE_TILE);
    } else {
        snprintf(L->info, sizeof L->info, "%s: a copy (the data's order does not change)", ir_op_get_info(l->op)->name);
    }
    L->run = run;
    L->state = s;
    L->free_state = move_free;
    return PDC_OK;
}
