/* Tensor text: see format.h. */
#include "core/format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct {
    const ml_tensor *t;
    ml_print_options o;
    bool summarize, sci, int_mode;
    int width;
    double amax, amin; /* nonzero finite magnitudes shown */
    bool all_int, unit; /* unit: every finite value in [0, 1] */
    char *s; /* the text so far (NULL once memory ran out) */
    size_t len, cap;
} printer;

static void put(printer *p, const char *x, size_t n) {
    if (!p->s) return;
    if (p->len + n + 1 > p->cap) {
        size_t cap = (p->len + n + 1) * 2;
        char *s = realloc(p->s, cap);
        if (!s) {
            free(p->s);
            p->s = NULL;
            return;
        }
        p->s = s, p->cap = cap;
    }
    memcpy(p->s + p->len, x, n);
    p->len += n;
    p->s[p->len] = 0;
}

static void puts_(printer *p, const char *x) { put(p, x, strlen(x)); }

static void spaces(printer *p, int n) {
    for (int i = 0; i < n; i++) put(p, " ", 1);
}

/* The element at off in the chosen format; returns its length. */
static int fmt_value(const printer *p, int64_t off, char *buf, size_t n) {
    if (p->t->dtype == ML_I32) return snprintf(buf, n, "%d", ml_i32(p->t)[off]);
    double x = ml_f32(p->t)[off];
    if (isnan(x)) return snprintf(buf, n, "nan");
    if (isinf(x)) return snprintf(buf, n, x > 0 ? "inf" : "-inf");
    if (p->sci) return snprintf(buf, n, "%.*e", p->o.precision, x);
    if (p->int_mode) return snprintf(buf, n, "%.0f.", x);
    return snprintf(buf, n, "%.*f", p->o.precision, x);
}

/* Calls leaf(p, off) for every element shown, in order. */
static void each_shown(printer *p, int dim, int64_t off, void (*leaf)(printer *, int64_t)) {
    const ml_tensor *t = p->t;
    if (dim == t->ndim) {
        leaf(p, off);
        return;
    }
    int64_t n = t->shape[dim], edge = p->o.edgeitems;
    for (int64_t i = 0; i < n; i++) {
        if (p->summarize && n > 2 * edge && i == edge) i = n - edge;
        each_shown(p, dim + 1, off + i * t->stride[dim], leaf);
    }
}

static void scan_value(printer *p, int64_t off) {
    double v = ml_f32(p->t)[off], x = fabs(v);
    if (!isfinite(x)) return;
    if (v < 0 || v > 1) p->unit = false;
    if (x != floor(x)) p->all_int = false;
    if (x == 0) return;
    if (x > p->amax) p->amax = x;
    if (x < p->amin) p->amin = x;
}

static void measure_value(printer *p, int64_t off) {
    char buf[64];
    int w = fmt_value(p, off, buf, sizeof buf);
    if (w > p->width) p->width = w;
}

/* The separator before item i > 0 of dimension dim (a line break per inner dimension between
 * blocks; the last dimension wraps after per_line items). */
static void separator(printer *p, int dim, int64_t per_line, int64_t *on_line) {
    int indent = dim + 1;
    if (dim + 1 != p->t->ndim) {
        put(p, ",", 1);
        for (int k = dim + 1; k < p->t->ndim; k++) put(p, "\n", 1);
        spaces(p, indent);
    } else if (*on_line == per_line) {
        puts_(p, ",\n");
        spaces(p, indent);
        *on_line = 0;
    } else {
        puts_(p, ", ");
    }
}

static void print_rec(printer *p, int dim, int64_t off) {
    const ml_tensor *t = p->t;
    if (dim == t->ndim) {
        char buf[64];
        int w = fmt_value(p, off, buf, sizeof buf);
        spaces(p, p->width - w);
        put(p, buf, (size_t)w);
        return;
    }
    int64_t n = t->shape[dim], edge = p->o.edgeitems;
    /* elements of the last dim per line: what fits in linewidth after the brackets, at least one */
    int64_t per_line = (p->o.linewidth - (dim + 1)) / (p->width + 2), on_line = 0;
    if (per_line < 1) per_line = 1;
    put(p, "[", 1);
    for (int64_t i = 0; i < n; i++) {
        if (i > 0) separator(p, dim, per_line, &on_line);
        if (p->summarize && n > 2 * edge && i == edge) {
            puts_(p, "...");
            i = n - edge - 1; /* the loop's i++ moves to the first tail item */
        } else {
            print_rec(p, dim + 1, off + i * t->stride[dim]);
        }
        on_line++;
    }
    put(p, "]", 1);
}

const char *const ml_print_profile_names[] = {"default", "short", "full", NULL};
const ml_print_options ml_print_profiles[] = {
    {1000, 3, 4, 80, ML_SCI_AUTO}, {1000, 2, 2, 80, ML_SCI_AUTO}, {INFINITY, 3, 4, 80, ML_SCI_AUTO}};

char *ml_tensor_format(const ml_tensor *t, const ml_print_options *o) {
    printer p = {.t = t, .o = *o, .amax = 0, .amin = HUGE_VAL, .all_int = true, .unit = true, .cap = 256};
    p.s = malloc(p.cap);
    if (!p.s) {
        ml_fail(ML_ERR_MEM, "tostring: out of memory");
        return NULL;
    }
    p.s[0] = 0;
    if (ml_numel(t) == 0) { /* no element: "[]" whatever the shape (the header has it), as numpy
                             * prints one; walking [2^31, 0] row by row would take minutes */
        puts_(&p, "[]");
        if (!p.s) ml_fail(ML_ERR_MEM, "tostring: out of memory");
        return p.s;
    }
    p.summarize = (double)ml_numel(t) > p.o.threshold;
    if (t->dtype == ML_F32) {
        each_shown(&p, 0, 0, scan_value);
        bool any = p.amax > 0;
        p.int_mode = p.all_int;
        p.sci = any && (p.amax > 1e8 || (!p.int_mode && (p.amax / p.amin > 1e3 || p.amin < 1e-4)));
        if (p.unit && p.amax >= 0.01) p.sci = false; /* probabilities: 1.0000 and 0.0000 read better */
        if (o->sci_mode != ML_SCI_AUTO) p.sci = o->sci_mode == ML_SCI_ON && any, p.int_mode = p.int_mode && !p.sci;
    }
    each_shown(&p, 0, 0, measure_value);
    print_rec(&p, 0, 0);
    if (!p.s) ml_fail(ML_ERR_MEM, "tostring: out of memory");
    return p.s;
}

char *ml_tensor_repr(const ml_tensor *t, const char *grad_fn, const ml_print_options *o) {
    char *body = ml_tensor_format(t, o), shape[ML_SHAPE_STR], head[ML_SHAPE_STR + 256];
    if (!body) return NULL;
    int n = snprintf(head, sizeof head, "tensor(shape=%s, dtype=%s%s%.200s%s)\n", ml_shape_str(shape, t->ndim, t->shape),
                     ml_dtype_name(t->dtype), grad_fn ? ", grad_fn=" : "", grad_fn ? grad_fn : "",
                     t->requires_grad ? ", requires_grad=true" : "");
    size_t nb = strlen(body);
    char *s = malloc((size_t)n + nb + 1);
    if (s) memcpy(s, head, (size_t)n), memcpy(s + n, body, nb + 1);
    else ml_fail(ML_ERR_MEM, "tostring: out of memory");
    free(body);
    return s;
}
