/* Caching, patching, ablations and model surgery (interp.h). The evaluator is in interchange.c. */
#include "interp/interp.h"
#include "interp/interp_private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "ops/mixer_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

/* ------------------------------------------------------------------ sites */

int ml_site_pos_dim(const ml_model *m, int site) {
    const ml_site_decl *s = &m->sites[site];
    if (s->ndim < 2 || s->shape[0] != -1) return -1;
    for (int d = 1; d < s->ndim; d++)
        if (s->shape[d] == -2) return d;
    return -1;
}

/* ------------------------------------------------------------------ units */

/* A tensor seen as [batch][outer][position][inner] around position dimension pd (no batch
 * dimension when batched is false). */
typedef struct {
    int64_t outer, len, inner;
    bool batched;
} unit_geom;

static unit_geom geom(const ml_tensor *t, int pd, bool batched) {
    unit_geom g = {1, t->shape[pd], 1, batched};
    for (int d = batched ? 1 : 0; d < pd; d++) g.outer *= t->shape[d];
    for (int d = pd + 1; d < t->ndim; d++) g.inner *= t->shape[d];
    return g;
}

static inline int64_t unit_off(const unit_geom *g, int64_t b, int64_t o, int64_t p) {
    return (((g->batched ? b : 0) * g->outer + o) * g->len + p) * g->inner;
}

/* Writes source unit (bs, ps) over dst unit (bd, pd); or compares them (returns true if they
 * differ) when write is false. Both contiguous float32 with equal outer and inner extents. */
static bool unit_op(ml_tensor *dst, const unit_geom *gd, int64_t bd, int64_t pdst, const ml_tensor *src,
                    const unit_geom *gs, int64_t bs, int64_t psrc, bool write) {
    float *d = ml_f32(dst);
    const float *s = ml_f32(src);
    size_t n = sizeof(float) * (size_t)gd->inner;
    for (int64_t o = 0; o < gd->outer; o++) {
        float *pdv = d + unit_off(gd, bd, o, pdst);
        const float *psv = s + unit_off(gs, bs, o, psrc);
        if (write) memcpy(pdv, psv, n);
        else if (memcmp(pdv, psv, n)) return true;
    }
    return false;
}

/* Checks that p's source fits a site activation `act` (the batch may be gathered). */
static ml_status check_source(const ml_model *m, const ml_patch *p, const ml_tensor *act, int pd, bool mapped) {
    const ml_tensor *s = p->source;
    bool batched = s->ndim == act->ndim;
    char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR], name[96];
    ml_site_fullname(m, p->site, name, sizeof name);
    bool ok = s->dtype == ML_F32 && (batched || s->ndim == act->ndim - 1);
    if (ok && batched && !mapped && s->shape[0] != act->shape[0]) ok = false; /* mapped: rows pick examples */
    for (int d = batched ? 1 : 0; ok && d < s->ndim; d++) {
        int ad = batched ? d : d + 1;
        if (ad == pd) ok = s->shape[d] >= act->shape[ad] || act->shape[ad] == 1;
        else ok = s->shape[d] == act->shape[ad];
    }
    if (!ok)
        return ml_fail(ML_ERR_SHAPE, "patch at %s: source %s %s does not fit the activation %s (or it without the batch)",
                       name, ml_dtype_name(s->dtype), ml_shape_str(s1, s->ndim, s->shape),
                       ml_shape_str(s2, act->ndim, act->shape));
    return ML_OK;
}

/* A copy of act with p applied. batch_map[b] (optional) is the example of p->pos / p->source
 * that row b of act stands for; rows (optional) tells which position a gathered act (position
 * extent 1 while the source is longer) holds. */
static ml_tensor *apply_patch(const ml_model *m, const ml_patch *p, ml_tensor *act, const int32_t *batch_map,
                              const int32_t *rows) {
    int pd = ml_site_pos_dim(m, p->site);
    if (pd < 0 || pd >= act->ndim) {
        char name[96];
        ml_site_fullname(m, p->site, name, sizeof name);
        ml_fail(ML_ERR_ARG, "patch: site %s has no position dimension", name);
        return NULL;
    }
    if (check_source(m, p, act, pd, batch_map != NULL)) return NULL;
    ml_tensor *out = ml_clone(act), *src = ml_contiguous(p->source);
    if (!out || !src) {
        ml_release(out), ml_release(src);
        return NULL;
    }
    bool sb = src->ndim == act->ndim;
    unit_geom gd = geom(out, pd, true), gs = geom(src, sb ? pd : pd - 1, sb);
    bool gathered = gd.len == 1 && gs.len > 1;
    for (int64_t b = 0; b < act->shape[0]; b++) {
        int64_t e = batch_map ? batch_map[b] : b;
        if (p->pos) {
            int64_t q = p->pos[e];
            if (q < 0) continue;
            if (gathered) {
                if (!rows || rows[b] != q) continue; /* not the row this example kept */
                unit_op(out, &gd, b, 0, src, &gs, e, q, true);
            } else if (q < gd.len) {
                unit_op(out, &gd, b, q, src, &gs, e, q, true);
            }
        } else if (gathered) {
            if (rows) unit_op(out, &gd, b, 0, src, &gs, e, rows[b], true);
        } else {
            for (int64_t q = 0; q < gd.len; q++) unit_op(out, &gd, b, q, src, &gs, e, q, true);
        }
    }
    ml_release(src);
    out->storage->version++;
    return out;
}

/* ------------------------------------------------------------------ hooks */

typedef struct {
    ml_model *m;
    const bool *want;
    ml_tensor **acts, **leaves; /* leaves: zero tensors whose gradient is the site's */
    const ml_patch *patch;
    const int32_t *batch_map, *rows;
} hook_ud;

static bool hook_wants(void *ud, int site) {
    hook_ud *h = ud;
    if (h->patch && site == h->patch->site) return true;
    if (!h->want) return h->acts != NULL;
    return h->want[site];
}

static ml_tensor *hook_fn(void *ud, int site, ml_tensor *act, ml_status *err) {
    hook_ud *h = ud;
    ml_tensor *rep = NULL;
    if (h->patch && site == h->patch->site) {
        rep = apply_patch(h->m, h->patch, act, h->batch_map, h->rows);
        if (!rep) {
            *err = ml_last_status();
            return NULL;
        }
    }
    if (h->acts) {
        int i = site;
        if (!h->want || h->want[i]) {
            ml_tensor *cur = rep ? rep : act;
            ml_release(h->acts[i]);
            if (h->leaves) { /* act + 0: the same values, and the zero leaf's gradient is the site's */
                ml_tensor *z = ml_zeros_like(cur), *sum = NULL;
                if (z) ml_set_requires_grad(z, true);
                if (z) sum = ml_add(cur, z);
                if (!sum) {
                    ml_release(z), ml_release(rep);
                    *err = ml_last_status();
                    return NULL;
                }
                ml_release(h->leaves[i]);
                h->leaves[i] = z;
                h->acts[i] = ml_detach(cur);
                ml_release(rep);
                rep = sum;
            } else { /* contiguous (q, k, v are views of one projection), as the unit code reads them */
                if (!(h->acts[i] = ml_contiguous(cur))) {
                    ml_release(rep);
                    *err = ml_last_status();
                    return NULL;
                }
            }
        }
    }
    return rep;
}

static ml_run make_run(hook_ud *h) {
    ml_run r = {.hook = hook_fn, .ud = h, .wants = hook_wants};
    return r;
}

/* ------------------------------------------------------------------ caching */

ml_status ml_run_cache(ml_model *m, ml_tensor *tokens, const bool *want, ml_tensor **acts, ml_tensor **hidden) {
    for (int i = 0; i < m->n_sites; i++) acts[i] = NULL;
    if (hidden) *hidden = NULL;
    hook_ud h = {.m = m, .want = want, .acts = acts};
    ml_run run = make_run(&h);
    bool old = ml_set_grad_enabled(false);
    ml_tensor *hid = ml_model_hidden(m, tokens, &run);
    ml_set_grad_enabled(old);
    if (!hid) {
        for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]), acts[i] = NULL;
        return run.status ? run.status : ml_last_status();
    }
    if (hidden) *hidden = hid;
    else ml_release(hid);
    return ML_OK;
}

ml_status ml_run_cache_grad(ml_model *m, ml_tensor *tokens, ml_tensor *rows, ml_tensor *targets, bool logprob,
                            const bool *want, ml_tensor **acts, ml_tensor **grads, ml_tensor **hidden) {
    for (int i = 0; i < m->n_sites; i++) acts[i] = grads[i] = NULL;
    if (hidden) *hidden = NULL;
    int64_t B = tokens->ndim == 2 ? tokens->shape[0] : -1;
    if (rows->dtype != ML_I32 || targets->dtype != ML_I32 || rows->ndim != 1 || targets->ndim != 1 ||
        rows->shape[0] != B || targets->shape[0] != B)
        return ml_fail(ML_ERR_SHAPE, "run_cache_grad: rows and targets must be int32 vectors of the batch size");
    ml_tensor **leaves = calloc((size_t)m->n_sites, sizeof *leaves);
    bool *req = malloc((size_t)m->n_params + 1);
    if (!leaves || !req) {
        free(leaves), free(req);
        return ml_fail(ML_ERR_MEM, "run_cache_grad: out of memory");
    }
    /* no parameter gradients: only the sites' */
    for (int i = 0; i < m->n_params; i++) req[i] = m->params[i].t->requires_grad, m->params[i].t->requires_grad = false;
    hook_ud h = {.m = m, .want = want, .acts = acts, .leaves = leaves};
    ml_run run = make_run(&h);
    bool old = ml_set_grad_enabled(true);
    ml_tensor *hid = ml_model_hidden(m, tokens, &run), *flat = NULL, *sel = NULL, *logits = NULL, *lp = NULL;
    ml_tensor *idx = NULL, *pick = NULL, *obj = NULL;
    ml_status st = ML_OK;
    int64_t L = hid ? hid->shape[1] : 0;
    if (hid) {
        for (int64_t b = 0; b < B && st == ML_OK; b++) {
            int32_t t = ml_i32(rows)[b], y = ml_i32(targets)[b];
            if (t < 0 || t >= L || y < 0 || y >= m->cfg.vocab)
                st = ml_fail(ML_ERR_ARG, "run_cache_grad: row %d or target %d of example %lld out of range", t, y,
                             (long long)b);
        }
        idx = ml_empty(ML_I32, 1, &B);
        if (st == ML_OK && idx) {
            for (int64_t b = 0; b < B; b++) ml_i32(idx)[b] = (int32_t)(b * L + ml_i32(rows)[b]);
            flat = ml_reshape(hid, 2, (int64_t[]){B * L, m->cfg.d_model});
        }
    }
    if (flat) sel = ml_index_select(flat, 0, idx);
    if (sel) logits = ml_model_head(m, sel);
    if (logits) lp = ml_log_softmax(logits, 1);
    if (lp && !logprob) {
        ml_tensor *e = ml_unary(ML_EXP, lp);
        ml_release(lp);
        lp = e;
    }
    if (lp) { /* Σ_b lp[b, y_b] as a masked sum */
        ml_tensor *mask = ml_zeros(ML_F32, 2, lp->shape);
        if (mask) {
            for (int64_t b = 0; b < B; b++) ml_f32(mask)[b * m->cfg.vocab + ml_i32(targets)[b]] = 1;
            pick = ml_mul(lp, mask);
        }
        ml_release(mask);
    }
    if (pick) obj = ml_sum_all(pick);
    if (obj) st = ml_backward(obj, NULL);
    else if (st == ML_OK) st = run.status ? run.status : ml_last_status();
    ml_set_grad_enabled(old);
    for (int i = 0; i < m->n_params; i++) m->params[i].t->requires_grad = req[i];
    for (int i = 0; i < m->n_sites; i++) {
        if (leaves[i] && st == ML_OK) grads[i] = leaves[i]->grad ? ml_retain(leaves[i]->grad) : ml_zeros_like(leaves[i]);
        ml_release(leaves[i]);
    }
    free(leaves), free(req);
    ml_release(flat), ml_release(sel), ml_release(logits), ml_release(lp), ml_release(idx), ml_release(pick);
    ml_release(obj);
    if (st != ML_OK) {
        ml_release(hid);
        for (int i = 0; i < m->n_sites; i++) ml_release(acts[i]), ml_release(grads[i]), acts[i] = grads[i] = NULL;
        return st;
    }
    if (hidden) *hidden = ml_detach(hid);
    ml_release(hid);
    return ML_OK;
}

/* ------------------------------------------------------------------ patching */

ml_tensor *ml_patch_full(ml_model *m, ml_tensor *tokens, const ml_patch *p) {
    if (p->site < 0 || p->site >= m->n_sites) {
        ml_fail(ML_ERR_ARG, "patch: site index %d out of range", p->site);
        return NULL;
    }
    hook_ud h = {.m = m, .patch = p};
    ml_run run = make_run(&h);
    bool old = ml_set_grad_enabled(false);
    ml_tensor *hid = ml_model_hidden(m, tokens, &run);
    ml_set_grad_enabled(old);
    return hid;
}

/* The entry a patch at `site` resumes from: the site itself when it is one of the six, else the
 * block input of its half (attention_input for mixer.*, mlp_input for mlp.*). */
static int patch_entry(const ml_model *m, int site, bool *internal) {
    int e = ml_entry_index(m->sites[site].name);
    *internal = e < 0;
    if (e >= 0) return e;
    return strncmp(m->sites[site].name, "mlp.", 4) ? ML_ENTRY_ATTENTION_INPUT : ML_ENTRY_MLP_INPUT;
}

void ml_patch_needs(const ml_model *m, int site, bool *want) {
    bool internal;
    int l = m->site_layer[site], e = patch_entry(m, site, &internal);
    want[site] = true;
    want[ml_site_lookup(m, l, ml_entry_names[e])] = true;
    if (e == ML_ENTRY_ATTENTION_INPUT || e == ML_ENTRY_ATTENTION_OUTPUT || e == ML_ENTRY_MLP_INPUT ||
        e == ML_ENTRY_MLP_OUTPUT)
        want[ml_site_lookup(m, l, "block_input")] = true;
    if (e == ML_ENTRY_MLP_INPUT || e == ML_ENTRY_MLP_OUTPUT) want[ml_site_lookup(m, l, "attention_output")] = true;
}

/* Fast patch with an optional map from the rows of the base cache to the patch's examples. */
static ml_tensor *patch_fast(ml_model *m, ml_tensor *const *base, const ml_patch *p, ml_tensor *rows,
                             const int32_t *batch_map, const ml_suffix *sx) {
    if (p->site < 0 || p->site >= m->n_sites) {
        ml_fail(ML_ERR_ARG, "patch: site index %d out of range", p->site);
        return NULL;
    }
    if (m->hooks) { /* the base cache went through them: they would fire twice at the resumed site */
        ml_fail(ML_ERR_ARG, "patch: the fast path cannot run with the model's persistent hooks on; use ml_patch_full");
        return NULL;
    }
    bool internal;
    int l = m->site_layer[p->site], e = patch_entry(m, p->site, &internal);
    const int *entry = m->layers[l].entry_site;
    int s_entry = entry[e], s_in = entry[ML_ENTRY_BLOCK_INPUT], s_ao = entry[ML_ENTRY_ATTENTION_OUTPUT];
    bool need_r = e != ML_ENTRY_BLOCK_INPUT && e != ML_ENTRY_BLOCK_OUTPUT && e != ML_ENTRY_RESID_MID;
    bool need_mid = e == ML_ENTRY_MLP_INPUT || e == ML_ENTRY_MLP_OUTPUT;
    if (s_entry < 0 || !base[s_entry] || (need_r && !base[s_in]) || (need_mid && (s_ao < 0 || !base[s_ao])) ||
        !base[p->site]) {
        char name[96];
        ml_site_fullname(m, p->site, name, sizeof name);
        ml_fail(ML_ERR_ARG, "patch: the base cache lacks the activations a patch at %s resumes from", name);
        return NULL;
    }
    const int32_t *rw = rows ? ml_i32(rows) : NULL;
    ml_tensor *act = internal ? ml_retain(base[s_entry]) : apply_patch(m, p, base[s_entry], batch_map, rw);
    ml_tensor *resid = NULL;
    if (act && need_mid) resid = ml_add(base[s_in], base[s_ao]); /* r after the mixer, the same bits */
    else if (act && need_r) resid = ml_retain(base[s_in]);
    ml_tensor *hid = NULL, *rel = NULL;
    if (act && sx && sx->t > 0 && !internal) { /* rows from t on (sx->rows: the readout rows from t) */
        int64_t B = act->shape[0], L = act->shape[1];
        ml_tensor *a2 = ml_narrow(act, 1, sx->t, L - sx->t), *r2 = resid ? ml_narrow(resid, 1, sx->t, L - sx->t) : NULL;
        ml_release(act), ml_release(resid);
        act = a2 ? ml_contiguous(a2) : NULL, resid = r2 ? ml_contiguous(r2) : NULL;
        ml_release(a2), ml_release(r2);
        rel = ml_from_i32(1, &B, sx->rows);
        if (!rel) ml_release(act), act = NULL;
    }
    if (act && (resid || !need_r)) {
        hook_ud h = {.m = m, .patch = p, .batch_map = batch_map, .rows = rw};
        ml_run run = make_run(&h);
        ml_resume rs = {.layer = l, .entry = e, .act = act, .resid = resid, .rows = rel ? rel : rows};
        bool old = ml_set_grad_enabled(false);
        ml_run slim = {.suffix = sx}; /* the mixers' own rows options (no hooks: not for internal sites) */
        hid = ml_model_hidden_resume(m, &rs, internal ? &run : sx ? &slim : NULL);
        ml_set_grad_enabled(old);
    }
    ml_release(act), ml_release(resid), ml_release(rel);
    return hid;
}

ml_tensor *ml_patch_fast(ml_model *m, ml_tensor *const *base_acts, const ml_patch *p, ml_tensor *rows) {
    return patch_fast(m, base_acts, p, rows, NULL, NULL);
}

ml_tensor *mli_patch_fast_mapped(ml_model *m, ml_tensor *const *base, const ml_patch *p, ml_tensor *rows,
                                 const int32_t *batch_map, const ml_suffix *sx) {
    return patch_fast(m, base, p, rows, batch_map, sx);
}
/* Does unit (ba, pos) of a (possibly gathered: rows_a says which position it kept) differ from
 * unit (bb, pos) of b (full length)? A gathered act that did not keep pos cannot change the
 * readout, so it counts as equal. */
bool mli_unit_differs(const ml_model *m, int site, ml_tensor *a, int64_t ba, ml_tensor *b, int64_t bb, int64_t pos,
                      const int32_t *rows_a) {
    int pd = ml_site_pos_dim(m, site);
    unit_geom ga = geom(a, pd, true), gb = geom(b, pd, true);
    int64_t pa = pos;
    if (ga.len == 1 && gb.len > 1) {
        if (!rows_a || rows_a[ba] != pos) return false;
        pa = 0;
    }
    if (pa >= ga.len || pos >= gb.len) return false;
    return unit_op(a, &ga, ba, pa, b, &gb, bb, pos, false);
}

/* The resume (interchange.c's base runs with readout rows) with the caching hook. */
ml_tensor *mli_resume_cache(ml_model *m, const ml_resume *rs, const bool *want, ml_tensor **acts) {
    hook_ud h = {.m = m, .want = want, .acts = acts};
    ml_run run = make_run(&h);
    return ml_model_hidden_resume(m, rs, &run);
}

/* ------------------------------------------------------------------ ablations */

/* Readout logits (B, V) of hidden states at rows (gathered (B, 1, D) or full (B, L, D)). */
ml_tensor *mli_readout(ml_model *m, ml_tensor *hid, const int32_t *rows) {
    int64_t B = hid->shape[0], L = hid->shape[1], D = m->cfg.d_model;
    ml_tensor *flat = ml_reshape(hid, 2, (int64_t[]){B * L, D}), *sel = NULL, *out = NULL;
    if (!flat) return NULL;
    if (L == 1) sel = ml_retain(flat);
    else {
        ml_tensor *idx = ml_empty(ML_I32, 1, &B);
        if (idx) {
            for (int64_t b = 0; b < B; b++) ml_i32(idx)[b] = (int32_t)(b * L + rows[b]);
            sel = ml_index_select(flat, 0, idx);
        }
        ml_release(idx);
    }
    if (sel) {
        ml_tensor *lg = ml_model_head(m, sel);
        out = lg ? ml_contiguous(lg) : NULL;
        ml_release(lg);
    }
    ml_release(flat), ml_release(sel);
    return out;
}


/* ------------------------------------------------------------------ surgery */

const char *const ml_conv_edit_names[] = {"identity", "zero", "truncate", NULL};

int ml_short_conv_edit(ml_model *m, int layer, ml_conv_edit kind, int keep) {
    if (layer < -1 || layer >= m->cfg.n_layers) {
        ml_fail(ML_ERR_ARG, "short_conv_edit: layer %d out of range [-1, %d)", layer, m->cfg.n_layers);
        return -1;
    }
    if (kind == ML_CONV_TRUNCATE && keep < 0) {
        ml_fail(ML_ERR_ARG, "short_conv_edit: keep expected >= 0, got %d", keep);
        return -1;
    }
    int edited = 0;
    for (int i = 0; i < m->n_params; i++) {
        ml_param *p = &m->params[i];
        if ((layer >= 0 && p->layer != layer) || p->kind != ML_P_CONV_W || p->ndim != 3) continue;
        int64_t C = p->shape[0] * p->shape[1], K = p->shape[2];
        float *w = ml_f32(m->flat) + p->offset;
        for (int64_t c = 0; c < C; c++)
            for (int64_t k = 0; k < K; k++) { /* tap K-1 is the current token (causal padding) */
                float *x = &w[c * K + k];
                if (kind == ML_CONV_IDENTITY) *x = k == K - 1 ? 1.0f : 0.0f;
                else if (kind == ML_CONV_ZERO) *x = 0;
                else if (K - 1 - k >= keep) *x = 0;
            }
        if (kind != ML_CONV_TRUNCATE) { /* the bias next to it */
            char bname[ML_NAME_MAX];
            snprintf(bname, sizeof bname, "%.*sbias", (int)(strlen(p->name) - strlen("weight")), p->name);
            int bi = ml_model_find_param(m, bname);
            if (bi >= 0) memset(ml_f32(m->flat) + m->params[bi].offset, 0, sizeof(float) * (size_t)m->params[bi].numel);
        }
        edited++;
    }
    m->flat->storage->version++;
    return edited;
}

/* ------------------------------------------------------------------ attention analysis */

ml_tensor *ml_mamba_attention(ml_model *m, int layer, ml_tensor *const *acts) {
    int sdt = ml_site_lookup(m, layer, "mixer.dt"), sb = ml_site_lookup(m, layer, "mixer.B");
    int sc = ml_site_lookup(m, layer, "mixer.C");
    char name[ML_NAME_MAX];
    snprintf(name, sizeof name, "backbone.layers.%d.sequence_mixer.A_log", layer);
    int pa = ml_model_find_param(m, name);
    snprintf(name, sizeof name, "backbone.layers.%d.sequence_mixer.D", layer);
    int pd = ml_model_find_param(m, name);
    if (sdt < 0 || sb < 0 || sc < 0 || pa < 0 || pd < 0 || !acts[sdt] || !acts[sb] || !acts[sc]) {
        ml_fail(ML_ERR_ARG, "mamba_attention: layer %d is not a Mamba layer with mixer.dt, mixer.B and mixer.C cached",
                layer);
        return NULL;
    }
    bool old = ml_set_grad_enabled(false);
    ml_tensor *e = ml_unary(ML_EXP, ml_model_p(m, pa)), *A = e ? ml_unary(ML_NEG, e) : NULL, *out = NULL;
    if (A) out = ml_selective_scan_attention(acts[sdt], A, acts[sb], acts[sc], ml_model_p(m, pd));
    ml_release(e), ml_release(A);
    ml_set_grad_enabled(old);
    return out;
}

ml_tensor *ml_patch_run(ml_model *m, ml_tensor *tokens, const ml_patch *p, bool reference) {
    if (reference || m->hooks) return ml_patch_full(m, tokens, p); /* the fast path cannot run hooks */
    bool *want = calloc((size_t)m->n_sites + 1, 1);
    ml_tensor **acts = calloc((size_t)m->n_sites + 1, sizeof *acts), *hid = NULL;
    if (!want || !acts) ml_fail(ML_ERR_MEM, "patch: out of memory");
    else {
        ml_patch_needs(m, p->site, want);
        if (ml_run_cache(m, tokens, want, acts, NULL) == ML_OK) hid = ml_patch_fast(m, acts, p, NULL);
    }
    for (int i = 0; acts && i < m->n_sites; i++) ml_release(acts[i]);
    free(want), free(acts);
    return hid;
}

void mli_mamba_attention_needs(const ml_model *m, int layer, bool *want) {
    static const char *const need[] = {"mixer.dt", "mixer.B", "mixer.C"};
    for (int i = 0; i < 3; i++) {
        int s = ml_site_lookup(m, layer, need[i]);
        if (s >= 0) want[s] = true;
    }
}

ml_tensor *ml_mamba_attention_run(ml_model *m, ml_tensor *tokens, int layer) {
    bool *want = calloc((size_t)m->n_sites + 1, 1);
    ml_tensor **acts = calloc((size_t)m->n_sites + 1, sizeof *acts), *a = NULL;
    if (want) mli_mamba_attention_needs(m, layer, want);
    if (!want || !acts) ml_fail(ML_ERR_MEM, "mamba_attention: out of memory");
    else if (ml_run_cache(m, tokens, want, acts, NULL) == ML_OK) a = ml_mamba_attention(m, layer, acts);
    for (int i = 0; acts && i < m->n_sites; i++) ml_release(acts[i]);
    free(want), free(acts);
    return a;
}
