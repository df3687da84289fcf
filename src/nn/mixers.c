/* The mixer registry: every architecture, listed once (docs/mixers.md, "Layer choices and variants"). Adding a mixer
 * adds its descriptor (defined at the end of its file mixer_X.c) to the two lists below. */
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

const ml_mixer_type *ml_mixer_find(const char *arch) {
    for (int i = 0; i < N_MIXERS; i++)
        if (!strcmp(registry[i]->name, arch)) return registry[i];
    return NULL;
}

void ml_mixer_resolve_alias(ml_model_config *cfg) {
    for (int i = 0; i < N_MIXERS; i++)
        for (int a = 0; a < ML_MIXER_MAX_ALIASES && registry[i]->aliases[a].name; a++)
            if (!strcmp(registry[i]->aliases[a].name, cfg->arch)) {
                strcpy(cfg->arch, registry[i]->name); /* no longer than the alias */
                registry[i]->aliases[a].apply(cfg);
                return;
            }
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
