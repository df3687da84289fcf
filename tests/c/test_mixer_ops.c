/* Autograd-level mixer ops (src/ops/mixer_ops.h): ml_gradcheck of every op and input, values
 * against the raw kernels, the state-patching composition, optional outputs, argument errors. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/tensor.h"
#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/ops.h"
#include "testutil.h"

/* uniform [lo, hi) tensor of the given dims that requires grad */
static ml_tensor *ug(uint64_t seed, double lo, double hi, int nd, ...) {
    int64_t shape[ML_MAX_DIMS];
    va_list ap;
    va_start(ap, nd);
    for (int i = 0; i < nd; i++) shape[i] = va_arg(ap, int);
    va_end(ap);
    ml_rng r;
    ml_rng_init(&r, seed, 11);
    ml_tensor *t = ml_uniform(nd, shape, lo, hi, &r);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(ml_set_requires_grad(t, true), ML_OK);
    return t;
}

static void gc(const char *what, ml_gradcheck_fn fn, void *ud, int n, ml_tensor **in) {
    ml_status st = ml_gradcheck(fn, ud, n, in, 1e-3, 3e-3, 2e-2);
    ck_assert_msg(st == ML_OK, "%s: %s", what, ml_last_error());
}
static void release_n(int n, ml_tensor **t) {
    for (int i = 0; i < n; i++) ml_release(t[i]);
}
static void expect_error(ml_tensor *r, const char *msg) {
    ck_assert_ptr_null(r);
    ck_assert_msg(strstr(ml_last_error(), msg) != NULL, "error \"%s\" lacks \"%s\"", ml_last_error(), msg);
}

/* ------------------------------------------------------------------ causal conv1d */

static ml_tensor *g_conv(void *ud, ml_tensor **x) { return ml_causal_conv1d(x[0], x[1], ud ? NULL : x[2]); }

START_TEST(conv1d_gradcheck_and_values) {
    ml_tensor *in[3] = {ug(1, -1, 1, 3, 2, 6, 3), ug(2, -1, 1, 3, 3, 1, 4), ug(3, -1, 1, 1, 3)};
    gc("causal_conv1d", g_conv, NULL, 3, in);
    gc("causal_conv1d no bias", g_conv, (void *)1, 2, in);
    /* values equal the raw kernel's */
    ml_tensor *y = ml_causal_conv1d(in[0], in[1], in[2]);
    float ref[36];
    mlk_conv1d_fwd(2, 6, 3, 4, ml_f32(in[0]), ml_f32(in[1]), ml_f32(in[2]), ref);
    ck_assert(memcmp(ref, ml_f32(y), sizeof ref) == 0);
    ck_assert_ptr_nonnull(y->grad_fn);
    ck_assert_str_eq(y->grad_fn->name, "CausalConv1dBackward");
    ml_release(y);
    /* no graph in no-grad mode */
    bool old = ml_set_grad_enabled(false);
    y = ml_causal_conv1d(in[0], in[1], in[2]);
    ck_assert_ptr_null(y->grad_fn);
    ml_release(y);
    ml_set_grad_enabled(old);
    release_n(3, in);
}
END_TEST

START_TEST(conv1d_errors) {
    ml_tensor *x = ug(1, -1, 1, 3, 2, 5, 5), *w = ug(2, -1, 1, 2, 4, 3), *b = ug(3, -1, 1, 1, 4);
    expect_error(ml_causal_conv1d(x, w, NULL),
                 "causal_conv1d: argument 2 has shape [4,3], expected [C,K] or [C,1,K] with C=5");
    ml_tensor *w5 = ug(4, -1, 1, 2, 5, 3);
    expect_error(ml_causal_conv1d(x, w5, b), "causal_conv1d: argument 3 has shape [4], expected [C] with C=5");
    ml_tensor *ids = ml_zeros(ML_I32, 3, (int64_t[]){2, 5, 5});
    expect_error(ml_causal_conv1d(ids, w5, NULL), "causal_conv1d: argument 1 expected a float32 tensor");
    ml_release(x), ml_release(w), ml_release(b), ml_release(w5), ml_release(ids);
}
END_TEST

/* ------------------------------------------------------------------ long conv */

static ml_tensor *g_lc1(void *ud, ml_tensor **x) { return ml_long_conv(x[0], x[1], x[2], 1); }
static ml_tensor *g_lc2(void *ud, ml_tensor **x) { return ml_long_conv(x[0], x[1], x[2], 2); }
static ml_tensor *g_lc_noskip(void *ud, ml_tensor **x) { return ml_long_conv(x[0], x[1], NULL, 1); }

START_TEST(long_conv_gradcheck) {
    /* the filter has more rows (9) than the sequence (6): rows ≥ L get zero gradient */
    ml_tensor *in[3] = {ug(5, -1, 1, 3, 2, 6, 4), ug(6, -1, 1, 2, 9, 4), ug(7, -1, 1, 1, 4)};
    gc("long_conv G=1", g_lc1, NULL, 3, in);
    gc("long_conv no skip", g_lc_noskip, NULL, 2, in);
    ml_tensor *in2[3] = {ug(8, -1, 1, 3, 2, 6, 4), ug(9, -1, 1, 2, 6, 2), ug(10, -1, 1, 1, 2)};
    gc("long_conv G=2", g_lc2, NULL, 3, in2);
    expect_error(ml_long_conv(in[0], in[1], in[2], 3), "long_conv: argument 4 (channels per filter) must divide C=4");
    ml_tensor *kshort = ug(11, -1, 1, 2, 5, 4);
    expect_error(ml_long_conv(in[0], kshort, NULL, 1), "long_conv: argument 2 has shape [5,4], expected at least L=6");
    ml_release(kshort);
    release_n(3, in), release_n(3, in2);
}
END_TEST

/* ------------------------------------------------------------------ selective scan */

static ml_tensor *g_scan(void *ud, ml_tensor **x) {
    return ml_selective_scan(x[0], x[1], x[2], x[3], x[4], x[5], ud ? x[6] : NULL, NULL, NULL);
}

static ml_tensor **scan_inputs(ml_tensor **in, uint64_t s, int B, int L, int E, int N) {
    in[0] = ug(s + 1, -1, 1, 3, B, L, E);
    in[1] = ug(s + 2, 0.1, 0.8, 3, B, L, E);
    in[2] = ug(s + 3, -2.0, -0.3, 2, E, N);
    in[3] = ug(s + 4, -1, 1, 3, B, L, N);
    in[4] = ug(s + 5, -1, 1, 3, B, L, N);
    in[5] = ug(s + 6, -1, 1, 1, E);
    in[6] = ug(s + 7, -1, 1, 3, B, E, N);
    return in;
}

START_TEST(selective_scan_gradcheck) {
    ml_tensor *in[7];
    scan_inputs(in, 20, 2, 5, 3, 4);
    gc("selective_scan", g_scan, NULL, 6, in);
    gc("selective_scan with h0", g_scan, (void *)1, 7, in);
    release_n(7, in);
}
END_TEST

START_TEST(selective_scan_states_and_patching) {
    int B = 2, L = 7, E = 3, N = 4, p = 3;
    ml_tensor *in[7];
    scan_inputs(in, 40, B, L, E, N);
    ml_tensor *hs = NULL, *hl = NULL;
    ml_tensor *y = ml_selective_scan(in[0], in[1], in[2], in[3], in[4], in[5], NULL, &hs, &hl);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(hs->ndim, 4);
    ck_assert_int_eq(hs->shape[3], N);
    ck_assert_ptr_null(hs->grad_fn);
    /* hlast is the last state */
    for (int b = 0; b < B; b++)
        ck_assert(memcmp(ml_f32(hl) + b * E * N, ml_f32(hs) + ((size_t)b * L + L - 1) * E * N, sizeof(float) * E * N) ==
                  0);
    /* "replace h_p": the run over [p, L) from h0 = h_p with Δ_p = 0 reproduces y[p..L) when the
     * replacement is the state itself; a different replacement changes y_p onwards */
    ml_tensor *sl[5];
    for (int i = 0; i < 5; i++) {
        ml_tensor *v = ml_narrow(in[i == 2 ? 0 : i], 1, p, L - p);
        sl[i] = i == 2 ? NULL : ml_contiguous(v);
        ml_release(v);
    }
    bool old = ml_set_grad_enabled(false);
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++) ml_f32(sl[1])[((size_t)b * (L - p)) * E + e] = 0.0f; /* Δ at position p */
    ml_tensor *hp = ml_select(hs, 1, p), *h0 = ml_contiguous(hp);
    ml_tensor *y2 = ml_selective_scan(sl[0], sl[1], in[2], sl[3], sl[4], in[5], h0, NULL, NULL);
    for (int b = 0; b < B; b++)
        for (int t = p; t < L; t++)
            for (int e = 0; e < E; e++)
                ck_assert_close(ml_f32(y2)[((size_t)b * (L - p) + t - p) * E + e], ml_f32(y)[((size_t)b * L + t) * E + e],
                                1e-6, 1e-5);
    ml_f32(h0)[0] += 1.0f; /* patch one state entry of example 0 */
    ml_tensor *y3 = ml_selective_scan(sl[0], sl[1], in[2], sl[3], sl[4], in[5], h0, NULL, NULL);
    ck_assert(fabs(ml_f32(y3)[0] - ml_f32(y2)[0]) > 1e-4); /* y_p of channel 0 sees the patch */
    ml_set_grad_enabled(old);
    ml_release(y), ml_release(y2), ml_release(y3), ml_release(hs), ml_release(hl), ml_release(hp), ml_release(h0);
    for (int i = 0; i < 5; i++) ml_release(sl[i]);
    release_n(7, in);
}
END_TEST

START_TEST(selective_scan_attention_and_errors) {
    int B = 2, L = 5, E = 3, N = 4;
    ml_tensor *in[7];
    scan_inputs(in, 60, B, L, E, N);
    ml_tensor *y = ml_selective_scan(in[0], in[1], in[2], in[3], in[4], in[5], NULL, NULL, NULL);
    ml_tensor *al = ml_selective_scan_attention(in[1], in[2], in[3], in[4], in[5]);
    ck_assert_int_eq(al->shape[2], L);
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++)
            for (int t = 0; t < L; t++) {
                double acc = 0;
                for (int s = 0; s < L; s++)
                    acc += (double)ml_f32(al)[(((size_t)b * E + e) * L + t) * L + s] * ml_f32(in[0])[((size_t)b * L + s) * E + e];
                ck_assert_close(acc, ml_f32(y)[((size_t)b * L + t) * E + e], 1e-5, 1e-5);
            }
    expect_error(ml_selective_scan(in[0], in[1], in[2], in[4], in[5], in[5], NULL, NULL, NULL),
                 "selective_scan: argument 5 has shape [3], expected [B,L,N]=[2,5,4]");
    expect_error(ml_selective_scan(in[0], in[1], in[2], in[3], in[4], in[5], in[3], NULL, NULL),
                 "selective_scan: argument 7 has shape [2,5,4], expected [B,E,N]=[2,3,4]");
    ml_release(y), ml_release(al);
    release_n(7, in);
}
END_TEST

static ml_tensor *g_scan_ex(void *ud, ml_tensor **x) {
    return ml_selective_scan_ex(x[0], x[1], x[2], x[3], x[4], x[5], x[6], ud ? x[7] : NULL, true, NULL, NULL);
}
static ml_tensor *g_conv_silu(void *ud, ml_tensor **x) { return ml_causal_conv1d_silu(x[0], x[1], x[2]); }
/* inputs that are column slices of wider tensors (read in place by the kernels) */
static ml_tensor *g_conv_slice(void *ud, ml_tensor **x) {
    ml_tensor *xs = ml_narrow(x[0], 2, 2, 3);
    ml_tensor *y = ud ? ml_causal_conv1d_silu(xs, x[1], x[2]) : ml_causal_conv1d(xs, x[1], x[2]);
    ml_release(xs);
    return y;
}
static ml_tensor *g_scan_zslice(void *ud, ml_tensor **x) {
    ml_tensor *zs = ml_narrow(x[6], 2, 3, 3);
    ml_tensor *y = ml_selective_scan_ex(x[0], x[1], x[2], x[3], x[4], x[5], zs, NULL, true, NULL, NULL);
    ml_release(zs);
    return y;
}

START_TEST(fused_scan_and_conv_silu) {
    ml_tensor *in[8];
    scan_inputs(in, 120, 2, 5, 3, 4);
    ml_tensor *h0 = in[6];
    in[6] = ug(128, -2, 2, 3, 2, 5, 3); /* z */
    in[7] = h0;
    ml_release(in[1]);
    in[1] = ug(129, -2.0, 1.0, 3, 2, 5, 3); /* raw Δ */
    ml_f32(in[1])[4] = 25.0f;               /* above the softplus threshold */
    gc("selective_scan_ex", g_scan_ex, NULL, 7, in);
    gc("selective_scan_ex with h0", g_scan_ex, (void *)1, 8, in);
    /* equals the unfused composition softplus → scan → ⊙ silu(z) */
    ml_tensor *y = ml_selective_scan_ex(in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], true, NULL, NULL);
    ml_tensor *dl = ml_unary(ML_SOFTPLUS, in[1]);
    ml_tensor *ys = ml_selective_scan(in[0], dl, in[2], in[3], in[4], in[5], in[7], NULL, NULL);
    ml_tensor *sz = ml_unary(ML_SILU, in[6]), *ref = ml_mul(ys, sz);
    ck_assert(ml_allclose(y, ref, 1e-5, 1e-6));
    ml_release(y), ml_release(dl), ml_release(ys), ml_release(sz), ml_release(ref);
    release_n(8, in);
    /* conv + silu */
    ml_tensor *cv[3] = {ug(130, -1, 1, 3, 2, 6, 3), ug(131, -1, 1, 2, 3, 4), ug(132, -1, 1, 1, 3)};
    gc("causal_conv1d_silu", g_conv_silu, NULL, 3, cv);
    ml_tensor *a = ml_causal_conv1d_silu(cv[0], cv[1], cv[2]), *pre = ml_causal_conv1d(cv[0], cv[1], cv[2]);
    ml_tensor *b = ml_unary(ML_SILU, pre);
    ck_assert(ml_allclose(a, b, 1e-6, 1e-6));
    ml_release(a), ml_release(pre), ml_release(b);
    /* a column slice of a wider tensor gives the same values as its dense copy, and gradchecks */
    ml_tensor *wide = ug(133, -1, 1, 3, 2, 6, 7);
    ml_tensor *sl = ml_narrow(wide, 2, 2, 3), *dense = ml_contiguous(sl);
    ck_assert_int_eq(sl->stride[1], 7);
    ml_tensor *y1 = ml_causal_conv1d(sl, cv[1], cv[2]), *y2 = ml_causal_conv1d(dense, cv[1], cv[2]);
    ck_assert(ml_equal(y1, y2));
    ml_tensor *gin[3] = {wide, cv[1], cv[2]};
    gc("causal_conv1d on a slice", g_conv_slice, NULL, 3, gin);
    gc("causal_conv1d_silu on a slice", g_conv_slice, (void *)1, 3, gin);
    ml_release(y1), ml_release(y2), ml_release(sl), ml_release(dense), ml_release(wide);
    release_n(3, cv);
    ml_tensor *sc[7];
    scan_inputs(sc, 140, 2, 4, 3, 2);
    ml_release(sc[6]);
    sc[6] = ug(147, -2, 2, 3, 2, 4, 7); /* z is columns 3..5 of this */
    gc("selective_scan_ex with a z slice", g_scan_zslice, NULL, 7, sc);
    release_n(7, sc);
}
END_TEST

/* ------------------------------------------------------------------ Based */

static ml_tensor *g_based(void *ud, ml_tensor **x) {
    return ml_based_linear_attention(x[0], x[1], x[2], ud ? 2 : 1, 1e-12, NULL);
}
static ml_tensor *g_taylor(void *ud, ml_tensor **x) { return ml_taylor_features(x[0]); }

START_TEST(based_gradcheck_and_pattern) {
    ml_tensor *in[3] = {ug(70, -1, 1, 3, 2, 6, 8), ug(71, -1, 1, 3, 2, 6, 8), ug(72, -1, 1, 3, 2, 6, 6)};
    gc("based H=1", g_based, NULL, 3, in);
    gc("based H=2", g_based, (void *)1, 3, in);
    ml_tensor *pat = NULL, *y = ml_based_linear_attention(in[0], in[1], in[2], 2, 1e-12, &pat);
    ck_assert_int_eq(pat->ndim, 4);
    ck_assert_int_eq(pat->shape[1], 2);
    for (int bh = 0; bh < 4; bh++)
        for (int t = 0; t < 6; t++) {
            double s = 0;
            for (int u = 0; u < 6; u++) s += ml_f32(pat)[((size_t)bh * 6 + t) * 6 + u];
            ck_assert_close(s, 1.0, 1e-5, 0);
        }
    /* the kv states reproduce y: y_t = φ(q_t)ᵀS_t / (φ(q_t)·z_t + eps) */
    ml_tensor *z = NULL, *S = ml_based_kv_state(in[1], in[2], 2, &z);
    ck_assert_int_eq(S->ndim, 5);
    ck_assert_int_eq(S->shape[3], 1 + 4 + 16);
    ml_tensor *qv = ml_view(in[0], 4, (int64_t[]){2, 6, 2, 4}), *phq = ml_taylor_features(qv);
    for (int r = 0; r < 2 * 6 * 2; r++) {
        const float *pq = ml_f32(phq) + r * 21, *St = ml_f32(S) + (size_t)r * 21 * 3, *zt = ml_f32(z) + r * 21;
        double den = 1e-12;
        for (int p = 0; p < 21; p++) den += (double)pq[p] * zt[p];
        for (int j = 0; j < 3; j++) {
            double num = 0;
            for (int p = 0; p < 21; p++) num += (double)pq[p] * St[p * 3 + j];
            ck_assert_close(num / den, ml_f32(y)[r * 3 + j], 1e-5, 1e-4);
        }
    }
    ml_release(S), ml_release(z), ml_release(phq), ml_release(qv);
    ml_release(pat), ml_release(y);
    ml_tensor *x = ug(73, -1, 1, 3, 2, 3, 8);
    gc("taylor_features", g_taylor, NULL, 1, &x);
    ml_tensor *phi = ml_taylor_features(x);
    ck_assert_int_eq(phi->shape[2], 73);
    ml_release(phi), ml_release(x);
    expect_error(ml_based_linear_attention(in[0], in[1], in[2], 3, 1e-12, NULL), "based_linear_attention: argument 4");
    release_n(3, in);
}
END_TEST

/* ------------------------------------------------------------------ delta rule */

static ml_tensor *g_delta(void *ud, ml_tensor **x) {
    return ml_delta_rule(x[0], x[1], x[2], x[3], ud ? 2 : 1, 0.5, ud ? x[4] : NULL, NULL, NULL);
}
static ml_tensor *g_l2(void *ud, ml_tensor **x) { return ml_l2_normalize(x[0], 1e-6); }

START_TEST(delta_rule_gradcheck_and_states) {
    ml_tensor *in[5] = {ug(80, -1, 1, 3, 2, 5, 4), ug(81, -0.6, 0.6, 3, 2, 5, 4), ug(82, -1, 1, 3, 2, 5, 6),
                        ug(83, 0.1, 0.9, 3, 2, 5, 2), ug(84, -1, 1, 4, 2, 2, 2, 3)};
    ml_tensor *b1 = ug(85, 0.1, 0.9, 3, 2, 5, 1);
    ml_tensor *in1[4] = {in[0], in[1], in[2], b1};
    gc("delta_rule H=1", g_delta, NULL, 4, in1);
    gc("delta_rule H=2 with S0", g_delta, (void *)1, 5, in);
    ml_tensor *st = NULL, *sl = NULL, *o = ml_delta_rule(in[0], in[1], in[2], in[3], 2, 0.5, in[4], &st, &sl);
    ck_assert_int_eq(st->ndim, 5);
    ck_assert(memcmp(ml_f32(sl), ml_f32(st) + (size_t)4 * 2 * 6, sizeof(float) * 2 * 6) == 0); /* b=0: S_{L-1} */
    ml_release(o), ml_release(st), ml_release(sl);
    ml_tensor *x = ug(86, -1, 1, 3, 2, 3, 4);
    gc("l2_normalize", g_l2, NULL, 1, &x);
    ml_release(x);
    expect_error(ml_delta_rule(in[0], in[1], in[2], b1, 2, 0.5, NULL, NULL, NULL),
                 "delta_rule: argument 4 has shape [2,5,1], expected [B,L,H]=[2,5,2]");
    release_n(5, in), ml_release(b1);
}
END_TEST

/* ------------------------------------------------------------------ H3 */

static ml_tensor *g_shift(void *ud, ml_tensor **x) { return ml_h3_shift_kernel(x[0], x[1], 5); }
static ml_tensor *g_s4d(void *ud, ml_tensor **x) { return ml_s4d_kernel(x[0], x[1], x[2], x[3], x[4], 6); }
static ml_tensor *g_outer(void *ud, ml_tensor **x) { return ml_h3_outer(x[0], x[1]); }
static ml_tensor *g_gate(void *ud, ml_tensor **x) { return ml_h3_gate(x[0], x[1]); }

START_TEST(h3_gradchecks) {
    ml_tensor *sh[2] = {ug(90, -1, 1, 2, 3, 8), ug(91, -1, 1, 3, 1, 3, 8)};
    gc("h3_shift_kernel", g_shift, NULL, 2, sh);
    ml_tensor *sd[5] = {ug(92, -1, 1, 4, 1, 2, 3, 2), ug(93, -4.5, -0.7, 1, 2), ug(94, 0.5, 1.5, 3, 2, 3, 2),
                        ug(95, -1.5, 0.0, 2, 2, 3), ug(96, 0.0, 3.0, 2, 2, 3)};
    gc("s4d_kernel", g_s4d, NULL, 5, sd);
    ml_tensor *K = ml_s4d_kernel(sd[0], sd[1], sd[2], sd[3], sd[4], 6);
    ck_assert_int_eq(K->shape[0], 6);
    ck_assert_int_eq(K->shape[1], 2);
    ml_release(K);
    ml_tensor *ov[2] = {ug(97, -1, 1, 3, 2, 3, 4), ug(98, -1, 1, 3, 2, 3, 4)};
    gc("h3_outer", g_outer, NULL, 2, ov);
    ml_tensor *gt[2] = {ug(99, -1, 1, 3, 2, 3, 4), ug(100, -1, 1, 3, 2, 3, 8)};
    gc("h3_gate", g_gate, NULL, 2, gt);
    expect_error(ml_h3_shift_kernel(sh[0], sh[1], 9), "h3_shift_kernel: argument 3 (length) must be in [0, N=8]");
    release_n(2, sh), release_n(5, sd), release_n(2, ov), release_n(2, gt);
}
END_TEST

/* ------------------------------------------------------------------ Hyena filter */

static ml_tensor *g_hyena(void *decay, ml_tensor **x) {
    return ml_hyena_filter(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], decay);
}

START_TEST(hyena_filter_gradcheck) {
    int L = 5, W = 4, C = 3;
    ml_tensor *p[9] = {ug(110, -1, 1, 2, L, 3),  ug(111, -1, 1, 2, W, 3), ug(112, -0.5, 0.5, 1, W),
                       ug(113, -1, 1, 2, W, W),  ug(114, -0.5, 0.5, 1, W), ug(115, -1, 1, 2, W, W),
                       ug(116, -0.5, 0.5, 1, W), ug(117, 0.5, 1.5, 2, 1, W), ug(118, -1, 1, 2, C, W)};
    float tv[5], dv[3] = {-3.0f, -9.0f, -15.0f};
    for (int i = 0; i < L; i++) tv[i] = (float)i / 1023.0f * 50.0f;
    ml_tensor *t = ml_from_f32(1, (int64_t[]){L}, tv), *dl = ml_from_f32(1, (int64_t[]){C}, dv);
    ml_tensor *decay = ml_hyena_decay(t, dl, L);
    ck_assert_ptr_nonnull(decay);
    gc("hyena_filter", g_hyena, decay, 9, p);
    ml_release(t), ml_release(dl), ml_release(decay);
    release_n(9, p);
}
END_TEST

START_TEST(empty_sequences) {
    /* L = 0 gives empty outputs (and empty gradients), not errors */
    ml_tensor *x = ug(150, -1, 1, 3, 2, 0, 4), *w = ug(151, -1, 1, 2, 4, 3), *k = ug(152, -1, 1, 2, 0, 4);
    ml_tensor *y = ml_causal_conv1d(x, w, NULL);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(ml_numel(y), 0);
    ml_tensor *yl = ml_long_conv(x, k, NULL, 1);
    ck_assert_ptr_nonnull(yl);
    ml_tensor *in[7];
    scan_inputs(in, 160, 2, 0, 3, 4);
    ml_tensor *hl = NULL, *ys = ml_selective_scan(in[0], in[1], in[2], in[3], in[4], in[5], in[6], NULL, &hl);
    ck_assert_ptr_nonnull(ys);
    ck_assert(ml_equal(hl, in[6])); /* no token: the last state is the initial one */
    ml_tensor *l1 = ml_sum_all(ys), *l2 = ml_sum_all(yl), *l3 = ml_sum_all(y);
    ck_assert_int_eq(ml_backward(l1, NULL), ML_OK);
    ck_assert_int_eq(ml_backward(l2, NULL), ML_OK);
    ck_assert_int_eq(ml_backward(l3, NULL), ML_OK);
    ml_tensor *q = ug(161, -1, 1, 3, 2, 0, 8), *o = ml_based_linear_attention(q, q, x, 1, 1e-12, NULL);
    ck_assert_ptr_nonnull(o);
    ml_tensor *bt = ug(162, 0.1, 0.9, 3, 2, 0, 1), *od = ml_delta_rule(x, x, x, bt, 1, 0.5, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(od);
    ml_release(o), ml_release(q), ml_release(bt), ml_release(od), ml_release(l1), ml_release(l2), ml_release(l3);
    ml_release(x), ml_release(w), ml_release(k), ml_release(y), ml_release(yl), ml_release(ys), ml_release(hl);
    release_n(7, in);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("mixer_ops");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, conv1d_gradcheck_and_values);
    tcase_add_test(tc, conv1d_errors);
    tcase_add_test(tc, long_conv_gradcheck);
    tcase_add_test(tc, selective_scan_gradcheck);
    tcase_add_test(tc, selective_scan_states_and_patching);
    tcase_add_test(tc, selective_scan_attention_and_errors);
    tcase_add_test(tc, fused_scan_and_conv_silu);
    tcase_add_test(tc, based_gradcheck_and_pattern);
    tcase_add_test(tc, delta_rule_gradcheck_and_states);
    tcase_add_test(tc, h3_gradchecks);
    tcase_add_test(tc, hyena_filter_gradcheck);
    tcase_add_test(tc, empty_sequences);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
