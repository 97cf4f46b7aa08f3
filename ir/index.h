/*
 * index.h - walking a tensor's elements in row-major order while following strided offsets into
 * other tensors: broadcast operands (numpy rules, dims right-aligned), matmul's batch dims, the
 * input of a transpose. Pure arithmetic on shapes, one definition for the reference kernels, the
 * trainer, the cpu and gpu backends and ONNX constant folding.
 */
#ifndef PDC_IR_INDEX_H
#define PDC_IR_INDEX_H

#include "ir/ir.h"

/* Strides of an operand of rank `rank` and dims `dims` against an output of rank r and dims od,
 * right-aligned (leading operand dims past r are ignored): the operand's last dim steps by `inner`
 * elements, each dim before it by the product of the dims after it; dims the operand lacks and dims
 * of size 1 get 0 (they broadcast). Every stride is set; returns -1 if a dim is neither 1 nor the
 * output's, else 0. */
int ir_broadcast_strides(int rank, const int64_t *dims, int r, const int64_t *od, int64_t inner, int64_t *strides);

/* Strides of a transpose's input (rank r, dims xd) for a step along each output dim: s[i] is the
 * stride of input dim perm[i]. */
void ir_transpose_strides(int r, const int64_t *xd, const int64_t *perm, int64_t *s);

/* One step of a row-major walk over dims[0..r): advances the multi-index idx (all 0 at the start)
 * and each of the k offsets off[j] by its strides s[j]. After the last element idx and the offsets
 * are 0 again. */
static inline void ir_index_next(int r, const int64_t *dims, int64_t *idx, size_t k, int64_t (*s)[PDC_MAX_RANK],
                                 int64_t *off)
{
    for (int d = r - 1; d >= 0; d--) {
        idx[d]++;
        for (size_t j = 0; j < k; j++) off[j] += s[j][d];
        if (idx[d] < dims[d]) return;
        for (size_t j = 0; j < k; j++) off[j] -= s[j][d] * idx[d];
        idx[d] = 0;
    }
}

#endif
