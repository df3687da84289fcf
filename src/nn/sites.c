/* Site names: see sites.h. */
#include "nn/sites.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"

/* The table of docs/interventions.md, "TransformerLens names": hook name, get_act_name's short
 * name (NULL: none) and mechlab's component. A name listed twice stands for the first component
 * a layer has: attention's per-head sites, else the flat ones of the mixers without heads. */
static const struct {
    const char *tl, *tl_short, *site;
} tl_names[] = {
    {"hook_resid_pre", "resid_pre", "block_input"},
    {"ln1.hook_normalized", NULL, "attention_input"},
    {"hook_attn_out", "attn_out", "attention_output"},
    {"hook_resid_mid", "resid_mid", "resid_mid"},
    {"ln2.hook_normalized", NULL, "mlp_input"},
    {"hook_mlp_out", "mlp_out", "mlp_output"},
    {"hook_resid_post", "resid_post", "block_output"},
    {"attn.hook_q", "q", "mixer.head_q"},
    {"attn.hook_k", "k", "mixer.head_k"},
    {"attn.hook_v", "v", "mixer.head_v"},
    {"attn.hook_z", "z", "mixer.head_z"},
    {"attn.hook_result", "result", "mixer.head_result"},
    {"attn.hook_q", "q", "mixer.q"},
    {"attn.hook_k", "k", "mixer.k"},
    {"attn.hook_v", "v", "mixer.v"},
    {"attn.hook_z", "z", "mixer.ctx"},
    {"attn.hook_attn_scores", "attn_scores", "mixer.scores"},
    {"attn.hook_pattern", "pattern", "mixer.pattern"},
    {"mlp.hook_pre", "pre", "mlp.hidden_pre"},
    {"mlp.hook_post", "post", "mlp.hidden_post"},
};
enum { N_TL = sizeof tl_names / sizeof tl_names[0] };

void ml_site_format(char *buf, size_t n, int layer, const char *component) {
    snprintf(buf, n, "blocks.%d.%s", layer, component);
}

void ml_site_fullname(const ml_model *m, int site, char *buf, size_t n) {
    ml_site_format(buf, n, m->site_layer[site], m->sites[site].name);
}

const char *ml_site_split(const char *name, int *layer) {
    if (strncmp(name, "blocks.", 7)) return NULL;
    char *end;
    long l = strtol(name + 7, &end, 10);
    if (end == name + 7 || *end != '.' || l < 0 || l > 1000000) return NULL;
    *layer = (int)l;
    return end + 1;
}

const char *ml_site_component_at(const char *name, int k) {
    for (int i = 0; i < N_TL; i++)
        if ((!strcmp(name, tl_names[i].tl) || (tl_names[i].tl_short && !strcmp(name, tl_names[i].tl_short))) && k-- == 0)
            return tl_names[i].site;
    return NULL;
}

const char *ml_site_component(const char *name) {
    const char *c = ml_site_component_at(name, 0);
    return c ? c : name;
}

const char *ml_site_tl_name(const char *component) {
    for (int i = 0; i < N_TL; i++)
        if (!strcmp(component, tl_names[i].site)) return tl_names[i].tl;
    return NULL;
}

const char *ml_site_canonical(const char *name, char *buf, size_t n) {
    int layer;
    const char *rest = ml_site_split(name, &layer);
    if (!rest) return name;
    ml_site_format(buf, n, layer, ml_site_component(rest));
    return buf;
}

int ml_site_lookup(const ml_model *m, int layer, const char *component) {
    if (layer < 0 || layer >= m->cfg.n_layers) return -1;
    for (int i = m->layers[layer].site_first; i < m->layers[layer].site_end; i++)
        if (!strcmp(m->sites[i].name, component)) return i;
    return -1;
}

int ml_site_find(const ml_model *m, int layer, const char *name) {
    int s = ml_site_lookup(m, layer, name);
    const char *c;
    for (int k = 0; s < 0 && (c = ml_site_component_at(name, k)); k++) s = ml_site_lookup(m, layer, c);
    return s;
}

int ml_site_parse(const ml_model *m, const char *full) {
    int layer;
    const char *rest = ml_site_split(full, &layer);
    return rest ? ml_site_lookup(m, layer, rest) : -1;
}

int ml_site_resolve(const ml_model *m, const char *name) {
    int layer;
    const char *rest = ml_site_split(name, &layer);
    return rest ? ml_site_find(m, layer, rest) : -1;
}

int ml_site_grid(const ml_model *m, const int *layers, int nl, const char *const *components, int nc, int *out,
                 int *missing) {
    int n = 0;
    if (missing) *missing = -1;
    for (int i = 0; i < nl; i++)
        for (int c = 0; c < nc; c++) {
            int s = ml_site_find(m, layers[i], components[c]);
            if (s >= 0) out[n++] = s;
        }
    for (int c = 0; missing && *missing < 0 && c < nc; c++) {
        bool found = false;
        for (int i = 0; i < nl && !found; i++) found = ml_site_find(m, layers[i], components[c]) >= 0;
        if (!found) *missing = c;
    }
    return n;
}

/* lit is a whole run of name's dot-separated parts, the last one maybe without "hook_". */
static bool run_of_parts(const char *name, const char *lit) {
    char n[ML_SITE_NAME_MAX + 2], l[ML_SITE_NAME_MAX + 2];
    if (!*lit || snprintf(n, sizeof n, ".%s.", name) >= (int)sizeof n || snprintf(l, sizeof l, ".%s.", lit) >= (int)sizeof l)
        return false;
    if (strstr(n, l)) return true;
    char *last = strrchr(n, '.'); /* the closing dot; the last part starts after the one before */
    *last = 0;
    last = strrchr(n, '.') + 1;
    if (strncmp(last, "hook_", 5)) return false;
    memmove(last, last + 5, strlen(last + 5) + 1);
    strcat(n, ".");
    return strstr(n, l) != NULL;
}

bool ml_site_tl_spelling(const char *name, char *buf, size_t n) {
    int layer;
    const char *rest = ml_site_split(name, &layer), *tl = rest ? ml_site_tl_name(rest) : NULL;
    if (tl) ml_site_format(buf, n, layer, tl);
    return tl != NULL;
}

bool ml_site_literal_match(const char *name, const char *lit) {
    char buf[ML_SITE_NAME_MAX];
    if (run_of_parts(name, lit) || !strcmp(name, ml_site_canonical(lit, buf, sizeof buf))) return true;
    return ml_site_tl_spelling(name, buf, sizeof buf) && run_of_parts(buf, lit);
}

int ml_model_add_mixer_site(ml_model *m, int layer, const char *path, int ndim, const int64_t *shape) {
    char site[sizeof m->sites[0].name];
    if (snprintf(site, sizeof site, "mixer.%s", path) >= (int)sizeof site) {
        ml_fail(ML_ERR_ARG, "site name 'mixer.%s' is longer than %d bytes", path, (int)sizeof site - 1);
        return -1;
    }
    return ml_model_add_site(m, layer, site, ndim, shape);
}
