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

char *ml_config_to_json(const ml_model_config *c) {
    ml_json *o = ml_json_object();
    if (!o) return NULL;
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *opt = ml_model_option_at(i);
        int64_t v = ml_option_get(c, opt);
        ml_json_set(o, opt->name, opt->type == ML_OPT_STRING ? ml_json_string(ml_option_str(c, opt))
                                  : opt->type == ML_OPT_BOOL ? ml_json_bool(v != 0)
                                                             : ml_json_int(v));
    }
    char *s = ml_json_write(o, 0, NULL);
    ml_json_free(o);
    return s;
}

/* Missing keys keep their defaults (older checkpoints); integers beyond [-1, 2^24] are refused
 * here and ranges are checked when the model is built. */
ml_status ml_config_from_json(const char *text, ml_model_config *c) {
    ml_json *o = ml_json_parse(text, strlen(text), NULL);
    if (!o) return ml_fail_context(ML_ERR_FORMAT, "config");
    ml_status st = ML_OK;
    if (o->type != ML_JSON_OBJECT) {
        st = ml_fail(ML_ERR_FORMAT, "config: expected a JSON object");
        goto done;
    }
    const ml_json *arch = ml_json_get(o, "arch");
    if (!arch || arch->type != ML_JSON_STRING) {
        st = ml_fail(ML_ERR_FORMAT, "config: missing string 'arch'");
        goto done;
    }
    ml_model_config_defaults(c, arch->str);
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *opt = ml_model_option_at(i);
        const ml_json *v = ml_json_get(o, opt->name);
        if (!v || !strcmp(opt->name, "arch")) continue;
        switch (opt->type) {
        case ML_OPT_INT:
            if (v->type != ML_JSON_NUMBER || !v->is_int || v->integer < -1 || v->integer > (1 << 24)) {
                st = ml_fail(ML_ERR_FORMAT, "config: '%s' expected an integer", opt->name);
                goto done;
            }
            ml_option_set(c, opt, v->integer);
            break;
        case ML_OPT_BOOL:
            if (v->type != ML_JSON_BOOL) {
                st = ml_fail(ML_ERR_FORMAT, "config: '%s' expected a boolean", opt->name);
                goto done;
            }
            ml_option_set(c, opt, v->boolean);
            break;
        case ML_OPT_U64:
            if (v->type == ML_JSON_NUMBER && v->is_int) ml_option_set(c, opt, v->integer);
            break;
        case ML_OPT_STRING:
            if (v->type == ML_JSON_STRING) snprintf((char *)c + opt->offset, opt->size, "%s", v->str);
            break;
        }
    }
done:
    ml_json_free(o);
    return st;
}

/* ------------------------------------------------------------------ checkpoints */

ml_status ml_checkpoint_save(const char *path, const ml_model *m, const ml_adamw *opt, int n_meta,
                             const char *const *keys, const char *const *values) {
    int n = m->n_params + (opt ? 2 : 0);
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
    for (int i = 0; i < m->n_params; i++) names[i] = m->params[i].name, ts[i] = m->params[i].t;
    int k = 0;
    mk[k] = "mechlab.config", mv[k++] = cfg;
    mk[k] = "mechlab.version", mv[k++] = MECHLAB_VERSION;
    if (opt) {
        names[m->n_params] = "optimizer.exp_avg", ts[m->n_params] = opt->m;
        names[m->n_params + 1] = "optimizer.exp_avg_sq", ts[m->n_params + 1] = opt->v;
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

static ml_status meta_double(const ml_safetensors *f, const char *key, double *out) {
    const char *s = ml_safetensors_meta(f, key);
    char *end;
    if (!s) return ml_fail(ML_ERR_FORMAT, "load: metadata '%s' is missing", key);
    *out = strtod(s, &end);
    if (end == s || *end) return ml_fail(ML_ERR_FORMAT, "load: metadata '%s' is not a number: '%s'", key, s);
    return ML_OK;
}

ml_model *ml_checkpoint_load(const char *path, ml_adamw *opt, bool *has_opt, ml_safetensors **meta) {
    if (has_opt) *has_opt = false;
    if (meta) *meta = NULL;
    ml_safetensors *f = ml_safetensors_open(path);
    if (!f) return NULL;
    const char *cfg_text = ml_safetensors_meta(f, "mechlab.config");
    ml_model_config cfg;
    ml_model *m = NULL;
    if (!cfg_text) {
        ml_fail(ML_ERR_FORMAT, "load: %s: no 'mechlab.config' in the metadata (not a mechlab checkpoint)", path);
        goto fail;
    }
    if (ml_config_from_json(cfg_text, &cfg)) {
        ml_fail_context(ML_ERR_FORMAT, "load");
        goto fail;
    }
    m = ml_model_new(&cfg);
    if (!m) goto fail;
    /* Check every name, dtype and shape first, then copy. */
    for (int i = 0; i < m->n_params; i++) {
        ml_param *p = &m->params[i];
        ml_dtype dt;
        int nd;
        int64_t shape[ML_MAX_DIMS];
        if (ml_safetensors_info(f, p->name, &dt, &nd, shape)) {
            ml_fail(ML_ERR_FORMAT, "load: %s: parameter '%s' is missing", path, p->name);
            goto fail;
        }
        bool same = dt == ML_F32 && nd == p->ndim;
        for (int d = 0; same && d < nd; d++) same = shape[d] == p->shape[d];
        if (!same) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            ml_fail(ML_ERR_FORMAT, "load: %s: parameter '%s' has %s %s, expected float32 %s", path, p->name,
                    ml_dtype_name(dt), ml_shape_str(s1, nd, shape), ml_shape_str(s2, p->ndim, p->shape));
            goto fail;
        }
    }
    int known = m->n_params;
    bool moments = ml_safetensors_find(f, "optimizer.exp_avg") >= 0;
    known += moments ? 2 : 0;
    if (ml_safetensors_count(f) != known) {
        for (int i = 0; i < ml_safetensors_count(f); i++) {
            const char *nm = ml_safetensors_name(f, i);
            if (ml_model_find_param(m, nm) < 0 && strcmp(nm, "optimizer.exp_avg") && strcmp(nm, "optimizer.exp_avg_sq")) {
                ml_fail(ML_ERR_FORMAT, "load: %s: unexpected tensor '%s' for a %s model", path, nm, cfg.arch);
                goto fail;
            }
        }
    }
    ml_adamw o = {0};
    if (moments && opt) {
        double b1, b2, eps, wd, step;
        if (meta_double(f, "optimizer.beta1", &b1) || meta_double(f, "optimizer.beta2", &b2) ||
            meta_double(f, "optimizer.eps", &eps) || meta_double(f, "optimizer.weight_decay", &wd) ||
            meta_double(f, "optimizer.step", &step))
            goto fail;
        if (ml_adamw_init(&o, m->n_total, b1, b2, eps, wd)) goto fail;
        o.step = (int64_t)step;
        if (ml_safetensors_read_into(f, "optimizer.exp_avg", o.m) ||
            ml_safetensors_read_into(f, "optimizer.exp_avg_sq", o.v)) {
            ml_adamw_free(&o);
            goto fail;
        }
    }
    for (int i = 0; i < m->n_params; i++)
        if (ml_safetensors_read_into(f, m->params[i].name, m->params[i].t)) {
            ml_adamw_free(&o);
            goto fail;
        }
    if (moments && opt) {
        *opt = o;
        if (has_opt) *has_opt = true;
    }
    if (meta) *meta = f;
    else ml_safetensors_close(f);
    return m;
fail:
    ml_model_free(m);
    ml_safetensors_close(f);
    return NULL;
}
