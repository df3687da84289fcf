/* Checkpoints: the model's config as JSON, and safetensors files holding the parameters under
 * their state-dict names, the AdamW moments and the config plus optimiser hyper-parameters in the
 * metadata (docs/training.md, "Checkpoints"). */
#include "nn/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "io/safetensors.h"

/* ------------------------------------------------------------------ config as JSON */

/* The keys of the config checkpoints have always carried, in their order: they are written first
 * and always, so those files keep their bytes. Options added since (a new mixer's, the optional
 * common ones) follow in table order: a mixer's only for an arch that reads it, an optional one
 * only when not its default. */
static const char *const first_keys[] = {"arch",    "d_model",     "n_layers",  "vocab",   "n_heads",
                                         "max_pos", "pos_emb",     "d_conv",    "d_state", "expand",
                                         "feature_dim", "long_only", "no_conv", "state_mixer", "seed"};
enum { N_FIRST_KEYS = sizeof first_keys / sizeof first_keys[0] };

static bool first_key(const char *name) {
    for (int i = 0; i < N_FIRST_KEYS; i++)
        if (!strcmp(first_keys[i], name)) return true;
    return false;
}

static void set_option(ml_json *o, const ml_model_config *c, const ml_model_option *opt) {
    int64_t v = ml_option_get(c, opt);
    ml_json_set(o, opt->name, opt->type == ML_OPT_STRING ? ml_json_string(ml_option_str(c, opt))
                              : opt->type == ML_OPT_BOOL ? ml_json_bool(v != 0)
                                                         : ml_json_int(v));
}

char *ml_config_to_json(const ml_model_config *c) {
    ml_json *o = ml_json_object();
    if (!o) return NULL;
    for (int i = 0; i < N_FIRST_KEYS; i++) {
        const ml_model_option *opt = ml_model_option_find(first_keys[i]);
        if (opt) set_option(o, c, opt);
    }
    const ml_mixer_type *mixer = ml_mixer_find(c->arch);
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *opt = ml_model_option_at(i);
        if (first_key(opt->name)) continue;
        if (opt->mixer && !(mixer && ml_mixer_reads(mixer, opt))) continue;
        if (opt->optional && (opt->type == ML_OPT_STRING ? !strcmp(ml_option_str(c, opt), opt->str_def)
                                                         : ml_option_get(c, opt) == opt->def))
            continue;
        set_option(o, c, opt);
    }
    char *s = ml_json_write(o, 0, NULL);
    ml_json_free(o);
    return s;
}

/* Missing keys keep their defaults (older checkpoints); every key present must be a known option
 * of the right type and range. */
ml_status ml_config_from_json(const char *text, ml_model_config *c) {
    ml_json *o = ml_json_parse(text, strlen(text), NULL);
    if (!o) return ml_fail_context(ML_ERR_FORMAT, "config");
    ml_status st = ML_OK;
#define BAD(...)                                       \
    do {                                               \
        st = ml_fail(ML_ERR_FORMAT, "config: " __VA_ARGS__); \
        goto done;                                     \
    } while (0)
    if (o->type != ML_JSON_OBJECT) BAD("expected a JSON object");
    const ml_json *arch = ml_json_get(o, "arch");
    if (!arch || arch->type != ML_JSON_STRING) BAD("missing string 'arch'");
    if (arch->len >= sizeof c->arch || strlen(arch->str) != arch->len) BAD("'arch' is not an architecture name");
    ml_model_config_defaults(c, arch->str);
    for (size_t k = 0; k < o->count; k++)
        if (!ml_model_option_find(o->keys[k])) BAD("unknown option '%.40s'", o->keys[k]);
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *opt = ml_model_option_at(i);
        const ml_json *v = ml_json_get(o, opt->name);
        if (!v || !strcmp(opt->name, "arch")) continue;
        bool is_int = v->type == ML_JSON_NUMBER && v->is_int;
        switch (opt->type) {
        case ML_OPT_INT:
            if (!is_int || v->integer < opt->lo || v->integer > opt->hi)
                BAD("'%s' expected an integer in [%lld, %lld]", opt->name, (long long)opt->lo, (long long)opt->hi);
            ml_option_set(c, opt, v->integer);
            break;
        case ML_OPT_BOOL:
            if (v->type != ML_JSON_BOOL) BAD("'%s' expected a boolean", opt->name);
            ml_option_set(c, opt, v->boolean);
            break;
        case ML_OPT_U64: /* written as the int64 of the same bits */
            if (!is_int) BAD("'%s' expected an integer", opt->name);
            ml_option_set(c, opt, v->integer);
            break;
        case ML_OPT_STRING:
            if (v->type != ML_JSON_STRING || strlen(v->str) != v->len || !ml_option_set_str(c, opt, v->str))
                BAD("'%s' expected a string of at most %zu bytes", opt->name, opt->size - 1);
            break;
        }
    }
#undef BAD
done:
    ml_json_free(o);
    return st;
}

/* ------------------------------------------------------------------ checkpoints */

static ml_tensor *torch_key_tensor(const ml_model *m, const ml_torch_key *k) {
    return k->alias_of >= 0 ? m->params[k->alias_of].t : k->buffer;
}

static const int64_t *torch_key_shape(const ml_model *m, const ml_torch_key *k, int *ndim) {
    if (k->alias_of >= 0) {
        *ndim = m->params[k->alias_of].ndim;
        return m->params[k->alias_of].shape;
    }
    *ndim = k->buffer->ndim;
    return k->buffer->shape;
}

ml_status ml_checkpoint_save(const char *path, const ml_model *m, const ml_adamw *opt, bool torch, int n_meta,
                             const char *const *keys, const char *const *values) {
    if (torch && opt)
        return ml_fail(ML_ERR_ARG, "save: %s: a PyTorch state dict (torch = true) holds no optimiser state; save the "
                                   "optimiser in a checkpoint of its own", path);
    int n_torch = torch ? m->n_torch_keys : 0;
    int n = m->n_params + n_torch + (opt ? 2 : 0);
    const char **names = malloc(sizeof *names * (size_t)n);
    ml_tensor **ts = malloc(sizeof *ts * (size_t)n);
    int nm = n_meta + 7;
    const char **mk = malloc(sizeof *mk * (size_t)nm), **mv = malloc(sizeof *mv * (size_t)nm);
    char *cfg = ml_config_to_json(&m->cfg);
    char num[6][48];
    ml_status st;
    if (!names || !ts || !mk || !mv || !cfg) {
        st = ml_fail(ML_ERR_MEM, "save: out of memory");
        goto done;
    }
    int t = 0;
    for (int i = 0; i < m->n_params; i++, t++) names[t] = m->params[i].name, ts[t] = m->params[i].t;
    for (int i = 0; i < n_torch; i++, t++) names[t] = m->torch_keys[i].name, ts[t] = torch_key_tensor(m, &m->torch_keys[i]);
    int k = 0;
    mk[k] = "mechlab.config", mv[k++] = cfg;
    mk[k] = "mechlab.version", mv[k++] = MECHLAB_VERSION;
    if (opt) {
        names[t] = "optimizer.exp_avg", ts[t++] = opt->m;
        names[t] = "optimizer.exp_avg_sq", ts[t++] = opt->v;
        snprintf(num[0], sizeof num[0], "%lld", (long long)opt->step);
        snprintf(num[1], sizeof num[1], "%.17g", opt->beta1);
        snprintf(num[2], sizeof num[2], "%.17g", opt->beta2);
        snprintf(num[3], sizeof num[3], "%.17g", opt->eps);
        snprintf(num[4], sizeof num[4], "%.17g", opt->weight_decay);
        mk[k] = "optimizer.step", mv[k++] = num[0];
        mk[k] = "optimizer.beta1", mv[k++] = num[1];
        mk[k] = "optimizer.beta2", mv[k++] = num[2];
        mk[k] = "optimizer.eps", mv[k++] = num[3];
        mk[k] = "optimizer.weight_decay", mv[k++] = num[4];
    }
    for (int i = 0; i < n_meta; i++) mk[k] = keys[i], mv[k++] = values[i];
    st = ml_safetensors_write(path, n, names, ts, k, mk, mv);
done:
    free(names), free(ts), free(mk), free(mv), free(cfg);
    return st;
}

/* ---- loading: the config, then every check against the plan, then the allocation */

static bool option_differs(const ml_model_config *a, const ml_model_config *b, const ml_model_option *o) {
    if (o->type == ML_OPT_STRING) return strcmp(ml_option_str(a, o), ml_option_str(b, o)) != 0;
    return ml_option_get(a, o) != ml_option_get(b, o);
}

static void option_text(const ml_model_config *c, const ml_model_option *o, char *buf, size_t n) {
    if (o->type == ML_OPT_STRING) snprintf(buf, n, "'%s'", ml_option_str(c, o));
    else if (o->type == ML_OPT_BOOL) snprintf(buf, n, "%s", ml_option_get(c, o) ? "true" : "false");
    else snprintf(buf, n, "%lld", (long long)ml_option_get(c, o));
}

/* The config from the metadata (checked against the options given) or from the options. */
static ml_status file_config(const ml_safetensors *f, const char *path, const ml_load_options *given,
                             ml_model_config *cfg) {
    const char *text = ml_safetensors_meta(f, "mechlab.config");
    if (!text) {
        if (!given)
            return ml_fail(ML_ERR_FORMAT,
                           "load: %s: no 'mechlab.config' in the metadata; a file without it (a PyTorch state dict) "
                           "needs the model options: mech.load(path, {arch = ..., d_model = ..., ...})",
                           path);
        *cfg = given->cfg;
        return ML_OK;
    }
    if (ml_config_from_json(text, cfg)) {
        char msg[600];
        snprintf(msg, sizeof msg, "%s", ml_last_error());
        return ml_fail(ML_ERR_FORMAT, "load: %s: metadata 'mechlab.config': %s", path, msg);
    }
    if (!given) return ML_OK;
    /* An option an alias sets (mamba_without_conv: no_conv) counts as given. */
    ml_model_config want = given->cfg, have = *cfg;
    ml_mixer_resolve_alias(&want);
    ml_mixer_resolve_alias(&have);
    for (int i = 0; i < ml_model_option_count() && i < ML_LOAD_MAX_OPTIONS; i++) {
        const ml_model_option *o = ml_model_option_at(i);
        bool set = given->given[i] || option_differs(&given->cfg, &want, o);
        if (set && option_differs(&want, &have, o)) {
            char a[64], b[64];
            option_text(&want, o, a, sizeof a);
            option_text(&have, o, b, sizeof b);
            return ml_fail(ML_ERR_FORMAT, "load: %s: option '%s' is %s but the file's config has %s", path, o->name, a, b);
        }
    }
    return ML_OK;
}

/* `name` in the file is float32 of the given shape; `what` says which kind of tensor it is. */
static ml_status check_tensor(const ml_safetensors *f, const char *path, const char *what, const char *name,
                              int ndim, const int64_t *shape) {
    ml_dtype dt;
    int nd;
    int64_t sh[ML_MAX_DIMS];
    if (ml_safetensors_info(f, name, &dt, &nd, sh)) return ml_fail(ML_ERR_FORMAT, "load: %s: %s '%s' is missing", path, what, name);
    bool same = dt == ML_F32 && nd == ndim;
    for (int d = 0; same && d < nd; d++) same = sh[d] == shape[d];
    if (same) return ML_OK;
    char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
    return ml_fail(ML_ERR_FORMAT, "load: %s: %s '%s' has %s %s, expected float32 %s from the config", path, what, name,
                   ml_dtype_name(dt), ml_shape_str(s1, nd, sh), ml_shape_str(s2, ndim, shape));
}

static const char *const opt_tensors[] = {"optimizer.exp_avg", "optimizer.exp_avg_sq"};
static const char *const opt_meta[] = {"optimizer.step", "optimizer.beta1", "optimizer.beta2", "optimizer.eps",
                                       "optimizer.weight_decay"};
enum { N_OPT_TENSORS = 2, N_OPT_META = 5 };

/* Every tensor of the file is a parameter, a torch key or an optimiser moment, with the shape the
 * plan gives it; the optimiser state is all there or absent. *moments: it is there. */
static ml_status check_tensors(const ml_safetensors *f, const char *path, const ml_model *m, bool *moments) {
    int known = 0;
    for (int i = 0; i < m->n_params; i++, known++)
        if (check_tensor(f, path, "parameter", m->params[i].name, m->params[i].ndim, m->params[i].shape))
            return ml_last_status();
    for (int i = 0; i < m->n_torch_keys; i++) {
        const ml_torch_key *k = &m->torch_keys[i];
        if (ml_safetensors_find(f, k->name) < 0) continue; /* optional: PyTorch's savers may drop them */
        int nd;
        const int64_t *shape = torch_key_shape(m, k, &nd);
        if (check_tensor(f, path, k->alias_of >= 0 ? "alias" : "buffer", k->name, nd, shape)) return ml_last_status();
        known++;
    }
    int have_t = 0, have_m = 0;
    for (int i = 0; i < N_OPT_TENSORS; i++) have_t += ml_safetensors_find(f, opt_tensors[i]) >= 0;
    for (int i = 0; i < N_OPT_META; i++) have_m += ml_safetensors_meta(f, opt_meta[i]) != NULL;
    *moments = have_t + have_m > 0;
    if (*moments) {
        for (int i = 0; i < N_OPT_TENSORS; i++)
            if (ml_safetensors_find(f, opt_tensors[i]) < 0)
                return ml_fail(ML_ERR_FORMAT, "load: %s: partial optimiser state: tensor '%s' is missing", path,
                               opt_tensors[i]);
        for (int i = 0; i < N_OPT_META; i++)
            if (!ml_safetensors_meta(f, opt_meta[i]))
                return ml_fail(ML_ERR_FORMAT, "load: %s: partial optimiser state: metadata '%s' is missing", path,
                               opt_meta[i]);
        for (int i = 0; i < N_OPT_TENSORS; i++)
            if (check_tensor(f, path, "optimiser state", opt_tensors[i], 1, &m->n_total)) return ml_last_status();
        known += N_OPT_TENSORS;
    }
    if (ml_safetensors_count(f) == known) return ML_OK;
    for (int i = 0; i < ml_safetensors_count(f); i++) {
        const char *nm = ml_safetensors_name(f, i);
        bool ok = ml_model_find_param(m, nm) >= 0 || !strcmp(nm, opt_tensors[0]) || !strcmp(nm, opt_tensors[1]);
        for (int k = 0; !ok && k < m->n_torch_keys; k++) ok = !strcmp(nm, m->torch_keys[k].name);
        if (!ok) return ml_fail(ML_ERR_FORMAT, "load: %s: unexpected tensor '%s' for a %s model", path, nm, m->cfg.arch);
    }
    return ML_OK;
}

/* The optimiser's metadata: finite numbers, and a step that is an integer in [0, 2^53). The
 * hyper-parameters' ranges are ml_adamw_init's. */
static ml_status optimizer_meta(const ml_safetensors *f, const char *path, double v[N_OPT_META]) {
    for (int i = 0; i < N_OPT_META; i++) {
        const char *s = ml_safetensors_meta(f, opt_meta[i]);
        char *end;
        if (i == 0) {
            size_t n = strspn(s, "0123456789");
            bool ok = n > 0 && n <= 16 && !s[n];
            v[0] = ok ? (double)strtoll(s, NULL, 10) : -1;
            if (!ok || v[0] >= 9007199254740992.0)
                return ml_fail(ML_ERR_FORMAT, "load: %s: metadata '%s' expected an integer in [0, 2^53), got '%.40s'",
                               path, opt_meta[i], s);
            continue;
        }
        v[i] = strtod(s, &end);
        if (end == s || *end || !isfinite(v[i]))
            return ml_fail(ML_ERR_FORMAT, "load: %s: metadata '%s' expected a finite number, got '%.40s'", path,
                           opt_meta[i], s);
    }
    return ML_OK;
}

/* A torch key of the file equals what it aliases (bit for bit: in PyTorch they are one tensor), or
 * the buffer mechlab computes up to float32 rounding: PyTorch's linspace gives different last
 * bits on different builds (CPU and CUDA), and mechlab keeps its own values. */
static const double buffer_rel_tol = 1e-6; /* a few float32 ulps */
static ml_status check_torch_key(const ml_safetensors *f, const char *path, const ml_model *m, const ml_torch_key *k) {
    ml_tensor *want = torch_key_tensor(m, k), *got = ml_safetensors_get(f, k->name);
    if (!got) return ml_last_status();
    const float *a = ml_f32(want), *b = ml_f32(got);
    int64_t n = ml_numel(got), i = 0;
    for (; i < n; i++) {
        bool same = k->alias_of >= 0 ? memcmp(&a[i], &b[i], sizeof *a) == 0
                                     : fabs((double)a[i] - (double)b[i]) <= buffer_rel_tol * fabs((double)a[i]);
        if (!same) break;
    }
    ml_status st = ML_OK;
    char what[ML_NAME_MAX + 2] = "what mechlab computes (to 1e-6)";
    if (k->alias_of >= 0) snprintf(what, sizeof what, "'%s'", m->params[k->alias_of].name);
    if (i < n)
        st = ml_fail(ML_ERR_FORMAT, "load: %s: %s '%s' differs from %s at element %lld (%.9g, expected %.9g)", path,
                     k->alias_of >= 0 ? "alias" : "buffer", k->name, what, (long long)i, (double)b[i], (double)a[i]);
    ml_release(got);
    return st;
}

ml_model *ml_checkpoint_load(const char *path, const ml_load_options *options, ml_adamw *opt, bool *has_opt,
                             ml_safetensors **meta) {
    if (has_opt) *has_opt = false;
    if (meta) *meta = NULL;
    ml_safetensors *f = ml_safetensors_open(path);
    if (!f) return NULL;
    ml_model_config cfg;
    ml_model *m = NULL;
    ml_adamw o = {0};
    bool moments = false;
    double hyper[N_OPT_META];
    if (file_config(f, path, options, &cfg)) goto fail;
    if (!(m = ml_model_plan(&cfg))) {
        ml_fail_context(ml_last_status(), "load");
        goto fail;
    }
    if (check_tensors(f, path, m, &moments) || (moments && optimizer_meta(f, path, hyper))) goto fail;
    /* Every parameter is in the file at its planned shape: the model is no larger than the file. */
    if (ml_model_alloc(m)) goto fail;
    for (int i = 0; i < m->n_params; i++)
        if (ml_safetensors_read_into(f, m->params[i].name, m->params[i].t)) goto fail;
    for (int i = 0; i < m->n_torch_keys; i++)
        if (ml_safetensors_find(f, m->torch_keys[i].name) >= 0 && check_torch_key(f, path, m, &m->torch_keys[i]))
            goto fail;
    if (moments) {
        if (ml_adamw_init(&o, opt ? m->n_total : 0, hyper[1], hyper[2], hyper[3], hyper[4])) {
            ml_fail_context(ml_last_status(), "load: optimiser metadata");
            goto fail;
        }
        o.step = (int64_t)hyper[0];
        if (opt && (ml_safetensors_read_into(f, opt_tensors[0], o.m) || ml_safetensors_read_into(f, opt_tensors[1], o.v)))
            goto fail;
        if (opt) {
            *opt = o;
            if (has_opt) *has_opt = true;
        } else {
            ml_adamw_free(&o);
        }
    }
    if (meta) *meta = f;
    else ml_safetensors_close(f);
    return m;
fail:
    ml_adamw_free(&o);
    ml_model_free(m);
    ml_safetensors_close(f);
    return NULL;
}

bool ml_checkpoint_config(const char *path, ml_model_config *cfg) {
    ml_safetensors *f = ml_safetensors_open(path);
    const char *text = f ? ml_safetensors_meta(f, "mechlab.config") : NULL;
    bool have = text && ml_config_from_json(text, cfg) == ML_OK;
    ml_safetensors_close(f);
    return have;
}
