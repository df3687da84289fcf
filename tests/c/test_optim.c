/* AdamW against closed forms and PyTorch, learning-rate schedules against HF's formulas. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/threads.h"
#include "ops/ops.h"
#include "optim/optim.h"
#include "testutil.h"

/* ------------------------------------------------------------------ AdamW closed forms */

START_TEST(test_adamw_init_checks) {
    ml_adamw o;
    ck_assert_int_eq(ml_adamw_init(&o, 4, 1.0, 0.999, 1e-8, 0), ML_ERR_ARG);
    ck_assert_ptr_null(o.m);
    ml_adamw_free(&o); /* harmless on a failed init */
    ck_assert_int_eq(ml_adamw_init(&o, 4, 0.9, NAN, 1e-8, 0), ML_ERR_ARG);
    ck_assert_int_eq(ml_adamw_init(&o, 4, 0.9, 0.999, -1, 0), ML_ERR_ARG);
    ck_assert_int_eq(ml_adamw_init(&o, 4, 0.9, 0.999, 1e-8, -0.1), ML_ERR_ARG);
    ck_assert_int_eq(ml_adamw_init(&o, -1, 0.9, 0.999, 1e-8, 0), ML_ERR_ARG);
    ck_assert_int_eq(ml_adamw_init(&o, 4, 0.9, 0.999, 1e-8, 0), ML_OK);
    ck_assert_int_eq(o.step, 0);
    ck_assert_int_eq(ml_numel(o.m), 4);
    for (int i = 0; i < 4; i++) ck_assert(ml_f32(o.m)[i] == 0 && ml_f32(o.v)[i] == 0);
    float p[4] = {0}, g[4] = {0};
    ck_assert_int_eq(ml_adamw_step(&o, p, g, 3, 1e-3), ML_ERR_SHAPE);
    ck_assert_int_eq(ml_adamw_step(&o, p, g, 4, -1), ML_ERR_ARG);
    ck_assert_int_eq(ml_adamw_step(&o, p, g, 4, NAN), ML_ERR_ARG);
    ck_assert_int_eq(o.step, 0); /* refused steps do not count */
    ml_adamw_free(&o);
}
END_TEST

/* First update: m = (1-b1) g, v = (1-b2) g^2, so m_hat = g, v_hat = g^2 and the step is
 * lr * g / (|g| + eps): nearly lr*sign(g) whatever the gradient's scale. */
START_TEST(test_adamw_first_step) {
    ml_adamw o;
    ck_assert_int_eq(ml_adamw_init(&o, 4, 0.9, 0.999, 1e-8, 0), ML_OK);
    float p[4] = {1.0f, -2.0f, 0.5f, 3.0f};
    float g[4] = {0.3f, -4.0f, 1e-10f, 0.0f};
    float p0[4];
    memcpy(p0, p, sizeof p);
    double lr = 0.01;
    ck_assert_int_eq(ml_adamw_step(&o, p, g, 4, lr), ML_OK);
    ck_assert_int_eq(o.step, 1);
    for (int i = 0; i < 4; i++) {
        double gi = g[i];
        double expect = p0[i] - lr * gi / (fabs(gi) + 1e-8);
        ck_assert_close(p[i], expect, 1e-7, 1e-6);
        ck_assert_close(ml_f32(o.m)[i], 0.1 * gi, 0, 1e-6);
        ck_assert_close(ml_f32(o.v)[i], 0.001 * gi * gi, 0, 1e-6);
    }
    ck_assert(p[3] == p0[3]); /* zero gradient, no decay: exactly unchanged */
    /* The tiny gradient is dominated by eps: a step of lr * 1e-10 / 1.01e-8. */
    ck_assert_close(p0[2] - p[2], lr * 1e-10 / (1e-10 + 1e-8), 1e-9, 1e-3);
    ml_adamw_free(&o);
}
END_TEST

/* Second update by hand: m2 = b1(1-b1)g1 + (1-b1)g2, v2 = b2(1-b2)g1^2 + (1-b2)g2^2,
 * p2 = p1 - lr * (m2/(1-b1^2)) / (sqrt(v2/(1-b2^2)) + eps). */
START_TEST(test_adamw_second_step) {
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, lr = 0.05;
    ml_adamw o;
    ck_assert_int_eq(ml_adamw_init(&o, 2, b1, b2, eps, 0), ML_OK);
    float p[2] = {0.25f, -1.5f};
    float g1[2] = {0.5f, 2.0f}, g2[2] = {-1.0f, 2.5f};
    ck_assert_int_eq(ml_adamw_step(&o, p, g1, 2, lr), ML_OK);
    float p1[2];
    memcpy(p1, p, sizeof p);
    ck_assert_int_eq(ml_adamw_step(&o, p, g2, 2, lr), ML_OK);
    for (int i = 0; i < 2; i++) {
        double m2 = b1 * (1 - b1) * g1[i] + (1 - b1) * g2[i];
        double v2 = b2 * (1 - b2) * g1[i] * g1[i] + (1 - b2) * g2[i] * g2[i];
        double expect = p1[i] - lr * (m2 / (1 - b1 * b1)) / (sqrt(v2 / (1 - b2 * b2)) + eps);
        ck_assert_close(p[i], expect, 1e-7, 1e-6);
        ck_assert_close(ml_f32(o.m)[i], m2, 0, 1e-6);
        ck_assert_close(ml_f32(o.v)[i], v2, 0, 1e-6);
    }
    ml_adamw_free(&o);
}
END_TEST

/* Bias correction: with a constant gradient m_hat = g and v_hat = g^2 at every step, so each
 * update moves by lr*g/(|g|+eps), about lr. Without the correction the first steps would be
 * 0.1/sqrt(0.001) = 3.16 times larger. */
START_TEST(test_adamw_bias_correction) {
    ml_adamw o;
    ck_assert_int_eq(ml_adamw_init(&o, 1, 0.9, 0.999, 1e-8, 0), ML_OK);
    float p = 1.0f, g = 0.02f;
    double lr = 1e-3;
    for (int k = 1; k <= 50; k++) {
        float before = p;
        ck_assert_int_eq(ml_adamw_step(&o, &p, &g, 1, lr), ML_OK);
        ck_assert_close(before - p, lr * 0.02 / (0.02 + 1e-8), 1e-9, 2e-4);
    }
    ck_assert_int_eq(o.step, 50);
    ck_assert_close(p, 1.0 - 50 * lr, 1e-6, 0);
    ml_adamw_free(&o);
}
END_TEST

/* Decoupled weight decay: p <- p*(1 - lr*wd) before the Adam update, independent of the
 * gradient. With a zero gradient the Adam part is 0/(0+eps) = 0, so the result is exact. */
START_TEST(test_adamw_weight_decay) {
    const double lr = 0.1, wd = 0.25;
    ml_adamw o;
    ck_assert_int_eq(ml_adamw_init(&o, 3, 0.9, 0.999, 1e-8, wd), ML_OK);
    float p[3] = {2.0f, -3.0f, 0.7f}, g[3] = {0, 0, 0};
    float expect[3];
    for (int i = 0; i < 3; i++) expect[i] = p[i] * (float)(1.0 - lr * wd);
    ck_assert_int_eq(ml_adamw_step(&o, p, g, 3, lr), ML_OK);
    for (int i = 0; i < 3; i++) ck_assert(p[i] == expect[i]);
    /* With a gradient: the decay applies to the old p, the Adam step adds to it. */
    float q = 2.0f, gq = 0.5f;
    ml_adamw o2;
    ck_assert_int_eq(ml_adamw_init(&o2, 1, 0.9, 0.999, 1e-8, wd), ML_OK);
    ck_assert_int_eq(ml_adamw_step(&o2, &q, &gq, 1, lr), ML_OK);
    ck_assert_close(q, 2.0 * (1 - lr * wd) - lr * 0.5 / (0.5 + 1e-8), 1e-6, 0);
    ml_adamw_free(&o);
    ml_adamw_free(&o2);
}
END_TEST

/* Minimising f(p) = sum a_i/2 (p_i - c_i)^2 against a textbook double-precision Adam(W)
 * (Loshchilov & Hutter, Algorithm 2 with PyTorch's placement of eps). */
START_TEST(test_adamw_quadratic_reference) {
    enum { N = 5, STEPS = 200 };
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    const double a[N] = {1.0, 3.0, 0.5, 10.0, 0.1}, c[N] = {0.5, -1.0, 2.0, 0.0, -3.0};
    float p[N] = {0, 1, -1, 2, 0}, g[N];
    double rp[N], rm[N] = {0}, rv[N] = {0};
    for (int i = 0; i < N; i++) rp[i] = p[i];
    ml_adamw o;
    ck_assert_int_eq(ml_adamw_init(&o, N, b1, b2, eps, wd), ML_OK);
    for (int t = 1; t <= STEPS; t++) {
        double lr = 0.05 * (1.0 - (t - 1) / (double)STEPS);
        for (int i = 0; i < N; i++) g[i] = (float)(a[i] * (p[i] - c[i]));
        ck_assert_int_eq(ml_adamw_step(&o, p, g, N, lr), ML_OK);
        for (int i = 0; i < N; i++) {
            double gi = g[i]; /* the same gradient, so only the update arithmetic differs */
            rp[i] -= lr * wd * rp[i];
            rm[i] = b1 * rm[i] + (1 - b1) * gi;
            rv[i] = b2 * rv[i] + (1 - b2) * gi * gi;
            double mh = rm[i] / (1 - pow(b1, t)), vh = rv[i] / (1 - pow(b2, t));
            rp[i] -= lr * mh / (sqrt(vh) + eps);
        }
        for (int i = 0; i < N; i++) {
            ck_assert_close(p[i], rp[i], 2e-6, 2e-6);
            rp[i] = p[i]; /* follow the float trajectory so rounding does not accumulate */
        }
    }
    /* And it does minimise. */
    for (int i = 0; i < N - 1; i++) ck_assert_close(p[i], c[i], 0.25, 0);
    ml_adamw_free(&o);
}
END_TEST

/* The tensor-list form equals the flat form; a tensor without .grad is skipped entirely. */
START_TEST(test_adamw_tensors) {
    int64_t s1[2] = {2, 3}, s2[1] = {4};
    float d1[6] = {1, 2, 3, 4, 5, 6}, d2[4] = {-1, -2, -3, -4};
    float gd1[6] = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f}, gd2[4] = {1, 1, 1, 1};
    ml_tensor *a = ml_from_f32(2, s1, d1), *b = ml_from_f32(1, s2, d2);
    a->grad = ml_from_f32(2, s1, gd1);
    b->grad = ml_from_f32(1, s2, gd2);
    ml_tensor *ps[2] = {a, b};
    ml_adamw o, f;
    ck_assert_int_eq(ml_adamw_init(&o, 10, 0.9, 0.999, 1e-8, 0.1), ML_OK);
    ck_assert_int_eq(ml_adamw_init(&f, 10, 0.9, 0.999, 1e-8, 0.1), ML_OK);
    float flat[10], gflat[10];
    memcpy(flat, d1, sizeof d1);
    memcpy(flat + 6, d2, sizeof d2);
    memcpy(gflat, gd1, sizeof gd1);
    memcpy(gflat + 6, gd2, sizeof gd2);
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(ml_adamw_step_tensors(&o, 2, ps, 0.01), ML_OK);
        ck_assert_int_eq(ml_adamw_step(&f, flat, gflat, 10, 0.01), ML_OK);
    }
    ck_assert_int_eq(o.step, 3);
    ck_assert_mem_eq(ml_f32(a), flat, 6 * sizeof(float));
    ck_assert_mem_eq(ml_f32(b), flat + 6, 4 * sizeof(float));
    ck_assert_mem_eq(ml_f32(o.m), ml_f32(f.m), 10 * sizeof(float));
    ck_assert_mem_eq(ml_f32(o.v), ml_f32(f.v), 10 * sizeof(float));
    /* Drop b's gradient: b and its moments stay as they are. */
    ml_release(b->grad);
    b->grad = NULL;
    float bsave[4], msave[4];
    memcpy(bsave, ml_f32(b), sizeof bsave);
    memcpy(msave, ml_f32(o.m) + 6, sizeof msave);
    ck_assert_int_eq(ml_adamw_step_tensors(&o, 2, ps, 0.01), ML_OK);
    ck_assert_mem_eq(ml_f32(b), bsave, sizeof bsave);
    ck_assert_mem_eq(ml_f32(o.m) + 6, msave, sizeof msave);
    /* Wrong total, wrong dtype, mismatched gradient: refused without touching anything. */
    ck_assert_int_eq(ml_adamw_step_tensors(&o, 1, ps, 0.01), ML_ERR_SHAPE);
    b->grad = ml_zeros(ML_F32, 2, s1);
    ck_assert_int_eq(ml_adamw_step_tensors(&o, 2, ps, 0.01), ML_ERR_SHAPE);
    ck_assert_int_eq(o.step, 4);
    ml_adamw_free(&o);
    ml_adamw_free(&f);
    ml_release(a->grad);
    ml_release(b->grad);
    a->grad = b->grad = NULL;
    ml_release(a);
    ml_release(b);
}
END_TEST

/* The exact float arithmetic, element by element (the vectorised kernel and the scalar tail must
 * both give these bits): PyTorch's order with its casts of the Python scalars. */
START_TEST(test_adamw_exact_bits) {
    enum { N = 37 };
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.05;
    float p[N], g[N], rp[N], rm[N] = {0}, rv[N] = {0};
    for (int i = 0; i < N; i++) p[i] = rp[i] = sinf(1.7f * (float)i) * (float)(1 + i % 4);
    ml_adamw o;
    ck_assert_int_eq(ml_adamw_init(&o, N, b1, b2, eps, wd), ML_OK);
    for (int t = 1; t <= 4; t++) {
        double lr = 1e-3 * t;
        for (int i = 0; i < N; i++) g[i] = cosf(0.9f * (float)(i * t)) * powf(10.0f, (float)(i % 7 - 3));
        ck_assert_int_eq(ml_adamw_step(&o, p, g, N, lr), ML_OK);
        double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        float decay = (float)(1 - lr * wd), w1 = (float)(1 - b1), fb2 = (float)b2, c2 = (float)(1 - b2);
        float bs = (float)sqrt(bc2), fe = (float)eps, ns = (float)(-(lr / bc1));
        for (int i = 0; i < N; i++) {
            float q = rp[i] * decay;
            rm[i] = rm[i] + w1 * (g[i] - rm[i]);
            rv[i] = rv[i] * fb2 + (c2 * g[i]) * g[i];
            float d = sqrtf(rv[i]) / bs + fe;
            rp[i] = q + (ns * rm[i]) / d;
        }
        ck_assert_mem_eq(p, rp, sizeof p);
        ck_assert_mem_eq(ml_f32(o.m), rm, sizeof rm);
        ck_assert_mem_eq(ml_f32(o.v), rv, sizeof rv);
    }
    ml_adamw_free(&o);
}
END_TEST

/* Element-wise update: the thread count cannot change a bit. */
START_TEST(test_adamw_threads) {
    enum { N = 200003 };
    float *p1 = malloc(N * sizeof *p1), *p2 = malloc(N * sizeof *p2), *g = malloc(N * sizeof *g);
    for (int i = 0; i < N; i++) {
        p1[i] = p2[i] = sinf((float)i);
        g[i] = cosf(0.37f * (float)i);
    }
    ml_adamw o1, o2;
    ck_assert_int_eq(ml_adamw_init(&o1, N, 0.9, 0.999, 1e-8, 0.01), ML_OK);
    ck_assert_int_eq(ml_adamw_init(&o2, N, 0.9, 0.999, 1e-8, 0.01), ML_OK);
    ml_set_threads(1);
    for (int k = 0; k < 3; k++) ml_adamw_step(&o1, p1, g, N, 1e-3);
    ml_set_threads(2);
    for (int k = 0; k < 3; k++) ml_adamw_step(&o2, p2, g, N, 1e-3);
    ck_assert_mem_eq(p1, p2, N * sizeof *p1);
    ck_assert_mem_eq(ml_f32(o1.v), ml_f32(o2.v), N * sizeof(float));
    ml_adamw_reset(&o1);
    ck_assert_int_eq(o1.step, 0);
    ck_assert(ml_f32(o1.m)[7] == 0 && ml_f32(o1.v)[N - 1] == 0);
    ml_adamw_free(&o1);
    ml_adamw_free(&o2);
    free(p1);
    free(p2);
    free(g);
}
END_TEST

/* ------------------------------------------------------------------ AdamW against PyTorch */

/* tests/fixtures/adamw_torch.txt, found next to this file's directory (CMake passes absolute
 * source paths; a direct build from the repository root passes "tests/c/test_optim.c"). */
static FILE *open_fixture(const char *name) {
    char path[4096];
    const char *env = getenv("MECHLAB_FIXTURES");
    if (env) {
        snprintf(path, sizeof path, "%s/%s", env, name);
    } else {
        snprintf(path, sizeof path, "%s", __FILE__);
        char *slash = strrchr(path, '/');
        if (slash) *slash = 0; /* tests/c */
        slash = strrchr(path, '/');
        if (slash) *slash = 0; /* tests */
        else snprintf(path, sizeof path, "..");
        size_t n = strlen(path);
        snprintf(path + n, sizeof path - n, "/fixtures/%s", name);
    }
    return fopen(path, "r");
}

static int read_floats(FILE *fp, const char *tag, int n, float *out) {
    char t[16];
    if (fscanf(fp, "%15s", t) != 1 || strcmp(t, tag) != 0) return 0;
    for (int i = 0; i < n; i++) {
        double x;
        if (fscanf(fp, "%la", &x) != 1) return 0;
        out[i] = (float)x; /* exact: PyTorch printed float32 values */
    }
    return 1;
}

/* PyTorch 1.13 computes exp_avg as m*b1 + (1-b1)*g, 2.x as lerp m + (1-b1)(g-m) (what mechlab
 * does); the two differ in the last bits, so m and p are compared to a few float ulps. */
START_TEST(test_adamw_matches_torch) {
    FILE *fp = open_fixture("adamw_torch.txt");
    ck_assert_msg(fp != NULL, "cannot open tests/fixtures/adamw_torch.txt");
    char line[256];
    ck_assert(fgets(line, sizeof line, fp) != NULL); /* "# torch <version>" */
    int cases = 0;
    char tag[16], name[32];
    while (fscanf(fp, "%15s", tag) == 1) {
        ck_assert_str_eq(tag, "case");
        int n, steps;
        double b1, b2, eps, wd;
        ck_assert_int_eq(fscanf(fp, "%31s %d %la %la %la %la %d", name, &n, &b1, &b2, &eps, &wd, &steps), 7);
        ck_assert(n > 0 && n <= 64);
        float p[64], g[64], ep[64], em[64], ev[64];
        ck_assert(read_floats(fp, "p0", n, p));
        ml_adamw o;
        ck_assert_int_eq(ml_adamw_init(&o, n, b1, b2, eps, wd), ML_OK);
        for (int k = 1; k <= steps; k++) {
            int kk;
            double lr;
            ck_assert_int_eq(fscanf(fp, "%15s %d %la", tag, &kk, &lr), 3);
            ck_assert_str_eq(tag, "step");
            ck_assert_int_eq(kk, k);
            ck_assert(read_floats(fp, "g", n, g) && read_floats(fp, "p", n, ep) && read_floats(fp, "m", n, em) &&
                      read_floats(fp, "v", n, ev));
            ck_assert_int_eq(ml_adamw_step(&o, p, g, n, lr), ML_OK);
            for (int i = 0; i < n; i++) {
                ck_assert_msg(fabsf(ml_f32(o.v)[i] - ev[i]) <= 2e-7f * fabsf(ev[i]),
                              "%s step %d v[%d] = %a, torch %a", name, k, i, ml_f32(o.v)[i], ev[i]);
                ck_assert_msg(fabsf(ml_f32(o.m)[i] - em[i]) <= 1e-6f * fabsf(em[i]) + 1e-30f,
                              "%s step %d m[%d] = %a, torch %a", name, k, i, ml_f32(o.m)[i], em[i]);
                ck_assert_msg(fabsf(p[i] - ep[i]) <= 1e-6f * fabsf(ep[i]) + 1e-7f, "%s step %d p[%d] = %a, torch %a",
                              name, k, i, p[i], ep[i]);
            }
            /* Continue from PyTorch's state so differences cannot accumulate. */
            memcpy(p, ep, (size_t)n * sizeof *p);
            memcpy(ml_f32(o.m), em, (size_t)n * sizeof *em);
            memcpy(ml_f32(o.v), ev, (size_t)n * sizeof *ev);
        }
        ml_adamw_free(&o);
        cases++;
    }
    ck_assert_int_eq(cases, 3);
    fclose(fp);
}
END_TEST

/* torch.optim.SGD (tests/fixtures/gen_sgd.py): the optimiser object over one leaf tensor, each
 * step continued from PyTorch's parameters and buffer. PyTorch's add with alpha may fuse the
 * multiply-add (FMA), mechlab rounds twice: a few float ulps apart. */
START_TEST(test_sgd_matches_torch) {
    FILE *fp = open_fixture("sgd_torch.txt");
    ck_assert_msg(fp != NULL, "cannot open tests/fixtures/sgd_torch.txt");
    char line[256];
    ck_assert(fgets(line, sizeof line, fp) != NULL); /* "# torch <version>" */
    int cases = 0, nesterov;
    char tag[16], name[32];
    while (fscanf(fp, "%15s", tag) == 1) {
        ck_assert_str_eq(tag, "case");
        int n, steps;
        ml_optim_hparams h = ml_optim_defaults(ML_OPTIM_SGD);
        ck_assert_int_eq(fscanf(fp, "%31s %d %la %la %d %la %d", name, &n, &h.momentum, &h.dampening, &nesterov,
                                &h.weight_decay, &steps), 7);
        h.nesterov = nesterov != 0;
        ck_assert(n > 0 && n <= 64);
        int64_t shape[1] = {n};
        ml_tensor *p = ml_zeros(ML_F32, 1, shape);
        ml_set_requires_grad(p, true);
        p->grad = ml_zeros(ML_F32, 1, shape);
        ck_assert(read_floats(fp, "p0", n, ml_f32(p)));
        ml_optimizer *o = ml_optimizer_new(ML_OPTIM_SGD, 1, &h, (int[]){1}, &p);
        ck_assert_ptr_nonnull(o);
        float ep[64], eb[64];
        for (int k = 1; k <= steps; k++) {
            int kk;
            ck_assert_int_eq(fscanf(fp, "%15s %d %la", tag, &kk, &o->groups[0].h.lr), 3);
            ck_assert_str_eq(tag, "step");
            ck_assert_int_eq(kk, k);
            ck_assert(read_floats(fp, "g", n, ml_f32(p->grad)) && read_floats(fp, "p", n, ep) &&
                      read_floats(fp, "b", n, eb));
            ck_assert_int_eq(ml_optimizer_step(o), ML_OK);
            const float *buf = o->state[0].buf1 ? ml_f32(o->state[0].buf1) : NULL;
            ck_assert(!buf == (h.momentum == 0));
            for (int i = 0; i < n; i++) {
                ck_assert_msg(fabsf(ml_f32(p)[i] - ep[i]) <= 1e-6f * fabsf(ep[i]) + 1e-7f,
                              "%s step %d p[%d] = %a, torch %a", name, k, i, ml_f32(p)[i], ep[i]);
                if (buf)
                    ck_assert_msg(fabsf(buf[i] - eb[i]) <= 1e-6f * fabsf(eb[i]) + 1e-30f,
                                  "%s step %d buf[%d] = %a, torch %a", name, k, i, buf[i], eb[i]);
            }
            memcpy(ml_f32(p), ep, (size_t)n * sizeof *ep);
            if (buf) memcpy(ml_f32(o->state[0].buf1), eb, (size_t)n * sizeof *eb);
        }
        ml_optimizer_free(o);
        ml_release(p);
        cases++;
    }
    ck_assert_int_eq(cases, 4);
    fclose(fp);
}
END_TEST

/* ------------------------------------------------------------------ optimiser objects */

/* A leaf float32 tensor of n values f(i) that requires grad. */
static ml_tensor *leaf_of(int ndim, const int64_t *shape, float (*f)(int)) {
    ml_tensor *t = ml_zeros(ML_F32, ndim, shape);
    for (int64_t i = 0; i < ml_numel(t); i++) ml_f32(t)[i] = f((int)i);
    ck_assert_int_eq(ml_set_requires_grad(t, true), ML_OK);
    return t;
}
static float init_a(int i) { return sinf(1.3f * (float)i) * 2.0f; }
static float grad_a(int i) { return cosf(0.7f * (float)i) * powf(10.0f, (float)(i % 5 - 2)); }

/* The object over tensors and the model's flat-buffer AdamW give the same bits: one kernel.
 * Three tensors (one past the 32768-element chunk, so the parallel split is exercised), groups
 * with the same hyper-parameters, 4 updates with a changing lr. */
START_TEST(test_optimizer_adamw_matches_flat) {
    int64_t s1[2] = {3, 5}, s2[1] = {40000}, s3[3] = {2, 2, 3};
    ml_tensor *ps[3] = {leaf_of(2, s1, init_a), leaf_of(1, s2, init_a), leaf_of(3, s3, init_a)};
    int64_t n = 15 + 40000 + 12;
    float *flat = malloc(sizeof(float) * (size_t)n), *gflat = malloc(sizeof(float) * (size_t)n);
    for (int64_t off = 0, k = 0; k < 3; off += ml_numel(ps[k]), k++) {
        memcpy(flat + off, ml_f32(ps[k]), sizeof(float) * (size_t)ml_numel(ps[k]));
        ps[k]->grad = ml_zeros(ML_F32, ps[k]->ndim, ps[k]->shape);
    }
    ml_adamw f;
    ck_assert_int_eq(ml_adamw_init(&f, n, 0.85, 0.995, 1e-7, 0.2), ML_OK);
    ml_optim_hparams h = ml_optim_defaults(ML_OPTIM_ADAMW);
    h.beta1 = 0.85, h.beta2 = 0.995, h.eps = 1e-7, h.weight_decay = 0.2;
    ml_optim_hparams hs[2] = {h, h};
    ml_optimizer *o = ml_optimizer_new(ML_OPTIM_ADAMW, 2, hs, (int[]){1, 2}, ps);
    ck_assert_ptr_nonnull(o);
    for (int t = 1; t <= 4; t++) {
        double lr = 1e-2 / t;
        for (int64_t off = 0, k = 0; k < 3; off += ml_numel(ps[k]), k++)
            for (int64_t i = 0; i < ml_numel(ps[k]); i++)
                gflat[off + i] = ml_f32(ps[k]->grad)[i] = grad_a((int)(off + i) * t);
        o->groups[0].h.lr = o->groups[1].h.lr = lr;
        ck_assert_int_eq(ml_optimizer_step(o), ML_OK);
        ck_assert_int_eq(ml_adamw_step(&f, flat, gflat, n, lr), ML_OK);
    }
    for (int64_t off = 0, k = 0; k < 3; off += ml_numel(ps[k]), k++) {
        size_t bytes = sizeof(float) * (size_t)ml_numel(ps[k]);
        ck_assert_mem_eq(ml_f32(ps[k]), flat + off, bytes);
        ck_assert_mem_eq(ml_f32(o->state[k].buf1), ml_f32(f.m) + off, bytes);
        ck_assert_mem_eq(ml_f32(o->state[k].buf2), ml_f32(f.v) + off, bytes);
        ck_assert_int_eq(o->state[k].step, 4);
    }
    ml_optimizer_free(o);
    ml_adamw_free(&f);
    for (int k = 0; k < 3; k++) ml_release(ps[k]);
    free(flat), free(gflat);
}
END_TEST

/* SGD with momentum 0.9, dampening 0.1, weight decay 0.5 and (then) nesterov, by hand in float:
 * p = 2, g = 1, lr 0.1. Step 1: d = 1 + 0.5*2 = 2, buf = 2, p = 2 - 0.2 = 1.8.
 * Step 2: d = 1 + 0.9 = 1.9, buf = 0.9*2 + 0.9*1.9 = 3.51, p = 1.8 - 0.351 = 1.449. */
START_TEST(test_optimizer_sgd_by_hand) {
    int64_t s[1] = {1};
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        ml_tensor *p = ml_zeros(ML_F32, 1, s);
        ml_f32(p)[0] = 2;
        ml_set_requires_grad(p, true);
        p->grad = ml_zeros(ML_F32, 1, s);
        ml_f32(p->grad)[0] = 1;
        ml_optim_hparams h = ml_optim_defaults(ML_OPTIM_SGD);
        h.lr = 0.1, h.momentum = 0.9, h.dampening = nesterov ? 0 : 0.1, h.weight_decay = 0.5, h.nesterov = nesterov;
        ml_optimizer *o = ml_optimizer_new(ML_OPTIM_SGD, 1, &h, (int[]){1}, &p);
        ck_assert_ptr_nonnull(o);
        ck_assert_int_eq(ml_optimizer_step(o), ML_OK);
        /* nesterov: d = 2 + 0.9*2 = 3.8 -> p = 1.62 */
        ck_assert_close(ml_f32(p)[0], nesterov ? 1.62 : 1.8, 1e-6, 0);
        ck_assert_int_eq(ml_optimizer_step(o), ML_OK);
        /* nesterov: d = 1 + 0.81 = 1.81, buf = 1.8 + 1.81 = 3.61, d = 1.81 + 3.249 = 5.059 -> 1.1141 */
        ck_assert_close(ml_f32(p)[0], nesterov ? 1.1141 : 1.449, 1e-6, 0);
        ck_assert_close(ml_f32(o->state[0].buf1)[0], nesterov ? 3.61 : 3.51, 1e-6, 0);
        ml_optimizer_free(o);
        ml_release(p);
    }
}
END_TEST

START_TEST(test_optimizer_checks) {
    int64_t s[1] = {2};
    ml_tensor *a = ml_zeros(ML_F32, 1, s), *b = ml_zeros(ML_F32, 1, s);
    ml_optim_hparams h = ml_optim_defaults(ML_OPTIM_SGD);
    /* b does not require grad */
    ml_set_requires_grad(a, true);
    ml_tensor *ab[2] = {a, b};
    ck_assert_ptr_null(ml_optimizer_new(ML_OPTIM_SGD, 1, &h, (int[]){2}, ab));
    ck_assert_str_eq(ml_last_error(), "sgd: parameter 1 is a tensor that does not require grad (frozen)");
    /* a non-leaf */
    ml_tensor *c = ml_binary_scalar(ML_MUL, a, 2.0);
    ml_tensor *ac[2] = {a, c};
    ck_assert_ptr_null(ml_optimizer_new(ML_OPTIM_SGD, 1, &h, (int[]){2}, ac));
    ck_assert_msg(strstr(ml_last_error(), "parameter 1 is a non-leaf tensor"), "%s", ml_last_error());
    /* twice */
    ml_tensor *aa[2] = {a, a};
    ck_assert_ptr_null(ml_optimizer_new(ML_OPTIM_SGD, 1, &h, (int[]){2}, aa));
    ck_assert_str_eq(ml_last_error(), "sgd: parameter 1 appears twice (also parameter 0)");
    /* hyper-parameters */
    h.lr = -1;
    ck_assert_ptr_null(ml_optimizer_new(ML_OPTIM_SGD, 1, &h, (int[]){1}, &a));
    ck_assert_str_eq(ml_last_error(), "sgd: group 0 option 'lr': expected a finite number >= 0, got -1");
    h = ml_optim_defaults(ML_OPTIM_SGD);
    h.nesterov = true;
    ck_assert_ptr_null(ml_optimizer_new(ML_OPTIM_SGD, 1, &h, (int[]){1}, &a));
    ml_optim_hparams ha = ml_optim_defaults(ML_OPTIM_ADAMW);
    ha.beta1 = 1;
    ck_assert_ptr_null(ml_optimizer_new(ML_OPTIM_ADAMW, 1, &ha, (int[]){1}, &a));
    ck_assert_str_eq(ml_last_error(), "adamw: group 0 option 'beta1': expected a number in [0, 1), got 1");
    /* a gradient of the wrong shape: refused before anything changes */
    ha = ml_optim_defaults(ML_OPTIM_ADAMW);
    ml_optimizer *o = ml_optimizer_new(ML_OPTIM_ADAMW, 1, &ha, (int[]){1}, &a);
    ck_assert_ptr_nonnull(o);
    int64_t s3[1] = {3};
    a->grad = ml_zeros(ML_F32, 1, s3);
    ck_assert_int_eq(ml_optimizer_step(o), ML_ERR_SHAPE);
    ck_assert_int_eq(o->state[0].step, 0);
    ck_assert_ptr_null(o->state[0].buf1);
    /* state of the wrong shape */
    ck_assert_int_eq(ml_optimizer_set_state(o, 0, 1, a->grad, a->grad), ML_ERR_SHAPE);
    ml_optimizer_free(o);
    ml_release(c);
    ml_release(a), ml_release(b);
}
END_TEST

/* set_state with the state of a run resumes it exactly. */
START_TEST(test_optimizer_set_state_resumes) {
    int64_t s[1] = {7};
    ml_tensor *a = leaf_of(1, s, init_a), *b = leaf_of(1, s, init_a);
    a->grad = ml_zeros(ML_F32, 1, s), b->grad = ml_zeros(ML_F32, 1, s);
    ml_optim_hparams h = ml_optim_defaults(ML_OPTIM_ADAMW);
    ml_optimizer *oa = ml_optimizer_new(ML_OPTIM_ADAMW, 1, &h, (int[]){1}, &a);
    ml_optimizer *ob = ml_optimizer_new(ML_OPTIM_ADAMW, 1, &h, (int[]){1}, &b);
    for (int t = 1; t <= 5; t++) {
        for (int i = 0; i < 7; i++) ml_f32(a->grad)[i] = ml_f32(b->grad)[i] = grad_a(i + 3 * t);
        ck_assert_int_eq(ml_optimizer_step(oa), ML_OK);
        if (t == 2) { /* b resumes from a's state and weights */
            memcpy(ml_f32(b), ml_f32(a), sizeof(float) * 7);
            ck_assert_int_eq(ml_optimizer_set_state(ob, 0, oa->state[0].step, oa->state[0].buf1, oa->state[0].buf2),
                             ML_OK);
        }
        if (t > 2) ck_assert_int_eq(ml_optimizer_step(ob), ML_OK);
    }
    ck_assert_mem_eq(ml_f32(a), ml_f32(b), sizeof(float) * 7);
    ck_assert_int_eq(ob->state[0].step, 5);
    ml_optimizer_free(oa), ml_optimizer_free(ob);
    ml_release(a), ml_release(b);
}
END_TEST

/* Gradients (3, 4) and (0, 12): norm 13; clipping to 6.5 halves them (to float rounding). */
START_TEST(test_clip_grad_norm) {
    int64_t s[1] = {2};
    float ga[2] = {3, 4}, gb[2] = {0, 12};
    ml_tensor *a = ml_zeros(ML_F32, 1, s), *b = ml_zeros(ML_F32, 1, s), *c = ml_zeros(ML_F32, 1, s);
    a->grad = ml_from_f32(1, s, ga), b->grad = ml_from_f32(1, s, gb); /* c has none: skipped */
    ml_tensor *ps[3] = {a, b, c};
    double total = 0;
    ck_assert_int_eq(ml_clip_grad_norm(3, ps, 100, &total), ML_OK);
    ck_assert(total == 13);
    ck_assert(ml_f32(a->grad)[0] == 3); /* under the limit: untouched */
    ck_assert_int_eq(ml_clip_grad_norm(3, ps, 6.5, &total), ML_OK);
    ck_assert(total == 13);
    ck_assert_close(ml_f32(a->grad)[0], 1.5, 1e-6, 0);
    ck_assert_close(ml_f32(a->grad)[1], 2.0, 1e-6, 0);
    ck_assert_close(ml_f32(b->grad)[1], 6.0, 1e-6, 0);
    ck_assert_int_eq(ml_clip_grad_norm(3, ps, -1, &total), ML_ERR_ARG);
    ml_release(a), ml_release(b), ml_release(c);
}
END_TEST

/* ------------------------------------------------------------------ schedules */

static const double PI = 3.14159265358979323846; /* M_PI is not strict C11 */

START_TEST(test_schedule_warmup_length) {
    ml_schedule s;
    /* warm-up W = floor(0.1 T) (docs/training.md, "Optimiser and schedules"). */
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_COSINE_WARMUP, 1e-3, 50016, 0.1), ML_OK);
    ck_assert_int_eq(s.warmup_steps, 5001);
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_LINEAR_WARMUP, 1e-3, 100032, 0.1), ML_OK);
    ck_assert_int_eq(s.warmup_steps, 10003);
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_CONSTANT, 1e-3, 100, 0.5), ML_OK);
    ck_assert_int_eq(s.warmup_steps, 0);
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_COSINE_WARMUP, 1e-3, 100, 1.5), ML_ERR_ARG);
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_COSINE_WARMUP, -1, 100, 0.1), ML_ERR_ARG);
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_COSINE_WARMUP, 1e-3, -1, 0.1), ML_ERR_ARG);
    ck_assert_int_eq(ml_schedule_init(&s, (ml_schedule_kind)9, 1e-3, 10, 0.1), ML_ERR_ARG);
}
END_TEST

START_TEST(test_schedule_cosine) {
    ml_schedule s;
    const double lr = 3e-3;
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_COSINE_WARMUP, lr, 1000, 0.1), ML_OK);
    ck_assert_int_eq(s.warmup_steps, 100);
    ck_assert(ml_schedule_lr(&s, 0) == 0.0); /* the first update uses lr_lambda(0) = 0 */
    ck_assert(ml_schedule_lr(&s, 1) == lr * (1.0 / 100));
    ck_assert(ml_schedule_lr(&s, 50) == lr * 0.5);
    ck_assert(ml_schedule_lr(&s, 99) == lr * (99.0 / 100));
    ck_assert(ml_schedule_lr(&s, 100) == lr); /* end of warm-up: cos(0) */
    ck_assert_close(ml_schedule_lr(&s, 550), lr * 0.5, 1e-18, 1e-12);       /* midpoint */
    ck_assert_close(ml_schedule_lr(&s, 325), lr * 0.5 * (1 + cos(PI / 4)), 0, 1e-12);
    ck_assert_close(ml_schedule_lr(&s, 1000), 0.0, 1e-20, 0);                /* decayed to 0 */
    ck_assert_close(ml_schedule_factor(&s, 999), 0.5 * (1 + cos(PI * 899 / 900)), 0, 1e-12);
    /* Paper configuration: T = 50016, W = 5001. */
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_COSINE_WARMUP, 1.0, 50016, 0.1), ML_OK);
    ck_assert(ml_schedule_factor(&s, 5000) == 5000.0 / 5001.0);
    ck_assert(ml_schedule_factor(&s, 5001) == 1.0);
    ck_assert_close(ml_schedule_factor(&s, 50016), 0.0, 1e-20, 0);
}
END_TEST

START_TEST(test_schedule_linear) {
    ml_schedule s;
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_LINEAR_WARMUP, 2.0, 1000, 0.1), ML_OK);
    ck_assert(ml_schedule_lr(&s, 0) == 0.0);
    ck_assert(ml_schedule_lr(&s, 10) == 2.0 * 0.1);
    ck_assert(ml_schedule_lr(&s, 100) == 2.0);
    ck_assert(ml_schedule_lr(&s, 550) == 1.0);                 /* (T-s)/(T-W) = 450/900 */
    ck_assert(ml_schedule_lr(&s, 999) == 2.0 * (1.0 / 900.0));
    ck_assert(ml_schedule_lr(&s, 1000) == 0.0);
    ck_assert(ml_schedule_lr(&s, 1200) == 0.0); /* clamped at 0 past the end */
    /* No warm-up: the first update already uses the full rate. */
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_LINEAR_WARMUP, 1.0, 10, 0.0), ML_OK);
    ck_assert(ml_schedule_lr(&s, 0) == 1.0);
    ck_assert(ml_schedule_lr(&s, 5) == 0.5);
}
END_TEST

START_TEST(test_schedule_constant) {
    ml_schedule s;
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_CONSTANT, 5e-4, 1000, 0.1), ML_OK);
    ck_assert(ml_schedule_lr(&s, 0) == 5e-4);
    ck_assert(ml_schedule_lr(&s, 5000) == 5e-4);
    ck_assert_int_eq(ml_schedule_init(&s, ML_SCHED_CONSTANT_WARMUP, 1.0, 1000, 0.25), ML_OK);
    ck_assert(ml_schedule_lr(&s, 0) == 0.0);
    ck_assert(ml_schedule_lr(&s, 125) == 0.5);
    ck_assert(ml_schedule_lr(&s, 250) == 1.0);
    ck_assert(ml_schedule_lr(&s, 1000) == 1.0);
}
END_TEST

START_TEST(test_schedule_names) {
    ml_schedule_kind k;
    ck_assert_int_eq(ml_schedule_kind_parse("cosine", &k), ML_OK);
    ck_assert_int_eq(k, ML_SCHED_COSINE_WARMUP);
    ck_assert_int_eq(ml_schedule_kind_parse("linear", &k), ML_OK);
    ck_assert_int_eq(k, ML_SCHED_LINEAR_WARMUP);
    ck_assert_int_eq(ml_schedule_kind_parse("constant_with_warmup", &k), ML_OK);
    ck_assert_int_eq(k, ML_SCHED_CONSTANT_WARMUP);
    ck_assert_int_eq(ml_schedule_kind_parse("constant", &k), ML_OK);
    ck_assert_int_eq(k, ML_SCHED_CONSTANT);
    ck_assert_int_eq(ml_schedule_kind_parse("cosine_with_restarts", &k), ML_ERR_ARG);
    ck_assert_int_eq(ml_schedule_kind_parse(NULL, &k), ML_ERR_ARG);
    ck_assert_str_eq(ml_schedule_kind_name(ML_SCHED_LINEAR_WARMUP), "linear");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("optim");
    TCase *a = tcase_create("adamw");
    tcase_add_test(a, test_adamw_init_checks);
    tcase_add_test(a, test_adamw_first_step);
    tcase_add_test(a, test_adamw_second_step);
    tcase_add_test(a, test_adamw_bias_correction);
    tcase_add_test(a, test_adamw_weight_decay);
    tcase_add_test(a, test_adamw_quadratic_reference);
    tcase_add_test(a, test_adamw_tensors);
    tcase_add_test(a, test_adamw_exact_bits);
    tcase_add_test(a, test_adamw_threads);
    tcase_add_test(a, test_adamw_matches_torch);
    tcase_add_test(a, test_optimizer_adamw_matches_flat);
    tcase_add_test(a, test_optimizer_sgd_by_hand);
    tcase_add_test(a, test_optimizer_checks);
    tcase_add_test(a, test_optimizer_set_state_resumes);
    tcase_add_test(a, test_clip_grad_norm);
    tcase_add_test(a, test_sgd_matches_torch);
    suite_add_tcase(s, a);
    TCase *t = tcase_create("schedule");
    tcase_add_test(t, test_schedule_warmup_length);
    tcase_add_test(t, test_schedule_cosine);
    tcase_add_test(t, test_schedule_linear);
    tcase_add_test(t, test_schedule_constant);
    tcase_add_test(t, test_schedule_names);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return ml_test_run(suite()); }
