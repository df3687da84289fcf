/* einsum built from existing differentiable ops. Each operand first takes the diagonal of a
 * label it repeats (multiply by an identity mask, sum one of the two dims) and expands its
 * size-1 dims to the label's size. Operands are then contracted left to right: a label that no
 * later operand nor the output needs is summed away before the product; the two tensors are
 * permuted to (batch, own, contracted) and (batch, contracted, own), reshaped to 3-D and
 * multiplied with one batched matmul. What remains is summed to the output's labels and
 * permuted into its order. Gradients are those of permute, reshape, expand, mul, sum, matmul. */
#include <stdio.h>
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

enum { LETTERS = 52, MAX_LABELS = LETTERS + ML_MAX_DIMS, MAX_OPERANDS = 16 };

/* One term of the spec as written: letter ids (A-Z = 0..25, a-z = 26..51) around an optional "...". */
typedef struct {
    int n;                /* letters */
    int lab[ML_MAX_DIMS]; /* letter ids in order */
    int ellipsis_at;      /* letters before the "...", or -1 */
} spec_term;

/* A tensor with one label per dim (letters, or LETTERS + k for the k-th "..." dim). */
typedef struct {
    ml_tensor *t; /* owned reference */
    int n;
    int lab[ML_MAX_DIMS];
} term;

typedef struct {
    const char *spec;
    int n;
    spec_term in[MAX_OPERANDS], out;
    bool explicit_out;
    int ell; /* the most "..." dims of any operand */
    int64_t size[MAX_LABELS];
    int size_arg[MAX_LABELS]; /* the argument that set size[] */
    bool out_has[MAX_LABELS];
} plan;

static char label_char(int id) { return id < 26 ? (char)('A' + id) : id < LETTERS ? (char)('a' + id - 26) : '.'; }

/* Reads one term at *p up to ',', '-' or the end. */
static ml_status parse_term(plan *P, const char **p, spec_term *st) {
    st->n = 0;
    st->ellipsis_at = -1;
    for (const char *s = *p;; s++) {
        if (*s == ' ') continue;
        if (*s == ',' || *s == '-' || *s == '\0') {
            *p = s;
            return ML_OK;
        }
        if (!strncmp(s, "...", 3)) {
            if (st->ellipsis_at >= 0)
                return ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has two \"...\" in one term", P->spec);
            st->ellipsis_at = st->n;
            s += 2;
            continue;
        }
        bool upper = *s >= 'A' && *s <= 'Z', lower = *s >= 'a' && *s <= 'z';
        if (!upper && !lower)
            return ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has '%c' at position %d, expected a letter, \"...\", ',' or \"->\"",
                           P->spec, *s, (int)(s - P->spec));
        if (st->n == ML_MAX_DIMS)
            return ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has a term with more than %d labels", P->spec,
                           ML_MAX_DIMS);
        st->lab[st->n++] = upper ? *s - 'A' : *s - 'a' + 26;
    }
}

static ml_status parse(plan *P, int n) {
    const char *p = P->spec;
    P->n = 0;
    for (;;) {
        if (P->n == MAX_OPERANDS)
            return ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has more than %d operands", P->spec, MAX_OPERANDS);
        if (parse_term(P, &p, &P->in[P->n++])) return ml_last_status();
        if (*p != ',') break;
        p++;
    }
    P->explicit_out = *p == '-';
    if (P->explicit_out) {
        if (p[1] != '>')
            return ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has '-' at position %d, expected \"->\"", P->spec,
                           (int)(p - P->spec));
        p += 2;
        if (parse_term(P, &p, &P->out)) return ml_last_status();
        if (*p)
            return ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has '%c' after the output term", P->spec, *p);
    }
    if (P->n != n)
        return ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has %d operand terms, but %d tensors were given",
                       P->spec, P->n, n);
    return ML_OK;
}

/* Labels of operand k (its "..." dims right-aligned to the widest) into x->lab; checks sizes. */
static ml_status label_operand(plan *P, int k, ml_tensor *t, term *x) {
    const spec_term *st = &P->in[k];
    int e = t->ndim - st->n;
    if (e < 0 || (st->ellipsis_at < 0 && e != 0))
        return ml_fail(ML_ERR_SHAPE, "einsum: argument %d has %d dimensions, but its term %d in argument 1 (\"%s\") names %d%s",
                       k + 2, t->ndim, k + 1, P->spec, st->n, st->ellipsis_at >= 0 ? " and \"...\"" : "");
    x->n = 0;
    for (int i = 0; i <= st->n; i++) {
        if (i == st->ellipsis_at)
            for (int j = 0; j < e; j++) x->lab[x->n++] = LETTERS + P->ell - e + j;
        if (i < st->n) x->lab[x->n++] = st->lab[i];
    }
    for (int d = 0; d < t->ndim; d++) {
        int l = x->lab[d];
        if (P->size[l] < 0 || P->size[l] == 1) {
            P->size[l] = t->shape[d];
            P->size_arg[l] = k + 2;
        } else if (t->shape[d] != 1 && t->shape[d] != P->size[l] && P->size_arg[l] == k + 2) {
            return ml_fail(ML_ERR_SHAPE, "einsum: label '%c' repeats in argument %d with sizes %lld and %lld",
                           label_char(l), k + 2, (long long)P->size[l], (long long)t->shape[d]);
        } else if (t->shape[d] != 1 && t->shape[d] != P->size[l]) {
            char what[16] = "a \"...\" dim";
            if (l < LETTERS) snprintf(what, sizeof what, "label '%c'", label_char(l));
            return ml_fail(ML_ERR_SHAPE, "einsum: %s has size %lld in argument %d, but %lld in argument %d", what,
                           (long long)t->shape[d], k + 2, (long long)P->size[l], P->size_arg[l]);
        }
    }
    return ML_OK;
}

/* Replaces x's tensor with nt (taking its reference); false when nt is NULL. */
static bool replace(term *x, ml_tensor *nt) {
    ml_release(x->t);
    x->t = nt;
    return nt != NULL;
}

static void drop_dim(term *x, int d) {
    for (int i = d; i + 1 < x->n; i++) x->lab[i] = x->lab[i + 1];
    x->n--;
}

/* Diagonal of every label x repeats: x·I summed over the second dim of the pair. */
static bool take_diagonals(term *x, int arg) {
    for (int d1 = 0; d1 < x->n; d1++)
        for (int d2 = x->n - 1; d2 > d1; d2--) {
            if (x->lab[d1] != x->lab[d2]) continue;
            int64_t m = x->t->shape[d1], shape[ML_MAX_DIMS];
            if (x->t->shape[d2] != m) {
                ml_fail(ML_ERR_SHAPE, "einsum: label '%c' repeats in argument %d with sizes %lld and %lld",
                        label_char(x->lab[d1]), arg, (long long)m, (long long)x->t->shape[d2]);
                return false;
            }
            for (int d = 0; d < x->n; d++) shape[d] = d == d1 || d == d2 ? m : 1;
            ml_tensor *eye = ml_zeros(ML_F32, x->n, shape);
            if (!eye) return false;
            int64_t step = eye->stride[d1] + eye->stride[d2];
            for (int64_t i = 0; i < m; i++) ml_f32(eye)[i * step] = 1;
            ml_tensor *masked = ml_mul(x->t, eye);
            ml_release(eye);
            if (!masked || !replace(x, ml_reduce(ML_SUM, masked, d2, false))) {
                ml_release(masked);
                return false;
            }
            ml_release(masked);
            drop_dim(x, d2);
        }
    return true;
}

/* Broadcasts x's size-1 dims to their labels' sizes. */
static bool expand_to_sizes(const plan *P, term *x) {
    int64_t shape[ML_MAX_DIMS];
    bool any = false;
    for (int d = 0; d < x->n; d++) {
        shape[d] = P->size[x->lab[d]];
        any = any || shape[d] != x->t->shape[d];
    }
    return !any || replace(x, ml_expand(x->t, x->n, shape));
}

/* Sums away every dim of x whose label fails keep(label) — last dims first. */
static bool sum_unkept(term *x, const bool *keep) {
    for (int d = x->n - 1; d >= 0; d--) {
        if (keep[x->lab[d]]) continue;
        if (!replace(x, ml_reduce(ML_SUM, x->t, d, false))) return false;
        drop_dim(x, d);
    }
    return true;
}

static bool has_label(const term *x, int lab) {
    for (int d = 0; d < x->n; d++)
        if (x->lab[d] == lab) return true;
    return false;
}

/* a·b over their shared labels; `later` marks the labels the output or a later operand needs
 * (shared ones stay as batch dims). The result goes to a; b is consumed. */
static bool contract(term *a, term *b, const bool *later) {
    bool keep_a[MAX_LABELS], keep_b[MAX_LABELS];
    for (int l = 0; l < MAX_LABELS; l++) keep_a[l] = keep_b[l] = later[l];
    for (int d = 0; d < b->n; d++) keep_a[b->lab[d]] = true;
    for (int d = 0; d < a->n; d++) keep_b[a->lab[d]] = true;
    if (!sum_unkept(a, keep_a) || !sum_unkept(b, keep_b)) return false;
    /* a's dims as (batch, own, contracted); b's as (batch, contracted, own) in a's label order */
    int pa[3][ML_MAX_DIMS], na[3] = {0, 0, 0}, pb_own[ML_MAX_DIMS], nb_own = 0;
    for (int d = 0; d < a->n; d++) {
        int l = a->lab[d], kind = !has_label(b, l) ? 1 : later[l] ? 0 : 2;
        pa[kind][na[kind]++] = d;
    }
    for (int d = 0; d < b->n; d++)
        if (!has_label(a, b->lab[d])) pb_own[nb_own++] = d;
    if (na[0] + na[1] + nb_own > ML_MAX_DIMS) {
        ml_fail(ML_ERR_SHAPE, "einsum: an intermediate product has more than %d dimensions; reorder the operands",
                ML_MAX_DIMS);
        return false;
    }
    int perm_a[ML_MAX_DIMS], perm_b[ML_MAX_DIMS], ia = 0, ib = 0, out_lab[ML_MAX_DIMS], no = 0;
    int64_t size3[3] = {1, 1, 1}, n_own = 1, out_shape[ML_MAX_DIMS];
    for (int kind = 0; kind < 3; kind++)
        for (int j = 0; j < na[kind]; j++) {
            int d = pa[kind][j];
            perm_a[ia++] = d;
            size3[kind] *= a->t->shape[d];
            if (kind < 2) out_lab[no] = a->lab[d], out_shape[no++] = a->t->shape[d];
            if (kind != 1)
                for (int e = 0; e < b->n; e++)
                    if (b->lab[e] == a->lab[d]) perm_b[kind == 0 ? ib++ : na[0] + j] = e;
        }
    ib = na[0] + na[2];
    for (int j = 0; j < nb_own; j++) {
        int d = pb_own[j];
        perm_b[ib++] = d;
        n_own *= b->t->shape[d];
        out_lab[no] = b->lab[d], out_shape[no++] = b->t->shape[d];
    }
    ml_tensor *ta = ml_permute(a->t, perm_a), *tb = ml_permute(b->t, perm_b);
    ml_tensor *ra = ta ? ml_reshape(ta, 3, (int64_t[]){size3[0], size3[1], size3[2]}) : NULL;
    ml_tensor *rb = tb ? ml_reshape(tb, 3, (int64_t[]){size3[0], size3[2], n_own}) : NULL;
    ml_tensor *prod = ra && rb ? ml_matmul(ra, rb) : NULL;
    ml_release(ta), ml_release(tb), ml_release(ra), ml_release(rb);
    bool ok = prod && replace(a, ml_reshape(prod, no, out_shape));
    ml_release(prod);
    if (!ok) return false;
    a->n = no;
    memcpy(a->lab, out_lab, sizeof out_lab);
    return true;
}

ml_tensor *ml_einsum(const char *spec, int n, ml_tensor *const *operands) {
    if (n < 1 || n > MAX_OPERANDS) {
        ml_fail(ML_ERR_ARG, "einsum: expected 1 to %d operands after the spec, got %d", MAX_OPERANDS, n);
        return NULL;
    }
    plan P = {.spec = spec};
    if (parse(&P, n)) return NULL;
    for (int l = 0; l < MAX_LABELS; l++) P.size[l] = -1;
    for (int k = 0; k < n; k++) {
        if (mlo_check_f32("einsum", k + 2, operands[k])) return NULL;
        int e = operands[k]->ndim - P.in[k].n;
        if (P.in[k].ellipsis_at >= 0 && e > P.ell) P.ell = e;
    }
    term x[MAX_OPERANDS];
    int count[MAX_LABELS] = {0}; /* occurrences in the inputs */
    for (int k = 0; k < n; k++) x[k].t = NULL;
    for (int k = 0; k < n; k++) {
        if (label_operand(&P, k, operands[k], &x[k])) goto fail;
        for (int d = 0; d < x[k].n; d++) count[x[k].lab[d]]++;
    }
    /* the output's labels, in order */
    int out_lab[MAX_LABELS], n_out = 0;
    if (P.explicit_out) {
        for (int i = 0; i <= P.out.n; i++) {
            if (i == P.out.ellipsis_at)
                for (int j = 0; j < P.ell; j++) out_lab[n_out++] = LETTERS + j;
            if (i == P.out.n) break;
            int l = P.out.lab[i];
            if (!count[l] || P.out_has[l]) {
                ml_fail(ML_ERR_ARG, "einsum: argument 1 (\"%s\") has output label '%c' %s", spec, label_char(l),
                        count[l] ? "twice" : "that no operand has");
                goto fail;
            }
            P.out_has[l] = true;
            out_lab[n_out++] = l;
        }
    } else {
        for (int l = LETTERS; l < LETTERS + P.ell; l++) out_lab[n_out++] = l;
        for (int l = 0; l < LETTERS; l++)
            if (count[l] == 1) out_lab[n_out++] = l;
    }
    if (n_out > ML_MAX_DIMS) {
        ml_fail(ML_ERR_SHAPE, "einsum: argument 1 (\"%s\") asks for %d output dimensions, at most %d", spec, n_out,
                ML_MAX_DIMS);
        goto fail;
    }
    for (int i = 0; i < n_out; i++) P.out_has[out_lab[i]] = true;
    for (int k = 0; k < n; k++) {
        x[k].t = ml_retain(operands[k]);
        if (!take_diagonals(&x[k], k + 2) || !expand_to_sizes(&P, &x[k])) goto fail;
    }
    for (int k = 1; k < n; k++) {
        bool later[MAX_LABELS];
        memcpy(later, P.out_has, sizeof later);
        for (int j = k + 1; j < n; j++)
            for (int d = 0; d < x[j].n; d++) later[x[j].lab[d]] = true;
        if (!contract(&x[0], &x[k], later)) goto fail;
        ml_release(x[k].t);
        x[k].t = NULL;
    }
    if (!sum_unkept(&x[0], P.out_has)) goto fail;
    int perm[ML_MAX_DIMS];
    for (int i = 0; i < n_out; i++)
        for (int d = 0; d < x[0].n; d++)
            if (x[0].lab[d] == out_lab[i]) perm[i] = d;
    ml_tensor *p = ml_permute(x[0].t, perm);
    ml_tensor *out = p ? ml_contiguous(p) : NULL;
    ml_release(p);
    ml_release(x[0].t);
    return out;
fail:
    for (int k = 0; k < n; k++) ml_release(x[k].t);
    return NULL;
}
