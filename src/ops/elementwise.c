/* Elementwise ops: binary with PyTorch broadcasting (and scalar forms), unary maps, clamp, where.
 * Forward loops run over coalesced strides (one flat loop for same-shape contiguous operands);
 * each differentiable op records a node whose backward undoes broadcasting with sum_to_shape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/iter.h"
#include "core/threads.h"
#include "ops/kernel_util.h"
#include "ops/op_util.h"
#include "ops/ops.h"

#define N_BINOPS 16
static const char *const binop_names[N_BINOPS] = {
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder", "fmod", "floor_divide",
    "eq",  "ne",  "lt",  "le",  "gt",  "ge"};
static const char *const binop_bw_names[N_BINOPS] = {
    "AddBackward",       "SubBackward",  "MulBackward",         "DivBackward", "PowBackward", "MaximumBackward",
    "MinimumBackward",   "RemainderBackward", "FmodBackward",   "FloorDivideBackward",
    "EqBackward",        "NeBackward",   "LtBackward",          "LeBackward",  "GtBackward",  "GeBackward"};

const char *ml_binop_name(ml_binop op) { return (unsigned)op < N_BINOPS ? binop_names[op] : "binary"; }

#define N_UNOPS 13
static const char *const unop_names[N_UNOPS] = {"neg",  "exp",  "log",  "sqrt",     "abs", "tanh", "sigmoid",
                                               "relu", "gelu", "silu", "softplus", "sin", "cos"};
static const char *const unop_bw_names[N_UNOPS] = {
    "NegBackward",  "ExpBackward",  "LogBackward",      "SqrtBackward", "AbsBackward", "TanhBackward",
    "SigmoidBackward", "ReluBackward", "GeluBackward", "SiluBackward", "SoftplusBackward", "SinBackward",
    "CosBackward"};

const char *ml_unop_name(ml_unop op) { return (unsigned)op < N_UNOPS ? unop_names[op] : "unary"; }

/* ------------------------------------------------------------------ strided loop machinery */

/* One output (contiguous) and two inputs laid out on a broadcast shape, coalesced. */
typedef struct {
    int nd;
    int64_t shape[ML_MAX_DIMS];
    int64_t st[3][ML_MAX_DIMS]; /* out, a, b */
    int64_t total;
    int threads; /* ml_threads_for(total), or 1 where the loop writes a shared flag */
} ew_plan;

static void plan_init(ew_plan *p, const ml_tensor *out, const ml_tensor *a, const ml_tensor *b) {
    int nd = out->ndim;
    memcpy(p->shape, out->shape, sizeof p->shape);
    for (int d = 0; d < nd; d++) p->st[0][d] = out->stride[d];
    mlo_bstrides(a, nd, p->st[1]);
    mlo_bstrides(b, nd, p->st[2]);
    p->total = ml_numel(out);
    p->threads = ml_threads_for(p->total);
    p->nd = mlo_coalesce(nd, p->shape, 3, p->st);
}

/* One thread's part c of nt: the elements [total·c/nt, total·(c+1)/nt) in row-major order. */
#define EW_RANGE(P, TO, PO, TA, PA, TB, PB, E, C, NT)                                                               \
    do {                                                                                                             \
        int _nd = (P)->nd;                                                                                           \
        int64_t inner = _nd ? (P)->shape[_nd - 1] : 1;                                                               \
        int64_t ia = _nd ? (P)->st[1][_nd - 1] : 0, ib = _nd ? (P)->st[2][_nd - 1] : 0;                              \
        int64_t e = (P)->total * (C) / (NT), e1 = (P)->total * ((C) + 1) / (NT);                                     \
        ml_iter it;                                                                                                  \
        ml_iter_init(&it, _nd ? _nd - 1 : 0, (P)->shape, 3, (const int64_t *[]){(P)->st[0], (P)->st[1], (P)->st[2]}); \
        if (e < e1) ml_iter_seek(&it, e / inner);                                                                    \
        for (; e < e1; ml_iter_next(&it)) {                                                                          \
            int64_t i0 = e % inner, i1 = e1 - e < inner - i0 ? i0 + (e1 - e) : inner;                               \
            e += i1 - i0;                                                                                            \
            TO *z = (PO) + it.off[0];                                                                                \
            const TA *x = (PA) + it.off[1];                                                                          \
            const TB *y = (PB) + it.off[2];                                                                          \
            if (ia == 1 && ib == 1) {                                                                                \
                for (int64_t i = i0; i < i1; i++) z[i] = E(x[i], y[i]);                                              \
            } else if (ia == 1 && ib == 0) {                                                                         \
                const TB yv = y[0];                                                                                  \
                for (int64_t i = i0; i < i1; i++) z[i] = E(x[i], yv);                                                \
            } else if (ia == 0 && ib == 1) {                                                                         \
                const TA xv = x[0];                                                                                  \
                for (int64_t i = i0; i < i1; i++) z[i] = E(xv, y[i]);                                                \
            } else {                                                                                                 \
                for (int64_t i = i0; i < i1; i++) z[i] = E(x[i * ia], y[i * ib]);                                    \
            }                                                                                                        \
        }                                                                                                            \
    } while (0)

/* Runs z = E(x, y) over the plan; the inner dim gets unit-stride and scalar-operand variants so
 * the compiler vectorises the common cases. Large plans run on (P)->threads threads, each on a
 * range of the elements in row-major order (a whole contiguous tensor is one row, split too):
 * every element is E of its operands whichever thread computes it. One thread enters no
 * parallel region (its cost would be paid on every small op). */
#define EW_LOOP(P, TO, PO, TA, PA, TB, PB, E)                                                                       \
    do {                                                                                                             \
        int _nt = (P)->threads;                                                                                      \
        if (_nt > 1) {                                                                                               \
            _Pragma("omp parallel for num_threads(_nt) schedule(static)")                                           \
            for (int _c = 0; _c < _nt; _c++) EW_RANGE(P, TO, PO, TA, PA, TB, PB, E, _c, _nt);                        \
        } else                                                                                                       \
            EW_RANGE(P, TO, PO, TA, PA, TB, PB, E, 0, 1);                                                            \
    } while (0)

#define F_ADD(u, v) ((u) + (v))
#define F_SUB(u, v) ((u) - (v))
#define F_MUL(u, v) ((u) * (v))
#define F_DIV(u, v) ((u) / (v))
#define F_POW(u, v) powf((u), (v))
/* NaN-propagating, as PyTorch's maximum/minimum */
#define F_MAX(u, v) (((u) > (v) || (u) != (u)) ? (u) : (v))
#define F_MIN(u, v) (((u) < (v) || (u) != (u)) ? (u) : (v))
#define C_EQ(u, v) ((int32_t)((u) == (v)))
#define C_NE(u, v) ((int32_t)((u) != (v)))
#define C_LT(u, v) ((int32_t)((u) < (v)))
#define C_LE(u, v) ((int32_t)((u) <= (v)))
#define C_GT(u, v) ((int32_t)((u) > (v)))
#define C_GE(u, v) ((int32_t)((u) >= (v)))
/* int32 arithmetic wraps (through unsigned: signed overflow would be undefined) */
#define I_ADD(u, v) ((int32_t)((uint32_t)(u) + (uint32_t)(v)))
#define I_SUB(u, v) ((int32_t)((uint32_t)(u) - (uint32_t)(v)))
#define I_MUL(u, v) ((int32_t)((uint32_t)(u) * (uint32_t)(v)))
#define I_MAX(u, v) ((u) > (v) ? (u) : (v))
#define I_MIN(u, v) ((u) < (v) ? (u) : (v))

/* The quotient rounded toward minus infinity, as Python's float // and PyTorch's floor_divide:
 * from fmod, which is exact, rather than floor(u / v), whose rounded quotient can land on the
 * next integer (floor(1 / 0.1) would be 10, but 1 = 9·0.1 + 0.09999…). */
static inline float f_floor_divide(float u, float v) {
    if (v == 0.0f) return u / v; /* IEEE: ±inf, or NaN for 0/0 */
    float r = fmodf(u, v);
    float q = (u - r) / v; /* an integer up to rounding: u − r is a multiple of v */
    if (r != 0.0f && (r < 0.0f) != (v < 0.0f)) q -= 1.0f;
    if (q == 0.0f) return copysignf(0.0f, u / v);
    float f = floorf(q);
    return q - f > 0.5f ? f + 1.0f : f;
}
/* The quotient rounded toward zero (fmod's), by the same route. */
static inline float f_trunc_divide(float u, float v) {
    if (v == 0.0f) return u / v;
    float q = (u - fmodf(u, v)) / v;
    return q == 0.0f ? copysignf(0.0f, u / v) : roundf(q);
}
/* fmod moved onto the divisor's side: exact, where u − floor(u/v)·v would round */
static inline float f_remainder(float u, float v) {
    float r = fmodf(u, v);
    return (r != 0.0f && (r < 0.0f) != (v < 0.0f)) ? r + v : r;
}
#define F_REM(u, v) f_remainder((u), (v))
#define F_FMOD(u, v) fmodf((u), (v))
#define F_FLOORDIV(u, v) f_floor_divide((u), (v))

/* int32 division: a zero divisor sets *zero (the caller raises, C would trap or worse); −1 is
 * answered without dividing, since INT32_MIN / −1 overflows (undefined in C): the quotient wraps
 * like the other int32 arithmetic and the remainder is 0. */
static inline int32_t i_remainder(int32_t u, int32_t v, bool *zero) {
    if (v == 0 || v == -1) {
        if (v == 0) *zero = true;
        return 0;
    }
    int32_t r = u % v;
    return (r != 0 && (r < 0) != (v < 0)) ? r + v : r;
}
static inline int32_t i_fmod(int32_t u, int32_t v, bool *zero) {
    if (v == 0 || v == -1) {
        if (v == 0) *zero = true;
        return 0;
    }
    return u % v;
}
static inline int32_t i_floor_divide(int32_t u, int32_t v, bool *zero) {
    if (v == 0) {
        *zero = true;
        return 0;
    }
    if (v == -1) return (int32_t)(0u - (uint32_t)u);
    int32_t q = u / v;
    return (u % v != 0 && (u < 0) != (v < 0)) ? q - 1 : q;
}
#define I_REM(u, v) i_remainder((u), (v), &zero)
#define I_FMOD(u, v) i_fmod((u), (v), &zero)
#define I_FLOORDIV(u, v) i_floor_divide((u), (v), &zero)

static void run_f32(ml_binop op, const ew_plan *p, float *po, const float *pa, const float *pb) {
    switch (op) {
    case ML_ADD: EW_LOOP(p, float, po, float, pa, float, pb, F_ADD); break;
    case ML_SUB: EW_LOOP(p, float, po, float, pa, float, pb, F_SUB); break;
    case ML_MUL: EW_LOOP(p, float, po, float, pa, float, pb, F_MUL); break;
    case ML_DIV: EW_LOOP(p, float, po, float, pa, float, pb, F_DIV); break;
    case ML_POW: EW_LOOP(p, float, po, float, pa, float, pb, F_POW); break;
    case ML_MAXIMUM: EW_LOOP(p, float, po, float, pa, float, pb, F_MAX); break;
    case ML_MINIMUM: EW_LOOP(p, float, po, float, pa, float, pb, F_MIN); break;
    case ML_REMAINDER: EW_LOOP(p, float, po, float, pa, float, pb, F_REM); break;
    case ML_FMOD: EW_LOOP(p, float, po, float, pa, float, pb, F_FMOD); break;
    case ML_FLOOR_DIVIDE: EW_LOOP(p, float, po, float, pa, float, pb, F_FLOORDIV); break;
    default: break;
    }
}

static void run_cmp_f32(ml_binop op, const ew_plan *p, int32_t *po, const float *pa, const float *pb) {
    switch (op) {
    case ML_EQ: EW_LOOP(p, int32_t, po, float, pa, float, pb, C_EQ); break;
    case ML_NE: EW_LOOP(p, int32_t, po, float, pa, float, pb, C_NE); break;
    case ML_LT: EW_LOOP(p, int32_t, po, float, pa, float, pb, C_LT); break;
    case ML_LE: EW_LOOP(p, int32_t, po, float, pa, float, pb, C_LE); break;
    case ML_GT: EW_LOOP(p, int32_t, po, float, pa, float, pb, C_GT); break;
    case ML_GE: EW_LOOP(p, int32_t, po, float, pa, float, pb, C_GE); break;
    default: break;
    }
}

/* false when a division met a zero divisor */
static bool run_i32(ml_binop op, const ew_plan *p, int32_t *po, const int32_t *pa, const int32_t *pb) {
    bool zero = false;
    ew_plan one = *p; /* the divisions set `zero`: one thread */
    one.threads = 1;
    switch (op) {
    case ML_ADD: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, I_ADD); break;
    case ML_SUB: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, I_SUB); break;
    case ML_MUL: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, I_MUL); break;
    case ML_MAXIMUM: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, I_MAX); break;
    case ML_MINIMUM: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, I_MIN); break;
    case ML_REMAINDER: EW_LOOP(&one, int32_t, po, int32_t, pa, int32_t, pb, I_REM); break;
    case ML_FMOD: EW_LOOP(&one, int32_t, po, int32_t, pa, int32_t, pb, I_FMOD); break;
    case ML_FLOOR_DIVIDE: EW_LOOP(&one, int32_t, po, int32_t, pa, int32_t, pb, I_FLOORDIV); break;
    case ML_EQ: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, C_EQ); break;
    case ML_NE: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, C_NE); break;
    case ML_LT: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, C_LT); break;
    case ML_LE: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, C_LE); break;
    case ML_GT: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, C_GT); break;
    case ML_GE: EW_LOOP(p, int32_t, po, int32_t, pa, int32_t, pb, C_GE); break;
    default: break;
    }
    return !zero;
}

/* ------------------------------------------------------------------ binary */

/* a and b expanded to out's shape and made contiguous (for backward loops that need both). */
static ml_tensor *materialise(ml_tensor *t, const ml_tensor *like) {
    ml_tensor *e = ml_expand(t, like->ndim, like->shape);
    if (!e) return NULL;
    ml_tensor *d = mlo_dense(e);
    ml_release(e);
    return d;
}

static ml_status binary_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_binop op = (ml_binop)n->iarg[0];
    bool wa = ml_node_input_needs_grad(n, 0), wb = ml_node_input_needs_grad(n, 1);
    ml_tensor *ga = NULL, *gb = NULL; /* gradients on the broadcast shape */
    ml_status st = ML_OK;
    switch (op) {
    case ML_ADD:
    case ML_SUB:
        if (wa) ga = ml_retain(g);
        if (wb) gb = op == ML_ADD ? ml_retain(g) : ml_unary(ML_NEG, g);
        if (wb && !gb) st = ml_last_status();
        break;
    case ML_MUL: {
        ml_tensor *a = ml_node_saved(n, 0), *b = ml_node_saved(n, 1);
        if (!a || !b) return ml_last_status();
        if (wa && !(ga = ml_mul(g, b))) st = ml_last_status();
        if (wb && !(gb = ml_mul(g, a))) st = ml_last_status();
        break;
    }
    case ML_DIV: { /* d/da = 1/b, d/db = -a/b² = -out/b */
        ml_tensor *b = ml_node_saved(n, 1), *out = ml_node_saved(n, 2);
        if (!b || !out) return ml_last_status();
        ml_tensor *q = ml_div(g, b);
        if (!q) return ml_last_status();
        if (wb) {
            gb = ml_mul(q, out);
            if (gb) {
                float *p = ml_f32(gb);
                for (int64_t i = 0, m = ml_numel(gb); i < m; i++) p[i] = -p[i];
            } else {
                st = ml_last_status();
            }
        }
        if (wa) ga = q;
        else ml_release(q);
        break;
    }
    case ML_REMAINDER:
    case ML_FMOD: { /* a − q·b with q piecewise constant: d/da = 1, d/db = −q */
        ml_tensor *a = ml_node_saved(n, 0), *b = ml_node_saved(n, 1);
        if (!a || !b) return ml_last_status();
        if (wa) ga = ml_retain(g);
        if (!wb) break;
        ml_tensor *A = materialise(a, g), *B = materialise(b, g);
        gb = ml_empty(ML_F32, g->ndim, g->shape);
        if (!A || !B || !gb) {
            st = ML_ERR_MEM;
        } else {
            const float *pa = ml_f32(A), *pb = ml_f32(B), *pg = ml_f32(g);
            float *qb = ml_f32(gb);
            for (int64_t i = 0, m = ml_numel(g); i < m; i++) {
                float q = op == ML_REMAINDER ? f_floor_divide(pa[i], pb[i]) : f_trunc_divide(pa[i], pb[i]);
                qb[i] = -pg[i] * q;
            }
        }
        ml_release(A);
        ml_release(B);
        break;
    }
    case ML_FLOOR_DIVIDE: /* piecewise constant: a zero gradient, as torch.div(rounding_mode = "floor") */
        for (int i = 0; i < 2 && st == ML_OK; i++)
            if (ml_node_input_needs_grad(n, i) && !(gin[i] = ml_zeros(ML_F32, n->in_ndim[i], n->in_shape[i])))
                st = ml_last_status();
        return st;
    case ML_POW:
    case ML_MAXIMUM:
    case ML_MINIMUM: {
        ml_tensor *a = ml_node_saved(n, 0), *b = ml_node_saved(n, 1), *out = ml_node_saved(n, 2);
        if (!a || !b || !out) return ml_last_status();
        ml_tensor *A = materialise(a, g), *B = materialise(b, g);
        ml_tensor *O = mlo_dense(out);
        if (wa) ga = ml_empty(ML_F32, g->ndim, g->shape);
        if (wb) gb = ml_empty(ML_F32, g->ndim, g->shape);
        if (!A || !B || !O || (wa && !ga) || (wb && !gb)) {
            st = ML_ERR_MEM;
        } else {
            const float *pa = ml_f32(A), *pb = ml_f32(B), *po = ml_f32(O), *pg = ml_f32(g);
            float *qa = wa ? ml_f32(ga) : NULL, *qb = wb ? ml_f32(gb) : NULL;
            for (int64_t i = 0, m = ml_numel(g); i < m; i++) {
                float x = pa[i], y = pb[i], gi = pg[i];
                float da, db;
                if (op == ML_POW) {
                    /* PyTorch's conventions: no gradient through exponent 0, nor through log(0) */
                    da = y == 0.0f ? 0.0f : y * powf(x, y - 1.0f);
                    db = (x == 0.0f && y >= 0.0f) ? 0.0f : po[i] * logf(x);
                } else {
                    bool first = op == ML_MAXIMUM ? x > y : x < y;
                    /* ties share the gradient, as PyTorch does */
                    da = x == y ? 0.5f : (first ? 1.0f : 0.0f);
                    db = x == y ? 0.5f : (first ? 0.0f : 1.0f);
                }
                if (qa) qa[i] = gi * da;
                if (qb) qb[i] = gi * db;
            }
        }
        ml_release(A);
        ml_release(B);
        ml_release(O);
        break;
    }
    default:
        st = ml_fail(ML_ERR_STATE, "backward: %s is not differentiable", ml_binop_name(op));
    }
    if (st == ML_OK && ga) {
        gin[0] = ml_sum_to_shape(ga, n->in_ndim[0], n->in_shape[0]);
        if (!gin[0]) st = ml_last_status();
    }
    if (st == ML_OK && gb) {
        gin[1] = ml_sum_to_shape(gb, n->in_ndim[1], n->in_shape[1]);
        if (!gin[1]) st = ml_last_status();
    }
    ml_release(ga);
    ml_release(gb);
    return st;
}

ml_tensor *ml_binary(ml_binop op, ml_tensor *a, ml_tensor *b) {
    if ((unsigned)op >= N_BINOPS) {
        ml_fail(ML_ERR_ARG, "binary: unknown operation %d", (int)op);
        return NULL;
    }
    const char *fn = binop_names[op];
    int nd;
    int64_t shape[ML_MAX_DIMS];
    if (ml_broadcast_shape(fn, a, b, &nd, shape) || ml_check_shape(fn, 1, nd, shape)) return NULL;
    bool cmp = op >= ML_EQ;
    /* int32 with int32 stays int32, except division and pow (PyTorch's true division) */
    bool int_path = a->dtype == ML_I32 && b->dtype == ML_I32 && op != ML_DIV && op != ML_POW;
    ml_tensor *out = ml_empty(cmp || int_path ? ML_I32 : ML_F32, nd, shape);
    if (!out) return NULL;
    if (int_path) {
        ew_plan p;
        plan_init(&p, out, a, b);
        if (p.total && !run_i32(op, &p, ml_i32(out), ml_i32(a), ml_i32(b))) {
            ml_release(out);
            ml_fail(ML_ERR_ARG, "%s: integer division by zero (argument 2 holds a 0 and both operands are int32; "
                                "a float32 operand gives IEEE's inf and nan)", fn);
            return NULL;
        }
        return out;
    }
    ml_tensor *fa = mlo_float(a), *fb = mlo_float(b);
    if (!fa || !fb) {
        ml_release(fa);
        ml_release(fb);
        ml_release(out);
        return NULL;
    }
    ew_plan p;
    plan_init(&p, out, fa, fb);
    if (p.total) {
        if (cmp) run_cmp_f32(op, &p, ml_i32(out), ml_f32(fa), ml_f32(fb));
        else run_f32(op, &p, ml_f32(out), ml_f32(fa), ml_f32(fb));
    }
    if (!cmp && (ml_needs_grad(a) || ml_needs_grad(b))) {
        ml_node *node = ml_node_new(binop_bw_names[op], binary_backward, 2, (ml_tensor *[]){a, b});
        if (node) {
            node->iarg[0] = op;
            if (op != ML_ADD && op != ML_SUB && op != ML_FLOOR_DIVIDE) {
                ml_node_save(node, 0, fa);
                ml_node_save(node, 1, fb);
                if (op != ML_MUL && op != ML_REMAINDER && op != ML_FMOD) ml_node_save(node, 2, out);
            }
        }
        out = mlo_attach(out, node);
    }
    ml_release(fa);
    ml_release(fb);
    return out;
}

ml_tensor *mlo_add_node(ml_tensor *out, ml_tensor *a, ml_tensor *b) {
    if (!out || !(ml_needs_grad(a) || ml_needs_grad(b))) return out;
    ml_node *node = ml_node_new(binop_bw_names[ML_ADD], binary_backward, 2, (ml_tensor *[]){a, b});
    if (node) node->iarg[0] = ML_ADD;
    return mlo_attach(out, node);
}

/* A 0-dim operand for the scalar forms: int32 when it keeps an int32 tensor's arithmetic exact. */
static ml_tensor *scalar_for(const ml_tensor *a, double s) {
    bool integral = a->dtype == ML_I32 && s == floor(s) && s >= INT32_MIN && s <= INT32_MAX;
    return ml_scalar(integral ? ML_I32 : ML_F32, s);
}

ml_tensor *ml_binary_scalar(ml_binop op, ml_tensor *a, double s) {
    ml_tensor *b = scalar_for(a, s);
    if (!b) return NULL;
    ml_tensor *out = ml_binary(op, a, b);
    ml_release(b);
    return out;
}

ml_tensor *ml_scalar_binary(ml_binop op, double s, ml_tensor *a) {
    ml_tensor *b = scalar_for(a, s);
    if (!b) return NULL;
    ml_tensor *out = ml_binary(op, b, a);
    ml_release(b);
    return out;
}

ml_tensor *ml_add(ml_tensor *a, ml_tensor *b) { return ml_binary(ML_ADD, a, b); }
ml_tensor *ml_sub(ml_tensor *a, ml_tensor *b) { return ml_binary(ML_SUB, a, b); }
ml_tensor *ml_mul(ml_tensor *a, ml_tensor *b) { return ml_binary(ML_MUL, a, b); }
ml_tensor *ml_div(ml_tensor *a, ml_tensor *b) { return ml_binary(ML_DIV, a, b); }

/* ------------------------------------------------------------------ unary */



/* The unary maps run on every MLP hidden unit and mixer gate: their loops vectorise (kernel_util.h)
 * and are built for AVX2/AVX-512 too, picked at load time (the portable binary targets SSE2). */
MLK_CLONES static void unary_f32(ml_unop op, int64_t n, const float *x, float *y) {
    switch (op) {
    case ML_NEG: for (int64_t i = 0; i < n; i++) y[i] = -x[i]; break;
    case ML_EXP: for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]); break;
    case ML_LOG: for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]); break;
    case ML_SQRT: for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); break;
    case ML_ABS: for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]); break;
    case ML_TANH: for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]); break;
    case ML_SIGMOID:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = mlk_sigmoid(x[i]);
        break;
    case ML_RELU: for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0.0f; break;
    case ML_GELU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float cdf, pdf;
            mlk_normal_cdf_pdf(x[i], &cdf, &pdf);
            y[i] = x[i] * cdf;
        }
        break;
    case ML_SILU:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * mlk_sigmoid(x[i]);
        break;
    case ML_SOFTPLUS:
#pragma omp simd
        for (int64_t i = 0; i < n; i++) y[i] = mlk_softplus(x[i]);
        break;
    case ML_SIN: for (int64_t i = 0; i < n; i++) y[i] = sinf(x[i]); break;
    case ML_COS: for (int64_t i = 0; i < n; i++) y[i] = cosf(x[i]); break;
    }
}

/* unary_f32 on ml_threads_for(n) threads, each on a range (the same bits: one element at a time) */
static void unary_f32_ranges(ml_unop op, int64_t n, const float *x, float *y) {
    int nt = ml_threads_for(n);
    if (nt < 2) { /* no parallel region for one thread */
        unary_f32(op, n, x, y);
        return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < nt; c++) {
        int64_t lo = n * c / nt, hi = n * (c + 1) / nt;
        unary_f32(op, hi - lo, x + lo, y + lo);
    }
}

/* SiLU or softplus y and s = σ(x), which is what their backward needs (the bits of mlk_sigmoid) */
MLK_CLONES static void unary_sigmoid_f32(ml_unop op, int64_t n, const float *x, float *y, float *s) {
    if (op == ML_SILU) {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float si = mlk_sigmoid(x[i]);
            s[i] = si;
            y[i] = x[i] * si;
        }
    } else {
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float xi = x[i], t = mlk_expf_neg(xi < 0 ? xi : -xi), r = 1.0f / (1.0f + t); /* mlk_sigmoid's steps */
            s[i] = xi < 0 ? t * r : r;
            y[i] = mlk_softplus_t(xi, t);
        }
    }
}

/* GELU y = x·Φ(x) and, for its backward, f'(x) = Φ(x) + x·φ(x): the forward has both Φ and φ at
 * hand, so the backward needs only a product instead of the erf and exp again (the same
 * operations as unary_grad_f32's, so the same bits). */
MLK_CLONES static void gelu_slope_f32(int64_t n, const float *x, float *y, float *slope) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        float cdf, pdf;
        mlk_normal_cdf_pdf(x[i], &cdf, &pdf);
        y[i] = x[i] * cdf;
        slope[i] = cdf + x[i] * pdf;
    }
}

/* d = g · f'(x): the loops of unary_backward, multiversioned like unary_f32 */
MLK_CLONES static void unary_grad_f32(ml_unop op, int64_t m, const float *x, const float *y, const float *pg,
                                         float *d) {
    switch (op) {
    case ML_NEG: for (int64_t i = 0; i < m; i++) d[i] = -pg[i]; break;
    case ML_EXP: for (int64_t i = 0; i < m; i++) d[i] = pg[i] * y[i]; break;
    case ML_LOG: for (int64_t i = 0; i < m; i++) d[i] = pg[i] / x[i]; break;
    case ML_SQRT: for (int64_t i = 0; i < m; i++) d[i] = pg[i] / (2.0f * y[i]); break;
    case ML_ABS:
        for (int64_t i = 0; i < m; i++) d[i] = x[i] > 0 ? pg[i] : (x[i] < 0 ? -pg[i] : 0.0f);
        break;
    case ML_TANH: for (int64_t i = 0; i < m; i++) d[i] = pg[i] * (1.0f - y[i] * y[i]); break;
    case ML_SIGMOID:
#pragma omp simd
        for (int64_t i = 0; i < m; i++) d[i] = pg[i] * y[i] * (1.0f - y[i]);
        break;
    case ML_RELU: for (int64_t i = 0; i < m; i++) d[i] = x[i] > 0 ? pg[i] : 0.0f; break;
    case ML_GELU:
#pragma omp simd
        for (int64_t i = 0; i < m; i++) {
            float cdf, pdf;
            mlk_normal_cdf_pdf(x[i], &cdf, &pdf);
            d[i] = pg[i] * (cdf + x[i] * pdf);
        }
        break;
    case ML_SILU: /* y holds σ(x) here (ml_unary saves it in place of the output), as for softplus */
#pragma omp simd
        for (int64_t i = 0; i < m; i++) d[i] = pg[i] * y[i] * (1.0f + x[i] * (1.0f - y[i]));
        break;
    case ML_SOFTPLUS: /* y holds σ(x) here too */
#pragma omp simd
        for (int64_t i = 0; i < m; i++) d[i] = x[i] > 20.0f ? pg[i] : pg[i] * y[i];
        break;
    case ML_SIN: for (int64_t i = 0; i < m; i++) d[i] = pg[i] * cosf(x[i]); break;
    case ML_COS: for (int64_t i = 0; i < m; i++) d[i] = -pg[i] * sinf(x[i]); break;
    }
}

static ml_status unary_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_unop op = (ml_unop)n->iarg[0];
    bool slope = op == ML_GELU && n->iarg[1];
    ml_tensor *xs = ml_node_saved(n, 0), *ys = slope ? NULL : ml_node_saved(n, 1);
    if (!xs || (!slope && !ys)) return ml_last_status();
    ml_tensor *r = mlo_grad_over(n, 0, g); /* elementwise: may overwrite g */
    if (!r) return ML_ERR_MEM;
    const float *x = ml_f32(xs), *y = ys ? ml_f32(ys) : NULL, *pg = ml_f32(g);
    float *d = ml_f32(r);
    int64_t m = ml_numel(g);
    if (slope) { /* slot 0 holds f'(x) (gelu_slope_f32) */
#pragma omp simd
        for (int64_t i = 0; i < m; i++) d[i] = pg[i] * x[i];
    } else {
        unary_grad_f32(op, m, x, y, pg, d);
    }
    gin[0] = r;
    return ML_OK;
}

ml_tensor *ml_unary(ml_unop op, ml_tensor *a) {
    if ((unsigned)op >= N_UNOPS) {
        ml_fail(ML_ERR_ARG, "unary: unknown operation %d", (int)op);
        return NULL;
    }
    if (a->dtype == ML_I32 && (op == ML_NEG || op == ML_ABS || op == ML_RELU)) {
        ml_tensor *x = mlo_dense(a);
        ml_tensor *out = x ? ml_empty(ML_I32, a->ndim, a->shape) : NULL;
        if (out) {
            const int32_t *px = ml_i32(x);
            int32_t *py = ml_i32(out);
            for (int64_t i = 0, n = ml_numel(out); i < n; i++) {
                int32_t v = px[i], neg = (int32_t)(0u - (uint32_t)v); /* wraps like PyTorch at INT32_MIN */
                py[i] = op == ML_NEG ? neg : op == ML_ABS ? (v < 0 ? neg : v) : (v > 0 ? v : 0);
            }
        }
        ml_release(x);
        return out;
    }
    ml_tensor *f = mlo_float(a);
    ml_tensor *x = f ? mlo_dense(f) : NULL;
    ml_release(f);
    if (!x) return NULL;
    ml_tensor *out = ml_empty(ML_F32, a->ndim, a->shape);
    if (!out) {
        ml_release(x);
        return NULL;
    }
    /* SiLU's and softplus's backward need σ(x): the forward keeps it (the bits a recomputation gives) */
    bool keep_sig = (op == ML_SILU || op == ML_SOFTPLUS) && ml_needs_grad(a);
    ml_tensor *sig = keep_sig ? ml_empty(ML_F32, a->ndim, a->shape) : NULL;
    if (keep_sig && !sig) {
        ml_release(x), ml_release(out);
        return NULL;
    }
    /* GELU's backward reads f'(x) saved by the forward instead of x (sig holds it) */
    bool gelu_slope = op == ML_GELU && ml_needs_grad(a);
    if (gelu_slope && !(sig = ml_empty(ML_F32, a->ndim, a->shape))) {
        ml_release(x), ml_release(out);
        return NULL;
    }
    if (gelu_slope) gelu_slope_f32(ml_numel(out), ml_f32(x), ml_f32(out), ml_f32(sig));
    else if (sig) unary_sigmoid_f32(op, ml_numel(out), ml_f32(x), ml_f32(out), ml_f32(sig));
    else unary_f32_ranges(op, ml_numel(out), ml_f32(x), ml_f32(out));
    if (ml_needs_grad(a)) {
        ml_node *node = ml_node_new(unop_bw_names[op], unary_backward, 1, &a);
        if (node) {
            node->iarg[0] = op;
            node->iarg[1] = gelu_slope;
            ml_node_save(node, 0, gelu_slope ? sig : x);
            ml_node_save(node, 1, gelu_slope ? NULL : sig ? sig : out);
        }
        out = mlo_attach(out, node);
    }
    ml_release(x), ml_release(sig);
    return out;
}

/* ------------------------------------------------------------------ bias + GELU */

/* y = gelu(h + b) and f'(h + b) over rows of n: gelu_slope_f32 on the biased value, which it
 * computes as an addition of its own (the sum ml_linear's beta = 1 product rounds the same way). */
MLK_CLONES static void bias_gelu_f32(int64_t rows, int64_t n, const float *h, const float *b, float *y,
                                     float *slope) {
    for (int64_t r = 0; r < rows; r++) {
        const float *hr = h + r * n;
        float *yr = y + r * n, *sr = slope ? slope + r * n : NULL;
        if (sr) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) {
                float x = hr[j] + b[j], cdf, pdf;
                mlk_normal_cdf_pdf(x, &cdf, &pdf);
                yr[j] = x * cdf;
                sr[j] = cdf + x * pdf;
            }
        } else {
#pragma omp simd
            for (int64_t j = 0; j < n; j++) {
                float x = hr[j] + b[j], cdf, pdf;
                mlk_normal_cdf_pdf(x, &cdf, &pdf);
                yr[j] = x * cdf;
            }
        }
    }
}

/* d = g·f' (over g when d is g) and, when acc is given, acc[j] += Σ_r d[r, j] in row order in
 * double: the bias gradient as linear_backward sums it, in the same pass. */
MLK_CLONES static void bias_gelu_grad_f32(int64_t rows, int64_t n, const float *g, const float *slope, float *d,
                                          double *acc) {
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + r * n, *sr = slope + r * n;
        float *dr = d + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) dr[j] = gr[j] * sr[j];
        if (acc)
            for (int64_t j = 0; j < n; j++) acc[j] += dr[j];
    }
}

/* Saved: 0 = f'(h + b); iarg[0] = n (the bias length). */
static ml_status bias_gelu_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *sl = ml_node_saved(node, 0);
    if (!sl) return ml_last_status();
    int64_t n = node->iarg[0], rows = n ? ml_numel(g) / n : 0;
    bool wb = ml_node_input_needs_grad(node, 1);
    ml_tensor *d = ml_node_input_needs_grad(node, 0) ? mlo_grad_over(node, 0, g) : ml_empty(ML_F32, g->ndim, g->shape);
    double *acc = wb ? calloc((size_t)(n ? n : 1), sizeof *acc) : NULL;
    ml_tensor *gb = wb ? ml_empty(ML_F32, 1, &n) : NULL;
    if (!d || (wb && (!acc || !gb))) {
        ml_release(d), ml_release(gb);
        free(acc);
        return ml_fail(ML_ERR_MEM, "bias_gelu backward: out of memory");
    }
    bias_gelu_grad_f32(rows, n, ml_f32(g), ml_f32(sl), ml_f32(d), acc);
    if (wb) {
        for (int64_t j = 0; j < n; j++) ml_f32(gb)[j] = (float)acc[j];
        free(acc);
        float *bsink = ml_node_grad_sink(node, 1);
        if (bsink) {
            for (int64_t j = 0; j < n; j++) bsink[j] += ml_f32(gb)[j];
            ml_release(gb);
            gb = NULL;
        }
    }
    if (ml_node_input_needs_grad(node, 0)) gin[0] = d;
    else ml_release(d);
    gin[1] = gb;
    return ML_OK;
}

ml_tensor *ml_bias_gelu(ml_tensor *h, ml_tensor *bias) {
    if (mlo_check_f32("bias_gelu", 1, h) || mlo_check_f32("bias_gelu", 2, bias)) return NULL;
    int64_t n = h->ndim ? h->shape[h->ndim - 1] : 0;
    if (h->ndim < 1 || bias->ndim != 1 || bias->shape[0] != n) {
        char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "bias_gelu: expected a bias [n] for a tensor (..., n), got %s and %s",
                ml_shape_str(s1, bias->ndim, bias->shape), ml_shape_str(s2, h->ndim, h->shape));
        return NULL;
    }
    ml_tensor *hc = mlo_dense(h), *bc = mlo_dense(bias);
    bool rec = ml_needs_grad(h) || ml_needs_grad(bias);
    ml_tensor *out = hc && bc ? ml_empty(ML_F32, h->ndim, h->shape) : NULL;
    ml_tensor *sl = out && rec ? ml_empty(ML_F32, h->ndim, h->shape) : NULL;
    if (!out || (rec && !sl)) {
        ml_release(hc), ml_release(bc), ml_release(out);
        return NULL;
    }
    bias_gelu_f32(n ? ml_numel(h) / n : 0, n, ml_f32(hc), ml_f32(bc), ml_f32(out), sl ? ml_f32(sl) : NULL);
    if (rec) {
        ml_node *node = ml_node_new("BiasGeluBackward", bias_gelu_backward, 2, (ml_tensor *[]){h, bias});
        if (node) {
            node->iarg[0] = n;
            ml_node_save(node, 0, sl);
        }
        out = mlo_attach(out, node);
    }
    ml_release(hc), ml_release(bc), ml_release(sl);
    return out;
}

/* ------------------------------------------------------------------ clamp */

static ml_status clamp_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *xs = ml_node_saved(n, 0);
    if (!xs) return ml_last_status();
    double lo = n->farg[0], hi = n->farg[1];
    ml_tensor *r = ml_empty(ML_F32, g->ndim, g->shape);
    if (!r) return ML_ERR_MEM;
    const float *x = ml_f32(xs), *pg = ml_f32(g);
    float *d = ml_f32(r);
    for (int64_t i = 0, m = ml_numel(g); i < m; i++) {
        bool pass = (isnan(lo) || x[i] >= lo) && (isnan(hi) || x[i] <= hi);
        d[i] = pass ? pg[i] : 0.0f;
    }
    gin[0] = r;
    return ML_OK;
}

static bool int_bound(double v) { return isnan(v) || (v == floor(v) && v >= INT32_MIN && v <= INT32_MAX); }

ml_tensor *ml_clamp(ml_tensor *a, double lo, double hi) {
    if (isinf(lo) && lo < 0) lo = NAN; /* an infinite bound is no bound */
    if (isinf(hi) && hi > 0) hi = NAN;
    if (a->dtype == ML_I32 && int_bound(lo) && int_bound(hi)) {
        ml_tensor *x = mlo_dense(a);
        ml_tensor *out = x ? ml_empty(ML_I32, a->ndim, a->shape) : NULL;
        if (out) {
            const int32_t *px = ml_i32(x);
            int32_t *py = ml_i32(out);
            for (int64_t i = 0, n = ml_numel(out); i < n; i++) {
                int32_t v = px[i];
                if (!isnan(lo) && v < (int32_t)lo) v = (int32_t)lo;
                if (!isnan(hi) && v > (int32_t)hi) v = (int32_t)hi;
                py[i] = v;
            }
        }
        ml_release(x);
        return out;
    }
    ml_tensor *f = mlo_float(a);
    ml_tensor *x = f ? mlo_dense(f) : NULL;
    ml_release(f);
    if (!x) return NULL;
    ml_tensor *out = ml_empty(ML_F32, a->ndim, a->shape);
    if (!out) {
        ml_release(x);
        return NULL;
    }
    const float *px = ml_f32(x);
    float *py = ml_f32(out);
    float flo = (float)lo, fhi = (float)hi;
    for (int64_t i = 0, n = ml_numel(out); i < n; i++) {
        float v = px[i];
        if (!isnan(lo) && v < flo) v = flo;
        if (!isnan(hi) && v > fhi) v = fhi; /* lo > hi gives hi everywhere, as PyTorch */
        py[i] = v;
    }
    if (ml_needs_grad(a)) {
        ml_node *node = ml_node_new("ClampBackward", clamp_backward, 1, &a);
        if (node) {
            node->farg[0] = lo;
            node->farg[1] = hi;
            ml_node_save(node, 0, x);
        }
        out = mlo_attach(out, node);
    }
    ml_release(x);
    return out;
}

/* ------------------------------------------------------------------ where */

static ml_status where_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *c = ml_node_saved(n, 0);
    if (!c) return ml_last_status();
    ml_tensor *C = materialise(c, g);
    if (!C) return ml_last_status();
    ml_status st = ML_OK;
    for (int k = 0; k < 2 && st == ML_OK; k++) {
        if (!ml_node_input_needs_grad(n, k + 1)) continue;
        ml_tensor *full = ml_empty(ML_F32, g->ndim, g->shape);
        if (!full) {
            st = ML_ERR_MEM;
            break;
        }
        const float *pg = ml_f32(g);
        float *d = ml_f32(full);
        for (int64_t i = 0, m = ml_numel(g); i < m; i++) {
            bool on = C->dtype == ML_F32 ? ml_f32(C)[i] != 0.0f : ml_i32(C)[i] != 0;
            d[i] = on == (k == 0) ? pg[i] : 0.0f;
        }
        gin[k + 1] = ml_sum_to_shape(full, n->in_ndim[k + 1], n->in_shape[k + 1]);
        ml_release(full);
        if (!gin[k + 1]) st = ml_last_status();
    }
    ml_release(C);
    return st;
}

ml_tensor *ml_where(ml_tensor *cond, ml_tensor *a, ml_tensor *b) {
    int n1, nd;
    int64_t s1[ML_MAX_DIMS], shape[ML_MAX_DIMS];
    if (ml_broadcast_shape("where", cond, a, &n1, s1)) return NULL;
    ml_tensor probe = {.ndim = n1};
    memcpy(probe.shape, s1, sizeof s1);
    if (ml_broadcast_shape("where", &probe, b, &nd, shape) || ml_check_shape("where", 1, nd, shape)) return NULL;
    bool ints = a->dtype == ML_I32 && b->dtype == ML_I32;
    ml_tensor *out = ml_empty(ints ? ML_I32 : ML_F32, nd, shape);
    ml_tensor *fa = ints ? ml_retain(a) : mlo_float(a), *fb = ints ? ml_retain(b) : mlo_float(b);
    if (!out || !fa || !fb) {
        ml_release(out);
        ml_release(fa);
        ml_release(fb);
        return NULL;
    }
    int64_t sc[ML_MAX_DIMS], sa[ML_MAX_DIMS], sb[ML_MAX_DIMS];
    mlo_bstrides(cond, nd, sc);
    mlo_bstrides(fa, nd, sa);
    mlo_bstrides(fb, nd, sb);
    ml_iter it;
    ml_iter_init(&it, nd, shape, 3, (const int64_t *[]){sc, sa, sb});
    for (int64_t i = 0, m = ml_numel(out); i < m; i++, ml_iter_next(&it)) {
        bool on = cond->dtype == ML_F32 ? ml_f32(cond)[it.off[0]] != 0.0f : ml_i32(cond)[it.off[0]] != 0;
        if (ints) ml_i32(out)[i] = on ? ml_i32(fa)[it.off[1]] : ml_i32(fb)[it.off[2]];
        else ml_f32(out)[i] = on ? ml_f32(fa)[it.off[1]] : ml_f32(fb)[it.off[2]];
    }
    if (!ints && (ml_needs_grad(a) || ml_needs_grad(b))) {
        ml_tensor *in[3] = {cond, a, b};
        ml_node *node = ml_node_new("WhereBackward", where_backward, 3, in);
        if (node) ml_node_save(node, 0, cond);
        out = mlo_attach(out, node);
    }
    ml_release(fa);
    ml_release(fb);
    return out;
}
