/* matmul (PyTorch semantics) through mlk_gemm, and linear: its forward through mlk_gemm_nt, its
 * input gradient through mlk_gemm_nn, its weight gradient through mlk_gemm_tn, or their bf16
 * forms (gemm_bf16.c) where the thread's linear precision is bf16 (gemm.c: each
 * element's bits depend on its row and column alone, not on the rows, columns or threads beside
 * it). A matrix operand whose last two dims are a row-major or a transposed row-major matrix is
 * read in place (its strides); only other layouts are copied. Batched products whose right
 * operand is shared across the batch and whose left operand stacks its rows uniformly run as one
 * product (the same bits as one product per batch element, faster). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/iter.h"
#include "core/threads.h"
#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* How a rows x cols matrix with element strides (rs, cs) is read: row-major with its rows *ld
 * apart, or (*tr) transposed, its columns *ld apart; false if neither. */
static bool mat_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *tr, int64_t *ld) {
    int64_t mc = cols > 1 ? cols : 1, mr = rows > 1 ? rows : 1;
    if ((cols == 1 || cs == 1) && (rows == 1 || rs >= mc)) {
        *tr = false;
        *ld = rows == 1 ? mc : rs;
        return *ld <= INT32_MAX;
    }
    if ((rows == 1 || rs == 1) && (cols == 1 || cs >= mr)) {
        *tr = true;
        *ld = cols == 1 ? mr : cs;
        return *ld <= INT32_MAX;
    }
    return false;
}

/* Only a product that runs is limited: an empty one ([0 x 2^31] @ [2^31 x 0]) runs no sgemm. */
static ml_status check_blas_size(const char *fn, int64_t m, int64_t n, int64_t k) {
    if (!m || !n || !k) return ML_OK;
    if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX)
        return ml_fail(ML_ERR_SHAPE, "%s: matrix dimensions %lld x %lld x %lld exceed the BLAS limit of 2^31-1", fn,
                       (long long)m, (long long)n, (long long)k);
    return ML_OK;
}

/* ------------------------------------------------------------------ batched core */

static ml_status bmm_backward(ml_node *node, ml_tensor *g, ml_tensor **gin);

/* a (..., m, k) @ b (..., k, n) with broadcast batch dims; both float32 with ndim >= 2. */
static ml_tensor *bmm(ml_tensor *a, ml_tensor *b) {
    int na = a->ndim, nb = b->ndim;
    int64_t m = a->shape[na - 2], k = a->shape[na - 1], n = b->shape[nb - 1];
    /* broadcast batch dims */
    int nbat = (na > nb ? na : nb) - 2;
    int64_t bshape[ML_MAX_DIMS], sa[ML_MAX_DIMS], sb[ML_MAX_DIMS];
    for (int i = 0; i < nbat; i++) {
        int da = na - 2 - nbat + i, db = nb - 2 - nbat + i;
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
        if (x != y && x != 1 && y != 1) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            ml_fail(ML_ERR_SHAPE, "matmul: batch dimensions %s of argument 1 and %s of argument 2 do not broadcast",
                    ml_shape_str(s1, na - 2, a->shape), ml_shape_str(s2, nb - 2, b->shape));
            return NULL;
        }
        bshape[i] = x == 1 ? y : x;
    }
    if (check_blas_size("matmul", m, n, k)) return NULL;
    int64_t oshape[ML_MAX_DIMS];
    memcpy(oshape, bshape, sizeof(int64_t) * (size_t)nbat);
    oshape[nbat] = m;
    oshape[nbat + 1] = n;
    if (ml_check_shape("matmul", 1, nbat + 2, oshape)) return NULL;
    /* the product writes every element (zeros where k = 0) */
    ml_tensor *out = ml_empty(ML_F32, nbat + 2, oshape);
    if (!out) return NULL;
    int64_t nbatch = 1;
    for (int i = 0; i < nbat; i++) nbatch *= bshape[i];

    ml_tensor *A = ml_retain(a), *B = ml_retain(b);
    bool ta = false, tb = false; /* set by mat_layout; an empty product (k = 0) reads neither */
    int64_t lda = 0, ldb = 0;
    if (!mat_layout(m, k, A->stride[na - 2], A->stride[na - 1], &ta, &lda)) {
        ml_release(A);
        A = mlo_dense(a);
        if (A) mat_layout(m, k, A->stride[na - 2], A->stride[na - 1], &ta, &lda);
    }
    if (B && !mat_layout(k, n, B->stride[nb - 2], B->stride[nb - 1], &tb, &ldb)) {
        ml_release(B);
        B = mlo_dense(b);
        if (B) mat_layout(k, n, B->stride[nb - 2], B->stride[nb - 1], &tb, &ldb);
    }
    if (!A || !B) {
        ml_release(A);
        ml_release(B);
        ml_release(out);
        return NULL;
    }
    int rc = 0;
    if (m && n && nbatch) {
        /* batch strides seen on the broadcast batch shape */
        for (int i = 0; i < nbat; i++) {
            int da = na - 2 - nbat + i, db = nb - 2 - nbat + i;
            sa[i] = (da < 0 || A->shape[da] == 1) ? 0 : A->stride[da];
            sb[i] = (db < 0 || B->shape[db] == 1) ? 0 : B->stride[db];
        }
        /* One product when b is shared and a's (batch, row) dims form one uniform run of rows. */
        bool fold = !ta && nbatch > 1;
        int64_t expect = m * lda;
        for (int i = nbat - 1; i >= 0 && fold; i--) {
            if (sb[i] != 0 || (bshape[i] != 1 && sa[i] != expect)) fold = false;
            expect *= bshape[i];
        }
        const float *pa = ml_f32(A), *pb = ml_f32(B);
        float *po = ml_f32(out);
        /* a(i, kk) = pa[i·xr + kk·xc]; b as (k, n) rows ldb apart, or transposed: (n, k) */
        int64_t xr = ta ? 1 : lda, xc = ta ? lda : 1;
        if (fold)
            rc = mlk_gemm(nbatch * m, n, k, pa, xr, xc, pb, ldb, !tb, 1.0f, false, po, n);
        else {
            ml_iter it;
            ml_iter_init(&it, nbat, bshape, 2, (const int64_t *[]){sa, sb});
            for (int64_t t = 0; t < nbatch && !rc; t++, ml_iter_next(&it))
                rc = mlk_gemm(m, n, k, pa + it.off[0], xr, xc, pb + it.off[1], ldb, !tb, 1.0f, false, po + t * m * n, n);
        }
    }
    ml_release(A);
    ml_release(B);
    if (rc) {
        ml_release(out);
        ml_fail(ML_ERR_MEM, "matmul: out of memory");
        return NULL;
    }
    if (ml_needs_grad(a) || ml_needs_grad(b)) {
        ml_tensor *in[2] = {a, b};
        ml_node *node = ml_node_new("MatmulBackward", bmm_backward, 2, in);
        if (node) {
            if (ml_needs_grad(b)) ml_node_save(node, 0, a);
            if (ml_needs_grad(a)) ml_node_save(node, 1, b);
        }
        out = mlo_attach(out, node);
    }
    return out;
}

/* gA = g·Bᵀ, gB = Aᵀ·g (transposes are views, read in place by their strides), summed over the
 * batch dims the operand was broadcast along. */
static ml_status bmm_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    for (int i = 0; i < 2; i++) {
        if (!ml_node_input_needs_grad(node, i)) continue;
        ml_tensor *other = ml_node_saved(node, 1 - i);
        if (!other) return ml_last_status();
        int64_t k = other->shape[other->ndim - 1], n = g->shape[g->ndim - 1];
        if (i == 1 && node->in_ndim[1] == 2 && other->ndim > 2 && k > 0 && n > 0 && ml_numel(other) > 0) {
            /* a matrix b shared by a batch: gB = Σ_batch aᵀ·g is one product over the stacked rows */
            ml_tensor *a2 = ml_reshape(other, 2, (int64_t[]){-1, k}), *g2 = ml_reshape(g, 2, (int64_t[]){-1, n});
            ml_tensor *at = a2 ? ml_transpose(a2, 0, 1) : NULL;
            gin[1] = at && g2 ? bmm(at, g2) : NULL;
            ml_release(a2);
            ml_release(g2);
            ml_release(at);
            if (!gin[1]) return ml_last_status();
            continue;
        }
        ml_tensor *ot = ml_transpose(other, -1, -2);
        if (!ot) return ml_last_status();
        ml_tensor *full = i == 0 ? bmm(g, ot) : bmm(ot, g);
        ml_release(ot);
        if (!full) return ml_last_status();
        gin[i] = ml_sum_to_shape(full, node->in_ndim[i], node->in_shape[i]);
        ml_release(full);
        if (!gin[i]) return ml_last_status();
    }
    return ML_OK;
}

ml_tensor *ml_matmul(ml_tensor *a, ml_tensor *b) {
    if (mlo_check_f32("matmul", 1, a) || mlo_check_f32("matmul", 2, b)) return NULL;
    for (int i = 0; i < 2; i++) {
        const ml_tensor *t = i ? b : a;
        if (t->ndim == 0) {
            ml_fail(ML_ERR_SHAPE, "matmul: argument %d expected a tensor with at least 1 dimension, got a 0-dim tensor",
                    i + 1);
            return NULL;
        }
    }
    int64_t ka = a->shape[a->ndim - 1], kb = b->ndim == 1 ? b->shape[0] : b->shape[b->ndim - 2];
    if (ka != kb) {
        char s[ML_SHAPE_STR];
        const char *pat = b->ndim == 1 ? "[%lld]" : b->ndim == 2 ? "[%lld,*]" : "[...,%lld,*]";
        char want[64];
        snprintf(want, sizeof want, pat, (long long)ka);
        ml_fail(ML_ERR_SHAPE, "matmul: argument 2 has shape %s, expected %s", ml_shape_str(s, b->ndim, b->shape), want);
        return NULL;
    }
    bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    /* 1-D operands become matrices through differentiable views, dropped again afterwards */
    ml_tensor *A = a1 ? ml_unsqueeze(a, 0) : ml_retain(a);
    ml_tensor *B = b1 ? ml_unsqueeze(b, 1) : ml_retain(b);
    ml_tensor *r = A && B ? bmm(A, B) : NULL;
    ml_release(A);
    ml_release(B);
    if (r && b1) {
        ml_tensor *s = ml_squeeze(r, -1);
        ml_release(r);
        r = s;
    }
    if (r && a1) {
        ml_tensor *s = ml_squeeze(r, b1 ? -1 : -2);
        ml_release(r);
        r = s;
    }
    return r;
}

/* ------------------------------------------------------------------ linear */

/* The precision of this thread's linear products (ops.h): set by a model's forward around its
 * products, recorded in each node for its backward. */
static _Thread_local ml_precision linear_precision = ML_PRECISION_FP32;

ml_precision ml_linear_precision(void) { return linear_precision; }

ml_precision ml_set_linear_precision(ml_precision p) {
    ml_precision old = linear_precision;
    linear_precision = p;
    return old;
}

/* A kernel's failure as linear's error: no AVX512_BF16, or out of memory. */
static ml_status linear_kernel_failed(const char *fn, int rc) {
    if (rc == MLK_ENOBF16) return ml_fail(ML_ERR_STATE, "%s: %s", fn, MLK_BF16_MISSING);
    return ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
}

/* acc[j] += Σ_r g[r, j] in row order, in double: the bias gradient. Multiversioned
 * (kernel_util.h): each column sums alone, so the vector width does not change the bits. */
MLK_CLONES static void bias_grad_f64(int64_t N, int64_t out, const float *pg, double *acc) {
    for (int64_t r = 0; r < N; r++)
        for (int64_t j = 0; j < out; j++) acc[j] += pg[r * out + j];
}

/* Saved: 0 = x as (N, in) contiguous, 1 = W contiguous. iarg[3]: the forward's precision, which
 * the backward keeps whatever the thread's precision when it runs. */
static ml_status linear_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    int64_t N = node->iarg[0], in = node->iarg[1], out = node->iarg[2];
    bool bf16 = node->iarg[3] == ML_PRECISION_BF16;
    const float *pg = ml_f32(g);
    if (ml_node_input_needs_grad(node, 0)) {
        ml_tensor *W = ml_node_saved(node, 1);
        if (!W) return ml_last_status();
        /* dX = dY·W by mlk_gemm_nn (faster than sgemm at these widths); it writes every element */
        ml_tensor *gx = ml_empty(ML_F32, node->in_ndim[0], node->in_shape[0]);
        if (!gx) return ML_ERR_MEM;
        int rc = bf16 ? mlk_gemm_nn_bf16(N, in, out, pg, ml_f32(W), ml_f32(gx))
                      : mlk_gemm_nn(N, in, out, pg, ml_f32(W), ml_f32(gx));
        if (rc) {
            ml_release(gx);
            return linear_kernel_failed("linear backward", rc);
        }
        gin[0] = gx;
    }
    float *sink = ml_node_input_needs_grad(node, 1) ? ml_node_grad_sink(node, 1) : NULL;
    /* dW = dYᵀ·X by mlk_gemm_tn: each element summed over the rows in order, whatever the thread
     * count and the rows and columns beside it (docs/kernels.md, "Determinism") */
    if (sink) { /* dW += dYᵀ·X straight into the parameter's gradient */
        ml_tensor *X = ml_node_saved(node, 0);
        if (!X) return ml_last_status();
        int rc = !(N && in && out) ? 0
                 : bf16           ? mlk_gemm_tn_bf16(out, in, N, pg, ml_f32(X), true, sink)
                                  : mlk_gemm_tn(out, in, N, pg, ml_f32(X), true, sink);
        if (rc) return linear_kernel_failed("linear backward", rc);
    } else if (ml_node_input_needs_grad(node, 1)) {
        ml_tensor *X = ml_node_saved(node, 0);
        if (!X) return ml_last_status();
        bool full = N && in && out;
        ml_tensor *gw = (full ? ml_empty : ml_zeros)(ML_F32, node->in_ndim[1], node->in_shape[1]);
        if (!gw) return ML_ERR_MEM;
        int rc = !full ? 0
                 : bf16 ? mlk_gemm_tn_bf16(out, in, N, pg, ml_f32(X), false, ml_f32(gw))
                        : mlk_gemm_tn(out, in, N, pg, ml_f32(X), false, ml_f32(gw));
        if (rc) {
            ml_release(gw);
            return linear_kernel_failed("linear backward", rc);
        }
        gin[1] = gw;
    }
    if (node->n_in > 2 && ml_node_input_needs_grad(node, 2)) {
        ml_tensor *gb = ml_empty(ML_F32, 1, &out);
        double *acc = calloc((size_t)(out ? out : 1), sizeof *acc);
        if (!gb || !acc) {
            ml_release(gb);
            free(acc);
            return ml_fail(ML_ERR_MEM, "linear backward: out of memory");
        }
        bias_grad_f64(N, out, pg, acc);
        for (int64_t j = 0; j < out; j++) ml_f32(gb)[j] = (float)acc[j];
        free(acc);
        float *bsink = ml_node_grad_sink(node, 2);
        if (bsink) {
            for (int64_t j = 0; j < out; j++) bsink[j] += ml_f32(gb)[j];
            ml_release(gb);
        } else {
            gin[2] = gb;
        }
    }
    return ML_OK;
}

ml_tensor *ml_linear(ml_tensor *x, ml_tensor *w, ml_tensor *bias) {
    if (mlo_check_f32("linear", 1, x) || mlo_check_f32("linear", 2, w) || (bias && mlo_check_f32("linear", 3, bias)))
        return NULL;
    char s[ML_SHAPE_STR];
    if (x->ndim == 0) {
        ml_fail(ML_ERR_SHAPE, "linear: argument 1 expected a tensor with at least 1 dimension, got a 0-dim tensor");
        return NULL;
    }
    int64_t in = x->shape[x->ndim - 1];
    if (w->ndim != 2 || w->shape[1] != in) {
        ml_fail(ML_ERR_SHAPE, "linear: argument 2 has shape %s, expected [*,%lld]", ml_shape_str(s, w->ndim, w->shape),
                (long long)in);
        return NULL;
    }
    int64_t out = w->shape[0];
    if (bias && (bias->ndim != 1 || bias->shape[0] != out)) {
        ml_fail(ML_ERR_SHAPE, "linear: argument 3 has shape %s, expected [%lld]",
                ml_shape_str(s, bias->ndim, bias->shape), (long long)out);
        return NULL;
    }
    int64_t N = ml_numel(x) / (in ? in : 1);
    if (in == 0) {
        N = 1;
        for (int d = 0; d < x->ndim - 1; d++) N *= x->shape[d];
    }
    if (check_blas_size("linear", N, out, in)) return NULL;
    int64_t oshape[ML_MAX_DIMS];
    memcpy(oshape, x->shape, sizeof oshape);
    oshape[x->ndim - 1] = out;
    ml_tensor *X = mlo_dense(x), *W = mlo_dense(w);
    ml_tensor *y = X && W ? ml_empty(ML_F32, x->ndim, oshape) : NULL;
    if (!y) {
        ml_release(X);
        ml_release(W);
        return NULL;
    }
    /* not sgemm: each row's bits must not depend on the rows beside it (kernels.h, mlk_gemm_nt) */
    ml_precision prec = linear_precision;
    ml_tensor *bd = bias ? mlo_dense(bias) : NULL;
    const float *pb = bd ? ml_f32(bd) : NULL;
    int rc = bias && !bd                      ? -1
             : prec == ML_PRECISION_BF16 ? mlk_gemm_nt_bf16(N, out, in, ml_f32(X), ml_f32(W), pb, ml_f32(y))
                                              : mlk_gemm_nt(N, out, in, ml_f32(X), ml_f32(W), pb, ml_f32(y));
    ml_release(bd);
    if (rc) {
        ml_release(X), ml_release(W), ml_release(y);
        if (!bias || bd) linear_kernel_failed("linear", rc); /* else mlo_dense said why */
        return NULL;
    }
    ml_tensor *in3[3] = {x, w, bias};
    if (ml_any_needs_grad(bias ? 3 : 2, in3)) {
        ml_node *node = ml_node_new("LinearBackward", linear_backward, bias ? 3 : 2, in3);
        if (node) {
            node->iarg[0] = N;
            node->iarg[1] = in;
            node->iarg[2] = out;
            node->iarg[3] = prec;
            if (ml_needs_grad(w)) ml_node_save(node, 0, X);
            if (ml_needs_grad(x)) ml_node_save(node, 1, W);
        }
        y = mlo_attach(y, node);
    }
    ml_release(X);
    ml_release(W);
    return y;
}
