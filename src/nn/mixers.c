/* The mixer registry: every architecture, listed once (docs/mixers.md, "Layer choices and variants"). Adding a mixer
 * adds its descriptor (defined at the end of its file mixer_X.c) to the two lists below. A host adds mixers at run
 * time (ml_mixer_register: a mixer written in Lua, src/lua/mixer.c); the model builder finds both kinds by name. */
#include <ctype.h>
#include <string.h>

#include "nn/nn.h"

extern const ml_mixer_type ml_mixer_attention, ml_mixer_base_conv, ml_mixer_based, ml_mixer_h3, ml_mixer_hyena,
    ml_mixer_mamba, ml_mixer_delta_net;

static const ml_mixer_type *const registry[] = {&ml_mixer_attention, &ml_mixer_base_conv, &ml_mixer_based,
                                                &ml_mixer_h3,        &ml_mixer_hyena,     &ml_mixer_mamba,
                                                &ml_mixer_delta_net};
enum { N_MIXERS = sizeof registry / sizeof registry[0] };

int ml_mixer_count(void) { return N_MIXERS; }

const ml_mixer_type *ml_mixer_at(int i) { return i >= 0 && i < N_MIXERS ? registry[i] : NULL; }

enum { MAX_REGISTERED = 64 };
static const ml_mixer_type *registered[MAX_REGISTERED]; /* runtime mixers, in registration order */
static int n_registered;

int ml_mixer_registered_count(void) { return n_registered; }

const ml_mixer_type *ml_mixer_registered_at(int i) { return i >= 0 && i < n_registered ? registered[i] : NULL; }

const ml_mixer_type *ml_mixer_find(const char *arch) {
    for (int i = 0; i < N_MIXERS; i++)
        if (!strcmp(registry[i]->name, arch)) return registry[i];
    for (int i = 0; i < n_registered; i++)
        if (!strcmp(registered[i]->name, arch)) return registered[i];
    return NULL;
}

/* The built-in mixer owning alias `name`, or NULL (runtime mixers have no aliases). */
static const ml_mixer_type *alias_owner(const char *name, int *which) {
    for (int i = 0; i < N_MIXERS; i++)
        for (int a = 0; a < ML_MIXER_MAX_ALIASES && registry[i]->aliases[a].name; a++)
            if (!strcmp(registry[i]->aliases[a].name, name)) {
                *which = a;
                return registry[i];
            }
    return NULL;
}

void ml_mixer_resolve_alias(ml_model_config *cfg) {
    int a;
    const ml_mixer_type *t = alias_owner(cfg->arch, &a);
    if (!t) return;
    strcpy(cfg->arch, t->name); /* no longer than the alias */
    t->aliases[a].apply(cfg);
}

ml_status ml_mixer_register(const ml_mixer_type *t) {
    if (!t || !t->name || !t->build || !t->forward)
        return ml_fail(ML_ERR_ARG, "mixer_register: a mixer needs a name, build and forward");
    const char *n = t->name;
    if (t->options[0].name) /* the options table holds the built-in mixers' options only */
        return ml_fail(ML_ERR_ARG, "mixer_register: '%.64s' declares options; a runtime mixer keeps its options as JSON "
                                   "(ml_model_config.mixer_options)", n);
    size_t len = strlen(n);
    bool ok = len > 0 && len < sizeof((ml_model_config *)0)->arch && isalpha((unsigned char)n[0]);
    for (size_t i = 0; ok && i < len; i++) ok = isalnum((unsigned char)n[i]) || n[i] == '_';
    if (!ok)
        return ml_fail(ML_ERR_ARG, "mixer_register: name '%.64s' expected a letter then letters, digits or '_' (at most "
                                   "%zu bytes)", n, sizeof((ml_model_config *)0)->arch - 1);
    int a;
    const ml_mixer_type *owner = alias_owner(n, &a), *same = ml_mixer_find(n);
    if (owner) return ml_fail(ML_ERR_ARG, "mixer_register: name '%s' is an alias of the built-in mixer '%s'", n, owner->name);
    if (same && !same->user) return ml_fail(ML_ERR_ARG, "mixer_register: name '%s' is a built-in mixer", n);
    if (same) return ml_fail(ML_ERR_ARG, "mixer_register: a mixer named '%s' is registered already", n);
    if (n_registered == MAX_REGISTERED)
        return ml_fail(ML_ERR_ARG, "mixer_register: at most %d mixers can be registered", MAX_REGISTERED);
    registered[n_registered++] = t;
    return ML_OK;
}

bool ml_mixer_unregister(const ml_mixer_type *t) {
    for (int i = 0; i < n_registered; i++)
        if (registered[i] == t) {
            memmove(&registered[i], &registered[i + 1], sizeof registered[0] * (size_t)(n_registered - i - 1));
            n_registered--;
            return true;
        }
    return false;
}

const ml_mixer_type *ml_mixer_for_layer(const ml_model_config *cfg, int layer) {
    const ml_mixer_type *t = ml_mixer_find(cfg->arch);
    return t && t->even_layers && layer % 2 == 0 ? t->even_layers : t;
}

bool ml_at_site(const ml_model *m, ml_run *run, int site, ml_tensor **x) {
    ml_tensor *y = ml_site(m, run, site, *x);
    ml_release(*x);
    *x = y;
    return y != NULL;
}

bool ml_at_head_site(const ml_model *m, ml_run *run, int site, int64_t H, ml_tensor **x) {
    if (!ml_site_wanted(m, run, site)) return true;
    int64_t B = (*x)->shape[0], L = (*x)->shape[1], D = (*x)->shape[2];
    ml_tensor *h = ml_reshape(*x, 4, (int64_t[]){B, L, H, D / H});
    ml_release(*x);
    *x = NULL;
    if (!h || !ml_at_site(m, run, site, &h)) return ml_release(h), false;
    *x = ml_reshape(h, 3, (int64_t[]){B, L, D});
    ml_release(h);
    return *x != NULL;
}
