#include "autograd/autograd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/iter.h"

/* ------------------------------------------------------------------ grad mode */

static bool grad_mode = true;

bool ml_grad_enabled(void) { return grad_mode; }

bool ml_set_grad_enabled(bool on) {
    bool old = grad_mode;
    grad_mode = on;
    return old;
}

bool ml_needs_grad(const ml_tensor *t) { return grad_mode && t && (t->requires_grad || t->grad_fn); }

bool ml_any_needs_grad(int n, ml_tensor *const *ts) {
    for (int i = 0; i < n; i++)
        if (ml_needs_grad(ts[i])) return true;
    return false;
}

/* ------------------------------------------------------------------ nodes */

ml_node *ml_node_new(const char *name, ml_backward_fn fn, int n_in, ml_tensor *const *in) {
    ml_node *n = calloc(1, sizeof *n);
    if (!n) {
        ml_fail(ML_ERR_MEM, "out of memory");
        return NULL;
    }
    n->refcount = 1;
    n->name = name;
    n->backward = fn;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) continue;
        n->in_ndim[i] = in[i]->ndim;
        memcpy(n->in_shape[i], in[i]->shape, sizeof n->in_shape[i]);
        if (ml_needs_grad(in[i])) n->in[i] = ml_retain(in[i]);
    }
    return n;
}

bool ml_node_input_needs_grad(const ml_node *node, int i) { return node->in[i] != NULL; }

void ml_node_save(ml_node *node, int slot, ml_tensor *t) {
    ml_release(node->saved[slot]);
    node->saved[slot] = t ? ml_detach(t) : NULL;
    node->saved_version[slot] = t ? t->storage->version : 0;
}

ml_tensor *ml_node_saved(ml_node *node, int slot) {
    ml_tensor *t = node->saved[slot];
    if (node->released) {
        ml_fail(ML_ERR_STATE, "backward: trying to backward through the graph a second time (%s)", node->name);
        return NULL;
    }
    if (t && t->storage->version != node->saved_version[slot]) {
        ml_fail(ML_ERR_STATE,
                "backward: a tensor saved by %s was modified in place after it was used; clone it before writing",
                node->name);
        return NULL;
    }
    return t;
}

static void node_free_saved(ml_node *n) {
    for (int i = 0; i < ML_NODE_MAX_SAVED; i++) {
        ml_release(n->saved[i]);
        n->saved[i] = NULL;
    }
    if (n->ctx_free && n->ctx) n->ctx_free(n->ctx);
    n->ctx = NULL;
    n->released = true;
}

void ml_attach(ml_tensor *out, ml_node *node) {
    ml_set_history_release(ml_node_release); /* before the first tensor has a grad_fn */
    if (out->grad_fn) ml_node_release(out->grad_fn);
    out->grad_fn = node;
    node->out_ndim = out->ndim;
    memcpy(node->out_shape, out->shape, sizeof node->out_shape);
}

void ml_node_release(ml_node *node) {
    /* Iterative, so a long chain of nodes cannot overflow the C stack. */
    ml_node *stack[64];
    int top = 0;
    if (node) stack[top++] = node;
    while (top) {
        ml_node *n = stack[--top];
        if (--n->refcount > 0) continue;
        node_free_saved(n);
        for (int i = 0; i < n->n_in; i++) {
            ml_tensor *t = n->in[i];
            if (!t) continue;
            if (t->refcount == 1 && t->grad_fn && top < 64) {
                /* free the tensor here but hand its node to the loop instead of recursing */
                ml_node *child = t->grad_fn;
                t->grad_fn = NULL;
                ml_release(t);
                stack[top++] = child;
            } else {
                ml_release(t);
            }
        }
        ml_release(n->grad);
        free(n);
    }
}

ml_status ml_set_requires_grad(ml_tensor *t, bool on) {
    if (t->grad_fn)
        return ml_fail(ML_ERR_STATE, "requires_grad: only leaf tensors can change requires_grad (this one has %s)",
                       t->grad_fn->name);
    if (on && t->dtype != ML_F32)
        return ml_fail(ML_ERR_DTYPE, "requires_grad: only float32 tensors can require gradients, got %s",
                       ml_dtype_name(t->dtype));
    t->requires_grad = on;
    return ML_OK;
}

void ml_zero_grad(ml_tensor *t) {
    ml_release(t->grad);
    t->grad = NULL;
}

/* ------------------------------------------------------------------ helpers */

float *ml_node_grad_sink(ml_node *node, int i) {
    ml_tensor *t = node->in[i], *g = t ? t->grad : NULL;
    if (!g || t->grad_fn || !t->requires_grad || g->dtype != ML_F32 || !ml_is_contiguous(g) ||
        g->ndim != node->in_ndim[i] || memcmp(g->shape, node->in_shape[i], sizeof(int64_t) * (size_t)g->ndim))
        return NULL;
    g->storage->version++;
    return ml_f32(g);
}

ml_tensor *ml_sum_to_shape(ml_tensor *g, int ndim, const int64_t *shape) {
    bool same = g->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = g->shape[d] == shape[d];
    if (same) return ml_contiguous(g);
    ml_tensor *out = ml_zeros(ML_F32, ndim, shape);
    if (!out) return NULL;
    /* Fast path: out is g's trailing dims (leading dims summed away, e.g. a position table's
     * gradient over the batch) and g is contiguous: the same additions in the same order as
     * the general loop below, without its per-element iterator. */
    int lead = g->ndim - ndim;
    bool suffix = lead > 0 && ml_is_contiguous(g);
    for (int d = 0; suffix && d < ndim; d++) suffix = g->shape[lead + d] == shape[d];
    if (suffix) {
        int64_t inner = ml_numel(out), outer = inner ? ml_numel(g) / inner : 0;
        float *po = ml_f32(out);
        const float *pg = ml_f32(g);
        for (int64_t i = 0; i < outer; i++)
            for (int64_t j = 0; j < inner; j++) po[j] += pg[i * inner + j];
        return out;
    }
    /* strides of out seen with g's shape: 0 where out broadcast */
    int64_t so[ML_MAX_DIMS], sg[ML_MAX_DIMS];
    for (int i = 0; i < g->ndim; i++) {
        int d = ndim - g->ndim + i;
        so[i] = (d < 0 || shape[d] == 1) ? 0 : out->stride[d];
        sg[i] = g->stride[i];
    }
    ml_iter it;
    ml_iter_init(&it, g->ndim, g->shape, 2, (const int64_t *[]){so, sg});
    float *po = ml_f32(out);
    const float *pg = ml_f32(g);
    for (int64_t i = 0, n = ml_numel(g); i < n; i++, ml_iter_next(&it)) po[it.off[0]] += pg[it.off[1]];
    return out;
}

/* True when the node's output gradient and every input hold no element: its backward would
 * only walk the sizes of empty tensors ([2^31, 0, 2^31] rows of nothing). */
static bool no_elements(const ml_node *n) {
    if (ml_numel(n->grad)) return false;
    for (int i = 0; i < n->n_in; i++) {
        int64_t count = 1;
        for (int d = 0; d < n->in_ndim[i]; d++) count *= n->in_shape[i][d];
        if (count) return false;
    }
    return true;
}

/* dst (may be NULL) += src, both shaped `shape`; returns the accumulated tensor (new or dst).
 * A first gradient that nothing else references is adopted instead of copied. A node's gradient
 * (internal: only the engine reads it, never writes it) also adopts a shared one, e.g. the one
 * gradient an addition hands both its inputs, and a second contribution then goes to a new
 * tensor (dst + src, the same sums as a copy of dst plus src) instead of into the shared one:
 * a copy of the residual stream's gradient per add saved. A leaf's .grad is a user's tensor
 * (or a view of the model's flat gradient) and keeps the copy and the in-place sum. */
static ml_tensor *accumulate(ml_tensor *dst, ml_tensor *src, bool internal) {
    if (!dst) {
        bool plain = src->offset == 0 && ml_is_contiguous(src) && !src->grad_fn && !src->requires_grad;
        bool exclusive = plain && src->refcount == 1 && src->storage->refcount == 1;
        return exclusive || (plain && internal) ? ml_retain(src) : ml_clone(src);
    }
    ml_tensor *s = ml_contiguous(src);
    if (!s) return NULL;
    const float *ps = ml_f32(s);
    if (internal && (dst->refcount > 1 || dst->storage->refcount > 1)) { /* shared: sum out of place */
        ml_tensor *sum = ml_empty(ML_F32, dst->ndim, dst->shape);
        if (sum) {
            float *po = ml_f32(sum);
            const float *pd = ml_f32(dst);
            for (int64_t i = 0, n = ml_numel(dst); i < n; i++) po[i] = pd[i] + ps[i];
            ml_release(dst);
        }
        ml_release(s);
        return sum;
    }
    float *pd = ml_f32(dst);
    for (int64_t i = 0, n = ml_numel(dst); i < n; i++) pd[i] += ps[i];
    dst->storage->version++;
    ml_release(s);
    return dst;
}

/* ------------------------------------------------------------------ the engine */

static unsigned epoch = 0;

typedef struct {
    ml_node **items;
    int64_t n, cap;
} node_list;

static bool push(node_list *l, ml_node *n) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 64;
        ml_node **p = realloc(l->items, (size_t)cap * sizeof *p);
        if (!p) return false;
        l->items = p;
        l->cap = cap;
    }
    l->items[l->n++] = n;
    return true;
}

ml_status ml_backward(ml_tensor *root, ml_tensor *grad_root) {
    if (!root->grad_fn && !root->requires_grad)
        return ml_fail(ML_ERR_STATE, "backward: the tensor does not require grad and has no grad_fn");
    if (grad_root) {
        if (!ml_same_shape(grad_root, root) || grad_root->dtype != ML_F32) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            return ml_fail(ML_ERR_SHAPE, "backward: argument 2 has shape %s, expected %s (float32)",
                           ml_shape_str(s1, grad_root->ndim, grad_root->shape),
                           ml_shape_str(s2, root->ndim, root->shape));
        }
    } else if (ml_numel(root) != 1) {
        char s[ML_SHAPE_STR];
        return ml_fail(ML_ERR_SHAPE, "backward: a gradient argument is needed for a non-scalar output of shape %s",
                       ml_shape_str(s, root->ndim, root->shape));
    }
    ml_tensor *g0 = grad_root ? ml_contiguous(grad_root) : ml_full(ML_F32, root->ndim, root->shape, 1.0);
    if (!g0) return ML_ERR_MEM;
    bool old_mode = ml_set_grad_enabled(false);
    ml_status st = ML_OK;
    if (!root->grad_fn) { /* a leaf */
        ml_tensor *acc = accumulate(root->grad, g0, false);
        if (!acc) st = ML_ERR_MEM;
        else root->grad = acc;
        ml_release(g0);
        ml_set_grad_enabled(old_mode);
        return st;
    }

    /* Count, for every node reachable from the root, how many edges point to it. */
    unsigned mark = ++epoch;
    node_list all = {0}, ready = {0};
    ml_node *r = root->grad_fn;
    if (r->released) {
        ml_release(g0);
        ml_set_grad_enabled(old_mode);
        return ml_fail(ML_ERR_STATE, "backward: trying to backward through the graph a second time (%s)", r->name);
    }
    r->mark = mark;
    r->pending = 0;
    if (!push(&all, r)) goto oom;
    for (int64_t k = 0; k < all.n; k++) {
        ml_node *n = all.items[k];
        for (int i = 0; i < n->n_in; i++) {
            ml_tensor *t = n->in[i];
            if (!t || !t->grad_fn) continue;
            ml_node *c = t->grad_fn;
            if (c->mark != mark) {
                c->mark = mark;
                c->pending = 0;
                ml_release(c->grad);
                c->grad = NULL;
                if (!push(&all, c)) goto oom;
            }
            c->pending++;
        }
    }

    ml_release(r->grad);
    r->grad = g0;
    g0 = NULL;
    if (!push(&ready, r)) goto oom;
    while (ready.n && st == ML_OK) {
        ml_node *n = ready.items[--ready.n];
        ml_tensor *gin[ML_NODE_MAX_IN] = {0};
        if (n->released) {
            st = ml_fail(ML_ERR_STATE, "backward: trying to backward through the graph a second time (%s)", n->name);
            break;
        }
        if ((st = ml_check_interrupt("backward"))) break;
        if (n->grad && no_elements(n)) { /* every gradient is empty: nothing to compute, however */
            for (int i = 0; i < n->n_in && st == ML_OK; i++) /* large the other sizes */
                if (ml_node_input_needs_grad(n, i) && !(gin[i] = ml_empty(ML_F32, n->in_ndim[i], n->in_shape[i])))
                    st = ml_last_status();
        } else if (n->grad) {
            st = n->backward(n, n->grad, gin);
        }
        for (int i = 0; i < n->n_in; i++) {
            ml_tensor *t = n->in[i];
            if (st == ML_OK && t && gin[i]) {
                if (gin[i]->ndim != n->in_ndim[i] || memcmp(gin[i]->shape, n->in_shape[i], sizeof(int64_t) * (size_t)gin[i]->ndim)) {
                    char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
                    st = ml_fail(ML_ERR_SHAPE, "backward: %s produced a gradient of shape %s for input %d of shape %s",
                                 n->name, ml_shape_str(s1, gin[i]->ndim, gin[i]->shape), i + 1,
                                 ml_shape_str(s2, n->in_ndim[i], n->in_shape[i]));
                } else if (t->grad_fn) {
                    ml_tensor *acc = accumulate(t->grad_fn->grad, gin[i], true);
                    if (!acc) st = ML_ERR_MEM;
                    else t->grad_fn->grad = acc;
                } else if (t->requires_grad) {
                    ml_tensor *acc = accumulate(t->grad, gin[i], false);
                    if (!acc) st = ML_ERR_MEM;
                    else t->grad = acc;
                }
            }
            ml_release(gin[i]);
            if (t && t->grad_fn && t->grad_fn->mark == mark && --t->grad_fn->pending == 0)
                if (!push(&ready, t->grad_fn)) st = ml_fail(ML_ERR_MEM, "out of memory");
        }
        ml_release(n->grad);
        n->grad = NULL;
        node_free_saved(n);
    }
    for (int64_t k = 0; k < all.n; k++) { /* drop partial gradients left by an error */
        ml_release(all.items[k]->grad);
        all.items[k]->grad = NULL;
    }
    free(all.items);
    free(ready.items);
    ml_set_grad_enabled(old_mode);
    return st;
oom:
    free(all.items);
    free(ready.items);
    ml_release(g0);
    ml_set_grad_enabled(old_mode);
    return ml_fail(ML_ERR_MEM, "backward: out of memory");
}

/* ------------------------------------------------------------------ gradient check */

static double weighted_sum(ml_tensor *out, const ml_tensor *w) {
    double s = 0;
    for (int64_t i = 0, n = ml_numel(out); i < n; i++) s += ml_get_flat(out, i) * (double)ml_f32(w)[i];
    return s;
}

ml_status ml_gradcheck(ml_gradcheck_fn fn, void *ud, int n, ml_tensor **inputs, double eps, double atol, double rtol) {
    return ml_gradcheck_sampled(fn, ud, n, inputs, eps, atol, rtol, INT64_MAX);
}

ml_status ml_gradcheck_sampled(ml_gradcheck_fn fn, void *ud, int n, ml_tensor **inputs, double eps, double atol,
                               double rtol, int64_t max_per_input) {
    if (max_per_input < 2) return ml_fail(ML_ERR_ARG, "gradcheck: max_per_input must be at least 2");
    for (int k = 0; k < n; k++)
        if (inputs[k]->requires_grad && !ml_is_contiguous(inputs[k]))
            return ml_fail(ML_ERR_ARG, "gradcheck: input %d must be contiguous", k + 1);
    for (int k = 0; k < n; k++) ml_zero_grad(inputs[k]);
    ml_tensor *out = fn(ud, inputs);
    if (!out) return ml_fail_context(ml_last_status(), "gradcheck: function failed");
    ml_rng rng;
    ml_rng_init(&rng, 1234, 0);
    ml_tensor *w = ml_uniform(out->ndim, out->shape, -1.0, 1.0, &rng);
    ml_status st = w ? ml_backward(out, w) : ML_ERR_MEM;
    ml_release(out);
    if (st) {
        ml_release(w);
        return st;
    }
    bool old = ml_set_grad_enabled(false);
    for (int k = 0; k < n && st == ML_OK; k++) {
        ml_tensor *x = inputs[k];
        if (!x->requires_grad) continue;
        float *p = ml_f32(x);
        int64_t m = ml_numel(x), checks = m < max_per_input ? m : max_per_input;
        for (int64_t j = 0; j < checks && st == ML_OK; j++) {
            int64_t i = checks == m ? j : j * (m - 1) / (checks - 1);
            float orig = p[i];
            p[i] = (float)(orig + eps);
            double xp = (double)p[i];
            ml_tensor *o1 = fn(ud, inputs);
            p[i] = (float)(orig - eps);
            double xm = (double)p[i];
            ml_tensor *o2 = fn(ud, inputs);
            p[i] = orig;
            if (!o1 || !o2) {
                ml_release(o1);
                ml_release(o2);
                st = ml_fail_context(ml_last_status(), "gradcheck: function failed");
                break;
            }
            double num = (weighted_sum(o1, w) - weighted_sum(o2, w)) / (xp - xm);
            ml_release(o1);
            ml_release(o2);
            double ana = x->grad ? (double)ml_f32(x->grad)[i] : 0.0;
            if (!(fabs(ana - num) <= atol + rtol * fabs(num)))
                st = ml_fail(ML_ERR_ARG, "gradcheck: input %d element %lld: analytic %.8g, numeric %.8g", k + 1,
                             (long long)i, ana, num);
        }
    }
    ml_set_grad_enabled(old);
    ml_release(w);
    return st;
}
