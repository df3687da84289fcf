/* Optimisers as objects (optim.h): AdamW and SGD over lists of leaf tensors in parameter groups,
 * and clipping by the global gradient norm. AdamW's arithmetic is ml_adamw_kernel, the one the
 * model's flat-buffer optimiser runs, so both give the same bits on the same numbers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "optim/optim.h"

const char *ml_optim_kind_name(ml_optim_kind kind) { return kind == ML_OPTIM_SGD ? "sgd" : "adamw"; }

ml_optim_hparams ml_optim_defaults(ml_optim_kind kind) {
    ml_optim_hparams h = {.lr = 1e-3, .beta1 = ML_ADAMW_BETA1, .beta2 = ML_ADAMW_BETA2, .eps = ML_ADAMW_EPS};
    h.weight_decay = kind == ML_OPTIM_ADAMW ? 1e-2 : 0;
    return h;
}

/* finite and >= 0; the negated comparison also rejects NaN */
static bool nonneg(double x) { return x >= 0 && !isinf(x); }

const char *ml_optim_hparams_problem(ml_optim_kind kind, const ml_optim_hparams *h, char *buf, size_t n) {
    const char *key = NULL, *want = "a finite number >= 0";
    double got = 0;
    bool adamw = kind == ML_OPTIM_ADAMW;
    if (!nonneg(h->lr)) key = "lr", got = h->lr;
    else if (!nonneg(h->weight_decay)) key = "weight_decay", got = h->weight_decay;
    else if (adamw && !(h->beta1 >= 0 && h->beta1 < 1)) key = "beta1", got = h->beta1, want = "a number in [0, 1)";
    else if (adamw && !(h->beta2 >= 0 && h->beta2 < 1)) key = "beta2", got = h->beta2, want = "a number in [0, 1)";
    else if (adamw && !nonneg(h->eps)) key = "eps", got = h->eps;
    else if (!adamw && !nonneg(h->momentum)) key = "momentum", got = h->momentum;
    else if (!adamw && !(h->dampening >= 0 && h->dampening <= 1))
        key = "dampening", got = h->dampening, want = "a number in [0, 1]";
    if (key) {
        snprintf(buf, n, "option '%s': expected %s, got %g", key, want, got);
        return buf;
    }
    if (!adamw && h->nesterov && (h->momentum <= 0 || h->dampening != 0)) {
        snprintf(buf, n, "option 'nesterov': expected momentum > 0 and dampening 0, got momentum %g and dampening %g",
                 h->momentum, h->dampening);
        return buf;
    }
    return NULL;
}

const char *ml_optim_param_problem(const ml_tensor *t, char *buf, size_t n) {
    if (t->grad_fn) snprintf(buf, n, "a non-leaf tensor (made by %s; optimise the leaf it came from)", t->grad_fn->name);
    else if (!t->requires_grad) snprintf(buf, n, "a tensor that does not require grad (frozen)");
    else if (t->dtype != ML_F32) snprintf(buf, n, "a %s tensor", ml_dtype_name(t->dtype));
    else if (!ml_is_contiguous(t)) snprintf(buf, n, "a non-contiguous tensor");
    else return NULL;
    return buf;
}

void ml_optimizer_free(ml_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n_params; i++) {
        ml_release(o->state[i].param);
        ml_release(o->state[i].buf1);
        ml_release(o->state[i].buf2);
    }
    free(o->state);
    free(o->groups);
    free(o);
}

ml_optimizer *ml_optimizer_new(ml_optim_kind kind, int n_groups, const ml_optim_hparams *h, const int *counts,
                               ml_tensor *const *params) {
    const char *fn = ml_optim_kind_name(kind);
    char why[160];
    if (n_groups < 1) return ml_fail(ML_ERR_ARG, "%s: no parameter group", fn), NULL;
    int total = 0;
    for (int g = 0; g < n_groups; g++) {
        if (counts[g] < 0) return ml_fail(ML_ERR_ARG, "%s: group %d has a negative count", fn, g), NULL;
        if (ml_optim_hparams_problem(kind, &h[g], why, sizeof why))
            return ml_fail(ML_ERR_ARG, "%s: group %d %s", fn, g, why), NULL;
        total += counts[g];
    }
    for (int i = 0; i < total; i++) {
        if (!params[i]) return ml_fail(ML_ERR_ARG, "%s: parameter %d is NULL", fn, i), NULL;
        if (ml_optim_param_problem(params[i], why, sizeof why))
            return ml_fail(ML_ERR_ARG, "%s: parameter %d is %s", fn, i, why), NULL;
        for (int j = 0; j < i; j++) /* lists are short (a model has ~100 tensors) */
            if (params[j] == params[i])
                return ml_fail(ML_ERR_ARG, "%s: parameter %d appears twice (also parameter %d)", fn, i, j), NULL;
    }
    ml_optimizer *o = calloc(1, sizeof *o);
    if (o) {
        o->groups = calloc((size_t)n_groups, sizeof *o->groups);
        o->state = calloc((size_t)(total ? total : 1), sizeof *o->state);
    }
    if (!o || !o->groups || !o->state) {
        ml_optimizer_free(o);
        return ml_fail(ML_ERR_MEM, "%s: out of memory", fn), NULL;
    }
    o->kind = kind;
    o->n_groups = n_groups;
    o->n_params = total;
    for (int g = 0, first = 0; g < n_groups; first += counts[g], g++)
        o->groups[g] = (ml_optim_group){.h = h[g], .first = first, .count = counts[g]};
    for (int i = 0; i < total; i++) o->state[i].param = ml_retain(params[i]);
    return o;
}

/* A zero float32 tensor shaped like t. */
static ml_tensor *zeros_like(const ml_tensor *t) { return ml_zeros(ML_F32, t->ndim, t->shape); }

ml_status ml_optimizer_step(ml_optimizer *o) {
    const char *fn = ml_optim_kind_name(o->kind);
    char b1[ML_SHAPE_STR], b2[ML_SHAPE_STR];
    /* Check every gradient and allocate every missing state first, so a failure changes nothing. */
    for (int i = 0; i < o->n_params; i++) {
        ml_optim_state *s = &o->state[i];
        const ml_tensor *p = s->param, *g = p->grad;
        if (!g) continue;
        if (g->dtype != ML_F32 || !ml_is_contiguous(g) || !ml_same_shape(p, g))
            return ml_fail(ML_ERR_SHAPE, "%s: the gradient of parameter %d (%s %s%s) does not match its float32 %s",
                           fn, i, ml_dtype_name(g->dtype), ml_shape_str(b1, g->ndim, g->shape),
                           ml_is_contiguous(g) ? "" : ", non-contiguous", ml_shape_str(b2, p->ndim, p->shape));
    }
    /* SGD's first update of a momentum buffer copies the gradient in: which buffers are new */
    bool *fresh = calloc((size_t)(o->n_params ? o->n_params : 1), sizeof *fresh);
    if (!fresh) goto oom;
    for (int gi = 0; gi < o->n_groups; gi++) {
        const ml_optim_group *G = &o->groups[gi];
        bool adamw = o->kind == ML_OPTIM_ADAMW;
        for (int i = G->first; i < G->first + G->count; i++) {
            ml_optim_state *s = &o->state[i];
            if (!s->param->grad) continue;
            fresh[i] = !s->buf1;
            if ((adamw || G->h.momentum != 0) && !s->buf1 && !(s->buf1 = zeros_like(s->param))) goto oom;
            if (adamw && !s->buf2 && !(s->buf2 = zeros_like(s->param))) goto oom;
        }
    }
    for (int gi = 0; gi < o->n_groups; gi++) {
        const ml_optim_group *G = &o->groups[gi];
        const ml_optim_hparams *h = &G->h;
        for (int i = G->first; i < G->first + G->count; i++) {
            ml_optim_state *s = &o->state[i];
            ml_tensor *p = s->param;
            if (!p->grad) continue;
            int64_t n = ml_numel(p);
            if (o->kind == ML_OPTIM_ADAMW) {
                s->step++;
                ml_adamw_kernel(h->beta1, h->beta2, h->eps, h->weight_decay, ml_f32(p), ml_f32(p->grad),
                                ml_f32(s->buf1), ml_f32(s->buf2), n, h->lr, s->step);
                s->buf2->storage->version++;
            } else {
                ml_sgd_kernel(h->momentum, h->dampening, h->nesterov, h->weight_decay, ml_f32(p), ml_f32(p->grad),
                              s->buf1 ? ml_f32(s->buf1) : NULL, fresh[i], n, h->lr);
                s->step++;
            }
            if (s->buf1) s->buf1->storage->version++;
            p->storage->version++;
        }
    }
    free(fresh);
    return ML_OK;
oom:
    for (int i = 0; fresh && i < o->n_params; i++) /* undo this step's allocations: nothing changed */
        if (fresh[i]) {
            ml_release(o->state[i].buf1), ml_release(o->state[i].buf2);
            o->state[i].buf1 = o->state[i].buf2 = NULL;
        }
    free(fresh);
    return ml_fail(ML_ERR_MEM, "%s: out of memory for the optimiser state", fn);
}

void ml_optimizer_zero_grad(ml_optimizer *o, bool set_to_none) {
    for (int i = 0; i < o->n_params; i++) {
        ml_tensor *p = o->state[i].param;
        if (!p->grad) continue;
        if (set_to_none) {
            ml_zero_grad(p);
        } else {
            ml_fill_raw(p->grad, 0.0);
            p->grad->storage->version++;
        }
    }
}

ml_status ml_optimizer_set_state(ml_optimizer *o, int i, int64_t step, const ml_tensor *buf1, const ml_tensor *buf2) {
    const char *fn = ml_optim_kind_name(o->kind);
    if (i < 0 || i >= o->n_params) return ml_fail(ML_ERR_ARG, "%s: no parameter %d", fn, i);
    if (step < 0) return ml_fail(ML_ERR_ARG, "%s: parameter %d: step %lld is negative", fn, i, (long long)step);
    ml_optim_state *s = &o->state[i];
    const ml_tensor *bufs[2] = {buf1, buf2};
    char b1[ML_SHAPE_STR], b2[ML_SHAPE_STR];
    for (int k = 0; k < 2; k++)
        if (bufs[k] && (bufs[k]->dtype != ML_F32 || !ml_same_shape(bufs[k], s->param)))
            return ml_fail(ML_ERR_SHAPE, "%s: parameter %d: state buffer %s %s does not match the parameter's float32 %s",
                           fn, i, ml_dtype_name(bufs[k]->dtype), ml_shape_str(b1, bufs[k]->ndim, bufs[k]->shape),
                           ml_shape_str(b2, s->param->ndim, s->param->shape));
    if (o->kind == ML_OPTIM_ADAMW && step > 0 && (!buf1 || !buf2))
        return ml_fail(ML_ERR_ARG, "%s: parameter %d: a step count without exp_avg and exp_avg_sq", fn, i);
    ml_tensor *n1 = buf1 ? ml_copy_contiguous(buf1, ML_F32) : NULL;
    ml_tensor *n2 = buf2 ? ml_copy_contiguous(buf2, ML_F32) : NULL;
    if ((buf1 && !n1) || (buf2 && !n2)) {
        ml_release(n1), ml_release(n2);
        return ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
    }
    ml_release(s->buf1), ml_release(s->buf2);
    s->buf1 = n1, s->buf2 = n2, s->step = step;
    return ML_OK;
}

/* ------------------------------------------------------------------ SGD */

void ml_sgd_kernel(double momentum, double dampening, bool nesterov, double weight_decay, float *params,
                   const float *grads, float *buf, bool first, int64_t n, double lr) {
    /* Python numbers meet float32 tensors: each scalar is rounded to float, as PyTorch does. */
    const float wd = (float)weight_decay, mom = (float)momentum, damp = (float)(1.0 - dampening), nlr = (float)-lr;
    for (int64_t i = 0; i < n; i++) {
        float d = grads[i];
        if (weight_decay != 0) d = d + wd * params[i];
        if (buf) {
            float b = first ? d : buf[i] * mom + damp * d;
            buf[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        params[i] = params[i] + nlr * d;
    }
}

/* ------------------------------------------------------------------ clipping */

ml_status ml_clip_grad_norm(int n, ml_tensor *const *params, double max_norm, double *total) {
    const char *fn = "clip_grad_norm";
    if (isnan(max_norm) || max_norm < 0) return ml_fail(ML_ERR_ARG, "%s: argument 2 max_norm %g must be >= 0", fn, max_norm);
    for (int i = 0; i < n; i++) {
        const ml_tensor *g = params[i] ? params[i]->grad : NULL;
        if (g && (g->dtype != ML_F32 || !ml_is_contiguous(g)))
            return ml_fail(ML_ERR_ARG, "%s: the gradient of parameter %d is not a contiguous float32 tensor", fn, i);
    }
    double ss = 0; /* in double: the sum of squares of ~10^6 floats keeps its digits */
    for (int i = 0; i < n; i++) {
        const ml_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g) continue;
        const float *pg = ml_f32(g);
        for (int64_t k = 0, m = ml_numel(g); k < m; k++) ss += (double)pg[k] * pg[k];
    }
    double norm = sqrt(ss);
    *total = norm;
    double coef = max_norm / (norm + 1e-6);
    if (!(coef < 1)) return ML_OK; /* clamped to 1: the gradients stay as they are */
    float c = (float)coef;
    for (int i = 0; i < n; i++) {
        ml_tensor *g = params[i] ? params[i]->grad : NULL;
        if (!g) continue;
        float *pg = ml_f32(g);
        for (int64_t k = 0, m = ml_numel(g); k < m; k++) pg[k] *= c;
        g->storage->version++;
    }
    return ML_OK;
}
