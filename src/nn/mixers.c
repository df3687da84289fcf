/* The mixer registry: architecture name -> mixer of each layer (architectures.md §2.6). */
#include <string.h>

#include "nn/nn.h"

static const ml_mixer_type *const registry[] = {&ml_mixer_attention, &ml_mixer_base_conv, &ml_mixer_based,
                                                &ml_mixer_h3,        &ml_mixer_hyena,     &ml_mixer_mamba,
                                                &ml_mixer_delta_net, NULL};
static const char *const names[] = {"attention", "base_conv", "based", "h3", "hyena", "mamba", "delta_net", NULL};

const char *const *ml_mixer_names(void) { return names; }

const ml_mixer_type *ml_mixer_find(const char *arch) {
    for (int i = 0; registry[i]; i++)
        if (!strcmp(registry[i]->name, arch)) return registry[i];
    return NULL;
}

/* Hybrid(configs=[BaseConv, Based]) picks configs[layer % 2]; every other arch is one mixer. */
const ml_mixer_type *ml_mixer_for_layer(const ml_model_config *cfg, int layer) {
    if (!strcmp(cfg->arch, "based")) return layer % 2 == 0 ? &ml_mixer_base_conv : &ml_mixer_based;
    return ml_mixer_find(cfg->arch);
}

/* BaseConv kernel of layer l: "base_conv" passes kernel_size=[3, −1, 3, −1] (entry l; −1 = the
 * implicit long conv), "based" a short 3 in its BaseConv layers; d_conv overrides both (for every
 * layer), long_only makes every BaseConv long. */
int ml_base_conv_kernel(const ml_model_config *cfg, int layer) {
    if (cfg->long_only) return -1;
    if (cfg->d_conv >= 0) return cfg->d_conv;
    if (!strcmp(cfg->arch, "based")) return 3;
    return layer % 2 == 0 ? 3 : -1;
}

/* Mamba's conv width: d_conv overrides the default 4; mamba_without_conv (no_conv) gets no
 * d_conv and builds the default width-4 conv it never uses; d_conv 0 means the same variant. */
int ml_mamba_conv_width(const ml_model_config *cfg, bool *used) {
    bool no = cfg->no_conv || cfg->d_conv == 0;
    *used = !no;
    return no || cfg->d_conv < 0 ? 4 : cfg->d_conv;
}

bool ml_at_site(ml_run *run, int layer, const char *name, ml_tensor **x) {
    ml_tensor *y = ml_site(run, layer, name, *x);
    ml_release(*x);
    *x = y;
    return y != NULL;
}
