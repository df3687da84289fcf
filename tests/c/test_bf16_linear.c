/* ml_linear in bf16 (the thread's linear precision, ops.h): its forward, input gradient and weight
 * gradient are the bf16 kernels' bits (gemm_bf16.c, tested on their own in test_gemm_bf16.c), and
 * so are attention's per-sequence products (mlk_gemm_bf16); the backward keeps the precision of its
 * forward whatever the thread's precision when it runs; fp32
 * stays the fp32 kernels' bits; a model's forward sets and restores the thread's precision; and
 * without AVX512_BF16 (MECHLAB_NO_BF16 in a child process) a bf16 model cannot be made and a
 * loaded one cannot run, each with an error naming the option and the instruction. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "autograd/autograd.h"
#include "nn/model.h"
#include "ops/kernels.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "testutil.h"

static unsigned long long rng_state = 0x2545f4914f6cdd1dULL;

static ml_tensor *rnd(int ndim, const int64_t *shape, bool grad) {
    ml_tensor *t = ml_empty(ML_F32, ndim, shape);
    ck_assert_ptr_nonnull(t);
    for (int64_t i = 0; i < ml_numel(t); i++) ml_f32(t)[i] = (float)(2.0 * ml_test_urand(&rng_state) - 1.0);
    t->requires_grad = grad;
    return t;
}

static bool same_bits(const float *a, const float *b, int64_t n) { return !memcmp(a, b, sizeof(float) * (size_t)n); }

/* x (N, in), W (out, in), b (out); the loss Σ y·c for a fixed c, so dy = c. */
START_TEST(linear_bf16_is_the_kernels) {
    if (!mlk_have_bf16()) {
        printf("test_bf16_linear: skipped: %s\n", MLK_BF16_MISSING);
        return;
    }
    enum { N = 37, IN = 45, OUT = 70 };
    ml_tensor *x = rnd(2, (int64_t[]){N, IN}, true), *w = rnd(2, (int64_t[]){OUT, IN}, true);
    ml_tensor *b = rnd(1, (int64_t[]){OUT}, true), *c = rnd(2, (int64_t[]){N, OUT}, false);
    for (int prec = 0; prec < 2; prec++) {
        ml_precision old = ml_set_linear_precision(prec ? ML_PRECISION_BF16 : ML_PRECISION_FP32);
        ml_tensor *y = ml_linear(x, w, b);
        ck_assert_ptr_nonnull(y);
        /* the backward runs in the forward's precision: the thread's is the other one now */
        ml_set_linear_precision(prec ? ML_PRECISION_FP32 : ML_PRECISION_BF16);
        ml_tensor *yc = ml_mul(y, c), *loss = yc ? ml_sum_all(yc) : NULL;
        ck_assert_ptr_nonnull(loss);
        ck_assert_int_eq(ml_backward(loss, NULL), ML_OK);
        ml_set_linear_precision(old);
        float *ry = malloc(sizeof(float) * N * OUT), *rdx = malloc(sizeof(float) * N * IN);
        float *rdw = malloc(sizeof(float) * OUT * IN);
        if (prec) {
            ck_assert_int_eq(mlk_gemm_nt_bf16(N, OUT, IN, ml_f32(x), ml_f32(w), ml_f32(b), ry), 0);
            ck_assert_int_eq(mlk_gemm_nn_bf16(N, IN, OUT, ml_f32(c), ml_f32(w), rdx), 0);
            ck_assert_int_eq(mlk_gemm_tn_bf16(OUT, IN, N, ml_f32(c), ml_f32(x), false, rdw), 0);
        } else {
            ck_assert_int_eq(mlk_gemm_nt(N, OUT, IN, ml_f32(x), ml_f32(w), ml_f32(b), ry), 0);
            ck_assert_int_eq(mlk_gemm_nn(N, IN, OUT, ml_f32(c), ml_f32(w), rdx), 0);
            ck_assert_int_eq(mlk_gemm_tn(OUT, IN, N, ml_f32(c), ml_f32(x), false, rdw), 0);
        }
        ck_assert_msg(same_bits(ml_f32(y), ry, N * OUT), "precision %d: forward", prec);
        ck_assert_msg(same_bits(ml_f32(x->grad), rdx, N * IN), "precision %d: dx", prec);
        ck_assert_msg(same_bits(ml_f32(w->grad), rdw, OUT * IN), "precision %d: dW", prec);
        if (prec) { /* bf16 did run: its forward differs from fp32's */
            ck_assert_int_eq(mlk_gemm_nt(N, OUT, IN, ml_f32(x), ml_f32(w), ml_f32(b), ry), 0);
            ck_assert(!same_bits(ml_f32(y), ry, N * OUT));
        }
        free(ry), free(rdx), free(rdw);
        ml_release(y), ml_release(yc), ml_release(loss);
        ml_release(x->grad), ml_release(w->grad), ml_release(b->grad);
        x->grad = w->grad = b->grad = NULL;
    }
    ml_release(x), ml_release(w), ml_release(b), ml_release(c);
}
END_TEST

/* Attention's per-sequence products in the forward's precision (nn_ops.c): with the thread in
 * bf16 the scores and the context are mlk_gemm_bf16's bits, and so are the gradients of both ops
 * (dQ, dK of the scores; dP, dV of apply) with the thread switched back to fp32 before the
 * backward; fp32's scores differ (bf16 did run). One backward per op, so that each gradient of qkv
 * is one op's alone. */
START_TEST(attention_bf16_is_the_kernel) {
    if (!mlk_have_bf16()) return;
    enum { B = 2, L = 37, D = 32, H = 2, DH = D / H, ROW = 3 * D };
    ml_tensor *qkv = rnd(3, (int64_t[]){B, L, ROW}, true), *P = rnd(4, (int64_t[]){B, H, L, L}, true);
    ml_tensor *cs = rnd(4, (int64_t[]){B, H, L, L}, false), *cc = rnd(3, (int64_t[]){B, L, D}, false);
    const float *q0 = ml_f32(qkv), *pp = ml_f32(P), *pcs = ml_f32(cs), *pcc = ml_f32(cc);
    float scale = (float)(1.0 / sqrt((double)DH)), ref[L * L], masked[L * L];
    for (int op = 0; op < 2; op++) {
        ml_precision old = ml_set_linear_precision(ML_PRECISION_BF16);
        ml_tensor *y = op == 0 ? ml_attention_scores(qkv, H) : ml_attention_apply(P, qkv, H);
        ck_assert_ptr_nonnull(y);
        ml_set_linear_precision(ML_PRECISION_FP32);
        ml_tensor *yc = ml_mul(y, op == 0 ? cs : cc), *loss = yc ? ml_sum_all(yc) : NULL;
        ck_assert_ptr_nonnull(loss);
        ck_assert_int_eq(ml_backward(loss, NULL), ML_OK);
        ml_set_linear_precision(old);
        const float *gq = ml_f32(qkv->grad);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const float *q = q0 + b * L * ROW + h * DH, *k = q + D, *v = q + 2 * D, *p = pp + (b * H + h) * L * L;
                if (op == 0) {
                    const float *st = ml_f32(y) + (b * H + h) * L * L, *c = pcs + (b * H + h) * L * L;
                    ck_assert_int_eq(mlk_gemm_bf16(L, L, DH, q, ROW, 1, k, ROW, false, scale, false, ref, L), 0);
                    for (int t = 0; t < L; t++)
                        for (int s = 0; s < L; s++) {
                            if (s > t) ref[t * L + s] = -10000.0f;
                            masked[t * L + s] = s <= t ? c[t * L + s] : 0.0f;
                        }
                    ck_assert_msg(same_bits(st, ref, L * L), "scores (%d, %d)", b, h);
                    ck_assert_int_eq(mlk_gemm(L, L, DH, q, ROW, 1, k, ROW, false, scale, false, ref, L), 0);
                    ck_assert(!same_bits(st, ref, L)); /* the first row: fp32 gives other bits */
                    float dq[L * DH], dk[L * DH];
                    ck_assert_int_eq(mlk_gemm_bf16(L, DH, L, masked, L, 1, k, ROW, true, scale, false, dq, DH), 0);
                    ck_assert_int_eq(mlk_gemm_bf16(L, DH, L, masked, 1, L, q, ROW, true, scale, false, dk, DH), 0);
                    for (int t = 0; t < L; t++) {
                        const float *g = gq + (b * L + t) * ROW + h * DH;
                        ck_assert_msg(same_bits(g, dq + t * DH, DH), "dQ (%d, %d) row %d", b, h, t);
                        ck_assert_msg(same_bits(g + D, dk + t * DH, DH), "dK (%d, %d) row %d", b, h, t);
                    }
                } else {
                    const float *dc = pcc + b * L * D + h * DH;
                    float ctx[L * DH], dv[L * DH];
                    ck_assert_int_eq(mlk_gemm_bf16(L, DH, L, p, L, 1, v, ROW, true, 1.0f, false, ctx, DH), 0);
                    ck_assert_int_eq(mlk_gemm_bf16(L, L, DH, dc, D, 1, v, ROW, false, 1.0f, false, ref, L), 0);
                    ck_assert_int_eq(mlk_gemm_bf16(L, DH, L, p, 1, L, dc, D, true, 1.0f, false, dv, DH), 0);
                    ck_assert_msg(same_bits(ml_f32(P->grad) + (b * H + h) * L * L, ref, L * L), "dP (%d, %d)", b, h);
                    for (int t = 0; t < L; t++) {
                        const float *g = gq + (b * L + t) * ROW + h * DH;
                        ck_assert_msg(same_bits(ml_f32(y) + (b * L + t) * D + h * DH, ctx + t * DH, DH),
                                      "context (%d, %d) row %d", b, h, t);
                        ck_assert_msg(same_bits(g + 2 * D, dv + t * DH, DH), "dV (%d, %d) row %d", b, h, t);
                    }
                }
            }
        ml_release(y), ml_release(yc), ml_release(loss);
        ml_release(qkv->grad), ml_release(P->grad);
        qkv->grad = P->grad = NULL;
    }
    ml_release(qkv), ml_release(P), ml_release(cs), ml_release(cc);
}
END_TEST

/* A model's forward runs in its precision and leaves the thread's as it found it; inside
 * ml_model_force_fp32 a bf16 model gives the fp32 model's bits. */
START_TEST(model_scopes_the_precision) {
    if (!mlk_have_bf16()) return;
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    c.d_model = 16, c.vocab = 30, c.max_pos = 16;
    ml_model *f = ml_model_new(&c);
    snprintf(c.precision, sizeof c.precision, "bf16");
    ml_model *h = ml_model_new(&c);
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(h);
    ml_tensor *tok = ml_test_tokens(2, 9, 30, 7);
    bool old_grad = ml_set_grad_enabled(false);
    ck_assert_int_eq(ml_linear_precision(), ML_PRECISION_FP32);
    ml_tensor *yf = ml_model_hidden(f, tok, NULL), *yh = ml_model_hidden(h, tok, NULL);
    ck_assert_int_eq(ml_linear_precision(), ML_PRECISION_FP32);
    ck_assert(!same_bits(ml_f32(yf), ml_f32(yh), ml_numel(yf)));
    bool was = ml_model_force_fp32(true);
    ml_tensor *yh32 = ml_model_hidden(h, tok, NULL);
    ml_model_force_fp32(was);
    ck_assert(same_bits(ml_f32(yf), ml_f32(yh32), ml_numel(yf)));
    ml_set_grad_enabled(old_grad);
    ml_release(yf), ml_release(yh), ml_release(yh32), ml_release(tok);
    ml_model_free(f), ml_model_free(h);
}
END_TEST

/* Bad values of the option, through the config's check and the JSON reader. */
START_TEST(precision_option_checked) {
    ml_model_config c;
    ml_model_config_defaults(&c, "mamba");
    ck_assert_str_eq(c.precision, "fp32");
    snprintf(c.precision, sizeof c.precision, "bf17");
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_ptr_nonnull(strstr(ml_last_error(), "option 'precision': expected 'fp32' or 'bf16', got 'bf17'"));
    ml_clear_error();
}
END_TEST

/* The path of a CPU without AVX512_BF16, in a child process that sets MECHLAB_NO_BF16 before
 * anything asks the CPU (mlk_have_bf16 reads it once). */
START_TEST(no_bf16_cpu) {
    if (!getenv("MECHLAB_NO_BF16")) {
        char cmd[4200];
        const char *self = getenv("ML_TEST_SELF");
        ck_assert_msg(self != NULL, "ML_TEST_SELF unset");
        snprintf(cmd, sizeof cmd, "MECHLAB_NO_BF16=1 CK_RUN_CASE=no_bf16 '%s' >/dev/null", self);
        ck_assert_int_eq(system(cmd), 0);
        return;
    }
    ck_assert(!mlk_have_bf16());
    ml_model_config c;
    ml_model_config_defaults(&c, "hyena");
    c.d_model = 16, c.vocab = 30;
    snprintf(c.precision, sizeof c.precision, "bf16");
    ck_assert_ptr_null(ml_model_new(&c));
    const char *e = ml_last_error();
    ck_assert_msg(strstr(e, "model: option 'precision' is 'bf16'") && strstr(e, "no AVX512_BF16"), "%s", e);
    /* a plan (a loaded checkpoint) is made, and runs only in fp32 */
    ml_model *m = ml_model_plan(&c);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(ml_model_alloc(m), ML_OK);
    ml_tensor *tok = ml_test_tokens(2, 5, 30, 1);
    ck_assert_ptr_null(ml_model_hidden(m, tok, NULL));
    e = ml_last_error();
    ck_assert_msg(strstr(e, "forward: the model's option precision = 'bf16' needs AVX512_BF16") != NULL, "%s", e);
    ck_assert_int_eq(ml_linear_precision(), ML_PRECISION_FP32);
    /* attention's products in a bf16 scope: the op fails by name, the kernel answers MLK_ENOBF16 */
    ml_tensor *qkv = ml_zeros(ML_F32, 3, (int64_t[]){1, 4, 12});
    ml_precision old = ml_set_linear_precision(ML_PRECISION_BF16);
    ck_assert_ptr_null(ml_attention_scores(qkv, 2));
    ml_set_linear_precision(old);
    e = ml_last_error();
    ck_assert_msg(strstr(e, "attention_scores: this CPU has no AVX512_BF16") != NULL, "%s", e);
    float x = 1, w = 1, y = 0;
    ck_assert_int_eq(mlk_gemm_bf16(1, 1, 1, &x, 1, 1, &w, 1, false, 1.0f, false, &y, 1), MLK_ENOBF16);
    ck_assert_int_eq(mlk_gemm_tn_bf16(1, 1, 1, &x, &w, true, &y), MLK_ENOBF16);
    ml_release(qkv);
    bool was = ml_model_force_fp32(true);
    ml_tensor *h = ml_model_hidden(m, tok, NULL);
    ml_model_force_fp32(was);
    ck_assert_ptr_nonnull(h);
    ml_release(h), ml_release(tok);
    ml_model_free(m);
}
END_TEST

int main(void) {
    char self[4096];
    ssize_t n_self = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n_self > 0 && !getenv("ML_TEST_SELF")) { /* the child of no_bf16_cpu runs this same executable */
        self[n_self] = 0;
        setenv("ML_TEST_SELF", self, 1);
    }
    Suite *s = suite_create("bf16_linear");
    TCase *t = tcase_create("bf16");
    tcase_add_test(t, linear_bf16_is_the_kernels);
    tcase_add_test(t, attention_bf16_is_the_kernel);
    tcase_add_test(t, model_scopes_the_precision);
    tcase_add_test(t, precision_option_checked);
    suite_add_tcase(s, t);
    TCase *n = tcase_create("no_bf16");
    tcase_add_test(n, no_bf16_cpu);
    suite_add_tcase(s, n);
    return ml_test_run(s);
}
