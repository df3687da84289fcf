/* The model options (ml_model_config's fields) as one table: defaults, ranges, the Lua keys of
 * mech.model and the JSON config of checkpoints all come from it. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "nn/nn.h"

#define FIELD(f) offsetof(ml_model_config, f), sizeof(((ml_model_config *)0)->f)

/* In the order of the JSON config that checkpoints have always carried. */
static const ml_model_option options[] = {
    {"arch", ML_OPT_STRING, FIELD(arch), .str_def = "attention", .common = true, .key = true},
    {"d_model", ML_OPT_INT, FIELD(d_model), 64, 1, 8192, .common = true, .key = true},
    {"n_layers", ML_OPT_INT, FIELD(n_layers), 2, 1, ML_MAX_LAYERS, .common = true, .key = true},
    {"vocab", ML_OPT_INT, FIELD(vocab), 8196, 2, 1 << 24, .common = true, .key = true},
    {"n_heads", ML_OPT_INT, FIELD(n_heads), 1, 1, 1024, .key = true},
    {"max_pos", ML_OPT_INT, FIELD(max_pos), 1024, 1, 1 << 20, .common = true, .key = true},
    {"pos_emb", ML_OPT_BOOL, FIELD(pos_emb), 1, 0, 1, .common = true, .key = true},
    {"d_conv", ML_OPT_INT, FIELD(d_conv), -1, -1, 64, .key = true},
    {"d_state", ML_OPT_INT, FIELD(d_state), 16, 1, 4096, .key = true},
    {"expand", ML_OPT_INT, FIELD(expand), 2, 1, 16, .key = true},
    {"feature_dim", ML_OPT_INT, FIELD(feature_dim), 8, 1, 64, .key = true},
    {"long_only", ML_OPT_BOOL, FIELD(long_only), 0, 0, 1, .key = true},
    {"no_conv", ML_OPT_BOOL, FIELD(no_conv), 0, 0, 1, .common = true}, /* set by mamba_without_conv */
    {"state_mixer", ML_OPT_STRING, FIELD(state_mixer), .str_def = "mlp", .common = true, .key = true},
    {"seed", ML_OPT_U64, FIELD(seed), 42, 0, INT64_MAX, .common = true, .key = true},
    /* newer than the format: written only when set */
    {"tie_embeddings", ML_OPT_BOOL, FIELD(tie_embeddings), 1, 0, 1, .common = true, .key = true, .optional = true},
    /* a runtime-registered mixer's module and options (mech.model's `mixer` sets them) */
    {"mixer_module", ML_OPT_STRING, FIELD(mixer_module), .str_def = "", .common = true, .optional = true},
    {"mixer_options", ML_OPT_STRING, FIELD(mixer_options), .str_def = "", .common = true, .optional = true},
};
enum { N_OPTIONS = sizeof options / sizeof options[0] };

int ml_model_option_count(void) { return N_OPTIONS; }

const ml_model_option *ml_model_option_at(int i) { return i >= 0 && i < N_OPTIONS ? &options[i] : NULL; }

const ml_model_option *ml_model_option_find(const char *key) {
    for (int i = 0; i < N_OPTIONS; i++)
        if (!strcmp(options[i].name, key)) return &options[i];
    return NULL;
}

int64_t ml_option_get(const ml_model_config *c, const ml_model_option *o) {
    const char *p = (const char *)c + o->offset;
    if (o->type == ML_OPT_INT) return *(const int *)p;
    if (o->type == ML_OPT_BOOL) return *(const bool *)p;
    if (o->type == ML_OPT_U64) return (int64_t) * (const uint64_t *)p;
    return 0;
}

void ml_option_set(ml_model_config *c, const ml_model_option *o, int64_t v) {
    char *p = (char *)c + o->offset;
    if (o->type == ML_OPT_INT) *(int *)p = (int)v;
    else if (o->type == ML_OPT_BOOL) *(bool *)p = v != 0;
    else if (o->type == ML_OPT_U64) *(uint64_t *)p = (uint64_t)v;
}

bool ml_option_set_str(ml_model_config *c, const ml_model_option *o, const char *s) {
    if (strlen(s) >= o->size) return false;
    memcpy((char *)c + o->offset, s, strlen(s) + 1);
    return true;
}

const char *ml_option_str(const ml_model_config *c, const ml_model_option *o) { return (const char *)c + o->offset; }

void ml_model_config_defaults(ml_model_config *cfg, const char *arch) {
    memset(cfg, 0, sizeof *cfg);
    for (int i = 0; i < N_OPTIONS; i++)
        if (options[i].type == ML_OPT_STRING) ml_option_set_str(cfg, &options[i], options[i].str_def);
        else ml_option_set(cfg, &options[i], options[i].def);
    if (arch) snprintf(cfg->arch, sizeof cfg->arch, "%s", arch);
}

bool ml_mixer_reads(const ml_mixer_type *t, const ml_model_option *o) {
    if (o->common) return true;
    for (int i = 0; i < ML_MIXER_MAX_OPTIONS && t->options[i]; i++)
        if (!strcmp(t->options[i], o->name)) return true;
    return false;
}

ml_status ml_model_config_check_ranges(const ml_model_config *c) {
    for (int i = 0; i < N_OPTIONS; i++) {
        const ml_model_option *o = &options[i];
        if (o->type != ML_OPT_INT) continue;
        int64_t v = ml_option_get(c, o);
        if (v < o->lo || v > o->hi)
            return ml_fail(ML_ERR_ARG, "model: option '%s' expected an integer in [%d, %d], got %d", o->name, (int)o->lo,
                           (int)o->hi, (int)v);
    }
    return ML_OK;
}
