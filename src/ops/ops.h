/* Generic differentiable tensor ops (the building blocks Lua users compose their own layers
 * from). All follow tensor.h's conventions: new reference or NULL + error message naming the
 * op as Lua calls it ("add: ..."). Float ops record autograd nodes (autograd.h) when an input
 * needs grad. Elementwise ops broadcast with PyTorch rules; mixed int32/float32 operands
 * promote to float32; int32 with int32 stays int32 for add/sub/mul/maximum/minimum (and
 * neg/abs/relu/clamp) and for remainder/fmod/floor_divide (an int32 division by zero is an
 * error), while div and pow give float32; comparisons return int32 0/1 masks.
 * int32 results never record gradients. docs/tensors.md is the reference from Lua. */
#ifndef ML_OPS_H
#define ML_OPS_H

#include "autograd/autograd.h"
#include "core/tensor.h"

/* ---- elementwise binary (broadcasting) ---- */
typedef enum {
    ML_ADD, ML_SUB, ML_MUL, ML_DIV, ML_POW, ML_MAXIMUM, ML_MINIMUM,
    /* a - floor(a/b)·b (the divisor's sign, Python's and PyTorch's %), C's fmod (the dividend's
     * sign), floor(a/b) (PyTorch's //; zero gradient: piecewise constant) */
    ML_REMAINDER, ML_FMOD, ML_FLOOR_DIVIDE,
    /* comparisons: not differentiable, result int32 0/1 (a mask usable by where) */
    ML_EQ, ML_NE, ML_LT, ML_LE, ML_GT, ML_GE
} ml_binop;
const char *ml_binop_name(ml_binop op); /* "add", "sub", ... */
ml_tensor *ml_binary(ml_binop op, ml_tensor *a, ml_tensor *b);
ml_tensor *ml_binary_scalar(ml_binop op, ml_tensor *a, double s);  /* a op s */
ml_tensor *ml_scalar_binary(ml_binop op, double s, ml_tensor *a);  /* s op a */
ml_tensor *ml_add(ml_tensor *a, ml_tensor *b);
ml_tensor *ml_sub(ml_tensor *a, ml_tensor *b);
ml_tensor *ml_mul(ml_tensor *a, ml_tensor *b);
ml_tensor *ml_div(ml_tensor *a, ml_tensor *b);

/* ---- elementwise unary ---- */
typedef enum {
    ML_NEG, ML_EXP, ML_LOG, ML_SQRT, ML_ABS, ML_TANH, ML_SIGMOID, ML_RELU,
    ML_GELU,     /* exact erf form */
    ML_SILU, ML_SOFTPLUS /* threshold 20: x above it */, ML_SIN, ML_COS
} ml_unop;
const char *ml_unop_name(ml_unop op);
ml_tensor *ml_unary(ml_unop op, ml_tensor *a);
/* gelu(h + bias), bias (n) over the last dim of h (..., n), in one pass forward and backward (the
 * bias gradient summed in the pass that forms h's): the MLP's first layer after a bias-free product. */
ml_tensor *ml_bias_gelu(ml_tensor *h, ml_tensor *bias);
ml_tensor *ml_clamp(ml_tensor *a, double lo, double hi); /* NAN bound = none */
ml_tensor *ml_where(ml_tensor *cond, ml_tensor *a, ml_tensor *b); /* cond: any dtype, nonzero = a */

/* ---- reductions along one dim (dim = ML_ALL_DIMS reduces everything) ---- */
#define ML_ALL_DIMS 1000
typedef enum { ML_SUM, ML_MEAN, ML_MAX, ML_MIN, ML_ARGMAX, ML_ARGMIN, ML_VAR } ml_redop;
ml_tensor *ml_reduce(ml_redop op, ml_tensor *a, int dim, bool keepdim);
ml_tensor *ml_var(ml_tensor *a, int dim, bool keepdim, int correction); /* correction 1 = unbiased */
ml_tensor *ml_std(ml_tensor *a, int dim, bool keepdim, int correction); /* √var */
ml_tensor *ml_sum_all(ml_tensor *a);
/* Vector p-norm along dim (or all): (Σ|x|^p)^(1/p) in double; p = INFINITY: max|x|, -INFINITY:
 * min|x|, 0: the count of nonzeros. Always float32. The gradient is 0 where x = 0 or the norm is
 * 0, and split evenly between ties for ±INFINITY. */
ml_tensor *ml_norm(ml_tensor *a, double p, int dim, bool keepdim);

/* ---- scans ---- */
/* Running sum along dim: out[.., k, ..] = Σ_{j≤k} a[.., j, ..] (double accumulation); int32 stays
 * int32 (an overflow is an error). */
ml_tensor *ml_cumsum(ml_tensor *a, int dim);

/* ---- sorting (stable: equal values keep their order; NaN counts as larger than any number) ---- */
/* values and indices (int32) of a sorted along dim; values are a gather, so they carry gradients. */
ml_status ml_sort(ml_tensor *a, int dim, bool descending, ml_tensor **values, ml_tensor **indices);
ml_tensor *ml_argsort(ml_tensor *a, int dim, bool descending);
/* The k largest (or smallest) along dim, in sorted order: values and int32 indices. */
ml_status ml_topk(ml_tensor *a, int64_t k, int dim, bool largest, ml_tensor **values, ml_tensor **indices);

/* ---- einsum ---- */
/* Einstein summation over n float32 operands: spec like "bld,bmd->blm" (letters a-z, A-Z; "..."
 * for broadcast dims; spaces ignored). Without "->" the output is the labels used once, in
 * alphabetical order (uppercase first), after the "..." dims. A label repeated in one operand
 * takes its diagonal; size-1 dims broadcast. Built from permute, reshape, sum and batched
 * matmul (operands contracted left to right), so gradients come from those ops. Errors name
 * the spec as argument 1 and operand i as argument i + 2. */
ml_tensor *ml_einsum(const char *spec, int n, ml_tensor *const *operands);

/* ---- linear algebra (mechlab's own products, gemm.c: an element's bits do not depend on the rows,
 * columns or threads beside it; transposed views are read in place, not copied) ---- */
/* PyTorch matmul semantics: 1-D·1-D dot, 2-D·2-D, batched with broadcasting of batch dims. */
ml_tensor *ml_matmul(ml_tensor *a, ml_tensor *b);
/* y = x·Wᵀ + bias over the last dim; x (..., in), W (out, in), bias (out) or NULL. Forward
 * mlk_gemm_nt, input gradient mlk_gemm_nn, weight gradient mlk_gemm_tn (kernels.h), not sgemm. */
ml_tensor *ml_linear(ml_tensor *x, ml_tensor *w, ml_tensor *bias);
/* The precision of ml_linear's products (and of attention's per-sequence products, nn_ops.h) on
 * the calling thread (docs/kernels.md, "bf16 training"):
 * fp32 (the default), or bf16 (x and W rounded to bf16, fp32 accumulation and result, on
 * AVX512_BF16: the forward, dX and dW; a CPU without it fails the op with MLK_BF16_MISSING). A
 * model's forward sets it for its duration (nn/model.h, ml_model_precision_enter); each linear
 * node records the precision of its forward, and its backward runs in that one whenever it runs.
 * ml_set_linear_precision returns the previous precision, to be set back. */
typedef enum { ML_PRECISION_FP32 = 0, ML_PRECISION_BF16 = 1 } ml_precision;
ml_precision ml_linear_precision(void);
ml_precision ml_set_linear_precision(ml_precision p);

/* ---- softmax ---- */
ml_tensor *ml_softmax(ml_tensor *a, int dim);
ml_tensor *ml_log_softmax(ml_tensor *a, int dim);

/* ---- indexing ---- */
ml_tensor *ml_gather(ml_tensor *a, int dim, ml_tensor *index);       /* index int32, same ndim */
ml_tensor *ml_index_select(ml_tensor *a, int dim, ml_tensor *index); /* index int32 1-D */
/* out = a with src added at index along dim (functional; differentiable in a and src). */
ml_tensor *ml_scatter_add(ml_tensor *a, int dim, ml_tensor *index, ml_tensor *src);
/* Embedding lookup: weight (V, D), ids int32 any shape -> (..., D); backward scatter-adds. */
ml_tensor *ml_embedding(ml_tensor *weight, ml_tensor *ids);

/* ---- joining and splitting ---- */
ml_tensor *ml_cat(int n, ml_tensor *const *ts, int dim);
ml_tensor *ml_stack(int n, ml_tensor *const *ts, int dim);
/* Splits into pieces of `size` along dim (last may be smaller); fills out[], returns count or -1. */
int ml_split_tensor(ml_tensor *a, int64_t size, int dim, ml_tensor **out, int max_out);

#endif
