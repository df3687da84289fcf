/* Dataset analyses on top of caching (docs/interventions.md, "Attention mass" and "Attribution
 * patching"): the attention weight between two named positions per layer, and gradient
 * attribution patching (activation × gradient). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "interp/interp_private.h"
#include "ops/ops.h"
#include "tasks/task.h"

/* Documents [0, n) of ds: tokens (n, L) and named positions (n, ml_dataset_npos). */
static ml_status load_docs(const ml_dataset *ds, int64_t n, ml_tensor **tokens, ml_tensor **positions) {
    ml_tensor *targets = NULL;
    if (n < 1 || n > ml_dataset_size(ds) || n > INT32_MAX)
        return ml_fail(ML_ERR_ARG, "expected between 1 and %lld documents, got %lld", (long long)ml_dataset_size(ds),
                       (long long)n);
    ml_status st = ml_dataset_batch_range(ds, 0, (int)n, tokens, &targets, positions);
    ml_release(targets);
    return st;
}

static int32_t doc_pos(const ml_tensor *positions, int64_t b, int p) {
    return p < positions->shape[1] ? ml_i32(positions)[b * positions->shape[1] + p] : -1;
}

/* Whether layer l's sequence mixer is Mamba's selective scan (its attention is implicit). */
static bool is_mamba_layer(const ml_model *m, int l) {
    const ml_mixer_type *t = ml_mixer_for_layer(&m->cfg, l);
    return t && t == ml_mixer_find("mamba");
}

/* The mean over documents of the weight from tq to sk of an attention (B, H, L, L): an explicit
 * pattern summed over heads, or Mamba's implicit α (H = channels) as |α[tq, sk]| over the row's
 * Σ_s |α[tq, s]|, averaged over channels. */
static double layer_mass(const ml_tensor *a, bool implicit, const ml_tensor *pos, int64_t n, int q, int k) {
    int64_t H = a->shape[1], L = a->shape[2];
    double mass = 0;
    for (int64_t b = 0; b < n; b++) {
        int32_t tq = doc_pos(pos, b, q), sk = doc_pos(pos, b, k);
        for (int64_t h = 0; tq >= 0 && sk >= 0 && h < H; h++) {
            const float *row = ml_f32(a) + ((b * H + h) * L + tq) * L;
            double tot = 0;
            for (int64_t s = 0; implicit && s < L; s++) tot += fabs((double)row[s]);
            if (!implicit) mass += row[sk];
            else if (tot > 0) mass += fabs((double)row[sk]) / tot;
        }
    }
    return mass / (double)(implicit ? n * H : n);
}

ml_status ml_attention_mass(ml_model *m, const ml_dataset *ds, int64_t n, int query, int key, double *mass,
                            bool *has) {
    ml_tensor *tokens = NULL, *pos = NULL, **acts = calloc((size_t)m->n_sites + 1, sizeof *acts);
    bool *want = calloc((size_t)m->n_sites + 1, 1);
    ml_status st = !acts || !want ? ml_fail(ML_ERR_MEM, "attention_mass: out of memory") : load_docs(ds, n, &tokens, &pos);
    int n_layers = m->cfg.n_layers;
    for (int l = 0; st == ML_OK && l < n_layers; l++) {
        int s = ml_site_lookup(m, l, "mixer.pattern");
        has[l] = s >= 0 || is_mamba_layer(m, l);
        if (s >= 0) want[s] = true;
        else if (has[l]) mli_mamba_attention_needs(m, l, want);
    }
    if (st == ML_OK) st = ml_run_cache(m, tokens, want, acts, NULL);
    for (int l = 0; st == ML_OK && l < n_layers; l++) {
        mass[l] = 0;
        int s = ml_site_lookup(m, l, "mixer.pattern");
        ml_tensor *a = !has[l] ? NULL : s >= 0 ? ml_contiguous(acts[s]) : ml_mamba_attention(m, l, acts);
        if (has[l] && !a) st = ml_last_status();
        else if (a) mass[l] = layer_mass(a, s < 0, pos, n, query, key);
        ml_release(a);
    }
    for (int i = 0; acts && i < m->n_sites; i++) ml_release(acts[i]);
    free(acts), free(want);
    ml_release(tokens), ml_release(pos);
    return st;
}

/* ---- attribution patching ---- */

/* Σ over every dimension but batch and position of (clean − corrupted)·grad, at position p of
 * example b (tensors contiguous, position dimension pd). */
static double unit_product(const ml_tensor *clean, const ml_tensor *corr, const ml_tensor *grad, int pd, int64_t b,
                           int64_t p) {
    int64_t outer = 1, inner = 1, P = clean->shape[pd];
    for (int d = 1; d < pd; d++) outer *= clean->shape[d];
    for (int d = pd + 1; d < clean->ndim; d++) inner *= clean->shape[d];
    const float *x = ml_f32(clean), *y = ml_f32(corr), *g = ml_f32(grad);
    double sum = 0;
    for (int64_t o = 0; o < outer; o++) {
        int64_t off = ((b * outer + o) * P + p) * inner;
        for (int64_t i = 0; i < inner; i++) sum += ((double)x[off + i] - y[off + i]) * g[off + i];
    }
    return sum;
}

/* The estimates of one label type from its corrupted run's activations and gradients. */
static ml_status ap_estimates(const ml_model *m, const ml_ap_config *c, ml_tensor *const *clean, ml_tensor **acts,
                              ml_tensor **grads, const ml_tensor *pos, int64_t n, double *out) {
    for (int s = 0; s < c->n_sites; s++) {
        int site = c->sites[s], pd = ml_site_pos_dim(m, site);
        ml_tensor *x = ml_contiguous(clean[site]), *y = ml_contiguous(acts[site]), *g = ml_contiguous(grads[site]);
        ml_status st = x && y && g ? ML_OK : ml_last_status();
        for (int j = 0; st == ML_OK && j < c->n_positions; j++) {
            double tot = 0;
            for (int64_t b = 0; b < n; b++) {
                int32_t p = doc_pos(pos, b, c->positions[j]);
                if (p >= 0 && p < x->shape[pd]) tot += unit_product(x, y, g, pd, b, p);
            }
            out[s * c->n_positions + j] = tot / (double)n;
        }
        ml_release(x), ml_release(y), ml_release(g);
        if (st) return st;
    }
    return ML_OK;
}

/* The readout of the documents: row target_item − 1 predicts the token at target_item. */
static ml_status ap_readout(const ml_tensor *tokens, const ml_tensor *pos, ml_tensor **rows, ml_tensor **answers) {
    int64_t n = tokens->shape[0], L = tokens->shape[1];
    *rows = ml_empty(ML_I32, 1, &n), *answers = ml_empty(ML_I32, 1, &n);
    if (!*rows || !*answers) return ml_last_status();
    for (int64_t b = 0; b < n; b++) {
        int32_t t = doc_pos(pos, b, ML_POS_TARGET_ITEM);
        if (t < 1) return ml_fail(ML_ERR_ARG, "attribution_patching: document %lld has no target item", (long long)b);
        ml_i32(*rows)[b] = t - 1;
        ml_i32(*answers)[b] = ml_i32(tokens)[b * L + t];
    }
    return ML_OK;
}

/* One label type: corrupt the item at label_type (the corruption draw, stream continued), run
 * with gradients of Σ_b p(answer), and estimate every (site, position). */
static ml_status ap_label_type(ml_model *m, const ml_ap_config *c, const ml_dataset *ds, ml_rng *rng, int lt,
                               ml_tensor *tokens, const ml_tensor *pos, ml_tensor *rows, ml_tensor *answers,
                               ml_tensor *const *clean, const bool *want, double *out) {
    int lo, hi;
    ml_task_corrupt_range(ml_dataset_task(ds), &lo, &hi);
    int64_t n = tokens->shape[0], L = tokens->shape[1];
    ml_tensor *corr = ml_clone(tokens), **acts = calloc((size_t)m->n_sites * 2 + 1, sizeof *acts);
    ml_status st = corr && acts ? ML_OK : ml_fail(ML_ERR_MEM, "attribution_patching: out of memory");
    for (int64_t b = 0; st == ML_OK && b < n; b++) {
        int32_t p = doc_pos(pos, b, lt);
        if (p >= 0) ml_i32(corr)[b * L + p] = ml_ic_corrupt(rng, lo, hi, ml_i32(tokens)[b * L + p]);
    }
    if (st == ML_OK) st = ml_run_cache_grad(m, corr, rows, answers, false, want, acts, acts + m->n_sites, NULL);
    if (st == ML_OK) st = ap_estimates(m, c, clean, acts, acts + m->n_sites, pos, n, out);
    for (int i = 0; acts && i < 2 * m->n_sites; i++) ml_release(acts[i]);
    free(acts);
    ml_release(corr);
    return st;
}

ml_ap_result *ml_attribution_patching(ml_model *m, const ml_dataset *ds, int64_t n, const ml_ap_config *c) {
    size_t per_lt = (size_t)c->n_sites * (size_t)c->n_positions;
    ml_ap_result *r = calloc(1, sizeof *r);
    ml_tensor *tokens = NULL, *pos = NULL, *rows = NULL, *answers = NULL;
    ml_tensor **clean = calloc((size_t)m->n_sites + 1, sizeof *clean);
    bool *want = calloc((size_t)m->n_sites + 1, 1);
    if (r) r->estimate = malloc(sizeof *r->estimate * (per_lt * (size_t)c->n_label_types + 1));
    ml_status st = r && r->estimate && clean && want ? ML_OK : ml_fail(ML_ERR_MEM, "attribution_patching: out of memory");
    for (int s = 0; st == ML_OK && s < c->n_sites; s++) {
        if (ml_site_pos_dim(m, c->sites[s]) < 0)
            st = ml_fail(ML_ERR_ARG, "attribution_patching: site %s has no position dimension", m->sites[c->sites[s]].name);
        else want[c->sites[s]] = true;
    }
    if (st == ML_OK) st = load_docs(ds, n, &tokens, &pos);
    if (st == ML_OK) st = ap_readout(tokens, pos, &rows, &answers);
    if (st == ML_OK) st = ml_run_cache(m, tokens, want, clean, NULL);
    ml_rng rng;
    ml_rng_init(&rng, c->seed, ML_STREAM_INTERP);
    for (int k = 0; st == ML_OK && k < c->n_label_types; k++)
        st = ap_label_type(m, c, ds, &rng, c->label_types[k], tokens, pos, rows, answers, clean, want,
                           r->estimate + per_lt * (size_t)k);
    for (int i = 0; clean && i < m->n_sites; i++) ml_release(clean[i]);
    free(clean), free(want);
    ml_release(tokens), ml_release(pos), ml_release(rows), ml_release(answers);
    if (st) {
        ml_ap_result_free(r);
        return NULL;
    }
    r->n_label_types = c->n_label_types, r->n_sites = c->n_sites, r->n_positions = c->n_positions;
    return r;
}

void ml_ap_result_free(ml_ap_result *r) {
    if (!r) return;
    free(r->estimate), free(r);
}
