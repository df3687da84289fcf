/* Sampling continuations: see generate.h. */
#include "nn/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/rng.h"

/* The token chosen from one row of logits (V): argmax, or a draw from the tempered softmax over
 * the top_k largest (ties broken by the lower id, so every machine picks the same). */
static int32_t choose(const float *x, int64_t V, const ml_generate_config *c, ml_rng *g, double *p, int32_t *ids) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (x[v] > x[best]) best = v;
    if (c->temperature <= 0) return (int32_t)best;
    int64_t k = c->top_k > 0 && c->top_k < V ? c->top_k : V;
    for (int64_t v = 0; v < V; v++) ids[v] = (int32_t)v;
    for (int64_t i = 0; i < k; i++) { /* partial selection sort: the k largest first */
        int64_t j = i;
        for (int64_t u = i + 1; u < V; u++)
            if (x[ids[u]] > x[ids[j]] || (x[ids[u]] == x[ids[j]] && ids[u] < ids[j])) j = u;
        int32_t t = ids[i];
        ids[i] = ids[j], ids[j] = t;
    }
    double sum = 0, mx = x[ids[0]];
    for (int64_t i = 0; i < k; i++) sum += p[i] = exp(((double)x[ids[i]] - mx) / c->temperature);
    double u = ml_rng_double(g) * sum;
    for (int64_t i = 0; i < k; i++)
        if ((u -= p[i]) < 0) return ids[i];
    return ids[k - 1];
}

ml_tensor *ml_generate(ml_model *m, ml_tensor *tokens, const ml_generate_config *c) {
    int64_t B = tokens->shape[0], L0 = tokens->shape[1], L = L0 + c->max_new, V = m->cfg.vocab;
    if (m->cfg.pos_emb && L > m->cfg.max_pos) {
        ml_fail(ML_ERR_ARG, "generate: %lld tokens exceed the model's position table (max_pos = %d)", (long long)L,
                m->cfg.max_pos);
        return NULL;
    }
    ml_tensor *out = ml_zeros(ML_I32, 2, (int64_t[]){B, L});
    double *p = malloc(sizeof *p * (size_t)V);
    int32_t *ids = malloc(sizeof *ids * (size_t)V);
    if (!out || !p || !ids) {
        ml_release(out), free(p), free(ids);
        ml_fail(ML_ERR_MEM, "generate: out of memory");
        return NULL;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < L0; t++) ml_i32(out)[b * L + t] = (int32_t)ml_get_flat(tokens, b * L0 + t);
    ml_rng g;
    ml_rng_init(&g, c->seed, ML_STREAM_INTERP);
    bool grad = ml_set_grad_enabled(false);
    bool ok = true;
    for (int64_t t = L0; ok && t < L; t++) {
        ml_tensor *prefix = ml_narrow(out, 1, 0, t), *pc = prefix ? ml_contiguous(prefix) : NULL;
        ml_tensor *hid = pc ? ml_model_hidden(m, pc, NULL) : NULL;
        ml_tensor *last = hid ? ml_narrow(hid, 1, t - 1, 1) : NULL;
        ml_tensor *logits = last ? ml_model_head(m, last) : NULL, *lc = logits ? ml_contiguous(logits) : NULL;
        ok = lc != NULL;
        for (int64_t b = 0; ok && b < B; b++) ml_i32(out)[b * L + t] = choose(ml_f32(lc) + b * V, V, c, &g, p, ids);
        ml_release(prefix), ml_release(pc), ml_release(hid), ml_release(last), ml_release(logits), ml_release(lc);
    }
    ml_set_grad_enabled(grad);
    free(p), free(ids);
    if (!ok) ml_release(out), out = NULL;
    return out;
}
