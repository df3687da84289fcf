/* The model options as one table: defaults, ranges, the Lua keys of mech.model and the JSON config
 * of checkpoints all come from it. The common options (ml_model_config's fields) are listed here;
 * each mixer declares its own in its descriptor, and the table appends them from the registry. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"

#define FIELD(f) offsetof(ml_model_config, f), sizeof(((ml_model_config *)0)->f)

static const ml_model_option common[] = {
    {"arch", ML_OPT_STRING, FIELD(arch), .str_def = "attention", .common = true, .key = true,
     .doc = "the sequence mixer or one of its paper aliases"},
    {"d_model", ML_OPT_INT, FIELD(d_model), 64, 1, 8192, .common = true, .key = true, .doc = "model width D"},
    {"n_layers", ML_OPT_INT, FIELD(n_layers), 2, 1, ML_MAX_LAYERS, .common = true, .key = true, .doc = "blocks"},
    {"vocab", ML_OPT_INT, FIELD(vocab), 8196, 2, 1 << 24, .common = true, .key = true, .doc = "vocabulary size V"},
    {"max_pos", ML_OPT_INT, FIELD(max_pos), 1024, 1, 1 << 20, .common = true, .key = true,
     .doc = "rows of the learned position table"},
    {"pos_emb", ML_OPT_BOOL, FIELD(pos_emb), 1, 0, 1, .common = true, .key = true,
     .doc = "learned absolute positions (false: NoPE)"},
    {"state_mixer", ML_OPT_STRING, FIELD(state_mixer), .str_def = "mlp", .common = true, .key = true,
     .doc = "mlp, glu or none (TransformerBlock only)"},
    {"seed", ML_OPT_U64, FIELD(seed), 42, 0, INT64_MAX, .common = true, .key = true, .doc = "initialisation seed"},
    /* newer than the format: written only when set */
    {"tie_embeddings", ML_OPT_BOOL, FIELD(tie_embeddings), 1, 0, 1, .common = true, .key = true, .optional = true,
     .doc = "the head is the embedding (false: its own lm_head.weight)"},
    /* a runtime-registered mixer's module and options (mech.model's `mixer` sets them) */
    {"mixer_module", ML_OPT_STRING, FIELD(mixer_module), .str_def = "", .common = true, .optional = true,
     .doc = "the module that registers a runtime mixer"},
    {"mixer_options", ML_OPT_STRING, FIELD(mixer_options), .str_def = "", .common = true, .optional = true,
     .doc = "a runtime mixer's options as JSON"},
    /* fp32 is not written: fp32 checkpoints and run ids keep their bytes */
    {"precision", ML_OPT_STRING, FIELD(precision), .str_def = "fp32", .common = true, .key = true, .optional = true,
     .doc = "fp32, or bf16: the linear layers' products in bf16 with fp32 sums (AVX512_BF16)"},
};
enum { N_COMMON = sizeof common / sizeof common[0], N_MAX = N_COMMON + ML_MIXER_OPTION_SLOTS };

/* The common options, then every built-in mixer's own in registry order, each name once (its
 * slot). Built on first use from the const registry; the flag keeps a second thread waiting. */
static ml_model_option options[N_MAX];
static int n_options;
static atomic_int table_state; /* 0 not built, 1 building, 2 built */

static const ml_model_option *find_in(const char *name, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(options[i].name, name)) return &options[i];
    return NULL;
}

static void build_table(void) {
    int n = 0, slot = 0;
    for (int i = 0; i < N_COMMON; i++) options[n++] = common[i];
    for (int m = 0; m < ml_mixer_count(); m++) {
        const ml_mixer_type *t = ml_mixer_at(m);
        for (int k = 0; k < ML_MIXER_MAX_OPTIONS && t->options[k].name; k++) {
            if (find_in(t->options[k].name, n)) continue; /* shared with an earlier mixer: one slot */
            if (slot == ML_MIXER_OPTION_SLOTS) {
                fprintf(stderr, "mechlab: more than %d mixer options: raise ML_MIXER_OPTION_SLOTS (nn/model.h)\n",
                        ML_MIXER_OPTION_SLOTS);
                abort();
            }
            options[n] = t->options[k];
            options[n].mixer = true, options[n].slot = slot++;
            n++;
        }
    }
    n_options = n;
}

static void ensure_table(void) {
    if (atomic_load(&table_state) == 2) return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&table_state, &expected, 1)) {
        build_table();
        atomic_store(&table_state, 2);
    }
    while (atomic_load(&table_state) != 2) {
    }
}

int ml_model_option_count(void) {
    ensure_table();
    return n_options;
}

const ml_model_option *ml_model_option_at(int i) {
    ensure_table();
    return i >= 0 && i < n_options ? &options[i] : NULL;
}

const ml_model_option *ml_model_option_find(const char *key) {
    ensure_table();
    return find_in(key, n_options);
}

int64_t ml_option_get(const ml_model_config *c, const ml_model_option *o) {
    if (o->mixer) return c->mixer_opt[o->slot];
    const char *p = (const char *)c + o->offset;
    if (o->type == ML_OPT_INT) return *(const int *)p;
    if (o->type == ML_OPT_BOOL) return *(const bool *)p;
    if (o->type == ML_OPT_U64) return (int64_t) * (const uint64_t *)p;
    return 0;
}

void ml_option_set(ml_model_config *c, const ml_model_option *o, int64_t v) {
    if (o->mixer) {
        c->mixer_opt[o->slot] = o->type == ML_OPT_BOOL ? v != 0 : v;
        return;
    }
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
    ensure_table();
    for (int i = 0; i < n_options; i++)
        if (options[i].type == ML_OPT_STRING) ml_option_set_str(cfg, &options[i], options[i].str_def);
        else ml_option_set(cfg, &options[i], options[i].def);
    if (arch) snprintf(cfg->arch, sizeof cfg->arch, "%s", arch);
}

static bool declares(const ml_mixer_type *t, const char *name) {
    for (int i = 0; t && i < ML_MIXER_MAX_OPTIONS && t->options[i].name; i++)
        if (!strcmp(t->options[i].name, name)) return true;
    return false;
}

bool ml_mixer_reads(const ml_mixer_type *t, const ml_model_option *o) {
    return o->common || declares(t, o->name) || declares(t->even_layers, o->name);
}

static const ml_model_option *mixer_option(const char *name) {
    const ml_model_option *o = ml_model_option_find(name);
    if (!o || !o->mixer) {
        fprintf(stderr, "mechlab: no mixer declares an option '%s'\n", name);
        abort();
    }
    return o;
}

int64_t ml_mixer_opt(const ml_model_config *c, const char *name) { return c->mixer_opt[mixer_option(name)->slot]; }

void ml_mixer_opt_set(ml_model_config *c, const char *name, int64_t v) { ml_option_set(c, mixer_option(name), v); }

ml_status ml_model_config_check_ranges(const ml_model_config *c) {
    ensure_table();
    for (int i = 0; i < n_options; i++) {
        const ml_model_option *o = &options[i];
        if (o->type != ML_OPT_INT) continue;
        int64_t v = ml_option_get(c, o);
        if (v < o->lo || v > o->hi)
            return ml_fail(ML_ERR_ARG, "model: option '%s': expected an integer in [%d, %d], got %d", o->name, (int)o->lo,
                           (int)o->hi, (int)v);
    }
    return ML_OK;
}
