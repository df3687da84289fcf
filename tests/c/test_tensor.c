/* The tensor core (creation, views, copies, versions, errors) and the autograd engine
 * (accumulation, shared subgraphs, freed graphs, saved-tensor checks, grad mode, detach). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/closest.h"
#include "core/format.h"
#include "core/tensor.h"
#include "ops/ops.h"
#include "testutil.h"

/* ------------------------------------------------------------------ helpers */

static void drop_all(ml_tensor **ts, size_t n) {
    for (size_t i = 0; i < n; i++) ml_release(ts[i]);
}
#define DROP(...) drop_all((ml_tensor *[]){__VA_ARGS__}, sizeof((ml_tensor *[]){__VA_ARGS__}) / sizeof(ml_tensor *))

static void expect_vals(const ml_tensor *t, int64_t n, const double *want) {
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(ml_numel(t), n);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs(ml_get_flat(t, i) - want[i]) <= 1e-6 * (1 + fabs(want[i])),
                      "element %lld: got %.9g, expected %.9g", (long long)i, ml_get_flat(t, i), want[i]);
}
#define EXPECT(t, ...) \
    expect_vals((t), (int64_t)(sizeof((double[]){__VA_ARGS__}) / sizeof(double)), (double[]){__VA_ARGS__})

static void expect_shape(const ml_tensor *t, int nd, const int64_t *shape) {
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->ndim, nd);
    for (int i = 0; i < nd; i++) ck_assert_int_eq(t->shape[i], shape[i]);
}
#define EXPECT_SHAPE(t, ...) \
    expect_shape((t), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static void expect_err_(const void *p, const char *msg, const char *what) {
    ck_assert_msg(p == NULL, "%s: expected an error containing \"%s\", got a result", what, msg);
    ck_assert_msg(strstr(ml_last_error(), msg) != NULL, "%s: error \"%s\" does not contain \"%s\"", what,
                  ml_last_error(), msg);
}
#define EXPECT_ERR(call, msg) expect_err_((call), (msg), #call)
#define EXPECT_STATUS_ERR(call, msg)                                                                                  \
    do {                                                                                                              \
        ml_status _st = (call);                                                                                       \
        ck_assert_msg(_st != ML_OK, "%s: expected an error", #call);                                                  \
        ck_assert_msg(strstr(ml_last_error(), msg) != NULL, "%s: error \"%s\" does not contain \"%s\"", #call,        \
                      ml_last_error(), msg);                                                                          \
    } while (0)

/* 0..n-1 as float32 in the given shape. */
static ml_tensor *iota(int nd, const int64_t *shape) {
    ml_tensor *t = ml_empty(ML_F32, nd, shape);
    for (int64_t i = 0; i < ml_numel(t); i++) ml_f32(t)[i] = (float)i;
    return t;
}
#define IOTA(...) iota((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static ml_tensor *leaf(ml_tensor *t) {
    ck_assert_int_eq(ml_set_requires_grad(t, true), ML_OK);
    return t;
}

/* ------------------------------------------------------------------ creation */

START_TEST(creation) {
    ml_tensor *z = ml_zeros(ML_F32, 2, (int64_t[]){2, 3});
    EXPECT_SHAPE(z, 2, 3);
    ck_assert(ml_is_contiguous(z));
    ck_assert_int_eq(z->stride[0], 3);
    ck_assert_int_eq(z->stride[1], 1);
    ck_assert_int_eq((uintptr_t)z->storage->data % 64, 0);
    EXPECT(z, 0, 0, 0, 0, 0, 0);
    ml_tensor *o = ml_full(ML_I32, 1, (int64_t[]){3}, 7);
    ck_assert_int_eq(o->dtype, ML_I32);
    EXPECT(o, 7, 7, 7);
    ml_tensor *s = ml_scalar(ML_F32, 2.5);
    ck_assert_int_eq(s->ndim, 0);
    ck_assert_int_eq(ml_numel(s), 1);
    EXPECT(s, 2.5);
    ml_tensor *a = ml_arange(ML_F32, 0, 1, 0.25);
    EXPECT(a, 0, 0.25, 0.5, 0.75);
    ml_tensor *b = ml_arange(ML_I32, 5, 0, -2);
    EXPECT(b, 5, 3, 1);
    ml_tensor *e = ml_arange(ML_F32, 3, 3, 1);
    EXPECT_SHAPE(e, 0);
    ml_tensor *f = ml_from_f32(2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4});
    EXPECT(f, 1, 2, 3, 4);
    ml_tensor *g = ml_from_i32(1, (int64_t[]){2}, (int32_t[]){-1, 9});
    EXPECT(g, -1, 9);
    ml_tensor *zl = ml_zeros_like(f);
    EXPECT_SHAPE(zl, 2, 2);
    ck_assert_int_eq(zl->dtype, ML_F32);
    ml_rng r1, r2;
    ml_rng_init(&r1, 9, 1);
    ml_rng_init(&r2, 9, 1);
    ml_tensor *u1 = ml_uniform(1, (int64_t[]){100}, -2, 3, &r1), *u2 = ml_uniform(1, (int64_t[]){100}, -2, 3, &r2);
    ck_assert(ml_equal(u1, u2)); /* same seed, same numbers */
    for (int i = 0; i < 100; i++) ck_assert(ml_f32(u1)[i] >= -2 && ml_f32(u1)[i] < 3);
    ml_tensor *n = ml_normal(1, (int64_t[]){2000}, 1.0, 2.0, &r1);
    double m = 0;
    for (int i = 0; i < 2000; i++) m += ml_f32(n)[i];
    ck_assert_close(m / 2000, 1.0, 0.2, 0);
    DROP(z, o, s, a, b, e, f, g, zl, u1, u2, n);
}
END_TEST

START_TEST(creation_errors) {
    EXPECT_ERR(ml_zeros(ML_F32, 2, (int64_t[]){2, -3}), "argument 1 has size -3 at dim 1, expected a size >= 0");
    EXPECT_ERR(ml_empty(ML_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}), "has 9 dimensions, expected at most 8");
    EXPECT_ERR(ml_zeros(ML_F32, 2, (int64_t[]){INT64_C(1) << 40, 1 << 20}), "size too large");
    EXPECT_ERR(ml_zeros(ML_F32, 3, (int64_t[]){INT64_MAX, INT64_MAX, 2}), "size too large");
    EXPECT_ERR(ml_arange(ML_F32, 0, 1, 0), "arange: argument 3 expected a finite non-zero step, got 0");
    EXPECT_ERR(ml_arange(ML_F32, 0, 1e300, 1e-300), "arange");
    EXPECT_ERR(ml_arange(ML_F32, 0, INFINITY, 1), "arange");
    /* a zero-size dim with a huge one is fine: no elements */
    ml_tensor *t = ml_zeros(ML_F32, 2, (int64_t[]){0, INT64_C(1) << 50});
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(ml_numel(t), 0);
    ml_release(t);
}
END_TEST

START_TEST(element_access_is_checked) {
    ml_tensor *t = IOTA(2, 3);
    ck_assert_double_eq(ml_get(t, (int64_t[]){1, 2}), 5.0);
    ml_set(t, (int64_t[]){0, 1}, 42);
    ck_assert_double_eq(ml_get_flat(t, 1), 42.0);
    uint64_t v = t->storage->version;
    ml_clear_error();
    double x = ml_get(t, (int64_t[]){2, 0});
    ck_assert(isnan(x));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "out of range"));
    ml_set(t, (int64_t[]){0, 3}, 1); /* refused: neither writes nor bumps */
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "out of range"));
    ck_assert_int_eq(t->storage->version, v);
    EXPECT(t, 0, 42, 2, 3, 4, 5);
    ml_release(t);
}
END_TEST

/* ------------------------------------------------------------------ views */

START_TEST(views_share_storage_and_index) {
    ml_tensor *t = IOTA(3, 4); /* 0..11 */
    ml_tensor *n = ml_narrow(t, 1, 1, 2);
    EXPECT_SHAPE(n, 3, 2);
    EXPECT(n, 1, 2, 5, 6, 9, 10);
    ck_assert_ptr_eq(n->storage, t->storage);
    ml_set(n, (int64_t[]){2, 1}, 100); /* writes through to t[2][2] */
    ck_assert_double_eq(ml_get(t, (int64_t[]){2, 2}), 100.0);
    ml_set(n, (int64_t[]){2, 1}, 10);

    ml_tensor *s = ml_slice(t, 1, 0, 4, 3); /* columns 0, 3 */
    EXPECT(s, 0, 3, 4, 7, 8, 11);
    ml_tensor *s2 = ml_slice(t, 0, -2, 100, 1); /* negative start, stop clamped */
    EXPECT_SHAPE(s2, 2, 4);
    EXPECT(s2, 4, 5, 6, 7, 8, 9, 10, 11);
    ml_tensor *s3 = ml_slice(t, 0, 2, 1, 1); /* empty */
    EXPECT_SHAPE(s3, 0, 4);
    ml_tensor *s4 = ml_slice(s, 0, 1, 3, 2); /* slice of a slice: row 1 only */
    EXPECT(s4, 4, 7);

    ml_tensor *sel = ml_select(t, 0, -1);
    EXPECT_SHAPE(sel, 4);
    EXPECT(sel, 8, 9, 10, 11);
    ml_tensor *col = ml_select(t, 1, 2);
    EXPECT(col, 2, 6, 10);

    ml_tensor *tr = ml_transpose(t, 0, 1);
    EXPECT_SHAPE(tr, 4, 3);
    EXPECT(tr, 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11);
    ck_assert(!ml_is_contiguous(tr));
    ck_assert_ptr_eq(tr->storage, t->storage);

    ml_tensor *c = IOTA(2, 3, 4);
    ml_tensor *p = ml_permute(c, (int[]){2, 0, 1});
    EXPECT_SHAPE(p, 4, 2, 3);
    ck_assert_double_eq(ml_get(p, (int64_t[]){3, 1, 2}), ml_get(c, (int64_t[]){1, 2, 3}));

    ml_tensor *v = ml_view(t, 2, (int64_t[]){2, -1});
    EXPECT_SHAPE(v, 2, 6);
    ck_assert_ptr_eq(v->storage, t->storage);
    ck_assert_double_eq(ml_get(v, (int64_t[]){1, 0}), 6.0);
    ml_tensor *v1 = ml_view(t, 1, (int64_t[]){12});
    EXPECT_SHAPE(v1, 12);
    ml_tensor *v3 = ml_view(c, 3, (int64_t[]){2, 2, 6}); /* splits and merges */
    ck_assert_double_eq(ml_get(v3, (int64_t[]){1, 1, 5}), 23.0);
    /* view of a column slice whose rows are contiguous: [3,2] -> [3,2,1] and [3,1,2] */
    ml_tensor *vn = ml_view(n, 3, (int64_t[]){3, 1, 2});
    EXPECT(vn, 1, 2, 5, 6, 9, 10);
    ml_tensor *one = ml_scalar(ML_F32, 5), *vs = ml_view(one, 2, (int64_t[]){1, 1});
    EXPECT_SHAPE(vs, 1, 1);

    ml_tensor *r = ml_reshape(tr, 1, (int64_t[]){12}); /* transposed: must copy */
    EXPECT(r, 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11);
    ck_assert_ptr_ne(r->storage, t->storage);
    ml_tensor *r2 = ml_reshape(t, 2, (int64_t[]){4, 3}); /* contiguous: a view */
    ck_assert_ptr_eq(r2->storage, t->storage);

    ml_tensor *row = IOTA(3), *e = ml_expand(row, 2, (int64_t[]){2, 3});
    EXPECT(e, 0, 1, 2, 0, 1, 2);
    ck_assert_int_eq(e->stride[0], 0);
    ml_tensor *colv = IOTA(2, 1), *e2 = ml_expand(colv, 3, (int64_t[]){2, -1, 4});
    EXPECT_SHAPE(e2, 2, 2, 4);
    EXPECT(e2, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);

    ml_tensor *u = ml_unsqueeze(t, 1);
    EXPECT_SHAPE(u, 3, 1, 4);
    ck_assert_ptr_eq(u->storage, t->storage);
    ml_tensor *u2 = ml_unsqueeze(tr, -1); /* of a non-contiguous tensor: still a view */
    EXPECT_SHAPE(u2, 4, 3, 1);
    ck_assert_ptr_eq(u2->storage, t->storage);
    ml_tensor *sq = ml_squeeze(u, 1);
    EXPECT_SHAPE(sq, 3, 4);
    ml_tensor *sq2 = ml_squeeze(u2, 2);
    EXPECT(sq2, 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11);

    DROP(t, n, s, s2, s3, s4, sel, col, tr, c, p, v, v1, v3, vn, one, vs, r, r2, row, e, colv, e2, u, u2, sq, sq2);
}
END_TEST

/* Every view/reshape of assorted layouts keeps the logical (row-major) element order. */
START_TEST(view_reshape_keep_order) {
    ml_tensor *base = IOTA(4, 1, 6, 2);
    ml_tensor *layouts[] = {
        ml_retain(base),
        ml_narrow(base, 2, 1, 4),              /* [4,1,4,2] rows not contiguous */
        ml_transpose(base, 0, 2),              /* [6,1,4,2] */
        ml_slice(base, 3, 0, 2, 1),            /* same as base */
        ml_select(base, 3, 1),                 /* [4,1,6] stride 2 */
        ml_permute(base, (int[]){1, 0, 2, 3}), /* size-1 dim moved: still contiguous */
    };
    const int64_t targets[][5] = {{1, 0},        {2, 0},       {2, 24},     {3, 2, 2, 12}, {4, 1, 48, 1, 1},
                                  {3, 4, 6, 2},   {2, 8, 6},    {3, 1, 1, 48}, {2, 48, 1},  {3, 2, 1, 24},
                                  {2, 4, 8},      {3, 2, 2, 8}, {2, 8, 4},   {3, 4, 1, 8},  {2, 4, 6},
                                  {3, 2, 3, 4},   {2, 24, 1},   {3, 1, 4, 6}};
    for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
        ml_tensor *t = layouts[l];
        ml_tensor *flat = ml_contiguous(t);
        int64_t n = ml_numel(t);
        for (size_t k = 0; k < sizeof targets / sizeof *targets; k++) {
            int nd = (int)targets[k][0];
            int64_t shape[4];
            int64_t prod = 1;
            for (int d = 0; d < nd; d++) prod *= (shape[d] = targets[k][d + 1]);
            if (nd == 1) shape[0] = n, prod = n;
            if (prod != n) continue; /* targets are listed for 48, 32 and 24 elements */
            ml_tensor *v = ml_view(t, nd, shape), *r = ml_reshape(t, nd, shape);
            ck_assert_msg(r != NULL, "layout %zu target %zu: %s", l, k, ml_last_error());
            for (int64_t i = 0; i < n; i++) {
                ck_assert_double_eq(ml_get_flat(r, i), ml_get_flat(flat, i));
                if (v) ck_assert_msg(ml_get_flat(v, i) == ml_get_flat(flat, i), "layout %zu target %zu elem %lld", l,
                                     k, (long long)i);
            }
            if (ml_is_contiguous(t)) ck_assert_msg(v != NULL, "layout %zu target %zu: a contiguous view failed", l, k);
            DROP(v, r);
        }
        DROP(flat, t);
    }
    ml_release(base);
}
END_TEST

START_TEST(views_of_empty_tensors) {
    ml_tensor *t = ml_zeros(ML_F32, 2, (int64_t[]){0, 3});
    ml_tensor *v = ml_view(t, 2, (int64_t[]){3, 0});
    EXPECT_SHAPE(v, 3, 0);
    ml_tensor *r = ml_reshape(t, 1, (int64_t[]){0});
    EXPECT_SHAPE(r, 0);
    ml_tensor *r2 = ml_reshape(t, 3, (int64_t[]){2, 0, -1});
    ck_assert_ptr_null(r2); /* -1 is ambiguous with zero elements */
    DROP(t, v, r);
}
END_TEST

START_TEST(view_errors) {
    ml_tensor *t = IOTA(2, 3);
    EXPECT_ERR(ml_narrow(t, 5, 0, 1), "narrow: argument 2 expected a dimension in [-2, 1], got 5");
    EXPECT_ERR(ml_narrow(t, 1, 2, 2), "narrow: start 2 and length 2 out of range for dim 1 of size 3");
    EXPECT_ERR(ml_narrow(t, 1, 0, -1), "out of range");
    EXPECT_ERR(ml_slice(t, 0, 0, 2, 0), "slice: step expected > 0, got 0");
    EXPECT_ERR(ml_slice(t, -3, 0, 2, 1), "slice: argument 2 expected a dimension in [-2, 1], got -3");
    EXPECT_ERR(ml_select(t, 0, 2), "select: index 2 out of range for dim 0 of size 2");
    EXPECT_ERR(ml_select(t, 1, -4), "select: index -4 out of range for dim 1 of size 3");
    EXPECT_ERR(ml_transpose(t, 0, 2), "transpose: argument 3 expected a dimension in [-2, 1], got 2");
    EXPECT_ERR(ml_permute(t, (int[]){0, 0}), "permute: expected a permutation of 0..1");
    EXPECT_ERR(ml_view(t, 2, (int64_t[]){4, 2}), "view: shape [4,2] is invalid for a tensor of shape [2,3] (6 elements)");
    EXPECT_ERR(ml_view(t, 2, (int64_t[]){-1, -1}), "only one dimension can be -1");
    EXPECT_ERR(ml_view(t, 2, (int64_t[]){-2, -3}), "expected sizes >= 0");
    EXPECT_ERR(ml_view(t, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 2, 3}), "at most 8 dimensions");
    ml_tensor *tr = ml_transpose(t, 0, 1);
    EXPECT_ERR(ml_view(tr, 1, (int64_t[]){6}), "view: the tensor's strides are not compatible");
    EXPECT_ERR(ml_expand(t, 2, (int64_t[]){4, 3}), "expand: cannot expand shape [2,3] to [4,3]");
    EXPECT_ERR(ml_expand(t, 1, (int64_t[]){3}), "expand: expected at least 2");
    EXPECT_ERR(ml_expand(t, 3, (int64_t[]){-1, 2, 3}), "expand: -1 is not allowed for a new leading dimension");
    EXPECT_ERR(ml_squeeze(t, 0), "squeeze: dimension 0 has size 2, expected 1");
    EXPECT_ERR(ml_unsqueeze(t, 3), "unsqueeze: argument 2 expected a dimension in [-3, 2], got 3");
    ml_tensor *s = ml_scalar(ML_F32, 1);
    EXPECT_ERR(ml_select(s, 0, 0), "select: argument 2 expected a dimension");
    DROP(t, tr, s);
}
END_TEST

/* ------------------------------------------------------------------ copies and versions */

START_TEST(copies) {
    ml_tensor *t = IOTA(2, 3);
    ml_tensor *c = ml_contiguous(t);
    ck_assert_ptr_eq(c, t); /* already contiguous: the same tensor */
    ml_tensor *tr = ml_transpose(t, 0, 1), *ct = ml_contiguous(tr);
    ck_assert(ml_is_contiguous(ct));
    ck_assert_ptr_ne(ct->storage, t->storage);
    EXPECT(ct, 0, 3, 1, 4, 2, 5);
    ml_tensor *cl = ml_clone(t);
    ck_assert_ptr_ne(cl->storage, t->storage);
    ck_assert(ml_equal(cl, t));
    ml_tensor *i = ml_to_dtype(t, ML_I32);
    ck_assert_int_eq(i->dtype, ML_I32);
    EXPECT(i, 0, 1, 2, 3, 4, 5);
    ml_tensor *d = ml_detach(t);
    ck_assert_ptr_eq(d->storage, t->storage);
    ck_assert_ptr_null(d->grad_fn);
    ck_assert(!d->requires_grad);
    DROP(t, c, tr, ct, cl, i, d);
}
END_TEST

START_TEST(copy_broadcast_overlap_versions) {
    ml_tensor *dst = ml_zeros(ML_F32, 2, (int64_t[]){2, 3}), *row = IOTA(3);
    uint64_t v0 = dst->storage->version;
    ck_assert_int_eq(ml_copy_(dst, row), ML_OK);
    EXPECT(dst, 0, 1, 2, 0, 1, 2);
    ck_assert_int_gt(dst->storage->version, v0);
    /* into a transposed view, converting int -> float */
    ml_tensor *tr = ml_transpose(dst, 0, 1), *src = ml_from_i32(2, (int64_t[]){3, 2}, (int32_t[]){1, 2, 3, 4, 5, 6});
    ck_assert_int_eq(ml_copy_(tr, src), ML_OK);
    EXPECT(dst, 1, 3, 5, 2, 4, 6);
    /* overlapping source and destination in one storage: shift right by one */
    ml_tensor *x = IOTA(6);
    ml_tensor *a = ml_narrow(x, 0, 1, 5), *b = ml_narrow(x, 0, 0, 5);
    ck_assert_int_eq(ml_copy_(a, b), ML_OK);
    EXPECT(x, 0, 0, 1, 2, 3, 4);
    /* and a transpose onto itself */
    ml_tensor *sq = IOTA(3, 3), *sqt = ml_transpose(sq, 0, 1);
    ck_assert_int_eq(ml_copy_(sq, sqt), ML_OK);
    EXPECT(sq, 0, 3, 6, 1, 4, 7, 2, 5, 8);
    /* versions are per storage: a write through a view is seen by the base */
    uint64_t vx = x->storage->version;
    ck_assert_int_eq(ml_fill_(a, 7), ML_OK);
    ck_assert_int_gt(x->storage->version, vx);
    EXPECT(x, 0, 7, 7, 7, 7, 7);
    /* errors */
    ml_tensor *bad = IOTA(4);
    EXPECT_STATUS_ERR(ml_copy_(dst, bad), "copy_: shapes [2,3] and [4] do not broadcast");
    ml_tensor *big = IOTA(2, 2, 3);
    EXPECT_STATUS_ERR(ml_copy_(dst, big), "copy_: argument 2 has shape [2,2,3], which does not broadcast to [2,3]");
    ml_tensor *lf = leaf(IOTA(3));
    EXPECT_STATUS_ERR(ml_copy_(lf, row), "copy_: argument 1 is a leaf that requires grad");
    EXPECT_STATUS_ERR(ml_fill_(lf, 1), "fill_: argument 1 is a leaf that requires grad");
    bool old = ml_set_grad_enabled(false);
    ck_assert_int_eq(ml_copy_(lf, row), ML_OK); /* allowed under no_grad */
    ml_set_grad_enabled(old);
    DROP(dst, row, tr, src, x, a, b, sq, sqt, bad, big, lf);
}
END_TEST

START_TEST(storage_accounting) {
    size_t before = ml_storage_live_bytes();
    ml_tensor *t = ml_zeros(ML_F32, 1, (int64_t[]){1000});
    ck_assert_uint_eq(ml_storage_live_bytes(), before + 4000);
    ml_tensor *v = ml_narrow(t, 0, 0, 10); /* views add nothing */
    ck_assert_uint_eq(ml_storage_live_bytes(), before + 4000);
    ml_release(t);
    ck_assert_uint_eq(ml_storage_live_bytes(), before + 4000); /* v keeps the storage */
    ml_release(v);
    ck_assert_uint_eq(ml_storage_live_bytes(), before);
}
END_TEST

START_TEST(misc_helpers) {
    ck_assert_int_eq(ml_dim(-1, 3), 2);
    ck_assert_int_eq(ml_dim(3, 3), -1);
    ck_assert_int_eq(ml_dim(-4, 3), -1);
    ck_assert_int_eq(ml_dim(0, 0), 0);
    ck_assert_str_eq(ml_dtype_name(ML_I32), "int32");
    ml_tensor *a = IOTA(2, 1), *b = IOTA(3);
    int nd;
    int64_t shape[ML_MAX_DIMS];
    ck_assert_int_eq(ml_broadcast_shape("f", a, b, &nd, shape), ML_OK);
    ck_assert_int_eq(nd, 2);
    ck_assert_int_eq(shape[0], 2);
    ck_assert_int_eq(shape[1], 3);
    ml_tensor *c = IOTA(2);
    ck_assert_int_ne(ml_broadcast_shape("f", b, c, &nd, shape), ML_OK);
    ck_assert_str_eq(ml_last_error(), "f: shapes [3] and [2] do not broadcast (dim 0: 3 vs 2)");
    ml_tensor *d = ml_from_f32(1, (int64_t[]){3}, (float[]){0, 1, 2.001f});
    ck_assert(ml_allclose(b, d, 0, 0.01));
    ck_assert(!ml_allclose(b, d, 0, 1e-4));
    ck_assert(!ml_equal(b, d));
    ml_tensor *n = ml_from_f32(1, (int64_t[]){3}, (float[]){0, NAN, 2});
    ck_assert(!ml_allclose(n, n, 1, 1));
    char buf[ML_SHAPE_STR];
    ck_assert_str_eq(ml_shape_str(buf, 0, NULL), "[]");
    DROP(a, b, c, d, n);
}
END_TEST

/* ------------------------------------------------------------------ autograd engine */

START_TEST(grad_accumulates_over_two_backwards) {
    ml_tensor *x = leaf(ml_from_f32(1, (int64_t[]){2}, (float[]){1, 2}));
    for (int k = 0; k < 2; k++) {
        ml_tensor *y = ml_binary_scalar(ML_MUL, x, 3.0), *z = ml_sum_all(y); /* a fresh graph each time */
        ck_assert_int_eq(ml_backward(z, NULL), ML_OK);
        DROP(y, z);
    }
    EXPECT(x->grad, 6, 6);
    ml_zero_grad(x);
    ck_assert_ptr_null(x->grad);
    ml_release(x);
}
END_TEST

START_TEST(op_used_twice_and_diamond) {
    ml_tensor *x = leaf(ml_from_f32(1, (int64_t[]){3}, (float[]){1, -2, 3}));
    ml_tensor *y = ml_mul(x, x), *z = ml_sum_all(y);
    ck_assert_int_eq(ml_backward(z, NULL), ML_OK);
    EXPECT(x->grad, 2, -4, 6);
    ml_zero_grad(x);
    /* diamond: y = 2x; a = y + 1; b = 3y; z = Σ a·b = Σ 6x²·... : dz/dx = 2(a·3 + b·1) = 2(6y+3+3y) */
    ml_tensor *y2 = ml_binary_scalar(ML_MUL, x, 2.0), *a = ml_binary_scalar(ML_ADD, y2, 1.0);
    ml_tensor *b = ml_binary_scalar(ML_MUL, y2, 3.0), *ab = ml_mul(a, b), *z2 = ml_sum_all(ab);
    ck_assert_int_eq(ml_backward(z2, NULL), ML_OK);
    /* z = Σ (2x+1)(6x) = Σ 12x² + 6x -> 24x + 6 */
    EXPECT(x->grad, 30, -42, 78);
    /* the non-leaf gets no .grad */
    ck_assert_ptr_null(y2->grad);
    DROP(x, y, z, y2, a, b, ab, z2);
}
END_TEST

START_TEST(backward_twice_is_an_error) {
    ml_tensor *x = leaf(ml_from_f32(1, (int64_t[]){2}, (float[]){1, 2}));
    ml_tensor *y = ml_unary(ML_EXP, x), *z = ml_sum_all(y);
    ck_assert_int_eq(ml_backward(z, NULL), ML_OK);
    EXPECT_STATUS_ERR(ml_backward(z, NULL), "backward through the graph a second time");
    /* a new graph on a freed intermediate fails the same way */
    ml_tensor *z2 = ml_sum_all(y);
    EXPECT_STATUS_ERR(ml_backward(z2, NULL), "second time");
    DROP(x, y, z, z2);
}
END_TEST

START_TEST(modified_saved_tensor_is_an_error) {
    ml_tensor *x = leaf(ml_from_f32(1, (int64_t[]){2}, (float[]){1, 2}));
    ml_tensor *w = ml_from_f32(1, (int64_t[]){2}, (float[]){3, 4});
    ml_tensor *y = ml_mul(x, w), *z = ml_sum_all(y); /* saves w for x's gradient */
    ck_assert_int_eq(ml_fill_(w, 0), ML_OK);
    EXPECT_STATUS_ERR(ml_backward(z, NULL), "was modified in place");
    ck_assert_ptr_null(x->grad);
    DROP(x, w, y, z);
}
END_TEST

START_TEST(grad_mode_and_detach) {
    ml_tensor *x = leaf(ml_from_f32(1, (int64_t[]){2}, (float[]){1, 2}));
    ck_assert(ml_grad_enabled());
    bool old = ml_set_grad_enabled(false);
    ck_assert(old);
    ml_tensor *y = ml_mul(x, x), *v = ml_narrow(x, 0, 0, 1);
    ck_assert_ptr_null(y->grad_fn);
    ck_assert_ptr_null(v->grad_fn);
    ck_assert(!ml_needs_grad(x));
    ml_set_grad_enabled(old);
    ck_assert(ml_needs_grad(x));
    EXPECT_STATUS_ERR(ml_backward(y, NULL), "does not require grad");
    ml_tensor *d = ml_detach(x), *e = ml_mul(d, d);
    ck_assert_ptr_null(e->grad_fn);
    ck_assert_ptr_eq(d->storage, x->storage);
    /* a detached branch contributes nothing */
    ml_tensor *f = ml_mul(x, d), *z = ml_sum_all(f);
    ck_assert_int_eq(ml_backward(z, NULL), ML_OK);
    EXPECT(x->grad, 1, 2);
    DROP(x, y, v, d, e, f, z);
}
END_TEST

START_TEST(backward_argument_errors) {
    ml_tensor *x = leaf(ml_from_f32(1, (int64_t[]){2}, (float[]){1, 2}));
    ml_tensor *y = ml_binary_scalar(ML_MUL, x, 2.0);
    EXPECT_STATUS_ERR(ml_backward(y, NULL), "a gradient argument is needed for a non-scalar output of shape [2]");
    ml_tensor *g3 = ml_zeros(ML_F32, 1, (int64_t[]){3});
    EXPECT_STATUS_ERR(ml_backward(y, g3), "backward: argument 2 has shape [3], expected [2]");
    ml_tensor *g = ml_from_f32(1, (int64_t[]){2}, (float[]){1, 10});
    ck_assert_int_eq(ml_backward(y, g), ML_OK);
    EXPECT(x->grad, 2, 20);
    EXPECT_STATUS_ERR(ml_set_requires_grad(y, false), "only leaf tensors");
    ml_tensor *i = ml_zeros(ML_I32, 1, (int64_t[]){2});
    EXPECT_STATUS_ERR(ml_set_requires_grad(i, true), "only float32 tensors can require gradients, got int32");
    /* backward on a leaf itself */
    ml_tensor *s = leaf(ml_scalar(ML_F32, 3));
    ck_assert_int_eq(ml_backward(s, NULL), ML_OK);
    EXPECT(s->grad, 1);
    DROP(x, y, g3, g, i, s);
}
END_TEST

/* Gradient through every view kind, composed so that each element gets a distinct weight. */
static ml_tensor *views_fn(void *ud, ml_tensor **x) {
    ml_tensor *t = x[0];                              /* [2,3,4] */
    ml_tensor *n = ml_narrow(t, 2, 1, 3);             /* [2,3,3] */
    ml_tensor *s = ml_slice(n, 1, 0, 3, 2);           /* [2,2,3] */
    ml_tensor *p = ml_permute(s, (int[]){2, 0, 1});   /* [3,2,2] */
    ml_tensor *r = ml_reshape(p, 2, (int64_t[]){3, 4}); /* a copy: p is not viewable */
    ml_tensor *sel = ml_select(t, 1, 1);              /* [2,4] */
    ml_tensor *tr = ml_transpose(sel, 0, 1);          /* [4,2] */
    ml_tensor *u = ml_unsqueeze(tr, 0);               /* [1,4,2] */
    ml_tensor *e = ml_expand(u, 3, (int64_t[]){3, 4, 2});
    ml_tensor *e0 = ml_select(e, 2, 1);               /* [3,4] */
    ml_tensor *v = ml_view(t, 2, (int64_t[]){6, 4});
    ml_tensor *vn = ml_narrow(v, 0, 2, 1);            /* [1,4] */
    ml_tensor *sq = ml_squeeze(vn, 0);                /* [4] */
    ml_tensor *m1 = ml_mul(r, r);
    ml_tensor *a = ml_mul(m1, e0), *b = ml_add(a, sq);
    ml_tensor *c = ml_clone(b), *ct = ml_transpose(c, 0, 1), *d = ml_contiguous(ct);
    DROP(n, s, p, r, sel, tr, u, e, e0, v, vn, sq, m1, a, b, c, ct);
    return d;
}

START_TEST(views_gradcheck) {
    ml_rng r;
    ml_rng_init(&r, 3, 3);
    ml_tensor *x = leaf(ml_normal(3, (int64_t[]){2, 3, 4}, 0, 1, &r));
    ml_status st = ml_gradcheck(views_fn, NULL, 1, &x, 1e-3, 3e-3, 2e-2);
    ck_assert_msg(st == ML_OK, "%s", ml_last_error());
    ml_release(x);
}
END_TEST

START_TEST(long_chain_does_not_overflow) {
    ml_tensor *x = leaf(ml_scalar(ML_F32, 1));
    ml_tensor *y = ml_retain(x);
    for (int i = 0; i < 100000; i++) {
        ml_tensor *z = ml_binary_scalar(ML_MUL, y, 1.0);
        ml_release(y);
        y = z;
    }
    ck_assert_int_eq(ml_backward(y, NULL), ML_OK);
    EXPECT(x->grad, 1);
    ml_release(y); /* frees 100000 nodes without deep recursion */
    ml_tensor *y2 = ml_retain(x);
    for (int i = 0; i < 100000; i++) {
        ml_tensor *z = ml_binary_scalar(ML_ADD, y2, 0.0);
        ml_release(y2);
        y2 = z;
    }
    ml_release(y2); /* freed without a backward */
    ml_release(x);
}
END_TEST

/* The slice syntax of t[{"a:b:s"}]: parts optional, defaults 0, size, 1; a bare number is not one. */
START_TEST(slice_syntax) {
    int64_t a, b, st;
    ck_assert(ml_parse_slice("1:3", 10, &a, &b, &st) && a == 1 && b == 3 && st == 1);
    ck_assert(ml_parse_slice(":", 10, &a, &b, &st) && a == 0 && b == 10 && st == 1);
    ck_assert(ml_parse_slice(" -2 : ", 7, &a, &b, &st) && a == -2 && b == 7 && st == 1);
    ck_assert(ml_parse_slice("::2", 5, &a, &b, &st) && a == 0 && b == 5 && st == 2);
    ck_assert(ml_parse_slice("1:-1:3", 9, &a, &b, &st) && a == 1 && b == -1 && st == 3);
    ck_assert(!ml_parse_slice("3", 9, &a, &b, &st));
    ck_assert(!ml_parse_slice("1:2:3:4", 9, &a, &b, &st));
    ck_assert(!ml_parse_slice("a:b", 9, &a, &b, &st));
    ck_assert(!ml_parse_slice("1:2x", 9, &a, &b, &st));
    ck_assert(!ml_parse_slice("", 9, &a, &b, &st));
}
END_TEST

/* tostring's text: the header names shape, dtype, the node and requires_grad, then the elements. */
START_TEST(repr_text) {
    int64_t shape[1] = {2};
    ml_tensor *t = ml_full(ML_F32, 1, shape, 1.5);
    char *s = ml_tensor_repr(t, NULL, &ml_print_profiles[0]);
    ck_assert_str_eq(s, "tensor(shape=[2], dtype=float32)\n[1.5000, 1.5000]");
    free(s);
    ck_assert_int_eq(ml_set_requires_grad(t, true), ML_OK);
    s = ml_tensor_repr(t, "AddBackward", &ml_print_profiles[1]);
    ck_assert_str_eq(s, "tensor(shape=[2], dtype=float32, grad_fn=AddBackward, requires_grad=true)\n[1.50, 1.50]");
    free(s);
    ml_release(t);
}
END_TEST

/* "Did you mean": a typo, a wrong layer, a synonym and a typo of a synonym each find their name;
 * an empty list finds none, and a huge name costs no more than its first 64 bytes. */
START_TEST(closest_names) {
    const char *opts[] = {"lr", "steps", "d_model", "batch_size", NULL};
    ck_assert_str_eq(ml_closest("d_modle", opts), "d_model");
    ck_assert_str_eq(ml_closest("learning_rate", opts), "lr");
    ck_assert_str_eq(ml_closest("num_epochs", opts), "steps");
    const char *sites[] = {"blocks.0.block_input", "blocks.1.block_input", "blocks.1.attention_output", NULL};
    ck_assert_str_eq(ml_closest("blocks.1.block_inptu", sites), "blocks.1.block_input");
    ck_assert_str_eq(ml_closest("blocks.0.resid_pre", sites), "blocks.0.block_input");
    ck_assert_str_eq(ml_closest("blocks.1.attn_outt", sites), "blocks.1.attention_output");
    const char *none[] = {NULL};
    ck_assert_ptr_null(ml_closest("x", none));
    char huge[4096];
    memset(huge, 'a', sizeof huge - 1), huge[sizeof huge - 1] = 0;
    ck_assert_ptr_nonnull(ml_closest(huge, opts));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("tensor");
    TCase *c = tcase_create("core");
    tcase_add_test(c, creation);
    tcase_add_test(c, creation_errors);
    tcase_add_test(c, element_access_is_checked);
    tcase_add_test(c, views_share_storage_and_index);
    tcase_add_test(c, view_reshape_keep_order);
    tcase_add_test(c, views_of_empty_tensors);
    tcase_add_test(c, view_errors);
    tcase_add_test(c, slice_syntax);
    tcase_add_test(c, repr_text);
    tcase_add_test(c, copies);
    tcase_add_test(c, copy_broadcast_overlap_versions);
    tcase_add_test(c, storage_accounting);
    tcase_add_test(c, misc_helpers);
    tcase_add_test(c, closest_names);
    suite_add_tcase(s, c);
    TCase *a = tcase_create("autograd");
    tcase_add_test(a, grad_accumulates_over_two_backwards);
    tcase_add_test(a, op_used_twice_and_diamond);
    tcase_add_test(a, backward_twice_is_an_error);
    tcase_add_test(a, modified_saved_tensor_is_an_error);
    tcase_add_test(a, grad_mode_and_detach);
    tcase_add_test(a, backward_argument_errors);
    tcase_add_test(a, views_gradcheck);
    tcase_add_test(a, long_chain_does_not_overflow);
    suite_add_tcase(s, a);
    return s;
}

int main(void) { return ml_test_run(suite()); }
