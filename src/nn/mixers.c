/* The mixer registry: architecture name -> mixer of each layer (architectures.md §2.6). */
#include <string.h>

#include "nn/nn.h"

static const ml_mixer_type *const registry[] = {&ml_mixer_attention, NULL};
static const char *const names[] = {"attention", NULL};

const char *const *ml_mixer_names(void) { return names; }

const ml_mixer_type *ml_mixer_find(const char *arch) {
    for (int i = 0; registry[i]; i++)
        if (!strcmp(registry[i]->name, arch)) return registry[i];
    return NULL;
}

const ml_mixer_type *ml_mixer_for_layer(const ml_model_config *cfg, int layer) {
    (void)layer;
    return ml_mixer_find(cfg->arch);
}

bool ml_at_site(ml_run *run, int layer, const char *name, ml_tensor **x) {
    ml_tensor *y = ml_site(run, layer, name, *x);
    ml_release(*x);
    *x = y;
    return y != NULL;
}
