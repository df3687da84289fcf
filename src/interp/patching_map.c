/* Patching maps (docs/interventions.md, "Patching maps"): every (site, position) cell patches the
 * clean run's activation into the corrupted run (the fast path, resuming from the corrupted
 * cache) and reads the metric at the readout rows. An ablation map is the same with the clean run
 * in the corrupted run's place and zeros or batch means as the source. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp/interp.h"
#include "interp/interp_private.h"
#include "interp/pm_options.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

/* The built-in metric at the readout rows of hidden states hid (B, L, D), or of hid (B, 1, D)
 * already cut to them: the mean over examples of p, log p or the logit of the target. *correct
 * (may be NULL): how many examples' argmax is the target. */
static bool readout_metric(ml_model *m, ml_tensor *hid, const ml_pm_config *c, ml_pm_metric kind, double *out,
                           int *correct) {
    ml_tensor *lg = mli_readout(m, hid, c->rows);
    if (!lg) return false;
    int64_t B = lg->shape[0], V = lg->shape[1];
    double sum = 0;
    int n_correct = 0;
    for (int64_t b = 0; b < B; b++) {
        const float *x = ml_f32(lg) + b * V;
        int64_t best = 0;
        for (int64_t v = 1; v < V; v++)
            if (x[v] > x[best]) best = v;
        int32_t t = c->targets[b];
        double logp = (double)x[t] - ml_logsumexp_row(x, V);
        sum += kind == ML_PM_PROB ? exp(logp) : kind == ML_PM_LOGPROB ? logp : (double)x[t];
        n_correct += best == t;
    }
    ml_release(lg);
    if (correct) *correct = n_correct;
    *out = sum / (double)B;
    return true;
}

/* The configured metric of hid; false with the error set when it fails. */
static bool metric(ml_model *m, ml_tensor *hid, const ml_pm_config *c, double *out) {
    if (c->metric != ML_PM_FUNCTION) return readout_metric(m, hid, c, c->metric, out, NULL);
    ml_status err = ML_OK;
    *out = c->fn(c->ud, m, hid, &err);
    return err == ML_OK;
}

typedef struct {
    ml_tensor **clean, **corr; /* the two runs' caches [n_sites] */
    ml_tensor *clean_hid, *corr_hid, *rows;
    int32_t *pos;
} pm_work;

static void work_free(const ml_model *m, pm_work *w) {
    for (int i = 0; i < m->n_sites; i++) {
        if (w->clean) ml_release(w->clean[i]);
        if (w->corr) ml_release(w->corr[i]);
    }
    free(w->clean), free(w->corr), free(w->pos);
    ml_release(w->clean_hid), ml_release(w->corr_hid), ml_release(w->rows);
}

/* The clean run caches the patched sites, the corrupted run what a resume at them needs. */
static bool run_both(ml_model *m, ml_tensor *clean, ml_tensor *corr, const ml_pm_config *c, pm_work *w) {
    int64_t B = clean->shape[0];
    bool *want = calloc((size_t)m->n_sites * 2 + 1, 1);
    w->clean = calloc((size_t)m->n_sites + 1, sizeof *w->clean);
    w->corr = calloc((size_t)m->n_sites + 1, sizeof *w->corr);
    w->pos = malloc(sizeof *w->pos * (size_t)B);
    w->rows = ml_empty(ML_I32, 1, &B);
    bool ok = want && w->clean && w->corr && w->pos && w->rows;
    if (!ok) {
        free(want);
        if (w->rows) ml_fail(ML_ERR_MEM, "patching_map: out of memory");
        return false;
    }
    memcpy(ml_i32(w->rows), c->rows, sizeof *c->rows * (size_t)B);
    bool *want_corr = want + m->n_sites;
    for (int r = 0; r < c->n_sites; r++) {
        want[c->sites[r]] = true, ml_patch_needs(m, c->sites[r], want_corr);
        if (c->heads && c->heads[r] >= 0) want_corr[c->sites[r]] = true; /* the other heads' values */
    }
    if (c->ablate != ML_PM_PATCH) { /* one run: the clean one is also the run intervened on */
        for (int i = 0; i < m->n_sites; i++) want_corr[i] = want_corr[i] || want[i];
        ok = ml_run_cache(m, clean, want_corr, w->corr, &w->corr_hid) == ML_OK;
        w->clean_hid = ok ? ml_retain(w->corr_hid) : NULL;
        free(want);
        return ok;
    }
    ok = ml_run_cache(m, clean, want, w->clean, &w->clean_hid) == ML_OK &&
         ml_run_cache(m, corr, want_corr, w->corr, &w->corr_hid) == ML_OK;
    free(want);
    return ok;
}

/* Row r of the map: the site's resume without a patch is the baseline, so cells the patch
 * cannot change are exactly 0 (resuming at another site may differ in the last bits). */
/* The source of a one-head row: the corrupted activation with head h's slice (dim 2) clean, so
 * that patching a position changes that head only. */
static ml_tensor *head_source(ml_tensor *corr, ml_tensor *clean, int h) {
    if (corr->ndim != 4 || h >= corr->shape[2]) {
        ml_fail(ML_ERR_ARG, "patching_map: head %d of a site of shape without a head dimension (dim 2)", h);
        return NULL;
    }
    return ml_with_head(corr, clean, h);
}

/* The ablated value of a site's activation x (batch first): zeros, or at every example the mean
 * over the batch of the same element. */
static ml_tensor *ablation_of(ml_tensor *x, ml_pm_ablate kind) {
    ml_tensor *a = ml_copy_contiguous(x, ML_F32);
    if (!a) return NULL;
    float *p = ml_f32(a);
    int64_t B = a->shape[0], n = ml_numel(a) / B;
    for (int64_t k = 0; k < n; k++) {
        double sum = 0;
        for (int64_t b = 0; kind == ML_PM_MEAN && b < B; b++) sum += p[b * n + k];
        for (int64_t b = 0; b < B; b++) p[b * n + k] = (float)(sum / (double)B);
    }
    return a;
}

static bool map_row(ml_model *m, const ml_pm_config *c, pm_work *w, int r, ml_pm_result *res, int64_t B) {
    int site = c->sites[r];
    bool fn = c->metric == ML_PM_FUNCTION;
    double base = res->corrupted, v;
    ml_tensor *from = c->ablate == ML_PM_PATCH ? ml_retain(w->clean[site]) : ablation_of(w->corr[site], c->ablate);
    if (!from) return false;
    ml_tensor *src = c->heads && c->heads[r] >= 0 ? head_source(w->corr[site], from, c->heads[r]) : ml_retain(from);
    ml_release(from);
    bool ok = src != NULL;
    if (ok && !fn) {
        for (int64_t b = 0; b < B; b++) w->pos[b] = -1;
        ml_patch none = {.site = site, .source = src, .pos = w->pos};
        ml_tensor *hid = ml_patch_fast(m, w->corr, &none, w->rows);
        ok = hid && readout_metric(m, hid, c, c->metric, &base, NULL);
        ml_release(hid);
    }
    for (int j = 0; ok && j < c->n_positions; j++) {
        for (int64_t b = 0; b < B; b++)
            w->pos[b] = c->example_positions ? c->example_positions[j * B + b] : c->positions[j];
        ml_patch p = {.site = site, .source = src, .pos = w->pos};
        ml_tensor *hid = ml_patch_fast(m, w->corr, &p, fn ? NULL : w->rows);
        ok = hid && metric(m, hid, c, &v);
        ml_release(hid);
        if (!ok) break;
        res->patched[r * c->n_positions + j] = (float)v;
        res->values[r * c->n_positions + j] = (float)((v - base) / res->den);
    }
    ml_release(src);
    return ok;
}

ml_pm_result *ml_patching_map(ml_model *m, ml_tensor *clean, ml_tensor *corrupted, const ml_pm_config *c) {
    if (c->ablate != ML_PM_PATCH) corrupted = clean;
    if (!corrupted || clean->ndim != 2 || !ml_same_shape(clean, corrupted) || c->n_sites < 1 || c->n_positions < 1) {
        ml_fail(ML_ERR_ARG, "patching_map: expected clean and corrupted tokens of one shape (B, L), sites and positions");
        return NULL;
    }
    int64_t B = clean->shape[0];
    size_t cells = (size_t)c->n_sites * (size_t)c->n_positions;
    ml_pm_result *res = calloc(1, sizeof *res);
    pm_work w = {0};
    if (res) res->patched = malloc(sizeof(float) * cells), res->values = malloc(sizeof(float) * cells);
    if (!res || !res->patched || !res->values) {
        ml_pm_result_free(res);
        ml_fail(ML_ERR_MEM, "patching_map: out of memory");
        return NULL;
    }
    res->n_rows = c->n_sites, res->n_cols = c->n_positions;
    /* the accuracy is the built-in readout's; a function metric then replaces the two values */
    int correct = 0;
    ml_pm_metric kind = c->metric == ML_PM_FUNCTION ? ML_PM_PROB : c->metric;
    bool ok = run_both(m, clean, corrupted, c, &w) &&
              readout_metric(m, w.clean_hid, c, kind, &res->clean, &correct) &&
              readout_metric(m, w.corr_hid, c, kind, &res->corrupted, NULL);
    if (ok && c->metric == ML_PM_FUNCTION)
        ok = metric(m, w.clean_hid, c, &res->clean) && metric(m, w.corr_hid, c, &res->corrupted);
    res->den = c->ablate == ML_PM_PATCH ? res->clean - res->corrupted : 1;
    res->accuracy = (double)correct / (double)B;
    for (int r = 0; ok && r < c->n_sites; r++) ok = map_row(m, c, &w, r, res, B);
    work_free(m, &w);
    if (!ok) {
        ml_pm_result_free(res);
        return NULL;
    }
    return res;
}

void ml_pm_result_free(ml_pm_result *r) {
    if (!r) return;
    free(r->patched), free(r->values), free(r);
}
