#include "nn/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

/* ------------------------------------------------------------------ config */

static ml_status check_config(const ml_model_config *c) {
    if (!ml_mixer_find(c->arch)) {
        char list[256] = "";
        for (int i = 0; i < ml_mixer_count(); i++) {
            strncat(list, ml_mixer_at(i)->name, sizeof list - strlen(list) - 3);
            if (i + 1 < ml_mixer_count()) strncat(list, ", ", sizeof list - strlen(list) - 1);
        }
        if (c->mixer_module[0])
            return ml_fail(ML_ERR_ARG, "model: mixer '%s' is not registered (load its module '%s' first)", c->arch,
                           c->mixer_module);
        return ml_fail(ML_ERR_ARG, "model: option 'arch': expected one of %s or a registered mixer, got '%s'", list,
                       c->arch);
    }
    if (ml_model_config_check_ranges(c)) return ml_last_status();
    int n_heads = (int)ml_mixer_opt(c, "n_heads");
    if (c->d_model % n_heads)
        return ml_fail(ML_ERR_ARG, "model: option 'n_heads' (%d) must divide 'd_model' (%d)", n_heads, c->d_model);
    if (strcmp(c->state_mixer, "mlp") && strcmp(c->state_mixer, "glu") && strcmp(c->state_mixer, "none"))
        return ml_fail(ML_ERR_ARG, "model: option 'state_mixer': expected 'mlp', 'glu' or 'none', got '%s'",
                       c->state_mixer);
    if (strcmp(c->precision, "fp32") && strcmp(c->precision, "bf16"))
        return ml_fail(ML_ERR_ARG, "model: option 'precision': expected 'fp32' or 'bf16', got '%s'", c->precision);
    return ML_OK;
}

/* ------------------------------------------------------------------ precision */

static _Thread_local bool fp32_forced;

bool ml_model_force_fp32(bool on) {
    bool old = fp32_forced;
    fp32_forced = on;
    return old;
}

ml_precision ml_model_precision(const ml_model *m) {
    return !fp32_forced && !strcmp(m->cfg.precision, "bf16") ? ML_PRECISION_BF16 : ML_PRECISION_FP32;
}

ml_status ml_model_precision_enter(const ml_model *m, const char *fn, ml_precision *saved) {
    ml_precision p = ml_model_precision(m);
    if (p == ML_PRECISION_BF16 && !mlk_have_bf16())
        return ml_fail(ML_ERR_STATE, "%s: the model's option precision = 'bf16' needs AVX512_BF16, but %s", fn,
                       MLK_BF16_MISSING);
    *saved = ml_set_linear_precision(p);
    return ML_OK;
}

/* ------------------------------------------------------------------ parameters & sites */

/* The state-dict name of `rel` declared for `layer` (-1: backbone level). */
static void full_name(const ml_model *m, int layer, const char *rel, char out[ML_NAME_MAX]) {
    if (layer < 0) snprintf(out, ML_NAME_MAX, "%s", rel);
    else if (m->building_layer == layer)
        /* a mixer declaring: its names live under sequence_mixer (Hybrid adds "mixer.") */
        snprintf(out, ML_NAME_MAX, "backbone.layers.%d.sequence_mixer.%s%s", layer,
                 ml_mixer_find(m->cfg.arch)->even_layers ? "mixer." : "", rel);
    else snprintf(out, ML_NAME_MAX, "backbone.layers.%d.%s", layer, rel);
}

static ml_status add_torch_key(ml_model *m, int layer, const char *rel_name, int alias_of, ml_tensor *buffer) {
    if (m->n_torch_keys == m->cap_torch_keys) {
        int cap = m->cap_torch_keys ? 2 * m->cap_torch_keys : 8;
        ml_torch_key *k = realloc(m->torch_keys, sizeof *k * (size_t)cap);
        if (!k) {
            ml_release(buffer);
            return ml_fail(ML_ERR_MEM, "model: out of memory");
        }
        m->torch_keys = k;
        m->cap_torch_keys = cap;
    }
    ml_torch_key *k = &m->torch_keys[m->n_torch_keys++];
    full_name(m, layer, rel_name, k->name);
    k->alias_of = alias_of;
    k->buffer = buffer;
    return ML_OK;
}

ml_status ml_model_add_alias(ml_model *m, int layer, const char *rel_name, int param) {
    if (param < 0 || param >= m->n_params) return ml_fail(ML_ERR_ARG, "model: alias '%s' of no parameter", rel_name);
    return add_torch_key(m, layer, rel_name, param, NULL);
}

ml_status ml_model_add_buffer(ml_model *m, int layer, const char *rel_name, ml_tensor *values) {
    if (!values) return ml_last_status() ? ml_last_status() : ml_fail(ML_ERR_MEM, "model: out of memory");
    return add_torch_key(m, layer, rel_name, -1, values);
}

int ml_model_add_param(ml_model *m, int layer, const char *rel_name, int ndim, const int64_t *shape, ml_param_kind kind,
                       int64_t fan) {
    if (m->n_params == m->cap_params) {
        int cap = m->cap_params ? 2 * m->cap_params : 64;
        ml_param *p = realloc(m->params, sizeof *p * (size_t)cap);
        if (!p) {
            ml_fail(ML_ERR_MEM, "model: out of memory");
            return -1;
        }
        m->params = p;
        m->cap_params = cap;
    }
    ml_param *p = &m->params[m->n_params];
    memset(p, 0, sizeof *p);
    full_name(m, layer, rel_name, p->name);
    p->ndim = ndim;
    p->numel = 1;
    for (int d = 0; d < ndim; d++) p->shape[d] = shape[d], p->numel *= shape[d];
    p->offset = m->n_total;
    m->n_total += p->numel;
    p->kind = kind;
    p->fan = fan;
    p->layer = layer;
    return m->n_params++;
}

int ml_model_add_site(ml_model *m, int layer, const char *name, int ndim, const int64_t *shape) {
    if (m->n_sites == m->cap_sites) {
        int cap = m->cap_sites ? 2 * m->cap_sites : 64;
        ml_site_decl *s = realloc(m->sites, sizeof *s * (size_t)cap);
        int *sl = realloc(m->site_layer, sizeof *sl * (size_t)cap);
        if (s) m->sites = s;
        if (sl) m->site_layer = sl;
        if (!s || !sl) {
            m->build_status = ml_fail(ML_ERR_MEM, "model: out of memory");
            return -1;
        }
        m->cap_sites = cap;
    }
    ml_site_decl *s = &m->sites[m->n_sites];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->ndim = ndim;
    for (int d = 0; d < ndim; d++) s->shape[d] = shape[d];
    m->site_layer[m->n_sites] = layer;
    return m->n_sites++;
}

int ml_model_find_param(const ml_model *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) return i;
    return -1;
}

int ml_model_resolve_param(const ml_model *m, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s", name);
    int i = ml_model_find_param(m, name);
    if (i >= 0) return i;
    static const char *const tl[][2] = {{"embed.W_E", "backbone.embeddings.word_embeddings.weight"},
                                        {"pos_embed.W_pos", "backbone.embeddings.position_embeddings.weight"},
                                        {"ln_final.w", "backbone.ln_f.weight"},
                                        {"ln_final.b", "backbone.ln_f.bias"}};
    for (size_t k = 0; k < sizeof tl / sizeof tl[0]; k++)
        if (!strcmp(name, tl[k][0])) return ml_model_find_param(m, tl[k][1]);
    int layer;
    const char *rest = ml_site_split(name, &layer);
    if (!rest || layer >= m->cfg.n_layers) return -1;
    if (!strncmp(rest, "mixer.", 6)) {
        snprintf(buf, n, "backbone.layers.%d.sequence_mixer.mixer.%s", layer, rest + 6);
        if ((i = ml_model_find_param(m, buf)) >= 0) return i;
        snprintf(buf, n, "backbone.layers.%d.sequence_mixer.%s", layer, rest + 6);
    } else if (!strncmp(rest, "mlp.", 4)) {
        snprintf(buf, n, "backbone.layers.%d.state_mixer.%s", layer, rest + 4);
    } else {
        snprintf(buf, n, "backbone.layers.%d.%s", layer, rest);
    }
    return ml_model_find_param(m, buf); /* buf: the state-dict spelling, for a did-you-mean */
}

int64_t ml_model_count(const ml_model *m) { return m->n_total; }

/* ------------------------------------------------------------------ initialisation (docs/mixers.md, "Initialisation") */

static bool name_has(const char *name, const char *s) { return strstr(name, s) != NULL; }

/* "out_proj.weight" relative to the mixer module (the Mamba regime's exact-name rule). */
static bool mixer_rel_is(const ml_param *p, const char *rel) {
    const char *s = strstr(p->name, "sequence_mixer.");
    return s && !strcmp(s + strlen("sequence_mixer."), rel);
}

void ml_model_init(ml_model *m) {
    ml_rng rng;
    ml_rng_init(&rng, m->cfg.seed, ML_STREAM_INIT);
    bool mamba = m->layers[0].mixer->mamba_block;
    double nl = m->cfg.n_layers;
    for (int i = 0; i < m->n_params; i++) {
        ml_param *p = &m->params[i];
        float *x = ml_f32(m->flat) + p->offset;
        double bound = p->fan > 0 ? 1.0 / sqrt((double)p->fan) : 0;
        switch (p->kind) {
        case ML_P_LINEAR_W:
            if (!mamba) {
                double std = (name_has(p->name, "out_proj.weight") || name_has(p->name, "fc2.weight"))
                                 ? 0.02 / sqrt(2.0 * nl)
                                 : 0.02;
                for (int64_t k = 0; k < p->numel; k++) x[k] = (float)(std * ml_rng_normal(&rng));
            } else {
                double b = mixer_rel_is(p, "out_proj.weight") ? bound / sqrt(nl) : bound;
                for (int64_t k = 0; k < p->numel; k++) x[k] = (float)(b * (2.0 * ml_rng_double(&rng) - 1.0));
            }
            break;
        case ML_P_LINEAR_B:
            for (int64_t k = 0; k < p->numel; k++) x[k] = 0; /* both regimes zero Linear biases */
            break;
        case ML_P_EMBEDDING:
            for (int64_t k = 0; k < p->numel; k++) x[k] = (float)(0.02 * ml_rng_normal(&rng));
            break;
        case ML_P_CONV_W:
        case ML_P_CONV_B:
            for (int64_t k = 0; k < p->numel; k++) x[k] = (float)(bound * (2.0 * ml_rng_double(&rng) - 1.0));
            break;
        case ML_P_ONES:
            for (int64_t k = 0; k < p->numel; k++) x[k] = 1;
            break;
        case ML_P_ZEROS:
        case ML_P_CUSTOM:
            for (int64_t k = 0; k < p->numel; k++) x[k] = 0;
            break;
        }
    }
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->layers[l].mixer->init) m->layers[l].mixer->init(m, l, m->layers[l].state, &rng);
    m->flat->storage->version++;
}

/* ------------------------------------------------------------------ construction */

static ml_status build_block(ml_model *m, int l) {
    const ml_model_config *c = &m->cfg;
    int64_t D = c->d_model;
    ml_layer *L = &m->layers[l];
    L->mixer = ml_mixer_for_layer(c, l);
    L->param_first = m->n_params;
    L->site_first = m->n_sites;
    for (int e = 0; e < ML_ENTRY_COUNT; e++) L->entry_site[e] = -1;
    L->mlp_site[0] = L->mlp_site[1] = -1;
    int64_t BLD[3] = {-1, -2, D};
#define ENTRY(e)                                                                                \
    if ((L->entry_site[e] = ml_model_add_site(m, l, ml_entry_names[e], 3, BLD)) < 0) return ml_last_status();
    ENTRY(ML_ENTRY_BLOCK_INPUT)
    ENTRY(ML_ENTRY_ATTENTION_INPUT)
    if (L->mixer->mamba_block) {
        m->p_norm1_w[l] = ml_model_add_param(m, l, "norm.weight", 1, &D, ML_P_ONES, 0);
        m->p_norm1_b[l] = -1;
    } else {
        m->p_norm1_w[l] = ml_model_add_param(m, l, "norm1.weight", 1, &D, ML_P_ONES, 0);
        m->p_norm1_b[l] = ml_model_add_param(m, l, "norm1.bias", 1, &D, ML_P_ZEROS, 0);
    }
    m->building_layer = l;
    ml_status st = L->mixer->build(m, l, &L->state);
    m->building_layer = -1;
    if (st || m->build_status) return st ? st : m->build_status; /* a site the mixer could not declare */
    ENTRY(ML_ENTRY_ATTENTION_OUTPUT)
    m->p_norm2_w[l] = m->p_norm2_b[l] = m->p_fc1_w[l] = m->p_fc3_w[l] = -1;
    if (!L->mixer->mamba_block) {
        m->p_norm2_w[l] = ml_model_add_param(m, l, "norm2.weight", 1, &D, ML_P_ONES, 0);
        m->p_norm2_b[l] = ml_model_add_param(m, l, "norm2.bias", 1, &D, ML_P_ZEROS, 0);
        bool mixes = strcmp(c->state_mixer, "none") != 0;
        /* hook_resid_mid only where there is an MLP, as in TransformerLens (attn-only: none) */
        if (mixes) ENTRY(ML_ENTRY_RESID_MID)
        if (mixes) ENTRY(ML_ENTRY_MLP_INPUT)
        if (ml_build_state_mixer(m, l)) return ml_last_status();
        if (mixes) ENTRY(ML_ENTRY_MLP_OUTPUT)
    }
    ENTRY(ML_ENTRY_BLOCK_OUTPUT)
#undef ENTRY
    L->param_end = m->n_params;
    L->site_end = m->n_sites;
    return ML_OK;
}

ml_model *ml_model_plan(const ml_model_config *config) {
    ml_model_config resolved = *config;
    ml_mixer_resolve_alias(&resolved);
    const ml_model_config *cfg = &resolved;
    if (check_config(cfg)) return NULL;
    ml_model *m = calloc(1, sizeof *m);
    if (!m) {
        ml_fail(ML_ERR_MEM, "model: out of memory");
        return NULL;
    }
    m->cfg = *cfg;
    m->building_layer = -1;
    int64_t D = cfg->d_model;
    m->p_wte = ml_model_add_param(m, -1, "backbone.embeddings.word_embeddings.weight", 2, (int64_t[]){cfg->vocab, D},
                                  ML_P_EMBEDDING, 0);
    m->p_wpe = cfg->pos_emb ? ml_model_add_param(m, -1, "backbone.embeddings.position_embeddings.weight", 2,
                                                 (int64_t[]){cfg->max_pos, D}, ML_P_EMBEDDING, 0)
                            : -1;
    for (int l = 0; l < cfg->n_layers; l++)
        if (build_block(m, l)) goto fail;
    m->p_lnf_w = ml_model_add_param(m, -1, "backbone.ln_f.weight", 1, &D, ML_P_ONES, 0);
    m->p_lnf_b = ml_model_add_param(m, -1, "backbone.ln_f.bias", 1, &D, ML_P_ZEROS, 0);
    /* an untied head is an nn.Linear(D, V) without bias */
    m->p_head = cfg->tie_embeddings ? -1
                                    : ml_model_add_param(m, -1, "lm_head.weight", 2, (int64_t[]){cfg->vocab, D},
                                                         ML_P_LINEAR_W, D);
    for (int i = 0; i < m->n_params; i++)
        if (m->params[i].numel < 0) goto fail;
    if (cfg->tie_embeddings && ml_model_add_alias(m, -1, "lm_head.weight", m->p_wte)) goto fail; /* the tied head */
    return m;
fail:
    if (ml_last_status() == ML_OK) ml_fail(ML_ERR_MEM, "model: out of memory");
    ml_model_free(m);
    return NULL;
}

ml_status ml_model_alloc(ml_model *m) {
    m->flat = ml_zeros(ML_F32, 1, &m->n_total);
    m->grad_flat = ml_zeros(ML_F32, 1, &m->n_total);
    if (!m->flat || !m->grad_flat) goto fail;
    for (int i = 0; i < m->n_params; i++) {
        ml_param *p = &m->params[i];
        ml_tensor *v = ml_narrow(m->flat, 0, p->offset, p->numel);
        ml_tensor *g = ml_narrow(m->grad_flat, 0, p->offset, p->numel);
        p->t = v ? ml_view(v, p->ndim, p->shape) : NULL;
        ml_tensor *gv = g ? ml_view(g, p->ndim, p->shape) : NULL;
        ml_release(v), ml_release(g);
        if (!p->t || !gv) {
            ml_release(gv);
            goto fail;
        }
        p->t->requires_grad = true;
        p->t->grad = gv;
    }
    ml_model_init(m);
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->layers[l].mixer->attach && m->layers[l].mixer->attach(m, l, m->layers[l].state)) return ml_last_status();
    return ML_OK;
fail:
    return ml_last_status() != ML_OK ? ml_last_status() : ml_fail(ML_ERR_MEM, "model: out of memory");
}

ml_model *ml_model_new(const ml_model_config *config) {
    /* a new bf16 model fails here on a CPU without the instruction; a checkpoint (plan + alloc)
     * still loads there, for what runs in fp32 (the interchange evaluation) */
    if (!strcmp(config->precision, "bf16") && !mlk_have_bf16()) {
        ml_fail(ML_ERR_ARG, "model: option 'precision' is 'bf16', but %s", MLK_BF16_MISSING);
        return NULL;
    }
    ml_model *m = ml_model_plan(config);
    if (m && ml_model_alloc(m)) {
        ml_model_free(m);
        return NULL;
    }
    return m;
}

void ml_model_free(ml_model *m) {
    if (!m) return;
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->layers[l].mixer && m->layers[l].mixer->free_state) m->layers[l].mixer->free_state(m->layers[l].state);
    for (int i = 0; i < m->n_params; i++) ml_release(m->params[i].t);
    for (int i = 0; i < m->n_torch_keys; i++) ml_release(m->torch_keys[i].buffer);
    free(m->torch_keys);
    ml_release(m->flat);
    ml_release(m->grad_flat);
    free(m->params);
    free(m->sites);
    free(m->site_layer);
    free(m);
}

int ml_model_first_nonfinite(const ml_model *m) {
    const float *flat = ml_f32(m->flat);
    for (int i = 0; i < m->n_params; i++) {
        const float *p = flat + m->params[i].offset;
        for (int64_t j = 0; j < m->params[i].numel; j++)
            if (!isfinite(p[j])) return i;
    }
    return -1;
}

void ml_model_zero_grad(ml_model *m) {
    memset(ml_f32(m->grad_flat), 0, sizeof(float) * (size_t)m->n_total);
    m->grad_flat->storage->version++;
    for (int i = 0; i < m->n_params; i++) { /* re-link a .grad that a user cleared */
        ml_param *p = &m->params[i];
        if (p->t->grad && p->t->grad->storage == m->grad_flat->storage) continue;
        ml_release(p->t->grad);
        ml_tensor *g = ml_narrow(m->grad_flat, 0, p->offset, p->numel);
        p->t->grad = g ? ml_view(g, p->ndim, p->shape) : NULL;
        ml_release(g);
    }
}

/* ------------------------------------------------------------------ hooks */

/* One run's hook at a site: a new reference to act or its replacement, or NULL with an error. */
static ml_tensor *site_hook(const ml_model *m, ml_run *run, int site, ml_tensor *act) {
    if (!run || !run->hook) return ml_retain(act);
    ml_status err = ML_OK;
    ml_tensor *rep = run->hook(run->ud, site, act, &err);
    if (err) {
        ml_release(rep);
        run->status = err;
        return NULL;
    }
    if (!rep) return ml_retain(act);
    if (!ml_same_shape(rep, act) || rep->dtype != act->dtype) {
        char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR], name[ML_NAME_MAX];
        ml_site_fullname(m, site, name, sizeof name);
        ml_fail(ML_ERR_SHAPE, "hook at %s returned a %s tensor of shape %s, expected %s %s", name,
                ml_dtype_name(rep->dtype), ml_shape_str(s1, rep->ndim, rep->shape), ml_dtype_name(act->dtype),
                ml_shape_str(s2, act->ndim, act->shape));
        ml_release(rep);
        run->status = ML_ERR_SHAPE;
        return NULL;
    }
    return rep;
}

ml_tensor *ml_site(const ml_model *m, ml_run *run, int site, ml_tensor *act) {
    if (!act) return NULL;
    if (!m->hooks) return site_hook(m, run, site, act);
    ml_tensor *cur = site_hook(m, m->hooks, site, act);
    if (!cur) {
        if (run) run->status = m->hooks->status; /* the run failed: its caller reads run->status */
        return NULL;
    }
    ml_tensor *out = site_hook(m, run, site, cur);
    ml_release(cur);
    return out;
}

static bool run_wants(ml_run *run, int site) {
    if (!run || !run->hook) return false;
    return run->wants ? run->wants(run->ud, site) : true;
}

bool ml_site_wanted(const ml_model *m, ml_run *run, int site) {
    return site >= 0 && (run_wants(m->hooks, site) || run_wants(run, site));
}

/* ------------------------------------------------------------------ forward */

const char *const ml_entry_names[ML_ENTRY_COUNT] = {"block_input", "attention_input", "attention_output",
                                                      "mlp_input", "mlp_output", "block_output", "resid_mid"};

int ml_entry_index(const char *name) {
    for (int i = 0; i < ML_ENTRY_COUNT; i++)
        if (!strcmp(name, ml_entry_names[i])) return i;
    return -1;
}

/* Row rows[b] of every sequence: x (B, L, W) -> (B, 1, W). A tensor that is one position long
 * already is kept (it is its own row when L = 1, or was gathered before the entry). */
static ml_tensor *gather_rows(ml_tensor *x, ml_tensor *rows) {
    if (x->shape[1] == 1) return ml_retain(x);
    int64_t B = x->shape[0], L = x->shape[1], W = x->shape[2];
    ml_tensor *flat = ml_reshape(x, 2, (int64_t[]){B * L, W}), *idx = ml_empty(ML_I32, 1, &B), *sel = NULL, *out = NULL;
    if (flat && idx) {
        for (int64_t b = 0; b < B; b++) ml_i32(idx)[b] = (int32_t)(b * L + ml_i32(rows)[b]);
        sel = ml_index_select(flat, 0, idx);
    }
    if (sel) out = ml_view(sel, 3, (int64_t[]){B, 1, W});
    ml_release(flat), ml_release(idx), ml_release(sel);
    return out;
}

bool ml_model_hooked(const ml_model *m, const ml_run *run) {
    return (run && run->hook) || (m->hooks && m->hooks->hook);
}

/* Block l from one of its six paper sites (`entry`, which fires first): act is that site's value,
 * resid the residual it is added to (r entering the block for attention_input/attention_output,
 * r after the mixer for mlp_input/mlp_output). block_input is the ordinary block. With rows (last
 * block only), every sequence keeps only row rows[b] once the mixer has run: the rest of the block
 * is position-wise, so those rows are all a readout needs. resid_mid (the residual between the
 * mixer's add and norm2, where there is an MLP) is an entry too: its value is the residual. */
static ml_tensor *block_resume(ml_model *m, int l, int entry, ml_tensor *act, ml_tensor *resid, ml_tensor *rows,
                               ml_run *run) {
    ml_layer *L = &m->layers[l];
    ml_tensor *r = NULL, *a = NULL, *y = NULL, *c = NULL, *z = NULL, *sum = NULL;
    bool mlp = !L->mixer->mamba_block && m->p_fc1_w[l] >= 0;
    if ((entry == ML_ENTRY_MLP_INPUT || entry == ML_ENTRY_MLP_OUTPUT || entry == ML_ENTRY_RESID_MID) && !mlp) {
        ml_fail(ML_ERR_ARG, "resume: block %d has no site %s", l, ml_entry_names[entry]);
        return NULL;
    }
    bool after_gather = rows && entry >= ML_ENTRY_MLP_INPUT;
    bool is_resid = entry == ML_ENTRY_BLOCK_INPUT || entry == ML_ENTRY_BLOCK_OUTPUT || entry == ML_ENTRY_RESID_MID;
    ml_tensor *resid_used = resid && !is_resid ? resid : NULL;
    if (!is_resid && !resid_used) {
        ml_fail(ML_ERR_ARG, "resume: entry %s of block %d needs the residual", ml_entry_names[entry], l);
        return NULL;
    }
    ml_tensor *e = after_gather ? gather_rows(act, rows) : ml_retain(act);
    if (!e) return NULL;
    if (resid_used) r = after_gather ? gather_rows(resid_used, rows) : ml_retain(resid_used);
    if (resid_used && !r) {
        ml_release(e);
        return NULL;
    }
    switch (entry) {
    case ML_ENTRY_BLOCK_INPUT: r = e; goto block_input;
    case ML_ENTRY_ATTENTION_INPUT: a = e; goto attention_input;
    case ML_ENTRY_ATTENTION_OUTPUT: y = e; goto attention_output;
    case ML_ENTRY_MLP_INPUT: c = e; goto mlp_input;
    case ML_ENTRY_MLP_OUTPUT: z = e; goto mlp_output;
    case ML_ENTRY_RESID_MID: r = e; goto resid_mid;
    default: r = e; goto block_output;
    }
block_input:
    if (!ml_at_site(m, run, L->entry_site[ML_ENTRY_BLOCK_INPUT], &r)) return NULL;
    a = L->mixer->mamba_block ? ml_rms_norm(r, ml_model_p(m, m->p_norm1_w[l]), 1e-5)
                              : ml_layer_norm(r, ml_model_p(m, m->p_norm1_w[l]), ml_model_p(m, m->p_norm1_b[l]), 1e-5);
    if (!a) goto fail;
attention_input:
    if (!ml_at_site(m, run, L->entry_site[ML_ENTRY_ATTENTION_INPUT], &a)) goto fail;
    y = L->mixer->forward(m, l, L->state, a, run);
    if (!y) goto fail;
attention_output:
    if (!ml_at_site(m, run, L->entry_site[ML_ENTRY_ATTENTION_OUTPUT], &y)) goto fail;
    if (rows) { /* the readout rows from here on (elementwise ops: the same bits per row) */
        ml_tensor *rg = gather_rows(r, rows), *yg = rg ? gather_rows(y, rows) : NULL;
        ml_release(r), ml_release(y);
        r = rg, y = yg;
        if (!r || !y) goto fail;
    }
    if (!L->mixer->mamba_block && !ml_model_hooked(m, run)) {
        /* no hook can see or replace the residual between the add and norm2: one pass for both */
        c = ml_add_layer_norm(r, y, ml_model_p(m, m->p_norm2_w[l]), ml_model_p(m, m->p_norm2_b[l]), 1e-5, &sum);
        ml_release(r);
        r = sum;
        if (!c) goto fail;
        goto normed;
    }
    sum = ml_add(r, y);
    ml_release(r);
    r = sum;
    if (!r) goto fail;
    if (L->mixer->mamba_block) goto block_output;
resid_mid:
    if (mlp && !ml_at_site(m, run, L->entry_site[ML_ENTRY_RESID_MID], &r)) goto fail;
    c = ml_layer_norm(r, ml_model_p(m, m->p_norm2_w[l]), ml_model_p(m, m->p_norm2_b[l]), 1e-5);
    if (!c) goto fail;
normed:
    if (!mlp) {
        z = ml_retain(c); /* state mixer None: the branch adds LN2(r) (docs/mixers.md, "State mixers") */
        goto add_z;
    }
mlp_input:
    if (!ml_at_site(m, run, L->entry_site[ML_ENTRY_MLP_INPUT], &c)) goto fail;
    z = ml_state_mixer_forward(m, l, c, run);
    if (!z) goto fail;
mlp_output:
    if (!ml_at_site(m, run, L->entry_site[ML_ENTRY_MLP_OUTPUT], &z)) goto fail;
add_z:
    sum = ml_add(r, z);
    ml_release(r);
    r = sum;
    if (!r) goto fail;
block_output:
    if (!ml_at_site(m, run, L->entry_site[ML_ENTRY_BLOCK_OUTPUT], &r)) goto fail;
    ml_release(a), ml_release(y), ml_release(c), ml_release(z);
    return r;
fail:
    ml_release(r), ml_release(a), ml_release(y), ml_release(c), ml_release(z);
    return NULL;
}

/* The residual stream's rows t.. of tokens (B, L): each token's row plus position t + i's. */
static ml_tensor *embed_from(ml_model *m, ml_tensor *tokens, int64_t t) {
    const ml_model_config *c = &m->cfg;
    int64_t L = tokens->shape[1];
    if (c->pos_emb && t + L > c->max_pos) {
        ml_fail(ML_ERR_SHAPE, "forward: sequence length %lld exceeds the position table (%d)", (long long)(t + L),
                c->max_pos);
        return NULL;
    }
    ml_tensor *r = ml_embedding(ml_model_p(m, m->p_wte), tokens);
    if (r && c->pos_emb) {
        ml_tensor *pos = ml_narrow(ml_model_p(m, m->p_wpe), 0, t, L);
        ml_tensor *s = pos ? ml_add(r, pos) : NULL;
        ml_release(pos);
        ml_release(r);
        r = s;
    }
    return r;
}

ml_tensor *ml_model_embed(ml_model *m, ml_tensor *tokens) {
    if (tokens->dtype != ML_I32 || tokens->ndim != 2) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "forward: argument 1 expected an int32 tensor of shape [B,L], got %s %s",
                ml_dtype_name(tokens->dtype), ml_shape_str(s, tokens->ndim, tokens->shape));
        return NULL;
    }
    return embed_from(m, tokens, 0);
}

static ml_tensor *hidden_resume(ml_model *m, const ml_resume *rs, ml_run *run);

ml_tensor *ml_model_hidden_resume(ml_model *m, const ml_resume *rs, ml_run *run) {
    ml_precision saved;
    if (ml_model_precision_enter(m, "forward", &saved)) return NULL;
    ml_tensor *h = hidden_resume(m, rs, run);
    ml_model_precision_leave(saved);
    return h;
}

static ml_tensor *hidden_resume(ml_model *m, const ml_resume *rs, ml_run *run) {
    const ml_model_config *c = &m->cfg;
    int last = c->n_layers - 1;
    if (rs->layer < 0 || rs->layer > last || rs->entry < 0 || rs->entry >= ML_ENTRY_COUNT || !rs->act) {
        ml_fail(ML_ERR_ARG, "resume: expected a layer in [0, %d], an entry site and its value, got layer %d", last,
                rs->layer);
        return NULL;
    }
    int64_t B = rs->act->shape[0];
    if (rs->act->ndim != 3 || rs->act->shape[2] != c->d_model ||
        (rs->rows && (rs->rows->dtype != ML_I32 || rs->rows->ndim != 1 || rs->rows->shape[0] != B ||
                      !ml_is_contiguous(rs->rows)))) {
        ml_fail(ML_ERR_SHAPE, "resume: expected an entry value (B, L, %d) and int32 rows (B)", c->d_model);
        return NULL;
    }
    if (rs->rows)
        for (int64_t b = 0; b < B; b++) {
            int32_t t = ml_i32(rs->rows)[b];
            if (t < 0 || (rs->act->shape[1] > 1 && t >= rs->act->shape[1])) {
                ml_fail(ML_ERR_ARG, "resume: readout row %d of sequence %lld is outside [0, %lld)", t, (long long)b,
                        (long long)rs->act->shape[1]);
                return NULL;
            }
        }
    ml_tensor *r = block_resume(m, rs->layer, rs->entry, rs->act, rs->resid, rs->layer == last ? rs->rows : NULL, run);
    for (int l = rs->layer + 1; r && l <= last; l++) {
        ml_tensor *next = block_resume(m, l, ML_ENTRY_BLOCK_INPUT, r, NULL, l == last ? rs->rows : NULL, run);
        ml_release(r);
        r = next;
    }
    if (!r) return NULL;
    ml_tensor *h = ml_model_final_norm(m, r);
    ml_release(r);
    return h;
}

ml_tensor *ml_model_hidden(ml_model *m, ml_tensor *tokens, ml_run *run) {
    ml_tensor *r = ml_model_embed(m, tokens);
    if (!r) return NULL;
    ml_resume rs = {.layer = 0, .entry = ML_ENTRY_BLOCK_INPUT, .act = r};
    ml_tensor *h = ml_model_hidden_resume(m, &rs, run);
    ml_release(r);
    return h;
}

bool ml_model_can_suffix(const ml_model *m) {
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (!m->layers[l].mixer->suffix_needs) return false;
    return true;
}

void ml_model_suffix_needs(const ml_model *m, bool *want) {
    for (int l = 0; l < m->cfg.n_layers; l++)
        if (m->layers[l].mixer->suffix_needs) m->layers[l].mixer->suffix_needs(m, l, m->layers[l].state, want);
}

ml_tensor *ml_model_hidden_suffix(ml_model *m, ml_tensor *tokens, const ml_suffix *sx, ml_tensor *rows, ml_run *run) {
    if (!ml_model_can_suffix(m)) {
        ml_fail(ML_ERR_ARG, "forward from row t: a mixer of this model has none");
        return NULL;
    }
    if (tokens->dtype != ML_I32 || tokens->ndim != 2 || sx->t < 0 || !sx->pre || !sx->docs) {
        ml_fail(ML_ERR_ARG, "forward from row t: expected int32 tokens (B, L), t >= 0, a cache and its sequences");
        return NULL;
    }
    ml_tensor *r = embed_from(m, tokens, sx->t);
    if (!r) return NULL;
    ml_run own = {0}, *rr = run ? run : &own;
    const ml_suffix *old = rr->suffix;
    rr->suffix = sx;
    ml_resume rs = {.layer = 0, .entry = ML_ENTRY_BLOCK_INPUT, .act = r, .rows = rows};
    ml_tensor *h = ml_model_hidden_resume(m, &rs, rr);
    rr->suffix = old;
    ml_release(r);
    return h;
}

ml_tensor *ml_model_mixer_forward(ml_model *m, int layer, ml_tensor *x, ml_run *run) {
    if (layer < 0 || layer >= m->cfg.n_layers) {
        ml_fail(ML_ERR_ARG, "mixer_forward: argument 2 expected a layer in [0, %d], got %d", m->cfg.n_layers - 1, layer);
        return NULL;
    }
    if (x->dtype != ML_F32 || x->ndim != 3 || x->shape[2] != m->cfg.d_model || x->shape[0] < 1 || x->shape[1] < 1) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "mixer_forward: argument 3 expected a float32 tensor of shape [B,L,%d], got %s %s",
                m->cfg.d_model, ml_dtype_name(x->dtype), ml_shape_str(s, x->ndim, x->shape));
        return NULL;
    }
    ml_layer *L = &m->layers[layer];
    ml_precision saved;
    if (ml_model_precision_enter(m, "mixer_forward", &saved)) return NULL;
    ml_tensor *xc = ml_contiguous(x), *y = xc ? L->mixer->forward(m, layer, L->state, xc, run) : NULL;
    ml_release(xc);
    ml_model_precision_leave(saved);
    return y;
}

ml_tensor *ml_model_head(ml_model *m, ml_tensor *h) {
    ml_precision saved;
    if (ml_model_precision_enter(m, "head", &saved)) return NULL;
    ml_tensor *y = ml_linear(h, ml_model_p(m, m->p_head >= 0 ? m->p_head : m->p_wte), NULL);
    ml_model_precision_leave(saved);
    return y;
}

static const char *const param_kind_names[] = {"linear_weight", "linear_bias", "embedding", "conv_weight",
                                               "conv_bias",     "ones",        "zeros",     "custom"};
_Static_assert(sizeof param_kind_names / sizeof *param_kind_names == ML_P_CUSTOM + 1, "one name per kind");

const char *ml_param_kind_name(ml_param_kind k) {
    return (unsigned)k <= ML_P_CUSTOM ? param_kind_names[k] : "unknown";
}

int ml_param_kind_of(const char *name) {
    for (int k = 0; k < ML_P_CUSTOM; k++)
        if (!strcmp(param_kind_names[k], name)) return k;
    return -1;
}

ml_tensor *ml_model_final_norm(ml_model *m, ml_tensor *r) {
    return ml_layer_norm(r, ml_model_p(m, m->p_lnf_w), ml_model_p(m, m->p_lnf_b), 1e-5);
}

ml_tensor *ml_model_unembed(ml_model *m, ml_tensor *x) {
    if (x->dtype != ML_F32 || x->ndim < 2 || x->ndim > 3 || x->shape[x->ndim - 1] != m->cfg.d_model) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "unembed: argument 1 expected a float32 residual of shape (B, L, %d) or (L, %d), got %s %s",
                m->cfg.d_model, m->cfg.d_model, ml_dtype_name(x->dtype), ml_shape_str(s, x->ndim, x->shape));
        return NULL;
    }
    ml_tensor *h = ml_model_final_norm(m, x);
    ml_tensor *logits = h ? ml_model_head(m, h) : NULL;
    ml_release(h);
    return logits;
}

ml_tensor *ml_model_loss(ml_model *m, ml_tensor *tokens, ml_tensor *targets, ml_run *run, ml_tensor **rows_logits,
                         ml_tensor **rows_index) {
    return ml_model_loss_stats(m, tokens, targets, run, rows_logits, rows_index, NULL);
}

ml_tensor *ml_model_loss_stats(ml_model *m, ml_tensor *tokens, ml_tensor *targets, ml_run *run,
                               ml_tensor **rows_logits, ml_tensor **rows_index, ml_row_stats *stats) {
    if (rows_logits) *rows_logits = NULL;
    if (rows_index) *rows_index = NULL;
    if (targets->dtype != ML_I32 || !ml_same_shape(tokens, targets)) {
        char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "loss: argument 2 (targets) is %s %s, expected int32 of the tokens' shape %s",
                ml_dtype_name(targets->dtype), ml_shape_str(s1, targets->ndim, targets->shape),
                ml_shape_str(s2, tokens->ndim, tokens->shape));
        return NULL;
    }
    ml_tensor *tg = ml_contiguous(targets);
    int64_t n = ml_numel(tg), N = 0;
    for (int64_t i = 0; i < n; i++) N += ml_i32(tg)[i] != -100;
    ml_tensor *idx = ml_empty(ML_I32, 1, &N), *sel = ml_empty(ML_I32, 1, &N);
    if (!tg || !idx || !sel) {
        ml_release(tg), ml_release(idx), ml_release(sel);
        return NULL;
    }
    for (int64_t i = 0, k = 0; i < n; i++)
        if (ml_i32(tg)[i] != -100) ml_i32(idx)[k] = (int32_t)i, ml_i32(sel)[k++] = ml_i32(tg)[i];
    ml_tensor *h = ml_model_hidden(m, tokens, run), *flat = NULL, *rows = NULL, *logits = NULL, *loss = NULL;
    if (h) flat = ml_reshape(h, 2, (int64_t[]){n, m->cfg.d_model});
    if (flat) rows = ml_index_select(flat, 0, idx);
    if (rows) logits = ml_model_head(m, rows);
    float *prob = stats ? malloc(sizeof(float) * (size_t)(N ? N : 1)) : NULL;
    int32_t *best = stats ? malloc(sizeof(int32_t) * (size_t)(N ? N : 1)) : NULL;
    if (logits && (!stats || (prob && best))) loss = ml_cross_entropy_stats(logits, sel, prob, best);
    if (loss && stats) {
        *stats = (ml_row_stats){.n = N};
        for (int64_t r = 0; r < N; r++) stats->correct += best[r] == ml_i32(sel)[r], stats->prob_sum += prob[r];
    }
    free(prob), free(best);
    if (loss && rows_logits) *rows_logits = ml_retain(logits);
    if (loss && rows_index) *rows_index = ml_retain(idx);
    ml_release(h), ml_release(flat), ml_release(rows), ml_release(logits);
    ml_release(tg), ml_release(idx), ml_release(sel);
    return loss;
}

/* ------------------------------------------------------------------ declared by name */

int ml_model_add_param_named(ml_model *m, int layer, const char *rel_name, int ndim, const int64_t *shape,
                             const char *init, int64_t fan) {
    int kind = init ? ml_param_kind_of(init) : (int)ML_P_CUSTOM;
    if (kind < 0) {
        ml_fail(ML_ERR_ARG, "parameter '%s' has an unknown init '%s'", rel_name, init);
        return -1;
    }
    return ml_model_add_param(m, layer, rel_name, ndim, shape, (ml_param_kind)kind, fan);
}

void ml_param_fill_random(ml_model *m, int param, bool uniform, double a, double b, ml_rng *rng) {
    const ml_param *p = &m->params[param];
    float *x = ml_f32(m->flat) + p->offset;
    for (int64_t k = 0; k < p->numel; k++)
        x[k] = (float)(uniform ? a + (b - a) * ml_rng_double(rng) : a * ml_rng_normal(rng));
}

ml_status ml_model_check_tokens(const ml_model *m, const ml_tensor *tokens) {
    if (tokens->dtype != ML_I32) return ml_fail(ML_ERR_DTYPE, "token ids expected int32, got %s", ml_dtype_name(tokens->dtype));
    for (int64_t i = 0, n = ml_numel(tokens); i < n; i++) {
        int32_t v = (int32_t)ml_get_flat(tokens, i);
        if (v < 0 || v >= m->cfg.vocab)
            return ml_fail(ML_ERR_INDEX, "token id %d out of range for vocabulary size %d", (int)v, m->cfg.vocab);
    }
    return ML_OK;
}
