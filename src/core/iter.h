/* Strided n-d iteration over up to three operands of one logical shape (internal helper).
 * Usage:
 *     ml_iter it; ml_iter_init(&it, ndim, shape, 2, (const int64_t *[]){sa, sb});
 *     for (int64_t i = 0; i < n; i++) { ... it.off[0], it.off[1] ...; ml_iter_next(&it); }
 * Offsets are in elements and follow each operand's strides (0 for broadcast dims). */
#ifndef ML_ITER_H
#define ML_ITER_H

#include <stdint.h>

#include "core/tensor.h"

typedef struct {
    int ndim, nops;
    int64_t shape[ML_MAX_DIMS];
    int64_t stride[3][ML_MAX_DIMS];
    int64_t idx[ML_MAX_DIMS];
    int64_t off[3];
} ml_iter;

static inline void ml_iter_init(ml_iter *it, int ndim, const int64_t *shape, int nops, const int64_t *const *strides) {
    it->ndim = ndim;
    it->nops = nops;
    for (int d = 0; d < ndim; d++) {
        it->shape[d] = shape[d];
        it->idx[d] = 0;
        for (int k = 0; k < nops; k++) it->stride[k][d] = strides[k][d];
    }
    for (int k = 0; k < 3; k++) it->off[k] = 0;
}

/* Moves an iterator fresh from ml_iter_init to the i-th index in row-major order. */
static inline void ml_iter_seek(ml_iter *it, int64_t i) {
    for (int d = it->ndim - 1; d >= 0; d--) {
        it->idx[d] = it->shape[d] ? i % it->shape[d] : 0;
        i = it->shape[d] ? i / it->shape[d] : 0;
        for (int k = 0; k < it->nops; k++) it->off[k] += it->idx[d] * it->stride[k][d];
    }
}

static inline void ml_iter_next(ml_iter *it) {
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (++it->idx[d] < it->shape[d]) {
            for (int k = 0; k < it->nops; k++) it->off[k] += it->stride[k][d];
            return;
        }
        it->idx[d] = 0;
        for (int k = 0; k < it->nops; k++) it->off[k] -= it->stride[k][d] * (it->shape[d] - 1);
    }
}

#endif
