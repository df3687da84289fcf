/* The paper's interchange evaluator (docs/interventions.md, "The interchange evaluator"; interp.h).
 *
 * For every combination (site = component x layer, label_type, patch position) and every
 * document: the clean document o has one token replaced at its label_type position (the draw of
 * docs/interventions.md, "Corruption", fresh per example and per combination) to give the
 * corrupted c; the base run is c, the source run o (swapped with `swap`); the base run is patched
 * at the position with the source's value, and the answer's probability and logit are read at
 * target_item − 1.
 *
 * Cost. The clean run is cached once per batch (every swept site). Per combination the
 * corrupted run keeps the activations the resume needs at the patched layer and, in its last
 * block, only the readout rows after the mixer; the patched run resumes at the patched layer
 * (interp.c) for the examples whose patched unit differs from the source's (the others are the
 * base run, bit for bit). Sequences are cut after the readout row (a causal model's readout does
 * not see later tokens).
 *
 * Randomness: combination k draws from stream (seed ^ hash(label of k), ML_STREAM_INTERP), one
 * draw per document in dataset order, so a combination's corruptions do not depend on which
 * other combinations or batch sizes were asked for. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "interp/interp.h"
#include "interp/interp_private.h"
#include "ops/ops.h"
#include "ops/kernel_util.h"
#include "tasks/task.h"

_Static_assert((int)ML_IC_MAX_POS == (int)ML_NPOS, "one slot per named position");

/* ------------------------------------------------------------------ configuration */

void ml_ic_config_paper(ml_ic_config *c, const ml_model *m, const ml_task *t) {
    memset(c, 0, sizeof *c);
    static const char *const comps[] = {"block_input", "attention_input", "attention_output",
                                        "mlp_input",   "mlp_output",      "block_output"};
    for (int k = 0; k < 6; k++) /* component-major, as the original loops */
        for (int l = 0; l < m->cfg.n_layers; l++) {
            int s = ml_site_lookup(m, l, comps[k]);
            if (s >= 0 && c->n_sites < ML_IC_MAX_SITES) c->sites[c->n_sites++] = s;
        }
    c->n_label_types = 2;
    c->label_types[0] = ML_POS_QUERY_ITEM_ORIG;
    c->label_types[1] = ML_POS_TARGET_ITEM_ORIG;
    static const int ar[] = {ML_POS_QUERY_ITEM_ORIG, ML_POS_TARGET_ITEM_ORIG, ML_POS_QUERY_ITEM, ML_POS_TARGET_ITEM,
                             ML_POS_DIVIDER, ML_POS_NEXT_KEY};
    int n = ml_task_get_kind(t) == ML_TASK_AR ? 6 : 5;
    for (int k = 0; k < n; k++) c->positions[c->n_positions++] = ar[k];
    if (ml_task_get_kind(t) == ML_TASK_ATR) {
        const ml_atr_config *a = ml_task_atr_config(t);
        int types = a->parent + a->child + a->sibling;
        if (a->query_type_token == ML_QTOK_ALWAYS || (a->query_type_token == ML_QTOK_AUTO && types > 1))
            c->positions[c->n_positions++] = ML_POS_QUERY_TYPE;
    }
    c->seed = 42;
    c->batch = 320;
}

int32_t ml_ic_corrupt(ml_rng *rng, int lo, int hi, int32_t orig) {
    int32_t r = lo + (int32_t)ml_rng_below(rng, (uint32_t)(hi - lo)); /* [TS, QS − 2] */
    return r + (r >= orig ? 1 : 0);
}

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* ------------------------------------------------------------------ metrics of one row */

/* The softmaxes over |V| = 8196 logits are a quarter of a sweep with libm's scalar expf: these
 * loops use the ops' vectorisable mlk_expf_neg and are compiled per ISA. */
MLK_CLONES static float row_max(const float *x, int64_t V) {
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int64_t v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    return mx;
}

/* log Σ exp(x) over V entries. */
MLK_CLONES static float sum_exp(const float *x, int64_t V, float mx) {
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t v = 0; v < V; v++) s += mlk_expf_neg(x[v] - mx);
    return s;
}

static double logsumexp(const float *x, int64_t V) {
    float mx = row_max(x, V);
    float s = sum_exp(x, V, mx);
    return mx + log((double)s);
}

MLK_CLONES static float weighted_gap(const float *c, const float *x, int64_t V, float l) {
    float w = 0;
#pragma omp simd reduction(+ : w)
    for (int64_t v = 0; v < V; v++) w += mlk_expf_neg(c[v] - l) * (c[v] - x[v]);
    return w;
}

static double kl_lse(const float *c, const float *x, int64_t V, double lc) {
    /* Σ p_c (lp_c − lp_x) = Σ p_c (c − x) + lse(x) − lse(c), with p_c = exp(c − lse(c)) */
    double lx = logsumexp(x, V);
    float w = weighted_gap(c, x, V, (float)lc);
    return ((double)w + lx - lc) / (double)V; /* "batchmean" over one vocabulary-length vector */
}

double ml_ic_kl_div(const float *c, const float *x, int64_t V) { return kl_lse(c, x, V, logsumexp(c, V)); }

int ml_ic_argmax(const double *value, const char *const *names, int n) {
    /* Python's max over (value, name) tuples from (0, "nothing") */
    int best = n;
    double bv = 0;
    const char *bn = "nothing";
    for (int i = 0; i < n; i++)
        if (value[i] > bv || (value[i] == bv && strcmp(names[i], bn) > 0)) best = i, bv = value[i], bn = names[i];
    return best;
}

double ml_ic_attrib(double mean_prob_diff, double mean_original, double mean_corrupted, double threshold,
                    bool *passes) {
    double den = mean_original - mean_corrupted;
    if (passes) *passes = den > threshold;
    return mean_prob_diff / den;
}

/* ------------------------------------------------------------------ the run */

void ml_ic_result_free(ml_ic_result *r) {
    if (!r) return;
    free(r->combo_site), free(r->combo_lt), free(r->combo_pos);
    free(r->restored_prob), free(r->corrupted_prob), free(r->restored_logit), free(r->corrupted_logit);
    free(r->kl_div), free(r->corrupt_token), free(r->changed), free(r->original_prob), free(r->original_logit);
    free(r->qtype);
    free(r);
}

static ml_ic_result *result_new(int n_combos, int n_docs) {
    ml_ic_result *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    size_t nc = (size_t)n_combos, nd = (size_t)n_docs, n = nc * nd + 1;
    r->n_docs = n_docs, r->n_combos = n_combos;
    r->combo_site = calloc(nc + 1, sizeof(int)), r->combo_lt = calloc(nc + 1, sizeof(int));
    r->combo_pos = calloc(nc + 1, sizeof(int));
    r->restored_prob = calloc(n, sizeof(float)), r->corrupted_prob = calloc(n, sizeof(float));
    r->restored_logit = calloc(n, sizeof(float)), r->corrupted_logit = calloc(n, sizeof(float));
    r->kl_div = calloc(n, sizeof(float)), r->corrupt_token = calloc(n, sizeof(int32_t)), r->changed = calloc(n, 1);
    r->original_prob = calloc(nd + 1, sizeof(float)), r->original_logit = calloc(nd + 1, sizeof(float));
    r->qtype = calloc(nd + 1, 1);
    if (!r->combo_site || !r->combo_lt || !r->combo_pos || !r->restored_prob || !r->corrupted_prob ||
        !r->restored_logit || !r->corrupted_logit || !r->kl_div || !r->corrupt_token || !r->changed ||
        !r->original_prob || !r->original_logit || !r->qtype) {
        ml_ic_result_free(r);
        return NULL;
    }
    return r;
}

static ml_status check_config(const ml_model *m, const ml_ic_config *c) {
    if (c->n_sites < 1 || c->n_sites > ML_IC_MAX_SITES)
        return ml_fail(ML_ERR_ARG, "interchange: expected 1..%d sites, got %d", ML_IC_MAX_SITES, c->n_sites);
    for (int i = 0; i < c->n_sites; i++) {
        if (c->sites[i] < 0 || c->sites[i] >= m->n_sites)
            return ml_fail(ML_ERR_ARG, "interchange: site index %d out of range", c->sites[i]);
        if (ml_site_pos_dim(m, c->sites[i]) < 0) {
            char name[96];
            ml_site_fullname(m, c->sites[i], name, sizeof name);
            return ml_fail(ML_ERR_ARG, "interchange: site %s has no (batch, position) layout to patch", name);
        }
    }
    if (c->n_label_types < 1 || c->n_label_types > 2)
        return ml_fail(ML_ERR_ARG, "interchange: expected 1 or 2 label types, got %d", c->n_label_types);
    for (int i = 0; i < c->n_label_types; i++)
        if (c->label_types[i] != ML_POS_QUERY_ITEM_ORIG && c->label_types[i] != ML_POS_TARGET_ITEM_ORIG)
            return ml_fail(ML_ERR_ARG, "interchange: label type expected query_item_orig or target_item_orig");
    if (c->n_positions < 1 || c->n_positions > ML_IC_MAX_POS)
        return ml_fail(ML_ERR_ARG, "interchange: expected 1..%d patch positions, got %d", ML_IC_MAX_POS, c->n_positions);
    for (int i = 0; i < c->n_positions; i++)
        if (c->positions[i] < 0 || c->positions[i] >= ML_NPOS)
            return ml_fail(ML_ERR_ARG, "interchange: patch position %d out of range", c->positions[i]);
    return ML_OK;
}

typedef struct {
    ml_model *m;
    bool *want;
    ml_tensor **acts;
} capture;

static void capture_clear(capture *c) {
    for (int i = 0; i < c->m->n_sites; i++) ml_release(c->acts[i]), c->acts[i] = NULL;
}

/* Full forward of tokens keeping the wanted sites; rows: gather after the last mixer. */
static ml_tensor *run_capture(capture *c, ml_tensor *tokens, ml_tensor *rows) {
    capture_clear(c);
    ml_model *m = c->m;
    ml_tensor *r = ml_model_embed(m, tokens), *hid = NULL;
    if (!r) return NULL;
    if (rows) {
        /* the resume with rows: same blocks, same bits per row */
        ml_resume rs = {.layer = 0, .entry = ML_ENTRY_BLOCK_INPUT, .act = r, .rows = rows};
        bool any = false;
        for (int i = 0; i < m->n_sites; i++) any = any || c->want[i];
        hid = any ? mli_resume_cache(m, &rs, c->want, c->acts) : ml_model_hidden_resume(m, &rs, NULL);
    } else {
        ml_status st = ml_run_cache(m, tokens, c->want, c->acts, &hid);
        if (st) hid = NULL;
    }
    ml_release(r);
    return hid;
}

ml_ic_result *ml_ic_run(ml_model *m, const ml_dataset *ds, int64_t first, int64_t count, const ml_ic_config *cfg) {
    if (check_config(m, cfg)) return NULL;
    if (first < 0 || count < 1 || first + count > ml_dataset_size(ds)) {
        ml_fail(ML_ERR_ARG, "interchange: documents [%lld, %lld) outside the dataset's %lld", (long long)first,
                (long long)(first + count), (long long)ml_dataset_size(ds));
        return NULL;
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const ml_task *task = ml_dataset_task(ds);
    if (ml_task_vocab_size(task) > m->cfg.vocab) {
        ml_fail(ML_ERR_ARG, "interchange: the task's vocabulary (%d) is larger than the model's (%d)",
                ml_task_vocab_size(task), m->cfg.vocab);
        return NULL;
    }
    int lo, hi;
    ml_task_corrupt_range(task, &lo, &hi);
    int n_combos = cfg->n_sites * cfg->n_label_types * cfg->n_positions;
    int N = (int)count, V = m->cfg.vocab, ns = m->n_sites;
    ml_ic_result *res = result_new(n_combos, N);
    bool *want_clean = calloc((size_t)ns, 1), *want_base = calloc((size_t)ns, 1);
    ml_tensor **clean = calloc((size_t)ns, sizeof *clean), **base = calloc((size_t)ns, sizeof *base);
    ml_tensor **sub = calloc((size_t)ns, sizeof *sub);
    int32_t *map = malloc(sizeof(int32_t) * (size_t)(cfg->batch > 0 ? cfg->batch : 320) + 4);
    int32_t *ppos = malloc(sizeof(int32_t) * (size_t)(cfg->batch > 0 ? cfg->batch : 320) + 4);
    if (!res || !want_clean || !want_base || !clean || !base || !sub || !map || !ppos) {
        ml_fail(ML_ERR_MEM, "interchange: out of memory");
        goto fail;
    }
    /* combinations, site-major (component, layer), then label type, then position */
    for (int s = 0, k = 0; s < cfg->n_sites; s++)
        for (int a = 0; a < cfg->n_label_types; a++)
            for (int p = 0; p < cfg->n_positions; p++, k++) {
                res->combo_site[k] = cfg->sites[s];
                res->combo_lt[k] = cfg->label_types[a];
                res->combo_pos[k] = cfg->positions[p];
            }
    /* the corruptions, drawn up front */
    for (int k = 0; k < n_combos; k++) {
        char label[160];
        snprintf(label, sizeof label, "%d.%s.%s.%s", m->site_layer[res->combo_site[k]], ml_pos_names[res->combo_lt[k]],
                 ml_pos_names[res->combo_pos[k]], m->sites[res->combo_site[k]].name);
        ml_rng rng;
        ml_rng_init(&rng, cfg->seed ^ fnv1a(label), ML_STREAM_INTERP);
        for (int i = 0; i < N; i++) {
            int len;
            const int32_t *tok = ml_dataset_tokens(ds, first + i, &len);
            int pc = ml_dataset_positions(ds, first + i)[res->combo_lt[k]];
            res->corrupt_token[(size_t)k * N + i] = pc >= 0 ? ml_ic_corrupt(&rng, lo, hi, tok[pc]) : -1;
        }
    }
    for (int i = 0; i < N; i++) res->qtype[i] = (uint8_t)ml_dataset_qtype(ds, first + i);
    for (int s = 0; s < cfg->n_sites; s++) want_clean[cfg->sites[s]] = true;
    if (cfg->swap) /* the clean run is the base: it needs the resume sites too */
        for (int s = 0; s < cfg->n_sites; s++) ml_patch_needs(m, cfg->sites[s], want_clean);

    int batch = cfg->batch > 0 ? cfg->batch : 320;
    capture cc = {m, want_clean, clean}, cb = {m, want_base, base};
    bool old_grad = ml_set_grad_enabled(false);
    for (int64_t f0 = 0; f0 < N; f0 += batch) {
        int B = (int)(N - f0 < batch ? N - f0 : batch);
        ml_tensor *tok_full = NULL, *tg = NULL, *pos = NULL, *tok = NULL, *rows = NULL, *clean_logits = NULL;
        ml_tensor *ctok = NULL, *hid = NULL, *blog = NULL;
        bool ok = ml_dataset_batch_range(ds, first + f0, B, &tok_full, &tg, &pos) == ML_OK;
        int64_t B64 = B;
        if (ok) ok = (rows = ml_empty(ML_I32, 1, &B64)) != NULL;
        int32_t *rw = ok ? ml_i32(rows) : NULL, Lt = 0;
        int32_t *pp = ok ? ml_i32(pos) : NULL;
        for (int b = 0; ok && b < B; b++) {
            int32_t t = pp[b * ML_NPOS + ML_POS_TARGET_ITEM] - 1;
            if (t < 0) {
                ml_fail(ML_ERR_ARG, "interchange: document %lld has no target_item", (long long)(first + f0 + b));
                ok = false;
                break;
            }
            rw[b] = t;
            Lt = t + 1 > Lt ? t + 1 : Lt;
        }
        if (ok) { /* cut after the readout row */
            ml_tensor *nw = ml_narrow(tok_full, 1, 0, Lt);
            tok = nw ? ml_contiguous(nw) : NULL;
            ml_release(nw);
            ok = tok != NULL;
        }
        int32_t *ans = malloc(sizeof(int32_t) * (size_t)B + 4);
        if (ok && ans)
            for (int b = 0; b < B; b++) ans[b] = ml_i32(tok_full)[(int64_t)b * tok_full->shape[1] + rw[b] + 1];
        ok = ok && ans;
        /* the clean run */
        if (ok) {
            hid = run_capture(&cc, tok, NULL);
            clean_logits = hid ? mli_readout(m, hid, rw) : NULL;
            ml_release(hid), hid = NULL;
            ok = clean_logits != NULL;
        }
        for (int b = 0; ok && b < B; b++) {
            const float *x = ml_f32(clean_logits) + (int64_t)b * V;
            double lse = logsumexp(x, V);
            res->original_prob[f0 + b] = (float)exp(x[ans[b]] - lse);
            res->original_logit[f0 + b] = x[ans[b]];
        }
        for (int k = 0; ok && k < n_combos; k++) {
            int site = res->combo_site[k], lt = res->combo_lt[k], pk = res->combo_pos[k];
            size_t row0 = (size_t)k * N + (size_t)f0;
            /* corrupted tokens */
            ctok = ml_clone(tok);
            ok = ctok != NULL;
            for (int b = 0; ok && b < B; b++) {
                int pc = pp[b * ML_NPOS + lt];
                if (pc >= 0 && pc < Lt) ml_i32(ctok)[(int64_t)b * Lt + pc] = res->corrupt_token[row0 + b];
            }
            if (!ok) break;
            /* base and source runs */
            ml_tensor *const *src_acts, *const *base_acts;
            ml_tensor *base_logits = NULL;
            if (!cfg->swap) {
                memset(want_base, 0, (size_t)ns);
                ml_patch_needs(m, site, want_base);
                hid = run_capture(&cb, ctok, cfg->reference ? NULL : rows);
                base_logits = hid ? mli_readout(m, hid, rw) : NULL;
                src_acts = clean, base_acts = base;
            } else {
                memset(want_base, 0, (size_t)ns);
                want_base[site] = true;
                hid = run_capture(&cb, ctok, NULL);
                base_logits = hid ? ml_retain(clean_logits) : NULL;
                src_acts = base, base_acts = clean;
            }
            ml_release(hid), hid = NULL;
            if (!(ok = base_logits != NULL)) break;
            /* which examples the patch can change */
            int nchg = 0;
            for (int b = 0; b < B; b++) {
                int q = pp[b * ML_NPOS + pk];
                ppos[b] = q;
                bool chg = q >= 0 && q < Lt &&
                           mli_unit_differs(m, site, base_acts[site], b, src_acts[site], b, q,
                                            cfg->reference ? NULL : rw);
                if (cfg->reference) chg = q >= 0 && q < Lt; /* the reference patches everything */
                res->changed[row0 + b] = chg;
                if (chg) map[nchg++] = b;
            }
            ml_tensor *int_logits = NULL;
            if (nchg > 0) {
                ml_patch pt = {.site = site, .source = src_acts[site], .pos = ppos};
                if (cfg->reference) {
                    ml_tensor *h2 = ml_patch_full(m, cfg->swap ? tok : ctok, &pt);
                    int_logits = h2 ? mli_readout(m, h2, rw) : NULL;
                    ml_release(h2);
                } else {
                    ml_tensor *sub_rows = NULL, *idx = NULL;
                    const int32_t *bmap = NULL;
                    ml_tensor *const *use = base_acts;
                    if (nchg < B) { /* only the examples that change */
                        int64_t nn = nchg;
                        idx = ml_from_i32(1, &nn, map);
                        sub_rows = idx ? ml_index_select(rows, 0, idx) : NULL;
                        for (int i = 0; i < ns; i++)
                            sub[i] = base_acts[i] && idx ? ml_index_select(base_acts[i], 0, idx) : NULL;
                        bmap = map, use = sub;
                    }
                    /* the hook and the entry read source/pos through the map: the source stays whole */
                    ml_tensor *h2 = mli_patch_fast_mapped(m, use, &pt, nchg < B ? sub_rows : rows, bmap);
                    int_logits = h2 ? mli_readout(m, h2, nchg < B ? ml_i32(sub_rows) : rw) : NULL;
                    ml_release(h2), ml_release(sub_rows), ml_release(idx);
                    for (int i = 0; i < ns; i++) ml_release(sub[i]), sub[i] = NULL;
                }
                if (!int_logits) {
                    ml_release(base_logits);
                    ok = false;
                    break;
                }
                res->patched_forwards += cfg->reference ? B : nchg;
            }
            for (int b = 0, j = 0; b < B; b++) {
                const float *xc = ml_f32(base_logits) + (int64_t)b * V;
                double lc = logsumexp(xc, V);
                float pc = (float)exp(xc[ans[b]] - lc);
                res->corrupted_prob[row0 + b] = pc, res->corrupted_logit[row0 + b] = xc[ans[b]];
                const float *xi = NULL;
                if (cfg->reference) xi = int_logits && res->changed[row0 + b] ? ml_f32(int_logits) + (int64_t)b * V : NULL;
                else if (j < nchg && map[j] == b) xi = ml_f32(int_logits) + (int64_t)(j++) * V;
                if (xi) {
                    double li = logsumexp(xi, V);
                    res->restored_prob[row0 + b] = (float)exp(xi[ans[b]] - li);
                    res->restored_logit[row0 + b] = xi[ans[b]];
                    res->kl_div[row0 + b] = (float)kl_lse(xc, xi, V, lc);
                } else { /* the patch changes nothing: the base run itself */
                    res->restored_prob[row0 + b] = pc, res->restored_logit[row0 + b] = xc[ans[b]];
                    res->kl_div[row0 + b] = 0;
                }
            }
            ml_release(int_logits), ml_release(base_logits), ml_release(ctok), ctok = NULL;
            capture_clear(&cb);
        }
        capture_clear(&cc), capture_clear(&cb);
        free(ans);
        ml_release(ctok), ml_release(tok_full), ml_release(tg), ml_release(pos), ml_release(tok), ml_release(rows);
        ml_release(clean_logits), ml_release(blog);
        if (!ok) {
            ml_set_grad_enabled(old_grad);
            goto fail;
        }
    }
    ml_set_grad_enabled(old_grad);
    free(want_clean), free(want_base), free(clean), free(base), free(sub), free(map), free(ppos);
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return res;
fail:
    if (ml_last_status() == ML_OK) ml_fail(ML_ERR_MEM, "interchange: out of memory");
    free(want_clean), free(want_base), free(clean), free(base), free(sub), free(map), free(ppos);
    ml_ic_result_free(res);
    return NULL;
}

/* ------------------------------------------------------------------ mean ablation */

ml_tensor *ml_site_mean(ml_model *m, const ml_dataset *ds, int64_t n, int site, int batch) {
    if (site < 0 || site >= m->n_sites || ml_site_pos_dim(m, site) != 1) {
        ml_fail(ML_ERR_ARG, "site_mean: expected a site of shape (B, L, ...), got index %d", site);
        return NULL;
    }
    if (n > ml_dataset_size(ds)) n = ml_dataset_size(ds);
    if (batch < 1) batch = 64;
    ml_tensor *sum = NULL;
    double *acc = NULL, *cnt = NULL;
    int64_t Lmax = 0, inner = 0;
    bool *want = calloc((size_t)m->n_sites, 1);
    ml_tensor **acts = calloc((size_t)m->n_sites, sizeof *acts);
    if (!want || !acts) goto fail;
    want[site] = true;
    for (int64_t first = 0; first < n; first += batch) {
        int cnt_b = (int)(n - first < batch ? n - first : batch);
        ml_tensor *tok = NULL, *tg = NULL, *pos = NULL;
        if (ml_dataset_batch_range(ds, first, cnt_b, &tok, &tg, &pos)) goto fail;
        ml_status st = ml_run_cache(m, tok, want, acts, NULL);
        ml_tensor *a = st ? NULL : ml_contiguous(acts[site]);
        ml_release(acts[site]), acts[site] = NULL;
        if (!a) {
            ml_release(tok), ml_release(tg), ml_release(pos);
            goto fail;
        }
        int64_t L = a->shape[1], in = ml_numel(a) / (a->shape[0] * L);
        if (!acc) {
            Lmax = ml_dataset_max_len(ds), inner = in;
            acc = calloc((size_t)(Lmax * inner), sizeof *acc);
            cnt = calloc((size_t)Lmax, sizeof *cnt);
            if (!acc || !cnt) {
                ml_release(a), ml_release(tok), ml_release(tg), ml_release(pos);
                goto fail;
            }
        }
        for (int64_t b = 0; b < a->shape[0]; b++) {
            int len;
            ml_dataset_tokens(ds, first + b, &len);
            for (int64_t t = 0; t < len && t < L; t++) {
                const float *v = ml_f32(a) + (b * L + t) * inner;
                for (int64_t k = 0; k < inner; k++) acc[t * inner + k] += v[k];
                cnt[t] += 1;
            }
        }
        int64_t shp[ML_MAX_DIMS];
        for (int d = 1; d < a->ndim; d++) shp[d - 1] = a->shape[d];
        shp[0] = Lmax;
        if (!sum) sum = ml_zeros(ML_F32, a->ndim - 1, shp);
        ml_release(a), ml_release(tok), ml_release(tg), ml_release(pos);
        if (!sum) goto fail;
    }
    if (!sum) {
        ml_fail(ML_ERR_ARG, "site_mean: the dataset is empty");
        goto fail;
    }
    for (int64_t t = 0; t < Lmax; t++)
        for (int64_t k = 0; k < inner; k++) ml_f32(sum)[t * inner + k] = cnt[t] > 0 ? (float)(acc[t * inner + k] / cnt[t]) : 0;
    free(want), free(acts), free(acc), free(cnt);
    return sum;
fail:
    if (ml_last_status() == ML_OK) ml_fail(ML_ERR_MEM, "site_mean: out of memory");
    free(want), free(acts), free(acc), free(cnt);
    ml_release(sum);
    return NULL;
}

/* ------------------------------------------------------------------ aggregates */

typedef struct {
    ml_metric *v;
    int n, cap;
    bool oom;
} mlist;

static void put(mlist *l, double value, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(mlist *l, double value, const char *fmt, ...) {
    if (l->oom) return;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        ml_metric *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v, l->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->v[l->n].name, sizeof l->v[l->n].name, fmt, ap);
    va_end(ap);
    l->v[l->n++].value = value;
}

/* Index of the combination (site, lt, pos) or -1. */
static int find_combo(const ml_ic_result *r, int site, int lt, int pos) {
    for (int k = 0; k < r->n_combos; k++)
        if (r->combo_site[k] == site && r->combo_lt[k] == lt && r->combo_pos[k] == pos) return k;
    return -1;
}

static double mean_of(const float *x, const ml_ic_result *r, int k, int type) {
    double s = 0;
    int n = 0;
    for (int i = 0; i < r->n_docs; i++)
        if (r->qtype[i] == type) s += x[(size_t)k * r->n_docs + i], n++;
    return n ? s / n : NAN;
}

/* The five per-example metrics of every combination, means over the examples of `type`. */
static void combo_means(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T) {
    for (int k = 0; k < r->n_combos; k++) {
        int site = r->combo_site[k], layer = m->site_layer[site];
        const char *comp = m->sites[site].name, *lt = ml_pos_names[r->combo_lt[k]], *pn = ml_pos_names[r->combo_pos[k]];
        double rp = mean_of(r->restored_prob, r, k, type), cp = mean_of(r->corrupted_prob, r, k, type);
        double rl = mean_of(r->restored_logit, r, k, type), cl = mean_of(r->corrupted_logit, r, k, type);
        put(l, rp, "%d.%s.%s.%s.%s.restored_prob", layer, T, lt, pn, comp);
        put(l, rp - cp, "%d.%s.%s.%s.%s.prob_diff", layer, T, lt, pn, comp);
        put(l, rl, "%d.%s.%s.%s.%s.restored_logit", layer, T, lt, pn, comp);
        put(l, rl - cl, "%d.%s.%s.%s.%s.logit_diff", layer, T, lt, pn, comp);
        put(l, mean_of(r->kl_div, r, k, type), "%d.%s.%s.%s.%s.kl_div", layer, T, lt, pn, comp);
    }
}

/* The layer-less corrupted./original. means (averaged over the layers, as the original appends
 * them) and each combination's attrib with that denominator. */
static void layerless_means(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T,
                            double orig_p, double orig_l) {
    for (int k = 0; k < r->n_combos; k++) {
        int site = r->combo_site[k];
        const char *comp = m->sites[site].name, *lt = ml_pos_names[r->combo_lt[k]], *pn = ml_pos_names[r->combo_pos[k]];
        bool first = true;
        for (int j = 0; j < k && first; j++)
            first = !(r->combo_lt[j] == r->combo_lt[k] && r->combo_pos[j] == r->combo_pos[k] &&
                      !strcmp(m->sites[r->combo_site[j]].name, comp));
        if (!first) continue;
        double cp = 0, cl = 0;
        int nl = 0;
        for (int j = k; j < r->n_combos; j++)
            if (r->combo_lt[j] == r->combo_lt[k] && r->combo_pos[j] == r->combo_pos[k] &&
                !strcmp(m->sites[r->combo_site[j]].name, comp))
                cp += mean_of(r->corrupted_prob, r, j, type), cl += mean_of(r->corrupted_logit, r, j, type), nl++;
        cp /= nl, cl /= nl;
        put(l, cp, "corrupted.%s.%s.%s.%s.restored_prob", T, lt, pn, comp);
        put(l, cl, "corrupted.%s.%s.%s.%s.restored_logit", T, lt, pn, comp);
        put(l, orig_p, "original.%s.%s.%s.%s.restored_prob", T, lt, pn, comp);
        put(l, orig_l, "original.%s.%s.%s.%s.restored_logit", T, lt, pn, comp);
        for (int j = k; j < r->n_combos; j++)
            if (r->combo_lt[j] == r->combo_lt[k] && r->combo_pos[j] == r->combo_pos[k] &&
                !strcmp(m->sites[r->combo_site[j]].name, comp)) {
                double d = mean_of(r->restored_prob, r, j, type) - mean_of(r->corrupted_prob, r, j, type);
                put(l, ml_ic_attrib(d, orig_p, cp, 0.01, NULL), "%d.%s.%s.%s.%s.attrib",
                    m->site_layer[r->combo_site[j]], T, lt, pn, comp);
            }
    }
}

/* max_perc: per (site, label type), each example's argmax over positions (vals, names: scratch). */
static void max_perc(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T, int nt,
                     double *vals, const char **names) {
    int N = r->n_docs;
    for (int k = 0; k < r->n_combos; k++) {
        int site = r->combo_site[k], lt = r->combo_lt[k];
        if (find_combo(r, site, lt, r->combo_pos[k]) != k) continue;
        bool first = true;
        for (int j = 0; j < k && first; j++) first = !(r->combo_site[j] == site && r->combo_lt[j] == lt);
        if (!first) continue;
        int np = 0, ks[ML_NPOS];
        for (int j = k; j < r->n_combos; j++)
            if (r->combo_site[j] == site && r->combo_lt[j] == lt && np < ML_NPOS) ks[np++] = j;
        int counts[ML_NPOS + 1] = {0};
        for (int i = 0; i < N; i++) {
            if (r->qtype[i] != type) continue;
            for (int a = 0; a < np; a++) {
                size_t o = (size_t)ks[a] * N + i;
                vals[a] = (double)r->restored_prob[o] - (double)r->corrupted_prob[o];
                names[a] = ml_pos_names[r->combo_pos[ks[a]]];
            }
            counts[ml_ic_argmax(vals, names, np)]++;
        }
        int layer = m->site_layer[site];
        const char *comp = m->sites[site].name, *lts = ml_pos_names[lt];
        for (int a = 0; a <= np; a++)
            put(l, (double)counts[a] / nt, "%d.%s.%s.%s.%s.max_perc", layer, T, lts,
                a < np ? ml_pos_names[r->combo_pos[ks[a]]] : "nothing", comp);
    }
}

/* max_perc_layer: per (component, label type, position), each example's argmax over layers. */
static void max_perc_layer(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T, int nt,
                           double *vals, const char **names) {
    static const char *const layer_names[ML_MAX_LAYERS] = {"0", "1", "2",  "3",  "4",  "5",  "6",  "7",
                                                           "8", "9", "10", "11", "12", "13", "14", "15"};
    int N = r->n_docs;
    for (int k = 0; k < r->n_combos; k++) {
        const char *comp = m->sites[r->combo_site[k]].name;
        int lt = r->combo_lt[k], pk = r->combo_pos[k];
        bool first = true;
        for (int j = 0; j < k && first; j++)
            first = !(r->combo_lt[j] == lt && r->combo_pos[j] == pk && !strcmp(m->sites[r->combo_site[j]].name, comp));
        if (!first) continue;
        int nl = 0, ks[ML_MAX_LAYERS];
        for (int j = k; j < r->n_combos; j++)
            if (r->combo_lt[j] == lt && r->combo_pos[j] == pk && !strcmp(m->sites[r->combo_site[j]].name, comp) &&
                nl < ML_MAX_LAYERS)
                ks[nl++] = j;
        int counts[ML_MAX_LAYERS + 1] = {0};
        for (int i = 0; i < N; i++) {
            if (r->qtype[i] != type) continue;
            for (int a = 0; a < nl; a++) {
                size_t o = (size_t)ks[a] * N + i;
                vals[a] = (double)r->restored_prob[o] - (double)r->corrupted_prob[o];
                names[a] = layer_names[m->site_layer[r->combo_site[ks[a]]]];
            }
            counts[ml_ic_argmax(vals, names, nl)]++;
        }
        for (int a = 0; a <= nl; a++)
            put(l, (double)counts[a] / nt, "%s.%s.%s.%s.%s.max_perc_layer",
                a < nl ? layer_names[m->site_layer[r->combo_site[ks[a]]]] : "nothing", T, ml_pos_names[lt],
                ml_pos_names[pk], comp);
    }
}

/* Memorisation scores (PARENT documents): the max over layers of a mean. */
static void memo_scores(mlist *l, const ml_model *m, const ml_ic_result *r, int type, const char *T) {
    static const struct {
        const char *name, *comp, *metric;
        int pos;
    } memo[] = {
        {"memo_in", "attention_input", "restored_prob", ML_POS_QUERY_ITEM_ORIG},
        {"memo_out", "attention_output", "restored_prob", ML_POS_QUERY_ITEM_ORIG},
        {"memo_div_in", "attention_input", "restored_prob", ML_POS_DIVIDER},
        {"memo_div_out", "attention_output", "restored_prob", ML_POS_DIVIDER},
        {"memo_in_diff", "attention_input", "prob_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_out_diff", "attention_output", "prob_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_div_in_diff", "attention_input", "prob_diff", ML_POS_DIVIDER},
        {"memo_div_out_diff", "attention_output", "prob_diff", ML_POS_DIVIDER},
        {"memo_logit_in", "attention_input", "restored_logit", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_out", "attention_output", "restored_logit", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_div_in", "attention_input", "restored_logit", ML_POS_DIVIDER},
        {"memo_logit_div_out", "attention_output", "restored_logit", ML_POS_DIVIDER},
        {"memo_logit_in_diff", "attention_input", "logit_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_out_diff", "attention_output", "logit_diff", ML_POS_QUERY_ITEM_ORIG},
        {"memo_logit_div_in_diff", "attention_input", "logit_diff", ML_POS_DIVIDER},
        {"memo_logit_div_out_diff", "attention_output", "logit_diff", ML_POS_DIVIDER},
    };
    for (size_t q = 0; q < sizeof memo / sizeof memo[0]; q++) {
        double best = -INFINITY;
        for (int k = 0; k < r->n_combos; k++) {
            if (r->combo_lt[k] != ML_POS_TARGET_ITEM_ORIG || r->combo_pos[k] != memo[q].pos ||
                strcmp(m->sites[r->combo_site[k]].name, memo[q].comp))
                continue;
            bool logit = strstr(memo[q].metric, "logit") != NULL, diff = strstr(memo[q].metric, "diff") != NULL;
            double v = mean_of(logit ? r->restored_logit : r->restored_prob, r, k, type);
            if (diff) v -= mean_of(logit ? r->corrupted_logit : r->corrupted_prob, r, k, type);
            best = v > best ? v : best;
        }
        if (best > -INFINITY) put(l, best, "%s.memo_score", memo[q].name);
    }
}

ml_status ml_ic_metrics(const ml_model *m, const ml_ic_result *r, ml_metric **out, int *n_out) {
    *out = NULL, *n_out = 0;
    mlist l = {0};
    int N = r->n_docs;
    double *vals = malloc(sizeof(double) * (ML_NPOS + ML_MAX_LAYERS + 2));
    const char **names = malloc(sizeof(char *) * (ML_NPOS + ML_MAX_LAYERS + 2));
    if (!vals || !names) {
        free(vals), free(names);
        return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    }
    for (int type = 0; type <= ML_QT_SIBLING; type++) {
        int nt = 0;
        for (int i = 0; i < N; i++) nt += r->qtype[i] == type;
        if (!nt) continue;
        const char *T = ml_qtype_name((ml_qtype)type);
        double orig_p = 0, orig_l = 0;
        for (int i = 0; i < N; i++)
            if (r->qtype[i] == type) orig_p += r->original_prob[i], orig_l += r->original_logit[i];
        orig_p /= nt, orig_l /= nt;
        combo_means(&l, m, r, type, T);
        layerless_means(&l, m, r, type, T, orig_p, orig_l);
        max_perc(&l, m, r, type, T, nt, vals, names);
        max_perc_layer(&l, m, r, type, T, nt, vals, names);
        if (type == ML_QT_PARENT) memo_scores(&l, m, r, type, T);
    }
    free(vals), free(names);
    if (l.oom) {
        free(l.v);
        return ml_fail(ML_ERR_MEM, "interchange: out of memory");
    }
    *out = l.v, *n_out = l.n;
    return ML_OK;
}
