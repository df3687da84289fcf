/* Generic ops: values against hand-computed or closed-form results, finite-difference gradient
 * checks of every differentiable op (broadcasting, non-contiguous views, ops used twice), and
 * every error path with its message. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "testutil.h"

/* ------------------------------------------------------------------ helpers */

static ml_tensor *vec_f(int nd, const int64_t *shape, const float *v) { return ml_from_f32(nd, shape, v); }
#define TF(shape, ...) vec_f((int)(sizeof(int64_t[])shape / sizeof(int64_t)), (int64_t[])shape, (float[]){__VA_ARGS__})
#define TI(shape, ...)                                                                                                \
    ml_from_i32((int)(sizeof(int64_t[])shape / sizeof(int64_t)), (int64_t[])shape, (int32_t[]){__VA_ARGS__})
#define SH(...) \
    { __VA_ARGS__ }

static void drop_all(ml_tensor **ts, size_t n) {
    for (size_t i = 0; i < n; i++) ml_release(ts[i]);
}
#define DROP(...) drop_all((ml_tensor *[]){__VA_ARGS__}, sizeof((ml_tensor *[]){__VA_ARGS__}) / sizeof(ml_tensor *))

/* Random normal tensor of the given shape that requires grad (seeded). */
static ml_tensor *rn(uint64_t seed, int nd, ...) {
    int64_t shape[ML_MAX_DIMS];
    va_list ap;
    va_start(ap, nd);
    for (int i = 0; i < nd; i++) shape[i] = va_arg(ap, int);
    va_end(ap);
    ml_rng r;
    ml_rng_init(&r, seed, 77);
    ml_tensor *t = ml_normal(nd, shape, 0.0, 1.0, &r);
    ck_assert_ptr_nonnull(t);
    ml_set_requires_grad(t, true);
    return t;
}

/* Moves values within `gap` of `point` away from it (kinks of relu/abs/clamp). */
static ml_tensor *away(ml_tensor *t, float point, float gap) {
    float *p = ml_f32(t);
    for (int64_t i = 0; i < ml_numel(t); i++)
        if (fabsf(p[i] - point) < gap) p[i] = point + (p[i] < point ? -gap : gap);
    return t;
}

/* Values spread on a grid of `step` in a shuffled order: no ties, none within step of another. */
static ml_tensor *spaced(uint64_t seed, float step, float shift, int nd, const int64_t *shape) {
    ml_tensor *t = ml_empty(ML_F32, nd, shape);
    int64_t n = ml_numel(t);
    int32_t *perm = malloc((size_t)n * sizeof *perm);
    for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
    ml_rng r;
    ml_rng_init(&r, seed, 5);
    ml_rng_shuffle_i32(&r, perm, n);
    for (int64_t i = 0; i < n; i++) ml_f32(t)[i] = (float)(perm[i] - n / 2) * step + shift;
    free(perm);
    ml_set_requires_grad(t, true);
    return t;
}

static ml_tensor *positive(ml_tensor *t, float lo) {
    float *p = ml_f32(t);
    for (int64_t i = 0; i < ml_numel(t); i++) p[i] = fabsf(p[i]) + lo;
    return t;
}

static void expect_vals(const ml_tensor *t, int64_t n, const double *want, double tol) {
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(ml_numel(t), n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(ml_get_flat(t, i) - want[i]) <= tol * (1 + fabs(want[i])) ||
                          (isnan(want[i]) && isnan(ml_get_flat(t, i))),
                      "element %lld: got %.9g, expected %.9g", (long long)i, ml_get_flat(t, i), want[i]);
}
#define EXPECT(t, ...)                                                                                                \
    expect_vals((t), (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__}, 1e-6)

static void expect_shape(const ml_tensor *t, int nd, const int64_t *shape) {
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ndim, nd);
    for (int i = 0; i < nd; i++) ck_assert_int_eq(t->shape[i], shape[i]);
}
#define EXPECT_SHAPE(t, ...) \
    expect_shape((t), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
#define EXPECT_SCALAR_SHAPE(t) expect_shape((t), 0, NULL)

/* The call returned NULL and the error message contains `msg`. */
static void expect_err_(const void *p, const char *msg, const char *what) {
    ck_assert_msg(p == NULL, "%s: expected an error containing \"%s\", got a result", what, msg);
    ck_assert_msg(strstr(ml_last_error(), msg) != NULL, "%s: error \"%s\" does not contain \"%s\"", what,
                  ml_last_error(), msg);
}
#define EXPECT_ERR(call, msg) expect_err_((call), (msg), #call)

/* Gradient check of fn on inputs (released afterwards). */
static void run_gc(const char *what, ml_gradcheck_fn fn, void *ud, int n, ml_tensor **in) {
    ml_status st = ml_gradcheck(fn, ud, n, in, 1e-3, 3e-3, 2e-2);
    ck_assert_msg(st == ML_OK, "%s: %s", what, ml_last_error());
    for (int i = 0; i < n; i++) ml_release(in[i]);
}
#define GC_UD(fn, ud, ...)                                                                                            \
    do {                                                                                                              \
        ml_tensor *_in[] = {__VA_ARGS__};                                                                             \
        run_gc(#fn, fn, (ud), (int)(sizeof _in / sizeof *_in), _in);                                                  \
    } while (0)
#define GC(fn, ...) GC_UD(fn, NULL, __VA_ARGS__)
#define GFN(name, ...) \
    static ml_tensor *name(void *ud, ml_tensor **x) { \
        (void)ud;                                      \
        __VA_ARGS__                                    \
    }

/* ------------------------------------------------------------------ the gradient checker itself can fail */

static ml_status wrong_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    gin[0] = ml_binary_scalar(ML_MUL, g, 2.0); /* deliberately twice the true gradient */
    return gin[0] ? ML_OK : ML_ERR_MEM;
}

/* right everywhere except at the last element */
static ml_status wrong_last_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    gin[0] = ml_clone(g);
    if (gin[0]) ml_f32(gin[0])[ml_numel(g) - 1] *= 2;
    return gin[0] ? ML_OK : ML_ERR_MEM;
}

/* the identity with a wrong backward: twice the gradient, or (ud non-NULL) twice at the last element */
GFN(g_wrong, {
    ml_tensor *out = ml_clone(x[0]);
    ml_tensor *fresh = ml_detach(out);
    ml_release(out);
    if (ml_needs_grad(x[0])) ml_attach(fresh, ml_node_new("Wrong", ud ? wrong_last_backward : wrong_backward, 1, x));
    return fresh;
})

START_TEST(gradcheck_catches_a_wrong_backward) {
    ml_tensor *x = rn(1, 1, 4);
    ml_status st = ml_gradcheck(g_wrong, NULL, 1, &x, 1e-3, 1e-3, 1e-2);
    ck_assert_int_ne(st, ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "analytic"));
    ml_release(x);
    /* the sampled check (elements 0, 500, 1000 here) reaches the last element */
    x = rn(1, 1, 1001);
    ck_assert_int_ne(ml_gradcheck_sampled(g_wrong, "last", 1, &x, 1e-3, 1e-3, 1e-2, 3), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "element 1000"));
    ck_assert_int_ne(ml_gradcheck_sampled(g_wrong, "last", 1, &x, 1e-3, 1e-3, 1e-2, 1), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "max_per_input"));
    ml_release(x);
}
END_TEST

/* ------------------------------------------------------------------ elementwise values */

START_TEST(binary_values_and_broadcasting) {
    ml_tensor *a = TF(SH(2, 3), 1, 2, 3, 4, 5, 6), *b = TF(SH(3), 10, 20, 30), *c = TF(SH(2, 1), 2, 4);
    ml_tensor *r;
    r = ml_add(a, b);
    EXPECT_SHAPE(r, 2, 3);
    EXPECT(r, 11, 22, 33, 14, 25, 36);
    ml_release(r);
    r = ml_sub(b, a);
    EXPECT(r, 9, 18, 27, 6, 15, 24);
    ml_release(r);
    r = ml_mul(c, b); /* [2,1] x [3] -> [2,3] */
    EXPECT_SHAPE(r, 2, 3);
    EXPECT(r, 20, 40, 60, 40, 80, 120);
    ml_release(r);
    r = ml_div(a, c);
    EXPECT(r, 0.5, 1, 1.5, 1, 1.25, 1.5);
    ml_release(r);
    r = ml_binary(ML_POW, c, b);
    EXPECT(r, pow(2, 10), pow(2, 20), pow(2, 30), pow(4, 10), pow(4, 20), pow(4, 30));
    ml_release(r);
    r = ml_binary_scalar(ML_SUB, a, 1.5);
    EXPECT(r, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5);
    ml_release(r);
    r = ml_scalar_binary(ML_SUB, 1.0, a);
    EXPECT(r, 0, -1, -2, -3, -4, -5);
    ml_release(r);
    r = ml_scalar_binary(ML_DIV, 12.0, a);
    EXPECT(r, 12, 6, 4, 3, 2.4, 2);
    ml_release(r);
    r = ml_binary_scalar(ML_POW, a, 2.0);
    EXPECT(r, 1, 4, 9, 16, 25, 36);
    ml_release(r);
    r = ml_binary_scalar(ML_MAXIMUM, a, 3.5);
    EXPECT(r, 3.5, 3.5, 3.5, 4, 5, 6);
    ml_release(r);
    r = ml_binary_scalar(ML_MINIMUM, a, 3.5);
    EXPECT(r, 1, 2, 3, 3.5, 3.5, 3.5);
    ml_release(r);
    DROP(a, b, c);
}
END_TEST

START_TEST(binary_noncontiguous_and_nan) {
    ml_tensor *a = TF(SH(2, 3), 1, 2, 3, 4, 5, 6);
    ml_tensor *t = ml_transpose(a, 0, 1); /* [3,2]: 1 4 / 2 5 / 3 6 */
    ml_tensor *s = ml_slice(a, 1, 0, 3, 2); /* [2,2]: 1 3 / 4 6 */
    ml_tensor *r = ml_add(t, t);
    EXPECT(r, 2, 8, 4, 10, 6, 12);
    ml_release(r);
    r = ml_mul(s, s);
    EXPECT(r, 1, 9, 16, 36);
    ml_release(r);
    ml_tensor *n = TF(SH(2), NAN, 1), *m = TF(SH(2), 0, NAN);
    r = ml_binary(ML_MAXIMUM, n, m);
    ck_assert(isnan(ml_get_flat(r, 0)) && isnan(ml_get_flat(r, 1)));
    ml_release(r);
    r = ml_binary(ML_MINIMUM, n, m);
    ck_assert(isnan(ml_get_flat(r, 0)) && isnan(ml_get_flat(r, 1)));
    ml_release(r);
    DROP(a, t, s, n, m);
}
END_TEST

/* Random shapes, broadcast patterns and layouts against a per-element reference through ml_get. */
START_TEST(binary_broadcast_property) {
    ml_rng r;
    ml_rng_init(&r, 2024, 9);
    ml_binop ops[] = {ML_ADD, ML_SUB, ML_MUL, ML_DIV, ML_MAXIMUM, ML_LT};
    for (int trial = 0; trial < 300; trial++) {
        int nd = 1 + (int)ml_rng_below(&r, 4);
        int64_t full[4], sa[4], sb[4];
        for (int d = 0; d < nd; d++) full[d] = 1 + ml_rng_below(&r, 3);
        int na = nd - (int)ml_rng_below(&r, 2), nb = nd - (int)ml_rng_below(&r, 2); /* maybe fewer dims */
        if (na < nd && nb < nd) na = nd;
        for (int d = 0; d < na; d++) sa[d] = ml_rng_below(&r, 3) ? full[nd - na + d] : 1;
        for (int d = 0; d < nb; d++) sb[d] = ml_rng_below(&r, 3) ? full[nd - nb + d] : 1;
        ml_tensor *a = ml_normal(na, sa, 0, 1, &r), *b = ml_normal(nb, sb, 0, 1, &r);
        ml_tensor *av = ml_retain(a), *bv = ml_retain(b);
        if (na >= 2 && ml_rng_below(&r, 2)) { /* same logical values through a transposed copy's view */
            ml_tensor *t = ml_transpose(a, 0, na - 1), *c = ml_contiguous(t);
            ml_release(av);
            av = ml_transpose(c, 0, na - 1);
            DROP(t, c);
        }
        ml_binop op = ops[ml_rng_below(&r, 6)];
        ml_tensor *out = ml_binary(op, av, bv);
        ck_assert_ptr_nonnull(out);
        ck_assert_int_eq(out->ndim, nd);
        int64_t idx[4], ia[4], ib[4];
        for (int64_t k = 0; k < ml_numel(out); k++) {
            int64_t rem = k;
            for (int d = nd - 1; d >= 0; d--) idx[d] = rem % out->shape[d], rem /= out->shape[d];
            for (int d = 0; d < na; d++) ia[d] = sa[d] == 1 ? 0 : idx[nd - na + d];
            for (int d = 0; d < nb; d++) ib[d] = sb[d] == 1 ? 0 : idx[nd - nb + d];
            double x = ml_get(a, ia), y = ml_get(b, ib), want;
            switch (op) {
            case ML_ADD: want = (float)x + (float)y; break;
            case ML_SUB: want = (float)x - (float)y; break;
            case ML_MUL: want = (float)x * (float)y; break;
            case ML_DIV: want = (float)x / (float)y; break;
            case ML_MAXIMUM: want = x > y ? x : y; break;
            default: want = x < y; break;
            }
            ck_assert_msg(ml_get_flat(out, k) == (double)(float)want, "trial %d op %s element %lld: %g vs %g", trial,
                          ml_binop_name(op), (long long)k, ml_get_flat(out, k), want);
        }
        DROP(a, b, av, bv, out);
    }
}
END_TEST

/* Reductions of random shapes along every dim against a double-precision reference. */
START_TEST(reduction_property) {
    ml_rng r;
    ml_rng_init(&r, 77, 9);
    for (int trial = 0; trial < 100; trial++) {
        int nd = 1 + (int)ml_rng_below(&r, 3);
        int64_t shape[3];
        for (int d = 0; d < nd; d++) shape[d] = 1 + ml_rng_below(&r, 4);
        ml_tensor *a = ml_normal(nd, shape, 0, 1, &r);
        int dim = (int)ml_rng_below(&r, (uint32_t)nd);
        ml_tensor *s = ml_reduce(ML_SUM, a, dim, true), *m = ml_reduce(ML_MAX, a, dim, true);
        ml_tensor *am = ml_reduce(ML_ARGMAX, a, dim, true), *v = ml_var(a, dim, true, 0);
        for (int64_t k = 0; k < ml_numel(s); k++) {
            int64_t idx[3], rem = k;
            for (int d = nd - 1; d >= 0; d--) idx[d] = rem % s->shape[d], rem /= s->shape[d];
            double sum = 0, sq = 0, best = -INFINITY;
            int64_t bi = 0;
            for (int64_t j = 0; j < shape[dim]; j++) {
                idx[dim] = j;
                double x = ml_get(a, idx);
                sum += x;
                sq += x * x;
                if (x > best) best = x, bi = j;
            }
            double mean = sum / (double)shape[dim];
            ck_assert_close(ml_get_flat(s, k), sum, 1e-5, 1e-6);
            ck_assert_close(ml_get_flat(m, k), best, 0, 0);
            ck_assert_int_eq((int64_t)ml_get_flat(am, k), bi);
            ck_assert_close(ml_get_flat(v, k), sq / (double)shape[dim] - mean * mean, 1e-5, 1e-4);
        }
        DROP(a, s, m, am, v);
    }
}
END_TEST

START_TEST(comparisons_give_int_masks) {
    ml_tensor *a = TF(SH(4), 1, 2, 3, NAN), *b = TF(SH(4), 2, 2, 2, 2);
    ml_binop ops[] = {ML_EQ, ML_NE, ML_LT, ML_LE, ML_GT, ML_GE};
    double want[6][4] = {{0, 1, 0, 0}, {1, 0, 1, 1}, {1, 0, 0, 0}, {1, 1, 0, 0}, {0, 0, 1, 0}, {0, 1, 1, 0}};
    for (int k = 0; k < 6; k++) {
        ml_tensor *r = ml_binary(ops[k], a, b);
        ck_assert_int_eq(r->dtype, ML_I32);
        expect_vals(r, 4, want[k], 0);
        ml_release(r);
    }
    ml_tensor *i = TI(SH(3), 1, 2, 3);
    ml_tensor *r = ml_binary_scalar(ML_GE, i, 2);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 0, 1, 1);
    ml_release(r);
    /* requires_grad inputs: comparisons record nothing */
    ml_set_requires_grad(a, true);
    r = ml_binary(ML_LT, a, b);
    ck_assert_ptr_null(r->grad_fn);
    ml_release(r);
    DROP(a, b, i);
}
END_TEST

START_TEST(int_arithmetic) {
    ml_tensor *a = TI(SH(3), 7, -8, 9), *b = TI(SH(3), 2, 3, -4);
    ml_tensor *r = ml_add(a, b);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 9, -5, 5);
    ml_release(r);
    r = ml_sub(a, b);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 5, -11, 13);
    ml_release(r);
    r = ml_mul(a, b);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 14, -24, -36);
    ml_release(r);
    r = ml_binary(ML_MAXIMUM, a, b);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 7, 3, 9);
    ml_release(r);
    r = ml_binary(ML_MINIMUM, a, b);
    EXPECT(r, 2, -8, -4);
    ml_release(r);
    r = ml_div(a, b); /* true division */
    ck_assert_int_eq(r->dtype, ML_F32);
    EXPECT(r, 3.5, -8.0 / 3.0, -2.25);
    ml_release(r);
    r = ml_binary_scalar(ML_MUL, a, 2);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 14, -16, 18);
    ml_release(r);
    r = ml_binary_scalar(ML_ADD, a, 0.5);
    ck_assert_int_eq(r->dtype, ML_F32);
    EXPECT(r, 7.5, -7.5, 9.5);
    ml_release(r);
    ml_tensor *f = TF(SH(3), 0.5, 0.5, 0.5);
    r = ml_add(a, f); /* mixed promotes */
    ck_assert_int_eq(r->dtype, ML_F32);
    EXPECT(r, 7.5, -7.5, 9.5);
    ml_release(r);
    r = ml_unary(ML_NEG, a);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, -7, 8, -9);
    ml_release(r);
    r = ml_unary(ML_ABS, a);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 7, 8, 9);
    ml_release(r);
    r = ml_unary(ML_EXP, b); /* non-integer maps promote */
    ck_assert_int_eq(r->dtype, ML_F32);
    EXPECT(r, exp(2), exp(3), exp(-4));
    ml_release(r);
    ml_tensor *big = TI(SH(1), INT32_MAX);
    r = ml_binary_scalar(ML_ADD, big, 1); /* wraps, no undefined behaviour */
    EXPECT(r, (double)INT32_MIN);
    ml_release(r);
    /* int32 tensors never require grad */
    ck_assert_int_ne(ml_set_requires_grad(a, true), ML_OK);
    DROP(a, b, f, big);
}
END_TEST

START_TEST(unary_values) {
    float xs[] = {-2.5f, -0.5f, 0.0f, 0.7f, 3.0f};
    ml_tensor *x = ml_from_f32(1, (int64_t[]){5}, xs);
    for (int op = ML_NEG; op <= ML_COS; op++) {
        ml_tensor *r = ml_unary((ml_unop)op, x);
        ck_assert_ptr_nonnull(r);
        for (int i = 0; i < 5; i++) {
            double v = xs[i], w;
            switch (op) {
            case ML_NEG: w = -v; break;
            case ML_EXP: w = exp(v); break;
            case ML_LOG: w = log(v); break;
            case ML_SQRT: w = sqrt(v); break;
            case ML_ABS: w = fabs(v); break;
            case ML_TANH: w = tanh(v); break;
            case ML_SIGMOID: w = 1 / (1 + exp(-v)); break;
            case ML_RELU: w = v > 0 ? v : 0; break;
            case ML_GELU: w = 0.5 * v * (1 + erf(v / sqrt(2.0))); break;
            case ML_SILU: w = v / (1 + exp(-v)); break;
            case ML_SOFTPLUS: w = log1p(exp(v)); break;
            case ML_SIN: w = sin(v); break;
            default: w = cos(v); break;
            }
            double got = ml_get_flat(r, i);
            if (isinf(w)) ck_assert_msg(got == w, "%s(%g) = %g, expected %g", ml_unop_name(op), v, got, w);
            else if (isnan(w)) ck_assert_msg(isnan(got), "%s(%g) = %g, expected NaN", ml_unop_name(op), v, got);
            else ck_assert_msg(fabs(got - w) <= 1e-6 * (1 + fabs(w)), "%s(%g) = %.9g, expected %.9g",
                               ml_unop_name(op), v, got, w);
        }
        ml_release(r);
    }
    /* closed forms and extremes */
    ml_tensor *e = TF(SH(4), 1, 30, -100, 100);
    ml_tensor *r = ml_unary(ML_GELU, e);
    ck_assert_close(ml_get_flat(r, 0), 0.8413447460685429, 1e-6, 0);
    ml_release(r);
    r = ml_unary(ML_SOFTPLUS, e); /* above the threshold 20: x itself */
    ck_assert_float_eq(ml_get_flat(r, 1), 30.0);
    ck_assert_float_eq(ml_get_flat(r, 3), 100.0);
    ml_release(r);
    r = ml_unary(ML_SIGMOID, e);
    ck_assert(ml_get_flat(r, 2) >= 0 && ml_get_flat(r, 2) < 1e-40);
    ck_assert_float_eq(ml_get_flat(r, 3), 1.0);
    ml_release(r);
    DROP(x, e);
}
END_TEST

START_TEST(clamp_and_where_values) {
    ml_tensor *a = TF(SH(5), -2, -1, 0, 1, 2);
    ml_tensor *r = ml_clamp(a, -1, 1);
    EXPECT(r, -1, -1, 0, 1, 1);
    ml_release(r);
    r = ml_clamp(a, NAN, 0.5);
    EXPECT(r, -2, -1, 0, 0.5, 0.5);
    ml_release(r);
    r = ml_clamp(a, 0.5, NAN);
    EXPECT(r, 0.5, 0.5, 0.5, 1, 2);
    ml_release(r);
    r = ml_clamp(a, 1, -1); /* lo > hi: hi everywhere, as PyTorch */
    EXPECT(r, -1, -1, -1, -1, -1);
    ml_release(r);
    ml_tensor *i = TI(SH(3), -5, 0, 5);
    r = ml_clamp(i, -1, 1);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, -1, 0, 1);
    ml_release(r);

    ml_tensor *c = TI(SH(2, 1), 1, 0), *x = TF(SH(3), 1, 2, 3), *y = TF(SH(2, 3), 10, 20, 30, 40, 50, 60);
    r = ml_where(c, x, y);
    EXPECT_SHAPE(r, 2, 3);
    EXPECT(r, 1, 2, 3, 40, 50, 60);
    ml_release(r);
    ml_tensor *fc = TF(SH(3), 0.0, 0.5, -1);
    r = ml_where(fc, x, y);
    EXPECT(r, 10, 2, 3, 40, 2, 3);
    ml_release(r);
    ml_tensor *ia = TI(SH(1), 7), *ib = TI(SH(1), 9);
    r = ml_where(c, ia, ib);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 7, 9);
    ml_release(r);
    DROP(a, i, c, x, y, fc, ia, ib);
}
END_TEST

/* ------------------------------------------------------------------ reductions */

START_TEST(reduction_values) {
    ml_tensor *a = TF(SH(2, 3), 1, 5, 3, 4, 2, 6);
    ml_tensor *r;
    r = ml_reduce(ML_SUM, a, 0, false);
    EXPECT_SHAPE(r, 3);
    EXPECT(r, 5, 7, 9);
    ml_release(r);
    r = ml_reduce(ML_SUM, a, -1, true);
    EXPECT_SHAPE(r, 2, 1);
    EXPECT(r, 9, 12);
    ml_release(r);
    r = ml_reduce(ML_SUM, a, ML_ALL_DIMS, false);
    EXPECT_SCALAR_SHAPE(r);
    EXPECT(r, 21);
    ml_release(r);
    r = ml_reduce(ML_MEAN, a, ML_ALL_DIMS, true);
    EXPECT_SHAPE(r, 1, 1);
    EXPECT(r, 3.5);
    ml_release(r);
    r = ml_reduce(ML_MEAN, a, 1, false);
    EXPECT(r, 3, 4);
    ml_release(r);
    r = ml_reduce(ML_MAX, a, 1, false);
    EXPECT(r, 5, 6);
    ml_release(r);
    r = ml_reduce(ML_ARGMAX, a, 1, false);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 1, 2);
    ml_release(r);
    r = ml_reduce(ML_MIN, a, 0, true);
    EXPECT_SHAPE(r, 1, 3);
    EXPECT(r, 1, 2, 3);
    ml_release(r);
    r = ml_reduce(ML_ARGMIN, a, 0, false);
    EXPECT(r, 0, 1, 0);
    ml_release(r);
    r = ml_reduce(ML_ARGMAX, a, ML_ALL_DIMS, false);
    EXPECT(r, 5);
    ml_release(r);
    r = ml_var(a, 1, false, 1); /* rows 1 5 3 -> 4 ; 4 2 6 -> 4 */
    EXPECT(r, 4, 4);
    ml_release(r);
    r = ml_var(a, 1, false, 0);
    EXPECT(r, 8.0 / 3, 8.0 / 3);
    ml_release(r);
    r = ml_reduce(ML_VAR, a, ML_ALL_DIMS, false); /* mean 3.5, ss = 17.5 */
    EXPECT(r, 17.5 / 5);
    ml_release(r);
    ml_tensor *one = TF(SH(1), 3);
    r = ml_var(one, 0, false, 1); /* no degrees of freedom */
    ck_assert(isnan(ml_get_flat(r, 0)));
    ml_release(r);
    /* ties: the first index; NaN propagates */
    ml_tensor *t = TF(SH(4), 2, 7, 7, 1), *n = TF(SH(3), 1, NAN, 3);
    r = ml_reduce(ML_ARGMAX, t, 0, false);
    EXPECT(r, 1);
    ml_release(r);
    r = ml_reduce(ML_MAX, n, 0, false);
    ck_assert(isnan(ml_get_flat(r, 0)));
    ml_release(r);
    /* a reduced dim of a non-contiguous view */
    ml_tensor *tr = ml_transpose(a, 0, 1);
    r = ml_reduce(ML_SUM, tr, 1, false);
    EXPECT(r, 5, 7, 9);
    ml_release(r);
    /* int32 */
    ml_tensor *i = TI(SH(2, 2), 1, 2, 3, 4);
    r = ml_reduce(ML_SUM, i, 0, false);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 4, 6);
    ml_release(r);
    r = ml_reduce(ML_MEAN, i, ML_ALL_DIMS, false);
    ck_assert_int_eq(r->dtype, ML_F32);
    EXPECT(r, 2.5);
    ml_release(r);
    r = ml_reduce(ML_MAX, i, 1, false);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 2, 4);
    ml_release(r);
    /* empty: sum 0, mean NaN */
    ml_tensor *e = ml_zeros(ML_F32, 2, (int64_t[]){2, 0});
    r = ml_reduce(ML_SUM, e, 1, false);
    EXPECT(r, 0, 0);
    ml_release(r);
    r = ml_reduce(ML_MEAN, e, ML_ALL_DIMS, false);
    ck_assert(isnan(ml_get_flat(r, 0)));
    ml_release(r);
    /* 0-dim input */
    ml_tensor *s = ml_scalar(ML_F32, 4);
    r = ml_reduce(ML_SUM, s, 0, false);
    EXPECT_SCALAR_SHAPE(r);
    EXPECT(r, 4);
    ml_release(r);
    r = ml_sum_all(a);
    EXPECT(r, 21);
    ml_release(r);
    DROP(a, one, t, n, tr, i, e, s);
}
END_TEST

/* ------------------------------------------------------------------ matmul & linear */

/* Reference product of logical matrices through ml_get (any layout). */
static void naive_mm(const ml_tensor *a, const ml_tensor *b, double *out) {
    int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t q = 0; q < k; q++) s += ml_get(a, (int64_t[]){i, q}) * ml_get(b, (int64_t[]){q, j});
            out[i * n + j] = s;
        }
}

START_TEST(matmul_values_and_shapes) {
    ml_tensor *a = TF(SH(2, 3), 1, 2, 3, 4, 5, 6), *b = TF(SH(3, 2), 7, 8, 9, 10, 11, 12);
    ml_tensor *r = ml_matmul(a, b);
    EXPECT_SHAPE(r, 2, 2);
    EXPECT(r, 58, 64, 139, 154);
    ml_release(r);
    ml_tensor *v = TF(SH(3), 1, 0, -1), *w = TF(SH(2), 1, 2);
    r = ml_matmul(v, v);
    EXPECT_SCALAR_SHAPE(r);
    EXPECT(r, 2);
    ml_release(r);
    r = ml_matmul(a, v); /* [2,3]·[3] -> [2] */
    EXPECT_SHAPE(r, 2);
    EXPECT(r, -2, -2);
    ml_release(r);
    r = ml_matmul(w, a); /* [2]·[2,3] -> [3] */
    EXPECT_SHAPE(r, 3);
    EXPECT(r, 9, 12, 15);
    ml_release(r);
    /* batched with broadcasting: [2,1,2,3] @ [4,3,2] -> [2,4,2,2] */
    ml_tensor *A = rn(3, 4, 2, 1, 2, 3), *B = rn(4, 3, 4, 3, 2);
    r = ml_matmul(A, B);
    EXPECT_SHAPE(r, 2, 4, 2, 2);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++) {
            ml_tensor *ai = ml_select(A, 0, i), *ai0 = ml_select(ai, 0, 0), *bj = ml_select(B, 0, j);
            ml_tensor *ri = ml_select(r, 0, i), *rij = ml_select(ri, 0, j);
            double want[4];
            naive_mm(ai0, bj, want);
            for (int q = 0; q < 4; q++) ck_assert_close(ml_get_flat(rij, q), want[q], 1e-5, 1e-5);
            DROP(ai, ai0, bj, ri, rij);
        }
    ml_release(r);
    /* 1-D with batched: [3] @ [4,3,2] -> [4,2] and [4,3,2]ᵀ... */
    r = ml_matmul(v, B);
    EXPECT_SHAPE(r, 4, 2);
    ml_release(r);
    ml_tensor *u = TF(SH(2), 1, 1);
    r = ml_matmul(B, u);
    EXPECT_SHAPE(r, 4, 3);
    ml_release(r);
    /* an empty inner dim gives zeros, not uninitialised memory */
    ml_tensor *e1 = ml_full(ML_F32, 2, (int64_t[]){2, 0}, 1), *e2 = ml_full(ML_F32, 2, (int64_t[]){0, 3}, 1);
    r = ml_matmul(e1, e2);
    EXPECT_SHAPE(r, 2, 3);
    EXPECT(r, 0, 0, 0, 0, 0, 0);
    ml_release(r);
    ml_tensor *bias = TF(SH(3), 1, 2, 3), *wt = ml_transpose(e2, 0, 1);
    r = ml_linear(e1, wt, bias);
    EXPECT(r, 1, 2, 3, 1, 2, 3);
    ml_release(r);
    r = ml_linear(e1, wt, NULL);
    EXPECT(r, 0, 0, 0, 0, 0, 0);
    ml_release(r);
    DROP(a, b, v, w, A, B, u, e1, e2, bias, wt);
}
END_TEST

/* r (batch, m, n) equals the naive product of a and b batch by batch (any layouts). */
static void check_batched(const ml_tensor *r, ml_tensor *a, ml_tensor *b, const char *what) {
    for (int64_t t = 0; t < r->shape[0]; t++) {
        ml_tensor *at = ml_select(a, 0, t), *bt = ml_select(b, 0, t), *rt = ml_select((ml_tensor *)r, 0, t);
        double want[64];
        naive_mm(at, bt, want);
        for (int64_t q = 0; q < ml_numel(rt); q++)
            ck_assert_msg(fabs(ml_get_flat(rt, q) - want[q]) <= 1e-4, "%s: batch %lld element %lld: %g vs %g", what,
                          (long long)t, (long long)q, ml_get_flat(rt, q), want[q]);
        DROP(at, bt, rt);
    }
}

START_TEST(matmul_layouts_agree) {
    /* every layout sgemm can read directly, and the ones it cannot, give the naive product */
    ml_tensor *X = rn(5, 3, 3, 6, 5), *Y = rn(6, 3, 3, 5, 4);
    ml_tensor *P = rn(7, 3, 3, 5, 6), *Q = rn(8, 3, 3, 4, 5), *X2 = rn(9, 3, 3, 12, 5), *Y2 = rn(10, 3, 3, 5, 8);
    ml_tensor *Xt = ml_transpose(P, 1, 2);   /* [3,6,5] read with Trans */
    ml_tensor *Yt = ml_transpose(Q, 1, 2);   /* [3,5,4] read with Trans */
    ml_tensor *Xs = ml_slice(X2, 1, 0, 12, 2); /* [3,6,5], row stride 10 */
    ml_tensor *Ys = ml_slice(Y2, 2, 0, 8, 2);  /* [3,5,4], column stride 2: copied */
    ml_tensor *Y1 = ml_select(Y, 0, 1);
    ml_tensor *Ye = ml_expand(Y1, 3, (int64_t[]){3, 5, 4}); /* batch stride 0: one folded sgemm */
    ml_tensor *A[] = {X, Xt, X, Xs, Xs, X, Xt, Xs};
    ml_tensor *B[] = {Y, Y, Yt, Y, Ys, Ye, Ye, Ye};
    for (int p = 0; p < 8; p++) {
        ml_tensor *r = ml_matmul(A[p], B[p]);
        EXPECT_SHAPE(r, 3, 6, 4);
        char what[32];
        snprintf(what, sizeof what, "pair %d", p);
        check_batched(r, A[p], B[p], what);
        ml_release(r);
    }
    /* a 2-D right operand broadcast over the batch, and a transposed 2-D one */
    ml_tensor *r = ml_matmul(X, Y1), *Y1t = ml_transpose(Q, 1, 2), *r2 = ml_matmul(Xs, Y1);
    check_batched(r, X, Ye, "2-D rhs");
    check_batched(r2, Xs, Ye, "2-D rhs, strided lhs");
    DROP(r, r2, Y1t, X, Y, P, Q, X2, Y2, Xt, Yt, Xs, Ys, Y1, Ye);
}
END_TEST

START_TEST(linear_values) {
    ml_tensor *x = TF(SH(2, 3), 1, 2, 3, 4, 5, 6), *w = TF(SH(2, 3), 1, 0, 0, 0, 1, 1), *b = TF(SH(2), 10, 20);
    ml_tensor *r = ml_linear(x, w, b);
    EXPECT_SHAPE(r, 2, 2);
    EXPECT(r, 11, 25, 14, 31);
    ml_release(r);
    r = ml_linear(x, w, NULL);
    EXPECT(r, 1, 5, 4, 11);
    ml_release(r);
    /* 3-D input, non-contiguous: same as matmul with wᵀ plus bias */
    ml_tensor *X = rn(7, 3, 4, 3, 5), *W = rn(8, 2, 6, 5), *B = rn(9, 1, 6);
    ml_tensor *Xt = ml_transpose(X, 0, 1); /* [3,4,5] */
    ml_tensor *y = ml_linear(Xt, W, B);
    EXPECT_SHAPE(y, 3, 4, 6);
    ml_tensor *Wt = ml_transpose(W, 0, 1), *mm = ml_matmul(Xt, Wt), *ref = ml_add(mm, B);
    ck_assert(ml_allclose(y, ref, 1e-5, 1e-5));
    DROP(x, w, b, X, W, B, Xt, y, Wt, mm, ref);
}
END_TEST

/* ------------------------------------------------------------------ softmax */

START_TEST(softmax_values) {
    ml_tensor *a = TF(SH(2, 3), 1, 2, 3, 1000, 1000, 1000);
    ml_tensor *r = ml_softmax(a, -1);
    double e1 = exp(1), e2 = exp(2), e3 = exp(3), s = e1 + e2 + e3;
    EXPECT(r, e1 / s, e2 / s, e3 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3);
    ml_release(r);
    r = ml_log_softmax(a, 1);
    EXPECT(r, 1 - log(s), 2 - log(s), 3 - log(s), -log(3), -log(3), -log(3));
    ml_release(r);
    r = ml_softmax(a, 0); /* columns: 1 vs 1000 */
    double p = 1 / (1 + exp(999.0));
    expect_vals(r, 6, (double[]){p, p, p, 1 - p, 1 - p, 1 - p}, 1e-6);
    ml_release(r);
    ml_tensor *ninf = TF(SH(3), -INFINITY, 0, 0);
    r = ml_softmax(ninf, 0);
    EXPECT(r, 0, 0.5, 0.5);
    ml_release(r);
    DROP(a, ninf);
}
END_TEST

/* ------------------------------------------------------------------ indexing */

START_TEST(index_values) {
    ml_tensor *a = TF(SH(3, 2), 1, 2, 3, 4, 5, 6);
    ml_tensor *gi = TI(SH(2, 2), 2, 0, 1, 1);
    ml_tensor *r = ml_gather(a, 0, gi); /* out[i][j] = a[gi[i][j]][j] */
    EXPECT_SHAPE(r, 2, 2);
    EXPECT(r, 5, 2, 3, 4);
    ml_release(r);
    ml_tensor *gi1 = TI(SH(3, 1), 1, 0, 1);
    r = ml_gather(a, 1, gi1);
    EXPECT(r, 2, 3, 6);
    ml_release(r);
    ml_tensor *idx = TI(SH(4), 2, 0, 2, 1);
    r = ml_index_select(a, 0, idx);
    EXPECT_SHAPE(r, 4, 2);
    EXPECT(r, 5, 6, 1, 2, 5, 6, 3, 4);
    ml_release(r);
    ml_tensor *idx1 = TI(SH(3), 1, 1, 0);
    r = ml_index_select(a, 1, idx1);
    EXPECT(r, 2, 2, 1, 4, 4, 3, 6, 6, 5);
    ml_release(r);
    ml_tensor *src = TF(SH(2, 2), 10, 20, 30, 40);
    r = ml_scatter_add(a, 0, gi, src); /* a[gi[i][j]][j] += src[i][j] */
    EXPECT(r, 1, 22, 33, 44, 15, 6);
    ml_release(r);
    ml_tensor *ids = TI(SH(2, 2), 2, 0, 0, 1);
    r = ml_embedding(a, ids);
    EXPECT_SHAPE(r, 2, 2, 2);
    EXPECT(r, 5, 6, 1, 2, 1, 2, 3, 4);
    ml_release(r);
    /* int32 tensors can be gathered and selected */
    ml_tensor *ia = TI(SH(3), 7, 8, 9);
    r = ml_index_select(ia, 0, idx1);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 8, 8, 7);
    ml_release(r);
    DROP(a, gi, gi1, idx, idx1, src, ids, ia);
}
END_TEST

START_TEST(sort_topk_values) {
    ml_tensor *a = TF(SH(2, 3), 3, 1, 2, NAN, -1, 5), *v, *i;
    ck_assert_int_eq(ml_sort(a, -1, false, &v, &i), ML_OK);
    EXPECT(v, 1, 2, 3, -1, 5, NAN); /* NaN sorts above every number */
    EXPECT(i, 1, 2, 0, 1, 2, 0);
    ck_assert_int_eq(i->dtype, ML_I32);
    DROP(v, i);
    ck_assert_int_eq(ml_sort(a, 0, true, &v, &i), ML_OK);
    EXPECT(v, NAN, 1, 5, 3, -1, 2);
    EXPECT(i, 1, 0, 1, 0, 1, 0);
    DROP(v, i);
    ml_tensor *ties = TF(SH(5), 1, 2, 1, 2, 0); /* stable: equal values keep their order */
    ml_tensor *r = ml_argsort(ties, 0, false);
    EXPECT(r, 4, 0, 2, 1, 3);
    ml_release(r);
    r = ml_argsort(ties, -1, true);
    EXPECT(r, 1, 3, 0, 2, 4);
    ml_release(r);
    ck_assert_int_eq(ml_topk(a, 2, 1, true, &v, &i), ML_OK);
    EXPECT_SHAPE(v, 2, 2);
    EXPECT(v, 3, 2, NAN, 5);
    EXPECT(i, 0, 2, 0, 2);
    DROP(v, i);
    ck_assert_int_eq(ml_topk(a, 1, 0, false, &v, &i), ML_OK);
    EXPECT_SHAPE(v, 1, 3);
    EXPECT(v, 3, -1, 2);
    EXPECT(i, 0, 1, 0);
    DROP(v, i);
    ck_assert_int_eq(ml_topk(a, 0, 1, true, &v, &i), ML_OK);
    EXPECT_SHAPE(v, 2, 0);
    DROP(v, i);
    ml_tensor *ia = TI(SH(4), 5, -3, 9, 0); /* int32 stays int32 */
    ck_assert_int_eq(ml_sort(ia, 0, false, &v, &i), ML_OK);
    ck_assert_int_eq(v->dtype, ML_I32);
    EXPECT(v, -3, 0, 5, 9);
    DROP(v, i, a, ties, ia);
}
END_TEST

START_TEST(norm_std_cumsum_values) {
    ml_tensor *b = TF(SH(2, 2), 3, -4, 1, 2), *r;
    r = ml_norm(b, 2, ML_ALL_DIMS, false);
    EXPECT_SCALAR_SHAPE(r);
    EXPECT(r, sqrt(30.0));
    ml_release(r);
    r = ml_norm(b, 1, 1, false);
    EXPECT(r, 7, 3);
    ml_release(r);
    r = ml_norm(b, INFINITY, 0, true);
    EXPECT_SHAPE(r, 1, 2);
    EXPECT(r, 3, 4);
    ml_release(r);
    r = ml_norm(b, -INFINITY, ML_ALL_DIMS, false);
    EXPECT(r, 1);
    ml_release(r);
    r = ml_norm(b, 0, -1, false);
    EXPECT(r, 2, 2);
    ml_release(r);
    r = ml_norm(b, 3, 1, false);
    EXPECT(r, cbrt(91.0), cbrt(9.0));
    ml_release(r);
    ml_tensor *ib = TI(SH(2), 3, 4);
    r = ml_norm(ib, 2, 0, false); /* int32 in, float32 out */
    ck_assert_int_eq(r->dtype, ML_F32);
    EXPECT(r, 5);
    ml_release(r);
    r = ml_std(b, 0, false, 1);
    EXPECT(r, sqrt(2.0), sqrt(18.0));
    ml_release(r);
    r = ml_std(b, ML_ALL_DIMS, false, 0);
    EXPECT(r, sqrt(7.25));
    ml_release(r);
    r = ml_cumsum(b, 0);
    EXPECT_SHAPE(r, 2, 2);
    EXPECT(r, 3, -4, 4, -2);
    ml_release(r);
    ml_tensor *bt = ml_transpose(b, 0, 1);
    r = ml_cumsum(bt, -1); /* rows of the transposed view: (3, 1), (-4, 2) */
    EXPECT(r, 3, 4, -4, -2);
    ml_release(r);
    ml_tensor *ic = TI(SH(3), 1, 2, 3);
    r = ml_cumsum(ic, 0);
    ck_assert_int_eq(r->dtype, ML_I32);
    EXPECT(r, 1, 3, 6);
    ml_release(r);
    DROP(b, ib, bt, ic);
}
END_TEST

START_TEST(flatten_values) {
    ml_tensor *a = ml_zeros(ML_F32, 4, (int64_t[]){2, 3, 4, 5}), *r;
    r = ml_flatten(a, 0, -1);
    EXPECT_SHAPE(r, 120);
    ml_release(r);
    r = ml_flatten(a, 1, 2);
    EXPECT_SHAPE(r, 2, 12, 5);
    ml_release(r);
    r = ml_flatten(a, -2, -1);
    EXPECT_SHAPE(r, 2, 3, 20);
    ml_release(r);
    r = ml_flatten(a, 2, 2);
    EXPECT_SHAPE(r, 2, 3, 4, 5);
    ml_release(r);
    ml_tensor *s = ml_scalar(ML_F32, 7);
    r = ml_flatten(s, 0, -1);
    EXPECT_SHAPE(r, 1);
    EXPECT(r, 7);
    DROP(r, a, s);
}
END_TEST

/* einsum against the same contraction written with matmul, transpose and sum */
START_TEST(einsum_values) {
    ml_tensor *x = rn(150, 3, 2, 3, 4), *y = rn(151, 3, 2, 5, 4), *r, *want;
    ml_set_requires_grad(x, false), ml_set_requires_grad(y, false);
    r = ml_einsum("bld,bmd->blm", 2, (ml_tensor *[]){x, y});
    ml_tensor *yt = ml_transpose(y, 1, 2);
    want = ml_matmul(x, yt);
    EXPECT_SHAPE(r, 2, 3, 5);
    ck_assert(ml_allclose(r, want, 1e-5, 1e-6));
    DROP(r, want, yt);
    ml_tensor *m = TF(SH(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9);
    r = ml_einsum("ii", 1, &m); /* implicit output: i used twice, so the trace */
    EXPECT_SCALAR_SHAPE(r);
    EXPECT(r, 15);
    ml_release(r);
    r = ml_einsum("ii->i", 1, &m);
    EXPECT(r, 1, 5, 9);
    ml_release(r);
    r = ml_einsum(" i j -> j i ", 1, &m);
    EXPECT(r, 1, 4, 7, 2, 5, 8, 3, 6, 9);
    ck_assert(ml_is_contiguous(r));
    ml_release(r);
    r = ml_einsum("ji", 1, &m); /* implicit: alphabetical, so a transpose */
    EXPECT(r, 1, 4, 7, 2, 5, 8, 3, 6, 9);
    ml_release(r);
    r = ml_einsum("ij->j", 1, &m);
    EXPECT(r, 12, 15, 18);
    ml_release(r);
    ml_tensor *u = TF(SH(2), 1, 2), *v = TF(SH(3), 1, 10, 100);
    r = ml_einsum("i,j->ij", 2, (ml_tensor *[]){u, v});
    EXPECT_SHAPE(r, 2, 3);
    EXPECT(r, 1, 10, 100, 2, 20, 200);
    ml_release(r);
    r = ml_einsum("i,i", 2, (ml_tensor *[]){u, u});
    EXPECT(r, 5);
    ml_release(r);
    r = ml_einsum("ij,j->i", 2, (ml_tensor *[]){m, v});
    EXPECT(r, 321, 654, 987);
    ml_release(r);
    r = ml_einsum("ij,jk,k->i", 3, (ml_tensor *[]){m, m, v}); /* (m·m)·v */
    ml_tensor *mm = ml_matmul(m, m), *mmv = ml_matmul(mm, v);
    ck_assert(ml_allclose(r, mmv, 1e-6, 1e-6));
    DROP(r, mm, mmv);
    ml_tensor *col = TF(SH(3, 1), 1, 2, 3);
    r = ml_einsum("ij,ij->ij", 2, (ml_tensor *[]){m, col}); /* size-1 dims broadcast */
    EXPECT(r, 1, 2, 3, 8, 10, 12, 21, 24, 27);
    ml_release(r);
    ml_tensor *batch = rn(152, 3, 4, 2, 3);
    ml_set_requires_grad(batch, false);
    r = ml_einsum("...ij,jk->...ik", 2, (ml_tensor *[]){batch, m});
    want = ml_matmul(batch, m);
    EXPECT_SHAPE(r, 4, 2, 3);
    ck_assert(ml_allclose(r, want, 1e-5, 1e-6));
    DROP(r, want);
    r = ml_einsum("b...->...", 1, &batch); /* "..." dims kept, b summed */
    want = ml_reduce(ML_SUM, batch, 0, false);
    ck_assert(ml_allclose(r, want, 1e-5, 1e-6));
    DROP(r, want, x, y, m, u, v, col, batch);
}
END_TEST

START_TEST(cat_stack_split_values) {
    ml_tensor *a = TF(SH(2, 2), 1, 2, 3, 4), *b = TF(SH(2, 1), 5, 6), *c = TF(SH(1, 2), 7, 8);
    ml_tensor *r = ml_cat(2, (ml_tensor *[]){a, b}, 1);
    EXPECT_SHAPE(r, 2, 3);
    EXPECT(r, 1, 2, 5, 3, 4, 6);
    ml_release(r);
    r = ml_cat(3, (ml_tensor *[]){a, c, a}, 0);
    EXPECT_SHAPE(r, 5, 2);
    EXPECT(r, 1, 2, 3, 4, 7, 8, 1, 2, 3, 4);
    ml_release(r);
    r = ml_stack(2, (ml_tensor *[]){a, a}, 1);
    EXPECT_SHAPE(r, 2, 2, 2);
    EXPECT(r, 1, 2, 1, 2, 3, 4, 3, 4);
    ml_release(r);
    r = ml_stack(2, (ml_tensor *[]){a, a}, -1);
    EXPECT_SHAPE(r, 2, 2, 2);
    EXPECT(r, 1, 1, 2, 2, 3, 3, 4, 4);
    ml_release(r);
    ml_tensor *x = TF(SH(5), 0, 1, 2, 3, 4);
    ml_tensor *out[4];
    int n = ml_split_tensor(x, 2, 0, out, 4);
    ck_assert_int_eq(n, 3);
    EXPECT(out[0], 0, 1);
    EXPECT(out[1], 2, 3);
    EXPECT(out[2], 4);
    ck_assert_ptr_eq(out[1]->storage, x->storage); /* views */
    for (int i = 0; i < n; i++) ml_release(out[i]);
    DROP(a, b, c, x);
}
END_TEST

/* ------------------------------------------------------------------ gradient checks */

GFN(g_add, return ml_add(x[0], x[1]);)
GFN(g_sub, return ml_sub(x[0], x[1]);)
GFN(g_mul, return ml_mul(x[0], x[1]);)
GFN(g_div, return ml_div(x[0], x[1]);)
GFN(g_pow, return ml_binary(ML_POW, x[0], x[1]);)
GFN(g_max2, return ml_binary(ML_MAXIMUM, x[0], x[1]);)
GFN(g_min2, return ml_binary(ML_MINIMUM, x[0], x[1]);)
GFN(g_scalar_forms, {
    ml_tensor *a = ml_binary_scalar(ML_ADD, x[0], 1.5), *b = ml_scalar_binary(ML_SUB, 2.0, a);
    ml_tensor *c = ml_scalar_binary(ML_DIV, 3.0, a), *d = ml_binary_scalar(ML_POW, a, 3.0);
    ml_tensor *e = ml_scalar_binary(ML_POW, 2.0, x[0]), *f = ml_binary_scalar(ML_MUL, b, -0.5);
    ml_tensor *s1 = ml_add(c, d), *s2 = ml_add(e, f), *r = ml_add(s1, s2);
    DROP(a, b, c, d, e, f, s1, s2);
    return r;
})
GFN(g_square, return ml_mul(x[0], x[0]);) /* an op used twice: both inputs are x */
GFN(g_transposed_mul, {
    ml_tensor *t = ml_transpose(x[0], 0, 1);
    ml_tensor *r = ml_mul(t, x[1]);
    ml_release(t);
    return r;
})
GFN(g_sliced_add, {
    ml_tensor *s = ml_slice(x[0], 1, 1, 5, 2); /* non-unit stride */
    ml_tensor *r = ml_add(s, x[1]);
    ml_release(s);
    return r;
})
GFN(g_int_mix, return ml_mul(x[0], x[1]);) /* x[1] is int32 */

START_TEST(grad_binary) {
    GC(g_add, rn(1, 2, 2, 3), rn(2, 1, 3));
    GC(g_add, rn(1, 2, 2, 1), rn(2, 2, 1, 3));
    GC(g_sub, rn(3, 2, 2, 1), rn(4, 1, 3));
    GC(g_sub, rn(3, 0), rn(4, 2, 2, 2)); /* 0-dim against a matrix */
    GC(g_mul, rn(5, 3, 2, 1, 3), rn(6, 2, 4, 1));
    GC(g_mul, rn(5, 2, 3, 3), rn(6, 2, 3, 3));
    GC(g_div, rn(7, 2, 2, 3), positive(rn(8, 1, 3), 0.5f));
    GC(g_div, positive(rn(7, 1, 3), 0.5f), positive(rn(8, 2, 2, 1), 0.5f));
    GC(g_pow, positive(rn(9, 2, 2, 3), 0.3f), rn(10, 1, 3));
    GC(g_max2, spaced(1, 0.1f, 0.0f, 2, (int64_t[]){2, 3}), spaced(2, 0.1f, 0.05f, 1, (int64_t[]){3}));
    GC(g_min2, spaced(3, 0.1f, 0.0f, 2, (int64_t[]){3, 2}), spaced(4, 0.1f, 0.05f, 2, (int64_t[]){3, 2}));
    GC(g_scalar_forms, positive(rn(11, 2, 2, 3), 0.2f));
    GC(g_square, rn(12, 2, 3, 2));
    GC(g_transposed_mul, rn(13, 2, 3, 2), rn(14, 1, 3));
    GC(g_sliced_add, rn(15, 2, 2, 5), rn(16, 2, 1, 2));
    ml_tensor *iv = TI(SH(3), 1, -2, 3);
    GC(g_int_mix, rn(17, 2, 2, 3), iv);
}
END_TEST

GFN(g_remainder, return ml_binary(ML_REMAINDER, x[0], x[1]);)
GFN(g_fmod, return ml_binary(ML_FMOD, x[0], x[1]);)
GFN(g_floor_divide, return ml_binary(ML_FLOOR_DIVIDE, x[0], x[1]);)

/* a = b·r with r's fractional part in [0.3, 0.7]: a/b at least 0.3 from an integer (the jumps) */
static void away_from_jumps(ml_tensor **a, ml_tensor **b, bool row) {
    static const float bv[6] = {0.7f, -1.3f, 1.9f, -0.6f, 1.1f, 0.9f}, r[6] = {2.3f, -1.6f, 0.4f, 3.7f, -2.5f, 1.35f};
    float av[6];
    for (int i = 0; i < 6; i++) av[i] = bv[row ? i % 3 : i] * r[i];
    *a = ml_from_f32(2, (int64_t[]){2, 3}, av);
    *b = row ? ml_from_f32(1, (int64_t[]){3}, bv) : ml_from_f32(2, (int64_t[]){2, 3}, bv);
    ml_set_requires_grad(*a, true);
    ml_set_requires_grad(*b, true);
}

START_TEST(grad_remainder) {
    ml_tensor *a, *b;
    for (int row = 0; row < 2; row++) {
        away_from_jumps(&a, &b, row);
        GC(g_remainder, a, b);
        away_from_jumps(&a, &b, row);
        GC(g_fmod, a, b);
        away_from_jumps(&a, &b, row);
        GC(g_floor_divide, a, b); /* zero on both sides, as the differences */
    }
}
END_TEST

typedef struct {
    ml_unop op;
} unary_ud;
static ml_tensor *g_unary(void *ud, ml_tensor **x) { return ml_unary(((unary_ud *)ud)->op, x[0]); }
GFN(g_unary_twice, { /* tanh(x) * tanh(x) through one node used twice, on a transposed view */
    ml_tensor *t = ml_transpose(x[0], 0, 1);
    ml_tensor *h = ml_unary(ML_TANH, t);
    ml_tensor *r = ml_mul(h, h);
    DROP(t, h);
    return r;
})

START_TEST(grad_unary) {
    for (int op = ML_NEG; op <= ML_COS; op++) {
        unary_ud ud = {(ml_unop)op};
        ml_tensor *x = rn(20 + (uint64_t)op, 2, 3, 4);
        if (op == ML_LOG || op == ML_SQRT) positive(x, 0.3f);
        if (op == ML_ABS || op == ML_RELU) away(x, 0.0f, 0.05f);
        if (op == ML_SOFTPLUS) ml_f32(x)[0] = 25.0f, ml_f32(x)[1] = 19.0f; /* both sides of the threshold */
        ml_status st = ml_gradcheck(g_unary, &ud, 1, &x, 1e-3, 3e-3, 2e-2);
        ck_assert_msg(st == ML_OK, "%s: %s", ml_unop_name(op), ml_last_error());
        ml_release(x);
    }
    GC(g_unary_twice, rn(40, 2, 2, 3));
}
END_TEST

GFN(g_clamp, return ml_clamp(x[0], -0.5, 0.7);)
GFN(g_clamp_lo, return ml_clamp(x[0], 0.1, NAN);)
GFN(g_where, return ml_where(x[2], x[0], x[1]);)

START_TEST(grad_clamp_where) {
    GC(g_clamp, away(away(rn(41, 2, 3, 4), -0.5f, 0.05f), 0.7f, 0.05f));
    GC(g_clamp_lo, away(rn(42, 1, 6), 0.1f, 0.05f));
    GC(g_where, rn(43, 2, 2, 3), rn(44, 1, 3), TI(SH(2, 1), 1, 0));
    GC(g_where, rn(43, 1, 3), rn(44, 2, 2, 3), TF(SH(3), 0, 1, 1));
}
END_TEST

typedef struct {
    ml_redop op;
    int dim;
    bool keep;
    int corr;
} red_ud;
static ml_tensor *g_reduce(void *ud, ml_tensor **x) {
    red_ud *u = ud;
    if (u->op == ML_VAR) return ml_var(x[0], u->dim, u->keep, u->corr);
    return ml_reduce(u->op, x[0], u->dim, u->keep);
}
/* A reshape's backward hands back its gradient g as the input's shape, sharing g's storage: here
 * g is also the gradient of x's direct use (an addition hands one gradient to both inputs), the
 * tanh's backward may overwrite its incoming gradient, and a reshape of a transposed view goes
 * through a copy; the sums into x's gradient must still be right. */
GFN(g_reshape_shared, {
    ml_tensor *v = ml_reshape(x[0], 2, (int64_t[]){6, 4}), *h = ml_unary(ML_TANH, v);
    ml_tensor *hr = ml_reshape(h, 3, (int64_t[]){2, 3, 4}), *s = ml_add(hr, x[0]);
    ml_tensor *t = ml_transpose(x[0], 0, 2), *tr = ml_reshape(t, 3, (int64_t[]){2, 3, 4});
    ml_tensor *st = ml_mul(s, tr), *r = ml_mul(st, hr);
    DROP(v, h, hr, s, t, tr, st);
    return r;
})

GFN(g_reduce_view, { /* a sum over a transposed view, and max of a sliced one */
    ml_tensor *t = ml_transpose(x[0], 0, 2), *s = ml_slice(x[0], 1, 0, 3, 2);
    ml_tensor *a = ml_reduce(ML_SUM, t, 1, false), *b = ml_reduce(ML_MAX, s, 1, true);
    ml_tensor *a2 = ml_reduce(ML_SUM, a, ML_ALL_DIMS, false), *b2 = ml_reduce(ML_MEAN, b, ML_ALL_DIMS, false);
    ml_tensor *r = ml_mul(a2, b2);
    DROP(t, s, a, b, a2, b2);
    return r;
})

START_TEST(grad_reductions) {
    red_ud cases[] = {
        {ML_SUM, 0, false, 0},  {ML_SUM, -1, true, 0},          {ML_SUM, ML_ALL_DIMS, false, 0},
        {ML_MEAN, 1, false, 0}, {ML_MEAN, ML_ALL_DIMS, true, 0}, {ML_MAX, 1, false, 0},
        {ML_MAX, 0, true, 0},   {ML_MIN, 2, false, 0},          {ML_MAX, ML_ALL_DIMS, false, 0},
        {ML_VAR, 1, false, 1},  {ML_VAR, 2, true, 0},           {ML_VAR, ML_ALL_DIMS, false, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ml_tensor *x = spaced(50 + k, 0.1f, 0.0f, 3, (int64_t[]){2, 3, 4});
        ml_status st = ml_gradcheck(g_reduce, &cases[k], 1, &x, 1e-3, 3e-3, 2e-2);
        ck_assert_msg(st == ML_OK, "case %zu (%d, dim %d): %s", k, cases[k].op, cases[k].dim, ml_last_error());
        ml_release(x);
    }
    GC(g_reduce_view, spaced(70, 0.1f, 0.0f, 3, (int64_t[]){2, 4, 3}));
    GC(g_reshape_shared, spaced(71, 0.1f, 0.0f, 3, (int64_t[]){2, 3, 4}));
}
END_TEST

GFN(g_matmul, return ml_matmul(x[0], x[1]);)
GFN(g_matmul_tt, { /* both operands transposed views: sgemm reads them with Trans */
    ml_tensor *a = ml_transpose(x[0], -1, -2), *b = ml_transpose(x[1], -1, -2);
    ml_tensor *r = ml_matmul(a, b);
    DROP(a, b);
    return r;
})
GFN(g_matmul_self, { /* xᵀx: one input used twice */
    ml_tensor *t = ml_transpose(x[0], 0, 1);
    ml_tensor *r = ml_matmul(t, x[0]);
    ml_release(t);
    return r;
})
GFN(g_matmul_sliced, {
    ml_tensor *s = ml_slice(x[1], 1, 0, 4, 2); /* column stride 2: copied */
    ml_tensor *r = ml_matmul(x[0], s);
    ml_release(s);
    return r;
})
GFN(g_linear, return ml_linear(x[0], x[1], x[2]);)
GFN(g_linear_nob, return ml_linear(x[0], x[1], NULL);)
GFN(g_linear_view, {
    ml_tensor *t = ml_transpose(x[0], 0, 1);
    ml_tensor *r = ml_linear(t, x[1], x[2]);
    ml_release(t);
    return r;
})

START_TEST(grad_matmul_linear) {
    GC(g_matmul, rn(80, 2, 3, 4), rn(81, 2, 4, 2));
    GC(g_matmul, rn(82, 1, 4), rn(83, 1, 4));
    GC(g_matmul, rn(84, 1, 3), rn(85, 2, 3, 2));
    GC(g_matmul, rn(86, 2, 2, 3), rn(87, 1, 3));
    GC(g_matmul, rn(88, 3, 2, 2, 3), rn(89, 2, 3, 2));       /* b shared over the batch (one sgemm) */
    GC(g_matmul, rn(90, 4, 2, 1, 2, 3), rn(91, 3, 3, 3, 2)); /* broadcast batch dims on both sides */
    GC(g_matmul, rn(92, 1, 3), rn(93, 3, 2, 3, 2));
    GC(g_matmul_tt, rn(94, 3, 2, 3, 4), rn(95, 3, 2, 2, 3));
    GC(g_matmul_self, rn(96, 2, 3, 2));
    GC(g_matmul_sliced, rn(97, 2, 2, 3), rn(98, 2, 3, 4));
    GC(g_linear, rn(100, 3, 2, 3, 4), rn(101, 2, 5, 4), rn(102, 1, 5));
    GC(g_linear_nob, rn(103, 2, 3, 4), rn(104, 2, 2, 4));
    GC(g_linear_view, rn(105, 3, 3, 2, 4), rn(106, 2, 5, 4), rn(107, 1, 5));
    GC(g_linear, rn(108, 1, 4), rn(109, 2, 3, 4), rn(110, 1, 3));
}
END_TEST

GFN(g_softmax0, return ml_softmax(x[0], 0);)
GFN(g_softmax1, return ml_softmax(x[0], -1);)
GFN(g_logsoftmax1, return ml_log_softmax(x[0], 1);)
GFN(g_logsoftmax0, return ml_log_softmax(x[0], 0);)
GFN(g_softmax_view, {
    ml_tensor *t = ml_transpose(x[0], 0, 1);
    ml_tensor *r = ml_softmax(t, 1);
    ml_release(t);
    return r;
})

START_TEST(grad_softmax) {
    GC(g_softmax0, rn(120, 3, 3, 2, 4));
    GC(g_softmax1, rn(121, 2, 3, 5));
    GC(g_logsoftmax1, rn(122, 3, 2, 4, 3));
    GC(g_logsoftmax0, rn(123, 2, 4, 3));
    GC(g_softmax_view, rn(124, 2, 3, 4));
}
END_TEST

GFN(g_gather, return ml_gather(x[0], 1, x[1]);)
GFN(g_index_select, return ml_index_select(x[0], 0, x[1]);)
GFN(g_index_select1, return ml_index_select(x[0], 1, x[1]);)
GFN(g_scatter_add, return ml_scatter_add(x[0], 0, x[2], x[1]);)
GFN(g_embedding, return ml_embedding(x[0], x[1]);)
GFN(g_cat, return ml_cat(3, x, 1);)
GFN(g_cat_many, { /* more inputs than a node holds: joined in groups */
    ml_tensor *ts[11];
    for (int i = 0; i < 11; i++) ts[i] = x[i % 2];
    return ml_cat(11, ts, 0);
})
GFN(g_stack, return ml_stack(2, x, 1);)
GFN(g_split, {
    ml_tensor *p[3];
    int n = ml_split_tensor(x[0], 2, 1, p, 3);
    if (n != 3) return NULL;
    ml_tensor *a = ml_mul(p[0], p[1]), *r = ml_cat(2, (ml_tensor *[]){a, p[2]}, 1);
    DROP(p[0], p[1], p[2], a);
    return r;
})

START_TEST(grad_indexing) {
    GC(g_gather, rn(130, 2, 3, 4), TI(SH(3, 2), 0, 3, 3, 3, 1, 2)); /* repeated indices accumulate */
    GC(g_gather, rn(131, 2, 3, 4), TI(SH(2, 5), 0, 1, 2, 3, 0, 1, 1, 1, 1, 1));
    GC(g_index_select, rn(132, 2, 4, 3), TI(SH(5), 3, 0, 3, 1, 3));
    GC(g_index_select1, rn(133, 3, 2, 4, 3), TI(SH(2), 2, 2));
    GC(g_scatter_add, rn(134, 2, 3, 2), rn(135, 2, 4, 2), TI(SH(4, 2), 0, 2, 2, 2, 1, 0, 0, 0));
    GC(g_scatter_add, rn(136, 2, 3, 3), rn(137, 2, 2, 4), TI(SH(2, 3), 0, 1, 2, 2, 2, 2)); /* index < src */
    GC(g_embedding, rn(138, 2, 5, 3), TI(SH(2, 3), 4, 0, 4, 4, 1, 2));
    GC(g_cat, rn(139, 2, 2, 3), rn(140, 2, 2, 1), rn(141, 2, 2, 2));
    GC(g_cat_many, rn(142, 1, 2), rn(143, 1, 3));
    GC(g_stack, rn(144, 2, 2, 3), rn(145, 2, 2, 3));
    GC(g_split, rn(146, 2, 2, 5));
}
END_TEST

GFN(g_sort1, {
    ml_tensor *v, *i;
    if (ml_sort(x[0], 1, false, &v, &i)) return NULL;
    ml_release(i);
    return v;
})
GFN(g_sort0_desc, {
    ml_tensor *v, *i;
    if (ml_sort(x[0], 0, true, &v, &i)) return NULL;
    ml_release(i);
    return v;
})
GFN(g_topk, {
    ml_tensor *v, *i;
    if (ml_topk(x[0], 2, -1, true, &v, &i)) return NULL;
    ml_release(i);
    return v;
})
GFN(g_topk_smallest, {
    ml_tensor *v, *i;
    if (ml_topk(x[0], 1, 0, false, &v, &i)) return NULL;
    ml_release(i);
    return v;
})

typedef struct {
    double p;
    int dim;
    bool keepdim;
} norm_ud;
static ml_tensor *g_norm(void *ud, ml_tensor **x) {
    norm_ud *u = ud;
    return ml_norm(x[0], u->p, u->dim, u->keepdim);
}
GFN(g_std, return ml_std(x[0], 1, false, 1);)
GFN(g_std_all, return ml_std(x[0], ML_ALL_DIMS, true, 0);)
GFN(g_cumsum0, return ml_cumsum(x[0], 0);)
GFN(g_cumsum_last, return ml_cumsum(x[0], -1);)
GFN(g_cumsum_view, {
    ml_tensor *t = ml_transpose(x[0], 0, 1);
    ml_tensor *r = ml_cumsum(t, 1);
    ml_release(t);
    return r;
})
GFN(g_flatten, {
    ml_tensor *t = ml_transpose(x[0], 0, 2); /* not viewable: copied */
    ml_tensor *r = ml_flatten(t, 1, 2);
    ml_release(t);
    return r;
})
static ml_tensor *g_einsum(void *ud, ml_tensor **x) {
    const char *spec = ud;
    int n = 1;
    for (const char *c = spec; *c && *c != '-'; c++) n += *c == ',';
    return ml_einsum(spec, n, x);
}

START_TEST(grad_sort_norm_scan_einsum) {
    int64_t s34[] = {3, 4}, s234[] = {2, 3, 4};
    GC(g_sort1, spaced(160, 0.1f, 0.0f, 2, s34));
    GC(g_sort0_desc, spaced(161, 0.1f, 0.0f, 2, s34));
    GC(g_topk, spaced(162, 0.1f, 0.0f, 3, s234));
    GC(g_topk_smallest, spaced(163, 0.1f, 0.0f, 2, s34));
    norm_ud norms[] = {{2, 1, false}, {2, ML_ALL_DIMS, false}, {1, 0, true},         {3, -1, false},
                       {0.5, 1, false}, {INFINITY, 1, false}, {-INFINITY, 0, false}, {0, 1, false}};
    for (size_t k = 0; k < sizeof norms / sizeof *norms; k++) {
        /* spaced and shifted: no ties, nothing at 0 */
        ml_tensor *x = spaced(170 + k, 0.1f, 0.05f, 2, s34);
        ml_status st = ml_gradcheck(g_norm, &norms[k], 1, &x, 1e-3, 3e-3, 2e-2);
        ck_assert_msg(st == ML_OK, "norm p = %g, dim %d: %s", norms[k].p, norms[k].dim, ml_last_error());
        ml_release(x);
    }
    GC(g_std, rn(180, 2, 3, 4));
    GC(g_std_all, rn(181, 3, 2, 3, 2));
    GC(g_cumsum0, rn(182, 2, 3, 4));
    GC(g_cumsum_last, rn(183, 3, 2, 3, 4));
    GC(g_cumsum_view, rn(184, 2, 3, 4));
    GC(g_flatten, rn(185, 3, 2, 3, 4));
    GC_UD(g_einsum, "bld,bmd->blm", rn(190, 3, 2, 3, 4), rn(191, 3, 2, 5, 4));
    GC_UD(g_einsum, "ij,jk->ik", rn(192, 2, 3, 4), rn(193, 2, 4, 2));
    GC_UD(g_einsum, "i,j->ij", rn(194, 1, 3), rn(195, 1, 4));
    GC_UD(g_einsum, "ijk->kij", rn(196, 3, 2, 3, 4));
    GC_UD(g_einsum, "ii->i", rn(197, 2, 3, 3));
    GC_UD(g_einsum, "ij,ij->", rn(198, 2, 3, 4), rn(199, 2, 3, 4));
    GC_UD(g_einsum, "...ij,jk->...ik", rn(200, 3, 2, 3, 4), rn(201, 2, 4, 2));
    GC_UD(g_einsum, "ij,jk,kl->il", rn(202, 2, 2, 3), rn(203, 2, 3, 4), rn(204, 2, 4, 2));
    GC_UD(g_einsum, "bhqd,bhkd->bhqk", rn(205, 4, 2, 2, 3, 4), rn(206, 4, 2, 2, 5, 4));
    GC_UD(g_einsum, "ij,ij->ij", rn(207, 2, 3, 1), rn(208, 2, 3, 4)); /* broadcast size 1 */
}
END_TEST

/* ------------------------------------------------------------------ graph-level properties */

START_TEST(determinism_same_bits) {
    ml_tensor *x = rn(150, 3, 4, 37, 64), *w = rn(151, 2, 96, 64), *b = rn(152, 1, 96);
    ml_tensor *E = rn(153, 2, 50, 64), *ids = ml_zeros(ML_I32, 2, (int64_t[]){4, 37});
    for (int i = 0; i < 4 * 37; i++) ml_i32(ids)[i] = (i * 7) % 50;
    ml_tensor *grads[2][4];
    ml_set_threads(_i); /* each thread count on its own: same count, same bits */
    for (int run = 0; run < 2; run++) {
        DROP(x->grad, w->grad, b->grad, E->grad);
        x->grad = w->grad = b->grad = E->grad = NULL;
        ml_tensor *e = ml_embedding(E, ids), *h = ml_add(x, e), *y = ml_linear(h, w, b);
        ml_tensor *s = ml_softmax(y, -1), *l = ml_reduce(ML_VAR, s, ML_ALL_DIMS, false);
        ck_assert_int_eq(ml_backward(l, NULL), ML_OK);
        grads[run][0] = ml_retain(x->grad);
        grads[run][1] = ml_retain(w->grad);
        grads[run][2] = ml_retain(b->grad);
        grads[run][3] = ml_retain(E->grad);
        DROP(e, h, y, s, l);
    }
    for (int k = 0; k < 4; k++) {
        ck_assert(ml_equal(grads[0][k], grads[1][k]));
        DROP(grads[0][k], grads[1][k]);
    }
    DROP(x, w, b, E, ids);
}
END_TEST

START_TEST(saved_tensor_modified_is_an_error) {
    ml_tensor *x = rn(160, 1, 4);
    ml_tensor *y = ml_unary(ML_EXP, x); /* saves its output */
    ml_tensor *z = ml_sum_all(y);
    ck_assert_int_eq(ml_fill_(y, 0.0), ML_OK);
    ck_assert_int_ne(ml_backward(z, NULL), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "modified in place"));
    DROP(x, y, z);
}
END_TEST

START_TEST(no_grad_records_nothing) {
    ml_tensor *x = rn(161, 1, 3), *w = rn(162, 2, 2, 3);
    bool old = ml_set_grad_enabled(false);
    ml_tensor *ops[] = {ml_add(x, x), ml_unary(ML_TANH, x), ml_reduce(ML_SUM, x, 0, false), ml_matmul(w, x),
                        ml_linear(x, w, NULL), ml_softmax(x, 0), ml_clamp(x, 0, 1)};
    ml_set_grad_enabled(old);
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        ck_assert_ptr_nonnull(ops[i]);
        ck_assert_ptr_null(ops[i]->grad_fn);
        ml_release(ops[i]);
    }
    DROP(x, w);
}
END_TEST

/* ------------------------------------------------------------------ error paths */

START_TEST(errors_elementwise) {
    ml_tensor *a = ml_zeros(ML_F32, 2, (int64_t[]){2, 3}), *b = ml_zeros(ML_F32, 1, (int64_t[]){4});
    EXPECT_ERR(ml_add(a, b), "add: shapes [2,3] and [4] do not broadcast");
    EXPECT_ERR(ml_binary(ML_LT, a, b), "lt: shapes");
    EXPECT_ERR(ml_binary((ml_binop)99, a, b), "unknown operation");
    EXPECT_ERR(ml_unary((ml_unop)99, a), "unknown operation");
    EXPECT_ERR(ml_where(a, a, b), "where: shapes");
    EXPECT_ERR(ml_where(b, a, a), "where: shapes");
    ml_tensor *tall = ml_zeros(ML_F32, 2, (int64_t[]){1 << 20, 1}), *wide = ml_zeros(ML_F32, 2, (int64_t[]){1, 1 << 21});
    EXPECT_ERR(ml_mul(tall, wide), "mul: argument 1: size too large");
    EXPECT_ERR(ml_matmul(tall, wide), "matmul: argument 1: size too large");
    DROP(tall, wide);
    DROP(a, b);
}
END_TEST

/* int32 division in the core: a zero divisor is an error (not a trap), INT32_MIN by -1 no overflow */
START_TEST(int32_division) {
    ml_tensor *a = ml_from_i32(1, (int64_t[]){4}, (int32_t[]){7, -7, INT32_MIN, 5});
    ml_tensor *d = ml_from_i32(1, (int64_t[]){4}, (int32_t[]){2, 2, -1, -3});
    ml_tensor *z = ml_from_i32(2, (int64_t[]){2, 1}, (int32_t[]){1, 0});
    ml_binop ops[] = {ML_REMAINDER, ML_FMOD, ML_FLOOR_DIVIDE};
    int32_t want[3][4] = {{1, 1, 0, -1}, {1, -1, 0, 2}, {3, -4, INT32_MIN, -2}};
    for (int k = 0; k < 3; k++) {
        ml_tensor *q = ml_binary(ops[k], a, d);
        ck_assert_ptr_nonnull(q);
        ck_assert_int_eq(q->dtype, ML_I32);
        for (int i = 0; i < 4; i++) ck_assert_int_eq(ml_i32(q)[i], want[k][i]);
        ml_release(q);
        char msg[64];
        snprintf(msg, sizeof msg, "%s: integer division by zero", ml_binop_name(ops[k]));
        EXPECT_ERR(ml_binary(ops[k], a, z), msg);
        EXPECT_ERR(ml_binary_scalar(ops[k], a, 0), msg);
    }
    DROP(a, d);
    ml_release(z);
}
END_TEST

START_TEST(errors_reduce) {
    ml_tensor *a = ml_zeros(ML_F32, 2, (int64_t[]){2, 3}), *e = ml_zeros(ML_F32, 2, (int64_t[]){2, 0});
    EXPECT_ERR(ml_reduce(ML_SUM, a, 2, false), "sum: argument 2 expected a dimension in [-2, 1], got 2");
    EXPECT_ERR(ml_reduce(ML_MEAN, a, -3, false), "mean: argument 2 expected a dimension in [-2, 1], got -3");
    EXPECT_ERR(ml_reduce(ML_MAX, e, 1, false), "max: argument 1 has an empty dimension");
    EXPECT_ERR(ml_reduce(ML_ARGMIN, e, ML_ALL_DIMS, false), "argmin: argument 1 has an empty dimension");
    EXPECT_ERR(ml_var(a, 0, false, -1), "var: argument 4 expected a correction >= 0, got -1");
    EXPECT_ERR(ml_reduce((ml_redop)42, a, 0, false), "unknown operation");
    ml_tensor *big = ml_full(ML_I32, 1, (int64_t[]){3}, 1e9);
    EXPECT_ERR(ml_reduce(ML_SUM, big, 0, false), "overflows int32");
    DROP(a, e, big);
}
END_TEST

START_TEST(errors_matmul_linear) {
    ml_tensor *a = ml_zeros(ML_F32, 2, (int64_t[]){2, 5}), *b = ml_zeros(ML_F32, 2, (int64_t[]){3, 4});
    ml_tensor *v = ml_zeros(ML_F32, 1, (int64_t[]){4}), *s = ml_scalar(ML_F32, 1);
    ml_tensor *i = ml_zeros(ML_I32, 2, (int64_t[]){5, 2});
    ml_tensor *b3 = ml_zeros(ML_F32, 3, (int64_t[]){2, 3, 4}), *c3 = ml_zeros(ML_F32, 3, (int64_t[]){3, 4, 2});
    EXPECT_ERR(ml_matmul(a, b), "matmul: argument 2 has shape [3,4], expected [5,*]");
    EXPECT_ERR(ml_matmul(a, v), "matmul: argument 2 has shape [4], expected [5]");
    EXPECT_ERR(ml_matmul(a, b3), "matmul: argument 2 has shape [2,3,4], expected [...,5,*]");
    EXPECT_ERR(ml_matmul(b3, c3), "matmul: batch dimensions [2] of argument 1 and [3] of argument 2 do not broadcast");
    EXPECT_ERR(ml_matmul(s, v), "matmul: argument 1 expected a tensor with at least 1 dimension, got a 0-dim tensor");
    EXPECT_ERR(ml_matmul(v, s), "matmul: argument 2 expected a tensor with at least 1 dimension");
    EXPECT_ERR(ml_matmul(a, i), "matmul: argument 2 expected a float32 tensor, got int32");
    EXPECT_ERR(ml_matmul(i, a), "matmul: argument 1 expected a float32 tensor, got int32");
    ml_tensor *w = ml_zeros(ML_F32, 2, (int64_t[]){3, 5}), *bias = ml_zeros(ML_F32, 1, (int64_t[]){4});
    EXPECT_ERR(ml_linear(a, b, NULL), "linear: argument 2 has shape [3,4], expected [*,5]");
    EXPECT_ERR(ml_linear(a, v, NULL), "linear: argument 2 has shape [4], expected [*,5]");
    EXPECT_ERR(ml_linear(a, w, bias), "linear: argument 3 has shape [4], expected [3]");
    EXPECT_ERR(ml_linear(i, w, NULL), "linear: argument 1 expected a float32 tensor, got int32");
    EXPECT_ERR(ml_linear(s, w, NULL), "linear: argument 1 expected a tensor with at least 1 dimension");
    DROP(a, b, v, s, i, b3, c3, w, bias);
}
END_TEST

START_TEST(errors_softmax) {
    ml_tensor *a = ml_zeros(ML_F32, 2, (int64_t[]){2, 3}), *i = ml_zeros(ML_I32, 1, (int64_t[]){3});
    EXPECT_ERR(ml_softmax(a, 2), "softmax: argument 2 expected a dimension in [-2, 1], got 2");
    EXPECT_ERR(ml_log_softmax(a, -3), "log_softmax: argument 2 expected a dimension in [-2, 1], got -3");
    EXPECT_ERR(ml_softmax(i, 0), "softmax: argument 1 expected a float32 tensor, got int32");
    DROP(a, i);
}
END_TEST

START_TEST(errors_indexing) {
    ml_tensor *a = ml_zeros(ML_F32, 2, (int64_t[]){5, 3});
    ml_tensor *fi = ml_zeros(ML_F32, 2, (int64_t[]){2, 3});
    ml_tensor *bad = TI(SH(2, 1), 9, 0), *neg = TI(SH(1), -1), *ok = TI(SH(2, 1), 1, 0);
    ml_tensor *i1 = TI(SH(2), 9, 0), *i3 = ml_zeros(ML_I32, 3, (int64_t[]){1, 1, 1});
    ml_tensor *wide = ml_zeros(ML_I32, 2, (int64_t[]){2, 4});
    EXPECT_ERR(ml_gather(a, 0, fi), "gather: argument 3 expected an int32 tensor, got float32");
    EXPECT_ERR(ml_gather(a, 0, bad), "gather: index 9 out of range for dim 0 of size 5");
    EXPECT_ERR(ml_gather(a, 0, i3), "gather: argument 3 has 3 dimensions, expected 2 (as argument 1)");
    EXPECT_ERR(ml_gather(a, 0, wide), "gather: argument 3 has shape [2,4], larger than argument 1's shape [5,3]");
    EXPECT_ERR(ml_gather(a, 2, ok), "gather: argument 2 expected a dimension in [-2, 1], got 2");
    EXPECT_ERR(ml_index_select(a, 0, i1), "index_select: index 9 out of range for dim 0 of size 5");
    EXPECT_ERR(ml_index_select(a, 1, neg), "index_select: index -1 out of range for dim 1 of size 3");
    EXPECT_ERR(ml_index_select(a, 0, ok), "index_select: argument 3 has shape [2,1], expected a 1-D index");
    EXPECT_ERR(ml_index_select(a, 0, fi), "index_select: argument 3 expected an int32 tensor, got float32");
    ml_tensor *src = ml_zeros(ML_F32, 2, (int64_t[]){2, 1}), *isrc = ml_zeros(ML_I32, 2, (int64_t[]){2, 1});
    ml_tensor *small = ml_zeros(ML_F32, 2, (int64_t[]){1, 1});
    EXPECT_ERR(ml_scatter_add(a, 0, ok, isrc), "scatter_add: argument 4 expected a float32 tensor (as argument 1), got int32");
    EXPECT_ERR(ml_scatter_add(a, 0, ok, small), "scatter_add: argument 3 has shape [2,1], larger than argument 4's shape [1,1]");
    EXPECT_ERR(ml_scatter_add(a, 0, bad, src), "scatter_add: index 9 out of range for dim 0 of size 5");
    EXPECT_ERR(ml_scatter_add(a, 0, fi, src), "scatter_add: argument 3 expected an int32 tensor, got float32");
    ml_tensor *v = ml_zeros(ML_F32, 1, (int64_t[]){5});
    EXPECT_ERR(ml_embedding(v, ok), "embedding: argument 1 has shape [5], expected [V,D]");
    EXPECT_ERR(ml_embedding(a, fi), "embedding: argument 2 expected an int32 tensor, got float32");
    EXPECT_ERR(ml_embedding(a, bad), "embedding: index 9 out of range for dim 0 of size 5");
    EXPECT_ERR(ml_embedding(ok, ok), "embedding: argument 1 expected a float32 tensor, got int32");
    DROP(a, fi, bad, neg, ok, i1, i3, wide, src, isrc, small, v);
}
END_TEST

START_TEST(errors_join_split) {
    ml_tensor *a = ml_zeros(ML_F32, 2, (int64_t[]){2, 3}), *b = ml_zeros(ML_F32, 2, (int64_t[]){3, 3});
    ml_tensor *i = ml_zeros(ML_I32, 2, (int64_t[]){2, 3}), *s = ml_scalar(ML_F32, 1);
    ml_tensor *c = ml_zeros(ML_F32, 3, (int64_t[]){2, 3, 1});
    EXPECT_ERR(ml_cat(0, (ml_tensor *[]){a}, 0), "cat: argument 1 expected a non-empty list of tensors");
    EXPECT_ERR(ml_cat(2, (ml_tensor *[]){a, b}, 1),
               "cat: argument 1 element 2 has shape [3,3], expected the shape [2,3] of element 1 except at dim 1");
    EXPECT_ERR(ml_cat(2, (ml_tensor *[]){a, i}, 0), "cat: argument 1 element 2 expected a float32 tensor (as element 1), got int32");
    EXPECT_ERR(ml_cat(2, (ml_tensor *[]){a, c}, 0), "cat: argument 1 element 2 has shape [2,3,1]");
    EXPECT_ERR(ml_cat(1, (ml_tensor *[]){s}, 0), "cat: argument 1 element 1 is a 0-dim tensor");
    EXPECT_ERR(ml_cat(2, (ml_tensor *[]){a, a}, 2), "cat: argument 2 expected a dimension in [-2, 1], got 2");
    EXPECT_ERR(ml_cat(2, (ml_tensor *[]){a, NULL}, 0), "cat: argument 1 element 2 is not a tensor");
    EXPECT_ERR(ml_stack(2, (ml_tensor *[]){a, b}, 0), "stack: argument 1 element 2 has shape [3,3] (float32), expected [2,3]");
    EXPECT_ERR(ml_stack(2, (ml_tensor *[]){a, a}, 3), "stack: argument 2 expected a dimension in [-3, 2], got 3");
    EXPECT_ERR(ml_stack(0, (ml_tensor *[]){a}, 0), "stack: argument 1 expected a non-empty list");
    ml_tensor *out[2];
    ck_assert_int_eq(ml_split_tensor(a, 0, 0, out, 2), -1);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "split: argument 2 expected a size > 0, got 0"));
    ck_assert_int_eq(ml_split_tensor(a, 1, 1, out, 2), -1);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "split: 3 pieces of size 1 along dim 1 do not fit in 2 outputs"));
    ck_assert_int_eq(ml_split_tensor(a, 1, 5, out, 2), -1);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "split: argument 3 expected a dimension in [-2, 1], got 5"));
    ck_assert_int_eq(ml_split_tensor(s, 1, 0, out, 2), -1);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "split: argument 3 expected a dimension, but the tensor has 0 dimensions"));
    DROP(a, b, i, s, c);
}
END_TEST

START_TEST(errors_sort_norm_scan_einsum) {
    ml_tensor *a = ml_zeros(ML_F32, 2, (int64_t[]){2, 3}), *s = ml_scalar(ML_F32, 1), *v, *i;
    ml_tensor *e = ml_zeros(ML_F32, 2, (int64_t[]){2, 0}), *ia = ml_zeros(ML_I32, 2, (int64_t[]){2, 3});
    ck_assert_int_ne(ml_sort(a, 2, false, &v, &i), ML_OK);
    ck_assert_ptr_null(v);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "sort: argument 2 expected a dimension in [-2, 1], got 2"));
    ck_assert_int_ne(ml_topk(a, 4, -1, true, &v, &i), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "topk: argument 2 expected k in [0, 3] (the size of dim 1), got 4"));
    ck_assert_int_ne(ml_topk(a, -1, 0, true, &v, &i), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "topk: argument 2 expected k in [0, 2]"));
    ck_assert_int_ne(ml_topk(a, 1, 5, true, &v, &i), ML_OK);
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "topk: argument 3 expected a dimension in [-2, 1], got 5"));
    EXPECT_ERR(ml_argsort(s, 0, false), "argsort: argument 2 expected a dimension, but the tensor has 0 dimensions");
    EXPECT_ERR(ml_norm(a, NAN, 0, false), "norm: argument 2 expected a number p");
    EXPECT_ERR(ml_norm(a, 2, -3, false), "norm: argument 3 expected a dimension in [-2, 1], got -3");
    EXPECT_ERR(ml_norm(e, INFINITY, 1, false), "norm: argument 1 has an empty dimension");
    EXPECT_ERR(ml_std(a, 0, false, -1), "var: argument 4 expected a correction >= 0, got -1");
    EXPECT_ERR(ml_cumsum(a, 2), "cumsum: argument 2 expected a dimension in [-2, 1], got 2");
    EXPECT_ERR(ml_cumsum(s, 0), "cumsum: argument 2 expected a dimension, but the tensor has 0 dimensions");
    ml_tensor *big = ml_full(ML_I32, 1, (int64_t[]){3}, 1e9);
    EXPECT_ERR(ml_cumsum(big, 0), "cumsum: the running sum 3000000000 of an int32 tensor overflows int32");
    EXPECT_ERR(ml_flatten(a, 1, 0), "flatten: argument 2 (start_dim 1) expected a dimension at or before argument 3 (end_dim 0)");
    EXPECT_ERR(ml_flatten(a, 0, 2), "flatten: argument 3 expected a dimension in [-2, 1], got 2");
    ml_tensor *b = ml_zeros(ML_F32, 2, (int64_t[]){4, 5}), *sq = ml_zeros(ML_F32, 2, (int64_t[]){2, 3});
    EXPECT_ERR(ml_einsum("ij,jk->ik", 2, (ml_tensor *[]){a, b}), "einsum: label 'j' has size 4 in argument 3, but 3 in argument 2");
    EXPECT_ERR(ml_einsum("ij,jk", 1, &a), "einsum: argument 1 (\"ij,jk\") has 2 operand terms, but 1 tensors were given");
    EXPECT_ERR(ml_einsum("ijk", 1, &a), "einsum: argument 2 has 2 dimensions, but its term 1 in argument 1 (\"ijk\") names 3");
    EXPECT_ERR(ml_einsum("...ijk", 1, &a), "einsum: argument 2 has 2 dimensions, but its term 1 in argument 1 (\"...ijk\") names 3 and \"...\"");
    EXPECT_ERR(ml_einsum("ij->iz", 1, &a), "einsum: argument 1 (\"ij->iz\") has output label 'z' that no operand has");
    EXPECT_ERR(ml_einsum("ij->ii", 1, &a), "has output label 'i' twice");
    EXPECT_ERR(ml_einsum("i2", 1, &a), "einsum: argument 1 (\"i2\") has '2' at position 1, expected a letter");
    EXPECT_ERR(ml_einsum("ij-ji", 1, &a), "has '-' at position 2, expected \"->\"");
    EXPECT_ERR(ml_einsum("i......", 1, &a), "has two \"...\" in one term");
    EXPECT_ERR(ml_einsum("ii", 1, &sq), "einsum: label 'i' repeats in argument 2 with sizes 2 and 3");
    ml_tensor *row = ml_zeros(ML_F32, 2, (int64_t[]){1, 3});
    EXPECT_ERR(ml_einsum("ii", 1, &row), "einsum: label 'i' repeats in argument 2 with sizes 1 and 3");
    EXPECT_ERR(ml_einsum("ij", 1, &ia), "einsum: argument 2 expected a float32 tensor, got int32");
    EXPECT_ERR(ml_einsum("ij", 0, &a), "einsum: expected 1 to 16 operands after the spec, got 0");
    ml_tensor *d8 = ml_zeros(ML_F32, 8, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1});
    EXPECT_ERR(ml_einsum("abcdefgh,ijklmnop", 2, (ml_tensor *[]){d8, d8}), "asks for 16 output dimensions, at most 8");
    ml_tensor *d5 = ml_zeros(ML_F32, 5, (int64_t[]){1, 1, 1, 1, 1});
    ml_tensor *fits = ml_einsum("abcdefgh,ijklmnop->a", 2, (ml_tensor *[]){d8, d8}); /* b..h, i..p summed first */
    ck_assert_ptr_nonnull(fits);
    EXPECT_ERR(ml_einsum("abcde,fghij,abcdf->ghij", 3, (ml_tensor *[]){d5, d5, d5}),
               "einsum: an intermediate product has more than 8 dimensions; reorder the operands");
    DROP(a, s, e, ia, big, b, sq, d8, row, d5, fits);
}
END_TEST

/* Cross-entropy's argmax (two vectorised passes) against the scalar scan it replaced: the first
 * maximum, ties, ±0, -inf rows and NaNs (a NaN first entry keeps index 0, later NaNs never win). */
START_TEST(cross_entropy_argmax_is_the_scalar_scan) {
    enum { N = 12, V = 200 };
    float x[N * V];
    ml_rng r;
    ml_rng_init(&r, 77, 0);
    for (int i = 0; i < N * V; i++) x[i] = (float)ml_rng_normal(&r);
    x[0 * V + 70] = x[0 * V + 150] = x[0 * V + 199] = 9.0f;         /* ties across 64-blocks */
    x[1 * V + 0] = NAN, x[1 * V + 5] = 9.0f;                         /* NaN first: index 0 */
    x[2 * V + 3] = NAN, x[2 * V + 130] = NAN, x[2 * V + 100] = 8.0f; /* later NaNs skipped */
    for (int c = 0; c < V; c++) x[3 * V + c] = -1.0f, x[4 * V + c] = -INFINITY, x[5 * V + c] = -INFINITY;
    x[3 * V + 64] = -0.0f, x[3 * V + 65] = 0.0f, x[3 * V + 3] = 0.0f; /* ±0 ties */
    x[5 * V + 130] = -3e38f;                                          /* one number among -inf */
    for (int c = 1; c < V; c++) x[6 * V + c] = NAN;                   /* only x[0] is a number */
    x[7 * V + 199] = 50.0f;                                           /* the last entry */
    ml_tensor *logits = ml_from_f32(2, (int64_t[]){N, V}, x);
    int32_t tgt[N];
    for (int i = 0; i < N; i++) tgt[i] = (i * 37) % V;
    ml_tensor *tg = ml_from_i32(1, (int64_t[]){N}, tgt);
    float prob[N];
    int32_t best[N];
    ml_tensor *loss = ml_cross_entropy_stats(logits, tg, prob, best);
    ck_assert_ptr_nonnull(loss);
    for (int i = 0; i < N; i++) {
        const float *xr = x + i * V;
        float mx = xr[0];
        int32_t want = 0;
        for (int c = 1; c < V; c++)
            if (xr[c] > mx) mx = xr[c], want = c;
        ck_assert_msg(best[i] == want, "row %d: argmax %d, the scalar scan %d", i, best[i], want);
    }
    ck_assert_int_eq(best[0], 70);
    ck_assert_int_eq(best[1], 0);
    ck_assert_int_eq(best[3], 3);
    ck_assert_int_eq(best[5], 130);
    DROP(logits, tg, loss);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("ops");
    TCase *v = tcase_create("values");
    tcase_add_test(v, gradcheck_catches_a_wrong_backward);
    tcase_add_test(v, binary_values_and_broadcasting);
    tcase_add_test(v, binary_noncontiguous_and_nan);
    tcase_add_test(v, binary_broadcast_property);
    tcase_add_test(v, reduction_property);
    tcase_add_test(v, comparisons_give_int_masks);
    tcase_add_test(v, int_arithmetic);
    tcase_add_test(v, unary_values);
    tcase_add_test(v, clamp_and_where_values);
    tcase_add_test(v, reduction_values);
    tcase_add_test(v, matmul_values_and_shapes);
    tcase_add_test(v, matmul_layouts_agree);
    tcase_add_test(v, linear_values);
    tcase_add_test(v, softmax_values);
    tcase_add_test(v, index_values);
    tcase_add_test(v, cat_stack_split_values);
    tcase_add_test(v, sort_topk_values);
    tcase_add_test(v, norm_std_cumsum_values);
    tcase_add_test(v, flatten_values);
    tcase_add_test(v, einsum_values);
    tcase_add_test(v, cross_entropy_argmax_is_the_scalar_scan);
    suite_add_tcase(s, v);
    TCase *g = tcase_create("gradients");
    tcase_add_test(g, grad_binary);
    tcase_add_test(g, grad_remainder);
    tcase_add_test(g, grad_unary);
    tcase_add_test(g, grad_clamp_where);
    tcase_add_test(g, grad_reductions);
    tcase_add_test(g, grad_matmul_linear);
    tcase_add_test(g, grad_softmax);
    tcase_add_test(g, grad_indexing);
    tcase_add_test(g, grad_sort_norm_scan_einsum);
    tcase_add_loop_test(g, determinism_same_bits, 1, 3);
    tcase_add_test(g, saved_tensor_modified_is_an_error);
    tcase_add_test(g, no_grad_records_nothing);
    suite_add_tcase(s, g);
    TCase *e = tcase_create("errors");
    tcase_add_test(e, errors_elementwise);
    tcase_add_test(e, int32_division);
    tcase_add_test(e, errors_reduce);
    tcase_add_test(e, errors_matmul_linear);
    tcase_add_test(e, errors_softmax);
    tcase_add_test(e, errors_indexing);
    tcase_add_test(e, errors_join_split);
    tcase_add_test(e, errors_sort_norm_scan_einsum);
    suite_add_tcase(s, e);
    return s;
}

int main(void) { return ml_test_run(suite()); }
